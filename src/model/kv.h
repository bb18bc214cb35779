/*
 * kv.h: the paged KV cache.
 *
 * KV memory is a pool of fixed-size blocks of `block_tokens` tokens; a block
 * id names the same token range in every layer's K and V arrays. Each
 * sequence owns a block table (block ids in position order). Blocks carry a
 * reference count so sequences can share a prefix without copying (the
 * server's prefix cache builds on this); a block returns to the free list
 * when its count drops to zero.
 *
 * Layout of one layer's K (V alike): [n_blocks][block_tokens][kv_dim] of
 * the cache type (f16 or f32), so one block of one layer is contiguous.
 * The pool is one anonymous mapping: pages are touched (and count in RSS)
 * only as blocks are used.
 *
 * Sizes: kv_dim = n_head_kv * head_dim (64..1024), block_tokens 16..256,
 * n_blocks up to n_seq_max * n_ctx / block_tokens.
 * Not thread-safe: owned by the one thread that runs the engine.
 */
#ifndef HEARTH_KV_H
#define HEARTH_KV_H

#include <stddef.h>
#include <stdint.h>

#include "hearth.h"

struct kv_seq {
    int32_t n_tokens;    /* positions 0..n_tokens-1 hold K/V */
    int32_t n_blocks;    /* entries used in blocks[] */
    int32_t n_published; /* leading blocks already in the prefix index */
    int32_t *blocks;     /* [max_blocks_per_seq] block ids */
};

struct kv_cache {
    int32_t n_layer;
    int32_t kv_dim;          /* elements per token per layer, K and V each */
    int32_t block_tokens;
    int32_t n_blocks;        /* blocks in the pool */
    int32_t n_seq;           /* sequences */
    int32_t n_ctx;           /* max tokens per sequence */
    enum hearth_kv_type type;
    size_t elem_len;         /* bytes per element: 2 (f16) or 4 (f32) */
    size_t layer_len;        /* bytes of one layer's K (or V) pool */
    uint8_t *mem;            /* [n_layer][2][n_blocks][block_tokens][kv_dim] */
    size_t mem_len;
    int32_t *refcnt;         /* [n_blocks] */
    int32_t *free_ids;       /* stack of free block ids */
    int32_t n_free;
    struct kv_seq *seqs;     /* [n_seq] */
    /* prefix cache */
    uint64_t *hash;          /* [n_blocks] chain hash of a published block, 0 = unpublished */
    int32_t *tokens;         /* [n_blocks][block_tokens] tokens of a published block */
    int32_t *lru_prev, *lru_next; /* [n_blocks] doubly linked LRU of cached blocks, -1 = none */
    int32_t lru_head, lru_tail;
    int32_t n_cached;        /* published blocks with refcnt 0 (evictable) */
    uint64_t *index_key;     /* [index_cap] open addressing, 0 = empty */
    int32_t *index_val;      /* [index_cap] block id */
    uint32_t index_cap;      /* power of two >= 2 * n_blocks */
};

/* Bytes kv_init would map for these dimensions (the memory law uses the same sum). */
size_t kv_bytes(int32_t n_layer, int32_t kv_dim, int32_t n_blocks, int32_t block_tokens,
                enum hearth_kv_type type);

/*
 * Sets up an empty cache of n_blocks blocks for n_seq sequences of up to
 * n_ctx tokens each. HEARTH_ENOMEM if the pool cannot be mapped.
 */
enum hearth_status kv_init(struct kv_cache *kv, int32_t n_layer, int32_t kv_dim, int32_t n_seq,
                           int32_t n_ctx, int32_t block_tokens, int32_t n_blocks,
                           enum hearth_kv_type type, char *err, size_t err_len);
void kv_free(struct kv_cache *kv);

/*
 * Makes room for n_new more tokens in sequence seq (allocating blocks).
 * HEARTH_EFULL if the sequence would pass n_ctx or the pool is out of
 * blocks; then nothing is allocated. Does not change n_tokens.
 */
enum hearth_status kv_reserve(struct kv_cache *kv, int32_t seq, int32_t n_new, char *err,
                              size_t err_len);

/*
 * Drops positions p0.. of sequence seq, releasing blocks no longer used
 * (published ones stay cached). A cut inside a shared block copies it
 * first; if no block can be had for the copy, the cut moves down to the
 * block boundary: callers read the new length back (hearth_seq_len).
 */
void kv_truncate(struct kv_cache *kv, int32_t seq, int32_t p0);

/*
 * Attaches to empty sequence seq the longest run of cached whole blocks
 * matching tokens[0..n), at most n - 1 tokens; returns the tokens attached.
 */
int32_t kv_reuse_prefix(struct kv_cache *kv, int32_t seq, const int32_t *tokens, int32_t n);

/* Publishes seq's full blocks covering tokens[0..n) (n capped at its length). */
void kv_publish(struct kv_cache *kv, int32_t seq, const int32_t *tokens, int32_t n);

/* Address of token pos's K (which=0) or V (which=1) row in layer l of sequence seq. */
static inline void *kv_row(const struct kv_cache *kv, int32_t l, int which, int32_t seq,
                           int32_t pos)
{
    const struct kv_seq *s = &kv->seqs[seq];
    int32_t b = s->blocks[pos / kv->block_tokens];
    size_t tok = (size_t)b * kv->block_tokens + (size_t)(pos % kv->block_tokens);
    return kv->mem + ((size_t)l * 2 + (size_t)which) * kv->layer_len +
           tok * (size_t)kv->kv_dim * kv->elem_len;
}

/* Blocks in use by sequences (refcount > 0). */
static inline int32_t kv_used_blocks(const struct kv_cache *kv)
{
    return kv->n_blocks - kv->n_free - kv->n_cached;
}

#endif
