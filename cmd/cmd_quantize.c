/*
 * cmd_quantize.c: `hearth quantize IN.gguf OUT.gguf TYPE`, a model to one of
 * llama.cpp's quantization presets, with llama-quantize's per-tensor mix and
 * (for the same input) the same bytes. Progress goes to stderr.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "hearth.h"
#include "quant/quantize.h"

static void usage(FILE *fp)
{
    int n;
    const struct quant_preset *p = quant_presets(&n);
    fprintf(fp, "usage: hearth quantize [options] IN.gguf OUT.gguf TYPE\n"
                "  -t, --threads N        threads (default: the CPU count)\n"
                "  --allow-requantize     also requantize tensors that are already quantized\n"
                "  -q, --quiet            no progress lines\n\n"
                "TYPE (llama.cpp's presets; Q3_K, Q4_K, Q5_K mean the _M variants):\n");
    for (int i = 0; i < n; i++)
        fprintf(fp, "  %-8s %s\n", p[i].name, p[i].desc);
}

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
    const char *pos[3];
    int n_pos = 0;
    long threads = default_threads();
    bool requant = false, quiet = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return EXIT_OK;
        } else if (!strcmp(a, "--allow-requantize")) {
            requant = true;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            quiet = true;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (!(v = arg_value("quantize", argc, argv, &i)) ||
                !arg_long("quantize", a, v, 1, 512, &threads))
                return EXIT_USAGE;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "hearth quantize: unknown option '%s'\n", a);
            usage(stderr);
            return EXIT_USAGE;
        } else if (n_pos == 3) {
            fprintf(stderr, "hearth quantize: unexpected argument '%s'\n", a);
            usage(stderr);
            return EXIT_USAGE;
        } else {
            pos[n_pos++] = a;
        }
    }
    if (n_pos < 3) {
        fprintf(stderr, "hearth quantize: needs IN.gguf OUT.gguf TYPE\n");
        usage(stderr);
        return EXIT_USAGE;
    }
    const struct quant_preset *p = quant_preset_find(pos[2]);
    if (!p) {
        fprintf(stderr, "hearth quantize: unknown type '%s'; valid types: ", pos[2]);
        list_types(stderr);
        return EXIT_USAGE;
    }
    struct quant_params qp = {
        .n_threads = (int)threads, .allow_requantize = requant, .progress = quiet ? NULL : stderr};
    char err[HEARTH_ERR_MAX];
    if (quant_file(pos[0], pos[1], p, &qp, err, sizeof err)) {
        fprintf(stderr, "hearth: %s\n", err);
        return EXIT_RUNTIME;
    }
    return EXIT_OK;
}
