/*
 * capture.h: a target's layer inputs kept for a block drafter (EAGLE-3,
 * DFlash), which fuses the residual stream entering a few named layers of
 * the target, as llama.cpp's extraction of "layer inputs" takes it: the
 * stream before the layer's attention norm. After each decode the rows of
 * that batch are there for every named layer, on the host. One buffer of
 * n_batch * n_embd floats per named layer; nothing when none are named.
 */
#ifndef HEARTH_MODEL_CAPTURE_H
#define HEARTH_MODEL_CAPTURE_H

#include <stddef.h>
#include <stdint.h>

#include "hearth.h"

struct capture;

/*
 * From the next decode on, ctx keeps the inputs of layers[0..n) (each
 * 0..n_layer-1, n <= 8), in that order. HEARTH_EINVAL for a layer the
 * model has not; HEARTH_ENOMEM. Once per context.
 */
enum hearth_status capture_layers(struct hearth_context *ctx, const int32_t *layers, int32_t n,
                                  char *err, size_t err_len);

/* The input of the k-th named layer at row i of the last batch (n_embd floats), or NULL. */
const float *capture_row(const struct hearth_context *ctx, int32_t k, int32_t i);

/* The forward pass's hook: keeps the residual of the n rows entering layer l when it is named. */
void capture_layer_input(struct hearth_context *ctx, int32_t l, int32_t n);

void capture_free(struct capture *c);

#endif
