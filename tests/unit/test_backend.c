/*
 * test_backend.c: the backend table (src/backend/backend.h) and the CPU
 * backend's operations at the boundary, on a context built around
 * hand-made hyperparameters and weights, no model file:
 *
 * - the CPU table fills every entry, and HEARTH_BACKEND naming no built-in
 *   backend falls back to the CPU;
 * - weight_prepare packs a WEIGHT_MATMUL weight of whole groups of eight
 *   rows and leaves WEIGHT_ROWS weights and ragged ones as the file has
 *   them; a packed Q4_0 matmul gives the unpacked one's bits, and both are
 *   the reference table's product within float rounding;
 * - matmul's prev reuses quantized rows only when the activation type
 *   matches: after an f32 matmul, a Q4_0 one with prev still quantizes;
 * - embed, rmsnorm, add, gather, softcap and the residual stream's crossing
 *   (residual_get, residual_set) against their definitions.
 *
 * The engine tests (test_forward, test_moe, test_deltanet, test_perplexity,
 * test_run) hold the whole graph to llama.cpp; this file is where a new
 * backend's operations are compared with the CPU's one by one.
 */
#include <math.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "quant/quants.h"
#include "util/testutil.h"

enum { D = 64, FF = 96, VOCAB = 16, NB = 4 };

struct fixture {
    struct hearth_model m;
    struct hearth_context ctx;
    struct stage stage;
    float norm[D];
    float embd[VOCAB][D];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->m.hp      = (struct hparams){.n_vocab       = VOCAB,
                                    .n_embd        = D,
                                    .n_layer       = 1,
                                    .n_head        = 2,
                                    .n_head_kv     = 1,
                                    .head_dim      = 32,
                                    .n_ff          = FF,
                                    .norm_eps      = 1e-5f,
                                    .embd_scale    = 2.0f,
                                    .logit_softcap = 3.0f};
    f->m.be      = backend_cpu();
    f->m.n_stage = 1;
    /* the output alone: the fixture has no layers for a stage to look at */
    f->m.stage[0] = (struct stage_place){.be = backend_cpu(), .l0 = 0, .l1 = 0};
    f->stage      = (struct stage){.place = &f->m.stage[0], .embed = true, .output = true};
    for (int i = 0; i < D; i++)
        f->norm[i] = 0.5f + (float)i / D;
    for (int v = 0; v < VOCAB; v++)
        for (int i = 0; i < D; i++)
            f->embd[v][i] = sinf((float)(v * D + i));
    f->m.output_norm = f->norm;
    f->m.tok_embd    = (struct weight){.type    = DTYPE_F32,
                                       .n_in    = D,
                                       .n_out   = VOCAB,
                                       .row_len = D * sizeof(float),
                                       .data    = f->embd};
    f->ctx.model     = &f->m;
    f->ctx.st        = &f->stage;
    f->ctx.stages    = &f->stage;
    f->ctx.n_stage   = 1;
    f->ctx.p         = (struct hearth_context_params){
                .n_ctx = 16, .n_seq_max = 1, .n_batch = NB, .kv_block = 16, .n_threads = 2};
    char err[HEARTH_ERR_MAX];
    assert_int_equal(f->m.be->ctx_init(&f->ctx, err, sizeof err), HEARTH_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    f->m.be->ctx_free(&f->ctx);
    assert_null(f->ctx.be);
    free(f);
    return 0;
}

/* Row t, element i of a batch of inputs: varied signs and sizes, no pattern a kernel could
 * get right by accident. */
static float input(int t, int i)
{
    return cosf((float)(t * 131 + i * 7)) * (1.0f + (float)((t + i) % 5));
}

/* Every entry of b is filled; the table's size says when a new entry is not listed here. */
static void table_complete(const struct backend *b)
{
    const void *entries[] = {(const void *)b->device_memory,
                             (const void *)b->weight_supported,
                             (const void *)b->moe_supported,
                             (const void *)b->layer_supported,
                             (const void *)b->vector_to_f32,
                             (const void *)b->law,
                             (const void *)b->weight_prepare,
                             (const void *)b->weight_release,
                             (const void *)b->ctx_init,
                             (const void *)b->ctx_free,
                             (const void *)b->seq_reset,
                             (const void *)b->state_len,
                             (const void *)b->state_load,
                             (const void *)b->state_save_rows,
                             (const void *)b->kv_copy,
                             (const void *)b->batch_begin,
                             (const void *)b->residual_get,
                             (const void *)b->residual_set,
                             (const void *)b->embed,
                             (const void *)b->rmsnorm,
                             (const void *)b->matmul,
                             (const void *)b->qkv_store,
                             (const void *)b->attention,
                             (const void *)b->gated_act,
                             (const void *)b->add,
                             (const void *)b->moe,
                             (const void *)b->deltanet,
                             (const void *)b->gather,
                             (const void *)b->softcap,
                             (const void *)b->logits};
    /* the table's size over pointer size counts the name and the flags (kv_host, moe_stacks,
     * kind, one word) too, and the optional entries, nextn_input, ctx_memory (a host
     * backend's count of its buffers), ple_input and layer_tail (gemma4's): a new entry must
     * be listed */
    assert_int_equal(sizeof entries / sizeof entries[0] + 6, sizeof *b / sizeof(void *));
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++)
        assert_non_null(entries[i]);
    /* memlaw sees a stage only by kind, so its law must say what the table says */
    assert_ptr_equal(b->law, backend_law_of(b->kind));
    assert_int_equal(b->law->kv_host, b->kv_host);
    assert_int_equal(b->law->host, b->device_memory(0) == 0);
}

static void test_cpu_table_is_complete(void **state)
{
    const struct backend *b = backend_cpu();
    assert_string_equal(b->name, "cpu");
    table_complete(b);
    assert_true(b->kv_host);
    assert_false(b->moe_stacks);
    assert_non_null(b->nextn_input); /* the MTP head runs on the CPU */
    assert_non_null(b->ctx_memory);  /* its buffers are host memory, which the law predicts */
    assert_true(b->weight_supported(DTYPE_Q4_0));
    assert_false(b->weight_supported(DTYPE_Q8_K)); /* an activation type only */
}

/* The Vulkan table, where a device exists: complete, its own K/V, the shaders' types. */
static void test_vulkan_table_is_complete(void **state)
{
    char why[256];
    const struct backend *b = backend_vulkan(0, why, sizeof why);
    if (!b) {
        print_message("skip: %s\n", why);
        skip();
    }
    assert_string_equal(b->name, "vulkan");
    assert_ptr_equal(backend_find("vulkan"), b);
    table_complete(b);
    assert_false(b->kv_host);
    /* every weight type the CPU computes with but the IQ1..IQ3, TQ and MXFP4 ones, which have
     * no shaders yet (a file with them is refused with -ngl, naming the tensor) */
    static const enum dtype cpu_only[] = {DTYPE_IQ1_S, DTYPE_IQ1_M,   DTYPE_IQ2_XXS, DTYPE_IQ2_XS,
                                          DTYPE_IQ2_S, DTYPE_IQ3_XXS, DTYPE_IQ3_S,   DTYPE_TQ1_0,
                                          DTYPE_TQ2_0, DTYPE_MXFP4};
    int n_types                        = 0;
    for (int t = 0; t < DTYPE_COUNT; t++) {
        bool want = backend_cpu()->weight_supported((enum dtype)t);
        for (size_t i = 0; i < sizeof cpu_only / sizeof cpu_only[0]; i++)
            if (t == (int)cpu_only[i]) {
                assert_true(want);
                want = false;
            }
        if (b->weight_supported((enum dtype)t) != want)
            print_message("type %d: vulkan %d, cpu %d\n", t, b->weight_supported((enum dtype)t),
                          backend_cpu()->weight_supported((enum dtype)t));
        assert_int_equal(b->weight_supported((enum dtype)t), want);
        n_types += b->weight_supported((enum dtype)t);
    }
    assert_int_equal(n_types, 15);
    /* experts through the mul-by-id shaders, whose stacks the load prepares whole; every
     * weight type reads experts too */
    assert_true(b->moe_stacks);
    assert_true(b->moe_supported(DTYPE_Q8_0, DTYPE_Q8_0, DTYPE_Q8_0));
    assert_true(b->moe_supported(DTYPE_Q4_K, DTYPE_Q4_K, DTYPE_Q6_K));
    assert_true(b->moe_supported(DTYPE_Q8_0, DTYPE_Q2_K, DTYPE_IQ4_XS));
    assert_false(b->moe_supported(DTYPE_Q8_0, DTYPE_Q8_K, DTYPE_Q8_0));
    assert_null(backend_vulkan(9, why, sizeof why));
    assert_non_null(strstr(why, "Vulkan device"));
}

static void test_unknown_backend_falls_back_to_cpu(void **state)
{
    /* chosen once per process: this is the file's only call */
    setenv("HEARTH_BACKEND", "no-such-backend", 1);
    assert_ptr_equal(backend_get(), backend_cpu());
}

/* A Q4_0 weight of n_out rows of D elements in a fresh buffer (freed by the caller). */
static struct weight q4_0_weight(int64_t n_out)
{
    const size_t row_len = dtype_row_len(DTYPE_Q4_0, D);
    uint8_t *data        = malloc((size_t)n_out * row_len);
    assert_non_null(data);
    float row[D];
    for (int64_t r = 0; r < n_out; r++) {
        for (int i = 0; i < D; i++)
            row[i] = sinf((float)(r * 17 + i * 3)) * 0.1f;
        assert_true(quant_row(DTYPE_Q4_0, row, data + r * row_len, D));
    }
    return (struct weight){
        .type = DTYPE_Q4_0, .n_in = D, .n_out = n_out, .row_len = row_len, .data = data};
}

static void set_rows(struct hearth_context *ctx, enum act a, int64_t width)
{
    float *x = cpu_act(ctx, a);
    for (int t = 0; t < NB; t++)
        for (int64_t i = 0; i < width; i++)
            x[t * width + i] = input(t, (int)i);
}

static void test_packed_matmul_keeps_the_bits(void **state)
{
    struct fixture *f        = *state;
    const struct backend *be = f->m.be;
    char err[HEARTH_ERR_MAX];
    /* the buffer is under a page, so packing releases none of it and both copies stay readable */
    struct weight w = q4_0_weight(FF), plain = w, ragged = q4_0_weight(FF - 1), rows = w;
    assert_true((size_t)FF * w.row_len < 4096);
    assert_int_equal(be->weight_prepare(&w, WEIGHT_MATMUL, err, sizeof err), HEARTH_OK);
    assert_int_equal(be->weight_prepare(&rows, WEIGHT_ROWS, err, sizeof err), HEARTH_OK);
    assert_int_equal(be->weight_prepare(&ragged, WEIGHT_MATMUL, err, sizeof err), HEARTH_OK);
    assert_non_null(w.dev);
    assert_null(rows.dev);
    assert_null(ragged.dev);

    set_rows(&f->ctx, ACT_XB, D);
    float packed[NB * FF], unpacked[NB * FF];
    for (int n = 1; n <= NB; n += NB - 1) { /* decode, then a batch (the gemm paths) */
        be->matmul(&f->ctx, &w, ACT_XB, ACT_HB, n, NULL);
        memcpy(packed, cpu_act(&f->ctx, ACT_HB), sizeof(float) * FF * n);
        be->matmul(&f->ctx, &plain, ACT_XB, ACT_HB, n, NULL);
        memcpy(unpacked, cpu_act(&f->ctx, ACT_HB), sizeof(float) * FF * n);
        assert_memory_equal(packed, unpacked, sizeof(float) * FF * n);
    }
    /* the reference table: Q8_0 activations, then its own dot */
    const struct kernels *ref = kernels_ref();
    uint8_t a[D / 32 * 34];
    float max_err = 0.0f;
    for (int t = 0; t < NB; t++) {
        ref->type[DTYPE_Q8_0].from_float(cpu_act(&f->ctx, ACT_XB) + t * D, a, D);
        for (int r = 0; r < FF; r++) {
            float s;
            ref->type[DTYPE_Q4_0].vec_dot(D, &s, (const uint8_t *)plain.data + r * plain.row_len,
                                          a);
            max_err = fmaxf(max_err, fabsf(s - packed[t * FF + r]) / (1.0f + fabsf(s)));
        }
    }
    print_message("packed Q4_0 matmul: relative difference from the reference %g\n", max_err);
    assert_true(max_err < 1e-5f);
    be->weight_release(&w);
    assert_null(w.dev);
    free((void *)plain.data);
    free((void *)ragged.data);
}

static void test_prev_requantizes_for_another_type(void **state)
{
    struct fixture *f        = *state;
    const struct backend *be = f->m.be;
    struct weight q          = q4_0_weight(FF);
    float *wf                = malloc(sizeof(float) * FF * D);
    assert_non_null(wf);
    for (int i = 0; i < FF * D; i++)
        wf[i] = cosf((float)i) * 0.1f;
    const struct weight w32 = {
        .type = DTYPE_F32, .n_in = D, .n_out = FF, .row_len = D * sizeof(float), .data = wf};
    set_rows(&f->ctx, ACT_XB, D);
    float alone[NB * FF];
    be->matmul(&f->ctx, &q, ACT_XB, ACT_HB, NB, NULL);
    memcpy(alone, cpu_act(&f->ctx, ACT_HB), sizeof alone);
    /* the same type after another Q4_0 matmul reuses its rows; after an f32 one it cannot */
    be->matmul(&f->ctx, &q, ACT_XB, ACT_HB2, NB, NULL);
    be->matmul(&f->ctx, &q, ACT_XB, ACT_HB, NB, &q);
    assert_memory_equal(cpu_act(&f->ctx, ACT_HB), alone, sizeof alone);
    be->matmul(&f->ctx, &w32, ACT_XB, ACT_HB2, NB, NULL);
    be->matmul(&f->ctx, &q, ACT_XB, ACT_HB, NB, &w32);
    assert_memory_equal(cpu_act(&f->ctx, ACT_HB), alone, sizeof alone);
    free(wf);
    free((void *)q.data);
}

static void test_row_operations(void **state)
{
    struct fixture *f          = *state;
    const struct backend *be   = f->m.be;
    const hearth_token tok[NB] = {3, 0, 15, 3};
    const int32_t pos[NB] = {0, 1, 2, 3}, seq[NB] = {0};
    const struct hearth_batch b = {NB, tok, pos, seq, NULL};
    be->embed(&f->ctx, &b);
    const float *x = cpu_act(&f->ctx, ACT_X);
    for (int t = 0; t < NB; t++)
        for (int i = 0; i < D; i++)
            assert_true(x[t * D + i] == 2.0f * f->embd[tok[t]][i]);

    be->rmsnorm(&f->ctx, ACT_XB, ACT_X, -1, NORM_OUTPUT, NB);
    const float *xb = cpu_act(&f->ctx, ACT_XB);
    float max_err   = 0.0f;
    for (int t = 0; t < NB; t++) {
        double ss = 0;
        for (int i = 0; i < D; i++)
            ss += (double)x[t * D + i] * x[t * D + i];
        const double scale = 1.0 / sqrt(ss / D + 1e-5);
        for (int i = 0; i < D; i++)
            max_err =
                fmaxf(max_err, fabsf(xb[t * D + i] - (float)(x[t * D + i] * scale * f->norm[i])));
    }
    assert_true(max_err < 1e-5f);

    float before[NB * D];
    memcpy(before, x, sizeof before);
    be->add(&f->ctx, ACT_X, ACT_XB, NB);
    for (int i = 0; i < NB * D; i++)
        assert_true(x[i] == before[i] + xb[i]);

    const int32_t rows[2] = {1, 3};
    memcpy(before, x, sizeof before);
    be->gather(&f->ctx, ACT_X, rows, 2);
    assert_memory_equal(x, before + 1 * D, D * sizeof(float));
    assert_memory_equal(x + D, before + 3 * D, D * sizeof(float));

    /* the residual stream's crossing: n rows out to the host and back, nothing more */
    float host[NB * D], back[NB * D];
    memcpy(before, x, sizeof before);
    for (int i = 0; i < NB * D; i++)
        host[i] = back[i] = -1.0f;
    be->residual_get(&f->ctx, 2, host);
    assert_memory_equal(host, before, 2 * D * sizeof(float));
    assert_true(host[2 * D] == -1.0f);
    be->residual_set(&f->ctx, 1, back);
    assert_true(x[0] == -1.0f && x[D - 1] == -1.0f);
    assert_memory_equal(x + D, before + D, (NB - 1) * D * sizeof(float));

    float *lg = cpu_act(&f->ctx, ACT_LOGITS);
    for (int i = 0; i < 2 * VOCAB; i++)
        lg[i] = (float)(i - VOCAB) * 0.75f;
    be->softcap(&f->ctx, 2);
    const float *out = be->logits(&f->ctx, 2);
    for (int i = 0; i < 2 * VOCAB; i++) {
        const float l = (float)(i - VOCAB) * 0.75f;
        assert_true(out[i] == tanhf(l * (1.0f / 3.0f)) * 3.0f);
        assert_true(fabsf(out[i]) < 3.0f);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_table_is_complete),
        cmocka_unit_test(test_vulkan_table_is_complete),
        cmocka_unit_test(test_unknown_backend_falls_back_to_cpu),
        cmocka_unit_test_setup_teardown(test_packed_matmul_keeps_the_bits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_prev_requantizes_for_another_type, setup, teardown),
        cmocka_unit_test_setup_teardown(test_row_operations, setup, teardown),
    };
    return cmocka_run_group_tests_name("backend", tests, NULL, NULL);
}
