/* test_sampler.c: the sampling chain (src/sample/sampler.c). */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "hearth.h"
#include "util/testutil.h"

static struct hearth_sampler_params greedy(void)
{
    struct hearth_sampler_params p = hearth_sampler_default_params();
    p.temperature = 0;
    return p;
}

static void test_greedy_is_argmax_lowest_id_on_ties(void **state)
{
    (void)state;
    struct hearth_sampler_params p = greedy();
    struct hearth_sampler *s = hearth_sampler_new(&p, 5);
    const float l1[5] = {0.1f, 3.0f, -1.0f, 2.9f, 0.0f};
    assert_int_equal(hearth_sampler_sample(s, l1), 1);
    const float l2[5] = {1.0f, 7.0f, 7.0f, 2.0f, 0.0f};
    assert_int_equal(hearth_sampler_sample(s, l2), 1);
    hearth_sampler_free(s);
}

static void test_top_k_1_is_greedy_at_any_temperature(void **state)
{
    (void)state;
    struct hearth_sampler_params p = hearth_sampler_default_params();
    p.temperature = 5.0f;
    p.top_k = 1;
    struct hearth_sampler *s = hearth_sampler_new(&p, 4);
    const float l[4] = {0.5f, 0.4f, 0.6f, 0.1f};
    for (int i = 0; i < 50; i++)
        assert_int_equal(hearth_sampler_sample(s, l), 2);
    hearth_sampler_free(s);
}

static void test_seed_reproduces_and_distribution_follows_softmax(void **state)
{
    (void)state;
    struct hearth_sampler_params p = hearth_sampler_default_params();
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = 1234;
    const float l[3] = {0.0f, logf(2.0f), logf(7.0f)}; /* probabilities 0.1, 0.2, 0.7 */
    struct hearth_sampler *a = hearth_sampler_new(&p, 3), *b = hearth_sampler_new(&p, 3);
    int counts[3] = {0};
    const int n = 20000;
    for (int i = 0; i < n; i++) {
        hearth_token ta = hearth_sampler_sample(a, l), tb = hearth_sampler_sample(b, l);
        assert_int_equal(ta, tb);
        counts[ta]++;
    }
    print_message("counts %d %d %d of %d (want 0.1, 0.2, 0.7)\n", counts[0], counts[1], counts[2], n);
    assert_true(fabs(counts[0] / (double)n - 0.1) < 0.015);
    assert_true(fabs(counts[1] / (double)n - 0.2) < 0.015);
    assert_true(fabs(counts[2] / (double)n - 0.7) < 0.015);
    hearth_sampler_free(a);
    hearth_sampler_free(b);
}

static void test_top_p_and_min_p_cut_the_tail(void **state)
{
    (void)state;
    const float l[4] = {logf(0.5f), logf(0.3f), logf(0.15f), logf(0.05f)};
    struct hearth_sampler_params p = hearth_sampler_default_params();
    p.temperature = 1.0f;
    p.top_k = 0;
    p.min_p = 0;
    p.top_p = 0.75f; /* keeps 0.5 + 0.3 */
    struct hearth_sampler *s = hearth_sampler_new(&p, 4);
    for (int i = 0; i < 2000; i++)
        assert_true(hearth_sampler_sample(s, l) <= 1);
    hearth_sampler_free(s);
    p.top_p = 1.0f;
    p.min_p = 0.5f; /* keeps p >= 0.25 */
    s = hearth_sampler_new(&p, 4);
    for (int i = 0; i < 2000; i++)
        assert_true(hearth_sampler_sample(s, l) <= 1);
    hearth_sampler_free(s);
}

static void test_repetition_penalty_moves_greedy_choice(void **state)
{
    (void)state;
    struct hearth_sampler_params p = greedy();
    p.repeat_penalty = 2.0f;
    struct hearth_sampler *s = hearth_sampler_new(&p, 3);
    const float l[3] = {3.0f, 2.0f, -1.0f};
    assert_int_equal(hearth_sampler_sample(s, l), 0); /* history now {0}: 3.0 -> 1.5 */
    assert_int_equal(hearth_sampler_sample(s, l), 1);
    hearth_sampler_free(s);
}

/*
 * With top-k the sampler selects the k best without sorting the vocabulary;
 * the draws must be exactly those of a full sort: with many tied logits,
 * every seed gives a token among the true top k, and with k = 1 the argmax.
 */
static void test_top_k_selection_keeps_the_best_k(void **state)
{
    (void)state;
    enum { NV = 5000 };
    static float l[NV];
    for (int i = 0; i < NV; i++)
        l[i] = (float)((i * 7919) % 97) * 0.25f; /* many ties */
    /* the 30 best by (logit desc, id asc): logit 24.0 held by ids with (i*7919)%97 == 96 */
    int top[NV], nt = 0;
    for (int v = 96; v >= 0 && nt < 30; v--)
        for (int i = 0; i < NV && nt < 30; i++)
            if ((i * 7919) % 97 == v)
                top[nt++] = i;
    struct hearth_sampler_params p = hearth_sampler_default_params();
    p.temperature = 1.5f;
    p.top_k = 30;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    for (uint64_t seed = 1; seed <= 200; seed++) {
        p.seed = seed;
        struct hearth_sampler *s = hearth_sampler_new(&p, NV);
        hearth_token t = hearth_sampler_sample(s, l);
        bool found = false;
        for (int i = 0; i < nt; i++)
            found |= top[i] == t;
        if (!found)
            fail_msg("seed %llu drew %d, not among the 30 best", (unsigned long long)seed, t);
        hearth_sampler_free(s);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_is_argmax_lowest_id_on_ties),
        cmocka_unit_test(test_top_k_1_is_greedy_at_any_temperature),
        cmocka_unit_test(test_seed_reproduces_and_distribution_follows_softmax),
        cmocka_unit_test(test_top_p_and_min_p_cut_the_tail),
        cmocka_unit_test(test_repetition_penalty_moves_greedy_choice),
        cmocka_unit_test(test_top_k_selection_keeps_the_best_k),
    };
    return cmocka_run_group_tests_name("sampler", tests, NULL, NULL);
}
