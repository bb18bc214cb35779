/*
 * cmd_pull.c: `hearth pull ORG/REPO[:QUANT|/FILE.gguf]`, and the -hf of run
 * and serve: a model from the Hugging Face Hub, by way of the cache (hub.h).
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cmd.h"
#include "hub/hub.h"
#include "hub/hub_int.h"
#include "opts.h"
#include "util/errfmt.h"

struct pull_args {
    bool offline, refresh;
    struct opt_multi spec; /* ORG/REPO[:QUANT | /FILE.gguf] */
};

/* clang-format off */
static const struct opt pull_list[] = {
    {.names = "--offline", .kind = OPT_FLAG, .off = offsetof(struct pull_args, offline),
     .help = "use the cache only: never ask the network"},
    {.names = "--refresh", .kind = OPT_FLAG, .off = offsetof(struct pull_args, refresh),
     .help = "ask the Hub for the repository's files even when the model is cached, and download "
             "again a file whose SHA-256 has changed"},
};
/* clang-format on */

static const struct opt_group pull_group = OPT_GROUP("Download", pull_list);

/* clang-format off */
static const struct opt_use pull_uses[] = {
    {&pull_group, 0},
};
/* clang-format on */

static const struct pull_args pull_defaults = {0};

const struct cmd_spec cmd_pull_spec = {
    .name      = "pull",
    .synopsis  = "hearth pull ORG/REPO[:QUANT | /FILE.gguf] [--offline | --refresh]",
    .about     = "Downloads a GGUF model from the Hugging Face Hub into the cache, checks it "
                 "against the SHA-256 the Hub publishes, and prints its path. :QUANT picks the "
                 "file whose name carries that quant (Q4_K_M, Q8_0, ...); with neither :QUANT nor "
                 "/FILE, Q4_K_M, else Q8_0, else the first GGUF file. All the parts of a split "
                 "model come. A cut download resumes where it stopped; a model already in the "
                 "cache is used without a request (--refresh asks the Hub, and downloads again "
                 "what changed there since). run and serve take the same with -hf.",
    .epilog    = "Environment: HF_TOKEN (gated or private repositories), HF_ENDPOINT (a mirror\n"
                 "of https://huggingface.co), HEARTH_CACHE (the cache; default\n"
                 "~/.cache/hearth/models), HF_HUB_OFFLINE=1 (as --offline).\n",
    .uses      = pull_uses,
    .n_uses    = sizeof pull_uses / sizeof pull_uses[0],
    .pos_max   = 1,
    .pos_off   = offsetof(struct pull_args, spec),
    .defaults  = &pull_defaults,
    .args_size = sizeof(struct pull_args),
};

/* What pull_apart's child reports. */
struct outcome {
    enum hearth_status st;
    struct hub_result r;
    char err[HEARTH_ERR_MAX];
};

/*
 * hub_pull in a child process, so libcurl and libcrypto (and what they map: 5 MiB) are never
 * in a serve or run process that loads the model after it, whose memory `hearth fit` predicts.
 */
static enum hearth_status pull_apart(const char *spec, const struct hub_opts *o,
                                     struct hub_result *r, char *err, size_t err_len)
{
    int fds[2];
    if (pipe(fds))
        return fail(HEARTH_EIO, err, err_len, "cannot start the download: %s", strerror(errno));
    fflush(NULL);
    const pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]), close(fds[1]);
        return fail(HEARTH_EIO, err, err_len, "cannot start the download: %s", strerror(errno));
    }
    if (pid == 0) {
        close(fds[0]);
        struct outcome out = {0};
        out.st             = hub_pull(spec, o, &out.r, out.err, sizeof out.err);
        const char *p      = (const char *)&out;
        for (size_t left = sizeof out; left;) {
            const ssize_t w = write(fds[1], p, left);
            if (w <= 0)
                _exit(1);
            p += w, left -= (size_t)w;
        }
        _exit(0);
    }
    close(fds[1]);
    struct outcome out;
    size_t got = 0;
    while (got < sizeof out) {
        const ssize_t k = read(fds[0], (char *)&out + got, sizeof out - got);
        if (k > 0)
            got += (size_t)k;
        else if (k == 0 || errno != EINTR)
            break;
    }
    close(fds[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (got < sizeof out)
        return fail(HEARTH_EIO, err, err_len, "the download ended without a word (%s %d)",
                    WIFSIGNALED(status) ? "signal" : "status",
                    WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    *r = out.r;
    set_err(err, err_len, "%s", out.err);
    return out.st;
}

int hub_model(const char *cmd, const char *spec, unsigned flags, char *path, size_t path_len)
{
    struct hub_opts o;
    char err[HEARTH_ERR_MAX];
    if (!hub_opts_env(&o, err, sizeof err)) {
        fprintf(stderr, "hearth %s: %s\n", cmd, err);
        return EXIT_RUNTIME;
    }
    o.offline |= (flags & HUB_OFFLINE) != 0;
    o.refresh = (flags & HUB_REFRESH) != 0;
    /* a spec that cannot name a file is a usage error, whatever the Hub holds */
    struct hub_spec sp;
    if (hub_spec_parse(spec, &sp, err, sizeof err)) {
        fprintf(stderr, "hearth %s: %s\n", cmd, err);
        return EXIT_USAGE;
    }
    struct hub_result r;
    const enum hearth_status st = pull_apart(spec, &o, &r, err, sizeof err);
    if (st) {
        fprintf(stderr, "hearth %s: %s\n", cmd, err);
        return EXIT_RUNTIME;
    }
    if (r.n_parts > 1 && !(flags & HUB_SPLIT_OK)) {
        fprintf(stderr,
                "hearth %s: %s is a model split in %d files (in the cache beside %s); hearth "
                "loads single-file GGUF only: merge them with llama.cpp's llama-gguf-split "
                "--merge\n",
                cmd, spec, r.n_parts, r.path);
        return EXIT_RUNTIME;
    }
    if (!r.fetched)
        fprintf(stderr, "hearth %s: %s from the cache: %s\n", cmd, spec, r.path);
    snprintf(path, path_len, "%s", r.path);
    return EXIT_OK;
}

int cmd_pull(int argc, char **argv)
{
    struct pull_args a;
    const enum opts_status st = opts_parse(&cmd_pull_spec, &a, argc, argv);
    if (st != OPTS_GO)
        return opts_exit(st);
    if (!a.spec.n) {
        fprintf(stderr, "hearth pull: needs ORG/REPO[:QUANT | /FILE.gguf]\n");
        return EXIT_USAGE;
    }
    const char *spec = a.spec.v[0];
    const unsigned flags =
        HUB_SPLIT_OK | (a.offline ? HUB_OFFLINE : 0u) | (a.refresh ? HUB_REFRESH : 0u);
    char path[4096];
    if ((flags & HUB_OFFLINE) && (flags & HUB_REFRESH)) {
        fprintf(stderr, "hearth pull: --refresh asks the Hub, --offline forbids it; give one\n");
        return EXIT_USAGE;
    }
    const int rc = hub_model("pull", spec, flags, path, sizeof path);
    if (rc == EXIT_OK)
        printf("%s\n", path);
    return rc;
}
