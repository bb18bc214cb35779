/*
 * spec.h: the scheduler's drafters for speculative decoding (struct
 * spec_params, which sched_params.spec holds). For each generating slot
 * they propose the tokens the target is likely to produce next: the n-gram
 * drafter (src/spec/ngram.h) from the slot's own text, then the n-gram pool
 * every request feeds, the draft model from its own greedy decoding, the
 * MTP head from the target's hidden state, or a block drafter (EAGLE-3,
 * DFlash: src/spec/eagle3.h, dflash.h) from the inputs of a few target
 * layers. Chained (--spec ngram,draft, ngram,mtp, eagle3,ngram or
 * dflash,ngram), a slot takes the n-gram proposal when there is one and the
 * model drafter's otherwise. Every proposal is deterministic
 * (a draft model proposes its argmax), which is what lets the scheduler
 * verify by sampling (docs/ARCHITECTURE.md).
 *
 * The draft model keeps its own paged KV, one sequence per slot, holding a
 * prefix of the slot's tokens: spec_propose catches it up before drafting
 * and spec_rewind cuts it back to what the target kept. The MTP head
 * (--spec mtp, the target's own nextn block) has a cache of its one layer
 * per slot too, but it needs the target's hidden states, so spec_observe
 * feeds it after every target decode, and spec_rewind hands it the state
 * at the last position kept. Scheduler thread only.
 */
#ifndef HEARTH_SPEC_H
#define HEARTH_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hearth.h"

/*
 * Speculative decoding (--spec): each step a drafter proposes up to
 * draft_max tokens per generating slot, the target computes all of them in
 * the step's one micro-batch, and the slot keeps the drafts its own
 * sampling reproduces, plus the token it sampled where they part. The
 * output is the target's at any temperature and, for a seed, the same
 * tokens (see docs/ARCHITECTURE.md). On a model with recurrent layers the
 * verify batch keeps each drafting slot's state after every row, so a cut
 * goes back exactly to the drafts kept (hearth_seq_keep_states).
 */
/* The drafters, as /metrics labels them. */
enum spec_drafter {
    SPEC_DRAFTER_NGRAM,
    SPEC_DRAFTER_POOL,
    SPEC_DRAFTER_MODEL,
    SPEC_DRAFTER_MTP,
    SPEC_DRAFTER_EAGLE3,
    SPEC_DRAFTER_DFLASH,
    SPEC_N_DRAFTERS
};
#define SPEC_DRAFTER_NAMES                                                                         \
    {                                                                                              \
        "ngram", "ngram_pool", "draft", "mtp", "eagle3", "dflash"                                  \
    }

/* The block drafters, files made for one target that read its layers' inputs. */
enum spec_block { SPEC_BLOCK_NONE, SPEC_BLOCK_EAGLE3, SPEC_BLOCK_DFLASH };

/* Which block drafter the GGUF file at path holds; SPEC_BLOCK_NONE for any other file. */
enum spec_block spec_block_of(const char *path);

struct spec_params {
    bool ngram;                       /* prompt lookup (src/spec/ngram.h) */
    struct hearth_model *draft_model; /* a draft model (--model-draft), NULL: none. Chained after
                                         the n-gram drafter when both are on. The caller's: it
                                         must outlive the scheduler */
    bool mtp;                         /* the model's own MTP head drafts (a model loaded with
                                         hearth_model_params.mtp); not with draft_model */
    enum spec_block block;            /* a block drafter (src/spec/eagle3.h, dflash.h); not with
                                         draft_model or mtp. Chained after the n-gram drafter */
    const char *block_path;           /* its GGUF file */
    int32_t draft_max;                /* most tokens drafted per slot and step, 1..64; 0: 16 for the
                                         n-gram drafter alone on a model without recurrent layers, else 3 */
    int32_t draft_min;       /* fewer proposed than this: no drafting this step, 1..draft_max */
    int32_t ngram_min;       /* the shortest n-gram looked up, 1..ngram_max */
    int32_t ngram_max;       /* the longest, ..NGRAM_MAX_N */
    size_t ngram_pool_bytes; /* with ngram: the n-gram pool shared by all requests, 0: none */
};

struct spec;

/* One slot's request for drafts. */
struct spec_req {
    int32_t slot;               /* 0..n_slots: the draft model's sequence */
    const hearth_token *tokens; /* the slot's tokens: the prompt, then what was generated */
    int32_t n_tokens;           /* >= 1; the last has no K/V in the target yet */
    int32_t k;                  /* most tokens to propose, >= 1 */
    hearth_token *out;          /* [k] the proposal */
    int32_t n_out;              /* set: tokens proposed (0: none) */
    enum spec_drafter from;     /* set: who proposed them */
};

/*
 * The drafters p asks for, over n_slots sequences of up to n_ctx tokens, the
 * draft model's forward passes taking up to n_batch rows. p->draft_model,
 * when set, must share the target's vocabulary (HEARTH_EINVAL with the
 * first difference named otherwise). The draft model stays the caller's.
 */
enum hearth_status spec_new(struct hearth_model *target, struct hearth_context *tctx,
                            const struct spec_params *p, int32_t n_slots, int32_t n_ctx,
                            int32_t n_batch, int n_threads, struct spec **out, char *err,
                            size_t err_len);
void spec_free(struct spec *sp);

/*
 * Fills each request's proposal: the n-gram drafter first where it is on,
 * then one batched greedy run of the draft model for the slots left, if
 * there is one. A draft model that fails (its pool full) proposes nothing
 * this step; that is never an error.
 */
void spec_propose(struct spec *sp, struct spec_req *reqs, int32_t n);

/*
 * After each decode of the target's context tctx (which keeps its hidden
 * states when p->mtp): runs the MTP head over b's rows, each token paired
 * with the target's hidden state one position before it, so the head's
 * cache follows the target's. slot_tokens[s]: slot s's tokens, which fill
 * positions the head missed (a reused prefix) with zero hidden inputs.
 * No-op without the head. A head that fails (its pool full) starts over.
 */
void spec_observe(struct spec *sp, const struct hearth_batch *b,
                  const hearth_token *const *slot_tokens);

/* Feeds the shared n-gram pool (when there is one) tokens[from..n) of a slot, in their context. */
void spec_feed(struct spec *sp, const hearth_token *tokens, int32_t from, int32_t n);

/* The slot's target cache now holds n_keep tokens (0: the job ended): the draft model's too. */
void spec_rewind(struct spec *sp, int32_t slot, int32_t n_keep);

#endif
