/*
 * types.h: the plain data every layer of the engine reads: the model's
 * hyperparameters, its layers' and weights' descriptors, the stages, the
 * context, the KV cache's layout, and the MoE and DeltaNet tensors. Only
 * structs, enums, constants and accessors of their fields, so that the
 * backends (src/backend/) can read a model and a context without
 * depending on the code that loads and runs them: this is the one header
 * of model/ a backend includes (tests/unit/test_layout.c holds it to that,
 * and holds this file to including nothing of src/ but util/).
 */
#ifndef HEARTH_MODEL_TYPES_H
#define HEARTH_MODEL_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "hearth.h"
#include "util/dtype.h"
#include "util/memacct.h"
#include "util/u64map.h"

struct backend;
struct gguf_file;
struct tokenizer;
struct kv_disk;
struct snap_store;

/* ------------------------------------------------------- the KV layout --- */

#define KV_GROUPS 2 /* full-attention layers, sliding-window layers */

/* One sequence's block table in one pool. */
struct kv_table {
    int32_t n_blocks;    /* entries used in blocks[], released ones included */
    int32_t n_released;  /* leading entries given back (window pool only): blocks[i] = -1 */
    int32_t n_published; /* leading entries already in the prefix index, or released */
    int32_t *blocks;     /* [ceil(n_ctx / block_tokens)] block ids, -1 = released */
};

struct kv_seq {
    int32_t n_tokens; /* positions 0..n_tokens-1 hold K/V (window layers: the reachable ones) */
    int32_t n_chain;  /* leading entries of chain[] computed */
    uint64_t *chain;  /* [ceil(n_ctx / block_tokens)] chain hash of the tokens up to each
                         block's end, shared by the pools' prefix indexes */
    struct kv_table t[KV_GROUPS];
};

/* kv_cache.group of a layer that keeps no K/V (a recurrent mixer): no pool, never addressed. */
#define KV_NONE 0xFF

/* A pool of blocks for the layers of one group, with its own prefix cache. */
struct kv_pool {
    int32_t n_layer;      /* layers in the group, 0 = the group is absent */
    int32_t n_host;       /* of those, the layers whose memory is mem (host layers) */
    int32_t n_blocks;     /* blocks in the pool */
    int32_t block_tokens; /* the cache's */
    size_t layer_len[2];  /* bytes of one layer's K pool, and of its V pool */
    uint8_t *mem;         /* [n_host][K, V][n_blocks][block_tokens][row]; NULL when n_host
                             is 0 */
    size_t mem_len;
    int32_t *refcnt;   /* [n_blocks] */
    int32_t *free_ids; /* stack of free block ids */
    int32_t n_free;
    /* prefix cache */
    uint64_t *hash;               /* [n_blocks] chain hash of a published block, 0 = unpublished */
    int32_t *tokens;              /* [n_blocks][block_tokens] tokens of a published block */
    int32_t *lru_prev, *lru_next; /* [n_blocks] doubly linked LRU of cached blocks, -1 = none */
    /* resuming inside a block: every published block under the chain hash of the block
       before it (KV_ROOT for a sequence's first), and how many of its tokens hold rows */
    uint64_t *parent; /* [n_blocks] */
    int32_t *fill;    /* [n_blocks] block_tokens, or fewer for a sequence's last block */
    int32_t *sib_prev, *sib_next; /* [n_blocks] published blocks of the same parent, -1 = none */
    struct u64map children;       /* parent hash -> the newest published block under it */
    int32_t lru_head, lru_tail;
    int32_t n_cached;       /* published blocks with refcnt 0 (evictable) */
    int32_t cap;            /* most blocks cached at once, -1 = as many as are free */
    int64_t n_evicted;      /* cached blocks dropped so far (for a write or by the cap) */
    struct u64map index;    /* chain hash -> block id of the published blocks */
    struct kv_cache *owner; /* pool 0: the cache, for its tier's hooks (kv_set_tier); or NULL */
};

/* What kv_init builds; kv_bytes sums the same. */
struct kv_params {
    int32_t n_layer; /* layers holding K/V */
    int32_t kv_dim;  /* elements per token per layer, K and V each */
    int32_t n_seq;   /* sequences */
    int32_t n_ctx;   /* max tokens per sequence */
    int32_t block_tokens;
    int32_t n_blocks;           /* full-attention pool */
    enum hearth_kv_type type;   /* K's (a quantized type needs kv_dim a multiple of 32) */
    enum hearth_kv_type type_v; /* V's */
    const bool *swa;      /* [n_layer] layers that see only the last n_swa positions; NULL = none */
    const bool *no_kv;    /* [n_layer] layers that keep no K/V (recurrent mixers); NULL = none */
    const bool *host;     /* [n_layer] layers whose K/V memory kv.c maps; NULL = every layer */
    int32_t n_swa;        /* their window in tokens, itself included; 0 = no window */
    int32_t n_blocks_swa; /* window pool; 0 = window layers mask the full pool instead */
    bool retain;          /* false: the cache is whatever blocks the pools have free */
    int32_t n_retain;     /* with retain: blocks each pool caches for no sequence (at most),
                             on top of n_blocks and n_blocks_swa */
};

struct kv_cache {
    int32_t n_layer;
    int32_t kv_dim; /* elements per token per layer, K and V each */
    int32_t block_tokens;
    int32_t n_seq;               /* sequences */
    int32_t n_ctx;               /* max tokens per sequence */
    int32_t n_swa;               /* window of the window layers, 0 = none */
    enum hearth_kv_type type[2]; /* K's and V's */
    size_t row_len[2];           /* bytes of one token's K row, and of its V row */
    uint8_t *group;              /* [n_layer] pool of each layer: 0 full, 1 window, KV_NONE none */
    int32_t *slot;               /* [n_layer] the layer's index among its pool's host layers; -1
                                    for a layer not on the host or without K/V */
    int32_t *window;             /* [n_layer] positions a query sees: n_swa, or 0 = all */
    struct kv_pool pool[KV_GROUPS];
    struct kv_seq *seqs; /* [n_seq] */
    /* called after kv.c copies the first n_rows rows of block src to dst in pool group, for
       the memory it does not own (the layers not on the host); NULL = none */
    void (*copy)(void *arg, int group, int32_t dst, int32_t src, int32_t n_rows);
    void *copy_arg;
    /* the disk tier (kvdisk.h), for a cache of one pool on the host; NULL = none. evicted:
       a cached block is about to be dropped (its rows still intact); fetch: fill block with
       the rows of the block keyed hash holding tokens, false when the tier has none */
    void (*evicted)(void *arg, const struct kv_cache *kv, int32_t block, uint64_t hash,
                    const int32_t *tokens);
    bool (*fetch)(void *arg, struct kv_cache *kv, int32_t block, uint64_t hash,
                  const int32_t *tokens);
    void *tier_arg;
    struct mem_acct acct; /* what kv_init allocated: the host pools' K/V, the tables */
};

/* The element type of a cache of type t, as the kernels name it. */
static inline enum dtype kv_dtype(enum hearth_kv_type t)
{
    return t == HEARTH_KV_F32    ? DTYPE_F32
           : t == HEARTH_KV_Q8_0 ? DTYPE_Q8_0
           : t == HEARTH_KV_Q4_0 ? DTYPE_Q4_0
                                 : DTYPE_F16;
}

/* ---------------------------------------------------- the model --- */

/* Shapes shared by every DeltaNet layer of a model. */
struct dnet_dims {
    int32_t n_conv;   /* conv taps (ssm.conv_kernel), 2..16 */
    int32_t S;        /* state_size: width of every key and value head */
    int32_t n_k;      /* key heads (ssm.group_count) */
    int32_t n_v;      /* value heads (ssm.time_step_rank), a multiple of n_k */
    int32_t conv_dim; /* 2 n_k S + n_v S */
};

/* A 2-D weight: n_out rows of n_in elements of `type`, rows row_len bytes apart. */
struct weight {
    enum dtype type;
    int64_t n_in;     /* ne[0]: row length in elements */
    int64_t n_out;    /* ne[1]: rows */
    size_t row_len;   /* bytes per row */
    const void *data; /* into the mapping */
    void *dev;        /* the backend's prepared copy (backend.h's weight_prepare), or NULL: the
                         CPU's pack8 layout, whose data pages are released and never read */
    size_t dev_len;   /* bytes at dev */
};

struct moe;
struct dnet;

/*
 * A multi-token-prediction (nextn) block's own tensors (qwen35moe's MTP
 * head): its input is eh_proj over [enorm(embedding of token t); hnorm(the
 * target's final hidden state at t - 1)], then an ordinary layer, then
 * head_norm before the model's output matrix.
 */
struct nextn {
    struct weight eh_proj; /* (2 n_embd -> n_embd) */
    float *enorm;          /* (n_embd) owned */
    float *hnorm;          /* (n_embd) owned */
    float *head_norm;      /* (n_embd) shared_head_norm, owned; NULL: the model's output_norm */
};

struct layer {
    float *attn_norm;       /* (n_embd) owned f32 copy */
    struct weight wq;       /* (n_embd -> n_head * head_dim) */
    struct weight wk;       /* (n_embd -> n_head_kv * head_dim) */
    struct weight wv;       /* (n_embd -> n_head_kv * head_dim) */
    struct weight wo;       /* (n_head * head_dim -> n_embd) */
    float *bq, *bk, *bv;    /* optional biases (qwen2), owned; NULL when absent */
    float *q_norm, *k_norm; /* (head_dim) per-head RMSNorm of q and k (qwen3); NULL when absent */
    float *post_attn_norm;  /* (n_embd) RMSNorm of the attention output before its residual
                               add (gemma3); NULL when absent */
    float *post_ffn_norm;   /* (n_embd) the same after the FFN (gemma3); NULL when absent */
    float *ffn_norm;        /* (n_embd) */
    struct weight w_gate;   /* (n_embd -> n_ff) */
    struct weight w_up;     /* (n_embd -> n_ff) */
    struct weight w_down;   /* (n_ff -> n_embd) */
    bool swa;               /* attends through the sliding window of hp.n_swa tokens */
    float rope_base;        /* this layer's rope base: hp.rope_base, or gemma3's local one */
    struct moe *moe;        /* routed experts in place of the FFN above (qwen3moe); else NULL */
    struct dnet *dnet;   /* a Gated DeltaNet mixer in place of attention (qwen35moe); else NULL */
    bool attn_gated;     /* wq yields [q, gate] per head; the output is gated by sigmoid(gate) */
    struct nextn *nextn; /* the MTP head's input and output norms (layer n_layer only) */
    /* gemma4's per-layer shapes: its window and full layers differ in head width, KV heads,
     * rotated dims and FFN width; 0 = the hparams' (every other architecture) */
    int32_t head_dim, n_head_kv, rope_dim;
    bool kv_reuse;           /* attends over layer kv_from's K/V and keeps none (gemma4) */
    int32_t kv_from;         /* with kv_reuse: that earlier layer, of the same kind */
    const float *rope_freqs; /* [rope_dim / 2] divisors of each pair's angle (gemma4's full
                                layers' proportional rope; the model's copy); NULL = none */
    float *v_norm;           /* (head_dim) ones: V's per-head RMSNorm has no weights of its
                                own (gemma4), owned; NULL = V is not normed */
    float out_scale;         /* the residual stream is scaled by this after the layer; 0 = no */
    struct weight ple_gate;  /* (n_embd -> n_embd_pl) gemma4's per-layer input gate */
    struct weight ple_proj;  /* (n_embd_pl -> n_embd) its projection back */
    float *ple_norm;         /* (n_embd) RMSNorm of that projection, owned; NULL: no PLE */
};

/* The layer whose K/V rows layer l reads and writes: l, or the one it reuses (gemma4). */
static inline int32_t layer_kv_src(const struct layer *layers, int32_t l)
{
    return layers[l].kv_reuse ? layers[l].kv_from : l;
}

/* Hyperparameters from <arch>.* metadata. */
struct hparams {
    int32_t n_vocab;
    int32_t n_ctx_train;
    int32_t n_embd; /* model width, 64..8192 */
    int32_t n_layer;
    int32_t n_head;
    int32_t n_head_kv; /* divides n_head */
    int32_t head_dim;  /* n_embd / n_head unless the file says */
    int32_t n_ff;
    int32_t rope_dim;      /* rotated dims per head, even, <= head_dim */
    float rope_base;       /* 10000 by default */
    float norm_eps;        /* RMSNorm epsilon */
    bool rope_neox;        /* rotate (x[i], x[i + rope_dim/2]) instead of adjacent pairs */
    int32_t n_swa;         /* sliding attention window in tokens of the layers marked swa, read
                              by the architectures that have one (gemma3); 0 = full attention */
    float embd_scale;      /* token embeddings are multiplied by this: 1, sqrt(n_embd) for gemma3 */
    float q_scale;         /* > 0: q is multiplied by this after rope and attention scores are not
                              scaled (gemma3); 0: scores are scaled by 1/sqrt(head_dim) */
    float logit_softcap;   /* > 0: logits become cap * tanh(logit / cap); 0 = off */
    bool ffn_gelu;         /* FFN gate through GELU (gemma3) instead of SiLU */
    int32_t n_expert;      /* routed experts per layer; 0 = a dense FFN */
    int32_t n_expert_used; /* experts per token, 1..n_expert */
    int32_t n_ff_exp;      /* each expert's hidden width */
    int32_t n_ff_shexp;    /* the sigmoid-gated shared expert's width (qwen35moe); 0 = none */
    int32_t rope_sections[4]; /* IMRoPE sections in rotated pairs (qwen35moe); all 0 = plain rope */
    int32_t n_in_extra;       /* widest matmul input beyond n_embd, q and n_ff (DeltaNet's value
                                 width); 0 when none */
    bool recurrent;           /* some layers keep a per-sequence recurrent state (qwen35moe) */
    struct dnet_dims dnet;    /* the DeltaNet layers' shapes, when recurrent (dnet_hparams) */
    int32_t n_nextn; /* MTP blocks the file has after its n_layer layers (not in n_layer) */
    bool last_layer_all_rows; /* llama.cpp runs the last layer's FFN on every row, not only the
                                 output rows (qwen35moe), which picks the router's arithmetic */
    int32_t n_embd_pl;        /* gemma4's per-layer input embeddings' width; 0 = none */
};

/* A layer's head width, KV heads and rotated dims: its own where it has them (gemma4). */
static inline int32_t layer_head_dim(const struct hparams *hp, const struct layer *L)
{
    return L->head_dim ? L->head_dim : hp->head_dim;
}

static inline int32_t layer_n_head_kv(const struct hparams *hp, const struct layer *L)
{
    return L->n_head_kv ? L->n_head_kv : hp->n_head_kv;
}

static inline int32_t layer_rope_dim(const struct hparams *hp, const struct layer *L)
{
    return L->rope_dim ? L->rope_dim : hp->rope_dim;
}

/*
 * Where a contiguous range of layers runs (src/model/stages.c decides it at
 * load). Stages are in layer order; the first also runs the embedding and
 * the last the output (final norm, output matmul, soft-cap), so a last
 * stage of no layers puts the output on another backend than the last
 * layers (llama.cpp's -ngl n_layer: every layer on the GPU, the output on
 * the CPU).
 */
struct stage_place {
    const struct backend *be; /* the backend that prepares and runs these layers */
    int device;               /* the backend's device index (0 for the CPU) */
    int32_t l0, l1;           /* layers [l0, l1); l0 == l1 only for an output-only last stage */
    uint64_t weight_bytes;    /* the file's bytes of the weights it holds (budget.c) */
};

#define MODEL_MAX_STAGES 16

struct hearth_model {
    struct gguf_file *gguf;
    uint64_t fingerprint; /* gguf_fingerprint: which weights a saved K/V belongs to */
    struct tokenizer *tok;
    char *chat_template; /* tokenizer.chat_template, NUL-terminated, or NULL; owned */
    char arch[32];
    struct hparams hp;
    struct weight tok_embd; /* (n_embd) x n_vocab rows */
    float *output_norm;     /* (n_embd) owned */
    struct weight output;   /* (n_embd -> n_vocab); tok_embd when tied */
    struct layer *layers;   /* [n_layer + n_nextn]: the MTP blocks after the layers */
    int n_threads;
    uint64_t weight_bytes;    /* the file's bytes of every tensor loaded */
    struct mem_acct acct;     /* the host's copies of the vectors (MEM_WEIGHTS) */
    uint64_t routed_bytes;    /* of those, the routed experts' stacks (MoE) */
    uint64_t matmul_macs;     /* multiply-adds of one row through every matrix it holds but
                                 the MTP head's, which runs in a context of its own */
    uint64_t routed_macs;     /* of those, the routed experts' stacks' (MoE) */
    const struct backend *be; /* the first stage's backend: reads norm and bias vectors into
                                 host f32 (vector_to_f32) */
    int32_t n_stage;          /* 1..MODEL_MAX_STAGES */
    struct stage_place stage[MODEL_MAX_STAGES];
    bool want_mtp; /* the load was asked for the MTP head (hearth_model_params.mtp) */
    bool has_mtp;  /* layers[n_layer] is the MTP head, loaded and prepared */
    struct stage_place mtp_place; /* where an MTP context runs it: the output's backend, layer
                                     n_layer alone */
    /* gemma4's per-layer input embeddings (hp.n_embd_pl > 0): each token's row of
     * n_layer x n_embd_pl, added to a projection of its scaled embedding */
    struct weight ple_tok_embd;   /* (n_layer n_embd_pl) x n_vocab rows, read row by row */
    struct weight ple_model_proj; /* (n_embd -> n_layer n_embd_pl) */
    float *ple_proj_norm;         /* (n_embd_pl) owned */
    float *rope_freqs;            /* gemma4's full layers' rope divisors, owned; NULL = none */
};

/* A context's share of one stage: the model's placement and the backend's state for it. */
struct stage {
    const struct stage_place *place;
    void *state;        /* the backend's ctx->be while this stage runs (its ctx_init) */
    bool embed;         /* the first stage: runs embed */
    bool output;        /* the last stage: runs the output and holds ACT_LOGITS */
    size_t state_len;   /* floats of one sequence's recurrent state on this stage */
    size_t state_off;   /* where that share starts in a whole-model snapshot */
    uint64_t kv_bytes;  /* its layers' K/V memory, on its device or in the host pool */
    uint64_t act_bytes; /* its activation buffers, and the logits on the output stage */
};

struct hearth_context {
    struct hearth_model *model;
    struct hearth_context_params p;
    struct kv_cache kv;      /* block tables and, on the CPU, the pool the blocks live in */
    int64_t cache_cap;       /* bytes the prefix cache may hold (whole blocks), -1 = no cap */
    struct kv_disk *disk;    /* the prefix cache's disk tier (kvdisk.h), or NULL */
    void *be;                /* the current stage's backend state (stage.state): what the
                                backend's operations read as theirs */
    const struct stage *st;  /* the stage ctx->be belongs to; its place says the layers */
    int32_t n_stage;         /* model->n_stage; 1 for an MTP context (model->mtp_place) */
    struct stage *stages;    /* [n_stage] */
    float *x_host;           /* [n_batch][n_embd] the residual stream crossing a stage
                                boundary; NULL with one stage */
    float **snap_rows;       /* [n_batch] snap_plan's whole-model destinations, which each
                                stage's state_save_rows receive offset to its share */
    size_t state_len;        /* floats of one sequence's recurrent state over all stages */
    const float *logits;     /* [n_out][n_vocab] host rows of the last batch's logits */
    float *hidden;           /* [n_batch][n_embd] every row's final hidden state (after the
                                output norm; the MTP head's after its own) of the last batch:
                                p.keep_hidden or p.mtp; else NULL */
    int32_t *out_row;        /* [n_batch] logits row of batch row i, or -1 */
    int32_t *out_src;        /* [n_batch] batch row of logits row i (the rows gathered) */
    int32_t n_rows;          /* rows of the last batch (valid out_row entries) */
    int32_t *seq_next;       /* [n_seq] next position per sequence while checking a batch */
    struct snap_store *snap; /* host copies of the recurrent state at block boundaries
                                (src/model/snapshot.c); NULL without recurrent layers or when off */
    float *keep;             /* [n_seq][p.n_keep_states][state_len] states hearth_seq_keep_states
                                asked for: after each row of the sequence's last batch; NULL: off */
    bool *keep_want;         /* [n_seq] keep them in the next decode */
    int32_t *keep_first;     /* [n_seq] position of the first kept row, -1: none kept */
    int32_t *keep_n;         /* [n_seq] rows kept from keep_first on */
    float **keep_dup;        /* [n_batch] a row's kept copy when snap_rows[row] took it first */
    struct capture *cap;     /* the layer inputs a block drafter reads (model/capture.h), or NULL */
    struct mem_acct acct;    /* what this file and stages.c allocated for it directly */
};

/* A DeltaNet layer's tensors (struct layer's dnet). */
struct dnet {
    struct weight wqkv;   /* (n_embd -> conv_dim) q, k, v before the conv */
    struct weight wgate;  /* (n_embd -> value_dim) z, the output gate */
    struct weight wbeta;  /* (n_embd -> n_v_heads) write strength before sigmoid */
    struct weight walpha; /* (n_embd -> n_v_heads) decay input */
    struct weight wout;   /* (value_dim -> n_embd) */
    float *conv;          /* [conv_dim][n_conv] conv taps, oldest input first */
    float *dt_bias;       /* [n_v_heads] */
    float *a;             /* [n_v_heads] ssm_a = -exp(A_log) */
    float *norm;          /* [state_size] the gated RMSNorm's weight */
    int32_t slot;         /* index among the model's DeltaNet layers (state layout) */
};

/* A layer's routed experts (struct layer's moe), as moe_load fills them. */
struct moe {
    struct weight router; /* (n_embd -> n_expert) ffn_gate_inp */
    struct weight *gate;  /* [n_mats] (n_embd -> n_ff) slices of ffn_gate_exps, then the shared
                             expert's ffn_gate_shexp when there is one */
    struct weight *up;    /* [n_mats] (n_embd -> n_ff) ffn_up_exps, ffn_up_shexp */
    struct weight *down;  /* [n_mats] (n_ff -> n_embd) ffn_down_exps, ffn_down_shexp */
    /* The routed experts' whole stacks, expert e's rows from e * n_out: what a backend
       with moe_stacks reads (prepared for it, and the router too, in place of the slices
       above); else unprepared views of the file's data. */
    struct weight gate_exps; /* (n_embd -> n_expert * n_ff) */
    struct weight up_exps;   /* (n_embd -> n_expert * n_ff) */
    struct weight down_exps; /* (n_ff -> n_expert * n_embd) */
    float *shared_gate;      /* (n_embd) ffn_gate_inp_shexp: the shared expert's weight is
                                sigmoid(shared_gate . x); NULL without a shared expert */
    int32_t n_expert;
    int32_t n_mats;  /* n_expert, plus one with a shared expert (matrix n_expert) */
    int32_t n_used;  /* experts per token, 1..n_expert */
    int32_t n_slots; /* n_used, plus one for the shared expert, which every token takes
                        in its last slot and which is added last, as llama.cpp adds it */
    int32_t n_ff;    /* each expert's hidden width */
    int32_t n_embd;
};

/* Whether layer l is a recurrent (DeltaNet) mixer: known from the hyperparameters, before load. */
/*
 * Elements per token per layer of the cache's K (and V) rows: the widest
 * layer's, among those that keep their own (gemma4's two kinds differ).
 */
static inline int32_t model_kv_dim(const struct hearth_model *m)
{
    int32_t w = 0;
    for (int32_t l = 0; m->layers && l < m->hp.n_layer; l++) {
        const struct layer *L = &m->layers[l];
        const int32_t d       = layer_n_head_kv(&m->hp, L) * layer_head_dim(&m->hp, L);
        if (!L->kv_reuse && d > w)
            w = d;
    }
    return w ? w : m->hp.n_head_kv * m->hp.head_dim;
}

static inline bool model_layer_is_dnet(const struct hearth_model *m, int32_t l)
{
    return m->hp.recurrent && !m->layers[l].attn_gated;
}

/* ------------------------------------------- reading the KV cache --- */

/*
 * Base of layer l's K (which=0) or V (which=1) pool: [n_blocks][block_tokens][kv_dim].
 * Layers of group KV_NONE, and layers not on the host, have none here and are never
 * addressed (here or below).
 */
static inline uint8_t *kv_layer_base(const struct kv_cache *kv, int32_t l, int which)
{
    const struct kv_pool *p = &kv->pool[kv->group[l]];
    return p->mem + (size_t)kv->slot[l] * (p->layer_len[0] + p->layer_len[1]) +
           (which ? p->layer_len[0] : 0);
}

/* Sequence seq's block table for layer l's pool (entries of released blocks are -1). */
static inline const int32_t *kv_layer_blocks(const struct kv_cache *kv, int32_t l, int32_t seq)
{
    return kv->seqs[seq].t[kv->group[l]].blocks;
}

/* Address of token pos's K (which=0) or V (which=1) row in layer l of sequence seq. */
static inline void *kv_row(const struct kv_cache *kv, int32_t l, int which, int32_t seq,
                           int32_t pos)
{
    int32_t b  = kv_layer_blocks(kv, l, seq)[pos / kv->block_tokens];
    size_t tok = (size_t)b * kv->block_tokens + (size_t)(pos % kv->block_tokens);
    return kv_layer_base(kv, l, which) + tok * kv->row_len[which];
}

/* The layer a tensor name belongs to ("blk.12.attn_q.weight": 12), or -1. */
static inline int32_t memlaw_tensor_layer(const char *name)
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

#endif
