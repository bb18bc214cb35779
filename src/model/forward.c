/*
 * forward.c: the model's graph over one micro-batch (which operations run
 * in which order, per architecture), and the context that owns the KV
 * cache. Every operation goes through the backend of the stage that holds
 * its layer (src/backend/backend.h, src/model/stages.h); what stays here
 * runs on the host: checking a batch, reserving its KV blocks, choosing the
 * rows whose logits are wanted.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/capture.h"
#include "model/kvdisk.h"
#include "model/kvfile.h"
#include "model/memlaw.h"
#include "model/model.h"
#include "model/stages.h"
#include "util/errfmt.h"

static const char *const kv_type_names[] = {"f16", "f32", "q8_0", "q4_0"};

const char *hearth_kv_type_name(enum hearth_kv_type t)
{
    return (unsigned)t < sizeof kv_type_names / sizeof *kv_type_names ? kv_type_names[t] : NULL;
}

bool hearth_kv_type_parse(const char *s, enum hearth_kv_type *out)
{
    for (unsigned i = 0; i < sizeof kv_type_names / sizeof *kv_type_names; i++)
        if (!strcmp(s, kv_type_names[i])) {
            *out = (enum hearth_kv_type)i;
            return true;
        }
    return false;
}

struct hearth_context_params hearth_context_default_params(void)
{
    return (struct hearth_context_params){.n_ctx             = 0,
                                          .n_seq_max         = 1,
                                          .n_batch           = 512,
                                          .kv_block          = HEARTH_KV_BLOCK,
                                          .kv_type           = HEARTH_KV_F16,
                                          .kv_type_v         = HEARTH_KV_F16,
                                          .n_threads         = 0,
                                          .n_keep_states     = 0,
                                          .n_state_snapshots = 8,
                                          .cache_bytes       = -1};
}

/* The KV cache evicts a block: the disk tier writes it, the snapshots keyed by it go. */
static void block_evicted(void *arg, const struct kv_cache *kv, int32_t block, uint64_t hash,
                          const int32_t *tokens)
{
    struct hearth_context *ctx = arg;
    if (ctx->disk)
        kvdisk_evicted(ctx->disk, kv, block, hash, tokens);
    if (ctx->snap)
        snap_forget(ctx->snap, hash);
}

static bool block_fetch(void *arg, struct kv_cache *kv, int32_t block, uint64_t hash,
                        const int32_t *tokens)
{
    return kvdisk_fetch(((struct hearth_context *)arg)->disk, kv, block, hash, tokens);
}

enum hearth_status hearth_context_new(struct hearth_model *model,
                                      const struct hearth_context_params *params,
                                      struct hearth_context **out, char *err, size_t err_len)
{
    struct hearth_context_params p = params ? *params : hearth_context_default_params();
    const struct hparams *hp       = &model->hp;
    *out                           = NULL;
    if (p.n_ctx <= 0)
        p.n_ctx = hp->n_ctx_train;
    if (p.n_seq_max < 1 || p.n_batch < 1 || p.kv_block < 1 || p.n_ctx > (1 << 24) ||
        p.n_seq_max > 4096 || p.n_batch > 65536 || p.kv_block > 4096)
        return fail(HEARTH_EINVAL, err, err_len,
                    "context: n_ctx %d, n_seq_max %d, n_batch %d or kv_block %d is out of range",
                    p.n_ctx, p.n_seq_max, p.n_batch, p.kv_block);
    if (p.n_keep_states < 0 || p.n_keep_states > 64)
        return fail(HEARTH_EINVAL, err, err_len,
                    "context: n_keep_states %d is out of range (0..64)", p.n_keep_states);
    if (p.n_state_snapshots < 0 || p.n_state_snapshots > 1024)
        return fail(HEARTH_EINVAL, err, err_len,
                    "context: n_state_snapshots %d is out of range (0..1024 per sequence)",
                    p.n_state_snapshots);
    if (p.mtp && !model->has_mtp)
        return fail(HEARTH_EINVAL, err, err_len,
                    "context: an MTP context needs a model loaded with its MTP head, and %s",
                    model->hp.n_nextn ? "this one was loaded without it" : "this file has none");
    if (p.mtp) { /* the head has no recurrent layer: nothing to snapshot or keep */
        p.n_state_snapshots = 0;
        p.n_keep_states     = 0;
        p.keep_hidden       = true;
    }
    for (int w = 0; w < 2; w++) {
        const enum hearth_kv_type t = w ? p.kv_type_v : p.kv_type;
        if (!hearth_kv_type_name(t) || (w && t == HEARTH_KV_Q4_0))
            return fail(HEARTH_EINVAL, err, err_len, "context: the %s cache takes %s, not type %d",
                        w ? "V" : "K", w ? "f16, f32 or q8_0" : "f16, f32, q8_0 or q4_0", (int)t);
        if ((t == HEARTH_KV_Q8_0 || t == HEARTH_KV_Q4_0) && hp->head_dim % 32)
            return fail(HEARTH_EINVAL, err, err_len,
                        "context: a %s %s cache stores heads in blocks of 32 values, and this "
                        "model's heads have %d; use f16",
                        hearth_kv_type_name(t), w ? "V" : "K", hp->head_dim);
    }
    if (p.n_threads <= 0)
        p.n_threads = model->n_threads;
    struct hearth_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return fail(HEARTH_ENOMEM, err, err_len, "context: out of memory");
    ctx->model = model;
    ctx->p     = p;
    struct memlaw_stage mst[MODEL_MAX_STAGES];
    const int32_t n_mst = memlaw_stages_of(model, p.mtp, mst);
    bool *flags         = malloc(3 * ((size_t)hp->n_layer + 1) * sizeof *flags);
    enum hearth_status st;
    if (!flags) {
        st = fail(HEARTH_ENOMEM, err, err_len, "context: out of memory");
        goto err;
    }
    struct kv_params kp;
    memlaw_kv_params(model, &p, mst, n_mst, flags, &kp);
    /* the prefix cache's cap holds blocks and, on a recurrent model, their states */
    const size_t state_len = memlaw_state_len(model, &p);
    struct memlaw_cache cache;
    memlaw_state_cache(&p, kv_retain_block_len(&kp), state_len, &cache);
    kp.retain      = p.cache_bytes >= 0;
    kp.n_retain    = cache.n_retain;
    ctx->cache_cap = cache.cap_bytes;
    st             = kv_init(&ctx->kv, &kp, err, err_len);
    free(flags);
    if (st)
        goto err;
    ctx->kv.copy       = stages_kv_copy;
    ctx->kv.copy_arg   = ctx;
    struct mem_acct *a = &ctx->acct;
    const size_t nb    = (size_t)p.n_batch;
    ctx->out_row       = acct_calloc(a, MEM_OTHER, nb, sizeof(int32_t));
    ctx->out_src       = acct_calloc(a, MEM_OTHER, nb, sizeof(int32_t));
    ctx->seq_next      = acct_calloc(a, MEM_OTHER, (size_t)p.n_seq_max, sizeof(int32_t));
    if (p.keep_hidden)
        ctx->hidden = acct_calloc(a, MEM_COMPUTE, nb * hp->n_embd, sizeof(float));
    if (!ctx->out_row || !ctx->out_src || !ctx->seq_next || (p.keep_hidden && !ctx->hidden)) {
        st = fail(HEARTH_ENOMEM, err, err_len, "context: out of memory for a batch of %d",
                  p.n_batch);
        goto err;
    }
    if ((st = stages_init(ctx, err, err_len)))
        goto err;
    if (ctx->state_len != state_len) {
        st = fail(HEARTH_EINVAL, err, err_len,
                  "context: the stages keep %zu floats of state a sequence and the memory law "
                  "%zu",
                  ctx->state_len, state_len);
        goto err;
    }
    if (p.cache_dir) {
        struct kvfile_shape shape;
        char why[HEARTH_ERR_MAX];
        if ((st = kvfile_shape_of(ctx, &shape, why, sizeof why)) ||
            (st =
                 kvdisk_open(p.cache_dir, p.cache_disk_bytes > 0 ? (uint64_t)p.cache_disk_bytes : 0,
                             &shape, &ctx->disk, why, sizeof why))) {
            st = fail(st, err, err_len, "context: the cache's disk tier: %s", why);
            goto err;
        }
    }
    if (ctx->state_len && p.n_state_snapshots > 0) {
        const size_t len       = ctx->state_len;
        const int32_t n_cached = cache.n_cached;
        if (!(ctx->snap = snap_new(p.n_seq_max, p.n_state_snapshots, n_cached, len))) {
            st = fail(HEARTH_ENOMEM, err, err_len,
                      "context: cannot map %zu bytes for %d state snapshots per sequence",
                      snap_bytes(p.n_seq_max, p.n_state_snapshots, n_cached, len),
                      p.n_state_snapshots);
            goto err;
        }
        /* the one memory figure a user of --ctx-checkpoints needs, said once at startup */
        fprintf(stderr,
                "hearth: %s: state snapshots: up to %d per sequence x %d%s of %.2f MiB each "
                "(%.1f MiB at most)\n",
                model->arch, p.n_state_snapshots, p.n_seq_max,
                n_cached > 0 ? ", and the prefix cache's" : "",
                (double)len * sizeof(float) / (1 << 20),
                (double)snap_bytes(p.n_seq_max, p.n_state_snapshots, n_cached, len) / (1 << 20));
    }
    if (ctx->disk || ctx->snap)
        kv_set_tier(&ctx->kv, block_evicted, ctx->disk ? block_fetch : NULL, ctx);
    if (ctx->state_len && p.n_keep_states > 0) {
        const size_t n  = (size_t)p.n_seq_max * p.n_keep_states * ctx->state_len;
        const size_t ns = (size_t)p.n_seq_max;
        ctx->keep       = acct_calloc(a, MEM_KV, n, sizeof *ctx->keep);
        ctx->keep_want  = acct_calloc(a, MEM_OTHER, ns, sizeof *ctx->keep_want);
        ctx->keep_first = acct_calloc(a, MEM_OTHER, ns, sizeof *ctx->keep_first);
        ctx->keep_n     = acct_calloc(a, MEM_OTHER, ns, sizeof *ctx->keep_n);
        ctx->keep_dup   = acct_calloc(a, MEM_OTHER, nb, sizeof *ctx->keep_dup);
        if (!ctx->keep || !ctx->keep_want || !ctx->keep_first || !ctx->keep_n || !ctx->keep_dup) {
            st = fail(HEARTH_ENOMEM, err, err_len,
                      "context: out of memory for %d kept states per sequence (%zu bytes)",
                      p.n_keep_states, n * sizeof *ctx->keep);
            goto err;
        }
        for (int32_t i = 0; i < p.n_seq_max; i++)
            ctx->keep_first[i] = -1;
    }
    *out = ctx;
    return HEARTH_OK;
err:
    hearth_context_free(ctx);
    return st;
}

void hearth_context_memory(const struct hearth_context *ctx, struct hearth_memory *out)
{
    struct mem_acct a = ctx->acct;
    mem_acct_add(&a, &ctx->kv.acct);
    if (ctx->snap)
        mem_acct_add(&a, snap_acct(ctx->snap));
    for (int32_t i = 0; i < ctx->n_stage; i++) {
        const struct backend *be = ctx->stages[i].place->be;
        struct mem_acct dev      = {{0}};
        if (ctx->stages[i].state && be->ctx_memory)
            be->ctx_memory(ctx->stages[i].state, &dev, &a);
        if (be->law->host)
            mem_acct_add(&a, &dev);
    }
    mem_acct_public(&a, out);
}

void hearth_context_free(struct hearth_context *ctx)
{
    if (!ctx)
        return;
    stages_free(ctx);
    free(ctx->out_row);
    free(ctx->out_src);
    free(ctx->seq_next);
    free(ctx->hidden);
    snap_free(ctx->snap);
    free(ctx->keep);
    free(ctx->keep_want);
    free(ctx->keep_first);
    free(ctx->keep_n);
    free(ctx->keep_dup);
    capture_free(ctx->cap);
    kv_free(&ctx->kv);
    kvdisk_close(ctx->disk);
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
        stages_state_load(ctx, seq, state);
    else
        stages_seq_reset(ctx, seq);
    if (ctx->snap)
        snap_disown(ctx->snap, seq, at);
    return at;
}

/* Where seq's j-th kept state (after the row at position keep_first[seq] + j) lives. */
static float *keep_slot(const struct hearth_context *ctx, int32_t seq, int32_t j)
{
    return ctx->keep + ((size_t)seq * ctx->p.n_keep_states + (size_t)j) * ctx->state_len;
}

/* seq's kept state after the row at position p - 1, or NULL when the last batch kept none. */
static const float *kept_state(const struct hearth_context *ctx, int32_t seq, int32_t p)
{
    if (!ctx->keep || ctx->keep_first[seq] < 0)
        return NULL;
    int32_t j = p - 1 - ctx->keep_first[seq];
    if (j < 0 || j >= ctx->keep_n[seq])
        return NULL;
    return keep_slot(ctx, seq, j);
}

void hearth_seq_truncate(struct hearth_context *ctx, int32_t seq, int32_t p0)
{
    if (seq < 0 || seq >= ctx->kv.n_seq)
        return;
    /* a recurrent state cannot go back by itself: it resumes from a state kept in the last
     * batch, from a snapshot, or from 0 */
    if (ctx->state_len && p0 < ctx->kv.seqs[seq].n_tokens) {
        const float *state = kept_state(ctx, seq, p0);
        if (state) {
            stages_state_load(ctx, seq, state);
            if (ctx->snap)
                snap_disown(ctx->snap, seq, p0);
        } else {
            p0 = state_resume(ctx, seq, p0);
        }
    }
    if (ctx->keep)
        ctx->keep_first[seq] = -1;
    kv_truncate(&ctx->kv, seq, p0);
}

void hearth_seq_keep_states(struct hearth_context *ctx, int32_t seq)
{
    if (ctx->keep && seq >= 0 && seq < ctx->kv.n_seq)
        ctx->keep_want[seq] = true;
}

/*
 * Adds to ctx->snap_rows the rows whose states hearth_seq_keep_states asked
 * for (a row snap_plan already took gets a copy after the decode, in
 * keep_dup), and records what each sequence keeps. Returns whether any row is.
 */
static bool keep_plan(struct hearth_context *ctx, const struct hearth_batch *b)
{
    bool any = false;
    for (int32_t i = 0; i < b->n; i++)
        ctx->keep_first[b->seq[i]] = -1; /* this batch moves the sequence: old states go */
    for (int32_t i = 0; i < b->n; i++) {
        int32_t seq      = b->seq[i];
        ctx->keep_dup[i] = NULL;
        if (!ctx->keep_want[seq])
            continue;
        if (ctx->keep_first[seq] < 0) {
            ctx->keep_first[seq] = b->pos[i];
            ctx->keep_n[seq]     = 0;
        }
        int32_t j = b->pos[i] - ctx->keep_first[seq];
        if (j != ctx->keep_n[seq] || j >= ctx->p.n_keep_states)
            continue; /* rows past the room, or out of order: not kept */
        float *dst = keep_slot(ctx, seq, j);
        if (ctx->snap_rows[i])
            ctx->keep_dup[i] = dst;
        else
            ctx->snap_rows[i] = dst;
        ctx->keep_n[seq]++;
        any = true;
    }
    for (int32_t i = 0; i < b->n; i++)
        ctx->keep_want[b->seq[i]] = false;
    return any;
}

int32_t hearth_seq_len(const struct hearth_context *ctx, int32_t seq)
{
    return seq >= 0 && seq < ctx->kv.n_seq ? ctx->kv.seqs[seq].n_tokens : 0;
}

const float *hearth_get_logits(const struct hearth_context *ctx, int32_t i)
{
    if (i < 0 || i >= ctx->n_rows || ctx->out_row[i] < 0)
        return NULL;
    return ctx->logits + (size_t)ctx->out_row[i] * ctx->model->hp.n_vocab;
}

const float *hearth_get_hidden(const struct hearth_context *ctx, int32_t i)
{
    if (!ctx->hidden || i < 0 || i >= ctx->n_rows)
        return NULL;
    return ctx->hidden + (size_t)i * ctx->model->hp.n_embd;
}

/* -------------------------------------------------------------- the graph --- */

static void layer_forward(struct hearth_context *ctx, const struct hearth_batch *b, int32_t l)
{
    const struct backend *be = ctx->st->place->be;
    const struct hparams *hp = &ctx->model->hp;
    const struct layer *L    = &ctx->model->layers[l];
    const int32_t n          = b->n;

    be->rmsnorm(ctx, ACT_XB, ACT_X, l, NORM_ATTN, n);
    if (L->dnet) {
        be->deltanet(ctx, b, l);
    } else {
        be->matmul(ctx, &L->wq, ACT_XB, L->attn_gated ? ACT_QG : ACT_Q, n, NULL);
        /* gemma4: a layer reusing another's K/V projects none; a full layer's V is its K */
        if (!L->kv_reuse)
            be->matmul(ctx, &L->wk, ACT_XB, ACT_K, n, &L->wq);
        if (!L->kv_reuse && L->wv.data)
            be->matmul(ctx, &L->wv, ACT_XB, ACT_V, n, &L->wk);
        be->qkv_store(ctx, b, l);
        be->attention(ctx, b, l);
        be->matmul(ctx, &L->wo, ACT_ATT, ACT_XB, n, NULL);
    }
    if (L->post_attn_norm)
        be->rmsnorm(ctx, ACT_XB, ACT_XB, l, NORM_POST_ATTN, n);
    be->add(ctx, ACT_X, ACT_XB, n);

    be->rmsnorm(ctx, ACT_XB, ACT_X, l, NORM_FFN, n);
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
        be->moe(ctx, l, n, n_gemm);
        return;
    }
    be->matmul(ctx, &L->w_gate, ACT_XB, ACT_HB, n, NULL);
    be->matmul(ctx, &L->w_up, ACT_XB, ACT_HB2, n, &L->w_gate);
    be->gated_act(ctx, l, n);
    be->matmul(ctx, &L->w_down, ACT_HB, ACT_XB, n, NULL);
    if (L->post_ffn_norm)
        be->rmsnorm(ctx, ACT_XB, ACT_XB, l, NORM_POST_FFN, n);
    be->add(ctx, ACT_X, ACT_XB, n);
    if (L->ple_norm || L->out_scale != 0.0f)
        be->layer_tail(ctx, l, n);
}

/* Checks the batch against the cache and reserves its KV blocks. */
static enum hearth_status batch_prepare(struct hearth_context *ctx, const struct hearth_batch *b,
                                        char *err, size_t err_len)
{
    const int32_t n_seq = ctx->kv.n_seq, n_vocab = ctx->model->hp.n_vocab;
    if (b->n < 1 || b->n > ctx->p.n_batch)
        return fail(HEARTH_EINVAL, err, err_len, "decode: batch of %d tokens, allowed 1..%d", b->n,
                    ctx->p.n_batch);
    int32_t *next = ctx->seq_next;
    for (int32_t s = 0; s < n_seq; s++)
        next[s] = ctx->kv.seqs[s].n_tokens;
    for (int32_t i = 0; i < b->n; i++) {
        if (b->seq[i] < 0 || b->seq[i] >= n_seq)
            return fail(HEARTH_EINVAL, err, err_len,
                        "decode: row %d has sequence %d, allowed 0..%d", i, b->seq[i], n_seq - 1);
        if (b->token[i] < 0 || b->token[i] >= n_vocab)
            return fail(HEARTH_EINVAL, err, err_len, "decode: row %d has token %d, vocab is %d", i,
                        b->token[i], n_vocab);
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

/* The forward pass of hearth_decode and, with the head's hidden inputs h, hearth_mtp_decode. */
static enum hearth_status decode(struct hearth_context *ctx, const struct hearth_batch *b,
                                 const float *h, char *err, size_t err_len)
{
    const struct hparams *hp = &ctx->model->hp;
    ctx->n_rows              = 0;
    enum hearth_status st    = batch_prepare(ctx, b, err, err_len);
    if (st)
        return st;
    for (int32_t i = 0; i < ctx->n_stage; i++) {
        stage_enter(ctx, i);
        ctx->st->place->be->batch_begin(ctx, b);
    }
    bool kept = false;
    if (ctx->snap || ctx->keep) {
        if (ctx->snap)
            snap_plan(ctx->snap, b, ctx->kv.block_tokens, ctx->snap_rows);
        else
            memset(ctx->snap_rows, 0, (size_t)b->n * sizeof *ctx->snap_rows);
        kept = ctx->keep && keep_plan(ctx, b);
        stages_state_save_plan(ctx, b->n);
    }
    stage_enter(ctx, 0);
    ctx->st->place->be->embed(ctx, b);
    if (hp->n_embd_pl)
        ctx->st->place->be->ple_input(ctx, b);
    if (h)
        ctx->st->place->be->nextn_input(ctx, hp->n_layer, h, b->n);
    for (int32_t i = 0; i < ctx->n_stage; i++) {
        if (i > 0)
            stages_cross(ctx, i, b->n);
        for (int32_t l = ctx->st->place->l0; l < ctx->st->place->l1; l++) {
            capture_layer_input(ctx, l, b->n);
            layer_forward(ctx, b, l);
        }
    }
    for (int32_t i = 0; kept && i < b->n; i++)
        if (ctx->keep_dup[i])
            memcpy(ctx->keep_dup[i], ctx->snap_rows[i], ctx->state_len * sizeof(float));
    /* the last stage holds the output */
    const struct backend *be = ctx->st->place->be;
    for (int32_t i = 0; i < b->n; i++)
        ctx->kv.seqs[b->seq[i]].n_tokens = b->pos[i] + 1 > ctx->kv.seqs[b->seq[i]].n_tokens
                                               ? b->pos[i] + 1
                                               : ctx->kv.seqs[b->seq[i]].n_tokens;

    /* gather the rows whose logits are wanted, then norm and project only those */
    int32_t n_out = 0, *rows = ctx->out_src;
    for (int32_t i = 0; i < b->n; i++) {
        bool want       = b->logits ? b->logits[i] != 0 : i == b->n - 1;
        ctx->out_row[i] = want ? n_out : -1;
        if (want)
            rows[n_out++] = i;
    }
    ctx->n_rows = b->n;
    if (ctx->hidden) {
        /* every row normed, kept, then the wanted ones projected: the same rows' arithmetic */
        const int32_t l = hp->n_layer;
        be->rmsnorm(ctx, ACT_X, ACT_X, l, ctx->p.mtp ? NORM_NEXTN_HEAD : NORM_OUTPUT, b->n);
        be->residual_get(ctx, b->n, ctx->hidden);
        if (n_out == 0)
            return HEARTH_OK;
        be->gather(ctx, ACT_X, rows, n_out);
        be->matmul(ctx, &ctx->model->output, ACT_X, ACT_LOGITS, n_out, NULL);
    } else {
        if (n_out == 0)
            return HEARTH_OK;
        be->gather(ctx, ACT_X, rows, n_out);
        be->rmsnorm(ctx, ACT_XB, ACT_X, -1, NORM_OUTPUT, n_out);
        be->matmul(ctx, &ctx->model->output, ACT_XB, ACT_LOGITS, n_out, NULL);
    }
    if (hp->logit_softcap > 0)
        be->softcap(ctx, n_out);
    ctx->logits = be->logits(ctx, n_out);
    return HEARTH_OK;
}

enum hearth_status hearth_decode(struct hearth_context *ctx, const struct hearth_batch *b,
                                 char *err, size_t err_len)
{
    if (ctx->p.mtp)
        return fail(HEARTH_EINVAL, err, err_len,
                    "decode: an MTP context decodes through hearth_mtp_decode");
    return decode(ctx, b, NULL, err, err_len);
}

enum hearth_status hearth_mtp_decode(struct hearth_context *ctx, const struct hearth_batch *b,
                                     const float *hidden, char *err, size_t err_len)
{
    if (!ctx->p.mtp || !hidden)
        return fail(HEARTH_EINVAL, err, err_len,
                    "decode: hearth_mtp_decode needs an MTP context and the hidden rows");
    return decode(ctx, b, hidden, err, err_len);
}

/* ------------------------------------------------------------ prefix cache --- */

int32_t hearth_seq_reuse_prefix(struct hearth_context *ctx, int32_t seq, const hearth_token *tokens,
                                int32_t n)
{
    if (seq < 0 || seq >= ctx->kv.n_seq || ctx->kv.seqs[seq].n_tokens != 0)
        return 0;
    /* a recurrent state resumes at snapshots, all at block ends */
    int32_t got = kv_reuse_prefix(&ctx->kv, seq, tokens, n, ctx->state_len == 0);
    /* a recurrent model resumes only where a snapshot of its state matches the prefix */
    if (ctx->state_len && got > 0) {
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

void hearth_seq_end(struct hearth_context *ctx, int32_t seq, const hearth_token *tokens, int32_t n)
{
    if (seq < 0 || seq >= ctx->kv.n_seq)
        return;
    hearth_seq_publish(ctx, seq, tokens, n);
    if (!ctx->state_len)
        kv_publish_tail(&ctx->kv, seq, tokens, n);
    hearth_seq_truncate(ctx, seq, 0);
}

void hearth_cache_stats(const struct hearth_context *ctx, struct hearth_cache_stats *out)
{
    int64_t evicted = 0;
    for (int g = 0; g < KV_GROUPS; g++)
        evicted += ctx->kv.pool[g].n_evicted;
    struct kv_disk_stats d;
    kvdisk_stats(ctx->disk, &d);
    int32_t states = 0;
    if (ctx->snap)
        snap_stats(ctx->snap, NULL, &states);
    *out = (struct hearth_cache_stats){.bytes = kv_cached_bytes(&ctx->kv) +
                                                (uint64_t)states * ctx->state_len * sizeof(float),
                                       .cap_bytes       = ctx->cache_cap,
                                       .evicted         = evicted,
                                       .disk_bytes      = d.bytes,
                                       .disk_cap_bytes  = d.cap_bytes,
                                       .disk_reads      = d.reads,
                                       .disk_writes     = d.writes,
                                       .disk_hit_tokens = d.reads * (uint64_t)ctx->kv.block_tokens,
                                       .disk_evicted    = d.evicted,
                                       .disk_skipped    = d.skipped,
                                       .disk_write_errors = d.write_errors};
}

void hearth_cache_flush(struct hearth_context *ctx, double seconds)
{
    kvdisk_flush(ctx->disk, &ctx->kv, seconds);
}

void hearth_kv_stats(const struct hearth_context *ctx, int32_t *used, int32_t *cached,
                     int32_t *total)
{
    int32_t n_cached = 0, n_blocks = 0;
    for (int g = 0; g < KV_GROUPS; g++) {
        n_cached += ctx->kv.pool[g].n_cached;
        n_blocks += ctx->kv.pool[g].n_blocks;
    }
    if (cached)
        *cached = n_cached;
    if (used)
        *used = kv_used_blocks(&ctx->kv);
    if (total)
        *total = n_blocks;
}
