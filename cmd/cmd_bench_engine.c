/*
 * cmd_bench_engine.c: `hearth bench-engine`, prefill and decode speed on a
 * model, the way llama-bench measures them: pp = a P-token prompt in
 * micro-batches from an empty cache; tg = N single-token decode steps.
 * With -d D both start from a cache already holding D tokens (llama-bench's
 * depth), which is where the K/V cache's type (-ctk, -ctv) shows.
 * Each is run once to warm up, then timed over R repetitions (best kept).
 * Also reports the bytes decode reads per token against a read bandwidth
 * measured here, and prefill's arithmetic rate against the int8 dot rate
 * of the kernels in use, measured here too, so each figure says how close
 * to its machine's limit it is.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "hearth.h"
#include "kernels/kernels.h"
#include "opts.h"
#include "util/clock.h"

struct bench_args {
    struct model_args model;
    struct {
        long n_pp, n_tg; /* 0: that test is skipped */
        long depth, reps;
    } test;
    struct thread_args threads;
    struct placement place;
    struct cache_types ct;
};

#define T(f) offsetof(struct bench_args, test.f) - offsetof(struct bench_args, test)
/* clang-format off */
static const struct opt test_list[] = {
    {.names = "-p --n-prompt", .value = "N", .kind = OPT_LONG, .off = T(n_pp), .lo = 0,
     .hi = 1 << 16, .def = "512",
     .help = "prompt tokens for the prefill test, ppP, in micro-batches of 512; 0 skips it"},
    {.names = "-n --n-gen", .value = "N", .kind = OPT_LONG, .off = T(n_tg), .lo = 0,
     .hi = 1 << 16, .def = "128",
     .help = "tokens for the decode test, tgN, one decode step each; 0 skips it"},
    {.names = "-d --n-depth", .value = "N", .kind = OPT_LONG, .off = T(depth), .lo = 0,
     .hi = 1 << 20, .def = "0",
     .help = "tokens already in the cache when each test starts (llama-bench's depth): where the "
             "K/V cache's type shows"},
    {.names = "-r --repetitions", .value = "N", .kind = OPT_LONG, .off = T(reps), .lo = 1,
     .hi = 100, .def = "3",
     .help = "timed repetitions of each test after one to warm up; the best is kept"},
};
/* clang-format on */
#undef T

static const struct opt_group test_group = OPT_GROUP("Tests", test_list);

/* clang-format off */
static const struct opt_use bench_uses[] = {
    {&opts_model, offsetof(struct bench_args, model)},
    {&test_group, offsetof(struct bench_args, test)},
    {&opts_threads, offsetof(struct bench_args, threads)},
    {&opts_cache_types, offsetof(struct bench_args, ct)},
    {&opts_placement, offsetof(struct bench_args, place)},
};
/* clang-format on */

static const struct bench_args bench_defaults = {
    .test = {.n_pp = 512, .n_tg = 128, .depth = 0, .reps = 3},
};

const struct cmd_spec cmd_bench_engine_spec = {
    .name      = "bench-engine",
    .synopsis  = "hearth bench-engine -m MODEL [-p P] [-n N] [-d D] [-r REPS] [options]\n"
                 "hearth bench-engine -hf ORG/REPO[:QUANT] [options]",
    .about     = "Prefill and decode speed on a model, measured as llama-bench measures them: ppP "
                 "prefills a P-token prompt from an empty cache (or one holding -d tokens), tgN "
                 "decodes N tokens one at a time; each runs once to warm up, then R times, the best "
                 "kept. Each figure is set beside its machine's limit, measured here too: the bytes "
                 "decode reads a second against the read bandwidth, prefill's arithmetic rate "
                 "against the int8 dot rate of the kernels in use.",
    .uses      = bench_uses,
    .n_uses    = sizeof bench_uses / sizeof bench_uses[0],
    .defaults  = &bench_defaults,
    .args_size = sizeof(struct bench_args),
};

struct run {
    struct hearth_context *ctx;
    hearth_token *tok;
    int32_t *pos, *seq;
    int32_t n_vocab, n_batch;
    int32_t depth; /* tokens in the cache when a test starts */
};

/* Prefills tokens [from, to) in micro-batches; false on an error. */
static bool prefill(struct run *r, int32_t from, int32_t to, char *err, size_t err_len)
{
    for (int32_t i = from; i < to; i += r->n_batch) {
        int32_t m             = to - i < r->n_batch ? to - i : r->n_batch;
        struct hearth_batch b = {m, r->tok + i, r->pos + i, r->seq + i, NULL};
        if (hearth_decode(r->ctx, &b, err, err_len))
            return false;
    }
    return true;
}

/* Back to the first depth tokens (computed once, then kept); false on an error. */
static bool at_depth(struct run *r, char *err, size_t err_len)
{
    if (hearth_seq_len(r->ctx, 0) < r->depth)
        hearth_seq_truncate(r->ctx, 0, 0);
    else
        hearth_seq_truncate(r->ctx, 0, r->depth);
    return prefill(r, hearth_seq_len(r->ctx, 0), r->depth, err, err_len);
}

/* Prefill n tokens on top of the depth; returns seconds or -1. */
static double time_pp(struct run *r, int32_t n, char *err, size_t err_len)
{
    if (!at_depth(r, err, err_len))
        return -1;
    double t0 = now_s();
    if (!prefill(r, r->depth, r->depth + n, err, err_len))
        return -1;
    return now_s() - t0;
}

/* Decode n tokens one at a time after a 1-token start on top of the depth; seconds or -1. */
static double time_tg(struct run *r, int32_t n, char *err, size_t err_len)
{
    if (!at_depth(r, err, err_len) || !prefill(r, r->depth, r->depth + 1, err, err_len))
        return -1;
    double t0 = now_s();
    for (int32_t i = r->depth + 1; i <= r->depth + n; i++) {
        struct hearth_batch b = {1, r->tok + i, r->pos + i, r->seq, NULL};
        if (hearth_decode(r->ctx, &b, err, err_len))
            return -1;
    }
    return now_s() - t0;
}

struct bw_slice {
    const uint64_t *p;
    size_t n;     /* uint64 words, a multiple of 16 */
    uint64_t sum; /* kept so the reads are not optimised away */
};

static void *bw_read(void *arg)
{
    struct bw_slice *sl = arg;
    /* sixteen independent accumulators: the loads, not the adds, set the pace;
     * fetched 4 KB ahead, as the decode kernels fetch their weights */
    uint64_t a[16] = {0};
    for (size_t i = 0; i < sl->n; i += 16) {
        __builtin_prefetch(sl->p + i + 512);
        __builtin_prefetch(sl->p + i + 520);
        for (int k = 0; k < 16; k++)
            a[k] += sl->p[i + k];
    }
    for (int k = 0; k < 16; k++)
        sl->sum += a[k];
    return NULL;
}

/*
 * Streaming read bandwidth with the benchmark's thread count over a buffer
 * far larger than the caches, in bytes/s: the ceiling decode is measured
 * against. Probed once after every timed decode repetition (and a few times
 * more), best kept, so that both figures come from the same stretch of a
 * shared machine's time.
 */
struct bw_probe {
    uint64_t *buf;
    size_t words;
    int n_threads;
};

static int bw_open(struct bw_probe *p, int n_threads)
{
    const size_t len = (size_t)512 << 20;
    p->buf           = n_threads >= 1 && n_threads <= 256 ? malloc(len) : NULL;
    p->words         = len / sizeof(uint64_t);
    p->n_threads     = n_threads;
    if (!p->buf)
        return -1;
    memset(p->buf, 1, len);
    return 0;
}

/*
 * Runs fn on each of the n (<= 256) arguments at args, elem bytes apart: the
 * first on this thread, the others on threads of their own. Returns the
 * seconds from the first start to the last finish.
 */
static double on_threads(void *(*fn)(void *), void *args, size_t elem, int n)
{
    pthread_t th[256];
    const double t0 = now_s();
    for (int i = 1; i < n; i++)
        pthread_create(&th[i], NULL, fn, (uint8_t *)args + (size_t)i * elem);
    fn(args);
    for (int i = 1; i < n; i++)
        pthread_join(th[i], NULL);
    return now_s() - t0;
}

static double bw_once(const struct bw_probe *p)
{
    struct bw_slice sl[256];
    const size_t per = p->words / (size_t)p->n_threads / 16 * 16;
    for (int i = 0; i < p->n_threads; i++)
        sl[i] = (struct bw_slice){p->buf + (size_t)i * per, per, 0};
    return per * (size_t)p->n_threads * 8 / on_threads(bw_read, sl, sizeof sl[0], p->n_threads);
}

struct probe_thread {
    double (*fn)(int64_t rounds);
    int64_t rounds;
    double ops;
};

static void *probe_run(void *arg)
{
    struct probe_thread *p = arg;
    p->ops                 = p->fn(p->rounds);
    return NULL;
}

/*
 * The int8 dot rate of the kernel table on n_threads threads, in op/s (two
 * per multiply-add), best of five short bursts; 0 when the table has no
 * probe. Prefill's integer dot products cannot go faster than this.
 */
static double int8_peak(int n_threads)
{
    const struct kernels *k = kernels_get();
    if (!k->int8_probe || n_threads < 1 || n_threads > 256)
        return 0;
    struct probe_thread pt[256];
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        for (int i = 0; i < n_threads; i++)
            pt[i] = (struct probe_thread){k->int8_probe, 2000000, 0};
        const double t = on_threads(probe_run, pt, sizeof pt[0], n_threads);
        double ops     = 0;
        for (int i = 0; i < n_threads; i++)
            ops += pt[i].ops;
        best = ops / t > best ? ops / t : best;
    }
    return best;
}

/* One line per stage unless one CPU stage runs everything; whether any stage is on a GPU. */
static bool print_stages(const struct hearth_context *ctx)
{
    const int32_t n = hearth_context_n_stages(ctx);
    struct hearth_stage_info st;
    hearth_context_stage(ctx, 0, &st);
    const bool gpu = n > 1 || strcmp(st.device, "cpu") != 0;
    for (int32_t i = 0; gpu && i < n; i++) {
        hearth_context_stage(ctx, i, &st);
        if (st.layer_end > st.layer_first)
            printf("stage %d: %s, layers %d-%d%s, %.1f MiB of weights, %.1f MiB of K/V\n", i,
                   st.device, st.layer_first, st.layer_end - 1, st.output ? " and the output" : "",
                   st.weight_bytes / 1048576.0, st.kv_bytes / 1048576.0);
        else
            printf("stage %d: %s, the output, %.1f MiB of weights\n", i, st.device,
                   st.weight_bytes / 1048576.0);
    }
    for (int32_t i = 0; i < n; i++)
        if (hearth_context_stage(ctx, i, &st) && strcmp(st.device, "cpu"))
            return true;
    return false;
}

int cmd_bench_engine(int argc, char **argv)
{
    struct bench_args a;
    const enum opts_status st = opts_parse(&cmd_bench_engine_spec, &a, argc, argv);
    if (st != OPTS_GO)
        return opts_exit(st);
    const long threads = threads_or_default(&a.threads), n_pp = a.test.n_pp, n_tg = a.test.n_tg;
    const long reps = a.test.reps, depth = a.test.depth;
    const struct placement place = a.place;
    const struct cache_types ct  = a.ct;
    if (!a.model.path && !a.model.hf) {
        fprintf(stderr, "hearth bench-engine: needs -m MODEL\n");
        return EXIT_USAGE;
    }
    char model_path[4096];
    const int mrc = model_args_path("bench-engine", &a.model, model_path, sizeof model_path);
    if (mrc != EXIT_OK)
        return mrc;
    char err[HEARTH_ERR_MAX];
    int rc                        = EXIT_RUNTIME;
    struct hearth_model *model    = NULL;
    struct run r                  = {0};
    struct hearth_model_params mp = hearth_model_default_params();
    mp.n_threads                  = (int)threads;
    placement_params(&place, &mp);
    if (hearth_model_load(model_path, &mp, &model, err, sizeof err)) {
        fprintf(stderr, "hearth: %s\n", err);
        return EXIT_RUNTIME;
    }
    int32_t n_tok                   = (int32_t)(depth + (n_pp > n_tg + 1 ? n_pp : n_tg + 1));
    struct hearth_context_params cp = hearth_context_default_params();
    cp.n_ctx                        = n_tok;
    cp.n_batch                      = 512;
    cp.kv_type                      = (enum hearth_kv_type)ct.k;
    cp.kv_type_v                    = (enum hearth_kv_type)ct.v;
    r.n_batch                       = cp.n_batch;
    r.depth                         = (int32_t)depth;
    r.n_vocab                       = hearth_model_n_vocab(model);
    r.tok                           = malloc((size_t)n_tok * sizeof *r.tok);
    r.pos                           = malloc((size_t)n_tok * sizeof *r.pos);
    r.seq                           = calloc((size_t)n_tok, sizeof *r.seq);
    if (!r.tok || !r.pos || !r.seq) {
        fprintf(stderr, "hearth: out of memory\n");
        goto out;
    }
    if (hearth_context_new(model, &cp, &r.ctx, err, sizeof err)) {
        fprintf(stderr, "hearth: %s\n", err);
        goto out;
    }
    uint64_t x = 88172645463325252ull;
    for (int32_t i = 0; i < n_tok; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        r.tok[i] = (hearth_token)(x % (uint64_t)r.n_vocab);
        r.pos[i] = i;
    }
    printf("model: %s, %.1f MiB of weights, %ld threads, K/V %s/%s, depth %ld\n", model_path,
           hearth_model_weight_bytes(model) / 1048576.0, threads,
           hearth_kv_type_name((enum hearth_kv_type)ct.k),
           hearth_kv_type_name((enum hearth_kv_type)ct.v), depth);
    if (hearth_model_token_bytes(model) != hearth_model_weight_bytes(model))
        printf("a token reads %.1f MiB of them (the routed experts it uses)\n",
               hearth_model_token_bytes(model) / 1048576.0);
    const bool offloaded = print_stages(r.ctx);
    if (n_pp > 0) {
        double best = 1e30;
        for (long k = 0; k <= reps; k++) { /* k = 0 warms up */
            double t = time_pp(&r, (int32_t)n_pp, err, sizeof err);
            if (t < 0) {
                fprintf(stderr, "hearth: %s\n", err);
                goto out;
            }
            if (k > 0 && t < best)
                best = t;
        }
        const double ops  = hearth_model_prefill_ops(model, depth, n_pp) / best;
        const double peak = int8_peak((int)threads);
        printf("pp%ld: %.1f tok/s\n", n_pp, n_pp / best);
        if (peak > 0)
            printf("prefill %.4g TOP/s (matmuls and attention); measured int8 peak %.4g TOP/s "
                   "(%s, %ld threads); share %.0f%%%s\n",
                   ops / 1e12, peak / 1e12, kernels_get()->name, threads, 100 * ops / peak,
                   offloaded ? " (the peak is the CPU's)" : "");
        else
            printf("prefill %.4g TOP/s (matmuls and attention); no int8 peak probe for the %s "
                   "kernels\n",
                   ops / 1e12, kernels_get()->name);
        fflush(stdout);
    }
    if (n_tg > 0) {
        struct bw_probe probe;
        const int have_bw = bw_open(&probe, (int)threads) == 0;
        double best = 1e30, bw = 0;
        for (long k = 0; k <= reps; k++) {
            double t = time_tg(&r, (int32_t)n_tg, err, sizeof err);
            if (t < 0) {
                fprintf(stderr, "hearth: %s\n", err);
                free(probe.buf);
                goto out;
            }
            if (k > 0 && t < best)
                best = t;
            for (int j = 0; have_bw && j < (k == reps ? 3 : 1); j++) {
                const double b = bw_once(&probe);
                bw             = b > bw ? b : bw;
            }
        }
        free(probe.buf);
        double tps = n_tg / best, bytes = (double)hearth_model_token_bytes(model);
        printf("tg%ld: %.1f tok/s\n", n_tg, tps);
        printf("decode reads %.2f GB/s (weights a token reads x tok/s); measured read bandwidth "
               "%.2f GB/s; share %.0f%%%s\n",
               bytes * tps / 1e9, bw / 1e9, bw > 0 ? 100 * bytes * tps / bw : 0,
               offloaded ? " (the bandwidth is the CPU's: layers on a GPU read its own memory)"
                         : "");
    }
    rc = EXIT_OK;
out:
    free(r.tok);
    free(r.pos);
    free(r.seq);
    hearth_context_free(r.ctx);
    hearth_model_free(model);
    return rc;
}
