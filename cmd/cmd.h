/*
 * cmd.h: the hearth subcommands. Each takes the arguments after its name
 * (argv[0] is the subcommand) and returns the process exit status:
 * 0 success, 1 runtime error (one line on stderr), 2 usage error.
 */
#ifndef HEARTH_CMD_H
#define HEARTH_CMD_H

#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>

int cmd_run(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_bench_engine(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_devices(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_fit(int argc, char **argv);
int cmd_route(int argc, char **argv);
int cmd_pull(int argc, char **argv);

struct cmd_spec;

/* The subcommands (commands.c), in the order `hearth --help` lists them. */
struct cmd_entry {
    const char *name;
    int (*fn)(int argc, char **argv);
    const struct cmd_spec *spec; /* its option lists (opts.h) */
    const char *help;            /* one line */
};
extern const struct cmd_entry cmd_table[];
extern const size_t cmd_table_n;

/* Each command's option lists, in its own file. */
extern const struct cmd_spec cmd_run_spec;
extern const struct cmd_spec cmd_bench_spec;
extern const struct cmd_spec cmd_route_spec;
extern const struct cmd_spec cmd_pull_spec;
extern const struct cmd_spec cmd_tokenize_spec;
extern const struct cmd_spec cmd_inspect_spec;
extern const struct cmd_spec cmd_devices_spec;
extern const struct cmd_spec cmd_fit_spec;
extern const struct cmd_spec cmd_bench_engine_spec;
extern const struct cmd_spec cmd_quantize_spec;
extern const struct cmd_spec cmd_perplexity_spec;
extern const struct cmd_spec cmd_serve_spec;

/* Exit statuses shared by every subcommand. */
enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2 };

/*
 * Option values: parse s fully as a number in [lo, hi]. On failure print
 * "hearth CMD: OPT expects ..." to stderr and return false (a usage error).
 */
bool arg_long(const char *cmd, const char *opt, const char *s, long lo, long hi, long *out);
bool arg_float(const char *cmd, const char *opt, const char *s, double lo, double hi, float *out);
/*
 * A size: a count of bytes, or a number with K, M, G or T (powers of 1024; "iB" or "B" may
 * follow: 8G, 512M, 1.5GiB). On failure a usage message as arg_long's, and false.
 */
bool arg_bytes(const char *cmd, const char *opt, const char *s, int64_t *out);
/* The host's MemAvailable (/proc/meminfo) in bytes; 0 when unknown. */
uint64_t host_mem_available(void);

/* hub_model's flags: the cache only; ask the Hub even when cached; a split model is taken. */
enum { HUB_OFFLINE = 1, HUB_REFRESH = 2, HUB_SPLIT_OK = 4 };

/*
 * The local path of the model spec (ORG/REPO[:QUANT|/FILE.gguf]) names on the Hugging Face Hub,
 * downloaded into the cache unless it is there (cmd_pull.c). A split model's first part with
 * HUB_SPLIT_OK, else refused. EXIT_OK, or the exit status with one line on stderr
 * ("hearth CMD: ...").
 */
int hub_model(const char *cmd, const char *spec, unsigned flags, char *path, size_t path_len);

/* ------------------------------------------------------------ fit check --- */

/* What `-c max` (the largest context that fits) parses to, in run, serve and fit. */
enum { CTX_MAX = -1 };

/* A serve or run configuration on the host, for fit_check. */
struct fit_check {
    const char *cmd;   /* "serve", "run": for the messages */
    const char *model; /* GGUF path */
    const char *draft; /* a draft model's, or NULL */
    bool ctx_max;      /* -c max */
    long parallel;     /* slots (run: 1) */
    long ubatch;       /* micro-batch */
    long threads;
    long checkpoints;  /* recurrent state snapshots per slot */
    int64_t cache_ram; /* the prefix cache's cap; <= 0: none */
    const struct cache_types *ct;
    uint64_t extra; /* other host memory the command holds (serve's n-gram pool) */
};

/*
 * The memory law's verdict on c before anything loads (fitcheck.c), with
 * *n_ctx the context asked (0: serve's default; -1: the training context,
 * run's): EXIT_OK when it fits the RAM free, with *n_ctx set to what
 * -c max, or a default that does not fit, falls back to (and a line saying
 * so); else EXIT_RUNTIME with the figures on stderr.
 */
int fit_check(const struct fit_check *c, long *n_ctx);

/* ------------------------------------------------------------ placement --- */

struct hearth_model_params;

/* Where the layers run (placement.c): -ngl, --device, --tensor-split, --layer-split. */
struct placement {
    long ngl;                 /* -ngl / --gpu-layers: the last N layers on the GPUs */
    const char *devices;      /* --device vulkan0,vulkan1, or NULL */
    const char *tensor_split; /* --tensor-split 3:1 (or 3,1), or NULL */
    const char *layer_split;  /* --layer-split cpu:2,vulkan0:3, or NULL */
};

/* Whether p puts any layer (or the output) on a GPU. */
bool placement_uses_gpu(const struct placement *p);
/* Copies p into the model parameters. */
void placement_params(const struct placement *p, struct hearth_model_params *mp);

/* ---------------------------------------------------------- cache types --- */

/* The K/V cache's types (args.c): --cache-type-k / -ctk and --cache-type-v / -ctv. */
struct cache_types {
    int k, v; /* enum hearth_kv_type; both f16 unless given */
};

/* Default worker threads: the CPUs this process may run on (at least 1). More
 * threads than cores make the spinning fork-join pool wait on descheduled peers. */
long default_threads(void);

#endif
