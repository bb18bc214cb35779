/*
 * test_moe.c: the routed-expert FFN (src/backend/cpu/cpu_moe.c) on the tiny qwen3moe
 * model: batches of any composition give the same bits (tokens are grouped
 * by expert per batch, so a wrong grouping shows here), and greedy text is
 * the same whether the prompt is prefilled at once or fed a token at a time.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hearth.h"
#include "model/model.h"
#include "util/engineutil.h"
#include "util/testutil.h"

#define MODEL "tiny-qwen3moe-bpe-q8_0.gguf"

static int setup(void **state)
{
    struct hearth_context_params cp = hearth_context_default_params();
    cp.n_ctx                        = 256;
    cp.kv_block                     = 16;
    return tu_engine_open((struct tu_engine **)state, MODEL, &cp);
}

static int teardown(void **state)
{
    return tu_engine_close(*state);
}

#define NEED_MODEL(f) TU_ENGINE_OR_SKIP(f)

/*
 * Chunks of two or more rows take the same router arithmetic, so any split
 * gives the same bits, as long as every chunk takes the same attention path:
 * all under ATTN_TILE rows (per key), or all of ATTN_TILE rows or more (tiled).
 */
static void test_batch_composition_does_not_change_bits(void **state)
{
    struct tu_engine *f = *state;
    NEED_MODEL(f);
    hearth_token a[128];
    tu_tokens(a, 128, 1);
    float *l1 = malloc(f->n_vocab * sizeof(float)), *l2 = malloc(f->n_vocab * sizeof(float));
    static const int32_t cases[][3] = {/* tokens, first split, second split */
                                       {100, 7, 33},
                                       {100, 7, 50},
                                       {128, 128, 64}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        hearth_seq_truncate(f->ctx, 0, 0);
        tu_engine_run(f, 0, a, cases[c][0], cases[c][1], l1);
        hearth_seq_truncate(f->ctx, 0, 0);
        tu_engine_run(f, 0, a, cases[c][0], cases[c][2], l2);
        const float d = tu_max_diff(l1, l2, f->n_vocab);
        print_message("%d tokens, chunks of %d vs %d: max |diff| %g\n", cases[c][0], cases[c][1],
                      cases[c][2], d);
        assert_true(d == 0.0f);
    }
    hearth_seq_truncate(f->ctx, 0, 0);
    free(l1);
    free(l2);
}

static void test_prefill_and_token_by_token_agree(void **state)
{
    struct tu_engine *f = *state;
    NEED_MODEL(f);
    float *l1 = malloc(f->n_vocab * sizeof(float)), *l2 = malloc(f->n_vocab * sizeof(float));
    for (int32_t salt = 2; salt < 5; salt++) {
        hearth_token p[40], g1[48], g2[48];
        tu_tokens(p, 40, salt);
        hearth_seq_truncate(f->ctx, 0, 0);
        tu_engine_run(f, 0, p, 40, 40, l1);
        hearth_seq_truncate(f->ctx, 0, 0);
        tu_engine_run(f, 0, p, 40, 1, l2);
        /* one-row routers sum as ggml_vec_dot_f32, batches as tinyBLAS: last bits may differ */
        const float d = tu_max_diff(l1, l2, f->n_vocab);
        print_message("prompt %d: prefill vs token by token, last logits max |diff| %g\n", salt, d);
        assert_true(d < 1e-2f);
        assert_int_equal(tu_argmax(l1, f->n_vocab), tu_argmax(l2, f->n_vocab));
        tu_engine_greedy(f, p, 40, 40, g1, 48, l1);
        tu_engine_greedy(f, p, 40, 1, g2, 48, l2);
        assert_memory_equal(g1, g2, sizeof g1);
    }
    hearth_seq_truncate(f->ctx, 0, 0);
    free(l1);
    free(l2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch_composition_does_not_change_bits),
        cmocka_unit_test(test_prefill_and_token_by_token_agree),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
