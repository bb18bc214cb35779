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

void attn_rows_quant(const struct kernels *k, float *const *out, const float *const *q,
                     int32_t nq, int32_t hd, const struct attn_kv *kv, const int32_t *j0,
                     const int32_t *j1, float scale, float *scratch)
{
    const struct type_kernels *kt = &k->type[kv->kt], *vt = &k->type[kv->vt];
    const struct type_kernels *qt = &k->type[kt->vec_dot_type];
    const bool v16                = kv->vt == DTYPE_F16;
    /* the sum, one value row, an f16 row, the converted query (at most hd floats' bytes) */
    float *acc = scratch, *vrow = acc + hd;
    uint16_t *tmp = (uint16_t *)(vrow + hd);
    void *qq      = vrow + 2 * hd;
    for (int32_t r = 0; r < nq; r++) {
        qt->from_float(q[r], qq, hd);
        memset(acc, 0, (size_t)hd * sizeof *acc);
        float M = -INFINITY, S = 0.0f;
        for (int32_t j = j0[r]; j <= j1[r]; j++) {
            float s;
            kt->vec_dot(hd, &s, attn_kv_row(kv->k, kv, j), qq);
            s *= scale;
            float ms = 1.0f, vs = 1.0f;
            if (s > M) {
                /* a new maximum: rescale what is summed so far, this key weighs expf(0) */
                ms = expf(M - s);
                M  = s;
                k->scale_f32(acc, ms, hd);
                if (v16)
                    round_f16(k, acc, tmp, hd);
            } else {
                vs = expf(s - M);
            }
            vt->to_float(attn_kv_vrow(kv, j), vrow, hd);
            k->mad_f32(acc, vrow, vs, hd);
            if (v16)
                round_f16(k, acc, tmp, hd);
            S = fmaf(S, ms, vs);
        }
        const float inv = S == 0.0f ? 0.0f : 1.0f / S;
        for (int32_t d = 0; d < hd; d++)
            out[r][d] = acc[d] * inv;
    }
}
