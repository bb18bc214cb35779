/*
 * fitcheck.c: the memory law's verdict on a serve or run configuration
 * before anything loads (src/fit/fit.c, as `hearth fit` prints it). A
 * configuration the host's free memory cannot hold is refused with the
 * figures, instead of being killed at its first long prompt; with -c max,
 * or no -c and a default that does not fit, the largest context that does
 * is taken and said.
 */
#include <stdio.h>

#include "cmd.h"
#include "fit/fit.h"

#define MIB(x) ((double)(x) / (1 << 20))

int fit_check(const struct fit_check *c, long *n_ctx)
{
    struct fit_params p  = {.model             = c->model,
                            .draft             = c->draft,
                            .n_ctx             = (int32_t)*n_ctx,
                            .ctx_max           = c->ctx_max,
                            .n_parallel        = (int32_t)c->parallel,
                            .n_ubatch          = (int32_t)c->ubatch,
                            .kv_block          = HEARTH_KV_BLOCK,
                            .kv_type           = (enum hearth_kv_type)c->ct->k,
                            .kv_type_v         = (enum hearth_kv_type)c->ct->v,
                            .cache_ram         = c->cache_ram,
                            .n_threads         = (int)c->threads,
                            .n_state_snapshots = (int32_t)c->checkpoints,
                            .n_dev             = 1,
                            .host_extra        = c->extra};
    const uint64_t avail = host_mem_available();
    if (!avail)
        return EXIT_OK; /* no figure to hold it to */
    p.dev[0] = (struct fit_device){.name = "ram", .capacity = avail, .host = true};
    struct fit_plan plan;
    char err[HEARTH_ERR_MAX];
    if (fit_plan(&p, &plan, err, sizeof err) != HEARTH_OK) {
        fprintf(stderr, "hearth %s: %s\n", c->cmd, err);
        return EXIT_RUNTIME;
    }
    if (!plan.fits && !c->ctx_max && *n_ctx <= 0) { /* the default: take what fits */
        p.ctx_max = true;
        if (fit_plan(&p, &plan, err, sizeof err) != HEARTH_OK) {
            fprintf(stderr, "hearth %s: %s\n", c->cmd, err);
            return EXIT_RUNTIME;
        }
    }
    const struct fit_use *u = &plan.use[0];
    if (!plan.fits) {
        char what[64];
        if (c->parallel == 1)
            snprintf(what, sizeof what, "a context of %d tokens does", plan.n_ctx);
        else
            snprintf(what, sizeof what, "%ld slots of %d tokens do", c->parallel, plan.n_ctx);
        fprintf(stderr,
                "hearth %s: %s not fit: %s (weights %.1f, K/V and cache %.1f, buffers %.1f, "
                "logits %.1f, the rest %.1f MiB); give a smaller -c%s (hearth fit says what "
                "fits)\n",
                c->cmd, what, plan.why, MIB(u->mem.b[MEM_WEIGHTS]), MIB(u->mem.b[MEM_KV]),
                MIB(u->mem.b[MEM_COMPUTE]), MIB(u->mem.b[MEM_OUTPUT]), MIB(u->mem.b[MEM_OTHER]),
                c->parallel == 1 ? "" : ", -np or --cache-ram");
        return EXIT_RUNTIME;
    }
    if (p.ctx_max) {
        fprintf(stderr,
                "hearth %s: --ctx-size %d: the largest that fits in %.1f MiB (%.1f MiB left)\n",
                c->cmd, plan.n_ctx, MIB(avail), (double)u->free / (1 << 20));
        *n_ctx = plan.n_ctx;
    }
    return EXIT_OK;
}
