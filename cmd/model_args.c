/*
 * model_args.c: -m, -hf and --offline, the model a command loads, one
 * spelling for every command that loads one.
 */
#include <stddef.h>
#include <stdio.h>

#include "cmd.h"
#include "opts.h"

/* clang-format off */
static const struct opt model_list[] = {
    {.names = "-m --model", .value = "FILE", .kind = OPT_STR, .off = offsetof(struct model_args, path),
     .help = "the GGUF model file"},
    {.names = "-hf --hf-repo", .value = "ORG/REPO[:QUANT]", .kind = OPT_STR,
     .off = offsetof(struct model_args, hf),
     .help = "the model from the Hugging Face Hub, by way of the cache (as hearth pull; also "
             "ORG/REPO/FILE.gguf): :QUANT picks the file whose name carries it, none picks "
             "Q4_K_M, else Q8_0, else the first"},
    {.names = "--offline", .kind = OPT_FLAG, .off = offsetof(struct model_args, offline),
     .help = "-hf from the cache only: never ask the network"},
};
/* clang-format on */
const struct opt_group opts_model = OPT_GROUP("Model", model_list);

int model_args_check(const char *cmd, const struct model_args *m)
{
    if (m->path && m->hf) {
        fprintf(stderr, "hearth %s: -m and -hf name two models; give one\n", cmd);
        return EXIT_USAGE;
    }
    if (!m->path && !m->hf) {
        fprintf(stderr, "hearth %s: needs -m MODEL or -hf ORG/REPO[:QUANT]\n", cmd);
        return EXIT_USAGE;
    }
    if (m->offline && !m->hf) {
        fprintf(stderr, "hearth %s: --offline goes with -hf\n", cmd);
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

int model_args_path(const char *cmd, const struct model_args *m, char *path, size_t path_len)
{
    const int rc = model_args_check(cmd, m);
    if (rc != EXIT_OK)
        return rc;
    if (m->hf)
        return hub_model(cmd, m->hf, m->offline ? HUB_OFFLINE : 0, path, path_len);
    snprintf(path, path_len, "%s", m->path);
    return EXIT_OK;
}
