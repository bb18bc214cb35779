/*
 * test_vk.c: the Vulkan runtime (src/backend/vk/) on whatever device the
 * loader offers first (lavapipe in CI): enumeration, buffers copied both
 * mapped and through staging, errors that name their call, and every
 * shader against the CPU reference with an error bound stated per type.
 *
 * Matmul bound: the shaders dequantize exactly as the reference to_float
 * does (the same f32 products), so what remains is f32 summation in the
 * shader's order against the f64 sum of the dequantized products. Each
 * output's error is measured relative to sum |w_i x_i| (what summation
 * error scales with, whatever the cancellation); the order
 * (shaders/mul_common.glsl) adds at most n_in / 64 + 12 roundings, so at
 * n_in <= 4096 it stays under 76 * 2^-24, 4.5e-6. The table below states
 * each type's bound.
 *
 * SwiGLU against the reference silu_mul, and RoPE (normal and NEOX, partial
 * rotation) against the rotation in double by the exact angle; IMRoPE
 * against the CPU backend's arithmetic (ggml's angles, fused rotation). Attention
 * over a paged cache of three sequences with shuffled block tables against
 * ref_attn_row and the per-key f16 path (bounds at ATTN_BOUND), soft-cap
 * against tanhf; the K/V store, embed (whole and split weights, one past
 * 128 MiB), add, scale, GELU and gather must equal the CPU's bits.
 *
 * Skips with "vulkan-test: skipped: ..." when hearth is built without
 * Vulkan or the machine has no Vulkan device; .ci/run fails on that line.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/testutil.h"

#ifndef HEARTH_VULKAN

static void test_not_built(void **state)
{
    print_message("vulkan-test: skipped: hearth is built without Vulkan "
                  "(needs libvulkan-dev and glslc)\n");
    skip();
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_not_built)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#else

#include "backend/vk/vk.h"
#include "kernels/kernels.h"
#include "kernels/ref.h"
#include "quant/quants.h"
#include "util/dtype.h"
#include "util/fp16.h"

/* Bound on |y - ref| / sum |w_i x_i| per weight type (see the file header). */
static const struct {
    enum dtype type;
    double bound;
    /* clang-format off */
} mul_bounds[] = {
    {DTYPE_F32, 5e-6},
    {DTYPE_F16, 5e-6},
    {DTYPE_Q8_0, 5e-6},
    {DTYPE_Q4_0, 5e-6},
    {DTYPE_Q4_K, 5e-6},
    {DTYPE_Q5_K, 5e-6},
    {DTYPE_Q6_K, 5e-6},
    {DTYPE_BF16, 5e-6},
    {DTYPE_Q4_1, 5e-6},
    {DTYPE_Q5_0, 5e-6},
    {DTYPE_Q5_1, 5e-6},
    {DTYPE_Q2_K, 5e-6},
    {DTYPE_Q3_K, 5e-6},
    {DTYPE_IQ4_NL, 5e-6},
    {DTYPE_IQ4_XS, 5e-6},
};
/* clang-format on */

/* RMSNorm bound, relative per element: an f32 sum of squares against the reference's f64. */
#define RMSNORM_BOUND  1e-5
/* SwiGLU bound, relative per element, |g| <= 10: the device's exp may be 3 + 2|x| ulp off. */
#define SWIGLU_BOUND   1e-5
/*
 * RoPE bound on |out - exact| / (|x0| + |x1|) per rotated pair, against the rotation in double
 * by the exact angle: the angles are rounded once to f32 on the host, the rotation rounds twice.
 */
#define ROPE_BOUND     1e-6

/*
 * Attention bounds on |out - ref| / max |v| over the keys a row sees (the output is a convex
 * combination of those v). Against ref_attn_row (the tiled arithmetic, f16 cache read
 * exactly): the scores are the same bits, then the device's exp may be 3 + 2|x| ulp off,
 * about 2.6e-6 at the score gaps of 20 these peaked queries reach, and the sums run in
 * another order; measured up to 4.8e-6. Against the per-key f16 path, which rounds q and
 * every update of the running output to f16: dominated by those roundings, measured 2.4e-3.
 */
#define ATTN_BOUND     1e-5
#define ATTN_F16_BOUND 1e-2

struct fixture {
    struct vk_dev *d;      /* vulkan0, buffers mapped where the memory allows */
    struct vk_dev *staged; /* vulkan0 again, every copy through a staging buffer and the
                            * shaders without subgroup operations (VK_OPEN_PLAIN) */
};

static char err[HEARTH_ERR_MAX];
static char skip_why[HEARTH_ERR_MAX];

static int setup(void **state)
{
    static struct fixture f;
    struct vk_device_info *info = NULL;
    int n                       = 0;
    if (vk_enumerate(&info, &n, err, sizeof err) != HEARTH_OK) {
        snprintf(skip_why, sizeof skip_why, "%s", err);
    } else if (n == 0) {
        snprintf(skip_why, sizeof skip_why, "the loader found no Vulkan device");
    } else {
        print_message("# vulkan0: %s (%s)\n", info[0].name, info[0].driver);
        if (vk_dev_open(0, 0, &f.d, err, sizeof err) != HEARTH_OK ||
            vk_dev_open(0, VK_OPEN_STAGING | VK_OPEN_PLAIN, &f.staged, err, sizeof err) !=
                HEARTH_OK) {
            print_message("vk_dev_open: %s\n", err);
            free(info);
            return -1;
        }
    }
    free(info);
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    vk_dev_close(f->d);
    vk_dev_close(f->staged);
    return 0;
}

/* clang-format off */
#define NEED_DEVICE(f)                                                                       \
    struct fixture *f = *state;                                                              \
    if (!f->d) {                                                                             \
        print_message("vulkan-test: skipped: %s\n", skip_why);                               \
        skip();                                                                              \
    }
/* clang-format on */

/* clang-format off */
#define OK(call)                                                                             \
    do {                                                                                     \
        enum hearth_status st_ = (call);                                                     \
        if (st_ != HEARTH_OK)                                                                \
            print_message("%s: %s\n", #call, err);                                          \
        assert_int_equal(st_, HEARTH_OK);                                                    \
    } while (0)
/* clang-format on */

/* One sequence of one operation, call (naming the sequence s), begun and run. */
/* clang-format off */
#define RUN1(d, call)                                                                        \
    do {                                                                                     \
        struct vk_seq *s_;                                                                   \
        OK(vk_seq_new(d, &s_, err, sizeof err));                                             \
        OK(vk_seq_begin(s_, err, sizeof err));                                               \
        struct vk_seq *s = s_;                                                               \
        OK(call);                                                                            \
        OK(vk_seq_run(s_, err, sizeof err));                                                 \
        vk_seq_free(s_);                                                                     \
    } while (0)
/* clang-format on */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

/* Uniform in [-1, 1). */
static float frand(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((double)(rng_state >> 11) / (double)(1ull << 52)) * 2.0f - 1.0f;
}

/* A buffer on d holding len bytes of src. */
static struct vk_buf *upload(struct vk_dev *d, const void *src, size_t len)
{
    struct vk_buf *b;
    OK(vk_buf_new(d, len, &b, err, sizeof err));
    OK(vk_buf_upload(b, 0, src, len, err, sizeof err));
    return b;
}

/* ------------------------------------------------------------ devices --- */

static void test_enumerate(void **state)
{
    NEED_DEVICE(f);
    struct vk_device_info *info;
    int n;
    OK(vk_enumerate(&info, &n, err, sizeof err));
    assert_true(n >= 1);
    const struct vk_device_info *d = vk_dev_info(f->d);
    assert_string_equal(info[0].name, d->name);
    assert_true(d->name[0] && d->driver[0] && d->api[0]);
    assert_true(d->local_bytes > 0);
    assert_true(d->subgroup_size >= 1 && d->subgroup_size <= 128);
    free(info);

    struct vk_dev *none;
    assert_int_equal(vk_dev_open(n, 0, &none, err, sizeof err), HEARTH_ERANGE);
    assert_null(none);
    assert_non_null(strstr(err, "no device vulkan"));
}

/* ------------------------------------------------------------ buffers --- */

/* A round trip of odd lengths at odd offsets, mapped or staged. */
static void roundtrip(struct vk_dev *d)
{
    enum { LEN = 1001 };
    uint8_t src[LEN], back[LEN];
    for (int i = 0; i < LEN; i++)
        src[i] = (uint8_t)(i * 37 + 11);
    struct vk_buf *b;
    OK(vk_buf_new(d, LEN, &b, err, sizeof err));
    assert_int_equal(vk_buf_len(b), LEN);
    OK(vk_buf_upload(b, 0, src, LEN, err, sizeof err));
    OK(vk_buf_upload(b, 3, "xyz", 3, err, sizeof err));
    memcpy(src + 3, "xyz", 3);
    memset(back, 0, sizeof back);
    OK(vk_buf_download(b, 0, back, LEN, err, sizeof err));
    assert_memory_equal(back, src, LEN);
    OK(vk_buf_download(b, 997, back, 4, err, sizeof err));
    assert_memory_equal(back, src + 997, 4);

    assert_int_equal(vk_buf_upload(b, 1000, src, 2, err, sizeof err), HEARTH_ERANGE);
    assert_non_null(strstr(err, "overruns a buffer of 1001"));
    assert_int_equal(vk_buf_download(b, (size_t)-1, back, 2, err, sizeof err), HEARTH_ERANGE);
    vk_buf_free(b);
}

static void test_buffers(void **state)
{
    NEED_DEVICE(f);
    roundtrip(f->d);
    roundtrip(f->staged);
}

static void test_buffer_refused(void **state)
{
    NEED_DEVICE(f);
    struct vk_buf *b;
    assert_int_equal(vk_buf_new(f->d, 0, &b, err, sizeof err), HEARTH_EINVAL);
    assert_null(b);
    /* past every heap the device has: a sentence, not a crash */
    const size_t huge = (size_t)1 << 60;
    assert_int_equal(vk_buf_new(f->d, huge, &b, err, sizeof err), HEARTH_ENOMEM);
    assert_null(b);
    print_message("# %s\n", err);
    assert_non_null(strstr(err, "exceeds"));
}

static void test_pipeline_errors(void **state)
{
    NEED_DEVICE(f);
    struct vk_pipe *p;
    assert_int_equal(vk_pipe_get(f->d, "no_such_shader", 1, 0, &p, err, sizeof err), HEARTH_EINVAL);
    assert_non_null(strstr(err, "no built-in shader no_such_shader"));
    OK(vk_pipe_get(f->d, "rmsnorm", 3, 12, &p, err, sizeof err));
    struct vk_pipe *again;
    OK(vk_pipe_get(f->d, "rmsnorm", 3, 12, &again, err, sizeof err));
    assert_ptr_equal(p, again);
    assert_int_equal(vk_pipe_get(f->d, "rmsnorm", 2, 12, &again, err, sizeof err), HEARTH_EINVAL);

    struct vk_seq *s;
    OK(vk_seq_new(f->d, &s, err, sizeof err));
    assert_int_equal(vk_seq_run(s, err, sizeof err), HEARTH_EINVAL);
    float one        = 1.0f;
    struct vk_buf *b = upload(f->d, &one, sizeof one);
    OK(vk_seq_begin(s, err, sizeof err));
    /* a weight too short for the shape asked: refused before anything is recorded */
    assert_int_equal(vk_op_matmul(s, DTYPE_F32, b, b, b, 32, 1, 1, err, sizeof err), HEARTH_ERANGE);
    assert_non_null(strstr(err, "the weight needs 128 bytes"));
    assert_int_equal(vk_op_matmul(s, DTYPE_Q4_0, b, b, b, 33, 1, 1, err, sizeof err),
                     HEARTH_EINVAL);
    /* an activation-only type has no shader */
    assert_int_equal(vk_op_matmul(s, DTYPE_Q8_K, b, b, b, 256, 1, 1, err, sizeof err),
                     HEARTH_EUNSUPPORTED);
    assert_non_null(strstr(err, "no matmul for"));
    const uint32_t none[3] = {0, 1, 1};
    assert_int_equal(
        vk_seq_dispatch(s, p, (struct vk_buf *[]){b, b, b}, "0123456789ab", none, err, sizeof err),
        HEARTH_ERANGE);
    OK(vk_seq_run(s, err, sizeof err));
    vk_buf_free(b);
    vk_seq_free(s);
}

/* ------------------------------------------------------------- matmul --- */

/*
 * W (n_out x n_in, random, quantized to type) times n_tok random rows on the device against
 * the f64 dot of the reference-dequantized weight; returns the largest error relative to
 * sum |w_i x_i|.
 */
static double matmul_err(struct vk_dev *d, enum dtype type, uint32_t n_in, uint32_t n_out,
                         uint32_t n_tok)
{
    const size_t row_len = dtype_row_len(type, n_in);
    float *wf            = malloc((size_t)n_out * n_in * sizeof *wf);
    float *x             = malloc((size_t)n_tok * n_in * sizeof *x);
    float *y             = malloc((size_t)n_tok * n_out * sizeof *y);
    float *deq           = malloc((size_t)n_in * sizeof *deq);
    uint8_t *wq          = malloc(row_len * n_out);
    assert_true(wf && x && y && deq && wq);
    for (size_t i = 0; i < (size_t)n_out * n_in; i++)
        wf[i] = frand() * (1.0f + (float)(i % 7));
    for (size_t i = 0; i < (size_t)n_tok * n_in; i++)
        x[i] = frand();
    for (uint32_t r = 0; r < n_out; r++)
        assert_true(quant_row(type, wf + (size_t)r * n_in, wq + r * row_len, n_in));

    struct vk_buf *bw = upload(d, wq, row_len * n_out);
    struct vk_buf *bx = upload(d, x, (size_t)n_tok * n_in * sizeof *x);
    struct vk_buf *by;
    OK(vk_buf_new(d, (size_t)n_tok * n_out * sizeof *y, &by, err, sizeof err));
    struct vk_seq *s;
    OK(vk_seq_new(d, &s, err, sizeof err));
    OK(vk_seq_begin(s, err, sizeof err));
    OK(vk_op_matmul(s, type, bw, bx, by, n_in, n_out, n_tok, err, sizeof err));
    OK(vk_seq_run(s, err, sizeof err));
    OK(vk_buf_download(by, 0, y, (size_t)n_tok * n_out * sizeof *y, err, sizeof err));

    const struct type_kernels *tk = &kernels_ref()->type[type];
    double worst                  = 0;
    for (uint32_t r = 0; r < n_out; r++) {
        tk->to_float(wq + r * row_len, deq, n_in);
        for (uint32_t t = 0; t < n_tok; t++) {
            const float *xt = x + (size_t)t * n_in;
            double sum = 0, mag = 0;
            for (uint32_t i = 0; i < n_in; i++) {
                sum += (double)deq[i] * xt[i];
                mag += fabs((double)deq[i] * xt[i]);
            }
            const double e = fabs(y[(size_t)t * n_out + r] - sum) / (mag > 0 ? mag : 1);
            if (!(e <= worst)) /* NaN too */
                worst = e;
        }
    }
    vk_seq_free(s);
    vk_buf_free(bw);
    vk_buf_free(bx);
    vk_buf_free(by);
    free(wf);
    free(x);
    free(y);
    free(deq);
    free(wq);
    return worst;
}

static void check_matmul(void **state, enum dtype type)
{
    NEED_DEVICE(f);
    double bound = 0;
    for (size_t i = 0; i < sizeof mul_bounds / sizeof mul_bounds[0]; i++)
        if (mul_bounds[i].type == type)
            bound = mul_bounds[i].bound;
    assert_true(bound > 0);
    assert_true(vk_op_matmul_supported(type));
    /* matrix-vector and tiled, token counts around the switch between them (8) and past one
     * tile (32 tokens by 64 rows), rows of 1, 2, 3, 4 and more chunks of 32 than a team has
     * lanes (teams of 1, 2, 4 and 8), a row of 4096 (the bound's worst case) and, for the
     * float types, rows that end inside a chunk and inside a vec4; n_in rounded up to the
     * type's blocks (32 or 256 elements) */
    static const uint32_t shapes[][3] = {
        {32, 1, 1},   {352, 67, 1}, {352, 67, 5}, {352, 67, 13}, {4096, 24, 3}, {96, 300, 8},
        {96, 70, 40}, {4096, 9, 9}, {35, 9, 1},   {35, 41, 33},  {70, 17, 2},   {128, 20, 1},
    };
    const uint32_t block = dtype_get(type)->block;
    double worst         = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const uint32_t n_in = (shapes[i][0] + block - 1) / block * block;
        /* both the subgroup shaders (where the device has them) and the plain ones */
        for (int plain = 0; plain < 2; plain++) {
            double e = matmul_err(plain ? f->staged : f->d, type, n_in, shapes[i][1], shapes[i][2]);
            worst    = e > worst ? e : worst;
        }
    }
    print_message("# mul_%s: max error %.3g of sum |w x| (bound %.0e)\n", dtype_name(type), worst,
                  bound);
    assert_true(worst <= bound);
}

static void test_mul_f32(void **state)
{
    check_matmul(state, DTYPE_F32);
}

static void test_mul_f16(void **state)
{
    check_matmul(state, DTYPE_F16);
}

static void test_mul_q8_0(void **state)
{
    check_matmul(state, DTYPE_Q8_0);
}

static void test_mul_q4_0(void **state)
{
    check_matmul(state, DTYPE_Q4_0);
}

static void test_mul_q4_k(void **state)
{
    check_matmul(state, DTYPE_Q4_K);
}

static void test_mul_q5_k(void **state)
{
    check_matmul(state, DTYPE_Q5_K);
}

static void test_mul_q6_k(void **state)
{
    check_matmul(state, DTYPE_Q6_K);
}

static void test_mul_bf16(void **state)
{
    check_matmul(state, DTYPE_BF16);
}

static void test_mul_q4_1(void **state)
{
    check_matmul(state, DTYPE_Q4_1);
}

static void test_mul_q5_0(void **state)
{
    check_matmul(state, DTYPE_Q5_0);
}

static void test_mul_q5_1(void **state)
{
    check_matmul(state, DTYPE_Q5_1);
}

static void test_mul_q2_k(void **state)
{
    check_matmul(state, DTYPE_Q2_K);
}

static void test_mul_q3_k(void **state)
{
    check_matmul(state, DTYPE_Q3_K);
}

static void test_mul_iq4_nl(void **state)
{
    check_matmul(state, DTYPE_IQ4_NL);
}

static void test_mul_iq4_xs(void **state)
{
    check_matmul(state, DTYPE_IQ4_XS);
}

/* More rows than one grid dimension takes (65535), as a vocabulary's output matrix has. A
 * workgroup now covers 32 to 256 rows, so the grid itself stays under 65535 along x here; the
 * spill into y (vk_row_grid) is what one-row-per-workgroup operations such as RMSNorm use. */
static void test_mul_many_rows(void **state)
{
    NEED_DEVICE(f);
    const double e = matmul_err(f->d, DTYPE_Q4_0, 64, 70001, 2);
    print_message("# mul_q4_0 over 70001 rows: max error %.3g of sum |w x|\n", e);
    assert_true(e <= 5e-6);
}

/* ------------------------------------------------- activation rounding --- */

/*
 * vk_op_act_round against the CPU table's from_float then to_float, for every type the CPU
 * rounds activations to: rows of mixed magnitudes, a zero block, blocks whose extreme is
 * negative, values on Q8_0's rounding ties; out of place and in place. The shader's
 * divisions are correctly rounded as the CPU's are (div_rn.glsl), so every element is the
 * CPU's to the bit.
 */
static void test_act_round(void **state)
{
    NEED_DEVICE(f);
    static const enum dtype types[] = {DTYPE_F16, DTYPE_BF16, DTYPE_Q8_0, DTYPE_Q8_1, DTYPE_Q8_K};
    enum { N = 6 * 256 };
    static float x[N], got[N], ref[N];
    static uint8_t q[N * 4];
    for (int i = 0; i < N; i++)
        x[i] = frand() * (i % 3 == 0 ? 1e-3f : (float)(1 + i % 11));
    for (int i = 256; i < 512; i++) /* a zero block of every block size */
        x[i] = 0.0f;
    x[600] = -40.0f;                  /* the extreme of its Q8_K block (and Q8_0 block) negative */
    for (int i = 1024; i < 1056; i++) /* a block scaled by exactly 1: its q fall on ties */
        x[i] = (float)(i - 1040) + 0.5f;
    x[1024]                 = 127.0f;
    const struct kernels *k = kernels_get();
    struct vk_buf *bx       = upload(f->d, x, sizeof x), *by;
    OK(vk_buf_new(f->d, sizeof got, &by, err, sizeof err));
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        const enum dtype t = types[i];
        RUN1(f->d, vk_op_act_round(s, t, bx, by, N, err, sizeof err));
        OK(vk_buf_download(by, 0, got, sizeof got, err, sizeof err));
        k->type[t].from_float(x, q, N);
        k->type[t].to_float(q, ref, N);
        int differ = 0;
        for (int e = 0; e < N; e++)
            differ += memcmp(&got[e], &ref[e], 4) != 0;
        /* in place: each block is read whole before it is written */
        struct vk_buf *bz = upload(f->d, x, sizeof x);
        RUN1(f->d, vk_op_act_round(s, t, bz, bz, N, err, sizeof err));
        OK(vk_buf_download(bz, 0, got, sizeof got, err, sizeof err));
        vk_buf_free(bz);
        int differ_in_place = 0;
        for (int e = 0; e < N; e++)
            differ_in_place += memcmp(&got[e], &ref[e], 4) != 0;
        print_message("# act_round %s: %d (in place %d) of %d differ from the CPU's\n",
                      dtype_name(t), differ, differ_in_place, N);
        assert_int_equal(differ, 0);
        assert_int_equal(differ_in_place, 0);
    }
    /* refused: a type the CPU does not round to, a partial block */
    struct vk_seq *s;
    OK(vk_seq_new(f->d, &s, err, sizeof err));
    OK(vk_seq_begin(s, err, sizeof err));
    assert_int_equal(vk_op_act_round(s, DTYPE_F32, bx, by, N, err, sizeof err),
                     HEARTH_EUNSUPPORTED);
    assert_int_equal(vk_op_act_round(s, DTYPE_Q8_K, bx, by, 300, err, sizeof err), HEARTH_EINVAL);
    assert_non_null(strstr(err, "whole q8_k blocks"));
    OK(vk_seq_run(s, err, sizeof err));
    vk_seq_free(s);
    /* the types the backend rounds to are the CPU's */
    assert_int_equal(vk_act_type(DTYPE_Q4_K), DTYPE_Q8_K);
    assert_int_equal(vk_act_type(DTYPE_Q4_1), DTYPE_Q8_1);
    assert_int_equal(vk_act_type(DTYPE_F16), DTYPE_F16);
    assert_int_equal(vk_act_type(DTYPE_F32), DTYPE_F32);
    vk_buf_free(bx);
    vk_buf_free(by);
}

/* ------------------------------------------------- embed, split weights --- */

/* A random weight of rows of n_in quantized to type: malloc'd, rows back to back. */
static uint8_t *random_weight(enum dtype type, uint32_t n_in, uint32_t n_rows)
{
    const size_t row_len = dtype_row_len(type, n_in);
    uint8_t *w           = malloc(row_len * n_rows);
    float *row           = malloc(n_in * sizeof *row);
    assert_true(w && row);
    for (uint32_t r = 0; r < n_rows; r++) {
        for (uint32_t i = 0; i < n_in; i++)
            row[i] = frand() * (1.0f + (float)((r + i) % 5));
        assert_true(quant_row(type, row, w + r * row_len, n_in));
    }
    free(row);
    return w;
}

/* Embedding rows of w on the device, split into parts of part_max bytes; asserts every row
 * equals the reference to_float's times scale to the bit. Returns the parts. */
static uint32_t check_embed(struct vk_dev *d, enum dtype type, const uint8_t *w, uint32_t n_in,
                            uint32_t n_rows, size_t part_max, const int32_t *ids, uint32_t n_tok,
                            float scale)
{
    const size_t row_len = dtype_row_len(type, n_in);
    struct vk_weight *vw;
    OK(vk_weight_new(d, type, n_in, n_rows, w, part_max, &vw, err, sizeof err));
    struct vk_buf *bids = upload(d, ids, n_tok * sizeof *ids), *bx;
    OK(vk_buf_new(d, (size_t)n_tok * n_in * 4, &bx, err, sizeof err));
    struct vk_seq *s;
    OK(vk_seq_new(d, &s, err, sizeof err));
    OK(vk_seq_begin(s, err, sizeof err));
    OK(vk_op_embed(s, vw, bids, bx, n_tok, scale, err, sizeof err));
    OK(vk_seq_run(s, err, sizeof err));
    float *got = malloc((size_t)n_tok * n_in * 4), *ref = malloc((size_t)n_in * 4);
    assert_true(got && ref);
    OK(vk_buf_download(bx, 0, got, (size_t)n_tok * n_in * 4, err, sizeof err));
    const struct type_kernels *tk = &kernels_ref()->type[type];
    for (uint32_t t = 0; t < n_tok; t++) {
        tk->to_float(w + (size_t)ids[t] * row_len, ref, n_in);
        if (scale != 1.0f)
            kernels_ref()->scale_f32(ref, scale, n_in);
        assert_memory_equal(got + (size_t)t * n_in, ref, (size_t)n_in * 4);
    }
    const uint32_t parts = vk_weight_parts(vw);
    vk_seq_free(s);
    vk_buf_free(bids);
    vk_buf_free(bx);
    vk_weight_free(vw);
    free(got);
    free(ref);
    return parts;
}

static void test_embed(void **state)
{
    NEED_DEVICE(f);
    static const enum dtype types[] = {DTYPE_F32,  DTYPE_F16,    DTYPE_Q8_0,  DTYPE_Q4_0,
                                       DTYPE_Q4_K, DTYPE_Q5_K,   DTYPE_Q6_K,  DTYPE_BF16,
                                       DTYPE_Q4_1, DTYPE_Q5_0,   DTYPE_Q5_1,  DTYPE_Q2_K,
                                       DTYPE_Q3_K, DTYPE_IQ4_NL, DTYPE_IQ4_XS};
    enum { ROWS = 37, TOK = 7 };
    static const int32_t ids[TOK] = {0, 36, 9, 10, 9, 20, 29};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        const uint32_t n_in = dtype_get(types[i])->block == 256 ? 512 : 96;
        uint8_t *w          = random_weight(types[i], n_in, ROWS);
        /* one buffer, then parts of 10 rows (the last of 7), gemma's scale on the second */
        assert_int_equal(check_embed(f->d, types[i], w, n_in, ROWS, 0, ids, TOK, 1.0f), 1);
        const size_t ten = 10 * dtype_row_len(types[i], n_in) + 1;
        assert_int_equal(
            check_embed(f->d, types[i], w, n_in, ROWS, ten, ids, TOK, sqrtf((float)n_in)), 4);
        free(w);
    }
    print_message("# embed: every type's rows equal to_float's to the bit, whole and split\n");

    /* a matmul split in parts of 10 rows is the whole one's bits: each row's sum is the same */
    enum { IN = 256, OUT = 37, NT = 3 };
    uint8_t *w = random_weight(DTYPE_Q4_K, IN, OUT);
    static float x[NT * IN], y1[NT * OUT], y2[NT * OUT];
    for (int i = 0; i < NT * IN; i++)
        x[i] = frand();
    struct vk_weight *whole, *split;
    OK(vk_weight_new(f->d, DTYPE_Q4_K, IN, OUT, w, 0, &whole, err, sizeof err));
    OK(vk_weight_new(f->d, DTYPE_Q4_K, IN, OUT, w, 10 * dtype_row_len(DTYPE_Q4_K, IN), &split, err,
                     sizeof err));
    assert_int_equal(vk_weight_parts(split), 4);
    struct vk_buf *bx = upload(f->d, x, sizeof x), *by1, *by2;
    OK(vk_buf_new(f->d, sizeof y1, &by1, err, sizeof err));
    OK(vk_buf_new(f->d, sizeof y2, &by2, err, sizeof err));
    RUN1(f->d, vk_op_matmul_w(s, whole, bx, by1, NT, err, sizeof err));
    RUN1(f->d, vk_op_matmul_w(s, split, bx, by2, NT, err, sizeof err));
    OK(vk_buf_download(by1, 0, y1, sizeof y1, err, sizeof err));
    OK(vk_buf_download(by2, 0, y2, sizeof y2, err, sizeof err));
    assert_memory_equal(y1, y2, sizeof y1);
    vk_weight_free(whole);
    vk_weight_free(split);
    vk_buf_free(bx);
    vk_buf_free(by1);
    vk_buf_free(by2);
    free(w);
    struct vk_weight *vw;
    assert_int_equal(vk_weight_new(f->d, DTYPE_Q4_0, 33, 2, NULL, 0, &vw, err, sizeof err),
                     HEARTH_EINVAL);
    assert_int_equal(vk_weight_new(f->d, DTYPE_F32, 64, 2, NULL, 100, &vw, err, sizeof err),
                     HEARTH_ENOMEM);
    assert_non_null(strstr(err, "exceeds one buffer"));
}

/*
 * A weight past what one buffer holds (lavapipe: 128 MiB): 32000 rows of 4096 Q8_0, 139 MB,
 * as a large vocabulary's output matrix. Its matmul over both parts against the f64 dot of
 * every row, and embedding rows on each side of the split.
 */
static void test_weight_past_one_buffer(void **state)
{
    NEED_DEVICE(f);
    enum { N_IN = 4096, ROWS = 32000, TOK = 2 };
    const size_t row_len = dtype_row_len(DTYPE_Q8_0, N_IN), len = row_len * ROWS;
    uint8_t *w = malloc(len);
    float *x = malloc(TOK * N_IN * sizeof *x), *y = malloc((size_t)TOK * ROWS * sizeof *y);
    float *deq = malloc(N_IN * sizeof *deq);
    assert_true(w && x && y && deq);
    /* random blocks straight away (quantizing 131M floats would dominate the test) */
    for (size_t b = 0; b < len / 34; b++) {
        uint8_t *blk      = w + b * 34;
        const uint16_t dh = fp32_to_fp16(0.01f + 0.01f * (frand() + 1.0f));
        memcpy(blk, &dh, 2);
        for (int j = 0; j < 32; j += 8) {
            (void)frand();
            memcpy(blk + 2 + j, &rng_state, 8);
        }
    }
    for (int i = 0; i < TOK * N_IN; i++)
        x[i] = frand();
    /* the device's own limit where one buffer cannot hold it (lavapipe), else lavapipe's */
    struct vk_buf *whole;
    size_t part_max = 0;
    if (vk_buf_new(f->d, len, &whole, err, sizeof err) == HEARTH_OK) {
        vk_buf_free(whole);
        part_max = (size_t)128 << 20;
    }
    struct vk_weight *vw;
    OK(vk_weight_new(f->d, DTYPE_Q8_0, N_IN, ROWS, w, part_max, &vw, err, sizeof err));
    print_message("# a Q8_0 weight of %zu bytes in %u buffers\n", len, vk_weight_parts(vw));
    assert_true(vk_weight_parts(vw) >= 2);
    struct vk_buf *bx = upload(f->d, x, TOK * N_IN * sizeof *x), *by;
    OK(vk_buf_new(f->d, (size_t)TOK * ROWS * sizeof *y, &by, err, sizeof err));
    struct vk_seq *s;
    OK(vk_seq_new(f->d, &s, err, sizeof err));
    OK(vk_seq_begin(s, err, sizeof err));
    OK(vk_op_matmul_w(s, vw, bx, by, TOK, err, sizeof err));
    OK(vk_seq_run(s, err, sizeof err));
    OK(vk_buf_download(by, 0, y, (size_t)TOK * ROWS * sizeof *y, err, sizeof err));
    const struct type_kernels *tk = &kernels_ref()->type[DTYPE_Q8_0];
    double worst                  = 0;
    for (uint32_t r = 0; r < ROWS; r++) {
        tk->to_float(w + r * row_len, deq, N_IN);
        for (int t = 0; t < TOK; t++) {
            double sum = 0, mag = 0;
            for (int i = 0; i < N_IN; i++) {
                sum += (double)deq[i] * x[t * N_IN + i];
                mag += fabs((double)deq[i] * x[t * N_IN + i]);
            }
            const double e = fabs(y[(size_t)t * ROWS + r] - sum) / (mag > 0 ? mag : 1);
            if (!(e <= worst))
                worst = e;
        }
    }
    print_message("# matmul past one buffer: max error %.3g of sum |w x| (bound 5e-06)\n", worst);
    assert_true(worst <= 5e-6);
    vk_seq_free(s);
    vk_buf_free(bx);
    vk_buf_free(by);
    vk_weight_free(vw);
    /* embedding rows from both parts and the very last */
    const int32_t ids[4] = {0, ROWS / 2, ROWS - 2, ROWS - 1};
    assert_true(check_embed(f->d, DTYPE_Q8_0, w, N_IN, ROWS, part_max, ids, 4, 1.0f) >= 2);
    free(w);
    free(x);
    free(y);
    free(deq);
}

/* ------------------------------------------------------------ rmsnorm --- */

/* Largest relative error of the device's rows against ref_rmsnorm's. */
static double rmsnorm_err(const float *got, const float *x, const float *w, uint32_t n,
                          uint32_t rows, float eps)
{
    float *ref = malloc(n * sizeof *ref);
    assert_non_null(ref);
    double worst = 0;
    for (uint32_t r = 0; r < rows; r++) {
        kernels_ref()->rmsnorm(ref, x + (size_t)r * n, w, n, eps);
        for (uint32_t i = 0; i < n; i++) {
            const double d = fabs((double)got[(size_t)r * n + i] - ref[i]);
            const double e = ref[i] != 0 ? d / fabs(ref[i]) : d;
            if (!(e <= worst))
                worst = e;
        }
    }
    free(ref);
    return worst;
}

static void test_rmsnorm(void **state)
{
    NEED_DEVICE(f);
    enum { N = 1000, ROWS = 5 };
    const float eps = 1e-5f;
    static float x[ROWS * N], w[N], y[ROWS * N];
    for (int i = 0; i < ROWS * N; i++)
        x[i] = frand() * (float)(1 + i / N * 10);
    for (int i = 0; i < N; i++)
        w[i] = 0.5f + frand();
    struct vk_buf *bx = upload(f->d, x, sizeof x), *bw = upload(f->d, w, sizeof w), *by;
    OK(vk_buf_new(f->d, sizeof y, &by, err, sizeof err));
    struct vk_seq *s;
    OK(vk_seq_new(f->d, &s, err, sizeof err));
    OK(vk_seq_begin(s, err, sizeof err));
    OK(vk_op_rmsnorm(s, bx, bw, by, N, ROWS, eps, err, sizeof err));
    OK(vk_seq_run(s, err, sizeof err));
    OK(vk_buf_download(by, 0, y, sizeof y, err, sizeof err));
    double worst = rmsnorm_err(y, x, w, N, ROWS, eps);

    /* in place, reusing the sequence */
    OK(vk_seq_begin(s, err, sizeof err));
    OK(vk_op_rmsnorm(s, bx, bw, bx, N, ROWS, eps, err, sizeof err));
    OK(vk_seq_run(s, err, sizeof err));
    OK(vk_buf_download(bx, 0, y, sizeof y, err, sizeof err));
    double e = rmsnorm_err(y, x, w, N, ROWS, eps);
    worst    = e > worst ? e : worst;
    print_message("# rmsnorm: max relative error %.3g (bound %.0e)\n", worst, RMSNORM_BOUND);
    assert_true(worst <= RMSNORM_BOUND);
    vk_seq_free(s);
    vk_buf_free(bx);
    vk_buf_free(bw);
    vk_buf_free(by);
}

/*
 * Two dispatches in one sequence, the second reading what the first wrote (the barrier
 * between them), then a second step on the same sequence: y = rmsnorm(W x).
 */
static void test_sequence(void **state)
{
    NEED_DEVICE(f);
    enum { IN = 256, OUT = 96, TOK = 3 };
    static float w[OUT * IN], x[TOK * IN], norm[OUT], h[TOK * OUT], y[TOK * OUT];
    for (int i = 0; i < OUT * IN; i++)
        w[i] = frand();
    for (int i = 0; i < TOK * IN; i++)
        x[i] = frand();
    for (int i = 0; i < OUT; i++)
        norm[i] = 1.0f + frand() / 2;
    struct vk_buf *bw = upload(f->d, w, sizeof w), *bx = upload(f->d, x, sizeof x);
    struct vk_buf *bn = upload(f->d, norm, sizeof norm), *bh, *by;
    OK(vk_buf_new(f->d, sizeof h, &bh, err, sizeof err));
    OK(vk_buf_new(f->d, sizeof y, &by, err, sizeof err));
    struct vk_seq *s;
    OK(vk_seq_new(f->d, &s, err, sizeof err));
    for (int step = 0; step < 2; step++) {
        if (step == 1) { /* new activations between steps */
            for (int i = 0; i < TOK * IN; i++)
                x[i] = frand();
            OK(vk_buf_upload(bx, 0, x, sizeof x, err, sizeof err));
        }
        OK(vk_seq_begin(s, err, sizeof err));
        OK(vk_op_matmul(s, DTYPE_F32, bw, bx, bh, IN, OUT, TOK, err, sizeof err));
        OK(vk_op_rmsnorm(s, bh, bn, by, OUT, TOK, 1e-6f, err, sizeof err));
        OK(vk_seq_run(s, err, sizeof err));
        OK(vk_buf_download(by, 0, y, sizeof y, err, sizeof err));
        for (int t = 0; t < TOK; t++)
            for (int r = 0; r < OUT; r++) {
                double sum = 0;
                for (int i = 0; i < IN; i++)
                    sum += (double)w[r * IN + i] * x[t * IN + i];
                h[t * OUT + r] = (float)sum;
            }
        /* h in f64-rounded form stands in for the device's; a matmul's error (under 1e-5 of
         * sum |w x|) moves the norm's output by about as much */
        double e = rmsnorm_err(y, h, norm, OUT, TOK, 1e-6f);
        print_message("# step %d: rmsnorm(W x) max relative error %.3g\n", step, e);
        assert_true(e < 1e-3);
    }
    vk_seq_free(s);
    vk_buf_free(bw);
    vk_buf_free(bx);
    vk_buf_free(bn);
    vk_buf_free(bh);
    vk_buf_free(by);
}

/* ------------------------------------------------------ swiglu, rope --- */

static void test_swiglu(void **state)
{
    NEED_DEVICE(f);
    enum { N = 3001 }; /* past 11 workgroups of 256, with a tail */
    static float g[N], u[N], got[N], ref[N];
    for (int i = 0; i < N; i++) {
        g[i] = 10.0f * frand();
        u[i] = 2.0f * frand();
    }
    g[0]              = 0.0f;
    struct vk_buf *bg = upload(f->d, g, sizeof g), *bu = upload(f->d, u, sizeof u);
    struct vk_seq *s;
    OK(vk_seq_new(f->d, &s, err, sizeof err));
    OK(vk_seq_begin(s, err, sizeof err));
    OK(vk_op_swiglu(s, bg, bu, N, err, sizeof err));
    OK(vk_seq_run(s, err, sizeof err));
    OK(vk_buf_download(bg, 0, got, sizeof got, err, sizeof err));
    kernels_ref()->silu_mul(ref, g, u, N);
    double worst = 0;
    for (int i = 0; i < N; i++) {
        const double d = fabs((double)got[i] - ref[i]);
        const double e = ref[i] != 0 ? d / fabs(ref[i]) : d;
        if (!(e <= worst))
            worst = e;
    }
    print_message("# swiglu: max relative error %.3g (bound %.0e)\n", worst, SWIGLU_BOUND);
    assert_true(worst <= SWIGLU_BOUND);
    vk_seq_free(s);
    vk_buf_free(bg);
    vk_buf_free(bu);
}

/* One layout (normal or NEOX) over rows of 3 heads of 80 with 64 rotated, large positions. */
static double rope_err(struct vk_dev *d, bool neox, float base)
{
    enum { TOK = 4, HEADS = 3, HD = 80, ROT = 64 };
    static const int32_t pos[TOK] = {0, 1, 4097, 131071};
    static float x[TOK * HEADS * HD], got[TOK * HEADS * HD], cs[TOK * ROT];
    for (int i = 0; i < TOK * HEADS * HD; i++)
        x[i] = 4.0f * frand();
    vk_rope_angles(pos, TOK, ROT, base, cs);
    struct vk_buf *bx = upload(d, x, sizeof x), *bcs = upload(d, cs, sizeof cs);
    struct vk_seq *s;
    OK(vk_seq_new(d, &s, err, sizeof err));
    OK(vk_seq_begin(s, err, sizeof err));
    OK(vk_op_rope(s, bx, bcs, TOK, HEADS, HD, ROT, neox, err, sizeof err));
    OK(vk_seq_run(s, err, sizeof err));
    OK(vk_buf_download(bx, 0, got, sizeof got, err, sizeof err));
    double worst = 0;
    for (int t = 0; t < TOK; t++)
        for (int h = 0; h < HEADS; h++) {
            const float *xh = x + (t * HEADS + h) * HD, *gh = got + (t * HEADS + h) * HD;
            for (int i = 0; i < ROT / 2; i++) {
                const int a = neox ? i : 2 * i, b = neox ? i + ROT / 2 : 2 * i + 1;
                const double th  = pos[t] * pow(base, -2.0 * i / ROT);
                const double r0  = xh[a] * cos(th) - xh[b] * sin(th);
                const double r1  = xh[a] * sin(th) + xh[b] * cos(th);
                const double mag = fabs(xh[a]) + fabs(xh[b]);
                const double e   = fmax(fabs(gh[a] - r0), fabs(gh[b] - r1)) / (mag > 0 ? mag : 1);
                if (!(e <= worst))
                    worst = e;
            }
            /* past n_rot the head passes through untouched */
            assert_memory_equal(gh + ROT, xh + ROT, (HD - ROT) * sizeof(float));
            /* position 0 is the identity */
            if (pos[t] == 0)
                assert_memory_equal(gh, xh, ROT * sizeof(float));
        }
    vk_seq_free(s);
    vk_buf_free(bx);
    vk_buf_free(bcs);
    return worst;
}

static void test_rope(void **state)
{
    NEED_DEVICE(f);
    const double normal = fmax(rope_err(f->d, false, 10000.0f), rope_err(f->d, false, 1e6f));
    const double neox   = fmax(rope_err(f->d, true, 10000.0f), rope_err(f->d, true, 1e6f));
    print_message("# rope: max error %.3g (normal), %.3g (neox) of |x0| + |x1| (bound %.0e)\n",
                  normal, neox, ROPE_BOUND);
    assert_true(normal <= ROPE_BOUND);
    assert_true(neox <= ROPE_BOUND);
}

/*
 * IMRoPE (qwen35moe) as the CPU backend's rope computes it for text: ggml's f32 angles, pairs
 * outside their section left as they are, the rotation as two fused multiply-adds.
 */
static void ref_imrope(float *x, int32_t n_heads, int32_t hd, int32_t n_rot, float base,
                       int32_t pos, const int32_t sections[4])
{
    const int32_t n_sect    = sections[0] + sections[1] + sections[2] + sections[3];
    const float theta_scale = powf(base, -2.0f / (float)n_rot);
    for (int32_t h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * hd, theta = (float)pos;
        for (int32_t i = 0; i < n_rot / 2; i++) {
            const int32_t sec = i % n_sect;
            const bool still  = !(sec < 3 * sections[sec % 3]);
            const float c = still ? 1.0f : cosf(theta), s = still ? 0.0f : sinf(theta);
            const float x0 = v[i], x1 = v[i + n_rot / 2];
            v[i]             = fmaf(x0, c, -(x1 * s));
            v[i + n_rot / 2] = fmaf(x0, s, x1 * c);
            theta *= theta_scale;
        }
    }
}

/*
 * IMRoPE through vk_rope_angles_ggml and the NEOX rotation against ref_imrope: the angles are
 * the same bits, the device rounds the products where the CPU fuses them (ROPE_BOUND of
 * |x0| + |x1|), and the pairs IMRoPE leaves alone must come back bit for bit. Sections of
 * the tiny qwen35moe (pair 7 of 8 still) and ones that leave several pairs still.
 */
static void test_rope_imrope(void **state)
{
    NEED_DEVICE(f);
    enum { TOK = 4, HEADS = 3, HD = 64, ROT = 32 };
    static const int32_t pos[TOK]    = {0, 5, 1000, 40000};
    static const int32_t sects[2][4] = {{4, 2, 2, 0}, {3, 1, 2, 5}};
    static float x[TOK * HEADS * HD], got[TOK * HEADS * HD], want[TOK * HEADS * HD], cs[TOK * ROT];
    double worst = 0;
    int n_still  = 0;
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < TOK * HEADS * HD; i++)
            x[i] = 4.0f * frand();
        memcpy(want, x, sizeof x);
        for (int t = 0; t < TOK; t++)
            ref_imrope(want + t * HEADS * HD, HEADS, HD, ROT, 1e4f, pos[t], sects[k]);
        vk_rope_angles_ggml(pos, TOK, ROT, 1e4f, sects[k], cs);
        struct vk_buf *bx = upload(f->d, x, sizeof x), *bcs = upload(f->d, cs, sizeof cs);
        RUN1(f->d, vk_op_rope(s, bx, bcs, TOK, HEADS, HD, ROT, true, err, sizeof err));
        OK(vk_buf_download(bx, 0, got, sizeof got, err, sizeof err));
        const int32_t n_sect = sects[k][0] + sects[k][1] + sects[k][2] + sects[k][3];
        for (int t = 0; t < TOK; t++)
            for (int h = 0; h < HEADS; h++) {
                const int o = (t * HEADS + h) * HD;
                for (int i = 0; i < ROT / 2; i++) {
                    const int a = o + i, b = o + i + ROT / 2, sec = i % n_sect;
                    if (!(sec < 3 * sects[k][sec % 3])) {
                        assert_memory_equal(&got[a], &x[a], sizeof(float));
                        assert_memory_equal(&got[b], &x[b], sizeof(float));
                        n_still++;
                        continue;
                    }
                    const double mag = fabs(x[a]) + fabs(x[b]);
                    const double e =
                        fmax(fabs(got[a] - want[a]), fabs(got[b] - want[b])) / (mag > 0 ? mag : 1);
                    if (!(e <= worst))
                        worst = e;
                }
                assert_memory_equal(got + o + ROT, x + o + ROT, (HD - ROT) * sizeof(float));
            }
        vk_buf_free(bx);
        vk_buf_free(bcs);
    }
    print_message("# imrope: max error %.3g of |x0| + |x1| (bound %.0e), %d still pairs exact\n",
                  worst, ROPE_BOUND, n_still);
    assert_true(n_still > 0);
    assert_true(worst <= ROPE_BOUND);
}

/* ---------------------------------------------------------- attention --- */

/*
 * A paged cache on the host and the device: N_SEQ sequences of the lengths below, their
 * blocks handed out in a shuffled order so no table is the identity, K and V random in
 * [-1, 1) and stored through vk_op_kv_store (all of every sequence's rows in one batch).
 */
enum { BT = 16, N_SEQ = 3, STRIDE = 12 };
static const int32_t seq_len[N_SEQ] = {150, 37, 100};

struct cache {
    struct vk_kv kv;
    uint32_t kv_dim;
    int32_t table[N_SEQ][STRIDE];
    uint8_t *k, *v; /* host copies as the device holds them */
};

static void cache_make(struct vk_dev *d, struct cache *c, uint32_t kv_dim, bool f16)
{
    const uint32_t n_blocks = N_SEQ * STRIDE, elem = f16 ? 2 : 4;
    const size_t len = (size_t)n_blocks * BT * kv_dim * elem;
    int32_t perm[N_SEQ * STRIDE];
    for (uint32_t i = 0; i < n_blocks; i++)
        perm[i] = (int32_t)i;
    for (uint32_t i = n_blocks - 1; i > 0; i--) {
        const uint32_t j = (uint32_t)((frand() + 1.0f) / 2.0f * (float)(i + 1)) % (i + 1);
        const int32_t t  = perm[i];
        perm[i]          = perm[j];
        perm[j]          = t;
    }
    memcpy(c->table, perm, sizeof c->table);
    c->kv_dim     = kv_dim;
    c->k          = calloc(1, len);
    c->v          = calloc(1, len);
    int32_t n_tok = 0;
    for (int s = 0; s < N_SEQ; s++)
        n_tok += seq_len[s];
    int32_t *rows = malloc((size_t)n_tok * 2 * sizeof *rows);
    float *kr     = malloc((size_t)n_tok * kv_dim * sizeof *kr);
    float *vr     = malloc((size_t)n_tok * kv_dim * sizeof *vr);
    assert_true(c->k && c->v && rows && kr && vr);
    for (int s = 0, t = 0; s < N_SEQ; s++)
        for (int32_t pos = 0; pos < seq_len[s]; pos++, t++) {
            rows[2 * t]     = s;
            rows[2 * t + 1] = pos;
            const size_t at = ((size_t)c->table[s][pos / BT] * BT + pos % BT) * kv_dim;
            for (uint32_t e = 0; e < kv_dim; e++) {
                const float kx = frand(), vx = frand();
                kr[(size_t)t * kv_dim + e] = kx;
                vr[(size_t)t * kv_dim + e] = vx;
                if (f16) {
                    ((uint16_t *)c->k)[at + e] = fp32_to_fp16(kx);
                    ((uint16_t *)c->v)[at + e] = fp32_to_fp16(vx);
                } else {
                    ((float *)c->k)[at + e] = kx;
                    ((float *)c->v)[at + e] = vx;
                }
            }
        }
    c->kv = (struct vk_kv){.n_blocks     = n_blocks,
                           .block_tokens = BT,
                           .n_seq        = N_SEQ,
                           .table_stride = STRIDE,
                           .f16          = f16};
    OK(vk_buf_new(d, len, &c->kv.k, err, sizeof err));
    OK(vk_buf_new(d, len, &c->kv.v, err, sizeof err));
    c->kv.tables      = upload(d, c->table, sizeof c->table);
    c->kv.rows        = upload(d, rows, (size_t)n_tok * 2 * sizeof *rows);
    struct vk_buf *bk = upload(d, kr, (size_t)n_tok * kv_dim * sizeof *kr);
    struct vk_buf *bv = upload(d, vr, (size_t)n_tok * kv_dim * sizeof *vr);
    struct vk_seq *s;
    OK(vk_seq_new(d, &s, err, sizeof err));
    OK(vk_seq_begin(s, err, sizeof err));
    OK(vk_op_kv_store(s, &c->kv, bk, bv, kv_dim, (uint32_t)n_tok, err, sizeof err));
    OK(vk_seq_run(s, err, sizeof err));
    /* the store is exact: f32 bit for bit, f16 as fp32_to_fp16 rounds (blocks no sequence
     * uses stay zero, as vk_buf_new's memory is not promised to be: compare the used rows) */
    uint8_t *got = malloc(len);
    assert_non_null(got);
    OK(vk_buf_download(c->kv.k, 0, got, len, err, sizeof err));
    for (int sq = 0; sq < N_SEQ; sq++)
        for (int32_t pos = 0; pos < seq_len[sq]; pos++) {
            const size_t at = (((size_t)c->table[sq][pos / BT] * BT + pos % BT) * kv_dim) * elem;
            assert_memory_equal(got + at, c->k + at, kv_dim * elem);
        }
    OK(vk_buf_download(c->kv.v, 0, got, len, err, sizeof err));
    for (int sq = 0; sq < N_SEQ; sq++)
        for (int32_t pos = 0; pos < seq_len[sq]; pos++) {
            const size_t at = (((size_t)c->table[sq][pos / BT] * BT + pos % BT) * kv_dim) * elem;
            assert_memory_equal(got + at, c->v + at, kv_dim * elem);
        }
    free(got);
    vk_seq_free(s);
    vk_buf_free(bk);
    vk_buf_free(bv);
    free(rows);
    free(kr);
    free(vr);
}

static void cache_free(struct cache *c)
{
    vk_buf_free(c->kv.k);
    vk_buf_free(c->kv.v);
    vk_buf_free(c->kv.tables);
    vk_buf_free(c->kv.rows);
    free(c->k);
    free(c->v);
}

/* Largest errors of one attention configuration: against ref_attn_row (*e_ref) and, for an
 * f16 cache, ref_attn_row_f16 (*e_f16); each |out - ref| / max |v| over the keys seen. */
static void attn_err(struct vk_dev *d, uint32_t hd, bool f16, uint32_t n_swa, bool prescaled,
                     bool gated, double *e_ref, double *e_f16)
{
    enum { N_HEAD = 4, N_KV = 2, N_Q = 9 };
    struct cache c;
    cache_make(d, &c, N_KV * hd, f16);
    /* query rows: the first and last positions, and ones around tile and block edges */
    static const int32_t qrow[N_Q][2] = {{0, 0},  {0, 63}, {0, 64}, {0, 149}, {1, 36},
                                         {1, 16}, {2, 99}, {2, 5},  {0, 128}};
    const size_t qlen                 = (size_t)N_Q * N_HEAD * hd;
    float *q = malloc(qlen * sizeof *q), *g = malloc(qlen * sizeof *g);
    float *out = malloc(qlen * sizeof *out), *ref = malloc(hd * sizeof *ref);
    float *scratch = malloc(ATTN_SCRATCH(hd) * sizeof *scratch);
    assert_true(q && g && out && ref && scratch);
    const float scale = prescaled ? 1.0f : 1.0f / sqrtf((float)hd);
    for (size_t i = 0; i < qlen; i++) {
        /* peaked enough that the running maximum moves between tiles */
        q[i] = 6.0f * frand() * (prescaled ? 1.0f / sqrtf((float)hd) : 1.0f);
        g[i] = 4.0f * frand();
    }
    struct vk_buf *bq = upload(d, q, qlen * sizeof *q), *bg = upload(d, g, qlen * sizeof *g);
    struct vk_buf *bo, *rows_all                            = c.kv.rows;
    c.kv.rows = upload(d, qrow, sizeof qrow);
    OK(vk_buf_new(d, qlen * sizeof *out, &bo, err, sizeof err));
    const struct vk_attn_shape a = {.n_tok     = N_Q,
                                    .n_head    = N_HEAD,
                                    .n_head_kv = N_KV,
                                    .head_dim  = hd,
                                    .n_swa     = n_swa,
                                    .scale     = scale};
    struct vk_seq *s;
    OK(vk_seq_new(d, &s, err, sizeof err));
    OK(vk_seq_begin(s, err, sizeof err));
    OK(vk_op_attention(s, &c.kv, &a, bq, gated ? bg : NULL, bo, err, sizeof err));
    OK(vk_seq_run(s, err, sizeof err));
    OK(vk_buf_download(bo, 0, out, qlen * sizeof *out, err, sizeof err));
    const size_t elem = f16 ? 2 : 4;
    *e_ref = *e_f16 = 0;
    for (int r = 0; r < N_Q; r++) {
        const int32_t sq = qrow[r][0], pos = qrow[r][1];
        const int32_t j0 = n_swa > 0 && pos >= (int32_t)n_swa ? pos - (int32_t)n_swa + 1 : 0;
        for (int h = 0; h < N_HEAD; h++) {
            const int kvh            = h / (N_HEAD / N_KV);
            const struct attn_kv akv = {.k            = c.k + (size_t)kvh * hd * elem,
                                        .v            = c.v + (size_t)kvh * hd * elem,
                                        .blocks       = c.table[sq],
                                        .block_len    = (size_t)BT * c.kv_dim * elem,
                                        .row_len      = (size_t)c.kv_dim * elem,
                                        .block_tokens = BT,
                                        .f16          = f16};
            double vmax              = 0;
            for (int32_t j = j0; j <= pos; j++)
                for (uint32_t e = 0; e < hd; e++) {
                    const uint8_t *vr = attn_kv_row(akv.v, &akv, j);
                    const float v =
                        f16 ? fp16_to_fp32(((const uint16_t *)vr)[e]) : ((const float *)vr)[e];
                    vmax = fmax(vmax, fabs(v));
                }
            const size_t qo = ((size_t)r * N_HEAD + h) * hd;
            for (int pass = 0; pass < (f16 ? 2 : 1); pass++) {
                if (pass == 0)
                    ref_attn_row(ref, q + qo, (int32_t)hd, &akv, j0, pos, scale, scratch);
                else
                    ref_attn_row_f16(ref, q + qo, (int32_t)hd, &akv, j0, pos, scale, scratch);
                double *worst = pass == 0 ? e_ref : e_f16;
                for (uint32_t e = 0; e < hd; e++) {
                    const float want = gated ? ref[e] * (1.0f / (1.0f + expf(-g[qo + e]))) : ref[e];
                    const double err_ = fabs((double)out[qo + e] - want) / vmax;
                    if (!(err_ <= *worst))
                        *worst = err_;
                }
            }
        }
    }
    vk_seq_free(s);
    vk_buf_free(c.kv.rows);
    c.kv.rows = rows_all;
    cache_free(&c);
    vk_buf_free(bq);
    vk_buf_free(bg);
    vk_buf_free(bo);
    free(q);
    free(g);
    free(out);
    free(ref);
    free(scratch);
}

/* The f16 store rounds as fp32_to_fp16 to the bit: every exponent from far below the
 * smallest subnormal half to past the largest half, ties at both, infinities, NaN, zeros. */
static void test_kv_store_f16_bits(void **state)
{
    NEED_DEVICE(f);
    enum { N = 4096 };
    static float x[N];
    static uint16_t got[N];
    for (uint32_t i = 0; i < N; i++) {
        (void)frand();
        uint32_t m       = (uint32_t)(rng_state >> 20) & 0x7FFFFFu;
        const uint32_t e = 97u + (i / 4) % 52, shift = 126 - e; /* shift: subnormal halves' */
        if (i % 4 == 1)
            m = (m & ~0x1FFFu) | 0x1000u; /* a tie for a normal half */
        else if (i % 4 == 2 && e <= 112 && shift <= 23)
            m = (m & ~((1u << shift) - 1)) | (1u << (shift - 1)); /* a tie for a subnormal */
        else if (i % 4 == 2 && shift == 24)
            m = 0; /* exactly 2^-25 */
        const uint32_t bits = ((i % 8 >= 4) ? 0x80000000u : 0) | (e << 23) | m;
        memcpy(&x[i], &bits, 4);
    }
    const float special[] = {
        0.0f,          -0.0f,       INFINITY, -INFINITY, NAN,
        65504.0f,      65519.99f,   65520.0f, 1e-8f,     2.9802322e-8f /* 2^-25, ties to 0 */,
        5.9604645e-8f, 8.940697e-8f /* 1.5 * 2^-24, ties up to 2 */};
    memcpy(x, special, sizeof special);
    struct vk_kv kv = {
        .n_blocks = 1, .block_tokens = 1, .n_seq = 1, .table_stride = 1, .f16 = true};
    const int32_t zero[2] = {0, 0};
    OK(vk_buf_new(f->d, N * 2, &kv.k, err, sizeof err));
    OK(vk_buf_new(f->d, N * 2, &kv.v, err, sizeof err));
    kv.tables         = upload(f->d, zero, 4);
    kv.rows           = upload(f->d, zero, 8);
    struct vk_buf *bx = upload(f->d, x, sizeof x);
    struct vk_seq *s;
    OK(vk_seq_new(f->d, &s, err, sizeof err));
    OK(vk_seq_begin(s, err, sizeof err));
    OK(vk_op_kv_store(s, &kv, bx, bx, N, 1, err, sizeof err));
    OK(vk_seq_run(s, err, sizeof err));
    OK(vk_buf_download(kv.v, 0, got, sizeof got, err, sizeof err));
    int wrong = 0;
    for (uint32_t i = 0; i < N; i++)
        if (got[i] != fp32_to_fp16(x[i]) && wrong++ < 5)
            print_message("%a: 0x%04x, want 0x%04x\n", (double)x[i], got[i], fp32_to_fp16(x[i]));
    assert_int_equal(wrong, 0);
    vk_seq_free(s);
    vk_buf_free(kv.k);
    vk_buf_free(kv.v);
    vk_buf_free(kv.tables);
    vk_buf_free(kv.rows);
    vk_buf_free(bx);
}

static void test_attention(void **state)
{
    NEED_DEVICE(f);
    /* a head of 256 gives each invocation two output pairs; one of 8 leaves most idle */
    static const uint32_t hds[] = {64, 128, 80, 256, 8};
    double worst[2] = {0, 0}, worst_f16 = 0;
    for (size_t i = 0; i < sizeof hds / sizeof hds[0]; i++)
        for (int f16 = 0; f16 < 2; f16++)
            for (int v = 0; v < 4; v++) {
                /* no window, a window inside a tile, pre-scaled queries, a gated layer */
                double e, e16;
                attn_err(f->d, hds[i], f16, v == 1 ? 24 : 0, v == 2, v == 3, &e, &e16);
                static const char *const what[] = {"", " window 24", " prescaled", " gated"};
                print_message("# attention hd %u %s%s: %.3g of max |v| against ref_attn_row",
                              hds[i], f16 ? "f16" : "f32", what[v], e);
                if (f16)
                    print_message(", %.3g against the per-key f16 path", e16);
                print_message("\n");
                worst[f16] = fmax(worst[f16], e);
                worst_f16  = fmax(worst_f16, e16);
            }
    /* shapes refused before anything is recorded */
    struct cache c;
    cache_make(f->d, &c, 2 * 64, true);
    struct vk_seq *s;
    OK(vk_seq_new(f->d, &s, err, sizeof err));
    OK(vk_seq_begin(s, err, sizeof err));
    struct vk_attn_shape a = {
        .n_tok = 1, .n_head = 3, .n_head_kv = 2, .head_dim = 64, .scale = 0.125f};
    assert_int_equal(vk_op_attention(s, &c.kv, &a, c.kv.k, NULL, c.kv.v, err, sizeof err),
                     HEARTH_EINVAL);
    a.n_head = 4, a.head_dim = 512;
    assert_int_equal(vk_op_attention(s, &c.kv, &a, c.kv.k, NULL, c.kv.v, err, sizeof err),
                     HEARTH_EINVAL);
    a.head_dim = 63; /* odd: the shader reads pairs */
    assert_int_equal(vk_op_attention(s, &c.kv, &a, c.kv.k, NULL, c.kv.v, err, sizeof err),
                     HEARTH_EINVAL);
    a.head_dim = 64, a.n_tok = 1u << 20;
    assert_int_equal(vk_op_attention(s, &c.kv, &a, c.kv.k, NULL, c.kv.v, err, sizeof err),
                     HEARTH_ERANGE);
    assert_int_equal(vk_op_kv_store(s, &c.kv, c.kv.k, c.kv.v, 127, 1, err, sizeof err),
                     HEARTH_EINVAL);
    OK(vk_seq_run(s, err, sizeof err));
    /* rows naming a sequence past n_seq or a position past the table write nothing */
    const int32_t bad[2][2] = {{N_SEQ, 0}, {0, STRIDE * BT}};
    static float junk[2 * 4 * 64], outb[2 * 4 * 64];
    for (size_t i = 0; i < sizeof outb / sizeof outb[0]; i++)
        outb[i] = 7.0f;
    struct vk_buf *rows_all = c.kv.rows, *bj = upload(f->d, junk, sizeof junk);
    struct vk_buf *bo = upload(f->d, outb, sizeof outb);
    uint8_t *before = malloc(vk_buf_len(c.kv.k)), *after = malloc(vk_buf_len(c.kv.k));
    assert_true(before && after);
    OK(vk_buf_download(c.kv.k, 0, before, vk_buf_len(c.kv.k), err, sizeof err));
    c.kv.rows = upload(f->d, bad, sizeof bad);
    a         = (struct vk_attn_shape){
                .n_tok = 2, .n_head = 4, .n_head_kv = 2, .head_dim = 64, .scale = 0.125f};
    OK(vk_seq_begin(s, err, sizeof err));
    OK(vk_op_kv_store(s, &c.kv, bj, bj, 128, 2, err, sizeof err));
    OK(vk_op_attention(s, &c.kv, &a, bj, NULL, bo, err, sizeof err));
    OK(vk_seq_run(s, err, sizeof err));
    OK(vk_buf_download(c.kv.k, 0, after, vk_buf_len(c.kv.k), err, sizeof err));
    assert_memory_equal(before, after, vk_buf_len(c.kv.k));
    OK(vk_buf_download(bo, 0, outb, sizeof outb, err, sizeof err));
    for (size_t i = 0; i < sizeof outb / sizeof outb[0]; i++)
        assert_true(outb[i] == 7.0f);
    vk_buf_free(c.kv.rows);
    c.kv.rows = rows_all;
    vk_buf_free(bj);
    vk_buf_free(bo);
    free(before);
    free(after);
    OK(vk_seq_begin(s, err, sizeof err));
    OK(vk_seq_run(s, err, sizeof err));
    vk_seq_free(s);
    cache_free(&c);
    print_message("# attention: max error %.3g (f32 cache), %.3g (f16 cache) of max |v| "
                  "(bound %.0e); %.3g against the per-key f16 path (bound %.0e)\n",
                  worst[0], worst[1], ATTN_BOUND, worst_f16, ATTN_F16_BOUND);
    assert_true(worst[0] <= ATTN_BOUND && worst[1] <= ATTN_BOUND);
    assert_true(worst_f16 <= ATTN_F16_BOUND);
}

/* ---------------------------------------------------------- row ops --- */

/* The residual add and a bias over rows, and the scale: the CPU's bits. */
static void test_add_scale(void **state)
{
    NEED_DEVICE(f);
    enum { W = 300, ROWS = 11, N = W * ROWS };
    static float y[N], x[N], b[W], got[N], want[N];
    for (int i = 0; i < N; i++) {
        y[i] = 8.0f * frand();
        x[i] = frand();
    }
    for (int i = 0; i < W; i++)
        b[i] = frand() / 8;
    struct vk_buf *by = upload(f->d, y, sizeof y), *bx = upload(f->d, x, sizeof x);
    struct vk_buf *bb = upload(f->d, b, sizeof b);
    RUN1(f->d, vk_op_add(s, by, bx, N, N, err, sizeof err));
    RUN1(f->d, vk_op_add(s, by, bb, N, W, err, sizeof err));
    RUN1(f->d, vk_op_scale(s, by, N, 0.0883883f, err, sizeof err));
    OK(vk_buf_download(by, 0, got, sizeof got, err, sizeof err));
    memcpy(want, y, sizeof y);
    kernels_ref()->axpy_f32(want, 1.0f, x, N);
    for (int r = 0; r < ROWS; r++)
        kernels_ref()->axpy_f32(want + r * W, 1.0f, b, W);
    kernels_ref()->scale_f32(want, 0.0883883f, N);
    assert_memory_equal(got, want, sizeof got);
    print_message("# add, bias add, scale: the CPU's bits\n");
    /* a broadcast onto itself is refused: its source would change under it */
    struct vk_seq *s;
    OK(vk_seq_new(f->d, &s, err, sizeof err));
    OK(vk_seq_begin(s, err, sizeof err));
    assert_int_equal(vk_op_add(s, by, by, N, W, err, sizeof err), HEARTH_EINVAL);
    assert_int_equal(vk_op_add(s, by, bb, N, N, err, sizeof err), HEARTH_ERANGE);
    OK(vk_seq_run(s, err, sizeof err));
    vk_seq_free(s);
    vk_buf_free(by);
    vk_buf_free(bx);
    vk_buf_free(bb);
}

/*
 * Soft-cap bound, on |got - cpu| / cap: tanh from the device's exp, (1 - e) / (1 + e), is a
 * few ulp of 1 off the CPU's tanhf in absolute terms, then both multiply by cap.
 */
#define SOFTCAP_BOUND  1e-6

static void test_softcap(void **state)
{
    NEED_DEVICE(f);
    enum { N = 5000 };
    static float y[N], got[N];
    for (int i = 0; i < N; i++)
        y[i] = i < 1000 ? frand() * 1e-3f : 120.0f * frand();
    y[0]                      = 0.0f;
    double worst              = 0;
    static const float caps[] = {30.0f, 50.0f};
    for (int c = 0; c < 2; c++) {
        const float cap   = caps[c];
        struct vk_buf *by = upload(f->d, y, sizeof y);
        RUN1(f->d, vk_op_softcap(s, by, N, cap, err, sizeof err));
        OK(vk_buf_download(by, 0, got, sizeof got, err, sizeof err));
        for (int i = 0; i < N; i++) {
            const float want = tanhf(y[i] * (1.0f / cap)) * cap;
            const double e   = fabs((double)got[i] - want) / cap;
            if (!(e <= worst))
                worst = e;
        }
        assert_true(got[0] == 0.0f);
        vk_buf_free(by);
    }
    print_message("# softcap: max error %.3g of cap (bound %.0e)\n", worst, SOFTCAP_BOUND);
    assert_true(worst <= SOFTCAP_BOUND);
}

/* GELU-gated: the CPU's gelu_mul to the bit, across the f16 range and both cut-offs. */
static void test_gelu(void **state)
{
    NEED_DEVICE(f);
    enum { N = 6001 };
    static float g[N], u[N], got[N], want[N];
    for (int i = 0; i < N; i++) {
        g[i] = i % 3 == 0 ? 12.0f * frand() : i % 3 == 1 ? 3.0f * frand() : 1e-4f * frand();
        u[i] = 2.0f * frand();
    }
    g[1] = -10.0f, g[2] = 10.0f, g[3] = 9.999f, g[4] = -9.999f, g[5] = 0.0f, g[6] = -0.0f;
    struct vk_buf *bg = upload(f->d, g, sizeof g), *bu = upload(f->d, u, sizeof u);
    RUN1(f->d, vk_op_gelu(s, bg, bu, N, err, sizeof err));
    OK(vk_buf_download(bg, 0, got, sizeof got, err, sizeof err));
    kernels_ref()->gelu_mul(want, g, u, N);
    int wrong = 0;
    for (int i = 0; i < N; i++)
        if (memcmp(&got[i], &want[i], 4) && wrong++ < 5)
            print_message("gelu(%a) * %a: %a, want %a\n", (double)g[i], (double)u[i],
                          (double)got[i], (double)want[i]);
    assert_int_equal(wrong, 0);
    /* the table uploaded through staging too */
    struct vk_buf *sg = upload(f->staged, g, sizeof g), *su = upload(f->staged, u, sizeof u);
    RUN1(f->staged, vk_op_gelu(s, sg, su, N, err, sizeof err));
    OK(vk_buf_download(sg, 0, got, sizeof got, err, sizeof err));
    assert_memory_equal(got, want, sizeof got);
    vk_buf_free(sg);
    vk_buf_free(su);
    /* a second call reuses the device's table */
    OK(vk_buf_upload(bg, 0, g, sizeof g, err, sizeof err));
    RUN1(f->d, vk_op_gelu(s, bg, bu, N, err, sizeof err));
    OK(vk_buf_download(bg, 0, got, sizeof got, err, sizeof err));
    assert_memory_equal(got, want, sizeof got);
    print_message("# gelu: the CPU's gelu_mul to the bit\n");
    vk_buf_free(bg);
    vk_buf_free(bu);
}

static void test_gather(void **state)
{
    NEED_DEVICE(f);
    enum { W = 70, SRC = 6, OUT = 4 };
    static float src[SRC * W], got[OUT * W];
    for (int i = 0; i < SRC * W; i++)
        src[i] = frand();
    const int32_t rows[OUT] = {1, 3, 5, 6}; /* 6: past the source, left as it was */
    const float keep        = 42.0f;
    float init[OUT * W];
    for (int i = 0; i < OUT * W; i++)
        init[i] = keep;
    struct vk_buf *bs = upload(f->d, src, sizeof src), *bd = upload(f->d, init, sizeof init);
    struct vk_buf *br = upload(f->d, rows, sizeof rows);
    RUN1(f->d, vk_op_gather(s, bs, bd, br, W, SRC, OUT, err, sizeof err));
    OK(vk_buf_download(bd, 0, got, sizeof got, err, sizeof err));
    for (int i = 0; i < 3; i++)
        assert_memory_equal(got + i * W, src + rows[i] * W, W * sizeof(float));
    for (int e = 0; e < W; e++)
        assert_true(got[3 * W + e] == keep);
    struct vk_seq *s;
    OK(vk_seq_new(f->d, &s, err, sizeof err));
    OK(vk_seq_begin(s, err, sizeof err));
    assert_int_equal(vk_op_gather(s, bs, bs, br, W, SRC, OUT, err, sizeof err), HEARTH_EINVAL);
    OK(vk_seq_run(s, err, sizeof err));
    vk_seq_free(s);
    vk_buf_free(bs);
    vk_buf_free(bd);
    vk_buf_free(br);
}

/* A gated layer's [q, gate] heads split as the CPU's dnet_gate_split does: plain copies. */
static void test_split_qg(void **state)
{
    NEED_DEVICE(f);
    enum { ROWS = 3 * 5, HD = 80 }; /* 3 tokens of 5 heads */
    static float qg[ROWS * 2 * HD], q[ROWS * HD], g[ROWS * HD];
    for (int i = 0; i < ROWS * 2 * HD; i++)
        qg[i] = frand();
    struct vk_buf *bqg = upload(f->d, qg, sizeof qg), *bq, *bg;
    OK(vk_buf_new(f->d, sizeof q, &bq, err, sizeof err));
    OK(vk_buf_new(f->d, sizeof g, &bg, err, sizeof err));
    RUN1(f->d, vk_op_split_qg(s, bqg, bq, bg, ROWS, HD, err, sizeof err));
    OK(vk_buf_download(bq, 0, q, sizeof q, err, sizeof err));
    OK(vk_buf_download(bg, 0, g, sizeof g, err, sizeof err));
    for (int r = 0; r < ROWS; r++) {
        assert_memory_equal(q + r * HD, qg + r * 2 * HD, HD * sizeof(float));
        assert_memory_equal(g + r * HD, qg + r * 2 * HD + HD, HD * sizeof(float));
    }
    struct vk_seq *s;
    OK(vk_seq_new(f->d, &s, err, sizeof err));
    OK(vk_seq_begin(s, err, sizeof err));
    assert_int_equal(vk_op_split_qg(s, bqg, bq, bq, ROWS, HD, err, sizeof err), HEARTH_EINVAL);
    assert_int_equal(vk_op_split_qg(s, bq, bqg, bg, ROWS, HD, err, sizeof err), HEARTH_ERANGE);
    OK(vk_seq_run(s, err, sizeof err));
    vk_seq_free(s);
    vk_buf_free(bqg);
    vk_buf_free(bq);
    vk_buf_free(bg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_enumerate),      cmocka_unit_test(test_buffers),
        cmocka_unit_test(test_buffer_refused), cmocka_unit_test(test_pipeline_errors),
        cmocka_unit_test(test_mul_f32),        cmocka_unit_test(test_mul_f16),
        cmocka_unit_test(test_mul_q8_0),       cmocka_unit_test(test_mul_q4_0),
        cmocka_unit_test(test_mul_q4_k),       cmocka_unit_test(test_mul_q5_k),
        cmocka_unit_test(test_mul_q6_k),       cmocka_unit_test(test_mul_bf16),
        cmocka_unit_test(test_mul_q4_1),       cmocka_unit_test(test_mul_q5_0),
        cmocka_unit_test(test_mul_q5_1),       cmocka_unit_test(test_mul_q2_k),
        cmocka_unit_test(test_mul_q3_k),       cmocka_unit_test(test_mul_iq4_nl),
        cmocka_unit_test(test_mul_iq4_xs),     cmocka_unit_test(test_mul_many_rows),
        cmocka_unit_test(test_act_round),      cmocka_unit_test(test_rmsnorm),
        cmocka_unit_test(test_swiglu),         cmocka_unit_test(test_rope),
        cmocka_unit_test(test_rope_imrope),    cmocka_unit_test(test_sequence),
        cmocka_unit_test(test_attention),      cmocka_unit_test(test_kv_store_f16_bits),
        cmocka_unit_test(test_embed),          cmocka_unit_test(test_weight_past_one_buffer),
        cmocka_unit_test(test_add_scale),      cmocka_unit_test(test_softcap),
        cmocka_unit_test(test_gelu),           cmocka_unit_test(test_gather),
        cmocka_unit_test(test_split_qg),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

#endif
