/*
 * ref.h: internal to src/kernels. The GGUF block layouts the kernels read,
 * and the scalar reference functions (ref.c) so an ISA table can point the
 * entries it does not vectorize at them. Model code uses kernels.h only.
 */
#ifndef HEARTH_KERNELS_REF_H
#define HEARTH_KERNELS_REF_H

#include <stdint.h>

#include "kernels/kernels.h"

#define QK4_0 32 /* elements per Q4_0 block */
#define QK8_0 32 /* elements per Q8_0 block */

/* Q4_0: value = (q - 8) * d; qs[i] low nibble = element i, high nibble = element i + 16. */
struct block_q4_0 {
    uint16_t d;            /* scale, fp16 bits */
    uint8_t qs[QK4_0 / 2]; /* 4-bit quants */
};

/* Q8_0: value = q * d. Also the activation type of Q4_0 and Q8_0 weights. */
struct block_q8_0 {
    uint16_t d;       /* scale, fp16 bits */
    int8_t qs[QK8_0]; /* quants, -127..127 from our quantizer */
};

_Static_assert(sizeof(struct block_q4_0) == 18, "q4_0 block is 18 bytes in GGUF");
_Static_assert(sizeof(struct block_q8_0) == 34, "q8_0 block is 34 bytes in GGUF");

/* Row conversions (to_float / from_float); n is a multiple of the type's block. */
void ref_f32_to_float(const void *x, float *y, int64_t n);
void ref_f32_from_float(const float *x, void *y, int64_t n);
void ref_f16_to_float(const void *x, float *y, int64_t n);
void ref_f16_from_float(const float *x, void *y, int64_t n);
void ref_bf16_to_float(const void *x, float *y, int64_t n);
void ref_bf16_from_float(const float *x, void *y, int64_t n);
void ref_q4_0_to_float(const void *x, float *y, int64_t n);
void ref_q4_0_from_float(const float *x, void *y, int64_t n);
void ref_q8_0_to_float(const void *x, float *y, int64_t n);
void ref_q8_0_from_float(const float *x, void *y, int64_t n);

/* Dot products, weight row w against an activation row a of the weight's vec_dot_type. */
void ref_vec_dot_f32(int64_t n, float *s, const void *w, const void *a);
void ref_vec_dot_f16(int64_t n, float *s, const void *w, const void *a);
void ref_vec_dot_bf16(int64_t n, float *s, const void *w, const void *a);
void ref_vec_dot_q4_0_q8_0(int64_t n, float *s, const void *w, const void *a);
void ref_vec_dot_q8_0_q8_0(int64_t n, float *s, const void *w, const void *a);

/* Float ops; contracts as in struct kernels. */
void ref_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps);
void ref_silu_mul(float *y, const float *g, const float *u, int64_t n);
void ref_softmax(float *x, int64_t n);
float ref_dot_f32(const float *a, const float *b, int64_t n);
float ref_dot_f32_f16(const float *a, const uint16_t *b, int64_t n);
void ref_axpy_f32(float *y, float alpha, const float *x, int64_t n);
void ref_axpy_f16(float *y, float alpha, const uint16_t *x, int64_t n);
void ref_scale_f32(float *y, float alpha, int64_t n);
void ref_f32_to_f16(const float *x, uint16_t *y, int64_t n);
void ref_f16_to_f32(const uint16_t *x, float *y, int64_t n);

#endif
