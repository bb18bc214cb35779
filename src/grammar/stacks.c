/*
 * stacks.c: parse stacks as interned nodes, and the two moves of a
 * byte-level pushdown recogniser: closure (expand references and ended
 * alternatives until every stack's top is a terminal) and one byte's step.
 *
 * A reference in tail position pushes no return node (its continuation is
 * the caller's own), so right recursion, which every repetition becomes,
 * keeps stacks flat. Closure visits each node once per call, so equal
 * stacks reached many ways cost one visit; bounds (GPOOL_MAX_NODES,
 * GRAMMAR_MAX_DEPTH, GRAMMAR_MAX_STACKS) turn runaway growth into an error.
 */
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_int.h"
#include "util/errfmt.h"

void gpool_init(struct gpool *p)
{
    memset(p, 0, sizeof *p);
}

void gpool_free(struct gpool *p)
{
    free(p->nodes);
    free(p->table);
    free(p->stamp);
    ivec_free(&p->work);
    ivec_free(&p->seeds);
    memset(p, 0, sizeof *p);
}

static uint32_t node_hash(int32_t pos, int32_t parent)
{
    uint64_t x = ((uint64_t)(uint32_t)pos << 32 | (uint32_t)parent) * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(x >> 32);
}

void gpool_reset(struct gpool *p)
{
    if (!p->table)
        return;
    if ((uint32_t)p->n * 8 < p->mask) {
        for (int32_t i = 0; i < p->n; i++) {
            uint32_t j = node_hash(p->nodes[i].pos, p->nodes[i].parent) & p->mask;
            while (p->table[j] != i)
                j = (j + 1) & p->mask;
            p->table[j] = -1;
        }
    } else {
        memset(p->table, 0xff, ((size_t)p->mask + 1) * sizeof *p->table);
    }
    p->n = 0;
}

static bool grow_table(struct gpool *p)
{
    uint32_t size = p->table ? (p->mask + 1) * 2 : 1024;
    int32_t *t    = malloc(size * sizeof *t);
    if (!t)
        return false;
    memset(t, 0xff, size * sizeof *t);
    for (int32_t i = 0; i < p->n; i++) {
        uint32_t j = node_hash(p->nodes[i].pos, p->nodes[i].parent) & (size - 1);
        while (t[j] >= 0)
            j = (j + 1) & (size - 1);
        t[j] = i;
    }
    free(p->table);
    p->table = t;
    p->mask  = size - 1;
    return true;
}

int32_t gpool_intern(struct gpool *p, int32_t pos, int32_t parent, char *err, size_t err_len)
{
    if (!p->table || (uint32_t)(p->n + 1) * 2 > p->mask + 1) {
        if (!grow_table(p)) {
            set_err(err, err_len, "out of memory");
            return -1;
        }
    }
    uint32_t j = node_hash(pos, parent) & p->mask;
    for (; p->table[j] >= 0; j = (j + 1) & p->mask) {
        const struct gnode *nd = &p->nodes[p->table[j]];
        if (nd->pos == pos && nd->parent == parent)
            return p->table[j];
    }
    if (p->n >= GPOOL_MAX_NODES) {
        set_err(err, err_len, "the grammar needs more than %d parse stack nodes", GPOOL_MAX_NODES);
        return -1;
    }
    int32_t depth = parent >= 0 ? p->nodes[parent].depth + 1 : 1;
    if (depth > GRAMMAR_MAX_DEPTH) {
        set_err(err, err_len, "a parse stack is nested deeper than %d", GRAMMAR_MAX_DEPTH);
        return -1;
    }
    if (p->n == p->cap) {
        int32_t cap      = p->cap ? p->cap * 2 : 1024;
        struct gnode *nd = realloc(p->nodes, (size_t)cap * sizeof *nd);
        if (!nd) {
            set_err(err, err_len, "out of memory");
            return -1;
        }
        p->nodes     = nd;
        uint32_t *st = realloc(p->stamp, (size_t)cap * sizeof *st);
        if (!st) {
            set_err(err, err_len, "out of memory");
            return -1;
        }
        memset(st + p->cap, 0, (size_t)(cap - p->cap) * sizeof *st);
        p->stamp = st;
        p->cap   = cap;
    }
    p->nodes[p->n] = (struct gnode){pos, parent, depth};
    p->stamp[p->n] = 0;
    p->table[j]    = p->n;
    return p->n++;
}

static bool visit(struct gpool *p, int32_t id, int *flags, char *err, size_t err_len)
{
    if (id == GS_EMPTY) {
        *flags |= GX_ACCEPT;
        return true;
    }
    if (id == GS_BOTTOM) {
        *flags |= GX_POP;
        return true;
    }
    if (p->stamp[id] == p->gen)
        return true;
    p->stamp[id] = p->gen;
    if (!ivec_push(&p->work, id)) {
        set_err(err, err_len, "out of memory");
        return false;
    }
    return true;
}

/* Visits the stack (pos, parent), popping at once when pos ends its alternative. */
static bool visit_pair(const struct gprog *g, struct gpool *p, int32_t pos, int32_t parent,
                       int *flags, char *err, size_t err_len)
{
    if (g->elems[pos] == GE_END)
        return visit(p, parent, flags, err, err_len);
    int32_t id = gpool_intern(p, pos, parent, err, err_len);
    return id >= 0 && visit(p, id, flags, err, err_len);
}

bool gstep_closure(const struct gprog *g, struct gpool *p, const int32_t *seeds, int32_t n_seeds,
                   bool seed_pairs, struct ivec *out, int *flags, char *err, size_t err_len)
{
    if (++p->gen == 0) { /* the stamps wrapped: forget them all */
        memset(p->stamp, 0, (size_t)p->cap * sizeof *p->stamp);
        p->gen = 1;
    }
    p->work.n  = 0;
    int32_t n0 = out->n;
    bool ok    = true;
    for (int32_t i = 0; i < n_seeds && ok; i++)
        ok = seed_pairs ? visit_pair(g, p, seeds[2 * i], seeds[2 * i + 1], flags, err, err_len)
                        : visit(p, seeds[i], flags, err, err_len);
    while (ok && p->work.n > 0) {
        if (!gbudget_spend(g->budget, GBUDGET_VISIT)) {
            set_err(err, err_len, "%s", g->budget->msg);
            return false;
        }
        int32_t id     = p->work.v[--p->work.n];
        int32_t pos    = p->nodes[id].pos;
        int32_t parent = p->nodes[id].parent;
        int32_t e      = g->elems[pos];
        if (GE_KIND(e) == GE_TERM) {
            if (out->n - n0 >= GRAMMAR_MAX_STACKS) {
                set_err(err, err_len, "the grammar needs more than %d parse stacks at once",
                        GRAMMAR_MAX_STACKS);
                ok = false;
            } else {
                ok = ivec_push(out, id);
                if (!ok)
                    set_err(err, err_len, "out of memory");
            }
        } else if (GE_KIND(e) == GE_REF) {
            int32_t r   = GE_VAL(e);
            int32_t ret = parent;
            if (g->elems[pos + 1] != GE_END) {
                ret = gpool_intern(p, pos + 1, parent, err, err_len);
                ok  = ret >= 0;
            }
            for (int32_t a = g->rule_alt0[r]; ok && a < g->rule_alt0[r + 1]; a++)
                ok = visit_pair(g, p, g->alts[a], ret, flags, err, err_len);
        } else {
            ok = visit(p, parent, flags, err, err_len);
        }
    }
    return ok;
}

bool gstep_byte(const struct gprog *g, struct gpool *p, const int32_t *in, int32_t n, unsigned b,
                struct ivec *out, int *flags, char *err, size_t err_len)
{
    p->seeds.n = 0;
    if (!gbudget_spend(g->budget, n)) {
        set_err(err, err_len, "%s", g->budget->msg);
        return false;
    }
    for (int32_t i = 0; i < n; i++) {
        const struct gnode *nd = &p->nodes[in[i]];
        if (!gbs_has(&g->sets[GE_VAL(g->elems[nd->pos])], b))
            continue;
        if (!ivec_push(&p->seeds, nd->pos + 1) || !ivec_push(&p->seeds, nd->parent)) {
            set_err(err, err_len, "out of memory");
            return false;
        }
    }
    if (p->seeds.n == 0)
        return true;
    return gstep_closure(g, p, p->seeds.v, p->seeds.n / 2, true, out, flags, err, err_len);
}
