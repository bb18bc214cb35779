/*
 * model.h: the loaded model (weights in the GGUF mapping, hyperparameters,
 * tokenizer) and the context that runs it (KV cache, the backend's buffers
 * and state). Internal to the library; include/hearth.h is the public face.
 */
#ifndef HEARTH_MODEL_H
#define HEARTH_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "backend/backend.h"
#include "hearth.h"
#include "model/kv.h"
#include "model/snapshot.h"
#include "chat/chat.h"
#include "text/tokenizer.h"

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
    float *attn_norm;         /* (n_embd) owned f32 copy */
    struct weight wq;         /* (n_embd -> n_head * head_dim) */
    struct weight wk;         /* (n_embd -> n_head_kv * head_dim) */
    struct weight wv;         /* (n_embd -> n_head_kv * head_dim) */
    struct weight wo;         /* (n_head * head_dim -> n_embd) */
    float *bq, *bk, *bv;      /* optional biases (qwen2), owned; NULL when absent */
    float *q_norm, *k_norm;   /* (head_dim) per-head RMSNorm of q and k (qwen3); NULL when absent */
    float *post_attn_norm;    /* (n_embd) RMSNorm of the attention output before its residual
                                 add (gemma3); NULL when absent */
    float *post_ffn_norm;     /* (n_embd) the same after the FFN (gemma3); NULL when absent */
    float *ffn_norm;          /* (n_embd) */
    struct weight w_gate;     /* (n_embd -> n_ff) */
    struct weight w_up;       /* (n_embd -> n_ff) */
    struct weight w_down;     /* (n_ff -> n_embd) */
    bool swa;                 /* attends through the sliding window of hp.n_swa tokens */
    float rope_base;          /* this layer's rope base: hp.rope_base, or gemma3's local one */
    struct moe *moe;          /* routed experts in place of the FFN above (qwen3moe); else NULL */
    struct dnet *dnet;        /* a Gated DeltaNet mixer in place of attention (qwen35moe); else NULL */
    bool attn_gated;          /* wq yields [q, gate] per head; the output is gated by sigmoid(gate) */
    struct nextn *nextn;      /* the MTP head's input and output norms (layer n_layer only) */
};

/* Hyperparameters from <arch>.* metadata. */
struct hparams {
    int32_t n_vocab;
    int32_t n_ctx_train;
    int32_t n_embd;      /* model width, 64..8192 */
    int32_t n_layer;
    int32_t n_head;
    int32_t n_head_kv;   /* divides n_head */
    int32_t head_dim;    /* n_embd / n_head unless the file says */
    int32_t n_ff;
    int32_t rope_dim;    /* rotated dims per head, even, <= head_dim */
    float rope_base;     /* 10000 by default */
    float norm_eps;      /* RMSNorm epsilon */
    bool rope_neox;      /* rotate (x[i], x[i + rope_dim/2]) instead of adjacent pairs */
    int32_t n_swa;       /* sliding attention window in tokens of the layers marked swa, read
                            by the architectures that have one (gemma3); 0 = full attention */
    float embd_scale;    /* token embeddings are multiplied by this: 1, sqrt(n_embd) for gemma3 */
    float q_scale;       /* > 0: q is multiplied by this after rope and attention scores are not
                            scaled (gemma3); 0: scores are scaled by 1/sqrt(head_dim) */
    float logit_softcap; /* > 0: logits become cap * tanh(logit / cap); 0 = off */
    bool ffn_gelu;       /* FFN gate through GELU (gemma3) instead of SiLU */
    int32_t n_expert;      /* routed experts per layer; 0 = a dense FFN */
    int32_t n_expert_used; /* experts per token, 1..n_expert */
    int32_t n_ff_exp;      /* each expert's hidden width */
    int32_t n_ff_shexp;    /* the sigmoid-gated shared expert's width (qwen35moe); 0 = none */
    int32_t rope_sections[4]; /* IMRoPE sections in rotated pairs (qwen35moe); all 0 = plain rope */
    int32_t n_in_extra;    /* widest matmul input beyond n_embd, q and n_ff (DeltaNet's value
                              width); 0 when none */
    bool recurrent;        /* some layers keep a per-sequence recurrent state (qwen35moe) */
    int32_t n_nextn;       /* MTP blocks the file has after its n_layer layers (not in n_layer) */
    bool last_layer_all_rows; /* llama.cpp runs the last layer's FFN on every row, not only the
                                 output rows (qwen35moe), which picks the router's arithmetic */
};

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
    uint64_t fingerprint;    /* gguf_fingerprint: which weights a saved K/V belongs to */
    struct tokenizer *tok;
    char *chat_template;     /* tokenizer.chat_template, NUL-terminated, or NULL; owned */
    char arch[32];
    struct hparams hp;
    struct weight tok_embd;  /* (n_embd) x n_vocab rows */
    float *output_norm;      /* (n_embd) owned */
    struct weight output;    /* (n_embd -> n_vocab); tok_embd when tied */
    struct layer *layers;    /* [n_layer + n_nextn]: the MTP blocks after the layers */
    int n_threads;
    uint64_t weight_bytes;   /* the file's bytes of every tensor loaded */
    struct mem_acct acct;    /* the host's copies of the vectors (MEM_WEIGHTS) */
    uint64_t routed_bytes;   /* of those, the routed experts' stacks (MoE) */
    uint64_t matmul_macs;    /* multiply-adds of one row through every matrix it holds but
                                the MTP head's, which runs in a context of its own */
    uint64_t routed_macs;    /* of those, the routed experts' stacks' (MoE) */
    const struct backend *be; /* the first stage's backend: reads norm and bias vectors into
                                 host f32 (vector_to_f32) */
    int32_t n_stage;          /* 1..MODEL_MAX_STAGES */
    struct stage_place stage[MODEL_MAX_STAGES];
    bool want_mtp;            /* the load was asked for the MTP head (hearth_model_params.mtp) */
    bool has_mtp;             /* layers[n_layer] is the MTP head, loaded and prepared */
    struct stage_place mtp_place; /* where an MTP context runs it: the output's backend, layer
                                     n_layer alone */
};

/* A context's share of one stage: the model's placement and the backend's state for it. */
struct stage {
    const struct stage_place *place;
    void *state;       /* the backend's ctx->be while this stage runs (its ctx_init) */
    bool embed;        /* the first stage: runs embed */
    bool output;       /* the last stage: runs the output and holds ACT_LOGITS */
    size_t state_len;  /* floats of one sequence's recurrent state on this stage */
    size_t state_off;  /* where that share starts in a whole-model snapshot */
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
    struct mem_acct acct;    /* what this file and stages.c allocated for it directly */
};

/*
 * Hands w, read only through matmul, to the backend of layer l's stage to
 * prepare (the CPU repacks it, a device backend uploads it; l = n_layer:
 * the output's stage); model_release_weight frees that copy with the same
 * backend. HEARTH_ENOMEM with a sentence when the backend cannot.
 */
enum hearth_status model_prepare_weight(struct hearth_model *m, int32_t l, struct weight *w,
                                        char *err, size_t err_len);
void model_release_weight(const struct hearth_model *m, int32_t l, struct weight *w);

/* Whether every backend the model's stages use runs weights of this type. */
bool model_weight_supported(const struct hearth_model *m, enum dtype type);
/* The first of the model's stage backends that does not run weights of type, or NULL. */
const struct backend *model_weight_refuser(const struct hearth_model *m, enum dtype type);

/* <arch>.key of m's file as a u32: false when absent or not a number that fits. */
bool model_arch_u32(const struct hearth_model *m, const char *key, uint32_t *out);

/*
 * Checks that draft can draft for target: the same vocabulary, token by
 * token, and the same BOS and EOS (both need their tokenizers: loaded, or
 * model_describe's with model_load_tokenizer). false with the first
 * difference in err.
 */
bool model_vocab_match(const struct hearth_model *target, const struct hearth_model *draft,
                       char *err, size_t err_len);

/* Reads a described model's tokenizer (for model_vocab_match), as a load does. */
enum hearth_status model_load_tokenizer(struct hearth_model *m, char *err, size_t err_len);

/*
 * A model read from path's header alone (gguf_open validates the whole
 * table, but no tensor is read): the architecture, the hyperparameters,
 * the layers' kinds and n_vocab, enough for the memory law. No tokenizer,
 * no weights, no placement; hearth_model_free frees it. mtp: as if loaded
 * with its MTP head.
 */
enum hearth_status model_describe(const char *path, bool mtp, struct hearth_model **out,
                                  char *err, size_t err_len);

/* The stage of layer l (l = n_layer: the output's, the last). */
const struct stage_place *model_stage_of(const struct hearth_model *m, int32_t l);

/* Whether layer l is a recurrent (DeltaNet) mixer: known from the hyperparameters, before load. */
static inline bool model_layer_is_dnet(const struct hearth_model *m, int32_t l)
{
    return m->hp.recurrent && !m->layers[l].attn_gated;
}

/*
 * Decides m->stage from p (n_gpu_layers, devices, layer_split; m->hp.n_layer
 * known). HEARTH_EINVAL for a split that does not add up to n_layer, an
 * unknown backend, or flags that contradict; HEARTH_EUNSUPPORTED when a GPU
 * is asked for and none can be used. One sentence in err.
 */
enum hearth_status model_place(struct hearth_model *m, const struct hearth_model_params *p,
                               char *err, size_t err_len);

/*
 * Finds a 2-D weight {n_in, n_out} (optional: absent leaves w zeroed and is
 * OK) or a 1-D vector of n elements copied to a new f32 array (owned), and
 * checks shape and type, as the loader does for every tensor.
 */
enum hearth_status model_get_weight(struct hearth_model *m, const char *name, int64_t n_in,
                                    int64_t n_out, bool optional, struct weight *w, char *err,
                                    size_t err_len);
enum hearth_status model_get_vector(struct hearth_model *m, const char *name, int64_t n,
                                    bool optional, float **out, char *err, size_t err_len);

#endif
