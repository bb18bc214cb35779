/*
 * deltanet.c: Qwen3.5's hybrid layers (qwen35moe), computed as llama.cpp
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ggml_dot.h"
#include "model/model.h"
#include "util/errfmt.h"

struct dnet {
    struct weight wqkv;  /* (n_embd -> conv_dim) q, k, v before the conv */
    struct weight wgate; /* (n_embd -> value_dim) z, the output gate */
    struct weight wbeta; /* (n_embd -> n_v_heads) write strength before sigmoid */
    struct weight walpha;/* (n_embd -> n_v_heads) decay input */
    struct weight wout;  /* (value_dim -> n_embd) */
    float *conv;         /* [conv_dim][n_conv] conv taps, oldest input first */
    float *dt_bias;      /* [n_v_heads] */
    float *a;            /* [n_v_heads] ssm_a = -exp(A_log) */
    float *norm;         /* [state_size] the gated RMSNorm's weight */
    int32_t slot;        /* index among the model's DeltaNet layers (state layout) */
};

/* Shapes shared by every DeltaNet layer of a model. */
struct dnet_dims {
    int32_t n_conv;  /* conv taps (ssm.conv_kernel), 2..16 */
    int32_t S;       /* state_size: width of every key and value head */
    int32_t n_k;     /* key heads (ssm.group_count) */
    int32_t n_v;     /* value heads (ssm.time_step_rank), a multiple of n_k */
    int32_t conv_dim;/* 2 n_k S + n_v S */
};

struct dnet_cache {
    struct dnet_dims d;
    int32_t n_layer;  /* DeltaNet layers */
    int32_t n_seq;
    size_t conv_len;  /* floats of one (layer, seq) conv window: (n_conv - 1) * conv_dim */
    size_t ssm_len;   /* floats of one (layer, seq) state: n_v * S * S */
    float *conv;      /* [n_layer][n_seq][conv_dim][n_conv - 1] */
    float *ssm;       /* [n_layer][n_seq][n_v][S (v index j)][S (k index i)]: row j is column j
                         of the state S[i][j], as ggml stores it */
    /* scratch, [n_batch] rows */
    float *qkv;       /* [n][conv_dim] projection, then conv + SiLU output in place */
    float *z;         /* [n][n_v * S] */
    float *beta;      /* [n][n_v] */
    float *g;         /* [n][n_v] */
    float *o;         /* [n][n_v * S] */
    float *ones;      /* [conv_dim] 1.0f: SiLU as silu_mul's kernel times one */
    float *qg;        /* [n][2 * n_head * head_dim] gated attention's q projection */
    float *gate;      /* [n][n_head * head_dim] its gates */
    int32_t n_gate;   /* n_head * head_dim */
    float **snap;     /* [n] where to copy the state after row t (dnet_state_len floats), or NULL */
};

static struct dnet_dims dims_of(const struct hearth_model *m);

/* ------------------------------------------------------------------ loading --- */

static bool arch_u32(const struct hearth_model *m, const char *key, uint32_t *out)
{
    char full[128];
    snprintf(full, sizeof full, "%s.%s", m->arch, key);
    return gguf_get_u32(m->gguf, full, out);
}

/* Filled by dnet_hparams; the model struct holds only what forward.c reads. */
static enum hearth_status read_dims(const struct hearth_model *m, struct dnet_dims *d, char *err,
                                    size_t err_len)
{
    uint32_t conv, S, nk, nv, inner;
    if (!arch_u32(m, "ssm.conv_kernel", &conv) || !arch_u32(m, "ssm.state_size", &S) ||
        !arch_u32(m, "ssm.group_count", &nk) || !arch_u32(m, "ssm.time_step_rank", &nv) ||
        !arch_u32(m, "ssm.inner_size", &inner))
        return fail(HEARTH_EFORMAT, err, err_len,
                    "model: %s needs ssm.conv_kernel, state_size, group_count, time_step_rank "
                    "and inner_size", m->arch);
    if (conv < 2 || conv > 16 || S < 1 || S > 1024 || nk < 1 || nv < 1 || nv > 1024 || nv % nk ||
        inner != nv * S)
        return fail(HEARTH_EFORMAT, err, err_len,
                    "model: DeltaNet shape conv %u, state %u, %u key heads, %u value heads, inner "
                    "%u does not fit (value heads a multiple of key heads, inner = heads x state)",
                    conv, S, nk, nv, inner);
    *d = (struct dnet_dims){(int32_t)conv, (int32_t)S, (int32_t)nk, (int32_t)nv,
                            (int32_t)(2 * nk * S + nv * S)};
    return HEARTH_OK;
}

static struct dnet_dims dims_of(const struct hearth_model *m)
{
    struct dnet_dims d = {0};
    char err[8];
    read_dims(m, &d, err, sizeof err);
    return d;
}

enum hearth_status dnet_hparams(struct hearth_model *m, char *err, size_t err_len)
{
    struct hparams *hp = &m->hp;
    struct dnet_dims d;
    enum hearth_status st = read_dims(m, &d, err, err_len);
    if (st)
        return st;
    uint32_t every = 4, nextn = 0, shexp = 0;
    arch_u32(m, "full_attention_interval", &every);
    arch_u32(m, "nextn_predict_layers", &nextn);
    if (every < 1 || nextn >= (uint32_t)hp->n_layer)
        return fail(HEARTH_EFORMAT, err, err_len,
                    "model: full_attention_interval %u or nextn_predict_layers %u is out of range",
                    every, nextn);
    if (nextn > 0) {
        fprintf(stderr, "hearth: %s: ignoring %u multi-token-prediction layer%s (not used yet)\n",
                m->arch, nextn, nextn == 1 ? "" : "s");
        hp->n_layer -= (int32_t)nextn;
    }
    if (hp->n_expert == 0)
        return fail(HEARTH_EFORMAT, err, err_len, "model: %s.expert_count is missing", m->arch);
    if (arch_u32(m, "expert_shared_feed_forward_length", &shexp) && shexp &&
        shexp != (uint32_t)hp->n_ff_exp)
        return fail(HEARTH_EUNSUPPORTED, err, err_len,
                    "model: a shared expert of width %u beside experts of width %d is not "
                    "supported yet (hearth needs them equal)", shexp, hp->n_ff_exp);
    hp->n_ff_shexp = hp->n_ff_exp;
    char key[128];
    snprintf(key, sizeof key, "%s.rope.dimension_sections", m->arch);
    const int64_t k = gguf_find_key(m->gguf, key);
    enum gguf_vtype et;
    uint64_t ne;
    const void *raw = NULL;
    if (k >= 0 && gguf_kv_arr(m->gguf, k, &et, &ne) && ne == 4 &&
        (et == GGUF_I32 || et == GGUF_U32))
        raw = gguf_arr_data(m->gguf, k);
    int32_t sum = 0;
    for (int i = 0; raw && i < 4; i++) {
        memcpy(&hp->rope_sections[i], (const uint8_t *)raw + 4 * i, 4);
        if (hp->rope_sections[i] < 0 || hp->rope_sections[i] > hp->head_dim)
            raw = NULL;
        else
            sum += hp->rope_sections[i];
    }
    if (!raw || sum == 0)
        return fail(HEARTH_EFORMAT, err, err_len,
                    "model: %s must be 4 non-negative integers, not all 0 (IMRoPE sections)",
                    key);
    hp->n_in_extra          = d.n_v * d.S;
    hp->recurrent           = true;
    hp->last_layer_all_rows = true;
    for (int32_t i = 0; i < hp->n_layer; i++)
        m->layers[i].attn_gated = (uint32_t)(i + 1) % every == 0;
    return HEARTH_OK;
}

enum hearth_status dnet_load_layer(struct hearth_model *m, int32_t il, struct layer *L, char *err,
                                   size_t err_len)
{
    const struct hparams *hp = &m->hp;
    const int64_t d = hp->n_embd, qd = (int64_t)hp->n_head * hp->head_dim,
                  kvd = (int64_t)hp->n_head_kv * hp->head_dim;
    char n[12][64];
    static const char *const parts[] = {
        "attn_norm.weight", "post_attention_norm.weight", "attn_q.weight", "attn_k.weight",
        "attn_v.weight", "attn_output.weight", "attn_q_norm.weight", "attn_k_norm.weight",
        "attn_qkv.weight", "attn_gate.weight", "ssm_beta.weight", "ssm_alpha.weight"};
    for (int j = 0; j < 12; j++)
        snprintf(n[j], sizeof n[j], "blk.%d.%s", il, parts[j]);
    enum hearth_status st;
    /* the norm after attention is the FFN's input norm; the residual skips it */
    if ((st = model_get_vector(m, n[0], d, false, &L->attn_norm, err, err_len)) ||
        (st = model_get_vector(m, n[1], d, false, &L->ffn_norm, err, err_len)) ||
        (st = moe_load(m, il, &L->moe, err, err_len)))
        return st;
    if (L->attn_gated)
        return (st = model_get_weight(m, n[2], d, 2 * qd, false, &L->wq, err, err_len)) ||
                       (st = model_get_weight(m, n[3], d, kvd, false, &L->wk, err, err_len)) ||
                       (st = model_get_weight(m, n[4], d, kvd, false, &L->wv, err, err_len)) ||
                       (st = model_get_weight(m, n[5], qd, d, false, &L->wo, err, err_len)) ||
                       (st = model_get_vector(m, n[6], hp->head_dim, false, &L->q_norm, err,
                                              err_len)) ||
                       (st = model_get_vector(m, n[7], hp->head_dim, false, &L->k_norm, err,
                                              err_len))
                   ? st
                   : HEARTH_OK;
    const struct dnet_dims dd = dims_of(m);
    const int64_t vd = (int64_t)dd.n_v * dd.S;
    struct dnet *dn = calloc(1, sizeof *dn);
    if (!dn)
        return fail(HEARTH_ENOMEM, err, err_len, "model: out of memory");
    L->dnet = dn;
    for (int32_t i = 0; i < il; i++)
        dn->slot += m->layers[i].dnet != NULL;
    char cv[64], dt[64], a[64], nm[64], out[64];
    snprintf(cv, sizeof cv, "blk.%d.ssm_conv1d.weight", il);
    snprintf(dt, sizeof dt, "blk.%d.ssm_dt.bias", il);
    snprintf(a, sizeof a, "blk.%d.ssm_a", il);
    snprintf(nm, sizeof nm, "blk.%d.ssm_norm.weight", il);
    snprintf(out, sizeof out, "blk.%d.ssm_out.weight", il);
    const struct gguf_tensor *t = gguf_find_tensor(m->gguf, cv);
    if (!t || t->ne[0] != dd.n_conv || t->ne[1] != dd.conv_dim || t->ne[2] != 1 ||
        t->type != DTYPE_F32)
        return fail(HEARTH_EFORMAT, err, err_len,
                    "model: tensor %s must be f32 of shape [%d, %d]", cv, dd.n_conv, dd.conv_dim);
    if (!(dn->conv = malloc(t->size)))
        return fail(HEARTH_ENOMEM, err, err_len, "model: out of memory");
    memcpy(dn->conv, t->data, t->size);
    m->weight_bytes += t->size;
    if ((st = model_get_weight(m, n[8], d, dd.conv_dim, false, &dn->wqkv, err, err_len)) ||
        (st = model_get_weight(m, n[9], d, vd, false, &dn->wgate, err, err_len)) ||
        (st = model_get_weight(m, n[10], d, dd.n_v, false, &dn->wbeta, err, err_len)) ||
        (st = model_get_weight(m, n[11], d, dd.n_v, false, &dn->walpha, err, err_len)) ||
        (st = model_get_weight(m, out, vd, d, false, &dn->wout, err, err_len)) ||
        (st = model_get_vector(m, dt, dd.n_v, false, &dn->dt_bias, err, err_len)) ||
        (st = model_get_vector(m, a, dd.n_v, false, &dn->a, err, err_len)) ||
        (st = model_get_vector(m, nm, dd.S, false, &dn->norm, err, err_len)))
        return st;
    struct weight *ws[] = {&dn->wqkv, &dn->wgate, &dn->wbeta, &dn->walpha, &dn->wout};
    for (size_t j = 0; j < sizeof ws / sizeof ws[0]; j++)
        if ((st = model_pack_weight(m, ws[j], err, err_len)))
            return st;
    return HEARTH_OK;
}

void dnet_free(struct dnet *d)
{
    if (!d)
        return;
    struct weight *ws[] = {&d->wqkv, &d->wgate, &d->wbeta, &d->walpha, &d->wout};
    for (size_t j = 0; j < sizeof ws / sizeof ws[0]; j++)
        model_unpack_weight(ws[j]);
    free(d->conv);
    free(d->dt_bias);
    free(d->a);
    free(d->norm);
    free(d);
}

/* -------------------------------------------------------------------- state --- */

struct dnet_cache *dnet_cache_new(const struct hearth_model *m, int32_t n_seq, int32_t n_batch)
{
    struct dnet_cache *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    const struct hparams *hp = &m->hp;
    c->d                     = dims_of(m);
    for (int32_t i = 0; i < hp->n_layer; i++)
        c->n_layer += m->layers[i].dnet != NULL;
    c->n_seq    = n_seq;
    c->conv_len = (size_t)(c->d.n_conv - 1) * c->d.conv_dim;
    c->ssm_len  = (size_t)c->d.n_v * c->d.S * c->d.S;
    c->n_gate   = hp->n_head * hp->head_dim;
    const size_t nb = (size_t)n_batch, vd = (size_t)c->d.n_v * c->d.S, ls = (size_t)c->n_layer * n_seq;
    c->conv = calloc(ls * c->conv_len, sizeof(float));
    c->ssm  = calloc(ls * c->ssm_len, sizeof(float));
    c->qkv  = malloc(nb * c->d.conv_dim * sizeof(float));
    c->z    = malloc(nb * vd * sizeof(float));
    c->beta = malloc(nb * c->d.n_v * sizeof(float));
    c->g    = malloc(nb * c->d.n_v * sizeof(float));
    c->o    = malloc(nb * vd * sizeof(float));
    c->ones = malloc((size_t)c->d.conv_dim * sizeof(float));
    c->qg   = malloc(nb * 2 * c->n_gate * sizeof(float));
    c->gate = malloc(nb * c->n_gate * sizeof(float));
    c->snap = calloc(nb, sizeof *c->snap);
    if ((ls && (!c->conv || !c->ssm)) || !c->qkv || !c->z || !c->beta || !c->g || !c->o ||
        !c->ones || !c->qg || !c->gate || !c->snap) {
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

float **dnet_snap_rows(struct dnet_cache *c) { return c->snap; }

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
    return c->conv + ((size_t)dn->slot * c->n_seq + seq) * c->conv_len;
}

static float *ssm_state(struct dnet_cache *c, const struct dnet *dn, int32_t seq)
{
    return c->ssm + ((size_t)dn->slot * c->n_seq + seq) * c->ssm_len;
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
            float *to = c->snap[t] + (size_t)j->dn->slot * c->conv_len;
            memcpy(to + c0 * (K - 1), st + c0 * (K - 1),
                   (size_t)(c1 - c0) * (K - 1) * sizeof(float));
        }
    }
}

/* SiLU of the conv output, L2 norms of q and k, the decay and the write strength, per token. */
static void token_prep(void *arg, int ith, int nth)
{
    struct job *j            = arg;
    struct dnet_cache *c     = j->c;
    const struct kernels *k  = j->ctx->model->k;
    const struct dnet *dn    = j->dn;
    const float eps          = j->ctx->model->hp.norm_eps;
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
            beta[h]       = 1.0f / (1.0f + expf(-beta[h]));
            const float a = g[h] + dn->dt_bias[h];
            const float sp = a > 20.0f ? a : logf(1.0f + expf(a));
            g[h]           = sp * dn->a[h];
        }
    }
}

/* The delta rule, split by value head: each head's state walks the batch's tokens in order. */
static void delta_heads(void *arg, int ith, int nth)
{
    struct job *j        = arg;
    struct dnet_cache *c = j->c;
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
                        *v = x + (size_t)2 * nk * S + (size_t)h * S;
            const float beta = c->beta[(size_t)t * nv + h], eg = expf(c->g[(size_t)t * nv + h]);
            for (int32_t i = 0; i < S * S; i++)
                M[i] *= eg;
            for (int32_t r = 0; r < S; r++)
                delta[r] = (v[r] - ggml_vec_dot_f32_ref(M + (size_t)r * S, kv, S)) * beta;
            for (int32_t r = 0; r < S; r++) {
                float *row = M + (size_t)r * S;
                for (int32_t i = 0; i < S; i++)
                    row[i] = fmaf(kv[i], delta[r], row[i]);
            }
            float *o = c->o + ((size_t)t * nv + h) * S;
            for (int32_t r = 0; r < S; r++)
                o[r] = ggml_vec_dot_f32_ref(M + (size_t)r * S, q, S) * scale;
            if (c->snap[t])
                memcpy(c->snap[t] + (size_t)c->n_layer * c->conv_len +
                           (size_t)j->dn->slot * c->ssm_len + (size_t)h * S * S,
                       M, (size_t)S * S * sizeof(float));
        }
    }
}

/* RMSNorm of each head's output times SiLU of its gate z. */
static void gated_norm(void *arg, int ith, int nth)
{
    struct job *j           = arg;
    struct dnet_cache *c    = j->c;
    const struct kernels *k = j->ctx->model->k;
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
        threadpool_run(ctx->tp, fn, arg);
}

void dnet_forward(struct hearth_context *ctx, const struct hearth_batch *b, int32_t l,
                  const float *in, float *out)
{
    const struct dnet *dn = ctx->model->layers[l].dnet;
    struct dnet_cache *c  = ctx->dn;
    const int64_t d = ctx->model->hp.n_embd, vd = (int64_t)c->d.n_v * c->d.S;
    struct job j = {ctx, b, dn, c, b->n};
    model_matmul(ctx, &dn->wqkv, in, d, c->qkv, c->d.conv_dim, b->n, NULL);
    model_matmul(ctx, &dn->wgate, in, d, c->z, vd, b->n, &dn->wqkv);
    model_matmul(ctx, &dn->wbeta, in, d, c->beta, c->d.n_v, b->n, &dn->wgate);
    model_matmul(ctx, &dn->walpha, in, d, c->g, c->d.n_v, b->n, &dn->wbeta);
    threadpool_run(ctx->tp, conv_channels, &j);
    run_small(ctx, token_prep, &j, b->n);
    threadpool_run(ctx->tp, delta_heads, &j);
    run_small(ctx, gated_norm, &j, b->n);
    model_matmul(ctx, &dn->wout, c->o, vd, out, d, b->n, NULL);
}

/* ------------------------------------------------------------ gated attention --- */

float *dnet_gate_rows(struct hearth_context *ctx) { return ctx->dn->qg; }

void dnet_gate_split(struct hearth_context *ctx, float *q, int32_t n)
{
    struct dnet_cache *c = ctx->dn;
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
    const struct dnet_cache *c = ctx->dn;
    const size_t len           = (size_t)n * c->n_gate;
    for (size_t i = 0; i < len; i++)
        att[i] *= 1.0f / (1.0f + expf(-c->gate[i]));
}
