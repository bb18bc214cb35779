/* serveutil.c: see serveutil.h. */
#include "util/serveutil.h"

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"

#define MAX_LIVE 16

void srv_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ------------------------------------------------------------ processes --- */

/*
 * Servers and clients still running, with each server's directory: a failed
 * test's teardown kills them and removes the directories. An entry goes when
 * its child is reaped; the directory is then its struct srv's to remove.
 */
static struct {
    pid_t pid; /* 0: a free entry */
    char *dir; /* a server's s->dir, or NULL */
} live[MAX_LIVE];

static void live_add(pid_t pid, char *dir)
{
    for (int i = 0; i < MAX_LIVE; i++)
        if (!live[i].pid) {
            live[i].pid = pid;
            live[i].dir = dir;
            return;
        }
}

static void live_del(pid_t pid)
{
    for (int i = 0; i < MAX_LIVE; i++)
        if (live[i].pid == pid) {
            live[i].pid = 0;
            live[i].dir = NULL;
        }
}

int srv_kill_leftovers(void **state)
{
    (void)state;
    /* a gated start that failed must not gate the next test's servers */
    unsetenv("HEARTH_SERVE_SCHED_GATE");
    unsetenv("HEARTH_SERVE_PREP_GATE");
    unsetenv("HEARTH_SERVE_LOAD_GATE");
    for (int i = 0; i < MAX_LIVE; i++)
        if (live[i].pid > 0) {
            kill(live[i].pid, SIGKILL);
            waitpid(live[i].pid, NULL, 0);
            tu_rmtree(live[i].dir);
            free(live[i].dir);
            live[i].pid = 0;
            live[i].dir = NULL;
        }
    return 0;
}

/* srv_spawn, recording dir with the child. */
static pid_t spawn_with(const char *const argv[], const char *out_path, char *dir)
{
    pid_t pid = fork();
    if (pid == 0) {
        int fd  = open(out_path ? out_path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int nul = open("/dev/null", O_RDONLY);
        if (fd < 0 || nul < 0)
            _exit(126);
        dup2(nul, 0);
        dup2(fd, 1);
        dup2(fd, 2);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    if (pid > 0)
        live_add(pid, dir);
    return pid;
}

pid_t srv_spawn(const char *const argv[], const char *out_path)
{
    return spawn_with(argv, out_path, NULL);
}

int srv_wait_pid(pid_t pid, double timeout_s)
{
    double end = now_s() + timeout_s;
    for (;;) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) {
            live_del(pid);
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        if (r < 0 || now_s() > end)
            return -1;
        srv_sleep_ms(10);
    }
}

/* ---------------------------------------------------------------- server --- */

char *srv_slurp(const char *path)
{
    char *t = tu_read_file(path, NULL);
    return t ? t : strdup("");
}

bool srv_have_curl(void)
{
    if (access(SRV_CURL, X_OK) == 0)
        return true;
    print_message("skip: %s not installed\n", SRV_CURL);
    return false;
}

static void srv_forget(struct srv *s)
{
    tu_rmtree(s->dir);
    free(s->dir);
    s->dir = NULL;
    s->pid = 0;
}

/*
 * Starts hearth with head (n_head arguments after the binary) then extra; 1
 * once it listens (and is ready when wait_ready), 0 when it exited first
 * (reaped; s->dir and its log kept), -1 on a timeout (killed).
 */
static int launch_cmd(struct srv *s, const char *const *head, int n_head, const char *const *extra,
                      bool wait_ready)
{
    memset(s, 0, sizeof *s);
    s->gate = -1;
    s->dir  = tu_tmpdir();
    assert_non_null(s->dir);
    snprintf(s->log, sizeof s->log, "%s/server.log", s->dir);
    const char *argv[48] = {tu_bin()};
    int n                = 1;
    for (int i = 0; i < n_head && n < 46; i++)
        argv[n++] = head[i];
    for (int i = 0; extra && extra[i] && n < 46; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    s->pid  = spawn_with(argv, s->log, s->dir);
    assert_true(s->pid > 0);
    double end = now_s() + 60;
    int st     = 0;
    while (now_s() < end) {
        if (!s->port) {
            char *log     = srv_slurp(s->log);
            const char *p = strstr(log, "listening on http://127.0.0.1:");
            if (p)
                s->port = atoi(p + strlen("listening on http://127.0.0.1:"));
            free(log);
            if (s->port) {
                snprintf(s->base, sizeof s->base, "http://127.0.0.1:%d", s->port);
                if (!wait_ready)
                    return 1;
                continue;
            }
        } else {
            struct http_resp r = http_get(s, "/health");
            st                 = r.status;
            http_resp_free(&r);
            if (st == 200)
                return 1;
        }
        if (waitpid(s->pid, NULL, WNOHANG) == s->pid) {
            live_del(s->pid);
            s->pid = 0;
            return 0;
        }
        srv_sleep_ms(s->port ? 50 : 20);
    }
    char *log = srv_slurp(s->log);
    if (s->port)
        print_message("server never became ready (last /health: %d):\n%s\n", st, log);
    else
        print_message("server did not start:\n%s\n", log);
    free(log);
    kill(s->pid, SIGKILL);
    return -1;
}

static int launch(struct srv *s, const char *model, const char *const *extra, bool wait_ready)
{
    /* no model: extra names it (-hf) */
    const char *head[] = {"serve", "--port", "0", "-t", "1", "-m", model};
    return launch_cmd(s, head, model ? 7 : 5, extra, wait_ready);
}

void srv_start_route(struct srv *s, const char *const *args)
{
    const char *head[] = {"route", "--port", "0"};
    int got            = launch_cmd(s, head, 3, args, true);
    if (got == 0) {
        char *log = srv_slurp(s->log);
        print_message("hearth route exited while starting:\n%s\n", log);
        free(log);
        srv_forget(s);
    }
    if (got != 1)
        fail();
}

void srv_start_opt(struct srv *s, const char *model, const char *const *extra, bool wait_ready)
{
    int got = launch(s, model, extra, wait_ready);
    if (got == 0) {
        char *log = srv_slurp(s->log);
        print_message("server exited while starting:\n%s\n", log);
        free(log);
        srv_forget(s);
    }
    if (got != 1)
        fail();
}

void srv_start(struct srv *s, const char *const *extra)
{
    const char *model = tu_model(SRV_MODEL);
    assert_non_null(model);
    srv_start_opt(s, model, extra, true);
}

bool srv_start_try(struct srv *s, const char *model, const char *const *extra, char **log)
{
    int got = launch(s, model, extra, true);
    if (got < 0)
        fail();
    if (got == 1)
        return true;
    *log = srv_slurp(s->log);
    srv_forget(s);
    return false;
}

int srv_fifo_wait_reader(const char *fifo)
{
    double end = now_s() + 60;
    for (;;) {
        int fd = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd >= 0)
            return fd;
        if (errno != ENXIO || now_s() > end) {
            print_message("nothing reached the gate %s: %s\n", fifo, strerror(errno));
            fail();
        }
        srv_sleep_ms(10);
    }
}

void srv_fifo_release(int fd)
{
    assert_int_equal(write(fd, "g", 1), 1);
    close(fd);
}

void srv_start_gated(struct srv *s, const char *const *extra)
{
    char *dir = tu_tmpdir();
    assert_non_null(dir);
    char fifo[600];
    snprintf(fifo, sizeof fifo, "%s/sched-gate", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    setenv("HEARTH_SERVE_SCHED_GATE", fifo, 1);
    srv_start(s, extra);
    unsetenv("HEARTH_SERVE_SCHED_GATE");
    s->gate_dir = dir;
    /* ready means the scheduler runs and holds the read end, so this cannot fail with
     * ENXIO; close-on-exec, or the curl children would keep the gate from ever lifting */
    s->gate = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (s->gate < 0)
        print_message("scheduler gate %s: %s\n", fifo, strerror(errno));
    assert_true(s->gate >= 0);
}

void srv_gate_steps(struct srv *s, int n)
{
    assert_true(s->gate >= 0);
    for (int i = 0; i < n; i++)
        assert_int_equal(write(s->gate, "s", 1), 1);
}

void srv_gate_lift(struct srv *s)
{
    if (s->gate >= 0)
        close(s->gate);
    s->gate = -1;
}

void srv_wait_generated(const struct srv *s, int n)
{
    double end = now_s() + 60;
    for (;;) {
        struct http_resp r = http_get(s, "/slots");
        cJSON *j           = cJSON_Parse(r.body);
        const cJSON *sl;
        int got = 0;
        cJSON_ArrayForEach(sl, j)
        {
            const cJSON *g = cJSON_GetObjectItemCaseSensitive(sl, "n_generated");
            if (jstr(sl, "state") && !strcmp(jstr(sl, "state"), "busy") && cJSON_IsNumber(g))
                got += g->valueint;
        }
        cJSON_Delete(j);
        if (got == n) {
            http_resp_free(&r);
            return;
        }
        if (got > n || now_s() > end) {
            print_message("want %d tokens generated in all, got %d: %s\n", n, got, r.body);
            http_resp_free(&r);
            fail();
        }
        http_resp_free(&r);
        srv_sleep_ms(10);
    }
}

void srv_stop(struct srv *s)
{
    srv_stop_within(s, 60);
}

void srv_stop_within(struct srv *s, double timeout_s)
{
    if (s->pid <= 0)
        return;
    kill(s->pid, SIGTERM);
    int rc = srv_wait_pid(s->pid, timeout_s);
    if (rc < 0) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
    }
    live_del(s->pid);
    srv_gate_lift(s);
    if (s->gate_dir) {
        tu_rmtree(s->gate_dir);
        free(s->gate_dir);
        s->gate_dir = NULL;
    }
    char *log  = srv_slurp(s->log);
    bool dirty = strstr(log, "AddressSanitizer") || strstr(log, "LeakSanitizer") ||
                 strstr(log, "runtime error:");
    if (rc != 0 || dirty)
        print_message("server exit %d (-1: still running after %g s); log:\n%s\n", rc, timeout_s,
                      log);
    free(log);
    srv_forget(s);
    assert_int_equal(rc, 0);
    assert_false(dirty);
}

void srv_kill(struct srv *s)
{
    if (s->pid > 0) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
        live_del(s->pid);
        s->pid = 0;
    }
    if (s->gate >= 0)
        close(s->gate);
    s->gate = -1;
    if (s->gate_dir) {
        tu_rmtree(s->gate_dir);
        free(s->gate_dir);
        s->gate_dir = NULL;
    }
    srv_forget(s);
}

bool srv_have_node(void)
{
    const char *pkg = HEARTH_TOP "/tests/e2e/node/node_modules/openai/package.json";
    if (access(SRV_NODE, X_OK) == 0 && access(pkg, R_OK) == 0)
        return true;
    print_message("skip: needs %s and `npm ci --prefix tests/e2e/node`\n", SRV_NODE);
    return false;
}

void srv_node_test(const char *script, const char *const *env)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/e2e/node/%s", HEARTH_TOP, script);
    srv_node_test_at(path, env);
}

void srv_node_test_at(const char *path, const char *const *env)
{
    const char *script = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    for (int i = 0; env && env[i]; i += 2)
        setenv(env[i], env[i + 1], 1);
    const char *argv[] = {SRV_NODE, "--test", path, NULL};
    char *out = NULL, *err = NULL;
    int rc = tu_run(argv, NULL, &out, &err, 300);
    for (int i = 0; env && env[i]; i += 2)
        unsetenv(env[i]);
    if (rc != 0) {
        /* line by line (print_message cuts long texts), indented so that node's own
         * "not ok" lines are not taken for this binary's TAP by tests/run.sh */
        print_message("node --test %s: rc %d\n", script, rc);
        for (char *text = out, pass = 0; pass < 2; text = err, pass++)
            for (char *line = text; line && *line;) {
                size_t n = strcspn(line, "\n");
                print_message("  | %.*s\n", (int)(n < 900 ? n : 900), line);
                line += n + (line[n] == '\n');
            }
    } else
        print_message("%s", strstr(out, "# pass") ? strstr(out, "# pass") : out);
    free(out);
    free(err);
    assert_int_equal(rc, 0);
}

/* ----------------------------------------------------------------- http --- */

void http_resp_free(struct http_resp *r)
{
    free(r->body);
    free(r->headers);
    memset(r, 0, sizeof *r);
}

struct http_resp http_req(const struct srv *s, const char *method, const char *path,
                          const char *body, const char *const *headers)
{
    char url[600], hfile[600], bfile[600];
    snprintf(url, sizeof url, "%s%s", s->base, path);
    snprintf(hfile, sizeof hfile, "%s/h.txt", s->dir);
    snprintf(bfile, sizeof bfile, "%s/b.txt", s->dir);
    const char *argv[40] = {SRV_CURL, "-s",   "-S",           "--max-time", "120",
                            "-X",     method, "-D",           hfile,        "-o",
                            bfile,    "-w",   "%{http_code}", "-H",         "Expect:"};
    int n                = 15;
    for (int i = 0; headers && headers[i] && n < 34; i++) {
        argv[n++] = "-H";
        argv[n++] = headers[i];
    }
    if (body) {
        argv[n++] = "-H";
        argv[n++] = "Content-Type: application/json";
        argv[n++] = "--data-binary";
        argv[n++] = "@-";
    }
    argv[n++] = url;
    argv[n]   = NULL;
    unlink(hfile);
    unlink(bfile);
    char *out = NULL;
    tu_run(argv, body, &out, NULL, 150);
    struct http_resp r = {0};
    r.status           = out ? atoi(out) : 0;
    free(out);
    r.body    = srv_slurp(bfile);
    r.headers = srv_slurp(hfile);
    return r;
}

struct http_resp http_get(const struct srv *s, const char *path)
{
    return http_req(s, "GET", path, NULL, NULL);
}

struct http_resp http_post(const struct srv *s, const char *path, const char *body)
{
    return http_req(s, "POST", path, body, NULL);
}

pid_t http_post_bg(const struct srv *s, const char *path, const char *body, const char *out_path,
                   const char *max_time)
{
    static int seq; /* the body files of one server's requests must not collide */
    char url[600], bfile[600], data[640], hfile[600];
    snprintf(url, sizeof url, "%s%s", s->base, path);
    snprintf(bfile, sizeof bfile, "%s/bg-body-%d.json", s->dir, seq++);
    snprintf(data, sizeof data, "@%s", bfile);
    snprintf(hfile, sizeof hfile, "%s.headers", out_path);
    assert_int_equal(tu_write_file(bfile, body, strlen(body)), 0);
    const char *argv[] = {SRV_CURL,     "-s",     "-N",
                          "--max-time", max_time, "-H",
                          "Expect:",    "-H",     "Content-Type: application/json",
                          "-D",         hfile,    "--data-binary",
                          data,         url,      NULL};
    return srv_spawn(argv, out_path);
}

int http_status_of(const char *headers)
{
    const char *p = strstr(headers, "HTTP/");
    if (!p || !(p = strchr(p, ' ')))
        return 0;
    return atoi(p + 1);
}

/* ------------------------------------------------------------------ json --- */

cJSON *http_json(const struct http_resp *r)
{
    cJSON *j = cJSON_Parse(r->body);
    if (!j)
        print_message("not JSON (status %d): %s\n", r->status, r->body);
    assert_non_null(j);
    return j;
}

const char *jstr(const cJSON *o, const char *k)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(it) ? it->valuestring : NULL;
}

double jnum(const cJSON *o, const char *k)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!cJSON_IsNumber(it))
        print_message("'%s' is not a number\n", k);
    assert_true(cJSON_IsNumber(it));
    return it->valuedouble;
}

const cJSON *jget(const cJSON *o, const char *k)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!it)
        print_message("missing key '%s'\n", k);
    assert_non_null(it);
    return it;
}

char *http_check_error(const struct http_resp *r, int status, const char *param)
{
    if (r->status != status)
        print_message("want status %d, got %d: %s\n", status, r->status, r->body);
    assert_int_equal(r->status, status);
    cJSON *j       = http_json(r);
    const cJSON *e = jget(j, "error");
    assert_true(cJSON_IsObject(e));
    assert_non_null(jstr(e, "message"));
    assert_true(strlen(jstr(e, "message")) > 0);
    assert_non_null(jstr(e, "type"));
    const cJSON *p = jget(e, "param");
    const cJSON *c = jget(e, "code");
    assert_true(cJSON_IsNull(p) || cJSON_IsString(p));
    assert_true(cJSON_IsNull(c) || cJSON_IsString(c));
    if (param) {
        if (!cJSON_IsString(p) || strcmp(p->valuestring, param))
            print_message("want param '%s': %s\n", param, r->body);
        assert_true(cJSON_IsString(p));
        assert_string_equal(p->valuestring, param);
    }
    char *msg = strdup(jstr(e, "message"));
    cJSON_Delete(j);
    return msg;
}

cJSON *sse_events(const char *body)
{
    cJSON *arr    = cJSON_CreateArray();
    const char *p = body;
    bool done     = false;
    while (*p) {
        const char *end = strstr(p, "\n\n");
        if (!end)
            print_message("unterminated SSE event: %s\n", p);
        assert_non_null(end);
        assert_int_equal(strncmp(p, "data: ", 6), 0);
        assert_false(done);
        size_t n = (size_t)(end - p - 6);
        if (n == 6 && !strncmp(p + 6, "[DONE]", 6)) {
            done = true;
        } else {
            char *js = strndup(p + 6, n);
            cJSON *o = cJSON_Parse(js);
            if (!o)
                print_message("bad SSE JSON: %s\n", js);
            assert_non_null(o);
            free(js);
            cJSON_AddItemToArray(arr, o);
        }
        p = end + 2;
    }
    assert_true(done);
    return arr;
}

int sse_count(const char *text)
{
    /* JSON escapes newlines, so each blank line ends one event */
    int n = 0;
    for (const char *p = text; (p = strstr(p, "\n\n")); p += 2)
        n++;
    return n;
}

bool sse_wait(const char *file, int n)
{
    double end = now_s() + 120;
    while (now_s() < end) {
        char *t = srv_slurp(file);
        int got = sse_count(t);
        free(t);
        if (got >= n)
            return true;
        srv_sleep_ms(20);
    }
    return false;
}

const char srv_long_story[] =
    "Once upon a time there was a little dog named Max. Max liked to run in the park. "
    "One day he saw a big red ball under a tree. He ran to the ball and pushed it with his "
    "nose. The ball rolled down the hill and Max ran after it. A little girl named Lily saw "
    "Max and laughed. She threw the ball back to him and they played all day. When the sun "
    "went down Lily took Max home. Her mom gave them milk and cookies. Max was very happy. "
    "The next day Max went to the park again. He looked for Lily but she was not there. He "
    "sat under the tree and waited. Soon he heard a voice. It was Lily with a new ball. It "
    "was blue and very shiny. Max jumped up and wagged his tail. They played until it was "
    "dark and then they went home together.";
