/*
 * test_iquants.c: the IQ1..IQ3, TQ and MXFP4 weight types (util/dtype_blocks.h,
 * kernels/ref_iquants.c, ref_tquants.c): their geometry, and every kernel table
 * of this host against values recorded from ggml. The blocks are made by a
 * fixed generator (every byte random, the fp16 scales sane), so the recorded
 * figures pin the decoding of every bit of the layouts; a codebook entry or a
 * shift that differs from ggml's changes the hash.
 *
 * How the figures were recorded: a C harness with this file's generator,
 * linked against the pinned llama.cpp's libggml-base and libggml-cpu (3f545be,
 * CPU build), called dequantize_row_<type> on the 1024-element row and
 * ggml_vec_dot_<type>_q8_K_generic (mxfp4: _q8_0_generic) against the
 * generator's activation row, and printed the FNV-1a hash of the row's float
 * bits, four of its values and the dot, as below.
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

#define ROW 1024 /* elements per test row: 4 super-blocks, 32 MXFP4 blocks */

struct recorded {
    enum dtype t;
    uint64_t hash; /* FNV-1a of the dequantized row's float bits */
    float y[4];    /* elements 0, 1, 300 and 1023 */
    float dot;     /* the row against the generator's activations */
};

/* clang-format off */
static const struct recorded ggml_figures[] = {
    {DTYPE_IQ2_XXS, 0x4acd36b65a166d5dull, {0x1.4981e8p+2, -0x1.ea6ep-1, -0x1.7ad8p-1, 0x1.9fc8p-2}, 0x1.dc7786p+7},
    {DTYPE_IQ2_XS, 0x2d80f2e1edc2496dull, {-0x1.7b8p-1, -0x1.287cp+1, 0x1.63ap-2, 0x1.124acp+0}, 0x1.b7f5cap+4},
    {DTYPE_IQ3_XXS, 0x711c3efb03b493ecull, {-0x1.b1c8p+2, -0x1.fa14p+3, 0x1.81b3p+2, -0x1.031f8p+3}, -0x1.479194p+7},
    {DTYPE_IQ1_S, 0xe4c1d77b12407336ull, {0x1.7ba4p-1, 0x1.7ba4p-1, 0x1.beap-8, -0x1.6c7ep-3}, 0x1.4ef4aap+3},
    {DTYPE_IQ3_S, 0x9833f88d7a668049ull, {0x1.5b58p+6, -0x1.40ap+4, -0x1.9d0cp-2, -0x1.9a5c8p+6}, 0x1.d1c78p+1},
    {DTYPE_IQ2_S, 0x2f3cedec7786225dull, {-0x1.6a1cp+2, -0x1.6a1cp+2, 0x1.95e83p+4, 0x1.702ap+1}, 0x1.6eef46p+7},
    {DTYPE_IQ1_M, 0x2c96556d3961c8e2ull, {0x1.1a7bp+0, 0x1.1a7bp+0, -0x1.d0ap-4, -0x1.2987p-1}, 0x1.8057a8p+3},
    {DTYPE_TQ1_0, 0x557a2a25d98afca9ull, {0x1.22p-5, 0x1.22p-5, -0x1.d0cp-5, -0x1.3e8p-6}, 0x1.c83524p-5},
    {DTYPE_TQ2_0, 0xbe89af4ac04a1b29ull, {0x1.4a4p-2, 0x1.4a4p-3, -0x1.f2p-2, -0x1.8c4p-6}, 0x1.13f04cp+2},
    {DTYPE_MXFP4, 0x47391d93772f7725ull, {0x1p-127, 0x0p+0, 0x0p+0, 0x1p-23}, -0x1.35566cp+15},
};
/* clang-format on */
#define N_TYPES (sizeof(ggml_figures) / sizeof(ggml_figures[0]))

/* ---------------------------------------------------------------- the generator */

static uint64_t rng_state;

static uint32_t rng(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33);
}

/* An fp16 of either sign with exponent 2^-6..2^-2 and a random mantissa. */
static uint16_t rng_half(void)
{
    const uint32_t sign = rng() & 1, e = 9 + rng() % 5, m = rng() & 1023;
    return (uint16_t)(sign << 15 | e << 10 | m);
}

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

/* nb blocks of type t: random bytes, then each block's scale made a finite, moderate value. */
static void make_weights(enum dtype t, uint8_t *w, int nb)
{
    const int bl = (int)dtype_get(t)->block_len;
    rng_state    = 0x1234 + (uint64_t)t;
    for (int i = 0; i < nb * bl; i++)
        w[i] = (uint8_t)rng();
    for (int b = 0; b < nb; b++) {
        uint8_t *p = w + b * bl;
        switch (t) {
        case DTYPE_TQ1_0:
            put16(p + offsetof(struct block_tq1_0, d), rng_half());
            break;
        case DTYPE_TQ2_0:
            put16(p + offsetof(struct block_tq2_0, d), rng_half());
            break;
        case DTYPE_IQ1_M: { /* d is the top nibbles of the four scale words */
            const uint16_t h = rng_half();
            uint8_t *sc      = p + offsetof(struct block_iq1_m, scales);
            for (int k = 0; k < 4; k++) {
                const uint16_t v = (uint16_t)(sc[2 * k] | sc[2 * k + 1] << 8);
                put16(sc + 2 * k, (uint16_t)((v & 0x0FFF) | ((h >> (4 * k)) & 15) << 12));
            }
            break;
        }
        case DTYPE_MXFP4: /* blocks 0 and 1 take the two denormal scales */
            p[0] = (uint8_t)(b < 2 ? (uint32_t)b : 100 + rng() % 40);
            break;
        default: /* the IQ types' d leads the block */
            put16(p, rng_half());
            break;
        }
    }
}

/* The activation row t's dot takes: Q8_0 blocks for MXFP4, else Q8_K with true bsums. */
static void make_acts(enum dtype t, uint8_t *a)
{
    rng_state = 0x9876 + (uint64_t)t;
    if (t == DTYPE_MXFP4) {
        struct block_q8_0 *q = (struct block_q8_0 *)a;
        for (int b = 0; b < ROW / QK8_0; b++) {
            q[b].d = rng_half();
            for (int i = 0; i < QK8_0; i++)
                q[b].qs[i] = (int8_t)((int)(rng() % 255) - 127);
        }
        return;
    }
    struct block_q8_K *q = (struct block_q8_K *)a;
    for (int b = 0; b < ROW / QK_K; b++) {
        const float mag = (float)(rng() % 1000 + 1) * 1e-5f;
        q[b].d          = (rng() & 1) ? -mag : mag;
        for (int i = 0; i < QK_K; i++)
            q[b].qs[i] = (int8_t)((int)(rng() % 255) - 127);
        for (int j = 0; j < QK_K / 16; j++) {
            int s = 0;
            for (int i = 0; i < 16; i++)
                s += q[b].qs[16 * j + i];
            q[b].bsums[j] = (int16_t)s;
        }
    }
}

static uint64_t fnv_floats(const float *y, int n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < n; i++) {
        const uint32_t u = fp32_to_bits(y[i]);
        for (int k = 0; k < 4; k++) {
            h ^= (u >> (8 * k)) & 255;
            h *= 0x100000001b3ull;
        }
    }
    return h;
}

/* A row of t and its activations, each in a buffer of its exact length (ASan sees over-reads). */
struct rows {
    uint8_t *w, *a;
};

static struct rows make_rows(enum dtype t, enum dtype at)
{
    struct rows r = {malloc(dtype_row_len(t, ROW)), malloc(dtype_row_len(at, ROW))};
    assert_non_null(r.w);
    assert_non_null(r.a);
    make_weights(t, r.w, ROW / (int)dtype_get(t)->block);
    make_acts(t, r.a);
    return r;
}

static void free_rows(struct rows r)
{
    free(r.w);
    free(r.a);
}

/* ---------------------------------------------------------------- tests */

/* Names, ids and block sizes as GGUF's (ggml's type_traits). */
static void test_geometry(void **state)
{
    (void)state;
    static const struct {
        enum dtype t;
        uint32_t id;
        const char *name;
        uint32_t block, bytes;
    } want[] = {
        {DTYPE_IQ2_XXS, 16, "iq2_xxs", 256, 66}, {DTYPE_IQ2_XS, 17, "iq2_xs", 256, 74},
        {DTYPE_IQ3_XXS, 18, "iq3_xxs", 256, 98}, {DTYPE_IQ1_S, 19, "iq1_s", 256, 50},
        {DTYPE_IQ3_S, 21, "iq3_s", 256, 110},    {DTYPE_IQ2_S, 22, "iq2_s", 256, 82},
        {DTYPE_IQ1_M, 29, "iq1_m", 256, 56},     {DTYPE_TQ1_0, 34, "tq1_0", 256, 54},
        {DTYPE_TQ2_0, 35, "tq2_0", 256, 66},     {DTYPE_MXFP4, 39, "mxfp4", 32, 17},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        const struct dtype_info *di = dtype_get(want[i].id);
        assert_int_equal(want[i].t, want[i].id);
        assert_non_null(di);
        assert_string_equal(di->name, want[i].name);
        assert_int_equal(di->block, want[i].block);
        assert_int_equal(di->block_len, want[i].bytes);
    }
}

/* Every table this host runs takes each type, with ggml's activation type. */
static void test_tables(void **state)
{
    (void)state;
    for (int k = 0; k < N_ISA; k++) {
        const struct kernels *K = kernels_find(isa_names[k]);
        if (!K)
            continue;
        for (size_t i = 0; i < N_TYPES; i++) {
            const enum dtype t            = ggml_figures[i].t;
            const struct type_kernels *tk = &K->type[t];
            const enum dtype want         = t == DTYPE_MXFP4 ? DTYPE_Q8_0 : DTYPE_Q8_K;
            if (!tk->to_float || !tk->vec_dot || tk->vec_dot_type != want)
                fail_msg("%s: %s lacks to_float or vec_dot, or takes %s", K->name, dtype_name(t),
                         dtype_name(tk->vec_dot_type));
        }
    }
}

/* Each table's to_float and vec_dot give ggml's bits on the generator's rows. */
static void test_ggml_figures(void **state)
{
    (void)state;
    float *y = malloc(ROW * sizeof(float));
    assert_non_null(y);
    for (int k = 0; k < N_ISA; k++) {
        const struct kernels *K = kernels_find(isa_names[k]);
        if (!K)
            continue;
        for (size_t i = 0; i < N_TYPES; i++) {
            const struct recorded *f      = &ggml_figures[i];
            const struct type_kernels *tk = &K->type[f->t];
            const struct rows r           = make_rows(f->t, tk->vec_dot_type);
            tk->to_float(r.w, y, ROW);
            const float got[4] = {y[0], y[1], y[300], y[1023]};
            for (int j = 0; j < 4; j++)
                if (fp32_to_bits(got[j]) != fp32_to_bits(f->y[j]))
                    fail_msg("%s %s: sample %d is %a, ggml %a", K->name, dtype_name(f->t), j,
                             got[j], f->y[j]);
            if (fnv_floats(y, ROW) != f->hash)
                fail_msg("%s %s: dequantized row differs from ggml's", K->name, dtype_name(f->t));
            float s = 0;
            tk->vec_dot(ROW, &s, r.w, r.a);
            if (fp32_to_bits(s) != fp32_to_bits(f->dot))
                fail_msg("%s %s: dot %a, ggml %a", K->name, dtype_name(f->t), s, f->dot);
            free_rows(r);
        }
    }
    free(y);
}

/* Every table's dot has the reference's bits on many rows (each table keeps ref's float steps). */
static void test_tables_match_ref(void **state)
{
    (void)state;
    const struct kernels *ref = kernels_ref();
    for (int k = 1; k < N_ISA; k++) {
        const struct kernels *K = kernels_find(isa_names[k]);
        if (!K)
            continue;
        print_message("table %s\n", K->name);
        for (size_t i = 0; i < N_TYPES; i++) {
            const enum dtype t = ggml_figures[i].t;
            for (uint64_t seed = 1; seed <= 64; seed++) {
                const struct rows r = make_rows(t, ref->type[t].vec_dot_type);
                rng_state           = seed * 0x9E3779B97F4A7C15ull; /* other bytes, same scales */
                for (size_t b = 0; b < dtype_row_len(t, ROW); b++)
                    if (t != DTYPE_MXFP4 || b % sizeof(struct block_mxfp4))
                        r.w[b] = (uint8_t)(r.w[b] ^ (rng() & (seed & 1 ? 0xFF : 0x0F)));
                float want = 0, got = 0;
                ref->type[t].vec_dot(ROW, &want, r.w, r.a);
                K->type[t].vec_dot(ROW, &got, r.w, r.a);
                if (fp32_to_bits(want) != fp32_to_bits(got))
                    fail_msg("%s %s seed %llu: dot %a, ref %a", K->name, dtype_name(t),
                             (unsigned long long)seed, got, want);
                free_rows(r);
            }
        }
    }
}

/*
 * The dot is the sum of the dequantized weights times the activations, in
 * double, within float rounding of sum |w * a| (independent of the recorded
 * figures: a wrong sign bit or scale in both to_float and vec_dot alike is
 * caught by the figures, one in either alone by this).
 */
static void test_dot_is_the_sum(void **state)
{
    (void)state;
    const struct kernels *ref = kernels_ref();
    float *y = malloc(ROW * sizeof(float)), *x = malloc(ROW * sizeof(float));
    assert_non_null(y);
    assert_non_null(x);
    for (size_t i = 0; i < N_TYPES; i++) {
        const enum dtype t            = ggml_figures[i].t;
        const struct type_kernels *tk = &ref->type[t];
        const struct rows r           = make_rows(t, tk->vec_dot_type);
        tk->to_float(r.w, y, ROW);
        ref->type[tk->vec_dot_type].to_float(r.a, x, ROW);
        double sum = 0, mag = 0;
        for (int e = 0; e < ROW; e++) {
            sum += (double)y[e] * x[e];
            mag += fabs((double)y[e] * x[e]);
        }
        float s = 0;
        tk->vec_dot(ROW, &s, r.w, r.a);
        print_message("%s: dot %.9g, exact %.9g, |sum| %.3g\n", dtype_name(t), s, sum, mag);
        if (!(fabs(s - sum) <= 1e-5 * mag))
            fail_msg("%s: dot %.9g, exact %.9g (sum |w*a| %.9g)", dtype_name(t), s, sum, mag);
        free_rows(r);
    }
    free(y);
    free(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_geometry),       cmocka_unit_test(test_tables),
        cmocka_unit_test(test_ggml_figures),   cmocka_unit_test(test_tables_match_ref),
        cmocka_unit_test(test_dot_is_the_sum),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
