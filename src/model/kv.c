/* kv.c: the paged KV cache and its prefix cache (see kv.h for layout and invariants). */
#include "model/kv.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "util/errfmt.h"

static int32_t ceil_div(int64_t a, int64_t b)
{
    return (int32_t)((a + b - 1) / b);
}

int32_t kv_window_blocks(int32_t n_seq, int32_t n_ctx, int32_t n_swa, int32_t n_batch,
                         int32_t block_tokens)
{
    if (n_swa <= 0 || n_seq < 1 || n_ctx < 1 || n_batch < 1 || block_tokens < 1)
        return 0;
    const int64_t live = ceil_div((int64_t)n_swa - 1 + n_batch, block_tokens) + 1;
    if (2 * live >= ceil_div(n_ctx, block_tokens))
        return 0;
    return (int32_t)(2 * live * n_seq);
}

int kv_group_of(const struct kv_params *p, int32_t l)
{
    if (p->no_kv && p->no_kv[l])
        return KV_NONE;
    /* window layers get a pool of their own only when it has blocks */
    return p->swa && p->n_swa > 0 && p->n_blocks_swa > 0 && p->swa[l];
}

/* Layers of each pool. */
static void count_layers(const struct kv_params *p, int32_t n_layer[KV_GROUPS])
{
    n_layer[0] = n_layer[1] = 0;
    for (int32_t l = 0; l < p->n_layer; l++)
        if (kv_group_of(p, l) != KV_NONE)
            n_layer[kv_group_of(p, l)]++;
}

/* Blocks of each pool: what the sequences can hold, plus the retained ones. */
static void count_blocks(const struct kv_params *p, const int32_t n_layer[KV_GROUPS],
                         int64_t n_blocks[KV_GROUPS])
{
    const int64_t extra = p->retain ? p->n_retain : 0;
    n_blocks[0]         = n_layer[0] ? p->n_blocks + extra : 0;
    n_blocks[1]         = n_layer[1] ? p->n_blocks_swa + extra : 0;
}

size_t kv_row_len(enum hearth_kv_type t, int64_t n)
{
    switch (t) {
    case HEARTH_KV_F32:
        return (size_t)n * 4;
    case HEARTH_KV_Q8_0:
        return (size_t)n / 32 * 34;
    case HEARTH_KV_Q4_0:
        return (size_t)n / 32 * 18;
    default:
        return (size_t)n * 2;
    }
}

/* Bytes of one block's K and V rows in one layer. */
static size_t block_bytes(const struct kv_params *p)
{
    return (size_t)p->block_tokens *
           (kv_row_len(p->type, p->kv_dim) + kv_row_len(p->type_v, p->kv_dim));
}

size_t kv_bytes(const struct kv_params *p)
{
    int32_t n_layer[KV_GROUPS];
    int64_t n_blocks[KV_GROUPS];
    count_layers(p, n_layer);
    count_blocks(p, n_layer, n_blocks);
    return ((size_t)n_layer[0] * (size_t)n_blocks[0] + (size_t)n_layer[1] * (size_t)n_blocks[1]) *
           block_bytes(p);
}

size_t kv_layer_bytes(const struct kv_params *p, int g)
{
    int32_t n_layer[KV_GROUPS];
    int64_t n_blocks[KV_GROUPS];
    count_layers(p, n_layer);
    count_blocks(p, n_layer, n_blocks);
    return (size_t)n_blocks[g] * block_bytes(p);
}

size_t kv_table_bytes(const struct kv_params *p)
{
    int32_t n_layer[KV_GROUPS];
    int64_t n_blocks[KV_GROUPS];
    count_layers(p, n_layer);
    count_blocks(p, n_layer, n_blocks);
    const size_t per_seq = (size_t)ceil_div(p->n_ctx, p->block_tokens);
    /* group, slot, window per layer; each sequence's chain and tables (both pools') */
    size_t n = (size_t)p->n_layer * (sizeof(uint8_t) + 2 * sizeof(int32_t)) +
               (size_t)p->n_seq * (sizeof(struct kv_seq) + per_seq * sizeof(uint64_t) +
                                   KV_GROUPS * per_seq * sizeof(int32_t));
    /* each pool's refcnt, free_ids, hash, tokens, LRU links, parent, fill, sibling links, and
     * its two indexes */
    for (int g = 0; g < KV_GROUPS; g++)
        if (n_layer[g])
            n += (size_t)n_blocks[g] * (7 * sizeof(int32_t) + 2 * sizeof(uint64_t) +
                                        (size_t)p->block_tokens * sizeof(int32_t)) +
                 2 * u64map_bytes(n_blocks[g]);
    return n;
}

size_t kv_retain_block_len(const struct kv_params *p)
{
    int32_t n_layer[KV_GROUPS];
    count_layers(p, n_layer);
    return (size_t)(n_layer[0] + n_layer[1]) * block_bytes(p);
}

size_t kv_cached_bytes(const struct kv_cache *kv)
{
    const size_t block = (size_t)kv->block_tokens * (kv->row_len[0] + kv->row_len[1]);
    size_t n           = 0;
    for (int g = 0; g < KV_GROUPS; g++)
        n += (size_t)kv->pool[g].n_cached * (size_t)kv->pool[g].n_layer * block;
    return n;
}

static void pool_free(struct kv_pool *p)
{
    if (p->mem)
        munmap(p->mem, p->mem_len);
    free(p->refcnt);
    free(p->free_ids);
    free(p->hash);
    free(p->tokens);
    free(p->lru_prev);
    free(p->lru_next);
    free(p->parent);
    free(p->fill);
    free(p->sib_prev);
    free(p->sib_next);
    u64map_free(&p->index);
    u64map_free(&p->children);
    memset(p, 0, sizeof *p);
}

/*
 * Maps the pages of the first n_live blocks of every host layer's K and V
 * now (the sequences' share; the blocks past it, the prefix cache's, come
 * as they fill): the memory is the process's from the start, as the
 * memory law counts it.
 */
static void pool_populate(struct kv_pool *p, int64_t n_live)
{
    for (int32_t l = 0; l < p->n_host; l++)
        for (int w = 0; w < 2; w++)
            mem_populate(p->mem + (size_t)l * (p->layer_len[0] + p->layer_len[1]) +
                             (w ? p->layer_len[0] : 0),
                         (size_t)n_live * (p->layer_len[w] / (size_t)p->n_blocks));
}

static bool pool_init(struct kv_pool *p, struct mem_acct *acct, int32_t n_layer, int32_t n_host,
                      int32_t n_blocks, int32_t n_live, const size_t block_len[2],
                      int32_t block_tokens)
{
    p->n_layer      = n_layer;
    p->block_tokens = block_tokens;
    p->n_host       = n_host;
    p->n_blocks     = n_blocks;
    p->layer_len[0] = (size_t)n_blocks * block_len[0];
    p->layer_len[1] = (size_t)n_blocks * block_len[1];
    p->mem_len      = (size_t)n_host * (p->layer_len[0] + p->layer_len[1]);
    if (n_host > 0) {
        void *mem =
            mmap(NULL, p->mem_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (mem == MAP_FAILED)
            return false;
        p->mem = mem;
        acct->b[MEM_KV] += p->mem_len;
        pool_populate(p, n_live);
    }
    const size_t nb = (size_t)n_blocks;
    p->refcnt       = acct_calloc(acct, MEM_OTHER, nb, sizeof *p->refcnt);
    p->free_ids     = acct_calloc(acct, MEM_OTHER, nb, sizeof *p->free_ids);
    p->hash         = acct_calloc(acct, MEM_OTHER, nb, sizeof *p->hash);
    p->tokens       = acct_calloc(acct, MEM_OTHER, nb * (size_t)block_tokens, sizeof *p->tokens);
    p->lru_prev     = acct_calloc(acct, MEM_OTHER, nb, sizeof *p->lru_prev);
    p->lru_next     = acct_calloc(acct, MEM_OTHER, nb, sizeof *p->lru_next);
    p->parent       = acct_calloc(acct, MEM_OTHER, nb, sizeof *p->parent);
    p->fill         = acct_calloc(acct, MEM_OTHER, nb, sizeof *p->fill);
    p->sib_prev     = acct_calloc(acct, MEM_OTHER, nb, sizeof *p->sib_prev);
    p->sib_next     = acct_calloc(acct, MEM_OTHER, nb, sizeof *p->sib_next);
    if (!u64map_init(&p->index, n_blocks) || !u64map_init(&p->children, n_blocks) || !p->refcnt ||
        !p->free_ids || !p->hash || !p->tokens || !p->lru_prev || !p->lru_next || !p->parent ||
        !p->fill || !p->sib_prev || !p->sib_next)
        return false;
    acct->b[MEM_OTHER] += 2 * (size_t)p->index.cap * (sizeof *p->index.key + sizeof *p->index.val);
    /* lowest ids on top of the stack: early blocks are the first touched */
    for (int32_t i = 0; i < n_blocks; i++)
        p->free_ids[i] = n_blocks - 1 - i;
    p->n_free   = n_blocks;
    p->lru_head = p->lru_tail = -1;
    return true;
}

enum hearth_status kv_init(struct kv_cache *kv, const struct kv_params *p, char *err,
                           size_t err_len)
{
    memset(kv, 0, sizeof *kv);
    if (p->n_layer < 1 || p->kv_dim < 1 || p->n_seq < 1 || p->n_ctx < 1 || p->block_tokens < 1 ||
        p->n_blocks < 1 || p->n_swa < 0 || p->n_blocks_swa < 0 || p->n_retain < 0)
        return fail(HEARTH_EINVAL, err, err_len, "kv: every dimension must be at least 1");
    for (int w = 0; w < 2; w++) {
        const enum hearth_kv_type t = w ? p->type_v : p->type;
        if ((unsigned)t > HEARTH_KV_Q4_0 || (w && t == HEARTH_KV_Q4_0))
            return fail(HEARTH_EINVAL, err, err_len, "kv: %s cannot be of type %d", w ? "V" : "K",
                        (int)t);
        if ((t == HEARTH_KV_Q8_0 || t == HEARTH_KV_Q4_0) && p->kv_dim % 32)
            return fail(HEARTH_EINVAL, err, err_len,
                        "kv: a quantized cache needs rows of whole 32-value blocks, and these "
                        "have %d values",
                        p->kv_dim);
    }
    kv->n_layer               = p->n_layer;
    kv->kv_dim                = p->kv_dim;
    kv->n_seq                 = p->n_seq;
    kv->n_ctx                 = p->n_ctx;
    kv->block_tokens          = p->block_tokens;
    kv->n_swa                 = p->swa ? p->n_swa : 0;
    kv->type[0]               = p->type;
    kv->type[1]               = p->type_v;
    kv->row_len[0]            = kv_row_len(p->type, p->kv_dim);
    kv->row_len[1]            = kv_row_len(p->type_v, p->kv_dim);
    const size_t block_len[2] = {(size_t)p->block_tokens * kv->row_len[0],
                                 (size_t)p->block_tokens * kv->row_len[1]};
    const int32_t per_seq     = ceil_div(p->n_ctx, p->block_tokens);
    int32_t n_layer[KV_GROUPS];
    count_layers(p, n_layer);
    struct mem_acct *a = &kv->acct;
    kv->group          = acct_calloc(a, MEM_OTHER, (size_t)p->n_layer, sizeof *kv->group);
    kv->slot           = acct_calloc(a, MEM_OTHER, (size_t)p->n_layer, sizeof *kv->slot);
    kv->window         = acct_calloc(a, MEM_OTHER, (size_t)p->n_layer, sizeof *kv->window);
    kv->seqs           = acct_calloc(a, MEM_OTHER, (size_t)p->n_seq, sizeof *kv->seqs);
    if (!kv->group || !kv->slot || !kv->window || !kv->seqs)
        goto nomem;
    int32_t next[KV_GROUPS] = {0, 0};
    for (int32_t l = 0; l < p->n_layer; l++) {
        const bool win = kv->n_swa > 0 && p->swa[l];
        kv->window[l]  = win ? kv->n_swa : 0;
        if (p->no_kv && p->no_kv[l]) {
            kv->group[l] = KV_NONE;
            kv->slot[l]  = -1;
            continue;
        }
        kv->group[l] = (uint8_t)kv_group_of(p, l);
        kv->slot[l]  = !p->host || p->host[l] ? next[kv->group[l]]++ : -1;
    }
    int64_t n_blocks[KV_GROUPS];
    count_blocks(p, n_layer, n_blocks);
    for (int g = 0; g < KV_GROUPS; g++)
        if (n_blocks[g] > INT32_MAX / 2) {
            kv_free(kv);
            return fail(HEARTH_EINVAL, err, err_len,
                        "kv: %lld blocks in one pool is past the most it can index (%d); give "
                        "a smaller cache or context",
                        (long long)n_blocks[g], INT32_MAX / 2);
        }
    for (int g = 0; g < KV_GROUPS; g++) {
        if (n_layer[g] > 0 &&
            !pool_init(&kv->pool[g], a, n_layer[g], next[g], (int32_t)n_blocks[g],
                       g ? p->n_blocks_swa : p->n_blocks, block_len, p->block_tokens))
            goto nomem;
        kv->pool[g].cap = p->retain ? p->n_retain : -1;
    }
    for (int32_t s = 0; s < p->n_seq; s++) {
        struct kv_seq *q = &kv->seqs[s];
        if (!(q->chain = acct_calloc(a, MEM_OTHER, (size_t)per_seq, sizeof *q->chain)))
            goto nomem;
        for (int g = 0; g < KV_GROUPS; g++)
            if (!(q->t[g].blocks = acct_calloc(a, MEM_OTHER, (size_t)per_seq, sizeof(int32_t))))
                goto nomem;
    }
    return HEARTH_OK;
nomem:
    kv_free(kv);
    return fail(HEARTH_ENOMEM, err, err_len, "kv: cannot allocate %zu bytes for the KV cache",
                kv_bytes(p));
}

void kv_free(struct kv_cache *kv)
{
    for (int g = 0; g < KV_GROUPS; g++)
        pool_free(&kv->pool[g]);
    if (kv->seqs)
        for (int32_t s = 0; s < kv->n_seq; s++) {
            free(kv->seqs[s].chain);
            for (int g = 0; g < KV_GROUPS; g++)
                free(kv->seqs[s].t[g].blocks);
        }
    free(kv->seqs);
    free(kv->group);
    free(kv->slot);
    free(kv->window);
    memset(kv, 0, sizeof *kv);
}

/* ----------------------------------------------------------- prefix index --- */

/* Chain hash of one block: its tokens folded onto the parent block's hash. Never 0. */
static uint64_t chain_hash(uint64_t parent, const int32_t *tok, int32_t n)
{
    uint64_t h = parent ^ 0x6a09e667f3bcc909ull;
    for (int32_t i = 0; i < n; i++) {
        h ^= (uint32_t)tok[i];
        h *= 0x100000001b3ull;
        h ^= h >> 29;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h ? h : 1;
}

static void lru_unlink(struct kv_pool *p, int32_t b)
{
    int32_t pr = p->lru_prev[b], n = p->lru_next[b];
    if (pr >= 0)
        p->lru_next[pr] = n;
    else
        p->lru_head = n;
    if (n >= 0)
        p->lru_prev[n] = pr;
    else
        p->lru_tail = pr;
    p->n_cached--;
}

static void lru_push(struct kv_pool *p, int32_t b)
{
    p->lru_prev[b] = p->lru_tail;
    p->lru_next[b] = -1;
    if (p->lru_tail >= 0)
        p->lru_next[p->lru_tail] = b;
    else
        p->lru_head = b;
    p->lru_tail = b;
    p->n_cached++;
}

/* The parent hash of a sequence's first block (chain hashes are never it but by chance). */
#define KV_ROOT 0x243f6a8885a308d3ull

static void sib_unlink(struct kv_pool *p, int32_t b)
{
    const int32_t pr = p->sib_prev[b], n = p->sib_next[b];
    if (pr >= 0)
        p->sib_next[pr] = n;
    else if (n >= 0)
        u64map_put(&p->children, p->parent[b], n);
    else
        u64map_remove(&p->children, p->parent[b]);
    if (n >= 0)
        p->sib_prev[n] = pr;
}

static void unpublish(struct kv_pool *p, int32_t b)
{
    if (kv_block_whole(p, b))
        u64map_remove(&p->index, p->hash[b]);
    sib_unlink(p, b);
    p->hash[b] = 0;
}

/*
 * Makes block b, whose first fill tokens tok[0..fill) hold rows, findable
 * under its parent's hash, and when whole under its own chain hash h.
 */
static void publish(struct kv_pool *p, int32_t b, uint64_t parent, uint64_t h, const int32_t *tok,
                    int32_t fill)
{
    const int32_t bt = p->block_tokens;
    p->hash[b]       = h;
    p->parent[b]     = parent;
    p->fill[b]       = fill;
    memcpy(p->tokens + (size_t)b * bt, tok, (size_t)fill * sizeof *tok);
    if (fill == bt)
        u64map_put(&p->index, h, b);
    /* a cached partial block this one extends is no more use: free it (one a later turn
     * copied from and extended, as a rule) */
    int32_t x = u64map_find(&p->children, parent);
    for (int walked = 0; x >= 0 && walked < 64; walked++) {
        const int32_t next = p->sib_next[x];
        if (p->refcnt[x] == 0 && p->fill[x] < bt && p->fill[x] <= fill &&
            !memcmp(p->tokens + (size_t)x * bt, tok, (size_t)p->fill[x] * sizeof *tok)) {
            lru_unlink(p, x);
            unpublish(p, x);
            p->free_ids[p->n_free++] = x;
        }
        x = next;
    }
    /* newest first: a walk of the siblings meets the recent conversations early */
    const int32_t first = u64map_find(&p->children, parent);
    p->sib_prev[b]      = -1;
    p->sib_next[b]      = first;
    if (first >= 0)
        p->sib_prev[first] = b;
    u64map_put(&p->children, parent, b);
}

/*
 * Drops the least recently used cached block from the index: it is a block to write now.
 * The disk tier sees it first.
 */
static int32_t evict(struct kv_pool *p)
{
    int32_t b = p->lru_head;
    lru_unlink(p, b);
    const struct kv_cache *kv = p->owner;
    if (kv && kv->evicted && kv_block_whole(p, b))
        kv->evicted(kv->tier_arg, kv, b, p->hash[b],
                    p->tokens + (size_t)b * (size_t)p->block_tokens);
    unpublish(p, b);
    p->n_evicted++;
    return b;
}

/* Drops one reference; at zero the block is cached (if published, within the cap) or freed. */
static void block_release(struct kv_pool *p, int32_t b)
{
    if (--p->refcnt[b] > 0)
        return;
    if (p->hash[b])
        lru_push(p, b);
    else
        p->free_ids[p->n_free++] = b;
    while (p->cap >= 0 && p->n_cached > p->cap)
        p->free_ids[p->n_free++] = evict(p);
}

/* A block for writing: free list first, else the least recently used cached block. */
static int32_t block_take(struct kv_pool *p)
{
    int32_t b;
    if (p->n_free > 0) {
        b = p->free_ids[--p->n_free];
    } else if (p->lru_head >= 0) {
        b = evict(p);
    } else {
        return -1;
    }
    p->refcnt[b] = 1;
    return b;
}

/* Takes one more reference to a block found in the index (a cached one leaves the LRU). */
static void block_share(struct kv_pool *p, int32_t b)
{
    if (p->refcnt[b]++ == 0)
        lru_unlink(p, b);
}

/* The cached block of pool p holding tokens tok[0..bt) under chain hash h, or -1. */
static int32_t cached_block(const struct kv_pool *p, uint64_t h, const int32_t *tok, int32_t bt)
{
    int32_t b = u64map_find(&p->index, h);
    if (b < 0 || memcmp(p->tokens + (size_t)b * bt, tok, (size_t)bt * sizeof *tok) != 0)
        return -1;
    return b;
}

/* ------------------------------------------------------------- sequences --- */

/* First window block a query at position pos can see. */
static int32_t window_first_block(const struct kv_cache *kv, int32_t pos)
{
    const int32_t first = pos - kv->n_swa + 1;
    return first > 0 ? first / kv->block_tokens : 0;
}

/* Gives back the window blocks no query at or after n_tokens can see. */
static void window_release(struct kv_cache *kv, struct kv_seq *s)
{
    struct kv_table *t = &s->t[1];
    int32_t lo         = window_first_block(kv, s->n_tokens);
    if (lo > t->n_blocks)
        lo = t->n_blocks;
    for (; t->n_released < lo; t->n_released++) {
        block_release(&kv->pool[1], t->blocks[t->n_released]);
        t->blocks[t->n_released] = -1;
    }
}

enum hearth_status kv_reserve(struct kv_cache *kv, int32_t seq, int32_t n_new, char *err,
                              size_t err_len)
{
    struct kv_seq *s = &kv->seqs[seq];
    int32_t want     = s->n_tokens + n_new;
    if (want > kv->n_ctx)
        return fail(HEARTH_EFULL, err, err_len,
                    "kv: sequence %d would hold %d tokens but the context is %d", seq, want,
                    kv->n_ctx);
    if (kv->pool[1].n_layer)
        window_release(kv, s);
    const int32_t n_want = ceil_div(want, kv->block_tokens);
    for (int g = 0; g < KV_GROUPS; g++) {
        const struct kv_pool *p = &kv->pool[g];
        int32_t need            = n_want - s->t[g].n_blocks;
        if (p->n_layer && need > p->n_free + p->n_cached)
            return fail(HEARTH_EFULL, err, err_len,
                        "kv: sequence %d needs %d more %sblocks but only %d of %d are free", seq,
                        need, g ? "sliding-window " : "", p->n_free + p->n_cached, p->n_blocks);
    }
    for (int g = 0; g < KV_GROUPS; g++) {
        struct kv_table *t = &s->t[g];
        if (kv->pool[g].n_layer)
            while (t->n_blocks < n_want)
                t->blocks[t->n_blocks++] = block_take(&kv->pool[g]);
    }
    return HEARTH_OK;
}

/*
 * Copies the first n_rows token rows of every layer's K and V from block src to dst: the
 * host layers here, the others through the copy hook.
 */
static void block_copy(struct kv_cache *kv, struct kv_pool *p, int32_t dst, int32_t src,
                       int32_t n_rows)
{
    uint8_t *base = p->mem;
    for (int32_t l = 0; l < p->n_host * 2; l++) {
        const int w            = l % 2;
        const size_t block_len = (size_t)kv->block_tokens * kv->row_len[w];
        memcpy(base + (size_t)dst * block_len, base + (size_t)src * block_len,
               (size_t)n_rows * kv->row_len[w]);
        base += p->layer_len[w];
    }
    if (kv->copy && p->n_host < p->n_layer)
        kv->copy(kv->copy_arg, (int)(p - kv->pool), dst, src, n_rows);
}

/*
 * Cuts pool g's table of s to positions below p0. Returns p0, or p0 moved
 * down to its block boundary when the kept partial block is shared and no
 * block can be had to copy it.
 */
static int32_t table_cut(struct kv_cache *kv, int g, struct kv_seq *s, int32_t p0)
{
    struct kv_pool *p  = &kv->pool[g];
    struct kv_table *t = &s->t[g];
    const int32_t bt   = kv->block_tokens;
    /* also releases blocks reserved past n_tokens by a batch that failed */
    int32_t keep = ceil_div(p0, bt);
    while (t->n_blocks > keep) {
        int32_t b = t->blocks[--t->n_blocks];
        if (b >= 0)
            block_release(p, b);
    }
    if (t->n_released > t->n_blocks)
        t->n_released = t->n_blocks;
    if (p0 % bt && keep > 0) {
        /* the kept partial block will be written again: it must be ours alone and unpublished */
        int32_t b = t->blocks[keep - 1];
        if (p->refcnt[b] > 1) {
            int32_t c = block_take(p);
            if (c < 0) {
                block_release(p, b);
                t->n_blocks--;
                return p0 - p0 % bt;
            }
            block_copy(kv, p, c, b, p0 % bt);
            block_release(p, b);
            t->blocks[keep - 1] = c;
        } else if (p->hash[b]) {
            unpublish(p, b);
        }
    }
    if (t->n_published > p0 / bt)
        t->n_published = p0 / bt;
    return p0;
}

void kv_truncate(struct kv_cache *kv, int32_t seq, int32_t p0)
{
    struct kv_seq *s  = &kv->seqs[seq];
    const bool window = kv->pool[1].n_layer > 0;
    if (p0 < 0)
        p0 = 0;
    if (p0 > s->n_tokens)
        p0 = s->n_tokens;
    /* a query at p0 would need window blocks already given back: start over */
    if (window && window_first_block(kv, p0) < s->t[1].n_released)
        p0 = 0;
    for (int g = 0; g < KV_GROUPS;) {
        const int32_t q = kv->pool[g].n_layer ? table_cut(kv, g, s, p0) : p0;
        if (q == p0) {
            g++;
            continue;
        }
        /* lower and block-aligned: check the window again and cut every pool there */
        p0 = q;
        if (window && window_first_block(kv, p0) < s->t[1].n_released)
            p0 = 0;
        g = 0;
    }
    s->n_tokens = p0;
    if (s->n_chain > p0 / kv->block_tokens)
        s->n_chain = p0 / kv->block_tokens;
}

/*
 * Rows for positions k * bt .. of s, which holds k whole blocks matching tokens: the longest
 * head of tokens[k * bt .. k * bt + most) that a published block under the k-th block's parent
 * holds, copied into a block of s's own. Returns the tokens copied.
 */
static int32_t reuse_within(struct kv_cache *kv, struct kv_seq *s, int32_t k, const int32_t *tokens,
                            int32_t most)
{
    struct kv_pool *p   = &kv->pool[0];
    const int32_t bt    = kv->block_tokens;
    const int32_t *want = tokens + (size_t)k * bt;
    int32_t best = -1, m = 0, walked = 0;
    /* a shared system prompt's last block has a child per conversation: look at the newest */
    for (int32_t b = u64map_find(&p->children, k ? s->chain[k - 1] : KV_ROOT);
         b >= 0 && walked < 64 && m < most; b = p->sib_next[b], walked++) {
        const int32_t *have = p->tokens + (size_t)b * bt;
        const int32_t f     = p->fill[b] < most ? p->fill[b] : most;
        int32_t j           = 0;
        while (j < f && have[j] == want[j])
            j++;
        if (j > m) {
            m    = j;
            best = b;
        }
    }
    if (m == 0)
        return 0;
    /* held while a block is taken, which may evict what is cached */
    block_share(p, best);
    const int32_t c = block_take(p);
    if (c >= 0) {
        block_copy(kv, p, c, best, m);
        s->t[0].blocks[k] = c;
    }
    block_release(p, best);
    return c >= 0 ? m : 0;
}

int32_t kv_reuse_prefix(struct kv_cache *kv, int32_t seq, const int32_t *tokens, int32_t n,
                        bool within)
{
    struct kv_seq *s   = &kv->seqs[seq];
    const int32_t bt   = kv->block_tokens;
    struct kv_pool *fp = &kv->pool[0], *wp = &kv->pool[1];
    if (s->n_tokens != 0 || s->t[0].n_blocks != 0 || s->t[1].n_blocks != 0 || n < 2)
        return 0;
    int32_t max_blocks = (n - 1) / bt;
    if (max_blocks > ceil_div(kv->n_ctx, bt))
        max_blocks = ceil_div(kv->n_ctx, bt);
    /* k blocks can be resumed when the full pool holds blocks 0..k-1 and the window pool
     * window_first_block(k * bt)..k-1: a run of cached window blocks ending at k - 1 */
    uint64_t h = 0;
    int32_t k = 0, run = 0;
    for (int32_t i = 0; i < max_blocks; i++) {
        const int32_t *tok = tokens + (size_t)i * bt;
        h                  = chain_hash(h, tok, bt);
        s->chain[i]        = h;
        if (fp->n_layer && cached_block(fp, h, tok, bt) < 0)
            break;
        if (wp->n_layer) {
            run = cached_block(wp, h, tok, bt) >= 0 ? run + 1 : 0;
            if (run < i + 1 - window_first_block(kv, (i + 1) * bt))
                continue;
        }
        k = i + 1;
    }
    const int32_t lo = wp->n_layer ? window_first_block(kv, k * bt) : 0;
    for (int32_t i = 0; i < k; i++) {
        const int32_t *tok = tokens + (size_t)i * bt;
        if (fp->n_layer) {
            int32_t b = cached_block(fp, s->chain[i], tok, bt);
            block_share(fp, b);
            s->t[0].blocks[i] = b;
        }
        if (wp->n_layer) {
            int32_t b = i < lo ? -1 : cached_block(wp, s->chain[i], tok, bt);
            if (b >= 0)
                block_share(wp, b);
            s->t[1].blocks[i] = b;
        }
    }
    /* the disk tier: the blocks past the pool's run, each read into a block of the pool
     * (taken as the pool takes one, so only unshared cached blocks make room) */
    if (kv->fetch && fp->n_layer && !wp->n_layer) {
        for (int32_t i = k; i < max_blocks; i++) {
            const int32_t *tok = tokens + (size_t)i * bt;
            s->chain[i]        = chain_hash(i ? s->chain[i - 1] : 0, tok, bt);
            int32_t b          = cached_block(fp, s->chain[i], tok, bt);
            if (b >= 0) {
                block_share(fp, b);
            } else {
                if (u64map_find(&fp->index, s->chain[i]) >= 0 || (b = block_take(fp)) < 0)
                    break;
                if (!kv->fetch(kv->tier_arg, kv, b, s->chain[i], tok)) {
                    block_release(fp, b); /* unpublished: back to the free list */
                    break;
                }
                publish(fp, b, i ? s->chain[i - 1] : KV_ROOT, s->chain[i], tok, bt);
            }
            s->t[0].blocks[i] = b;
            k                 = i + 1;
        }
    }
    int32_t m = 0;
    if (within && fp->n_layer && !wp->n_layer && k < ceil_div(kv->n_ctx, bt)) {
        const int32_t most = n - 1 - k * bt;
        m                  = reuse_within(kv, s, k, tokens, most < bt ? most : bt);
    }
    for (int g = 0; g < KV_GROUPS; g++) {
        s->t[g].n_blocks    = kv->pool[g].n_layer ? k : 0;
        s->t[g].n_published = s->t[g].n_blocks;
    }
    if (m > 0)
        s->t[0].n_blocks++;
    s->t[1].n_released = wp->n_layer ? lo : 0;
    s->n_chain         = k;
    s->n_tokens        = k * bt + m;
    return s->n_tokens;
}

void kv_set_cache_cap(struct kv_cache *kv, int32_t blocks)
{
    for (int g = 0; g < KV_GROUPS; g++)
        if (kv->pool[g].cap > blocks)
            kv->pool[g].cap = blocks;
}

void kv_set_tier(struct kv_cache *kv,
                 void (*evicted)(void *, const struct kv_cache *, int32_t, uint64_t,
                                 const int32_t *),
                 bool (*fetch)(void *, struct kv_cache *, int32_t, uint64_t, const int32_t *),
                 void *arg)
{
    kv->evicted  = evicted;
    kv->fetch    = fetch;
    kv->tier_arg = arg;
    /* the tier holds the full-attention pool only (window models have no tier) */
    kv->pool[0].owner = evicted || fetch ? kv : NULL;
}

void kv_publish(struct kv_cache *kv, int32_t seq, const int32_t *tokens, int32_t n)
{
    struct kv_seq *s = &kv->seqs[seq];
    const int32_t bt = kv->block_tokens;
    if (n > s->n_tokens)
        n = s->n_tokens;
    const int32_t full = n / bt;
    for (; s->n_chain < full; s->n_chain++)
        s->chain[s->n_chain] = chain_hash(s->n_chain > 0 ? s->chain[s->n_chain - 1] : 0,
                                          tokens + (size_t)s->n_chain * bt, bt);
    for (int g = 0; g < KV_GROUPS; g++) {
        struct kv_pool *p  = &kv->pool[g];
        struct kv_table *t = &s->t[g];
        if (!p->n_layer)
            continue;
        for (int32_t i = t->n_published; i < full; i++) {
            const int32_t b  = t->blocks[i];
            const uint64_t h = s->chain[i];
            if (b >= 0 && p->hash[b] != h) {
                if (u64map_find(&p->index, h) >= 0)
                    break; /* another sequence computed the same prefix first; ours stays private */
                publish(p, b, i ? s->chain[i - 1] : KV_ROOT, h, tokens + (size_t)i * bt, bt);
            }
            t->n_published = i + 1;
        }
    }
}

void kv_publish_tail(struct kv_cache *kv, int32_t seq, const int32_t *tokens, int32_t n)
{
    struct kv_seq *s  = &kv->seqs[seq];
    struct kv_pool *p = &kv->pool[0];
    const int32_t bt  = kv->block_tokens;
    const int32_t i = n / bt, m = n % bt;
    if (!p->n_layer || kv->pool[1].n_layer || n != s->n_tokens || m == 0 || s->n_chain < i ||
        s->t[0].n_blocks <= i)
        return;
    const int32_t b = s->t[0].blocks[i];
    if (p->refcnt[b] != 1 || p->hash[b])
        return;
    const uint64_t parent = i ? s->chain[i - 1] : KV_ROOT;
    publish(p, b, parent, chain_hash(parent, tokens + (size_t)i * bt, m), tokens + (size_t)i * bt,
            m);
}
