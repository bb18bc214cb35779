/*
 * vk_deltanet.h: Qwen3.5's Gated DeltaNet mixer on a Vulkan device (the
 * arithmetic of src/backend/cpu/cpu_deltanet.c, which its header states): the
 * three shaders' operations (conv1d.comp, dnet_prep.comp, deltanet.comp)
 * and a stage's recurrent state, kept on the device with the snapshots
 * backend.h's state_save_rows asks for copied back to the host.
 *
 * Bits (against the CPU): the projections' inputs are rounded to their
 * weights' activation types as the CPU rounds them (vk_act.c), the conv's
 * fmas and the delta rule's dot products run in the CPU's order, so what
 * differs is the matmuls' summation order, the device's exp (SiLU,
 * sigmoid, softplus, the decay; 3 + 2|x| ulp in the spec), the f32 sums of
 * squares of the L2 norms and the head RMSNorm (f64 on the CPU), and
 * whatever those feed through the state. tests/unit/test_vk_deltanet.c
 * states the bounds.
 *
 * State per sequence and DeltaNet layer, as the CPU's: the conv window
 * [conv_dim][n_conv - 1] and the heads' matrices [n_v][S][S], one buffer of
 * each per layer for all n_seq sequences.
 */
#ifndef HEARTH_VK_DELTANET_H
#define HEARTH_VK_DELTANET_H

#include "backend/vk/vk.h"
#include "util/memacct.h"

struct hearth_model;

/* The shape every DeltaNet layer of a model shares (struct dnet_dims). */
struct vk_dnet_shape {
    uint32_t n_conv;   /* conv taps, 2..16 */
    uint32_t S;        /* state_size: floats per key and value head */
    uint32_t n_k;      /* key heads */
    uint32_t n_v;      /* value heads, a multiple of n_k */
    uint32_t conv_dim; /* 2 n_k S + n_v S: a qkv row */
};

/*
 * Where the operations copy the state of rows that end a snapshot: slots
 * int32 [n_tok] (a slot index, or -1 for none), buf [slots][stride] f32.
 * conv1d writes a slot's [conv_dim][n_conv - 1] window from float 0,
 * deltanet its [n_v][S][S] matrices from float off.
 */
struct vk_dnet_snap {
    struct vk_buf *slots;
    struct vk_buf *buf;
    uint32_t n_slot; /* slots buf holds */
    uint32_t stride; /* floats per slot */
    uint32_t off;    /* where the matrices start in a slot */
};

/*
 * x (n_tok rows of conv_dim f32) = SiLU(the causal conv of each channel over
 * its sequence's window and x), in place; each row's window (state: n_seq
 * windows of [conv_dim][n_conv - 1]) slides by one. rows: int32 [n_tok][2]
 * (sequence, position), a row's sequence >= n_seq skipped. taps:
 * [conv_dim][n_conv], oldest first. snap: NULL, or where to copy windows.
 */
enum hearth_status vk_op_conv1d(struct vk_seq *s, const struct vk_dnet_shape *sh, struct vk_buf *x,
                                struct vk_buf *taps, struct vk_buf *state, uint32_t n_seq,
                                struct vk_buf *rows, uint32_t n_tok,
                                const struct vk_dnet_snap *snap, char *err, size_t err_len);
/*
 * Per row: q and k heads of x (conv output) L2-normalised (eps), beta =
 * sigmoid(beta), g = softplus(g + dt_bias) * a; beta and g [n_tok][n_v].
 */
enum hearth_status vk_op_dnet_prep(struct vk_seq *s, const struct vk_dnet_shape *sh,
                                   struct vk_buf *x, struct vk_buf *beta, struct vk_buf *g,
                                   struct vk_buf *dt_bias, struct vk_buf *a, uint32_t n_tok,
                                   float eps, char *err, size_t err_len);
/*
 * The delta rule: each row's sequence state (state: n_seq x [n_v][S][S])
 * decays by exp(g), takes the row's k, v at strength beta, and gives
 * o[t][h] = S^T q / sqrt(S) ([n_tok][n_v][S]), row by row in batch order.
 */
enum hearth_status vk_op_dnet_scan(struct vk_seq *s, const struct vk_dnet_shape *sh,
                                   struct vk_buf *x, struct vk_buf *beta, struct vk_buf *g,
                                   struct vk_buf *state, uint32_t n_seq, struct vk_buf *o,
                                   struct vk_buf *rows, uint32_t n_tok,
                                   const struct vk_dnet_snap *snap, char *err, size_t err_len);

/* ---------------------------------------------------- a stage's state --- */

/* The recurrent state and scratch of one stage's DeltaNet layers. */
struct vk_dnet;

/*
 * A DeltaNet layer's matmul weights on the stage's device, in the order the
 * layer runs them, and the type each one's input is rounded to first, as
 * the CPU rounds it (vk_op_act_round; DTYPE_F32: summed as it is), in actq
 * ([n_batch][the wider of n_embd and n_v S] f32).
 */
enum { DNET_QKV, DNET_GATE, DNET_BETA, DNET_ALPHA, DNET_OUT, DNET_N_WEIGHTS };
struct vk_dnet_weights {
    const struct vk_weight *w[DNET_N_WEIGHTS];
    enum dtype act[DNET_N_WEIGHTS];
    struct vk_buf *actq;
};

/*
 * The state of layers l0..l1-1's DeltaNet layers of m for n_seq sequences
 * (zeroed), their f32 vectors uploaded, scratch for n_batch rows, the bytes
 * added to acct by kind (the state MEM_KV, the vectors MEM_WEIGHTS, the
 * scratch MEM_COMPUTE; memlaw_vk predicts them); *out NULL when the range
 * has none. HEARTH_ENOMEM with a sentence.
 */
enum hearth_status vk_dnet_new(struct vk_dev *d, const struct hearth_model *m, int32_t l0,
                               int32_t l1, int32_t n_seq, int32_t n_batch, struct mem_acct *acct,
                               struct vk_dnet **out, char *err, size_t err_len);
void vk_dnet_free(struct vk_dnet *dn);

/*
 * The host side of the state, between sequences (each waits on the device):
 * zeroing sequence seq, its length in floats (the stage's share of a
 * snapshot, laid out as the CPU's: every layer's window, then every
 * layer's matrices), and loading src as seq's state.
 */
enum hearth_status vk_dnet_reset(struct vk_dnet *dn, int32_t seq, char *err, size_t err_len);
size_t vk_dnet_state_len(const struct vk_dnet *dn);
enum hearth_status vk_dnet_load(struct vk_dnet *dn, int32_t seq, const float *src, char *err,
                                size_t err_len);
/* backend.h's state_save_rows: [n_batch] host destinations, NULL where none. */
float **vk_dnet_save_rows(struct vk_dnet *dn);

/* A new batch: its snapshot plan (vk_dnet_save_rows) is read at its first vk_dnet_forward. */
void vk_dnet_batch_begin(struct vk_dnet *dn);
/*
 * Whether the batch's plan is still to be uploaded (the caller runs what it
 * recorded first), and uploading it: slots for the rows to snapshot.
 */
bool vk_dnet_plan_pending(const struct vk_dnet *dn);
enum hearth_status vk_dnet_plan(struct vk_dnet *dn, int32_t n_tok, char *err, size_t err_len);
/*
 * Records DeltaNet layer l (of the stage) on xb (n_tok rows of n_embd, in
 * place): the projections, conv, prep, scan, gated norm and the output
 * projection. rows: the batch's int32 [n_tok][2] (sequence, position).
 */
enum hearth_status vk_dnet_forward(struct vk_dnet *dn, struct vk_seq *s, int32_t l,
                                   const struct vk_dnet_weights *w, struct vk_buf *xb,
                                   struct vk_buf *rows, int32_t n_tok, float eps, char *err,
                                   size_t err_len);
/* Whether this batch takes snapshots: after each layer, run it and vk_dnet_fetch. */
bool vk_dnet_saving(const struct vk_dnet *dn);
/* Copies layer l's share of the batch's snapshots to their host destinations. */
enum hearth_status vk_dnet_fetch(struct vk_dnet *dn, int32_t l, char *err, size_t err_len);

#endif
