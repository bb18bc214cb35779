/*
 * forward.c: the llama-family forward pass over one micro-batch, and the
 * context that owns its KV cache, scratch buffers and threads.
 *
 * Every step is one fork-join region on the thread pool, split by output
 * row (matmuls), by token (norms, rope) or by (token, head) (attention).
 * Matmuls convert each activation row once to the weight type's
 * vec_dot_type, then every weight row is dotted against all the batch's
 * rows while it is in cache: weights are read once per micro-batch.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "util/errfmt.h"
#include "util/fp16.h"

struct hearth_context_params hearth_context_default_params(void)
{
    return (struct hearth_context_params){
        .n_ctx = 0, .n_seq_max = 1, .n_batch = 512, .kv_block = 32, .kv_type = HEARTH_KV_F16,
        .n_threads = 0, .n_state_snapshots = 8};
}

static void scratch_free(struct scratch *s)
{
    free(s->x);
    free(s->xb);
    free(s->q);
    free(s->kx);
    free(s->vx);
    free(s->att);
    free(s->hb);
    free(s->hb2);
    free(s->scores);
    free(s->act);
    free(s->act_sum);
    free(s->logits);
    free(s->out_row);
    free(s->seq_next);
    moe_scratch_free(s->moe);
    memset(s, 0, sizeof *s);
}

static bool scratch_alloc(struct scratch *s, const struct hparams *hp, int32_t n_batch,
                          int32_t n_ctx, int n_threads, int32_t n_seq)
{
    const size_t nb = (size_t)n_batch, qd = (size_t)hp->n_head * hp->head_dim,
                 kvd = (size_t)hp->n_head_kv * hp->head_dim;
    size_t max_in = (size_t)hp->n_embd;
    if (qd > max_in)
        max_in = qd;
    if ((size_t)hp->n_ff > max_in)
        max_in = (size_t)hp->n_ff;
    if ((size_t)hp->n_in_extra > max_in)
        max_in = (size_t)hp->n_in_extra;
    /* f32 is the widest activation encoding (4 bytes/element); quantized ones are smaller */
    s->act_row = (max_in * sizeof(float) + 63) / 64 * 64;
    s->x = malloc(nb * hp->n_embd * sizeof(float));
    s->xb = malloc(nb * (hp->n_embd > (int32_t)qd ? (size_t)hp->n_embd : qd) * sizeof(float));
    s->q = malloc(nb * qd * sizeof(float));
    s->kx = malloc(nb * kvd * sizeof(float));
    s->vx = malloc(nb * kvd * sizeof(float));
    s->att = malloc(nb * qd * sizeof(float));
    s->hb = malloc(nb * hp->n_ff * sizeof(float));
    s->hb2 = malloc(nb * hp->n_ff * sizeof(float));
    s->scores_per_thread = ATTN_SCRATCH(hp->head_dim);
    s->scores = malloc((size_t)n_threads * s->scores_per_thread * sizeof(float));
    s->act = malloc(nb * s->act_row);
    s->act_sum = malloc(nb * (max_in / 32) * sizeof(*s->act_sum));
    s->logits = malloc(nb * hp->n_vocab * sizeof(float));
    s->out_row = malloc(nb * sizeof(int32_t));
    s->seq_next = malloc((size_t)n_seq * sizeof(int32_t));
    if (hp->n_expert && !(s->moe = moe_scratch_new(hp, n_batch)))
        return false;
    return s->x && s->xb && s->q && s->kx && s->vx && s->att && s->hb && s->hb2 && s->scores &&
           s->act_sum && s->act && s->logits && s->out_row && s->seq_next;
}

enum hearth_status hearth_context_new(struct hearth_model *model,
                                      const struct hearth_context_params *params,
                                      struct hearth_context **out, char *err, size_t err_len)
{
    struct hearth_context_params p = params ? *params : hearth_context_default_params();
    const struct hparams *hp = &model->hp;
    *out = NULL;
    if (p.n_ctx <= 0)
        p.n_ctx = hp->n_ctx_train;
    if (p.n_seq_max < 1 || p.n_batch < 1 || p.kv_block < 1 || p.n_ctx > (1 << 24) ||
        p.n_seq_max > 4096 || p.n_batch > 65536 || p.kv_block > 4096)
        return fail(HEARTH_EINVAL, err, err_len,
                    "context: n_ctx %d, n_seq_max %d, n_batch %d or kv_block %d is out of range",
                    p.n_ctx, p.n_seq_max, p.n_batch, p.kv_block);
    if (p.n_state_snapshots < 0 || p.n_state_snapshots > 1024)
        return fail(HEARTH_EINVAL, err, err_len,
                    "context: n_state_snapshots %d is out of range (0..1024 per sequence)",
                    p.n_state_snapshots);
    if (p.n_threads <= 0)
        p.n_threads = model->n_threads;
    struct hearth_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return fail(HEARTH_ENOMEM, err, err_len, "context: out of memory");
    ctx->model = model;
    ctx->p = p;
    int32_t per_seq = (p.n_ctx + p.kv_block - 1) / p.kv_block;
    enum hearth_status st =
        kv_init(&ctx->kv, hp->n_layer, hp->n_head_kv * hp->head_dim, p.n_seq_max, p.n_ctx,
                p.kv_block, per_seq * p.n_seq_max, p.kv_type, err, err_len);
    if (st)
        goto err;
    if (!scratch_alloc(&ctx->s, hp, p.n_batch, p.n_ctx, p.n_threads, p.n_seq_max)) {
        st = fail(HEARTH_ENOMEM, err, err_len, "context: out of memory for a batch of %d",
                  p.n_batch);
        goto err;
    }
    if (hp->recurrent && !(ctx->dn = dnet_cache_new(model, p.n_seq_max, p.n_batch))) {
        st = fail(HEARTH_ENOMEM, err, err_len, "context: out of memory for the recurrent state");
        goto err;
    }
    if (ctx->dn && p.n_state_snapshots > 0) {
        const size_t len = dnet_state_len(ctx->dn);
        if (!(ctx->snap = snap_new(p.n_seq_max, p.n_state_snapshots, len))) {
            st = fail(HEARTH_ENOMEM, err, err_len,
                      "context: cannot map %zu bytes for %d state snapshots per sequence",
                      snap_bytes(p.n_seq_max, p.n_state_snapshots, len), p.n_state_snapshots);
            goto err;
        }
        /* the one memory figure a user of --ctx-checkpoints needs, said once at startup */
        fprintf(stderr,
                "hearth: %s: state snapshots: up to %d per sequence x %d of %.2f MiB each "
                "(%.1f MiB at most)\n",
                model->arch, p.n_state_snapshots, p.n_seq_max,
                (double)len * sizeof(float) / (1 << 20),
                (double)snap_bytes(p.n_seq_max, p.n_state_snapshots, len) / (1 << 20));
    }
    ctx->tp = threadpool_new(p.n_threads);
    if (!ctx->tp) {
        st = fail(HEARTH_ENOMEM, err, err_len, "context: cannot start %d threads", p.n_threads);
        goto err;
    }
    *out = ctx;
    return HEARTH_OK;
err:
    hearth_context_free(ctx);
    return st;
}

void hearth_context_free(struct hearth_context *ctx)
{
    if (!ctx)
        return;
    if (ctx->tp)
        threadpool_free(ctx->tp);
    scratch_free(&ctx->s);
    snap_free(ctx->snap);
    dnet_cache_free(ctx->dn);
    kv_free(&ctx->kv);
    free(ctx);
}

/*
 * Loads seq's recurrent state from the snapshot nearest at or below p0
 * (zeroes it when there is none) and returns that snapshot's position,
 * where the caller cuts the KV. seq's own snapshots above it are given up.
 */
static int32_t state_resume(struct hearth_context *ctx, int32_t seq, int32_t p0)
{
    int32_t at         = 0;
    const float *state = ctx->snap ? snap_find(ctx->snap, &ctx->kv, seq, p0, &at) : NULL;
    if (state)
        dnet_state_load(ctx->dn, seq, state);
    else
        dnet_cache_reset(ctx->dn, seq);
    if (ctx->snap)
        snap_disown(ctx->snap, seq, at);
    return at;
}

void hearth_seq_truncate(struct hearth_context *ctx, int32_t seq, int32_t p0)
{
    if (seq < 0 || seq >= ctx->kv.n_seq)
        return;
    /* a recurrent state cannot go back by itself: it resumes from a snapshot or from 0 */
    if (ctx->dn && p0 < ctx->kv.seqs[seq].n_tokens)
        p0 = state_resume(ctx, seq, p0);
    kv_truncate(&ctx->kv, seq, p0);
}

int32_t hearth_seq_len(const struct hearth_context *ctx, int32_t seq)
{
    return seq >= 0 && seq < ctx->kv.n_seq ? ctx->kv.seqs[seq].n_tokens : 0;
}

const float *hearth_get_logits(const struct hearth_context *ctx, int32_t i)
{
    if (i < 0 || i >= ctx->s.n_rows || ctx->s.out_row[i] < 0)
        return NULL;
    return ctx->s.logits + (size_t)ctx->s.out_row[i] * ctx->model->hp.n_vocab;
}

/*
 * Runs fn, split by token over the pool; a single token (decode) runs on
 * the calling thread, since waking the pool costs more than the work.
 */
static void run_by_token(struct hearth_context *ctx, void (*fn)(void *, int, int), void *arg,
                         int32_t n)
{
    if (n == 1)
        fn(arg, 0, 1);
    else
        threadpool_run(ctx->tp, fn, arg);
}

/* ------------------------------------------------------------------ matmul --- */

struct matmul_job {
    const struct kernels *k;
    const struct weight *w;
    const float *in;   /* [n][in_stride] */
    int64_t in_stride;
    float *out;        /* [n][out_stride], columns 0..w->n_out */
    int64_t out_stride;
    int32_t n;
    void *act;         /* [n][act_row] */
    size_t act_row;
    struct q8_0_sum *act_sum; /* [n][n_in / 32] for Q8_0 activations, else unused */
};

static void quantize_rows(void *arg, int ith, int nth)
{
    struct matmul_job *j = arg;
    const struct type_kernels *tk = &j->k->type[j->w->type];
    const struct type_kernels *ak = &j->k->type[tk->vec_dot_type];
    long t0, t1;
    threadpool_split(j->n, ith, nth, &t0, &t1);
    for (long t = t0; t < t1; t++) {
        void *dst = (uint8_t *)j->act + t * j->act_row;
        if (tk->vec_dot_type == DTYPE_F32)
            memcpy(dst, j->in + t * j->in_stride, (size_t)j->w->n_in * sizeof(float));
        else
            ak->from_float(j->in + t * j->in_stride, dst, j->w->n_in);
        if (tk->vec_dot_type == DTYPE_Q8_0)
            q8_0_sums(dst, j->w->n_in, j->act_sum + t * (j->w->n_in / 32));
    }
}

/* Tokens per pass over a thread's weight rows: their activations stay in L2 meanwhile. */
#define MATMUL_TOKEN_TILE 64

static void matmul_rows(void *arg, int ith, int nth)
{
    struct matmul_job *j = arg;
    const struct weight *w = j->w;
    const struct type_kernels *tk = &j->k->type[w->type];
    long r0, r1, g0 = 0, g1 = 0;
    if (w->packed) {
        /* packed weights: whole groups of eight rows, each one stream, decode and prefill */
        threadpool_split(w->n_out / 8, ith, nth, &g0, &g1);
        r0 = r1 = 0;
    } else if (tk->gemm8 && j->n > 1) {
        /* prefill: whole groups of eight rows per thread share each weight block across
         * tokens; the tail rows go to vec_dot. Decode streams row by row instead. */
        threadpool_split(w->n_out / 8, ith, nth, &g0, &g1);
        r0 = w->n_out / 8 * 8;
        r1 = ith == nth - 1 ? w->n_out : r0;
    } else {
        threadpool_split(w->n_out, ith, nth, &r0, &r1);
    }
    for (int32_t t0 = 0; t0 < j->n; t0 += MATMUL_TOKEN_TILE) {
        const int32_t tn = j->n - t0 < MATMUL_TOKEN_TILE ? j->n - t0 : MATMUL_TOKEN_TILE;
        const uint8_t *act = (const uint8_t *)j->act + (size_t)t0 * j->act_row;
        const struct q8_0_sum *as = j->act_sum + (size_t)t0 * (w->n_in / 32);
        float *out = j->out + (int64_t)t0 * j->out_stride;
        for (long g = g0; g < g1; g++) {
            if (w->packed)
                tk->gemm8p(w->n_in, (const uint8_t *)w->packed + (size_t)g * 8 * w->row_len, act,
                           j->act_row, as, tn, out + g * 8, (size_t)j->out_stride);
            else
                tk->gemm8(w->n_in, (const uint8_t *)w->data + (size_t)g * 8 * w->row_len,
                          w->row_len, act, j->act_row, as, tn, out + g * 8, (size_t)j->out_stride);
        }
        for (long r = r0; r < r1; r++) {
            const void *wrow = (const uint8_t *)w->data + r * w->row_len;
            for (int32_t t = 0; t < tn; t++)
                tk->vec_dot(w->n_in, &out[t * j->out_stride + r], wrow, act + t * j->act_row);
        }
    }
}

/*
 * out[t][0..n_out) = W in[t] for t < n. Rows of in are w->n_in floats.
 * prev: the weight of the matmul just run on the same in, or NULL; when it
 * takes the same activation type, its quantized rows are used again.
 */
static void matmul(struct hearth_context *ctx, const struct weight *w, const float *in,
                   int64_t in_stride, float *out, int64_t out_stride, int32_t n,
                   const struct weight *prev);

void model_matmul(struct hearth_context *ctx, const struct weight *w, const float *in,
                  int64_t in_stride, float *out, int64_t out_stride, int32_t n,
                  const struct weight *prev)
{
    matmul(ctx, w, in, in_stride, out, out_stride, n, prev);
}

static void matmul(struct hearth_context *ctx, const struct weight *w, const float *in,
                   int64_t in_stride, float *out, int64_t out_stride, int32_t n,
                   const struct weight *prev)
{
    const struct kernels *k = ctx->model->k;
    const enum dtype at = k->type[w->type].vec_dot_type;
    /* rows as long as this matmul's activations, so a token tile's rows lie close together */
    const size_t act_row = (dtype_row_len(at, w->n_in) + 63) / 64 * 64;
    struct matmul_job j = {k, w, in, in_stride, out, out_stride, n, ctx->s.act, act_row,
                           ctx->s.act_sum};
    if (!prev || k->type[prev->type].vec_dot_type != at || prev->n_in != w->n_in) {
        run_by_token(ctx, quantize_rows, &j, n);
    }
    threadpool_run(ctx->tp, matmul_rows, &j);
}

/* -------------------------------------------------------------- the layers --- */

struct step {
    struct hearth_context *ctx;
    const struct hearth_batch *b;
    int32_t l;        /* layer */
    const float *norm_w;
    const float *src; /* rmsnorm input rows */
    float *dst;       /* rmsnorm output rows */
    int32_t n;        /* rows */
    int64_t width;
};

static void rmsnorm_rows(void *arg, int ith, int nth)
{
    struct step *s = arg;
    const struct kernels *k = s->ctx->model->k;
    long t0, t1;
    threadpool_split(s->n, ith, nth, &t0, &t1);
    for (long t = t0; t < t1; t++)
        k->rmsnorm(s->dst + t * s->width, s->src + t * s->width, s->norm_w, s->width,
                   s->ctx->model->hp.norm_eps);
}

static void rmsnorm(struct hearth_context *ctx, float *dst, const float *src, const float *w,
                    int32_t n)
{
    struct step s = {.ctx = ctx, .norm_w = w, .src = src, .dst = dst, .n = n,
                     .width = ctx->model->hp.n_embd};
    run_by_token(ctx, rmsnorm_rows, &s, n);
}

/*
 * Rotates the first rope_dim dims of each head by pos * base^(-2i/rope_dim):
 * adjacent pairs (x[2i], x[2i+1]) for llama, halves (x[i], x[i + rope_dim/2])
 * for NEOX-style models. The angle advances by repeated multiplication, as
 * ggml computes it, so rounding matches.
 */
static void rope(float *x, int32_t n_heads, int32_t head_dim, int32_t rope_dim, float base,
                 bool neox, int32_t pos, const int32_t *sections)
{
    /* IMRoPE (sections): pairs cycle through time, height and width, all at pos for text;
     * pairs past those sections take the fourth position, 0 for text, so stay as they are */
    int32_t n_sect = 0;
    if (sections)
        n_sect = sections[0] + sections[1] + sections[2] + sections[3];
    const float theta_scale = powf(base, -2.0f / (float)rope_dim);
    const int32_t half = rope_dim / 2;
    for (int32_t h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * head_dim;
        float theta = (float)pos;
        for (int32_t i = 0; i < half; i++) {
            bool still = false;
            if (n_sect) {
                const int32_t sec = i % n_sect, m3 = sec % 3;
                still = !(sec < 3 * sections[m3]);
            }
            const float c = still ? 1.0f : cosf(theta), s = still ? 0.0f : sinf(theta);
            const int32_t a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
            const float x0 = v[a], x1 = v[b];
            /* the fused forms llama.cpp's compiled rope produces, to the last bit */
            v[a] = fmaf(x0, c, -(x1 * s));
            v[b] = fmaf(x0, s, x1 * c);
            theta *= theta_scale;
        }
    }
}

/* Adds biases, applies rope and stores this batch's K/V rows into the cache. */
static void qkv_finish(void *arg, int ith, int nth)
{
    struct step *s = arg;
    struct hearth_context *ctx = s->ctx;
    const struct hparams *hp = &ctx->model->hp;
    const struct layer *L = &ctx->model->layers[s->l];
    const struct kernels *k = ctx->model->k;
    const int64_t qd = (int64_t)hp->n_head * hp->head_dim, kvd = (int64_t)hp->n_head_kv * hp->head_dim;
    long t0, t1;
    threadpool_split(s->n, ith, nth, &t0, &t1);
    for (long t = t0; t < t1; t++) {
        float *q = ctx->s.q + t * qd, *kx = ctx->s.kx + t * kvd, *vx = ctx->s.vx + t * kvd;
        if (L->bq)
            k->axpy_f32(q, 1.0f, L->bq, qd);
        if (L->bk)
            k->axpy_f32(kx, 1.0f, L->bk, kvd);
        if (L->bv)
            k->axpy_f32(vx, 1.0f, L->bv, kvd);
        if (L->q_norm)
            for (int32_t h = 0; h < hp->n_head; h++)
                k->rmsnorm(q + h * hp->head_dim, q + h * hp->head_dim, L->q_norm, hp->head_dim,
                           hp->norm_eps);
        if (L->k_norm)
            for (int32_t h = 0; h < hp->n_head_kv; h++)
                k->rmsnorm(kx + h * hp->head_dim, kx + h * hp->head_dim, L->k_norm, hp->head_dim,
                           hp->norm_eps);
        const int32_t pos = s->b->pos[t], seq = s->b->seq[t];
        const int32_t *sect = hp->rope_sections[0] + hp->rope_sections[1] + hp->rope_sections[2] +
                                          hp->rope_sections[3]
                                  ? hp->rope_sections
                                  : NULL;
        rope(q, hp->n_head, hp->head_dim, hp->rope_dim, L->rope_base, hp->rope_neox, pos, sect);
        rope(kx, hp->n_head_kv, hp->head_dim, hp->rope_dim, L->rope_base, hp->rope_neox, pos,
             sect);
        if (hp->q_scale > 0)
            k->scale_f32(q, hp->q_scale, qd);
        void *kdst = kv_row(&ctx->kv, s->l, 0, seq, pos), *vdst = kv_row(&ctx->kv, s->l, 1, seq, pos);
        if (ctx->kv.type == HEARTH_KV_F16) {
            k->f32_to_f16(kx, kdst, kvd);
            k->f32_to_f16(vx, vdst, kvd);
        } else {
            memcpy(kdst, kx, (size_t)kvd * sizeof(float));
            memcpy(vdst, vx, (size_t)kvd * sizeof(float));
        }
    }
}

/*
 * Causal attention of every (token, head) of the batch over its sequence's
 * cache. Work items are runs of up to ATTN_LANES query rows that share a KV
 * head: the heads of one GQA group, over as many consecutive tokens of one
 * sequence as fit. Items go round-robin to threads, so the long rows at the
 * end of a causal prefill are spread over all of them.
 */
static void attention(void *arg, int ith, int nth)
{
    struct step *s             = arg;
    struct hearth_context *ctx = s->ctx;
    const struct hparams *hp   = &ctx->model->hp;
    const struct kernels *k    = ctx->model->k;
    const struct kv_cache *kv  = &ctx->kv;
    const int32_t hd = hp->head_dim, group = hp->n_head / hp->n_head_kv;
    const int64_t qd     = (int64_t)hp->n_head * hd;
    const float scale    = hp->q_scale > 0 ? 1.0f : 1.0f / sqrtf((float)hd);
    const int32_t n_swa  = ctx->model->layers[s->l].swa ? hp->n_swa : 0;
    /* llama.cpp tiles only batches of ATTN_TILE rows or more, and only when a
     * head is whole 16-float vectors (the reference machine's AVX-512 width) */
    const bool per_key = kv->type == HEARTH_KV_F16 && (s->n < ATTN_TILE || hd % 16 != 0);
    float *scratch       = ctx->s.scores + (size_t)ith * ctx->s.scores_per_thread;
    const uint8_t *kbase = kv->mem + (size_t)s->l * 2 * kv->layer_len,
                  *vbase = kbase + kv->layer_len;
    /* an item: ATTN_LANES heads of one token, or whole groups of tok_per tokens */
    const int32_t heads_per = group < ATTN_LANES ? group : ATTN_LANES;
    const int32_t tok_per   = group < ATTN_LANES ? ATTN_LANES / group : 1;
    const int32_t hblocks   = (group + heads_per - 1) / heads_per;
    const int32_t tblocks   = (s->n + tok_per - 1) / tok_per;
    const long items        = (long)tblocks * hp->n_head_kv * hblocks;
    for (long i = ith; i < items; i += nth) {
        const int32_t tb  = (int32_t)(i / ((long)hp->n_head_kv * hblocks));
        const int32_t kvh = (int32_t)(i / hblocks % hp->n_head_kv), hb = (int32_t)(i % hblocks);
        const int32_t h0 = kvh * group + hb * heads_per;
        const int32_t nh = group - hb * heads_per < heads_per ? group - hb * heads_per : heads_per;
        const int32_t te = (tb + 1) * tok_per < s->n ? (tb + 1) * tok_per : s->n;
        const size_t head_off = (size_t)kvh * hd * kv->elem_len;
        for (int32_t t = tb * tok_per; t < te;) {
            /* one call per run of tokens of the same sequence */
            int32_t tn = 1;
            while (t + tn < te && s->b->seq[t + tn] == s->b->seq[t])
                tn++;
            const struct attn_kv akv = {.k      = kbase + head_off,
                                        .v      = vbase + head_off,
                                        .blocks = kv->seqs[s->b->seq[t]].blocks,
                                        .block_len =
                                            (size_t)kv->block_tokens * kv->kv_dim * kv->elem_len,
                                        .row_len      = (size_t)kv->kv_dim * kv->elem_len,
                                        .block_tokens = kv->block_tokens,
                                        .f16          = kv->type == HEARTH_KV_F16};
            int32_t j0[ATTN_LANES], j1[ATTN_LANES];
            float *out[ATTN_LANES];
            const float *q[ATTN_LANES];
            for (int32_t u = 0, r = 0; u < tn; u++) {
                const int32_t pos = s->b->pos[t + u];
                for (int32_t h = h0; h < h0 + nh; h++, r++) {
                    /* a sliding window sees the last n_swa positions, itself included */
                    j0[r]  = n_swa > 0 && pos >= n_swa ? pos - n_swa + 1 : 0;
                    j1[r]  = pos;
                    q[r]   = ctx->s.q + (t + u) * qd + (int64_t)h * hd;
                    out[r] = ctx->s.att + (t + u) * qd + (int64_t)h * hd;
                }
            }
            if (per_key)
                for (int32_t r = 0; r < tn * nh; r++)
                    k->attn_row_f16(out[r], q[r], hd, &akv, j0[r], j1[r], scale, scratch);
            else
                k->attn_rows(out, q, tn * nh, hd, &akv, j0, j1, scale, scratch);
            t += tn;
        }
    }
}

static void residual_add(void *arg, int ith, int nth)
{
    struct step *s = arg;
    long t0, t1;
    threadpool_split(s->n, ith, nth, &t0, &t1);
    for (long t = t0; t < t1; t++)
        s->ctx->model->k->axpy_f32(s->dst + t * s->width, 1.0f, s->src + t * s->width, s->width);
}

/* hb = act(hb) * hb2: SiLU, or GELU for gemma3. */
static void gated_act(void *arg, int ith, int nth)
{
    struct step *s = arg;
    const struct kernels *k = s->ctx->model->k;
    void (*act)(float *, const float *, const float *, int64_t) =
        s->ctx->model->hp.ffn_gelu ? k->gelu_mul : k->silu_mul;
    long t0, t1;
    threadpool_split(s->n, ith, nth, &t0, &t1);
    for (long t = t0; t < t1; t++)
        act(s->ctx->s.hb + t * s->width, s->ctx->s.hb + t * s->width,
            s->ctx->s.hb2 + t * s->width, s->width);
}

static void layer_forward(struct hearth_context *ctx, const struct hearth_batch *b, int32_t l)
{
    const struct hparams *hp = &ctx->model->hp;
    const struct layer *L = &ctx->model->layers[l];
    struct scratch *S = &ctx->s;
    const int32_t n = b->n;
    const int64_t d = hp->n_embd, qd = (int64_t)hp->n_head * hp->head_dim,
                  kvd = (int64_t)hp->n_head_kv * hp->head_dim;
    struct step st = {.ctx = ctx, .b = b, .l = l, .n = n, .width = d};

    rmsnorm(ctx, S->xb, S->x, L->attn_norm, n);
    if (L->dnet) {
        dnet_forward(ctx, b, l, S->xb, S->xb);
    } else {
        if (L->attn_gated) {
            matmul(ctx, &L->wq, S->xb, d, dnet_gate_rows(ctx), 2 * qd, n, NULL);
            dnet_gate_split(ctx, S->q, n);
        } else {
            matmul(ctx, &L->wq, S->xb, d, S->q, qd, n, NULL);
        }
        matmul(ctx, &L->wk, S->xb, d, S->kx, kvd, n, &L->wq);
        matmul(ctx, &L->wv, S->xb, d, S->vx, kvd, n, &L->wk);
        run_by_token(ctx, qkv_finish, &st, n);
        threadpool_run(ctx->tp, attention, &st);
        if (L->attn_gated)
            dnet_gate_apply(ctx, S->att, n);
        matmul(ctx, &L->wo, S->att, qd, S->xb, d, n, NULL);
    }
    if (L->post_attn_norm)
        rmsnorm(ctx, S->xb, S->xb, L->post_attn_norm, n);
    st.src = S->xb;
    st.dst = S->x;
    run_by_token(ctx, residual_add, &st, n);

    rmsnorm(ctx, S->xb, S->x, L->ffn_norm, n);
    if (L->moe) {
        /* llama.cpp runs the last layer's FFN on the rows it outputs only */
        int32_t n_gemm = n;
        if (hp->last_layer_all_rows)
            ;
        else if (l == hp->n_layer - 1 && b->logits)
            for (int32_t i = n_gemm = 0; i < n; i++)
                n_gemm += b->logits[i] != 0;
        else if (l == hp->n_layer - 1)
            n_gemm = 1;
        moe_ffn(ctx, L->moe, S->xb, S->x, n, n_gemm);
        return;
    }
    matmul(ctx, &L->w_gate, S->xb, d, S->hb, hp->n_ff, n, NULL);
    matmul(ctx, &L->w_up, S->xb, d, S->hb2, hp->n_ff, n, &L->w_gate);
    st.width = hp->n_ff;
    run_by_token(ctx, gated_act, &st, n);
    matmul(ctx, &L->w_down, S->hb, hp->n_ff, S->xb, d, n, NULL);
    if (L->post_ffn_norm)
        rmsnorm(ctx, S->xb, S->xb, L->post_ffn_norm, n);
    st.width = d;
    run_by_token(ctx, residual_add, &st, n);
}

/* Checks the batch against the cache and reserves its KV blocks. */
static enum hearth_status batch_prepare(struct hearth_context *ctx, const struct hearth_batch *b,
                                        char *err, size_t err_len)
{
    const int32_t n_seq = ctx->kv.n_seq, n_vocab = ctx->model->hp.n_vocab;
    if (b->n < 1 || b->n > ctx->p.n_batch)
        return fail(HEARTH_EINVAL, err, err_len, "decode: batch of %d tokens, allowed 1..%d",
                    b->n, ctx->p.n_batch);
    int32_t *next = ctx->s.seq_next;
    for (int32_t s = 0; s < n_seq; s++)
        next[s] = ctx->kv.seqs[s].n_tokens;
    for (int32_t i = 0; i < b->n; i++) {
        if (b->seq[i] < 0 || b->seq[i] >= n_seq)
            return fail(HEARTH_EINVAL, err, err_len, "decode: row %d has sequence %d, allowed 0..%d",
                        i, b->seq[i], n_seq - 1);
        if (b->token[i] < 0 || b->token[i] >= n_vocab)
            return fail(HEARTH_EINVAL, err, err_len, "decode: row %d has token %d, vocab is %d",
                        i, b->token[i], n_vocab);
        if (b->pos[i] != next[b->seq[i]])
            return fail(HEARTH_EINVAL, err, err_len,
                        "decode: row %d has position %d but sequence %d continues at %d", i,
                        b->pos[i], b->seq[i], next[b->seq[i]]);
        next[b->seq[i]]++;
    }
    for (int32_t s = 0; s < n_seq; s++) {
        int32_t add = next[s] - ctx->kv.seqs[s].n_tokens;
        if (add == 0)
            continue;
        enum hearth_status st = kv_reserve(&ctx->kv, s, add, err, err_len);
        if (st) {
            for (int32_t r = 0; r < s; r++) /* give back what this batch reserved */
                kv_truncate(&ctx->kv, r, ctx->kv.seqs[r].n_tokens);
            return st;
        }
    }
    return HEARTH_OK;
}

static void embed_rows(void *arg, int ith, int nth)
{
    struct step *s = arg;
    const struct weight *e = &s->ctx->model->tok_embd;
    const struct type_kernels *tk = &s->ctx->model->k->type[e->type];
    long t0, t1;
    threadpool_split(s->n, ith, nth, &t0, &t1);
    for (long t = t0; t < t1; t++) {
        float *x = s->ctx->s.x + t * e->n_in;
        tk->to_float((const uint8_t *)e->data + (size_t)s->b->token[t] * e->row_len, x, e->n_in);
        if (s->ctx->model->hp.embd_scale != 1.0f)
            s->ctx->model->k->scale_f32(x, s->ctx->model->hp.embd_scale, e->n_in);
    }
}

/* Logits to cap * tanh(logit / cap), as ggml's scale, tanh, scale. */
static void softcap_rows(void *arg, int ith, int nth)
{
    struct step *s = arg;
    const struct hparams *hp = &s->ctx->model->hp;
    long t0, t1;
    threadpool_split(s->n, ith, nth, &t0, &t1);
    for (long t = t0; t < t1; t++) {
        float *y = s->ctx->s.logits + t * hp->n_vocab;
        for (int32_t i = 0; i < hp->n_vocab; i++)
            y[i] = tanhf(y[i] * (1.0f / hp->logit_softcap)) * hp->logit_softcap;
    }
}

enum hearth_status hearth_decode(struct hearth_context *ctx, const struct hearth_batch *b,
                                 char *err, size_t err_len)
{
    const struct hparams *hp = &ctx->model->hp;
    struct scratch *S = &ctx->s;
    S->n_rows = 0;
    enum hearth_status st = batch_prepare(ctx, b, err, err_len);
    if (st)
        return st;
    if (ctx->snap)
        snap_plan(ctx->snap, b, ctx->kv.block_tokens, dnet_snap_rows(ctx->dn));
    struct step e = {.ctx = ctx, .b = b, .n = b->n};
    run_by_token(ctx, embed_rows, &e, b->n);
    for (int32_t l = 0; l < hp->n_layer; l++)
        layer_forward(ctx, b, l);
    for (int32_t i = 0; i < b->n; i++)
        ctx->kv.seqs[b->seq[i]].n_tokens = b->pos[i] + 1 > ctx->kv.seqs[b->seq[i]].n_tokens
                                               ? b->pos[i] + 1
                                               : ctx->kv.seqs[b->seq[i]].n_tokens;

    /* gather the rows whose logits are wanted, then norm and project only those */
    int32_t n_out = 0;
    for (int32_t i = 0; i < b->n; i++) {
        bool want = b->logits ? b->logits[i] != 0 : i == b->n - 1;
        S->out_row[i] = want ? n_out : -1;
        if (want) {
            if (n_out != i)
                memcpy(S->x + (size_t)n_out * hp->n_embd, S->x + (size_t)i * hp->n_embd,
                       (size_t)hp->n_embd * sizeof(float));
            n_out++;
        }
    }
    S->n_rows = b->n;
    if (n_out == 0)
        return HEARTH_OK;
    rmsnorm(ctx, S->xb, S->x, ctx->model->output_norm, n_out);
    matmul(ctx, &ctx->model->output, S->xb, hp->n_embd, S->logits, hp->n_vocab, n_out, NULL);
    if (hp->logit_softcap > 0) {
        struct step c = {.ctx = ctx, .b = b, .n = n_out};
        run_by_token(ctx, softcap_rows, &c, n_out);
    }
    return HEARTH_OK;
}

/* ------------------------------------------------------------ prefix cache --- */

int32_t hearth_seq_reuse_prefix(struct hearth_context *ctx, int32_t seq, const hearth_token *tokens,
                                int32_t n)
{
    if (seq < 0 || seq >= ctx->kv.n_seq || ctx->kv.seqs[seq].n_tokens != 0)
        return 0;
    int32_t got = kv_reuse_prefix(&ctx->kv, seq, tokens, n);
    /* a recurrent model resumes only where a snapshot of its state matches the prefix */
    if (ctx->dn && got > 0) {
        got = state_resume(ctx, seq, got);
        kv_truncate(&ctx->kv, seq, got);
    }
    return got;
}

void hearth_seq_publish(struct hearth_context *ctx, int32_t seq, const hearth_token *tokens,
                        int32_t n)
{
    if (seq < 0 || seq >= ctx->kv.n_seq)
        return;
    kv_publish(&ctx->kv, seq, tokens, n);
    if (ctx->snap)
        snap_bind(ctx->snap, &ctx->kv, seq);
}

void hearth_kv_stats(const struct hearth_context *ctx, int32_t *used, int32_t *cached,
                     int32_t *total)
{
    if (cached)
        *cached = ctx->kv.n_cached;
    if (used)
        *used = ctx->kv.n_blocks - ctx->kv.n_free - ctx->kv.n_cached;
    if (total)
        *total = ctx->kv.n_blocks;
}
