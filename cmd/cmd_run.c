/*
 * cmd_run.c: `hearth run`, generating text from a prompt. Prints only the
 * continuation on stdout, token by token as it is sampled; timings go to
 * stderr.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "hearth.h"

static void usage(FILE *fp)
{
    fprintf(fp,
            "usage: hearth run -m MODEL -p PROMPT [options]\n"
            "  -m, --model FILE      GGUF model\n"
            "  -p, --prompt TEXT     prompt (BOS is added when the vocab says so)\n"
            "  -f, --file FILE       read the prompt from a file\n"
            "  -n, --n-predict N     tokens to generate (default -1: until end of text or context)\n"
            "  --temp T              temperature, 0 = greedy (default 0.8)\n"
            "  --top-k K             keep the K most likely tokens (default 40, 0 = off)\n"
            "  --top-p P             nucleus sampling (default 0.95, 1 = off)\n"
            "  --min-p P             drop tokens below P x the best one (default 0.05, 0 = off)\n"
            "  --repeat-penalty R    penalty for the last 64 tokens (default 1 = off)\n"
            "  --seed S              sampling seed (default: from the clock)\n"
            "  -t, --threads N       threads (default 4)\n"
            "  -c, --ctx N           context length (default: the model's)\n");
}

int cmd_run(int argc, char **argv)
{
    const char *model_path = NULL, *prompt = NULL, *prompt_file = NULL;
    long n_predict = -1, seed = -1, threads = 4, n_ctx = 0, top_k = 40;
    float temp = 0.8f, top_p = 0.95f, min_p = 0.05f, rep = 1.0f;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return EXIT_OK;
        }
#define VALUE() if (!(v = arg_value("run", argc, argv, &i))) return EXIT_USAGE
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            VALUE(); model_path = v;
        } else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
            VALUE(); prompt = v;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
            VALUE(); prompt_file = v;
        } else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) {
            VALUE(); if (!arg_long("run", a, v, -1, 1 << 24, &n_predict)) return EXIT_USAGE;
        } else if (!strcmp(a, "--temp")) {
            VALUE(); if (!arg_float("run", a, v, 0, 100, &temp)) return EXIT_USAGE;
        } else if (!strcmp(a, "--top-k")) {
            VALUE(); if (!arg_long("run", a, v, 0, 1 << 30, &top_k)) return EXIT_USAGE;
        } else if (!strcmp(a, "--top-p")) {
            VALUE(); if (!arg_float("run", a, v, 0, 1, &top_p)) return EXIT_USAGE;
        } else if (!strcmp(a, "--min-p")) {
            VALUE(); if (!arg_float("run", a, v, 0, 1, &min_p)) return EXIT_USAGE;
        } else if (!strcmp(a, "--repeat-penalty")) {
            VALUE(); if (!arg_float("run", a, v, 0.01, 100, &rep)) return EXIT_USAGE;
        } else if (!strcmp(a, "--seed")) {
            VALUE(); if (!arg_long("run", a, v, 0, 0x7fffffffL, &seed)) return EXIT_USAGE;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            VALUE(); if (!arg_long("run", a, v, 1, 512, &threads)) return EXIT_USAGE;
        } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx")) {
            VALUE(); if (!arg_long("run", a, v, 1, 1 << 24, &n_ctx)) return EXIT_USAGE;
        } else {
            fprintf(stderr, "hearth run: unknown option '%s'\n", a);
            usage(stderr);
            return EXIT_USAGE;
        }
#undef VALUE
    }
    if (!model_path || (!prompt && !prompt_file) || (prompt && prompt_file)) {
        fprintf(stderr, "hearth run: needs -m MODEL and one of -p PROMPT or -f FILE\n");
        usage(stderr);
        return EXIT_USAGE;
    }

    char err[HEARTH_ERR_MAX];
    char *file_text = NULL;
    if (prompt_file) {
        FILE *fp = fopen(prompt_file, "rb");
        if (!fp) {
            fprintf(stderr, "hearth: cannot open %s\n", prompt_file);
            return EXIT_RUNTIME;
        }
        size_t cap = 4096, len = 0, r;
        file_text = malloc(cap);
        while (file_text && (r = fread(file_text + len, 1, cap - len - 1, fp)) > 0) {
            len += r;
            if (cap - len < 2)
                file_text = realloc(file_text, cap *= 2);
        }
        fclose(fp);
        if (!file_text) {
            fprintf(stderr, "hearth: out of memory reading %s\n", prompt_file);
            return EXIT_RUNTIME;
        }
        file_text[len] = 0;
        prompt = file_text;
    }

    int rc = EXIT_RUNTIME;
    struct hearth_model *model = NULL;
    struct hearth_context *ctx = NULL;
    struct hearth_sampler *smp = NULL;
    hearth_token *ids = NULL;
    size_t n_ids = 0;
    double t0 = now_seconds();
    struct hearth_model_params mp = hearth_model_default_params();
    mp.n_threads = (int)threads;
    if (hearth_model_load(model_path, &mp, &model, err, sizeof err)) {
        fprintf(stderr, "hearth: %s\n", err);
        goto out;
    }
    if (hearth_tokenize(model, prompt, strlen(prompt), true, true, &ids, &n_ids, err, sizeof err)) {
        fprintf(stderr, "hearth: %s\n", err);
        goto out;
    }
    if (n_ids == 0) {
        fprintf(stderr, "hearth: the prompt is empty and the vocab adds no BOS\n");
        goto out;
    }
    struct hearth_context_params cp = hearth_context_default_params();
    cp.n_ctx = n_ctx > 0 ? (int32_t)n_ctx : hearth_model_n_ctx_train(model);
    if ((long)n_ids >= cp.n_ctx) {
        fprintf(stderr, "hearth: the prompt has %zu tokens but the context is %d\n", n_ids,
                cp.n_ctx);
        goto out;
    }
    if (hearth_context_new(model, &cp, &ctx, err, sizeof err)) {
        fprintf(stderr, "hearth: %s\n", err);
        goto out;
    }
    struct hearth_sampler_params sp = hearth_sampler_default_params();
    sp.temperature = temp;
    sp.top_k = (int32_t)top_k;
    sp.top_p = top_p;
    sp.min_p = min_p;
    sp.repeat_penalty = rep;
    sp.seed = seed >= 0 ? (uint64_t)seed : (uint64_t)time(NULL);
    smp = hearth_sampler_new(&sp, hearth_model_n_vocab(model));
    if (!smp) {
        fprintf(stderr, "hearth: out of memory for the sampler\n");
        goto out;
    }
    double t_loaded = now_seconds();

    /* prefill in micro-batches; positions continue across them */
    int32_t *pos = malloc(n_ids * sizeof *pos), *seq = calloc(n_ids, sizeof *seq);
    if (!pos || !seq) {
        free(pos);
        free(seq);
        fprintf(stderr, "hearth: out of memory\n");
        goto out;
    }
    for (size_t i = 0; i < n_ids; i++) {
        pos[i] = (int32_t)i;
        hearth_sampler_accept(smp, ids[i]);
    }
    enum hearth_status st = HEARTH_OK;
    for (size_t i = 0; i < n_ids && !st; i += (size_t)cp.n_batch) {
        size_t n = n_ids - i < (size_t)cp.n_batch ? n_ids - i : (size_t)cp.n_batch;
        struct hearth_batch b = {(int32_t)n, ids + i, pos + i, seq + i, NULL};
        st = hearth_decode(ctx, &b, err, sizeof err);
    }
    free(pos);
    free(seq);
    if (st) {
        fprintf(stderr, "hearth: %s\n", err);
        goto out;
    }
    double t_prefill = now_seconds();

    long n_gen = 0;
    int32_t p = (int32_t)n_ids;
    const float *logits = hearth_get_logits(ctx, (int32_t)(((n_ids - 1) % (size_t)cp.n_batch)));
    char piece[256];
    while (n_predict < 0 || n_gen < n_predict) {
        hearth_token tok = hearth_sampler_sample(smp, logits);
        if (hearth_token_is_eog(model, tok))
            break;
        size_t len = hearth_token_to_piece(model, tok, piece, sizeof piece);
        fwrite(piece, 1, len < sizeof piece ? len : sizeof piece, stdout);
        fflush(stdout);
        n_gen++;
        if (n_predict >= 0 && n_gen >= n_predict)
            break;
        if (p >= cp.n_ctx) {
            fprintf(stderr, "\nhearth: context of %d tokens is full\n", cp.n_ctx);
            break;
        }
        int32_t seq0 = 0;
        struct hearth_batch b = {1, &tok, &p, &seq0, NULL};
        if (hearth_decode(ctx, &b, err, sizeof err)) {
            fprintf(stderr, "\nhearth: %s\n", err);
            goto out;
        }
        p++;
        logits = hearth_get_logits(ctx, 0);
    }
    double t_end = now_seconds();
    fprintf(stderr, "\nload: %.0f ms\n", (t_loaded - t0) * 1e3);
    fprintf(stderr, "prefill: %zu tokens in %.0f ms (%.1f tok/s)\n", n_ids,
            (t_prefill - t_loaded) * 1e3, n_ids / (t_prefill - t_loaded));
    fprintf(stderr, "decode: %ld tokens in %.0f ms (%.1f tok/s)\n", n_gen,
            (t_end - t_prefill) * 1e3, n_gen > 0 ? n_gen / (t_end - t_prefill) : 0.0);
    rc = EXIT_OK;
out:
    free(ids);
    free(file_text);
    hearth_sampler_free(smp);
    hearth_context_free(ctx);
    hearth_model_free(model);
    return rc;
}
