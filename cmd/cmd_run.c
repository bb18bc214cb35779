/*
 * cmd_run.c: `hearth run`, generating text from a prompt. Prints only the
 * continuation on stdout, token by token as it is sampled; timings go to
 * stderr. With --chat it is an interactive conversation on stdin/stdout
 * through the model's chat template, reusing the cached conversation so
 * each turn prefills only its new tokens.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "hearth.h"
#include "util/clock.h"

static void usage(FILE *fp)
{
    fprintf(fp,
            "usage: hearth run -m MODEL -p PROMPT [options]\n"
            "       hearth run -m MODEL --chat [-sys SYSTEM] [options]\n"
            "  -m, --model FILE      GGUF model\n"
            "  -hf, --hf-repo ORG/REPO[:QUANT]  the model from the Hugging Face Hub, by way of\n"
            "                        the cache (as hearth pull; also ORG/REPO/FILE.gguf)\n"
            "  --offline             -hf from the cache only: never ask the network\n"
            "  -p, --prompt TEXT     prompt (BOS is added when the vocab says so)\n"
            "  -f, --file FILE       read the prompt from a file\n"
            "  --chat                talk to the model: one user message per line on stdin,\n"
            "                        rendered with its chat template; end with EOF (Ctrl-D)\n"
            "  -sys, --system TEXT   system message for --chat\n"
            "  -n, --n-predict N     tokens to generate (per turn with --chat; default -1:\n"
            "                        until end of text or context)\n"
            "  --temp T              temperature, 0 = greedy (default 0.8)\n"
            "  --top-k K             keep the K most likely tokens (default 40, 0 = off)\n"
            "  --top-p P             nucleus sampling (default 0.95, 1 = off)\n"
            "  --min-p P             drop tokens below P x the best one (default 0.05, 0 = off)\n"
            "  --repeat-penalty R    penalty for the last 64 tokens (default 1 = off)\n"
            "  --seed S              sampling seed (default: from the clock)\n"
            "  -t, --threads N       threads (default: the CPU count)\n"
            "  -c, --ctx N|max       context length (default: the model's, or the largest that\n"
            "                        fits the RAM free when that does not; max: the largest)\n");
    placement_usage(fp, 24);
    cache_types_usage(fp, 24);
}

/* The state of one generation session: sequence 0 of ctx holds tokens[0..n_cached). */
struct session {
    struct hearth_model *model;
    struct hearth_context *ctx;
    struct hearth_sampler *smp;
    int32_t n_ctx, n_batch;
    hearth_token *cached; /* [n_ctx] tokens whose KV sequence 0 holds */
    int32_t n_cached;
    double t_prefill, t_decode; /* seconds spent */
    long n_prefilled, n_generated;
};

/*
 * Makes sequence 0 hold ids[0..n) (keeping the longest common prefix already
 * cached) and leaves the last token's logits readable. Returns the batch row
 * of those logits, or -1 with the error printed.
 */
static int32_t prefill(struct session *s, const hearth_token *ids, int32_t n)
{
    char err[HEARTH_ERR_MAX];
    if (n >= s->n_ctx) {
        fprintf(stderr, "hearth: the prompt has %d tokens but the context is %d\n", n, s->n_ctx);
        return -1;
    }
    int32_t keep = 0;
    while (keep < s->n_cached && keep < n - 1 && s->cached[keep] == ids[keep])
        keep++;
    hearth_seq_truncate(s->ctx, 0, keep);
    keep = hearth_seq_len(s->ctx, 0);
    double t0 = now_s();
    /* one chunk of n_batch rows at a time, the context's own batch size */
    int32_t *pos = malloc((size_t)s->n_batch * sizeof *pos), row = -1;
    int32_t *seq = calloc((size_t)s->n_batch, sizeof *seq);
    if (!pos || !seq) {
        free(pos);
        free(seq);
        fprintf(stderr, "hearth: out of memory\n");
        return -1;
    }
    for (int32_t i = keep; i < n; i += s->n_batch) {
        int32_t m = n - i < s->n_batch ? n - i : s->n_batch;
        for (int32_t j = 0; j < m; j++)
            pos[j] = i + j;
        struct hearth_batch b = {m, ids + i, pos, seq, NULL};
        if (hearth_decode(s->ctx, &b, err, sizeof err)) {
            fprintf(stderr, "hearth: %s\n", err);
            row = -1;
            break;
        }
        row = m - 1;
    }
    free(pos);
    free(seq);
    if (row < 0 && keep < n)
        return -1;
    memcpy(s->cached + keep, ids + keep, (size_t)(n - keep) * sizeof *ids);
    s->n_cached = n;
    s->n_prefilled += n - keep;
    s->t_prefill += now_s() - t0;
    return row;
}

/*
 * Samples up to n_predict tokens (< 0: until end of generation or a full
 * context) after a prefill whose logits are at batch row `row`, printing each
 * piece as it comes. If reply is non-NULL the text is also appended there
 * (malloc'd, NUL-terminated). Returns false on an engine error.
 */
static bool generate(struct session *s, int32_t row, long n_predict, char **reply)
{
    char err[HEARTH_ERR_MAX], piece[256];
    size_t reply_len = 0;
    double t0 = now_s();
    const float *logits = hearth_get_logits(s->ctx, row);
    for (long n_gen = 0; n_predict < 0 || n_gen < n_predict; n_gen++) {
        hearth_token tok = hearth_sampler_sample(s->smp, logits);
        if (hearth_token_is_eog(s->model, tok))
            break;
        size_t len = hearth_token_to_piece(s->model, tok, piece, sizeof piece);
        len = len < sizeof piece ? len : sizeof piece;
        fwrite(piece, 1, len, stdout);
        fflush(stdout);
        s->n_generated++;
        if (reply) {
            char *r = realloc(*reply, reply_len + len + 1);
            if (!r)
                return false;
            memcpy(r + reply_len, piece, len);
            reply_len += len;
            r[reply_len] = 0;
            *reply = r;
        }
        if (n_predict >= 0 && n_gen + 1 >= n_predict)
            break;
        if (s->n_cached >= s->n_ctx) {
            fprintf(stderr, "\nhearth: context of %d tokens is full\n", s->n_ctx);
            break;
        }
        int32_t p = s->n_cached, seq0 = 0;
        struct hearth_batch b = {1, &tok, &p, &seq0, NULL};
        if (hearth_decode(s->ctx, &b, err, sizeof err)) {
            fprintf(stderr, "\nhearth: %s\n", err);
            return false;
        }
        s->cached[s->n_cached++] = tok;
        logits = hearth_get_logits(s->ctx, 0);
    }
    s->t_decode += now_s() - t0;
    return true;
}

/* Tokenizes text with BOS as the vocab says and special-token parsing. */
static hearth_token *tokenize(const struct hearth_model *m, const char *text, size_t *n)
{
    char err[HEARTH_ERR_MAX];
    hearth_token *ids = NULL;
    if (hearth_tokenize(m, text, strlen(text), true, true, &ids, n, err, sizeof err)) {
        fprintf(stderr, "hearth: %s\n", err);
        return NULL;
    }
    if (*n == 0) {
        fprintf(stderr, "hearth: the prompt is empty and the vocab adds no BOS\n");
        free(ids);
        return NULL;
    }
    return ids;
}

/* The interactive loop of --chat. Returns an exit status. */
static int chat_loop(struct session *s, const char *system, long n_predict)
{
    struct hearth_chat_msg *msgs = NULL;
    size_t n_msgs = 0, cap = 0;
    char *line = NULL;
    size_t line_cap = 0;
    int rc = EXIT_OK;
    const bool tty = isatty(0);
#define PUSH(r, c)                                                                    \
    do {                                                                              \
        if (n_msgs == cap) {                                                          \
            struct hearth_chat_msg *nm = realloc(msgs, (cap = cap ? 2 * cap : 8) * sizeof *msgs); \
            if (!nm) goto oom;                                                        \
            msgs = nm;                                                                \
        }                                                                             \
        msgs[n_msgs++] = (struct hearth_chat_msg){(r), (c)};                          \
    } while (0)
    if (system) {
        char *sys = strdup(system);
        if (!sys)
            goto oom;
        PUSH("system", sys);
    }
    fprintf(stderr, "hearth: chatting with the %s template; one message per line, EOF ends\n",
            hearth_chat_template_name(s->model));
    for (;;) {
        if (tty)
            fprintf(stderr, "> ");
        ssize_t got = getline(&line, &line_cap, stdin);
        if (got < 0)
            break;
        while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r'))
            line[--got] = 0;
        if (got == 0)
            continue;
        char *user = strdup(line);
        if (!user)
            goto oom;
        PUSH("user", user);
        char err[HEARTH_ERR_MAX], *text = NULL;
        if (hearth_chat_render(s->model, msgs, n_msgs, &text, err, sizeof err)) {
            fprintf(stderr, "hearth: %s\n", err);
            rc = EXIT_RUNTIME;
            break;
        }
        size_t n_ids = 0;
        hearth_token *ids = tokenize(s->model, text, &n_ids);
        free(text);
        if (!ids) {
            rc = EXIT_RUNTIME;
            break;
        }
        int32_t row = prefill(s, ids, (int32_t)n_ids);
        free(ids);
        char *reply = strdup("");
        if (row < 0 || !reply || !generate(s, row, n_predict, &reply)) {
            free(reply);
            rc = EXIT_RUNTIME;
            break;
        }
        fputc('\n', stdout);
        fflush(stdout);
        PUSH("assistant", reply);
    }
    goto done;
oom:
    fprintf(stderr, "hearth: out of memory\n");
    rc = EXIT_RUNTIME;
done:
    for (size_t i = 0; i < n_msgs; i++)
        free((char *)msgs[i].content);
    free(msgs);
    free(line);
    return rc;
#undef PUSH
}

int cmd_run(int argc, char **argv)
{
    const char *hf         = NULL;
    bool offline           = false;
    const char *model_path = NULL, *prompt = NULL, *prompt_file = NULL, *system = NULL;
    struct placement place = {0};
    struct cache_types ct  = {0};
    long n_predict = -1, seed = -1, threads = default_threads(), n_ctx = 0, top_k = 40;
    float temp = 0.8f, top_p = 0.95f, min_p = 0.05f, rep = 1.0f;
    bool chat = false, ctx_max = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return EXIT_OK;
        }
#define VALUE() if (!(v = arg_value("run", argc, argv, &i))) return EXIT_USAGE
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            VALUE(); model_path = v;
        } else if (!strcmp(a, "-hf") || !strcmp(a, "--hf-repo")) {
            VALUE(); hf = v;
        } else if (!strcmp(a, "--offline")) {
            offline = true;
        } else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
            VALUE(); prompt = v;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
            VALUE(); prompt_file = v;
        } else if (!strcmp(a, "--chat")) {
            chat = true;
        } else if (!strcmp(a, "-sys") || !strcmp(a, "--system")) {
            VALUE(); system = v;
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
            VALUE();
            if (!strcmp(v, "max"))
                ctx_max = true;
            else if (!arg_long("run", a, v, 1, 1 << 24, &n_ctx))
                return EXIT_USAGE;
        } else if (placement_opt(a)) {
            VALUE(); if (!placement_set("run", a, v, &place)) return EXIT_USAGE;
        } else if (cache_types_opt(a)) {
            VALUE(); if (!cache_types_set("run", a, v, &ct)) return EXIT_USAGE;
        } else {
            fprintf(stderr, "hearth run: unknown option '%s'\n", a);
            usage(stderr);
            return EXIT_USAGE;
        }
#undef VALUE
    }
    if (model_path && hf) {
        fprintf(stderr, "hearth run: -m and -hf name two models; give one\n");
        return EXIT_USAGE;
    }
    if ((!model_path && !hf) || (chat ? (prompt || prompt_file) : (!prompt == !prompt_file))) {
        fprintf(stderr, "hearth run: needs -m MODEL (or -hf ORG/REPO) and one of -p PROMPT, -f "
                        "FILE or --chat\n");
        usage(stderr);
        return EXIT_USAGE;
    }
    if (system && !chat) {
        fprintf(stderr, "hearth run: -sys goes with --chat\n");
        return EXIT_USAGE;
    }
    char hf_path[4096];
    if (hf) {
        const int rc = hub_model("run", hf, offline ? HUB_OFFLINE : 0, hf_path, sizeof hf_path);
        if (rc)
            return rc;
        model_path = hf_path;
    } else if (offline) {
        fprintf(stderr, "hearth run: --offline goes with -hf\n");
        return EXIT_USAGE;
    }

    if (!placement_uses_gpu(&place)) { /* refused before the load when it cannot fit */
        const struct hearth_context_params dp = hearth_context_default_params();
        const struct fit_check fc             = {.cmd         = "run",
                                                 .model       = model_path,
                                                 .ctx_max     = ctx_max,
                                                 .parallel    = 1,
                                                 .ubatch      = dp.n_batch,
                                                 .threads     = threads,
                                                 .checkpoints = dp.n_state_snapshots,
                                                 .ct          = &ct};
        if (!n_ctx)
            n_ctx = -1; /* the training context */
        const int frc = fit_check(&fc, &n_ctx);
        if (frc != EXIT_OK)
            return frc;
    } else if (ctx_max) {
        fprintf(stderr, "hearth run: --ctx max plans the host's memory only, and layers go on a "
                        "GPU here; give -c N (hearth fit --device says what fits)\n");
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
            if (cap - len < 2) {
                char *grown = realloc(file_text, cap *= 2);
                if (!grown)
                    free(file_text);
                file_text = grown;
            }
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
    struct session s = {0};
    hearth_token *ids = NULL;
    size_t n_ids = 0;
    double t0 = now_s();
    struct hearth_model_params mp = hearth_model_default_params();
    mp.n_threads = (int)threads;
    placement_params(&place, &mp);
    if (hearth_model_load(model_path, &mp, &s.model, err, sizeof err)) {
        fprintf(stderr, "hearth: %s\n", err);
        goto out;
    }
    if (!chat && !(ids = tokenize(s.model, prompt, &n_ids)))
        goto out;
    struct hearth_context_params cp = hearth_context_default_params();
    cp.n_ctx = n_ctx > 0 ? (int32_t)n_ctx : hearth_model_n_ctx_train(s.model);
    cp.kv_type   = (enum hearth_kv_type)ct.k;
    cp.kv_type_v = (enum hearth_kv_type)ct.v;
    s.n_ctx = cp.n_ctx;
    s.n_batch = cp.n_batch;
    if (hearth_context_new(s.model, &cp, &s.ctx, err, sizeof err)) {
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
    char serr[HEARTH_ERR_MAX];
    if (hearth_sampler_new(&sp, hearth_model_n_vocab(s.model), &s.smp, serr, sizeof serr) !=
        HEARTH_OK) {
        fprintf(stderr, "hearth: %s\n", serr);
        goto out;
    }
    s.cached = malloc((size_t)s.n_ctx * sizeof *s.cached);
    if (!s.cached) {
        fprintf(stderr, "hearth: out of memory\n");
        goto out;
    }
    double t_loaded = now_s();
    if (chat) {
        rc = chat_loop(&s, system, n_predict);
    } else {
        for (size_t i = 0; i < n_ids; i++)
            hearth_sampler_accept(s.smp, ids[i]);
        int32_t row = prefill(&s, ids, (int32_t)n_ids);
        if (row < 0 || !generate(&s, row, n_predict, NULL))
            goto out;
        rc = EXIT_OK;
    }
    fprintf(stderr, "\nload: %.0f ms\n", (t_loaded - t0) * 1e3);
    fprintf(stderr, "prefill: %ld tokens in %.0f ms (%.1f tok/s)\n", s.n_prefilled,
            s.t_prefill * 1e3, s.t_prefill > 0 ? s.n_prefilled / s.t_prefill : 0.0);
    fprintf(stderr, "decode: %ld tokens in %.0f ms (%.1f tok/s)\n", s.n_generated,
            s.t_decode * 1e3, s.t_decode > 0 ? s.n_generated / s.t_decode : 0.0);
out:
    free(ids);
    free(file_text);
    free(s.cached);
    hearth_sampler_free(s.smp);
    hearth_context_free(s.ctx);
    hearth_model_free(s.model);
    return rc;
}
