/*
 * eagle3.c: the EAGLE-3 drafter (eagle3.h). Position P of a slot's cache
 * pairs token P + 1 with g_P, so the last row of each target batch waits
 * for the token after it: its g is held as the slot's pending input
 * (pend), written by the next batch's first row or by the first draft
 * step, which feeds the token the target just sampled. Drafts past it are
 * fed back with the layer's own pre-norm output. A 256-wide layer costs
 * about a tenth of a millisecond a row; the LM head, the target's, is most
 * of a draft's cost.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/capture.h"
#include "model/model.h"
#include "spec/dmath.h"
#include "spec/eagle3.h"
#include "util/errfmt.h"

#define E3_LAYERS 3

struct eagle3 {
    struct gguf_file *f;
    int32_t n_embd, n_head, n_kv, head_dim, n_ff, n_vocab;
    float eps, rope_base;
    int32_t layers[E3_LAYERS]; /* the target layers whose inputs are fused */
    struct weight fc;          /* (3 n_embd -> n_embd) */
    struct weight wq, wk, wv;  /* (2 n_embd -> n_head / n_kv heads) */
    struct weight wo, w_gate, w_up, w_down;
    float *attn_norm, *hidden_norm, *ffn_norm, *out_norm; /* (n_embd) owned */
    const struct weight *embd, *out;                      /* the target's */
    const struct hearth_context *tctx;
    int32_t n_slots, n_ctx, n_batch;
    size_t kv_row;    /* n_kv * head_dim */
    float *k, *v;     /* [n_slots][n_ctx][kv_row] */
    int32_t *len;     /* [n_slots] positions the cache holds */
    float *pend;      /* [n_slots][n_embd] g at pend_pos, waiting for its token */
    int32_t *pend_at; /* [n_slots] its position, -1: none */
    float *gb;        /* [n_batch][n_embd] g of each row of the last target batch */
    int32_t *v_row0, *v_pos0, *v_n, *v_prev; /* [n_slots] the slot's rows in that batch */
    float *feat, *x, *cat, *q, *att, *h, *hb, *hb2, *xn, *logits, *tmp; /* one row's scratch */
    void *qa;
};

static enum hearth_status e3_hparams(struct gguf_file *f, struct eagle3 *e, char *err,
                                     size_t err_len)
{
    char arch[32] = "";
    gguf_get_str(f, "general.architecture", arch, sizeof arch);
    if (strcmp(arch, "eagle3"))
        return fail(HEARTH_EINVAL, err, err_len,
                    "--spec eagle3 takes an EAGLE-3 drafter (architecture eagle3), and this file "
                    "is '%s'",
                    arch);
    uint32_t n_embd = 0, n_head = 0, n_kv = 0, hd = 0, n_ff = 0, n_layer = 0, tgt = 0;
    dm_u32(f, arch, "embedding_length", &n_embd);
    dm_u32(f, arch, "attention.head_count", &n_head);
    dm_u32(f, arch, "attention.head_count_kv", &n_kv);
    dm_u32(f, arch, "feed_forward_length", &n_ff);
    dm_u32(f, arch, "block_count", &n_layer);
    dm_u32(f, arch, "target_hidden_size", &tgt);
    if (!dm_u32(f, arch, "attention.key_length", &hd) && n_head)
        hd = n_embd / n_head;
    char k[96];
    float v = 1e-6f;
    snprintf(k, sizeof k, "%s.attention.layer_norm_rms_epsilon", arch);
    gguf_get_f32(f, k, &v);
    e->eps = v;
    v      = 10000.0f;
    snprintf(k, sizeof k, "%s.rope.freq_base", arch);
    gguf_get_f32(f, k, &v);
    e->rope_base = v;
    if (!n_embd || !n_head || !n_kv || n_head % n_kv || !hd || hd % 2 || !n_ff || n_layer != 1 ||
        (tgt && tgt != n_embd))
        return fail(HEARTH_EFORMAT, err, err_len,
                    "eagle3: a drafter of one layer with width, heads and FFN set (and the "
                    "target's width equal to its own) is expected; this one has %u layers, width "
                    "%u, target width %u",
                    n_layer, n_embd, tgt);
    if (dm_u32s(f, arch, "target_layers", e->layers, E3_LAYERS) != E3_LAYERS)
        return fail(HEARTH_EFORMAT, err, err_len,
                    "eagle3: the file names not exactly %d target layers (eagle3.target_layers)",
                    E3_LAYERS);
    e->n_embd   = (int32_t)n_embd;
    e->n_head   = (int32_t)n_head;
    e->n_kv     = (int32_t)n_kv;
    e->head_dim = (int32_t)hd;
    e->n_ff     = (int32_t)n_ff;
    return HEARTH_OK;
}

static enum hearth_status e3_tensors(struct eagle3 *e, char *err, size_t err_len)
{
    const struct gguf_file *f = e->f;
    const int64_t d = e->n_embd, qd = (int64_t)e->n_head * e->head_dim,
                  kvd = (int64_t)e->n_kv * e->head_dim, ff = e->n_ff;
    if (gguf_find_tensor(f, "d2t") || gguf_find_tensor(f, "token_embd.weight") ||
        gguf_find_tensor(f, "output.weight"))
        return fail(HEARTH_EUNSUPPORTED, err, err_len,
                    "eagle3: a drafter with its own vocabulary, embedding or LM head is not "
                    "supported; hearth runs those that share the target's");
    enum hearth_status st;
    if ((st = dm_weight(f, "fc.weight", E3_LAYERS * d, d, false, &e->fc, err, err_len)) ||
        (st = dm_weight(f, "blk.0.attn_q.weight", 2 * d, qd, false, &e->wq, err, err_len)) ||
        (st = dm_weight(f, "blk.0.attn_k.weight", 2 * d, kvd, false, &e->wk, err, err_len)) ||
        (st = dm_weight(f, "blk.0.attn_v.weight", 2 * d, kvd, false, &e->wv, err, err_len)) ||
        (st = dm_weight(f, "blk.0.attn_output.weight", qd, d, false, &e->wo, err, err_len)) ||
        (st = dm_weight(f, "blk.0.ffn_gate.weight", d, ff, false, &e->w_gate, err, err_len)) ||
        (st = dm_weight(f, "blk.0.ffn_up.weight", d, ff, false, &e->w_up, err, err_len)) ||
        (st = dm_weight(f, "blk.0.ffn_down.weight", ff, d, false, &e->w_down, err, err_len)) ||
        (st = dm_vector(f, "blk.0.attn_norm.weight", d, false, &e->attn_norm, err, err_len)) ||
        (st = dm_vector(f, "blk.0.attn_norm_2.weight", d, false, &e->hidden_norm, err, err_len)) ||
        (st = dm_vector(f, "blk.0.ffn_norm.weight", d, false, &e->ffn_norm, err, err_len)) ||
        (st = dm_vector(f, "output_norm.weight", d, false, &e->out_norm, err, err_len)))
        return st;
    return HEARTH_OK;
}

static size_t kv_floats(const struct eagle3 *e)
{
    return (size_t)e->n_slots * e->n_ctx * e->kv_row;
}

enum hearth_status eagle3_open(const char *path, const struct hearth_model *target,
                               struct hearth_context *tctx, int32_t n_slots, int32_t n_ctx,
                               int32_t n_batch, struct eagle3 **out, char *err, size_t err_len)
{
    *out             = NULL;
    struct eagle3 *e = calloc(1, sizeof *e);
    if (!e)
        return fail(HEARTH_ENOMEM, err, err_len, "eagle3: out of memory");
    enum hearth_status st = gguf_open(path, &e->f, err, err_len);
    if (st || (st = e3_hparams(e->f, e, err, err_len)) || (st = e3_tensors(e, err, err_len)))
        goto fail;
    if (target->hp.n_embd != e->n_embd || target->tok_embd.n_in != e->n_embd ||
        !target->output.data) {
        st = fail(HEARTH_EINVAL, err, err_len,
                  "eagle3: the drafter is %d wide and reads the target's embedding and LM head, "
                  "and the target is %d wide",
                  e->n_embd, target->hp.n_embd);
        goto fail;
    }
    if ((st = capture_layers(tctx, e->layers, E3_LAYERS, err, err_len)))
        goto fail;
    e->tctx        = tctx;
    e->embd        = &target->tok_embd;
    e->out         = &target->output;
    e->n_vocab     = target->hp.n_vocab;
    e->n_slots     = n_slots;
    e->n_ctx       = n_ctx;
    e->n_batch     = n_batch;
    e->kv_row      = (size_t)e->n_kv * e->head_dim;
    const size_t d = (size_t)e->n_embd, qd = (size_t)e->n_head * e->head_dim, ns = (size_t)n_slots,
                 ff = (size_t)e->n_ff;
    e->k            = calloc(kv_floats(e), sizeof(float));
    e->v            = calloc(kv_floats(e), sizeof(float));
    e->len          = calloc(ns, sizeof *e->len);
    e->pend         = calloc(ns * d, sizeof *e->pend);
    e->pend_at      = malloc(ns * sizeof *e->pend_at);
    e->gb           = calloc((size_t)n_batch * d, sizeof *e->gb);
    e->v_row0       = calloc(ns, sizeof(int32_t));
    e->v_pos0       = calloc(ns, sizeof(int32_t));
    e->v_n          = calloc(ns, sizeof(int32_t));
    e->v_prev       = calloc(ns, sizeof(int32_t));
    e->feat         = calloc(E3_LAYERS * d, sizeof(float));
    e->x            = calloc(d, sizeof(float));
    e->cat          = calloc(2 * d, sizeof(float));
    e->q            = calloc(qd + 2 * e->kv_row, sizeof(float));
    e->att          = calloc(qd, sizeof(float));
    e->h            = calloc(d, sizeof(float));
    e->hb           = calloc(ff, sizeof(float));
    e->hb2          = calloc(ff, sizeof(float));
    e->xn           = calloc(d, sizeof(float));
    e->tmp          = calloc(d, sizeof(float));
    e->logits       = calloc((size_t)e->n_vocab, sizeof(float));
    e->qa           = malloc(dm_scratch_len(E3_LAYERS * d > ff ? E3_LAYERS * d : ff));
    if (!e->k || !e->v || !e->len || !e->pend || !e->pend_at || !e->gb || !e->v_row0 ||
        !e->v_pos0 || !e->v_n || !e->v_prev || !e->feat || !e->x || !e->cat || !e->q || !e->att ||
        !e->h || !e->hb || !e->hb2 || !e->xn || !e->tmp || !e->logits || !e->qa) {
        st = fail(HEARTH_ENOMEM, err, err_len,
                  "eagle3: out of memory for a cache of %d slots x %d positions", n_slots, n_ctx);
        goto fail;
    }
    for (int32_t s = 0; s < n_slots; s++)
        e->pend_at[s] = -1;
    *out = e;
    return HEARTH_OK;
fail:
    eagle3_free(e);
    return st;
}

void eagle3_free(struct eagle3 *e)
{
    if (!e)
        return;
    free(e->attn_norm);
    free(e->hidden_norm);
    free(e->ffn_norm);
    free(e->out_norm);
    free(e->k);
    free(e->v);
    free(e->len);
    free(e->pend);
    free(e->pend_at);
    free(e->gb);
    free(e->v_row0);
    free(e->v_pos0);
    free(e->v_n);
    free(e->v_prev);
    free(e->feat);
    free(e->x);
    free(e->cat);
    free(e->q);
    free(e->att);
    free(e->h);
    free(e->hb);
    free(e->hb2);
    free(e->xn);
    free(e->tmp);
    free(e->logits);
    free(e->qa);
    gguf_close(e->f);
    free(e);
}

/*
 * One row of the layer: token tok at position pos (== len[s]) of slot s
 * with feature g (NULL: zeros). Leaves the pre-norm output in e->h and,
 * with logits, the target-vocabulary logits in e->logits.
 */
static void e3_step(struct eagle3 *e, int32_t s, hearth_token tok, int32_t pos, const float *g,
                    bool logits)
{
    const int32_t d = e->n_embd;
    const size_t qd = (size_t)e->n_head * e->head_dim;
    float *gin      = e->tmp;
    if (g)
        memcpy(gin, g, (size_t)d * sizeof *gin);
    else
        memset(gin, 0, (size_t)d * sizeof *gin);
    dm_row(e->embd, tok, e->x);
    dm_rmsnorm(e->cat, e->x, e->attn_norm, d, e->eps);
    dm_rmsnorm(e->cat + d, gin, e->hidden_norm, d, e->eps);
    float *q = e->q, *k = e->q + qd, *v = k + e->kv_row;
    dm_matvec(&e->wq, e->cat, q, e->qa);
    dm_matvec(&e->wk, e->cat, k, e->qa);
    dm_matvec(&e->wv, e->cat, v, e->qa);
    dm_rope(q, e->n_head, e->head_dim, e->rope_base, false, pos);
    dm_rope(k, e->n_kv, e->head_dim, e->rope_base, false, pos);
    const size_t base = ((size_t)s * e->n_ctx + pos) * e->kv_row;
    memcpy(e->k + base, k, e->kv_row * sizeof(float));
    memcpy(e->v + base, v, e->kv_row * sizeof(float));
    e->len[s]              = pos + 1;
    const size_t at0       = (size_t)s * e->n_ctx * e->kv_row;
    const struct dm_kv seg = {e->k + at0, e->v + at0, pos + 1};
    dm_attend(q, &seg, 1, e->kv_row, e->n_head, e->n_kv, e->head_dim, e->att);
    dm_matvec(&e->wo, e->att, e->h, e->qa);
    /* the residual is the raw g, not its norm (llama's norm_before_residual off) */
    for (int32_t i = 0; i < d; i++)
        e->h[i] += gin[i];
    dm_rmsnorm(e->xn, e->h, e->ffn_norm, d, e->eps);
    dm_matvec(&e->w_gate, e->xn, e->hb, e->qa);
    dm_matvec(&e->w_up, e->xn, e->hb2, e->qa);
    dm_silu_mul(e->hb, e->hb, e->hb2, e->n_ff);
    dm_matvec(&e->w_down, e->hb, e->xn, e->qa);
    for (int32_t i = 0; i < d; i++)
        e->h[i] += e->xn[i];
    if (!logits)
        return;
    dm_rmsnorm(e->xn, e->h, e->out_norm, d, e->eps);
    dm_matvec(e->out, e->xn, e->logits, e->qa);
}

/* g of target batch row i: fc over the three captured layer inputs. */
static void e3_fuse(struct eagle3 *e, int32_t i, float *g)
{
    const size_t d = (size_t)e->n_embd;
    for (int32_t k = 0; k < E3_LAYERS; k++) {
        const float *r = capture_row(e->tctx, k, i);
        if (r)
            memcpy(e->feat + k * d, r, d * sizeof *r);
        else
            memset(e->feat + k * d, 0, d * sizeof(float));
    }
    dm_matvec(&e->fc, e->feat, g, e->qa);
}

static void e3_cut(struct eagle3 *e, int32_t s, int32_t n)
{
    if (e->len[s] > n)
        e->len[s] = n;
}

void eagle3_observe(struct eagle3 *e, const struct hearth_batch *b,
                    const hearth_token *const *slot_tokens)
{
    const size_t d = (size_t)e->n_embd;
    for (int32_t s = 0; s < e->n_slots; s++)
        e->v_n[s] = 0;
    for (int32_t i = 0; i < b->n; i++) {
        const int32_t s = b->seq[i];
        if (e->v_n[s]++ == 0) {
            e->v_row0[s] = i;
            e->v_pos0[s] = b->pos[i];
            e->v_prev[s] = -1;
        }
        e3_fuse(e, i, e->gb + (size_t)i * d);
    }
    /* each slot continues at the batch's first position: what it drafted there goes, and the
     * positions before it it missed (a reused prefix) take zero features, the last of them
     * the pending g when it is that position's */
    for (int32_t s = 0; s < e->n_slots; s++) {
        if (e->v_n[s] == 0)
            continue;
        const int32_t p0 = e->v_pos0[s];
        if (p0 > e->n_ctx)
            continue;
        e3_cut(e, s, p0);
        for (int32_t p = e->len[s]; p < p0; p++) {
            const float *g = e->pend_at[s] == p ? e->pend + (size_t)s * d : NULL;
            e3_step(e, s, slot_tokens[s][p + 1], p, g, false);
        }
    }
    for (int32_t i = 0; i < b->n; i++) {
        const int32_t s = b->seq[i], j = e->v_prev[s];
        if (j >= 0 && b->pos[j] == e->len[s] && b->pos[j] < e->n_ctx)
            e3_step(e, s, b->token[i], b->pos[j], e->gb + (size_t)j * d, false);
        e->v_prev[s] = i;
    }
    for (int32_t s = 0; s < e->n_slots; s++) {
        if (e->v_n[s] == 0)
            continue;
        const int32_t j = e->v_prev[s];
        e->pend_at[s]   = b->pos[j];
        memcpy(e->pend + (size_t)s * d, e->gb + (size_t)j * d, d * sizeof(float));
    }
}

void eagle3_rewind(struct eagle3 *e, int32_t slot, int32_t n_keep)
{
    if (slot < 0 || slot >= e->n_slots)
        return;
    if (n_keep <= 0) {
        e->len[slot]     = 0;
        e->pend_at[slot] = -1;
        return;
    }
    e3_cut(e, slot, n_keep - 1);
    /* the pending g is the last kept position's, a row of the last batch */
    const int32_t j  = n_keep - 1 - e->v_pos0[slot];
    e->pend_at[slot] = -1;
    if (j >= 0 && j < e->v_n[slot]) {
        const size_t d = (size_t)e->n_embd;
        memcpy(e->pend + (size_t)slot * d, e->gb + (size_t)(e->v_row0[slot] + j) * d,
               d * sizeof(float));
        e->pend_at[slot] = n_keep - 1;
    }
}

int32_t eagle3_propose(struct eagle3 *e, int32_t slot, const hearth_token *tokens, int32_t n_tokens,
                       int32_t k, hearth_token *out)
{
    const int32_t p = n_tokens - 2;
    if (p < 0 || e->pend_at[slot] != p)
        return 0; /* the target has not been seen at the position before the last token */
    e3_cut(e, slot, p);
    if (e->len[slot] != p)
        return 0;
    const size_t d = (size_t)e->n_embd;
    int32_t n      = 0;
    e3_step(e, slot, tokens[n_tokens - 1], p, e->pend + (size_t)slot * d, true);
    while (n < k) {
        out[n++] = dm_argmax(e->logits, e->n_vocab);
        if (n == k || p + n >= e->n_ctx)
            break;
        /* e->h is fed back as g: e3_step copies it before it is overwritten */
        e3_step(e, slot, out[n - 1], p + n, e->h, true);
    }
    return n;
}

enum hearth_status eagle3_bytes(const char *path, int32_t n_slots, int32_t n_ctx, int32_t n_batch,
                                uint64_t *weights, uint64_t *buffers, char *err, size_t err_len)
{
    struct eagle3 e = {0};
    enum hearth_status st;
    if ((st = gguf_open(path, &e.f, err, err_len)))
        return st;
    if (!(st = e3_hparams(e.f, &e, err, err_len))) {
        uint64_t w = 0;
        for (int64_t i = 0; i < gguf_n_tensors(e.f); i++)
            w += gguf_tensor(e.f, i)->size;
        const uint64_t d = (uint64_t)e.n_embd, kvr = (uint64_t)e.n_kv * e.head_dim;
        *weights = w;
        *buffers = 2 * (uint64_t)n_slots * n_ctx * kvr * sizeof(float) +
                   ((uint64_t)n_slots + n_batch) * d * sizeof(float) +
                   3 * (uint64_t)n_batch * d * sizeof(float); /* the target's captured rows */
    }
    gguf_close(e.f);
    return st;
}
