/*
 * placement.c: the options that place layers on devices, one spelling for
 * run, perplexity, serve and bench-engine. Values are checked here only as
 * far as their syntax is the command line's (-ngl a count); what they mean
 * (a device that exists, shares that match the devices) is the library's
 * to refuse at load, so the server refuses the same configurations.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "hearth.h"
#include "opts.h"

void placement_usage(FILE *fp, int col)
{
    static const char *const lines[][2] = {
        {"-ngl, --gpu-layers N", "the last N layers on the GPUs, and past the layer count the"},
        {"", "output too (99: everything; also --n-gpu-layers)"},
        {"--device LIST", "the GPUs they go to, as hearth devices names them:"},
        {"", "vulkan0,vulkan1 (default vulkan0; also -dev)"},
        {"--tensor-split A:B", "the GPUs' shares of those layers, one per --device, each a"},
        {"", "contiguous range (or A,B; default equal; also -ts)"},
        {"--layer-split SPEC", "instead: layers per backend in order, \"cpu:12,vulkan0:20\""},
    };
    usage_lines(fp, col, lines, sizeof lines / sizeof lines[0]);
}

bool placement_opt(const char *opt)
{
    static const char *const opts[] = {"-ngl", "--gpu-layers", "--n-gpu-layers", "--device",
                                       "-dev", "--tensor-split", "-ts", "--layer-split"};
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
        if (!strcmp(opt, opts[i]))
            return true;
    return false;
}

bool placement_set(const char *cmd, const char *opt, const char *v, struct placement *p)
{
    if (!strcmp(opt, "--device") || !strcmp(opt, "-dev"))
        p->devices = v;
    else if (!strcmp(opt, "--tensor-split") || !strcmp(opt, "-ts"))
        p->tensor_split = v;
    else if (!strcmp(opt, "--layer-split"))
        p->layer_split = v;
    else
        return arg_long(cmd, opt, v, 0, 1 << 20, &p->ngl);
    return true;
}

bool placement_uses_gpu(const struct placement *p)
{
    /* a backend other than the CPU in --layer-split is a GPU's name (vulkan0, ...) */
    return p->ngl > 0 || (p->layer_split && strstr(p->layer_split, "vulkan"));
}

void placement_params(const struct placement *p, struct hearth_model_params *mp)
{
    mp->n_gpu_layers = (int32_t)p->ngl;
    mp->devices      = p->devices;
    mp->tensor_split = p->tensor_split;
    mp->layer_split  = p->layer_split;
}

static const struct opt placement_list[] = {
    {.names = "-ngl --gpu-layers --n-gpu-layers", .value = "N", .kind = OPT_LONG,
     .off = offsetof(struct placement, ngl), .lo = 0, .hi = 1 << 20, .def = "0",
     .help = "the last N layers on the GPUs, and past the layer count the output too (llama.cpp's "
             "meaning: 99 is everything)"},
    {.names = "--device -dev", .value = "LIST", .kind = OPT_STR,
     .off = offsetof(struct placement, devices), .def = "vulkan0",
     .help = "the GPUs those layers go to, as hearth devices names them: vulkan0,vulkan1"},
    {.names = "--tensor-split -ts", .value = "A:B", .kind = OPT_STR,
     .off = offsetof(struct placement, tensor_split), .def = "equal shares",
     .help = "the GPUs' shares of those layers, one per --device, each a contiguous range (or A,B)"},
    {.names = "--layer-split", .value = "SPEC", .kind = OPT_STR,
     .off = offsetof(struct placement, layer_split),
     .help = "instead of -ngl: layers per backend in layer order, as cpu:12,vulkan0:20"},
};
const struct opt_group opts_placement = OPT_GROUP("Placement on GPUs", placement_list);
