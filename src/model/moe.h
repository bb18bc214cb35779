/*
 * moe.h: the routed mixture-of-experts FFN (qwen3moe, qwen35moe): a router
 * picks n_expert_used of n_expert SwiGLU experts per token, and their outputs
 * are summed with the router's renormalised weights, plus, when the file has
 * one, a shared expert weighted by sigmoid(ffn_gate_inp_shexp . x).
 * Loading is the model's; the arithmetic is the
 * backend's moe operation (src/backend/backend.h, cpu_moe.c on the CPU).
 */
#ifndef HEARTH_MOE_H
#define HEARTH_MOE_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"

/* struct moe is model/types.h's. */

/*
 * Reads <arch>.expert_count, expert_used_count and expert_feed_forward_length
 * into m->hp. A file without expert_count is dense (n_expert 0) and OK.
 * HEARTH_EFORMAT with a sentence in err when the counts do not fit together.
 */
enum hearth_status moe_load_hparams(struct hearth_model *m, char *err, size_t err_len);

/*
 * Loads layer il's router and stacked experts (blk.<il>.ffn_gate_inp,
 * ffn_{gate,up,down}_exps), checking shapes and types, and prepares each
 * expert's slice for the backend (model_prepare_weight), or, for a backend
 * with moe_stacks, the router and the whole stacks. *out is owned by the
 * caller (moe_free, with the same layer, whose stage's backend releases the copies); NULL on
 * error.
 */
enum hearth_status moe_load(struct hearth_model *m, int32_t il, struct moe **out, char *err,
                            size_t err_len);
void moe_free(const struct hearth_model *m, int32_t il, struct moe *moe);

#endif
