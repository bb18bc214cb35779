/*
 * llamacpp_hybrid.h: llama.cpp's CPU compute buffer for the hybrid
 * DeltaNet family (qwen35moe), by replaying ggml's allocator over the
 * reserve graphs llama-server builds (llamacpp_hybrid.c).
 */
#ifndef HEARTH_FIT_LLAMACPP_HYBRID_H
#define HEARTH_FIT_LLAMACPP_HYBRID_H

#include <stdbool.h>
#include <stdint.h>

#include "util/dtype.h"

struct hearth_model;

struct llamacpp_hybrid {
    int64_t n_tokens;  /* the prompt graph's micro-batch: min(n_ctx, n_ubatch) */
    int64_t n_seq_max; /* slots: the recurrent cache's rows, the sequences of a batch */
    int64_t n_stream;  /* K/V streams: 1 when unified, else one a slot */
    int64_t cells;     /* K/V cells a stream */
    bool flash_attn;
    enum dtype type_k, type_v;
    int64_t k_rot, v_rot; /* the Hadamard rotations' widths for a quantized K and V; 0 = none */
    bool gate_up_merged;  /* the experts' gate and up in one tensor (ffn_gate_up_exps) */
    bool expert_scale;    /* expert_weights_scale other than 0 and 1: the weights are scaled */
};

/* The compute buffer's bytes: the larger of the prompt and the one-token reserve. 0: no memory. */
uint64_t llamacpp_hybrid_compute(const struct hearth_model *m, const struct llamacpp_hybrid *p);

#endif
