/*
 * cmd_perplexity.c: `hearth perplexity`, computed exactly as llama.cpp's
 * llama-perplexity default method so the figures compare: the whole file
 * tokenized once (BOS first when the vocab adds it), non-overlapping chunks
 * of ctx tokens each evaluated from an empty cache with BOS as its first
 * token, and only the second half of each chunk scored. --chunks N stops
 * after the first N chunks, as llama-perplexity's does.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "hearth.h"
#include "opts.h"
#include "util/clock.h"

struct perplexity_args {
    struct model_args model;
    struct {
        const char *file;
        long n_ctx, chunks; /* chunks 0: all */
    } ppl;
    struct thread_args threads;
    struct placement place;
    struct cache_types ct;
};

#define PPL(f) offsetof(struct perplexity_args, ppl.f) - offsetof(struct perplexity_args, ppl)
/* clang-format off */
static const struct opt ppl_list[] = {
    {.names = "-f --file", .value = "TEXT", .kind = OPT_STR, .off = PPL(file),
     .help = "the text file to score"},
    {.names = "-c --ctx-size --ctx", .value = "N", .kind = OPT_LONG, .off = PPL(n_ctx), .lo = 4,
     .hi = 1 << 20, .def = "512", .help = "tokens per chunk"},
    {.names = "--chunks", .value = "N", .kind = OPT_LONG, .off = PPL(chunks), .lo = 1,
     .hi = 1L << 30, .def = "all", .help = "score only the first N chunks, as llama-perplexity's"},
};
/* clang-format on */
#undef PPL
static const struct opt_group ppl_group = OPT_GROUP("Perplexity", ppl_list);

/* clang-format off */
static const struct opt_use perplexity_uses[] = {
    {&opts_model, offsetof(struct perplexity_args, model)},
    {&ppl_group, offsetof(struct perplexity_args, ppl)},
    {&opts_threads, offsetof(struct perplexity_args, threads)},
    {&opts_placement, offsetof(struct perplexity_args, place)},
    {&opts_cache_types, offsetof(struct perplexity_args, ct)},
};
/* clang-format on */

static const struct perplexity_args perplexity_defaults = {.ppl = {.n_ctx = 512}};

const struct cmd_spec cmd_perplexity_spec = {
    .name      = "perplexity",
    .synopsis  = "hearth perplexity -m MODEL -f TEXT [options]",
    .about     = "The perplexity of a text, computed exactly as llama.cpp's llama-perplexity does, "
                 "so the figures compare: the text cut into chunks of -c tokens, each scored on "
                 "its second half. The last line is 'Final estimate: PPL = <value> +/- <stderr>'.",
    .uses      = perplexity_uses,
    .n_uses    = sizeof perplexity_uses / sizeof perplexity_uses[0],
    .defaults  = &perplexity_defaults,
    .args_size = sizeof(struct perplexity_args),
};

/* -log softmax(logits)[tok], computed in double like llama-perplexity. */
static double nll(const float *logits, int32_t n_vocab, hearth_token tok)
{
    float max = logits[0];
    for (int32_t i = 1; i < n_vocab; i++)
        if (logits[i] > max)
            max = logits[i];
    double sum = 0;
    for (int32_t i = 0; i < n_vocab; i++)
        sum += exp((double)(logits[i] - max));
    return -((double)(logits[tok] - max) - log(sum));
}

int cmd_perplexity(int argc, char **argv)
{
    struct perplexity_args a;
    const enum opts_status st = opts_parse(&cmd_perplexity_spec, &a, argc, argv);
    if (st != OPTS_GO)
        return opts_exit(st);
    const char *text_path = a.ppl.file;
    const long n_ctx = a.ppl.n_ctx, threads = threads_or_default(&a.threads);
    const long max_chunks        = a.ppl.chunks;
    const struct placement place = a.place;
    const struct cache_types ct  = a.ct;
    if ((!a.model.path && !a.model.hf) || !text_path) {
        fprintf(stderr, "hearth perplexity: needs -m MODEL and -f TEXT\n");
        return EXIT_USAGE;
    }
    char model_path[4096];
    const int mrc = model_args_path("perplexity", &a.model, model_path, sizeof model_path);
    if (mrc != EXIT_OK)
        return mrc;

    char err[HEARTH_ERR_MAX];
    int rc            = EXIT_RUNTIME;
    char *text        = NULL;
    hearth_token *ids = NULL;
    size_t n_ids = 0, len = 0;
    struct hearth_model *model = NULL;
    struct hearth_context *ctx = NULL;
    int32_t *pos = NULL, *seq = NULL;

    FILE *fp = fopen(text_path, "rb");
    if (!fp) {
        fprintf(stderr, "hearth: cannot open %s\n", text_path);
        return EXIT_RUNTIME;
    }
    fseek(fp, 0, SEEK_END);
    long flen = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    text = malloc(flen > 0 ? (size_t)flen + 1 : 1);
    if (!text || (flen > 0 && fread(text, 1, (size_t)flen, fp) != (size_t)flen)) {
        fclose(fp);
        fprintf(stderr, "hearth: cannot read %s\n", text_path);
        goto out;
    }
    fclose(fp);
    len       = flen > 0 ? (size_t)flen : 0;
    text[len] = 0;

    struct hearth_model_params mp = hearth_model_default_params();
    mp.n_threads                  = (int)threads;
    placement_params(&place, &mp);
    if (hearth_model_load(model_path, &mp, &model, err, sizeof err) ||
        hearth_tokenize(model, text, len, true, false, &ids, &n_ids, err, sizeof err)) {
        fprintf(stderr, "hearth: %s\n", err);
        goto out;
    }
    if (n_ids < 2 * (size_t)n_ctx) {
        fprintf(stderr, "hearth: %s has %zu tokens; perplexity needs at least 2 x ctx = %ld\n",
                text_path, n_ids, 2 * n_ctx);
        goto out;
    }
    struct hearth_context_params cp = hearth_context_default_params();
    cp.n_ctx                        = (int32_t)n_ctx;
    cp.kv_type                      = (enum hearth_kv_type)ct.k;
    cp.kv_type_v                    = (enum hearth_kv_type)ct.v;
    cp.n_batch                      = (int32_t)n_ctx;
    if (hearth_context_new(model, &cp, &ctx, err, sizeof err)) {
        fprintf(stderr, "hearth: %s\n", err);
        goto out;
    }
    size_t n_chunk = n_ids / (size_t)n_ctx;
    if (max_chunks && n_chunk > (size_t)max_chunks)
        n_chunk = (size_t)max_chunks;
    const int32_t first = (int32_t)n_ctx / 2, n_vocab = hearth_model_n_vocab(model);
    const bool add_bos  = hearth_vocab_add_bos(model);
    pos                 = malloc((size_t)n_ctx * sizeof *pos);
    seq                 = calloc((size_t)n_ctx, sizeof *seq);
    int8_t *want        = malloc((size_t)n_ctx);
    hearth_token *chunk = malloc((size_t)n_ctx * sizeof *chunk);
    if (!pos || !seq || !want || !chunk) {
        free(want);
        free(chunk);
        fprintf(stderr, "hearth: out of memory\n");
        goto out;
    }
    for (int32_t i = 0; i < n_ctx; i++) {
        pos[i]  = i;
        want[i] = i >= first;
    }
    fprintf(stderr, "perplexity: %zu tokens, %zu chunks of %ld\n", n_ids, n_chunk, n_ctx);
    double sum = 0, sum2 = 0;
    long count = 0;
    double t0  = now_s();
    for (size_t c = 0; c < n_chunk; c++) {
        memcpy(chunk, ids + c * (size_t)n_ctx, (size_t)n_ctx * sizeof *chunk);
        if (add_bos)
            chunk[0] = hearth_token_bos(model);
        hearth_seq_truncate(ctx, 0, 0);
        struct hearth_batch b = {(int32_t)n_ctx, chunk, pos, seq, want};
        if (hearth_decode(ctx, &b, err, sizeof err)) {
            free(want);
            free(chunk);
            fprintf(stderr, "hearth: %s\n", err);
            goto out;
        }
        for (int32_t j = first; j < n_ctx - 1; j++) {
            double v = nll(hearth_get_logits(ctx, j), n_vocab, ids[c * (size_t)n_ctx + j + 1]);
            sum += v;
            sum2 += v * v;
            count++;
        }
        printf("[%zu]%.4f,", c + 1, exp(sum / count));
        fflush(stdout);
    }
    free(want);
    free(chunk);
    double mean = sum / count, var = sum2 / count - mean * mean;
    double ppl = exp(mean);
    double se  = count > 1 && var > 0 ? sqrt(var / (count - 1)) * ppl : 0;
    printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", ppl, se);
    fprintf(stderr, "perplexity: %.2f s, %.1f tok/s\n", now_s() - t0,
            n_chunk * n_ctx / (now_s() - t0));
    rc = EXIT_OK;
out:
    free(pos);
    free(seq);
    free(ids);
    free(text);
    hearth_context_free(ctx);
    hearth_model_free(model);
    return rc;
}
