/*
 * cmd_bench.c: `hearth bench URL`, the load generator and judge for any
 * OpenAI-compatible server (src/bench/). Parses the options, turns Ctrl-C
 * into the runner's stop descriptor (a self-pipe, so every request thread
 * sees it at once), and prints the figures, also after an interruption.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"
#include "cmd.h"
#include "opts.h"

static int stop_pipe[2] = {-1, -1};

static void on_sigint(int sig)
{
    (void)sig;
    int e = errno;
    /* the pipe stays readable: every thread polling it sees the stop */
    ssize_t r = write(stop_pipe[1], "x", 1);
    (void)r;
    errno = e;
}

/* --concurrency's and --rate's values: one cell each. */
struct cells {
    int v[BENCH_MAX_CELLS];
    int n;
};
struct rates {
    double v[BENCH_MAX_CELLS];
    int n;
};

/* "1,4,8" into out[]: integers in [lo, hi], at most BENCH_MAX_CELLS. */
static bool int_list(const char *opt, const char *s, long lo, long hi, int *out, int *n)
{
    char *copy = strdup(s), *save = NULL;
    *n      = 0;
    bool ok = true;
    for (char *t = strtok_r(copy, ",", &save); t && ok; t = strtok_r(NULL, ",", &save)) {
        long v;
        if (*n == BENCH_MAX_CELLS) {
            fprintf(stderr, "hearth bench: %s takes at most %d values\n", opt, BENCH_MAX_CELLS);
            ok = false;
        } else if ((ok = arg_long("bench", opt, t, lo, hi, &v))) {
            out[(*n)++] = (int)v;
        }
    }
    free(copy);
    if (ok && !*n) {
        fprintf(stderr, "hearth bench: %s needs at least one value\n", opt);
        ok = false;
    }
    return ok;
}

static bool set_concurrency(const char *cmd, const char *opt, const char *v, void *field)
{
    (void)cmd;
    struct cells *c = field;
    return int_list(opt, v, 1, 4096, c->v, &c->n);
}

static bool set_rate(const char *cmd, const char *opt, const char *v, void *field)
{
    (void)cmd;
    struct rates *r = field;
    char *copy = strdup(v), *save = NULL;
    r->n    = 0;
    bool ok = true;
    for (char *t = strtok_r(copy, ",", &save); t && ok; t = strtok_r(NULL, ",", &save)) {
        float x;
        if (r->n == BENCH_MAX_CELLS) {
            fprintf(stderr, "hearth bench: %s takes at most %d values\n", opt, BENCH_MAX_CELLS);
            ok = false;
        } else if ((ok = arg_float("bench", opt, t, 1e-3, 1e6, &x))) {
            r->v[r->n++] = x;
        }
    }
    free(copy);
    if (ok && !r->n) {
        fprintf(stderr, "hearth bench: %s needs at least one value\n", opt);
        ok = false;
    }
    return ok;
}

struct bench_args {
    struct opt_multi urls; /* the server's, then (--compare) those compared with it */
    struct {
        int workload; /* enum bench_workload */
        long prompt_tokens, tail_tokens, max_tokens, sessions, turns;
        long seed;
        float temperature;
        bool no_ignore_eos, own_system, salt;
        const char *prompts; /* --prompts FILE, or NULL */
    } wl;
    struct {
        struct cells concurrency;
        struct rates rate; /* n 0: closed loop */
        long requests;
        float duration_s; /* 0: --requests */
    } load;
    struct {
        const char *model, *api_key; /* NULL: the first model; HEARTH_API_KEY's */
        float timeout_s;
    } server;
    struct {
        const char *json, *tsv;
        bool progress, no_progress;
    } out;
    bool compare;
};

/* OPT_CHOICE stores the index among the choices: they are listed in enum bench_workload's order */
_Static_assert(BENCH_COMPLETION == 0 && BENCH_CHAT == 1 && BENCH_CONVERSATION == 2 &&
                   BENCH_PREFIX_SHARE == 3,
               "--workload's choices follow enum bench_workload");

#define WL(f) offsetof(struct bench_args, wl.f) - offsetof(struct bench_args, wl)
/* clang-format off */
static const struct opt workload_list[] = {
    {.names = "--workload", .value = "W", .kind = OPT_CHOICE, .off = WL(workload),
     .choices = "completion|chat|conversation|prefix-share", .def = "completion",
     .help = "completion: independent /v1/completions requests; chat: independent "
             "/v1/chat/completions requests; conversation: sessions resending their growing "
             "history; prefix-share: completions sharing one long prefix, each with its own tail"},
    {.names = "--prompt-tokens", .value = "N", .kind = OPT_LONG, .off = WL(prompt_tokens), .lo = 1,
     .hi = 10000000, .def = "128",
     .help = "prompt size (conversation: the system prompt; prefix-share: the shared prefix), "
             "sized by the server's /tokenize"},
    {.names = "--tail-tokens", .value = "N", .kind = OPT_LONG, .off = WL(tail_tokens), .lo = 1,
     .hi = 10000000, .def = "32", .help = "prefix-share: each request's own tail"},
    {.names = "--prompts", .value = "FILE", .kind = OPT_STR, .off = WL(prompts),
     .def = "with --compare, a built-in set; else --prompt-tokens of words",
     .help = "prompts, one per line: --compare's, or the completion and chat requests', taken in "
             "turn"},
    {.names = "--max-tokens", .value = "N", .kind = OPT_LONG, .off = WL(max_tokens), .lo = 1,
     .hi = 10000000, .def = "64", .help = "tokens per reply"},
    {.names = "--no-ignore-eos", .kind = OPT_FLAG, .off = WL(no_ignore_eos),
     .help = "do not send ignore_eos (replies may end early)"},
    {.names = "--temperature --temp", .value = "T", .kind = OPT_FLOAT, .off = WL(temperature),
     .lo = 0, .hi = 100, .def = "0", .help = "the sampling temperature each request asks"},
    {.names = "--sessions", .value = "S", .kind = OPT_LONG, .off = WL(sessions), .lo = 1,
     .hi = 100000, .def = "8", .help = "conversation: sessions"},
    {.names = "--turns", .value = "T", .kind = OPT_LONG, .off = WL(turns), .lo = 1, .hi = 100000,
     .def = "4", .help = "conversation: turns per session"},
    {.names = "--own-system", .kind = OPT_FLAG, .off = WL(own_system),
     .help = "conversation: each session its own system prompt (its agent's files), so every "
             "first turn is cold; without it, one shared by all"},
    {.names = "--salt", .kind = OPT_FLAG, .off = WL(salt),
     .help = "a random prefix on every prompt, so no earlier run's cache helps"},
    {.names = "--seed", .value = "N", .kind = OPT_LONG, .off = WL(seed), .lo = 0,
     .hi = (double)LONG_MAX, .def = "1", .help = "the seed of the prompts' words"},
};
/* clang-format on */
#undef WL

#define LOAD(f) offsetof(struct bench_args, load.f) - offsetof(struct bench_args, load)
/* clang-format off */
static const struct opt load_list[] = {
    {.names = "--concurrency", .value = "LIST", .kind = OPT_CUSTOM, .off = LOAD(concurrency),
     .def = "1", .set = set_concurrency, .example = "1,4,8",
     .help = "closed loop: requests in flight, one cell for each value of the comma-separated "
             "list"},
    {.names = "--rate", .value = "LIST", .kind = OPT_CUSTOM, .off = LOAD(rate), .set = set_rate,
     .example = "0.5,2",
     .help = "open loop instead: Poisson arrivals per second, one cell for each value"},
    {.names = "--requests", .value = "N", .kind = OPT_LONG, .off = LOAD(requests), .lo = 1,
     .hi = 10000000, .def = "16",
     .help = "requests per cell; a conversation run is --sessions x --turns requests instead"},
    {.names = "--duration", .value = "S", .kind = OPT_FLOAT, .off = LOAD(duration_s), .lo = 0.001,
     .hi = 1e7, .help = "instead of --requests: send requests for S seconds per cell"},
};
/* clang-format on */
#undef LOAD

#define SRV(f) offsetof(struct bench_args, server.f) - offsetof(struct bench_args, server)
/* clang-format off */
static const struct opt server_list[] = {
    {.names = "--model", .value = "NAME", .kind = OPT_STR, .off = SRV(model),
     .def = "the first of GET /v1/models", .help = "the model the requests name"},
    {.names = "--api-key", .value = "KEY", .kind = OPT_STR, .off = SRV(api_key),
     .help = "sent as Authorization: Bearer KEY; also HEARTH_API_KEY"},
    {.names = "--timeout", .value = "S", .kind = OPT_FLOAT, .off = SRV(timeout_s), .lo = 0.001,
     .hi = 1e7, .def = "600", .help = "seconds a request may take"},
};
/* clang-format on */
#undef SRV

#define OUT(f) offsetof(struct bench_args, out.f) - offsetof(struct bench_args, out)
/* clang-format off */
static const struct opt output_list[] = {
    {.names = "--json", .value = "FILE", .kind = OPT_STR, .off = OUT(json),
     .help = "the cells as a JSON array"},
    {.names = "--tsv", .value = "FILE", .kind = OPT_STR, .off = OUT(tsv),
     .help = "the cells as tab-separated values"},
    {.names = "--progress", .kind = OPT_FLAG, .off = OUT(progress),
     .def = "when stderr is a terminal", .help = "a live progress line on stderr"},
    {.names = "--no-progress", .kind = OPT_FLAG, .off = OUT(no_progress),
     .help = "no progress line (of the two, the last given counts)"},
};
/* clang-format on */
#undef OUT

/* clang-format off */
static const struct opt compare_list[] = {
    {.names = "--compare", .kind = OPT_FLAG, .off = 0,
     .help = "send the same prompts at temperature 0 to the first URL and to each of the others "
             "(up to 7, anywhere on the line): per prompt, identical or where the texts part; exit "
             "1 if any do. Takes only --prompts, --max-tokens, --no-ignore-eos, --model, --api-key "
             "and --timeout"},
};
/* clang-format on */

static const struct opt_group workload_group = OPT_GROUP("Workload", workload_list);
static const struct opt_group load_group     = OPT_GROUP("Load", load_list);
static const struct opt_group server_group   = OPT_GROUP("Server", server_list);
static const struct opt_group output_group   = OPT_GROUP("Output", output_list);
static const struct opt_group compare_group  = OPT_GROUP("Comparing servers", compare_list);

/* clang-format off */
static const struct opt_use bench_uses[] = {
    {&workload_group, offsetof(struct bench_args, wl)},
    {&load_group, offsetof(struct bench_args, load)},
    {&server_group, offsetof(struct bench_args, server)},
    {&output_group, offsetof(struct bench_args, out)},
    {&compare_group, offsetof(struct bench_args, compare)},
};
/* clang-format on */

/* bench_opts_default()'s values, as the help states them */
static const struct bench_args bench_defaults = {
    .wl     = {.workload      = BENCH_COMPLETION,
               .prompt_tokens = 128,
               .tail_tokens   = 32,
               .max_tokens    = 64,
               .sessions      = 8,
               .turns         = 4,
               .seed          = 1},
    .load   = {.concurrency = {.v = {1}, .n = 1}, .requests = 16},
    .server = {.timeout_s = 600},
};

const struct cmd_spec cmd_bench_spec = {
    .name      = "bench",
    .synopsis  = "hearth bench URL [options]\n"
                 "hearth bench URL --compare URL [URL ...] [--prompts FILE] [--max-tokens N]",
    .about     = "Load-tests an OpenAI-compatible server (hearth, llama-server, vLLM) at URL "
                 "(http://HOST:PORT, a trailing /v1 is fine) and prints a table of figures per "
                 "cell. With --compare, checks instead that greedy texts are identical across "
                 "servers.",
    .epilog    = "Environment: HEARTH_API_KEY (the key, when --api-key is not given).\n"
                 "\n"
                 "Exit status: 0 done, 1 the run could not start, 2 usage, 130 stopped by "
                 "Ctrl-C.\n",
    .uses      = bench_uses,
    .n_uses    = sizeof bench_uses / sizeof bench_uses[0],
    .pos_max   = OPT_MULTI_MAX,
    .pos_off   = offsetof(struct bench_args, urls),
    .defaults  = &bench_defaults,
    .args_size = sizeof(struct bench_args),
};

static bool target(const char *url, struct url_target *t)
{
    char err[200];
    if (url_target_parse(url, t, err, sizeof err))
        return true;
    fprintf(stderr, "hearth bench: %s: %s\n", url, err);
    return false;
}

int cmd_bench(int argc, char **argv)
{
    struct bench_args a;
    const enum opts_status st = opts_parse(&cmd_bench_spec, &a, argc, argv);
    if (st != OPTS_GO)
        return opts_exit(st);
    /* what the values cannot say: which options were given, and of --progress and
     * --no-progress the last */
    const bool compare_mode  = a.compare;
    const bool have_requests = opts_last(&cmd_bench_spec, argc, argv, "--requests") > 0;
    const bool have_conc     = opts_last(&cmd_bench_spec, argc, argv, "--concurrency") > 0;
    const bool any_run_opt =
        opts_last(&cmd_bench_spec, argc, argv,
                  "--workload --concurrency --rate --requests --duration --prompt-tokens "
                  "--tail-tokens --temperature --sessions --turns --own-system --salt --seed") > 0;
    const int on       = opts_last(&cmd_bench_spec, argc, argv, "--progress");
    const int off      = opts_last(&cmd_bench_spec, argc, argv, "--no-progress");
    const int progress = on > off ? 1 : off > on ? 0 : -1;
    const char *json = a.out.json, *tsv = a.out.tsv;

    struct bench_opts o;
    bench_opts_default(&o);
    o.workload      = (enum bench_workload)a.wl.workload;
    o.prompt_tokens = (int)a.wl.prompt_tokens;
    o.tail_tokens   = (int)a.wl.tail_tokens;
    o.max_tokens    = (int)a.wl.max_tokens;
    o.ignore_eos    = !a.wl.no_ignore_eos;
    o.temperature   = a.wl.temperature;
    o.sessions      = (int)a.wl.sessions;
    o.turns         = (int)a.wl.turns;
    o.own_system    = a.wl.own_system;
    o.salt          = a.wl.salt;
    o.seed          = (uint64_t)a.wl.seed;
    o.prompts_file  = a.wl.prompts;
    memcpy(o.concurrency, a.load.concurrency.v, sizeof o.concurrency);
    o.n_concurrency = a.load.concurrency.n;
    memcpy(o.rate, a.load.rate.v, sizeof o.rate);
    o.n_rate                     = a.load.rate.n;
    o.requests                   = (int)a.load.requests;
    o.duration_s                 = a.load.duration_s;
    o.model                      = a.server.model;
    o.api_key                    = a.server.api_key ? a.server.api_key : getenv("HEARTH_API_KEY");
    o.timeout_s                  = a.server.timeout_s;
    struct bench_compare_opts co = {.max_tokens   = o.max_tokens,
                                    .timeout_s    = o.timeout_s,
                                    .model        = o.model,
                                    .prompts_file = o.prompts_file,
                                    .stop_fd      = -1};

    if (!a.urls.n) {
        fprintf(stderr, "hearth bench: give the server's URL (hearth bench --help)\n");
        return EXIT_USAGE;
    }
    const char *url = a.urls.v[0];
    if (!compare_mode && a.urls.n > 1) {
        fprintf(stderr, "hearth bench: one URL (more only with --compare), got '%s'\n",
                a.urls.v[1]);
        return EXIT_USAGE;
    }
    const int n_compare = (int)a.urls.n - 1;
    if (compare_mode && !n_compare) {
        fprintf(stderr, "hearth bench: --compare needs at least one URL to compare with\n");
        return EXIT_USAGE;
    }
    if (compare_mode && n_compare > (int)(sizeof co.targets / sizeof co.targets[0]) - 1) {
        fprintf(stderr, "hearth bench: --compare takes at most %d URLs\n",
                (int)(sizeof co.targets / sizeof co.targets[0]) - 1);
        return EXIT_USAGE;
    }
    if (compare_mode && (any_run_opt || json || tsv)) {
        fprintf(stderr, "hearth bench: --compare takes only --prompts, --max-tokens, "
                        "--no-ignore-eos, --model, --api-key and --timeout\n");
        return EXIT_USAGE;
    }
    if (!compare_mode && o.prompts_file && o.workload != BENCH_COMPLETION &&
        o.workload != BENCH_CHAT) {
        fprintf(stderr, "hearth bench: --prompts goes with --compare or the completion and chat "
                        "workloads\n");
        return EXIT_USAGE;
    }
    if (o.n_rate && have_conc) {
        fprintf(stderr, "hearth bench: --rate and --concurrency are alternatives: give one\n");
        return EXIT_USAGE;
    }
    if (o.duration_s > 0 && have_requests) {
        fprintf(stderr, "hearth bench: --requests and --duration are alternatives: give one\n");
        return EXIT_USAGE;
    }
    if (o.workload == BENCH_CONVERSATION && (o.n_rate || o.duration_s > 0 || have_requests)) {
        fprintf(stderr, "hearth bench: a conversation run is --sessions x --turns requests: "
                        "--rate, --requests and --duration do not apply\n");
        return EXIT_USAGE;
    }
    if (o.own_system && o.workload != BENCH_CONVERSATION) {
        fprintf(stderr, "hearth bench: --own-system goes with the conversation workload\n");
        return EXIT_USAGE;
    }
    if (o.rate[0] > 0)
        o.n_concurrency = 0;

    if (pipe2(stop_pipe, O_CLOEXEC) != 0) {
        fprintf(stderr, "hearth bench: cannot make a pipe: %s\n", strerror(errno));
        return EXIT_RUNTIME;
    }
    struct sigaction sa = {.sa_handler = on_sigint};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    char err[400];

    if (compare_mode) {
        co.n_targets  = 1 + n_compare;
        co.api_key    = o.api_key;
        co.ignore_eos = false;
        co.stop_fd    = stop_pipe[0];
        if (!target(url, &co.targets[0]))
            return EXIT_USAGE;
        for (int k = 0; k < n_compare; k++)
            if (!target(a.urls.v[1 + k], &co.targets[1 + k]))
                return EXIT_USAGE;
        const int cmp_rc = bench_compare(&co, stdout, err, sizeof err);
        if (cmp_rc == 2) {
            fprintf(stderr, "hearth %s\n", err);
            return EXIT_RUNTIME;
        }
        return cmp_rc;
    }

    if (!target(url, &o.target))
        return EXIT_USAGE;
    o.progress            = progress < 0 ? isatty(STDERR_FILENO) : progress;
    o.stop_fd             = stop_pipe[0];
    struct bench_run *run = calloc(1, sizeof *run);
    if (!run)
        return EXIT_RUNTIME;
    bool ok = bench_run(&o, run, err, sizeof err);
    int rc  = EXIT_OK;
    if (!ok && !run->n_cells) {
        fprintf(stderr, "hearth %s\n", err);
        free(run);
        return EXIT_RUNTIME;
    }
    bench_report_table(stdout, run);
    fflush(stdout);
    if (!ok) {
        fprintf(stderr, "hearth %s\n", err);
        rc = EXIT_RUNTIME;
    }
    if (json && !bench_report_json(json, run, err, sizeof err)) {
        fprintf(stderr, "hearth %s\n", err);
        rc = EXIT_RUNTIME;
    }
    if (tsv && !bench_report_tsv(tsv, run, err, sizeof err)) {
        fprintf(stderr, "hearth %s\n", err);
        rc = EXIT_RUNTIME;
    }
    if (run->stopped && rc == EXIT_OK)
        rc = 128 + SIGINT;
    free(run);
    return rc;
}
