/*
 * ref_iquants.c: the reference kernels of the codebook types IQ1_S, IQ1_M,
 * IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S (layouts in util/dtype_blocks.h,
 * codebooks in iq_grids.c). Portable scalar C, part of the reference table.
 *
 * to_float is ggml's dequantize_row_* operation for operation, so a tensor's
 * values are the ones llama.cpp computes. The dots against Q8_K take ggml's
 * integer sums per super-block and its float steps in its order
 * (ggml_vec_dot_*_q8_K_generic): the generic code is one scalar chain, so
 * these match it bit for bit.
 */
#include "kernels/ref.h"

#include <string.h>

#include "kernels/iq_grids.h"
#include "util/dtype_blocks.h"
#include "util/fp16.h"

/* Little-endian uint32 at p (the blocks pack words at 2-byte alignment). */
static inline uint32_t le32(const void *p)
{
    const uint8_t *b = p;
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static inline uint16_t le16(const uint8_t *b)
{
    return (uint16_t)(b[0] | b[1] << 8);
}

/* +1 or -1 for element k of a group whose sign byte is signs. */
static inline int sign_of(uint8_t signs, int k)
{
    return (signs >> k) & 1 ? -1 : 1;
}

/* ---------------------------------------------------------------- IQ2_XXS */

void ref_iq2_xxs_to_float(const void *x, float *y, int64_t n)
{
    const struct block_iq2_xxs *b = x;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = fp16_to_fp32(b[i].d);
        for (int j = 0; j < QK_K / 32; j++) {
            const uint32_t idx = le32(&b[i].qs[4 * j]), aux = le32(&b[i].qs[4 * j + 2]);
            const float db = d * (0.5f + (float)(aux >> 28)) * 0.25f;
            for (int l = 0; l < 4; l++) {
                const uint64_t g    = iq2xxs_grid[(idx >> (8 * l)) & 255];
                const uint8_t signs = iq_ksigns[(aux >> (7 * l)) & 127];
                for (int k = 0; k < 8; k++)
                    *y++ = db * (float)iq_grid_byte(g, k) * (float)sign_of(signs, k);
            }
        }
    }
}

void ref_vec_dot_iq2_xxs_q8_k(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_iq2_xxs *x = w;
    const struct block_q8_K *yb   = a;
    float sumf                    = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d    = fp16_to_fp32(x[i].d) * yb[i].d;
        const int8_t *q8 = yb[i].qs;
        int32_t bsum     = 0;
        for (int j = 0; j < QK_K / 32; j++) {
            const uint32_t idx = le32(&x[i].qs[4 * j]), aux = le32(&x[i].qs[4 * j + 2]);
            int32_t sumi = 0;
            for (int l = 0; l < 4; l++, q8 += 8) {
                const uint64_t g    = iq2xxs_grid[(idx >> (8 * l)) & 255];
                const uint8_t signs = iq_ksigns[(aux >> (7 * l)) & 127];
                for (int k = 0; k < 8; k++)
                    sumi += iq_grid_byte(g, k) * q8[k] * sign_of(signs, k);
            }
            bsum += sumi * (int32_t)(2 * (aux >> 28) + 1);
        }
        sumf += d * (float)bsum;
    }
    *s = 0.125f * sumf;
}

/* ---------------------------------------------------------------- IQ2_XS */

void ref_iq2_xs_to_float(const void *x, float *y, int64_t n)
{
    const struct block_iq2_xs *b = x;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = fp16_to_fp32(b[i].d);
        for (int j = 0; j < QK_K / 32; j++) {
            const float db[2] = {d * (0.5f + (float)(b[i].scales[j] & 15)) * 0.25f,
                                 d * (0.5f + (float)(b[i].scales[j] >> 4)) * 0.25f};
            for (int l = 0; l < 4; l++) {
                const uint16_t q    = b[i].qs[4 * j + l];
                const uint64_t g    = iq2xs_grid[q & 511];
                const uint8_t signs = iq_ksigns[q >> 9];
                for (int k = 0; k < 8; k++)
                    *y++ = db[l / 2] * (float)iq_grid_byte(g, k) * (float)sign_of(signs, k);
            }
        }
    }
}

void ref_vec_dot_iq2_xs_q8_k(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_iq2_xs *x = w;
    const struct block_q8_K *yb  = a;
    float sumf                   = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d    = fp16_to_fp32(x[i].d) * yb[i].d;
        const int8_t *q8 = yb[i].qs;
        int32_t bsum     = 0;
        for (int j = 0; j < QK_K / 32; j++) {
            int32_t sumi[2] = {0, 0};
            for (int l = 0; l < 4; l++, q8 += 8) {
                const uint16_t q    = x[i].qs[4 * j + l];
                const uint64_t g    = iq2xs_grid[q & 511];
                const uint8_t signs = iq_ksigns[q >> 9];
                for (int k = 0; k < 8; k++)
                    sumi[l / 2] += iq_grid_byte(g, k) * q8[k] * sign_of(signs, k);
            }
            bsum += sumi[0] * (2 * (x[i].scales[j] & 15) + 1);
            bsum += sumi[1] * (2 * (x[i].scales[j] >> 4) + 1);
        }
        sumf += d * (float)bsum;
    }
    *s = 0.125f * sumf;
}

/* ---------------------------------------------------------------- IQ2_S */

static inline int iq2_s_index(const struct block_iq2_s *b, int j, int l)
{
    return b->qs[4 * j + l] | ((b->qh[j] << (8 - 2 * l)) & 0x300);
}

void ref_iq2_s_to_float(const void *x, float *y, int64_t n)
{
    const struct block_iq2_s *b = x;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = fp16_to_fp32(b[i].d);
        for (int j = 0; j < QK_K / 32; j++) {
            const float db[2] = {d * (0.5f + (float)(b[i].scales[j] & 15)) * 0.25f,
                                 d * (0.5f + (float)(b[i].scales[j] >> 4)) * 0.25f};
            for (int l = 0; l < 4; l++) {
                const uint64_t g    = iq2s_grid[iq2_s_index(&b[i], j, l)];
                const uint8_t signs = b[i].qs[QK_K / 8 + 4 * j + l];
                for (int k = 0; k < 8; k++)
                    *y++ = db[l / 2] * (float)iq_grid_byte(g, k) * (float)sign_of(signs, k);
            }
        }
    }
}

void ref_vec_dot_iq2_s_q8_k(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_iq2_s *x = w;
    const struct block_q8_K *yb = a;
    float sumf                  = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d    = fp16_to_fp32(x[i].d) * yb[i].d;
        const int8_t *q8 = yb[i].qs;
        int bsum         = 0;
        for (int j = 0; j < QK_K / 32; j++) {
            int sumi[2] = {0, 0};
            for (int l = 0; l < 4; l++, q8 += 8) {
                const uint64_t g    = iq2s_grid[iq2_s_index(&x[i], j, l)];
                const uint8_t signs = x[i].qs[QK_K / 8 + 4 * j + l];
                for (int k = 0; k < 8; k++)
                    sumi[l / 2] += q8[k] * iq_grid_byte(g, k) * sign_of(signs, k);
            }
            bsum += (1 + 2 * (x[i].scales[j] & 15)) * sumi[0] +
                    (1 + 2 * (x[i].scales[j] >> 4)) * sumi[1];
        }
        sumf += d * (float)bsum;
    }
    *s = 0.125f * sumf;
}

/* ---------------------------------------------------------------- IQ3_XXS */

void ref_iq3_xxs_to_float(const void *x, float *y, int64_t n)
{
    const struct block_iq3_xxs *b = x;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d     = fp16_to_fp32(b[i].d);
        const uint8_t *qs = b[i].qs;
        for (int j = 0; j < QK_K / 32; j++, qs += 8) {
            const uint32_t aux = le32(b[i].qs + QK_K / 4 + 4 * j);
            const float db     = d * (0.5f + (float)(aux >> 28)) * 0.5f;
            for (int l = 0; l < 4; l++, y += 8) {
                const uint8_t signs = iq_ksigns[(aux >> (7 * l)) & 127];
                const uint32_t g1 = iq3xxs_grid[qs[2 * l]], g2 = iq3xxs_grid[qs[2 * l + 1]];
                for (int k = 0; k < 4; k++) {
                    y[k]     = db * (float)iq_grid_byte(g1, k) * (float)sign_of(signs, k);
                    y[k + 4] = db * (float)iq_grid_byte(g2, k) * (float)sign_of(signs, k + 4);
                }
            }
        }
    }
}

void ref_vec_dot_iq3_xxs_q8_k(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_iq3_xxs *x = w;
    const struct block_q8_K *yb   = a;
    float sumf                    = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d     = fp16_to_fp32(x[i].d) * yb[i].d;
        const uint8_t *q3 = x[i].qs;
        const int8_t *q8  = yb[i].qs;
        int32_t bsum      = 0;
        for (int j = 0; j < QK_K / 32; j++, q3 += 8) {
            const uint32_t aux = le32(x[i].qs + QK_K / 4 + 4 * j);
            int32_t sumi       = 0;
            for (int l = 0; l < 4; l++, q8 += 8) {
                const uint32_t g1 = iq3xxs_grid[q3[2 * l]], g2 = iq3xxs_grid[q3[2 * l + 1]];
                const uint8_t signs = iq_ksigns[(aux >> (7 * l)) & 127];
                for (int k = 0; k < 4; k++) {
                    sumi += iq_grid_byte(g1, k) * q8[k] * sign_of(signs, k);
                    sumi += iq_grid_byte(g2, k) * q8[k + 4] * sign_of(signs, k + 4);
                }
            }
            bsum += sumi * (int32_t)(2 * (aux >> 28) + 1);
        }
        sumf += d * (float)bsum;
    }
    *s = 0.25f * sumf;
}

/* ---------------------------------------------------------------- IQ3_S */

/* Grid entries of group l of sub-block j (two per group of 8). */
static inline void iq3_s_pair(const struct block_iq3_s *b, int j, int l, uint32_t *g1, uint32_t *g2)
{
    const uint8_t *qs = b->qs + 8 * j;
    *g1               = iq3s_grid[qs[2 * l] | ((b->qh[j] << (8 - 2 * l)) & 256)];
    *g2               = iq3s_grid[qs[2 * l + 1] | ((b->qh[j] << (7 - 2 * l)) & 256)];
}

void ref_iq3_s_to_float(const void *x, float *y, int64_t n)
{
    const struct block_iq3_s *b = x;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = fp16_to_fp32(b[i].d);
        for (int j = 0; j < QK_K / 32; j++) {
            const int sc   = (b[i].scales[j / 2] >> (4 * (j % 2))) & 15;
            const float db = d * (float)(1 + 2 * sc);
            for (int l = 0; l < 4; l++, y += 8) {
                uint32_t g1, g2;
                iq3_s_pair(&b[i], j, l, &g1, &g2);
                const uint8_t signs = b[i].signs[4 * j + l];
                for (int k = 0; k < 4; k++) {
                    y[k]     = db * (float)iq_grid_byte(g1, k) * (float)sign_of(signs, k);
                    y[k + 4] = db * (float)iq_grid_byte(g2, k) * (float)sign_of(signs, k + 4);
                }
            }
        }
    }
}

void ref_vec_dot_iq3_s_q8_k(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_iq3_s *x = w;
    const struct block_q8_K *yb = a;
    float sumf                  = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d    = fp16_to_fp32(x[i].d) * yb[i].d;
        const int8_t *q8 = yb[i].qs;
        int32_t bsum     = 0;
        for (int j = 0; j < QK_K / 32; j++) {
            int32_t sumi = 0;
            for (int l = 0; l < 4; l++, q8 += 8) {
                uint32_t g1, g2;
                iq3_s_pair(&x[i], j, l, &g1, &g2);
                const uint8_t signs = x[i].signs[4 * j + l];
                for (int k = 0; k < 4; k++) {
                    sumi += iq_grid_byte(g1, k) * q8[k] * sign_of(signs, k);
                    sumi += iq_grid_byte(g2, k) * q8[k + 4] * sign_of(signs, k + 4);
                }
            }
            bsum += sumi * (int32_t)(2 * ((x[i].scales[j / 2] >> (4 * (j % 2))) & 15) + 1);
        }
        sumf += d * (float)bsum;
    }
    *s = sumf;
}

/* ---------------------------------------------------------------- IQ1_S, IQ1_M */

#define IQ1_DELTA 0.125f /* the grid's shift, ggml's IQ1S_DELTA and IQ1M_DELTA */

void ref_iq1_s_to_float(const void *x, float *y, int64_t n)
{
    const struct block_iq1_s *b = x;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = fp16_to_fp32(b[i].d);
        for (int j = 0; j < QK_K / 32; j++) {
            const uint16_t qh = b[i].qh[j];
            const float dl    = d * (float)(2 * ((qh >> 12) & 7) + 1);
            const float delta = qh & 0x8000 ? -IQ1_DELTA : IQ1_DELTA;
            for (int l = 0; l < 4; l++) {
                const uint64_t g = iq1s_grid[b[i].qs[4 * j + l] | (((qh >> (3 * l)) & 7) << 8)];
                for (int k = 0; k < 8; k++)
                    *y++ = dl * ((float)(int8_t)iq_grid_byte(g, k) + delta);
            }
        }
    }
}

void ref_vec_dot_iq1_s_q8_k(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_iq1_s *x = w;
    const struct block_q8_K *yb = a;
    float sumf                  = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const int8_t *q8 = yb[i].qs;
        int sumi = 0, sumi1 = 0;
        for (int j = 0; j < QK_K / 32; j++) {
            const uint16_t qh = x[i].qh[j];
            const int ls      = 2 * ((qh >> 12) & 7) + 1;
            const int delta   = qh & 0x8000 ? -1 : 1;
            int lsum          = 0;
            for (int l = 0; l < 4; l++, q8 += 8) {
                const uint64_t g = iq1s_grid[x[i].qs[4 * j + l] | (((qh >> (3 * l)) & 7) << 8)];
                for (int k = 0; k < 8; k++)
                    lsum += q8[k] * (int8_t)iq_grid_byte(g, k);
            }
            sumi += ls * lsum;
            sumi1 += ls * delta * (yb[i].bsums[2 * j] + yb[i].bsums[2 * j + 1]);
        }
        sumf += fp16_to_fp32(x[i].d) * yb[i].d * ((float)sumi + IQ1_DELTA * (float)sumi1);
    }
    *s = sumf;
}

/* IQ1_M's fp16 d: the top nibbles of its four scale words, word 0's lowest. */
static inline float iq1_m_d(const struct block_iq1_m *b)
{
    const uint8_t *sc = b->scales;
    return fp16_to_fp32((uint16_t)((le16(sc) >> 12) | ((le16(sc + 2) >> 8) & 0x00F0) |
                                   ((le16(sc + 4) >> 4) & 0x0F00) | (le16(sc + 6) & 0xF000)));
}

/* Group l of sub-block j: its grid index and whether its shift is negative. */
static inline int iq1_m_index(const struct block_iq1_m *b, int j, int l, int *neg)
{
    const int nib = (b->qh[2 * j + l / 2] >> (4 * (l % 2))) & 15;
    *neg          = nib & 8;
    return b->qs[4 * j + l] | (nib & 7) << 8;
}

/* The 3-bit scale of half h (groups 2h, 2h+1) of sub-block j, as 2s + 1. */
static inline int iq1_m_scale(const struct block_iq1_m *b, int j, int h)
{
    return 2 * ((le16(b->scales + 2 * (j / 2)) >> (6 * (j % 2) + 3 * h)) & 7) + 1;
}

void ref_iq1_m_to_float(const void *x, float *y, int64_t n)
{
    const struct block_iq1_m *b = x;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = iq1_m_d(&b[i]);
        for (int j = 0; j < QK_K / 32; j++) {
            const float dl[2] = {d * (float)iq1_m_scale(&b[i], j, 0),
                                 d * (float)iq1_m_scale(&b[i], j, 1)};
            for (int l = 0; l < 4; l++) {
                int neg;
                const uint64_t g  = iq1s_grid[iq1_m_index(&b[i], j, l, &neg)];
                const float delta = neg ? -IQ1_DELTA : IQ1_DELTA;
                for (int k = 0; k < 8; k++)
                    *y++ = dl[l / 2] * ((float)(int8_t)iq_grid_byte(g, k) + delta);
            }
        }
    }
}

void ref_vec_dot_iq1_m_q8_k(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_iq1_m *x = w;
    const struct block_q8_K *yb = a;
    float sumf                  = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const int8_t *q8 = yb[i].qs;
        int sumi1 = 0, sumi2 = 0;
        for (int j = 0; j < QK_K / 32; j++) {
            int sum1[2] = {0, 0}, sum2[2] = {0, 0};
            for (int l = 0; l < 4; l++, q8 += 8) {
                int neg;
                const uint64_t g = iq1s_grid[iq1_m_index(&x[i], j, l, &neg)];
                int lsum1 = 0, lsum2 = 0;
                for (int k = 0; k < 8; k++) {
                    lsum1 += q8[k] * (int8_t)iq_grid_byte(g, k);
                    lsum2 += q8[k];
                }
                sum1[l / 2] += lsum1;
                sum2[l / 2] += neg ? -lsum2 : lsum2;
            }
            const int ls1 = iq1_m_scale(&x[i], j, 0), ls2 = iq1_m_scale(&x[i], j, 1);
            sumi1 += sum1[0] * ls1 + sum1[1] * ls2;
            sumi2 += sum2[0] * ls1 + sum2[1] * ls2;
        }
        sumf += iq1_m_d(&x[i]) * yb[i].d * ((float)sumi1 + IQ1_DELTA * (float)sumi2);
    }
    *s = sumf;
}
