/*
 * x86_common.h: helpers the AVX2 and AVX-512 tables share (x86_avx2.c,
 * x86_avx512.c). Only AVX2, FMA and F16C instructions, so either file may
 * include it under its own flags.
 */
#ifndef HEARTH_X86_COMMON_H
#define HEARTH_X86_COMMON_H

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/ref.h"
#include "util/dtype_blocks.h"

static inline float hsum_ps(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s        = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s        = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline float half(uint16_t h)
{
    return _cvtsh_ss(h);
}

/*
 * Fetching a packed group's blocks ahead while a pass streams them in: the
 * distances measured best for the AVX2 gemv and gemm alike, and for the
 * AVX-512 passes, whose few tokens' compute otherwise did not overlap the
 * memory stream (4 tokens of bench-1b Q4_0 on 2 Zen 4 cores: 28 ms, 20 with
 * it; one alone 17). A packed Q4_0 block of eight rows (gl = 144 bytes)
 * spans at most three lines; a Q4_K superblock eighteen. always_inline:
 * inlined into the AVX-512 Q4_0 pass (itself always_inline), gcc 12 at -O2
 * dropped the plain inline helper's fetches altogether.
 */
#define Q40P_AHEAD 16
#define Q4KP_AHEAD 2

static inline __attribute__((always_inline)) void q40p_prefetch(const uint8_t *g, size_t gl)
{
    _mm_prefetch((const char *)(g + Q40P_AHEAD * gl), _MM_HINT_T0);
    _mm_prefetch((const char *)(g + Q40P_AHEAD * gl + 64), _MM_HINT_T0);
    _mm_prefetch((const char *)(g + Q40P_AHEAD * gl + gl - 1), _MM_HINT_T0);
}

/* q40p_prefetch for a pack16 pair (kernels.h): a block of sixteen rows, 288 bytes, spans five
 * lines at most. */
static inline __attribute__((always_inline)) void q40p16_prefetch(const uint8_t *g)
{
    const size_t gb = 16 * sizeof(struct block_q4_0);
#pragma GCC unroll 5
    for (size_t o = 0; o < gb; o += 64)
        _mm_prefetch((const char *)(g + Q40P_AHEAD * gb + o), _MM_HINT_T0);
}

static inline __attribute__((always_inline)) void q4kp_prefetch(const uint8_t *p, size_t gl)
{
    for (size_t o = 0; o < gl; o += 64)
        _mm_prefetch((const char *)(p + Q4KP_AHEAD * gl + o), _MM_HINT_T0);
}

/* Four activation quants broadcast to every 32-bit lane. */
static inline __m256i bcast4(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, sizeof v);
    return _mm256_set1_epi32(v);
}

/* Blocks whose scale products one pass of a Q8_0 gemm tabulates (8 KB of stack). */
#define Q80_CHUNK 64
/* Blocks per row whose scales a Q8_0 gemm converts once per call (16 KB of stack). */
#define Q80_DW_MAX 512

/* dw[b][r] = row r's scale of block b0 + b as a float, for bn blocks. */
static inline void q80_scales(const void *w, size_t row_len, int64_t b0, int64_t bn, float (*dw)[8])
{
    for (int r = 0; r < 8; r++) {
        const struct block_q8_0 *x =
            (const struct block_q8_0 *)((const uint8_t *)w + r * row_len) + b0;
        for (int64_t b = 0; b < bn; b++)
            dw[b][r] = half(x[b].d);
    }
}

/*
 * Q8_0 rows and block sums of n tokens from t0 (n the arrays' length), repeating t0 past the tn
 * the batch has (computed, never stored).
 */
static inline void q80_tokens(const void *a, size_t a_row, const struct q8_0_sum *as, int64_t nb,
                              int32_t t0, int32_t tn, int32_t n, const struct block_q8_0 **y,
                              const struct q8_0_sum **ys)
{
    for (int32_t tt = 0; tt < n; tt++) {
        const int32_t t = t0 + (tt < tn ? tt : 0);
        y[tt]           = (const struct block_q8_0 *)((const uint8_t *)a + (size_t)t * a_row);
        ys[tt]          = as + (size_t)t * nb;
    }
}

/*
 * dd[b][tt][r] = d_w * d_a for blocks b0..b0+bn of eight rows and four
 * tokens: four multiplies per block. dw_all holds every block's row scales
 * when nb <= Q80_DW_MAX (q80_scales, once per call); else this chunk's are
 * converted into it here.
 */
static inline void q80_products(const void *w, size_t row_len, int64_t nb, int64_t b0, int64_t bn,
                                const struct q8_0_sum *const ys[4], float (*dw_all)[8],
                                float (*dd)[4][8])
{
    const float(*dw8)[8] = dw_all + b0;
    if (nb > Q80_DW_MAX) {
        q80_scales(w, row_len, b0, bn, dw_all);
        dw8 = dw_all;
    }
    for (int64_t b = 0; b < bn; b++) {
        const __m256 dw = _mm256_loadu_ps(dw8[b]);
        for (int tt = 0; tt < 4; tt++)
            _mm256_storeu_ps(dd[b][tt], _mm256_mul_ps(dw, _mm256_broadcast_ss(&ys[tt][b0 + b].d)));
    }
}

/* A Q8_K block's activation sums per 32-element sub-block (bsums[2j] + bsums[2j+1]), as int16. */
static inline __m128i q8k_bsum_pairs(const struct block_q8_K *y)
{
    const __m256i bs = _mm256_loadu_si256((const __m256i *)y->bsums);
    return _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
}

/*
 * The 6-bit scale and min entries of a packed Q4_K superblock
 * (ref_pack8_q4_k): e[0], e[1] the scales of sub-blocks 0..3 and 4..7,
 * e[2], e[3] the mins, entry 8j + r for sub-block j of row r.
 */
static inline void q4kp_entries(const uint8_t *p, uint8_t e[4][32])
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(3);
    const __m256i ls = _mm256_loadu_si256((const __m256i *)(p + 32));
    const __m256i lm = _mm256_loadu_si256((const __m256i *)(p + 64));
    const __m256i h  = _mm256_loadu_si256((const __m256i *)(p + 96));
    _mm256_storeu_si256(
        (__m256i *)e[0],
        _mm256_or_si256(_mm256_and_si256(ls, m4), _mm256_slli_epi16(_mm256_and_si256(h, m3), 4)));
    _mm256_storeu_si256(
        (__m256i *)e[1],
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ls, 4), m4),
                        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), m3), 4)));
    _mm256_storeu_si256(
        (__m256i *)e[2],
        _mm256_or_si256(_mm256_and_si256(lm, m4),
                        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), m3), 4)));
    _mm256_storeu_si256(
        (__m256i *)e[3],
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lm, 4), m4),
                        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), m3), 4)));
}

/* Eight entries from 8j (j = sub-block) of e[i], a lane per row. */
static inline __m256i q4kp_entry(const uint8_t e[4][32], int i, int j)
{
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(e[i + j / 4] + 8 * (j % 4))));
}

/* Sub-block j's scale in each row's lane twice (an int16 pair, for madd). */
static inline __m256i q4kp_sc(const uint8_t e[4][32], int j)
{
    const __m256i v = q4kp_entry(e, 0, j);
    return _mm256_or_si256(v, _mm256_slli_epi32(v, 16));
}

/* The mins of sub-blocks 2g and 2g+1 as an int16 pair in each row's lane. */
static inline __m256i q4kp_mn(const uint8_t e[4][32], int g)
{
    return _mm256_or_si256(q4kp_entry(e, 2, 2 * g),
                           _mm256_slli_epi32(q4kp_entry(e, 2, 2 * g + 1), 16));
}

/* All of a superblock's scale pairs sc[j] and min pairs mn[g], for several tokens. */
static inline void q4kp_scales(const uint8_t *p, __m256i sc[8], __m256i mn[4])
{
    uint8_t e[4][32];
    q4kp_entries(p, e);
    for (int j = 0; j < 8; j++)
        sc[j] = q4kp_sc(e, j);
    for (int g = 0; g < 4; g++)
        mn[g] = q4kp_mn(e, g);
}

/*
 * 2^(i/32) as doubles, less i << 47 so that adding k << 47 puts 2^(k/32)'s
 * exponent in place: the table of glibc's expf (the double nearest each power),
 * for the expf_libm lanes of the AVX2 and AVX-512 tables.
 */
/* clang-format off */
static const uint64_t exp2_32[32] = {
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51,
    0x3fef72b83c7d517b, 0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1,
    0x3fef06fe0a31b715, 0x3feef1a7373aa9cb, 0x3feedea64c123422, 0x3feece086061892d,
    0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429, 0x3feea47eb03a5585,
    0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d,
    0x3feee89f995ad3ad, 0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069,
    0x3fef5818dcfba487, 0x3fef7c97337b9b5f, 0x3fefa4afa2a490da, 0x3fefd0765b6e4540};

/* ---------------------------------------------------------- attention */

/*
 * One group of query rows of the AVX2 and AVX-512 attn_rows kernels, a
 * vector lane each (w: eight or sixteen lanes): each lane's keys and first
 * tile (idle lanes see none), the keys any lane sees, the queries
 * transposed, the outputs, a tile's probabilities, and the running maxima
 * and sums of the online softmax.
 */
struct attn_group {
    int32_t nq, lo, hi;             /* rows; the first and last key any of them sees */
    int32_t jl[16], jh[16], tl[16]; /* each lane's keys and first tile */
    float *qt, *acc, *p;            /* [hd][w], [w][hd], [ATTN_TILE][w] */
    float M[16], T[16];             /* the running maximum; this tile's */
    float S[16];
};
/* clang-format on */

/* Floats of scratch a group of w lanes takes (ATTN_SCRATCH counts them for every lane). */
static inline size_t attn_group_floats(int32_t w, int32_t hd)
{
    return (size_t)w * (2 * (size_t)hd + ATTN_TILE);
}

/* Group g of w lanes over rows q[0..nq) (nq <= w), its arrays in mem. */
static inline void attn_group_init(struct attn_group *g, int32_t w, const float *const *q,
                                   int32_t nq, int32_t hd, const int32_t *j0, const int32_t *j1,
                                   float *mem)
{
    g->nq  = nq;
    g->lo  = INT32_MAX;
    g->hi  = INT32_MIN;
    g->qt  = mem;
    g->acc = g->qt + (size_t)w * hd;
    g->p   = g->acc + (size_t)w * hd;
    for (int32_t r = 0; r < w; r++) {
        g->jl[r] = r < nq ? j0[r] : INT32_MAX;
        g->jh[r] = r < nq ? j1[r] : INT32_MIN;
        g->tl[r] = r < nq ? j0[r] - j0[r] % ATTN_TILE : INT32_MAX;
        g->lo    = g->jl[r] < g->lo ? g->jl[r] : g->lo;
        g->hi    = g->jh[r] > g->hi ? g->jh[r] : g->hi;
        g->M[r]  = -INFINITY;
        g->S[r]  = 0;
    }
    for (int32_t d = 0; d < hd; d++)
        for (int32_t r = 0; r < w; r++)
            g->qt[d * w + r] = r < nq ? q[r][d] : 0.0f;
    memset(g->acc, 0, (size_t)w * hd * sizeof(float));
}

/*
 * The groups of gs[0..ng) that visit the tile of keys from t0, as each
 * would alone (from its first key's tile to its last key), into vis;
 * [*c0, *c1] the tile's keys any of them sees. Returns how many.
 */
static inline int attn_groups_visiting(struct attn_group *gs, int32_t ng, int32_t t0,
                                       struct attn_group **vis, int32_t *c0, int32_t *c1)
{
    int nv = 0;
    *c0    = ATTN_TILE;
    *c1    = -1;
    for (int32_t k = 0; k < ng; k++)
        if (t0 >= gs[k].lo - gs[k].lo % ATTN_TILE && t0 <= gs[k].hi) {
            vis[nv++]        = &gs[k];
            const int32_t a0 = gs[k].lo > t0 ? gs[k].lo - t0 : 0;
            const int32_t a1 = gs[k].hi - t0 < ATTN_TILE - 1 ? gs[k].hi - t0 : ATTN_TILE - 1;
            *c0              = a0 < *c0 ? a0 : *c0;
            *c1              = a1 > *c1 ? a1 : *c1;
        }
    return nv;
}

/*
 * Key j's K and V rows fetched toward L1 while the tile before them is
 * computed: a long context's keys come from L3 or memory, a few hundred
 * bytes per row.
 */
static inline void attn_prefetch_kv(const struct attn_kv *kv, int32_t j, int32_t hd)
{
    const uint8_t *nk = attn_kv_row(kv->k, kv, j), *nv = attn_kv_row(kv->v, kv, j);
    for (size_t o = 0; o < (size_t)hd * (kv->f16 ? 2 : 4); o += 64) {
        _mm_prefetch((const char *)nk + o, _MM_HINT_T0);
        _mm_prefetch((const char *)nv + o, _MM_HINT_T0);
    }
}

#endif
