/*
 * grammar.c: compiling a grammar (parse, refuse left recursion, precompute
 * the token sets), sharing it, and the plain recogniser grammar_accepts_string.
 */
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_int.h"
#include "util/errfmt.h"

enum hearth_status grammar_check(const char *text, size_t len, const char *root, char *err,
                                 size_t err_len)
{
    struct gprog pg;
    enum hearth_status st = gbnf_parse(text, len, root, &pg, err, err_len);
    if (st == HEARTH_OK)
        st = gprog_check_left_recursion(&pg, err, err_len);
    gprog_free(&pg);
    return st;
}

enum hearth_status grammar_compile(const char *text, size_t len, const char *root,
                                   const struct grammar_vocab *vocab, struct grammar **out,
                                   char *err, size_t err_len)
{
    *out             = NULL;
    struct grammar *g = calloc(1, sizeof *g);
    if (!g)
        return fail(HEARTH_ENOMEM, err, err_len, "out of memory");
    g->refs               = 1;
    g->vocab              = vocab;
    enum hearth_status st = gbnf_parse(text, len, root, &g->prog, err, err_len);
    if (st == HEARTH_OK)
        st = gprog_check_left_recursion(&g->prog, err, err_len);
    if (st == HEARTH_OK && vocab)
        st = grammar_precompute(g, err, err_len);
    if (st != HEARTH_OK) {
        grammar_precompute_free(g);
        gprog_free(&g->prog);
        free(g);
        return st;
    }
    *out = g;
    return HEARTH_OK;
}

struct grammar *grammar_ref(struct grammar *g)
{
    if (g)
        __atomic_add_fetch(&g->refs, 1, __ATOMIC_RELAXED);
    return g;
}

void grammar_unref(struct grammar *g)
{
    if (!g || __atomic_sub_fetch(&g->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    grammar_precompute_free(g);
    gprog_free(&g->prog);
    free(g);
}

bool grammar_start(const struct gprog *g, struct gpool *pool, struct ivec *out, bool *accept,
                   char *err, size_t err_len)
{
    struct ivec seeds = {0};
    bool ok           = true;
    for (int32_t a = g->rule_alt0[g->root]; a < g->rule_alt0[g->root + 1] && ok; a++)
        ok = ivec_push(&seeds, g->alts[a]) && ivec_push(&seeds, GS_EMPTY);
    int f = 0;
    out->n = 0;
    if (ok)
        ok = gstep_closure(g, pool, seeds.v, seeds.n / 2, true, out, &f, err, err_len);
    else
        set_err(err, err_len, "out of memory");
    ivec_free(&seeds);
    *accept = (f & GX_ACCEPT) != 0;
    return ok;
}

bool grammar_feed(const struct gprog *g, struct gpool *pool, struct ivec *cur, struct ivec *tmp,
                  bool *accept, const uint8_t *s, size_t n, char *err, size_t err_len)
{
    for (size_t i = 0; i < n; i++) {
        tmp->n = 0;
        int f  = 0;
        if (!gstep_byte(g, pool, cur->v, cur->n, s[i], tmp, &f, err, err_len))
            return false;
        struct ivec t = *cur;
        *cur          = *tmp;
        *tmp          = t;
        *accept       = (f & GX_ACCEPT) != 0;
        if (cur->n == 0) {
            if (i + 1 < n)
                *accept = false;
            return true;
        }
    }
    return true;
}

bool grammar_accepts_string(const struct grammar *g, const char *s, size_t n)
{
    struct gpool pool;
    gpool_init(&pool);
    struct ivec cur = {0}, tmp = {0};
    bool accept     = false;
    bool ok         = grammar_start(&g->prog, &pool, &cur, &accept, NULL, 0) &&
              grammar_feed(&g->prog, &pool, &cur, &tmp, &accept, (const uint8_t *)s, n, NULL, 0);
    ok = ok && accept;
    ivec_free(&cur);
    ivec_free(&tmp);
    gpool_free(&pool);
    return ok;
}
