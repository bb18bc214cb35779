/*
 * ngram.c: prompt lookup (ngram.h). A loop first: the last d tokens (d up to
 * n_max) equal the d before them, so the text is repeating with period d and
 * goes on with it; a generation that has fallen into a loop is the common
 * case, and there the latest occurrence predicts, where the longest match
 * would continue an older, longer run of the same tokens that ended
 * differently. Else one backward scan: for each earlier end position, the
 * length of the common suffix with the sequence's end, capped at n_max; the
 * first position (latest) reaching n_max wins at once, else the latest with
 * the longest match of at least n_min. O(NGRAM_SCAN * n_max) compares at
 * worst, about a millisecond at the cap, against a target forward of tens of
 * milliseconds.
 */
#include "spec/ngram.h"

/* out[0..k) = what follows tokens[0..n) when it continues from tokens[from] on, periodically. */
static int32_t copy_on(const hearth_token *tokens, int32_t n, int32_t from, int32_t k,
                       hearth_token *out)
{
    int32_t m = 0;
    for (int32_t p = from; m < k; p++)
        out[m++] = p < n ? tokens[p] : out[p - n];
    return m;
}

/* The shortest period d <= n_max the sequence's end has just completed (its last max(d, n_min)
 * tokens equal those d before them), or 0. */
static int32_t loop_period(const hearth_token *tokens, int32_t n, int32_t n_min, int32_t n_max)
{
    for (int32_t d = 1; d <= n_max; d++) {
        const int32_t len = d > n_min ? d : n_min;
        if (n - d - len < 0)
            return 0;
        int32_t j = 0;
        while (j < len && tokens[n - 1 - j] == tokens[n - 1 - d - j])
            j++;
        if (j == len)
            return d;
    }
    return 0;
}

int32_t ngram_propose(const hearth_token *tokens, int32_t n, int32_t n_min, int32_t n_max,
                      int32_t k, hearth_token *out, int32_t *match)
{
    int32_t unused;
    match  = match ? match : &unused;
    *match = 0;
    if (k < 1 || n_min < 1 || n_max < n_min || n_max > NGRAM_MAX_N || n < n_min + 1)
        return 0;
    const int32_t d = loop_period(tokens, n, n_min, n_max);
    if (d > 0) {
        *match = n_max; /* a loop outranks any match */
        return copy_on(tokens, n, n - d, k, out);
    }
    const hearth_token last = tokens[n - 1];
    int32_t best_len = 0, best_end = -1;
    int32_t stop = n - 1 - NGRAM_SCAN > 0 ? n - 1 - NGRAM_SCAN : 0;
    /* e: an earlier match ends at tokens[e] (so tokens[e + 1] is what followed it) */
    for (int32_t e = n - 2; e >= stop; e--) {
        if (tokens[e] != last)
            continue;
        int32_t len = 1;
        while (len < n_max && e - len >= 0 && tokens[e - len] == tokens[n - 1 - len])
            len++;
        if (len > best_len) {
            best_len = len;
            best_end = e;
            if (len == n_max)
                break;
        }
    }
    if (best_len < n_min)
        return 0;
    *match = best_len;
    /* what followed the match, and past the sequence's end the same again: a match d tokens
     * back means the text repeats with period d, as a looping generation does */
    return copy_on(tokens, n, best_end + 1, k, out);
}

/* ------------------------------------------------------------------ pool --- */

#include <stdlib.h>

struct pool_entry {
    uint64_t key;      /* the n-gram's hash (never 0: 0 marks an empty entry) */
    hearth_token next; /* what followed it last */
    uint32_t pad;
};

struct ngram_pool {
    struct pool_entry *e; /* [n] */
    size_t n;
    int32_t n_min, n_max;
};

/* The hash of tokens[0..len), its length mixed in; never 0. */
static uint64_t gram_key(const hearth_token *t, int32_t len)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (uint64_t)len;
    for (int32_t i = 0; i < len; i++) {
        h ^= (uint64_t)(uint32_t)t[i];
        h *= 0xbf58476d1ce4e5b9ull;
        h ^= h >> 31;
    }
    return h ? h : 1;
}

struct ngram_pool *ngram_pool_new(size_t bytes, int32_t n_min, int32_t n_max)
{
    if (n_min < 1 || n_max < n_min || n_max > NGRAM_MAX_N)
        return NULL;
    struct ngram_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->n     = bytes / sizeof *p->e > 0 ? bytes / sizeof *p->e : 1;
    p->e     = calloc(p->n, sizeof *p->e);
    p->n_min = n_min;
    p->n_max = n_max;
    if (!p->e) {
        free(p);
        return NULL;
    }
    return p;
}

void ngram_pool_free(struct ngram_pool *p)
{
    if (!p)
        return;
    free(p->e);
    free(p);
}

size_t ngram_pool_entries(const struct ngram_pool *p)
{
    return p->n;
}

void ngram_pool_feed(struct ngram_pool *p, const hearth_token *tokens, int32_t from, int32_t n)
{
    for (int32_t i = from > 1 ? from : 1; i < n; i++)
        for (int32_t len = p->n_min; len <= p->n_max && len <= i; len++) {
            uint64_t key         = gram_key(tokens + i - len, len);
            struct pool_entry *e = &p->e[key % p->n];
            e->key               = key;
            e->next              = tokens[i];
        }
}

/* What the pool says follows the longest known n-gram ending t[0..n), or -1. */
static hearth_token pool_next(const struct ngram_pool *p, const hearth_token *t, int32_t n,
                              int32_t *len_found)
{
    for (int32_t len = p->n_max < n ? p->n_max : n; len >= p->n_min; len--) {
        uint64_t key               = gram_key(t + n - len, len);
        const struct pool_entry *e = &p->e[key % p->n];
        if (e->key == key) {
            *len_found = len;
            return e->next;
        }
    }
    return -1;
}

int32_t ngram_pool_propose(const struct ngram_pool *p, const hearth_token *tokens, int32_t n,
                           int32_t k, hearth_token *out, int32_t *match)
{
    int32_t unused;
    match  = match ? match : &unused;
    *match = 0;
    /* the last n_max tokens, then the proposal, so each lookup sees what it extends */
    hearth_token win[2 * NGRAM_MAX_N + 64];
    int32_t have = n < p->n_max ? n : p->n_max;
    if (k > 64)
        k = 64;
    for (int32_t i = 0; i < have; i++)
        win[i] = tokens[n - have + i];
    int32_t m = 0;
    while (m < k) {
        int32_t len;
        hearth_token t = pool_next(p, win, have + m, &len);
        if (t < 0)
            break;
        if (m == 0)
            *match = len;
        out[m]          = t;
        win[have + m++] = t;
    }
    return m;
}
