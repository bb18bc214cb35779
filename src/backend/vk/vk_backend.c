/*
 * vk_backend.c: the Vulkan backend's table (backend.h) over the runtime of
 * vk.h, for the dense architectures (llama, qwen2, qwen3, gemma3) and
 * qwen3moe's routed experts (vk_moe.h, whose expert stacks the load
 * prepares whole: moe_stacks) and Qwen3.5's hybrid layers (Gated DeltaNet,
 * vk_deltanet.h; gated attention with IMRoPE). Weights are uploaded at load,
 * split across buffers as vk_weight does; a stage's context keeps every
 * activation, its layers' K/V memory (kv_host false, addressed by kv.c's
 * block ids), the recurrent state of its DeltaNet layers and the norm and
 * bias vectors on the device.
 *
 * Submission: operations are recorded into one sequence (one command
 * buffer) that runs when the host needs a result (residual_get, logits, a
 * block copy), before the next batch's uploads, or when the sequence is
 * nearly full, so a decode step is one or two submits, not one per
 * operation.
 *
 * Devices: one vk_dev per device index, opened by the first weight or
 * context that needs it and closed when the last is released.
 *
 * Bits (against the CPU backend): matmul rounds its activations to the
 * weight's vec_dot_type as the CPU does (vk_act.c: f16, bf16, Q8_0, Q8_1,
 * Q8_K), leaving the summation order, and for Q4_1/Q5_1 the offset term
 * the CPU takes from Q8_1's separately rounded block sum; the routed
 * experts as vk_moe.h states; attention,
 * SwiGLU, RMSNorm and soft-cap differ by the device's exp and summation
 * order (vk.h, tests/unit/test_vk.c); rope takes the CPU's angles (computed here on the
 * host as ggml does) without its fused multiply-adds; embed, add, scale,
 * GELU, the K/V store and gather are the CPU's bits. tests/unit/test_vk_backend.c
 * states the bound over whole models.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/vk/vk_deltanet.h"
#include "backend/vk/vk_internal.h"
#include "backend/vk/vk_memlaw.h"
#include "backend/vk/vk_moe.h"
#include "kernels/kernels.h"
#include "model/types.h"
#include "util/errfmt.h"

#define VK_MAX_DEVICES 4
/* flush a sequence with this many dispatches left before vk_pipeline.c's limit of 1024 */
#define SEQ_FLUSH_AT 960

/* ------------------------------------------------------------- devices --- */

static struct {
    struct vk_dev *d;
    int refs; /* weights and contexts holding d */
} devs[VK_MAX_DEVICES];
static pthread_mutex_t devs_lock = PTHREAD_MUTEX_INITIALIZER;

static enum hearth_status dev_hold(int i, struct vk_dev **out, char *err, size_t err_len)
{
    enum hearth_status st = HEARTH_OK;
    pthread_mutex_lock(&devs_lock);
    if (!devs[i].d)
        st = vk_dev_open(i, 0, &devs[i].d, err, err_len);
    if (!st)
        devs[i].refs++;
    *out = devs[i].d;
    pthread_mutex_unlock(&devs_lock);
    return st;
}

static void dev_drop(int i)
{
    pthread_mutex_lock(&devs_lock);
    if (devs[i].d && --devs[i].refs == 0) {
        vk_dev_close(devs[i].d);
        devs[i].d = NULL;
    }
    pthread_mutex_unlock(&devs_lock);
}

/* ------------------------------------------------------------- weights --- */

/* w->dev of a weight on a Vulkan device. */
struct vk_prepared {
    struct vk_weight *w;
    int device;
};

static bool weight_supported(enum dtype type)
{
    return vk_op_matmul_supported(type) && vk_op_embed_supported(type);
}

static bool moe_supported(enum dtype gate, enum dtype up, enum dtype down)
{
    return vk_op_matmul_id_supported(gate) && vk_op_matmul_id_supported(up) &&
           vk_op_matmul_id_supported(down);
}

static bool vector_to_f32(enum dtype type, const void *src, float *dst, int64_t n)
{
    return backend_cpu()->vector_to_f32(type, src, dst, n);
}

static enum hearth_status prepare(int device, struct weight *w, char *err, size_t err_len)
{
    if (!w->data)
        return HEARTH_OK;
    if (w->n_in > UINT32_MAX || w->n_out > UINT32_MAX)
        return fail(HEARTH_EUNSUPPORTED, err, err_len,
                    "vulkan: a weight of %lld x %lld is past the shaders' 32-bit shapes",
                    (long long)w->n_out, (long long)w->n_in);
    struct vk_prepared *p = calloc(1, sizeof *p);
    if (!p)
        return fail(HEARTH_ENOMEM, err, err_len, "vulkan: out of memory");
    struct vk_dev *d;
    enum hearth_status st = dev_hold(device, &d, err, err_len);
    if (st) {
        free(p);
        return st;
    }
    p->device = device;
    if ((st = vk_weight_new(d, w->type, (uint32_t)w->n_in, (uint32_t)w->n_out, w->data, 0, &p->w,
                            err, err_len))) {
        dev_drop(device);
        free(p);
        return st;
    }
    w->dev     = p;
    w->dev_len = 0;
    return HEARTH_OK;
}

/* weight_prepare has no device argument: one entry per device index passes its own */
/* clang-format off */
#define PREPARE_ON(i)                                                                        \
    static enum hearth_status prepare##i(struct weight *w, enum weight_use use, char *err,  \
                                         size_t err_len)                                    \
    {                                                                                        \
        return prepare(i, w, err, err_len);                                                  \
    }
/* clang-format on */
PREPARE_ON(0)
PREPARE_ON(1)
PREPARE_ON(2)
PREPARE_ON(3)

static void weight_release(struct weight *w)
{
    struct vk_prepared *p = w->dev;
    if (!p)
        return;
    vk_weight_free(p->w);
    dev_drop(p->device);
    free(p);
    w->dev = NULL;
}

static enum hearth_status layer_supported(const struct hearth_model *m, int32_t l, char *err,
                                          size_t err_len)
{
    const struct layer *L    = &m->layers[l];
    const struct hparams *hp = &m->hp;
    if (hp->recurrent && !L->attn_gated) {
        const struct dnet_dims dd = m->hp.dnet;
        if ((uint64_t)dd.n_v * dd.S * dd.S * sizeof(float) > UINT32_MAX)
            return fail(HEARTH_EUNSUPPORTED, err, err_len,
                        "model: layer %d's DeltaNet state of %d heads of %d x %d is past the "
                        "Vulkan shaders' 32-bit offsets",
                        l, dd.n_v, dd.S, dd.S);
        return HEARTH_OK;
    }
    if (L->head_dim || L->kv_reuse || hp->n_embd_pl)
        return fail(HEARTH_EUNSUPPORTED, err, err_len,
                    "model: %s's layers (per-layer head widths, shared K/V, per-layer "
                    "embeddings) do not run on Vulkan yet; run with -ngl 0",
                    m->arch);
    if (hp->head_dim > 256 || (hp->head_dim % 2))
        return fail(HEARTH_EUNSUPPORTED, err, err_len,
                    "model: layer %d has heads of %d, which the Vulkan attention does not run "
                    "(even, up to 256)",
                    l, hp->head_dim);
    return HEARTH_OK;
}

/* ------------------------------------------------------------- context --- */

/* A layer's f32 vectors on the device (NULL where the model has none). */
struct vk_layer_vecs {
    struct vk_buf *attn_norm, *post_attn_norm, *ffn_norm, *post_ffn_norm;
    struct vk_buf *bq, *bk, *bv, *q_norm, *k_norm;
};

/* ctx->be of a Vulkan stage. */
struct vk_ctx {
    struct vk_dev *d;
    int device;
    struct vk_seq *seq;
    bool recording;                /* seq has begun and not run */
    enum hearth_status failed;     /* the first failure of a batch's operation, said once */
    struct vk_buf *act[ACT_COUNT]; /* [n_batch][width] each, ACT_LOGITS: chunk 0 of logits */
    struct vk_buf *spare;          /* as ACT_X: gather's destination, then swapped with it */
    struct vk_buf *ids;            /* int32 [n_batch] the batch's tokens */
    struct vk_buf *cs[2];          /* [n_batch][rope_dim / 2] (cos, sin): the two rope bases */
    float rope_base[2];
    float *cs_host;
    struct vk_buf *rows;              /* int32 [n_batch] gather's output rows */
    struct vk_buf *tables[KV_GROUPS]; /* int32 [n_seq][stride] */
    struct vk_buf *kvrows;            /* int32 [n_batch][2] (sequence, position) */
    int32_t *host_i32;                /* staging for the uploads above */
    uint32_t stride;                  /* table entries per sequence */
    struct vk_kv *kv;                 /* [n_layer], the stage's layers' only */
    struct vk_buf *out_norm;
    struct vk_layer_vecs *vec; /* [n_layer], the stage's layers' only */
    struct vk_buf *gate;       /* [n_batch][n_head * head_dim] a gated layer's gates, or NULL */
    struct vk_dnet *dn;        /* the stage's DeltaNet state, or NULL without such layers */
    /* logits in chunks of at most one buffer: chunk c holds rows [c * chunk_rows, ...) */
    int32_t chunk_rows, n_chunks;
    struct vk_buf **logit_buf;  /* [n_chunks] (logit_buf[0] is act[ACT_LOGITS]) */
    struct vk_buf **chunk_ids;  /* [n_chunks] int32 row ids c * chunk_rows + i */
    struct vk_buf *chunk_in;    /* [chunk_rows][n_embd] a chunk's normed rows */
    float *logits;              /* [n_batch][n_vocab] host copy */
    struct vk_buf *actq;        /* [n_batch][widest matmul input] a matmul's input rounded as
                                   the CPU rounds it (vk_op_act_round) */
    struct vk_moe_scratch *moe; /* the MoE layers' buffers, when the stage has one */
    struct vk_buf **shexp_gate; /* [n_layer] each MoE layer's ffn_gate_inp_shexp, or NULL */
    struct mem_acct acct;       /* what ctx_init allocated on the device, by kind */
    struct mem_acct host_acct;  /* and on the host: the logits' copy, the staging rows */
};

static struct vk_ctx *vc_of(const struct hearth_context *ctx)
{
    return ctx->be;
}

/* Notes the first failure of an operation: the forward pass has no error to return. */
static void failed(struct vk_ctx *c, enum hearth_status st, const char *err)
{
    if (st && !c->failed) {
        c->failed = st;
        fprintf(stderr, "hearth: %s; this batch's logits are not valid\n", err);
    }
}

/* The sequence to record into, begun if needed, run first when nearly full. */
static struct vk_seq *rec(struct vk_ctx *c)
{
    char err[256];
    enum hearth_status st = HEARTH_OK;
    if (c->recording && c->seq->n >= SEQ_FLUSH_AT) {
        c->recording = false;
        st           = vk_seq_run(c->seq, err, sizeof err);
    }
    if (!st && !c->recording && !(st = vk_seq_begin(c->seq, err, sizeof err)))
        c->recording = true;
    failed(c, st, err);
    return c->seq;
}

/* Runs what was recorded: the host reads or writes device memory next. */
static void flush(struct vk_ctx *c)
{
    char err[256];
    if (!c->recording)
        return;
    c->recording          = false;
    enum hearth_status st = vk_seq_run(c->seq, err, sizeof err);
    failed(c, st, err);
}

static void ctx_free(struct hearth_context *ctx)
{
    struct vk_ctx *c = vc_of(ctx);
    if (!c)
        return;
    if (c->d) {
        flush(c);
        const int32_t l0 = ctx->st->place->l0, l1 = ctx->st->place->l1;
        for (int a = 0; a < ACT_COUNT; a++)
            if (a != ACT_LOGITS)
                vk_buf_free(c->act[a]);
        vk_buf_free(c->spare);
        vk_buf_free(c->ids);
        vk_buf_free(c->cs[0]);
        vk_buf_free(c->cs[1]);
        vk_buf_free(c->rows);
        for (int g = 0; g < KV_GROUPS; g++)
            vk_buf_free(c->tables[g]);
        vk_buf_free(c->kvrows);
        for (int32_t l = l0; c->kv && l < l1; l++) {
            vk_buf_free(c->kv[l].k);
            vk_buf_free(c->kv[l].v);
        }
        for (int32_t l = l0; c->vec && l < l1; l++) {
            struct vk_layer_vecs *v = &c->vec[l];
            struct vk_buf *all[]    = {
                   v->attn_norm, v->post_attn_norm, v->ffn_norm, v->post_ffn_norm, v->bq, v->bk,
                   v->bv,        v->q_norm,         v->k_norm};
            for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
                vk_buf_free(all[i]);
        }
        vk_buf_free(c->out_norm);
        vk_buf_free(c->gate);
        vk_dnet_free(c->dn);
        for (int32_t i = 0; i < c->n_chunks; i++) {
            vk_buf_free(c->logit_buf ? c->logit_buf[i] : NULL);
            vk_buf_free(c->chunk_ids ? c->chunk_ids[i] : NULL);
        }
        vk_buf_free(c->chunk_in);
        vk_buf_free(c->actq);
        vk_moe_scratch_free(c->moe);
        for (int32_t l = l0; c->shexp_gate && l < l1; l++)
            vk_buf_free(c->shexp_gate[l]);
        vk_seq_free(c->seq);
        dev_drop(c->device);
    }
    free(c->logit_buf);
    free(c->chunk_ids);
    free(c->kv);
    free(c->vec);
    free(c->cs_host);
    free(c->host_i32);
    free(c->logits);
    free(c->shexp_gate);
    free(c);
    ctx->be = NULL;
}

/* A device buffer of len bytes, counted under kind. */
static enum hearth_status dev_buf(struct vk_ctx *c, enum mem_kind kind, size_t len,
                                  struct vk_buf **out, char *err, size_t err_len)
{
    len                         = len ? len : 4;
    const enum hearth_status st = vk_buf_new(c->d, len, out, err, err_len);
    if (!st)
        c->acct.b[kind] += len;
    return st;
}

/* A host f32 vector of n elements on the device, or NULL for a vector the model lacks. */
static enum hearth_status vec(struct vk_ctx *c, const float *v, int64_t n, struct vk_buf **out,
                              char *err, size_t err_len)
{
    enum hearth_status st;
    *out = NULL;
    if (!v)
        return HEARTH_OK;
    if ((st = dev_buf(c, MEM_WEIGHTS, (size_t)n * sizeof(float), out, err, err_len)))
        return st;
    return vk_buf_upload(*out, 0, v, (size_t)n * sizeof(float), err, err_len);
}

/* The stage's MoE layers' scratch and shared-expert gates, when it has MoE layers. */
static enum hearth_status moe_init(struct hearth_context *ctx, struct vk_ctx *c, char *err,
                                   size_t err_len)
{
    const struct hearth_model *m = ctx->model;
    const struct hparams *hp     = &m->hp;
    int32_t n_moe                = 0;
    for (int32_t l = ctx->st->place->l0; l < ctx->st->place->l1; l++)
        n_moe += m->layers[l].moe != NULL;
    if (!n_moe)
        return HEARTH_OK;
    enum hearth_status st;
    const uint32_t n_slots = (uint32_t)(hp->n_expert_used + (hp->n_ff_shexp > 0));
    if ((st = vk_moe_scratch_new(c->d, (uint32_t)ctx->p.n_batch, (uint32_t)hp->n_embd,
                                 (uint32_t)hp->n_ff_exp, (uint32_t)hp->n_expert, n_slots, &c->acct,
                                 &c->moe, err, err_len)))
        return st;
    if (!(c->shexp_gate = calloc((size_t)hp->n_layer, sizeof *c->shexp_gate)))
        return fail(HEARTH_ENOMEM, err, err_len, "context: out of memory");
    for (int32_t l = ctx->st->place->l0; l < ctx->st->place->l1; l++)
        if (m->layers[l].moe && (st = vec(c, m->layers[l].moe->shared_gate, hp->n_embd,
                                          &c->shexp_gate[l], err, err_len)))
            return st;
    return HEARTH_OK;
}

static enum hearth_status ctx_init(struct hearth_context *ctx, char *err, size_t err_len)
{
    const struct hearth_model *m = ctx->model;
    const struct hparams *hp     = &m->hp;
    const struct kv_cache *kv    = &ctx->kv;
    const int32_t l0 = ctx->st->place->l0, l1 = ctx->st->place->l1;
    const size_t qd = (size_t)hp->n_head * hp->head_dim, kvd = (size_t)hp->n_head_kv * hp->head_dim,
                 f = sizeof(float);
    enum hearth_status st;
    struct vk_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return fail(HEARTH_ENOMEM, err, err_len, "context: out of memory");
    ctx->be   = c;
    c->device = ctx->st->place->device;
    if ((st = dev_hold(c->device, &c->d, err, err_len))) {
        c->d = NULL;
        return st;
    }
    if ((st = vk_seq_new(c->d, &c->seq, err, err_len)))
        return st;
    /* every size below is the memory law's (vk_memlaw.h), which budget.c and hearth fit use */
    struct memlaw_vk law;
    const uint64_t cap = c->d->max_range < c->d->max_alloc ? c->d->max_range : c->d->max_alloc;
    memlaw_vk_ctx(ctx, ctx->st, cap, &law);
    const size_t len[ACT_COUNT] = {[ACT_X] = law.x,     [ACT_XB] = law.xb, [ACT_Q] = law.q,
                                   [ACT_QG] = law.qg,   [ACT_K] = law.k,   [ACT_V] = law.v,
                                   [ACT_ATT] = law.att, [ACT_HB] = law.hb, [ACT_HB2] = law.hb2};
    for (int a = 0; a < ACT_COUNT; a++)
        if (a != ACT_LOGITS && len[a] &&
            (st = dev_buf(c, MEM_COMPUTE, len[a], &c->act[a], err, err_len)))
            return st;
    if ((law.gate && (st = dev_buf(c, MEM_COMPUTE, law.gate, &c->gate, err, err_len))) ||
        (st = vk_dnet_new(c->d, m, l0, l1, ctx->p.n_seq_max, ctx->p.n_batch, &c->acct, &c->dn, err,
                          err_len)))
        return st;
    c->stride = (uint32_t)law.stride;
    if ((st = dev_buf(c, MEM_COMPUTE, law.spare, &c->spare, err, err_len)) ||
        (st = dev_buf(c, MEM_COMPUTE, law.actq, &c->actq, err, err_len)) ||
        (st = dev_buf(c, MEM_COMPUTE, law.ids, &c->ids, err, err_len)) ||
        (st = dev_buf(c, MEM_COMPUTE, law.rows, &c->rows, err, err_len)) ||
        (st = dev_buf(c, MEM_COMPUTE, law.kvrows, &c->kvrows, err, err_len)))
        return st;
    c->host_i32 = malloc(law.host_i32);
    c->cs_host  = malloc(law.host_cs);
    c->host_acct.b[MEM_OTHER] += law.host_i32;
    c->host_acct.b[MEM_COMPUTE] += law.host_cs;
    c->kv  = calloc((size_t)hp->n_layer, sizeof *c->kv);
    c->vec = calloc((size_t)hp->n_layer, sizeof *c->vec);
    if (!c->host_i32 || !c->cs_host || !c->kv || !c->vec)
        return fail(HEARTH_ENOMEM, err, err_len, "context: out of memory");
    for (int b = 0; b < law.n_cs; b++) {
        c->rope_base[b] = law.rope_base[b];
        if ((st = dev_buf(c, MEM_COMPUTE, law.cs, &c->cs[b], err, err_len)))
            return st;
    }
    for (int g = 0; g < KV_GROUPS; g++)
        if (kv->pool[g].n_layer &&
            (st = dev_buf(c, MEM_OTHER, law.table, &c->tables[g], err, err_len)))
            return st;
    for (int32_t l = l0; l < l1; l++) {
        const struct layer *L   = &m->layers[l];
        struct vk_layer_vecs *v = &c->vec[l];
        if ((st = vec(c, L->attn_norm, hp->n_embd, &v->attn_norm, err, err_len)) ||
            (st = vec(c, L->post_attn_norm, hp->n_embd, &v->post_attn_norm, err, err_len)) ||
            (st = vec(c, L->ffn_norm, hp->n_embd, &v->ffn_norm, err, err_len)) ||
            (st = vec(c, L->post_ffn_norm, hp->n_embd, &v->post_ffn_norm, err, err_len)) ||
            (st = vec(c, L->bq, (int64_t)qd, &v->bq, err, err_len)) ||
            (st = vec(c, L->bk, (int64_t)kvd, &v->bk, err, err_len)) ||
            (st = vec(c, L->bv, (int64_t)kvd, &v->bv, err, err_len)) ||
            (st = vec(c, L->q_norm, hp->head_dim, &v->q_norm, err, err_len)) ||
            (st = vec(c, L->k_norm, hp->head_dim, &v->k_norm, err, err_len)))
            return st;
        if (kv->group[l] == KV_NONE)
            continue;
        if (kv->type[0] != kv->type[1] ||
            (kv->type[0] != HEARTH_KV_F16 && kv->type[0] != HEARTH_KV_F32))
            return fail(HEARTH_EUNSUPPORTED, err, err_len,
                        "context: the Vulkan backend keeps K and V both f16 or both f32, not K "
                        "%s and V %s; a quantized cache runs on the CPU (fewer -ngl layers)",
                        hearth_kv_type_name(kv->type[0]), hearth_kv_type_name(kv->type[1]));
        const struct kv_pool *p = &kv->pool[kv->group[l]];
        struct vk_kv *k         = &c->kv[l];
        *k                      = (struct vk_kv){.tables       = c->tables[kv->group[l]],
                                                 .rows         = c->kvrows,
                                                 .n_blocks     = (uint32_t)p->n_blocks,
                                                 .block_tokens = (uint32_t)kv->block_tokens,
                                                 .n_seq        = (uint32_t)kv->n_seq,
                                                 .table_stride = c->stride,
                                                 .f16          = kv->type[0] == HEARTH_KV_F16};
        if ((st = dev_buf(c, MEM_KV, p->layer_len[0], &k->k, err, err_len)) ||
            (st = dev_buf(c, MEM_KV, p->layer_len[1], &k->v, err, err_len)))
            return st;
    }
    if ((st = moe_init(ctx, c, err, err_len)))
        return st;
    if (!ctx->st->output)
        return HEARTH_OK;
    if ((st = vec(c, m->output_norm, hp->n_embd, &c->out_norm, err, err_len)))
        return st;
    /* logits in chunks of rows that fit one buffer (128 MiB on lavapipe: 220 rows of 150k) */
    const size_t row = (size_t)hp->n_vocab * f;
    if (row > cap)
        return fail(HEARTH_ENOMEM, err, err_len,
                    "vulkan: a row of %d logits exceeds one buffer's %llu bytes", hp->n_vocab,
                    (unsigned long long)cap);
    c->chunk_rows = law.chunk_rows;
    c->n_chunks   = law.n_chunks;
    c->logit_buf  = calloc((size_t)c->n_chunks, sizeof *c->logit_buf);
    c->chunk_ids  = calloc((size_t)c->n_chunks, sizeof *c->chunk_ids);
    c->logits     = malloc(law.host_logits);
    c->host_acct.b[MEM_OUTPUT] += law.host_logits;
    if (!c->logit_buf || !c->chunk_ids || !c->logits)
        return fail(HEARTH_ENOMEM, err, err_len, "context: out of memory for a batch of %d",
                    ctx->p.n_batch);
    for (int32_t i = 0; i < c->n_chunks; i++) {
        if ((st = dev_buf(c, MEM_OUTPUT, law.chunk, &c->logit_buf[i], err, err_len)) ||
            (st = dev_buf(c, MEM_COMPUTE, law.chunk_ids, &c->chunk_ids[i], err, err_len)))
            return st;
        for (int32_t r = 0; r < c->chunk_rows; r++)
            c->host_i32[r] = i * c->chunk_rows + r;
        if ((st = vk_buf_upload(c->chunk_ids[i], 0, c->host_i32, (size_t)c->chunk_rows * 4, err,
                                err_len)))
            return st;
    }
    c->act[ACT_LOGITS] = c->logit_buf[0];
    if (c->n_chunks > 1 && (st = dev_buf(c, MEM_COMPUTE, law.chunk_in, &c->chunk_in, err, err_len)))
        return st;
    return HEARTH_OK;
}

static void ctx_memory(const void *state, struct mem_acct *dev, struct mem_acct *host)
{
    const struct vk_ctx *c = state;
    mem_acct_add(dev, &c->acct);
    mem_acct_add(host, &c->host_acct);
}

/* The recurrent state is copied between sequences: what was recorded runs first. */
static void seq_reset(struct hearth_context *ctx, int32_t seq)
{
    struct vk_ctx *c = vc_of(ctx);
    char err[256];
    if (!c->dn)
        return;
    flush(c);
    failed(c, vk_dnet_reset(c->dn, seq, err, sizeof err), err);
}

static size_t state_len(const struct hearth_context *ctx)
{
    return vk_dnet_state_len(vc_of(ctx)->dn);
}

static void state_load(struct hearth_context *ctx, int32_t seq, const float *src)
{
    struct vk_ctx *c = vc_of(ctx);
    char err[256];
    if (!c->dn)
        return;
    flush(c);
    failed(c, vk_dnet_load(c->dn, seq, src, err, sizeof err), err);
}

static float **state_save_rows(struct hearth_context *ctx)
{
    struct vk_ctx *c = vc_of(ctx);
    return c->dn ? vk_dnet_save_rows(c->dn) : NULL;
}

static void kv_copy(struct hearth_context *ctx, int group, int32_t dst, int32_t src, int32_t n_rows)
{
    struct vk_ctx *c          = vc_of(ctx);
    const struct kv_cache *kv = &ctx->kv;
    const size_t row = kv->row_len[0], blk = (size_t)kv->block_tokens * row;
    char err[256];
    flush(c);
    for (int32_t l = ctx->st->place->l0; l < ctx->st->place->l1; l++) {
        if (kv->group[l] != group)
            continue;
        struct vk_buf *kvb[2] = {c->kv[l].k, c->kv[l].v};
        for (int i = 0; i < 2; i++)
            failed(c,
                   vk_buf_copy(kvb[i], (size_t)dst * blk, kvb[i], (size_t)src * blk,
                               (size_t)n_rows * row, err, sizeof err),
                   err);
    }
}

/* ------------------------------------------------------- the operations --- */

static void batch_begin(struct hearth_context *ctx, const struct hearth_batch *b)
{
    struct vk_ctx *c          = vc_of(ctx);
    const struct hparams *hp  = &ctx->model->hp;
    const struct kv_cache *kv = &ctx->kv;
    char err[256];
    enum hearth_status st = HEARTH_OK;
    flush(c);
    c->failed = HEARTH_OK;
    if (c->dn)
        vk_dnet_batch_begin(c->dn);
    int32_t *h = c->host_i32;
    if (ctx->st->embed)
        st = vk_buf_upload(c->ids, 0, b->token, (size_t)b->n * 4, err, sizeof err);
    const bool imrope =
        hp->rope_sections[0] + hp->rope_sections[1] + hp->rope_sections[2] + hp->rope_sections[3];
    for (int i = 0; i < 2 && !st && c->cs[i]; i++) {
        vk_rope_angles_ggml(b->pos, (uint32_t)b->n, (uint32_t)hp->rope_dim, c->rope_base[i],
                            imrope ? hp->rope_sections : NULL, c->cs_host);
        st = vk_buf_upload(c->cs[i], 0, c->cs_host, (size_t)b->n * hp->rope_dim * sizeof(float),
                           err, sizeof err);
    }
    for (int32_t t = 0; t < b->n; t++) {
        h[2 * t]     = b->seq[t];
        h[2 * t + 1] = b->pos[t];
    }
    if (!st)
        st = vk_buf_upload(c->kvrows, 0, h, (size_t)b->n * 8, err, sizeof err);
    for (int g = 0; g < KV_GROUPS && !st; g++) {
        if (!c->tables[g])
            continue;
        for (int32_t s = 0; s < kv->n_seq; s++) {
            const struct kv_table *t = &kv->seqs[s].t[g];
            for (uint32_t i = 0; i < c->stride; i++)
                h[(size_t)s * c->stride + i] = (int32_t)i < t->n_blocks ? t->blocks[i] : -1;
        }
        st = vk_buf_upload(c->tables[g], 0, h, (size_t)kv->n_seq * c->stride * 4, err, sizeof err);
    }
    failed(c, st, err);
}

static void residual_get(struct hearth_context *ctx, int32_t n, float *dst)
{
    struct vk_ctx *c = vc_of(ctx);
    char err[256];
    flush(c);
    failed(c,
           vk_buf_download(c->act[ACT_X], 0, dst, (size_t)n * ctx->model->hp.n_embd * sizeof(float),
                           err, sizeof err),
           err);
}

static void residual_set(struct hearth_context *ctx, int32_t n, const float *src)
{
    struct vk_ctx *c = vc_of(ctx);
    char err[256];
    flush(c);
    failed(c,
           vk_buf_upload(c->act[ACT_X], 0, src, (size_t)n * ctx->model->hp.n_embd * sizeof(float),
                         err, sizeof err),
           err);
}

static const struct vk_weight *vw(const struct weight *w)
{
    return ((const struct vk_prepared *)w->dev)->w;
}

static void embed(struct hearth_context *ctx, const struct hearth_batch *b)
{
    struct vk_ctx *c = vc_of(ctx);
    char err[256];
    failed(c,
           vk_op_embed(rec(c), vw(&ctx->model->tok_embd), c->ids, c->act[ACT_X], (uint32_t)b->n,
                       ctx->model->hp.embd_scale, err, sizeof err),
           err);
}

static void rmsnorm(struct hearth_context *ctx, enum act dst, enum act src, int32_t l,
                    enum norm which, int32_t n)
{
    struct vk_ctx *c         = vc_of(ctx);
    const struct hparams *hp = &ctx->model->hp;
    struct vk_buf *w         = c->out_norm;
    if (which != NORM_OUTPUT) {
        const struct vk_layer_vecs *v = &c->vec[l];
        w                             = which == NORM_ATTN        ? v->attn_norm
                                        : which == NORM_POST_ATTN ? v->post_attn_norm
                                        : which == NORM_FFN       ? v->ffn_norm
                                                                  : v->post_ffn_norm;
    }
    char err[256];
    failed(c,
           vk_op_rmsnorm(rec(c), c->act[src], w, c->act[dst], (uint32_t)hp->n_embd, (uint32_t)n,
                         hp->norm_eps, err, sizeof err),
           err);
}

/*
 * How a matmul of weight w over n tokens reads its input from actq: blocks for the integer-dot
 * kernel where the device takes it (vk_idot.c), else rounded floats (vk_act_type's) or the
 * input itself. A matmul that follows another on the same input reuses actq when both read it
 * the same way.
 */
enum act_form { FORM_F32, FORM_ROUNDED, FORM_BLOCKS };

static enum act_form act_form(struct vk_ctx *c, const struct weight *w, int32_t n)
{
    if (vk_op_matmul_dot_supported(c->seq->d, w->type, (uint32_t)n))
        return FORM_BLOCKS;
    return vk_act_type(w->type) != DTYPE_F32 ? FORM_ROUNDED : FORM_F32;
}

static void matmul(struct hearth_context *ctx, const struct weight *w, enum act in, enum act out,
                   int32_t n, const struct weight *prev)
{
    struct vk_ctx *c = vc_of(ctx);
    char err[256];
    enum hearth_status st = HEARTH_OK;
    struct vk_buf *x      = c->act[in];
    const enum dtype at   = vk_act_type(w->type);
    enum act_form form    = act_form(c, w, n);
    /* the logits past one chunk gather float rows: those take the rounded floats */
    if (form == FORM_BLOCKS && out == ACT_LOGITS && n > c->chunk_rows) {
        form = FORM_ROUNDED;
        prev = NULL;
    }
    /* prev ran on the same input: actq holds it already when prev read it the same way */
    const bool have = prev && prev->n_in == w->n_in && act_form(c, prev, n) == form &&
                      vk_act_type(prev->type) == at;
    if (form == FORM_BLOCKS) {
        if (!have)
            st = vk_op_quant_act(rec(c), x, c->actq, (uint32_t)(n * w->n_in), err, sizeof err);
        if (!st)
            st = vk_op_matmul_dot_w(rec(c), vw(w), c->actq,
                                    out == ACT_LOGITS ? c->logit_buf[0] : c->act[out], (uint32_t)n,
                                    err, sizeof err);
        failed(c, st, err);
        return;
    }
    if (form == FORM_ROUNDED) {
        if (!have)
            st = vk_op_act_round(rec(c), at, x, c->actq, (uint32_t)(n * w->n_in), err, sizeof err);
        x = c->actq;
    }
    if (out != ACT_LOGITS) {
        if (!st)
            st = vk_op_matmul_w(rec(c), vw(w), x, c->act[out], (uint32_t)n, err, sizeof err);
        failed(c, st, err);
        return;
    }
    /* the logits in chunks of one buffer each; the first reads its rows in place */
    for (int32_t i = 0; !st && i * c->chunk_rows < n; i++) {
        const int32_t r0  = i * c->chunk_rows;
        const uint32_t rn = (uint32_t)(n - r0 < c->chunk_rows ? n - r0 : c->chunk_rows);
        struct vk_buf *xi = x;
        if (i > 0) {
            xi = c->chunk_in;
            st = vk_op_gather(rec(c), x, xi, c->chunk_ids[i], (uint32_t)w->n_in, (uint32_t)n, rn,
                              err, sizeof err);
        }
        if (!st)
            st = vk_op_matmul_w(rec(c), vw(w), xi, c->logit_buf[i], rn, err, sizeof err);
    }
    failed(c, st, err);
}

static void qkv_store(struct hearth_context *ctx, const struct hearth_batch *b, int32_t l)
{
    struct vk_ctx *c              = vc_of(ctx);
    const struct hparams *hp      = &ctx->model->hp;
    const struct vk_layer_vecs *v = &c->vec[l];
    const uint32_t n = (uint32_t)b->n, hd = (uint32_t)hp->head_dim, qd = (uint32_t)hp->n_head * hd,
                   kvd = (uint32_t)hp->n_head_kv * hd;
    struct vk_buf *q = c->act[ACT_Q], *k = c->act[ACT_K], *vv = c->act[ACT_V];
    struct vk_buf *cs = c->cs[c->cs[1] && c->rope_base[1] == ctx->model->layers[l].rope_base];
    char err[256];
    enum hearth_status st = HEARTH_OK;
    if (ctx->model->layers[l].attn_gated)
        st = vk_op_split_qg(rec(c), c->act[ACT_QG], q, c->gate, n * (uint32_t)hp->n_head, hd, err,
                            sizeof err);
    if (v->bq && !st)
        st = vk_op_add(rec(c), q, v->bq, n * qd, qd, err, sizeof err);
    if (v->bk && !st)
        st = vk_op_add(rec(c), k, v->bk, n * kvd, kvd, err, sizeof err);
    if (v->bv && !st)
        st = vk_op_add(rec(c), vv, v->bv, n * kvd, kvd, err, sizeof err);
    if (v->q_norm && !st)
        st = vk_op_rmsnorm(rec(c), q, v->q_norm, q, hd, n * (uint32_t)hp->n_head, hp->norm_eps, err,
                           sizeof err);
    if (v->k_norm && !st)
        st = vk_op_rmsnorm(rec(c), k, v->k_norm, k, hd, n * (uint32_t)hp->n_head_kv, hp->norm_eps,
                           err, sizeof err);
    if (!st)
        st = vk_op_rope(rec(c), q, cs, n, (uint32_t)hp->n_head, hd, (uint32_t)hp->rope_dim,
                        hp->rope_neox, err, sizeof err);
    if (!st)
        st = vk_op_rope(rec(c), k, cs, n, (uint32_t)hp->n_head_kv, hd, (uint32_t)hp->rope_dim,
                        hp->rope_neox, err, sizeof err);
    if (hp->q_scale > 0 && !st)
        st = vk_op_scale(rec(c), q, n * qd, hp->q_scale, err, sizeof err);
    if (!st)
        st = vk_op_kv_store(rec(c), &c->kv[l], k, vv, kvd, n, err, sizeof err);
    failed(c, st, err);
}

static void attention(struct hearth_context *ctx, const struct hearth_batch *b, int32_t l)
{
    struct vk_ctx *c             = vc_of(ctx);
    const struct hparams *hp     = &ctx->model->hp;
    const struct vk_attn_shape a = {.n_tok     = (uint32_t)b->n,
                                    .n_head    = (uint32_t)hp->n_head,
                                    .n_head_kv = (uint32_t)hp->n_head_kv,
                                    .head_dim  = (uint32_t)hp->head_dim,
                                    .n_swa     = (uint32_t)ctx->kv.window[l],
                                    .scale =
                                        hp->q_scale > 0 ? 1.0f : 1.0f / sqrtf((float)hp->head_dim)};
    char err[256];
    failed(c,
           vk_op_attention(rec(c), &c->kv[l], &a, c->act[ACT_Q],
                           ctx->model->layers[l].attn_gated ? c->gate : NULL, c->act[ACT_ATT], err,
                           sizeof err),
           err);
}

static void gated_act(struct hearth_context *ctx, int32_t l, int32_t n)
{
    (void)l; /* every layer the shaders run has the model's FFN width */
    struct vk_ctx *c   = vc_of(ctx);
    const uint32_t len = (uint32_t)n * (uint32_t)ctx->model->hp.n_ff;
    char err[256];
    failed(c,
           ctx->model->hp.ffn_gelu
               ? vk_op_gelu(rec(c), c->act[ACT_HB], c->act[ACT_HB2], len, err, sizeof err)
               : vk_op_swiglu(rec(c), c->act[ACT_HB], c->act[ACT_HB2], len, err, sizeof err),
           err);
}

static void add(struct hearth_context *ctx, enum act dst, enum act src, int32_t n)
{
    struct vk_ctx *c   = vc_of(ctx);
    const uint32_t len = (uint32_t)n * (uint32_t)ctx->model->hp.n_embd;
    char err[256];
    failed(c, vk_op_add(rec(c), c->act[dst], c->act[src], len, len, err, sizeof err), err);
}

/* n_gemm picks the CPU's f32 router arithmetic; the device's has one order. */
static void moe(struct hearth_context *ctx, int32_t l, int32_t n, int32_t n_gemm)
{
    struct vk_ctx *c            = vc_of(ctx);
    const struct moe *me        = ctx->model->layers[l].moe;
    const bool sh               = me->shared_gate != NULL;
    const int32_t E             = me->n_expert;
    const struct vk_moe_layer L = {.router     = vw(&me->router),
                                   .shexp_gate = sh ? c->shexp_gate[l] : NULL,
                                   .gate       = vw(&me->gate_exps),
                                   .up         = vw(&me->up_exps),
                                   .down       = vw(&me->down_exps),
                                   .sh_gate    = sh ? vw(&me->gate[E]) : NULL,
                                   .sh_up      = sh ? vw(&me->up[E]) : NULL,
                                   .sh_down    = sh ? vw(&me->down[E]) : NULL,
                                   .act        = vk_act_type(me->gate[0].type),
                                   .act_down   = vk_act_type(me->down[0].type),
                                   .n_expert   = (uint32_t)E,
                                   .n_used     = (uint32_t)me->n_used,
                                   .n_ff       = (uint32_t)me->n_ff,
                                   .n_embd     = (uint32_t)me->n_embd};
    char err[256];
    failed(
        c,
        vk_moe_ffn(rec(c), &L, c->moe, c->act[ACT_XB], c->act[ACT_X], (uint32_t)n, err, sizeof err),
        err);
}

/* Snapshots come back to the host after the layer: it runs then, not at the batch's end. */
static void deltanet(struct hearth_context *ctx, const struct hearth_batch *b, int32_t l)
{
    struct vk_ctx *c      = vc_of(ctx);
    const struct dnet *dn = ctx->model->layers[l].dnet;
    char err[256];
    enum hearth_status st = HEARTH_OK;
    if (vk_dnet_plan_pending(c->dn)) {
        flush(c);
        failed(c, vk_dnet_plan(c->dn, b->n, err, sizeof err), err);
    }
    const struct weight *ws[DNET_N_WEIGHTS] = {&dn->wqkv, &dn->wgate, &dn->wbeta, &dn->walpha,
                                               &dn->wout};
    struct vk_dnet_weights w                = {.actq = c->actq};
    for (int i = 0; i < DNET_N_WEIGHTS; i++) {
        w.w[i]   = vw(ws[i]);
        w.act[i] = vk_act_type(ws[i]->type);
    }
    if (!st)
        st = vk_dnet_forward(c->dn, rec(c), l, &w, c->act[ACT_XB], c->kvrows, b->n,
                             ctx->model->hp.norm_eps, err, sizeof err);
    if (!st && vk_dnet_saving(c->dn)) {
        flush(c);
        st = vk_dnet_fetch(c->dn, l, err, sizeof err);
    }
    failed(c, st, err);
}

/* Out of place into the spare buffer, which then becomes buf: parallel copies in place race. */
static void gather(struct hearth_context *ctx, enum act a, const int32_t *rows, int32_t n_out)
{
    struct vk_ctx *c = vc_of(ctx);
    char err[256];
    flush(c);
    enum hearth_status st = vk_buf_upload(c->rows, 0, rows, (size_t)n_out * 4, err, sizeof err);
    if (!st)
        st = vk_op_gather(rec(c), c->act[a], c->spare, c->rows, (uint32_t)ctx->model->hp.n_embd,
                          (uint32_t)ctx->p.n_batch, (uint32_t)n_out, err, sizeof err);
    if (!st) {
        struct vk_buf *t = c->act[a];
        c->act[a]        = c->spare;
        c->spare         = t;
    }
    failed(c, st, err);
}

static void softcap(struct hearth_context *ctx, int32_t n)
{
    struct vk_ctx *c = vc_of(ctx);
    const int32_t nv = ctx->model->hp.n_vocab;
    char err[256];
    enum hearth_status st = HEARTH_OK;
    for (int32_t i = 0; !st && i * c->chunk_rows < n; i++) {
        const int32_t rn =
            n - i * c->chunk_rows < c->chunk_rows ? n - i * c->chunk_rows : c->chunk_rows;
        st = vk_op_softcap(rec(c), c->logit_buf[i], (uint32_t)(rn * nv),
                           ctx->model->hp.logit_softcap, err, sizeof err);
    }
    failed(c, st, err);
}

static const float *logits(struct hearth_context *ctx, int32_t n)
{
    struct vk_ctx *c = vc_of(ctx);
    const size_t row = (size_t)ctx->model->hp.n_vocab * sizeof(float);
    char err[256];
    enum hearth_status st = HEARTH_OK;
    flush(c);
    for (int32_t i = 0; !st && i * c->chunk_rows < n; i++) {
        const int32_t rn =
            n - i * c->chunk_rows < c->chunk_rows ? n - i * c->chunk_rows : c->chunk_rows;
        st = vk_buf_download(c->logit_buf[i], 0,
                             c->logits + (size_t)i * c->chunk_rows * ctx->model->hp.n_vocab,
                             (size_t)rn * row, err, sizeof err);
    }
    failed(c, st, err);
    /* a failed batch's logits are NaN rather than stale numbers that look valid */
    if (c->failed)
        for (size_t i = 0; i < (size_t)n * ctx->model->hp.n_vocab; i++)
            c->logits[i] = NAN;
    return c->logits;
}

/* clang-format off */
#define TABLE(i)                                                                                   \
    {                                                                                              \
        .name = "vulkan", .kv_host = false, .moe_stacks = true, .kind = BACKEND_VULKAN,            \
        .law = &backend_law_vulkan,                                                                \
        .device_memory = vk_device_memory,                                                         \
        .weight_supported = weight_supported, .moe_supported = moe_supported,                      \
        .layer_supported = layer_supported, .vector_to_f32 = vector_to_f32,                        \
        .weight_prepare = prepare##i, .weight_release = weight_release, .ctx_init = ctx_init,      \
        .ctx_free = ctx_free, .ctx_memory = ctx_memory, .seq_reset = seq_reset,                    \
        .state_len = state_len, .state_load = state_load, .state_save_rows = state_save_rows,      \
        .kv_copy = kv_copy, .batch_begin = batch_begin, .residual_get = residual_get,              \
        .residual_set = residual_set, .embed = embed, .rmsnorm = rmsnorm, .matmul = matmul,        \
        .qkv_store = qkv_store, .attention = attention, .gated_act = gated_act, .add = add,        \
        .moe = moe, .deltanet = deltanet, .gather = gather, .softcap = softcap, .logits = logits,  \
    }
/* clang-format on */

static const struct backend tables[VK_MAX_DEVICES] = {TABLE(0), TABLE(1), TABLE(2), TABLE(3)};

const struct backend *backend_vulkan(int device, char *why, size_t why_len)
{
    struct vk_device_info *info = NULL;
    int n                       = 0;
    enum hearth_status st       = vk_enumerate(&info, &n, why, why_len);
    free(info);
    if (st)
        return NULL;
    if (device < 0 || device >= n) {
        snprintf(why, why_len, "this machine offers %d Vulkan device%s", n, n == 1 ? "" : "s");
        return NULL;
    }
    if (device >= VK_MAX_DEVICES) {
        snprintf(why, why_len, "hearth runs Vulkan devices 0..%d", VK_MAX_DEVICES - 1);
        return NULL;
    }
    return &tables[device];
}
