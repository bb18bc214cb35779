/*
 * vk_memlaw.h: the Vulkan backend's memory law (backend.h's struct
 * backend_law): the bytes of every buffer vk_backend.c's ctx_init,
 * vk_deltanet.c and vk_moe.c allocate for a stage, which they allocate
 * field by field from the structs below. Built without the Vulkan runtime
 * too, for `hearth fit`.
 */
#ifndef HEARTH_BACKEND_VK_MEMLAW_H
#define HEARTH_BACKEND_VK_MEMLAW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/types.h"

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
    size_t vecs;    /* f32 copies of its layers' (and the output's)
                       norm, bias and DeltaNet vectors, all together */
    int32_t n_dnet; /* DeltaNet layers, and their buffers when there are any */
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

/*
 * The law's buffers of ctx's device stage s (ctx->kv initialised), for a
 * device whose largest buffer is max_buf (0: no limit): what ctx_init
 * allocates.
 */
void memlaw_vk_ctx(const struct hearth_context *ctx, const struct stage *s, uint64_t max_buf,
                   struct memlaw_vk *out);

#endif
