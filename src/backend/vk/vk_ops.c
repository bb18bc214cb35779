/*
 * vk_ops.c: the operations the shaders implement, each a checked dispatch:
 * which shader, its push constants and its workgroup grid. What the Vulkan
 * backend table will call per layer; the numerics are stated in vk.h and
 * held to the CPU reference by tests/unit/test_vk.c.
 */
#include <stdint.h>
#include <string.h>

#include "backend/vk/vk_internal.h"
#include "util/errfmt.h"

/* Tokens per matmul workgroup (TILE in shaders/mul_common.glsl). */
#define MUL_TILE 8
/* Workgroups along x before rows spill into y: maxComputeWorkGroupCount's guaranteed minimum. */
#define GROUPS_X 65535u

static const char *const mul_shader[DTYPE_COUNT] = {
    [DTYPE_F32] = "mul_f32", [DTYPE_F16] = "mul_f16", [DTYPE_Q8_0] = "mul_q8_0",
    [DTYPE_Q4_0] = "mul_q4_0",
};

bool vk_op_matmul_supported(enum dtype t)
{
    return (unsigned)t < DTYPE_COUNT && mul_shader[t];
}

/* n rows as an x by y grid of one workgroup per row. */
static void row_grid(uint32_t n, uint32_t groups[3])
{
    groups[0] = n < GROUPS_X ? n : GROUPS_X;
    groups[1] = (n + groups[0] - 1) / groups[0];
    groups[2] = 1;
}

/* Whether a buffer of len bytes holds need bytes, which the shaders address with 32-bit offsets. */
static enum hearth_status check_len(const char *op, const char *what, const struct vk_buf *b,
                                    uint64_t need, char *err, size_t err_len)
{
    if (need > UINT32_MAX)
        return fail(HEARTH_ERANGE, err, err_len,
                    "vulkan: %s: %s of %llu bytes is past the shaders' 4 GiB offsets", op, what,
                    (unsigned long long)need);
    if (need > vk_buf_len(b))
        return fail(HEARTH_ERANGE, err, err_len,
                    "vulkan: %s: %s needs %llu bytes, its buffer has %zu", op, what,
                    (unsigned long long)need, vk_buf_len(b));
    return HEARTH_OK;
}

enum hearth_status vk_op_matmul(struct vk_seq *s, enum dtype t, struct vk_buf *w,
                                struct vk_buf *x, struct vk_buf *y, uint32_t n_in,
                                uint32_t n_out, uint32_t n_tok, char *err, size_t err_len)
{
    if (!vk_op_matmul_supported(t))
        return fail(HEARTH_EUNSUPPORTED, err, err_len, "vulkan: no matmul for %s weights",
                    dtype_name(t));
    const struct dtype_info *ti = dtype_get(t);
    if (n_in == 0 || n_out == 0 || n_tok == 0 || n_in % ti->block)
        return fail(HEARTH_EINVAL, err, err_len,
                    "vulkan: matmul of %u x %u %s by %u rows (rows must be whole %u-blocks)",
                    n_out, n_in, ti->name, n_tok, ti->block);
    const uint64_t row_len = dtype_row_len(t, n_in);
    enum hearth_status st;
    if ((st = check_len("matmul", "the weight", w, row_len * n_out, err, err_len)) ||
        (st = check_len("matmul", "the input", x, (uint64_t)n_tok * n_in * 4, err, err_len)) ||
        (st = check_len("matmul", "the output", y, (uint64_t)n_tok * n_out * 4, err, err_len)))
        return st;
    const uint32_t push[4] = {n_in, n_out, n_tok, (uint32_t)row_len};
    struct vk_pipe *p;
    if ((st = vk_pipe_get(s->d, mul_shader[t], 3, sizeof push, &p, err, err_len)))
        return st;
    uint32_t groups[3];
    row_grid(n_out, groups);
    groups[2] = (n_tok + MUL_TILE - 1) / MUL_TILE;
    struct vk_buf *bufs[3] = {w, x, y};
    return vk_seq_dispatch(s, p, bufs, push, groups, err, err_len);
}

enum hearth_status vk_op_rmsnorm(struct vk_seq *s, struct vk_buf *x, struct vk_buf *w,
                                 struct vk_buf *y, uint32_t n, uint32_t n_rows, float eps,
                                 char *err, size_t err_len)
{
    if (n == 0 || n_rows == 0)
        return fail(HEARTH_EINVAL, err, err_len, "vulkan: rmsnorm of %u rows of %u", n_rows, n);
    enum hearth_status st;
    const uint64_t len = (uint64_t)n * n_rows * 4;
    if ((st = check_len("rmsnorm", "the input", x, len, err, err_len)) ||
        (st = check_len("rmsnorm", "the weight", w, (uint64_t)n * 4, err, err_len)) ||
        (st = check_len("rmsnorm", "the output", y, len, err, err_len)))
        return st;
    struct {
        uint32_t n, n_rows;
        float eps;
    } push = {n, n_rows, eps};
    struct vk_pipe *p;
    if ((st = vk_pipe_get(s->d, "rmsnorm", 3, sizeof push, &p, err, err_len)))
        return st;
    uint32_t groups[3];
    row_grid(n_rows, groups);
    struct vk_buf *bufs[3] = {x, w, y};
    return vk_seq_dispatch(s, p, bufs, &push, groups, err, err_len);
}
