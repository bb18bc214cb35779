/*
 * moe.c: loading the routed mixture-of-experts FFN of qwen3moe and
 * qwen35moe: the expert counts, the router and the stacked 3-D expert
 * tensors, each expert's matrices a slice prepared like any weight. The
 * arithmetic is the backend's moe operation (the CPU's: src/backend/cpu/cpu_moe.c).
 */
#include <stdio.h>
#include <stdlib.h>

#include "model/model.h"
#include "model/moe.h"
#include "util/errfmt.h"

/* ------------------------------------------------------------------ loading --- */

enum hearth_status moe_load_hparams(struct hearth_model *m, char *err, size_t err_len)
{
    struct hparams *hp = &m->hp;
    uint32_t e, u, f;
    hp->n_expert = hp->n_expert_used = hp->n_ff_exp = 0;
    if (!model_arch_u32(m, "expert_count", &e) || e == 0)
        return HEARTH_OK;
    if (e > 4096)
        return fail(HEARTH_EFORMAT, err, err_len, "model: %s.expert_count = %u is out of range",
                    m->arch, e);
    if (!model_arch_u32(m, "expert_used_count", &u) || u == 0 || u > e)
        return fail(HEARTH_EFORMAT, err, err_len,
                    "model: %s.expert_used_count must be 1..%u (the expert count)", m->arch, e);
    /* llama.cpp's fallback when the file has no expert width */
    if (!model_arch_u32(m, "expert_feed_forward_length", &f))
        f = (uint32_t)hp->n_ff / u;
    if (f == 0 || f > (1u << 20))
        return fail(HEARTH_EFORMAT, err, err_len,
                    "model: expert feed-forward length %u is out of range", f);
    hp->n_expert      = (int32_t)e;
    hp->n_expert_used = (int32_t)u;
    hp->n_ff_exp      = (int32_t)f;
    return HEARTH_OK;
}

/*
 * Finds blk.<il>.<part>, a stack of n_mat matrices {n_in, n_out} (ne[2] =
 * n_mat), and fills w[0..n_mat) with one 2-D weight per slice.
 */
static enum hearth_status get_stack(struct hearth_model *m, int32_t il, const char *part,
                                    int64_t n_in, int64_t n_out, int64_t n_mat, struct weight *w,
                                    char *err, size_t err_len)
{
    char name[96];
    snprintf(name, sizeof name, "blk.%d.%s", il, part);
    const struct gguf_tensor *t = gguf_find_tensor(m->gguf, name);
    if (!t)
        return fail(HEARTH_EFORMAT, err, err_len, "model: tensor %s is missing", name);
    if (t->ne[0] != n_in || t->ne[1] != n_out || t->ne[2] != n_mat || t->ne[3] != 1)
        return fail(HEARTH_EFORMAT, err, err_len,
                    "model: tensor %s has shape [%lld, %lld, %lld, %lld] but [%lld, %lld, %lld] "
                    "was expected",
                    name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                    (long long)t->ne[3], (long long)n_in, (long long)n_out, (long long)n_mat);
    if (!model_weight_supported(m, (enum dtype)t->type))
        return fail(HEARTH_EUNSUPPORTED, err, err_len,
                    "model: tensor %s has type %s, which hearth cannot compute with yet", name,
                    dtype_name(t->type));
    const size_t row_len = dtype_row_len((enum dtype)t->type, n_in);
    for (int64_t e = 0; e < n_mat; e++)
        w[e] = (struct weight){.type    = (enum dtype)t->type,
                               .n_in    = n_in,
                               .n_out   = n_out,
                               .row_len = row_len,
                               .data    = (const uint8_t *)t->data + (size_t)e * n_out * row_len};
    m->weight_bytes += t->size;
    m->matmul_macs += (uint64_t)n_in * (uint64_t)n_out * (uint64_t)n_mat;
    if (n_mat > 1) { /* the routed experts' stack: a token reads only n_expert_used of them */
        m->routed_bytes += t->size;
        m->routed_macs += (uint64_t)n_in * (uint64_t)n_out * (uint64_t)n_mat;
    }
    return HEARTH_OK;
}

enum hearth_status moe_load(struct hearth_model *m, int32_t il, struct moe **out, char *err,
                            size_t err_len)
{
    const struct hparams *hp = &m->hp;
    const int64_t d = hp->n_embd, f = hp->n_ff_exp, E = hp->n_expert;
    const int64_t n_mats = E + (hp->n_ff_shexp > 0);
    enum hearth_status st;
    *out           = NULL;
    struct moe *me = calloc(1, sizeof *me);
    if (!me || !(me->gate = calloc((size_t)n_mats, sizeof *me->gate)) ||
        !(me->up = calloc((size_t)n_mats, sizeof *me->up)) ||
        !(me->down = calloc((size_t)n_mats, sizeof *me->down))) {
        moe_free(m, il, me);
        return fail(HEARTH_ENOMEM, err, err_len, "model: out of memory for %lld experts",
                    (long long)E);
    }
    me->n_expert = hp->n_expert;
    me->n_mats   = (int32_t)n_mats;
    me->n_used   = hp->n_expert_used;
    me->n_slots  = hp->n_expert_used + (hp->n_ff_shexp > 0);
    me->n_ff     = hp->n_ff_exp;
    me->n_embd   = hp->n_embd;
    if ((st = get_stack(m, il, "ffn_gate_inp.weight", d, E, 1, &me->router, err, err_len)) ||
        (st = get_stack(m, il, "ffn_gate_exps.weight", d, f, E, me->gate, err, err_len)) ||
        (st = get_stack(m, il, "ffn_up_exps.weight", d, f, E, me->up, err, err_len)) ||
        (st = get_stack(m, il, "ffn_down_exps.weight", f, d, E, me->down, err, err_len)))
        goto err;
    if (n_mats > E) {
        char name[96];
        snprintf(name, sizeof name, "blk.%d.ffn_gate_inp_shexp.weight", il);
        if ((st = get_stack(m, il, "ffn_gate_shexp.weight", d, f, 1, &me->gate[E], err, err_len)) ||
            (st = get_stack(m, il, "ffn_up_shexp.weight", d, f, 1, &me->up[E], err, err_len)) ||
            (st = get_stack(m, il, "ffn_down_shexp.weight", f, d, 1, &me->down[E], err, err_len)) ||
            (st = model_get_vector(m, name, d, false, &me->shared_gate, err, err_len)))
            goto err;
        if (me->gate[E].type != me->gate[0].type || me->up[E].type != me->up[0].type ||
            me->down[E].type != me->down[0].type) {
            st = fail(HEARTH_EUNSUPPORTED, err, err_len,
                      "model: blk.%d's shared expert and routed experts have different types, "
                      "which hearth does not run yet",
                      il);
            goto err;
        }
    }
    const struct backend *be = model_stage_of(m, il)->be;
    if (!be->moe_supported(me->gate[0].type, me->up[0].type, me->down[0].type)) {
        st = fail(HEARTH_EUNSUPPORTED, err, err_len,
                  "model: blk.%d's experts (ffn_gate_exps %s, ffn_up_exps %s, ffn_down_exps %s) "
                  "are types the %s backend does not run together yet (the CPU's gate and up "
                  "must take one activation type)",
                  il, dtype_name(me->gate[0].type), dtype_name(me->up[0].type),
                  dtype_name(me->down[0].type), be->name);
        goto err;
    }
    struct weight *stacks[3]      = {&me->gate_exps, &me->up_exps, &me->down_exps};
    const struct weight *first[3] = {&me->gate[0], &me->up[0], &me->down[0]};
    for (int i = 0; i < 3; i++) {
        *stacks[i]       = *first[i];
        stacks[i]->n_out = first[i]->n_out * E;
    }
    /* a backend that reads the stacks gets them whole, and only the shared expert's slices */
    const int64_t e0 = be->moe_stacks ? E : 0;
    if (be->moe_stacks)
        for (int i = 0; i < 3; i++)
            if ((st = model_prepare_weight(m, il, stacks[i], err, err_len)))
                goto err;
    if (be->moe_stacks && (st = model_prepare_weight(m, il, &me->router, err, err_len)))
        goto err;
    for (int64_t e = e0; e < n_mats; e++)
        if ((st = model_prepare_weight(m, il, &me->gate[e], err, err_len)) ||
            (st = model_prepare_weight(m, il, &me->up[e], err, err_len)) ||
            (st = model_prepare_weight(m, il, &me->down[e], err, err_len)))
            goto err;
    *out = me;
    return HEARTH_OK;
err:
    moe_free(m, il, me);
    return st;
}

void moe_free(const struct hearth_model *m, int32_t il, struct moe *moe)
{
    if (!moe)
        return;
    for (int32_t e = 0; e < moe->n_mats; e++) {
        if (moe->gate)
            model_release_weight(m, il, &moe->gate[e]);
        if (moe->up)
            model_release_weight(m, il, &moe->up[e]);
        if (moe->down)
            model_release_weight(m, il, &moe->down[e]);
    }
    model_release_weight(m, il, &moe->router);
    model_release_weight(m, il, &moe->gate_exps);
    model_release_weight(m, il, &moe->up_exps);
    model_release_weight(m, il, &moe->down_exps);
    free(moe->gate);
    free(moe->up);
    free(moe->down);
    free(moe->shared_gate);
    free(moe);
}
