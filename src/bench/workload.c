/*
 * workload.c: the prompts of `hearth bench`. They are made of common English
 * words drawn by a seeded generator, so a run's prompts are the same on every
 * machine for a seed and differ between requests (no prefix shared by
 * accident). Their size in tokens is asked of the server, which has the
 * tokenizer: bench never needs the model file.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_int.h"
#include "util/errfmt.h"
#include "util/rng.h"

#include <cjson/cJSON.h>

/* Frequent words of every kind, so any English tokenizer takes them in one or two tokens. */
/* clang-format off */
static const char *const words[] = {
    "the",     "of",     "and",    "to",      "in",      "is",     "was",     "for",    "on",
    "that",    "with",   "as",     "it",      "by",      "at",     "from",    "his",    "her",
    "they",    "we",     "you",    "this",    "had",     "not",    "but",     "what",   "all",
    "were",    "when",   "there",  "can",     "an",      "which",  "their",   "said",   "if",
    "do",      "will",   "each",   "about",   "how",     "up",     "out",     "them",   "then",
    "she",     "many",   "some",   "so",      "these",   "would",  "other",   "into",   "has",
    "more",    "two",    "like",   "him",     "see",     "time",   "could",   "no",     "make",
    "than",    "first",  "been",   "its",     "who",     "now",    "people",  "my",     "made",
    "over",    "did",    "down",   "only",    "way",     "find",   "use",     "may",    "water",
    "long",    "little", "very",   "after",   "words",   "called", "just",    "where",  "most",
    "know",    "get",    "through", "back",   "much",    "before", "go",      "good",   "new",
    "write",   "our",    "used",   "me",      "man",     "too",    "any",     "day",    "same",
    "right",   "look",   "think",  "also",    "around",  "another", "came",   "come",   "work",
    "three",   "word",   "must",   "because", "does",    "part",   "even",    "place",  "well",
    "such",    "here",   "take",   "why",     "things",  "help",   "put",     "years",  "different",
    "away",    "again",  "off",    "went",    "old",     "number", "great",   "tell",   "men",
    "say",     "small",  "every",  "found",   "still",   "between", "name",   "should", "home",
    "big",     "give",   "air",    "line",    "set",     "own",    "under",   "read",   "last",
    "never",   "us",     "left",   "end",     "along",   "while",  "might",   "next",   "sound",
    "below",   "saw",    "something", "thought", "both", "few",    "those",   "always", "looked",
    "show",    "large",  "often",  "together", "asked",  "house",  "world",   "going",  "want",
    "school",  "important", "until", "form",  "food",    "keep",   "children", "feet",  "land",
    "side",    "without", "boy",   "once",    "animals", "life",   "enough",  "took",   "sometimes",
    "four",    "head",   "above",  "kind",    "began",   "almost", "live",    "page",   "got",
    "earth",   "need",   "far",    "hand",    "high",    "year",   "mother",  "light",  "parts",
    "country", "father", "let",    "night",   "following", "picture", "being", "study", "second",
    "eyes",    "soon",   "times",  "story",   "boys",    "since",  "white",   "days",   "ever",
    "paper",   "hard",   "near",   "sentence", "better", "best",   "across",  "during", "today",
    "others",  "however", "sure",  "means",   "knew",    "try",    "told",    "young",  "miles",
    "sun",     "ways",   "thing",  "whole",   "hear",    "example", "heard",  "several", "change",
    "answer",  "room",   "sea",    "against", "top",     "turned", "learn",   "point",  "city",
    "play",    "toward", "five",   "using",   "himself", "usually",
};
/* clang-format on */
#define N_WORDS (sizeof words / sizeof words[0])

void wl_words(struct strbuf *b, uint64_t seed, int n_words)
{
    uint64_t st  = seed;
    int sentence = 0; /* words left in this sentence */
    for (int i = 0; i < n_words; i++) {
        uint64_t r = splitmix64(&st);
        if (!sentence)
            sentence = 8 + (int)(r >> 61); /* 8..15 words */
        if (b->len)
            strbuf_addn(b, " ", 1);
        strbuf_add(b, words[(r & 0xffffffff) % N_WORDS]);
        if (--sentence == 0 || i == n_words - 1)
            strbuf_addn(b, ".", 1);
    }
}

/* The token count of text by POST /tokenize with body, or -1. */
static long tokenize_count(const struct bench_opts *o, cJSON *body)
{
    char *json = cJSON_PrintUnformatted(body);
    if (!json)
        return -1;
    struct httpc_request req = {
        .method    = "POST",
        .path      = "/tokenize",
        .body      = json,
        .body_len  = strlen(json),
        .api_key   = o->api_key,
        .timeout_s = o->timeout_s,
        .stop_fd   = o->stop_fd,
    };
    char *answer = NULL;
    struct httpc_result res;
    httpc_fetch(&o->target, &req, 16u << 20, &answer, &res);
    free(json);
    long n = -1;
    if (res.outcome == HTTPC_OK && res.status == 200 && answer) {
        cJSON *a = cJSON_Parse(answer);
        cJSON *t = cJSON_GetObjectItemCaseSensitive(a, "tokens");
        if (cJSON_IsArray(t))
            n = cJSON_GetArraySize(t);
        cJSON_Delete(a);
    }
    free(answer);
    return n;
}

double wl_tokens_per_word(const struct bench_opts *o, const char *model, char *note,
                          size_t note_len)
{
    enum { SAMPLE = 400 };
    struct strbuf text = {0};
    wl_words(&text, 0x5eed, SAMPLE);
    cJSON *body = cJSON_CreateObject();
    cJSON_AddStringToObject(body, "content", bench_str(&text));
    long n = tokenize_count(o, body);
    cJSON_Delete(body);
    if (n <= 0) { /* vLLM's shape */
        body = cJSON_CreateObject();
        cJSON_AddStringToObject(body, "model", model);
        cJSON_AddStringToObject(body, "prompt", bench_str(&text));
        n = tokenize_count(o, body);
        cJSON_Delete(body);
    }
    strbuf_free(&text);
    if (n <= 0) {
        set_err(note, note_len,
                "prompts sized at 1.3 tokens per word: the server has no /tokenize");
        return 1.3;
    }
    double r = (double)n / SAMPLE;
    set_err(note, note_len, "prompts sized by the server's /tokenize: %.3f tokens per word", r);
    return r;
}

/* What --compare sends when no --prompts file is given: openings of short stories and tasks. */
/* clang-format off */
static const char *const builtin[] = {
    "Once upon a time",
    "The little dog ran to the park and",
    "Lily and Tom went to the beach. They",
    "The capital of France is",
    "def fibonacci(n):",
    "Here is a list of three colors: red,",
    "One day, a big bird",
    "The sun was hot, so the children",
};
/* clang-format on */

int wl_load_prompts(const char *path, char ***out, char *err, size_t err_len)
{
    if (!path) {
        int n = (int)(sizeof builtin / sizeof *builtin);
        *out  = malloc((size_t)n * sizeof **out);
        for (int i = 0; i < n; i++)
            (*out)[i] = strdup(builtin[i]);
        return n;
    }
    FILE *f = fopen(path, "r");
    if (!f)
        return fail(-1, err, err_len, "bench: cannot read --prompts %s: %m", path);
    int n = 0, cap = 0;
    char *line  = NULL;
    size_t lcap = 0;
    ssize_t len;
    *out = NULL;
    while ((len = getline(&line, &lcap, f)) >= 0) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = 0;
        if (!len)
            continue;
        if (n == cap) {
            cap      = cap ? 2 * cap : 16;
            char **p = realloc(*out, (size_t)cap * sizeof *p);
            if (!p)
                abort();
            *out = p;
        }
        (*out)[n++] = strdup(line);
    }
    free(line);
    fclose(f);
    if (!n)
        return fail(-1, err, err_len, "bench: --prompts %s has no prompt", path);
    return n;
}
