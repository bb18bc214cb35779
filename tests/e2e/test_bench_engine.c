/*
 * test_bench_engine.c: `hearth bench-engine` run as a real process on a
 * shared model: the lines it prints, their arithmetic (decode GB/s is the
 * weights times tok/s), the tests -p 0 and -n 0 leave out, and bad usage.
 * No figure is held to a speed: CI's machines are shared.
 */
#include "backend/backend.h"
#include "gguf/gguf.h"
#include "util/testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Runs `hearth bench-engine args...` (NULL-terminated, at most 20); returns the exit status. */
static int bench(const char *const *args, char **out, char **err)
{
    const char *argv[24] = {tu_bin(), "bench-engine"};
    int n                = 2;
    for (; args[n - 2] && n < 23; n++)
        argv[n] = args[n - 2];
    argv[n] = NULL;
    int rc  = tu_run(argv, NULL, out, err, 300);
    print_message("# rc=%d stdout: %s# stderr: %s\n", rc, *out ? *out : "", *err ? *err : "");
    return rc;
}

/* The line of out that starts with prefix, or fails. */
static const char *line_of(const char *out, const char *prefix)
{
    for (const char *p = out; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (!strncmp(p, prefix, strlen(prefix)))
            return p;
    fail_msg("no line starting \"%s\" in:\n%s", prefix, out);
    return NULL;
}

static void test_figures_and_their_arithmetic(void **state)
{
    TU_MODEL_OR_SKIP(path, "stories260K.gguf");
    const char *args[] = {"-m", path, "-t", "1", "-p", "16", "-n", "8", "-r", "1", NULL};
    char *out = NULL, *err = NULL;
    assert_int_equal(bench(args, &out, &err), 0);

    double mib = 0, pp = 0, tg = 0, reads = 0, ceiling = 0;
    int threads = 0, share = -1;
    assert_int_equal(sscanf(strstr(line_of(out, "model: "), ", ") + 2,
                            "%lf MiB of weights, %d threads", &mib, &threads),
                     2);
    assert_int_equal(threads, 1);
    assert_true(mib > 0.5 && mib < 2.0);         /* stories260K: about 1.1 MiB */
    assert_null(strstr(out, "\na token reads")); /* dense: a token reads every weight */
    assert_int_equal(sscanf(line_of(out, "pp16: "), "pp16: %lf tok/s", &pp), 1);
    assert_int_equal(sscanf(line_of(out, "tg8: "), "tg8: %lf tok/s", &tg), 1);
    assert_true(pp > 0 && tg > 0);
    assert_int_equal(sscanf(line_of(out, "decode reads "),
                            "decode reads %lf GB/s (weights a token reads x tok/s); measured "
                            "read bandwidth "
                            "%lf GB/s; share %d%%",
                            &reads, &ceiling, &share),
                     3);
    assert_true(ceiling > 0);
    /* the printed figures agree with each other, within what their printed digits round off */
    const double lo = (mib - 0.05) * 1048576.0 * (tg - 0.05) / 1e9 - 0.005;
    const double hi = (mib + 0.05) * 1048576.0 * (tg + 0.05) / 1e9 + 0.005;
    if (reads < lo || reads > hi)
        fail_msg("decode reads %.2f GB/s, but %.1f MiB x %.1f tok/s is %.2f..%.2f", reads, mib, tg,
                 lo, hi);
    if (abs(share - (int)lround(100 * reads / ceiling)) > 2)
        fail_msg("share %d%% is not %.2f / %.2f", share, reads, ceiling);
    assert_int_equal(err[0], 0);
    free(out);
    free(err);
}

/*
 * The prefill's TOP/s is its tok/s times the operations of the prompt,
 * derived here from the file on its own: every layer matrix's rows x
 * columns, two operations per multiply-add, plus attention's score and
 * value products over the keys each position sees; and the int8 peak is
 * measured beside it.
 */
static void test_prefill_ops_against_the_file(void **state)
{
    TU_MODEL_OR_SKIP(path, "tiny-llama-spm-q8_0.gguf");
    const char *args[] = {"-m", path, "-t", "1", "-p", "24", "-n", "0", "-r", "1", NULL};
    char *out = NULL, *err = NULL;
    assert_int_equal(bench(args, &out, &err), 0);
    double pp = 0, tops = 0;
    assert_int_equal(sscanf(line_of(out, "pp24: "), "pp24: %lf tok/s", &pp), 1);
    assert_int_equal(sscanf(line_of(out, "prefill "), "prefill %lf TOP/s", &tops), 1);

    struct gguf_file *f = NULL;
    char gerr[256];
    assert_int_equal(gguf_open(path, &f, gerr, sizeof gerr), HEARTH_OK);
    uint32_t n_layer = 0, n_head = 0, n_embd = 0;
    assert_true(gguf_get_u32(f, "llama.block_count", &n_layer));
    assert_true(gguf_get_u32(f, "llama.attention.head_count", &n_head));
    assert_true(gguf_get_u32(f, "llama.embedding_length", &n_embd));
    double macs = 0;
    for (int64_t i = 0; i < gguf_n_tensors(f); i++) {
        const struct gguf_tensor *t = gguf_tensor(f, i);
        if (!strncmp(t->name, "blk.", 4) && t->n_dims == 2)
            macs += (double)t->ne[0] * (double)t->ne[1];
    }
    gguf_close(f);
    double keys = 0;
    for (int p = 0; p < 24; p++)
        keys += p + 1; /* position p sees keys 0..p */
    const double ops  = 2 * macs * 24 + 4.0 * n_head * (n_embd / n_head) * keys * n_layer;
    const double want = ops * pp / 24 / 1e12;
    /* what the printed digits round off: pp's one decimal, and %.4g's half a unit in the
     * fourth digit (at most 5e-4 of the figure) */
    if (fabs(tops - want) > want * (0.05 / pp + 5e-4))
        fail_msg("prefill %.6g TOP/s, but %.0f operations per 24 tokens at %.1f tok/s is %.6g",
                 tops, ops, pp, want);
    const char *peak = strstr(line_of(out, "prefill "), "measured int8 peak ");
    if (peak) { /* tables without a probe say so instead */
        double p = 0;
        assert_int_equal(sscanf(peak, "measured int8 peak %lf TOP/s", &p), 1);
        assert_true(p > 0);
    } else {
        assert_non_null(strstr(line_of(out, "prefill "), "no int8 peak probe"));
    }
    free(out);
    free(err);
}

/* A mixture of experts' token reads only its routed experts: the bandwidth figure counts those. */
static void test_moe_counts_the_routed_experts(void **state)
{
    TU_MODEL_OR_SKIP(path, "tiny-qwen3moe-bpe-q8_0.gguf");
    const char *args[] = {"-m", path, "-t", "1", "-p", "0", "-n", "8", "-r", "1", NULL};
    char *out = NULL, *err = NULL;
    assert_int_equal(bench(args, &out, &err), 0);
    double mib = 0, token_mib = 0, tg = 0, reads = 0, ceiling = 0;
    int threads = 0, share = -1;
    assert_int_equal(sscanf(strstr(line_of(out, "model: "), ", ") + 2,
                            "%lf MiB of weights, %d threads", &mib, &threads),
                     2);
    assert_int_equal(sscanf(line_of(out, "a token reads "), "a token reads %lf MiB", &token_mib),
                     1);
    /* 8 experts, 2 used: the experts' stacks count a quarter; attention and embeddings whole */
    assert_true(token_mib > 0.1 * mib && token_mib < 0.9 * mib);
    assert_int_equal(sscanf(line_of(out, "tg8: "), "tg8: %lf tok/s", &tg), 1);
    assert_int_equal(sscanf(line_of(out, "decode reads "),
                            "decode reads %lf GB/s (weights a token reads x tok/s); measured "
                            "read bandwidth %lf GB/s; share %d%%",
                            &reads, &ceiling, &share),
                     3);
    const double lo = (token_mib - 0.05) * 1048576.0 * (tg - 0.05) / 1e9 - 0.005;
    const double hi = (token_mib + 0.05) * 1048576.0 * (tg + 0.05) / 1e9 + 0.005;
    if (reads < lo || reads > hi)
        fail_msg("decode reads %.2f GB/s, but %.1f MiB x %.1f tok/s is %.2f..%.2f", reads,
                 token_mib, tg, lo, hi);
    free(out);
    free(err);
}

static void test_zero_skips_a_test(void **state)
{
    TU_MODEL_OR_SKIP(path, "stories260K.gguf");
    char *out = NULL, *err = NULL;
    const char *no_tg[] = {"-m", path, "-t", "1", "-p", "8", "-n", "0", "-r", "1", NULL};
    assert_int_equal(bench(no_tg, &out, &err), 0);
    line_of(out, "pp8: ");
    assert_null(strstr(out, "tg"));
    assert_null(strstr(out, "decode reads"));
    free(out);
    free(err);

    const char *no_pp[] = {"-m", path, "-t", "1", "-p", "0", "-n", "4", "-r", "1", NULL};
    assert_int_equal(bench(no_pp, &out, &err), 0);
    line_of(out, "tg4: ");
    line_of(out, "decode reads ");
    assert_null(strstr(out, "pp"));
    free(out);
    free(err);
}

/* -d starts both tests from a filled cache, in the K/V types -ctk and -ctv name. */
static void test_depth_and_cache_types(void **state)
{
    TU_MODEL_OR_SKIP(path, "tiny-llama-spm-q8_0.gguf");
    const char *args[] = {"-m", path, "-t", "1", "-p",   "8",    "-n", "4",
                          "-d", "40", "-r", "1", "-ctk", "q8_0", NULL};
    char *out = NULL, *err = NULL;
    assert_int_equal(bench(args, &out, &err), 0);
    assert_non_null(strstr(line_of(out, "model: "), ", K/V q8_0/f16, depth 40\n"));
    double pp = 0, tg = 0;
    assert_int_equal(sscanf(line_of(out, "pp8: "), "pp8: %lf tok/s", &pp), 1);
    assert_int_equal(sscanf(line_of(out, "tg4: "), "tg4: %lf tok/s", &tg), 1);
    assert_true(pp > 0 && tg > 0);
    free(out);
    free(err);
    /* stories260K's heads of 8 values do not fill a q8_0 block of 32: refused, with the reason */
    TU_MODEL_OR_SKIP(small, "stories260K.gguf");
    const char *bad[] = {"-m", small, "-t", "1", "-p", "8", "-n", "4", "-ctv", "q8_0", NULL};
    assert_int_equal(bench(bad, &out, &err), 1);
    assert_non_null(strstr(err, "blocks of 32"));
    free(out);
    free(err);
}

static void test_bad_usage(void **state)
{
    (void)state;
    char *out = NULL, *err = NULL;
    const char *no_model[] = {"-p", "8", NULL};
    assert_int_equal(bench(no_model, &out, &err), 2);
    assert_true(!strncmp(err, "hearth bench-engine: needs -m MODEL\n", 36));
    free(out);
    free(err);

    const char *zero_threads[] = {"-m", "x.gguf", "-t", "0", NULL};
    assert_int_equal(bench(zero_threads, &out, &err), 2);
    assert_non_null(strstr(err, "-t expects an integer in 1..1024, got '0'"));
    free(out);
    free(err);

    const char *unknown[] = {"-m", "x.gguf", "--bogus", "1", NULL};
    assert_int_equal(bench(unknown, &out, &err), 2);
    assert_non_null(strstr(err, "unknown option '--bogus'"));
    free(out);
    free(err);

    const char *missing[] = {"-m", "/nonexistent/hearth/model.gguf", "-r", "1", NULL};
    assert_int_equal(bench(missing, &out, &err), 1);
    assert_true(!strncmp(err, "hearth: gguf: cannot open /nonexistent/hearth/model.gguf", 56));
    assert_int_equal(out[0], 0);
    free(out);
    free(err);
}

/*
 * Placed layers, as run places them: one line per stage with its device,
 * layers and bytes; a bad --tensor-split is refused with run's sentence.
 */
static void test_placement_options(void **state)
{
    TU_MODEL_OR_SKIP(path, "stories260K.gguf");
    /* 512 prompt tokens: a context whose K/V shows in the lines' tenths of a MiB */
    const char *args[] = {
        "-m",          path, "-t", "1", "-p", "512", "-n", "4", "-r", "1", "--layer-split",
        "cpu:3,cpu:2", NULL};
    char *out = NULL, *err = NULL;
    assert_int_equal(bench(args, &out, &err), 0);
    double w[2], kv[2];
    assert_int_equal(sscanf(line_of(out, "stage 0: "),
                            "stage 0: cpu, layers 0-2, %lf MiB of "
                            "weights, %lf MiB of K/V",
                            &w[0], &kv[0]),
                     2);
    assert_int_equal(sscanf(line_of(out, "stage 1: "),
                            "stage 1: cpu, layers 3-4 and the "
                            "output, %lf MiB of weights, %lf MiB of K/V",
                            &w[1], &kv[1]),
                     2);
    assert_true(w[0] > 0 && w[1] > 0 && kv[0] > kv[1] && kv[1] > 0);
    assert_null(strstr(out, "the bandwidth is the CPU's")); /* no GPU stage */
    line_of(out, "tg4: ");
    free(out);
    free(err);
    const char *bad[] = {"-m", path, "-ngl", "2", "--tensor-split", "-1", NULL};
    assert_int_equal(bench(bad, &out, &err), 1);
    assert_non_null(strstr(err, "tensor_split entry '-1' is negative"));
    free(out);
    free(err);
    char why[256];
    if (!backend_vulkan(0, why, sizeof why)) {
        print_message("vulkan-test: skipped: %s\n", why);
        return;
    }
    /* every layer and the output on vulkan0, with --gpu-layers and --device */
    const char *gpu[] = {"-m", path,           "-p", "8",        "-n",      "4", "-r",
                         "1",  "--gpu-layers", "99", "--device", "vulkan0", NULL};
    assert_int_equal(bench(gpu, &out, &err), 0);
    line_of(out, "stage 0: vulkan0, layers 0-4 and the output, ");
    assert_non_null(strstr(out, "(the bandwidth is the CPU's: layers on a GPU read its own "
                                "memory)"));
    free(out);
    free(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_figures_and_their_arithmetic),
        cmocka_unit_test(test_prefill_ops_against_the_file),
        cmocka_unit_test(test_moe_counts_the_routed_experts),
        cmocka_unit_test(test_zero_skips_a_test),
        cmocka_unit_test(test_depth_and_cache_types),
        cmocka_unit_test(test_bad_usage),
        cmocka_unit_test(test_placement_options),
    };
    return cmocka_run_group_tests_name("e2e_bench_engine", tests, NULL, NULL);
}
