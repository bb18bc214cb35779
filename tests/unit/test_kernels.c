/*
 * test_kernels.c: every kernel table this host runs (ref, avx2, avx512, amx, neon
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
#include "util/dtype_blocks.h"
#include "util/fp16.h"

#define N_ISA 5
static const char *const isa_names[N_ISA] = {"ref", "avx2", "avx512", "amx", "neon"};

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

static const enum dtype weight_types[] = {DTYPE_F32,  DTYPE_F16,    DTYPE_BF16,  DTYPE_Q4_0,
                                          DTYPE_Q8_0, DTYPE_Q4_1,   DTYPE_Q5_0,  DTYPE_Q5_1,
                                          DTYPE_Q2_K, DTYPE_Q3_K,   DTYPE_Q4_K,  DTYPE_Q5_K,
                                          DTYPE_Q6_K, DTYPE_IQ4_NL, DTYPE_IQ4_XS};
#define N_WEIGHT_TYPES (sizeof(weight_types) / sizeof(weight_types[0]))

/* Each weight type's activation type, as ggml's CPU backend (type_traits_cpu[].vec_dot_type). */
static enum dtype want_vec_dot_type(enum dtype t)
{
    switch (t) {
    case DTYPE_F32:
    case DTYPE_F16:
    case DTYPE_BF16:
        return t;
    case DTYPE_Q4_0:
    case DTYPE_Q5_0:
    case DTYPE_Q8_0:
    case DTYPE_IQ4_NL:
        return DTYPE_Q8_0;
    case DTYPE_Q4_1:
    case DTYPE_Q5_1:
        return DTYPE_Q8_1;
    default:
        return DTYPE_Q8_K;
    }
}

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
        const enum dtype t           = weight_types[i];
        const struct type_kernels *k = &ref->type[t];
        if (!k->to_float || !k->vec_dot || k->vec_dot_type != want_vec_dot_type(t))
            fail_msg("ref: %s lacks to_float or vec_dot, or takes %s activations (want %s)",
                     dtype_name(t), dtype_name(k->vec_dot_type), dtype_name(want_vec_dot_type(t)));
        /* Every activation type converts both ways (from_float per matmul, to_float in tests). */
        const struct type_kernels *a = &ref->type[k->vec_dot_type];
        assert_non_null(a->from_float);
        assert_non_null(a->to_float);
    }
    /* Weight-only types get their from_float from src/quant; these have theirs here. */
    static const enum dtype quantizable[] = {DTYPE_F32,  DTYPE_F16,  DTYPE_BF16, DTYPE_Q4_0,
                                             DTYPE_Q8_0, DTYPE_Q8_1, DTYPE_Q8_K};
    for (size_t i = 0; i < sizeof(quantizable) / sizeof(quantizable[0]); i++)
        assert_non_null(ref->type[quantizable[i]].from_float);
    /* Activation-only types are never weights. */
    assert_null(ref->type[DTYPE_Q8_1].vec_dot);
    assert_null(ref->type[DTYPE_Q8_K].vec_dot);

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
        assert_non_null(K->gelu_mul);
        assert_non_null(K->axpy_f32);
        assert_non_null(K->scale_f32);
        assert_non_null(K->mad_f32);
        assert_non_null(K->dot_f32_ggml);
        assert_non_null(K->f32_to_f16);
        assert_non_null(K->attn_rows);
        assert_non_null(K->attn_rows_f16);
        assert_non_null(K->expf_libm);
        assert_true(K->attn_rows_f16_lanes >= ATTN_LANES &&
                    K->attn_rows_f16_lanes <= ATTN_LANES_MAX);
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
        ks[k]->type[DTYPE_F16].to_float(h, y, m);
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
            ks[k]->type[DTYPE_F16].to_float(all, f, len);
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
    /* activations (the tables' from_float) round as llama.cpp's x86 build: halves to even */
    const int8_t qa[] = {127, 0, 0, 2, -2, 2, -2, 0, 0, 126, 3, -127, 0, 0, 64, -64};
    struct block_q8_0 act_q[3];
    ref_q8_0_act_from_float(x, act_q, 96);
    assert_int_equal(act_q[0].d, 0x3c00);
    for (int j = 0; j < 32; j++) {
        const int want = j < n0 ? qa[j] : j - 20;
        if (act_q[0].qs[j] != want)
            fail_msg("ref act: q8_0 of %g = %d, want %d", x[j], act_q[0].qs[j], want);
    }
    assert_int_equal(act_q[2].d, ref_q[2].d);
    for (int k = 0; k < nk; k++) {
        memset(q, 0x55, sizeof(q));
        ks[k]->type[DTYPE_Q8_0].from_float(x, q, 96);
        if (memcmp(q, act_q, sizeof(q)) != 0)
            fail_msg("%s: q8_0 activation quantization differs from the reference", ks[k]->name);
        float y[96];
        ks[k]->type[DTYPE_Q8_0].to_float(q, y, 96);
        for (int j = 0; j < 32; j++)
            assert_true(y[j] == (float)q[0].qs[j]);
    }
}

/* ------------------------------------------- dequantization in double, from the format spec */

/*
 * An independent decoder for every quantized type: reads the raw block bytes
 * by the offsets of the GGUF layout (docs: shared/reference/gguf-types.md,
 * ggml-common.h), unpacks the K-quant scales with ggml's word-mask
 * formulation (the reference uses per-index bit picks), and computes each
 * value in double. mag[i] is the sum of the magnitudes of the terms of
 * value i, for a rounding bound.
 */
static const int iq4nl_table[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                    1,    13,   25,  38,  53,  69,  89,  113};

static double half_at(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return fp16_to_fp32(h);
}

static uint32_t u32_at(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The 32 4-bit fields of a 16-byte Q4_0-style block: element j < 16 low nibble of byte j. */
static int nib32(const uint8_t *qs, int j)
{
    return j < 16 ? qs[j] & 15 : qs[j - 16] >> 4;
}

/* Q4_K/Q5_K scales (sc[0..7]) and mins (sc[8..15]) by ggml's kmask word operations. */
static void k4_scales_words(const uint8_t *packed, uint8_t sc[16])
{
    uint32_t u[4];
    for (int i = 0; i < 3; i++)
        u[i] = u32_at(packed + 4 * i);
    u[3]                = ((u[2] >> 4) & 0x0f0f0f0f) | (((u[1] >> 6) & 0x03030303) << 4);
    const uint32_t uaux = u[1] & 0x3f3f3f3f;
    u[1]                = (u[2] & 0x0f0f0f0f) | (((u[0] >> 6) & 0x03030303) << 4);
    u[2]                = uaux;
    u[0] &= 0x3f3f3f3f;
    for (int i = 0; i < 16; i++)
        sc[i] = (uint8_t)(u[i / 4] >> (8 * (i % 4)));
}

/* Q3_K's 16 6-bit scales (0..63) by ggml's kmask word operations. */
static void q3_scales_words(const uint8_t *packed, int sc[16])
{
    uint32_t a[4];
    for (int i = 0; i < 3; i++)
        a[i] = u32_at(packed + 4 * i);
    const uint32_t m1 = 0x03030303, m2 = 0x0f0f0f0f, tmp = a[2];
    a[2] = ((a[0] >> 4) & m2) | (((tmp >> 4) & m1) << 4);
    a[3] = ((a[1] >> 4) & m2) | (((tmp >> 6) & m1) << 4);
    a[0] = (a[0] & m2) | (((tmp >> 0) & m1) << 4);
    a[1] = (a[1] & m2) | (((tmp >> 2) & m1) << 4);
    for (int i = 0; i < 16; i++)
        sc[i] = (int)((a[i / 4] >> (8 * (i % 4))) & 0xff);
}

/* Decodes one block of type t at b into v[0..block) and mag[0..block). */
static void deq_exact_block(enum dtype t, const uint8_t *b, double *v, double *mag)
{
    switch (t) {
    case DTYPE_Q4_0:
        for (int j = 0; j < 32; j++)
            v[j] = half_at(b) * (nib32(b + 2, j) - 8), mag[j] = fabs(v[j]);
        return;
    case DTYPE_Q8_0:
        for (int j = 0; j < 32; j++)
            v[j] = half_at(b) * (int8_t)b[2 + j], mag[j] = fabs(v[j]);
        return;
    case DTYPE_Q8_1:
        for (int j = 0; j < 32; j++)
            v[j] = half_at(b) * (int8_t)b[4 + j], mag[j] = fabs(v[j]);
        return;
    case DTYPE_Q4_1:
        for (int j = 0; j < 32; j++) {
            const double a = half_at(b) * nib32(b + 4, j), m = half_at(b + 2);
            v[j] = a + m, mag[j] = fabs(a) + fabs(m);
        }
        return;
    case DTYPE_Q5_0:
    case DTYPE_Q5_1: {
        const int o    = t == DTYPE_Q5_0 ? 2 : 4;
        const double m = t == DTYPE_Q5_0 ? 0.0 : half_at(b + 2);
        for (int j = 0; j < 32; j++) {
            const int q    = nib32(b + o + 4, j) | (int)((u32_at(b + o) >> j) & 1) << 4;
            const double a = half_at(b) * (t == DTYPE_Q5_0 ? q - 16 : q);
            v[j] = a + m, mag[j] = fabs(a) + fabs(m);
        }
        return;
    }
    case DTYPE_IQ4_NL:
        for (int j = 0; j < 32; j++)
            v[j] = half_at(b) * iq4nl_table[nib32(b + 2, j)], mag[j] = fabs(v[j]);
        return;
    case DTYPE_Q2_K: /* scales@0 qs@16 d@80 dmin@82 */
        for (int e = 0; e < 256; e++) {
            const int q  = (b[16 + 32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
            const int sc = b[e / 16] & 15, mn = b[e / 16] >> 4;
            const double a = half_at(b + 80) * sc * q, m = half_at(b + 82) * mn;
            v[e] = a - m, mag[e] = fabs(a) + fabs(m);
        }
        return;
    case DTYPE_Q3_K: { /* hmask@0 qs@32 scales@96 d@108 */
        int sc[16];
        q3_scales_words(b + 96, sc);
        for (int e = 0; e < 256; e++) {
            const int h = e / 128, k = (e % 128) / 32, l = e % 32;
            const int lo = (b[32 + 32 * h + l] >> (2 * k)) & 3;
            const int hb = (b[l] >> (4 * h + k)) & 1;
            v[e]         = half_at(b + 108) * (sc[e / 16] - 32) * (lo - (hb ? 0 : 4));
            mag[e]       = fabs(v[e]);
        }
        return;
    }
    case DTYPE_Q4_K:
    case DTYPE_Q5_K: { /* d@0 dmin@2 scales@4, Q5_K: qh@16 qs@48; Q4_K: qs@16 */
        uint8_t sc[16];
        k4_scales_words(b + 4, sc);
        const uint8_t *qs = b + (t == DTYPE_Q4_K ? 16 : 48);
        for (int e = 0; e < 256; e++) {
            const int j = e / 32, l = e % 32;
            int q = (qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 15;
            if (t == DTYPE_Q5_K)
                q |= ((b[16 + l] >> j) & 1) << 4;
            const double a = half_at(b) * sc[j] * q, m = half_at(b + 2) * sc[8 + j];
            v[e] = a - m, mag[e] = fabs(a) + fabs(m);
        }
        return;
    }
    case DTYPE_Q6_K: /* ql@0 qh@128 scales@192 d@208 */
        for (int e = 0; e < 256; e++) {
            const int h = e / 128, c = (e % 128) / 32, l = e % 32;
            const int lo = (b[64 * h + 32 * (c % 2) + l] >> (4 * (c / 2))) & 15;
            const int hi = (b[128 + 32 * h + l] >> (2 * c)) & 3;
            v[e]         = half_at(b + 208) * (int8_t)b[192 + e / 16] * ((lo | hi << 4) - 32);
            mag[e]       = fabs(v[e]);
        }
        return;
    case DTYPE_IQ4_XS: /* d@0 scales_h@2 scales_l@4 qs@8 */
        for (int e = 0; e < 256; e++) {
            const int j = e / 32;
            const int ls =
                ((b[4 + j / 2] >> (4 * (j % 2))) & 15) | (((b[2] | b[3] << 8) >> (2 * j)) & 3) << 4;
            v[e]   = half_at(b) * (ls - 32) * iq4nl_table[nib32(b + 8 + 16 * j, e % 32)];
            mag[e] = fabs(v[e]);
        }
        return;
    case DTYPE_Q8_K: { /* float d@0 qs@4 */
        float d;
        memcpy(&d, b, 4);
        for (int e = 0; e < 256; e++)
            v[e] = (double)d * (int8_t)b[4 + e], mag[e] = fabs(v[e]);
        return;
    }
    default:
        fail_msg("no exact decoder for %s", dtype_name(t));
    }
}

/* Decodes a row of n elements; returns the largest |ref to_float - exact| / mag seen (0 if none).
 */
static double check_to_float_exact(enum dtype t, const void *row, const float *y, int64_t n)
{
    const struct dtype_info *di = dtype_get(t);
    double v[256], mag[256], worst = 0;
    for (int64_t b = 0; b < n / di->block; b++) {
        deq_exact_block(t, (const uint8_t *)row + b * di->block_len, v, mag);
        for (uint32_t j = 0; j < di->block; j++) {
            const int64_t i  = b * di->block + j;
            const double err = fabs((double)y[i] - v[j]);
            if (err > 0x1p-22 * mag[j])
                fail_msg("%s element %lld: to_float %.9g, exact %.17g", dtype_name(t), (long long)i,
                         y[i], v[j]);
            if (mag[j] > 0)
                worst = fmax(worst, err / mag[j]);
        }
    }
    return worst;
}

/* ------------------------------------------------------- known blocks of the other types */

static void put_half(void *p, float f)
{
    const uint16_t h = fp32_to_fp16(f);
    memcpy(p, &h, 2);
}

/* Runs every table's to_float of type t on n elements at blk; checks want[idx[i]] (all if !idx). */
static void expect_to_float(enum dtype t, const void *blk, int64_t n, const int *idx,
                            const float *want, int n_want)
{
    const struct kernels *ks[N_ISA];
    const int nk = host_tables(ks);
    float *y     = xmalloc((size_t)n * sizeof(float));
    for (int k = 0; k < nk; k++) {
        memset(y, 0xff, (size_t)n * sizeof(float));
        ks[k]->type[t].to_float(blk, y, n);
        for (int i = 0; i < n_want; i++) {
            const int e = idx ? idx[i] : i;
            if (y[e] != want[i])
                fail_msg("%s: %s element %d = %g, want %g", ks[k]->name, dtype_name(t), e, y[e],
                         want[i]);
        }
        check_to_float_exact(t, blk, y, n);
    }
    free(y);
}

/* Byte i of a test pattern: (i * a + b) mod 256. */
static void fill_pattern(uint8_t *p, int n, int a, int b)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(i * a + b);
}

/* Element indices spot-checked in the 256-element known blocks: every sub-block edge kind. */
static const int k_idx[24] = {0,  1,  15,  16,  17,  31,  32,  33,  47,  48,  63,  64,
                              95, 96, 127, 128, 129, 143, 160, 191, 192, 208, 224, 255};

/*
 * The expected values below come from ggml's dequantize_row_* applied to the
 * same bytes (transcribed independently); d and the scales are chosen so
 * that every value is exact in float.
 */
static void test_legacy_known_blocks(void **state)
{
    (void)state;
    /* Q4_1: d = 0.5, m = -2; element j = j, element j + 16 = 15 - j. */
    struct block_q4_1 q41;
    put_half(&q41.d, 0.5f);
    put_half(&q41.m, -2.0f);
    for (int j = 0; j < 16; j++)
        q41.qs[j] = (uint8_t)(j | (15 - j) << 4);
    float w41[32];
    for (int j = 0; j < 16; j++) {
        w41[j]      = (float)j * 0.5f - 2.0f;
        w41[j + 16] = (float)(15 - j) * 0.5f - 2.0f;
    }
    expect_to_float(DTYPE_Q4_1, &q41, 32, NULL, w41, 32);

    /* Q5_0 / Q5_1: qh = 0xA5A5F00F, nibbles (3j & 15) | ((5j + 1) & 15) << 4. */
    struct block_q5_0 q50;
    struct block_q5_1 q51;
    put_half(&q50.d, 0.25f);
    put_half(&q51.d, 0.125f);
    put_half(&q51.m, 1.0f);
    const uint8_t qh[4] = {0x0F, 0xF0, 0xA5, 0xA5};
    memcpy(q50.qh, qh, 4);
    memcpy(q51.qh, qh, 4);
    for (int j = 0; j < 16; j++)
        q50.qs[j] = q51.qs[j] = (uint8_t)(((j * 3) & 15) | ((j * 5 + 1) & 15) << 4);
    static const float w50[32] = {0,     0.75f,  1.5f,  2.25f,  -1,     -0.25f, -3.5f,  -2.75f,
                                  -2,    -1.25f, -0.5f, -3.75f, 1,      1.75f,  2.5f,   3.25f,
                                  0.25f, -2.5f,  2.75f, -4,     -2.75f, 2.5f,   -0.25f, 1,
                                  2.25f, -0.5f,  0.75f, -2,     -0.75f, 0.5f,   -2.25f, 3};
    static const float w51[32] = {3,      3.375f, 3.75f,  4.125f, 2.5f,   2.875f, 1.25f,  1.625f,
                                  2,      2.375f, 2.75f,  1.125f, 3.5f,   3.875f, 4.25f,  4.625f,
                                  3.125f, 1.75f,  4.375f, 1,      1.625f, 4.25f,  2.875f, 3.5f,
                                  4.125f, 2.75f,  3.375f, 2,      2.625f, 3.25f,  1.875f, 4.5f};
    expect_to_float(DTYPE_Q5_0, &q50, 32, NULL, w50, 32);
    expect_to_float(DTYPE_Q5_1, &q51, 32, NULL, w51, 32);

    /* IQ4_NL: d = -0.5, element j = index j, element j + 16 = index 15 - j. */
    struct block_iq4_nl nl;
    put_half(&nl.d, -0.5f);
    for (int j = 0; j < 16; j++)
        nl.qs[j] = (uint8_t)(j | (15 - j) << 4);
    float wnl[32];
    for (int j = 0; j < 16; j++) {
        wnl[j]      = -0.5f * (float)iq4nl_table[j];
        wnl[j + 16] = -0.5f * (float)iq4nl_table[15 - j];
    }
    expect_to_float(DTYPE_IQ4_NL, &nl, 32, NULL, wnl, 32);
    for (int j = 0; j < 16; j++)
        assert_int_equal(iq4nl_values[j], iq4nl_table[j]);
}

static void test_kquant_known_blocks(void **state)
{
    (void)state;
    /* Q2_K: d = 0.5, dmin = 0.25, scale byte j = j | (15 - j) << 4. */
    struct block_q2_K q2;
    put_half(&q2.d, 0.5f);
    put_half(&q2.dmin, 0.25f);
    for (int j = 0; j < 16; j++)
        q2.scales[j] = (uint8_t)(j | (15 - j) << 4);
    fill_pattern(q2.qs, 64, 37, 11);
    static const float w2[24] = {-3.75f, -3.75f, -3.75f, -2,     -3.5f,  -2.5f,  -1.25f, -3.25f,
                                 -2.25f, 0,      -1.5f,  -2.75f, -2.5f,  -2.25f, 5,      10.25f,
                                 -1.75f, 6.25f,  8.75f,  4.5f,   11.25f, 19,     13.75f, 0};
    expect_to_float(DTYPE_Q2_K, &q2, 256, k_idx, w2, 24);

    /* Q3_K: d = 0.5, 6-bit scales {0,1,31,32,33,63,16,47,5,60,2,40,32,0,63,20} packed. */
    struct block_q3_K q3;
    static const uint8_t s3[12]     = {0x50, 0xc1, 0x2f, 0x80, 0x01, 0x0f,
                                       0xf0, 0x4f, 0x88, 0x3c, 0xc5, 0x6a};
    static const int8_t s3_want[16] = {0, 1, 31, 32, 33, 63, 16, 47, 5, 60, 2, 40, 32, 0, 63, 20};
    put_half(&q3.d, 0.5f);
    memcpy(q3.scales, s3, 12);
    fill_pattern(q3.hmask, 32, 73, 5);
    fill_pattern(q3.qs, 64, 37, 11);
    int8_t s3_got[16];
    ref_unpack_q3_k_scales(s3, s3_got);
    for (int j = 0; j < 16; j++)
        assert_int_equal(s3_got[j], s3_want[j] - 32);
    static const float w3[24] = {-48, 64, 32, -46.5f, 62, 31, 1,  0,   1.5f, 0,  0,   0,
                                 0,   32, 15, 13.5f,  54, 27, 30, -12, 0,    16, -31, 0};
    expect_to_float(DTYPE_Q3_K, &q3, 256, k_idx, w3, 24);

    /*
     * Q4_K / Q5_K: d = 0.5, dmin = 0.25; scales {1,2,3,63,17,33,48,5}, mins {0,7,63,1,40,2,31,60}
     * (sub-blocks 4..7 need the top bits kept in bytes 0..7).
     */
    static const uint8_t s4[12]      = {0x41, 0x82, 0xc3, 0x3f, 0x80, 0x07,
                                        0x7f, 0xc1, 0x81, 0x21, 0xf0, 0xc5};
    static const uint8_t s4_want[16] = {1, 2, 3, 63, 17, 33, 48, 5, 0, 7, 63, 1, 40, 2, 31, 60};
    uint8_t s4_got[16];
    ref_unpack_k4_scales(s4, s4_got);
    assert_memory_equal(s4_got, s4_want, 16);
    k4_scales_words(s4, s4_got);
    assert_memory_equal(s4_got, s4_want, 16);

    struct block_q4_K q4;
    put_half(&q4.d, 0.5f);
    put_half(&q4.dmin, 0.25f);
    memcpy(q4.scales, s4, 12);
    fill_pattern(q4.qs, 128, 37, 11);
    static const float w4[24] = {5.5f,  0,     3,     5.5f,   0,       3,       -1.75f, 1.25f,
                                 1.25f, 3.25f, 6.25f, 0.75f,  -6.75f,  314.75f, 62.75f, 83.5f,
                                 -10,   41,    65.5f, 197.5f, 256.25f, 256.25f, 20,     0};
    expect_to_float(DTYPE_Q4_K, &q4, 256, k_idx, w4, 24);

    struct block_q5_K q5;
    put_half(&q5.d, 0.5f);
    put_half(&q5.dmin, 0.25f);
    memcpy(q5.scales, s4, 12);
    fill_pattern(q5.qh, 32, 73, 5);
    fill_pattern(q5.qs, 128, 37, 11);
    static const float w5[24] = {13.5f, 0,     3,     13.5f,  0,       3,       -1.75f,  17.25f,
                                 1.25f, 3.25f, 6.25f, 24.75f, 17.25f,  314.75f, 566.75f, 83.5f,
                                 -10,   41,    65.5f, 197.5f, 256.25f, 256.25f, 20,      40};
    expect_to_float(DTYPE_Q5_K, &q5, 256, k_idx, w5, 24);

    /* Q6_K: d = 0.25, signed 8-bit scales including -128 and 127. */
    struct block_q6_K q6;
    static const int8_t s6[16] = {1, -1, 127, -128, 5,    -7, 33,  -64,
                                  0, 2,  -3,  100,  -100, 17, -17, 64};
    put_half(&q6.d, 0.25f);
    memcpy(q6.scales, s6, 16);
    fill_pattern(q6.ql, 128, 37, 11);
    fill_pattern(q6.qh, 64, 73, 5);
    static const float w6[24] = {-1.25f, 0,   -6.5f, 1.25f, 0,    6.5f,    -158.75f, 508,
                                 698.5f, 160, -704,  -40,   14,   -181.5f, -288,     0,
                                 0,      0,   3.75f, 550,   -100, 106.25f, 76.5f,    352};
    expect_to_float(DTYPE_Q6_K, &q6, 256, k_idx, w6, 24);

    /* IQ4_XS: d = 0.5, scales_h = 0xB41E, scales_l = {0x1F, 0xE2, 0x07, 0x9C}. */
    struct block_iq4_xs xs;
    put_half(&xs.d, 0.5f);
    xs.scales_h                = 0xB41E;
    static const uint8_t sl[4] = {0x1F, 0xE2, 0x07, 0x9C};
    memcpy(xs.scales_l, sl, 4);
    fill_pattern(xs.qs, 128, 37, 11);
    static const float wxs[24] = {285,     -952.5f, -165, -952.5f, -487.5f, -487.5f, 323, -1079.5f,
                                  -187,    -297.5f, 8.5f, -266,    -483,    -342,    747, -475,
                                  1587.5f, 275,     -304, -424,    532,     1246,    171, -99};
    expect_to_float(DTYPE_IQ4_XS, &xs, 256, k_idx, wxs, 24);
}

/*
 * Q8_1 and Q8_K quantizers on known inputs. Q8_1 is Q8_0's activation rule
 * (d = amax/127, x * 127/amax rounded half to even) plus s; Q8_K is ggml's:
 * iscale = -127 / (signed extreme), ties to even.
 */
static void test_activation_known_blocks(void **state)
{
    (void)state;
    const struct kernels *ks[N_ISA];
    const int nk = host_tables(ks);

    float x1[64];
    for (int j = 0; j < 32; j++) {
        x1[j]      = (float)(j - 16) + 0.5f; /* halves; -15.5 .. 15.5 */
        x1[32 + j] = 0.0f;
    }
    x1[7] = 127.0f; /* d = 1 */
    struct block_q8_1 q1[2];
    for (int k = 0; k < nk; k++) {
        memset(q1, 0x55, sizeof(q1));
        ks[k]->type[DTYPE_Q8_1].from_float(x1, q1, 64);
        assert_int_equal(q1[0].d, 0x3c00);
        int sum = 0;
        for (int j = 0; j < 32; j++) {
            const int lo = j - 16, want = j == 7 ? 127 : (lo % 2 == 0 ? lo : lo + 1); /* to even */
            if (q1[0].qs[j] != want)
                fail_msg("%s: q8_1 of %g = %d, want %d", ks[k]->name, x1[j], q1[0].qs[j], want);
            sum += want;
        }
        assert_int_equal(q1[0].s, fp32_to_fp16((float)sum));
        assert_int_equal(q1[1].d, 0);
        assert_int_equal(q1[1].s, 0);
        for (int j = 0; j < 32; j++)
            assert_int_equal(q1[1].qs[j], 0);
    }

    /*
     * Q8_K, four blocks:
     * 0: extreme +127 at [3]: iscale = -1, d = -1; halves round to even (2.5 -> -2, -3.5 -> 4).
     * 1: extreme -63.5 at [0]: iscale = 2, d = 0.5; 0.25 -> 0.5 -> 0, 0.75 -> 2.
     * 2: all zero: d = 0, quants and sums 0.
     * 3: -4 at [5] and +4 at [9]: the first wins, so -4 -> -127 and +4 -> 127.
     */
    float *xk = xmalloc(4 * 256 * sizeof(float));
    memset(xk, 0, 4 * 256 * sizeof(float));
    const float b0[8]   = {2.5f, -3.5f, 0.5f, 127.0f, 1.5f, -0.5f, -126.5f, 100.0f};
    const int8_t q0[8]  = {-2, 4, 0, -127, -2, 0, 126, -100};
    const float b1[6]   = {-63.5f, 0.25f, 0.75f, -0.25f, 63.0f, 1.25f};
    const int8_t qb1[6] = {-127, 0, 2, 0, 126, 2};
    memcpy(xk, b0, sizeof(b0));
    memcpy(xk + 256, b1, sizeof(b1));
    xk[768 + 5]           = -4.0f;
    xk[768 + 9]           = 4.0f;
    struct block_q8_K *qk = xmalloc(4 * sizeof(struct block_q8_K));
    for (int k = 0; k < nk; k++) {
        memset(qk, 0x55, 4 * sizeof(struct block_q8_K));
        ks[k]->type[DTYPE_Q8_K].from_float(xk, qk, 4 * 256);
        assert_true(qk[0].d == -1.0f);
        for (int j = 0; j < 8; j++)
            if (qk[0].qs[j] != q0[j])
                fail_msg("%s: q8_K of %g = %d, want %d", ks[k]->name, b0[j], qk[0].qs[j], q0[j]);
        assert_int_equal(qk[0].bsums[0], -2 + 4 + 0 - 127 - 2 + 0 + 126 - 100);
        assert_true(qk[1].d == 0.5f);
        for (int j = 0; j < 6; j++)
            assert_int_equal(qk[1].qs[j], qb1[j]);
        assert_true(qk[2].d == 0.0f);
        assert_true(qk[3].d == 1.0f / (-127.0f / -4.0f));
        assert_int_equal(qk[3].qs[5], -127);
        assert_int_equal(qk[3].qs[9], 127);
        for (int b = 0; b < 4; b++)
            for (int j = 0; j < 256; j++) {
                if ((b == 0 && j < 8) || (b == 1 && j < 6) || (b == 3 && (j == 5 || j == 9)))
                    continue;
                assert_int_equal(qk[b].qs[j], 0);
            }
        for (int j = 1; j < 16; j++)
            assert_int_equal(qk[0].bsums[j], 0);
        for (int j = 0; j < 16; j++)
            assert_int_equal(qk[2].bsums[j], 0);
        assert_int_equal(qk[3].bsums[0], 0);
        float y[256];
        ks[k]->type[DTYPE_Q8_K].to_float(&qk[1], y, 256);
        assert_true(y[0] == -63.5f && y[2] == 1.0f && y[4] == 63.0f);
    }
    free(xk);
    free(qk);
}

/* Random rows of the activation types: every ISA writes the reference's bytes, and the quants
 * decode within half a step of the input. */
static void test_activation_types(void **state)
{
    (void)state;
    const struct kernels *ks[N_ISA];
    const int nk                = host_tables(ks);
    static const int64_t lens[] = {256, 512, 1024, 4096, 11008};
    for (int a = 0; a < 2; a++) {
        const enum dtype t = a ? DTYPE_Q8_K : DTYPE_Q8_1;
        double worst       = 0;
        for (int l = 0; l < 5; l++) {
            const int64_t n  = lens[l];
            const size_t len = dtype_row_len(t, n);
            float *x = xmalloc((size_t)n * sizeof(float)), *y = xmalloc((size_t)n * sizeof(float));
            uint8_t *q = xmalloc(len), *q2 = xmalloc(len);
            fill_normal(x, n, l == 0 ? 1e-3f : (float)l);
            if (n >= 512)
                memset(x + 256, 0, 256 * sizeof(float)); /* an all-zero block */
            kernels_ref()->type[t].from_float(x, q, n);
            kernels_ref()->type[t].to_float(q, y, n);
            const uint32_t blk = dtype_get(t)->block;
            for (int64_t b0 = 0; b0 < n; b0 += blk) {
                double amax = 0;
                for (int64_t i = b0; i < b0 + blk; i++)
                    amax = fmax(amax, fabs(x[i]));
                for (int64_t i = b0; i < b0 + blk; i++) {
                    /* Q8_1's d is stored in fp16 (rel. 2^-11); Q8_K's in float. */
                    const double step = amax / 127;
                    const double tol =
                        step * 0.5 +
                        (t == DTYPE_Q8_1 ? 127 * fmax(step * 0x1p-11, 0x1p-25) : step * 1e-5);
                    const double err = fabs((double)y[i] - x[i]);
                    if (err > tol)
                        fail_msg("ref: %s of %g decodes to %g (block amax %g)", dtype_name(t), x[i],
                                 y[i], amax);
                    if (amax > 0)
                        worst = fmax(worst, err / amax);
                }
            }
            if (t == DTYPE_Q8_K) {
                const struct block_q8_K *kb = (const struct block_q8_K *)q;
                for (int64_t b = 0; b < n / 256; b++)
                    for (int j = 0; j < 16; j++) {
                        int sum = 0;
                        for (int i = 0; i < 16; i++)
                            sum += kb[b].qs[16 * j + i];
                        assert_int_equal(kb[b].bsums[j], sum);
                    }
            } else {
                /* s = fp16(d * sum q) with d = amax / 127 in float, before d's own fp16 rounding.
                 */
                const struct block_q8_1 *qb = (const struct block_q8_1 *)q;
                for (int64_t b = 0; b < n / 32; b++) {
                    int sum    = 0;
                    float amax = 0;
                    for (int i = 0; i < 32; i++) {
                        sum += qb[b].qs[i];
                        amax = fmaxf(amax, fabsf(x[32 * b + i]));
                    }
                    assert_int_equal(qb[b].d, fp32_to_fp16(amax / 127));
                    assert_int_equal(qb[b].s, fp32_to_fp16((float)sum * (amax / 127)));
                }
            }
            for (int k = 0; k < nk; k++) {
                memset(q2, 0x55, len);
                ks[k]->type[t].from_float(x, q2, n);
                if (memcmp(q, q2, len) != 0)
                    fail_msg("%s: %s from_float (n=%lld) differs from the reference", ks[k]->name,
                             dtype_name(t), (long long)n);
            }
            free(x);
            free(y);
            free(q);
            free(q2);
        }
        print_message("%s quantization err/amax %.3g, identical on every ISA\n", dtype_name(t),
                      worst);
    }
}

/* -------------------------------------------------- every weight type, random rows */

/*
 * Largest |x - dequant(x)| allowed for one element of a block whose largest |x| is amax, for the
 * types whose quantizer is in the kernel table; negative for the others (tested on random blocks).
 */
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
        return -1.0;
    }
}

/* Whether type t's test rows come from its quantizer (else: random blocks). */
static int quantized_from_floats(enum dtype t)
{
    return kernels_ref()->type[t].from_float && quant_bound(t, 0, 0) >= 0;
}

/* Byte offsets of a block's fp16 scale fields (d, then m or dmin; -1: none). */
static void scale_offsets(enum dtype t, int off[2])
{
    off[1] = -1;
    switch (t) {
    case DTYPE_Q4_1:
    case DTYPE_Q5_1:
    case DTYPE_Q4_K:
    case DTYPE_Q5_K:
        off[0] = 0, off[1] = 2;
        return;
    case DTYPE_Q2_K:
        off[0] = 80, off[1] = 82;
        return;
    case DTYPE_Q3_K:
        off[0] = 108;
        return;
    case DTYPE_Q6_K:
        off[0] = 208;
        return;
    default: /* Q4_0, Q5_0, Q8_0, IQ4_NL, IQ4_XS */
        off[0] = 0;
        return;
    }
}

/*
 * A row of random blocks: every quant and packed-scale bit random, the fp16
 * scales random in [-0.05, 0.05) (mins/offsets too, any sign), so every bit
 * pattern of the layout is exercised, extremes included.
 */
static void fill_random_blocks(enum dtype t, uint8_t *row, size_t row_len)
{
    const size_t bl = dtype_get(t)->block_len;
    int off[2];
    scale_offsets(t, off);
    for (size_t b = 0; b < row_len / bl; b++) {
        uint8_t *blk = row + b * bl;
        for (size_t j = 0; j < bl; j++)
            blk[j] = (uint8_t)rng_u64();
        for (int k = 0; k < 2; k++)
            if (off[k] >= 0)
                put_half(blk + off[k], rng_uniform() * 0.05f);
    }
}

struct errs {
    double quant_max;    /* max |x - dequant(x)| / block amax (quantized rows only) */
    double deq_max;      /* max |to_float - exact decode| / magnitude of its terms */
    double dot_abs;      /* max |s - exact| */
    double dot_norm;     /* max |s - exact| / sum |w*a| */
    double dot_ref_norm; /* max |s - s_ref| / sum |w*a| */
};

/*
 * The exact dot that vec_dot computes: sum of dequantized w times
 * dequantized a in double. For Q8_1 activations the kernels (as ggml) use
 * the block's stored s = fp16(d * sum q) for the offset term m_w * sum(a),
 * so the reference value takes that rounding of s as given.
 */
static void exact_dot(enum dtype t, enum dtype vdt, int64_t n, const float *wd, const float *ad,
                      const uint8_t *w, const uint8_t *a, double *exact, double *sabs)
{
    double e = 0, sa = 0;
    for (int64_t i = 0; i < n; i++) {
        e += (double)wd[i] * ad[i];
        sa += fabs((double)wd[i] * ad[i]);
    }
    if (vdt == DTYPE_Q8_1) {
        const size_t bl = dtype_get(t)->block_len;
        for (int64_t b = 0; b < n / 32; b++) {
            const struct block_q8_1 *y = (const struct block_q8_1 *)a + b;
            int sumq                   = 0;
            for (int j = 0; j < 32; j++)
                sumq += y->qs[j];
            const double m = half_at(w + b * bl + 2);
            e += m * (fp16_to_fp32(y->s) - (double)fp16_to_fp32(y->d) * sumq);
        }
    }
    *exact = e;
    *sabs  = sa;
}

static void check_type(const struct kernels *K, enum dtype t, int64_t n, int rows, struct errs *e)
{
    const struct kernels *R       = kernels_ref();
    const struct type_kernels *rt = &R->type[t], *kt = &K->type[t];
    const enum dtype vdt = rt->vec_dot_type;
    const size_t row_len = dtype_row_len(t, n);
    const size_t act_len = dtype_row_len(vdt, n);
    const uint32_t blk   = dtype_get(t)->block;
    const int from_x     = quantized_from_floats(t);

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
    for (int r = 0; r < rows; r++) {
        if (from_x)
            rt->from_float(wf + r * n, wq + r * row_len, n);
        else
            fill_random_blocks(t, wq + r * row_len, row_len);
    }
    if (from_x && blk > 1 && rows > 1) /* last row: arbitrary quants (-128 included for Q8_0) */
        fill_random_blocks(t, wq + (rows - 1) * row_len, row_len);

    fill_normal(af, n, 1.0f);
    R->type[vdt].from_float(af, aq, n);
    K->type[vdt].from_float(af, aq2, n);
    if (memcmp(aq, aq2, act_len) != 0)
        fail_msg("%s: %s activation quantization (n=%lld) differs from the reference", K->name,
                 dtype_name(vdt), (long long)n);
    R->type[vdt].to_float(aq, ad, n);

    for (int r = 0; r < rows; r++) {
        const uint8_t *w    = wq + r * row_len;
        const float *x      = wf + r * n;
        const int arbitrary = !from_x || (blk > 1 && rows > 1 && r == rows - 1);

        /* from_float: identical bytes (a quantizer writes files; any ISA must write the same file).
         */
        if (!arbitrary) {
            kt->from_float(x, wq2, n);
            if (memcmp(wq2, w, row_len) != 0)
                fail_msg("%s: %s from_float (n=%lld, row %d) differs from the reference", K->name,
                         dtype_name(t), (long long)n, r);
        }

        /* to_float: identical values, and equal to the exact decode up to rounding. */
        rt->to_float(w, wd, n);
        kt->to_float(w, wd2, n);
        if (memcmp(wd, wd2, (size_t)n * sizeof(float)) != 0)
            fail_msg("%s: %s to_float (n=%lld, row %d) differs from the reference", K->name,
                     dtype_name(t), (long long)n, r);
        if (blk > 1)
            e->deq_max = fmax(e->deq_max, check_to_float_exact(t, w, wd, n));

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
        double exact, sabs;
        exact_dot(t, vdt, n, wd, ad, w, aq, &exact, &sabs);
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
    const int nk                   = host_tables(ks);
    static const int64_t lens32[]  = {32, 64, 96, 160, 256 + 32, 1024, 4096 + 32, 11008 + 32};
    static const int64_t lens256[] = {256, 512, 768, 1280, 4096, 11008, 14336};
    for (int k = 0; k < nk; k++) {
        for (size_t ti = 0; ti < N_WEIGHT_TYPES; ti++) {
            const enum dtype t  = weight_types[ti];
            const int k_type    = dtype_get(t)->block == 256;
            const int64_t *lens = k_type ? lens256 : lens32;
            const int nl        = k_type ? 7 : 8;
            struct errs e       = {0};
            for (int l = 0; l < nl; l++)
                check_type(ks[k], t, lens[l], lens[l] > 4096 ? 3 : 5, &e);
            if (quantized_from_floats(t))
                print_message("%-6s %-6s quant err/amax %.3g | vec_dot max abs err %.3g, "
                              "normalized %.3g, vs ref %.3g\n",
                              ks[k]->name, dtype_name(t), e.quant_max, e.dot_abs, e.dot_norm,
                              e.dot_ref_norm);
            else
                print_message("%-6s %-6s to_float vs exact %.3g | vec_dot max abs err %.3g, "
                              "normalized %.3g, vs ref %.3g\n",
                              ks[k]->name, dtype_name(t), e.deq_max, e.dot_abs, e.dot_norm,
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

/*
 * gelu_mul follows ggml's geglu: GELU (tanh form) looked up in a table of f16
 * values at the f16-rounded input, so it is within an f16 rounding of the
 * exact GELU of that input; |g| >= 10 short-cuts to 0 or g. Every table gives
 * the reference's bits.
 */
static void test_gelu_mul(void **state)
{
    (void)state;
    const struct kernels *ks[N_ISA];
    const int nk               = host_tables(ks);
    static const float edges[] = {0.0f,   -0.0f,  10.0f,   -10.0f, 9.99f, -9.99f, 30.0f,
                                  -30.0f, 1e-20f, -1e-20f, 3.0f,   -3.0f, 0.5f};
    const int ne               = (int)(sizeof(edges) / sizeof(edges[0]));
    for (int k = 0; k < nk; k++) {
        double max_exact = 0;
        for (int l = 0; l < N_OP_LENS; l++) {
            const int64_t n = op_lens[l];
            float *g = xmalloc((size_t)n * sizeof(float)), *u = xmalloc((size_t)n * sizeof(float));
            for (int64_t i = 0; i < n; i++)
                g[i] = rng_uniform() * 24.0f;
            for (int64_t i = 0; i < n && n > 16; i += 7)
                g[i] = edges[(i / 7) % ne];
            fill_normal(u, n, 1.0f);
            float *y = xmalloc((size_t)n * sizeof(float)), *yr = xmalloc((size_t)n * sizeof(float));
            ks[k]->gelu_mul(y, g, u, n);
            ref_gelu_mul(yr, g, u, n);
            assert_memory_equal(y, yr, (size_t)n * sizeof(float));
            for (int64_t i = 0; i < n; i++) {
                double want;
                if (g[i] <= -10.0f)
                    want = 0.0;
                else if (g[i] >= 10.0f)
                    want = (double)g[i] * u[i];
                else {
                    const double x = fp16_to_fp32(fp32_to_fp16(g[i]));
                    want = 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))) *
                           u[i];
                }
                /* in the negative tail GELU is below f16's subnormal step (2^-24), and
                 * 1 + tanhf(z) cancels differently in each libm (glibc's aarch64 tanhf is
                 * 3 steps off x86's at g = -5.16): a few steps of absolute error are the
                 * table's, not the kernel's */
                const double err = fabs(y[i] - want);
                if (err > 1e-3 * fabs(want) + 4.0 * 0x1p-24 * fabs(u[i]))
                    fail_msg("%s: gelu_mul n=%lld g=%g u=%g: %.9g, exact %.9g", ks[k]->name,
                             (long long)n, g[i], u[i], y[i], want);
                if (fabs(want) > 1e-3) /* the tail is judged by the absolute bound above */
                    max_exact = fmax(max_exact, err / fabs(want));
            }
            float *ga = copy_of(g, n);
            ks[k]->gelu_mul(ga, ga, u, n);
            assert_memory_equal(ga, y, (size_t)n * sizeof(float));
            free(ga);
            free(g);
            free(u);
            free(y);
            free(yr);
        }
        /* the f16 table, not the f32 formula: gelu(1) = 0.8411920 rounds to 0.84130859375 */
        const float one = 1.0f;
        float y1;
        ks[k]->gelu_mul(&y1, &one, &one, 1);
        assert_true(y1 == 0.84130859375f);
        print_message("%-6s gelu_mul  max rel err vs exact GELU of the f16 input %.3g\n",
                      ks[k]->name, max_exact);
    }
}

/*
 * The F32 and F16 weights' vec_dot at every length (their block is one
 * element, so any n is a row), against the exact sum.
 */
static void test_dots(void **state)
{
    (void)state;
    const struct kernels *ks[N_ISA];
    const int nk = host_tables(ks);
    for (int k = 0; k < nk; k++) {
        double max32 = 0, max16 = 0;
        for (int l = 0; l < N_OP_LENS; l++) {
            const int64_t n = op_lens[l];
            /* One extra element in front so the vectors start unaligned. */
            float *abuf = xmalloc((size_t)(n + 1) * sizeof(float)), *a = abuf + 1;
            float *b        = xmalloc((size_t)n * sizeof(float));
            uint16_t *ahbuf = xmalloc((size_t)(n + 1) * sizeof(uint16_t)), *ah = ahbuf + 1;
            uint16_t *bh = xmalloc((size_t)n * sizeof(uint16_t));
            fill_normal(a, n, 1.0f);
            fill_normal(b, n, 2.0f);
            ref_f32_to_f16(a, ah, n);
            ref_f32_to_f16(b, bh, n);
            double e32 = 0, e16 = 0, sabs32 = 0, sabs16 = 0;
            for (int64_t i = 0; i < n; i++) {
                const double p16 = (double)fp16_to_fp32(ah[i]) * fp16_to_fp32(bh[i]);
                e32 += (double)a[i] * b[i];
                e16 += p16;
                sabs32 += fabs((double)a[i] * b[i]);
                sabs16 += fabs(p16);
            }
            float s32, s16;
            ks[k]->type[DTYPE_F32].vec_dot(n, &s32, b, a);
            ks[k]->type[DTYPE_F16].vec_dot(n, &s16, bh, ah);
            const double n32 = fabs(s32 - e32) / sabs32, n16 = fabs(s16 - e16) / sabs16;
            if (!(n32 <= 1e-6) || !(n16 <= 1e-6))
                fail_msg("%s: vec_dot n=%lld f32 %.9g (exact %.9g), f16 %.9g (exact %.9g)",
                         ks[k]->name, (long long)n, s32, e32, s16, e16);
            max32 = fmax(max32, n32);
            max16 = fmax(max16, n16);
            free(abuf);
            free(b);
            free(ahbuf);
            free(bh);
        }
        print_message("%-6s vec_dot f32 normalized err %.3g, f16 %.3g\n", ks[k]->name, max32,
                      max16);
    }
}

static void test_axpy_scale(void **state)
{
    (void)state;
    const struct kernels *ks[N_ISA];
    const int nk = host_tables(ks);
    for (int k = 0; k < nk; k++) {
        double max32 = 0;
        for (int l = 0; l < N_OP_LENS; l++) {
            const int64_t n = op_lens[l];
            float *x = xmalloc((size_t)n * sizeof(float)), *y0 = xmalloc((size_t)n * sizeof(float));
            fill_normal(x, n, 1.0f);
            fill_normal(y0, n, 1.0f);
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
            ks[k]->scale_f32(y, -1.7f, n);
            ref_scale_f32(yr, -1.7f, n);
            assert_memory_equal(y, yr, (size_t)n * sizeof(float));
            /* mad_f32: one rounding per element, so the same bits everywhere */
            memcpy(y, y0, (size_t)n * sizeof(float));
            ks[k]->mad_f32(y, x, alpha, n);
            for (int64_t i = 0; i < n; i++)
                if (y[i] != fmaf(x[i], alpha, y0[i]))
                    fail_msg("%s: mad_f32 n=%lld [%lld] %.9g, fmaf %.9g", ks[k]->name, (long long)n,
                             (long long)i, y[i], fmaf(x[i], alpha, y0[i]));
            /* dot_f32_ggml: ggml_vec_dot_f32's order, so the same bits everywhere */
            const float d = ks[k]->dot_f32_ggml(x, y0, n), dr = ref_dot_f32_ggml(x, y0, n);
            if (memcmp(&d, &dr, sizeof d))
                fail_msg("%s: dot_f32_ggml n=%lld %.9g, ref %.9g", ks[k]->name, (long long)n, d,
                         dr);

            free(x);
            free(y0);
            free(y);
            free(yr);
        }
        print_message(
            "%-6s axpy_f32 max rel err %.3g; scale_f32, mad_f32, dot_f32_ggml identical\n",
            ks[k]->name, max32);
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
            ks[k]->type[DTYPE_F16].to_float(h, y, n);
            ref_f16_to_float(hr, yr, n);
            assert_memory_equal(y, yr, (size_t)n * sizeof(float));
            free(x);
            free(h);
            free(hr);
            free(y);
            free(yr);
        }
    }
}

/*
 * toks activation rows of n random values in [-2, 2), converted with k's
 * from_float for type at, a_row bytes apart; *as gets each row's q8_0_sum
 * blocks when at is Q8_0, else NULL. The caller frees both.
 */
static uint8_t *gemm_activations(const struct kernels *k, enum dtype at, int64_t n, int32_t toks,
                                 size_t a_row, struct q8_0_sum **as)
{
    uint8_t *a = malloc((size_t)toks * a_row);
    float *x   = malloc((size_t)n * sizeof(float));
    for (int32_t tok = 0; tok < toks; tok++) {
        for (int64_t e = 0; e < n; e++)
            x[e] = rng_uniform() * 4.0f - 2.0f;
        k->type[at].from_float(x, a + tok * a_row, n);
    }
    free(x);
    *as = NULL;
    if (at == DTYPE_Q8_0) {
        *as = malloc((size_t)toks * (size_t)(n / 32) * sizeof **as);
        for (int32_t tok = 0; tok < toks; tok++)
            q8_0_sums(a + tok * a_row, n, *as + tok * (n / 32));
    }
    return a;
}

/*
 * gemm8 (eight rows by several tokens) must equal vec_dot bit for bit for
 * every row and token: it is the same arithmetic, only blocked. Q4_K is the
 * exception llama.cpp makes too: a batch's tokens in whole fours follow its
 * repacked gemm (ref_dot_q4_k_q8_k_quad), the rest its gemv (vec_dot).
 */
static void test_gemm8_matches_vec_dot(void **state)
{
    (void)state;
    const struct kernels *ks[N_ISA];
    const int nk = host_tables(ks);
    int checked  = 0;
    for (int k = 0; k < nk; k++)
        for (uint32_t t = 0; t < DTYPE_COUNT; t++) {
            const struct type_kernels *tk = &ks[k]->type[t];
            if (!tk->gemm8 && !tk->gemm8p)
                continue;
            assert_true(!tk->pack8 == !tk->gemm8p);
            const int64_t lens[] = {32 * 1, 32 * 7, 256 * 3, 256 * 17};
            for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
                const int64_t n = lens[li] % dtype_get(t)->block ? dtype_get(t)->block : lens[li];
                const size_t row_len   = dtype_row_len(t, n),
                             a_row     = dtype_row_len(tk->vec_dot_type, n);
                const int32_t n_toks[] = {1, 2, 3, 4, 6, 9};
                uint8_t *w             = malloc(8 * row_len);
                fill_random_blocks(t, w, 8 * row_len);
                struct q8_0_sum *as;
                uint8_t *a  = gemm_activations(ks[k], tk->vec_dot_type, n, 9, a_row, &as);
                uint8_t *wp = tk->pack8 ? malloc(8 * row_len) : NULL;
                if (wp)
                    tk->pack8(w, row_len, n, wp);
                for (size_t ti = 0; ti < 2 * (sizeof n_toks / sizeof n_toks[0]); ti++) {
                    /* first pass gemm8 on the rows, second gemm8p on the packed group */
                    const int packed = ti >= sizeof n_toks / sizeof n_toks[0];
                    const int32_t nt = n_toks[ti % (sizeof n_toks / sizeof n_toks[0])];
                    if (packed && !wp)
                        break;
                    float out[9 * 11];
                    if (packed)
                        tk->gemm8p(n, wp, a, a_row, as, nt, out, 11);
                    else if (tk->gemm8)
                        tk->gemm8(n, w, row_len, a, a_row, as, nt, out, 11);
                    else
                        continue;
                    for (int32_t tok = 0; tok < nt; tok++)
                        for (int r = 0; r < 8; r++) {
                            float want;
                            /* Q4_K sums a batch's whole fours of tokens as llama.cpp's repacked
                             * gemm */
                            if (t == DTYPE_Q4_K && tok < nt / 4 * 4)
                                ref_dot_q4_k_q8_k_quad(n, &want, w + r * row_len, a + tok * a_row);
                            else
                                tk->vec_dot(n, &want, w + r * row_len, a + tok * a_row);
                            if (memcmp(&want, &out[tok * 11 + r], sizeof want) != 0)
                                fail_msg("%s %s %s n=%lld tok %d row %d: %.9g, vec_dot %.9g",
                                         ks[k]->name, dtype_name(t), packed ? "gemm8p" : "gemm8",
                                         (long long)n, tok, r, out[tok * 11 + r], want);
                        }
                    checked++;
                }
                free(as);
                free(wp);
                free(w);
                free(a);
            }
        }
    print_message("gemm8/gemm8p: %d configurations bit-identical to vec_dot\n", checked);
}

/*
 * gemm16p (two packed groups, sixteen rows, adjacent or in pack16's layout
 * as the table says) must equal gemm8p on each group bit for bit, at every
 * token count its passes split differently, one token included, and for
 * the AMX table's Q4_0 and Q4_K (the AVX-512 kernels' bits from tiles), at
 * lengths and counts that end its tiles and chunks part-way.
 */
static void test_gemm16p_matches_gemm8p(void **state)
{
    (void)state;
    const struct kernels *ks[N_ISA];
    const int nk = host_tables(ks);
    int checked  = 0;
    for (int k = 0; k < nk; k++)
        for (uint32_t t = 0; t < DTYPE_COUNT; t++) {
            const struct type_kernels *tk = &ks[k]->type[t];
            if (!tk->gemm16p)
                continue;
            assert_non_null(tk->gemm8p);
            /* 45 blocks of 32: the AMX table's chunks of blocks end on an odd one */
            const int64_t lens[] = {256 * 1, 256 * 3, 256 * 22, 32 * 45};
            for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
                const int64_t n = lens[li];
                if (n % dtype_get(t)->block)
                    continue;
                const size_t row_len = dtype_row_len(t, n),
                             a_row   = dtype_row_len(tk->vec_dot_type, n);
                /* every count up to 19, then the AMX table's tiles of 16 and chunks of 64 */
                enum { MAXT = 70 };
                const int32_t n_toks[] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13,
                                          14, 15, 16, 17, 18, 19, 31, 32, 33, 48, 64, 65, 70};
                uint8_t *w = malloc(16 * row_len), *wp = malloc(16 * row_len);
                uint8_t *w16 = malloc(16 * row_len);
                fill_random_blocks(t, w, 16 * row_len);
                for (int g = 0; g < 2; g++)
                    tk->pack8(w + 8 * g * row_len, row_len, n, wp + 8 * g * row_len);
                if (tk->pack16)
                    kernels_pack16(tk, (enum dtype)t, w, row_len, n, w16);
                else
                    memcpy(w16, wp, 16 * row_len);
                struct q8_0_sum *as;
                uint8_t *a = gemm_activations(ks[k], tk->vec_dot_type, n, MAXT, a_row, &as);
                for (size_t ti = 0; ti < sizeof n_toks / sizeof n_toks[0]; ti++) {
                    const int32_t nt = n_toks[ti];
                    float out[MAXT * 17], want[MAXT * 17];
                    tk->gemm16p(n, w16, a, a_row, as, nt, out, 17);
                    for (int g = 0; g < 2; g++)
                        tk->gemm8p(n, wp + 8 * g * row_len, a, a_row, as, nt, want + 8 * g, 17);
                    for (int32_t tok = 0; tok < nt; tok++)
                        for (int r = 0; r < 16; r++)
                            if (memcmp(&want[tok * 17 + r], &out[tok * 17 + r], sizeof(float)) != 0)
                                fail_msg("%s %s gemm16p n=%lld of %d tokens, tok %d row %d: %.9g, "
                                         "gemm8p %.9g",
                                         ks[k]->name, dtype_name(t), (long long)n, nt, tok, r,
                                         out[tok * 17 + r], want[tok * 17 + r]);
                    checked++;
                }
                free(as);
                free(w16);
                free(wp);
                free(w);
                free(a);
            }
        }
    print_message("gemm16p: %d configurations bit-identical to gemm8p\n", checked);
}

/* ---------------------------------------------------------------- attention */

/*
 * attn_rows against ref_attn_row, bit for bit, row by row: a paged cache
 * with a shuffled block table and a second head beside the one attended,
 * lanes whose key ranges start and end in different tiles, sliding windows,
 * and scores spread wide enough that some exponentials leave expf's vector
 * range. Head dimensions off the eight-lane grid take the fallback.
 */
static void test_attn_rows(void **state)
{
    (void)state;
    const struct kernels *ks[N_ISA];
    const int nk = host_tables(ks);
    enum { TOKENS = 200, BT = 16, NBLK = (TOKENS + BT - 1) / BT };
    static const int32_t hds[] = {8, 64, 72, 128, 12};
    /* lane r's range: {j0, j1} per case, -1 ends the list */
    /* up to sixteen lanes: two tokens of a group of eight heads, as the sixteen-lane tables take */
    static const int32_t cases[][ATTN_LANES_MAX][2] = {
        {{0, 199}, {-1, -1}},
        {{0, 130}, {0, 131}, {0, 132}, {0, 133}, {0, 134}, {0, 135}, {0, 136}, {0, 137}, {-1, -1}},
        {{0, 63}, {0, 64}, {0, 127}, {0, 128}, {0, 5}, {0, 199}, {-1, -1}},
        {{100, 140}, {101, 141}, {150, 199}, {0, 5}, {64, 64}, {63, 63}, {130, 131}, {-1, -1}},
        {{7, 7}, {0, 0}, {-1, -1}},
        {{0, 127},
         {0, 127},
         {0, 127},
         {0, 127},
         {0, 127},
         {0, 127},
         {0, 127},
         {0, 127},
         {0, 128},
         {0, 128},
         {0, 128},
         {0, 128},
         {0, 128},
         {0, 128},
         {0, 128},
         {0, 128}},
        {{60, 63},
         {0, 64},
         {0, 5},
         {130, 199},
         {0, 199},
         {64, 64},
         {3, 3},
         {0, 70},
         {71, 140},
         {0, 199},
         {192, 199},
         {0, 1},
         {1, 190},
         {120, 130},
         {0, 63},
         {-1, -1}},
    };
    int checked = 0;
    for (size_t hi = 0; hi < sizeof(hds) / sizeof(hds[0]); hi++)
        for (int f16 = 0; f16 <= 1; f16++)
            for (int wide = 0; wide <= 1; wide++) {
                const int32_t hd = hds[hi], kv_dim = 2 * hd;
                const size_t elem = f16 ? 2 : 4, row_len = (size_t)kv_dim * elem;
                const size_t block_len = (size_t)BT * row_len;
                uint8_t *kpool = xmalloc(NBLK * block_len), *vpool = xmalloc(NBLK * block_len);
                int32_t blocks[NBLK];
                for (int b = 0; b < NBLK; b++)
                    blocks[b] = (b * 5 + 3) % NBLK; /* 5 is coprime to NBLK = 13 */
                float *x = xmalloc((size_t)kv_dim * sizeof(float));
                for (int pool = 0; pool < 2; pool++)
                    for (int b = 0; b < NBLK * BT; b++) {
                        fill_normal(x, kv_dim, 1.0f);
                        uint8_t *dst = (pool ? vpool : kpool) + (size_t)b * row_len;
                        if (f16)
                            ref_f32_to_f16(x, (uint16_t *)dst, kv_dim);
                        else
                            memcpy(dst, x, row_len);
                    }
                const struct attn_kv akv = {.k            = kpool + (size_t)hd * elem,
                                            .v            = vpool + (size_t)hd * elem,
                                            .blocks       = blocks,
                                            .block_len    = block_len,
                                            .row_len      = row_len,
                                            .block_tokens = BT,
                                            .f16          = f16};
                float *qs                = xmalloc((size_t)ATTN_LANES_MAX * hd * sizeof(float));
                float *outs              = xmalloc((size_t)ATTN_LANES_MAX * hd * sizeof(float));
                float *want              = xmalloc((size_t)hd * sizeof(float));
                float *scratch           = xmalloc(ATTN_SCRATCH(hd) * sizeof(float));
                fill_normal(qs, ATTN_LANES_MAX * hd, wide ? 40.0f : 1.0f);
                const float scale    = 1.0f / sqrtf((float)hd);
                const size_t n_cases = sizeof(cases) / sizeof(cases[0]);
                for (size_t c = 0; c < n_cases + 3; c++) {
                    int32_t j0[ATTN_LANES_MAX], j1[ATTN_LANES_MAX], nq = 0;
                    float *out[ATTN_LANES_MAX];
                    const float *q[ATTN_LANES_MAX];
                    /* past the table: five tokens of a group of eight heads (a prefill's item,
                     * three groups of sixteen lanes), then every lane a table takes at once and
                     * eleven tokens' worth (six groups: the sixteen-lane table scores four at a
                     * time, then two), ranges in different tiles */
                    const int32_t many = c == n_cases ? 40 : c == n_cases + 1 ? ATTN_LANES_MAX : 88;
                    for (; nq < ATTN_LANES_MAX && (c < n_cases ? cases[c][nq][0] >= 0 : nq < many);
                         nq++) {
                        j0[nq]  = c < n_cases ? cases[c][nq][0] : c == n_cases ? 0 : nq * 3 % 70;
                        j1[nq]  = c < n_cases    ? cases[c][nq][1]
                                  : c == n_cases ? 150 + nq / 8
                                                 : 70 + nq * 2 % 130;
                        q[nq]   = qs + (size_t)nq * hd;
                        out[nq] = outs + (size_t)nq * hd;
                    }
                    for (int k = 0; k < nk; k++) {
                        if (nq > ks[k]->attn_rows_lanes)
                            continue;
                        memset(outs, 0xff, (size_t)ATTN_LANES_MAX * hd * sizeof(float));
                        ks[k]->attn_rows(out, q, nq, hd, &akv, j0, j1, scale, scratch);
                        for (int32_t r = 0; r < nq; r++) {
                            ref_attn_row(want, q[r], hd, &akv, j0[r], j1[r], scale, scratch);
                            for (int32_t d = 0; d < hd; d++)
                                if (memcmp(&want[d], &out[r][d], sizeof(float)) != 0)
                                    fail_msg("%s: attn_rows hd %d f16 %d wide %d case %zu row %d "
                                             "[%d, %d] d %d: %.9g, ref %.9g",
                                             ks[k]->name, hd, f16, wide, c, r, j0[r], j1[r], d,
                                             out[r][d], want[d]);
                        }
                        checked++;
                    }
                }
                free(scratch);
                free(want);
                free(outs);
                free(qs);
                free(x);
                free(vpool);
                free(kpool);
            }
    print_message("attn_rows: %d configurations bit-identical to ref_attn_row\n", checked);
}

/* softmax(q.k * scale) . v in double, straight from the definition. */
static void attn_double(float *out, const float *q, int32_t hd, const struct attn_kv *kv,
                        int32_t j0, int32_t j1, float scale)
{
    double m = -INFINITY, sum = 0, acc[128] = {0};
    for (int32_t j = j0; j <= j1; j++) {
        const uint16_t *kr = (const uint16_t *)attn_kv_row(kv->k, kv, j);
        double s           = 0;
        for (int32_t d = 0; d < hd; d++)
            s += (double)q[d] * fp16_to_fp32(kr[d]);
        m = fmax(m, s * scale);
    }
    for (int32_t j = j0; j <= j1; j++) {
        const uint16_t *kr = (const uint16_t *)attn_kv_row(kv->k, kv, j);
        const uint16_t *vr = (const uint16_t *)attn_kv_row(kv->v, kv, j);
        double s           = 0;
        for (int32_t d = 0; d < hd; d++)
            s += (double)q[d] * fp16_to_fp32(kr[d]);
        const double p = exp(s * scale - m);
        sum += p;
        for (int32_t d = 0; d < hd; d++)
            acc[d] += p * fp16_to_fp32(vr[d]);
    }
    for (int32_t d = 0; d < hd; d++)
        out[d] = (float)(acc[d] / sum);
}

/*
 * expf_libm: every table's bits equal the C library's expf over a stride
 * through every negative float (the softmax's arguments), both ends of the
 * fast range, and what lies outside it (positive, zero, infinities, NaN).
 */
static void test_expf_libm(void **state)
{
    (void)state;
    const struct kernels *ks[N_ISA];
    const int nk = host_tables(ks);
    enum { N = 1 << 16 };
    float *x = xmalloc(N * sizeof(float)), *y = xmalloc(N * sizeof(float));
    static const float edge[] = {0.0f,      -0.0f,    1.0f,       88.0f,          -88.0f,
                                 -103.9f,   -103.91f, -104.0f,    -0x1.9fe368p6f, INFINITY,
                                 -INFINITY, NAN,      -0x1p-149f, -0x1p-126f,     -1e-9f};
    long checked              = 0;
    /* 2^31 / 509 negative floats, a stride that visits every exponent and low-bit pattern */
    for (uint64_t u = 0x80000000u; u <= 0xffffffffu;) {
        int n = 0;
        if (u == 0x80000000u)
            for (size_t i = 0; i < sizeof(edge) / sizeof(edge[0]); i++)
                x[n++] = edge[i];
        for (; n < N && u <= 0xffffffffu; u += 509) {
            const uint32_t b = (uint32_t)u;
            memcpy(&x[n++], &b, sizeof b);
        }
        for (int k = 0; k < nk; k++) {
            ks[k]->expf_libm(x, y, n);
            for (int i = 0; i < n; i++) {
                const float want = expf(x[i]);
                if (memcmp(&y[i], &want, sizeof want) != 0 && !(isnan(want) && isnan(y[i])))
                    fail_msg("%s: expf_libm(%a) = %a, libm %a", ks[k]->name, (double)x[i],
                             (double)y[i], (double)want);
            }
            checked += n;
        }
    }
    print_message("expf_libm: %ld values equal to libm's\n", checked);
    free(y);
    free(x);
}

/* Rows of kv_dim normal(1) values as f16 bits into kpool, then as many into vpool. */
static void fill_f16_pools(uint8_t *kpool, uint8_t *vpool, int32_t rows, int32_t kv_dim)
{
    float *x = xmalloc((size_t)kv_dim * sizeof(float));
    for (int pool = 0; pool < 2; pool++)
        for (int32_t b = 0; b < rows; b++) {
            fill_normal(x, kv_dim, 1.0f);
            ref_f32_to_f16(x, (uint16_t *)(pool ? vpool : kpool) + (size_t)b * kv_dim, kv_dim);
        }
    free(x);
}

/*
 * attn_rows_f16, ggml's per-key arithmetic: every table bit-identical to the
 * reference over a paged cache, one row at a time and up to its
 * attn_rows_f16_lanes together; one key gives that key's value exactly; a
 * query moved by less than half an f16 step gives the same bits (the query
 * is rounded to f16 first); and the result is attention, within the f16
 * accumulator's error of a double computation.
 */
static void test_attn_row_f16(void **state)
{
    (void)state;
    const struct kernels *ks[N_ISA];
    const int nk = host_tables(ks);
    enum { TOKENS = 200, BT = 16, NBLK = (TOKENS + BT - 1) / BT };
    /* 32 and 80: sums wholly or partly in double past the last whole 64 */
    static const int32_t hds[]       = {8, 32, 64, 72, 80, 128};
    static const int32_t ranges[][2] = {{0, 199}, {0, 0}, {7, 7}, {100, 140}, {0, 63}, {63, 130}};
    int checked                      = 0;
    double worst                     = 0;
    for (size_t hi = 0; hi < sizeof(hds) / sizeof(hds[0]); hi++) {
        const int32_t hd = hds[hi], kv_dim = 2 * hd;
        const size_t row_len = (size_t)kv_dim * 2, block_len = (size_t)BT * row_len;
        uint8_t *kpool = xmalloc(NBLK * block_len), *vpool = xmalloc(NBLK * block_len);
        int32_t blocks[NBLK];
        for (int b = 0; b < NBLK; b++)
            blocks[b] = (b * 5 + 3) % NBLK;
        fill_f16_pools(kpool, vpool, NBLK * BT, kv_dim);
        const struct attn_kv akv = {.k            = kpool + (size_t)hd * 2,
                                    .v            = vpool + (size_t)hd * 2,
                                    .blocks       = blocks,
                                    .block_len    = block_len,
                                    .row_len      = row_len,
                                    .block_tokens = BT,
                                    .f16          = 1};
        float *q = xmalloc((size_t)hd * sizeof(float)), *q2 = xmalloc((size_t)hd * sizeof(float));
        float *out     = xmalloc((size_t)hd * sizeof(float)),
              *want    = xmalloc((size_t)hd * sizeof(float));
        float *scratch = xmalloc(ATTN_SCRATCH(hd) * sizeof(float));
        fill_normal(q, hd, 3.0f);
        for (int32_t d = 0; d < hd; d++) {
            q[d]  = fp16_to_fp32(fp32_to_fp16(q[d]));
            q2[d] = q[d] * (1.0f + 0x1p-14f); /* a quarter of an f16 step: rounds back to q */
        }
        const float scale = 1.0f / sqrtf((float)hd);
        for (size_t c = 0; c < sizeof(ranges) / sizeof(ranges[0]); c++) {
            const int32_t j0 = ranges[c][0], j1 = ranges[c][1];
            ref_attn_row_f16(want, q, hd, &akv, j0, j1, scale, scratch);
            for (int k = 0; k < nk; k++) {
                memset(out, 0xff, (size_t)hd * sizeof(float));
                ks[k]->attn_rows_f16(&out, (const float *const *)&q, 1, hd, &akv, &j0, &j1, scale,
                                     scratch);
                if (memcmp(out, want, (size_t)hd * sizeof(float)) != 0)
                    fail_msg("%s: attn_rows_f16 hd %d [%d, %d] differs from the reference",
                             ks[k]->name, hd, j0, j1);
                checked++;
            }
            ref_attn_row_f16(out, q2, hd, &akv, j0, j1, scale, scratch);
            if (memcmp(out, want, (size_t)hd * sizeof(float)) != 0)
                fail_msg("hd %d [%d, %d]: a query within half an f16 step changed the result", hd,
                         j0, j1);
            if (j0 == j1) {
                const uint16_t *vr = (const uint16_t *)attn_kv_row(akv.v, &akv, j0);
                for (int32_t d = 0; d < hd; d++)
                    if (want[d] != fp16_to_fp32(vr[d]))
                        fail_msg("hd %d key %d alone: d %d is %.9g, the value is %.9g", hd, j0, d,
                                 want[d], fp16_to_fp32(vr[d]));
            }
            attn_double(out, q, hd, &akv, j0, j1, scale);
            for (int32_t d = 0; d < hd; d++) {
                /* each key's update rounds the accumulator to 11 bits: a random walk of
                 * half-steps, bounded here with room to spare */
                const double e = fabs((double)want[d] - out[d]) / (1.0 + fabs((double)out[d])) /
                                 sqrt((double)(j1 - j0 + 1));
                worst = e > worst ? e : worst;
                if (e > 0x1p-9)
                    fail_msg("hd %d [%d, %d] d %d: %.9g, in double %.9g", hd, j0, j1, d, want[d],
                             out[d]);
            }
        }
        /* a whole lane set at once, as a GQA group's heads over a verify step's tokens: rows
         * with their own queries and ranges, some starting late or ending early; the last
         * rows' queries are wide, so their scores part by more than expf's fast range (a
         * weight under 2^-150 flushes to zero) */
        enum { LANES = 16 };
        float *qs   = xmalloc((size_t)LANES * hd * sizeof(float));
        float *outs = xmalloc((size_t)LANES * hd * sizeof(float));
        fill_normal(qs, LANES * hd, 2.0f);
        for (int32_t i = (LANES - 3) * hd; i < LANES * hd; i++)
            qs[i] *= 40.0f;
        const float *qr[LANES];
        float *outr[LANES];
        int32_t rj0[LANES], rj1[LANES];
        for (int32_t r = 0; r < LANES; r++) {
            qr[r]   = qs + (size_t)r * hd;
            outr[r] = outs + (size_t)r * hd;
            rj0[r]  = r % 3 == 2 ? 40 + r : 0;
            rj1[r]  = 150 + 3 * r;
        }
        for (int k = 0; k < nk; k++)
            for (int32_t nq = 1; nq <= ks[k]->attn_rows_f16_lanes && nq <= LANES; nq += 3) {
                /* the wide rows are the last of every set */
                const int32_t at = LANES - nq;
                memset(outs, 0xff, (size_t)LANES * hd * sizeof(float));
                ks[k]->attn_rows_f16(outr + at, qr + at, nq, hd, &akv, rj0 + at, rj1 + at, scale,
                                     scratch);
                for (int32_t r = at; r < LANES; r++) {
                    ref_attn_row_f16(want, qr[r], hd, &akv, rj0[r], rj1[r], scale, scratch);
                    if (memcmp(outr[r], want, (size_t)hd * sizeof(float)) != 0)
                        fail_msg("%s: attn_rows_f16 hd %d, %d rows: row %d differs from the "
                                 "reference",
                                 ks[k]->name, hd, nq, r - at);
                    checked++;
                }
            }
        free(outs);
        free(qs);
        free(scratch);
        free(want);
        free(out);
        free(q2);
        free(q);
        free(vpool);
        free(kpool);
    }
    print_message("attn_rows_f16: %d rows bit-identical to the reference, "
                  "max error vs double %.3g (relative, per sqrt(keys))\n",
                  checked, worst);
}

/*
 * attn_heads_f16: rows of up to four KV heads in one call, row r reading head
 * r % nh, each bit-identical to ref_attn_row_f16 over its own head, for
 * every lane count, with ranges that start late or end early and wide
 * queries in the last lanes, over a paged cache whose token rows hold the
 * heads side by side.
 */
static void test_attn_heads_f16(void **state)
{
    (void)state;
    const struct kernels *ks[N_ISA];
    const int nk = host_tables(ks);
    enum { TOKENS = 300, BT = 16, NBLK = (TOKENS + BT - 1) / BT, HEADS = 4, LANES = 16 };
    static const int32_t hds[] = {16, 64, 80, 128, 256};
    int checked = 0, tables = 0;
    for (int k = 0; k < nk; k++)
        tables += ks[k]->attn_heads_f16 != NULL;
    if (tables == 0)
        skip(); /* no table on this host offers it */
    for (size_t hi = 0; hi < sizeof(hds) / sizeof(hds[0]); hi++) {
        const int32_t hd = hds[hi], kv_dim = HEADS * hd;
        const size_t row_len = (size_t)kv_dim * 2, block_len = (size_t)BT * row_len;
        uint8_t *kpool = xmalloc(NBLK * block_len), *vpool = xmalloc(NBLK * block_len);
        int32_t blocks[NBLK];
        for (int b = 0; b < NBLK; b++)
            blocks[b] = (b * 7 + 2) % NBLK;
        fill_f16_pools(kpool, vpool, NBLK * BT, kv_dim);
        struct attn_kv akv[HEADS];
        for (int h = 0; h < HEADS; h++)
            akv[h] = (struct attn_kv){.k            = kpool + (size_t)h * hd * 2,
                                      .v            = vpool + (size_t)h * hd * 2,
                                      .blocks       = blocks,
                                      .block_len    = block_len,
                                      .row_len      = row_len,
                                      .block_tokens = BT,
                                      .f16          = 1};
        float *qs      = xmalloc((size_t)LANES * hd * sizeof(float));
        float *outs    = xmalloc((size_t)LANES * hd * sizeof(float));
        float *want    = xmalloc((size_t)hd * sizeof(float));
        float *scratch = xmalloc(ATTN_SCRATCH(hd) * sizeof(float));
        fill_normal(qs, LANES * hd, 2.0f);
        for (int32_t i = (LANES - 2) * hd; i < LANES * hd; i++)
            qs[i] *= 40.0f;
        const float *qr[LANES];
        float *outr[LANES];
        int32_t rj0[LANES], rj1[LANES];
        const float scale = 1.0f / sqrtf((float)hd);
        for (int k = 0; k < nk; k++) {
            if (!ks[k]->attn_heads_f16)
                continue;
            for (int32_t nh = 1; nh <= HEADS; nh *= 2)
                for (int32_t nq = 1; nq <= ks[k]->attn_rows_f16_lanes && nq <= LANES; nq++) {
                    /* the wide rows are the last of every set */
                    const int32_t at = LANES - nq;
                    for (int32_t r = 0; r < nq; r++) {
                        qr[r]   = qs + (size_t)(at + r) * hd;
                        outr[r] = outs + (size_t)r * hd;
                        rj0[r]  = r % 3 == 2 ? 30 + 5 * r : 0;
                        rj1[r]  = r % 4 == 1 ? 120 + r : TOKENS - 1 - r % 2;
                    }
                    memset(outs, 0xff, (size_t)LANES * hd * sizeof(float));
                    ks[k]->attn_heads_f16(outr, qr, nq, nh, hd, &akv[0], (size_t)hd * 2, rj0, rj1,
                                          scale, scratch);
                    for (int32_t r = 0; r < nq; r++) {
                        ref_attn_row_f16(want, qr[r], hd, &akv[r % nh], rj0[r], rj1[r], scale,
                                         scratch);
                        if (memcmp(outr[r], want, (size_t)hd * sizeof(float)) != 0)
                            fail_msg("%s: attn_heads_f16 hd %d, %d heads, %d rows: row %d "
                                     "differs from the reference",
                                     ks[k]->name, hd, nh, nq, r);
                        checked++;
                    }
                }
        }
        free(scratch);
        free(want);
        free(outs);
        free(qs);
        free(vpool);
        free(kpool);
    }
    print_message("attn_heads_f16: %d rows bit-identical to the reference\n", checked);
}

/*
 * attn_rows_quant's definition, written out for one row with table k's type
 * kernels: the query converted to K's vec_dot type, a score per key, an
 * online softmax with expf, values converted to f32 and added with fmaf,
 * rounded to f16 after each step when V is f16.
 */
static void attn_quant_def(const struct kernels *k, float *out, const float *q, int32_t hd,
                           const struct attn_kv *kv, int32_t j0, int32_t j1, float scale)
{
    const struct type_kernels *kt = &k->type[kv->kt];
    uint8_t qq[128 * 4];
    float acc[128] = {0}, v[128];
    k->type[kt->vec_dot_type].from_float(q, qq, hd);
    float M = -INFINITY, S = 0;
    for (int32_t j = j0; j <= j1; j++) {
        float s;
        kt->vec_dot(hd, &s, attn_kv_row(kv->k, kv, j), qq);
        s *= scale;
        float ms = 1, vs = 1;
        if (s > M) {
            ms = expf(M - s);
            M  = s;
        } else {
            vs = expf(s - M);
        }
        k->type[kv->vt].to_float(attn_kv_vrow(kv, j), v, hd);
        for (int32_t d = 0; d < hd; d++) {
            float a = acc[d] * ms;
            if (kv->vt == DTYPE_F16)
                a = fp16_to_fp32(fp32_to_fp16(a));
            a      = fmaf(v[d], vs, a);
            acc[d] = kv->vt == DTYPE_F16 ? fp16_to_fp32(fp32_to_fp16(a)) : a;
        }
        S = fmaf(S, ms, vs);
    }
    for (int32_t d = 0; d < hd; d++)
        out[d] = acc[d] * (S == 0 ? 0 : 1 / S);
}

/* Attention in double over the cache's dequantized K and V, the query as K's dot sees it. */
static void attn_quant_double(const struct kernels *k, float *out, const float *q, int32_t hd,
                              const struct attn_kv *kv, int32_t j0, int32_t j1, float scale)
{
    const struct type_kernels *kt = &k->type[kv->kt];
    uint8_t qq[128 * 4];
    float qf[128], kr[128], vr[128];
    k->type[kt->vec_dot_type].from_float(q, qq, hd);
    k->type[kt->vec_dot_type].to_float(qq, qf, hd);
    double m = -INFINITY, sum = 0, acc[128] = {0}, sc[512];
    for (int32_t j = j0; j <= j1; j++) {
        kt->to_float(attn_kv_row(kv->k, kv, j), kr, hd);
        double s = 0;
        for (int32_t d = 0; d < hd; d++)
            s += (double)qf[d] * kr[d];
        sc[j - j0] = s * scale;
        m          = fmax(m, sc[j - j0]);
    }
    for (int32_t j = j0; j <= j1; j++) {
        k->type[kv->vt].to_float(attn_kv_vrow(kv, j), vr, hd);
        const double p = exp(sc[j - j0] - m);
        sum += p;
        for (int32_t d = 0; d < hd; d++)
            acc[d] += p * vr[d];
    }
    for (int32_t d = 0; d < hd; d++)
        out[d] = (float)(acc[d] / sum);
}

/*
 * attn_rows_quant over caches of mixed and quantized types: with every table
 * the bits of the definition written out with that table's type kernels,
 * one row at a time and a lane set together; and attention, within the
 * rounding of an f32 (or f16) accumulator, of a double computation over the
 * same quantized rows.
 */
static void test_attn_rows_quant(void **state)
{
    (void)state;
    const struct kernels *ks[N_ISA];
    const int nk = host_tables(ks);
    enum { TOKENS = 200, BT = 16, NBLK = (TOKENS + BT - 1) / BT };
    static const enum dtype types[][2] = {{DTYPE_Q8_0, DTYPE_Q8_0}, {DTYPE_Q4_0, DTYPE_Q8_0},
                                          {DTYPE_Q8_0, DTYPE_F16},  {DTYPE_Q4_0, DTYPE_F16},
                                          {DTYPE_F16, DTYPE_Q8_0},  {DTYPE_F16, DTYPE_F32}};
    static const int32_t hds[]         = {32, 64, 128};
    static const int32_t ranges[][2]   = {{0, 199}, {0, 0}, {7, 7}, {100, 140}, {63, 130}};
    const struct kernels *ref          = kernels_ref();
    int checked                        = 0;
    double worst[2]                    = {0, 0};
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++)
        for (size_t hi = 0; hi < sizeof hds / sizeof *hds; hi++) {
            const enum dtype kt = types[ti][0], vt = types[ti][1];
            const int32_t hd = hds[hi], kv_dim = 2 * hd;
            const size_t krow = dtype_row_len(kt, kv_dim), vrow = dtype_row_len(vt, kv_dim);
            uint8_t *kpool = xmalloc(NBLK * BT * krow), *vpool = xmalloc(NBLK * BT * vrow);
            int32_t blocks[NBLK];
            for (int b = 0; b < NBLK; b++)
                blocks[b] = (b * 5 + 3) % NBLK;
            float *x = xmalloc((size_t)kv_dim * sizeof(float));
            for (int b = 0; b < NBLK * BT; b++) {
                fill_normal(x, kv_dim, 1.0f);
                ref->type[kt].from_float(x, kpool + (size_t)b * krow, kv_dim);
                fill_normal(x, kv_dim, 1.0f);
                ref->type[vt].from_float(x, vpool + (size_t)b * vrow, kv_dim);
            }
            const struct attn_kv akv = {.k            = kpool + krow / 2,
                                        .v            = vpool + vrow / 2,
                                        .blocks       = blocks,
                                        .block_len    = BT * krow,
                                        .row_len      = krow,
                                        .block_tokens = BT,
                                        .kt           = kt,
                                        .vt           = vt,
                                        .v_block_len  = BT * vrow,
                                        .v_row_len    = vrow};
            float *qs                = xmalloc((size_t)ATTN_LANES * hd * sizeof(float));
            float *outs              = xmalloc((size_t)ATTN_LANES * hd * sizeof(float));
            float want[128], dbl[128];
            float *scratch = xmalloc(ATTN_SCRATCH(hd) * sizeof(float));
            fill_normal(qs, ATTN_LANES * hd, 2.0f);
            const float scale = 1.0f / sqrtf((float)hd);
            const float *qr[ATTN_LANES];
            float *outr[ATTN_LANES];
            int32_t rj0[ATTN_LANES], rj1[ATTN_LANES];
            for (int32_t r = 0; r < ATTN_LANES; r++) {
                qr[r]   = qs + (size_t)r * hd;
                outr[r] = outs + (size_t)r * hd;
            }
            for (size_t c = 0; c <= sizeof ranges / sizeof *ranges; c++) {
                /* the ranges one row at a time, then eight rows with their own */
                const int32_t nq = c < sizeof ranges / sizeof *ranges ? 1 : ATTN_LANES;
                for (int32_t r = 0; r < nq; r++) {
                    rj0[r] = nq == 1 ? ranges[c][0] : r % 3 == 2 ? 40 + r : 0;
                    rj1[r] = nq == 1 ? ranges[c][1] : 150 + 6 * r;
                }
                for (int k = 0; k < nk; k++) {
                    memset(outs, 0xff, (size_t)ATTN_LANES * hd * sizeof(float));
                    attn_rows_quant(ks[k], outr, qr, nq, hd, &akv, rj0, rj1, scale, scratch);
                    for (int32_t r = 0; r < nq; r++) {
                        attn_quant_def(ks[k], want, qr[r], hd, &akv, rj0[r], rj1[r], scale);
                        if (memcmp(outr[r], want, (size_t)hd * sizeof(float)) != 0)
                            fail_msg("%s: attn_rows_quant K %s V %s hd %d, row %d of %d "
                                     "[%d, %d] differs from its definition",
                                     ks[k]->name, dtype_name(kt), dtype_name(vt), hd, r, nq, rj0[r],
                                     rj1[r]);
                        attn_quant_double(ks[k], dbl, qr[r], hd, &akv, rj0[r], rj1[r], scale);
                        for (int32_t d = 0; d < hd; d++) {
                            const double e = fabs((double)want[d] - dbl[d]) /
                                             (1.0 + fabs((double)dbl[d])) /
                                             sqrt((double)(rj1[r] - rj0[r] + 1));
                            worst[vt == DTYPE_F16] = fmax(worst[vt == DTYPE_F16], e);
                            if (e > (vt == DTYPE_F16 ? 0x1p-9 : 0x1p-18))
                                fail_msg("K %s V %s hd %d [%d, %d] d %d: %.9g, in double "
                                         "%.9g",
                                         dtype_name(kt), dtype_name(vt), hd, rj0[r], rj1[r], d,
                                         want[d], dbl[d]);
                        }
                        checked++;
                    }
                }
            }
            free(scratch);
            free(outs);
            free(qs);
            free(x);
            free(vpool);
            free(kpool);
        }
    print_message("attn_rows_quant: %d rows equal to the definition; max error vs double %.3g "
                  "(f32 values), %.3g (f16 values), relative per sqrt(keys)\n",
                  checked, worst[0], worst[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tables_complete),
        cmocka_unit_test(test_fp16_known_values),
        cmocka_unit_test(test_bf16_known_values),
        cmocka_unit_test(test_q4_0_known_blocks),
        cmocka_unit_test(test_q8_0_known_blocks),
        cmocka_unit_test(test_legacy_known_blocks),
        cmocka_unit_test(test_kquant_known_blocks),
        cmocka_unit_test(test_activation_known_blocks),
        cmocka_unit_test(test_activation_types),
        cmocka_unit_test(test_weight_types),
        cmocka_unit_test(test_rmsnorm),
        cmocka_unit_test(test_silu_mul),
        cmocka_unit_test(test_gelu_mul),
        cmocka_unit_test(test_dots),
        cmocka_unit_test(test_gemm8_matches_vec_dot),
        cmocka_unit_test(test_gemm16p_matches_gemm8p),
        cmocka_unit_test(test_attn_rows),
        cmocka_unit_test(test_expf_libm),
        cmocka_unit_test(test_attn_row_f16),
        cmocka_unit_test(test_attn_heads_f16),
        cmocka_unit_test(test_attn_rows_quant),
        cmocka_unit_test(test_axpy_scale),
        cmocka_unit_test(test_f16_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
