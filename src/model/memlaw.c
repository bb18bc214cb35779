/*
 * memlaw.c: the memory law (memlaw.h). Every figure here is the size an
 * allocation site asks for: cpu.c, cpu_moe.c and cpu_deltanet.c allocate
 * the structs below field by field, kv.c its pools by kv_bytes and
 * kv_table_bytes, snapshot.c by snap_bytes and snap_table_bytes, forward.c
 * its cache's shape by memlaw_kv_params and memlaw_state_cache.
 */
#include "model/memlaw.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "model/deltanet.h"
#include "model/kv.h"
#include "model/snapshot.h"

#define F sizeof(float)

static size_t max3(size_t a, size_t b, size_t c)
{
    const size_t ab = a > b ? a : b;
    return ab > c ? ab : c;
}

void memlaw_cpu_scratch(const struct hparams *hp, int32_t n_batch, int n_threads, bool output,
                        bool nextn, struct memlaw_cpu_scratch *s)
{
    const size_t nb = (size_t)n_batch, d = (size_t)hp->n_embd,
                 qd = (size_t)hp->n_head * hp->head_dim, kvd = (size_t)hp->n_head_kv * hp->head_dim,
                 ff = (size_t)hp->n_ff;
    /* the widest matmul input: f32 is the widest activation encoding (4 bytes an element) */
    size_t max_in = max3(d * (nextn ? 2 : 1), qd, ff);
    if ((size_t)hp->n_in_extra > max_in)
        max_in = (size_t)hp->n_in_extra;
    memset(s, 0, sizeof *s);
    s->act_row           = (max_in * F + 63) / 64 * 64;
    s->x                 = nb * d * F;
    s->xb                = nb * (d > qd ? d : qd) * F;
    s->q                 = nb * qd * F;
    s->kx                = nb * kvd * F;
    s->vx                = nb * kvd * F;
    s->att               = nb * qd * F;
    s->hb                = nb * ff * F;
    s->hb2               = nb * ff * F;
    s->scores_per_thread = ATTN_SCRATCH(hp->head_dim);
    s->scores            = (size_t)n_threads * s->scores_per_thread * F;
    s->act               = nb * s->act_row;
    s->act_sum           = nb * (max_in / 32) * sizeof(struct q8_0_sum);
    s->logits            = output ? nb * (size_t)hp->n_vocab * F : 0;
    s->eh                = nextn ? nb * 2 * d * F : 0;
}

void memlaw_moe_scratch(const struct hparams *hp, int32_t n_batch, struct memlaw_moe_scratch *s)
{
    const size_t nb = (size_t)n_batch, nr = nb * (size_t)(hp->n_expert_used + (hp->n_ff_shexp > 0)),
                 E      = (size_t)hp->n_expert + (hp->n_ff_shexp > 0);
    const size_t max_in = hp->n_embd > hp->n_ff_exp ? (size_t)hp->n_embd : (size_t)hp->n_ff_exp;
    s->act_row          = (max_in * F + 63) / 64 * 64;
    s->probs            = nb * E * F;
    s->sel              = nr * sizeof(int32_t);
    s->wsel             = nr * F;
    s->cnt              = E * sizeof(int32_t);
    s->off              = (E + 1) * sizeof(int32_t);
    s->row              = nr * sizeof(int32_t);
    s->tok              = nr * sizeof(int32_t);
    s->act              = nr * s->act_row;
    s->act_sum          = nr * (max_in / 32 + 1) * sizeof(struct q8_0_sum);
    s->hg               = nr * (size_t)hp->n_ff_exp * F;
    s->hu               = nr * (size_t)hp->n_ff_exp * F;
    s->out              = nr * (size_t)hp->n_embd * F;
}

void memlaw_dnet(const struct hearth_model *m, int32_t n_layer, int32_t n_seq, int32_t n_batch,
                 struct memlaw_dnet *s)
{
    const struct hparams *hp = &m->hp;
    const struct dnet_dims d = dnet_dims_of(m);
    const size_t nb = (size_t)n_batch, vd = (size_t)d.n_v * d.S, ls = (size_t)n_layer * n_seq,
                 n_gate = (size_t)hp->n_head * hp->head_dim;
    s->conv_len         = (size_t)(d.n_conv - 1) * d.conv_dim;
    s->ssm_len          = (size_t)d.n_v * d.S * d.S;
    s->conv             = ls * s->conv_len * F;
    s->ssm              = ls * s->ssm_len * F;
    s->qkv              = nb * (size_t)d.conv_dim * F;
    s->z                = nb * vd * F;
    s->beta             = nb * (size_t)d.n_v * F;
    s->g                = nb * (size_t)d.n_v * F;
    s->o                = nb * vd * F;
    s->ones             = (size_t)d.conv_dim * F;
    s->qg               = nb * 2 * n_gate * F;
    s->gate             = nb * n_gate * F;
    s->snap             = nb * sizeof(float *);
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
    const struct dnet_dims d = dnet_dims_of(m);
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

/* ------------------------------------------------------------ whole figures --- */

int32_t memlaw_stages_of(const struct hearth_model *m, bool mtp, struct memlaw_stage *out)
{
    const struct stage_place *pl = mtp ? &m->mtp_place : m->stage;
    const int32_t n              = mtp ? 1 : m->n_stage;
    for (int32_t i = 0; i < n; i++)
        out[i] = (struct memlaw_stage){.cpu    = pl[i].be == backend_cpu(),
                                       .device = pl[i].device,
                                       .l0     = pl[i].l0,
                                       .l1     = pl[i].l1};
    return n;
}

/* The stage of layer l (the last one for l past every stage's range: the output). */
static int32_t stage_index(const struct memlaw_stage *st, int32_t n_stage, int32_t l)
{
    for (int32_t i = 0; i < n_stage; i++)
        if (l >= st[i].l0 && l < st[i].l1)
            return i;
    return n_stage - 1;
}

int32_t memlaw_tensor_layer(const char *name)
{
    if (strncmp(name, "blk.", 4))
        return -1;
    int32_t l     = 0;
    const char *c = name + 4;
    if (*c < '0' || *c > '9')
        return -1;
    for (; *c >= '0' && *c <= '9' && l < (1 << 26); c++)
        l = l * 10 + (*c - '0');
    return *c == '.' ? l : -1;
}

void memlaw_weights(const struct hearth_model *m, const struct memlaw_stage *st, int32_t n_stage,
                    struct mem_acct *w, struct mem_acct *host)
{
    const int32_t n_layer = m->hp.n_layer + (m->want_mtp && m->hp.n_nextn > 0);
    for (int32_t i = 0; i < n_stage; i++)
        memset(&w[i], 0, sizeof w[i]);
    for (int64_t i = 0; i < gguf_n_tensors(m->gguf); i++) {
        const struct gguf_tensor *t = gguf_tensor(m->gguf, i);
        const int32_t l             = memlaw_tensor_layer(t->name);
        int32_t s;
        if (l >= 0 && l < n_layer)
            s = stage_index(st, n_stage, l);
        else if (!strcmp(t->name, "token_embd.weight"))
            s = 0;
        else if (!strcmp(t->name, "output.weight") || !strcmp(t->name, "output_norm.weight"))
            s = n_stage - 1;
        else
            continue; /* not loaded: mapped, never read */
        w[s].b[MEM_WEIGHTS] += t->size;
        if (is_vector(t)) /* also read into host f32 */
            host->b[MEM_WEIGHTS] += f32_len(t);
    }
}

void memlaw_kv_params(const struct hearth_model *m, const struct hearth_context_params *p,
                      const struct memlaw_stage *st, int32_t n_stage, bool *flags,
                      struct kv_params *kp)
{
    const struct hparams *hp = &m->hp;
    /* [0, nl): window layers; [nl, 2 nl): layers with no K/V (DeltaNet, and all but the
     * head in an MTP context); [2 nl, 3 nl): layers whose stage keeps K/V in the host pool
     * (the head runs where the output does) */
    const int32_t nl = hp->n_layer + (p->mtp ? 1 : 0);
    for (int32_t l = 0; l < nl; l++) {
        const bool head   = l == hp->n_layer;
        flags[l]          = m->layers[l].swa;
        flags[nl + l]     = p->mtp ? !head : model_layer_is_dnet(m, l);
        flags[2 * nl + l] = st[stage_index(st, n_stage, l)].cpu;
    }
    const int32_t per_seq = (p->n_ctx + p->kv_block - 1) / p->kv_block;
    *kp                   = (struct kv_params){.n_layer      = nl,
                                               .kv_dim       = hp->n_head_kv * hp->head_dim,
                                               .n_seq        = p->n_seq_max,
                                               .n_ctx        = p->n_ctx,
                                               .block_tokens = p->kv_block,
                                               .n_blocks     = per_seq * p->n_seq_max,
                                               .type         = p->kv_type,
                                               .type_v       = p->kv_type_v,
                                               .swa          = flags,
                                               .no_kv        = flags + nl,
                                               .host         = flags + 2 * nl,
                                               .n_swa        = hp->n_swa,
                                               .n_blocks_swa = kv_window_blocks(p->n_seq_max, p->n_ctx, hp->n_swa,
                                                                                p->n_batch, p->kv_block)};
}

size_t memlaw_state_len(const struct hearth_model *m, const struct hearth_context_params *p)
{
    if (p->mtp || !m->hp.recurrent)
        return 0;
    int32_t n = 0;
    for (int32_t l = 0; l < m->hp.n_layer; l++)
        n += model_layer_is_dnet(m, l);
    struct memlaw_dnet d;
    memlaw_dnet(m, 1, 1, 1, &d);
    return (size_t)n * (d.conv_len + d.ssm_len);
}

void memlaw_state_cache(const struct hearth_context_params *p, size_t per_block, size_t state_len,
                        struct memlaw_cache *c)
{
    c->n_retain  = 0;
    c->n_cached  = -1;
    c->cap_bytes = -1;
    if (p->cache_bytes < 0)
        return;
    const uint64_t n = per_block ? (uint64_t)p->cache_bytes / per_block : 0;
    c->n_retain      = n > INT32_MAX ? INT32_MAX : (int32_t)n;
    c->cap_bytes     = (int64_t)((uint64_t)c->n_retain * per_block);
    if (!state_len || p->n_state_snapshots <= 0)
        return;
    /* the cap holds blocks and states alike: each retained block is charged the share of a
     * state a sequence's own blocks carry (n_state_snapshots per context) */
    const int32_t per_seq = (p->n_ctx + p->kv_block - 1) / p->kv_block;
    const double block = (double)per_block, state = (double)state_len * F;
    const double share   = state * p->n_state_snapshots / per_seq;
    const int64_t blocks = (int64_t)((double)p->cache_bytes / (block + share));
    c->n_retain          = blocks > INT32_MAX ? INT32_MAX : (int32_t)blocks;
    c->n_cached          = (int32_t)(((double)p->cache_bytes - (double)blocks * block) / state);
    c->cap_bytes         = (int64_t)((double)blocks * block + (double)c->n_cached * state);
}

/* The CPU backend's stage buffers, as cpu.c's ctx_init allocates them. */
static void cpu_stage(const struct hearth_model *m, const struct hearth_context_params *p,
                      const struct memlaw_stage *s, bool output, struct mem_acct *a)
{
    const struct hparams *hp = &m->hp;
    struct memlaw_cpu_scratch c;
    memlaw_cpu_scratch(hp, p->n_batch, p->n_threads, output, p->mtp, &c);
    a->b[MEM_COMPUTE] +=
        c.x + c.xb + c.q + c.kx + c.vx + c.att + c.hb + c.hb2 + c.scores + c.act + c.act_sum + c.eh;
    a->b[MEM_OUTPUT] += c.logits;
    /* a stage with gated attention keeps the DeltaNet buffers for its q and gate rows */
    const bool moe = hp->n_expert > 0 && s->l1 > s->l0;
    bool gated     = false;
    int32_t n_dnet = 0;
    for (int32_t l = s->l0; l < s->l1; l++) {
        n_dnet += model_layer_is_dnet(m, l);
        gated |= m->layers[l].attn_gated;
    }
    if (moe) {
        struct memlaw_moe_scratch e;
        memlaw_moe_scratch(hp, p->n_batch, &e);
        a->b[MEM_COMPUTE] += e.probs + e.sel + e.wsel + e.cnt + e.off + e.row + e.tok + e.act +
                             e.act_sum + e.hg + e.hu + e.out;
    }
    if (n_dnet || gated) {
        struct memlaw_dnet d;
        memlaw_dnet(m, n_dnet, p->n_seq_max, p->n_batch, &d);
        a->b[MEM_KV] += d.conv + d.ssm;
        a->b[MEM_COMPUTE] += d.qkv + d.z + d.beta + d.g + d.o + d.ones + d.qg + d.gate + d.snap;
    }
}

void memlaw_context(const struct hearth_model *m, const struct hearth_context_params *p,
                    const struct memlaw_stage *st, int32_t n_stage, struct mem_acct *dev,
                    struct mem_acct *host)
{
    const struct hparams *hp = &m->hp;
    const int32_t nl         = hp->n_layer + (p->mtp ? 1 : 0);
    const size_t nb          = (size_t)p->n_batch;
    struct kv_params kp;
    for (int32_t i = 0; i < n_stage; i++)
        memset(&dev[i], 0, sizeof dev[i]);
    memset(host, 0, sizeof *host);
    bool *flags = malloc(3 * ((size_t)nl + 1) * sizeof *flags);
    if (!flags)
        return;
    memlaw_kv_params(m, p, st, n_stage, flags, &kp);
    const size_t state_len = memlaw_state_len(m, p);
    struct memlaw_cache c;
    memlaw_state_cache(p, kv_retain_block_len(&kp), state_len, &c);
    kp.retain   = p->cache_bytes >= 0;
    kp.n_retain = c.n_retain;
    /* K/V: each layer's rows where its stage is */
    int n_pools = 0;
    for (int g = 0; g < KV_GROUPS; g++)
        n_pools += kv_layer_bytes(&kp, g) > 0;
    for (int32_t l = 0; l < nl; l++) {
        const int g = kv_group_of(&kp, l);
        if (g != KV_NONE)
            dev[stage_index(st, n_stage, l)].b[MEM_KV] += kv_layer_bytes(&kp, g);
    }
    host->b[MEM_OTHER] += kv_table_bytes(&kp);
    free(flags);
    /* the context's own arrays (forward.c, stages.c) */
    host->b[MEM_OTHER] += 2 * nb * sizeof(int32_t) + (size_t)p->n_seq_max * sizeof(int32_t) +
                          (size_t)n_stage * sizeof(struct stage);
    if (p->keep_hidden || p->mtp)
        host->b[MEM_COMPUTE] += nb * (size_t)hp->n_embd * F;
    if (n_stage > 1)
        host->b[MEM_COMPUTE] += nb * (size_t)hp->n_embd * F;
    if (state_len)
        host->b[MEM_OTHER] += nb * sizeof(float *);
    /* each stage's backend buffers */
    const int32_t per_seq = (p->n_ctx + p->kv_block - 1) / p->kv_block;
    for (int32_t i = 0; i < n_stage; i++) {
        const bool output = i == n_stage - 1;
        if (st[i].cpu)
            cpu_stage(m, p, &st[i], output, &dev[i]);
        else {
            struct memlaw_vk v;
            memlaw_vk(m, p, st[i].l0, st[i].l1, output, per_seq, n_pools, 0, &v);
            memlaw_vk_acct(&v, &dev[i], host);
        }
    }
    /* recurrent-state snapshots and kept states (forward.c, snapshot.c) */
    const int32_t n_snap = p->mtp ? 0 : p->n_state_snapshots;
    if (state_len && n_snap > 0) {
        host->b[MEM_KV] += snap_bytes(p->n_seq_max, n_snap, c.n_cached, state_len);
        host->b[MEM_OTHER] += snap_table_bytes(p->n_seq_max, n_snap, c.n_cached);
    }
    const int32_t n_keep = p->mtp ? 0 : p->n_keep_states;
    if (state_len && n_keep > 0) {
        host->b[MEM_KV] += (size_t)p->n_seq_max * (size_t)n_keep * state_len * F;
        host->b[MEM_OTHER] +=
            (size_t)p->n_seq_max * (sizeof(bool) + 2 * sizeof(int32_t)) + nb * sizeof(float *);
    }
}

uint64_t memlaw_process(const struct hearth_model *m, int32_t n_slots, int32_t n_ctx, int n_threads)
{
    const uint64_t v = (uint64_t)m->hp.n_vocab;
    /* the binary, its libraries and the allocator's own (measured: MEMLAW_BASE) */
    uint64_t n = MEMLAW_BASE;
    /* the file's header, which the tokenizer reads in place (the vocabulary's text) */
    n += gguf_data_offset(m->gguf);
    /* the tokenizer: each token's text, score and kind, and its lookup table; BPE's merges */
    uint64_t n_merges = 0;
    enum gguf_vtype et;
    const int64_t k = gguf_find_key(m->gguf, "tokenizer.ggml.merges");
    if (k < 0 || !gguf_kv_arr(m->gguf, k, &et, &n_merges))
        n_merges = 0;
    n += v * MEMLAW_TOKEN + n_merges * MEMLAW_MERGE;
    /* the server's slots: tokens and seen flags by position, counts, sort space and mask
     * by token (sched.c) */
    n += (uint64_t)n_slots * (((uint64_t)n_ctx + 1) * 5 + v * 12 + (v + 31) / 32 * 4);
    /* thread stacks as deep as the workers go */
    n += (uint64_t)(n_threads + 3) * MEMLAW_STACK;
    return n;
}
