/*
 * ref_tquants.c: the reference kernels of the ternary types TQ1_0 and TQ2_0
 * (layouts in util/dtype_blocks.h): every weight is -d, 0 or d. Portable
 * scalar C, part of the reference table. to_float is ggml's
 * dequantize_row_tq*_0 and the dots against Q8_K are its generic ones, one
 * integer sum per super-block then one float multiply, in its order.
 */
#include "kernels/ref.h"

#include "util/dtype_blocks.h"
#include "util/fp16.h"

/*
 * Trit k (0..4) of a TQ1_0 byte: the byte is a base-3 fixed-point fraction
 * of 256, so multiplying by 3^k (mod 256) shifts trit k to the top, and
 * times 3 over 256 reads it.
 */
static inline int tq1_trit(uint8_t q, int k)
{
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    const uint8_t v              = (uint8_t)(q * pow3[k]);
    return (v * 3) >> 8;
}

/* The 256 trits (0..2) of a TQ1_0 block in element order. */
static void tq1_unpack(const struct block_tq1_0 *b, int8_t t[QK_K])
{
    int e = 0;
    for (int k = 0; k < 5; k++)
        for (int m = 0; m < 32; m++)
            t[e++] = (int8_t)tq1_trit(b->qs[m], k);
    for (int k = 0; k < 5; k++)
        for (int m = 0; m < 16; m++)
            t[e++] = (int8_t)tq1_trit(b->qs[32 + m], k);
    for (int k = 0; k < 4; k++)
        for (int m = 0; m < 4; m++)
            t[e++] = (int8_t)tq1_trit(b->qh[m], k);
}

void ref_tq1_0_to_float(const void *x, float *y, int64_t n)
{
    const struct block_tq1_0 *b = x;
    int8_t t[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = fp16_to_fp32(b[i].d);
        tq1_unpack(&b[i], t);
        for (int e = 0; e < QK_K; e++)
            *y++ = (float)(t[e] - 1) * d;
    }
}

void ref_vec_dot_tq1_0_q8_k(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_tq1_0 *x = w;
    const struct block_q8_K *yb = a;
    int8_t t[QK_K];
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        tq1_unpack(&x[i], t);
        int sum = 0;
        for (int e = 0; e < QK_K; e++)
            sum += (t[e] - 1) * yb[i].qs[e];
        sumf += (float)sum * (fp16_to_fp32(x[i].d) * yb[i].d);
    }
    *s = sumf;
}

/* Element 32k + m of half h (k 0..3) is bits 2k..2k+1 of qs[32h + m]. */
static inline int tq2_quant(const struct block_tq2_0 *b, int e)
{
    return (b->qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
}

void ref_tq2_0_to_float(const void *x, float *y, int64_t n)
{
    const struct block_tq2_0 *b = x;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = fp16_to_fp32(b[i].d);
        for (int e = 0; e < QK_K; e++)
            *y++ = (float)(tq2_quant(&b[i], e) - 1) * d;
    }
}

void ref_vec_dot_tq2_0_q8_k(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_tq2_0 *x = w;
    const struct block_q8_K *yb = a;
    float sumf                  = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int32_t sumi = 0;
        for (int e = 0; e < QK_K; e++)
            sumi += yb[i].qs[e] * (tq2_quant(&x[i], e) - 1);
        sumf += (float)sumi * (yb[i].d * fp16_to_fp32(x[i].d));
    }
    *s = sumf;
}
