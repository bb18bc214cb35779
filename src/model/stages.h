/*
 * stages.h: a context's stages (stages.c). Each stage is a contiguous range
 * of layers on one backend, with that backend's own state (its activation
 * buffers, its layers' recurrent state, its layers' K/V memory when the
 * backend keeps it). While a stage runs, ctx->be is its state and ctx->st
 * the stage, so the backend's operations keep their signatures and read
 * their layer range from ctx->st->place. The residual stream crosses a
 * boundary through the host (ctx->x_host), once per boundary per batch.
 * Not thread-safe: the context's one thread.
 */
#ifndef HEARTH_STAGES_H
#define HEARTH_STAGES_H

#include <stdint.h>

#include "model/model.h"

/* One GPU the offloaded layers use, and its share of them (any scale, >= 0, not all 0). */
struct gpu_share {
    const struct backend *be;
    int device;
    double share;
};

/*
 * -ngl's placement: the last ngl layers on the GPUs, split into contiguous
 * ranges in the order given in proportion to their shares (a GPU whose share
 * rounds to no layer gets no stage), the rest on cpu, and the output on the
 * last GPU only when ngl > n_layer, as llama.cpp places them. Taking the
 * backends as arguments lets tests place stand-ins. HEARTH_OK.
 */
enum hearth_status model_place_ngl(struct hearth_model *m, int32_t ngl, const struct backend *cpu,
                                   const struct gpu_share *gpus, int n_gpu);

/* Makes stage i current: ctx->st, and ctx->be its backend state. */
void stage_enter(struct hearth_context *ctx, int32_t i);

/*
 * Runs every stage's ctx_init in order (ctx->kv initialised), sums their
 * recurrent state into ctx->state_len, and allocates the crossing buffer.
 * HEARTH_ENOMEM with a sentence; stages_free undoes a partial init too.
 */
enum hearth_status stages_init(struct hearth_context *ctx, char *err, size_t err_len);
void stages_free(struct hearth_context *ctx);

/* Hands ACT_X's n rows from the current stage to stage `to`, which becomes current. */
void stages_cross(struct hearth_context *ctx, int32_t to, int32_t n);

/* Every stage's seq_reset; state_load of a whole-model state (the stages' shares, in order). */
void stages_seq_reset(struct hearth_context *ctx, int32_t seq);
void stages_state_load(struct hearth_context *ctx, int32_t seq, const float *src);
/* Gives each stage's state_save_rows ctx->snap_rows[0..n) offset to that stage's share. */
void stages_state_save_plan(struct hearth_context *ctx, int32_t n);

/*
 * kv.c's copy hook (struct kv_cache's copy): block src's first n_rows rows
 * to block dst in pool `group`, for every stage whose backend keeps its own
 * K/V memory (kv.c has copied the host pool's layers). arg: the context.
 */
void stages_kv_copy(void *arg, int group, int32_t dst, int32_t src, int32_t n_rows);

#endif
