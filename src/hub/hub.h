/*
 * hub.h: GGUF models from the Hugging Face Hub, for `hearth pull` and the
 * -hf option of run and serve.
 *
 * ORG/REPO[:QUANT | /PATH.gguf] names a file of a repository: :QUANT the
 * first model file whose name carries that quant (Q4_K_M, q8_0, ...),
 * /PATH that file, neither Q4_K_M, else Q8_0, else the first model file
 * (llama.cpp's -hf meaning). A split model is all its parts.
 *
 * Files land in the cache as CACHE/ORG/REPO/PATH, whole and checked
 * against the SHA-256 the Hub publishes (its LFS object id): they are
 * downloaded beside it as PATH.part-<sha>, resumed with a range request
 * after a cut, and renamed into place only once they hash right. The
 * repository's file list is kept as CACHE/ORG/REPO/.hearth-files.json, so
 * a model already in the cache is used without a request (until a refresh).
 */
#ifndef HEARTH_HUB_H
#define HEARTH_HUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "hearth.h"

struct hub_opts {
    char endpoint[1024]; /* $HF_ENDPOINT, else https://huggingface.co; no trailing '/' */
    const char *token;   /* $HF_TOKEN, or NULL */
    char cache[4096];    /* $HEARTH_CACHE, else ~/.cache/hearth/models */
    bool offline;        /* never ask the network ($HF_HUB_OFFLINE=1 too) */
    bool refresh;        /* ask for the file list even when the cache has the model, and
                          * download again a file whose SHA-256 has changed since */
    FILE *progress;      /* where the progress bar goes (stderr), or NULL */
};

/* o from the environment; false with the reason in err when no cache directory can be named. */
bool hub_opts_env(struct hub_opts *o, char *err, size_t err_len);

struct hub_result {
    char path[4096]; /* the model file (a split model's first part) */
    int n_parts;     /* 1, or the parts of a split model (all in path's directory) */
    bool fetched;    /* whether anything was downloaded */
};

/*
 * The local path of the model spec names, downloaded when it is not in the
 * cache. HEARTH_EINVAL for a spec that names no repository or file,
 * HEARTH_EIO for the network, the Hub's refusals, the disk and a checksum
 * mismatch; err holds one sentence for a person.
 */
enum hearth_status hub_pull(const char *spec, const struct hub_opts *o, struct hub_result *r,
                            char *err, size_t err_len);

#endif
