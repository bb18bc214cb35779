/*
 * llamacpp.c: llama.cpp's CPU memory for a llama-server run (llamacpp.h).
 *
 * Context sizes follow llama_context: -c rounded up to 256; with one stream
 * per slot each stream gets n_ctx / np rounded up to 256 (which can make the
 * total larger than asked). The caches are exact sums of rows. The compute
 * buffer is ggml-alloc's high-water mark over the reserve graphs of
 * min(n_ctx, n_ubatch) tokens and of one token a slot, replayed through the
 * allocator's rules (llamacpp_graph.c).
 */
#include "fit/llamacpp.h"

#include <string.h>

#include "fit/llamacpp_graph.h"
#include "gguf/gguf.h"
#include "kernels/kernels.h"
#include "model/deltanet.h"
#include "model/model.h"
#include "util/errfmt.h"

#define PAD(x, n) (((x) + (n)-1) / (n) * (n))

static bool quantized(enum dtype t)
{
    return t != DTYPE_F32 && t != DTYPE_F16 && t != DTYPE_BF16;
}

/* Whether the CPU backend repacks a matmul weight of this type and shape (ggml-cpu/repack.cpp). */
static bool repacked(enum llamacpp_isa isa, const struct gguf_tensor *t)
{
    int64_t rows = 0;
    if (t->n_dims < 2 || t->n_dims > 3)
        return false;
    switch (isa) {
    case LLAMACPP_ISA_AVX512:
        if (t->type == DTYPE_Q2_K)
            rows = 8;
        /* fall through */
    case LLAMACPP_ISA_AVX2:
        if (t->type == DTYPE_Q4_0 || t->type == DTYPE_Q4_K || t->type == DTYPE_IQ4_NL)
            rows = 8;
        break;
    case LLAMACPP_ISA_NEON:
        if (t->type == DTYPE_Q4_0 || t->type == DTYPE_IQ4_NL || t->type == DTYPE_Q8_0)
            rows = 4;
        else if (t->type == DTYPE_Q4_K || t->type == DTYPE_Q5_K || t->type == DTYPE_Q6_K)
            rows = 8;
        break;
    case LLAMACPP_ISA_NONE:
        break;
    }
    return rows && t->ne[1] % rows == 0;
}

/*
 * The model buffers: every repackable matmul weight is copied into the
 * repack buffer; the token embedding is read by row, so it stays mapped,
 * and its tied output copy is repacked when its type allows. The mapping
 * spans the file from the first to the last byte of what it still holds.
 */
static void model_buffers(const struct hearth_model *m, enum llamacpp_isa isa,
                          struct llamacpp_memory *out)
{
    const bool tied = !gguf_find_tensor(m->gguf, "output.weight");
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int64_t i = 0; i < gguf_n_tensors(m->gguf); i++) {
        const struct gguf_tensor *t = gguf_tensor(m->gguf, i);
        bool rep                    = repacked(isa, t);
        if (!strcmp(t->name, "token_embd.weight")) {
            if (tied && rep)
                out->repack += t->size;
            rep = false;
        }
        if (rep) {
            out->repack += t->size;
            continue;
        }
        if (t->offset < lo)
            lo = t->offset;
        if (t->offset + t->size > hi)
            hi = t->offset + t->size;
    }
    out->mapped = hi > lo ? hi - lo : 0;
}

struct geometry {
    int64_t n_head_kv, head_k, head_v, n_vocab;
    int64_t n_attn, n_swa_layers, n_rec; /* layers of each kind (MTP blocks have none) */
    struct dnet_dims dnet;               /* the recurrent layers' shapes (n_rec > 0) */
};

static void geometry_of(const struct hearth_model *m, struct geometry *g)
{
    const struct hparams *hp = &m->hp;
    memset(g, 0, sizeof *g);
    g->n_head_kv = hp->n_head_kv;
    uint32_t head_v;
    g->head_k = hp->head_dim; /* attention.key_length, else n_embd / n_head */
    /* hearth runs K and V heads of one width; llama.cpp reads V's apart */
    g->head_v  = model_arch_u32(m, "attention.value_length", &head_v) ? (int64_t)head_v
                                                                      : hp->n_embd / hp->n_head;
    g->n_vocab = hp->n_vocab;
    for (int32_t l = 0; l < hp->n_layer; l++) {
        if (model_layer_is_dnet(m, l))
            g->n_rec++;
        else if (m->layers[l].swa)
            g->n_swa_layers++;
        else
            g->n_attn++;
    }
    if (g->n_rec)
        g->dnet = dnet_dims_of(m);
}

/*
 * The widths of the Hadamard rotations llama.cpp applies around a quantized
 * K and V cache (its k_rot and v_rot inputs); 0 where there is none.
 */
static void rotations(const struct geometry *g, const struct llamacpp_params *p, int64_t *k_rot,
                      int64_t *v_rot)
{
    *k_rot = *v_rot = 0;
    if (quantized(p->type_k) && g->head_k % 64 == 0)
        for (*k_rot = 64; g->head_k % (2 * *k_rot) == 0;)
            *k_rot *= 2;
    if (quantized(p->type_v) && g->head_v % 64 == 0)
        *v_rot = 64;
}

enum hearth_status llamacpp_memory_of(const struct hearth_model *m, const struct llamacpp_params *p,
                                      struct llamacpp_memory *out, char *err, size_t err_len)
{
    memset(out, 0, sizeof *out);
    if (p->n_parallel < 1 || p->n_ubatch < 1 || p->n_batch < 1 || p->n_ctx < 0)
        return fail(HEARTH_EINVAL, err, err_len,
                    "fit: slots, batch and micro-batch must be at least 1");
    if (quantized(p->type_v) && !p->flash_attn)
        return fail(HEARTH_EINVAL, err, err_len,
                    "fit: llama.cpp needs flash attention for a quantized V cache");
    if (m->hp.n_expert > LLAMACPP_MAX_EXPERTS)
        return fail(HEARTH_EINVAL, err, err_len,
                    "fit: llama.cpp refuses this model: it has %d experts a layer, llama.cpp at "
                    "most %d",
                    m->hp.n_expert, LLAMACPP_MAX_EXPERTS);
    /* gemma4's graph (per-layer inputs, layers of two shapes, shared K/V) is not replayed
     * yet: a figure from the llama block's graph would be a guess */
    if (m->hp.n_embd_pl || m->rope_freqs || (m->layers && m->layers[0].head_dim))
        return fail(HEARTH_EUNSUPPORTED, err, err_len,
                    "fit: llama.cpp's %s buffers are not modelled yet (its per-layer shapes, "
                    "shared K/V and per-layer inputs); plan it for hearth's runtime",
                    m->arch);
    struct geometry g;
    geometry_of(m, &g);
    for (int w = 0; w < 2; w++) {
        const enum dtype t   = w ? p->type_v : p->type_k;
        const int64_t head   = w ? g.head_v : g.head_k;
        const uint32_t block = dtype_get(t)->block;
        if (head % block)
            return fail(HEARTH_EINVAL, err, err_len,
                        "fit: llama.cpp refuses a %s %s cache here: its blocks of %u values do "
                        "not divide the heads' %lld",
                        dtype_name(t), w ? "V" : "K", block, (long long)head);
    }
    model_buffers(m, p->isa, out);

    const int64_t np = p->n_parallel, c = p->n_ctx ? p->n_ctx : m->hp.n_ctx_train;
    int64_t n_ctx = PAD(c, 256), cells = n_ctx, streams = 1;
    if (!p->unified) {
        cells   = PAD(n_ctx / np, 256);
        n_ctx   = cells * np;
        streams = np;
    }
    const int64_t n_batch  = c < p->n_batch ? c : p->n_batch; /* of -c as given */
    const int64_t n_ubatch = n_batch < p->n_ubatch ? n_batch : p->n_ubatch;
    const int64_t T        = n_ctx < n_ubatch ? n_ctx : n_ubatch;
    const int32_t n_swa    = m->hp.n_swa;
    int64_t swa_cells      = PAD((int64_t)n_swa * (p->unified ? np : 1) + n_ubatch, 256);
    if (swa_cells > cells)
        swa_cells = cells;
    out->n_ctx     = (int32_t)n_ctx;
    out->n_ctx_seq = (int32_t)cells;

    const uint64_t cell = dtype_row_len(p->type_k, g.n_head_kv * g.head_k) +
                          dtype_row_len(p->type_v, g.n_head_kv * g.head_v);
    out->kv = (uint64_t)streams * cell *
              ((uint64_t)g.n_attn * cells + (uint64_t)g.n_swa_layers * swa_cells);
    if (g.n_rec) { /* f32 conv tails and S x S states of every value head */
        const struct dnet_dims *d = &g.dnet;
        const uint64_t r          = (uint64_t)(d->n_conv - 1) * (uint64_t)d->conv_dim;
        const uint64_t s          = (uint64_t)d->S * d->S * d->n_v;
        out->rs                   = (uint64_t)g.n_rec * np * 4 * (r + s);
    }
    out->output              = 4 * (uint64_t)g.n_vocab * np;
    struct llamacpp_graph gp = {
        .n_tokens   = T,
        .n_seq_max  = np,
        .n_stream   = streams,
        .cells      = cells,
        .swa_cells  = swa_cells,
        .flash_attn = p->flash_attn,
        .type_k     = p->type_k,
        .type_v     = p->type_v,
    };
    rotations(&g, p, &gp.k_rot, &gp.v_rot);
    out->compute = llamacpp_graph_compute(m, &gp);
    if (!out->compute)
        return fail(HEARTH_ENOMEM, err, err_len,
                    "fit: replaying llama.cpp's allocator failed (out of memory, or more "
                    "free blocks than ggml's allocator keeps)");
    return HEARTH_OK;
}

enum hearth_status llamacpp_memory(const char *path, const struct llamacpp_params *p,
                                   struct llamacpp_memory *out, char *err, size_t err_len)
{
    struct hearth_model *m;
    enum hearth_status st = model_describe(path, false, &m, err, err_len);
    if (st == HEARTH_OK) {
        st = llamacpp_memory_of(m, p, out, err, err_len);
        hearth_model_free(m);
    }
    return st;
}

/* Key of f as a string ("" when absent), and an id key as a number (-1 when absent). */
static void key_str(const struct gguf_file *f, const char *key, char *buf, size_t cap)
{
    if (!gguf_get_str(f, key, buf, cap))
        buf[0] = 0;
}

static int64_t key_id(const struct gguf_file *f, const char *key)
{
    uint32_t v;
    return gguf_get_u32(f, key, &v) ? (int64_t)v : -1;
}

bool llamacpp_vocab_compatible(const struct hearth_model *target, const struct hearth_model *draft,
                               char *err, size_t err_len)
{
    const struct gguf_file *t = target->gguf, *d = draft->gguf;
    char mt[64], md[64];
    key_str(t, "tokenizer.ggml.model", mt, sizeof mt);
    key_str(d, "tokenizer.ggml.model", md, sizeof md);
    if (strcmp(mt, md))
        return fail(false, err, err_len,
                    "llama.cpp refuses this draft model: its tokenizer is '%s', the model's '%s'",
                    md, mt);
    static const char *const ids[] = {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"};
    for (int i = 0; i < 2; i++)
        if (key_id(t, ids[i]) != key_id(d, ids[i]))
            return fail(
                false, err, err_len,
                "llama.cpp refuses this draft model: its %s token is %lld, the model's %lld",
                i ? "EOS" : "BOS", (long long)key_id(d, ids[i]), (long long)key_id(t, ids[i]));
    const int64_t nt = target->hp.n_vocab, nd = draft->hp.n_vocab;
    if (nt - nd > 128 || nd - nt > 128)
        return fail(false, err, err_len,
                    "llama.cpp refuses this draft model: it has %lld tokens, the model %lld (at "
                    "most 128 apart)",
                    (long long)nd, (long long)nt);
    const int64_t kt = gguf_find_key(t, "tokenizer.ggml.tokens"),
                  kd = gguf_find_key(d, "tokenizer.ggml.tokens");
    for (int64_t i = 5; i < (nt < nd ? nt : nd); i++) {
        struct gguf_str a, b;
        if (!gguf_arr_str(t, kt, (uint64_t)i, &a) || !gguf_arr_str(d, kd, (uint64_t)i, &b))
            return fail(false, err, err_len, "the token list cannot be read");
        if (a.len != b.len || memcmp(a.ptr, b.ptr, a.len))
            return fail(false, err, err_len,
                        "llama.cpp refuses this draft model: token %lld is '%.*s', the model's "
                        "'%.*s'",
                        (long long)i, (int)(b.len < 40 ? b.len : 40), b.ptr,
                        (int)(a.len < 40 ? a.len : 40), a.ptr);
    }
    return true;
}

enum llamacpp_isa llamacpp_isa_host(void)
{
    if (kernels_find("avx512"))
        return LLAMACPP_ISA_AVX512;
    if (kernels_find("avx2"))
        return LLAMACPP_ISA_AVX2;
    if (kernels_find("neon"))
        return LLAMACPP_ISA_NEON;
    return LLAMACPP_ISA_NONE;
}
