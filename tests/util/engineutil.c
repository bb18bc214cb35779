/* engineutil.c: a model and a context for engine tests (engineutil.h). */
#include <stdlib.h>

#include "util/engineutil.h"
#include "util/testutil.h"

int tu_engine_open(struct tu_engine **out, const char *name,
                   const struct hearth_context_params *cp)
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
    struct hearth_model_params mp = hearth_model_default_params();
    mp.n_threads                  = 2;
    struct hearth_context_params p = cp ? *cp : hearth_context_default_params();
    if (hearth_model_load(path, &mp, &e->model, err, sizeof err) != HEARTH_OK ||
        hearth_context_new(e->model, &p, &e->ctx, err, sizeof err) != HEARTH_OK) {
        print_message("%s: %s\n", name, err);
        return -1;
    }
    e->n_vocab = hearth_model_n_vocab(e->model);
    return 0;
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
