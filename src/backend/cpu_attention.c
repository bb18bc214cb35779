/*
 * cpu_attention.c: the CPU backend's causal attention over the paged KV
 * cache, and where it chooses between llama.cpp's per-key arithmetic
 * (short batches, decode, odd head sizes) and its tiled one.
 */
#include <math.h>

#include "backend/cpu.h"

struct job {
    struct hearth_context *ctx;
    const struct hearth_batch *b;
    int32_t l; /* layer */
    int32_t n; /* rows */
};

/*
 * Causal attention of every (token, head) of the batch over its sequence's
 * cache. Work items are runs of up to a kernel's lanes of query rows that share a KV
 * head: the heads of one GQA group, over as many consecutive tokens of one
 * sequence as fit. Items go round-robin to threads, so the long rows at the
 * end of a causal prefill are spread over all of them.
 */
static void attention_items(void *arg, int ith, int nth)
{
    struct job *s              = arg;
    struct hearth_context *ctx = s->ctx;
    struct cpu_ctx *c          = cpu_of(ctx);
    const struct hparams *hp   = &ctx->model->hp;
    const struct kernels *k    = c->k;
    const struct kv_cache *kv  = &ctx->kv;
    const int32_t hd = hp->head_dim, group = hp->n_head / hp->n_head_kv;
    const int64_t qd     = (int64_t)hp->n_head * hd;
    const float scale    = hp->q_scale > 0 ? 1.0f : 1.0f / sqrtf((float)hd);
    const int32_t n_swa  = kv->window[s->l];
    /* llama.cpp tiles only batches of ATTN_TILE rows or more over K and V of one
     * type, f16 or f32, and only when a head is whole 16-float vectors (the
     * reference machine's AVX-512 width); other caches go key by key */
    const bool same   = kv->type[0] == kv->type[1];
    const bool mixed  = !same || (kv->type[0] != HEARTH_KV_F16 && kv->type[0] != HEARTH_KV_F32);
    const bool per_key = !mixed && kv->type[0] == HEARTH_KV_F16 && (s->n < ATTN_TILE || hd % 16 != 0);
    float *scratch       = c->s.scores + (size_t)ith * c->s.scores_per_thread;
    const uint8_t *kbase = kv_layer_base(kv, s->l, 0), *vbase = kv_layer_base(kv, s->l, 1);
    /* an item: `lanes` heads of one token, or whole groups of tok_per tokens; the tiled
     * kernel may take more rows than the per-key ones */
    const int32_t lanes     = mixed     ? ATTN_LANES
                              : per_key ? k->attn_rows_f16_lanes
                                        : k->attn_rows_lanes;
    const int32_t heads_per = group < lanes ? group : lanes;
    const int32_t tok_per   = group < lanes ? lanes / group : 1;
    const int32_t hblocks   = (group + heads_per - 1) / heads_per;
    const int32_t tblocks   = (s->n + tok_per - 1) / tok_per;
    const long items        = (long)tblocks * hp->n_head_kv * hblocks;
    for (long i = ith; i < items; i += nth) {
        const int32_t tb  = (int32_t)(i / ((long)hp->n_head_kv * hblocks));
        const int32_t kvh = (int32_t)(i / hblocks % hp->n_head_kv), hb = (int32_t)(i % hblocks);
        const int32_t h0 = kvh * group + hb * heads_per;
        const int32_t nh = group - hb * heads_per < heads_per ? group - hb * heads_per : heads_per;
        const int32_t te = (tb + 1) * tok_per < s->n ? (tb + 1) * tok_per : s->n;
        /* quantized rows hold whole 32-value blocks per head (hd % 32 == 0) */
        const size_t k_off = kv->row_len[0] / hp->n_head_kv * kvh,
                     v_off = kv->row_len[1] / hp->n_head_kv * kvh;
        for (int32_t t = tb * tok_per; t < te;) {
            /* one call per run of tokens of the same sequence */
            int32_t tn = 1;
            while (t + tn < te && s->b->seq[t + tn] == s->b->seq[t])
                tn++;
            const struct attn_kv akv = {
                .k            = kbase + k_off,
                .v            = vbase + v_off,
                .blocks       = kv_layer_blocks(kv, s->l, s->b->seq[t]),
                .block_len    = (size_t)kv->block_tokens * kv->row_len[0],
                .row_len      = kv->row_len[0],
                .block_tokens = kv->block_tokens,
                .f16          = kv->type[0] == HEARTH_KV_F16,
                .kt           = kv_dtype(kv->type[0]),
                .vt           = kv_dtype(kv->type[1]),
                .v_block_len  = (size_t)kv->block_tokens * kv->row_len[1],
                .v_row_len    = kv->row_len[1]};
            int32_t j0[ATTN_LANES_MAX], j1[ATTN_LANES_MAX];
            float *out[ATTN_LANES_MAX];
            const float *q[ATTN_LANES_MAX];
            for (int32_t u = 0, r = 0; u < tn; u++) {
                const int32_t pos = s->b->pos[t + u];
                for (int32_t h = h0; h < h0 + nh; h++, r++) {
                    /* a sliding window sees the last n_swa positions, itself included */
                    j0[r]  = n_swa > 0 && pos >= n_swa ? pos - n_swa + 1 : 0;
                    j1[r]  = pos;
                    q[r]   = c->s.q + (t + u) * qd + (int64_t)h * hd;
                    out[r] = c->s.att + (t + u) * qd + (int64_t)h * hd;
                }
            }
            if (mixed)
                attn_rows_quant(k, out, q, tn * nh, hd, &akv, j0, j1, scale, scratch);
            else if (per_key)
                k->attn_rows_f16(out, q, tn * nh, hd, &akv, j0, j1, scale, scratch);
            else
                k->attn_rows(out, q, tn * nh, hd, &akv, j0, j1, scale, scratch);
            t += tn;
        }
    }
}

void cpu_op_attention(struct hearth_context *ctx, const struct hearth_batch *b, int32_t l)
{
    struct job s = {.ctx = ctx, .b = b, .l = l, .n = b->n};
    threadpool_run(cpu_of(ctx)->tp, attention_items, &s);
    if (ctx->model->layers[l].attn_gated)
        dnet_gate_apply(ctx, cpu_of(ctx)->s.att, b->n);
}
