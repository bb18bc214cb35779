/*
 * test_vk_deltanet.c: Gated DeltaNet's shaders (src/backend/vk/vk_deltanet.c)
 * against a host reference that runs src/backend/cpu/cpu_deltanet.c's
 * arithmetic (the same fma chain for the conv, f64 sums of squares for the
 * L2 norms, libm's exp, ggml_vec_dot_f32_ref's order for the state's dot
 * products, the reference silu_mul), over two batches that interleave three
 * sequences, several rows each, so the conv windows and the matrices must
 * be carried row by row and across batches, and rows of the second batch
 * snapshot their state mid-batch.
 *
 * Shapes: the tiny qwen35moe's (4 taps, state 32: the dot products' 16-wide
 * tail only) and an odd one (3 taps, state 91: the 64-wide fma blocks, the
 * 16 and 8 tails and the last fmas, 3 value heads over 1 key head).
 *
 * Bounds: the conv output (after SiLU) differs by the device's exp and by
 * whether its fmas fuse (the spec lets a driver round the product), |d| <=
 * CONV_BOUND (|ref| + sum |w_i x_i|); the windows are copies, bit for bit. The scan's
 * output and state, relative to the largest |ref| of their tensor: the L2
 * norms' f32 sums and the exps of SiLU, sigmoid, softplus and the decay
 * each differ by a few ulp, which the recurrence carries over the rows;
 * measured up to 3.1e-7 (conv 1.5e-7) on lavapipe, bound SCAN_BOUND. Snapshots must equal the
 * device's own state at their row, which the reference checks to the same bound.
 *
 * Skips with "vulkan-test: skipped: ..." when hearth is built without
 * Vulkan or the machine has no Vulkan device; .ci/run fails on that line.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/vkutil.h"

#ifndef HEARTH_VULKAN

int main(void)
{
    return vku_not_built_main();
}

#else

#include "backend/vk/vk_deltanet.h"
#include "kernels/ggml_dot.h"
#include "kernels/kernels.h"

#define CONV_BOUND 1e-6
#define SCAN_BOUND 5e-6

static void *zalloc(size_t n_floats)
{
    void *p = calloc(n_floats, sizeof(float));
    assert_non_null(p);
    return p;
}

/* ---------------------------------------------------- the reference --- */

/* One model's DeltaNet layer and the state of N_SEQ sequences, on the host. */
enum { N_SEQ = 3, MAX_TOK = 16 };

struct ref {
    struct vk_dnet_shape sh;
    float *taps, *dt_bias, *a; /* [C][K], [n_v], [n_v] */
    float *conv;               /* [N_SEQ][C][K - 1] */
    float *ssm;                /* [N_SEQ][n_v][S][S] */
};

static size_t conv_len(const struct vk_dnet_shape *sh)
{
    return (size_t)sh->conv_dim * (sh->n_conv - 1);
}

static size_t ssm_len(const struct vk_dnet_shape *sh)
{
    return (size_t)sh->n_v * sh->S * sh->S;
}

/*
 * cpu_deltanet.c's conv_channels and token_prep's SiLU; snap[t]: the window after row t.
 * mag: each output's sum |w_i x_i|, the scale its summation error has.
 */
static void ref_conv(struct ref *r, const int32_t *seq, int n, float *x, float **snap, double *mag)
{
    const uint32_t C = r->sh.conv_dim, K = r->sh.n_conv;
    float *ones = zalloc(C);
    for (uint32_t i = 0; i < C; i++)
        ones[i] = 1.0f;
    for (int t = 0; t < n; t++) {
        float *st = r->conv + (size_t)seq[t] * conv_len(&r->sh);
        for (uint32_t ch = 0; ch < C; ch++) {
            float *win = st + ch * (K - 1), *w = r->taps + ch * K, *v = x + (size_t)t * C + ch;
            float sum = 0.0f;
            double m  = fabs((double)*v * w[K - 1]);
            for (uint32_t i = 0; i < K - 1; i++) {
                sum = fmaf(win[i], w[i], sum);
                m += fabs((double)win[i] * w[i]);
            }
            mag[(size_t)t * C + ch] = m;
            sum                     = fmaf(*v, w[K - 1], sum);
            for (uint32_t i = 0; i + 1 < K - 1; i++)
                win[i] = win[i + 1];
            win[K - 2] = *v;
            *v         = sum;
        }
        if (snap && snap[t])
            memcpy(snap[t], st, conv_len(&r->sh) * sizeof(float));
        kernels_ref()->silu_mul(x + (size_t)t * C, x + (size_t)t * C, ones, C);
    }
    free(ones);
}

/* token_prep's norms and gates, then delta_heads for every row; snap[t]: the state after t. */
static void ref_scan(struct ref *r, const int32_t *seq, int n, float *x, float *beta, float *g,
                     float *o, float **snap)
{
    const uint32_t S = r->sh.S, C = r->sh.conv_dim, nv = r->sh.n_v, nk = r->sh.n_k;
    for (int t = 0; t < n; t++) {
        for (uint32_t h = 0; h < 2 * nk; h++) {
            float *v   = x + (size_t)t * C + h * S;
            double sum = 0.0;
            for (uint32_t i = 0; i < S; i++)
                sum += (double)(v[i] * v[i]);
            const float scale = 1.0f / fmaxf(sqrtf((float)sum), 1e-6f);
            for (uint32_t i = 0; i < S; i++)
                v[i] *= scale;
        }
        for (uint32_t h = 0; h < nv; h++) {
            float *b = beta + (size_t)t * nv + h, *gg = g + (size_t)t * nv + h;
            *b             = 1.0f / (1.0f + expf(-*b));
            const float u  = *gg + r->dt_bias[h];
            const float sp = u > 20.0f ? u : logf(1.0f + expf(u));
            *gg            = sp * r->a[h];
        }
    }
    const float scale = 1.0f / sqrtf((float)S);
    float *delta      = zalloc(S);
    for (int t = 0; t < n; t++)
        for (uint32_t h = 0; h < nv; h++) {
            float *M       = r->ssm + (size_t)seq[t] * ssm_len(&r->sh) + (size_t)h * S * S;
            const float *q = x + (size_t)t * C + (h % nk) * S, *k = q + (size_t)nk * S,
                        *v = x + (size_t)t * C + 2 * nk * S + h * S;
            const float b = beta[(size_t)t * nv + h], e = expf(g[(size_t)t * nv + h]);
            for (uint32_t i = 0; i < S * S; i++)
                M[i] *= e;
            for (uint32_t j = 0; j < S; j++)
                delta[j] = (v[j] - ggml_vec_dot_f32_ref(M + (size_t)j * S, k, S)) * b;
            for (uint32_t j = 0; j < S; j++)
                for (uint32_t i = 0; i < S; i++)
                    M[(size_t)j * S + i] = fmaf(k[i], delta[j], M[(size_t)j * S + i]);
            for (uint32_t j = 0; j < S; j++)
                o[((size_t)t * nv + h) * S + j] =
                    ggml_vec_dot_f32_ref(M + (size_t)j * S, q, S) * scale;
            if (snap && snap[t])
                memcpy(snap[t] + (size_t)h * S * S, M, (size_t)S * S * sizeof(float));
        }
    free(delta);
}

/* ------------------------------------------------------------- helpers --- */

/* max |got - ref| / max |ref| over n floats */
static double rel_err(const float *got, const float *ref, size_t n)
{
    double worst = 0, scale = 0;
    for (size_t i = 0; i < n; i++)
        scale = fmax(scale, fabs(ref[i]));
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)got[i] - ref[i]);
        if (!(d <= worst))
            worst = d;
    }
    return worst / (scale > 0 ? scale : 1);
}

static double conv_err(const float *got, const float *ref, const double *mag, size_t n)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        const double e = fabs((double)got[i] - ref[i]) / (fabs(ref[i]) + mag[i]);
        if (!(e <= worst))
            worst = e;
    }
    return worst;
}

/* The (sequence, position) rows of a batch as the backend uploads them. */
static struct vk_buf *rows_buf(const int32_t *seq, int n, int32_t *next_pos)
{
    int32_t rows[2 * MAX_TOK];
    for (int t = 0; t < n; t++) {
        rows[2 * t]     = seq[t];
        rows[2 * t + 1] = next_pos[seq[t]]++;
    }
    return vku_upload(vku_dev, rows, (size_t)n * 8);
}

/*
 * Two batches through conv1d, dnet_prep and deltanet on the device and the reference, states
 * carried on both sides; the second batch snapshots rows snap_a and snap_b.
 */
static void run_shape(struct vk_dnet_shape sh)
{
    static const int32_t seq1[] = {0, 1, 0, 2, 1, 0, 2, 2, 1, 0, 1};
    static const int32_t seq2[] = {2, 0, 1, 1, 2, 0, 0};
    enum { N1 = sizeof seq1 / sizeof seq1[0], N2 = sizeof seq2 / sizeof seq2[0] };
    const int snap_a = 2, snap_b = 6; /* sequence 1 mid-batch, sequence 0 at its last row */
    const uint32_t C = sh.conv_dim, K = sh.n_conv, nv = sh.n_v, S = sh.S;
    const size_t cl = conv_len(&sh), sl = ssm_len(&sh), f = sizeof(float);
    struct ref r = {.sh = sh};
    r.taps       = zalloc((size_t)C * K);
    r.dt_bias    = zalloc(nv);
    r.a          = zalloc(nv);
    r.conv       = zalloc(N_SEQ * cl);
    r.ssm        = zalloc(N_SEQ * sl);
    for (size_t i = 0; i < (size_t)C * K; i++)
        r.taps[i] = 0.7f * vku_frand();
    for (uint32_t h = 0; h < nv; h++) {
        r.dt_bias[h] = vku_frand();
        r.a[h]       = -expf(vku_frand());
    }
    struct vk_buf *btaps = vku_upload(vku_dev, r.taps, (size_t)C * K * f),
                  *bdt   = vku_upload(vku_dev, r.dt_bias, nv * f),
                  *ba    = vku_upload(vku_dev, r.a, nv * f),
                  *bconv = vku_upload(vku_dev, r.conv, N_SEQ * cl * f),
                  *bssm  = vku_upload(vku_dev, r.ssm, N_SEQ * sl * f);
    /* a slot of the device's snapshots holds the window, then the matrices */
    const struct vk_dnet_shape *shp = &sh;
    struct vk_dnet_snap snap = {.n_slot = 2, .stride = (uint32_t)(cl + sl), .off = (uint32_t)cl};
    snap.buf                 = vku_upload(vku_dev, NULL, 2 * (cl + sl) * f);
    int32_t next_pos[N_SEQ]  = {0};
    double conv_worst = 0, o_worst = 0, st_worst = 0, snap_worst = 0;
    for (int batch = 0; batch < 2; batch++) {
        const int32_t *seq = batch ? seq2 : seq1;
        const int n        = batch ? N2 : N1;
        float *x = zalloc((size_t)n * C), *beta = zalloc((size_t)n * nv),
              *g = zalloc((size_t)n * nv), *o = zalloc((size_t)n * nv * S),
              *got = zalloc((size_t)n * nv * S + (size_t)n * C + N_SEQ * sl);
        for (size_t i = 0; i < (size_t)n * C; i++)
            x[i] = vku_frand();
        for (size_t i = 0; i < (size_t)n * nv; i++) {
            beta[i] = 3.0f * vku_frand();
            g[i]    = 3.0f * vku_frand();
        }
        struct vk_buf *bx    = vku_upload(vku_dev, x, (size_t)n * C * f),
                      *bb    = vku_upload(vku_dev, beta, n * nv * f),
                      *bg    = vku_upload(vku_dev, g, n * nv * f),
                      *bo    = vku_upload(vku_dev, NULL, (size_t)n * nv * S * f),
                      *brows = rows_buf(seq, n, next_pos);
        int32_t slots[MAX_TOK];
        float *ref_snap[MAX_TOK] = {0};
        for (int t = 0; t < n; t++)
            slots[t] = -1;
        if (batch) {
            slots[snap_a]    = 0;
            slots[snap_b]    = 1;
            ref_snap[snap_a] = zalloc(cl + sl);
            ref_snap[snap_b] = zalloc(cl + sl);
        }
        snap.slots = vku_upload(vku_dev, slots, (size_t)n * 4);
        struct vk_seq *s;
        OK(vk_seq_new(vku_dev, &s, vku_err, sizeof vku_err));
        OK(vk_seq_begin(s, vku_err, sizeof vku_err));
        OK(vk_op_conv1d(s, shp, bx, btaps, bconv, N_SEQ, brows, (uint32_t)n, batch ? &snap : NULL,
                        vku_err, sizeof vku_err));
        OK(vk_seq_run(s, vku_err, sizeof vku_err));
        /* the conv's output before prep normalises q and k in place */
        float *conv_got = got + (size_t)n * nv * S;
        OK(vk_buf_download(bx, 0, conv_got, (size_t)n * C * f, vku_err, sizeof vku_err));
        OK(vk_seq_begin(s, vku_err, sizeof vku_err));
        OK(vk_op_dnet_prep(s, shp, bx, bb, bg, bdt, ba, (uint32_t)n, 1e-6f, vku_err,
                           sizeof vku_err));
        OK(vk_op_dnet_scan(s, shp, bx, bb, bg, bssm, N_SEQ, bo, brows, (uint32_t)n,
                           batch ? &snap : NULL, vku_err, sizeof vku_err));
        OK(vk_seq_run(s, vku_err, sizeof vku_err));
        vk_seq_free(s);

        double *mag = calloc((size_t)n * C, sizeof *mag);
        assert_non_null(mag);
        ref_conv(&r, seq, n, x, ref_snap, mag);
        conv_worst = fmax(conv_worst, conv_err(conv_got, x, mag, (size_t)n * C));
        free(mag);
        float *snap_m[MAX_TOK] = {0};
        for (int t = 0; t < n; t++)
            snap_m[t] = ref_snap[t] ? ref_snap[t] + cl : NULL;
        /* windows after the batch: bit for bit */
        float *win = got + (size_t)n * nv * S + (size_t)n * C;
        OK(vk_buf_download(bconv, 0, win, N_SEQ * cl * f, vku_err, sizeof vku_err));
        assert_memory_equal(win, r.conv, N_SEQ * cl * f);
        ref_scan(&r, seq, n, x, beta, g, o, snap_m);
        OK(vk_buf_download(bo, 0, got, (size_t)n * nv * S * f, vku_err, sizeof vku_err));
        o_worst = fmax(o_worst, rel_err(got, o, (size_t)n * nv * S));
        OK(vk_buf_download(bssm, 0, win, N_SEQ * sl * f, vku_err, sizeof vku_err));
        st_worst = fmax(st_worst, rel_err(win, r.ssm, N_SEQ * sl));
        if (batch) {
            float *sg = zalloc(2 * (cl + sl));
            OK(vk_buf_download(snap.buf, 0, sg, 2 * (cl + sl) * f, vku_err, sizeof vku_err));
            const int rows[2] = {snap_a, snap_b};
            for (int i = 0; i < 2; i++) {
                assert_memory_equal(sg + i * (cl + sl), ref_snap[rows[i]], cl * f);
                snap_worst =
                    fmax(snap_worst, rel_err(sg + i * (cl + sl) + cl, ref_snap[rows[i]] + cl, sl));
            }
            /* sequence 0's last row: its snapshot is the state the batch leaves */
            OK(vk_buf_download(bssm, 0, win, sl * f, vku_err, sizeof vku_err));
            assert_memory_equal(sg + (cl + sl) + cl, win, sl * f);
            free(sg);
            free(ref_snap[snap_a]);
            free(ref_snap[snap_b]);
        }
        vk_buf_free(snap.slots);
        struct vk_buf *all[] = {bx, bb, bg, bo, brows};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            vk_buf_free(all[i]);
        free(x);
        free(beta);
        free(g);
        free(o);
        free(got);
    }
    print_message("# deltanet K %u S %u (%u key, %u value heads): conv %.3g (bound %.0e), "
                  "output %.3g, state %.3g, snapshots %.3g of the largest (bound %.0e)\n",
                  K, S, sh.n_k, nv, conv_worst, CONV_BOUND, o_worst, st_worst, snap_worst,
                  SCAN_BOUND);
    assert_true(conv_worst <= CONV_BOUND);
    assert_true(o_worst <= SCAN_BOUND);
    assert_true(st_worst <= SCAN_BOUND);
    assert_true(snap_worst <= SCAN_BOUND);
    struct vk_buf *all[] = {btaps, bdt, ba, bconv, bssm, snap.buf};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        vk_buf_free(all[i]);
    free(r.taps);
    free(r.dt_bias);
    free(r.a);
    free(r.conv);
    free(r.ssm);
}

static void test_scan_tiny_shape(void **state)
{
    NEED_DEVICE(d);
    run_shape((struct vk_dnet_shape){
        .n_conv = 4, .S = 32, .n_k = 2, .n_v = 4, .conv_dim = (2 * 2 + 4) * 32});
}

static void test_scan_odd_shape(void **state)
{
    NEED_DEVICE(d);
    run_shape((struct vk_dnet_shape){
        .n_conv = 3, .S = 91, .n_k = 1, .n_v = 3, .conv_dim = (2 * 1 + 3) * 91});
}

/* Shapes that do not fit, and buffers too small, are refused with a sentence, not run. */
static void test_refusals(void **state)
{
    NEED_DEVICE(d);
    const struct vk_dnet_shape good = {4, 32, 2, 4, 256}, bad = {4, 32, 3, 4, 320};
    struct vk_buf *small = vku_upload(d, NULL, 64), *big = vku_upload(d, NULL, 1 << 16);
    struct vk_seq *s;
    OK(vk_seq_new(d, &s, vku_err, sizeof vku_err));
    OK(vk_seq_begin(s, vku_err, sizeof vku_err));
    assert_int_equal(vk_op_conv1d(s, &bad, big, big, big, 1, big, 1, NULL, vku_err, sizeof vku_err),
                     HEARTH_EINVAL);
    assert_non_null(strstr(vku_err, "value heads"));
    assert_int_equal(
        vk_op_conv1d(s, &good, small, big, big, 1, big, 1, NULL, vku_err, sizeof vku_err),
        HEARTH_ERANGE);
    assert_non_null(strstr(vku_err, "conv1d"));
    assert_int_equal(vk_op_dnet_scan(s, &good, big, big, big, big, 5, big, big, 1, NULL, vku_err,
                                     sizeof vku_err),
                     HEARTH_ERANGE); /* 5 states of 4 x 32 x 32 floats: 64 KiB is too small */
    assert_int_equal(vk_op_dnet_scan(s, &good, big, big, big, big, 1, big, big, 1, NULL, vku_err,
                                     sizeof vku_err),
                     HEARTH_EINVAL); /* the output over its input */
    OK(vk_seq_run(s, vku_err, sizeof vku_err));
    vk_seq_free(s);
    vk_buf_free(small);
    vk_buf_free(big);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scan_tiny_shape),
        cmocka_unit_test(test_scan_odd_shape),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, vku_setup, vku_teardown);
}

#endif
