/*
 * spm.c: the SentencePiece ("llama" tokenizer model) encoder, behaving as
 * llama.cpp's llm_tokenizer_spm_session does.
 *
 * One fragment at a time: spaces become "▁" (U+2581), the text is split into
 * UTF-8 characters (a malformed lead byte still claims the length it
 * announces, as llama.cpp does), then adjacent symbols are merged, best
 * first, while the merged text is a vocabulary token: best is the higher
 * score of that token, ties to the leftmost pair. Symbols left that are not
 * tokens fall back to one <0xNN> token per byte (or unknown).
 *
 * Cost: O(n log n) in the fragment's bytes; memory about 40 bytes per byte of
 * input while it runs.
 */
#include <stdlib.h>
#include <string.h>

#include "text/vocab.h"
#include "util/errfmt.h"
#include "util/heap.h"
#include "util/utf8.h"

/* A run of bytes of the escaped text; merged away when n == 0. */
struct sym {
    int32_t prev, next; /* neighbours in the chain, -1 at the ends */
    uint32_t off;       /* first byte in the escaped text */
    uint32_t n;         /* bytes, 0 once merged into its left neighbour */
};

/* A candidate merge of sym[left] and sym[right], valid while their sizes still add up to size. */
struct bigram {
    float score;  /* of the token the merged text is */
    int32_t left; /* sym index; right is left's neighbour when pushed */
    int32_t right;
    uint32_t size; /* bytes of the merged text when pushed */
};

/* a goes before b: higher score, then the leftmost. */
static bool before(const struct bigram *a, const struct bigram *b)
{
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

HEAP_DEFINE(heap, struct bigram, before)

/* Pushes the merge of left and right when their joined text is a token. */
static bool try_pair(const struct tokenizer *t, const char *text, const struct sym *syms,
                     struct heap *h, int32_t left, int32_t right)
{
    if (left < 0 || right < 0)
        return true;
    uint32_t size = syms[left].n + syms[right].n;
    int32_t id    = vocab_find(t, text + syms[left].off, size);
    if (id < 0)
        return true;
    struct bigram b = {.score = t->tokens[id].score, .left = left, .right = right, .size = size};
    return heap_push(h, b);
}

enum hearth_status spm_encode(const struct tokenizer *t, const char *text, size_t len,
                              bool prefix_space, struct id_buf *out, char *err, size_t err_len)
{
    static const char SPACE[3] = {'\xe2', '\x96', '\x81'}; /* U+2581 */
    enum hearth_status st      = HEARTH_OK;
    char *esc                  = NULL;
    struct sym *syms           = NULL;
    struct heap h              = {0};

    if (len > (INT32_MAX - 3) / 3)
        return fail(HEARTH_ERANGE, err, err_len,
                    "tokenizer: a text of %zu bytes is too long to tokenize at once", len);

    esc = malloc(3 * len + 3);
    if (!esc)
        goto nomem;
    size_t n_esc = 0;
    if (prefix_space) {
        memcpy(esc, SPACE, 3);
        n_esc = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(esc + n_esc, SPACE, 3);
            n_esc += 3;
        } else {
            esc[n_esc++] = text[i];
        }
    }
    if (n_esc == 0)
        goto done;

    syms = malloc(n_esc * sizeof *syms);
    if (!syms)
        goto nomem;
    int32_t n_syms = 0;
    for (size_t off = 0; off < n_esc;) {
        uint32_t n = (uint32_t)utf8_len((unsigned char)esc[off]);
        if (n > n_esc - off)
            n = (uint32_t)(n_esc - off);
        syms[n_syms] = (struct sym){.prev = n_syms - 1, .next = -1, .off = (uint32_t)off, .n = n};
        if (n_syms > 0)
            syms[n_syms - 1].next = n_syms;
        n_syms++;
        off += n;
    }

    for (int32_t i = 1; i < n_syms; i++)
        if (!try_pair(t, esc, syms, &h, i - 1, i))
            goto nomem;

    while (h.n > 0) {
        struct bigram b = heap_pop(&h);
        struct sym *l = &syms[b.left], *r = &syms[b.right];
        /* stale: one side was merged since this pair was pushed */
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size)
            continue;
        l->n += r->n;
        r->n    = 0;
        l->next = r->next;
        if (r->next >= 0)
            syms[r->next].prev = b.left;
        if (!try_pair(t, esc, syms, &h, l->prev, b.left) ||
            !try_pair(t, esc, syms, &h, b.left, l->next))
            goto nomem;
    }

    /* Every merged symbol is a token by construction; single characters may not be. */
    for (int32_t i = 0; i != -1; i = syms[i].next) {
        const struct sym *s = &syms[i];
        int32_t id          = vocab_find(t, esc + s->off, s->n);
        if (id >= 0) {
            if (!id_buf_push(out, id))
                goto nomem;
            continue;
        }
        for (uint32_t j = 0; j < s->n; j++) {
            unsigned char c = (unsigned char)esc[s->off + j];
            id              = t->byte_token[c] >= 0 ? t->byte_token[c] : t->unk;
            if (id < 0) {
                st = fail(HEARTH_EINVAL, err, err_len,
                          "tokenizer: byte 0x%02X has no <0x%02X> token and the vocab has no "
                          "unknown token to stand for it",
                          c, c);
                goto done;
            }
            if (!id_buf_push(out, id))
                goto nomem;
        }
    }
    goto done;

nomem:
    st = fail(HEARTH_ENOMEM, err, err_len, "tokenizer: out of memory tokenizing %zu bytes", len);
done:
    free(h.v);
    free(syms);
    free(esc);
    return st;
}
