/*
 * test_spec.c: the block drafters (src/spec/eagle3.c, dflash.c) against
 * llama.cpp's. The target decodes a prompt, the drafter observes the batch,
 * and its first proposal after the target's greedy token must be the one
 * llama-server (the pinned build, -md FILE --spec-type draft-eagle3 /
 * draft-dflash, -v, prompt "The quick brown fox jumps over the lazy dog.
 * The quick brown", temperature 0) logged as its first round's draft
 * candidates. Files that are not the drafter asked for are refused with
 * the reason.
 */
#include <stdio.h>
#include <string.h>

#include "hearth.h"
#include "spec/spec.h"
#include "util/testutil.h"

/* The prompt's tokens in both vocabularies (qwen35's tokenizer adds BOS 32013). */
static const hearth_token gpt2_prompt[]   = {464,   2068, 7586, 21831, 18045, 625, 262,
                                             16931, 3290, 13,   383,   2068,  7586};
static const hearth_token qwen35_prompt[] = {32013, 546, 3383,  10186, 267, 2652, 521,  12084,
                                             851,   254, 24656, 5014,  13,  428,  3383, 10186};

/*
 * Loads target, opens the drafter through spec_new (kind at draft_path,
 * drafts of 3), decodes prompt and returns the first proposal in out.
 */
static void first_proposal(const char *target, const char *draft_path, enum spec_block kind,
                           const hearth_token *prompt, int32_t n, hearth_token greedy,
                           hearth_token *out)
{
    char err[HEARTH_ERR_MAX];
    struct hearth_model_params mp = hearth_model_default_params();
    mp.n_threads                  = 1;
    struct hearth_model *m        = NULL;
    assert_int_equal(hearth_model_load(target, &mp, &m, err, sizeof err), HEARTH_OK);
    struct hearth_context_params cp = hearth_context_default_params();
    cp.n_ctx                        = 128;
    cp.n_batch                      = 64;
    cp.n_threads                    = 1;
    cp.n_keep_states                = 4;
    struct hearth_context *ctx      = NULL;
    assert_int_equal(hearth_context_new(m, &cp, &ctx, err, sizeof err), HEARTH_OK);
    struct spec_params p = {.block      = kind,
                            .block_path = draft_path,
                            .draft_max  = 3,
                            .draft_min  = 1,
                            .ngram_min  = 1,
                            .ngram_max  = 4};
    struct spec *sp      = NULL;
    if (spec_new(m, ctx, &p, 1, 128, 64, 1, &sp, err, sizeof err))
        fail_msg("spec_new: %s", err);
    hearth_token tok[32];
    int32_t pos[32], seq[32];
    for (int32_t i = 0; i < n; i++) {
        tok[i] = prompt[i];
        pos[i] = i;
        seq[i] = 0;
    }
    struct hearth_batch b = {n, tok, pos, seq, NULL};
    assert_int_equal(hearth_decode(ctx, &b, err, sizeof err), HEARTH_OK);
    const hearth_token *slot_tokens[1] = {tok};
    spec_observe(sp, &b, slot_tokens);
    const float *l    = hearth_get_logits(ctx, n - 1);
    hearth_token best = 0;
    for (int32_t v = 1; v < hearth_model_n_vocab(m); v++)
        if (l[v] > l[best])
            best = v;
    assert_int_equal(best, greedy); /* llama-server's first generated token */
    tok[n]            = best;
    struct spec_req r = {.slot = 0, .tokens = tok, .n_tokens = n + 1, .k = 3, .out = out};
    spec_propose(sp, &r, 1);
    assert_int_equal(r.n_out, 3);
    assert_int_equal(r.from, kind == SPEC_BLOCK_EAGLE3 ? SPEC_DRAFTER_EAGLE3 : SPEC_DRAFTER_DFLASH);
    spec_free(sp);
    hearth_context_free(ctx);
    hearth_model_free(m);
}

static void test_eagle3_drafts_as_llamacpp(void **state)
{
    (void)state;
    TU_MODEL_OR_SKIP(target, "tiny-qwen3-bpe-q8_0.gguf");
    TU_MODEL_OR_SKIP(draft, "tiny-eagle3-qwen3-bpe-q8_0.gguf");
    hearth_token out[3];
    first_proposal(target, draft, SPEC_BLOCK_EAGLE3, gpt2_prompt, 13, 28573, out);
    print_message("eagle3: %d %d %d (llama.cpp: 11875 15059 15059)\n", out[0], out[1], out[2]);
    assert_int_equal(out[0], 11875);
    assert_int_equal(out[1], 15059);
    assert_int_equal(out[2], 15059);
}

static void test_dflash_drafts_as_llamacpp(void **state)
{
    (void)state;
    TU_MODEL_OR_SKIP(target, "tiny-qwen35-bpe-q8_0.gguf");
    TU_MODEL_OR_SKIP(draft, "tiny-dflash-qwen35-bpe-q8_0.gguf");
    hearth_token out[3];
    first_proposal(target, draft, SPEC_BLOCK_DFLASH, qwen35_prompt, 16, 17471, out);
    print_message("dflash: %d %d %d (llama.cpp: 838 838 20240)\n", out[0], out[1], out[2]);
    assert_int_equal(out[0], 838);
    assert_int_equal(out[1], 838);
    assert_int_equal(out[2], 20240);
}

/* Each kind knows its file; the other kind's file, or a model, is refused with the reason. */
static void test_refusals(void **state)
{
    (void)state;
    TU_MODEL_OR_SKIP(target, "tiny-qwen3-bpe-q8_0.gguf");
    TU_MODEL_OR_SKIP(e3, "tiny-eagle3-qwen3-bpe-q8_0.gguf");
    TU_MODEL_OR_SKIP(df, "tiny-dflash-qwen35-bpe-q8_0.gguf");
    assert_int_equal(spec_block_of(e3), SPEC_BLOCK_EAGLE3);
    assert_int_equal(spec_block_of(df), SPEC_BLOCK_DFLASH);
    assert_int_equal(spec_block_of(target), SPEC_BLOCK_NONE);
    char err[HEARTH_ERR_MAX];
    struct hearth_model_params mp = hearth_model_default_params();
    mp.n_threads                  = 1;
    struct hearth_model *m        = NULL;
    assert_int_equal(hearth_model_load(target, &mp, &m, err, sizeof err), HEARTH_OK);
    struct hearth_context_params cp = hearth_context_default_params();
    cp.n_ctx                        = 64;
    struct hearth_context *ctx      = NULL;
    assert_int_equal(hearth_context_new(m, &cp, &ctx, err, sizeof err), HEARTH_OK);
    const struct {
        enum spec_block kind;
        const char *path, *want;
    } cases[] = {
        {SPEC_BLOCK_EAGLE3, df, "--spec eagle3 takes an EAGLE-3 drafter"},
        {SPEC_BLOCK_DFLASH, e3, "--spec dflash takes a DFlash drafter"},
        {SPEC_BLOCK_DFLASH, target, "this file is 'qwen3'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct spec_params p = {.block      = cases[i].kind,
                                .block_path = cases[i].path,
                                .draft_max  = 3,
                                .draft_min  = 1,
                                .ngram_min  = 1,
                                .ngram_max  = 4};
        struct spec *sp      = NULL;
        assert_int_not_equal(spec_new(m, ctx, &p, 1, 64, 64, 1, &sp, err, sizeof err), HEARTH_OK);
        print_message("%s\n", err);
        assert_non_null(strstr(err, cases[i].want));
        assert_null(sp);
    }
    /* a model load of a drafter's file says how to use it */
    struct hearth_model *dm = NULL;
    assert_int_not_equal(hearth_model_load(e3, &mp, &dm, err, sizeof err), HEARTH_OK);
    assert_non_null(strstr(err, "--model-draft FILE --spec eagle3"));
    hearth_context_free(ctx);
    hearth_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_eagle3_drafts_as_llamacpp),
        cmocka_unit_test(test_dflash_drafts_as_llamacpp),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
