/*
 * spec.c: the scheduler's drafters (spec.h). The draft model runs in its
 * own context with one sequence per slot; a step's drafting is a catch-up
 * (each slot's tokens the draft model has not seen, the whole prompt for a
 * new job, in batches of n_batch) and then k batches of one row per
 * drafting slot, its argmax fed back. Typical cost: a draft model
 * a tenth of the target's size adds a tenth of a decode per drafted token.
 */
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "spec/dflash.h"
#include "spec/eagle3.h"
#include "spec/spec.h"
#include "spec/ngram.h"
#include "util/errfmt.h"

struct spec {
    struct spec_params p;
    struct hearth_context *dctx;       /* the draft model's; NULL without one */
    struct hearth_context *mctx;       /* the MTP head's; NULL without one */
    struct eagle3 *eagle3;             /* the EAGLE-3 drafter; NULL without one */
    struct dflash *dflash;             /* the DFlash drafter; NULL without one */
    const struct hearth_context *tctx; /* the target's, whose hidden rows the head reads */
    int32_t n_embd;
    float *hin;        /* [n_batch][n_embd] the head's hidden inputs of one batch */
    float *pend;       /* [n_slots][n_embd] the target's hidden state at position
                          head_len - 1 of the slot, the head's next input */
    bool *pend_ok;     /* [n_slots] pend holds it (else the next row takes zeros) */
    int32_t *head_len; /* [n_slots] positions the head holds for the target's tokens,
                          beyond which its cache has only its own drafts */
    int32_t *v_row0, *v_pos0, *v_n, *v_prev; /* [n_slots] the slot's rows in the last target
                                                batch: first row, its position, count; and the
                                                last seen while walking it */
    struct ngram_pool *pool;                 /* the shared n-gram pool; NULL without one */
    int32_t n_slots, n_ctx, n_batch, n_vocab;
    hearth_token *b_tok;    /* [n_batch] */
    int32_t *b_pos, *b_seq; /* [n_batch] */
    int8_t *b_logits;       /* [n_batch] */
    int32_t *row;           /* [n] per request: its logits row in the batch, -1 none */
    int32_t row_cap;
};

/* The MTP head's context and the per-slot state that feeds it. */
static enum hearth_status mtp_new(struct spec *sp, struct hearth_model *target,
                                  const struct hearth_context *tctx, int32_t n_slots, int32_t n_ctx,
                                  int32_t n_batch, int n_threads, char *err, size_t err_len)
{
    if (!hearth_model_has_mtp(target))
        return fail(HEARTH_EINVAL, err, err_len,
                    "--spec mtp: the model has no multi-token-prediction head (a qwen35 or "
                    "qwen35moe file with nextn_predict_layers)");
    struct hearth_context_params cp = hearth_context_default_params();
    cp.n_ctx                        = n_ctx;
    cp.n_seq_max                    = n_slots;
    cp.n_batch                      = n_batch;
    cp.n_threads                    = n_threads;
    cp.mtp                          = true;
    enum hearth_status st           = hearth_context_new(target, &cp, &sp->mctx, err, err_len);
    if (st)
        return st;
    sp->tctx     = tctx;
    sp->n_embd   = hearth_model_n_embd(target);
    sp->hin      = calloc((size_t)n_batch * sp->n_embd, sizeof *sp->hin);
    sp->pend     = calloc((size_t)n_slots * sp->n_embd, sizeof *sp->pend);
    sp->pend_ok  = calloc((size_t)n_slots, sizeof *sp->pend_ok);
    sp->head_len = calloc((size_t)n_slots, sizeof *sp->head_len);
    sp->v_row0   = calloc((size_t)n_slots, sizeof *sp->v_row0);
    sp->v_pos0   = calloc((size_t)n_slots, sizeof *sp->v_pos0);
    sp->v_n      = calloc((size_t)n_slots, sizeof *sp->v_n);
    sp->v_prev   = calloc((size_t)n_slots, sizeof *sp->v_prev);
    if (!sp->hin || !sp->pend || !sp->pend_ok || !sp->head_len || !sp->v_row0 || !sp->v_pos0 ||
        !sp->v_n || !sp->v_prev)
        return fail(HEARTH_ENOMEM, err, err_len, "sched: out of memory for the MTP head");
    return HEARTH_OK;
}

enum hearth_status spec_new(struct hearth_model *target, struct hearth_context *tctx,
                            const struct spec_params *p, int32_t n_slots, int32_t n_ctx,
                            int32_t n_batch, int n_threads, struct spec **out, char *err,
                            size_t err_len)
{
    *out = NULL;
    enum hearth_status st;
    struct spec *sp = calloc(1, sizeof *sp);
    if (!sp)
        return fail(HEARTH_ENOMEM, err, err_len, "sched: out of memory for the drafters");
    sp->p       = *p;
    sp->n_slots = n_slots;
    sp->n_ctx   = n_ctx;
    sp->n_batch = n_batch;
    sp->n_vocab = hearth_model_n_vocab(target);
    if (p->ngram && p->ngram_pool_bytes > 0 &&
        !(sp->pool = ngram_pool_new(p->ngram_pool_bytes, p->ngram_min, p->ngram_max))) {
        spec_free(sp);
        return fail(HEARTH_ENOMEM, err, err_len,
                    "sched: out of memory for an n-gram pool of %zu "
                    "bytes",
                    p->ngram_pool_bytes);
    }
    if (p->mtp &&
        (st = mtp_new(sp, target, tctx, n_slots, n_ctx, n_batch, n_threads, err, err_len))) {
        spec_free(sp);
        return st;
    }
    if (p->block == SPEC_BLOCK_EAGLE3 &&
        (st = eagle3_open(p->block_path, target, tctx, n_slots, n_ctx, n_batch, &sp->eagle3, err,
                          err_len))) {
        spec_free(sp);
        return st;
    }
    if (p->block == SPEC_BLOCK_DFLASH &&
        (st = dflash_open(p->block_path, target, tctx, n_slots, n_ctx, n_batch, p->draft_max,
                          &sp->dflash, err, err_len))) {
        spec_free(sp);
        return st;
    }
    if (p->draft_model) {
        char why[HEARTH_ERR_MAX];
        if (!model_vocab_match(target, p->draft_model, why, sizeof why)) {
            spec_free(sp);
            return fail(HEARTH_EINVAL, err, err_len, "--model-draft: %s", why);
        }
        struct hearth_context_params cp = hearth_context_default_params();
        cp.n_ctx                        = n_ctx;
        cp.n_seq_max                    = n_slots;
        cp.n_batch                      = n_batch;
        cp.n_threads                    = n_threads;
        st = hearth_context_new(p->draft_model, &cp, &sp->dctx, err, err_len);
        if (st) {
            spec_free(sp);
            return st;
        }
    }
    if (p->draft_model || p->mtp) {
        sp->b_tok    = malloc((size_t)n_batch * sizeof *sp->b_tok);
        sp->b_pos    = malloc((size_t)n_batch * sizeof *sp->b_pos);
        sp->b_seq    = malloc((size_t)n_batch * sizeof *sp->b_seq);
        sp->b_logits = malloc((size_t)n_batch * sizeof *sp->b_logits);
        sp->row      = malloc((size_t)n_slots * sizeof *sp->row);
        if (!sp->b_tok || !sp->b_pos || !sp->b_seq || !sp->b_logits || !sp->row) {
            spec_free(sp);
            return fail(HEARTH_ENOMEM, err, err_len, "sched: out of memory for the drafters");
        }
    }
    *out = sp;
    return HEARTH_OK;
}

enum spec_block spec_block_of(const char *path)
{
    struct gguf_file *f = NULL;
    char err[HEARTH_ERR_MAX], arch[32] = "";
    if (gguf_open(path, &f, err, sizeof err) != HEARTH_OK)
        return SPEC_BLOCK_NONE;
    gguf_get_str(f, "general.architecture", arch, sizeof arch);
    gguf_close(f);
    return !strcmp(arch, "eagle3")   ? SPEC_BLOCK_EAGLE3
           : !strcmp(arch, "dflash") ? SPEC_BLOCK_DFLASH
                                     : SPEC_BLOCK_NONE;
}

void spec_free(struct spec *sp)
{
    if (!sp)
        return;
    hearth_context_free(sp->dctx);
    hearth_context_free(sp->mctx);
    eagle3_free(sp->eagle3);
    dflash_free(sp->dflash);
    free(sp->hin);
    free(sp->pend);
    free(sp->pend_ok);
    free(sp->head_len);
    free(sp->v_row0);
    free(sp->v_pos0);
    free(sp->v_n);
    free(sp->v_prev);
    ngram_pool_free(sp->pool);
    free(sp->b_tok);
    free(sp->b_pos);
    free(sp->b_seq);
    free(sp->b_logits);
    free(sp->row);
    free(sp);
}

void spec_feed(struct spec *sp, const hearth_token *tokens, int32_t from, int32_t n)
{
    if (sp->pool)
        ngram_pool_feed(sp->pool, tokens, from, n);
}

void spec_rewind(struct spec *sp, int32_t slot, int32_t n_keep)
{
    if (sp->eagle3)
        eagle3_rewind(sp->eagle3, slot, n_keep);
    if (sp->dflash)
        dflash_rewind(sp->dflash, slot, n_keep);
    if (sp->dctx && hearth_seq_len(sp->dctx, slot) > n_keep)
        hearth_seq_truncate(sp->dctx, slot, n_keep);
    if (!sp->mctx)
        return;
    if (hearth_seq_len(sp->mctx, slot) > n_keep)
        hearth_seq_truncate(sp->mctx, slot, n_keep);
    if (sp->head_len[slot] < n_keep)
        return; /* the head is behind: spec_observe fills the gap */
    sp->head_len[slot] = n_keep;
    /* the next input is the target's hidden state at n_keep - 1, a row of its last batch */
    const int32_t j = n_keep - 1 - sp->v_pos0[slot];
    const float *h =
        j >= 0 && j < sp->v_n[slot] ? hearth_get_hidden(sp->tctx, sp->v_row0[slot] + j) : NULL;
    sp->pend_ok[slot] = h != NULL;
    if (h)
        memcpy(sp->pend + (size_t)slot * sp->n_embd, h, (size_t)sp->n_embd * sizeof *h);
}

/* Runs the head over the m rows staged in b_* and hin; false when it could not. */
static bool head_run(struct spec *sp, int32_t m)
{
    char err[HEARTH_ERR_MAX];
    struct hearth_batch b = {m, sp->b_tok, sp->b_pos, sp->b_seq, sp->b_logits};
    return hearth_mtp_decode(sp->mctx, &b, sp->hin, err, sizeof err) == HEARTH_OK;
}

/* The head's cache lost track of some slots (its pool was full): they start over. */
static void head_reset(struct spec *sp)
{
    for (int32_t s = 0; s < sp->n_slots; s++) {
        hearth_seq_truncate(sp->mctx, s, 0);
        sp->head_len[s] = 0;
        sp->pend_ok[s]  = false;
    }
}

/* Stages head row m: token tok at pos of slot s with hidden input h (NULL: zeros). */
static void head_stage(struct spec *sp, int32_t m, int32_t s, hearth_token tok, int32_t pos,
                       const float *h, int8_t logits)
{
    sp->b_tok[m]    = tok;
    sp->b_pos[m]    = pos;
    sp->b_seq[m]    = s;
    sp->b_logits[m] = logits;
    float *dst      = sp->hin + (size_t)m * sp->n_embd;
    if (h)
        memcpy(dst, h, (size_t)sp->n_embd * sizeof *h);
    else
        memset(dst, 0, (size_t)sp->n_embd * sizeof *dst);
}

/* Stages a row without logits as row *m, running the staged rows once n_batch are. */
static bool head_row(struct spec *sp, int32_t *m, int32_t s, hearth_token tok, int32_t pos,
                     const float *h)
{
    head_stage(sp, *m, s, tok, pos, h, 0);
    if (++*m < sp->n_batch)
        return true;
    bool ok = head_run(sp, *m);
    *m      = 0;
    return ok;
}

void spec_observe(struct spec *sp, const struct hearth_batch *b,
                  const hearth_token *const *slot_tokens)
{
    if (sp && sp->eagle3)
        eagle3_observe(sp->eagle3, b, slot_tokens);
    if (sp && sp->dflash)
        dflash_observe(sp->dflash, b);
    if (!sp || !sp->mctx)
        return;
    for (int32_t s = 0; s < sp->n_slots; s++)
        sp->v_n[s] = 0;
    for (int32_t i = 0; i < b->n; i++) {
        int32_t s = b->seq[i];
        if (sp->v_n[s]++ == 0) {
            sp->v_row0[s] = i;
            sp->v_pos0[s] = b->pos[i];
            sp->v_prev[s] = -1;
        }
    }
    int32_t m = 0;
    bool ok   = true;
    /* each slot's head continues at the batch's first position: its drafts there are cut,
     * and positions it missed (a reused prefix) are filled with zero hidden inputs */
    for (int32_t s = 0; s < sp->n_slots && ok; s++) {
        if (sp->v_n[s] == 0)
            continue;
        const int32_t p0 = sp->v_pos0[s];
        if (hearth_seq_len(sp->mctx, s) > p0)
            hearth_seq_truncate(sp->mctx, s, p0);
        if (sp->head_len[s] != p0)
            sp->pend_ok[s] = false;
        int32_t have = hearth_seq_len(sp->mctx, s);
        for (int32_t p = have; p < p0 && ok; p++)
            ok = head_row(sp, &m, s, slot_tokens[s][p], p, NULL);
    }
    for (int32_t i = 0; i < b->n && ok; i++) {
        int32_t s      = b->seq[i];
        const float *h = sp->v_prev[s] >= 0 ? hearth_get_hidden(sp->tctx, sp->v_prev[s])
                         : sp->pend_ok[s]   ? sp->pend + (size_t)s * sp->n_embd
                                            : NULL;
        sp->v_prev[s]  = i;
        ok             = head_row(sp, &m, s, b->token[i], b->pos[i], h);
    }
    if (ok && m > 0)
        ok = head_run(sp, m);
    if (!ok) {
        head_reset(sp);
        return;
    }
    for (int32_t s = 0; s < sp->n_slots; s++) {
        if (sp->v_n[s] == 0)
            continue;
        sp->head_len[s] = sp->v_pos0[s] + sp->v_n[s];
        sp->pend_ok[s]  = true;
        memcpy(sp->pend + (size_t)s * sp->n_embd, hearth_get_hidden(sp->tctx, sp->v_prev[s]),
               (size_t)sp->n_embd * sizeof(float));
    }
}

static hearth_token argmax(const float *l, int32_t n)
{
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (l[i] > l[best])
            best = i;
    return best;
}

/*
 * The draft model's greedy proposals for the requests marked in want[]: the
 * tokens it lacks but the last, without logits (in batches of n_batch), then
 * rounds of one row per slot: the last token first, then its own argmax fed
 * back, until each slot has its k.
 */
static void draft_model(struct spec *sp, struct spec_req *reqs, int32_t n, const bool *want)
{
    char err[HEARTH_ERR_MAX];
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++) {
        if (!want[i])
            continue;
        struct spec_req *r = &reqs[i];
        int32_t have       = hearth_seq_len(sp->dctx, r->slot);
        if (have > r->n_tokens - 1) { /* never ahead of the slot: cut back */
            hearth_seq_truncate(sp->dctx, r->slot, r->n_tokens - 1);
            have = hearth_seq_len(sp->dctx, r->slot);
        }
        for (int32_t p = have; p < r->n_tokens - 1; p++) {
            sp->b_tok[m]    = r->tokens[p];
            sp->b_pos[m]    = p;
            sp->b_seq[m]    = r->slot;
            sp->b_logits[m] = 0;
            if (++m == sp->n_batch) {
                struct hearth_batch b = {m, sp->b_tok, sp->b_pos, sp->b_seq, sp->b_logits};
                if (hearth_decode(sp->dctx, &b, err, sizeof err) != HEARTH_OK)
                    goto failed;
                m = 0;
            }
        }
    }
    if (m > 0) {
        struct hearth_batch b = {m, sp->b_tok, sp->b_pos, sp->b_seq, sp->b_logits};
        if (hearth_decode(sp->dctx, &b, err, sizeof err) != HEARTH_OK)
            goto failed;
        m = 0;
    }
    for (int32_t i = 0; i < n; i++) {
        sp->row[i] = -1;
        if (!want[i])
            continue;
        sp->b_tok[m]    = reqs[i].tokens[reqs[i].n_tokens - 1];
        sp->b_pos[m]    = reqs[i].n_tokens - 1;
        sp->b_seq[m]    = reqs[i].slot;
        sp->b_logits[m] = 1;
        sp->row[i]      = m++;
    }
    while (m > 0) {
        struct hearth_batch b = {m, sp->b_tok, sp->b_pos, sp->b_seq, sp->b_logits};
        if (hearth_decode(sp->dctx, &b, err, sizeof err) != HEARTH_OK)
            goto failed;
        /* each slot's argmax is its next draft; fed back while it wants more */
        m = 0;
        for (int32_t i = 0; i < n; i++) {
            struct spec_req *r = &reqs[i];
            if (!want[i] || sp->row[i] < 0)
                continue;
            const float *l     = hearth_get_logits(sp->dctx, sp->row[i]);
            sp->row[i]         = -1;
            r->out[r->n_out++] = argmax(l, sp->n_vocab);
            if (r->n_out == r->k)
                continue;
            sp->b_tok[m]    = r->out[r->n_out - 1];
            sp->b_pos[m]    = r->n_tokens + r->n_out - 1;
            sp->b_seq[m]    = r->slot;
            sp->b_logits[m] = 1;
            sp->row[i]      = m++;
        }
    }
    return;
failed:
    /* the draft model's pool was full, or it failed: no proposals this step, and its
     * sequences start over (a cut sequence would be as costly to track as to redo) */
    for (int32_t i = 0; i < n; i++)
        if (want[i]) {
            reqs[i].n_out = 0;
            hearth_seq_truncate(sp->dctx, reqs[i].slot, 0);
        }
}

/*
 * The MTP head's proposals for the requests marked in want[]: a slot whose
 * head holds every position but the last token's drafts from that token and
 * the target's hidden state before it, then from each draft and the head's
 * own hidden state, one row per slot and round.
 */
static void draft_mtp(struct spec *sp, struct spec_req *reqs, int32_t n, const bool *want)
{
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++) {
        struct spec_req *r = &reqs[i];
        const int32_t s    = r->slot;
        sp->row[i]         = -1;
        if (!want[i])
            continue;
        if (hearth_seq_len(sp->mctx, s) > sp->head_len[s])
            hearth_seq_truncate(sp->mctx, s, sp->head_len[s]);
        if (sp->head_len[s] != r->n_tokens - 1 || !sp->pend_ok[s] || m == sp->n_batch)
            continue; /* the head has not seen the target's state yet */
        head_stage(sp, m, s, r->tokens[r->n_tokens - 1], r->n_tokens - 1,
                   sp->pend + (size_t)s * sp->n_embd, 1);
        sp->row[i] = m++;
    }
    while (m > 0) {
        if (!head_run(sp, m)) {
            head_reset(sp);
            for (int32_t i = 0; i < n; i++)
                if (want[i])
                    reqs[i].n_out = 0;
            return;
        }
        /* each slot's argmax is its next draft, fed back with the head's own hidden state
         * (the context's, which staging does not touch) */
        m = 0;
        for (int32_t i = 0; i < n; i++) {
            struct spec_req *r = &reqs[i];
            if (sp->row[i] < 0)
                continue;
            const int32_t row  = sp->row[i];
            r->out[r->n_out++] = argmax(hearth_get_logits(sp->mctx, row), sp->n_vocab);
            sp->row[i]         = -1;
            if (r->n_out == r->k)
                continue;
            head_stage(sp, m, r->slot, r->out[r->n_out - 1], r->n_tokens + r->n_out - 1,
                       hearth_get_hidden(sp->mctx, row), 1);
            sp->row[i] = m++;
        }
    }
}

void spec_propose(struct spec *sp, struct spec_req *reqs, int32_t n)
{
    bool want[n > 0 ? n : 1];
    bool any = false;
    for (int32_t i = 0; i < n; i++) {
        struct spec_req *r = &reqs[i];
        r->n_out           = 0;
        r->from            = SPEC_DRAFTER_NGRAM;
        int32_t own = 0, pooled = 0;
        if (sp->p.ngram)
            r->n_out = ngram_propose(r->tokens, r->n_tokens, sp->p.ngram_min, sp->p.ngram_max, r->k,
                                     r->out, &own);
        if (sp->pool && own < sp->p.ngram_max) {
            /* the longer match wins: a short one of the slot's own against another's longer */
            hearth_token alt[64];
            const int32_t m = ngram_pool_propose(sp->pool, r->tokens, r->n_tokens,
                                                 r->k < 64 ? r->k : 64, alt, &pooled);
            if (m > 0 && pooled > own) {
                memcpy(r->out, alt, (size_t)m * sizeof *alt);
                r->n_out = m;
                r->from  = SPEC_DRAFTER_POOL;
            }
        }
        if (sp->eagle3 && r->n_out == 0) {
            r->n_out = eagle3_propose(sp->eagle3, r->slot, r->tokens, r->n_tokens, r->k, r->out);
            r->from  = SPEC_DRAFTER_EAGLE3;
        }
        if (sp->dflash && r->n_out == 0) {
            r->n_out = dflash_propose(sp->dflash, r->slot, r->tokens, r->n_tokens, r->k, r->out);
            r->from  = SPEC_DRAFTER_DFLASH;
        }
        want[i] = (sp->dctx || sp->mctx) && r->n_out == 0;
        any     = any || want[i];
        if (want[i])
            r->from = sp->mctx ? SPEC_DRAFTER_MTP : SPEC_DRAFTER_MODEL;
    }
    if (any && sp->dctx)
        draft_model(sp, reqs, n, want);
    else if (any)
        draft_mtp(sp, reqs, n, want);
}
