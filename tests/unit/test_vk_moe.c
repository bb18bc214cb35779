/*
 * test_vk_moe.c: the routed experts on the Vulkan device
 * (src/backend/vk/vk_moe.c), and the activation rounding that keeps their
 * routing with the CPU's (vk_act.c), against references computed here in f64 from
 * the reference dequantization, on whatever device the loader offers
 * first (lavapipe in CI).
 *
 * Bounds. The expert matmul is the dense matmul's arithmetic (the same f32
 * products, a 64-lane tree), so it is held to test_vk.c's 5e-6 of
 * sum |w_i x_i| for every type, over a stack split across buffers with an
 * expert straddling two, and must leave the pairs of other experts alone.
 * The routing must pick the reference's experts, in order (ties to the
 * lower index), and its weights be within 1e-6 of the f64 ones (the
 * device's exp and f32 sums: a few ulp). The combine must be the C
 * expression's bits in the same order. Activations rounded for a Q8_0
 * matmul (vk_act.c) must be the CPU's from_float's values to the bit. A
 * whole layer (router, routing,
 * SwiGLU experts, a shared expert, the weighted sum) must stay within 1e-5
 * of the largest |MoE output| of its row (measured 2.9e-7: the matmuls'
 * and SwiGLU's roundings), or 2e-3 with the inputs rounded to Q8_0
 * (LAYER_Q8_BOUND), where a wrong expert or weight costs a good fraction
 * of the row.
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

#include "backend/vk/vk_moe.h"
#include "kernels/kernels.h"
#include "quant/quants.h"
#include "util/dtype.h"

#define MUL_ID_BOUND   5e-6
#define ROUTE_BOUND    1e-6
#define LAYER_BOUND    1e-5
/*
 * With the experts' inputs rounded to Q8_0 (as the CPU's): SwiGLU's last bits may carry one
 * of its outputs across a rounding boundary, a step of 1/127 of its block's largest value in
 * that element (measured 2.1e-4 of the row's largest output).
 */
#define LAYER_Q8_BOUND 2e-3

/* A weight of rows of n_in random values quantized to type, and its dequantized f32 copy. */
struct mat {
    enum dtype type;
    uint32_t n_in, n_rows;
    uint8_t *q; /* rows of dtype_row_len bytes */
    float *deq; /* [n_rows][n_in] as the reference to_float reads q */
};

static struct mat mat_new(enum dtype type, uint32_t n_in, uint32_t n_rows, float scale)
{
    struct mat m         = {type, n_in, n_rows, NULL, NULL};
    const size_t row_len = dtype_row_len(type, n_in);
    float *row           = malloc(n_in * sizeof *row);
    m.q                  = malloc(row_len * n_rows);
    m.deq                = malloc((size_t)n_rows * n_in * sizeof *m.deq);
    assert_true(row && m.q && m.deq);
    for (uint32_t r = 0; r < n_rows; r++) {
        for (uint32_t i = 0; i < n_in; i++)
            row[i] = scale * vku_frand() * (1.0f + (float)((r + i) % 5));
        assert_true(quant_row(type, row, m.q + r * row_len, n_in));
        kernels_ref()->type[type].to_float(m.q + r * row_len, m.deq + (size_t)r * n_in, n_in);
    }
    free(row);
    return m;
}

static void mat_free(struct mat *m)
{
    free(m->q);
    free(m->deq);
}

static struct vk_weight *mat_upload(struct vk_dev *d, const struct mat *m, size_t part_max)
{
    struct vk_weight *w;
    OK(vk_weight_new(d, m->type, m->n_in, m->n_rows, m->q, part_max, &w, vku_err, sizeof vku_err));
    return w;
}

/* f64 dot of row r of m with x, and sum |w_i x_i| in *mag. */
static double dot(const struct mat *m, uint32_t r, const float *x, double *mag)
{
    double s = 0, a = 0;
    for (uint32_t i = 0; i < m->n_in; i++) {
        const double p = (double)m->deq[(size_t)r * m->n_in + i] * x[i];
        s += p;
        a += fabs(p);
    }
    if (mag)
        *mag = a;
    return s;
}

/* ------------------------------------------------------ expert matmul --- */

/*
 * A stack of 5 experts of 37 rows (e_base 3: experts 3..7) over 9 tokens of 3 slots whose ids
 * also name experts outside the stack; split into parts of 16 rows, so experts straddle
 * parts. Gate-like (a row per token) and down-like (a row per pair) inputs. Returns the
 * largest error relative to sum |w x|; pairs of other experts must keep their sentinel.
 */
static double mul_id_err(struct vk_dev *d, enum dtype type, bool per_slot, size_t part_rows)
{
    enum { E = 5, BASE = 3, OUT = 37, TOK = 9, SLOTS = 3, PAIRS = TOK * SLOTS };
    const uint32_t n_in   = dtype_get(type)->block == 256 ? 512 : 96;
    struct mat m          = mat_new(type, n_in, E * OUT, 1.0f);
    const size_t part_max = part_rows * dtype_row_len(type, n_in);
    struct vk_weight *w   = mat_upload(d, &m, part_max);
    if (part_rows)
        assert_true(vk_weight_parts(w) > 1);
    int32_t ids[PAIRS];
    for (int q = 0; q < PAIRS; q++)
        ids[q] = (int32_t)((q * 7 + q / 3) % (E + 4)); /* 0..8: 0-2 and 8 are not in the stack */
    const uint32_t x_rows = per_slot ? PAIRS : TOK;
    float *x              = malloc((size_t)x_rows * n_in * sizeof *x), y[PAIRS * OUT];
    assert_non_null(x);
    for (size_t i = 0; i < (size_t)x_rows * n_in; i++)
        x[i] = vku_frand();
    for (int i = 0; i < PAIRS * OUT; i++)
        y[i] = -12345.0f;
    struct vk_buf *bi = vku_upload(d, ids, sizeof ids),
                  *bx = vku_upload(d, x, (size_t)x_rows * n_in * 4),
                  *by = vku_upload(d, y, sizeof y);
    RUN1(d, vk_op_matmul_id(s, w, OUT, BASE, bi, bx, per_slot, by, TOK, SLOTS, vku_err,
                            sizeof vku_err));
    vku_download(by, y, sizeof y);
    double worst = 0;
    for (int q = 0; q < PAIRS; q++) {
        const float *xq = x + (size_t)(per_slot ? q : q / SLOTS) * n_in;
        for (int r = 0; r < OUT; r++) {
            const float got = y[q * OUT + r];
            if (ids[q] < BASE || ids[q] >= BASE + E) {
                assert_true(got == -12345.0f);
                continue;
            }
            double mag;
            const double ref = dot(&m, (uint32_t)((ids[q] - BASE) * OUT + r), xq, &mag);
            const double e   = fabs(got - ref) / (mag > 0 ? mag : 1);
            if (!(e <= worst))
                worst = e;
        }
    }
    vk_buf_free(bi);
    vk_buf_free(bx);
    vk_buf_free(by);
    vk_weight_free(w);
    mat_free(&m);
    free(x);
    return worst;
}

static void test_mul_id(void **state)
{
    NEED_DEVICE(d);
    static const enum dtype types[] = {DTYPE_F32,  DTYPE_F16,    DTYPE_BF16,  DTYPE_Q8_0,
                                       DTYPE_Q4_0, DTYPE_Q4_1,   DTYPE_Q5_0,  DTYPE_Q5_1,
                                       DTYPE_Q2_K, DTYPE_Q3_K,   DTYPE_Q4_K,  DTYPE_Q5_K,
                                       DTYPE_Q6_K, DTYPE_IQ4_NL, DTYPE_IQ4_XS};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        assert_true(vk_op_matmul_id_supported(types[i]));
        double worst = 0;
        for (int per_slot = 0; per_slot < 2; per_slot++)
            for (int split = 0; split < 2; split++) {
                const double e = mul_id_err(d, types[i], per_slot, split ? 16 : 0);
                worst          = e > worst ? e : worst;
            }
        print_message("# mul_id_%s: max error %.3g of sum |w x| (bound %.0e), whole and split\n",
                      dtype_name(types[i]), worst, MUL_ID_BOUND);
        assert_true(worst <= MUL_ID_BOUND);
    }
    assert_false(vk_op_matmul_id_supported(DTYPE_Q8_K)); /* an activation type only */
}

/* Shapes that do not fit are refused with a sentence, not dispatched. */
static void test_mul_id_refusals(void **state)
{
    NEED_DEVICE(d);
    struct mat m        = mat_new(DTYPE_Q8_0, 64, 6, 1.0f);
    struct vk_weight *w = mat_upload(d, &m, 0);
    struct vk_buf *b = vku_zeros(d, 64), *big = vku_zeros(d, 4096);
    struct vk_seq *s;
    OK(vk_seq_new(d, &s, vku_err, sizeof vku_err));
    OK(vk_seq_begin(s, vku_err, sizeof vku_err));
    /* 6 rows are not experts of 4 */
    assert_int_equal(
        vk_op_matmul_id(s, w, 4, 0, big, big, false, big, 1, 1, vku_err, sizeof vku_err),
        HEARTH_EINVAL);
    assert_non_null(strstr(vku_err, "experts of 4"));
    /* an output of 64 bytes cannot hold 8 pairs of 3 floats */
    assert_int_equal(vk_op_matmul_id(s, w, 3, 0, big, big, false, b, 4, 2, vku_err, sizeof vku_err),
                     HEARTH_ERANGE);
    assert_non_null(strstr(vku_err, "the output"));
    assert_int_equal(vk_op_moe_route(s, big, big, big, 1, 4, 5, false, vku_err, sizeof vku_err),
                     HEARTH_EINVAL);
    assert_int_equal(vk_op_moe_combine(s, b, b, b, 1, 16, 2, vku_err, sizeof vku_err),
                     HEARTH_ERANGE);
    OK(vk_seq_run(s, vku_err, sizeof vku_err));
    vk_seq_free(s);
    vk_buf_free(b);
    vk_buf_free(big);
    vk_weight_free(w);
    mat_free(&m);
}

/* ------------------------------------------------------------ routing --- */

/* The reference routing of one token: ids and weights as vk_op_moe_route states them, f64. */
static void route_ref(const float *l, int E, int K, bool sh, int32_t *ids, double *w, double *gap)
{
    double mx = l[0], sum = 0, p[64];
    for (int e = 1; e < E; e++)
        mx = fmax(mx, l[e]);
    for (int e = 0; e < E; e++)
        sum += exp(l[e] - mx);
    for (int e = 0; e < E; e++)
        p[e] = exp(l[e] - mx) / sum;
    double wsum = 0;
    *gap        = INFINITY;
    for (int k = 0; k < K; k++) {
        int best = -1;
        for (int e = 0; e < E; e++) {
            bool taken = false;
            for (int j = 0; j < k; j++)
                taken |= ids[j] == e;
            if (!taken && (best < 0 || p[e] > p[best]))
                best = e;
        }
        ids[k] = best;
        w[k]   = p[best];
        wsum += p[best];
    }
    /* how close the last pick came to the best one left out, where a ulp could swap them */
    for (int e = 0; e < E; e++) {
        bool taken = false;
        for (int j = 0; j < K; j++)
            taken |= ids[j] == e;
        if (!taken)
            *gap = fmin(*gap, w[K - 1] - p[e]);
    }
    for (int k = 0; k < K; k++)
        w[k] /= fmax(wsum, 6.103515625e-5);
    if (sh) {
        ids[K] = E;
        w[K]   = 1.0 / (1.0 + exp(-(double)l[E]));
    }
}

static void test_route(void **state)
{
    NEED_DEVICE(d);
    enum { TOK = 300, E = 60, K = 8, L = E + 1, S = K + 1 };
    static float logit[TOK * L];
    static int32_t ids[TOK * S], want[S];
    static float w[TOK * S];
    for (int i = 0; i < TOK * L; i++)
        logit[i] = 6.0f * vku_frand();
    /* exact ties: equal logits go to the lower index, in order */
    for (int e = 0; e < E; e++)
        logit[e] = e % 3 == 0 ? 2.5f : -1.0f;
    for (int sh = 0; sh < 2; sh++) {
        const int ns = K + sh, nl = E + sh;
        /* with no shared expert the rows are E wide: repack */
        static float packed[TOK * L];
        for (int t = 0; t < TOK; t++)
            memcpy(packed + t * nl, logit + t * L, (size_t)nl * 4);
        struct vk_buf *bl = vku_upload(d, packed, sizeof packed), *bi = vku_zeros(d, sizeof ids),
                      *bw = vku_zeros(d, sizeof w);
        RUN1(d, vk_op_moe_route(s, bl, bi, bw, TOK, E, K, sh, vku_err, sizeof vku_err));
        vku_download(bi, ids, sizeof ids);
        vku_download(bw, w, sizeof w);
        double worst = 0, gap;
        double ww[S];
        int close = 0;
        for (int t = 0; t < TOK; t++) {
            route_ref(packed + t * nl, E, K, sh, want, ww, &gap);
            if (gap < 1e-6) { /* a near-tie the two arithmetics may break differently */
                close++;
                continue;
            }
            assert_memory_equal(ids + t * ns, want, (size_t)ns * 4);
            for (int k = 0; k < ns; k++)
                worst = fmax(worst, fabs(w[t * ns + k] - ww[k]) / ww[k]);
        }
        /* the ties of token 0: experts 0, 3, 6, ... */
        for (int k = 0; k < K; k++)
            assert_int_equal(ids[k], 3 * k);
        print_message("# moe_route%s: %d tokens, same experts (%d near-ties left out), weights "
                      "within %.3g (bound %.0e)\n",
                      sh ? " with a shared expert" : "", TOK, close, worst, ROUTE_BOUND);
        assert_true(close <= 3);
        assert_true(worst <= ROUTE_BOUND);
        vk_buf_free(bl);
        vk_buf_free(bi);
        vk_buf_free(bw);
    }
}

static void test_combine(void **state)
{
    NEED_DEVICE(d);
    enum { TOK = 13, D = 300, S = 3 };
    static float x[TOK * D], o[TOK * S * D], w[TOK * S], got[TOK * D];
    for (int i = 0; i < TOK * D; i++)
        x[i] = 4.0f * vku_frand();
    for (int i = 0; i < TOK * S * D; i++)
        o[i] = 3.0f * vku_frand();
    for (int i = 0; i < TOK * S; i++)
        w[i] = 0.5f * (vku_frand() + 1.0f);
    struct vk_buf *bx = vku_upload(d, x, sizeof x), *bo = vku_upload(d, o, sizeof o),
                  *bw = vku_upload(d, w, sizeof w);
    RUN1(d, vk_op_moe_combine(s, bx, bo, bw, TOK, D, S, vku_err, sizeof vku_err));
    vku_download(bx, got, sizeof got);
    for (int t = 0; t < TOK; t++)
        for (int i = 0; i < D; i++) {
            float acc = o[(t * S) * D + i] * w[t * S];
            for (int k = 1; k < S; k++) {
                const float p = o[(t * S + k) * D + i] * w[t * S + k];
                acc += p;
            }
            const float want = x[t * D + i] + acc;
            assert_memory_equal(&got[t * D + i], &want, 4);
        }
    print_message("# moe_combine: %d rows of %d from %d slots, the C expression's bits\n", TOK, D,
                  S);
    vk_buf_free(bx);
    vk_buf_free(bo);
    vk_buf_free(bw);
}

/* ------------------------------------------------- activation rounding --- */

/*
 * vk_op_act_round (Q8_0, the experts' input type) against the CPU's own from_float (this machine's
 * kernel table) then the reference to_float: the same bits, over blocks of every scale, halfway
 * cases (values whose scaled quant ends in .5), zero blocks and in place.
 */
static void test_round_act(void **state)
{
    NEED_DEVICE(d);
    enum { N = 32 * 700 };
    static float x[N], got[N], want[N];
    static uint8_t q[N / 32 * 34];
    for (int b = 0; b < N / 32; b++) {
        const float scale = ldexpf(1.0f, b % 40 - 20);
        for (int j = 0; j < 32; j++)
            x[b * 32 + j] = scale * vku_frand();
        if (b % 7 == 1) /* amax 127: x * 127 / amax is x, so .5s are exact halfway cases */
            for (int j = 0; j < 32; j++)
                x[b * 32 + j] = j == 0 ? 127.0f : (float)(j * 4 - 64) + 0.5f;
        if (b % 11 == 2)
            memset(x + b * 32, 0, 32 * sizeof *x);
    }
    const struct kernels *k = kernels_get();
    assert_int_equal(k->type[DTYPE_Q8_0].vec_dot_type, DTYPE_Q8_0);
    k->type[DTYPE_Q8_0].from_float(x, q, N);
    kernels_ref()->type[DTYPE_Q8_0].to_float(q, want, N);
    struct vk_buf *bx = vku_upload(d, x, sizeof x), *by = vku_zeros(d, sizeof x);
    RUN1(d, vk_op_act_round(s, DTYPE_Q8_0, bx, by, N, vku_err, sizeof vku_err));
    vku_download(by, got, sizeof got);
    int diff = 0;
    for (int i = 0; i < N; i++)
        diff += memcmp(&got[i], &want[i], 4) != 0;
    RUN1(d, vk_op_act_round(s, DTYPE_Q8_0, bx, bx, N, vku_err, sizeof vku_err));
    vku_download(bx, x, sizeof x);
    print_message("# round_act q8_0 (%s's from_float): %d of %d values differ, in place %s\n",
                  k->name, diff, N, memcmp(x, want, sizeof x) ? "differs" : "the same");
    assert_int_equal(diff, 0);
    assert_memory_equal(x, want, sizeof x);
    vk_buf_free(bx);
    vk_buf_free(by);
}

/* -------------------------------------------------------- a whole layer --- */

/*
 * One MoE layer of E experts (K used, a shared expert when sh) of width F over rows of D, for
 * n_tok tokens, against the f64 reference; returns the largest error relative to each row's
 * largest |MoE output|. Tokens whose routing is a near-tie are left out (counted in *close).
 */
/* x[0..n) rounded to Q8_0 activations by this machine's CPU kernels and read back. */
static void round_q8_0(float *x, int n)
{
    uint8_t q[256 / 32 * 34];
    assert_true(n <= 256 && n % 32 == 0);
    kernels_get()->type[DTYPE_Q8_0].from_float(x, q, n);
    kernels_ref()->type[DTYPE_Q8_0].to_float(q, x, n);
}

static double layer_err(struct vk_dev *d, enum dtype type, enum dtype act, bool sh, uint32_t n_tok,
                        int *close)
{
    enum { E = 8, K = 2, D = 256, F = 96 };
    const uint32_t S = K + sh, d_in = D, f_in = dtype_get(type)->block == 256 ? 256 : F;
    struct mat router = mat_new(DTYPE_F32, d_in, E, 0.001f);
    struct mat gate = mat_new(type, d_in, E * f_in, 0.1f), up = mat_new(type, d_in, E * f_in, 0.1f),
               down  = mat_new(type, f_in, E * D, 0.1f);
    struct mat sgate = mat_new(type, d_in, f_in, 0.1f), sup = mat_new(type, d_in, f_in, 0.1f),
               sdown = mat_new(type, f_in, D, 0.1f);
    float shg[D];
    for (int i = 0; i < D; i++)
        shg[i] = 0.2f * vku_frand();
    float *x = malloc((size_t)n_tok * D * 4), *xb = malloc((size_t)n_tok * D * 4),
          *got = malloc((size_t)n_tok * D * 4);
    assert_true(x && xb && got);
    for (size_t i = 0; i < (size_t)n_tok * D; i++) {
        x[i]  = vku_frand();
        xb[i] = 2.0f * vku_frand();
    }
    struct vk_moe_layer L = {.router = mat_upload(d, &router, 0),
                             .gate   = mat_upload(d, &gate, 0),
                             /* parts of 100 rows: experts straddle buffers */
                             .up       = mat_upload(d, &up, 100 * dtype_row_len(type, d_in)),
                             .down     = mat_upload(d, &down, 0),
                             .act      = act,
                             .act_down = act,
                             .n_expert = E,
                             .n_used   = K,
                             .n_ff     = f_in,
                             .n_embd   = D};
    if (sh) {
        L.shexp_gate = vku_upload(d, shg, sizeof shg);
        L.sh_gate    = mat_upload(d, &sgate, 0);
        L.sh_up      = mat_upload(d, &sup, 0);
        L.sh_down    = mat_upload(d, &sdown, 0);
    }
    struct vk_moe_scratch *sc;
    OK(vk_moe_scratch_new(d, n_tok + 3, D, f_in, E, S, NULL, &sc, vku_err, sizeof vku_err));
    struct vk_buf *bx  = vku_upload(d, x, (size_t)n_tok * D * 4),
                  *bxb = vku_upload(d, xb, (size_t)n_tok * D * 4);
    RUN1(d, vk_moe_ffn(s, &L, sc, bxb, bx, n_tok, vku_err, sizeof vku_err));
    vku_download(bx, got, (size_t)n_tok * D * 4);

    double worst = 0;
    for (uint32_t t = 0; t < n_tok; t++) {
        const float *xt = xb + (size_t)t * D;
        float l[E + 1], xr[D];
        memcpy(xr, xt, sizeof xr);
        if (act == DTYPE_Q8_0)
            round_q8_0(xr, D);
        for (int e = 0; e < E; e++)
            l[e] = (float)dot(&router, (uint32_t)e, xt, NULL);
        double gl = 0;
        for (int i = 0; i < D; i++)
            gl += (double)shg[i] * xt[i];
        l[E] = (float)gl;
        int32_t ids[K + 1];
        double w[K + 1], gap, out[D] = {0}, h[256];
        route_ref(l, E, K, sh, ids, w, &gap);
        if (gap < 1e-6) {
            (*close)++;
            continue;
        }
        for (uint32_t k = 0; k < S; k++) {
            const bool shared   = ids[k] == E;
            const struct mat *g = shared ? &sgate : &gate, *u = shared ? &sup : &up,
                             *dn = shared ? &sdown : &down;
            const uint32_t r0    = shared ? 0 : (uint32_t)ids[k] * f_in;
            float hf[256];
            for (uint32_t j = 0; j < f_in; j++) {
                const double a = dot(g, r0 + j, xr, NULL), b = dot(u, r0 + j, xr, NULL);
                h[j]  = a / (1.0 + exp(-a)) * b;
                hf[j] = (float)h[j];
            }
            if (act == DTYPE_Q8_0)
                round_q8_0(hf, (int)f_in);
            const uint32_t o0 = shared ? 0 : (uint32_t)ids[k] * D;
            for (int i = 0; i < D; i++)
                out[i] += w[k] * dot(dn, o0 + (uint32_t)i, hf, NULL);
        }
        double mx = 0, diff = 0;
        for (int i = 0; i < D; i++) {
            mx   = fmax(mx, fabs(out[i]));
            diff = fmax(diff, fabs((double)got[t * D + i] - x[t * D + i] - out[i]));
        }
        if (!(diff / mx <= worst))
            worst = diff / mx;
    }
    vk_moe_scratch_free(sc);
    vk_buf_free(bx);
    vk_buf_free(bxb);
    vk_buf_free(L.shexp_gate);
    const struct vk_weight *ws[] = {L.router, L.gate, L.up, L.down, L.sh_gate, L.sh_up, L.sh_down};
    for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
        if (ws[i])
            vk_weight_free((struct vk_weight *)ws[i]);
    struct mat *ms[] = {&router, &gate, &up, &down, &sgate, &sup, &sdown};
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
        mat_free(ms[i]);
    free(x);
    free(xb);
    free(got);
    return worst;
}

static void test_layer(void **state)
{
    NEED_DEVICE(d);
    /* experts with f32 inputs, and Q8_0 ones with inputs rounded as the CPU's */
    static const enum dtype types[][2] = {{DTYPE_Q8_0, DTYPE_F32},
                                          {DTYPE_Q8_0, DTYPE_Q8_0},
                                          {DTYPE_F16, DTYPE_F32},
                                          {DTYPE_Q4_K, DTYPE_F32}};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        for (int sh = 0; sh < 2; sh++) {
            /* a decode step and a prompt batch */
            static const uint32_t toks[] = {1, 41};
            for (int j = 0; j < 2; j++) {
                int close          = 0;
                const double e     = layer_err(d, types[i][0], types[i][1], sh, toks[j], &close);
                const double bound = types[i][1] == DTYPE_F32 ? LAYER_BOUND : LAYER_Q8_BOUND;
                print_message("# MoE layer, %s experts (%s inputs)%s, %u tokens: max error %.3g "
                              "of the row's largest output (bound %.0e), %d near-ties left out\n",
                              dtype_name(types[i][0]), dtype_name(types[i][1]),
                              sh ? " and a shared one" : "", toks[j], e, bound, close);
                assert_true(close * 4 <= (int)toks[j]);
                assert_true(e <= bound);
            }
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mul_id),    cmocka_unit_test(test_mul_id_refusals),
        cmocka_unit_test(test_route),     cmocka_unit_test(test_combine),
        cmocka_unit_test(test_round_act), cmocka_unit_test(test_layer),
    };
    return cmocka_run_group_tests(tests, vku_setup, vku_teardown);
}

#endif
