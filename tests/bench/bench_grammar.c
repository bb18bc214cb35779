/*
 * bench_grammar.c: the grammar engine's cost on a JSON grammar (any
 * object, nested) over real vocabularies: compile + precompute time, the
 * bytes of the precomputed tables, and microseconds per token mask at
 * fixed places (inside a string, between keys, inside a number) and over
 * random walks. Not part of the suite (its name is not test_*): build with
 *   make build/tests/bench/bench_grammar && build/tests/bench/bench_grammar
 * Vocabularies come from ../shared/vocab (vocab-only GGUF files); the
 * largest shared one is 102k, so a ~152k one is made as the union of
 * several, which is as large and as varied as a Qwen-class vocabulary.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gguf/gguf.h"
#include "grammar/grammar_int.h"
#include "text/tokenizer.h"
#include "util/clock.h"
#include "util/rng.h"
#include "util/testutil.h"

static const char json_gbnf[] =
    "root   ::= object\n"
    "value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
    "object ::= \"{\" ws ( string \":\" ws value (\",\" ws string \":\" ws value)* )? \"}\" ws\n"
    "array  ::= \"[\" ws ( value (\",\" ws value)* )? \"]\" ws\n"
    "string ::= \"\\\"\" ( [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" "
    "[0-9a-fA-F]{4}) )* "
    "\"\\\"\" ws\n"
    "number ::= (\"-\"? ([0-9] | [1-9] [0-9]{0,15})) (\".\" [0-9]+)? ([eE] [-+]? [0-9]{1,3})? ws\n"
    "ws     ::= | \" \" | \"\\n\" [ \\t]{0,20}\n";

struct toklist {
    char **bytes;
    uint32_t *lens;
    uint8_t *kinds;
    int32_t n, cap;
};

static void add_tok(struct toklist *l, const char *b, uint32_t n, uint8_t kind)
{
    if (l->n == l->cap) {
        l->cap   = l->cap ? l->cap * 2 : 4096;
        l->bytes = realloc(l->bytes, (size_t)l->cap * sizeof *l->bytes);
        l->lens  = realloc(l->lens, (size_t)l->cap * sizeof *l->lens);
        l->kinds = realloc(l->kinds, (size_t)l->cap);
    }
    l->bytes[l->n] = malloc(n + 1);
    memcpy(l->bytes[l->n], b, n);
    l->lens[l->n]  = n;
    l->kinds[l->n] = kind;
    l->n++;
}

static int cmp_str(const void *a, const void *b, void *arg)
{
    const struct toklist *l = arg;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    uint32_t m = l->lens[x] < l->lens[y] ? l->lens[x] : l->lens[y];
    int c      = memcmp(l->bytes[x], l->bytes[y], m);
    return c ? c : (l->lens[x] > l->lens[y]) - (l->lens[x] < l->lens[y]);
}

/* Appends the tokens of the vocab-only file rel (under shared/) whose bytes are not yet in l. */
static bool load_into(struct toklist *l, const char *rel, int32_t limit)
{
    const char *path = tu_shared(rel);
    if (!path)
        return false;
    struct gguf_file *f = NULL;
    struct tokenizer *t = NULL;
    char err[HEARTH_ERR_MAX];
    if (gguf_open(path, &f, err, sizeof err) != HEARTH_OK)
        return false;
    enum hearth_status st = tokenizer_load(f, &t, err, sizeof err);
    gguf_close(f);
    if (st != HEARTH_OK)
        return false;
    /* dedupe against what is there: sort indexes of the existing tokens once */
    int32_t n0   = l->n;
    int32_t *idx = malloc(((size_t)n0 + 1) * sizeof *idx);
    for (int32_t i = 0; i < n0; i++)
        idx[i] = i;
    qsort_r(idx, (size_t)n0, sizeof *idx, cmp_str, l);
    for (int32_t i = 0; i < tokenizer_n_vocab(t) && l->n < limit; i++) {
        char buf[512];
        size_t k = tokenizer_decode_token(t, i, buf, sizeof buf);
        if (k > sizeof buf)
            continue;
        uint8_t kind = tokenizer_is_eog(t, i) ? GRAMMAR_TOKEN_EOG
                       : k == 0               ? GRAMMAR_TOKEN_CONTROL
                                              : GRAMMAR_TOKEN_TEXT;
        if (n0 > 0 && kind != GRAMMAR_TOKEN_TEXT)
            continue;
        /* binary search for the same bytes among the first n0 */
        add_tok(l, buf, (uint32_t)k, kind);
        int32_t lo = 0, hi = n0, me = l->n - 1;
        bool dup = false;
        while (lo < hi && !dup) {
            int32_t mid = (lo + hi) / 2;
            int c       = cmp_str(&idx[mid], &me, l);
            if (c == 0)
                dup = true;
            else if (c < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (dup) {
            free(l->bytes[me]);
            l->n--;
        }
    }
    free(idx);
    tokenizer_free(t);
    return true;
}

/* A token whose bytes are exactly byte c, or -1. */
static int32_t byte_token(const struct grammar_vocab *v, uint8_t c)
{
    for (int32_t t = 0; t < v->n; t++)
        if (v->kinds[t] == GRAMMAR_TOKEN_TEXT && v->lens[t] == 1 && gv_bytes(v, t)[0] == c)
            return t;
    return -1;
}

static double time_mask(struct grammar_matcher *m, uint32_t *mask, int reps, int32_t *n_allowed)
{
    char err[HEARTH_ERR_MAX];
    double t0 = now_s();
    for (int i = 0; i < reps; i++)
        *n_allowed = grammar_matcher_mask(m, mask, err, sizeof err);
    return (now_s() - t0) / reps * 1e6;
}

static void at_place(struct grammar *g, const struct grammar_vocab *v, uint32_t *mask,
                     const char *label, const char *prefix)
{
    struct grammar_matcher *m = grammar_matcher_new(g, NULL, 0);
    char err[HEARTH_ERR_MAX];
    for (const char *c = prefix; *c; c++) {
        int32_t t = byte_token(v, (uint8_t)*c);
        if (t < 0 || !grammar_matcher_accept(m, t, err, sizeof err)) {
            printf("  %-16s (cannot feed '%c')\n", label, *c);
            grammar_matcher_free(m);
            return;
        }
    }
    int32_t n;
    double us = time_mask(m, mask, 2000, &n);
    double t0 = now_s();
    int hits  = 0;
    for (int i = 0; i < 20000; i++)
        hits += grammar_matcher_allows(m, (hearth_token)(i * 7919 % v->n));
    double us_allows = (now_s() - t0) / 20000 * 1e6;
    printf("  %-16s %8.1f us/mask  %7d allowed  %6.2f us/allows (%d)\n", label, us, n, us_allows,
           hits > 0);
    grammar_matcher_free(m);
}

/* This thread's CPU seconds: on a shared machine a preemption would pass for a slow mask. */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void bench(const char *name, struct grammar_vocab *v)
{
    char err[HEARTH_ERR_MAX];
    struct grammar *g = NULL;
    double t0         = now_s();
    if (grammar_compile(json_gbnf, strlen(json_gbnf), NULL, v, NULL, &g, err, sizeof err) !=
        HEARTH_OK) {
        printf("%s: %s\n", name, err);
        return;
    }
    double t_compile = now_s() - t0;
    size_t words     = ((size_t)v->n + 31) / 32;
    uint32_t *mask   = malloc(words * 4);
    printf("%s: %d tokens; JSON grammar: %d positions, %d contexts, %d distinct accepted sets, "
           "%lld uncertain entries\n",
           name, v->n, g->prog.n_elems, g->n_ctxs, g->n_accs, (long long)g->n_unc);
    printf("  compile+precompute %.1f ms, tables %.1f KiB\n", t_compile * 1e3,
           grammar_mem_bytes(g) / 1024.0);
    at_place(g, v, mask, "start", "");
    at_place(g, v, mask, "in a string", "{\"ke");
    at_place(g, v, mask, "between keys", "{\"a\": 1, ");
    at_place(g, v, mask, "in a number", "{\"a\": 12");
    at_place(g, v, mask, "nested array", "{\"a\": [[{\"b\": [");

    uint64_t rng = 7;
    double total = 0, worst = 0;
    int steps   = 0;
    double *all = malloc(20 * 60 * sizeof *all);
    for (int w = 0; w < 20; w++) {
        struct grammar_matcher *m = grammar_matcher_new(g, NULL, 0);
        for (int s = 0; s < 60; s++) {
            double a  = cpu_s();
            int32_t n = grammar_matcher_mask(m, mask, err, sizeof err);
            double dt = (cpu_s() - a) * 1e6;
            total += dt;
            all[steps] = dt;
            worst      = dt > worst ? dt : worst;
            steps++;
            if (n <= 0 || grammar_matcher_must_end(m))
                break;
            int32_t want = (int32_t)(splitmix64(&rng) % (uint64_t)n), pick = -1;
            for (int32_t t = 0, k = 0; t < v->n && pick < 0; t++)
                if (mask[t >> 5] >> (t & 31) & 1 && k++ == want)
                    pick = t;
            if (v->kinds[pick] == GRAMMAR_TOKEN_EOG)
                break;
            grammar_matcher_accept(m, pick, err, sizeof err);
        }
        grammar_matcher_free(m);
    }
    qsort(all, (size_t)steps, sizeof *all, cmp_dbl);
    printf("  random walks     %8.1f us/mask (CPU) mean over %d steps, p50 %.1f, p99 %.1f, worst "
           "%.1f\n",
           total / steps, steps, all[steps / 2], all[steps * 99 / 100], worst);
    free(all);
    free(mask);
    grammar_unref(g);
}

int main(void)
{
    struct {
        const char *name;
        const char *files[9];
        int32_t limit;
    } sets[] = {
        {"deepseek-coder 32k", {"vocab/ggml-vocab-deepseek-coder.gguf"}, 1 << 30},
        {"deepseek-llm 102k", {"vocab/ggml-vocab-deepseek-llm.gguf"}, 1 << 30},
        {"union ~152k",
         {"vocab/ggml-vocab-deepseek-llm.gguf", "vocab/ggml-vocab-falcon.gguf",
          "vocab/ggml-vocab-starcoder.gguf", "vocab/ggml-vocab-gpt-2.gguf",
          "vocab/ggml-vocab-llama-spm.gguf", "vocab/ggml-vocab-refact.gguf",
          "vocab/ggml-vocab-gpt-neox.gguf", "vocab/ggml-vocab-phi-3.gguf"},
         151936},
    };
    for (size_t s = 0; s < sizeof sets / sizeof *sets; s++) {
        struct toklist l = {0};
        bool ok          = true;
        for (int f = 0; f < 9 && sets[s].files[f] && ok; f++)
            ok = load_into(&l, sets[s].files[f], sets[s].limit);
        if (!ok) {
            printf("%s: skipped (shared/vocab not found)\n", sets[s].name);
            continue;
        }
        struct grammar_vocab *v =
            grammar_vocab_new(l.n, (const char *const *)l.bytes, l.lens, l.kinds);
        bench(sets[s].name, v);
        grammar_vocab_free(v);
        for (int32_t i = 0; i < l.n; i++)
            free(l.bytes[i]);
        free(l.bytes);
        free(l.lens);
        free(l.kinds);
    }
    return 0;
}
