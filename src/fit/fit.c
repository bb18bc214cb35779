/*
 * fit.c: the planner (fit.h). Every figure is the memory law's
 * (src/model/memlaw.c) for a model read from its header alone; this file
 * only decides where the layers go and how large a context can be.
 *
 * Placement follows hearth's own (model_place): with GPUs, the last layers
 * go on them in order, the output on the last one, and the first layers
 * stay on the host when the GPUs cannot hold them all (a smaller -ngl). The
 * GPUs' share is split in proportion to their capacity, as llama.cpp's
 * default tensor split, or, with balance, so that they keep the same free
 * memory. A draft model runs on the host.
 */
#include "fit/fit.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/memlaw.h"
#include "model/model.h"
#include "spec/dflash.h"
#include "spec/eagle3.h"
#include "spec/spec.h"
#include "util/errfmt.h"

#define MIB(x) ((double)(x) / (1 << 20))

struct planner {
    const struct fit_params *p;
    struct hearth_model *m, *draft;
    enum spec_block block; /* p->draft is a block drafter's file (no model of its own) */
    int32_t n_gpu;         /* devices after the host */
};

/* The context parameters serve makes for p at n_ctx tokens a slot (sched.c). */
static struct hearth_context_params ctx_params(const struct fit_params *p, int32_t n_ctx,
                                               bool recurrent)
{
    struct hearth_context_params cp = hearth_context_default_params();
    cp.n_ctx                        = n_ctx;
    cp.n_seq_max                    = p->n_parallel;
    cp.n_batch                      = p->n_ubatch;
    cp.kv_block                     = p->kv_block;
    cp.kv_type                      = p->kv_type;
    cp.kv_type_v                    = p->kv_type_v;
    cp.n_threads                    = p->n_threads;
    cp.n_state_snapshots            = recurrent ? p->n_state_snapshots : 0;
    cp.cache_bytes                  = p->cache_ram > 0 ? p->cache_ram : -1;
    return cp;
}

/*
 * Each device's free memory from what it holds, and whether the plan fits:
 * every device keeps floor free; why names the first that does not.
 */
static void judge(struct fit_plan *out, uint64_t floor)
{
    out->fits = true;
    for (int32_t i = 0; i < out->n_dev; i++) {
        struct fit_use *u = &out->use[i];
        u->free           = (int64_t)u->dev.capacity - (int64_t)mem_acct_total(&u->mem);
        if (out->fits && u->free < (int64_t)floor) {
            out->fits = false;
            snprintf(out->why, sizeof out->why,
                     "%s would hold %.1f MiB of its %.1f MiB, leaving %.1f MiB free where the "
                     "floor is %.1f MiB",
                     u->dev.name, MIB(mem_acct_total(&u->mem)), MIB(u->dev.capacity), MIB(u->free),
                     MIB(floor));
        }
    }
}

/*
 * Fills out for n_ctx with n_gl layers on the GPUs, split[i] of them on GPU
 * i (summing to n_gl); the output on the last GPU when every layer is on
 * one.
 */
static void evaluate(const struct planner *pl, int32_t n_ctx, int32_t n_gl, const int32_t *split,
                     struct fit_plan *out)
{
    const struct fit_params *p = pl->p;
    const int32_t n_layer      = pl->m->hp.n_layer;
    struct memlaw_stage st[FIT_MAX_DEVICES + 1];
    int32_t dev_of[FIT_MAX_DEVICES + 1], n_st = 0, l = 0;
    memset(out, 0, sizeof *out);
    out->n_ctx = n_ctx;
    out->n_dev = p->n_dev;
    for (int32_t i = 0; i < p->n_dev; i++)
        out->use[i].dev = p->dev[i];
    if (n_gl < n_layer) { /* the host's layers first */
        st[n_st]       = (struct memlaw_stage){.kind = BACKEND_CPU, .l0 = 0, .l1 = n_layer - n_gl};
        dev_of[n_st++] = 0;
        l              = n_layer - n_gl;
    }
    for (int32_t g = 0; g < pl->n_gpu; g++)
        if (split[g] > 0) {
            st[n_st] = (struct memlaw_stage){
                .kind = BACKEND_GPU, .device = g, .l0 = l, .l1 = l + split[g]};
            dev_of[n_st++] = 1 + g;
            l += split[g];
        }
    for (int32_t i = 0; i < n_st; i++) {
        out->use[dev_of[i]].l0 = st[i].l0;
        out->use[dev_of[i]].l1 = st[i].l1;
    }
    out->use[dev_of[n_st - 1]].output = true;
    struct mem_acct w[FIT_MAX_DEVICES + 1], c[FIT_MAX_DEVICES + 1], host;
    struct hearth_context_params cp = ctx_params(p, n_ctx, pl->m->hp.recurrent);
    memset(&host, 0, sizeof host);
    memlaw_weights(pl->m, st, n_st, w, &host);
    mem_acct_add(&out->use[0].mem, &host);
    memlaw_context(pl->m, &cp, st, n_st, c, &host);
    mem_acct_add(&out->use[0].mem, &host);
    for (int32_t i = 0; i < n_st; i++) {
        mem_acct_add(&out->use[dev_of[i]].mem, &w[i]);
        mem_acct_add(&out->use[dev_of[i]].mem, &c[i]);
    }
    out->use[0].mem.b[MEM_OTHER] +=
        memlaw_process(pl->m, p->n_parallel, n_ctx, p->n_threads) + p->host_extra;
    if (pl->draft) { /* serve's draft context: the slots' shape, default K/V types */
        const struct memlaw_stage ds = {.kind = BACKEND_CPU, .l0 = 0, .l1 = pl->draft->hp.n_layer};
        struct hearth_context_params dp = hearth_context_default_params();
        dp.n_ctx                        = n_ctx;
        dp.n_seq_max                    = p->n_parallel;
        dp.n_batch                      = p->n_ubatch;
        dp.n_threads                    = p->n_threads;
        struct mem_acct dw, dc;
        memset(&host, 0, sizeof host);
        memlaw_weights(pl->draft, &ds, 1, &dw, &host);
        mem_acct_add(&out->use[0].mem, &host);
        memlaw_context(pl->draft, &dp, &ds, 1, &dc, &host);
        mem_acct_add(&out->use[0].mem, &host);
        mem_acct_add(&out->use[0].mem, &dw);
        mem_acct_add(&out->use[0].mem, &dc);
    }
    if (pl->block) { /* on the host: its weights mapped, its cache and the target rows it reads */
        uint64_t bw = 0, bb = 0;
        char why[HEARTH_ERR_MAX];
        if ((pl->block == SPEC_BLOCK_EAGLE3 ? eagle3_bytes : dflash_bytes)(
                p->draft, p->n_parallel, n_ctx, p->n_ubatch, &bw, &bb, why, sizeof why) ==
            HEARTH_OK) {
            out->use[0].mem.b[MEM_WEIGHTS] += bw;
            out->use[0].mem.b[MEM_KV] += bb;
        }
    }
    judge(out, p->floor);
}

/* n_gl layers over the GPUs in proportion to their capacity (the last takes what rounds off). */
static void split_proportional(const struct planner *pl, int32_t n_gl, int32_t *split)
{
    uint64_t total = 0;
    for (int32_t g = 0; g < pl->n_gpu; g++)
        total += pl->p->dev[1 + g].capacity;
    int32_t left = n_gl;
    for (int32_t g = 0; g < pl->n_gpu; g++) {
        const int32_t n = g == pl->n_gpu - 1
                              ? left
                              : (int32_t)((double)n_gl * (double)pl->p->dev[1 + g].capacity /
                                              (double)(total ? total : 1) +
                                          0.5);
        split[g]        = n < left ? n : left;
        left -= split[g];
    }
}

/*
 * n_gl layers over the GPUs so that the least free memory among them is as
 * large as it can be: for a target t, each GPU in turn takes layers while it
 * keeps t free (the last takes the rest); the largest t that places them all
 * and leaves the last GPU t as well, found by bisection.
 */
static void split_balanced(const struct planner *pl, int32_t n_ctx, int32_t n_gl, int32_t *split)
{
    split_proportional(pl, n_gl, split);
    if (pl->n_gpu < 2)
        return;
    int64_t lo = -((int64_t)1 << 50), hi = 0;
    for (int32_t g = 0; g < pl->n_gpu; g++)
        if ((int64_t)pl->p->dev[1 + g].capacity > hi)
            hi = (int64_t)pl->p->dev[1 + g].capacity;
    int32_t best[FIT_MAX_DEVICES];
    memcpy(best, split, sizeof best);
    struct fit_plan *pt = malloc(sizeof *pt);
    if (!pt)
        return;
    for (int it = 0; it < 64 && hi - lo > (1 << 12); it++) {
        const int64_t t            = lo + (hi - lo) / 2;
        int32_t s[FIT_MAX_DEVICES] = {0}, left = n_gl;
        bool ok = true;
        for (int32_t g = 0; g < pl->n_gpu - 1 && ok; g++) {
            /* the most layers GPU g takes keeping t free, the rest on the last for now */
            int32_t take = 0;
            for (int32_t k = 1; k <= left; k++) {
                s[g]             = k;
                s[pl->n_gpu - 1] = left - k;
                evaluate(pl, n_ctx, n_gl, s, pt);
                if (pt->use[1 + g].free < t)
                    break;
                take = k;
            }
            s[g] = take;
            left -= take;
        }
        s[pl->n_gpu - 1] = left;
        evaluate(pl, n_ctx, n_gl, s, pt);
        ok = pt->use[pl->n_gpu].free >= t;
        if (ok) {
            lo = t;
            memcpy(best, s, sizeof best);
        } else {
            hi = t;
        }
    }
    free(pt);
    memcpy(split, best, sizeof best);
}

/* The plan at n_ctx: every layer on the GPUs when they hold it, else as many as do. */
static void plan_at(const struct planner *pl, int32_t n_ctx, struct fit_plan *out)
{
    const int32_t n_layer          = pl->m->hp.n_layer;
    int32_t split[FIT_MAX_DEVICES] = {0};
    if (!pl->n_gpu) {
        evaluate(pl, n_ctx, 0, split, out);
        return;
    }
    struct fit_plan *t = malloc(sizeof *t);
    if (!t) {
        evaluate(pl, n_ctx, 0, split, out);
        return;
    }
    for (int32_t n_gl = n_layer; n_gl >= 0; n_gl--) {
        if (pl->p->balance)
            split_balanced(pl, n_ctx, n_gl, split);
        else
            split_proportional(pl, n_gl, split);
        evaluate(pl, n_ctx, n_gl, split, t);
        if (n_gl == n_layer || t->fits)
            *out = *t;
        if (t->fits)
            break;
    }
    free(t);
}

/*
 * llama-server's memory for m (and its draft model dm, or NULL) at -c n_ctx:
 * everything on the host. The draft's context takes the target's flags with
 * its own cache types (llama.cpp's common_base_params_to_speculative), and
 * allocates what a llama-server of the draft file alone with those flags
 * would (measured: tests/unit/llamacpp_draft.tsv).
 */
static enum hearth_status llamacpp_at(const struct fit_params *p, const struct hearth_model *m,
                                      const struct hearth_model *dm, int32_t n_ctx,
                                      struct fit_plan *out, char *err, size_t err_len)
{
    struct llamacpp_params lp    = p->lc;
    lp.n_ctx                     = n_ctx;
    lp.n_parallel                = p->n_parallel;
    lp.n_ubatch                  = p->n_ubatch;
    struct llamacpp_memory lm[2] = {{0}, {0}};
    enum hearth_status st        = llamacpp_memory_of(m, &lp, &lm[0], err, err_len);
    if (st)
        return st;
    if (dm) {
        char why[HEARTH_ERR_MAX];
        lp.type_k = p->lc_draft_k;
        lp.type_v = p->lc_draft_v;
        if ((st = llamacpp_memory_of(dm, &lp, &lm[1], why, sizeof why)))
            return fail(st, err, err_len, "fit: --model-draft %.200s: %s", p->draft,
                        strncmp(why, "fit: ", 5) ? why : why + 5);
    }
    memset(out, 0, sizeof *out);
    struct fit_use *u = &out->use[0];
    out->n_ctx        = lm[0].n_ctx;
    out->n_ctx_seq    = lm[0].n_ctx_seq;
    out->n_dev        = 1;
    u->dev            = p->dev[0];
    u->l1             = m->hp.n_layer;
    u->output         = true;
    for (int i = 0; i < 2; i++) {
        u->mem.b[MEM_WEIGHTS] += lm[i].mapped + lm[i].repack;
        u->mem.b[MEM_KV] += lm[i].kv + lm[i].rs;
        u->mem.b[MEM_COMPUTE] += lm[i].compute;
        u->mem.b[MEM_OUTPUT] += lm[i].output;
    }
    u->mem.b[MEM_OTHER] = p->cache_ram > 0 ? (uint64_t)p->cache_ram : 0;
    judge(out, p->floor);
    return HEARTH_OK;
}

/*
 * llama-server's plan: at -c as given, or with ctx_max the largest -c of
 * whole 256-cell steps a stream (every slot's stream unless unified) up to
 * the training context a stream.
 */
static enum hearth_status plan_llamacpp(const struct fit_params *p, struct fit_plan *out, char *err,
                                        size_t err_len)
{
    if (p->n_dev != 1)
        return fail(HEARTH_EINVAL, err, err_len,
                    "fit: --runtime llama.cpp plans llama.cpp's CPU build; a GPU --device is not "
                    "modelled for it");
    struct hearth_model *m, *dm = NULL; /* the headers are read once for every -c tried */
    enum hearth_status st = model_describe(p->model, false, &m, err, err_len);
    if (st)
        return st;
    char why[HEARTH_ERR_MAX];
    if (p->draft && (st = model_describe(p->draft, false, &dm, why, sizeof why))) {
        hearth_model_free(m);
        return fail(st, err, err_len, "--model-draft %.200s: %s", p->draft, why);
    }
    struct fit_plan *t = NULL;
    if (dm && !llamacpp_vocab_compatible(m, dm, why, sizeof why)) {
        st = fail(HEARTH_EINVAL, err, err_len, "fit: --model-draft %.200s: %s", p->draft, why);
        goto done;
    }
    if ((st = llamacpp_at(p, m, dm, p->n_ctx, out, err, err_len)) || !p->ctx_max)
        goto done;
    const int64_t step = 256 * (int64_t)(p->lc.unified ? 1 : p->n_parallel);
    int64_t lo = 0, hi = (m->hp.n_ctx_train + 255) / 256;
    if (hi * step > INT32_MAX)
        hi = INT32_MAX / step;
    if (!(t = malloc(sizeof *t))) {
        st = fail(HEARTH_ENOMEM, err, err_len, "fit: out of memory");
        goto done;
    }
    while (lo < hi && !st) {
        const int64_t mid = lo + (hi - lo + 1) / 2;
        st                = llamacpp_at(p, m, dm, (int32_t)(mid * step), t, err, err_len);
        if (!st && t->fits)
            lo = mid;
        else
            hi = mid - 1;
    }
    if (st || (st = llamacpp_at(p, m, dm, (int32_t)((lo ? lo : 1) * step), out, err, err_len)))
        goto done;
    if (!lo)
        snprintf(out->why + strlen(out->why), sizeof out->why - strlen(out->why),
                 "%sno context of 256 cells a stream fits", out->why[0] ? "; " : "");
done:
    free(t);
    hearth_model_free(dm);
    hearth_model_free(m);
    return st;
}

enum hearth_status fit_plan(const struct fit_params *p, struct fit_plan *out, char *err,
                            size_t err_len)
{
    if (p->runtime == FIT_LLAMACPP)
        return plan_llamacpp(p, out, err, err_len);
    if (p->n_dev < 1 || p->n_dev > FIT_MAX_DEVICES || !p->dev[0].host || p->n_parallel < 1 ||
        p->n_ubatch < 1 || p->kv_block < 1 || p->n_threads < 1 || p->n_ctx < -1)
        return fail(HEARTH_EINVAL, err, err_len,
                    "fit: devices, slots, micro-batch, block and threads must be at least 1");
    struct planner pl = {.p = p, .n_gpu = p->n_dev - 1};
    enum hearth_status st;
    if ((st = model_describe(p->model, false, &pl.m, err, err_len)))
        return st;
    char why[HEARTH_ERR_MAX];
    pl.block = p->draft ? spec_block_of(p->draft) : SPEC_BLOCK_NONE;
    if (p->draft && !pl.block &&
        (st = model_describe(p->draft, false, &pl.draft, why, sizeof why))) {
        hearth_model_free(pl.m);
        return fail(st, err, err_len, "--model-draft %.200s: %s", p->draft, why);
    }
    /* serve refuses a draft of another vocabulary at load: so does the plan */
    if (pl.draft &&
        ((st = model_load_tokenizer(pl.m, why, sizeof why)) ||
         (st = model_load_tokenizer(pl.draft, why, sizeof why)) ||
         (!model_vocab_match(pl.m, pl.draft, why, sizeof why) && (st = HEARTH_EINVAL)))) {
        st = fail(st, err, err_len, "fit: --model-draft %.200s: %s", p->draft, why);
        goto done;
    }
    for (int w = 0; w < 2; w++) {
        const enum hearth_kv_type t = w ? p->kv_type_v : p->kv_type;
        if ((t == HEARTH_KV_Q8_0 || t == HEARTH_KV_Q4_0) && pl.m->hp.head_dim % 32) {
            st = fail(HEARTH_EINVAL, err, err_len,
                      "fit: a %s %s cache stores heads in blocks of 32 values, and this "
                      "model's heads have %d",
                      hearth_kv_type_name(t), w ? "V" : "K", pl.m->hp.head_dim);
            goto done;
        }
    }
    const int32_t train = pl.m->hp.n_ctx_train;
    if (!p->ctx_max) {
        /* serve's default: 4096, or the training context when smaller (http.c) */
        plan_at(&pl, p->n_ctx > 0 ? p->n_ctx : p->n_ctx < 0 || train < 4096 ? train : 4096, out);
        goto done;
    }
    /* the largest whole number of blocks up to the training context that fits */
    const int32_t blk = p->kv_block;
    int32_t lo = 0, hi = train / blk;
    struct fit_plan *t = malloc(sizeof *t);
    if (!t) {
        st = fail(HEARTH_ENOMEM, err, err_len, "fit: out of memory");
        goto done;
    }
    while (lo < hi) {
        const int32_t mid = lo + (hi - lo + 1) / 2;
        plan_at(&pl, mid * blk, t);
        if (t->fits)
            lo = mid;
        else
            hi = mid - 1;
    }
    plan_at(&pl, (lo ? lo : 1) * blk, out);
    if (!lo)
        snprintf(out->why + strlen(out->why), sizeof out->why - strlen(out->why),
                 "%sno context of a whole block (%d tokens) fits", out->why[0] ? "; " : "", blk);
    free(t);
done:
    hearth_model_free(pl.draft);
    hearth_model_free(pl.m);
    return st;
}
