/*
 * capture.c: the target's layer inputs for a block drafter (capture.h).
 * The stream is read from the stage running the layer (a device backend
 * copies it down), so the cost is one residual copy per named layer and
 * batch: 3 x n_batch x n_embd floats for EAGLE-3.
 */
#include <stdlib.h>

#include "model/capture.h"
#include "model/model.h"
#include "util/errfmt.h"

#define CAPTURE_MAX 8

struct capture {
    int32_t n;                  /* named layers, 1..CAPTURE_MAX */
    int32_t layer[CAPTURE_MAX]; /* their indices in the target */
    float *rows[CAPTURE_MAX];   /* [n_batch][n_embd] each, the last batch's inputs */
    int32_t n_rows;             /* rows of the last batch held */
};

enum hearth_status capture_layers(struct hearth_context *ctx, const int32_t *layers, int32_t n,
                                  char *err, size_t err_len)
{
    const struct hparams *hp = &ctx->model->hp;
    if (ctx->cap || n < 1 || n > CAPTURE_MAX)
        return fail(HEARTH_EINVAL, err, err_len,
                    "capture: %d layers named (1..%d, once per context)", n, CAPTURE_MAX);
    for (int32_t k = 0; k < n; k++)
        if (layers[k] < 0 || layers[k] >= hp->n_layer)
            return fail(HEARTH_EINVAL, err, err_len,
                        "the drafter reads the input of target layer %d, and the target has "
                        "layers 0..%d",
                        layers[k], hp->n_layer - 1);
    struct capture *c = calloc(1, sizeof *c);
    if (!c)
        return fail(HEARTH_ENOMEM, err, err_len, "capture: out of memory");
    c->n = n;
    for (int32_t k = 0; k < n; k++) {
        c->layer[k] = layers[k];
        c->rows[k]  = acct_calloc(&ctx->acct, MEM_COMPUTE, (size_t)ctx->p.n_batch * hp->n_embd,
                                  sizeof(float));
        if (!c->rows[k]) {
            capture_free(c);
            return fail(HEARTH_ENOMEM, err, err_len,
                        "capture: out of memory for %d rows of layer inputs", ctx->p.n_batch);
        }
    }
    ctx->cap = c;
    return HEARTH_OK;
}

const float *capture_row(const struct hearth_context *ctx, int32_t k, int32_t i)
{
    const struct capture *c = ctx->cap;
    if (!c || k < 0 || k >= c->n || i < 0 || i >= c->n_rows)
        return NULL;
    return c->rows[k] + (size_t)i * ctx->model->hp.n_embd;
}

void capture_layer_input(struct hearth_context *ctx, int32_t l, int32_t n)
{
    struct capture *c = ctx->cap;
    if (!c)
        return;
    for (int32_t k = 0; k < c->n; k++)
        if (c->layer[k] == l) {
            ctx->st->place->be->residual_get(ctx, n, c->rows[k]);
            c->n_rows = n;
        }
}

void capture_free(struct capture *c)
{
    if (!c)
        return;
    for (int32_t k = 0; k < c->n; k++)
        free(c->rows[k]);
    free(c);
}
