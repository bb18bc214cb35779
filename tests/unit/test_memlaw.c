/*
 * test_memlaw.c: the memory law's prediction, from a file's header alone
 * (model_describe, memlaw_weights, memlaw_context), equals what the engine
 * counted as it loaded the model and made the context
 * (hearth_model_memory, hearth_context_memory), byte for byte, kind by
 * kind: for every shared model over the grid ctx {512, 4096} x parallel
 * {1, 4} x ubatch {128, 512} x K/V {f16, q8_0}, and with a prefix cache
 * cap, state snapshots, kept states and an MTP head where the model has
 * them. An allocation the law does not know breaks it.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hearth.h"
#include "model/memlaw.h"
#include "model/model.h"
#include "util/testutil.h"

/* clang-format off */
static const char *const models[] = {
    "stories260K.gguf",
    "tiny-llama-spm-f16.gguf",
    "tiny-llama-spm-q4_0.gguf",
    "tiny-llama-spm-q4_k_m.gguf",
    "tiny-llama-spm-q8_0.gguf",
    "tiny-qwen2-bpe-q8_0.gguf",
    "tiny-qwen3-bpe-q8_0.gguf",
    "tiny-qwen3moe-bpe-q8_0.gguf",
    "tiny-gemma3-spm-q8_0.gguf",
    "tiny-qwen35moe-bpe-q8_0.gguf",
    "tiny-qwen35moe-mtp-bpe-q8_0.gguf",
    "tiny-qwen35-bpe-q8_0.gguf",
    "tiny-qwen35-mtp-bpe-q8_0.gguf",
    "tiny-gemma4-spm-q8_0.gguf",
};
/* clang-format on */

static void expect_equal(const char *what, const struct mem_acct *want,
                         const struct hearth_memory *got)
{
    const uint64_t g[MEM_KINDS] = {got->weights, got->kv, got->compute, got->output, got->other};
    static const char *const kind[MEM_KINDS] = {"weights", "kv", "compute", "output", "other"};
    for (int k = 0; k < MEM_KINDS; k++)
        if (want->b[k] != g[k]) {
            print_message("%s: %s predicted %llu, counted %llu\n", what, kind[k],
                          (unsigned long long)want->b[k], (unsigned long long)g[k]);
            fail();
        }
}

/* The law's figures for a context of d (a header-only model) with p, on one CPU stage. */
static void predict(const struct hearth_model *d, const struct hearth_context_params *p,
                    struct mem_acct *out)
{
    struct memlaw_stage st = {.kind = BACKEND_CPU, .l0 = 0, .l1 = d->hp.n_layer};
    if (p->mtp)
        st.l0 = d->hp.n_layer, st.l1 = d->hp.n_layer + 1;
    struct mem_acct dev, host;
    memlaw_context(d, p, &st, 1, &dev, &host);
    *out = dev;
    mem_acct_add(out, &host);
}

static void check_context(struct hearth_model *m, const struct hearth_model *d,
                          struct hearth_context_params cp, const char *what)
{
    struct hearth_context *ctx = NULL;
    char err[HEARTH_ERR_MAX];
    const enum hearth_status st = hearth_context_new(m, &cp, &ctx, err, sizeof err);
    if (st == HEARTH_EINVAL && cp.kv_type == HEARTH_KV_Q8_0)
        return; /* heads not in blocks of 32: the file cannot have a q8_0 cache */
    if (st != HEARTH_OK) {
        print_message("%s: %s\n", what, err);
        fail();
    }
    struct hearth_memory got;
    hearth_context_memory(ctx, &got);
    struct mem_acct want;
    if (cp.n_ctx <= 0)
        cp.n_ctx = d->hp.n_ctx_train;
    predict(d, &cp, &want);
    expect_equal(what, &want, &got);
    assert_true(got.kv > 0 && got.compute > 0);
    assert_true(cp.mtp || got.output > 0);
    hearth_context_free(ctx);
}

static void check_model(const char *path, bool mtp)
{
    struct hearth_model_params mp = hearth_model_default_params();
    mp.n_threads                  = 2;
    mp.mtp                        = mtp;
    struct hearth_model *m = NULL, *d = NULL;
    char err[HEARTH_ERR_MAX];
    assert_int_equal(hearth_model_load(path, &mp, &m, err, sizeof err), HEARTH_OK);
    assert_int_equal(model_describe(path, mtp, &d, err, sizeof err), HEARTH_OK);

    struct memlaw_stage st = {.kind = BACKEND_CPU, .l0 = 0, .l1 = d->hp.n_layer};
    struct mem_acct w, host;
    memset(&host, 0, sizeof host);
    memlaw_weights(d, &st, 1, &w, &host);
    mem_acct_add(&w, &host);
    struct hearth_memory got;
    hearth_model_memory(m, &got);
    expect_equal(path, &w, &got);

    static const int32_t ctxs[] = {512, 4096}, pars[] = {1, 4}, ubs[] = {128, 512};
    static const enum hearth_kv_type kvs[] = {HEARTH_KV_F16, HEARTH_KV_Q8_0};
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++)
            for (int c = 0; c < 2; c++)
                for (int e = 0; e < 2; e++) {
                    struct hearth_context_params cp = hearth_context_default_params();
                    cp.n_ctx                        = ctxs[a];
                    cp.n_seq_max                    = pars[b];
                    cp.n_batch                      = ubs[c];
                    cp.kv_type = cp.kv_type_v = kvs[e];
                    cp.n_threads              = 2;
                    char what[256];
                    snprintf(what, sizeof what, "%s ctx %d np %d ub %d %s", path, ctxs[a], pars[b],
                             ubs[c], hearth_kv_type_name(kvs[e]));
                    check_context(m, d, cp, what);
                    /* a serve-like context: a prefix cache cap, snapshots, kept states */
                    cp.cache_bytes       = 3 << 20;
                    cp.n_state_snapshots = m->hp.recurrent ? 8 : 0;
                    cp.n_keep_states     = m->hp.recurrent ? 4 : 0;
                    cp.keep_hidden       = e;
                    strncat(what, " cached", sizeof what - strlen(what) - 1);
                    check_context(m, d, cp, what);
                }
    if (mtp) {
        struct hearth_context_params cp = hearth_context_default_params();
        cp.n_ctx                        = 512;
        cp.n_batch                      = 64;
        cp.mtp                          = true;
        cp.n_threads                    = 2;
        cp.keep_hidden                  = true;
        check_context(m, d, cp, "mtp head");
    }
    hearth_model_free(d);
    hearth_model_free(m);
}

static void test_law_equals_count(void **state)
{
    int n = 0;
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        char path[1024];
        const char *at = tu_model(models[i]);
        if (!at)
            continue;
        snprintf(path, sizeof path, "%s", at);
        check_model(path, false);
        if (strstr(models[i], "-mtp-"))
            check_model(path, true);
        n++;
    }
    if (!n) {
        print_message("skip: no shared models\n");
        skip();
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_law_equals_count),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
