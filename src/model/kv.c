/* kv.c: the paged KV cache (see kv.h for layout and invariants). */
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
    if (mem == MAP_FAILED) {
        mem = NULL;
        goto nomem;
    }
    kv->mem = mem;
    int32_t per_seq = (n_ctx + block_tokens - 1) / block_tokens;
    kv->refcnt = calloc((size_t)n_blocks, sizeof *kv->refcnt);
    kv->free_ids = malloc((size_t)n_blocks * sizeof *kv->free_ids);
    kv->seqs = calloc((size_t)n_seq, sizeof *kv->seqs);
    if (!kv->refcnt || !kv->free_ids || !kv->seqs)
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
    memset(kv, 0, sizeof *kv);
}

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
    if (need > kv->n_free)
        return fail(HEARTH_EFULL, err, err_len,
                    "kv: sequence %d needs %d more blocks but only %d of %d are free", seq, need,
                    kv->n_free, kv->n_blocks);
    for (int32_t i = 0; i < need; i++) {
        int32_t b = kv->free_ids[--kv->n_free];
        kv->refcnt[b] = 1;
        s->blocks[s->n_blocks++] = b;
    }
    return HEARTH_OK;
}

void kv_truncate(struct kv_cache *kv, int32_t seq, int32_t p0)
{
    struct kv_seq *s = &kv->seqs[seq];
    if (p0 < 0)
        p0 = 0;
    if (p0 > s->n_tokens)
        p0 = s->n_tokens;
    s->n_tokens = p0;
    /* also releases blocks reserved past n_tokens by a batch that failed */
    int32_t keep = (p0 + kv->block_tokens - 1) / kv->block_tokens;
    while (s->n_blocks > keep) {
        int32_t b = s->blocks[--s->n_blocks];
        if (--kv->refcnt[b] == 0)
            kv->free_ids[kv->n_free++] = b;
    }
}
