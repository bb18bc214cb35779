/*
 * x86_avx2.c: the kernel table for x86-64 with AVX2, FMA and F16C (Haswell
 * and later, Zen). This file alone is compiled with -mavx2 -mfma -mf16c; the
 * dispatcher (dispatch.c) asks the CPU before handing this table out, so
 * nothing here may run on a machine without those extensions.
 *
 * Vectorized: vec_dot of every weight type, the F16/BF16/Q8_0/Q8_1/Q8_K
 * activation quantizers, F16 to_float, and every float op. Decode is
 * memory-bound, so the dots read each weight byte once and keep the sums in
 * float lanes until the end (ggml's scheme). The quantized dots follow ggml's
 * AVX2 kernels (maddubs on unsigned quants, sign tricks, shuffled int16
 * scales) and give the same integer sums; on the shared llama.cpp-made
 * models they return ggml's AVX2 results bit for bit (but where ggml's build
 * fused a scalar multiply-add, Q5_K's min term). Entries that are not
 * hot (the quantized types' to_float, Q4_0 from_float, F32 copies) use ref.c.
 *
 * Results equal the reference exactly where the reference has no sum to
 * reorder (conversions, quantizers, scale, rmsnorm almost always); sums differ
 * from it by float reassociation only.
 */
#include "kernels/ref.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/ggml_dot.h"
#include "kernels/iq_grids.h"
#include "kernels/x86_common.h"
#include "util/dtype_blocks.h"
#include "util/fp16.h"

/* ---------------------------------------------------------------- helpers */

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
 * ggml's AVX-512 ggml_v_expf in eight lanes (ref_ggml_expf says why this
 * variant): j = 1 + p(b) rounded inside the last fma, times 2^n, which is
 * exact where |n| <= 126; the rare lanes beyond take the scalar path.
 */
static inline __m256 v_expf512(__m256 x)
{
    const __m256 r = _mm256_set1_ps(0x1.8p23f);
    const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), r);
    const __m256 n = _mm256_sub_ps(z, r);
    const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f),
                                      _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
    const __m256 u = _mm256_mul_ps(b, b);
    const __m256 j = _mm256_fmadd_ps(
        _mm256_fmadd_ps(
            _mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)), u,
            _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f))),
        u, _mm256_fmadd_ps(_mm256_set1_ps(0x1.ffffecp-1f), b, _mm256_set1_ps(1.0f)));
    const __m256 an = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
    if (_mm256_movemask_ps(_mm256_cmp_ps(an, _mm256_set1_ps(126), _CMP_GT_OQ))) {
        float xs[8], ys[8];
        _mm256_storeu_ps(xs, x);
        for (int l = 0; l < 8; l++)
            ys[l] = ref_ggml_expf(xs[l]);
        return _mm256_loadu_ps(ys);
    }
    const __m256i e = _mm256_slli_epi32(_mm256_castps_si256(z), 23);
    const __m256 k =
        _mm256_castsi256_ps(_mm256_add_epi32(e, _mm256_castps_si256(_mm256_set1_ps(1))));
    return _mm256_mul_ps(j, k);
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

/* Packs 4 x 8 int32 (each within int8) into 32 int8 in order and stores them at p. */
static inline void store_i8x32(int8_t *p, __m256i q0, __m256i q1, __m256i q2, __m256i q3)
{
    /* packs interleave 128-bit lanes: 0-3 8-11 16-19 24-27 | 4-7 ...; the permute restores order.
     */
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const __m256i p16a  = _mm256_packs_epi32(q0, q1);
    const __m256i p16b  = _mm256_packs_epi32(q2, q3);
    const __m256i p8    = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p16a, p16b), order);
    _mm256_storeu_si256((__m256i *)p, p8);
}

static inline int hsum_epi32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s         = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    s         = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

/*
 * One block of 32 activations as llama.cpp's x86 backend rounds them:
 * d = amax/127, q = round-half-even(x * (127/amax)). Writes the quants;
 * returns d and, in *sum, the sum of the quants. Bit-identical to
 * ref_q8_0_act_from_float.
 */
static inline float quant_q8_32(const float *xb, int8_t *qs, int *sum)
{
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 v[4];
    for (int k = 0; k < 4; k++)
        v[k] = _mm256_loadu_ps(xb + 8 * k);
    const __m256 m =
        _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1])),
                      _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3])));
    const float amax = hmax_ps(m);
    const float d    = amax / 127;
    const float id   = amax != 0.0f ? 127.0f / amax : 0.0f;
    const __m256 vid = _mm256_set1_ps(id);
    __m256i q[4];
    for (int k = 0; k < 4; k++)
        q[k] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[k], vid),
                                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    store_i8x32(qs, q[0], q[1], q[2], q[3]);
    *sum = hsum_epi32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
    return d;
}

static void avx2_q8_0_from_float(const float *x, void *y, int64_t n)
{
    struct block_q8_0 *b = y;
    const int64_t nb     = n / QK8_0;
    int sum;
    for (int64_t i = 0; i < nb; i++)
        b[i].d = fp32_to_fp16(quant_q8_32(x + i * QK8_0, b[i].qs, &sum));
}

/* As ref_q8_1_act_from_float: Q8_0's quants, and s = fp16(d * sum of the quants). */
static void avx2_q8_1_from_float(const float *x, void *y, int64_t n)
{
    struct block_q8_1 *b = y;
    const int64_t nb     = n / QK8_1;
    int sum;
    for (int64_t i = 0; i < nb; i++) {
        const float d = quant_q8_32(x + i * QK8_1, b[i].qs, &sum);
        b[i].d        = fp32_to_fp16(d);
        b[i].s        = fp32_to_fp16((float)sum * d);
    }
}

/*
 * As ref_q8_k_from_float (ggml's quantize_row_q8_K_ref), bit for bit: the
 * signed extreme is the first element of largest magnitude; iscale =
 * -127/max in scalar float; nearest_int's round-half-even is
 * _MM_FROUND_TO_NEAREST_INT (both exact for |v| < 2^22).
 */
static void avx2_q8_k_from_float(const float *x, void *y, int64_t n)
{
    struct block_q8_K *b = y;
    const int64_t nb     = n / QK_K;
    const __m256 sign    = _mm256_set1_ps(-0.0f);
    for (int64_t i = 0; i < nb; i++) {
        const float *xb = x + i * QK_K;
        __m256 m        = _mm256_setzero_ps();
        for (int k = 0; k < QK_K; k += 8)
            m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(xb + k)));
        const float amax = hmax_ps(m);
        if (amax == 0.0f) {
            memset(&b[i], 0, sizeof(b[i]));
            continue;
        }
        const __m256 va = _mm256_set1_ps(amax);
        float max       = 0.0f;
        for (int k = 0; k < QK_K; k += 8) {
            const __m256 ax = _mm256_andnot_ps(sign, _mm256_loadu_ps(xb + k));
            const int hit   = _mm256_movemask_ps(_mm256_cmp_ps(ax, va, _CMP_EQ_OQ));
            if (hit) {
                max = xb[k + __builtin_ctz((unsigned)hit)];
                break;
            }
        }
        const float iscale = -127.0f / max;
        const __m256 vs    = _mm256_set1_ps(iscale);
        const __m256i cap  = _mm256_set1_epi32(127);
        for (int k = 0; k < QK_K; k += 32) {
            __m256i q[4];
            for (int j = 0; j < 4; j++) {
                const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(xb + k + 8 * j), vs);
                const __m256 r = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                q[j]           = _mm256_min_epi32(_mm256_cvttps_epi32(r), cap);
            }
            store_i8x32(b[i].qs + k, q[0], q[1], q[2], q[3]);
            b[i].bsums[k / 16]     = (int16_t)hsum_epi32(_mm256_add_epi32(q[0], q[1]));
            b[i].bsums[k / 16 + 1] = (int16_t)hsum_epi32(_mm256_add_epi32(q[2], q[3]));
        }
        b[i].d = 1.0f / iscale;
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

/* Sum of the eight int32 lanes of v (exact). */
static inline int hsum_epi32_8(__m256i v)
{
    __m128i t = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    t         = _mm_add_epi32(t, _mm_unpackhi_epi64(t, t));
    t         = _mm_add_epi32(t, _mm_shuffle_epi32(t, 1));
    return _mm_cvtsi128_si32(t);
}

static inline __m256i dot_i8_32_epi32(__m256i x, __m256i y)
{
    const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

/* Sum of the 32 int8 quants of an activation block (exact). */
static inline int sum_i8_32(__m256i av)
{
    return hsum_epi32_8(
        _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), av), _mm256_set1_epi16(1)));
}

/* The eight int32 sums of v[0..7]'s lanes, in one vector (exact: integer adds). */
static inline __m256i reduce8_epi32(const __m256i v[8])
{
    const __m256i t0 = _mm256_hadd_epi32(v[0], v[1]), t1 = _mm256_hadd_epi32(v[2], v[3]);
    const __m256i t2 = _mm256_hadd_epi32(v[4], v[5]), t3 = _mm256_hadd_epi32(v[6], v[7]);
    const __m256i u0 = _mm256_hadd_epi32(t0, t1), u1 = _mm256_hadd_epi32(t2, t3);
    return _mm256_add_epi32(_mm256_permute2x128_si256(u0, u1, 0x20),
                            _mm256_permute2x128_si256(u0, u1, 0x31));
}

/*
 * Accumulation orders follow the kernels llama.cpp runs on x86 (see ref.c):
 * Q4_0 and IQ4_NL chain one fma per block, Q8_0 and Q5_0 keep eight lanes.
 */
static void avx2_vec_dot_q4_0_q8_0(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_q4_0 *x = w;
    const struct block_q8_0 *y = a;
    const int64_t nb           = n / QK4_0;
    const __m256i m4 = _mm256_set1_epi8(0x0F), ones16 = _mm256_set1_epi16(1);
    float sum = 0.0f;
    int64_t i = 0;
    /* eight blocks' integer sums at a time (one reduction), then the fma chain in order */
    for (; i + 8 <= nb; i += 8) {
        __m256i v[8];
        float dd[8];
        for (int k = 0; k < 8; k++) {
            const __m128i raw = _mm_loadu_si128((const __m128i *)x[i + k].qs);
            const __m256i q   = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), m4);
            const __m256i qy  = _mm256_loadu_si256((const __m256i *)y[i + k].qs);
            /* q - 8 with q unsigned: sum(q * a) - 8 * sum(a), both exact */
            const __m256i pq = _mm256_maddubs_epi16(q, qy);
            const __m256i pa = _mm256_maddubs_epi16(_mm256_set1_epi8(8), qy);
            v[k]             = _mm256_madd_epi16(_mm256_sub_epi16(pq, pa), ones16);
            dd[k]            = half(x[i + k].d) * half(y[i + k].d);
        }
        int32_t is[8];
        _mm256_storeu_si256((__m256i *)is, reduce8_epi32(v));
        for (int k = 0; k < 8; k++)
            sum = fmaf((float)is[k], dd[k], sum);
    }
    for (; i < nb; i++) {
        const __m256i qy = _mm256_loadu_si256((const __m256i *)y[i].qs);
        const int isum   = hsum_epi32_8(dot_i8_32_epi32(unpack_q4_0(x[i].qs), qy));
        sum              = fmaf((float)isum, half(x[i].d) * half(y[i].d), sum);
    }
    *s = sum;
}

/*
 * Q4_0 x Q8_0 for eight rows and up to four tokens at a time. A lane per row
 * keeps the row's chain acc = fma(float(block sum), d_w * d_a, acc) in block
 * order, so each result equals avx2_vec_dot_q4_0_q8_0's bit for bit. The
 * nibbles stay unsigned (0..15) for maddubs and 8 * sum(a) is taken off after.
 */
static void avx2_gemm8_q4_0(int64_t n, const void *w, size_t row_len, const void *a, size_t a_row,
                            const struct q8_0_sum *as, int32_t n_tok, float *s, size_t s_stride)
{
    const int64_t nb     = n / QK4_0;
    const __m256i m4     = _mm256_set1_epi8(0x0F);
    const __m256i ones16 = _mm256_set1_epi16(1);
    for (int32_t t0 = 0; t0 < n_tok; t0 += 4) {
        const int32_t tn = n_tok - t0 < 4 ? n_tok - t0 : 4;
        __m256 acc[4]    = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                            _mm256_setzero_ps()};
        for (int64_t b = 0; b < nb; b++) {
            __m256i wq[8];
            uint16_t dh[8];
            for (int r = 0; r < 8; r++) {
                const struct block_q4_0 *blk =
                    (const struct block_q4_0 *)((const uint8_t *)w + r * row_len) + b;
                /* eight rows are eight streams: fetch ahead so each keeps the memory busy */
                _mm_prefetch((const char *)(blk + 16), _MM_HINT_T0);
                const __m128i raw = _mm_loadu_si128((const __m128i *)blk->qs);
                wq[r] = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), m4);
                dh[r] = blk->d;
            }
            const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)dh));
            for (int32_t tt = 0; tt < tn; tt++) {
                const struct block_q8_0 *ab =
                    (const struct block_q8_0 *)((const uint8_t *)a + (size_t)(t0 + tt) * a_row) + b;
                const __m256i av = _mm256_loadu_si256((const __m256i *)ab->qs);
                __m256i v[8];
                for (int r = 0; r < 8; r++)
                    v[r] = _mm256_madd_epi16(_mm256_maddubs_epi16(wq[r], av), ones16);
                const int suma = sum_i8_32(av);
                const __m256i isum =
                    _mm256_sub_epi32(reduce8_epi32(v), _mm256_set1_epi32(8 * suma));
                const __m256 d = _mm256_mul_ps(dw, _mm256_set1_ps(half(ab->d)));
                acc[tt]        = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), d, acc[tt]);
            }
        }
        for (int32_t tt = 0; tt < tn; tt++)
            _mm256_storeu_ps(s + (size_t)(t0 + tt) * s_stride, acc[tt]);
    }
}

/*
 * The eight rows' exact block sums against one activation block, a lane per
 * row: chunk k's low nibbles meet activation elements 4k..4k+3, its high
 * nibbles 16+4k.., and sum8 (8 times the activation sum) takes the nibbles'
 * offset off. The eight maddubs results stay within int16 (16 products of
 * at most 15 x 128).
 */
static inline __m256i q4p_block(const __m256i lo[4], const __m256i hi[4], const int8_t *qa,
                                __m256i sum8)
{
    const __m256i p0 = _mm256_add_epi16(_mm256_maddubs_epi16(lo[0], bcast4(qa + 0)),
                                        _mm256_maddubs_epi16(hi[0], bcast4(qa + 16)));
    const __m256i p1 = _mm256_add_epi16(_mm256_maddubs_epi16(lo[1], bcast4(qa + 4)),
                                        _mm256_maddubs_epi16(hi[1], bcast4(qa + 20)));
    const __m256i p2 = _mm256_add_epi16(_mm256_maddubs_epi16(lo[2], bcast4(qa + 8)),
                                        _mm256_maddubs_epi16(hi[2], bcast4(qa + 24)));
    const __m256i p3 = _mm256_add_epi16(_mm256_maddubs_epi16(lo[3], bcast4(qa + 12)),
                                        _mm256_maddubs_epi16(hi[3], bcast4(qa + 28)));
    const __m256i p  = _mm256_add_epi16(_mm256_add_epi16(p0, p1), _mm256_add_epi16(p2, p3));
    return _mm256_sub_epi32(_mm256_madd_epi16(p, _mm256_set1_epi16(1)), sum8);
}

/* Token t's chain for the group's eight rows: acc = fma(float(block sum), d_w * d_a, acc). */
static inline __m256 q4p_step(const __m256i lo[4], const __m256i hi[4], __m256 dw, const uint8_t *a,
                              const struct q8_0_sum *as, int64_t b, __m256 acc)
{
    const struct block_q8_0 *ab = (const struct block_q8_0 *)a + b;
    const __m256i isum          = q4p_block(lo, hi, ab->qs, _mm256_set1_epi32(8 * as[b].sum));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, _mm256_set1_ps(as[b].d)),
                           acc);
}

/*
 * One token against a packed group: decode's case, where the kernel has to
 * keep up with memory. Each 32-byte chunk is unpacked and multiplied as it
 * arrives and the chain stays in a register, which the four-token loop's
 * arrays of unpacked blocks and accumulators do not allow.
 */
static void q4p_gemv(int64_t nb, const uint8_t *wp, const uint8_t *a, const struct q8_0_sum *as,
                     float *s)
{
    const size_t gl  = 8 * sizeof(struct block_q4_0);
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc       = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *g = wp + b * gl;
        const int8_t *qa = ((const struct block_q8_0 *)a + b)->qs;
        q40p_prefetch(g, gl);
        __m256i p[4];
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(g + 16 + 32 * k));
            p[k] =
                _mm256_add_epi16(_mm256_maddubs_epi16(_mm256_and_si256(v, m4), bcast4(qa + 4 * k)),
                                 _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4),
                                                      bcast4(qa + 16 + 4 * k)));
        }
        const __m256i ps =
            _mm256_add_epi16(_mm256_add_epi16(p[0], p[1]), _mm256_add_epi16(p[2], p[3]));
        const __m256i isum = _mm256_sub_epi32(_mm256_madd_epi16(ps, _mm256_set1_epi16(1)),
                                              _mm256_set1_epi32(8 * as[b].sum));
        const __m256 dw    = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)g));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, _mm256_set1_ps(as[b].d)),
                              acc);
    }
    _mm256_storeu_ps(s, acc);
}

/*
 * gemm8 over a packed group (ref_pack8_q4_0's layout): one contiguous stream,
 * and a 32-bit lane per row throughout, so the eight rows' block sums need
 * no horizontal reduction. Four tokens share each unpacked weight block.
 */
static void avx2_gemm8p_q4_0(int64_t n, const void *wp, const void *a, size_t a_row,
                             const struct q8_0_sum *as, int32_t n_tok, float *s, size_t s_stride)
{
    const int64_t nb = n / QK4_0;
    const size_t gl  = 8 * sizeof(struct block_q4_0);
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    int32_t t0       = 0;
    for (; t0 < n_tok; t0 += 4) {
        const int32_t tn  = n_tok - t0 < 4 ? n_tok - t0 : 4;
        const uint8_t *a0 = (const uint8_t *)a + (size_t)t0 * a_row;
        if (tn == 1) {
            q4p_gemv(nb, wp, a0, as + t0 * nb, s + (size_t)t0 * s_stride);
            break;
        }
        const uint8_t *a1 = tn > 1 ? a0 + a_row : a0, *a2 = tn > 2 ? a0 + 2 * a_row : a0;
        const uint8_t *a3         = tn > 3 ? a0 + 3 * a_row : a0;
        const struct q8_0_sum *s0 = as + t0 * nb, *s1 = tn > 1 ? s0 + nb : s0;
        const struct q8_0_sum *s2 = tn > 2 ? s0 + 2 * nb : s0, *s3 = tn > 3 ? s0 + 3 * nb : s0;
        __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *g = (const uint8_t *)wp + b * gl;
            q40p_prefetch(g, gl);
            const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)g));
            __m256i lo[4], hi[4];
            for (int k = 0; k < 4; k++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(g + 16 + 32 * k));
                lo[k]           = _mm256_and_si256(v, m4);
                hi[k]           = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
            }
            acc0 = q4p_step(lo, hi, dw, a0, s0, b, acc0);
            if (tn == 4) {
                acc1 = q4p_step(lo, hi, dw, a1, s1, b, acc1);
                acc2 = q4p_step(lo, hi, dw, a2, s2, b, acc2);
                acc3 = q4p_step(lo, hi, dw, a3, s3, b, acc3);
            } else if (tn == 3) {
                acc1 = q4p_step(lo, hi, dw, a1, s1, b, acc1);
                acc2 = q4p_step(lo, hi, dw, a2, s2, b, acc2);
            } else {
                acc1 = q4p_step(lo, hi, dw, a1, s1, b, acc1);
            }
        }
        const __m256 accs[4] = {acc0, acc1, acc2, acc3};
        for (int32_t tt = 0; tt < tn; tt++)
            _mm256_storeu_ps(s + (size_t)(t0 + tt) * s_stride, accs[tt]);
    }
}

/*
 * Q8_0 x Q8_0 for eight rows by up to four tokens, in the tinyBLAS lane
 * order of avx2_vec_dot_q8_0_q8_0: each (row, token) keeps eight lanes of
 * fma(d_w * d_a, float(four-product sum), acc) and reduces them at the end.
 * The scale products d_w * d_a of a chunk of blocks are taken first, four
 * multiplies per block for all 32 pairs, and broadcast from that table: one
 * multiply per pair and block cost a fifth of the time on the FP pipes the
 * fmas need. Two rows at a time keep their eight accumulators in registers;
 * a row's |w| is taken once for the four tokens.
 */
static void avx2_gemm8_q8_0(int64_t n, const void *w, size_t row_len, const void *a, size_t a_row,
                            const struct q8_0_sum *as, int32_t n_tok, float *s, size_t s_stride)
{
    const int64_t nb     = n / QK8_0;
    const __m256i ones16 = _mm256_set1_epi16(1);
    /* the rows' scales as floats: for every block once per call when they fit, else per chunk */
    float dw_all[Q80_DW_MAX][8];
    for (int32_t t0 = 0; t0 < n_tok; t0 += 4) {
        const int32_t tn = n_tok - t0 < 4 ? n_tok - t0 : 4;
        const struct block_q8_0 *y[4];
        const struct q8_0_sum *ys[4];
        q80_tokens(a, a_row, as, nb, t0, tn, 4, y, ys);
        if (t0 == 0 && nb <= Q80_DW_MAX)
            q80_scales(w, row_len, 0, nb, dw_all);
        __m256 acc[8][4]; /* [row][token], between chunks */
        for (int r = 0; r < 8; r++)
            for (int tt = 0; tt < 4; tt++)
                acc[r][tt] = _mm256_setzero_ps();
        for (int64_t b0 = 0; b0 < nb; b0 += Q80_CHUNK) {
            const int64_t bn = nb - b0 < Q80_CHUNK ? nb - b0 : Q80_CHUNK;
            float dd[Q80_CHUNK][4][8]; /* [block][token][row] = d_w * d_a */
            q80_products(w, row_len, nb, b0, bn, ys, dw_all, dd);
            for (int r = 0; r < 8; r += 2) {
                const struct block_q8_0 *x0 =
                    (const struct block_q8_0 *)((const uint8_t *)w + r * row_len) + b0;
                const struct block_q8_0 *x1 =
                    (const struct block_q8_0 *)((const uint8_t *)x0 + row_len);
                /* named, not an array: gcc keeps a stack copy of an array of accumulators */
                __m256 c00 = acc[r][0], c01 = acc[r][1], c02 = acc[r][2], c03 = acc[r][3];
                __m256 c10 = acc[r + 1][0], c11 = acc[r + 1][1], c12 = acc[r + 1][2],
                       c13 = acc[r + 1][3];
                for (int64_t b = 0; b < bn; b++) {
                    const __m256i q0 = _mm256_loadu_si256((const __m256i *)x0[b].qs);
                    const __m256i q1 = _mm256_loadu_si256((const __m256i *)x1[b].qs);
                    const __m256i u0 = _mm256_sign_epi8(q0, q0), u1 = _mm256_sign_epi8(q1, q1);
/* clang-format off */
#define Q80_STEP(tt, c0, c1)                                                                       \
    do {                                                                                           \
        const __m256i qy = _mm256_loadu_si256((const __m256i *)y[tt][b0 + b].qs);                  \
        const __m256 p0  = _mm256_cvtepi32_ps(                                                     \
             _mm256_madd_epi16(_mm256_maddubs_epi16(u0, _mm256_sign_epi8(qy, q0)), ones16));       \
        const __m256 p1 = _mm256_cvtepi32_ps(                                                      \
            _mm256_madd_epi16(_mm256_maddubs_epi16(u1, _mm256_sign_epi8(qy, q1)), ones16));        \
        c0 = _mm256_fmadd_ps(_mm256_broadcast_ss(&dd[b][tt][r]), p0, c0);                          \
        c1 = _mm256_fmadd_ps(_mm256_broadcast_ss(&dd[b][tt][r + 1]), p1, c1);                      \
    } while (0)
                    /* clang-format on */
                    Q80_STEP(0, c00, c10);
                    Q80_STEP(1, c01, c11);
                    Q80_STEP(2, c02, c12);
                    Q80_STEP(3, c03, c13);
#undef Q80_STEP
                }
                acc[r][0] = c00, acc[r][1] = c01, acc[r][2] = c02, acc[r][3] = c03;
                acc[r + 1][0] = c10, acc[r + 1][1] = c11, acc[r + 1][2] = c12, acc[r + 1][3] = c13;
            }
        }
        for (int32_t tt = 0; tt < tn; tt++)
            for (int r = 0; r < 8; r++)
                s[(size_t)(t0 + tt) * s_stride + r] = hsum_ps(acc[r][tt]);
    }
}

#define Q80_AHEAD 4096
static void avx2_vec_dot_q8_0_q8_0(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_q8_0 *x = w;
    const struct block_q8_0 *y = a;
    const int64_t nb           = n / QK8_0;
    __m256 acc                 = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        /* decode streams the rows one after another: keep fetching ahead, past this row's end */
        _mm_prefetch((const char *)&x[i] + Q80_AHEAD, _MM_HINT_T0);
        const __m256 d   = _mm256_set1_ps(half(x[i].d) * half(y[i].d));
        const __m256i qx = _mm256_loadu_si256((const __m256i *)x[i].qs);
        const __m256i qy = _mm256_loadu_si256((const __m256i *)y[i].qs);
        acc              = _mm256_fmadd_ps(d, dot_i8_32(qx, qy), acc);
    }
    *s = hsum_ps(acc);
}

/* ---------------------------------------------------------------- 32-element types */

/* The 32 nibbles of 16 bytes, 0..15: low nibbles to bytes 0..15, high nibbles to 16..31. */
static inline __m256i nibbles_32(const uint8_t *qs)
{
    const __m128i b = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(0x0F));
}

/* Byte j = 0xFF where bit j of the little-endian 32 bits at p is set, else 0. */
static inline __m256i bits_to_bytes(const uint8_t *p)
{
    uint32_t bits;
    memcpy(&bits, p, sizeof(bits));
    const __m256i spread =
        _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits),
                            _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2,
                                             2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
    const __m256i mask = _mm256_set1_epi64x(0x8040201008040201ll);
    return _mm256_cmpeq_epi8(_mm256_and_si256(spread, mask), mask);
}

/* Sum of u[i]*y[i] over 32 pairs (u unsigned, at most 255 with |y| <= 127 and pair sums in int16).
 */
static inline __m256 dot_u8_32(__m256i u, __m256i y)
{
    const __m256i p16 = _mm256_maddubs_epi16(u, y);
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
}

/* As ggml's AVX2 Q4_1 dot: unsigned nibbles against Q8_1 quants; the m * s terms summed apart. */
static void avx2_vec_dot_q4_1_q8_1(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_q4_1 *x = w;
    const struct block_q8_1 *y = a;
    const int64_t nb           = n / QK4_1;
    __m256 acc                 = _mm256_setzero_ps();
    float summs                = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        summs += half(x[i].m) * half(y[i].s);
        const __m256 d   = _mm256_set1_ps(half(x[i].d) * half(y[i].d));
        const __m256i qy = _mm256_loadu_si256((const __m256i *)y[i].qs);
        acc              = _mm256_fmadd_ps(d, dot_u8_32(nibbles_32(x[i].qs), qy), acc);
    }
    *s = hsum_ps(acc) + summs;
}

/* Q5_0: q - 16 as int8 is the nibble with 0xF0 or'ed in where the 5th bit is clear. */
static void avx2_vec_dot_q5_0_q8_0(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_q5_0 *x = w;
    const struct block_q8_0 *y = a;
    const int64_t nb           = n / QK5_0;
    __m256 acc                 = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const __m256 d = _mm256_set1_ps(half(x[i].d) * half(y[i].d));
        const __m256i hi =
            _mm256_andnot_si256(bits_to_bytes(x[i].qh), _mm256_set1_epi8((char)0xF0));
        const __m256i qx = _mm256_or_si256(nibbles_32(x[i].qs), hi);
        const __m256i qy = _mm256_loadu_si256((const __m256i *)y[i].qs);
        acc              = _mm256_fmadd_ps(d, dot_i8_32(qx, qy), acc);
    }
    *s = hsum_ps(acc);
}

static void avx2_vec_dot_q5_1_q8_1(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_q5_1 *x = w;
    const struct block_q8_1 *y = a;
    const int64_t nb           = n / QK5_1;
    __m256 acc                 = _mm256_setzero_ps();
    float summs                = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        summs += half(x[i].m) * half(y[i].s);
        const __m256 d   = _mm256_set1_ps(half(x[i].d) * half(y[i].d));
        const __m256i hi = _mm256_and_si256(bits_to_bytes(x[i].qh), _mm256_set1_epi8(0x10));
        const __m256i qx = _mm256_or_si256(nibbles_32(x[i].qs), hi);
        const __m256i qy = _mm256_loadu_si256((const __m256i *)y[i].qs);
        acc              = _mm256_fmadd_ps(d, dot_u8_32(qx, qy), acc);
    }
    *s = hsum_ps(acc) + summs;
}

/* The 32 IQ4_NL values (int8, -127..113) a 16-byte index block selects, in element order. */
static inline __m256i iq4nl_values_32(const uint8_t *qs, __m128i table)
{
    const __m128i b  = _mm_loadu_si128((const __m128i *)qs);
    const __m128i m4 = _mm_set1_epi8(0x0F);
    const __m128i lo = _mm_shuffle_epi8(table, _mm_and_si128(b, m4));
    const __m128i hi = _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(b, 4), m4));
    return _mm256_set_m128i(hi, lo);
}

static void avx2_vec_dot_iq4_nl_q8_0(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_iq4_nl *x = w;
    const struct block_q8_0 *y   = a;
    const int64_t nb             = n / QK4_NL;
    const __m128i table          = _mm_loadu_si128((const __m128i *)iq4nl_values);
    float sum                    = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        const __m256i qy = _mm256_loadu_si256((const __m256i *)y[i].qs);
        const int isum   = hsum_epi32_8(dot_i8_32_epi32(iq4nl_values_32(x[i].qs, table), qy));
        sum              = fmaf((float)isum, half(x[i].d) * half(y[i].d), sum);
    }
    *s = sum;
}

/* ---------------------------------------------------------------- K-quants */

/*
 * The K-quant dots keep ggml's exact integer sums per super-block (maddubs
 * of unsigned quants against Q8_K's int8, madd by the int16 sub-block
 * scales, int32 adds) and convert to float once per super-block. The inner
 * loops are unrolled so shift counts and shuffle controls are constants.
 */
#define UNROLL _Pragma("GCC unroll 8")

/*
 * Q4_K/Q5_K scales and mins as 16 bytes (8 scales, then 8 mins), unpacked
 * with 32-bit word masks (ggml's formulation; the reference picks bits per
 * index, and the tests hold the two to each other).
 */
static inline __m128i k4_scales(const uint8_t packed[12])
{
    uint32_t u[3];
    memcpy(u, packed, 12);
    const uint32_t m6 = 0x3f3f3f3f, m4 = 0x0f0f0f0f, m2 = 0x03030303;
    const uint32_t sc_lo = u[0] & m6;                                    /* scales 0..3 */
    const uint32_t sc_hi = (u[2] & m4) | ((u[0] >> 6) & m2) << 4;        /* scales 4..7 */
    const uint32_t mn_lo = u[1] & m6;                                    /* mins 0..3 */
    const uint32_t mn_hi = ((u[2] >> 4) & m4) | ((u[1] >> 6) & m2) << 4; /* mins 4..7 */
    return _mm_set_epi32((int)mn_hi, (int)mn_lo, (int)sc_hi, (int)sc_lo);
}

/* Q3_K's 16 scales minus 32, as int8, by word masks (as k4_scales). */
static inline __m128i q3_k_scales(const uint8_t packed[12])
{
    uint32_t a[3];
    memcpy(a, packed, 12);
    const uint32_t m4 = 0x0f0f0f0f, m2 = 0x03030303;
    const __m128i s6 = _mm_set_epi32((int)(((a[1] >> 4) & m4) | ((a[2] >> 6) & m2) << 4),
                                     (int)(((a[0] >> 4) & m4) | ((a[2] >> 4) & m2) << 4),
                                     (int)((a[1] & m4) | ((a[2] >> 2) & m2) << 4),
                                     (int)((a[0] & m4) | (a[2] & m2) << 4));
    return _mm_sub_epi8(s6, _mm_set1_epi8(32));
}

/* Control for _mm256_shuffle_epi8 that broadcasts int16 element e of each 128-bit lane. */
static inline __m256i bcast16(int e)
{
    return _mm256_set1_epi16((short)((2 * e + 1) << 8 | 2 * e));
}

/*
 * Control that broadcasts int16 element e to the low 128-bit lane and e + 1
 * to the high one (a 32-element chunk whose two 16-element halves have
 * their own scales).
 */
static inline __m256i bcast16_pair(int e)
{
    return _mm256_set_m128i(_mm_set1_epi16((short)((2 * e + 3) << 8 | (2 * e + 2))),
                            _mm_set1_epi16((short)((2 * e + 1) << 8 | 2 * e)));
}

/* 16 int8 scales (-128..127) as int16, split into two 8-scale halves each duplicated to both lanes.
 */
static inline void scales16_halves(__m128i sc8, __m256i out[2])
{
    const __m256i all = _mm256_cvtepi8_epi16(sc8);
    const __m128i lo  = _mm256_castsi256_si128(all);
    const __m128i hi  = _mm256_extracti128_si256(all, 1);
    out[0]            = _mm256_set_m128i(lo, lo);
    out[1]            = _mm256_set_m128i(hi, hi);
}

/*
 * Q2_K: the mins come in through bsums (madd of the 16 4-bit mins with the 16
 * sums), the 2-bit quants are unsigned, so maddubs applies directly.
 */
static void avx2_vec_dot_q2_k_q8_k(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_q2_K *x = w;
    const struct block_q8_K *y = a;
    const int64_t nb           = n / QK_K;
    const __m256i m3           = _mm256_set1_epi8(3);
    const __m128i m4           = _mm_set1_epi8(0x0F);
    __m256 acc                 = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const float d    = y[i].d * half(x[i].d);
        const float dmin = -y[i].d * half(x[i].dmin);

        const __m128i packed = _mm_loadu_si128((const __m128i *)x[i].scales);
        const __m256i mins   = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), m4));
        const __m256i bsums  = _mm256_loadu_si256((const __m256i *)y[i].bsums);
        acc                  = _mm256_fmadd_ps(_mm256_set1_ps(dmin),
                                               _mm256_cvtepi32_ps(_mm256_madd_epi16(mins, bsums)), acc);

        __m256i scales[2];
        scales16_halves(_mm_and_si128(packed, m4), scales);

        const uint8_t *q2 = x[i].qs;
        const int8_t *q8  = y[i].qs;
        __m256i sumi      = _mm256_setzero_si256();
        UNROLL
        for (int h = 0; h < 2; h++) {
            const __m256i bits = _mm256_loadu_si256((const __m256i *)(q2 + 32 * h));
            UNROLL
            for (int k = 0; k < 4; k++) {
                const __m256i q  = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * k), m3);
                const __m256i qy = _mm256_loadu_si256((const __m256i *)(q8 + 128 * h + 32 * k));
                const __m256i p  = _mm256_maddubs_epi16(q, qy);
                const __m256i sc = _mm256_shuffle_epi8(scales[h], bcast16_pair(2 * k));
                sumi             = _mm256_add_epi32(sumi, _mm256_madd_epi16(sc, p));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = hsum_ps(acc);
}

/*
 * Q3_K: q = low2 - 4 * (high bit clear). maddubs needs unsigned operands, so
 * maddubs(low2, q8) - maddubs(4 * !high, q8), both exact in int16.
 */
/*
 * Each byte's bit b, the only one set, moved to bit t: one shift, or none
 * (b and t constants once unrolled). No bit crosses into the other byte of
 * a 16-bit lane.
 */
static inline __m256i bit_to(__m256i v, int b, int t)
{
    return b < t ? _mm256_slli_epi16(v, t - b) : b > t ? _mm256_srli_epi16(v, b - t) : v;
}

static void avx2_vec_dot_q3_k_q8_k(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_q3_K *x = w;
    const struct block_q8_K *y = a;
    const int64_t nb           = n / QK_K;
    const __m256i m3           = _mm256_set1_epi8(3);
    __m256 acc                 = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const float d = y[i].d * half(x[i].d);
        __m256i scales[2];
        scales16_halves(q3_k_scales(x[i].scales), scales);

        const __m256i hbits = _mm256_loadu_si256((const __m256i *)x[i].hmask);
        const int8_t *q8    = y[i].qs;
        __m256i sumi        = _mm256_setzero_si256();
        UNROLL
        for (int h = 0; h < 2; h++) {
            const __m256i bits = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * h));
            UNROLL
            for (int k = 0; k < 4; k++) {
                const int bit    = 4 * h + k;
                const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * k), m3);
                const __m256i nh = _mm256_andnot_si256(hbits, _mm256_set1_epi8((char)(1 << bit)));
                const __m256i h4 = bit_to(nh, bit, 2);
                const __m256i qy = _mm256_loadu_si256((const __m256i *)(q8 + 128 * h + 32 * k));
                const __m256i p =
                    _mm256_sub_epi16(_mm256_maddubs_epi16(lo, qy), _mm256_maddubs_epi16(h4, qy));
                const __m256i sc = _mm256_shuffle_epi8(scales[h], bcast16_pair(2 * k));
                sumi             = _mm256_add_epi32(sumi, _mm256_madd_epi16(sc, p));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = hsum_ps(acc);
}

/* A Q4_K/Q5_K superblock's 8 scales as int16 in both lanes (*scales); returns its 8 mins as int16.
 */
static inline __m128i k4_scales_mins(const uint8_t packed[12], __m256i *scales)
{
    const __m256i ms   = _mm256_cvtepu8_epi16(k4_scales(packed));
    const __m128i sc16 = _mm256_castsi256_si128(ms);
    *scales            = _mm256_set_m128i(sc16, sc16);
    return _mm256_extracti128_si256(ms, 1);
}

/*
 * Q4_K/Q5_K setup: the 8 scales as int16 in both lanes, and the min term
 * sum_j m_j * (bsums[2j] + bsums[2j+1]) as 4 int32 lanes.
 */
static inline __m128i k4_setup(const uint8_t packed[12], const struct block_q8_K *y,
                               __m256i *scales)
{
    return _mm_madd_epi16(k4_scales_mins(packed, scales), q8k_bsum_pairs(y));
}

/*
 * A K-quant superblock (kq_dot8) or half of one (kq_dot4) against a Q8_K
 * block's quants, exact, eight int32 lanes: q[c] holds 32-element chunk c's
 * quants as unsigned bytes, sc[c] its scale(s) shuffled into int16 lanes
 * (q4_k_unpack, q6_k_unpack_half).
 */
static inline __m256i kq_dot4(const __m256i q[4], const __m256i sc[4], const int8_t *q8)
{
    __m256i sumi = _mm256_setzero_si256();
    UNROLL
    for (int c = 0; c < 4; c++) {
        const __m256i qy = _mm256_loadu_si256((const __m256i *)(q8 + 32 * c));
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(sc[c], _mm256_maddubs_epi16(q[c], qy)));
    }
    return sumi;
}

static inline __m256i kq_dot8(const __m256i q[8], const __m256i sc[8], const int8_t *q8)
{
    return _mm256_add_epi32(kq_dot4(q, sc, q8), kq_dot4(q + 4, sc + 4, q8 + 128));
}

/* Q4_K's quants and scales in kq_dot8's form: chunk 2g is the low nibbles of qs[32g..], 2g+1 the
 * high. */
static inline void q4_k_unpack(const uint8_t qs[QK_K / 2], __m256i scales, __m256i q[8],
                               __m256i sc[8])
{
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    UNROLL
    for (int g = 0; g < 4; g++) {
        const __m256i bits = _mm256_loadu_si256((const __m256i *)(qs + 32 * g));
        q[2 * g]           = _mm256_and_si256(bits, m4);
        q[2 * g + 1]       = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
        sc[2 * g]          = _mm256_shuffle_epi8(scales, bcast16(2 * g));
        sc[2 * g + 1]      = _mm256_shuffle_epi8(scales, bcast16(2 * g + 1));
    }
}

/* The exact sum of a Q4_K superblock's quants times its scales against a Q8_K block. */
static inline int q4_k_isum(const struct block_q4_K *x, const struct block_q8_K *y, __m256i scales)
{
    __m256i q[8], sc[8];
    q4_k_unpack(x->qs, scales, q, sc);
    return hsum_epi32_8(kq_dot8(q, sc, y->qs));
}

/* ref_vec_dot_q4_k_q8_k's order (llama.cpp's repacked gemv): one fma per superblock per chain. */
static void avx2_vec_dot_q4_k_q8_k(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_q4_K *x = w;
    const struct block_q8_K *y = a;
    const int64_t nb           = n / QK_K;
    float acc = 0.0f, acc_m = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        __m256i scales;
        __m128i mins   = k4_setup(x[i].scales, &y[i], &scales);
        mins           = _mm_add_epi32(mins, _mm_unpackhi_epi64(mins, mins));
        mins           = _mm_add_epi32(mins, _mm_shuffle_epi32(mins, 1));
        const int imin = _mm_cvtsi128_si32(mins);
        const int isum = q4_k_isum(&x[i], &y[i], scales);
        acc            = fmaf((float)isum, half(x[i].d) * y[i].d, acc);
        acc_m          = fmaf((float)imin, half(x[i].dmin) * y[i].d, acc_m);
    }
    *s = acc - acc_m;
}

/* Q5_K: Q4_K with the 5th bit (bit j of qh for sub-block j) added in as 16. */
static void avx2_vec_dot_q5_k_q8_k(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_q5_K *x = w;
    const struct block_q8_K *y = a;
    const int64_t nb           = n / QK_K;
    const __m256i m4           = _mm256_set1_epi8(0x0F);
    __m256 acc                 = _mm256_setzero_ps();
    float summs                = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        const float d    = y[i].d * half(x[i].d);
        const float dmin = -y[i].d * half(x[i].dmin);
        __m256i scales;
        const __m128i mins = k4_setup(x[i].scales, &y[i], &scales);
        /* ggml sums Q5_K's min term in int, then in a scalar float; so do we. */
        __m128i m = _mm_add_epi32(mins, _mm_unpackhi_epi64(mins, mins));
        m         = _mm_add_epi32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(2, 3, 0, 1)));
        summs += dmin * (float)_mm_cvtsi128_si32(m);

        const __m256i hbits = _mm256_loadu_si256((const __m256i *)x[i].qh);
        const int8_t *q8    = y[i].qs;
        __m256i sumi        = _mm256_setzero_si256();
        UNROLL
        for (int g = 0; g < 4; g++) {
            const int bl = 2 * g, bh = 2 * g + 1;
            const __m256i bits = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * g));
            const __m256i hl   = _mm256_and_si256(hbits, _mm256_set1_epi8((char)(1 << bl)));
            const __m256i hh   = _mm256_and_si256(hbits, _mm256_set1_epi8((char)(1 << bh)));
            const __m256i ql   = _mm256_add_epi8(_mm256_and_si256(bits, m4), bit_to(hl, bl, 4));
            const __m256i qh   = _mm256_add_epi8(_mm256_and_si256(_mm256_srli_epi16(bits, 4), m4),
                                                 bit_to(hh, bh, 4));
            const __m256i yl   = _mm256_loadu_si256((const __m256i *)(q8 + 64 * g));
            const __m256i yh   = _mm256_loadu_si256((const __m256i *)(q8 + 64 * g + 32));
            const __m256i pl   = _mm256_madd_epi16(_mm256_shuffle_epi8(scales, bcast16(bl)),
                                                   _mm256_maddubs_epi16(ql, yl));
            const __m256i ph   = _mm256_madd_epi16(_mm256_shuffle_epi8(scales, bcast16(bh)),
                                                   _mm256_maddubs_epi16(qh, yh));
            sumi               = _mm256_add_epi32(sumi, _mm256_add_epi32(pl, ph));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = hsum_ps(acc) + summs;
}

/* Q6_K's -32 offset against a Q8_K block: 32 * sum_j scale_j * bsums[j], sc16 the scales as int16.
 */
static inline __m256i q6_k_off(const struct block_q8_K *y, __m256i sc16)
{
    const __m256i bsums = _mm256_loadu_si256((const __m256i *)y->bsums);
    return _mm256_slli_epi32(_mm256_madd_epi16(bsums, sc16), 5);
}

/*
 * Half h of a Q6_K superblock's quants (0..63, unsigned) and scales in
 * kq_dot4's form: chunk c is elements 128h + 32c.., each 16-element half
 * with its own scale; scales as scales16_halves gives them.
 */
static inline void q6_k_unpack_half(const struct block_q6_K *x, int h, const __m256i scales[2],
                                    __m256i q[4], __m256i sc[4])
{
    /* each high-bit pair is moved straight to bits 4-5 (mask 0x30), one shift or none */
    const __m256i m30 = _mm256_set1_epi8(0x30), m4 = _mm256_set1_epi8(0x0F);
    const __m256i l0 = _mm256_loadu_si256((const __m256i *)(x->ql + 64 * h));
    const __m256i l1 = _mm256_loadu_si256((const __m256i *)(x->ql + 64 * h + 32));
    const __m256i hb = _mm256_loadu_si256((const __m256i *)(x->qh + 32 * h));
    q[0] =
        _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), m30));
    q[1] =
        _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 2), m30));
    q[2] =
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(hb, m30));
    q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                           _mm256_and_si256(_mm256_srli_epi16(hb, 2), m30));
    UNROLL
    for (int c = 0; c < 4; c++)
        sc[c] = _mm256_shuffle_epi8(scales[h], bcast16_pair(2 * c));
}

/*
 * Q6_K: the unsigned 6-bit q (0..63) goes through maddubs; the -32 offset is
 * taken off at the end as 32 * sum_j scale_j * bsums[j].
 */
static void avx2_vec_dot_q6_k_q8_k(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_q6_K *x = w;
    const struct block_q8_K *y = a;
    const int64_t nb           = n / QK_K;
    __m256 acc                 = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        /* as Q8_0's: the rows stream one after another in decode */
        for (int o = 0; o < (int)sizeof x[i]; o += 64)
            _mm_prefetch((const char *)&x[i] + Q80_AHEAD + o, _MM_HINT_T0);
        const float d     = y[i].d * half(x[i].d);
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)x[i].scales);
        __m256i scales[2];
        scales16_halves(sc8, scales);
        __m256i sumi =
            _mm256_sub_epi32(_mm256_setzero_si256(), q6_k_off(&y[i], _mm256_cvtepi8_epi16(sc8)));
        UNROLL
        for (int h = 0; h < 2; h++) {
            __m256i q[4], sc[4];
            q6_k_unpack_half(&x[i], h, scales, q, sc);
            sumi = _mm256_add_epi32(sumi, kq_dot4(q, sc, y[i].qs + 128 * h));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = hsum_ps(acc);
}

/* The Q8_K rows of tokens t0..t0+3 of a, repeating t0 past n_tok (computed, never stored). */
static inline void kq_tokens(const void *a, size_t a_row, int32_t t0, int32_t tn,
                             const struct block_q8_K *y[4])
{
    for (int32_t tt = 0; tt < 4; tt++)
        y[tt] = (const struct block_q8_K *)((const uint8_t *)a +
                                            (size_t)(t0 + (tt < tn ? tt : 0)) * a_row);
}

/*
 * Q4_K gemm8 in ref_gemm8_q4_k's order (llama.cpp's repacked gemm): tokens
 * in whole fours step once per 64-element pair of sub-blocks with a lane
 * per row, the eight rows' exact sums reduced into one vector and the mins
 * taken by one madd of the rows' min pairs; the tail tokens go to vec_dot.
 */
static void avx2_gemm8_q4_k(int64_t n, const void *w, size_t row_len, const void *a, size_t a_row,
                            const struct q8_0_sum *as, int32_t n_tok, float *s, size_t s_stride)
{
    const int64_t nb    = n / QK_K;
    const int32_t quads = n_tok / 4 * 4;
    for (int32_t t0 = 0; t0 < quads; t0 += 4) {
        const struct block_q8_K *y[4];
        __m256 acc[4], acc_m[4];
        for (int tt = 0; tt < 4; tt++) {
            y[tt]   = (const struct block_q8_K *)((const uint8_t *)a + (size_t)(t0 + tt) * a_row);
            acc[tt] = acc_m[tt] = _mm256_setzero_ps();
        }
        for (int64_t i = 0; i < nb; i++) {
            __m256i q[8][8], sc[8][8]; /* [row][sub-block] */
            int32_t mn[4][8];          /* [pair][row]: the row's two mins of the pair, int16 each */
            uint16_t dh[8], dmh[8];
            for (int r = 0; r < 8; r++) {
                const struct block_q4_K *x =
                    (const struct block_q4_K *)((const uint8_t *)w + r * row_len) + i;
                __m256i scales;
                int32_t mp[4];
                _mm_storeu_si128((__m128i *)mp, k4_scales_mins(x->scales, &scales));
                q4_k_unpack(x->qs, scales, q[r], sc[r]);
                for (int g = 0; g < 4; g++)
                    mn[g][r] = mp[g];
                dh[r]  = x->d;
                dmh[r] = x->dmin;
            }
            const __m256 dw  = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)dh));
            const __m256 dmw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)dmh));
            for (int tt = 0; tt < 4; tt++) {
                const struct block_q8_K *yb = y[tt] + i;
                const __m256 da             = _mm256_broadcast_ss(&yb->d);
                const __m256 d = _mm256_mul_ps(dw, da), dm = _mm256_mul_ps(dmw, da);
                int32_t bp[4]; /* pair g: sub-blocks 2g and 2g+1's activation sums, int16 each */
                _mm_storeu_si128((__m128i *)bp, q8k_bsum_pairs(yb));
                for (int g = 0; g < 4; g++) {
                    const __m256i yl = _mm256_loadu_si256((const __m256i *)(yb->qs + 64 * g));
                    const __m256i yh = _mm256_loadu_si256((const __m256i *)(yb->qs + 64 * g + 32));
                    __m256i v[8];
                    UNROLL
                    for (int r = 0; r < 8; r++)
                        v[r] = _mm256_add_epi32(
                            _mm256_madd_epi16(sc[r][2 * g], _mm256_maddubs_epi16(q[r][2 * g], yl)),
                            _mm256_madd_epi16(sc[r][2 * g + 1],
                                              _mm256_maddubs_epi16(q[r][2 * g + 1], yh)));
                    const __m256i isum = reduce8_epi32(v);
                    const __m256i imin = _mm256_madd_epi16(
                        _mm256_loadu_si256((const __m256i *)mn[g]), _mm256_set1_epi32(bp[g]));
                    acc[tt]   = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), d, acc[tt]);
                    acc_m[tt] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(imin), dm, acc_m[tt]);
                }
            }
        }
        for (int tt = 0; tt < 4; tt++)
            _mm256_storeu_ps(s + (size_t)(t0 + tt) * s_stride, _mm256_sub_ps(acc[tt], acc_m[tt]));
    }
    for (int32_t t = quads; t < n_tok; t++)
        for (int r = 0; r < 8; r++)
            avx2_vec_dot_q4_k_q8_k(n, &s[(size_t)t * s_stride + r],
                                   (const uint8_t *)w + r * row_len,
                                   (const uint8_t *)a + (size_t)t * a_row);
}

/*
 * Sub-block sums of eight packed rows against one token, a lane per row:
 * eight maddubs of a nibble half with broadcast activation quads stay
 * within int16 (16 products of at most 15 x 128), then the scale madd.
 */
static inline __m256i q4kp_sub(const uint8_t *q, int hi, const int8_t *qa, __m256i sc)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256i p        = _mm256_setzero_si256();
    UNROLL
    for (int k = 0; k < 8; k++) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(q + 32 * k));
        v         = _mm256_and_si256(hi ? _mm256_srli_epi16(v, 4) : v, m4);
        p         = _mm256_add_epi16(p, _mm256_maddubs_epi16(v, bcast4(qa + 4 * k)));
    }
    return _mm256_madd_epi16(p, sc);
}

/*
 * One token against a packed Q4_K group in the gemv order (decode): scales
 * are expanded as each sub-block pair needs them and both chains stay in
 * registers, so the kernel keeps up with memory.
 */
static void q4kp_gemv(int64_t nb, const uint8_t *wp, const uint8_t *a, float *s)
{
    const size_t gl = 8 * sizeof(struct block_q4_K);
    __m256 acc = _mm256_setzero_ps(), acc_m = acc;
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *p = wp + b * gl;
        q4kp_prefetch(p, gl);
        const struct block_q8_K *yb = (const struct block_q8_K *)a + b;
        uint8_t e[4][32];
        q4kp_entries(p, e);
        int32_t bp[4];
        _mm_storeu_si128((__m128i *)bp, q8k_bsum_pairs(yb));
        __m256i isum = _mm256_setzero_si256(), imin = isum;
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++) {
            const uint8_t *q = p + 128 + 256 * g;
            isum = _mm256_add_epi32(isum, q4kp_sub(q, 0, yb->qs + 64 * g, q4kp_sc(e, 2 * g)));
            isum =
                _mm256_add_epi32(isum, q4kp_sub(q, 1, yb->qs + 64 * g + 32, q4kp_sc(e, 2 * g + 1)));
            imin =
                _mm256_add_epi32(imin, _mm256_madd_epi16(q4kp_mn(e, g), _mm256_set1_epi32(bp[g])));
        }
        const __m256 da  = _mm256_broadcast_ss(&yb->d);
        const __m256 dw  = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
        const __m256 dmw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 16)));
        acc              = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, da), acc);
        acc_m            = _mm256_fmadd_ps(_mm256_cvtepi32_ps(imin), _mm256_mul_ps(dmw, da), acc_m);
    }
    _mm256_storeu_ps(s, _mm256_sub_ps(acc, acc_m));
}

/*
 * gemm8 over a packed Q4_K group, with avx2_gemm8_q4_k's rule: tokens below
 * n_tok / 4 * 4 step once per sub-block pair (llama.cpp's repacked gemm), the
 * others once per superblock (its gemv, as vec_dot), each a lane per row.
 */
static void avx2_gemm8p_q4_k(int64_t n, const void *wp, const void *a, size_t a_row,
                             const struct q8_0_sum *as, int32_t n_tok, float *s, size_t s_stride)
{
    const int64_t nb    = n / QK_K;
    const int32_t quads = n_tok / 4 * 4;
    const size_t gl     = 8 * sizeof(struct block_q4_K);
    for (int32_t t0 = 0; t0 < n_tok; t0 += 4) {
        const int32_t tn = n_tok - t0 < 4 ? n_tok - t0 : 4;
        const int quad   = t0 < quads;
        if (tn == 1) {
            q4kp_gemv(nb, wp, (const uint8_t *)a + (size_t)t0 * a_row, s + (size_t)t0 * s_stride);
            break;
        }
        __m256 acc[4], acc_m[4];
        for (int tt = 0; tt < 4; tt++)
            acc[tt] = acc_m[tt] = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *p = (const uint8_t *)wp + b * gl;
            q4kp_prefetch(p, gl);
            __m256i sc[8], mn[4];
            q4kp_scales(p, sc, mn);
            const __m256 dw  = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
            const __m256 dmw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 16)));
            for (int32_t tt = 0; tt < tn; tt++) {
                const struct block_q8_K *yb =
                    (const struct block_q8_K *)((const uint8_t *)a + (size_t)(t0 + tt) * a_row) + b;
                const __m256 da = _mm256_broadcast_ss(&yb->d);
                const __m256 d = _mm256_mul_ps(dw, da), dm = _mm256_mul_ps(dmw, da);
                int32_t bp[4]; /* pair g: sub-blocks 2g and 2g+1's activation sums, int16 each */
                _mm_storeu_si128((__m128i *)bp, q8k_bsum_pairs(yb));
                __m256i isum = _mm256_setzero_si256(), imin = isum;
                for (int g = 0; g < 4; g++) {
                    const uint8_t *q = p + 128 + 256 * g;
                    const __m256i ig =
                        _mm256_add_epi32(q4kp_sub(q, 0, yb->qs + 64 * g, sc[2 * g]),
                                         q4kp_sub(q, 1, yb->qs + 64 * g + 32, sc[2 * g + 1]));
                    const __m256i mg = _mm256_madd_epi16(mn[g], _mm256_set1_epi32(bp[g]));
                    if (quad) {
                        acc[tt]   = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ig), d, acc[tt]);
                        acc_m[tt] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mg), dm, acc_m[tt]);
                    } else {
                        isum = _mm256_add_epi32(isum, ig);
                        imin = _mm256_add_epi32(imin, mg);
                    }
                }
                if (!quad) {
                    acc[tt]   = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), d, acc[tt]);
                    acc_m[tt] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(imin), dm, acc_m[tt]);
                }
            }
        }
        for (int32_t tt = 0; tt < tn; tt++)
            _mm256_storeu_ps(s + (size_t)(t0 + tt) * s_stride, _mm256_sub_ps(acc[tt], acc_m[tt]));
    }
}

static void avx2_gemm8_q6_k(int64_t n, const void *w, size_t row_len, const void *a, size_t a_row,
                            const struct q8_0_sum *as, int32_t n_tok, float *s, size_t s_stride)
{
    const int64_t nb = n / QK_K;
    for (int32_t t0 = 0; t0 < n_tok; t0 += 4) {
        const int32_t tn = n_tok - t0 < 4 ? n_tok - t0 : 4;
        const struct block_q8_K *y[4];
        kq_tokens(a, a_row, t0, tn, y);
        for (int r = 0; r < 8; r++) {
            const struct block_q6_K *x =
                (const struct block_q6_K *)((const uint8_t *)w + r * row_len);
            __m256 acc[4];
            for (int tt = 0; tt < 4; tt++)
                acc[tt] = _mm256_setzero_ps();
            for (int64_t i = 0; i < nb; i++) {
                const __m128i sc8  = _mm_loadu_si128((const __m128i *)x[i].scales);
                const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
                __m256i scales[2], q[8], sc[8];
                scales16_halves(sc8, scales);
                q6_k_unpack_half(&x[i], 0, scales, q, sc);
                q6_k_unpack_half(&x[i], 1, scales, q + 4, sc + 4);
                const __m256 dx = _mm256_set1_ps(half(x[i].d));
                UNROLL
                for (int tt = 0; tt < 4; tt++) {
                    const struct block_q8_K *yb = y[tt] + i;
                    const __m256i sumi =
                        _mm256_sub_epi32(kq_dot8(q, sc, yb->qs), q6_k_off(yb, sc16));
                    acc[tt] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_broadcast_ss(&yb->d), dx),
                                              _mm256_cvtepi32_ps(sumi), acc[tt]);
                }
            }
            for (int32_t tt = 0; tt < tn; tt++)
                s[(size_t)(t0 + tt) * s_stride + r] = hsum_ps(acc[tt]);
        }
    }
}

/* IQ4_XS: IQ4_NL's table lookup per 32, the sub-block scales applied in int16 madd. */
static void avx2_vec_dot_iq4_xs_q8_k(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_iq4_xs *x = w;
    const struct block_q8_K *y   = a;
    const int64_t nb             = n / QK_K;
    const __m128i table          = _mm_loadu_si128((const __m128i *)iq4nl_values);
    __m256 acc                   = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        __m256i sumi = _mm256_setzero_si256();
        UNROLL
        for (int j = 0; j < QK_K / 32; j++) {
            const int ls = (((x[i].scales_l[j / 2] >> (4 * (j % 2))) & 0x0F) |
                            ((x[i].scales_h >> (2 * j)) & 3) << 4) -
                           32;
            const __m256i qx = iq4nl_values_32(x[i].qs + 16 * j, table);
            const __m256i qy = _mm256_loadu_si256((const __m256i *)(y[i].qs + 32 * j));
            const __m256i p16 =
                _mm256_maddubs_epi16(_mm256_sign_epi8(qx, qx), _mm256_sign_epi8(qy, qx));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p16, _mm256_set1_epi16((short)ls)));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(half(x[i].d) * y[i].d), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = hsum_ps(acc);
}

/* ---------------------------------------------------------------- IQ2, IQ3 */

/*
 * The codebook types: per 32-element sub-block the grid entries' magnitudes
 * become one vector of unsigned bytes, the sign bits a vector of +-1 applied
 * to the activations, and one maddubs/madd gives exact int32 sums. The float
 * steps after the integer sums are the reference's, in its order, so each
 * dot has ref_vec_dot_*'s bits.
 */

/*
 * clang contracts d * bsum + sumf into an fma where -mfma allows it, which
 * the reference (built without FMA) does not: turned off in these dots.
 */
#if defined(__clang__)
#define IQ_NO_CONTRACT _Pragma("STDC FP_CONTRACT OFF")
#else
#define IQ_NO_CONTRACT /* gcc does not contract in ISO C mode */
#endif

/* +1 or -1 per element of a sub-block: element 8l + k is negative when bit k of s[l] is set. */
static inline __m256i iq_signs32(const uint8_t s[4])
{
    const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                          2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bits = _mm256_set1_epi64x(0x8040201008040201ll);
    const __m256i b =
        _mm256_shuffle_epi8(_mm256_set1_epi32((int)((uint32_t)s[0] | (uint32_t)s[1] << 8 |
                                                    (uint32_t)s[2] << 16 | (uint32_t)s[3] << 24)),
                            shuf);
    const __m256i neg = _mm256_cmpeq_epi8(_mm256_and_si256(b, bits), bits);
    return _mm256_or_si256(neg, _mm256_set1_epi8(1));
}

/* sum(mag[e] * sign[e] * q8[e]) over the 32 elements, as 8 int32 lanes (0-3: elements 0-15). */
static inline __m256i iq_dot32(__m256i mag, __m256i sign, const int8_t *q8)
{
    const __m256i qy = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)q8), sign);
    return _mm256_madd_epi16(_mm256_maddubs_epi16(mag, qy), _mm256_set1_epi16(1));
}

static inline int32_t hsum_epi32_128(__m128i v)
{
    v = _mm_add_epi32(v, _mm_shuffle_epi32(v, _MM_SHUFFLE(1, 0, 3, 2)));
    v = _mm_add_epi32(v, _mm_shuffle_epi32(v, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(v);
}

/* The sums of elements 0-15 and 16-31 of iq_dot32's lanes. */
static inline void iq_halves(__m256i v, int32_t *lo, int32_t *hi)
{
    *lo = hsum_epi32_128(_mm256_castsi256_si128(v));
    *hi = hsum_epi32_128(_mm256_extracti128_si256(v, 1));
}

static inline uint32_t iq_le32(const void *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static void avx2_vec_dot_iq2_xxs_q8_k(int64_t n, float *s, const void *w, const void *a)
{
    IQ_NO_CONTRACT
    const struct block_iq2_xxs *x = w;
    const struct block_q8_K *y    = a;
    float sumf                    = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = fp16_to_fp32(x[i].d) * y[i].d;
        int32_t bsum  = 0;
        for (int j = 0; j < QK_K / 32; j++) {
            const uint32_t idx = iq_le32(&x[i].qs[4 * j]), aux = iq_le32(&x[i].qs[4 * j + 2]);
            const uint8_t sg[4] = {iq_ksigns[aux & 127], iq_ksigns[(aux >> 7) & 127],
                                   iq_ksigns[(aux >> 14) & 127], iq_ksigns[(aux >> 21) & 127]};
            const __m256i mag   = _mm256_set_epi64x(
                  (long long)iq2xxs_grid[idx >> 24], (long long)iq2xxs_grid[(idx >> 16) & 255],
                  (long long)iq2xxs_grid[(idx >> 8) & 255], (long long)iq2xxs_grid[idx & 255]);
            int32_t lo, hi;
            iq_halves(iq_dot32(mag, iq_signs32(sg), y[i].qs + 32 * j), &lo, &hi);
            bsum += (lo + hi) * (int32_t)(2 * (aux >> 28) + 1);
        }
        sumf += d * (float)bsum;
    }
    *s = 0.125f * sumf;
}

static void avx2_vec_dot_iq2_xs_q8_k(int64_t n, float *s, const void *w, const void *a)
{
    IQ_NO_CONTRACT
    const struct block_iq2_xs *x = w;
    const struct block_q8_K *y   = a;
    float sumf                   = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = fp16_to_fp32(x[i].d) * y[i].d;
        int32_t bsum  = 0;
        for (int j = 0; j < QK_K / 32; j++) {
            const uint16_t *q   = x[i].qs + 4 * j;
            const uint8_t sg[4] = {iq_ksigns[q[0] >> 9], iq_ksigns[q[1] >> 9], iq_ksigns[q[2] >> 9],
                                   iq_ksigns[q[3] >> 9]};
            const __m256i mag   = _mm256_set_epi64x(
                  (long long)iq2xs_grid[q[3] & 511], (long long)iq2xs_grid[q[2] & 511],
                  (long long)iq2xs_grid[q[1] & 511], (long long)iq2xs_grid[q[0] & 511]);
            int32_t lo, hi;
            iq_halves(iq_dot32(mag, iq_signs32(sg), y[i].qs + 32 * j), &lo, &hi);
            bsum += lo * (2 * (x[i].scales[j] & 15) + 1) + hi * (2 * (x[i].scales[j] >> 4) + 1);
        }
        sumf += d * (float)bsum;
    }
    *s = 0.125f * sumf;
}

static void avx2_vec_dot_iq2_s_q8_k(int64_t n, float *s, const void *w, const void *a)
{
    IQ_NO_CONTRACT
    const struct block_iq2_s *x = w;
    const struct block_q8_K *y  = a;
    float sumf                  = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = fp16_to_fp32(x[i].d) * y[i].d;
        int bsum      = 0;
        for (int j = 0; j < QK_K / 32; j++) {
            const uint8_t *qs = x[i].qs + 4 * j;
            const int qh      = x[i].qh[j];
            const __m256i mag =
                _mm256_set_epi64x((long long)iq2s_grid[qs[3] | ((qh << 2) & 0x300)],
                                  (long long)iq2s_grid[qs[2] | ((qh << 4) & 0x300)],
                                  (long long)iq2s_grid[qs[1] | ((qh << 6) & 0x300)],
                                  (long long)iq2s_grid[qs[0] | ((qh << 8) & 0x300)]);
            int32_t lo, hi;
            iq_halves(iq_dot32(mag, iq_signs32(x[i].qs + QK_K / 8 + 4 * j), y[i].qs + 32 * j), &lo,
                      &hi);
            bsum += (1 + 2 * (x[i].scales[j] & 15)) * lo + (1 + 2 * (x[i].scales[j] >> 4)) * hi;
        }
        sumf += d * (float)bsum;
    }
    *s = 0.125f * sumf;
}

static void avx2_vec_dot_iq3_xxs_q8_k(int64_t n, float *s, const void *w, const void *a)
{
    IQ_NO_CONTRACT
    const struct block_iq3_xxs *x = w;
    const struct block_q8_K *y    = a;
    float sumf                    = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = fp16_to_fp32(x[i].d) * y[i].d;
        int32_t bsum  = 0;
        for (int j = 0; j < QK_K / 32; j++) {
            const uint8_t *q3   = x[i].qs + 8 * j;
            const uint32_t aux  = iq_le32(x[i].qs + QK_K / 4 + 4 * j);
            const uint8_t sg[4] = {iq_ksigns[aux & 127], iq_ksigns[(aux >> 7) & 127],
                                   iq_ksigns[(aux >> 14) & 127], iq_ksigns[(aux >> 21) & 127]};
            const __m256i mag = _mm256_setr_epi32((int)iq3xxs_grid[q3[0]], (int)iq3xxs_grid[q3[1]],
                                                  (int)iq3xxs_grid[q3[2]], (int)iq3xxs_grid[q3[3]],
                                                  (int)iq3xxs_grid[q3[4]], (int)iq3xxs_grid[q3[5]],
                                                  (int)iq3xxs_grid[q3[6]], (int)iq3xxs_grid[q3[7]]);
            int32_t lo, hi;
            iq_halves(iq_dot32(mag, iq_signs32(sg), y[i].qs + 32 * j), &lo, &hi);
            bsum += (lo + hi) * (int32_t)(2 * (aux >> 28) + 1);
        }
        sumf += d * (float)bsum;
    }
    *s = 0.25f * sumf;
}

static void avx2_vec_dot_iq3_s_q8_k(int64_t n, float *s, const void *w, const void *a)
{
    IQ_NO_CONTRACT
    const struct block_iq3_s *x = w;
    const struct block_q8_K *y  = a;
    float sumf                  = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = fp16_to_fp32(x[i].d) * y[i].d;
        int32_t bsum  = 0;
        for (int j = 0; j < QK_K / 32; j++) {
            const uint8_t *qs = x[i].qs + 8 * j;
            const int qh      = x[i].qh[j];
            int g[8];
            for (int k = 0; k < 8; k++)
                g[k] = (int)iq3s_grid[qs[k] | ((qh >> k) & 1) << 8];
            const __m256i mag = _mm256_loadu_si256((const __m256i *)g);
            int32_t lo, hi;
            iq_halves(iq_dot32(mag, iq_signs32(x[i].signs + 4 * j), y[i].qs + 32 * j), &lo, &hi);
            bsum += (lo + hi) * (int32_t)(2 * ((x[i].scales[j / 2] >> (4 * (j % 2))) & 15) + 1);
        }
        sumf += d * (float)bsum;
    }
    *s = sumf;
}

/* IQ1_S: the grid's -1/0/1 bytes sign the activations; the shift term comes from the bsums. */
static void avx2_vec_dot_iq1_s_q8_k(int64_t n, float *s, const void *w, const void *a)
{
    IQ_NO_CONTRACT
    const struct block_iq1_s *x = w;
    const struct block_q8_K *y  = a;
    const __m256i ones8         = _mm256_set1_epi8(1);
    float sumf                  = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int sumi = 0, sumi1 = 0;
        for (int j = 0; j < QK_K / 32; j++) {
            const uint16_t qh = x[i].qh[j];
            const uint8_t *qs = x[i].qs + 4 * j;
            const __m256i g = _mm256_set_epi64x((long long)iq1s_grid[qs[3] | ((qh >> 9) & 7) << 8],
                                                (long long)iq1s_grid[qs[2] | ((qh >> 6) & 7) << 8],
                                                (long long)iq1s_grid[qs[1] | ((qh >> 3) & 7) << 8],
                                                (long long)iq1s_grid[qs[0] | (qh & 7) << 8]);
            const __m256i qy =
                _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(y[i].qs + 32 * j)), g);
            const int lsum = hsum_epi32(
                _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, qy), _mm256_set1_epi16(1)));
            const int ls    = 2 * ((qh >> 12) & 7) + 1;
            const int delta = qh & 0x8000 ? -1 : 1;
            sumi += ls * lsum;
            sumi1 += ls * delta * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
        }
        sumf += fp16_to_fp32(x[i].d) * y[i].d * ((float)sumi + 0.125f * (float)sumi1);
    }
    *s = sumf;
}

/* TQ2_0: sum(q * a) over the four 2-bit planes, minus sum(a) for the -1 offset. */
static void avx2_vec_dot_tq2_0_q8_k(int64_t n, float *s, const void *w, const void *a)
{
    IQ_NO_CONTRACT
    const struct block_tq2_0 *x = w;
    const struct block_q8_K *y  = a;
    const __m256i m3            = _mm256_set1_epi8(3);
    float sumf                  = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        __m256i acc = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            const __m256i bytes = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * h));
            for (int k = 0; k < 4; k++) {
                const __m256i q =
                    _mm256_and_si256(_mm256_srl_epi16(bytes, _mm_cvtsi32_si128(2 * k)), m3);
                const __m256i qy =
                    _mm256_loadu_si256((const __m256i *)(y[i].qs + 128 * h + 32 * k));
                acc = _mm256_add_epi32(
                    acc, _mm256_madd_epi16(_mm256_maddubs_epi16(q, qy), _mm256_set1_epi16(1)));
            }
        }
        int32_t asum = 0;
        for (int j = 0; j < QK_K / 16; j++)
            asum += y[i].bsums[j];
        const int32_t sumi = hsum_epi32(acc) - asum;
        sumf += (float)sumi * (y[i].d * fp16_to_fp32(x[i].d));
    }
    *s = sumf;
}

/* MXFP4: IQ4_NL's table lookup with the E2M1 values, the reference's float chain per block. */
static void avx2_vec_dot_mxfp4_q8_0(int64_t n, float *s, const void *w, const void *a)
{
    IQ_NO_CONTRACT
    const struct block_mxfp4 *x = w;
    const struct block_q8_0 *y  = a;
    const __m128i table         = _mm_loadu_si128((const __m128i *)mxfp4_values);
    const __m128i m4            = _mm_set1_epi8(0x0F);
    float sum                   = 0.0f;
    for (int64_t i = 0; i < n / QK_MXFP4; i++) {
        const __m128i q4 = _mm_loadu_si128((const __m128i *)x[i].qs);
        const __m256i v =
            _mm256_set_m128i(_mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(q4, 4), m4)),
                             _mm_shuffle_epi8(table, _mm_and_si128(q4, m4)));
        const __m256i qy  = _mm256_loadu_si256((const __m256i *)y[i].qs);
        const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(qy, v));
        const int sumi    = hsum_epi32(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
        const float d     = fp16_to_fp32(y[i].d) * mxfp4_scale(x[i].e);
        sum += d * (float)sumi;
    }
    *s = sum;
}

/* The table entry of a Q8_K type: the reference's to_float, this file's dot. */
#define AVX2_IQ_ENTRY(T, t)                                                                        \
    [DTYPE_##T] = {.vec_dot_type = DTYPE_Q8_K,                                                     \
                   .to_float     = ref_##t##_to_float,                                             \
                   .vec_dot      = avx2_vec_dot_##t##_q8_k}

/* ---------------------------------------------------------------- int8 peak */

/* Eight independent maddubs, madd, add chains: the AVX2 int8 dot as the gemms run it. */
static double avx2_int8_probe(int64_t rounds)
{
    __m256i acc[8], u[8];
    const __m256i v = _mm256_set1_epi8(5), ones = _mm256_set1_epi16(1);
    for (int i = 0; i < 8; i++) {
        acc[i] = _mm256_set1_epi32(i);
        u[i]   = _mm256_set1_epi8((char)(i + 1));
    }
    for (int64_t it = 0; it < rounds; it++) {
        UNROLL
        for (int i = 0; i < 8; i++)
            acc[i] =
                _mm256_add_epi32(acc[i], _mm256_madd_epi16(_mm256_maddubs_epi16(u[i], v), ones));
        /* the operands are "changed" each round, so nothing is hoisted out of the loop */
        __asm__ volatile(""
                         : "+x"(u[0]), "+x"(u[1]), "+x"(u[2]), "+x"(u[3]), "+x"(u[4]), "+x"(u[5]),
                           "+x"(u[6]), "+x"(u[7]));
    }
    __m256i t = acc[0];
    for (int i = 1; i < 8; i++)
        t = _mm256_add_epi32(t, acc[i]);
    int32_t sink = _mm256_extract_epi32(t, 0);
    __asm__ volatile("" : : "r"(sink));
    return (double)rounds * 8 * 32 * 2;
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
    const __m256 one  = _mm256_set1_ps(1.0f);
    const int64_t n16 = n - n % 16; /* ggml's AVX-512 loop covers 16-lane groups only */
    int64_t i         = 0;
    for (; i < n16; i += 8) {
        const __m256 v = _mm256_loadu_ps(g + i);
        const __m256 e = v_expf512(_mm256_sub_ps(_mm256_setzero_ps(), v));
        const __m256 s = _mm256_div_ps(v, _mm256_add_ps(one, e));
        _mm256_storeu_ps(y + i, _mm256_mul_ps(s, _mm256_loadu_ps(u + i)));
    }
    for (; i < n; i++)
        y[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

/* Row c of a key or value tile as floats: tile[c * hd ..], from the cache's f16 or f32 row. */
static inline void attn_load_row(float *dst, const uint8_t *row, int32_t hd, int f16)
{
    for (int32_t d = 0; d < hd; d += 8)
        _mm256_storeu_ps(dst + d, f16 ? load_f16((const uint16_t *)row + d)
                                      : _mm256_loadu_ps((const float *)row + d));
}

/*
 * o[0..8 nv) += p[c * 8] v_c over keys c = c0..c1 of the value tile vt
 * (rows hd floats apart), a sequential fma per dimension as ref does.
 */
static inline __attribute__((always_inline)) void attn_acc_values(float *o, const float *vt,
                                                                  int32_t hd, const float *p,
                                                                  int32_t c0, int32_t c1, int nv)
{
    __m256 r[8];
    UNROLL
    for (int v = 0; v < 8; v++)
        r[v] = v < nv ? _mm256_loadu_ps(o + 8 * v) : _mm256_setzero_ps();
    for (int32_t c = c0; c <= c1; c++) {
        const __m256 pc = _mm256_broadcast_ss(p + c * 8);
        const float *vr = vt + (size_t)c * hd;
        UNROLL
        for (int v = 0; v < nv; v++)
            r[v] = _mm256_fmadd_ps(_mm256_loadu_ps(vr + 8 * v), pc, r[v]);
    }
    UNROLL
    for (int v = 0; v < nv; v++)
        _mm256_storeu_ps(o + 8 * v, r[v]);
}

/* Eight f16 values from p as floats. */
static inline __m256 load_ph(const uint16_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

static inline void store_ph(uint16_t *p, __m256 v)
{
    _mm_storeu_si128((__m128i *)p, _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

/* ggml_vec_dot_f16's reduction of its four sixteen-lane accumulators (a[2k + h]: k's lanes 8h..) */
static inline double ggml_f16_reduce(const __m256 a[8])
{
    const __m256 lo = _mm256_add_ps(_mm256_add_ps(a[0], a[4]), _mm256_add_ps(a[2], a[6]));
    const __m256 hi = _mm256_add_ps(_mm256_add_ps(a[1], a[5]), _mm256_add_ps(a[3], a[7]));
    const __m256 t3 = _mm256_add_ps(hi, lo);
    const __m128 t6 = _mm_add_ps(_mm256_extractf128_ps(t3, 1), _mm256_castps256_ps128(t3));
    const __m128 t7 = _mm_add_ps(t6, _mm_movehl_ps(t6, t6));
    return (double)_mm_cvtss_f32(_mm_add_ss(t7, _mm_movehdup_ps(t7)));
}

/* ref.c's dot_f16_ggml: each of ggml's sixteen-lane accumulators as two eight-lane halves. */
static float dot_f16_ggml(const uint16_t *x, const uint16_t *y, int32_t n)
{
    const int32_t np = n - n % 64;
    __m256 a[8]; /* a[2k + h]: accumulator k, lanes 8h..8h+7 */
    for (int i = 0; i < 8; i++)
        a[i] = _mm256_setzero_ps();
    for (int32_t i = 0; i < np; i += 64)
        for (int k = 0; k < 8; k++)
            a[k] = _mm256_fmadd_ps(load_ph(x + i + 8 * k), load_ph(y + i + 8 * k), a[k]);
    double sum = ggml_f16_reduce(a);
    for (int32_t i = np; i < n; i++)
        sum += (double)(fp16_to_fp32(x[i]) * fp16_to_fp32(y[i]));
    return (float)sum;
}

/*
 * ref_attn_row_f16 with F16C conversions, bit for bit: the accumulator's
 * elements are each their own multiply or fma and rounding, so eight at a
 * time changes nothing.
 */
static void avx2_attn_row_f16(float *out, const float *q, int32_t hd, const struct attn_kv *kv,
                              int32_t j0, int32_t j1, float scale, float *scratch)
{
    if (hd % 8) {
        ref_attn_row_f16(out, q, hd, kv, j0, j1, scale, scratch);
        return;
    }
    uint16_t *q16 = (uint16_t *)scratch, *acc = q16 + hd;
    for (int32_t d = 0; d < hd; d += 8) {
        store_ph(q16 + d, _mm256_loadu_ps(q + d));
        store_ph(acc + d, _mm256_setzero_ps());
    }
    float M = -INFINITY, S = 0.0f;
    for (int32_t j = j0; j <= j1; j++) {
        const float s = dot_f16_ggml((const uint16_t *)attn_kv_row(kv->k, kv, j), q16, hd) * scale;
        float ms = 1.0f, vs = 1.0f;
        if (s > M) {
            ms             = expf(M - s);
            M              = s;
            const __m256 m = _mm256_set1_ps(ms);
            for (int32_t d = 0; d < hd; d += 8)
                store_ph(acc + d, _mm256_mul_ps(load_ph(acc + d), m));
        } else {
            vs = expf(s - M);
        }
        const uint16_t *vr = (const uint16_t *)attn_kv_row(kv->v, kv, j);
        const __m256 w     = _mm256_set1_ps(vs);
        for (int32_t d = 0; d < hd; d += 8)
            store_ph(acc + d, _mm256_fmadd_ps(load_ph(vr + d), w, load_ph(acc + d)));
        S = fmaf(S, ms, vs);
    }
    const __m256 inv = _mm256_set1_ps(S == 0.0f ? 0.0f : 1.0f / S);
    for (int32_t d = 0; d < hd; d += 8)
        _mm256_storeu_ps(out + d, _mm256_mul_ps(load_ph(acc + d), inv));
}

/*
 * expf with glibc's bits in four lanes: x86_avx512.c's expf_libm8 (its
 * comment says why these are libm's bits) on four doubles, the table's
 * entry gathered. Lanes outside (-103.9, 0] are libm's own.
 */
static inline __m128 expf_libm4(__m128 x)
{
    const __m256d inv = _mm256_set1_pd(0x1.71547652b82fep+0 * 32), shift = _mm256_set1_pd(0x1.8p52);
    const __m256d xd = _mm256_cvtps_pd(x);
    const __m256d kr = _mm256_fmadd_pd(inv, xd, shift); /* k in the low bits */
    const __m256i ki = _mm256_castpd_si256(kr);
    const __m256d r  = _mm256_fmsub_pd(inv, xd, _mm256_sub_pd(kr, shift));
    const __m256i t  = _mm256_i64gather_epi64((const long long *)exp2_32,
                                              _mm256_and_si256(ki, _mm256_set1_epi64x(31)), 8);
    const __m256d s  = _mm256_castsi256_pd(_mm256_add_epi64(t, _mm256_slli_epi64(ki, 47)));
    const __m256d z  = _mm256_fmadd_pd(_mm256_set1_pd(0x1.c6af84b912394p-5 / 32 / 32 / 32), r,
                                       _mm256_set1_pd(0x1.ebfce50fac4f3p-3 / 32 / 32));
    const __m256d y  = _mm256_fmadd_pd(
         z, _mm256_mul_pd(r, r),
         _mm256_fmadd_pd(_mm256_set1_pd(0x1.62e42ff0c52d6p-1 / 32), r, _mm256_set1_pd(1.0)));
    return _mm256_cvtpd_ps(_mm256_mul_pd(y, s));
}

static inline __m256 expf_libm8(__m256 x)
{
    const int in =
        _mm256_movemask_ps(_mm256_and_ps(_mm256_cmp_ps(x, _mm256_set1_ps(-103.9f), _CMP_GT_OQ),
                                         _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LE_OQ)));
    __m256 y = _mm256_insertf128_ps(_mm256_castps128_ps256(expf_libm4(_mm256_castps256_ps128(x))),
                                    expf_libm4(_mm256_extractf128_ps(x, 1)), 1);
    if (in != 0xff) {
        float xs[8], ys[8];
        _mm256_storeu_ps(xs, x);
        _mm256_storeu_ps(ys, y);
        for (int l = 0; l < 8; l++)
            if (!(in >> l & 1))
                ys[l] = expf(xs[l]);
        y = _mm256_loadu_ps(ys);
    }
    return y;
}

static void avx2_expf_libm(const float *x, float *y, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, expf_libm8(_mm256_loadu_ps(x + i)));
    for (; i < n; i++)
        y[i] = expf(x[i]);
}

/*
 * Dimension i of the NH keys whose rows are interleaved at k ([hd][NH],
 * attn8_load_rows) in every lane: lane l takes head l % NH's.
 */
static inline __attribute__((always_inline)) __m256 kbcast8(const float *k, int32_t i, const int NH)
{
    if (NH == 1)
        return _mm256_broadcast_ss(k + i);
    if (NH == 2)
        return _mm256_castpd_ps(_mm256_broadcast_sd((const double *)(const void *)(k + 2 * i)));
    return _mm256_broadcast_ps((const __m128 *)(const void *)(k + 4 * i));
}

/*
 * Row j's f16 K or V rows of NH heads (head h's head_off * h bytes past
 * row) as floats interleaved, [hd][NH], for kbcast8.
 */
static inline __attribute__((always_inline)) void
attn8_load_rows(float *dst, const uint8_t *row, size_t head_off, int32_t hd, const int NH)
{
    for (int32_t d = 0; d < hd; d += 8) {
        __m256 a[4];
        for (int h = 0; h < NH; h++)
            a[h] = load_ph((const uint16_t *)(row + (size_t)h * head_off) + d);
        float *o = dst + (size_t)d * NH;
        if (NH == 1) {
            _mm256_storeu_ps(o, a[0]);
            continue;
        }
        /* heads 0, 1 (and 2, 3) a float at a time: dims 0..3 and 4..7 in order */
        const __m256 l01 = _mm256_unpacklo_ps(a[0], a[1]), h01 = _mm256_unpackhi_ps(a[0], a[1]);
        const __m256 p0 = _mm256_permute2f128_ps(l01, h01, 0x20);
        const __m256 p1 = _mm256_permute2f128_ps(l01, h01, 0x31);
        if (NH == 2) {
            _mm256_storeu_ps(o, p0);
            _mm256_storeu_ps(o + 8, p1);
            continue;
        }
        const __m256 l23 = _mm256_unpacklo_ps(a[2], a[3]), h23 = _mm256_unpackhi_ps(a[2], a[3]);
        const __m256d q0 = _mm256_castps_pd(_mm256_permute2f128_ps(l23, h23, 0x20));
        const __m256d q1 = _mm256_castps_pd(_mm256_permute2f128_ps(l23, h23, 0x31));
        /* then the two a pair at a time: dims 0, 2 and 1, 3 per 128-bit half, put in order */
        const __m256d pd0 = _mm256_castps_pd(p0), pd1 = _mm256_castps_pd(p1);
        const __m256d e0 = _mm256_unpacklo_pd(pd0, q0), o0 = _mm256_unpackhi_pd(pd0, q0);
        const __m256d e1 = _mm256_unpacklo_pd(pd1, q1), o1 = _mm256_unpackhi_pd(pd1, q1);
        _mm256_storeu_ps(o, _mm256_castpd_ps(_mm256_permute2f128_pd(e0, o0, 0x20)));
        _mm256_storeu_ps(o + 8, _mm256_castpd_ps(_mm256_permute2f128_pd(e0, o0, 0x31)));
        _mm256_storeu_ps(o + 16, _mm256_castpd_ps(_mm256_permute2f128_pd(e1, o1, 0x20)));
        _mm256_storeu_ps(o + 24, _mm256_castpd_ps(_mm256_permute2f128_pd(e1, o1, 0x31)));
    }
}

/*
 * ggml_vec_dot_f16 of one key (k: hd floats, or NH keys interleaved) with
 * eight queries at once, a lane each (qt: [hd][8]): x86_avx512.c's
 * f16lanes_score on eight lanes, the same operations per lane.
 */
static inline __attribute__((always_inline)) __m256 f16lanes_score8(const float *k, const float *qt,
                                                                    int32_t hd, const int NH)
{
    const int32_t np = hd - hd % 64;
    __m256 t6[4];
    UNROLL
    for (int l = 0; l < 4; l++) {
        __m256 v[4]; /* ggml's v[l], v[l + 4], v[l + 8], v[l + 12] */
        UNROLL
        for (int m = 0; m < 4; m++) {
            __m256 p[4]; /* accumulator a's lane l + 4m */
            UNROLL
            for (int a = 0; a < 4; a++) {
                const int32_t at = l + 4 * m + 16 * a;
                p[a]             = _mm256_setzero_ps();
                for (int32_t i = 0; i < np; i += 64)
                    p[a] = _mm256_fmadd_ps(kbcast8(k, i + at, NH),
                                           _mm256_loadu_ps(qt + (size_t)(i + at) * 8), p[a]);
            }
            v[m] = _mm256_add_ps(_mm256_add_ps(p[0], p[2]), _mm256_add_ps(p[1], p[3]));
        }
        t6[l] = _mm256_add_ps(_mm256_add_ps(v[3], v[1]), _mm256_add_ps(v[2], v[0]));
    }
    __m256 s = _mm256_add_ps(_mm256_add_ps(t6[0], t6[2]), _mm256_add_ps(t6[1], t6[3]));
    if (np == hd)
        return s;
    __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(s));
    __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(s, 1));
    for (int32_t i = np; i < hd; i++) {
        const __m256 p = _mm256_mul_ps(kbcast8(k, i, NH), _mm256_loadu_ps(qt + (size_t)i * 8));
        lo             = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(p)));
        hi             = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(p, 1)));
    }
    return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm256_cvtpd_ps(lo)), _mm256_cvtpd_ps(hi),
                                1);
}

/* x rounded to f16 and back: what storing an f16 accumulator does to it. */
static inline __m256 round_f16(__m256 x)
{
    return _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
}

/* Keys per tile of attn_rows_f16: their f32 keys and values, 2 x 32 x hd floats, stay in L1. */
#define ATTN_F16_TILE 32

/*
 * The lane kernel on eight lanes: up to ATTN_LANES rows, a query row per
 * vector lane, each bit for bit avx2_attn_row_f16's (x86_avx512.c's lane
 * kernel, the masked steps as blends). Lane l's row reads KV head l % NH
 * (NH 1: one head's GQA group or a verify step's tokens; 2 or 4: the
 * groups of that many heads over one token), whose rows lie head_off *
 * (l % NH) bytes past kv's. Per tile of keys, each key's scores, softmax
 * steps and weights are computed for all rows at once; then the f16
 * accumulators, eight dimensions at a time in registers, take the tile's
 * keys in order, rounded to f16 after every step.
 */
static inline __attribute__((always_inline)) void
attn8_lanes(float *const *out, const float *const *q, int32_t nq, int32_t hd,
            const struct attn_kv *kv, size_t head_off, const int32_t *j0, const int32_t *j1,
            float scale, float *scratch, const int NH)
{
    enum { TMAX = ATTN_F16_TILE };
    /* a tile's keys and values of NH heads within 2 x 16 KiB */
    const int32_t T  = NH == 1                   ? TMAX
                       : 4096 / (hd * NH) > TMAX ? TMAX
                       : 4096 / (hd * NH) < 1    ? 1
                                                 : 4096 / (hd * NH);
    const int32_t kw = hd * NH; /* floats of one key's rows in a tile */
    /* [hd][8] queries, [T][hd][NH] keys, then values, [T][8] weights ms and vs and the lanes
     * that see a key and that it gives a new maximum, [hd][8] f16 accumulators: 12 hd +
     * 2 T (hd NH + 16) floats, within ATTN_SCRATCH */
    float *qt = scratch, *kt = qt + (size_t)8 * hd, *vt = kt + (size_t)T * kw;
    float *wm = vt + (size_t)T * kw, *wv = wm + (size_t)T * 8, *wk = wv + (size_t)T * 8;
    float *wg     = wk + (size_t)T * 8;
    uint16_t *acc = (uint16_t *)(wg + (size_t)T * 8);
    int see[TMAX], up[TMAX];
    int32_t jl[8], jh[8], lo = INT32_MAX, hi = INT32_MIN;
    for (int32_t r = 0; r < 8; r++) {
        jl[r] = r < nq ? j0[r] : INT32_MAX; /* idle lanes see no key */
        jh[r] = r < nq ? j1[r] : INT32_MIN;
        lo    = jl[r] < lo ? jl[r] : lo;
        hi    = jh[r] > hi ? jh[r] : hi;
    }
    for (int32_t d = 0; d < hd; d += 8) {
        float f[8];
        for (int32_t r = 0; r < 8; r++) {
            _mm256_storeu_ps(f,
                             r < nq ? round_f16(_mm256_loadu_ps(q[r] + d)) : _mm256_setzero_ps());
            for (int i = 0; i < 8; i++)
                qt[(size_t)(d + i) * 8 + r] = f[i];
        }
    }
    memset(acc, 0, (size_t)hd * 8 * sizeof(uint16_t));
    const __m256i vjl = _mm256_loadu_si256((const __m256i *)jl);
    const __m256i vjh = _mm256_loadu_si256((const __m256i *)jh);
    const __m256 one = _mm256_set1_ps(1.0f), vscale = _mm256_set1_ps(scale);
    /* lanes past nq: no row reads them, so a key every row sees takes the unmasked update */
    const int idle = (0xff << nq) & 0xff;
    __m256 M = _mm256_set1_ps(-INFINITY), S = _mm256_setzero_ps();
    for (int32_t t0 = lo; t0 <= hi; t0 += T) {
        const int32_t nt = hi - t0 + 1 < T ? hi - t0 + 1 : T;
        for (int32_t u = 0; u < nt; u++) {
            attn8_load_rows(kt + (size_t)u * kw, attn_kv_row(kv->k, kv, t0 + u), head_off, hd, NH);
            attn8_load_rows(vt + (size_t)u * kw, attn_kv_row(kv->v, kv, t0 + u), head_off, hd, NH);
        }
        for (int32_t u = 0; u < nt; u++) {
            const __m256i j = _mm256_set1_epi32(t0 + u);
            const __m256 k  = _mm256_castsi256_ps(_mm256_andnot_si256(
                 _mm256_or_si256(_mm256_cmpgt_epi32(vjl, j), _mm256_cmpgt_epi32(j, vjh)),
                 _mm256_set1_epi32(-1)));
            const __m256 s =
                _mm256_mul_ps(f16lanes_score8(kt + (size_t)u * kw, qt, hd, NH), vscale);
            const __m256 g = _mm256_and_ps(k, _mm256_cmp_ps(s, M, _CMP_GT_OQ));
            /* a new maximum rescales by expf(M - s) and weighs the key 1; else expf(s - M) */
            const __m256 e = expf_libm8(
                _mm256_and_ps(k, _mm256_blendv_ps(_mm256_sub_ps(s, M), _mm256_sub_ps(M, s), g)));
            const __m256 ms = _mm256_blendv_ps(one, e, g), vs = _mm256_blendv_ps(e, one, g);
            M = _mm256_blendv_ps(M, s, g);
            S = _mm256_blendv_ps(S, _mm256_fmadd_ps(S, ms, vs), k);
            _mm256_storeu_ps(wm + (size_t)u * 8, ms);
            _mm256_storeu_ps(wv + (size_t)u * 8, vs);
            _mm256_storeu_ps(wk + (size_t)u * 8, k);
            _mm256_storeu_ps(wg + (size_t)u * 8, g);
            see[u] = _mm256_movemask_ps(k);
            up[u]  = _mm256_movemask_ps(g);
        }
        for (int32_t d = 0; d < hd; d += 8) {
            __m256 a[8];
            UNROLL
            for (int i = 0; i < 8; i++)
                a[i] = load_ph(acc + (size_t)(d + i) * 8);
            for (int32_t u = 0; u < nt; u++) {
                const float *vr = vt + (size_t)u * kw + (size_t)d * NH;
                if (up[u]) {
                    const __m256 m = _mm256_loadu_ps(wm + (size_t)u * 8);
                    const __m256 g = _mm256_loadu_ps(wg + (size_t)u * 8);
                    UNROLL
                    for (int i = 0; i < 8; i++)
                        a[i] = round_f16(_mm256_blendv_ps(a[i], _mm256_mul_ps(a[i], m), g));
                }
                const __m256 w = _mm256_loadu_ps(wv + (size_t)u * 8);
                if ((see[u] | idle) == 0xff) {
                    UNROLL
                    for (int i = 0; i < 8; i++)
                        a[i] = round_f16(_mm256_fmadd_ps(kbcast8(vr, i, NH), w, a[i]));
                } else if (see[u]) {
                    const __m256 k = _mm256_loadu_ps(wk + (size_t)u * 8);
                    UNROLL
                    for (int i = 0; i < 8; i++)
                        a[i] = round_f16(_mm256_blendv_ps(
                            a[i], _mm256_fmadd_ps(kbcast8(vr, i, NH), w, a[i]), k));
                }
            }
            UNROLL
            for (int i = 0; i < 8; i++)
                store_ph(acc + (size_t)(d + i) * 8, a[i]);
        }
    }
    const __m256 inv =
        _mm256_and_ps(_mm256_div_ps(one, S), _mm256_cmp_ps(S, _mm256_setzero_ps(), _CMP_NEQ_UQ));
    for (int32_t d = 0; d < hd; d++) {
        float f[8];
        _mm256_storeu_ps(f, _mm256_mul_ps(load_ph(acc + (size_t)d * 8), inv));
        for (int32_t r = 0; r < nq; r++)
            out[r][d] = f[r];
    }
}

/* attn_rows_f16: the lane kernel over one KV head; other head sizes row by row. */
static void avx2_attn_rows_f16(float *const *out, const float *const *q, int32_t nq, int32_t hd,
                               const struct attn_kv *kv, const int32_t *j0, const int32_t *j1,
                               float scale, float *scratch)
{
    if (hd % 8 || nq > ATTN_LANES) {
        for (int32_t r = 0; r < nq; r++)
            avx2_attn_row_f16(out[r], q[r], hd, kv, j0[r], j1[r], scale, scratch);
        return;
    }
    attn8_lanes(out, q, nq, hd, kv, 0, j0, j1, scale, scratch, 1);
}

/* attn_heads_f16: the lane kernel over two or four KV heads (kernels.h). */
static void avx2_attn_heads_f16(float *const *out, const float *const *q, int32_t nq, int32_t nh,
                                int32_t hd, const struct attn_kv *kv, size_t head_off,
                                const int32_t *j0, const int32_t *j1, float scale, float *scratch)
{
    if (nh == 4)
        attn8_lanes(out, q, nq, hd, kv, head_off, j0, j1, scale, scratch, 4);
    else if (nh == 2)
        attn8_lanes(out, q, nq, hd, kv, head_off, j0, j1, scale, scratch, 2);
    else
        attn8_lanes(out, q, nq, hd, kv, head_off, j0, j1, scale, scratch, 1);
}

/*
 * attn_acc_values for two rows over the same keys (o: the first row's
 * output, the second hd floats on; p: the first row's probabilities, the
 * second one lane over): each key's value vectors are loaded once for both,
 * and each element keeps its own sequential chain.
 */
static inline __attribute__((always_inline)) void attn_acc_values2(float *o, const float *vt,
                                                                   int32_t hd, const float *p,
                                                                   int32_t c0, int32_t c1, int nv)
{
    __m256 r0[4], r1[4];
#pragma GCC unroll 4
    for (int v = 0; v < 4; v++) {
        r0[v] = v < nv ? _mm256_loadu_ps(o + 8 * v) : _mm256_setzero_ps();
        r1[v] = v < nv ? _mm256_loadu_ps(o + hd + 8 * v) : _mm256_setzero_ps();
    }
    for (int32_t c = c0; c <= c1; c++) {
        const __m256 p0 = _mm256_broadcast_ss(p + c * 8), p1 = _mm256_broadcast_ss(p + c * 8 + 1);
        const float *vr = vt + (size_t)c * hd;
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) {
            const __m256 x = _mm256_loadu_ps(vr + 8 * v);
            r0[v]          = _mm256_fmadd_ps(x, p0, r0[v]);
            r1[v]          = _mm256_fmadd_ps(x, p1, r1[v]);
        }
    }
#pragma GCC unroll 4
    for (int v = 0; v < nv; v++) {
        _mm256_storeu_ps(o + 8 * v, r0[v]);
        _mm256_storeu_ps(o + hd + 8 * v, r1[v]);
    }
}

/*
 * Scores of the tile of keys from t0 for G groups at once (G constant at
 * each call, so the accumulators stay in the sixteen registers): each key's
 * broadcast serves every group, and each query vector is loaded once for U
 * keys. Key c's score in lane r is one sequential fma chain over the head
 * dimension, times scale, or -INFINITY outside the lane's keys. Writes each
 * group's p and tile maximum T.
 */
static inline __attribute__((always_inline)) void attn8_scores(struct attn_group *const *gs,
                                                               const int G, int32_t t0,
                                                               const float *kt, int32_t hd,
                                                               float scale, int32_t c0, int32_t c1)
{
    enum { U = 4 };
    _Static_assert(ATTN_TILE % U == 0, "a tile is whole steps of U keys");
    const __m256 vscale = _mm256_set1_ps(scale), ninf = _mm256_set1_ps(-INFINITY);
    __m256 tmax[2];
    for (int g = 0; g < G; g++)
        tmax[g] = ninf;
    for (int32_t c = 0; c < ATTN_TILE; c += U) {
        if (c + U - 1 < c0 || c > c1) {
            for (int g = 0; g < G; g++)
                for (int32_t u = 0; u < U; u++)
                    _mm256_storeu_ps(gs[g]->p + (c + u) * 8, ninf);
            continue;
        }
        const float *kr[U];
        for (int32_t u = 0; u < U; u++) {
            const int32_t cc = c + u < c0 ? c0 : c + u > c1 ? c1 : c + u;
            kr[u]            = kt + (size_t)cc * hd;
        }
        __m256 a[2][U];
#pragma GCC unroll 2
        for (int g = 0; g < G; g++)
#pragma GCC unroll 4
            for (int u = 0; u < U; u++)
                a[g][u] = _mm256_setzero_ps();
        for (int32_t d = 0; d < hd; d++) {
            __m256 qd[2];
#pragma GCC unroll 2
            for (int g = 0; g < G; g++)
                qd[g] = _mm256_loadu_ps(gs[g]->qt + d * 8);
#pragma GCC unroll 4
            for (int u = 0; u < U; u++) {
                const __m256 kd = _mm256_broadcast_ss(kr[u] + d);
#pragma GCC unroll 2
                for (int g = 0; g < G; g++)
                    a[g][u] = _mm256_fmadd_ps(kd, qd[g], a[g][u]);
            }
        }
        /* unrolled whole: a loop left rolled keeps a[][] on the stack */
#pragma GCC unroll 2
        for (int g = 0; g < G; g++) {
            const __m256i vjl = _mm256_loadu_si256((const __m256i *)gs[g]->jl);
            const __m256i vjh = _mm256_loadu_si256((const __m256i *)gs[g]->jh);
#pragma GCC unroll 4
            for (int32_t u = 0; u < U; u++) {
                const __m256i j = _mm256_set1_epi32(t0 + c + u);
                const __m256i out_of_range =
                    _mm256_or_si256(_mm256_cmpgt_epi32(vjl, j), _mm256_cmpgt_epi32(j, vjh));
                const __m256 sc = _mm256_blendv_ps(_mm256_mul_ps(a[g][u], vscale), ninf,
                                                   _mm256_castsi256_ps(out_of_range));
                _mm256_storeu_ps(gs[g]->p + (c + u) * 8, sc);
                tmax[g] = _mm256_max_ps(tmax[g], sc);
            }
        }
    }
    for (int g = 0; g < G; g++)
        _mm256_storeu_ps(gs[g]->T, tmax[g]);
}

/*
 * The rest of a tile for one group, its scores in p and T (attn8_scores),
 * the tile's values in vt as floats: the online softmax lane-wise with the
 * tile sum reduced in _mm512_reduce_add_ps's order, then each row's values
 * a lane per dimension as in ref.
 */
static void attn8_tile(struct attn_group *g, int32_t t0, const float *vt, int32_t hd)
{
    const int32_t c0  = g->lo > t0 ? g->lo - t0 : 0;
    const int32_t c1  = g->hi - t0 < ATTN_TILE - 1 ? g->hi - t0 : ATTN_TILE - 1;
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    float *p          = g->p;
    /* lanes whose row ref visits this tile */
    int visit = 0;
    for (int32_t r = 0; r < 8; r++)
        visit |= (t0 >= g->tl[r] && t0 <= g->jh[r]) << r;
    const __m256 Mnew = _mm256_max_ps(_mm256_loadu_ps(g->M), _mm256_loadu_ps(g->T));
    float mo[8], mn[8];
    memcpy(mo, g->M, sizeof mo);
    _mm256_storeu_ps(mn, Mnew);
    for (int32_t r = 0; r < g->nq; r++) {
        if (!(visit >> r & 1) || !(mn[r] > mo[r]))
            continue;
        const float ms  = expf(mo[r] - mn[r]);
        const __m256 vm = _mm256_set1_ps(ms);
        for (int32_t d = 0; d < hd; d += 8)
            _mm256_storeu_ps(g->acc + r * hd + d,
                             _mm256_mul_ps(_mm256_loadu_ps(g->acc + r * hd + d), vm));
        g->S[r] *= ms;
    }
    _mm256_storeu_ps(g->M, Mnew);
    /* probabilities and the tile sum, sixteen keys per reduction as ref_softmax_tile */
    __m256d sum_lo = _mm256_setzero_pd(), sum_hi = sum_lo;
    for (int32_t c = 0; c < ATTN_TILE; c += 16) {
        __m256 e[16];
        for (int32_t u = 0; u < 16; u++) {
            const __m256 sc = _mm256_loadu_ps(p + (c + u) * 8);
            /* a key no lane sees is 0 for every lane that visits the tile */
            e[u] = _mm256_movemask_ps(_mm256_cmp_ps(sc, ninf, _CMP_NEQ_OQ))
                       ? v_expf512(_mm256_sub_ps(sc, Mnew))
                       : _mm256_setzero_ps();
            _mm256_storeu_ps(p + (c + u) * 8, e[u]);
        }
        __m256 t3[8], t6[4];
        for (int l = 0; l < 8; l++)
            t3[l] = _mm256_add_ps(e[l + 8], e[l]);
        for (int l = 0; l < 4; l++)
            t6[l] = _mm256_add_ps(t3[l + 4], t3[l]);
        const __m256 s16 = _mm256_add_ps(_mm256_add_ps(t6[0], t6[2]), _mm256_add_ps(t6[1], t6[3]));
        acc_pd(&sum_lo, &sum_hi, s16);
    }
    double sums[8];
    _mm256_storeu_pd(sums, sum_lo);
    _mm256_storeu_pd(sums + 4, sum_hi);
    for (int32_t r = 0; r < g->nq; r++) {
        if (!(visit >> r & 1))
            continue;
        g->S[r]          = (float)((double)g->S[r] + sums[r]);
        const int32_t a0 = g->jl[r] > t0 + c0 ? g->jl[r] - t0 : c0;
        const int32_t a1 = g->jh[r] < t0 + c1 ? g->jh[r] - t0 : c1;
        /* the next row over the same keys (a token's next head) goes along: two rows' chains
         * share each value load */
        const bool pair = r + 1 < g->nq && visit >> (r + 1) & 1 && g->jl[r + 1] == g->jl[r] &&
                          g->jh[r + 1] == g->jh[r];
        if (pair) {
            g->S[r + 1] = (float)((double)g->S[r + 1] + sums[r + 1]);
            for (int32_t d0 = 0; d0 < hd; d0 += 32) {
                float *o = g->acc + r * hd + d0;
                /* a constant width keeps the chunk in registers */
                if (hd - d0 >= 32)
                    attn_acc_values2(o, vt + d0, hd, p + r, a0, a1, 4);
                else
                    attn_acc_values2(o, vt + d0, hd, p + r, a0, a1, (hd - d0) / 8);
            }
            r++;
            continue;
        }
        for (int32_t d0 = 0; d0 < hd; d0 += 64) {
            float *o = g->acc + r * hd + d0;
            if (hd - d0 >= 64)
                attn_acc_values(o, vt + d0, hd, p + r, a0, a1, 8);
            else
                attn_acc_values(o, vt + d0, hd, p + r, a0, a1, (hd - d0) / 8);
        }
    }
}

/*
 * ref_attn_row's arithmetic for up to ATTN_LANES_MAX query rows of one KV
 * head (sixteen tokens of a GQA group of eight, say), in groups of eight
 * lanes, a lane per row: each tile's keys and values are converted once for
 * all the rows (a long context's keys are read once per call, not once per
 * token), a score is still a sequential fma over the head dimension (the
 * query transposed, the key element broadcast) with two groups scored in one
 * pass, the online softmax runs lane-wise, and each row's values accumulate
 * a lane per dimension as in ref, a token's heads two by two. A lane sees
 * only the tiles ref would visit for its row, so every row is bit-identical
 * to ref_attn_row.
 */
static void avx2_attn_rows(float *const *out, const float *const *q, int32_t nq, int32_t hd,
                           const struct attn_kv *kv, const int32_t *j0, const int32_t *j1,
                           float scale, float *scratch)
{
    if (hd % 8 || hd > 256) {
        ref_attn_rows(out, q, nq, hd, kv, j0, j1, scale, scratch);
        return;
    }
    float *kt = scratch, *vt = kt + (size_t)ATTN_TILE * hd, *mem = vt + (size_t)ATTN_TILE * hd;
    struct attn_group gs[ATTN_LANES_MAX / 8];
    const int32_t ng = (nq + 7) / 8;
    int32_t lo = INT32_MAX, hi = INT32_MIN;
    for (int32_t k = 0; k < ng; k++) {
        struct attn_group *g = &gs[k];
        attn_group_init(g, 8, q + 8 * k, nq - 8 * k < 8 ? nq - 8 * k : 8, hd, j0 + 8 * k,
                        j1 + 8 * k, mem + (size_t)k * attn_group_floats(8, hd));
        lo = g->lo < lo ? g->lo : lo;
        hi = g->hi > hi ? g->hi : hi;
    }
    for (int32_t t0 = lo - lo % ATTN_TILE; t0 <= hi; t0 += ATTN_TILE) {
        const int32_t c0 = lo > t0 ? lo - t0 : 0;
        const int32_t c1 = hi - t0 < ATTN_TILE - 1 ? hi - t0 : ATTN_TILE - 1;
        for (int32_t c = c0; c <= c1; c++) {
            attn_load_row(kt + (size_t)c * hd, attn_kv_row(kv->k, kv, t0 + c), hd, kv->f16);
            attn_load_row(vt + (size_t)c * hd, attn_kv_row(kv->v, kv, t0 + c), hd, kv->f16);
            if (t0 + ATTN_TILE + c <= hi)
                attn_prefetch_kv(kv, t0 + ATTN_TILE + c, hd);
        }
        struct attn_group *vis[ATTN_LANES_MAX / 8];
        int32_t s0, s1;
        const int nv = attn_groups_visiting(gs, ng, t0, vis, &s0, &s1);
        for (int k = 0; k < nv; k += 2) {
            if (nv - k == 1)
                attn8_scores(vis + k, 1, t0, kt, hd, scale, s0, s1);
            else
                attn8_scores(vis + k, 2, t0, kt, hd, scale, s0, s1);
        }
        for (int k = 0; k < nv; k++)
            attn8_tile(vis[k], t0, vt, hd);
    }
    for (int32_t k = 0; k < ng; k++)
        for (int32_t r = 0; r < gs[k].nq; r++) {
            const __m256 inv = _mm256_set1_ps(gs[k].S[r] == 0.0f ? 0.0f : 1.0f / gs[k].S[r]);
            for (int32_t d = 0; d < hd; d += 8)
                _mm256_storeu_ps(out[8 * k + r] + d,
                                 _mm256_mul_ps(_mm256_loadu_ps(gs[k].acc + r * hd + d), inv));
        }
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

static void avx2_scale_f32(float *y, float alpha, int64_t n)
{
    const __m256 va = _mm256_set1_ps(alpha);
    int64_t i       = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), va));
    for (; i < n; i++)
        y[i] *= alpha;
}

static void avx2_mad_f32(float *y, const float *x, float a, int64_t n)
{
    const __m256 va = _mm256_set1_ps(a);
    int64_t i       = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i,
                         _mm256_fmadd_ps(_mm256_loadu_ps(x + i), va, _mm256_loadu_ps(y + i)));
    for (; i < n; i++)
        y[i] = fmaf(x[i], a, y[i]);
}

/*
 * ggml_vec_dot_f32_ref's order in lanes: each of its four sixteen-lane
 * accumulators is two registers here, folded and reduced lane for lane as
 * it does; the tail is its own scalar code.
 */
static float avx2_dot_f32_ggml(const float *x, const float *y, int64_t n)
{
    const int64_t np = n & ~(int64_t)63;
    if (!np)
        return ggml_vec_dot_f32_tail(x, y, 0, n, 0.0f);
    __m256 acc[4][2];
    for (int j = 0; j < 4; j++)
        acc[j][0] = acc[j][1] = _mm256_setzero_ps();
    for (int64_t i = 0; i < np; i += 64)
        for (int j = 0; j < 4; j++)
            for (int h = 0; h < 2; h++)
                acc[j][h] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 16 * j + 8 * h),
                                            _mm256_loadu_ps(y + i + 16 * j + 8 * h), acc[j][h]);
    for (int h = 0; h < 2; h++) {
        acc[0][h] = _mm256_add_ps(acc[0][h], acc[2][h]);
        acc[1][h] = _mm256_add_ps(acc[1][h], acc[3][h]);
        acc[0][h] = _mm256_add_ps(acc[0][h], acc[1][h]);
    }
    float v[16];
    _mm256_storeu_ps(v, acc[0][0]);
    _mm256_storeu_ps(v + 8, acc[0][1]);
    return ggml_vec_dot_f32_tail(x, y, np, n, ggml_reduce16(v));
}

static void avx2_f32_to_f16(const float *x, uint16_t *y, int64_t n)
{
    avx2_f16_from_float(x, y, n);
}

/* ---------------------------------------------------------------- the table */

static const struct kernels table = {
    .name = "avx2",
    .type =
        {
            [DTYPE_F32]    = {.vec_dot_type = DTYPE_F32,
                              .to_float     = ref_f32_to_float,
                              .from_float   = ref_f32_from_float,
                              .vec_dot      = avx2_vec_dot_f32},
            [DTYPE_F16]    = {.vec_dot_type = DTYPE_F16,
                              .to_float     = avx2_f16_to_float,
                              .from_float   = avx2_f16_from_float,
                              .vec_dot      = avx2_vec_dot_f16},
            [DTYPE_BF16]   = {.vec_dot_type = DTYPE_BF16,
                              .to_float     = ref_bf16_to_float,
                              .from_float   = avx2_bf16_from_float,
                              .vec_dot      = avx2_vec_dot_bf16},
            [DTYPE_Q4_0]   = {.vec_dot_type = DTYPE_Q8_0,
                              .to_float     = ref_q4_0_to_float,
                              .from_float   = ref_q4_0_from_float,
                              .vec_dot      = avx2_vec_dot_q4_0_q8_0,
                              .gemm8        = avx2_gemm8_q4_0,
                              .pack8        = ref_pack8_q4_0,
                              .gemm8p       = avx2_gemm8p_q4_0},
            [DTYPE_Q8_0]   = {.vec_dot_type = DTYPE_Q8_0,
                              .to_float     = ref_q8_0_to_float,
                              .from_float   = avx2_q8_0_from_float,
                              .vec_dot      = avx2_vec_dot_q8_0_q8_0,
                              .gemm8        = avx2_gemm8_q8_0},
            [DTYPE_Q4_1]   = {.vec_dot_type = DTYPE_Q8_1,
                              .to_float     = ref_q4_1_to_float,
                              .vec_dot      = avx2_vec_dot_q4_1_q8_1},
            [DTYPE_Q5_0]   = {.vec_dot_type = DTYPE_Q8_0,
                              .to_float     = ref_q5_0_to_float,
                              .vec_dot      = avx2_vec_dot_q5_0_q8_0},
            [DTYPE_Q5_1]   = {.vec_dot_type = DTYPE_Q8_1,
                              .to_float     = ref_q5_1_to_float,
                              .vec_dot      = avx2_vec_dot_q5_1_q8_1},
            [DTYPE_IQ4_NL] = {.vec_dot_type = DTYPE_Q8_0,
                              .to_float     = ref_iq4_nl_to_float,
                              .vec_dot      = avx2_vec_dot_iq4_nl_q8_0},
            [DTYPE_Q2_K]   = {.vec_dot_type = DTYPE_Q8_K,
                              .to_float     = ref_q2_k_to_float,
                              .vec_dot      = avx2_vec_dot_q2_k_q8_k},
            [DTYPE_Q3_K]   = {.vec_dot_type = DTYPE_Q8_K,
                              .to_float     = ref_q3_k_to_float,
                              .vec_dot      = avx2_vec_dot_q3_k_q8_k},
            [DTYPE_Q4_K]   = {.vec_dot_type = DTYPE_Q8_K,
                              .to_float     = ref_q4_k_to_float,
                              .vec_dot      = avx2_vec_dot_q4_k_q8_k,
                              .gemm8        = avx2_gemm8_q4_k,
                              .pack8        = ref_pack8_q4_k,
                              .gemm8p       = avx2_gemm8p_q4_k},
            [DTYPE_Q5_K]   = {.vec_dot_type = DTYPE_Q8_K,
                              .to_float     = ref_q5_k_to_float,
                              .vec_dot      = avx2_vec_dot_q5_k_q8_k},
            [DTYPE_Q6_K]   = {.vec_dot_type = DTYPE_Q8_K,
                              .to_float     = ref_q6_k_to_float,
                              .vec_dot      = avx2_vec_dot_q6_k_q8_k,
                              .gemm8        = avx2_gemm8_q6_k},
            [DTYPE_IQ4_XS] = {.vec_dot_type = DTYPE_Q8_K,
                              .to_float     = ref_iq4_xs_to_float,
                              .vec_dot      = avx2_vec_dot_iq4_xs_q8_k},
            [DTYPE_MXFP4]  = {.vec_dot_type = DTYPE_Q8_0,
                              .to_float     = ref_mxfp4_to_float,
                              .vec_dot      = avx2_vec_dot_mxfp4_q8_0},
            /* IQ1_M and TQ1_0 have no vector dot yet: the reference's, so their files run */
            REF_IQ_ENTRY(IQ1_M, iq1_m),
            REF_IQ_ENTRY(TQ1_0, tq1_0),
            AVX2_IQ_ENTRY(IQ1_S, iq1_s),
            AVX2_IQ_ENTRY(TQ2_0, tq2_0),
            AVX2_IQ_ENTRY(IQ2_XXS, iq2_xxs),
            AVX2_IQ_ENTRY(IQ2_XS, iq2_xs),
            AVX2_IQ_ENTRY(IQ2_S, iq2_s),
            AVX2_IQ_ENTRY(IQ3_XXS, iq3_xxs),
            AVX2_IQ_ENTRY(IQ3_S, iq3_s),
            [DTYPE_Q8_1] = {.vec_dot_type = DTYPE_Q8_1,
                            .to_float     = ref_q8_1_to_float,
                            .from_float   = avx2_q8_1_from_float},
            [DTYPE_Q8_K] = {.vec_dot_type = DTYPE_Q8_K,
                            .to_float     = ref_q8_k_to_float,
                            .from_float   = avx2_q8_k_from_float},
        },
    .rmsnorm             = avx2_rmsnorm,
    .silu_mul            = avx2_silu_mul,
    .gelu_mul            = ref_gelu_mul, /* a table lookup in ggml on every ISA */
    .axpy_f32            = avx2_axpy_f32,
    .scale_f32           = avx2_scale_f32,
    .mad_f32             = avx2_mad_f32,
    .dot_f32_ggml        = avx2_dot_f32_ggml,
    .attn_rows           = avx2_attn_rows,
    .attn_rows_lanes     = ATTN_LANES_MAX,
    .int8_probe          = avx2_int8_probe,
    .attn_rows_f16       = avx2_attn_rows_f16,
    .attn_rows_f16_lanes = ATTN_LANES,
    .attn_heads_f16      = avx2_attn_heads_f16,
    .expf_libm           = avx2_expf_libm,
    .f32_to_f16          = avx2_f32_to_f16,
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
