/*
 * gen.c: the token step every generation takes, and hearth run's loop on
 * one sequence (see gen.h).
 */
#include <stdlib.h>
#include <string.h>

#include "generate/gen.h"
#include "sample/sampler.h"
#include "util/clock.h"
#include "util/errfmt.h"

enum gen_next gen_token(const struct hearth_model *m, hearth_token tok, const struct gen_rules *r,
                        int32_t n_generated, int32_t pos, char **piece, size_t *cap, size_t *len)
{
    if (!r->ignore_eos && hearth_token_is_eog(m, tok))
        return GEN_EOG;
    size_t n = hearth_token_to_piece(m, tok, *piece, *cap);
    if (n > *cap) { /* a long piece: grow once, keep the room */
        char *p = realloc(*piece, n);
        if (!p)
            return GEN_ENOMEM;
        *piece = p;
        *cap   = n;
        n      = hearth_token_to_piece(m, tok, *piece, *cap);
    }
    *len = n;
    if (r->max_tokens >= 0 && n_generated >= r->max_tokens)
        return GEN_LIMIT;
    return pos >= r->n_ctx ? GEN_FULL : GEN_GO;
}

enum hearth_status gen_init(struct gen *g, const struct hearth_model *m, struct hearth_context *ctx,
                            struct hearth_sampler *smp, int32_t n_ctx, int32_t n_batch, char *err,
                            size_t err_len)
{
    *g = (struct gen){
        .model = m, .ctx = ctx, .smp = smp, .n_ctx = n_ctx, .n_batch = n_batch, .row = -1};
    g->cached = malloc((size_t)n_ctx * sizeof *g->cached);
    g->b_pos  = malloc((size_t)n_batch * sizeof *g->b_pos);
    g->b_seq  = calloc((size_t)n_batch, sizeof *g->b_seq);
    if (!g->cached || !g->b_pos || !g->b_seq)
        return fail(HEARTH_ENOMEM, err, err_len, "out of memory");
    return HEARTH_OK;
}

void gen_free(struct gen *g)
{
    free(g->cached);
    free(g->piece);
    free(g->b_pos);
    free(g->b_seq);
    *g = (struct gen){.row = -1};
}

enum hearth_status gen_prefill(struct gen *g, const hearth_token *ids, int32_t n, char *err,
                               size_t err_len)
{
    g->row = -1;
    if (n < 1)
        return fail(HEARTH_ERANGE, err, err_len, "the prompt has no tokens");
    if (n >= g->n_ctx)
        return fail(HEARTH_ERANGE, err, err_len, "the prompt has %d tokens but the context is %d",
                    n, g->n_ctx);
    int32_t keep = 0;
    while (keep < g->n_cached && keep < n - 1 && g->cached[keep] == ids[keep])
        keep++;
    hearth_seq_truncate(g->ctx, 0, keep);
    /* a recurrent model goes back only as far as a state snapshot */
    keep            = hearth_seq_len(g->ctx, 0);
    g->n_cached     = keep;
    const double t0 = now_s();
    for (int32_t i = keep; i < n; i += g->n_batch) {
        const int32_t m = n - i < g->n_batch ? n - i : g->n_batch;
        for (int32_t j = 0; j < m; j++)
            g->b_pos[j] = i + j;
        const struct hearth_batch b = {m, ids + i, g->b_pos, g->b_seq, NULL};
        const enum hearth_status st = hearth_decode(g->ctx, &b, err, err_len);
        if (st != HEARTH_OK) {
            g->row = -1;
            return st;
        }
        g->row = m - 1;
    }
    memcpy(g->cached + keep, ids + keep, (size_t)(n - keep) * sizeof *ids);
    g->n_cached = n;
    g->n_prefilled += n - keep;
    g->t_prefill += now_s() - t0;
    return HEARTH_OK;
}

enum hearth_status gen_run(struct gen *g, int32_t max_tokens, gen_text_fn on_text, void *user,
                           enum gen_next *end, char *err, size_t err_len)
{
    const struct gen_rules r = {.n_ctx = g->n_ctx, .max_tokens = max_tokens};
    const double t0          = now_s();
    *end                     = GEN_LIMIT;
    for (int32_t n_gen = 0; max_tokens < 0 || n_gen < max_tokens; n_gen++) {
        const float *logits = g->row >= 0 ? hearth_get_logits(g->ctx, g->row) : NULL;
        g->row              = -1;
        if (!logits)
            return fail(HEARTH_EINVAL, err, err_len, "no logits to sample: nothing was prefilled");
        const hearth_token tok = sampler_pick(g->smp, logits, NULL);
        hearth_sampler_accept(g->smp, tok);
        size_t len = 0;
        *end = gen_token(g->model, tok, &r, n_gen + 1, g->n_cached, &g->piece, &g->piece_cap, &len);
        if (*end == GEN_EOG)
            break;
        if (*end == GEN_ENOMEM)
            return fail(HEARTH_ENOMEM, err, err_len, "out of memory for a token's text");
        g->n_generated++;
        if (!on_text(user, g->piece, len))
            return fail(HEARTH_ECANCELED, err, err_len, "the text's reader stopped the generation");
        if (*end != GEN_GO)
            break;
        const int32_t pos = g->n_cached, seq0 = 0;
        const struct hearth_batch b = {1, &tok, &pos, &seq0, NULL};
        const enum hearth_status st = hearth_decode(g->ctx, &b, err, err_len);
        if (st != HEARTH_OK)
            return st;
        g->cached[g->n_cached++] = tok;
        g->row                   = 0;
    }
    g->t_decode += now_s() - t0;
    return HEARTH_OK;
}
