/*
 * bench.h: `hearth bench`, a load generator and judge for any server that
 * speaks the OpenAI API (hearth, llama-server, vLLM). It never needs the
 * model file: prompts are made of words, sized through the server's
 * /tokenize where it has one. A run is a list of cells (one per concurrency
 * or rate value); each cell sends its requests streamed (SSE) and measures,
 * per request, the time to the first token, the time between tokens and the
 * whole latency, by the arrival of the server's events.
 *
 * Threads: one per request in flight; the caller's thread waits and prints
 * progress. Figures are kept per cell in struct bench_cell, whose columns are
 * listed once, in BENCH_COLUMNS (report.c prints the table, JSON and TSV
 * from it; docs/bench.md documents each).
 */
#ifndef HEARTH_BENCH_H
#define HEARTH_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "bench/httpc.h"

enum bench_workload {
    BENCH_COMPLETION,   /* independent /v1/completions requests */
    BENCH_CHAT,         /* independent /v1/chat/completions requests */
    BENCH_CONVERSATION, /* sessions resending their growing history, chat */
    BENCH_PREFIX_SHARE, /* completions sharing one long prefix, different tails */
};

/* "completion", "chat", "conversation", "prefix-share"; NULL for an unknown value. */
const char *bench_workload_name(enum bench_workload w);
bool bench_workload_parse(const char *s, enum bench_workload *w);

/*
 * The clock the figures are taken by, in seconds. at(ctx, local_port, raw)
 * is the arrival time of the response byte just before raw (the count of raw
 * bytes read on the connection whose client port is local_port; raw 0 is
 * the moment the request is sent). NULL: CLOCK_MONOTONIC at the call, which
 * is the real arrival time. A test gives a clock of its own so that figures
 * come out exact and no test depends on the machine's timing.
 */
struct bench_clock {
    double (*at)(void *ctx, int local_port, uint64_t raw);
    void *ctx;
};

#define BENCH_MAX_CELLS 32

struct bench_opts {
    struct url_target target;
    const char *api_key; /* NULL: none */
    const char *model;   /* NULL: the first of GET /v1/models */
    enum bench_workload workload;
    int prompt_tokens;        /* approximate prompt (or shared prefix, system prompt) size */
    const char *prompts_file; /* completion, chat: prompts taken in turn from this file's
                                 lines instead of made of words; NULL: words */
    int tail_tokens;          /* prefix-share: the different tail's size */
    int max_tokens;           /* per request */
    bool ignore_eos;          /* send ignore_eos (every reply max_tokens long) */
    double temperature;
    int concurrency[BENCH_MAX_CELLS]; /* closed-loop cells; n_concurrency 0 with rates */
    int n_concurrency;
    double rate[BENCH_MAX_CELLS]; /* open-loop cells: Poisson arrivals per second */
    int n_rate;
    int requests;        /* per cell (not conversation: sessions x turns) */
    double duration_s;   /* > 0: a cell sends requests for this long instead */
    int sessions, turns; /* conversation */
    bool own_system;     /* conversation: a system prompt per session, not one shared */
    bool salt;           /* a random prefix per run */
    uint64_t seed;       /* the prompts' words */
    double timeout_s;    /* per request */
    bool progress;       /* a live line on stderr */
    struct bench_clock clock;
    int stop_fd; /* -1, or readable to stop (Ctrl-C): cells end, figures kept */
};

/* The defaults of `hearth bench` (docs/bench.md). target and model left empty. */
void bench_opts_default(struct bench_opts *o);

/* A cell's figures. A percentile is NaN (JSON null) when it had no samples. */
struct bench_cell {
    enum bench_workload workload;
    int concurrency; /* 0 in a rate cell */
    double rate;     /* 0 in a closed-loop cell */
    long requests;   /* finished (errors included; stopped ones not) */
    long errors, errors_http, errors_connection, errors_timeout, errors_protocol;
    long output_tokens; /* usage.completion_tokens summed, else content events */
    long early_stops;   /* replies that stopped before max_tokens despite ignore_eos */
    double duration_s;
    double req_per_s, output_tok_per_s;
    double ttft_ms[3], itl_ms[3], e2e_ms[3]; /* p50, p95, p99 */
    double decode_tok_per_s;           /* median over requests: tokens after the first per second */
    long prompt_tokens, cached_tokens; /* usage summed */
    double ttft_cold_ms_p50, ttft_warm_ms_p50; /* conversation; NaN otherwise */
    int http_status[8], http_count[8];         /* the first 8 distinct error statuses seen */
    char first_error[200];                     /* what the cell's first failed request said */
    bool usage_missing;                        /* some reply carried no usage */
    bool interrupted;                          /* the cell was stopped before its end */
};

struct bench_run {
    char model[256];       /* the model asked for */
    char prompt_note[160]; /* how prompts were sized ("calibrated by /tokenize: ...") */
    struct bench_cell cells[BENCH_MAX_CELLS];
    int n_cells;  /* cells with figures (the interrupted one included) */
    bool stopped; /* stopped by stop_fd */
};

/*
 * Runs every cell of o; false with one sentence in err when the run could
 * not start (no server, no model) — failures of single requests are figures,
 * not failures of the run.
 */
bool bench_run(const struct bench_opts *o, struct bench_run *run, char *err, size_t err_len);

/* ------------------------------------------------------------ report --- */

/*
 * The columns of a cell, once: X(name, kind, expression). kind: s a string,
 * i an integer, f a figure (3 decimals; NaN is null/empty/"-").
 */
/* clang-format off */
#define BENCH_COLUMNS(X)                                                                          \
    X(workload, s, bench_workload_name(c->workload))                                               \
    X(concurrency, i, c->concurrency)                                                              \
    X(rate, f, c->rate)                                                                            \
    X(requests, i, c->requests)                                                                    \
    X(errors, i, c->errors)                                                                        \
    X(errors_http, i, c->errors_http)                                                              \
    X(errors_connection, i, c->errors_connection)                                                  \
    X(errors_timeout, i, c->errors_timeout)                                                        \
    X(errors_protocol, i, c->errors_protocol)                                                      \
    X(output_tokens, i, c->output_tokens)                                                          \
    X(early_stops, i, c->early_stops)                                                              \
    X(duration_s, f, c->duration_s)                                                                \
    X(req_per_s, f, c->req_per_s)                                                                  \
    X(output_tok_per_s, f, c->output_tok_per_s)                                                    \
    X(ttft_ms_p50, f, c->ttft_ms[0])                                                               \
    X(ttft_ms_p95, f, c->ttft_ms[1])                                                               \
    X(ttft_ms_p99, f, c->ttft_ms[2])                                                               \
    X(itl_ms_p50, f, c->itl_ms[0])                                                                 \
    X(itl_ms_p95, f, c->itl_ms[1])                                                                 \
    X(itl_ms_p99, f, c->itl_ms[2])                                                                 \
    X(e2e_ms_p50, f, c->e2e_ms[0])                                                                 \
    X(e2e_ms_p95, f, c->e2e_ms[1])                                                                 \
    X(e2e_ms_p99, f, c->e2e_ms[2])                                                                 \
    X(decode_tok_per_s, f, c->decode_tok_per_s)                                                    \
    X(prompt_tokens, i, c->prompt_tokens)                                                          \
    X(cached_tokens, i, c->cached_tokens)                                                          \
    X(ttft_cold_ms_p50, f, c->ttft_cold_ms_p50)                                                    \
    X(ttft_warm_ms_p50, f, c->ttft_warm_ms_p50)
/* clang-format on */

/* The aligned table (and notes: error statuses, missing usage, early stops) on fp. */
void bench_report_table(FILE *fp, const struct bench_run *run);
/* A JSON array of cells, one object each with exactly the BENCH_COLUMNS names. */
bool bench_report_json(const char *path, const struct bench_run *run, char *err, size_t err_len);
/* A header line of the BENCH_COLUMNS names, then a line per cell, tab-separated. */
bool bench_report_tsv(const char *path, const struct bench_run *run, char *err, size_t err_len);

/* ----------------------------------------------------------- compare --- */

struct bench_compare_opts {
    struct url_target targets[8];
    int n_targets; /* >= 2; the first is the reference */
    const char *api_key;
    const char *model;        /* NULL: each endpoint's first model */
    const char *prompts_file; /* NULL: the built-in prompts */
    int max_tokens;
    bool ignore_eos;
    double timeout_s;
    int stop_fd;
};

/*
 * Sends each prompt at temperature 0 to every target and prints, per prompt,
 * "identical" or the first differing character with both continuations
 * around it. Returns 0 when all are identical, 1 when any differ or a request
 * failed (said on fp), 2 on bad input (err).
 */
int bench_compare(const struct bench_compare_opts *o, FILE *fp, char *err, size_t err_len);

#endif
