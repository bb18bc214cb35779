/*
 * kernels.h: the kernel table: per-row CPU functions, the CPU backend's
 * building blocks (src/backend/cpu/ call them; model code never does). Each ISA
 * (ref.c, x86_avx2.c, x86_avx512.c, arm_neon.c) fills one table in its own
 * file, compiled with its own flags. kernels_get() picks the best table the
 * CPU runs, once, overridable with HEARTH_ISA=ref|avx2|avx512|amx|neon.
 *
 * Matmul follows ggml's scheme: each weight type names the activation type
 * its dot product takes (vec_dot_type); an activation row is converted once
 * per matmul with that type's from_float, then dotted against every weight
 * row. Every fast entry is tested against the reference in
 * tests/unit/test_kernels.c.
 */
#ifndef HEARTH_KERNELS_H
#define HEARTH_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "util/dtype.h"

/*
 * A Q8_0 activation block's scale as a float and the sum of its 32 quants:
 * what every weight row's dot with the block needs beside the quants, taken
 * once per matmul instead of once per row.
 */
struct q8_0_sum {
    float d;
    int32_t sum;
};

/* out[i] for each of the n / 32 blocks of the Q8_0 row a. */
void q8_0_sums(const void *a, int64_t n, struct q8_0_sum *out);

struct type_kernels {
    /* Type activations are converted to before vec_dot; 0 (F32) for float types that take f32. */
    enum dtype vec_dot_type;
    /* y[0..n) = dequantized x (n elements, a multiple of the block). NULL: unsupported. */
    void (*to_float)(const void *x, float *y, int64_t n);
    /* Quantizes n floats into y (this type's layout). NULL: this type is never a target. */
    void (*from_float)(const float *x, void *y, int64_t n);
    /* *s = dot(w, a): w is n elements of this type, a is n elements of vec_dot_type. */
    void (*vec_dot)(int64_t n, float *s, const void *w, const void *a);
    /*
     * Eight weight rows (w, row_len bytes apart) against n_tok activation rows
     * (a, a_row bytes apart): s[t * s_stride + r] for r < 8, t < n_tok, each
     * bit-identical to vec_dot of that row and token. Loads each weight block
     * once for several tokens (prefill) and one activation for eight rows
     * (decode). as: for Q8_0 activations, each block's q8_0_sum, n / 32 per
     * token row, one row after another; NULL for other activation types.
     * NULL: matmul calls vec_dot row by row.
     */
    void (*gemm8)(int64_t n, const void *w, size_t row_len, const void *a, size_t a_row,
                  const struct q8_0_sum *as, int32_t n_tok, float *s, size_t s_stride);
    /*
     * An interleaved layout of eight rows that gemm8p reads as one stream:
     * pack8 rewrites rows (n elements each, row_len bytes apart) into dst,
     * 8 * row_len bytes. gemm8p is gemm8 over such a group, with the same
     * bits as vec_dot. Both NULL when the type has no packed form; a table
     * that offers them offers both, and every table offers the same layout.
     */
    void (*pack8)(const void *rows, size_t row_len, int64_t n, void *dst);
    void (*gemm8p)(int64_t n, const void *wp, const void *a, size_t a_row,
                   const struct q8_0_sum *as, int32_t n_tok, float *s, size_t s_stride);
    /*
     * gemm8p over two packed groups: s[t * s_stride + r] for r < 16, the
     * second group's rows as 8..15, each with gemm8p's bits. For tables
     * whose vectors hold sixteen lanes. The groups lie as pack16 says.
     * NULL: matmul calls gemm8p per group.
     */
    void (*gemm16p)(int64_t n, const void *wp, const void *a, size_t a_row,
                    const struct q8_0_sum *as, int32_t n_tok, float *s, size_t s_stride);
    /*
     * false: gemm16p reads two adjacent pack8 groups (the second starts
     * where the first ends), and matmul gives a token alone to gemm8p per
     * group. true: gemm16p reads the pair interleaved block by block, each
     * of pack8's blocks of the first group followed by the same block of
     * the second (kernels_pack16), one stream of sixteen rows however many
     * tokens: two streams a few KiB apart kept the memory stream and the
     * arithmetic of a few tokens from overlapping (bench-1b Q4_0 on Zen 5,
     * two tokens: 15 ms a pass over the weights, one stream 11, as a token
     * alone). The weights are then laid out so for every pair of groups,
     * a last odd group as pack8's, and only gemm16p reads the pairs.
     */
    bool pack16;
};

/*
 * Writes sixteen rows (n elements each, row_len bytes apart) of a type whose
 * table offers pack8 into the pack16 layout at dst (16 * row_len bytes).
 */
void kernels_pack16(const struct type_kernels *tk, enum dtype type, const void *rows,
                    size_t row_len, int64_t n, void *dst);

/* Keys and values of one KV head of one sequence, in the paged cache layout. */
struct attn_kv {
    const uint8_t *k, *v;  /* the layer's K / V pool, already offset to this KV head */
    const int32_t *blocks; /* the sequence's block table */
    size_t block_len;      /* bytes per block */
    size_t row_len;        /* bytes between consecutive tokens' rows */
    int32_t block_tokens;
    int f16;            /* rows are f16 bits (else f32); attn_rows and attn_rows_f16, whose
                           K and V have one type */
    enum dtype kt, vt;  /* K's and V's types, for attn_rows_quant */
    size_t v_block_len; /* V's block_len and row_len, for attn_rows_quant (K's above) */
    size_t v_row_len;
};

/* Address of token j's row in base (kv->k or kv->v) through the block table. */
static inline const uint8_t *attn_kv_row(const uint8_t *base, const struct attn_kv *kv, int32_t j)
{
    return base + (size_t)kv->blocks[j / kv->block_tokens] * kv->block_len +
           (size_t)(j % kv->block_tokens) * kv->row_len;
}

/* Address of token j's V row when V's rows have their own length (attn_rows_quant). */
static inline const uint8_t *attn_kv_vrow(const struct attn_kv *kv, int32_t j)
{
    return kv->v + (size_t)kv->blocks[j / kv->block_tokens] * kv->v_block_len +
           (size_t)(j % kv->block_tokens) * kv->v_row_len;
}

/* Tile of keys the attention kernels work in (llama.cpp's GGML_FA_TILE_KV). */
#define ATTN_TILE 64
/*
 * Query rows attn_rows_quant takes, and the fewest any table's attn_rows
 * or attn_rows_f16 takes; those take the table's attn_rows_lanes and
 * attn_rows_f16_lanes, at most ATTN_LANES_MAX. ATTN_SCRATCH: the floats of
 * scratch any of them needs.
 */
#define ATTN_LANES     8
#define ATTN_LANES_MAX 128
#define ATTN_SCRATCH(hd)                                                                           \
    ((size_t)(hd) * (2 * ATTN_TILE + 2 * ATTN_LANES_MAX) + ATTN_LANES_MAX * ATTN_TILE)

struct kernels {
    const char *name; /* "ref", "avx2", "avx512", "amx", "neon" */
    struct type_kernels type[DTYPE_COUNT];

    /* y = x / sqrt(mean(x^2) + eps) * w, n elements; y may alias x. */
    void (*rmsnorm)(float *y, const float *x, const float *w, int64_t n, float eps);
    /* y = silu(g) * u elementwise; y may alias g or u. */
    void (*silu_mul)(float *y, const float *g, const float *u, int64_t n);
    /*
     * y = gelu(g) * u elementwise (tanh GELU of g rounded to f16, looked up
     * as f16, as ggml's geglu); y may alias g or u.
     */
    void (*gelu_mul)(float *y, const float *g, const float *u, int64_t n);
    /* y[i] += alpha * x[i]. */
    void (*axpy_f32)(float *y, float alpha, const float *x, int64_t n);
    /* y[i] *= alpha. */
    void (*scale_f32)(float *y, float alpha, int64_t n);
    /* y[i] = fmaf(x[i], a, y[i]): one fused multiply-add each, as ggml_vec_mad_f32's lanes. */
    void (*mad_f32)(float *y, const float *x, float a, int64_t n);
    /*
     * sum of x[i] * y[i] in exactly ggml_vec_dot_f32_ref's order
     * (kernels/ggml_dot.h): the DeltaNet state's dots, which follow
     * llama.cpp's bits; a table's lanes only make it faster.
     */
    float (*dot_f32_ggml)(const float *x, const float *y, int64_t n);
    /*
     * Up to attn_rows_lanes query rows of one KV head: row r (q[r], written to
     * out[r]) attends to keys j0[r]..j1[r] inclusive; rows sharing a KV head
     * share the key and value loads. Each row is computed with llama.cpp's
     * tiled flash-attention arithmetic: tiles of ATTN_TILE keys aligned at
     * position 0, scores as a sequential fma over the head dimension, online
     * softmax per tile with ggml's vectorized expf, values accumulated by
     * sequential fma (ref_attn_row is the definition).
     * scratch holds ATTN_SCRATCH(hd) floats.
     */
    void (*attn_rows)(float *const *out, const float *const *q, int32_t nq, int32_t hd,
                      const struct attn_kv *kv, const int32_t *j0, const int32_t *j1, float scale,
                      float *scratch);
    /* The rows attn_rows takes: ATTN_LANES, or ATTN_LANES_MAX where one call shares each tile
     * of keys among several groups of rows. */
    int32_t attn_rows_lanes;
    /*
     * Up to attn_rows_f16_lanes query rows of one KV head over an f16 cache, row r
     * (q[r], out[r]) seeing keys j0[r]..j1[r], each with ggml's per-key
     * flash-attention arithmetic, which llama.cpp's CPU backend runs for
     * batches of fewer than ATTN_TILE rows (decode included) and whenever
     * the head dimension is not a multiple of 16: q rounded to f16, each
     * score ggml_vec_dot_f16 of f16 key and query, an online softmax key by
     * key with libm expf, values accumulated in f16 (each update rounded to
     * f16), then divided by the sum (ref_attn_row_f16, row by row, is the
     * definition). The rows share the key and value rows' conversions.
     * scratch holds ATTN_SCRATCH(hd) floats.
     */
    void (*attn_rows_f16)(float *const *out, const float *const *q, int32_t nq, int32_t hd,
                          const struct attn_kv *kv, const int32_t *j0, const int32_t *j1,
                          float scale, float *scratch);
    /* The rows attn_rows_f16 takes: ATTN_LANES, or 16 where a row is a vector lane. */
    int32_t attn_rows_f16_lanes;
    /*
     * attn_rows_f16 over nh KV heads of one sequence at once (nh 1, 2 or
     * 4; up to attn_rows_f16_lanes rows, hd a multiple of 16): row r reads
     * head r % nh, whose K and V rows lie head_off * (r % nh) bytes past
     * kv's, each row bit for bit ref_attn_row_f16 over its head. One token's
     * GQA groups of two or four heads fill the lanes one head's group of
     * eight or four leaves idle (decode). NULL: one head per call.
     */
    void (*attn_heads_f16)(float *const *out, const float *const *q, int32_t nq, int32_t nh,
                           int32_t hd, const struct attn_kv *kv, size_t head_off, const int32_t *j0,
                           const int32_t *j1, float scale, float *scratch);
    /*
     * y[i] = expf(x[i]) with the C library's bits, which the per-key
     * softmax above is defined by: where a table computes it in vector
     * lanes, test_kernels holds them to libm over a sample of every range.
     */
    void (*expf_libm)(const float *x, float *y, int64_t n);
    /* A row of f32 to f16 bits, for the KV cache. */
    void (*f32_to_f16)(const float *x, uint16_t *y, int64_t n);
    /*
     * The table's widest int8 dot instruction (vpdpbusd, or maddubs and
     * madd) back to back on independent accumulators, rounds times; returns
     * the operations done (two per multiply-add). What bench-engine reports
     * prefill against. NULL: the table has none.
     */
    double (*int8_probe)(int64_t rounds);
};

/*
 * Up to ATTN_LANES query rows of one KV head over a cache whose K and V
 * types differ or are quantized (K f16, f32, q8_0 or q4_0; V f16, f32 or
 * q8_0): llama.cpp's per-key flash attention, the path its CPU backend
 * always takes for such caches, composed of k's row operations. Row r's
 * query is converted once with K's vec_dot type's from_float (q8_0 for a
 * quantized K); each score is K's vec_dot times scale; the softmax goes key
 * by key with libm expf (a new maximum rescales the sum so far with
 * scale_f32); each value row is converted to f32 with V's to_float and
 * added with mad_f32, the sum rounded to f16 after every step when V is
 * f16 (ggml_vec_mad_f16 and ggml_vec_scale_f16); at the end it is divided
 * by the softmax sum. scratch holds ATTN_SCRATCH(hd) floats.
 */
void attn_rows_quant(const struct kernels *k, float *const *out, const float *const *q, int32_t nq,
                     int32_t hd, const struct attn_kv *kv, const int32_t *j0, const int32_t *j1,
                     float scale, float *scratch);

/* The reference table: portable scalar C, the definition every ISA is tested against. */
const struct kernels *kernels_ref(void);
/*
 * ISA tables; NULL when not compiled in. They do not ask the CPU: running one
 * the CPU lacks is SIGILL, so reach them through kernels_find or kernels_get.
 */
const struct kernels *kernels_avx2(void);
const struct kernels *kernels_avx512(void);
const struct kernels *kernels_amx(void);
const struct kernels *kernels_neon(void);

/*
 * The table named isa ("ref", "avx2", "avx512", "amx", "neon") if it is compiled in
 * and this CPU runs it, else NULL. Thread-safe.
 */
const struct kernels *kernels_find(const char *isa);

/*
 * The table to use: HEARTH_ISA if set (falls back to the best with a warning
 * on stderr when that ISA is unavailable), else the best the CPU supports.
 * Chosen once; thread-safe after the first call.
 */
const struct kernels *kernels_get(void);

#endif
