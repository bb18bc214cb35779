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

/* clang-format off */
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
/* clang-format on */
const struct opt_group opts_placement = OPT_GROUP("Placement on GPUs", placement_list);
