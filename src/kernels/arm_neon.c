/*
 * arm_neon.c: the kernel table for AArch64. Advanced SIMD is architectural
 * there, so this file uses base ARMv8.0-A NEON only (no dotprod, i8mm or
 * fp16 arithmetic) and the dispatcher needs no run-time check beyond being
 * built for aarch64. Compiled with -ffp-contract=off: a product and a sum
 * written apart stay two roundings, as in the reference.
 *
 * Nearly every entry gives the reference's bits, not just its accuracy: the
 * integer sums of the quantized dots are exact in any order, so NEON takes
 * them (widening multiplies and pairwise adds), and the float arithmetic
 * around them (the per-block fma chains, tinyBLAS's eight lanes, the
 * K-quants' per-superblock multiplies) is the reference's, operation for
 * operation. The exceptions are the f32/f16/bf16 dot products and
 * rmsnorm's sum of squares: the reference adds in double one element at a
 * time, here two double lanes do. The tests bound those.
 *
 * Vectorized: conversions to and from f16/bf16, the Q8_0/Q8_1/Q8_K
 * activation quantizers, vec_dot of every weight type, gemm8 for Q8_0,
 * Q6_K and Q4_K (llama.cpp's quad order), gemm8p over the reference's
 * packed Q4_0 and Q4_K layouts (pack8 is ref's, so every table packs
 * alike), attention and the float ops. The quantized types' to_float, the
 * weight quantizers and the F32 copies (not on the inference path) are ref.c's.
 */
#include "kernels/ref.h"

#include <stddef.h>

#if defined(__aarch64__)

#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "util/dtype_blocks.h"
#include "util/fp16.h"

/* ---------------------------------------------------------------- helpers */

/* A stored half as a float; FCVT decodes every non-NaN half as fp16_to_fp32 does. */
static inline float half(uint16_t h)
{
    return vget_lane_f32(vget_low_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h)))), 0);
}

static inline float32x4_t load_f16x4(const uint16_t *p)
{
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
}

static inline float32x4_t load_bf16x4(const uint16_t *p)
{
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16));
}

/* Adds the four float products of v to two double lanes (the reference sums in double). */
static inline float64x2_t acc_f64(float64x2_t acc, float32x4_t v)
{
    return vaddq_f64(vaddq_f64(acc, vcvt_f64_f32(vget_low_f32(v))), vcvt_high_f64_f32(v));
}

/* Partial sums (4 int32 lanes) of a[i] * b[i] over 16 int8 pairs, added to acc. Exact. */
static inline int32x4_t dot16(int32x4_t acc, int8x16_t a, int8x16_t b)
{
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
    return vpadalq_s16(acc, vmull_high_s8(a, b));
}

/* The four lane sums of v0..v3, in one vector. */
static inline int32x4_t hsum4_s32(int32x4_t v0, int32x4_t v1, int32x4_t v2, int32x4_t v3)
{
    return vpaddq_s32(vpaddq_s32(v0, v1), vpaddq_s32(v2, v3));
}

/* The 32 quants of a Q4_0-style block (low nibbles are elements 0..15), unsigned 0..15. */
static inline void nibbles32(const uint8_t *qs, int8x16_t *lo, int8x16_t *hi)
{
    const uint8x16_t b = vld1q_u8(qs);
    *lo                = vreinterpretq_s8_u8(vandq_u8(b, vdupq_n_u8(0x0F)));
    *hi                = vreinterpretq_s8_u8(vshrq_n_u8(b, 4));
}

/* Byte j of lo (hi): 0xFF where bit j (16 + j) of the 32 bits at p is set, else 0. */
static inline void bits32_to_bytes(const uint8_t *p, uint8x16_t *lo, uint8x16_t *hi)
{
    static const uint8_t idx_lo[16] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
    static const uint8_t idx_hi[16] = {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
    static const uint8_t bit[16]    = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    uint32_t w;
    memcpy(&w, p, 4);
    const uint8x16_t v = vreinterpretq_u8_u32(vdupq_n_u32(w));
    *lo                = vtstq_u8(vqtbl1q_u8(v, vld1q_u8(idx_lo)), vld1q_u8(bit));
    *hi                = vtstq_u8(vqtbl1q_u8(v, vld1q_u8(idx_hi)), vld1q_u8(bit));
}

/*
 * ggml's vectorized expf in four lanes, bit for bit ref_ggml_expf: 1 + p(b)
 * rounded inside the last fma, times 2^n, which is exact where |n| <= 126;
 * lanes beyond (huge, tiny, infinite inputs) take the scalar definition.
 */
static inline float32x4_t v_expf(float32x4_t x)
{
    const float32x4_t r = vdupq_n_f32(0x1.8p23f);
    const float32x4_t z = vfmaq_f32(r, x, vdupq_n_f32(0x1.715476p+0f));
    const float32x4_t n = vsubq_f32(z, r);
    const float32x4_t b =
        vfmsq_f32(vfmsq_f32(x, n, vdupq_n_f32(0x1.62e4p-1f)), n, vdupq_n_f32(0x1.7f7d1cp-20f));
    const float32x4_t u = vmulq_f32(b, b);
    const float32x4_t j = vfmaq_f32(
        vfmaq_f32(vdupq_n_f32(1.0f), vdupq_n_f32(0x1.ffffecp-1f), b),
        vfmaq_f32(vfmaq_f32(vdupq_n_f32(0x1.fffdb6p-2f), vdupq_n_f32(0x1.555e66p-3f), b),
                  vfmaq_f32(vdupq_n_f32(0x1.573e2ep-5f), vdupq_n_f32(0x1.0e4020p-7f), b), u),
        u);
    if (vmaxvq_u32(vcagtq_f32(n, vdupq_n_f32(126)))) {
        float xs[4], ys[4];
        vst1q_f32(xs, x);
        for (int l = 0; l < 4; l++)
            ys[l] = ref_ggml_expf(xs[l]);
        return vld1q_f32(ys);
    }
    const uint32x4_t k =
        vaddq_u32(vshlq_n_u32(vreinterpretq_u32_f32(z), 23), vdupq_n_u32(0x3f800000u));
    return vmulq_f32(j, vreinterpretq_f32_u32(k));
}

/* ---------------------------------------------------------------- conversions */

static void neon_f16_to_f32(const uint16_t *x, float *y, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        vst1q_f32(y + i, load_f16x4(x + i));
        vst1q_f32(y + i + 4, load_f16x4(x + i + 4));
    }
    for (; i + 4 <= n; i += 4)
        vst1q_f32(y + i, load_f16x4(x + i));
    for (; i < n; i++)
        y[i] = fp16_to_fp32(x[i]);
}

/* FCVTN rounds to nearest even (FPCR's default mode) like fp32_to_fp16; NaN payloads may differ. */
static void neon_f32_to_f16(const float *x, uint16_t *y, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const float16x8_t h =
            vcvt_high_f16_f32(vcvt_f16_f32(vld1q_f32(x + i)), vld1q_f32(x + i + 4));
        vst1q_u16(y + i, vreinterpretq_u16_f16(h));
    }
    for (; i < n; i++)
        y[i] = fp32_to_fp16(x[i]);
}

static void neon_f16_to_float(const void *x, float *y, int64_t n)
{
    neon_f16_to_f32(x, y, n);
}

static void neon_f16_from_float(const float *x, void *y, int64_t n)
{
    neon_f32_to_f16(x, y, n);
}

static void neon_bf16_to_float(const void *x, float *y, int64_t n)
{
    const uint16_t *h = x;
    int64_t i         = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(y + i, load_bf16x4(h + i));
    for (; i < n; i++)
        y[i] = bf16_to_fp32(h[i]);
}

/* fp32_to_bf16 in four lanes: round to nearest even; a NaN stays a quiet NaN. */
static inline uint16x4_t bf16_round(float32x4_t v)
{
    const uint32x4_t u   = vreinterpretq_u32_f32(v);
    const uint32x4_t lsb = vandq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(1));
    const uint32x4_t r   = vaddq_u32(u, vaddq_u32(lsb, vdupq_n_u32(0x7fff)));
    const uint32x4_t nan =
        vcgtq_u32(vandq_u32(u, vdupq_n_u32(0x7fffffff)), vdupq_n_u32(0x7f800000));
    const uint32x4_t q = vorrq_u32(u, vdupq_n_u32(64u << 16));
    return vshrn_n_u32(vbslq_u32(nan, q, r), 16);
}

static void neon_bf16_from_float(const float *x, void *y, int64_t n)
{
    uint16_t *h = y;
    int64_t i   = 0;
    for (; i + 4 <= n; i += 4)
        vst1_u16(h + i, bf16_round(vld1q_f32(x + i)));
    for (; i < n; i++)
        h[i] = fp32_to_bf16(x[i]);
}

/*
 * One block of 32 activations as ref_q8_0_act_from_float rounds them:
 * d = amax/127, q = round-half-even(x * (127/amax)), which FCVTNS is.
 * Writes the quants; returns d and, in *sum, the sum of the quants.
 */
static inline float quant_q8_32(const float *xb, int8_t *qs, int *sum)
{
    float32x4_t v[8];
    float32x4_t m = vdupq_n_f32(0.0f);
    for (int k = 0; k < 8; k++) {
        v[k] = vld1q_f32(xb + 4 * k);
        m    = vmaxq_f32(m, vabsq_f32(v[k]));
    }
    const float amax = vmaxvq_f32(m);
    const float id   = amax != 0.0f ? 127.0f / amax : 0.0f;
    int16x8_t q16[4];
    for (int k = 0; k < 4; k++) {
        const int32x4_t a = vcvtnq_s32_f32(vmulq_n_f32(v[2 * k], id));
        const int32x4_t b = vcvtnq_s32_f32(vmulq_n_f32(v[2 * k + 1], id));
        q16[k]            = vcombine_s16(vmovn_s32(a), vmovn_s32(b));
    }
    const int8x16_t q0 = vcombine_s8(vmovn_s16(q16[0]), vmovn_s16(q16[1]));
    const int8x16_t q1 = vcombine_s8(vmovn_s16(q16[2]), vmovn_s16(q16[3]));
    vst1q_s8(qs, q0);
    vst1q_s8(qs + 16, q1);
    *sum = vaddvq_s16(vaddq_s16(vpaddlq_s8(q0), vpaddlq_s8(q1)));
    return amax / 127;
}

static void neon_q8_0_from_float(const float *x, void *y, int64_t n)
{
    struct block_q8_0 *b = y;
    int sum;
    for (int64_t i = 0; i < n / QK8_0; i++)
        b[i].d = fp32_to_fp16(quant_q8_32(x + i * QK8_0, b[i].qs, &sum));
}

static void neon_q8_1_from_float(const float *x, void *y, int64_t n)
{
    struct block_q8_1 *b = y;
    int sum;
    for (int64_t i = 0; i < n / QK8_1; i++) {
        const float d = quant_q8_32(x + i * QK8_1, b[i].qs, &sum);
        b[i].d        = fp32_to_fp16(d);
        b[i].s        = fp32_to_fp16(d * (float)sum);
    }
}

/*
 * As ref_q8_k_from_float (ggml's quantize_row_q8_K_ref): the signed extreme
 * is the first element of largest magnitude; iscale = -127/max in scalar
 * float; nearest_int's round-half-even is FCVTNS (both exact for |v| < 2^22).
 */
static void neon_q8_k_from_float(const float *x, void *y, int64_t n)
{
    struct block_q8_K *b = y;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float *xb = x + i * QK_K;
        float32x4_t m   = vdupq_n_f32(0.0f);
        for (int k = 0; k < QK_K; k += 4)
            m = vmaxq_f32(m, vabsq_f32(vld1q_f32(xb + k)));
        const float amax = vmaxvq_f32(m);
        if (amax == 0.0f) {
            memset(&b[i], 0, sizeof(b[i]));
            continue;
        }
        float max = 0.0f;
        for (int k = 0; k < QK_K; k++)
            if (fabsf(xb[k]) == amax) {
                max = xb[k];
                break;
            }
        const float iscale  = -127.0f / max;
        const int32x4_t cap = vdupq_n_s32(127);
        for (int k = 0; k < QK_K; k += 16) {
            int32x4_t q[4];
            for (int j = 0; j < 4; j++)
                q[j] =
                    vminq_s32(vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(xb + k + 4 * j), iscale)), cap);
            const int16x8_t a = vcombine_s16(vmovn_s32(q[0]), vmovn_s32(q[1]));
            const int16x8_t c = vcombine_s16(vmovn_s32(q[2]), vmovn_s32(q[3]));
            vst1q_s8(b[i].qs + k, vcombine_s8(vmovn_s16(a), vmovn_s16(c)));
            b[i].bsums[k / 16] = (int16_t)vaddvq_s16(vaddq_s16(a, c));
        }
        b[i].d = 1.0f / iscale;
    }
}

/* ---------------------------------------------------------------- float dot products */

static float neon_dot_f32(const float *a, const float *b, int64_t n)
{
    float64x2_t s0 = vdupq_n_f64(0.0), s1 = s0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        s0 = acc_f64(s0, vmulq_f32(vld1q_f32(a + i), vld1q_f32(b + i)));
        s1 = acc_f64(s1, vmulq_f32(vld1q_f32(a + i + 4), vld1q_f32(b + i + 4)));
    }
    for (; i + 4 <= n; i += 4)
        s0 = acc_f64(s0, vmulq_f32(vld1q_f32(a + i), vld1q_f32(b + i)));
    double sum = vaddvq_f64(vaddq_f64(s0, s1));
    for (; i < n; i++)
        sum += (double)(a[i] * b[i]);
    return (float)sum;
}

static void neon_vec_dot_f32(int64_t n, float *s, const void *w, const void *a)
{
    *s = neon_dot_f32(w, a, n);
}

static void neon_vec_dot_f16(int64_t n, float *s, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    float64x2_t s0 = vdupq_n_f64(0.0), s1 = s0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        s0 = acc_f64(s0, vmulq_f32(load_f16x4(x + i), load_f16x4(y + i)));
        s1 = acc_f64(s1, vmulq_f32(load_f16x4(x + i + 4), load_f16x4(y + i + 4)));
    }
    double sum = vaddvq_f64(vaddq_f64(s0, s1));
    for (; i < n; i++)
        sum += (double)(fp16_to_fp32(x[i]) * fp16_to_fp32(y[i]));
    *s = (float)sum;
}

static void neon_vec_dot_bf16(int64_t n, float *s, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    float64x2_t s0 = vdupq_n_f64(0.0), s1 = s0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        s0 = acc_f64(s0, vmulq_f32(load_bf16x4(x + i), load_bf16x4(y + i)));
        s1 = acc_f64(s1, vmulq_f32(load_bf16x4(x + i + 4), load_bf16x4(y + i + 4)));
    }
    double sum = vaddvq_f64(vaddq_f64(s0, s1));
    for (; i < n; i++)
        sum += (double)(bf16_to_fp32(x[i]) * bf16_to_fp32(y[i]));
    *s = (float)sum;
}

/* ---------------------------------------------------------------- 32-element types */

/*
 * The exact sums of four consecutive blocks (their 32 products each) as one
 * vector; wl/wh are each block's elements 0..15 and 16..31 as int8.
 */
static inline int32x4_t block_sums4(const int8x16_t wl[4], const int8x16_t wh[4],
                                    const struct block_q8_0 *y)
{
    int32x4_t p[4];
    for (int k = 0; k < 4; k++) {
        p[k] = dot16(vdupq_n_s32(0), wl[k], vld1q_s8(y[k].qs));
        p[k] = dot16(p[k], wh[k], vld1q_s8(y[k].qs + 16));
    }
    return hsum4_s32(p[0], p[1], p[2], p[3]);
}

/* The chain of ref_vec_dot_q4_0_q8_0 and IQ4_NL: acc = fma(float(block sum), d_w * d_a, acc). */
static inline float chain4(float sum, int32x4_t isum, const uint16_t dw[4],
                           const struct block_q8_0 *y)
{
    int32_t is[4];
    vst1q_s32(is, isum);
    for (int k = 0; k < 4; k++)
        sum = fmaf((float)is[k], half(dw[k]) * half(y[k].d), sum);
    return sum;
}

static void neon_vec_dot_q4_0_q8_0(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_q4_0 *x = w;
    const struct block_q8_0 *y = a;
    const int64_t nb           = n / QK4_0;
    const int8x16_t eight      = vdupq_n_s8(8);
    float sum                  = 0.0f;
    int64_t i                  = 0;
    for (; i + 4 <= nb; i += 4) {
        int8x16_t wl[4], wh[4];
        uint16_t dw[4];
        for (int k = 0; k < 4; k++) {
            nibbles32(x[i + k].qs, &wl[k], &wh[k]);
            wl[k] = vsubq_s8(wl[k], eight);
            wh[k] = vsubq_s8(wh[k], eight);
            dw[k] = x[i + k].d;
        }
        sum = chain4(sum, block_sums4(wl, wh, y + i), dw, y + i);
    }
    for (; i < nb; i++) {
        int8x16_t wl, wh;
        nibbles32(x[i].qs, &wl, &wh);
        int32x4_t p = dot16(vdupq_n_s32(0), vsubq_s8(wl, eight), vld1q_s8(y[i].qs));
        p           = dot16(p, vsubq_s8(wh, eight), vld1q_s8(y[i].qs + 16));
        sum         = fmaf((float)vaddvq_s32(p), half(x[i].d) * half(y[i].d), sum);
    }
    *s = sum;
}

static void neon_vec_dot_iq4_nl_q8_0(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_iq4_nl *x = w;
    const struct block_q8_0 *y   = a;
    const int64_t nb             = n / QK4_NL;
    const int8x16_t table        = vld1q_s8(iq4nl_values);
    float sum                    = 0.0f;
    int64_t i                    = 0;
    for (; i + 4 <= nb; i += 4) {
        int8x16_t wl[4], wh[4];
        uint16_t dw[4];
        for (int k = 0; k < 4; k++) {
            nibbles32(x[i + k].qs, &wl[k], &wh[k]);
            wl[k] = vqtbl1q_s8(table, vreinterpretq_u8_s8(wl[k]));
            wh[k] = vqtbl1q_s8(table, vreinterpretq_u8_s8(wh[k]));
            dw[k] = x[i + k].d;
        }
        sum = chain4(sum, block_sums4(wl, wh, y + i), dw, y + i);
    }
    for (; i < nb; i++) {
        int8x16_t wl, wh;
        nibbles32(x[i].qs, &wl, &wh);
        int32x4_t p =
            dot16(vdupq_n_s32(0), vqtbl1q_s8(table, vreinterpretq_u8_s8(wl)), vld1q_s8(y[i].qs));
        p   = dot16(p, vqtbl1q_s8(table, vreinterpretq_u8_s8(wh)), vld1q_s8(y[i].qs + 16));
        sum = fmaf((float)vaddvq_s32(p), half(x[i].d) * half(y[i].d), sum);
    }
    *s = sum;
}

/*
 * tinyBLAS's eight lanes for one block (ref.c's tinyblas_block): lane l
 * holds the exact sum of products 4l..4l+3, and acc_l = fma(d, lane, acc_l).
 * The products widen to int32 before any pair is added, so w = -128 is fine.
 */
static inline void tinyblas_block(float32x4_t acc[2], float d, int8x16_t w0, int8x16_t w1,
                                  const int8_t *a)
{
    const int8x16_t a0 = vld1q_s8(a), a1 = vld1q_s8(a + 16);
    const int32x4_t l0   = vpaddq_s32(vpaddlq_s16(vmull_s8(vget_low_s8(w0), vget_low_s8(a0))),
                                      vpaddlq_s16(vmull_high_s8(w0, a0)));
    const int32x4_t l1   = vpaddq_s32(vpaddlq_s16(vmull_s8(vget_low_s8(w1), vget_low_s8(a1))),
                                      vpaddlq_s16(vmull_high_s8(w1, a1)));
    const float32x4_t vd = vdupq_n_f32(d);
    acc[0]               = vfmaq_f32(acc[0], vd, vcvtq_f32_s32(l0));
    acc[1]               = vfmaq_f32(acc[1], vd, vcvtq_f32_s32(l1));
}

/* ((0+4)+(2+6))+((1+5)+(3+7)), the reference's reduction of the eight lanes. */
static inline float tinyblas_sum(const float32x4_t acc[2])
{
    float t[4];
    vst1q_f32(t, vaddq_f32(acc[0], acc[1]));
    return (t[0] + t[2]) + (t[1] + t[3]);
}

static void neon_vec_dot_q8_0_q8_0(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_q8_0 *x = w;
    const struct block_q8_0 *y = a;
    float32x4_t acc[2]         = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    for (int64_t i = 0; i < n / QK8_0; i++)
        tinyblas_block(acc, half(x[i].d) * half(y[i].d), vld1q_s8(x[i].qs), vld1q_s8(x[i].qs + 16),
                       y[i].qs);
    *s = tinyblas_sum(acc);
}

/* Eight Q8_0 rows by up to four tokens in the tinyBLAS lanes: a weight block is loaded once. */
static void neon_gemm8_q8_0(int64_t n, const void *w, size_t row_len, const void *a, size_t a_row,
                            const struct q8_0_sum *as, int32_t n_tok, float *s, size_t s_stride)
{
    const int64_t nb = n / QK8_0;
    for (int32_t t0 = 0; t0 < n_tok; t0 += 4) {
        const int32_t tn = n_tok - t0 < 4 ? n_tok - t0 : 4;
        for (int r = 0; r < 8; r++) {
            const struct block_q8_0 *x =
                (const struct block_q8_0 *)((const uint8_t *)w + r * row_len);
            float32x4_t acc[4][2];
            for (int tt = 0; tt < 4; tt++)
                acc[tt][0] = acc[tt][1] = vdupq_n_f32(0.0f);
            for (int64_t b = 0; b < nb; b++) {
                const int8x16_t w0 = vld1q_s8(x[b].qs), w1 = vld1q_s8(x[b].qs + 16);
                const float dw = half(x[b].d);
                for (int32_t tt = 0; tt < tn; tt++) {
                    const struct block_q8_0 *yb =
                        (const struct block_q8_0 *)((const uint8_t *)a +
                                                    (size_t)(t0 + tt) * a_row) +
                        b;
                    tinyblas_block(acc[tt], dw * half(yb->d), w0, w1, yb->qs);
                }
            }
            for (int32_t tt = 0; tt < tn; tt++)
                s[(size_t)(t0 + tt) * s_stride + r] = tinyblas_sum(acc[tt]);
        }
    }
}

/* Q5_0's q - 16 as int8: the nibble with 0xF0 or'ed in where the 5th bit is clear. */
static void neon_vec_dot_q5_0_q8_0(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_q5_0 *x = w;
    const struct block_q8_0 *y = a;
    const uint8x16_t f0        = vdupq_n_u8(0xF0);
    float32x4_t acc[2]         = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    for (int64_t i = 0; i < n / QK5_0; i++) {
        int8x16_t wl, wh;
        uint8x16_t bl, bh;
        nibbles32(x[i].qs, &wl, &wh);
        bits32_to_bytes(x[i].qh, &bl, &bh);
        wl = vorrq_s8(wl, vreinterpretq_s8_u8(vbicq_u8(f0, bl)));
        wh = vorrq_s8(wh, vreinterpretq_s8_u8(vbicq_u8(f0, bh)));
        tinyblas_block(acc, half(x[i].d) * half(y[i].d), wl, wh, y[i].qs);
    }
    *s = tinyblas_sum(acc);
}

/* Q4_1 and Q5_1: per block sum += (d_w * d_a) * float(sum q_w * q_a) + m_w * s_a, as ref. */
static inline float q8_1_step(float sum, int8x16_t wl, int8x16_t wh, uint16_t d, uint16_t m,
                              const struct block_q8_1 *y)
{
    int32x4_t p = dot16(vdupq_n_s32(0), wl, vld1q_s8(y->qs));
    p           = dot16(p, wh, vld1q_s8(y->qs + 16));
    return sum + ((half(d) * half(y->d)) * (float)vaddvq_s32(p) + half(m) * half(y->s));
}

static void neon_vec_dot_q4_1_q8_1(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_q4_1 *x = w;
    const struct block_q8_1 *y = a;
    float sum                  = 0.0f;
    for (int64_t i = 0; i < n / QK4_1; i++) {
        int8x16_t wl, wh;
        nibbles32(x[i].qs, &wl, &wh);
        sum = q8_1_step(sum, wl, wh, x[i].d, x[i].m, &y[i]);
    }
    *s = sum;
}

static void neon_vec_dot_q5_1_q8_1(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_q5_1 *x = w;
    const struct block_q8_1 *y = a;
    const uint8x16_t b4        = vdupq_n_u8(0x10);
    float sum                  = 0.0f;
    for (int64_t i = 0; i < n / QK5_1; i++) {
        int8x16_t wl, wh;
        uint8x16_t bl, bh;
        nibbles32(x[i].qs, &wl, &wh);
        bits32_to_bytes(x[i].qh, &bl, &bh);
        wl  = vorrq_s8(wl, vreinterpretq_s8_u8(vandq_u8(bl, b4)));
        wh  = vorrq_s8(wh, vreinterpretq_s8_u8(vandq_u8(bh, b4)));
        sum = q8_1_step(sum, wl, wh, x[i].d, x[i].m, &y[i]);
    }
    *s = sum;
}

/* ---------------------------------------------------------------- K-quants */

/*
 * The K-quant dots take each superblock's integer sums exactly (NEON), then
 * the reference's float expression for it, in block order.
 */

/* Q4_K/Q5_K scales (sc[0..7]) and mins (sc[8..15]) by 32-bit word masks (ggml's formulation). */
static inline void k4_scales(const uint8_t packed[12], uint8_t sc[16])
{
    uint32_t u[4], v[3];
    memcpy(v, packed, 12);
    const uint32_t m6 = 0x3f3f3f3f, m4 = 0x0f0f0f0f, m2 = 0x03030303;
    u[0] = v[0] & m6;
    u[1] = (v[2] & m4) | ((v[0] >> 6) & m2) << 4;
    u[2] = v[1] & m6;
    u[3] = ((v[2] >> 4) & m4) | ((v[1] >> 6) & m2) << 4;
    memcpy(sc, u, 16);
}

/* Q3_K's 16 scales minus 32, by word masks. */
static inline void q3_k_scales(const uint8_t packed[12], int8_t sc[16])
{
    uint32_t a[3], u[4];
    memcpy(a, packed, 12);
    const uint32_t m4 = 0x0f0f0f0f, m2 = 0x03030303;
    u[0] = (a[0] & m4) | (a[2] & m2) << 4;
    u[1] = (a[1] & m4) | ((a[2] >> 2) & m2) << 4;
    u[2] = ((a[0] >> 4) & m4) | ((a[2] >> 4) & m2) << 4;
    u[3] = ((a[1] >> 4) & m4) | ((a[2] >> 6) & m2) << 4;
    vst1q_s8(sc, vsubq_s8(vreinterpretq_s8_u32(vld1q_u32(u)), vdupq_n_s8(32)));
}

/* The activation sums of a Q8_K block's eight 32-element sub-blocks (bsums[2j] + bsums[2j+1]). */
static inline int32x4_t bsum_pairs(const struct block_q8_K *y, int half4)
{
    return vpaddlq_s16(vld1q_s16(y->bsums + 8 * half4));
}

static void neon_vec_dot_q2_k_q8_k(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_q2_K *x = w;
    const struct block_q8_K *y = a;
    const uint8x16_t m3        = vdupq_n_u8(3);
    float sum                  = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const uint8x16_t sc = vld1q_u8(x[i].scales);
        /* mins (high nibbles) against the 16 bsums */
        const int16x8_t mn0 = vreinterpretq_s16_u16(vmovl_u8(vshr_n_u8(vget_low_u8(sc), 4)));
        const int16x8_t mn1 = vreinterpretq_s16_u16(vmovl_u8(vshr_n_u8(vget_high_u8(sc), 4)));
        const int16x8_t bs0 = vld1q_s16(y[i].bsums), bs1 = vld1q_s16(y[i].bsums + 8);
        int32x4_t mm    = vmull_s16(vget_low_s16(mn0), vget_low_s16(bs0));
        mm              = vmlal_high_s16(mm, mn0, bs0);
        mm              = vmlal_s16(mm, vget_low_s16(mn1), vget_low_s16(bs1));
        mm              = vmlal_high_s16(mm, mn1, bs1);
        const int summs = vaddvq_s32(mm);

        uint8_t scl[16];
        vst1q_u8(scl, vandq_u8(sc, vdupq_n_u8(0x0F)));
        int32x4_t acc = vdupq_n_s32(0);
        for (int h = 0; h < 2; h++) {
            const uint8x16_t b0 = vld1q_u8(x[i].qs + 32 * h), b1 = vld1q_u8(x[i].qs + 32 * h + 16);
            const int8_t *q8 = y[i].qs + 128 * h;
            for (int k = 0; k < 4; k++) {
                const int8x16_t sh = vdupq_n_s8((int8_t)(-2 * k)); /* a right shift by 2k */
                const int8x16_t q0 = vreinterpretq_s8_u8(vandq_u8(vshlq_u8(b0, sh), m3));
                const int8x16_t q1 = vreinterpretq_s8_u8(vandq_u8(vshlq_u8(b1, sh), m3));
                const int j        = 8 * h + 2 * k;
                acc = vmlaq_n_s32(acc, dot16(vdupq_n_s32(0), q0, vld1q_s8(q8 + 32 * k)), scl[j]);
                acc = vmlaq_n_s32(acc, dot16(vdupq_n_s32(0), q1, vld1q_s8(q8 + 32 * k + 16)),
                                  scl[j + 1]);
            }
        }
        const int isum   = vaddvq_s32(acc);
        const float dall = y[i].d * half(x[i].d);
        const float dmin = y[i].d * half(x[i].dmin);
        sum += dall * (float)isum - dmin * (float)summs;
    }
    *s = sum;
}

static void neon_vec_dot_q3_k_q8_k(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_q3_K *x = w;
    const struct block_q8_K *y = a;
    const uint8x16_t m3 = vdupq_n_u8(3), four = vdupq_n_u8(4);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int8_t sc[16];
        q3_k_scales(x[i].scales, sc);
        const uint8x16_t hm0 = vld1q_u8(x[i].hmask), hm1 = vld1q_u8(x[i].hmask + 16);
        int32x4_t acc = vdupq_n_s32(0);
        for (int h = 0; h < 2; h++) {
            const uint8x16_t b0 = vld1q_u8(x[i].qs + 32 * h), b1 = vld1q_u8(x[i].qs + 32 * h + 16);
            const int8_t *q8 = y[i].qs + 128 * h;
            for (int k = 0; k < 4; k++) {
                const int8x16_t sh  = vdupq_n_s8((int8_t)(-2 * k));
                const uint8x16_t bm = vdupq_n_u8((uint8_t)(1u << (4 * h + k)));
                /* q = low 2 bits, minus 4 where the high bit is clear */
                const int8x16_t q0 = vreinterpretq_s8_u8(
                    vsubq_u8(vandq_u8(vshlq_u8(b0, sh), m3), vbicq_u8(four, vtstq_u8(hm0, bm))));
                const int8x16_t q1 = vreinterpretq_s8_u8(
                    vsubq_u8(vandq_u8(vshlq_u8(b1, sh), m3), vbicq_u8(four, vtstq_u8(hm1, bm))));
                const int j = 8 * h + 2 * k;
                acc = vmlaq_n_s32(acc, dot16(vdupq_n_s32(0), q0, vld1q_s8(q8 + 32 * k)), sc[j]);
                acc = vmlaq_n_s32(acc, dot16(vdupq_n_s32(0), q1, vld1q_s8(q8 + 32 * k + 16)),
                                  sc[j + 1]);
            }
        }
        sum += (half(x[i].d) * y[i].d) * (float)vaddvq_s32(acc);
    }
    *s = sum;
}

/*
 * The exact sums of a Q4_K superblock's eight 32-element sub-blocks against
 * a Q8_K block (quants only, no scales), as two vectors (sub-blocks 0..3, 4..7).
 */
static inline void q4_k_subsums(const uint8_t qs[QK_K / 2], const int8_t *q8, int32x4_t out[2])
{
    int32x4_t p[8];
    for (int g = 0; g < 4; g++) {
        const uint8x16_t b0 = vld1q_u8(qs + 32 * g), b1 = vld1q_u8(qs + 32 * g + 16);
        const uint8x16_t m4 = vdupq_n_u8(0x0F);
        const int8_t *a     = q8 + 64 * g;
        p[2 * g] = dot16(vdupq_n_s32(0), vreinterpretq_s8_u8(vandq_u8(b0, m4)), vld1q_s8(a));
        p[2 * g] = dot16(p[2 * g], vreinterpretq_s8_u8(vandq_u8(b1, m4)), vld1q_s8(a + 16));
        p[2 * g + 1] =
            dot16(vdupq_n_s32(0), vreinterpretq_s8_u8(vshrq_n_u8(b0, 4)), vld1q_s8(a + 32));
        p[2 * g + 1] =
            dot16(p[2 * g + 1], vreinterpretq_s8_u8(vshrq_n_u8(b1, 4)), vld1q_s8(a + 48));
    }
    out[0] = hsum4_s32(p[0], p[1], p[2], p[3]);
    out[1] = hsum4_s32(p[4], p[5], p[6], p[7]);
}

/* Sub-block sums times their scales, and mins times the activation sums, per sub-block. */
static inline void k4_weighted(const int32x4_t ss[2], const uint8_t sc[16],
                               const struct block_q8_K *y, int32x4_t is[2], int32x4_t im[2])
{
    const uint16x8_t s16 = vmovl_u8(vld1_u8(sc)), m16 = vmovl_u8(vld1_u8(sc + 8));
    is[0] = vmulq_s32(ss[0], vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(s16))));
    is[1] = vmulq_s32(ss[1], vreinterpretq_s32_u32(vmovl_u16(vget_high_u16(s16))));
    im[0] = vmulq_s32(bsum_pairs(y, 0), vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(m16))));
    im[1] = vmulq_s32(bsum_pairs(y, 1), vreinterpretq_s32_u32(vmovl_u16(vget_high_u16(m16))));
}

/*
 * One Q4_K superblock in the repacked order (ref.c's q4_k_repacked_step):
 * per = 8 one fma per chain (gemv, vec_dot), per = 2 one per sub-block pair
 * (gemm, a batch's tokens in whole fours).
 */
static inline void q4_k_step(const struct block_q4_K *x, const struct block_q8_K *y, int per,
                             float *acc, float *acc_m)
{
    uint8_t sc[16];
    int32x4_t ss[2], is[2], im[2];
    k4_scales(x->scales, sc);
    q4_k_subsums(x->qs, y->qs, ss);
    k4_weighted(ss, sc, y, is, im);
    const float d = half(x->d) * y->d, dm = half(x->dmin) * y->d;
    if (per == 8) {
        *acc   = fmaf((float)vaddvq_s32(vaddq_s32(is[0], is[1])), d, *acc);
        *acc_m = fmaf((float)vaddvq_s32(vaddq_s32(im[0], im[1])), dm, *acc_m);
        return;
    }
    int32_t pi[4], pm[4];
    vst1q_s32(pi, vpaddq_s32(is[0], is[1]));
    vst1q_s32(pm, vpaddq_s32(im[0], im[1]));
    for (int g = 0; g < 4; g++) {
        *acc   = fmaf((float)pi[g], d, *acc);
        *acc_m = fmaf((float)pm[g], dm, *acc_m);
    }
}

static float q4_k_dot(int64_t n, const void *w, const void *a, int per)
{
    const struct block_q4_K *x = w;
    const struct block_q8_K *y = a;
    float acc = 0.0f, acc_m = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++)
        q4_k_step(&x[i], &y[i], per, &acc, &acc_m);
    return acc - acc_m;
}

static void neon_vec_dot_q4_k_q8_k(int64_t n, float *s, const void *w, const void *a)
{
    *s = q4_k_dot(n, w, a, 8);
}

/* ref_gemm8_q4_k's rule: tokens below n_tok / 4 * 4 in the quad order, the rest as vec_dot. */
static void neon_gemm8_q4_k(int64_t n, const void *w, size_t row_len, const void *a, size_t a_row,
                            const struct q8_0_sum *as, int32_t n_tok, float *s, size_t s_stride)
{
    const int32_t quads = n_tok / 4 * 4;
    for (int r = 0; r < 8; r++)
        for (int32_t t = 0; t < n_tok; t++)
            s[(size_t)t * s_stride + r] =
                q4_k_dot(n, (const uint8_t *)w + r * row_len,
                         (const uint8_t *)a + (size_t)t * a_row, t < quads ? 2 : 8);
}

static void neon_vec_dot_q5_k_q8_k(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_q5_K *x = w;
    const struct block_q8_K *y = a;
    const uint8x16_t m4        = vdupq_n_u8(0x0F);
    float sum                  = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        uint8_t sc[16];
        k4_scales(x[i].scales, sc);
        const uint8x16_t h0 = vld1q_u8(x[i].qh), h1 = vld1q_u8(x[i].qh + 16);
        int32x4_t p[8];
        for (int g = 0; g < 4; g++) {
            const uint8x16_t b0 = vld1q_u8(x[i].qs + 32 * g), b1 = vld1q_u8(x[i].qs + 32 * g + 16);
            const uint8x16_t bl = vdupq_n_u8((uint8_t)(1u << (2 * g)));
            const uint8x16_t bh = vdupq_n_u8((uint8_t)(2u << (2 * g)));
            const uint8x16_t s4 = vdupq_n_u8(16);
            const int8_t *q8    = y[i].qs + 64 * g;
            /* the 5th bit adds 16 */
            const int8x16_t l0 =
                vreinterpretq_s8_u8(vorrq_u8(vandq_u8(b0, m4), vandq_u8(vtstq_u8(h0, bl), s4)));
            const int8x16_t l1 =
                vreinterpretq_s8_u8(vorrq_u8(vandq_u8(b1, m4), vandq_u8(vtstq_u8(h1, bl), s4)));
            const int8x16_t u0 =
                vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(b0, 4), vandq_u8(vtstq_u8(h0, bh), s4)));
            const int8x16_t u1 =
                vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(b1, 4), vandq_u8(vtstq_u8(h1, bh), s4)));
            p[2 * g] = dot16(dot16(vdupq_n_s32(0), l0, vld1q_s8(q8)), l1, vld1q_s8(q8 + 16));
            p[2 * g + 1] =
                dot16(dot16(vdupq_n_s32(0), u0, vld1q_s8(q8 + 32)), u1, vld1q_s8(q8 + 48));
        }
        const int32x4_t ss[2] = {hsum4_s32(p[0], p[1], p[2], p[3]),
                                 hsum4_s32(p[4], p[5], p[6], p[7])};
        int32x4_t is[2], im[2];
        k4_weighted(ss, sc, &y[i], is, im);
        /* dot_k4_block: the mins over the 16 bsums are the same integer as over their pairs */
        const int isum  = vaddvq_s32(vaddq_s32(is[0], is[1]));
        const int summs = vaddvq_s32(vaddq_s32(im[0], im[1]));
        const float d_w = half(x[i].d), dmin_w = half(x[i].dmin);
        sum += (d_w * y[i].d) * (float)isum - (dmin_w * y[i].d) * (float)summs;
    }
    *s = sum;
}

/*
 * A Q6_K superblock's quants minus 32 (-32..31) by 16-element sub-block:
 * q[j] is elements 16j..16j+15, which scales[j] scales.
 */
static inline void q6_k_unpack(const struct block_q6_K *x, int8x16_t q[16])
{
    const uint8x16_t m3 = vdupq_n_u8(3), m30 = vdupq_n_u8(0x30);
    const int8x16_t off = vdupq_n_s8(32);
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = x->ql + 64 * h, *qh = x->qh + 32 * h;
        for (int c = 0; c < 2; c++) { /* elements l = 16c .. 16c + 15 of each quarter */
            const uint8x16_t l0 = vld1q_u8(ql + 16 * c), l1 = vld1q_u8(ql + 32 + 16 * c);
            const uint8x16_t hb = vld1q_u8(qh + 16 * c);
            /*
             * quarter k (elements 32k + l of the half) is sub-block 8h + 2k + c; the
             * shift-and-insert forms put a nibble and its high-bit pair together
             */
            const uint8x16_t u[4] = {
                vsliq_n_u8(l0, vandq_u8(hb, m3), 4),
                vsliq_n_u8(l1, vandq_u8(vshrq_n_u8(hb, 2), m3), 4),
                vsriq_n_u8(vandq_u8(hb, m30), l0, 4),
                vsriq_n_u8(vandq_u8(vshrq_n_u8(hb, 2), m30), l1, 4),
            };
            for (int k = 0; k < 4; k++)
                q[8 * h + 2 * k + c] = vsubq_s8(vreinterpretq_s8_u8(u[k]), off);
        }
    }
}

/* sum_j scales[j] * (sum of sub-block j's q * a), exact. */
static inline int32_t q6_k_isum(const int8x16_t q[16], const int8_t *sc, const int8_t *q8)
{
    int32x4_t acc = vdupq_n_s32(0);
    for (int j = 0; j < 16; j++)
        acc = vmlaq_n_s32(acc, dot16(vdupq_n_s32(0), q[j], vld1q_s8(q8 + 16 * j)), sc[j]);
    return vaddvq_s32(acc);
}

static void neon_vec_dot_q6_k_q8_k(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_q6_K *x = w;
    const struct block_q8_K *y = a;
    float sum                  = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int8x16_t q[16];
        q6_k_unpack(&x[i], q);
        sum += (half(x[i].d) * y[i].d) * (float)q6_k_isum(q, x[i].scales, y[i].qs);
    }
    *s = sum;
}

/* Eight Q6_K rows by up to four tokens: a row's superblock is unpacked once for the tokens. */
static void neon_gemm8_q6_k(int64_t n, const void *w, size_t row_len, const void *a, size_t a_row,
                            const struct q8_0_sum *as, int32_t n_tok, float *s, size_t s_stride)
{
    const int64_t nb = n / QK_K;
    for (int32_t t0 = 0; t0 < n_tok; t0 += 4) {
        const int32_t tn = n_tok - t0 < 4 ? n_tok - t0 : 4;
        for (int r = 0; r < 8; r++) {
            const struct block_q6_K *x =
                (const struct block_q6_K *)((const uint8_t *)w + r * row_len);
            float sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            for (int64_t i = 0; i < nb; i++) {
                int8x16_t q[16];
                q6_k_unpack(&x[i], q);
                const float dw = half(x[i].d);
                for (int32_t tt = 0; tt < tn; tt++) {
                    const struct block_q8_K *yb =
                        (const struct block_q8_K *)((const uint8_t *)a +
                                                    (size_t)(t0 + tt) * a_row) +
                        i;
                    sum[tt] += (dw * yb->d) * (float)q6_k_isum(q, x[i].scales, yb->qs);
                }
            }
            for (int32_t tt = 0; tt < tn; tt++)
                s[(size_t)(t0 + tt) * s_stride + r] = sum[tt];
        }
    }
}

static void neon_vec_dot_iq4_xs_q8_k(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_iq4_xs *x = w;
    const struct block_q8_K *y   = a;
    const int8x16_t table        = vld1q_s8(iq4nl_values);
    float sum                    = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int32x4_t p[8];
        for (int j = 0; j < 8; j++) {
            int8x16_t lo, hi;
            nibbles32(x[i].qs + 16 * j, &lo, &hi);
            const int8_t *q8 = y[i].qs + 32 * j;
            p[j] = dot16(vdupq_n_s32(0), vqtbl1q_s8(table, vreinterpretq_u8_s8(lo)), vld1q_s8(q8));
            p[j] = dot16(p[j], vqtbl1q_s8(table, vreinterpretq_u8_s8(hi)), vld1q_s8(q8 + 16));
        }
        int32_t is[8];
        vst1q_s32(is, hsum4_s32(p[0], p[1], p[2], p[3]));
        vst1q_s32(is + 4, hsum4_s32(p[4], p[5], p[6], p[7]));
        const float d4d8 = half(x[i].d) * y[i].d;
        for (int j = 0; j < 8; j++) {
            const int ls = (((x[i].scales_l[j / 2] >> (4 * (j % 2))) & 0x0F) |
                            ((x[i].scales_h >> (2 * j)) & 3) << 4) -
                           32;
            sum += (d4d8 * (float)ls) * (float)is[j];
        }
    }
    *s = sum;
}

/* ---------------------------------------------------------------- packed groups (pack8) */

/*
 * The packed layouts (ref_pack8_q4_0, ref_pack8_q4_k) keep a 32-bit lane
 * per row: 32 bytes are rows 0..7, four bytes each. Against four activation
 * quants repeated in every lane, a widening multiply and two pairwise adds
 * give each row's four-product sum in its own int16 lane; rows8_acc adds
 * those to the int16 sums of rows 0..3 (*s0) and 4..7 (*s1). Sixteen
 * products of a nibble (at most 15) and an int8 stay within int16.
 */
static inline void rows8_acc(uint8x16_t c0, uint8x16_t c1, int8x16_t a4, int16x8_t *s0,
                             int16x8_t *s1)
{
    const int8x16_t w0 = vreinterpretq_s8_u8(c0), w1 = vreinterpretq_s8_u8(c1);
    *s0 = vaddq_s16(*s0,
                    vpaddq_s16(vmull_s8(vget_low_s8(w0), vget_low_s8(a4)), vmull_high_s8(w0, a4)));
    *s1 = vaddq_s16(*s1,
                    vpaddq_s16(vmull_s8(vget_low_s8(w1), vget_low_s8(a4)), vmull_high_s8(w1, a4)));
}

/* Four activation quants at p in every 32-bit lane. */
static inline int8x16_t bcast4(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, sizeof v);
    return vreinterpretq_s8_s32(vdupq_n_s32(v));
}

/* Rows 0..3 and 4..7 of a pair-summed int16 vector as int32 (each row's two lanes added). */
static inline int32x4_t rows_s32(int16x8_t s)
{
    return vpaddlq_s16(s);
}

/*
 * A packed Q4_0 block against one token, a lane per row: the exact block
 * sums of rows 0..3 and 4..7, the nibbles' offset taken off as 8 * sum(a).
 */
static inline void q4_0p_block(const uint8_t *g, const int8_t *qa, int32_t suma, int32x4_t *i0,
                               int32x4_t *i1)
{
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    int16x8_t s0 = vdupq_n_s16(0), s1 = s0;
    for (int k = 0; k < 4; k++) {
        const uint8x16_t c0 = vld1q_u8(g + 16 + 32 * k), c1 = vld1q_u8(g + 32 + 32 * k);
        rows8_acc(vandq_u8(c0, m4), vandq_u8(c1, m4), bcast4(qa + 4 * k), &s0, &s1);
        rows8_acc(vshrq_n_u8(c0, 4), vshrq_n_u8(c1, 4), bcast4(qa + 16 + 4 * k), &s0, &s1);
    }
    const int32x4_t off = vdupq_n_s32(8 * suma);
    *i0                 = vsubq_s32(rows_s32(s0), off);
    *i1                 = vsubq_s32(rows_s32(s1), off);
}

/* gemm8 over a packed Q4_0 group: row r's chain acc = fma(float(block sum), d_w * d_a, acc). */
static void neon_gemm8p_q4_0(int64_t n, const void *wp, const void *a, size_t a_row,
                             const struct q8_0_sum *as, int32_t n_tok, float *s, size_t s_stride)
{
    const int64_t nb = n / QK4_0;
    const size_t gl  = 8 * sizeof(struct block_q4_0);
    for (int32_t t0 = 0; t0 < n_tok; t0 += 4) {
        const int32_t tn = n_tok - t0 < 4 ? n_tok - t0 : 4;
        float32x4_t acc[4][2];
        for (int tt = 0; tt < 4; tt++)
            acc[tt][0] = acc[tt][1] = vdupq_n_f32(0.0f);
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *g      = (const uint8_t *)wp + b * gl;
            const float32x4_t dw0 = load_f16x4((const uint16_t *)g);
            const float32x4_t dw1 = load_f16x4((const uint16_t *)g + 4);
            for (int32_t tt = 0; tt < tn; tt++) {
                const int32_t t = t0 + tt;
                const struct block_q8_0 *ab =
                    (const struct block_q8_0 *)((const uint8_t *)a + (size_t)t * a_row) + b;
                const struct q8_0_sum *sb = &as[(size_t)t * nb + b];
                int32x4_t i0, i1;
                q4_0p_block(g, ab->qs, sb->sum, &i0, &i1);
                acc[tt][0] = vfmaq_f32(acc[tt][0], vcvtq_f32_s32(i0), vmulq_n_f32(dw0, sb->d));
                acc[tt][1] = vfmaq_f32(acc[tt][1], vcvtq_f32_s32(i1), vmulq_n_f32(dw1, sb->d));
            }
        }
        for (int32_t tt = 0; tt < tn; tt++) {
            vst1q_f32(s + (size_t)(t0 + tt) * s_stride, acc[tt][0]);
            vst1q_f32(s + (size_t)(t0 + tt) * s_stride + 4, acc[tt][1]);
        }
    }
}

/*
 * A packed Q4_K superblock's scales and mins (ref_pack8_q4_k's layout) for
 * the eight rows: sc[j] and mn[j] hold sub-block j's, rows 0..7, as int16.
 */
static inline void q4_kp_scales(const uint8_t *p, int16x8_t sc[8], int16x8_t mn[8])
{
    const uint8x16_t m3 = vdupq_n_u8(3), m30 = vdupq_n_u8(0x30);
    for (int half16 = 0; half16 < 2; half16++) {
        const uint8x16_t ls = vld1q_u8(p + 32 + 16 * half16);
        const uint8x16_t lm = vld1q_u8(p + 64 + 16 * half16);
        const uint8x16_t h  = vld1q_u8(p + 96 + 16 * half16);
        /* entries 0..31 (sub-blocks 0..3) and 32..63 (4..7); this half's bytes are two sub-blocks
         */
        const uint8x16_t e[4] = {
            vsliq_n_u8(ls, vandq_u8(h, m3), 4),
            vsriq_n_u8(vandq_u8(vshlq_n_u8(h, 2), m30), ls, 4),
            vsliq_n_u8(lm, vandq_u8(vshrq_n_u8(h, 4), m3), 4),
            vsriq_n_u8(vandq_u8(vshrq_n_u8(h, 2), m30), lm, 4),
        };
        for (int hi = 0; hi < 2; hi++) {
            const int j = 4 * hi + 2 * half16;
            sc[j]       = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(e[hi])));
            sc[j + 1]   = vreinterpretq_s16_u16(vmovl_u8(vget_high_u8(e[hi])));
            mn[j]       = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(e[2 + hi])));
            mn[j + 1]   = vreinterpretq_s16_u16(vmovl_u8(vget_high_u8(e[2 + hi])));
        }
    }
}

/* Eight packed rows' sums of sub-block 2g (hi = 0) or 2g + 1 (hi = 1) against qa, as int32. */
static inline void q4_kp_sub(const uint8_t *q, int hi, const int8_t *qa, int32x4_t *i0,
                             int32x4_t *i1)
{
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    int16x8_t s0 = vdupq_n_s16(0), s1 = s0;
    for (int k = 0; k < 8; k++) {
        uint8x16_t c0 = vld1q_u8(q + 32 * k), c1 = vld1q_u8(q + 32 * k + 16);
        c0 = hi ? vshrq_n_u8(c0, 4) : vandq_u8(c0, m4);
        c1 = hi ? vshrq_n_u8(c1, 4) : vandq_u8(c1, m4);
        rows8_acc(c0, c1, bcast4(qa + 4 * k), &s0, &s1);
    }
    *i0 = rows_s32(s0);
    *i1 = rows_s32(s1);
}

/* v (int16, rows 0..7) times an int32 as two int32 vectors, added to a[0] and a[1]. */
static inline void mla_rows(int32x4_t a[2], int16x8_t v, int32_t k)
{
    a[0] = vmlaq_n_s32(a[0], vmovl_s16(vget_low_s16(v)), k);
    a[1] = vmlaq_n_s32(a[1], vmovl_s16(vget_high_s16(v)), k);
}

/*
 * gemm8 over a packed Q4_K group with ref_gemm8_q4_k's rule: tokens below
 * n_tok / 4 * 4 step once per sub-block pair, the others once per
 * superblock, each row in its own lane.
 */
static void neon_gemm8p_q4_k(int64_t n, const void *wp, const void *a, size_t a_row,
                             const struct q8_0_sum *as, int32_t n_tok, float *s, size_t s_stride)
{
    const int64_t nb    = n / QK_K;
    const int32_t quads = n_tok / 4 * 4;
    const size_t gl     = 8 * sizeof(struct block_q4_K);
    for (int32_t t = 0; t < n_tok; t++) {
        const int quad     = t < quads;
        float32x4_t acc[2] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}, acc_m[2] = {acc[0], acc[1]};
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *p = (const uint8_t *)wp + b * gl;
            const struct block_q8_K *yb =
                (const struct block_q8_K *)((const uint8_t *)a + (size_t)t * a_row) + b;
            int16x8_t sc[8], mn[8];
            q4_kp_scales(p, sc, mn);
            const float32x4_t d0  = vmulq_n_f32(load_f16x4((const uint16_t *)p), yb->d);
            const float32x4_t d1  = vmulq_n_f32(load_f16x4((const uint16_t *)p + 4), yb->d);
            const float32x4_t dm0 = vmulq_n_f32(load_f16x4((const uint16_t *)(p + 16)), yb->d);
            const float32x4_t dm1 = vmulq_n_f32(load_f16x4((const uint16_t *)(p + 16) + 4), yb->d);
            int32x4_t isum[2] = {vdupq_n_s32(0), vdupq_n_s32(0)}, imin[2] = {isum[0], isum[1]};
            for (int g = 0; g < 4; g++) {
                const uint8_t *q = p + 128 + 256 * g;
                for (int hi = 0; hi < 2; hi++) {
                    const int j = 2 * g + hi;
                    int32x4_t i0, i1;
                    q4_kp_sub(q, hi, yb->qs + 32 * j, &i0, &i1);
                    isum[0] = vmlaq_s32(isum[0], i0, vmovl_s16(vget_low_s16(sc[j])));
                    isum[1] = vmlaq_s32(isum[1], i1, vmovl_s16(vget_high_s16(sc[j])));
                    mla_rows(imin, mn[j], yb->bsums[2 * j] + yb->bsums[2 * j + 1]);
                }
                if (quad || g == 3) {
                    acc[0]   = vfmaq_f32(acc[0], vcvtq_f32_s32(isum[0]), d0);
                    acc[1]   = vfmaq_f32(acc[1], vcvtq_f32_s32(isum[1]), d1);
                    acc_m[0] = vfmaq_f32(acc_m[0], vcvtq_f32_s32(imin[0]), dm0);
                    acc_m[1] = vfmaq_f32(acc_m[1], vcvtq_f32_s32(imin[1]), dm1);
                    isum[0] = isum[1] = imin[0] = imin[1] = vdupq_n_s32(0);
                }
            }
        }
        vst1q_f32(s + (size_t)t * s_stride, vsubq_f32(acc[0], acc_m[0]));
        vst1q_f32(s + (size_t)t * s_stride + 4, vsubq_f32(acc[1], acc_m[1]));
    }
}

/* ---------------------------------------------------------------- float ops */

/* Sum of squares in double like the reference (two lanes, so reassociated); the rest exact. */
static void neon_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps)
{
    float64x2_t s0 = vdupq_n_f64(0.0), s1 = s0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const float32x4_t a = vld1q_f32(x + i), b = vld1q_f32(x + i + 4);
        s0 = acc_f64(s0, vmulq_f32(a, a));
        s1 = acc_f64(s1, vmulq_f32(b, b));
    }
    double sum = vaddvq_f64(vaddq_f64(s0, s1));
    for (; i < n; i++)
        sum += (double)(x[i] * x[i]);
    const float mean  = (float)(sum / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps);
    for (i = 0; i + 4 <= n; i += 4)
        vst1q_f32(y + i, vmulq_f32(vmulq_n_f32(vld1q_f32(x + i), scale), vld1q_f32(w + i)));
    for (; i < n; i++)
        y[i] = (x[i] * scale) * w[i];
}

/* ref_silu_mul exactly: ggml's expf in the 16-lane groups, libm's in the tail. */
static void neon_silu_mul(float *y, const float *g, const float *u, int64_t n)
{
    const int64_t n16     = n - n % 16;
    const float32x4_t one = vdupq_n_f32(1.0f);
    int64_t i             = 0;
    for (; i < n16; i += 4) {
        const float32x4_t v = vld1q_f32(g + i);
        const float32x4_t e = v_expf(vsubq_f32(vdupq_n_f32(0.0f), v));
        const float32x4_t s = vdivq_f32(v, vaddq_f32(one, e));
        vst1q_f32(y + i, vmulq_f32(s, vld1q_f32(u + i)));
    }
    for (; i < n; i++) {
        const float s = g[i] / (1.0f + expf(-g[i]));
        y[i]          = s * u[i];
    }
}

/* y += alpha * x with the product rounded before the add, as the reference. */
static void neon_axpy_f32(float *y, float alpha, const float *x, int64_t n)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(y + i, vaddq_f32(vld1q_f32(y + i), vmulq_n_f32(vld1q_f32(x + i), alpha)));
    for (; i < n; i++)
        y[i] += alpha * x[i];
}

static void neon_scale_f32(float *y, float alpha, int64_t n)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(y + i, vmulq_n_f32(vld1q_f32(y + i), alpha));
    for (; i < n; i++)
        y[i] *= alpha;
}

static void neon_mad_f32(float *y, const float *x, float a, int64_t n)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(y + i, vfmaq_n_f32(vld1q_f32(y + i), vld1q_f32(x + i), a));
    for (; i < n; i++)
        y[i] = fmaf(x[i], a, y[i]);
}

/* ---------------------------------------------------------------- attention */

/* Row j of the cache (f16 or f32) as hd floats at dst. */
static inline void attn_load(float *dst, const uint8_t *row, int32_t hd, int f16)
{
    for (int32_t d = 0; d < hd; d += 4)
        vst1q_f32(dst + d,
                  f16 ? load_f16x4((const uint16_t *)row + d) : vld1q_f32((const float *)row + d));
}

/*
 * ref_attn_row in four lanes, bit for bit: a score is the same sequential
 * fma over the head dimension, four keys at a time (the tile's keys
 * transposed, kt[d * ATTN_TILE + c]); the tile's softmax is
 * ref_softmax_tile's (ggml's expf, its sixteen-key reduction); the value
 * fmas and the rescalings are per dimension, so lanes over d change nothing.
 */
static void neon_attn_row(float *out, const float *q, int32_t hd, const struct attn_kv *kv,
                          int32_t j0, int32_t j1, float scale, float *scratch)
{
    float *kq = scratch, *kt = kq + ATTN_TILE, *row = kt + (size_t)hd * ATTN_TILE;
    float M = -INFINITY, S = 0.0f;
    memset(out, 0, (size_t)hd * sizeof(float));
    for (int32_t t0 = j0 - j0 % ATTN_TILE; t0 <= j1; t0 += ATTN_TILE) {
        const int32_t c0 = j0 > t0 ? j0 - t0 : 0;
        const int32_t c1 = j1 - t0 < ATTN_TILE - 1 ? j1 - t0 : ATTN_TILE - 1;
        for (int32_t c = c0; c <= c1; c++) {
            attn_load(row, attn_kv_row(kv->k, kv, t0 + c), hd, kv->f16);
            for (int32_t d = 0; d < hd; d++)
                kt[(size_t)d * ATTN_TILE + c] = row[d];
        }
        float32x4_t vmax = vdupq_n_f32(-INFINITY);
        for (int32_t c = 0; c < ATTN_TILE; c += 4) {
            if (c + 3 < c0 || c > c1) {
                vst1q_f32(kq + c, vdupq_n_f32(-INFINITY));
                continue;
            }
            float32x4_t acc = vdupq_n_f32(0.0f);
            for (int32_t d = 0; d < hd; d++)
                acc = vfmaq_n_f32(acc, vld1q_f32(kt + (size_t)d * ATTN_TILE + c), q[d]);
            vst1q_f32(kq + c, vmulq_n_f32(acc, scale));
            for (int32_t u = 0; u < 4; u++)
                if (c + u < c0 || c + u > c1)
                    kq[c + u] = -INFINITY;
            vmax = vmaxq_f32(vmax, vld1q_f32(kq + c));
        }
        const float tmax = vmaxvq_f32(vmax);
        const float Mnew = fmaxf(M, tmax);
        if (Mnew > M) {
            const float ms = expf(M - Mnew);
            for (int32_t d = 0; d < hd; d += 4)
                vst1q_f32(out + d, vmulq_n_f32(vld1q_f32(out + d), ms));
            S *= ms;
        }
        M           = Mnew;
        double tsum = 0;
        for (int32_t c = 0; c < ATTN_TILE; c += 16) {
            float32x4_t e[4];
            for (int k = 0; k < 4; k++) {
                e[k] = v_expf(vsubq_f32(vld1q_f32(kq + c + 4 * k), vdupq_n_f32(Mnew)));
                vst1q_f32(kq + c + 4 * k, e[k]);
            }
            /* t3 = v[l + 8] + v[l], t6 = t3[l + 4] + t3[l], then (t6[0] + t6[2]) + (t6[1] + t6[3])
             */
            const float32x4_t t6 = vaddq_f32(vaddq_f32(e[3], e[1]), vaddq_f32(e[2], e[0]));
            float t[4];
            vst1q_f32(t, t6);
            tsum += (double)((t[0] + t[2]) + (t[1] + t[3]));
        }
        S = (float)((double)S + tsum);
        for (int32_t c = c0; c <= c1; c++) {
            const uint8_t *vr = attn_kv_row(kv->v, kv, t0 + c);
            for (int32_t d = 0; d < hd; d += 4) {
                const float32x4_t v = kv->f16 ? load_f16x4((const uint16_t *)vr + d)
                                              : vld1q_f32((const float *)vr + d);
                vst1q_f32(out + d, vfmaq_n_f32(vld1q_f32(out + d), v, kq[c]));
            }
        }
    }
    const float inv = S == 0.0f ? 0.0f : 1.0f / S;
    for (int32_t d = 0; d < hd; d += 4)
        vst1q_f32(out + d, vmulq_n_f32(vld1q_f32(out + d), inv));
}

static void neon_attn_rows(float *const *out, const float *const *q, int32_t nq, int32_t hd,
                           const struct attn_kv *kv, const int32_t *j0, const int32_t *j1,
                           float scale, float *scratch)
{
    for (int32_t r = 0; r < nq; r++) {
        if (hd % 4)
            ref_attn_row(out[r], q[r], hd, kv, j0[r], j1[r], scale, scratch);
        else
            neon_attn_row(out[r], q[r], hd, kv, j0[r], j1[r], scale, scratch);
    }
}

/* ---------------------------------------------------------------- the table */

static const struct kernels table = {
    .name = "neon",
    .type =
        {
            [DTYPE_F32]    = {.vec_dot_type = DTYPE_F32,
                              .to_float     = ref_f32_to_float,
                              .from_float   = ref_f32_from_float,
                              .vec_dot      = neon_vec_dot_f32},
            [DTYPE_F16]    = {.vec_dot_type = DTYPE_F16,
                              .to_float     = neon_f16_to_float,
                              .from_float   = neon_f16_from_float,
                              .vec_dot      = neon_vec_dot_f16},
            [DTYPE_BF16]   = {.vec_dot_type = DTYPE_BF16,
                              .to_float     = neon_bf16_to_float,
                              .from_float   = neon_bf16_from_float,
                              .vec_dot      = neon_vec_dot_bf16},
            [DTYPE_Q4_0]   = {.vec_dot_type = DTYPE_Q8_0,
                              .to_float     = ref_q4_0_to_float,
                              .from_float   = ref_q4_0_from_float,
                              .vec_dot      = neon_vec_dot_q4_0_q8_0,
                              .pack8        = ref_pack8_q4_0,
                              .gemm8p       = neon_gemm8p_q4_0},
            [DTYPE_Q8_0]   = {.vec_dot_type = DTYPE_Q8_0,
                              .to_float     = ref_q8_0_to_float,
                              .from_float   = neon_q8_0_from_float,
                              .vec_dot      = neon_vec_dot_q8_0_q8_0,
                              .gemm8        = neon_gemm8_q8_0},
            [DTYPE_Q4_1]   = {.vec_dot_type = DTYPE_Q8_1,
                              .to_float     = ref_q4_1_to_float,
                              .vec_dot      = neon_vec_dot_q4_1_q8_1},
            [DTYPE_Q5_0]   = {.vec_dot_type = DTYPE_Q8_0,
                              .to_float     = ref_q5_0_to_float,
                              .vec_dot      = neon_vec_dot_q5_0_q8_0},
            [DTYPE_Q5_1]   = {.vec_dot_type = DTYPE_Q8_1,
                              .to_float     = ref_q5_1_to_float,
                              .vec_dot      = neon_vec_dot_q5_1_q8_1},
            [DTYPE_IQ4_NL] = {.vec_dot_type = DTYPE_Q8_0,
                              .to_float     = ref_iq4_nl_to_float,
                              .vec_dot      = neon_vec_dot_iq4_nl_q8_0},
            [DTYPE_Q2_K]   = {.vec_dot_type = DTYPE_Q8_K,
                              .to_float     = ref_q2_k_to_float,
                              .vec_dot      = neon_vec_dot_q2_k_q8_k},
            [DTYPE_Q3_K]   = {.vec_dot_type = DTYPE_Q8_K,
                              .to_float     = ref_q3_k_to_float,
                              .vec_dot      = neon_vec_dot_q3_k_q8_k},
            [DTYPE_Q4_K]   = {.vec_dot_type = DTYPE_Q8_K,
                              .to_float     = ref_q4_k_to_float,
                              .vec_dot      = neon_vec_dot_q4_k_q8_k,
                              .gemm8        = neon_gemm8_q4_k,
                              .pack8        = ref_pack8_q4_k,
                              .gemm8p       = neon_gemm8p_q4_k},
            [DTYPE_Q5_K]   = {.vec_dot_type = DTYPE_Q8_K,
                              .to_float     = ref_q5_k_to_float,
                              .vec_dot      = neon_vec_dot_q5_k_q8_k},
            [DTYPE_Q6_K]   = {.vec_dot_type = DTYPE_Q8_K,
                              .to_float     = ref_q6_k_to_float,
                              .vec_dot      = neon_vec_dot_q6_k_q8_k,
                              .gemm8        = neon_gemm8_q6_k},
            [DTYPE_IQ4_XS] = {.vec_dot_type = DTYPE_Q8_K,
                              .to_float     = ref_iq4_xs_to_float,
                              .vec_dot      = neon_vec_dot_iq4_xs_q8_k},
            /* no vector kernels yet: the reference's, so a file of these types runs */
            [DTYPE_MXFP4] = {.vec_dot_type = DTYPE_Q8_0,
                             .to_float     = ref_mxfp4_to_float,
                             .vec_dot      = ref_vec_dot_mxfp4_q8_0},
            REF_IQ_TYPES,
            [DTYPE_Q8_1] = {.vec_dot_type = DTYPE_Q8_1,
                            .to_float     = ref_q8_1_to_float,
                            .from_float   = neon_q8_1_from_float},
            [DTYPE_Q8_K] = {.vec_dot_type = DTYPE_Q8_K,
                            .to_float     = ref_q8_k_to_float,
                            .from_float   = neon_q8_k_from_float},
        },
    .rmsnorm             = neon_rmsnorm,
    .silu_mul            = neon_silu_mul,
    .gelu_mul            = ref_gelu_mul, /* a table lookup in ggml on every ISA */
    .axpy_f32            = neon_axpy_f32,
    .scale_f32           = neon_scale_f32,
    .mad_f32             = neon_mad_f32,
    .dot_f32_ggml        = ref_dot_f32_ggml,
    .attn_rows           = neon_attn_rows,
    .attn_rows_lanes     = ATTN_LANES,
    .attn_rows_f16       = ref_attn_rows_f16,
    .attn_rows_f16_lanes = ATTN_LANES,
    .expf_libm           = ref_expf_libm,
    .f32_to_f16          = neon_f32_to_f16,
};

const struct kernels *kernels_neon(void)
{
    return &table;
}

#else

const struct kernels *kernels_neon(void)
{
    return NULL;
}

#endif
