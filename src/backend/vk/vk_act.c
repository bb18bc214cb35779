/*
 * vk_act.c: activations rounded as the CPU backend rounds them before a
 * matmul. The CPU converts a matmul's f32 input to its weight's
 * vec_dot_type (Q8_0 for Q8_0 and Q4_0 weights: 8 bits per element of a
 * 32-block) and sums those; the shaders sum f32. The difference is small
 * in a dense layer, but a MoE router choosing between experts whose
 * probabilities are that close chooses differently, and one token's
 * different expert moves every later logit of its sequence: rounding the
 * same way keeps the two backends' routing, hence their figures, together.
 */
#include "backend/vk/vk_internal.h"
#include "util/errfmt.h"

/* Blocks per workgroup of the elementwise grid (elementwise.glsl). */
#define ELEM_WG 256

bool vk_op_round_act_supported(enum dtype act)
{
    return act == DTYPE_Q8_0;
}

enum hearth_status vk_op_round_act(struct vk_seq *s, enum dtype act, struct vk_buf *x,
                                   struct vk_buf *y, uint32_t n, char *err, size_t err_len)
{
    if (!vk_op_round_act_supported(act))
        return fail(HEARTH_EUNSUPPORTED, err, err_len,
                    "vulkan: no rounding of activations to %s", dtype_name(act));
    if (n == 0 || n % 32)
        return fail(HEARTH_EINVAL, err, err_len,
                    "vulkan: rounding %u activations to %s (whole blocks of 32)", n,
                    dtype_name(act));
    enum hearth_status st;
    if ((st = vk_check_len("rounding", "the input", x, (uint64_t)n * 4, err, err_len)) ||
        (st = vk_check_len("rounding", "the output", y, (uint64_t)n * 4, err, err_len)))
        return st;
    uint32_t groups[3];
    vk_row_grid((n / 32 + ELEM_WG - 1) / ELEM_WG, groups);
    const uint32_t push[2] = {n / 32, groups[0]};
    struct vk_pipe *p;
    if ((st = vk_pipe_get(s->d, "act_q8_0", 2, sizeof push, &p, err, err_len)))
        return st;
    struct vk_buf *bufs[2] = {x, y};
    return vk_seq_dispatch(s, p, bufs, push, groups, err, err_len);
}
