/*
 * deltanet.h: Qwen3.5's hybrid layers (qwen35moe): Gated DeltaNet token
 * mixers and the output-gated attention of its full-attention layers, as
 * the model loads them. Their arithmetic and the per-sequence recurrent
 * state are the backend's deltanet operation and the gate in its qkv_store
 * and attention (backend.h; the CPU's: src/backend/cpu_deltanet.c).
 */
#ifndef HEARTH_DELTANET_H
#define HEARTH_DELTANET_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"

/* A DeltaNet layer's tensors (struct layer's dnet). */
struct dnet {
    struct weight wqkv;  /* (n_embd -> conv_dim) q, k, v before the conv */
    struct weight wgate; /* (n_embd -> value_dim) z, the output gate */
    struct weight wbeta; /* (n_embd -> n_v_heads) write strength before sigmoid */
    struct weight walpha;/* (n_embd -> n_v_heads) decay input */
    struct weight wout;  /* (value_dim -> n_embd) */
    float *conv;         /* [conv_dim][n_conv] conv taps, oldest input first */
    float *dt_bias;      /* [n_v_heads] */
    float *a;            /* [n_v_heads] ssm_a = -exp(A_log) */
    float *norm;         /* [state_size] the gated RMSNorm's weight */
    int32_t slot;        /* index among the model's DeltaNet layers (state layout) */
};

/* Shapes shared by every DeltaNet layer of a model. */
struct dnet_dims {
    int32_t n_conv;  /* conv taps (ssm.conv_kernel), 2..16 */
    int32_t S;       /* state_size: width of every key and value head */
    int32_t n_k;     /* key heads (ssm.group_count) */
    int32_t n_v;     /* value heads (ssm.time_step_rank), a multiple of n_k */
    int32_t conv_dim;/* 2 n_k S + n_v S */
};

/*
 * qwen35moe's own hyperparameters (ssm.*, full_attention_interval,
 * rope.dimension_sections, nextn_predict_layers): marks each layer as a
 * DeltaNet or a gated attention layer and drops the MTP blocks from
 * hp.n_layer, saying so on stderr. HEARTH_EFORMAT when they do not fit.
 */
enum hearth_status dnet_hparams(struct hearth_model *m, char *err, size_t err_len);

/* The shapes of m's DeltaNet layers, once dnet_hparams has accepted them. */
struct dnet_dims dnet_dims_of(const struct hearth_model *m);

/*
 * Loads layer il of a qwen35moe file into L: the DeltaNet tensors (L->dnet,
 * owned, dnet_free) or the gated attention ones, the norms and the experts.
 */
enum hearth_status dnet_load_layer(struct hearth_model *m, int32_t il, struct layer *L, char *err,
                                   size_t err_len);
void dnet_free(const struct hearth_model *m, int32_t il, struct dnet *d);

#endif
