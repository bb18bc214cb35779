/*
 * test_hostile_prep.c: one request cannot stall `hearth serve`'s preparation,
 * a client that hangs up has its work cancelled, shutdown is bounded and
 * /health tells a router when the server cannot take work. End to end on
 * the real binary with stories260K (tests/util/serveutil.h).
 *
 * - a preparation held at HEARTH_SERVE_PREP_GATE (as a slow grammar compile
 *   would hold it) occupies one worker: ordinary requests sent meanwhile
 *   complete, /health stays 200;
 * - a client that hangs up while its preparation is held, or queued behind
 *   another, has it skipped (hearth_prep_cancelled_total);
 * - a client that hangs up while its job is in a slot frees the slot, for
 *   each dialect, streamed or not (the scheduler's gate holds the job, so
 *   nothing but the cancel can free it);
 * - SIGTERM ends the server within 5 s with exit status 0 while a
 *   preparation is held, while a job is held in its slot, and while the
 *   model load is held (HEARTH_SERVE_LOAD_GATE), and with a FIFO named like a
 *   block file in --cache-dir;
 * - with --health-stall 0, /health is 503 while the one worker is held or
 *   the scheduler is held in a step, and 200 after.
 *
 * No check rests on timing: conditions are held by gates, and every wait is
 * a poll with a bound that fails the test when it passes.
 */
#include <cjson/cJSON.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/serveutil.h"

#define CHAT_SMALL                                                                                 \
    "{\"messages\":[{\"role\":\"user\",\"content\":\"Once upon a time\"}],\"max_tokens\":2,"       \
    "\"temperature\":0}"
#define CHAT_LONG                                                                                  \
    "{\"messages\":[{\"role\":\"user\",\"content\":\"Once upon a time\"}],\"max_tokens\":400,"     \
    "\"ignore_eos\":true,\"temperature\":0}"

/* A FIFO in a fresh directory for a gate; *dir is the directory (the caller removes it). */
static void make_fifo(char **dir, char *fifo, size_t n, const char *name)
{
    *dir = tu_tmpdir();
    assert_non_null(*dir);
    snprintf(fifo, n, "%s/%s", *dir, name);
    assert_int_equal(mkfifo(fifo, 0600), 0);
}

/* The value of the first sample of /metrics whose line starts with prefix; -1 when absent. */
static double metric(const struct srv *s, const char *prefix)
{
    struct http_resp r = http_get(s, "/metrics");
    assert_int_equal(r.status, 200);
    double v = -1;
    for (const char *l = r.body; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (!strncmp(l, prefix, strlen(prefix))) {
            v = strtod(l + strlen(prefix), NULL);
            break;
        }
    http_resp_free(&r);
    return v;
}

/* Polls /metrics until the sample at prefix reaches want; fails after a minute. */
static void wait_metric(const struct srv *s, const char *prefix, double want)
{
    double end = now_s() + 60, v = -1;
    while ((v = metric(s, prefix)) < want) {
        if (now_s() > end) {
            print_message("%s is %g after a minute; wanted %g\n", prefix, v, want);
            fail();
        }
        srv_sleep_ms(20);
    }
}

#define CANCELLED  "hearth_prep_cancelled_total "
#define PREP_TASKS "hearth_prep_tasks "
#define CHAT_499   "hearth_requests_total{endpoint=\"/v1/chat/completions\",code=\"499\"} "

/* Busy slots per /slots. */
static int busy_slots(const struct srv *s)
{
    struct http_resp r = http_get(s, "/slots");
    assert_int_equal(r.status, 200);
    cJSON *j = http_json(&r);
    int n    = 0;
    const cJSON *sl;
    cJSON_ArrayForEach(sl, j)
    {
        n += jstr(sl, "state") && !strcmp(jstr(sl, "state"), "busy");
    }
    cJSON_Delete(j);
    http_resp_free(&r);
    return n;
}

/* Polls /slots until want slots are busy; fails after a minute. */
static void wait_busy(const struct srv *s, int want)
{
    double end = now_s() + 60;
    int n;
    while ((n = busy_slots(s)) != want) {
        if (now_s() > end) {
            print_message("%d slots busy after a minute; wanted %d\n", n, want);
            fail();
        }
        srv_sleep_ms(20);
    }
}

/* /health's status, and its error code in code (when not 200). */
static int health(const struct srv *s, char *code, size_t n)
{
    struct http_resp r = http_get(s, "/health");
    int st             = r.status;
    code[0]            = 0;
    if (st != 200) {
        cJSON *j      = http_json(&r);
        const char *c = jstr(cJSON_GetObjectItemCaseSensitive(j, "error"), "code");
        snprintf(code, n, "%s", c ? c : "");
        cJSON_Delete(j);
    }
    http_resp_free(&r);
    return st;
}

/*
 * Starts s with its preparations held at a gate: a FIFO made in a fresh *dir (the caller
 * removes it), its path in fifo; sched_gated: the scheduler's gate too (srv_start_gated).
 */
static void start_prep_gated(struct srv *s, const char *const *extra, bool sched_gated, char **dir,
                             char *fifo, size_t fifo_len)
{
    make_fifo(dir, fifo, fifo_len, "prep-gate");
    setenv("HEARTH_SERVE_PREP_GATE", fifo, 1);
    if (sched_gated)
        srv_start_gated(s, extra);
    else
        srv_start(s, extra);
    unsetenv("HEARTH_SERVE_PREP_GATE");
}

/* ------------------------------------------------------- preparation --- */

static void test_held_preparation_holds_only_its_worker(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    char *dir, fifo[600], out[700];
    struct srv s;
    start_prep_gated(&s, NULL, false, &dir, fifo, sizeof fifo);
    snprintf(out, sizeof out, "%s/held.json", dir);

    pid_t held = http_post_bg(&s, "/v1/chat/completions", CHAT_SMALL, out, "120");
    int gate   = srv_fifo_wait_reader(fifo);
    /* three ordinary requests while it is held, each answered in full */
    for (int i = 0; i < 3; i++) {
        struct http_resp r = http_post(&s, "/v1/chat/completions", CHAT_SMALL);
        if (r.status != 200)
            print_message("ordinary request %d: %d %s\n", i, r.status, r.body);
        assert_int_equal(r.status, 200);
        cJSON_Delete(http_json(&r));
        http_resp_free(&r);
    }
    char code[64];
    assert_int_equal(health(&s, code, sizeof code), 200); /* three of four workers are free */
    assert_int_equal(srv_wait_pid(held, 0), -1);          /* the held one still waits */
    char *t = srv_slurp(out);
    assert_string_equal(t, "");
    free(t);

    srv_fifo_release(gate);
    assert_int_equal(srv_wait_pid(held, 60), 0);
    t                  = srv_slurp(out);
    struct http_resp r = {200, t, strdup("")};
    cJSON_Delete(http_json(&r)); /* its answer, whole */
    http_resp_free(&r);
    srv_stop(&s);
    tu_rmtree(dir);
    free(dir);
}

static void test_hang_up_cancels_preparation(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    char *dir, fifo[600], out_a[700], out_b[700], out_c[700];
    struct srv s;
    const char *extra[] = {"--threads-http", "1", NULL};
    start_prep_gated(&s, extra, false, &dir, fifo, sizeof fifo);
    snprintf(out_a, sizeof out_a, "%s/a.json", dir);
    snprintf(out_b, sizeof out_b, "%s/b.json", dir);
    snprintf(out_c, sizeof out_c, "%s/c.json", dir);
    assert_int_equal(metric(&s, CANCELLED), 0);

    /* A held at the gate by the one worker; B queued behind it, then its client hangs up */
    pid_t a  = http_post_bg(&s, "/v1/chat/completions", CHAT_SMALL, out_a, "120");
    int gate = srv_fifo_wait_reader(fifo);
    pid_t b  = http_post_bg(&s, "/v1/chat/completions", CHAT_SMALL, out_b, "120");
    wait_metric(&s, PREP_TASKS, 2); /* B's body is in and its task queued */
    kill(b, SIGKILL);
    srv_wait_pid(b, 30);
    wait_metric(&s, CHAT_499, 1); /* the loop saw the hang-up */
    srv_fifo_release(gate);
    assert_int_equal(srv_wait_pid(a, 60), 0); /* A's answer is whole */
    wait_metric(&s, CANCELLED, 1);            /* B was skipped, never run */

    /* C held at the gate, its client hangs up, then the gate opens: C stops there */
    pid_t c = http_post_bg(&s, "/v1/chat/completions", CHAT_SMALL, out_c, "120");
    gate    = srv_fifo_wait_reader(fifo);
    kill(c, SIGKILL);
    srv_wait_pid(c, 30);
    wait_metric(&s, CHAT_499, 2);
    srv_fifo_release(gate);
    wait_metric(&s, CANCELLED, 2);
    assert_int_equal(metric(&s, CANCELLED), 2);

    /* and the next request is served (it meets the gate too: let it through) */
    pid_t d = http_post_bg(&s, "/v1/chat/completions", CHAT_SMALL, out_a, "120");
    srv_fifo_release(srv_fifo_wait_reader(fifo));
    assert_int_equal(srv_wait_pid(d, 60), 0);
    char hfile[800];
    snprintf(hfile, sizeof hfile, "%s.headers", out_a);
    char *headers = srv_slurp(hfile);
    assert_int_equal(http_status_of(headers), 200);
    free(headers);
    assert_int_equal(metric(&s, CANCELLED), 2);
    srv_stop(&s);
    tu_rmtree(dir);
    free(dir);
}

/* -------------------------------------------------------- generation --- */

static void test_hang_up_cancels_generation(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    static const struct {
        const char *path, *body;
    } cases[] = {
        {"/v1/chat/completions", CHAT_LONG},
        {"/v1/chat/completions",
         "{\"messages\":[{\"role\":\"user\",\"content\":\"Once upon a time\"}],\"max_tokens\":400,"
         "\"ignore_eos\":true,\"temperature\":0,\"stream\":true}"},
        {"/v1/messages", "{\"model\":\"m\",\"max_tokens\":400,\"temperature\":0,\"messages\":"
                         "[{\"role\":\"user\",\"content\":\"Once upon a time\"}]}"},
        {"/v1/messages", "{\"model\":\"m\",\"max_tokens\":400,\"temperature\":0,\"stream\":true,"
                         "\"messages\":[{\"role\":\"user\",\"content\":\"Once upon a time\"}]}"},
        {"/v1/responses",
         "{\"model\":\"m\",\"input\":\"Once upon a time\",\"max_output_tokens\":400,"
         "\"temperature\":0}"},
        {"/v1/responses",
         "{\"model\":\"m\",\"input\":\"Once upon a time\",\"max_output_tokens\":400,"
         "\"temperature\":0,\"stream\":true}"},
    };
    struct srv s;
    const char *extra[] = {"--parallel", "1", NULL};
    srv_start_gated(&s, extra);
    char *dir = tu_tmpdir();
    int steps = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[700];
        snprintf(out, sizeof out, "%s/%zu.out", dir, i);
        pid_t c = http_post_bg(&s, cases[i].path, cases[i].body, out, "120");
        wait_busy(&s, 1);
        srv_gate_steps(&s, 1); /* one token: the job is generating */
        srv_wait_generated(&s, 1);
        steps++;
        kill(c, SIGKILL);
        srv_wait_pid(c, 30);
        /* the gate lets no step through: only the cancel can free the slot */
        wait_busy(&s, 0);
        print_message("%s %s: slot freed after the client hung up\n", cases[i].path,
                      strstr(cases[i].body, "\"stream\":true") ? "(stream)" : "");
    }
    assert_int_equal(steps, 6);
    srv_gate_lift(&s);
    struct http_resp r = http_post(&s, "/v1/chat/completions", CHAT_SMALL);
    assert_int_equal(r.status, 200);
    http_resp_free(&r);
    srv_stop(&s);
    tu_rmtree(dir);
    free(dir);
}

/* ---------------------------------------------------------- shutdown --- */

static void test_sigterm_while_preparation_held(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    char *dir, fifo[600], out[700];
    struct srv s;
    start_prep_gated(&s, NULL, false, &dir, fifo, sizeof fifo);
    snprintf(out, sizeof out, "%s/held.json", dir);
    pid_t held = http_post_bg(&s, "/v1/chat/completions", CHAT_SMALL, out, "120");
    int gate   = srv_fifo_wait_reader(fifo); /* held for good: the worker never comes back */
    double t0  = now_s();
    srv_stop_within(&s, 5);
    print_message("exited %.2f s after SIGTERM with a preparation held\n", now_s() - t0);
    close(gate);
    srv_wait_pid(held, 30);
    tu_rmtree(dir);
    free(dir);
}

static void test_sigterm_while_generating(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    struct srv s;
    srv_start_gated(&s, NULL);
    char *dir = tu_tmpdir();
    char out[700];
    snprintf(out, sizeof out, "%s/gen.sse", dir);
    pid_t c = http_post_bg(&s, "/v1/chat/completions",
                           "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],"
                           "\"max_tokens\":400,\"ignore_eos\":true,\"stream\":true}",
                           out, "120");
    wait_busy(&s, 1);
    srv_gate_steps(&s, 1);
    srv_wait_generated(&s, 1);
    double t0 = now_s();
    srv_stop_within(&s, 5); /* the gate still shut: the job never finishes by itself */
    print_message("exited %.2f s after SIGTERM with a job in its slot\n", now_s() - t0);
    srv_wait_pid(c, 30);
    tu_rmtree(dir);
    free(dir);
}

static void test_sigterm_while_loading(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    char *dir, fifo[600];
    make_fifo(&dir, fifo, sizeof fifo, "load-gate");
    setenv("HEARTH_SERVE_LOAD_GATE", fifo, 1);
    struct srv s;
    srv_start_opt(&s, tu_model(SRV_MODEL), NULL, false);
    unsetenv("HEARTH_SERVE_LOAD_GATE");
    int gate = srv_fifo_wait_reader(fifo); /* the load is held until this closes */
    char code[64];
    assert_int_equal(health(&s, code, sizeof code), 503);
    assert_string_equal(code, "model_loading");
    double t0 = now_s();
    srv_stop_within(&s, 5);
    print_message("exited %.2f s after SIGTERM with the load held\n", now_s() - t0);
    close(gate);
    tu_rmtree(dir);
    free(dir);
}

static void test_sigterm_with_a_fifo_in_the_cache_dir(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    char *dir, fifo[600];
    /* named like a block file, so the start-up scan of --cache-dir gets to it */
    make_fifo(&dir, fifo, sizeof fifo, "0123456789abcdef.kvb");
    struct srv s;
    const char *extra[] = {"--cache-dir", dir, "--cache-disk", "256M", NULL};
    srv_start_opt(&s, tu_model(SRV_MODEL), extra, false);
    /* whether the scan hangs on the FIFO (start-up never ends) or passes it (ready), SIGTERM
     * must end the server within 5 s */
    char code[64];
    int st    = health(&s, code, sizeof code);
    double t0 = now_s();
    srv_stop_within(&s, 5);
    print_message("/health %d %s; exited %.2f s after SIGTERM\n", st, code, now_s() - t0);
    tu_rmtree(dir);
    free(dir);
}

/* ------------------------------------------------------------ health --- */

static void test_health_503_while_wedged(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    char *dir, fifo[600], out[700];
    struct srv s;
    const char *extra[] = {"--threads-http", "1", "--health-stall", "0", "--parallel", "1", NULL};
    start_prep_gated(&s, extra, true, &dir, fifo, sizeof fifo);
    snprintf(out, sizeof out, "%s/held.json", dir);
    char code[64];
    assert_int_equal(health(&s, code, sizeof code), 200);

    /* the one worker held: preparation is wedged */
    pid_t held = http_post_bg(&s, "/v1/chat/completions", CHAT_SMALL, out, "120");
    int gate   = srv_fifo_wait_reader(fifo);
    assert_int_equal(health(&s, code, sizeof code), 503);
    assert_string_equal(code, "preparation_stalled");
    srv_fifo_release(gate);

    /* its job in the slot, the scheduler held in the step: the scheduler is wedged */
    wait_busy(&s, 1);
    assert_int_equal(health(&s, code, sizeof code), 503);
    assert_string_equal(code, "scheduler_stalled");

    /* both let go: 200 again once the scheduler has gone round idle */
    srv_gate_lift(&s);
    assert_int_equal(srv_wait_pid(held, 60), 0);
    double end = now_s() + 60;
    int st;
    while ((st = health(&s, code, sizeof code)) != 200) {
        if (now_s() > end) {
            print_message("/health still %d %s a minute after the work ended\n", st, code);
            fail();
        }
        srv_sleep_ms(20);
    }
    srv_stop(&s);
    tu_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_held_preparation_holds_only_its_worker, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_hang_up_cancels_preparation, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_hang_up_cancels_generation, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_sigterm_while_preparation_held, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_sigterm_while_generating, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_sigterm_while_loading, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_sigterm_with_a_fifo_in_the_cache_dir, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_health_503_while_wedged, srv_kill_leftovers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
