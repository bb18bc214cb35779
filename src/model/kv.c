/* kv.c: the paged KV cache and its prefix cache (see kv.h for layout and invariants). */
#include "model/kv.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "util/errfmt.h"

size_t kv_bytes(int32_t n_layer, int32_t kv_dim, int32_t n_blocks, int32_t block_tokens,
                enum hearth_kv_type type)
{
    size_t elem = type == HEARTH_KV_F32 ? 4 : 2;
    return (size_t)n_layer * 2 * (size_t)n_blocks * (size_t)block_tokens * (size_t)kv_dim * elem;
}

enum hearth_status kv_init(struct kv_cache *kv, int32_t n_layer, int32_t kv_dim, int32_t n_seq,
                           int32_t n_ctx, int32_t block_tokens, int32_t n_blocks,
                           enum hearth_kv_type type, char *err, size_t err_len)
{
    memset(kv, 0, sizeof *kv);
    if (n_layer < 1 || kv_dim < 1 || n_seq < 1 || n_ctx < 1 || block_tokens < 1 || n_blocks < 1)
        return fail(HEARTH_EINVAL, err, err_len, "kv: every dimension must be at least 1");
    kv->n_layer = n_layer;
    kv->kv_dim = kv_dim;
    kv->n_seq = n_seq;
    kv->n_ctx = n_ctx;
    kv->block_tokens = block_tokens;
    kv->n_blocks = n_blocks;
    kv->type = type;
    kv->elem_len = type == HEARTH_KV_F32 ? 4 : 2;
    kv->layer_len = (size_t)n_blocks * (size_t)block_tokens * (size_t)kv_dim * kv->elem_len;
    kv->mem_len = kv_bytes(n_layer, kv_dim, n_blocks, block_tokens, type);
    void *mem = mmap(NULL, kv->mem_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
        goto nomem;
    kv->mem = mem;
    int32_t per_seq = (n_ctx + block_tokens - 1) / block_tokens;
    kv->index_cap = 16;
    while (kv->index_cap < 2u * (uint32_t)n_blocks)
        kv->index_cap *= 2;
    kv->refcnt = calloc((size_t)n_blocks, sizeof *kv->refcnt);
    kv->free_ids = malloc((size_t)n_blocks * sizeof *kv->free_ids);
    kv->seqs = calloc((size_t)n_seq, sizeof *kv->seqs);
    kv->hash = calloc((size_t)n_blocks, sizeof *kv->hash);
    kv->tokens = malloc((size_t)n_blocks * (size_t)block_tokens * sizeof *kv->tokens);
    kv->lru_prev = malloc((size_t)n_blocks * sizeof *kv->lru_prev);
    kv->lru_next = malloc((size_t)n_blocks * sizeof *kv->lru_next);
    kv->index_key = calloc(kv->index_cap, sizeof *kv->index_key);
    kv->index_val = malloc(kv->index_cap * sizeof *kv->index_val);
    if (!kv->refcnt || !kv->free_ids || !kv->seqs || !kv->hash || !kv->tokens || !kv->lru_prev ||
        !kv->lru_next || !kv->index_key || !kv->index_val)
        goto nomem;
    for (int32_t s = 0; s < n_seq; s++) {
        kv->seqs[s].blocks = malloc((size_t)per_seq * sizeof(int32_t));
        if (!kv->seqs[s].blocks)
            goto nomem;
    }
    /* lowest ids on top of the stack: early blocks are the first touched */
    for (int32_t i = 0; i < n_blocks; i++)
        kv->free_ids[i] = n_blocks - 1 - i;
    kv->n_free = n_blocks;
    kv->lru_head = kv->lru_tail = -1;
    return HEARTH_OK;
nomem:
    kv_free(kv);
    return fail(HEARTH_ENOMEM, err, err_len, "kv: cannot allocate %zu bytes for the KV cache",
                kv_bytes(n_layer, kv_dim, n_blocks, block_tokens, type));
}

void kv_free(struct kv_cache *kv)
{
    if (kv->mem)
        munmap(kv->mem, kv->mem_len);
    if (kv->seqs)
        for (int32_t s = 0; s < kv->n_seq; s++)
            free(kv->seqs[s].blocks);
    free(kv->seqs);
    free(kv->refcnt);
    free(kv->free_ids);
    free(kv->hash);
    free(kv->tokens);
    free(kv->lru_prev);
    free(kv->lru_next);
    free(kv->index_key);
    free(kv->index_val);
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

static uint32_t index_slot(const struct kv_cache *kv, uint64_t key)
{
    uint32_t mask = kv->index_cap - 1, i = (uint32_t)key & mask;
    while (kv->index_key[i] && kv->index_key[i] != key)
        i = (i + 1) & mask;
    return i;
}

static int32_t index_find(const struct kv_cache *kv, uint64_t key)
{
    uint32_t i = index_slot(kv, key);
    return kv->index_key[i] ? kv->index_val[i] : -1;
}

/* Removes key by backward-shift deletion, so probe chains stay unbroken without tombstones. */
static void index_remove(struct kv_cache *kv, uint64_t key)
{
    uint32_t mask = kv->index_cap - 1, i = index_slot(kv, key);
    if (!kv->index_key[i])
        return;
    for (uint32_t j = (i + 1) & mask; kv->index_key[j]; j = (j + 1) & mask) {
        uint32_t home = (uint32_t)kv->index_key[j] & mask;
        /* j's entry may move into the hole at i if its home is not in (i, j] cyclically */
        if (((j - home) & mask) >= ((j - i) & mask)) {
            kv->index_key[i] = kv->index_key[j];
            kv->index_val[i] = kv->index_val[j];
            i = j;
        }
    }
    kv->index_key[i] = 0;
}

static void lru_unlink(struct kv_cache *kv, int32_t b)
{
    int32_t p = kv->lru_prev[b], n = kv->lru_next[b];
    if (p >= 0)
        kv->lru_next[p] = n;
    else
        kv->lru_head = n;
    if (n >= 0)
        kv->lru_prev[n] = p;
    else
        kv->lru_tail = p;
    kv->n_cached--;
}

static void lru_push(struct kv_cache *kv, int32_t b)
{
    kv->lru_prev[b] = kv->lru_tail;
    kv->lru_next[b] = -1;
    if (kv->lru_tail >= 0)
        kv->lru_next[kv->lru_tail] = b;
    else
        kv->lru_head = b;
    kv->lru_tail = b;
    kv->n_cached++;
}

static void unpublish(struct kv_cache *kv, int32_t b)
{
    index_remove(kv, kv->hash[b]);
    kv->hash[b] = 0;
}

/* Drops one reference; at zero the block is cached (if published) or freed. */
static void block_release(struct kv_cache *kv, int32_t b)
{
    if (--kv->refcnt[b] > 0)
        return;
    if (kv->hash[b])
        lru_push(kv, b);
    else
        kv->free_ids[kv->n_free++] = b;
}

/* A block for writing: free list first, else the least recently used cached block. */
static int32_t block_take(struct kv_cache *kv)
{
    int32_t b;
    if (kv->n_free > 0) {
        b = kv->free_ids[--kv->n_free];
    } else if (kv->lru_head >= 0) {
        b = kv->lru_head;
        lru_unlink(kv, b);
        unpublish(kv, b);
    } else {
        return -1;
    }
    kv->refcnt[b] = 1;
    return b;
}

/* ------------------------------------------------------------- sequences --- */

enum hearth_status kv_reserve(struct kv_cache *kv, int32_t seq, int32_t n_new, char *err,
                              size_t err_len)
{
    struct kv_seq *s = &kv->seqs[seq];
    int32_t want = s->n_tokens + n_new;
    if (want > kv->n_ctx)
        return fail(HEARTH_EFULL, err, err_len,
                    "kv: sequence %d would hold %d tokens but the context is %d", seq, want,
                    kv->n_ctx);
    int32_t need = (want + kv->block_tokens - 1) / kv->block_tokens - s->n_blocks;
    if (need > kv->n_free + kv->n_cached)
        return fail(HEARTH_EFULL, err, err_len,
                    "kv: sequence %d needs %d more blocks but only %d of %d are free", seq, need,
                    kv->n_free + kv->n_cached, kv->n_blocks);
    for (int32_t i = 0; i < need; i++)
        s->blocks[s->n_blocks++] = block_take(kv);
    return HEARTH_OK;
}

/* Copies the first n_rows token rows of every layer's K and V from block src to dst. */
static void block_copy(struct kv_cache *kv, int32_t dst, int32_t src, int32_t n_rows)
{
    const size_t block_len = (size_t)kv->block_tokens * (size_t)kv->kv_dim * kv->elem_len;
    const size_t rows_len = (size_t)n_rows * (size_t)kv->kv_dim * kv->elem_len;
    for (int32_t l = 0; l < kv->n_layer * 2; l++) {
        uint8_t *base = kv->mem + (size_t)l * kv->layer_len;
        memcpy(base + (size_t)dst * block_len, base + (size_t)src * block_len, rows_len);
    }
}

void kv_truncate(struct kv_cache *kv, int32_t seq, int32_t p0)
{
    struct kv_seq *s = &kv->seqs[seq];
    const int32_t bt = kv->block_tokens;
    if (p0 < 0)
        p0 = 0;
    if (p0 > s->n_tokens)
        p0 = s->n_tokens;
    /* also releases blocks reserved past n_tokens by a batch that failed */
    int32_t keep = (p0 + bt - 1) / bt;
    while (s->n_blocks > keep)
        block_release(kv, s->blocks[--s->n_blocks]);
    if (p0 % bt && keep > 0) {
        /* the kept partial block will be written again: it must be ours alone and unpublished */
        int32_t b = s->blocks[keep - 1];
        if (kv->refcnt[b] > 1) {
            int32_t c = block_take(kv);
            if (c < 0) {
                block_release(kv, b);
                s->n_blocks--;
                p0 -= p0 % bt;
            } else {
                block_copy(kv, c, b, p0 % bt);
                block_release(kv, b);
                s->blocks[keep - 1] = c;
            }
        } else if (kv->hash[b]) {
            unpublish(kv, b);
        }
    }
    s->n_tokens = p0;
    if (s->n_published > p0 / bt)
        s->n_published = p0 / bt;
}

int32_t kv_reuse_prefix(struct kv_cache *kv, int32_t seq, const int32_t *tokens, int32_t n)
{
    struct kv_seq *s = &kv->seqs[seq];
    const int32_t bt = kv->block_tokens;
    if (s->n_tokens != 0 || s->n_blocks != 0 || n < 2)
        return 0;
    int32_t max_blocks = (n - 1) / bt;
    if (max_blocks > (kv->n_ctx + bt - 1) / bt)
        max_blocks = (kv->n_ctx + bt - 1) / bt;
    uint64_t h = 0;
    int32_t i = 0;
    for (; i < max_blocks; i++) {
        h = chain_hash(h, tokens + (size_t)i * bt, bt);
        int32_t b = index_find(kv, h);
        if (b < 0 || memcmp(kv->tokens + (size_t)b * bt, tokens + (size_t)i * bt,
                            (size_t)bt * sizeof *tokens) != 0)
            break;
        if (kv->refcnt[b]++ == 0)
            lru_unlink(kv, b);
        s->blocks[s->n_blocks++] = b;
    }
    s->n_tokens = i * bt;
    s->n_published = i;
    return s->n_tokens;
}

void kv_publish(struct kv_cache *kv, int32_t seq, const int32_t *tokens, int32_t n)
{
    struct kv_seq *s = &kv->seqs[seq];
    const int32_t bt = kv->block_tokens;
    if (n > s->n_tokens)
        n = s->n_tokens;
    int32_t full = n / bt;
    for (int32_t i = s->n_published; i < full; i++) {
        int32_t b = s->blocks[i];
        uint64_t parent = i > 0 ? kv->hash[s->blocks[i - 1]] : 0;
        if (i > 0 && !parent)
            break; /* the parent lost its publication (an equal block was published first) */
        uint64_t h = chain_hash(parent, tokens + (size_t)i * bt, bt);
        if (kv->hash[b] == h) {
            s->n_published = i + 1;
            continue;
        }
        if (index_find(kv, h) >= 0)
            break; /* another sequence computed the same prefix first; ours stays private */
        kv->hash[b] = h;
        memcpy(kv->tokens + (size_t)b * bt, tokens + (size_t)i * bt, (size_t)bt * sizeof *tokens);
        uint32_t slot = index_slot(kv, h);
        kv->index_key[slot] = h;
        kv->index_val[slot] = b;
        s->n_published = i + 1;
    }
}
