/*
 * cmd_bench.c: `hearth bench URL`, the load generator and judge for any
 * OpenAI-compatible server (src/bench/). Parses the options, turns Ctrl-C
 * into the runner's stop descriptor (a self-pipe, so every request thread
 * sees it at once), and prints the figures, also after an interruption.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"
#include "cmd.h"

static void usage(FILE *fp)
{
    fprintf(fp,
        "usage: hearth bench URL [options]\n"
        "       hearth bench URL --compare URL [URL ...] [--prompts FILE] [--max-tokens N]\n\n"
        "Load-tests an OpenAI-compatible server (hearth, llama-server, vLLM) at URL\n"
        "(http://HOST:PORT, a trailing /v1 is fine) and prints a table of figures per cell.\n\n"
        "  --workload W          completion (default), chat, conversation, prefix-share\n"
        "  --concurrency LIST    closed-loop requests in flight, one cell each (default 1)\n"
        "  --rate LIST           open loop instead: Poisson arrivals per second, one cell each\n"
        "  --requests N          requests per cell (default 16)\n"
        "  --duration S          or send requests for S seconds per cell\n"
        "  --prompt-tokens N     prompt size (conversation: system prompt; prefix-share: the\n"
        "                        shared prefix), sized by the server's /tokenize (default 128)\n"
        "  --tail-tokens N       prefix-share: each request's own tail (default 32)\n"
        "  --max-tokens N        tokens per reply (default 64)\n"
        "  --no-ignore-eos       do not send ignore_eos (replies may end early)\n"
        "  --temperature T       default 0\n"
        "  --sessions S          conversation: sessions (default 8)\n"
        "  --turns T             conversation: turns per session (default 4)\n"
        "  --own-system          conversation: each session its own system prompt (its agent's\n"
        "                        files), so every first turn is cold; default: one shared\n"
        "  --salt                a random prefix on every prompt, so no earlier run's cache helps\n"
        "  --seed N              the prompts' words (default 1)\n"
        "  --timeout S           per request (default 600)\n"
        "  --model NAME          default: the first of GET /v1/models\n"
        "  --api-key KEY         sent as Authorization: Bearer KEY (or HEARTH_API_KEY)\n"
        "  --json FILE           the cells as a JSON array\n"
        "  --tsv FILE            the cells as tab-separated values\n"
        "  --progress            a live progress line on stderr (default when it is a terminal)\n"
        "  --no-progress         none\n\n"
        "  --compare URL ...     the same prompts at temperature 0 to URL and each of these:\n"
        "                        per prompt, identical or where the texts part; exit 1 if any do\n"
        "  --prompts FILE        prompts, one per line: --compare's (default: a built-in set),\n"
        "                        or completion and chat requests', taken in turn (instead of\n"
        "                        --prompt-tokens of words)\n\n"
        "Exit status: 0 done, 1 the run could not start, 2 usage, 130 stopped by Ctrl-C.\n");
}

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

static bool rate_list(const char *s, double *out, int *n)
{
    char *copy = strdup(s), *save = NULL;
    *n      = 0;
    bool ok = true;
    for (char *t = strtok_r(copy, ",", &save); t && ok; t = strtok_r(NULL, ",", &save)) {
        float v;
        if (*n == BENCH_MAX_CELLS) {
            fprintf(stderr, "hearth bench: --rate takes at most %d values\n", BENCH_MAX_CELLS);
            ok = false;
        } else if ((ok = arg_float("bench", "--rate", t, 1e-3, 1e6, &v))) {
            out[(*n)++] = v;
        }
    }
    free(copy);
    if (ok && !*n) {
        fprintf(stderr, "hearth bench: --rate needs at least one value\n");
        ok = false;
    }
    return ok;
}

static bool target(const char *url, struct httpc_target *t)
{
    char err[200];
    if (httpc_target_parse(url, t, err, sizeof err))
        return true;
    fprintf(stderr, "hearth bench: %s: %s\n", url, err);
    return false;
}

int cmd_bench(int argc, char **argv)
{
    struct bench_opts o;
    bench_opts_default(&o);
    struct bench_compare_opts co = {.max_tokens = 64, .timeout_s = 600, .stop_fd = -1};
    const char *url = NULL, *json = NULL, *tsv = NULL;
    const char *compare[8];
    int n_compare = 0;
    bool compare_mode = false, have_requests = false, have_conc = false, any_run_opt = false;
    int progress = -1;
    long v;
    float f;
    o.api_key = getenv("HEARTH_API_KEY");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val;
#define VALUE()                                                                                    \
    do {                                                                                           \
        if (!(val = arg_value("bench", argc, argv, &i)))                                           \
            return EXIT_USAGE;                                                                     \
    } while (0)
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return EXIT_OK;
        } else if (!strcmp(a, "--workload")) {
            VALUE();
            if (!bench_workload_parse(val, &o.workload)) {
                fprintf(stderr, "hearth bench: --workload expects completion, chat, conversation "
                                "or prefix-share, got '%s'\n", val);
                return EXIT_USAGE;
            }
            any_run_opt = true;
        } else if (!strcmp(a, "--concurrency")) {
            VALUE();
            if (!int_list(a, val, 1, 4096, o.concurrency, &o.n_concurrency))
                return EXIT_USAGE;
            have_conc = any_run_opt = true;
        } else if (!strcmp(a, "--rate")) {
            VALUE();
            if (!rate_list(val, o.rate, &o.n_rate))
                return EXIT_USAGE;
            any_run_opt = true;
        } else if (!strcmp(a, "--requests")) {
            VALUE();
            if (!arg_long("bench", a, val, 1, 10000000, &v))
                return EXIT_USAGE;
            o.requests    = (int)v;
            have_requests = any_run_opt = true;
        } else if (!strcmp(a, "--duration")) {
            VALUE();
            if (!arg_float("bench", a, val, 0.001, 1e7, &f))
                return EXIT_USAGE;
            o.duration_s = f;
            any_run_opt  = true;
        } else if (!strcmp(a, "--prompt-tokens")) {
            VALUE();
            if (!arg_long("bench", a, val, 1, 10000000, &v))
                return EXIT_USAGE;
            o.prompt_tokens = (int)v;
            any_run_opt     = true;
        } else if (!strcmp(a, "--tail-tokens")) {
            VALUE();
            if (!arg_long("bench", a, val, 1, 10000000, &v))
                return EXIT_USAGE;
            o.tail_tokens = (int)v;
            any_run_opt   = true;
        } else if (!strcmp(a, "--max-tokens")) {
            VALUE();
            if (!arg_long("bench", a, val, 1, 10000000, &v))
                return EXIT_USAGE;
            o.max_tokens = co.max_tokens = (int)v;
        } else if (!strcmp(a, "--no-ignore-eos")) {
            o.ignore_eos = false;
        } else if (!strcmp(a, "--temperature")) {
            VALUE();
            if (!arg_float("bench", a, val, 0, 100, &f))
                return EXIT_USAGE;
            o.temperature = f;
            any_run_opt   = true;
        } else if (!strcmp(a, "--sessions") || !strcmp(a, "--turns")) {
            VALUE();
            if (!arg_long("bench", a, val, 1, 100000, &v))
                return EXIT_USAGE;
            *(a[2] == 's' ? &o.sessions : &o.turns) = (int)v;
            any_run_opt = true;
        } else if (!strcmp(a, "--own-system")) {
            o.own_system = true;
            any_run_opt  = true;
        } else if (!strcmp(a, "--salt")) {
            o.salt      = true;
            any_run_opt = true;
        } else if (!strcmp(a, "--seed")) {
            VALUE();
            if (!arg_long("bench", a, val, 0, __LONG_MAX__, &v))
                return EXIT_USAGE;
            o.seed      = (uint64_t)v;
            any_run_opt = true;
        } else if (!strcmp(a, "--timeout")) {
            VALUE();
            if (!arg_float("bench", a, val, 0.001, 1e7, &f))
                return EXIT_USAGE;
            o.timeout_s = co.timeout_s = f;
        } else if (!strcmp(a, "--model")) {
            VALUE();
            o.model = co.model = val;
        } else if (!strcmp(a, "--api-key")) {
            VALUE();
            o.api_key = val;
        } else if (!strcmp(a, "--json")) {
            VALUE();
            json = val;
        } else if (!strcmp(a, "--tsv")) {
            VALUE();
            tsv = val;
        } else if (!strcmp(a, "--progress")) {
            progress = 1;
        } else if (!strcmp(a, "--no-progress")) {
            progress = 0;
        } else if (!strcmp(a, "--prompts")) {
            VALUE();
            co.prompts_file = o.prompts_file = val;
        } else if (!strcmp(a, "--compare")) {
            compare_mode = true;
            while (i + 1 < argc && argv[i + 1][0] != '-') {
                if (n_compare == 7) {
                    fprintf(stderr, "hearth bench: --compare takes at most 7 URLs\n");
                    return EXIT_USAGE;
                }
                compare[n_compare++] = argv[++i];
            }
        } else if (a[0] == '-') {
            fprintf(stderr, "hearth bench: unknown option '%s' (hearth bench --help)\n", a);
            return EXIT_USAGE;
        } else if (!url) {
            url = a;
        } else {
            fprintf(stderr, "hearth bench: one URL (more only after --compare), got '%s'\n", a);
            return EXIT_USAGE;
        }
#undef VALUE
    }
    if (!url) {
        fprintf(stderr, "hearth bench: give the server's URL (hearth bench --help)\n");
        return EXIT_USAGE;
    }
    if (compare_mode && !n_compare) {
        fprintf(stderr, "hearth bench: --compare needs at least one URL to compare with\n");
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
            if (!target(compare[k], &co.targets[1 + k]))
                return EXIT_USAGE;
        int st = bench_compare(&co, stdout, err, sizeof err);
        if (st == 2) {
            fprintf(stderr, "hearth %s\n", err);
            return EXIT_RUNTIME;
        }
        return st;
    }

    if (!target(url, &o.target))
        return EXIT_USAGE;
    o.progress = progress < 0 ? isatty(STDERR_FILENO) : progress;
    o.stop_fd  = stop_pipe[0];
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
