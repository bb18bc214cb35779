/*
 * budget.c: what each stage holds, summed per device and checked against
 * the device's memory before the weights are uploaded (hearth_model_load)
 * and before a context allocates (stages_init). The activation figure is
 * the stage's backend's memory law (backend.h's struct backend_law: for a
 * device its buffers, the vectors' copies and recurrent states included,
 * with the logits in one chunk); the weights are the file's bytes, which a
 * device backend uploads as they are. A backend whose device_memory is 0
 * (the CPU) is not checked. Each context is checked with the model's
 * weights alone: two contexts on one device (hearth makes one per process)
 * are not summed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/budget.h"
#include "model/memlaw.h"
#include "util/errfmt.h"

#define MIB(x) ((double)(x) / (1 << 20))

void budget_weights(struct hearth_model *m)
{
    struct stage_place *first = &m->stage[0], *last = &m->stage[m->n_stage - 1];
    for (int32_t i = 0; i < m->n_stage; i++)
        m->stage[i].weight_bytes = 0;
    for (int64_t i = 0; i < gguf_n_tensors(m->gguf); i++) {
        const struct gguf_tensor *t = gguf_tensor(m->gguf, i);
        const int32_t l             = memlaw_tensor_layer(t->name);
        if (l >= 0 && l < m->hp.n_layer)
            ((struct stage_place *)model_stage_of(m, l))->weight_bytes += t->size;
        else if (!strcmp(t->name, "token_embd.weight"))
            first->weight_bytes += t->size;
        else if (!strcmp(t->name, "output.weight") || !strcmp(t->name, "output_norm.weight"))
            last->weight_bytes += t->size;
    }
    /* a tied output is token_embd's rows: the last stage reads them where they are, unless
     * it is elsewhere, which load refuses (model.c) */
}

void budget_device_name(const struct stage_place *place, char *name, size_t name_len)
{
    if (!strcmp(place->be->name, "cpu"))
        snprintf(name, name_len, "cpu");
    else
        snprintf(name, name_len, "%s%d", place->be->name, place->device);
}

/* Whether stages a and b of m share one device (so its memory). */
static bool same_device(const struct stage_place *a, const struct stage_place *b)
{
    return a->be == b->be && a->device == b->device;
}

/* "layers 2-5, 9-11 and the output": what the stages on place's device hold. */
static void describe(const struct hearth_model *m, const struct stage_place *place, char *out,
                     size_t out_len)
{
    size_t at  = 0;
    bool first = true, output = false;
    for (int32_t i = 0; i < m->n_stage; i++) {
        const struct stage_place *s = &m->stage[i];
        if (!same_device(s, place))
            continue;
        output |= i == m->n_stage - 1;
        if (s->l1 > s->l0 && at < out_len) {
            at += (size_t)snprintf(out + at, out_len - at, "%s%d-%d", first ? "layers " : ", ",
                                   s->l0, s->l1 - 1);
            first = false;
        }
    }
    if (output && at < out_len)
        snprintf(out + at, out_len - at, "%sthe output", first ? "" : " and ");
}

/*
 * Checks every device of m's stages: the weights of its stages plus, with
 * ctx, their kv_bytes and act_bytes, against its memory.
 */
static enum hearth_status check(const struct hearth_model *m, const struct hearth_context *ctx,
                                char *err, size_t err_len)
{
    for (int32_t i = 0; i < m->n_stage; i++) {
        const struct stage_place *p = &m->stage[i];
        bool seen                   = false;
        for (int32_t j = 0; j < i && !seen; j++)
            seen = same_device(&m->stage[j], p);
        const uint64_t have = seen ? 0 : p->be->device_memory(p->device);
        if (!have)
            continue;
        uint64_t w = 0, kv = 0, act = 0;
        for (int32_t j = i; j < m->n_stage; j++) {
            if (!same_device(&m->stage[j], p))
                continue;
            w += m->stage[j].weight_bytes;
            if (ctx) {
                kv += ctx->stages[j].kv_bytes;
                act += ctx->stages[j].act_bytes;
            }
        }
        if (w + kv + act <= have)
            continue;
        char name[32], what[160];
        budget_device_name(p, name, sizeof name);
        describe(m, p, what, sizeof what);
        if (!ctx)
            return fail(HEARTH_ENOMEM, err, err_len,
                        "model: %s would hold %.1f MiB of weights (%s) but has %.1f MiB of "
                        "device memory; offload fewer layers (a smaller -ngl)",
                        name, MIB(w), what, MIB(have));
        return fail(HEARTH_ENOMEM, err, err_len,
                    "context: %s would hold %.1f MiB (weights %.1f, K/V %.1f, activations and "
                    "logits %.1f for %s) but has %.1f MiB of device memory; offload fewer "
                    "layers (a smaller -ngl) or give a smaller context (-c)",
                    name, MIB(w + kv + act), MIB(w), MIB(kv), MIB(act), what, MIB(have));
    }
    return HEARTH_OK;
}

enum hearth_status budget_check_model(const struct hearth_model *m, char *err, size_t err_len)
{
    return check(m, NULL, err, err_len);
}

/*
 * Bytes of stage s's buffers on its device (and logits on the output stage): its backend's
 * memory law, as that backend's ctx_init allocates them.
 */
static uint64_t act_bytes(const struct hearth_context *ctx, const struct stage *s)
{
    const struct kv_cache *kv = &ctx->kv;
    const int32_t stride      = (kv->n_ctx + kv->block_tokens - 1) / kv->block_tokens;
    int n_pools               = 0;
    for (int g = 0; g < KV_GROUPS; g++)
        n_pools += kv->pool[g].n_layer > 0;
    struct mem_acct a = {{0}};
    s->place->be->law->stage(ctx->model, &ctx->p, s->place->l0, s->place->l1, s->output, stride,
                             n_pools, &a, NULL);
    return mem_acct_total(&a);
}

enum hearth_status budget_check_context(struct hearth_context *ctx, char *err, size_t err_len)
{
    const struct kv_cache *kv = &ctx->kv;
    for (int32_t i = 0; i < ctx->n_stage; i++) {
        struct stage *s = &ctx->stages[i];
        s->kv_bytes     = 0;
        for (int32_t l = s->place->l0; l < s->place->l1; l++)
            if (kv->group[l] != KV_NONE)
                s->kv_bytes += (uint64_t)kv->pool[kv->group[l]].layer_len[0] +
                               kv->pool[kv->group[l]].layer_len[1];
        s->act_bytes = act_bytes(ctx, s);
    }
    return check(ctx->model, ctx, err, err_len);
}
