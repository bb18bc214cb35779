/* turns.c: the tokens of recently finished jobs, and the prompt splice (turns.h). */
#include "sched/turns.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util/utf8.h"

/* Entries at most: a lookup compares each one's prompt. */
#define TURNS_MAX_ENTRIES 1024
/* A token's text longer than this ends a walk (no vocabulary has one in practice). */
#define PIECE_MAX 256

struct entry {
    hearth_token *tok; /* [n]: the prompt, then what was generated */
    int32_t n;
    uint64_t used; /* the clock when put or last spliced from */
};

struct turns {
    const struct hearth_model *model;
    pthread_mutex_t mu;
    struct entry *e;
    int32_t n_e;
    int64_t tokens, max_tokens;
    uint64_t clock;
    struct turns_stats st;
};

struct turns *turns_new(const struct hearth_model *model, int64_t max_tokens)
{
    struct turns *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->e = calloc(TURNS_MAX_ENTRIES, sizeof *t->e);
    if (!t->e) {
        free(t);
        return NULL;
    }
    t->model      = model;
    t->max_tokens = max_tokens < 1 ? 1 : max_tokens;
    pthread_mutex_init(&t->mu, NULL);
    return t;
}

void turns_free(struct turns *t)
{
    if (!t)
        return;
    for (int32_t i = 0; i < t->n_e; i++)
        free(t->e[i].tok);
    free(t->e);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

static void drop(struct turns *t, int32_t i)
{
    t->tokens -= t->e[i].n;
    free(t->e[i].tok);
    t->e[i] = t->e[--t->n_e];
}

void turns_put(struct turns *t, const hearth_token *tokens, int32_t n_prompt, int32_t n)
{
    if (!t || n <= n_prompt || n_prompt < 1 || n > t->max_tokens)
        return;
    hearth_token *copy = malloc((size_t)n * sizeof *copy);
    if (!copy)
        return; /* a reply recomputed later, nothing worse */
    memcpy(copy, tokens, (size_t)n * sizeof *copy);
    pthread_mutex_lock(&t->mu);
    /* an earlier turn of this conversation: this one holds all it did */
    for (int32_t i = t->n_e - 1; i >= 0; i--)
        if (t->e[i].n <= n && !memcmp(t->e[i].tok, tokens, (size_t)t->e[i].n * sizeof *tokens))
            drop(t, i);
    while (t->n_e == TURNS_MAX_ENTRIES || (t->n_e > 0 && t->tokens + n > t->max_tokens)) {
        int32_t old = 0;
        for (int32_t i = 1; i < t->n_e; i++)
            if (t->e[i].used < t->e[old].used)
                old = i;
        drop(t, old);
    }
    t->e[t->n_e++] = (struct entry){copy, n, ++t->clock};
    t->tokens += n;
    pthread_mutex_unlock(&t->mu);
}

/*
 * One side of a walk: tokens turned into the bytes a client sees, a control
 * token (no text) as 0xFF and its id, which no text has. The generated side
 * goes through the server's replacement of invalid UTF-8 (oai_text_json:
 * each byte no character takes becomes U+FFFD), an unfinished sequence held
 * until the next token finishes it; the prompt side is the client's text.
 */
struct side {
    const hearth_token *tok;
    int32_t n, i;                    /* tokens, and how many are taken */
    bool clean;                      /* the generated side */
    char q[3 * (PIECE_MAX + 4) + 8]; /* bytes given and not yet compared: q[q0..q0 + nq) */
    int q0, nq;
    char hold[4]; /* clean: an unfinished UTF-8 sequence */
    int nh;
};

/* Appends b[0..n) to s's bytes as a client sees them; an unfinished end is held. */
static void give(struct side *s, const char *b, int n, bool last)
{
    for (int i = 0; i < n;) {
        uint32_t cp;
        size_t len = utf8_decode(b + i, (size_t)(n - i), &cp);
        if (!len && !last && utf8_tail_len(b + i, (size_t)(n - i)) == (size_t)(n - i)) {
            memcpy(s->hold, b + i, (size_t)(n - i));
            s->nh = n - i;
            return;
        }
        if (len) {
            memcpy(s->q + s->nq, b + i, len);
            s->nq += (int)len;
            i += (int)len;
        } else {
            memcpy(s->q + s->nq, "\xef\xbf\xbd", 3);
            s->nq += 3;
            i++;
        }
    }
}

/* Takes s's next token onto its bytes (s->nq is 0). false at the end, or where the walk
 * must stop: a token's text past PIECE_MAX, a control token after an unfinished sequence. */
static bool take(const struct hearth_model *m, struct side *s)
{
    s->q0 = s->nq = 0;
    if (s->i == s->n) {
        if (!s->nh)
            return false;
        char b[4];
        const int n = s->nh;
        memcpy(b, s->hold, (size_t)n);
        s->nh = 0;
        give(s, b, n, true); /* the server's last bytes: what was held is replaced */
        return true;
    }
    const hearth_token t = s->tok[s->i++];
    char b[PIECE_MAX + 4];
    const int held = s->clean ? s->nh : 0;
    memcpy(b, s->hold, (size_t)held);
    const size_t k = hearth_token_to_piece(m, t, b + held, PIECE_MAX);
    if (k > PIECE_MAX)
        return false;
    if (k == 0) { /* control: in a client's text only where the same token is */
        if (held)
            return false;
        s->q[0] = (char)0xFF;
        memcpy(s->q + 1, &t, sizeof t);
        s->nq = 1 + (int)sizeof t;
        return true;
    }
    if (!s->clean) {
        memcpy(s->q, b, k);
        s->nq = (int)k;
        return true;
    }
    s->nh = 0;
    give(s, b, held + (int)k, false);
    return true;
}

/*
 * Walks the generated g[0..ng) and the prompt's p[0..np) byte by byte from
 * their start: the last point where both have given the same bytes, each at
 * the end of a token with nothing held (*gi, *pi tokens taken), before the
 * bytes part or one side ends.
 */
static void walk(const struct hearth_model *m, const hearth_token *g, int32_t ng,
                 const hearth_token *p, int32_t np, int32_t *gi, int32_t *pi)
{
    struct side a = {.tok = g, .n = ng, .clean = true}, b = {.tok = p, .n = np};
    *gi = *pi = 0;
    for (;;) {
        if (!a.nq && !b.nq && !a.nh) {
            *gi = a.i;
            *pi = b.i;
        }
        if (!a.nq && !take(m, &a))
            return;
        if (!b.nq && !take(m, &b))
            return;
        const int c = a.nq < b.nq ? a.nq : b.nq;
        if (memcmp(a.q + a.q0, b.q + b.q0, (size_t)c))
            return;
        a.q0 += c;
        a.nq -= c;
        b.q0 += c;
        b.nq -= c;
    }
}

int32_t turns_splice(struct turns *t, hearth_token **ids, size_t *n, int32_t n_ctx)
{
    if (!t || *n >= INT32_MAX)
        return 0;
    const hearth_token *p = *ids;
    const int32_t np      = (int32_t)*n;
    if (n_ctx <= 0)
        n_ctx = INT32_MAX;
    pthread_mutex_lock(&t->mu);
    /* the entry whose tokens the prompt's text begins with the most of; ties to the newest.
     * From where the tokens part the bytes are walked: the replies of every earlier turn
     * (spliced when they came back) and this one's. */
    int32_t best = -1, best_e = 0, best_p = 0;
    for (int32_t i = 0; i < t->n_e; i++) {
        const struct entry *e = &t->e[i];
        int32_t c             = 0;
        while (c < e->n && c < np && e->tok[c] == p[c])
            c++;
        if (c == 0)
            continue;
        int32_t gi, pi;
        walk(t->model, e->tok + c, e->n - c, p + c, np - c, &gi, &pi);
        if (gi == 0 || np - pi + gi >= n_ctx)
            continue; /* the tokens are the same as far as the text is, or past the context */
        if (best < 0 || c + gi > best_e || (c + gi == best_e && e->used > t->e[best].used)) {
            best   = i;
            best_e = c + gi;
            best_p = c + pi;
        }
    }
    int32_t put = 0;
    if (best >= 0) {
        struct entry *e   = &t->e[best];
        const int32_t len = np - best_p + best_e;
        hearth_token *out = malloc((size_t)len * sizeof *out);
        if (!out) {
            put = -1;
        } else {
            memcpy(out, e->tok, (size_t)best_e * sizeof *out);
            memcpy(out + best_e, p + best_p, (size_t)(np - best_p) * sizeof *out);
            free(*ids);
            *ids    = out;
            *n      = (size_t)len;
            e->used = ++t->clock;
            put     = best_e;
            t->st.spliced_prompts++;
            t->st.spliced_tokens += (uint64_t)best_e;
        }
    }
    pthread_mutex_unlock(&t->mu);
    return put;
}

void turns_stats(struct turns *t, struct turns_stats *out)
{
    if (!t) {
        *out = (struct turns_stats){0};
        return;
    }
    pthread_mutex_lock(&t->mu);
    *out         = t->st;
    out->tokens  = t->tokens;
    out->entries = t->n_e;
    pthread_mutex_unlock(&t->mu);
}
