/*
 * moe.h: the routed mixture-of-experts FFN (qwen3moe, qwen35moe): a router
 * picks n_expert_used of n_expert SwiGLU experts per token, and their outputs
 * are summed with the router's renormalised weights, plus, when the file has
 * one, a shared expert weighted by sigmoid(ffn_gate_inp_shexp . x).
 * Loading is the model's; the arithmetic is the
 * backend's moe operation (src/backend/backend.h, cpu_moe.c on the CPU).
 */
#ifndef HEARTH_MOE_H
#define HEARTH_MOE_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"

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
    float *shared_gate;   /* (n_embd) ffn_gate_inp_shexp: the shared expert's weight is
                             sigmoid(shared_gate . x); NULL without a shared expert */
    int32_t n_expert;
    int32_t n_mats;       /* n_expert, plus one with a shared expert (matrix n_expert) */
    int32_t n_used;       /* experts per token, 1..n_expert */
    int32_t n_slots;      /* n_used, plus one for the shared expert, which every token takes
                             in its last slot and which is added last, as llama.cpp adds it */
    int32_t n_ff;         /* each expert's hidden width */
    int32_t n_embd;
};


/*
 * Reads <arch>.expert_count, expert_used_count and expert_feed_forward_length
 * into m->hp. A file without expert_count is dense (n_expert 0) and OK.
 * HEARTH_EFORMAT with a sentence in err when the counts do not fit together.
 */
enum hearth_status moe_load_hparams(struct hearth_model *m, char *err, size_t err_len);

/*
 * Loads layer il's router and stacked experts (blk.<il>.ffn_gate_inp,
 * ffn_{gate,up,down}_exps), checking shapes and types, and prepares each
 * expert's slice for the backend (model_prepare_weight), or, for a backend
 * with moe_stacks, the router and the whole stacks. *out is owned by the
 * caller (moe_free, with the same layer, whose stage's backend releases the copies); NULL on
 * error.
 */
enum hearth_status moe_load(struct hearth_model *m, int32_t il, struct moe **out, char *err,
                            size_t err_len);
void moe_free(const struct hearth_model *m, int32_t il, struct moe *moe);

#endif
