/*
 * cmd_quantize.c: `hearth quantize IN.gguf OUT.gguf TYPE`, a model to one of
 * llama.cpp's quantization presets, with llama-quantize's per-tensor mix and
 * (for the same input) the same bytes. Progress goes to stderr.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "cmd.h"
#include "hearth.h"
#include "opts.h"
#include "quant/quantize.h"

struct quantize_args {
    struct {
        bool requant, quiet;
    } q;
    struct thread_args threads;
    struct opt_multi pos; /* IN.gguf, OUT.gguf, TYPE */
};

#define Q(f) offsetof(struct quantize_args, q.f) - offsetof(struct quantize_args, q)
/* clang-format off */
static const struct opt quantize_list[] = {
    {.names = "--allow-requantize", .kind = OPT_FLAG, .off = Q(requant),
     .help = "also requantize tensors that are already quantized, which loses quality; without it "
             "such a tensor is refused"},
    {.names = "-q --quiet", .kind = OPT_FLAG, .off = Q(quiet), .help = "no progress lines"},
};
/* clang-format on */
#undef Q

static const struct opt_group quantize_group = OPT_GROUP("Quantization", quantize_list);

/* clang-format off */
static const struct opt_use quantize_uses[] = {
    {&quantize_group, offsetof(struct quantize_args, q)},
    {&opts_threads, offsetof(struct quantize_args, threads)},
};
/* clang-format on */

static const struct quantize_args quantize_defaults; /* all zero: no flag, -t the CPUs */

/* The TYPE table is quant_presets()'s names and lines, in its order (src/quant/quantize.c). */
const struct cmd_spec cmd_quantize_spec = {
    .name     = "quantize",
    .synopsis = "hearth quantize [options] IN.gguf OUT.gguf TYPE",
    .about    = "Writes IN.gguf's model to OUT.gguf quantized to TYPE, one of llama.cpp's presets, "
                "with llama-quantize's choice of type per tensor and, for the same input, the same "
                "bytes. Progress lines go to stderr.",
    .epilog   = "TYPE (llama.cpp's presets; Q3_K, Q4_K, Q5_K mean the _M variants):\n"
                "  Q4_0     4.5 bpw, symmetric 4-bit blocks of 32\n"
                "  Q4_1     5.0 bpw, 4-bit with a minimum per block of 32\n"
                "  Q5_0     5.5 bpw, symmetric 5-bit blocks of 32\n"
                "  Q5_1     6.0 bpw, 5-bit with a minimum per block of 32\n"
                "  Q8_0     8.5 bpw, nearly lossless\n"
                "  Q2_K     ~3.0 bpw mix of Q2_K/Q3_K/Q4_K\n"
                "  Q3_K_S   ~3.5 bpw, Q3_K throughout\n"
                "  Q3_K_M   ~3.9 bpw, Q3_K with Q4_K/Q5_K where it matters\n"
                "  Q3_K_L   ~4.3 bpw, Q3_K with Q5_K attn_v and ffn_down\n"
                "  Q4_K_S   ~4.6 bpw, Q4_K with Q5_K in the first layers\n"
                "  Q4_K_M   ~4.9 bpw, Q4_K with Q6_K attn_v/ffn_down in some layers\n"
                "  Q5_K_S   ~5.5 bpw, Q5_K throughout\n"
                "  Q5_K_M   ~5.7 bpw, Q5_K with Q6_K attn_v/ffn_down in some layers\n"
                "  Q6_K     ~6.6 bpw\n"
                "  IQ4_NL   4.5 bpw, non-linear 4-bit blocks of 32\n"
                "  IQ4_XS   4.25 bpw, non-linear 4-bit super-blocks of 256\n"
                "  TQ1_0    1.69 bpw ternary (-d, 0, d), for ternary-trained models\n"
                "  TQ2_0    2.06 bpw ternary, 2 bits a weight\n"
                "  MXFP4_MOE MXFP4 MoE experts, Q8_0 elsewhere\n"
                "  F16      16 bpw half precision\n"
                "  BF16     16 bpw bfloat16\n"
                "  F32      32 bpw, no quantization\n"
                "IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ2_M and IQ3_XXS need an importance "
                "matrix in llama.cpp too, and IQ3_XS/IQ3_S/IQ3_M are not made yet: quantize "
                "those with llama-quantize; hearth runs the files.\n",
    .uses     = quantize_uses,
    .n_uses   = sizeof quantize_uses / sizeof quantize_uses[0],
    .pos_min  = 3,
    .pos_max  = 3,
    .pos_off  = offsetof(struct quantize_args, pos),
    .defaults = &quantize_defaults,
    .args_size = sizeof(struct quantize_args),
};

static void list_types(FILE *fp)
{
    int n;
    const struct quant_preset *p = quant_presets(&n);
    for (int i = 0; i < n; i++)
        fprintf(fp, "%s%s", i ? ", " : "", p[i].name);
    fputc('\n', fp);
}

int cmd_quantize(int argc, char **argv)
{
    struct quantize_args a;
    const enum opts_status st = opts_parse(&cmd_quantize_spec, &a, argc, argv);
    if (st != OPTS_GO)
        return opts_exit(st);
    const char *in = a.pos.v[0], *out = a.pos.v[1], *type = a.pos.v[2];
    const struct quant_preset *p = quant_preset_find(type);
    const char *refusal          = p ? NULL : quant_preset_refusal(type);
    if (refusal) {
        fprintf(stderr, "hearth quantize: cannot make %s: %s\n", type, refusal);
        return EXIT_USAGE;
    }
    if (!p) {
        fprintf(stderr, "hearth quantize: unknown type '%s'; valid types: ", type);
        list_types(stderr);
        return EXIT_USAGE;
    }
    struct quant_params qp = {.n_threads        = (int)threads_or_default(&a.threads),
                              .allow_requantize = a.q.requant,
                              .progress         = a.q.quiet ? NULL : stderr};
    char err[HEARTH_ERR_MAX];
    if (quant_file(in, out, p, &qp, err, sizeof err)) {
        fprintf(stderr, "hearth: %s\n", err);
        return EXIT_RUNTIME;
    }
    return EXIT_OK;
}
