/*
 * dmath.c: the block drafters' host arithmetic (dmath.h). Each matvec
 * converts its input row once to the weight type's activation type, as
 * the CPU backend's matmul does, then takes one dot per weight row.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "spec/dmath.h"
#include "util/errfmt.h"

static bool type_ok(enum dtype t)
{
    const struct type_kernels *tk = &kernels_get()->type[t];
    return tk->to_float && tk->vec_dot;
}

enum hearth_status dm_weight(const struct gguf_file *f, const char *name, int64_t n_in,
                             int64_t n_out, bool optional, struct weight *w, char *err,
                             size_t err_len)
{
    const struct gguf_tensor *t = gguf_find_tensor(f, name);
    memset(w, 0, sizeof *w);
    if (!t)
        return optional ? HEARTH_OK
                        : fail(HEARTH_EFORMAT, err, err_len, "drafter: tensor %s is missing", name);
    if (t->ne[0] != n_in || t->ne[1] != n_out || t->ne[2] != 1 || t->ne[3] != 1)
        return fail(HEARTH_EFORMAT, err, err_len,
                    "drafter: tensor %s has shape [%lld, %lld, %lld, %lld] but [%lld, %lld] was "
                    "expected",
                    name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                    (long long)t->ne[3], (long long)n_in, (long long)n_out);
    if (!type_ok((enum dtype)t->type))
        return fail(HEARTH_EUNSUPPORTED, err, err_len,
                    "drafter: tensor %s has type %s, which the drafter cannot compute with", name,
                    dtype_name(t->type));
    w->type    = (enum dtype)t->type;
    w->n_in    = n_in;
    w->n_out   = n_out;
    w->row_len = dtype_row_len(w->type, n_in);
    w->data    = t->data;
    return HEARTH_OK;
}

enum hearth_status dm_vector(const struct gguf_file *f, const char *name, int64_t n, bool optional,
                             float **out, char *err, size_t err_len)
{
    *out                        = NULL;
    const struct gguf_tensor *t = gguf_find_tensor(f, name);
    if (!t)
        return optional ? HEARTH_OK
                        : fail(HEARTH_EFORMAT, err, err_len, "drafter: tensor %s is missing", name);
    if (t->ne[0] != n || t->ne[1] != 1 || t->ne[2] != 1 || t->ne[3] != 1 ||
        !type_ok((enum dtype)t->type))
        return fail(HEARTH_EFORMAT, err, err_len,
                    "drafter: tensor %s should be a vector of %lld elements of a known type", name,
                    (long long)n);
    if (!(*out = malloc((size_t)n * sizeof **out)))
        return fail(HEARTH_ENOMEM, err, err_len, "drafter: out of memory");
    kernels_get()->type[t->type].to_float(t->data, *out, n);
    return HEARTH_OK;
}

bool dm_u32(const struct gguf_file *f, const char *arch, const char *key, uint32_t *out)
{
    char k[128];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    return gguf_get_u32(f, k, out);
}

int32_t dm_u32s(const struct gguf_file *f, const char *arch, const char *key, int32_t *out,
                int32_t cap)
{
    char k[128];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    const int64_t i = gguf_find_key(f, k);
    enum gguf_vtype elem;
    uint64_t n;
    if (i < 0 || !gguf_kv_arr(f, i, &elem, &n) || n > (uint64_t)cap ||
        (elem != GGUF_U32 && elem != GGUF_I32))
        return -1;
    memcpy(out, gguf_arr_data(f, i), (size_t)n * sizeof *out);
    return (int32_t)n;
}

size_t dm_scratch_len(int64_t n_in)
{
    /* the widest activation row any type converts to: f32's */
    return (size_t)n_in * sizeof(float) + 64;
}

void dm_matvec(const struct weight *w, const float *x, float *y, void *scratch)
{
    const struct type_kernels *tk = &kernels_get()->type[w->type];
    const void *a                 = x;
    if (tk->vec_dot_type != DTYPE_F32) {
        kernels_get()->type[tk->vec_dot_type].from_float(x, scratch, w->n_in);
        a = scratch;
    }
    for (int64_t r = 0; r < w->n_out; r++)
        tk->vec_dot(w->n_in, &y[r], (const uint8_t *)w->data + (size_t)r * w->row_len, a);
}

void dm_row(const struct weight *w, int64_t r, float *y)
{
    kernels_get()->type[w->type].to_float((const uint8_t *)w->data + (size_t)r * w->row_len, y,
                                          w->n_in);
}

void dm_rmsnorm(float *y, const float *x, const float *g, int64_t n, float eps)
{
    double ss = 0;
    for (int64_t i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    const float s = 1.0f / sqrtf((float)(ss / (double)n) + eps);
    for (int64_t i = 0; i < n; i++)
        y[i] = x[i] * s * (g ? g[i] : 1.0f);
}

void dm_rope(float *x, int32_t n_head, int32_t head_dim, float base, bool neox, int32_t pos)
{
    const int32_t half = head_dim / 2;
    for (int32_t h = 0; h < n_head; h++) {
        float *v = x + (size_t)h * head_dim;
        for (int32_t i = 0; i < half; i++) {
            const float theta = (float)pos * powf(base, -2.0f * (float)i / (float)head_dim);
            const float c = cosf(theta), s = sinf(theta);
            const int32_t a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
            const float x0 = v[a], x1 = v[b];
            v[a] = x0 * c - x1 * s;
            v[b] = x0 * s + x1 * c;
        }
    }
}

void dm_attend(const float *q, const struct dm_kv *seg, int32_t n_seg, size_t kv_row,
               int32_t n_head, int32_t n_kv, int32_t head_dim, float *out)
{
    const float scale = 1.0f / sqrtf((float)head_dim);
    const int32_t grp = n_head / n_kv;
    for (int32_t h = 0; h < n_head; h++) {
        const float *qh = q + (size_t)h * head_dim;
        const size_t kh = (size_t)(h / grp) * head_dim;
        float *o        = out + (size_t)h * head_dim;
        float mx = -INFINITY, sum = 0;
        memset(o, 0, (size_t)head_dim * sizeof *o);
        /* an online softmax, so no buffer of scores */
        for (int32_t sg = 0; sg < n_seg; sg++)
            for (int32_t j = 0; j < seg[sg].n; j++) {
                const float *kj = seg[sg].k + (size_t)j * kv_row + kh;
                float sc        = 0;
                for (int32_t d = 0; d < head_dim; d++)
                    sc += qh[d] * kj[d];
                sc *= scale;
                const float m2 = sc > mx ? sc : mx;
                const float c = expf(mx - m2), e = expf(sc - m2);
                const float *vj = seg[sg].v + (size_t)j * kv_row + kh;
                for (int32_t d = 0; d < head_dim; d++)
                    o[d] = o[d] * c + e * vj[d];
                sum = sum * c + e;
                mx  = m2;
            }
        for (int32_t d = 0; d < head_dim && sum > 0; d++)
            o[d] /= sum;
    }
}

void dm_silu_mul(float *y, const float *g, const float *u, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

int32_t dm_argmax(const float *x, int32_t n)
{
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}
