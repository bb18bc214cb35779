/*
 * cpu_deltanet.c: the CPU backend's deltanet operation and its recurrent
 * state: Qwen3.5's hybrid layers (qwen35moe), computed as llama.cpp
 * computes them on the CPU. Every full_attention_interval-th layer is
 * attention whose q projection also yields a sigmoid output gate; the others
 * are Gated DeltaNet mixers:
 *
 *   qkv = W_qkv x, then a causal depthwise conv of conv_kernel taps (its last
 *   conv_kernel - 1 inputs kept per sequence) and SiLU; q, k L2-normalised
 *   per key head; z = W_gate x; beta = sigmoid(W_beta x);
 *   g = softplus(W_alpha x + dt_bias) * ssm_a (a log-decay, <= 0);
 *   per value head h (key head h % n_k_heads, as ggml broadcasts), with S its
 *   state_size x state_size matrix: S *= exp(g); S += k (beta (v - S^T k))^T;
 *   o = S^T q / sqrt(state_size); then RMSNorm(o) * SiLU(z) and W_out.
 *
 * The state is updated token by token in batch order (prefill included), as
 * ggml's fused gated_delta_net op does, so decode and prefill give the same
 * bits. State per sequence and DeltaNet layer: (conv_kernel - 1) x conv_dim
 * plus n_v_heads x state_size^2 floats (Qwen3.5-35B-A3B: about 2 MiB).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/cpu_memlaw.h"

struct dnet_cache {
    struct dnet_dims d;
    int32_t n_layer; /* DeltaNet layers of the stage */
    int32_t slot0;   /* the first one's dnet.slot: a layer's state is at slot - slot0 */
    int32_t n_seq;
    size_t conv_len; /* floats of one (layer, seq) conv window: (n_conv - 1) * conv_dim */
    size_t ssm_len;  /* floats of one (layer, seq) state: n_v * S * S */
    float *conv;     /* [n_layer][n_seq][conv_dim][n_conv - 1] */
    float *ssm;      /* [n_layer][n_seq][n_v][S (v index j)][S (k index i)]: row j is column j
                        of the state S[i][j], as ggml stores it */
    /* scratch, [n_batch] rows */
    float *qkv;     /* [n][conv_dim] projection, then conv + SiLU output in place */
    float *z;       /* [n][n_v * S] */
    float *beta;    /* [n][n_v] */
    float *g;       /* [n][n_v] */
    float *o;       /* [n][n_v * S] */
    float *ones;    /* [conv_dim] 1.0f: SiLU as silu_mul's kernel times one */
    float *qg;      /* [n][2 * n_head * head_dim] gated attention's q projection */
    float *gate;    /* [n][n_head * head_dim] its gates */
    int32_t n_gate; /* n_head * head_dim */
    float **snap;   /* [n] where to copy the state after row t (dnet_state_len floats), or NULL */
};

/* -------------------------------------------------------------------- state --- */

struct dnet_cache *dnet_cache_new(const struct hearth_model *m, int32_t l0, int32_t l1,
                                  int32_t n_seq, int32_t n_batch, struct mem_acct *a)
{
    struct dnet_cache *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    const struct hparams *hp = &m->hp;
    c->d                     = m->hp.dnet;
    c->slot0                 = -1;
    for (int32_t i = l0; i < l1; i++)
        if (m->layers[i].dnet) {
            if (c->slot0 < 0)
                c->slot0 = m->layers[i].dnet->slot;
            c->n_layer++;
        }
    struct memlaw_dnet z;
    memlaw_dnet(m, c->n_layer, n_seq, n_batch, &z);
    c->n_seq              = n_seq;
    c->conv_len           = z.conv_len;
    c->ssm_len            = z.ssm_len;
    c->n_gate             = hp->n_head * hp->head_dim;
    const enum mem_kind k = MEM_COMPUTE;
    c->conv               = acct_malloc(a, MEM_KV, z.conv);
    c->ssm                = acct_malloc(a, MEM_KV, z.ssm);
    c->qkv                = acct_malloc(a, k, z.qkv);
    c->z                  = acct_malloc(a, k, z.z);
    c->beta               = acct_malloc(a, k, z.beta);
    c->g                  = acct_malloc(a, k, z.g);
    c->o                  = acct_malloc(a, k, z.o);
    c->ones               = acct_malloc(a, k, z.ones);
    c->qg                 = acct_malloc(a, k, z.qg);
    c->gate               = acct_malloc(a, k, z.gate);
    c->snap               = acct_malloc(a, k, z.snap);
    if (!c->conv || !c->ssm || !c->qkv || !c->z || !c->beta || !c->g || !c->o || !c->ones ||
        !c->qg || !c->gate || !c->snap) {
        dnet_cache_free(c);
        return NULL;
    }
    for (int32_t i = 0; i < c->d.conv_dim; i++)
        c->ones[i] = 1.0f;
    return c;
}

void dnet_cache_free(struct dnet_cache *c)
{
    if (!c)
        return;
    free(c->conv);
    free(c->ssm);
    free(c->qkv);
    free(c->z);
    free(c->beta);
    free(c->g);
    free(c->o);
    free(c->ones);
    free(c->qg);
    free(c->gate);
    free(c->snap);
    free(c);
}

void dnet_cache_reset(struct dnet_cache *c, int32_t seq)
{
    if (!c || seq < 0 || seq >= c->n_seq)
        return;
    for (int32_t l = 0; l < c->n_layer; l++) {
        const size_t at = (size_t)l * c->n_seq + seq;
        memset(c->conv + at * c->conv_len, 0, c->conv_len * sizeof(float));
        memset(c->ssm + at * c->ssm_len, 0, c->ssm_len * sizeof(float));
    }
}

size_t dnet_state_len(const struct dnet_cache *c)
{
    return (size_t)c->n_layer * (c->conv_len + c->ssm_len);
}

void dnet_state_load(struct dnet_cache *c, int32_t seq, const float *src)
{
    for (int32_t l = 0; l < c->n_layer; l++) {
        const size_t at = (size_t)l * c->n_seq + seq;
        memcpy(c->conv + at * c->conv_len, src + l * c->conv_len, c->conv_len * sizeof(float));
        memcpy(c->ssm + at * c->ssm_len, src + c->n_layer * c->conv_len + l * c->ssm_len,
               c->ssm_len * sizeof(float));
    }
}

float **dnet_snap_rows(struct dnet_cache *c)
{
    return c->snap;
}

/* ---------------------------------------------------------------- the mixer --- */

struct job {
    struct hearth_context *ctx;
    const struct hearth_batch *b;
    const struct dnet *dn;
    struct dnet_cache *c;
    int32_t n;
};

static float *conv_state(struct dnet_cache *c, const struct dnet *dn, int32_t seq)
{
    return c->conv + ((size_t)(dn->slot - c->slot0) * c->n_seq + seq) * c->conv_len;
}

static float *ssm_state(struct dnet_cache *c, const struct dnet *dn, int32_t seq)
{
    return c->ssm + ((size_t)(dn->slot - c->slot0) * c->n_seq + seq) * c->ssm_len;
}

/*
 * The causal conv, split by channel: each channel's window slides over its
 * sequence's tokens in batch order (ggml_ssm_conv's fused multiply-adds,
 * oldest tap first), then SiLU per token row.
 */
static void conv_channels(void *arg, int ith, int nth)
{
    struct job *j        = arg;
    struct dnet_cache *c = j->c;
    const int32_t K = c->d.n_conv, C = c->d.conv_dim;
    long c0, c1;
    threadpool_split(C, ith, nth, &c0, &c1);
    for (int32_t t = 0; t < j->n; t++) {
        float *st = conv_state(c, j->dn, j->b->seq[t]);
        float *x  = c->qkv + (size_t)t * C;
        for (long ch = c0; ch < c1; ch++) {
            float *win     = st + ch * (K - 1);
            const float *w = j->dn->conv + ch * K;
            float sum      = 0.0f;
            for (int32_t i = 0; i < K - 1; i++)
                sum = fmaf(win[i], w[i], sum);
            sum = fmaf(x[ch], w[K - 1], sum);
            for (int32_t i = 0; i + 1 < K - 1; i++)
                win[i] = win[i + 1];
            win[K - 2] = x[ch];
            x[ch]      = sum;
        }
        if (c->snap[t]) {
            float *to = c->snap[t] + (size_t)(j->dn->slot - c->slot0) * c->conv_len;
            memcpy(to + c0 * (K - 1), st + c0 * (K - 1),
                   (size_t)(c1 - c0) * (K - 1) * sizeof(float));
        }
    }
}

/* SiLU of the conv output, L2 norms of q and k, the decay and the write strength, per token. */
static void token_prep(void *arg, int ith, int nth)
{
    struct job *j           = arg;
    struct dnet_cache *c    = j->c;
    const struct kernels *k = cpu_of(j->ctx)->k;
    const struct dnet *dn   = j->dn;
    const float eps         = j->ctx->model->hp.norm_eps;
    const int32_t S = c->d.S, C = c->d.conv_dim, nv = c->d.n_v;
    long t0, t1;
    threadpool_split(j->n, ith, nth, &t0, &t1);
    for (long t = t0; t < t1; t++) {
        float *x = c->qkv + t * C;
        k->silu_mul(x, x, c->ones, C);
        for (int32_t h = 0; h < 2 * c->d.n_k; h++) {
            float *v   = x + (size_t)h * S;
            double sum = 0.0;
            for (int32_t i = 0; i < S; i++)
                sum += (double)(v[i] * v[i]);
            const float scale = 1.0f / fmaxf(sqrtf((float)sum), eps);
            for (int32_t i = 0; i < S; i++)
                v[i] *= scale;
        }
        float *beta = c->beta + t * nv, *g = c->g + t * nv;
        for (int32_t h = 0; h < nv; h++) {
            beta[h]        = 1.0f / (1.0f + expf(-beta[h]));
            const float a  = g[h] + dn->dt_bias[h];
            const float sp = a > 20.0f ? a : logf(1.0f + expf(a));
            g[h]           = sp * dn->a[h];
        }
    }
}

/* The delta rule, split by value head: each head's state walks the batch's tokens in order. */
static void delta_heads(void *arg, int ith, int nth)
{
    struct job *j           = arg;
    struct dnet_cache *c    = j->c;
    const struct kernels *k = cpu_of(j->ctx)->k;
    const int32_t S = c->d.S, C = c->d.conv_dim, nv = c->d.n_v, nk = c->d.n_k;
    const float scale = 1.0f / sqrtf((float)S);
    float delta[1024];
    long h0, h1;
    threadpool_split(nv, ith, nth, &h0, &h1);
    for (long h = h0; h < h1; h++) {
        const int32_t kh = (int32_t)(h % nk);
        for (int32_t t = 0; t < j->n; t++) {
            float *M       = ssm_state(c, j->dn, j->b->seq[t]) + (size_t)h * S * S;
            const float *x = c->qkv + (size_t)t * C;
            const float *q = x + (size_t)kh * S, *kv = x + (size_t)(nk + kh) * S,
                        *v   = x + (size_t)2 * nk * S + (size_t)h * S;
            const float beta = c->beta[(size_t)t * nv + h], eg = expf(c->g[(size_t)t * nv + h]);
            k->scale_f32(M, eg, (int64_t)S * S);
            for (int32_t r = 0; r < S; r++)
                delta[r] = (v[r] - k->dot_f32_ggml(M + (size_t)r * S, kv, S)) * beta;
            for (int32_t r = 0; r < S; r++)
                k->mad_f32(M + (size_t)r * S, kv, delta[r], S);
            float *o = c->o + ((size_t)t * nv + h) * S;
            for (int32_t r = 0; r < S; r++)
                o[r] = k->dot_f32_ggml(M + (size_t)r * S, q, S) * scale;
            if (c->snap[t])
                memcpy(c->snap[t] + (size_t)c->n_layer * c->conv_len +
                           (size_t)(j->dn->slot - c->slot0) * c->ssm_len + (size_t)h * S * S,
                       M, (size_t)S * S * sizeof(float));
        }
    }
}

/* RMSNorm of each head's output times SiLU of its gate z. */
static void gated_norm(void *arg, int ith, int nth)
{
    struct job *j           = arg;
    struct dnet_cache *c    = j->c;
    const struct kernels *k = cpu_of(j->ctx)->k;
    const int32_t S = c->d.S, nv = c->d.n_v;
    long t0, t1;
    threadpool_split(j->n, ith, nth, &t0, &t1);
    for (long t = t0; t < t1; t++)
        for (int32_t h = 0; h < nv; h++) {
            float *o       = c->o + ((size_t)t * nv + h) * S;
            const float *z = c->z + ((size_t)t * nv + h) * S;
            k->rmsnorm(o, o, j->dn->norm, S, j->ctx->model->hp.norm_eps);
            k->silu_mul(o, z, o, S);
        }
}

static void run_small(struct hearth_context *ctx, threadpool_fn fn, void *arg, int32_t n)
{
    if (n == 1)
        fn(arg, 0, 1);
    else
        threadpool_run(cpu_of(ctx)->tp, fn, arg);
}

void dnet_forward(struct hearth_context *ctx, const struct hearth_batch *b, int32_t l,
                  const float *in, float *out)
{
    const struct dnet *dn = ctx->model->layers[l].dnet;
    struct dnet_cache *c  = cpu_of(ctx)->dn;
    const int64_t d = ctx->model->hp.n_embd, vd = (int64_t)c->d.n_v * c->d.S;
    struct job j = {ctx, b, dn, c, b->n};
    cpu_matmul(ctx, &dn->wqkv, in, d, c->qkv, c->d.conv_dim, b->n, NULL);
    cpu_matmul(ctx, &dn->wgate, in, d, c->z, vd, b->n, &dn->wqkv);
    cpu_matmul(ctx, &dn->wbeta, in, d, c->beta, c->d.n_v, b->n, &dn->wgate);
    cpu_matmul(ctx, &dn->walpha, in, d, c->g, c->d.n_v, b->n, &dn->wbeta);
    threadpool_run(cpu_of(ctx)->tp, conv_channels, &j);
    run_small(ctx, token_prep, &j, b->n);
    threadpool_run(cpu_of(ctx)->tp, delta_heads, &j);
    run_small(ctx, gated_norm, &j, b->n);
    cpu_matmul(ctx, &dn->wout, c->o, vd, out, d, b->n, NULL);
}

/* ------------------------------------------------------------ gated attention --- */

float *dnet_gate_rows(struct hearth_context *ctx)
{
    return cpu_of(ctx)->dn->qg;
}

void dnet_gate_split(struct hearth_context *ctx, float *q, int32_t n)
{
    struct dnet_cache *c = cpu_of(ctx)->dn;
    const int32_t hd = ctx->model->hp.head_dim, nh = ctx->model->hp.n_head;
    for (int32_t t = 0; t < n; t++)
        for (int32_t h = 0; h < nh; h++) {
            const float *src = c->qg + ((size_t)t * nh + h) * 2 * hd;
            memcpy(q + ((size_t)t * nh + h) * hd, src, (size_t)hd * sizeof(float));
            memcpy(c->gate + ((size_t)t * nh + h) * hd, src + hd, (size_t)hd * sizeof(float));
        }
}

void dnet_gate_apply(struct hearth_context *ctx, float *att, int32_t n)
{
    const struct dnet_cache *c = cpu_of(ctx)->dn;
    const size_t len           = (size_t)n * c->n_gate;
    for (size_t i = 0; i < len; i++)
        att[i] *= 1.0f / (1.0f + expf(-c->gate[i]));
}
