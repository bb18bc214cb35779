/*
 * cpu_attention.c: the CPU backend's causal attention over the paged KV
 * cache, and where it chooses between llama.cpp's per-key arithmetic
 * (short batches, decode, odd head sizes) and its tiled one.
 */
#include <math.h>

#include "backend/cpu/cpu.h"

struct job {
    struct hearth_context *ctx;
    const struct hearth_batch *b;
    int32_t l;    /* layer */
    int32_t src;  /* the layer whose K/V it reads: l, or the one it reuses (gemma4) */
    int32_t n;    /* rows */
    int32_t hd;   /* the layer's head width */
    int32_t n_kv; /* its KV heads */
};

/* Scores' scale: 1/sqrt(head size), unless the model scales its queries itself. */
static float score_scale(const struct job *s)
{
    return s->ctx->model->hp.q_scale > 0 ? 1.0f : 1.0f / sqrtf((float)s->hd);
}

/* KV head kvh of sequence seq in the job's layer, as the kernels address it. */
static struct attn_kv head_kv(const struct job *s, int32_t kvh, int32_t seq)
{
    const struct kv_cache *kv = &s->ctx->kv;
    /* quantized rows hold whole 32-value blocks per head (hd % 32 == 0); a layer's heads
     * lead the row, which may be wider (the widest layer's) */
    const size_t kh = dtype_row_len(kv_dtype(kv->type[0]), s->hd),
                 vh = dtype_row_len(kv_dtype(kv->type[1]), s->hd);
    return (struct attn_kv){.k            = kv_layer_base(kv, s->src, 0) + kh * kvh,
                            .v            = kv_layer_base(kv, s->src, 1) + vh * kvh,
                            .blocks       = kv_layer_blocks(kv, s->src, seq),
                            .block_len    = (size_t)kv->block_tokens * kv->row_len[0],
                            .row_len      = kv->row_len[0],
                            .block_tokens = kv->block_tokens,
                            .f16          = kv->type[0] == HEARTH_KV_F16,
                            .kt           = kv_dtype(kv->type[0]),
                            .vt           = kv_dtype(kv->type[1]),
                            .v_block_len  = (size_t)kv->block_tokens * kv->row_len[1],
                            .v_row_len    = kv->row_len[1]};
}

/* Row r of a call: head h of token t, its query, its output and the keys it sees. */
static void query_row(const struct job *s, int32_t t, int32_t h, int32_t r, int32_t *j0,
                      int32_t *j1, const float **q, float **out)
{
    const struct cpu_ctx *c  = cpu_of(s->ctx);
    const struct hparams *hp = &s->ctx->model->hp;
    const int64_t at         = (int64_t)t * hp->n_head * s->hd + (int64_t)h * s->hd;
    const int32_t pos = s->b->pos[t], n_swa = s->ctx->kv.window[s->src];
    /* a sliding window sees the last n_swa positions, itself included */
    j0[r]  = n_swa > 0 && pos >= n_swa ? pos - n_swa + 1 : 0;
    j1[r]  = pos;
    q[r]   = c->s.q + at;
    out[r] = c->s.att + at;
}

/*
 * KV heads per call of attn_heads_f16 for a batch where no token shares its
 * sequence with the next (decode: a token alone per sequence, so its GQA
 * group is all one call can take): the most, 2 or 4, whose rows fill at
 * most the lanes, that divides the KV heads and leaves a call for every
 * thread; 1 where the tokens fill the lanes instead (a verify step, a short
 * prefill) or the head size is not whole vectors.
 */
static int32_t heads_per_call(const struct job *s, int32_t group, int nth)
{
    const struct kernels *k = cpu_of(s->ctx)->k;
    if (s->hd % 16 != 0)
        return 1;
    for (int32_t t = 1; t < s->n; t++)
        if (s->b->seq[t] == s->b->seq[t - 1])
            return 1;
    int32_t nh = 4;
    while (nh > 1 && (nh * group > k->attn_rows_f16_lanes || s->n_kv % nh != 0 ||
                      (long)s->n * (s->n_kv / nh) < nth))
        nh /= 2;
    return nh;
}

/*
 * attention_items for such a batch: an item is nh KV heads of one token,
 * their GQA groups' rows in one call, lane l the row l / nh of head l % nh.
 */
static void attention_heads(const struct job *s, int ith, int nth, int32_t nh)
{
    const struct cpu_ctx *c  = cpu_of(s->ctx);
    const struct hparams *hp = &s->ctx->model->hp;
    const int32_t group = hp->n_head / s->n_kv, blocks = s->n_kv / nh;
    const size_t head_off = dtype_row_len(kv_dtype(s->ctx->kv.type[0]), s->hd);
    float *scratch        = c->s.scores + (size_t)ith * c->s.scores_per_thread;
    for (long i = ith; i < (long)s->n * blocks; i += nth) {
        const int32_t t = (int32_t)(i / blocks), kvh0 = (int32_t)(i % blocks) * nh;
        const struct attn_kv akv = head_kv(s, kvh0, s->b->seq[t]);
        int32_t j0[16], j1[16];
        float *out[16];
        const float *q[16];
        for (int32_t l = 0; l < group * nh; l++)
            query_row(s, t, (kvh0 + l % nh) * group + l / nh, l, j0, j1, q, out);
        c->k->attn_heads_f16(out, q, group * nh, nh, s->hd, &akv, head_off, j0, j1, score_scale(s),
                             scratch);
    }
}

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
    const int32_t hd = s->hd, n_kv = s->n_kv, group = hp->n_head / n_kv;
    const float scale = score_scale(s);
    /* llama.cpp tiles only batches of ATTN_TILE rows or more over K and V of one
     * type, f16 or f32, and only when a head is whole 16-float vectors (the
     * reference machine's AVX-512 width); other caches go key by key */
    const bool same  = kv->type[0] == kv->type[1];
    const bool mixed = !same || (kv->type[0] != HEARTH_KV_F16 && kv->type[0] != HEARTH_KV_F32);
    const bool per_key =
        !mixed && kv->type[0] == HEARTH_KV_F16 && (s->n < ATTN_TILE || hd % 16 != 0);
    float *scratch = c->s.scores + (size_t)ith * c->s.scores_per_thread;
    /* an item: `lanes` heads of one token, or whole groups of tok_per tokens; the tiled
     * kernel may take more rows than the per-key ones */
    const int32_t lanes = mixed     ? ATTN_LANES
                          : per_key ? k->attn_rows_f16_lanes
                                    : k->attn_rows_lanes;
    const int32_t nh    = per_key && k->attn_heads_f16 ? heads_per_call(s, group, nth) : 1;
    if (nh > 1) {
        attention_heads(s, ith, nth, nh);
        return;
    }
    const int32_t heads_per = group < lanes ? group : lanes;
    const int32_t tok_per   = group < lanes ? lanes / group : 1;
    const int32_t hblocks   = (group + heads_per - 1) / heads_per;
    const int32_t tblocks   = (s->n + tok_per - 1) / tok_per;
    const long items        = (long)tblocks * n_kv * hblocks;
    for (long i = ith; i < items; i += nth) {
        const int32_t tb  = (int32_t)(i / ((long)n_kv * hblocks));
        const int32_t kvh = (int32_t)(i / hblocks % n_kv), hb = (int32_t)(i % hblocks);
        const int32_t h0 = kvh * group + hb * heads_per;
        const int32_t nh = group - hb * heads_per < heads_per ? group - hb * heads_per : heads_per;
        const int32_t te = (tb + 1) * tok_per < s->n ? (tb + 1) * tok_per : s->n;
        for (int32_t t = tb * tok_per; t < te;) {
            /* one call per run of tokens of the same sequence */
            int32_t tn = 1;
            while (t + tn < te && s->b->seq[t + tn] == s->b->seq[t])
                tn++;
            const struct attn_kv akv = head_kv(s, kvh, s->b->seq[t]);
            int32_t j0[ATTN_LANES_MAX], j1[ATTN_LANES_MAX];
            float *out[ATTN_LANES_MAX];
            const float *q[ATTN_LANES_MAX];
            for (int32_t u = 0, r = 0; u < tn; u++)
                for (int32_t h = h0; h < h0 + nh; h++, r++)
                    query_row(s, t + u, h, r, j0, j1, q, out);
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
    const struct hearth_model *m = ctx->model;
    struct job s                 = {.ctx  = ctx,
                                    .b    = b,
                                    .l    = l,
                                    .src  = layer_kv_src(m->layers, l),
                                    .n    = b->n,
                                    .hd   = layer_head_dim(&m->hp, &m->layers[l]),
                                    .n_kv = layer_n_head_kv(&m->hp, &m->layers[l])};
    threadpool_run(cpu_of(ctx)->tp, attention_items, &s);
    if (ctx->model->layers[l].attn_gated)
        dnet_gate_apply(ctx, cpu_of(ctx)->s.att, b->n);
}
