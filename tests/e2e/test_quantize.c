/*
 * test_quantize.c: `hearth quantize`, the real binary. tiny-llama-spm-f32.gguf
 * is quantized to every preset llama.cpp made a shared file for; each output
 * must have llama.cpp's type for every tensor (and, llama-quantize being
 * deterministic, be the same file byte for byte). The Q4_K_M and Q6_K outputs
 * then go through `hearth perplexity` and must be within 1% of llama.cpp's
 * figure for its own file of the preset (reference/perplexity.tsv). The
 * tiny qwen2 model (f16, tied embeddings) is quantized too. Usage and runtime errors give exit
 * 2 and 1 and never leave a file behind.
 */
#include "util/testutil.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "gguf/writer.h"
#include "util/dtype.h"

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* Runs `hearth quantize` with up to 5 arguments (NULL-terminated); output in *out, *err. */
static int quantize(char **out, char **err, const char *a0, const char *a1, const char *a2,
                    const char *a3, const char *a4)
{
    const char *argv[] = {tu_bin(), "quantize", a0, a1, a2, a3, a4, NULL};
    return tu_run(argv, NULL, out, err, 300);
}

static void expect_has(const char *what, const char *text, const char *needle)
{
    if (!text || !strstr(text, needle))
        fail_msg("%s lacks '%s': %s", what, needle, text ? text : "(null)");
}

static void test_usage_errors(void **state)
{
    (void)state;
    char *out = NULL, *err = NULL;
    assert_int_equal(quantize(&out, &err, "--help", NULL, NULL, NULL, NULL), 0);
    static const char *const listed[] = {"Q4_0",   "Q4_1",      "Q5_0",     "Q5_1",   "Q8_0",
                                         "Q2_K",   "Q3_K_M",    "Q4_K_S",   "Q4_K_M", "Q5_K_S",
                                         "Q5_K_M", "Q6_K",      "IQ4_NL",   "IQ4_XS", "TQ1_0",
                                         "TQ2_0",  "MXFP4_MOE", "--threads"};
    for (size_t i = 0; i < sizeof listed / sizeof listed[0]; i++)
        expect_has("--help", out, listed[i]);
    free(out);
    free(err);

    /* Presets llama.cpp makes only from an importance matrix, or that hearth cannot make yet:
     * refused with the reason, before the input is opened. */
    static const char *const refused[][2] = {
        {"IQ2_XXS", "importance matrix"}, {"IQ2_XS", "importance matrix"},
        {"IQ2_S", "importance matrix"},   {"IQ1_S", "importance matrix"},
        {"IQ1_M", "importance matrix"},   {"IQ3_XXS", "importance matrix"},
        {"IQ3_S", "not written yet"},     {"IQ3_M", "not written yet"}};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        assert_int_equal(quantize(NULL, &err, "in.gguf", "out.gguf", refused[i][0], NULL, NULL), 2);
        expect_has("stderr", err, refused[i][0]);
        expect_has("stderr", err, refused[i][1]);
        free(err);
    }

    /* Unknown TYPE: exit 2, naming the valid ones. */
    assert_int_equal(quantize(NULL, &err, "in.gguf", "out.gguf", "Q4_K_X", NULL, NULL), 2);
    expect_has("stderr", err, "unknown type 'Q4_K_X'");
    expect_has("stderr", err, "Q4_K_M");
    expect_has("stderr", err, "Q6_K");
    free(err);
    assert_int_equal(quantize(NULL, &err, "in.gguf", "out.gguf", NULL, NULL, NULL), 2);
    free(err);
    assert_int_equal(quantize(NULL, &err, "--bogus", "a", "b", "Q6_K", NULL), 2);
    free(err);
    assert_int_equal(quantize(NULL, &err, "-t", "0", "a", "b", "Q6_K"), 2);
    free(err);
}

static void test_runtime_errors(void **state)
{
    (void)state;
    char *dir = tu_tmpdir(), out[512], tmp[512], bad[512], missing[512];
    snprintf(out, sizeof out, "%s/out.gguf", dir);
    snprintf(tmp, sizeof tmp, "%s/out.gguf.tmp", dir);
    snprintf(bad, sizeof bad, "%s/bad.gguf", dir);
    snprintf(missing, sizeof missing, "%s/missing.gguf", dir);
    char *err = NULL;

    assert_int_equal(quantize(NULL, &err, missing, out, "Q4_K_M", NULL, NULL), 1);
    expect_has("stderr", err, "hearth: ");
    expect_has("stderr", err, "missing.gguf");
    free(err);

    assert_int_equal(tu_write_file(bad, "GGUF\3\0\0\0 this is not a model", 29), 0);
    assert_int_equal(quantize(NULL, &err, bad, out, "Q6_K", NULL, NULL), 1);
    expect_has("stderr", err, "hearth: gguf: ");
    free(err);
    assert_false(exists(out));
    assert_false(exists(tmp));

    const char *q8 = tu_shared("models/tiny-llama-spm-q8_0.gguf");
    if (q8) {
        /* As llama-quantize: requantizing needs --allow-requantize. */
        assert_int_equal(quantize(NULL, &err, q8, out, "Q4_K_M", NULL, NULL), 1);
        expect_has("stderr", err, "already q8_0");
        free(err);
        assert_false(exists(out));
        assert_false(exists(tmp));
        char nowhere[600];
        snprintf(nowhere, sizeof nowhere, "%s/no/such/dir/out.gguf", dir);
        assert_int_equal(quantize(NULL, &err, q8, nowhere, "Q8_0", NULL, NULL), 1);
        expect_has("stderr", err, "no/such/dir/out.gguf.tmp");
        free(err);
    }
    tu_rmtree(dir);
    free(dir);
}

/* ------------------------------------------------ against llama.cpp files --- */

/* Quantizes the f32 model to preset into dir/<file>.gguf; NULL on failure (the test fails). */
static const char *make(const char *dir, const char *f32, const char *preset, const char *file)
{
    static char path[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(path[k], sizeof path[k], "%s/%s.gguf", dir, file);
    char *err = NULL;
    int rc    = quantize(NULL, &err, "-t", "2", f32, path[k], preset);
    if (rc != 0)
        fail_msg("hearth quantize %s exited %d: %s", preset, rc, err);
    /* Progress: a line per tensor and a total. */
    expect_has("progress", err, "] token_embd.weight ");
    expect_has("progress", err, "tensors,");
    free(err);
    return path[k];
}

static void test_type_mix_and_bytes_match_llama_cpp(void **state)
{
    (void)state;
    /* llama.cpp's files of these presets were made by llama-quantize from src. */
    static const struct {
        const char *src, *preset, *ref;
    } cases[] = {
        {"tiny-llama-spm-f32", "Q4_1", "tiny-llama-spm-q4_1"},
        {"tiny-llama-spm-f32", "Q5_0", "tiny-llama-spm-q5_0"},
        {"tiny-llama-spm-f32", "Q5_1", "tiny-llama-spm-q5_1"},
        {"tiny-llama-spm-f32", "Q2_K", "tiny-llama-spm-q2_k"},
        {"tiny-llama-spm-f32", "Q3_K_M", "tiny-llama-spm-q3_k_m"},
        {"tiny-llama-spm-f32", "Q4_K_S", "tiny-llama-spm-q4_k_s"},
        {"tiny-llama-spm-f32", "Q4_K_M", "tiny-llama-spm-q4_k_m"},
        {"tiny-llama-spm-f32", "Q5_K_M", "tiny-llama-spm-q5_k_m"},
        {"tiny-llama-spm-f32", "Q6_K", "tiny-llama-spm-q6_k"},
        {"tiny-llama-spm-f32", "IQ4_NL", "tiny-llama-spm-iq4_nl"},
        {"tiny-llama-spm-f32", "IQ4_XS", "tiny-llama-spm-iq4_xs"},
        /* f16 input, tied embeddings (token_embd takes output's type), 4 query heads per kv head */
        {"tiny-qwen2-bpe-f16", "Q4_K_M", "tiny-qwen2-bpe-q4_k_m"},
        {"tiny-qwen2-bpe-f16", "Q6_K", "tiny-qwen2-bpe-q6_k"},
    };
    char *dir     = tu_tmpdir(), err[HEARTH_ERR_MAX];
    int identical = 0, n = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char rel[128], src[512], ref_path[512];
        snprintf(rel, sizeof rel, "models/%s.gguf", cases[c].src);
        const char *p = tu_shared(rel);
        snprintf(src, sizeof src, "%s", p ? p : ""); /* tu_shared's buffers rotate */
        snprintf(rel, sizeof rel, "models/%s.gguf", cases[c].ref);
        p = tu_shared(rel);
        snprintf(ref_path, sizeof ref_path, "%s", p ? p : "");
        if (!*src || !*ref_path) {
            print_message("skip: %s or %s not found\n", cases[c].src, cases[c].ref);
            continue;
        }
        const char *path       = make(dir, src, cases[c].preset, cases[c].ref);
        struct gguf_file *ours = NULL, *ref = NULL;
        assert_int_equal(gguf_open(path, &ours, err, sizeof err), HEARTH_OK);
        assert_int_equal(gguf_open(ref_path, &ref, err, sizeof err), HEARTH_OK);
        assert_int_equal(gguf_n_tensors(ours), gguf_n_tensors(ref));
        int mismatched = 0;
        for (int64_t i = 0; i < gguf_n_tensors(ref); i++) {
            const struct gguf_tensor *r = gguf_tensor(ref, i);
            const struct gguf_tensor *o = gguf_find_tensor(ours, r->name);
            assert_non_null(o);
            if (o->type != r->type) {
                print_message("%s: %s is %s, llama.cpp's is %s\n", cases[c].preset, r->name,
                              dtype_name(o->type), dtype_name(r->type));
                mismatched++;
            }
        }
        uint32_t ft_ours = 0, ft_ref = 1;
        assert_true(gguf_get_u32(ours, "general.file_type", &ft_ours));
        assert_true(gguf_get_u32(ref, "general.file_type", &ft_ref));
        assert_int_equal(ft_ours, ft_ref);
        gguf_close(ours);
        gguf_close(ref);
        assert_int_equal(mismatched, 0);

        size_t la = 0, lb = 0;
        char *a = tu_read_file(path, &la), *b = tu_read_file(ref_path, &lb);
        bool same = a && b && la == lb && !memcmp(a, b, la);
        print_message("%-22s -> %-7s same type for all tensors; file %s llama.cpp's\n",
                      cases[c].src, cases[c].preset, same ? "byte-identical to" : "DIFFERS from");
        identical += same;
        n++;
        free(a);
        free(b);
        unlink(path);
    }
    tu_rmtree(dir);
    free(dir);
    if (!n)
        skip();
    assert_int_equal(identical, n);
}

/* FNV-1a 64 of n bytes. */
static uint64_t fnv64(const char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/*
 * The presets llama.cpp makes without an importance matrix that have no
 * shared file: the size and FNV-1a 64 hash of llama-quantize's output,
 * recorded from the pinned llama.cpp (3f545be): llama-quantize SRC OUT TYPE,
 * with --allow-requantize for the Q8_0 source; hearth's file must be that
 * file byte for byte. MXFP4_MOE puts the experts (3-D tensors) in MXFP4 and
 * every other matrix in Q8_0.
 */
static void test_ternary_and_mxfp4_match_recorded_llama_cpp(void **state)
{
    (void)state;
    static const struct {
        const char *src, *preset;
        bool requant;
        size_t size;
        uint64_t fnv;
        const char *tensor; /* a tensor and the type llama.cpp gave it */
        enum dtype type;
    } cases[] = {
        {"tiny-llama-spm-f32", "TQ1_0", false, 867808, 0x04799eb1a69c469eull,
         "blk.0.ffn_down.weight", DTYPE_TQ1_0},
        {"tiny-llama-spm-f32", "TQ2_0", false, 1015264, 0x55c1293966a96ff2ull, "token_embd.weight",
         DTYPE_Q4_K},
        {"tiny-qwen3moe-bpe-q8_0", "MXFP4_MOE", true, 13876352, 0xc60872140f0c2101ull,
         "blk.0.ffn_down_exps.weight", DTYPE_MXFP4},
    };
    char *dir = tu_tmpdir(), errbuf[HEARTH_ERR_MAX];
    int n     = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char rel[128], src[512], path[600];
        snprintf(rel, sizeof rel, "models/%s.gguf", cases[c].src);
        const char *p = tu_shared(rel);
        if (!p) {
            print_message("skip: %s not found\n", rel);
            continue;
        }
        snprintf(src, sizeof src, "%s", p);
        snprintf(path, sizeof path, "%s/%s.gguf", dir, cases[c].preset);
        char *err = NULL;
        int rc    = cases[c].requant
                        ? quantize(NULL, &err, "-q", "--allow-requantize", src, path, cases[c].preset)
                        : quantize(NULL, &err, "-q", src, path, cases[c].preset, NULL);
        if (rc != 0)
            fail_msg("hearth quantize %s exited %d: %s", cases[c].preset, rc, err);
        free(err);
        struct gguf_file *f = NULL;
        assert_int_equal(gguf_open(path, &f, errbuf, sizeof errbuf), HEARTH_OK);
        const struct gguf_tensor *t = gguf_find_tensor(f, cases[c].tensor);
        assert_non_null(t);
        assert_int_equal(t->type, cases[c].type);
        gguf_close(f);
        size_t len  = 0;
        char *bytes = tu_read_file(path, &len);
        assert_non_null(bytes);
        const uint64_t h = fnv64(bytes, len);
        print_message("%-22s -> %-9s %zu bytes, fnv %016llx; llama.cpp's %zu, %016llx\n",
                      cases[c].src, cases[c].preset, len, (unsigned long long)h, cases[c].size,
                      (unsigned long long)cases[c].fnv);
        assert_int_equal(len, cases[c].size);
        assert_true(h == cases[c].fnv);
        free(bytes);
        unlink(path);
        n++;
    }
    tu_rmtree(dir);
    free(dir);
    if (!n)
        skip();
}

/* "Final estimate: PPL = X" of `hearth perplexity`, or -1 with the reason printed. */
static double perplexity(const char *model, const char *text, const char *ctx)
{
    const char *argv[] = {tu_bin(), "perplexity", "-m", model, "-f", text,
                          "-c",     ctx,          "-t", "2",   NULL};
    char *out = NULL, *err = NULL;
    int rc          = tu_run(argv, NULL, &out, &err, 300);
    const char *fin = out ? strstr(out, "Final estimate: PPL = ") : NULL;
    double ppl      = rc == 0 && fin ? atof(fin + strlen("Final estimate: PPL = ")) : -1;
    if (ppl < 0)
        print_message("hearth perplexity exited %d: %s", rc, err ? err : "");
    free(out);
    free(err);
    return ppl;
}

/* llama.cpp's figure for model in reference/perplexity.tsv, with its text and ctx. */
static double reference_ppl(const char *model, char *text, char *ctx)
{
    const char *tsv = tu_shared("reference/perplexity.tsv");
    char *all       = tsv ? tu_read_file(tsv, NULL) : NULL;
    double ppl      = -1;
    char *save      = NULL;
    for (char *line = all ? strtok_r(all, "\n", &save) : NULL; line;
         line       = strtok_r(NULL, "\n", &save)) {
        char m[128], t[128], c[32];
        double p;
        if (sscanf(line, "%127s %127s %31s %lf", m, t, c, &p) == 4 && !strcmp(m, model)) {
            strcpy(text, t);
            strcpy(ctx, c);
            ppl = p;
        }
    }
    free(all);
    return ppl;
}

static void test_perplexity_within_1pct_of_llama_cpp(void **state)
{
    (void)state;
    TU_SHARED_OR_SKIP(f32_shared, "models/tiny-llama-spm-f32.gguf");
    char f32[512]; /* tu_shared's buffers rotate */
    snprintf(f32, sizeof f32, "%s", f32_shared);
    static const struct {
        const char *preset, *file;
    } cases[]   = {{"Q4_K_M", "q4_k_m"}, {"Q6_K", "q6_k"}};
    char *dir   = tu_tmpdir();
    int checked = 0, unsupported = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char model[128], text[128], ctx[32], rel[256];
        snprintf(model, sizeof model, "tiny-llama-spm-%s.gguf", cases[c].file);
        double want = reference_ppl(model, text, ctx);
        assert_true(want > 0);
        snprintf(rel, sizeof rel, "reference/%s", text);
        const char *text_path = tu_shared(rel);
        assert_non_null(text_path);
        const char *path = make(dir, f32, cases[c].preset, cases[c].file);
        double got       = perplexity(path, text_path, ctx);
        if (got < 0) {
            print_message("skip %s: hearth perplexity cannot run it yet (a type without "
                          "kernels?)\n",
                          cases[c].preset);
            unsupported++;
            continue;
        }
        snprintf(rel, sizeof rel, "models/%s", model);
        const char *theirs = tu_shared(rel);
        double got_theirs  = theirs ? perplexity(theirs, text_path, ctx) : -1;
        double diff        = fabs(got - want) / want * 100;
        print_message("%-7s PPL of hearth's file %.4f; of llama.cpp's %s: %.4f by llama.cpp, "
                      "%.4f by hearth; diff %.4f%% (max 1%%)\n",
                      cases[c].preset, got, model, want, got_theirs, diff);
        assert_true(diff <= 1.0);
        checked++;
    }
    tu_rmtree(dir);
    free(dir);
    if (!checked && unsupported)
        skip();
}

/* ---------------------------------------------------- a synthetic model --- */

/* A 2-layer llama-shaped f32 model with awkward row lengths; nan_at >= 0 poisons that element
 * of blk.1.attn_v.weight. */
static void write_synthetic(const char *path, int64_t nan_at)
{
    static const struct {
        const char *name;
        int64_t ne0, ne1;
    } t[] = {
        {"blk.1.attn_v.weight", 256, 4},    {"blk.0.attn_v.weight", 256, 4},
        {"blk.0.ffn_down.weight", 96, 4},   {"blk.1.ffn_down.weight", 80, 4},
        {"blk.0.attn_norm.weight", 256, 1}, {"token_embd.weight", 256, 8},
        {"output.weight", 96, 8},
    };
    char err[HEARTH_ERR_MAX];
    struct gguf_writer *w = gguf_writer_new();
    assert_int_equal(gguf_writer_set_str(w, "general.architecture", "llama", 5, err, sizeof err),
                     0);
    assert_int_equal(gguf_writer_set_u32(w, "llama.block_count", 2, err, sizeof err), 0);
    assert_int_equal(gguf_writer_set_u32(w, "llama.attention.head_count", 4, err, sizeof err), 0);
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        const int64_t ne[2] = {t[i].ne0, t[i].ne1};
        assert_int_equal(gguf_writer_add_tensor(w, t[i].name, DTYPE_F32, 2, ne, err, sizeof err),
                         0);
    }
    assert_int_equal(gguf_writer_begin(w, path, err, sizeof err), 0);
    uint32_t seed = 1;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        for (int64_t e = 0; e < t[i].ne0 * t[i].ne1; e++) {
            seed    = seed * 1664525u + 1013904223u;
            float v = (float)((int32_t)seed) / 2147483648.0f;
            if (i == 0 && e == nan_at)
                v = NAN;
            assert_int_equal(gguf_writer_write(w, &v, 4, err, sizeof err), 0);
        }
    }
    assert_int_equal(gguf_writer_finish(w, err, sizeof err), 0);
    gguf_writer_free(w);
}

static void test_synthetic_fallbacks_and_nan(void **state)
{
    (void)state;
    char *dir = tu_tmpdir(), in[512], out[512], tmp[512], err[HEARTH_ERR_MAX];
    snprintf(in, sizeof in, "%s/in.gguf", dir);
    snprintf(out, sizeof out, "%s/out.gguf", dir);
    snprintf(tmp, sizeof tmp, "%s/out.gguf.tmp", dir);
    write_synthetic(in, -1);
    char *log = NULL;
    assert_int_equal(quantize(NULL, &log, in, out, "q4_k_m", NULL, NULL), 0);
    /* Row lengths 96 and 80 do not fit Q4_K/Q6_K: fall back as llama.cpp does. */
    expect_has("stderr", log,
               "blk.0.ffn_down.weight: rows of 96 are not a multiple of 256 "
               "(needed by q4_k), using q5_0");
    expect_has("stderr", log, "using f16");
    expect_has("stderr", log, "2 of 7 tensors needed a fallback type");
    free(log);
    /* llama.cpp's order and types (checked against llama_model_quantize on this model). */
    static const struct {
        const char *name;
        enum dtype type;
    } want[] = {
        {"output.weight", DTYPE_Q8_0},         /* output rows not a multiple of 256: Q8_0 */
        {"token_embd.weight", DTYPE_Q4_K},     /* not tied: the default type */
        {"blk.0.attn_norm.weight", DTYPE_F32}, /* 1-D as ggml counts ([256, 1]): kept */
        {"blk.0.attn_v.weight", DTYPE_Q4_K},   /* layer 0 of 2: no extra bits */
        {"blk.0.ffn_down.weight", DTYPE_Q5_0}, /* Q4_K -> Q5_0 fallback */
        {"blk.1.attn_v.weight", DTYPE_Q6_K},   /* last layer: use_more_bits */
        {"blk.1.ffn_down.weight", DTYPE_F16},  /* Q6_K -> Q8_0 does not fit 80 either: F16 */
    };
    struct gguf_file *f = NULL;
    assert_int_equal(gguf_open(out, &f, err, sizeof err), HEARTH_OK);
    assert_int_equal(gguf_n_tensors(f), 7);
    for (int64_t i = 0; i < 7; i++) {
        const struct gguf_tensor *t = gguf_tensor(f, i);
        if (strcmp(t->name, want[i].name) || t->type != want[i].type)
            fail_msg("tensor %d is %s %s, expected %s %s", (int)i, t->name, dtype_name(t->type),
                     want[i].name, dtype_name(want[i].type));
    }
    uint32_t ft = 0, qv = 0;
    assert_true(gguf_get_u32(f, "general.file_type", &ft) && ft == 15);
    assert_true(gguf_get_u32(f, "general.quantization_version", &qv) && qv == 2);
    gguf_close(f);

    /* A NaN: exit 1 naming the tensor and element; nothing left behind. */
    unlink(out);
    write_synthetic(in, 300);
    assert_int_equal(quantize(NULL, &log, "-q", in, out, "Q4_K_M", NULL), 1);
    expect_has("stderr", log,
               "hearth: quantize: tensor blk.1.attn_v.weight has a non-finite "
               "value at element 300 (row 1)");
    free(log);
    assert_false(exists(out));
    assert_false(exists(tmp));
    tu_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_usage_errors),
        cmocka_unit_test(test_runtime_errors),
        cmocka_unit_test(test_synthetic_fallbacks_and_nan),
        cmocka_unit_test(test_type_mix_and_bytes_match_llama_cpp),
        cmocka_unit_test(test_ternary_and_mxfp4_match_recorded_llama_cpp),
        cmocka_unit_test(test_perplexity_within_1pct_of_llama_cpp),
    };
    return cmocka_run_group_tests_name("e2e_quantize", tests, NULL, NULL);
}
