/*
 * schema.h: JSON schema -> GBNF, so that a reply matches a schema by
 * construction.
 *
 * A builder collects rules: each schema added becomes a rule of the given
 * name (its helper rules are prefixed with that name, the primitives such
 * as strings and numbers are shared), and raw rules can be added around
 * them (a tool call's wrapper: "<tool_call>\n{\"name\": ..."). The text is
 * then handed to grammar_compile.
 *
 * Supported: type (one or a list; absent: every type, each constrained by
 * its own keywords, as JSON Schema says), properties / required /
 * additionalProperties, enum, const, anyOf / oneOf / allOf, $ref to any
 * local JSON pointer ("#", "#/$defs/...", "#/definitions/..."; recursion
 * becomes recursive rules), items / prefixItems / minItems / maxItems,
 * minLength / maxLength (in code points) / pattern / format (date, time,
 * date-time, uuid), minimum / maximum and the exclusive forms for integers.
 * Annotations (title, description, examples, default, $schema, $id,
 * $comment, deprecated, readOnly, writeOnly) are ignored, as they do not
 * constrain. Any other keyword, format or construct is refused with its
 * place, never silently ignored.
 *
 * The grammar accepts a subset of the texts valid against the schema, never
 * a text the schema refuses:
 *   - whitespace between tokens is at most one space, or a newline and up
 *     to 20 spaces or tabs of indentation, and a number's integral part,
 *     fraction and exponent at most 16 digits each (llama.cpp's bounds),
 *     so a model cannot pad forever;
 *     none before or after the value;
 *   - object members come in the schema's order, required ones always,
 *     optional ones when the model wants them. additionalProperties absent
 *     means none beyond "properties" when the schema lists properties (what
 *     a model asked for a schema should write; llama.cpp does the same) and
 *     any members when it lists none ({"type": "object"} is any object).
 *     true or a schema: any number of further members after the listed
 *     ones, with names that are not listed, written without escapes;
 *   - enum and const values, and strings a pattern describes, are spelled
 *     one way (no "\u0041" for "A"); numbers as their shortest form;
 *   - oneOf is taken as anyOf (a grammar cannot see that only one branch
 *     matches): give it disjoint branches;
 *   - pattern: ECMA-262 semantics (as JSON Schema says) for a subset:
 *     literals and escapes, classes with ranges and \d \w \s (and negations),
 *     ., groups (capturing or (?:...)), |, ? * + {m} {m,} {m,n} (lazy or
 *     not), ^ at the start and $ at the end; unanchored ends match anything.
 *     Lookarounds, backreferences, \b and the like are refused, named;
 *   - allOf is merged into one schema: members' keywords must agree, except
 *     bounds (the tightest wins), required (united), type (intersected),
 *     properties, items and additionalProperties (their schemas merged in
 *     turn); a member's additionalProperties applies to the properties the
 *     others add. $ref beside other keywords is an allOf of both;
 *   - refused as not exact: minimum / maximum on "number", pattern or format
 *     together with a length, keywords beside enum / const, items as a list.
 * Bounds: schemas nested deeper than 64, counts above 4096 (the engine's
 * {m,n} bound), integer bounds beyond +-2^53, more than 200000 schema nodes
 * to convert or a grammar past 4 MiB are refused, so the work is linear in
 * an output of at most a few MB.
 */
#ifndef HEARTH_SCHEMA_H
#define HEARTH_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>

struct cJSON;
struct schema_gbnf;

struct schema_gbnf *schema_gbnf_new(void);
void schema_gbnf_free(struct schema_gbnf *b);

/*
 * Adds rule `name` (lowercase letters, digits and '-'; names starting
 * "json-" are the shared primitives') matching the JSON texts valid against
 * schema (a cJSON object or true/false) as the file header says. Its helper
 * rules are named "<name>-<hint>-<n>". False with err = "<JSON pointer>:
 * what" (e.g. "/properties/a: unsupported keyword \"patternProperties\"";
 * "(root)" for the schema itself, "..." and the pointer's last 200
 * characters when longer) when the schema uses what is not supported or is
 * not a valid schema; the builder is then unchanged. Not thread-safe; the
 * schema is only read.
 */
bool schema_gbnf_add(struct schema_gbnf *b, const char *name, const struct cJSON *schema, char *err,
                     size_t err_len);
/*
 * Adds rule `name` matching any JSON object: the grammar of the OpenAI
 * response_format {"type": "json_object"}, the schema {"type": "object"}.
 */
bool schema_gbnf_add_json_object(struct schema_gbnf *b, const char *name, char *err,
                                 size_t err_len);
/* Adds the raw rule "name ::= body" (body in GBNF). False when out of memory, or when name is
   taken, malformed or starts with "json-". */
bool schema_gbnf_rule(struct schema_gbnf *b, const char *name, const char *body);
/* The whole grammar so far, malloc'd, NUL-terminated (NULL when out of memory). */
char *schema_gbnf_text(const struct schema_gbnf *b);

/* A GBNF string literal for s[0..n) ("\"...\"" with GBNF's escapes), malloc'd. */
char *schema_gbnf_literal(const char *s, size_t n);

#endif
