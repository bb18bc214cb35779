/*
 * test_policy.c: `hearth route`'s choice of upstream (src/route/policy.c)
 * under simulated traffic: block hashes name whole prefixes; a continuation
 * follows its prefix and a fresh request the least loaded; a hot prefix
 * spills to a second upstream past the slack instead of drowning one;
 * remembered prefixes age out and the index stays within its bound; agent
 * sessions keep their upstream turn after turn and spread over the fleet.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "route/policy.h"

#define MAXB 256

/* A text of n bytes, different for each seed. */
static char *text_of(unsigned seed, size_t n)
{
    char *t = malloc(n + 1);
    assert_non_null(t);
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        t[i] = (char)('a' + (seed >> 16) % 26);
    }
    t[n] = 0;
    return t;
}

static struct route *make(enum route_policy policy, int32_t n_up)
{
    struct route_params p = route_default_params();
    p.policy              = policy;
    p.n_upstream          = n_up;
    struct route *r       = route_new(&p);
    assert_non_null(r);
    return r;
}

static const bool all[ROUTE_MAX_UPSTREAMS] = {true, true, true, true, true, true, true, true};

static void test_blocks_name_prefixes(void **state)
{
    (void)state;
    char *a = text_of(1, 10 * ROUTE_BLOCK + 100), *b = strdup(a);
    b[5 * ROUTE_BLOCK + 7] ^= 1; /* differs from block 5 on */
    uint64_t ha[MAXB], hb[MAXB], hc[MAXB];
    assert_int_equal(route_blocks("m", a, strlen(a), ha, MAXB), 10); /* the partial tail is not */
    assert_int_equal(route_blocks("m", b, strlen(b), hb, MAXB), 10);
    for (int i = 0; i < 10; i++)
        assert_true(i < 5 ? ha[i] == hb[i] : ha[i] != hb[i]);
    /* another model's prompt shares nothing */
    assert_int_equal(route_blocks("other", a, strlen(a), hc, MAXB), 10);
    assert_true(hc[0] != ha[0]);
    assert_int_equal(route_blocks("m", a, ROUTE_BLOCK - 1, ha, MAXB), 0);
    assert_int_equal(route_blocks("m", a, strlen(a), ha, 3), 3);
    free(a), free(b);
}

static void test_continuation_and_fresh(void **state)
{
    (void)state;
    struct route *r = make(ROUTE_AFFINITY, 3);
    char *conv = text_of(7, 40 * ROUTE_BLOCK), *other = text_of(8, 40 * ROUTE_BLOCK);
    uint64_t h[MAXB], g[MAXB];
    const int32_t n = route_blocks("m", conv, 20 * ROUTE_BLOCK, h, MAXB);
    const int32_t m = route_blocks("m", other, 20 * ROUTE_BLOCK, g, MAXB);
    route_started(r, 1, h, n, 0);
    route_finished(r, 1);
    route_started(r, 2, g, m, 0);
    route_finished(r, 2);
    /* the conversation grown by 10 blocks goes where its first 20 are */
    const int32_t n2       = route_blocks("m", conv, 30 * ROUTE_BLOCK, h, MAXB);
    struct route_pick pick = route_choose(r, h, n2, all, 1);
    assert_int_equal(pick.upstream, 1);
    assert_int_equal(pick.reason, ROUTE_PREFIX);
    assert_int_equal(pick.matched, 20);
    /* a fresh prompt goes to the least loaded: upstream 0 has nothing in flight */
    route_started(r, 1, h, n2, 1);
    route_started(r, 2, g, m, 1);
    char *fresh = text_of(9, 8 * ROUTE_BLOCK);
    uint64_t f[MAXB];
    const int32_t nf = route_blocks("m", fresh, strlen(fresh), f, MAXB);
    pick             = route_choose(r, f, nf, all, 1);
    assert_int_equal(pick.upstream, 0);
    assert_int_equal(pick.reason, ROUTE_LOAD);
    assert_int_equal(pick.matched, 0);
    /* a prefix shorter than min_match attracts nothing */
    const int32_t ns = route_blocks("m", other, 3 * ROUTE_BLOCK, g, MAXB);
    pick             = route_choose(r, g, ns, all, 1);
    assert_int_equal(pick.reason, ROUTE_LOAD);
    /* an upstream not usable (down, or tried already) is never picked */
    bool but1[3] = {true, false, true};
    pick         = route_choose(r, h, n2, but1, 1);
    assert_true(pick.upstream != 1);
    const bool none[3] = {false, false, false};
    assert_int_equal(route_choose(r, h, n2, none, 1).upstream, -1);
    /* a demoted upstream's cache is gone: it is forgotten */
    route_forget(r, 1);
    assert_int_equal(route_remembered(r, 1), 0);
    assert_int_not_equal(route_choose(r, h, n2, all, 1).reason, ROUTE_PREFIX);
    route_free(r);
    free(conv), free(other), free(fresh);
}

/* Many requests on one prefix at once spread over the fleet by the slack, no further. */
static void test_hot_prefix_spills(void **state)
{
    (void)state;
    struct route *r = make(ROUTE_AFFINITY, 3);
    char *sys       = text_of(3, 12 * ROUTE_BLOCK);
    uint64_t h[MAXB];
    const int32_t n = route_blocks("m", sys, strlen(sys), h, MAXB);
    int spills      = 0;
    for (int i = 0; i < 60; i++) { /* none finishes: the worst case for one upstream */
        const struct route_pick pick = route_choose(r, h, n, all, 1);
        assert_true(pick.upstream >= 0);
        spills += pick.reason == ROUTE_SPILL;
        route_started(r, pick.upstream, h, n, 1);
        int32_t lo = 1 << 30, hi = 0;
        for (int32_t u = 0; u < 3; u++) {
            lo = route_in_flight(r, u) < lo ? route_in_flight(r, u) : lo;
            hi = route_in_flight(r, u) > hi ? route_in_flight(r, u) : hi;
        }
        /* the busiest carries at most the slack (4) and the one just sent beyond the idlest */
        assert_true(hi - lo <= route_default_params().slack + 1);
    }
    assert_true(spills >= 2); /* it reached the other two by spilling */
    for (int32_t u = 0; u < 3; u++) {
        assert_true(route_in_flight(r, u) >= 15);
        assert_true(route_remembered(r, u) > 0);
    }
    /* with a round-robin policy the same requests take turns */
    struct route *rr = make(ROUTE_ROUND_ROBIN, 3);
    for (int i = 0; i < 6; i++) {
        const struct route_pick pick = route_choose(rr, h, n, all, 1);
        assert_int_equal(pick.upstream, i % 3);
        assert_int_equal(pick.reason, ROUTE_TURN);
        route_started(rr, pick.upstream, h, n, 1);
    }
    /* and least-load picks the idlest whatever the prefix */
    struct route *ll = make(ROUTE_LEAST_LOAD, 2);
    route_started(ll, 0, h, n, 1);
    assert_int_equal(route_choose(ll, h, n, all, 1).upstream, 1);
    route_free(r), route_free(rr), route_free(ll);
    free(sys);
}

static void test_aging_and_bound(void **state)
{
    (void)state;
    struct route_params p = route_default_params();
    p.n_upstream          = 2;
    p.ttl_s               = 100;
    p.index_blocks        = 64;
    struct route *r       = route_new(&p);
    assert_non_null(r);
    char *conv = text_of(11, 16 * ROUTE_BLOCK);
    uint64_t h[MAXB];
    const int32_t n = route_blocks("m", conv, strlen(conv), h, MAXB);
    route_started(r, 1, h, n, 1000);
    route_finished(r, 1);
    assert_int_equal(route_choose(r, h, n, all, 1050).upstream, 1);
    assert_int_equal(route_choose(r, h, n, all, 1100).reason, ROUTE_PREFIX);
    /* past the ttl it no longer counts */
    struct route_pick pick = route_choose(r, h, n, all, 1101);
    assert_int_equal(pick.reason, ROUTE_LOAD);
    assert_int_equal(pick.matched, 0);
    /* sent again, it counts again from then */
    route_started(r, 1, h, n, 1200);
    route_finished(r, 1);
    assert_int_equal(route_choose(r, h, n, all, 1250).reason, ROUTE_PREFIX);
    /* the index holds at most index_blocks: 50 other prompts later the first is gone, the
     * last is there */
    char *texts[50];
    for (int i = 0; i < 50; i++) {
        texts[i] = text_of(100 + (unsigned)i, 8 * ROUTE_BLOCK);
        uint64_t g[MAXB];
        const int32_t m = route_blocks("m", texts[i], strlen(texts[i]), g, MAXB);
        route_started(r, 1, g, m, 1300);
        route_finished(r, 1);
        assert_true(route_remembered(r, 1) <= p.index_blocks);
    }
    assert_int_equal(route_choose(r, h, n, all, 1300).reason, ROUTE_LOAD);
    uint64_t g[MAXB];
    const int32_t m = route_blocks("m", texts[49], strlen(texts[49]), g, MAXB);
    pick            = route_choose(r, g, m, all, 1300);
    assert_int_equal(pick.upstream, 1);
    assert_int_equal(pick.matched, 8);
    for (int i = 0; i < 50; i++)
        free(texts[i]);
    route_free(r);
    free(conv);
}

/*
 * 8 agent sessions, each resending its growing conversation for 10 turns
 * with a fresh burst of one-off requests between, over 2 upstreams: every
 * warm turn lands where its conversation is, and the sessions split evenly.
 */
static void test_agent_sessions(void **state)
{
    (void)state;
    struct route *r = make(ROUTE_AFFINITY, 2);
    char *conv[8];
    int home[8], hits = 0, warm = 0;
    for (int s = 0; s < 8; s++) {
        conv[s] = text_of(200 + (unsigned)s, 80 * ROUTE_BLOCK);
        home[s] = -1;
    }
    for (int turn = 1; turn <= 10; turn++) {
        int32_t up[8];
        for (int s = 0; s < 8; s++) { /* the turns of all sessions in flight together */
            uint64_t h[MAXB];
            const int32_t n = route_blocks("m", conv[s], (size_t)(8 * turn) * ROUTE_BLOCK, h, MAXB);
            const struct route_pick pick = route_choose(r, h, n, all, turn);
            if (turn > 1) {
                warm++;
                hits += pick.upstream == home[s] && pick.reason == ROUTE_PREFIX &&
                        pick.matched == 8 * (turn - 1);
            }
            home[s] = up[s] = pick.upstream;
            route_started(r, pick.upstream, h, n, turn);
        }
        for (int s = 0; s < 8; s++)
            route_finished(r, up[s]);
        for (int k = 0; k < 4; k++) { /* one-off requests between turns */
            char *t = text_of(1000u + (unsigned)(turn * 4 + k), 6 * ROUTE_BLOCK);
            uint64_t h[MAXB];
            const int32_t n              = route_blocks("m", t, strlen(t), h, MAXB);
            const struct route_pick pick = route_choose(r, h, n, all, turn);
            assert_int_equal(pick.reason, ROUTE_LOAD);
            route_started(r, pick.upstream, h, n, turn);
            route_finished(r, pick.upstream);
            free(t);
        }
    }
    int on0 = 0;
    for (int s = 0; s < 8; s++)
        on0 += home[s] == 0;
    print_message("warm turns on their prefix: %d of %d; sessions on upstream 0: %d of 8\n", hits,
                  warm, on0);
    assert_int_equal(hits, warm);
    assert_int_equal(on0, 4);
    for (int s = 0; s < 8; s++)
        free(conv[s]);
    route_free(r);
}

/*
 * An upstream busy with other clients (its /metrics says so) gets the fresh
 * requests last; a report that only counted the router's own requests
 * weighs nothing once they are done.
 */
static void test_reported_load(void **state)
{
    (void)state;
    struct route *r = make(ROUTE_AFFINITY, 2);
    char *t         = text_of(5, 8 * ROUTE_BLOCK);
    uint64_t h[MAXB];
    const int32_t n = route_blocks("m", t, strlen(t), h, MAXB);
    route_reported(r, 0, 6, 0); /* six requests of others */
    for (int i = 0; i < 6; i++) {
        assert_int_equal(route_choose(r, NULL, 0, all, 1).upstream, 1);
        route_started(r, 1, NULL, 0, 1);
    }
    for (int i = 0; i < 6; i++)
        route_finished(r, 1);
    /* a report of 8 taken while the router itself had 8 there: no one else */
    route_reported(r, 0, 8, 8);
    route_reported(r, 1, 0, 0);
    int on0 = 0;
    for (int i = 0; i < 8; i++) { /* a burst splits evenly */
        const struct route_pick pick = route_choose(r, NULL, 0, all, 1);
        on0 += pick.upstream == 0;
        route_started(r, pick.upstream, NULL, 0, 1);
    }
    assert_int_equal(on0, 4);
    /* its prefix draws a continuation within the slack, and spills past it */
    route_started(r, 0, h, n, 1);
    route_reported(r, 0, 5 + 2, 5); /* two of others */
    assert_int_equal(route_choose(r, h, n, all, 1).reason, ROUTE_PREFIX);
    route_reported(r, 0, 5 + 20, 5);
    assert_int_equal(route_choose(r, h, n, all, 1).reason, ROUTE_SPILL);
    route_reported(r, 0, -1, 5); /* it stopped saying: the router's count alone */
    assert_int_equal(route_choose(r, h, n, all, 1).reason, ROUTE_PREFIX);
    route_free(r);
    free(t);
}

static void test_params(void **state)
{
    (void)state;
    struct route_params p = route_default_params();
    p.n_upstream          = 0;
    assert_null(route_new(&p));
    p.n_upstream = ROUTE_MAX_UPSTREAMS + 1;
    assert_null(route_new(&p));
    p.n_upstream = 2;
    p.ttl_s      = 0;
    assert_null(route_new(&p));
    assert_string_equal(route_reason_name(ROUTE_SPILL), "spill");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocks_name_prefixes),
        cmocka_unit_test(test_continuation_and_fresh),
        cmocka_unit_test(test_hot_prefix_spills),
        cmocka_unit_test(test_aging_and_bound),
        cmocka_unit_test(test_agent_sessions),
        cmocka_unit_test(test_reported_load),
        cmocka_unit_test(test_params),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
