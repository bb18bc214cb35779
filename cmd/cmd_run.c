/*
 * cmd_run.c: `hearth run`, generating text from a prompt. Prints only the
 * continuation on stdout, token by token as it is sampled; timings go to
 * stderr. With --chat it is an interactive conversation on stdin/stdout
 * through the model's chat template, reusing the cached conversation so
 * each turn prefills only its new tokens. The loop is the library's
 * (generate/gen.h), whose token step the server's slots take too, so run
 * and serve cannot generate differently.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "hearth.h"
#include "opts.h"
#include "generate/gen.h"
#include "util/clock.h"

struct run_args {
    struct model_args model;
    struct {
        const char *prompt, *file, *system;
        bool chat;
        long n_predict; /* -1: until end of text or context */
        long n_ctx;     /* 0: the model's; CTX_MAX */
    } gen;
    struct {
        float temp, top_p, min_p, repeat_penalty;
        long top_k, seed; /* seed -1: from the clock */
    } smp;
    struct thread_args threads;
    struct placement place;
    struct cache_types ct;
};

#define GEN(f) offsetof(struct run_args, gen.f) - offsetof(struct run_args, gen)
/* clang-format off */
static const struct opt gen_list[] = {
    {.names = "-p --prompt", .value = "TEXT", .kind = OPT_STR, .off = GEN(prompt),
     .help = "the prompt (BOS is added when the vocabulary says so)"},
    {.names = "-f --file", .value = "FILE", .kind = OPT_STR, .off = GEN(file),
     .help = "read the prompt from a file"},
    {.names = "--chat", .kind = OPT_FLAG, .off = GEN(chat),
     .help = "talk to the model: one user message per line on stdin, rendered with its chat "
             "template; each turn prefills only what the cached conversation lacks; EOF (Ctrl-D) "
             "ends"},
    {.names = "-sys --system", .value = "TEXT", .kind = OPT_STR, .off = GEN(system),
     .help = "the system message for --chat"},
    {.names = "-n --n-predict", .value = "N", .kind = OPT_LONG, .off = GEN(n_predict), .lo = -1,
     .hi = 1 << 24, .def = "-1",
     .help = "tokens to generate (per turn with --chat); -1: until the end of text or context"},
    {.names = "-c --ctx-size --ctx", .value = "N|max", .kind = OPT_LONG, .off = GEN(n_ctx), .lo = 1,
     .hi = 1 << 24, .choices = "max", .word_value = CTX_MAX,
     .def = "the model's training context, or the largest that fits the RAM free when that does not",
     .help = "context length in tokens; max: the largest that fits the RAM free"},
};
/* clang-format on */
#undef GEN

#define SMP(f) offsetof(struct run_args, smp.f) - offsetof(struct run_args, smp)
/* clang-format off */
static const struct opt sampling_list[] = {
    {.names = "--temp --temperature", .value = "T", .kind = OPT_FLOAT, .off = SMP(temp), .lo = 0,
     .hi = 100, .def = "0.8", .help = "temperature; 0 is greedy"},
    {.names = "--top-k", .value = "K", .kind = OPT_LONG, .off = SMP(top_k), .lo = 0, .hi = 1 << 30,
     .def = "40", .help = "keep the K most likely tokens; 0 is off"},
    {.names = "--top-p", .value = "P", .kind = OPT_FLOAT, .off = SMP(top_p), .lo = 0, .hi = 1,
     .def = "0.95", .help = "nucleus sampling; 1 is off"},
    {.names = "--min-p", .value = "P", .kind = OPT_FLOAT, .off = SMP(min_p), .lo = 0, .hi = 1,
     .def = "0.05", .help = "drop the tokens below P times the best one's probability; 0 is off"},
    {.names = "--repeat-penalty", .value = "R", .kind = OPT_FLOAT, .off = SMP(repeat_penalty),
     .lo = 0.01, .hi = 100, .def = "1", .help = "penalty for the last 64 tokens; 1 is off"},
    {.names = "-s --seed", .value = "N", .kind = OPT_LONG, .off = SMP(seed), .lo = -1,
     .hi = 0x7fffffffL, .def = "-1", .help = "the sampling seed; -1: from the clock"},
};
/* clang-format on */
#undef SMP

static const struct opt_group gen_group      = OPT_GROUP("Generation", gen_list);
static const struct opt_group sampling_group = OPT_GROUP("Sampling", sampling_list);

/* clang-format off */
static const struct opt_use run_uses[] = {
    {&opts_model, offsetof(struct run_args, model)},
    {&gen_group, offsetof(struct run_args, gen)},
    {&sampling_group, offsetof(struct run_args, smp)},
    {&opts_threads, offsetof(struct run_args, threads)},
    {&opts_placement, offsetof(struct run_args, place)},
    {&opts_cache_types, offsetof(struct run_args, ct)},
};
/* clang-format on */

static const struct run_args run_defaults = {
    .gen = {.n_predict = -1},
    .smp = {.temp           = 0.8f,
            .top_k          = 40,
            .top_p          = 0.95f,
            .min_p          = 0.05f,
            .repeat_penalty = 1.0f,
            .seed           = -1},
};

const struct cmd_spec cmd_run_spec = {
    .name      = "run",
    .synopsis  = "hearth run -m MODEL -p PROMPT [options]\n"
                 "hearth run -m MODEL --chat [-sys SYSTEM] [options]",
    .about     = "Generates text: only the continuation on stdout, streamed as it is sampled; load "
                 "time, prefill and decode speed on stderr.",
    .uses      = run_uses,
    .n_uses    = sizeof run_uses / sizeof run_uses[0],
    .defaults  = &run_defaults,
    .args_size = sizeof(struct run_args),
};

/* Where generated text goes: stdout as it comes, and with --chat the reply kept for the
 * conversation. */
struct out {
    char *reply; /* malloc'd, NUL-terminated; NULL: not kept */
    size_t reply_len;
};

static bool put_text(void *user, const char *text, size_t len)
{
    struct out *o = user;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    if (o->reply) {
        char *r = realloc(o->reply, o->reply_len + len + 1);
        if (!r)
            return false;
        memcpy(r + o->reply_len, text, len);
        o->reply_len += len;
        r[o->reply_len] = 0;
        o->reply        = r;
    }
    return true;
}

/* Prefills ids and generates up to n_predict tokens after them (< 0: until end of generation or
 * a full context), printing the text; errors printed. Returns false on an error. */
static bool complete(struct gen *g, const hearth_token *ids, int32_t n, long n_predict,
                     struct out *o)
{
    char err[HEARTH_ERR_MAX];
    if (gen_prefill(g, ids, n, err, sizeof err) != HEARTH_OK) {
        fprintf(stderr, "hearth: %s\n", err);
        return false;
    }
    enum gen_next end;
    const enum hearth_status st =
        gen_run(g, (int32_t)n_predict, put_text, o, &end, err, sizeof err);
    if (st == HEARTH_ECANCELED)
        fprintf(stderr, "\nhearth: out of memory for the reply\n");
    else if (st != HEARTH_OK)
        fprintf(stderr, "\nhearth: %s\n", err);
    else if (end == GEN_FULL)
        fprintf(stderr, "\nhearth: context of %d tokens is full\n", g->n_ctx);
    return st == HEARTH_OK;
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
static int chat_loop(struct gen *g, const char *system, long n_predict)
{
    struct hearth_chat_msg *msgs = NULL;
    size_t n_msgs = 0, cap = 0;
    char *line      = NULL;
    size_t line_cap = 0;
    int rc          = EXIT_OK;
    const bool tty  = isatty(0);
/* clang-format off */
#define PUSH(r, c)                                                                    \
    do {                                                                              \
        if (n_msgs == cap) {                                                          \
            struct hearth_chat_msg *nm = realloc(msgs, (cap = cap ? 2 * cap : 8) * sizeof *msgs); \
            if (!nm) goto oom;                                                        \
            msgs = nm;                                                                \
        }                                                                             \
        msgs[n_msgs++] = (struct hearth_chat_msg){(r), (c)};                          \
    } while (0)
    /* clang-format on */
    if (system) {
        char *sys = strdup(system);
        if (!sys)
            goto oom;
        PUSH("system", sys);
    }
    fprintf(stderr, "hearth: chatting with the %s template; one message per line, EOF ends\n",
            hearth_chat_template_name(g->model));
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
        if (hearth_chat_render(g->model, msgs, n_msgs, &text, err, sizeof err)) {
            fprintf(stderr, "hearth: %s\n", err);
            rc = EXIT_RUNTIME;
            break;
        }
        size_t n_ids      = 0;
        hearth_token *ids = tokenize(g->model, text, &n_ids);
        free(text);
        if (!ids) {
            rc = EXIT_RUNTIME;
            break;
        }
        struct out o  = {.reply = strdup("")};
        const bool ok = o.reply && complete(g, ids, (int32_t)n_ids, n_predict, &o);
        free(ids);
        if (!ok) {
            free(o.reply);
            rc = EXIT_RUNTIME;
            break;
        }
        fputc('\n', stdout);
        fflush(stdout);
        PUSH("assistant", o.reply);
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
    struct run_args a;
    const enum opts_status st = opts_parse(&cmd_run_spec, &a, argc, argv);
    if (st != OPTS_GO)
        return opts_exit(st);
    const char *prompt = a.gen.prompt, *prompt_file = a.gen.file, *system = a.gen.system;
    const bool chat = a.gen.chat, ctx_max = a.gen.n_ctx == CTX_MAX;
    const long n_predict = a.gen.n_predict, threads = threads_or_default(&a.threads);
    long n_ctx                   = ctx_max ? 0 : a.gen.n_ctx;
    const struct placement place = a.place;
    const struct cache_types ct  = a.ct;
    if (chat ? (prompt || prompt_file) : (!prompt == !prompt_file)) {
        fprintf(stderr, "hearth run: needs one of -p PROMPT, -f FILE or --chat\n");
        return EXIT_USAGE;
    }
    if (system && !chat) {
        fprintf(stderr, "hearth run: -sys goes with --chat\n");
        return EXIT_USAGE;
    }
    char model_path[4096];
    const int mrc = model_args_path("run", &a.model, model_path, sizeof model_path);
    if (mrc != EXIT_OK)
        return mrc;

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
        prompt         = file_text;
    }

    int rc                        = EXIT_RUNTIME;
    struct hearth_model *model    = NULL;
    struct hearth_context *ctx    = NULL;
    struct hearth_sampler *smp    = NULL;
    struct gen g                  = {0};
    hearth_token *ids             = NULL;
    size_t n_ids                  = 0;
    double t0                     = now_s();
    struct hearth_model_params mp = hearth_model_default_params();
    mp.n_threads                  = (int)threads;
    placement_params(&place, &mp);
    if (hearth_model_load(model_path, &mp, &model, err, sizeof err)) {
        fprintf(stderr, "hearth: %s\n", err);
        goto out;
    }
    if (!chat && !(ids = tokenize(model, prompt, &n_ids)))
        goto out;
    struct hearth_context_params cp = hearth_context_default_params();
    cp.n_ctx                        = n_ctx > 0 ? (int32_t)n_ctx : hearth_model_n_ctx_train(model);
    cp.kv_type                      = (enum hearth_kv_type)ct.k;
    cp.kv_type_v                    = (enum hearth_kv_type)ct.v;
    if (hearth_context_new(model, &cp, &ctx, err, sizeof err)) {
        fprintf(stderr, "hearth: %s\n", err);
        goto out;
    }
    struct hearth_sampler_params sp = hearth_sampler_default_params();
    sp.temperature                  = a.smp.temp;
    sp.top_k                        = (int32_t)a.smp.top_k;
    sp.top_p                        = a.smp.top_p;
    sp.min_p                        = a.smp.min_p;
    sp.repeat_penalty               = a.smp.repeat_penalty;
    sp.seed                         = a.smp.seed >= 0 ? (uint64_t)a.smp.seed : (uint64_t)time(NULL);
    char serr[HEARTH_ERR_MAX];
    if (hearth_sampler_new(&sp, hearth_model_n_vocab(model), &smp, serr, sizeof serr) !=
        HEARTH_OK) {
        fprintf(stderr, "hearth: %s\n", serr);
        goto out;
    }
    if (gen_init(&g, model, ctx, smp, cp.n_ctx, cp.n_batch, err, sizeof err) != HEARTH_OK) {
        fprintf(stderr, "hearth: %s\n", err);
        goto out;
    }
    double t_loaded = now_s();
    if (chat) {
        rc = chat_loop(&g, system, n_predict);
    } else {
        for (size_t i = 0; i < n_ids; i++) /* the repetition penalty sees the prompt */
            hearth_sampler_accept(smp, ids[i]);
        struct out o = {0};
        if (!complete(&g, ids, (int32_t)n_ids, n_predict, &o))
            goto out;
        rc = EXIT_OK;
    }
    fprintf(stderr, "\nload: %.0f ms\n", (t_loaded - t0) * 1e3);
    fprintf(stderr, "prefill: %ld tokens in %.0f ms (%.1f tok/s)\n", g.n_prefilled,
            g.t_prefill * 1e3, g.t_prefill > 0 ? g.n_prefilled / g.t_prefill : 0.0);
    fprintf(stderr, "decode: %ld tokens in %.0f ms (%.1f tok/s)\n", g.n_generated, g.t_decode * 1e3,
            g.t_decode > 0 ? g.n_generated / g.t_decode : 0.0);
out:
    free(ids);
    free(file_text);
    gen_free(&g);
    hearth_sampler_free(smp);
    hearth_context_free(ctx);
    hearth_model_free(model);
    return rc;
}
