/* test_sampler.c: the sampling chain (src/sample/sampler.c). */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "hearth.h"
#include "sample/sampler.h"
#include "util/testutil.h"

static struct hearth_sampler *new_sampler(const struct hearth_sampler_params *p, int32_t n_vocab)
{
    struct hearth_sampler *s = NULL;
    char err[128];
    assert_int_equal(hearth_sampler_new(p, n_vocab, &s, err, sizeof err), HEARTH_OK);
    assert_non_null(s);
    return s;
}

static void test_new_refuses_an_empty_vocabulary(void **state)
{
    (void)state;
    struct hearth_sampler *s = (struct hearth_sampler *)1;
    char err[128];
    assert_int_equal(hearth_sampler_new(NULL, 0, &s, err, sizeof err), HEARTH_EINVAL);
    assert_null(s);
    assert_non_null(strstr(err, "0 tokens"));
}

static struct hearth_sampler_params greedy(void)
{
    struct hearth_sampler_params p = hearth_sampler_default_params();
    p.temperature                  = 0;
    return p;
}

static void test_greedy_is_argmax_lowest_id_on_ties(void **state)
{
    (void)state;
    struct hearth_sampler_params p = greedy();
    struct hearth_sampler *s       = new_sampler(&p, 5);
    const float l1[5]              = {0.1f, 3.0f, -1.0f, 2.9f, 0.0f};
    assert_int_equal(hearth_sampler_sample(s, l1), 1);
    const float l2[5] = {1.0f, 7.0f, 7.0f, 2.0f, 0.0f};
    assert_int_equal(hearth_sampler_sample(s, l2), 1);
    hearth_sampler_free(s);
}

static void test_top_k_1_is_greedy_at_any_temperature(void **state)
{
    (void)state;
    struct hearth_sampler_params p = hearth_sampler_default_params();
    p.temperature                  = 5.0f;
    p.top_k                        = 1;
    struct hearth_sampler *s       = new_sampler(&p, 4);
    const float l[4]               = {0.5f, 0.4f, 0.6f, 0.1f};
    for (int i = 0; i < 50; i++)
        assert_int_equal(hearth_sampler_sample(s, l), 2);
    hearth_sampler_free(s);
}

static void test_seed_reproduces_and_distribution_follows_softmax(void **state)
{
    (void)state;
    struct hearth_sampler_params p = hearth_sampler_default_params();
    p.temperature                  = 1.0f;
    p.top_k                        = 0;
    p.top_p                        = 1.0f;
    p.min_p                        = 0.0f;
    p.seed                         = 1234;
    const float l[3]         = {0.0f, logf(2.0f), logf(7.0f)}; /* probabilities 0.1, 0.2, 0.7 */
    struct hearth_sampler *a = new_sampler(&p, 3), *b = new_sampler(&p, 3);
    int counts[3] = {0};
    const int n   = 20000;
    for (int i = 0; i < n; i++) {
        hearth_token ta = hearth_sampler_sample(a, l), tb = hearth_sampler_sample(b, l);
        assert_int_equal(ta, tb);
        counts[ta]++;
    }
    print_message("counts %d %d %d of %d (want 0.1, 0.2, 0.7)\n", counts[0], counts[1], counts[2],
                  n);
    assert_true(fabs(counts[0] / (double)n - 0.1) < 0.015);
    assert_true(fabs(counts[1] / (double)n - 0.2) < 0.015);
    assert_true(fabs(counts[2] / (double)n - 0.7) < 0.015);
    hearth_sampler_free(a);
    hearth_sampler_free(b);
}

static void test_top_p_and_min_p_cut_the_tail(void **state)
{
    (void)state;
    const float l[4]               = {logf(0.5f), logf(0.3f), logf(0.15f), logf(0.05f)};
    struct hearth_sampler_params p = hearth_sampler_default_params();
    p.temperature                  = 1.0f;
    p.top_k                        = 0;
    p.min_p                        = 0;
    p.top_p                        = 0.75f; /* keeps 0.5 + 0.3 */
    struct hearth_sampler *s       = new_sampler(&p, 4);
    for (int i = 0; i < 2000; i++)
        assert_true(hearth_sampler_sample(s, l) <= 1);
    hearth_sampler_free(s);
    p.top_p = 1.0f;
    p.min_p = 0.5f; /* keeps p >= 0.25 */
    s       = new_sampler(&p, 4);
    for (int i = 0; i < 2000; i++)
        assert_true(hearth_sampler_sample(s, l) <= 1);
    hearth_sampler_free(s);
}

static void test_repetition_penalty_moves_greedy_choice(void **state)
{
    (void)state;
    struct hearth_sampler_params p = greedy();
    p.repeat_penalty               = 2.0f;
    struct hearth_sampler *s       = new_sampler(&p, 3);
    const float l[3]               = {3.0f, 2.0f, -1.0f};
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
    p.temperature                  = 1.5f;
    p.top_k                        = 30;
    p.top_p                        = 1.0f;
    p.min_p                        = 0.0f;
    for (uint64_t seed = 1; seed <= 200; seed++) {
        p.seed                   = seed;
        struct hearth_sampler *s = new_sampler(&p, NV);
        hearth_token t           = hearth_sampler_sample(s, l);
        bool found               = false;
        for (int i = 0; i < nt; i++)
            found |= top[i] == t;
        if (!found)
            fail_msg("seed %llu drew %d, not among the 30 best", (unsigned long long)seed, t);
        hearth_sampler_free(s);
    }
}

/*
 * top_p over a large vocabulary sorts only a growing top-k: every draw must
 * still lie in the true nucleus, the shortest prefix of the full sort
 * whose mass reaches top_p, and the draws must reach its far end.
 */
static void test_top_p_keeps_the_true_nucleus_of_a_large_vocabulary(void **state)
{
    (void)state;
    enum { NV = 20000 };
    static float l[NV];
    static int rank[NV];
    for (int i = 0; i < NV; i++)
        l[i] = (float)((i * 7919) % 1009) * 0.01f; /* flat: the nucleus holds thousands */
    /* reference: mass of each logit level, walked from the best */
    double sum = 0;
    for (int i = 0; i < NV; i++)
        sum += exp(l[i] - 10.08);
    const float top_p = 0.6f;
    double cum        = 0;
    float cut         = 0;
    for (int v = 1008; v >= 0; v--) {
        for (int i = 0; i < NV; i++)
            if ((i * 7919) % 1009 == v)
                cum += exp(l[i] - 10.08) / sum;
        if (cum >= top_p) {
            cut = (float)v * 0.01f;
            break;
        }
    }
    for (int i = 0; i < NV; i++)
        rank[i] = l[i] >= cut;
    struct hearth_sampler_params p = hearth_sampler_default_params();
    p.temperature                  = 1.0f;
    p.top_k                        = 0;
    p.top_p                        = top_p;
    p.min_p                        = 0.0f;
    float lowest                   = 1e9f;
    for (uint64_t seed = 1; seed <= 300; seed++) {
        p.seed                   = seed;
        struct hearth_sampler *s = new_sampler(&p, NV);
        hearth_token t           = hearth_sampler_sample(s, l);
        if (t < 0 || t >= NV || !rank[t])
            fail_msg("seed %llu drew %d (logit %.2f), outside the nucleus (>= %.2f)",
                     (unsigned long long)seed, t, t >= 0 && t < NV ? l[t] : -1.0, cut);
        lowest = l[t] < lowest ? l[t] : lowest;
        hearth_sampler_free(s);
    }
    assert_true(lowest < cut + 1.0f); /* the far end of the nucleus is reached */
}

/* A mask restricts the pick (greedy and sampled); an empty mask picks nothing. */
static void test_pick_honours_the_mask(void **state)
{
    (void)state;
    const float l[70]   = {[3] = 5.0f, [40] = 1.0f, [65] = 2.0f};
    uint32_t allowed[3] = {0};
    allowed[40 >> 5] |= 1u << (40 & 31);
    allowed[65 >> 5] |= 1u << (65 & 31);
    struct hearth_sampler_params p = greedy();
    struct hearth_sampler *s       = new_sampler(&p, 70);
    assert_int_equal(sampler_pick(s, l, NULL), 3);
    assert_int_equal(sampler_pick(s, l, allowed), 65);
    uint32_t none[3] = {0};
    assert_int_equal(sampler_pick(s, l, none), -1);
    hearth_sampler_free(s);
    p             = hearth_sampler_default_params();
    p.top_k       = 0;
    p.top_p       = 1.0f;
    p.min_p       = 0.0f;
    p.temperature = 1.0f;
    int seen40 = 0, seen65 = 0;
    for (uint64_t seed = 1; seed <= 200; seed++) {
        p.seed         = seed;
        s              = new_sampler(&p, 70);
        hearth_token t = sampler_pick(s, l, allowed);
        assert_true(t == 40 || t == 65);
        seen40 += t == 40;
        seen65 += t == 65;
        hearth_sampler_free(s);
    }
    /* p(65) = e^2 / (e^2 + e^1) = 0.73 */
    assert_in_range(seen65, 120, 175);
    assert_true(seen40 > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_refuses_an_empty_vocabulary),
        cmocka_unit_test(test_greedy_is_argmax_lowest_id_on_ties),
        cmocka_unit_test(test_top_p_keeps_the_true_nucleus_of_a_large_vocabulary),
        cmocka_unit_test(test_pick_honours_the_mask),
        cmocka_unit_test(test_top_k_1_is_greedy_at_any_temperature),
        cmocka_unit_test(test_seed_reproduces_and_distribution_follows_softmax),
        cmocka_unit_test(test_top_p_and_min_p_cut_the_tail),
        cmocka_unit_test(test_repetition_penalty_moves_greedy_choice),
        cmocka_unit_test(test_top_k_selection_keeps_the_best_k),
    };
    return cmocka_run_group_tests_name("sampler", tests, NULL, NULL);
}
