/*
 * vk_ops.c: the operations the shaders implement, each a checked dispatch:
 * which shader, its push constants and its workgroup grid. What the Vulkan
 * backend table will call per layer; the numerics are stated in vk.h and
 * held to the CPU reference by tests/unit/test_vk.c.
 */
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include "backend/vk/vk_internal.h"
#include "util/errfmt.h"

/* shaders/mul_common.glsl's shapes: invocations per workgroup (WG), the largest matrix-vector
 * team (TEAM) and its rows (VR), the tiled kernel's tile of rows by tokens (TM, TN) */
#define MUL_WG   64
#define MUL_TEAM 8
#define MUL_VR   4
#define MUL_TM   64
#define MUL_TN   32
/* The tiled kernel from this many tokens on: below, re-reading each row per token is cheaper
 * than a tile of mostly idle tokens. */
#define MUL_TILED_MIN 8

/* clang-format off */
static const char *const mul_shader[DTYPE_COUNT] = {
    [DTYPE_F32] = "mul_f32", [DTYPE_F16] = "mul_f16", [DTYPE_Q8_0] = "mul_q8_0",
    [DTYPE_Q4_0] = "mul_q4_0", [DTYPE_Q4_K] = "mul_q4_k", [DTYPE_Q5_K] = "mul_q5_k",
    [DTYPE_Q6_K] = "mul_q6_k", [DTYPE_BF16] = "mul_bf16", [DTYPE_Q4_1] = "mul_q4_1",
    [DTYPE_Q5_0] = "mul_q5_0", [DTYPE_Q5_1] = "mul_q5_1", [DTYPE_Q2_K] = "mul_q2_k",
    [DTYPE_Q3_K] = "mul_q3_k", [DTYPE_IQ4_NL] = "mul_iq4_nl", [DTYPE_IQ4_XS] = "mul_iq4_xs",
};
/* clang-format on */

bool vk_op_matmul_supported(enum dtype t)
{
    return (unsigned)t < DTYPE_COUNT && mul_shader[t];
}

void vk_row_grid(uint32_t n, uint32_t groups[3])
{
    groups[0] = n < VK_GROUPS_X ? n : VK_GROUPS_X;
    groups[1] = (n + groups[0] - 1) / groups[0];
    groups[2] = 1;
}

enum hearth_status vk_check_len(const char *op, const char *what, const struct vk_buf *b,
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

enum hearth_status vk_mul_dispatch(struct vk_seq *s, enum dtype t, struct vk_buf *w, uint32_t row0,
                                   uint32_t n_rows, struct vk_buf *x, struct vk_buf *y,
                                   uint32_t n_in, uint32_t n_out, uint32_t n_tok, char *err,
                                   size_t err_len)
{
    if (!vk_op_matmul_supported(t))
        return fail(HEARTH_EUNSUPPORTED, err, err_len, "vulkan: no matmul for %s weights",
                    dtype_name(t));
    const struct dtype_info *ti = dtype_get(t);
    if (n_in == 0 || n_out == 0 || n_tok == 0 || n_in % ti->block)
        return fail(HEARTH_EINVAL, err, err_len,
                    "vulkan: matmul of %u x %u %s by %u rows (rows must be whole %u-blocks)", n_out,
                    n_in, ti->name, n_tok, ti->block);
    if (n_rows == 0 || row0 > n_out || n_rows > n_out - row0)
        return fail(HEARTH_EINVAL, err, err_len, "vulkan: matmul: rows %u..%u of a weight of %u",
                    row0, row0 + n_rows, n_out);
    const uint64_t row_len = dtype_row_len(t, n_in);
    enum hearth_status st;
    if ((st = vk_check_len("matmul", "the weight", w, row_len * n_rows, err, err_len)) ||
        (st = vk_check_len("matmul", "the input", x, (uint64_t)n_tok * n_in * 4, err, err_len)) ||
        (st = vk_check_len("matmul", "the output", y, (uint64_t)n_tok * n_out * 4, err, err_len)))
        return st;
    const bool tiled = n_tok >= MUL_TILED_MIN;
    /* lanes per row: 8, or as many as the row has chunks of 32 (a power of two), so that a
     * short row does not leave most of a team idle */
    uint32_t team = MUL_TEAM;
    while (team > 1 && team > (n_in + 31) / 32)
        team /= 2;
    const uint32_t push[8] = {n_in, n_rows, n_tok, (uint32_t)row_len, row0, n_out, tiled, team};
    /* the Makefile builds each mul_X.comp also as mul_X_sg, its teams adding by shuffles */
    char name[48];
    snprintf(name, sizeof name, "%s%s", mul_shader[t], s->d->subgroup_shuffle ? "_sg" : "");
    struct vk_pipe *p;
    if ((st = vk_pipe_get(s->d, name, 3, sizeof push, &p, err, err_len)))
        return st;
    uint32_t groups[3];
    if (tiled) {
        vk_row_grid((n_rows + MUL_TM - 1) / MUL_TM, groups);
        groups[2] = (n_tok + MUL_TN - 1) / MUL_TN;
    } else {
        const uint32_t per_group = MUL_WG / team * MUL_VR;
        vk_row_grid((n_rows + per_group - 1) / per_group, groups);
        groups[2] = n_tok;
    }
    struct vk_buf *bufs[3] = {w, x, y};
    return vk_seq_dispatch(s, p, bufs, push, groups, err, err_len);
}

enum hearth_status vk_op_matmul(struct vk_seq *s, enum dtype t, struct vk_buf *w, struct vk_buf *x,
                                struct vk_buf *y, uint32_t n_in, uint32_t n_out, uint32_t n_tok,
                                char *err, size_t err_len)
{
    return vk_mul_dispatch(s, t, w, 0, n_out, x, y, n_in, n_out, n_tok, err, err_len);
}

enum hearth_status vk_op_rmsnorm(struct vk_seq *s, struct vk_buf *x, struct vk_buf *w,
                                 struct vk_buf *y, uint32_t n, uint32_t n_rows, float eps,
                                 char *err, size_t err_len)
{
    if (n == 0 || n_rows == 0)
        return fail(HEARTH_EINVAL, err, err_len, "vulkan: rmsnorm of %u rows of %u", n_rows, n);
    enum hearth_status st;
    const uint64_t len = (uint64_t)n * n_rows * 4;
    if ((st = vk_check_len("rmsnorm", "the input", x, len, err, err_len)) ||
        (st = vk_check_len("rmsnorm", "the weight", w, (uint64_t)n * 4, err, err_len)) ||
        (st = vk_check_len("rmsnorm", "the output", y, len, err, err_len)))
        return st;
    struct {
        uint32_t n, n_rows;
        float eps;
    } push = {n, n_rows, eps};
    struct vk_pipe *p;
    if ((st = vk_pipe_get(s->d, "rmsnorm", 3, sizeof push, &p, err, err_len)))
        return st;
    uint32_t groups[3];
    vk_row_grid(n_rows, groups);
    struct vk_buf *bufs[3] = {x, w, y};
    return vk_seq_dispatch(s, p, bufs, &push, groups, err, err_len);
}

enum hearth_status vk_op_swiglu(struct vk_seq *s, struct vk_buf *g, struct vk_buf *u, uint32_t n,
                                char *err, size_t err_len)
{
    if (n == 0)
        return fail(HEARTH_EINVAL, err, err_len, "vulkan: swiglu of 0 floats");
    enum hearth_status st;
    if ((st = vk_check_len("swiglu", "the gate", g, (uint64_t)n * 4, err, err_len)) ||
        (st = vk_check_len("swiglu", "the up", u, (uint64_t)n * 4, err, err_len)))
        return st;
    uint32_t groups[3];
    vk_row_grid((n + 255) / 256, groups);
    const uint32_t push[2] = {n, groups[0]};
    struct vk_pipe *p;
    if ((st = vk_pipe_get(s->d, "swiglu", 2, sizeof push, &p, err, err_len)))
        return st;
    struct vk_buf *bufs[2] = {g, u};
    return vk_seq_dispatch(s, p, bufs, push, groups, err, err_len);
}

void vk_rope_angles(const int32_t *pos, uint32_t n_tok, uint32_t n_rot, float base, float *cs)
{
    for (uint32_t t = 0; t < n_tok; t++)
        for (uint32_t i = 0; i < n_rot / 2; i++) {
            const double theta                        = pos[t] * pow(base, -2.0 * i / n_rot);
            cs[2 * ((size_t)t * (n_rot / 2) + i)]     = (float)cos(theta);
            cs[2 * ((size_t)t * (n_rot / 2) + i) + 1] = (float)sin(theta);
        }
}

void vk_rope_angles_ggml(const int32_t *pos, uint32_t n_tok, uint32_t n_rot, float base,
                         const int32_t *sections, float *cs)
{
    const float theta_scale = powf(base, -2.0f / (float)n_rot);
    const uint32_t half     = n_rot / 2;
    int32_t n_sect          = 0;
    for (int i = 0; sections && i < 4; i++)
        n_sect += sections[i];
    for (uint32_t t = 0; t < n_tok; t++) {
        float theta = (float)pos[t];
        for (uint32_t i = 0; i < half; i++) {
            /* a text token's time, height and width positions are all pos; the pairs past
             * their sections take the fourth, 0, and stay as they are */
            const int32_t sec                  = n_sect ? (int32_t)(i % (uint32_t)n_sect) : 0;
            const bool still                   = n_sect && !(sec < 3 * sections[sec % 3]);
            cs[2 * ((size_t)t * half + i)]     = still ? 1.0f : cosf(theta);
            cs[2 * ((size_t)t * half + i) + 1] = still ? 0.0f : sinf(theta);
            theta *= theta_scale;
        }
    }
}

enum hearth_status vk_op_rope(struct vk_seq *s, struct vk_buf *x, struct vk_buf *cs, uint32_t n_tok,
                              uint32_t n_head, uint32_t head_dim, uint32_t n_rot, bool neox,
                              char *err, size_t err_len)
{
    if (n_tok == 0 || n_head == 0 || n_rot == 0 || n_rot % 2 || n_rot > head_dim)
        return fail(HEARTH_EINVAL, err, err_len,
                    "vulkan: rope of %u rows of %u heads of %u, %u rotated (even, <= the head)",
                    n_tok, n_head, head_dim, n_rot);
    enum hearth_status st;
    if ((st = vk_check_len("rope", "the rows", x, (uint64_t)n_tok * n_head * head_dim * 4, err,
                           err_len)) ||
        (st = vk_check_len("rope", "the angles", cs, (uint64_t)n_tok * n_rot * 4, err, err_len)))
        return st;
    const uint32_t push[4] = {head_dim, n_head, n_rot, neox};
    struct vk_pipe *p;
    if ((st = vk_pipe_get(s->d, "rope", 2, sizeof push, &p, err, err_len)))
        return st;
    const uint32_t groups[3] = {n_head, n_tok, 1};
    struct vk_buf *bufs[2]   = {x, cs};
    return vk_seq_dispatch(s, p, bufs, push, groups, err, err_len);
}
