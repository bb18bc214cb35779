/*
 * test_httpc.c: src/bench/httpc.c, the HTTP/1.1 client of `hearth bench`
 * (its URLs are test_url.c's).
 * The parser's cases are fed whole, one byte at a time and cut at every
 * pair of positions: the status, the body, the raw offset of every body
 * byte and the verdict must not depend on how the bytes arrive. The
 * exchange is driven against a one-connection server on a loopback socket,
 * run by a thread of this test; where a case needs the server to hold, it
 * holds on a pipe until the test releases it, so nothing waits on time.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/testutil.h"
#include "bench/httpc.h"
#include "bench/sse.h"

/* ------------------------------------------------------------ parser --- */

/* What a parse reported. */
struct got {
    int n_head, head_status;
    char body[4096];
    uint64_t off[4096]; /* the raw offset of each body byte */
    size_t body_len;
    const char *raw; /* the whole input, to check each piece against */
    bool raw_ok;     /* every on_body piece is the raw bytes its raw_end says */
};

static void got_head(void *ctx, int status)
{
    struct got *g = ctx;
    g->n_head++;
    g->head_status = status;
}

static void got_body(void *ctx, const char *data, size_t len, uint64_t raw_end)
{
    struct got *g = ctx;
    assert_true(len > 0);
    assert_true(raw_end >= len);
    assert_true(g->body_len + len <= sizeof g->body);
    if (memcmp(g->raw + raw_end - len, data, len) != 0)
        g->raw_ok = false;
    for (size_t i = 0; i < len; i++) {
        g->body[g->body_len + i] = data[i];
        g->off[g->body_len + i]  = raw_end - len + i;
    }
    g->body_len += len;
}

/* Feeds s cut at a <= b into three pieces, then the close when eof; the verdict. */
static bool feed3(struct httpc_parser *p, const char *s, size_t len, size_t a, size_t b, bool eof,
                  struct got *g)
{
    memset(g, 0, sizeof *g);
    g->raw                 = s;
    g->raw_ok              = true;
    struct httpc_sink sink = {.ctx = g, .on_head = got_head, .on_body = got_body};
    httpc_parser_init(p, &sink);
    bool ok =
        httpc_parse(p, s, a) && httpc_parse(p, s + a, b - a) && httpc_parse(p, s + b, len - b);
    if (ok && eof)
        ok = httpc_parse_eof(p);
    return ok;
}

static struct httpc_parser *parser(void)
{
    static struct httpc_parser p; /* 64 KiB: kept off the stack */
    return &p;
}

/*
 * s must parse to status and body every way it arrives, with done as given
 * (before any close) and, when body_at >= 0, the body's first byte at raw
 * offset body_at; eof_ok is what the close then says.
 */
static void check(const char *s, int status, const char *body, long body_at, bool done, bool eof_ok)
{
    size_t len = strlen(s), blen = strlen(body);
    struct httpc_parser *p = parser();
    struct got g, first;
    for (size_t a = 0; a <= len; a++) {
        for (size_t b = a; b <= len; b++) {
            bool ok = feed3(p, s, len, a, b, false, &g);
            if (!ok || g.body_len != blen || memcmp(g.body, body, blen) || p->done != done)
                print_message("cut at %zu and %zu: ok %d done %d err '%s' body '%.*s' of:\n%s\n", a,
                              b, ok, p->done, p->err, (int)g.body_len, g.body, s);
            assert_true(ok);
            assert_int_equal(g.n_head, 1);
            assert_int_equal(g.head_status, status);
            assert_int_equal(p->status, status);
            assert_int_equal(g.body_len, blen);
            assert_memory_equal(g.body, body, blen);
            assert_true(g.raw_ok);
            assert_int_equal(p->done, done);
            assert_int_equal(p->body_done, blen);
            assert_int_equal(p->raw, len);
            if (a == 0 && b == 0)
                first = g;
            else
                assert_memory_equal(g.off, first.off, blen * sizeof g.off[0]);
            if (blen && body_at >= 0)
                assert_int_equal(g.off[0], body_at);
            assert_int_equal(httpc_parse_eof(p), eof_ok);
        }
    }
    /* one byte at a time */
    memset(&g, 0, sizeof g);
    g.raw                  = s;
    g.raw_ok               = true;
    struct httpc_sink sink = {.ctx = &g, .on_head = got_head, .on_body = got_body};
    httpc_parser_init(p, &sink);
    for (size_t i = 0; i < len; i++)
        assert_true(httpc_parse(p, s + i, 1));
    assert_int_equal(g.body_len, blen);
    assert_true(g.raw_ok);
    assert_memory_equal(g.off, first.off, blen * sizeof g.off[0]);
    assert_int_equal(p->done, done);
}

/* s must be refused, every way it arrives, with a sentence containing why. */
static void check_bad(const char *s, bool eof, const char *why)
{
    size_t len             = strlen(s);
    struct httpc_parser *p = parser();
    struct got g;
    for (size_t a = 0; a <= len; a++) {
        for (size_t b = a; b <= len; b++) {
            bool ok = feed3(p, s, len, a, b, eof, &g);
            if (ok || !strstr(p->err, why))
                print_message("cut at %zu and %zu: ok %d err '%s' (want '%s') of:\n%s\n", a, b, ok,
                              p->err, why, s);
            assert_false(ok);
            assert_non_null(strstr(p->err, why));
            assert_true(g.raw_ok);
            /* stuck: more bytes change nothing */
            assert_false(httpc_parse(p, "HTTP/1.1 200 OK\r\n\r\n", 19));
        }
    }
}

static void test_content_length(void **state)
{
    (void)state;
    /* bytes after the end are ignored */
    check("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloEXTRA", 200, "hello", 38, true, true);
    check("HTTP/1.1 500 Internal Server Error\r\ncontent-LENGTH:   2  \r\nX-A: b\r\n\r\n{}", 500,
          "{}", 69, true, true);
    check("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", 200, "", -1, true, true);
    /* LF-only line ends, a status line without a reason, a repeated equal length */
    check("HTTP/1.1 200\nContent-Length: 2\nContent-Length: 2\n\nhi", 200, "hi", 50, true, true);
    /* cut short: the close says so */
    check("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello", 200, "hello", 39, false, false);
}

static void test_chunked(void **state)
{
    (void)state;
    const char *s = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "5;name=\"v\"\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-Trailer: 1\r\n\r\nNEXT";
    check(s, 200, "hello0123456789", 59, true, true);
    /* chunked wins over Content-Length, names and values are case-insensitive, hex both cases */
    check("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTRANSFER-encoding: gzip, CHUNKED\r\n\r\n"
          "b\r\n01234567890\r\n1 ; x\r\n!\r\n0\r\n\r\n",
          200, "01234567890!", 75, true, true);
    /* LF alone after sizes and data, no trailer */
    check("HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n3\nabc\n0\n\n", 200, "abc", 46, true,
          true);
    /* an SSE stream cut before its last chunk */
    check("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\ndata: \r\n", 200, "data: ", 50,
          false, false);
    /* a coding other than chunked last: the body runs to the close */
    check("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\nzz", 200, "zz", 53, false,
          true);
}

static void test_no_length(void **state)
{
    (void)state;
    check("HTTP/1.0 200 OK\r\n\r\nabc", 200, "abc", 19, false, true);
    check("HTTP/1.1 200 OK\r\n\r\n", 200, "", -1, false, true);
    /* 204 and 304 have no body whatever the headers say */
    check("HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\nabc", 204, "", -1, true, true);
    check("HTTP/1.1 304 Not Modified\r\n\r\n", 304, "", -1, true, true);
}

static void test_interim(void **state)
{
    (void)state;
    /* 1xx answers are skipped; on_head sees only the real one */
    check("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 200, "ok",
          63, true, true);
    check("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
          "HTTP/1.1 404 Not Found\r\nContent-Length: 1\r\n\r\nx",
          404, "x", 110, true, true);
    /* a close right after an interim answer is no response */
    struct got g;
    const char *s = "HTTP/1.1 100 Continue\r\n\r\n";
    assert_false(feed3(parser(), s, strlen(s), 0, 0, true, &g));
    assert_int_equal(g.n_head, 0);
}

static void test_garbage(void **state)
{
    (void)state;
    check_bad("HELLO\r\n\r\n", false, "status line");
    check_bad("HTTP/2 200 OK\r\n\r\n", false, "status line");
    check_bad("HTTP/1.1 20 OK\r\n\r\n", false, "status line");
    check_bad("HTTP/1.1 2000 OK\r\n\r\n", false, "status line");
    check_bad("HTTP/1.1 099 Low\r\n\r\n", false, "from 100 to 999");
    check_bad("\r\nHTTP/1.1 200 OK\r\n\r\n", false, "empty line");
    check_bad("HTTP/1.1 200 OK\r\nNoColon\r\n\r\n", false, "without a name");
    check_bad("HTTP/1.1 200 OK\r\n: v\r\n\r\n", false, "without a name");
    check_bad("HTTP/1.1 200 OK\r\nBad Name: v\r\n\r\n", false, "header name");
    check_bad("HTTP/1.1 200 OK\r\nX: a\r\n folded\r\n\r\n", false, "folded");
}

static void test_bad_length(void **state)
{
    (void)state;
    check_bad("HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n", false, "not a decimal");
    check_bad("HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\n", false, "not a decimal");
    check_bad("HTTP/1.1 200 OK\r\nContent-Length: 0x10\r\n\r\n", false, "not a decimal");
    check_bad("HTTP/1.1 200 OK\r\nContent-Length: 5 5\r\n\r\n", false, "not a decimal");
    check_bad("HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n", false, "empty Content-Length");
    check_bad("HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n", false,
              "too large");
    check_bad("HTTP/1.1 200 OK\r\nContent-Length: 5\r\ncontent-length: 6\r\n\r\n", false,
              "two different Content-Length");
}

static void test_bad_chunks(void **state)
{
    (void)state;
    const char *te = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    char s[512];
    snprintf(s, sizeof s, "%szz\r\n", te);
    check_bad(s, false, "hex number");
    snprintf(s, sizeof s, "%s\r\n", te);
    check_bad(s, false, "hex number");
    snprintf(s, sizeof s, "%s5 x\r\nhello\r\n", te);
    check_bad(s, false, "after the size");
    snprintf(s, sizeof s, "%s3\r\nabcX\r\n", te);
    check_bad(s, false, "not followed by CRLF");
    snprintf(s, sizeof s, "%s3\r\nabc\rX", te);
    check_bad(s, false, "not followed by CRLF");
    /* 2^40 + 1 bytes, and a size with many digits */
    snprintf(s, sizeof s, "%s10000000001\r\n", te);
    check_bad(s, false, "over 2^40");
    snprintf(s, sizeof s, "%sfffffffffffffffffffffff\r\n", te);
    check_bad(s, false, "over 2^40");
    /* a chunk-size line of 200 bytes of extensions */
    snprintf(s, sizeof s, "%s1;%0200d\r\n", te, 0);
    check_bad(s, false, "chunk-size line is longer");

    /* exactly 2^40 is allowed: the parser then wants that many bytes */
    snprintf(s, sizeof s, "%s10000000000\r\nabc", te);
    struct got g;
    struct httpc_parser *p = parser();
    assert_true(feed3(p, s, strlen(s), 0, 0, false, &g));
    assert_int_equal(p->chunk_left, (1ull << 40) - 3);
    assert_false(httpc_parse_eof(p));
}

/* The head limit is HTTPC_MAX_HEAD bytes exactly; the trailer has the same one. */
static void test_head_limit(void **state)
{
    (void)state;
    const char *start = "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nX-Pad: ";
    size_t n          = HTTPC_MAX_HEAD + 64;
    char *s           = malloc(n + 1);
    assert_non_null(s);
    /* a head of exactly HTTPC_MAX_HEAD bytes, then one body byte */
    size_t pad = HTTPC_MAX_HEAD - strlen(start) - 4;
    memcpy(s, start, strlen(start));
    memset(s + strlen(start), 'a', pad);
    memcpy(s + strlen(start) + pad, "\r\n\r\nZ", 6);
    struct got g;
    struct httpc_parser *p = parser();
    size_t len             = strlen(s);
    assert_int_equal(len, HTTPC_MAX_HEAD + 1);
    size_t cuts[] = {0, 1, 100, HTTPC_MAX_HEAD - 1, HTTPC_MAX_HEAD, len};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        assert_true(feed3(p, s, len, cuts[i], cuts[i], false, &g));
        assert_true(p->done);
        assert_int_equal(g.body_len, 1);
        assert_int_equal(g.off[0], HTTPC_MAX_HEAD);
    }
    /* one byte more */
    memcpy(s + strlen(start) + pad, "a\r\n\r\nZ", 7);
    len = strlen(s);
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        assert_false(feed3(p, s, len, cuts[i], cuts[i], false, &g));
        assert_non_null(strstr(p->err, "head is longer than 65536"));
        assert_int_equal(g.n_head, 0);
    }
    /* a head that never ends */
    memset(s, 'x', n);
    memcpy(s, "HTTP/1.1 200 OK\r\n", 17);
    assert_false(feed3(p, s, n, 5, 5, false, &g));
    assert_non_null(strstr(p->err, "head is longer"));
    /* an endless trailer */
    const char *te = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: ";
    memset(s, 'y', n);
    memcpy(s, te, strlen(te));
    assert_false(feed3(p, s, n, 0, 0, false, &g));
    assert_non_null(strstr(p->err, "trailer is longer"));
    free(s);
}

static void test_eof_cuts(void **state)
{
    (void)state;
    struct got g;
    const char *cases[] = {
        "",
        "HTTP/1.1 200 OK\r\nContent-Le",
        "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nab",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nab",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_false(feed3(parser(), cases[i], strlen(cases[i]), 0, 0, true, &g));
}

/* -------------------------------------------------- a loopback server --- */

enum srv_mode {
    SRV_REPLY,     /* read the request, send the reply in its pieces, close */
    SRV_HOLD,      /* read the request, then hold until released, then close */
    SRV_CLOSE_MID, /* read the request, send the reply's first piece, close */
};

struct server {
    int lfd, port;
    enum srv_mode mode;
    const char *reply[8]; /* sent one send() each */
    int hold[2];          /* SRV_HOLD: the test writes to hold[1] to release the server */
    int signal_fd;        /* >= 0: written once the request is read (the stop case) */
    char request[8192];   /* what the client sent */
    size_t request_len;
    int peer_port; /* the client's port as the server saw it */
    pthread_t thread;
};

/* Reads one request (head, then Content-Length body) into s->request. */
static void srv_read_request(struct server *s, int fd)
{
    size_t need = 0;
    for (;;) {
        ssize_t r =
            recv(fd, s->request + s->request_len, sizeof s->request - 1 - s->request_len, 0);
        if (r <= 0)
            return;
        s->request_len += (size_t)r;
        s->request[s->request_len] = 0;
        char *end                  = strstr(s->request, "\r\n\r\n");
        if (!end)
            continue;
        if (!need) {
            const char *cl = strstr(s->request, "Content-Length: ");
            need           = (size_t)(end + 4 - s->request) + (cl ? (size_t)atol(cl + 16) : 0);
        }
        if (s->request_len >= need)
            return;
    }
}

static void *srv_main(void *arg)
{
    struct server *s = arg;
    /* a client that gave up before connecting is released by the hold pipe instead */
    struct pollfd pf[2] = {{.fd = s->lfd, .events = POLLIN}, {.fd = s->hold[0], .events = POLLIN}};
    while (poll(pf, 2, -1) < 0)
        ;
    if (!pf[0].revents)
        return NULL;
    int fd = accept(s->lfd, NULL, NULL);
    if (fd < 0)
        return NULL;
    struct sockaddr_in peer;
    socklen_t pl = sizeof peer;
    if (getpeername(fd, (struct sockaddr *)&peer, &pl) == 0)
        s->peer_port = ntohs(peer.sin_port);
    srv_read_request(s, fd);
    if (s->signal_fd >= 0 && write(s->signal_fd, "x", 1) != 1)
        abort();
    switch (s->mode) {
    case SRV_REPLY:
        for (int i = 0; i < 8 && s->reply[i]; i++)
            if (send(fd, s->reply[i], strlen(s->reply[i]), MSG_NOSIGNAL) < 0)
                break;
        break;
    case SRV_CLOSE_MID:
        if (send(fd, s->reply[0], strlen(s->reply[0]), MSG_NOSIGNAL) < 0)
            break;
        break;
    case SRV_HOLD: {
        char c;
        if (read(s->hold[0], &c, 1) != 1)
            abort();
        break;
    }
    }
    close(fd);
    return NULL;
}

/* A listening socket on 127.0.0.1 and its thread, serving one connection. */
static void srv_start(struct server *s, enum srv_mode mode)
{
    s->mode      = mode;
    s->signal_fd = s->signal_fd ? s->signal_fd : -1;
    s->lfd       = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(s->lfd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(s->lfd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(s->lfd, 4), 0);
    socklen_t al = sizeof a;
    assert_int_equal(getsockname(s->lfd, (struct sockaddr *)&a, &al), 0);
    s->port = ntohs(a.sin_port);
    assert_int_equal(pipe(s->hold), 0);
    assert_int_equal(pthread_create(&s->thread, NULL, srv_main, s), 0);
}

/* Releases a holding server, waits for its thread and closes its descriptors. */
static void srv_stop(struct server *s)
{
    if (s->mode == SRV_HOLD)
        assert_int_equal(write(s->hold[1], "x", 1), 1);
    pthread_join(s->thread, NULL);
    close(s->hold[0]);
    close(s->hold[1]);
    close(s->lfd);
}

static struct url_target srv_target(int port, const char *prefix)
{
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, prefix);
    struct url_target t;
    char err[200];
    assert_true(url_target_parse(url, &t, err, sizeof err));
    return t;
}

/* ---------------------------------------------------------- exchange --- */

struct stream {
    struct sse_parser sse;
    char events[4096];
    size_t events_len;
    int head_status;
    int connect_port;
    uint64_t last_raw;
};

static bool stream_event(void *ctx, const char *event, const char *data, size_t len, uint64_t end)
{
    struct stream *st = ctx;
    int n = snprintf(st->events + st->events_len, sizeof st->events - st->events_len, "%s;", data);
    assert_true(n > 0 && (size_t)n < sizeof st->events - st->events_len);
    st->events_len += (size_t)n;
    return true;
}

static void stream_head(void *ctx, int status)
{
    ((struct stream *)ctx)->head_status = status;
}

static void stream_body(void *ctx, const char *data, size_t len, uint64_t raw_end)
{
    struct stream *st = ctx;
    assert_true(raw_end > st->last_raw);
    st->last_raw = raw_end;
    assert_true(sse_feed(&st->sse, data, len));
}

static void stream_connect(void *ctx, int port)
{
    ((struct stream *)ctx)->connect_port = port;
}

/* A chunked SSE stream, sent in pieces that cut chunks and lines, read as events. */
static void test_exchange_stream(void **state)
{
    (void)state;
    struct server s = {0};
    s.reply[0]      = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                      "Transfer-Encoding: chunked\r\n\r\n";
    s.reply[1]      = "f\r\ndata: {\"a\":1}\n";
    s.reply[2]      = "\n\r\n11\r\ndata: {\"b\":2}\r\n\r";
    s.reply[3]      = "\n\r\n";
    s.reply[4]      = "e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n";
    srv_start(&s, SRV_REPLY);
    struct url_target t      = srv_target(s.port, "/prefix/v1/");
    const char *body         = "{\"model\":\"m\",\"stream\":true}";
    struct httpc_request req = {.method    = "POST",
                                .path      = "/v1/completions",
                                .body      = body,
                                .body_len  = strlen(body),
                                .api_key   = "sk-test",
                                .timeout_s = 60,
                                .stop_fd   = -1};
    struct stream st         = {0};
    sse_init(&st.sse, &st, stream_event);
    struct httpc_sink sink = {.ctx = &st, .on_head = stream_head, .on_body = stream_body};
    struct httpc_result res;
    httpc_exchange(&t, &req, &sink, stream_connect, &res);
    srv_stop(&s);
    sse_free(&st.sse);
    if (res.outcome != HTTPC_OK)
        print_message("%s\n", res.err);
    assert_int_equal(res.outcome, HTTPC_OK);
    assert_int_equal(res.status, 200);
    assert_int_equal(st.head_status, 200);
    assert_string_equal(st.events, "{\"a\":1};{\"b\":2};[DONE];");
    assert_int_equal(st.last_raw, strlen(s.reply[0]) + strlen(s.reply[1]) + strlen(s.reply[2]) +
                                      strlen(s.reply[3]) + strlen("e\r\ndata: [DONE]\n\n"));
    /* the port seen by on_connect, in the result and by the server agree */
    assert_true(res.local_port > 0);
    assert_int_equal(st.connect_port, res.local_port);
    assert_int_equal(s.peer_port, res.local_port);
    /* the request as sent */
    char want[1024];
    snprintf(want, sizeof want,
             "POST /prefix/v1/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
             "Connection: close\r\nAccept: */*\r\nAuthorization: Bearer sk-test\r\n"
             "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
             s.port, strlen(body), body);
    assert_string_equal(s.request, want);
}

/* A GET without key or body sends neither header; httpc_fetch collects the body. */
static void test_fetch(void **state)
{
    (void)state;
    struct server s = {0};
    s.reply[0]      = "HTTP/1.1 200 OK\r\nContent-Length: 25\r\n\r\n{\"data\":[{\"id\":";
    s.reply[1]      = "\"model\"}]}";
    srv_start(&s, SRV_REPLY);
    struct url_target t      = srv_target(s.port, "");
    struct httpc_request req = {
        .method = "GET", .path = "/v1/models", .api_key = "", .timeout_s = 60, .stop_fd = -1};
    struct httpc_result res;
    char *body = NULL;
    httpc_fetch(&t, &req, 1 << 20, &body, &res);
    srv_stop(&s);
    assert_int_equal(res.outcome, HTTPC_OK);
    assert_int_equal(res.status, 200);
    assert_non_null(body);
    assert_string_equal(body, "{\"data\":[{\"id\":\"model\"}]}");
    free(body);
    char want[256];
    snprintf(want, sizeof want,
             "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n"
             "Accept: */*\r\n\r\n",
             s.port);
    assert_string_equal(s.request, want);

    /* an error status is still a whole response */
    struct server e = {0};
    e.reply[0]      = "HTTP/1.1 404 Not Found\r\n\r\nno such model";
    srv_start(&e, SRV_REPLY);
    t = srv_target(e.port, "");
    httpc_fetch(&t, &req, 1 << 20, &body, &res);
    srv_stop(&e);
    assert_int_equal(res.outcome, HTTPC_OK);
    assert_int_equal(res.status, 404);
    assert_string_equal(body, "no such model");
    free(body);

    /* a body past max_body */
    struct server b = {0};
    b.reply[0]      = "HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n0123456789A";
    srv_start(&b, SRV_REPLY);
    t    = srv_target(b.port, "");
    body = (char *)"not touched";
    httpc_fetch(&t, &req, 10, &body, &res);
    srv_stop(&b);
    assert_int_equal(res.outcome, HTTPC_PROTOCOL);
    assert_null(body);
    assert_non_null(strstr(res.err, "longer than 10 bytes"));
}

static void test_refused(void **state)
{
    (void)state;
    /* a socket bound but not listening: the port is ours and connecting is refused */
    int fd               = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t al = sizeof a;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
    struct url_target t      = srv_target(ntohs(a.sin_port), "");
    struct httpc_request req = {.method = "GET", .path = "/health", .timeout_s = 60, .stop_fd = -1};
    struct httpc_result res;
    httpc_exchange(&t, &req, NULL, NULL, &res);
    close(fd);
    assert_int_equal(res.outcome, HTTPC_CONNECTION);
    assert_int_equal(res.status, 0);
    assert_int_equal(res.local_port, 0);
    assert_non_null(strstr(res.err, "cannot connect"));

    /* a name that does not resolve */
    struct url_target bad;
    char err[200];
    assert_true(url_target_parse("http://no-such-host.invalid:1", &bad, err, sizeof err));
    httpc_exchange(&bad, &req, NULL, NULL, &res);
    assert_int_equal(res.outcome, HTTPC_CONNECTION);
    assert_non_null(strstr(res.err, "cannot resolve"));
}

static void test_closed_mid_body(void **state)
{
    (void)state;
    struct server s = {0};
    s.reply[0]      = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial";
    srv_start(&s, SRV_CLOSE_MID);
    struct url_target t      = srv_target(s.port, "");
    struct httpc_request req = {.method = "GET", .path = "/x", .timeout_s = 60, .stop_fd = -1};
    struct httpc_result res;
    httpc_exchange(&t, &req, NULL, NULL, &res);
    srv_stop(&s);
    assert_int_equal(res.outcome, HTTPC_CONNECTION);
    assert_int_equal(res.status, 200);
    assert_non_null(strstr(res.err, "closed the connection before the end"));
}

static void test_protocol_error(void **state)
{
    (void)state;
    struct server s = {0};
    s.reply[0]      = "SSH-2.0-OpenSSH_9.2\r\n\r\n";
    srv_start(&s, SRV_REPLY);
    struct url_target t      = srv_target(s.port, "");
    struct httpc_request req = {.method = "GET", .path = "/x", .timeout_s = 60, .stop_fd = -1};
    struct httpc_result res;
    httpc_exchange(&t, &req, NULL, NULL, &res);
    srv_stop(&s);
    assert_int_equal(res.outcome, HTTPC_PROTOCOL);
    assert_int_equal(res.status, 0);
    assert_non_null(strstr(res.err, "status line"));
}

/* The server holds forever: the deadline ends the exchange. */
static void test_timeout(void **state)
{
    (void)state;
    struct server s = {0};
    srv_start(&s, SRV_HOLD);
    struct url_target t      = srv_target(s.port, "");
    struct httpc_request req = {.method = "GET", .path = "/x", .timeout_s = 0.2, .stop_fd = -1};
    struct httpc_result res;
    httpc_exchange(&t, &req, NULL, NULL, &res);
    srv_stop(&s);
    assert_int_equal(res.outcome, HTTPC_TIMEOUT);
    assert_int_equal(res.status, 0);
    assert_true(res.local_port > 0);
}

/*
 * The stop descriptor turns readable once the server has the request (the
 * server makes it so, so the client is waiting for the answer by then), and
 * stays readable: a second exchange stops as well.
 */
static void test_stopped(void **state)
{
    (void)state;
    int stop[2];
    assert_int_equal(pipe(stop), 0);
    struct server s = {.signal_fd = stop[1]};
    srv_start(&s, SRV_HOLD);
    struct url_target t      = srv_target(s.port, "");
    struct httpc_request req = {.method = "GET", .path = "/x", .timeout_s = 60, .stop_fd = stop[0]};
    struct httpc_result res;
    httpc_exchange(&t, &req, NULL, NULL, &res);
    srv_stop(&s);
    assert_int_equal(res.outcome, HTTPC_STOPPED);
    assert_string_equal(s.request + strlen(s.request) - 4, "\r\n\r\n");

    struct server s2 = {0};
    srv_start(&s2, SRV_HOLD);
    t = srv_target(s2.port, "");
    httpc_exchange(&t, &req, NULL, NULL, &res);
    srv_stop(&s2);
    assert_int_equal(res.outcome, HTTPC_STOPPED);
    char c;
    assert_int_equal(read(stop[0], &c, 1), 1); /* httpc never read it */
    close(stop[0]);
    close(stop[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_content_length),  cmocka_unit_test(test_chunked),
        cmocka_unit_test(test_no_length),       cmocka_unit_test(test_interim),
        cmocka_unit_test(test_garbage),         cmocka_unit_test(test_bad_length),
        cmocka_unit_test(test_bad_chunks),      cmocka_unit_test(test_head_limit),
        cmocka_unit_test(test_eof_cuts),        cmocka_unit_test(test_exchange_stream),
        cmocka_unit_test(test_fetch),           cmocka_unit_test(test_refused),
        cmocka_unit_test(test_closed_mid_body), cmocka_unit_test(test_protocol_error),
        cmocka_unit_test(test_timeout),         cmocka_unit_test(test_stopped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
