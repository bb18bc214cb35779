/* snapshot.c: recurrent-state snapshots at KV block boundaries (see snapshot.h). */
#include "model/snapshot.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "model/kv.h"
#include "util/memacct.h"

struct entry {
    uint64_t key;   /* chain hash of the block ending at pos; 0 = not keyed (yet) */
    uint64_t used;  /* store clock at the last save or load: eviction order */
    int32_t pos;    /* tokens the state covers, a multiple of the block size; 0 = free */
    int32_t owner;  /* sequence that saved it and still stands on it; -1 = none */
    bool unkeyable; /* its block was published but another entry holds that key */
};

struct snap_store {
    int32_t n_seq;
    int32_t per_seq;      /* snapshots a sequence may own, >= 1 */
    int32_t cap;          /* n_seq * per_seq (+ n_cached) entries */
    int32_t n_cached_cap; /* most cached (keyed, unowned) entries; -1 = no cap */
    size_t state_len;     /* floats per snapshot */
    float *mem;           /* [cap][state_len] */
    size_t mem_len;
    struct entry *e; /* [cap] */
    int32_t *own;    /* [n_seq][per_seq] entry ids of each sequence, ascending pos */
    int32_t *n_own;  /* [n_seq] */
    uint64_t clock;
    /* snap_plan scratch, grown to the largest batch seen */
    int32_t *sim_pos, *sim_tag; /* [per_seq + n_rows] */
    int32_t *cand;              /* [n_rows] rows ending a boundary, of one sequence */
    int32_t sim_cap;
    uint8_t *seen;        /* [n_seq] */
    struct mem_acct acct; /* what snap_new allocated */
};

size_t snap_bytes(int32_t n_seq, int32_t per_seq, int32_t n_cached, size_t state_len)
{
    return ((size_t)n_seq * (size_t)per_seq + (size_t)(n_cached > 0 ? n_cached : 0)) * state_len *
           sizeof(float);
}

size_t snap_table_bytes(int32_t n_seq, int32_t per_seq, int32_t n_cached)
{
    const size_t cap = (size_t)n_seq * (size_t)per_seq + (size_t)(n_cached > 0 ? n_cached : 0);
    return cap * (sizeof(struct entry) + sizeof(int32_t)) + (size_t)n_seq * (sizeof(int32_t) + 1);
}

const struct mem_acct *snap_acct(const struct snap_store *s)
{
    return &s->acct;
}

struct snap_store *snap_new(int32_t n_seq, int32_t per_seq, int32_t n_cached, size_t state_len)
{
    if (n_seq < 1 || per_seq < 1 || state_len < 1 || n_cached < -1)
        return NULL;
    struct snap_store *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->n_seq        = n_seq;
    s->per_seq      = per_seq;
    s->cap          = n_seq * per_seq + (n_cached > 0 ? n_cached : 0);
    s->n_cached_cap = n_cached;
    s->state_len    = state_len;
    s->mem_len      = snap_bytes(n_seq, per_seq, n_cached, state_len);
    void *mem = mmap(NULL, s->mem_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        free(s);
        return NULL;
    }
    s->mem = mem;
    s->acct.b[MEM_KV] += s->mem_len;
    /* the sequences' own share now, as kv.c maps theirs; the cached ones come as they fill */
    mem_populate(mem, (size_t)n_seq * (size_t)per_seq * state_len * sizeof(float));
    s->e     = acct_calloc(&s->acct, MEM_OTHER, (size_t)s->cap, sizeof *s->e);
    s->own   = acct_calloc(&s->acct, MEM_OTHER, (size_t)s->cap, sizeof *s->own);
    s->n_own = acct_calloc(&s->acct, MEM_OTHER, (size_t)n_seq, sizeof *s->n_own);
    s->seen  = acct_calloc(&s->acct, MEM_OTHER, (size_t)n_seq, 1);
    if (!s->e || !s->own || !s->n_own || !s->seen) {
        snap_free(s);
        return NULL;
    }
    for (int32_t i = 0; i < s->cap; i++)
        s->e[i].owner = -1;
    return s;
}

void snap_free(struct snap_store *s)
{
    if (!s)
        return;
    if (s->mem)
        munmap(s->mem, s->mem_len);
    free(s->e);
    free(s->own);
    free(s->n_own);
    free(s->seen);
    free(s->sim_pos);
    free(s->sim_tag);
    free(s->cand);
    free(s);
}

static float *state_of(const struct snap_store *s, int32_t id)
{
    return s->mem + (size_t)id * s->state_len;
}

/* The least recently used cached entry, or -1. */
static int32_t lru_cached(const struct snap_store *s)
{
    int32_t best = -1;
    for (int32_t i = 0; i < s->cap; i++) {
        const struct entry *e = &s->e[i];
        if (e->owner >= 0 || !e->pos)
            continue;
        if (best < 0 || e->used < s->e[best].used)
            best = i;
    }
    return best;
}

static int32_t n_cached(const struct snap_store *s)
{
    int32_t n = 0;
    for (int32_t i = 0; i < s->cap; i++)
        n += s->e[i].owner < 0 && s->e[i].pos > 0;
    return n;
}

/*
 * Leaves entry id to the cache when keyed (the least recently used cached
 * one going past the cap), else frees it; the caller fixes the owner's list.
 */
static void release(struct snap_store *s, int32_t id)
{
    struct entry *e = &s->e[id];
    e->owner        = -1;
    if (!e->key) {
        e->pos       = 0;
        e->unkeyable = false;
        return;
    }
    if (s->n_cached_cap >= 0)
        while (n_cached(s) > s->n_cached_cap)
            s->e[lru_cached(s)] = (struct entry){.owner = -1};
}

/* An entry to write: a free one, else the least recently used cached one; -1 if all are owned. */
static int32_t take(struct snap_store *s)
{
    for (int32_t i = 0; i < s->cap; i++)
        if (s->e[i].owner < 0 && !s->e[i].pos)
            return i;
    const int32_t best = lru_cached(s);
    if (best >= 0)
        s->e[best] = (struct entry){.owner = -1};
    return best;
}

/*
 * Which of n > per_seq ascending positions goes: not the newest (the one a
 * continuing sequence most likely resumes from), else the one whose removal
 * leaves the smallest gap between its neighbours (position 0 counts as one),
 * the latest of equals, so the kept ones thin out evenly over the sequence.
 */
static int32_t thin_victim(const int32_t *pos, int32_t n)
{
    int32_t best = 0, best_gap = 0;
    for (int32_t i = 0; i + 1 < n; i++) {
        const int32_t gap = pos[i + 1] - (i > 0 ? pos[i - 1] : 0);
        if (i == 0 || gap <= best_gap) {
            best     = i;
            best_gap = gap;
        }
    }
    return best;
}

static bool grow(struct snap_store *s, int32_t n_rows)
{
    if (s->per_seq + n_rows <= s->sim_cap)
        return true;
    const int32_t want = s->per_seq + n_rows;
    int32_t *p         = realloc(s->sim_pos, (size_t)want * sizeof *p);
    if (p)
        s->sim_pos = p;
    int32_t *t = realloc(s->sim_tag, (size_t)want * sizeof *t);
    if (t)
        s->sim_tag = t;
    int32_t *c = realloc(s->cand, (size_t)want * sizeof *c);
    if (c)
        s->cand = c;
    if (!p || !t || !c)
        return false;
    s->sim_cap = want;
    return true;
}

/* Plans sequence seq's boundaries among the batch rows cand[0..m). */
static void plan_seq(struct snap_store *s, const struct hearth_batch *b, int32_t seq, int32_t m,
                     float **dst)
{
    int32_t *own = s->own + (size_t)seq * s->per_seq, n = s->n_own[seq];
    int32_t *pos = s->sim_pos, *tag = s->sim_tag;
    /* tag >= 0: an entry seq owns; tag < 0: -(1 + index into cand) */
    for (int32_t i = 0; i < n; i++) {
        pos[i] = s->e[own[i]].pos;
        tag[i] = own[i];
    }
    for (int32_t c = 0; c < m; c++) {
        pos[n]   = b->pos[s->cand[c]] + 1;
        tag[n++] = -1 - c;
        if (n > s->per_seq) {
            const int32_t v = thin_victim(pos, n);
            if (tag[v] >= 0)
                release(s, tag[v]);
            memmove(pos + v, pos + v + 1, (size_t)(n - v - 1) * sizeof *pos);
            memmove(tag + v, tag + v + 1, (size_t)(n - v - 1) * sizeof *tag);
            n--;
        }
    }
    int32_t kept = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t id = tag[i];
        if (id < 0) {
            const int32_t row = s->cand[-1 - id];
            if ((id = take(s)) < 0)
                continue;
            s->e[id] = (struct entry){.pos = pos[i], .owner = seq, .used = ++s->clock};
            dst[row] = state_of(s, id);
        }
        own[kept++] = id;
    }
    s->n_own[seq] = kept;
}

void snap_plan(struct snap_store *s, const struct hearth_batch *b, int32_t block_tokens,
               float **dst)
{
    for (int32_t t = 0; t < b->n; t++)
        dst[t] = NULL;
    if (!grow(s, b->n))
        return; /* a cache: without room to plan, this batch saves nothing */
    memset(s->seen, 0, (size_t)s->n_seq);
    for (int32_t t = 0; t < b->n; t++) {
        const int32_t seq = b->seq[t];
        if (s->seen[seq] || (b->pos[t] + 1) % block_tokens)
            continue;
        s->seen[seq] = 1;
        int32_t m    = 0;
        for (int32_t u = t; u < b->n; u++)
            if (b->seq[u] == seq && (b->pos[u] + 1) % block_tokens == 0)
                s->cand[m++] = u;
        plan_seq(s, b, seq, m, dst);
    }
}

static int32_t find_key(const struct snap_store *s, uint64_t key, int32_t pos)
{
    for (int32_t i = 0; i < s->cap; i++)
        if (s->e[i].key == key && s->e[i].pos == pos)
            return i;
    return -1;
}

/* Chain hash of the tokens up to seq's i-th block's end once published or reused, else 0. */
static uint64_t block_key(const struct kv_cache *kv, int32_t seq, int32_t i)
{
    const struct kv_seq *q = &kv->seqs[seq];
    return i >= 0 && i < q->n_chain ? q->chain[i] : 0;
}

void snap_bind(struct snap_store *s, const struct kv_cache *kv, int32_t seq)
{
    const int32_t *own = s->own + (size_t)seq * s->per_seq;
    for (int32_t i = 0; i < s->n_own[seq]; i++) {
        struct entry *e = &s->e[own[i]];
        if (e->key || e->unkeyable)
            continue;
        const uint64_t h = block_key(kv, seq, e->pos / kv->block_tokens - 1);
        if (!h)
            continue;
        /* one entry per key: a sequence that computed the same prefix first keeps it */
        if (find_key(s, h, e->pos) >= 0)
            e->unkeyable = true;
        else
            e->key = h;
    }
}

const float *snap_find(struct snap_store *s, const struct kv_cache *kv, int32_t seq, int32_t p0,
                       int32_t *pos)
{
    const int32_t bt = kv->block_tokens;
    int32_t limit = kv->seqs[seq].n_tokens, best = -1;
    if (p0 < limit)
        limit = p0;
    *pos               = 0;
    const int32_t *own = s->own + (size_t)seq * s->per_seq;
    for (int32_t i = 0; i < s->n_own[seq]; i++)
        if (s->e[own[i]].pos <= limit && (best < 0 || s->e[own[i]].pos > s->e[best].pos))
            best = own[i];
    for (int32_t i = limit / bt; i > 0 && (best < 0 || i * bt > s->e[best].pos); i--) {
        const uint64_t h = block_key(kv, seq, i - 1);
        const int32_t id = h ? find_key(s, h, i * bt) : -1;
        if (id >= 0) {
            best = id;
            break;
        }
    }
    if (best < 0)
        return NULL;
    s->e[best].used = ++s->clock;
    *pos            = s->e[best].pos;
    return state_of(s, best);
}

void snap_forget(struct snap_store *s, uint64_t hash)
{
    for (int32_t i = 0; i < s->cap; i++) {
        struct entry *e = &s->e[i];
        if (e->key != hash)
            continue;
        if (e->owner < 0) {
            *e = (struct entry){.owner = -1};
        } else {
            e->key       = 0;
            e->unkeyable = true;
        }
    }
}

void snap_disown(struct snap_store *s, int32_t seq, int32_t p0)
{
    int32_t *own = s->own + (size_t)seq * s->per_seq, kept = 0;
    for (int32_t i = 0; i < s->n_own[seq]; i++) {
        if (s->e[own[i]].pos > p0)
            release(s, own[i]);
        else
            own[kept++] = own[i];
    }
    s->n_own[seq] = kept;
}

void snap_stats(const struct snap_store *s, int32_t *owned, int32_t *cached)
{
    int32_t o = 0, c = 0;
    for (int32_t i = 0; i < s->cap; i++) {
        o += s->e[i].owner >= 0;
        c += s->e[i].owner < 0 && s->e[i].pos > 0;
    }
    if (owned)
        *owned = o;
    if (cached)
        *cached = c;
}
