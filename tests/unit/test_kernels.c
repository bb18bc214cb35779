/*
 * test_kernels.c: every kernel table this host runs (ref, avx2, avx512, neon
 * as kernels_find hands them out), against the reference and against double
 * precision. Conversions and quantizers must match the reference bit for
 * bit; sums may differ by float reassociation only, bounded relative to
 * sum |w[i] * a[i]| (a normalised error, as ggml's test-backend-ops does).
 * Every buffer is allocated to its exact length so ASan sees any tail
 * over-read. The max errors are printed per ISA and type.
 */
#include "util/testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/ref.h"
#include "util/fp16.h"

#define N_ISA 4
static const char *const isa_names[N_ISA] = {"ref", "avx2", "avx512", "neon"};

/* The tables this host runs, ref first; returns their count. */
static int host_tables(const struct kernels *out[N_ISA])
{
    int n = 0;
    for (int i = 0; i < N_ISA; i++) {
        const struct kernels *k = kernels_find(isa_names[i]);
        if (k)
            out[n++] = k;
    }
    return n;
}

static void *xmalloc(size_t len)
{
    void *p = malloc(len ? len : 1);
    assert_non_null(p);
    return p;
}

/* ---------------------------------------------------------------- random data */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rng_u64(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z          = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z          = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1). */
static float rng_uniform(void)
{
    return (float)((double)(rng_u64() >> 11) * 0x1.0p-52 - 1.0);
}

/* Standard normal (Box-Muller), with one value in 64 made a 10x outlier as in real activations. */
static float rng_normal(void)
{
    const double u1 = ((double)(rng_u64() >> 11) + 1.0) * 0x1.0p-53;
    const double u2 = (double)(rng_u64() >> 11) * 0x1.0p-53;
    double v        = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
    if ((rng_u64() & 63) == 0)
        v *= 10.0;
    return (float)v;
}

static void fill_normal(float *x, int64_t n, float scale)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = rng_normal() * scale;
}

/* ---------------------------------------------------------------- the tables */

static const enum dtype weight_types[] = {DTYPE_F32, DTYPE_F16, DTYPE_BF16, DTYPE_Q4_0, DTYPE_Q8_0};
#define N_WEIGHT_TYPES (sizeof(weight_types) / sizeof(weight_types[0]))

static void test_tables_complete(void **state)
{
    (void)state;
    const struct kernels *ks[N_ISA];
    const int nk              = host_tables(ks);
    const struct kernels *ref = kernels_ref();
    assert_true(nk >= 1);
    assert_ptr_equal(ks[0], ref);
    assert_string_equal(ref->name, "ref");
    for (size_t i = 0; i < N_WEIGHT_TYPES; i++) {
        const struct type_kernels *t = &ref->type[weight_types[i]];
        assert_non_null(t->to_float);
        assert_non_null(t->from_float);
        assert_non_null(t->vec_dot);
    }
    assert_int_equal(ref->type[DTYPE_F32].vec_dot_type, DTYPE_F32);
    assert_int_equal(ref->type[DTYPE_F16].vec_dot_type, DTYPE_F16);
    assert_int_equal(ref->type[DTYPE_BF16].vec_dot_type, DTYPE_BF16);
    assert_int_equal(ref->type[DTYPE_Q4_0].vec_dot_type, DTYPE_Q8_0);
    assert_int_equal(ref->type[DTYPE_Q8_0].vec_dot_type, DTYPE_Q8_0);

    for (int k = 0; k < nk; k++) {
        const struct kernels *K = ks[k];
        print_message("table %s is available on this host\n", K->name);
        assert_ptr_equal(kernels_find(K->name), K);
        /* An ISA fills exactly the entries the reference fills, with the same activation types. */
        for (int t = 0; t < DTYPE_COUNT; t++) {
            const struct type_kernels *r = &ref->type[t], *x = &K->type[t];
            if (!!r->to_float != !!x->to_float || !!r->from_float != !!x->from_float ||
                !!r->vec_dot != !!x->vec_dot || r->vec_dot_type != x->vec_dot_type)
                fail_msg("%s: type %s entries differ from the reference's", K->name, dtype_name(t));
        }
        assert_non_null(K->rmsnorm);
        assert_non_null(K->silu_mul);
        assert_non_null(K->softmax);
        assert_non_null(K->dot_f32);
        assert_non_null(K->dot_f32_f16);
        assert_non_null(K->axpy_f32);
        assert_non_null(K->axpy_f16);
        assert_non_null(K->scale_f32);
        assert_non_null(K->f32_to_f16);
        assert_non_null(K->f16_to_f32);
    }

    const struct kernels *best = kernels_get();
    assert_non_null(best);
    assert_ptr_equal(kernels_get(), best);
    assert_null(kernels_find("sse9"));
    assert_null(kernels_find(NULL));
    print_message("kernels_get() chose %s\n", best->name);
}

/* ---------------------------------------------------------------- fp16 / bf16 exact values */

struct f16_case {
    float f;
    uint16_t h;
};

static void test_fp16_known_values(void **state)
{
    (void)state;
    const struct f16_case cases[] = {
        {0.0f, 0x0000},
        {-0.0f, 0x8000},
        {1.0f, 0x3c00},
        {-2.0f, 0xc000},
        {0.5f, 0x3800},
        {0.1f, 0x2e66},
        {1.0f / 3.0f, 0x3555},
        {65504.0f, 0x7bff}, /* largest half */
        {65519.0f, 0x7bff}, /* just below the halfway point to inf */
        {65520.0f, 0x7c00}, /* halfway: rounds to even, which is inf */
        {1e6f, 0x7c00},
        {-1e6f, 0xfc00},
        {INFINITY, 0x7c00},
        {-INFINITY, 0xfc00},
        {0x1p-14f, 0x0400}, /* smallest normal */
        {0x1p-24f, 0x0001}, /* smallest subnormal */
        {-0x1p-24f, 0x8001},
        {0x1p-25f, 0x0000},          /* half of it: tie to even, 0 */
        {0x1.8p-25f, 0x0001},        /* 0.75 of it: up */
        {0x1.8p-24f, 0x0002},        /* 1.5 of it: tie to even, 2 */
        {0x1.ff8p-15f, 0x03ff},      /* largest subnormal */
        {1.0f + 0x1p-11f, 0x3c00},   /* tie to even, down */
        {1.0f + 0x1.8p-10f, 0x3c02}, /* tie to even, up */
        {1e-40f, 0x0000},            /* f32 subnormal */
    };
    const int n = (int)(sizeof(cases) / sizeof(cases[0]));
    for (int i = 0; i < n; i++) {
        const uint16_t h = fp32_to_fp16(cases[i].f);
        if (h != cases[i].h)
            fail_msg("fp32_to_fp16(%a) = 0x%04x, want 0x%04x", cases[i].f, h, cases[i].h);
    }
    /* Decoding: exact values, sign of zero included. */
    assert_true(fp16_to_fp32(0x0000) == 0.0f && !signbit(fp16_to_fp32(0x0000)));
    assert_true(fp16_to_fp32(0x3c00) == 1.0f);
    assert_true(fp16_to_fp32(0xc000) == -2.0f);
    assert_true(fp16_to_fp32(0x0400) == 0x1p-14f);
    assert_true(fp16_to_fp32(0x8001) == -0x1p-24f);
    assert_true(signbit(fp16_to_fp32(0x8000)) && fp16_to_fp32(0x8000) == 0.0f);
    assert_true(fp16_to_fp32(0x7bff) == 65504.0f);
    assert_true(fp16_to_fp32(0x0001) == 0x1p-24f);
    assert_true(fp16_to_fp32(0x03ff) == 0x1.ff8p-15f);
    assert_true(isinf(fp16_to_fp32(0x7c00)) && fp16_to_fp32(0x7c00) > 0);
    assert_true(isinf(fp16_to_fp32(0xfc00)) && fp16_to_fp32(0xfc00) < 0);
    assert_true(isnan(fp16_to_fp32(0x7e00)) && isnan(fp16_to_fp32(0x7c01)) &&
                isnan(fp16_to_fp32(0xfe00)));
    const uint16_t hn = fp32_to_fp16(NAN);
    assert_true((hn & 0x7c00) == 0x7c00 && (hn & 0x03ff) != 0);

    /* Every table, on the case list twice over (so vector bodies and tails both see them). */
    const struct kernels *ks[N_ISA];
    const int nk = host_tables(ks);
    const int m  = 2 * n + 1;
    float *x     = xmalloc((size_t)m * sizeof(float));
    uint16_t *h  = xmalloc((size_t)m * sizeof(uint16_t));
    uint16_t *h2 = xmalloc((size_t)m * sizeof(uint16_t));
    float *y     = xmalloc((size_t)m * sizeof(float));
    for (int i = 0; i < m; i++)
        x[i] = i == m - 1 ? NAN : cases[i % n].f;
    for (int k = 0; k < nk; k++) {
        ks[k]->f32_to_f16(x, h, m);
        ks[k]->type[DTYPE_F16].from_float(x, h2, m);
        for (int i = 0; i < m - 1; i++) {
            if (h[i] != cases[i % n].h || h2[i] != cases[i % n].h)
                fail_msg("%s: f16 of %a = 0x%04x / 0x%04x, want 0x%04x", ks[k]->name, x[i], h[i],
                         h2[i], cases[i % n].h);
        }
        assert_true((h[m - 1] & 0x7c00) == 0x7c00 && (h[m - 1] & 0x03ff) != 0);
        ks[k]->f16_to_f32(h, y, m);
        for (int i = 0; i < m; i++)
            assert_true(fp32_to_bits(y[i]) == fp32_to_bits(fp16_to_fp32(h[i])));
    }

    /* All 65536 halves: decode then encode is the identity (NaNs stay NaN), in every table. */
    const int64_t nh = 65536;
    uint16_t *all    = xmalloc(nh * sizeof(uint16_t));
    uint16_t *back   = xmalloc(nh * sizeof(uint16_t));
    float *f         = xmalloc(nh * sizeof(float));
    for (int64_t i = 0; i < nh; i++)
        all[i] = (uint16_t)i;
    for (int k = 0; k < nk; k++) {
        for (int64_t len = nh - 1; len <= nh; len++) { /* one odd length for the tail */
            memset(back, 0, nh * sizeof(uint16_t));
            ks[k]->f16_to_f32(all, f, len);
            ks[k]->f32_to_f16(f, back, len);
            for (int64_t i = 0; i < len; i++) {
                const int is_nan = (all[i] & 0x7c00) == 0x7c00 && (all[i] & 0x03ff);
                const float want = fp16_to_fp32(all[i]);
                if (is_nan) {
                    if (!isnan(f[i]) || (back[i] & 0x7c00) != 0x7c00 || !(back[i] & 0x03ff))
                        fail_msg("%s: half NaN 0x%04x not kept a NaN", ks[k]->name, all[i]);
                } else if (back[i] != all[i] || fp32_to_bits(f[i]) != fp32_to_bits(want)) {
                    fail_msg("%s: half 0x%04x -> %a -> 0x%04x", ks[k]->name, all[i], f[i], back[i]);
                }
            }
        }
    }
    free(all);
    free(back);
    free(f);
    free(x);
    free(h);
    free(h2);
    free(y);
}

static void test_bf16_known_values(void **state)
{
    (void)state;
    const struct {
        uint32_t f; /* f32 bits */
        uint16_t h;
    } cases[] = {
        {0x3f800000, 0x3f80},                       /* 1.0 */
        {0x3f808000, 0x3f80},                       /* exactly halfway, even stays */
        {0x3f818000, 0x3f82},                       /* exactly halfway, odd rounds up */
        {0x3f808001, 0x3f81},                       /* above halfway */
        {0x3f807fff, 0x3f80},                       /* below halfway */
        {0x3f80ffff, 0x3f81}, {0xbf818000, 0xbf82}, /* negative tie */
        {0x7f7fffff, 0x7f80},                       /* FLT_MAX rounds to inf */
        {0xff7fffff, 0xff80}, {0x7f800000, 0x7f80}, /* inf */
        {0xff800000, 0xff80}, {0x00000000, 0x0000}, {0x80000000, 0x8000}, /* -0 */
        {0x00000001, 0x0000},                                             /* f32 subnormals */
        {0x00008000, 0x0000}, {0x00018000, 0x0002}, {0x7fc00000, 0x7fc0}, /* quiet NaN */
        {0x7f800001, 0x7fc0}, /* signalling NaN: quieted, not rounded to inf */
        {0x7fffffff, 0x7fff}, {0xffc00000, 0xffc0}, {0x40490fdb, 0x4049}, /* pi */
    };
    const int n = (int)(sizeof(cases) / sizeof(cases[0]));
    for (int i = 0; i < n; i++) {
        const uint16_t h = fp32_to_bf16(fp32_from_bits(cases[i].f));
        if (h != cases[i].h)
            fail_msg("fp32_to_bf16(0x%08x) = 0x%04x, want 0x%04x", cases[i].f, h, cases[i].h);
        assert_true(fp32_to_bits(bf16_to_fp32(cases[i].h)) == (uint32_t)cases[i].h << 16);
    }
    const struct kernels *ks[N_ISA];
    const int nk = host_tables(ks);
    const int m  = 2 * n;
    float *x     = xmalloc((size_t)m * sizeof(float));
    uint16_t *h  = xmalloc((size_t)m * sizeof(uint16_t));
    float *y     = xmalloc((size_t)m * sizeof(float));
    for (int i = 0; i < m; i++)
        x[i] = fp32_from_bits(cases[i % n].f);
    for (int k = 0; k < nk; k++) {
        ks[k]->type[DTYPE_BF16].from_float(x, h, m);
        for (int i = 0; i < m; i++)
            if (h[i] != cases[i % n].h)
                fail_msg("%s: bf16 of 0x%08x = 0x%04x, want 0x%04x", ks[k]->name, cases[i % n].f,
                         h[i], cases[i % n].h);
        ks[k]->type[DTYPE_BF16].to_float(h, y, m);
        for (int i = 0; i < m; i++)
            assert_true(fp32_to_bits(y[i]) == (uint32_t)h[i] << 16);
    }
    free(x);
    free(h);
    free(y);
}

/* ---------------------------------------------------------------- Q4_0 / Q8_0 exact values */

static void test_q4_0_known_blocks(void **state)
{
    (void)state;
    const struct kernels *ks[N_ISA];
    const int nk = host_tables(ks);

    /* Decoding: d = 0.5, element j = j - 8 in the low nibbles, element j + 16 = 7 - j in the high.
     */
    struct block_q4_0 blk[2];
    blk[0].d = 0x3800;
    for (int j = 0; j < 16; j++)
        blk[0].qs[j] = (uint8_t)(j | ((15 - j) << 4));
    blk[1].d = 0xc000; /* -2 */
    for (int j = 0; j < 16; j++)
        blk[1].qs[j] = (uint8_t)(((j * 5) & 15) | (((j * 3 + 1) & 15) << 4));
    float want[64];
    for (int j = 0; j < 16; j++) {
        want[j]           = (float)(j - 8) * 0.5f;
        want[j + 16]      = (float)(7 - j) * 0.5f;
        want[32 + j]      = (float)(((j * 5) & 15) - 8) * -2.0f;
        want[32 + j + 16] = (float)(((j * 3 + 1) & 15) - 8) * -2.0f;
    }
    float y[64];
    for (int k = 0; k < nk; k++) {
        memset(y, 0, sizeof(y));
        ks[k]->type[DTYPE_Q4_0].to_float(blk, y, 64);
        for (int i = 0; i < 64; i++)
            if (y[i] != want[i])
                fail_msg("%s: q4_0 element %d = %g, want %g", ks[k]->name, i, y[i], want[i]);
    }

    /*
     * Encoding (ggml's rule, d = signed max / -8):
     * block 0: max |x| is -2 at x[0] -> d = 0.25, every x a multiple of 0.25 in [-2, 1.75]: exact;
     * block 1: the negation -> max is +2 -> d = -0.25, still exact;
     * block 2: -2 then +2 (first wins) -> d = 0.25, +2 maps to 16.5 and is capped to 15 -> 1.75.
     */
    float x[96];
    for (int j = 0; j < 32; j++) {
        x[j]      = (float)((j * 7) % 16 - 8) * 0.25f;
        x[32 + j] = -x[j];
        x[64 + j] = 0.0f;
    }
    x[0]  = -2.0f;
    x[32] = 2.0f;
    x[64] = -2.0f;
    x[95] = 2.0f;
    struct block_q4_0 q[3];
    float back[96];
    for (int k = 0; k < nk; k++) {
        memset(q, 0xAA, sizeof(q));
        ks[k]->type[DTYPE_Q4_0].from_float(x, q, 96);
        assert_int_equal(q[0].d, 0x3400); /* 0.25 */
        assert_int_equal(q[1].d, 0xb400); /* -0.25 */
        assert_int_equal(q[2].d, 0x3400);
        assert_int_equal(q[2].qs[0] & 15, 0);
        assert_int_equal(q[2].qs[15] >> 4, 15);
        assert_int_equal(q[2].qs[1], 0x88);
        ks[k]->type[DTYPE_Q4_0].to_float(q, back, 96);
        for (int i = 0; i < 95; i++)
            if (back[i] != x[i])
                fail_msg("%s: q4_0 round trip of x[%d] = %g gave %g", ks[k]->name, i, x[i],
                         back[i]);
        assert_true(back[95] == 1.75f);
    }
}

static void test_q8_0_known_blocks(void **state)
{
    (void)state;
    const struct kernels *ks[N_ISA];
    const int nk = host_tables(ks);
    /* amax = 127 -> d = 1 exactly, so q = roundf(x): halves go away from zero, not to even. */
    const float x0[]  = {127.0f,       0.5f,   -0.5f, 1.5f,    -1.5f, 2.5f,  -2.5f,     0.49999997f,
                         -0.49999997f, 126.5f, 3.0f,  -127.0f, 0.0f,  -0.0f, 64.49999f, -64.5f};
    const int8_t q0[] = {127, 1, -1, 2, -2, 3, -3, 0, 0, 127, 3, -127, 0, 0, 64, -65};
    const int n0      = (int)(sizeof(x0) / sizeof(x0[0]));
    float x[96];
    for (int j = 0; j < 32; j++) {
        x[j]      = j < n0 ? x0[j] : (float)(j - 20);
        x[32 + j] = 0.0f;                      /* all zero: d = 0, q = 0 */
        x[64 + j] = (float)j * 0.01f - 0.155f; /* generic */
    }
    struct block_q8_0 ref_q[3], q[3];
    ref_q8_0_from_float(x, ref_q, 96);
    assert_int_equal(ref_q[0].d, 0x3c00);
    for (int j = 0; j < 32; j++) {
        const int want = j < n0 ? q0[j] : j - 20;
        if (ref_q[0].qs[j] != want)
            fail_msg("ref: q8_0 of %g = %d, want %d", x[j], ref_q[0].qs[j], want);
    }
    assert_int_equal(ref_q[1].d, 0);
    for (int j = 0; j < 32; j++)
        assert_int_equal(ref_q[1].qs[j], 0);
    float amax2 = 0;
    for (int j = 64; j < 96; j++)
        amax2 = fmaxf(amax2, fabsf(x[j]));
    assert_int_equal(ref_q[2].d, fp32_to_fp16(amax2 / 127));
    for (int k = 0; k < nk; k++) {
        memset(q, 0x55, sizeof(q));
        ks[k]->type[DTYPE_Q8_0].from_float(x, q, 96);
        if (memcmp(q, ref_q, sizeof(q)) != 0)
            fail_msg("%s: q8_0 quantization differs from the reference", ks[k]->name);
        float y[96];
        ks[k]->type[DTYPE_Q8_0].to_float(q, y, 96);
        for (int j = 0; j < 32; j++)
            assert_true(y[j] == (float)q[0].qs[j]);
    }
}

/* -------------------------------------------------- every weight type, random rows */

/* Largest |x - dequant(x)| allowed for one element of a block whose largest |x| is amax. */
static double quant_bound(enum dtype t, double x, double amax)
{
    switch (t) {
    case DTYPE_F32:
        return 0.0;
    case DTYPE_F16:
        return fabs(x) * 0x1p-11 + 0x1p-25;
    case DTYPE_BF16:
        return fabs(x) * 0x1p-8;
    /* d = amax/127; |q*d16 - x| <= d/2 + 127 * |d - d16| (d16 may be a subnormal half) */
    case DTYPE_Q8_0:
        return amax / 127 * 0.5 + 127 * fmax(amax / 127 * 0x1p-11, 0x1p-25) + amax * 1e-6;
    /* |d| = amax/8; the capped extreme is off by a whole step */
    case DTYPE_Q4_0:
        return amax / 8 + 8 * fmax(amax / 8 * 0x1p-11, 0x1p-25) + amax * 1e-6;
    default:
        return 0.0;
    }
}

struct errs {
    double quant_max;    /* max |x - dequant(x)| / block amax */
    double dot_abs;      /* max |s - exact| */
    double dot_norm;     /* max |s - exact| / sum |w*a| */
    double dot_ref_norm; /* max |s - s_ref| / sum |w*a| */
};

static void check_type(const struct kernels *K, enum dtype t, int64_t n, int rows, struct errs *e)
{
    const struct kernels *R       = kernels_ref();
    const struct type_kernels *rt = &R->type[t], *kt = &K->type[t];
    const enum dtype vdt = rt->vec_dot_type;
    const size_t row_len = dtype_row_len(t, n);
    const size_t act_len = dtype_row_len(vdt, n);
    const uint32_t blk   = dtype_get(t)->block;

    float *wf    = xmalloc((size_t)(rows * n) * sizeof(float));
    uint8_t *wq  = xmalloc(rows * row_len);
    uint8_t *wq2 = xmalloc(row_len);
    float *wd    = xmalloc((size_t)n * sizeof(float));
    float *wd2   = xmalloc((size_t)n * sizeof(float));
    float *af    = xmalloc((size_t)n * sizeof(float));
    uint8_t *aq  = xmalloc(act_len);
    uint8_t *aq2 = xmalloc(act_len);
    float *ad    = xmalloc((size_t)n * sizeof(float));

    static const float scales[] = {1e-3f, 1.0f, 30.0f};
    for (int r = 0; r < rows; r++)
        fill_normal(wf + r * n, n, scales[r % 3]);
    for (int r = 0; r < rows; r++)
        rt->from_float(wf + r * n, wq + r * row_len, n);
    if ((t == DTYPE_Q4_0 || t == DTYPE_Q8_0) && rows > 1) {
        /* Last row: arbitrary quants (-128 included for Q8_0), any sign of d. */
        uint8_t *row    = wq + (rows - 1) * row_len;
        const size_t bl = dtype_get(t)->block_len;
        for (size_t b = 0; b < row_len / bl; b++) {
            for (size_t j = 2; j < bl; j++)
                row[b * bl + j] = (uint8_t)rng_u64();
            const uint16_t d = fp32_to_fp16(rng_uniform() * 0.05f);
            memcpy(row + b * bl, &d, 2);
        }
    }

    fill_normal(af, n, 1.0f);
    R->type[vdt].from_float(af, aq, n);
    K->type[vdt].from_float(af, aq2, n);
    if (memcmp(aq, aq2, act_len) != 0)
        fail_msg("%s: %s activation quantization (n=%lld) differs from the reference", K->name,
                 dtype_name(vdt), (long long)n);
    R->type[vdt].to_float(aq, ad, n);

    for (int r = 0; r < rows; r++) {
        const uint8_t *w = wq + r * row_len;
        const float *x   = wf + r * n;

        /* from_float: identical bytes (a quantizer writes files; any ISA must write the same file).
         */
        kt->from_float(x, wq2, n);
        const int arbitrary = (t == DTYPE_Q4_0 || t == DTYPE_Q8_0) && rows > 1 && r == rows - 1;
        if (!arbitrary && memcmp(wq2, w, row_len) != 0)
            fail_msg("%s: %s from_float (n=%lld, row %d) differs from the reference", K->name,
                     dtype_name(t), (long long)n, r);

        /* to_float: identical values. */
        rt->to_float(w, wd, n);
        kt->to_float(w, wd2, n);
        if (memcmp(wd, wd2, (size_t)n * sizeof(float)) != 0)
            fail_msg("%s: %s to_float (n=%lld, row %d) differs from the reference", K->name,
                     dtype_name(t), (long long)n, r);

        /* Quantization error within the type's bound. */
        if (!arbitrary) {
            for (int64_t b0 = 0; b0 < n; b0 += (blk > 1 ? blk : n)) {
                const int64_t len = blk > 1 ? blk : n;
                double amax       = 0;
                for (int64_t i = b0; i < b0 + len; i++)
                    amax = fmax(amax, fabs(x[i]));
                for (int64_t i = b0; i < b0 + len; i++) {
                    const double err = fabs((double)wd[i] - x[i]);
                    if (err > quant_bound(t, x[i], amax))
                        fail_msg("%s: %s element %lld = %g dequantizes to %g (block amax %g)",
                                 K->name, dtype_name(t), (long long)i, x[i], wd[i], amax);
                    if (amax > 0)
                        e->quant_max = fmax(e->quant_max, err / amax);
                }
            }
        }

        /* vec_dot against double precision over the dequantized values, and against ref. */
        double exact = 0, sabs = 0;
        for (int64_t i = 0; i < n; i++) {
            exact += (double)wd[i] * ad[i];
            sabs += fabs((double)wd[i] * ad[i]);
        }
        float s = NAN, s_ref = NAN;
        kt->vec_dot(n, &s, w, aq);
        rt->vec_dot(n, &s_ref, w, aq);
        const double err      = fabs((double)s - exact);
        const double norm     = sabs > 0 ? err / sabs : err;
        const double norm_ref = sabs > 0 ? fabs((double)s - s_ref) / sabs : fabs((double)s - s_ref);
        if (!(norm <= 1e-5) || !(norm_ref <= 2e-5))
            fail_msg("%s: %s vec_dot n=%lld row %d = %.9g, ref %.9g, exact %.9g (sum|wa| %g)",
                     K->name, dtype_name(t), (long long)n, r, s, s_ref, exact, sabs);
        e->dot_abs      = fmax(e->dot_abs, err);
        e->dot_norm     = fmax(e->dot_norm, norm);
        e->dot_ref_norm = fmax(e->dot_ref_norm, norm_ref);
    }

    free(wf);
    free(wq);
    free(wq2);
    free(wd);
    free(wd2);
    free(af);
    free(aq);
    free(aq2);
    free(ad);
}

static void test_weight_types(void **state)
{
    (void)state;
    const struct kernels *ks[N_ISA];
    const int nk                = host_tables(ks);
    static const int64_t lens[] = {32, 64, 96, 160, 256 + 32, 1024, 4096 + 32, 11008 + 32};
    const int nl                = (int)(sizeof(lens) / sizeof(lens[0]));
    for (int k = 0; k < nk; k++) {
        for (size_t ti = 0; ti < N_WEIGHT_TYPES; ti++) {
            const enum dtype t = weight_types[ti];
            struct errs e      = {0};
            for (int l = 0; l < nl; l++)
                check_type(ks[k], t, lens[l], lens[l] > 4096 ? 3 : 5, &e);
            print_message("%-6s %-5s quant err/amax %.3g | vec_dot max abs err %.3g, "
                          "normalized %.3g, vs ref %.3g\n",
                          ks[k]->name, dtype_name(t), e.quant_max, e.dot_abs, e.dot_norm,
                          e.dot_ref_norm);
        }
    }
}

/* ---------------------------------------------------------------- float ops */

static const int64_t op_lens[] = {1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 1000, 4099};
#define N_OP_LENS ((int)(sizeof(op_lens) / sizeof(op_lens[0])))

static float *copy_of(const float *x, int64_t n)
{
    float *y = xmalloc((size_t)n * sizeof(float));
    memcpy(y, x, (size_t)n * sizeof(float));
    return y;
}

/* |a - b| <= rel * |b| + abs, with NaN only equal to NaN. */
static int close_to(double a, double b, double rel, double abs_)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b);
    if (isinf(a) || isinf(b))
        return a == b;
    return fabs(a - b) <= rel * fabs(b) + abs_;
}

static void test_rmsnorm(void **state)
{
    (void)state;
    const struct kernels *ks[N_ISA];
    const int nk = host_tables(ks);
    for (int k = 0; k < nk; k++) {
        double max_ref = 0, max_exact = 0;
        for (int l = 0; l < N_OP_LENS; l++) {
            const int64_t n = op_lens[l];
            float *x = xmalloc((size_t)n * sizeof(float)), *w = xmalloc((size_t)n * sizeof(float));
            fill_normal(x, n, 3.0f);
            fill_normal(w, n, 1.0f);
            const float eps = 1e-5f;
            float *y = xmalloc((size_t)n * sizeof(float)), *yr = xmalloc((size_t)n * sizeof(float));
            ks[k]->rmsnorm(y, x, w, n, eps);
            ref_rmsnorm(yr, x, w, n, eps);
            double ss = 0;
            for (int64_t i = 0; i < n; i++)
                ss += (double)x[i] * x[i];
            const double scale = 1.0 / sqrt(ss / n + eps);
            for (int64_t i = 0; i < n; i++) {
                const double ex = x[i] * scale * w[i];
                if (!close_to(y[i], yr[i], 1e-6, 1e-30) || !close_to(y[i], ex, 1e-5, 1e-30))
                    fail_msg("%s: rmsnorm n=%lld y[%lld] = %.9g, ref %.9g, exact %.9g", ks[k]->name,
                             (long long)n, (long long)i, y[i], yr[i], ex);
                max_ref   = fmax(max_ref, fabs(y[i] - yr[i]) / fmax(fabs(yr[i]), 1e-30));
                max_exact = fmax(max_exact, fabs(y[i] - ex) / fmax(fabs(ex), 1e-30));
            }
            /* In place (y aliases x) gives the same result. */
            float *xa = copy_of(x, n);
            ks[k]->rmsnorm(xa, xa, w, n, eps);
            assert_memory_equal(xa, y, (size_t)n * sizeof(float));
            free(xa);
            free(x);
            free(w);
            free(y);
            free(yr);
        }
        print_message("%-6s rmsnorm   max rel err vs ref %.3g, vs exact %.3g\n", ks[k]->name,
                      max_ref, max_exact);
    }
}

static void test_silu_mul(void **state)
{
    (void)state;
    const struct kernels *ks[N_ISA];
    const int nk               = host_tables(ks);
    static const float edges[] = {0.0f,    -0.0f,  88.0f,   -88.0f, 90.0f,  -90.0f, 100.0f,
                                  -100.0f, 1e-20f, -1e-20f, 20.0f,  -20.0f, 0.5f};
    const int ne               = (int)(sizeof(edges) / sizeof(edges[0]));
    for (int k = 0; k < nk; k++) {
        double max_ref = 0, max_exact = 0;
        for (int l = 0; l < N_OP_LENS; l++) {
            const int64_t n = op_lens[l];
            float *g = xmalloc((size_t)n * sizeof(float)), *u = xmalloc((size_t)n * sizeof(float));
            for (int64_t i = 0; i < n; i++)
                g[i] = rng_uniform() * 20.0f;
            for (int64_t i = 0; i < n && n > 16; i += 7)
                g[i] = edges[(i / 7) % ne];
            fill_normal(u, n, 1.0f);
            float *y = xmalloc((size_t)n * sizeof(float)), *yr = xmalloc((size_t)n * sizeof(float));
            ks[k]->silu_mul(y, g, u, n);
            ref_silu_mul(yr, g, u, n);
            for (int64_t i = 0; i < n; i++) {
                const double ex = (double)g[i] / (1.0 + exp(-(double)g[i])) * u[i];
                if (!close_to(y[i], yr[i], 1e-5, 1e-37) || !close_to(y[i], ex, 1e-5, 1e-30))
                    fail_msg("%s: silu_mul n=%lld g=%g u=%g: %.9g, ref %.9g, exact %.9g",
                             ks[k]->name, (long long)n, g[i], u[i], y[i], yr[i], ex);
                if (fabs(yr[i]) > 1e-30)
                    max_ref = fmax(max_ref, fabs(y[i] - yr[i]) / fabs(yr[i]));
                if (fabs(ex) > 1e-30)
                    max_exact = fmax(max_exact, fabs(y[i] - ex) / fabs(ex));
            }
            /* y aliasing g, then u. */
            float *ga = copy_of(g, n), *ua = copy_of(u, n);
            ks[k]->silu_mul(ga, ga, u, n);
            ks[k]->silu_mul(ua, g, ua, n);
            assert_memory_equal(ga, y, (size_t)n * sizeof(float));
            assert_memory_equal(ua, y, (size_t)n * sizeof(float));
            free(ga);
            free(ua);
            free(g);
            free(u);
            free(y);
            free(yr);
        }
        print_message("%-6s silu_mul  max rel err vs ref %.3g, vs exact %.3g\n", ks[k]->name,
                      max_ref, max_exact);
    }
}

static void test_softmax(void **state)
{
    (void)state;
    const struct kernels *ks[N_ISA];
    const int nk = host_tables(ks);
    for (int k = 0; k < nk; k++) {
        double max_ref = 0, max_exact = 0, max_sum = 0;
        for (int l = 0; l < N_OP_LENS; l++) {
            const int64_t n = op_lens[l];
            float *x        = xmalloc((size_t)n * sizeof(float));
            for (int64_t i = 0; i < n; i++)
                x[i] = rng_uniform() * 30.0f;
            for (int64_t i = 3; i < n; i += 5)
                x[i] = -INFINITY; /* masked positions */
            double *ex = xmalloc((size_t)n * sizeof(double));
            double mx = -INFINITY, sum = 0;
            for (int64_t i = 0; i < n; i++)
                mx = fmax(mx, x[i]);
            for (int64_t i = 0; i < n; i++)
                sum += (ex[i] = exp((double)x[i] - mx));
            float *y = copy_of(x, n), *yr = copy_of(x, n);
            ks[k]->softmax(y, n);
            ref_softmax(yr, n);
            double s = 0;
            for (int64_t i = 0; i < n; i++) {
                ex[i] /= sum;
                s += y[i];
                if (!close_to(y[i], yr[i], 1e-5, 1e-38) || !close_to(y[i], ex[i], 1e-5, 1e-38))
                    fail_msg("%s: softmax n=%lld x[%lld]=%g: %.9g, ref %.9g, exact %.9g",
                             ks[k]->name, (long long)n, (long long)i, x[i], y[i], yr[i], ex[i]);
                if (yr[i] > 1e-30)
                    max_ref = fmax(max_ref, fabs(y[i] - yr[i]) / yr[i]);
                if (ex[i] > 1e-30)
                    max_exact = fmax(max_exact, fabs(y[i] - ex[i]) / ex[i]);
            }
            if (n == 1)
                assert_true(y[0] == 1.0f);
            assert_true(fabs(s - 1.0) < 1e-5);
            max_sum = fmax(max_sum, fabs(s - 1.0));
            free(x);
            free(ex);
            free(y);
            free(yr);
        }
        print_message("%-6s softmax   max rel err vs ref %.3g, vs exact %.3g, |sum-1| %.3g\n",
                      ks[k]->name, max_ref, max_exact, max_sum);
    }
}

static void test_dots(void **state)
{
    (void)state;
    const struct kernels *ks[N_ISA];
    const int nk = host_tables(ks);
    for (int k = 0; k < nk; k++) {
        double max32 = 0, max16 = 0;
        for (int l = 0; l < N_OP_LENS; l++) {
            const int64_t n = op_lens[l];
            /* One extra float in front so the vectors start unaligned. */
            float *abuf = xmalloc((size_t)(n + 1) * sizeof(float)), *a = abuf + 1;
            float *b     = xmalloc((size_t)n * sizeof(float));
            uint16_t *bh = xmalloc((size_t)n * sizeof(uint16_t));
            fill_normal(a, n, 1.0f);
            fill_normal(b, n, 2.0f);
            ref_f32_to_f16(b, bh, n);
            double e32 = 0, e16 = 0, sabs32 = 0, sabs16 = 0;
            for (int64_t i = 0; i < n; i++) {
                const double bi = fp16_to_fp32(bh[i]);
                e32 += (double)a[i] * b[i];
                e16 += (double)a[i] * bi;
                sabs32 += fabs((double)a[i] * b[i]);
                sabs16 += fabs((double)a[i] * bi);
            }
            const float s32 = ks[k]->dot_f32(a, b, n), s16 = ks[k]->dot_f32_f16(a, bh, n);
            const double n32 = fabs(s32 - e32) / sabs32, n16 = fabs(s16 - e16) / sabs16;
            if (!(n32 <= 1e-6) || !(n16 <= 1e-6))
                fail_msg("%s: dot n=%lld f32 %.9g (exact %.9g), f32_f16 %.9g (exact %.9g)",
                         ks[k]->name, (long long)n, s32, e32, s16, e16);
            max32 = fmax(max32, n32);
            max16 = fmax(max16, n16);
            free(abuf);
            free(b);
            free(bh);
        }
        print_message("%-6s dot_f32 normalized err %.3g, dot_f32_f16 %.3g\n", ks[k]->name, max32,
                      max16);
    }
}

static void test_axpy_scale(void **state)
{
    (void)state;
    const struct kernels *ks[N_ISA];
    const int nk = host_tables(ks);
    for (int k = 0; k < nk; k++) {
        double max32 = 0, max16 = 0;
        for (int l = 0; l < N_OP_LENS; l++) {
            const int64_t n = op_lens[l];
            float *x = xmalloc((size_t)n * sizeof(float)), *y0 = xmalloc((size_t)n * sizeof(float));
            uint16_t *xh = xmalloc((size_t)n * sizeof(uint16_t));
            fill_normal(x, n, 1.0f);
            fill_normal(y0, n, 1.0f);
            ref_f32_to_f16(x, xh, n);
            const float alpha = 0.37f;

            float *y = copy_of(y0, n), *yr = copy_of(y0, n);
            ks[k]->axpy_f32(y, alpha, x, n);
            ref_axpy_f32(yr, alpha, x, n);
            for (int64_t i = 0; i < n; i++) {
                const double ex  = (double)y0[i] + (double)alpha * x[i];
                const double tol = 0x1p-23 * (fabs(y0[i]) + fabs(alpha * x[i]));
                if (fabs(y[i] - ex) > tol || fabs(y[i] - yr[i]) > 2 * tol)
                    fail_msg("%s: axpy_f32 n=%lld [%lld] %.9g, ref %.9g, exact %.9g", ks[k]->name,
                             (long long)n, (long long)i, y[i], yr[i], ex);
                max32 = fmax(max32, fabs(y[i] - ex) / fmax(tol * 0x1p23, 1e-30));
            }
            memcpy(y, y0, (size_t)n * sizeof(float));
            memcpy(yr, y0, (size_t)n * sizeof(float));
            ks[k]->axpy_f16(y, alpha, xh, n);
            ref_axpy_f16(yr, alpha, xh, n);
            for (int64_t i = 0; i < n; i++) {
                const double xi  = fp16_to_fp32(xh[i]);
                const double ex  = (double)y0[i] + (double)alpha * xi;
                const double tol = 0x1p-23 * (fabs(y0[i]) + fabs(alpha * xi));
                if (fabs(y[i] - ex) > tol || fabs(y[i] - yr[i]) > 2 * tol)
                    fail_msg("%s: axpy_f16 n=%lld [%lld] %.9g, ref %.9g, exact %.9g", ks[k]->name,
                             (long long)n, (long long)i, y[i], yr[i], ex);
                max16 = fmax(max16, fabs(y[i] - ex) / fmax(tol * 0x1p23, 1e-30));
            }

            memcpy(y, y0, (size_t)n * sizeof(float));
            memcpy(yr, y0, (size_t)n * sizeof(float));
            ks[k]->scale_f32(y, -1.7f, n);
            ref_scale_f32(yr, -1.7f, n);
            assert_memory_equal(y, yr, (size_t)n * sizeof(float));

            free(x);
            free(y0);
            free(xh);
            free(y);
            free(yr);
        }
        print_message("%-6s axpy_f32 max rel err %.3g, axpy_f16 %.3g; scale_f32 identical\n",
                      ks[k]->name, max32, max16);
    }
}

static void test_f16_rows(void **state)
{
    (void)state;
    const struct kernels *ks[N_ISA];
    const int nk = host_tables(ks);
    for (int k = 0; k < nk; k++) {
        for (int l = 0; l < N_OP_LENS; l++) {
            const int64_t n = op_lens[l];
            float *x        = xmalloc((size_t)n * sizeof(float));
            /* Magnitudes 2^-30 .. 2^20: subnormal halves, normal ones, overflow to inf. */
            for (int64_t i = 0; i < n; i++)
                x[i] = rng_normal() * ldexpf(1.0f, (int)(rng_u64() % 51) - 30);
            uint16_t *h  = xmalloc((size_t)n * sizeof(uint16_t)),
                     *hr = xmalloc((size_t)n * sizeof(uint16_t));
            ks[k]->f32_to_f16(x, h, n);
            ref_f32_to_f16(x, hr, n);
            assert_memory_equal(h, hr, (size_t)n * sizeof(uint16_t));
            float *y = xmalloc((size_t)n * sizeof(float)), *yr = xmalloc((size_t)n * sizeof(float));
            ks[k]->f16_to_f32(h, y, n);
            ref_f16_to_f32(hr, yr, n);
            assert_memory_equal(y, yr, (size_t)n * sizeof(float));
            free(x);
            free(h);
            free(hr);
            free(y);
            free(yr);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tables_complete),   cmocka_unit_test(test_fp16_known_values),
        cmocka_unit_test(test_bf16_known_values), cmocka_unit_test(test_q4_0_known_blocks),
        cmocka_unit_test(test_q8_0_known_blocks), cmocka_unit_test(test_weight_types),
        cmocka_unit_test(test_rmsnorm),           cmocka_unit_test(test_silu_mul),
        cmocka_unit_test(test_softmax),           cmocka_unit_test(test_dots),
        cmocka_unit_test(test_axpy_scale),        cmocka_unit_test(test_f16_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
