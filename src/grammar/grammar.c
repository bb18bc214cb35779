/*
 * grammar.c: compiling a grammar (parse, refuse left recursion, precompute
 * the token sets), sharing it, and the plain recogniser grammar_accepts_string.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_int.h"
#include "util/errfmt.h"

void gbudget_init(struct gbudget *b, const atomic_int *cancel)
{
    memset(b, 0, sizeof *b);
    b->max_work  = GRAMMAR_MAX_WORK;
    b->max_walk  = GRAMMAR_MAX_WALK;
    b->next_poll = GBUDGET_POLL;
    b->cancel    = cancel;
}

bool gbudget_fail(struct gbudget *b, enum hearth_status st, const char *fmt, ...)
{
    if (b->st == HEARTH_OK) {
        b->st = st;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(b->msg, sizeof b->msg, fmt, ap);
        va_end(ap);
    }
    b->next_poll = 0; /* every later spend comes back here, and fails */
    return false;
}

bool gbudget_check(struct gbudget *b)
{
    if (b->st != HEARTH_OK)
        return false;
    if (b->cancel && atomic_load_explicit(b->cancel, memory_order_relaxed))
        return gbudget_fail(b, HEARTH_ECANCELED, "the grammar's compile was cancelled");
    if (b->work > b->max_work)
        return gbudget_fail(b, HEARTH_EINVAL,
                            "the grammar is too costly to compile: it would need more than %lld "
                            "analysis steps",
                            (long long)b->max_work);
    if (b->walk > b->max_walk)
        return gbudget_fail(b, HEARTH_EINVAL,
                            "the grammar is too costly to compile: its token sets would need more "
                            "than %lld steps over the vocabulary",
                            (long long)b->max_walk);
    b->next_poll = b->work + b->walk + GBUDGET_POLL;
    return true;
}

/* The budget's verdict, when it has one, over whatever a deeper layer made of its failure. */
static enum hearth_status budget_status(const struct gbudget *b, enum hearth_status st, char *err,
                                        size_t err_len)
{
    if (b->st == HEARTH_OK)
        return st;
    set_err(err, err_len, "%s", b->msg);
    return b->st;
}

enum hearth_status grammar_check(const char *text, size_t len, const char *root, char *err,
                                 size_t err_len)
{
    struct gprog pg;
    struct gbudget b;
    gbudget_init(&b, NULL);
    enum hearth_status st = gbnf_parse(text, len, root, &pg, err, err_len);
    pg.budget             = &b;
    if (st == HEARTH_OK)
        st = budget_status(&b, gprog_check_left_recursion(&pg, err, err_len), err, err_len);
    gprog_free(&pg);
    return st;
}

/*
 * Whether a matcher can start: the stacks at the root's start within
 * GRAMMAR_MAX_STACKS (a 100,000-way alternation has 100,000 of them), so
 * that a compiled grammar never fails at its first step, where the
 * failure would be the server's rather than the grammar's.
 */
static enum hearth_status check_start(const struct gprog *g, char *err, size_t err_len)
{
    struct gpool pool;
    gpool_init(&pool);
    struct ivec out = {0};
    bool accept     = false;
    char why[256]   = "";
    bool ok         = grammar_start(g, &pool, &out, &accept, why, sizeof why);
    ivec_free(&out);
    gpool_free(&pool);
    if (ok)
        return HEARTH_OK;
    if (!strcmp(why, "out of memory"))
        return fail(HEARTH_ENOMEM, err, err_len, "out of memory");
    return fail(HEARTH_EINVAL, err, err_len, "at its start, %s", why);
}

enum hearth_status grammar_compile(const char *text, size_t len, const char *root,
                                   const struct grammar_vocab *vocab, const atomic_int *cancel,
                                   struct grammar **out, char *err, size_t err_len)
{
    *out              = NULL;
    struct grammar *g = calloc(1, sizeof *g);
    if (!g)
        return fail(HEARTH_ENOMEM, err, err_len, "out of memory");
    struct gbudget b;
    gbudget_init(&b, cancel);
    g->refs               = 1;
    g->vocab              = vocab;
    enum hearth_status st = gbnf_parse(text, len, root, &g->prog, err, err_len);
    g->prog.budget        = &b;
    if (st == HEARTH_OK && !gbudget_check(&b))
        st = HEARTH_EINVAL;
    if (st == HEARTH_OK)
        st = gprog_check_left_recursion(&g->prog, err, err_len);
    if (st == HEARTH_OK)
        st = check_start(&g->prog, err, err_len);
    if (st == HEARTH_OK && vocab)
        st = grammar_precompute(g, err, err_len);
    st             = budget_status(&b, st, err, err_len);
    g->prog.budget = NULL; /* the matchers that share it run unbounded by it */
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
    int f  = 0;
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
    bool accept = false;
    bool ok     = grammar_start(&g->prog, &pool, &cur, &accept, NULL, 0) &&
              grammar_feed(&g->prog, &pool, &cur, &tmp, &accept, (const uint8_t *)s, n, NULL, 0);
    ok = ok && accept;
    ivec_free(&cur);
    ivec_free(&tmp);
    gpool_free(&pool);
    return ok;
}
