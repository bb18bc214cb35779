/*
 * test_llamacpp.c: `hearth fit --runtime llama.cpp`'s figures
 * (src/fit/llamacpp.c) against the buffers llama.cpp allocated for the same
 * files and flags (tests/unit/llamacpp_buffers.tsv, measured on an AVX-512
 * host): its model buffers, K/V, recurrent state and logits exactly, its
 * compute buffer too, and the configurations it refuses refused. Prints
 * the worst compute error by architecture family.
 *
 * The compute buffer is a replay of ggml's allocator over llama.cpp's
 * reserve graphs (src/fit/llamacpp_graph.c), not a fitted formula, so it
 * must be exact: where a tensor lands (a freed hole or the top) depends on
 * where the ones before it went, which only the replay follows.
 *
 * A draft model (-md): hearth fit's plan with it holds, beside the
 * target's, the buffers llama-server allocated for the draft's context
 * (tests/unit/llamacpp_draft.tsv), and refuses what llama.cpp refused.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fit/fit.h"
#include "fit/llamacpp.h"
#include "fit/llamacpp_graph.h"
#include "model/model.h"
#include "util/testutil.h"

#define TABLE  HEARTH_TOP "/tests/unit/llamacpp_buffers.tsv"
#define DRAFTS HEARTH_TOP "/tests/unit/llamacpp_draft.tsv"

/* Compute errors by family: the allocator's layout was fitted per family. */
static const char *family(const char *model)
{
    if (strstr(model, "qwen35moe"))
        return "qwen35moe";
    if (strstr(model, "qwen3moe"))
        return "qwen3moe";
    if (strstr(model, "gemma3"))
        return "gemma3";
    return "dense";
}

static enum dtype cache_type(const char *s)
{
    return !strcmp(s, "q8_0") ? DTYPE_Q8_0 : DTYPE_F16;
}

static void test_measured(void **state)
{
    (void)state;
    char *text = tu_read_file(TABLE, NULL);
    assert_non_null(text);
    static const char *const fams[] = {"dense", "qwen3moe", "gemma3", "qwen35moe"};
    double worst[4]                 = {0};
    char worst_at[4][160]           = {{0}};
    int rows = 0, skipped = 0, bad = 0;
    char *save, *line = strtok_r(text, "\n", &save);
    for (; line; line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '#' || !strncmp(line, "model\t", 6))
            continue;
        char model[96], ct[8], fa[4], f[6][24];
        int ctx, np, ub;
        assert_int_equal(sscanf(line, "%95s %d %d %d %7s %3s %23s %23s %23s %23s %23s %23s", model,
                                &ctx, &np, &ub, ct, fa, f[0], f[1], f[2], f[3], f[4], f[5]),
                         12);
        char name[128];
        snprintf(name, sizeof name, "%s.gguf", model);
        const char *path = tu_model(name);
        if (!path) {
            skipped++;
            continue;
        }
        const struct llamacpp_params p = {
            .n_ctx      = ctx,
            .n_parallel = np ? np : 4,
            .unified    = np == 0,
            .n_batch    = 2048,
            .n_ubatch   = ub,
            .type_k     = cache_type(ct),
            .type_v     = cache_type(ct),
            .flash_attn = !strcmp(fa, "on"),
            .isa        = LLAMACPP_ISA_AVX512,
        };
        char where[160], err[256];
        snprintf(where, sizeof where, "%s -c %d -np %d -ub %d -ctk %s -fa %s", model, ctx, np, ub,
                 ct, fa);
        struct llamacpp_memory m;
        const enum hearth_status st = llamacpp_memory(path, &p, &m, err, sizeof err);
        rows++;
        if (!strcmp(f[0], "refused")) {
            if (st == HEARTH_OK) {
                print_message("%s: llama.cpp refuses it, fit accepted it\n", where);
                bad++;
            }
            continue;
        }
        if (st != HEARTH_OK) {
            print_message("%s: %s\n", where, err);
            bad++;
            continue;
        }
        const uint64_t got[6]            = {m.kv, m.rs, m.output, m.compute, m.mapped, m.repack};
        static const char *const what[6] = {"kv", "rs", "output", "compute", "mapped", "repack"};
        for (int k = 0; k < 6; k++) {
            const double want = strtod(f[k], NULL);
            if (k != 3) {
                if ((double)got[k] != want) {
                    print_message("%s: %s %llu, llama.cpp %.0f\n", where, what[k],
                                  (unsigned long long)got[k], want);
                    bad++;
                }
                continue;
            }
            const double e = ((double)got[k] - want) / want;
            int fi         = 0;
            while (strcmp(fams[fi], family(model)))
                fi++;
            if (fabs(e) > fabs(worst[fi])) {
                worst[fi] = e;
                snprintf(worst_at[fi], sizeof worst_at[fi], "%s", where);
            }
            if (e != 0) {
                print_message("%s: compute %llu, llama.cpp %.0f (%+.2f%%)\n", where,
                              (unsigned long long)got[k], want, 100 * e);
                bad++;
            }
        }
    }
    free(text);
    for (int i = 0; i < 4; i++)
        print_message("compute, worst %s: %+.2f%% (%s)\n", fams[i], 100 * worst[i],
                      worst_at[i][0] ? worst_at[i] : "exact");
    if (!rows) {
        print_message("skip: none of the models in %s found (set HEARTH_SHARED)\n", TABLE);
        skip();
    }
    print_message("%d configurations checked, %d skipped (model absent), %d off\n", rows, skipped,
                  bad);
    assert_int_equal(bad, 0);
}

/* The host's figures of a llama.cpp plan of target (and draft, or NULL) with these flags. */
static enum hearth_status plan(const char *target, const char *draft, int ctx, int np, int ub,
                               enum dtype draft_type, bool fa, struct mem_acct *out, char *err)
{
    struct fit_params p = {.runtime    = FIT_LLAMACPP,
                           .model      = target,
                           .draft      = draft,
                           .n_ctx      = ctx,
                           .n_parallel = np ? np : 4,
                           .n_ubatch   = ub,
                           .cache_ram  = 0,
                           .n_dev      = 1,
                           .lc         = {.unified    = np == 0,
                                          .n_batch    = 2048,
                                          .type_k     = DTYPE_F16,
                                          .type_v     = DTYPE_F16,
                                          .flash_attn = fa,
                                          .isa        = LLAMACPP_ISA_AVX512},
                           .lc_draft_k = draft_type,
                           .lc_draft_v = draft_type};
    p.dev[0]            = (struct fit_device){.name = "ram", .capacity = 1ull << 40, .host = true};
    struct fit_plan pl;
    const enum hearth_status st = fit_plan(&p, &pl, err, 256);
    if (st == HEARTH_OK)
        *out = pl.use[0].mem;
    return st;
}

static void test_draft(void **state)
{
    (void)state;
    char *text = tu_read_file(DRAFTS, NULL);
    assert_non_null(text);
    int rows = 0;
    char *save, *line = strtok_r(text, "\n", &save);
    for (; line; line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '#' || !strncmp(line, "target\t", 7))
            continue;
        char tname[96], dname[96], ct[8], fa[4], f[6][24];
        int ctx, np, ub;
        assert_int_equal(sscanf(line, "%95s %95s %d %d %d %7s %3s %23s %23s %23s %23s %23s %23s",
                                tname, dname, &ctx, &np, &ub, ct, fa, f[0], f[1], f[2], f[3], f[4],
                                f[5]),
                         13);
        char tfile[128], dfile[128], tpath[512], err[256];
        snprintf(tfile, sizeof tfile, "%s.gguf", tname);
        snprintf(dfile, sizeof dfile, "%s.gguf", dname);
        const char *t = tu_model(tfile), *d = tu_model(dfile);
        if (!t || !d)
            continue;
        snprintf(tpath, sizeof tpath, "%s", t); /* tu_model's buffer is reused */
        struct mem_acct alone, both;
        const bool on = !strcmp(fa, "on");
        assert_int_equal(plan(tpath, NULL, ctx, np, ub, DTYPE_F16, on, &alone, err), HEARTH_OK);
        const enum hearth_status st = plan(tpath, d, ctx, np, ub, cache_type(ct), on, &both, err);
        rows++;
        if (!strcmp(f[0], "refused")) {
            assert_int_equal(st, HEARTH_EINVAL);
            assert_non_null(strstr(err, "--model-draft"));
            continue;
        }
        if (st != HEARTH_OK)
            fail_msg("%s with %s: %s", tname, dname, err);
        double v[6];
        for (int k = 0; k < 6; k++)
            v[k] = strtod(f[k], NULL);
        /* the draft's share, by kind, exactly */
        assert_int_equal(both.b[MEM_WEIGHTS] - alone.b[MEM_WEIGHTS], (uint64_t)(v[4] + v[5]));
        assert_int_equal(both.b[MEM_KV] - alone.b[MEM_KV], (uint64_t)(v[0] + v[1]));
        assert_int_equal(both.b[MEM_OUTPUT] - alone.b[MEM_OUTPUT], (uint64_t)v[2]);
        assert_int_equal(both.b[MEM_COMPUTE] - alone.b[MEM_COMPUTE], (uint64_t)v[3]);
    }
    free(text);
    if (!rows) {
        print_message("skip: none of the models in %s found (set HEARTH_SHARED)\n", DRAFTS);
        skip();
    }
    print_message("%d draft configurations checked\n", rows);
}

/* What llama.cpp refuses, fit refuses with the reason. */
static void test_refusals(void **state)
{
    (void)state;
    TU_MODEL_OR_SKIP(path, "tiny-llama-spm-q8_0.gguf");
    struct llamacpp_params p = {.n_ctx      = 512,
                                .n_parallel = 1,
                                .n_batch    = 2048,
                                .n_ubatch   = 512,
                                .type_k     = DTYPE_F16,
                                .type_v     = DTYPE_Q8_0,
                                .flash_attn = false};
    struct llamacpp_memory m;
    char err[256];
    assert_int_equal(llamacpp_memory(path, &p, &m, err, sizeof err), HEARTH_EINVAL);
    assert_non_null(strstr(err, "flash attention"));
    p.flash_attn = true;
    assert_int_equal(llamacpp_memory(path, &p, &m, err, sizeof err), HEARTH_OK);
    p.n_parallel = 0;
    assert_int_equal(llamacpp_memory(path, &p, &m, err, sizeof err), HEARTH_EINVAL);

    /* more routed experts than llama.cpp loads (hearth takes up to 4096) */
    const char *moe = tu_model("tiny-qwen3moe-bpe-q8_0.gguf");
    if (!moe)
        return;
    struct hearth_model *model;
    assert_int_equal(model_describe(moe, false, &model, err, sizeof err), HEARTH_OK);
    p.n_parallel = 1;
    assert_int_equal(llamacpp_memory_of(model, &p, &m, err, sizeof err), HEARTH_OK);
    model->hp.n_expert = LLAMACPP_MAX_EXPERTS + 1;
    assert_int_equal(llamacpp_memory_of(model, &p, &m, err, sizeof err), HEARTH_EINVAL);
    assert_non_null(strstr(err, "1025 experts"));
    hearth_model_free(model);

    /* gemma4's graph is not replayed: refused with the reason rather than guessed */
    const char *g4 = tu_model("tiny-gemma4-spm-q8_0.gguf");
    if (!g4)
        return;
    assert_int_equal(llamacpp_memory(g4, &p, &m, err, sizeof err), HEARTH_EUNSUPPORTED);
    assert_non_null(strstr(err, "gemma4"));
}

/* The repack buffer follows the CPU: Q2_K only with AVX-512, nothing without SIMD. */
static void test_isa(void **state)
{
    (void)state;
    TU_MODEL_OR_SKIP(path, "tiny-llama-spm-q2_k.gguf");
    struct llamacpp_params p = {.n_ctx      = 512,
                                .n_parallel = 1,
                                .n_batch    = 2048,
                                .n_ubatch   = 512,
                                .type_k     = DTYPE_F16,
                                .type_v     = DTYPE_F16,
                                .flash_attn = true,
                                .isa        = LLAMACPP_ISA_AVX512};
    struct llamacpp_memory a, b, c;
    char err[256];
    assert_int_equal(llamacpp_memory(path, &p, &a, err, sizeof err), HEARTH_OK);
    p.isa = LLAMACPP_ISA_AVX2;
    assert_int_equal(llamacpp_memory(path, &p, &b, err, sizeof err), HEARTH_OK);
    p.isa = LLAMACPP_ISA_NONE;
    assert_int_equal(llamacpp_memory(path, &p, &c, err, sizeof err), HEARTH_OK);
    assert_true(a.repack > b.repack);
    assert_int_equal(c.repack, 0);
    /* what is not repacked stays mapped: the same weights either way */
    assert_true(c.mapped > a.mapped);
    assert_true(a.repack + a.mapped >= c.mapped);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_measured),
        cmocka_unit_test(test_draft),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_isa),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
