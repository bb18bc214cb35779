/*
 * gemma4.h: Gemma 4's layers as the model loads them: window and full
 * layers of different head widths and KV heads, full layers whose V is
 * their K, the last layers reusing an earlier layer's K/V, proportional
 * rope, double-width FFNs, a scalar output scale per layer and per-layer
 * input embeddings. Their arithmetic is the backend's (qkv_store,
 * attention, ple_input, layer_tail in backend.h).
 */
#ifndef HEARTH_GEMMA4_H
#define HEARTH_GEMMA4_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"

/*
 * gemma4's hyperparameters: the window pattern, each kind's head width,
 * KV heads and rotated dims, the shared-KV layers and which layer each
 * reuses, the per-layer FFN widths, the per-layer embedding width.
 * HEARTH_EFORMAT when they do not fit.
 */
enum hearth_status gemma4_hparams(struct hearth_model *m, char *err, size_t err_len);

/* Loads layer il of a gemma4 file into L, and with il = 0 the model's own gemma4 tensors. */
enum hearth_status gemma4_load_layer(struct hearth_model *m, int32_t il, struct layer *L, char *err,
                                     size_t err_len);

#endif
