/*
 * stopmatch.h: stop strings over a stream of token pieces.
 *
 * A generation streams text one token piece at a time, and a stop string may
 * span several pieces. The matcher keeps the text that is not yet safe to
 * send: a tail that could still be the start of a stop string, and an
 * incomplete UTF-8 sequence at the end (byte-fallback tokens give one byte
 * of a character at a time). Everything before that is released; a stop
 * string is never released, nor anything after it.
 *
 * Pure (no I/O, no threads); one matcher per slot, reused across jobs. The
 * pending buffer holds at most the longest stop string + 3 bytes + one piece,
 * so after the first few tokens feeding allocates nothing.
 */
#ifndef HEARTH_STOPMATCH_H
#define HEARTH_STOPMATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct stopmatch {
    char *const *stop;   /* [n_stop] NUL-terminated, non-empty; borrowed from the job */
    int32_t n_stop;      /* 0..: 0 = only UTF-8 holdback */
    size_t max_stop_len; /* longest stop string in bytes */
    char *buf;           /* [cap] pending text; buf[0..len) */
    size_t len, cap;
    size_t sent; /* bytes at the front of buf released by the last call */
    int32_t hit; /* after STOPMATCH_HIT: the index in stop[] of the string that matched; else -1 */
};

enum stopmatch_result {
    STOPMATCH_MORE   = 0, /* no stop string yet; keep feeding */
    STOPMATCH_HIT    = 1, /* a stop string matched: *out is the text before it, the end */
    STOPMATCH_ENOMEM = -1,
};

/* A matcher with an empty buffer; stopmatch_free releases it. */
void stopmatch_init(struct stopmatch *m);
void stopmatch_free(struct stopmatch *m);

/*
 * Starts a new stream with these stop strings (borrowed: they must outlive
 * the stream; empty ones are ignored). Keeps the buffer's memory.
 */
void stopmatch_reset(struct stopmatch *m, char *const *stop, int32_t n_stop);

/*
 * Appends len bytes of text. *out and *out_len receive the bytes that may be
 * sent now (possibly none); they point into the matcher and stay valid until
 * the next call. On STOPMATCH_HIT they are the text before the earliest stop
 * string and the stream is over (feed nothing more before a reset).
 */
enum stopmatch_result stopmatch_feed(struct stopmatch *m, const char *piece, size_t len,
                                     const char **out, size_t *out_len);

/* Ends the stream without a stop string: everything still held back, valid or not. */
void stopmatch_flush(struct stopmatch *m, const char **out, size_t *out_len);

/*
 * Bytes at the end of s[0..len) that form an incomplete UTF-8 sequence (a
 * lead byte whose continuation bytes have not all arrived): 0..3. The same as
 * utf8_tail_len in util/utf8.h, which new code should call.
 */
size_t stopmatch_utf8_tail(const char *s, size_t len);

#endif
