/*
 * chain.c: one job's sampling (chain.h). The steps run in the order that
 * fixes a seeded run's tokens: penalties, bias and the test hook's force on
 * a copy of the row, the unconstrained pick, the grammar's check and its
 * masked pick, the sampler's history; logprobs come from the raw row.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"
#include "sample/chain.h"
#include "sample/sampler.h"

bool sample_chain_init(struct sample_chain *c, const struct hearth_model *model, int32_t n_vocab,
                       int32_t n_seen_max)
{
    c->model   = model;
    c->n_vocab = n_vocab;
    c->seen    = malloc((size_t)n_seen_max * sizeof *c->seen);
    c->count   = calloc((size_t)n_vocab, sizeof *c->count);
    c->work    = malloc((size_t)n_vocab * sizeof *c->work);
    c->mask    = malloc(((size_t)n_vocab + 31) / 32 * sizeof *c->mask);
    return c->seen && c->count && c->work && c->mask;
}

void sample_chain_free(struct sample_chain *c)
{
    hearth_sampler_free(c->smp);
    grammar_matcher_free(c->gm);
    free(c->mask);
    free(c->count);
    free(c->seen);
    free(c->work);
}

enum hearth_status sample_chain_start(struct sample_chain *c, const struct sample_chain_params *p,
                                      char *err, size_t err_len)
{
    c->p = *p;
    return hearth_sampler_new(p->sampling, c->n_vocab, &c->smp, err, err_len);
}

bool sample_chain_grammar(struct sample_chain *c, struct grammar *g, const char *const *triggers,
                          int32_t n_triggers)
{
    c->gm = grammar_matcher_new(g, triggers, n_triggers);
    return c->gm != NULL;
}

void sample_chain_prompt(struct sample_chain *c, const hearth_token *prompt, int32_t n_prompt)
{
    for (int32_t i = 0; i < n_prompt; i++)
        hearth_sampler_accept(c->smp, prompt[i]);
}

/* log-softmax of the raw logits: the chosen token's and the n_top best. */
static void logprobs(struct sample_chain *c, const float *logits, int32_t n_vocab, hearth_token tok,
                     int32_t n_top, struct sample_logprob *chosen)
{
    float mx = -INFINITY;
    for (int32_t v = 0; v < n_vocab; v++)
        mx = logits[v] > mx ? logits[v] : mx;
    double sum = 0;
    for (int32_t v = 0; v < n_vocab; v++)
        sum += expf(logits[v] - mx);
    const float lse = mx + (float)log(sum);
    *chosen         = (struct sample_logprob){tok, logits[tok] - lse};
    int32_t n       = 0;
    for (int32_t v = 0; v < n_vocab && n_top > 0; v++) {
        float l = logits[v];
        if (n == n_top && l <= c->top[n - 1].logprob)
            continue;
        int32_t j = n < n_top ? n++ : n - 1;
        for (; j > 0 && c->top[j - 1].logprob < l; j--)
            c->top[j] = c->top[j - 1];
        c->top[j] = (struct sample_logprob){v, l};
    }
    for (int32_t i = 0; i < n; i++)
        c->top[i].logprob -= lse;
}

hearth_token sample_chain_pick(struct sample_chain *c, const float *logits, hearth_token force,
                               char *err, size_t err_len)
{
    const struct sample_chain_params *job = &c->p;
    const float *use                      = logits;
    if ((job->presence_penalty != 0 || job->frequency_penalty != 0) && c->n_seen > 0) {
        memcpy(c->work, logits, (size_t)c->n_vocab * sizeof *c->work);
        for (int32_t i = 0; i < c->n_seen; i++) {
            hearth_token t = c->seen[i];
            c->work[t] -= job->frequency_penalty * (float)c->count[t] + job->presence_penalty;
        }
        use = c->work;
    }
    if (job->n_bias > 0) {
        if (use != c->work)
            memcpy(c->work, logits, (size_t)c->n_vocab * sizeof *c->work);
        for (int32_t i = 0; i < job->n_bias; i++)
            c->work[job->bias[i].token] += job->bias[i].bias;
        use = c->work;
    }
    if (force >= 0) { /* HEARTH_SPEC_TEST_BREAK: the draft outweighs everything */
        if (use != c->work)
            memcpy(c->work, logits, (size_t)c->n_vocab * sizeof *c->work);
        c->work[force] += 1e4f;
        use = c->work;
    }
    hearth_token tok = sampler_pick(c->smp, use, NULL);
    if (c->gm) {
        /* The unconstrained pick stands when the grammar allows it: the draw then follows
         * the distribution renormalised over the allowed tokens (a refused pick falls
         * through to a pick among them), and most steps of a good model cost no mask. */
        if (!grammar_matcher_allows(c->gm, tok)) {
            int32_t n_ok = grammar_matcher_mask(c->gm, c->mask, err, err_len);
            if (n_ok <= 0) {
                if (n_ok == 0)
                    snprintf(err, err_len, "no token can continue the text");
                return -1;
            }
            tok = sampler_pick(c->smp, use, c->mask);
        }
        if (!hearth_token_is_eog(c->model, tok) &&
            !grammar_matcher_accept(c->gm, tok, err, err_len))
            return -1;
    }
    hearth_sampler_accept(c->smp, tok);
    return tok;
}

bool sample_chain_logprobs(struct sample_chain *c, const float *logits, hearth_token tok,
                           struct sample_logprob *chosen, int32_t *n_top)
{
    const struct sample_chain_params *job = &c->p;
    if (job->top_logprobs < 0)
        return false;
    int32_t n =
        job->top_logprobs > SAMPLE_MAX_TOP_LOGPROBS ? SAMPLE_MAX_TOP_LOGPROBS : job->top_logprobs;
    n = n > c->n_vocab ? c->n_vocab : n;
    logprobs(c, logits, c->n_vocab, tok, n, chosen);
    *n_top = n;
    return true;
}

void sample_chain_count(struct sample_chain *c, hearth_token tok)
{
    if (c->count[tok]++ == 0)
        c->seen[c->n_seen++] = tok;
}

void sample_chain_end(struct sample_chain *c)
{
    hearth_sampler_free(c->smp);
    c->smp = NULL;
    grammar_matcher_free(c->gm);
    c->gm = NULL;
    for (int32_t i = 0; i < c->n_seen; i++)
        c->count[c->seen[i]] = 0;
    c->n_seen = 0;
}
