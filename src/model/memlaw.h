/*
 * memlaw.h: the memory law (docs/ARCHITECTURE.md, "Layers across stages").
 * The bytes of everything a model and a context allocate, from the
 * hyperparameters, the tensor table and the context's parameters alone: the
 * engine sizes its buffers with the functions below, budget.c checks a
 * device's share with them before anything is uploaded, and `hearth fit`
 * predicts a deployment with them from a file's header. Each allocation is
 * counted as it is made (util/memacct.h), and tests/unit/test_memlaw.c holds
 * the count equal to the prediction, so the two cannot drift apart. Each
 * backend's buffers are its own law (backend.h's struct backend_law), which
 * memlaw_context sums without knowing the backend.
 */
#ifndef HEARTH_MEMLAW_H
#define HEARTH_MEMLAW_H

#include "model/model.h"
#include "util/memacct.h"

/* -------------------------------------------------------- whole figures --- */

/*
 * Where a stage runs, for the law: the kind of its backend, whose law gives
 * its figures, and the device. The model's own placement (model.h's stage_place)
 * gives these for a loaded model; `hearth fit` makes them up.
 */
struct memlaw_stage {
    enum backend_kind kind; /* its backend's, whose law (backend_law_of) sizes it */
    int device;             /* which device, for a stage not on host memory */
    int32_t l0, l1;         /* layers [l0, l1) */
};

/*
 * The stages of a loaded model's placement (at most MODEL_MAX_STAGES), as
 * memlaw sees them; with mtp, the one stage of an MTP context (the head).
 */
int32_t memlaw_stages_of(const struct hearth_model *m, bool mtp, struct memlaw_stage *out);

/*
 * The weights each stage holds as loaded, from the tensor table (every
 * blk.L.* of its layers, token_embd on the first, output and output_norm
 * on the last) into w[i]; the host's f32 copies of the vectors (norms,
 * biases, DeltaNet's taps) into host. Both MEM_WEIGHTS. A packed CPU copy
 * replaces the mapping's pages, so a weight counts once either way.
 */
void memlaw_weights(const struct hearth_model *m, const struct memlaw_stage *st, int32_t n_stage,
                    struct mem_acct *w, struct mem_acct *host);

/*
 * A context's memory: into dev[i] what stage i's device holds for it (its
 * layers' K/V, its backend's buffers), into host what the host holds
 * besides (the pool's tables, snapshots, kept states, the batch's arrays).
 * p as hearth_context_new resolves it (n_ctx and n_threads set). For a CPU
 * stage dev[i] is host memory too.
 */
void memlaw_context(const struct hearth_model *m, const struct hearth_context_params *p,
                    const struct memlaw_stage *st, int32_t n_stage, struct mem_acct *dev,
                    struct mem_acct *host);

/* Floats of one sequence's recurrent state over every layer (0 without recurrent layers). */
size_t memlaw_state_len(const struct hearth_model *m, const struct hearth_context_params *p);

/* The prefix cache's share of p.cache_bytes: blocks, and on a recurrent model states. */
struct memlaw_cache {
    int32_t n_retain;  /* blocks kept for no sequence */
    int32_t n_cached;  /* states cached beside them; -1 = no cap (no cache_bytes) */
    int64_t cap_bytes; /* what the two hold at most; -1 = no cap */
};
void memlaw_state_cache(const struct hearth_context_params *p, size_t per_block, size_t state_len,
                        struct memlaw_cache *c);

/* The kv_params a context of m with p makes (flags: 3 * (n_layer + mtp) bools, caller's). */
void memlaw_kv_params(const struct hearth_model *m, const struct hearth_context_params *p,
                      const struct memlaw_stage *st, int32_t n_stage, bool *flags,
                      struct kv_params *kp);

/*
 * Host memory a serving process holds besides its model and contexts: the
 * binary and its libraries, the file's header and the tokenizer, the
 * server's per-slot arrays (sched.c), thread stacks. Not allocated through
 * the law, so an estimate
 * measured on Linux (x86-64, glibc); `hearth fit` adds it to the host's
 * other bytes.
 */
#define MEMLAW_BASE  (4ull << 20)
#define MEMLAW_TOKEN 104ull
#define MEMLAW_MERGE 40ull
#define MEMLAW_STACK (64ull << 10)
uint64_t memlaw_process(const struct hearth_model *m, int32_t n_slots, int32_t n_ctx,
                        int n_threads);

#endif
