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

#include "serve/spec.h"
#include "spec/ngram.h"
#include "util/errfmt.h"

struct spec {
    struct sched_spec p;
    struct hearth_context *dctx; /* the draft model's; NULL without one */
    struct ngram_pool *pool;     /* the shared n-gram pool; NULL without one */
    int32_t n_slots, n_ctx, n_batch, n_vocab;
    hearth_token *b_tok;         /* [n_batch] */
    int32_t *b_pos, *b_seq;      /* [n_batch] */
    int8_t *b_logits;            /* [n_batch] */
    int32_t *row;                /* [n] per request: its logits row in the batch, -1 none */
    int32_t row_cap;
};

bool spec_vocab_match(const struct hearth_model *target, const struct hearth_model *draft,
                      char *err, size_t err_len)
{
    int32_t nt = hearth_model_n_vocab(target), nd = hearth_model_n_vocab(draft);
    if (nt != nd)
        return fail(false, err, err_len,
                    "the draft model has %d tokens in its vocabulary but the model has %d: a "
                    "draft model must share the vocabulary",
                    nd, nt);
    if (hearth_token_bos(target) != hearth_token_bos(draft) ||
        hearth_token_eos(target) != hearth_token_eos(draft))
        return fail(false, err, err_len,
                    "the draft model's BOS/EOS tokens are %d/%d but the model's %d/%d: a draft "
                    "model must share the vocabulary",
                    hearth_token_bos(draft), hearth_token_eos(draft), hearth_token_bos(target),
                    hearth_token_eos(target));
    char a[256], b[256];
    for (int32_t t = 0; t < nt; t++) {
        size_t la = hearth_token_to_piece(target, t, a, sizeof a);
        size_t lb = hearth_token_to_piece(draft, t, b, sizeof b);
        if (la != lb || memcmp(a, b, la < sizeof a ? la : sizeof a))
            return fail(false, err, err_len,
                        "token %d is '%.40s' in the model but '%.40s' in the draft model: a "
                        "draft model must share the vocabulary",
                        t, la < sizeof a ? a : "(long)", lb < sizeof b ? b : "(long)");
    }
    return true;
}

enum hearth_status spec_new(const struct hearth_model *target, const struct sched_spec *p,
                            int32_t n_slots, int32_t n_ctx, int32_t n_batch, int n_threads,
                            struct spec **out, char *err, size_t err_len)
{
    *out            = NULL;
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
        return fail(HEARTH_ENOMEM, err, err_len, "sched: out of memory for an n-gram pool of %zu "
                    "bytes", p->ngram_pool_bytes);
    }
    if (p->draft_model) {
        char why[HEARTH_ERR_MAX];
        if (!spec_vocab_match(target, p->draft_model, why, sizeof why)) {
            spec_free(sp);
            return fail(HEARTH_EINVAL, err, err_len, "--model-draft: %s", why);
        }
        struct hearth_context_params cp = hearth_context_default_params();
        cp.n_ctx                        = n_ctx;
        cp.n_seq_max                    = n_slots;
        cp.n_batch                      = n_batch;
        cp.n_threads                    = n_threads;
        enum hearth_status st =
            hearth_context_new(p->draft_model, &cp, &sp->dctx, err, err_len);
        if (st) {
            spec_free(sp);
            return st;
        }
        sp->b_tok    = malloc((size_t)n_batch * sizeof *sp->b_tok);
        sp->b_pos    = malloc((size_t)n_batch * sizeof *sp->b_pos);
        sp->b_seq    = malloc((size_t)n_batch * sizeof *sp->b_seq);
        sp->b_logits = malloc((size_t)n_batch * sizeof *sp->b_logits);
        sp->row      = malloc((size_t)n_slots * sizeof *sp->row);
        if (!sp->b_tok || !sp->b_pos || !sp->b_seq || !sp->b_logits || !sp->row) {
            spec_free(sp);
            return fail(HEARTH_ENOMEM, err, err_len, "sched: out of memory for the draft model");
        }
    }
    *out = sp;
    return HEARTH_OK;
}

void spec_free(struct spec *sp)
{
    if (!sp)
        return;
    hearth_context_free(sp->dctx);
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
    if (sp->dctx && hearth_seq_len(sp->dctx, slot) > n_keep)
        hearth_seq_truncate(sp->dctx, slot, n_keep);
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

void spec_propose(struct spec *sp, struct spec_req *reqs, int32_t n)
{
    bool want[n > 0 ? n : 1];
    bool any = false;
    for (int32_t i = 0; i < n; i++) {
        struct spec_req *r = &reqs[i];
        r->n_out           = 0;
        r->from            = SCHED_DRAFTER_NGRAM;
        if (sp->p.ngram)
            r->n_out = ngram_propose(r->tokens, r->n_tokens, sp->p.ngram_min, sp->p.ngram_max,
                                     r->k, r->out);
        if (r->n_out == 0 && sp->pool) {
            r->n_out = ngram_pool_propose(sp->pool, r->tokens, r->n_tokens, r->k, r->out);
            r->from  = SCHED_DRAFTER_POOL;
        }
        want[i] = sp->dctx && r->n_out == 0;
        any     = any || want[i];
        if (want[i])
            r->from = SCHED_DRAFTER_MODEL;
    }
    if (any)
        draft_model(sp, reqs, n, want);
}
