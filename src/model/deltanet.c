/*
 * deltanet.c: loading Qwen3.5's hybrid layers (qwen35moe with routed
 * experts, qwen35 with a dense SwiGLU FFN): its own hyperparameters (ssm.*,
 * full_attention_interval, IMRoPE sections), which layers are Gated
 * DeltaNet mixers and which output-gated attention, and each mixer's and
 * FFN's tensors. The arithmetic and the recurrent state are the
 * backend's deltanet operation (the CPU's: src/backend/cpu/cpu_deltanet.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/deltanet.h"
#include "model/moe.h"
#include "util/errfmt.h"

/* ------------------------------------------------------------------ loading --- */

/* Filled by dnet_hparams; the model struct holds only what forward.c reads. */
static enum hearth_status read_dims(const struct hearth_model *m, struct dnet_dims *d, char *err,
                                    size_t err_len)
{
    uint32_t conv, S, nk, nv, inner;
    if (!model_arch_u32(m, "ssm.conv_kernel", &conv) || !model_arch_u32(m, "ssm.state_size", &S) ||
        !model_arch_u32(m, "ssm.group_count", &nk) ||
        !model_arch_u32(m, "ssm.time_step_rank", &nv) ||
        !model_arch_u32(m, "ssm.inner_size", &inner))
        return fail(HEARTH_EFORMAT, err, err_len,
                    "model: %s needs ssm.conv_kernel, state_size, group_count, time_step_rank "
                    "and inner_size",
                    m->arch);
    if (conv < 2 || conv > 16 || S < 1 || S > 1024 || nk < 1 || nv < 1 || nv > 1024 || nv % nk ||
        inner != nv * S)
        return fail(HEARTH_EFORMAT, err, err_len,
                    "model: DeltaNet shape conv %u, state %u, %u key heads, %u value heads, inner "
                    "%u does not fit (value heads a multiple of key heads, inner = heads x state)",
                    conv, S, nk, nv, inner);
    *d = (struct dnet_dims){(int32_t)conv, (int32_t)S, (int32_t)nk, (int32_t)nv,
                            (int32_t)(2 * nk * S + nv * S)};
    return HEARTH_OK;
}

struct dnet_dims dnet_dims_of(const struct hearth_model *m)
{
    struct dnet_dims d = {0};
    char err[8];
    read_dims(m, &d, err, sizeof err);
    return d;
}

enum hearth_status dnet_hparams(struct hearth_model *m, char *err, size_t err_len)
{
    struct hparams *hp = &m->hp;
    struct dnet_dims d;
    enum hearth_status st = read_dims(m, &d, err, err_len);
    if (st)
        return st;
    uint32_t every = 4, nextn = 0, shexp = 0;
    model_arch_u32(m, "full_attention_interval", &every);
    model_arch_u32(m, "nextn_predict_layers", &nextn);
    if (every < 1 || nextn >= (uint32_t)hp->n_layer)
        return fail(HEARTH_EFORMAT, err, err_len,
                    "model: full_attention_interval %u or nextn_predict_layers %u is out of range",
                    every, nextn);
    hp->n_layer -= (int32_t)nextn;
    hp->n_nextn = (int32_t)nextn;
    /* qwen35 is the dense variant: the same mixers, each layer with a SwiGLU FFN */
    const bool dense = !strcmp(m->arch, "qwen35");
    if (!dense && hp->n_expert == 0)
        return fail(HEARTH_EFORMAT, err, err_len, "model: %s.expert_count is missing", m->arch);
    if (dense && hp->n_expert > 0)
        return fail(HEARTH_EFORMAT, err, err_len,
                    "model: %s is the dense hybrid but the file has %s.expert_count = %d", m->arch,
                    m->arch, hp->n_expert);
    if (model_arch_u32(m, "expert_shared_feed_forward_length", &shexp) && shexp &&
        shexp != (uint32_t)hp->n_ff_exp)
        return fail(HEARTH_EUNSUPPORTED, err, err_len,
                    "model: a shared expert of width %u beside experts of width %d is not "
                    "supported yet (hearth needs them equal)",
                    shexp, hp->n_ff_exp);
    hp->n_ff_shexp = hp->n_ff_exp;
    char key[128];
    snprintf(key, sizeof key, "%s.rope.dimension_sections", m->arch);
    const int64_t k = gguf_find_key(m->gguf, key);
    enum gguf_vtype et;
    uint64_t ne;
    const void *raw = NULL;
    if (k >= 0 && gguf_kv_arr(m->gguf, k, &et, &ne) && ne == 4 &&
        (et == GGUF_I32 || et == GGUF_U32))
        raw = gguf_arr_data(m->gguf, k);
    int32_t sum = 0;
    for (int i = 0; raw && i < 4; i++) {
        memcpy(&hp->rope_sections[i], (const uint8_t *)raw + 4 * i, 4);
        if (hp->rope_sections[i] < 0 || hp->rope_sections[i] > hp->head_dim)
            raw = NULL;
        else
            sum += hp->rope_sections[i];
    }
    if (!raw || sum == 0)
        return fail(HEARTH_EFORMAT, err, err_len,
                    "model: %s must be 4 non-negative integers, not all 0 (IMRoPE sections)", key);
    hp->n_in_extra          = d.n_v * d.S;
    hp->recurrent           = true;
    hp->dnet                = d;
    hp->last_layer_all_rows = true;
    for (int32_t i = 0; i < hp->n_layer; i++)
        m->layers[i].attn_gated = (uint32_t)(i + 1) % every == 0;
    /* the MTP blocks after them are gated attention layers (load_nextn loads the first) */
    for (int32_t i = hp->n_layer; i < hp->n_layer + hp->n_nextn; i++)
        m->layers[i].attn_gated = true;
    return HEARTH_OK;
}

/*
 * The layer's FFN: qwen35moe's routed experts, or qwen35's dense SwiGLU,
 * which model.c's prepare_weights readies as it does every layer's.
 */
static enum hearth_status load_ffn(struct hearth_model *m, int32_t il, struct layer *L, char *err,
                                   size_t err_len)
{
    const struct hparams *hp = &m->hp;
    if (hp->n_expert > 0)
        return moe_load(m, il, &L->moe, err, err_len);
    char g[64], u[64], dn[64];
    snprintf(g, sizeof g, "blk.%d.ffn_gate.weight", il);
    snprintf(u, sizeof u, "blk.%d.ffn_up.weight", il);
    snprintf(dn, sizeof dn, "blk.%d.ffn_down.weight", il);
    enum hearth_status st;
    if ((st = model_get_weight(m, g, hp->n_embd, hp->n_ff, false, &L->w_gate, err, err_len)) ||
        (st = model_get_weight(m, u, hp->n_embd, hp->n_ff, false, &L->w_up, err, err_len)) ||
        (st = model_get_weight(m, dn, hp->n_ff, hp->n_embd, false, &L->w_down, err, err_len)))
        return st;
    return HEARTH_OK;
}

enum hearth_status dnet_load_layer(struct hearth_model *m, int32_t il, struct layer *L, char *err,
                                   size_t err_len)
{
    const struct hparams *hp = &m->hp;
    const int64_t d = hp->n_embd, qd = (int64_t)hp->n_head * hp->head_dim,
                  kvd = (int64_t)hp->n_head_kv * hp->head_dim;
    char n[12][64];
    static const char *const parts[] = {"attn_norm.weight",   "post_attention_norm.weight",
                                        "attn_q.weight",      "attn_k.weight",
                                        "attn_v.weight",      "attn_output.weight",
                                        "attn_q_norm.weight", "attn_k_norm.weight",
                                        "attn_qkv.weight",    "attn_gate.weight",
                                        "ssm_beta.weight",    "ssm_alpha.weight"};
    for (int j = 0; j < 12; j++)
        snprintf(n[j], sizeof n[j], "blk.%d.%s", il, parts[j]);
    enum hearth_status st;
    /* the norm after attention is the FFN's input norm; the residual skips it */
    if ((st = model_get_vector(m, n[0], d, false, &L->attn_norm, err, err_len)) ||
        (st = model_get_vector(m, n[1], d, false, &L->ffn_norm, err, err_len)) ||
        (st = load_ffn(m, il, L, err, err_len)))
        return st;
    if (L->attn_gated)
        return (st = model_get_weight(m, n[2], d, 2 * qd, false, &L->wq, err, err_len)) ||
                       (st = model_get_weight(m, n[3], d, kvd, false, &L->wk, err, err_len)) ||
                       (st = model_get_weight(m, n[4], d, kvd, false, &L->wv, err, err_len)) ||
                       (st = model_get_weight(m, n[5], qd, d, false, &L->wo, err, err_len)) ||
                       (st = model_get_vector(m, n[6], hp->head_dim, false, &L->q_norm, err,
                                              err_len)) ||
                       (st = model_get_vector(m, n[7], hp->head_dim, false, &L->k_norm, err,
                                              err_len))
                   ? st
                   : HEARTH_OK;
    const struct dnet_dims dd = dnet_dims_of(m);
    const int64_t vd          = (int64_t)dd.n_v * dd.S;
    struct dnet *dn           = calloc(1, sizeof *dn);
    if (!dn)
        return fail(HEARTH_ENOMEM, err, err_len, "model: out of memory");
    L->dnet = dn;
    for (int32_t i = 0; i < il; i++)
        dn->slot += m->layers[i].dnet != NULL;
    char cv[64], dt[64], a[64], nm[64], out[64];
    snprintf(cv, sizeof cv, "blk.%d.ssm_conv1d.weight", il);
    snprintf(dt, sizeof dt, "blk.%d.ssm_dt.bias", il);
    snprintf(a, sizeof a, "blk.%d.ssm_a", il);
    snprintf(nm, sizeof nm, "blk.%d.ssm_norm.weight", il);
    snprintf(out, sizeof out, "blk.%d.ssm_out.weight", il);
    const struct gguf_tensor *t = gguf_find_tensor(m->gguf, cv);
    if (!t || t->ne[0] != dd.n_conv || t->ne[1] != dd.conv_dim || t->ne[2] != 1 ||
        t->type != DTYPE_F32)
        return fail(HEARTH_EFORMAT, err, err_len, "model: tensor %s must be f32 of shape [%d, %d]",
                    cv, dd.n_conv, dd.conv_dim);
    if (!(dn->conv = acct_malloc(&m->acct, MEM_WEIGHTS, t->size)))
        return fail(HEARTH_ENOMEM, err, err_len, "model: out of memory");
    memcpy(dn->conv, t->data, t->size);
    m->weight_bytes += t->size;
    if ((st = model_get_weight(m, n[8], d, dd.conv_dim, false, &dn->wqkv, err, err_len)) ||
        (st = model_get_weight(m, n[9], d, vd, false, &dn->wgate, err, err_len)) ||
        (st = model_get_weight(m, n[10], d, dd.n_v, false, &dn->wbeta, err, err_len)) ||
        (st = model_get_weight(m, n[11], d, dd.n_v, false, &dn->walpha, err, err_len)) ||
        (st = model_get_weight(m, out, vd, d, false, &dn->wout, err, err_len)) ||
        (st = model_get_vector(m, dt, dd.n_v, false, &dn->dt_bias, err, err_len)) ||
        (st = model_get_vector(m, a, dd.n_v, false, &dn->a, err, err_len)) ||
        (st = model_get_vector(m, nm, dd.S, false, &dn->norm, err, err_len)))
        return st;
    struct weight *ws[] = {&dn->wqkv, &dn->wgate, &dn->wbeta, &dn->walpha, &dn->wout};
    for (size_t j = 0; j < sizeof ws / sizeof ws[0]; j++)
        if ((st = model_prepare_weight(m, il, ws[j], err, err_len)))
            return st;
    return HEARTH_OK;
}

void dnet_free(const struct hearth_model *m, int32_t il, struct dnet *d)
{
    if (!d)
        return;
    struct weight *ws[] = {&d->wqkv, &d->wgate, &d->wbeta, &d->walpha, &d->wout};
    for (size_t j = 0; j < sizeof ws / sizeof ws[0]; j++)
        model_release_weight(m, il, ws[j]);
    free(d->conv);
    free(d->dt_bias);
    free(d->a);
    free(d->norm);
    free(d);
}
