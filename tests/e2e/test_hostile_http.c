/*
 * test_hostile_http.c: what a hostile or careless client does to the HTTP
 * layer of `hearth serve` and of `hearth route` in front of it, over raw
 * sockets: malformed framing (a negative, doubled or overflowing
 * Content-Length, Transfer-Encoding with Content-Length, a garbage request
 * line, HTTP/9.9, bad and 2^64 chunk sizes, binary junk) must get a 4xx or
 * 505 with a JSON body in the dialect of its path (OpenAI's, Anthropic's
 * under /v1/messages) and a closed connection; with --timeout 1 a silent,
 * half-headed or half-bodied connection must be closed (a half head or
 * body told 408), while a stream whose generation is held longer than the
 * timeout still completes. An ordinary request sent while each hostile
 * connection is open must complete.
 *
 * No case depends on timing: a closed connection is polled for with a bound
 * (it fails the test past it), and the held generation is held by the
 * scheduler's gate until idle connections have been closed by the timeout
 * around it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "util/serveutil.h"
#include "util/testutil.h"

#define CLOSE_BOUND_MS 10000 /* a closed connection must show within this */

/* ------------------------------------------------------------- sockets --- */

static int dial(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family      = AF_INET,
                            .sin_port        = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

static void send_all(int fd, const char *s, size_t n)
{
    while (n) {
        ssize_t k = send(fd, s, n, MSG_NOSIGNAL);
        if (k <= 0)
            return; /* the server may close before it has everything: that is its right */
        s += k;
        n -= (size_t)k;
    }
}

/*
 * Everything the server sends until it closes the connection (malloc'd, NUL-terminated);
 * fails the test when the connection is still open after CLOSE_BOUND_MS.
 */
static char *read_to_close(int fd, size_t *len)
{
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    assert_non_null(buf);
    struct timeval t0, t;
    gettimeofday(&t0, NULL);
    for (;;) {
        gettimeofday(&t, NULL);
        long left =
            CLOSE_BOUND_MS - ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_usec - t0.tv_usec) / 1000);
        if (left <= 0) {
            buf[n] = 0;
            fail_msg("the connection is still open after %d ms; it sent:\n%s", CLOSE_BOUND_MS, buf);
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)left) <= 0)
            continue;
        if (n + 1024 > cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
        ssize_t k = recv(fd, buf + n, cap - n - 1, 0);
        if (k == 0 || (k < 0 && errno == ECONNRESET))
            break;
        if (k < 0 && errno != EINTR)
            break;
        if (k > 0)
            n += (size_t)k;
    }
    buf[n] = 0;
    *len   = n;
    return buf;
}

/* Sends request (len bytes) on a fresh connection and, while it is open, an ordinary request
 * alongside; the answer, read until the server closes. */
static void ordinary(const struct srv *s);
static char *exchange(const struct srv *s, const char *request, size_t len)
{
    int fd = dial(s->port);
    send_all(fd, request, len);
    ordinary(s);
    size_t n;
    char *answer = read_to_close(fd, &n);
    close(fd);
    return answer;
}

/* ------------------------------------------------------------- answers --- */

enum dialect { OPENAI, ANTHROPIC };

/*
 * The answer must be one HTTP/1.1 response of status want, JSON, closing the connection,
 * with the error shape of dialect d: OpenAI's {"error":{"message","type",...}} or
 * Anthropic's {"type":"error","error":{"type","message"}}.
 */
static void check_answer(const char *what, const char *answer, int want, enum dialect d)
{
    int status = 0;
    if (sscanf(answer, "HTTP/1.1 %d ", &status) != 1 || status != want)
        fail_msg("%s: want a %d; got:\n%s", what, want, answer);
    const char *body = strstr(answer, "\r\n\r\n");
    assert_non_null(body);
    if (!strcasestr(answer, "\r\nContent-Type: application/json") || strncmp(body + 4, "{", 1))
        fail_msg("%s: the answer is not JSON:\n%s", what, answer);
    cJSON *j = cJSON_Parse(body + 4);
    if (!j)
        fail_msg("%s: the body does not parse:\n%s", what, answer);
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
    bool ok        = cJSON_IsObject(e) && cJSON_IsString(cJSON_GetObjectItem(e, "message")) &&
              cJSON_IsString(cJSON_GetObjectItem(e, "type"));
    if (d == ANTHROPIC)
        ok = ok && cJSON_IsString(cJSON_GetObjectItem(j, "type")) &&
             !strcmp(cJSON_GetObjectItem(j, "type")->valuestring, "error");
    else
        ok = ok && !cJSON_GetObjectItem(j, "type");
    cJSON_Delete(j);
    if (!ok)
        fail_msg("%s: not %s's error shape:\n%s", what, d == ANTHROPIC ? "Anthropic" : "OpenAI",
                 answer);
}

/* An ordinary completion of two tokens must come back whole. */
static void ordinary(const struct srv *s)
{
    struct http_resp r =
        http_post(s, "/v1/completions", "{\"prompt\":\"Once upon a time\",\"max_tokens\":2}");
    if (r.status != 200)
        fail_msg("an ordinary request alongside got %d: %s", r.status, r.body);
    cJSON *j = http_json(&r);
    assert_non_null(cJSON_GetObjectItem(j, "choices"));
    cJSON_Delete(j);
    http_resp_free(&r);
}

/* ------------------------------------------------------------ framing --- */

struct framing_case {
    const char *what;
    const char *request; /* sent as it is */
    size_t len;          /* 0: strlen */
    int status;
    enum dialect dialect;
};

#define CHAT "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
#define MSGS "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"

/* clang-format off */
static const struct framing_case cases[] = {
    {"negative Content-Length", CHAT "Content-Length: -5\r\n\r\n{}", 0, 400, OPENAI},
    {"negative Content-Length, messages", MSGS "Content-Length: -5\r\n\r\n{}", 0, 400, ANTHROPIC},
    {"two Content-Lengths", CHAT "Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}", 0, 400,
     OPENAI},
    {"Transfer-Encoding with Content-Length",
     CHAT "Transfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n2\r\n{}\r\n0\r\n\r\n", 0, 400,
     OPENAI},
    {"Transfer-Encoding with Content-Length, messages",
     MSGS "Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", 0, 400,
     ANTHROPIC},
    {"Transfer-Encoding not chunked", CHAT "Transfer-Encoding: gzip, chunked\r\n\r\n", 0, 400,
     OPENAI},
    {"garbage request line", "HELLO THERE\r\n\r\n", 0, 400, OPENAI},
    {"request line of two words", "GET /health\r\n\r\n", 0, 400, OPENAI},
    {"HTTP/9.9", "POST /v1/chat/completions HTTP/9.9\r\nContent-Length: 2\r\n\r\n{}", 0, 505,
     OPENAI},
    {"HTTP/9.9, messages", "POST /v1/messages HTTP/9.9\r\nContent-Length: 2\r\n\r\n{}", 0, 505,
     ANTHROPIC},
    {"header line without a colon", CHAT "Content-Length 2\r\n\r\n{}", 0, 400, OPENAI},
    {"malformed chunk size", CHAT "Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n", 0,
     400, OPENAI},
    {"chunk size 2^64", CHAT "Transfer-Encoding: chunked\r\n\r\n10000000000000000\r\n{}\r\n", 0,
     413, OPENAI},
    {"chunk size 2^64, messages",
     MSGS "Transfer-Encoding: chunked\r\n\r\n10000000000000000\r\n{}\r\n", 0, 413, ANTHROPIC},
    {"chunk data past its size", CHAT "Transfer-Encoding: chunked\r\n\r\n1\r\n{}\r\n0\r\n\r\n", 0,
     400, OPENAI},
    {"Content-Length 10^23", CHAT "Content-Length: 99999999999999999999999\r\n\r\n{}", 0, 413,
     OPENAI},
    {"Content-Length 10^23, messages", MSGS "Content-Length: 99999999999999999999999\r\n\r\n{}",
     0, 413, ANTHROPIC},
    {"TRACE", "TRACE /v1/chat/completions HTTP/1.1\r\nConnection: close\r\n\r\n", 0, 405,
     OPENAI},
    {"CONNECT", "CONNECT /v1/messages HTTP/1.1\r\nConnection: close\r\n\r\n", 0, 405,
     ANTHROPIC},
    {"binary junk with no line end", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\xff\xfe", 13,
     400, OPENAI},
};
/* clang-format on */

/* Every framing case on a fresh connection, an ordinary request alongside: its answer. */
static void framing_cases(const struct srv *s)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct framing_case *c = &cases[i];
        char *answer = exchange(s, c->request, c->len ? c->len : strlen(c->request));
        check_answer(c->what, answer, c->status, c->dialect);
        free(answer);
    }
    /* a head past 64 KiB with no line end: refused at the head limit */
    size_t n  = 70 * 1024;
    char *big = malloc(n);
    assert_non_null(big);
    memcpy(big, "POST /v1/messages HTTP/1.1\r\nX-Junk: ", 36);
    memset(big + 36, 'j', n - 36);
    char *answer = exchange(s, big, n);
    check_answer("a head with no end", answer, 413, ANTHROPIC);
    free(answer);
    free(big);
}

/* An unknown path of bytes that are not UTF-8: serve's 404 quotes it percent-encoded, so the
 * answer stays valid JSON text (hearth route relays it chunked, as the backend's reply). */
static void unknown_path_case(const struct srv *s)
{
    static const char bad_path[] = "GET /\xff\xfe/x HTTP/1.1\r\nConnection: close\r\n\r\n";
    char *quoted                 = exchange(s, bad_path, sizeof bad_path - 1);
    check_answer("a path of bytes that are not UTF-8", quoted, 404, OPENAI);
    for (const char *c = quoted; *c; c++)
        if ((unsigned char)*c >= 0x80)
            fail_msg("the 404 carries the path's raw bytes:\n%s", quoted);
    assert_non_null(strstr(quoted, "/%FF%FE/x"));
    free(quoted);
}

/* ----------------------------------------------------------- timeouts --- */

/* A connection that sends part (may be "") and then nothing must be closed, an ordinary
 * request completing while it is open; the answer. */
static char *silent_after(const struct srv *s, const char *part)
{
    return exchange(s, part, strlen(part));
}

static void timeout_cases(const struct srv *s)
{
    /* nothing at all: closed without a word */
    char *a = silent_after(s, "");
    assert_string_equal(a, "");
    free(a);
    /* half a head: 408, in the path's dialect */
    a = silent_after(s, "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Le");
    check_answer("half a head", a, 408, ANTHROPIC);
    free(a);
    a = silent_after(s, "POST /v1/chat/compl");
    check_answer("half a request line", a, 408, OPENAI);
    free(a);
    /* half a body: 408 too, after the io timeout */
    a = silent_after(s, CHAT "Content-Length: 100\r\n\r\n{\"messages\":");
    check_answer("half a body", a, 408, OPENAI);
    free(a);
    a = silent_after(s, MSGS "Transfer-Encoding: chunked\r\n\r\n10\r\n{\"mess");
    check_answer("half a chunked body", a, 408, ANTHROPIC);
    free(a);
    /* idle between requests: one whole request answered, then closed for silence */
    a = silent_after(s, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
    if (strncmp(a, "HTTP/1.1 200", 12))
        fail_msg("the request before the silence got:\n%s", a);
    free(a);
}

/* ---------------------------------------------------------------- tests --- */

static void test_serve_framing(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    struct srv s;
    srv_start(&s, NULL);
    framing_cases(&s);
    unknown_path_case(&s);
    srv_stop(&s);
}

static void test_serve_timeouts(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    struct srv s;
    srv_start(&s, (const char *[]){"--timeout", "1", NULL});
    timeout_cases(&s);
    srv_stop(&s);
}

/*
 * A stream whose generation is held (the scheduler's gate) past the timeout is not a silent
 * connection: it completes. Two idle connections closed by the timeout while it is held
 * show that the timeout has passed, with no clock in the test.
 */
static void test_serve_long_generation_not_cut(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    struct srv s;
    srv_start_gated(&s, (const char *[]){"--timeout", "1", NULL});
    char out[600];
    snprintf(out, sizeof out, "%s/held.sse", s.dir);
    pid_t curl =
        http_post_bg(&s, "/v1/completions",
                     "{\"prompt\":\"Once upon a time\",\"max_tokens\":4,\"ignore_eos\":true,"
                     "\"temperature\":0,\"stream\":true}",
                     out, "120");
    srv_gate_steps(&s, 1); /* the prompt and a first token; then held at the gate */
    srv_wait_generated(&s, 1);
    assert_true(sse_wait(out, 1));
    for (int i = 0; i < 2; i++) { /* no ordinary request here: the gate holds every step */
        int fd = dial(s.port);
        size_t n;
        char *a = read_to_close(fd, &n);
        close(fd);
        assert_int_equal(n, 0);
        free(a);
    }
    srv_gate_lift(&s);
    assert_int_equal(srv_wait_pid(curl, 60), 0);
    char *body = srv_slurp(out);
    if (!strstr(body, "data: [DONE]"))
        fail_msg("the held stream was cut:\n%s", body);
    free(body);
    srv_stop(&s);
}

static void test_route_framing_and_timeouts(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    struct srv s, r;
    srv_start(&s, NULL);
    srv_start_route(&r, (const char *[]){"--upstream", s.base, "--client-timeout", "1", NULL});
    framing_cases(&r);
    timeout_cases(&r);
    srv_stop(&r);
    srv_stop(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_serve_framing, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_serve_timeouts, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_serve_long_generation_not_cut, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_route_framing_and_timeouts, srv_kill_leftovers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
