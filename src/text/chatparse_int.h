/*
 * chatparse_int.h: what chatparse.c shares with the call-body parsers of
 * chatparse_formats.c. Not a public header: only those two files include it.
 *
 * A body parser gets the bytes of one call unit between its opening and
 * closing markers (markers excluded), adds each call it finds with
 * chatparse_pend_add, and returns ACCEPT, REJECT (the unit is not a valid
 * call: it will be given back as text) or -1 when out of memory. It never
 * looks past n and keeps no state: the same bytes give the same verdict.
 */
#ifndef HEARTH_CHATPARSE_INT_H
#define HEARTH_CHATPARSE_INT_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "text/chatparse.h"

enum verdict { NEED_MORE, REJECT, ACCEPT };

static inline bool chatparse_is_ws(char c)
{
    return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

/* s[*at, n) starts with lit (then *at moves past it). */
static inline bool chatparse_take(const char *s, size_t n, size_t *at, const char *lit)
{
    size_t l = strlen(lit);
    if (n - *at < l || memcmp(s + *at, lit, l))
        return false;
    *at += l;
    return true;
}

static inline void chatparse_skip_ws(const char *s, size_t n, size_t *at)
{
    while (*at < n && chatparse_is_ws(s[*at]))
        (*at)++;
}

/* Position of lit in s[from, n), or n. */
static inline size_t chatparse_find(const char *s, size_t n, size_t from, const char *lit)
{
    const char *f = from <= n ? memmem(s + from, n - from, lit, strlen(lit)) : NULL;
    return f ? (size_t)(f - s) : n;
}

/* Parses s[0, n) as exactly one JSON value (whitespace around allowed), or NULL. */
cJSON *chatparse_json(const char *s, size_t n);

/*
 * A raw parameter value of the XML-ish forms: a string when as_string (the parameter's schema
 * says so), else JSON when it is a number, true, false, null, an object or an array, a string
 * otherwise (the templates write strings bare and the rest as JSON). strip_nl: one newline at
 * each end is the template's, not the value's. NULL: no memory.
 */
cJSON *chatparse_raw_value(const char *v, size_t n, bool strip_nl, bool as_string);

/* Whether parameter key of function fn has "type": "string" in the tools p was given. */
bool chatparse_param_string(const struct chatparse *p, const char *fn, size_t fn_len,
                            const char *key, size_t key_len);

/*
 * Adds a call to the held unit: name (name_len bytes, trimmed) and arguments (an object, or a
 * string that holds one; taken over). id may be NULL (one is made). Returns ACCEPT, REJECT
 * when the call is not valid, -1 when out of memory.
 */
int chatparse_pend_add(struct chatparse *p, const char *name, size_t name_len, cJSON *args,
                       const char *id);

/* One {"name": .., "arguments"|"parameters": {..}} object; need_args: a call must have them. */
int chatparse_pend_object(struct chatparse *p, const cJSON *o, bool need_args, bool take_id);

/* ------------------------------------------------ chatparse_formats.c --- */

/* Qwen3-Coder and Seed-OSS: <function=N><parameter=K>V</parameter>..</function>. */
int chatparse_body_xml(struct chatparse *p, const char *s, size_t n);
/* GLM 4.5+: N<arg_key>K</arg_key><arg_value>V</arg_value>.. (or a Hermes JSON body). */
int chatparse_body_glm(struct chatparse *p, const char *s, size_t n);
/* Kimi K2: <|tool_call_begin|>functions.N:I<|tool_call_argument_begin|>{..}<|tool_call_end|>.. */
int chatparse_body_kimi(struct chatparse *p, const char *s, size_t n);
/* MiniMax M2: <invoke name="N"><parameter name="K">V</parameter>..</invoke>.. */
int chatparse_body_minimax(struct chatparse *p, const char *s, size_t n);
/* Functionary v3.1: N>{..} (between <function= and </function>). */
int chatparse_body_functionary(struct chatparse *p, const char *s, size_t n);
/* A JSON array of calls: Granite's {"name", "arguments"}, Command-R's {"tool_name",
 * "parameters"} (cohere: true). */
int chatparse_body_array(struct chatparse *p, const char *s, size_t n, bool cohere);
/* Gemma 4: N{k:<|"|>v<|"|>,..} (between <|tool_call>call: and <tool_call|>). */
int chatparse_body_gemma4(struct chatparse *p, const char *s, size_t n);

#endif
