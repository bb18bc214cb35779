/*
 * stopmatch.c: stop strings over a stream of token pieces (see stopmatch.h).
 *
 * Each feed appends the piece to the pending text and looks for the earliest
 * whole stop string in it; the pending text is short (a held-back tail plus
 * one piece), so a plain search per stop string is cheapest. Without a match,
 * the release point is the earliest suffix that is a proper prefix of some
 * stop string, moved back over an unfinished UTF-8 sequence.
 */
#include <stdlib.h>
#include <string.h>

#include "sched/stopmatch.h"
#include "util/utf8.h"

void stopmatch_init(struct stopmatch *m)
{
    memset(m, 0, sizeof *m);
    m->hit = -1;
}

void stopmatch_free(struct stopmatch *m)
{
    free(m->buf);
    memset(m, 0, sizeof *m);
    m->hit = -1;
}

void stopmatch_reset(struct stopmatch *m, char *const *stop, int32_t n_stop)
{
    m->stop         = stop;
    m->n_stop       = n_stop > 0 ? n_stop : 0;
    m->max_stop_len = 0;
    m->len          = 0;
    m->sent         = 0;
    m->hit          = -1;
    for (int32_t i = 0; i < m->n_stop; i++) {
        size_t l = m->stop[i] ? strlen(m->stop[i]) : 0;
        if (l > m->max_stop_len)
            m->max_stop_len = l;
    }
}

size_t stopmatch_utf8_tail(const char *s, size_t len)
{
    return utf8_tail_len(s, len);
}

/* Position of the earliest whole stop string in buf[0..len), or len if none; *which: its index. */
static size_t first_stop(const struct stopmatch *m, int32_t *which)
{
    size_t best = m->len;
    *which      = -1;
    for (int32_t i = 0; i < m->n_stop; i++) {
        const char *s = m->stop[i];
        size_t sl     = s ? strlen(s) : 0;
        if (sl == 0 || sl > m->len)
            continue;
        const char *p = memmem(m->buf, m->len, s, sl);
        if (p && (size_t)(p - m->buf) < best) {
            best   = (size_t)(p - m->buf);
            *which = i;
        }
    }
    return best;
}

/* Start of the earliest suffix of buf[0..len) that a stop string begins with, or len. */
static size_t first_partial(const struct stopmatch *m)
{
    if (m->max_stop_len == 0)
        return m->len;
    size_t i = m->len >= m->max_stop_len ? m->len - m->max_stop_len + 1 : 0;
    for (; i < m->len; i++) {
        size_t tl = m->len - i;
        for (int32_t k = 0; k < m->n_stop; k++) {
            const char *s = m->stop[k];
            if (s && strlen(s) > tl && memcmp(s, m->buf + i, tl) == 0)
                return i;
        }
    }
    return m->len;
}

enum stopmatch_result stopmatch_feed(struct stopmatch *m, const char *piece, size_t len,
                                     const char **out, size_t *out_len)
{
    if (m->sent > 0) {
        memmove(m->buf, m->buf + m->sent, m->len - m->sent);
        m->len -= m->sent;
        m->sent = 0;
    }
    *out     = m->buf ? m->buf : "";
    *out_len = 0;
    if (m->len + len > m->cap) {
        size_t cap = m->cap ? m->cap : 64;
        while (cap < m->len + len)
            cap *= 2;
        char *b = realloc(m->buf, cap);
        if (!b)
            return STOPMATCH_ENOMEM;
        m->buf = b;
        m->cap = cap;
        *out   = b;
    }
    if (len > 0)
        memcpy(m->buf + m->len, piece, len);
    m->len += len;

    int32_t which;
    size_t hit = first_stop(m, &which);
    if (hit < m->len) {
        m->hit = which;
        m->len = m->sent = hit; /* the stop string and what follows are dropped */
        *out_len         = hit;
        return STOPMATCH_HIT;
    }
    size_t h = first_partial(m);
    h -= utf8_tail_len(m->buf, h);
    m->sent  = h;
    *out_len = h;
    return STOPMATCH_MORE;
}

void stopmatch_flush(struct stopmatch *m, const char **out, size_t *out_len)
{
    *out     = m->buf ? m->buf + m->sent : "";
    *out_len = m->len - m->sent;
    m->sent  = m->len;
}
