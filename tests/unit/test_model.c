/*
 * test_model.c: loading (src/model/model.c) refuses what it cannot run with
 * one sentence naming the cause: an unknown architecture, a missing tensor,
 * a tensor of the wrong shape. The files are real models rewritten with one
 * thing changed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "gguf/writer.h"
#include "hearth.h"
#include "util/testutil.h"

/*
 * Copies src to dst with general.architecture = arch, tensor `drop` left out
 * and, when window > 0, <arch>.attention.sliding_window = window added.
 */
static void rewrite_window(const char *src, const char *dst, const char *arch, const char *drop,
                           uint32_t window)
{
    char err[HEARTH_ERR_MAX];
    struct gguf_file *f;
    assert_int_equal(gguf_open(src, &f, err, sizeof err), HEARTH_OK);
    struct gguf_writer *w = gguf_writer_new();
    for (int64_t i = 0; i < gguf_n_kv(f); i++)
        assert_int_equal(gguf_writer_copy_kv(w, f, i, err, sizeof err), HEARTH_OK);
    assert_int_equal(
        gguf_writer_set_str(w, "general.architecture", arch, strlen(arch), err, sizeof err),
        HEARTH_OK);
    if (window > 0) {
        char key[64];
        snprintf(key, sizeof key, "%s.attention.sliding_window", arch);
        assert_int_equal(gguf_writer_set_u32(w, key, window, err, sizeof err), HEARTH_OK);
    }
    for (int64_t i = 0; i < gguf_n_tensors(f); i++) {
        const struct gguf_tensor *t = gguf_tensor(f, i);
        if (drop && !strcmp(t->name, drop))
            continue;
        assert_int_equal(
            gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, err, sizeof err),
            HEARTH_OK);
    }
    assert_int_equal(gguf_writer_begin(w, dst, err, sizeof err), HEARTH_OK);
    for (int64_t i = 0; i < gguf_n_tensors(f); i++) {
        const struct gguf_tensor *t = gguf_tensor(f, i);
        if (!(drop && !strcmp(t->name, drop)))
            assert_int_equal(gguf_writer_write(w, t->data, t->size, err, sizeof err), HEARTH_OK);
    }
    assert_int_equal(gguf_writer_finish(w, err, sizeof err), HEARTH_OK);
    gguf_writer_free(w);
    gguf_close(f);
}

static void rewrite(const char *src, const char *dst, const char *arch, const char *drop)
{
    rewrite_window(src, dst, arch, drop, 0);
}

static void expect_refusal(const char *path, enum hearth_status want, const char *says)
{
    char err[HEARTH_ERR_MAX] = "";
    struct hearth_model *m   = NULL;
    enum hearth_status st    = hearth_model_load(path, NULL, &m, err, sizeof err);
    print_message("%s\n", err);
    assert_int_equal(st, want);
    assert_null(m);
    assert_non_null(strstr(err, says));
}

static void test_unknown_architecture_is_named(void **state)
{
    (void)state;
    TU_MODEL_OR_SKIP(src, "stories260K.gguf");
    char *dir = tu_tmpdir(), path[512];
    snprintf(path, sizeof path, "%s/arch.gguf", dir);
    rewrite(src, path, "mamba", NULL);
    expect_refusal(path, HEARTH_EUNSUPPORTED, "architecture 'mamba' is not supported");
    tu_rmtree(dir);
    free(dir);
}

static void test_missing_tensor_is_named(void **state)
{
    (void)state;
    TU_MODEL_OR_SKIP(src, "stories260K.gguf");
    char *dir = tu_tmpdir(), path[512];
    snprintf(path, sizeof path, "%s/missing.gguf", dir);
    rewrite(src, path, "llama", "blk.2.ffn_up.weight");
    expect_refusal(path, HEARTH_EFORMAT, "blk.2.ffn_up.weight is missing");
    tu_rmtree(dir);
    free(dir);
}

static void test_rewritten_model_still_loads(void **state)
{
    (void)state;
    TU_MODEL_OR_SKIP(src, "stories260K.gguf");
    char *dir = tu_tmpdir(), path[512], err[HEARTH_ERR_MAX];
    snprintf(path, sizeof path, "%s/same.gguf", dir);
    rewrite(src, path, "llama", NULL);
    struct hearth_model *m = NULL;
    assert_int_equal(hearth_model_load(path, NULL, &m, err, sizeof err), HEARTH_OK);
    assert_string_equal(hearth_model_arch(m), "llama");
    assert_int_equal(hearth_model_n_vocab(m), 512);
    hearth_model_free(m);
    tu_rmtree(dir);
    free(dir);
}

/*
 * llama.cpp reads attention.sliding_window for the architectures that have
 * windows (gemma3) and ignores it elsewhere: a llama file carrying the key
 * attends over everything, giving the same logits as without it.
 */
static void test_sliding_window_key_is_ignored_by_llama(void **state)
{
    (void)state;
    TU_MODEL_OR_SKIP(src, "stories260K.gguf");
    char *dir = tu_tmpdir(), path[512], err[HEARTH_ERR_MAX];
    snprintf(path, sizeof path, "%s/window.gguf", dir);
    rewrite_window(src, path, "llama", NULL, 4);
    struct hearth_model *m[2]   = {NULL, NULL};
    struct hearth_context *c[2] = {NULL, NULL};
    assert_int_equal(hearth_model_load(src, NULL, &m[0], err, sizeof err), HEARTH_OK);
    assert_int_equal(hearth_model_load(path, NULL, &m[1], err, sizeof err), HEARTH_OK);
    struct hearth_context_params cp = hearth_context_default_params();
    cp.n_ctx                        = 64;
    hearth_token tok[40];
    int32_t pos[40], seq[40] = {0};
    for (int32_t i = 0; i < 40; i++) {
        tok[i] = i == 0 ? 1 : 3 + (i * 37) % 500;
        pos[i] = i;
    }
    const float *l[2];
    for (int i = 0; i < 2; i++) {
        assert_int_equal(hearth_context_new(m[i], &cp, &c[i], err, sizeof err), HEARTH_OK);
        struct hearth_batch b = {40, tok, pos, seq, NULL};
        assert_int_equal(hearth_decode(c[i], &b, err, sizeof err), HEARTH_OK);
        l[i] = hearth_get_logits(c[i], 39);
    }
    /* a 4-token window over 40 tokens would change the last token's logits */
    assert_memory_equal(l[0], l[1], (size_t)hearth_model_n_vocab(m[0]) * sizeof(float));
    for (int i = 0; i < 2; i++) {
        hearth_context_free(c[i]);
        hearth_model_free(m[i]);
    }
    tu_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rewritten_model_still_loads),
        cmocka_unit_test(test_unknown_architecture_is_named),
        cmocka_unit_test(test_missing_tensor_is_named),
        cmocka_unit_test(test_sliding_window_key_is_ignored_by_llama),
    };
    return cmocka_run_group_tests_name("model", tests, NULL, NULL);
}
