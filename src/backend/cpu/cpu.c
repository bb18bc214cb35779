/*
 * cpu.c: the CPU backend's table and context: the activation buffers, the
 * thread pool, weight preparation (the kernels' pack8 layout), and the
 * entries of the MoE (cpu_moe.c) and DeltaNet (cpu_deltanet.c) operations.
 * The other operations are in cpu_*.c by concept.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/cpu_memlaw.h"
#include "util/errfmt.h"

/* ------------------------------------------------------------------ weights --- */

static bool weight_supported(enum dtype type)
{
    const struct type_kernels *tk = &kernels_get()->type[type];
    return tk->vec_dot && tk->to_float;
}

/* gate and up share one quantized copy of their input rows */
static bool moe_supported(enum dtype gate, enum dtype up, enum dtype down)
{
    const struct kernels *k = kernels_get();
    return k->type[gate].vec_dot_type == k->type[up].vec_dot_type;
}

/* The CPU runs every layer kind the loader accepts. */
static enum hearth_status layer_supported(const struct hearth_model *m, int32_t l, char *err,
                                          size_t err_len)
{
    return HEARTH_OK;
}

static bool vector_to_f32(enum dtype type, const void *src, float *dst, int64_t n)
{
    const struct type_kernels *tk = &kernels_get()->type[type];
    if (!tk->to_float)
        return false;
    tk->to_float(src, dst, n);
    return true;
}

/* Host memory: the budget is the machine's, which load does not check. */
static uint64_t device_memory(int device)
{
    return 0;
}

/*
 * Rewrites w into the kernel's packed layout when the table offers one for
 * its type (and its rows come in whole groups of eight), then hands the
 * source pages back to the kernel: the packed copy replaces them, so the
 * resident set stays one copy of the weights, as llama.cpp's repack does not.
 * Every ISA table offers the same layout, so HEARTH_ISA may pick any after.
 */
static enum hearth_status weight_prepare(struct weight *w, enum weight_use use, char *err,
                                         size_t err_len)
{
    const struct type_kernels *tk = &kernels_get()->type[w->type];
    const size_t len              = (size_t)w->n_out * w->row_len;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), src = (uintptr_t)w->data;
    if (use != WEIGHT_MATMUL || !w->data || !tk->pack8 || !tk->gemm8p || w->n_out % 8) {
        /*
         * Read in place from the mapping. Its pages are mapped now rather
         * than as rows are first read (the token embedding is read a row per
         * token, so a server's resident set would creep up over its life):
         * the memory law counts them from the start, and `hearth fit`
         * predicts the resident set so.
         */
#ifdef MADV_POPULATE_READ
        if (w->data && len)
            madvise((void *)(src & ~(page - 1)), len + (src & (page - 1)), MADV_POPULATE_READ);
#endif
        return HEARTH_OK;
    }
    void *dst = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (dst == MAP_FAILED)
        return fail(HEARTH_ENOMEM, err, err_len, "model: cannot map %zu bytes to repack weights",
                    len);
    /*
     * Both sides' pages mapped in bulk rather than faulted one at a time as
     * the packing first touches them: the faults were most of a packed
     * model's load (bench-1b Q4_0 on a Zen 5 VM: 151k faults and 2.5 s; 950
     * and 1.2 s with these). Transparent huge pages for the copy cut the
     * faults as well but cost decode a tenth (80 to 65-71 tok/s), so not
     * those. Best effort: a kernel before 5.14 refuses, and the pages fault
     * as before.
     */
    mem_populate(dst, len);
#ifdef MADV_POPULATE_READ
    madvise((void *)(src & ~(page - 1)), len + (src & (page - 1)), MADV_POPULATE_READ);
#endif
    /* pairs of groups as one stream where gemm16p reads them so (kernels.h, pack16) */
    const int64_t paired = tk->pack16 ? w->n_out / 16 * 2 : 0;
    for (int64_t g = 0; g < w->n_out / 8; g += g < paired ? 2 : 1) {
        const uint8_t *rows = (const uint8_t *)w->data + (size_t)g * 8 * w->row_len;
        uint8_t *to         = (uint8_t *)dst + (size_t)g * 8 * w->row_len;
        if (g < paired)
            kernels_pack16(tk, w->type, rows, w->row_len, w->n_in, to);
        else
            tk->pack8(rows, w->row_len, w->n_in, to);
    }
    const uintptr_t lo = (src + page - 1) & ~(page - 1), hi = (src + len) & ~(page - 1);
    if (hi > lo)
        madvise((void *)lo, hi - lo, MADV_DONTNEED);
    w->dev     = dst;
    w->dev_len = len;
    return HEARTH_OK;
}

static void weight_release(struct weight *w)
{
    if (w->dev)
        munmap(w->dev, w->dev_len);
    w->dev = NULL;
}

/* ------------------------------------------------------------------ context --- */

static void scratch_free(struct scratch *s)
{
    free(s->x);
    free(s->xb);
    free(s->q);
    free(s->kx);
    free(s->vx);
    free(s->att);
    free(s->hb);
    free(s->hb2);
    free(s->scores);
    free(s->act);
    free(s->act_sum);
    free(s->logits);
    free(s->eh);
    free(s->ple);
    free(s->ple_h);
    memset(s, 0, sizeof *s);
}

static bool scratch_alloc(struct scratch *s, struct mem_acct *a, const struct hparams *hp,
                          int32_t n_batch, int n_threads, bool output, bool nextn)
{
    struct memlaw_cpu_scratch z;
    memlaw_cpu_scratch(hp, n_batch, n_threads, output, nextn, &z);
    const enum mem_kind k = MEM_COMPUTE;
    s->act_row            = z.act_row;
    s->scores_per_thread  = z.scores_per_thread;
    s->x                  = acct_malloc(a, k, z.x);
    s->xb                 = acct_malloc(a, k, z.xb);
    s->q                  = acct_malloc(a, k, z.q);
    s->kx                 = acct_malloc(a, k, z.kx);
    s->vx                 = acct_malloc(a, k, z.vx);
    s->att                = acct_malloc(a, k, z.att);
    s->hb                 = acct_malloc(a, k, z.hb);
    s->hb2                = acct_malloc(a, k, z.hb2);
    s->scores             = acct_malloc(a, k, z.scores);
    s->act                = acct_malloc(a, k, z.act);
    s->act_sum            = acct_malloc(a, k, z.act_sum);
    s->logits             = output ? acct_malloc(a, MEM_OUTPUT, z.logits) : NULL;
    s->eh                 = nextn ? acct_malloc(a, k, z.eh) : NULL;
    s->ple                = z.ple ? acct_malloc(a, k, z.ple) : NULL;
    s->ple_h              = z.ple_h ? acct_malloc(a, k, z.ple_h) : NULL;
    return s->x && s->xb && s->q && s->kx && s->vx && s->att && s->hb && s->hb2 && s->scores &&
           s->act_sum && s->act && (s->logits || !output) && (s->eh || !nextn) &&
           (s->ple || !z.ple) && (s->ple_h || !z.ple_h);
}

static void ctx_free(struct hearth_context *ctx)
{
    struct cpu_ctx *c = cpu_of(ctx);
    if (!c)
        return;
    if (c->tp && c->tp_owned)
        threadpool_free(c->tp);
    scratch_free(&c->s);
    moe_scratch_free(c->moe);
    dnet_cache_free(c->dn);
    free(c);
    ctx->be = NULL;
}

/*
 * The thread pool of an earlier CPU stage of the context, or NULL: stages
 * run one after another, so CPU stages share one pool rather than keep
 * idle workers spinning beside the running ones.
 */
static struct threadpool *shared_pool(const struct hearth_context *ctx)
{
    for (const struct stage *s = ctx->stages; s && s < ctx->st; s++)
        if (s->place->be == backend_cpu() && s->state)
            return ((const struct cpu_ctx *)s->state)->tp;
    return NULL;
}

static enum hearth_status ctx_init(struct hearth_context *ctx, char *err, size_t err_len)
{
    const struct hearth_model *m          = ctx->model;
    const struct hparams *hp              = &m->hp;
    const struct hearth_context_params *p = &ctx->p;
    const int32_t l0 = ctx->st->place->l0, l1 = ctx->st->place->l1;
    bool moe = false, dnet = false, nextn = false;
    for (int32_t l = l0; l < l1; l++) {
        moe |= m->layers[l].moe != NULL;
        dnet |= m->layers[l].dnet != NULL || m->layers[l].attn_gated;
        nextn |= m->layers[l].nextn != NULL;
    }
    struct cpu_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return fail(HEARTH_ENOMEM, err, err_len, "context: out of memory");
    ctx->be = c;
    c->k    = kernels_get();
    if (!scratch_alloc(&c->s, &c->acct, hp, p->n_batch, p->n_threads, ctx->st->output, nextn) ||
        (moe && !(c->moe = moe_scratch_new(hp, p->n_batch, &c->acct))))
        return fail(HEARTH_ENOMEM, err, err_len, "context: out of memory for a batch of %d",
                    p->n_batch);
    if (dnet && !(c->dn = dnet_cache_new(m, l0, l1, p->n_seq_max, p->n_batch, &c->acct)))
        return fail(HEARTH_ENOMEM, err, err_len, "context: out of memory for the recurrent state");
    if ((c->tp = shared_pool(ctx)))
        return HEARTH_OK;
    if (!(c->tp = threadpool_new(p->n_threads)))
        return fail(HEARTH_ENOMEM, err, err_len, "context: cannot start %d threads", p->n_threads);
    c->tp_owned = true;
    return HEARTH_OK;
}

static void ctx_memory(const void *state, struct mem_acct *dev, struct mem_acct *host)
{
    (void)host;
    mem_acct_add(dev, &((const struct cpu_ctx *)state)->acct);
}

static void seq_reset(struct hearth_context *ctx, int32_t seq)
{
    dnet_cache_reset(cpu_of(ctx)->dn, seq);
}

static size_t state_len(const struct hearth_context *ctx)
{
    const struct cpu_ctx *c = ctx->be;
    return c->dn ? dnet_state_len(c->dn) : 0;
}

static void state_load(struct hearth_context *ctx, int32_t seq, const float *src)
{
    dnet_state_load(cpu_of(ctx)->dn, seq, src);
}

static float **state_save_rows(struct hearth_context *ctx)
{
    return dnet_snap_rows(cpu_of(ctx)->dn);
}

/* The CPU's K/V is kv.c's host pool, which kv.c copies itself. */
static void kv_copy(struct hearth_context *ctx, int group, int32_t dst, int32_t src, int32_t n_rows)
{
}

float *cpu_act(struct hearth_context *ctx, enum act a)
{
    struct scratch *s = &cpu_of(ctx)->s;
    switch (a) {
    case ACT_X:
        return s->x;
    case ACT_XB:
        return s->xb;
    case ACT_Q:
        return s->q;
    case ACT_QG:
        return dnet_gate_rows(ctx);
    case ACT_K:
        return s->kx;
    case ACT_V:
        return s->vx;
    case ACT_ATT:
        return s->att;
    case ACT_HB:
        return s->hb;
    case ACT_HB2:
        return s->hb2;
    case ACT_LOGITS:
    case ACT_COUNT:
        break;
    }
    return s->logits;
}

void cpu_run_rows(struct hearth_context *ctx, threadpool_fn fn, void *arg, int32_t n)
{
    if (n == 1)
        fn(arg, 0, 1);
    else
        threadpool_run(cpu_of(ctx)->tp, fn, arg);
}

/* ------------------------------------------------------------ the operations --- */

/* The batch and the block tables are host memory the operations read in place. */
static void batch_begin(struct hearth_context *ctx, const struct hearth_batch *b) {}

static void moe(struct hearth_context *ctx, int32_t l, int32_t n, int32_t n_gemm)
{
    struct scratch *s = &cpu_of(ctx)->s;
    moe_ffn(ctx, ctx->model->layers[l].moe, s->xb, s->x, n, n_gemm);
}

static void deltanet(struct hearth_context *ctx, const struct hearth_batch *b, int32_t l)
{
    struct scratch *s = &cpu_of(ctx)->s;
    dnet_forward(ctx, b, l, s->xb, s->xb);
}

static void residual_get(struct hearth_context *ctx, int32_t n, float *dst)
{
    memcpy(dst, cpu_of(ctx)->s.x, (size_t)n * ctx->model->hp.n_embd * sizeof(float));
}

static void residual_set(struct hearth_context *ctx, int32_t n, const float *src)
{
    memcpy(cpu_of(ctx)->s.x, src, (size_t)n * ctx->model->hp.n_embd * sizeof(float));
}

static const float *logits(struct hearth_context *ctx, int32_t n)
{
    return cpu_of(ctx)->s.logits;
}

static const struct backend cpu = {
    .name             = "cpu",
    .kv_host          = true,
    .moe_stacks       = false,
    .kind             = BACKEND_CPU,
    .law              = &backend_law_cpu,
    .weight_supported = weight_supported,
    .moe_supported    = moe_supported,
    .layer_supported  = layer_supported,
    .vector_to_f32    = vector_to_f32,
    .device_memory    = device_memory,
    .weight_prepare   = weight_prepare,
    .weight_release   = weight_release,
    .ctx_init         = ctx_init,
    .ctx_free         = ctx_free,
    .ctx_memory       = ctx_memory,
    .seq_reset        = seq_reset,
    .state_len        = state_len,
    .state_load       = state_load,
    .state_save_rows  = state_save_rows,
    .kv_copy          = kv_copy,
    .batch_begin      = batch_begin,
    .residual_get     = residual_get,
    .residual_set     = residual_set,
    .embed            = cpu_op_embed,
    .rmsnorm          = cpu_op_rmsnorm,
    .matmul           = cpu_op_matmul,
    .qkv_store        = cpu_op_qkv_store,
    .attention        = cpu_op_attention,
    .gated_act        = cpu_op_gated_act,
    .add              = cpu_op_add,
    .moe              = moe,
    .deltanet         = deltanet,
    .gather           = cpu_op_gather,
    .softcap          = cpu_op_softcap,
    .nextn_input      = cpu_op_nextn_input,
    .ple_input        = cpu_op_ple_input,
    .layer_tail       = cpu_op_layer_tail,
    .logits           = logits,
};

const struct backend *backend_cpu(void)
{
    return &cpu;
}
