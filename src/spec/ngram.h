/*
 * ngram.h: the n-gram drafter of speculative decoding, prompt lookup: the
 * sequence's last n tokens (n from n_max down to n_min) are looked for
 * earlier in the same sequence, and what followed their latest earlier
 * occurrence is proposed. It pays on echoed text (code edits, record lists,
 * a document quoted back) and costs a scan where nothing matches. The
 * proposal is deterministic, so the target verifies it by sampling its own
 * token at each drafted position and keeping the drafts it reproduces:
 * exactly the target's distribution at any temperature (see
 * docs/ARCHITECTURE.md, speculative decoding).
 */
#ifndef HEARTH_SPEC_NGRAM_H
#define HEARTH_SPEC_NGRAM_H

#include <stdint.h>

#include "hearth.h"

#define NGRAM_MAX_N 16    /* the longest n-gram looked up */
#define NGRAM_SCAN  65536 /* tokens scanned back from the end at most, per lookup */

/*
 * Proposes k tokens to follow tokens[0..n) (1 <= n_min <= n_max <=
 * NGRAM_MAX_N). When the sequence ends in a loop (its last max(d, n_min)
 * tokens equal the d before them, for the shortest such d <= n_max), the loop
 * goes on. Else it finds the longest suffix of length in [n_min, n_max] that
 * also ends earlier in tokens (the latest such place, within the last
 * NGRAM_SCAN tokens) and copies what followed it into out[0..k); a match d
 * tokens back reads as text repeating with period d, so past the sequence's
 * end the copy goes on from its own start. Returns k, or 0 when nothing
 * matches or k < 1; *match (unless NULL) = the length of the match
 * continued (n_max for a loop; 0 with no proposal). Pure: thread-safe, no
 * allocation.
 */
int32_t ngram_propose(const hearth_token *tokens, int32_t n, int32_t n_min, int32_t n_max,
                      int32_t k, hearth_token *out, int32_t *match);

/* --------------------------------------------------------------- pool --- */

/*
 * The shared pool: n-gram statistics fed by every request (what followed
 * each n-gram of the last n_min..n_max tokens, the latest continuation
 * winning), so a slot can draft from text another request saw: a system
 * prompt's boilerplate, an agent's repeated tool output. Fixed memory: a
 * direct-mapped table of 16-byte entries, a newer n-gram replacing an older
 * one on a collision. Not thread-safe (the scheduler thread owns it).
 */
struct ngram_pool;

/* A pool of about bytes (at least one entry); NULL when out of memory. */
struct ngram_pool *ngram_pool_new(size_t bytes, int32_t n_min, int32_t n_max);
void ngram_pool_free(struct ngram_pool *p);

/* Records what followed each n-gram ending before tokens[from..n): tokens[i] after tokens[i-k..i).
 */
void ngram_pool_feed(struct ngram_pool *p, const hearth_token *tokens, int32_t from, int32_t n);

/*
 * Proposes up to k tokens after tokens[0..n): the longest n-gram ending the
 * sequence that the pool knows gives the next token, which is appended and
 * looked up again. Returns the count written to out; *match (unless NULL) =
 * the length of the first n-gram found (0 with no proposal).
 */
int32_t ngram_pool_propose(const struct ngram_pool *p, const hearth_token *tokens, int32_t n,
                           int32_t k, hearth_token *out, int32_t *match);

/* Entries in the pool (its fixed size). */
size_t ngram_pool_entries(const struct ngram_pool *p);

#endif
