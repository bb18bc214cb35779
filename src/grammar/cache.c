/*
 * cache.c: compiled grammars kept for reuse (grammar.h, grammar_cache).
 *
 * An agent sends the same tools, and so the same grammar text, on every
 * turn of its loop, and compiling a grammar against a large vocabulary
 * costs far more than a turn's prefill. The cache holds the last few
 * grammars compiled for one vocabulary, keyed by their whole text and
 * root, least recently used first out. Failed compiles are not kept.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"

struct centry {
    uint64_t hash;
    char *text; /* len bytes, then the root name, NUL-terminated */
    size_t len;
    struct grammar *g;
    uint64_t used;
};

struct grammar_cache {
    const struct grammar_vocab *vocab;
    pthread_mutex_t mu;
    struct centry *e; /* [cap] */
    int32_t cap, n;
    uint64_t tick;
};

static uint64_t fnv1a(const char *s, size_t n, const char *root)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    for (; *root; root++)
        h = (h ^ (unsigned char)*root) * 1099511628211ull;
    return h;
}

struct grammar_cache *grammar_cache_new(const struct grammar_vocab *vocab, int32_t capacity)
{
    struct grammar_cache *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->cap   = capacity > 0 ? capacity : 1;
    c->vocab = vocab;
    c->e     = calloc((size_t)c->cap, sizeof *c->e);
    if (!c->e || pthread_mutex_init(&c->mu, NULL) != 0) {
        free(c->e);
        free(c);
        return NULL;
    }
    return c;
}

void grammar_cache_free(struct grammar_cache *c)
{
    if (!c)
        return;
    for (int32_t i = 0; i < c->n; i++) {
        grammar_unref(c->e[i].g);
        free(c->e[i].text);
    }
    free(c->e);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

const struct grammar_vocab *grammar_cache_vocab(const struct grammar_cache *c)
{
    return c->vocab;
}

static bool same(const struct centry *e, uint64_t h, const char *text, size_t len, const char *root)
{
    return e->hash == h && e->len == len && !memcmp(e->text, text, len) &&
           !strcmp(e->text + len, root);
}

/* The entry for the key, or NULL; marks it used. Under the lock. */
static struct grammar *find(struct grammar_cache *c, uint64_t h, const char *text, size_t len,
                            const char *root)
{
    for (int32_t i = 0; i < c->n; i++)
        if (same(&c->e[i], h, text, len, root)) {
            c->e[i].used = ++c->tick;
            return c->e[i].g;
        }
    return NULL;
}

enum hearth_status grammar_cache_compile(struct grammar_cache *c, const char *text, size_t len,
                                         const char *root, const atomic_int *cancel,
                                         struct grammar **out, char *err, size_t err_len)
{
    *out = NULL;
    if (!root)
        root = "root";
    uint64_t h = fnv1a(text, len, root);
    pthread_mutex_lock(&c->mu);
    struct grammar *g = find(c, h, text, len, root);
    if (g)
        *out = grammar_ref(g);
    pthread_mutex_unlock(&c->mu);
    if (*out)
        return HEARTH_OK;
    /* compiled unlocked: a lookup never waits for someone else's compile */
    enum hearth_status st = grammar_compile(text, len, root, c->vocab, cancel, &g, err, err_len);
    if (st != HEARTH_OK)
        return st;
    size_t rl = strlen(root);
    char *key = malloc(len + rl + 1);
    if (key) {
        memcpy(key, text, len);
        memcpy(key + len, root, rl + 1);
    }
    pthread_mutex_lock(&c->mu);
    if (key && !find(c, h, text, len, root)) {
        int32_t slot = 0;
        if (c->n < c->cap) {
            slot = c->n++;
        } else { /* full: the least recently used goes */
            for (int32_t i = 1; i < c->n; i++)
                if (c->e[i].used < c->e[slot].used)
                    slot = i;
            grammar_unref(c->e[slot].g);
            free(c->e[slot].text);
        }
        c->e[slot] = (struct centry){h, key, len, grammar_ref(g), ++c->tick};
        key        = NULL;
    }
    pthread_mutex_unlock(&c->mu);
    free(key);
    *out = g;
    return HEARTH_OK;
}
