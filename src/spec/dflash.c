/*
 * dflash.c: the DFlash block drafter (dflash.h). Its cache is written only
 * from the target (position P of a slot holds each layer's K/V of g_P); a
 * draft block's own K/V live in scratch for the one pass, so nothing of a
 * draft is left to cut. Cost per draft: the block's rows through each
 * layer (16 rows at most) and k rows of the target's LM head.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/capture.h"
#include "model/model.h"
#include "spec/dflash.h"
#include "spec/dmath.h"
#include "util/errfmt.h"

#define DF_LAYERS  8 /* the most drafter layers */
#define DF_TARGETS 8 /* the most target layers fused */
#define DF_BLOCK   64

struct df_layer {
    struct weight wq, wk, wv, wo;       /* (n_embd -> heads), (heads -> n_embd) */
    struct weight w_gate, w_up, w_down; /* the SwiGLU FFN */
    float *attn_norm, *ffn_norm;        /* (n_embd) owned */
    float *q_norm, *k_norm;             /* (head_dim) owned */
};

struct dflash {
    struct gguf_file *f;
    int32_t n_embd, n_head, n_kv, head_dim, n_ff, n_layer, n_vocab;
    int32_t n_targets, targets[DF_TARGETS]; /* the target layers whose inputs are fused */
    int32_t block;                          /* trained block: the last token and block - 1 masks */
    int32_t n_rows;                         /* rows of each draft pass, 2..block */
    hearth_token mask;                      /* the mask token */
    float eps, rope_base;
    struct weight fc;           /* (n_targets n_embd -> n_embd) */
    float *enc_norm, *out_norm; /* (n_embd) owned */
    struct df_layer L[DF_LAYERS];
    const struct weight *embd, *out; /* the target's */
    const struct hearth_context *tctx;
    int32_t n_slots, n_ctx;
    size_t kv_row; /* n_kv * head_dim */
    float *k, *v;  /* [n_layer][n_slots][n_ctx][kv_row] */
    int32_t *len;  /* [n_slots] positions the cache holds */
    /* one block's scratch */
    float *x, *xn;          /* [block][n_embd] */
    float *q, *att;         /* [block][n_head * head_dim] */
    float *bk, *bv;         /* [block][kv_row] */
    float *hb, *hb2, *feat; /* [n_ff], [n_ff], [n_targets * n_embd] */
    float *g, *logits;      /* [n_embd], [n_vocab] */
    void *qa;
};

static enum hearth_status df_hparams(struct gguf_file *f, struct dflash *d, char *err,
                                     size_t err_len)
{
    char arch[32] = "";
    gguf_get_str(f, "general.architecture", arch, sizeof arch);
    if (strcmp(arch, "dflash"))
        return fail(HEARTH_EINVAL, err, err_len,
                    "--spec dflash takes a DFlash drafter (architecture dflash), and this file is "
                    "'%s'",
                    arch);
    uint32_t n_embd = 0, n_head = 0, n_kv = 0, hd = 0, n_ff = 0, n_layer = 0, block = 16, mask = 0,
             hc = 0;
    dm_u32(f, arch, "embedding_length", &n_embd);
    dm_u32(f, arch, "attention.head_count", &n_head);
    dm_u32(f, arch, "attention.head_count_kv", &n_kv);
    dm_u32(f, arch, "feed_forward_length", &n_ff);
    dm_u32(f, arch, "block_count", &n_layer);
    dm_u32(f, arch, "block_size", &block);
    if (!dm_u32(f, arch, "attention.key_length", &hd) && n_head)
        hd = n_embd / n_head;
    uint32_t swa = 0;
    if (dm_u32(f, arch, "hyper_connection_count", &hc) ||
        (dm_u32(f, arch, "attention.sliding_window", &swa) && swa > 0))
        return fail(HEARTH_EUNSUPPORTED, err, err_len,
                    "dflash: a drafter with hyper-connections (DSpark) or sliding-window layers "
                    "is not supported; hearth runs the Qwen3-style DFlash blocks");
    if (!gguf_get_u32(f, "tokenizer.ggml.mask_token_id", &mask))
        return fail(HEARTH_EFORMAT, err, err_len,
                    "dflash: the file names no mask token (tokenizer.ggml.mask_token_id)");
    char k[96];
    float v = 1e-6f;
    snprintf(k, sizeof k, "%s.attention.layer_norm_rms_epsilon", arch);
    gguf_get_f32(f, k, &v);
    d->eps = v;
    v      = 10000.0f;
    snprintf(k, sizeof k, "%s.rope.freq_base", arch);
    gguf_get_f32(f, k, &v);
    d->rope_base = v;
    if (!n_embd || !n_head || !n_kv || n_head % n_kv || !hd || hd % 2 || !n_ff || !n_layer ||
        n_layer > DF_LAYERS || block < 2 || block > DF_BLOCK)
        return fail(HEARTH_EFORMAT, err, err_len,
                    "dflash: a drafter of 1..%d layers with width, heads and FFN set and a block "
                    "of 2..%d is expected; this one has %u layers, width %u, block %u",
                    DF_LAYERS, DF_BLOCK, n_layer, n_embd, block);
    d->n_targets = dm_u32s(f, arch, "target_layers", d->targets, DF_TARGETS);
    if (d->n_targets < 1)
        return fail(HEARTH_EFORMAT, err, err_len,
                    "dflash: the file names no target layers (dflash.target_layers, 1..%d)",
                    DF_TARGETS);
    d->n_embd   = (int32_t)n_embd;
    d->n_head   = (int32_t)n_head;
    d->n_kv     = (int32_t)n_kv;
    d->head_dim = (int32_t)hd;
    d->n_ff     = (int32_t)n_ff;
    d->n_layer  = (int32_t)n_layer;
    d->block    = (int32_t)block;
    d->mask     = (hearth_token)mask;
    return HEARTH_OK;
}

static enum hearth_status df_tensors(struct dflash *d, char *err, size_t err_len)
{
    const struct gguf_file *f = d->f;
    const int64_t e = d->n_embd, qd = (int64_t)d->n_head * d->head_dim,
                  kvd = (int64_t)d->n_kv * d->head_dim, ff = d->n_ff, hd = d->head_dim;
    if (gguf_find_tensor(f, "d2t") || gguf_find_tensor(f, "token_embd.weight") ||
        gguf_find_tensor(f, "output.weight") || gguf_find_tensor(f, "fc.scale") ||
        gguf_find_tensor(f, "markov_w1.weight"))
        return fail(HEARTH_EUNSUPPORTED, err, err_len,
                    "dflash: a drafter with its own vocabulary, embedding, LM head, scales or "
                    "Markov head is not supported; hearth runs those that share the target's");
    enum hearth_status st;
    if ((st = dm_weight(f, "fc.weight", d->n_targets * e, e, false, &d->fc, err, err_len)) ||
        (st = dm_vector(f, "enc.output_norm.weight", e, false, &d->enc_norm, err, err_len)) ||
        (st = dm_vector(f, "output_norm.weight", e, false, &d->out_norm, err, err_len)))
        return st;
    for (int32_t l = 0; l < d->n_layer; l++) {
        struct df_layer *L = &d->L[l];
        char n[11][64];
        static const char *const names[11] = {
            "attn_q",   "attn_k",    "attn_v",   "attn_output", "ffn_gate",   "ffn_up",
            "ffn_down", "attn_norm", "ffn_norm", "attn_q_norm", "attn_k_norm"};
        for (int i = 0; i < 11; i++)
            snprintf(n[i], sizeof n[i], "blk.%d.%s.weight", l, names[i]);
        if ((st = dm_weight(f, n[0], e, qd, false, &L->wq, err, err_len)) ||
            (st = dm_weight(f, n[1], e, kvd, false, &L->wk, err, err_len)) ||
            (st = dm_weight(f, n[2], e, kvd, false, &L->wv, err, err_len)) ||
            (st = dm_weight(f, n[3], qd, e, false, &L->wo, err, err_len)) ||
            (st = dm_weight(f, n[4], e, ff, false, &L->w_gate, err, err_len)) ||
            (st = dm_weight(f, n[5], e, ff, false, &L->w_up, err, err_len)) ||
            (st = dm_weight(f, n[6], ff, e, false, &L->w_down, err, err_len)) ||
            (st = dm_vector(f, n[7], e, false, &L->attn_norm, err, err_len)) ||
            (st = dm_vector(f, n[8], e, false, &L->ffn_norm, err, err_len)) ||
            (st = dm_vector(f, n[9], hd, false, &L->q_norm, err, err_len)) ||
            (st = dm_vector(f, n[10], hd, false, &L->k_norm, err, err_len)))
            return st;
    }
    return HEARTH_OK;
}

static size_t kv_floats(const struct dflash *d)
{
    return (size_t)d->n_layer * d->n_slots * d->n_ctx * d->kv_row;
}

enum hearth_status dflash_open(const char *path, const struct hearth_model *target,
                               struct hearth_context *tctx, int32_t n_slots, int32_t n_ctx,
                               int32_t n_batch, int32_t n_draft, struct dflash **out, char *err,
                               size_t err_len)
{
    *out             = NULL;
    struct dflash *d = calloc(1, sizeof *d);
    if (!d)
        return fail(HEARTH_ENOMEM, err, err_len, "dflash: out of memory");
    enum hearth_status st = gguf_open(path, &d->f, err, err_len);
    if (st || (st = df_hparams(d->f, d, err, err_len)) || (st = df_tensors(d, err, err_len)))
        goto fail;
    if (target->hp.n_embd != d->n_embd || target->tok_embd.n_in != d->n_embd ||
        !target->output.data || d->mask < 0 || d->mask >= target->hp.n_vocab) {
        st = fail(HEARTH_EINVAL, err, err_len,
                  "dflash: the drafter is %d wide with mask token %d and reads the target's "
                  "embedding and LM head, and the target is %d wide with %d tokens",
                  d->n_embd, d->mask, target->hp.n_embd, target->hp.n_vocab);
        goto fail;
    }
    if ((st = capture_layers(tctx, d->targets, d->n_targets, err, err_len)))
        goto fail;
    d->tctx        = tctx;
    d->embd        = &target->tok_embd;
    d->out         = &target->output;
    d->n_vocab     = target->hp.n_vocab;
    d->n_slots     = n_slots;
    d->n_ctx       = n_ctx;
    d->kv_row      = (size_t)d->n_kv * d->head_dim;
    d->n_rows      = 1 + (n_draft < 1 ? 1 : n_draft > d->block - 1 ? d->block - 1 : n_draft);
    const size_t e = (size_t)d->n_embd, qd = (size_t)d->n_head * d->head_dim, B = (size_t)d->block,
                 ff  = (size_t)d->n_ff;
    const size_t win = (size_t)d->n_targets * e > ff ? (size_t)d->n_targets * e : ff;
    d->k             = calloc(kv_floats(d), sizeof(float));
    d->v             = calloc(kv_floats(d), sizeof(float));
    d->len           = calloc((size_t)n_slots, sizeof *d->len);
    d->x             = calloc(B * e, sizeof(float));
    d->xn            = calloc(B * e, sizeof(float));
    d->q             = calloc(B * qd, sizeof(float));
    d->att           = calloc(B * qd, sizeof(float));
    d->bk            = calloc(B * d->kv_row, sizeof(float));
    d->bv            = calloc(B * d->kv_row, sizeof(float));
    d->hb            = calloc(ff, sizeof(float));
    d->hb2           = calloc(ff, sizeof(float));
    d->feat          = calloc((size_t)d->n_targets * e, sizeof(float));
    d->g             = calloc(e, sizeof(float));
    d->logits        = calloc((size_t)d->n_vocab, sizeof(float));
    d->qa            = malloc(dm_scratch_len((int64_t)win));
    (void)n_batch;
    if (!d->k || !d->v || !d->len || !d->x || !d->xn || !d->q || !d->att || !d->bk || !d->bv ||
        !d->hb || !d->hb2 || !d->feat || !d->g || !d->logits || !d->qa) {
        st = fail(HEARTH_ENOMEM, err, err_len,
                  "dflash: out of memory for a cache of %d layers x %d slots x %d positions",
                  d->n_layer, n_slots, n_ctx);
        goto fail;
    }
    *out = d;
    return HEARTH_OK;
fail:
    dflash_free(d);
    return st;
}

void dflash_free(struct dflash *d)
{
    if (!d)
        return;
    for (int32_t l = 0; l < DF_LAYERS; l++) {
        free(d->L[l].attn_norm);
        free(d->L[l].ffn_norm);
        free(d->L[l].q_norm);
        free(d->L[l].k_norm);
    }
    free(d->enc_norm);
    free(d->out_norm);
    free(d->k);
    free(d->v);
    free(d->len);
    free(d->x);
    free(d->xn);
    free(d->q);
    free(d->att);
    free(d->bk);
    free(d->bv);
    free(d->hb);
    free(d->hb2);
    free(d->feat);
    free(d->g);
    free(d->logits);
    free(d->qa);
    gguf_close(d->f);
    free(d);
}

static float *kv_at(const struct dflash *d, float *base, int32_t l, int32_t s, int32_t pos)
{
    return base + (((size_t)l * d->n_slots + s) * d->n_ctx + pos) * d->kv_row;
}

/* Each head of x (n heads of head_dim) RMS-normed with weight w. */
static void head_norm(const struct dflash *d, float *x, int32_t n, const float *w)
{
    for (int32_t h = 0; h < n; h++)
        dm_rmsnorm(x + (size_t)h * d->head_dim, x + (size_t)h * d->head_dim, w, d->head_dim,
                   d->eps);
}

/* Position pos of slot s from target feature g (NULL: zeros, a position the drafter missed). */
static void df_inject(struct dflash *d, int32_t s, int32_t pos, const float *g)
{
    for (int32_t l = 0; l < d->n_layer; l++) {
        float *k = kv_at(d, d->k, l, s, pos), *v = kv_at(d, d->v, l, s, pos);
        if (!g) {
            memset(k, 0, d->kv_row * sizeof *k);
            memset(v, 0, d->kv_row * sizeof *v);
            continue;
        }
        dm_matvec(&d->L[l].wk, g, k, d->qa);
        dm_matvec(&d->L[l].wv, g, v, d->qa);
        head_norm(d, k, d->n_kv, d->L[l].k_norm);
        dm_rope(k, d->n_kv, d->head_dim, d->rope_base, true, pos);
    }
    d->len[s] = pos + 1;
}

void dflash_observe(struct dflash *d, const struct hearth_batch *b)
{
    const size_t e = (size_t)d->n_embd;
    int32_t seen[d->n_slots];
    memset(seen, 0, sizeof seen);
    for (int32_t i = 0; i < b->n; i++) {
        const int32_t s = b->seq[i], pos = b->pos[i];
        if (pos >= d->n_ctx)
            continue;
        if (!seen[s]++) { /* the batch's first row of the slot: what follows it goes */
            if (d->len[s] > pos)
                d->len[s] = pos;
            while (d->len[s] < pos)
                df_inject(d, s, d->len[s], NULL);
        }
        if (d->len[s] != pos)
            continue;
        for (int32_t k = 0; k < d->n_targets; k++) {
            const float *r = capture_row(d->tctx, k, i);
            if (r)
                memcpy(d->feat + k * e, r, e * sizeof *r);
            else
                memset(d->feat + k * e, 0, e * sizeof(float));
        }
        dm_matvec(&d->fc, d->feat, d->g, d->qa);
        dm_rmsnorm(d->g, d->g, d->enc_norm, d->n_embd, d->eps);
        df_inject(d, s, pos, d->g);
    }
}

void dflash_rewind(struct dflash *d, int32_t slot, int32_t n_keep)
{
    if (slot >= 0 && slot < d->n_slots && d->len[slot] > n_keep)
        d->len[slot] = n_keep < 0 ? 0 : n_keep;
}

int32_t dflash_propose(struct dflash *d, int32_t slot, const hearth_token *tokens, int32_t n_tokens,
                       int32_t k, hearth_token *out)
{
    const int32_t p0 = n_tokens - 1; /* the last token's position, the block's first */
    if (p0 < 1)
        return 0;
    if (d->len[slot] > p0)
        d->len[slot] = p0;
    if (d->len[slot] != p0)
        return 0; /* the target has not been seen up to the last token */
    if (k > d->n_rows - 1)
        k = d->n_rows - 1;
    if (k > d->n_ctx - 1 - p0)
        k = d->n_ctx - 1 - p0;
    if (k < 1)
        return 0;
    /* the same block every step, however few drafts the depth asks: every row sees every
     * other, so fewer masks would change the first drafts (llama.cpp's block is n_max + 1) */
    const int32_t B = d->n_ctx - p0 < d->n_rows ? d->n_ctx - p0 : d->n_rows;
    const size_t e = (size_t)d->n_embd, qd = (size_t)d->n_head * d->head_dim, kvr = d->kv_row;
    for (int32_t i = 0; i < B; i++)
        dm_row(d->embd, i == 0 ? tokens[n_tokens - 1] : d->mask, d->x + i * e);
    for (int32_t l = 0; l < d->n_layer; l++) {
        const struct df_layer *L = &d->L[l];
        for (int32_t i = 0; i < B; i++) {
            float *xn = d->xn + i * e, *q = d->q + i * qd, *k_ = d->bk + i * kvr,
                  *v = d->bv + i * kvr;
            dm_rmsnorm(xn, d->x + i * e, L->attn_norm, d->n_embd, d->eps);
            dm_matvec(&L->wq, xn, q, d->qa);
            dm_matvec(&L->wk, xn, k_, d->qa);
            dm_matvec(&L->wv, xn, v, d->qa);
            head_norm(d, q, d->n_head, L->q_norm);
            head_norm(d, k_, d->n_kv, L->k_norm);
            dm_rope(q, d->n_head, d->head_dim, d->rope_base, true, p0 + i);
            dm_rope(k_, d->n_kv, d->head_dim, d->rope_base, true, p0 + i);
        }
        /* not causal: every row of the block sees the target's positions and the whole block */
        const struct dm_kv seg[2] = {
            {kv_at(d, d->k, l, slot, 0), kv_at(d, d->v, l, slot, 0), p0},
            {d->bk, d->bv, B},
        };
        for (int32_t i = 0; i < B; i++)
            dm_attend(d->q + i * qd, seg, 2, kvr, d->n_head, d->n_kv, d->head_dim, d->att + i * qd);
        for (int32_t i = 0; i < B; i++) {
            float *x = d->x + i * e, *xn = d->xn + i * e;
            dm_matvec(&L->wo, d->att + i * qd, xn, d->qa);
            for (size_t j = 0; j < e; j++)
                x[j] += xn[j];
            dm_rmsnorm(xn, x, L->ffn_norm, d->n_embd, d->eps);
            dm_matvec(&L->w_gate, xn, d->hb, d->qa);
            dm_matvec(&L->w_up, xn, d->hb2, d->qa);
            dm_silu_mul(d->hb, d->hb, d->hb2, d->n_ff);
            dm_matvec(&L->w_down, d->hb, xn, d->qa);
            for (size_t j = 0; j < e; j++)
                x[j] += xn[j];
        }
    }
    for (int32_t i = 1; i <= k; i++) {
        dm_rmsnorm(d->xn, d->x + i * e, d->out_norm, d->n_embd, d->eps);
        dm_matvec(d->out, d->xn, d->logits, d->qa);
        out[i - 1] = dm_argmax(d->logits, d->n_vocab);
    }
    return k;
}

enum hearth_status dflash_bytes(const char *path, int32_t n_slots, int32_t n_ctx, int32_t n_batch,
                                uint64_t *weights, uint64_t *buffers, char *err, size_t err_len)
{
    struct dflash d = {0};
    enum hearth_status st;
    if ((st = gguf_open(path, &d.f, err, err_len)))
        return st;
    if (!(st = df_hparams(d.f, &d, err, err_len))) {
        uint64_t w = 0;
        for (int64_t i = 0; i < gguf_n_tensors(d.f); i++)
            w += gguf_tensor(d.f, i)->size;
        const uint64_t kvr = (uint64_t)d.n_kv * d.head_dim, e = (uint64_t)d.n_embd;
        *weights = w;
        *buffers = 2 * (uint64_t)d.n_layer * n_slots * n_ctx * kvr * sizeof(float) +
                   (uint64_t)d.n_targets * n_batch * e * sizeof(float); /* the captured rows */
    }
    gguf_close(d.f);
    return st;
}
