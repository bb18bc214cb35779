/*
 * kv.h: the paged KV cache.
 *
 * KV memory is a pool of fixed-size blocks of `block_tokens` tokens; a block
 * id names the same token range in every layer of its pool. Each sequence
 * owns a block table per pool (block ids in position order). Blocks carry a
 * reference count so sequences can share a prefix without copying (the
 * server's prefix cache builds on this); a block returns to the free list
 * when its count drops to zero.
 *
 * Layers come in up to two groups, each with its own pool and tables:
 * full-attention layers (group 0, every layer of most models) and
 * sliding-window layers (group 1), which see only the last n_swa positions.
 * A window table keeps only the blocks the window can still reach: once no
 * later query of the sequence can see a block, its entry is released
 * (entries below n_released hold -1), so the window pool is sized by the
 * window, not by the context. Without window layers, or when a separate
 * pool would save nothing, there is one group and window layers (if any)
 * mask the ordinary cache.
 *
 * Layout of one layer's K (V alike): [n_blocks][block_tokens][row] where a
 * row is kv_dim elements of its type: f16 or f32, or q8_0 or q4_0 blocks
 * of 32 (kv_row_len), so one block of one layer is contiguous. K and V may
 * have different types.
 * Each pool is one anonymous mapping: pages are touched (and count in RSS)
 * only as blocks are used. That memory is kv.c's for the layers marked
 * host (every layer unless kv_params.host says otherwise); the others'
 * memory belongs to a device backend, which addresses it by the same block
 * ids and which the copy hook tells when kv.c copies a block.
 *
 * Retention: a block no sequence holds any more stays cached while it is
 * published (the prefix index finds it) until it is evicted, least recently
 * used first. Released tail first, a sequence's leaves are older than its
 * prefix, and a shared prefix is refreshed by every sequence that reuses
 * it, so eviction takes leaves first and a sequence too big for the cache
 * keeps its prefix. Without kv_params.retain the cache is whatever the
 * pools have free; with it each pool has n_retain blocks on top of what the
 * sequences can hold and caches at most n_retain blocks (evicting at
 * release), so the cache's bytes never pass n_retain * kv_retain_block_len.
 *
 * Resuming inside a block: a sequence that ends can publish its last,
 * partial block too (kv_publish_tail), and every published block is listed
 * under its parent's chain hash. Where the whole blocks matching a prompt
 * run out, kv_reuse_prefix can copy the longest matching head of one of the
 * next position's blocks (a partial one, or a whole one the prompt parts
 * from midway: an agent's next turn parts from its last where the reply
 * was re-tokenized) into a block of the sequence's own. A partial block is
 * never shared, never in the prefix index and never written to the disk
 * tier; it costs the cap a whole block. Caches of one pool only: a window
 * pool would need its own copy of the window.
 *
 * Sizes: kv_dim = n_head_kv * head_dim (64..1024), block_tokens 16..256,
 * full pool up to n_seq_max * n_ctx / block_tokens blocks, window pool
 * about 2 * n_seq_max * (n_swa + n_batch) / block_tokens (kv_window_blocks),
 * each plus n_retain.
 * Not thread-safe: owned by the one thread that runs the engine.
 */
#ifndef HEARTH_KV_H
#define HEARTH_KV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hearth.h"
#include "model/types.h"
#include "util/dtype.h"
#include "util/memacct.h"
#include "util/u64map.h"

/* The cache's structs and its row accessors are model/types.h's, which the backends read. */

/*
 * Window pool that sequences of a context need: each holds at most the
 * blocks spanning the n_swa - 1 positions before a batch plus the batch's
 * n_batch, ceil((n_swa - 1 + n_batch) / block_tokens) + 1 (a span not
 * aligned to blocks touches one more), and as many again are left for the
 * prefix cache to keep ended sequences' last windows. Returns 0 when that
 * is not smaller than the full pool (no window, or n_ctx within the window):
 * the window layers then mask the full pool.
 */
int32_t kv_window_blocks(int32_t n_seq, int32_t n_ctx, int32_t n_swa, int32_t n_batch,
                         int32_t block_tokens);

/* Bytes of a row of n elements of type t (n a multiple of 32 for the quantized types). */
size_t kv_row_len(enum hearth_kv_type t, int64_t n);

/* Bytes of K and V of every layer of each pool, host or not (the memory law's sum). */
size_t kv_bytes(const struct kv_params *p);

/* The pool of layer l under p (0 full, 1 window), KV_NONE for a layer that keeps no K/V. */
int kv_group_of(const struct kv_params *p, int32_t l);

/* Bytes of K and V of one layer in pool g (0 when the pool is absent). */
size_t kv_layer_bytes(const struct kv_params *p, int g);

/* Bytes of the cache's tables: block tables, chains, refcounts, the prefix index. */
size_t kv_table_bytes(const struct kv_params *p);

/* Bytes one retained block costs: K and V of every layer of each pool for block_tokens tokens. */
size_t kv_retain_block_len(const struct kv_params *p);

/* Bytes the cached blocks hold now (K and V of every layer of each pool, host or not). */
size_t kv_cached_bytes(const struct kv_cache *kv);

/*
 * Sets up an empty cache as p describes. HEARTH_EINVAL for a dimension
 * below 1, HEARTH_ENOMEM if a pool cannot be mapped.
 */
enum hearth_status kv_init(struct kv_cache *kv, const struct kv_params *p, char *err,
                           size_t err_len);
void kv_free(struct kv_cache *kv);

/*
 * Makes room for n_new more tokens in sequence seq (allocating blocks in
 * each pool). First gives back the window blocks no query from n_tokens on
 * can see (published ones stay cached; a later truncate whose window reaches
 * into them empties the sequence): doing it here rather than after a batch
 * lets the caller publish the batch's blocks in between. HEARTH_EFULL if
 * the sequence would pass n_ctx or a pool is out of blocks; then nothing is
 * allocated. Does not change n_tokens.
 */
enum hearth_status kv_reserve(struct kv_cache *kv, int32_t seq, int32_t n_new, char *err,
                              size_t err_len);

/*
 * Drops positions p0.. of sequence seq, releasing blocks no longer used
 * (published ones stay cached). A cut inside a shared block copies it
 * first; if no block can be had for the copy, the cut moves down to the
 * block boundary. A cut whose window (p0 - n_swa + 1 ..) lies partly in
 * released blocks cannot be resumed and empties the sequence. Callers read
 * the new length back (hearth_seq_len).
 */
void kv_truncate(struct kv_cache *kv, int32_t seq, int32_t p0);

/*
 * Attaches to empty sequence seq the longest run of cached whole blocks
 * matching tokens[0..n), at most n - 1 tokens, that every pool can resume
 * from: the full pool holds all its blocks, the window pool those its
 * window reaches (positions M - n_swa + 1 .. M - 1 for a resume at M).
 * With within, on a cache of one pool, it goes on inside the next block
 * as far as a published block there matches (copied, see "Resuming inside
 * a block"). Returns the tokens attached.
 */
int32_t kv_reuse_prefix(struct kv_cache *kv, int32_t seq, const int32_t *tokens, int32_t n,
                        bool within);

/*
 * Lowers the retained pools' cap on cached blocks to blocks (at most
 * kv_params.n_retain): what a context whose cache also keeps recurrent
 * states leaves to the K/V.
 */
void kv_set_cache_cap(struct kv_cache *kv, int32_t blocks);

/*
 * Installs the disk tier's hooks (see kv_cache.evicted). kv_reuse_prefix
 * then continues past the pool's cached blocks with the tier's, each read
 * into a block taken from the pool. The cache must stay at this address.
 */
void kv_set_tier(struct kv_cache *kv,
                 void (*evicted)(void *, const struct kv_cache *, int32_t, uint64_t,
                                 const int32_t *),
                 bool (*fetch)(void *, struct kv_cache *, int32_t, uint64_t, const int32_t *),
                 void *arg);

/*
 * Publishes seq's full blocks covering tokens[0..n) (n capped at its
 * length) in each pool, window blocks not yet released included.
 */
void kv_publish(struct kv_cache *kv, int32_t seq, const int32_t *tokens, int32_t n);

/*
 * Publishes, after kv_publish of the same tokens, seq's last block when it
 * is partial and tokens[0..n) are all seq holds, on a cache of one pool:
 * for a sequence about to be emptied (the block stays cached once
 * released; writing it again unpublishes it).
 */
void kv_publish_tail(struct kv_cache *kv, int32_t seq, const int32_t *tokens, int32_t n);

/* Whether block b of pool p holds a whole block's rows (a partial one is never written to
 * disk, nor in the prefix index). */
static inline bool kv_block_whole(const struct kv_pool *p, int32_t b)
{
    return p->fill[b] == p->block_tokens;
}

/* Blocks in use by sequences (refcount > 0), over all pools. */
static inline int32_t kv_used_blocks(const struct kv_cache *kv)
{
    int32_t n = 0;
    for (int g = 0; g < KV_GROUPS; g++)
        n += kv->pool[g].n_blocks - kv->pool[g].n_free - kv->pool[g].n_cached;
    return n;
}

#endif
