/*
 * backend.h: the forward pass's boundary. forward.c runs the model's graph
 * (which operations, in which order, per architecture) by calling one table
 * of layer-level operations; a backend fills the table. The CPU backend
 * (src/backend/cpu/) runs today's kernel table on the thread pool; a
 * device backend fills the same entries with whole-operation kernels and
 * keeps weights, activations, the KV cache and the recurrent state on the
 * device, so only token ids and positions go in and the wanted logits come
 * out.
 *
 * Activations are not pointers: an operation names the context's scratch
 * buffers (enum act) and the backend keeps them where it computes. Every
 * buffer holds up to n_batch rows, one per batch row, row-major and packed
 * (row t of a buffer of width w starts at t * w). Weights are struct weight,
 * prepared once at load into the backend's own form (w->dev); norm and bias
 * vectors are named by their layer, and the backend reads the model's f32
 * copies (a device backend uploads them at its first use or at ctx_init).
 *
 * Stages: a model's layers may run in contiguous ranges on several
 * backends (src/model/stages.h). Each stage's backend has its own ctx->be,
 * allocated for the stage's layers only (ctx->st->place: l0, l1, device;
 * ctx->st->embed, ctx->st->output), and forward.c sets ctx->be to the
 * running stage's before each operation. Operations name layers by their
 * model index.
 *
 * Bits: the CPU backend's operations run the arithmetic of llama.cpp's x86
 * build (docs/ARCHITECTURE.md, "Numerics"), which tests/e2e/test_perplexity.c,
 * test_run.c and the engine unit tests hold to llama.cpp's outputs. A new
 * backend states in its own header which operations differ in the last bits
 * and by how much.
 */
#ifndef HEARTH_BACKEND_H
#define HEARTH_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hearth.h"
#include "util/dtype.h"

struct hearth_model;
struct hearth_context;
struct hearth_context_params;
struct mem_acct;
struct hearth_batch;
struct weight;

/* The context's activation buffers, each [n_batch][width]; widths from struct hparams. */
enum act {
    ACT_X,      /* [n][n_embd] the residual stream */
    ACT_XB,     /* [n][n_embd] a normed copy, a sublayer's output before its residual add */
    ACT_Q,      /* [n][n_head * head_dim] queries */
    ACT_QG,     /* [n][2 * n_head * head_dim] a gated attention layer's q projection: per
                   head [q, gate] (qwen35moe) */
    ACT_K,      /* [n][n_head_kv * head_dim] this batch's keys before they enter the cache */
    ACT_V,      /* [n][n_head_kv * head_dim] its values */
    ACT_ATT,    /* [n][n_head * head_dim] attention output */
    ACT_HB,     /* [n][n_ff] FFN gate, then the gated activation */
    ACT_HB2,    /* [n][n_ff] FFN up */
    ACT_LOGITS, /* [n][n_vocab] */
    ACT_COUNT
};

/* A layer's RMSNorm weights (struct layer's f32 vectors); NORM_OUTPUT is the model's. */
enum norm {
    NORM_ATTN,      /* attn_norm, before the token mixer */
    NORM_POST_ATTN, /* post_attn_norm, on the mixer's output (gemma3) */
    NORM_FFN,       /* ffn_norm, before the FFN */
    NORM_POST_FFN,  /* post_ffn_norm, on the FFN's output (gemma3) */
    NORM_OUTPUT,    /* output_norm, before the logits; the layer is ignored */
    NORM_NEXTN_HEAD /* an MTP head's shared_head_norm (layer.nextn), else output_norm */
};

/* How a weight is read, which decides what preparing it may do. */
enum weight_use {
    WEIGHT_MATMUL, /* only through matmul: the backend may keep its own layout alone */
    WEIGHT_ROWS    /* also row by row through embed (token_embd, the output when tied):
                      its rows must stay readable as the file stores them */
};

/*
 * The kinds of backend whose memory a placement names (struct memlaw_stage);
 * backend_law_of maps each to its law, so model/ and fit/ name none of them.
 * BACKEND_GPU: the kind `hearth fit` plans a GPU --device as, which its name
 * ("vulkan0", "gpu1") does not tell.
 */
enum backend_kind { BACKEND_CPU, BACKEND_VULKAN, BACKEND_KINDS, BACKEND_GPU = BACKEND_VULKAN };

/*
 * A backend's memory law (docs/ARCHITECTURE.md, "Layers across stages"):
 * the bytes its ctx_init allocates for a stage, from the hyperparameters,
 * the layers' kinds and the context's parameters alone, so that budget.c
 * and `hearth fit` sum every stage's figures without knowing its backend.
 * The backend sizes its allocations with the same law, and
 * tests/unit/test_memlaw.c holds what it counts equal to the prediction.
 */
struct backend_law {
    bool kv_host; /* its stages' K/V lives in kv.c's host pool (struct backend's kv_host) */
    bool host;    /* its device memory is the host's: what dev receives is host memory */
    /*
     * Adds what a stage of layers [l0, l1) (and the output, with output)
     * allocates for a context of p, by kind (util/memacct.h): on its device
     * into dev (the CPU's: host memory), in host memory besides into host.
     * n_ctx_blocks: blocks of one sequence's table; n_kv_pools: K/V pools.
     * Not its layers' K/V rows (kv.c's kv_layer_bytes).
     */
    void (*stage)(const struct hearth_model *m, const struct hearth_context_params *p, int32_t l0,
                  int32_t l1, bool output, int32_t n_ctx_blocks, int n_kv_pools,
                  struct mem_acct *dev, struct mem_acct *host);
};

/*
 * One backend. Every entry is required but nextn_input. Entries take the
 * context (or, at load, the weight) and return nothing unless they can
 * fail: the forward pass runs after batch checking and KV reservation, so
 * an operation has no error to report. Not thread-safe: one context is
 * driven by one thread.
 */
struct backend {
    const char *name;       /* "cpu", as HEARTH_BACKEND names it */
    bool kv_host;           /* its layers' K/V lives in kv.c's host pool (kv_layer_base); else the
                               backend maps its own in ctx_init and copies blocks in kv_copy */
    bool moe_stacks;        /* moe reads a layer's router and whole expert stacks (struct moe's
                               router, gate_exps, up_exps, down_exps), which the load prepares; else
                               the routed experts' slices, and the router from the mapping */
    enum backend_kind kind; /* its memory law's key (backend_law_of) */
    const struct backend_law *law; /* what it allocates (backend_law_of its kind) */

    /* ------------------------------------------------ the model, at load --- */

    /*
     * Bytes of memory device `device` offers this backend's buffers (a GPU's
     * device-local heaps), which the stages placed there must fit: checked
     * at load and at context creation (src/model/budget.c) before anything
     * is allocated. 0 for a backend on host memory (not checked).
     */
    uint64_t (*device_memory)(int device);
    /* Whether matmul and embed run weights of this type. */
    bool (*weight_supported)(enum dtype type);
    /*
     * Whether the routed experts run with these types (moe runs gate and up
     * over the same input rows). A model the backend cannot run is refused
     * at load with a sentence naming the types.
     */
    bool (*moe_supported)(enum dtype gate, enum dtype up, enum dtype down);
    /*
     * Whether the backend runs layer l of m, judged from the hyperparameters
     * (m->hp, m->layers[l]'s flags: the weights are not loaded yet):
     * HEARTH_OK, or HEARTH_EUNSUPPORTED with a sentence naming the layer's
     * kind (a MoE or DeltaNet layer on a backend without those operations).
     * Checked at load, once the stages are placed, for every layer.
     */
    enum hearth_status (*layer_supported)(const struct hearth_model *m, int32_t l, char *err,
                                          size_t err_len);
    /*
     * dst[0..n) = the n elements of type at src as f32: how the model's norm
     * and bias vectors become the host f32 copies the operations read. false
     * when the type cannot be read.
     */
    bool (*vector_to_f32)(enum dtype type, const void *src, float *dst, int64_t n);
    /*
     * Prepares w (data in the mapping) for use: the CPU repacks WEIGHT_MATMUL
     * weights of a type with a pack8 layout into w->dev and releases the
     * mapping's pages it replaces; a device backend uploads. HEARTH_ENOMEM
     * with a sentence when it cannot. weight_release frees w->dev (and is a
     * no-op for a weight never prepared).
     */
    enum hearth_status (*weight_prepare)(struct weight *w, enum weight_use use, char *err,
                                         size_t err_len);
    void (*weight_release)(struct weight *w);

    /* ------------------------------------------------------- the context --- */

    /*
     * Allocates ctx->be for the stage ctx->st: the activation buffers for
     * ctx->p.n_batch rows (ACT_LOGITS only on the output stage), the
     * recurrent state of ctx->p.n_seq_max sequences (zeroed) for the
     * stage's recurrent layers, the K/V memory of its attention layers
     * unless kv_host (sized by ctx->kv's pools), and whatever the backend
     * computes with (the CPU's thread pool of ctx->p.n_threads). Reads
     * ctx->model, ctx->p, ctx->kv (already initialised) and the stages
     * before ctx->st (already initialised, ctx->stages[i].state).
     * HEARTH_ENOMEM with a sentence. ctx_free releases it; it takes a
     * context whose ctx_init failed or never ran (ctx->be NULL).
     */
    enum hearth_status (*ctx_init)(struct hearth_context *ctx, char *err, size_t err_len);
    void (*ctx_free)(struct hearth_context *ctx);
    /* What ctx_init allocated for the stage whose state this is, by kind (util/memacct.h):
     * on its device into dev (the CPU's: host memory), and in host memory besides into host */
    void (*ctx_memory)(const void *state, struct mem_acct *dev, struct mem_acct *host);
    /* Zeroes sequence seq's recurrent state in the stage's layers (no-op without one). */
    void (*seq_reset)(struct hearth_context *ctx, int32_t seq);
    /*
     * Snapshots of one sequence's recurrent state, which the host keeps
     * (src/model/snapshot.c), the stage's share of it (a snapshot is the
     * stages' shares in order): state_len is its floats (every recurrent
     * layer's conv window, then every layer's matrices; 0 without recurrent
     * layers); state_load makes src sequence seq's state. state_save_rows
     * gives the [n_batch] destinations the next batch's deltanet operations
     * copy each row's sequence state to once that row is mixed in (NULL: not
     * copied; all NULL until set). A device backend copies those states back
     * to the host as each layer finishes.
     */
    size_t (*state_len)(const struct hearth_context *ctx);
    void (*state_load)(struct hearth_context *ctx, int32_t seq, const float *src);
    float **(*state_save_rows)(struct hearth_context *ctx);
    /*
     * Copies the first n_rows token rows of block src to block dst in
     * ctx->kv's pool `group`, K and V of each of the stage's layers in that
     * pool: kv.c copies a shared block before a truncation writes into it.
     * A kv_host backend has nothing to copy (kv.c copied the host pool).
     */
    void (*kv_copy)(struct hearth_context *ctx, int group, int32_t dst, int32_t src,
                    int32_t n_rows);

    /* ------------------------------------------------- the forward pass --- */

    /*
     * Called once per batch before its first operation, once the batch is
     * checked and its KV blocks reserved: b's tokens, positions and
     * sequences, and those sequences' block tables (ctx->kv), are what the
     * operations below read. A device backend uploads them here.
     */
    void (*batch_begin)(struct hearth_context *ctx, const struct hearth_batch *b);
    /*
     * The residual stream across a stage boundary: residual_get copies
     * ACT_X's first n rows (n_embd floats each) to the host at dst,
     * residual_set makes them ACT_X's first n rows from src.
     */
    void (*residual_get)(struct hearth_context *ctx, int32_t n, float *dst);
    void (*residual_set)(struct hearth_context *ctx, int32_t n, const float *src);
    /* ACT_X[t] = token_embd row b->token[t] as f32, times hp.embd_scale, for t < b->n. */
    void (*embed)(struct hearth_context *ctx, const struct hearth_batch *b);
    /*
     * dst[t] = RMSNorm(src[t]) * norm for t < n over n_embd floats, eps
     * hp.norm_eps; norm: layer l's vector `which`. dst may be src.
     */
    void (*rmsnorm)(struct hearth_context *ctx, enum act dst, enum act src, int32_t l,
                    enum norm which, int32_t n);
    /*
     * out[t] = w in[t] for t < n: in holds rows of w->n_in floats, out
     * receives rows of w->n_out floats (the buffer's width must match). in
     * and out differ. prev: the weight of the matmul that ran last on the
     * same in, or NULL; a backend may reuse what it derived from in then
     * (the CPU's quantized activations, when prev takes the same type).
     */
    void (*matmul)(struct hearth_context *ctx, const struct weight *w, enum act in, enum act out,
                   int32_t n, const struct weight *prev);
    /*
     * Layer l's attention inputs, per batch row t, from ACT_Q (or, for an
     * attn_gated layer, the q halves of ACT_QG, whose gates attention
     * applies), ACT_K and ACT_V: biases bq, bk, bv added; q_norm and
     * k_norm RMSNorm per head; rope at b->pos[t] with the layer's base
     * (adjacent pairs, hp.rope_neox halves, hp.rope_sections IMRoPE); q
     * times hp.q_scale when set; then K and V stored into layer l's cache
     * at (b->seq[t], b->pos[t]) in the cache's type (f16 rounded or f32).
     * The layer's own shapes (layer_head_dim, layer_n_head_kv,
     * layer_rope_dim; gemma4): V is K before its norm where the layer has
     * no wv, normed by v_norm where it has one; rope divided by rope_freqs;
     * a kv_reuse layer only prepares q (its K/V are layer kv_from's).
     */
    void (*qkv_store)(struct hearth_context *ctx, const struct hearth_batch *b, int32_t l);
    /*
     * ACT_ATT[t] = causal attention of ACT_Q[t] over layer l's (layer_kv_src) cached keys
     * of sequence b->seq[t], positions 0..b->pos[t] (the last hp.n_swa of
     * them on a sliding-window layer), heads grouped over n_head_kv KV
     * heads, scores scaled by 1/sqrt(head_dim) unless hp.q_scale is set; on
     * an attn_gated layer each output times sigmoid of its gate. The CPU
     * picks llama.cpp's per-key or tiled arithmetic by batch size here.
     */
    void (*attention)(struct hearth_context *ctx, const struct hearth_batch *b, int32_t l);
    /*
     * ACT_HB[t] = act(ACT_HB[t]) * ACT_HB2[t] over layer l's FFN width (its w_gate's rows),
     * act SiLU or (hp.ffn_gelu) ggml's f16 GELU.
     */
    void (*gated_act)(struct hearth_context *ctx, int32_t l, int32_t n);
    /* dst[t] += src[t] over n_embd floats, t < n. */
    void (*add)(struct hearth_context *ctx, enum act dst, enum act src, int32_t n);
    /*
     * Layer l's routed FFN (layer.moe): ACT_X[t] += MoE(ACT_XB[t]) for t < n:
     * router, top-k, the chosen experts' SwiGLU, weights renormalised, the
     * shared expert when the layer has one. n_gemm: how many rows llama.cpp
     * would run it on (the output rows only, in most last layers), which
     * picks an f32 router's summation order. ACT_HB, ACT_HB2 are free to use.
     */
    void (*moe)(struct hearth_context *ctx, int32_t l, int32_t n, int32_t n_gemm);
    /*
     * Layer l's Gated DeltaNet mixer (layer.dnet): ACT_XB[t] = DeltaNet(ACT_XB[t]),
     * advancing each row's sequence state token by token in batch order.
     */
    void (*deltanet)(struct hearth_context *ctx, const struct hearth_batch *b, int32_t l);
    /*
     * buf[i] = buf[rows[i]] for i < n_out, buf ACT_X or ACT_XB (n_embd
     * wide), rows strictly increasing (so rows[i] >= i and the copy runs
     * front to back): the output rows packed to the front.
     */
    void (*gather)(struct hearth_context *ctx, enum act buf, const int32_t *rows, int32_t n_out);
    /*
     * An MTP head's input (layer l's nextn, src/model/model.h): ACT_X[t] =
     * eh_proj [RMSNorm(ACT_X[t]) * enorm; RMSNorm(h[t]) * hnorm] for t < n,
     * ACT_X holding the token embeddings and h the host rows (n_embd floats
     * each) of the target's hidden states. NULL: the backend runs no MTP
     * head (the load refuses one where the output is on it).
     */
    void (*nextn_input)(struct hearth_context *ctx, int32_t l, const float *h, int32_t n);
    /*
     * gemma4's per-layer inputs (hp.n_embd_pl > 0), right after embed: for
     * each row t and layer l, (RMSNorm(ple_model_proj ACT_X[t] / sqrt(n_embd))
     * * ple_proj_norm + ple_tok_embd[b->token[t]]'s slice of l * sqrt(n_embd_pl))
     * / sqrt(2), kept for layer_tail. NULL: the backend runs no gemma4 (its
     * layer_supported refuses one).
     */
    void (*ple_input)(struct hearth_context *ctx, const struct hearth_batch *b);
    /*
     * The end of gemma4's layer l, for t < n: ACT_X[t] += RMSNorm(ple_proj
     * (GELU(ple_gate ACT_X[t]) * the row's per-layer input of l)) * ple_norm
     * where the layer has a ple_norm, then ACT_X[t] *= out_scale where it has
     * one. ACT_XB is free to use. NULL as ple_input.
     */
    void (*layer_tail)(struct hearth_context *ctx, int32_t l, int32_t n);
    /* ACT_LOGITS[t] = cap * tanh(ACT_LOGITS[t] / cap), cap hp.logit_softcap, t < n. */
    void (*softcap)(struct hearth_context *ctx, int32_t n);
    /*
     * The host copy of ACT_LOGITS's first n rows after the last operation
     * (a device backend copies them back here); valid until the next batch.
     */
    const float *(*logits)(struct hearth_context *ctx, int32_t n);
};

/* The CPU backend: today's kernel table (kernels_get) on a thread pool. */
const struct backend *backend_cpu(void);
extern const struct backend_law backend_law_cpu; /* src/backend/cpu/cpu_memlaw.c */

/*
 * The Vulkan backend on device index device ("vulkan<device>"), or NULL with
 * a sentence in why when it cannot be used: not built (no HEARTH_VULKAN), no
 * loader or driver, no such device.
 */
const struct backend *backend_vulkan(int device, char *why, size_t why_len);
/* Built with or without the Vulkan runtime: `hearth fit` predicts a GPU it does not have. */
extern const struct backend_law backend_law_vulkan; /* src/backend/vk/vk_memlaw.c */

/* The memory law of backends of kind (backend.c's table of them). */
const struct backend_law *backend_law_of(enum backend_kind kind);

/*
 * The built-in backend named name ("cpu", "vulkan" for device 0), or NULL
 * when none is built or usable by that name.
 */
const struct backend *backend_find(const char *name);

/*
 * The backend a model loads with when its parameters place no layer:
 * HEARTH_BACKEND if set (an unknown name
 * falls back to the CPU with a warning on stderr), else the CPU. Chosen
 * once; thread-safe after the first call.
 */
const struct backend *backend_get(void);

#endif
