/*
 * matcher.c: one generation's position in a grammar, and its token mask.
 *
 * The state is a set of parse stacks (node ids in the matcher's own pool)
 * and whether the root has matched. The mask is, over the live stacks,
 * the union of their contexts' precomputed accepted sets, plus the
 * context's uncertain tokens that the stack below accepts (checked from
 * the pop point, the entries walked in sorted order so a shared rest is
 * run once and a dead prefix skips all that share it), plus EOG when the
 * root has matched. Cost per step: a few word-wide ORs and the live part
 * of the uncertain entries, not the vocabulary.
 *
 * Lazy matchers keep the last bytes of the generated text (as long as the
 * longest trigger) so a trigger split across tokens is still seen.
 */
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_int.h"
#include "util/errfmt.h"

struct grammar_matcher {
    struct grammar *g;
    struct gpool pool;
    struct ivec stacks; /* live stacks, tops are terminals */
    bool accept;        /* the root has matched */
    bool active;
    char **triggers; /* [n_triggers] */
    size_t *trig_lens;
    int32_t n_triggers;
    size_t trig_max;
    char *text; /* the generated text's last bytes while inactive */
    size_t text_len, text_cap;
    /* scratch */
    struct ivec cur, tmp, dbuf;
    int32_t *doff;       /* [max_len + 2] depth d's stacks in dbuf */
    uint8_t *dacc;       /* [max_len + 1] whether the root matched at depth d */
    uint32_t *ctx_stamp; /* [n_ctxs] */
    int32_t n_live;      /* pool nodes the live stacks used at the last compaction */
    uint32_t gen;
};

static void reset_state(struct grammar_matcher *m)
{
    gpool_reset(&m->pool);
    m->stacks.n = 0;
    m->accept   = false;
}

struct grammar_matcher *grammar_matcher_new(struct grammar *g, const char *const *triggers,
                                            int32_t n_triggers)
{
    if (!g || !g->vocab)
        return NULL;
    struct grammar_matcher *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->g = grammar_ref(g);
    gpool_init(&m->pool);
    m->doff      = malloc(((size_t)g->vocab->max_len + 3) * sizeof *m->doff);
    m->dacc      = calloc((size_t)g->vocab->max_len + 2, 1);
    m->ctx_stamp = calloc((size_t)g->n_ctxs + 1, sizeof *m->ctx_stamp);
    if (!m->doff || !m->dacc || !m->ctx_stamp)
        goto fail;
    if (n_triggers > 0) {
        m->triggers  = calloc((size_t)n_triggers, sizeof *m->triggers);
        m->trig_lens = calloc((size_t)n_triggers, sizeof *m->trig_lens);
        if (!m->triggers || !m->trig_lens)
            goto fail;
        for (int32_t i = 0; i < n_triggers; i++) {
            m->trig_lens[i] = strlen(triggers[i]);
            m->triggers[i]  = strdup(triggers[i]);
            if (!m->triggers[i])
                goto fail;
            m->n_triggers++;
            if (m->trig_lens[i] > m->trig_max)
                m->trig_max = m->trig_lens[i];
        }
    }
    m->active = m->n_triggers == 0;
    if (m->active && !grammar_start(&g->prog, &m->pool, &m->stacks, &m->accept, NULL, 0))
        goto fail;
    return m;
fail:
    grammar_matcher_free(m);
    return NULL;
}

void grammar_matcher_free(struct grammar_matcher *m)
{
    if (!m)
        return;
    for (int32_t i = 0; i < m->n_triggers; i++)
        free(m->triggers[i]);
    free(m->triggers);
    free(m->trig_lens);
    free(m->text);
    gpool_free(&m->pool);
    ivec_free(&m->stacks);
    ivec_free(&m->cur);
    ivec_free(&m->tmp);
    ivec_free(&m->dbuf);
    free(m->doff);
    free(m->dacc);
    free(m->ctx_stamp);
    grammar_unref(m->g);
    free(m);
}

bool grammar_matcher_active(const struct grammar_matcher *m)
{
    return m->active;
}

bool grammar_matcher_can_end(const struct grammar_matcher *m)
{
    return !m->active || m->accept;
}

bool grammar_matcher_must_end(const struct grammar_matcher *m)
{
    return m->active && m->accept && m->stacks.n == 0;
}

/* ---------------------------------------------------------------- state --- */

/* Runs s[0..n) from the live stacks into m->cur; whether something is alive after it. */
static bool run_bytes(struct grammar_matcher *m, const uint8_t *s, size_t n, bool *accept,
                      bool *alive, char *err, size_t err_len)
{
    m->cur.n = 0;
    for (int32_t i = 0; i < m->stacks.n; i++)
        if (!ivec_push(&m->cur, m->stacks.v[i]))
            return fail(false, err, err_len, "out of memory");
    *accept = m->accept;
    if (!grammar_feed(&m->g->prog, &m->pool, &m->cur, &m->tmp, accept, s, n, err, err_len))
        return false;
    *alive = m->cur.n > 0 || *accept;
    return true;
}

/*
 * Drops the pool's nodes no live stack uses: checks of uncertain tokens
 * intern nodes that die at once, and a long generation would pile them up.
 */
static bool compact(struct grammar_matcher *m)
{
    struct gpool *old = &m->pool;
    /* often enough that the pool's table stays small (growing it costs milliseconds) */
    if (old->n < 4096 || old->n < 4 * m->n_live)
        return true;
    int32_t *map = malloc((size_t)old->n * sizeof *map);
    struct gpool np;
    gpool_init(&np);
    if (!map)
        return false;
    memset(map, 0xff, (size_t)old->n * sizeof *map);
    struct ivec chain = {0};
    bool ok           = true;
    for (int32_t i = 0; i < m->stacks.n && ok; i++) {
        chain.n = 0;
        for (int32_t id = m->stacks.v[i]; id >= 0 && map[id] < 0; id = old->nodes[id].parent)
            ok = ok && ivec_push(&chain, id);
        for (int32_t c = chain.n - 1; c >= 0 && ok; c--) {
            int32_t id     = chain.v[c];
            int32_t parent = old->nodes[id].parent;
            map[id] =
                gpool_intern(&np, old->nodes[id].pos, parent >= 0 ? map[parent] : parent, NULL, 0);
            ok = map[id] >= 0;
        }
        if (ok)
            m->stacks.v[i] = map[m->stacks.v[i]];
    }
    ivec_free(&chain);
    free(map);
    if (!ok) { /* the old pool is intact only if nothing was remapped: restart from scratch */
        gpool_free(&np);
        return false;
    }
    gpool_free(old);
    m->pool   = np;
    m->n_live = np.n;
    return true;
}

static bool token_bytes(const struct grammar_vocab *v, hearth_token tok, const uint8_t **b,
                        uint32_t *n)
{
    if (tok < 0 || tok >= v->n)
        return false;
    *b = gv_bytes(v, tok);
    *n = v->lens[tok];
    return true;
}

/* Lazy: adds text, and starts the grammar at the first trigger found. */
static bool lazy_accept(struct grammar_matcher *m, const uint8_t *s, size_t n, char *err,
                        size_t err_len)
{
    if (m->text_len + n > m->text_cap) {
        size_t cap = (m->text_len + n) * 2 + 64;
        char *t    = realloc(m->text, cap);
        if (!t)
            return fail(false, err, err_len, "out of memory");
        m->text     = t;
        m->text_cap = cap;
    }
    memcpy(m->text + m->text_len, s, n);
    size_t len  = m->text_len + n;
    size_t best = SIZE_MAX;
    for (int32_t i = 0; i < m->n_triggers; i++) {
        if (m->trig_lens[i] == 0) {
            best = 0;
            continue;
        }
        const char *hit = memmem(m->text, len, m->triggers[i], m->trig_lens[i]);
        if (hit && (size_t)(hit - m->text) < best)
            best = (size_t)(hit - m->text);
    }
    if (best == SIZE_MAX) {
        size_t keep = m->trig_max > 0 ? m->trig_max - 1 : 0;
        if (len > keep) {
            memmove(m->text, m->text + len - keep, keep);
            len = keep;
        }
        m->text_len = len;
        return true;
    }
    reset_state(m);
    bool accept = false, alive = false;
    if (!grammar_start(&m->g->prog, &m->pool, &m->stacks, &accept, err, err_len))
        return false;
    m->accept = accept;
    if (!run_bytes(m, (const uint8_t *)m->text + best, len - best, &accept, &alive, err, err_len))
        return false;
    if (!alive) {
        reset_state(m);
        return fail(false, err, err_len, "the grammar rejects the text that starts at its trigger");
    }
    struct ivec t = m->stacks;
    m->stacks     = m->cur;
    m->cur        = t;
    m->accept     = accept;
    m->active     = true;
    m->text_len   = 0;
    return true;
}

bool grammar_matcher_accept(struct grammar_matcher *m, hearth_token tok, char *err, size_t err_len)
{
    const struct grammar_vocab *v = m->g->vocab;
    const uint8_t *b;
    uint32_t n;
    if (!token_bytes(v, tok, &b, &n))
        return fail(false, err, err_len, "token %d is not in the vocabulary", (int)tok);
    if (!m->active) {
        if (v->kinds[tok] != GRAMMAR_TOKEN_TEXT)
            return true;
        return lazy_accept(m, b, n, err, err_len);
    }
    if (v->kinds[tok] == GRAMMAR_TOKEN_EOG) {
        if (!m->accept)
            return fail(false, err, err_len, "end of generation before the grammar is complete");
        return true;
    }
    if (v->kinds[tok] == GRAMMAR_TOKEN_CONTROL || n == 0)
        return fail(false, err, err_len, "control token %d is not allowed by a grammar", (int)tok);
    bool accept, alive;
    if (!run_bytes(m, b, n, &accept, &alive, err, err_len))
        return false;
    if (!alive)
        return fail(false, err, err_len, "token %d is not allowed by the grammar here", (int)tok);
    struct ivec t = m->stacks;
    m->stacks     = m->cur;
    m->cur        = t;
    m->accept     = accept;
    compact(m); /* failing only to free memory is harmless */
    return true;
}

/* ----------------------------------------------------------------- mask --- */

static bool tokset_has(const struct gtokset *s, int32_t tok)
{
    if (s->bits)
        return s->bits[tok >> 5] >> (tok & 31) & 1;
    int32_t lo = 0, hi = s->n;
    while (lo < hi) {
        int32_t mid = (lo + hi) / 2;
        if (s->list[mid] < tok)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < s->n && s->list[lo] == tok;
}

/* The context of live stack id, and the node its uncertain tokens continue from. */
static int32_t stack_ctx(const struct grammar_matcher *m, int32_t id, int32_t *below)
{
    const struct gnode *nd = &m->pool.nodes[id];
    int32_t q              = -1;
    *below                 = GS_EMPTY;
    if (nd->parent >= 0) {
        q      = m->pool.nodes[nd->parent].pos;
        *below = m->pool.nodes[nd->parent].parent;
    }
    return grammar_find_ctx(m->g, nd->pos, q);
}

static bool reserve(struct ivec *a, int32_t extra)
{
    if (a->cap - a->n >= extra)
        return true;
    int32_t cap = a->cap * 2 + extra;
    int32_t *v  = realloc(a->v, (size_t)cap * sizeof *v);
    if (!v)
        return false;
    a->v   = v;
    a->cap = cap;
    return true;
}

/*
 * Sets in allowed the uncertain tokens of context c that the stack below
 * (node below, whose closure is where they continue) accepts; skips those
 * already set. False with err when a bound is passed.
 */
static bool check_uncertain(struct grammar_matcher *m, const struct gctx *c, int32_t below,
                            uint32_t *allowed, char *err, size_t err_len)
{
    const struct grammar *g       = m->g;
    const struct grammar_vocab *v = g->vocab;
    const struct gunc *u          = g->unc + c->unc0;
    m->dbuf.n                     = 0;
    int f                         = 0;
    if (!gstep_closure(&g->prog, &m->pool, &below, 1, false, &m->dbuf, &f, err, err_len))
        return false;
    m->doff[0]  = 0;
    m->doff[1]  = m->dbuf.n;
    m->dacc[0]  = (f & GX_ACCEPT) != 0;
    uint32_t vd = 0;
    for (int32_t i = 0; i < c->n_unc;) {
        if (vd > u[i].lcp)
            vd = u[i].lcp;
        int32_t tok = u[i].tok;
        if (allowed[tok >> 5] >> (tok & 31) & 1) {
            i++;
            continue;
        }
        const uint8_t *r = gv_bytes(v, tok) + u[i].k;
        uint32_t len     = v->lens[tok] - u[i].k;
        uint32_t d       = vd;
        while (d < len && m->doff[d + 1] > m->doff[d]) {
            m->dbuf.n = m->doff[d + 1];
            if (!reserve(&m->dbuf, GRAMMAR_MAX_STACKS + 1))
                return fail(false, err, err_len, "out of memory");
            f = 0;
            if (!gstep_byte(&g->prog, &m->pool, m->dbuf.v + m->doff[d], m->doff[d + 1] - m->doff[d],
                            r[d], &m->dbuf, &f, err, err_len))
                return false;
            m->dacc[d + 1] = (f & GX_ACCEPT) != 0;
            m->doff[d + 2] = m->dbuf.n;
            d++;
        }
        vd = d;
        if (d == len && (m->doff[d + 1] > m->doff[d] || m->dacc[d])) {
            allowed[tok >> 5] |= 1u << (tok & 31);
            i++;
            continue;
        }
        /* dead after d bytes: every later rest sharing them is longer (sorted), so dead too */
        i++;
        while (i < c->n_unc && u[i].lcp >= d)
            i++;
    }
    return true;
}

/* Set bits of a[0..n): SWAR, since a build for any x86-64 has no popcnt instruction. */
static int32_t count_bits(const uint32_t *a, size_t n)
{
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t x = a[i];
        x          = x - (x >> 1 & 0x55555555u);
        x          = (x & 0x33333333u) + (x >> 2 & 0x33333333u);
        x          = (x + (x >> 4)) & 0x0F0F0F0Fu;
        total += (x * 0x01010101u) >> 24;
    }
    return (int32_t)total;
}

int32_t grammar_matcher_mask(struct grammar_matcher *m, uint32_t *allowed, char *err,
                             size_t err_len)
{
    const struct grammar *g       = m->g;
    const struct grammar_vocab *v = g->vocab;
    size_t words                  = ((size_t)v->n + 31) / 32;
    if (!m->active) {
        memset(allowed, 0xff, words * sizeof *allowed);
        if (v->n & 31)
            allowed[words - 1] = (1u << (v->n & 31)) - 1;
        return v->n;
    }
    memset(allowed, 0, words * sizeof *allowed);
    if (++m->gen == 0) {
        memset(m->ctx_stamp, 0, (size_t)g->n_ctxs * sizeof *m->ctx_stamp);
        m->gen = 1;
    }
    for (int32_t i = 0; i < m->stacks.n; i++) {
        int32_t below;
        int32_t c = stack_ctx(m, m->stacks.v[i], &below);
        if (c < 0) {
            set_err(err, err_len, "grammar: a stack has no precomputed context");
            return -1;
        }
        if (m->ctx_stamp[c] == m->gen)
            continue;
        m->ctx_stamp[c]         = m->gen;
        const struct gtokset *s = &g->accs[g->ctxs[c].acc];
        if (s->bits) {
            for (size_t w = 0; w < words; w++)
                allowed[w] |= s->bits[w];
        } else {
            for (int32_t k = 0; k < s->n; k++)
                allowed[s->list[k] >> 5] |= 1u << (s->list[k] & 31);
        }
    }
    /* uncertain tokens: once per (context, node below), which live stacks often share */
    for (int32_t i = 0; i < m->stacks.n; i++) {
        int32_t below;
        int32_t c = stack_ctx(m, m->stacks.v[i], &below);
        if (g->ctxs[c].n_unc == 0 || below < 0)
            continue;
        bool seen = false;
        for (int32_t j = 0; j < i && !seen; j++) {
            int32_t b2;
            seen = stack_ctx(m, m->stacks.v[j], &b2) == c && b2 == below;
        }
        if (!seen && !check_uncertain(m, &g->ctxs[c], below, allowed, err, err_len))
            return -1;
    }
    if (m->accept)
        for (int32_t i = 0; i < v->n_eog; i++)
            allowed[v->eog[i] >> 5] |= 1u << (v->eog[i] & 31);
    return count_bits(allowed, words);
}

bool grammar_matcher_allows(struct grammar_matcher *m, hearth_token tok)
{
    const struct grammar *g       = m->g;
    const struct grammar_vocab *v = g->vocab;
    if (tok < 0 || tok >= v->n)
        return false;
    if (!m->active)
        return true;
    if (v->kinds[tok] == GRAMMAR_TOKEN_EOG)
        return m->accept;
    if (v->kinds[tok] != GRAMMAR_TOKEN_TEXT || v->lens[tok] == 0)
        return false;
    for (int32_t i = 0; i < m->stacks.n; i++) {
        int32_t below;
        int32_t c = stack_ctx(m, m->stacks.v[i], &below);
        if (c >= 0 && tokset_has(&g->accs[g->ctxs[c].acc], tok))
            return true;
    }
    for (int32_t i = 0; i < m->stacks.n; i++) {
        int32_t below;
        int32_t ci = stack_ctx(m, m->stacks.v[i], &below);
        if (ci < 0 || below < 0 || g->ctxs[ci].n_unc == 0)
            continue;
        const struct gctx *c = &g->ctxs[ci];
        const struct gunc *u = g->unc + c->unc0;
        int32_t lo = 0, hi = c->n_unc;
        while (lo < hi) {
            int32_t mid = (lo + hi) / 2;
            if (u[c->by_tok[mid]].tok < tok)
                lo = mid + 1;
            else
                hi = mid;
        }
        for (; lo < c->n_unc && u[c->by_tok[lo]].tok == tok; lo++) {
            uint32_t k = u[c->by_tok[lo]].k;
            m->cur.n   = 0;
            int f      = 0;
            if (!gstep_closure(&g->prog, &m->pool, &below, 1, false, &m->cur, &f, NULL, 0))
                return false;
            bool accept = (f & GX_ACCEPT) != 0;
            if (!grammar_feed(&g->prog, &m->pool, &m->cur, &m->tmp, &accept, gv_bytes(v, tok) + k,
                              v->lens[tok] - k, NULL, 0))
                return false;
            if (m->cur.n > 0 || accept)
                return true;
        }
    }
    return false;
}

int32_t grammar_matcher_mask_naive(struct grammar_matcher *m, uint32_t *allowed, char *err,
                                   size_t err_len)
{
    const struct grammar_vocab *v = m->g->vocab;
    size_t words                  = ((size_t)v->n + 31) / 32;
    memset(allowed, 0, words * sizeof *allowed);
    int32_t n = 0;
    for (int32_t tok = 0; tok < v->n; tok++) {
        bool ok = false;
        if (!m->active) {
            ok = true;
        } else if (v->kinds[tok] == GRAMMAR_TOKEN_EOG) {
            ok = m->accept;
        } else if (v->kinds[tok] == GRAMMAR_TOKEN_TEXT && v->lens[tok] > 0) {
            bool accept;
            if (!run_bytes(m, gv_bytes(v, tok), v->lens[tok], &accept, &ok, err, err_len))
                return -1;
        }
        if (ok) {
            allowed[tok >> 5] |= 1u << (tok & 31);
            n++;
        }
    }
    return n;
}
