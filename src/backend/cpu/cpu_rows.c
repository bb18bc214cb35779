/*
 * cpu_rows.c: the CPU backend's row-by-row steps: embedding lookup, the
 * FFN's gated activation, residual adds, packing output rows, logit
 * soft-capping. Split by token.
 */
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu.h"

struct job {
    struct hearth_context *ctx;
    const struct hearth_batch *b;
    float *dst;
    const float *src;
    int32_t n;     /* rows */
    int64_t width; /* floats per row */
};

static void embed_rows(void *arg, int ith, int nth)
{
    struct job *s                 = arg;
    const struct hearth_model *m  = s->ctx->model;
    const struct kernels *k       = cpu_of(s->ctx)->k;
    const struct weight *e        = &m->tok_embd;
    const struct type_kernels *tk = &k->type[e->type];
    long t0, t1;
    threadpool_split(s->n, ith, nth, &t0, &t1);
    for (long t = t0; t < t1; t++) {
        float *x = s->dst + t * e->n_in;
        tk->to_float((const uint8_t *)e->data + (size_t)s->b->token[t] * e->row_len, x, e->n_in);
        if (m->hp.embd_scale != 1.0f)
            k->scale_f32(x, m->hp.embd_scale, e->n_in);
    }
}

void cpu_op_embed(struct hearth_context *ctx, const struct hearth_batch *b)
{
    struct job s = {.ctx = ctx, .b = b, .dst = cpu_act(ctx, ACT_X), .n = b->n};
    cpu_run_rows(ctx, embed_rows, &s, b->n);
}

/* hb = act(hb) * hb2: SiLU, or GELU for gemma3. */
static void gated_rows(void *arg, int ith, int nth)
{
    struct job *s           = arg;
    const struct kernels *k = cpu_of(s->ctx)->k;
    void (*act)(float *, const float *, const float *, int64_t) =
        s->ctx->model->hp.ffn_gelu ? k->gelu_mul : k->silu_mul;
    long t0, t1;
    threadpool_split(s->n, ith, nth, &t0, &t1);
    for (long t = t0; t < t1; t++)
        act(s->dst + t * s->width, s->dst + t * s->width, s->src + t * s->width, s->width);
}

void cpu_op_gated_act(struct hearth_context *ctx, int32_t l, int32_t n)
{
    struct job s = {.ctx   = ctx,
                    .dst   = cpu_act(ctx, ACT_HB),
                    .src   = cpu_act(ctx, ACT_HB2),
                    .n     = n,
                    .width = ctx->model->layers[l].w_gate.n_out};
    cpu_run_rows(ctx, gated_rows, &s, n);
}

static void add_rows(void *arg, int ith, int nth)
{
    struct job *s           = arg;
    const struct kernels *k = cpu_of(s->ctx)->k;
    long t0, t1;
    threadpool_split(s->n, ith, nth, &t0, &t1);
    for (long t = t0; t < t1; t++)
        k->axpy_f32(s->dst + t * s->width, 1.0f, s->src + t * s->width, s->width);
}

void cpu_op_add(struct hearth_context *ctx, enum act dst, enum act src, int32_t n)
{
    struct job s = {.ctx   = ctx,
                    .dst   = cpu_act(ctx, dst),
                    .src   = cpu_act(ctx, src),
                    .n     = n,
                    .width = ctx->model->hp.n_embd};
    cpu_run_rows(ctx, add_rows, &s, n);
}

void cpu_op_gather(struct hearth_context *ctx, enum act buf, const int32_t *rows, int32_t n_out)
{
    /* the contract's buffers are n_embd wide */
    float *x       = cpu_act(ctx, buf);
    const size_t d = (size_t)ctx->model->hp.n_embd;
    for (int32_t i = 0; i < n_out; i++)
        if (rows[i] != i)
            memcpy(x + i * d, x + (size_t)rows[i] * d, d * sizeof(float));
}

/* Logits to cap * tanh(logit / cap), as ggml's scale, tanh, scale. */
static void softcap_rows(void *arg, int ith, int nth)
{
    struct job *s   = arg;
    const float cap = s->ctx->model->hp.logit_softcap;
    long t0, t1;
    threadpool_split(s->n, ith, nth, &t0, &t1);
    for (long t = t0; t < t1; t++) {
        float *y = s->dst + t * s->width;
        for (int64_t i = 0; i < s->width; i++)
            y[i] = tanhf(y[i] * (1.0f / cap)) * cap;
    }
}

void cpu_op_softcap(struct hearth_context *ctx, int32_t n)
{
    struct job s = {
        .ctx = ctx, .dst = cpu_act(ctx, ACT_LOGITS), .n = n, .width = ctx->model->hp.n_vocab};
    cpu_run_rows(ctx, softcap_rows, &s, n);
}
