/*
 * memlaw.c: the memory law (memlaw.h). Every figure here is the size an
 * allocation site asks for: kv.c its pools by kv_bytes and kv_table_bytes,
 * snapshot.c by snap_bytes and snap_table_bytes, forward.c its cache's
 * shape by memlaw_kv_params and memlaw_state_cache. Each stage's buffers
 * are its backend's own law (struct backend_law), which the backend
 * allocates by.
 */
#include "model/memlaw.h"

#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "model/kv.h"
#include "model/snapshot.h"

#define F sizeof(float)

/* A vector of the tensor table (norm, bias, DeltaNet's taps and decay): read into f32. */
static bool is_vector(const struct gguf_tensor *t)
{
    return (t->ne[1] == 1 && t->ne[2] == 1 && t->ne[3] == 1) || strstr(t->name, ".ssm_conv1d.");
}

static uint64_t f32_len(const struct gguf_tensor *t)
{
    return (uint64_t)t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3] * F;
}

/* ------------------------------------------------------------ whole figures --- */

int32_t memlaw_stages_of(const struct hearth_model *m, bool mtp, struct memlaw_stage *out)
{
    const struct stage_place *pl = mtp ? &m->mtp_place : m->stage;
    const int32_t n              = mtp ? 1 : m->n_stage;
    for (int32_t i = 0; i < n; i++)
        out[i] = (struct memlaw_stage){
            .kind = pl[i].be->kind, .device = pl[i].device, .l0 = pl[i].l0, .l1 = pl[i].l1};
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
        else if (!strcmp(t->name, "token_embd.weight") || !strcmp(t->name, "rope_freqs.weight") ||
                 !strncmp(t->name, "per_layer_", 10))
            s = 0; /* gemma4's per-layer inputs run with the embedding */
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
        flags[nl + l]     = p->mtp ? !head : model_layer_is_dnet(m, l) || m->layers[l].kv_reuse;
        flags[2 * nl + l] = backend_law_of(st[stage_index(st, n_stage, l)].kind)->kv_host;
    }
    const int32_t per_seq = (p->n_ctx + p->kv_block - 1) / p->kv_block;
    *kp                   = (struct kv_params){.n_layer      = nl,
                                               .kv_dim       = model_kv_dim(m),
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
    /* a layer's conv window, then its delta-rule matrices: the layout of every backend's
     * state_len (test_memlaw holds the snapshots' bytes to what the backends allocate) */
    const struct dnet_dims *d = &m->hp.dnet;
    return (size_t)n * ((size_t)(d->n_conv - 1) * d->conv_dim + (size_t)d->n_v * d->S * d->S);
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
        const bool output             = i == n_stage - 1;
        const struct backend_law *law = backend_law_of(st[i].kind);
        law->stage(m, p, st[i].l0, st[i].l1, output, per_seq, n_pools, &dev[i], host);
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
