/*
 * vocab.c: a vocabulary's token bytes for the grammar engine.
 *
 * The TEXT tokens are kept sorted by their bytes, with the length each
 * shares with the one before: that sorted list is a byte trie laid out in
 * depth-first order, so a walk can reuse the parse state of a shared prefix
 * and skip every token under a dead prefix at once; the trie is also kept
 * explicit (a node per distinct prefix, in preorder, with the end of its
 * subtree) so a walk jumps past a dead subtree in one step. Sizes: 150k
 * tokens of about 7 bytes, a few MB, of which the trie is 540k nodes of
 * 12 bytes (6.2 MiB).
 */
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_int.h"
#include "model/model.h"
#include "text/tokenizer.h"

static int cmp_tok(const void *a, const void *b, void *arg)
{
    const struct grammar_vocab *v = arg;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    uint32_t lx = v->lens[x], ly = v->lens[y];
    int c = memcmp(gv_bytes(v, x), gv_bytes(v, y), lx < ly ? lx : ly);
    if (c)
        return c;
    if (lx != ly)
        return lx < ly ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* The trie of the sorted tokens: token i adds the nodes of its bytes past those it shares. */
static bool build_trie(struct grammar_vocab *v)
{
    uint64_t n_nodes = 0;
    for (int32_t i = 0; i < v->n_text; i++)
        n_nodes += v->lens[v->order[i]] - v->lcp[i];
    if (n_nodes >= INT32_MAX)
        return false;
    v->trie        = malloc(((size_t)n_nodes + 1) * sizeof *v->trie);
    uint32_t *open = malloc(((size_t)v->max_len + 1) * sizeof *open); /* node at each depth */
    if (!v->trie || !open) {
        free(open);
        return false;
    }
    uint32_t n_open = 0, at = 0;
    for (int32_t i = 0; i < v->n_text; i++) {
        int32_t tok      = v->order[i];
        const uint8_t *b = gv_bytes(v, tok);
        for (; n_open > v->lcp[i]; n_open--)
            v->trie[open[n_open - 1]].end = at;
        for (uint32_t d = v->lcp[i] + 1; d <= v->lens[tok]; d++) {
            v->trie[at]    = (struct gtrie_node){0, i, d << 9 | b[d - 1]};
            open[n_open++] = at++;
        }
        v->trie[open[n_open - 1]].db |= GT_ENDS;
    }
    for (; n_open > 0; n_open--)
        v->trie[open[n_open - 1]].end = at;
    v->n_trie = (int32_t)at;
    free(open);
    return true;
}

struct grammar_vocab *grammar_vocab_new(int32_t n, const char *const *bytes, const uint32_t *lens,
                                        const uint8_t *kinds)
{
    if (n < 0)
        return NULL;
    struct grammar_vocab *v = calloc(1, sizeof *v);
    if (!v)
        return NULL;
    uint64_t total = 0;
    for (int32_t i = 0; i < n; i++) {
        total += lens[i];
        if (lens[i] >= GV_MAX_TOKEN_LEN)
            goto fail;
    }
    if (total > UINT32_MAX)
        goto fail;
    v->n     = n;
    v->kinds = malloc((size_t)n + 1);
    v->off   = malloc(((size_t)n + 1) * sizeof *v->off);
    v->lens  = malloc(((size_t)n + 1) * sizeof *v->lens);
    v->bytes = malloc(total + 1);
    v->order = malloc(((size_t)n + 1) * sizeof *v->order);
    v->lcp   = malloc(((size_t)n + 1) * sizeof *v->lcp);
    v->eog   = malloc(((size_t)n + 1) * sizeof *v->eog);
    if (!v->kinds || !v->off || !v->lens || !v->bytes || !v->order || !v->lcp || !v->eog)
        goto fail;
    uint32_t at = 0;
    for (int32_t i = 0; i < n; i++) {
        uint8_t k   = kinds[i] <= GRAMMAR_TOKEN_CONTROL ? kinds[i] : GRAMMAR_TOKEN_CONTROL;
        v->kinds[i] = k;
        v->off[i]   = at;
        v->lens[i]  = lens[i];
        if (lens[i])
            memcpy(v->bytes + at, bytes[i], lens[i]);
        at += lens[i];
        if (k == GRAMMAR_TOKEN_TEXT && lens[i] > 0)
            v->order[v->n_text++] = i;
        if (k == GRAMMAR_TOKEN_EOG)
            v->eog[v->n_eog++] = i;
        if (lens[i] > v->max_len)
            v->max_len = lens[i];
    }
    qsort_r(v->order, (size_t)v->n_text, sizeof *v->order, cmp_tok, v);
    for (int32_t i = 0; i < v->n_text; i++) {
        uint32_t l = 0;
        if (i > 0) {
            int32_t a = v->order[i - 1], b = v->order[i];
            uint32_t m       = v->lens[a] < v->lens[b] ? v->lens[a] : v->lens[b];
            const uint8_t *x = gv_bytes(v, a), *y = gv_bytes(v, b);
            while (l < m && x[l] == y[l])
                l++;
        }
        v->lcp[i] = l;
    }
    if (!build_trie(v))
        goto fail;
    return v;
fail:
    grammar_vocab_free(v);
    return NULL;
}

struct grammar_vocab *grammar_vocab_from_tokenizer(const struct tokenizer *t)
{
    int32_t n               = tokenizer_n_vocab(t);
    char **bytes            = calloc((size_t)n + 1, sizeof *bytes);
    uint32_t *lens          = calloc((size_t)n + 1, sizeof *lens);
    uint8_t *kinds          = calloc((size_t)n + 1, 1);
    struct grammar_vocab *v = NULL;
    if (!bytes || !lens || !kinds)
        goto done;
    for (int32_t i = 0; i < n; i++) {
        char buf[256];
        size_t k = tokenizer_decode_token(t, i, buf, sizeof buf);
        bytes[i] = malloc(k + 1);
        if (!bytes[i])
            goto done;
        if (k <= sizeof buf)
            memcpy(bytes[i], buf, k);
        else
            tokenizer_decode_token(t, i, bytes[i], k);
        lens[i]  = (uint32_t)k;
        kinds[i] = tokenizer_is_eog(t, i) ? GRAMMAR_TOKEN_EOG
                   : k == 0               ? GRAMMAR_TOKEN_CONTROL
                                          : GRAMMAR_TOKEN_TEXT;
    }
    v = grammar_vocab_new(n, (const char *const *)bytes, lens, kinds);
done:
    if (bytes)
        for (int32_t i = 0; i < n; i++)
            free(bytes[i]);
    free(bytes);
    free(lens);
    free(kinds);
    return v;
}

struct grammar_vocab *grammar_vocab_from_model(const struct hearth_model *model)
{
    return grammar_vocab_from_tokenizer(model->tok);
}

void grammar_vocab_free(struct grammar_vocab *v)
{
    if (!v)
        return;
    free(v->kinds);
    free(v->off);
    free(v->lens);
    free(v->bytes);
    free(v->order);
    free(v->lcp);
    free(v->trie);
    free(v->eog);
    free(v);
}

int32_t grammar_vocab_size(const struct grammar_vocab *v)
{
    return v ? v->n : 0;
}
