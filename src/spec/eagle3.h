/*
 * eagle3.h: the EAGLE-3 drafter (--spec eagle3 --model-draft FILE): one
 * decoder layer fed at position P with the embedding of token P + 1 and a
 * feature vector g_P, the inputs of three target layers at P fused through
 * `fc`; its next g is its own pre-norm output, and its logits come through
 * the target's LM head. Its cache holds one layer's K/V per slot, on the
 * host. It follows the target: eagle3_observe after each target decode,
 * eagle3_rewind when verification cuts a slot, eagle3_propose to draft.
 * Scheduler thread only.
 */
#ifndef HEARTH_SPEC_EAGLE3_H
#define HEARTH_SPEC_EAGLE3_H

#include <stddef.h>
#include <stdint.h>

#include "hearth.h"

struct eagle3;

/*
 * Opens the drafter at path for target (whose hidden width, embedding and
 * LM head it must fit), for n_slots sequences of n_ctx positions, and has
 * tctx keep the layer inputs it reads. HEARTH_EFORMAT / EINVAL with the
 * reason, HEARTH_ENOMEM.
 */
enum hearth_status eagle3_open(const char *path, const struct hearth_model *target,
                               struct hearth_context *tctx, int32_t n_slots, int32_t n_ctx,
                               int32_t n_batch, struct eagle3 **out, char *err, size_t err_len);
void eagle3_free(struct eagle3 *e);

/* After a target decode of b: writes each slot's rows into the drafter's cache. */
void eagle3_observe(struct eagle3 *e, const struct hearth_batch *b,
                    const hearth_token *const *slot_tokens);
/* The slot's target holds n_keep tokens now (0: the job ended). */
void eagle3_rewind(struct eagle3 *e, int32_t slot, int32_t n_keep);
/* Up to k greedy drafts after tokens[0..n_tokens) into out; how many (0: none). */
int32_t eagle3_propose(struct eagle3 *e, int32_t slot, const hearth_token *tokens, int32_t n_tokens,
                       int32_t k, hearth_token *out);

/* Bytes a drafter of the file at path allocates for n_slots x n_ctx (its cache and rows). */
enum hearth_status eagle3_bytes(const char *path, int32_t n_slots, int32_t n_ctx, int32_t n_batch,
                                uint64_t *weights, uint64_t *buffers, char *err, size_t err_len);

#endif
