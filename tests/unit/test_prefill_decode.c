/*
 * test_prefill_decode.c: for each of the newer architectures (qwen3moe,
 * gemma3, qwen35moe, qwen35, gemma4), 64 greedy tokens after the prompt is prefilled in one
 * batch equal those after it is fed one token at a time: the decode forms
 * (one-row matmuls, per-key attention, the DeltaNet recurrence taking a
 * batch or a token) continue each other. The prompts are those of
 * tests/e2e/greedy-llamacpp.tsv, whose continuations match llama.cpp's.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "util/engineutil.h"
#include "util/testutil.h"

static const char *const prompts[] = {"Hello",
                                      "import numpy as np",
                                      "Lucy wanted a cookie",
                                      "The quick brown fox",
                                      "Once upon a time",
                                      "Lily and Tom went to the park"};

static void check_model(const char *name)
{
    struct tu_engine *e = NULL;
    assert_int_equal(tu_engine_open(&e, name, NULL), 0);
    if (!e->model) {
        print_message("skip: %s not found\n", name);
        tu_engine_close(e);
        skip();
    }
    float *last = malloc((size_t)e->n_vocab * sizeof(float));
    assert_non_null(last);
    for (size_t i = 0; i < sizeof prompts / sizeof prompts[0]; i++) {
        hearth_token *ids = NULL, whole[64], one[64];
        size_t n          = 0;
        char err[256];
        assert_int_equal(hearth_tokenize(e->model, prompts[i], strlen(prompts[i]), true, false,
                                         &ids, &n, err, sizeof err),
                         HEARTH_OK);
        tu_engine_greedy(e, ids, (int32_t)n, (int32_t)n, whole, 64, last);
        tu_engine_greedy(e, ids, (int32_t)n, 1, one, 64, last);
        int same = 0;
        while (same < 64 && whole[same] == one[same])
            same++;
        print_message("%s \"%s\": %d of 64 greedy tokens equal\n", name, prompts[i], same);
        assert_int_equal(same, 64);
        free(ids);
    }
    free(last);
    tu_engine_close(e);
}

static void test_qwen3moe(void **state)
{
    (void)state;
    check_model("tiny-qwen3moe-bpe-q8_0.gguf");
}

static void test_gemma3(void **state)
{
    (void)state;
    check_model("tiny-gemma3-spm-q8_0.gguf");
}

static void test_qwen35moe(void **state)
{
    (void)state;
    check_model("tiny-qwen35moe-bpe-q8_0.gguf");
}

static void test_qwen35(void **state)
{
    (void)state;
    check_model("tiny-qwen35-bpe-q8_0.gguf");
}

static void test_gemma4(void **state)
{
    (void)state;
    check_model("tiny-gemma4-spm-q8_0.gguf");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_qwen3moe),  cmocka_unit_test(test_gemma3),
        cmocka_unit_test(test_qwen35moe), cmocka_unit_test(test_qwen35),
        cmocka_unit_test(test_gemma4),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
