/*
 * schema_int.h: what schema.c shares with schema_text.c, the GBNF text
 * helpers over util/strbuf.h's buffer (literals, code point classes), the
 * integer range writer and the regex subset converter.
 */
#ifndef HEARTH_SCHEMA_INT_H
#define HEARTH_SCHEMA_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/strbuf.h"

/* Appends a GBNF literal "..." for s[0..n) (valid UTF-8; kept raw apart from GBNF's escapes). */
void schema_lit(struct strbuf *b, const char *s, size_t n);

/*
 * Reads one strictly valid UTF-8 character (no overlong form, no surrogate,
 * at most U+10FFFF) at s[0..n): its length, or 0 when invalid or n == 0.
 */
size_t schema_utf8_next(const char *s, size_t n, uint32_t *cp);
bool schema_utf8_valid(const char *s, size_t n);

/*
 * Appends a parenthesised GBNF expression for the decimal integers in
 * [lo, hi] as JSON writes them (no leading zero, no "-0"); has_lo/has_hi
 * false: unbounded on that side. |lo|, |hi| < 10^18, lo <= hi.
 */
void schema_int_range(struct strbuf *b, bool has_lo, int64_t lo, bool has_hi, int64_t hi);

/*
 * Appends a GBNF expression for the inside of a JSON string (the text
 * between its quotes) whose decoded value matches pattern, an ECMA-262
 * regex of the subset schema.h lists, searched for as JSON Schema says
 * (unanchored unless ^ / $). any_char: the rule of one JSON string
 * character, for unanchored ends. False with err ("pattern: what, at
 * offset N") when the pattern leaves the subset.
 */
bool schema_regex(struct strbuf *out, const char *pattern, const char *any_char, char *err,
                  size_t err_len);

/* Appends code point c as it may stand inside a GBNF class (escaped unless alphanumeric). */
void schema_class_char(struct strbuf *b, uint32_t c);

/* The most a regex or a schema may ask one item to repeat ({m,n}, minLength, maxItems): the
   grammar engine's own bound on {m,n} (GRAMMAR_MAX_REPEAT). */
#define SCHEMA_MAX_REPEAT 4096

#endif
