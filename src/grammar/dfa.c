/*
 * dfa.c: precompute's byte steps, memoized as a lazily built DFA.
 *
 * A walk of the vocabulary trie steps a set of local stacks by one byte
 * at every live trie node: half a million steps for a context that
 * accepts most tokens, each a closure that interns nodes. The sets a walk
 * meets are few (tens to hundreds per context, mostly shared between
 * contexts of the same rule), so each set is interned once as a state and
 * each (state, byte class) step runs once; the walk then costs a table
 * read per trie node. Byte classes (bytes that every terminal of the
 * grammar either has or lacks together) keep the table narrow: a JSON
 * grammar has a few dozen.
 *
 * Memory: states x classes x 4 bytes for the table, up to
 * GDFA_DENSE_BYTES (a few hundred kB for the grammars requests bring);
 * past it, a hash of the steps actually run, at most one per trie node a
 * context visits. Precompute resets the DFA between contexts when its
 * pool or its states grow past a bound.
 */
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_int.h"
#include "util/errfmt.h"

static void byte_classes(struct gdfa *d)
{
    memset(d->cls, 0, sizeof d->cls);
    d->n_cls = 1;
    for (int32_t s = 0; s < d->g->n_sets && d->n_cls < 256; s++) {
        int16_t map[256][2];
        memset(map, 0xff, sizeof map);
        int32_t n = 0;
        for (unsigned b = 0; b < 256; b++) {
            int16_t *slot = &map[d->cls[b]][gbs_has(&d->g->sets[s], b)];
            if (*slot < 0)
                *slot = (int16_t)n++;
            d->cls[b] = (uint8_t)*slot;
        }
        d->n_cls = n;
    }
}

static uint32_t set_hash(const int32_t *ids, int32_t n, int flags)
{
    uint64_t h = 1469598103934665603ull ^ (uint64_t)(n * 4 + flags);
    for (int32_t i = 0; i < n; i++)
        h = (h ^ (uint32_t)ids[i]) * 1099511628211ull;
    return (uint32_t)(h ^ h >> 32);
}

static bool grow_states(struct gdfa *d)
{
    int32_t cap = d->cap ? d->cap * 2 : 256;
    int32_t *s0 = realloc(d->set0, ((size_t)cap + 1) * sizeof *s0);
    if (s0)
        d->set0 = s0;
    uint8_t *fl = realloc(d->flags, (size_t)cap);
    if (fl)
        d->flags = fl;
    uint32_t *h = realloc(d->hash, (size_t)cap * sizeof *h);
    if (h)
        d->hash = h;
    int32_t dense = cap < d->n_dense_max ? cap : d->n_dense_max;
    int32_t *nx   = d->next;
    if (dense > d->n_dense) {
        nx = realloc(d->next, (size_t)dense * (size_t)d->n_cls * sizeof *nx);
        if (nx)
            d->next = nx;
    }
    if (!s0 || !fl || !h || !nx)
        return false;
    if (dense > d->n_dense) {
        memset(d->next + (size_t)d->n_dense * (size_t)d->n_cls, 0xff,
               (size_t)(dense - d->n_dense) * (size_t)d->n_cls * sizeof *nx);
        d->n_dense = dense;
    }
    d->cap = cap;
    return true;
}

static bool grow_table(struct gdfa *d)
{
    uint32_t size = d->table ? (d->mask + 1) * 2 : 1024;
    int32_t *t    = malloc(size * sizeof *t);
    if (!t)
        return false;
    memset(t, 0xff, size * sizeof *t);
    for (int32_t s = 0; s < d->n; s++) {
        uint32_t j = d->hash[s] & (size - 1);
        while (t[j] >= 0)
            j = (j + 1) & (size - 1);
        t[j] = s;
    }
    free(d->table);
    d->table = t;
    d->mask  = size - 1;
    return true;
}

/* The state of the stacks ids[0..n) (sorted, distinct) reached with flags; -1 when out of memory.
 */
static int32_t intern_state(struct gdfa *d, const int32_t *ids, int32_t n, int flags)
{
    if (!d->table || (uint32_t)(d->n + 1) * 2 > d->mask + 1) {
        if (!grow_table(d))
            return -1;
    }
    uint32_t h = set_hash(ids, n, flags);
    uint32_t j = h & d->mask;
    for (; d->table[j] >= 0; j = (j + 1) & d->mask) {
        int32_t s = d->table[j];
        if (d->hash[s] == h && d->flags[s] == flags && d->set0[s + 1] - d->set0[s] == n &&
            (n == 0 || memcmp(d->stacks.v + d->set0[s], ids, (size_t)n * sizeof *ids) == 0))
            return s;
    }
    if (d->n == d->cap && !grow_states(d))
        return -1;
    for (int32_t i = 0; i < n; i++)
        if (!ivec_push(&d->stacks, ids[i]))
            return -1;
    int32_t s      = d->n++;
    d->flags[s]    = (uint8_t)flags;
    d->hash[s]     = h;
    d->set0[s + 1] = d->stacks.n;
    d->table[j]    = s;
    return s;
}

bool gdfa_init(struct gdfa *d, const struct gprog *g)
{
    memset(d, 0, sizeof *d);
    d->g = g;
    gpool_init(&d->pool);
    byte_classes(d);
    d->n_dense_max = (int32_t)(GDFA_DENSE_BYTES / ((uint32_t)d->n_cls * sizeof *d->next));
    return gdfa_reset(d);
}

static uint32_t far_hash(int64_t key)
{
    return (uint32_t)(((uint64_t)key * 0x9E3779B97F4A7C15ull) >> 32);
}

#define FAR_KEY(s, c) ((int64_t)(s) << 40 | (int64_t)(c) << 32)

/* The slot of step (s, c) among the hashed ones: the entry there, or -1 where it would go. */
static uint32_t far_find(const struct gdfa *d, int64_t key)
{
    uint32_t j = far_hash(key) & d->far_mask;
    while (d->far[j] >= 0 && (d->far[j] & ~(int64_t)0xffffffff) != key)
        j = (j + 1) & d->far_mask;
    return j;
}

static bool far_grow(struct gdfa *d)
{
    uint32_t size = d->far ? (d->far_mask + 1) * 2 : 4096;
    int64_t *old  = d->far;
    uint32_t n    = d->far ? d->far_mask + 1 : 0;
    d->far        = malloc(size * sizeof *d->far);
    if (!d->far) {
        d->far = old;
        return false;
    }
    memset(d->far, 0xff, size * sizeof *d->far);
    d->far_mask = size - 1;
    for (uint32_t i = 0; i < n; i++)
        if (old[i] >= 0)
            d->far[far_find(d, old[i] & ~(int64_t)0xffffffff)] = old[i];
    free(old);
    return true;
}

void gdfa_free(struct gdfa *d)
{
    gpool_free(&d->pool);
    free(d->set0);
    free(d->flags);
    free(d->hash);
    free(d->next);
    free(d->far);
    free(d->table);
    ivec_free(&d->stacks);
    ivec_free(&d->tmp);
    memset(d, 0, sizeof *d);
}

bool gdfa_reset(struct gdfa *d)
{
    gpool_reset(&d->pool);
    if (d->table)
        memset(d->table, 0xff, ((size_t)d->mask + 1) * sizeof *d->table);
    if (d->next)
        memset(d->next, 0xff, (size_t)d->n_dense * (size_t)d->n_cls * sizeof *d->next);
    if (d->far)
        memset(d->far, 0xff, ((size_t)d->far_mask + 1) * sizeof *d->far);
    d->n_far    = 0;
    d->n        = 0;
    d->stacks.n = 0;
    if (!d->set0 && !grow_states(d))
        return false;
    d->set0[0] = 0;
    return intern_state(d, NULL, 0, 0) == 0;
}

int32_t gdfa_start(struct gdfa *d, int32_t p, int32_t q, char *err, size_t err_len)
{
    int32_t below = GS_EMPTY;
    if (q >= 0) {
        below = gpool_intern(&d->pool, q, GS_BOTTOM, err, err_len);
        if (below < 0)
            return -1;
    }
    int32_t n0 = gpool_intern(&d->pool, p, below, err, err_len);
    if (n0 < 0)
        return -1;
    int32_t s = intern_state(d, &n0, 1, 0);
    return s >= 0 ? s : fail(GDFA_ENOMEM, err, err_len, "out of memory");
}

static int cmp_id(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

static void sort_ids(int32_t *a, int32_t n)
{
    if (n > 32) {
        qsort(a, (size_t)n, sizeof *a, cmp_id);
        return;
    }
    for (int32_t i = 1; i < n; i++) {
        int32_t x = a[i], j = i;
        for (; j > 0 && a[j - 1] > x; j--)
            a[j] = a[j - 1];
        a[j] = x;
    }
}

int32_t gdfa_step_slow(struct gdfa *d, int32_t s, unsigned b, char *err, size_t err_len)
{
    int64_t key = FAR_KEY(s, d->cls[b]);
    if (s >= d->n_dense && d->far) {
        int64_t e = d->far[far_find(d, key)];
        if (e >= 0)
            return (int32_t)(e & 0xffffffff);
    }
    d->tmp.n = 0;
    int f    = 0;
    if (!gstep_byte(d->g, &d->pool, d->stacks.v + d->set0[s], d->set0[s + 1] - d->set0[s], b,
                    &d->tmp, &f, err, err_len))
        return -1;
    /* the sort and the state's hash, per stack */
    if (!gbudget_spend(d->g->budget, GBUDGET_VISIT * (int64_t)d->tmp.n)) {
        set_err(err, err_len, "%s", d->g->budget->msg);
        return -1;
    }
    /* closure yields each stack once, in an order that depends on the path: sort for one key */
    sort_ids(d->tmp.v, d->tmp.n);
    int32_t t = intern_state(d, d->tmp.v, d->tmp.n, f);
    if (t < 0)
        return fail(GDFA_ENOMEM, err, err_len, "out of memory");
    if (s < d->n_dense) {
        d->next[(size_t)s * (size_t)d->n_cls + d->cls[b]] = t;
        return t;
    }
    if ((!d->far || (uint32_t)(d->n_far + 1) * 2 > d->far_mask + 1) && !far_grow(d))
        return fail(GDFA_ENOMEM, err, err_len, "out of memory");
    d->far[far_find(d, key)] = key | t;
    d->n_far++;
    return t;
}
