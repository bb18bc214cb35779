/*
 * precompute.c: for every context (p, q) (analysis.c), which tokens the
 * stack [p, q] accepts whatever lies below it, and which depend on it.
 *
 * The walk runs the local stack [p, q, BOTTOM] over the vocabulary's
 * trie (vocab.c), one byte step per live node and none under a dead one,
 * so its cost follows the live part of the trie, not the vocabulary. The
 * steps come from a DFA shared by all contexts (dfa.c): after its first
 * run a step is a table read, and a context accepting most of a 152k
 * vocabulary walks its 540k nodes in about a millisecond. Per token:
 *   - ACCEPTED when some path is still alive after its last byte, or pops
 *     out of q exactly there: the token is then consumed whatever the
 *     parent is (every rule has an alternative, so a popped-to parent
 *     always goes on or has matched).
 *   - UNCERTAIN when paths only pop out of q with bytes left: the rest is
 *     for the real parent to judge at run time. A pop after k bytes is
 *     kept only when byte k can follow q's rule at all (its FOLLOW set).
 *   - REJECTED otherwise.
 * Accepted sets are deduplicated and stored as bitsets when dense, sorted
 * lists when sparse; uncertain entries sorted by the rest of their bytes,
 * so the run-time check walks them as a trie too.
 */
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_int.h"
#include "util/errfmt.h"

struct walk {
    const struct gprog *g;
    const struct grammar_vocab *v;
    struct gdfa dfa;
    int32_t *state; /* [max_len + 1] the DFA state at each depth of the current trie path */
    int *flags;     /* [max_len + 1] its GX_* */
    bool *popped;   /* [max_len + 1] whether some depth 1..d has GX_POP */
    int32_t *acc;   /* [n_text] accepted tokens of the context, in trie order */
    int32_t n_acc;
    struct gunc *unc; /* uncertain entries of the context */
    int64_t n_unc, cap_unc;
    uint32_t *mark; /* [(n_vocab + 31) / 32] scratch: the accepted set as bits, else zero */
};

static bool add_unc(struct walk *w, int32_t tok, uint32_t k)
{
    if (w->n_unc == w->cap_unc) {
        int64_t cap    = w->cap_unc ? w->cap_unc * 2 : 1024;
        struct gunc *u = realloc(w->unc, (size_t)cap * sizeof *u);
        if (!u)
            return false;
        w->unc     = u;
        w->cap_unc = cap;
    }
    w->unc[w->n_unc++] = (struct gunc){tok, k, 0};
    return true;
}

/* Entries (tok, k) for the tokens order[lo..hi). */
static bool add_range(struct walk *w, int32_t lo, int32_t hi, uint32_t k)
{
    for (int32_t t = lo; t < hi; t++)
        if (!add_unc(w, w->v->order[t], k))
            return false;
    return true;
}

/*
 * The uncertain entries of the rejected tokens order[k0..hi) at trie node
 * i (depth d): those ending there, or (below) those under it. A pop at
 * depth k < d is followed by the prefix's own byte k, the same for all of
 * them; a pop at d (which only the tokens below see) by each child's byte.
 */
static bool add_pops(struct walk *w, int32_t i, uint32_t d, int32_t k0, int32_t hi, bool below,
                     const struct gbyteset *follow)
{
    const struct grammar_vocab *v = w->v;
    const struct gtrie_node *t    = v->trie;
    const uint8_t *b              = gv_bytes(v, v->order[t[i].lo]);
    for (uint32_t k = 1; k < d; k++)
        if ((w->flags[k] & GX_POP) && gbs_has(follow, b[k]) && !add_range(w, k0, hi, k))
            return false;
    if (!below || !(w->flags[d] & GX_POP))
        return true;
    for (uint32_t c = (uint32_t)i + 1; c < t[i].end; c = t[c].end) {
        int32_t c_hi = t[c].end < (uint32_t)v->n_trie ? t[t[c].end].lo : v->n_text;
        if (gbs_has(follow, t[c].db & 255) && !add_range(w, t[c].lo, c_hi, d))
            return false;
    }
    return true;
}

/*
 * The walk of one context over the vocabulary trie (vocab.c), the DFA
 * giving the state at each node from its parent's: a token ending at a
 * node is accepted when a stack is alive there or the step popped or
 * matched the root; a node with no stack alive ends the walk of its
 * subtree, whose tokens only keep the pops on their path.
 */
static enum hearth_status walk_ctx(struct walk *w, struct gctx_key key,
                                   const struct gbyteset *follow, char *err, size_t err_len)
{
    const struct grammar_vocab *v = w->v;
    const struct gtrie_node *t    = v->trie;
    const int32_t *order          = v->order;
    w->n_acc                      = 0;
    w->n_unc                      = 0;
    w->state[0]                   = gdfa_start(&w->dfa, key.p, key.q, err, err_len);
    if (w->state[0] < 0)
        return w->state[0] == GDFA_ENOMEM ? HEARTH_ENOMEM : HEARTH_EINVAL;
    w->flags[0]       = 0;
    w->popped[0]      = false;
    int64_t n_visited = 0; /* spent once at the end: one walk is at most the trie, a millisecond */
    for (int32_t i = 0; i < v->n_trie; n_visited++) {
        uint32_t d = gtrie_depth(&t[i]);
        int32_t s  = gdfa_step(&w->dfa, w->state[d - 1], t[i].db & 255, err, err_len);
        if (s < 0)
            return s == GDFA_ENOMEM ? HEARTH_ENOMEM : HEARTH_EINVAL;
        int f        = w->dfa.flags[s];
        w->state[d]  = s;
        w->flags[d]  = f;
        w->popped[d] = w->popped[d - 1] || (f & GX_POP);
        bool alive   = gdfa_alive(&w->dfa, s);
        int32_t k    = t[i].lo;
        if (alive && !(t[i].db & GT_ENDS)) { /* most nodes: nothing to record */
            i++;
            continue;
        }
        int32_t hi = t[i].end < (uint32_t)v->n_trie ? t[t[i].end].lo : v->n_text;
        if ((t[i].db & GT_ENDS) && (alive || (f & (GX_POP | GX_ACCEPT)))) {
            for (; k < hi && v->lens[order[k]] == d; k++)
                w->acc[w->n_acc++] = order[k];
        } else if (t[i].db & GT_ENDS) {
            int32_t k0 = k;
            while (k < hi && v->lens[order[k]] == d)
                k++;
            if (w->popped[d] && !add_pops(w, i, d, k0, k, false, follow))
                return fail(HEARTH_ENOMEM, err, err_len, "out of memory");
        }
        if (alive) {
            i++;
            continue;
        }
        /* dead after d bytes: so is every token below */
        if (w->popped[d] && k < hi && !add_pops(w, i, d, k, hi, true, follow))
            return fail(HEARTH_ENOMEM, err, err_len, "out of memory");
        i = (int32_t)t[i].end;
    }
    if (!gbudget_walk(w->g->budget, n_visited + 8 * w->n_unc)) /* and the entries' sort */
        return fail(HEARTH_EINVAL, err, err_len, "%s", w->g->budget->msg);
    return HEARTH_OK;
}

/* ------------------------------------------------------------- storing --- */

static int cmp_unc(const void *a, const void *b, void *arg)
{
    const struct grammar_vocab *v = arg;
    const struct gunc *x = a, *y = b;
    uint32_t lx = v->lens[x->tok] - x->k, ly = v->lens[y->tok] - y->k;
    int c = memcmp(gv_bytes(v, x->tok) + x->k, gv_bytes(v, y->tok) + y->k, lx < ly ? lx : ly);
    if (c)
        return c;
    if (lx != ly)
        return lx < ly ? -1 : 1;
    return x->tok < y->tok ? -1 : x->tok > y->tok;
}

static int cmp_by_tok(const void *a, const void *b, void *arg)
{
    const struct gunc *u = arg;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (u[x].tok != u[y].tok)
        return u[x].tok < u[y].tok ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* A hash of a set of tokens that does not depend on their order (the walk's is the trie's). */
static uint32_t hash_set(const int32_t *l, int32_t n)
{
    uint64_t h = (uint64_t)n * 0x9E3779B97F4A7C15ull;
    for (int32_t i = 0; i < n; i++) {
        uint64_t x = (uint64_t)(uint32_t)l[i] * 0xBF58476D1CE4E5B9ull;
        h += x ^ x >> 31;
    }
    return (uint32_t)(h ^ h >> 32);
}

struct accmap {
    int32_t *slot;  /* [mask + 1] acc index or -1 */
    uint32_t *hash; /* [n_accs] */
    uint32_t mask;
};

/* Whether s holds exactly the n tokens whose bits are set in mark. */
static bool tokset_equal(const struct gtokset *s, const uint32_t *mark, size_t words, int32_t n)
{
    if (s->n != n)
        return false;
    if (s->bits)
        return memcmp(s->bits, mark, words * sizeof *mark) == 0;
    for (int32_t i = 0; i < n; i++)
        if (!(mark[s->list[i] >> 5] >> (s->list[i] & 31) & 1))
            return false;
    return true;
}

/*
 * The index of the set of the n tokens in l (distinct, any order) in
 * g->accs, added when new; -1 when OOM. mark: zeroed scratch, zeroed again
 * on return.
 */
static int32_t intern_acc(struct grammar *g, struct accmap *m, int32_t *cap, const int32_t *l,
                          int32_t n, uint32_t *mark)
{
    int32_t n_vocab = g->vocab->n;
    size_t words    = ((size_t)n_vocab + 31) / 32;
    bool dense      = (int64_t)n * 32 > n_vocab;
    uint32_t h      = hash_set(l, n);
    int32_t found   = -1;
    for (int32_t i = 0; i < n; i++)
        mark[l[i] >> 5] |= 1u << (l[i] & 31);
    if ((uint32_t)(g->n_accs + 1) * 2 > m->mask + 1) {
        uint32_t size = (m->mask + 1) * 2;
        int32_t *s    = malloc(size * sizeof *s);
        if (!s)
            goto done;
        memset(s, 0xff, size * sizeof *s);
        for (int32_t a = 0; a < g->n_accs; a++) {
            uint32_t j = m->hash[a] & (size - 1);
            while (s[j] >= 0)
                j = (j + 1) & (size - 1);
            s[j] = a;
        }
        free(m->slot);
        m->slot = s;
        m->mask = size - 1;
    }
    uint32_t j = h & m->mask;
    for (; m->slot[j] >= 0; j = (j + 1) & m->mask) {
        if (m->hash[m->slot[j]] == h && tokset_equal(&g->accs[m->slot[j]], mark, words, n)) {
            found = m->slot[j];
            goto done;
        }
    }
    if (g->n_accs == *cap) {
        int32_t c         = *cap ? *cap * 2 : 64;
        struct gtokset *a = realloc(g->accs, (size_t)c * sizeof *a);
        uint32_t *hh      = realloc(m->hash, (size_t)c * sizeof *hh);
        if (a)
            g->accs = a;
        if (hh)
            m->hash = hh;
        if (!a || !hh)
            goto done;
        *cap = c;
    }
    struct gtokset *s = &g->accs[g->n_accs];
    memset(s, 0, sizeof *s);
    s->n = n;
    if (dense) {
        s->bits = malloc(words * sizeof *s->bits);
        if (!s->bits)
            goto done;
        memcpy(s->bits, mark, words * sizeof *mark);
        g->mem_bytes += words * sizeof *s->bits;
    } else {
        s->list = malloc(((size_t)n + 1) * sizeof *s->list);
        if (!s->list)
            goto done;
        int32_t k = 0; /* sorted: read back from the bits */
        for (size_t w = 0; w < words && k < n; w++)
            for (uint32_t x = mark[w]; x; x &= x - 1)
                s->list[k++] = (int32_t)(w * 32 + (uint32_t)__builtin_ctz(x));
        g->mem_bytes += (size_t)n * sizeof *l;
    }
    m->hash[g->n_accs] = h;
    m->slot[j]         = g->n_accs;
    found              = g->n_accs++;
done:
    if (dense)
        memset(mark, 0, words * sizeof *mark);
    else
        for (int32_t i = 0; i < n; i++)
            mark[l[i] >> 5] = 0;
    return found;
}

static bool store_unc(struct grammar *g, struct gctx *c, struct walk *w, int64_t *cap)
{
    const struct grammar_vocab *v = g->vocab;
    if (w->n_unc > 1)
        qsort_r(w->unc, (size_t)w->n_unc, sizeof *w->unc, cmp_unc, (void *)v);
    for (int64_t i = 1; i < w->n_unc; i++) {
        const struct gunc *a = &w->unc[i - 1], *b = &w->unc[i];
        uint32_t la = v->lens[a->tok] - a->k, lb = v->lens[b->tok] - b->k;
        const uint8_t *x = gv_bytes(v, a->tok) + a->k, *y = gv_bytes(v, b->tok) + b->k;
        uint32_t l = 0;
        while (l < la && l < lb && x[l] == y[l])
            l++;
        w->unc[i].lcp = l;
    }
    if (g->n_unc + w->n_unc > *cap) {
        int64_t nc     = (*cap + w->n_unc) * 2;
        struct gunc *u = realloc(g->unc, (size_t)nc * sizeof *u);
        if (!u)
            return false;
        g->unc = u;
        *cap   = nc;
    }
    c->unc0  = (int32_t)g->n_unc;
    c->n_unc = (int32_t)w->n_unc;
    if (w->n_unc > 0)
        memcpy(g->unc + g->n_unc, w->unc, (size_t)w->n_unc * sizeof *w->unc);
    g->n_unc += w->n_unc;
    g->mem_bytes += (size_t)w->n_unc * (sizeof *w->unc + sizeof *c->by_tok);
    c->by_tok = malloc(((size_t)w->n_unc + 1) * sizeof *c->by_tok);
    if (!c->by_tok)
        return false;
    for (int32_t i = 0; i < c->n_unc; i++)
        c->by_tok[i] = i;
    if (c->n_unc > 1)
        qsort_r(c->by_tok, (size_t)c->n_unc, sizeof *c->by_tok, cmp_by_tok, g->unc + c->unc0);
    return true;
}

/* What the DFA may hold before it is emptied between contexts: pool nodes, states, hashed steps. */
#define DFA_MAX_NODES (1 << 20)

enum hearth_status grammar_precompute(struct grammar *g, char *err, size_t err_len)
{
    const struct gprog *pg        = &g->prog;
    const struct grammar_vocab *v = g->vocab;
    struct gctx_key *keys         = NULL;
    struct gbyteset *follow       = NULL;
    int32_t n_keys                = 0;
    enum hearth_status st         = gprog_contexts(pg, &keys, &n_keys, &follow, err, err_len);
    if (st != HEARTH_OK)
        return st;
    struct walk w    = {.g = pg, .v = v};
    bool dfa_ok      = gdfa_init(&w.dfa, pg);
    struct accmap am = {0};
    int32_t cap_accs = 0;
    int64_t cap_unc  = 0;
    static const struct gbyteset none;
    w.state      = malloc(((size_t)v->max_len + 1) * sizeof *w.state);
    w.flags      = calloc((size_t)v->max_len + 1, sizeof *w.flags);
    w.popped     = calloc((size_t)v->max_len + 1, sizeof *w.popped);
    w.acc        = malloc(((size_t)v->n_text + 1) * sizeof *w.acc);
    w.mark       = calloc(((size_t)v->n + 31) / 32 + 1, sizeof *w.mark);
    g->ctxs      = calloc((size_t)n_keys + 1, sizeof *g->ctxs);
    g->ctx_first = calloc((size_t)pg->n_elems + 2, sizeof *g->ctx_first);
    am.slot      = malloc(256 * sizeof *am.slot);
    st           = HEARTH_ENOMEM;
    if (!dfa_ok || !w.state || !w.flags || !w.popped || !w.acc || !w.mark || !g->ctxs ||
        !g->ctx_first || !am.slot)
        goto done;
    memset(am.slot, 0xff, 256 * sizeof *am.slot);
    am.mask   = 255;
    g->n_ctxs = n_keys;
    for (int32_t i = 0; i < n_keys; i++) {
        bool full =
            w.dfa.pool.n > DFA_MAX_NODES || w.dfa.n > DFA_MAX_NODES || w.dfa.n_far > DFA_MAX_NODES;
        if (full && !gdfa_reset(&w.dfa))
            goto done;
        const struct gbyteset *f = keys[i].q >= 0 ? &follow[pg->pos_rule[keys[i].q]] : &none;
        st                       = walk_ctx(&w, keys[i], f, err, err_len);
        if (st != HEARTH_OK)
            goto done_err;
        st             = HEARTH_ENOMEM;
        struct gctx *c = &g->ctxs[i];
        c->p           = keys[i].p;
        c->q           = keys[i].q;
        c->acc         = intern_acc(g, &am, &cap_accs, w.acc, w.n_acc, w.mark);
        if (c->acc < 0 || !store_unc(g, c, &w, &cap_unc))
            goto done;
        g->ctx_first[keys[i].p + 1]++;
    }
    for (int32_t p = 0; p <= pg->n_elems; p++)
        g->ctx_first[p + 1] += g->ctx_first[p];
    g->mem_bytes += (size_t)n_keys * sizeof *g->ctxs + ((size_t)pg->n_elems + 2) * sizeof(int32_t);
    st = HEARTH_OK;
done:
    if (st == HEARTH_ENOMEM)
        set_err(err, err_len, "out of memory");
done_err:
    gdfa_free(&w.dfa);
    free(w.state);
    free(w.flags);
    free(w.popped);
    free(w.acc);
    free(w.mark);
    free(w.unc);
    free(am.slot);
    free(am.hash);
    free(keys);
    free(follow);
    return st;
}

void grammar_precompute_free(struct grammar *g)
{
    for (int32_t a = 0; a < g->n_accs; a++) {
        free(g->accs[a].bits);
        free(g->accs[a].list);
    }
    free(g->accs);
    if (g->ctxs)
        for (int32_t i = 0; i < g->n_ctxs; i++)
            free(g->ctxs[i].by_tok);
    free(g->ctxs);
    free(g->ctx_first);
    free(g->unc);
}

int32_t grammar_find_ctx(const struct grammar *g, int32_t p, int32_t q)
{
    int32_t lo = g->ctx_first[p], hi = g->ctx_first[p + 1];
    while (lo < hi) {
        int32_t mid = (lo + hi) / 2;
        if (g->ctxs[mid].q < q)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < g->ctx_first[p + 1] && g->ctxs[lo].q == q ? lo : -1;
}

size_t grammar_mem_bytes(const struct grammar *g)
{
    return g->mem_bytes;
}
