/*
 * test_run.c: `hearth run` end to end. The oracle is llama.cpp's greedy
 * output in ../shared/reference/greedy.tsv: every row must match byte for
 * byte. Also the CLI's exit codes on bad input.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "util/testutil.h"

/*
 * Runs every row of a greedy TSV (model, prompt, n, escaped continuation;
 * lines starting with # and the header skipped) and asserts hearth's text is
 * llama.cpp's byte for byte.
 */
/*
 * Runs every row of a greedy TSV (model, prompt, n, [ctk, ctv,] continuation)
 * and wants llama.cpp's continuation byte for byte; kv_cols: the rows name
 * the K and V cache types.
 */
static void check_greedy_tsv(const char *tsv, const char *label, bool kv_cols)
{
    char *text = tu_read_file(tsv, NULL);
    assert_non_null(text);
    int rows = 0, matched = 0;
    char *save  = NULL;
    bool header = true;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '#')
            continue;
        if (header) {
            header = false;
            continue;
        }
        const int nf = kv_cols ? 6 : 4;
        char *f[6], *s2 = NULL;
        f[0] = strtok_r(line, "\t", &s2);
        for (int i = 1; i < nf; i++)
            f[i] = strtok_r(NULL, i == nf - 1 ? "" : "\t", &s2);
        assert_non_null(f[nf - 1]);
        char *want = f[nf - 1];
        tu_unescape(want);
        const char *model = tu_model(f[0]);
        assert_non_null(model);
        const char *argv[] = {tu_bin(),
                              "run",
                              "-m",
                              model,
                              "-p",
                              f[1],
                              "-n",
                              f[2],
                              "--temp",
                              "0",
                              "-t",
                              "2",
                              kv_cols ? "-ctk" : NULL,
                              f[3],
                              "-ctv",
                              f[4],
                              NULL};
        char *out = NULL, *err = NULL;
        int rc = tu_run(argv, NULL, &out, &err, 120);
        rows++;
        if (rc == 0 && !strcmp(out, want)) {
            matched++;
        } else {
            print_message("row %d (%s, \"%s\"): rc %d\n  want: %s\n  got:  %s\n  stderr: %s\n",
                          rows, f[0], f[1], rc, want, out, err);
        }
        free(out);
        free(err);
    }
    print_message("%s: %d of %d rows match llama.cpp byte for byte\n", label, matched, rows);
    free(text);
    assert_true(rows > 0);
    assert_int_equal(matched, rows);
}

static void test_greedy_matches_llama_cpp(void **state)
{
    (void)state;
    TU_SHARED_OR_SKIP(tsv, "reference/greedy.tsv");
    check_greedy_tsv(tsv, "greedy.tsv", false);
}

/*
 * Prompts whose continuation passes near-ties between two tokens: they match
 * only if short batches and decode steps take llama.cpp's per-key attention
 * arithmetic (attn_rows_f16), not the tiled one.
 */
static void test_greedy_ties_match_llama_cpp(void **state)
{
    (void)state;
    TU_SHARED_OR_SKIP(tsv, "reference/greedy-ties.tsv");
    check_greedy_tsv(tsv, "greedy-ties.tsv", false);
}

/* The newer architectures' rows, recorded in this repository (see the file's header). */
static void test_greedy_models_match_llama_cpp(void **state)
{
    (void)state;
    TU_MODEL_OR_SKIP(model, "tiny-gemma3-spm-q8_0.gguf");
    TU_MODEL_OR_SKIP(moe, "tiny-qwen3moe-bpe-q8_0.gguf");
    TU_MODEL_OR_SKIP(hybrid, "tiny-qwen35moe-bpe-q8_0.gguf");
    TU_MODEL_OR_SKIP(dense, "tiny-qwen3-bpe-q8_0.gguf");
    TU_MODEL_OR_SKIP(dense_hybrid, "tiny-qwen35-bpe-q8_0.gguf");
    TU_MODEL_OR_SKIP(dense_mtp, "tiny-qwen35-mtp-bpe-q8_0.gguf");
    TU_MODEL_OR_SKIP(gemma4, "tiny-gemma4-spm-q8_0.gguf");
    (void)moe;
    (void)hybrid;
    (void)dense;
    (void)dense_hybrid;
    (void)dense_mtp;
    (void)gemma4;
    check_greedy_tsv(HEARTH_TOP "/tests/e2e/greedy-llamacpp.tsv", "greedy-llamacpp.tsv", false);
}

/* Quantized K/V caches (q8_0, q4_0 for K) against llama.cpp's flash-attention path. */
static void test_greedy_quantized_cache_matches_llama_cpp(void **state)
{
    (void)state;
    TU_MODEL_OR_SKIP(model, "tiny-llama-spm-f32.gguf");
    (void)model;
    check_greedy_tsv(HEARTH_TOP "/tests/e2e/greedy-kv-llamacpp.tsv", "greedy-kv-llamacpp.tsv",
                     true);
}

/*
 * A Qwen3.5 file with MTP layers (qwen35moe, and the dense qwen35) loads; the
 * layers are left unloaded with a note naming what would use them, not
 * silently.
 */
static void mtp_note(const char *file, const char *note)
{
    TU_MODEL_OR_SKIP(model, file);
    const char *argv[] = {tu_bin(), "run",    "-m", model, "-p", "Hello", "-n",
                          "4",      "--temp", "0",  "-t",  "2",  NULL};
    char *out = NULL, *err = NULL;
    assert_int_equal(tu_run(argv, NULL, &out, &err, 60), 0);
    assert_non_null(strstr(err, note));
    assert_true(strlen(out) > 0);
    free(out);
    free(err);
}

static void test_mtp_layers_ignored_with_a_note(void **state)
{
    (void)state;
    mtp_note("tiny-qwen35moe-mtp-bpe-q8_0.gguf",
             "qwen35moe: 1 multi-token-prediction layer not loaded (--spec mtp drafts with it)");
    mtp_note("tiny-qwen35-mtp-bpe-q8_0.gguf",
             "qwen35: 1 multi-token-prediction layer not loaded (--spec mtp drafts with it)");
}

static void test_seeded_sampling_is_reproducible(void **state)
{
    (void)state;
    TU_MODEL_OR_SKIP(model, "stories260K.gguf");
    const char *argv[] = {tu_bin(),           "run", "-m", model,    "-p",
                          "Once upon a time", "-n",  "40", "--temp", "0.9",
                          "--seed",           "42",  "-t", "1",      NULL};
    char *a = NULL, *b = NULL;
    assert_int_equal(tu_run(argv, NULL, &a, NULL, 60), 0);
    assert_int_equal(tu_run(argv, NULL, &b, NULL, 60), 0);
    assert_true(strlen(a) > 20);
    assert_string_equal(a, b);
    free(a);
    free(b);
}

static void test_timings_on_stderr(void **state)
{
    (void)state;
    TU_MODEL_OR_SKIP(model, "stories260K.gguf");
    const char *argv[] = {tu_bin(), "run", "-m", model, "-p", "Hi", "-n", "4", "--temp", "0", NULL};
    char *out = NULL, *err = NULL;
    assert_int_equal(tu_run(argv, NULL, &out, &err, 60), 0);
    assert_non_null(strstr(err, "load:"));
    assert_non_null(strstr(err, "prefill:"));
    assert_non_null(strstr(err, "decode:"));
    assert_null(strstr(out, "tok/s"));
    free(out);
    free(err);
}

static void test_chat_two_turns_reuse_the_conversation(void **state)
{
    (void)state;
    TU_SHARED_OR_SKIP(model, "models/tiny-qwen2-bpe-f16.gguf");
    const char *argv[] = {tu_bin(), "run", "-m",     model, "--chat", "-sys", "Be brief.",
                          "-n",     "6",   "--temp", "0",   "-t",     "2",    NULL};
    char *out = NULL, *err = NULL;
    assert_int_equal(tu_run(argv, "Hello there\n\nHow are you?\n", &out, &err, 120), 0);
    int lines = 0;
    for (const char *c = out; *c; c++)
        lines += *c == '\n';
    assert_int_equal(lines, 2); /* one reply per user line; the empty line is skipped */
    assert_non_null(strstr(err, "the model's own (Jinja)")); /* its chatml.jinja, interpreted */
    /* the second turn's prompt holds the whole first exchange, yet it prefills fewer
     * tokens than the first turn did alone: the cached conversation is reused */
    const char *pf = strstr(err, "prefill: ");
    assert_non_null(pf);
    long both = atol(pf + strlen("prefill: "));
    free(out);
    free(err);
    assert_int_equal(tu_run(argv, "Hello there\n", &out, &err, 120), 0);
    pf = strstr(err, "prefill: ");
    assert_non_null(pf);
    long first = atol(pf + strlen("prefill: "));
    print_message("first turn prefilled %ld tokens, both turns %ld\n", first, both);
    assert_true(first > 10 && both > first && both - first < first);
    free(out);
    free(err);
}

static void expect_exit(const char *const argv[], int want, const char *err_has)
{
    char *out = NULL, *err = NULL;
    int rc = tu_run(argv, NULL, &out, &err, 60);
    if (rc != want || (err_has && !strstr(err, err_has)))
        print_message("rc %d (want %d), stderr: %s\n", rc, want, err);
    assert_int_equal(rc, want);
    if (err_has)
        assert_non_null(strstr(err, err_has));
    free(out);
    free(err);
}

static void test_usage_errors_exit_2(void **state)
{
    (void)state;
    const char *no_model[] = {tu_bin(), "run", "-p", "hi", NULL};
    expect_exit(no_model, 2, "needs -m");
    const char *bad_n[] = {tu_bin(), "run", "-m", "x.gguf", "-p", "hi", "-n", "lots", NULL};
    expect_exit(bad_n, 2, "-n expects");
    const char *bad_opt[] = {tu_bin(), "run", "--frobnicate", NULL};
    expect_exit(bad_opt, 2, "unknown option");
    const char *missing_value[] = {tu_bin(), "run", "-m", NULL};
    expect_exit(missing_value, 2, "needs a value");
    const char *sys_alone[] = {tu_bin(), "run", "-m", "x.gguf", "-p", "hi", "-sys", "x", NULL};
    expect_exit(sys_alone, 2, "-sys goes with --chat");
    const char *chat_and_prompt[] = {tu_bin(), "run", "-m", "x.gguf", "-p", "hi", "--chat", NULL};
    expect_exit(chat_and_prompt, 2, "needs one of -p PROMPT, -f FILE or --chat");
    const char *no_cmd[] = {tu_bin(), "frobnicate", NULL};
    expect_exit(no_cmd, 2, "unknown command");
}

static void test_runtime_errors_exit_1(void **state)
{
    (void)state;
    const char *missing[] = {tu_bin(), "run", "-m", "/nonexistent/model.gguf", "-p", "hi", NULL};
    expect_exit(missing, 1, "hearth run: gguf: cannot open");
    char *dir = tu_tmpdir();
    char path[512];
    snprintf(path, sizeof path, "%s/junk.gguf", dir);
    assert_int_equal(tu_write_file(path, "GGUF\x03\0\0\0garbage", 15), 0);
    const char *junk[] = {tu_bin(), "run", "-m", path, "-p", "hi", NULL};
    expect_exit(junk, 1, "gguf:");
    tu_rmtree(dir);
    free(dir);
}

/* Layers in stages write the same greedy text; a GPU asked for, or a bad split, is refused. */
static void test_layer_split_same_text(void **state)
{
    (void)state;
    TU_MODEL_OR_SKIP(model, "stories260K.gguf");
    const char *one[]   = {tu_bin(), "run", "-m", model, "-p", "Once upon a time", "-n", "48",
                           "--temp", "0",   "-t", "2",   NULL};
    const char *three[] = {
        tu_bin(), "run",    "-m", model, "-p", "Once upon a time", "-n",
        "48",     "--temp", "0",  "-t",  "2",  "--layer-split",    "cpu:1,cpu:3,cpu:1",
        NULL};
    char *a = NULL, *b = NULL;
    assert_int_equal(tu_run(one, NULL, &a, NULL, 60), 0);
    assert_int_equal(tu_run(three, NULL, &b, NULL, 60), 0);
    print_message("one stage: %s\n", a);
    assert_true(strlen(a) > 40);
    assert_string_equal(a, b);
    free(b);
    /* every layer on vulkan0 writes the CPU's text; without a device, a clear refusal */
    const char *ngl[] = {tu_bin(), "run", "-m",     model, "-p", "Once upon a time",
                         "-n",     "48",  "--temp", "0",   "-t", "2",
                         "-ngl",   "99",  NULL};
    char *c = NULL, *e = NULL;
    if (tu_run(ngl, NULL, &c, &e, 120) == 0) {
        print_message("-ngl 99: %s\n", c);
        assert_string_equal(c, a);
    } else {
        print_message("-ngl 99 refused: %s", e);
        assert_non_null(strstr(e, "Vulkan device 0 cannot be used"));
    }
    free(c);
    free(e);
    const char *none[] = {tu_bin(), "run",           "-m",        model, "-p",
                          "hi",     "--layer-split", "vulkan9:5", NULL};
    expect_exit(none, 1, "Vulkan device 9 cannot be used");
    free(a);
    const char *bad[] = {tu_bin(), "run", "-m", model, "-p", "hi", "--layer-split", "cpu:9", NULL};
    expect_exit(bad, 1, "places more than the model's 5 layers");
}

/* Whether a Vulkan device can be used here; else the "vulkan-test: skipped" line. */
static bool have_vulkan(void)
{
    char why[256];
    if (backend_vulkan(0, why, sizeof why))
        return true;
    print_message("vulkan-test: skipped: %s\n", why);
    return false;
}

/*
 * -ngl, --device and --tensor-split that do not fit: exit 1 and one sentence
 * naming the fault, on any machine (what the flags say is checked before
 * whether the devices exist).
 */
static void test_bad_placements_exit_1(void **state)
{
    TU_MODEL_OR_SKIP(model, "stories260K.gguf");
    static const struct {
        const char *opt[6], *want;
    } cases[] = {
        {{"-ngl", "3", "--tensor-split", "1:1"}, "has 2 shares but 1 device is given"},
        {{"-ngl", "3", "--tensor-split", "3,1"}, "has 2 shares but 1 device is given"},
        {{"-ngl", "3", "--device", "vulkan0,vulkan1", "--tensor-split", "1:1:1"},
         "has 3 shares but 2 devices are given"},
        {{"-ngl", "3", "--device", "vulkan0,vulkan1", "--tensor-split", "1:-1"},
         "entry '-1' is negative"},
        {{"-ngl", "3", "--tensor-split", "lots"}, "entry 'lots' is not a number"},
        {{"-ngl", "3", "--device", "vulkan0,vulkan1", "--tensor-split", "0:0"},
         "gives every device a zero share"},
        {{"--gpu-layers", "3", "--device", "vulkan0,vulkan0"}, "names vulkan0 twice"},
        {{"-ngl", "3", "--device", "gpu0"}, "device 'gpu0' is not a GPU"},
        {{"--tensor-split", "1"}, "n_gpu_layers is 0"},
        {{"-ngl", "2", "--layer-split", "cpu:5"}, "layer_split places every layer itself"},
        /* a device this machine lacks, with or without Vulkan */
        {{"--gpu-layers", "3", "--device", "vulkan9,vulkan0"}, "Vulkan device 9 cannot be used"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *argv[16] = {tu_bin(), "run", "-m", model, "-p", "hi", "-n", "4"};
        int n                = 8;
        for (int j = 0; j < 6 && cases[i].opt[j]; j++)
            argv[n++] = cases[i].opt[j];
        argv[n] = NULL;
        expect_exit(argv, 1, cases[i].want);
    }
    const char *bad_ngl[] = {tu_bin(), "run",          "-m",   model, "-p",
                             "hi",     "--gpu-layers", "many", NULL};
    expect_exit(bad_ngl, 2, "--gpu-layers expects an integer");
}

/*
 * -ngl where the loader finds no Vulkan driver (or the build has no
 * Vulkan): exit 1, the sentence naming that cause.
 */
static void test_ngl_without_vulkan_names_the_cause(void **state)
{
    TU_MODEL_OR_SKIP(model, "stories260K.gguf");
    setenv("VK_ICD_FILENAMES", "/nonexistent/hearth-no-icd.json", 1);
    setenv("VK_DRIVER_FILES", "/nonexistent/hearth-no-icd.json", 1);
    const char *argv[] = {tu_bin(), "run", "-m", model, "-p", "hi", "-ngl", "2", NULL};
    char *out = NULL, *err = NULL;
    const int rc = tu_run(argv, NULL, &out, &err, 60);
    unsetenv("VK_ICD_FILENAMES");
    unsetenv("VK_DRIVER_FILES");
    print_message("rc %d: %s", rc, err);
    assert_int_equal(rc, 1);
    assert_non_null(
        strstr(err, "n_gpu_layers 2 asks for a GPU, but Vulkan device 0 cannot be used"));
    assert_true(strstr(err, "no Vulkan driver") || strstr(err, "no Vulkan loader") ||
                strstr(err, "this build has no Vulkan backend"));
    free(out);
    free(err);
}

/* Runs argv with HEARTH_VK_MEMORY_MIB=mib; the exit status, stderr in *err. */
static int run_with_memory(const char *const argv[], const char *mib, char **err)
{
    setenv("HEARTH_VK_MEMORY_MIB", mib, 1);
    char *out    = NULL;
    const int rc = tu_run(argv, NULL, &out, err, 120);
    unsetenv("HEARTH_VK_MEMORY_MIB");
    print_message("%s MiB: rc %d, %s", mib, rc, *err);
    free(out);
    return rc;
}

/*
 * A model larger than the device's memory (HEARTH_VK_MEMORY_MIB stands in
 * for a small GPU): refused at load with both figures, the weights first,
 * then with the context's K/V and activations; it loads with room, or with
 * fewer layers offloaded. tiny-llama f32: 13.0 MiB of weights, 4 layers.
 */
static void test_device_memory_is_checked_at_load(void **state)
{
    TU_MODEL_OR_SKIP(model, "tiny-llama-spm-f32.gguf");
    if (!have_vulkan())
        skip();
    const char *all[] = {tu_bin(), "run", "-m", model, "-p",           "Once", "-n", "4",
                         "--temp", "0",   "-c", "256", "--gpu-layers", "99",   NULL};
    char *err         = NULL;
    double w = 0, have = 0, total = 0, kv = 0, act = 0;
    assert_int_equal(run_with_memory(all, "8", &err), 1);
    const char *s = strstr(err, "model: vulkan0 would hold ");
    assert_non_null(s);
    assert_int_equal(sscanf(s,
                            "model: vulkan0 would hold %lf MiB of weights (layers 0-3 and the "
                            "output) but has %lf MiB of device memory;",
                            &w, &have),
                     2);
    assert_true(w > 12.5 && w < 13.1); /* the file is 13.02 MiB, tokenizer included */
    assert_true(have == 8.0);
    assert_non_null(strstr(err, "offload fewer layers (a smaller -ngl)"));
    free(err);
    /* the weights fit in 16 MiB; with a context's K/V and buffers they do not */
    assert_int_equal(run_with_memory(all, "16", &err), 1);
    assert_non_null(s = strstr(err, "context: vulkan0 would hold "));
    assert_int_equal(sscanf(s,
                            "context: vulkan0 would hold %lf MiB (weights %lf, K/V %lf, "
                            "activations and logits %lf for layers 0-3 and the output) but has "
                            "%lf MiB",
                            &total, &w, &kv, &act, &have),
                     5);
    assert_true(have == 16.0 && total > have);
    assert_true(fabs(total - (w + kv + act)) < 0.2);
    assert_true(kv > 0 && act > 0 && w > 12.5);
    free(err);
    /* room enough: the whole model; or one layer (3.0 MiB, and 6.1 MiB of buffers for a
     * batch of 512) where the whole does not fit */
    assert_int_equal(run_with_memory(all, "64", &err), 0);
    free(err);
    assert_int_equal(run_with_memory(all, "12", &err), 1);
    free(err);
    const char *one[] = {tu_bin(), "run", "-m", model, "-p",   "Once", "-n", "4",
                         "--temp", "0",   "-c", "256", "-ngl", "1",    NULL};
    assert_int_equal(run_with_memory(one, "12", &err), 0);
    free(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_matches_llama_cpp),
        cmocka_unit_test(test_greedy_ties_match_llama_cpp),
        cmocka_unit_test(test_greedy_models_match_llama_cpp),
        cmocka_unit_test(test_greedy_quantized_cache_matches_llama_cpp),
        cmocka_unit_test(test_mtp_layers_ignored_with_a_note),
        cmocka_unit_test(test_seeded_sampling_is_reproducible),
        cmocka_unit_test(test_timings_on_stderr),
        cmocka_unit_test(test_chat_two_turns_reuse_the_conversation),
        cmocka_unit_test(test_layer_split_same_text),
        cmocka_unit_test(test_bad_placements_exit_1),
        cmocka_unit_test(test_ngl_without_vulkan_names_the_cause),
        cmocka_unit_test(test_device_memory_is_checked_at_load),
        cmocka_unit_test(test_usage_errors_exit_2),
        cmocka_unit_test(test_runtime_errors_exit_1),
    };
    return cmocka_run_group_tests_name("e2e_run", tests, NULL, NULL);
}
