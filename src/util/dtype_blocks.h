/*
 * dtype_blocks.h: the byte layout of every quantized block GGUF stores, one
 * struct per type, beside dtype.h's geometry (dtype.c sizes its table from
 * these structs). The kernels read them, the quantizers in src/quant write
 * them, and the tests build them by hand; all of them include this header,
 * so a field's meaning is stated once. Layouts are ggml's (ggml-common.h);
 * every fp16 field holds IEEE half bits, converted with util/fp16.h.
 */
#ifndef HEARTH_DTYPE_BLOCKS_H
#define HEARTH_DTYPE_BLOCKS_H

#include <stdint.h>

#define QK4_0    32  /* elements per Q4_0 block */
#define QK4_1    32  /* elements per Q4_1 block */
#define QK5_0    32  /* elements per Q5_0 block */
#define QK5_1    32  /* elements per Q5_1 block */
#define QK8_0    32  /* elements per Q8_0 block */
#define QK8_1    32  /* elements per Q8_1 block */
#define QK4_NL   32  /* elements per IQ4_NL block */
#define QK_K     256 /* elements per super-block (Q2_K..Q8_K, IQ1..IQ3, IQ4_XS, TQ1_0, TQ2_0) */
#define QK_MXFP4 32  /* elements per MXFP4 block */

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

/* IQ4_NL: value = iq4nl_values[index] * d; index nibbles as Q4_0. Activation type Q8_0. */
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
 * IQ4_XS: 8 sub-blocks of 32; value = d * (ls - 32) * iq4nl_values[index]; the 6-bit ls of
 * sub-block j is nibble j%2 of scales_l[j/2] | bits 2j..2j+1 of scales_h << 4. Each sub-block's
 * 16 bytes of qs hold its indices as Q4_0's nibbles.
 */
struct block_iq4_xs {
    uint16_t d;                  /* super-block scale, fp16 bits */
    uint16_t scales_h;           /* top 2 bits of the 8 sub-block scales */
    uint8_t scales_l[QK_K / 64]; /* low 4 bits of the scales */
    uint8_t qs[QK_K / 2];        /* 4-bit indices */
};

/*
 * The IQ1..IQ3 types: groups of 8 elements (4 for IQ3's grid halves) whose
 * magnitudes are one entry of a codebook (kernels/iq_grids.h), per 32-element
 * sub-block a small odd scale, per super-block an fp16 d. Activation type Q8_K.
 */

/*
 * IQ2_XXS: per sub-block j, qs[4j..4j+3] as two little-endian uint32: the
 * first's bytes are 4 grid indices (iq2xxs_grid), the second holds four
 * 7-bit sign indices (bits 7l..7l+6, iq_ksigns) and the scale s in its top 4
 * bits. value = d * (0.5 + s) * 0.25 * grid * sign.
 */
struct block_iq2_xxs {
    uint16_t d;            /* fp16 bits */
    uint16_t qs[QK_K / 8]; /* indices, signs and scales */
};

/*
 * IQ2_XS: qs[4j + l] = 9-bit grid index (iq2xs_grid) | 7-bit sign index << 9;
 * groups 0-1 of sub-block j scale by the low nibble of scales[j], 2-3 by the
 * high: value = d * (0.5 + s) * 0.25 * grid * sign.
 */
struct block_iq2_xs {
    uint16_t d;                /* fp16 bits */
    uint16_t qs[QK_K / 8];     /* index | sign index << 9 */
    uint8_t scales[QK_K / 32]; /* two 4-bit scales per sub-block */
};

/*
 * IQ2_S: group l of sub-block j: index qs[4j + l] | bits 2l..2l+1 of qh[j] << 8
 * (iq2s_grid), signs byte qs[32 + 4j + l] (one bit per element, no parity);
 * scales as IQ2_XS.
 */
struct block_iq2_s {
    uint16_t d;                /* fp16 bits */
    uint8_t qs[QK_K / 4];      /* 32 index bytes, then 32 sign bytes */
    uint8_t qh[QK_K / 32];     /* top 2 bits of the indices */
    uint8_t scales[QK_K / 32]; /* two 4-bit scales per sub-block */
};

/*
 * IQ3_XXS: qs[0..63] are grid indices (iq3xxs_grid), 8 per sub-block, each 4
 * elements; qs[64 + 4j..] a little-endian uint32 per sub-block with four
 * 7-bit sign indices (for 8 elements each) and the scale s in the top 4 bits.
 * value = d * (0.5 + s) * 0.5 * grid * sign.
 */
struct block_iq3_xxs {
    uint16_t d;               /* fp16 bits */
    uint8_t qs[3 * QK_K / 8]; /* indices, then signs and scales */
};

/*
 * IQ3_S: index k of sub-block j is qs[8j + k] | bit k of qh[j] << 8 (iq3s_grid);
 * signs[4j + l] one bit per element of group l; sub-block j's scale is nibble
 * j%2 of scales[j/2]: value = d * (1 + 2s) * grid * sign.
 */
struct block_iq3_s {
    uint16_t d;                /* fp16 bits */
    uint8_t qs[QK_K / 4];      /* low 8 bits of the indices */
    uint8_t qh[QK_K / 32];     /* 9th bits */
    uint8_t signs[QK_K / 8];   /* sign bits */
    uint8_t scales[QK_K / 64]; /* 4-bit scales */
};

/*
 * IQ1_S: group l of sub-block j: index qs[4j + l] | bits 3l..3l+2 of qh[j] << 8
 * (iq1s_grid, values -1/0/1); qh[j] bits 12..14 are the scale s, bit 15 the
 * sign of the shift: value = d * (2s + 1) * (grid + (bit 15 ? -0.125 : 0.125)).
 */
struct block_iq1_s {
    uint16_t d;             /* fp16 bits */
    uint8_t qs[QK_K / 8];   /* low 8 bits of the indices */
    uint16_t qh[QK_K / 32]; /* high index bits, scale, shift sign */
};

/*
 * IQ1_M: group l of sub-block j: index qs[4j + l] | nibble l%2 of qh[2j + l/2]
 * (bits 0..2) << 8, that nibble's bit 3 the shift sign; scales read as 4
 * little-endian uint16: 3-bit scales for groups 0-1 and 2-3 of sub-block j at
 * bits 6(j%2) and 6(j%2)+3 of word j/2, and the top nibbles of the 4 words
 * are the fp16 d (word 0's lowest). value = d * (2s + 1) * (grid +- 0.125).
 */
struct block_iq1_m {
    uint8_t qs[QK_K / 8];      /* low 8 bits of the indices */
    uint8_t qh[QK_K / 16];     /* high index bits and shift signs, a nibble per group */
    uint8_t scales[QK_K / 32]; /* 3-bit scales and the fp16 d */
};

/*
 * TQ1_0: ternary, value = (t - 1) * d, t in 0..2, five per byte in base 3 as
 * a fixed-point fraction: byte q holds t_k = ((uint8)(q * 3^k) * 3) >> 8.
 * qs[0..31] hold elements 32k + m (k 0..4) for m = byte, qs[32..47] elements
 * 160 + 16k + m; qh[0..3] four per byte, elements 240 + 4k + m.
 */
struct block_tq1_0 {
    uint8_t qs[(QK_K - 4 * QK_K / 64) / 5]; /* 5 elements per byte */
    uint8_t qh[QK_K / 64];                  /* 4 elements per byte */
    uint16_t d;                             /* fp16 bits */
};

/* TQ2_0: value = (q - 1) * d, q in 0..3 (3 unused); qs as Q2_K's 2-bit planes. */
struct block_tq2_0 {
    uint8_t qs[QK_K / 4]; /* 2-bit quants */
    uint16_t d;           /* fp16 bits */
};

/*
 * MXFP4: value = mxfp4_values[index] * 2^(e - 128) (E2M1 doubled, so an E8M0
 * scale halved); index nibbles as Q4_0. Activation type Q8_0.
 */
struct block_mxfp4 {
    uint8_t e;                /* E8M0 exponent */
    uint8_t qs[QK_MXFP4 / 2]; /* 4-bit indices */
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
_Static_assert(sizeof(struct block_iq2_xxs) == 66, "iq2_xxs block is 66 bytes in GGUF");
_Static_assert(sizeof(struct block_iq2_xs) == 74, "iq2_xs block is 74 bytes in GGUF");
_Static_assert(sizeof(struct block_iq2_s) == 82, "iq2_s block is 82 bytes in GGUF");
_Static_assert(sizeof(struct block_iq3_xxs) == 98, "iq3_xxs block is 98 bytes in GGUF");
_Static_assert(sizeof(struct block_iq3_s) == 110, "iq3_s block is 110 bytes in GGUF");
_Static_assert(sizeof(struct block_iq1_s) == 50, "iq1_s block is 50 bytes in GGUF");
_Static_assert(sizeof(struct block_iq1_m) == 56, "iq1_m block is 56 bytes in GGUF");
_Static_assert(sizeof(struct block_tq1_0) == 54, "tq1_0 block is 54 bytes in GGUF");
_Static_assert(sizeof(struct block_tq2_0) == 66, "tq2_0 block is 66 bytes in GGUF");
_Static_assert(sizeof(struct block_mxfp4) == 17, "mxfp4 block is 17 bytes in GGUF");

/* The 16 values IQ4_NL and IQ4_XS indices select (ggml's kvalues_iq4nl), ascending; in dtype.c. */
extern const int8_t iq4nl_values[16];
/* The 16 values MXFP4 indices select (ggml's kvalues_mxfp4: E2M1 times 2); in dtype.c. */
extern const int8_t mxfp4_values[16];

#endif
