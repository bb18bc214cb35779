/*
 * fit.h: the planner on top of the memory law (`hearth fit`, and the check
 * `hearth serve` makes before it loads). From a file's header alone it says
 * what each device will hold for a serving configuration (weights, K/V,
 * compute buffers, logits, the rest), where the layers go, whether every
 * device keeps its floor free, and the largest context per slot that does.
 */
#ifndef HEARTH_FIT_H
#define HEARTH_FIT_H

#include <stdbool.h>
#include <stdint.h>

#include "fit/llamacpp.h"
#include "hearth.h"
#include "util/memacct.h"

#define FIT_MAX_DEVICES 8

struct fit_device {
    char name[32];     /* "ram" (the host: the CPU's layers) or a GPU's, as given */
    uint64_t capacity; /* bytes */
    bool host;
};

/* Whose memory is planned. */
enum fit_runtime {
    FIT_HEARTH,   /* hearth serve */
    FIT_LLAMACPP, /* llama.cpp's llama-server, CPU build (src/fit/llamacpp.c): the host alone,
                     with its draft model's when there is one */
};

struct fit_params {
    enum fit_runtime runtime;
    const char *model;  /* GGUF path */
    const char *draft;  /* a draft model's, or NULL: it runs on the host */
    int32_t n_ctx;      /* tokens per slot; 0 = serve's default (4096, or the model's
                           training context when smaller); -1 = the training context */
    bool ctx_max;       /* find the largest n_ctx (whole blocks) that fits instead */
    int32_t n_parallel; /* slots */
    int32_t n_ubatch;   /* micro-batch */
    int32_t kv_block;   /* tokens per K/V block */
    enum hearth_kv_type kv_type, kv_type_v;
    int64_t cache_ram; /* the prefix cache's cap on the host; -1 = none */
    int n_threads;
    int32_t n_state_snapshots; /* recurrent models: per slot, as serve's --ctx-checkpoints */
    struct fit_device dev[FIT_MAX_DEVICES]; /* dev[0] is the host */
    int32_t n_dev;
    uint64_t floor;      /* bytes every device keeps free */
    uint64_t host_extra; /* what else the host holds (serve's n-gram pool) */
    bool balance;        /* split the layers so the GPUs keep equal free memory */
    /*
     * FIT_LLAMACPP: its flags as llama-server means them. n_ctx is then the
     * context the slots share (0: the training context), ctx_max searches it
     * in steps of 256 cells a stream, cache_ram is its prompt cache's cap
     * (counted as other), and n_ubatch, n_parallel and the fields below are
     * its own; kv_type, kv_block, n_threads and n_state_snapshots are unused.
     * A draft model (-md) gets a context of the same flags but its own cache
     * types (-ctkd, -ctvd), on the host beside the target's.
     */
    struct llamacpp_params lc;
    enum dtype lc_draft_k, lc_draft_v;
};

struct fit_use {
    struct fit_device dev;
    struct mem_acct mem; /* what it holds, by kind */
    int32_t l0, l1;      /* the layers it runs, l0 == l1: none */
    bool output;         /* it runs the output */
    int64_t free;        /* capacity - total (negative: short by that much) */
};

struct fit_plan {
    int32_t n_ctx;     /* tokens per slot (FIT_LLAMACPP: all slots', as llama.cpp makes it) */
    int32_t n_ctx_seq; /* FIT_LLAMACPP: K/V cells per stream */
    int32_t n_dev;
    struct fit_use use[FIT_MAX_DEVICES];
    bool fits;     /* every device keeps the floor free */
    char why[256]; /* when not: which device, by how much */
};

/*
 * Plans p into *out. HEARTH_OK with out->fits saying whether it fits (and
 * why not); an error (the GGUF reader's, a file hearth cannot run, bad
 * parameters) with one sentence in err.
 */
enum hearth_status fit_plan(const struct fit_params *p, struct fit_plan *out, char *err,
                            size_t err_len);

#endif
