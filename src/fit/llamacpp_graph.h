/*
 * llamacpp_graph.h: llama.cpp's CPU compute buffer for a llama-server run,
 * by replaying ggml's allocator (ggml_replay.h) over the reserve graphs
 * llama.cpp builds for the model's family (llamacpp_graph.c).
 */
#ifndef HEARTH_FIT_LLAMACPP_GRAPH_H
#define HEARTH_FIT_LLAMACPP_GRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include "util/dtype.h"

struct hearth_model;

/* The most routed experts llama.cpp loads (LLAMA_MAX_EXPERTS); it refuses a file with more. */
#define LLAMACPP_MAX_EXPERTS 1024

struct llamacpp_graph {
    int64_t n_tokens;  /* the prompt graph's micro-batch: min(n_ctx, n_ubatch) */
    int64_t n_seq_max; /* slots: the sequences of a batch, the recurrent cache's rows */
    int64_t n_stream;  /* K/V streams: 1 when unified, else one a slot */
    int64_t cells;     /* K/V cells a stream */
    int64_t swa_cells; /* a sliding-window cache's cells a stream */
    bool flash_attn;
    enum dtype type_k, type_v;
    int64_t k_rot, v_rot; /* the Hadamard rotations' widths for a quantized K and V; 0 = none */
};

/*
 * The compute buffer's bytes: the largest of llama_context's reserves (the
 * prompt graph, then one token a sequence). 0 when out of memory.
 */
uint64_t llamacpp_graph_compute(const struct hearth_model *m, const struct llamacpp_graph *p);

#endif
