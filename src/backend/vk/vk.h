/*
 * vk.h: the Vulkan runtime, the layer the Vulkan backend table will be
 * built on: devices (vk_device.c), buffers and their uploads (vk_buffer.c),
 * compute pipelines from the built-in SPIR-V and command sequences
 * (vk_pipeline.c), and the operations' dispatch geometry: matmul, norm,
 * rope, SwiGLU (vk_ops.c), weights split across buffers and embedding rows
 * (vk_weight.c), the paged KV cache's store and attention (vk_attention.c),
 * and the row operations between them (vk_rows.c).
 *
 * Compiled only when the Makefile finds Vulkan (it defines HEARTH_VULKAN).
 * Every call that can fail returns a hearth_status and writes one sentence
 * naming the Vulkan call and its VkResult into err. A device is driven by
 * one thread at a time; distinct devices are independent.
 *
 * Typical use: vk_dev_open, vk_buf_new + vk_buf_upload for weights and
 * activations, vk_pipe_get per shader, then per micro-batch step one
 * sequence (vk_seq_begin, vk_op_* or vk_seq_dispatch per operation,
 * vk_seq_run), then vk_buf_download of the result.
 */
#ifndef HEARTH_VK_H
#define HEARTH_VK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hearth.h"
#include "util/dtype.h"

/* What `hearth devices` shows of one physical device, and what kernels may rely on. */
struct vk_device_info {
    char name[256];         /* deviceName */
    char driver[256];       /* driverName and driverInfo: "llvmpipe (Mesa 22.3.6 (LLVM 15.0.6))" */
    const char *type;       /* "discrete", "integrated", "virtual", "cpu", "other" */
    char api[24];           /* the device's Vulkan version: "1.3.230" */
    uint64_t local_bytes;   /* sum of the device-local heaps */
    uint32_t subgroup_size; /* default subgroup size, 1..128 */
    bool fp16;              /* shaderFloat16 */
    bool int8;              /* shaderInt8 */
    bool storage16;         /* storageBuffer16BitAccess */
    bool int_dot;           /* VK_KHR_shader_integer_dot_product (or core 1.3) */
    bool coopmat;           /* VK_KHR_cooperative_matrix is offered */
};

/*
 * The Vulkan devices this machine offers, in the loader's order (index i is
 * "vulkan<i>"): a malloc'd array of *n in *out (NULL when *n is 0).
 * HEARTH_EUNSUPPORTED with a sentence when there is no loader or no driver;
 * zero devices is HEARTH_OK with *n 0.
 */
enum hearth_status vk_enumerate(struct vk_device_info **out, int *n, char *err, size_t err_len);

/*
 * Device index's device-local memory in bytes (vk_device_info.local_bytes),
 * or 0 when there is no such device. HEARTH_VK_MEMORY_MIB=N in the
 * environment (a positive whole number; anything else is ignored) makes
 * every device report N MiB instead: a test knob for the memory check at
 * load, and `hearth devices` shows the figure it sets.
 */
uint64_t vk_device_memory(int index);

struct vk_dev;

enum {
    VK_OPEN_STAGING = 1, /* always copy through a staging buffer, even on unified memory */
    VK_OPEN_PLAIN   = 2, /* shaders without subgroup operations, even where the device has them */
    VK_OPEN_NO_IDOT = 4  /* decode matmuls in f32 even where the device has integer dot products */
};

/*
 * Opens device index (as vk_enumerate numbers them) with one compute queue.
 * flags: VK_OPEN_*. HEARTH_ERANGE when there is no such device.
 * HEARTH_VK_IDOT=0 in the environment acts as VK_OPEN_NO_IDOT on every
 * device: the f32 decode matmuls, to compare the two paths end to end.
 */
enum hearth_status vk_dev_open(int index, unsigned flags, struct vk_dev **out, char *err,
                               size_t err_len);
/* Waits for the device to go idle and frees it; every buffer, pipeline and sequence first. */
void vk_dev_close(struct vk_dev *d);
const struct vk_device_info *vk_dev_info(const struct vk_dev *d);

/* ------------------------------------------------------------- buffers --- */

struct vk_buf;

/*
 * A device-local storage buffer of len bytes (> 0). HEARTH_ENOMEM with a
 * sentence when the device refuses it or it exceeds what one buffer may
 * hold (maxStorageBufferRange, maxMemoryAllocationSize).
 */
enum hearth_status vk_buf_new(struct vk_dev *d, size_t len, struct vk_buf **out, char *err,
                              size_t err_len);
void vk_buf_free(struct vk_buf *b);
size_t vk_buf_len(const struct vk_buf *b);
/*
 * Copies len bytes between host memory and the buffer at byte offset off
 * (off + len within the buffer, else HEARTH_ERANGE). Synchronous: waits for
 * the device's queue to finish the copy; call between sequences, not
 * during one.
 */
enum hearth_status vk_buf_upload(struct vk_buf *b, size_t off, const void *src, size_t len,
                                 char *err, size_t err_len);
enum hearth_status vk_buf_download(struct vk_buf *b, size_t off, void *dst, size_t len, char *err,
                                   size_t err_len);

/*
 * Copies len bytes from src at src_off to dst at dst_off on the device (the K/V block copy
 * of a truncation). Synchronous, between sequences, like the uploads. HEARTH_ERANGE past
 * either buffer, HEARTH_EINVAL for ranges of one buffer that overlap.
 */
enum hearth_status vk_buf_copy(struct vk_buf *dst, size_t dst_off, struct vk_buf *src,
                               size_t src_off, size_t len, char *err, size_t err_len);

/* ----------------------------------------------------------- pipelines --- */

struct vk_pipe;

/*
 * The compute pipeline of built-in shader name ("mul_q4_0"), whose
 * bindings 0..n_bufs-1 are storage buffers and whose push constants are
 * push_len bytes (at most 128). Created at the first call and kept by the
 * device (freed by vk_dev_close); later calls return the same pipeline.
 * HEARTH_EINVAL when no shader has that name.
 */
enum hearth_status vk_pipe_get(struct vk_dev *d, const char *name, uint32_t n_bufs,
                               uint32_t push_len, struct vk_pipe **out, char *err, size_t err_len);

/*
 * A sequence: one command buffer recorded with dispatches, each separated
 * from the next by a barrier that makes its writes visible to the next's
 * reads, submitted once and waited on with a fence. One per micro-batch
 * step: begin, record, run, and begin again to reuse it.
 */
struct vk_seq;

enum hearth_status vk_seq_new(struct vk_dev *d, struct vk_seq **out, char *err, size_t err_len);
void vk_seq_free(struct vk_seq *s);
/* Starts recording (dropping whatever was recorded and not run). */
enum hearth_status vk_seq_begin(struct vk_seq *s, char *err, size_t err_len);
/*
 * Records pipeline p over bufs (p's n_bufs of them, bound in order) with
 * push constants push, as groups[0] x groups[1] x groups[2] workgroups
 * (each within the device's maxComputeWorkGroupCount, else HEARTH_ERANGE).
 */
enum hearth_status vk_seq_dispatch(struct vk_seq *s, struct vk_pipe *p, struct vk_buf *const *bufs,
                                   const void *push, const uint32_t groups[3], char *err,
                                   size_t err_len);
/* Submits what was recorded and waits for it to finish. */
enum hearth_status vk_seq_run(struct vk_seq *s, char *err, size_t err_len);

/* ---------------------------------------------------------- operations --- */

/* Whether vk_op_matmul has a shader for weights of type t. */
bool vk_op_matmul_supported(enum dtype t);
/*
 * y[t][r] = sum_i W[r][i] * x[t][i] for r < n_out, t < n_tok: w holds n_out
 * rows of n_in elements of type t (dtype_row_len bytes each, the file's
 * layout, from byte 0), x n_tok rows of n_in f32, y n_tok rows of n_out f32.
 * Summed in f32 in the shader's order (tests/unit/test_vk.c states the
 * bound against the f64 sum of the dequantized products).
 */
enum hearth_status vk_op_matmul(struct vk_seq *s, enum dtype t, struct vk_buf *w, struct vk_buf *x,
                                struct vk_buf *y, uint32_t n_in, uint32_t n_out, uint32_t n_tok,
                                char *err, size_t err_len);
/*
 * g[i] = silu(g[i]) * u[i] for i < n (SwiGLU's gating, in place): exp is the device's, so
 * the result differs from the reference's in the last bits (test_vk.c states the bound).
 */
enum hearth_status vk_op_swiglu(struct vk_seq *s, struct vk_buf *g, struct vk_buf *u, uint32_t n,
                                char *err, size_t err_len);
/*
 * The angles vk_op_rope takes, computed on the host in double: cs[t][i] = (cos, sin) of
 * pos[t] * base^(-2i / n_rot) for i < n_rot / 2, n_tok * n_rot floats. Positions are host
 * data already, and the device's sin and cos are only bounded to 2^-11 by the spec.
 */
void vk_rope_angles(const int32_t *pos, uint32_t n_tok, uint32_t n_rot, float base, float *cs);
/*
 * The angles as the CPU backend's rope takes them (ggml's: theta = pos, times
 * base^(-2 / n_rot) in f32 pair by pair, libm's cosf and sinf), for rows at pos. sections:
 * NULL, or IMRoPE's four section sizes (hp.rope_sections, not all 0): a text token's pair i
 * rotates when i % sum lies in the first 3 * sections[(i % sum) % 3] of its cycle, as
 * ggml's imrope assigns pairs to time, height and width, and is (1, 0), the identity, else.
 */
void vk_rope_angles_ggml(const int32_t *pos, uint32_t n_tok, uint32_t n_rot, float base,
                         const int32_t *sections, float *cs);
/*
 * Rotates the first n_rot floats of every head of n_tok rows of x ([n_tok][n_head][head_dim])
 * in place by cs (vk_rope_angles, uploaded): pairs (2i, 2i + 1), or (i, i + n_rot / 2) with
 * neox. Bits: the CPU backend takes ggml's angles (f32, theta scaled pair by pair), which
 * drift from these exact ones by a few ulp of the angle, so at position p the two differ by
 * up to about p * 2^-22 radians.
 */
enum hearth_status vk_op_rope(struct vk_seq *s, struct vk_buf *x, struct vk_buf *cs, uint32_t n_tok,
                              uint32_t n_head, uint32_t head_dim, uint32_t n_rot, bool neox,
                              char *err, size_t err_len);
/* y[t] = x[t] / sqrt(mean(x[t]^2) + eps) * w for t < n_rows over n floats; y may be x. */
enum hearth_status vk_op_rmsnorm(struct vk_seq *s, struct vk_buf *x, struct vk_buf *w,
                                 struct vk_buf *y, uint32_t n, uint32_t n_rows, float eps,
                                 char *err, size_t err_len);

/*
 * y[i] += x[i % period] for i < n: the residual add (period n) or a bias added to each row
 * of width period. One f32 addition per element, the CPU's bits. x may be y only at period n.
 */
enum hearth_status vk_op_add(struct vk_seq *s, struct vk_buf *y, struct vk_buf *x, uint32_t n,
                             uint32_t period, char *err, size_t err_len);
/* y[i] *= a for i < n (the CPU's bits). */
enum hearth_status vk_op_scale(struct vk_seq *s, struct vk_buf *y, uint32_t n, float a, char *err,
                               size_t err_len);
/*
 * y[i] = cap * tanh(y[i] / cap) for i < n, as the CPU orders it (times 1 / cap, tanh, times
 * cap); tanh from the device's exp, so within a few ulp of cap of the CPU's (test_vk.c).
 */
enum hearth_status vk_op_softcap(struct vk_seq *s, struct vk_buf *y, uint32_t n, float cap,
                                 char *err, size_t err_len);
/*
 * g[i] = gelu(g[i]) * u[i] for i < n, in place, the CPU's gelu_mul to the bit: g rounded to
 * f16 and looked up in the table vk_gelu_table makes (held by the device from the first call,
 * which uploads it and so must not come while another thread copies on the device).
 */
enum hearth_status vk_op_gelu(struct vk_seq *s, struct vk_buf *g, struct vk_buf *u, uint32_t n,
                              char *err, size_t err_len);
/* The tanh GELU of every half as a half, computed as ggml's CPU backend computes its table. */
void vk_gelu_table(uint16_t table[65536]);
/*
 * dst[i] = src[rows[i]] for i < n_out, rows of width floats, src holding n_src rows: the
 * output rows packed to the front. rows: n_out int32 on the device; an id >= n_src copies
 * nothing. dst and src differ (the copies run in parallel).
 */
enum hearth_status vk_op_gather(struct vk_seq *s, struct vk_buf *src, struct vk_buf *dst,
                                struct vk_buf *rows, uint32_t width, uint32_t n_src, uint32_t n_out,
                                char *err, size_t err_len);
/*
 * A gated attention layer's q projection (qwen35moe: n_rows heads of [q, gate], head_dim
 * each, 2 * n_rows * head_dim f32) into q and gate (n_rows heads of head_dim each), as the
 * CPU splits it before rope; vk_op_attention then takes gate. Copies, so the bits.
 */
enum hearth_status vk_op_split_qg(struct vk_seq *s, struct vk_buf *qg, struct vk_buf *q,
                                  struct vk_buf *gate, uint32_t n_rows, uint32_t head_dim,
                                  char *err, size_t err_len);

/*
 * Integer-dot decode matmuls (vk_idot.c). Where the device has integer dot products (and the
 * build their shaders; not under VK_OPEN_NO_IDOT), a matmul of up to VK_DOT_MAX_TOK tokens by
 * Q8_0 or Q4_0 weights can take its activations as Q8_0 blocks (vk_op_quant_act) and sum them
 * as the CPU's reference vec_dot_q8_0_q8_0 / vec_dot_q4_0_q8_0 do: the same integer block sums
 * and scale products, to the bit where a row is one block, else within a few roundings of
 * sum |w x| (the order of the adds).
 */
#define VK_DOT_MAX_TOK 7
bool vk_op_matmul_dot_supported(const struct vk_dev *d, enum dtype t, uint32_t n_tok);
/*
 * The Q8_0 blocks of x[0..n) (whole blocks of 32), rounded as vk_op_act_round rounds them to Q8_0:
 * block b is y's words 9 b .. 9 b + 8, the 32 quants packed four to a word (element 4 k + e in
 * byte e of word k) and then the scale, half(d), as an f32. y holds 36 bytes per 32 floats.
 */
enum hearth_status vk_op_quant_act(struct vk_seq *s, struct vk_buf *x, struct vk_buf *y, uint32_t n,
                                   char *err, size_t err_len);
/* y[t] = W xq[t] for t < n_tok, xq from vk_op_quant_act; W n_out rows of n_in of type t. */
enum hearth_status vk_op_matmul_dot(struct vk_seq *s, enum dtype t, struct vk_buf *w,
                                    struct vk_buf *xq, struct vk_buf *y, uint32_t n_in,
                                    uint32_t n_out, uint32_t n_tok, char *err, size_t err_len);

/* ----------------------------------------------------- split weights --- */

/*
 * A weight of n_rows rows of n_in elements of one type, held in as many buffers as the
 * device needs: each part holds whole rows, at most part_max bytes (vk_weight_new), so a
 * 150k-row embedding or output matrix passes lavapipe's 128 MiB per buffer.
 */
struct vk_weight;

/*
 * Uploads data (n_rows rows of dtype_row_len(type, n_in) bytes, the file's layout) into a
 * weight of parts of at most part_max bytes each; part_max 0 takes the device's limit on one
 * buffer (maxStorageBufferRange, maxMemoryAllocationSize). HEARTH_EINVAL for an empty shape
 * or a row not whole blocks, HEARTH_ENOMEM (naming the limit) when one row exceeds a part or
 * the device refuses a buffer.
 */
enum hearth_status vk_weight_new(struct vk_dev *d, enum dtype type, uint32_t n_in, uint32_t n_rows,
                                 const void *data, size_t part_max, struct vk_weight **out,
                                 char *err, size_t err_len);
void vk_weight_free(struct vk_weight *w);
/* How many buffers w is split across. */
uint32_t vk_weight_parts(const struct vk_weight *w);

/* vk_op_matmul of a split weight: y[t] = w x[t], y n_tok rows of w's n_rows f32. */
enum hearth_status vk_op_matmul_w(struct vk_seq *s, const struct vk_weight *w, struct vk_buf *x,
                                  struct vk_buf *y, uint32_t n_tok, char *err, size_t err_len);
/*
 * The type the CPU rounds a matmul's activations to for weights of type weight (the kernel
 * table's vec_dot_type), or DTYPE_F32 where it keeps f32 (vk_act.c).
 */
enum dtype vk_act_type(enum dtype weight);
/*
 * y = x rounded to type (F16, BF16, Q8_0, Q8_1 or Q8_K: vk_act_type's) and back to f32, n
 * floats in whole blocks of the type, as the CPU's conversion rounds them (shaders/
 * act_round.comp states each, divisions correctly rounded). y may be x.
 * HEARTH_EUNSUPPORTED for another type, HEARTH_EINVAL for a partial block.
 */
enum hearth_status vk_op_act_round(struct vk_seq *s, enum dtype type, struct vk_buf *x,
                                   struct vk_buf *y, uint32_t n, char *err, size_t err_len);
/* vk_op_matmul_dot of a split weight. */
enum hearth_status vk_op_matmul_dot_w(struct vk_seq *s, const struct vk_weight *w,
                                      struct vk_buf *xq, struct vk_buf *y, uint32_t n_tok,
                                      char *err, size_t err_len);
/* Whether vk_op_embed reads rows of type t. */
bool vk_op_embed_supported(enum dtype t);
/*
 * x[t] = row ids[t] of w as f32, times scale (1, or gemma3's sqrt(n_embd)), for t < n_tok:
 * ids n_tok int32 token ids, x n_tok rows of w's n_in f32. The values are the reference
 * to_float's bits, times scale in f32 (exact at 1). An id outside 0..n_rows - 1 leaves its
 * row of x as it was (the host checks the batch's tokens).
 */
enum hearth_status vk_op_embed(struct vk_seq *s, const struct vk_weight *w, struct vk_buf *ids,
                               struct vk_buf *x, uint32_t n_tok, float scale, char *err,
                               size_t err_len);

/* ------------------------------------------------------ the KV cache --- */

/*
 * One layer's paged KV cache on the device, as src/model/kv.h lays it out, and the batch
 * rows that address it. The host owns the tables (kv.c allocates blocks) and uploads them,
 * and the rows, once per batch. A row whose sequence is not below n_seq or whose position is
 * past the table is skipped (its output left as it was); the block ids themselves are
 * trusted: every block of positions j0..pos of a row must be reserved, below n_blocks.
 */
struct vk_kv {
    struct vk_buf *k, *v;  /* [n_blocks][block_tokens][kv_dim] of f16 (f16) or f32 each */
    struct vk_buf *tables; /* int32 [n_seq][table_stride]: each sequence's block ids */
    struct vk_buf *rows;   /* int32 [n_tok][2]: each batch row's (sequence, position) */
    uint32_t n_blocks;     /* blocks in k and v */
    uint32_t block_tokens;
    uint32_t n_seq;
    uint32_t table_stride; /* entries per sequence in tables */
    bool f16;              /* elements are IEEE half (else f32) */
};

/*
 * K and V rows of this batch into the cache: k_rows[t] and v_rows[t] (n_tok rows of kv_dim
 * f32) become token pos of sequence seq (kv->rows[t]), f16 rounded to nearest even as the
 * CPU's f32_to_f16, or f32 bit for bit. kv_dim must be even for an f16 cache.
 */
enum hearth_status vk_op_kv_store(struct vk_seq *s, const struct vk_kv *kv, struct vk_buf *k_rows,
                                  struct vk_buf *v_rows, uint32_t kv_dim, uint32_t n_tok, char *err,
                                  size_t err_len);

/* What one attention call computes over. */
struct vk_attn_shape {
    uint32_t n_tok;     /* query rows */
    uint32_t n_head;    /* query heads, a multiple of n_head_kv */
    uint32_t n_head_kv; /* KV heads: kv_dim = n_head_kv * head_dim */
    uint32_t head_dim;  /* 2..256, even (the shader reads elements in pairs) */
    uint32_t n_swa;     /* sliding window (positions a query sees, its own included); 0 = all */
    float scale;        /* score scale: 1 / sqrtf(head_dim), or 1 when q is pre-scaled */
};

/*
 * out[t][h] = causal attention of q[t][h] (n_tok rows of n_head * head_dim f32) over the
 * keys j0..pos of row t's sequence (kv->rows[t]), j0 = pos - n_swa + 1 when a window
 * applies, else 0; query head h reads KV head h / (n_head / n_head_kv). gate: NULL, or
 * rows shaped as q, and then each output times sigmoid(gate) (gated attention). out
 * differs from q. Scores are the reference's bits (a sequential fma over the head, times
 * scale); the softmax and the weighted sum of values are f32 with the device's exp, in
 * tiles of 64 keys from j0 (tests/unit/test_vk.c states the bound against ref_attn_row).
 */
enum hearth_status vk_op_attention(struct vk_seq *s, const struct vk_kv *kv,
                                   const struct vk_attn_shape *a, struct vk_buf *q,
                                   struct vk_buf *gate, struct vk_buf *out, char *err,
                                   size_t err_len);

#endif
