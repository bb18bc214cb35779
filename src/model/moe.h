/*
 * moe.h: the routed mixture-of-experts FFN (qwen3moe, qwen35moe): a router
 * picks n_expert_used of n_expert SwiGLU experts per token, and their outputs
 * are summed with the router's renormalised weights, plus, when the file has
 * one, a shared expert weighted by sigmoid(ffn_gate_inp_shexp . x).
 * Loading is the model's; moe_scratch_* and moe_ffn are the CPU backend's
 * implementation of its moe operation (src/backend/backend.h).
 */
#ifndef HEARTH_MOE_H
#define HEARTH_MOE_H

#include <stddef.h>
#include <stdint.h>

#include "hearth.h"

struct hearth_model;
struct hearth_context;
struct hparams;
struct moe;
struct moe_scratch;

/*
 * Reads <arch>.expert_count, expert_used_count and expert_feed_forward_length
 * into m->hp. A file without expert_count is dense (n_expert 0) and OK.
 * HEARTH_EFORMAT with a sentence in err when the counts do not fit together.
 */
enum hearth_status moe_load_hparams(struct hearth_model *m, char *err, size_t err_len);

/*
 * Loads layer il's router and stacked experts (blk.<il>.ffn_gate_inp,
 * ffn_{gate,up,down}_exps), checking shapes and types, and repacks each
 * expert's slice for the backend (model_prepare_weight). *out is owned by the
 * caller (moe_free); NULL on error.
 */
enum hearth_status moe_load(struct hearth_model *m, int32_t il, struct moe **out, char *err,
                            size_t err_len);
void moe_free(struct moe *moe);

/* Scratch for micro-batches of up to n_batch tokens; NULL when out of memory. */
struct moe_scratch *moe_scratch_new(const struct hparams *hp, int32_t n_batch);
void moe_scratch_free(struct moe_scratch *s);

/*
 * x[t] += MoE-FFN(in[t]) for the n rows of the batch (rows n_embd floats):
 * in is the FFN-normed residual, x the residual stream. n_gemm: how many
 * rows llama.cpp would run this FFN on (fewer than n in the last layer,
 * which it runs on the output rows only), which picks the summation order
 * of an f32 router. Runs on the CPU backend's pool, with its moe scratch.
 */
void moe_ffn(struct hearth_context *ctx, const struct moe *moe, const float *in, float *x,
             int32_t n, int32_t n_gemm);

#endif
