/*
 * cpu_gemma4.c: the CPU backend's steps of Gemma 4 that no other family
 * has: the per-layer inputs built beside the embedding, and the end of each
 * layer (the per-layer embedding block and the output scale). Each is
 * llama.cpp's chain of ggml operations, in its order, so the rounding is
 * the same. Split by token.
 */
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu.h"

struct job {
    struct hearth_context *ctx;
    const struct hearth_batch *b;
    int32_t l; /* layer */
    int32_t n; /* rows */
};

/*
 * ple[t] = (RMSNorm(ple[t] / sqrt(n_embd)) * proj_norm + the token's rows *
 * sqrt(n_embd_pl)) / sqrt(2), ple[t] holding the projection of its
 * embedding; the token's rows are dequantized into ple_h[t] first.
 */
static void ple_rows(void *arg, int ith, int nth)
{
    struct job *s                = arg;
    const struct hearth_model *m = s->ctx->model;
    const struct hparams *hp     = &m->hp;
    const struct cpu_ctx *c      = cpu_of(s->ctx);
    const struct kernels *k      = c->k;
    const struct weight *e       = &m->ple_tok_embd;
    const int64_t np = hp->n_embd_pl, w = (int64_t)hp->n_layer * np;
    const float in_scale = 1.0f / sqrtf(2.0f);
    long t0, t1;
    threadpool_split(s->n, ith, nth, &t0, &t1);
    for (long t = t0; t < t1; t++) {
        float *p = c->s.ple + t * w, *tok = c->s.ple_h + t * w;
        k->type[e->type].to_float((const uint8_t *)e->data + (size_t)s->b->token[t] * e->row_len,
                                  tok, w);
        k->scale_f32(tok, sqrtf((float)np), w);
        k->scale_f32(p, 1.0f / sqrtf((float)hp->n_embd), w);
        for (int32_t l = 0; l < hp->n_layer; l++)
            k->rmsnorm(p + l * np, p + l * np, m->ple_proj_norm, np, hp->norm_eps);
        for (int64_t i = 0; i < w; i++)
            p[i] = (p[i] + tok[i]) * in_scale;
    }
}

void cpu_op_ple_input(struct hearth_context *ctx, const struct hearth_batch *b)
{
    struct cpu_ctx *c            = cpu_of(ctx);
    const struct hearth_model *m = ctx->model;
    const int64_t w              = (int64_t)m->hp.n_layer * m->hp.n_embd_pl;
    cpu_matmul(ctx, &m->ple_model_proj, c->s.x, m->hp.n_embd, c->s.ple, w, b->n, NULL);
    struct job s = {.ctx = ctx, .b = b, .n = b->n};
    cpu_run_rows(ctx, ple_rows, &s, b->n);
}

/* ple_h[t] = GELU(ple_h[t]) * the row's per-layer input of layer l */
static void gate_rows(void *arg, int ith, int nth)
{
    struct job *s            = arg;
    const struct hparams *hp = &s->ctx->model->hp;
    const struct cpu_ctx *c  = cpu_of(s->ctx);
    const int64_t np = hp->n_embd_pl, w = (int64_t)hp->n_layer * np;
    long t0, t1;
    threadpool_split(s->n, ith, nth, &t0, &t1);
    for (long t = t0; t < t1; t++) {
        float *g = c->s.ple_h + t * np;
        /* ggml's GELU then multiply is its gated GELU's arithmetic, value for value */
        c->k->gelu_mul(g, g, c->s.ple + t * w + s->l * np, np);
    }
}

static void scale_rows(void *arg, int ith, int nth)
{
    struct job *s           = arg;
    const struct cpu_ctx *c = cpu_of(s->ctx);
    const int64_t d         = s->ctx->model->hp.n_embd;
    const float scale       = s->ctx->model->layers[s->l].out_scale;
    long t0, t1;
    threadpool_split(s->n, ith, nth, &t0, &t1);
    for (long t = t0; t < t1; t++)
        c->k->scale_f32(c->s.x + t * d, scale, d);
}

void cpu_op_layer_tail(struct hearth_context *ctx, int32_t l, int32_t n)
{
    struct cpu_ctx *c     = cpu_of(ctx);
    const struct layer *L = &ctx->model->layers[l];
    const int64_t d = ctx->model->hp.n_embd, np = ctx->model->hp.n_embd_pl;
    struct job s = {.ctx = ctx, .l = l, .n = n};
    if (L->ple_norm) {
        cpu_matmul(ctx, &L->ple_gate, c->s.x, d, c->s.ple_h, np, n, NULL);
        cpu_run_rows(ctx, gate_rows, &s, n);
        cpu_matmul(ctx, &L->ple_proj, c->s.ple_h, np, c->s.xb, d, n, NULL);
        cpu_rmsnorm_with(ctx, ACT_XB, ACT_XB, L->ple_norm, n);
        cpu_op_add(ctx, ACT_X, ACT_XB, n);
    }
    if (L->out_scale != 0.0f)
        cpu_run_rows(ctx, scale_rows, &s, n);
}
