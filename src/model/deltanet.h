/*
 * deltanet.h: Qwen3.5's hybrid layers (qwen35moe, qwen35): Gated DeltaNet token
 * mixers and the output-gated attention of its full-attention layers, as
 * the model loads them. Their arithmetic and the per-sequence recurrent
 * state are the backend's deltanet operation and the gate in its qkv_store
 * and attention (backend.h; the CPU's: src/backend/cpu/cpu_deltanet.c).
 */
#ifndef HEARTH_DELTANET_H
#define HEARTH_DELTANET_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"

/* struct dnet and struct dnet_dims are model/types.h's. */

/*
 * Qwen3.5's own hyperparameters (ssm.*, full_attention_interval,
 * rope.dimension_sections, nextn_predict_layers): marks each layer as a
 * DeltaNet or a gated attention layer and drops the MTP blocks from
 * hp.n_layer, saying so on stderr. HEARTH_EFORMAT when they do not fit.
 */
enum hearth_status dnet_hparams(struct hearth_model *m, char *err, size_t err_len);

/* The shapes of m's DeltaNet layers, once dnet_hparams has accepted them. */
struct dnet_dims dnet_dims_of(const struct hearth_model *m);

/*
 * Loads layer il of a qwen35moe or qwen35 file into L: the DeltaNet tensors
 * (L->dnet, owned, dnet_free) or the gated attention ones, the norms, and
 * the experts (L->moe) or the dense FFN (L->w_gate, w_up, w_down).
 */
enum hearth_status dnet_load_layer(struct hearth_model *m, int32_t il, struct layer *L, char *err,
                                   size_t err_len);
void dnet_free(const struct hearth_model *m, int32_t il, struct dnet *d);

#endif
