/*
 * httpc.c: the HTTP/1.1 client of `hearth bench` (httpc.h). The response
 * parser is a byte-driven state machine that never looks ahead past the
 * piece it is given, so any split of the same bytes yields the same calls;
 * the exchange is one blocking socket per request, driven by poll() against
 * one deadline and the stop descriptor.
 */
#include "bench/httpc.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/errfmt.h"

/* ------------------------------------------------------------ parser --- */

enum {
    ST_HEAD,       /* collecting the status line and headers into p->head */
    ST_BODY_LEN,   /* Content-Length body: content_len - body_done bytes left */
    ST_BODY_CLOSE, /* body runs until the connection closes */
    ST_CHUNK_SIZE, /* collecting a chunk-size line into p->line */
    ST_CHUNK_DATA, /* chunk_left bytes of chunk data */
    ST_CHUNK_CR,   /* the CRLF after chunk data: expecting CR or LF */
    ST_CHUNK_LF,   /* the CRLF after chunk data: CR seen, expecting LF */
    ST_TRAILER,    /* trailer lines after the last chunk, up to an empty line */
    ST_DONE,
    ST_ERROR,
};

#define CHUNK_MAX (1ull << 40)

static bool parse_fail(struct httpc_parser *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err, sizeof p->err, fmt, ap);
    va_end(ap);
    p->state = ST_ERROR;
    return false;
}

void httpc_parser_init(struct httpc_parser *p, const struct httpc_sink *sink)
{
    p->sink        = sink ? *sink : (struct httpc_sink){0};
    p->state       = ST_HEAD;
    p->status      = 0;
    p->chunked     = false;
    p->content_len = -1;
    p->body_done   = 0;
    p->chunk_left  = 0;
    p->raw         = 0;
    p->head_len    = 0;
    p->line_len    = 0;
    p->done        = false;
    p->err[0]      = 0;
}

static const char *trim(char *s, char *end)
{
    while (s < end && (*s == ' ' || *s == '\t'))
        s++;
    while (end > s && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    *end = 0;
    return s;
}

/* Whether the comma-separated list of codings in v ends with "chunked". */
static bool last_coding_chunked(const char *v)
{
    const char *last = strrchr(v, ',');
    last             = last ? last + 1 : v;
    while (*last == ' ' || *last == '\t')
        last++;
    size_t n = strcspn(last, " \t;");
    return n == 7 && strncasecmp(last, "chunked", 7) == 0;
}

/*
 * The head is complete in p->head[0..head_len) (ending with an empty line):
 * reads the status and the framing headers and chooses the body state.
 */
static bool parse_head(struct httpc_parser *p)
{
    char *s = p->head, *end = p->head + p->head_len;
    char *eol = memchr(s, '\n', (size_t)(end - s));
    char *le  = (eol > s && eol[-1] == '\r') ? eol - 1 : eol;
    size_t sl = (size_t)(le - s);
    if (sl < 12 || memcmp(s, "HTTP/1.", 7) != 0 || !isdigit((unsigned char)s[7]) || s[8] != ' ' ||
        !isdigit((unsigned char)s[9]) || !isdigit((unsigned char)s[10]) ||
        !isdigit((unsigned char)s[11]) || (sl > 12 && s[12] != ' '))
        return parse_fail(p, "the response does not start with a status line "
                             "\"HTTP/1.x NNN reason\"");
    p->status = (s[9] - '0') * 100 + (s[10] - '0') * 10 + (s[11] - '0');
    if (p->status < 100)
        return parse_fail(p, "the response's status %03d is not from 100 to 999", p->status);

    bool has_te = false, chunked = false;
    int64_t clen = -1;
    for (s = eol + 1; s < end; s = eol + 1) {
        eol = memchr(s, '\n', (size_t)(end - s));
        le  = (eol > s && eol[-1] == '\r') ? eol - 1 : eol;
        if (le == s)
            break; /* the empty line that ends the head */
        if (*s == ' ' || *s == '\t')
            return parse_fail(p, "a folded header line (obsolete) in the response");
        char *colon = memchr(s, ':', (size_t)(le - s));
        if (!colon || colon == s)
            return parse_fail(p, "a header line without a name and ':' in the response");
        for (char *c = s; c < colon; c++)
            if (!isgraph((unsigned char)*c))
                return parse_fail(p, "a header name with a space or control character");
        size_t nlen   = (size_t)(colon - s);
        const char *v = trim(colon + 1, le);
        if (nlen == 14 && strncasecmp(s, "content-length", 14) == 0) {
            if (!*v)
                return parse_fail(p, "an empty Content-Length");
            int64_t n = 0;
            for (const char *c = v; *c; c++) {
                if (!isdigit((unsigned char)*c))
                    return parse_fail(p, "Content-Length \"%.40s\" is not a decimal number", v);
                if (n > (INT64_MAX - 9) / 10)
                    return parse_fail(p, "Content-Length %.40s is too large", v);
                n = n * 10 + (*c - '0');
            }
            if (clen >= 0 && clen != n)
                return parse_fail(p, "two different Content-Length headers (%lld and %lld)",
                                  (long long)clen, (long long)n);
            clen = n;
        } else if (nlen == 17 && strncasecmp(s, "transfer-encoding", 17) == 0) {
            has_te  = true;
            chunked = last_coding_chunked(v);
        }
    }

    if (p->status < 200) {
        /* An interim response: the real one follows in a new head. */
        p->head_len = 0;
        return true;
    }
    p->chunked     = chunked;
    p->content_len = chunked || has_te ? -1 : clen;
    if (p->sink.on_head)
        p->sink.on_head(p->sink.ctx, p->status);
    if (p->status == 204 || p->status == 304) {
        p->content_len = p->chunked ? -1 : 0;
        p->chunked     = false;
        p->state       = ST_DONE;
        p->done        = true;
    } else if (chunked) {
        p->state    = ST_CHUNK_SIZE;
        p->line_len = 0;
    } else if (has_te) {
        p->state = ST_BODY_CLOSE; /* a coding other than chunked last: the close frames it */
    } else if (clen >= 0) {
        p->state = clen == 0 ? ST_DONE : ST_BODY_LEN;
        p->done  = clen == 0;
    } else {
        p->state = ST_BODY_CLOSE;
    }
    return true;
}

/* The chunk-size line in p->line[0..line_len) (CR removed): hex size, then optional extensions. */
static bool parse_chunk_size(struct httpc_parser *p)
{
    const char *s = p->line, *end = p->line + p->line_len;
    uint64_t n = 0;
    int digits = 0;
    for (; s < end && isxdigit((unsigned char)*s); s++, digits++) {
        int d = isdigit((unsigned char)*s) ? *s - '0' : (tolower((unsigned char)*s) - 'a' + 10);
        n     = n * 16 + (uint64_t)d;
        if (n > CHUNK_MAX)
            return parse_fail(p, "a chunk size over 2^40 bytes");
    }
    if (digits == 0)
        return parse_fail(p, "a chunk-size line does not start with a hex number");
    while (s < end && (*s == ' ' || *s == '\t'))
        s++;
    if (s < end && *s != ';')
        return parse_fail(p, "a chunk-size line has '%c' after the size", *s);
    p->chunk_left = n;
    p->line_len   = 0;
    if (n == 0) {
        p->state    = ST_TRAILER;
        p->head_len = 0; /* counts the trailer bytes against HTTPC_MAX_HEAD */
    } else {
        p->state = ST_CHUNK_DATA;
    }
    return true;
}

static void body(struct httpc_parser *p, const char *data, size_t len, uint64_t raw_end)
{
    p->body_done += len;
    if (p->sink.on_body && len)
        p->sink.on_body(p->sink.ctx, data, len, raw_end);
}

bool httpc_parse(struct httpc_parser *p, const char *data, size_t len)
{
    if (p->state == ST_ERROR)
        return false;
    uint64_t base = p->raw;
    p->raw += len;
    size_t i = 0;
    while (i < len && p->state != ST_DONE) {
        switch (p->state) {
        case ST_HEAD: {
            const char *lf = memchr(data + i, '\n', len - i);
            size_t n       = lf ? (size_t)(lf - (data + i)) + 1 : len - i;
            if (n > HTTPC_MAX_HEAD - p->head_len)
                return parse_fail(p, "the response's head is longer than %d bytes", HTTPC_MAX_HEAD);
            memcpy(p->head + p->head_len, data + i, n);
            p->head_len += n;
            i += n;
            if (!lf)
                break;
            /* A line just ended: the head ends when it is empty (LF or CRLF alone). */
            size_t k     = p->head_len - 1;
            size_t start = k;
            if (start > 0 && p->head[start - 1] == '\r')
                start--;
            bool empty = start == 0 || p->head[start - 1] == '\n';
            if (!empty)
                break;
            if (start == 0)
                return parse_fail(p, "the response starts with an empty line, not a status line");
            if (!parse_head(p))
                return false;
            break;
        }
        case ST_BODY_LEN: {
            uint64_t left = (uint64_t)p->content_len - p->body_done;
            size_t n      = len - i < left ? len - i : (size_t)left;
            body(p, data + i, n, base + i + n);
            i += n;
            if (p->body_done == (uint64_t)p->content_len) {
                p->state = ST_DONE;
                p->done  = true;
            }
            break;
        }
        case ST_BODY_CLOSE:
            body(p, data + i, len - i, base + len);
            i = len;
            break;
        case ST_CHUNK_SIZE: {
            char c = data[i++];
            if (c == '\n') {
                if (p->line_len > 0 && p->line[p->line_len - 1] == '\r')
                    p->line_len--;
                if (!parse_chunk_size(p))
                    return false;
            } else {
                if (p->line_len >= sizeof p->line)
                    return parse_fail(p, "a chunk-size line is longer than %zu bytes",
                                      sizeof p->line);
                p->line[p->line_len++] = c;
            }
            break;
        }
        case ST_CHUNK_DATA: {
            size_t n = len - i < p->chunk_left ? len - i : (size_t)p->chunk_left;
            body(p, data + i, n, base + i + n);
            i += n;
            p->chunk_left -= n;
            if (p->chunk_left == 0)
                p->state = ST_CHUNK_CR;
            break;
        }
        case ST_CHUNK_CR:
        case ST_CHUNK_LF: {
            char c = data[i++];
            if (c == '\r' && p->state == ST_CHUNK_CR)
                p->state = ST_CHUNK_LF;
            else if (c == '\n')
                p->state = ST_CHUNK_SIZE;
            else
                return parse_fail(p, "chunk data is not followed by CRLF");
            break;
        }
        case ST_TRAILER: {
            char c = data[i++];
            if (++p->head_len > HTTPC_MAX_HEAD)
                return parse_fail(p, "the chunked trailer is longer than %d bytes", HTTPC_MAX_HEAD);
            if (c == '\n') {
                if (p->line_len == 0) {
                    p->state = ST_DONE;
                    p->done  = true;
                }
                p->line_len = 0;
            } else if (c != '\r') {
                p->line_len = 1; /* the line is not empty; its text is not kept */
            }
            break;
        }
        }
    }
    return true;
}

bool httpc_parse_eof(struct httpc_parser *p)
{
    if (p->state == ST_BODY_CLOSE) {
        p->state = ST_DONE;
        p->done  = true;
    }
    return p->state == ST_DONE;
}

/* ----------------------------------------------------------- request --- */

static void result_fail(struct httpc_result *res, enum httpc_outcome o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(res->err, sizeof res->err, fmt, ap);
    va_end(ap);
    res->outcome = o;
}

/* errno's text; strerror_r (GNU) rather than strerror, which may share one buffer between threads.
 */
static const char *errtext(int e, char *buf, size_t len)
{
    return strerror_r(e, buf, len);
}

/* Milliseconds poll() may wait before deadline (< 0: none), rounded up so it never spins. */
static int wait_ms(double deadline)
{
    if (deadline <= 0)
        return -1;
    double left = deadline - now_s();
    if (left <= 0)
        return 0;
    double ms = left * 1000.0 + 1.0;
    return ms > 1e9 ? 1000000000 : (int)ms;
}

/*
 * Waits until fd has the events in ev, the stop descriptor turns readable or
 * the deadline passes. Returns 1 when fd is ready (*revents), 0 when the
 * outcome is already set in res.
 */
static int wait_fd(int fd, short ev, int stop_fd, double deadline, short *revents,
                   struct httpc_result *res)
{
    for (;;) {
        struct pollfd pf[2] = {{.fd = fd, .events = ev}, {.fd = stop_fd, .events = POLLIN}};
        int ms              = wait_ms(deadline);
        if (ms == 0) {
            result_fail(res, HTTPC_TIMEOUT, "no complete answer within the timeout");
            return 0;
        }
        int r = poll(pf, stop_fd >= 0 ? 2 : 1, ms);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            char eb[96];
            result_fail(res, HTTPC_CONNECTION, "poll: %s", errtext(errno, eb, sizeof eb));
            return 0;
        }
        if (stop_fd >= 0 && pf[1].revents) {
            result_fail(res, HTTPC_STOPPED, "stopped");
            return 0;
        }
        if (r > 0 && pf[0].revents) {
            *revents = pf[0].revents;
            return 1;
        }
    }
}

/* A connected non-blocking socket, or -1 with the outcome in res. */
static int connect_to(const struct url_target *t, int stop_fd, double deadline,
                      struct httpc_result *res)
{
    char port[16];
    snprintf(port, sizeof port, "%d", t->port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    int g = getaddrinfo(t->host, port, &hints, &ai);
    if (g != 0) {
        result_fail(res, HTTPC_CONNECTION, "cannot resolve %s: %s", t->host, gai_strerror(g));
        return -1;
    }
    int fd = -1, last_err = 0;
    for (struct addrinfo *a = ai; a; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            last_err = errno;
            continue;
        }
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0)
            break;
        if (errno != EINPROGRESS) {
            last_err = errno;
            close(fd);
            fd = -1;
            continue;
        }
        short rev = 0;
        if (!wait_fd(fd, POLLOUT, stop_fd, deadline, &rev, res)) {
            close(fd);
            freeaddrinfo(ai);
            return -1;
        }
        int so       = 0;
        socklen_t sl = sizeof so;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &sl) < 0)
            so = errno;
        if (so == 0)
            break;
        last_err = so;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(ai);
    char eb[96];
    if (fd < 0)
        result_fail(res, HTTPC_CONNECTION, "cannot connect to %s: %s", t->hostport,
                    errtext(last_err ? last_err : ECONNREFUSED, eb, sizeof eb));
    return fd;
}

/* The request head, malloc'd; NULL when out of memory. */
static char *request_head(const struct url_target *t, const struct httpc_request *req, size_t *len)
{
    const char *key = req->api_key && *req->api_key ? req->api_key : NULL;
    char clen[48]   = "";
    if (req->body)
        snprintf(clen, sizeof clen, "Content-Length: %zu\r\n", req->body_len);
    const char *fmt    = "%s %s%s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\nAccept: */*\r\n"
                         "%s%s%s%s%s\r\n";
    const char *path   = req->path && *req->path ? req->path : "/";
    const char *ct     = req->body ? "Content-Type: application/json\r\n" : "";
    const char *method = req->method && *req->method ? req->method : "GET";
    int n =
        snprintf(NULL, 0, fmt, method, t->prefix, path, t->hostport,
                 key ? "Authorization: Bearer " : "", key ? key : "", key ? "\r\n" : "", ct, clen);
    if (n < 0)
        return NULL;
    char *s = malloc((size_t)n + 1);
    if (!s)
        return NULL;
    snprintf(s, (size_t)n + 1, fmt, method, t->prefix, path, t->hostport,
             key ? "Authorization: Bearer " : "", key ? key : "", key ? "\r\n" : "", ct, clen);
    *len = (size_t)n;
    return s;
}

/*
 * httpc_exchange with a flag the sink may raise (through abort_ctx) to end
 * the exchange early as a protocol error with abort_err.
 */
static void exchange(const struct url_target *t, const struct httpc_request *req,
                     const struct httpc_sink *sink, void (*on_connect)(void *ctx, int local_port),
                     const bool *abort_flag, const char *abort_err, struct httpc_result *res)
{
    memset(res, 0, sizeof *res);
    res->outcome           = HTTPC_OK;
    double deadline        = req->timeout_s > 0 ? now_s() + req->timeout_s : 0;
    struct httpc_parser *p = malloc(sizeof *p);
    size_t head_len        = 0;
    char *head             = p ? request_head(t, req, &head_len) : NULL;
    if (!p || !head) {
        result_fail(res, HTTPC_CONNECTION, "out of memory");
        free(p);
        free(head);
        return;
    }
    httpc_parser_init(p, sink);

    int fd = connect_to(t, req->stop_fd, deadline, res);
    if (fd < 0)
        goto out;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET)
            res->local_port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
        else if (ss.ss_family == AF_INET6)
            res->local_port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    }
    if (on_connect)
        on_connect(sink ? sink->ctx : NULL, res->local_port);

    /* Sending and reading overlap: a server may answer (and close) before the body is sent. */
    size_t body_len = req->body ? req->body_len : 0, sent = 0, total = head_len + body_len;
    bool sending = true;
    char buf[16384], eb[96];
    for (;;) {
        short rev = 0;
        if (!wait_fd(fd, (short)(POLLIN | (sending ? POLLOUT : 0)), req->stop_fd, deadline, &rev,
                     res))
            break;
        if (sending && (rev & POLLOUT)) {
            const char *src = sent < head_len ? head + sent : req->body + (sent - head_len);
            size_t n        = sent < head_len ? head_len - sent : total - sent;
            ssize_t w       = send(fd, src, n, MSG_NOSIGNAL);
            if (w > 0) {
                sent += (size_t)w;
                if (sent == total)
                    sending = false;
            } else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                /* Read what the server said before it stopped listening, if anything. */
                sending = false;
                if (!(rev & (POLLIN | POLLHUP | POLLERR))) {
                    result_fail(res, HTTPC_CONNECTION, "the connection to %s broke: %s",
                                t->hostport, errtext(errno, eb, sizeof eb));
                    break;
                }
            }
        }
        if (!(rev & (POLLIN | POLLHUP | POLLERR)))
            continue;
        ssize_t r = recv(fd, buf, sizeof buf, 0);
        if (r < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                continue;
            result_fail(res, HTTPC_CONNECTION, "the connection to %s broke: %s", t->hostport,
                        errtext(errno, eb, sizeof eb));
            break;
        }
        if (r == 0) {
            if (!httpc_parse_eof(p))
                result_fail(res, HTTPC_CONNECTION,
                            "%s closed the connection before the end "
                            "of the response",
                            t->hostport);
            break;
        }
        if (!httpc_parse(p, buf, (size_t)r)) {
            result_fail(res, HTTPC_PROTOCOL, "%s: %s", t->hostport, p->err);
            break;
        }
        if (abort_flag && *abort_flag) {
            result_fail(res, HTTPC_PROTOCOL, "%s: %s", t->hostport, abort_err);
            break;
        }
        if (p->done)
            break;
    }
    close(fd);
out:
    res->status = p->state != ST_HEAD && p->state != ST_ERROR ? p->status : 0;
    if (p->state == ST_ERROR && p->status >= 200)
        res->status = p->status;
    free(p);
    free(head);
}

void httpc_exchange(const struct url_target *t, const struct httpc_request *req,
                    const struct httpc_sink *sink, void (*on_connect)(void *ctx, int local_port),
                    struct httpc_result *res)
{
    exchange(t, req, sink, on_connect, NULL, NULL, res);
}

struct collect {
    char *buf;
    size_t len, cap, max;
    bool over;
};

static void collect_body(void *ctx, const char *data, size_t len, uint64_t raw_end)
{
    struct collect *c = ctx;
    if (c->over)
        return;
    if (len > c->max - c->len) {
        c->over = true;
        return;
    }
    if (c->len + len + 1 > c->cap) {
        size_t cap = c->cap ? c->cap : 4096;
        while (cap < c->len + len + 1)
            cap *= 2;
        char *nb = realloc(c->buf, cap);
        if (!nb) {
            c->over = true;
            return;
        }
        c->buf = nb;
        c->cap = cap;
    }
    memcpy(c->buf + c->len, data, len);
    c->len += len;
}

void httpc_fetch(const struct url_target *t, const struct httpc_request *req, size_t max_body,
                 char **body, struct httpc_result *res)
{
    struct collect c       = {.max = max_body};
    struct httpc_sink sink = {.ctx = &c, .on_body = collect_body};
    char why[64];
    snprintf(why, sizeof why, "the response body is longer than %zu bytes", max_body);
    exchange(t, req, &sink, NULL, &c.over, why, res);
    if (res->outcome == HTTPC_OK && c.over)
        result_fail(res, HTTPC_PROTOCOL, "%s: %s", t->hostport, why);
    if (res->outcome != HTTPC_OK) {
        free(c.buf);
        *body = NULL;
        return;
    }
    if (!c.buf)
        c.buf = malloc(1);
    if (!c.buf) {
        result_fail(res, HTTPC_CONNECTION, "out of memory");
        *body = NULL;
        return;
    }
    c.buf[c.len] = 0;
    *body        = c.buf;
}
