/*
 * test_route.c: `hearth route` in front of real hearth servers and of fake
 * upstreams that fail on purpose (a thread in this process: answers 500,
 * cuts a stream after its first event, or never answers). Replies and
 * streams come through unchanged; /v1/models is merged; a continuation
 * goes where its prefix went; a replica killed with SIGKILL, one answering
 * 500 and one that hangs are demoted and every request still succeeds; a
 * stream cut after its first byte ends with an error event (no [DONE]); the API key,
 * the body limit and a full queue are refused in the API's shape; and
 * promtool accepts /metrics.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "util/serveutil.h"
#include "util/testutil.h"

/* ------------------------------------------------------ fake upstreams --- */

enum fake_mode { FAKE_500, FAKE_CUT, FAKE_HANG };

struct fake {
    enum fake_mode mode;
    int listen_fd, port;
    pthread_t thread;
    int held[64]; /* FAKE_HANG: connections kept open, unanswered */
    int n_held;
    int requests; /* requests other than /health */
    int live;     /* connection threads running */
};

/* Reads one request's head and body; false at EOF. *health: GET /health; *get: any GET. */
static bool read_request(int fd, bool *health, bool *get)
{
    char buf[65536];
    size_t n = 0;
    char *end;
    while (!(end = memmem(buf, n, "\r\n\r\n", 4))) {
        ssize_t k = read(fd, buf + n, sizeof buf - n - 1);
        if (k <= 0)
            return false;
        n += (size_t)k;
    }
    buf[n]            = 0;
    *get              = !strncmp(buf, "GET ", 4);
    *health           = *get && strstr(buf, " /health ") == strchr(buf, ' ');
    const char *cl    = strcasestr(buf, "\r\nContent-Length:");
    const size_t head = (size_t)(end + 4 - buf);
    size_t want       = cl ? (size_t)atol(cl + 17) : 0;
    size_t have       = n - head;
    while (have < want) {
        ssize_t k = read(fd, buf, sizeof buf);
        if (k <= 0)
            return false;
        have += (size_t)k;
    }
    return true;
}

static void say(int fd, const char *s)
{
    size_t n = strlen(s);
    while (n) {
        ssize_t k = write(fd, s, n);
        if (k <= 0)
            return;
        s += k;
        n -= (size_t)k;
    }
}

struct fake_conn {
    struct fake *f;
    int fd;
};

/* One connection, its requests in turn (the router keeps connections alive). */
static void *fake_conn_main(void *arg)
{
    struct fake_conn *fc = arg;
    struct fake *f       = fc->f;
    const int fd         = fc->fd;
    free(fc);
    bool health, get, keep = false;
    while (read_request(fd, &health, &get)) {
        if (health) {
            say(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    "Content-Length: 15\r\n\r\n{\"status\":\"ok\"}");
            continue;
        }
        if (get) { /* the router's probes of /metrics: it has none */
            say(fd, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
            continue;
        }
        __atomic_add_fetch(&f->requests, 1, __ATOMIC_SEQ_CST);
        char msg[512];
        if (f->mode == FAKE_500) {
            const char *body = "{\"error\":{\"message\":\"fake 500\"}}";
            snprintf(msg, sizeof msg,
                     "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     strlen(body), body);
            say(fd, msg);
        } else if (f->mode == FAKE_CUT) {
            const char *event = "data: {\"fake\":\"first event\"}\n\n";
            snprintf(msg, sizeof msg,
                     "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n%zx\r\n%s\r\n",
                     strlen(event), event);
            say(fd, msg);
            break; /* and the connection is cut */
        } else {
            keep = true; /* never answered; closed by fake_stop */
            break;
        }
    }
    if (keep) {
        const int i = __atomic_fetch_add(&f->n_held, 1, __ATOMIC_SEQ_CST);
        if (i < 64)
            f->held[i] = fd;
        else
            close(fd);
    } else {
        close(fd);
    }
    __atomic_sub_fetch(&f->live, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

static void *fake_main(void *arg)
{
    struct fake *f = arg;
    for (;;) {
        int fd = accept(f->listen_fd, NULL, NULL);
        if (fd < 0)
            return NULL;
        struct fake_conn *fc = malloc(sizeof *fc);
        pthread_t t;
        if (!fc) {
            close(fd);
            continue;
        }
        fc->f  = f;
        fc->fd = fd;
        __atomic_add_fetch(&f->live, 1, __ATOMIC_SEQ_CST);
        if (pthread_create(&t, NULL, fake_conn_main, fc) != 0) {
            __atomic_sub_fetch(&f->live, 1, __ATOMIC_SEQ_CST);
            close(fd);
            free(fc);
            continue;
        }
        pthread_detach(t);
    }
}

static void fake_start(struct fake *f, enum fake_mode mode)
{
    memset(f, 0, sizeof *f);
    f->mode      = mode;
    f->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(f->listen_fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(f->listen_fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(f->listen_fd, 16), 0);
    socklen_t l = sizeof a;
    assert_int_equal(getsockname(f->listen_fd, (struct sockaddr *)&a, &l), 0);
    f->port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&f->thread, NULL, fake_main, f), 0);
}

/* After the router that used f has stopped: its connections are closed, so their threads end. */
static void fake_stop(struct fake *f)
{
    shutdown(f->listen_fd, SHUT_RDWR);
    close(f->listen_fd);
    pthread_join(f->thread, NULL);
    while (__atomic_load_n(&f->live, __ATOMIC_SEQ_CST) > 0)
        srv_sleep_ms(5);
    for (int i = 0; i < f->n_held && i < 64; i++)
        close(f->held[i]);
}

/* ------------------------------------------------------------- helpers --- */

static char *url_of(const struct srv *s)
{
    return strdup(s->base);
}

static char *fake_url(const struct fake *f)
{
    char *u = malloc(64);
    snprintf(u, 64, "http://127.0.0.1:%d", f->port);
    return u;
}

/* The router's metric line's value (name with its labels), or -1. */
static double metric(const struct srv *router, const char *line)
{
    struct http_resp r = http_get(router, "/metrics");
    double v           = -1;
    char want[300];
    snprintf(want, sizeof want, "\n%s ", line);
    const char *p = strstr(r.body, want);
    if (p)
        v = atof(p + strlen(want));
    http_resp_free(&r);
    return v;
}

static const char *upstream_of(const struct http_resp *r)
{
    const char *h = strcasestr(r->headers, "X-Hearth-Upstream: ");
    return h ? h + strlen("X-Hearth-Upstream: ") : "";
}

/* Two replicas of stories260K (serve_extra: their options) and a router over both. */
static void fleet(struct srv *a, struct srv *b, struct srv *r, char **ua, char **ub,
                  const char *const *serve_extra)
{
    srv_start(a, serve_extra);
    srv_start(b, serve_extra);
    *ua = url_of(a);
    *ub = url_of(b);
    srv_start_route(r, (const char *[]){"--upstream", *ua, "--upstream", *ub, NULL});
}

static const char *const COMPLETION =
    "{\"prompt\":\"Once upon a time\",\"max_tokens\":8,\"temperature\":0}";

/* ------------------------------------------------------------- tests --- */

static void test_proxy_stream_models(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    struct srv a, b, r;
    char *ua, *ub;
    fleet(&a, &b, &r, &ua, &ub, (const char *[]){"-np", "2", NULL});
    /* the same greedy text as straight from a replica */
    struct http_resp direct = http_post(&a, "/v1/completions", COMPLETION);
    struct http_resp routed = http_post(&r, "/v1/completions", COMPLETION);
    assert_int_equal(routed.status, 200);
    cJSON *jd = http_json(&direct), *jr = http_json(&routed);
    assert_string_equal(jstr(cJSON_GetArrayItem(jget(jd, "choices"), 0), "text"),
                        jstr(cJSON_GetArrayItem(jget(jr, "choices"), 0), "text"));
    cJSON_Delete(jd), cJSON_Delete(jr);
    http_resp_free(&direct), http_resp_free(&routed);
    /* a stream comes through event by event, to [DONE] */
    struct http_resp st = http_post(
        &r, "/v1/completions",
        "{\"prompt\":\"Once upon a time\",\"max_tokens\":6,\"temperature\":0,\"stream\":true}");
    assert_int_equal(st.status, 200);
    assert_non_null(strcasestr(st.headers, "Content-Type: text/event-stream"));
    int events = 0;
    for (const char *p = st.body; (p = strstr(p, "data: ")); p++)
        events++;
    assert_int_equal(events, 6 + 1 + 1); /* 6 tokens, the finish, [DONE] */
    assert_non_null(strstr(st.body, "data: [DONE]"));
    http_resp_free(&st);
    /* a chat request, and an endpoint the router does not know, pass through */
    struct http_resp chat = http_post(&r, "/v1/chat/completions",
                                      "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],"
                                      "\"max_tokens\":4,\"temperature\":0}");
    assert_int_equal(chat.status, 200);
    http_resp_free(&chat);
    struct http_resp tok = http_post(&r, "/tokenize", "{\"content\":\"Once upon\"}");
    assert_int_equal(tok.status, 200);
    assert_non_null(strstr(tok.body, "\"tokens\""));
    http_resp_free(&tok);
    /* /v1/models: both replicas serve stories260K, listed once */
    struct http_resp m = http_get(&r, "/v1/models");
    assert_int_equal(m.status, 200);
    cJSON *jm = http_json(&m);
    assert_int_equal(cJSON_GetArraySize(jget(jm, "data")), 1);
    assert_string_equal(jstr(cJSON_GetArrayItem(jget(jm, "data"), 0), "id"), "stories260K");
    cJSON_Delete(jm);
    http_resp_free(&m);
    /* the replicas' own load, read from their /metrics by the probes */
    char rep[200];
    snprintf(rep, sizeof rep, "hearth_route_upstream_reported{upstream=\"%s\"}", ua);
    while (metric(&r, rep) < 0) /* until the first probe's answer */
        srv_sleep_ms(10);
    assert_true(metric(&r, rep) == 0);
    /* its own health, and metrics promtool accepts */
    struct http_resp h = http_get(&r, "/health");
    assert_int_equal(h.status, 200);
    assert_non_null(strstr(h.body, "\"upstreams_healthy\":2"));
    http_resp_free(&h);
    struct http_resp mt = http_get(&r, "/metrics");
    char path[600];
    snprintf(path, sizeof path, "%s/route.metrics", r.dir);
    assert_int_equal(tu_write_file(path, mt.body, strlen(mt.body)), 0);
    http_resp_free(&mt);
    if (access("/usr/bin/promtool", X_OK) == 0) {
        char cmd[700];
        snprintf(cmd, sizeof cmd, "/usr/bin/promtool check metrics < %s", path);
        assert_int_equal(system(cmd), 0);
    } else {
        print_message("skip: promtool not installed (Debian: prometheus)\n");
    }
    srv_stop(&r), srv_stop(&a), srv_stop(&b);
    free(ua), free(ub);
}

/* A conversation sent again goes where it went; a fresh one to the idle replica. */
static void test_affinity(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    struct srv a, b, r;
    char *ua, *ub;
    fleet(&a, &b, &r, &ua, &ub, NULL);
    /* a system prompt of some 1200 bytes (4 blocks of 256 draw its continuations) */
    char sys[1400] = "", body[2000], first[300] = "";
    while (strlen(sys) < 1200)
        strcat(sys, "The little dog ran to the park. ");
    for (int turn = 0; turn < 3; turn++) {
        snprintf(body, sizeof body,
                 "{\"messages\":[{\"role\":\"system\",\"content\":\"%s\"},{\"role\":\"user\","
                 "\"content\":\"turn %d\"}],\"max_tokens\":2,\"temperature\":0}",
                 sys, turn);
        struct http_resp c = http_post(&r, "/v1/chat/completions", body);
        assert_int_equal(c.status, 200);
        const char *u = upstream_of(&c);
        if (!turn)
            snprintf(first, sizeof first, "%.*s", (int)strcspn(u, "\r\n"), u);
        else
            assert_int_equal(strncmp(u, first, strlen(first)), 0);
        http_resp_free(&c);
    }
    assert_true(metric(&r, "hearth_route_decisions_total{reason=\"prefix\"}") == 2);
    srv_stop(&r), srv_stop(&a), srv_stop(&b);
    free(ua), free(ub);
}

/* A replica killed outright: every request still answered, the failover logged and counted. */
static void test_failover_on_kill(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    struct srv a, b, r;
    char *ua, *ub;
    fleet(&a, &b, &r, &ua, &ub, NULL);
    struct http_resp c = http_post(&r, "/v1/completions", COMPLETION);
    assert_int_equal(c.status, 200);
    http_resp_free(&c);
    srv_kill(&a);
    for (int i = 0; i < 8; i++) {
        c = http_post(&r, "/v1/completions", COMPLETION);
        assert_int_equal(c.status, 200);
        assert_int_equal(strncmp(upstream_of(&c), ub, strlen(ub)), 0);
        http_resp_free(&c);
    }
    assert_true(metric(&r, "hearth_route_failovers_total") >= 1);
    char line[200];
    snprintf(line, sizeof line, "hearth_route_upstream_healthy{upstream=\"%s\"}", ua);
    assert_true(metric(&r, line) == 0);
    char *log = srv_slurp(r.log);
    assert_non_null(strstr(log, "demoted"));
    assert_non_null(strstr(log, "trying another"));
    free(log);
    srv_stop(&r), srv_stop(&b);
    free(ua), free(ub);
}

/*
 * A replica killed while requests wait in it, in the middle of a burst of
 * 32 (half of them streams): none had a byte of reply yet, so every one is
 * retried on the other and all 32 come back whole. The killed replica is
 * held at its scheduler's gate, so the requests are inside it, not timed.
 */
static void test_kill_mid_burst(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    struct srv a, b, r;
    srv_start_gated(&a, (const char *[]){"-np", "4", NULL});
    srv_start(&b, (const char *[]){"-np", "4", NULL});
    char *ua = url_of(&a), *ub = url_of(&b);
    srv_start_route(&r, (const char *[]){"--upstream", ua, "--upstream", ub, NULL});
    pid_t pids[32];
    char out[32][600];
    for (int i = 0; i < 32; i++) {
        snprintf(out[i], sizeof out[i], "%s/burst%d.out", r.dir, i);
        pids[i] = http_post_bg(&r, "/v1/completions",
                               i % 2 ? "{\"prompt\":\"Once upon a time\",\"max_tokens\":8,"
                                       "\"temperature\":0,\"stream\":true}"
                                     : COMPLETION,
                               out[i], "120");
        assert_true(pids[i] > 0);
    }
    char la[200], lb[200];
    snprintf(la, sizeof la, "hearth_route_requests_total{upstream=\"%s\"}", ua);
    snprintf(lb, sizeof lb, "hearth_route_requests_total{upstream=\"%s\"}", ub);
    char ia[200];
    snprintf(ia, sizeof ia, "hearth_route_in_flight{upstream=\"%s\"}", ua);
    /* every request dispatched once, some of them held in a */
    while (metric(&r, la) + metric(&r, lb) < 32 || metric(&r, ia) < 1)
        srv_sleep_ms(10);
    const double held = metric(&r, ia);
    srv_kill(&a);
    int whole = 0;
    for (int i = 0; i < 32; i++) {
        assert_int_equal(srv_wait_pid(pids[i], 120), 0);
        char hdr[sizeof out[i] + 16];
        snprintf(hdr, sizeof hdr, "%.599s.headers", out[i]);
        char *h = tu_read_file(hdr, NULL), *body = tu_read_file(out[i], NULL);
        const bool ok = h && body && http_status_of(h) == 200 &&
                        (i % 2 ? strstr(body, "data: [DONE]") != NULL
                               : strstr(body, "\"finish_reason\":\"length\"") != NULL);
        if (!ok)
            print_message("request %d: %s\n%s\n", i, h ? h : "(no headers)", body ? body : "");
        whole += ok;
        free(h), free(body);
    }
    print_message("%d of 32 whole; %.0f were held in the killed replica\n", whole, held);
    assert_int_equal(whole, 32);
    assert_true(metric(&r, "hearth_route_failovers_total") >= held);
    srv_stop(&r), srv_stop(&b);
    free(ua), free(ub);
}

/* A 500 before any byte: demoted, the request served by the other, nothing of the 500 seen. */
static void test_500_hang_and_cut(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    struct srv b, r;
    srv_start(&b, NULL);
    char *ub = url_of(&b);
    struct fake f;
    fake_start(&f, FAKE_500);
    char *uf = fake_url(&f);
    /* the fake first: with both idle the first pick is upstream 0 */
    srv_start_route(&r, (const char *[]){"--upstream", uf, "--upstream", ub, NULL});
    struct http_resp c = http_post(&r, "/v1/completions", COMPLETION);
    assert_int_equal(c.status, 200);
    assert_null(strstr(c.body, "fake 500"));
    http_resp_free(&c);
    assert_int_equal(f.requests, 1);
    char line[200];
    snprintf(line, sizeof line, "hearth_route_errors_total{upstream=\"%s\",when=\"before\"}", uf);
    assert_true(metric(&r, line) == 1);
    srv_stop(&r);
    fake_stop(&f);
    free(uf);

    /* one that never answers: after --timeout it is demoted and the other answers */
    fake_start(&f, FAKE_HANG);
    uf = fake_url(&f);
    srv_start_route(&r, (const char *[]){"--upstream", uf, "--upstream", ub, "--timeout", "1",
                                         "--probe-interval", "600", NULL});
    c = http_post(&r, "/v1/completions", COMPLETION);
    assert_int_equal(c.status, 200);
    assert_int_equal(strncmp(upstream_of(&c), ub, strlen(ub)), 0);
    http_resp_free(&c);
    assert_int_equal(f.requests, 1);
    char *log = srv_slurp(r.log);
    assert_non_null(strstr(log, "timed out"));
    free(log);
    srv_stop(&r);
    fake_stop(&f);
    free(uf);

    /* a stream cut after its first event: the client gets that event, then an error event */
    fake_start(&f, FAKE_CUT);
    uf = fake_url(&f);
    srv_start_route(&r, (const char *[]){"--upstream", uf, "--upstream", ub, NULL});
    c = http_post(&r, "/v1/chat/completions",
                  "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"stream\":true}");
    assert_int_equal(c.status, 200);
    const char *ev = strstr(c.body, "data: {\"fake\":\"first event\"}");
    assert_non_null(ev);
    assert_non_null(strstr(ev, "data: {\"error\":"));
    assert_non_null(strstr(ev, "failed mid-stream"));
    /* and no [DONE] after it: a client that trusts [DONE] must not take the cut answer whole */
    assert_null(strstr(ev, "[DONE]"));
    http_resp_free(&c);
    snprintf(line, sizeof line, "hearth_route_errors_total{upstream=\"%s\",when=\"after\"}", uf);
    assert_true(metric(&r, line) == 1);
    srv_stop(&r);
    /* Anthropic's stream, cut: an error event and no message_stop (the fake alone upstream) */
    srv_start_route(&r, (const char *[]){"--upstream", uf, NULL});
    c = http_post(&r, "/v1/messages",
                  "{\"model\":\"m\",\"max_tokens\":8,\"stream\":true,"
                  "\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}");
    assert_int_equal(c.status, 200);
    ev = strstr(c.body, "data: {\"fake\":\"first event\"}");
    assert_non_null(ev);
    assert_non_null(strstr(ev, "event: error\ndata: {\"type\":\"error\""));
    assert_null(strstr(ev, "message_stop"));
    assert_null(strstr(ev, "[DONE]"));
    http_resp_free(&c);
    srv_stop(&r);
    fake_stop(&f);
    free(uf);
    srv_stop(&b);
    free(ub);
}

/* The router's own refusals, in the API's shape. */
static void test_refusals(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    struct fake f;
    fake_start(&f, FAKE_HANG);
    char *uf = fake_url(&f);
    struct srv r;
    srv_start_route(&r, (const char *[]){"--upstream", uf, "--api-key", "k1", "--max-body", "1K",
                                         "--max-in-flight", "1", "--max-queue", "0",
                                         "--probe-interval", "600", NULL});
    struct http_resp c = http_post(&r, "/v1/completions", COMPLETION);
    assert_int_equal(c.status, 401);
    assert_non_null(strstr(c.body, "\"error\""));
    http_resp_free(&c);
    c = http_req(&r, "POST", "/v1/messages", "{\"messages\":[]}",
                 (const char *[]){"x-api-key: wrong", NULL});
    assert_int_equal(c.status, 401);
    assert_non_null(strstr(c.body, "\"type\":\"error\"")); /* Anthropic's shape */
    http_resp_free(&c);
    char big[3000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    char body[3100];
    snprintf(body, sizeof body, "{\"prompt\":\"%s\"}", big);
    c = http_req(&r, "POST", "/v1/completions", body,
                 (const char *[]){"Authorization: Bearer k1", NULL});
    assert_int_equal(c.status, 413);
    assert_non_null(strstr(c.body, "\"error\""));
    http_resp_free(&c);
    srv_stop(&r);
    /* one request held by the hanging upstream fills it; the next finds no room, no queue */
    srv_start_route(&r, (const char *[]){"--upstream", uf, "--max-in-flight", "1", "--max-queue",
                                         "0", "--probe-interval", "600", NULL});
    char out[600];
    snprintf(out, sizeof out, "%s/held.out", r.dir);
    pid_t held = http_post_bg(&r, "/v1/completions", COMPLETION, out, "60");
    while (__atomic_load_n(&f.requests, __ATOMIC_SEQ_CST) < 1) /* it reached the upstream */
        srv_sleep_ms(5);
    c = http_post(&r, "/v1/completions", COMPLETION);
    assert_int_equal(c.status, 503);
    assert_non_null(strcasestr(c.headers, "Retry-After: 1"));
    assert_non_null(strstr(c.body, "queue is full"));
    http_resp_free(&c);
    assert_true(metric(&r, "hearth_route_rejected_total") == 1);
    kill(held, SIGKILL);
    waitpid(held, NULL, 0);
    srv_stop(&r);
    fake_stop(&f);
    free(uf);
}

/* Behind a router with a key, serve's chat page still opens; the API it calls does not. */
static void test_chat_page(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    struct srv b, r;
    srv_start(&b, NULL);
    char *ub = url_of(&b);
    srv_start_route(&r, (const char *[]){"--upstream", ub, "--api-key", "k1", NULL});
    struct http_resp c = http_get(&r, "/");
    assert_int_equal(c.status, 200);
    assert_non_null(strstr(c.body, "<!doctype html>"));
    http_resp_free(&c);
    c = http_get(&r, "/v1/models");
    assert_int_equal(c.status, 401);
    http_resp_free(&c);
    srv_stop(&r);
    srv_stop(&b);
    free(ub);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_proxy_stream_models, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_chat_page, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_affinity, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_failover_on_kill, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_kill_mid_burst, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_500_hang_and_cut, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_refusals, srv_kill_leftovers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
