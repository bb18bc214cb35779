/*
 * bodylimit.c: a JSON 413 for a request body of any size, given before
 * evhttp reads the request (see bodylimit.h).
 *
 * The framing is followed only as far as needed to find each request's body
 * and its end: the head's request line, Content-Length and Transfer-Encoding,
 * then Content-Length bytes, or the chunks up to the last one and its
 * trailer. Framing it cannot follow (a chunk-size line that is not hex, an
 * over-long chunk line, a broken Content-Length) goes to evhttp as it is
 * from then on: evhttp answers such a request itself, within its own body
 * limit (twice --max-body), so memory stays bounded either way.
 */
#include "net/bodylimit.h"

#include <ctype.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "net/errbody.h"

/* ------------------------------------------------------- the framing --- */

static void head_reset(struct bodylimit *b)
{
    b->state      = BL_HEAD;
    b->head_bytes = 0;
    b->first_line = true;
    b->chunked = b->has_length = b->has_te = b->header_seen = false;
    b->length                                               = 0;
    b->path[0]                                              = 0;
}

void bodylimit_init(struct bodylimit *b, size_t max_body, size_t max_head)
{
    memset(b, 0, sizeof *b);
    b->max_body = max_body;
    b->max_head = max_head;
    head_reset(b);
}

static bool refuse(struct bodylimit *b, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bool refuse(struct bodylimit *b, int status, const char *fmt, ...)
{
    b->state  = BL_REFUSED;
    b->status = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->reason, sizeof b->reason, fmt, ap);
    va_end(ap);
    return false;
}

/* The value of header line (len bytes, no CR/LF) when its name is name, else NULL. */
static const char *header_value(const char *line, size_t len, const char *name, size_t *vlen)
{
    size_t n = strlen(name);
    if (len <= n || strncasecmp(line, name, n) || line[n] != ':')
        return NULL;
    const char *v = line + n + 1, *end = line + len;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    *vlen = (size_t)(end - v);
    return v;
}

/* evhttp's methods (2.1): it answers any other with its own page */
static bool known_method(const char *m, size_t n)
{
    static const char *const known[] = {"GET",     "POST",  "HEAD",    "PUT",  "DELETE",
                                        "OPTIONS", "TRACE", "CONNECT", "PATCH"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strlen(known[i]) == n && !memcmp(known[i], m, n))
            return true;
    return false;
}

/* The start of a request line before its end has come: junk is refused at
 * once rather than at the head limit (a method is a few capitals, then a space). */
static bool line_start(struct bodylimit *b)
{
    if (b->line_len == 1 && b->line[0] == '\r')
        return true;
    for (size_t i = 0; i < b->line_len && b->line[i] != ' '; i++)
        if (i >= 16 || b->line[i] < 'A' || b->line[i] > 'Z')
            return refuse(b, 400, "The request line does not start with an HTTP method.");
    return true;
}

/* "METHOD SP target SP HTTP/1.x", the target kept as b->path (up to its query). The
 * method is judged before the path is kept, as line_start judges it, so the verdict and
 * the path do not depend on where the bytes were split. */
static bool request_line(struct bodylimit *b, const char *line, size_t len, bool whole)
{
    const char *end = line + len;
    const char *sp  = memchr(line, ' ', len);
    if (!sp || !known_method(line, (size_t)(sp - line)))
        return refuse(b, 400, "The request line does not start with an HTTP method.");
    const char *t  = sp + 1;
    const char *te = t;
    while (te < end && *te != ' ' && *te != '?')
        te++;
    size_t n = (size_t)(te - t) < sizeof b->path - 1 ? (size_t)(te - t) : sizeof b->path - 1;
    memcpy(b->path, t, n);
    b->path[n] = 0;
    if (!whole)
        return refuse(b, 400, "The request line is longer than %d bytes.", BODYLIMIT_LINE);
    const char *sp2 = memchr(t, ' ', (size_t)(end - t));
    if (!sp2 || sp2 == t)
        return refuse(b, 400, "The request line is not 'METHOD /path HTTP/1.1'.");
    for (const char *c = t; c < sp2; c++)
        if ((unsigned char)*c < 0x21 || *c == 0x7f)
            return refuse(b, 400, "The request target has a control character.");
    /* a tunnel or an echo is nothing hearth gives; evhttp leaves a CONNECT open after it */
    if ((size_t)(sp - line) == 7 && !memcmp(line, "CONNECT", 7))
        return refuse(b, 405, "CONNECT is not allowed: this is not a proxy.");
    if ((size_t)(sp - line) == 5 && !memcmp(line, "TRACE", 5))
        return refuse(b, 405, "TRACE is not allowed.");
    const char *v = sp2 + 1;
    size_t vn     = (size_t)(end - v);
    if (vn == 8 && (!memcmp(v, "HTTP/1.1", 8) || !memcmp(v, "HTTP/1.0", 8)))
        return true;
    if (vn == 8 && !memcmp(v, "HTTP/", 5) && isdigit((unsigned char)v[5]) && v[6] == '.' &&
        isdigit((unsigned char)v[7]))
        return refuse(b, 505, "HTTP/%c.%c is not supported; this server speaks HTTP/1.1.", v[5],
                      v[7]);
    return refuse(b, 400, "The request line's protocol is not HTTP/1.1.");
}

/* A head line, its CR/LF removed; whole says it was not cut at BODYLIMIT_LINE. */
static bool head_line(struct bodylimit *b, const char *line, size_t len, bool whole)
{
    if (b->first_line) {
        if (len == 0)
            return true; /* blank lines before a request line are allowed */
        b->first_line = false;
        return request_line(b, line, len, whole);
    }
    if (len == 0) { /* the end of the head: where its body is, and whether it fits */
        b->n_heads++;
        if (b->chunked && b->has_length)
            return refuse(b, 400, "The request has both Transfer-Encoding and Content-Length.");
        if (b->chunked) {
            b->state      = BL_CHUNK_SIZE;
            b->body_total = 0;
        } else if (b->has_length && b->length > b->max_body) {
            return refuse(b, 413,
                          "The request body is %llu bytes; this server takes at most %zu "
                          "(--max-body).",
                          (unsigned long long)b->length, b->max_body);
        } else if (b->has_length && b->length > 0) {
            b->state = BL_BODY;
            b->left  = b->length;
        } else {
            head_reset(b);
        }
        return true;
    }
    if (line[0] == ' ' || line[0] == '\t') { /* a folded line continues the header before it */
        if (!b->header_seen)
            return refuse(b, 400, "The request's first header line is a continuation.");
        return true;
    }
    if (!memchr(line, ':', len))
        return refuse(b, 400, "A request header line has no ':'.");
    b->header_seen = true;
    size_t vlen;
    const char *v;
    if ((v = header_value(line, len, "Content-Length", &vlen))) {
        uint64_t x  = 0;
        bool digits = whole && vlen > 0;
        for (size_t i = 0; digits && i < vlen; i++)
            digits = isdigit((unsigned char)v[i]) != 0;
        if (!digits)
            return refuse(b, 400, "The request's Content-Length is not a number of bytes.");
        size_t i = 0;
        while (i < vlen && v[i] == '0')
            i++;
        if (vlen - i > 19) /* more than 2^63: evhttp would read it as its largest number */
            return refuse(b, 413,
                          "The request body is more than %llu bytes; this server takes at most "
                          "%zu (--max-body).",
                          (unsigned long long)b->max_body, b->max_body);
        for (; i < vlen; i++)
            x = x * 10 + (uint64_t)(v[i] - '0');
        if (b->has_length && x != b->length)
            return refuse(b, 400, "The request has two Content-Lengths that disagree.");
        b->has_length = true;
        b->length     = x;
    } else if ((v = header_value(line, len, "Transfer-Encoding", &vlen))) {
        /* evhttp frames a body by chunks only when the whole value is "chunked", and by
         * Content-Length otherwise: anything else would be read two ways */
        if (b->has_te || vlen != 7 || strncasecmp(v, "chunked", 7))
            return refuse(b, 400, "Transfer-Encoding must be 'chunked' alone.");
        b->has_te = b->chunked = true;
    }
    return true;
}

/* A chunk-size, chunk-end or trailer line. */
static bool chunk_line(struct bodylimit *b, const char *line, size_t len, bool whole)
{
    if (!whole)
        return refuse(b, 400, "A chunk line is longer than %d bytes.", BODYLIMIT_LINE);
    if (b->state == BL_CHUNK_END) {
        if (len != 0)
            return refuse(b, 400, "A chunk's data runs past its size.");
        b->state = BL_CHUNK_SIZE;
        return true;
    }
    if (b->state == BL_TRAILER) {
        if (len == 0)
            head_reset(b);
        else if (!memchr(line, ':', len))
            return refuse(b, 400, "A trailer line has no ':'.");
        return true;
    }
    size_t i = 0, digits = 0;
    uint64_t size = 0;
    for (; i < len && isxdigit((unsigned char)line[i]); i++) {
        if (size == 0 && line[i] == '0')
            continue;
        if (++digits > 15) /* past 2^60: larger than any --max-body */
            return refuse(b, 413,
                          "The request body is more than %llu bytes; this server takes at most "
                          "%zu (--max-body).",
                          (unsigned long long)b->max_body, b->max_body);
        size = size * 16 + (uint64_t)(isdigit((unsigned char)line[i])
                                          ? line[i] - '0'
                                          : (tolower((unsigned char)line[i]) - 'a' + 10));
    }
    /* evhttp takes "SIZE" or "SIZE ..." and nothing else (no ";extension") */
    if (i == 0 || (i < len && line[i] != ' '))
        return refuse(b, 400, "A chunk size is not a hexadecimal number.");
    b->body_total += size;
    if (b->body_total > b->max_body)
        return refuse(b, 413,
                      "The request body is more than %llu bytes; this server takes at most %zu "
                      "(--max-body).",
                      (unsigned long long)b->max_body, b->max_body);
    if (size == 0) {
        b->state = BL_TRAILER;
    } else {
        b->state = BL_CHUNK_DATA;
        b->left  = size;
    }
    return true;
}

bool bodylimit_feed(struct bodylimit *b, const char *data, size_t len)
{
    size_t at = 0;
    while (at < len) {
        switch (b->state) {
        case BL_REFUSED:
            return false;
        case BL_BODY:
        case BL_CHUNK_DATA: {
            size_t n = len - at < b->left ? len - at : (size_t)b->left;
            at += n;
            b->left -= n;
            if (!b->left)
                b->state = b->state == BL_BODY ? BL_HEAD : BL_CHUNK_END;
            if (b->state == BL_HEAD)
                head_reset(b);
            break;
        }
        default: { /* a line: kept up to BODYLIMIT_LINE bytes, counted whole */
            const char *nl = memchr(data + at, '\n', len - at);
            size_t n       = nl ? (size_t)(nl - (data + at)) : len - at;
            size_t keep    = n < sizeof b->line - b->line_len ? n : sizeof b->line - b->line_len;
            memcpy(b->line + b->line_len, data + at, keep);
            bool whole = keep == n;
            b->line_len += keep;
            at += n + (nl ? 1 : 0);
            if (b->state == BL_HEAD && b->first_line && !line_start(b))
                return false;
            if (b->state == BL_HEAD) {
                b->head_bytes += n + (nl ? 1 : 0);
                if (b->head_bytes > b->max_head)
                    return refuse(b, 413,
                                  "The request head is more than %zu bytes; this server "
                                  "takes at most %zu.",
                                  b->max_head, b->max_head);
            }
            if (!nl) {
                if (!whole && b->state != BL_HEAD)
                    return refuse(b, 400, "A chunk line is longer than %d bytes.", BODYLIMIT_LINE);
                break;
            }
            size_t ll = b->line_len;
            if (ll && b->line[ll - 1] == '\r')
                ll--;
            bool line_whole = b->line_len < sizeof b->line;
            b->line_len     = 0;
            bool ok         = b->state == BL_HEAD ? head_line(b, b->line, ll, line_whole)
                                                  : chunk_line(b, b->line, ll, line_whole);
            if (!ok)
                return false;
            break;
        }
        }
    }
    return b->state != BL_REFUSED;
}

/* ------------------------------------------------------ libevent glue --- */

struct slot {
    struct bufferevent *owner; /* the connection this state is for; NULL: free */
    struct bodylimit b;
    bool in_flight;            /* evhttp has its request and the reply is not all sent */
    bool answer_due;           /* refused while in flight: answered when that reply has gone */
    struct timeval head_began; /* the first byte of the head being read; 0: none */
    enum { T_HEAD, T_IO, T_NONE } read_timeout; /* the one set on it */
    bufferevent_event_cb evhttp_event; /* evhttp's event callback, which ours hands on to */
};

static struct table {
    size_t max_body, max_head;
    bodylimit_refused_fn refused;
    void *user;
    bool timed;              /* bodylimit_timeouts was called */
    struct timeval head, io; /* its timeouts */
    double head_s, io_s;     /* the same in seconds */
    struct slot *by_fd;      /* [n] */
    size_t n;
} * table;

static struct slot *slot_of(evutil_socket_t fd, struct bufferevent *bev)
{
    if ((size_t)fd >= table->n) {
        size_t n       = (size_t)fd + 64;
        struct slot *s = realloc(table->by_fd, n * sizeof *s);
        if (!s)
            return NULL;
        memset(s + table->n, 0, (n - table->n) * sizeof *s);
        table->by_fd = s;
        table->n     = n;
    }
    struct slot *s = &table->by_fd[fd];
    if (s->owner != bev) { /* a new connection on this descriptor */
        memset(s, 0, sizeof *s);
        s->owner        = bev;
        s->read_timeout = T_HEAD; /* evhttp starts it on the head's (bodylimit_timeouts) */
        bodylimit_init(&s->b, table->max_body, table->max_head);
    }
    return s;
}

static const char *status_text(int status)
{
    switch (status) {
    case 400:
        return "Bad Request";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 413:
        return "Payload Too Large";
    case 505:
        return "HTTP Version Not Supported";
    default:
        return "Error";
    }
}

/* The refusal, written straight to the socket (evhttp is still reading this request), then
 * the socket's sending side shut so the client sees the end; its input is drained until it
 * closes or the head timeout closes it. */
static void answer(evutil_socket_t fd, struct bufferevent *bev, const struct bodylimit *b)
{
    struct oai_error e;
    oai_fail(&e, b->status, "invalid_request_error",
             b->status == 413   ? "request_too_large"
             : b->status == 408 ? "request_timeout"
             : b->status == 405 ? "method_not_allowed"
                                : "invalid_request",
             NULL, "%s", b->reason);
    char *json = table->refused ? table->refused(b->path, &e, table->user) : NULL;
    if (evbuffer_get_length(bufferevent_get_output(bev)) > 0) {
        free(json);
        return; /* an earlier answer is still going out: the connection just closes */
    }
    if (!json)
        json = oai_error_json(&e);
    char head[192];
    int hn            = snprintf(head, sizeof head,
                                 "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
                                            "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                                 b->status, status_text(b->status), json ? strlen(json) : 0);
    struct iovec v[2] = {{head, (size_t)hn}, {json, json ? strlen(json) : 0}};
    struct msghdr m   = {.msg_iov = v, .msg_iovlen = 2};
    (void)!sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    shutdown(fd, SHUT_WR);
    free(json);
}

/* Which read timeout the connection is on: none while a reply is due (a reply being generated
 * is not a silence; the write timeout still bounds a client that does not read it), the
 * head's from its opening and from the first byte of each later head, the io one otherwise.
 * A refused connection is on the head's, so a client that never closes is closed by it. */
static void pick_timeout(struct slot *s, struct bufferevent *bev)
{
    int want = s->b.state == BL_REFUSED                                          ? T_HEAD
               : s->in_flight                                                    ? T_NONE
               : s->b.state == BL_HEAD && (s->b.head_bytes > 0 || !s->b.n_heads) ? T_HEAD
                                                                                 : T_IO;
    if (!table->timed || (int)s->read_timeout == want)
        return;
    s->read_timeout = want;
    bufferevent_set_timeouts(bev,
                             want == T_HEAD ? &table->head
                             : want == T_IO ? &table->io
                                            : NULL,
                             &table->io);
}

/* The connection's slot, or NULL when bodylimit has not seen it. */
static struct slot *slot_of_bev(struct bufferevent *bev)
{
    evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
    if (!table || fd < 0 || (size_t)fd >= table->n || table->by_fd[fd].owner != bev)
        return NULL;
    return &table->by_fd[fd];
}

static void on_reply_sent(struct evhttp_request *req, void *arg)
{
    (void)arg;
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    struct bufferevent *bev         = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
    struct slot *s                  = slot_of_bev(bev);
    if (s) {
        s->in_flight = false;
        if (s->answer_due) {
            s->answer_due = false;
            answer(bufferevent_getfd(bev), bev, &s->b);
        }
        pick_timeout(s, bev);
    }
}

void bodylimit_request(struct evhttp_request *req)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    struct bufferevent *bev         = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
    struct slot *s                  = slot_of_bev(bev);
    if (!s)
        return;
    s->in_flight = true;
    pick_timeout(s, bev);
    evhttp_request_set_on_complete_cb(req, on_reply_sent, NULL);
}

/* evhttp's event callback, seen first: a head cut off by its timeout is told so (408). */
static void on_event(struct bufferevent *bev, short what, void *ctx)
{
    evutil_socket_t fd = bufferevent_getfd(bev);
    struct slot *s     = slot_of_bev(bev);
    if (!s)
        return; /* not reached: on_input installed this for a slot it had */
    bufferevent_event_cb next = s->evhttp_event;
    const bool started        = s->b.state != BL_HEAD || s->b.head_bytes > 0;
    if ((what & BEV_EVENT_TIMEOUT) && (what & BEV_EVENT_READING) && !s->in_flight &&
        s->b.state != BL_REFUSED && started) {
        const bool head = s->b.state == BL_HEAD;
        s->b.state      = BL_REFUSED;
        s->b.status     = 408;
        snprintf(s->b.reason, sizeof s->b.reason, "The request %s stopped coming for %g s.",
                 head ? "head" : "body", head ? table->head_s : table->io_s);
        answer(fd, bev, &s->b);
    }
    next(bev, what, ctx);
}

/* evhttp sets its callbacks anew at each stage of a connection: ours goes back in front. */
static void hook_events(struct slot *s, struct bufferevent *bev)
{
    bufferevent_data_cb rd, wr;
    bufferevent_event_cb ev;
    void *ctx;
    bufferevent_getcb(bev, &rd, &wr, &ev, &ctx);
    if (ev && ev != on_event) {
        s->evhttp_event = ev;
        bufferevent_setcb(bev, rd, wr, on_event, ctx);
    }
}

/* A head must be whole within the head timeout of its first byte, not only free of silences
 * that long: a client trickling a byte at a time would otherwise hold the connection for
 * 64 KiB of such silences. False (the slot refused with 408) when this head is late. */
static bool head_in_time(struct slot *s, struct bufferevent *bev)
{
    if (s->b.state != BL_HEAD || s->b.head_bytes == 0) {
        s->head_began = (struct timeval){0};
        return true;
    }
    struct timeval now;
    event_base_gettimeofday_cached(bufferevent_get_base(bev), &now);
    if (!s->head_began.tv_sec && !s->head_began.tv_usec) {
        s->head_began = now;
        return true;
    }
    double took = (double)(now.tv_sec - s->head_began.tv_sec) +
                  (double)(now.tv_usec - s->head_began.tv_usec) / 1e6;
    if (took <= table->head_s)
        return true;
    s->b.state  = BL_REFUSED;
    s->b.status = 408;
    snprintf(s->b.reason, sizeof s->b.reason, "The request head took more than %g s.",
             table->head_s);
    return false;
}

static void on_input(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
    struct bufferevent *bev = arg;
    size_t len              = evbuffer_get_length(buf);
    if (!table || info->n_added == 0 || info->n_added > len)
        return;
    evutil_socket_t fd = bufferevent_getfd(bev);
    struct slot *s     = fd >= 0 ? slot_of(fd, bev) : NULL;
    if (!s)
        return; /* out of memory: evhttp's own limit still holds */
    if (table->timed)
        hook_events(s, bev);
    if (s->b.state == BL_REFUSED) {
        evbuffer_drain(buf, len);
        return;
    }
    struct evbuffer_ptr p;
    if (evbuffer_ptr_set(buf, &p, len - info->n_added, EVBUFFER_PTR_SET) != 0)
        return;
    size_t left = info->n_added;
    bool ok     = true;
    while (ok && left) {
        struct evbuffer_iovec v[8];
        int n = evbuffer_peek(buf, (ev_ssize_t)left, &p, v, 8);
        if (n <= 0)
            break;
        for (int i = 0; ok && i < n && i < 8 && left; i++) {
            size_t k = v[i].iov_len < left ? v[i].iov_len : left;
            ok       = bodylimit_feed(&s->b, v[i].iov_base, k);
            left -= k;
            evbuffer_ptr_set(buf, &p, k, EVBUFFER_PTR_ADD);
        }
    }
    if (ok && table->timed && !head_in_time(s, bev))
        ok = false;
    if (!ok) {
        evbuffer_drain(buf, evbuffer_get_length(buf));
        if (s->in_flight)
            s->answer_due = true; /* not into the middle of the reply going out */
        else
            answer(fd, bev, &s->b);
    }
    pick_timeout(s, bev);
}

static struct bufferevent *new_connection(struct event_base *base, void *arg)
{
    struct bufferevent *bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
    if (!bev)
        return NULL;
    /* a freed connection's bufferevent may come back at the same address */
    for (size_t i = 0; i < table->n; i++)
        if (table->by_fd[i].owner == bev)
            table->by_fd[i].owner = NULL;
    evbuffer_add_cb(bufferevent_get_input(bev), on_input, bev);
    return bev;
}

bool bodylimit_install(struct evhttp *http, size_t max_body, size_t max_head,
                       bodylimit_refused_fn refused, void *user)
{
    bodylimit_uninstall();
    if (!(table = calloc(1, sizeof *table)))
        return false;
    table->max_body = max_body;
    table->max_head = max_head;
    table->refused  = refused;
    table->user     = user;
    evhttp_set_bevcb(http, new_connection, NULL);
    return true;
}

static struct timeval tv_of(double s)
{
    struct timeval tv = {.tv_sec  = (time_t)s,
                         .tv_usec = (suseconds_t)((s - (double)(time_t)s) * 1e6)};
    return tv;
}

void bodylimit_timeouts(struct evhttp *http, double head_s, double io_s)
{
    if (!table)
        return;
    table->timed  = true;
    table->head_s = head_s < io_s ? head_s : io_s;
    table->io_s   = io_s;
    table->head   = tv_of(table->head_s);
    table->io     = tv_of(io_s);
    /* a connection starts on the head's: evhttp sets its timeout on each one it accepts */
    evhttp_set_timeout_tv(http, &table->head);
}

void bodylimit_uninstall(void)
{
    if (!table)
        return;
    free(table->by_fd);
    free(table);
    table = NULL;
}
