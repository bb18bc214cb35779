/*
 * strbuf.c: the growable string buffer (strbuf.h). Capacity doubles from
 * 64 bytes, so n appends cost O(total length) copies; a request that would
 * overflow size_t is an allocation failure like any other.
 */
#include "util/strbuf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Room for n more bytes and the NUL; false (oom set) when it cannot be had. */
static bool reserve(struct strbuf *b, size_t n)
{
    if (b->oom)
        return false;
    if (n > SIZE_MAX - 1 - b->len) {
        b->oom = true;
        return false;
    }
    size_t need = b->len + n + 1;
    if (need <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    char *s = realloc(b->s, cap);
    if (!s) {
        b->oom = true;
        return false;
    }
    b->s   = s;
    b->cap = cap;
    return true;
}

void strbuf_addn(struct strbuf *b, const char *s, size_t n)
{
    if (!reserve(b, n))
        return;
    if (n)
        memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void strbuf_add(struct strbuf *b, const char *s)
{
    strbuf_addn(b, s, strlen(s));
}

void strbuf_vprintf(struct strbuf *b, const char *fmt, va_list ap)
{
    if (b->oom)
        return;
    /* Format straight into the spare room; only a text longer than it is formatted twice. */
    va_list again;
    va_copy(again, ap);
    size_t room = b->s ? b->cap - b->len : 0;
    int n       = vsnprintf(room ? b->s + b->len : NULL, room, fmt, ap);
    if (n < 0) {
        b->oom = true;
    } else if ((size_t)n < room) {
        b->len += (size_t)n;
    } else if (reserve(b, (size_t)n)) {
        vsnprintf(b->s + b->len, (size_t)n + 1, fmt, again);
        b->len += (size_t)n;
    }
    /* a failed first try may have written past len: the text must still end there */
    if (b->s)
        b->s[b->len] = '\0';
    va_end(again);
}

void strbuf_printf(struct strbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    strbuf_vprintf(b, fmt, ap);
    va_end(ap);
}

void strbuf_reset(struct strbuf *b)
{
    b->len = 0;
    b->oom = false;
    if (b->s)
        b->s[0] = '\0';
}

char *strbuf_take(struct strbuf *b, size_t *len)
{
    char *s  = b->s;
    size_t n = b->len;
    if (b->oom) {
        free(s);
        s = NULL;
        n = 0;
    } else if (!s) {
        s = calloc(1, 1);
    }
    *b = (struct strbuf){0};
    if (len)
        *len = s ? n : 0;
    return s;
}

void strbuf_free(struct strbuf *b)
{
    free(b->s);
    *b = (struct strbuf){0};
}
