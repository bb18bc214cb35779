/*
 * analysis.c: static facts about a program: which rules match the empty
 * string, left recursion (refused), the bytes that can follow each rule,
 * and the contexts the token sets are keyed by.
 *
 * A context is (p, q): a terminal position p and the position q of the
 * node right below it on the stack (the return position of the call that
 * brought p's rule in; -1 when nothing is below). One level of the caller
 * is what makes the sets useful: inside `char*`, the loop that follows a
 * character sits in the parent, so keying by p alone would see every token
 * leave the rule after its first character.
 */
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_int.h"
#include "util/errfmt.h"

/* NULL when out of memory or past the budget (g->budget says which). */
static bool *nullable_rules(const struct gprog *g)
{
    bool *nul = calloc((size_t)g->n_rules + 1, sizeof *nul);
    if (!nul)
        return NULL;
    /* sweeps alternate direction, as in gprog_contexts */
    for (int pass = 0, changed = 1; changed; pass++) {
        changed = 0;
        if (!gbudget_spend(g->budget, (int64_t)g->n_rules + g->n_elems)) {
            free(nul);
            return NULL;
        }
        for (int32_t i = 0; i < g->n_rules; i++) {
            int32_t r = pass & 1 ? g->n_rules - 1 - i : i;
            if (nul[r])
                continue;
            for (int32_t a = g->rule_alt0[r]; a < g->rule_alt0[r + 1] && !nul[r]; a++) {
                int32_t p = g->alts[a];
                while (GE_KIND(g->elems[p]) == GE_REF && nul[GE_VAL(g->elems[p])])
                    p++;
                if (g->elems[p] == GE_END) {
                    nul[r]  = true;
                    changed = 1;
                }
            }
        }
    }
    return nul;
}

enum hearth_status gprog_check_left_recursion(const struct gprog *g, char *err, size_t err_len)
{
    bool *nul     = nullable_rules(g);
    uint8_t *mark = calloc((size_t)g->n_rules + 1, 1); /* 0 new, 1 on the path, 2 done */
    /* iterative DFS: each frame is a rule and the position it has scanned up to */
    int32_t *rule         = malloc(((size_t)g->n_rules + 1) * sizeof *rule);
    int32_t *alt          = malloc(((size_t)g->n_rules + 1) * sizeof *alt);
    int32_t *pos          = malloc(((size_t)g->n_rules + 1) * sizeof *pos);
    enum hearth_status st = HEARTH_OK;
    if (!nul || !mark || !rule || !alt || !pos) {
        st = fail(HEARTH_ENOMEM, err, err_len, "out of memory");
        goto done;
    }
    for (int32_t r0 = 0; r0 < g->n_rules && st == HEARTH_OK; r0++) {
        if (mark[r0])
            continue;
        int32_t top = 0;
        rule[0]     = r0;
        alt[0]      = g->rule_alt0[r0];
        pos[0]      = -1;
        mark[r0]    = 1;
        while (top >= 0) {
            if (!gbudget_spend(g->budget, 1)) {
                st = HEARTH_EINVAL;
                break;
            }
            int32_t r = rule[top];
            /* the next reference of r reachable without consuming a byte */
            int32_t next = -1;
            while (next < 0 && alt[top] < g->rule_alt0[r + 1]) {
                int32_t p = pos[top] < 0 ? g->alts[alt[top]] : pos[top];
                int32_t e = g->elems[p];
                if (GE_KIND(e) == GE_REF) {
                    next = GE_VAL(e);
                    /* continue past it only if it can match nothing */
                    pos[top] = nul[next] ? p + 1 : -1;
                    if (!nul[next])
                        alt[top]++;
                } else {
                    alt[top]++;
                    pos[top] = -1;
                }
            }
            if (next < 0) {
                mark[r] = 2;
                top--;
                continue;
            }
            if (mark[next] == 1) {
                /* name a rule the user wrote when the cycle has one, not a helper */
                int32_t name = next;
                for (int32_t i = top; i >= 0 && rule[i] != next && strchr(g->rule_names[name], '_');
                     i--)
                    name = rule[i];
                st = fail(HEARTH_EINVAL, err, err_len,
                          "rule '%s' is left-recursive (it can reach itself without consuming "
                          "a character)",
                          g->rule_names[name]);
                break;
            }
            if (mark[next] == 0) {
                mark[next] = 1;
                top++;
                rule[top] = next;
                alt[top]  = g->rule_alt0[next];
                pos[top]  = -1;
            }
        }
    }
done:
    free(nul);
    free(mark);
    free(rule);
    free(alt);
    free(pos);
    return st;
}

static void set_or(struct gbyteset *a, const struct gbyteset *b, bool *changed)
{
    for (int i = 0; i < 4; i++) {
        uint64_t w = a->w[i] | b->w[i];
        if (w != a->w[i]) {
            a->w[i]  = w;
            *changed = true;
        }
    }
}

/* FIRST of the sequence from p into *out; returns whether it can match nothing. */
static bool seq_first(const struct gprog *g, const struct gbyteset *first, const bool *nul,
                      int32_t p, struct gbyteset *out, bool *changed)
{
    for (;; p++) {
        int32_t e = g->elems[p];
        if (e == GE_END)
            return true;
        if (GE_KIND(e) == GE_TERM) {
            set_or(out, &g->sets[GE_VAL(e)], changed);
            return false;
        }
        set_or(out, &first[GE_VAL(e)], changed);
        if (!nul[GE_VAL(e)])
            return false;
    }
}

static enum hearth_status too_many_states(const struct gprog *g, char *err, size_t err_len)
{
    const char *fmt = "the grammar would need more than %d parser states";
    if (g->budget)
        gbudget_fail(g->budget, HEARTH_EINVAL, fmt, GRAMMAR_MAX_CONTEXTS);
    return fail(HEARTH_EINVAL, err, err_len, fmt, GRAMMAR_MAX_CONTEXTS);
}

static int cmp_key(const void *a, const void *b)
{
    const struct gctx_key *x = a, *y = b;
    if (x->p != y->p)
        return x->p < y->p ? -1 : 1;
    return x->q < y->q ? -1 : x->q > y->q;
}

enum hearth_status gprog_contexts(const struct gprog *g, struct gctx_key **keys_out,
                                  int32_t *n_keys_out, struct gbyteset **follow_out, char *err,
                                  size_t err_len)
{
    int32_t R               = g->n_rules;
    bool *nul               = nullable_rules(g);
    struct gbyteset *first  = calloc((size_t)R + 1, sizeof *first);
    struct gbyteset *follow = calloc((size_t)R + 1, sizeof *follow);
    struct ivec *ret        = calloc((size_t)R + 1, sizeof *ret); /* return positions per rule */
    struct ivec *tail_from  = calloc((size_t)R + 1, sizeof *tail_from); /* R' tail-calls R */
    int32_t *n_terms        = calloc((size_t)R + 1, sizeof *n_terms);   /* terminal positions */
    uint32_t *stamp         = calloc((size_t)g->n_elems + 2, sizeof *stamp); /* [q + 1] */
    uint32_t gen            = 0;
    struct gctx_key *keys   = NULL;
    int64_t n_keys = 0, cap_keys = 0;
    enum hearth_status st = HEARTH_ENOMEM;
    if (!nul || !first || !follow || !ret || !tail_from || !n_terms || !stamp)
        goto done;
    bool changed;
    /* who can lie right below a rule's positions: return positions, passed down tail calls */
    if (!ivec_push(&ret[g->root], -1))
        goto done;
    for (int32_t p = 0; p < g->n_elems; p++) {
        if (GE_KIND(g->elems[p]) != GE_REF)
            continue;
        int32_t r = GE_VAL(g->elems[p]);
        if (g->elems[p + 1] == GE_END) {
            if (!ivec_push(&tail_from[g->pos_rule[p]], r))
                goto done;
        } else if (!ivec_push(&ret[r], p + 1)) {
            goto done;
        }
    }
    /* the lists hold no duplicate yet: each return position is one reference's own */
    for (int32_t p = 0; p < g->n_elems; p++)
        if (GE_KIND(g->elems[p]) == GE_TERM)
            n_terms[g->pos_rule[p]]++;
    int64_t n_ctx = 0; /* the contexts the lists make: a return position of r, per terminal of r */
    for (int32_t r = 0; r < R; r++)
        n_ctx += (int64_t)n_terms[r] * ret[r].n;
    /* passed down tail calls to a fixpoint; stamp marks what dst holds: a copy costs its lengths */
    changed = true;
    for (int pass = 0; changed && n_ctx <= GRAMMAR_MAX_CONTEXTS; pass++) {
        changed = false;
        for (int32_t i = 0; i < R && n_ctx <= GRAMMAR_MAX_CONTEXTS; i++) {
            int32_t r = pass & 1 ? R - 1 - i : i;
            for (int32_t t = 0; t < tail_from[r].n && n_ctx <= GRAMMAR_MAX_CONTEXTS; t++) {
                int32_t d        = tail_from[r].v[t];
                struct ivec *dst = &ret[d];
                if (!gbudget_spend(g->budget, 1 + (int64_t)dst->n + ret[r].n)) {
                    st = HEARTH_EINVAL;
                    goto done_err;
                }
                if (++gen == 0) {
                    memset(stamp, 0, ((size_t)g->n_elems + 2) * sizeof *stamp);
                    gen = 1;
                }
                for (int32_t j = 0; j < dst->n; j++)
                    stamp[dst->v[j] + 1] = gen;
                for (int32_t i = 0; i < ret[r].n; i++) {
                    int32_t q = ret[r].v[i];
                    if (stamp[q + 1] == gen)
                        continue;
                    if (!ivec_push(dst, q))
                        goto done;
                    stamp[q + 1] = gen;
                    n_ctx += n_terms[d];
                    changed = true;
                }
            }
        }
    }
    if (n_ctx > GRAMMAR_MAX_CONTEXTS) {
        st = too_many_states(g, err, err_len);
        goto done_err;
    }
    /* FIRST and FOLLOW, once the contexts are known to be within bounds. The sweeps alternate
       direction: a chain of n rules (an unrolled {0,n}) passes its sets along in one sweep or
       two, where sweeps one way only would take n when the chain runs the other way. */
    changed = true;
    for (int pass = 0; changed; pass++) {
        changed = false;
        if (!gbudget_spend(g->budget, (int64_t)R + g->n_elems)) {
            st = HEARTH_EINVAL;
            goto done_err;
        }
        for (int32_t i = 0; i < R; i++) {
            int32_t r = pass & 1 ? R - 1 - i : i;
            for (int32_t a = g->rule_alt0[r]; a < g->rule_alt0[r + 1]; a++)
                seq_first(g, first, nul, g->alts[a], &first[r], &changed);
        }
    }
    changed = true;
    for (int pass = 0; changed; pass++) {
        changed = false;
        if (!gbudget_spend(g->budget, g->n_elems)) {
            st = HEARTH_EINVAL;
            goto done_err;
        }
        for (int32_t i = 0; i < g->n_elems; i++) {
            int32_t p = pass & 1 ? g->n_elems - 1 - i : i;
            if (GE_KIND(g->elems[p]) != GE_REF)
                continue;
            int32_t r = GE_VAL(g->elems[p]);
            if (seq_first(g, first, nul, p + 1, &follow[r], &changed))
                set_or(&follow[r], &follow[g->pos_rule[p]], &changed);
        }
    }
    for (int32_t p = 0; p < g->n_elems; p++) {
        if (GE_KIND(g->elems[p]) != GE_TERM)
            continue;
        const struct ivec *v = &ret[g->pos_rule[p]];
        for (int32_t i = 0; i < v->n; i++) {
            if (n_keys == cap_keys) {
                cap_keys            = cap_keys ? cap_keys * 2 : 256;
                struct gctx_key *k2 = realloc(keys, (size_t)cap_keys * sizeof *k2);
                if (!k2)
                    goto done;
                keys = k2;
            }
            keys[n_keys++] = (struct gctx_key){p, v->v[i]};
        }
    }
    if (n_keys > 1)
        qsort(keys, (size_t)n_keys, sizeof *keys, cmp_key);
    *keys_out   = keys;
    *n_keys_out = (int32_t)n_keys;
    *follow_out = follow;
    keys        = NULL;
    follow      = NULL;
    st          = HEARTH_OK;
done:
    if (st == HEARTH_ENOMEM)
        set_err(err, err_len, "out of memory");
done_err:
    free(nul);
    free(first);
    free(follow);
    free(keys);
    if (ret)
        for (int32_t r = 0; r < R; r++)
            ivec_free(&ret[r]);
    if (tail_from)
        for (int32_t r = 0; r < R; r++)
            ivec_free(&tail_from[r]);
    free(ret);
    free(tail_from);
    free(n_terms);
    free(stamp);
    return st;
}
