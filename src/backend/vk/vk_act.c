/*
 * vk_act.c: a matmul's activations rounded as the CPU rounds them. The
 * CPU converts each activation row to its weight type's vec_dot_type
 * (f16 for F16 weights, 8-bit blocks for the quantized types) before its
 * dot products; the device's matmul multiplies f32 activations, so the
 * backend rounds them first the same way (shaders/act_round.comp) and the
 * two differ by summation order, not by the activations' 8 bits. One
 * dispatch over n_tok x n_in floats, small beside the matmul it feeds.
 */
#include "backend/vk/vk_internal.h"
#include "kernels/kernels.h"
#include "util/errfmt.h"

/* act_round.comp's modes, and the elements each invocation rounds */
static const struct {
    uint32_t mode, block;
    /* clang-format off */
} round_of[DTYPE_COUNT] = {
    [DTYPE_F16] = {0, 1},   [DTYPE_BF16] = {1, 1},   [DTYPE_Q8_0] = {2, 32},
    [DTYPE_Q8_1] = {2, 32}, [DTYPE_Q8_K] = {3, 256},
};
/* clang-format on */

enum dtype vk_act_type(enum dtype weight)
{
    if ((unsigned)weight >= DTYPE_COUNT)
        return DTYPE_F32;
    const enum dtype t = kernels_get()->type[weight].vec_dot_type;
    return round_of[t].block ? t : DTYPE_F32;
}

enum hearth_status vk_op_act_round(struct vk_seq *s, enum dtype type, struct vk_buf *x,
                                   struct vk_buf *y, uint32_t n, char *err, size_t err_len)
{
    if ((unsigned)type >= DTYPE_COUNT || !round_of[type].block)
        return fail(HEARTH_EUNSUPPORTED, err, err_len, "vulkan: no activation rounding to %s",
                    (unsigned)type < DTYPE_COUNT ? dtype_name(type) : "?");
    const uint32_t block = round_of[type].block;
    if (n == 0 || n % block)
        return fail(HEARTH_EINVAL, err, err_len,
                    "vulkan: %u activations do not make whole %s blocks of %u", n, dtype_name(type),
                    block);
    enum hearth_status st;
    if ((st = vk_check_len("act_round", "the input", x, (uint64_t)n * 4, err, err_len)) ||
        (st = vk_check_len("act_round", "the output", y, (uint64_t)n * 4, err, err_len)))
        return st;
    uint32_t groups[3];
    vk_row_grid((n / block + 255) / 256, groups);
    const uint32_t push[3] = {n / block, groups[0], round_of[type].mode};
    struct vk_pipe *p;
    if ((st = vk_pipe_get(s->d, "act_round", 2, sizeof push, &p, err, err_len)))
        return st;
    struct vk_buf *bufs[2] = {x, y};
    return vk_seq_dispatch(s, p, bufs, push, groups, err, err_len);
}
