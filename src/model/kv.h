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
#include "util/dtype.h"
#include "util/memacct.h"
#include "util/u64map.h"

#define KV_GROUPS 2 /* full-attention layers, sliding-window layers */

/* One sequence's block table in one pool. */
struct kv_table {
    int32_t n_blocks;    /* entries used in blocks[], released ones included */
    int32_t n_released;  /* leading entries given back (window pool only): blocks[i] = -1 */
    int32_t n_published; /* leading entries already in the prefix index, or released */
    int32_t *blocks;     /* [ceil(n_ctx / block_tokens)] block ids, -1 = released */
};

struct kv_seq {
    int32_t n_tokens;  /* positions 0..n_tokens-1 hold K/V (window layers: the reachable ones) */
    int32_t n_chain;   /* leading entries of chain[] computed */
    uint64_t *chain;   /* [ceil(n_ctx / block_tokens)] chain hash of the tokens up to each
                          block's end, shared by the pools' prefix indexes */
    struct kv_table t[KV_GROUPS];
};

/* kv_cache.group of a layer that keeps no K/V (a recurrent mixer): no pool, never addressed. */
#define KV_NONE 0xFF

/* A pool of blocks for the layers of one group, with its own prefix cache. */
struct kv_pool {
    int32_t n_layer;         /* layers in the group, 0 = the group is absent */
    int32_t n_host;          /* of those, the layers whose memory is mem (host layers) */
    int32_t n_blocks;        /* blocks in the pool */
    int32_t block_tokens;    /* the cache's */
    size_t layer_len[2];     /* bytes of one layer's K pool, and of its V pool */
    uint8_t *mem;            /* [n_host][K, V][n_blocks][block_tokens][row]; NULL when n_host
                                is 0 */
    size_t mem_len;
    int32_t *refcnt;         /* [n_blocks] */
    int32_t *free_ids;       /* stack of free block ids */
    int32_t n_free;
    /* prefix cache */
    uint64_t *hash;          /* [n_blocks] chain hash of a published block, 0 = unpublished */
    int32_t *tokens;         /* [n_blocks][block_tokens] tokens of a published block */
    int32_t *lru_prev, *lru_next; /* [n_blocks] doubly linked LRU of cached blocks, -1 = none */
    /* resuming inside a block: every published block under the chain hash of the block
       before it (KV_ROOT for a sequence's first), and how many of its tokens hold rows */
    uint64_t *parent; /* [n_blocks] */
    int32_t *fill;    /* [n_blocks] block_tokens, or fewer for a sequence's last block */
    int32_t *sib_prev, *sib_next; /* [n_blocks] published blocks of the same parent, -1 = none */
    struct u64map children;       /* parent hash -> the newest published block under it */
    int32_t lru_head, lru_tail;
    int32_t n_cached;        /* published blocks with refcnt 0 (evictable) */
    int32_t cap;             /* most blocks cached at once, -1 = as many as are free */
    int64_t n_evicted;       /* cached blocks dropped so far (for a write or by the cap) */
    struct u64map index;     /* chain hash -> block id of the published blocks */
    struct kv_cache *owner;  /* pool 0: the cache, for its tier's hooks (kv_set_tier); or NULL */
};

/* What kv_init builds; kv_bytes sums the same. */
struct kv_params {
    int32_t n_layer;       /* layers holding K/V */
    int32_t kv_dim;        /* elements per token per layer, K and V each */
    int32_t n_seq;         /* sequences */
    int32_t n_ctx;         /* max tokens per sequence */
    int32_t block_tokens;
    int32_t n_blocks;      /* full-attention pool */
    enum hearth_kv_type type;   /* K's (a quantized type needs kv_dim a multiple of 32) */
    enum hearth_kv_type type_v; /* V's */
    const bool *swa;       /* [n_layer] layers that see only the last n_swa positions; NULL = none */
    const bool *no_kv;     /* [n_layer] layers that keep no K/V (recurrent mixers); NULL = none */
    const bool *host;      /* [n_layer] layers whose K/V memory kv.c maps; NULL = every layer */
    int32_t n_swa;         /* their window in tokens, itself included; 0 = no window */
    int32_t n_blocks_swa;  /* window pool; 0 = window layers mask the full pool instead */
    bool retain;           /* false: the cache is whatever blocks the pools have free */
    int32_t n_retain;      /* with retain: blocks each pool caches for no sequence (at most),
                              on top of n_blocks and n_blocks_swa */
};

struct kv_cache {
    int32_t n_layer;
    int32_t kv_dim;          /* elements per token per layer, K and V each */
    int32_t block_tokens;
    int32_t n_seq;           /* sequences */
    int32_t n_ctx;           /* max tokens per sequence */
    int32_t n_swa;           /* window of the window layers, 0 = none */
    enum hearth_kv_type type[2]; /* K's and V's */
    size_t row_len[2];       /* bytes of one token's K row, and of its V row */
    uint8_t *group;          /* [n_layer] pool of each layer: 0 full, 1 window, KV_NONE none */
    int32_t *slot;           /* [n_layer] the layer's index among its pool's host layers; -1
                                for a layer not on the host or without K/V */
    int32_t *window;         /* [n_layer] positions a query sees: n_swa, or 0 = all */
    struct kv_pool pool[KV_GROUPS];
    struct kv_seq *seqs;     /* [n_seq] */
    /* called after kv.c copies the first n_rows rows of block src to dst in pool group, for
       the memory it does not own (the layers not on the host); NULL = none */
    void (*copy)(void *arg, int group, int32_t dst, int32_t src, int32_t n_rows);
    void *copy_arg;
    /* the disk tier (kvdisk.h), for a cache of one pool on the host; NULL = none. evicted:
       a cached block is about to be dropped (its rows still intact); fetch: fill block with
       the rows of the block keyed hash holding tokens, false when the tier has none */
    void (*evicted)(void *arg, const struct kv_cache *kv, int32_t block, uint64_t hash,
                    const int32_t *tokens);
    bool (*fetch)(void *arg, struct kv_cache *kv, int32_t block, uint64_t hash,
                  const int32_t *tokens);
    void *tier_arg;
    struct mem_acct acct;    /* what kv_init allocated: the host pools' K/V, the tables */
};

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

/* The element type of a cache of type t, as the kernels name it. */
static inline enum dtype kv_dtype(enum hearth_kv_type t)
{
    return t == HEARTH_KV_F32    ? DTYPE_F32
           : t == HEARTH_KV_Q8_0 ? DTYPE_Q8_0
           : t == HEARTH_KV_Q4_0 ? DTYPE_Q4_0
                                 : DTYPE_F16;
}

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

/*
 * Base of layer l's K (which=0) or V (which=1) pool: [n_blocks][block_tokens][kv_dim].
 * Layers of group KV_NONE, and layers not on the host, have none here and are never
 * addressed (here or below).
 */
static inline uint8_t *kv_layer_base(const struct kv_cache *kv, int32_t l, int which)
{
    const struct kv_pool *p = &kv->pool[kv->group[l]];
    return p->mem + (size_t)kv->slot[l] * (p->layer_len[0] + p->layer_len[1]) +
           (which ? p->layer_len[0] : 0);
}

/* Sequence seq's block table for layer l's pool (entries of released blocks are -1). */
static inline const int32_t *kv_layer_blocks(const struct kv_cache *kv, int32_t l, int32_t seq)
{
    return kv->seqs[seq].t[kv->group[l]].blocks;
}

/* Address of token pos's K (which=0) or V (which=1) row in layer l of sequence seq. */
static inline void *kv_row(const struct kv_cache *kv, int32_t l, int which, int32_t seq,
                           int32_t pos)
{
    int32_t b = kv_layer_blocks(kv, l, seq)[pos / kv->block_tokens];
    size_t tok = (size_t)b * kv->block_tokens + (size_t)(pos % kv->block_tokens);
    return kv_layer_base(kv, l, which) + tok * kv->row_len[which];
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
