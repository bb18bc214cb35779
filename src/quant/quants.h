/*
 * quants.h: weight quantizers, bit-for-bit the reference ones of ggml that
 * llama-quantize runs when no importance matrix is given (quantize_row_*_ref
 * for Q4_0..Q6_K, quantize_iq4_nl / quantize_iq4_xs for the IQ4 types), so
 * a tensor quantized here has the same bytes as llama.cpp's.
 *
 * Every type is quantized block by block, so splitting a tensor by rows
 * (across threads, or in chunks) gives the same bytes as one call.
 * Stateless and thread-safe.
 */
#ifndef HEARTH_QUANTS_H
#define HEARTH_QUANTS_H

#include <stdbool.h>
#include <stdint.h>

#include "util/dtype.h"

/*
 * Quantizes n floats (finite; n a multiple of t's block) from x into y in
 * t's layout (dtype_row_len(t, n) bytes). F32, F16 and BF16 are plain
 * conversions. Returns false, writing nothing, for a type with no
 * quantizer (Q8_1, Q8_K and unknown ids).
 */
bool quant_row(enum dtype t, const float *x, void *y, int64_t n);

/* Whether quant_row can produce type t. */
bool quant_supported(enum dtype t);

#endif
