/*
 * bench.c: the runner of `hearth bench`. A run asks the server for its model
 * and its tokens per word, then runs each cell: closed-loop (N workers, each
 * sending its next request when the last one ends), open-loop (Poisson
 * arrivals at a rate, a thread per request in flight) or conversations
 * (sessions whose next turn waits for the last, taken breadth-first so more
 * sessions than slots compete). Replies are folded into the cell's figures
 * under one mutex as they end; the caller's thread waits and prints progress.
 */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench_int.h"
#include "util/clock.h"
#include "util/errfmt.h"
#include "util/rng.h"

#include <cjson/cJSON.h>

/* clang-format off */
static const char *const workload_names[] = {
    [BENCH_COMPLETION]   = "completion",
    [BENCH_CHAT]         = "chat",
    [BENCH_CONVERSATION] = "conversation",
    [BENCH_PREFIX_SHARE] = "prefix-share",
};
/* clang-format on */

const char *bench_workload_name(enum bench_workload w)
{
    return (unsigned)w < sizeof workload_names / sizeof *workload_names ? workload_names[w] : NULL;
}

bool bench_workload_parse(const char *s, enum bench_workload *w)
{
    for (unsigned i = 0; i < sizeof workload_names / sizeof *workload_names; i++)
        if (!strcmp(s, workload_names[i])) {
            *w = (enum bench_workload)i;
            return true;
        }
    return false;
}

void bench_opts_default(struct bench_opts *o)
{
    *o = (struct bench_opts){
        .workload      = BENCH_COMPLETION,
        .prompt_tokens = 128,
        .tail_tokens   = 32,
        .max_tokens    = 64,
        .ignore_eos    = true,
        .temperature   = 0,
        .concurrency   = {1},
        .n_concurrency = 1,
        .requests      = 16,
        .sessions      = 8,
        .turns         = 4,
        .seed          = 1,
        .timeout_s     = 600,
        .stop_fd       = -1,
    };
}

/* A user turn of a conversation, in tokens: a question's worth. */
#define TURN_TOKENS 32

static bool stop_requested(int fd)
{
    if (fd < 0)
        return false;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, 0) > 0;
}

/* ---------------------------------------------------------- samples --- */

struct dvec {
    double *v;
    size_t n, cap;
};

static void dvec_push(struct dvec *d, double x)
{
    if (d->n == d->cap) {
        size_t cap = d->cap ? 2 * d->cap : 256;
        double *v  = realloc(d->v, cap * sizeof *v);
        if (!v)
            abort();
        d->v   = v;
        d->cap = cap;
    }
    d->v[d->n++] = x;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_percentile(double *v, size_t n, double p)
{
    if (!n)
        return NAN;
    qsort(v, n, sizeof *v, cmp_double);
    double r = p / 100.0 * (double)(n - 1);
    size_t i = (size_t)r;
    if (i + 1 >= n)
        return v[n - 1];
    return v[i] + (v[i + 1] - v[i]) * (r - (double)i);
}

/* ------------------------------------------------------------- cell --- */

struct session {
    struct bench_msg *msgs; /* system, then user/assistant turns (contents malloc'd) */
    int n_msgs;
    int turns_done;
    bool busy;
};

struct cell_run {
    const struct bench_opts *o;
    const char *model;
    const char *salt; /* "" or the run's random prefix */
    int k;            /* the cell's index */
    double words_per_token;
    struct bench_cell *cell;

    pthread_mutex_t mu;
    pthread_cond_t cv; /* a worker ended, or a session became ready */
    long next;         /* the next request's index */
    int active;        /* workers still running */
    double t0, t_last; /* wall clock: the cell's start, the last reply's end */
    long tokens_live;  /* content events so far (progress) */
    long done_live;    /* replies so far (progress) */
    struct dvec ttft, itl, e2e, cold, warm, decode;
    struct strbuf prefix; /* prefix-share: the shared prefix */
    char **prompts;       /* --prompts, or NULL */
    int n_prompts;
    struct session *sessions;
    int sessions_left; /* sessions with turns to go */
};

static uint64_t mix(uint64_t seed, uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t s = seed ^ (a * 0x9e3779b97f4a7c15ull) ^ (b * 0xc2b2ae3d27d4eb4full) ^
                 (c * 0x165667b19e3779f9ull);
    return splitmix64(&s);
}

static int words_for(const struct cell_run *cr, int tokens)
{
    int n = (int)lround(tokens * cr->words_per_token);
    return n > 0 ? n : 1;
}

/* salt, then n_words seeded words. */
static void text_of(const struct cell_run *cr, struct strbuf *b, uint64_t seed, int tokens)
{
    strbuf_add(b, cr->salt);
    wl_words(b, seed, words_for(cr, tokens));
}

/* Folds one reply into the cell; turn is the conversation turn (0 first), -1 elsewhere. */
static void record(struct cell_run *cr, struct bench_reply *rep, int turn)
{
    if (rep->outcome == HTTPC_STOPPED)
        return; /* cut by Ctrl-C: neither a figure nor an error */
    struct bench_cell *c = cr->cell;
    pthread_mutex_lock(&cr->mu);
    c->requests++;
    cr->done_live++;
    cr->t_last = now_s();
    if (!rep->ok) {
        if (!c->errors++)
            snprintf(c->first_error, sizeof c->first_error, "%s", rep->err);
        if (rep->outcome == HTTPC_TIMEOUT)
            c->errors_timeout++;
        else if (rep->outcome == HTTPC_PROTOCOL || rep->stream_error)
            c->errors_protocol++;
        else if (rep->outcome == HTTPC_CONNECTION || rep->status == 200)
            c->errors_connection++; /* a 200 stream cut before [DONE] is a dropped connection */
        else {
            c->errors_http++;
            int i = 0;
            while (i < 8 && c->http_count[i] && c->http_status[i] != rep->status)
                i++;
            if (i < 8) {
                c->http_status[i] = rep->status;
                c->http_count[i]++;
            }
        }
        pthread_mutex_unlock(&cr->mu);
        return;
    }
    long n = bench_reply_tokens(rep);
    c->output_tokens += n;
    c->prompt_tokens += rep->usage_prompt;
    c->cached_tokens += rep->usage_cached;
    if (!rep->has_usage)
        c->usage_missing = true;
    if (cr->o->ignore_eos && n < cr->o->max_tokens && strcmp(rep->finish, "length"))
        c->early_stops++;
    if (rep->n_arrivals > 0) {
        double ttft = (rep->arrivals[0] - rep->t_start) * 1e3;
        dvec_push(&cr->ttft, ttft);
        if (turn == 0)
            dvec_push(&cr->cold, ttft);
        else if (turn > 0)
            dvec_push(&cr->warm, ttft);
        for (int i = 1; i < rep->n_arrivals; i++)
            dvec_push(&cr->itl, (rep->arrivals[i] - rep->arrivals[i - 1]) * 1e3);
        double span = rep->arrivals[rep->n_arrivals - 1] - rep->arrivals[0];
        if (n > 1 && span > 0)
            dvec_push(&cr->decode, (double)(n - 1) / span);
    }
    dvec_push(&cr->e2e, (rep->t_end - rep->t_start) * 1e3);
    pthread_mutex_unlock(&cr->mu);
}

/* Builds and sends independent request idx (completion, chat, prefix-share). */
static void run_one(struct cell_run *cr, long idx)
{
    const struct bench_opts *o = cr->o;
    struct strbuf text         = {0};
    uint64_t seed              = mix(o->seed, (uint64_t)cr->k + 1, (uint64_t)idx + 1, 1);
    if (cr->prompts) {
        strbuf_add(&text, cr->salt);
        strbuf_add(&text, cr->prompts[idx % cr->n_prompts]);
    } else if (o->workload == BENCH_PREFIX_SHARE) {
        strbuf_addn(&text, bench_str(&cr->prefix), cr->prefix.len);
        strbuf_add(&text, " ");
        wl_words(&text, seed, words_for(cr, o->tail_tokens));
    } else {
        text_of(cr, &text, seed, o->prompt_tokens);
    }
    const char *prompt   = bench_str(&text);
    struct bench_msg msg = {"user", prompt};
    struct bench_req req = {
        .chat = o->workload == BENCH_CHAT, .prompt = prompt, .msgs = &msg, .n_msgs = 1};
    struct bench_reply rep;
    bench_request(o, cr->model, &req, &rep, &cr->tokens_live);
    record(cr, &rep, -1);
    bench_reply_free(&rep);
    strbuf_free(&text);
}

static bool cell_over(struct cell_run *cr, long idx)
{
    if (stop_requested(cr->o->stop_fd))
        return true;
    if (cr->o->duration_s > 0)
        return now_s() - cr->t0 >= cr->o->duration_s;
    return idx >= cr->o->requests;
}

static void worker_done(struct cell_run *cr)
{
    pthread_mutex_lock(&cr->mu);
    cr->active--;
    pthread_cond_broadcast(&cr->cv);
    pthread_mutex_unlock(&cr->mu);
}

static void *closed_worker(void *arg)
{
    struct cell_run *cr = arg;
    for (;;) {
        long idx = __atomic_fetch_add(&cr->next, 1, __ATOMIC_RELAXED);
        if (cell_over(cr, idx))
            break;
        run_one(cr, idx);
    }
    worker_done(cr);
    return NULL;
}

/* ----------------------------------------------------- conversations --- */

/* The ready session with the fewest turns done (then the lowest number), or -1. */
static int pick_session(struct cell_run *cr)
{
    int best = -1;
    for (int s = 0; s < cr->o->sessions; s++) {
        struct session *se = &cr->sessions[s];
        if (se->busy || se->turns_done >= cr->o->turns)
            continue;
        if (best < 0 || se->turns_done < cr->sessions[best].turns_done)
            best = s;
    }
    return best;
}

static void add_msg(struct session *se, const char *role, const char *content)
{
    struct bench_msg *m = realloc(se->msgs, (size_t)(se->n_msgs + 1) * sizeof *m);
    if (!m)
        abort();
    se->msgs               = m;
    se->msgs[se->n_msgs++] = (struct bench_msg){role, strdup(content ? content : "")};
}

static void *conversation_worker(void *arg)
{
    struct cell_run *cr        = arg;
    const struct bench_opts *o = cr->o;
    pthread_mutex_lock(&cr->mu);
    for (;;) {
        if (stop_requested(o->stop_fd) || cr->sessions_left == 0)
            break;
        int s = pick_session(cr);
        if (s < 0) { /* every session left is mid-turn: wait for one */
            pthread_cond_wait(&cr->cv, &cr->mu);
            continue;
        }
        struct session *se = &cr->sessions[s];
        int turn           = se->turns_done;
        se->busy           = true;
        struct strbuf user = {0};
        wl_words(&user, mix(o->seed, (uint64_t)cr->k + 1, (uint64_t)s + 1, (uint64_t)turn + 2),
                 words_for(cr, TURN_TOKENS));
        add_msg(se, "user", bench_str(&user));
        strbuf_free(&user);
        struct bench_req req = {.chat = true, .msgs = se->msgs, .n_msgs = se->n_msgs};
        pthread_mutex_unlock(&cr->mu);

        /* the session is busy: no other worker touches its messages meanwhile */
        struct bench_reply rep;
        bench_request(o, cr->model, &req, &rep, &cr->tokens_live);
        record(cr, &rep, turn);

        pthread_mutex_lock(&cr->mu);
        /* a failed turn still ends: the history goes on with whatever came back */
        add_msg(se, "assistant", rep.text.s);
        bench_reply_free(&rep);
        se->busy = false;
        if (++se->turns_done == o->turns)
            cr->sessions_left--;
        pthread_cond_broadcast(&cr->cv);
    }
    cr->active--;
    pthread_cond_broadcast(&cr->cv);
    pthread_mutex_unlock(&cr->mu);
    return NULL;
}

static void sessions_init(struct cell_run *cr)
{
    const struct bench_opts *o = cr->o;
    cr->sessions               = calloc((size_t)o->sessions, sizeof *cr->sessions);
    if (!cr->sessions)
        abort();
    for (int s = 0; s < o->sessions; s++) {
        struct strbuf sys = {0};
        /* c 0 is no user turn's (those take turn + 2) */
        const uint64_t seed = o->own_system ? mix(o->seed, (uint64_t)cr->k + 1, (uint64_t)s + 1, 0)
                                            : mix(o->seed, (uint64_t)cr->k + 1, 0, 3);
        text_of(cr, &sys, seed, o->prompt_tokens);
        add_msg(&cr->sessions[s], "system", bench_str(&sys));
        strbuf_free(&sys);
    }
    cr->sessions_left = o->turns > 0 ? o->sessions : 0;
}

static void sessions_free(struct cell_run *cr)
{
    for (int s = 0; cr->sessions && s < cr->o->sessions; s++) {
        for (int i = 0; i < cr->sessions[s].n_msgs; i++)
            free((char *)cr->sessions[s].msgs[i].content);
        free(cr->sessions[s].msgs);
    }
    free(cr->sessions);
}

/* ---------------------------------------------------------- progress --- */

static void progress(const struct cell_run *cr, int n_cells, bool final)
{
    if (!cr->o->progress)
        return;
    double dt   = now_s() - cr->t0;
    long tokens = __atomic_load_n(&cr->tokens_live, __ATOMIC_RELAXED);
    char what[48];
    if (cr->cell->rate > 0)
        snprintf(what, sizeof what, "rate %g/s", cr->cell->rate);
    else
        snprintf(what, sizeof what, "concurrency %d", cr->cell->concurrency);
    fprintf(stderr, "\r\033[Kcell %d/%d (%s): %ld requests done, %.1f tok/s%s", cr->k + 1, n_cells,
            what, cr->done_live, dt > 0 ? (double)tokens / dt : 0.0, final ? "\n" : "");
    fflush(stderr);
}

/* Waits for every worker, printing progress twice a second. */
static void wait_workers(struct cell_run *cr, int n_cells)
{
    pthread_mutex_lock(&cr->mu);
    while (cr->active > 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 500000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&cr->cv, &cr->mu, &ts);
        pthread_mutex_unlock(&cr->mu);
        progress(cr, n_cells, false);
        pthread_mutex_lock(&cr->mu);
    }
    pthread_mutex_unlock(&cr->mu);
}

/* --------------------------------------------------------- open loop --- */

static void *open_one(void *arg)
{
    struct cell_run *cr = ((void **)arg)[0];
    long idx            = (long)(intptr_t)((void **)arg)[1];
    free(arg);
    run_one(cr, idx);
    worker_done(cr);
    return NULL;
}

/*
 * Poisson arrivals: exponential gaps of mean 1/rate from the run's seed; each
 * request its own thread, however many are in flight. The dispatcher waits
 * for the next arrival on the stop descriptor, so Ctrl-C ends it at once.
 */
static bool open_loop(struct cell_run *cr, int n_cells, char *err, size_t err_len)
{
    const struct bench_opts *o = cr->o;
    uint64_t st                = mix(o->seed, (uint64_t)cr->k + 1, 0, 4);
    pthread_t *threads         = NULL;
    long n = 0, cap = 0;
    double t_next  = cr->t0;
    double last_ui = cr->t0;
    bool ok        = true;
    for (long idx = 0;; idx++) {
        double u = ((double)(splitmix64(&st) >> 11) + 0.5) * 0x1.0p-53;
        t_next += -log(u) / cr->cell->rate;
        if (o->duration_s > 0 ? t_next - cr->t0 >= o->duration_s : idx >= o->requests)
            break;
        bool stop = false;
        for (double now; (now = now_s()) < t_next;) {
            if (now - last_ui >= 0.5) {
                progress(cr, n_cells, false);
                last_ui = now;
            }
            double wait     = fmin(t_next - now, 0.5);
            struct pollfd p = {.fd = o->stop_fd, .events = POLLIN};
            if (poll(&p, o->stop_fd >= 0 ? 1 : 0, (int)ceil(wait * 1e3)) > 0) {
                stop = true;
                break;
            }
        }
        if (stop || stop_requested(o->stop_fd))
            break;
        if (n == cap) {
            cap          = cap ? 2 * cap : 64;
            pthread_t *t = realloc(threads, (size_t)cap * sizeof *t);
            if (!t)
                abort();
            threads = t;
        }
        void **arg = malloc(2 * sizeof *arg);
        if (!arg)
            abort();
        arg[0] = cr;
        arg[1] = (void *)(intptr_t)idx;
        pthread_mutex_lock(&cr->mu);
        cr->active++;
        pthread_mutex_unlock(&cr->mu);
        int e = pthread_create(&threads[n], NULL, open_one, arg);
        if (e) {
            free(arg);
            worker_done(cr);
            set_err(err, err_len, "bench: cannot start a request thread: %s", strerror(e));
            ok = false;
            break;
        }
        n++;
    }
    wait_workers(cr, n_cells);
    for (long i = 0; i < n; i++)
        pthread_join(threads[i], NULL);
    free(threads);
    return ok;
}

/* --------------------------------------------------------------- run --- */

static void summarize(struct cell_run *cr)
{
    struct bench_cell *c = cr->cell;
    double t_end         = cr->t_last > cr->t0 ? cr->t_last : now_s();
    c->duration_s        = t_end - cr->t0;
    if (c->duration_s > 0) {
        c->req_per_s        = (double)(c->requests - c->errors) / c->duration_s;
        c->output_tok_per_s = (double)c->output_tokens / c->duration_s;
    }
    static const double pct[3] = {50, 95, 99};
    for (int i = 0; i < 3; i++) {
        c->ttft_ms[i] = bench_percentile(cr->ttft.v, cr->ttft.n, pct[i]);
        c->itl_ms[i]  = bench_percentile(cr->itl.v, cr->itl.n, pct[i]);
        c->e2e_ms[i]  = bench_percentile(cr->e2e.v, cr->e2e.n, pct[i]);
    }
    c->decode_tok_per_s = bench_percentile(cr->decode.v, cr->decode.n, 50);
    if (c->workload == BENCH_CONVERSATION) {
        c->ttft_cold_ms_p50 = bench_percentile(cr->cold.v, cr->cold.n, 50);
        c->ttft_warm_ms_p50 = bench_percentile(cr->warm.v, cr->warm.n, 50);
    } else {
        c->ttft_cold_ms_p50 = c->ttft_warm_ms_p50 = NAN;
    }
}

static bool run_cell(const struct bench_opts *o, const char *model, const char *salt, double wpt,
                     char **prompts, int n_prompts, int k, int n_cells, struct bench_cell *cell,
                     char *err, size_t err_len)
{
    struct cell_run cr = {.o               = o,
                          .model           = model,
                          .salt            = salt,
                          .k               = k,
                          .words_per_token = wpt,
                          .cell            = cell,
                          .prompts         = prompts,
                          .n_prompts       = n_prompts};
    pthread_mutex_init(&cr.mu, NULL);
    pthread_cond_init(&cr.cv, NULL);
    if (o->workload == BENCH_PREFIX_SHARE)
        text_of(&cr, &cr.prefix, mix(o->seed, (uint64_t)k + 1, 0, 5), o->prompt_tokens);
    if (o->workload == BENCH_CONVERSATION)
        sessions_init(&cr);
    cr.t0   = now_s();
    bool ok = true;
    if (cell->rate > 0) {
        ok = open_loop(&cr, n_cells, err, err_len);
    } else {
        int n              = cell->concurrency;
        pthread_t *threads = calloc((size_t)n, sizeof *threads);
        if (!threads)
            abort();
        int started = 0;
        for (; started < n; started++) {
            pthread_mutex_lock(&cr.mu);
            cr.active++;
            pthread_mutex_unlock(&cr.mu);
            int e = pthread_create(
                &threads[started], NULL,
                o->workload == BENCH_CONVERSATION ? conversation_worker : closed_worker, &cr);
            if (e) {
                worker_done(&cr);
                set_err(err, err_len, "bench: cannot start %d workers: %s", n, strerror(e));
                ok = false;
                break;
            }
        }
        wait_workers(&cr, n_cells);
        for (int i = 0; i < started; i++)
            pthread_join(threads[i], NULL);
        free(threads);
    }
    summarize(&cr);
    cell->interrupted = stop_requested(o->stop_fd);
    progress(&cr, n_cells, true);
    free(cr.ttft.v);
    free(cr.itl.v);
    free(cr.e2e.v);
    free(cr.cold.v);
    free(cr.warm.v);
    free(cr.decode.v);
    strbuf_free(&cr.prefix);
    sessions_free(&cr);
    pthread_mutex_destroy(&cr.mu);
    pthread_cond_destroy(&cr.cv);
    return ok;
}

/* The first model of GET /v1/models into out; false with err when the server does not answer. */
static bool first_model(const struct bench_opts *o, char *out, size_t out_len, char *err,
                        size_t err_len)
{
    struct httpc_request req = {.method    = "GET",
                                .path      = "/v1/models",
                                .api_key   = o->api_key,
                                .timeout_s = o->timeout_s,
                                .stop_fd   = o->stop_fd};
    char *body               = NULL;
    struct httpc_result res;
    httpc_fetch(&o->target, &req, 16u << 20, &body, &res);
    if (res.outcome != HTTPC_OK) {
        free(body);
        return fail(false, err, err_len, "bench: %s:%d does not answer GET /v1/models: %s",
                    o->target.host, o->target.port, res.err);
    }
    if (res.status != 200) {
        free(body);
        return fail(false, err, err_len, "bench: GET /v1/models answered HTTP %d%s", res.status,
                    res.status == 401 ? " (give the key with --api-key)" : "");
    }
    cJSON *j = cJSON_Parse(body);
    free(body);
    const cJSON *m  = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "data"), 0);
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(m, "id");
    bool ok         = cJSON_IsString(id) && *id->valuestring;
    if (ok)
        snprintf(out, out_len, "%s", id->valuestring);
    cJSON_Delete(j);
    if (!ok)
        return fail(false, err, err_len,
                    "bench: GET /v1/models lists no model; name one with --model");
    return true;
}

bool bench_model(const struct bench_opts *o, char *out, size_t out_len, char *err, size_t err_len)
{
    char tmp[256];
    if (!first_model(o, tmp, sizeof tmp, err, err_len))
        return false;
    snprintf(out, out_len, "%s", o->model ? o->model : tmp);
    return true;
}

bool bench_run(const struct bench_opts *o, struct bench_run *run, char *err, size_t err_len)
{
    memset(run, 0, sizeof *run);
    if (o->workload == BENCH_CONVERSATION && (o->n_rate || o->duration_s > 0))
        return fail(false, err, err_len,
                    "bench: a conversation run is sessions x turns: --rate and --duration do not "
                    "apply");
    if (!bench_model(o, run->model, sizeof run->model, err, err_len))
        return false;
    char salt[32] = "";
    if (o->salt) {
        uint32_t r = 0;
        if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
            r = (uint32_t)(now_s() * 1e9);
        snprintf(salt, sizeof salt, "[run %08x] ", r);
    }
    char **prompts = NULL;
    int n_prompts  = 0;
    double tpw     = 1;
    if (o->prompts_file) {
        if (o->workload != BENCH_COMPLETION && o->workload != BENCH_CHAT)
            return fail(false, err, err_len,
                        "bench: --prompts applies to the completion and chat workloads");
        if ((n_prompts = wl_load_prompts(o->prompts_file, &prompts, err, err_len)) < 0)
            return false;
        snprintf(run->prompt_note, sizeof run->prompt_note, "%d prompts from %s, taken in turn",
                 n_prompts, o->prompts_file);
    } else {
        tpw = wl_tokens_per_word(o, run->model, run->prompt_note, sizeof run->prompt_note);
    }
    int n_cells = o->n_rate ? o->n_rate : o->n_concurrency;
    bool ok     = true;
    for (int k = 0; k < n_cells && k < BENCH_MAX_CELLS && ok; k++) {
        if (stop_requested(o->stop_fd))
            break;
        struct bench_cell *cell = &run->cells[k];
        *cell                   = (struct bench_cell){.workload = o->workload};
        if (o->n_rate)
            cell->rate = o->rate[k];
        else
            cell->concurrency = o->concurrency[k];
        run->n_cells = k + 1;
        ok = run_cell(o, run->model, salt, 1.0 / tpw, prompts, n_prompts, k, n_cells, cell, err,
                      err_len);
    }
    for (int i = 0; i < n_prompts; i++)
        free(prompts[i]);
    free(prompts);
    if (!ok)
        return false;
    run->stopped = stop_requested(o->stop_fd);
    return true;
}
