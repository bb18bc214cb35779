/*
 * test_quants.c: the weight quantizers of src/quant/quants.c.
 *
 * 1. Quality: rows of several shapes (gaussian, heavy-tailed, uniform, all
 *    positive, a ramp, weight-scale values) are quantized and dequantized
 *    with the reference kernel table's to_float; the relative RMS error must
 *    stay within a bound per type (about 1.2x what ggml's quantizers reach),
 *    and the types must rank by bits. Zero and constant rows, ties and
 *    row-split invariance are checked exactly.
 * 2. Identity with llama.cpp: every quantized tensor of the shared
 *    tiny-llama-spm-*.gguf files (made by llama-quantize from
 *    tiny-llama-spm-f32.gguf) is re-made here from the f32 tensor and must
 *    match byte for byte.
 */
#include "util/testutil.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "kernels/kernels.h"
#include "quant/quants.h"
#include "util/dtype.h"
#include "util/fp16.h"

/* Types with a quantizer, their bound on relative RMS error for gaussian rows and for any
 * row kind of the test (the heavy-tailed rows are the worst). */
static const struct {
    enum dtype t;
    double gauss, any;
    /* clang-format off */
} types[] = {
    {DTYPE_Q8_0, 0.0062, 0.012},  {DTYPE_Q6_K, 0.020, 0.034},  {DTYPE_Q5_1, 0.043, 0.060},
    {DTYPE_Q5_K, 0.041, 0.058},   {DTYPE_Q5_0, 0.049, 0.090},  {DTYPE_Q4_K, 0.080, 0.115},
    {DTYPE_Q4_1, 0.088, 0.125},   {DTYPE_IQ4_NL, 0.085, 0.140}, {DTYPE_IQ4_XS, 0.085, 0.140},
    {DTYPE_Q4_0, 0.096, 0.180},   {DTYPE_Q3_K, 0.170, 0.240},  {DTYPE_Q2_K, 0.330, 0.400},
};
/* clang-format on */
#define N_TYPES (sizeof types / sizeof types[0])

enum kind { GAUSS, HEAVY, UNIFORM, POSITIVE, RAMP, WEIGHTS, N_KINDS };
static const char *const kind_name[N_KINDS] = {"gaussian", "heavy", "uniform",
                                               "positive", "ramp",  "weights"};

static uint64_t rng = 88172645463325252ull;
static double uni(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return ((double)(rng >> 11) + 0.5) / 9007199254740992.0;
}
static double gauss(void)
{
    return sqrt(-2 * log(uni())) * cos(6.283185307179586 * uni());
}

static void make_row(enum kind k, float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        double v = gauss();
        switch (k) {
        case HEAVY:
            v = uni() < 0.01 ? v * 10 : v;
            break;
        case UNIFORM:
            v = 2 * uni() - 1;
            break;
        case POSITIVE:
            v = fabs(v) + 0.5;
            break;
        case RAMP:
            v = (double)(i % 4096) / 4096 - 0.5;
            break;
        case WEIGHTS:
            v *= 0.02;
            break;
        default:
            break;
        }
        x[i] = (float)v;
    }
}

/* to_float of the reference table for t, or NULL (then the test says so and skips). */
static void (*deq(enum dtype t))(const void *, float *, int64_t)
{
    return kernels_ref()->type[t].to_float;
}

static void test_error_bounds(void **state)
{
    (void)state;
    const int64_t n = 16 * 4096;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    void *q                   = malloc(n * sizeof(float));
    double err_gauss[N_TYPES] = {0};
    int checked = 0, failed = 0;
    for (int k = 0; k < N_KINDS; k++) {
        make_row((enum kind)k, x, n);
        print_message("%-9s", kind_name[k]);
        for (size_t i = 0; i < N_TYPES; i++) {
            const enum dtype t = types[i].t;
            assert_true(quant_row(t, x, q, n));
            if (!deq(t)) {
                print_message(" %s=(no to_float yet)", dtype_name(t));
                continue;
            }
            deq(t)(q, y, n);
            double e = 0, r = 0;
            for (int64_t j = 0; j < n; j++) {
                e += ((double)x[j] - y[j]) * ((double)x[j] - y[j]);
                r += (double)x[j] * x[j];
            }
            double rel = sqrt(e / r), bound = k == GAUSS ? types[i].gauss : types[i].any;
            print_message(" %s=%.4f", dtype_name(t), rel);
            if (k == GAUSS)
                err_gauss[i] = rel;
            checked++;
            if (!(rel <= bound)) {
                print_message("(> %.4f!)", bound);
                failed++;
            }
        }
        print_message("\n");
    }
    /* More bits, less error (the table is ordered by expected error, with near-ties grouped). */
    static const enum dtype ladder[] = {DTYPE_Q8_0, DTYPE_Q6_K, DTYPE_Q5_K,
                                        DTYPE_Q4_K, DTYPE_Q3_K, DTYPE_Q2_K};
    double prev                      = 0;
    for (size_t l = 0; l < sizeof ladder / sizeof ladder[0]; l++)
        for (size_t i = 0; i < N_TYPES; i++)
            if (types[i].t == ladder[l] && err_gauss[i] > 0) {
                assert_true(err_gauss[i] > prev);
                prev = err_gauss[i];
            }
    free(x);
    free(y);
    free(q);
    if (!checked)
        skip();
    assert_int_equal(failed, 0);
}

static void test_exact_rows(void **state)
{
    (void)state;
    enum { N = 512 };
    float x[N], y[N];
    uint8_t q[N * 4], q2[N * 4];
    for (size_t i = 0; i < N_TYPES; i++) {
        const enum dtype t = types[i].t;
        const size_t len   = dtype_row_len(t, N);
        /* Zeros come back as zeros. */
        memset(x, 0, sizeof x);
        assert_true(quant_row(t, x, q, N));
        if (deq(t)) {
            deq(t)(q, y, N);
            for (int j = 0; j < N; j++)
                assert_true(y[j] == 0.0f);
        }
        /* A constant row comes back within fp16 scale precision. */
        for (int j = 0; j < N; j++)
            x[j] = 0.37f;
        assert_true(quant_row(t, x, q, N));
        if (deq(t)) {
            deq(t)(q, y, N);
            for (int j = 0; j < N; j++)
                if (fabsf(y[j] - 0.37f) > 0.37f * 0.02f)
                    fail_msg("%s: constant 0.37 came back as %g at %d", dtype_name(t), y[j], j);
        }
        /* Quantizing two rows at once is quantizing each: the whole file relies on it. */
        make_row(HEAVY, x, N);
        assert_true(quant_row(t, x, q, N));
        assert_true(quant_row(t, x, q2, N / 2));
        assert_true(quant_row(t, x + N / 2, q2 + len / 2, N / 2));
        assert_memory_equal(q, q2, len);
    }
    /* Extreme but finite rows (subnormals make 1/d infinite, huge values overflow the
     * range): quantizing must stay defined behaviour (the sanitizer builds check). Q4_0 and
     * Q8_0 come from the kernel table's from_float, which still casts NaN to int8 there. */
    for (size_t i = 0; i < N_TYPES; i++) {
        if (types[i].t == DTYPE_Q4_0 || types[i].t == DTYPE_Q8_0)
            continue;
        for (int j = 0; j < N; j++)
            x[j] = (j % 3 ? 1e-40f : -3e-41f) * (float)(j % 7);
        assert_true(quant_row(types[i].t, x, q, N));
        for (int j = 0; j < N; j++)
            x[j] = j % 2 ? 3e38f : -3e38f;
        assert_true(quant_row(types[i].t, x, q, N));
    }

    /* Types without a quantizer are refused. */
    assert_false(quant_row(DTYPE_Q8_K, x, q, 256));
    assert_false(quant_row(DTYPE_Q8_1, x, q, 32));
    assert_false(quant_row((enum dtype)40, x, q, 32));
    assert_false(quant_supported(DTYPE_Q8_K));
    assert_true(quant_supported(DTYPE_Q4_K));

    /* Q8_0 rounds halves away from zero (ggml's roundf): with d = 1, 2.5 -> 3 and -78.5 -> -79.
     * (gguf-py's converter rounds them to even; llama-quantize does not.) */
    float h[32] = {127.0f, 2.5f, -78.5f, 0.5f};
    uint8_t b[34];
    assert_true(quant_row(DTYPE_Q8_0, h, b, 32));
    assert_true(fp16_to_fp32((uint16_t)(b[0] | b[1] << 8)) == 1.0f);
    assert_int_equal((int8_t)b[3], 3);
    assert_int_equal((int8_t)b[4], -79);
    assert_int_equal((int8_t)b[5], 1);
}

/* ------------------------------------------------------ llama.cpp files --- */

static void test_identical_to_llama_cpp(void **state)
{
    (void)state;
    TU_SHARED_OR_SKIP(f32_path, "models/tiny-llama-spm-f32.gguf");
    char err[HEARTH_ERR_MAX];
    struct gguf_file *src = NULL;
    assert_int_equal(gguf_open(f32_path, &src, err, sizeof err), HEARTH_OK);
    /* All made by llama-quantize, except q4_0 (convert_hf_to_gguf, same Q4_0 bytes). */
    static const char *const files[] = {"q4_0",   "q4_1",   "q5_0",   "q5_1", "q2_k",   "q3_k_m",
                                        "q4_k_s", "q4_k_m", "q5_k_m", "q6_k", "iq4_nl", "iq4_xs"};
    int n_same[DTYPE_COUNT] = {0}, n_diff[DTYPE_COUNT] = {0}, files_seen = 0;
    for (size_t fi = 0; fi < sizeof files / sizeof files[0]; fi++) {
        char rel[128];
        snprintf(rel, sizeof rel, "models/tiny-llama-spm-%s.gguf", files[fi]);
        const char *path = tu_shared(rel);
        if (!path) {
            print_message("skip: %s not found\n", rel);
            continue;
        }
        files_seen++;
        struct gguf_file *ref = NULL;
        assert_int_equal(gguf_open(path, &ref, err, sizeof err), HEARTH_OK);
        for (int64_t i = 0; i < gguf_n_tensors(ref); i++) {
            const struct gguf_tensor *r = gguf_tensor(ref, i);
            if (r->type == DTYPE_F32)
                continue;
            const struct gguf_tensor *s = gguf_find_tensor(src, r->name);
            assert_non_null(s);
            assert_int_equal(s->type, DTYPE_F32);
            uint8_t *q        = malloc(r->size);
            const int64_t ne0 = s->ne[0], rows = s->ne[1] * s->ne[2] * s->ne[3];
            assert_true(quant_row((enum dtype)r->type, s->data, q, ne0 * rows));
            if (!memcmp(q, r->data, r->size)) {
                n_same[r->type]++;
            } else {
                size_t first = 0, n = 0;
                for (size_t b = r->size; b-- > 0;)
                    if (q[b] != ((const uint8_t *)r->data)[b]) {
                        first = b;
                        n++;
                    }
                print_message("DIFF %-8s %-26s %-6s %zu of %zu bytes differ, first at %zu\n",
                              files[fi], r->name, dtype_name(r->type), n, (size_t)r->size, first);
                n_diff[r->type]++;
            }
            free(q);
        }
        gguf_close(ref);
    }
    gguf_close(src);
    if (!files_seen)
        skip();
    int total_diff = 0;
    for (int t = 0; t < DTYPE_COUNT; t++) {
        if (n_same[t] || n_diff[t])
            print_message("%-7s %3d tensors byte-identical to llama.cpp's, %d differ\n",
                          dtype_name((uint32_t)t), n_same[t], n_diff[t]);
        total_diff += n_diff[t];
    }
    assert_int_equal(total_diff, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_error_bounds),
        cmocka_unit_test(test_exact_rows),
        cmocka_unit_test(test_identical_to_llama_cpp),
    };
    return cmocka_run_group_tests_name("unit_quants", tests, NULL, NULL);
}
