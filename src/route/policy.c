/*
 * policy.c: `hearth route`'s choice of upstream (policy.h).
 *
 * An upstream's index is two u64maps of block hash -> the second it was
 * last sent: blocks are put in the newer; when the newer holds half of
 * index_blocks it becomes the older and the older is emptied, so the index
 * holds at most index_blocks, forgets the least recently sent first (in
 * halves), and costs O(1) a block. A block found only in the older
 * generation is moved to the newer when sent again.
 */
#include "route/policy.h"

#include <stdlib.h>
#include <string.h>

#include "util/hash.h"
#include "util/u64map.h"

struct index {
    struct u64map gen[2]; /* gen[cur] the newer */
    int32_t n[2];         /* entries in each */
    int cur;
};

struct route {
    struct route_params p;
    struct index idx[ROUTE_MAX_UPSTREAMS];
    int32_t in_flight[ROUTE_MAX_UPSTREAMS];
    int32_t others[ROUTE_MAX_UPSTREAMS]; /* requests it reported beyond the router's own */
    int32_t next;                        /* round-robin's and ties' turn */
};

/*
 * An upstream's load: what the router sent it and has not seen end, plus
 * what it last reported serving for other clients. The report is seconds
 * old, so only its excess over the router's count at that moment is kept:
 * a report taken while the router's own burst was there must not weigh on
 * the next burst.
 */
static int32_t load(const struct route *r, int32_t u)
{
    return r->in_flight[u] + r->others[u];
}

const char *route_reason_name(enum route_reason r)
{
    static const char *const names[ROUTE_REASONS] = {"prefix", "load", "spill", "turn"};
    return (unsigned)r < ROUTE_REASONS ? names[r] : "?";
}

struct route_params route_default_params(void)
{
    return (struct route_params){.policy       = ROUTE_AFFINITY,
                                 .n_upstream   = 1,
                                 .index_blocks = 65536,
                                 .ttl_s        = 600,
                                 .min_match    = 4,
                                 .slack        = 4};
}

struct route *route_new(const struct route_params *p)
{
    if (p->n_upstream < 1 || p->n_upstream > ROUTE_MAX_UPSTREAMS || p->index_blocks < 2 ||
        p->ttl_s <= 0 || p->min_match < 1 || p->slack < 0)
        return NULL;
    struct route *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->p = *p;
    for (int32_t u = 0; u < p->n_upstream; u++)
        for (int g = 0; g < 2; g++)
            if (!u64map_init(&r->idx[u].gen[g], p->index_blocks / 2)) {
                route_free(r);
                return NULL;
            }
    return r;
}

void route_free(struct route *r)
{
    if (!r)
        return;
    for (int32_t u = 0; u < ROUTE_MAX_UPSTREAMS; u++)
        for (int g = 0; g < 2; g++)
            u64map_free(&r->idx[u].gen[g]);
    free(r);
}

int32_t route_blocks(const char *seed, const char *text, size_t len, uint64_t *out, int32_t cap)
{
    uint64_t h = fnv1a64(FNV1A64_SEED, seed ? seed : "", seed ? strlen(seed) : 0);
    int32_t n  = 0;
    for (size_t off = 0; off + ROUTE_BLOCK <= len && n < cap; off += ROUTE_BLOCK) {
        h = fnv1a64(h, text + off, ROUTE_BLOCK);
        /* u64map keys are nonzero; the chained value is the prefix's name */
        out[n++] = h ? h : 1;
    }
    return n;
}

/* Whether u's index holds block key, sent within the ttl. */
static bool holds(const struct route *r, int32_t u, uint64_t key, double now)
{
    const struct index *x = &r->idx[u];
    for (int k = 0; k < 2; k++) {
        const int32_t t = u64map_find(&x->gen[(x->cur + k) & 1], key);
        if (t >= 0)
            return now - (double)t <= r->p.ttl_s;
    }
    return false;
}

/* The longest prefix of h[0..n) u holds: blocks chain, so the first miss ends it. */
static int32_t matched(const struct route *r, int32_t u, const uint64_t *h, int32_t n, double now)
{
    int32_t lo = 0, hi = n;
    /* holding block i means having been sent the whole prefix up to it, so the held
     * blocks of a request are a prefix of it (up to collisions and aging): bisect */
    while (lo < hi) {
        const int32_t mid = lo + (hi - lo + 1) / 2;
        if (holds(r, u, h[mid - 1], now))
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* The usable upstream with the fewest in flight; ties in turn from r->next. */
static int32_t least_loaded(const struct route *r, const bool *usable)
{
    int32_t best = -1;
    for (int32_t k = 0; k < r->p.n_upstream; k++) {
        const int32_t u = (r->next + k) % r->p.n_upstream;
        if (usable[u] && (best < 0 || load(r, u) < load(r, best)))
            best = u;
    }
    return best;
}

struct route_pick route_choose(struct route *r, const uint64_t *h, int32_t n, const bool *usable,
                               double now)
{
    struct route_pick pick = {.upstream = -1, .reason = ROUTE_LOAD};
    const int32_t least    = least_loaded(r, usable);
    if (least < 0)
        return pick;
    if (r->p.policy == ROUTE_ROUND_ROBIN) {
        for (int32_t k = 0; k < r->p.n_upstream; k++) {
            const int32_t u = (r->next + k) % r->p.n_upstream;
            if (usable[u]) {
                pick.upstream = u;
                break;
            }
        }
        pick.reason = ROUTE_TURN;
    } else if (r->p.policy == ROUTE_LEAST_LOAD) {
        pick.upstream = least;
    } else {
        int32_t best = -1, best_len = 0;
        for (int32_t k = 0; k < r->p.n_upstream; k++) {
            const int32_t u = (r->next + k) % r->p.n_upstream;
            if (!usable[u])
                continue;
            const int32_t len = matched(r, u, h, n, now);
            if (len > best_len || (len == best_len && best >= 0 && load(r, u) < load(r, best))) {
                best     = u;
                best_len = len;
            }
        }
        if (best >= 0 && best_len >= r->p.min_match) {
            if (load(r, best) <= load(r, least) + r->p.slack) {
                pick.upstream = best;
                pick.reason   = ROUTE_PREFIX;
            } else {
                pick.upstream = least;
                pick.reason   = ROUTE_SPILL;
            }
        } else {
            pick.upstream = least;
        }
    }
    pick.matched = pick.upstream >= 0 ? matched(r, pick.upstream, h, n, now) : 0;
    return pick;
}

void route_started(struct route *r, int32_t u, const uint64_t *h, int32_t n, double now)
{
    if (u < 0 || u >= r->p.n_upstream)
        return;
    r->in_flight[u]++;
    r->next         = (u + 1) % r->p.n_upstream;
    struct index *x = &r->idx[u];
    const int32_t t = now < 0 ? 0 : now > 2e9 ? 2000000000 : (int32_t)now;
    for (int32_t i = 0; i < n; i++) {
        if (x->n[x->cur] >= r->p.index_blocks / 2) { /* the newer is full: it becomes the older */
            x->cur ^= 1;
            memset(x->gen[x->cur].key, 0, x->gen[x->cur].cap * sizeof *x->gen[x->cur].key);
            x->n[x->cur] = 0;
        }
        struct u64map *m = &x->gen[x->cur];
        if (u64map_find(m, h[i]) < 0)
            x->n[x->cur]++;
        u64map_put(m, h[i], t);
    }
}

void route_finished(struct route *r, int32_t u)
{
    if (u >= 0 && u < r->p.n_upstream && r->in_flight[u] > 0)
        r->in_flight[u]--;
}

void route_forget(struct route *r, int32_t u)
{
    if (u < 0 || u >= r->p.n_upstream)
        return;
    struct index *x = &r->idx[u];
    for (int g = 0; g < 2; g++) {
        memset(x->gen[g].key, 0, x->gen[g].cap * sizeof *x->gen[g].key);
        x->n[g] = 0;
    }
}

void route_reported(struct route *r, int32_t u, int32_t n, int32_t own)
{
    if (u >= 0 && u < r->p.n_upstream)
        r->others[u] = n > own ? n - own : 0;
}

int32_t route_in_flight(const struct route *r, int32_t u)
{
    return u >= 0 && u < r->p.n_upstream ? r->in_flight[u] : 0;
}

int64_t route_remembered(const struct route *r, int32_t u)
{
    return u >= 0 && u < r->p.n_upstream ? (int64_t)r->idx[u].n[0] + r->idx[u].n[1] : 0;
}
