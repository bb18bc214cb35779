/*
 * test_forward.c: properties of the batched forward pass (src/model/forward.c)
 * on a real model: rows of different sequences in one batch do not affect each
 * other, chunked prefill equals one batch, a reused prefix gives the same
 * logits as recomputing it, and bad batches are refused without side effects.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hearth.h"
#include "model/model.h"
#include "util/engineutil.h"
#include "util/testutil.h"

static int setup(void **state)
{
    struct hearth_context_params cp = hearth_context_default_params();
    cp.n_ctx                        = 256;
    cp.n_seq_max                    = 3;
    cp.kv_block                     = 16;
    return tu_engine_open((struct tu_engine **)state, "stories260K.gguf", &cp);
}

static int teardown(void **state)
{
    return tu_engine_close(*state);
}

#define NEED_MODEL(f) TU_ENGINE_OR_SKIP(f)

static void tokens(hearth_token *t, int32_t n, int32_t salt)
{
    t[0] = 1;
    for (int32_t i = 1; i < n; i++)
        t[i] = 3 + (i * 37 + salt * 11) % 500;
}

static void test_interleaved_sequences_match_separate_runs(void **state)
{
    struct tu_engine *f = *state;
    NEED_MODEL(f);
    hearth_token a[40], b[25];
    tokens(a, 40, 1);
    tokens(b, 25, 2);
    float *la = malloc(f->n_vocab * sizeof(float)), *lb = malloc(f->n_vocab * sizeof(float));
    hearth_seq_truncate(f->ctx, 0, 0);
    tu_engine_run(f, 0, a, 40, 40, la);
    hearth_seq_truncate(f->ctx, 0, 0);
    tu_engine_run(f, 0, b, 25, 25, lb);
    hearth_seq_truncate(f->ctx, 0, 0);

    /* one batch holding both prompts, rows interleaved, seqs 1 and 2 */
    hearth_token tok[65];
    int32_t pos[65], seq[65];
    int8_t want[65] = {0};
    int32_t n = 0, ia = 0, ib = 0, row_a = -1, row_b = -1;
    while (ia < 40 || ib < 25) {
        if (ia < 40) {
            tok[n] = a[ia];
            pos[n] = ia;
            seq[n] = 1;
            if (ia == 39) {
                want[n] = 1;
                row_a   = n;
            }
            n++;
            ia++;
        }
        if (ib < 25) {
            tok[n] = b[ib];
            pos[n] = ib;
            seq[n] = 2;
            if (ib == 24) {
                want[n] = 1;
                row_b   = n;
            }
            n++;
            ib++;
        }
    }
    char err[HEARTH_ERR_MAX];
    struct hearth_batch bt = {n, tok, pos, seq, want};
    assert_int_equal(hearth_decode(f->ctx, &bt, err, sizeof err), HEARTH_OK);
    float da = tu_max_diff(la, hearth_get_logits(f->ctx, row_a), f->n_vocab);
    float db = tu_max_diff(lb, hearth_get_logits(f->ctx, row_b), f->n_vocab);
    print_message("interleaved vs alone: max |diff| %g and %g\n", da, db);
    assert_true(da == 0.0f && db == 0.0f);
    assert_null(hearth_get_logits(f->ctx, 0)); /* not asked for */
    hearth_seq_truncate(f->ctx, 1, 0);
    hearth_seq_truncate(f->ctx, 2, 0);
    free(la);
    free(lb);
}

static void test_chunked_prefill_matches_one_batch(void **state)
{
    struct tu_engine *f = *state;
    NEED_MODEL(f);
    hearth_token a[100];
    tokens(a, 100, 3);
    float *l1 = malloc(f->n_vocab * sizeof(float)), *l2 = malloc(f->n_vocab * sizeof(float));
    hearth_seq_truncate(f->ctx, 0, 0);
    tu_engine_run(f, 0, a, 100, 100, l1);
    hearth_seq_truncate(f->ctx, 0, 0);
    tu_engine_run(f, 0, a, 100, 7, l2);
    assert_true(tu_max_diff(l1, l2, f->n_vocab) == 0.0f);
    hearth_seq_truncate(f->ctx, 0, 0);
    free(l1);
    free(l2);
}

static void test_reused_prefix_gives_same_logits(void **state)
{
    struct tu_engine *f = *state;
    NEED_MODEL(f);
    hearth_token a[90];
    tokens(a, 90, 4);
    float *l1 = malloc(f->n_vocab * sizeof(float)), *l2 = malloc(f->n_vocab * sizeof(float));
    hearth_seq_truncate(f->ctx, 0, 0);
    hearth_seq_truncate(f->ctx, 1, 0);
    tu_engine_run(f, 0, a, 90, 90, l1);
    hearth_seq_publish(f->ctx, 0, a, 90);
    hearth_seq_truncate(f->ctx, 0, 0); /* released, but the blocks stay cached */
    int32_t reused = hearth_seq_reuse_prefix(f->ctx, 1, a, 90);
    assert_int_equal(reused, 80);
    assert_int_equal(hearth_seq_len(f->ctx, 1), 80);
    tu_engine_run(f, 1, a + 80, 10, 10, l2);
    assert_true(tu_max_diff(l1, l2, f->n_vocab) == 0.0f);
    int32_t used, cached, total;
    hearth_kv_stats(f->ctx, &used, &cached, &total);
    assert_int_equal(used, 6); /* 90 tokens in blocks of 16 */
    hearth_seq_truncate(f->ctx, 1, 0);
    free(l1);
    free(l2);
}

static void test_bad_batches_change_nothing(void **state)
{
    struct tu_engine *f = *state;
    NEED_MODEL(f);
    char err[HEARTH_ERR_MAX];
    hearth_seq_truncate(f->ctx, 0, 0);
    hearth_token t[2] = {1, 50};
    int32_t pos[2] = {0, 2}, seq[2] = {0, 0};
    struct hearth_batch b = {2, t, pos, seq, NULL};
    assert_int_equal(hearth_decode(f->ctx, &b, err, sizeof err), HEARTH_EINVAL);
    assert_non_null(strstr(err, "continues at 1"));
    assert_int_equal(hearth_seq_len(f->ctx, 0), 0);
    pos[1] = 1;
    t[1]   = 100000;
    assert_int_equal(hearth_decode(f->ctx, &b, err, sizeof err), HEARTH_EINVAL);
    t[1]   = 50;
    seq[1] = 7;
    assert_int_equal(hearth_decode(f->ctx, &b, err, sizeof err), HEARTH_EINVAL);
    seq[1] = 0;
    b.n    = 0;
    assert_int_equal(hearth_decode(f->ctx, &b, err, sizeof err), HEARTH_EINVAL);
    /* past the context: refused, nothing reserved */
    hearth_token big[256];
    int32_t bpos[256], bseq[256] = {0};
    tokens(big, 256, 5);
    for (int i = 0; i < 256; i++)
        bpos[i] = i;
    struct hearth_batch full = {256, big, bpos, bseq, NULL};
    assert_int_equal(hearth_decode(f->ctx, &full, err, sizeof err), HEARTH_OK);
    struct hearth_batch one = {1, big, bpos, bseq, NULL};
    bpos[0]                 = 256;
    assert_int_equal(hearth_decode(f->ctx, &one, err, sizeof err), HEARTH_EFULL);
    assert_int_equal(hearth_seq_len(f->ctx, 0), 256);
    hearth_seq_truncate(f->ctx, 0, 0);
}

/*
 * A context over e's model made now, so it takes the model's window as it
 * stands (a context keeps the window it was made with). The engine copy
 * *view runs on it; hearth_context_free(view->ctx) when done.
 */
static void context_now(const struct tu_engine *e, int32_t n_ctx, int32_t n_seq, int32_t n_batch,
                        struct tu_engine *view)
{
    char err[HEARTH_ERR_MAX];
    struct hearth_context_params cp = hearth_context_default_params();
    cp.n_ctx                        = n_ctx;
    cp.n_seq_max                    = n_seq;
    cp.n_batch                      = n_batch;
    cp.kv_block                     = 16;
    *view                           = *e;
    assert_int_equal(hearth_context_new(e->model, &cp, &view->ctx, err, sizeof err), HEARTH_OK);
}

/*
 * A sliding window hides tokens further back than n_swa at every layer, so
 * with 5 layers and a window of 4 the last token of a 48-token sequence sees
 * nothing of its first 16: two sequences differing only there agree on it,
 * and disagree once the window is off. The window layers' own ring of blocks
 * (a context of batches of 16) gives the same bits as the window as a mask
 * over the whole history (batches of up to 512, where a ring saves nothing).
 */
static void test_sliding_window_hides_old_tokens(void **state)
{
    struct tu_engine *f = *state;
    NEED_MODEL(f);
    hearth_token a[48], b[48];
    tokens(a, 48, 6);
    memcpy(b, a, sizeof a);
    for (int i = 1; i < 8; i++)
        b[i] = (hearth_token)(3 + (a[i] + 101) % 500);
    float *la = malloc(f->n_vocab * sizeof(float)), *lb = malloc(f->n_vocab * sizeof(float));
    float *lr          = malloc(f->n_vocab * sizeof(float));
    struct hparams *hp = &f->model->hp;
    struct tu_engine mask, ring;
    hp->n_swa = 4;
    for (int32_t l = 0; l < hp->n_layer; l++)
        f->model->layers[l].swa = true;
    context_now(f, 256, 1, 512, &mask);
    context_now(f, 256, 1, 16, &ring);
    hp->n_swa = 0;
    for (int32_t l = 0; l < hp->n_layer; l++)
        f->model->layers[l].swa = false;
    assert_int_equal(mask.ctx->kv.pool[1].n_layer, 0);
    assert_int_equal(ring.ctx->kv.pool[1].n_layer, 5); /* every layer: no full pool at all */
    assert_int_equal(ring.ctx->kv.pool[0].n_layer, 0);
    tu_engine_run(&mask, 0, a, 48, 16, la);
    hearth_seq_truncate(mask.ctx, 0, 0);
    tu_engine_run(&mask, 0, b, 48, 16, lb);
    const float with_window = tu_max_diff(la, lb, f->n_vocab);
    tu_engine_run(&ring, 0, a, 48, 16, lr);
    const float ring_vs_mask = tu_max_diff(la, lr, f->n_vocab);
    hearth_seq_truncate(f->ctx, 0, 0);
    tu_engine_run(f, 0, a, 48, 16, la);
    hearth_seq_truncate(f->ctx, 0, 0);
    tu_engine_run(f, 0, b, 48, 16, lb);
    const float without = tu_max_diff(la, lb, f->n_vocab);
    hearth_seq_truncate(f->ctx, 0, 0);
    print_message("logit diff: %g with a 4-token window, %g without; ring vs mask %g\n",
                  with_window, without, ring_vs_mask);
    assert_true(with_window == 0.0f);
    assert_true(without > 0.0f);
    assert_true(ring_vs_mask == 0.0f);
    hearth_context_free(mask.ctx);
    hearth_context_free(ring.ctx);
    free(la);
    free(lb);
    free(lr);
}

/* ------------------------------------------------------------- gemma3 --- */

/*
 * tiny-gemma3 (window 32, pattern 3): the per-layer plan llama.cpp derives
 * from the file, and greedy generation that crosses the window giving the
 * same tokens and bit-identical logits whether the prompt is prefilled in
 * one batch or fed one token at a time.
 */
static int gemma_setup(void **state)
{
    struct hearth_context_params cp = hearth_context_default_params();
    cp.n_ctx                        = 160;
    cp.kv_block                     = 16;
    return tu_engine_open((struct tu_engine **)state, "tiny-gemma3-spm-q8_0.gguf", &cp);
}

/*
 * tiny-gemma4 runs the same window tests: window 32 over layers 0, 1, 3
 * and 4, of which 3 and 4 read layer 1's K/V and keep none (layer 5
 * reads layer 2's), so its window pool holds two layers.
 */
static int gemma4_setup(void **state)
{
    struct hearth_context_params cp = hearth_context_default_params();
    cp.n_ctx                        = 160;
    cp.kv_block                     = 16;
    return tu_engine_open((struct tu_engine **)state, "tiny-gemma4-spm-q8_0.gguf", &cp);
}

static int gemma_teardown(void **state)
{
    return tu_engine_close(*state);
}

#define NEED_GEMMA(f) TU_ENGINE_OR_SKIP(f)

/* The window layers that keep K/V of their own: the window pool's layers. */
static int32_t window_kv_layers(const struct hearth_model *m)
{
    int32_t n = 0;
    for (int32_t i = 0; i < m->hp.n_layer; i++)
        n += m->layers[i].swa && !m->layers[i].kv_reuse;
    return n;
}

/*
 * tiny-gemma4's plan as llama.cpp derives it: window layers of 32-wide
 * heads, 2 KV heads, base 10000; full layers 2 and 5 of 64-wide heads, 1
 * KV head, no V projection, rope_freqs; layers 3..5 reuse layers 1, 1, 2
 * and project no K; the FFN doubles from layer 3. The cache keeps K/V for
 * layers 0..2 only, rows 64 wide.
 */
static void test_gemma4_layer_plan(void **state)
{
    struct tu_engine *f = *state;
    NEED_GEMMA(f);
    const struct hparams *hp = &f->model->hp;
    assert_int_equal(hp->n_layer, 6);
    assert_int_equal(hp->n_swa, 32);
    assert_int_equal(hp->n_embd_pl, 16);
    static const int32_t from[6] = {0, 0, 0, 1, 1, 2};
    for (int32_t i = 0; i < hp->n_layer; i++) {
        const struct layer *L = &f->model->layers[i];
        const bool full       = i % 3 == 2;
        assert_int_equal(L->swa, !full);
        assert_int_equal(layer_head_dim(hp, L), full ? 64 : 32);
        assert_int_equal(layer_n_head_kv(hp, L), full ? 1 : 2);
        assert_true(L->rope_base == (full ? 1000000.0f : 10000.0f));
        assert_int_equal(L->rope_freqs != NULL, full);
        assert_int_equal(L->kv_reuse, i >= 3);
        if (L->kv_reuse) {
            assert_int_equal(L->kv_from, from[i]);
            assert_null(L->wk.data);
        } else {
            assert_int_equal(L->wv.data == NULL, full);
            assert_non_null(L->v_norm);
        }
        assert_int_equal(L->w_gate.n_out, i >= 3 ? 1024 : 512);
        assert_true(L->out_scale != 0.0f);
        assert_non_null(L->ple_norm);
    }
    assert_true(hp->q_scale == 1.0f);
    assert_true(hp->embd_scale == 16.0f);
    assert_true(hp->logit_softcap == 10.0f);
    const struct kv_cache *kv = &f->ctx->kv;
    assert_int_equal(kv->kv_dim, 64);
    assert_int_equal(kv->pool[0].n_layer + kv->pool[1].n_layer, 3);
    for (int32_t i = 3; i < 6; i++)
        assert_int_equal(kv->group[i], KV_NONE);
}

static void test_gemma3_layer_plan(void **state)
{
    struct tu_engine *f = *state;
    NEED_GEMMA(f);
    const struct hparams *hp = &f->model->hp;
    assert_int_equal(hp->n_layer, 6);
    assert_int_equal(hp->n_swa, 32);
    for (int32_t i = 0; i < hp->n_layer; i++) {
        const struct layer *L = &f->model->layers[i];
        /* every third layer, counting from the third, attends globally */
        assert_int_equal(L->swa, i % 3 != 2);
        assert_true(L->rope_base == 10000.0f);
        assert_non_null(L->post_attn_norm);
        assert_non_null(L->post_ffn_norm);
        assert_non_null(L->q_norm);
    }
    assert_true(hp->q_scale == 0.125f);   /* 1/sqrt(head_dim 64) */
    assert_true(hp->embd_scale == 16.0f); /* sqrt(n_embd 256) */
    assert_true(hp->logit_softcap == 0.0f);
    assert_true(hp->ffn_gelu);
}

/* Feeds tok[0..n) as batches of `chunk`, then generates n_gen tokens greedily; returns the
 * logits after the prompt in `first`. */
static void gemma_greedy(struct tu_engine *f, const hearth_token *tok, int32_t n, int32_t chunk,
                         int32_t n_gen, hearth_token *out, float *first)
{
    char err[HEARTH_ERR_MAX];
    const int32_t n_vocab = hearth_model_n_vocab(f->model);
    int32_t pos[64], seq[64] = {0};
    hearth_seq_truncate(f->ctx, 0, 0);
    for (int32_t i = 0; i < n; i += chunk) {
        const int32_t m = n - i < chunk ? n - i : chunk;
        for (int32_t j = 0; j < m; j++)
            pos[j] = i + j;
        struct hearth_batch b = {m, tok + i, pos, seq, NULL};
        assert_int_equal(hearth_decode(f->ctx, &b, err, sizeof err), HEARTH_OK);
    }
    const float *l = hearth_get_logits(f->ctx, (n - 1) % chunk);
    memcpy(first, l, (size_t)n_vocab * sizeof(float));
    for (int32_t g = 0; g < n_gen; g++) {
        hearth_token best = 0;
        for (hearth_token v = 1; v < n_vocab; v++)
            best = l[v] > l[best] ? v : best;
        out[g]                = best;
        pos[0]                = n + g;
        struct hearth_batch b = {1, &out[g], pos, seq, NULL};
        assert_int_equal(hearth_decode(f->ctx, &b, err, sizeof err), HEARTH_OK);
        l = hearth_get_logits(f->ctx, 0);
    }
    hearth_seq_truncate(f->ctx, 0, 0);
}

static void test_gemma3_prefill_matches_token_by_token(void **state)
{
    struct tu_engine *f = *state;
    NEED_GEMMA(f);
    const int32_t n_vocab = hearth_model_n_vocab(f->model);
    hearth_token prompt[48], a[64], b[64];
    /* longer than the window of 32, and so is every generated step; a prompt after which
     * each model's random weights do not repeat one token throughout */
    tokens(prompt, 48, strcmp(f->model->arch, "gemma4") ? 2 : 4);
    float *la = malloc((size_t)n_vocab * sizeof(float)),
          *lb = malloc((size_t)n_vocab * sizeof(float));
    gemma_greedy(f, prompt, 48, 48, 64, a, la);
    gemma_greedy(f, prompt, 48, 1, 64, b, lb);
    int32_t runs = 1;
    for (int32_t i = 1; i < 64; i++)
        runs += a[i] != a[i - 1];
    /* the window is in effect: attending to the whole prompt everywhere changes the logits */
    hearth_token c[1];
    float *lc = malloc((size_t)n_vocab * sizeof(float));
    struct tu_engine full;
    f->model->hp.n_swa = 0;
    context_now(f, 160, 1, 512, &full);
    f->model->hp.n_swa = 32;
    gemma_greedy(&full, prompt, 48, 48, 0, c, lc);
    hearth_context_free(full.ctx);
    print_message("prompt logits max |diff| %g; %d runs of one token in 64 generated; "
                  "%g without the window\n",
                  tu_max_diff(la, lb, n_vocab), runs, tu_max_diff(la, lc, n_vocab));
    assert_true(tu_max_diff(la, lb, n_vocab) == 0.0f);
    assert_memory_equal(a, b, sizeof a);
    assert_true(runs > 1);
    assert_true(tu_max_diff(la, lc, n_vocab) > 0.0f);
    free(lc);
    free(la);
    free(lb);
}

/*
 * A context of batches of up to 64 over 512 tokens gives the window layers
 * a ring of 14 blocks of 16 (twice the 7 a sequence can reach), where one
 * of batches of up to 512 masks the whole history (a ring would save
 * nothing). Over a prompt of 300 tokens (more than nine windows) and 100
 * greedy steps both give the same bits, and the ring holds only the window.
 */
static void test_gemma3_window_ring_matches_masked_history(void **state)
{
    struct tu_engine *f = *state;
    NEED_GEMMA(f);
    const int32_t n_vocab = hearth_model_n_vocab(f->model);
    hearth_token prompt[300], a[100], b[100], c[100];
    tokens(prompt, 300, 5);
    float *la = malloc((size_t)n_vocab * sizeof(float)),
          *lb = malloc((size_t)n_vocab * sizeof(float));
    float *lc = malloc((size_t)n_vocab * sizeof(float));
    struct tu_engine mask, ring;
    context_now(f, 512, 1, 512, &mask);
    context_now(f, 512, 1, 64, &ring);
    const struct kv_cache *rk = &ring.ctx->kv, *mk = &mask.ctx->kv;
    assert_int_equal(mk->pool[1].n_layer, 0);
    assert_int_equal(rk->pool[1].n_layer, window_kv_layers(f->model));
    assert_int_equal(rk->pool[1].n_blocks, 14);
    gemma_greedy(&mask, prompt, 300, 48, 100, a, la);
    gemma_greedy(&ring, prompt, 300, 48, 100, b, lb);
    gemma_greedy(&ring, prompt, 300, 1, 100, c, lc);
    print_message("ring vs mask: prompt logits max |diff| %g; token by token %g\n",
                  tu_max_diff(la, lb, n_vocab), tu_max_diff(lb, lc, n_vocab));
    assert_true(tu_max_diff(la, lb, n_vocab) == 0.0f);
    assert_true(tu_max_diff(lb, lc, n_vocab) == 0.0f);
    assert_memory_equal(a, b, sizeof a);
    assert_memory_equal(b, c, sizeof b);
    /* 300 tokens in: the window layers hold blocks 16..18 (the query at 288 sees from 257) */
    tu_engine_run(&ring, 0, prompt, 300, 48, la);
    assert_int_equal(rk->seqs[0].t[1].n_released, 16);
    assert_int_equal(rk->pool[1].n_blocks - rk->pool[1].n_free, 3);
    assert_int_equal(rk->pool[0].n_blocks - rk->pool[0].n_free, 19);
    const size_t ring_len = rk->pool[0].mem_len + rk->pool[1].mem_len;
    print_message("KV bytes at n_ctx 512: %zu with the ring, %zu masking the history\n", ring_len,
                  mk->pool[0].mem_len);
    assert_true(ring_len < mk->pool[0].mem_len);
    hearth_context_free(mask.ctx);
    hearth_context_free(ring.ctx);
    free(la);
    free(lb);
    free(lc);
}

/* Feeds tok[0..n) to seq from its end in batches of 48, publishing after each as the server does.
 */
static void run_published(struct tu_engine *e, int32_t seq, const hearth_token *tok, int32_t n,
                          float *last)
{
    for (int32_t i = hearth_seq_len(e->ctx, seq); i < n; i += 48) {
        const int32_t m = n - i < 48 ? n - i : 48;
        tu_engine_run(e, seq, tok + i, m, 48, last);
        hearth_seq_publish(e->ctx, seq, tok, i + m);
    }
}

/*
 * Prefix reuse on the ring: the whole 300-token prompt resumes at 288, a
 * prompt sharing its first 200 tokens at 192, whose window (161..191) is
 * cached; both continue to the same bits as computing everything. Cutting
 * back inside the window keeps the sequence; behind it, empties it.
 */
static void test_gemma3_reuse_and_truncate_on_the_ring(void **state)
{
    struct tu_engine *f = *state;
    NEED_GEMMA(f);
    const int32_t n_vocab = hearth_model_n_vocab(f->model);
    hearth_token a[300], b[300];
    tokens(a, 300, 7);
    memcpy(b, a, sizeof a);
    for (int32_t i = 200; i < 300; i++)
        b[i] = (hearth_token)(3 + (a[i] + 55) % 500);
    float *l1 = malloc((size_t)n_vocab * sizeof(float)),
          *l2 = malloc((size_t)n_vocab * sizeof(float));
    struct tu_engine ring;
    context_now(f, 512, 2, 64, &ring);
    assert_int_equal(ring.ctx->kv.pool[1].n_layer, window_kv_layers(f->model));

    run_published(&ring, 0, a, 300, l1);
    hearth_seq_truncate(ring.ctx, 0, 0);
    assert_int_equal(hearth_seq_reuse_prefix(ring.ctx, 1, a, 300), 288);
    run_published(&ring, 1, a, 300, l2);
    const float d_whole = tu_max_diff(l1, l2, n_vocab);
    hearth_seq_truncate(ring.ctx, 1, 0);
    /* b's block 12 (192..207) differs from a's; the resume at 192 needs window blocks 10, 11 */
    assert_int_equal(hearth_seq_reuse_prefix(ring.ctx, 1, b, 300), 192);
    run_published(&ring, 1, b, 300, l2);
    hearth_seq_truncate(ring.ctx, 1, 0);
    run_published(&ring, 0, b, 300, l1); /* from scratch */
    const float d_shared = tu_max_diff(l1, l2, n_vocab);
    hearth_seq_truncate(ring.ctx, 0, 0);
    print_message("reused prefix then continued vs computed whole: max |diff| %g (288), %g (192)\n",
                  d_whole, d_shared);
    assert_true(d_whole == 0.0f);
    assert_true(d_shared == 0.0f);

    /* cut back inside the window and redo the last 10 tokens; cut behind it: empty */
    run_published(&ring, 0, a, 300, l1);
    hearth_seq_truncate(ring.ctx, 0, 290);
    assert_int_equal(hearth_seq_len(ring.ctx, 0), 290);
    tu_engine_run(&ring, 0, a + 290, 10, 10, l2);
    assert_true(tu_max_diff(l1, l2, n_vocab) == 0.0f);
    hearth_seq_truncate(ring.ctx, 0, 100);
    assert_int_equal(hearth_seq_len(ring.ctx, 0), 0);
    hearth_context_free(ring.ctx);
    free(l1);
    free(l2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_interleaved_sequences_match_separate_runs),
        cmocka_unit_test(test_chunked_prefill_matches_one_batch),
        cmocka_unit_test(test_reused_prefix_gives_same_logits),
        cmocka_unit_test(test_bad_batches_change_nothing),
        cmocka_unit_test(test_sliding_window_hides_old_tokens),
    };
    const struct CMUnitTest gemma3[] = {
        cmocka_unit_test(test_gemma3_layer_plan),
        cmocka_unit_test(test_gemma3_prefill_matches_token_by_token),
        cmocka_unit_test(test_gemma3_window_ring_matches_masked_history),
        cmocka_unit_test(test_gemma3_reuse_and_truncate_on_the_ring),
    };
    const struct CMUnitTest gemma4[] = {
        cmocka_unit_test(test_gemma4_layer_plan),
        cmocka_unit_test(test_gemma3_prefill_matches_token_by_token),
        cmocka_unit_test(test_gemma3_window_ring_matches_masked_history),
        cmocka_unit_test(test_gemma3_reuse_and_truncate_on_the_ring),
    };
    int failed = cmocka_run_group_tests_name("forward", tests, setup, teardown);
    failed += cmocka_run_group_tests_name("forward_gemma3", gemma3, gemma_setup, gemma_teardown);
    return failed +
           cmocka_run_group_tests_name("forward_gemma4", gemma4, gemma4_setup, gemma_teardown);
}
