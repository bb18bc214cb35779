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
 * Supported: type (one or a list), properties / required /
 * additionalProperties, enum, const, anyOf / oneOf / allOf, $ref to
 * #/$defs/... and #/definitions/..., items / prefixItems / minItems /
 * maxItems, minLength / maxLength / pattern (a regex subset) / format
 * (date, time, date-time, uuid), minimum / maximum (and the exclusive
 * forms) for integers. Annotations (title, description, examples,
 * default, $schema, $id, $comment) are ignored, as they do not constrain.
 * Any other keyword is refused with its path, never silently ignored.
 * Whitespace between tokens is bounded, so a model cannot pad forever.
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
 * Adds rule `name` (lowercase letters, digits and '-') matching exactly the
 * JSON texts valid against schema (a cJSON object or true/false). False
 * with err = "<JSON pointer>: what" (e.g. "/properties/a: unsupported
 * keyword \"patternProperties\"") when the schema uses what is not
 * supported or is not a valid schema; the builder is then unchanged.
 */
bool schema_gbnf_add(struct schema_gbnf *b, const char *name, const struct cJSON *schema,
                     char *err, size_t err_len);
/*
 * Adds rule `name` matching any JSON object: the grammar of the OpenAI
 * response_format {"type": "json_object"}, the schema {"type": "object"}.
 */
bool schema_gbnf_add_json_object(struct schema_gbnf *b, const char *name, char *err,
                                 size_t err_len);
/* Adds the raw rule "name ::= body" (body in GBNF). False when out of memory. */
bool schema_gbnf_rule(struct schema_gbnf *b, const char *name, const char *body);
/* The whole grammar so far, malloc'd, NUL-terminated (NULL when out of memory). */
char *schema_gbnf_text(const struct schema_gbnf *b);

/* A GBNF string literal for s[0..n) ("\"...\"" with GBNF's escapes), malloc'd. */
char *schema_gbnf_literal(const char *s, size_t n);

#endif
