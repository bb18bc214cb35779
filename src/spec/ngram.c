/*
 * ngram.c: prompt lookup (ngram.h). One backward scan per proposal: for
 * each earlier end position, the length of the common suffix with the
 * sequence's end, capped at n_max; the first position (latest) reaching
 * n_max wins at once, else the latest with the longest match of at least
 * n_min. O(NGRAM_SCAN * n_max) compares at worst, about a millisecond at
 * the cap, against a target forward of tens of milliseconds.
 */
#include "spec/ngram.h"

int32_t ngram_propose(const hearth_token *tokens, int32_t n, int32_t n_min, int32_t n_max,
                      int32_t k, hearth_token *out)
{
    if (k < 1 || n_min < 1 || n_max < n_min || n_max > NGRAM_MAX_N || n < n_min + 1)
        return 0;
    const hearth_token last = tokens[n - 1];
    int32_t best_len = 0, best_end = -1;
    int32_t stop     = n - 1 - NGRAM_SCAN > 0 ? n - 1 - NGRAM_SCAN : 0;
    /* e: an earlier match ends at tokens[e] (so tokens[e + 1] is what followed it) */
    for (int32_t e = n - 2; e >= stop; e--) {
        if (tokens[e] != last)
            continue;
        int32_t len = 1;
        while (len < n_max && e - len >= 0 && tokens[e - len] == tokens[n - 1 - len])
            len++;
        if (len > best_len) {
            best_len = len;
            best_end = e;
            if (len == n_max)
                break;
        }
    }
    if (best_len < n_min)
        return 0;
    int32_t m = 0;
    for (int32_t p = best_end + 1; p < n && m < k; p++)
        out[m++] = tokens[p];
    return m;
}
