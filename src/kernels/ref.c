/*
 * ref.c: the reference kernel table, portable scalar C. It is the definition
 * every ISA table is tested against, and it follows ggml's reference code
 * (ggml-quants.c, ggml-cpu/vec.h) operation for operation so hearth's numbers
 * match llama.cpp's: the same quantizer rounding, the same per-block integer
 * sums, double accumulators where ggml uses ggml_float.
 *
 * Weight types: F32, F16, BF16, Q4_0, Q8_0. Their activation (vec_dot) types:
 * F32 -> F32, F16 -> F16, BF16 -> BF16, Q4_0 and Q8_0 -> Q8_0.
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
            [DTYPE_F32]  = {DTYPE_F32, ref_f32_to_float, ref_f32_from_float, ref_vec_dot_f32},
            [DTYPE_F16]  = {DTYPE_F16, ref_f16_to_float, ref_f16_from_float, ref_vec_dot_f16},
            [DTYPE_BF16] = {DTYPE_BF16, ref_bf16_to_float, ref_bf16_from_float, ref_vec_dot_bf16},
            [DTYPE_Q4_0] = {DTYPE_Q8_0, ref_q4_0_to_float, ref_q4_0_from_float,
                            ref_vec_dot_q4_0_q8_0},
            [DTYPE_Q8_0] = {DTYPE_Q8_0, ref_q8_0_to_float, ref_q8_0_from_float,
                            ref_vec_dot_q8_0_q8_0},
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
