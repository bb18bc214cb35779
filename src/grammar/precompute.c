/*
 * precompute.c: for every context (p, q) (analysis.c), which tokens the
 * stack [p, q] accepts whatever lies below it, and which depend on it.
 *
 * The walk runs the local stack [p, q, BOTTOM] over the vocabulary's
 * sorted tokens (vocab.c), reusing the parse state of the prefix a token
 * shares with the one before and skipping every token under a dead prefix,
 * so its cost follows the live part of the trie, not the vocabulary. Per
 * token:
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
    struct gpool pool;
    struct ivec buf;  /* the stacks at each depth of the current prefix */
    int32_t *off;     /* [max_len + 2] depth d's stacks are buf[off[d] .. off[d + 1]) */
    int *flags;       /* [max_len + 1] GX_* at depth d */
    struct ivec acc;  /* accepted tokens of the context */
    struct gunc *unc; /* uncertain entries of the context */
    int64_t n_unc, cap_unc;
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

/* Entries for tok from the pops along its path up to depth d (its first d bytes agree). */
static bool add_pops(struct walk *w, int32_t tok, uint32_t d, const struct gbyteset *follow)
{
    const uint8_t *b = gv_bytes(w->v, tok);
    uint32_t len     = w->v->lens[tok];
    for (uint32_t k = 1; k <= d && k < len; k++)
        if ((w->flags[k] & GX_POP) && gbs_has(follow, b[k]) && !add_unc(w, tok, k))
            return false;
    return true;
}

static enum hearth_status walk_ctx(struct walk *w, struct gctx_key key,
                                   const struct gbyteset *follow, char *err, size_t err_len)
{
    const struct grammar_vocab *v = w->v;
    gpool_reset(&w->pool);
    w->acc.n = 0;
    w->n_unc = 0;
    int32_t below = GS_EMPTY;
    if (key.q >= 0) {
        below = gpool_intern(&w->pool, key.q, GS_BOTTOM, err, err_len);
        if (below < 0)
            return HEARTH_EINVAL;
    }
    int32_t n0 = gpool_intern(&w->pool, key.p, below, err, err_len);
    if (n0 < 0)
        return HEARTH_EINVAL;
    w->buf.n    = 0;
    if (!ivec_push(&w->buf, n0))
        return fail(HEARTH_ENOMEM, err, err_len, "out of memory");
    w->off[0]   = 0;
    w->off[1]   = 1;
    w->flags[0] = 0;
    uint32_t vd = 0; /* depths 0..vd hold the states of the current prefix */
    for (int32_t i = 0; i < v->n_text;) {
        int32_t tok      = v->order[i];
        const uint8_t *b = gv_bytes(v, tok);
        uint32_t len     = v->lens[tok];
        if (vd > v->lcp[i])
            vd = v->lcp[i];
        uint32_t d = vd;
        while (d < len && w->off[d + 1] > w->off[d]) {
            w->buf.n = w->off[d + 1];
            if (w->buf.cap - w->buf.n < GRAMMAR_MAX_STACKS + 1) {
                int32_t cap = w->buf.cap * 2 + GRAMMAR_MAX_STACKS + 1;
                int32_t *nv = realloc(w->buf.v, (size_t)cap * sizeof *nv);
                if (!nv)
                    return fail(HEARTH_ENOMEM, err, err_len, "out of memory");
                w->buf.v   = nv;
                w->buf.cap = cap;
            }
            int f = 0;
            if (!gstep_byte(w->g, &w->pool, w->buf.v + w->off[d], w->off[d + 1] - w->off[d], b[d],
                            &w->buf, &f, err, err_len))
                return HEARTH_EINVAL;
            w->flags[d + 1] = f;
            w->off[d + 2]   = w->buf.n;
            d++;
        }
        vd = d;
        if (d == len && (w->off[d + 1] > w->off[d] || (w->flags[d] & (GX_POP | GX_ACCEPT)))) {
            if (!ivec_push(&w->acc, tok))
                return fail(HEARTH_ENOMEM, err, err_len, "out of memory");
            i++;
            continue;
        }
        /* dead after d bytes: so is every following token that shares them */
        bool pops = false;
        for (uint32_t k = 1; k <= d && !pops; k++)
            pops = (w->flags[k] & GX_POP) != 0;
        int32_t j = i + 1;
        while (j < v->n_text && v->lcp[j] >= d)
            j++;
        if (pops)
            for (int32_t t = i; t < j; t++)
                if (!add_pops(w, v->order[t], d, follow))
                    return fail(HEARTH_ENOMEM, err, err_len, "out of memory");
        i = j;
    }
    return HEARTH_OK;
}

/* ------------------------------------------------------------- storing --- */

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

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

static uint32_t hash_list(const int32_t *l, int32_t n)
{
    uint64_t h = 1469598103934665603ull ^ (uint64_t)n;
    for (int32_t i = 0; i < n; i++)
        h = (h ^ (uint32_t)l[i]) * 1099511628211ull;
    return (uint32_t)(h ^ h >> 32);
}

struct accmap {
    int32_t *slot;    /* [mask + 1] acc index or -1 */
    uint32_t *hash;   /* [n_accs] */
    uint32_t mask;
};

static bool tokset_equal(const struct gtokset *s, const int32_t *l, int32_t n)
{
    if (s->n != n)
        return false;
    if (!s->bits)
        return memcmp(s->list, l, (size_t)n * sizeof *l) == 0;
    for (int32_t i = 0; i < n; i++)
        if (!(s->bits[l[i] >> 5] >> (l[i] & 31) & 1))
            return false;
    return true;
}

/* The index of the set of tokens l[0..n) (sorted) in g->accs, added when new; -1 when OOM. */
static int32_t intern_acc(struct grammar *g, struct accmap *m, int32_t *cap, const int32_t *l,
                          int32_t n)
{
    uint32_t h = hash_list(l, n);
    if ((uint32_t)(g->n_accs + 1) * 2 > m->mask + 1) {
        uint32_t size = (m->mask + 1) * 2;
        int32_t *s    = malloc(size * sizeof *s);
        if (!s)
            return -1;
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
    for (; m->slot[j] >= 0; j = (j + 1) & m->mask)
        if (m->hash[m->slot[j]] == h && tokset_equal(&g->accs[m->slot[j]], l, n))
            return m->slot[j];
    if (g->n_accs == *cap) {
        int32_t c         = *cap ? *cap * 2 : 64;
        struct gtokset *a = realloc(g->accs, (size_t)c * sizeof *a);
        uint32_t *hh      = realloc(m->hash, (size_t)c * sizeof *hh);
        if (a)
            g->accs = a;
        if (hh)
            m->hash = hh;
        if (!a || !hh)
            return -1;
        *cap = c;
    }
    int32_t n_vocab    = g->vocab->n;
    struct gtokset *s  = &g->accs[g->n_accs];
    memset(s, 0, sizeof *s);
    s->n = n;
    if ((int64_t)n * 32 > n_vocab) {
        size_t words = ((size_t)n_vocab + 31) / 32;
        s->bits      = calloc(words, sizeof *s->bits);
        if (!s->bits)
            return -1;
        for (int32_t i = 0; i < n; i++)
            s->bits[l[i] >> 5] |= 1u << (l[i] & 31);
        g->mem_bytes += words * sizeof *s->bits;
    } else {
        s->list = malloc(((size_t)n + 1) * sizeof *s->list);
        if (!s->list)
            return -1;
        memcpy(s->list, l, (size_t)n * sizeof *l);
        g->mem_bytes += (size_t)n * sizeof *l;
    }
    m->hash[g->n_accs] = h;
    m->slot[j]         = g->n_accs;
    return g->n_accs++;
}

static bool store_unc(struct grammar *g, struct gctx *c, struct walk *w, int64_t *cap)
{
    const struct grammar_vocab *v = g->vocab;
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
    memcpy(g->unc + g->n_unc, w->unc, (size_t)w->n_unc * sizeof *w->unc);
    g->n_unc += w->n_unc;
    g->mem_bytes += (size_t)w->n_unc * (sizeof *w->unc + sizeof *c->by_tok);
    c->by_tok = malloc(((size_t)w->n_unc + 1) * sizeof *c->by_tok);
    if (!c->by_tok)
        return false;
    for (int32_t i = 0; i < c->n_unc; i++)
        c->by_tok[i] = i;
    qsort_r(c->by_tok, (size_t)c->n_unc, sizeof *c->by_tok, cmp_by_tok, g->unc + c->unc0);
    return true;
}

enum hearth_status grammar_precompute(struct grammar *g, char *err, size_t err_len)
{
    const struct gprog *pg = &g->prog;
    struct gctx_key *keys  = NULL;
    struct gbyteset *follow = NULL;
    int32_t n_keys         = 0;
    enum hearth_status st  = gprog_contexts(pg, &keys, &n_keys, &follow, err, err_len);
    if (st != HEARTH_OK)
        return st;
    struct walk w = {.g = pg, .v = g->vocab};
    gpool_init(&w.pool);
    struct accmap am = {0};
    int32_t cap_accs = 0;
    int64_t cap_unc  = 0;
    static const struct gbyteset none;
    w.off       = malloc(((size_t)g->vocab->max_len + 3) * sizeof *w.off);
    w.flags     = calloc((size_t)g->vocab->max_len + 2, sizeof *w.flags);
    g->ctxs     = calloc((size_t)n_keys + 1, sizeof *g->ctxs);
    g->ctx_first = calloc((size_t)pg->n_elems + 2, sizeof *g->ctx_first);
    am.slot     = malloc(256 * sizeof *am.slot);
    st          = HEARTH_ENOMEM;
    if (!w.off || !w.flags || !g->ctxs || !g->ctx_first || !am.slot)
        goto done;
    memset(am.slot, 0xff, 256 * sizeof *am.slot);
    am.mask   = 255;
    g->n_ctxs = n_keys;
    for (int32_t i = 0; i < n_keys; i++) {
        const struct gbyteset *f = keys[i].q >= 0 ? &follow[pg->pos_rule[keys[i].q]] : &none;
        st = walk_ctx(&w, keys[i], f, err, err_len);
        if (st != HEARTH_OK)
            goto done_err;
        st = HEARTH_ENOMEM;
        struct gctx *c = &g->ctxs[i];
        c->p           = keys[i].p;
        c->q           = keys[i].q;
        qsort(w.acc.v, (size_t)w.acc.n, sizeof *w.acc.v, cmp_i32);
        c->acc = intern_acc(g, &am, &cap_accs, w.acc.v, w.acc.n);
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
    gpool_free(&w.pool);
    ivec_free(&w.buf);
    ivec_free(&w.acc);
    free(w.unc);
    free(w.off);
    free(w.flags);
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
