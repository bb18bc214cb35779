/*
 * sse.c: the incremental server-sent-events parser (sse.h). Bytes are
 * consumed one line at a time into p->line; a line is acted on at its LF or
 * CR, so an event is dispatched the moment its blank line's first line-end
 * byte arrives, whatever the split. The LF of a CRLF pair is then swallowed
 * (p->last_cr), even when it arrives in the next piece.
 */
#include "bench/sse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A line longer than this cannot be valid: its data alone would pass SSE_MAX_EVENT. */
#define LINE_MAX_LEN ((size_t)SSE_MAX_EVENT + 16)

void sse_init(struct sse_parser *p, void *ctx,
              bool (*on_event)(void *, const char *, const char *, size_t, uint64_t))
{
    memset(p, 0, sizeof *p);
    p->ctx      = ctx;
    p->on_event = on_event;
}

void sse_free(struct sse_parser *p)
{
    free(p->line);
    free(p->data);
    p->line     = NULL;
    p->data     = NULL;
    p->line_cap = p->data_cap = 0;
    p->line_len = p->data_len = 0;
}

/* Grows *buf to hold need bytes; false when out of memory. */
static bool reserve(char **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return true;
    size_t c = *cap ? *cap : 256;
    while (c < need)
        c *= 2;
    char *nb = realloc(*buf, c);
    if (!nb)
        return false;
    *buf = nb;
    *cap = c;
    return true;
}

static bool fail(struct sse_parser *p, const char *msg)
{
    snprintf(p->err, sizeof p->err, "%s", msg);
    return false;
}

/* The line in p->line[0..line_len) has ended at byte offset end (exclusive). */
static bool line_done(struct sse_parser *p, uint64_t end)
{
    const char *s = p->line;
    size_t n      = p->line_len;
    p->line_len   = 0;
    /* A byte order mark opening the stream is not part of its first line (WHATWG). */
    if (end == n + 1 && n >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0) {
        s += 3;
        n -= 3;
    }
    if (n == 0) {
        bool go = true;
        if (p->has_data) {
            if (!reserve(&p->data, &p->data_cap, p->data_len + 1))
                return fail(p, "sse: out of memory");
            p->data[p->data_len] = 0;
            if (p->on_event)
                go = p->on_event(p->ctx, p->event, p->data, p->data_len, end);
        }
        p->data_len = 0;
        p->has_data = false;
        p->event[0] = 0;
        if (!go)
            p->err[0] = 0;
        return go;
    }
    if (s[0] == ':')
        return true;
    const char *colon = memchr(s, ':', n);
    size_t flen       = colon ? (size_t)(colon - s) : n;
    const char *v     = colon ? colon + 1 : s + n;
    size_t vlen       = (size_t)(s + n - v);
    if (vlen > 0 && *v == ' ') {
        v++;
        vlen--;
    }
    if (flen == 4 && memcmp(s, "data", 4) == 0) {
        size_t sep = p->has_data ? 1 : 0;
        if (p->data_len + sep + vlen > SSE_MAX_EVENT)
            return fail(p, "sse: an event's data is longer than 4 MiB");
        if (!reserve(&p->data, &p->data_cap, p->data_len + sep + vlen + 1))
            return fail(p, "sse: out of memory");
        if (sep)
            p->data[p->data_len++] = '\n';
        memcpy(p->data + p->data_len, v, vlen);
        p->data_len += vlen;
        p->has_data = true;
    } else if (flen == 5 && memcmp(s, "event", 5) == 0) {
        size_t k = vlen < sizeof p->event - 1 ? vlen : sizeof p->event - 1;
        memcpy(p->event, v, k);
        p->event[k] = 0;
    }
    /* id, retry and unknown fields mean nothing to a bench. */
    return true;
}

bool sse_feed(struct sse_parser *p, const char *data, size_t len)
{
    if (p->err[0])
        return false;
    size_t i = 0;
    while (i < len) {
        if (p->last_cr) {
            p->last_cr = false;
            if (data[i] == '\n') {
                i++;
                p->fed++;
                continue;
            }
        }
        /* Copy up to the next line end in one go. */
        size_t j = i;
        while (j < len && data[j] != '\n' && data[j] != '\r')
            j++;
        if (j > i) {
            if (p->line_len + (j - i) > LINE_MAX_LEN)
                return fail(p, "sse: a line is longer than 4 MiB");
            if (!reserve(&p->line, &p->line_cap, p->line_len + (j - i)))
                return fail(p, "sse: out of memory");
            memcpy(p->line + p->line_len, data + i, j - i);
            p->line_len += j - i;
            p->fed += j - i;
            i = j;
        }
        if (i == len)
            break;
        p->last_cr = data[i] == '\r';
        i++;
        p->fed++;
        if (!line_done(p, p->fed))
            return false;
    }
    return true;
}
