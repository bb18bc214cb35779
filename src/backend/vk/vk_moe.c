/*
 * vk_moe.c: the routed experts on the device (vk_moe.h): the mul-by-id
 * matmul over stacked expert weights, the routing and combining shaders,
 * and the layer's sequence of dispatches. A layer is about a dozen
 * dispatches whatever its expert count: every pair of (token, slot) is
 * one z-row of each expert matmul, so nothing depends on which experts
 * were chosen.
 */
#include <stdlib.h>

#include "backend/vk/vk_internal.h"
#include "backend/vk/vk_memlaw.h"
#include "backend/vk/vk_moe.h"
#include "model/types.h"
#include "util/errfmt.h"

/* clang-format off */
static const char *const mul_id_shader[DTYPE_COUNT] = {
    [DTYPE_F32] = "mul_id_f32", [DTYPE_F16] = "mul_id_f16", [DTYPE_Q8_0] = "mul_id_q8_0",
    [DTYPE_Q4_0] = "mul_id_q4_0", [DTYPE_Q4_K] = "mul_id_q4_k", [DTYPE_Q5_K] = "mul_id_q5_k",
    [DTYPE_Q6_K] = "mul_id_q6_k", [DTYPE_BF16] = "mul_id_bf16", [DTYPE_Q4_1] = "mul_id_q4_1",
    [DTYPE_Q5_0] = "mul_id_q5_0", [DTYPE_Q5_1] = "mul_id_q5_1", [DTYPE_Q2_K] = "mul_id_q2_k",
    [DTYPE_Q3_K] = "mul_id_q3_k", [DTYPE_IQ4_NL] = "mul_id_iq4_nl", [DTYPE_IQ4_XS] = "mul_id_iq4_xs",
};
/* clang-format on */

bool vk_op_matmul_id_supported(enum dtype t)
{
    return (unsigned)t < DTYPE_COUNT && mul_id_shader[t];
}

enum hearth_status vk_op_matmul_id(struct vk_seq *s, const struct vk_weight *w, uint32_t n_out,
                                   uint32_t e_base, struct vk_buf *ids, struct vk_buf *x,
                                   bool x_per_slot, struct vk_buf *y, uint32_t n_tok,
                                   uint32_t n_slots, char *err, size_t err_len)
{
    enum dtype t;
    uint32_t n_in, n_rows;
    vk_weight_shape(w, &t, &n_in, &n_rows);
    if (!vk_op_matmul_id_supported(t))
        return fail(HEARTH_EUNSUPPORTED, err, err_len, "vulkan: no expert matmul for %s weights",
                    dtype_name(t));
    if (n_out == 0 || n_rows % n_out || n_tok == 0 || n_slots == 0)
        return fail(HEARTH_EINVAL, err, err_len,
                    "vulkan: an expert matmul of %u rows in experts of %u, %u tokens of %u slots",
                    n_rows, n_out, n_tok, n_slots);
    const uint64_t n_pairs = (uint64_t)n_tok * n_slots;
    const uint64_t x_rows  = x_per_slot ? n_pairs : n_tok;
    enum hearth_status st;
    if ((st = vk_check_len("expert matmul", "the ids", ids, n_pairs * 4, err, err_len)) ||
        (st = vk_check_len("expert matmul", "the input", x, x_rows * n_in * 4, err, err_len)) ||
        (st = vk_check_len("expert matmul", "the output", y, n_pairs * n_out * 4, err, err_len)))
        return st;
    const uint32_t row_len = (uint32_t)dtype_row_len(t, n_in);
    struct vk_pipe *p;
    struct {
        uint32_t n_in, n_out, n_pairs, row_len, row0, n_rows, e_base, n_slots, x_per_slot, pair0;
    } push = {n_in, n_out, (uint32_t)n_pairs, row_len, 0, 0, e_base, n_slots, x_per_slot, 0};
    if ((st = vk_pipe_get(s->d, mul_id_shader[t], 4, sizeof push, &p, err, err_len)))
        return st;
    uint32_t groups[3];
    vk_row_grid(n_out, groups);
    const uint32_t z_max = s->d->max_groups[2];
    for (uint32_t i = 0; i < vk_weight_parts(w) && !st; i++) {
        struct vk_buf *bufs[4] = {vk_weight_part(w, i, &push.row0, &push.n_rows), x, y, ids};
        for (push.pair0 = 0; push.pair0 < n_pairs && !st; push.pair0 += z_max) {
            groups[2] = n_pairs - push.pair0 < z_max ? (uint32_t)n_pairs - push.pair0 : z_max;
            st        = vk_seq_dispatch(s, p, bufs, &push, groups, err, err_len);
        }
    }
    return st;
}

/* Elements per workgroup of the elementwise shaders (elementwise.glsl). */
#define ELEM_WG 256

enum hearth_status vk_op_moe_route(struct vk_seq *s, struct vk_buf *logits, struct vk_buf *ids,
                                   struct vk_buf *wts, uint32_t n_tok, uint32_t n_expert,
                                   uint32_t n_used, bool shexp, char *err, size_t err_len)
{
    if (n_tok == 0 || n_used == 0 || n_used > n_expert)
        return fail(HEARTH_EINVAL, err, err_len,
                    "vulkan: routing %u tokens to %u of %u experts (1..the expert count)", n_tok,
                    n_used, n_expert);
    const uint64_t slots = (uint64_t)n_tok * (n_used + shexp);
    enum hearth_status st;
    if ((st = vk_check_len("routing", "the logits", logits,
                           (uint64_t)n_tok * (n_expert + shexp) * 4, err, err_len)) ||
        (st = vk_check_len("routing", "the ids", ids, slots * 4, err, err_len)) ||
        (st = vk_check_len("routing", "the weights", wts, slots * 4, err, err_len)))
        return st;
    uint32_t groups[3];
    vk_row_grid((n_tok + ELEM_WG - 1) / ELEM_WG, groups);
    const uint32_t push[5] = {n_tok, groups[0], n_expert, n_used, shexp};
    struct vk_pipe *p;
    if ((st = vk_pipe_get(s->d, "moe_route", 3, sizeof push, &p, err, err_len)))
        return st;
    struct vk_buf *bufs[3] = {logits, ids, wts};
    return vk_seq_dispatch(s, p, bufs, push, groups, err, err_len);
}

enum hearth_status vk_op_moe_combine(struct vk_seq *s, struct vk_buf *x, struct vk_buf *o,
                                     struct vk_buf *wts, uint32_t n_tok, uint32_t n_embd,
                                     uint32_t n_slots, char *err, size_t err_len)
{
    const uint64_t n = (uint64_t)n_tok * n_embd;
    if (n == 0 || n_slots == 0 || n > UINT32_MAX)
        return fail(HEARTH_EINVAL, err, err_len,
                    "vulkan: combining %u tokens of %u floats from %u slots", n_tok, n_embd,
                    n_slots);
    enum hearth_status st;
    if ((st = vk_check_len("combine", "the residual", x, n * 4, err, err_len)) ||
        (st = vk_check_len("combine", "the experts' outputs", o, n * n_slots * 4, err, err_len)) ||
        (st = vk_check_len("combine", "the weights", wts, (uint64_t)n_tok * n_slots * 4, err,
                           err_len)))
        return st;
    uint32_t groups[3];
    vk_row_grid((uint32_t)((n + ELEM_WG - 1) / ELEM_WG), groups);
    const uint32_t push[4] = {(uint32_t)n, groups[0], n_embd, n_slots};
    struct vk_pipe *p;
    if ((st = vk_pipe_get(s->d, "moe_combine", 3, sizeof push, &p, err, err_len)))
        return st;
    struct vk_buf *bufs[3] = {x, o, wts};
    return vk_seq_dispatch(s, p, bufs, push, groups, err, err_len);
}

/* ------------------------------------------------------------- a layer --- */

struct vk_moe_scratch {
    uint32_t n_batch, n_embd, n_ff, n_expert, n_slots; /* what the buffers hold at most */
    struct vk_buf *logits; /* [n_batch][n_expert + 1] router logits, the shared gate's last */
    struct vk_buf *xq;     /* [n_batch][n_embd] the experts' input, rounded (layer act) */
    struct vk_buf *ids;    /* int32 [n_batch][n_slots] chosen experts */
    struct vk_buf *wts;    /* [n_batch][n_slots] their weights */
    struct vk_buf *hg;     /* [n_batch * n_slots][n_ff] gate outputs, then SwiGLU's */
    struct vk_buf *hu;     /* [n_batch * n_slots][n_ff] up outputs */
    struct vk_buf *out;    /* [n_batch * n_slots][n_embd] down outputs */
};

enum hearth_status vk_moe_scratch_new(struct vk_dev *d, uint32_t n_batch, uint32_t n_embd,
                                      uint32_t n_ff, uint32_t n_expert, uint32_t n_slots,
                                      struct mem_acct *acct, struct vk_moe_scratch **out, char *err,
                                      size_t err_len)
{
    *out                      = NULL;
    struct vk_moe_scratch *sc = calloc(1, sizeof *sc);
    if (!sc)
        return fail(HEARTH_ENOMEM, err, err_len, "vulkan: out of memory");
    *sc = (struct vk_moe_scratch){.n_batch  = n_batch,
                                  .n_embd   = n_embd,
                                  .n_ff     = n_ff,
                                  .n_expert = n_expert,
                                  .n_slots  = n_slots};
    struct memlaw_vk_moe law;
    memlaw_vk_moe(n_batch, n_embd, n_ff, n_expert, n_slots, &law);
    enum hearth_status st;
    const size_t len[]    = {law.logits, law.xq, law.ids, law.wts, law.hg, law.hu, law.out};
    struct vk_buf **buf[] = {&sc->logits, &sc->xq, &sc->ids, &sc->wts, &sc->hg, &sc->hu, &sc->out};
    for (size_t i = 0; i < sizeof len / sizeof len[0]; i++) {
        if ((st = vk_buf_new(d, len[i], buf[i], err, err_len))) {
            vk_moe_scratch_free(sc);
            return st;
        }
        if (acct)
            acct->b[MEM_COMPUTE] += len[i];
    }
    *out = sc;
    return HEARTH_OK;
}

void vk_moe_scratch_free(struct vk_moe_scratch *sc)
{
    if (!sc)
        return;
    vk_buf_free(sc->logits);
    vk_buf_free(sc->xq);
    vk_buf_free(sc->ids);
    vk_buf_free(sc->wts);
    vk_buf_free(sc->hg);
    vk_buf_free(sc->hu);
    vk_buf_free(sc->out);
    free(sc);
}

/* Whether w is rows x n_in, or absent when it may be. */
static bool shaped(const struct vk_weight *w, uint32_t rows, uint32_t n_in)
{
    enum dtype t;
    uint32_t i, r;
    vk_weight_shape(w, &t, &i, &r);
    return r == rows && i == n_in;
}

static enum hearth_status check_layer(const struct vk_moe_layer *L, const struct vk_moe_scratch *sc,
                                      uint32_t n_tok, char *err, size_t err_len)
{
    const bool sh    = L->shexp_gate != NULL;
    const uint32_t E = L->n_expert, f = L->n_ff, d = L->n_embd;
    if (n_tok == 0 || n_tok > sc->n_batch || E > sc->n_expert || f > sc->n_ff || d != sc->n_embd ||
        L->n_used + sh > sc->n_slots || L->n_used == 0 || L->n_used > E)
        return fail(HEARTH_EINVAL, err, err_len,
                    "vulkan: a MoE layer of %u tokens, %u of %u experts of %u x %u does not fit "
                    "its scratch (%u tokens, %u slots of %u experts of %u x %u)",
                    n_tok, L->n_used, E, f, d, sc->n_batch, sc->n_slots, sc->n_expert, sc->n_ff,
                    sc->n_embd);
    if (!shaped(L->router, E, d) || !shaped(L->gate, E * f, d) || !shaped(L->up, E * f, d) ||
        !shaped(L->down, E * d, f) ||
        (sh && !(L->sh_gate && L->sh_up && L->sh_down && shaped(L->sh_gate, f, d) &&
                 shaped(L->sh_up, f, d) && shaped(L->sh_down, d, f))))
        return fail(HEARTH_EINVAL, err, err_len,
                    "vulkan: a MoE layer's weights are not %u experts of %u x %u", E, f, d);
    return HEARTH_OK;
}

enum hearth_status vk_moe_ffn(struct vk_seq *s, const struct vk_moe_layer *L,
                              struct vk_moe_scratch *sc, struct vk_buf *xb, struct vk_buf *x,
                              uint32_t n_tok, char *err, size_t err_len)
{
    enum hearth_status st;
    if ((st = check_layer(L, sc, n_tok, err, err_len)))
        return st;
    const bool sh    = L->shexp_gate != NULL;
    const uint32_t E = L->n_expert, f = L->n_ff, d = L->n_embd, K = L->n_used + sh;
    enum dtype rt;
    uint32_t r_in, r_rows;
    vk_weight_shape(L->router, &rt, &r_in, &r_rows);
    /* the router's logits and the shared gate's share rows, so one routing pass reads both */
    for (uint32_t i = 0; i < vk_weight_parts(L->router) && !st; i++) {
        uint32_t row0, n_rows;
        struct vk_buf *b = vk_weight_part(L->router, i, &row0, &n_rows);
        st =
            vk_mul_dispatch(s, rt, b, row0, n_rows, xb, sc->logits, d, E + sh, n_tok, err, err_len);
    }
    if (sh && !st)
        st = vk_mul_dispatch(s, DTYPE_F32, L->shexp_gate, E, 1, xb, sc->logits, d, E + 1, n_tok,
                             err, err_len);
    if (!st)
        st =
            vk_op_moe_route(s, sc->logits, sc->ids, sc->wts, n_tok, E, L->n_used, sh, err, err_len);
    /* gate and up of every pair from its token's row; the shared expert is expert E */
    const bool round  = L->act != DTYPE_F32;
    struct vk_buf *in = round ? sc->xq : xb;
    if (round && !st)
        st = vk_op_act_round(s, L->act, xb, in, n_tok * d, err, err_len);
    const struct vk_weight *gu[2][2] = {{L->gate, L->sh_gate}, {L->up, L->sh_up}};
    struct vk_buf *gu_out[2]         = {sc->hg, sc->hu};
    for (int m = 0; m < 2 && !st; m++)
        for (int j = 0; j < 1 + sh && !st; j++)
            st = vk_op_matmul_id(s, gu[m][j], f, j ? E : 0, sc->ids, in, false, gu_out[m], n_tok, K,
                                 err, err_len);
    if (!st)
        st = vk_op_swiglu(s, sc->hg, sc->hu, n_tok * K * f, err, err_len);
    if (L->act_down != DTYPE_F32 && !st)
        st = vk_op_act_round(s, L->act_down, sc->hg, sc->hg, n_tok * K * f, err, err_len);
    const struct vk_weight *down[2] = {L->down, L->sh_down};
    for (int j = 0; j < 1 + sh && !st; j++)
        st = vk_op_matmul_id(s, down[j], d, j ? E : 0, sc->ids, sc->hg, true, sc->out, n_tok, K,
                             err, err_len);
    if (!st)
        st = vk_op_moe_combine(s, x, sc->out, sc->wts, n_tok, d, K, err, err_len);
    return st;
}
