/*
 * quants.c: the weight quantizers (see quants.h). Each follows ggml's
 * reference algorithm step for step, including the order of every float
 * operation: llama-quantize's output is the specification, and a quantizer
 * that is "equally good" but rounds one scale differently makes different
 * files. Hence no fused multiply-add (contraction is off below) and no
 * reassociation of sums.
 *
 * Layouts are util/dtype_blocks.h's, which the kernels read; the
 * scale searches are ggml's make_qx_quants (Q6_K), make_q3_quants (Q3_K),
 * make_qkx2_quants (Q2_K, Q4_K, Q5_K) and the IQ4 non-linear search.
 */
#include "quant/quants.h"

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/ref.h"
#include "util/dtype_blocks.h"
#include "util/fp16.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* Groups whose largest magnitude is below this quantize to zeros (ggml's GROUP_MAX_EPS). */
#define GROUP_EPS 1e-15f

#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

/* ---------------------------------------------------------------- helpers --- */

/*
 * Round to nearest, ties to even, for |v| < 2^22: adding 1.5 * 2^23 leaves
 * the rounded integer in the low mantissa bits. (ggml's nearest_int; lrintf
 * agrees but is slower.)
 */
static inline int nearest_int(float v)
{
    float t = v + 12582912.f;
    int32_t i;
    memcpy(&i, &t, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

/*
 * Symmetric quantization of n values to L[i] in 0..2*nmax-1 (value
 * (L - nmax) * scale), searching 19 scales around -nmax/max for the one
 * maximizing the weighted fit. Weights: qw if given, else by rmse_type
 * (1: x^2, 2: 1, 3: |x|, other: sqrt|x|). rmse_type 0 rounds once; a
 * negative type returns after the first fit. Returns the scale.
 * (ggml's make_qx_quants)
 */
static float make_qx(int n, int nmax, const float *x, int8_t *L, int rmse_type, const float *qw)
{
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max  = x[i];
        }
    }
    if (amax < GROUP_EPS) {
        for (int i = 0; i < n; i++)
            L[i] = 0;
        return 0.f;
    }
    float iscale = -nmax / max;
    if (rmse_type == 0) {
        for (int i = 0; i < n; i++) {
            int l = nearest_int(iscale * x[i]);
            L[i]  = (int8_t)(nmax + MAX(-nmax, MIN(nmax - 1, l)));
        }
        return 1 / iscale;
    }
    bool early = rmse_type < 0;
    if (early)
        rmse_type = -rmse_type;
#define QX_WEIGHT(i)                                                                               \
    (qw               ? qw[i]                                                                      \
     : rmse_type == 1 ? x[i] * x[i]                                                                \
     : rmse_type == 2 ? 1                                                                          \
     : rmse_type == 3 ? fabsf(x[i])                                                                \
                      : sqrtf(fabsf(x[i])))
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l   = nearest_int(iscale * x[i]);
        l       = MAX(-nmax, MIN(nmax - 1, l));
        L[i]    = (int8_t)(l + nmax);
        float w = QX_WEIGHT(i);
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    if (early)
        return suml2 > 0 ? 0.5f * (scale + 1 / iscale) : 1 / iscale;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0)
            continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            int l   = nearest_int(iscale * x[i]);
            l       = MAX(-nmax, MIN(nmax - 1, l));
            float w = QX_WEIGHT(i);
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++) {
                int l = nearest_int(iscale * x[i]);
                L[i]  = (int8_t)(nmax + MAX(-nmax, MIN(nmax - 1, l)));
            }
            scale = sumlx / suml2;
            best  = scale * sumlx;
        }
    }
#undef QX_WEIGHT
    return scale;
}

/*
 * Symmetric quantization for Q3_K: L[i] in 0..2*nmax-1 after rounding at
 * -nmax/max, then (do_rmse) up to 5 passes moving single values to the level
 * that improves the x^2-weighted fit. Returns the scale. (ggml's make_q3_quants)
 */
static float make_q3(int n, int nmax, const float *x, int8_t *L, bool do_rmse)
{
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max  = x[i];
        }
    }
    if (amax < GROUP_EPS) {
        for (int i = 0; i < n; i++)
            L[i] = 0;
        return 0.f;
    }
    float iscale = -nmax / max;
    if (do_rmse) {
        float sumlx = 0, suml2 = 0;
        for (int i = 0; i < n; i++) {
            int l   = nearest_int(iscale * x[i]);
            l       = MAX(-nmax, MIN(nmax - 1, l));
            L[i]    = (int8_t)l;
            float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        for (int pass = 0; pass < 5; pass++) {
            int changed = 0;
            for (int i = 0; i < n; i++) {
                float w   = x[i] * x[i];
                float slx = sumlx - w * x[i] * L[i];
                if (slx > 0) {
                    float sl2 = suml2 - w * L[i] * L[i];
                    int nl    = nearest_int(x[i] * sl2 / slx);
                    nl        = MAX(-nmax, MIN(nmax - 1, nl));
                    if (nl != L[i]) {
                        slx += w * x[i] * nl;
                        sl2 += w * nl * nl;
                        if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                            L[i]  = (int8_t)nl;
                            sumlx = slx;
                            suml2 = sl2;
                            changed++;
                        }
                    }
                }
            }
            if (!changed)
                break;
        }
        for (int i = 0; i < n; i++)
            L[i] = (int8_t)(L[i] + nmax);
        return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
    }
    for (int i = 0; i < n; i++) {
        int l = nearest_int(iscale * x[i]);
        l     = MAX(-nmax, MIN(nmax - 1, l));
        L[i]  = (int8_t)(l + nmax);
    }
    return 1 / iscale;
}

/*
 * Asymmetric quantization of n <= 32 values to L[i] in 0..nmax, value
 * scale * L - *neg_min: starts from the min..max grid, then tries nstep+1
 * grids of (nmax + rmin + rdelta * is) steps, each fitted by weighted least
 * squares for scale and min (min clamped to <= 0), keeping the one with the
 * smallest weighted error (absolute if use_mad, else squared). Returns the
 * scale and stores -min in *neg_min. (ggml's make_qkx2_quants)
 */
static float make_qkx2(int n, int nmax, const float *x, const float *weights, uint8_t *L,
                       float *neg_min, float rmin, float rdelta, int nstep, bool use_mad)
{
    uint8_t Laux[32];
    float min = x[0], max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min)
            min = x[i];
        if (x[i] > max)
            max = x[i];
        float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0)
        min = 0;
    if (max == min) {
        for (int i = 0; i < n; i++)
            L[i] = 0;
        *neg_min = -min;
        return 0.f;
    }
    float iscale     = nmax / (max - min);
    float scale      = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; i++) {
        int l      = nearest_int(iscale * (x[i] - min));
        L[i]       = (uint8_t)MAX(0, MIN(nmax, l));
        float diff = scale * L[i] + min - x[i];
        diff       = use_mad ? fabsf(diff) : diff * diff;
        float w    = weights[i];
        best_error += w * diff;
    }
    if (nstep < 1) {
        *neg_min = -min;
        return scale;
    }
    for (int is = 0; is <= nstep; is++) {
        iscale      = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l   = nearest_int(iscale * (x[i] - min));
            l       = MAX(0, MIN(nmax, l));
            Laux[i] = (uint8_t)l;
            float w = weights[i];
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min   = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min   = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; i++) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                diff       = use_mad ? fabsf(diff) : diff * diff;
                float w    = weights[i];
                cur_error += w * diff;
            }
            if (cur_error < best_error) {
                memcpy(L, Laux, (size_t)n);
                best_error = cur_error;
                scale      = this_scale;
                min        = this_min;
            }
        }
    }
    *neg_min = -min;
    return scale;
}

/*
 * (int8_t)v / (uint8_t)v for the level computations of Q4_1/Q5_0/Q5_1. ggml
 * casts directly, which C leaves undefined when v is out of range or NaN
 * (a block of subnormals makes 1/d infinite); x86 converts to 32 bits and
 * keeps the low byte, 0 for NaN and overflow. Doing that explicitly keeps
 * the in-range results identical and the rest defined and the same as
 * llama.cpp's x86 builds.
 */
static inline int32_t trunc_i32(float v)
{
    return v > -2147483648.0f && v < 2147483648.0f ? (int32_t)v : 0;
}
static inline int8_t trunc_i8(float v)
{
    return (int8_t)(uint8_t)(uint32_t)trunc_i32(v);
}
static inline uint8_t trunc_u8(float v)
{
    return (uint8_t)(uint32_t)trunc_i32(v);
}

/* Scale and min j (0..7) of a Q4_K/Q5_K 12-byte scale block (ggml's get_scale_min_k4). */
static inline void k4_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m  = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m  = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* Index of the code book value nearest x (the lower one on a tie), by bisection. */
static inline int iq4_index(float x)
{
    const int n = 16;
    if (x <= iq4nl_values[0])
        return 0;
    if (x >= iq4nl_values[n - 1])
        return n - 1;
    int lo = 0, hi = n - 1;
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (x < iq4nl_values[mid])
            hi = mid;
        else
            lo = mid;
    }
    return x - iq4nl_values[hi - 1] < iq4nl_values[hi] - x ? hi - 1 : hi;
}

/* ------------------------------------------------------- 32-element types --- */

static void q4_1_row(const float *x, struct block_q4_1 *y, int64_t n)
{
    for (int64_t b = 0; b < n / QK4_1; b++, x += QK4_1) {
        float lo = FLT_MAX, hi = -FLT_MAX;
        for (int j = 0; j < QK4_1; j++) {
            if (x[j] < lo)
                lo = x[j];
            if (x[j] > hi)
                hi = x[j];
        }
        const float d  = (hi - lo) / 15;
        const float id = d ? 1.0f / d : 0.0f;
        y[b].d         = fp32_to_fp16(d);
        y[b].m         = fp32_to_fp16(lo);
        for (int j = 0; j < QK4_1 / 2; j++) {
            const float x0 = (x[j] - lo) * id, x1 = (x[j + QK4_1 / 2] - lo) * id;
            const uint8_t q0 = (uint8_t)MIN(15, trunc_i8(x0 + 0.5f));
            const uint8_t q1 = (uint8_t)MIN(15, trunc_i8(x1 + 0.5f));
            y[b].qs[j]       = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

static void q5_0_row(const float *x, struct block_q5_0 *y, int64_t n)
{
    for (int64_t b = 0; b < n / QK5_0; b++, x += QK5_0) {
        float amax = 0, max = 0;
        for (int j = 0; j < QK5_0; j++) {
            if (amax < fabsf(x[j])) {
                amax = fabsf(x[j]);
                max  = x[j];
            }
        }
        const float d  = max / -16;
        const float id = d ? 1.0f / d : 0.0f;
        y[b].d         = fp32_to_fp16(d);
        uint32_t qh    = 0;
        for (int j = 0; j < QK5_0 / 2; j++) {
            const float x0 = x[j] * id, x1 = x[j + QK5_0 / 2] * id;
            const uint8_t q0 = (uint8_t)MIN(31, trunc_i8(x0 + 16.5f));
            const uint8_t q1 = (uint8_t)MIN(31, trunc_i8(x1 + 16.5f));
            y[b].qs[j]       = (uint8_t)((q0 & 0xF) | ((q1 & 0xF) << 4));
            qh |= (uint32_t)(q0 >> 4) << j;
            qh |= (uint32_t)(q1 >> 4) << (j + QK5_0 / 2);
        }
        memcpy(y[b].qh, &qh, 4);
    }
}

static void q5_1_row(const float *x, struct block_q5_1 *y, int64_t n)
{
    for (int64_t b = 0; b < n / QK5_1; b++, x += QK5_1) {
        float lo = FLT_MAX, hi = -FLT_MAX;
        for (int j = 0; j < QK5_1; j++) {
            if (x[j] < lo)
                lo = x[j];
            if (x[j] > hi)
                hi = x[j];
        }
        const float d  = (hi - lo) / 31;
        const float id = d ? 1.0f / d : 0.0f;
        y[b].d         = fp32_to_fp16(d);
        y[b].m         = fp32_to_fp16(lo);
        uint32_t qh    = 0;
        for (int j = 0; j < QK5_1 / 2; j++) {
            const float x0 = (x[j] - lo) * id, x1 = (x[j + QK5_1 / 2] - lo) * id;
            const uint8_t q0 = trunc_u8(x0 + 0.5f), q1 = trunc_u8(x1 + 0.5f);
            y[b].qs[j] = (uint8_t)((q0 & 0xF) | ((q1 & 0xF) << 4));
            qh |= (uint32_t)((q0 & 0x10u) >> 4) << j;
            qh |= (uint32_t)((q1 & 0x10u) >> 4) << (j + QK5_1 / 2);
        }
        memcpy(y[b].qh, &qh, 4);
    }
}

/* ------------------------------------------------------------------ K-quants --- */

/* Packs 256 2-bit levels: per half of 128, byte l holds elements l, l+32, l+64, l+96. */
static void pack_2bit(const uint8_t *L, uint8_t *qs)
{
    for (int h = 0; h < QK_K; h += 128)
        for (int l = 0; l < 32; l++)
            qs[h / 4 + l] = (uint8_t)(L[h + l] | (L[h + l + 32] << 2) | (L[h + l + 64] << 4) |
                                      (L[h + l + 96] << 6));
}

static void q2_k_row(const float *x, struct block_q2_K *y, int64_t n)
{
    uint8_t L[QK_K];
    float weights[16], mins[QK_K / 16], scales[QK_K / 16];
    const float q4scale = 15.f;
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < QK_K / 16; j++) {
            for (int l = 0; l < 16; l++)
                weights[l] = fabsf(x[16 * j + l]);
            scales[j] =
                make_qkx2(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], -0.5f, 0.1f, 15, true);
            if (scales[j] > max_scale)
                max_scale = scales[j];
            if (mins[j] > max_min)
                max_min = mins[j];
        }
        if (max_scale > 0) {
            float iscale = q4scale / max_scale;
            for (int j = 0; j < QK_K / 16; j++)
                y[b].scales[j] = (uint8_t)nearest_int(iscale * scales[j]);
            y[b].d = fp32_to_fp16(max_scale / q4scale);
        } else {
            for (int j = 0; j < QK_K / 16; j++)
                y[b].scales[j] = 0;
            y[b].d = fp32_to_fp16(0.f);
        }
        if (max_min > 0) {
            float iscale = q4scale / max_min;
            for (int j = 0; j < QK_K / 16; j++)
                y[b].scales[j] |= (uint8_t)((unsigned)nearest_int(iscale * mins[j]) << 4);
            y[b].dmin = fp32_to_fp16(max_min / q4scale);
        } else {
            y[b].dmin = fp32_to_fp16(0.f);
        }
        /* Requantize against the rounded scales the file will hold. */
        for (int j = 0; j < QK_K / 16; j++) {
            const float d = fp16_to_fp32(y[b].d) * (y[b].scales[j] & 0xF);
            if (!d)
                continue;
            const float dm = fp16_to_fp32(y[b].dmin) * (y[b].scales[j] >> 4);
            for (int i = 0; i < 16; i++) {
                int l         = nearest_int((x[16 * j + i] + dm) / d);
                L[16 * j + i] = (uint8_t)MAX(0, MIN(3, l));
            }
        }
        pack_2bit(L, y[b].qs);
    }
}

static void q3_k_row(const float *x, struct block_q3_K *y, int64_t n)
{
    int8_t L[QK_K];
    float scales[QK_K / 16];
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        float max_scale = 0, amax = 0;
        for (int j = 0; j < QK_K / 16; j++) {
            scales[j]   = make_q3(16, 4, x + 16 * j, L + 16 * j, true);
            float scale = fabsf(scales[j]);
            if (scale > amax) {
                amax      = scale;
                max_scale = scales[j];
            }
        }
        memset(y[b].scales, 0, 12);
        if (max_scale) {
            float iscale = -32.f / max_scale;
            for (int j = 0; j < QK_K / 16; j++) {
                int8_t l = (int8_t)nearest_int(iscale * scales[j]);
                l        = (int8_t)(MAX(-32, MIN(31, l)) + 32);
                if (j < 8)
                    y[b].scales[j] = l & 0xF;
                else
                    y[b].scales[j - 8] |= (uint8_t)((l & 0xF) << 4);
                l >>= 4;
                y[b].scales[j % 4 + 8] |= (uint8_t)(l << (2 * (j / 4)));
            }
            y[b].d = fp32_to_fp16(1 / iscale);
        } else {
            y[b].d = fp32_to_fp16(0.f);
        }
        for (int j = 0; j < QK_K / 16; j++) {
            int sc  = j < 8 ? y[b].scales[j] & 0xF : y[b].scales[j - 8] >> 4;
            sc      = (sc | (((y[b].scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
            float d = fp16_to_fp32(y[b].d) * sc;
            if (!d)
                continue;
            for (int i = 0; i < 16; i++) {
                int l         = nearest_int(x[16 * j + i] / d);
                L[16 * j + i] = (int8_t)(MAX(-4, MIN(3, l)) + 4);
            }
        }
        /* High bits: element j's goes to bit j/32 of hmask[j%32]. */
        memset(y[b].hmask, 0, QK_K / 8);
        for (int j = 0; j < QK_K; j++) {
            if (L[j] > 3) {
                y[b].hmask[j % 32] |= (uint8_t)(1u << (j / 32));
                L[j] = (int8_t)(L[j] - 4);
            }
        }
        pack_2bit((const uint8_t *)L, y[b].qs);
    }
}

/*
 * The sub-block scale search shared by Q4_K (nmax 15) and Q5_K (nmax 31):
 * per 32 values, weights rms + |x|; then 6-bit scales and mins against the
 * largest of each, packed into 12 bytes; then the levels L recomputed
 * against the rounded scales. Returns d and dmin in *d, *dmin (fp16 bits).
 */
static void k4_scales(const float *x, int nmax, float rmin, int nstep, uint8_t *L,
                      uint8_t packed[12], uint16_t *d16, uint16_t *dmin16)
{
    float weights[32], mins[QK_K / 32], scales[QK_K / 32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < QK_K / 32; j++) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++)
            sum_x2 += x[32 * j + l] * x[32 * j + l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++)
            weights[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] = make_qkx2(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], rmin, 0.1f,
                              nstep, false);
        if (scales[j] > max_scale)
            max_scale = scales[j];
        if (mins[j] > max_min)
            max_min = mins[j];
    }
    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    float inv_min   = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < QK_K / 32; j++) {
        uint8_t ls = (uint8_t)nearest_int(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)nearest_int(inv_min * mins[j]);
        ls         = MIN(63, ls);
        lm         = MIN(63, lm);
        if (j < 4) {
            packed[j]     = ls;
            packed[j + 4] = lm;
        } else {
            packed[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
            packed[j - 4] |= (uint8_t)((ls >> 4) << 6);
            packed[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    *d16    = fp32_to_fp16(max_scale / 63.f);
    *dmin16 = fp32_to_fp16(max_min / 63.f);
    for (int j = 0; j < QK_K / 32; j++) {
        uint8_t sc, m;
        k4_scale_min(j, packed, &sc, &m);
        const float d = fp16_to_fp32(*d16) * sc;
        if (!d)
            continue;
        const float dm = fp16_to_fp32(*dmin16) * m;
        for (int i = 0; i < 32; i++) {
            int l         = nearest_int((x[32 * j + i] + dm) / d);
            L[32 * j + i] = (uint8_t)MAX(0, MIN(nmax, l));
        }
    }
}

static void q4_k_row(const float *x, struct block_q4_K *y, int64_t n)
{
    uint8_t L[QK_K];
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        k4_scales(x, 15, -1.f, 20, L, y[b].scales, &y[b].d, &y[b].dmin);
        /* 4 groups of 64: sub-block 2g in the low nibbles, 2g+1 in the high. */
        for (int g = 0; g < 4; g++)
            for (int l = 0; l < 32; l++)
                y[b].qs[32 * g + l] = (uint8_t)(L[64 * g + l] | (L[64 * g + l + 32] << 4));
    }
}

static void q5_k_row(const float *x, struct block_q5_K *y, int64_t n)
{
    uint8_t L[QK_K];
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        k4_scales(x, 31, -0.5f, 15, L, y[b].scales, &y[b].d, &y[b].dmin);
        memset(y[b].qh, 0, QK_K / 8);
        for (int g = 0; g < 4; g++) {
            for (int l = 0; l < 32; l++) {
                int l1 = L[64 * g + l], l2 = L[64 * g + l + 32];
                if (l1 > 15) {
                    l1 -= 16;
                    y[b].qh[l] |= (uint8_t)(1u << (2 * g));
                }
                if (l2 > 15) {
                    l2 -= 16;
                    y[b].qh[l] |= (uint8_t)(2u << (2 * g));
                }
                y[b].qs[32 * g + l] = (uint8_t)(l1 | (l2 << 4));
            }
        }
    }
}

static void q6_k_row(const float *x, struct block_q6_K *y, int64_t n)
{
    int8_t L[QK_K];
    float scales[QK_K / 16];
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        float max_scale = 0, max_abs_scale = 0;
        for (int j = 0; j < QK_K / 16; j++) {
            const float scale     = make_qx(16, 32, x + 16 * j, L + 16 * j, 1, NULL);
            scales[j]             = scale;
            const float abs_scale = fabsf(scale);
            if (abs_scale > max_abs_scale) {
                max_abs_scale = abs_scale;
                max_scale     = scale;
            }
        }
        if (max_abs_scale < GROUP_EPS) {
            memset(&y[b], 0, sizeof y[b]);
            y[b].d = fp32_to_fp16(0.f);
            continue;
        }
        float iscale = -128.f / max_scale;
        y[b].d       = fp32_to_fp16(1 / iscale);
        for (int j = 0; j < QK_K / 16; j++)
            y[b].scales[j] = (int8_t)MIN(127, nearest_int(iscale * scales[j]));
        for (int j = 0; j < QK_K / 16; j++) {
            float d = fp16_to_fp32(y[b].d) * y[b].scales[j];
            if (!d)
                continue;
            for (int i = 0; i < 16; i++) {
                int l         = nearest_int(x[16 * j + i] / d);
                L[16 * j + i] = (int8_t)(MAX(-32, MIN(31, l)) + 32);
            }
        }
        /* Per half of 128: ql bytes l and l+32 hold elements l, l+64 and l+32, l+96 as
         * nibbles; qh byte l holds the top 2 bits of l, l+32, l+64, l+96. */
        for (int h = 0; h < 2; h++) {
            const int8_t *Lh = L + 128 * h;
            uint8_t *ql = y[b].ql + 64 * h, *qh = y[b].qh + 32 * h;
            for (int l = 0; l < 32; l++) {
                ql[l]      = (uint8_t)((Lh[l] & 0xF) | ((Lh[l + 64] & 0xF) << 4));
                ql[l + 32] = (uint8_t)((Lh[l + 32] & 0xF) | ((Lh[l + 96] & 0xF) << 4));
                qh[l]      = (uint8_t)((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) |
                                  ((Lh[l + 64] >> 4) << 4) | ((Lh[l + 96] >> 4) << 6));
            }
        }
    }
}

/* ---------------------------------------------------------------- TQ, MXFP4 --- */

/* The largest magnitude of n floats (ggml's amax loop). */
static float abs_max(const float *x, int n)
{
    float amax = 0.0f;
    for (int j = 0; j < n; j++)
        amax = MAX(amax, fabsf(x[j]));
    return amax;
}

/*
 * Packs k trits t[0..k) (0..2), the first most significant, then scaled to
 * TQ1_0's fixed-point fraction of 256 rounding up (ceil(q * 256 / 243)), so
 * multiplying by 3^i later brings trit i to the top.
 */
static uint8_t tq1_pack(const int *t, int k)
{
    uint8_t q = 0;
    for (int i = 0; i < k; i++)
        q = (uint8_t)(q * 3 + t[i]);
    for (int i = k; i < 5; i++)
        q = (uint8_t)(q * 3);
    return (uint8_t)(((uint16_t)q * 256 + (243 - 1)) / 243);
}

/* As quantize_row_tq1_0_ref: d = amax, trits lroundf(x / d) + 1. */
static void tq1_0_row(const float *x, struct block_tq1_0 *y, int64_t n)
{
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        const float d  = abs_max(x, QK_K);
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        int t[5];
        y[i].d = fp32_to_fp16(d);
        for (int m = 0; m < 32; m++) { /* elements 32k + m */
            for (int k = 0; k < 5; k++)
                t[k] = (int)lroundf(x[m + 32 * k] * id) + 1;
            y[i].qs[m] = tq1_pack(t, 5);
        }
        for (int m = 0; m < 16; m++) { /* elements 160 + 16k + m */
            for (int k = 0; k < 5; k++)
                t[k] = (int)lroundf(x[160 + m + 16 * k] * id) + 1;
            y[i].qs[32 + m] = tq1_pack(t, 5);
        }
        for (int m = 0; m < 4; m++) { /* elements 240 + 4k + m */
            for (int k = 0; k < 4; k++)
                t[k] = (int)lroundf(x[240 + m + 4 * k] * id) + 1;
            y[i].qh[m] = tq1_pack(t, 4);
        }
    }
}

/* As quantize_row_tq2_0_ref: d = amax, q = lroundf(x / d) + 1 in Q2_K's 2-bit planes. */
static void tq2_0_row(const float *x, struct block_tq2_0 *y, int64_t n)
{
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        const float d  = abs_max(x, QK_K);
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d         = fp32_to_fp16(d);
        for (int h = 0; h < 2; h++)
            for (int m = 0; m < 32; m++) {
                uint8_t q = 0;
                for (int k = 0; k < 4; k++) {
                    const int v = (int)lroundf(x[128 * h + 32 * k + m] * id) + 1;
                    q           = (uint8_t)(q + ((v & 3) << (2 * k)));
                }
                y[i].qs[32 * h + m] = q;
            }
    }
}

/* The index of the MXFP4 value nearest x / scale, the first on ties (ggml's best_index_mxfp4). */
static int mxfp4_nearest(float x, float scale)
{
    int best       = 0;
    float best_err = fabsf((float)mxfp4_values[0] * scale - x);
    for (int i = 1; i < 16; i++) {
        const float err = fabsf((float)mxfp4_values[i] * scale - x);
        if (err < best_err) {
            best     = i;
            best_err = err;
        }
    }
    return best;
}

/*
 * As quantize_row_mxfp4_ref: the exponent puts the block's largest
 * magnitude in the top value's octave (e = floor(log2 amax) - 2 + 127, 0 for
 * an all-zero block), each element then the nearest of the 16 values.
 */
static void mxfp4_row(const float *x, struct block_mxfp4 *y, int64_t n)
{
    for (int64_t i = 0; i < n / QK_MXFP4; i++, x += QK_MXFP4) {
        const float amax = abs_max(x, QK_MXFP4);
        const uint8_t e  = amax > 0.0f ? (uint8_t)(floorf(log2f(amax)) - 2 + 127) : 0;
        const float d    = fp32_from_bits(e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23);
        y[i].e           = e;
        for (int j = 0; j < QK_MXFP4 / 2; j++)
            y[i].qs[j] = (uint8_t)(mxfp4_nearest(x[j], d) | mxfp4_nearest(x[j + 16], d) << 4);
    }
}

/* ---------------------------------------------------------------- IQ4 --- */

/*
 * One IQ4 super-block of sb values in sub-blocks of 32 (sb 32: IQ4_NL, sb
 * 256: IQ4_XS), as llama-quantize does it without an importance matrix
 * (ggml's quantize_row_iq4_nl_impl with ntry 7 and weights x^2): per
 * sub-block the best scale among 15 candidates by weighted fit; for IQ4_XS
 * those scales become 6-bit multiples of one fp16 d and the indices are
 * chosen again against them.
 */
static void iq4_block(int sb, const float *x, uint16_t *dh, uint8_t *q4, uint16_t *scales_h,
                      uint8_t *scales_l)
{
    const int ntry = 7, nsub = sb / 32;
    uint8_t L[QK_K];
    float scales[QK_K / 32], weight[32];
    memset(q4, 0, (size_t)sb / 2);
    *dh             = fp32_to_fp16(0.f);
    float max_scale = 0, amax_scale = 0;
    for (int ib = 0; ib < nsub; ib++) {
        const float *xb = x + 32 * ib;
        uint8_t *Lb     = L + 32 * ib;
        for (int j = 0; j < 32; j++)
            weight[j] = xb[j] * xb[j];
        float amax = 0, max = 0;
        for (int j = 0; j < 32; j++) {
            float ax = fabsf(xb[j]);
            if (ax > amax) {
                amax = ax;
                max  = xb[j];
            }
        }
        if (amax < GROUP_EPS) {
            scales[ib] = 0;
            continue;
        }
        float d     = -max / iq4nl_values[0];
        float id    = 1 / d;
        float sumqx = 0, sumq2 = 0;
        for (int j = 0; j < 32; j++) {
            int l   = iq4_index(id * xb[j]);
            Lb[j]   = (uint8_t)l;
            float q = iq4nl_values[l];
            float w = weight[j];
            sumqx += w * q * xb[j];
            sumq2 += w * q * q;
        }
        d          = sumq2 > 0 ? sumqx / sumq2 : 0.f;
        float best = d * sumqx;
        for (int itry = -ntry; itry <= ntry; itry++) {
            id    = (itry + iq4nl_values[0]) / max;
            sumqx = sumq2 = 0;
            for (int j = 0; j < 32; j++) {
                float q = iq4nl_values[iq4_index(id * xb[j])];
                float w = weight[j];
                sumqx += w * q * xb[j];
                sumq2 += w * q * q;
            }
            if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
                d    = sumqx / sumq2;
                best = d * sumqx;
            }
        }
        scales[ib] = d;
        if (fabsf(d) > amax_scale) {
            amax_scale = fabsf(d);
            max_scale  = d;
        }
    }
    if (nsub > 1) {
        *scales_h = 0;
        float d   = -max_scale / 32;
        *dh       = fp32_to_fp16(d);
        float id  = d ? 1 / d : 0.f;
        for (int ib = 0; ib < nsub; ib++) {
            int l     = nearest_int(id * scales[ib]);
            l         = MAX(-32, MIN(31, l));
            float dl  = d * l;
            float idl = dl ? 1 / dl : 0.f;
            for (int j = 0; j < 32; j++)
                L[32 * ib + j] = (uint8_t)iq4_index(idl * x[32 * ib + j]);
            l += 32;
            if (ib % 2 == 0)
                scales_l[ib / 2] = (uint8_t)(l & 0xF);
            else
                scales_l[ib / 2] |= (uint8_t)((l & 0xF) << 4);
            *scales_h |= (uint16_t)((l >> 4) << (2 * (ib % 8)));
        }
    } else {
        *dh      = fp32_to_fp16(scales[0]);
        float id = scales[0] ? 1 / scales[0] : 0;
        for (int j = 0; j < sb; j++)
            L[j] = (uint8_t)iq4_index(id * x[j]);
    }
    for (int i = 0; i < sb / 32; i++)
        for (int j = 0; j < 16; j++)
            q4[16 * i + j] = (uint8_t)(L[32 * i + j] | (L[32 * i + 16 + j] << 4));
}

static void iq4_nl_row(const float *x, struct block_iq4_nl *y, int64_t n)
{
    for (int64_t b = 0; b < n / QK4_NL; b++)
        iq4_block(QK4_NL, x + QK4_NL * b, &y[b].d, y[b].qs, NULL, NULL);
}

static void iq4_xs_row(const float *x, struct block_iq4_xs *y, int64_t n)
{
    for (int64_t b = 0; b < n / QK_K; b++)
        iq4_block(QK_K, x + QK_K * b, &y[b].d, y[b].qs, &y[b].scales_h, y[b].scales_l);
}

/* ---------------------------------------------------------------- entry --- */

bool quant_supported(enum dtype t)
{
    switch (t) {
    case DTYPE_F32:
    case DTYPE_F16:
    case DTYPE_BF16:
    case DTYPE_Q4_0:
    case DTYPE_Q8_0:
    case DTYPE_Q4_1:
    case DTYPE_Q5_0:
    case DTYPE_Q5_1:
    case DTYPE_Q2_K:
    case DTYPE_Q3_K:
    case DTYPE_Q4_K:
    case DTYPE_Q5_K:
    case DTYPE_Q6_K:
    case DTYPE_IQ4_NL:
    case DTYPE_IQ4_XS:
    case DTYPE_TQ1_0:
    case DTYPE_TQ2_0:
    case DTYPE_MXFP4:
        return true;
    default:
        return false;
    }
}

bool quant_row(enum dtype t, const float *x, void *y, int64_t n)
{
    switch (t) {
    case DTYPE_F32:
    case DTYPE_F16:
    case DTYPE_BF16:
    case DTYPE_Q4_0:
        /* ggml's reference conversions, which the reference kernel table implements. */
        kernels_ref()->type[t].from_float(x, y, n);
        return true;
    case DTYPE_Q8_0:
        /* the table's Q8_0 from_float rounds activations as llama.cpp's x86 build does;
         * weights use ggml's reference rule, as llama-quantize writes them */
        ref_q8_0_from_float(x, y, n);
        return true;
    case DTYPE_Q4_1:
        q4_1_row(x, y, n);
        return true;
    case DTYPE_Q5_0:
        q5_0_row(x, y, n);
        return true;
    case DTYPE_Q5_1:
        q5_1_row(x, y, n);
        return true;
    case DTYPE_Q2_K:
        q2_k_row(x, y, n);
        return true;
    case DTYPE_Q3_K:
        q3_k_row(x, y, n);
        return true;
    case DTYPE_Q4_K:
        q4_k_row(x, y, n);
        return true;
    case DTYPE_Q5_K:
        q5_k_row(x, y, n);
        return true;
    case DTYPE_Q6_K:
        q6_k_row(x, y, n);
        return true;
    case DTYPE_IQ4_NL:
        iq4_nl_row(x, y, n);
        return true;
    case DTYPE_IQ4_XS:
        iq4_xs_row(x, y, n);
        return true;
    case DTYPE_TQ1_0:
        tq1_0_row(x, y, n);
        return true;
    case DTYPE_TQ2_0:
        tq2_0_row(x, y, n);
        return true;
    case DTYPE_MXFP4:
        mxfp4_row(x, y, n);
        return true;
    default:
        return false;
    }
}
