/*
 * dflash.h: the DFlash block drafter (--spec dflash --model-draft FILE).
 * Every target position P gets K/V in the drafter's layers from g_P, the
 * inputs of the named target layers at P fused through `fc` and an RMS
 * norm; a draft is one non-causal pass of the drafter over [the last
 * token, n_draft mask tokens] at the positions after the target's,
 * attending to those K/V and to each other, the target's LM head reading
 * the first k masks' outputs. Its cache holds every layer's K/V per slot, on the host. It
 * follows the target as eagle3.h's does. Scheduler thread only.
 */
#ifndef HEARTH_SPEC_DFLASH_H
#define HEARTH_SPEC_DFLASH_H

#include <stddef.h>
#include <stdint.h>

#include "hearth.h"

struct dflash;

/*
 * Opens the drafter at path for target, for n_slots sequences of n_ctx
 * positions, its passes n_draft masks long (the most drafts a step asks,
 * at most block_size - 1), and has tctx keep the layer inputs it reads.
 * HEARTH_EFORMAT / EINVAL with the reason, HEARTH_ENOMEM.
 */
enum hearth_status dflash_open(const char *path, const struct hearth_model *target,
                               struct hearth_context *tctx, int32_t n_slots, int32_t n_ctx,
                               int32_t n_batch, int32_t n_draft, struct dflash **out, char *err,
                               size_t err_len);
void dflash_free(struct dflash *d);

/* After a target decode of b: the K/V of each row's position. */
void dflash_observe(struct dflash *d, const struct hearth_batch *b);
/* The slot's target holds n_keep tokens now (0: the job ended). */
void dflash_rewind(struct dflash *d, int32_t slot, int32_t n_keep);
/* Up to k drafts after tokens[0..n_tokens) into out; how many (0: none). */
int32_t dflash_propose(struct dflash *d, int32_t slot, const hearth_token *tokens, int32_t n_tokens,
                       int32_t k, hearth_token *out);

/* Bytes the drafter of the file at path maps (its weights) and allocates. */
enum hearth_status dflash_bytes(const char *path, int32_t n_slots, int32_t n_ctx, int32_t n_batch,
                                uint64_t *weights, uint64_t *buffers, char *err, size_t err_len);

#endif
