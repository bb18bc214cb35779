/*
 * engineutil.h: a model and a context over it, for the tests that drive the
 * engine directly (test_forward, test_moe): one setup and teardown instead
 * of one per test file. Linked into the test binaries that link the whole
 * library (not the cross-built kernel tests, which link only the kernels).
 */
#ifndef HEARTH_ENGINEUTIL_H
#define HEARTH_ENGINEUTIL_H

#include <stdint.h>

#include "hearth.h"

struct tu_engine {
    struct hearth_model *model; /* NULL when the model file is absent: the tests skip */
    struct hearth_context *ctx;
    int32_t n_vocab;
    const char *name;
};

/*
 * A calloc'd engine on model file name (tu_model), loaded with 2 threads,
 * with a context of cp (NULL: the defaults). Returns 0 with *out set (its
 * model NULL when the file is absent) or -1 when loading fails (the message
 * printed), as a cmocka group setup returns.
 */
int tu_engine_open(struct tu_engine **out, const char *name,
                   const struct hearth_context_params *cp);
/*
 * Model file name (tu_model) loaded with one thread, or NULL when the file
 * is absent or does not load (the message printed).
 */
struct hearth_model *tu_model_load(const char *name);

/* Frees what tu_engine_open made; 0, as a group teardown returns. */
int tu_engine_close(struct tu_engine *e);

/*
 * Decodes tok[0..n) into sequence seq from its current end, in batches of
 * `chunk` tokens (at most 256), asserting each succeeds, and copies the last
 * token's logits (n_vocab floats) into last.
 */
void tu_engine_run(struct tu_engine *e, int32_t seq, const hearth_token *tok, int32_t n,
                   int32_t chunk, float *last);
/*
 * Empties sequence 0, prefills prompt[0..n) in batches of `chunk`, then
 * decodes n_out greedy tokens one at a time into out; last ends with the
 * logits after the last of them.
 */
void tu_engine_greedy(struct tu_engine *e, const hearth_token *prompt, int32_t n, int32_t chunk,
                      hearth_token *out, int32_t n_out, float *last);
/* n token ids in 100..30099, a fixed function of i and salt (for BPE vocabularies of 32k+). */
void tu_tokens(hearth_token *t, int32_t n, int32_t salt);
/* The index of the largest of l[0..n) (the lowest on ties). */
hearth_token tu_argmax(const float *l, int32_t n);
/* The largest |a[i] - b[i]|. */
float tu_max_diff(const float *a, const float *b, int32_t n);

/* Skips the current test with a message when e's model file is absent. */
/* clang-format off */
#define TU_ENGINE_OR_SKIP(e)                                                                       \
    if (!(e)->model) {                                                                             \
        print_message("skip: %s not found\n", (e)->name);                                          \
        skip();                                                                                    \
    }
/* clang-format on */

#endif
