/*
 * grammar.h: constrained decoding. A GBNF grammar (llama.cpp's syntax)
 * compiled against one vocabulary masks, at each step, every token that
 * cannot continue it.
 *
 * Three objects:
 *   - struct grammar_vocab: the bytes of every token of a vocabulary, in a
 *     trie, and which tokens end generation. Built once per model; immutable,
 *     shared by every thread.
 *   - struct grammar: a parsed grammar bound to a vocab, with its per-state
 *     token sets precomputed (the mask is a union of those sets plus a check
 *     of the few tokens whose fate depends on the enclosing rules).
 *     Immutable after grammar_compile; shared by every generation using it
 *     (reference counted).
 *   - struct grammar_matcher: one generation's position in a grammar. Owned
 *     by one thread.
 *
 * Characters are matched as bytes: a character class over code points is
 * compiled to the UTF-8 byte sequences of its ranges, so a token that ends
 * inside a multi-byte character, or starts inside one, needs no special
 * case. Text is expected to be valid UTF-8 where the grammar's classes say
 * so.
 *
 * Pathological grammars are refused at compile time (left recursion,
 * including through rules that match the empty string; a compile that
 * would pass its budget of parser states, stacks or steps: grammar_int.h,
 * struct gbudget, so that any text is refused in well under a second on a
 * small vocabulary) or bounded at run time (GRAMMAR_MAX_STACKS live parse
 * stacks, GRAMMAR_MAX_DEPTH nesting): a matcher that would pass a bound
 * fails the step with an error, never hangs.
 */
#ifndef HEARTH_GRAMMAR_H
#define HEARTH_GRAMMAR_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hearth.h"

#define GRAMMAR_MAX_STACKS 4096 /* live parse stacks of one matcher */
#define GRAMMAR_MAX_DEPTH  1024 /* nesting of one stack */
#define GRAMMAR_MAX_RULES  65536

/* ---------------------------------------------------------------- vocab --- */

enum grammar_token_kind {
    GRAMMAR_TOKEN_TEXT,    /* matched by its bytes */
    GRAMMAR_TOKEN_EOG,     /* end of generation: allowed only where the grammar may end */
    GRAMMAR_TOKEN_CONTROL, /* never allowed while a grammar is active */
};

struct grammar_vocab;

/*
 * A vocab of n tokens: token i's bytes are bytes[i][0..lens[i]), its kind
 * kinds[i]. Copies everything it needs. A TEXT token of 0 bytes is never
 * allowed. NULL when out of memory or a token is 8 MiB or longer.
 */
struct grammar_vocab *grammar_vocab_new(int32_t n, const char *const *bytes, const uint32_t *lens,
                                        const uint8_t *kinds);
/* A model's vocab: bytes as hearth_token_to_piece gives them, EOG as hearth_token_is_eog says,
 * tokens with 0 bytes CONTROL. */
struct grammar_vocab *grammar_vocab_from_model(const struct hearth_model *model);
void grammar_vocab_free(struct grammar_vocab *v);
int32_t grammar_vocab_size(const struct grammar_vocab *v);

/* -------------------------------------------------------------- grammar --- */

struct grammar;

/*
 * Parses len bytes of GBNF text and compiles it against vocab (which must
 * outlive the grammar; NULL: a grammar for grammar_accepts_string only, no
 * matcher). root: the start rule's name (NULL: "root").
 * On error returns HEARTH_EINVAL with err = "line L, column C: what" (or a
 * message naming the rule for errors that have no place, such as left
 * recursion or an undefined rule, or naming the cost for a grammar past the
 * compile's budget: "the grammar would need more than 32768 parser
 * states"), and *out NULL. HEARTH_ENOMEM only when memory ran out.
 * cancel (NULL: none) is read as the compile runs; once nonzero the compile
 * stops within a few thousand steps and returns HEARTH_ECANCELED.
 */
enum hearth_status grammar_compile(const char *text, size_t len, const char *root,
                                   const struct grammar_vocab *vocab, const atomic_int *cancel,
                                   struct grammar **out, char *err, size_t err_len);
/* Parses only (no vocab, no precomputation): the syntax check the fuzz target runs. */
enum hearth_status grammar_check(const char *text, size_t len, const char *root, char *err,
                                 size_t err_len);
struct grammar *grammar_ref(struct grammar *g);
void grammar_unref(struct grammar *g);

/* ---------------------------------------------------------------- cache --- */

/*
 * The last `capacity` grammars compiled against one vocab, reused when the
 * same text and root come again (an agent resends its tools every turn).
 * Thread-safe. grammar_cache_compile is grammar_compile through the cache:
 * *out is a new reference either way.
 */
struct grammar_cache;

struct grammar_cache *grammar_cache_new(const struct grammar_vocab *vocab, int32_t capacity);
void grammar_cache_free(struct grammar_cache *c);
const struct grammar_vocab *grammar_cache_vocab(const struct grammar_cache *c);
enum hearth_status grammar_cache_compile(struct grammar_cache *c, const char *text, size_t len,
                                         const char *root, const atomic_int *cancel,
                                         struct grammar **out, char *err, size_t err_len);

/* -------------------------------------------------------------- matcher --- */

struct grammar_matcher;

/*
 * A matcher at the start of g (it takes a reference). Lazy: with triggers
 * (n_triggers > 0), the matcher allows every token until the generated
 * text contains one of the trigger strings; from then on the grammar
 * applies to the text from the trigger's first byte (which it must accept:
 * a trigger is where the grammar begins, e.g. "<tool_call>"). Triggers are
 * copied. NULL when out of memory.
 */
struct grammar_matcher *grammar_matcher_new(struct grammar *g, const char *const *triggers,
                                            int32_t n_triggers);
void grammar_matcher_free(struct grammar_matcher *m);

/* Whether the grammar is applying now (always true when not lazy). */
bool grammar_matcher_active(const struct grammar_matcher *m);

/*
 * The allowed tokens now: allowed[i >> 5] bit (i & 31) for token i, for
 * every token of the vocab ((n_vocab + 31) / 32 words). Returns how many
 * are allowed (0: the grammar cannot continue, which a matcher reaching
 * an accepting state never does, since EOG is then allowed), or -1 with
 * err when a run-time bound was passed.
 */
int32_t grammar_matcher_mask(struct grammar_matcher *m, uint32_t *allowed, char *err,
                             size_t err_len);

/* Whether token tok is allowed now (the sampler's fast path: cheaper than a mask). */
bool grammar_matcher_allows(struct grammar_matcher *m, hearth_token tok);

/*
 * Advances past tok (which must be allowed). False with err when tok is
 * not allowed or a bound was passed; the matcher is then unchanged.
 */
bool grammar_matcher_accept(struct grammar_matcher *m, hearth_token tok, char *err, size_t err_len);

/* Whether the grammar has matched a whole root (EOG is allowed now). */
bool grammar_matcher_can_end(const struct grammar_matcher *m);
/* Whether nothing but EOG can follow (the grammar is complete and cannot go on). */
bool grammar_matcher_must_end(const struct grammar_matcher *m);

/* ------------------------------------------------------------- strings --- */

/* Whether the whole of s[0..n) is a sentence of the grammar (tests, and the recogniser the
 * reference is compared with). Needs no vocab: g may be compiled with vocab NULL. */
bool grammar_accepts_string(const struct grammar *g, const char *s, size_t n);

#endif
