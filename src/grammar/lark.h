/*
 * lark.h: the subset of Lark grammars (https://lark-parser.readthedocs.io)
 * that tool formats use -> hearth's GBNF, or an ECMA-262 regular
 * expression when the grammar is not recursive.
 *
 * The Responses API lets a custom tool's input follow a Lark grammar
 * (Codex's apply_patch does); hearth holds the input to it by the JSON
 * schema "pattern" of the string the tool is offered with, hence the regex.
 * Supported: rules and terminals (`name: ...`, `NAME: ...`, with `?`, `!`
 * and `.N` priorities read and dropped), alternatives, grouping ( ),
 * optional [ ], ? * +, ~ n and ~ n..m repeats, "literals" (with their i
 * flag refused), /regex/ in the subset schema.h lists (no flags), aliases
 * (`-> name`, dropped), comments, %import common.X for the usual
 * terminals (LF, CR, CRLF? NEWLINE, WS, WS_INLINE, DIGIT, LETTER, ...).
 * Refused, with a message: %ignore and %declare (they change how text is
 * matched beyond the grammar), templates, other imports, unknown symbols,
 * and left recursion (Lark's Earley parser takes it, GBNF does not).
 * The start rule is `start`. Bounds: 64 KiB of grammar text, 512 rules.
 * Pure; thread-safe.
 */
#ifndef HEARTH_LARK_H
#define HEARTH_LARK_H

#include <stddef.h>

/* The GBNF text (start rule "root") for the Lark grammar def[0..len), malloc'd, or NULL
 * with err = one sentence naming what is not supported and where. */
char *lark_to_gbnf(const char *def, size_t len, char *err, size_t err_len);

/* The same language as an anchored ECMA regex ("^...$"), malloc'd, or NULL with err (also
 * for a recursive grammar, which no regex describes). */
char *lark_to_regex(const char *def, size_t len, char *err, size_t err_len);

#endif
