/*
 * utf8.h: the one place hearth reads and writes UTF-8, for the tokenizers,
 * the stop matcher and the response writer.
 *
 * Two rules live here on purpose. utf8_len counts the way llama.cpp's
 * unicode_len_utf8 does, from the first byte alone and never 0: the
 * tokenizers step through text with it, and invalid bytes must be grouped
 * exactly as llama.cpp groups them for the token ids to agree. Everything
 * that must know whether bytes are valid (utf8_decode, utf8_tail_len) goes by
 * utf8_lead_len, the strict reading of a lead byte.
 */
#ifndef HEARTH_UTF8_H
#define HEARTH_UTF8_H

#include <stddef.h>
#include <stdint.h>

/*
 * Bytes of the character that starts with c, as llama.cpp's unicode_len_utf8
 * counts them from the high nibble: 1 for 0x00-0xBF (so a stray continuation
 * byte is a character of its own), 2 for 0xC0-0xDF, 3 for 0xE0-0xEF, 4 for
 * 0xF0-0xFF (0xF8-0xFF included, though no valid sequence starts so). Never 0,
 * so stepping by it always advances; the caller clips it to the bytes left.
 */
static inline size_t utf8_len(unsigned char c)
{
    static const uint8_t len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return len[c >> 4];
}

/*
 * Length a lead byte announces, read strictly: 1 for ASCII, 2 for 110xxxxx,
 * 3 for 1110xxxx, 4 for 11110xxx; 0 for a byte that starts no sequence (a
 * continuation byte 10xxxxxx, or 0xF8-0xFF).
 */
static inline size_t utf8_lead_len(unsigned char c)
{
    return c < 0x80 ? 1 : c < 0xC0 ? 0 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF8 ? 4 : 0;
}

/*
 * Reads the code point at s[0..n) as llama.cpp's unicode_cpt_from_utf8 does:
 * lead and continuation bits checked, overlong forms and surrogates accepted.
 * Returns its length (1-4) and sets *cp; returns 0 and leaves *cp alone when
 * the bytes are invalid, cut short by n, or past U+10FFFF (which llama.cpp
 * cannot encode again and fails on).
 */
static inline size_t utf8_decode(const char *s, size_t n, uint32_t *cp)
{
    if (n == 0)
        return 0;
    unsigned char c = (unsigned char)s[0];
    size_t len      = utf8_lead_len(c);
    if (len == 1) {
        *cp = c;
        return 1;
    }
    if (len == 0 || len > n)
        return 0;
    uint32_t v = c & (0x7Fu >> len); /* the lead's payload: 5, 4 or 3 bits */
    for (size_t i = 1; i < len; i++) {
        unsigned char b = (unsigned char)s[i];
        if ((b & 0xC0) != 0x80)
            return 0;
        v = v << 6 | (b & 0x3F);
    }
    if (v > 0x10FFFF)
        return 0;
    *cp = v;
    return len;
}

/*
 * Writes cp (at most U+10FFFF; surrogates are written like any other) as
 * UTF-8 into out, which has room for 4 bytes; returns the bytes written, 1-4.
 */
static inline size_t utf8_encode(uint32_t cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/*
 * Bytes at the end of s[0..len) that form an incomplete sequence, 0-3: a lead
 * byte whose continuation bytes have not all arrived, which a streamer holds
 * back until the next piece. Bytes that no later byte can make valid (a stray
 * continuation, 0xF8-0xFF, a sequence already complete) count 0: release them.
 */
static inline size_t utf8_tail_len(const char *s, size_t len)
{
    for (size_t k = 1; k <= 3 && k <= len; k++) {
        unsigned char c = (unsigned char)s[len - k];
        if ((c & 0xC0) == 0x80)
            continue; /* a continuation byte: its lead is further back */
        return utf8_lead_len(c) > k ? k : 0;
    }
    return 0;
}

#endif
