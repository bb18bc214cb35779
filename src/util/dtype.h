/*
 * dtype.h: the tensor element types of GGUF (ggml's ids) and their block
 * geometry. One table; the GGUF reader validates sizes by it, the kernels
 * dispatch by it, the memory law sizes by it. What the bytes of a block
 * mean is util/dtype_blocks.h.
 */
#ifndef HEARTH_DTYPE_H
#define HEARTH_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ggml type ids as stored in GGUF tensor infos. */
enum dtype {
    DTYPE_F32     = 0,
    DTYPE_F16     = 1,
    DTYPE_Q4_0    = 2,
    DTYPE_Q4_1    = 3,
    DTYPE_Q5_0    = 6,
    DTYPE_Q5_1    = 7,
    DTYPE_Q8_0    = 8,
    DTYPE_Q8_1    = 9,
    DTYPE_Q2_K    = 10,
    DTYPE_Q3_K    = 11,
    DTYPE_Q4_K    = 12,
    DTYPE_Q5_K    = 13,
    DTYPE_Q6_K    = 14,
    DTYPE_Q8_K    = 15,
    DTYPE_IQ2_XXS = 16,
    DTYPE_IQ2_XS  = 17,
    DTYPE_IQ3_XXS = 18,
    DTYPE_IQ1_S   = 19,
    DTYPE_IQ4_NL  = 20,
    DTYPE_IQ3_S   = 21,
    DTYPE_IQ2_S   = 22,
    DTYPE_IQ4_XS  = 23,
    DTYPE_IQ1_M   = 29,
    DTYPE_BF16    = 30,
    DTYPE_TQ1_0   = 34,
    DTYPE_TQ2_0   = 35,
    DTYPE_MXFP4   = 39,
    DTYPE_COUNT   = 64 /* table size; ids at or above it are unknown */
};

struct dtype_info {
    const char *name;   /* "q4_0"; NULL for ids hearth does not know */
    uint32_t block;     /* elements per block: 1, 32 or 256 */
    uint32_t block_len; /* bytes per block */
};

/* Geometry of type id t, or NULL if t is not a type hearth knows the layout of. */
const struct dtype_info *dtype_get(uint32_t t);
/* Name of type id t ("q4_0"), or "type <t>"-style "unknown" for ids not in the table. */
const char *dtype_name(uint32_t t);
/* Bytes of a row of n elements of type t; n must be a multiple of the block. */
size_t dtype_row_len(enum dtype t, int64_t n);

#endif
