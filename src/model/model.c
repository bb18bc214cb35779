/*
 * model.c: loading a llama-family model from GGUF: hyperparameters from
 * <arch>.* keys, weights validated by name, shape and type and left in the
 * mapping, norm vectors copied to f32. The public hearth_model_* and
 * tokenizer accessors live here too.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/budget.h"
#include "model/deltanet.h"
#include "model/gemma4.h"
#include "model/model.h"
#include "model/moe.h"
#include "util/errfmt.h"

struct hearth_model_params hearth_model_default_params(void)
{
    return (struct hearth_model_params){.n_threads = 4};
}

static enum hearth_status gemma3_hparams(struct hearth_model *m, char *err, size_t err_len);

/*
 * Architectures whose forward pass hearth has. They share one llama-style
 * block; what differs is the rope layout, which optional tensors exist
 * (biases for qwen2, per-head q/k norms for qwen3, post-norms for gemma3),
 * found by name at load, and what an architecture's own hook sets.
 */
static const struct {
    const char *name;
    bool rope_neox;
    enum hearth_status (*hparams)(struct hearth_model *m, char *err, size_t err_len);
    /* clang-format off */
} archs[] = {
    {"llama", false, NULL},
    {"qwen2", true, NULL},
    {"qwen3", true, NULL},
    {"gemma3", true, gemma3_hparams},
    {"qwen3moe", true, NULL},
    {"qwen35moe", true, dnet_hparams},
    {"qwen35", true, dnet_hparams},
    {"gemma4", true, gemma4_hparams},
};
/* clang-format on */

bool model_arch_u32(const struct hearth_model *m, const char *key, uint32_t *out)
{
    char full[128];
    snprintf(full, sizeof full, "%s.%s", m->arch, key);
    return gguf_get_u32(m->gguf, full, out);
}

static bool arch_f32(const struct hearth_model *m, const char *key, float *out)
{
    char full[128];
    snprintf(full, sizeof full, "%s.%s", m->arch, key);
    return gguf_get_f32(m->gguf, full, out);
}

static enum hearth_status need_u32(const struct hearth_model *m, const char *key, int32_t *out,
                                   char *err, size_t err_len)
{
    uint32_t v;
    if (!model_arch_u32(m, key, &v))
        return fail(HEARTH_EFORMAT, err, err_len, "model: missing or non-integer key %s.%s",
                    m->arch, key);
    if (v == 0 || v > (1u << 30))
        return fail(HEARTH_EFORMAT, err, err_len, "model: %s.%s = %u is out of range", m->arch, key,
                    v);
    *out = (int32_t)v;
    return HEARTH_OK;
}

/*
 * A per-layer array of integers (gemma4's feed_forward_length) read as its
 * largest element, which sizes the buffers; the architecture's hook reads
 * each layer's. False when key is not such an array.
 */
static bool arch_u32_max(const struct hearth_model *m, const char *key, int32_t *out)
{
    char full[128];
    snprintf(full, sizeof full, "%s.%s", m->arch, key);
    const int64_t k = gguf_find_key(m->gguf, full);
    enum gguf_vtype et;
    uint64_t n;
    if (k < 0 || !gguf_kv_arr(m->gguf, k, &et, &n) || (et != GGUF_U32 && et != GGUF_I32) || n == 0)
        return false;
    const uint8_t *d = gguf_arr_data(m->gguf, k);
    int32_t max      = 0;
    for (uint64_t i = 0; d && i < n; i++) {
        int32_t v;
        memcpy(&v, d + 4 * i, 4);
        max = v > max ? v : max;
    }
    *out = max;
    return max > 0 && max <= (1 << 30);
}

static enum hearth_status load_hparams(struct hearth_model *m, char *err, size_t err_len)
{
    struct hparams *hp = &m->hp;
    enum hearth_status st;
    if ((st = need_u32(m, "embedding_length", &hp->n_embd, err, err_len)) ||
        (st = need_u32(m, "block_count", &hp->n_layer, err, err_len)) ||
        (!arch_u32_max(m, "feed_forward_length", &hp->n_ff) &&
         (st = need_u32(m, "feed_forward_length", &hp->n_ff, err, err_len))) ||
        (st = need_u32(m, "attention.head_count", &hp->n_head, err, err_len)))
        return st;
    uint32_t v;
    hp->n_head_kv = model_arch_u32(m, "attention.head_count_kv", &v) ? (int32_t)v : hp->n_head;
    if (hp->n_head_kv < 1 || hp->n_head % hp->n_head_kv)
        return fail(HEARTH_EFORMAT, err, err_len,
                    "model: %d KV heads do not divide %d attention heads", hp->n_head_kv,
                    hp->n_head);
    hp->head_dim =
        model_arch_u32(m, "attention.key_length", &v) ? (int32_t)v : hp->n_embd / hp->n_head;
    if (hp->head_dim < 2 || hp->head_dim % 2 || hp->head_dim > 1024)
        return fail(HEARTH_EFORMAT, err, err_len, "model: head dimension %d is not usable",
                    hp->head_dim);
    hp->rope_dim = model_arch_u32(m, "rope.dimension_count", &v) ? (int32_t)v : hp->head_dim;
    if (hp->rope_dim < 0 || hp->rope_dim > hp->head_dim || hp->rope_dim % 2)
        return fail(HEARTH_EFORMAT, err, err_len,
                    "model: rope dimension %d must be even and at most the head dimension %d",
                    hp->rope_dim, hp->head_dim);
    if (!arch_f32(m, "rope.freq_base", &hp->rope_base))
        hp->rope_base = 10000.0f;
    if (!arch_f32(m, "attention.layer_norm_rms_epsilon", &hp->norm_eps))
        hp->norm_eps = 1e-5f;
    hp->n_ctx_train =
        model_arch_u32(m, "context_length", &v) && v > 0 && v < (1u << 30) ? (int32_t)v : 2048;
    hp->embd_scale = 1.0f;
    m->layers      = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers)
        return fail(HEARTH_ENOMEM, err, err_len, "model: out of memory");
    /* attention.sliding_window is read only by the architectures that have windows (gemma3),
     * as llama.cpp does: a llama or qwen2 file carrying the key attends over everything */
    for (int32_t i = 0; i < hp->n_layer; i++)
        m->layers[i].rope_base = hp->rope_base;
    return moe_load_hparams(m, err, err_len);
}

/*
 * gemma3, as llama.cpp reads it: with a window, layer i is local unless
 * i % pattern == pattern - 1 (pattern 0: all local), and local layers rotate
 * with rope.freq_base_swa (10000 when absent, not the global base). Queries
 * are scaled by 1/sqrt(head_dim) before attention, by 1/sqrt(n_embd/n_head)
 * for the 62-layer 27B, whose head_dim differs; embeddings by sqrt(n_embd).
 */
static enum hearth_status gemma3_hparams(struct hearth_model *m, char *err, size_t err_len)
{
    struct hparams *hp = &m->hp;
    uint32_t pattern   = 6, v;
    float base_swa     = 10000.0f;
    char key[128];
    hp->n_swa =
        model_arch_u32(m, "attention.sliding_window", &v) && v < (1u << 30) ? (int32_t)v : 0;
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", m->arch);
    if (gguf_find_key(m->gguf, key) >= 0 && !gguf_get_u32(m->gguf, key, &pattern))
        return fail(HEARTH_EUNSUPPORTED, err, err_len,
                    "model: %s is not a single integer, which hearth cannot read yet", key);
    arch_f32(m, "rope.freq_base_swa", &base_swa);
    for (int32_t i = 0; i < hp->n_layer; i++) {
        const bool local = hp->n_swa > 0 && (pattern == 0 || (uint32_t)i % pattern < pattern - 1);
        m->layers[i].swa = local;
        m->layers[i].rope_base = local ? base_swa : hp->rope_base;
    }
    if (!arch_f32(m, "final_logit_softcapping", &hp->logit_softcap) || !(hp->logit_softcap > 0))
        hp->logit_softcap = 0.0f;
    hp->q_scale    = hp->n_layer == 62 ? 1.0f / sqrtf((float)(hp->n_embd / hp->n_head))
                                       : 1.0f / sqrtf((float)hp->head_dim);
    hp->embd_scale = sqrtf((float)hp->n_embd);
    hp->ffn_gelu   = true;
    return HEARTH_OK;
}

/* Finds a 2-D weight and checks its shape {n_in, n_out} and that the backend runs its type. */
enum hearth_status model_get_weight(struct hearth_model *m, const char *name, int64_t n_in,
                                    int64_t n_out, bool optional, struct weight *w, char *err,
                                    size_t err_len)
{
    const struct gguf_tensor *t = gguf_find_tensor(m->gguf, name);
    memset(w, 0, sizeof *w);
    if (!t) {
        if (optional)
            return HEARTH_OK;
        return fail(HEARTH_EFORMAT, err, err_len, "model: tensor %s is missing", name);
    }
    if (t->ne[0] != n_in || t->ne[1] != n_out || t->ne[2] != 1 || t->ne[3] != 1)
        return fail(HEARTH_EFORMAT, err, err_len,
                    "model: tensor %s has shape [%lld, %lld, %lld, %lld] but [%lld, %lld] was "
                    "expected",
                    name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                    (long long)t->ne[3], (long long)n_in, (long long)n_out);
    const struct backend *refuser = model_weight_refuser(m, (enum dtype)t->type);
    if (refuser && refuser != backend_cpu() && backend_cpu()->weight_supported(t->type))
        return fail(HEARTH_EUNSUPPORTED, err, err_len,
                    "model: tensor %s has type %s, which the %s backend cannot compute with "
                    "yet; keep its layers on the CPU",
                    name, dtype_name(t->type), refuser->name);
    if (refuser)
        return fail(HEARTH_EUNSUPPORTED, err, err_len,
                    "model: tensor %s has type %s, which hearth cannot compute with yet", name,
                    dtype_name(t->type));
    w->type    = (enum dtype)t->type;
    w->n_in    = n_in;
    w->n_out   = n_out;
    w->row_len = dtype_row_len(w->type, n_in);
    w->data    = t->data;
    m->weight_bytes += t->size;
    m->matmul_macs += (uint64_t)n_in * (uint64_t)n_out;
    return HEARTH_OK;
}

/* Copies a 1-D vector of n elements (any float or quantized type) into a new f32 array. */
enum hearth_status model_get_vector(struct hearth_model *m, const char *name, int64_t n,
                                    bool optional, float **out, char *err, size_t err_len)
{
    const struct gguf_tensor *t = gguf_find_tensor(m->gguf, name);
    *out                        = NULL;
    if (!t) {
        if (optional)
            return HEARTH_OK;
        return fail(HEARTH_EFORMAT, err, err_len, "model: tensor %s is missing", name);
    }
    if (t->ne[0] != n || t->ne[1] != 1 || t->ne[2] != 1 || t->ne[3] != 1)
        return fail(HEARTH_EFORMAT, err, err_len,
                    "model: tensor %s has %lld x %lld elements but %lld were expected", name,
                    (long long)t->ne[0], (long long)(t->ne[1] * t->ne[2] * t->ne[3]), (long long)n);
    float *v = acct_calloc(&m->acct, MEM_WEIGHTS, (size_t)n, sizeof *v);
    if (!v)
        return fail(HEARTH_ENOMEM, err, err_len, "model: out of memory copying %s", name);
    if (!m->be->vector_to_f32((enum dtype)t->type, t->data, v, n)) {
        free(v);
        return fail(HEARTH_EUNSUPPORTED, err, err_len,
                    "model: tensor %s has type %s, which hearth cannot read yet", name,
                    dtype_name(t->type));
    }
    m->weight_bytes += t->size;
    *out = v;
    return HEARTH_OK;
}

static enum hearth_status load_weights(struct hearth_model *m, char *err, size_t err_len)
{
    const struct hparams *hp = &m->hp;
    const int64_t d = hp->n_embd, qd = (int64_t)hp->n_head * hp->head_dim,
                  kvd = (int64_t)hp->n_head_kv * hp->head_dim;
    enum hearth_status st;
    if ((st = model_get_weight(m, "token_embd.weight", d, hp->n_vocab, false, &m->tok_embd, err,
                               err_len)) ||
        (st = model_get_vector(m, "output_norm.weight", d, false, &m->output_norm, err, err_len)) ||
        (st = model_get_weight(m, "output.weight", d, hp->n_vocab, true, &m->output, err, err_len)))
        return st;
    if (!m->output.data)
        m->output = m->tok_embd; /* tied embeddings */
    const bool post_norms = !strcmp(m->arch, "gemma3");
    /* an MoE file has routed experts instead of the dense FFN tensors */
    const bool moe = hp->n_expert > 0;
    for (int32_t i = 0; i < hp->n_layer; i++) {
        struct layer *L = &m->layers[i];
        if (hp->recurrent) { /* Qwen3.5's hybrid has its own layer layout */
            if ((st = dnet_load_layer(m, i, L, err, err_len)))
                return st;
            continue;
        }
        if (!strcmp(m->arch, "gemma4")) { /* so has Gemma 4, per layer */
            if ((st = gemma4_load_layer(m, i, L, err, err_len)))
                return st;
            continue;
        }
        char n[16][64];
        static const char *const parts[] = {
            "attn_norm.weight",    "attn_q.weight",      "attn_k.weight",
            "attn_v.weight",       "attn_output.weight", "ffn_norm.weight",
            "ffn_gate.weight",     "ffn_up.weight",      "ffn_down.weight",
            "attn_q.bias",         "attn_k.bias",        "attn_v.bias",
            "attn_q_norm.weight",  "attn_k_norm.weight", "post_attention_norm.weight",
            "post_ffw_norm.weight"};
        for (int j = 0; j < 16; j++)
            snprintf(n[j], sizeof n[j], "blk.%d.%s", i, parts[j]);
        if ((st = model_get_vector(m, n[0], d, false, &L->attn_norm, err, err_len)) ||
            (st = model_get_weight(m, n[1], d, qd, false, &L->wq, err, err_len)) ||
            (st = model_get_weight(m, n[2], d, kvd, false, &L->wk, err, err_len)) ||
            (st = model_get_weight(m, n[3], d, kvd, false, &L->wv, err, err_len)) ||
            (st = model_get_weight(m, n[4], qd, d, false, &L->wo, err, err_len)) ||
            (st = model_get_vector(m, n[5], d, false, &L->ffn_norm, err, err_len)) ||
            (st = model_get_weight(m, n[6], d, hp->n_ff, moe, &L->w_gate, err, err_len)) ||
            (st = model_get_weight(m, n[7], d, hp->n_ff, moe, &L->w_up, err, err_len)) ||
            (st = model_get_weight(m, n[8], hp->n_ff, d, moe, &L->w_down, err, err_len)) ||
            (st = model_get_vector(m, n[9], qd, true, &L->bq, err, err_len)) ||
            (st = model_get_vector(m, n[10], kvd, true, &L->bk, err, err_len)) ||
            (st = model_get_vector(m, n[11], kvd, true, &L->bv, err, err_len)) ||
            (st =
                 model_get_vector(m, n[12], hp->head_dim, !post_norms, &L->q_norm, err, err_len)) ||
            (st =
                 model_get_vector(m, n[13], hp->head_dim, !post_norms, &L->k_norm, err, err_len)) ||
            (st = model_get_vector(m, n[14], d, !post_norms, &L->post_attn_norm, err, err_len)) ||
            (st = model_get_vector(m, n[15], d, !post_norms, &L->post_ffn_norm, err, err_len)) ||
            (moe && (st = moe_load(m, i, &L->moe, err, err_len))))
            return st;
    }
    return HEARTH_OK;
}

/*
 * The MTP head after the n_layer layers (hp.n_nextn of them in the file;
 * hearth runs one): a gated-attention layer with its experts (qwen35moe)
 * or dense FFN (qwen35), and the nextn tensors around it. It runs where
 * the output does, so that backend must have the head's input operation.
 */
static enum hearth_status load_nextn(struct hearth_model *m, char *err, size_t err_len)
{
    const struct hparams *hp      = &m->hp;
    const int32_t il              = hp->n_layer;
    const struct stage_place *out = model_stage_of(m, il);
    if (hp->n_nextn != 1 || !hp->recurrent)
        return fail(HEARTH_EUNSUPPORTED, err, err_len,
                    "model: an MTP head of %d blocks on %s is not supported (hearth runs "
                    "Qwen3.5's single nextn block)",
                    hp->n_nextn, m->arch);
    if (!out->be->nextn_input)
        return fail(HEARTH_EUNSUPPORTED, err, err_len,
                    "model: the MTP head runs where the output does, and the %s backend "
                    "cannot run it yet; keep the output on the CPU (-ngl at most the layer "
                    "count)",
                    out->be->name);
    char e[64], h[64], eh[64], hn[64], emb[64], head[64];
    snprintf(e, sizeof e, "blk.%d.nextn.enorm.weight", il);
    snprintf(h, sizeof h, "blk.%d.nextn.hnorm.weight", il);
    snprintf(eh, sizeof eh, "blk.%d.nextn.eh_proj.weight", il);
    snprintf(hn, sizeof hn, "blk.%d.nextn.shared_head_norm.weight", il);
    snprintf(emb, sizeof emb, "blk.%d.nextn.embed_tokens.weight", il);
    snprintf(head, sizeof head, "blk.%d.nextn.shared_head_head.weight", il);
    if (gguf_find_tensor(m->gguf, emb) || gguf_find_tensor(m->gguf, head))
        return fail(HEARTH_EUNSUPPORTED, err, err_len,
                    "model: an MTP head with its own embedding or output matrix (%s) is not "
                    "supported yet",
                    gguf_find_tensor(m->gguf, emb) ? emb : head);
    struct layer *L = &m->layers[il];
    L->rope_base    = hp->rope_base;
    m->has_mtp      = true; /* from here on hearth_model_free releases the layer */
    enum hearth_status st;
    if ((st = out->be->layer_supported(m, il, err, err_len)) ||
        (st = dnet_load_layer(m, il, L, err, err_len)))
        return st;
    if (!(L->nextn = calloc(1, sizeof *L->nextn)))
        return fail(HEARTH_ENOMEM, err, err_len, "model: out of memory");
    struct nextn *x = L->nextn;
    if ((st = model_get_vector(m, e, hp->n_embd, false, &x->enorm, err, err_len)) ||
        (st = model_get_vector(m, h, hp->n_embd, false, &x->hnorm, err, err_len)) ||
        (st = model_get_vector(m, hn, hp->n_embd, true, &x->head_norm, err, err_len)) ||
        (st = model_get_weight(m, eh, 2 * (int64_t)hp->n_embd, hp->n_embd, false, &x->eh_proj, err,
                               err_len)) ||
        (st = model_prepare_weight(m, il, &x->eh_proj, err, err_len)))
        return st;
    m->mtp_place =
        (struct stage_place){.be = out->be, .device = out->device, .l0 = il, .l1 = il + 1};
    return HEARTH_OK;
}

/*
 * A device that refuses memory the budget allowed for (other processes hold
 * some of it) fails the load here: the sentence says where and what to do.
 */
static enum hearth_status upload_failed(const struct stage_place *place, int32_t l,
                                        enum hearth_status st, char *err, size_t err_len)
{
    if (st != HEARTH_ENOMEM || !place->be->device_memory(place->device))
        return st;
    char why[HEARTH_ERR_MAX], name[32], what[32];
    snprintf(why, sizeof why, "%s", err);
    budget_device_name(place, name, sizeof name);
    if (l < 0 || l >= place->l1)
        snprintf(what, sizeof what, l < 0 ? "token_embd" : "the output");
    else
        snprintf(what, sizeof what, "layer %d", l);
    return fail(st, err, err_len,
                "model: %s refused the weights of %s (%s); offload fewer "
                "layers (a smaller -ngl)",
                name, what, why);
}

enum hearth_status model_prepare_weight(struct hearth_model *m, int32_t l, struct weight *w,
                                        char *err, size_t err_len)
{
    const struct stage_place *place = model_stage_of(m, l);
    return upload_failed(place, l, place->be->weight_prepare(w, WEIGHT_MATMUL, err, err_len), err,
                         err_len);
}

static enum hearth_status prepare_weights(struct hearth_model *m, char *err, size_t err_len)
{
    enum hearth_status st;
    for (int32_t i = 0; i < m->hp.n_layer + m->has_mtp; i++) {
        struct layer *L     = &m->layers[i];
        struct weight *ws[] = {&L->wq,   &L->wk,     &L->wv,       &L->wo,      &L->w_gate,
                               &L->w_up, &L->w_down, &L->ple_gate, &L->ple_proj};
        for (size_t j = 0; j < sizeof ws / sizeof ws[0]; j++)
            if ((st = model_prepare_weight(m, i, ws[j], err, err_len)))
                return st;
    }
    /* gemma4's per-layer embeddings: their projection runs with the embedding, on the first
     * stage; their rows are read as the file stores them */
    if ((st = model_prepare_weight(m, m->stage[0].l0, &m->ple_model_proj, err, err_len)))
        return st;
    /*
     * a tied output shares token_embd's rows, which embedding lookups read as they are; the
     * embedding runs on the first stage, the output on the last, so a tied output on another
     * backend would need its own copy there, which no backend pair needs yet (CPU stages
     * share one table)
     */
    const bool tied = m->output.data == m->tok_embd.data;
    if ((st = m->stage[0].be->weight_prepare(&m->tok_embd, WEIGHT_ROWS, err, err_len)))
        return upload_failed(&m->stage[0], -1, st, err, err_len);
    if (tied && m->stage[m->n_stage - 1].be != m->stage[0].be) {
        char first[32], last[32];
        budget_device_name(&m->stage[0], first, sizeof first);
        budget_device_name(&m->stage[m->n_stage - 1], last, sizeof last);
        return fail(HEARTH_EUNSUPPORTED, err, err_len,
                    "model: the output is tied to token_embd, which cannot be on %s and %s "
                    "at once yet; keep the output with the first layer (-ngl at most the layer "
                    "count, or every layer on one device)",
                    first, last);
    }
    if (tied)
        m->output = m->tok_embd;
    /* a tied output gets a matmul copy of its own where token_embd's preparation made none
     * (the CPU reads embedding rows from the mapping): the packed kernels then verify and
     * prefill its rows in fours, with vec_dot's bits; the mapping pages it replaces are
     * released as for any packed weight, and the few rows embedding lookups touch are read
     * back from the file */
    if ((!tied || !m->output.dev) &&
        (st = model_prepare_weight(m, m->hp.n_layer, &m->output, err, err_len)))
        return st;
    return HEARTH_OK;
}

void model_release_weight(const struct hearth_model *m, int32_t l, struct weight *w)
{
    if (w->dev) /* a weight never prepared (a load that failed first) has no stage copy */
        model_stage_of(m, l)->be->weight_release(w);
}

/*
 * What a file's header says: the architecture, the hyperparameters and the
 * layers' kinds (window, gated attention), m allocated by the caller.
 */
static enum hearth_status model_header(struct hearth_model *m, const char *path, bool mtp,
                                       char *err, size_t err_len)
{
    enum hearth_status st;
    if ((st = gguf_open(path, &m->gguf, err, err_len)))
        return st;
    m->fingerprint = gguf_fingerprint(m->gguf);
    if (!gguf_get_str(m->gguf, "general.architecture", m->arch, sizeof m->arch))
        return fail(HEARTH_EFORMAT, err, err_len,
                    "model: general.architecture is missing or not a short string");
    /* the block drafters run beside their target (src/spec/), never as a model */
    if (!strcmp(m->arch, "eagle3") || !strcmp(m->arch, "dflash"))
        return fail(HEARTH_EUNSUPPORTED, err, err_len,
                    "model: '%s' is a drafter that reads its target's hidden states, not a model: "
                    "give it as --model-draft FILE --spec %s beside its target",
                    m->arch, m->arch);
    size_t a = 0, n_archs = sizeof archs / sizeof archs[0];
    while (a < n_archs && strcmp(m->arch, archs[a].name))
        a++;
    if (a == n_archs)
        return fail(HEARTH_EUNSUPPORTED, err, err_len,
                    "model: architecture '%s' is not supported (hearth runs: llama, qwen2, qwen3, "
                    "qwen3moe, qwen35, qwen35moe, gemma3, gemma4)",
                    m->arch);
    m->hp.rope_neox = archs[a].rope_neox;
    m->want_mtp     = mtp;
    if ((st = load_hparams(m, err, err_len)) ||
        (archs[a].hparams && (st = archs[a].hparams(m, err, err_len))))
        return st;
    return HEARTH_OK;
}

enum hearth_status model_describe(const char *path, bool mtp, struct hearth_model **out, char *err,
                                  size_t err_len)
{
    enum hearth_status st;
    *out                   = NULL;
    struct hearth_model *m = calloc(1, sizeof *m);
    if (!m)
        return fail(HEARTH_ENOMEM, err, err_len, "model: out of memory");
    m->n_threads = 1;
    if ((st = model_header(m, path, mtp, err, err_len)))
        goto err;
    enum gguf_vtype et;
    uint64_t n      = 0;
    const int64_t k = gguf_find_key(m->gguf, "tokenizer.ggml.tokens");
    if (k < 0 || !gguf_kv_arr(m->gguf, k, &et, &n) || et != GGUF_STR || n < 1 || n > INT32_MAX) {
        st = fail(HEARTH_EFORMAT, err, err_len,
                  "model: tokenizer.ggml.tokens is missing or not a list of strings");
        goto err;
    }
    m->hp.n_vocab = (int32_t)n;
    *out          = m;
    return HEARTH_OK;
err:
    hearth_model_free(m);
    return st;
}

enum hearth_status model_load_tokenizer(struct hearth_model *m, char *err, size_t err_len)
{
    return m->tok ? HEARTH_OK : tokenizer_load(m->gguf, &m->tok, err, err_len);
}

enum hearth_status hearth_model_load(const char *path, const struct hearth_model_params *params,
                                     struct hearth_model **out, char *err, size_t err_len)
{
    struct hearth_model_params p = params ? *params : hearth_model_default_params();
    enum hearth_status st;
    *out                   = NULL;
    struct hearth_model *m = calloc(1, sizeof *m);
    if (!m)
        return fail(HEARTH_ENOMEM, err, err_len, "model: out of memory");
    m->n_threads = p.n_threads > 0 ? p.n_threads : 1;
    if ((st = model_header(m, path, p.mtp, err, err_len)))
        goto err;
    if (m->hp.n_nextn > 0 && !p.mtp)
        fprintf(stderr,
                "hearth: %s: %d multi-token-prediction layer%s not loaded (--spec mtp "
                "drafts with %s)\n",
                m->arch, m->hp.n_nextn, m->hp.n_nextn == 1 ? "" : "s",
                m->hp.n_nextn == 1 ? "it" : "them");
    if ((st = model_place(m, &p, err, err_len)) ||
        (st = tokenizer_load(m->gguf, &m->tok, err, err_len)))
        goto err;
    m->hp.n_vocab = tokenizer_n_vocab(m->tok);
    struct gguf_str ct;
    int64_t k = gguf_find_key(m->gguf, "tokenizer.chat_template");
    if (k >= 0 && gguf_kv_str(m->gguf, k, &ct)) {
        if (!(m->chat_template = malloc(ct.len + 1))) {
            st = fail(HEARTH_ENOMEM, err, err_len, "model: out of memory");
            goto err;
        }
        memcpy(m->chat_template, ct.ptr, ct.len);
        m->chat_template[ct.len] = 0;
    }
    for (int32_t l = 0; l < m->hp.n_layer; l++)
        if ((st = model_stage_of(m, l)->be->layer_supported(m, l, err, err_len)))
            goto err;
    if ((st = load_weights(m, err, err_len)))
        goto err;
    if (m->want_mtp && m->hp.n_nextn > 0) {
        /* the head runs in a context of its own (hearth_mtp_decode): a prefill's count of
         * multiply-adds leaves all of its matrices out */
        const uint64_t macs = m->matmul_macs, routed = m->routed_macs;
        if ((st = load_nextn(m, err, err_len)))
            goto err;
        m->matmul_macs = macs;
        m->routed_macs = routed;
    }
    budget_weights(m);
    if ((st = budget_check_model(m, err, err_len)) || (st = prepare_weights(m, err, err_len)))
        goto err;
    *out = m;
    return HEARTH_OK;
err:
    hearth_model_free(m);
    return st;
}

void hearth_model_free(struct hearth_model *m)
{
    if (!m)
        return;
    if (m->layers) {
        for (int32_t i = 0; i < m->hp.n_layer + m->has_mtp; i++) {
            struct layer *L = &m->layers[i];
            free(L->attn_norm);
            free(L->ffn_norm);
            free(L->bq);
            free(L->bk);
            free(L->bv);
            free(L->q_norm);
            free(L->k_norm);
            free(L->post_attn_norm);
            free(L->post_ffn_norm);
            free(L->ple_norm);
            free(L->v_norm);
            struct weight *ws[] = {&L->wq,   &L->wk,     &L->wv,       &L->wo,      &L->w_gate,
                                   &L->w_up, &L->w_down, &L->ple_gate, &L->ple_proj};
            for (size_t j = 0; j < sizeof ws / sizeof ws[0]; j++)
                model_release_weight(m, i, ws[j]);
            moe_free(m, i, L->moe);
            dnet_free(m, i, L->dnet);
            if (L->nextn) {
                model_release_weight(m, i, &L->nextn->eh_proj);
                free(L->nextn->enorm);
                free(L->nextn->hnorm);
                free(L->nextn->head_norm);
                free(L->nextn);
            }
        }
        free(m->layers);
    }
    if (m->output.dev != m->tok_embd.dev)
        model_release_weight(m, m->hp.n_layer, &m->output);
    model_release_weight(m, 0, &m->tok_embd);
    free(m->output_norm);
    free(m->ple_proj_norm);
    free(m->rope_freqs);
    model_release_weight(m, 0, &m->ple_model_proj);
    tokenizer_free(m->tok);
    gguf_close(m->gguf);
    free(m->chat_template);
    free(m);
}

void hearth_model_memory(const struct hearth_model *m, struct hearth_memory *out)
{
    struct mem_acct a = m->acct;
    a.b[MEM_WEIGHTS] += m->weight_bytes;
    mem_acct_public(&a, out);
}

int32_t hearth_model_n_vocab(const struct hearth_model *m)
{
    return m->hp.n_vocab;
}
int32_t hearth_model_n_ctx_train(const struct hearth_model *m)
{
    return m->hp.n_ctx_train;
}
const char *hearth_model_arch(const struct hearth_model *m)
{
    return m->arch;
}

bool hearth_model_is_recurrent(const struct hearth_model *m)
{
    return m->hp.recurrent;
}
bool hearth_model_has_mtp(const struct hearth_model *m)
{
    return m->has_mtp;
}
int32_t hearth_model_n_embd(const struct hearth_model *m)
{
    return m->hp.n_embd;
}
uint64_t hearth_model_weight_bytes(const struct hearth_model *m)
{
    return m->weight_bytes;
}

/* Of a total whose routed experts' stacks make up routed, what one token uses. */
static uint64_t per_token(const struct hearth_model *m, uint64_t total, uint64_t routed)
{
    if (m->hp.n_expert <= 0)
        return total;
    return total - routed + routed / (uint64_t)m->hp.n_expert * (uint64_t)m->hp.n_expert_used;
}

uint64_t hearth_model_token_bytes(const struct hearth_model *m)
{
    return per_token(m, m->weight_bytes, m->routed_bytes);
}

double hearth_model_prefill_ops(const struct hearth_model *m, int64_t depth, int64_t n)
{
    const struct hparams *hp = &m->hp;
    uint64_t macs            = per_token(m, m->matmul_macs, m->routed_macs);
    /* the embedding is a lookup, and the output runs for a batch's last token only */
    macs -= (uint64_t)m->tok_embd.n_in * (uint64_t)m->tok_embd.n_out;
    if (m->output.data != m->tok_embd.data)
        macs -= (uint64_t)m->output.n_in * (uint64_t)m->output.n_out;
    double ops = 2.0 * (double)macs * (double)n;
    /* attention: a score and a weighted value per head, dimension and key seen */
    const double per_key = 2.0 * 2.0 * hp->n_head * hp->head_dim;
    for (int32_t l = 0; l < hp->n_layer; l++) {
        if (m->layers[l].dnet)
            continue;
        double keys = 0;
        for (int64_t p = depth; p < depth + n; p++)
            keys += (double)(m->layers[l].swa && hp->n_swa > 0 && p + 1 > hp->n_swa ? hp->n_swa
                                                                                    : p + 1);
        ops += per_key * keys;
    }
    return ops;
}

hearth_token hearth_token_bos(const struct hearth_model *m)
{
    return tokenizer_bos(m->tok);
}
hearth_token hearth_token_eos(const struct hearth_model *m)
{
    return tokenizer_eos(m->tok);
}
bool hearth_vocab_add_bos(const struct hearth_model *m)
{
    return tokenizer_add_bos(m->tok);
}

bool hearth_token_is_eog(const struct hearth_model *m, hearth_token tok)
{
    return tokenizer_is_eog(m->tok, tok);
}

enum hearth_status hearth_tokenize(const struct hearth_model *m, const char *text, size_t len,
                                   bool add_special, bool parse_special, hearth_token **ids,
                                   size_t *n_ids, char *err, size_t err_len)
{
    return tokenizer_encode(m->tok, text, len, add_special, parse_special, ids, n_ids, err,
                            err_len);
}

size_t hearth_token_to_piece(const struct hearth_model *m, hearth_token tok, char *buf, size_t cap)
{
    return tokenizer_decode_token(m->tok, tok, buf, cap);
}

int32_t hearth_model_keep_text(struct hearth_model *m, const char *const *texts, size_t n)
{
    int32_t total = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t k = tokenizer_keep_text(m->tok, texts[i]);
        if (k < 0)
            return -1;
        total += k;
    }
    return total;
}

const char *hearth_model_chat_template(const struct hearth_model *m)
{
    return m->chat_template;
}

const char *hearth_token_text(const struct hearth_model *m, hearth_token tok)
{
    const char *t = tok >= 0 && tok < m->hp.n_vocab ? tokenizer_token_text(m->tok, tok) : NULL;
    return t ? t : "";
}

bool model_vocab_match(const struct hearth_model *target, const struct hearth_model *draft,
                       char *err, size_t err_len)
{
    int32_t nt = hearth_model_n_vocab(target), nd = hearth_model_n_vocab(draft);
    if (nt != nd)
        return fail(false, err, err_len,
                    "the draft model has %d tokens in its vocabulary but the model has %d: a "
                    "draft model must share the vocabulary",
                    nd, nt);
    if (hearth_token_bos(target) != hearth_token_bos(draft) ||
        hearth_token_eos(target) != hearth_token_eos(draft))
        return fail(false, err, err_len,
                    "the draft model's BOS/EOS tokens are %d/%d but the model's %d/%d: a draft "
                    "model must share the vocabulary",
                    hearth_token_bos(draft), hearth_token_eos(draft), hearth_token_bos(target),
                    hearth_token_eos(target));
    char a[256], b[256];
    for (int32_t t = 0; t < nt; t++) {
        size_t la = hearth_token_to_piece(target, t, a, sizeof a);
        size_t lb = hearth_token_to_piece(draft, t, b, sizeof b);
        if (la != lb || memcmp(a, b, la < sizeof a ? la : sizeof a))
            return fail(false, err, err_len,
                        "token %d is '%.40s' in the model but '%.40s' in the draft model: a "
                        "draft model must share the vocabulary",
                        t, la < sizeof a ? a : "(long)", lb < sizeof b ? b : "(long)");
    }
    return true;
}
