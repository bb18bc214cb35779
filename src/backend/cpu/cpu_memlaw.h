/*
 * cpu_memlaw.h: the CPU backend's memory law (backend.h's struct
 * backend_law): the bytes of every buffer cpu.c, cpu_moe.c and
 * cpu_deltanet.c allocate for a stage, which they allocate field by field
 * from the structs below.
 */
#ifndef HEARTH_BACKEND_CPU_MEMLAW_H
#define HEARTH_BACKEND_CPU_MEMLAW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/types.h"

/* The CPU backend's activation buffers of one stage (cpu.c's struct scratch), in bytes. */
struct memlaw_cpu_scratch {
    size_t x, xb, q, kx, vx, att, hb, hb2; /* f32 rows of n_batch tokens */
    size_t scores;                         /* every thread's attention tile */
    size_t scores_per_thread;              /* floats of one thread's tile */
    size_t act, act_row;                   /* quantized input rows, and one row's bytes */
    size_t act_sum;                        /* their Q8_0 block sums */
    size_t logits;                         /* the output stage's [n_batch][n_vocab] */
    size_t eh;                             /* an MTP head's [n_batch][2 n_embd] */
    size_t ple, ple_h; /* gemma4's per-layer inputs [n_batch][n_layer n_embd_pl], and as
                          many for the token rows they are made of, then a layer's gate
                          rows; 0 without */
};
void memlaw_cpu_scratch(const struct hparams *hp, int32_t n_batch, int n_threads, bool output,
                        bool nextn, struct memlaw_cpu_scratch *out);

/* The CPU's MoE buffers of a stage with routed experts (cpu_moe.c), in bytes. */
struct memlaw_moe_scratch {
    size_t probs, sel, wsel, cnt, off, row, tok, act, act_sum, hg, hu, out;
    size_t act_row; /* bytes of one quantized input row */
};
void memlaw_moe_scratch(const struct hparams *hp, int32_t n_batch, struct memlaw_moe_scratch *out);

/* The CPU's DeltaNet state and buffers of n_layer recurrent layers (cpu_deltanet.c), in bytes. */
struct memlaw_dnet {
    size_t conv, ssm;                                /* the state: every (layer, sequence)'s */
    size_t qkv, z, beta, g, o, ones, qg, gate, snap; /* per batch */
    size_t conv_len, ssm_len;                        /* floats of one (layer, sequence)'s */
};
void memlaw_dnet(const struct hearth_model *m, int32_t n_layer, int32_t n_seq, int32_t n_batch,
                 struct memlaw_dnet *out);

#endif
