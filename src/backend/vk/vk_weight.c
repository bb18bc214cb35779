/*
 * vk_weight.c: weights split by rows across buffers, and the operations
 * that read them (matmul, embedding rows). One buffer may hold only
 * maxStorageBufferRange bytes (128 MiB on lavapipe, often 4 GiB on GPUs),
 * less than a large vocabulary's embedding or output matrix; each part
 * holds whole rows and an operation dispatches once per part, the part's
 * first row in the push constants.
 */
#include <stdlib.h>

#include "backend/vk/vk_internal.h"
#include "util/errfmt.h"

struct vk_part {
    struct vk_buf *buf;
    uint32_t row0;   /* the weight's row at the buffer's row 0 */
    uint32_t n_rows; /* rows in the buffer */
};

struct vk_weight {
    enum dtype type;
    uint32_t n_in, n_rows;
    uint32_t row_len; /* bytes per row */
    uint32_t n_parts;
    struct vk_part part[]; /* [n_parts], rows in order */
};

/* clang-format off */
static const char *const embed_shader[DTYPE_COUNT] = {
    [DTYPE_F32] = "embed_f32", [DTYPE_F16] = "embed_f16", [DTYPE_Q8_0] = "embed_q8_0",
    [DTYPE_Q4_0] = "embed_q4_0", [DTYPE_Q4_K] = "embed_q4_k", [DTYPE_Q5_K] = "embed_q5_k",
    [DTYPE_Q6_K] = "embed_q6_k", [DTYPE_BF16] = "embed_bf16", [DTYPE_Q4_1] = "embed_q4_1",
    [DTYPE_Q5_0] = "embed_q5_0", [DTYPE_Q5_1] = "embed_q5_1", [DTYPE_Q2_K] = "embed_q2_k",
    [DTYPE_Q3_K] = "embed_q3_k", [DTYPE_IQ4_NL] = "embed_iq4_nl",
    [DTYPE_IQ4_XS] = "embed_iq4_xs",
};
/* clang-format on */

bool vk_op_embed_supported(enum dtype t)
{
    return (unsigned)t < DTYPE_COUNT && embed_shader[t];
}

enum hearth_status vk_weight_new(struct vk_dev *d, enum dtype type, uint32_t n_in, uint32_t n_rows,
                                 const void *data, size_t part_max, struct vk_weight **out,
                                 char *err, size_t err_len)
{
    *out = NULL;
    if ((unsigned)type >= DTYPE_COUNT || n_in == 0 || n_rows == 0 || n_in % dtype_get(type)->block)
        return fail(HEARTH_EINVAL, err, err_len,
                    "vulkan: a weight of %u rows of %u %s (rows must be whole blocks)", n_rows,
                    n_in, (unsigned)type < DTYPE_COUNT ? dtype_name(type) : "?");
    const uint64_t row_len = dtype_row_len(type, n_in);
    uint64_t cap           = d->max_range < d->max_alloc ? d->max_range : d->max_alloc;
    if (part_max && part_max < cap)
        cap = part_max;
    if (row_len > cap || row_len > UINT32_MAX)
        return fail(HEARTH_ENOMEM, err, err_len,
                    "vulkan: a weight row of %llu bytes exceeds one buffer's %llu",
                    (unsigned long long)row_len, (unsigned long long)cap);
    /* the shaders address a part with 32-bit byte offsets */
    uint64_t per = cap / row_len;
    if (per * row_len > UINT32_MAX)
        per = UINT32_MAX / row_len;
    const uint32_t n_parts = (uint32_t)((n_rows + per - 1) / per);
    struct vk_weight *w    = calloc(1, sizeof *w + n_parts * sizeof w->part[0]);
    if (!w)
        return fail(HEARTH_ENOMEM, err, err_len, "vulkan: out of memory");
    *w                    = (struct vk_weight){.type    = type,
                                               .n_in    = n_in,
                                               .n_rows  = n_rows,
                                               .row_len = (uint32_t)row_len,
                                               .n_parts = n_parts};
    enum hearth_status st = HEARTH_OK;
    for (uint32_t i = 0; i < n_parts && st == HEARTH_OK; i++) {
        struct vk_part *p = &w->part[i];
        p->row0           = (uint32_t)(i * per);
        p->n_rows         = n_rows - p->row0 < per ? n_rows - p->row0 : (uint32_t)per;
        const size_t len  = (size_t)p->n_rows * row_len;
        if ((st = vk_buf_new(d, len, &p->buf, err, err_len)) == HEARTH_OK)
            st = vk_buf_upload(p->buf, 0, (const uint8_t *)data + (size_t)p->row0 * row_len, len,
                               err, err_len);
    }
    if (st != HEARTH_OK) {
        vk_weight_free(w);
        return st;
    }
    *out = w;
    return HEARTH_OK;
}

void vk_weight_free(struct vk_weight *w)
{
    if (!w)
        return;
    for (uint32_t i = 0; i < w->n_parts; i++)
        vk_buf_free(w->part[i].buf);
    free(w);
}

uint32_t vk_weight_parts(const struct vk_weight *w)
{
    return w->n_parts;
}

enum hearth_status vk_op_matmul_w(struct vk_seq *s, const struct vk_weight *w, struct vk_buf *x,
                                  struct vk_buf *y, uint32_t n_tok, char *err, size_t err_len)
{
    enum hearth_status st = HEARTH_OK;
    for (uint32_t i = 0; i < w->n_parts && st == HEARTH_OK; i++)
        st = vk_mul_dispatch(s, w->type, w->part[i].buf, w->part[i].row0, w->part[i].n_rows, x, y,
                             w->n_in, w->n_rows, n_tok, err, err_len);
    return st;
}

enum hearth_status vk_op_embed(struct vk_seq *s, const struct vk_weight *w, struct vk_buf *ids,
                               struct vk_buf *x, uint32_t n_tok, float scale, char *err,
                               size_t err_len)
{
    if (!vk_op_embed_supported(w->type))
        return fail(HEARTH_EUNSUPPORTED, err, err_len, "vulkan: no embedding of %s rows",
                    dtype_name(w->type));
    if (n_tok == 0)
        return fail(HEARTH_EINVAL, err, err_len, "vulkan: an embedding of 0 tokens");
    enum hearth_status st;
    if ((st = vk_check_len("embed", "the token ids", ids, (uint64_t)n_tok * 4, err, err_len)) ||
        (st = vk_check_len("embed", "the output", x, (uint64_t)n_tok * w->n_in * 4, err, err_len)))
        return st;
    struct vk_pipe *p;
    struct {
        uint32_t n_in, n_rows, n_tok, row_len, row0;
        float scale;
    } push = {w->n_in, 0, n_tok, w->row_len, 0, scale};
    if ((st = vk_pipe_get(s->d, embed_shader[w->type], 3, sizeof push, &p, err, err_len)))
        return st;
    uint32_t groups[3];
    vk_row_grid(n_tok, groups);
    for (uint32_t i = 0; i < w->n_parts && st == HEARTH_OK; i++) {
        push.n_rows            = w->part[i].n_rows;
        push.row0              = w->part[i].row0;
        struct vk_buf *bufs[3] = {w->part[i].buf, ids, x};
        st                     = vk_seq_dispatch(s, p, bufs, &push, groups, err, err_len);
    }
    return st;
}

struct vk_buf *vk_weight_part(const struct vk_weight *w, uint32_t i, uint32_t *row0,
                              uint32_t *n_rows)
{
    *row0   = w->part[i].row0;
    *n_rows = w->part[i].n_rows;
    return w->part[i].buf;
}

void vk_weight_shape(const struct vk_weight *w, enum dtype *type, uint32_t *n_in, uint32_t *n_rows)
{
    *type   = w->type;
    *n_in   = w->n_in;
    *n_rows = w->n_rows;
}
