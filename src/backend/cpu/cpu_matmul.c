/*
 * cpu_matmul.c: the CPU backend's matmul. Each activation row is converted
 * once to the weight type's vec_dot_type, then every weight row is dotted
 * against all the batch's rows while it is in cache: weights are read once
 * per micro-batch. Work is split by output row (whole groups of eight for
 * packed weights and prefill gemms), tokens tiled by 64.
 */
#include <stdbool.h>
#include <string.h>

#include "backend/cpu/cpu.h"

struct matmul_job {
    const struct kernels *k;
    const struct weight *w;
    const float *in; /* [n][in_stride] */
    int64_t in_stride;
    float *out; /* [n][out_stride], columns 0..w->n_out */
    int64_t out_stride;
    int32_t n;
    void *act; /* [n][act_row] */
    size_t act_row;
    struct q8_0_sum *act_sum; /* [n][n_in / 32] for Q8_0 activations, else unused */
};

static void quantize_rows(void *arg, int ith, int nth)
{
    struct matmul_job *j          = arg;
    const struct type_kernels *tk = &j->k->type[j->w->type];
    const struct type_kernels *ak = &j->k->type[tk->vec_dot_type];
    long t0, t1;
    threadpool_split(j->n, ith, nth, &t0, &t1);
    for (long t = t0; t < t1; t++) {
        void *dst = (uint8_t *)j->act + t * j->act_row;
        if (tk->vec_dot_type == DTYPE_F32)
            memcpy(dst, j->in + t * j->in_stride, (size_t)j->w->n_in * sizeof(float));
        else
            ak->from_float(j->in + t * j->in_stride, dst, j->w->n_in);
        if (tk->vec_dot_type == DTYPE_Q8_0)
            q8_0_sums(dst, j->w->n_in, j->act_sum + t * (j->w->n_in / 32));
    }
}

/* Tokens per pass over a thread's weight rows: their activations stay in L2 meanwhile. */
#define MATMUL_TOKEN_TILE 64

static void matmul_rows(void *arg, int ith, int nth)
{
    struct matmul_job *j          = arg;
    const struct weight *w        = j->w;
    const struct type_kernels *tk = &j->k->type[w->type];
    long r0, r1, g0 = 0, g1 = 0;
    /* a token alone goes to gemm8p per group, unless the pairs are laid out for gemm16p alone */
    const bool pairs = w->dev && tk->gemm16p && (j->n > 1 || tk->pack16);
    if (pairs) {
        /* sixteen-lane tables: pairs of packed groups, the odd last one to the last thread */
        threadpool_split(w->n_out / 16, ith, nth, &g0, &g1);
        g0 *= 2;
        g1 = ith == nth - 1 ? w->n_out / 8 : g1 * 2;
        r0 = r1 = 0;
    } else if (w->dev) {
        /* packed weights: whole groups of eight rows, each one stream, decode and prefill */
        threadpool_split(w->n_out / 8, ith, nth, &g0, &g1);
        r0 = r1 = 0;
    } else if (tk->gemm8 && j->n > 1) {
        /* prefill: whole groups of eight rows per thread share each weight block across
         * tokens; the tail rows go to vec_dot. Decode streams row by row instead. */
        threadpool_split(w->n_out / 8, ith, nth, &g0, &g1);
        r0 = w->n_out / 8 * 8;
        r1 = ith == nth - 1 ? w->n_out : r0;
    } else {
        threadpool_split(w->n_out, ith, nth, &r0, &r1);
    }
    for (int32_t t0 = 0; t0 < j->n; t0 += MATMUL_TOKEN_TILE) {
        const int32_t tn          = j->n - t0 < MATMUL_TOKEN_TILE ? j->n - t0 : MATMUL_TOKEN_TILE;
        const uint8_t *act        = (const uint8_t *)j->act + (size_t)t0 * j->act_row;
        const struct q8_0_sum *as = j->act_sum + (size_t)t0 * (w->n_in / 32);
        float *out                = j->out + (int64_t)t0 * j->out_stride;
        for (long g = g0; g < g1; g++) {
            if (pairs && g + 1 < g1) {
                tk->gemm16p(w->n_in, (const uint8_t *)w->dev + (size_t)g * 8 * w->row_len, act,
                            j->act_row, as, tn, out + g * 8, (size_t)j->out_stride);
                g++;
            } else if (w->dev)
                tk->gemm8p(w->n_in, (const uint8_t *)w->dev + (size_t)g * 8 * w->row_len, act,
                           j->act_row, as, tn, out + g * 8, (size_t)j->out_stride);
            else
                tk->gemm8(w->n_in, (const uint8_t *)w->data + (size_t)g * 8 * w->row_len,
                          w->row_len, act, j->act_row, as, tn, out + g * 8, (size_t)j->out_stride);
        }
        for (long r = r0; r < r1; r++) {
            const void *wrow = (const uint8_t *)w->data + r * w->row_len;
            for (int32_t t = 0; t < tn; t++)
                tk->vec_dot(w->n_in, &out[t * j->out_stride + r], wrow, act + t * j->act_row);
        }
    }
}

void cpu_matmul(struct hearth_context *ctx, const struct weight *w, const float *in,
                int64_t in_stride, float *out, int64_t out_stride, int32_t n,
                const struct weight *prev)
{
    struct cpu_ctx *c       = cpu_of(ctx);
    const struct kernels *k = c->k;
    const enum dtype at     = k->type[w->type].vec_dot_type;
    /* rows as long as this matmul's activations, so a token tile's rows lie close together */
    const size_t act_row = (dtype_row_len(at, w->n_in) + 63) / 64 * 64;
    struct matmul_job j  = {k,          w, in,       in_stride, out,
                            out_stride, n, c->s.act, act_row,   c->s.act_sum};
    if (!prev || k->type[prev->type].vec_dot_type != at || prev->n_in != w->n_in)
        cpu_run_rows(ctx, quantize_rows, &j, n);
    threadpool_run(c->tp, matmul_rows, &j);
}

void cpu_op_matmul(struct hearth_context *ctx, const struct weight *w, enum act in, enum act out,
                   int32_t n, const struct weight *prev)
{
    cpu_matmul(ctx, w, cpu_act(ctx, in), w->n_in, cpu_act(ctx, out), w->n_out, n, prev);
}
