/*
 * cpu_norm_rope.c: the CPU backend's RMSNorm over rows and the step between
 * the q/k/v projections and attention: biases, per-head norms, rope in its
 * three layouts, the q scale and the store of K/V rows into the paged
 * cache. Split by token.
 */
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu.h"

struct job {
    struct hearth_context *ctx;
    const struct hearth_batch *b;
    int32_t l;        /* layer */
    const float *w;   /* rmsnorm weights */
    const float *src; /* [n][n_embd] rmsnorm input rows */
    float *dst;       /* [n][n_embd] rmsnorm output rows */
    int32_t n;        /* rows */
};

static const float *norm_of(const struct hearth_model *m, int32_t l, enum norm which)
{
    switch (which) {
    case NORM_ATTN:
        return m->layers[l].attn_norm;
    case NORM_POST_ATTN:
        return m->layers[l].post_attn_norm;
    case NORM_FFN:
        return m->layers[l].ffn_norm;
    case NORM_POST_FFN:
        return m->layers[l].post_ffn_norm;
    case NORM_NEXTN_HEAD:
        if (m->layers[l].nextn->head_norm)
            return m->layers[l].nextn->head_norm;
        break;
    case NORM_OUTPUT:
        break;
    }
    return m->output_norm;
}

static void rmsnorm_rows(void *arg, int ith, int nth)
{
    struct job *s           = arg;
    const struct kernels *k = cpu_of(s->ctx)->k;
    const int64_t width     = s->ctx->model->hp.n_embd;
    long t0, t1;
    threadpool_split(s->n, ith, nth, &t0, &t1);
    for (long t = t0; t < t1; t++)
        k->rmsnorm(s->dst + t * width, s->src + t * width, s->w, width, s->ctx->model->hp.norm_eps);
}

void cpu_rmsnorm_with(struct hearth_context *ctx, enum act dst, enum act src, const float *w,
                      int32_t n)
{
    struct job s = {.ctx = ctx, .w = w, .src = cpu_act(ctx, src), .dst = cpu_act(ctx, dst), .n = n};
    cpu_run_rows(ctx, rmsnorm_rows, &s, n);
}

void cpu_op_rmsnorm(struct hearth_context *ctx, enum act dst, enum act src, int32_t l,
                    enum norm which, int32_t n)
{
    cpu_rmsnorm_with(ctx, dst, src, norm_of(ctx->model, l, which), n);
}

void cpu_op_nextn_input(struct hearth_context *ctx, int32_t l, const float *h, int32_t n)
{
    const struct nextn *x   = ctx->model->layers[l].nextn;
    const struct kernels *k = cpu_of(ctx)->k;
    const int64_t d         = ctx->model->hp.n_embd;
    const float eps         = ctx->model->hp.norm_eps;
    float *eh = cpu_of(ctx)->s.eh, *xs = cpu_act(ctx, ACT_X);
    for (int32_t t = 0; t < n; t++) {
        k->rmsnorm(eh + t * 2 * d, xs + t * d, x->enorm, d, eps);
        k->rmsnorm(eh + t * 2 * d + d, h + t * d, x->hnorm, d, eps);
    }
    cpu_matmul(ctx, &x->eh_proj, eh, 2 * d, xs, d, n, NULL);
}

/*
 * Rotates the first rope_dim dims of each head by pos * base^(-2i/rope_dim):
 * adjacent pairs (x[2i], x[2i+1]) for llama, halves (x[i], x[i + rope_dim/2])
 * for NEOX-style models. The angle advances by repeated multiplication, as
 * ggml computes it, so rounding matches; freqs (gemma4's rope_freqs, or
 * NULL) divide each pair's angle, as ggml's freq_factors.
 */
static void rope(float *x, int32_t n_heads, int32_t head_dim, int32_t rope_dim, float base,
                 bool neox, int32_t pos, const int32_t *sections, const float *freqs)
{
    /* IMRoPE (sections): pairs cycle through time, height and width, all at pos for text;
     * pairs past those sections take the fourth position, 0 for text, so stay as they are */
    int32_t n_sect = 0;
    if (sections)
        n_sect = sections[0] + sections[1] + sections[2] + sections[3];
    const float theta_scale = powf(base, -2.0f / (float)rope_dim);
    const int32_t half      = rope_dim / 2;
    for (int32_t h = 0; h < n_heads; h++) {
        float *v    = x + (size_t)h * head_dim;
        float theta = (float)pos;
        for (int32_t i = 0; i < half; i++) {
            bool still = false;
            if (n_sect) {
                const int32_t sec = i % n_sect, m3 = sec % 3;
                still = !(sec < 3 * sections[m3]);
            }
            const float th = freqs ? theta / freqs[i] : theta;
            const float c = still ? 1.0f : cosf(th), s = still ? 0.0f : sinf(th);
            const int32_t a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
            const float x0 = v[a], x1 = v[b];
            /* the fused forms llama.cpp's compiled rope produces, to the last bit */
            v[a] = fmaf(x0, c, -(x1 * s));
            v[b] = fmaf(x0, s, x1 * c);
            theta *= theta_scale;
        }
    }
}

/* A K or V row into the cache as its type: ggml's f32 to f16 or its quantizer, as ggml_cpy. */
static void kv_store(const struct kernels *k, enum hearth_kv_type t, const float *x, void *dst,
                     int64_t n)
{
    if (t == HEARTH_KV_F32)
        memcpy(dst, x, (size_t)n * sizeof(float));
    else if (t == HEARTH_KV_F16)
        k->f32_to_f16(x, dst, n);
    else
        k->type[kv_dtype(t)].from_float(x, dst, n);
}

/* Adds biases, applies rope and stores this batch's K/V rows into the cache. */
static void qkv_rows(void *arg, int ith, int nth)
{
    struct job *s              = arg;
    struct hearth_context *ctx = s->ctx;
    struct cpu_ctx *c          = cpu_of(ctx);
    const struct hparams *hp   = &ctx->model->hp;
    const struct layer *L      = &ctx->model->layers[s->l];
    const struct kernels *k    = c->k;
    const int32_t hd = layer_head_dim(hp, L), n_kv = layer_n_head_kv(hp, L),
                  rd = layer_rope_dim(hp, L);
    const int64_t qd = (int64_t)hp->n_head * hd, kvd = (int64_t)n_kv * hd;
    const int32_t *sect =
        hp->rope_sections[0] + hp->rope_sections[1] + hp->rope_sections[2] + hp->rope_sections[3]
            ? hp->rope_sections
            : NULL;
    long t0, t1;
    threadpool_split(s->n, ith, nth, &t0, &t1);
    for (long t = t0; t < t1; t++) {
        float *q = c->s.q + t * qd, *kx = c->s.kx + t * kvd, *vx = c->s.vx + t * kvd;
        const int32_t pos = s->b->pos[t], seq = s->b->seq[t];
        if (L->bq)
            k->axpy_f32(q, 1.0f, L->bq, qd);
        if (L->q_norm)
            for (int32_t h = 0; h < hp->n_head; h++)
                k->rmsnorm(q + h * hd, q + h * hd, L->q_norm, hd, hp->norm_eps);
        rope(q, hp->n_head, hd, rd, L->rope_base, hp->rope_neox, pos, sect, L->rope_freqs);
        if (hp->q_scale > 0)
            k->scale_f32(q, hp->q_scale, qd);
        if (L->kv_reuse)
            continue;    /* its K/V are an earlier layer's, already stored */
        if (!L->wv.data) /* gemma4's full layers: V is K as projected */
            memcpy(vx, kx, (size_t)kvd * sizeof *vx);
        if (L->bk)
            k->axpy_f32(kx, 1.0f, L->bk, kvd);
        if (L->bv)
            k->axpy_f32(vx, 1.0f, L->bv, kvd);
        if (L->k_norm)
            for (int32_t h = 0; h < n_kv; h++)
                k->rmsnorm(kx + h * hd, kx + h * hd, L->k_norm, hd, hp->norm_eps);
        if (L->v_norm)
            for (int32_t h = 0; h < n_kv; h++)
                k->rmsnorm(vx + h * hd, vx + h * hd, L->v_norm, hd, hp->norm_eps);
        rope(kx, n_kv, hd, rd, L->rope_base, hp->rope_neox, pos, sect, L->rope_freqs);
        void *kdst = kv_row(&ctx->kv, s->l, 0, seq, pos),
             *vdst = kv_row(&ctx->kv, s->l, 1, seq, pos);
        kv_store(k, ctx->kv.type[0], kx, kdst, kvd);
        kv_store(k, ctx->kv.type[1], vx, vdst, kvd);
    }
}

void cpu_op_qkv_store(struct hearth_context *ctx, const struct hearth_batch *b, int32_t l)
{
    struct job s = {.ctx = ctx, .b = b, .l = l, .n = b->n};
    if (ctx->model->layers[l].attn_gated)
        dnet_gate_split(ctx, cpu_of(ctx)->s.q, b->n);
    cpu_run_rows(ctx, qkv_rows, &s, b->n);
}
