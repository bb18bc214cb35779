/* test_ngram.c: the n-gram drafter (src/spec/ngram.c): prompt lookup and the shared pool. */
#include <string.h>

#include "spec/ngram.h"
#include "util/testutil.h"

/* Proposes after t (len n) with the given window and cap; returns the count, drafts in out. */
static int32_t propose(const hearth_token *t, int32_t n, int32_t n_min, int32_t n_max, int32_t k,
                       hearth_token *out)
{
    memset(out, 0xff, 32 * sizeof *out);
    return ngram_propose(t, n, n_min, n_max, k, out);
}

/* What followed the earlier occurrence of the last tokens is proposed, k of them. */
static void test_echo_proposes_what_followed(void **state)
{
    (void)state;
    const hearth_token t[] = {1, 2, 3, 4, 5, 6, 7, 9, 2, 3};
    hearth_token out[32];
    assert_int_equal(propose(t, 10, 2, 4, 3, out), 3);
    assert_int_equal(out[0], 4);
    assert_int_equal(out[1], 5);
    assert_int_equal(out[2], 6);
    /* k caps it; tokens after the match run out before a large k */
    assert_int_equal(propose(t, 10, 2, 4, 1, out), 1);
    assert_int_equal(out[0], 4);
    /* past the end the match (7 tokens back) reads as a period: 4 5 6 7 9 2 3 4 5 ... */
    assert_int_equal(propose(t, 10, 2, 4, 30, out), 30);
    assert_int_equal(out[6], 3);
    assert_int_equal(out[7], 4);
    assert_int_equal(out[29], out[29 - 7]);
}

/* The longest suffix wins over a later, shorter match; among equals the latest. */
static void test_longest_then_latest(void **state)
{
    (void)state;
    /* "7 8 9" then 100 early; "8 9" then 200 later: the 3-gram match is longer */
    const hearth_token a[] = {7, 8, 9, 100, 5, 8, 9, 200, 6, 7, 8, 9};
    hearth_token out[32];
    assert_int_equal(propose(a, 12, 2, 4, 1, out), 1);
    assert_int_equal(out[0], 100);
    /* with n_max 2 both are 2-grams: the latest (200) wins */
    assert_int_equal(propose(a, 12, 2, 2, 1, out), 1);
    assert_int_equal(out[0], 200);
    /* two equal 3-gram matches: the latest */
    const hearth_token b[] = {1, 2, 3, 10, 1, 2, 3, 20, 1, 2, 3};
    assert_int_equal(propose(b, 11, 2, 4, 1, out), 1);
    assert_int_equal(out[0], 20);
}

/* Matches shorter than n_min propose nothing; so do bad arguments and tiny inputs. */
static void test_no_proposal(void **state)
{
    (void)state;
    const hearth_token t[] = {1, 2, 3, 4, 5, 9, 5};
    hearth_token out[32];
    assert_int_equal(propose(t, 7, 2, 4, 4, out), 0); /* only "5" recurs: a 1-gram */
    assert_int_equal(propose(t, 7, 1, 4, 4, out), 4); /* with n_min 1 it counts: 9 5 9 5 */
    assert_int_equal(out[0], 9);
    assert_int_equal(out[3], 5);
    assert_int_equal(propose(t, 7, 2, 4, 0, out), 0);
    assert_int_equal(propose(t, 7, 0, 4, 4, out), 0);
    assert_int_equal(propose(t, 7, 3, 2, 4, out), 0);
    assert_int_equal(propose(t, 7, 2, NGRAM_MAX_N + 1, 4, out), 0);
    assert_int_equal(propose(t, 1, 1, 4, 4, out), 0);
    assert_int_equal(propose(t, 0, 1, 4, 4, out), 0);
    assert_int_equal(out[0], (hearth_token)-1); /* nothing written */
}

/* A run of one token matches itself shifted by one: it proposes more of the run. */
static void test_overlapping_run(void **state)
{
    (void)state;
    const hearth_token t[] = {4, 4, 4, 4, 4};
    hearth_token out[32];
    assert_int_equal(propose(t, 5, 2, 4, 8, out), 8);
    for (int i = 0; i < 8; i++)
        assert_int_equal(out[i], 4);
    /* an ABAB pattern proposes its continuation, as far as asked */
    const hearth_token u[] = {1, 2, 1, 2, 1, 2};
    assert_int_equal(propose(u, 6, 2, 4, 5, out), 5);
    assert_int_equal(out[0], 1);
    assert_int_equal(out[1], 2);
    assert_int_equal(out[4], 1);
}

/* The pool proposes what followed an n-gram in text it was fed, chaining its own proposals. */
static void test_pool_chains_what_it_saw(void **state)
{
    (void)state;
    struct ngram_pool *p = ngram_pool_new(1 << 16, 2, 4);
    assert_non_null(p);
    const hearth_token seen[] = {10, 11, 12, 13, 14, 15, 16};
    ngram_pool_feed(p, seen, 0, 7);
    /* another sequence ending in 11 12: the pool goes on 13 14 15 16, then knows no more */
    const hearth_token other[] = {99, 98, 11, 12};
    hearth_token out[32];
    assert_int_equal(ngram_pool_propose(p, other, 4, 8, out), 4);
    assert_int_equal(out[0], 13);
    assert_int_equal(out[3], 16);
    assert_int_equal(ngram_pool_propose(p, other, 4, 2, out), 2); /* k caps it */
    /* an n-gram it never saw, or shorter than n_min: nothing */
    const hearth_token unseen[] = {12, 11};
    assert_int_equal(ngram_pool_propose(p, unseen, 2, 8, out), 0);
    assert_int_equal(ngram_pool_propose(p, other + 3, 1, 8, out), 0);
    /* the latest continuation wins: 11 12 now followed by 50 */
    const hearth_token later[] = {11, 12, 50};
    ngram_pool_feed(p, later, 0, 3);
    assert_int_equal(ngram_pool_propose(p, other, 4, 1, out), 1);
    assert_int_equal(out[0], 50);
    ngram_pool_free(p);
}

/* Fixed memory: a one-entry pool keeps only the last n-gram fed; bad windows are refused. */
static void test_pool_fixed_memory(void **state)
{
    (void)state;
    struct ngram_pool *p = ngram_pool_new(1, 2, 2);
    assert_non_null(p);
    assert_int_equal(ngram_pool_entries(p), 1);
    const hearth_token a[] = {1, 2, 3, 4, 5};
    ngram_pool_feed(p, a, 0, 5);
    hearth_token out[8];
    const hearth_token q1[] = {1, 2}, q2[] = {3, 4};
    assert_int_equal(ngram_pool_propose(p, q1, 2, 1, out), 0); /* replaced */
    assert_int_equal(ngram_pool_propose(p, q2, 2, 1, out), 1);
    assert_int_equal(out[0], 5);
    ngram_pool_free(p);
    assert_null(ngram_pool_new(1 << 10, 0, 2));
    assert_null(ngram_pool_new(1 << 10, 3, 2));
    assert_null(ngram_pool_new(1 << 10, 2, NGRAM_MAX_N + 1));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_echo_proposes_what_followed),
        cmocka_unit_test(test_longest_then_latest),
        cmocka_unit_test(test_no_proposal),
        cmocka_unit_test(test_overlapping_run),
        cmocka_unit_test(test_pool_chains_what_it_saw),
        cmocka_unit_test(test_pool_fixed_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
