/*
 * x86_avx512.c: the kernel table for x86-64 with AVX-512 F, BW, VL, DQ and
 * VNNI (Ice Lake and later, Zen 4). Compiled alone with those -m flags; the
 * dispatcher checks the CPU for every one of them before using this table.
 *
 * It is the AVX2 table with the prefill gemms of the benchmark types
 * replaced: VNNI's vpdpbusd sums four u8 x s8 products into a 32-bit lane
 * in one instruction, where AVX2 needs maddubs, an int16 add and madd. The
 * integer sums are exact either way, and the float steps around them are
 * the AVX2 kernels' own, so every result keeps the reference's bits. The
 * packed Q4_0 and Q4_K weights lie in pack16 pairs (kernels.h), which the
 * 512-bit gemm16p reads as one stream for any number of tokens, decode
 * included; elsewhere the 256-bit forms (VL) serve eight rows as the AVX2
 * kernels do, and decode of the other types stays on the AVX2 kernels.
 *
 * `make avx512-test` builds this file against SIMDe's portable AVX-512
 * (HEARTH_AVX512_SIMDE) and runs the kernel tests on an AVX2 host.
 */
#include "kernels/ref.h"

#include <stddef.h>

#if defined(__x86_64__) &&                                                                         \
    (defined(HEARTH_AVX512_SIMDE) || (defined(__AVX512F__) && defined(__AVX512BW__) &&             \
                                      defined(__AVX512VL__) && defined(__AVX512VNNI__)))

#include "kernels/x86_avx512_common.h"

#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "kernels/x86_common.h"
#include "util/dtype_blocks.h"

/* Lane i of the result: src + sum over j < 4 of u[4i + j] (unsigned) * s[4i + j] (signed). */
static inline __m256i dpbusd(__m256i src, __m256i u, __m256i s)
{
    return _mm256_dpbusd_epi32(src, u, s);
}

/* ---------------------------------------------------------------- Q8_0 */

/*
 * Q8_0 x Q8_0 for eight rows by up to four tokens, with avx2_gemm8_q8_0's
 * arithmetic: each (row, token) keeps eight tinyBLAS lanes of
 * fma(d_w * d_a, float(four-product sum), acc), the products from a
 * per-chunk table, and sums them with hsum_ps at the end. A lane's
 * four-product sum is taken as sum((a + 128) * w) - 128 * sum(w): a + 128
 * is a's byte with its top bit flipped, unsigned as vpdpbusd wants, and the
 * second term, one per row and block, seeds the accumulator.
 *
 * In 512 bits a register holds two rows' eight lanes interleaved (row r in
 * the even lanes, r + 1 in the odd): the pair's weights are merged
 * four bytes at a time with one vpermt2d, the token's quants doubled the
 * same way once per block for all pairs, and the two rows' scale products,
 * adjacent in the table, arrive as one 64-bit broadcast. Each lane's chain
 * is the 256-bit kernel's, so the bits are too.
 */
static void avx512_gemm8_q8_0(int64_t n, const void *w, size_t row_len, const void *a, size_t a_row,
                              const struct q8_0_sum *as, int32_t n_tok, float *s, size_t s_stride)
{
    const int64_t nb   = n / QK8_0;
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    /* a pair's rows four bytes at a time; a token's four-byte groups each twice */
    const __m512i merge = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i twice = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    const __m512i split = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    float dw_all[Q80_DW_MAX][8];
    for (int32_t t0 = 0; t0 < n_tok; t0 += 4) {
        const int32_t tn = n_tok - t0 < 4 ? n_tok - t0 : 4;
        const struct block_q8_0 *y[4];
        const struct q8_0_sum *ys[4];
        q80_tokens(a, a_row, as, nb, t0, tn, 4, y, ys);
        if (t0 == 0 && nb <= Q80_DW_MAX)
            q80_scales(w, row_len, 0, nb, dw_all);
        __m512 c[4][4]; /* [pair][token] */
        for (int p = 0; p < 4; p++)
            for (int tt = 0; tt < 4; tt++)
                c[p][tt] = _mm512_setzero_ps();
        for (int64_t b0 = 0; b0 < nb; b0 += Q80_CHUNK) {
            const int64_t bn = nb - b0 < Q80_CHUNK ? nb - b0 : Q80_CHUNK;
            float dd[Q80_CHUNK][4][8]; /* [block][token][row] = d_w * d_a */
            q80_products(w, row_len, nb, b0, bn, ys, dw_all, dd);
            const struct block_q8_0 *x[8];
            for (int r = 0; r < 8; r++)
                x[r] = (const struct block_q8_0 *)((const uint8_t *)w + r * row_len) + b0;
            for (int64_t b = 0; b < bn; b++) {
                __m512i au[4];
#pragma GCC unroll 4
                for (int tt = 0; tt < 4; tt++)
                    au[tt] = _mm512_xor_si512(
                        _mm512_permutexvar_epi32(twice, _mm512_castsi256_si512(_mm256_loadu_si256(
                                                            (const __m256i *)y[tt][b0 + b].qs))),
                        flip);
#pragma GCC unroll 4
                for (int p = 0; p < 4; p++) {
                    const __m512i q = _mm512_permutex2var_epi32(
                        _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)x[2 * p][b].qs)),
                        merge,
                        _mm512_castsi256_si512(
                            _mm256_loadu_si256((const __m256i *)x[2 * p + 1][b].qs)));
                    const __m512i off =
                        _mm512_sub_epi32(_mm512_setzero_si512(),
                                         _mm512_dpbusd_epi32(_mm512_setzero_si512(), flip, q));
#pragma GCC unroll 4
                    for (int tt = 0; tt < 4; tt++) {
                        double d2;
                        memcpy(&d2, &dd[b][tt][2 * p], sizeof d2);
                        c[p][tt] = _mm512_fmadd_ps(
                            _mm512_castpd_ps(_mm512_set1_pd(d2)),
                            _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(off, au[tt], q)), c[p][tt]);
                    }
                }
            }
        }
        for (int32_t tt = 0; tt < tn; tt++)
            for (int p = 0; p < 4; p++) {
                const __m512 v                          = _mm512_permutexvar_ps(split, c[p][tt]);
                s[(size_t)(t0 + tt) * s_stride + 2 * p] = hsum_ps(_mm512_castps512_ps256(v));
                s[(size_t)(t0 + tt) * s_stride + 2 * p + 1] = hsum_ps(hi256_ps(v));
            }
    }
}

/* ---------------------------------------------------------------- packed Q4_0 */

/*
 * The eight rows' exact block sums against one activation block (a lane per
 * row, as avx2's q4p_block): the low nibbles of chunk k meet activations
 * 4k..4k+3, the high ones 16 + 4k.., and the seed takes the nibbles' offset
 * of 8 off. Two chains halve the dependent vpdpbusd latency.
 */
static inline __m256i q4p_block(const __m256i lo[4], const __m256i hi[4], const int8_t *qa,
                                int32_t sum)
{
    __m256i s0 = _mm256_set1_epi32(-8 * sum), s1 = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        s0 = dpbusd(s0, lo[k], bcast4(qa + 4 * k));
        s1 = dpbusd(s1, hi[k], bcast4(qa + 16 + 4 * k));
    }
    return _mm256_add_epi32(s0, s1);
}

/*
 * One pass over a group's blocks for NT tokens (4: a quad, 2: a pair; a
 * constant where it is inlined), each chain acc = fma(float(block sum),
 * d_w * d_a, acc) in block order as in the AVX2 kernel. stream: the pass
 * reads the rows from memory (the first over the group; later passes find
 * them in L1), so it fetches ahead (q40p_prefetch).
 */
static inline __attribute__((always_inline)) void
q4p512_pass(int64_t nb, const uint8_t *wp, const struct block_q8_0 *const y[4],
            const struct q8_0_sum *const ys[4], const int nt, bool stream, __m256 acc[4])
{
    const size_t gl  = 8 * sizeof(struct block_q4_0);
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int tt = 0; tt < nt; tt++)
        acc[tt] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *g = wp + b * gl;
        if (stream)
            q40p_prefetch(g, gl);
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)g));
        __m256i lo[4], hi[4];
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(g + 16 + 32 * k));
            lo[k]           = _mm256_and_si256(v, m4);
            hi[k]           = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
        }
#pragma GCC unroll 4
        for (int tt = 0; tt < nt; tt++) {
            const __m256i isum = q4p_block(lo, hi, y[tt][b].qs, ys[tt][b].sum);
            acc[tt]            = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum),
                                                 _mm256_mul_ps(dw, _mm256_set1_ps(ys[tt][b].d)), acc[tt]);
        }
    }
}

/*
 * gemm8p over packed Q4_0 (ref_pack8_q4_0's layout): tokens in quads, a
 * last three in a quad too (the fourth a copy, not stored: each token's
 * sums are its own, so they come out as the AVX2 gemv's do, at a quad's
 * cost rather than 1.4), a last two as a pair, which costs a decode and a
 * tenth where AVX2's two tokens cost a fifth more (the rows of a rejected
 * draft), and a last one to the AVX2 table's gemv, which keeps pace with
 * memory.
 */
static void avx512_gemm8p_q4_0(int64_t n, const void *wp, const void *a, size_t a_row,
                               const struct q8_0_sum *as, int32_t n_tok, float *s, size_t s_stride)
{
    const int64_t nb    = n / QK4_0;
    const int32_t quads = n_tok % 4 == 3 ? n_tok : n_tok / 4 * 4;
    const struct block_q8_0 *y[4];
    const struct q8_0_sum *ys[4];
    __m256 acc[4];
    int32_t t0 = 0;
    for (; t0 < quads; t0 += 4) {
        const int32_t tn = quads - t0 < 4 ? quads - t0 : 4;
        q80_tokens(a, a_row, as, nb, t0, tn, 4, y, ys);
        q4p512_pass(nb, wp, y, ys, 4, t0 == 0, acc);
        for (int tt = 0; tt < tn; tt++)
            _mm256_storeu_ps(s + (size_t)(t0 + tt) * s_stride, acc[tt]);
    }
    if (n_tok - t0 >= 2) {
        q80_tokens(a, a_row, as, nb, t0, 2, 4, y, ys);
        q4p512_pass(nb, wp, y, ys, 2, t0 == 0, acc);
        for (int tt = 0; tt < 2; tt++)
            _mm256_storeu_ps(s + (size_t)(t0 + tt) * s_stride, acc[tt]);
        t0 += 2;
    }
    if (t0 < n_tok)
        kernels_avx2()->type[DTYPE_Q4_0].gemm8p(n, wp, (const uint8_t *)a + (size_t)t0 * a_row,
                                                a_row, as + (size_t)t0 * nb, n_tok - t0,
                                                s + (size_t)t0 * s_stride, s_stride);
}

/* ---------------------------------------------------------------- sixteen rows */

/*
 * The 512-bit forms: two adjacent packed groups side by side, the first
 * group's eight rows in lanes 0..7 and the second's in 8..15. Every lane
 * does what the 256-bit kernel's lane does for its row, in the same order,
 * so the bits are unchanged; what changes is that one instruction serves
 * sixteen rows. Zen 5 and Intel's server cores run 512-bit vpdpbusd at
 * twice the 256-bit rate (Zen 4 at the same rate, so no loss there).
 */
static inline __m512i dpbusd512(__m512i src, __m512i u, __m512i s)
{
    return _mm512_dpbusd_epi32(src, u, s);
}

static inline __m512i bcast4_512(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, sizeof v);
    return _mm512_set1_epi32(v);
}

/* q4p_block for sixteen rows. */
static inline __m512i q4p16_block(const __m512i lo[4], const __m512i hi[4], const int8_t *qa,
                                  int32_t sum)
{
    __m512i s0 = _mm512_set1_epi32(-8 * sum), s1 = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        s0 = dpbusd512(s0, lo[k], bcast4_512(qa + 4 * k));
        s1 = dpbusd512(s1, hi[k], bcast4_512(qa + 16 + 4 * k));
    }
    return _mm512_add_epi32(s0, s1);
}

/*
 * q4p512_pass over a pack16 pair (the first group's rows in the low lanes,
 * the second's in the high) for NT tokens: each block's sixteen rows, then
 * the next block's, one stream.
 */
static inline __attribute__((always_inline)) void
q4p16_pass(int64_t nb, const uint8_t *wp, const struct block_q8_0 *const y[8],
           const struct q8_0_sum *const ys[8], const int nt, bool stream, __m512 acc[8])
{
    const size_t gl  = 8 * sizeof(struct block_q4_0);
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    for (int tt = 0; tt < nt; tt++)
        acc[tt] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *g0 = wp + b * 2 * gl, *g1 = g0 + gl;
        if (stream)
            q40p16_prefetch(g0);
        const __m512 dw = pair_ph(g0, g1);
        __m512i lo[4], hi[4];
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            const __m512i v = pair256(g0 + 16 + 32 * k, g1 + 16 + 32 * k);
            lo[k]           = _mm512_and_si512(v, m4);
            hi[k]           = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
        }
#pragma GCC unroll 8
        for (int tt = 0; tt < nt; tt++) {
            const __m512i isum = q4p16_block(lo, hi, y[tt][b].qs, ys[tt][b].sum);
            acc[tt]            = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum),
                                                 _mm512_mul_ps(dw, _mm512_set1_ps(ys[tt][b].d)), acc[tt]);
        }
    }
}

/*
 * gemm16p over a pack16 pair of Q4_0 groups: tokens in eights (a last five
 * to seven in an eight whose extra tokens are computed, not stored), a last
 * three or four as a four, two as a pair, one alone: the gemv, at memory
 * speed, in the same order as the AVX2 table's.
 */
static void avx512_gemm16p_q4_0(int64_t n, const void *wp, const void *a, size_t a_row,
                                const struct q8_0_sum *as, int32_t n_tok, float *s, size_t s_stride)
{
    const int64_t nb = n / QK4_0;
    const struct block_q8_0 *y[8];
    const struct q8_0_sum *ys[8];
    __m512 acc[8];
    for (int32_t t0 = 0; t0 < n_tok;) {
        const int32_t left = n_tok - t0;
        const int32_t tn   = left >= 8 ? 8 : left;
        q80_tokens(a, a_row, as, nb, t0, tn, 8, y, ys);
        if (tn >= 5)
            q4p16_pass(nb, wp, y, ys, 8, t0 == 0, acc);
        else if (tn >= 3)
            q4p16_pass(nb, wp, y, ys, 4, t0 == 0, acc);
        else if (tn == 2)
            q4p16_pass(nb, wp, y, ys, 2, t0 == 0, acc);
        else
            q4p16_pass(nb, wp, y, ys, 1, t0 == 0, acc);
        for (int32_t tt = 0; tt < tn; tt++)
            _mm512_storeu_ps(s + (size_t)(t0 + tt) * s_stride, acc[tt]);
        t0 += tn;
    }
}

/* ---------------------------------------------------------------- packed Q4_K */

/*
 * Sub-block j of eight packed rows against one token, times the rows'
 * scales: sum = the chunks' vpdpbusd over one nibble half (exact, as the
 * AVX2 kernel's int16 maddubs sums are: at most 8 x 16 products of 15 x
 * 128), then one multiply by the 6-bit scale, where AVX2 uses madd on the
 * int16 halves.
 */
static inline __m256i q4kp_sub(const uint8_t *q, int hi, const int8_t *qa, __m256i scale)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256i s0 = _mm256_setzero_si256(), s1 = s0;
#pragma GCC unroll 4
    for (int k = 0; k < 8; k += 2) {
        __m256i v0 = _mm256_loadu_si256((const __m256i *)(q + 32 * k));
        __m256i v1 = _mm256_loadu_si256((const __m256i *)(q + 32 * k + 32));
        v0         = _mm256_and_si256(hi ? _mm256_srli_epi16(v0, 4) : v0, m4);
        v1         = _mm256_and_si256(hi ? _mm256_srli_epi16(v1, 4) : v1, m4);
        s0         = dpbusd(s0, v0, bcast4(qa + 4 * k));
        s1         = dpbusd(s1, v1, bcast4(qa + 4 * k + 4));
    }
    return _mm256_mullo_epi32(_mm256_add_epi32(s0, s1), scale);
}

/*
 * gemm8p over packed Q4_K for whole fours of tokens, in llama.cpp's repacked
 * gemm order as avx2_gemm8p_q4_k's quads: both chains step once per
 * sub-block pair. The last n_tok % 4 tokens take the gemv order, which the
 * AVX2 table gives when handed fewer than four.
 */
static void avx512_gemm8p_q4_k(int64_t n, const void *wp, const void *a, size_t a_row,
                               const struct q8_0_sum *as, int32_t n_tok, float *s, size_t s_stride)
{
    const int64_t nb    = n / QK_K;
    const int32_t quads = n_tok / 4 * 4;
    const size_t gl     = 8 * sizeof(struct block_q4_K);
    for (int32_t t0 = 0; t0 < quads; t0 += 4) {
        __m256 acc[4], acc_m[4];
        for (int tt = 0; tt < 4; tt++)
            acc[tt] = acc_m[tt] = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *p = (const uint8_t *)wp + b * gl;
            if (t0 == 0) /* as for Q4_0: the first quad streams the superblocks in */
                q4kp_prefetch(p, gl);
            uint8_t e[4][32];
            q4kp_entries(p, e);
            __m256i mn[4];
            for (int g = 0; g < 4; g++)
                mn[g] = q4kp_mn(e, g);
            const __m256 dw  = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
            const __m256 dmw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 16)));
            for (int tt = 0; tt < 4; tt++) {
                const struct block_q8_K *yb =
                    (const struct block_q8_K *)((const uint8_t *)a + (size_t)(t0 + tt) * a_row) + b;
                const __m256 da = _mm256_broadcast_ss(&yb->d);
                const __m256 d = _mm256_mul_ps(dw, da), dm = _mm256_mul_ps(dmw, da);
                int32_t bp[4]; /* pair g: sub-blocks 2g and 2g+1's activation sums, int16 each */
                _mm_storeu_si128((__m128i *)bp, q8k_bsum_pairs(yb));
                for (int g = 0; g < 4; g++) {
                    const uint8_t *q = p + 128 + 256 * g;
                    const __m256i ig = _mm256_add_epi32(
                        q4kp_sub(q, 0, yb->qs + 64 * g, q4kp_entry(e, 0, 2 * g)),
                        q4kp_sub(q, 1, yb->qs + 64 * g + 32, q4kp_entry(e, 0, 2 * g + 1)));
                    const __m256i mg = _mm256_madd_epi16(mn[g], _mm256_set1_epi32(bp[g]));
                    acc[tt]          = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ig), d, acc[tt]);
                    acc_m[tt]        = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mg), dm, acc_m[tt]);
                }
            }
        }
        for (int tt = 0; tt < 4; tt++)
            _mm256_storeu_ps(s + (size_t)(t0 + tt) * s_stride, _mm256_sub_ps(acc[tt], acc_m[tt]));
    }
    if (quads < n_tok)
        kernels_avx2()->type[DTYPE_Q4_K].gemm8p(n, wp, (const uint8_t *)a + (size_t)quads * a_row,
                                                a_row, as, n_tok - quads,
                                                s + (size_t)quads * s_stride, s_stride);
}

/*
 * A sub-block's eight chunks of quants for sixteen rows (decoded once per
 * sub-block, then used for four tokens) against one token, times the rows'
 * scales: q4kp_sub's sum.
 */
static inline __m512i q4kp16_sub(const __m512i v[8], const int8_t *qa, __m512i scale)
{
    __m512i s0 = _mm512_setzero_si512(), s1 = s0;
#pragma GCC unroll 4
    for (int k = 0; k < 8; k += 2) {
        s0 = dpbusd512(s0, v[k], bcast4_512(qa + 4 * k));
        s1 = dpbusd512(s1, v[k + 1], bcast4_512(qa + 4 * k + 4));
    }
    return _mm512_mullo_epi32(_mm512_add_epi32(s0, s1), scale);
}

/*
 * One pass of a pack16 pair of Q4_K groups (the first group's rows in the
 * low lanes, the second's in the high) for NT tokens, each sub-block's
 * nibbles decoded once for all of them. quad: llama.cpp's repacked gemm
 * order, both chains stepping once per sub-block pair, as
 * avx512_gemm8p_q4_k's quads; else its gemv order, the integer sums of the
 * whole superblock taken into each chain once, as the AVX2 table's gemv
 * (decode) and its tokens past the last four. stream: the pass reads the
 * pair from memory (the first over it; later passes find it in cache), so
 * it fetches ahead.
 */
static inline __attribute__((always_inline)) void
q4kp16_pass(int64_t nb, const uint8_t *wp, const struct block_q8_K *const y[4], const int nt,
            const bool quad, const bool stream, __m512 acc[4], __m512 acc_m[4])
{
    const size_t gl  = 8 * sizeof(struct block_q4_K);
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    for (int tt = 0; tt < nt; tt++)
        acc[tt] = acc_m[tt] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *p0 = wp + (size_t)b * 2 * gl, *p1 = p0 + gl;
        if (stream)
            q4kp_prefetch(p0, 2 * gl);
        uint8_t e0[4][32], e1[4][32];
        q4kp_entries(p0, e0);
        q4kp_entries(p1, e1);
        const __m512 dw = pair_ph(p0, p1), dmw = pair_ph(p0 + 16, p1 + 16);
        __m512 d[4], dm[4];
        int32_t bp[4][4]; /* [token][pair g]: sub-blocks 2g and 2g+1's activation sums */
        __m512i isum[4], imin[4];
#pragma GCC unroll 4
        for (int tt = 0; tt < nt; tt++) {
            const __m512 da = _mm512_set1_ps(y[tt][b].d);
            d[tt]           = _mm512_mul_ps(dw, da);
            dm[tt]          = _mm512_mul_ps(dmw, da);
            _mm_storeu_si128((__m128i *)bp[tt], q8k_bsum_pairs(&y[tt][b]));
            isum[tt] = imin[tt] = _mm512_setzero_si512();
        }
        for (int g = 0; g < 4; g++) {
            const uint8_t *q0 = p0 + 128 + 256 * g, *q1 = p1 + 128 + 256 * g;
            __m512i v[8], ig[4];
#pragma GCC unroll 8
            for (int k = 0; k < 8; k++)
                v[k] = _mm512_and_si512(pair256(q0 + 32 * k, q1 + 32 * k), m4);
            const __m512i sc0 = join256(q4kp_entry(e0, 0, 2 * g), q4kp_entry(e1, 0, 2 * g));
#pragma GCC unroll 4
            for (int tt = 0; tt < nt; tt++)
                ig[tt] = q4kp16_sub(v, y[tt][b].qs + 64 * g, sc0);
#pragma GCC unroll 8
            for (int k = 0; k < 8; k++)
                v[k] =
                    _mm512_and_si512(_mm512_srli_epi16(pair256(q0 + 32 * k, q1 + 32 * k), 4), m4);
            const __m512i sc1 = join256(q4kp_entry(e0, 0, 2 * g + 1), q4kp_entry(e1, 0, 2 * g + 1));
            const __m512i mn  = join256(q4kp_mn(e0, g), q4kp_mn(e1, g));
#pragma GCC unroll 4
            for (int tt = 0; tt < nt; tt++) {
                ig[tt] = _mm512_add_epi32(ig[tt], q4kp16_sub(v, y[tt][b].qs + 64 * g + 32, sc1));
                const __m512i mg = _mm512_madd_epi16(mn, _mm512_set1_epi32(bp[tt][g]));
                if (quad) {
                    acc[tt]   = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ig[tt]), d[tt], acc[tt]);
                    acc_m[tt] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(mg), dm[tt], acc_m[tt]);
                } else {
                    isum[tt] = _mm512_add_epi32(isum[tt], ig[tt]);
                    imin[tt] = _mm512_add_epi32(imin[tt], mg);
                }
            }
        }
        if (!quad)
#pragma GCC unroll 4
            for (int tt = 0; tt < nt; tt++) {
                acc[tt]   = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[tt]), d[tt], acc[tt]);
                acc_m[tt] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(imin[tt]), dm[tt], acc_m[tt]);
            }
    }
}

/*
 * gemm16p over a pack16 pair of Q4_K groups, each lane with gemm8p's bits
 * for its row: tokens in quads, the last n_tok % 4 (one alone in decode)
 * in the gemv order, one stream of sixteen rows however many tokens.
 */
static void avx512_gemm16p_q4_k(int64_t n, const void *wp, const void *a, size_t a_row,
                                const struct q8_0_sum *as, int32_t n_tok, float *s, size_t s_stride)
{
    const int64_t nb    = n / QK_K;
    const int32_t quads = n_tok / 4 * 4;
    const struct block_q8_K *y[4];
    __m512 acc[4], acc_m[4];
    for (int32_t t0 = 0; t0 < n_tok; t0 += 4) {
        const int32_t tn = n_tok - t0 < 4 ? n_tok - t0 : 4;
        for (int tt = 0; tt < tn; tt++)
            y[tt] = (const struct block_q8_K *)((const uint8_t *)a + (size_t)(t0 + tt) * a_row);
        if (t0 < quads)
            q4kp16_pass(nb, wp, y, 4, true, t0 == 0, acc, acc_m);
        else if (tn == 3)
            q4kp16_pass(nb, wp, y, 3, false, t0 == 0, acc, acc_m);
        else if (tn == 2)
            q4kp16_pass(nb, wp, y, 2, false, t0 == 0, acc, acc_m);
        else
            q4kp16_pass(nb, wp, y, 1, false, t0 == 0, acc, acc_m);
        for (int32_t tt = 0; tt < tn; tt++)
            _mm512_storeu_ps(s + (size_t)(t0 + tt) * s_stride, _mm512_sub_ps(acc[tt], acc_m[tt]));
    }
}

/* ---------------------------------------------------------------- Q6_K */

/*
 * Q6_K x Q8_K for eight rows, with avx2_gemm8_q6_k's arithmetic: per row
 * and token eight int32 lanes, lane l holding elements 4l..4l+3 of every
 * 32-element chunk times their scales, less 32 x (scale x activation sums)
 * of chunk l, then fma(d_a * d_w, float(lane), acc) per superblock and
 * hsum_ps at the end. The lane sums are exact integers whichever way they
 * are formed, so here a register takes two chunks: vpdpbusd of the
 * unsigned 6-bit quants against 64 activation bytes (loaded as they lie),
 * one vpmulld by the four scales, and the two halves added at the end of
 * the superblock. A row's superblock is unpacked once for up to eight
 * tokens.
 */
static void avx512_gemm8_q6_k(int64_t n, const void *w, size_t row_len, const void *a, size_t a_row,
                              const struct q8_0_sum *as, int32_t n_tok, float *s, size_t s_stride)
{
    const int64_t nb = n / QK_K;
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    /* the high bits of chunk pair (0, 1) of a half sit at shifts 4 and 2, of (2, 3) at 0 and 2 */
    const __m512i up   = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
    const __m512i down = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    for (int32_t t0 = 0; t0 < n_tok; t0 += 8) {
        const int32_t tn = n_tok - t0 < 8 ? n_tok - t0 : 8;
        const struct block_q8_K *y[8];
        for (int32_t tt = 0; tt < tn; tt++)
            y[tt] = (const struct block_q8_K *)((const uint8_t *)a + (size_t)(t0 + tt) * a_row);
        for (int r = 0; r < 8; r++) {
            const struct block_q6_K *x =
                (const struct block_q6_K *)((const uint8_t *)w + r * row_len);
            __m256 acc[8];
            for (int tt = 0; tt < 8; tt++)
                acc[tt] = _mm256_setzero_ps();
            for (int64_t i = 0; i < nb; i++) {
                const __m128i sc8  = _mm_loadu_si128((const __m128i *)x[i].scales);
                const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
                /* each scale in the low half of its lane, 0 in the high: vpdpwssd by it is an
                 * exact multiply of a four-product sum, which fits int16 (4 x 63 x 128) */
                const __m512i lo16 =
                    _mm512_and_si512(_mm512_cvtepi8_epi32(sc8), _mm512_set1_epi32(0xFFFF));
                __m512i q[4], sc[4]; /* chunks 2k and 2k + 1, and their four scales */
                for (int h = 0; h < 2; h++) {
                    const __m512i l  = _mm512_loadu_si512(x[i].ql + 64 * h);
                    const __m512i hb = _mm512_broadcast_i64x4(
                        _mm256_loadu_si256((const __m256i *)(x[i].qh + 32 * h)));
                    q[2 * h] = _mm512_or_si512(_mm512_and_si512(l, m4),
                                               _mm512_and_si512(_mm512_sllv_epi16(hb, up), m30));
                    q[2 * h + 1] =
                        _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4),
                                        _mm512_and_si512(_mm512_srlv_epi16(hb, down), m30));
                }
#pragma GCC unroll 4
                for (int k = 0; k < 4; k++)
                    sc[k] = _mm512_permutexvar_epi32(
                        _mm512_setr_epi32(4 * k, 4 * k, 4 * k, 4 * k, 4 * k + 1, 4 * k + 1,
                                          4 * k + 1, 4 * k + 1, 4 * k + 2, 4 * k + 2, 4 * k + 2,
                                          4 * k + 2, 4 * k + 3, 4 * k + 3, 4 * k + 3, 4 * k + 3),
                        lo16);
                const __m256 dx = _mm256_set1_ps(half(x[i].d));
                for (int32_t tt = 0; tt < tn; tt++) {
                    const struct block_q8_K *yb = y[tt] + i;
                    __m512i sum                 = _mm512_setzero_si512();
#pragma GCC unroll 4
                    for (int k = 0; k < 4; k++)
                        sum = _mm512_dpwssd_epi32(
                            sum,
                            _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[k],
                                                _mm512_loadu_si512(yb->qs + 64 * k)),
                            sc[k]);
                    const __m256i bs  = _mm256_loadu_si256((const __m256i *)yb->bsums);
                    const __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(bs, sc16), 5);
                    const __m256i sumi =
                        _mm256_sub_epi32(_mm256_add_epi32(_mm512_castsi512_si256(sum),
                                                          _mm512_extracti64x4_epi64(sum, 1)),
                                         off);
                    acc[tt] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_broadcast_ss(&yb->d), dx),
                                              _mm256_cvtepi32_ps(sumi), acc[tt]);
                }
            }
            for (int32_t tt = 0; tt < tn; tt++)
                s[(size_t)(t0 + tt) * s_stride + r] = hsum_ps(acc[tt]);
        }
    }
}

/* ---------------------------------------------------------------- attention */

/* v_expf512 of x86_avx2.c, sixteen lanes: the same operations per lane, the same fallback. */
static inline __m512 v_expf16(__m512 x)
{
    const __m512 r = _mm512_set1_ps(0x1.8p23f);
    const __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), r);
    const __m512 n = _mm512_sub_ps(z, r);
    const __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f),
                                      _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
    const __m512 u = _mm512_mul_ps(b, b);
    const __m512 j = _mm512_fmadd_ps(
        _mm512_fmadd_ps(
            _mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b, _mm512_set1_ps(0x1.573e2ep-5f)), u,
            _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b, _mm512_set1_ps(0x1.fffdb6p-2f))),
        u, _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b, _mm512_set1_ps(1.0f)));
    const __m512 an = _mm512_abs_ps(n);
    if (_mm512_cmp_ps_mask(an, _mm512_set1_ps(126), _CMP_GT_OQ)) {
        float xs[16], ys[16];
        _mm512_storeu_ps(xs, x);
        for (int l = 0; l < 16; l++)
            ys[l] = ref_ggml_expf(xs[l]);
        return _mm512_loadu_ps(ys);
    }
    const __m512i e = _mm512_slli_epi32(_mm512_castps_si512(z), 23);
    return _mm512_mul_ps(
        j, _mm512_castsi512_ps(_mm512_add_epi32(e, _mm512_castps_si512(_mm512_set1_ps(1)))));
}

/* A key or value row as floats, from the cache's f16 or f32 row (hd a multiple of 16). */
static inline void attn16_load_row(float *dst, const uint8_t *row, int32_t hd, int f16)
{
    for (int32_t d = 0; d < hd; d += 16)
        _mm512_storeu_ps(dst + d,
                         f16 ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)row + d / 16))
                             : _mm512_loadu_ps((const float *)row + d));
}

/* Eight lanes of expf_libm16: x = k/32 + r/32 in units of ln 2, 2^(k/32) from the table. */
static inline __m256 expf_libm8(__m256 x)
{
    const __m512d inv = _mm512_set1_pd(0x1.71547652b82fep+0 * 32), shift = _mm512_set1_pd(0x1.8p52);
    const __m512d xd = _mm512_cvtps_pd(x);
    const __m512d kr = _mm512_fmadd_pd(inv, xd, shift); /* k in the low bits */
    const __m512i ki = _mm512_castpd_si512(kr);
    const __m512d r  = _mm512_fmsub_pd(inv, xd, _mm512_sub_pd(kr, shift));
    const __m512i lo =
        _mm512_castpd_si512(_mm512_permutex2var_pd(_mm512_loadu_pd((const double *)exp2_32), ki,
                                                   _mm512_loadu_pd((const double *)exp2_32 + 8)));
    const __m512i hi = _mm512_castpd_si512(
        _mm512_permutex2var_pd(_mm512_loadu_pd((const double *)exp2_32 + 16), ki,
                               _mm512_loadu_pd((const double *)exp2_32 + 24)));
    const __m512i t =
        _mm512_mask_blend_epi64(_mm512_test_epi64_mask(ki, _mm512_set1_epi64(16)), lo, hi);
    const __m512d s = _mm512_castsi512_pd(_mm512_add_epi64(t, _mm512_slli_epi64(ki, 47)));
    const __m512d z = _mm512_fmadd_pd(_mm512_set1_pd(0x1.c6af84b912394p-5 / 32 / 32 / 32), r,
                                      _mm512_set1_pd(0x1.ebfce50fac4f3p-3 / 32 / 32));
    const __m512d y = _mm512_fmadd_pd(
        z, _mm512_mul_pd(r, r),
        _mm512_fmadd_pd(_mm512_set1_pd(0x1.62e42ff0c52d6p-1 / 32), r, _mm512_set1_pd(1.0)));
    return _mm512_cvtpd_ps(_mm512_mul_pd(y, s));
}

/*
 * expf with glibc's bits in sixteen lanes. glibc's expf (2.28 on; the FMA
 * build its ifunc picks on every CPU that runs this table) evaluates
 * 2^(k/32) * p(r) in double with the table above and a cubic, contracted
 * into fmas; these lanes do the same operations in the same order, which
 * gave libm's result for every float in (-103.9, 0] when this was written.
 * Other lanes (positive, NaN, -inf, lower) are libm's own.
 */
static inline __m512 expf_libm16(__m512 x)
{
    const __mmask16 in = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-103.9f), _CMP_GT_OQ) &
                         _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LE_OQ);
    __m512 y = _mm512_insertf32x8(_mm512_castps256_ps512(expf_libm8(_mm512_castps512_ps256(x))),
                                  expf_libm8(hi256_ps(x)), 1);
    if (in != 0xffff) {
        float xs[16], ys[16];
        _mm512_storeu_ps(xs, x);
        _mm512_storeu_ps(ys, y);
        for (int l = 0; l < 16; l++)
            if (!(in >> l & 1))
                ys[l] = expf(xs[l]);
        y = _mm512_loadu_ps(ys);
    }
    return y;
}

static void avx512_expf_libm(const float *x, float *y, int64_t n)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, expf_libm16(_mm512_loadu_ps(x + i)));
    for (; i < n; i++)
        y[i] = expf(x[i]);
}

/*
 * Dimension i of the NH keys whose rows are interleaved at k ([hd][NH], the
 * heads of a lane set, attn16_load_rows) in every lane: lane l takes head
 * l % NH's.
 */
static inline __attribute__((always_inline)) __m512 kbcast(const float *k, int32_t i, const int NH)
{
    if (NH == 1)
        return _mm512_set1_ps(k[i]);
    if (NH == 2) {
        double pair;
        memcpy(&pair, k + 2 * i, sizeof pair);
        return _mm512_castpd_ps(_mm512_set1_pd(pair));
    }
    return _mm512_broadcast_f32x4(_mm_loadu_ps(k + 4 * i));
}

/*
 * ggml_vec_dot_f16 of one key (k: hd floats, or NH keys interleaved) with
 * sixteen queries at once, a lane each (qt: [hd][16]): the products of
 * ggml's four sixteen-lane accumulators one vector per position, summed in
 * its reduction's order, the positions past the last whole 64 added in
 * double.
 */
static inline __attribute__((always_inline)) __m512 f16lanes_score(const float *k, const float *qt,
                                                                   int32_t hd, const int NH)
{
    const int32_t np = hd - hd % 64;
    __m512 t6[4];
#pragma GCC unroll 4
    for (int l = 0; l < 4; l++) {
        __m512 v[4]; /* ggml's v[l], v[l + 4], v[l + 8], v[l + 12] */
#pragma GCC unroll 4
        for (int m = 0; m < 4; m++) {
            __m512 p[4]; /* accumulator a's lane l + 4m */
#pragma GCC unroll 4
            for (int a = 0; a < 4; a++) {
                const int32_t at = l + 4 * m + 16 * a;
                p[a]             = _mm512_setzero_ps();
                for (int32_t i = 0; i < np; i += 64)
                    p[a] = _mm512_fmadd_ps(kbcast(k, i + at, NH),
                                           _mm512_loadu_ps(qt + (size_t)(i + at) * 16), p[a]);
            }
            v[m] = _mm512_add_ps(_mm512_add_ps(p[0], p[2]), _mm512_add_ps(p[1], p[3]));
        }
        t6[l] = _mm512_add_ps(_mm512_add_ps(v[3], v[1]), _mm512_add_ps(v[2], v[0]));
    }
    __m512 s = _mm512_add_ps(_mm512_add_ps(t6[0], t6[2]), _mm512_add_ps(t6[1], t6[3]));
    if (np == hd)
        return s;
    __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(s));
    __m512d hi = _mm512_cvtps_pd(hi256_ps(s));
    for (int32_t i = np; i < hd; i++) {
        const __m512 p = _mm512_mul_ps(kbcast(k, i, NH), _mm512_loadu_ps(qt + (size_t)i * 16));
        lo             = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(p)));
        hi             = _mm512_add_pd(hi, _mm512_cvtps_pd(hi256_ps(p)));
    }
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo)), _mm512_cvtpd_ps(hi), 1);
}

/* x rounded to f16 and back: what storing an f16 accumulator does to it. */
static inline __m512 round_f16(__m512 x)
{
    return _mm512_cvtph_ps(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
}

/* Keys per tile of the lane kernel: their f32 keys and values stay in L1. */
#define F16LANES_TILE 32

/*
 * Row j's f16 K or V rows of NH heads (head h's head_off * h bytes past
 * row) as floats interleaved, [hd][NH], for kbcast: one head's row as it
 * is, two or four interleaved a float, then a pair, at a time.
 */
static inline __attribute__((always_inline)) void
attn16_load_rows(float *dst, const uint8_t *row, size_t head_off, int32_t hd, const int NH)
{
    if (NH == 1) {
        attn16_load_row(dst, row, hd, 1);
        return;
    }
    const __m512i lo32 = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i hi32 =
        _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    const __m512i lo64 = _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11);
    const __m512i hi64 = _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15);
    for (int32_t d = 0; d < hd; d += 16) {
        __m512 a[4];
        for (int h = 0; h < NH; h++)
            a[h] = _mm512_cvtph_ps(
                _mm256_loadu_si256((const __m256i *)(row + (size_t)h * head_off) + d / 16));
        float *o = dst + (size_t)d * NH;
        if (NH == 2) {
            _mm512_storeu_ps(o, _mm512_permutex2var_ps(a[0], lo32, a[1]));
            _mm512_storeu_ps(o + 16, _mm512_permutex2var_ps(a[0], hi32, a[1]));
            continue;
        }
        /* heads 0, 1 and 2, 3 a float at a time, then the two a pair at a time */
        const __m512d p0 = _mm512_castps_pd(_mm512_permutex2var_ps(a[0], lo32, a[1]));
        const __m512d p1 = _mm512_castps_pd(_mm512_permutex2var_ps(a[0], hi32, a[1]));
        const __m512d q0 = _mm512_castps_pd(_mm512_permutex2var_ps(a[2], lo32, a[3]));
        const __m512d q1 = _mm512_castps_pd(_mm512_permutex2var_ps(a[2], hi32, a[3]));
        _mm512_storeu_ps(o, _mm512_castpd_ps(_mm512_permutex2var_pd(p0, lo64, q0)));
        _mm512_storeu_ps(o + 16, _mm512_castpd_ps(_mm512_permutex2var_pd(p0, hi64, q0)));
        _mm512_storeu_ps(o + 32, _mm512_castpd_ps(_mm512_permutex2var_pd(p1, lo64, q1)));
        _mm512_storeu_ps(o + 48, _mm512_castpd_ps(_mm512_permutex2var_pd(p1, hi64, q1)));
    }
}

/*
 * The lane kernel: a query row per vector lane, up to sixteen rows, each
 * bit for bit ref_attn_row_f16. Lane l's row reads KV head l % NH (NH 1,
 * 2 or 4: one head's GQA group over one or two tokens, or a verify step's;
 * or the groups of two or four heads over one token, decode's), whose rows
 * lie head_off * (l % NH) bytes past kv's. Per tile of keys, each key's
 * scores, softmax steps (masked to the lanes whose rows see it) and
 * weights are computed for all rows at once; then the f16 accumulators,
 * sixteen dimensions at a time in registers, take the tile's keys in
 * order, rounded to f16 after every step as the row's own would be.
 */
static inline __attribute__((always_inline)) void
attn16_lanes(float *const *out, const float *const *q, int32_t nq, int32_t hd,
             const struct attn_kv *kv, size_t head_off, const int32_t *j0, const int32_t *j1,
             float scale, float *scratch, const int NH)
{
    enum { TMAX = F16LANES_TILE };
    /* a tile's keys and values of NH heads within 2 x 16 KiB */
    const int32_t T  = NH == 1                   ? TMAX
                       : 4096 / (hd * NH) > TMAX ? TMAX
                       : 4096 / (hd * NH) < 1    ? 1
                                                 : 4096 / (hd * NH);
    const int32_t kw = hd * NH; /* floats of one key's rows in a tile */
    /* [hd][16] queries, [T][hd][NH] keys, then values, [T][16] weights ms and vs, [hd][16] f16
     * accumulators: 24 hd + 2 T (hd NH + 16) floats, within ATTN_SCRATCH */
    float *qt = scratch, *kt = qt + (size_t)16 * hd, *vt = kt + (size_t)T * kw;
    float *wm = vt + (size_t)T * kw, *wv = wm + (size_t)T * 16;
    uint16_t *acc = (uint16_t *)(wv + (size_t)T * 16);
    __mmask16 see[TMAX], up[TMAX]; /* the lanes that see a key; those it gives a new maximum */
    int32_t jl[16], jh[16], lo = INT32_MAX, hi = INT32_MIN;
    for (int32_t r = 0; r < 16; r++) {
        jl[r] = r < nq ? j0[r] : INT32_MAX; /* idle lanes see no key */
        jh[r] = r < nq ? j1[r] : INT32_MIN;
        lo    = jl[r] < lo ? jl[r] : lo;
        hi    = jh[r] > hi ? jh[r] : hi;
    }
    for (int32_t d = 0; d < hd; d += 16) {
        float f[16];
        for (int32_t r = 0; r < 16; r++) {
            _mm512_storeu_ps(f,
                             r < nq ? round_f16(_mm512_loadu_ps(q[r] + d)) : _mm512_setzero_ps());
            for (int i = 0; i < 16; i++)
                qt[(size_t)(d + i) * 16 + r] = f[i];
        }
    }
    memset(acc, 0, (size_t)hd * 16 * sizeof(uint16_t));
    const __m512i vjl = _mm512_loadu_si512(jl), vjh = _mm512_loadu_si512(jh);
    const __m512 one = _mm512_set1_ps(1.0f), vscale = _mm512_set1_ps(scale);
    /* lanes past nq: no row reads them, so a key every row sees takes the unmasked update
     * (a GQA group of eight over one token fills half the lanes) */
    const __mmask16 idle = (__mmask16)(0xffffu << nq);
    __m512 M = _mm512_set1_ps(-INFINITY), S = _mm512_setzero_ps();
    for (int32_t t0 = lo; t0 <= hi; t0 += T) {
        const int32_t nt = hi - t0 + 1 < T ? hi - t0 + 1 : T;
        for (int32_t u = 0; u < nt; u++) {
            attn16_load_rows(kt + (size_t)u * kw, attn_kv_row(kv->k, kv, t0 + u), head_off, hd, NH);
            attn16_load_rows(vt + (size_t)u * kw, attn_kv_row(kv->v, kv, t0 + u), head_off, hd, NH);
        }
        for (int32_t u = 0; u < nt; u++) {
            const __m512i j   = _mm512_set1_epi32(t0 + u);
            const __mmask16 k = _mm512_cmple_epi32_mask(vjl, j) & _mm512_cmple_epi32_mask(j, vjh);
            const __m512 s = _mm512_mul_ps(f16lanes_score(kt + (size_t)u * kw, qt, hd, NH), vscale);
            const __mmask16 g = k & _mm512_cmp_ps_mask(s, M, _CMP_GT_OQ);
            /* a new maximum rescales by expf(M - s) and weighs the key 1; else expf(s - M) */
            const __m512 e = expf_libm16(
                _mm512_maskz_mov_ps(k, _mm512_mask_sub_ps(_mm512_sub_ps(s, M), g, M, s)));
            const __m512 ms = _mm512_mask_mov_ps(one, g, e), vs = _mm512_mask_mov_ps(e, g, one);
            M = _mm512_mask_mov_ps(M, g, s);
            S = _mm512_mask_fmadd_ps(S, k, ms, vs);
            _mm512_storeu_ps(wm + (size_t)u * 16, ms);
            _mm512_storeu_ps(wv + (size_t)u * 16, vs);
            see[u] = k;
            up[u]  = g;
        }
        for (int32_t d = 0; d < hd; d += 16) {
            __m512 a[16];
#pragma GCC unroll 16
            for (int i = 0; i < 16; i++)
                a[i] = _mm512_cvtph_ps(
                    _mm256_loadu_si256((const __m256i *)(acc + (size_t)(d + i) * 16)));
            for (int32_t u = 0; u < nt; u++) {
                const __mmask16 k = see[u], g = up[u];
                const float *vr = vt + (size_t)u * kw + (size_t)d * NH;
                if (g) {
                    const __m512 m = _mm512_loadu_ps(wm + (size_t)u * 16);
#pragma GCC unroll 16
                    for (int i = 0; i < 16; i++)
                        a[i] = round_f16(_mm512_mask_mul_ps(a[i], g, a[i], m));
                }
                const __m512 w = _mm512_loadu_ps(wv + (size_t)u * 16);
                if ((k | idle) == 0xffff)
#pragma GCC unroll 16
                    for (int i = 0; i < 16; i++)
                        a[i] = round_f16(_mm512_fmadd_ps(kbcast(vr, i, NH), w, a[i]));
                else if (k)
#pragma GCC unroll 16
                    for (int i = 0; i < 16; i++)
                        a[i] = round_f16(_mm512_mask_mov_ps(
                            a[i], k, _mm512_fmadd_ps(kbcast(vr, i, NH), w, a[i])));
            }
#pragma GCC unroll 16
            for (int i = 0; i < 16; i++)
                _mm256_storeu_si256((__m256i *)(acc + (size_t)(d + i) * 16),
                                    _mm512_cvtps_ph(a[i], _MM_FROUND_TO_NEAREST_INT));
        }
    }
    const __m512 inv =
        _mm512_maskz_div_ps(_mm512_cmp_ps_mask(S, _mm512_setzero_ps(), _CMP_NEQ_UQ), one, S);
    for (int32_t d = 0; d < hd; d++) {
        float f[16];
        _mm512_storeu_ps(f, _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256(
                                              (const __m256i *)(acc + (size_t)d * 16))),
                                          inv));
        for (int32_t r = 0; r < nq; r++)
            out[r][d] = f[r];
    }
}

/* attn_rows_f16: the lane kernel over one KV head; other head sizes and wider sets to AVX2's. */
static void avx512_attn_rows_f16(float *const *out, const float *const *q, int32_t nq, int32_t hd,
                                 const struct attn_kv *kv, const int32_t *j0, const int32_t *j1,
                                 float scale, float *scratch)
{
    if (hd % 16 || nq > 16) {
        for (int32_t r = 0; r < nq; r += ATTN_LANES)
            kernels_avx2()->attn_rows_f16(out + r, q + r, nq - r < ATTN_LANES ? nq - r : ATTN_LANES,
                                          hd, kv, j0 + r, j1 + r, scale, scratch);
        return;
    }
    attn16_lanes(out, q, nq, hd, kv, 0, j0, j1, scale, scratch, 1);
}

/* attn_heads_f16: the lane kernel over two or four KV heads (kernels.h). */
static void avx512_attn_heads_f16(float *const *out, const float *const *q, int32_t nq, int32_t nh,
                                  int32_t hd, const struct attn_kv *kv, size_t head_off,
                                  const int32_t *j0, const int32_t *j1, float scale, float *scratch)
{
    if (nh == 4)
        attn16_lanes(out, q, nq, hd, kv, head_off, j0, j1, scale, scratch, 4);
    else if (nh == 2)
        attn16_lanes(out, q, nq, hd, kv, head_off, j0, j1, scale, scratch, 2);
    else
        attn16_lanes(out, q, nq, hd, kv, head_off, j0, j1, scale, scratch, 1);
}

/* o[0..16 nv) += p[c * 16] v_c over keys c0..c1 of the value tile, a sequential fma per dimension.
 */
static inline __attribute__((always_inline)) void attn16_acc_values(float *o, const float *vt,
                                                                    int32_t hd, const float *p,
                                                                    int32_t c0, int32_t c1, int nv)
{
    __m512 r[8];
#pragma GCC unroll 8
    for (int v = 0; v < 8; v++)
        r[v] = v < nv ? _mm512_loadu_ps(o + 16 * v) : _mm512_setzero_ps();
    for (int32_t c = c0; c <= c1; c++) {
        const __m512 pc = _mm512_set1_ps(p[c * 16]);
        const float *vr = vt + (size_t)c * hd;
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++)
            r[v] = _mm512_fmadd_ps(_mm512_loadu_ps(vr + 16 * v), pc, r[v]);
    }
#pragma GCC unroll 8
    for (int v = 0; v < nv; v++)
        _mm512_storeu_ps(o + 16 * v, r[v]);
}

/*
 * attn16_acc_values for four consecutive rows of a 64-value head over the
 * same keys (o: the first row's output, the next ones 64 floats apart; p:
 * the first row's probabilities, the next ones one lane over): each key's
 * value row is loaded once for the four, and each element keeps its own
 * sequential chain.
 */
static inline void attn16_acc_values4(float *o, const float *vt, const float *p, int32_t c0,
                                      int32_t c1)
{
    __m512 r[4][4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++)
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++)
            r[k][v] = _mm512_loadu_ps(o + 64 * k + 16 * v);
    for (int32_t c = c0; c <= c1; c++) {
        const float *vr = vt + (size_t)c * 64;
        __m512 vv[4];
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++)
            vv[v] = _mm512_loadu_ps(vr + 16 * v);
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            const __m512 pc = _mm512_set1_ps(p[c * 16 + k]);
#pragma GCC unroll 4
            for (int v = 0; v < 4; v++)
                r[k][v] = _mm512_fmadd_ps(vv[v], pc, r[k][v]);
        }
    }
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++)
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++)
            _mm512_storeu_ps(o + 64 * k + 16 * v, r[k][v]);
}

/*
 * Scores of the tile of keys from t0 for G groups at once (G constant at each
 * call, so the accumulators stay in registers): each key's fma serves every
 * group's sixteen rows, and each query vector is loaded once for U keys. Key
 * c's score in lane r is still one sequential fma chain over the head
 * dimension, times scale, or -INFINITY outside the lane's keys: what each
 * group alone computes. Writes each group's p and tile maximum T.
 */
static inline __attribute__((always_inline)) void attn16_scores(struct attn_group *const *gs,
                                                                const int G, int32_t t0,
                                                                const float *kt, int32_t hd,
                                                                float scale, int32_t c0, int32_t c1)
{
    enum { U = 6 };
    const __m512 vscale = _mm512_set1_ps(scale), ninf = _mm512_set1_ps(-INFINITY);
    __m512i vjl[4], vjh[4];
    __m512 tmax[4];
    for (int g = 0; g < G; g++) {
        vjl[g]  = _mm512_loadu_si512(gs[g]->jl);
        vjh[g]  = _mm512_loadu_si512(gs[g]->jh);
        tmax[g] = ninf;
    }
    for (int32_t c = 0; c < ATTN_TILE; c += U) {
        const int32_t un = ATTN_TILE - c < U ? ATTN_TILE - c : U;
        if (c + un - 1 < c0 || c > c1) {
            for (int g = 0; g < G; g++)
                for (int32_t u = 0; u < un; u++)
                    _mm512_storeu_ps(gs[g]->p + (c + u) * 16, ninf);
            continue;
        }
        const float *kr[U];
        for (int32_t u = 0; u < U; u++) {
            const int32_t cc = c + u < c0 ? c0 : c + u > c1 ? c1 : c + u;
            kr[u]            = kt + (size_t)cc * hd;
        }
        __m512 a[4][U];
#pragma GCC unroll 4
        for (int g = 0; g < G; g++)
#pragma GCC unroll 6
            for (int u = 0; u < U; u++)
                a[g][u] = _mm512_setzero_ps();
        for (int32_t d = 0; d < hd; d++) {
            __m512 qd[4];
#pragma GCC unroll 4
            for (int g = 0; g < G; g++)
                qd[g] = _mm512_loadu_ps(gs[g]->qt + d * 16);
#pragma GCC unroll 6
            for (int u = 0; u < U; u++) {
                const __m512 kd = _mm512_set1_ps(kr[u][d]);
#pragma GCC unroll 4
                for (int g = 0; g < G; g++)
                    a[g][u] = _mm512_fmadd_ps(kd, qd[g], a[g][u]);
            }
        }
        /* constant bounds: a loop over un would keep a[][] on the stack */
#pragma GCC unroll 4
        for (int g = 0; g < G; g++)
#pragma GCC unroll 6
            for (int32_t u = 0; u < U; u++) {
                if (u >= un)
                    break;
                const __m512i j = _mm512_set1_epi32(t0 + c + u);
                const __mmask16 out_of_range =
                    _mm512_cmpgt_epi32_mask(vjl[g], j) | _mm512_cmpgt_epi32_mask(j, vjh[g]);
                const __m512 sc =
                    _mm512_mask_blend_ps(out_of_range, _mm512_mul_ps(a[g][u], vscale), ninf);
                _mm512_storeu_ps(gs[g]->p + (c + u) * 16, sc);
                tmax[g] = _mm512_max_ps(tmax[g], sc);
            }
    }
    for (int g = 0; g < G; g++)
        _mm512_storeu_ps(gs[g]->T, tmax[g]);
}

/*
 * The rest of a tile for one group, its scores in p and T (attn16_scores),
 * the tile's values in vt as floats: what avx2_attn_rows does for a tile, a
 * lane per row.
 */
static void attn16_tile(struct attn_group *g, int32_t t0, const float *vt, int32_t hd)
{
    const int32_t c0  = g->lo > t0 ? g->lo - t0 : 0;
    const int32_t c1  = g->hi - t0 < ATTN_TILE - 1 ? g->hi - t0 : ATTN_TILE - 1;
    const __m512 ninf = _mm512_set1_ps(-INFINITY), tmax = _mm512_loadu_ps(g->T);
    float *p = g->p;
    /* lanes whose row ref visits this tile */
    int visit = 0;
    for (int32_t r = 0; r < 16; r++)
        visit |= (t0 >= g->tl[r] && t0 <= g->jh[r]) << r;
    const __m512 Mnew = _mm512_max_ps(_mm512_loadu_ps(g->M), tmax);
    float mo[16], mn[16];
    memcpy(mo, g->M, sizeof mo);
    _mm512_storeu_ps(mn, Mnew);
    for (int32_t r = 0; r < g->nq; r++) {
        if (!(visit >> r & 1) || !(mn[r] > mo[r]))
            continue;
        const float ms  = expf(mo[r] - mn[r]);
        const __m512 vm = _mm512_set1_ps(ms);
        for (int32_t d = 0; d < hd; d += 16)
            _mm512_storeu_ps(g->acc + r * hd + d,
                             _mm512_mul_ps(_mm512_loadu_ps(g->acc + r * hd + d), vm));
        g->S[r] *= ms;
    }
    _mm512_storeu_ps(g->M, Mnew);
    /* probabilities and the tile sum, sixteen keys per reduction as ref_softmax_tile */
    __m512d sum_lo = _mm512_setzero_pd(), sum_hi = sum_lo;
    for (int32_t c = 0; c < ATTN_TILE; c += 16) {
        __m512 e[16];
        for (int32_t u = 0; u < 16; u++) {
            const __m512 sc = _mm512_loadu_ps(p + (c + u) * 16);
            /* a key no lane sees is 0 for every lane that visits the tile */
            e[u] = _mm512_cmp_ps_mask(sc, ninf, _CMP_NEQ_OQ) ? v_expf16(_mm512_sub_ps(sc, Mnew))
                                                             : _mm512_setzero_ps();
            _mm512_storeu_ps(p + (c + u) * 16, e[u]);
        }
        __m512 t3[8], t6[4];
        for (int l = 0; l < 8; l++)
            t3[l] = _mm512_add_ps(e[l + 8], e[l]);
        for (int l = 0; l < 4; l++)
            t6[l] = _mm512_add_ps(t3[l + 4], t3[l]);
        const __m512 s16 = _mm512_add_ps(_mm512_add_ps(t6[0], t6[2]), _mm512_add_ps(t6[1], t6[3]));
        sum_lo           = _mm512_add_pd(sum_lo, _mm512_cvtps_pd(_mm512_castps512_ps256(s16)));
        sum_hi           = _mm512_add_pd(sum_hi, _mm512_cvtps_pd(hi256_ps(s16)));
    }
    double sums[16];
    _mm512_storeu_pd(sums, sum_lo);
    _mm512_storeu_pd(sums + 8, sum_hi);
    for (int32_t r = 0; r < g->nq; r++) {
        if (!(visit >> r & 1))
            continue;
        g->S[r]          = (float)((double)g->S[r] + sums[r]);
        const int32_t a0 = g->jl[r] > t0 + c0 ? g->jl[r] - t0 : c0;
        const int32_t a1 = g->jh[r] < t0 + c1 ? g->jh[r] - t0 : c1;
        /* the next rows over the same keys (a token's heads) go together: four rows of a
         * 64-value head are sixteen independent chains, where one row's four wait on fma
         * latency */
        int32_t n4 = 1;
        if (hd == 64)
            while (n4 < 4 && r + n4 < g->nq && visit >> (r + n4) & 1 && g->jl[r + n4] == g->jl[r] &&
                   g->jh[r + n4] == g->jh[r])
                n4++;
        if (n4 == 4) {
            for (int32_t k = 1; k < 4; k++)
                g->S[r + k] = (float)((double)g->S[r + k] + sums[r + k]);
            attn16_acc_values4(g->acc + r * hd, vt, p + r, a0, a1);
            r += 3;
            continue;
        }
        for (int32_t d0 = 0; d0 < hd; d0 += 128) {
            float *o = g->acc + r * hd + d0;
            /* constant widths keep the chunk in registers */
            const int32_t nv = hd - d0 >= 128 ? 8 : (hd - d0) / 16;
            if (nv == 8)
                attn16_acc_values(o, vt + d0, hd, p + r, a0, a1, 8);
            else if (nv == 4)
                attn16_acc_values(o, vt + d0, hd, p + r, a0, a1, 4);
            else
                attn16_acc_values(o, vt + d0, hd, p + r, a0, a1, nv);
        }
    }
}

/*
 * avx2_attn_rows for up to ATTN_LANES_MAX rows of one KV head (sixteen
 * tokens of a GQA group of eight, say), in groups of sixteen lanes: each
 * lane's arithmetic is the eight-lane kernel's, so every row stays
 * bit-identical to ref_attn_row, while each tile of keys and values is
 * converted once for all the rows and stays in L1 across the groups, and
 * each fma serves sixteen rows. The more rows a call takes, the fewer times
 * a long context's keys are read and converted: a warm agent turn of 70
 * tokens at depth 2,000 reads them five times per head, not nine. Heads off
 * the sixteen-float grid go to the AVX2 kernel, in groups of eight.
 */
static void avx512_attn_rows(float *const *out, const float *const *q, int32_t nq, int32_t hd,
                             const struct attn_kv *kv, const int32_t *j0, const int32_t *j1,
                             float scale, float *scratch)
{
    if (hd % 16 || hd > 256) {
        kernels_avx2()->attn_rows(out, q, nq, hd, kv, j0, j1, scale, scratch);
        return;
    }
    float *kt = scratch, *vt = kt + (size_t)ATTN_TILE * hd, *mem = vt + (size_t)ATTN_TILE * hd;
    struct attn_group gs[ATTN_LANES_MAX / 16];
    const int32_t ng = (nq + 15) / 16;
    int32_t lo = INT32_MAX, hi = INT32_MIN;
    for (int32_t k = 0; k < ng; k++) {
        struct attn_group *g = &gs[k];
        attn_group_init(g, 16, q + 16 * k, nq - 16 * k < 16 ? nq - 16 * k : 16, hd, j0 + 16 * k,
                        j1 + 16 * k, mem + (size_t)k * attn_group_floats(16, hd));
        lo = g->lo < lo ? g->lo : lo;
        hi = g->hi > hi ? g->hi : hi;
    }
    for (int32_t t0 = lo - lo % ATTN_TILE; t0 <= hi; t0 += ATTN_TILE) {
        const int32_t c0 = lo > t0 ? lo - t0 : 0;
        const int32_t c1 = hi - t0 < ATTN_TILE - 1 ? hi - t0 : ATTN_TILE - 1;
        for (int32_t c = c0; c <= c1; c++) {
            attn16_load_row(kt + (size_t)c * hd, attn_kv_row(kv->k, kv, t0 + c), hd, kv->f16);
            attn16_load_row(vt + (size_t)c * hd, attn_kv_row(kv->v, kv, t0 + c), hd, kv->f16);
            if (t0 + ATTN_TILE + c <= hi)
                attn_prefetch_kv(kv, t0 + ATTN_TILE + c, hd);
        }
        struct attn_group *vis[ATTN_LANES_MAX / 16];
        int32_t s0, s1;
        const int nv = attn_groups_visiting(gs, ng, t0, vis, &s0, &s1);
        for (int k = 0; k < nv; k += 4)
            switch (nv - k) {
            case 1:
                attn16_scores(vis + k, 1, t0, kt, hd, scale, s0, s1);
                break;
            case 2:
                attn16_scores(vis + k, 2, t0, kt, hd, scale, s0, s1);
                break;
            case 3:
                attn16_scores(vis + k, 3, t0, kt, hd, scale, s0, s1);
                break;
            default:
                attn16_scores(vis + k, 4, t0, kt, hd, scale, s0, s1);
                break;
            }
        for (int k = 0; k < nv; k++)
            attn16_tile(vis[k], t0, vt, hd);
    }
    for (int32_t k = 0; k < ng; k++)
        for (int32_t r = 0; r < gs[k].nq; r++) {
            const __m512 inv = _mm512_set1_ps(gs[k].S[r] == 0.0f ? 0.0f : 1.0f / gs[k].S[r]);
            for (int32_t d = 0; d < hd; d += 16)
                _mm512_storeu_ps(out[16 * k + r] + d,
                                 _mm512_mul_ps(_mm512_loadu_ps(gs[k].acc + r * hd + d), inv));
        }
}

/* ---------------------------------------------------------------- int8 peak */

#if !defined(HEARTH_AVX512_SIMDE) /* a peak is only worth measuring on the real thing */
/* Twelve independent 512-bit vpdpbusd chains: enough to cover the latency on two ports. */
static double avx512_int8_probe(int64_t rounds)
{
    __m512i acc[12];
    __m512i u = _mm512_set1_epi8(3), v = _mm512_set1_epi8(5);
    for (int i = 0; i < 12; i++)
        acc[i] = _mm512_set1_epi32(i);
    for (int64_t it = 0; it < rounds; it++) {
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++)
            acc[i] = _mm512_dpbusd_epi32(acc[i], u, v);
        __asm__ volatile("" : "+v"(u), "+v"(v)); /* keeps the operands from folding */
    }
    /* folded with xor: the chains wrap around by design, and a sum of them would overflow */
    __m512i x = acc[0];
    for (int i = 1; i < 12; i++)
        x = _mm512_xor_si512(x, acc[i]);
    const int32_t sink = _mm_cvtsi128_si32(_mm512_castsi512_si128(x));
    __asm__ volatile("" : : "r"(sink));
    return (double)rounds * 12 * 64 * 2;
}
#endif

/* ---------------------------------------------------------------- the table */

static struct kernels table;
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

/* The AVX2 table (every AVX-512 CPU runs it) with this file's kernels in place. */
static void table_init(void)
{
    table                          = *kernels_avx2();
    table.name                     = "avx512";
    table.type[DTYPE_Q8_0].gemm8   = avx512_gemm8_q8_0;
    table.type[DTYPE_Q4_0].gemm8p  = avx512_gemm8p_q4_0;
    table.type[DTYPE_Q4_0].gemm16p = avx512_gemm16p_q4_0;
    table.type[DTYPE_Q4_0].pack16  = true;
    table.type[DTYPE_Q4_K].gemm8p  = avx512_gemm8p_q4_k;
    table.type[DTYPE_Q4_K].gemm16p = avx512_gemm16p_q4_k;
    table.type[DTYPE_Q4_K].pack16  = true;
    table.type[DTYPE_Q6_K].gemm8   = avx512_gemm8_q6_k;
    table.attn_rows                = avx512_attn_rows;
    table.attn_rows_lanes          = ATTN_LANES_MAX;
    table.attn_rows_f16            = avx512_attn_rows_f16;
    table.attn_rows_f16_lanes      = 16;
    table.attn_heads_f16           = avx512_attn_heads_f16;
    table.expf_libm                = avx512_expf_libm;
#if !defined(HEARTH_AVX512_SIMDE)
    table.int8_probe = avx512_int8_probe;
#endif
}

const struct kernels *kernels_avx512(void)
{
    if (!kernels_avx2())
        return NULL;
    pthread_once(&table_once, table_init);
    return &table;
}

#else

const struct kernels *kernels_avx512(void)
{
    return NULL;
}

#endif
