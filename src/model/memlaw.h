/*
 * memlaw.h: the memory law (docs/ARCHITECTURE.md, "Layers across stages").
 * The bytes of everything a model and a context allocate, from the
 * hyperparameters, the tensor table and the context's parameters alone: the
 * engine sizes its buffers with the functions below, budget.c checks a
 * device's share with them before anything is uploaded, and `hearth fit`
 * predicts a deployment with them from a file's header. Each allocation is
 * counted as it is made (util/memacct.h), and tests/unit/test_memlaw.c holds
 * the count equal to the prediction, so the two cannot drift apart.
 */
#ifndef HEARTH_MEMLAW_H
#define HEARTH_MEMLAW_H

#include "model/model.h"
#include "util/memacct.h"

/* ------------------------------------------------- one backend's buffers --- */

/* The CPU backend's activation buffers of one stage (cpu.c's struct scratch), in bytes. */
struct memlaw_cpu_scratch {
    size_t x, xb, q, kx, vx, att, hb, hb2; /* f32 rows of n_batch tokens */
    size_t scores;                         /* every thread's attention tile */
    size_t scores_per_thread;              /* floats of one thread's tile */
    size_t act, act_row;                   /* quantized input rows, and one row's bytes */
    size_t act_sum;                        /* their Q8_0 block sums */
    size_t logits;                         /* the output stage's [n_batch][n_vocab] */
    size_t eh;                             /* an MTP head's [n_batch][2 n_embd] */
};
void memlaw_cpu_scratch(const struct hparams *hp, int32_t n_batch, int n_threads, bool output,
                        bool nextn, struct memlaw_cpu_scratch *out);

/* The CPU's MoE buffers of a stage with routed experts (cpu_moe.c), in bytes. */
struct memlaw_moe_scratch {
    size_t probs, sel, wsel, cnt, off, row, tok, act, act_sum, hg, hu, out;
    size_t act_row; /* bytes of one quantized input row */
};
void memlaw_moe_scratch(const struct hparams *hp, int32_t n_batch, struct memlaw_moe_scratch *out);

/* The CPU's DeltaNet state and buffers of n_layer recurrent layers (cpu_deltanet.c), in bytes. */
struct memlaw_dnet {
    size_t conv, ssm;                                /* the state: every (layer, sequence)'s */
    size_t qkv, z, beta, g, o, ones, qg, gate, snap; /* per batch */
    size_t conv_len, ssm_len;                        /* floats of one (layer, sequence)'s */
};
void memlaw_dnet(const struct hearth_model *m, int32_t n_layer, int32_t n_seq, int32_t n_batch,
                 struct memlaw_dnet *out);

/* A Vulkan stage's DeltaNet buffers (vk_deltanet.c's vk_dnet_new), in bytes. */
struct memlaw_vk_dnet {
    size_t conv, ssm;                 /* one layer's state: every sequence's window, matrix */
    size_t qkv, z, beta, g, o, slots; /* per batch */
};
void memlaw_vk_dnet(const struct hearth_model *m, int32_t n_seq, int32_t n_batch,
                    struct memlaw_vk_dnet *out);

/* A Vulkan stage's MoE scratch (vk_moe.c's vk_moe_scratch_new), in bytes. */
struct memlaw_vk_moe {
    size_t logits, xq, ids, wts, hg, hu, out;
};
void memlaw_vk_moe(uint32_t n_batch, uint32_t n_embd, uint32_t n_ff, uint32_t n_expert,
                   uint32_t n_slots, struct memlaw_vk_moe *out);

/*
 * A Vulkan stage's buffers for one context, in bytes: vk_backend.c's
 * ctx_init, vk_deltanet.c and vk_moe.c allocate these fields. Its layers'
 * K/V rows are the pool's (kv_layer_bytes), not here.
 */
struct memlaw_vk {
    /* f32 rows of n_batch tokens, as enum act names them (0: the stage has none) */
    size_t x, xb, q, qg, k, v, att, hb, hb2;
    size_t gate, spare, actq; /* a gated layer's gates; gather's; matmul input */
    size_t ids, rows, kvrows; /* the batch's tokens, output rows, (seq, pos) */
    size_t cs;                /* one rope base's (cos, sin) rows ... */
    int n_cs;                 /* ... for each base the stage's layers use: */
    float rope_base[2];       /* these, in the order of the layers */
    size_t table;             /* one K/V group's block table (stride entries a sequence) ... */
    int n_table;              /* ... for each group */
    int32_t stride;
    size_t vecs;              /* f32 copies of its layers' (and the output's)
                                 norm, bias and DeltaNet vectors, all together */
    int32_t n_dnet;           /* DeltaNet layers, and their buffers when there are any */
    struct memlaw_vk_dnet dn;
    bool moe; /* MoE layers, and their scratch */
    struct memlaw_vk_moe mx;
    /* the output stage's logits, in chunks of chunk_rows rows that fit one buffer */
    int32_t chunk_rows, n_chunks;
    size_t chunk, chunk_ids,
        chunk_in; /* a chunk's logits and row ids; chunk_in when n_chunks > 1 */
    /* the host's side: the logits' copy, the uploads' staging, the rope rows' */
    size_t host_logits, host_i32, host_cs;
};

/*
 * The buffers of a Vulkan stage of layers [l0, l1) (and the output with
 * output) for a context of p whose sequences have n_ctx_blocks blocks in
 * n_kv_pools pools; max_buf is the device's largest buffer (0: no limit),
 * which splits the logits into chunks.
 */
void memlaw_vk(const struct hearth_model *m, const struct hearth_context_params *p, int32_t l0,
               int32_t l1, bool output, int32_t n_ctx_blocks, int n_kv_pools, uint64_t max_buf,
               struct memlaw_vk *out);

/* v's device bytes by kind into dev, its host bytes into host (either may be NULL). */
void memlaw_vk_acct(const struct memlaw_vk *v, struct mem_acct *dev, struct mem_acct *host);

/* -------------------------------------------------------- whole figures --- */

/*
 * Where a stage runs, for the law: a backend's figures are the CPU's or a
 * device's (Vulkan). The model's own placement (model.h's stage_place)
 * gives these for a loaded model; `hearth fit` makes them up.
 */
struct memlaw_stage {
    bool cpu;       /* the CPU backend (host memory, K/V in the host pool) */
    int device;     /* which device, for a non-CPU stage */
    int32_t l0, l1; /* layers [l0, l1) */
};

/*
 * The stages of a loaded model's placement (at most MODEL_MAX_STAGES), as
 * memlaw sees them; with mtp, the one stage of an MTP context (the head).
 */
int32_t memlaw_stages_of(const struct hearth_model *m, bool mtp, struct memlaw_stage *out);

/* The layer a tensor name belongs to ("blk.12.attn_q.weight": 12), or -1. */
int32_t memlaw_tensor_layer(const char *name);

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
