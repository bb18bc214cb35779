/*
 * ref.h: internal to src/kernels. The GGUF block layouts the kernels read,
 * and the scalar reference functions (ref.c) so an ISA table can point the
 * entries it does not vectorize at them. Model code uses kernels.h only.
 */
#ifndef HEARTH_KERNELS_REF_H
#define HEARTH_KERNELS_REF_H

#include <stdint.h>

#include "kernels/kernels.h"

#define QK4_0  32  /* elements per Q4_0 block */
#define QK4_1  32  /* elements per Q4_1 block */
#define QK5_0  32  /* elements per Q5_0 block */
#define QK5_1  32  /* elements per Q5_1 block */
#define QK8_0  32  /* elements per Q8_0 block */
#define QK8_1  32  /* elements per Q8_1 block */
#define QK4_NL 32  /* elements per IQ4_NL block */
#define QK_K   256 /* elements per K-quant super-block (Q2_K..Q8_K, IQ4_XS) */

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

/* Q4_1: value = q * d + m, q in 0..15; nibbles as Q4_0. Activation type Q8_1. */
struct block_q4_1 {
    uint16_t d;            /* scale, fp16 bits */
    uint16_t m;            /* offset (the block minimum), fp16 bits */
    uint8_t qs[QK4_1 / 2]; /* 4-bit quants */
};

/* Q5_0: value = (q - 16) * d; q's 5th bit for element j is bit j of qh. Activation type Q8_0. */
struct block_q5_0 {
    uint16_t d;            /* scale, fp16 bits */
    uint8_t qh[4];         /* high bits, little-endian uint32 */
    uint8_t qs[QK5_0 / 2]; /* low 4 bits, nibbles as Q4_0 */
};

/* Q5_1: value = q * d + m, q in 0..31; qh and qs as Q5_0. Activation type Q8_1. */
struct block_q5_1 {
    uint16_t d;            /* scale, fp16 bits */
    uint16_t m;            /* offset, fp16 bits */
    uint8_t qh[4];         /* high bits, little-endian uint32 */
    uint8_t qs[QK5_1 / 2]; /* low 4 bits */
};

/* Q8_1: Q8_0 plus s = d * sum(qs), which lets Q4_1/Q5_1 dots fold in their offset m. */
struct block_q8_1 {
    uint16_t d;       /* scale, fp16 bits */
    uint16_t s;       /* d * sum(qs), fp16 bits */
    int8_t qs[QK8_1]; /* quants, -127..127 */
};

/* IQ4_NL: value = ref_iq4nl_values[index] * d; index nibbles as Q4_0. Activation type Q8_0. */
struct block_iq4_nl {
    uint16_t d;             /* scale, fp16 bits */
    uint8_t qs[QK4_NL / 2]; /* 4-bit indices */
};

/*
 * Q2_K: 16 sub-blocks of 16; value = d * (sc & 15) * q - dmin * (sc >> 4), q in 0..3.
 * qs: 2 halves of 128 elements, each 32 bytes; element 32*k + l of a half (k 0..3, l 0..31) is
 * bits 2k..2k+1 of byte l. Sub-block j covers elements 16j..16j+15, scale byte scales[j].
 */
struct block_q2_K {
    uint8_t scales[QK_K / 16]; /* low nibble: scale, high nibble: min, both 4-bit */
    uint8_t qs[QK_K / 4];      /* 2-bit quants */
    uint16_t d;                /* super-block scale for the scales, fp16 bits */
    uint16_t dmin;             /* super-block scale for the mins, fp16 bits */
};

/*
 * Q3_K: 16 sub-blocks of 16; value = d * (s - 32) * (q - (high bit ? 0 : 4)), q in 0..3.
 * qs as Q2_K; the high bit of element 32*k + l of half h is bit 4h + k of hmask[l].
 * The 16 6-bit scales s: low 4 bits are the nibbles of scales[0..7] (low nibbles for sub-blocks
 * 0..7, high for 8..15), the top 2 bits come from scales[8..11] (2 bits per sub-block).
 */
struct block_q3_K {
    uint8_t hmask[QK_K / 8]; /* high bits of the quants */
    uint8_t qs[QK_K / 4];    /* low 2 bits */
    uint8_t scales[12];      /* 16 6-bit scales, packed */
    uint16_t d;              /* super-block scale, fp16 bits */
};

/*
 * Q4_K: 8 sub-blocks of 32; value = d * sc[j] * q - dmin * m[j], q in 0..15.
 * qs: 4 groups of 32 bytes; group g holds sub-block 2g in the low nibbles, 2g+1 in the high.
 * scales: 8 6-bit scales and 8 6-bit mins (get_scale_min_k4's packing): for j < 4
 * sc = scales[j] & 63, m = scales[j+4] & 63; for j >= 4 the low 4 bits are the nibbles of
 * scales[j+4] (sc low, m high) and the top 2 bits are bits 6..7 of scales[j-4] (sc) and
 * scales[j] (m).
 */
struct block_q4_K {
    uint16_t d;           /* super-block scale for the scales, fp16 bits */
    uint16_t dmin;        /* super-block scale for the mins, fp16 bits */
    uint8_t scales[12];   /* 6-bit scales and mins, packed as above */
    uint8_t qs[QK_K / 2]; /* 4-bit quants */
};

/* Q5_K: Q4_K plus a 5th bit: element 32*j + l (sub-block j) has its high bit in bit j of qh[l]. */
struct block_q5_K {
    uint16_t d;           /* super-block scale for the scales, fp16 bits */
    uint16_t dmin;        /* super-block scale for the mins, fp16 bits */
    uint8_t scales[12];   /* as Q4_K */
    uint8_t qh[QK_K / 8]; /* 5th bits */
    uint8_t qs[QK_K / 2]; /* low 4 bits, as Q4_K */
};

/*
 * Q6_K: 16 sub-blocks of 16; value = d * scales[j] * (q - 32), q in 0..63.
 * Per half h (128 elements): ql[64h + l] low nibble = element l, high = element l + 64;
 * ql[64h + 32 + l] low = l + 32, high = l + 96; qh[32h + l] bits 0-1, 2-3, 4-5, 6-7 are the top
 * bits of elements l, l + 32, l + 64, l + 96.
 */
struct block_q6_K {
    uint8_t ql[QK_K / 2];     /* low 4 bits */
    uint8_t qh[QK_K / 4];     /* high 2 bits */
    int8_t scales[QK_K / 16]; /* 8-bit signed scales */
    uint16_t d;               /* super-block scale, fp16 bits */
};

/*
 * Q8_K: the activation type of the K-quants and IQ4_XS. A float scale, and the sums of every
 * 16 quants so a weight's per-sub-block offset needs no pass over the quants.
 */
struct block_q8_K {
    float d;                  /* scale; negative when the block's extreme is positive */
    int8_t qs[QK_K];          /* quants, -127..127 */
    int16_t bsums[QK_K / 16]; /* bsums[j] = sum of qs[16j..16j+15] */
};

/*
 * IQ4_XS: 8 sub-blocks of 32; value = d * (ls - 32) * ref_iq4nl_values[index]; the 6-bit ls of
 * sub-block j is nibble j%2 of scales_l[j/2] | bits 2j..2j+1 of scales_h << 4. Each sub-block's
 * 16 bytes of qs hold its indices as Q4_0's nibbles.
 */
struct block_iq4_xs {
    uint16_t d;                  /* super-block scale, fp16 bits */
    uint16_t scales_h;           /* top 2 bits of the 8 sub-block scales */
    uint8_t scales_l[QK_K / 64]; /* low 4 bits of the scales */
    uint8_t qs[QK_K / 2];        /* 4-bit indices */
};

_Static_assert(sizeof(struct block_q4_0) == 18, "q4_0 block is 18 bytes in GGUF");
_Static_assert(sizeof(struct block_q4_1) == 20, "q4_1 block is 20 bytes in GGUF");
_Static_assert(sizeof(struct block_q5_0) == 22, "q5_0 block is 22 bytes in GGUF");
_Static_assert(sizeof(struct block_q5_1) == 24, "q5_1 block is 24 bytes in GGUF");
_Static_assert(sizeof(struct block_q8_0) == 34, "q8_0 block is 34 bytes in GGUF");
_Static_assert(sizeof(struct block_q8_1) == 36, "q8_1 block is 36 bytes in GGUF");
_Static_assert(sizeof(struct block_iq4_nl) == 18, "iq4_nl block is 18 bytes in GGUF");
_Static_assert(sizeof(struct block_q2_K) == 84, "q2_K block is 84 bytes in GGUF");
_Static_assert(sizeof(struct block_q3_K) == 110, "q3_K block is 110 bytes in GGUF");
_Static_assert(sizeof(struct block_q4_K) == 144, "q4_K block is 144 bytes in GGUF");
_Static_assert(sizeof(struct block_q5_K) == 176, "q5_K block is 176 bytes in GGUF");
_Static_assert(sizeof(struct block_q6_K) == 210, "q6_K block is 210 bytes in GGUF");
_Static_assert(sizeof(struct block_q8_K) == 292, "q8_K block is 292 bytes in GGUF");
_Static_assert(sizeof(struct block_iq4_xs) == 136, "iq4_xs block is 136 bytes in GGUF");

/* The 16 values IQ4_NL and IQ4_XS indices select (ggml's kvalues_iq4nl), ascending. */
extern const int8_t ref_iq4nl_values[16];

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
void ref_attn_row_f16(float *out, const float *q, int32_t hd, const struct attn_kv *kv,
                      int32_t j0, int32_t j1, float scale, float *scratch);
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

/* Float ops; contracts as in struct kernels. */
void ref_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps);
void ref_silu_mul(float *y, const float *g, const float *u, int64_t n);
void ref_gelu_mul(float *y, const float *g, const float *u, int64_t n);
void ref_softmax(float *x, int64_t n);
float ref_dot_f32(const float *a, const float *b, int64_t n);
float ref_dot_f32_f16(const float *a, const uint16_t *b, int64_t n);
void ref_axpy_f32(float *y, float alpha, const float *x, int64_t n);
void ref_axpy_f16(float *y, float alpha, const uint16_t *x, int64_t n);
void ref_scale_f32(float *y, float alpha, int64_t n);
void ref_f32_to_f16(const float *x, uint16_t *y, int64_t n);
void ref_f16_to_f32(const uint16_t *x, float *y, int64_t n);

#endif
