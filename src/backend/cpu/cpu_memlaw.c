/*
 * cpu_memlaw.c: the CPU backend's memory law (cpu_memlaw.h). Every figure
 * is the size an allocation of cpu.c, cpu_moe.c or cpu_deltanet.c asks for.
 */
#include "backend/cpu/cpu_memlaw.h"

#include <string.h>

#include "backend/backend.h"
#include "kernels/kernels.h"

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
    s->ple               = nb * (size_t)hp->n_layer * (size_t)hp->n_embd_pl * F;
    s->ple_h             = s->ple;
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
    const struct dnet_dims d = m->hp.dnet;
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

/* The CPU backend's stage buffers, as cpu.c's ctx_init allocates them (none besides in host). */
static void cpu_stage(const struct hearth_model *m, const struct hearth_context_params *p,
                      int32_t l0, int32_t l1, bool output, int32_t n_ctx_blocks, int n_kv_pools,
                      struct mem_acct *a, struct mem_acct *host)
{
    const struct hparams *hp = &m->hp;
    struct memlaw_cpu_scratch c;
    memlaw_cpu_scratch(hp, p->n_batch, p->n_threads, output, p->mtp, &c);
    a->b[MEM_COMPUTE] += c.x + c.xb + c.q + c.kx + c.vx + c.att + c.hb + c.hb2 + c.scores + c.act +
                         c.act_sum + c.eh + c.ple + c.ple_h;
    a->b[MEM_OUTPUT] += c.logits;
    /* a stage with gated attention keeps the DeltaNet buffers for its q and gate rows */
    const bool moe = hp->n_expert > 0 && l1 > l0;
    bool gated     = false;
    int32_t n_dnet = 0;
    for (int32_t l = l0; l < l1; l++) {
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

const struct backend_law backend_law_cpu = {.kv_host = true, .host = true, .stage = cpu_stage};
