/*
 * gen.h: generating text, and the step every generated token takes.
 *
 * gen_token is what becomes of a token once it is picked from the logits,
 * wherever that happens: hearth run's loop below and every slot of the
 * scheduler call it, so the two record a token, stop on it and turn it
 * into text the same way and cannot drift apart.
 *
 * The loop (gen_prefill, gen_run) generates on one sequence (0) of a
 * context of its own, one token at a time: the prompt is prefilled in the
 * context's batch size after what the cache already holds of it, then each
 * token is picked, stepped and decoded alone. The scheduler interleaves many
 * sequences in one batch instead, so it shares the step, not the loop.
 * Neither allocates per token.
 */
#ifndef HEARTH_GEN_H
#define HEARTH_GEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hearth.h"

/* What gen_token makes of a token. */
enum gen_next {
    GEN_GO,     /* its text is in the piece; decode it and sample the next */
    GEN_LIMIT,  /* its text is in the piece, and it was the last of max_tokens */
    GEN_FULL,   /* its text is in the piece, and the context has no position to decode it at */
    GEN_EOG,    /* it ends the generation, and has no text */
    GEN_ENOMEM, /* no memory for its text */
};

/* What ends a generation, besides the scheduler's stop strings. */
struct gen_rules {
    int32_t n_ctx;      /* positions of a sequence: a token at n_ctx cannot be decoded */
    int32_t max_tokens; /* tokens sampled at most, end-of-generation included; < 0: no limit */
    bool ignore_eos;    /* end-of-generation tokens are text like any other */
};

/*
 * One picked token's step, once the sampler has it in its history (what
 * the repetition penalty sees: sample_chain_pick records it, gen_run
 * too): ends the generation at end-of-generation (unless r->ignore_eos), else writes tok's text
 * into (*piece)[0..*len), growing *piece (*cap bytes) for a longer text than any before, and says
 * whether the generation goes on. n_generated counts the tokens sampled,
 * tok included; pos is the position tok is to be decoded at. On GEN_ENOMEM
 * *piece is as it was. Not thread-safe for one piece.
 */
enum gen_next gen_token(const struct hearth_model *m, hearth_token tok, const struct gen_rules *r,
                        int32_t n_generated, int32_t pos, char **piece, size_t *cap, size_t *len);

/* hearth run's generation: sequence 0 of ctx, which holds cached[0..n_cached). */
struct gen {
    const struct hearth_model *model;
    struct hearth_context *ctx; /* the caller's; nothing else may decode sequence 0 */
    struct hearth_sampler *smp; /* the caller's */
    int32_t n_ctx, n_batch;     /* ctx's, as it was created */
    hearth_token *cached;       /* [n_ctx] */
    int32_t n_cached;
    int32_t row; /* batch row of the logits to sample next; -1 none */
    char *piece; /* [piece_cap] the last token's text */
    size_t piece_cap;
    int32_t *b_pos, *b_seq;        /* [n_batch] a prefill chunk's rows */
    double t_prefill, t_decode;    /* seconds spent */
    long n_prefilled, n_generated; /* tokens prefilled; tokens whose text was handed out */
};

/*
 * Readies g over a context created with n_ctx positions and n_batch rows
 * per decode, and a sampler, both the caller's and kept until gen_free.
 * HEARTH_ENOMEM with the sentence in err; g needs gen_free either way.
 */
enum hearth_status gen_init(struct gen *g, const struct hearth_model *m, struct hearth_context *ctx,
                            struct hearth_sampler *smp, int32_t n_ctx, int32_t n_batch, char *err,
                            size_t err_len);
/* Frees what gen_init allocated (not the context or the sampler); g may be all zeros. */
void gen_free(struct gen *g);

/*
 * Makes sequence 0 hold ids[0..n), keeping the longest prefix it already
 * holds (at least one token is prefilled, for its logits), and leaves the
 * last token's logits to sample. Does not show the prompt to the sampler
 * (hearth_sampler_accept is the caller's choice). HEARTH_ERANGE when n < 1
 * or n leaves no position to generate at, or hearth_decode's status, with
 * the sentence in err.
 */
enum hearth_status gen_prefill(struct gen *g, const hearth_token *ids, int32_t n, char *err,
                               size_t err_len);

/* Takes one token's text (len bytes, not NUL-terminated); false stops the generation. */
typedef bool (*gen_text_fn)(void *user, const char *text, size_t len);

/*
 * Generates after gen_prefill: picks a token from the logits with smp,
 * steps it (gen_token, at most max_tokens, < 0: no limit), hands its text
 * to on_text and decodes it, until a step ends the generation; *end says
 * which (GEN_LIMIT also for max_tokens 0, when nothing is sampled). Returns
 * HEARTH_OK, HEARTH_ECANCELED when on_text returned false, HEARTH_ENOMEM,
 * or hearth_decode's status with the sentence in err.
 */
enum hearth_status gen_run(struct gen *g, int32_t max_tokens, gen_text_fn on_text, void *user,
                           enum gen_next *end, char *err, size_t err_len);

#endif
