/*
 * vk_memlaw.c: the Vulkan backend's memory law (vk_memlaw.h). Every figure
 * is the size an allocation of vk_backend.c, vk_deltanet.c or vk_moe.c
 * asks for.
 */
#include "backend/vk/vk_memlaw.h"

#include <string.h>

#include "backend/backend.h"
#include "gguf/gguf.h"

#define F sizeof(float)

static size_t max3(size_t a, size_t b, size_t c)
{
    const size_t ab = a > b ? a : b;
    return ab > c ? ab : c;
}

/* A vector of the tensor table (norm, bias, DeltaNet's taps and decay): read into f32. */
static bool is_vector(const struct gguf_tensor *t)
{
    return (t->ne[1] == 1 && t->ne[2] == 1 && t->ne[3] == 1) || strstr(t->name, ".ssm_conv1d.");
}

static uint64_t f32_len(const struct gguf_tensor *t)
{
    return (uint64_t)t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3] * F;
}

void memlaw_vk_dnet(const struct hearth_model *m, int32_t n_seq, int32_t n_batch,
                    struct memlaw_vk_dnet *s)
{
    const struct dnet_dims d = m->hp.dnet;
    const size_t nb = (size_t)n_batch, vd = (size_t)d.n_v * d.S;
    s->conv  = (size_t)n_seq * (size_t)(d.n_conv - 1) * d.conv_dim * F;
    s->ssm   = (size_t)n_seq * vd * d.S * F;
    s->qkv   = nb * (size_t)d.conv_dim * F;
    s->z     = nb * vd * F;
    s->beta  = nb * (size_t)d.n_v * F;
    s->g     = nb * (size_t)d.n_v * F;
    s->o     = nb * vd * F;
    s->slots = nb * 4;
}

void memlaw_vk_moe(uint32_t n_batch, uint32_t n_embd, uint32_t n_ff, uint32_t n_expert,
                   uint32_t n_slots, struct memlaw_vk_moe *s)
{
    const size_t nb = n_batch, pairs = nb * n_slots;
    s->logits = nb * (n_expert + 1) * 4;
    s->xq     = nb * n_embd * 4;
    s->ids    = pairs * 4;
    s->wts    = pairs * 4;
    s->hg     = pairs * n_ff * 4;
    s->hu     = pairs * n_ff * 4;
    s->out    = pairs * n_embd * 4;
}

void memlaw_vk(const struct hearth_model *m, const struct hearth_context_params *p, int32_t l0,
               int32_t l1, bool output, int32_t n_ctx_blocks, int n_kv_pools, uint64_t max_buf,
               struct memlaw_vk *v)
{
    const struct hparams *hp = &m->hp;
    const size_t nb = (size_t)p->n_batch, qd = (size_t)hp->n_head * hp->head_dim,
                 kvd = (size_t)hp->n_head_kv * hp->head_dim,
                 xb  = (size_t)hp->n_embd > qd ? (size_t)hp->n_embd : qd;
    memset(v, 0, sizeof *v);
    bool gated = false;
    for (int32_t l = l0; l < l1; l++) {
        gated |= m->layers[l].attn_gated;
        v->n_dnet += model_layer_is_dnet(m, l);
        /* gemma3's window layers have a rope base of their own */
        int b = 0;
        while (b < v->n_cs && v->rope_base[b] != m->layers[l].rope_base)
            b++;
        if (b == v->n_cs && v->n_cs < 2)
            v->rope_base[v->n_cs++] = m->layers[l].rope_base;
    }
    v->moe     = hp->n_expert > 0 && l1 > l0; /* every layer of an MoE model routes */
    v->x       = nb * (size_t)hp->n_embd * F;
    v->xb      = nb * xb * F;
    v->q       = nb * qd * F;
    v->qg      = gated ? nb * 2 * qd * F : 0;
    v->k       = nb * kvd * F;
    v->v       = nb * kvd * F;
    v->att     = nb * qd * F;
    v->hb      = nb * (size_t)hp->n_ff * F;
    v->hb2     = nb * (size_t)hp->n_ff * F;
    v->gate    = gated ? nb * qd * F : 0;
    v->spare   = nb * xb * F;
    size_t in  = max3(xb, (size_t)hp->n_ff, (size_t)hp->n_in_extra);
    v->actq    = nb * in * F;
    v->ids     = nb * 4;
    v->rows    = nb * 4;
    v->kvrows  = nb * 8;
    v->cs      = nb * (size_t)hp->rope_dim * F;
    v->stride  = n_ctx_blocks;
    v->table   = (size_t)p->n_seq_max * (size_t)n_ctx_blocks * 4;
    v->n_table = n_kv_pools;
    for (int64_t i = 0; i < gguf_n_tensors(m->gguf); i++) {
        const struct gguf_tensor *t = gguf_tensor(m->gguf, i);
        const int32_t l             = memlaw_tensor_layer(t->name);
        if (is_vector(t) &&
            ((l >= l0 && l < l1) || (output && !strcmp(t->name, "output_norm.weight"))))
            v->vecs += f32_len(t);
    }
    if (v->n_dnet)
        memlaw_vk_dnet(m, p->n_seq_max, p->n_batch, &v->dn);
    if (v->moe)
        memlaw_vk_moe((uint32_t)nb, (uint32_t)hp->n_embd, (uint32_t)hp->n_ff_exp,
                      (uint32_t)hp->n_expert, (uint32_t)(hp->n_expert_used + (hp->n_ff_shexp > 0)),
                      &v->mx);
    v->host_i32 =
        (nb * 2 > (size_t)p->n_seq_max * n_ctx_blocks ? nb * 2
                                                      : (size_t)p->n_seq_max * n_ctx_blocks) *
        sizeof(int32_t);
    v->host_cs = nb * (size_t)hp->rope_dim * F;
    if (!output)
        return;
    const size_t row   = (size_t)hp->n_vocab * F;
    const uint64_t fit = max_buf ? max_buf / row : nb;
    v->chunk_rows      = (int32_t)(fit < nb ? fit : nb);
    if (v->chunk_rows < 1) /* a row larger than a buffer: ctx_init refuses it */
        v->chunk_rows = 1;
    v->n_chunks    = (int32_t)((nb + (size_t)v->chunk_rows - 1) / (size_t)v->chunk_rows);
    v->chunk       = (size_t)v->chunk_rows * row;
    v->chunk_ids   = (size_t)v->chunk_rows * 4;
    v->chunk_in    = v->n_chunks > 1 ? (size_t)v->chunk_rows * hp->n_embd * F : 0;
    v->host_logits = nb * row;
}

void memlaw_vk_acct(const struct memlaw_vk *v, struct mem_acct *dev, struct mem_acct *host)
{
    if (dev) {
        dev->b[MEM_COMPUTE] += v->x + v->xb + v->q + v->qg + v->k + v->v + v->att + v->hb + v->hb2 +
                               v->gate + v->spare + v->actq + v->ids + v->rows + v->kvrows +
                               (size_t)v->n_cs * v->cs;
        dev->b[MEM_OTHER] += (size_t)v->n_table * v->table;
        dev->b[MEM_WEIGHTS] += v->vecs;
        const struct memlaw_vk_dnet *d = &v->dn;
        const struct memlaw_vk_moe *x  = &v->mx;
        dev->b[MEM_KV] += (size_t)v->n_dnet * (d->conv + d->ssm);
        if (v->n_dnet)
            dev->b[MEM_COMPUTE] += d->qkv + d->z + d->beta + d->g + d->o + d->slots;
        if (v->moe)
            dev->b[MEM_COMPUTE] += x->logits + x->xq + x->ids + x->wts + x->hg + x->hu + x->out;
        dev->b[MEM_OUTPUT] += (size_t)v->n_chunks * v->chunk;
        dev->b[MEM_COMPUTE] += (size_t)v->n_chunks * v->chunk_ids + v->chunk_in;
    }
    if (host) {
        host->b[MEM_OUTPUT] += v->host_logits;
        host->b[MEM_OTHER] += v->host_i32;
        host->b[MEM_COMPUTE] += v->host_cs;
    }
}

void memlaw_vk_ctx(const struct hearth_context *ctx, const struct stage *s, uint64_t max_buf,
                   struct memlaw_vk *out)
{
    const struct kv_cache *kv = &ctx->kv;
    const int32_t stride      = (kv->n_ctx + kv->block_tokens - 1) / kv->block_tokens;
    int n_pools               = 0;
    for (int g = 0; g < KV_GROUPS; g++)
        n_pools += kv->pool[g].n_layer > 0;
    memlaw_vk(ctx->model, &ctx->p, s->place->l0, s->place->l1, s->output, stride, n_pools, max_buf,
              out);
}

/* A device stage's buffers with the logits in one chunk, as budget.c checks them. */
static void vk_stage(const struct hearth_model *m, const struct hearth_context_params *p,
                     int32_t l0, int32_t l1, bool output, int32_t n_ctx_blocks, int n_kv_pools,
                     struct mem_acct *dev, struct mem_acct *host)
{
    struct memlaw_vk v;
    memlaw_vk(m, p, l0, l1, output, n_ctx_blocks, n_kv_pools, 0, &v);
    memlaw_vk_acct(&v, dev, host);
}

const struct backend_law backend_law_vulkan = {.kv_host = false, .host = false, .stage = vk_stage};
