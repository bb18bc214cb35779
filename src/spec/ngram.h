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

#define NGRAM_MAX_N 16      /* the longest n-gram looked up */
#define NGRAM_SCAN  65536   /* tokens scanned back from the end at most, per lookup */

/*
 * Proposes up to k tokens to follow tokens[0..n): finds the longest suffix of
 * length in [n_min, n_max] (1 <= n_min <= n_max <= NGRAM_MAX_N) that also
 * ends earlier in tokens (the latest such place, within the last NGRAM_SCAN
 * tokens) and copies what followed it into out[0..k). Returns the count
 * written (0 when nothing matches or k < 1); never more than the tokens that
 * followed the match. Pure: thread-safe, no allocation.
 */
int32_t ngram_propose(const hearth_token *tokens, int32_t n, int32_t n_min, int32_t n_max,
                      int32_t k, hearth_token *out);

#endif
