/*
 * vk_attention.c: the operations on the paged KV cache: storing a batch's
 * K/V rows into it and causal attention over it (shaders attn_*.comp,
 * kv_store_*.comp). The cache's layout and block tables are kv.h's; the
 * host keeps the tables and uploads them, so a device never allocates.
 */
#include <stdint.h>

#include "backend/vk/vk_internal.h"
#include "util/errfmt.h"

/* Largest head attn_common.glsl holds (HD_MAX). */
#define ATTN_HD_MAX 256

/* The cache's own buffers: K and V of n_blocks blocks, the tables, n_tok rows. */
static enum hearth_status check_kv(const char *op, const struct vk_kv *kv, uint32_t kv_dim,
                                   uint32_t n_tok, char *err, size_t err_len)
{
    if (kv->n_blocks == 0 || kv->block_tokens == 0 || kv->n_seq == 0 || kv->table_stride == 0 ||
        kv_dim == 0 || (kv->f16 && kv_dim % 2))
        return fail(HEARTH_EINVAL, err, err_len,
                    "vulkan: %s: a cache of %u blocks of %u tokens of %u %s, %u sequences of "
                    "%u blocks (all >= 1, an f16 row even)",
                    op, kv->n_blocks, kv->block_tokens, kv_dim, kv->f16 ? "f16" : "f32", kv->n_seq,
                    kv->table_stride);
    const uint64_t len = (uint64_t)kv->n_blocks * kv->block_tokens * kv_dim * (kv->f16 ? 2 : 4);
    enum hearth_status st;
    if ((st = vk_check_len(op, "the K cache", kv->k, len, err, err_len)) ||
        (st = vk_check_len(op, "the V cache", kv->v, len, err, err_len)) ||
        (st = vk_check_len(op, "the block tables", kv->tables,
                           (uint64_t)kv->n_seq * kv->table_stride * 4, err, err_len)) ||
        (st = vk_check_len(op, "the rows", kv->rows, (uint64_t)n_tok * 8, err, err_len)))
        return st;
    return HEARTH_OK;
}

enum hearth_status vk_op_kv_store(struct vk_seq *s, const struct vk_kv *kv, struct vk_buf *k_rows,
                                  struct vk_buf *v_rows, uint32_t kv_dim, uint32_t n_tok, char *err,
                                  size_t err_len)
{
    if (n_tok == 0)
        return fail(HEARTH_EINVAL, err, err_len, "vulkan: kv_store of 0 rows");
    enum hearth_status st;
    const uint64_t len = (uint64_t)n_tok * kv_dim * 4;
    if ((st = check_kv("kv_store", kv, kv_dim, n_tok, err, err_len)) ||
        (st = vk_check_len("kv_store", "the K rows", k_rows, len, err, err_len)) ||
        (st = vk_check_len("kv_store", "the V rows", v_rows, len, err, err_len)))
        return st;
    const uint32_t push[4] = {kv_dim, kv->block_tokens, kv->table_stride, kv->n_seq};
    struct vk_pipe *p;
    if ((st = vk_pipe_get(s->d, kv->f16 ? "kv_store_f16" : "kv_store_f32", 6, sizeof push, &p, err,
                          err_len)))
        return st;
    const uint32_t words     = kv->f16 ? kv_dim / 2 : kv_dim;
    const uint32_t groups[3] = {(words + 63) / 64, n_tok, 1};
    struct vk_buf *bufs[6]   = {k_rows, v_rows, kv->k, kv->v, kv->tables, kv->rows};
    return vk_seq_dispatch(s, p, bufs, push, groups, err, err_len);
}

enum hearth_status vk_op_attention(struct vk_seq *s, const struct vk_kv *kv,
                                   const struct vk_attn_shape *a, struct vk_buf *q,
                                   struct vk_buf *gate, struct vk_buf *out, char *err,
                                   size_t err_len)
{
    if (a->n_tok == 0 || a->n_head_kv == 0 || a->n_head % a->n_head_kv || a->head_dim == 0 ||
        a->head_dim % 2 || a->head_dim > ATTN_HD_MAX || !(a->scale > 0))
        return fail(HEARTH_EINVAL, err, err_len,
                    "vulkan: attention of %u rows of %u heads over %u KV heads of %u, scale %g "
                    "(heads a multiple of the KV heads, an even 2..%d per head, scale > 0)",
                    a->n_tok, a->n_head, a->n_head_kv, a->head_dim, (double)a->scale, ATTN_HD_MAX);
    if (q == out || gate == out)
        return fail(HEARTH_EINVAL, err, err_len, "vulkan: attention writes over its input");
    enum hearth_status st;
    const uint64_t len = (uint64_t)a->n_tok * a->n_head * a->head_dim * 4;
    if ((st = check_kv("attention", kv, a->n_head_kv * a->head_dim, a->n_tok, err, err_len)) ||
        (st = vk_check_len("attention", "the queries", q, len, err, err_len)) ||
        (st = vk_check_len("attention", "the output", out, len, err, err_len)) ||
        (gate && (st = vk_check_len("attention", "the gate", gate, len, err, err_len))))
        return st;
    struct {
        uint32_t n_head, n_head_kv, head_dim, block_tokens, table_stride, n_swa;
        float scale;
        uint32_t gated, n_seq;
    } push = {a->n_head, a->n_head_kv, a->head_dim,  kv->block_tokens, kv->table_stride,
              a->n_swa,  a->scale,     gate != NULL, kv->n_seq};
    struct vk_pipe *p;
    if ((st = vk_pipe_get(s->d, kv->f16 ? "attn_f16" : "attn_f32", 7, sizeof push, &p, err,
                          err_len)))
        return st;
    const uint32_t groups[3] = {a->n_head, a->n_tok, 1};
    /* without a gate the binding still needs a buffer; the shader does not read it */
    struct vk_buf *bufs[7] = {q, kv->k, kv->v, kv->tables, kv->rows, out, gate ? gate : q};
    return vk_seq_dispatch(s, p, bufs, &push, groups, err, err_len);
}
