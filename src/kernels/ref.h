/*
 * ref.h: internal to src/kernels. The scalar reference functions (ref.c,
 * ref_kquants.c), so an ISA table can point the entries it does not
 * vectorize at them. The block layouts they read are util/dtype_blocks.h.
 * Model code uses kernels.h only.
 */
#ifndef HEARTH_KERNELS_REF_H
#define HEARTH_KERNELS_REF_H

#include <stdint.h>

#include "kernels/kernels.h"
#include "util/dtype_blocks.h"
#include "util/fp16.h"

/*
 * MXFP4's scale: 2^(e - 128), half the E8M0 value because mxfp4_values are
 * E2M1 doubled (ggml's ggml_e8m0_to_fp32_half, denormals for e < 2).
 */
static inline float mxfp4_scale(uint8_t e)
{
    return fp32_from_bits(e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23);
}

/*
 * Q4_K/Q5_K scale unpacking: the 12 packed bytes to 8 scales (sc[0..7]) and 8 mins (sc[8..15]),
 * each 0..63, picked bit by bit per index (ISA files may unpack with word masks instead; the
 * tests hold every formulation to these).
 */
void ref_unpack_k4_scales(const uint8_t packed[12], uint8_t sc[16]);
/* Q3_K scale unpacking: the 12 packed bytes to the 16 signed scales s - 32 (-32..31). */
void ref_unpack_q3_k_scales(const uint8_t packed[12], int8_t sc[16]);

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
void ref_q4_1_to_float(const void *x, float *y, int64_t n);
void ref_q5_0_to_float(const void *x, float *y, int64_t n);
void ref_q5_1_to_float(const void *x, float *y, int64_t n);
void ref_q8_1_to_float(const void *x, float *y, int64_t n);
/* Activation quantizers with llama.cpp's x86 rounding (127/amax, half to even). */
void ref_q8_0_act_from_float(const float *x, void *y, int64_t n);
void ref_pack8_q4_0(const void *rows, size_t row_len, int64_t n, void *dst);
void ref_gemm8p_q4_0(int64_t n, const void *wp, const void *a, size_t a_row,
                     const struct q8_0_sum *as, int32_t n_tok, float *s, size_t s_stride);
float ref_ggml_expf(float x);
double ref_softmax_tile(float *y, const float *x, float max, int64_t n);
void ref_attn_row(float *out, const float *q, int32_t hd, const struct attn_kv *kv, int32_t j0,
                  int32_t j1, float scale, float *scratch);
void ref_attn_rows(float *const *out, const float *const *q, int32_t nq, int32_t hd,
                   const struct attn_kv *kv, const int32_t *j0, const int32_t *j1, float scale,
                   float *scratch);
void ref_attn_row_f16(float *out, const float *q, int32_t hd, const struct attn_kv *kv, int32_t j0,
                      int32_t j1, float scale, float *scratch);
void ref_expf_libm(const float *x, float *y, int64_t n);
void ref_attn_rows_f16(float *const *out, const float *const *q, int32_t nq, int32_t hd,
                       const struct attn_kv *kv, const int32_t *j0, const int32_t *j1, float scale,
                       float *scratch);
void ref_q8_1_act_from_float(const float *x, void *y, int64_t n);
void ref_iq4_nl_to_float(const void *x, float *y, int64_t n);
/* ref_kquants.c */
void ref_q2_k_to_float(const void *x, float *y, int64_t n);
void ref_q3_k_to_float(const void *x, float *y, int64_t n);
void ref_q4_k_to_float(const void *x, float *y, int64_t n);
void ref_q5_k_to_float(const void *x, float *y, int64_t n);
void ref_q6_k_to_float(const void *x, float *y, int64_t n);
void ref_iq4_xs_to_float(const void *x, float *y, int64_t n);
void ref_q8_k_to_float(const void *x, float *y, int64_t n);
void ref_q8_k_from_float(const float *x, void *y, int64_t n);

/* Dot products, weight row w against an activation row a of the weight's vec_dot_type. */
void ref_vec_dot_f32(int64_t n, float *s, const void *w, const void *a);
void ref_vec_dot_f16(int64_t n, float *s, const void *w, const void *a);
void ref_vec_dot_bf16(int64_t n, float *s, const void *w, const void *a);
void ref_vec_dot_q4_0_q8_0(int64_t n, float *s, const void *w, const void *a);
void ref_vec_dot_q8_0_q8_0(int64_t n, float *s, const void *w, const void *a);
void ref_vec_dot_q4_1_q8_1(int64_t n, float *s, const void *w, const void *a);
void ref_vec_dot_q5_0_q8_0(int64_t n, float *s, const void *w, const void *a);
void ref_vec_dot_q5_1_q8_1(int64_t n, float *s, const void *w, const void *a);
void ref_vec_dot_iq4_nl_q8_0(int64_t n, float *s, const void *w, const void *a);
/* ref_kquants.c */
void ref_vec_dot_q2_k_q8_k(int64_t n, float *s, const void *w, const void *a);
void ref_vec_dot_q3_k_q8_k(int64_t n, float *s, const void *w, const void *a);
void ref_vec_dot_q4_k_q8_k(int64_t n, float *s, const void *w, const void *a);
/* Q4_K in the order of llama.cpp's repacked gemm, for a batch's tokens in whole fours. */
void ref_dot_q4_k_q8_k_quad(int64_t n, float *s, const void *w, const void *a);
/* Q4_K's packed layout (ref_kquants.c) and gemm8p over it, with ref_gemm8_q4_k's rule. */
void ref_pack8_q4_k(const void *rows, size_t row_len, int64_t n, void *dst);
void ref_gemm8p_q4_k(int64_t n, const void *wp, const void *a, size_t a_row,
                     const struct q8_0_sum *as, int32_t n_tok, float *s, size_t s_stride);
/* gemm8 with that rule: tokens below n_tok / 4 * 4 in the quad order, the rest as vec_dot. */
void ref_gemm8_q4_k(int64_t n, const void *w, size_t row_len, const void *a, size_t a_row,
                    const struct q8_0_sum *as, int32_t n_tok, float *s, size_t s_stride);
void ref_vec_dot_q5_k_q8_k(int64_t n, float *s, const void *w, const void *a);
void ref_vec_dot_q6_k_q8_k(int64_t n, float *s, const void *w, const void *a);
void ref_vec_dot_iq4_xs_q8_k(int64_t n, float *s, const void *w, const void *a);
void ref_mxfp4_to_float(const void *x, float *y, int64_t n);
void ref_vec_dot_mxfp4_q8_0(int64_t n, float *s, const void *w, const void *a);
/* ref_iquants.c */
void ref_iq2_xxs_to_float(const void *x, float *y, int64_t n);
void ref_iq2_xs_to_float(const void *x, float *y, int64_t n);
void ref_iq2_s_to_float(const void *x, float *y, int64_t n);
void ref_iq3_xxs_to_float(const void *x, float *y, int64_t n);
void ref_iq3_s_to_float(const void *x, float *y, int64_t n);
void ref_iq1_s_to_float(const void *x, float *y, int64_t n);
void ref_iq1_m_to_float(const void *x, float *y, int64_t n);
void ref_vec_dot_iq2_xxs_q8_k(int64_t n, float *s, const void *w, const void *a);
void ref_vec_dot_iq2_xs_q8_k(int64_t n, float *s, const void *w, const void *a);
void ref_vec_dot_iq2_s_q8_k(int64_t n, float *s, const void *w, const void *a);
void ref_vec_dot_iq3_xxs_q8_k(int64_t n, float *s, const void *w, const void *a);
void ref_vec_dot_iq3_s_q8_k(int64_t n, float *s, const void *w, const void *a);
void ref_vec_dot_iq1_s_q8_k(int64_t n, float *s, const void *w, const void *a);
void ref_vec_dot_iq1_m_q8_k(int64_t n, float *s, const void *w, const void *a);
/* ref_tquants.c */
void ref_tq1_0_to_float(const void *x, float *y, int64_t n);
void ref_tq2_0_to_float(const void *x, float *y, int64_t n);
void ref_vec_dot_tq1_0_q8_k(int64_t n, float *s, const void *w, const void *a);
void ref_vec_dot_tq2_0_q8_k(int64_t n, float *s, const void *w, const void *a);

/*
 * The table entries of the Q8_K types that every ISA table takes from the
 * reference as they are (IQ1_S..IQ3_S, TQ1_0, TQ2_0): designated
 * initializers for a struct kernels' .type.
 */
#define REF_IQ_ENTRY(T, t)                                                                         \
    [DTYPE_##T] = {.vec_dot_type = DTYPE_Q8_K,                                                     \
                   .to_float     = ref_##t##_to_float,                                             \
                   .vec_dot      = ref_vec_dot_##t##_q8_k}
#define REF_IQ_TYPES                                                                               \
    REF_IQ_ENTRY(IQ2_XXS, iq2_xxs), REF_IQ_ENTRY(IQ2_XS, iq2_xs), REF_IQ_ENTRY(IQ2_S, iq2_s),      \
        REF_IQ_ENTRY(IQ3_XXS, iq3_xxs), REF_IQ_ENTRY(IQ3_S, iq3_s), REF_IQ_ENTRY(IQ1_S, iq1_s),    \
        REF_IQ_ENTRY(IQ1_M, iq1_m), REF_IQ_ENTRY(TQ1_0, tq1_0), REF_IQ_ENTRY(TQ2_0, tq2_0)

/* Float ops; contracts as in struct kernels. */
void ref_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps);
void ref_silu_mul(float *y, const float *g, const float *u, int64_t n);
void ref_gelu_mul(float *y, const float *g, const float *u, int64_t n);
void ref_axpy_f32(float *y, float alpha, const float *x, int64_t n);
void ref_scale_f32(float *y, float alpha, int64_t n);
void ref_mad_f32(float *y, const float *x, float a, int64_t n);
float ref_dot_f32_ggml(const float *x, const float *y, int64_t n);
void ref_f32_to_f16(const float *x, uint16_t *y, int64_t n);

#endif
