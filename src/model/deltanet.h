/*
 * deltanet.h: Qwen3.5's hybrid layers (qwen35moe): Gated DeltaNet token
 * mixers with their per-sequence recurrent state, and the output-gated
 * attention of its full-attention layers. Internal to src/model.
 */
#ifndef HEARTH_DELTANET_H
#define HEARTH_DELTANET_H

#include <stddef.h>
#include <stdint.h>

#include "hearth.h"

struct hearth_model;
struct hearth_context;
struct hearth_batch;
struct layer;
struct dnet;
struct dnet_cache;

/*
 * qwen35moe's own hyperparameters (ssm.*, full_attention_interval,
 * rope.dimension_sections, nextn_predict_layers): marks each layer as a
 * DeltaNet or a gated attention layer and drops the MTP blocks from
 * hp.n_layer, saying so on stderr. HEARTH_EFORMAT when they do not fit.
 */
enum hearth_status dnet_hparams(struct hearth_model *m, char *err, size_t err_len);

/*
 * Loads layer il of a qwen35moe file into L: the DeltaNet tensors (L->dnet,
 * owned, dnet_free) or the gated attention ones, the norms and the experts.
 */
enum hearth_status dnet_load_layer(struct hearth_model *m, int32_t il, struct layer *L, char *err,
                                   size_t err_len);
void dnet_free(struct dnet *d);

/*
 * The recurrent state of every DeltaNet layer for n_seq sequences (conv
 * window and delta-rule matrices, fixed size, zeroed), and the scratch for
 * micro-batches of up to n_batch tokens. NULL when out of memory.
 */
struct dnet_cache *dnet_cache_new(const struct hearth_model *m, int32_t n_seq, int32_t n_batch);
void dnet_cache_free(struct dnet_cache *c);
/* Zeroes sequence seq's state in every layer: it starts again from no tokens. */
void dnet_cache_reset(struct dnet_cache *c, int32_t seq);

/*
 * One sequence's whole state as a flat copy (a snapshot): every DeltaNet
 * layer's conv window, then every layer's matrices. dnet_state_len: its
 * floats; dnet_state_load makes it sequence seq's state.
 */
size_t dnet_state_len(const struct dnet_cache *c);
void dnet_state_load(struct dnet_cache *c, int32_t seq, const float *src);
/*
 * [n_batch] destinations the next dnet_forward copies each row's state to
 * once that row is mixed in (dnet_state_len floats, every layer's part as
 * that layer runs); NULL rows are not copied. All NULL until set.
 */
float **dnet_snap_rows(struct dnet_cache *c);

/*
 * out[t] = the DeltaNet mixer of layer l over the batch's normed rows in[t]
 * (n_embd floats each), advancing each row's sequence state in batch order.
 * in and out may be the same rows.
 */
void dnet_forward(struct hearth_context *ctx, const struct hearth_batch *b, int32_t l,
                  const float *in, float *out);

/*
 * Gated attention: the q projection carries per head [q (head_dim), gate
 * (head_dim)]. dnet_gate_split moves the q halves of qg's n rows into q
 * and keeps the gates; dnet_gate_apply multiplies the attention output rows
 * by sigmoid(gate). qg: the cache's scratch row buffer dnet_gate_rows gives.
 */
float *dnet_gate_rows(struct hearth_context *ctx);
void dnet_gate_split(struct hearth_context *ctx, float *q, int32_t n);
void dnet_gate_apply(struct hearth_context *ctx, float *att, int32_t n);

#endif
