/*
 * x86_avx2.c: the kernel table for x86-64 with AVX2, FMA and F16C (Haswell
 * and later, Zen). This file alone is compiled with -mavx2 -mfma -mf16c; the
 * dispatcher (dispatch.c) asks the CPU before handing this table out, so
 * nothing here may run on a machine without those extensions.
 *
 * Vectorized: vec_dot of all five weight types, the F16/BF16/Q8_0 activation
 * quantizers, F16 to_float, and every float op. Decode is memory-bound, so the
 * Q4_0/Q8_0 dots read each weight byte once, two blocks per iteration, and
 * keep the sums in float lanes until the end (ggml's scheme). Entries that are
 * not hot (Q4_0/Q8_0 to_float, Q4_0 from_float, F32 copies) use ref.c.
 *
 * Results equal the reference exactly where the reference has no sum to
 * reorder (conversions, quantizers, scale, rmsnorm almost always); sums differ
 * from it by float reassociation only.
 */
#include "kernels/ref.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>
#include <math.h>

#include "util/fp16.h"

/* ---------------------------------------------------------------- helpers */

static inline float hsum_ps(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s        = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s        = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline double hsum_pd(__m256d v)
{
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    s         = _mm_add_sd(s, _mm_unpackhi_pd(s, s));
    return _mm_cvtsd_f64(s);
}

static inline float hmax_ps(__m256 v)
{
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m        = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m        = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

/* Adds the 8 floats of v to a pair of double accumulators (ggml_float-style sums). */
static inline void acc_pd(__m256d *lo, __m256d *hi, __m256 v)
{
    *lo = _mm256_add_pd(*lo, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    *hi = _mm256_add_pd(*hi, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

static inline __m256 load_f16(const uint16_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

static inline __m256 load_bf16(const uint16_t *p)
{
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

static inline float half(uint16_t h)
{
    return _cvtsh_ss(h);
}

/*
 * Sum of x[i]*y[i] over 32 int8 pairs, as 8 int32 partial sums in float lanes.
 * maddubs wants an unsigned operand: move x's sign onto y. |x| <= 128 and
 * |y| <= 127 keep each pair sum within int16.
 */
static inline __m256 dot_i8_32(__m256i x, __m256i y)
{
    const __m256i ax  = _mm256_sign_epi8(x, x);
    const __m256i sy  = _mm256_sign_epi8(y, x);
    const __m256i p16 = _mm256_maddubs_epi16(ax, sy);
    const __m256i p32 = _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
    return _mm256_cvtepi32_ps(p32);
}

/* The 32 quants of a Q4_0 block, minus 8, as int8 in element order. */
static inline __m256i unpack_q4_0(const uint8_t *qs)
{
    const __m128i b   = _mm_loadu_si128((const __m128i *)qs);
    const __m256i nib = _mm256_set_m128i(_mm_srli_epi16(b, 4), b);
    const __m256i q   = _mm256_and_si256(nib, _mm256_set1_epi8(0x0F));
    return _mm256_sub_epi8(q, _mm256_set1_epi8(8));
}

/*
 * Vectorized expf (the polynomial of ARM's optimized-routines, as ggml's
 * ggml_v_expf): exp(x) = 2^n * (1 + p(b)), b = x - n*ln2. About 1.5 ulp;
 * overflows to inf, underflows through subnormals to 0, exp(-inf) = 0.
 */
static inline __m256 v_expf(__m256 x)
{
    const __m256 r  = _mm256_set1_ps(0x1.8p23f);
    const __m256 z  = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), r);
    const __m256 n  = _mm256_sub_ps(z, r);
    const __m256 b  = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f),
                                       _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
    const __m256i e = _mm256_slli_epi32(_mm256_castps_si256(z), 23);
    const __m256 k =
        _mm256_castsi256_ps(_mm256_add_epi32(e, _mm256_castps_si256(_mm256_set1_ps(1))));
    const __m256 an = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
    const __m256 c  = _mm256_cmp_ps(an, _mm256_set1_ps(126), _CMP_GT_OQ);
    const __m256 u  = _mm256_mul_ps(b, b);
    const __m256 j  = _mm256_fmadd_ps(
         _mm256_fmadd_ps(
             _mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)), u,
             _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f))),
         u, _mm256_mul_ps(_mm256_set1_ps(0x1.ffffecp-1f), b));
    if (!_mm256_movemask_ps(c))
        return _mm256_fmadd_ps(j, k, k);
    /* |n| > 126: 2^n is not a normal float; scale in two steps s1 * s2. */
    const __m256i g =
        _mm256_and_si256(_mm256_castps_si256(_mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ)),
                         _mm256_set1_epi32((int)0x82000000u));
    const __m256 s1     = _mm256_castsi256_ps(_mm256_add_epi32(g, _mm256_set1_epi32(0x7f000000)));
    const __m256 s2     = _mm256_castsi256_ps(_mm256_sub_epi32(e, g));
    const __m256 big    = _mm256_cmp_ps(an, _mm256_set1_ps(192), _CMP_GT_OQ);
    const __m256 scaled = _mm256_mul_ps(_mm256_fmadd_ps(s2, j, s2), s1);
    const __m256 normal = _mm256_fmadd_ps(k, j, k);
    return _mm256_blendv_ps(_mm256_blendv_ps(normal, scaled, c), _mm256_mul_ps(s1, s1), big);
}

/* ---------------------------------------------------------------- conversions */

static void avx2_f16_to_float(const void *x, float *y, int64_t n)
{
    const uint16_t *h = x;
    int64_t i         = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, load_f16(h + i));
    for (; i < n; i++)
        y[i] = half(h[i]);
}

/* F16C rounds to nearest even like fp32_to_fp16; only NaN payloads may differ. */
static void avx2_f16_from_float(const float *x, void *y, int64_t n)
{
    uint16_t *h = y;
    int64_t i   = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i p = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
        _mm_storeu_si128((__m128i *)(h + i), p);
    }
    for (; i < n; i++)
        h[i] = fp32_to_fp16(x[i]);
}

/* fp32_to_bf16 on 8 lanes: round to nearest even; NaN stays a quiet NaN. Results in the low 16
 * bits. */
static inline __m256i bf16_round(__m256 v)
{
    const __m256i u   = _mm256_castps_si256(v);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i r   = _mm256_srli_epi32(
          _mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
    const __m256i mag = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
    const __m256i nan = _mm256_cmpgt_epi32(mag, _mm256_set1_epi32(0x7f800000));
    const __m256i q   = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(64));
    return _mm256_blendv_epi8(r, q, nan);
}

static void avx2_bf16_from_float(const float *x, void *y, int64_t n)
{
    uint16_t *h = y;
    int64_t i   = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256i a = bf16_round(_mm256_loadu_ps(x + i));
        const __m256i b = bf16_round(_mm256_loadu_ps(x + i + 8));
        /* packus interleaves 128-bit lanes: a0-3 b0-3 | a4-7 b4-7; put them back in order. */
        const __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xD8);
        _mm256_storeu_si256((__m256i *)(h + i), p);
    }
    for (; i < n; i++)
        h[i] = fp32_to_bf16(x[i]);
}

/*
 * Q8_0 quantizer, bit-identical to ref_q8_0_from_float: the same d and 1/d
 * in scalar float, the same single multiply, and roundf's rounding (halves
 * away from zero), done as trunc(|v|) + (frac >= 0.5) with v's sign put back.
 * _mm256_round_ps(_MM_FROUND_TO_NEAREST_INT) would round halves to even and
 * disagree with ggml's reference on exact halves.
 */
static void avx2_q8_0_from_float(const float *x, void *y, int64_t n)
{
    struct block_q8_0 *b = y;
    const int64_t nb     = n / QK8_0;
    const __m256 sign    = _mm256_set1_ps(-0.0f);
    const __m256 half_   = _mm256_set1_ps(0.5f);
    const __m256 one     = _mm256_set1_ps(1.0f);
    const __m256i order  = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int64_t i = 0; i < nb; i++) {
        const float *xb = x + i * QK8_0;
        __m256 v[4];
        for (int k = 0; k < 4; k++)
            v[k] = _mm256_loadu_ps(xb + 8 * k);
        const __m256 m = _mm256_max_ps(
            _mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1])),
            _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3])));
        const float amax = hmax_ps(m);
        const float d    = amax / 127;
        const float id   = d ? 1.0f / d : 0.0f;
        b[i].d           = fp32_to_fp16(d);
        const __m256 vid = _mm256_set1_ps(id);
        __m256i q[4];
        for (int k = 0; k < 4; k++) {
            const __m256 s = _mm256_mul_ps(v[k], vid);
            const __m256 a = _mm256_andnot_ps(sign, s);
            const __m256 t = _mm256_round_ps(a, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
            const __m256 up =
                _mm256_and_ps(_mm256_cmp_ps(_mm256_sub_ps(a, t), half_, _CMP_GE_OQ), one);
            const __m256 r = _mm256_or_ps(_mm256_add_ps(t, up), _mm256_and_ps(s, sign));
            q[k]           = _mm256_cvttps_epi32(r);
        }
        const __m256i p16a = _mm256_packs_epi32(q[0], q[1]);
        const __m256i p16b = _mm256_packs_epi32(q[2], q[3]);
        const __m256i p8   = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p16a, p16b), order);
        _mm256_storeu_si256((__m256i *)b[i].qs, p8);
    }
}

/* ---------------------------------------------------------------- dot products */

static float dot_f32(const float *a, const float *b, int64_t n)
{
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
        acc2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), acc2);
        acc3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), acc3);
    }
    for (; i + 8 <= n; i += 8)
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
    for (; i < n; i++)
        sum += a[i] * b[i];
    return sum;
}

static void avx2_vec_dot_f32(int64_t n, float *s, const void *w, const void *a)
{
    *s = dot_f32(w, a, n);
}

static void avx2_vec_dot_f16(int64_t n, float *s, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        acc0 = _mm256_fmadd_ps(load_f16(x + i), load_f16(y + i), acc0);
        acc1 = _mm256_fmadd_ps(load_f16(x + i + 8), load_f16(y + i + 8), acc1);
        acc2 = _mm256_fmadd_ps(load_f16(x + i + 16), load_f16(y + i + 16), acc2);
        acc3 = _mm256_fmadd_ps(load_f16(x + i + 24), load_f16(y + i + 24), acc3);
    }
    for (; i + 8 <= n; i += 8)
        acc0 = _mm256_fmadd_ps(load_f16(x + i), load_f16(y + i), acc0);
    float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
    for (; i < n; i++)
        sum += half(x[i]) * half(y[i]);
    *s = sum;
}

static void avx2_vec_dot_bf16(int64_t n, float *s, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        acc0 = _mm256_fmadd_ps(load_bf16(x + i), load_bf16(y + i), acc0);
        acc1 = _mm256_fmadd_ps(load_bf16(x + i + 8), load_bf16(y + i + 8), acc1);
        acc2 = _mm256_fmadd_ps(load_bf16(x + i + 16), load_bf16(y + i + 16), acc2);
        acc3 = _mm256_fmadd_ps(load_bf16(x + i + 24), load_bf16(y + i + 24), acc3);
    }
    for (; i + 8 <= n; i += 8)
        acc0 = _mm256_fmadd_ps(load_bf16(x + i), load_bf16(y + i), acc0);
    float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
    for (; i < n; i++)
        sum += bf16_to_fp32(x[i]) * bf16_to_fp32(y[i]);
    *s = sum;
}

static void avx2_vec_dot_q4_0_q8_0(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_q4_0 *x = w;
    const struct block_q8_0 *y = a;
    const int64_t nb           = n / QK4_0;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        const __m256 d0   = _mm256_set1_ps(half(x[i].d) * half(y[i].d));
        const __m256 d1   = _mm256_set1_ps(half(x[i + 1].d) * half(y[i + 1].d));
        const __m256i qx0 = unpack_q4_0(x[i].qs);
        const __m256i qx1 = unpack_q4_0(x[i + 1].qs);
        const __m256i qy0 = _mm256_loadu_si256((const __m256i *)y[i].qs);
        const __m256i qy1 = _mm256_loadu_si256((const __m256i *)y[i + 1].qs);
        acc0              = _mm256_fmadd_ps(d0, dot_i8_32(qx0, qy0), acc0);
        acc1              = _mm256_fmadd_ps(d1, dot_i8_32(qx1, qy1), acc1);
    }
    if (i < nb) {
        const __m256 d0   = _mm256_set1_ps(half(x[i].d) * half(y[i].d));
        const __m256i qy0 = _mm256_loadu_si256((const __m256i *)y[i].qs);
        acc0              = _mm256_fmadd_ps(d0, dot_i8_32(unpack_q4_0(x[i].qs), qy0), acc0);
    }
    *s = hsum_ps(_mm256_add_ps(acc0, acc1));
}

static void avx2_vec_dot_q8_0_q8_0(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_q8_0 *x = w;
    const struct block_q8_0 *y = a;
    const int64_t nb           = n / QK8_0;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        const __m256 d0   = _mm256_set1_ps(half(x[i].d) * half(y[i].d));
        const __m256 d1   = _mm256_set1_ps(half(x[i + 1].d) * half(y[i + 1].d));
        const __m256i qx0 = _mm256_loadu_si256((const __m256i *)x[i].qs);
        const __m256i qx1 = _mm256_loadu_si256((const __m256i *)x[i + 1].qs);
        const __m256i qy0 = _mm256_loadu_si256((const __m256i *)y[i].qs);
        const __m256i qy1 = _mm256_loadu_si256((const __m256i *)y[i + 1].qs);
        acc0              = _mm256_fmadd_ps(d0, dot_i8_32(qx0, qy0), acc0);
        acc1              = _mm256_fmadd_ps(d1, dot_i8_32(qx1, qy1), acc1);
    }
    if (i < nb) {
        const __m256 d0   = _mm256_set1_ps(half(x[i].d) * half(y[i].d));
        const __m256i qx0 = _mm256_loadu_si256((const __m256i *)x[i].qs);
        const __m256i qy0 = _mm256_loadu_si256((const __m256i *)y[i].qs);
        acc0              = _mm256_fmadd_ps(d0, dot_i8_32(qx0, qy0), acc0);
    }
    *s = hsum_ps(_mm256_add_ps(acc0, acc1));
}

/* ---------------------------------------------------------------- float ops */

/* Sum of squares in double like the reference; the products are the same float products. */
static void avx2_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps)
{
    __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        acc_pd(&lo, &hi, _mm256_mul_ps(v, v));
    }
    double sum = hsum_pd(_mm256_add_pd(lo, hi));
    for (; i < n; i++)
        sum += (double)(x[i] * x[i]);
    const float mean  = (float)(sum / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps);
    const __m256 vs   = _mm256_set1_ps(scale);
    for (i = 0; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), vs);
        _mm256_storeu_ps(y + i, _mm256_mul_ps(v, _mm256_loadu_ps(w + i)));
    }
    for (; i < n; i++)
        y[i] = (x[i] * scale) * w[i];
}

static void avx2_silu_mul(float *y, const float *g, const float *u, int64_t n)
{
    const __m256 one = _mm256_set1_ps(1.0f);
    int64_t i        = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(g + i);
        const __m256 e = v_expf(_mm256_sub_ps(_mm256_setzero_ps(), v));
        const __m256 s = _mm256_div_ps(v, _mm256_add_ps(one, e));
        _mm256_storeu_ps(y + i, _mm256_mul_ps(s, _mm256_loadu_ps(u + i)));
    }
    for (; i < n; i++)
        y[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

static void avx2_softmax(float *x, int64_t n)
{
    int64_t i   = 0;
    __m256 vmax = _mm256_set1_ps(-INFINITY);
    for (; i + 8 <= n; i += 8)
        vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(x + i));
    float max = hmax_ps(vmax);
    for (; i < n; i++)
        max = max > x[i] ? max : x[i];

    const __m256 m = _mm256_set1_ps(max);
    __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
    for (i = 0; i + 8 <= n; i += 8) {
        const __m256 e = v_expf(_mm256_sub_ps(_mm256_loadu_ps(x + i), m));
        _mm256_storeu_ps(x + i, e);
        acc_pd(&lo, &hi, e);
    }
    double sum = hsum_pd(_mm256_add_pd(lo, hi));
    for (; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += (double)x[i];
    }

    const float inv = (float)(1.0 / sum);
    const __m256 vi = _mm256_set1_ps(inv);
    for (i = 0; i + 8 <= n; i += 8)
        _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vi));
    for (; i < n; i++)
        x[i] *= inv;
}

static float avx2_dot_f32_f16(const float *a, const uint16_t *b, int64_t n)
{
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), load_f16(b + i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), load_f16(b + i + 8), acc1);
        acc2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), load_f16(b + i + 16), acc2);
        acc3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), load_f16(b + i + 24), acc3);
    }
    for (; i + 8 <= n; i += 8)
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), load_f16(b + i), acc0);
    float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
    for (; i < n; i++)
        sum += a[i] * half(b[i]);
    return sum;
}

static void avx2_axpy_f32(float *y, float alpha, const float *x, int64_t n)
{
    const __m256 va = _mm256_set1_ps(alpha);
    int64_t i       = 0;
    for (; i + 16 <= n; i += 16) {
        _mm256_storeu_ps(y + i,
                         _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
        _mm256_storeu_ps(
            y + i + 8, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8)));
    }
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i,
                         _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++)
        y[i] += alpha * x[i];
}

static void avx2_axpy_f16(float *y, float alpha, const uint16_t *x, int64_t n)
{
    const __m256 va = _mm256_set1_ps(alpha);
    int64_t i       = 0;
    for (; i + 16 <= n; i += 16) {
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, load_f16(x + i), _mm256_loadu_ps(y + i)));
        _mm256_storeu_ps(y + i + 8,
                         _mm256_fmadd_ps(va, load_f16(x + i + 8), _mm256_loadu_ps(y + i + 8)));
    }
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, load_f16(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++)
        y[i] += alpha * half(x[i]);
}

static void avx2_scale_f32(float *y, float alpha, int64_t n)
{
    const __m256 va = _mm256_set1_ps(alpha);
    int64_t i       = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), va));
    for (; i < n; i++)
        y[i] *= alpha;
}

static void avx2_f32_to_f16(const float *x, uint16_t *y, int64_t n)
{
    avx2_f16_from_float(x, y, n);
}

static void avx2_f16_to_f32(const uint16_t *x, float *y, int64_t n)
{
    avx2_f16_to_float(x, y, n);
}

/* ---------------------------------------------------------------- the table */

static const struct kernels table = {
    .name = "avx2",
    .type =
        {
            [DTYPE_F32]  = {DTYPE_F32, ref_f32_to_float, ref_f32_from_float, avx2_vec_dot_f32},
            [DTYPE_F16]  = {DTYPE_F16, avx2_f16_to_float, avx2_f16_from_float, avx2_vec_dot_f16},
            [DTYPE_BF16] = {DTYPE_BF16, ref_bf16_to_float, avx2_bf16_from_float, avx2_vec_dot_bf16},
            [DTYPE_Q4_0] = {DTYPE_Q8_0, ref_q4_0_to_float, ref_q4_0_from_float,
                            avx2_vec_dot_q4_0_q8_0},
            [DTYPE_Q8_0] = {DTYPE_Q8_0, ref_q8_0_to_float, avx2_q8_0_from_float,
                            avx2_vec_dot_q8_0_q8_0},
        },
    .rmsnorm     = avx2_rmsnorm,
    .silu_mul    = avx2_silu_mul,
    .softmax     = avx2_softmax,
    .dot_f32     = dot_f32,
    .dot_f32_f16 = avx2_dot_f32_f16,
    .axpy_f32    = avx2_axpy_f32,
    .axpy_f16    = avx2_axpy_f16,
    .scale_f32   = avx2_scale_f32,
    .f32_to_f16  = avx2_f32_to_f16,
    .f16_to_f32  = avx2_f16_to_f32,
};

const struct kernels *kernels_avx2(void)
{
    return &table;
}

#else

const struct kernels *kernels_avx2(void)
{
    return NULL;
}

#endif
