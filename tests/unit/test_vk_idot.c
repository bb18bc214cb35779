/*
 * test_vk_idot.c: the integer-dot decode matmul (src/backend/vk/vk_idot.c)
 * against the CPU's arithmetic, on the first device the loader offers.
 *
 * Activations: vk_op_quant_act must write the blocks kernels/ref.c's
 * ref_q8_0_act_from_float writes, quants and scale to the bit.
 *
 * Matmul: each output against ref_vec_dot_q8_0_q8_0 (Q8_0 weights) or
 * ref_vec_dot_q4_0_q8_0 (Q4_0) over the same blocks. The shaders do the
 * reference's arithmetic (Q8_0: per block eight exact integer sums of four,
 * each added by fma(d_w * d_x, sum, acc[l]), then the eight as a tree;
 * Q4_0: one exact integer sum per block into one fma chain), so a row of
 * one block, whose team is one lane, must give the same bits. A larger
 * team's lanes each do that over every team-th block and add their results
 * as a tree: against the reference's chains of n_b = n_in / 32 fmas, both
 * sums are within n_b + 6 roundings of sum |w x|, so the bound is
 * 2 (n_b + 6) 2^-24 of sum |w x| per output.
 * Shapes: teams of 1, 2, 4 and 8 lanes, block counts that are not a
 * multiple of the team (3, 5, 7, 11), row counts that leave part of a
 * workgroup idle, 1 to 7 tokens, and a row of 4096; each on the device
 * with subgroup shuffles (where it has them) and without.
 *
 * Skips with "vulkan-test: skipped: ..." when hearth is built without
 * Vulkan or the machine has no Vulkan device; a device without integer dot
 * products (or a glslc that cannot build the shader) runs only the checks
 * that the path is refused there.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/testutil.h"
#include "util/vkutil.h"

#ifndef HEARTH_VULKAN

int main(void)
{
    return vku_not_built_main();
}

#else

#include "backend/vk/vk.h"
#include "kernels/kernels.h"
#include "kernels/ref.h"
#include "quant/quants.h"
#include "util/dtype.h"
#include "util/dtype_blocks.h"
#include "util/fp16.h"

struct fixture {
    struct vk_dev *d;     /* vulkan0 as the backend opens it */
    struct vk_dev *plain; /* without subgroup operations (VK_OPEN_PLAIN) */
    struct vk_dev *none;  /* without the integer path (VK_OPEN_NO_IDOT) */
};

static int setup(void **state)
{
    static struct fixture f;
    struct vk_device_info *info = NULL;
    int n                       = 0;
    if (vk_enumerate(&info, &n, vku_err, sizeof vku_err) != HEARTH_OK) {
        snprintf(vku_skip_why, sizeof vku_skip_why, "%s", vku_err);
    } else if (n == 0) {
        snprintf(vku_skip_why, sizeof vku_skip_why, "the loader found no Vulkan device");
    } else {
        print_message("# vulkan0: %s (%s), integer dot %s\n", info[0].name, info[0].driver,
                      info[0].int_dot ? "yes" : "no");
        if (vk_dev_open(0, 0, &f.d, vku_err, sizeof vku_err) != HEARTH_OK ||
            vk_dev_open(0, VK_OPEN_PLAIN, &f.plain, vku_err, sizeof vku_err) != HEARTH_OK ||
            vk_dev_open(0, VK_OPEN_NO_IDOT, &f.none, vku_err, sizeof vku_err) != HEARTH_OK) {
            print_message("vk_dev_open: %s\n", vku_err);
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
    vk_dev_close(f->plain);
    vk_dev_close(f->none);
    return 0;
}

/* clang-format off */
#define NEED_FIXTURE(f)                                                                      \
    struct fixture *f = *state;                                                              \
    if (!f->d) {                                                                             \
        print_message("vulkan-test: skipped: %s\n", vku_skip_why);                           \
        skip();                                                                              \
    }
/* clang-format on */

/* The integer path's checks need a device that runs it: elsewhere only the refusals run. */
/* clang-format off */
#define NEED_IDOT(f)                                                                         \
    NEED_FIXTURE(f);                                                                         \
    if (!vk_op_matmul_dot_supported(f->d, DTYPE_Q8_0, 1)) {                                  \
        print_message("# no integer-dot path on %s: refusals only\n",                        \
                      vk_dev_info(f->d)->name);                                              \
        return;                                                                              \
    }
/* clang-format on */

/* Random activations of n (a multiple of 32): block 1 all zero, the rest of varied scale. */
static float *activations(uint32_t n)
{
    float *x = malloc((size_t)n * sizeof *x);
    assert_non_null(x);
    for (uint32_t i = 0; i < n; i++)
        x[i] = i / 32 == 1 ? 0.0f : vku_frand() * (float)(1 + (i / 32) % 5) * 3.0f;
    return x;
}

/* Runs vk_op_quant_act on x (n floats) and returns the device's 9 words per block. */
static uint32_t *device_blocks(struct vk_dev *d, const float *x, uint32_t n, struct vk_buf **keep)
{
    const size_t len = (size_t)n / 32 * 36;
    uint32_t *q      = malloc(len);
    assert_non_null(q);
    struct vk_buf *bx = vku_upload(d, x, (size_t)n * sizeof *x), *bq;
    OK(vk_buf_new(d, len, &bq, vku_err, sizeof vku_err));
    struct vk_seq *s;
    OK(vk_seq_new(d, &s, vku_err, sizeof vku_err));
    OK(vk_seq_begin(s, vku_err, sizeof vku_err));
    OK(vk_op_quant_act(s, bx, bq, n, vku_err, sizeof vku_err));
    OK(vk_seq_run(s, vku_err, sizeof vku_err));
    OK(vk_buf_download(bq, 0, q, len, vku_err, sizeof vku_err));
    vk_seq_free(s);
    vk_buf_free(bx);
    if (keep)
        *keep = bq;
    else
        vk_buf_free(bq);
    return q;
}

static void test_quant_act_bits(void **state)
{
    NEED_IDOT(f);
    const uint32_t n       = 32 * 37;
    float *x               = activations(n);
    struct block_q8_0 *ref = malloc(n / 32 * sizeof *ref);
    assert_non_null(ref);
    ref_q8_0_act_from_float(x, ref, n);
    uint32_t *q = device_blocks(f->d, x, n, NULL);
    for (uint32_t b = 0; b < n / 32; b++) {
        for (uint32_t j = 0; j < 32; j++)
            assert_int_equal((int8_t)(q[9 * b + j / 4] >> (8 * (j % 4))), ref[b].qs[j]);
        float d;
        memcpy(&d, &q[9 * b + 8], sizeof d);
        assert_true(d == fp16_to_fp32(ref[b].d));
    }
    free(q);
    free(ref);
    free(x);
}

/*
 * n_tok rows of activations times a random weight of type (Q8_0 or Q4_0), n_out x n_in, on d:
 * the largest error against the reference vec_dot relative to sum |w x|; *exact whether every
 * output had the reference's bits.
 */
static double dot_err(struct vk_dev *d, enum dtype type, uint32_t n_in, uint32_t n_out,
                      uint32_t n_tok, bool *exact)
{
    const size_t row_len = dtype_row_len(type, n_in);
    const uint32_t nb    = n_in / 32;
    void (*vec_dot)(int64_t, float *, const void *, const void *) =
        type == DTYPE_Q8_0 ? ref_vec_dot_q8_0_q8_0 : ref_vec_dot_q4_0_q8_0;
    float *wf             = malloc((size_t)n_in * sizeof *wf);
    uint8_t *wq           = malloc(row_len * n_out);
    float *y              = malloc((size_t)n_tok * n_out * sizeof *y);
    struct block_q8_0 *xq = malloc((size_t)n_tok * nb * sizeof *xq);
    assert_true(wf && wq && y && xq);
    for (uint32_t r = 0; r < n_out; r++) {
        for (uint32_t i = 0; i < n_in; i++)
            wf[i] = vku_frand() * (1.0f + (float)((r + i / 32) % 7));
        assert_true(quant_row(type, wf, wq + r * row_len, n_in));
    }
    float *x = activations(n_tok * n_in);
    ref_q8_0_act_from_float(x, xq, (int64_t)n_tok * n_in);

    struct vk_buf *bq;
    free(device_blocks(d, x, n_tok * n_in, &bq));
    struct vk_buf *bw = vku_upload(d, wq, row_len * n_out), *by;
    OK(vk_buf_new(d, (size_t)n_tok * n_out * sizeof *y, &by, vku_err, sizeof vku_err));
    struct vk_seq *s;
    OK(vk_seq_new(d, &s, vku_err, sizeof vku_err));
    OK(vk_seq_begin(s, vku_err, sizeof vku_err));
    OK(vk_op_matmul_dot(s, type, bw, bq, by, n_in, n_out, n_tok, vku_err, sizeof vku_err));
    OK(vk_seq_run(s, vku_err, sizeof vku_err));
    OK(vk_buf_download(by, 0, y, (size_t)n_tok * n_out * sizeof *y, vku_err, sizeof vku_err));

    double worst = 0;
    *exact       = true;
    for (uint32_t r = 0; r < n_out; r++) {
        const uint8_t *wr = wq + r * row_len;
        kernels_ref()->type[type].to_float(wr, wf, n_in);
        for (uint32_t t = 0; t < n_tok; t++) {
            const struct block_q8_0 *xt = xq + (size_t)t * nb;
            float ref;
            vec_dot(n_in, &ref, wr, xt);
            double mag = 0;
            for (uint32_t i = 0; i < n_in; i++)
                mag += fabs((double)wf[i] * fp16_to_fp32(xt[i / 32].d) * xt[i / 32].qs[i % 32]);
            const float got = y[(size_t)t * n_out + r];
            if (memcmp(&got, &ref, sizeof got))
                *exact = false;
            const double e = fabs((double)got - ref) / (mag > 0 ? mag : 1);
            if (!(e <= worst)) /* NaN too */
                worst = e;
        }
    }
    vk_seq_free(s);
    vk_buf_free(bq);
    vk_buf_free(bw);
    vk_buf_free(by);
    free(wf);
    free(wq);
    free(y);
    free(xq);
    free(x);
    return worst;
}

static void check_dot(void **state, enum dtype type)
{
    NEED_IDOT(f);
    assert_true(vk_op_matmul_dot_supported(f->d, type, 1));
    /* {n_in, n_out, n_tok}: teams of 1 (one block), 2 (2, 3 blocks), 4 (5, 7) and 8 (11, 128) */
    static const uint32_t shapes[][3] = {
        {32, 67, 1}, {64, 20, 2},  {96, 70, 3},   {160, 300, 7},
        {224, 9, 1}, {352, 67, 5}, {4096, 24, 1}, {32, 513, 4},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const uint32_t n_in = shapes[i][0];
        const double bound  = 2.0 * (n_in / 32 + 6) * 0x1p-24;
        for (int plain = 0; plain < 2; plain++) {
            bool exact;
            const double e =
                dot_err(plain ? f->plain : f->d, type, n_in, shapes[i][1], shapes[i][2], &exact);
            print_message("# %s %u x %u by %u%s: max error %.3g of sum |w x| (bound %.3g)%s\n",
                          dtype_name(type), shapes[i][1], n_in, shapes[i][2],
                          plain ? " (plain)" : "", e, bound, exact ? ", the reference's bits" : "");
            assert_true(e <= bound);
            if (n_in == 32)
                assert_true(exact);
        }
    }
}

static void test_dot_q8_0(void **state)
{
    check_dot(state, DTYPE_Q8_0);
}

static void test_dot_q4_0(void **state)
{
    check_dot(state, DTYPE_Q4_0);
}

static void test_refusals(void **state)
{
    NEED_FIXTURE(f);
    /* the flag (and HEARTH_VK_IDOT=0) turns the path off; prefill and other types never take it */
    assert_false(vk_op_matmul_dot_supported(f->none, DTYPE_Q8_0, 1));
    assert_false(vk_op_matmul_dot_supported(f->d, DTYPE_Q4_K, 1));
    assert_false(vk_op_matmul_dot_supported(f->d, DTYPE_Q8_0, VK_DOT_MAX_TOK + 1));
    assert_false(vk_op_matmul_dot_supported(f->d, DTYPE_Q8_0, 0));
    float one[64]    = {1.0f};
    struct vk_buf *b = vku_upload(f->none, one, sizeof one);
    struct vk_seq *s;
    OK(vk_seq_new(f->none, &s, vku_err, sizeof vku_err));
    OK(vk_seq_begin(s, vku_err, sizeof vku_err));
    assert_int_equal(vk_op_matmul_dot(s, DTYPE_Q8_0, b, b, b, 32, 1, 1, vku_err, sizeof vku_err),
                     HEARTH_EUNSUPPORTED);
    assert_non_null(strstr(vku_err, "no integer-dot matmul"));
    assert_int_equal(vk_op_quant_act(s, b, b, 33, vku_err, sizeof vku_err), HEARTH_EINVAL);
    assert_int_equal(vk_op_quant_act(s, b, b, 96, vku_err, sizeof vku_err), HEARTH_ERANGE);
    OK(vk_seq_run(s, vku_err, sizeof vku_err));
    vk_seq_free(s);
    vk_buf_free(b);
    if (!vk_op_matmul_dot_supported(f->d, DTYPE_Q8_0, 1))
        return;
    b = vku_upload(f->d, one, sizeof one);
    OK(vk_seq_new(f->d, &s, vku_err, sizeof vku_err));
    OK(vk_seq_begin(s, vku_err, sizeof vku_err));
    assert_int_equal(vk_op_matmul_dot(s, DTYPE_Q8_0, b, b, b, 48, 1, 1, vku_err, sizeof vku_err),
                     HEARTH_EINVAL);
    /* 2 rows of 64 Q8_0 need 136 bytes of weight; the buffer has 256 but 4 rows need 272 */
    assert_int_equal(vk_op_matmul_dot(s, DTYPE_Q8_0, b, b, b, 64, 4, 1, vku_err, sizeof vku_err),
                     HEARTH_ERANGE);
    assert_non_null(strstr(vku_err, "the weight needs 272 bytes"));
    assert_int_equal(vk_op_matmul_dot(s, DTYPE_Q8_0, b, b, b, 64, 1, 8, vku_err, sizeof vku_err),
                     HEARTH_EUNSUPPORTED);
    OK(vk_seq_run(s, vku_err, sizeof vku_err));
    vk_seq_free(s);
    vk_buf_free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quant_act_bits),
        cmocka_unit_test(test_dot_q8_0),
        cmocka_unit_test(test_dot_q4_0),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

#endif
