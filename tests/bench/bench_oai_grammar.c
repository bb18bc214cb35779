/*
 * bench_oai_grammar.c: what compiling a request's grammar costs the
 * server, on a real model's vocabulary and a real chat template. Builds
 * the grammar of three chat requests exactly as the server does (oai_parse
 * + oai_grammar): two tools forced (tool_choice "required"), the same tools
 * lazily ("auto"), and response_format json_object; prints the best and
 * median wall time of several compiles (each through a new cache, so
 * never a hit), the tables' size and a digest of their contents. Not part
 * of the suite:
 *   make build/tests/bench/bench_oai_grammar
 *   build/tests/bench/bench_oai_grammar MODEL.gguf [TEMPLATE.jinja] [REPS]
 * The template defaults to Qwen3's from ../shared/templates.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_int.h"
#include "hearth.h"
#include "serve/openai.h"
#include "chat/chat_template.h"
#include "util/clock.h"
#include "util/testutil.h"

/* clang-format off */
#define TOOLS                                                                                      \
    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":"     \
    "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"maxLength\":16},"        \
    "\"days\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":14},\"unit\":{\"enum\":[\"c\","      \
    "\"f\"]}},\"required\":[\"city\"],\"additionalProperties\":false}}},{\"type\":\"function\","   \
    "\"function\":{\"name\":\"add\",\"parameters\":{\"type\":\"object\",\"properties\":{\"a\":"    \
    "{\"type\":\"integer\",\"minimum\":-100,\"maximum\":100}},\"required\":[\"a\"]}}}]"
/* clang-format on */

/*
 * A digest of everything the masks are made of (every context's key,
 * accepted tokens and uncertain entries), to show that a faster
 * precompute left the tables as they were.
 */
static uint64_t digest(const struct grammar *g)
{
    uint64_t h = 1469598103934665603ull;
#define MIX(x) (h = (h ^ (uint64_t)(uint32_t)(x)) * 1099511628211ull)
    for (int32_t i = 0; i < g->n_ctxs; i++) {
        const struct gctx *c    = &g->ctxs[i];
        const struct gtokset *s = &g->accs[c->acc];
        MIX(c->p);
        MIX(c->q);
        MIX(s->n);
        for (int32_t t = 0; t < g->vocab->n; t++)
            if (s->bits ? s->bits[t >> 5] >> (t & 31) & 1 : false)
                MIX(t);
        for (int32_t k = 0; !s->bits && k < s->n; k++)
            MIX(s->list[k]);
        for (int32_t k = 0; k < c->n_unc; k++) {
            MIX(g->unc[c->unc0 + k].tok);
            MIX(g->unc[c->unc0 + k].k);
            MIX(g->unc[c->unc0 + k].lcp);
            MIX(c->by_tok[k]);
        }
    }
#undef MIX
    return h;
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Compiles the grammar of the chat request with fields extra reps times; prints the figures. */
static bool bench(const char *label, const char *extra, const struct chat_template *t,
                  const struct hearth_model *model, const struct grammar_vocab *gv, int reps)
{
    char body[4096];
    snprintf(body, sizeof body,
             "{\"messages\":[{\"role\":\"user\",\"content\":\"weather in Oslo?\"}],%s}", extra);
    struct oai_request r;
    struct oai_error e;
    if (!oai_parse(OAI_CHAT, body, strlen(body), &r, &e)) {
        fprintf(stderr, "%s: parse: %s\n", label, e.message);
        return false;
    }
    char *prompt = NULL;
    if (!oai_prompt(&r, t, model, &prompt, &e)) {
        fprintf(stderr, "%s: prompt: %s\n", label, e.message);
        oai_request_free(&r);
        return false;
    }
    double *ms = malloc((size_t)reps * sizeof *ms);
    bool ok    = ms != NULL;
    for (int i = 0; i < reps && ok; i++) {
        struct grammar *g = NULL;
        char **trig       = NULL;
        int32_t n_trig    = 0;
        /* a new cache each time: the figure is a compile, not a cache hit */
        struct grammar_cache *gc = grammar_cache_new(gv, 1);
        if (!gc) {
            fprintf(stderr, "out of memory\n");
            ok = false;
            break;
        }
        double t0 = now_s();
        ok        = oai_grammar(&r, t, gc, prompt, strlen(prompt), &g, &trig, &n_trig, &e);
        ms[i]     = (now_s() - t0) * 1e3;
        grammar_cache_free(gc);
        if (!ok) {
            fprintf(stderr, "%s: grammar: %s\n", label, e.message);
            break;
        }
        if (i == 0)
            printf("%-22s %6d positions %6d contexts %5d accepted sets %8lld uncertain  "
                   "tables %7.1f KiB  digest %016llx%s\n",
                   label, g->prog.n_elems, g->n_ctxs, g->n_accs, (long long)g->n_unc,
                   grammar_mem_bytes(g) / 1024.0, (unsigned long long)digest(g),
                   n_trig > 0 ? "  (lazy)" : "");
        grammar_unref(g);
        for (int32_t k = 0; k < n_trig; k++)
            free(trig[k]);
        free(trig);
    }
    if (ok) {
        qsort(ms, (size_t)reps, sizeof *ms, cmp_dbl);
        printf("%-22s compile best %8.1f ms  median %8.1f ms  (%d runs)\n", "", ms[0], ms[reps / 2],
               reps);
    }
    free(ms);
    free(prompt);
    oai_request_free(&r);
    return ok;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL.gguf [TEMPLATE.jinja] [REPS]\n", argv[0]);
        return 2;
    }
    const char *tpath =
        argc > 2 && argv[2][0] ? argv[2] : tu_shared("templates/Qwen-Qwen3-0.6B.jinja");
    int reps = argc > 3 ? atoi(argv[3]) : 5;
    if (!tpath || reps < 1) {
        fprintf(stderr, "no template (give one, or put shared/ beside the checkout)\n");
        return 2;
    }
    char err[HEARTH_ERR_MAX];
    struct hearth_model_params mp = hearth_model_default_params();
    struct hearth_model *model    = NULL;
    if (hearth_model_load(argv[1], &mp, &model, err, sizeof err) != HEARTH_OK) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    size_t n;
    char *src               = tu_read_file(tpath, &n);
    struct chat_template *t = NULL;
    if (!src || chat_template_new(NULL, src, tpath, NULL, &t, err, sizeof err) != HEARTH_OK) {
        fprintf(stderr, "%s: %s\n", tpath, src ? err : "cannot read");
        return 1;
    }
    free(src);
    double t0                = now_s();
    struct grammar_vocab *gv = grammar_vocab_from_model(model);
    printf("vocab: %d tokens (%d text), built in %.1f ms\n", gv->n, gv->n_text,
           (now_s() - t0) * 1e3);
    bool ok =
        bench("tools required", TOOLS ",\"tool_choice\":\"required\"", t, model, gv, reps) &&
        bench("tools auto", TOOLS ",\"tool_choice\":\"auto\"", t, model, gv, reps) &&
        bench("json_object", "\"response_format\":{\"type\":\"json_object\"}", t, model, gv, reps);
    grammar_vocab_free(gv);
    chat_template_free(t);
    hearth_model_free(model);
    return ok ? 0 : 1;
}
