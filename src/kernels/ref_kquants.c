/*
 * ref_kquants.c: the reference kernels of the 256-element super-block types,
 * Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS, and of their activation type Q8_K.
 * Portable scalar C, part of the reference table (ref.c).
 *
 * Dequantization is ggml's dequantize_row_* operation for operation (the
 * same float products in the same order), so a tensor's values are the
 * ones llama.cpp computes. The dot products take ggml's integer sums
 * exactly (per super-block: sum over sub-blocks of scale * sum(q_w * q_a),
 * and the min/offset terms from Q8_K's bsums), then one float multiply by
 * d_w * d_a per super-block, as ggml_vec_dot_*_q8_K_generic. Float
 * accumulation is in block order; ggml's generic code spreads it over 8
 * lanes, which differs in the last bits only.
 */
#include "kernels/ref.h"

#include <math.h>
#include <string.h>

#include "util/dtype_blocks.h"
#include "util/fp16.h"

/* ---------------------------------------------------------------- scale packing */

/*
 * get_scale_min_k4 for j = 0..7: sc[j] is sub-block j's scale, sc[8 + j]
 * its min. Sub-blocks 0..3 keep 6 bits in bytes 0..7; sub-blocks 4..7 keep
 * their low 4 bits in the nibbles of bytes 8..11 and their top 2 bits in
 * bits 6..7 of bytes 0..3 (scale) and 4..7 (min).
 */
void ref_unpack_k4_scales(const uint8_t packed[12], uint8_t sc[16])
{
    for (int j = 0; j < 4; j++) {
        sc[j]     = packed[j] & 63;
        sc[8 + j] = packed[j + 4] & 63;
    }
    for (int j = 4; j < 8; j++) {
        sc[j]     = (uint8_t)((packed[j + 4] & 0x0F) | (packed[j - 4] >> 6) << 4);
        sc[8 + j] = (uint8_t)((packed[j + 4] >> 4) | (packed[j] >> 6) << 4);
    }
}

/*
 * Q3_K's 16 6-bit scales, minus 32. Sub-block j's low 4 bits are the low
 * nibble of byte j (j < 8) or the high nibble of byte j - 8; its top 2 bits
 * are bits 2*(j/4)..2*(j/4)+1 of byte 8 + j%4. (ggml unpacks the same bits
 * with the kmask1/kmask2 word operations.)
 */
void ref_unpack_q3_k_scales(const uint8_t packed[12], int8_t sc[16])
{
    for (int j = 0; j < 16; j++) {
        const int lo = j < 8 ? packed[j] & 0x0F : packed[j - 8] >> 4;
        const int hi = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
        sc[j]        = (int8_t)((lo | hi << 4) - 32);
    }
}

/* IQ4_XS sub-block j's 6-bit scale, minus 32. */
static inline int iq4_xs_scale(const struct block_iq4_xs *b, int j)
{
    const int lo = (b->scales_l[j / 2] >> (4 * (j % 2))) & 0x0F;
    const int hi = (b->scales_h >> (2 * j)) & 3;
    return (lo | hi << 4) - 32;
}

/* ---------------------------------------------------------------- unpacking quants */

/*
 * Q2_K/Q3_K low 2 bits of all 256 elements in element order: per half of
 * 128, element 32*k + l is bits 2k..2k+1 of qs[32*half + l].
 */
static inline void unpack_2bit(const uint8_t qs[QK_K / 4], int8_t q[QK_K])
{
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < 32; l++)
                q[128 * h + 32 * k + l] = (int8_t)((qs[32 * h + l] >> (2 * k)) & 3);
}

/* Q3_K quants, -4..3: the low 2 bits, minus 4 where the high bit is clear. */
static inline void unpack_q3_k(const struct block_q3_K *b, int8_t q[QK_K])
{
    unpack_2bit(b->qs, q);
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < 32; l++)
                if (!(b->hmask[l] & (1u << (4 * h + k))))
                    q[128 * h + 32 * k + l] -= 4;
}

/* Q4_K/Q5_K low 4 bits: 32-byte group g holds sub-block 2g (low nibbles) and 2g+1 (high). */
static inline void unpack_4bit_k(const uint8_t qs[QK_K / 2], int8_t q[QK_K])
{
    for (int g = 0; g < 4; g++)
        for (int l = 0; l < 32; l++) {
            q[64 * g + l]      = (int8_t)(qs[32 * g + l] & 0x0F);
            q[64 * g + 32 + l] = (int8_t)(qs[32 * g + l] >> 4);
        }
}

/* Q5_K quants, 0..31: element 32*j + l's 5th bit is bit j of qh[l]. */
static inline void unpack_q5_k(const struct block_q5_K *b, int8_t q[QK_K])
{
    unpack_4bit_k(b->qs, q);
    for (int j = 0; j < 8; j++)
        for (int l = 0; l < 32; l++)
            q[32 * j + l] = (int8_t)(q[32 * j + l] | ((b->qh[l] >> j) & 1) << 4);
}

/* Q6_K quants minus 32, -32..31. */
static inline void unpack_q6_k(const struct block_q6_K *b, int8_t q[QK_K])
{
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
        int8_t *o = q + 128 * h;
        for (int l = 0; l < 32; l++) {
            o[l]      = (int8_t)(((ql[l] & 0x0F) | ((qh[l] >> 0) & 3) << 4) - 32);
            o[l + 32] = (int8_t)(((ql[l + 32] & 0x0F) | ((qh[l] >> 2) & 3) << 4) - 32);
            o[l + 64] = (int8_t)(((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32);
            o[l + 96] = (int8_t)(((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32);
        }
    }
}

/* ---------------------------------------------------------------- to_float */

/* As dequantize_row_q2_K: (d * sc) * q - (dmin * m) per 16-element sub-block. */
void ref_q2_k_to_float(const void *x, float *y, int64_t n)
{
    const struct block_q2_K *b = x;
    const int64_t nb           = n / QK_K;
    int8_t q[QK_K];
    for (int64_t i = 0; i < nb; i++) {
        const float d    = fp16_to_fp32(b[i].d);
        const float dmin = fp16_to_fp32(b[i].dmin);
        unpack_2bit(b[i].qs, q);
        for (int j = 0; j < QK_K / 16; j++) {
            const float dl = d * (float)(b[i].scales[j] & 0x0F);
            const float ml = dmin * (float)(b[i].scales[j] >> 4);
            for (int l = 0; l < 16; l++)
                y[i * QK_K + 16 * j + l] = dl * (float)q[16 * j + l] - ml;
        }
    }
}

/* As dequantize_row_q3_K: (d * (s - 32)) * q. */
void ref_q3_k_to_float(const void *x, float *y, int64_t n)
{
    const struct block_q3_K *b = x;
    const int64_t nb           = n / QK_K;
    int8_t q[QK_K], sc[16];
    for (int64_t i = 0; i < nb; i++) {
        const float d = fp16_to_fp32(b[i].d);
        ref_unpack_q3_k_scales(b[i].scales, sc);
        unpack_q3_k(&b[i], q);
        for (int j = 0; j < QK_K / 16; j++) {
            const float dl = d * (float)sc[j];
            for (int l = 0; l < 16; l++)
                y[i * QK_K + 16 * j + l] = dl * (float)q[16 * j + l];
        }
    }
}

/* As dequantize_row_q4_K: (d * sc) * q - (dmin * m) per 32-element sub-block. */
void ref_q4_k_to_float(const void *x, float *y, int64_t n)
{
    const struct block_q4_K *b = x;
    const int64_t nb           = n / QK_K;
    int8_t q[QK_K];
    uint8_t sc[16];
    for (int64_t i = 0; i < nb; i++) {
        const float d    = fp16_to_fp32(b[i].d);
        const float dmin = fp16_to_fp32(b[i].dmin);
        ref_unpack_k4_scales(b[i].scales, sc);
        unpack_4bit_k(b[i].qs, q);
        for (int j = 0; j < QK_K / 32; j++) {
            const float dl = d * (float)sc[j];
            const float ml = dmin * (float)sc[8 + j];
            for (int l = 0; l < 32; l++)
                y[i * QK_K + 32 * j + l] = dl * (float)q[32 * j + l] - ml;
        }
    }
}

void ref_q5_k_to_float(const void *x, float *y, int64_t n)
{
    const struct block_q5_K *b = x;
    const int64_t nb           = n / QK_K;
    int8_t q[QK_K];
    uint8_t sc[16];
    for (int64_t i = 0; i < nb; i++) {
        const float d    = fp16_to_fp32(b[i].d);
        const float dmin = fp16_to_fp32(b[i].dmin);
        ref_unpack_k4_scales(b[i].scales, sc);
        unpack_q5_k(&b[i], q);
        for (int j = 0; j < QK_K / 32; j++) {
            const float dl = d * (float)sc[j];
            const float ml = dmin * (float)sc[8 + j];
            for (int l = 0; l < 32; l++)
                y[i * QK_K + 32 * j + l] = dl * (float)q[32 * j + l] - ml;
        }
    }
}

/* As dequantize_row_q6_K: (d * scale) * (q - 32), left to right. */
void ref_q6_k_to_float(const void *x, float *y, int64_t n)
{
    const struct block_q6_K *b = x;
    const int64_t nb           = n / QK_K;
    int8_t q[QK_K];
    for (int64_t i = 0; i < nb; i++) {
        const float d = fp16_to_fp32(b[i].d);
        unpack_q6_k(&b[i], q);
        for (int j = 0; j < QK_K / 16; j++) {
            const float dl = d * (float)b[i].scales[j];
            for (int l = 0; l < 16; l++)
                y[i * QK_K + 16 * j + l] = dl * (float)q[16 * j + l];
        }
    }
}

/* As dequantize_row_iq4_xs: (d * (ls - 32)) * value. */
void ref_iq4_xs_to_float(const void *x, float *y, int64_t n)
{
    const struct block_iq4_xs *b = x;
    const int64_t nb             = n / QK_K;
    for (int64_t i = 0; i < nb; i++) {
        const float d = fp16_to_fp32(b[i].d);
        for (int j = 0; j < QK_K / 32; j++) {
            const float dl    = d * (float)iq4_xs_scale(&b[i], j);
            const uint8_t *qs = b[i].qs + 16 * j;
            float *o          = y + i * QK_K + 32 * j;
            for (int l = 0; l < 16; l++) {
                o[l]      = dl * (float)iq4nl_values[qs[l] & 0x0F];
                o[l + 16] = dl * (float)iq4nl_values[qs[l] >> 4];
            }
        }
    }
}

void ref_q8_k_to_float(const void *x, float *y, int64_t n)
{
    const struct block_q8_K *b = x;
    const int64_t nb           = n / QK_K;
    for (int64_t i = 0; i < nb; i++)
        for (int j = 0; j < QK_K; j++)
            y[i * QK_K + j] = b[i].d * (float)b[i].qs[j];
}

/*
 * ggml's nearest_int: round to nearest, ties to even, by adding 1.5 * 2^23
 * (exact for |v| < 2^22, which |v| <= 127 is).
 */
static inline int nearest_int(float v)
{
    const float t = v + 12582912.0f;
    uint32_t u;
    memcpy(&u, &t, sizeof(u));
    return (int)(u & 0x007fffff) - 0x00400000;
}

/*
 * ggml's quantize_row_q8_K_ref, exactly: max = the element of largest
 * magnitude with its sign (the first one on ties), iscale = -127 / max,
 * q = min(127, nearest_int(iscale * x)), d = 1 / iscale. The extreme maps to
 * -127, so d is negative when max is positive. An all-zero block has d = 0
 * and zero quants and sums (ggml leaves its bsums unwritten).
 */
void ref_q8_k_from_float(const float *x, void *y, int64_t n)
{
    struct block_q8_K *b = y;
    const int64_t nb     = n / QK_K;
    for (int64_t i = 0; i < nb; i++) {
        const float *xb = x + i * QK_K;
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < QK_K; j++) {
            const float ax = fabsf(xb[j]);
            if (ax > amax) {
                amax = ax;
                max  = xb[j];
            }
        }
        if (amax == 0.0f) {
            memset(&b[i], 0, sizeof(b[i]));
            continue;
        }
        const float iscale = -127.0f / max;
        for (int j = 0; j < QK_K; j++) {
            const int v = nearest_int(iscale * xb[j]);
            b[i].qs[j]  = (int8_t)(v < 127 ? v : 127);
        }
        for (int j = 0; j < QK_K / 16; j++) {
            int sum = 0;
            for (int l = 0; l < 16; l++)
                sum += b[i].qs[16 * j + l];
            b[i].bsums[j] = (int16_t)sum;
        }
        b[i].d = 1.0f / iscale;
    }
}

/* ---------------------------------------------------------------- dot products */

/*
 * As ggml_vec_dot_q2_K_q8_K: sum_j (sc_j & 15) * sum(q_w * q_a) in int, the
 * mins through the bsums, then (d_a * d_w) * isum - (d_a * dmin_w) * summs.
 */
void ref_vec_dot_q2_k_q8_k(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_q2_K *x = w;
    const struct block_q8_K *y = a;
    const int64_t nb           = n / QK_K;
    float sum                  = 0.0f;
    int8_t q[QK_K];
    for (int64_t i = 0; i < nb; i++) {
        int summs = 0;
        for (int j = 0; j < 16; j++)
            summs += y[i].bsums[j] * (x[i].scales[j] >> 4);
        unpack_2bit(x[i].qs, q);
        int isum = 0;
        for (int j = 0; j < 16; j++) {
            int isuml = 0;
            for (int l = 0; l < 16; l++)
                isuml += q[16 * j + l] * y[i].qs[16 * j + l];
            isum += (x[i].scales[j] & 0x0F) * isuml;
        }
        const float dall = y[i].d * fp16_to_fp32(x[i].d);
        const float dmin = y[i].d * fp16_to_fp32(x[i].dmin);
        sum += dall * (float)isum - dmin * (float)summs;
    }
    *s = sum;
}

/* As ggml_vec_dot_q3_K_q8_K: sum_j (s_j - 32) * sum(q_w * q_a) in int, times d_w * d_a. */
void ref_vec_dot_q3_k_q8_k(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_q3_K *x = w;
    const struct block_q8_K *y = a;
    const int64_t nb           = n / QK_K;
    float sum                  = 0.0f;
    int8_t q[QK_K], sc[16];
    for (int64_t i = 0; i < nb; i++) {
        ref_unpack_q3_k_scales(x[i].scales, sc);
        unpack_q3_k(&x[i], q);
        int isum = 0;
        for (int j = 0; j < 16; j++) {
            int isuml = 0;
            for (int l = 0; l < 16; l++)
                isuml += q[16 * j + l] * y[i].qs[16 * j + l];
            isum += sc[j] * isuml;
        }
        sum += (fp16_to_fp32(x[i].d) * y[i].d) * (float)isum;
    }
    *s = sum;
}

/* Q4_K/Q5_K's common tail: 8 scales over 32-element sub-blocks, mins through the bsums. */
static inline float dot_k4_block(const int8_t q[QK_K], const uint8_t sc[16], float d_w,
                                 float dmin_w, const struct block_q8_K *y)
{
    int summs = 0;
    for (int j = 0; j < 16; j++)
        summs += y->bsums[j] * sc[8 + j / 2];
    int isum = 0;
    for (int j = 0; j < 8; j++) {
        int isuml = 0;
        for (int l = 0; l < 32; l++)
            isuml += q[32 * j + l] * y->qs[32 * j + l];
        isum += sc[j] * isuml;
    }
    return (d_w * y->d) * (float)isum - (dmin_w * y->d) * (float)summs;
}

/*
 * As ggml_vec_dot_q4_K_q8_K: sum_j sc_j * sum(q_w * q_a) in int times
 * d_w * d_a, minus dmin_w * d_a * sum_j m_j * (the bsums of sub-block j).
 */
/*
 * Q4_K as llama.cpp's x86 build sums it: it repacks every Q4_K matrix whose
 * rows come in eights, and its repacked kernels take exact integer sums of
 * the quants times the sub-block scales, and of the mins times the
 * activation sums, each fma'd into its own float chain, the second
 * subtracted at the end. ggml_gemv_q4_K_8x8_q8_K (decode, and the last
 * n % 4 tokens of a batch) steps once per superblock (per = 8 sub-blocks);
 * ggml_gemm_q4_K_8x8_q8_K (a batch's tokens in whole fours) once per
 * 64-element pair of sub-blocks (per = 2).
 */
static void q4_k_repacked_step(const struct block_q4_K *x, const struct block_q8_K *y, int per,
                               float *acc, float *acc_m)
{
    int8_t q[QK_K];
    uint8_t sc[16];
    ref_unpack_k4_scales(x->scales, sc);
    unpack_4bit_k(x->qs, q);
    const float d = fp16_to_fp32(x->d) * y->d, dm = fp16_to_fp32(x->dmin) * y->d;
    for (int j0 = 0; j0 < 8; j0 += per) {
        int isum = 0, imin = 0;
        for (int j = j0; j < j0 + per; j++) {
            int sj = 0;
            for (int e = 32 * j; e < 32 * j + 32; e++)
                sj += q[e] * y->qs[e];
            isum += sc[j] * sj;
            imin += sc[8 + j] * (y->bsums[2 * j] + y->bsums[2 * j + 1]);
        }
        *acc   = fmaf((float)isum, d, *acc);
        *acc_m = fmaf((float)imin, dm, *acc_m);
    }
}

static float dot_q4_k_repacked(int64_t n, const void *w, const void *a, int per)
{
    const struct block_q4_K *x = w;
    const struct block_q8_K *y = a;
    float acc = 0.0f, acc_m = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++)
        q4_k_repacked_step(&x[i], &y[i], per, &acc, &acc_m);
    return acc - acc_m;
}

void ref_vec_dot_q4_k_q8_k(int64_t n, float *s, const void *w, const void *a)
{
    *s = dot_q4_k_repacked(n, w, a, 8);
}

void ref_dot_q4_k_q8_k_quad(int64_t n, float *s, const void *w, const void *a)
{
    *s = dot_q4_k_repacked(n, w, a, 2);
}

/*
 * Packed Q4_K (pack8): per superblock, 8 * 144 bytes for eight rows:
 *   0..15   the rows' d, 16..31 their dmin (fp16);
 *   32..63  scale entry k = 8 * j + r (sub-block j, row r), low 4 bits: byte k % 32,
 *           low nibble for k < 32, high nibble for k >= 32; 64..95 the mins alike;
 *   96..127 the entries' top 2 bits: byte k % 32, bits 0-1 scale k < 32, 2-3 scale
 *           k >= 32, 4-5 min k < 32, 6-7 min k >= 32;
 *   128..   for pair g (0..3) and group k (0..7), 32 bytes: row r's bytes
 *           32g + 4k .. +3 at 4r, so a 32-bit lane is a row whose low nibbles are
 *           elements 4k..4k+3 of sub-block 2g and high nibbles those of 2g+1.
 */
#define Q4K_PACKED_QS 128

void ref_pack8_q4_k(const void *rows, size_t row_len, int64_t n, void *dst)
{
    uint8_t *out = dst;
    for (int64_t b = 0; b < n / QK_K; b++) {
        memset(out, 0, Q4K_PACKED_QS);
        for (int r = 0; r < 8; r++) {
            const struct block_q4_K *x =
                (const struct block_q4_K *)((const uint8_t *)rows + r * row_len) + b;
            memcpy(out + 2 * r, &x->d, 2);
            memcpy(out + 16 + 2 * r, &x->dmin, 2);
            uint8_t sc[16];
            ref_unpack_k4_scales(x->scales, sc);
            for (int j = 0; j < 8; j++) {
                const int k = 8 * j + r, hi = k >= 32;
                out[32 + k % 32] |= (uint8_t)((sc[j] & 15) << (4 * hi));
                out[64 + k % 32] |= (uint8_t)((sc[8 + j] & 15) << (4 * hi));
                out[96 + k % 32] |= (uint8_t)((sc[j] >> 4) << (2 * hi));
                out[96 + k % 32] |= (uint8_t)((sc[8 + j] >> 4) << (4 + 2 * hi));
            }
            for (int g = 0; g < 4; g++)
                for (int k = 0; k < 8; k++)
                    memcpy(out + Q4K_PACKED_QS + 256 * g + 32 * k + 4 * r, x->qs + 32 * g + 4 * k,
                           4);
        }
        out += 8 * sizeof(struct block_q4_K);
    }
}

/* Row r of a packed superblock back in its own layout. */
static void unpack8_q4_k(const uint8_t *p, int r, struct block_q4_K *x)
{
    memcpy(&x->d, p + 2 * r, 2);
    memcpy(&x->dmin, p + 16 + 2 * r, 2);
    uint8_t sc[16];
    for (int j = 0; j < 8; j++) {
        const int k = 8 * j + r, hi = k >= 32;
        sc[j] =
            (uint8_t)((p[32 + k % 32] >> (4 * hi) & 15) | (p[96 + k % 32] >> (2 * hi) & 3) << 4);
        sc[8 + j] = (uint8_t)((p[64 + k % 32] >> (4 * hi) & 15) |
                              (p[96 + k % 32] >> (4 + 2 * hi) & 3) << 4);
    }
    /* get_scale_min_k4's packing, inverted */
    memset(x->scales, 0, sizeof x->scales);
    for (int j = 0; j < 4; j++) {
        x->scales[j]     = (uint8_t)(sc[j] | (sc[4 + j] >> 4) << 6);
        x->scales[j + 4] = (uint8_t)(sc[8 + j] | (sc[12 + j] >> 4) << 6);
        x->scales[j + 8] = (uint8_t)((sc[4 + j] & 15) | (sc[12 + j] & 15) << 4);
    }
    for (int g = 0; g < 4; g++)
        for (int k = 0; k < 8; k++)
            memcpy(x->qs + 32 * g + 4 * k, p + Q4K_PACKED_QS + 256 * g + 32 * k + 4 * r, 4);
}

/* ref_gemm8_q4_k's rule over a packed group, each row's superblocks rebuilt one by one. */
void ref_gemm8p_q4_k(int64_t n, const void *wp, const void *a, size_t a_row,
                     const struct q8_0_sum *as, int32_t n_tok, float *s, size_t s_stride)
{
    const int32_t quads = n_tok / 4 * 4;
    for (int r = 0; r < 8; r++)
        for (int32_t t = 0; t < n_tok; t++) {
            const struct block_q8_K *y =
                (const struct block_q8_K *)((const uint8_t *)a + t * a_row);
            float acc = 0.0f, acc_m = 0.0f;
            for (int64_t b = 0; b < n / QK_K; b++) {
                struct block_q4_K x;
                unpack8_q4_k((const uint8_t *)wp + b * 8 * sizeof(struct block_q4_K), r, &x);
                q4_k_repacked_step(&x, &y[b], t < quads ? 2 : 8, &acc, &acc_m);
            }
            s[t * s_stride + r] = acc - acc_m;
        }
}

void ref_gemm8_q4_k(int64_t n, const void *w, size_t row_len, const void *a, size_t a_row,
                    const struct q8_0_sum *as, int32_t n_tok, float *s, size_t s_stride)
{
    const int32_t quads = n_tok / 4 * 4;
    for (int32_t t = 0; t < n_tok; t++)
        for (int r = 0; r < 8; r++)
            (t < quads ? ref_dot_q4_k_q8_k_quad : ref_vec_dot_q4_k_q8_k)(
                n, &s[t * s_stride + r], (const uint8_t *)w + r * row_len,
                (const uint8_t *)a + t * a_row);
}

void ref_vec_dot_q5_k_q8_k(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_q5_K *x = w;
    const struct block_q8_K *y = a;
    const int64_t nb           = n / QK_K;
    float sum                  = 0.0f;
    int8_t q[QK_K];
    uint8_t sc[16];
    for (int64_t i = 0; i < nb; i++) {
        ref_unpack_k4_scales(x[i].scales, sc);
        unpack_q5_k(&x[i], q);
        sum += dot_k4_block(q, sc, fp16_to_fp32(x[i].d), fp16_to_fp32(x[i].dmin), &y[i]);
    }
    *s = sum;
}

/* As ggml_vec_dot_q6_K_q8_K: sum_j scale_j * sum((q_w - 32) * q_a) in int, times d_w * d_a. */
void ref_vec_dot_q6_k_q8_k(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_q6_K *x = w;
    const struct block_q8_K *y = a;
    const int64_t nb           = n / QK_K;
    float sum                  = 0.0f;
    int8_t q[QK_K];
    for (int64_t i = 0; i < nb; i++) {
        unpack_q6_k(&x[i], q);
        int isum = 0;
        for (int j = 0; j < 16; j++) {
            int isuml = 0;
            for (int l = 0; l < 16; l++)
                isuml += q[16 * j + l] * y[i].qs[16 * j + l];
            isum += x[i].scales[j] * isuml;
        }
        sum += (fp16_to_fp32(x[i].d) * y[i].d) * (float)isum;
    }
    *s = sum;
}

/*
 * As ggml_vec_dot_iq4_xs_q8_K_generic: per 32-element sub-block an int sum,
 * times (d_w * d_a) * (ls - 32), accumulated in float.
 */
void ref_vec_dot_iq4_xs_q8_k(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_iq4_xs *x = w;
    const struct block_q8_K *y   = a;
    const int64_t nb             = n / QK_K;
    float sum                    = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        const float d4d8 = fp16_to_fp32(x[i].d) * y[i].d;
        for (int j = 0; j < QK_K / 32; j++) {
            const uint8_t *qs = x[i].qs + 16 * j;
            const int8_t *q8  = y[i].qs + 32 * j;
            int sumi1 = 0, sumi2 = 0;
            for (int l = 0; l < 16; l++) {
                sumi1 += q8[l] * iq4nl_values[qs[l] & 0x0F];
                sumi2 += q8[l + 16] * iq4nl_values[qs[l] >> 4];
            }
            sum += (d4d8 * (float)iq4_xs_scale(&x[i], j)) * (float)(sumi1 + sumi2);
        }
    }
    *s = sum;
}
