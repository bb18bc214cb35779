/*
 * ref.c: the reference kernel table, portable scalar C. It is the definition
 * every ISA table is tested against, and it follows ggml's reference code
 * (ggml-quants.c, ggml-cpu/vec.h) operation for operation so hearth's numbers
 * match llama.cpp's: the same quantizer rounding, the same per-block integer
 * sums, double accumulators where ggml uses ggml_float.
 *
 * Weight types and their activation (vec_dot) types, as ggml's CPU backend:
 * F32 -> F32, F16 -> F16, BF16 -> BF16; Q4_0, Q5_0, Q8_0, IQ4_NL -> Q8_0;
 * Q4_1, Q5_1 -> Q8_1; Q2_K..Q6_K, IQ4_XS -> Q8_K (ref_kquants.c).
 * Only F32/F16/BF16/Q4_0/Q8_0 and the activation types have a from_float
 * here; weight quantizers for the other types live in src/quant/.
 */
#include "kernels/ref.h"

#include <math.h>
#include <string.h>

#include "util/fp16.h"

/* ---------------------------------------------------------------- conversions */

void ref_f32_to_float(const void *x, float *y, int64_t n)
{
    memmove(y, x, (size_t)n * sizeof(float));
}

void ref_f32_from_float(const float *x, void *y, int64_t n)
{
    memmove(y, x, (size_t)n * sizeof(float));
}

void ref_f16_to_float(const void *x, float *y, int64_t n)
{
    const uint16_t *h = x;
    for (int64_t i = 0; i < n; i++)
        y[i] = fp16_to_fp32(h[i]);
}

void ref_f16_from_float(const float *x, void *y, int64_t n)
{
    uint16_t *h = y;
    for (int64_t i = 0; i < n; i++)
        h[i] = fp32_to_fp16(x[i]);
}

void ref_bf16_to_float(const void *x, float *y, int64_t n)
{
    const uint16_t *h = x;
    for (int64_t i = 0; i < n; i++)
        y[i] = bf16_to_fp32(h[i]);
}

void ref_bf16_from_float(const float *x, void *y, int64_t n)
{
    uint16_t *h = y;
    for (int64_t i = 0; i < n; i++)
        h[i] = fp32_to_bf16(x[i]);
}

void ref_q4_0_to_float(const void *x, float *y, int64_t n)
{
    const struct block_q4_0 *b = x;
    const int64_t nb           = n / QK4_0;
    for (int64_t i = 0; i < nb; i++) {
        const float d = fp16_to_fp32(b[i].d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            const int q0                 = (b[i].qs[j] & 0x0F) - 8;
            const int q1                 = (b[i].qs[j] >> 4) - 8;
            y[i * QK4_0 + j]             = (float)q0 * d;
            y[i * QK4_0 + j + QK4_0 / 2] = (float)q1 * d;
        }
    }
}

/*
 * ggml's quantize_row_q4_0_ref: d = (the element of largest magnitude, with
 * its sign) / -8, so that element maps to q = 0 exactly; q = (int8)(x/d + 8.5)
 * truncated toward zero, capped at 15.
 */
void ref_q4_0_from_float(const float *x, void *y, int64_t n)
{
    struct block_q4_0 *b = y;
    const int64_t nb     = n / QK4_0;
    for (int64_t i = 0; i < nb; i++) {
        const float *xb = x + i * QK4_0;
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < QK4_0; j++) {
            if (amax < fabsf(xb[j])) {
                amax = fabsf(xb[j]);
                max  = xb[j];
            }
        }
        const float d  = max / -8;
        const float id = d ? 1.0f / d : 0.0f;
        b[i].d         = fp32_to_fp16(d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            const float x0   = xb[j] * id;
            const float x1   = xb[j + QK4_0 / 2] * id;
            const int8_t t0  = (int8_t)(x0 + 8.5f);
            const int8_t t1  = (int8_t)(x1 + 8.5f);
            const uint8_t q0 = (uint8_t)(t0 < 15 ? t0 : 15);
            const uint8_t q1 = (uint8_t)(t1 < 15 ? t1 : 15);
            b[i].qs[j]       = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

void ref_q8_0_to_float(const void *x, float *y, int64_t n)
{
    const struct block_q8_0 *b = x;
    const int64_t nb           = n / QK8_0;
    for (int64_t i = 0; i < nb; i++) {
        const float d = fp16_to_fp32(b[i].d);
        for (int j = 0; j < QK8_0; j++)
            y[i * QK8_0 + j] = (float)b[i].qs[j] * d;
    }
}

/*
 * ggml's quantize_row_q8_0_ref: d = amax / 127, q = roundf(x / d), rounding
 * halves away from zero. (ggml's own AVX2 quantize_row_q8_0 differs in the
 * last bit sometimes: it uses 127/amax and nearest-even. Ours are identical
 * on every ISA; the test demands it.)
 */
void ref_q8_0_from_float(const float *x, void *y, int64_t n)
{
    struct block_q8_0 *b = y;
    const int64_t nb     = n / QK8_0;
    for (int64_t i = 0; i < nb; i++) {
        const float *xb = x + i * QK8_0;
        float amax      = 0.0f;
        for (int j = 0; j < QK8_0; j++)
            amax = amax > fabsf(xb[j]) ? amax : fabsf(xb[j]);
        const float d  = amax / 127;
        const float id = d ? 1.0f / d : 0.0f;
        b[i].d         = fp32_to_fp16(d);
        for (int j = 0; j < QK8_0; j++)
            b[i].qs[j] = (int8_t)roundf(xb[j] * id);
    }
}

/* As dequantize_row_q4_1: q * d + m, the multiply rounded before the add. */
void ref_q4_1_to_float(const void *x, float *y, int64_t n)
{
    const struct block_q4_1 *b = x;
    const int64_t nb           = n / QK4_1;
    for (int64_t i = 0; i < nb; i++) {
        const float d = fp16_to_fp32(b[i].d);
        const float m = fp16_to_fp32(b[i].m);
        for (int j = 0; j < QK4_1 / 2; j++) {
            y[i * QK4_1 + j]             = (float)(b[i].qs[j] & 0x0F) * d + m;
            y[i * QK4_1 + j + QK4_1 / 2] = (float)(b[i].qs[j] >> 4) * d + m;
        }
    }
}

static inline uint32_t load_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The 32 5-bit quants (0..31) of a Q5_0/Q5_1 block, in element order. */
static inline void unpack_q5(const uint8_t qs[16], const uint8_t qh[4], int q[32])
{
    const uint32_t h = load_u32(qh);
    for (int j = 0; j < 16; j++) {
        q[j]      = (qs[j] & 0x0F) | (int)((h >> j) & 1) << 4;
        q[j + 16] = (qs[j] >> 4) | (int)((h >> (j + 16)) & 1) << 4;
    }
}

void ref_q5_0_to_float(const void *x, float *y, int64_t n)
{
    const struct block_q5_0 *b = x;
    const int64_t nb           = n / QK5_0;
    int q[QK5_0];
    for (int64_t i = 0; i < nb; i++) {
        const float d = fp16_to_fp32(b[i].d);
        unpack_q5(b[i].qs, b[i].qh, q);
        for (int j = 0; j < QK5_0; j++)
            y[i * QK5_0 + j] = (float)(q[j] - 16) * d;
    }
}

void ref_q5_1_to_float(const void *x, float *y, int64_t n)
{
    const struct block_q5_1 *b = x;
    const int64_t nb           = n / QK5_1;
    int q[QK5_1];
    for (int64_t i = 0; i < nb; i++) {
        const float d = fp16_to_fp32(b[i].d);
        const float m = fp16_to_fp32(b[i].m);
        unpack_q5(b[i].qs, b[i].qh, q);
        for (int j = 0; j < QK5_1; j++)
            y[i * QK5_1 + j] = (float)q[j] * d + m;
    }
}

void ref_q8_1_to_float(const void *x, float *y, int64_t n)
{
    const struct block_q8_1 *b = x;
    const int64_t nb           = n / QK8_1;
    for (int64_t i = 0; i < nb; i++) {
        const float d = fp16_to_fp32(b[i].d);
        for (int j = 0; j < QK8_1; j++)
            y[i * QK8_1 + j] = (float)b[i].qs[j] * d;
    }
}

/*
 * ggml's quantize_row_q8_1_ref: Q8_0's quantizer (d = amax/127, roundf),
 * plus s = fp16(d * sum of the quants) with the sum taken in int.
 */
void ref_q8_1_from_float(const float *x, void *y, int64_t n)
{
    struct block_q8_1 *b = y;
    const int64_t nb     = n / QK8_1;
    for (int64_t i = 0; i < nb; i++) {
        const float *xb = x + i * QK8_1;
        float amax      = 0.0f;
        for (int j = 0; j < QK8_1; j++)
            amax = amax > fabsf(xb[j]) ? amax : fabsf(xb[j]);
        const float d  = amax / 127;
        const float id = d ? 1.0f / d : 0.0f;
        b[i].d         = fp32_to_fp16(d);
        int sum        = 0;
        for (int j = 0; j < QK8_1; j++) {
            b[i].qs[j] = (int8_t)roundf(xb[j] * id);
            sum += b[i].qs[j];
        }
        b[i].s = fp32_to_fp16((float)sum * d);
    }
}

const int8_t ref_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                     1,    13,   25,  38,  53,  69,  89,  113};

void ref_iq4_nl_to_float(const void *x, float *y, int64_t n)
{
    const struct block_iq4_nl *b = x;
    const int64_t nb             = n / QK4_NL;
    for (int64_t i = 0; i < nb; i++) {
        const float d = fp16_to_fp32(b[i].d);
        for (int j = 0; j < QK4_NL / 2; j++) {
            y[i * QK4_NL + j]              = d * (float)ref_iq4nl_values[b[i].qs[j] & 0x0F];
            y[i * QK4_NL + j + QK4_NL / 2] = d * (float)ref_iq4nl_values[b[i].qs[j] >> 4];
        }
    }
}

/* ---------------------------------------------------------------- dot products */

void ref_vec_dot_f32(int64_t n, float *s, const void *w, const void *a)
{
    *s = ref_dot_f32(w, a, n);
}

/* As ggml_vec_dot_f16: products in f32, summed in double. */
void ref_vec_dot_f16(int64_t n, float *s, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)(fp16_to_fp32(x[i]) * fp16_to_fp32(y[i]));
    *s = (float)sum;
}

void ref_vec_dot_bf16(int64_t n, float *s, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)(bf16_to_fp32(x[i]) * bf16_to_fp32(y[i]));
    *s = (float)sum;
}

/* Exact integer sum per block, scaled by d_w * d_a, accumulated in float (as ggml). */
void ref_vec_dot_q4_0_q8_0(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_q4_0 *x = w;
    const struct block_q8_0 *y = a;
    const int64_t nb           = n / QK4_0;
    float sum                  = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        int sumi0 = 0, sumi1 = 0;
        for (int j = 0; j < QK4_0 / 2; j++) {
            const int v0 = (x[i].qs[j] & 0x0F) - 8;
            const int v1 = (x[i].qs[j] >> 4) - 8;
            sumi0 += v0 * y[i].qs[j];
            sumi1 += v1 * y[i].qs[j + QK4_0 / 2];
        }
        sum += (float)(sumi0 + sumi1) * (fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d));
    }
    *s = sum;
}

void ref_vec_dot_q8_0_q8_0(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_q8_0 *x = w;
    const struct block_q8_0 *y = a;
    const int64_t nb           = n / QK8_0;
    float sum                  = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        int sumi = 0;
        for (int j = 0; j < QK8_0; j++)
            sumi += x[i].qs[j] * y[i].qs[j];
        sum += (float)sumi * (fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d));
    }
    *s = sum;
}

/*
 * As ggml_vec_dot_q4_1_q8_1: sum (q_w * d_w + m_w) * q_a * d_a
 * = d_w * d_a * sum(q_w * q_a) + m_w * s_a, with s_a = d_a * sum(q_a) stored in the block.
 */
void ref_vec_dot_q4_1_q8_1(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_q4_1 *x = w;
    const struct block_q8_1 *y = a;
    const int64_t nb           = n / QK4_1;
    float sum                  = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        int sumi0 = 0, sumi1 = 0;
        for (int j = 0; j < QK4_1 / 2; j++) {
            sumi0 += (x[i].qs[j] & 0x0F) * y[i].qs[j];
            sumi1 += (x[i].qs[j] >> 4) * y[i].qs[j + QK4_1 / 2];
        }
        sum += (fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d)) * (float)(sumi0 + sumi1) +
               fp16_to_fp32(x[i].m) * fp16_to_fp32(y[i].s);
    }
    *s = sum;
}

void ref_vec_dot_q5_0_q8_0(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_q5_0 *x = w;
    const struct block_q8_0 *y = a;
    const int64_t nb           = n / QK5_0;
    float sum                  = 0.0f;
    int q[QK5_0];
    for (int64_t i = 0; i < nb; i++) {
        unpack_q5(x[i].qs, x[i].qh, q);
        int sumi = 0;
        for (int j = 0; j < QK5_0; j++)
            sumi += (q[j] - 16) * y[i].qs[j];
        sum += (fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d)) * (float)sumi;
    }
    *s = sum;
}

void ref_vec_dot_q5_1_q8_1(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_q5_1 *x = w;
    const struct block_q8_1 *y = a;
    const int64_t nb           = n / QK5_1;
    float sum                  = 0.0f;
    int q[QK5_1];
    for (int64_t i = 0; i < nb; i++) {
        unpack_q5(x[i].qs, x[i].qh, q);
        int sumi = 0;
        for (int j = 0; j < QK5_1; j++)
            sumi += q[j] * y[i].qs[j];
        sum += (fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d)) * (float)sumi +
               fp16_to_fp32(x[i].m) * fp16_to_fp32(y[i].s);
    }
    *s = sum;
}

void ref_vec_dot_iq4_nl_q8_0(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_iq4_nl *x = w;
    const struct block_q8_0 *y   = a;
    const int64_t nb             = n / QK4_NL;
    float sum                    = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        int sumi0 = 0, sumi1 = 0;
        for (int j = 0; j < QK4_NL / 2; j++) {
            sumi0 += ref_iq4nl_values[x[i].qs[j] & 0x0F] * y[i].qs[j];
            sumi1 += ref_iq4nl_values[x[i].qs[j] >> 4] * y[i].qs[j + QK4_NL / 2];
        }
        sum += (fp16_to_fp32(y[i].d) * fp16_to_fp32(x[i].d)) * (float)(sumi0 + sumi1);
    }
    *s = sum;
}

/* ---------------------------------------------------------------- float ops */

/* As ggml_compute_forward_rms_norm followed by the weight multiply. */
void ref_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps)
{
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)(x[i] * x[i]);
    const float mean  = (float)(sum / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps);
    for (int64_t i = 0; i < n; i++)
        y[i] = (x[i] * scale) * w[i];
}

void ref_silu_mul(float *y, const float *g, const float *u, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        const float s = g[i] / (1.0f + expf(-g[i]));
        y[i]          = s * u[i];
    }
}

void ref_softmax(float *x, int64_t n)
{
    float max = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        max = max > x[i] ? max : x[i];
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += (double)x[i];
    }
    const float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++)
        x[i] *= inv;
}

float ref_dot_f32(const float *a, const float *b, int64_t n)
{
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)(a[i] * b[i]);
    return (float)sum;
}

float ref_dot_f32_f16(const float *a, const uint16_t *b, int64_t n)
{
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)(a[i] * fp16_to_fp32(b[i]));
    return (float)sum;
}

void ref_axpy_f32(float *y, float alpha, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] += alpha * x[i];
}

void ref_axpy_f16(float *y, float alpha, const uint16_t *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] += alpha * fp16_to_fp32(x[i]);
}

void ref_scale_f32(float *y, float alpha, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] *= alpha;
}

void ref_f32_to_f16(const float *x, uint16_t *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = fp32_to_fp16(x[i]);
}

void ref_f16_to_f32(const uint16_t *x, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = fp16_to_fp32(x[i]);
}

/* ---------------------------------------------------------------- the table */

static const struct kernels table = {
    .name = "ref",
    .type =
        {
            [DTYPE_F32]    = {DTYPE_F32, ref_f32_to_float, ref_f32_from_float, ref_vec_dot_f32},
            [DTYPE_F16]    = {DTYPE_F16, ref_f16_to_float, ref_f16_from_float, ref_vec_dot_f16},
            [DTYPE_BF16]   = {DTYPE_BF16, ref_bf16_to_float, ref_bf16_from_float, ref_vec_dot_bf16},
            [DTYPE_Q4_0]   = {DTYPE_Q8_0, ref_q4_0_to_float, ref_q4_0_from_float,
                              ref_vec_dot_q4_0_q8_0},
            [DTYPE_Q8_0]   = {DTYPE_Q8_0, ref_q8_0_to_float, ref_q8_0_from_float,
                              ref_vec_dot_q8_0_q8_0},
            [DTYPE_Q4_1]   = {DTYPE_Q8_1, ref_q4_1_to_float, NULL, ref_vec_dot_q4_1_q8_1},
            [DTYPE_Q5_0]   = {DTYPE_Q8_0, ref_q5_0_to_float, NULL, ref_vec_dot_q5_0_q8_0},
            [DTYPE_Q5_1]   = {DTYPE_Q8_1, ref_q5_1_to_float, NULL, ref_vec_dot_q5_1_q8_1},
            [DTYPE_IQ4_NL] = {DTYPE_Q8_0, ref_iq4_nl_to_float, NULL, ref_vec_dot_iq4_nl_q8_0},
            [DTYPE_Q2_K]   = {DTYPE_Q8_K, ref_q2_k_to_float, NULL, ref_vec_dot_q2_k_q8_k},
            [DTYPE_Q3_K]   = {DTYPE_Q8_K, ref_q3_k_to_float, NULL, ref_vec_dot_q3_k_q8_k},
            [DTYPE_Q4_K]   = {DTYPE_Q8_K, ref_q4_k_to_float, NULL, ref_vec_dot_q4_k_q8_k},
            [DTYPE_Q5_K]   = {DTYPE_Q8_K, ref_q5_k_to_float, NULL, ref_vec_dot_q5_k_q8_k},
            [DTYPE_Q6_K]   = {DTYPE_Q8_K, ref_q6_k_to_float, NULL, ref_vec_dot_q6_k_q8_k},
            [DTYPE_IQ4_XS] = {DTYPE_Q8_K, ref_iq4_xs_to_float, NULL, ref_vec_dot_iq4_xs_q8_k},
            /* Activation types: converted to, never dotted as weights. */
            [DTYPE_Q8_1] = {DTYPE_Q8_1, ref_q8_1_to_float, ref_q8_1_from_float, NULL},
            [DTYPE_Q8_K] = {DTYPE_Q8_K, ref_q8_k_to_float, ref_q8_k_from_float, NULL},
        },
    .rmsnorm     = ref_rmsnorm,
    .silu_mul    = ref_silu_mul,
    .softmax     = ref_softmax,
    .dot_f32     = ref_dot_f32,
    .dot_f32_f16 = ref_dot_f32_f16,
    .axpy_f32    = ref_axpy_f32,
    .axpy_f16    = ref_axpy_f16,
    .scale_f32   = ref_scale_f32,
    .f32_to_f16  = ref_f32_to_f16,
    .f16_to_f32  = ref_f16_to_f32,
};

const struct kernels *kernels_ref(void)
{
    return &table;
}
