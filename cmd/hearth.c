/*
 * hearth.c: the command-line entry point. Parses the subcommand name and
 * hands the rest of argv to it; owns exit().
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"

static const struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
} commands[] = {
    {"pull",         cmd_pull,         "download a GGUF model from the Hugging Face Hub into the cache"},
    {"run",          cmd_run,          "generate text from a prompt"},
    {"perplexity",   cmd_perplexity,   "perplexity of a text file, as llama-perplexity computes it"},
    {"bench-engine", cmd_bench_engine, "measure prefill and decode speed"},
    {"bench",        cmd_bench,        "load-test and compare OpenAI-compatible servers (hearth, llama-server, vLLM)"},
    {"inspect",      cmd_inspect,      "print a GGUF file's metadata and tensor table"},
    {"tokenize",     cmd_tokenize,     "print the token ids of a text"},
    {"serve",        cmd_serve,        "OpenAI- and Anthropic-compatible HTTP server (chat, messages, metrics)"},
    {"quantize",     cmd_quantize,     "quantize a GGUF model to a llama.cpp preset (Q4_K_M, Q6_K, ...)"},
    {"devices",      cmd_devices,      "list the CPU and the Vulkan devices hearth can compute on"},
    {"fit",          cmd_fit,          "what a serving configuration holds in memory, per device, from the file's header"},
    {"route",        cmd_route,        "one endpoint over several servers: prefix-aware, fails over before the first byte"},
};

static void usage(FILE *fp)
{
    fprintf(fp, "usage: hearth COMMAND [options]   (hearth COMMAND --help for its options)\n\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(fp, "  %-13s %s\n", commands[i].name, commands[i].help);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return EXIT_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            exit(commands[i].fn(argc - 1, argv + 1));
    fprintf(stderr, "hearth: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return EXIT_USAGE;
}
