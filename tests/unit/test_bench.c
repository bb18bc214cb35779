/*
 * test_bench.c: the runner of `hearth bench` (src/bench/bench.c) in the
 * test's process against the scripted server of tests/util/benchfix, whose
 * virtual clock makes every figure exact: a TTFT of 200 ms is 200.000000,
 * whatever the machine's speed. Faults come from the fixture's script
 * (500s, drops mid-stream, held requests, early stops, missing usage), so
 * each error kind is counted exactly. Also the report's names against
 * BENCH_COLUMNS and docs/bench.md's table, and --compare's verdicts.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"
#include "util/benchfix.h"
#include "util/testutil.h"

/* Figures from the virtual clock are exact up to the arithmetic of doubles. */
#define EXACT_MS 1e-6

/* clang-format off */
#define ASSERT_MS(got, want)                                                                       \
    do {                                                                                           \
        double g_ = (got), w_ = (want);                                                            \
        if (!(fabs(g_ - w_) <= EXACT_MS))                                                          \
            fail_msg("%s is %.9f, expected %.9f", #got, g_, w_);                                   \
    } while (0)
/* clang-format on */

#define NAME_OF(name, kind, expr) #name,
static const char *const columns[] = {BENCH_COLUMNS(NAME_OF)};
#define N_COLUMNS ((int)(sizeof columns / sizeof columns[0]))

static struct benchfix *fix(void)
{
    struct benchfix *fx = benchfix_start();
    assert_non_null(fx);
    return fx;
}

/* Options for a run against fx, timed by its clock; w's workload, the rest the defaults. */
static void opts_for(struct bench_opts *o, struct benchfix *fx, enum bench_workload w)
{
    char err[256];
    bench_opts_default(o);
    if (!url_target_parse(benchfix_url(fx), &o->target, err, sizeof err))
        fail_msg("url_target_parse(%s): %s", benchfix_url(fx), err);
    o->workload  = w;
    o->clock.at  = benchfix_clock_at;
    o->clock.ctx = fx;
    o->stop_fd   = -1;
    o->progress  = false;
    o->timeout_s = 60;
}

static void run_ok(const struct bench_opts *o, struct bench_run *run)
{
    char err[256] = "";
    memset(run, 0, sizeof *run);
    if (!bench_run(o, run, err, sizeof err))
        fail_msg("bench_run failed: %s", err);
}

static cJSON *body_of(struct benchfix *fx, int i)
{
    const struct benchfix_req *r = benchfix_request(fx, i);
    assert_non_null(r);
    cJSON *j = cJSON_Parse(r->body);
    if (!j)
        fail_msg("request %d's body is not JSON: %s", i, r->body);
    return j;
}

static void assert_no_errors(const struct bench_cell *c)
{
    if (c->errors || c->errors_http || c->errors_connection || c->errors_timeout ||
        c->errors_protocol)
        fail_msg("errors %ld (http %ld, connection %ld, timeout %ld, protocol %ld), expected none",
                 c->errors, c->errors_http, c->errors_connection, c->errors_timeout,
                 c->errors_protocol);
}

/* --------------------------------------------------------------- figures --- */

/*
 * 8 requests of 32 tokens per cell, concurrency 1 and 4, the first token
 * 200 ms after the request, then one every 20 ms: every percentile is that,
 * whole latency 200 + 31 * 20 ms, 256 tokens a cell.
 */
static void figures(enum bench_workload w)
{
    struct benchfix *fx = fix();
    benchfix_set_default(fx, &(struct benchfix_step){
                                 .n_tokens = 32, .ttft_ms = 200, .itl_ms = 20, .cached_tokens = 5});
    struct bench_opts o;
    opts_for(&o, fx, w);
    o.concurrency[0] = 1;
    o.concurrency[1] = 4;
    o.n_concurrency  = 2;
    o.requests       = 8;
    o.max_tokens     = 32;
    o.prompt_tokens  = 40;
    struct bench_run run;
    run_ok(&o, &run);

    assert_string_equal(run.model, BENCHFIX_MODEL);
    assert_false(run.stopped);
    assert_int_equal(run.n_cells, 2);
    assert_int_equal(benchfix_n_requests(fx), 16);
    for (int ci = 0; ci < 2; ci++) {
        const struct bench_cell *c = &run.cells[ci];
        print_message("# %s c=%d: ttft %.6f/%.6f/%.6f itl %.6f/%.6f/%.6f e2e %.6f/%.6f/%.6f "
                      "prompt %ld cached %ld\n",
                      bench_workload_name(w), c->concurrency, c->ttft_ms[0], c->ttft_ms[1],
                      c->ttft_ms[2], c->itl_ms[0], c->itl_ms[1], c->itl_ms[2], c->e2e_ms[0],
                      c->e2e_ms[1], c->e2e_ms[2], c->prompt_tokens, c->cached_tokens);
        assert_int_equal(c->workload, w);
        assert_int_equal(c->concurrency, ci == 0 ? 1 : 4);
        assert_true(c->rate == 0);
        assert_int_equal(c->requests, 8);
        assert_no_errors(c);
        assert_int_equal(c->output_tokens, 8 * 32);
        assert_int_equal(c->early_stops, 0);
        assert_false(c->usage_missing);
        assert_false(c->interrupted);
        for (int p = 0; p < 3; p++) {
            ASSERT_MS(c->ttft_ms[p], 200.0);
            ASSERT_MS(c->itl_ms[p], 20.0);
            ASSERT_MS(c->e2e_ms[p], 200.0 + 31 * 20.0);
        }
        /* 31 tokens after the first, 20 ms apart */
        assert_true(fabs(c->decode_tok_per_s - 50.0) < 1e-6);
        assert_true(isnan(c->ttft_cold_ms_p50));
        assert_true(isnan(c->ttft_warm_ms_p50));
        assert_true(c->duration_s > 0);
        assert_true(c->req_per_s > 0);
        assert_true(c->output_tok_per_s > 0);
        /* cells run one after the other: this cell's requests are the fixture's 8ci..8ci+7 */
        long prompt = 0;
        for (int i = 8 * ci; i < 8 * ci + 8; i++)
            prompt += benchfix_request(fx, i)->prompt_words;
        assert_int_equal(c->prompt_tokens, prompt);
        assert_int_equal(c->cached_tokens, 8 * 5);
    }

    /* what each request asked for */
    assert_true(benchfix_n_models(fx) >= 1);
    for (int i = 0; i < 16; i++) {
        const struct benchfix_req *r = benchfix_request(fx, i);
        cJSON *b                     = body_of(fx, i);
        assert_int_equal(r->chat, w == BENCH_CHAT);
        assert_true(cJSON_IsTrue(cJSON_GetObjectItem(b, "stream")));
        assert_true(cJSON_IsTrue(
            cJSON_GetObjectItem(cJSON_GetObjectItem(b, "stream_options"), "include_usage")));
        assert_true(cJSON_IsTrue(cJSON_GetObjectItem(b, "ignore_eos")));
        const cJSON *mt = cJSON_GetObjectItem(b, "max_tokens");
        assert_true(cJSON_IsNumber(mt));
        assert_int_equal(mt->valueint, 32);
        const cJSON *temp = cJSON_GetObjectItem(b, "temperature");
        assert_true(cJSON_IsNumber(temp));
        assert_true(temp->valuedouble == 0);
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(b, "model")), BENCHFIX_MODEL);
        if (w == BENCH_CHAT)
            assert_true(cJSON_GetArraySize(cJSON_GetObjectItem(b, "messages")) >= 1);
        else
            assert_non_null(cJSON_GetStringValue(cJSON_GetObjectItem(b, "prompt")));
        /* sized through /tokenize (a token per word here): about --prompt-tokens words */
        if (r->prompt_words < 36 || r->prompt_words > 44)
            fail_msg("request %d: a prompt of %d words for --prompt-tokens 40", i, r->prompt_words);
        cJSON_Delete(b);
    }
    assert_true(benchfix_n_tokenize(fx) >= 1);
    benchfix_stop(fx);
}

static void test_completion_figures(void **state)
{
    figures(BENCH_COMPLETION);
}

static void test_chat_figures(void **state)
{
    figures(BENCH_CHAT);
}

/* Open-loop cells count and time their requests as closed-loop ones do. */
static void test_rate_cell(void **state)
{
    struct benchfix *fx = fix();
    benchfix_set_default(fx, &(struct benchfix_step){.n_tokens = 32, .ttft_ms = 200, .itl_ms = 20});
    struct bench_opts o;
    opts_for(&o, fx, BENCH_COMPLETION);
    o.n_concurrency = 0;
    o.rate[0]       = 200;
    o.n_rate        = 1;
    o.requests      = 8;
    o.max_tokens    = 32;
    struct bench_run run;
    run_ok(&o, &run);
    assert_int_equal(run.n_cells, 1);
    const struct bench_cell *c = &run.cells[0];
    assert_int_equal(c->concurrency, 0);
    assert_true(c->rate == 200);
    assert_int_equal(c->requests, 8);
    assert_no_errors(c);
    assert_int_equal(c->output_tokens, 8 * 32);
    ASSERT_MS(c->ttft_ms[0], 200.0);
    ASSERT_MS(c->itl_ms[0], 20.0);
    benchfix_stop(fx);
}

/* ----------------------------------------------------------------- faults --- */

/*
 * 500s and drops mid-stream, mixed with good requests, in both cells: each
 * kind counted exactly and the run goes on. The rule (bench.h, struct
 * bench_cell): requests counts every finished request, errors included;
 * output_tokens counts the tokens of the replies that succeeded only, so
 * the tokens a dropped request had streamed before the drop are not output.
 */
static void test_faults_counted_by_kind(void **state)
{
    struct benchfix *fx           = fix();
    const struct benchfix_step ok = {.n_tokens = 32, .ttft_ms = 200, .itl_ms = 20};
    struct benchfix_step e500 = ok, drop5 = ok, drop0 = ok, evt = ok;
    e500.fault                            = BENCHFIX_HTTP_500;
    drop5.fault                           = BENCHFIX_DROP;
    drop5.k                               = 5;
    drop0.fault                           = BENCHFIX_DROP;
    drop0.k                               = 0;
    evt.fault                             = BENCHFIX_ERROR_EVENT;
    evt.k                                 = 7;
    const struct benchfix_step script[16] = {ok,    e500, drop5, evt, e500, drop0, ok,    ok,
                                             drop5, ok,   e500,  ok,  evt,  ok,    drop0, e500};
    benchfix_script(fx, script, 16);
    benchfix_set_default(fx, &ok);
    struct bench_opts o;
    opts_for(&o, fx, BENCH_COMPLETION);
    o.concurrency[0] = 1;
    o.concurrency[1] = 4;
    o.n_concurrency  = 2;
    o.requests       = 8;
    o.max_tokens     = 32;
    struct bench_run run;
    run_ok(&o, &run);
    assert_int_equal(run.n_cells, 2);
    assert_int_equal(benchfix_n_requests(fx), 16);
    const int n_http[2] = {2, 2}, n_conn[2] = {2, 2}, n_proto[2] = {1, 1}, n_good[2] = {3, 3};
    for (int ci = 0; ci < 2; ci++) {
        const struct bench_cell *c = &run.cells[ci];
        print_message("# c=%d: requests %ld errors %ld http %ld conn %ld output %ld\n",
                      c->concurrency, c->requests, c->errors, c->errors_http, c->errors_connection,
                      c->output_tokens);
        assert_int_equal(c->requests, 8);
        assert_int_equal(c->errors_http, n_http[ci]);
        assert_int_equal(c->errors_connection, n_conn[ci]);
        assert_int_equal(c->errors_timeout, 0);
        /* an error object inside a 200 stream (docs/bench.md: errors_protocol) */
        assert_int_equal(c->errors_protocol, n_proto[ci]);
        assert_int_equal(c->errors, n_http[ci] + n_conn[ci] + n_proto[ci]);
        assert_int_equal(c->output_tokens, n_good[ci] * 32);
        /* docs/bench.md: successful requests, and output tokens, per second of duration_s */
        assert_true(c->duration_s > 0);
        assert_true(fabs(c->req_per_s - n_good[ci] / c->duration_s) <= 1e-9 * c->req_per_s);
        assert_true(fabs(c->output_tok_per_s - c->output_tokens / c->duration_s) <=
                    1e-9 * c->output_tok_per_s);
        assert_int_equal(c->http_status[0], 500);
        assert_int_equal(c->http_count[0], n_http[ci]);
        assert_int_equal(c->http_status[1], 0);
        /* every reply that came has the script's timing */
        ASSERT_MS(c->ttft_ms[0], 200.0);
        ASSERT_MS(c->itl_ms[0], 20.0);
        ASSERT_MS(c->e2e_ms[0], 200.0 + 31 * 20.0);
    }
    benchfix_stop(fx);
}

/*
 * --duration: requests are sent for that long; however many that is (it
 * depends on the machine), each finished one is counted with its tokens.
 */
static void test_duration(void **state)
{
    struct benchfix *fx = fix();
    benchfix_set_default(fx, &(struct benchfix_step){.n_tokens = 8, .ttft_ms = 200, .itl_ms = 20});
    struct bench_opts o;
    opts_for(&o, fx, BENCH_COMPLETION);
    o.concurrency[0] = 2;
    o.n_concurrency  = 1;
    o.duration_s     = 0.2;
    o.max_tokens     = 8;
    struct bench_run run;
    run_ok(&o, &run);
    const struct bench_cell *c = &run.cells[0];
    print_message("# %ld requests in %.3f s\n", c->requests, c->duration_s);
    assert_true(c->requests >= 1);
    assert_no_errors(c);
    assert_int_equal(c->output_tokens, 8 * c->requests);
    assert_true(benchfix_n_requests(fx) >= c->requests);
    ASSERT_MS(c->ttft_ms[0], 200.0);
    ASSERT_MS(c->e2e_ms[2], 200.0 + 7 * 20.0);
    benchfix_stop(fx);
}

/* --api-key goes as a bearer token on every request; --model names the model asked for. */
static void test_api_key_and_model(void **state)
{
    struct benchfix *fx = fix();
    struct bench_opts o;
    opts_for(&o, fx, BENCH_CHAT);
    o.requests   = 3;
    o.max_tokens = 4;
    o.api_key    = "sekrit";
    o.model      = "other-model";
    struct bench_run run;
    run_ok(&o, &run);
    assert_string_equal(run.model, "other-model");
    assert_int_equal(run.cells[0].requests, 3);
    assert_no_errors(&run.cells[0]);
    assert_int_equal(benchfix_n_requests(fx), 3);
    for (int i = 0; i < 3; i++) {
        const struct benchfix_req *r = benchfix_request(fx, i);
        assert_non_null(r->authorization);
        assert_string_equal(r->authorization, "Bearer sekrit");
        cJSON *b = body_of(fx, i);
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(b, "model")), "other-model");
        cJSON_Delete(b);
    }
    benchfix_stop(fx);
}

/* --prompts: completion requests take the file's lines in turn; the words are not asked for. */
static void test_prompts_file(void **state)
{
    struct benchfix *fx = fix();
    char *dir           = tu_tmpdir();
    char path[512];
    snprintf(path, sizeof path, "%s/prompts.txt", dir);
    static const char lines[] = "first prompt\n\nsecond one here\nthird\n";
    assert_int_equal(tu_write_file(path, lines, sizeof lines - 1), 0);
    struct bench_opts o;
    opts_for(&o, fx, BENCH_COMPLETION);
    o.requests     = 6;
    o.max_tokens   = 2;
    o.prompts_file = path;
    struct bench_run run;
    run_ok(&o, &run);
    assert_no_errors(&run.cells[0]);
    assert_int_equal(benchfix_n_tokenize(fx), 0);
    static const char *const want[] = {"first prompt", "second one here", "third"};
    assert_int_equal(benchfix_n_requests(fx), 6);
    for (int i = 0; i < 6; i++) {
        cJSON *b = body_of(fx, i);
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(b, "prompt")), want[i % 3]);
        cJSON_Delete(b);
    }
    /* a conversation cannot take them */
    o.workload = BENCH_CONVERSATION;
    char err[300];
    assert_false(bench_run(&o, &run, err, sizeof err));
    assert_non_null(strstr(err, "--prompts applies to the completion and chat workloads"));
    tu_rmtree(dir);
    free(dir);
    benchfix_stop(fx);
}

/* The prompts of one run of 4 completions, malloc'd. */
static void run_prompts(uint64_t seed, bool salt, char *prompts[4])
{
    struct benchfix *fx = fix();
    struct bench_opts o;
    opts_for(&o, fx, BENCH_COMPLETION);
    o.requests   = 4;
    o.max_tokens = 2;
    o.seed       = seed;
    o.salt       = salt;
    struct bench_run run;
    run_ok(&o, &run);
    assert_int_equal(benchfix_n_requests(fx), 4);
    for (int i = 0; i < 4; i++) {
        cJSON *b   = body_of(fx, i);
        prompts[i] = strdup(cJSON_GetStringValue(cJSON_GetObjectItem(b, "prompt")));
        cJSON_Delete(b);
    }
    benchfix_stop(fx);
}

/* The sorted prompts of two runs are the same. */
static bool same_prompts(char *a[4], char *b[4])
{
    int used[4] = {0};
    for (int i = 0; i < 4; i++) {
        bool found = false;
        for (int k = 0; k < 4 && !found; k++)
            if (!used[k] && !strcmp(a[i], b[k]))
                found = (used[k] = 1);
        if (!found)
            return false;
    }
    return true;
}

/* --seed makes the prompts (the same seed, the same prompts); --salt makes every run's new. */
static void test_seed_and_salt(void **state)
{
    char *a[4], *b[4], *c[4], *d[4];
    run_prompts(7, false, a);
    run_prompts(7, false, b);
    run_prompts(8, false, c);
    run_prompts(7, true, d);
    assert_true(same_prompts(a, b));
    assert_false(same_prompts(a, c));
    assert_false(same_prompts(a, d));
    /* within a run, the prompts differ */
    for (int i = 0; i < 4; i++)
        for (int k = i + 1; k < 4; k++)
            assert_true(strcmp(a[i], a[k]) != 0);
    for (int i = 0; i < 4; i++) {
        free(a[i]);
        free(b[i]);
        free(c[i]);
        free(d[i]);
    }
}

/*
 * A percentile without samples is NaN (bench.h): a cell whose every request
 * failed has no latency at all, and replies of one token have no gap.
 */
static void test_no_samples_is_nan(void **state)
{
    struct benchfix *fx = fix();
    benchfix_set_default(fx, &(struct benchfix_step){.fault = BENCHFIX_HTTP_500});
    struct bench_opts o;
    opts_for(&o, fx, BENCH_COMPLETION);
    o.requests   = 3;
    o.max_tokens = 4;
    struct bench_run run;
    run_ok(&o, &run);
    const struct bench_cell *c = &run.cells[0];
    assert_int_equal(c->requests, 3);
    assert_int_equal(c->errors_http, 3);
    assert_int_equal(c->output_tokens, 0);
    assert_true(c->req_per_s == 0);
    for (int p = 0; p < 3; p++) {
        assert_true(isnan(c->ttft_ms[p]));
        assert_true(isnan(c->itl_ms[p]));
        assert_true(isnan(c->e2e_ms[p]));
    }
    benchfix_stop(fx);

    fx = fix();
    benchfix_set_default(fx, &(struct benchfix_step){.n_tokens = 1, .ttft_ms = 200, .itl_ms = 20});
    opts_for(&o, fx, BENCH_COMPLETION);
    o.requests   = 3;
    o.max_tokens = 1;
    run_ok(&o, &run);
    c = &run.cells[0];
    assert_no_errors(c);
    assert_int_equal(c->output_tokens, 3);
    ASSERT_MS(c->ttft_ms[1], 200.0);
    ASSERT_MS(c->e2e_ms[1], 200.0);
    assert_true(isnan(c->itl_ms[0]));
    benchfix_stop(fx);
}

/* Without usage in the replies, output is counted from the content events; the cell says so. */
static void no_usage(enum bench_workload w)
{
    struct benchfix *fx = fix();
    benchfix_set_default(
        fx, &(struct benchfix_step){
                .n_tokens = 32, .ttft_ms = 200, .itl_ms = 20, .fault = BENCHFIX_NO_USAGE});
    struct bench_opts o;
    opts_for(&o, fx, w);
    o.requests   = 8;
    o.max_tokens = 32;
    struct bench_run run;
    run_ok(&o, &run);
    assert_int_equal(run.n_cells, 1);
    const struct bench_cell *c = &run.cells[0];
    assert_int_equal(c->requests, 8);
    assert_no_errors(c);
    /* chat's first event (delta.role, content "") is no token */
    assert_int_equal(c->output_tokens, 8 * 32);
    assert_true(c->usage_missing);
    assert_int_equal(c->prompt_tokens, 0);
    assert_int_equal(c->cached_tokens, 0);
    ASSERT_MS(c->ttft_ms[0], 200.0);
    ASSERT_MS(c->itl_ms[0], 20.0);
    benchfix_stop(fx);
}

static void test_no_usage_completion(void **state)
{
    no_usage(BENCH_COMPLETION);
}

static void test_no_usage_chat(void **state)
{
    no_usage(BENCH_CHAT);
}

/*
 * A server that ignores ignore_eos: 3 of 8 replies stop after 10 tokens
 * with finish_reason "stop". They are early stops, not errors, and their
 * tokens are output; without ignore_eos asked, a short reply is no early stop.
 */
static void test_early_stops(void **state)
{
    for (int ignore = 1; ignore >= 0; ignore--) {
        struct benchfix *fx                  = fix();
        const struct benchfix_step ok        = {.n_tokens = 32, .ttft_ms = 200, .itl_ms = 20};
        struct benchfix_step stop            = ok;
        stop.fault                           = BENCHFIX_STOP_EARLY;
        stop.k                               = 10;
        const struct benchfix_step script[8] = {ok, stop, ok, ok, stop, ok, stop, ok};
        benchfix_script(fx, script, 8);
        struct bench_opts o;
        opts_for(&o, fx, BENCH_COMPLETION);
        o.requests   = 8;
        o.max_tokens = 32;
        o.ignore_eos = ignore;
        struct bench_run run;
        run_ok(&o, &run);
        const struct bench_cell *c = &run.cells[0];
        assert_int_equal(c->requests, 8);
        assert_no_errors(c);
        assert_int_equal(c->output_tokens, 5 * 32 + 3 * 10);
        assert_int_equal(c->early_stops, ignore ? 3 : 0);
        cJSON *b        = body_of(fx, 0);
        const cJSON *ie = cJSON_GetObjectItem(b, "ignore_eos");
        if (ignore)
            assert_true(cJSON_IsTrue(ie));
        else
            assert_false(cJSON_IsTrue(ie));
        cJSON_Delete(b);
        benchfix_stop(fx);
    }
}

/* A request the server holds past --timeout is a timeout error; the next one still runs. */
static void test_timeout(void **state)
{
    struct benchfix *fx                  = fix();
    const struct benchfix_step ok        = {.n_tokens = 32, .ttft_ms = 200, .itl_ms = 20};
    const struct benchfix_step script[2] = {{.fault = BENCHFIX_HOLD}, ok};
    benchfix_script(fx, script, 2);
    struct bench_opts o;
    opts_for(&o, fx, BENCH_COMPLETION);
    o.requests   = 2;
    o.max_tokens = 32;
    o.timeout_s  = 0.5;
    struct bench_run run;
    run_ok(&o, &run);
    const struct bench_cell *c = &run.cells[0];
    assert_int_equal(c->requests, 2);
    assert_int_equal(c->errors, 1);
    assert_int_equal(c->errors_timeout, 1);
    assert_int_equal(c->output_tokens, 32);
    benchfix_stop(fx);
}

/* ---------------------------------------------------------------- stopping --- */

struct bg_run {
    struct bench_opts o;
    struct bench_run run;
    bool ok;
    char err[256];
};

static void *bg_main(void *arg)
{
    struct bg_run *b = arg;
    b->ok            = bench_run(&b->o, &b->run, b->err, sizeof b->err);
    return NULL;
}

/*
 * stop_fd (Ctrl-C): three requests answered, the fourth held by the
 * fixture; the stop ends the run with the three measured, the held one not
 * counted (stopped requests are not finished ones) and the cell marked
 * interrupted.
 */
static void test_stop_fd(void **state)
{
    struct benchfix *fx                  = fix();
    const struct benchfix_step ok        = {.n_tokens = 32, .ttft_ms = 200, .itl_ms = 20};
    const struct benchfix_step script[4] = {ok, ok, ok, {.fault = BENCHFIX_HOLD}};
    benchfix_script(fx, script, 4);
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    struct bg_run *b = calloc(1, sizeof *b);
    assert_non_null(b);
    opts_for(&b->o, fx, BENCH_COMPLETION);
    b->o.concurrency[0] = 1;
    b->o.concurrency[1] = 4;
    b->o.n_concurrency  = 2;
    b->o.requests       = 8;
    b->o.max_tokens     = 32;
    b->o.stop_fd        = pfd[0];
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, bg_main, b), 0);
    bool held = benchfix_wait_held(fx, 1, 60);
    assert_int_equal(write(pfd[1], "x", 1), 1);
    pthread_join(th, NULL);
    assert_true(held);
    if (!b->ok)
        fail_msg("bench_run failed: %s", b->err);
    assert_true(b->run.stopped);
    assert_int_equal(b->run.n_cells, 1);
    const struct bench_cell *c = &b->run.cells[0];
    assert_true(c->interrupted);
    assert_int_equal(c->requests, 3);
    assert_no_errors(c);
    assert_int_equal(c->output_tokens, 3 * 32);
    ASSERT_MS(c->ttft_ms[0], 200.0);
    close(pfd[0]);
    close(pfd[1]);
    free(b);
    benchfix_stop(fx);
}

/* No server: the run cannot start, and says so in one sentence. */
static void test_no_server(void **state)
{
    struct benchfix *fx = fix();
    struct bench_opts o;
    opts_for(&o, fx, BENCH_COMPLETION);
    benchfix_stop(fx); /* its port now has no listener */
    struct bench_run run;
    char err[256] = "";
    memset(&run, 0, sizeof run);
    assert_false(bench_run(&o, &run, err, sizeof err));
    print_message("# %s\n", err);
    assert_true(strlen(err) > 0);
    assert_null(strchr(err, '\n'));
}

/* ------------------------------------------------------------ conversation --- */

static bool same_message(const cJSON *a, const cJSON *b)
{
    return cJSON_Compare(cJSON_GetObjectItem(a, "role"), cJSON_GetObjectItem(b, "role"), true) &&
           cJSON_Compare(cJSON_GetObjectItem(a, "content"), cJSON_GetObjectItem(b, "content"),
                         true);
}

/*
 * 3 sessions of 3 turns, 2 at a time: 9 chat requests; turn t resends the
 * system prompt, t user messages and the t-1 replies the fixture gave the
 * same session, word for word. First turns take 300 ms to the first token,
 * later ones 100 ms: the cold and warm medians.
 */
static void test_conversation(void **state)
{
    struct benchfix *fx = fix();
    benchfix_set_default(
        fx,
        &(struct benchfix_step){.n_tokens = 8, .ttft_ms = 100, .itl_ms = 10, .ttft_first_ms = 300});
    struct bench_opts o;
    opts_for(&o, fx, BENCH_CONVERSATION);
    o.concurrency[0] = 2;
    o.n_concurrency  = 1;
    o.sessions       = 3;
    o.turns          = 3;
    o.prompt_tokens  = 40;
    o.max_tokens     = 8;
    struct bench_run run;
    run_ok(&o, &run);
    assert_int_equal(run.n_cells, 1);
    const struct bench_cell *c = &run.cells[0];
    assert_int_equal(c->workload, BENCH_CONVERSATION);
    assert_int_equal(c->requests, 9);
    assert_no_errors(c);
    assert_int_equal(c->output_tokens, 9 * 8);
    ASSERT_MS(c->ttft_cold_ms_p50, 300.0);
    ASSERT_MS(c->ttft_warm_ms_p50, 100.0);
    ASSERT_MS(c->itl_ms[0], 10.0);

    int n = benchfix_n_requests(fx);
    assert_int_equal(n, 9);
    cJSON *bodies[9] = {0};
    int per_turn[4]  = {0};
    for (int i = 0; i < n; i++)
        bodies[i] = body_of(fx, i);
    const cJSON *system0 = cJSON_GetArrayItem(cJSON_GetObjectItem(bodies[0], "messages"), 0);
    for (int i = 0; i < n; i++) {
        const cJSON *msgs = cJSON_GetObjectItem(bodies[i], "messages");
        int len           = cJSON_GetArraySize(msgs);
        assert_true(benchfix_request(fx, i)->chat);
        /* system, then user / assistant alternating, ending with a user message */
        assert_true(len >= 2 && len % 2 == 0);
        int t = len / 2;
        assert_true(t <= 3);
        per_turn[t]++;
        assert_string_equal(
            cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(msgs, 0), "role")),
            "system");
        assert_true(same_message(cJSON_GetArrayItem(msgs, 0), system0));
        for (int m = 1; m < len; m++)
            assert_string_equal(
                cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(msgs, m), "role")),
                m % 2 ? "user" : "assistant");
        /* reply j (message 2j) is what the fixture answered the earlier request of this session */
        for (int j = 1; j < t; j++) {
            int found = -1;
            for (int q = 0; q < i && found < 0; q++) {
                const cJSON *qm = cJSON_GetObjectItem(bodies[q], "messages");
                if (cJSON_GetArraySize(qm) != 2 * j)
                    continue;
                bool prefix = true;
                for (int m = 0; m < 2 * j && prefix; m++)
                    prefix = same_message(cJSON_GetArrayItem(qm, m), cJSON_GetArrayItem(msgs, m));
                if (prefix)
                    found = q;
            }
            if (found < 0)
                fail_msg("request %d (turn %d): no earlier request has its first %d messages", i, t,
                         2 * j);
            const char *content = cJSON_GetStringValue(
                cJSON_GetObjectItem(cJSON_GetArrayItem(msgs, 2 * j), "content"));
            assert_non_null(content);
            assert_string_equal(content, benchfix_request(fx, found)->reply);
        }
    }
    assert_int_equal(per_turn[1], 3);
    assert_int_equal(per_turn[2], 3);
    assert_int_equal(per_turn[3], 3);
    /* the sessions' first user messages differ (else a session is not one of its own) */
    for (int i = 0; i < n; i++)
        for (int k = i + 1; k < n; k++) {
            const cJSON *a = cJSON_GetObjectItem(bodies[i], "messages");
            const cJSON *b = cJSON_GetObjectItem(bodies[k], "messages");
            if (cJSON_GetArraySize(a) == 2 && cJSON_GetArraySize(b) == 2)
                assert_false(same_message(cJSON_GetArrayItem(a, 1), cJSON_GetArrayItem(b, 1)));
        }
    for (int i = 0; i < n; i++)
        cJSON_Delete(bodies[i]);
    benchfix_stop(fx);
}

/* ------------------------------------------------------------ prefix-share --- */

static int words_in(const char *s, size_t len)
{
    int n = 0;
    for (size_t i = 0; i < len; i++)
        if (s[i] != ' ' && s[i] != '\n' && (i == 0 || s[i - 1] == ' ' || s[i - 1] == '\n'))
            n++;
    return n;
}

/* Every prompt starts with the same prefix of about --prompt-tokens words; the tails differ. */
static void test_prefix_share(void **state)
{
    struct benchfix *fx = fix();
    benchfix_set_default(fx, &(struct benchfix_step){.n_tokens = 4, .ttft_ms = 50, .itl_ms = 5});
    struct bench_opts o;
    opts_for(&o, fx, BENCH_PREFIX_SHARE);
    o.requests      = 6;
    o.prompt_tokens = 64;
    o.tail_tokens   = 8;
    o.max_tokens    = 4;
    struct bench_run run;
    run_ok(&o, &run);
    const struct bench_cell *c = &run.cells[0];
    assert_int_equal(c->workload, BENCH_PREFIX_SHARE);
    assert_int_equal(c->requests, 6);
    assert_no_errors(c);
    assert_int_equal(c->output_tokens, 6 * 4);
    int n = benchfix_n_requests(fx);
    assert_int_equal(n, 6);
    cJSON *b[6]      = {0};
    const char *p[6] = {0};
    for (int i = 0; i < n; i++) {
        b[i] = body_of(fx, i);
        assert_false(benchfix_request(fx, i)->chat);
        p[i] = cJSON_GetStringValue(cJSON_GetObjectItem(b[i], "prompt"));
        assert_non_null(p[i]);
    }
    size_t common = strlen(p[0]);
    for (int i = 1; i < n; i++) {
        size_t k = 0;
        while (k < common && p[i][k] == p[0][k])
            k++;
        common = k;
    }
    int shared = words_in(p[0], common);
    print_message("# shared prefix: %d words; prompts of %d words\n", shared,
                  benchfix_request(fx, 0)->prompt_words);
    if (shared < 58 || shared > 72)
        fail_msg("the prompts share %d words, expected about 64", shared);
    for (int i = 0; i < n; i++)
        for (int k = i + 1; k < n; k++)
            if (!strcmp(p[i], p[k]))
                fail_msg("prompts %d and %d are the same: tails must differ", i, k);
    for (int i = 0; i < n; i++)
        cJSON_Delete(b[i]);
    benchfix_stop(fx);
}

/* ----------------------------------------------------------------- report --- */

/* A run of one cell with every figure set, conversation figures NaN. */
static void sample_run(struct bench_run *run)
{
    memset(run, 0, sizeof *run);
    snprintf(run->model, sizeof run->model, "m");
    run->n_cells = 2;
    for (int i = 0; i < 2; i++) {
        struct bench_cell *c = &run->cells[i];
        c->workload          = i ? BENCH_CONVERSATION : BENCH_CHAT;
        c->concurrency       = 4 + i;
        c->requests          = 8 + i;
        c->errors            = 3;
        c->errors_http       = 1;
        c->errors_connection = 1;
        c->errors_timeout    = 1;
        c->output_tokens     = 256;
        c->early_stops       = 2;
        c->duration_s        = 1.5;
        c->req_per_s         = 5.25;
        c->output_tok_per_s  = 170.5;
        for (int p = 0; p < 3; p++) {
            c->ttft_ms[p] = 200 + p;
            c->itl_ms[p]  = 20 + p;
            c->e2e_ms[p]  = 820 + p;
        }
        c->prompt_tokens    = 320;
        c->cached_tokens    = 64;
        c->ttft_cold_ms_p50 = i ? 300.25 : NAN;
        c->ttft_warm_ms_p50 = i ? 100.125 : NAN;
    }
}

/*
 * The names docs/bench.md documents for `hearth bench`'s columns: the first
 * column, in backquotes, of the table (under a heading that names `hearth
 * bench`) that lists ttft_ms_p50. NULL-terminated, malloc'd; NULL when there
 * is no such table.
 */
static char **readme_columns(int *n)
{
    char *md = tu_read_file(HEARTH_TOP "/docs/bench.md", NULL);
    assert_non_null(md);
    char **names = NULL;
    *n           = 0;
    int level    = 0; /* the heading level of the bench section we are in, 0 outside */
    char **table = NULL;
    int n_table  = 0;
    bool want    = false;
    bool code    = false; /* inside a ``` block, where '#' starts no heading */
    for (char *line = strtok(md, "\n"); line; line = strtok(NULL, "\n")) {
        if (!strncmp(line, "```", 3))
            code = !code;
        if (line[0] == '#' && !code) {
            int l = 0;
            while (line[l] == '#')
                l++;
            if (level && l <= level)
                level = 0;
            if (!level && strstr(line, "hearth bench"))
                level = l;
        }
        bool row = level && line[0] == '|';
        if (row) {
            /* every `name` of the first cell (a row may document several) */
            char *bar = strchr(line + 1, '|');
            for (char *a = strchr(line + 1, '`'); a && (!bar || a < bar); a = strchr(a + 1, '`')) {
                char *z = strchr(a + 1, '`');
                if (!z || (bar && z > bar))
                    break;
                table            = realloc(table, (size_t)(n_table + 2) * sizeof *table);
                table[n_table++] = strndup(a + 1, (size_t)(z - a - 1));
                table[n_table]   = NULL;
                if (!strcmp(table[n_table - 1], "ttft_ms_p50"))
                    want = true;
                a = z;
            }
        }
        if (!row && table) {
            if (want && !names) {
                names = table;
                *n    = n_table;
            } else {
                for (int i = 0; i < n_table; i++)
                    free(table[i]);
                free(table);
            }
            table   = NULL;
            n_table = 0;
            want    = false;
        }
    }
    if (table) {
        if (want && !names) {
            names = table;
            *n    = n_table;
        } else {
            for (int i = 0; i < n_table; i++)
                free(table[i]);
            free(table);
        }
    }
    free(md);
    return names;
}

/* One column of a JSON cell: its key is name, its value the cell's (null for a NaN figure). */
static const cJSON *json_col(const cJSON *f, int cell, const char *name)
{
    if (!f || !f->string || strcmp(f->string, name))
        fail_msg("cell %d: key %s where %s was expected", cell,
                 f && f->string ? f->string : "(none)", name);
    return f;
}

static const cJSON *json_s(const cJSON *f, int cell, const char *name, const char *want)
{
    json_col(f, cell, name);
    if (!cJSON_IsString(f) || strcmp(f->valuestring, want))
        fail_msg("cell %d: %s is not \"%s\"", cell, name, want);
    return f->next;
}

static const cJSON *json_i(const cJSON *f, int cell, const char *name, long want)
{
    json_col(f, cell, name);
    if (!cJSON_IsNumber(f) || f->valuedouble != (double)want)
        fail_msg("cell %d: %s is %g, expected %ld", cell, name, f->valuedouble, want);
    return f->next;
}

static const cJSON *json_f(const cJSON *f, int cell, const char *name, double want)
{
    json_col(f, cell, name);
    if (isnan(want)) {
        if (!cJSON_IsNull(f))
            fail_msg("cell %d: %s is not null for a figure without samples", cell, name);
    } else if (!cJSON_IsNumber(f) || fabs(f->valuedouble - want) > 0.0005) {
        fail_msg("cell %d: %s is %g, expected %.3f", cell, name, f->valuedouble, want);
    }
    return f->next;
}

#define JSON_COL(name, kind, expr) f = json_##kind(f, ci, #name, expr);

/* --json: an array of cells, each with exactly the BENCH_COLUMNS names in order and its values. */
static void test_report_json(void **state)
{
    struct bench_run run;
    sample_run(&run);
    char *dir = tu_tmpdir();
    char path[512], err[256] = "";
    snprintf(path, sizeof path, "%s/run.json", dir);
    if (!bench_report_json(path, &run, err, sizeof err))
        fail_msg("bench_report_json: %s", err);
    char *text = tu_read_file(path, NULL);
    assert_non_null(text);
    cJSON *arr = cJSON_Parse(text);
    if (!cJSON_IsArray(arr))
        fail_msg("--json wrote no JSON array: %s", text);
    assert_int_equal(cJSON_GetArraySize(arr), 2);
    for (int ci = 0; ci < 2; ci++) {
        const struct bench_cell *c = &run.cells[ci];
        const cJSON *cell          = cJSON_GetArrayItem(arr, ci);
        assert_true(cJSON_IsObject(cell));
        const cJSON *f = cell->child;
        BENCH_COLUMNS(JSON_COL)
        if (f)
            fail_msg("cell %d: key %s is no column", ci, f->string);
    }
    cJSON_Delete(arr);
    free(text);

    /* a file that cannot be written: one sentence, false */
    snprintf(path, sizeof path, "%s/no/such/dir/run.json", dir);
    err[0] = 0;
    assert_false(bench_report_json(path, &run, err, sizeof err));
    assert_true(strlen(err) > 0);
    tu_rmtree(dir);
    free(dir);
}

/* One TSV field against the cell's value: figures with 3 decimals, NaN empty. */
static void tsv_s(const char *field, const char *name, const char *want)
{
    if (strcmp(field, want))
        fail_msg("tsv %s is \"%s\", expected \"%s\"", name, field, want);
}

static void tsv_i(const char *field, const char *name, long want)
{
    char *end;
    long v = strtol(field, &end, 10);
    if (!*field || *end || v != want)
        fail_msg("tsv %s is \"%s\", expected %ld", name, field, want);
}

static void tsv_f(const char *field, const char *name, double want)
{
    if (isnan(want)) {
        if (*field)
            fail_msg("tsv %s is \"%s\" for a figure without samples, expected empty", name, field);
        return;
    }
    char *end;
    double v = strtod(field, &end);
    if (!*field || *end || fabs(v - want) > 0.0005)
        fail_msg("tsv %s is \"%s\", expected %.3f", name, field, want);
}

#define TSV_COL(name, kind, expr)                                                                  \
    assert_true(k < n_fields);                                                                     \
    tsv_##kind(fields[k++], #name, expr);

/* Splits line at tabs in place; the fields' count. */
static int split_tabs(char *line, char **fields, int max)
{
    int n = 0;
    for (char *p = line; n < max; p++) {
        fields[n++] = p;
        p           = strchr(p, '\t');
        if (!p)
            break;
        *p = 0;
    }
    return n;
}

/* --tsv: a header of the BENCH_COLUMNS names, then a line per cell with the same fields. */
static void test_report_tsv(void **state)
{
    struct bench_run run;
    sample_run(&run);
    char *dir = tu_tmpdir();
    char path[512], err[256] = "";
    snprintf(path, sizeof path, "%s/run.tsv", dir);
    if (!bench_report_tsv(path, &run, err, sizeof err))
        fail_msg("bench_report_tsv: %s", err);
    char *text = tu_read_file(path, NULL);
    assert_non_null(text);
    char *lines[4];
    int n_lines = 0;
    for (char *l = strtok(text, "\n"); l && n_lines < 4; l = strtok(NULL, "\n"))
        lines[n_lines++] = l;
    assert_int_equal(n_lines, 3);
    char *fields[64];
    int n_fields = split_tabs(lines[0], fields, 64);
    assert_int_equal(n_fields, N_COLUMNS);
    for (int i = 0; i < N_COLUMNS; i++)
        assert_string_equal(fields[i], columns[i]);
    for (int ci = 0; ci < 2; ci++) {
        const struct bench_cell *c = &run.cells[ci];
        n_fields                   = split_tabs(lines[1 + ci], fields, 64);
        assert_int_equal(n_fields, N_COLUMNS);
        int k = 0;
        BENCH_COLUMNS(TSV_COL)
    }
    free(text);
    tu_rmtree(dir);
    free(dir);
}

/* Whether a column has a value to show in some cell (a string, a number other than 0). */
static bool shown_s(const char *v)
{
    return v != NULL;
}

static bool shown_i(long v)
{
    return v != 0;
}

static bool shown_f(double v)
{
    return !isnan(v) && v != 0;
}

#define SHOWN_COL(name, kind, expr) needed[j++] |= shown_##kind(expr);

/*
 * The table on stdout: a header line of BENCH_COLUMNS names in their order
 * (report.c leaves out a column that is 0 or empty in every cell; one with a
 * value somewhere must be there), then a row per cell under it.
 */
static void test_report_table(void **state)
{
    struct bench_run run;
    sample_run(&run);
    bool needed[N_COLUMNS] = {false};
    for (int ci = 0; ci < run.n_cells; ci++) {
        const struct bench_cell *c = &run.cells[ci];
        int j                      = 0;
        BENCH_COLUMNS(SHOWN_COL)
    }
    char *buf   = NULL;
    size_t size = 0;
    FILE *fp    = open_memstream(&buf, &size);
    assert_non_null(fp);
    bench_report_table(fp, &run);
    fclose(fp);
    print_message("%s", buf);
    int n_head = 0, rows = 0;
    for (char *l = strtok(buf, "\n"); l; l = strtok(NULL, "\n")) {
        char *tok[64];
        int n      = 0;
        char *save = NULL;
        for (char *t = strtok_r(l, " ", &save); t && n < 64; t = strtok_r(NULL, " ", &save))
            tok[n++] = t;
        if (!n_head) {
            if (n == 0 || strcmp(tok[0], columns[0]))
                continue;
            /* the header: a subsequence of the columns, every needed one in it */
            int j = 0;
            for (int k = 0; k < n; k++) {
                while (j < N_COLUMNS && strcmp(columns[j], tok[k])) {
                    if (needed[j])
                        fail_msg("the table leaves out %s, which has a value", columns[j]);
                    j++;
                }
                if (j == N_COLUMNS)
                    fail_msg("table column %s is no column, or out of order", tok[k]);
                j++;
            }
            for (; j < N_COLUMNS; j++)
                if (needed[j])
                    fail_msg("the table leaves out %s, which has a value", columns[j]);
            n_head = n;
            continue;
        }
        if (rows < run.n_cells && n == n_head) {
            assert_string_equal(tok[0], bench_workload_name(run.cells[rows].workload));
            rows++;
        }
    }
    if (!n_head)
        fail_msg("no line of the table is a header of column names");
    assert_int_equal(rows, run.n_cells);
    free(buf);
}

/* The JSON's keys are exactly the columns docs/bench.md documents for `hearth bench`. */
static void test_readme_documents_every_column(void **state)
{
    int n       = 0;
    char **docs = readme_columns(&n);
    if (!docs)
        fail_msg("docs/bench.md has no table of the columns (`ttft_ms_p50` ...) under a heading "
                 "naming hearth bench");
    int missing = 0, extra = 0;
    for (int i = 0; i < N_COLUMNS; i++) {
        bool found = false;
        for (int k = 0; k < n && !found; k++)
            found = !strcmp(docs[k], columns[i]);
        if (!found) {
            print_message("# column %s is not documented in docs/bench.md\n", columns[i]);
            missing++;
        }
    }
    for (int k = 0; k < n; k++) {
        bool found = false;
        for (int i = 0; i < N_COLUMNS && !found; i++)
            found = !strcmp(docs[k], columns[i]);
        if (!found) {
            print_message("# docs/bench.md documents %s, which is no column\n", docs[k]);
            extra++;
        }
    }
    for (int k = 0; k < n; k++)
        free(docs[k]);
    free(docs);
    assert_int_equal(missing, 0);
    assert_int_equal(extra, 0);
    assert_int_equal(n, N_COLUMNS);
}

/* ----------------------------------------------------------------- compare --- */

struct compare_out {
    int rc;
    char *text;
    char err[256];
};

static struct compare_out compare(struct benchfix *a, struct benchfix *b, const char *prompts)
{
    struct bench_compare_opts o = {0};
    char err[256];
    assert_true(url_target_parse(benchfix_url(a), &o.targets[0], err, sizeof err));
    assert_true(url_target_parse(benchfix_url(b), &o.targets[1], err, sizeof err));
    o.n_targets          = 2;
    o.max_tokens         = 12;
    o.ignore_eos         = true;
    o.timeout_s          = 60;
    o.stop_fd            = -1;
    o.prompts_file       = prompts;
    struct compare_out r = {0};
    size_t size          = 0;
    FILE *fp             = open_memstream(&r.text, &size);
    assert_non_null(fp);
    r.rc = bench_compare(&o, fp, r.err, sizeof r.err);
    fclose(fp);
    print_message("%s", r.text);
    return r;
}

/* Two servers with the same text: every prompt identical, exit 0. */
static void test_compare_identical(void **state)
{
    struct benchfix *a = fix(), *b = fix();
    char *dir = tu_tmpdir();
    char path[512];
    snprintf(path, sizeof path, "%s/prompts.txt", dir);
    const char *prompts = "Once upon a time\nThe quick brown fox\nTell me a story\n";
    assert_int_equal(tu_write_file(path, prompts, strlen(prompts)), 0);
    struct compare_out r = compare(a, b, path);
    assert_int_equal(r.rc, 0);
    /* each prompt went to both, as written */
    assert_int_equal(benchfix_n_requests(a), 3);
    assert_int_equal(benchfix_n_requests(b), 3);
    int identical = 0;
    for (const char *p = r.text; (p = strstr(p, "identical")); p++)
        identical++;
    assert_true(identical >= 3);
    bool seen[3] = {false};
    for (int i = 0; i < 3; i++) {
        cJSON *body     = body_of(a, i);
        const char *txt = cJSON_GetStringValue(cJSON_GetObjectItem(body, "prompt"));
        if (!txt) /* chat: the user's message */
            txt = cJSON_GetStringValue(cJSON_GetObjectItem(
                cJSON_GetArrayItem(cJSON_GetObjectItem(body, "messages"),
                                   -1 + cJSON_GetArraySize(cJSON_GetObjectItem(body, "messages"))),
                "content"));
        assert_non_null(txt);
        const char *want[3] = {"Once upon a time", "The quick brown fox", "Tell me a story"};
        for (int k = 0; k < 3; k++)
            if (!strcmp(txt, want[k]))
                seen[k] = true;
        cJSON *t = cJSON_GetObjectItem(body, "temperature");
        assert_true(cJSON_IsNumber(t) && t->valuedouble == 0);
        cJSON_Delete(body);
    }
    assert_true(seen[0] && seen[1] && seen[2]);
    free(r.text);
    tu_rmtree(dir);
    free(dir);
    benchfix_stop(a);
    benchfix_stop(b);
}

/*
 * Two servers whose texts agree for 5 tokens, then differ: exit 1, and the
 * output names the first differing character's position (the length of the
 * 5 common tokens).
 */
static void test_compare_names_the_position(void **state)
{
    struct benchfix *a = fix(), *b = fix();
    benchfix_set_text(a, 0, 5);
    benchfix_set_text(b, 1, 5);
    char *dir = tu_tmpdir();
    char path[512];
    snprintf(path, sizeof path, "%s/prompts.txt", dir);
    const char *prompts = "Once upon a time\n";
    assert_int_equal(tu_write_file(path, prompts, strlen(prompts)), 0);
    struct compare_out r = compare(a, b, path);
    assert_int_equal(r.rc, 1);
    assert_int_equal(benchfix_n_requests(a), 1);
    assert_int_equal(benchfix_n_requests(b), 1);
    const char *ra = benchfix_request(a, 0)->reply, *rb = benchfix_request(b, 0)->reply;
    size_t pos = 0;
    while (ra[pos] && ra[pos] == rb[pos])
        pos++;
    assert_true(ra[pos] != rb[pos]);
    /* the fixture's own promise: the first 5 words are common, the 6th differs at once */
    assert_int_equal(words_in(ra, pos), 5);
    char num[32];
    snprintf(num, sizeof num, "%zu", pos);
    if (!strstr(r.text, num))
        fail_msg("the output does not name position %zu:\n%s", pos, r.text);
    free(r.text);
    tu_rmtree(dir);
    free(dir);
    benchfix_stop(a);
    benchfix_stop(b);
}

/* A target that fails (HTTP 500) is no verdict of identical: exit 1, said on the output. */
static void test_compare_failed_request(void **state)
{
    struct benchfix *a = fix(), *b = fix();
    benchfix_set_default(b, &(struct benchfix_step){.fault = BENCHFIX_HTTP_500});
    benchfix_script(b, (struct benchfix_step[]){{.fault = BENCHFIX_HTTP_500}}, 1);
    char *dir = tu_tmpdir();
    char path[512];
    snprintf(path, sizeof path, "%s/prompts.txt", dir);
    assert_int_equal(tu_write_file(path, "Once upon a time\n", 17), 0);
    struct compare_out r = compare(a, b, path);
    assert_int_equal(r.rc, 1);
    free(r.text);
    tu_rmtree(dir);
    free(dir);
    benchfix_stop(a);
    benchfix_stop(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_completion_figures),
        cmocka_unit_test(test_chat_figures),
        cmocka_unit_test(test_rate_cell),
        cmocka_unit_test(test_faults_counted_by_kind),
        cmocka_unit_test(test_duration),
        cmocka_unit_test(test_api_key_and_model),
        cmocka_unit_test(test_prompts_file),
        cmocka_unit_test(test_seed_and_salt),
        cmocka_unit_test(test_no_samples_is_nan),
        cmocka_unit_test(test_no_usage_completion),
        cmocka_unit_test(test_no_usage_chat),
        cmocka_unit_test(test_early_stops),
        cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_stop_fd),
        cmocka_unit_test(test_no_server),
        cmocka_unit_test(test_conversation),
        cmocka_unit_test(test_prefix_share),
        cmocka_unit_test(test_report_json),
        cmocka_unit_test(test_report_tsv),
        cmocka_unit_test(test_report_table),
        cmocka_unit_test(test_readme_documents_every_column),
        cmocka_unit_test(test_compare_identical),
        cmocka_unit_test(test_compare_names_the_position),
        cmocka_unit_test(test_compare_failed_request),
    };
    return cmocka_run_group_tests_name("unit_bench", tests, NULL, NULL);
}
