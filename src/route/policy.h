/*
 * policy.h: where `hearth route` sends a request. Pure: no I/O and no clock
 * of its own (the caller passes the time), so tests drive it with simulated
 * traffic. Not thread-safe; the router holds one lock around it.
 *
 * A prompt is seen as text (the router does not know the upstreams'
 * tokenizers): its bytes in blocks of ROUTE_BLOCK, each block's hash
 * chained to the one before, so a block's hash names the whole prefix up to
 * it. Each upstream remembers the block hashes of the prompts it was sent:
 * an approximate index of what its prefix cache likely holds, bounded
 * (index_blocks a upstream, in two generations: when the newer fills, the
 * older is dropped) and aged (an entry last sent more than ttl seconds ago
 * no longer counts). Load is the router's own count of requests in flight.
 *
 * Affinity: a request goes to the upstream holding its longest remembered
 * prefix (ties: the least loaded), when that prefix is at least min_match
 * blocks and that upstream has at most slack more requests in flight than
 * the least loaded; otherwise to the least loaded. So a continuation finds
 * its cache, a fresh request the idlest upstream, and a hot prefix spills
 * to a second upstream once the first is busier by the slack (which then
 * learns it too, and the two share it by load). An upstream's load is the
 * router's count of its requests in flight, plus what it last reported
 * serving and queueing beyond the router's own (other clients).
 */
#ifndef HEARTH_ROUTE_POLICY_H
#define HEARTH_ROUTE_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ROUTE_BLOCK         256 /* bytes of prompt text a prefix block */
#define ROUTE_MAX_UPSTREAMS 64

enum route_policy {
    ROUTE_AFFINITY,    /* the cached prefix, within the slack; else the least loaded */
    ROUTE_ROUND_ROBIN, /* each in turn */
    ROUTE_LEAST_LOAD,  /* the fewest in flight */
};

/* Why an upstream was picked: the router counts decisions by reason. */
enum route_reason {
    ROUTE_PREFIX, /* it holds the longest prefix */
    ROUTE_LOAD,   /* the least loaded (no prefix long enough, or its holder too busy) */
    ROUTE_SPILL,  /* the least loaded, because the prefix's holder was over the slack */
    ROUTE_TURN,   /* round-robin */
    ROUTE_REASONS
};

/* "prefix", "load", "spill", "turn". */
const char *route_reason_name(enum route_reason r);

struct route_params {
    enum route_policy policy;
    int32_t n_upstream;   /* 1..ROUTE_MAX_UPSTREAMS */
    int32_t index_blocks; /* prefix blocks remembered an upstream (default 65536: 16 MiB of
                             prompt text, 2 MiB of index) */
    double ttl_s;         /* seconds a remembered block counts after it was last sent
                             (default 600) */
    int32_t min_match;    /* blocks of shared prefix that attract a request (default 4: 1 KiB
                             of text, some 250 tokens) */
    int32_t slack;        /* requests in flight an upstream may carry beyond the least loaded
                             and still get its prefix's requests (default 4) */
};

struct route_params route_default_params(void);

struct route;

/* NULL when out of memory or p is out of range. */
struct route *route_new(const struct route_params *p);
void route_free(struct route *r);

/*
 * The chained block hashes of a prompt's text (whole blocks only; a partial
 * last block is not a prefix a cache holds), at most cap of them, into out;
 * returns how many. seed separates texts that must not share (the model's
 * name: two models' caches share nothing).
 */
int32_t route_blocks(const char *seed, const char *text, size_t len, uint64_t *out, int32_t cap);

/* A decision. */
struct route_pick {
    int32_t upstream; /* -1: none usable */
    enum route_reason reason;
    int32_t matched; /* blocks of the request's prefix that upstream holds */
};

/*
 * Picks an upstream for a request of blocks h[0..n) among those usable[i]
 * says (healthy, and not tried already for this request) at time now
 * (seconds, monotonic).
 */
struct route_pick route_choose(struct route *r, const uint64_t *h, int32_t n, const bool *usable,
                               double now);

/* Request sent to upstream u: counted in flight, and u remembers its prefix as of now. */
void route_started(struct route *r, int32_t u, const uint64_t *h, int32_t n, double now);
/* A request on u ended (however it ended). */
void route_finished(struct route *r, int32_t u);
/* u failed (demoted by the router): what it remembered is dropped, its cache being gone. */
void route_forget(struct route *r, int32_t u);

/*
 * What u reports it is serving and holding in its queue (its /metrics): n
 * requests (-1: it does not say), taken when the router had own requests in
 * flight there. Its load is the router's count plus n's excess over own,
 * the requests of clients that bypass the router.
 */
void route_reported(struct route *r, int32_t u, int32_t n, int32_t own);

/* Requests in flight on u. */
int32_t route_in_flight(const struct route *r, int32_t u);
/* Blocks u remembers (both generations, aged or not). */
int64_t route_remembered(const struct route *r, int32_t u);

#endif
