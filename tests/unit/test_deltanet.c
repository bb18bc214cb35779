/*
 * test_deltanet.c: Qwen3.5's hybrid (src/backend/cpu/cpu_deltanet.c) on the tiny
 * qwen35moe model and the dense qwen35 (the same mixers, a SwiGLU FFN): the recurrent state
 * advances the same whether a prompt is prefilled at once, in chunks or a token at a time; each
 * sequence keeps its own state; truncation and prefix reuse resume from state snapshots.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hearth.h"
#include "model/model.h"
#include "util/engineutil.h"
#include "util/testutil.h"

/* each group's file: the routed qwen35moe, then the dense qwen35 */
static const char *model;

static int setup(void **state)
{
    struct hearth_context_params cp = hearth_context_default_params();
    cp.n_ctx                        = 256;
    cp.n_seq_max                    = 2;
    cp.kv_block                     = 16;
    return tu_engine_open((struct tu_engine **)state, model, &cp);
}

static int teardown(void **state)
{
    return tu_engine_close(*state);
}

#define NEED_MODEL(f) TU_ENGINE_OR_SKIP(f)

static void reset(struct tu_engine *f)
{
    hearth_seq_truncate(f->ctx, 0, 0);
    hearth_seq_truncate(f->ctx, 1, 0);
}

static void test_prefill_and_token_by_token_agree(void **state)
{
    struct tu_engine *f = *state;
    NEED_MODEL(f);
    float *l1 = malloc(f->n_vocab * sizeof(float)), *l2 = malloc(f->n_vocab * sizeof(float));
    for (int32_t salt = 2; salt < 5; salt++) {
        hearth_token p[40], g1[32], g2[32];
        tu_tokens(p, 40, salt);
        const int32_t chunks[] = {1, 7, 16};
        reset(f);
        tu_engine_run(f, 0, p, 40, 40, l1);
        for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
            reset(f);
            tu_engine_run(f, 0, p, 40, chunks[c], l2);
            const float d = tu_max_diff(l1, l2, f->n_vocab);
            print_message("prompt %d: one batch vs chunks of %d, last logits max |diff| %g\n", salt,
                          chunks[c], d);
            /* batches of two or more rows take the same arithmetic everywhere, and the state
             * carries across chunks exactly; one-row routers sum as ggml_vec_dot_f32, not as
             * tinyBLAS, which can tip a near tie between experts of this random model */
            if (chunks[c] > 1)
                assert_true(d == 0.0f);
            else
                assert_true(d < 0.1f);
            assert_int_equal(tu_argmax(l1, f->n_vocab), tu_argmax(l2, f->n_vocab));
        }
        /* the continuation after a whole-prompt prefill and after one in chunks of 7 (the same
         * arithmetic) is the same; after one token at a time the one-row router sums may tip a
         * near tie of this random model later on, in llama.cpp as here */
        tu_engine_greedy(f, p, 40, 40, g1, 32, l1);
        tu_engine_greedy(f, p, 40, 7, g2, 32, l2);
        assert_memory_equal(g1, g2, sizeof g1);
    }
    reset(f);
    free(l1);
    free(l2);
}

/* Two sequences in one batch, rows interleaved, each as if it ran alone. */
static void test_sequences_keep_their_own_state(void **state)
{
    struct tu_engine *f = *state;
    NEED_MODEL(f);
    char err[HEARTH_ERR_MAX];
    float *la = malloc(f->n_vocab * sizeof(float)), *lb = malloc(f->n_vocab * sizeof(float));
    hearth_token a[24], b[24], mix[48];
    tu_tokens(a, 24, 7);
    tu_tokens(b, 24, 8);
    reset(f);
    tu_engine_run(f, 0, a, 24, 24, la);
    reset(f);
    tu_engine_run(f, 0, b, 24, 24, lb);
    reset(f);
    int32_t pos[48], sq[48];
    for (int32_t i = 0; i < 24; i++) {
        mix[2 * i] = a[i], pos[2 * i] = i, sq[2 * i] = 0;
        mix[2 * i + 1] = b[i], pos[2 * i + 1] = i, sq[2 * i + 1] = 1;
    }
    int8_t want[48] = {0};
    want[46] = want[47]    = 1;
    struct hearth_batch bt = {48, mix, pos, sq, want};
    assert_int_equal(hearth_decode(f->ctx, &bt, err, sizeof err), HEARTH_OK);
    const float da = tu_max_diff(la, hearth_get_logits(f->ctx, 46), f->n_vocab),
                db = tu_max_diff(lb, hearth_get_logits(f->ctx, 47), f->n_vocab);
    print_message("interleaved vs alone: max |diff| %g and %g\n", da, db);
    assert_true(da < 1e-3f && db < 1e-3f);
    assert_int_equal(tu_argmax(la, f->n_vocab),
                     tu_argmax(hearth_get_logits(f->ctx, 46), f->n_vocab));
    assert_int_equal(tu_argmax(lb, f->n_vocab),
                     tu_argmax(hearth_get_logits(f->ctx, 47), f->n_vocab));
    reset(f);
    free(la);
    free(lb);
}

/*
 * The state goes back only to a snapshot (every 16-token block boundary
 * here): truncating resumes from the nearest one at or below the cut, and
 * continuing from there gives the bits of the uncut run (the same batch
 * shapes); below the first boundary the sequence starts afresh.
 */
static void test_truncation_resumes_from_a_snapshot(void **state)
{
    struct tu_engine *f = *state;
    NEED_MODEL(f);
    float *l1 = malloc(f->n_vocab * sizeof(float)), *l2 = malloc(f->n_vocab * sizeof(float));
    hearth_token p[48];
    tu_tokens(p, 48, 9);
    reset(f);
    tu_engine_run(f, 0, p, 48, 16, l1);
    hearth_seq_truncate(f->ctx, 0, 48); /* its full length: nothing changes */
    assert_int_equal(hearth_seq_len(f->ctx, 0), 48);
    const int32_t cut[] = {40, 20, 10, 0}, at[] = {32, 16, 0, 0};
    for (size_t i = 0; i < sizeof cut / sizeof cut[0]; i++) {
        hearth_seq_truncate(f->ctx, 0, cut[i]);
        assert_int_equal(hearth_seq_len(f->ctx, 0), at[i]);
        tu_engine_run(f, 0, p + at[i], 48 - at[i], 16, l2);
        print_message("cut at %d, resumed at %d: max |diff| %g\n", cut[i], at[i],
                      tu_max_diff(l1, l2, f->n_vocab));
        assert_memory_equal(l1, l2, (size_t)f->n_vocab * sizeof(float));
    }
    reset(f);
    free(l1);
    free(l2);
}

/*
 * Prefix reuse across sequences: a second sequence with the same prompt
 * resumes at the last snapshot its KV match reaches and continues to the
 * same bits; a prompt that parts after 20 tokens resumes at 16; one that
 * differs in its first block resumes nowhere. Without snapshots nothing is
 * reused.
 */
static void test_prefix_reuse_resumes_from_a_snapshot(void **state)
{
    struct tu_engine *f = *state;
    NEED_MODEL(f);
    float *l1 = malloc(f->n_vocab * sizeof(float)), *l2 = malloc(f->n_vocab * sizeof(float));
    hearth_token p[48], q[48], r[48];
    tu_tokens(p, 48, 10);
    tu_tokens(q, 48, 11);
    memcpy(q, p, 20 * sizeof *p);
    memcpy(r, p, sizeof p);
    r[3] = p[3] + 1;
    reset(f);
    tu_engine_run(f, 0, p, 48, 48, l1);
    hearth_seq_publish(f->ctx, 0, p, 48);
    hearth_seq_truncate(f->ctx, 0, 0);

    assert_int_equal(hearth_seq_reuse_prefix(f->ctx, 1, p, 48), 32);
    assert_int_equal(hearth_seq_len(f->ctx, 1), 32);
    tu_engine_run(f, 1, p + 32, 16, 16, l2);
    assert_memory_equal(l1, l2, (size_t)f->n_vocab * sizeof(float));
    hearth_seq_truncate(f->ctx, 1, 0);

    reset(f);
    tu_engine_run(f, 0, q, 48, 48, l1);
    hearth_seq_truncate(f->ctx, 0, 0);
    assert_int_equal(hearth_seq_reuse_prefix(f->ctx, 1, q, 48), 16);
    tu_engine_run(f, 1, q + 16, 32, 32, l2);
    assert_memory_equal(l1, l2, (size_t)f->n_vocab * sizeof(float));
    hearth_seq_truncate(f->ctx, 1, 0);

    assert_int_equal(hearth_seq_reuse_prefix(f->ctx, 1, r, 48), 0);
    assert_int_equal(hearth_seq_len(f->ctx, 1), 0);

    struct hearth_context *off;
    struct hearth_context_params cp = hearth_context_default_params();
    char err[HEARTH_ERR_MAX];
    cp.n_ctx = 64, cp.kv_block = 16, cp.n_state_snapshots = 0;
    assert_int_equal(hearth_context_new(f->model, &cp, &off, err, sizeof err), HEARTH_OK);
    const int32_t pos[]   = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17};
    const int32_t seq[18] = {0};
    struct hearth_batch b = {18, p, pos, seq, NULL};
    assert_int_equal(hearth_decode(off, &b, err, sizeof err), HEARTH_OK);
    hearth_seq_publish(off, 0, p, 18);
    hearth_seq_truncate(off, 0, 17);
    assert_int_equal(hearth_seq_len(off, 0), 0);
    assert_int_equal(hearth_seq_reuse_prefix(off, 0, p, 18), 0);
    hearth_context_free(off);
    cp.n_state_snapshots = 1025;
    assert_int_equal(hearth_context_new(f->model, &cp, &off, err, sizeof err), HEARTH_EINVAL);
    print_message("%s\n", err);
    assert_non_null(strstr(err, "n_state_snapshots"));
    reset(f);
    free(l1);
    free(l2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prefill_and_token_by_token_agree),
        cmocka_unit_test(test_sequences_keep_their_own_state),
        cmocka_unit_test(test_truncation_resumes_from_a_snapshot),
        cmocka_unit_test(test_prefix_reuse_resumes_from_a_snapshot),
    };
    model    = "tiny-qwen35moe-bpe-q8_0.gguf";
    int fail = cmocka_run_group_tests_name("qwen35moe", tests, setup, teardown);
    model    = "tiny-qwen35-bpe-q8_0.gguf";
    return fail + cmocka_run_group_tests_name("qwen35", tests, setup, teardown);
}
