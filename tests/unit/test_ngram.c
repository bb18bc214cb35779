/* test_ngram.c: the n-gram drafter (src/spec/ngram.c): prompt lookup and the shared pool. */
#include <string.h>

#include "spec/ngram.h"
#include "util/testutil.h"

/* Proposes after t (len n) with the given window and cap; returns the count, drafts in out. */
static int32_t propose(const hearth_token *t, int32_t n, int32_t n_min, int32_t n_max, int32_t k,
                       hearth_token *out)
{
    memset(out, 0xff, 32 * sizeof *out);
    return ngram_propose(t, n, n_min, n_max, k, out, NULL);
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

/*
 * A loop comes first: when the last period's tokens repeat the ones before,
 * the loop goes on, though an older, longer match of the same tokens ended
 * otherwise; a word that merely recurs is no loop.
 */
static void test_loop_before_longest(void **state)
{
    (void)state;
    hearth_token out[32];
    /* a run of 5s that once ended in 7, and a new run: more 5s, not the old ending */
    const hearth_token a[] = {5, 5, 5, 5, 7, 1, 5, 5};
    assert_int_equal(propose(a, 8, 1, 4, 3, out), 3);
    assert_int_equal(out[0], 5);
    assert_int_equal(out[2], 5);
    /* one 5 into the new run there is no loop yet: the latest 5 was the old run's last */
    assert_int_equal(propose(a, 7, 1, 4, 1, out), 1);
    assert_int_equal(out[0], 7);
    /* period 3, repeated once: 1 2 3 1 2 3 goes on 1 2 3 1 */
    const hearth_token b[] = {9, 1, 2, 3, 9, 1, 2, 3, 4, 1, 2, 3, 1, 2, 3};
    assert_int_equal(propose(b, 15, 1, 4, 4, out), 4);
    assert_int_equal(out[0], 1);
    assert_int_equal(out[1], 2);
    assert_int_equal(out[2], 3);
    assert_int_equal(out[3], 1);
    /* a period longer than n_max is no loop: the longest match decides */
    assert_int_equal(propose(b, 15, 1, 2, 1, out), 1);
    assert_int_equal(out[0], 1); /* "2 3" latest at 10..11, followed by 1 */
    /* 20 recurs two tokens back, but 30 did not follow the earlier 10: no loop */
    const hearth_token c[] = {7, 20, 30, 99, 10, 20, 30, 20};
    assert_int_equal(propose(c, 8, 1, 4, 1, out), 1);
    assert_int_equal(out[0], 30); /* the latest earlier 20 was followed by 30 */
    /* the match's length goes with the proposal, a loop's as n_max */
    int32_t len = -1;
    assert_int_equal(ngram_propose(c, 8, 1, 4, 1, out, &len), 1);
    assert_int_equal(len, 1);
    assert_int_equal(ngram_propose(b, 15, 1, 4, 1, out, &len), 1);
    assert_int_equal(len, 4);
    assert_int_equal(ngram_propose(a, 8, 1, 3, 1, out, &len), 1);
    assert_int_equal(len, 3);
    /* the loop must be n_min long too: 5 5 after a 7 is no 3-token loop */
    const hearth_token d[] = {5, 5, 7, 5, 5};
    assert_int_equal(propose(d, 5, 3, 4, 2, out), 0);
    assert_int_equal(ngram_propose(d, 5, 3, 4, 2, out, &len), 0);
    assert_int_equal(len, 0);
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
    int32_t len = -1;
    assert_int_equal(ngram_pool_propose(p, other, 4, 8, out, &len), 4);
    assert_int_equal(len, 2); /* "11 12": the scheduler weighs it against the slot's own match */
    assert_int_equal(out[0], 13);
    assert_int_equal(out[3], 16);
    assert_int_equal(ngram_pool_propose(p, other, 4, 2, out, NULL), 2); /* k caps it */
    /* an n-gram it never saw, or shorter than n_min: nothing */
    const hearth_token unseen[] = {12, 11};
    assert_int_equal(ngram_pool_propose(p, unseen, 2, 8, out, &len), 0);
    assert_int_equal(len, 0);
    assert_int_equal(ngram_pool_propose(p, other + 3, 1, 8, out, NULL), 0);
    /* the latest continuation wins: 11 12 now followed by 50 */
    const hearth_token later[] = {11, 12, 50};
    ngram_pool_feed(p, later, 0, 3);
    assert_int_equal(ngram_pool_propose(p, other, 4, 1, out, NULL), 1);
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
    assert_int_equal(ngram_pool_propose(p, q1, 2, 1, out, NULL), 0); /* replaced */
    assert_int_equal(ngram_pool_propose(p, q2, 2, 1, out, NULL), 1);
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
        cmocka_unit_test(test_loop_before_longest),
        cmocka_unit_test(test_pool_chains_what_it_saw),
        cmocka_unit_test(test_pool_fixed_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
