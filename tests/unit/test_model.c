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

/* Copies src to dst with general.architecture = arch and tensor `drop` left out. */
static void rewrite(const char *src, const char *dst, const char *arch, const char *drop)
{
    char err[HEARTH_ERR_MAX];
    struct gguf_file *f;
    assert_int_equal(gguf_open(src, &f, err, sizeof err), HEARTH_OK);
    struct gguf_writer *w = gguf_writer_new();
    for (int64_t i = 0; i < gguf_n_kv(f); i++)
        assert_int_equal(gguf_writer_copy_kv(w, f, i, err, sizeof err), HEARTH_OK);
    assert_int_equal(gguf_writer_set_str(w, "general.architecture", arch, strlen(arch), err,
                                         sizeof err), HEARTH_OK);
    for (int64_t i = 0; i < gguf_n_tensors(f); i++) {
        const struct gguf_tensor *t = gguf_tensor(f, i);
        if (drop && !strcmp(t->name, drop))
            continue;
        assert_int_equal(gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, err,
                                                sizeof err), HEARTH_OK);
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

static void expect_refusal(const char *path, enum hearth_status want, const char *says)
{
    char err[HEARTH_ERR_MAX] = "";
    struct hearth_model *m = NULL;
    enum hearth_status st = hearth_model_load(path, NULL, &m, err, sizeof err);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rewritten_model_still_loads),
        cmocka_unit_test(test_unknown_architecture_is_named),
        cmocka_unit_test(test_missing_tensor_is_named),
    };
    return cmocka_run_group_tests_name("model", tests, NULL, NULL);
}
