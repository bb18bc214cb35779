/*
 * quantize.h: quantizing a whole GGUF model the way llama-quantize does.
 *
 * A preset (Q4_K_M, Q6_K, ...) names a default tensor type and llama.cpp's
 * per-tensor mix around it (llama_tensor_get_type): output.weight in Q6_K,
 * attn_v and ffn_down with more bits in some layers, norms and other 1-D
 * tensors untouched, rows that do not fit a type's block falling back to
 * another type. Tensors are written in llama.cpp's order (non-layer tensors
 * first, then by layer number, by name within each), the metadata is kept
 * with general.quantization_version and general.file_type set last, so for
 * the same input the output file is the one llama-quantize writes.
 */
#ifndef HEARTH_QUANTIZE_H
#define HEARTH_QUANTIZE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "gguf/gguf.h"
#include "hearth.h"
#include "util/dtype.h"

struct quant_preset {
    const char *name; /* "Q4_K_M", as llama-quantize spells it */
    uint32_t ftype;   /* llama.cpp's LLAMA_FTYPE value, stored as general.file_type */
    enum dtype base;  /* the default type of quantized tensors */
    const char *desc; /* one line for --help */
};

/* The presets, in the order --help lists them; *n gets the count. */
const struct quant_preset *quant_presets(int *n);
/*
 * Why hearth does not make llama-quantize's preset name (case-insensitive),
 * one clause for after "cannot make <name>: ", or NULL for names it makes
 * or llama.cpp does not know either.
 */
const char *quant_preset_refusal(const char *name);
/* The preset named name (case-insensitive, aliases Q3_K/Q4_K/Q5_K included), or NULL. */
const struct quant_preset *quant_preset_find(const char *name);

/* What to do with each tensor of an input file. */
struct quant_plan {
    int64_t n;        /* tensors in the file */
    int64_t *order;   /* [n] input tensor index of the i-th output tensor */
    enum dtype *type; /* [n] output type of input tensor i (by input index) */
    int n_fallback;   /* tensors whose row length forced another type */
};

/*
 * Decides every tensor's output type for preset p, as llama.cpp's
 * llama_tensor_get_type does, and the output order. If warn is non-NULL a
 * line per fallback goes there. Errors: HEARTH_EFORMAT (metadata a rule
 * needs is missing, e.g. llama.block_count for an ffn_down tensor),
 * HEARTH_EUNSUPPORTED (a row length no type of the preset can hold),
 * HEARTH_ENOMEM. On success free the plan with quant_plan_free.
 */
enum hearth_status quant_plan_make(const struct gguf_file *f, const struct quant_preset *p,
                                   FILE *warn, struct quant_plan *plan, char *err, size_t err_len);
void quant_plan_free(struct quant_plan *plan);

struct quant_params {
    int n_threads;         /* >= 1 */
    bool allow_requantize; /* quantize tensors that already are quantized (as llama.cpp's flag) */
    FILE *progress;        /* a line per tensor and a total, or NULL for none */
};

/*
 * Quantizes the GGUF file in to out with preset p. out is written through
 * out.tmp and renamed at the end, so on any error out is untouched.
 * Errors: HEARTH_EIO (cannot read in or write out), HEARTH_EFORMAT (in is
 * not a valid GGUF file, a tensor holds a NaN or infinity),
 * HEARTH_EUNSUPPORTED (an input type that cannot be dequantized, or a
 * quantized input without allow_requantize), HEARTH_ENOMEM. err names the
 * file or tensor.
 */
enum hearth_status quant_file(const char *in, const char *out, const struct quant_preset *p,
                              const struct quant_params *qp, char *err, size_t err_len);

#endif
