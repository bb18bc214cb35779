/*
 * cpu_moe.c: the CPU backend's moe operation: the routed mixture-of-experts
 * FFN of qwen3moe and qwen35moe, computed as llama.cpp's build_moe_ffn does
 * for it: router logits, softmax over all
 * experts, the n_expert_used most probable (ties to the lower index), their
 * probabilities divided by their sum, each chosen expert a SwiGLU FFN, the
 * outputs scaled by their weights and added slot by slot, most probable
 * first, then added to the residual.
 *
 * A micro-batch's (token, slot) pairs are sorted by expert, so each expert
 * runs one matmul over all its tokens and its weights are read once per
 * batch; a decode step touches only the routed experts' rows. Each expert's
 * matrices are a slice of the file's stacked 3-D tensor, repacked like any
 * weight. Typical sizes: Qwen3-30B-A3B has 128 experts of width 768, 8 used.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/cpu_memlaw.h"
#include "kernels/ggml_dot.h"
#include "kernels/ref.h"

/* Rows are sorted by expert: "row" below means a (token, slot) pair's place in that order. */
struct moe_scratch {
    int32_t cap;              /* tokens per batch at most */
    float *probs;             /* [cap][n_expert] router probabilities */
    int32_t *sel;             /* [cap][n_slots] chosen experts, most probable first */
    float *wsel;              /* [cap][n_slots] their renormalised weights */
    int32_t *cnt;             /* [n_mats] rows routed to each expert */
    int32_t *off;             /* [n_mats + 1] each expert's first row */
    int32_t *row;             /* [cap * n_slots] row of pair t * n_slots + s */
    int32_t *tok;             /* [cap * n_slots] token of each row */
    void *act;                /* [cap * n_slots][act_row] a matmul's quantized input rows */
    size_t act_row;           /* bytes; f32 of the wider of n_embd and n_ff, the widest encoding */
    struct q8_0_sum *act_sum; /* [cap * n_slots][n_in / 32] Q8_0 block sums of act's rows, rows
                                 as long as the matmul's input (the kernels' layout) */
    float *hg, *hu;           /* [cap * n_slots][n_ff] gate and up outputs */
    float *out;               /* [cap * n_slots][n_embd] down outputs */
};

struct moe_scratch *moe_scratch_new(const struct hparams *hp, int32_t n_batch, struct mem_acct *a)
{
    struct moe_scratch *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    struct memlaw_moe_scratch z;
    memlaw_moe_scratch(hp, n_batch, &z);
    const enum mem_kind k = MEM_COMPUTE;
    s->cap                = n_batch;
    s->act_row            = z.act_row;
    s->probs              = acct_malloc(a, k, z.probs);
    s->sel                = acct_malloc(a, k, z.sel);
    s->wsel               = acct_malloc(a, k, z.wsel);
    s->cnt                = acct_malloc(a, k, z.cnt);
    s->off                = acct_malloc(a, k, z.off);
    s->row                = acct_malloc(a, k, z.row);
    s->tok                = acct_malloc(a, k, z.tok);
    s->act                = acct_malloc(a, k, z.act);
    s->act_sum            = acct_malloc(a, k, z.act_sum);
    s->hg                 = acct_malloc(a, k, z.hg);
    s->hu                 = acct_malloc(a, k, z.hu);
    s->out                = acct_malloc(a, k, z.out);
    if (!s->probs || !s->sel || !s->wsel || !s->cnt || !s->off || !s->row || !s->tok || !s->act ||
        !s->act_sum || !s->hg || !s->hu || !s->out) {
        moe_scratch_free(s);
        return NULL;
    }
    return s;
}

void moe_scratch_free(struct moe_scratch *s)
{
    if (!s)
        return;
    free(s->probs);
    free(s->sel);
    free(s->wsel);
    free(s->cnt);
    free(s->off);
    free(s->row);
    free(s->tok);
    free(s->act);
    free(s->act_sum);
    free(s->hg);
    free(s->hu);
    free(s->out);
    free(s);
}

/* ------------------------------------------------------------------ routing --- */

struct job {
    struct hearth_context *ctx;
    const struct kernels *k;
    const struct moe *moe;
    struct moe_scratch *s;
    const float *in; /* [n][n_embd] normed rows */
    float *x;        /* [n][n_embd] residual */
    int32_t n;
    int32_t n_gemm;          /* rows llama.cpp's router matmul would see (its arithmetic varies) */
    const struct weight *w;  /* the matmul's weights: an array indexed by expert */
    const struct weight *w2; /* a second array over the same input (up beside gate), or NULL */
    float *out, *out2;       /* [rows][w->n_out] outputs by row */
};

/* Converts n_in floats to the activation type t wants, with Q8_0 block sums. */
static void to_act(const struct kernels *k, enum dtype t, const float *src, int64_t n_in, void *dst,
                   struct q8_0_sum *sum)
{
    const enum dtype at = k->type[t].vec_dot_type;
    if (at == DTYPE_F32)
        memcpy(dst, src, (size_t)n_in * sizeof(float));
    else
        k->type[at].from_float(src, dst, n_in);
    if (at == DTYPE_Q8_0)
        q8_0_sums(dst, n_in, sum);
}

/*
 * An f32 router row against an f32 input, summed as llama.cpp's AVX-512
 * build sums it: a matmul over two or more rows goes through llamafile's
 * tinyBLAS (sixteen fma lanes over the whole row, then one reduction) when
 * n is a multiple of 16 and the expert count of 4; otherwise ggml_vec_dot_f32
 * runs (four sixteen-lane accumulators over 64-element steps, folded
 * pairwise, reduced, then a scalar tail). A last-bit difference here moves
 * the routing weights, which random-weight test models feel.
 */
static float router_dot(const float *w, const float *x, int64_t n, bool tinyblas)
{
    if (tinyblas) {
        float acc[16] = {0};
        for (int64_t i = 0; i < n; i += 16)
            for (int l = 0; l < 16; l++)
                acc[l] = fmaf(w[i + l], x[i + l], acc[l]);
        return ggml_reduce16(acc);
    }
    return ggml_vec_dot_f32_ref(w, x, n);
}

/*
 * ggml's soft_max on the AVX-512 build the references come from: the max,
 * exp(x - max) by sixteen-lane chunks (ggml's expf, each chunk reduced to a
 * float and added in double), a libm tail, then a multiply by the f32
 * reciprocal of the sum. E values per token, so the scalar definition is
 * fast enough.
 */
static void router_softmax(float *p, int32_t n)
{
    float max = -INFINITY;
    for (int32_t i = 0; i < n; i++)
        max = max > p[i] ? max : p[i];
    const float inv = (float)(1.0 / ref_softmax_tile(p, p, max, n));
    for (int32_t i = 0; i < n; i++)
        p[i] *= inv;
}

/*
 * Router logits, probabilities and the top n_used with their weights, per
 * token. Selection is a descending sort that keeps equal probabilities in
 * index order, as llama.cpp's argsort (std::sort, an insertion sort below
 * seventeen elements) does for expert counts up to 16.
 */
static void route(void *arg, int ith, int nth)
{
    struct job *j          = arg;
    const struct moe *me   = j->moe;
    struct moe_scratch *s  = j->s;
    const struct weight *r = &me->router;
    const int32_t E = me->n_expert, K = me->n_used, KS = me->n_slots;
    const bool tinyblas = j->n_gemm >= 2 && r->n_in % 16 == 0 && E % 4 == 0;
    long t0, t1;
    threadpool_split(j->n, ith, nth, &t0, &t1);
    for (long t = t0; t < t1; t++) {
        /* this token's row of act is free until the experts' inputs are written */
        uint8_t *a = (uint8_t *)s->act + t * s->act_row;
        to_act(j->k, r->type, j->in + t * me->n_embd, r->n_in, a, s->act_sum + t * (r->n_in / 32));
        float *p                      = s->probs + t * E;
        const struct type_kernels *tk = &j->k->type[r->type];
        for (int32_t e = 0; e < E; e++) {
            const uint8_t *wr = (const uint8_t *)r->data + (size_t)e * r->row_len;
            if (r->type == DTYPE_F32)
                p[e] = router_dot((const float *)wr, (const float *)a, r->n_in, tinyblas);
            else
                tk->vec_dot(r->n_in, &p[e], wr, a);
        }
        router_softmax(p, E);
        int32_t *sel = s->sel + t * KS;
        float *w     = s->wsel + t * KS;
        for (int32_t k = 0; k < K; k++) {
            int32_t best = -1;
            for (int32_t e = 0; e < E; e++) {
                bool taken = false;
                for (int32_t q = 0; q < k && !taken; q++)
                    taken = sel[q] == e;
                if (!taken && (best < 0 || p[e] > p[best]))
                    best = e;
            }
            sel[k] = best;
            w[k]   = p[best];
        }
        /* Qwen3-MoE's norm_topk_prob: ggml's sum_rows (double), clamped, then a division */
        double sum = 0;
        for (int32_t k = 0; k < K; k++)
            sum += (double)w[k];
        float fs = (float)sum;
        if (fs < 6.103515625e-5f)
            fs = 6.103515625e-5f;
        for (int32_t k = 0; k < K; k++)
            w[k] = w[k] / fs;
        if (me->shared_gate) {
            /* a one-row f32 matmul: ggml_vec_dot_f32, then ggml's sigmoid */
            const float gl = router_dot(me->shared_gate, j->in + t * me->n_embd, me->n_embd, false);
            sel[K]         = me->n_expert;
            w[K]           = 1.0f / (1.0f + expf(-gl));
        }
    }
}

/* Sorts the batch's (token, slot) pairs by expert into rows: off, row, tok. */
static void bucket(struct moe_scratch *s, const struct moe *me, int32_t n)
{
    const int32_t E = me->n_mats, K = me->n_slots;
    memset(s->cnt, 0, (size_t)E * sizeof(int32_t));
    for (int32_t i = 0; i < n * K; i++)
        s->cnt[s->sel[i]]++;
    s->off[0] = 0;
    for (int32_t e = 0; e < E; e++)
        s->off[e + 1] = s->off[e] + s->cnt[e];
    memset(s->cnt, 0, (size_t)E * sizeof(int32_t));
    for (int32_t i = 0; i < n * K; i++) {
        const int32_t e = s->sel[i], r = s->off[e] + s->cnt[e]++;
        s->row[i] = r;
        s->tok[r] = i / K;
    }
}

/* ---------------------------------------------------------------- the experts --- */

/* Tokens per pass over a group of weight rows, as cpu_matmul.c tiles them. */
#define TOKEN_TILE 64

/* Groups of eight rows a work item covers: two where the weights lie in pack16 pairs. */
static long unit_groups(const struct kernels *k, const struct weight *w)
{
    return w->dev && k->type[w->type].pack16 ? 2 : 1;
}

/*
 * out[t][8g .. 8g+8 * ug) (fewer at the end) = w's rows against the n_tok
 * activation rows act (act_row bytes apart, Q8_0 sums in as, n_in / 32 per
 * row), ug = unit_groups; out rows out_stride floats apart. Same kernels,
 * hence the same bits, as a dense matmul.
 */
static void group_rows(const struct kernels *k, const struct weight *w, long g, const uint8_t *act,
                       size_t act_row, const struct q8_0_sum *as, size_t as_row, int32_t n_tok,
                       float *out, size_t out_stride)
{
    const struct type_kernels *tk = &k->type[w->type];
    const long r0 = g * 8, r1 = r0 + 8 < w->n_out ? r0 + 8 : w->n_out;
    const bool pair = unit_groups(k, w) == 2 && r0 + 16 <= w->n_out / 16 * 16;
    for (int32_t t0 = 0; t0 < n_tok; t0 += TOKEN_TILE) {
        const int32_t tn         = n_tok - t0 < TOKEN_TILE ? n_tok - t0 : TOKEN_TILE;
        const uint8_t *a         = act + (size_t)t0 * act_row;
        const struct q8_0_sum *s = as + (size_t)t0 * as_row;
        float *o                 = out + (size_t)t0 * out_stride;
        if (pair)
            tk->gemm16p(w->n_in, (const uint8_t *)w->dev + (size_t)g * 8 * w->row_len, a, act_row,
                        s, tn, o + r0, out_stride);
        else if (w->dev)
            tk->gemm8p(w->n_in, (const uint8_t *)w->dev + (size_t)g * 8 * w->row_len, a, act_row, s,
                       tn, o + r0, out_stride);
        else if (tk->gemm8 && r1 - r0 == 8 && tn > 1)
            tk->gemm8(w->n_in, (const uint8_t *)w->data + (size_t)r0 * w->row_len, w->row_len, a,
                      act_row, s, tn, o + r0, out_stride);
        else
            for (long r = r0; r < r1; r++)
                for (int32_t t = 0; t < tn; t++)
                    tk->vec_dot(w->n_in, &o[(size_t)t * out_stride + r],
                                (const uint8_t *)w->data + (size_t)r * w->row_len,
                                a + (size_t)t * act_row);
    }
}

/*
 * One matmul per routed expert, all in one parallel region: work items are
 * (expert, group of eight output rows), weighted by the expert's row count,
 * and each thread takes a contiguous share of the total weight.
 */
static void experts_matmul(void *arg, int ith, int nth)
{
    struct job *j         = arg;
    struct moe_scratch *s = j->s;
    const int32_t E       = j->moe->n_mats;
    const long ug         = unit_groups(j->k, &j->w[0]);
    const long groups     = ((j->w[0].n_out + 7) / 8 + ug - 1) / ug; /* work items per expert */
    const size_t as_row   = (size_t)j->w[0].n_in / 32;
    const long long total = (long long)s->off[E] * groups;
    const long long lo = total * ith / nth, hi = total * (ith + 1) / nth;
    long long at = 0;
    for (int32_t e = 0; e < E && at < hi; e++) {
        const int32_t cnt = s->off[e + 1] - s->off[e];
        if (cnt == 0)
            continue;
        if (at + (long long)cnt * groups <= lo) {
            at += (long long)cnt * groups;
            continue;
        }
        const uint8_t *act        = (const uint8_t *)s->act + (size_t)s->off[e] * s->act_row;
        const struct q8_0_sum *as = s->act_sum + (size_t)s->off[e] * as_row;
        for (long g = 0; g < groups; g++, at += cnt) {
            if (at < lo || at >= hi)
                continue;
            const size_t ow = (size_t)j->w[e].n_out;
            group_rows(j->k, &j->w[e], g * ug, act, s->act_row, as, as_row, cnt,
                       j->out + (size_t)s->off[e] * ow, ow);
            if (j->w2)
                group_rows(j->k, &j->w2[e], g * ug, act, s->act_row, as, as_row, cnt,
                           j->out2 + (size_t)s->off[e] * ow, ow);
        }
    }
}

/* Each row's input to the gate/up matmuls: its token's normed row, quantized. */
static void quantize_in(void *arg, int ith, int nth)
{
    struct job *j         = arg;
    struct moe_scratch *s = j->s;
    const size_t as_row   = (size_t)j->moe->n_embd / 32;
    long r0, r1;
    threadpool_split(s->off[j->moe->n_mats], ith, nth, &r0, &r1);
    for (long r = r0; r < r1; r++)
        to_act(j->k, j->moe->gate[0].type, j->in + (size_t)s->tok[r] * j->moe->n_embd,
               j->moe->n_embd, (uint8_t *)s->act + r * s->act_row, s->act_sum + r * as_row);
}

/* SwiGLU per row, then the row quantized for the down matmul. */
static void swiglu_rows(void *arg, int ith, int nth)
{
    struct job *j         = arg;
    struct moe_scratch *s = j->s;
    const int32_t f       = j->moe->n_ff;
    const size_t as_row   = (size_t)f / 32;
    long r0, r1;
    threadpool_split(s->off[j->moe->n_mats], ith, nth, &r0, &r1);
    for (long r = r0; r < r1; r++) {
        float *g = s->hg + r * f;
        j->k->silu_mul(g, g, s->hu + r * f, f);
        to_act(j->k, j->moe->down[0].type, g, f, (uint8_t *)s->act + r * s->act_row,
               s->act_sum + r * as_row);
    }
}

/*
 * x[t] += sum over slots of weight * expert output, as llama.cpp's graph
 * rounds it: each product rounded, slots added in order, then the residual.
 */
static void combine(void *arg, int ith, int nth)
{
    struct job *j         = arg;
    struct moe_scratch *s = j->s;
    const int32_t K = j->moe->n_slots, d = j->moe->n_embd;
    long t0, t1;
    threadpool_split(j->n, ith, nth, &t0, &t1);
    for (long t = t0; t < t1; t++) {
        float *acc     = s->out + (size_t)s->row[t * K] * d;
        const float w0 = s->wsel[t * K];
        for (int32_t i = 0; i < d; i++)
            acc[i] *= w0;
        for (int32_t k = 1; k < K; k++) {
            const float *o = s->out + (size_t)s->row[t * K + k] * d;
            const float w  = s->wsel[t * K + k];
            for (int32_t i = 0; i < d; i++) {
                const float p = o[i] * w;
                acc[i] += p;
            }
        }
        float *x = j->x + t * d;
        for (int32_t i = 0; i < d; i++)
            x[i] += acc[i];
    }
}

/* Small per-token steps of a single-token batch run on the caller: waking the pool costs more. */
static void run_small(struct hearth_context *ctx, threadpool_fn fn, void *arg, long n)
{
    if (n == 1)
        fn(arg, 0, 1);
    else
        threadpool_run(cpu_of(ctx)->tp, fn, arg);
}

void moe_ffn(struct hearth_context *ctx, const struct moe *moe, const float *in, float *x,
             int32_t n, int32_t n_gemm)
{
    struct moe_scratch *s = cpu_of(ctx)->moe;
    struct job j          = {.ctx    = ctx,
                             .k      = cpu_of(ctx)->k,
                             .moe    = moe,
                             .s      = s,
                             .in     = in,
                             .x      = x,
                             .n      = n,
                             .n_gemm = n_gemm};
    run_small(ctx, route, &j, n);
    bucket(s, moe, n);
    run_small(ctx, quantize_in, &j, n);
    j.w    = moe->gate;
    j.w2   = moe->up;
    j.out  = s->hg;
    j.out2 = s->hu;
    threadpool_run(cpu_of(ctx)->tp, experts_matmul, &j);
    run_small(ctx, swiglu_rows, &j, n);
    j.w    = moe->down;
    j.w2   = NULL;
    j.out  = s->out;
    j.out2 = NULL;
    threadpool_run(cpu_of(ctx)->tp, experts_matmul, &j);
    run_small(ctx, combine, &j, n);
}
