/*
 * dmath.h: the arithmetic of the block drafters (EAGLE-3, DFlash), which
 * run on the host beside the target: a row at a time, through the kernel
 * table's dot products, on weights read in place from the drafter's GGUF
 * mapping (or the target's, for the embedding and LM head they share).
 * A drafter is a layer or two of a few hundred to a few thousand wide, so
 * one row costs a small fraction of one target token.
 */
#ifndef HEARTH_SPEC_DMATH_H
#define HEARTH_SPEC_DMATH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "hearth.h"
#include "model/types.h"

/* A 2-D weight {n_in, n_out} of f, its type one the kernels dot; optional: absent is OK, zeroed. */
enum hearth_status dm_weight(const struct gguf_file *f, const char *name, int64_t n_in,
                             int64_t n_out, bool optional, struct weight *w, char *err,
                             size_t err_len);
/* A 1-D vector of n elements as a new f32 array (owned); optional: absent leaves NULL. */
enum hearth_status dm_vector(const struct gguf_file *f, const char *name, int64_t n, bool optional,
                             float **out, char *err, size_t err_len);
/* u32 <arch>.key; false when absent. */
bool dm_u32(const struct gguf_file *f, const char *arch, const char *key, uint32_t *out);
/* The u32/i32 array <arch>.key into out[0..cap): how many, -1 when absent or too long. */
int32_t dm_u32s(const struct gguf_file *f, const char *arch, const char *key, int32_t *out,
                int32_t cap);

/* Bytes of scratch dm_matvec needs for rows of up to n_in elements of any weight. */
size_t dm_scratch_len(int64_t n_in);
/* y[n_out] = w x[n_in]; scratch of dm_scratch_len(w->n_in) bytes. */
void dm_matvec(const struct weight *w, const float *x, float *y, void *scratch);
/* y[n_in] = row r of w, dequantized (an embedding lookup). */
void dm_row(const struct weight *w, int64_t r, float *y);
/* y = x / sqrt(mean(x^2) + eps) * g (g NULL: 1); y may alias x. */
void dm_rmsnorm(float *y, const float *x, const float *g, int64_t n, float eps);
/* Rotates each of n_head heads of x (head_dim each, all dims) to position pos. */
void dm_rope(float *x, int32_t n_head, int32_t head_dim, float base, bool neox, int32_t pos);
/* n keys and values, rows of kv_row floats (n_kv heads of head_dim each). */
struct dm_kv {
    const float *k, *v;
    int32_t n;
};
/*
 * Attention of n_head query heads q over the keys and values of seg[0..n_seg)
 * together, the heads grouped onto the KV heads as llama does, scaled by
 * 1 / sqrt(head_dim): out[n_head * head_dim].
 */
void dm_attend(const float *q, const struct dm_kv *seg, int32_t n_seg, size_t kv_row,
               int32_t n_head, int32_t n_kv, int32_t head_dim, float *out);
/* y = silu(g) * u, n elements; y may alias g. */
void dm_silu_mul(float *y, const float *g, const float *u, int64_t n);
/* The index of the largest of n values (the first among equals). */
int32_t dm_argmax(const float *x, int32_t n);

#endif
