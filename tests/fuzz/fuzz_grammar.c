/*
 * fuzz_grammar.c: libFuzzer target for the GBNF parser and the grammar
 * engine, which take grammars from requests. The input is the grammar
 * text; when it parses it is compiled against a small built-in vocabulary
 * (bytes, pairs, a UTF-8 character cut in pieces, EOG, a control token)
 * and driven along a bounded walk: at each step the fast mask is compared
 * with the naive one, a token of the mask is accepted. Any status is fine;
 * a crash, a leak, undefined behaviour, a disagreement or a slow input is
 * the bug. Seeds: tests/fuzz/corpus/grammar.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_int.h"

static struct grammar_vocab *vocab;

static struct grammar_vocab *make_vocab(void)
{
    static const char *const extra[] = {
        "ab",   "a\"",  "\"}",  "{\"",          "\": ",     ", ",       "12",
        "\xe4", "\xb8", "\xad", "\xe4\xb8\xad", "\xe4\xb8", "\xb8\xad", "true",
        "null", "\n  ", "x{",   "<eos>",        "<ctl>"};
    enum { N_EXTRA = sizeof extra / sizeof *extra };
    static char single[128][1];
    const char *bytes[128 + N_EXTRA];
    uint32_t lens[128 + N_EXTRA];
    uint8_t kinds[128 + N_EXTRA];
    for (int i = 0; i < 128; i++) {
        single[i][0] = (char)(i < 96 ? i + 32 : 0x80 + (i - 96) * 3);
        bytes[i]     = single[i];
        lens[i]      = 1;
        kinds[i]     = GRAMMAR_TOKEN_TEXT;
    }
    for (int i = 0; i < N_EXTRA; i++) {
        bytes[128 + i] = extra[i];
        lens[128 + i]  = (uint32_t)strlen(extra[i]);
        kinds[128 + i] = i == N_EXTRA - 2   ? GRAMMAR_TOKEN_EOG
                         : i == N_EXTRA - 1 ? GRAMMAR_TOKEN_CONTROL
                                            : GRAMMAR_TOKEN_TEXT;
    }
    return grammar_vocab_new(128 + N_EXTRA, bytes, lens, kinds);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!vocab)
        vocab = make_vocab();
    char err[HEARTH_ERR_MAX];
    if (grammar_check((const char *)data, size, NULL, err, sizeof err) != HEARTH_OK)
        return 0;
    struct grammar *g = NULL;
    if (grammar_compile((const char *)data, size, NULL, vocab, NULL, &g, err, sizeof err) !=
        HEARTH_OK)
        return 0;
    struct grammar_matcher *m = grammar_matcher_new(g, NULL, 0);
    uint32_t fast[8] = {0}, naive[8] = {0}; /* 256 bits: the vocab has fewer tokens */
    uint64_t seed = size;
    for (int step = 0; m && step < 24; step++) {
        int32_t nf = grammar_matcher_mask(m, fast, err, sizeof err);
        int32_t nn = grammar_matcher_mask_naive(m, naive, err, sizeof err);
        if (nf < 0 || nn < 0)
            break;
        if (nf != nn || memcmp(fast, naive, sizeof fast) != 0)
            abort();
        for (int32_t t = 0; t < grammar_vocab_size(vocab); t++)
            if (grammar_matcher_allows(m, t) != (bool)(naive[t >> 5] >> (t & 31) & 1))
                abort();
        if (nf == 0 || grammar_matcher_must_end(m))
            break;
        seed         = seed * 6364136223846793005ull + 1442695040888963407ull;
        int32_t want = (int32_t)((seed >> 33) % (uint64_t)nf), pick = -1;
        for (int32_t t = 0, k = 0; t < grammar_vocab_size(vocab) && pick < 0; t++)
            if (fast[t >> 5] >> (t & 31) & 1 && k++ == want)
                pick = t;
        if (vocab->kinds[pick] == GRAMMAR_TOKEN_EOG)
            break;
        if (!grammar_matcher_accept(m, pick, err, sizeof err))
            break;
    }
    grammar_matcher_free(m);
    grammar_unref(g);
    return 0;
}
