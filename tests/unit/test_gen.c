/*
 * test_gen.c: src/generate/gen.c on the committed stories260K model. The
 * token step ends a generation where the rules say (end of generation unless
 * ignored, max_tokens, a full context) and grows its piece for any text;
 * the loop's greedy text is the engine's own greedy tokens, a second
 * prefill reuses what the first left cached, and a full context ends the
 * loop after the token at its last position.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "generate/gen.h"
#include "util/engineutil.h"
#include "util/testutil.h"

#define N_OUT 32

static int setup(void **state)
{
    struct hearth_context_params cp = hearth_context_default_params();
    cp.n_ctx                        = 64;
    return tu_engine_open((struct tu_engine **)state, "stories260K.gguf", &cp);
}

static int teardown(void **state)
{
    return tu_engine_close(*state);
}

static struct hearth_sampler *greedy(int32_t n_vocab)
{
    struct hearth_sampler_params sp = hearth_sampler_default_params();
    sp.temperature                  = 0;
    struct hearth_sampler *smp      = NULL;
    char err[HEARTH_ERR_MAX];
    assert_int_equal(hearth_sampler_new(&sp, n_vocab, &smp, err, sizeof err), HEARTH_OK);
    return smp;
}

static void test_token_rules(void **state)
{
    struct tu_engine *e = *state;
    TU_ENGINE_OR_SKIP(e);
    char *piece = NULL, want[64];
    size_t cap = 0, len = 0;
    const struct gen_rules r = {.n_ctx = 10, .max_tokens = 3};
    const hearth_token eos = hearth_token_eos(e->model), word = 300;
    assert_true(eos >= 0 && hearth_token_is_eog(e->model, eos));

    assert_int_equal(gen_token(e->model, eos, &r, 1, 5, &piece, &cap, &len), GEN_EOG);
    assert_int_equal(gen_token(e->model, word, &r, 1, 5, &piece, &cap, &len), GEN_GO);
    const size_t n = hearth_token_to_piece(e->model, word, want, sizeof want);
    assert_true(n > 0 && n <= sizeof want && cap >= n); /* grown from nothing */
    assert_int_equal(len, n);
    assert_memory_equal(piece, want, n);
    assert_int_equal(gen_token(e->model, word, &r, 3, 5, &piece, &cap, &len), GEN_LIMIT);
    assert_int_equal(gen_token(e->model, word, &r, 2, 10, &piece, &cap, &len), GEN_FULL);
    assert_int_equal(gen_token(e->model, word, &r, 2, 9, &piece, &cap, &len), GEN_GO);
    /* max_tokens ends the generation before a full context does */
    assert_int_equal(gen_token(e->model, word, &r, 3, 10, &piece, &cap, &len), GEN_LIMIT);
    const struct gen_rules all = {.n_ctx = 10, .max_tokens = -1, .ignore_eos = true};
    assert_int_equal(gen_token(e->model, eos, &all, 100, 5, &piece, &cap, &len), GEN_GO);
    free(piece);
}

struct text {
    char buf[4096];
    size_t len;
    long n_calls;
};

static bool keep(void *user, const char *s, size_t len)
{
    struct text *t = user;
    assert_true(t->len + len < sizeof t->buf);
    memcpy(t->buf + t->len, s, len);
    t->len += len;
    t->n_calls++;
    return true;
}

static void test_loop_is_greedy_and_reuses_the_cache(void **state)
{
    struct tu_engine *e = *state;
    TU_ENGINE_OR_SKIP(e);
    const char *prompt = "Once upon a time";
    hearth_token *ids  = NULL, out[N_OUT];
    size_t n           = 0;
    char err[HEARTH_ERR_MAX];
    assert_int_equal(
        hearth_tokenize(e->model, prompt, strlen(prompt), true, false, &ids, &n, err, sizeof err),
        HEARTH_OK);
    float *last = malloc((size_t)e->n_vocab * sizeof *last);
    assert_non_null(last);
    tu_engine_greedy(e, ids, (int32_t)n, (int32_t)n, out, N_OUT, last);
    struct text want = {0};
    for (int32_t i = 0; i < N_OUT && !hearth_token_is_eog(e->model, out[i]); i++) {
        char p[256];
        size_t m = hearth_token_to_piece(e->model, out[i], p, sizeof p);
        keep(&want, p, m);
    }

    const struct hearth_context_params dp = hearth_context_default_params();
    struct hearth_sampler *smp            = greedy(e->n_vocab);
    struct gen g;
    assert_int_equal(gen_init(&g, e->model, e->ctx, smp, 64, dp.n_batch, err, sizeof err),
                     HEARTH_OK);
    hearth_seq_truncate(e->ctx, 0, 0);
    assert_int_equal(gen_prefill(&g, ids, (int32_t)n, err, sizeof err), HEARTH_OK);
    struct text got = {0};
    enum gen_next end;
    assert_int_equal(gen_run(&g, (int32_t)want.n_calls, keep, &got, &end, err, sizeof err),
                     HEARTH_OK);
    assert_int_equal(end, GEN_LIMIT);
    assert_int_equal(got.len, want.len);
    assert_memory_equal(got.buf, want.buf, want.len);
    assert_int_equal(g.n_prefilled, (long)n);
    assert_int_equal(g.n_generated, want.n_calls);

    /* the prompt and the reply again, one token more: all but that one is cached (the last
     * generated token was never decoded, so it is prefilled too) */
    hearth_token more[64];
    const int32_t n_more = g.n_cached + 2;
    memcpy(more, g.cached, (size_t)g.n_cached * sizeof *more);
    more[g.n_cached]     = out[want.n_calls - 1];
    more[g.n_cached + 1] = 300;
    assert_int_equal(gen_prefill(&g, more, n_more, err, sizeof err), HEARTH_OK);
    assert_int_equal(g.n_prefilled, (long)n + 2);

    /* a full context: the token sampled for position 64 is the last, its text handed out */
    struct text rest = {0};
    assert_int_equal(gen_run(&g, -1, keep, &rest, &end, err, sizeof err), HEARTH_OK);
    print_message("after the second prefill: %ld tokens, then %s\n", rest.n_calls,
                  end == GEN_FULL ? "a full context" : "end of generation");
    if (end == GEN_FULL)
        assert_int_equal(rest.n_calls, 64 - n_more + 1);
    else
        assert_int_equal(end, GEN_EOG);
    assert_int_equal(gen_prefill(&g, more, 64, err, sizeof err), HEARTH_ERANGE);

    gen_free(&g);
    hearth_sampler_free(smp);
    free(last);
    free(ids);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_token_rules),
        cmocka_unit_test(test_loop_is_greedy_and_reuses_the_cache),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
