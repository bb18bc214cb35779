/*
 * vk_idot.c: decode matmuls by integer dot products. The CPU sums a Q8_0
 * or Q4_0 weight's row against activations rounded to Q8_0 as whole-block
 * integer sums scaled by the two halves; the float shaders sum the same
 * values as f32 products. Where the device has packed 8-bit dot products
 * the shader can do the CPU's arithmetic itself, and reads a quarter of
 * the activation bytes: the activations go to the device as Q8_0 blocks
 * (act_q8_0_blk) and mul_dot_TYPE sums them. Prefill keeps the tiled f32
 * kernel, whose staging already reuses each weight across tokens.
 */
#include <stdio.h>

#include "backend/vk/vk_internal.h"
#include "util/errfmt.h"

/* shaders/mul_dot_q8_0.comp: invocations per workgroup, the largest team and its rows */
#define DOT_WG   64
#define DOT_TEAM 8
#define DOT_VR   4
/* elementwise.glsl's blocks per workgroup */
#define ELEM_WG 256
/* bytes of one Q8_0 block as vk_op_quant_act writes it: 8 words of quants and the scale */
#define QBLOCK 36

/* shaders/mul_dot_*.comp by weight type, and their subgroup (_sg) builds */
/* clang-format off */
static const char *const dot_shader[DTYPE_COUNT][2] = {
    [DTYPE_Q8_0] = {"mul_dot_q8_0", "mul_dot_q8_0_sg"},
    [DTYPE_Q4_0] = {"mul_dot_q4_0", "mul_dot_q4_0_sg"},
};
/* clang-format on */

bool vk_op_matmul_dot_supported(const struct vk_dev *d, enum dtype t, uint32_t n_tok)
{
    return d->int_dot && (unsigned)t < DTYPE_COUNT && dot_shader[t][0] && n_tok >= 1 &&
           n_tok <= VK_DOT_MAX_TOK;
}

enum hearth_status vk_op_quant_act(struct vk_seq *s, struct vk_buf *x, struct vk_buf *y, uint32_t n,
                                   char *err, size_t err_len)
{
    if (n == 0 || n % 32)
        return fail(HEARTH_EINVAL, err, err_len,
                    "vulkan: %u activations to Q8_0 blocks (whole blocks of 32)", n);
    enum hearth_status st;
    if ((st = vk_check_len("quantizing", "the input", x, (uint64_t)n * 4, err, err_len)) ||
        (st = vk_check_len("quantizing", "the output", y, (uint64_t)n / 32 * QBLOCK, err, err_len)))
        return st;
    uint32_t groups[3];
    vk_row_grid((n / 32 + ELEM_WG - 1) / ELEM_WG, groups);
    const uint32_t push[2] = {n / 32, groups[0]};
    struct vk_pipe *p;
    if ((st = vk_pipe_get(s->d, "act_q8_0_blk", 2, sizeof push, &p, err, err_len)))
        return st;
    struct vk_buf *bufs[2] = {x, y};
    return vk_seq_dispatch(s, p, bufs, push, groups, err, err_len);
}

/* Rows row0..row0 + n_rows of y from the n_rows rows of w: vk_op_matmul_dot for one part. */
static enum hearth_status dot_dispatch(struct vk_seq *s, enum dtype t, struct vk_buf *w,
                                       uint32_t row0, uint32_t n_rows, struct vk_buf *xq,
                                       struct vk_buf *y, uint32_t n_in, uint32_t n_out,
                                       uint32_t n_tok, char *err, size_t err_len)
{
    if (!vk_op_matmul_dot_supported(s->d, t, n_tok))
        return fail(HEARTH_EUNSUPPORTED, err, err_len,
                    "vulkan: no integer-dot matmul of %s weights by %u tokens on %s", dtype_name(t),
                    n_tok, s->d->info.name);
    if (n_in == 0 || n_out == 0 || n_in % 32)
        return fail(HEARTH_EINVAL, err, err_len,
                    "vulkan: integer-dot matmul of %u x %u (rows must be whole 32-blocks)", n_out,
                    n_in);
    if (n_rows == 0 || row0 > n_out || n_rows > n_out - row0)
        return fail(HEARTH_EINVAL, err, err_len,
                    "vulkan: integer-dot matmul: rows %u..%u of a weight of %u", row0,
                    row0 + n_rows, n_out);
    const uint64_t row_len = dtype_row_len(t, n_in);
    enum hearth_status st;
    if ((st = vk_check_len("matmul", "the weight", w, row_len * n_rows, err, err_len)) ||
        (st = vk_check_len("matmul", "the input blocks", xq, (uint64_t)n_tok * (n_in / 32) * QBLOCK,
                           err, err_len)) ||
        (st = vk_check_len("matmul", "the output", y, (uint64_t)n_tok * n_out * 4, err, err_len)))
        return st;
    /* as vk_mul_dispatch: 8 lanes per row, or as many as the row has blocks */
    uint32_t team = DOT_TEAM;
    while (team > 1 && team > n_in / 32)
        team /= 2;
    const uint32_t push[7] = {n_in, n_rows, n_tok, (uint32_t)row_len, row0, n_out, team};
    struct vk_pipe *p;
    if ((st = vk_pipe_get(s->d, dot_shader[t][s->d->subgroup_shuffle], 3, sizeof push, &p, err,
                          err_len)))
        return st;
    uint32_t groups[3];
    const uint32_t per_group = DOT_WG / team * DOT_VR;
    vk_row_grid((n_rows + per_group - 1) / per_group, groups);
    groups[2]              = n_tok;
    struct vk_buf *bufs[3] = {w, xq, y};
    return vk_seq_dispatch(s, p, bufs, push, groups, err, err_len);
}

enum hearth_status vk_op_matmul_dot(struct vk_seq *s, enum dtype t, struct vk_buf *w,
                                    struct vk_buf *xq, struct vk_buf *y, uint32_t n_in,
                                    uint32_t n_out, uint32_t n_tok, char *err, size_t err_len)
{
    return dot_dispatch(s, t, w, 0, n_out, xq, y, n_in, n_out, n_tok, err, err_len);
}

enum hearth_status vk_op_matmul_dot_w(struct vk_seq *s, const struct vk_weight *w,
                                      struct vk_buf *xq, struct vk_buf *y, uint32_t n_tok,
                                      char *err, size_t err_len)
{
    enum dtype t;
    uint32_t n_in, n_out;
    vk_weight_shape(w, &t, &n_in, &n_out);
    enum hearth_status st = HEARTH_OK;
    for (uint32_t i = 0; i < vk_weight_parts(w) && st == HEARTH_OK; i++) {
        uint32_t row0, n_rows;
        struct vk_buf *b = vk_weight_part(w, i, &row0, &n_rows);
        st = dot_dispatch(s, t, b, row0, n_rows, xq, y, n_in, n_out, n_tok, err, err_len);
    }
    return st;
}
