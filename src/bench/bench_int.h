/*
 * bench_int.h: what the parts of `hearth bench` share inside src/bench/:
 * prompts made of words (workload.c), one streamed request and its
 * reply's figures (request.c), percentiles (report.c).
 */
#ifndef HEARTH_BENCH_INT_H
#define HEARTH_BENCH_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "bench/bench.h"
#include "util/strbuf.h"

/* ------------------------------------------------------------ prompts --- */

/* b's text (NULL when nothing was appended); a bench client out of memory has nothing left to
   measure, so it stops there. */
static inline const char *bench_str(const struct strbuf *b)
{
    if (b->oom)
        abort();
    return b->s;
}

/*
 * n_words words of plain English drawn from a fixed list by a generator
 * seeded with seed, sentences of 8 to 16 words; appended to b. The same
 * seed gives the same text on every machine.
 */
void wl_words(struct strbuf *b, uint64_t seed, int n_words);

/*
 * Tokens per word of wl_words's text on the server: its POST /tokenize
 * (llama-server's and hearth's {"content"}, else vLLM's {"model","prompt"})
 * on a sample; 1.3 (with note saying so) when it has none. note gets one
 * line for the report.
 */
double wl_tokens_per_word(const struct bench_opts *o, const char *model, char *note,
                          size_t note_len);

/*
 * The prompts of path, one per line (empty lines skipped), or with path NULL
 * the built-in set; *out is malloc'd, as each string. Returns the count, or
 * -1 with err when the file cannot be read or has none.
 */
int wl_load_prompts(const char *path, char ***out, char *err, size_t err_len);

/* ------------------------------------------------------------ request --- */

struct bench_msg {
    const char *role; /* "system", "user", "assistant" */
    const char *content;
};

/* One request to send: a completion prompt, or chat messages. */
struct bench_req {
    bool chat;
    const char *prompt;           /* completion */
    const struct bench_msg *msgs; /* chat */
    int n_msgs;
};

/* What came back, figures in the clock's seconds. */
struct bench_reply {
    enum httpc_outcome outcome;
    int status;        /* HTTP status, 0 when none */
    bool ok;           /* status 200, the stream ended with [DONE], no error inside */
    bool stream_error; /* an error object or malformed JSON in the stream */
    bool done;         /* [DONE] seen */
    double t_start;    /* the request was sent */
    double t_end;      /* the last event arrived */
    double *arrivals;  /* each content-bearing event's arrival (malloc'd) */
    size_t *text_ends; /* text.len after each of those events (malloc'd) */
    int n_arrivals, cap_arrivals;
    struct strbuf text; /* the content (chat: delta.content; completions: text) */
    bool has_usage;
    long usage_prompt, usage_completion, usage_cached;
    char finish[24]; /* the last finish_reason seen, "" when none */
    char err[200];   /* the reason it is not ok */
};

/*
 * Sends r to o's target as a streamed request (model, max_tokens, temperature,
 * ignore_eos, stream_options.include_usage) and fills rep as events arrive;
 * tokens counts content events as they come (for the live progress line;
 * may be NULL). Blocks; thread-safe.
 */
void bench_request(const struct bench_opts *o, const char *model, const struct bench_req *r,
                   struct bench_reply *rep, long *tokens);

/* Output tokens of an ok reply: usage's completion_tokens, else its content events. */
long bench_reply_tokens(const struct bench_reply *rep);

void bench_reply_free(struct bench_reply *rep);

/*
 * The model requests name: o->model, else the first of GET /v1/models;
 * false with err when the server does not answer or lists none.
 */
bool bench_model(const struct bench_opts *o, char *out, size_t out_len, char *err, size_t err_len);

/* ---------------------------------------------------------- figures --- */

/* The p-th percentile (0..100) of v[0..n) by linear interpolation (sorts v); NaN when n is 0. */
double bench_percentile(double *v, size_t n, double p);

#endif
