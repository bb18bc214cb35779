/*
 * attn_quant.c: attention over a K/V cache of mixed or quantized types
 * (kernels.h, attn_rows_quant). It is built of the kernel table's row
 * operations, so each ISA runs its own conversions, dot products and fused
 * adds, with the bits llama.cpp's per-key path gets from the same ggml
 * functions on that ISA.
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "kernels/kernels.h"

/* acc rounded to f16 and back, in place: what an f16 accumulator holds. */
static void round_f16(const struct kernels *k, float *acc, uint16_t *tmp, int32_t hd)
{
    k->f32_to_f16(acc, tmp, hd);
    k->type[DTYPE_F16].to_float(tmp, acc, hd);
}

void attn_rows_quant(const struct kernels *k, float *const *out, const float *const *q, int32_t nq,
                     int32_t hd, const struct attn_kv *kv, const int32_t *j0, const int32_t *j1,
                     float scale, float *scratch)
{
    const struct type_kernels *kt = &k->type[kv->kt], *vt = &k->type[kv->vt];
    const struct type_kernels *qt = &k->type[kt->vec_dot_type];
    const bool v16                = kv->vt == DTYPE_F16;
    /* per row its sum and its converted query (at most hd floats' bytes), then one value
     * row and an f16 row: 2 * ATTN_LANES + 2 rows of hd floats, within ATTN_SCRATCH */
    float *acc = scratch, *qbuf = acc + (size_t)ATTN_LANES * hd;
    float *vrow   = qbuf + (size_t)ATTN_LANES * hd;
    uint16_t *tmp = (uint16_t *)(vrow + hd);
    float M[ATTN_LANES], S[ATTN_LANES];
    int32_t lo = j0[0], hi = j1[0];
    for (int32_t r = 0; r < nq; r++) {
        qt->from_float(q[r], qbuf + (size_t)r * hd, hd);
        memset(acc + (size_t)r * hd, 0, (size_t)hd * sizeof *acc);
        M[r] = -INFINITY;
        S[r] = 0.0f;
        lo   = j0[r] < lo ? j0[r] : lo;
        hi   = j1[r] > hi ? j1[r] : hi;
    }
    /* key by key, each row in turn: a value row is converted once for every row that sees it,
     * and each row still sums its keys in order, so its bits are the one-row loop's */
    for (int32_t j = lo; j <= hi; j++) {
        bool have_v = false;
        for (int32_t r = 0; r < nq; r++) {
            if (j < j0[r] || j > j1[r])
                continue;
            float *a = acc + (size_t)r * hd;
            float s;
            kt->vec_dot(hd, &s, attn_kv_row(kv->k, kv, j), qbuf + (size_t)r * hd);
            s *= scale;
            float ms = 1.0f, vs = 1.0f;
            if (s > M[r]) {
                /* a new maximum: rescale what is summed so far, this key weighs expf(0) */
                ms   = expf(M[r] - s);
                M[r] = s;
                k->scale_f32(a, ms, hd);
                if (v16)
                    round_f16(k, a, tmp, hd);
            } else {
                vs = expf(s - M[r]);
            }
            if (!have_v) {
                vt->to_float(attn_kv_vrow(kv, j), vrow, hd);
                have_v = true;
            }
            k->mad_f32(a, vrow, vs, hd);
            if (v16)
                round_f16(k, a, tmp, hd);
            S[r] = fmaf(S[r], ms, vs);
        }
    }
    for (int32_t r = 0; r < nq; r++) {
        const float inv = S[r] == 0.0f ? 0.0f : 1.0f / S[r];
        for (int32_t d = 0; d < hd; d++)
            out[r][d] = acc[(size_t)r * hd + d] * inv;
    }
}
