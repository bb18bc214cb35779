/*
 * chain.h: one job's sampling, from a row of the model's logits to the
 * token: OpenAI's presence and frequency penalties and logit bias, the
 * sampler's own chain (sampler.c: repetition penalty, top-k, top-p, min-p,
 * temperature, the draw), the grammar's mask, and the log-probabilities a
 * reply may carry. The scheduler keeps one chain per slot and calls it as
 * its sampling policy, so the order of these steps, and the float
 * arithmetic that fixes a seeded run's tokens, live in one place.
 *
 * Buffers are sized once for the vocabulary (sample_chain_init), so a
 * token costs no allocation; jobs then start and end on the same chain.
 * One thread drives a chain (the scheduler's).
 */
#ifndef HEARTH_SAMPLE_CHAIN_H
#define HEARTH_SAMPLE_CHAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hearth.h"

#define SAMPLE_MAX_TOP_LOGPROBS 20 /* OpenAI's limit on top_logprobs */

/* A logit bias: added to the token's logit before sampling (-INFINITY bans it). */
struct sample_bias {
    hearth_token token; /* 0 <= token < n_vocab */
    float bias;
};

/* A token and its log-probability under the model's raw logits. */
struct sample_logprob {
    hearth_token token;
    float logprob;
};

struct grammar;
struct grammar_matcher;

/* One job's settings, fixed for its life. */
struct sample_chain_params {
    const struct hearth_sampler_params *sampling;
    float presence_penalty;         /* OpenAI's, -2..2, 0 = off */
    float frequency_penalty;        /* OpenAI's, -2..2, 0 = off */
    const struct sample_bias *bias; /* [n_bias], the caller's; it must outlive the job */
    int32_t n_bias;
    int32_t top_logprobs; /* -1 = no logprobs; 0..20 = logprobs with that many alternatives */
};

struct sample_chain {
    const struct hearth_model *model; /* for its end-of-generation tokens */
    int32_t n_vocab;
    struct sample_chain_params p; /* the job's */
    struct hearth_sampler *smp;   /* the job's, NULL when idle */
    struct grammar_matcher *gm;   /* the job's grammar, NULL when it has none */
    uint32_t *mask;               /* [(n_vocab + 31) / 32] tokens the grammar allows now */
    int32_t *count;               /* [n_vocab] occurrences in the generated tokens */
    hearth_token *seen;           /* [n_seen_max] distinct generated tokens */
    int32_t n_seen;
    float *work; /* [n_vocab] logits after the OpenAI penalties */
    struct sample_logprob top[SAMPLE_MAX_TOP_LOGPROBS]; /* the last logprobs' alternatives */
};

/*
 * Sizes c's buffers for model's vocabulary of n_vocab tokens and up to n_seen_max distinct
 * generated tokens per job. false when out of memory; sample_chain_free frees what was
 * allocated, and frees a zeroed chain too.
 */
bool sample_chain_init(struct sample_chain *c, const struct hearth_model *model, int32_t n_vocab,
                       int32_t n_seen_max);
void sample_chain_free(struct sample_chain *c);

/*
 * A job's start, in three steps so the caller may check the job between
 * them: the sampler for p (a status and err from hearth_sampler_new), then
 * the job's grammar if it has one (false when out of memory; lazy from the
 * first of its triggers when n_triggers > 0), then the prompt, which the
 * repetition penalty sees.
 */
enum hearth_status sample_chain_start(struct sample_chain *c, const struct sample_chain_params *p,
                                      char *err, size_t err_len);
bool sample_chain_grammar(struct sample_chain *c, struct grammar *g, const char *const *triggers,
                          int32_t n_triggers);
void sample_chain_prompt(struct sample_chain *c, const hearth_token *prompt, int32_t n_prompt);

/*
 * The next token from logits ([n_vocab], the model's row): the penalties and
 * the bias on a copy, then the sampler's pick. Under a grammar, a pick it
 * refuses is made again among the tokens it allows, and the token is fed to
 * it (an end-of-generation token is not: it ends the text). force >= 0, a
 * test hook, adds 1e4 to that token's logit after the bias. The token joins
 * the sampler's history. -1 when the grammar lets no token continue or
 * fails, with the reason in err.
 */
hearth_token sample_chain_pick(struct sample_chain *c, const float *logits, hearth_token force,
                               char *err, size_t err_len);

/*
 * When the job asked for logprobs: tok's log-softmax under the raw logits
 * into *chosen, the n_top best into c->top (n_top from the job, at most
 * SAMPLE_MAX_TOP_LOGPROBS and the vocabulary), and true. false otherwise.
 */
bool sample_chain_logprobs(struct sample_chain *c, const float *logits, hearth_token tok,
                           struct sample_logprob *chosen, int32_t *n_top);

/* tok is part of the generated text now: the presence and frequency penalties count it. */
void sample_chain_count(struct sample_chain *c, hearth_token tok);

/* The job ended: its sampler and grammar are freed and its counts cleared; the buffers stay. */
void sample_chain_end(struct sample_chain *c);

#endif
