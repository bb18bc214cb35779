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
#include "serve/bodylimit.h"

#include <ctype.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "serve/openai.h"

/* ------------------------------------------------------- the framing --- */

static void head_reset(struct bodylimit *b)
{
    b->state      = BL_HEAD;
    b->head_bytes = 0;
    b->first_line = true;
    b->chunked = b->has_length = b->bad_length = false;
    b->length                                  = 0;
    b->path[0]                                 = 0;
}

void bodylimit_init(struct bodylimit *b, size_t max_body, size_t max_head)
{
    memset(b, 0, sizeof *b);
    b->max_body = max_body;
    b->max_head = max_head;
    head_reset(b);
}

static bool refuse(struct bodylimit *b, const char *fmt, unsigned long long n, size_t limit)
{
    b->state = BL_REFUSED;
    snprintf(b->reason, sizeof b->reason, fmt, n, limit);
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

/* A head line, its CR/LF removed; whole says it was not cut at BODYLIMIT_LINE. */
static bool head_line(struct bodylimit *b, const char *line, size_t len, bool whole)
{
    if (b->first_line) {
        if (len == 0)
            return true; /* blank lines before a request line are allowed */
        b->first_line  = false;
        const char *sp = memchr(line, ' ', len);
        if (sp) {
            const char *t = sp + 1, *end = line + len, *te = t;
            while (te < end && *te != ' ' && *te != '?')
                te++;
            size_t n = (size_t)(te - t) < sizeof b->path - 1 ? (size_t)(te - t)
                                                               : sizeof b->path - 1;
            memcpy(b->path, t, n);
            b->path[n] = 0;
        }
        return true;
    }
    if (len == 0) { /* the end of the head: where its body is, and whether it fits */
        if (b->chunked) {
            b->state      = BL_CHUNK_SIZE;
            b->body_total = 0;
        } else if (b->bad_length) {
            b->state = BL_PASS;
        } else if (b->has_length && b->length > b->max_body) {
            return refuse(b, "The request body is %llu bytes; this server takes at most %zu "
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
    size_t vlen;
    const char *v;
    if ((v = header_value(line, len, "Content-Length", &vlen))) {
        uint64_t x = 0;
        bool ok    = whole && vlen > 0 && vlen <= 19;
        for (size_t i = 0; ok && i < vlen; i++) {
            ok = isdigit((unsigned char)v[i]) != 0;
            x  = x * 10 + (uint64_t)(v[i] - '0');
        }
        if (!ok || (b->has_length && x != b->length))
            b->bad_length = true;
        b->has_length = true;
        b->length     = x;
    } else if ((v = header_value(line, len, "Transfer-Encoding", &vlen))) {
        for (size_t i = 0; i + 7 <= vlen; i++)
            if (!strncasecmp(v + i, "chunked", 7))
                b->chunked = true;
    }
    return true;
}

/* A chunk-size, chunk-end or trailer line. */
static bool chunk_line(struct bodylimit *b, const char *line, size_t len, bool whole)
{
    if (!whole) {
        b->state = BL_PASS;
        return true;
    }
    if (b->state == BL_CHUNK_END) {
        b->state = len == 0 ? BL_CHUNK_SIZE : BL_PASS;
        return true;
    }
    if (b->state == BL_TRAILER) {
        if (len == 0)
            head_reset(b);
        return true;
    }
    uint64_t size = 0;
    size_t i      = 0;
    for (; i < len && isxdigit((unsigned char)line[i]) && size < ((uint64_t)1 << 58); i++)
        size = size * 16 + (uint64_t)(isdigit((unsigned char)line[i])
                                          ? line[i] - '0'
                                          : (tolower((unsigned char)line[i]) - 'a' + 10));
    if (i == 0 || (i < len && line[i] != ';' && line[i] != ' ' && line[i] != '\t')) {
        b->state = BL_PASS;
        return true;
    }
    b->body_total += size;
    if (b->body_total > b->max_body)
        return refuse(b, "The request body is more than %llu bytes; this server takes at most %zu "
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
        case BL_PASS:
            return true;
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
            if (b->state == BL_HEAD) {
                b->head_bytes += n + (nl ? 1 : 0);
                if (b->head_bytes > b->max_head)
                    return refuse(b, "The request head is more than %llu bytes; this server "
                                     "takes at most %zu.",
                                  (unsigned long long)b->max_head, b->max_head);
            }
            if (!nl) {
                if (!whole && b->state != BL_HEAD)
                    b->state = BL_PASS; /* a chunk line this long is not one */
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
};

static struct table {
    size_t max_body, max_head;
    bodylimit_refused_fn refused;
    void *user;
    struct slot *by_fd; /* [n] */
    size_t n;
} *table;

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
        s->owner = bev;
        bodylimit_init(&s->b, table->max_body, table->max_head);
    }
    return s;
}

/* The 413, written straight to the socket: evhttp is still reading this request. */
static void answer_413(evutil_socket_t fd, struct bufferevent *bev, const struct bodylimit *b)
{
    struct oai_error e;
    oai_fail(&e, 413, "invalid_request_error", "request_too_large", NULL, "%s", b->reason);
    char *json = table->refused ? table->refused(b->path, &e, table->user) : NULL;
    if (evbuffer_get_length(bufferevent_get_output(bev)) > 0) {
        free(json);
        return; /* an earlier answer is still going out: the connection just closes */
    }
    if (!json)
        json = oai_error_json(&e);
    char head[192];
    int hn = snprintf(head, sizeof head,
                      "HTTP/1.1 413 Payload Too Large\r\nContent-Type: application/json\r\n"
                      "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                      json ? strlen(json) : 0);
    struct iovec v[2] = {{head, (size_t)hn}, {json, json ? strlen(json) : 0}};
    struct msghdr m   = {.msg_iov = v, .msg_iovlen = 2};
    (void)!sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    free(json);
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
    if (!ok) {
        evbuffer_drain(buf, evbuffer_get_length(buf));
        answer_413(fd, bev, &s->b);
    }
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

void bodylimit_uninstall(void)
{
    if (!table)
        return;
    free(table->by_fd);
    free(table);
    table = NULL;
}
