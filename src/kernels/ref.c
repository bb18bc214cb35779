/*
 * ref.c: the reference kernel table, portable scalar C. It is the definition
 * every ISA table is tested against, and it follows ggml's reference code
 * (ggml-quants.c, ggml-cpu/vec.h) operation for operation so hearth's numbers
 * match llama.cpp's: the same quantizer rounding, the same per-block integer
 * sums, double accumulators where ggml uses ggml_float.
 *
 * Weight types and their activation (vec_dot) types, as ggml's CPU backend:
 * F32 -> F32, F16 -> F16, BF16 -> BF16; Q4_0, Q5_0, Q8_0, IQ4_NL, MXFP4 ->
 * Q8_0; Q4_1, Q5_1 -> Q8_1; Q2_K..Q6_K, IQ4_XS -> Q8_K (ref_kquants.c);
 * IQ1_S..IQ3_S -> Q8_K (ref_iquants.c); TQ1_0, TQ2_0 -> Q8_K (ref_tquants.c).
 * Only F32/F16/BF16/Q4_0/Q8_0 and the activation types have a from_float
 * here; weight quantizers for the other types live in src/quant/.
 */
#include "kernels/ggml_dot.h"
#include "kernels/ref.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

#include "util/dtype_blocks.h"
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
 * halves away from zero. This is the WEIGHT quantizer (what llama-quantize
 * writes); activations use ref_q8_0_act_from_float below.
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
/*
 * Activation rounding as llama.cpp's x86 CPU backend does it (the build the
 * shared reference figures come from): d = amax / 127 stored as fp16,
 * q = round-half-even(x * (127 / amax)). It differs from the reference
 * quantizer in the last bit of some quants; matching it keeps the int8
 * activations, and so every logit, identical to llama.cpp's.
 */
static inline float act_block_q8(const float *xb, int8_t *qs, int *sum)
{
    float amax = 0.0f;
    for (int j = 0; j < 32; j++)
        amax = amax > fabsf(xb[j]) ? amax : fabsf(xb[j]);
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int s          = 0;
    for (int j = 0; j < 32; j++) {
        qs[j] = (int8_t)nearbyintf(xb[j] * id);
        s += qs[j];
    }
    *sum = s;
    return amax / 127;
}

void ref_q8_0_act_from_float(const float *x, void *y, int64_t n)
{
    struct block_q8_0 *b = y;
    int sum;
    for (int64_t i = 0; i < n / QK8_0; i++)
        b[i].d = fp32_to_fp16(act_block_q8(x + i * QK8_0, b[i].qs, &sum));
}

void ref_q8_1_act_from_float(const float *x, void *y, int64_t n)
{
    struct block_q8_1 *b = y;
    int sum;
    for (int64_t i = 0; i < n / QK8_1; i++) {
        const float d = act_block_q8(x + i * QK8_1, b[i].qs, &sum);
        b[i].d        = fp32_to_fp16(d);
        b[i].s        = fp32_to_fp16(d * (float)sum);
    }
}

void ref_iq4_nl_to_float(const void *x, float *y, int64_t n)
{
    const struct block_iq4_nl *b = x;
    const int64_t nb             = n / QK4_NL;
    for (int64_t i = 0; i < nb; i++) {
        const float d = fp16_to_fp32(b[i].d);
        for (int j = 0; j < QK4_NL / 2; j++) {
            y[i * QK4_NL + j]              = d * (float)iq4nl_values[b[i].qs[j] & 0x0F];
            y[i * QK4_NL + j + QK4_NL / 2] = d * (float)iq4nl_values[b[i].qs[j] >> 4];
        }
    }
}

/* As dequantize_row_mxfp4: value * scale, element j from nibbles as Q4_0. */
void ref_mxfp4_to_float(const void *x, float *y, int64_t n)
{
    const struct block_mxfp4 *b = x;
    for (int64_t i = 0; i < n / QK_MXFP4; i++) {
        const float d = mxfp4_scale(b[i].e);
        for (int j = 0; j < QK_MXFP4 / 2; j++) {
            y[i * QK_MXFP4 + j]                = (float)mxfp4_values[b[i].qs[j] & 0x0F] * d;
            y[i * QK_MXFP4 + j + QK_MXFP4 / 2] = (float)mxfp4_values[b[i].qs[j] >> 4] * d;
        }
    }
}

/* ---------------------------------------------------------------- dot products */

/* As ggml_vec_dot_f32's scalar loop: products in f32, summed in double. */
void ref_vec_dot_f32(int64_t n, float *s, const void *w, const void *a)
{
    const float *x = w, *y = a;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)(x[i] * y[i]);
    *s = (float)sum;
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

/*
 * Accumulation orders. llama.cpp's x86 matmuls do not all sum alike, and at
 * int8 activations a last-bit difference can flip a later rounding, so each
 * dot follows the kernel llama.cpp actually runs for that type:
 * - Q4_0 and IQ4_NL weights are repacked (8x8 interleave): per output, one
 *   chain acc = fma(float(block int sum), d_w * d_a, acc) over the blocks.
 * - Q8_0 and Q5_0 go through llamafile's tinyBLAS: eight lanes, lane l
 *   summing elements 4l..4l+3 of every block, acc_l = fma(d_w * d_a,
 *   float(lane sum), acc_l), then the lanes added as ((0+4)+(2+6))+((1+5)+(3+7)).
 */
/* One block into tinyBLAS's eight lanes: lane l gets fma(d, sum of w*a over 4l..4l+3). */
static inline void tinyblas_block(float acc[8], float d, const int8_t *w, const int8_t *a)
{
    for (int l = 0; l < 8; l++) {
        int sumi = 0;
        for (int j = 4 * l; j < 4 * l + 4; j++)
            sumi += w[j] * a[j];
        acc[l] = fmaf(d, (float)sumi, acc[l]);
    }
}

static inline float hsum8_tinyblas(const float acc[8])
{
    return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

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
        sum = fmaf((float)(sumi0 + sumi1), fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d), sum);
    }
    *s = sum;
}

/*
 * Packed Q4_0 (pack8): per block of 32 columns, 8 * 18 bytes: the eight rows'
 * fp16 scales, then four 32-byte chunks; chunk k holds bytes 4k..4k+3 of
 * each row's 16 quant bytes, row after row. A 32-bit lane of chunk k is one
 * row: its low nibbles are elements 4k..4k+3, its high nibbles 16+4k...
 */
void ref_pack8_q4_0(const void *rows, size_t row_len, int64_t n, void *dst)
{
    uint8_t *out = dst;
    for (int64_t b = 0; b < n / QK4_0; b++) {
        uint16_t *d = (uint16_t *)out;
        for (int r = 0; r < 8; r++) {
            const struct block_q4_0 *x =
                (const struct block_q4_0 *)((const uint8_t *)rows + r * row_len) + b;
            memcpy(&d[r], &x->d, sizeof x->d);
            for (int k = 0; k < 4; k++)
                memcpy(out + 16 + 32 * k + 4 * r, x->qs + 4 * k, 4);
        }
        out += 8 * sizeof(struct block_q4_0);
    }
}

void q8_0_sums(const void *a, int64_t n, struct q8_0_sum *out)
{
    const struct block_q8_0 *y = a;
    for (int64_t b = 0; b < n / QK8_0; b++) {
        int sum = 0;
        for (int e = 0; e < QK8_0; e++)
            sum += y[b].qs[e];
        out[b].d   = fp16_to_fp32(y[b].d);
        out[b].sum = sum;
    }
}

/* The definition: as and the packed layout's lanes play no part. */
void ref_gemm8p_q4_0(int64_t n, const void *wp, const void *a, size_t a_row,
                     const struct q8_0_sum *as, int32_t n_tok, float *s, size_t s_stride)
{
    const int64_t nb = n / QK4_0;
    for (int32_t t = 0; t < n_tok; t++) {
        const struct block_q8_0 *y = (const struct block_q8_0 *)((const uint8_t *)a + t * a_row);
        for (int r = 0; r < 8; r++) {
            float sum = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *g = (const uint8_t *)wp + b * 8 * sizeof(struct block_q4_0);
                uint16_t d;
                memcpy(&d, g + 2 * r, 2);
                int isum = 0;
                for (int k = 0; k < 4; k++)
                    for (int e = 0; e < 4; e++) {
                        const uint8_t q = g[16 + 32 * k + 4 * r + e];
                        isum += ((q & 0x0F) - 8) * y[b].qs[4 * k + e];
                        isum += ((q >> 4) - 8) * y[b].qs[16 + 4 * k + e];
                    }
                sum = fmaf((float)isum, fp16_to_fp32(d) * fp16_to_fp32(y[b].d), sum);
            }
            s[t * s_stride + r] = sum;
        }
    }
}

void ref_vec_dot_q8_0_q8_0(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_q8_0 *x = w;
    const struct block_q8_0 *y = a;
    float acc[8]               = {0};
    for (int64_t i = 0; i < n / QK8_0; i++)
        tinyblas_block(acc, fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d), x[i].qs, y[i].qs);
    *s = hsum8_tinyblas(acc);
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
    float acc[8]               = {0};
    int q[QK5_0];
    int8_t w8[QK5_0];
    for (int64_t i = 0; i < n / QK5_0; i++) {
        unpack_q5(x[i].qs, x[i].qh, q);
        for (int j = 0; j < QK5_0; j++)
            w8[j] = (int8_t)(q[j] - 16);
        tinyblas_block(acc, fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d), w8, y[i].qs);
    }
    *s = hsum8_tinyblas(acc);
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
            sumi0 += iq4nl_values[x[i].qs[j] & 0x0F] * y[i].qs[j];
            sumi1 += iq4nl_values[x[i].qs[j] >> 4] * y[i].qs[j + QK4_NL / 2];
        }
        sum = fmaf((float)(sumi0 + sumi1), fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d), sum);
    }
    *s = sum;
}

/* As ggml_vec_dot_mxfp4_q8_0_generic: sum += (d_a * scale) * int sum, per block. */
void ref_vec_dot_mxfp4_q8_0(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_mxfp4 *x = w;
    const struct block_q8_0 *y  = a;
    float sum                   = 0.0f;
    for (int64_t i = 0; i < n / QK_MXFP4; i++) {
        const float d = fp16_to_fp32(y[i].d) * mxfp4_scale(x[i].e);
        int sumi0 = 0, sumi1 = 0;
        for (int j = 0; j < QK_MXFP4 / 2; j++) {
            sumi0 += y[i].qs[j] * mxfp4_values[x[i].qs[j] & 0x0F];
            sumi1 += y[i].qs[j + QK_MXFP4 / 2] * mxfp4_values[x[i].qs[j] >> 4];
        }
        sum += d * (float)(sumi0 + sumi1);
    }
    *s = sum;
}

/* -------------------------------------------------------------- attention */

/*
 * The reference figures come from llama.cpp on the project's standard machine
 * (Zen 4, AVX-512), and on these small models a last-bit difference in an
 * exponential moves perplexity by tenths of a percent. So the exponentials
 * of softmax and SiLU follow ggml's AVX-512 ggml_v_expf exactly (the ARM
 * optimized-routines polynomial with 1 + p(b) rounded inside the last fma,
 * then scaled by 2^n), on every ISA.
 */
float ref_ggml_expf(float x)
{
    const float r = 0x1.8p23f;
    const float z = fmaf(x, 0x1.715476p+0f, r);
    const float n = z - r;
    const float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
    const float u = b * b;
    const float j = fmaf(
        fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
        u, fmaf(0x1.ffffecp-1f, b, 1.0f));
    if (fabsf(n) > 192)
        return n <= 0 ? 0.0f : INFINITY;
    return (float)ldexp((double)j, (int)n);
}

/* ggml_vec_soft_max_f32 on AVX-512: y = exp(x - max) by 16-lane chunks, each
 * chunk reduced as _mm512_reduce_add_ps does and added to a double; a libm tail. */
double ref_softmax_tile(float *y, const float *x, float max, int64_t n)
{
    double sum = 0;
    int64_t i  = 0;
    for (; i + 16 <= n; i += 16) {
        float v[16], t3[8], t6[4];
        for (int l = 0; l < 16; l++)
            y[i + l] = v[l] = ref_ggml_expf(x[i + l] - max);
        for (int l = 0; l < 8; l++)
            t3[l] = v[l + 8] + v[l];
        for (int l = 0; l < 4; l++)
            t6[l] = t3[l + 4] + t3[l];
        sum += (double)((t6[0] + t6[2]) + (t6[1] + t6[3]));
    }
    for (; i < n; i++) {
        y[i] = expf(x[i] - max);
        sum += (double)y[i];
    }
    return sum;
}

static inline float kv_elem(const uint8_t *row, int f16, int32_t d)
{
    return f16 ? fp16_to_fp32(((const uint16_t *)row)[d]) : ((const float *)row)[d];
}

void ref_attn_row(float *out, const float *q, int32_t hd, const struct attn_kv *kv, int32_t j0,
                  int32_t j1, float scale, float *scratch)
{
    float *kq = scratch;
    float M = -INFINITY, S = 0.0f;
    memset(out, 0, (size_t)hd * sizeof(float));
    for (int32_t t0 = j0 - j0 % ATTN_TILE; t0 <= j1; t0 += ATTN_TILE) {
        float tmax = -INFINITY;
        for (int32_t c = 0; c < ATTN_TILE; c++) {
            const int32_t j = t0 + c;
            if (j < j0 || j > j1) {
                kq[c] = -INFINITY;
                continue;
            }
            const uint8_t *kr = attn_kv_row(kv->k, kv, j);
            float acc         = 0.0f;
            for (int32_t d = 0; d < hd; d++)
                acc = fmaf(kv_elem(kr, kv->f16, d), q[d], acc);
            kq[c] = acc * scale;
            tmax  = kq[c] > tmax ? kq[c] : tmax;
        }
        const float Mnew = fmaxf(M, tmax);
        if (Mnew > M) {
            const float ms = expf(M - Mnew);
            for (int32_t d = 0; d < hd; d++)
                out[d] *= ms;
            S *= ms;
        }
        M = Mnew;
        S = (float)((double)S + ref_softmax_tile(kq, kq, Mnew, ATTN_TILE));
        for (int32_t c = 0; c < ATTN_TILE; c++) {
            const int32_t j = t0 + c;
            if (j < j0 || j > j1)
                continue; /* p = 0: fma(v, 0, acc) leaves acc as it is */
            const uint8_t *vr = attn_kv_row(kv->v, kv, j);
            for (int32_t d = 0; d < hd; d++)
                out[d] = fmaf(kv_elem(vr, kv->f16, d), kq[c], out[d]);
        }
    }
    const float inv = S == 0.0f ? 0.0f : 1.0f / S;
    for (int32_t d = 0; d < hd; d++)
        out[d] *= inv;
}

void ref_attn_rows(float *const *out, const float *const *q, int32_t nq, int32_t hd,
                   const struct attn_kv *kv, const int32_t *j0, const int32_t *j1, float scale,
                   float *scratch)
{
    for (int32_t r = 0; r < nq; r++)
        ref_attn_row(out[r], q[r], hd, kv, j0[r], j1[r], scale, scratch);
}

/*
 * ggml_vec_dot_f16 as the reference machine's build runs it (AVX-512 without
 * FP16 arithmetic): 64-element steps into four 16-lane fma accumulators,
 * folded 0+2, 1+3, then 0+1 and reduced as _mm512_reduce_add_ps into a
 * double; the tail as float products added to that double one by one.
 */
static float dot_f16_ggml(const uint16_t *x, const uint16_t *y, int32_t n)
{
    const int32_t np = n - n % 64;
    float acc[4][16] = {{0}};
    for (int32_t i = 0; i < np; i += 64)
        for (int a = 0; a < 4; a++)
            for (int l = 0; l < 16; l++)
                acc[a][l] = fmaf(fp16_to_fp32(x[i + 16 * a + l]), fp16_to_fp32(y[i + 16 * a + l]),
                                 acc[a][l]);
    float v[16], t3[8], t6[4];
    for (int l = 0; l < 16; l++)
        v[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
    for (int l = 0; l < 8; l++)
        t3[l] = v[l + 8] + v[l];
    for (int l = 0; l < 4; l++)
        t6[l] = t3[l + 4] + t3[l];
    double sum = (double)((t6[0] + t6[2]) + (t6[1] + t6[3]));
    for (int32_t i = np; i < n; i++)
        sum += (double)(fp16_to_fp32(x[i]) * fp16_to_fp32(y[i]));
    return (float)sum;
}

void ref_attn_row_f16(float *out, const float *q, int32_t hd, const struct attn_kv *kv, int32_t j0,
                      int32_t j1, float scale, float *scratch)
{
    uint16_t *q16 = (uint16_t *)scratch, *acc = q16 + hd;
    for (int32_t d = 0; d < hd; d++) {
        q16[d] = fp32_to_fp16(q[d]);
        acc[d] = 0;
    }
    float M = -INFINITY, S = 0.0f;
    for (int32_t j = j0; j <= j1; j++) {
        const float s = dot_f16_ggml((const uint16_t *)attn_kv_row(kv->k, kv, j), q16, hd) * scale;
        float ms = 1.0f, vs = 1.0f;
        if (s > M) {
            /* a new maximum: rescale what is summed so far, this key weighs expf(0) */
            ms = expf(M - s);
            M  = s;
            for (int32_t d = 0; d < hd; d++)
                acc[d] = fp32_to_fp16(fp16_to_fp32(acc[d]) * ms);
        } else {
            vs = expf(s - M);
        }
        const uint16_t *vr = (const uint16_t *)attn_kv_row(kv->v, kv, j);
        for (int32_t d = 0; d < hd; d++)
            acc[d] = fp32_to_fp16(fmaf(fp16_to_fp32(vr[d]), vs, fp16_to_fp32(acc[d])));
        S = fmaf(S, ms, vs);
    }
    const float inv = S == 0.0f ? 0.0f : 1.0f / S;
    for (int32_t d = 0; d < hd; d++)
        out[d] = fp16_to_fp32(acc[d]) * inv;
}

void ref_expf_libm(const float *x, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = expf(x[i]);
}

void ref_attn_rows_f16(float *const *out, const float *const *q, int32_t nq, int32_t hd,
                       const struct attn_kv *kv, const int32_t *j0, const int32_t *j1, float scale,
                       float *scratch)
{
    for (int32_t r = 0; r < nq; r++)
        ref_attn_row_f16(out[r], q[r], hd, kv, j0[r], j1[r], scale, scratch);
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
        /* ggml_vec_swiglu_f32 on AVX-512: 16-lane groups, then a libm tail */
        const float e = i < n - n % 16 ? ref_ggml_expf(0.0f - g[i]) : expf(-g[i]);
        const float s = g[i] / (1.0f + e);
        y[i]          = s * u[i];
    }
}

/*
 * GELU, tanh form, of every f16 value, stored as f16: ggml's CPU backend
 * looks gated GELU up in such a table rather than computing it, so the
 * inputs and the result are both rounded to f16. The constants and the one
 * fused multiply-add are those of ggml_gelu_f32 as llama.cpp's build compiles it.
 */
static uint16_t gelu_f16[1 << 16];
static pthread_once_t gelu_once = PTHREAD_ONCE_INIT;

static void gelu_table_init(void)
{
    const float coef_a = 0.044715f, sqrt_2_over_pi = 0.79788456080286535587989211986876f;
    for (uint32_t i = 0; i < (1u << 16); i++) {
        const float x = fp16_to_fp32((uint16_t)i);
        const float t = tanhf(sqrt_2_over_pi * x * fmaf(coef_a * x, x, 1.0f));
        gelu_f16[i]   = fp32_to_fp16(0.5f * x * (1.0f + t));
    }
}

void ref_gelu_mul(float *y, const float *g, const float *u, int64_t n)
{
    pthread_once(&gelu_once, gelu_table_init);
    for (int64_t i = 0; i < n; i++) {
        if (g[i] <= -10.0f)
            y[i] = 0.0f;
        else if (g[i] >= 10.0f)
            y[i] = g[i] * u[i];
        else
            y[i] = fp16_to_fp32(gelu_f16[fp32_to_fp16(g[i])]) * u[i];
    }
}

void ref_axpy_f32(float *y, float alpha, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] += alpha * x[i];
}

void ref_scale_f32(float *y, float alpha, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] *= alpha;
}

void ref_mad_f32(float *y, const float *x, float a, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = fmaf(x[i], a, y[i]);
}

float ref_dot_f32_ggml(const float *x, const float *y, int64_t n)
{
    return ggml_vec_dot_f32_ref(x, y, n);
}

void ref_f32_to_f16(const float *x, uint16_t *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = fp32_to_fp16(x[i]);
}

/* ---------------------------------------------------------------- the table */

static const struct kernels table = {
    .name = "ref",
    .type =
        {
            [DTYPE_F32]    = {.vec_dot_type = DTYPE_F32,
                              .to_float     = ref_f32_to_float,
                              .from_float   = ref_f32_from_float,
                              .vec_dot      = ref_vec_dot_f32},
            [DTYPE_F16]    = {.vec_dot_type = DTYPE_F16,
                              .to_float     = ref_f16_to_float,
                              .from_float   = ref_f16_from_float,
                              .vec_dot      = ref_vec_dot_f16},
            [DTYPE_BF16]   = {.vec_dot_type = DTYPE_BF16,
                              .to_float     = ref_bf16_to_float,
                              .from_float   = ref_bf16_from_float,
                              .vec_dot      = ref_vec_dot_bf16},
            [DTYPE_Q4_0]   = {.vec_dot_type = DTYPE_Q8_0,
                              .to_float     = ref_q4_0_to_float,
                              .from_float   = ref_q4_0_from_float,
                              .vec_dot      = ref_vec_dot_q4_0_q8_0,
                              .pack8        = ref_pack8_q4_0,
                              .gemm8p       = ref_gemm8p_q4_0},
            [DTYPE_Q8_0]   = {.vec_dot_type = DTYPE_Q8_0,
                              .to_float     = ref_q8_0_to_float,
                              .from_float   = ref_q8_0_act_from_float,
                              .vec_dot      = ref_vec_dot_q8_0_q8_0},
            [DTYPE_Q4_1]   = {.vec_dot_type = DTYPE_Q8_1,
                              .to_float     = ref_q4_1_to_float,
                              .vec_dot      = ref_vec_dot_q4_1_q8_1},
            [DTYPE_Q5_0]   = {.vec_dot_type = DTYPE_Q8_0,
                              .to_float     = ref_q5_0_to_float,
                              .vec_dot      = ref_vec_dot_q5_0_q8_0},
            [DTYPE_Q5_1]   = {.vec_dot_type = DTYPE_Q8_1,
                              .to_float     = ref_q5_1_to_float,
                              .vec_dot      = ref_vec_dot_q5_1_q8_1},
            [DTYPE_IQ4_NL] = {.vec_dot_type = DTYPE_Q8_0,
                              .to_float     = ref_iq4_nl_to_float,
                              .vec_dot      = ref_vec_dot_iq4_nl_q8_0},
            [DTYPE_Q2_K]   = {.vec_dot_type = DTYPE_Q8_K,
                              .to_float     = ref_q2_k_to_float,
                              .vec_dot      = ref_vec_dot_q2_k_q8_k},
            [DTYPE_Q3_K]   = {.vec_dot_type = DTYPE_Q8_K,
                              .to_float     = ref_q3_k_to_float,
                              .vec_dot      = ref_vec_dot_q3_k_q8_k},
            [DTYPE_Q4_K]   = {.vec_dot_type = DTYPE_Q8_K,
                              .to_float     = ref_q4_k_to_float,
                              .vec_dot      = ref_vec_dot_q4_k_q8_k,
                              .gemm8        = ref_gemm8_q4_k,
                              .pack8        = ref_pack8_q4_k,
                              .gemm8p       = ref_gemm8p_q4_k},
            [DTYPE_Q5_K]   = {.vec_dot_type = DTYPE_Q8_K,
                              .to_float     = ref_q5_k_to_float,
                              .vec_dot      = ref_vec_dot_q5_k_q8_k},
            [DTYPE_Q6_K]   = {.vec_dot_type = DTYPE_Q8_K,
                              .to_float     = ref_q6_k_to_float,
                              .vec_dot      = ref_vec_dot_q6_k_q8_k},
            [DTYPE_IQ4_XS] = {.vec_dot_type = DTYPE_Q8_K,
                              .to_float     = ref_iq4_xs_to_float,
                              .vec_dot      = ref_vec_dot_iq4_xs_q8_k},
            [DTYPE_MXFP4]  = {.vec_dot_type = DTYPE_Q8_0,
                              .to_float     = ref_mxfp4_to_float,
                              .vec_dot      = ref_vec_dot_mxfp4_q8_0},
            REF_IQ_TYPES,
            /* Activation types: converted to, never dotted as weights. */
            [DTYPE_Q8_1] = {.vec_dot_type = DTYPE_Q8_1,
                            .to_float     = ref_q8_1_to_float,
                            .from_float   = ref_q8_1_act_from_float},
            [DTYPE_Q8_K] = {.vec_dot_type = DTYPE_Q8_K,
                            .to_float     = ref_q8_k_to_float,
                            .from_float   = ref_q8_k_from_float},
        },
    .rmsnorm             = ref_rmsnorm,
    .silu_mul            = ref_silu_mul,
    .gelu_mul            = ref_gelu_mul,
    .axpy_f32            = ref_axpy_f32,
    .scale_f32           = ref_scale_f32,
    .mad_f32             = ref_mad_f32,
    .dot_f32_ggml        = ref_dot_f32_ggml,
    .attn_rows           = ref_attn_rows,
    .attn_rows_lanes     = ATTN_LANES,
    .attn_rows_f16       = ref_attn_rows_f16,
    .attn_rows_f16_lanes = ATTN_LANES,
    .expf_libm           = ref_expf_libm,
    .f32_to_f16          = ref_f32_to_f16,
};

const struct kernels *kernels_ref(void)
{
    return &table;
}
