/*
 * vk_moe.h: the routed mixture-of-experts FFN on a Vulkan device (qwen3moe,
 * qwen35moe), the backend's moe operation (backend.h) kept on the device
 * from the router logits to the residual add: the router matmul, a routing
 * shader per token (softmax, top-k, renormalised weights, the shared
 * expert's sigmoid gate), the experts' matmuls addressed by the chosen ids
 * in stacked weights, SwiGLU, and the weighted sum into the residual. The
 * host never reads which experts a token chose.
 *
 * Expert stacks: a layer's ffn_{gate,up,down}_exps are uploaded whole as
 * one vk_weight each of n_expert * n_out rows (expert e's rows from
 * e * n_out), split by rows across buffers as any weight is; the mul-by-id
 * shader finds an expert's rows in whichever part holds them. A shared
 * expert is its own weight, addressed as expert n_expert.
 *
 * Bits (against the CPU backend, src/backend/cpu/cpu_moe.c): the experts'
 * inputs are rounded to the CPU's activation type where vk_op_act_round
 * can (Q8_0), so the matmuls differ from the CPU's only by f32 summation
 * order; with other types they sum f32 activations; the router's softmax and the
 * shared gate's sigmoid use the device's exp and f32 sums (the CPU's sums
 * run in double), so routing weights differ in the last bits and a token
 * whose two candidate experts are within those bits of each other may
 * choose differently; the combine is the CPU's rounding order.
 * tests/unit/test_vk_moe.c states the bounds.
 */
#ifndef HEARTH_VK_MOE_H
#define HEARTH_VK_MOE_H

#include "backend/vk/vk.h"
#include "util/memacct.h"

/* Whether vk_op_matmul_id reads expert weights of type t. */
bool vk_op_matmul_id_supported(enum dtype t);

/*
 * y[q] = W_e x[q or q / n_slots] for each pair q = t * n_slots + s, t < n_tok, whose expert
 * e = ids[q] is in w: w stacks experts e_base, e_base + 1, ... of n_out rows each (its
 * n_rows a multiple of n_out), y holds n_tok * n_slots rows of n_out f32, x rows of w's n_in
 * f32, one per pair when x_per_slot, else one per token that its slots share. Pairs whose
 * expert is not in w (ids outside e_base .. e_base + n_rows / n_out - 1) are left as they
 * were. The sums are vk_op_matmul's (the same f32 products, a 64-lane tree).
 */
enum hearth_status vk_op_matmul_id(struct vk_seq *s, const struct vk_weight *w, uint32_t n_out,
                                   uint32_t e_base, struct vk_buf *ids, struct vk_buf *x,
                                   bool x_per_slot, struct vk_buf *y, uint32_t n_tok,
                                   uint32_t n_slots, char *err, size_t err_len);

/*
 * Routing per token t < n_tok from logits[t] (n_expert router logits, then the shared
 * expert's gate logit when shexp): ids[t][k], wts[t][k] for k < n_used the most probable
 * experts by softmax (equal probabilities to the lower index) and their probabilities divided
 * by their sum (at least 2^-14), most probable first; with shexp, ids[t][n_used] = n_expert
 * and wts[t][n_used] = sigmoid(gate logit). ids int32, wts f32, n_used + shexp per token.
 */
enum hearth_status vk_op_moe_route(struct vk_seq *s, struct vk_buf *logits, struct vk_buf *ids,
                                   struct vk_buf *wts, uint32_t n_tok, uint32_t n_expert,
                                   uint32_t n_used, bool shexp, char *err, size_t err_len);

/*
 * x[t] += sum over s < n_slots of wts[t][s] * o[t][s] for t < n_tok, rows of n_embd f32:
 * each product rounded and added slot by slot, then the sum added to x (the CPU's bits for
 * the same inputs).
 */
enum hearth_status vk_op_moe_combine(struct vk_seq *s, struct vk_buf *x, struct vk_buf *o,
                                     struct vk_buf *wts, uint32_t n_tok, uint32_t n_embd,
                                     uint32_t n_slots, char *err, size_t err_len);

/* One layer's experts on the device: what vk_moe_ffn reads. */
struct vk_moe_layer {
    const struct vk_weight *router;  /* (n_embd -> n_expert) ffn_gate_inp */
    struct vk_buf *shexp_gate;       /* f32 [n_embd] ffn_gate_inp_shexp, or NULL: no shared
                                        expert */
    const struct vk_weight *gate;    /* n_expert * n_ff rows of n_embd: ffn_gate_exps */
    const struct vk_weight *up;      /* the same for ffn_up_exps */
    const struct vk_weight *down;    /* n_expert * n_embd rows of n_ff: ffn_down_exps */
    const struct vk_weight *sh_gate; /* the shared expert's n_ff rows of n_embd, with */
    const struct vk_weight *sh_up;   /* shexp_gate; else NULL */
    const struct vk_weight *sh_down; /* its n_embd rows of n_ff */
    enum dtype act;                  /* gate's and up's inputs rounded to this activation type
                                        first (vk_op_act_round), or DTYPE_F32: as they are */
    enum dtype act_down;             /* the same for down's input */
    uint32_t n_expert, n_used, n_ff, n_embd;
};

/* A context's working buffers for vk_moe_ffn: router logits, routing, expert activations. */
struct vk_moe_scratch;

/*
 * Buffers on d for batches of up to n_batch tokens of layers of the given shape (n_slots:
 * n_used, plus one with a shared expert), their bytes added to acct (MEM_COMPUTE; NULL:
 * not counted). HEARTH_ENOMEM with a sentence. Freed by vk_moe_scratch_free, which takes
 * NULL.
 */
enum hearth_status vk_moe_scratch_new(struct vk_dev *d, uint32_t n_batch, uint32_t n_embd,
                                      uint32_t n_ff, uint32_t n_expert, uint32_t n_slots,
                                      struct mem_acct *acct, struct vk_moe_scratch **out, char *err,
                                      size_t err_len);
void vk_moe_scratch_free(struct vk_moe_scratch *sc);

/*
 * x[t] += MoE(xb[t]) for t < n_tok (rows of n_embd f32), recorded into s: the router, the
 * routing, each token's experts' SwiGLU FFN and the shared expert's, the weighted sum.
 * HEARTH_EINVAL with a sentence when L's shapes do not fit sc or each other.
 */
enum hearth_status vk_moe_ffn(struct vk_seq *s, const struct vk_moe_layer *L,
                              struct vk_moe_scratch *sc, struct vk_buf *xb, struct vk_buf *x,
                              uint32_t n_tok, char *err, size_t err_len);

#endif
