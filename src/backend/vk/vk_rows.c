/*
 * vk_rows.c: the elementwise and row operations between the matmuls:
 * residual and bias adds, scaling, logit soft-capping, the GELU-gated
 * activation (its f16 table, made on the host once per device), the
 * gather of output rows and the split of a gated layer's [q, gate]
 * heads. Each is one dispatch of a small shader; the numerics are stated
 * in vk.h.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "backend/vk/vk_internal.h"
#include "util/errfmt.h"
#include "util/fp16.h"

/* Elements per workgroup of the elementwise shaders (elementwise.glsl). */
#define ELEM_WG 256

/* The grid over n elements; the shader's push constants start with n and groups[0]. */
static void elem_grid(uint32_t n, uint32_t groups[3])
{
    vk_row_grid((n + ELEM_WG - 1) / ELEM_WG, groups);
}

enum hearth_status vk_op_add(struct vk_seq *s, struct vk_buf *y, struct vk_buf *x, uint32_t n,
                             uint32_t period, char *err, size_t err_len)
{
    if (n == 0 || period == 0 || period > n)
        return fail(HEARTH_EINVAL, err, err_len, "vulkan: add of %u floats with period %u", n,
                    period);
    if (x == y && period != n)
        return fail(HEARTH_EINVAL, err, err_len, "vulkan: a broadcast add onto its own input");
    enum hearth_status st;
    if ((st = vk_check_len("add", "the sum", y, (uint64_t)n * 4, err, err_len)) ||
        (st = vk_check_len("add", "the addend", x, (uint64_t)period * 4, err, err_len)))
        return st;
    uint32_t groups[3];
    elem_grid(n, groups);
    const uint32_t push[3] = {n, groups[0], period};
    struct vk_pipe *p;
    if ((st = vk_pipe_get(s->d, "add", 2, sizeof push, &p, err, err_len)))
        return st;
    struct vk_buf *bufs[2] = {y, x};
    return vk_seq_dispatch(s, p, bufs, push, groups, err, err_len);
}

/* A one-buffer elementwise op: shader name with push {n, groups_x, a, b}. */
static enum hearth_status unary(struct vk_seq *s, const char *name, struct vk_buf *y, uint32_t n,
                                uint32_t n_push, float a, float b, char *err, size_t err_len)
{
    if (n == 0)
        return fail(HEARTH_EINVAL, err, err_len, "vulkan: %s of 0 floats", name);
    enum hearth_status st;
    if ((st = vk_check_len(name, "the input", y, (uint64_t)n * 4, err, err_len)))
        return st;
    uint32_t groups[3];
    elem_grid(n, groups);
    struct {
        uint32_t n, groups_x;
        float a, b;
    } push = {n, groups[0], a, b};
    struct vk_pipe *p;
    if ((st = vk_pipe_get(s->d, name, 1, n_push * 4, &p, err, err_len)))
        return st;
    return vk_seq_dispatch(s, p, &y, &push, groups, err, err_len);
}

enum hearth_status vk_op_scale(struct vk_seq *s, struct vk_buf *y, uint32_t n, float a, char *err,
                               size_t err_len)
{
    return unary(s, "scale", y, n, 3, a, 0, err, err_len);
}

enum hearth_status vk_op_softcap(struct vk_seq *s, struct vk_buf *y, uint32_t n, float cap,
                                 char *err, size_t err_len)
{
    if (!(cap > 0) || isinf(cap))
        return fail(HEARTH_EINVAL, err, err_len, "vulkan: a soft-cap of %g", (double)cap);
    return unary(s, "softcap", y, n, 4, 1.0f / cap, cap, err, err_len);
}

void vk_gelu_table(uint16_t table[65536])
{
    /* ggml_gelu_f32's constants and its one fused multiply-add, as the CPU's table */
    const float coef_a = 0.044715f, sqrt_2_over_pi = 0.79788456080286535587989211986876f;
    for (uint32_t i = 0; i < 65536; i++) {
        const float x = fp16_to_fp32((uint16_t)i);
        const float t = tanhf(sqrt_2_over_pi * x * fmaf(coef_a * x, x, 1.0f));
        table[i]      = fp32_to_fp16(0.5f * x * (1.0f + t));
    }
}

enum hearth_status vk_op_gelu(struct vk_seq *s, struct vk_buf *g, struct vk_buf *u, uint32_t n,
                              char *err, size_t err_len)
{
    if (n == 0)
        return fail(HEARTH_EINVAL, err, err_len, "vulkan: gelu of 0 floats");
    enum hearth_status st;
    if ((st = vk_check_len("gelu", "the gate", g, (uint64_t)n * 4, err, err_len)) ||
        (st = vk_check_len("gelu", "the up", u, (uint64_t)n * 4, err, err_len)))
        return st;
    struct vk_dev *d = s->d;
    if (!d->gelu) {
        /* an upload waits on the queue, which this sequence (still recording) has not used */
        uint16_t *table = malloc(65536 * sizeof *table);
        if (!table)
            return fail(HEARTH_ENOMEM, err, err_len, "vulkan: out of memory");
        vk_gelu_table(table);
        struct vk_buf *b;
        if ((st = vk_buf_new(d, 65536 * sizeof *table, &b, err, err_len)) == HEARTH_OK &&
            (st = vk_buf_upload(b, 0, table, 65536 * sizeof *table, err, err_len)) != HEARTH_OK)
            vk_buf_free(b);
        free(table);
        if (st != HEARTH_OK)
            return st;
        d->gelu = b;
    }
    uint32_t groups[3];
    elem_grid(n, groups);
    const uint32_t push[2] = {n, groups[0]};
    struct vk_pipe *p;
    if ((st = vk_pipe_get(d, "gelu", 3, sizeof push, &p, err, err_len)))
        return st;
    struct vk_buf *bufs[3] = {g, u, d->gelu};
    return vk_seq_dispatch(s, p, bufs, push, groups, err, err_len);
}

enum hearth_status vk_op_split_qg(struct vk_seq *s, struct vk_buf *qg, struct vk_buf *q,
                                  struct vk_buf *gate, uint32_t n_rows, uint32_t head_dim,
                                  char *err, size_t err_len)
{
    const uint64_t n = (uint64_t)n_rows * head_dim;
    if (n == 0 || n > UINT32_MAX)
        return fail(HEARTH_EINVAL, err, err_len, "vulkan: split_qg of %u heads of %u", n_rows,
                    head_dim);
    if (q == qg || gate == qg || q == gate)
        return fail(HEARTH_EINVAL, err, err_len, "vulkan: split_qg into its own buffers");
    enum hearth_status st;
    if ((st = vk_check_len("split_qg", "the q projection", qg, n * 8, err, err_len)) ||
        (st = vk_check_len("split_qg", "the queries", q, n * 4, err, err_len)) ||
        (st = vk_check_len("split_qg", "the gate", gate, n * 4, err, err_len)))
        return st;
    uint32_t groups[3];
    elem_grid((uint32_t)n, groups);
    const uint32_t push[3] = {(uint32_t)n, groups[0], head_dim};
    struct vk_pipe *p;
    if ((st = vk_pipe_get(s->d, "split_qg", 3, sizeof push, &p, err, err_len)))
        return st;
    struct vk_buf *bufs[3] = {qg, q, gate};
    return vk_seq_dispatch(s, p, bufs, push, groups, err, err_len);
}

enum hearth_status vk_op_gather(struct vk_seq *s, struct vk_buf *src, struct vk_buf *dst,
                                struct vk_buf *rows, uint32_t width, uint32_t n_src, uint32_t n_out,
                                char *err, size_t err_len)
{
    if (width == 0 || n_out == 0 || n_src == 0)
        return fail(HEARTH_EINVAL, err, err_len, "vulkan: gather of %u rows of %u from %u", n_out,
                    width, n_src);
    if (src == dst)
        return fail(HEARTH_EINVAL, err, err_len, "vulkan: gather in place");
    enum hearth_status st;
    if ((st = vk_check_len("gather", "the source", src, (uint64_t)n_src * width * 4, err,
                           err_len)) ||
        (st = vk_check_len("gather", "the output", dst, (uint64_t)n_out * width * 4, err,
                           err_len)) ||
        (st = vk_check_len("gather", "the row ids", rows, (uint64_t)n_out * 4, err, err_len)))
        return st;
    const uint32_t push[3] = {width, n_out, n_src};
    struct vk_pipe *p;
    if ((st = vk_pipe_get(s->d, "gather", 3, sizeof push, &p, err, err_len)))
        return st;
    uint32_t groups[3];
    vk_row_grid(n_out, groups);
    struct vk_buf *bufs[3] = {src, dst, rows};
    return vk_seq_dispatch(s, p, bufs, push, groups, err, err_len);
}
