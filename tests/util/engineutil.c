/* engineutil.c: a model and a context for engine tests (engineutil.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/engineutil.h"
#include "util/testutil.h"

int tu_engine_open(struct tu_engine **out, const char *name, const struct hearth_context_params *cp)
{
    struct tu_engine *e = calloc(1, sizeof *e);
    *out                = e;
    if (!e)
        return -1;
    e->name          = name;
    const char *path = tu_model(name);
    if (!path)
        return 0;
    char err[HEARTH_ERR_MAX];
    struct hearth_model_params mp  = hearth_model_default_params();
    mp.n_threads                   = 2;
    struct hearth_context_params p = cp ? *cp : hearth_context_default_params();
    if (hearth_model_load(path, &mp, &e->model, err, sizeof err) != HEARTH_OK ||
        hearth_context_new(e->model, &p, &e->ctx, err, sizeof err) != HEARTH_OK) {
        print_message("%s: %s\n", name, err);
        return -1;
    }
    e->n_vocab = hearth_model_n_vocab(e->model);
    return 0;
}

struct hearth_model *tu_model_load(const char *name)
{
    const char *path = tu_model(name);
    if (!path)
        return NULL;
    char err[HEARTH_ERR_MAX];
    struct hearth_model_params mp = hearth_model_default_params();
    mp.n_threads                  = 1;
    struct hearth_model *model    = NULL;
    if (hearth_model_load(path, &mp, &model, err, sizeof err) != HEARTH_OK)
        print_message("%s: %s\n", name, err);
    return model;
}

int tu_engine_close(struct tu_engine *e)
{
    if (!e)
        return 0;
    hearth_context_free(e->ctx);
    if (e->model)
        hearth_model_free(e->model);
    free(e);
    return 0;
}

void tu_engine_run(struct tu_engine *e, int32_t seq, const hearth_token *tok, int32_t n,
                   int32_t chunk, float *last)
{
    char err[HEARTH_ERR_MAX];
    const int32_t p0 = hearth_seq_len(e->ctx, seq);
    int32_t pos[256], sq[256];
    assert_true(chunk >= 1 && chunk <= 256);
    for (int32_t i = 0; i < n; i += chunk) {
        const int32_t m = n - i < chunk ? n - i : chunk;
        for (int32_t j = 0; j < m; j++) {
            pos[j] = p0 + i + j;
            sq[j]  = seq;
        }
        struct hearth_batch b = {m, tok + i, pos, sq, NULL};
        if (hearth_decode(e->ctx, &b, err, sizeof err) != HEARTH_OK)
            fail_msg("decode of %d rows at %d into sequence %d: %s", m, p0 + i, seq, err);
    }
    memcpy(last, hearth_get_logits(e->ctx, (n - 1) % chunk), (size_t)e->n_vocab * sizeof(float));
}

void tu_engine_greedy(struct tu_engine *e, const hearth_token *prompt, int32_t n, int32_t chunk,
                      hearth_token *out, int32_t n_out, float *last)
{
    hearth_seq_truncate(e->ctx, 0, 0);
    tu_engine_run(e, 0, prompt, n, chunk, last);
    for (int32_t i = 0; i < n_out; i++) {
        out[i] = tu_argmax(last, e->n_vocab);
        tu_engine_run(e, 0, &out[i], 1, 1, last);
    }
}

void tu_tokens(hearth_token *t, int32_t n, int32_t salt)
{
    for (int32_t i = 0; i < n; i++)
        t[i] = 100 + (i * 7919 + salt * 104729) % 30000;
}

hearth_token tu_argmax(const float *l, int32_t n)
{
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (l[i] > l[best])
            best = i;
    return best;
}

float tu_max_diff(const float *a, const float *b, int32_t n)
{
    float m = 0;
    for (int32_t i = 0; i < n; i++)
        m = fmaxf(m, fabsf(a[i] - b[i]));
    return m;
}
