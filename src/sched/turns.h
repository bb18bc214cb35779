/*
 * turns.h: the tokens of recently finished jobs, so that a prompt which
 * resends a reply as text goes on from the reply's own tokens.
 *
 * A reply need not survive the round trip through the tokenizer: the
 * tokens a model samples are not always the split the tokenizer makes of
 * their text ("Big", "net" comes back as "B", "ign", "et"). A client's next
 * turn sends the reply back as text, so its tokens part from the cached
 * ones where the reply begins, and the whole reply is computed again.
 * turns_splice finds the finished job whose tokens spell the longest head
 * of the new prompt's text (its prompt, itself spliced when it came, and
 * its reply), ending on a token boundary on both sides, and puts the job's
 * tokens in place of the tokenizer's for that head. Only the split of
 * replies' text changes: the bytes are the same, and a control token (no
 * text) must be the same token on both sides.
 *
 * Bounded: at most max_tokens tokens in all (an entry that an extended one
 * of the same conversation begins with is dropped when that one comes),
 * least recently used dropped first. Thread-safe: the scheduler puts, the
 * preparation workers splice.
 */
#ifndef HEARTH_SERVE_TURNS_H
#define HEARTH_SERVE_TURNS_H

#include <stddef.h>
#include <stdint.h>

#include "hearth.h"

struct turns;

struct turns_stats {
    uint64_t spliced_prompts; /* prompts given a reply's own tokens */
    uint64_t spliced_tokens;  /* tokens of kept jobs they were given */
    int64_t tokens;           /* held now */
    int32_t entries;
};

/* NULL when out of memory. max_tokens >= 1. */
struct turns *turns_new(const struct hearth_model *model, int64_t max_tokens);
void turns_free(struct turns *t);

/*
 * Keeps a finished job's tokens: its prompt, tokens[0..n_prompt), and what
 * it generated after it, up to n. Nothing for n <= n_prompt.
 */
void turns_put(struct turns *t, const hearth_token *tokens, int32_t n_prompt, int32_t n);

/*
 * Puts a kept job's tokens into the prompt *ids (*n of them, as
 * hearth_tokenize gives them; replaced by a new array when it changes) as
 * the header says, keeping the result under n_ctx tokens (<= 0: no limit).
 * Returns the tokens put in (0: the prompt is unchanged); -1 when out of
 * memory (unchanged too).
 */
int32_t turns_splice(struct turns *t, hearth_token **ids, size_t *n, int32_t n_ctx);

void turns_stats(struct turns *t, struct turns_stats *out);

#endif
