/*
 * commands.c: the table of subcommands, their one-line help and their
 * option lists (spec NULL: a command whose options are not declared as
 * lists yet). hearth.c dispatches through it; test_opts walks it.
 */
#include <stddef.h>

#include "cmd.h"
#include "opts.h"

/* clang-format off */
const struct cmd_entry cmd_table[] = {
    {"pull",         cmd_pull,         &cmd_pull_spec,       "download a GGUF model from the Hugging Face Hub into the cache"},
    {"run",          cmd_run,          &cmd_run_spec,        "generate text from a prompt"},
    {"perplexity",   cmd_perplexity,   &cmd_perplexity_spec, "perplexity of a text file, as llama-perplexity computes it"},
    {"bench-engine", cmd_bench_engine, &cmd_bench_engine_spec, "measure prefill and decode speed"},
    {"bench",        cmd_bench,        &cmd_bench_spec,      "load-test and compare OpenAI-compatible servers (hearth, llama-server, vLLM)"},
    {"inspect",      cmd_inspect,      &cmd_inspect_spec,    "print a GGUF file's metadata and tensor table"},
    {"tokenize",     cmd_tokenize,     &cmd_tokenize_spec,   "print the token ids of a text"},
    {"serve",        cmd_serve,        &cmd_serve_spec,      "OpenAI- and Anthropic-compatible HTTP server (chat, messages, metrics)"},
    {"quantize",     cmd_quantize,     &cmd_quantize_spec,   "quantize a GGUF model to a llama.cpp preset (Q4_K_M, Q6_K, ...)"},
    {"devices",      cmd_devices,      &cmd_devices_spec,    "list the CPU and the Vulkan devices hearth can compute on"},
    {"fit",          cmd_fit,          &cmd_fit_spec,        "what a serving configuration holds in memory, per device, from the file's header"},
    {"route",        cmd_route,        &cmd_route_spec,      "one endpoint over several servers: prefix-aware, fails over before the first byte"},
};
/* clang-format on */
const size_t cmd_table_n = sizeof cmd_table / sizeof cmd_table[0];
