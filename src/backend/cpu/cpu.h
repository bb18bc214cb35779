/*
 * cpu.h: the CPU backend's own state, internal to src/backend/cpu/. Each
 * operation of
 * the table is one or a few fork-join regions of the context's thread pool
 * over the kernel table (src/kernels/kernels.h), split by output row
 * (matmuls), by token (norms, rope, elementwise steps) or by runs of query
 * rows sharing a KV head (attention).
 */
#ifndef HEARTH_BACKEND_CPU_H
#define HEARTH_BACKEND_CPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "kernels/kernels.h"
#include "model/types.h"
#include "util/memacct.h"
#include "util/threadpool.h"

/* Activations for one micro-batch of up to n_batch tokens. Shapes are [token][feature]. */
struct scratch {
    float *x;      /* [n_batch][n_embd] residual stream */
    float *xb;     /* [n_batch][max(n_embd, n_head * head_dim)] normed input */
    float *q;      /* [n_batch][n_head * head_dim] */
    float *kx;     /* [n_batch][kv_dim] */
    float *vx;     /* [n_batch][kv_dim] */
    float *att;    /* [n_batch][n_head * head_dim] attention output */
    float *hb;     /* [n_batch][n_ff] */
    float *hb2;    /* [n_batch][n_ff] */
    float *scores; /* [n_threads][scores_per_thread] attention scratch (a key tile) */
    size_t scores_per_thread;
    void *act;                /* [n_batch][row bytes of the widest activation, quantized] */
    size_t act_row;           /* bytes per activation row in act */
    struct q8_0_sum *act_sum; /* [n_batch][max_in / 32]: Q8_0 activations' block sums */
    float *logits;            /* [n_batch][n_vocab] */
    float *eh;    /* [n_batch][2 n_embd] an MTP head's normed input pairs; NULL without one */
    float *ple;   /* [n_batch][n_layer][n_embd_pl] gemma4's per-layer inputs; NULL without */
    float *ple_h; /* [n_batch][n_layer n_embd_pl] the token rows of ple, then a layer's
                     [n_batch][n_embd_pl] gate rows; NULL without */
};

/* ctx->be of a context on the CPU backend. */
struct cpu_ctx {
    const struct kernels *k; /* kernels_get(), fixed for the process */
    struct threadpool *tp;   /* ctx->p.n_threads threads, the caller being thread 0 */
    bool tp_owned;           /* tp is this stage's; else an earlier CPU stage's, shared */
    struct scratch s;
    struct moe_scratch *moe; /* the experts' buffers (cpu_moe.c); NULL without MoE layers in
                                the stage */
    struct dnet_cache *dn;   /* recurrent state and scratch of the stage's DeltaNet layers
                                and its gated attention's (cpu_deltanet.c); NULL without */
    struct mem_acct acct;    /* what the stage's buffers above took (memlaw.c sizes them) */
};

static inline struct cpu_ctx *cpu_of(const struct hearth_context *ctx)
{
    return (struct cpu_ctx *)ctx->be;
}

/* The host rows behind an activation buffer. */
float *cpu_act(struct hearth_context *ctx, enum act a);

/*
 * Runs fn over the pool, or on the caller alone for a single token (decode):
 * waking the pool costs more than one row's work.
 */
void cpu_run_rows(struct hearth_context *ctx, threadpool_fn fn, void *arg, int32_t n);

/*
 * out[t][0..n_out) = W in[t] for t < n, rows of in w->n_in floats in_stride
 * apart. prev: the weight of the matmul just run on the same in, or NULL;
 * when it takes the same activation type, its quantized rows are used again.
 * The table's matmul is this over the named buffers; cpu_deltanet.c calls
 * it over its own.
 */
void cpu_matmul(struct hearth_context *ctx, const struct weight *w, const float *in,
                int64_t in_stride, float *out, int64_t out_stride, int32_t n,
                const struct weight *prev);

/* The experts' buffers for micro-batches of up to n_batch tokens (cpu_moe.c); NULL when out of
 * memory. */
struct moe_scratch *moe_scratch_new(const struct hparams *hp, int32_t n_batch, struct mem_acct *a);
void moe_scratch_free(struct moe_scratch *s);

/*
 * x[t] += MoE-FFN(in[t]) for the n rows of the batch (rows n_embd floats):
 * in is the FFN-normed residual, x the residual stream. n_gemm: how many
 * rows llama.cpp would run this FFN on (fewer than n in the last layer,
 * which it runs on the output rows only), which picks the summation order
 * of an f32 router. Runs on ctx's pool, with its moe scratch.
 */
void moe_ffn(struct hearth_context *ctx, const struct moe *moe, const float *in, float *x,
             int32_t n, int32_t n_gemm);

/*
 * The recurrent state of the DeltaNet layers among [l0, l1) for n_seq
 * sequences (conv window and delta-rule matrices, fixed size, zeroed), and
 * the scratch for micro-batches of up to n_batch tokens (cpu_deltanet.c),
 * counted in a. NULL when out of memory.
 */
struct dnet_cache *dnet_cache_new(const struct hearth_model *m, int32_t l0, int32_t l1,
                                  int32_t n_seq, int32_t n_batch, struct mem_acct *a);
void dnet_cache_free(struct dnet_cache *c);
/* Zeroes sequence seq's state in every layer: it starts again from no tokens. */
void dnet_cache_reset(struct dnet_cache *c, int32_t seq);
/* The backend's state_len, state_load and state_save_rows over c (backend.h). */
size_t dnet_state_len(const struct dnet_cache *c);
void dnet_state_load(struct dnet_cache *c, int32_t seq, const float *src);
float **dnet_snap_rows(struct dnet_cache *c);

/*
 * out[t] = the DeltaNet mixer of layer l over the batch's normed rows in[t]
 * (n_embd floats each), advancing each row's sequence state in batch order.
 * in and out may be the same rows.
 */
void dnet_forward(struct hearth_context *ctx, const struct hearth_batch *b, int32_t l,
                  const float *in, float *out);

/*
 * Gated attention: the q projection carries per head [q (head_dim), gate
 * (head_dim)]. dnet_gate_split moves the q halves of qg's n rows into q
 * and keeps the gates; dnet_gate_apply multiplies the attention output rows
 * by sigmoid(gate). qg: the cache's scratch row buffer dnet_gate_rows gives
 * (the CPU's ACT_QG).
 */
float *dnet_gate_rows(struct hearth_context *ctx);
void dnet_gate_split(struct hearth_context *ctx, float *q, int32_t n);
void dnet_gate_apply(struct hearth_context *ctx, float *att, int32_t n);

/* The table's entries, by file. */
void cpu_op_matmul(struct hearth_context *ctx, const struct weight *w, enum act in, enum act out,
                   int32_t n, const struct weight *prev); /* cpu_matmul.c */
void cpu_op_rmsnorm(struct hearth_context *ctx, enum act dst, enum act src, int32_t l,
                    enum norm which, int32_t n); /* cpu_norm_rope.c */
void cpu_op_qkv_store(struct hearth_context *ctx, const struct hearth_batch *b, int32_t l);
void cpu_op_attention(struct hearth_context *ctx, const struct hearth_batch *b,
                      int32_t l);                                            /* cpu_attention.c */
void cpu_op_embed(struct hearth_context *ctx, const struct hearth_batch *b); /* cpu_rows.c */
void cpu_op_gated_act(struct hearth_context *ctx, int32_t l, int32_t n);
void cpu_op_add(struct hearth_context *ctx, enum act dst, enum act src, int32_t n);
void cpu_op_gather(struct hearth_context *ctx, enum act buf, const int32_t *rows, int32_t n_out);
void cpu_op_softcap(struct hearth_context *ctx, int32_t n);
void cpu_op_nextn_input(struct hearth_context *ctx, int32_t l, const float *h,
                        int32_t n); /* cpu_norm_rope.c */
/* cpu_op_rmsnorm with the weights w instead of a layer's named vector. */
void cpu_rmsnorm_with(struct hearth_context *ctx, enum act dst, enum act src, const float *w,
                      int32_t n); /* cpu_norm_rope.c */
void cpu_op_ple_input(struct hearth_context *ctx, const struct hearth_batch *b);
void cpu_op_layer_tail(struct hearth_context *ctx, int32_t l, int32_t n); /* cpu_gemma4.c */

#endif
