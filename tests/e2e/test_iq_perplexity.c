/*
 * test_iq_perplexity.c: `hearth perplexity` on files of the IQ1..IQ3, TQ and
 * MXFP4 weight types against llama.cpp's figure for the same file
 * (perplexity-iq-llamacpp.tsv beside this file says how each was made),
 * within the row's bound: 0.5%, the tolerance ../shared/reference/README.md
 * gives lower-bit types, and 1% for the MoE file (the tsv says why).
 * models/tiny-llama-spm-iqmix.gguf, committed, holds all ten types (llama-quantize with an
 * importance matrix, which hearth's quantizer does not take); the TQ1_0, TQ2_0 and MXFP4_MOE files
 * are made here by `hearth quantize`, which writes llama-quantize's bytes for them (test_quantize).
 * Rows whose file is neither committed nor makeable here are reported and
 * passed over; they document the single-type files the figures came from.
 */
#include "util/testutil.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A file the test makes with hearth quantize: its name in the tsv, source, preset. */
static const struct {
    const char *model, *src, *preset;
    bool requant;
} made[] = {
    {"tiny-llama-spm-tq1_0.gguf", "tiny-llama-spm-f32.gguf", "TQ1_0", false},
    {"tiny-llama-spm-tq2_0.gguf", "tiny-llama-spm-f32.gguf", "TQ2_0", false},
    {"tiny-qwen3moe-bpe-mxfp4_moe.gguf", "tiny-qwen3moe-bpe-q8_0.gguf", "MXFP4_MOE", true},
};

/* "Final estimate: PPL = X" of `hearth perplexity`, or -1 with the reason printed. */
static double perplexity(const char *model, const char *text, const char *ctx)
{
    const char *argv[] = {tu_bin(), "perplexity", "-m", model, "-f", text,
                          "-c",     ctx,          "-t", "2",   NULL};
    char *out = NULL, *err = NULL;
    const int rc    = tu_run(argv, NULL, &out, &err, 300);
    const char *fin = out ? strstr(out, "Final estimate: PPL = ") : NULL;
    const double p  = rc == 0 && fin ? atof(fin + strlen("Final estimate: PPL = ")) : -1;
    if (p < 0)
        print_message("hearth perplexity %s exited %d: %s", model, rc, err ? err : "");
    free(out);
    free(err);
    return p;
}

/* Path of the tsv's model: committed, or made into dir; NULL (reason printed) if neither. */
static const char *model_path(const char *model, const char *dir, char *buf, size_t len)
{
    snprintf(buf, len, "%s/models/%s", HEARTH_TOP, model);
    if (access(buf, R_OK) == 0)
        return buf;
    for (size_t i = 0; i < sizeof made / sizeof made[0]; i++) {
        if (strcmp(made[i].model, model))
            continue;
        char rel[256], src[512];
        snprintf(rel, sizeof rel, "models/%s", made[i].src);
        const char *s = tu_shared(rel);
        if (!s) {
            print_message("skip %s: %s not found\n", model, rel);
            return NULL;
        }
        snprintf(src, sizeof src, "%s", s);
        snprintf(buf, len, "%s/%s", dir, model);
        const char *argv[] = {tu_bin(), "quantize", "-q", src, buf, made[i].preset, NULL, NULL};
        if (made[i].requant) { /* the source is Q8_0 */
            memmove(&argv[4], &argv[3], 3 * sizeof argv[0]);
            argv[3] = "--allow-requantize";
        }
        char *err    = NULL;
        const int rc = tu_run(argv, NULL, NULL, &err, 300);
        if (rc != 0)
            fail_msg("hearth quantize %s exited %d: %s", made[i].preset, rc, err);
        free(err);
        return buf;
    }
    print_message("pass over %s: not in the tree, and hearth quantize cannot make it\n", model);
    return NULL;
}

static void test_perplexity_matches_llama_cpp(void **state)
{
    (void)state;
    TU_SHARED_OR_SKIP(prose_shared, "reference/prose.txt");
    char prose[512];
    snprintf(prose, sizeof prose, "%s", prose_shared);
    char tsv[512];
    snprintf(tsv, sizeof tsv, "%s/tests/e2e/perplexity-iq-llamacpp.tsv", HEARTH_TOP);
    char *all = tu_read_file(tsv, NULL);
    assert_non_null(all);
    char *dir = tu_tmpdir(), *save = NULL;
    int checked = 0, types_seen = 0;
    for (char *line = strtok_r(all, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char model[128], text[64], ctx[16], path[600];
        double want, tol;
        if (line[0] == '#' ||
            sscanf(line, "%127s %63s %15s %lf %lf", model, text, ctx, &want, &tol) != 5)
            continue;
        assert_string_equal(text, "prose.txt");
        if (!model_path(model, dir, path, sizeof path))
            continue;
        const double got  = perplexity(path, prose, ctx);
        const double diff = fabs(got - want) / want * 100;
        print_message("%-34s hearth %.4f, llama.cpp %.4f, diff %.4f%% (max %.1f%%)\n", model, got,
                      want, diff, tol);
        assert_true(got > 0);
        assert_true(diff <= tol);
        checked++;
        types_seen += !strcmp(model, "tiny-llama-spm-iqmix.gguf");
    }
    free(all);
    tu_rmtree(dir);
    free(dir);
    /* the committed file alone carries all ten types: it must have been run */
    assert_int_equal(types_seen, 1);
    assert_true(checked >= 1);
}

/*
 * The Vulkan backend has no shaders for these types yet: -ngl with such a
 * file stops at load with the tensor and its type, never runs it wrongly.
 */
static void test_gpu_offload_refused_by_name(void **state)
{
    (void)state;
    char path[600];
    snprintf(path, sizeof path, "%s/models/tiny-llama-spm-iqmix.gguf", HEARTH_TOP);
    const char *argv[] = {tu_bin(), "run", "-m", path, "-ngl", "99", "-p", "x", "-n", "1", NULL};
    char *out = NULL, *err = NULL;
    const int rc = tu_run(argv, NULL, &out, &err, 120);
    if (err && strstr(err, "Vulkan device") && !strstr(err, "cannot compute")) {
        print_message("skip: no Vulkan device here: %s\n", err);
        free(out);
        free(err);
        skip();
    }
    assert_int_equal(rc, 1);
    assert_non_null(strstr(err, "tensor token_embd.weight has type iq3_xxs"));
    assert_non_null(strstr(err, "keep its layers on the CPU"));
    free(out);
    free(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_perplexity_matches_llama_cpp),
        cmocka_unit_test(test_gpu_offload_refused_by_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
