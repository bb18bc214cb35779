/*
 * gemma4.c: loading Gemma 4 (llama.cpp's gemma4): its per-layer shapes
 * from the <arch>.* keys, which may be one value or one per layer, and its
 * layers' tensors.
 */
#include "model/gemma4.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/errfmt.h"

/*
 * <arch>.key as layer l's value: a scalar for every layer, or element l of
 * a per-layer array of integers or bools. False when absent or unreadable.
 */
static bool layer_u32(const struct hearth_model *m, const char *key, int32_t l, uint32_t *out)
{
    char full[128];
    snprintf(full, sizeof full, "%s.%s", m->arch, key);
    const int64_t k = gguf_find_key(m->gguf, full);
    enum gguf_vtype et;
    uint64_t n;
    if (k < 0)
        return false;
    if (!gguf_kv_arr(m->gguf, k, &et, &n)) {
        uint64_t v;
        if (!gguf_kv_u64(m->gguf, k, &v) || v > UINT32_MAX) {
            bool b;
            if (!gguf_kv_bool(m->gguf, k, &b))
                return false;
            v = b;
        }
        *out = (uint32_t)v;
        return true;
    }
    const uint8_t *d = gguf_arr_data(m->gguf, k);
    if (!d || (uint64_t)l >= n)
        return false;
    if (et == GGUF_U32 || et == GGUF_I32) {
        int32_t v;
        memcpy(&v, d + 4 * (size_t)l, 4);
        if (v < 0)
            return false;
        *out = (uint32_t)v;
        return true;
    }
    if (et == GGUF_BOOL || et == GGUF_U8 || et == GGUF_I8) {
        *out = d[l] != 0;
        return true;
    }
    return false;
}

static bool arch_f32(const struct hearth_model *m, const char *key, float *out)
{
    char full[128];
    snprintf(full, sizeof full, "%s.%s", m->arch, key);
    return gguf_get_f32(m->gguf, full, out);
}

/*
 * As llama.cpp reads a gemma4 file: a layer is a window layer where
 * sliding_window_pattern says so; window layers have key_length_swa-wide
 * heads rotated over rope.dimension_count_swa dims with rope.freq_base_swa,
 * full layers key_length-wide heads rotated with rope.freq_base and
 * rope_freqs. The last shared_kv_layers layers keep no K/V: each reads the
 * last window layer's or the last full layer's before them (llama.cpp's
 * reuse takes layers n - 2 and n - 1 of the first n that keep theirs).
 * Attention is unscaled (q_scale 1); embeddings scaled by sqrt(n_embd).
 */
enum hearth_status gemma4_hparams(struct hearth_model *m, char *err, size_t err_len)
{
    struct hparams *hp = &m->hp;
    uint32_t v, hd_swa = 0, hd_full = (uint32_t)hp->head_dim, vl, shared = 0;
    if (!layer_u32(m, "attention.sliding_window", 0, &v) || v == 0 || v >= (1u << 30))
        return fail(HEARTH_EFORMAT, err, err_len,
                    "model: %s.attention.sliding_window is missing or out of range", m->arch);
    hp->n_swa = (int32_t)v;
    if (!layer_u32(m, "attention.key_length_swa", 0, &hd_swa))
        return fail(HEARTH_EFORMAT, err, err_len, "model: %s.attention.key_length_swa is missing",
                    m->arch);
    if ((layer_u32(m, "attention.value_length", 0, &vl) && vl != hd_full) ||
        (layer_u32(m, "attention.value_length_swa", 0, &vl) && vl != hd_swa))
        return fail(HEARTH_EFORMAT, err, err_len,
                    "model: gemma4's value heads must be as wide as its key heads");
    uint32_t rot_full = (uint32_t)hp->rope_dim, rot_swa = rot_full;
    layer_u32(m, "rope.dimension_count_swa", 0, &rot_swa);
    float base_swa = hp->rope_base;
    arch_f32(m, "rope.freq_base_swa", &base_swa);
    layer_u32(m, "attention.shared_kv_layers", 0, &shared);
    const int32_t n_kv_layers = hp->n_layer - (int32_t)shared;
    if (shared > 0 && n_kv_layers < 2)
        return fail(HEARTH_EFORMAT, err, err_len,
                    "model: %u of %d layers share K/V, leaving fewer than 2 that keep theirs",
                    shared, hp->n_layer);
    if (layer_u32(m, "embedding_length_per_layer_input", 0, &v) && v > 0) {
        if (v > 4096)
            return fail(HEARTH_EFORMAT, err, err_len,
                        "model: per-layer embeddings of width %u are out of range", v);
        hp->n_embd_pl = (int32_t)v;
    }
    int32_t max_hd = 0, max_kv = 0, max_ff = 0;
    for (int32_t i = 0; i < hp->n_layer; i++) {
        struct layer *L = &m->layers[i];
        uint32_t swa, n_kv, ff;
        if (!layer_u32(m, "attention.sliding_window_pattern", i, &swa))
            return fail(HEARTH_EFORMAT, err, err_len,
                        "model: %s.attention.sliding_window_pattern does not say layer %d's kind",
                        m->arch, i);
        if (!layer_u32(m, "attention.head_count_kv", i, &n_kv) || n_kv == 0 ||
            hp->n_head % (int32_t)n_kv)
            return fail(HEARTH_EFORMAT, err, err_len,
                        "model: layer %d's KV heads do not divide its %d attention heads", i,
                        hp->n_head);
        if (!layer_u32(m, "feed_forward_length", i, &ff) || ff == 0 || ff > (1u << 24))
            return fail(HEARTH_EFORMAT, err, err_len,
                        "model: layer %d's feed_forward_length is missing or out of range", i);
        L->swa       = swa != 0;
        L->head_dim  = (int32_t)(L->swa ? hd_swa : hd_full);
        L->n_head_kv = (int32_t)n_kv;
        L->rope_dim  = (int32_t)(L->swa ? rot_swa : rot_full);
        L->rope_base = L->swa ? base_swa : hp->rope_base;
        if (L->head_dim < 2 || L->head_dim % 2 || L->head_dim > 1024 || L->rope_dim < 0 ||
            L->rope_dim > L->head_dim || L->rope_dim % 2)
            return fail(HEARTH_EFORMAT, err, err_len,
                        "model: layer %d's heads of %d rotated over %d dims are not usable", i,
                        L->head_dim, L->rope_dim);
        if (shared > 0 && i >= n_kv_layers) {
            L->kv_reuse = true;
            L->kv_from  = n_kv_layers - (L->swa ? 2 : 1);
            if (m->layers[L->kv_from].swa != L->swa)
                return fail(HEARTH_EFORMAT, err, err_len,
                            "model: layer %d reuses layer %d's K/V, which is of the other kind", i,
                            L->kv_from);
        }
        max_hd = L->head_dim > max_hd ? L->head_dim : max_hd;
        max_kv = L->n_head_kv > max_kv ? L->n_head_kv : max_kv;
        max_ff = (int32_t)ff > max_ff ? (int32_t)ff : max_ff;
    }
    /* the widest layer sizes the activation buffers */
    hp->head_dim  = max_hd;
    hp->n_head_kv = max_kv;
    hp->n_ff      = max_ff;
    if (!arch_f32(m, "final_logit_softcapping", &hp->logit_softcap) || !(hp->logit_softcap > 0))
        hp->logit_softcap = 0.0f;
    hp->q_scale    = 1.0f;
    hp->embd_scale = sqrtf((float)hp->n_embd);
    hp->ffn_gelu   = true;
    return HEARTH_OK;
}

static enum hearth_status load_model_tensors(struct hearth_model *m, char *err, size_t err_len)
{
    const struct hparams *hp = &m->hp;
    enum hearth_status st;
    int32_t hd_full = 0;
    for (int32_t i = 0; i < hp->n_layer; i++)
        if (!m->layers[i].swa)
            hd_full = m->layers[i].head_dim;
    if (hd_full && (st = model_get_vector(m, "rope_freqs.weight", hd_full / 2, true, &m->rope_freqs,
                                          err, err_len)))
        return st;
    if (!hp->n_embd_pl)
        return HEARTH_OK;
    const int64_t pl = (int64_t)hp->n_embd_pl * hp->n_layer;
    if ((st = model_get_weight(m, "per_layer_token_embd.weight", pl, hp->n_vocab, false,
                               &m->ple_tok_embd, err, err_len)) ||
        (st = model_get_weight(m, "per_layer_model_proj.weight", hp->n_embd, pl, false,
                               &m->ple_model_proj, err, err_len)) ||
        (st = model_get_vector(m, "per_layer_proj_norm.weight", hp->n_embd_pl, false,
                               &m->ple_proj_norm, err, err_len)))
        return st;
    return HEARTH_OK;
}

/* The layer's scalar output scale: a one-element tensor of any float type. */
static enum hearth_status load_out_scale(struct hearth_model *m, int32_t il, struct layer *L,
                                         char *err, size_t err_len)
{
    char name[64];
    float *s;
    snprintf(name, sizeof name, "blk.%d.layer_output_scale.weight", il);
    enum hearth_status st = model_get_vector(m, name, 1, true, &s, err, err_len);
    if (st || !s)
        return st;
    L->out_scale = s[0];
    free(s);
    return HEARTH_OK;
}

enum hearth_status gemma4_load_layer(struct hearth_model *m, int32_t il, struct layer *L, char *err,
                                     size_t err_len)
{
    const struct hparams *hp = &m->hp;
    enum hearth_status st;
    /* the per-layer inputs are made beside the embedding and read by every layer: one stage's
     * buffers hold them */
    if (il == 0 && hp->n_embd_pl && m->n_stage > 1)
        return fail(HEARTH_EUNSUPPORTED, err, err_len,
                    "model: gemma4's per-layer inputs cannot cross stages yet; run its layers "
                    "on one device");
    if (il == 0 && (st = load_model_tensors(m, err, err_len)))
        return st;
    const int64_t d = hp->n_embd, hd = L->head_dim, qd = (int64_t)hp->n_head * hd,
                  kvd = (int64_t)L->n_head_kv * hd, ff = hp->n_ff;
    char n[18][64];
    static const char *const parts[] = {"attn_norm.weight",     "attn_q.weight",
                                        "attn_k.weight",        "attn_v.weight",
                                        "attn_output.weight",   "attn_q_norm.weight",
                                        "attn_k_norm.weight",   "post_attention_norm.weight",
                                        "ffn_norm.weight",      "ffn_gate.weight",
                                        "ffn_up.weight",        "ffn_down.weight",
                                        "post_ffw_norm.weight", "inp_gate.weight",
                                        "proj.weight",          "post_norm.weight",
                                        "ffn_gate_inp.weight",  "ffn_gate_exps.weight"};
    for (int j = 0; j < 18; j++)
        snprintf(n[j], sizeof n[j], "blk.%d.%s", il, parts[j]);
    if (gguf_find_tensor(m->gguf, n[16]))
        return fail(HEARTH_EUNSUPPORTED, err, err_len,
                    "model: gemma4's routed experts (%s) are not supported yet", n[16]);
    /* the FFN's width is the layer's: double in llama.cpp's use_double_wide_mlp layers */
    const struct gguf_tensor *g = gguf_find_tensor(m->gguf, n[9]);
    const int64_t f             = g ? g->ne[1] : ff;
    if (f < 1 || f > ff)
        return fail(HEARTH_EFORMAT, err, err_len, "model: %s is %lld wide, more than %lld", n[9],
                    (long long)f, (long long)ff);
    const bool kv = !L->kv_reuse;
    if ((st = model_get_vector(m, n[0], d, false, &L->attn_norm, err, err_len)) ||
        (st = model_get_weight(m, n[1], d, qd, false, &L->wq, err, err_len)) ||
        (kv && (st = model_get_weight(m, n[2], d, kvd, false, &L->wk, err, err_len))) ||
        (kv && (st = model_get_weight(m, n[3], d, kvd, true, &L->wv, err, err_len))) ||
        (st = model_get_weight(m, n[4], qd, d, false, &L->wo, err, err_len)) ||
        (st = model_get_vector(m, n[5], hd, false, &L->q_norm, err, err_len)) ||
        (kv && (st = model_get_vector(m, n[6], hd, false, &L->k_norm, err, err_len))) ||
        (st = model_get_vector(m, n[7], d, false, &L->post_attn_norm, err, err_len)) ||
        (st = model_get_vector(m, n[8], d, false, &L->ffn_norm, err, err_len)) ||
        (st = model_get_weight(m, n[9], d, f, false, &L->w_gate, err, err_len)) ||
        (st = model_get_weight(m, n[10], d, f, false, &L->w_up, err, err_len)) ||
        (st = model_get_weight(m, n[11], f, d, false, &L->w_down, err, err_len)) ||
        (st = model_get_vector(m, n[12], d, false, &L->post_ffn_norm, err, err_len)) ||
        (st = load_out_scale(m, il, L, err, err_len)))
        return st;
    if (!L->swa)
        L->rope_freqs = m->rope_freqs;
    if (kv) {
        if (!(L->v_norm = malloc((size_t)hd * sizeof *L->v_norm)))
            return fail(HEARTH_ENOMEM, err, err_len, "model: out of memory");
        for (int64_t i = 0; i < hd; i++)
            L->v_norm[i] = 1.0f;
    }
    if (hp->n_embd_pl &&
        ((st = model_get_weight(m, n[13], d, hp->n_embd_pl, false, &L->ple_gate, err, err_len)) ||
         (st = model_get_weight(m, n[14], hp->n_embd_pl, d, false, &L->ple_proj, err, err_len)) ||
         (st = model_get_vector(m, n[15], d, false, &L->ple_norm, err, err_len))))
        return st;
    return HEARTH_OK;
}
