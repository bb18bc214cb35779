/*
 * test_bench.c: `hearth bench` end to end: the real binary as a child,
 * against the scripted server of tests/util/benchfix in this process (its
 * counts, its errors by kind, a deadline, Ctrl-C at a held request, bad
 * usage), against real `hearth serve` processes on stories260K (every
 * workload; --compare between two servers on the same and on different
 * models), and against llama-server when HEARTH_LLAMA_SERVER names its
 * binary. Timing figures are the unit test's business (there the fixture's
 * clock makes them exact); here only counts, exit statuses and output.
 */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench/bench.h"
#include "util/benchfix.h"
#include "util/serveutil.h"
#include "util/testutil.h"

#define NAME_OF(name, kind, expr) #name,
static const char *const columns[] = {BENCH_COLUMNS(NAME_OF)};
#define N_COLUMNS ((int)(sizeof columns / sizeof columns[0]))

/* hearth bench ARGS... (NULL-terminated), stdout and stderr captured; its exit status. */
static int bench(const char *const *args, char **out, char **err)
{
    const char *argv[48] = {tu_bin(), "bench"};
    int n                = 2;
    for (int i = 0; args[i] && n < 47; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    int rc  = tu_run(argv, NULL, out, err, 600);
    return rc;
}

/* Runs bench; fails the test, showing its output, unless it exits want. */
static void bench_expect(const char *const *args, int want, char **out, char **err)
{
    int rc = bench(args, out, err);
    if (rc != want)
        fail_msg("hearth bench exited %d, expected %d\nstdout:\n%s\nstderr:\n%s", rc, want,
                 *out ? *out : "", *err ? *err : "");
}

/* The --json file: an array of n cells (the caller deletes it). */
static cJSON *json_cells(const char *path, int n)
{
    char *text = tu_read_file(path, NULL);
    if (!text)
        fail_msg("hearth bench wrote no %s", path);
    cJSON *a = cJSON_Parse(text);
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != n)
        fail_msg("%s is not an array of %d cells:\n%s", path, n, text);
    free(text);
    return a;
}

static long cell_int(const cJSON *cells, int i, const char *key)
{
    return (long)jnum(cJSON_GetArrayItem(cells, i), key);
}

/* A cell with no error of any kind. */
static void assert_cell_clean(const cJSON *cells, int i)
{
    static const char *const kinds[] = {"errors", "errors_http", "errors_connection",
                                        "errors_timeout", "errors_protocol"};
    for (int k = 0; k < 5; k++)
        if (cell_int(cells, i, kinds[k]) != 0)
            fail_msg("cell %d: %s is %ld", i, kinds[k], cell_int(cells, i, kinds[k]));
}

/* A path in dir (a static buffer, one of 4 rotating). */
static const char *in_dir(const char *dir, const char *name)
{
    static char bufs[4][512];
    static int k;
    char *b = bufs[k++ % 4];
    snprintf(b, 512, "%s/%s", dir, name);
    return b;
}

/*
 * The value of column name in the first row under the table's header (the
 * line starting with "workload"), or -1 when the table has no such column.
 */
static long table_value(const char *out, const char *name)
{
    char *text = strdup(out);
    long v     = -1;
    char *lines[256];
    int n = 0;
    for (char *l = strtok(text, "\n"); l && n < 256; l = strtok(NULL, "\n"))
        lines[n++] = l;
    for (int i = 0; i + 1 < n; i++) {
        if (strncmp(lines[i], "workload ", 9))
            continue;
        char *head[64], *row[64], *s1 = NULL, *s2 = NULL;
        int nh = 0, nr = 0;
        for (char *t = strtok_r(lines[i], " ", &s1); t && nh < 64; t = strtok_r(NULL, " ", &s1))
            head[nh++] = t;
        for (char *t = strtok_r(lines[i + 1], " ", &s2); t && nr < 64; t = strtok_r(NULL, " ", &s2))
            row[nr++] = t;
        for (int k = 0; k < nh && k < nr; k++)
            if (!strcmp(head[k], name))
                v = strtol(row[k], NULL, 10);
        break;
    }
    free(text);
    return v;
}

/* A free loopback port: bound once and let go (the next bind of it is the caller's). */
static int free_port(void)
{
    int fd               = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len        = sizeof a;
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

/* -------------------------------------------------------- against the fixture --- */

/* Two cells of 8 requests of 32 tokens: the JSON, the TSV and the table agree with the fixture. */
static void test_fixture_cells(void **state)
{
    struct benchfix *fx = benchfix_start();
    assert_non_null(fx);
    benchfix_set_default(fx, &(struct benchfix_step){.n_tokens = 32});
    char *dir = tu_tmpdir();
    char json[512], tsv[512];
    snprintf(json, sizeof json, "%s", in_dir(dir, "run.json"));
    snprintf(tsv, sizeof tsv, "%s", in_dir(dir, "run.tsv"));
    char *out = NULL, *err = NULL;
    bench_expect((const char *[]){benchfix_url(fx), "--workload", "completion", "--concurrency",
                                  "1,4", "--requests", "8", "--max-tokens", "32", "--prompt-tokens",
                                  "32", "--json", json, "--tsv", tsv, "--no-progress", NULL},
                 0, &out, &err);
    print_message("%s", out);
    cJSON *cells = json_cells(json, 2);
    for (int i = 0; i < 2; i++) {
        assert_string_equal(jstr(cJSON_GetArrayItem(cells, i), "workload"), "completion");
        assert_int_equal(cell_int(cells, i, "concurrency"), i ? 4 : 1);
        assert_int_equal(cell_int(cells, i, "requests"), 8);
        assert_cell_clean(cells, i);
        assert_int_equal(cell_int(cells, i, "output_tokens"), 8 * 32);
        long prompt = 0;
        for (int r = 8 * i; r < 8 * i + 8; r++)
            prompt += benchfix_request(fx, r)->prompt_words;
        assert_int_equal(cell_int(cells, i, "prompt_tokens"), prompt);
    }
    assert_int_equal(benchfix_n_requests(fx), 16);
    /* the TSV's header is the columns */
    char *t = tu_read_file(tsv, NULL);
    assert_non_null(t);
    char want[2048] = "";
    for (int i = 0; i < N_COLUMNS; i++)
        snprintf(want + strlen(want), sizeof want - strlen(want), "%s%s", i ? "\t" : "",
                 columns[i]);
    strcat(want, "\n");
    assert_memory_equal(t, want, strlen(want));
    /* the table's first row */
    assert_int_equal(table_value(out, "requests"), 8);
    assert_int_equal(table_value(out, "output_tokens"), 256);
    free(t);
    cJSON_Delete(cells);
    free(out);
    free(err);
    tu_rmtree(dir);
    free(dir);
    benchfix_stop(fx);
}

/* 500s and drops mid-stream: counted by kind in the JSON, the run goes on, exit 0. */
static void test_fixture_errors_by_kind(void **state)
{
    struct benchfix *fx = benchfix_start();
    assert_non_null(fx);
    const struct benchfix_step ok = {.n_tokens = 32};
    struct benchfix_step e500 = ok, drop3 = ok, drop0 = ok;
    e500.fault                           = BENCHFIX_HTTP_500;
    drop3.fault                          = BENCHFIX_DROP;
    drop3.k                              = 3;
    drop0.fault                          = BENCHFIX_DROP;
    const struct benchfix_step script[8] = {ok, e500, drop3, ok, e500, ok, drop0, ok};
    benchfix_script(fx, script, 8);
    char *dir = tu_tmpdir();
    char json[512];
    snprintf(json, sizeof json, "%s", in_dir(dir, "run.json"));
    char *out = NULL, *err = NULL;
    bench_expect((const char *[]){benchfix_url(fx), "--requests", "8", "--max-tokens", "32",
                                  "--json", json, "--no-progress", NULL},
                 0, &out, &err);
    print_message("%s", out);
    cJSON *cells = json_cells(json, 1);
    assert_int_equal(cell_int(cells, 0, "requests"), 8);
    assert_int_equal(cell_int(cells, 0, "errors"), 4);
    assert_int_equal(cell_int(cells, 0, "errors_http"), 2);
    assert_int_equal(cell_int(cells, 0, "errors_connection"), 2);
    assert_int_equal(cell_int(cells, 0, "errors_timeout"), 0);
    assert_int_equal(cell_int(cells, 0, "errors_protocol"), 0);
    assert_int_equal(cell_int(cells, 0, "output_tokens"), 4 * 32);
    /* the statuses are listed under the table */
    assert_non_null(strstr(out, "500"));
    cJSON_Delete(cells);
    free(out);
    free(err);
    tu_rmtree(dir);
    free(dir);
    benchfix_stop(fx);
}

/* --timeout 1 against a server that holds the request forever: one timeout, then the next runs. */
static void test_fixture_timeout(void **state)
{
    struct benchfix *fx = benchfix_start();
    assert_non_null(fx);
    const struct benchfix_step script[2] = {{.fault = BENCHFIX_HOLD}, {.n_tokens = 32}};
    benchfix_script(fx, script, 2);
    char *dir = tu_tmpdir();
    char json[512];
    snprintf(json, sizeof json, "%s", in_dir(dir, "run.json"));
    char *out = NULL, *err = NULL;
    bench_expect((const char *[]){benchfix_url(fx), "--requests", "2", "--max-tokens", "32",
                                  "--timeout", "1", "--json", json, "--no-progress", NULL},
                 0, &out, &err);
    cJSON *cells = json_cells(json, 1);
    assert_int_equal(cell_int(cells, 0, "requests"), 2);
    assert_int_equal(cell_int(cells, 0, "errors"), 1);
    assert_int_equal(cell_int(cells, 0, "errors_timeout"), 1);
    assert_int_equal(cell_int(cells, 0, "output_tokens"), 32);
    cJSON_Delete(cells);
    free(out);
    free(err);
    tu_rmtree(dir);
    free(dir);
    benchfix_stop(fx);
}

/*
 * Ctrl-C: the fixture answers three requests and holds the fourth; once it
 * is held, SIGINT. hearth bench exits 130 and reports the three (the held
 * one was stopped, not finished) in its table and its JSON.
 */
static void test_fixture_ctrl_c(void **state)
{
    struct benchfix *fx = benchfix_start();
    assert_non_null(fx);
    const struct benchfix_step ok        = {.n_tokens = 32};
    const struct benchfix_step script[4] = {ok, ok, ok, {.fault = BENCHFIX_HOLD}};
    benchfix_script(fx, script, 4);
    char *dir = tu_tmpdir();
    char json[512], log[512];
    snprintf(json, sizeof json, "%s", in_dir(dir, "run.json"));
    snprintf(log, sizeof log, "%s", in_dir(dir, "out.txt"));
    const char *argv[] = {
        tu_bin(), "bench", benchfix_url(fx), "--requests", "8", "--max-tokens", "32",
        "--json", json,    "--no-progress",  NULL};
    pid_t pid = srv_spawn(argv, log);
    assert_true(pid > 0);
    bool held = benchfix_wait_held(fx, 1, 120);
    kill(pid, SIGINT);
    int rc    = srv_wait_pid(pid, 60);
    char *out = srv_slurp(log);
    print_message("%s", out);
    assert_true(held);
    assert_int_equal(rc, 130);
    assert_int_equal(benchfix_n_requests(fx), 4);
    assert_int_equal(table_value(out, "requests"), 3);
    cJSON *cells = json_cells(json, 1);
    assert_int_equal(cell_int(cells, 0, "requests"), 3);
    assert_cell_clean(cells, 0);
    assert_int_equal(cell_int(cells, 0, "output_tokens"), 3 * 32);
    cJSON_Delete(cells);
    free(out);
    tu_rmtree(dir);
    free(dir);
    benchfix_stop(fx);
}

/* Bad usage: exit 2 with one line on stderr; a server that is not there: exit 1, one line. */
static void test_bad_usage(void **state)
{
    struct benchfix *fx = benchfix_start();
    assert_non_null(fx);
    const char *url                  = benchfix_url(fx);
    const char *const *const cases[] = {
        (const char *[]){url, "--bogus", NULL},
        (const char *[]){url, "--concurrency", "0", NULL},
        (const char *[]){url, "--concurrency", "1,x", NULL},
        (const char *[]){url, "--requests", "abc", NULL},
        (const char *[]){url, "--workload", "nope", NULL},
        (const char *[]){"https://127.0.0.1:1", NULL},
        (const char *[]){NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *out = NULL, *err = NULL;
        int rc = bench(cases[i], &out, &err);
        print_message("# case %zu: exit %d: %s", i, rc, err);
        assert_int_equal(rc, 2);
        assert_true(strlen(err) > 1);
        /* one line: the only newline ends it */
        assert_ptr_equal(strchr(err, '\n'), err + strlen(err) - 1);
        free(out);
        free(err);
    }
    assert_int_equal(benchfix_n_requests(fx), 0);
    benchfix_stop(fx);

    char url2[64], *out = NULL, *err = NULL;
    snprintf(url2, sizeof url2, "http://127.0.0.1:%d", free_port());
    int rc = bench((const char *[]){url2, "--no-progress", NULL}, &out, &err);
    print_message("# no server: exit %d: %s", rc, err);
    assert_int_equal(rc, 1);
    assert_true(strlen(err) > 1);
    assert_ptr_equal(strchr(err, '\n'), err + strlen(err) - 1);
    free(out);
    free(err);
}

/* ---------------------------------------------------------- against hearth --- */

static const char *const serve_args[] = {"--parallel", "4", "--ctx-size", "256", NULL};

/* `--concurrency 1,4 --requests 8 --max-tokens 32` of workload w: 0 errors, 256 tokens a cell. */
static void sweep(const char *base, const char *w)
{
    char *dir = tu_tmpdir();
    char json[512];
    snprintf(json, sizeof json, "%s", in_dir(dir, "run.json"));
    char *out = NULL, *err = NULL;
    bench_expect((const char *[]){base, "--workload", w, "--concurrency", "1,4", "--requests", "8",
                                  "--max-tokens", "32", "--prompt-tokens", "32", "--json", json,
                                  "--no-progress", NULL},
                 0, &out, &err);
    print_message("%s", out);
    cJSON *cells = json_cells(json, 2);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(cell_int(cells, i, "requests"), 8);
        assert_cell_clean(cells, i);
        assert_int_equal(cell_int(cells, i, "output_tokens"), 8 * 32);
        assert_true(cell_int(cells, i, "prompt_tokens") > 0);
    }
    cJSON_Delete(cells);
    free(out);
    free(err);
    tu_rmtree(dir);
    free(dir);
}

static void test_hearth_completion(void **state)
{
    SRV_NEED_CURL_AND_MODEL();
    struct srv s;
    srv_start(&s, serve_args);
    sweep(s.base, "completion");
    srv_stop(&s);
}

static void test_hearth_chat(void **state)
{
    SRV_NEED_CURL_AND_MODEL();
    struct srv s;
    srv_start(&s, serve_args);
    sweep(s.base, "chat");
    srv_stop(&s);
}

/* One cell of workload w with extra options: 0 errors, its requests, and the cache used. */
static void cached_run(const char *base, const char *const *opts, long requests)
{
    char *dir = tu_tmpdir();
    char json[512];
    snprintf(json, sizeof json, "%s", in_dir(dir, "run.json"));
    const char *args[32] = {base};
    int n                = 1;
    for (int i = 0; opts[i]; i++)
        args[n++] = opts[i];
    args[n++] = "--json";
    args[n++] = json;
    args[n++] = "--no-progress";
    args[n]   = NULL;
    char *out = NULL, *err = NULL;
    bench_expect(args, 0, &out, &err);
    print_message("%s", out);
    cJSON *cells = json_cells(json, 1);
    assert_int_equal(cell_int(cells, 0, "requests"), requests);
    assert_cell_clean(cells, 0);
    assert_true(cell_int(cells, 0, "cached_tokens") > 0);
    assert_true(cell_int(cells, 0, "cached_tokens") < cell_int(cells, 0, "prompt_tokens"));
    cJSON_Delete(cells);
    free(out);
    free(err);
    tu_rmtree(dir);
    free(dir);
}

/*
 * 4 sessions of 3 turns on 2 in flight: later turns find their history in
 * the cache. stories260K's small vocabulary spends about 3 tokens a word and
 * its chat template's role markers many more, so a third turn is some 320
 * tokens: the slots get 512 (the model's training context).
 */
static void test_hearth_conversation(void **state)
{
    SRV_NEED_CURL_AND_MODEL();
    struct srv s;
    srv_start(&s, (const char *[]){"--parallel", "4", "--ctx-size", "512", NULL});
    cached_run(s.base,
               (const char *[]){"--workload", "conversation", "--sessions", "4", "--turns", "3",
                                "--concurrency", "2", "--prompt-tokens", "48", "--max-tokens", "8",
                                NULL},
               12);
    srv_stop(&s);
}

/*
 * First turns only: with the shared system prompt every session after the
 * first finds it cached; with --own-system a first turn finds no more than
 * the template's opening.
 */
static void test_hearth_conversation_own_system(void **state)
{
    SRV_NEED_CURL_AND_MODEL();
    struct srv s;
    srv_start(&s, (const char *[]){"--parallel", "2", "--ctx-size", "512", NULL});
    long cached[2];
    for (int own = 0; own < 2; own++) {
        char *dir = tu_tmpdir();
        char json[512];
        snprintf(json, sizeof json, "%s", in_dir(dir, "run.json"));
        const char *args[] = {s.base,
                              "--workload",
                              "conversation",
                              "--sessions",
                              "3",
                              "--turns",
                              "1",
                              "--prompt-tokens",
                              "64",
                              "--max-tokens",
                              "4",
                              "--seed",
                              "5",
                              "--json",
                              json,
                              "--no-progress",
                              own ? "--own-system" : NULL,
                              NULL};
        char *out = NULL, *err = NULL;
        bench_expect(args, 0, &out, &err);
        cJSON *cells = json_cells(json, 1);
        assert_int_equal(cell_int(cells, 0, "requests"), 3);
        assert_cell_clean(cells, 0);
        cached[own] = cell_int(cells, 0, "cached_tokens");
        cJSON_Delete(cells);
        free(out);
        free(err);
        tu_rmtree(dir);
        free(dir);
    }
    print_message("first turns' cached tokens: %ld with one system prompt, %ld with one each\n",
                  cached[0], cached[1]);
    assert_true(cached[0] >= 2 * 64);
    /* own prompts share only the template's opening, under a block (32 tokens) each */
    assert_in_range(cached[1], 1, 3 * 32 - 1);
    const char *bad[] = {s.base, "--own-system", "--no-progress", NULL};
    char *out = NULL, *err = NULL;
    bench_expect(bad, 2, &out, &err);
    assert_non_null(strstr(err, "--own-system goes with the conversation workload"));
    free(out);
    free(err);
    srv_stop(&s);
}

/* Requests sharing a long prefix: the server's cache serves it. */
static void test_hearth_prefix_share(void **state)
{
    SRV_NEED_CURL_AND_MODEL();
    struct srv s;
    srv_start(&s, serve_args);
    cached_run(s.base,
               (const char *[]){"--workload", "prefix-share", "--requests", "8", "--prompt-tokens",
                                "64", "--tail-tokens", "8", "--max-tokens", "8", NULL},
               8);
    srv_stop(&s);
}

/* The number of times needle occurs in hay. */
static int count_of(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

/* Two servers on the same model: identical texts, exit 0. */
static void test_compare_hearth_same_model(void **state)
{
    SRV_NEED_CURL_AND_MODEL();
    struct srv a, b;
    srv_start(&a, serve_args);
    srv_start(&b, serve_args);
    char *out = NULL, *err = NULL;
    bench_expect((const char *[]){a.base, "--compare", b.base, "--max-tokens", "32", NULL}, 0, &out,
                 &err);
    print_message("%s", out);
    assert_true(count_of(out, "identical") >= 1);
    assert_null(strstr(out, "parts from"));
    free(out);
    free(err);
    srv_stop(&a);
    srv_stop(&b);
}

/* Different models: exit 1, and the output names where the texts part. */
static void test_compare_hearth_other_model(void **state)
{
    SRV_NEED_CURL_AND_MODEL();
    TU_MODEL_OR_SKIP(other, "tiny-llama-spm-q8_0.gguf");
    struct srv a, b;
    srv_start(&a, serve_args);
    srv_start_opt(&b, other, serve_args, true);
    char *out = NULL, *err = NULL;
    bench_expect((const char *[]){a.base, "--compare", b.base, "--max-tokens", "16", NULL}, 1, &out,
                 &err);
    print_message("%s", out);
    const char *at = strstr(out, " at byte ");
    if (!at)
        fail_msg("no position named in:\n%s", out);
    char *end;
    long pos = strtol(at + 9, &end, 10);
    assert_true(end > at + 9 && pos >= 0);
    free(out);
    free(err);
    srv_stop(&a);
    srv_stop(&b);
}

/* ----------------------------------------------------- against llama-server --- */

/* llama-server's binary from HEARTH_LLAMA_SERVER, or NULL (the test then skips). */
static const char *llama_server(void)
{
    const char *bin = getenv("HEARTH_LLAMA_SERVER");
    if (bin && *bin && access(bin, X_OK) == 0)
        return bin;
    print_message("skip: set HEARTH_LLAMA_SERVER to a llama-server binary to run this test\n");
    return NULL;
}

struct llama {
    pid_t pid;
    struct srv s; /* base and dir only, for the http helpers */
};

/* Starts llama-server on stories260K, 4 slots of 256 tokens; waits until /health says 200. */
static void llama_start(struct llama *l, const char *bin, const char *model)
{
    memset(l, 0, sizeof *l);
    l->s.dir  = tu_tmpdir();
    l->s.gate = -1;
    int port  = free_port();
    char p[16];
    snprintf(p, sizeof p, "%d", port);
    snprintf(l->s.base, sizeof l->s.base, "http://127.0.0.1:%d", port);
    snprintf(l->s.log, sizeof l->s.log, "%s/llama.log", l->s.dir);
    const char *argv[] = {bin, "-m",  model, "--host", "127.0.0.1", "--port",
                          p,   "-np", "4",   "-c",     "1024",      NULL};
    l->pid             = srv_spawn(argv, l->s.log);
    assert_true(l->pid > 0);
    for (int i = 0; i < 1200; i++) {
        struct http_resp r = http_get(&l->s, "/health");
        int st             = r.status;
        http_resp_free(&r);
        if (st == 200)
            return;
        if (srv_wait_pid(l->pid, 0) >= 0)
            break;
        srv_sleep_ms(100); /* polling for readiness, not a condition of the test */
    }
    char *log = srv_slurp(l->s.log);
    fail_msg("llama-server did not come up:\n%s", log);
}

static void llama_stop(struct llama *l)
{
    kill(l->pid, SIGTERM);
    if (srv_wait_pid(l->pid, 60) < 0) {
        kill(l->pid, SIGKILL);
        srv_wait_pid(l->pid, 60);
    }
    tu_rmtree(l->s.dir);
    free(l->s.dir);
}

static void test_llama_server_completion(void **state)
{
    SRV_NEED_CURL_AND_MODEL();
    const char *bin = llama_server();
    if (!bin)
        skip();
    struct llama l;
    llama_start(&l, bin, model_path_);
    sweep(l.s.base, "completion");
    llama_stop(&l);
}

/* hearth and llama-server on the same model agree token for token at temperature 0. */
static void test_compare_hearth_llama_server(void **state)
{
    SRV_NEED_CURL_AND_MODEL();
    const char *bin = llama_server();
    if (!bin)
        skip();
    struct llama l;
    llama_start(&l, bin, model_path_);
    struct srv s;
    srv_start(&s, serve_args);
    char *out = NULL, *err = NULL;
    bench_expect((const char *[]){s.base, "--compare", l.s.base, "--max-tokens", "32", NULL}, 0,
                 &out, &err);
    print_message("%s", out);
    assert_true(count_of(out, "identical") >= 1);
    free(out);
    free(err);
    srv_stop(&s);
    llama_stop(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_fixture_cells, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_fixture_errors_by_kind, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_fixture_timeout, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_fixture_ctrl_c, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_bad_usage, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_hearth_completion, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_hearth_chat, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_hearth_conversation, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_hearth_conversation_own_system, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_hearth_prefix_share, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_compare_hearth_same_model, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_compare_hearth_other_model, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_llama_server_completion, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_compare_hearth_llama_server, srv_kill_leftovers),
    };
    return cmocka_run_group_tests_name("e2e_bench", tests, NULL, NULL);
}
