/*
 * strbuf.h: a growable string buffer (after redis's sds and lwan's strbuf).
 *
 * A zeroed struct strbuf is an empty buffer. Appends never fail loudly:
 * when an allocation fails, oom is set and every later append is a no-op,
 * so a builder appends freely and asks once, at the end, whether the text
 * is whole. The text is always NUL-terminated after the first append (an
 * empty append included), which lets a caller hand b.s to C string code.
 * Not thread-safe; one owner at a time.
 */
#ifndef HEARTH_STRBUF_H
#define HEARTH_STRBUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

struct strbuf {
    char *s;    /* malloc'd, NUL-terminated at len; NULL before the first append */
    size_t len; /* bytes of text, the NUL not counted */
    size_t cap; /* bytes allocated at s, >= len + 1 once s is set */
    bool oom;   /* an allocation failed (or a format could not be expanded): text incomplete */
};

/* Appends s[0..n) (may hold NULs); n == 0 still makes s non-NULL. */
void strbuf_addn(struct strbuf *b, const char *s, size_t n);

/* Appends the C string s. */
void strbuf_add(struct strbuf *b, const char *s);

/* Appends printf(fmt, ...), of any length. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void strbuf_printf(struct strbuf *b, const char *fmt, ...);
void strbuf_vprintf(struct strbuf *b, const char *fmt, va_list ap);

/* Empties b and clears oom, keeping the allocation for the next text. */
void strbuf_reset(struct strbuf *b);

/*
 * Hands over the text: a malloc'd NUL-terminated string the caller frees
 * ("" when nothing was appended), its length in *len when len is non-NULL.
 * NULL when b->oom is set or that "" cannot be allocated. b is left empty
 * and owns nothing either way.
 */
char *strbuf_take(struct strbuf *b, size_t *len);

/* Frees the text and zeroes b; b may be reused. */
void strbuf_free(struct strbuf *b);

#endif
