/*
 * x86_amx.c: the kernel table for x86-64 with AMX-INT8 (Sapphire Rapids and
 * later Xeons): the AVX-512 table with packed Q4_0's and Q4_K's gemm16p
 * done on AMX tiles for batches of sixteen tokens and more.
 *
 * The bits stay the AVX-512 kernel's. That kernel computes, per token, row
 * and block, the exact integer sum of the block's 32 products (the nibbles'
 * offset of 8 taken off), then one fma in block order: acc = fma(float(sum),
 * d_w * d_a, acc). One tdpbssd over a block of sixteen tokens (A: their
 * activation quants, 16 x 32 bytes) and sixteen rows (B: the nibbles less 8,
 * in the VNNI order a pack16 block already has: chunk k's low nibbles are
 * B's row k, its high ones row 4 + k) gives those 256 exact sums at once;
 * the float steps after it are the AVX-512 kernel's, lane for lane. What
 * changes is where the time goes: the integer work of sixteen tokens is one
 * tile instruction instead of 128 vpdpbusd, leaving the convert, the scale
 * product and the fma per token and sixteen rows.
 *
 * Q4_K's sums are exact per 32-element sub-block in its AVX-512 kernel
 * too (then times the sub-block's scale), so a tdpbsud per sub-block (the
 * nibbles unsigned, no offset) gives them the same way.
 *
 * A pair's blocks are unpacked into B tiles once per chunk of blocks and
 * reused by every tile of tokens. Fewer than a tile of tokens (decode,
 * verify steps) stay with the AVX-512 kernel.
 *
 * `make avx512-test` builds this file on SIMDe with portable tiles
 * (HEARTH_AMX_EMU) so an AVX2 host holds it to the reference too.
 */
#include "kernels/ref.h"

#include <stddef.h>

/* gcc names the AMX macros __AMX_TILE__ and __AMX_INT8__, clang __AMXTILE__ and __AMXINT8__ */
#if defined(__AMX_TILE__) && defined(__AMX_INT8__) || defined(__AMXTILE__) && defined(__AMXINT8__)
#define HEARTH_AMX_BUILT 1
#endif

#if defined(__x86_64__) &&                                                                         \
    (defined(HEARTH_AMX_EMU) || (defined(__AVX512F__) && defined(__AVX512BW__) &&                  \
                                 defined(__AVX512VNNI__) && defined(HEARTH_AMX_BUILT)))

#include "kernels/x86_avx512_common.h"

#include <immintrin.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdbool.h>
#include <string.h>

#include "kernels/x86_common.h"
#include "util/dtype_blocks.h"

/* ---------------------------------------------------------------- tiles */

/*
 * The tiles this file uses: two A and B, four C, so one block's tile work
 * overlaps the float steps of earlier ones. Literal numbers: the
 * intrinsics paste them into a register name.
 */
#define TILE_A0 0
#define TILE_A1 1
#define TILE_B0 2
#define TILE_B1 3
#define TILE_C0 4
#define TILE_C1 5
#define TILE_C2 6
#define TILE_C3 7

/* LDTILECFG's 64-byte operand, palette 1. */
struct tile_config {
    uint8_t palette, start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
};

#if defined(HEARTH_AMX_EMU)
/* Tiles in memory, each instruction as the ISA defines it, for hosts without AMX (make
 * avx512-test). */
static _Thread_local struct {
    alignas(64) struct tile_config cfg;
    alignas(64) uint8_t t[8][16][64];
} emu;

static void emu_loadconfig(const struct tile_config *c)
{
    emu.cfg = *c;
    memset(emu.t, 0, sizeof emu.t);
}

static void emu_loadd(int i, const void *p, size_t stride)
{
    for (int r = 0; r < emu.cfg.rows[i]; r++)
        memcpy(emu.t[i][r], (const uint8_t *)p + (size_t)r * stride, emu.cfg.colsb[i]);
}

static void emu_stored(int i, void *p, size_t stride)
{
    for (int r = 0; r < emu.cfg.rows[i]; r++)
        memcpy((uint8_t *)p + (size_t)r * stride, emu.t[i][r], emu.cfg.colsb[i]);
}

/* tdpbssd (b_signed) and tdpbsud: C += A x B over four-byte groups, A's bytes signed. */
static void emu_dp(int c, int a, int b, bool b_signed)
{
    for (int m = 0; m < emu.cfg.rows[c]; m++)
        for (int n = 0; n < emu.cfg.colsb[c] / 4; n++) {
            int32_t s;
            memcpy(&s, &emu.t[c][m][4 * n], sizeof s);
            for (int k = 0; k < emu.cfg.colsb[a] / 4; k++)
                for (int i = 0; i < 4; i++) {
                    const uint8_t w = emu.t[b][k][4 * n + i];
                    s += (int8_t)emu.t[a][m][4 * k + i] * (b_signed ? (int32_t)(int8_t)w : w);
                }
            memcpy(&emu.t[c][m][4 * n], &s, sizeof s);
        }
}

#define tile_loadconfig(c)   emu_loadconfig(c)
#define tile_loadd(i, p, s)  emu_loadd(i, p, s)
#define tile_stored(i, p, s) emu_stored(i, p, s)
#define tile_zero(i)         memset(emu.t[i], 0, sizeof emu.t[i])
#define tile_dpbssd(c, a, b) emu_dp(c, a, b, true)
#define tile_dpbsud(c, a, b) emu_dp(c, a, b, false)
#else
/*
 * gcc 12's _tile_loadconfig tells the compiler it reads 8 bytes of its
 * 64-byte operand, so the stores that fill the rest were dropped as dead
 * (every tile unconfigured, SIGILL at the first tile load): the empty asm
 * makes all of it live.
 */
/* clang-format off */
#define tile_loadconfig(c)                                                                         \
    do {                                                                                           \
        __asm__ volatile("" : : "m"(*(c)) : "memory");                                             \
        _tile_loadconfig(c);                                                                       \
    } while (0)
/* clang-format on */
#define tile_loadd(i, p, s)  _tile_loadd(i, p, s)
#define tile_stored(i, p, s) _tile_stored(i, p, s)
#define tile_zero(i)         _tile_zero(i)
#define tile_dpbssd(c, a, b) _tile_dpbssd(c, a, b)
#define tile_dpbsud(c, a, b) _tile_dpbsud(c, a, b)
#endif

/*
 * The tile shapes for m tokens: A m x 32 bytes (one block of each token's
 * quants), B 8 x 64 (a block of sixteen rows), C m x 16 int32. The
 * configuration is a thread's state; loaded again only when m changes.
 */
static _Thread_local int tiles_rows;

static void tiles_for(int m)
{
    if (tiles_rows == m)
        return;
    alignas(64) struct tile_config c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int i = TILE_A0; i <= TILE_A1; i++)
        c.rows[i] = (uint8_t)m, c.colsb[i] = 32;
    for (int i = TILE_B0; i <= TILE_B1; i++)
        c.rows[i] = 8, c.colsb[i] = 64;
    for (int i = TILE_C0; i <= TILE_C3; i++)
        c.rows[i] = (uint8_t)m, c.colsb[i] = 64;
    tile_loadconfig(&c);
    tiles_rows = m;
}

/* ---------------------------------------------------------------- packed Q4_0 */

/* Blocks unpacked at a time: 16 KiB of B tiles, in L1 while every tile of tokens reads them. */
#define AMX_KB 32
/*
 * Fewer tokens stay with the AVX-512 kernel: the unpack and the tile
 * traffic cost more than its vpdpbusd below a full tile (bench-1b's
 * 2048 x 2048 on a Xeon with AMX, one thread: 4 tokens 0.64x, 8 0.76x, 12
 * 0.86x, 16 1.02x, 32 1.18x, 64 1.33x).
 */
#define AMX_MIN_TOKENS 16
/* Tokens whose accumulators one call keeps (matmul hands at most 64 at once). */
#define AMX_TOKENS 64

/*
 * Blocks b0..b0+bn of a pack16 pair as B tiles (bt[j]: eight rows of 64
 * signed bytes) and their sixteen row scales (dw[j]). stream: the first
 * pass over the pair, which fetches ahead as the AVX-512 pass does.
 */
static void q4p16_unpack(const uint8_t *wp, int64_t b0, int64_t bn, bool stream,
                         int8_t (*bt)[8 * 64], float (*dw)[16])
{
    const size_t gl   = 8 * sizeof(struct block_q4_0);
    const __m512i m4  = _mm512_set1_epi8(0x0F);
    const __m512i off = _mm512_set1_epi8(8);
    for (int64_t j = 0; j < bn; j++) {
        const uint8_t *g0 = wp + (b0 + j) * 2 * gl, *g1 = g0 + gl;
        if (stream)
            q40p16_prefetch(g0);
        _mm512_store_ps(dw[j], pair_ph(g0, g1));
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            const __m512i v  = pair256(g0 + 16 + 32 * k, g1 + 16 + 32 * k);
            const __m512i lo = _mm512_sub_epi8(_mm512_and_si512(v, m4), off);
            const __m512i hi = _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4), off);
            _mm512_store_si512((__m512i *)(bt[j] + 64 * k), lo);
            _mm512_store_si512((__m512i *)(bt[j] + 64 * (4 + k)), hi);
        }
    }
}

/*
 * One block's float steps for NT tokens (a constant where inlined; rows of
 * c past the tile's tokens hold zeros, their sums never stored): the AVX-512
 * kernel's acc = fma(float(sum), d_w * d_a, acc). d[tt]: token tt's
 * activation scales, one per block.
 */
static inline __attribute__((always_inline)) void
q4p16_block_fma(const int32_t (*c)[16], const float *dw, const struct q8_0_sum *const d[16],
                int64_t b, const int NT, __m512 acc[16])
{
    const __m512 w = _mm512_load_ps(dw);
#pragma GCC unroll 16
    for (int tt = 0; tt < NT; tt++)
        acc[tt] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512((const __m512i *)c[tt])),
                                  _mm512_mul_ps(w, _mm512_set1_ps(d[tt][b].d)), acc[tt]);
}

/*
 * Block x of the chunk against the tile of tokens: its 256 exact sums into
 * cbuf, through A tile ta, B tile tb and C tile tc (literal numbers).
 */
/* clang-format off */
#define Q4P16_TILE_BLOCK(x, ta, tb, tc, cbuf)                                                      \
    do {                                                                                           \
        tile_zero(tc);                                                                             \
        tile_loadd(ta, qa + (b0 + (x)) * sizeof(struct block_q8_0), a_row);                        \
        tile_loadd(tb, bt[x], 64);                                                                 \
        tile_dpbssd(tc, ta, tb);                                                                   \
        tile_stored(tc, cbuf, 64);                                                                 \
    } while (0)
/* clang-format on */

/*
 * Blocks b0..b0+bn of the unpacked chunk against tokens t0..t0+tn (tn <=
 * 16; the tiles configured for tn), accumulated into acc[0..NT) (NT >= tn,
 * a constant where inlined; its rows past tn repeat the last token's
 * scales). Tiles are not renamed, so the sums of the next two blocks go
 * to the other two C tiles and buffers while this pair's float steps run:
 * a block's tile work, and its store's trip to L1, overlap the float
 * steps of the two before it.
 */
static inline __attribute__((always_inline)) void
q4p16_tiles(const uint8_t *a, size_t a_row, const struct q8_0_sum *as, int64_t nb, int32_t t0,
            int32_t tn, int64_t b0, int64_t bn, const int8_t (*bt)[8 * 64], const float (*dw)[16],
            const int NT, float (*accm)[16])
{
    alignas(64) int32_t c[4][16][16];
    if (tn < NT) /* the rows past tn, never stored, are read: zeros rather than old stack */
        memset(c, 0, sizeof c);
    const struct q8_0_sum *d[16];
    for (int tt = 0; tt < 16; tt++)
        d[tt] = as + (size_t)(t0 + (tt < tn ? tt : tn - 1)) * nb;
    __m512 acc[16];
    for (int tt = 0; tt < NT; tt++)
        acc[tt] = _mm512_load_ps(accm[tt]);
    const uint8_t *qa            = a + (size_t)t0 * a_row + offsetof(struct block_q8_0, qs);
    const int32_t(*const c0)[16] = (const int32_t(*)[16])c[0];
    const int32_t(*const c1)[16] = (const int32_t(*)[16])c[1];
    const int32_t(*const c2)[16] = (const int32_t(*)[16])c[2];
    const int32_t(*const c3)[16] = (const int32_t(*)[16])c[3];
    Q4P16_TILE_BLOCK(0, TILE_A0, TILE_B0, TILE_C0, c[0]);
    if (bn > 1)
        Q4P16_TILE_BLOCK(1, TILE_A1, TILE_B1, TILE_C1, c[1]);
    for (int64_t j = 0; j < bn; j += 4) {
        if (j + 2 < bn)
            Q4P16_TILE_BLOCK(j + 2, TILE_A0, TILE_B0, TILE_C2, c[2]);
        if (j + 3 < bn)
            Q4P16_TILE_BLOCK(j + 3, TILE_A1, TILE_B1, TILE_C3, c[3]);
        q4p16_block_fma(c0, dw[j], d, b0 + j, NT, acc);
        if (j + 1 < bn)
            q4p16_block_fma(c1, dw[j + 1], d, b0 + j + 1, NT, acc);
        if (j + 4 < bn)
            Q4P16_TILE_BLOCK(j + 4, TILE_A0, TILE_B0, TILE_C0, c[0]);
        if (j + 5 < bn)
            Q4P16_TILE_BLOCK(j + 5, TILE_A1, TILE_B1, TILE_C1, c[1]);
        if (j + 2 < bn)
            q4p16_block_fma(c2, dw[j + 2], d, b0 + j + 2, NT, acc);
        if (j + 3 < bn)
            q4p16_block_fma(c3, dw[j + 3], d, b0 + j + 3, NT, acc);
    }
    for (int tt = 0; tt < NT; tt++)
        _mm512_store_ps(accm[tt], acc[tt]);
}

/*
 * gemm16p over a pack16 pair of Q4_0 groups on tiles: the same sums as
 * the AVX-512 kernel's, bit for bit, for any number of tokens. Tokens in
 * chunks of AMX_TOKENS, blocks in chunks of AMX_KB unpacked once per chunk
 * of tokens, tokens in tiles of sixteen within; a last tile of fewer takes
 * the tiles configured for its count and the float steps of the next
 * power of two.
 */
static void amx_gemm16p_q4_0(int64_t n, const void *wp, const void *a, size_t a_row,
                             const struct q8_0_sum *as, int32_t n_tok, float *s, size_t s_stride)
{
    if (n_tok < AMX_MIN_TOKENS) {
        kernels_avx512()->type[DTYPE_Q4_0].gemm16p(n, wp, a, a_row, as, n_tok, s, s_stride);
        return;
    }
    const int64_t nb = n / QK4_0;
    alignas(64) int8_t bt[AMX_KB][8 * 64];
    alignas(64) float dw[AMX_KB][16];
    alignas(64) float accm[AMX_TOKENS][16];
    for (int32_t c0 = 0; c0 < n_tok; c0 += AMX_TOKENS) {
        const int32_t cn           = n_tok - c0 < AMX_TOKENS ? n_tok - c0 : AMX_TOKENS;
        const uint8_t *ac          = (const uint8_t *)a + (size_t)c0 * a_row;
        const struct q8_0_sum *asc = as + (size_t)c0 * nb;
        memset(accm, 0, sizeof accm);
        for (int64_t b0 = 0; b0 < nb; b0 += AMX_KB) {
            const int64_t bn = nb - b0 < AMX_KB ? nb - b0 : AMX_KB;
            q4p16_unpack(wp, b0, bn, c0 == 0, bt, dw);
            for (int32_t t0 = 0; t0 < cn; t0 += 16) {
                const int32_t tn           = cn - t0 < 16 ? cn - t0 : 16;
                const int8_t(*btc)[8 * 64] = (const int8_t(*)[8 * 64]) bt;
                const float(*dwc)[16]      = (const float(*)[16])dw;
                tiles_for(tn);
                if (tn > 8)
                    q4p16_tiles(ac, a_row, asc, nb, t0, tn, b0, bn, btc, dwc, 16, accm + t0);
                else if (tn > 4)
                    q4p16_tiles(ac, a_row, asc, nb, t0, tn, b0, bn, btc, dwc, 8, accm + t0);
                else
                    q4p16_tiles(ac, a_row, asc, nb, t0, tn, b0, bn, btc, dwc, 4, accm + t0);
            }
        }
        for (int32_t t = 0; t < cn; t++)
            memcpy(s + (size_t)(c0 + t) * s_stride, accm[t], sizeof accm[t]);
    }
}

/* ---------------------------------------------------------------- packed Q4_K */

/*
 * One superblock of a pack16 pair of Q4_K groups, unpacked: each
 * sub-block's nibbles as a B tile (unsigned, for tdpbsud; sub-block 2g is
 * group g's low nibbles, 2g + 1 its high ones, already in VNNI order), and
 * the sixteen rows' scales, min pairs and two f16 scales as lanes, as the
 * AVX-512 kernel forms them.
 */
struct q4k_unpacked {
    alignas(64) uint8_t bt[8][8 * 64];
    alignas(64) float sc[8][16]; /* the 6-bit scales as floats */
    alignas(64) int32_t mn[4][16];
    alignas(64) float dw[16];
    alignas(64) float dmw[16];
};

/* Superblocks unpacked at a time: 20 KiB, in L1 while every tile of tokens reads them. */
#define AMX_KB_Q4K 4

static void q4kp16_unpack(const uint8_t *wp, int64_t b0, int64_t bn, bool stream,
                          struct q4k_unpacked *u)
{
    const size_t gl  = 8 * sizeof(struct block_q4_K);
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    for (int64_t j = 0; j < bn; j++) {
        const uint8_t *p0 = wp + (size_t)(b0 + j) * 2 * gl, *p1 = p0 + gl;
        if (stream)
            q4kp_prefetch(p0, 2 * gl);
        uint8_t e0[4][32], e1[4][32];
        q4kp_entries(p0, e0);
        q4kp_entries(p1, e1);
        _mm512_store_ps(u[j].dw, pair_ph(p0, p1));
        _mm512_store_ps(u[j].dmw, pair_ph(p0 + 16, p1 + 16));
        for (int i = 0; i < 8; i++)
            _mm512_store_ps(u[j].sc[i], _mm512_cvtepi32_ps(
                                            join256(q4kp_entry(e0, 0, i), q4kp_entry(e1, 0, i))));
        for (int g = 0; g < 4; g++) {
            _mm512_store_si512((__m512i *)u[j].mn[g], join256(q4kp_mn(e0, g), q4kp_mn(e1, g)));
            const uint8_t *q0 = p0 + 128 + 256 * g, *q1 = p1 + 128 + 256 * g;
#pragma GCC unroll 8
            for (int k = 0; k < 8; k++) {
                const __m512i v = pair256(q0 + 32 * k, q1 + 32 * k);
                _mm512_store_si512((__m512i *)(u[j].bt[2 * g] + 64 * k), _mm512_and_si512(v, m4));
                _mm512_store_si512((__m512i *)(u[j].bt[2 * g + 1] + 64 * k),
                                   _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
            }
        }
    }
}

/* Sub-block x of superblock b against the tile of tokens, through literal tiles, into cbuf. */
/* clang-format off */
#define Q4K_TILE_SUB(x, ta, tb, tc, cbuf)                                                          \
    do {                                                                                           \
        tile_zero(tc);                                                                             \
        tile_loadd(ta, qa + (size_t)b * sizeof(struct block_q8_K) + 32 * (x), a_row);              \
        tile_loadd(tb, u->bt[x], 64);                                                              \
        tile_dpbsud(tc, ta, tb);                                                                   \
        tile_stored(tc, cbuf[x], 64);                                                              \
    } while (0)
/* clang-format on */

/* A superblock's eight sub-blocks' sums for the tile of tokens, into cbuf[0..8). */
static inline __attribute__((always_inline)) void q4kp16_tile_sums(const uint8_t *qa, size_t a_row,
                                                                   int64_t b,
                                                                   const struct q4k_unpacked *u,
                                                                   int32_t (*cbuf)[16][16])
{
    Q4K_TILE_SUB(0, TILE_A0, TILE_B0, TILE_C0, cbuf);
    Q4K_TILE_SUB(1, TILE_A1, TILE_B1, TILE_C1, cbuf);
    Q4K_TILE_SUB(2, TILE_A0, TILE_B0, TILE_C2, cbuf);
    Q4K_TILE_SUB(3, TILE_A1, TILE_B1, TILE_C3, cbuf);
    Q4K_TILE_SUB(4, TILE_A0, TILE_B0, TILE_C0, cbuf);
    Q4K_TILE_SUB(5, TILE_A1, TILE_B1, TILE_C1, cbuf);
    Q4K_TILE_SUB(6, TILE_A0, TILE_B0, TILE_C2, cbuf);
    Q4K_TILE_SUB(7, TILE_A1, TILE_B1, TILE_C3, cbuf);
}

/*
 * A superblock's float steps for NT tokens from tt0 of the tile (a
 * constant where inlined), in the AVX-512 kernel's quad order: per pair of
 * sub-blocks g, ig = sum_j(sum_j * scale_j) and mg = the min pairs times
 * the activation sums, each into its chain, acc = fma(float(ig), d_w *
 * d_a, acc) and acc_m = fma(float(mg), dmin_w * d_a, acc_m). ig is formed
 * in floats, where the kernel multiplies integers: a sub-block's sum is at
 * most 32 * 15 * 127 < 2^16 in size, times a scale below 2^6, so both
 * products and their sum (< 2^23) are exact in a float's 24 bits and ig
 * is the same number, for a convert and a multiply less than two vpmulld
 * (two uops each). y[tt]: the token's activation rows.
 */
static inline __attribute__((always_inline)) void
q4kp16_sb_fma(const int32_t (*cbuf)[16][16], const struct q4k_unpacked *u,
              const struct block_q8_K *const *y, int64_t b, int tt0, const int NT,
              float (*accm)[16], float (*accm_m)[16])
{
    const __m512 dw = _mm512_load_ps(u->dw), dmw = _mm512_load_ps(u->dmw);
#pragma GCC unroll 8
    for (int i = 0; i < NT; i++) {
        const int tt               = tt0 + i;
        const struct block_q8_K *q = &y[tt][b];
        const __m512 da            = _mm512_set1_ps(q->d);
        const __m512 d = _mm512_mul_ps(dw, da), dm = _mm512_mul_ps(dmw, da);
        int32_t bp[4];
        _mm_storeu_si128((__m128i *)bp, q8k_bsum_pairs(q));
        __m512 acc = _mm512_load_ps(accm[tt]), acc_m = _mm512_load_ps(accm_m[tt]);
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++) {
            const __m512 ig = _mm512_fmadd_ps(
                _mm512_cvtepi32_ps(_mm512_load_si512((const __m512i *)cbuf[2 * g][tt])),
                _mm512_load_ps(u->sc[2 * g]),
                _mm512_mul_ps(
                    _mm512_cvtepi32_ps(_mm512_load_si512((const __m512i *)cbuf[2 * g + 1][tt])),
                    _mm512_load_ps(u->sc[2 * g + 1])));
            const __m512i mg = _mm512_madd_epi16(_mm512_load_si512((const __m512i *)u->mn[g]),
                                                 _mm512_set1_epi32(bp[g]));
            acc              = _mm512_fmadd_ps(ig, d, acc);
            acc_m            = _mm512_fmadd_ps(_mm512_cvtepi32_ps(mg), dm, acc_m);
        }
        _mm512_store_ps(accm[tt], acc);
        _mm512_store_ps(accm_m[tt], acc_m);
    }
}

/*
 * gemm16p over a pack16 pair of Q4_K groups, the AVX-512 kernel's bits:
 * tokens in whole fours take its quad order on tiles (tdpbsud: the
 * activations signed, the nibbles unsigned; each sub-block's exact sum
 * then times its scale, as its vpdpbusd sums are), sixteen to a tile, the
 * sums of a superblock's eight sub-blocks through memory a superblock
 * ahead of its float steps; the last one to three tokens, which it sums in
 * the gemv order, and calls of fewer than a tile, go to it.
 */
static void amx_gemm16p_q4_k(int64_t n, const void *wp, const void *a, size_t a_row,
                             const struct q8_0_sum *as, int32_t n_tok, float *s, size_t s_stride)
{
    const struct type_kernels *k512 = &kernels_avx512()->type[DTYPE_Q4_K];
    const int32_t quads             = n_tok / 4 * 4;
    if (quads < AMX_MIN_TOKENS) {
        k512->gemm16p(n, wp, a, a_row, as, n_tok, s, s_stride);
        return;
    }
    const int64_t nb = n / QK_K;
    struct q4k_unpacked u[AMX_KB_Q4K];
    alignas(64) int32_t cbuf[2][8][16][16];
    alignas(64) float accm[AMX_TOKENS][16], accm_m[AMX_TOKENS][16];
    const struct block_q8_K *y[AMX_TOKENS];
    for (int32_t c0 = 0; c0 < quads; c0 += AMX_TOKENS) {
        const int32_t cn = quads - c0 < AMX_TOKENS ? quads - c0 : AMX_TOKENS;
        for (int32_t t = 0; t < cn; t++)
            y[t] = (const struct block_q8_K *)((const uint8_t *)a + (size_t)(c0 + t) * a_row);
        memset(accm, 0, sizeof accm);
        memset(accm_m, 0, sizeof accm_m);
        for (int64_t b0 = 0; b0 < nb; b0 += AMX_KB_Q4K) {
            const int64_t bn = nb - b0 < AMX_KB_Q4K ? nb - b0 : AMX_KB_Q4K;
            q4kp16_unpack(wp, b0, bn, c0 == 0, u);
            for (int32_t t0 = 0; t0 < cn; t0 += 16) {
                const int32_t tn  = cn - t0 < 16 ? cn - t0 : 16; /* 4, 8, 12 or 16 */
                const uint8_t *qa = (const uint8_t *)y[t0] + offsetof(struct block_q8_K, qs);
                tiles_for(tn);
                q4kp16_tile_sums(qa, a_row, b0, &u[0], cbuf[0]);
                for (int64_t j = 0; j < bn; j++) {
                    if (j + 1 < bn)
                        q4kp16_tile_sums(qa, a_row, b0 + j + 1, &u[j + 1], cbuf[(j + 1) & 1]);
                    const int32_t(*cb)[16][16] = (const int32_t(*)[16][16])cbuf[j & 1];
                    for (int32_t i = 0; i < tn; i += 4)
                        q4kp16_sb_fma(cb, &u[j], y + t0, b0 + j, i, 4, accm + t0, accm_m + t0);
                }
            }
        }
        for (int32_t t = 0; t < cn; t++)
            _mm512_storeu_ps(s + (size_t)(c0 + t) * s_stride,
                             _mm512_sub_ps(_mm512_load_ps(accm[t]), _mm512_load_ps(accm_m[t])));
    }
    if (quads < n_tok)
        k512->gemm16p(n, wp, (const uint8_t *)a + (size_t)quads * a_row, a_row, as, n_tok - quads,
                      s + (size_t)quads * s_stride, s_stride);
}

/* ---------------------------------------------------------------- int8 peak */

#if !defined(HEARTH_AMX_EMU)
/*
 * tdpbssd back to back on four accumulator tiles of 16 x 16 over 64-byte
 * rows: the int8 peak a tile unit gives (each 16 x 16 x 64 multiply-adds).
 */
static double amx_int8_probe(int64_t rounds)
{
    alignas(64) struct tile_config c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int i = 0; i < 8; i++)
        c.rows[i] = 16, c.colsb[i] = 64;
    tile_loadconfig(&c);
    tiles_rows = 0;
    alignas(64) int8_t src[16][64];
    memset(src, 1, sizeof src);
    _tile_loadd(4, src, 64);
    _tile_loadd(5, src, 64);
    _tile_loadd(6, src, 64);
    _tile_loadd(7, src, 64);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int64_t it = 0; it < rounds; it++) {
        _tile_dpbssd(0, 4, 5);
        _tile_dpbssd(1, 4, 6);
        _tile_dpbssd(2, 7, 5);
        _tile_dpbssd(3, 7, 6);
    }
    alignas(64) int32_t out[16][16];
    _tile_stored(0, out, 64);
    __asm__ volatile("" : : "r"(out[0][0]));
    return (double)rounds * 4 * 16 * 16 * 64 * 2;
}
#endif

/* ---------------------------------------------------------------- the table */

static struct kernels table;
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

/* The AVX-512 table (every AMX CPU runs it) with this file's kernels in place. */
static void table_init(void)
{
    table                          = *kernels_avx512();
    table.name                     = "amx";
    table.type[DTYPE_Q4_0].gemm16p = amx_gemm16p_q4_0;
    table.type[DTYPE_Q4_K].gemm16p = amx_gemm16p_q4_k;
#if !defined(HEARTH_AMX_EMU)
    table.int8_probe = amx_int8_probe;
#endif
}

const struct kernels *kernels_amx(void)
{
    if (!kernels_avx512())
        return NULL;
    pthread_once(&table_once, table_init);
    return &table;
}

#else

const struct kernels *kernels_amx(void)
{
    return NULL;
}

#endif
