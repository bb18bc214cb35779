/*
 * test_mtp.c: the model's own multi-token-prediction head (qwen35moe's
 * nextn block, hearth_model_params.mtp, hearth_mtp_decode). The head's
 * drafts on the shared tiny-qwen35moe-mtp file are held to llama.cpp's:
 * llama-server (b10587) with --spec-type draft-mtp and its debug log
 * printed the three tokens its head drafted at each of the first ten steps
 * of greedy decoding after the prompt below, and its head is mostly
 * rejected there, so each step drafts from the next position. A context
 * that keeps hidden states gives the same logits as one that does not.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hearth.h"
#include "util/engineutil.h"
#include "util/testutil.h"

#define MTP_FILE "tiny-qwen35moe-mtp-bpe-q8_0.gguf"

enum { STEPS = 10, DEPTH = 3, MAX_TOK = 64 };

/* What llama.cpp's head drafted at step s (the prompt, then one generated token per step). */
/* clang-format off */
static const hearth_token llama_drafts[STEPS][DEPTH] = {
    {10762, 15976, 9651},  {24649, 6654, 29138}, {25111, 10924, 11659}, {25651, 14902, 27097},
    {273, 9099, 12624},    {1074, 23315, 12330}, {5569, 6828, 28792},   {2969, 31909, 9986},
    {8791, 29832, 4586},   {240, 13046, 25529},
};
/* clang-format on */

static struct hearth_model *load(const char *path, bool mtp)
{
    struct hearth_model_params mp = hearth_model_default_params();
    mp.n_threads                  = 2;
    mp.mtp                        = mtp;
    struct hearth_model *m        = NULL;
    char err[HEARTH_ERR_MAX];
    assert_int_equal(hearth_model_load(path, &mp, &m, err, sizeof err), HEARTH_OK);
    return m;
}

static struct hearth_context *context(struct hearth_model *m, bool keep_hidden, bool mtp)
{
    struct hearth_context_params cp = hearth_context_default_params();
    cp.n_ctx                        = 256;
    cp.n_batch                      = 64;
    cp.keep_hidden                  = keep_hidden;
    cp.mtp                          = mtp;
    struct hearth_context *ctx      = NULL;
    char err[HEARTH_ERR_MAX];
    assert_int_equal(hearth_context_new(m, &cp, &ctx, err, sizeof err), HEARTH_OK);
    return ctx;
}

/* Decodes n tokens of sequence 0 from pos, every row's logits wanted. */
static void run(struct hearth_context *ctx, const hearth_token *tok, int32_t pos, int32_t n,
                const float *hidden)
{
    int32_t p[MAX_TOK], seq[MAX_TOK];
    int8_t lg[MAX_TOK];
    for (int32_t i = 0; i < n; i++) {
        p[i]   = pos + i;
        seq[i] = 0;
        lg[i]  = 1;
    }
    struct hearth_batch b = {n, tok, p, seq, lg};
    char err[HEARTH_ERR_MAX];
    enum hearth_status st = hidden ? hearth_mtp_decode(ctx, &b, hidden, err, sizeof err)
                                   : hearth_decode(ctx, &b, err, sizeof err);
    if (st != HEARTH_OK)
        fail_msg("decode: %s", err);
}

static void test_load(void **state)
{
    TU_MODEL_OR_SKIP(path, MTP_FILE);
    TU_MODEL_OR_SKIP(plain_path, "tiny-qwen35moe-bpe-q8_0.gguf");
    char err[HEARTH_ERR_MAX];
    struct hearth_context_params cp = hearth_context_default_params();
    cp.mtp                          = true;
    struct hearth_context *ctx      = NULL;

    /* without asking, the head is not loaded, and an MTP context says why it cannot be */
    struct hearth_model *m = load(path, false);
    assert_false(hearth_model_has_mtp(m));
    assert_int_equal(hearth_context_new(m, &cp, &ctx, err, sizeof err), HEARTH_EINVAL);
    assert_non_null(strstr(err, "loaded without it"));
    hearth_model_free(m);

    /* a file without a head loads as usual when asked */
    m = load(plain_path, true);
    assert_false(hearth_model_has_mtp(m));
    assert_int_equal(hearth_context_new(m, &cp, &ctx, err, sizeof err), HEARTH_EINVAL);
    assert_non_null(strstr(err, "has none"));
    hearth_model_free(m);

    m = load(path, true);
    assert_true(hearth_model_has_mtp(m));
    /* each context takes its own decode */
    struct hearth_context *head = context(m, false, true), *target = context(m, false, false);
    hearth_token t = 5;
    int32_t p = 0, s = 0;
    struct hearth_batch b = {1, &t, &p, &s, NULL};
    float h[4096]         = {0};
    assert_int_equal(hearth_decode(head, &b, err, sizeof err), HEARTH_EINVAL);
    assert_int_equal(hearth_mtp_decode(target, &b, h, err, sizeof err), HEARTH_EINVAL);
    assert_null(hearth_get_hidden(target, 0));
    hearth_context_free(head);
    hearth_context_free(target);
    hearth_model_free(m);
}

/* Keeping every row's hidden state changes no logit. */
/*
 * The head runs in a context of its own, so a prefill's operations
 * (hearth_model_prefill_ops, bench-engine's TOP/s) are the same whether it
 * was loaded or not.
 */
static void test_prefill_ops_leave_the_head_out(void **state)
{
    TU_MODEL_OR_SKIP(path, MTP_FILE);
    struct hearth_model *plain = load(path, false), *with = load(path, true);
    assert_true(hearth_model_has_mtp(with));
    const double a = hearth_model_prefill_ops(plain, 0, 32);
    const double b = hearth_model_prefill_ops(with, 0, 32);
    if (!(a > 0) || a != b)
        fail_msg("prefill ops %.17g without the head, %.17g with it", a, b);
    hearth_model_free(plain);
    hearth_model_free(with);
}

static void test_keep_hidden_same_logits(void **state)
{
    TU_MODEL_OR_SKIP(path, MTP_FILE);
    struct hearth_model *m   = load(path, true);
    struct hearth_context *a = context(m, false, false), *b = context(m, true, false);
    const int32_t nv = hearth_model_n_vocab(m), d = hearth_model_n_embd(m);
    hearth_token tok[12];
    for (int32_t i = 0; i < 12; i++)
        tok[i] = (hearth_token)((i * 7919 + 13) % nv);
    run(a, tok, 0, 9, NULL);
    run(b, tok, 0, 9, NULL);
    for (int32_t i = 0; i < 9; i++) {
        assert_memory_equal(hearth_get_logits(a, i), hearth_get_logits(b, i), nv * sizeof(float));
        assert_non_null(hearth_get_hidden(b, i));
    }
    assert_null(hearth_get_hidden(b, 9));
    run(a, tok + 9, 9, 3, NULL);
    run(b, tok + 9, 9, 3, NULL);
    for (int32_t i = 0; i < 3; i++)
        assert_memory_equal(hearth_get_logits(a, i), hearth_get_logits(b, i), nv * sizeof(float));
    /* the hidden state is the output norm's: not the raw residual, and finite */
    const float *h = hearth_get_hidden(b, 2);
    double ss      = 0;
    for (int32_t i = 0; i < d; i++)
        ss += (double)h[i] * h[i];
    assert_true(ss > 0 && ss < 1e12);
    hearth_context_free(a);
    hearth_context_free(b);
    hearth_model_free(m);
}

/*
 * Greedy decoding with the head following the target as the server's
 * drafter feeds it (src/spec/spec.c): each target row's token paired with
 * the hidden state one position before; at each step three chained drafts.
 */
static void test_drafts_match_llama_cpp(void **state)
{
    TU_MODEL_OR_SKIP(path, MTP_FILE);
    struct hearth_model *m     = load(path, true);
    struct hearth_context *tgt = context(m, true, false), *head = context(m, false, true);
    const int32_t nv = hearth_model_n_vocab(m), d = hearth_model_n_embd(m);
    static const char prompt[] = "def fibonacci(n):";
    hearth_token *ids          = NULL;
    size_t n_ids               = 0;
    char err[HEARTH_ERR_MAX];
    assert_int_equal(
        hearth_tokenize(m, prompt, strlen(prompt), true, true, &ids, &n_ids, err, sizeof err),
        HEARTH_OK);
    assert_int_equal(n_ids, 9);
    hearth_token tok[MAX_TOK];
    memcpy(tok, ids, n_ids * sizeof *ids);
    free(ids);
    int32_t n   = (int32_t)n_ids;
    float *hin  = calloc((size_t)MAX_TOK * d, sizeof *hin);
    float *pend = calloc((size_t)d, sizeof *pend); /* position 0 pairs with zeros */
    assert_non_null(hin);
    assert_non_null(pend);

    /* each target batch: its rows' hidden states, shifted by one, pair with its tokens in
     * the head; the last one waits for the next batch's first token */
    int32_t at = 0, len = n;
    for (int32_t s = 0; s <= STEPS; s++) {
        run(tgt, tok + at, at, len, NULL);
        tok[at + len] = tu_argmax(hearth_get_logits(tgt, len - 1), nv);
        memcpy(hin, pend, (size_t)d * sizeof *hin);
        for (int32_t i = 1; i < len; i++)
            memcpy(hin + (size_t)i * d, hearth_get_hidden(tgt, i - 1), (size_t)d * sizeof *hin);
        run(head, tok + at, at, len, hin);
        memcpy(pend, hearth_get_hidden(tgt, len - 1), (size_t)d * sizeof *pend);
        at += len;
        len = 1;
        if (s == STEPS)
            break;
        /* drafts from the newest token, not in the target yet, and the state before it */
        hearth_token draft[DEPTH], last = tok[at];
        memcpy(hin, pend, (size_t)d * sizeof *hin);
        for (int32_t j = 0; j < DEPTH; j++) {
            run(head, &last, at + j, 1, hin);
            draft[j] = last = tu_argmax(hearth_get_logits(head, 0), nv);
            memcpy(hin, hearth_get_hidden(head, 0), (size_t)d * sizeof *hin);
        }
        hearth_seq_truncate(head, 0, at);
        for (int32_t j = 0; j < DEPTH; j++)
            if (draft[j] != llama_drafts[s][j])
                fail_msg("step %d draft %d: %d, llama.cpp drafted %d", s, j, draft[j],
                         llama_drafts[s][j]);
    }
    free(hin);
    free(pend);
    hearth_context_free(tgt);
    hearth_context_free(head);
    hearth_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load),
        cmocka_unit_test(test_prefill_ops_leave_the_head_out),
        cmocka_unit_test(test_keep_hidden_same_logits),
        cmocka_unit_test(test_drafts_match_llama_cpp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
