/*
 * schema.c: JSON schema -> GBNF. Each schema node becomes a GBNF
 * expression; objects, arrays and $ref targets get helper rules named
 * after the schema's rule. The grammar accepts a subset of the texts valid
 * against the schema (one spelling per character and enum value, bounded
 * whitespace), never a text the schema refuses; what the converter cannot
 * express exactly it refuses, naming the place.
 *
 * Work is bounded: schema nesting (through $ref and allOf too) at
 * SCHEMA_MAX_DEPTH, schema nodes visited at SCHEMA_MAX_WORK, the grammar
 * text at SCHEMA_MAX_TEXT, repetition counts at SCHEMA_MAX_REPEAT; a
 * schema past a bound is refused, so conversion time is linear in the
 * output, which is at most a few MB.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "grammar/grammar.h"
#include "grammar/schema.h"
#include "grammar/schema_int.h"
#include "util/errfmt.h"
#include "util/utf8.h"

#define SCHEMA_MAX_DEPTH 64
#define SCHEMA_MAX_WORK  200000
#define SCHEMA_MAX_TEXT  (4u << 20)
/* integer bounds past 2^53 are not exact in a double, so a bound there may not be the one written
 */
#define SCHEMA_MAX_BOUND 9007199254740992.0

struct rule {
    char *name;
    char *body;
};

struct schema_gbnf {
    struct rule *rules; /* in the order added; the text lists them so */
    size_t n_rules, cap_rules;
    size_t text_len; /* bytes of the text so far */
    uint32_t *hash;  /* open addressing over rule names: index + 1, 0 = empty */
    size_t hash_cap; /* a power of two, at least 2 * n_rules */
};

/* -------------------------------------------------------------- names --- */

static uint32_t name_hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static bool hash_rebuild(struct schema_gbnf *b, size_t cap)
{
    uint32_t *h = calloc(cap, sizeof *h);
    if (!h)
        return false;
    for (size_t i = 0; i < b->n_rules; i++) {
        size_t k = name_hash(b->rules[i].name) & (cap - 1);
        while (h[k])
            k = (k + 1) & (cap - 1);
        h[k] = (uint32_t)i + 1;
    }
    free(b->hash);
    b->hash     = h;
    b->hash_cap = cap;
    return true;
}

static bool name_used(const struct schema_gbnf *b, const char *name)
{
    if (!b->hash_cap)
        return false;
    size_t mask = b->hash_cap - 1;
    for (size_t k = name_hash(name) & mask; b->hash[k]; k = (k + 1) & mask)
        if (!strcmp(b->rules[b->hash[k] - 1].name, name))
            return true;
    return false;
}

/* Adds "name ::= body", taking both strings (freed on failure; a NULL body is out of memory). */
static bool rule_push(struct schema_gbnf *b, char *name, char *body)
{
    if (!body)
        goto err;
    if (b->n_rules == b->cap_rules) {
        size_t cap     = b->cap_rules ? b->cap_rules * 2 : 32;
        struct rule *r = realloc(b->rules, cap * sizeof *r);
        if (!r)
            goto err;
        b->rules     = r;
        b->cap_rules = cap;
    }
    if (2 * (b->n_rules + 1) > b->hash_cap && !hash_rebuild(b, b->hash_cap ? b->hash_cap * 2 : 64))
        goto err;
    b->rules[b->n_rules++] = (struct rule){name, body};
    size_t k               = name_hash(name) & (b->hash_cap - 1);
    while (b->hash[k])
        k = (k + 1) & (b->hash_cap - 1);
    b->hash[k] = (uint32_t)b->n_rules;
    b->text_len += strlen(name) + strlen(body) + 6;
    return true;
err:
    free(name);
    free(body);
    return false;
}

static bool name_ok(const char *name)
{
    if (!name || !*name)
        return false;
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-'))
            return false;
    return strncmp(name, "json-", 5) != 0;
}

/* ------------------------------------------------------------ builder --- */

struct schema_gbnf *schema_gbnf_new(void)
{
    return calloc(1, sizeof(struct schema_gbnf));
}

static void truncate_rules(struct schema_gbnf *b, size_t n, size_t text_len)
{
    while (b->n_rules > n) {
        b->n_rules--;
        free(b->rules[b->n_rules].name);
        free(b->rules[b->n_rules].body);
    }
    b->text_len = text_len;
    if (b->hash_cap && !hash_rebuild(b, b->hash_cap)) {
        /* no memory to rebuild: clear the slots of the removed rules in place */
        for (size_t k = 0; k < b->hash_cap; k++)
            if (b->hash[k] > n)
                b->hash[k] = 0;
    }
}

void schema_gbnf_free(struct schema_gbnf *b)
{
    if (!b)
        return;
    truncate_rules(b, 0, 0);
    free(b->rules);
    free(b->hash);
    free(b);
}

bool schema_gbnf_rule(struct schema_gbnf *b, const char *name, const char *body)
{
    if (!name_ok(name) || name_used(b, name))
        return false;
    char *n = strdup(name), *d = strdup(body);
    if (!n || !d) {
        free(n);
        free(d);
        return false;
    }
    return rule_push(b, n, d);
}

char *schema_gbnf_text(const struct schema_gbnf *b)
{
    struct strbuf t = {0};
    for (size_t i = 0; i < b->n_rules; i++) {
        strbuf_add(&t, b->rules[i].name);
        strbuf_add(&t, " ::= ");
        strbuf_add(&t, b->rules[i].body);
        strbuf_add(&t, "\n");
    }
    return strbuf_take(&t, NULL);
}

char *schema_gbnf_literal(const char *s, size_t n)
{
    struct strbuf t = {0};
    schema_lit(&t, s, n);
    return strbuf_take(&t, NULL);
}

/* ------------------------------------------------------------ context --- */

struct ref {
    const cJSON *target;
    char *rule;
};

struct ctx {
    struct schema_gbnf *b;
    const char *name;   /* the rule being added; helpers are named after it */
    const cJSON *root;  /* what "#" refers to */
    struct strbuf path; /* JSON pointer of the node being converted */
    char *err;
    size_t err_len;
    bool failed;
    int depth;
    size_t work;      /* nodes converted, against SCHEMA_MAX_WORK */
    unsigned next_id; /* for helper names */
    struct ref *refs; /* $ref targets converted or under way, with their rule */
    size_t n_refs, cap_refs;
    cJSON **owned; /* schemas built by merging, freed with the context */
    size_t n_owned, cap_owned;
};

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static bool
fail_at(struct ctx *c, const char *fmt, ...)
{
    if (c->failed)
        return false;
    c->failed = true;
    char what[HEARTH_ERR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    /* a deep path keeps its end, where the fault is */
    const char *path = c->path.len ? c->path.s : "(root)";
    size_t n         = strlen(path);
    set_err(c->err, c->err_len, "%s%s: %s", n > 200 ? "..." : "", n > 200 ? path + n - 200 : path,
            what);
    return false;
}

static bool oom(struct ctx *c)
{
    return fail_at(c, "out of memory");
}

/* Appends /key to the path (JSON pointer escapes); returns the length to restore. */
static size_t path_push(struct ctx *c, const char *key)
{
    size_t n = c->path.len;
    strbuf_add(&c->path, "/");
    for (const char *p = key; *p; p++) {
        if (*p == '~')
            strbuf_add(&c->path, "~0");
        else if (*p == '/')
            strbuf_add(&c->path, "~1");
        else
            strbuf_addn(&c->path, p, 1);
    }
    return n;
}

static size_t path_push_index(struct ctx *c, int i)
{
    char t[16];
    snprintf(t, sizeof t, "%d", i);
    return path_push(c, t);
}

static void path_pop(struct ctx *c, size_t n)
{
    c->path.len = n;
    if (c->path.s)
        c->path.s[n] = '\0';
}

static bool own(struct ctx *c, cJSON *j)
{
    if (!j)
        return oom(c);
    if (c->n_owned == c->cap_owned) {
        size_t cap = c->cap_owned ? c->cap_owned * 2 : 16;
        cJSON **o  = realloc(c->owned, cap * sizeof *o);
        if (!o) {
            cJSON_Delete(j);
            return oom(c);
        }
        c->owned     = o;
        c->cap_owned = cap;
    }
    c->owned[c->n_owned++] = j;
    return true;
}

/* A fresh rule name "<name>-<hint>-<n>" (hint reduced to [a-z0-9-]; n unique within one add,
   so two names of one add never meet), malloc'd. */
static char *fresh_name(struct ctx *c, const char *hint)
{
    struct strbuf t = {0};
    for (;;) {
        strbuf_reset(&t);
        strbuf_add(&t, c->name);
        strbuf_add(&t, "-");
        size_t k = 0;
        for (const char *p = hint; *p && k < 24; p++, k++) {
            char ch = *p >= 'A' && *p <= 'Z' ? (char)(*p - 'A' + 'a') : *p;
            if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9')))
                ch = '-';
            strbuf_addn(&t, &ch, 1);
        }
        strbuf_printf(&t, "-%u", c->next_id++);
        if (t.oom || !name_used(c->b, t.s))
            break;
    }
    return strbuf_take(&t, NULL);
}

static bool add_rule(struct ctx *c, char *name, struct strbuf *body)
{
    if (body->oom) {
        free(name);
        strbuf_free(body);
        return oom(c);
    }
    if (c->b->text_len + body->len > SCHEMA_MAX_TEXT) {
        free(name);
        strbuf_free(body);
        return fail_at(c, "the grammar would pass %u bytes", SCHEMA_MAX_TEXT);
    }
    if (!rule_push(c->b, name, strbuf_take(body, NULL)))
        return oom(c);
    return true;
}

/* Adds a helper rule "<name>-<hint>N ::= body" (body consumed); its name, malloc'd, or NULL with
   the error set. */
static char *helper(struct ctx *c, const char *hint, struct strbuf *body)
{
    char *name = fresh_name(c, hint);
    char *copy = name ? strdup(name) : NULL;
    if (!copy) {
        free(name);
        strbuf_free(body);
        oom(c);
        return NULL;
    }
    if (!add_rule(c, name, body)) {
        free(copy);
        return NULL;
    }
    return copy;
}

/*
 * A text written more than once (an array's item, an object's member) becomes a rule of its
 * own when long, so that nesting adds to the grammar instead of doubling it.
 */
static bool shared(struct ctx *c, struct strbuf *text, const char *hint)
{
    if (text->oom)
        return oom(c);
    if (text->len <= 64)
        return true;
    struct strbuf body = *text;
    *text              = (struct strbuf){0};
    char *name         = helper(c, hint, &body);
    if (!name)
        return false;
    strbuf_add(text, name);
    free(name);
    return text->oom ? oom(c) : true;
}

/* ---------------------------------------------------------- primitives --- */

enum prim {
    P_WS,
    P_CHAR,
    P_STRING,
    P_NUMBER,
    P_INTEGER,
    P_VALUE,
    P_OBJECT,
    P_ARRAY,
    P_KEYCHAR,
    P_YEAR,
    P_LEAP,
    P_DATE,
    P_TIME,
    P_DATETIME,
    P_UUID,
    P_COUNT
};

static const struct {
    const char *name;
    const char *body;
    enum prim deps[4]; /* P_WS terminates unless first; listed deps are added first */
    int n_deps;
    /* clang-format off */
} prims[P_COUNT] = {
    /* at most one space, or a newline and an indentation of up to 20 spaces or tabs */
    [P_WS] = {"json-ws", "( \" \" | \"\\n\" [ \\t]{0,20} )?", {0}, 0},
    /* one character of a JSON string: anything but '"', '\' and the controls, or an escape; a
       surrogate pair is one character (as a JSON reader decodes it), a lone surrogate none */
    [P_CHAR]    = {"json-char",
                   "[^\\x22\\x5C\\x00-\\x1F] | \"\\\\\" ( [\\x22\\x5C/bfnrt] | \"u\" ( "
                      "[0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} | "
                      "[dD] [89abAB] [0-9a-fA-F]{2} \"\\\\u\" [dD] [c-fC-F] [0-9a-fA-F]{2} ) )",
                   {0},
                   0},
    [P_STRING]  = {"json-string", "\"\\\"\" json-char* \"\\\"\"", {P_CHAR}, 1},
    [P_NUMBER]  = {"json-number",
                   "\"-\"? ( \"0\" | [1-9] [0-9]{0,15} ) ( \".\" [0-9]{1,16} )? "
                   "( [eE] [-+]? ( \"0\" | [1-9] [0-9]{0,15} ) )?",
                   {0},
                   0},
    [P_INTEGER] = {"json-integer", "\"-\"? ( \"0\" | [1-9] [0-9]{0,15} )", {0}, 0},
    [P_VALUE]   = {"json-value",
                   "json-object | json-array | json-string | json-number | \"true\" | \"false\" | "
                     "\"null\"",
                   {P_OBJECT, P_ARRAY, P_STRING, P_NUMBER},
                   4},
    [P_OBJECT]  = {"json-object",
                   "\"{\" json-ws ( json-string json-ws \":\" json-ws json-value json-ws ( \",\" "
                    "json-ws json-string json-ws \":\" json-ws json-value json-ws )* )? \"}\"",
                   {P_WS, P_STRING},
                   2},
    [P_ARRAY]   = {"json-array",
                   "\"[\" json-ws ( json-value json-ws ( \",\" json-ws json-value json-ws )* )? "
                     "\"]\"",
                   {P_WS},
                   1},
    /* a character of an additional property's name: written as itself, never escaped */
    [P_KEYCHAR] = {"json-key-char", "[^\\x22\\x5C\\x00-\\x1F]", {0}, 0},
    /* 0001-9999, as RFC 3339 and Python's datetime read them */
    [P_YEAR] = {"json-year",
                "[1-9] [0-9]{3} | \"0\" ( [1-9] [0-9]{2} | \"0\" ( [1-9] [0-9] | \"0\" [1-9] ) )",
                {0},
                0},
    /* divisible by 4 and not by 100, or by 400 */
    [P_LEAP] = {"json-leap-year",
                "[0-9] [0-9] ( \"0\" [48] | [2468] [048] | [13579] [26] ) | ( \"0\" [48] | [2468] "
                "[048] | [13579] [26] ) \"00\"",
                {0},
                0},
    [P_DATE] = {"json-date",
                "json-year \"-\" ( ( \"0\" [13578] | \"1\" [02] ) \"-\" ( \"0\" [1-9] | [12] [0-9] "
                "| \"3\" [01] ) | ( \"0\" [469] | \"11\" ) \"-\" ( \"0\" [1-9] | [12] [0-9] | "
                "\"30\" ) | \"02-\" ( \"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8] ) ) | json-leap-year "
                "\"-02-29\"",
                {P_YEAR, P_LEAP},
                2},
    /* RFC 3339 full-time; no leap second, fractions of at most 9 digits */
    [P_TIME]     = {"json-time",
                    "( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" "
                        "[0-9]{1,9} )? ( \"Z\" | ( \"+\" | \"-\" ) "
                        "( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )",
                    {0},
                    0},
    [P_DATETIME] = {"json-date-time", "json-date \"T\" json-time", {P_DATE, P_TIME}, 2},
    [P_UUID]     = {"json-uuid",
                    "[0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} "
                        "\"-\" [0-9a-fA-F]{12}",
                    {0},
                    0},
};
/* clang-format on */

/* The primitive's rule name, adding it (and what it uses) on first use; NULL when out of memory. */
static const char *prim(struct ctx *c, enum prim p)
{
    if (name_used(c->b, prims[p].name))
        return prims[p].name;
    char *n = strdup(prims[p].name), *d = strdup(prims[p].body);
    if (!n || !d || !rule_push(c->b, n, d)) {
        if (!n || !d) {
            free(n);
            free(d);
        }
        oom(c);
        return NULL;
    }
    for (int i = 0; i < prims[p].n_deps; i++)
        if (!prim(c, prims[p].deps[i]))
            return NULL;
    /* json-object and json-array use json-value, which uses them back */
    if ((p == P_OBJECT || p == P_ARRAY) && !prim(c, P_VALUE))
        return NULL;
    return prims[p].name;
}

static bool add_prim(struct ctx *c, struct strbuf *out, enum prim p)
{
    const char *n = prim(c, p);
    if (!n)
        return false;
    strbuf_add(out, n);
    return true;
}

/* ---------------------------------------------------------- keywords --- */

static const char *const annotations[] = {"title",    "description", "examples", "default",
                                          "$schema",  "$id",         "$comment", "deprecated",
                                          "readOnly", "writeOnly",   "$defs",    "definitions"};

static const char *const keywords[] = {"type",
                                       "properties",
                                       "required",
                                       "additionalProperties",
                                       "enum",
                                       "const",
                                       "anyOf",
                                       "oneOf",
                                       "allOf",
                                       "$ref",
                                       "items",
                                       "prefixItems",
                                       "minItems",
                                       "maxItems",
                                       "minLength",
                                       "maxLength",
                                       "pattern",
                                       "format",
                                       "minimum",
                                       "maximum",
                                       "exclusiveMinimum",
                                       "exclusiveMaximum"};

static bool in_list(const char *s, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(s, list[i]))
            return true;
    return false;
}

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static bool is_annotation(const char *k)
{
    return in_list(k, annotations, N_OF(annotations));
}

enum jtype {
    T_NULL    = 1,
    T_BOOLEAN = 2,
    T_OBJECT  = 4,
    T_ARRAY   = 8,
    T_STRING  = 16,
    T_INTEGER = 32,
    T_NUMBER  = 64,
    T_ALL     = 127
};

static const char *const type_names[] = {"null",   "boolean", "object", "array",
                                         "string", "integer", "number"};

static int type_bit(const char *s)
{
    for (size_t i = 0; i < N_OF(type_names); i++)
        if (!strcmp(s, type_names[i]))
            return 1 << i;
    return 0;
}

/* The types "type" allows (T_ALL when absent); 0 with the error set when malformed. */
static int type_mask(struct ctx *c, const cJSON *s)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(s, "type");
    if (!t)
        return T_ALL;
    size_t n = path_push(c, "type");
    int mask = 0;
    if (cJSON_IsString(t)) {
        mask = type_bit(t->valuestring);
        if (!mask)
            fail_at(c, "unknown type \"%s\"", t->valuestring);
    } else if (cJSON_IsArray(t)) {
        const cJSON *e;
        cJSON_ArrayForEach(e, t)
        {
            int bit = cJSON_IsString(e) ? type_bit(e->valuestring) : 0;
            if (!bit) {
                fail_at(c, "a type list holds only type names");
                mask = 0;
                break;
            }
            mask |= bit;
        }
        if (!c->failed && !mask)
            fail_at(c, "an empty type list matches nothing");
    } else {
        fail_at(c, "\"type\" must be a type name or a list of them");
    }
    path_pop(c, n);
    return mask;
}

/* Whether j is a schema that constrains nothing: true or {} or only annotations. */
static bool schema_trivial(const cJSON *j)
{
    if (cJSON_IsTrue(j))
        return true;
    if (!cJSON_IsObject(j))
        return false;
    const cJSON *k;
    cJSON_ArrayForEach(k, j) if (!is_annotation(k->string)) return false;
    return true;
}

/* A non-negative integer keyword (minLength...); -1 when absent; false with the error when bad. */
static bool count_kw(struct ctx *c, const cJSON *s, const char *key, long *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, key);
    *out           = -1;
    if (!v)
        return true;
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble != floor(v->valuedouble)) {
        size_t n = path_push(c, key);
        fail_at(c, "must be a non-negative integer");
        path_pop(c, n);
        return false;
    }
    if (v->valuedouble > SCHEMA_MAX_REPEAT) {
        size_t n = path_push(c, key);
        fail_at(c, "%.17g is over the supported %d", v->valuedouble, SCHEMA_MAX_REPEAT);
        path_pop(c, n);
        return false;
    }
    *out = (long)v->valuedouble;
    return true;
}

/* Appends x as GBNF repetition {lo,hi} (hi < 0: unbounded), in its short forms where it has one. */
static void rep(struct strbuf *b, long lo, long hi)
{
    if (lo == 0 && hi < 0)
        strbuf_add(b, "*");
    else if (lo == 1 && hi < 0)
        strbuf_add(b, "+");
    else if (lo == 0 && hi == 1)
        strbuf_add(b, "?");
    else if (hi < 0)
        strbuf_printf(b, "{%ld,}", lo);
    else if (lo == hi)
        strbuf_printf(b, "{%ld}", lo);
    else
        strbuf_printf(b, "{%ld,%ld}", lo, hi);
}

/* ----------------------------------------------------- JSON as literals --- */

/* s as JSON writes it between quotes (the escapes a JSON encoder uses), appended raw. */
static void json_escape(struct strbuf *b, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"':
            strbuf_add(b, "\\\"");
            break;
        case '\\':
            strbuf_add(b, "\\\\");
            break;
        case '\b':
            strbuf_add(b, "\\b");
            break;
        case '\f':
            strbuf_add(b, "\\f");
            break;
        case '\n':
            strbuf_add(b, "\\n");
            break;
        case '\r':
            strbuf_add(b, "\\r");
            break;
        case '\t':
            strbuf_add(b, "\\t");
            break;
        default:
            if (*p < 0x20)
                strbuf_printf(b, "\\u%04x", *p);
            else
                strbuf_addn(b, (const char *)p, 1);
        }
    }
}

/* A GBNF literal for the JSON string s (quotes included). */
static bool string_lit(struct ctx *c, struct strbuf *out, const char *s)
{
    if (!schema_utf8_valid(s, strlen(s)))
        return fail_at(c, "a string is not valid UTF-8");
    struct strbuf t = {0};
    strbuf_add(&t, "\"");
    json_escape(&t, s);
    strbuf_add(&t, "\"");
    if (t.oom) {
        strbuf_free(&t);
        return oom(c);
    }
    schema_lit(out, t.s, t.len);
    strbuf_free(&t);
    return true;
}

/* The GBNF for exactly the JSON value v (with bounded whitespace inside arrays and objects). */
static bool value_lit(struct ctx *c, struct strbuf *out, const cJSON *v, int depth)
{
    if (depth > SCHEMA_MAX_DEPTH)
        return fail_at(c, "a value nests deeper than %d", SCHEMA_MAX_DEPTH);
    const char *ws = NULL;
    if ((cJSON_IsArray(v) || cJSON_IsObject(v)) && !(ws = prim(c, P_WS)))
        return false;
    if (cJSON_IsNull(v)) {
        strbuf_add(out, "\"null\"");
    } else if (cJSON_IsTrue(v)) {
        strbuf_add(out, "\"true\"");
    } else if (cJSON_IsFalse(v)) {
        strbuf_add(out, "\"false\"");
    } else if (cJSON_IsNumber(v)) {
        if (!isfinite(v->valuedouble))
            return fail_at(c, "a number is not finite");
        /* the shortest spelling that reads back as the same double (cJSON's own printing
           may drop the last digit) */
        char t[32];
        for (int prec = 1; prec <= 17; prec++) {
            snprintf(t, sizeof t, "%.*g", prec, v->valuedouble);
            if (strtod(t, NULL) == v->valuedouble)
                break;
        }
        schema_lit(out, t, strlen(t));
    } else if (cJSON_IsString(v)) {
        return string_lit(c, out, v->valuestring);
    } else if (cJSON_IsArray(v) || cJSON_IsObject(v)) {
        bool obj = cJSON_IsObject(v);
        strbuf_printf(out, "( \"%c\" %s", obj ? '{' : '[', ws);
        const cJSON *e;
        bool first = true;
        cJSON_ArrayForEach(e, v)
        {
            strbuf_add(out, first ? " " : " \",\" ");
            if (!first)
                strbuf_printf(out, "%s ", ws);
            first = false;
            if (obj) {
                if (!string_lit(c, out, e->string))
                    return false;
                strbuf_printf(out, " %s \":\" %s ", ws, ws);
            }
            if (!value_lit(c, out, e, depth + 1))
                return false;
            strbuf_printf(out, " %s", ws);
        }
        strbuf_printf(out, " \"%c\" )", obj ? '}' : ']');
    } else {
        return fail_at(c, "not a JSON value");
    }
    return true;
}

static int value_type(const cJSON *v)
{
    if (cJSON_IsNull(v))
        return T_NULL;
    if (cJSON_IsBool(v))
        return T_BOOLEAN;
    if (cJSON_IsObject(v))
        return T_OBJECT;
    if (cJSON_IsArray(v))
        return T_ARRAY;
    if (cJSON_IsString(v))
        return T_STRING;
    if (cJSON_IsNumber(v))
        return v->valuedouble == floor(v->valuedouble) ? T_INTEGER | T_NUMBER : T_NUMBER;
    return 0;
}

/* ------------------------------------------------------------- schemas --- */

static bool gen(struct ctx *c, const cJSON *s, struct strbuf *out);

/* Converts child key of s (a schema) with the path extended by key. */
static bool gen_child(struct ctx *c, const cJSON *s, const char *key, struct strbuf *out)
{
    size_t n = path_push(c, key);
    bool ok  = gen(c, s, out);
    path_pop(c, n);
    return ok;
}

/* Follows a local $ref; NULL with the error set when it leads nowhere. */
static const cJSON *resolve(struct ctx *c, const cJSON *ref)
{
    size_t n = path_push(c, "$ref");
    if (!cJSON_IsString(ref)) {
        fail_at(c, "must be a string");
        path_pop(c, n);
        return NULL;
    }
    const char *r = ref->valuestring;
    if (r[0] != '#') {
        fail_at(c, "only local references (\"#...\") are supported, not \"%.100s\"", r);
        path_pop(c, n);
        return NULL;
    }
    const cJSON *at = c->root;
    const char *p   = r + 1;
    if (*p && *p != '/') {
        fail_at(c, "\"%.100s\" is not a JSON pointer (anchors are not supported)", r);
        path_pop(c, n);
        return NULL;
    }
    char key[256];
    while (*p == '/' && at) {
        p++;
        size_t k = 0;
        for (; *p && *p != '/'; p++) {
            char ch = *p;
            if (ch == '~' && (p[1] == '0' || p[1] == '1'))
                ch = *++p == '0' ? '~' : '/';
            else if (ch == '%')
                break; /* percent-encoding is not decoded: such a pointer is refused below */
            if (k + 1 >= sizeof key)
                break;
            key[k++] = ch;
        }
        if (*p && *p != '/') {
            at = NULL;
            break;
        }
        key[k] = '\0';
        if (cJSON_IsArray(at)) {
            char *end;
            long i = strtol(key, &end, 10);
            at     = *key && !*end && i >= 0 ? cJSON_GetArrayItem(at, (int)i) : NULL;
        } else {
            at = cJSON_GetObjectItemCaseSensitive(at, key);
        }
    }
    if (!at)
        fail_at(c, "\"%.100s\" leads nowhere in this schema", r);
    path_pop(c, n);
    return at;
}

/* --- allOf: merging the members into one schema --- */

static bool merge_into(struct ctx *c, cJSON *m, const cJSON *s, cJSON *members);

/* Adds s (a schema, following $ref and allOf inside it) to the merge m. */
static bool flatten(struct ctx *c, cJSON *m, const cJSON *s, cJSON *members, int depth)
{
    if (depth > SCHEMA_MAX_DEPTH)
        return fail_at(c, "allOf and $ref nest deeper than %d", SCHEMA_MAX_DEPTH);
    if (cJSON_IsTrue(s))
        return true;
    if (cJSON_IsFalse(s))
        return fail_at(c, "allOf holds the schema false, which matches nothing");
    if (!cJSON_IsObject(s))
        return fail_at(c, "an allOf member must be a schema");
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
    const cJSON *all = cJSON_GetObjectItemCaseSensitive(s, "allOf");
    if (ref) {
        const cJSON *t = resolve(c, ref);
        if (!t || !flatten(c, m, t, members, depth + 1))
            return false;
    }
    if (all) {
        if (!cJSON_IsArray(all) || cJSON_GetArraySize(all) == 0)
            return fail_at(c, "allOf must be a non-empty list of schemas");
        const cJSON *e;
        cJSON_ArrayForEach(e, all) if (!flatten(c, m, e, members, depth + 1)) return false;
    }
    return merge_into(c, m, s, members);
}

/* The conjunction of two property schemas: one of them when the other is trivial. */
static cJSON *conj_schema(const cJSON *a, const cJSON *b)
{
    if (schema_trivial(a) || cJSON_Compare(a, b, true))
        return cJSON_Duplicate(b, true);
    if (schema_trivial(b))
        return cJSON_Duplicate(a, true);
    cJSON *o = cJSON_CreateObject(), *l = cJSON_AddArrayToObject(o, "allOf");
    if (!l) {
        cJSON_Delete(o);
        return NULL;
    }
    cJSON_AddItemToArray(l, cJSON_Duplicate(a, true));
    cJSON_AddItemToArray(l, cJSON_Duplicate(b, true));
    return o;
}

static bool replace(cJSON *m, const char *key, cJSON *v)
{
    if (!v)
        return false;
    if (cJSON_GetObjectItemCaseSensitive(m, key))
        return cJSON_ReplaceItemInObjectCaseSensitive(m, key, v);
    return cJSON_AddItemToObject(m, key, v);
}

static bool merge_into(struct ctx *c, cJSON *m, const cJSON *s, cJSON *members)
{
    static const char *const lower[] = {"minimum", "exclusiveMinimum", "minLength", "minItems"};
    static const char *const upper[] = {"maximum", "exclusiveMaximum", "maxLength", "maxItems"};
    cJSON_AddItemReferenceToArray(members, (cJSON *)s);
    const cJSON *k;
    cJSON_ArrayForEach(k, s)
    {
        const char *key = k->string;
        if (is_annotation(key) || !strcmp(key, "$ref") || !strcmp(key, "allOf"))
            continue;
        if (!in_list(key, keywords, N_OF(keywords)))
            return fail_at(c, "unsupported keyword \"%s\"", key);
        cJSON *have = cJSON_GetObjectItemCaseSensitive(m, key);
        if (!have) {
            if (!cJSON_AddItemToObject(m, key, cJSON_Duplicate(k, true)))
                return oom(c);
            continue;
        }
        if (cJSON_Compare(have, k, true))
            continue;
        bool is_lo = in_list(key, lower, N_OF(lower)), is_hi = in_list(key, upper, N_OF(upper));
        if ((is_lo || is_hi) && cJSON_IsNumber(have) && cJSON_IsNumber(k)) {
            if (is_lo ? k->valuedouble > have->valuedouble : k->valuedouble < have->valuedouble)
                cJSON_SetNumberValue(have, k->valuedouble);
        } else if (!strcmp(key, "required") && cJSON_IsArray(have) && cJSON_IsArray(k)) {
            const cJSON *e;
            cJSON_ArrayForEach(e, k)
            {
                bool dup = false;
                const cJSON *f;
                cJSON_ArrayForEach(f, have) dup |= cJSON_Compare(e, f, true);
                if (!dup)
                    cJSON_AddItemToArray(have, cJSON_Duplicate(e, true));
            }
        } else if (!strcmp(key, "type")) {
            int a = type_mask(c, m), b = type_mask(c, s);
            if (!a || !b)
                return false;
            /* an integer is a number: integer and number together leave integer */
            int both = (a & b) | ((a & T_INTEGER) && (b & T_NUMBER) ? T_INTEGER : 0) |
                       ((b & T_INTEGER) && (a & T_NUMBER) ? T_INTEGER : 0);
            if (!both)
                return fail_at(c, "allOf: the members' types have nothing in common");
            cJSON *l = cJSON_CreateArray();
            for (size_t i = 0; i < N_OF(type_names); i++)
                if (both & 1 << i)
                    cJSON_AddItemToArray(l, cJSON_CreateString(type_names[i]));
            if (!replace(m, "type", l))
                return oom(c);
        } else if ((!strcmp(key, "properties") && cJSON_IsObject(have) && cJSON_IsObject(k))) {
            const cJSON *p;
            cJSON_ArrayForEach(p, k)
            {
                cJSON *q = cJSON_GetObjectItemCaseSensitive(have, p->string);
                cJSON *v = q ? conj_schema(q, p) : cJSON_Duplicate(p, true);
                if (!replace(have, p->string, v))
                    return oom(c);
            }
        } else if (!strcmp(key, "additionalProperties") || !strcmp(key, "items")) {
            if (!replace(m, key, conj_schema(have, k)))
                return oom(c);
        } else {
            return fail_at(c, "allOf: two members set \"%s\" differently", key);
        }
    }
    return true;
}

/*
 * Each member's additionalProperties applies to the properties the other
 * members declare: the merged property takes it too, and a property that a
 * member forbids (additionalProperties false) is dropped, or the merge
 * refused when it is required.
 */
static bool merge_extra(struct ctx *c, cJSON *m, const cJSON *members)
{
    cJSON *props = cJSON_GetObjectItemCaseSensitive(m, "properties");
    if (!cJSON_IsObject(props))
        return true;
    const cJSON *mem;
    cJSON_ArrayForEach(mem, members)
    {
        const cJSON *ap = cJSON_GetObjectItemCaseSensitive(mem, "additionalProperties");
        if (!ap || schema_trivial(ap))
            continue;
        const cJSON *own_props = cJSON_GetObjectItemCaseSensitive(mem, "properties");
        cJSON *p               = props->child;
        while (p) {
            cJSON *next = p->next;
            if (!cJSON_GetObjectItemCaseSensitive(own_props, p->string)) {
                if (cJSON_IsFalse(ap)) {
                    const cJSON *req = cJSON_GetObjectItemCaseSensitive(m, "required"), *e;
                    cJSON_ArrayForEach(e, req)
                    {
                        if (cJSON_IsString(e) && !strcmp(e->valuestring, p->string))
                            return fail_at(c,
                                           "allOf: property \"%s\" is required but a "
                                           "member forbids it",
                                           p->string);
                    }
                    cJSON_Delete(cJSON_DetachItemViaPointer(props, p));
                } else if (!replace(props, p->string, conj_schema(p, ap))) {
                    return oom(c);
                }
            }
            p = next;
        }
    }
    return true;
}

/* s without the keys drop[] (shallow copies of the rest), plus extra members, merged. */
static const cJSON *merged(struct ctx *c, const cJSON *s, const char *const *drop, size_t n_drop,
                           const cJSON *extra)
{
    cJSON *base = cJSON_CreateObject(), *m = cJSON_CreateObject(), *members = cJSON_CreateArray();
    if (!own(c, base) || !own(c, m) || !own(c, members))
        return NULL;
    const cJSON *k;
    cJSON_ArrayForEach(k, s)
    {
        if (in_list(k->string, drop, n_drop))
            continue;
        if (!cJSON_AddItemReferenceToObject(base, k->string, (cJSON *)k))
            return oom(c), NULL;
    }
    if (!flatten(c, m, base, members, 0))
        return NULL;
    if (extra && !flatten(c, m, extra, members, 0))
        return NULL;
    if (!merge_extra(c, m, members))
        return NULL;
    return m;
}

/* --- $ref --- */

static bool gen_ref(struct ctx *c, const cJSON *ref, struct strbuf *out)
{
    const cJSON *t = resolve(c, ref);
    if (!t)
        return false;
    for (size_t i = 0; i < c->n_refs; i++) {
        if (c->refs[i].target == t) {
            strbuf_add(out, c->refs[i].rule);
            return true;
        }
    }
    const char *r = ref->valuestring, *slash = strrchr(r, '/');
    char *name = fresh_name(c, slash ? slash + 1 : "ref");
    if (!name)
        return oom(c);
    if (c->n_refs == c->cap_refs) {
        size_t cap    = c->cap_refs ? c->cap_refs * 2 : 8;
        struct ref *n = realloc(c->refs, cap * sizeof *n);
        if (!n) {
            free(name);
            return oom(c);
        }
        c->refs     = n;
        c->cap_refs = cap;
    }
    c->refs[c->n_refs++] = (struct ref){t, name};
    /* the target is converted with the path it has in the document */
    struct strbuf saved = c->path, body = {0};
    c->path = (struct strbuf){0};
    strbuf_add(&c->path, r + 1);
    bool ok = gen(c, t, &body);
    strbuf_free(&c->path);
    c->path = saved;
    if (!ok) {
        strbuf_free(&body);
        return false;
    }
    if (c->b->text_len + body.len > SCHEMA_MAX_TEXT) {
        strbuf_free(&body);
        return fail_at(c, "the grammar would pass %u bytes", SCHEMA_MAX_TEXT);
    }
    char *rule = strdup(name);
    if (!rule || body.oom) {
        free(rule);
        strbuf_free(&body);
        return oom(c);
    }
    if (!rule_push(c->b, rule, strbuf_take(&body, NULL)))
        return oom(c);
    strbuf_add(out, name);
    return true;
}

/* --- objects --- */

/* One trie node of the declared property names, for the names an extra property may not take. */
struct trie {
    uint32_t cp; /* the character leading here */
    bool end;    /* a declared name ends here */
    struct trie *kid, *sib;
};

static void trie_free(struct trie *t)
{
    while (t) {
        struct trie *s = t->sib;
        trie_free(t->kid);
        free(t);
        t = s;
    }
}

/* Adds s (plain characters only: a name needing escapes cannot be spelled by an extra key). */
static bool trie_add(struct trie *root, const char *s)
{
    struct trie *at = root;
    size_t n        = strlen(s);
    uint32_t cp;
    for (size_t i = 0; i < n;) {
        size_t k = schema_utf8_next(s + i, n - i, &cp);
        if (!k || cp < 0x20 || cp == '"' || cp == '\\')
            return true;
        i += k;
        struct trie *t = at->kid;
        while (t && t->cp != cp)
            t = t->sib;
        if (!t) {
            if (!(t = calloc(1, sizeof *t)))
                return false;
            t->cp   = cp;
            t->sib  = at->kid;
            at->kid = t;
        }
        at = t;
    }
    at->end = true;
    return true;
}

/* The rule for the rest of a key after node t: a closing quote unless a name ends here, a
   character leading further down the trie, or any other character and then anything. */
static char *trie_rule(struct ctx *c, const struct trie *t, const char *keychar)
{
    struct strbuf body = {0};
    int n_alt          = 0;
    if (!t->end) {
        strbuf_add(&body, "\"\\\"\"");
        n_alt++;
    }
    for (const struct trie *k = t->kid; k; k = k->sib) {
        char *sub = trie_rule(c, k, keychar);
        if (!sub) {
            strbuf_free(&body);
            return NULL;
        }
        char u[4];
        size_t un = utf8_encode(k->cp, u);
        strbuf_add(&body, n_alt++ ? " | " : "");
        schema_lit(&body, u, un);
        strbuf_printf(&body, " %s", sub);
        free(sub);
    }
    strbuf_add(&body, n_alt++ ? " | [^\\x22\\x5C\\x00-\\x1F" : "[^\\x22\\x5C\\x00-\\x1F");
    for (const struct trie *k = t->kid; k; k = k->sib)
        schema_class_char(&body, k->cp);
    strbuf_printf(&body, "] %s* \"\\\"\"", keychar);
    return helper(c, "key", &body);
}

struct prop {
    const char *key;
    const cJSON *schema; /* NULL: any value */
    bool required;
    struct strbuf kv; /* key ws ":" ws value ws */
};

/* Where name is in the hash of p's keys (names_at[k] - 1 its index), or the empty slot where it
   would go: a hash, so that 20,000 properties cost 20,000 lookups, not 20,000 squared. */
static size_t prop_slot(const struct prop *p, const size_t *names_at, size_t mask, const char *name)
{
    size_t k = name_hash(name) & mask;
    while (names_at[k] && strcmp(p[names_at[k] - 1].key, name))
        k = (k + 1) & mask;
    return k;
}

static bool gen_object(struct ctx *c, const cJSON *s, struct strbuf *out)
{
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
    const cJSON *req   = cJSON_GetObjectItemCaseSensitive(s, "required");
    const cJSON *ap    = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    size_t pn;
    if (props && !cJSON_IsObject(props)) {
        pn = path_push(c, "properties");
        fail_at(c, "must be an object of schemas");
        return path_pop(c, pn), false;
    }
    if (req) {
        const cJSON *e;
        bool ok = cJSON_IsArray(req);
        cJSON_ArrayForEach(e, req) ok &= cJSON_IsString(e);
        if (!ok) {
            pn = path_push(c, "required");
            fail_at(c, "must be a list of property names");
            return path_pop(c, pn), false;
        }
    }
    if (ap && !cJSON_IsBool(ap) && !cJSON_IsObject(ap)) {
        pn = path_push(c, "additionalProperties");
        fail_at(c, "must be a schema");
        return path_pop(c, pn), false;
    }
    const char *ws = prim(c, P_WS);
    if (!ws)
        return false;
    /* no "properties": any object, as {"type": "object"} means; with them and no
       additionalProperties, exactly those (what a model asked for a schema should write) */
    bool extra                = ap ? !cJSON_IsFalse(ap) : !props;
    const cJSON *extra_schema = ap && cJSON_IsObject(ap) ? ap : NULL;

    size_t n_props = (size_t)cJSON_GetArraySize(props) + (size_t)cJSON_GetArraySize(req);
    struct prop *p = calloc(n_props + 1, sizeof *p);
    size_t mask    = 15; /* names: a hash of indexes into p, + 1 (0: empty) */
    while (mask < n_props * 2)
        mask = mask * 2 + 1;
    size_t *names_at  = calloc(mask + 1, sizeof *names_at);
    struct trie names = {0};
    bool ok           = p != NULL && names_at != NULL;
    size_t n          = 0;
    const cJSON *e;
    if (!ok) {
        free(p);
        free(names_at);
        return oom(c);
    }
    cJSON_ArrayForEach(e, props)
    {
        size_t k = prop_slot(p, names_at, mask, e->string);
        if (names_at[k])
            continue;
        names_at[k] = n + 1;
        p[n].key    = e->string;
        p[n].schema = e;
        n++;
    }
    /* required names that "properties" does not declare take additionalProperties' schema */
    cJSON_ArrayForEach(e, req)
    {
        size_t k = prop_slot(p, names_at, mask, e->valuestring);
        if (names_at[k]) {
            p[names_at[k] - 1].required = true;
            continue;
        }
        if (ap && cJSON_IsFalse(ap)) {
            pn = path_push(c, "required");
            fail_at(c, "\"%s\" is required but additionalProperties is false", e->valuestring);
            path_pop(c, pn);
            ok = false;
            break;
        }
        names_at[k] = n + 1;
        p[n++] = (struct prop){.key = e->valuestring, .schema = extra_schema, .required = true};
    }
    free(names_at);
    for (size_t i = 0; ok && i < n; i++) {
        ok = string_lit(c, &p[i].kv, p[i].key);
        strbuf_printf(&p[i].kv, " %s \":\" %s ", ws, ws);
        if (ok && p[i].schema == extra_schema) {
            if (extra_schema) {
                pn = path_push(c, "additionalProperties");
                ok = gen(c, extra_schema, &p[i].kv);
                path_pop(c, pn);
            } else {
                ok = add_prim(c, &p[i].kv, P_VALUE);
            }
        } else if (ok) {
            pn = path_push(c, "properties");
            ok = gen_child(c, p[i].schema, p[i].key, &p[i].kv);
            path_pop(c, pn);
        }
        strbuf_printf(&p[i].kv, " %s", ws);
        ok = ok && shared(c, &p[i].kv, "kv");
        if (ok && !trie_add(&names, p[i].key))
            ok = oom(c);
    }
    /* the extra key-value pair, p[n] */
    if (ok && extra) {
        struct strbuf *kv = &p[n].kv;
        if (n == 0) {
            ok = add_prim(c, kv, P_STRING);
        } else {
            const char *kc = prim(c, P_KEYCHAR);
            char *rest     = kc ? trie_rule(c, &names, kc) : NULL;
            ok             = rest != NULL;
            if (ok)
                strbuf_printf(kv, "\"\\\"\" %s", rest);
            free(rest);
        }
        strbuf_printf(kv, " %s \":\" %s ", ws, ws);
        if (ok && extra_schema) {
            pn = path_push(c, "additionalProperties");
            ok = gen(c, extra_schema, kv);
            path_pop(c, pn);
        } else if (ok) {
            ok = add_prim(c, kv, P_VALUE);
        }
        strbuf_printf(kv, " %s", ws);
        ok = ok && shared(c, kv, "kv");
    }
    /*
     * after[i]: the members from i on once one has been written (each led by a comma);
     * first[i]: the members from i on, at least one, none written yet. Built from the end.
     */
    char *after_next = NULL, *first_next = NULL;
    if (ok && extra) {
        struct strbuf body = {0}, fb = {0};
        strbuf_printf(&body, "( \",\" %s %s )*", ws, p[n].kv.s);
        after_next = helper(c, "more", &body);
        strbuf_printf(&fb, "%s %s", p[n].kv.s, after_next ? after_next : "");
        first_next = after_next ? helper(c, "extra", &fb) : (strbuf_free(&fb), NULL);
        ok         = first_next != NULL;
    }
    bool any_required = false;
    for (size_t i = n; ok && i-- > 0;) {
        struct strbuf body = {0}, fb = {0};
        any_required |= p[i].required;
        strbuf_printf(&body, p[i].required ? "\",\" %s %s" : "( \",\" %s %s )?", ws, p[i].kv.s);
        strbuf_add(&fb, p[i].kv.s);
        if (after_next) {
            strbuf_printf(&body, " %s", after_next);
            strbuf_printf(&fb, " %s", after_next);
        }
        if (!p[i].required && first_next)
            strbuf_printf(&fb, " | %s", first_next);
        char *after = helper(c, p[i].key, &body);
        char *first = after ? helper(c, p[i].key, &fb) : (strbuf_free(&fb), NULL);
        free(after_next);
        free(first_next);
        after_next = after;
        first_next = first;
        ok         = first != NULL;
    }
    if (ok) {
        strbuf_printf(out, "( \"{\" %s ", ws);
        if (first_next)
            strbuf_printf(out, any_required ? "%s " : "( %s )? ", first_next);
        strbuf_add(out, "\"}\" )");
    }
    free(after_next);
    free(first_next);
    for (size_t i = 0; i <= n; i++)
        strbuf_free(&p[i].kv);
    free(p);
    trie_free(names.kid);
    if (!ok && !c->failed)
        oom(c);
    return ok;
}

/* --- arrays --- */

static bool gen_array(struct ctx *c, const cJSON *s, struct strbuf *out)
{
    const cJSON *prefix = cJSON_GetObjectItemCaseSensitive(s, "prefixItems");
    const cJSON *items  = cJSON_GetObjectItemCaseSensitive(s, "items");
    long lo, hi;
    if (!count_kw(c, s, "minItems", &lo) || !count_kw(c, s, "maxItems", &hi))
        return false;
    if (lo < 0)
        lo = 0;
    size_t pn;
    if (prefix && !cJSON_IsArray(prefix)) {
        pn = path_push(c, "prefixItems");
        fail_at(c, "must be a list of schemas");
        return path_pop(c, pn), false;
    }
    if (cJSON_IsArray(items)) {
        pn = path_push(c, "items");
        fail_at(c, "a list of schemas (the tuple form before 2020-12) is not supported: use "
                   "prefixItems");
        return path_pop(c, pn), false;
    }
    if (items && !cJSON_IsBool(items) && !cJSON_IsObject(items)) {
        pn = path_push(c, "items");
        fail_at(c, "must be a schema");
        return path_pop(c, pn), false;
    }
    long k = cJSON_GetArraySize(prefix);
    if (k > SCHEMA_MAX_REPEAT)
        return fail_at(c, "prefixItems has more than %d schemas", SCHEMA_MAX_REPEAT);
    if (cJSON_IsFalse(items) && (hi < 0 || hi > k))
        hi = k;
    if (hi >= 0 && lo > hi)
        return fail_at(c, "no array length fits minItems %ld and at most %ld items", lo, hi);
    const char *ws = prim(c, P_WS);
    if (!ws)
        return false;
    strbuf_printf(out, "( \"[\" %s ", ws);
    if (hi == 0) {
        strbuf_add(out, "\"]\" )");
        return true;
    }
    /* element i: "," ws value ws (no comma for the first), optional once i >= minItems */
    struct strbuf item = {0};
    bool ok            = true;
    long i             = 0;
    long n_open        = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, prefix)
    {
        if (hi >= 0 && i >= hi)
            break;
        if (i >= lo) {
            strbuf_add(out, "( ");
            n_open++;
        }
        if (i > 0)
            strbuf_printf(out, "\",\" %s ", ws);
        pn        = path_push(c, "prefixItems");
        size_t pi = path_push_index(c, (int)i);
        ok        = gen(c, e, out);
        path_pop(c, pi);
        path_pop(c, pn);
        if (!ok)
            return false;
        strbuf_printf(out, " %s ", ws);
        i++;
    }
    if ((hi < 0 || i < hi) && !cJSON_IsFalse(items)) {
        /* the rest: items, from element i to hi */
        if (items) {
            pn = path_push(c, "items");
            ok = gen(c, items, &item);
            path_pop(c, pn);
        } else {
            ok = add_prim(c, &item, P_VALUE);
        }
        if (!ok || !shared(c, &item, "item")) {
            strbuf_free(&item);
            return false;
        }
        long rlo = lo > i ? lo - i : 0, rhi = hi >= 0 ? hi - i : -1;
        if (i == 0) {
            /* the first needs no comma: item ( "," item ){rlo-1, rhi-1} */
            if (rlo == 0) {
                strbuf_add(out, "( ");
                n_open++;
            }
            strbuf_printf(out, "%s %s ", item.s, ws);
            if (rhi != 1) {
                strbuf_printf(out, "( \",\" %s %s %s )", ws, item.s, ws);
                rep(out, rlo > 0 ? rlo - 1 : 0, rhi > 0 ? rhi - 1 : rhi);
                strbuf_add(out, " ");
            }
        } else {
            strbuf_printf(out, "( \",\" %s %s %s )", ws, item.s, ws);
            rep(out, rlo, rhi);
            strbuf_add(out, " ");
        }
    }
    strbuf_free(&item);
    for (; n_open > 0; n_open--)
        strbuf_add(out, ")? ");
    strbuf_add(out, "\"]\" )");
    return true;
}

/* --- strings --- */

static bool gen_string(struct ctx *c, const cJSON *s, struct strbuf *out)
{
    const cJSON *pattern = cJSON_GetObjectItemCaseSensitive(s, "pattern");
    const cJSON *format  = cJSON_GetObjectItemCaseSensitive(s, "format");
    long lo, hi;
    if (!count_kw(c, s, "minLength", &lo) || !count_kw(c, s, "maxLength", &hi))
        return false;
    bool len = lo >= 0 || hi >= 0;
    if (lo < 0)
        lo = 0;
    if (hi >= 0 && lo > hi)
        return fail_at(c, "no string length fits minLength %ld and maxLength %ld", lo, hi);
    if ((pattern != NULL) + (format != NULL) + len > 1)
        return fail_at(c, "only one of pattern, format and minLength/maxLength is supported on "
                          "one string");
    size_t pn;
    if (pattern) {
        pn = path_push(c, "pattern");
        if (!cJSON_IsString(pattern)) {
            fail_at(c, "must be a string");
            return path_pop(c, pn), false;
        }
        const char *ch = prim(c, P_CHAR);
        if (!ch)
            return path_pop(c, pn), false;
        struct strbuf rx = {0};
        char why[HEARTH_ERR_MAX];
        bool ok = schema_regex(&rx, pattern->valuestring, ch, why, sizeof why);
        if (!ok)
            fail_at(c, "%s", why);
        else
            strbuf_printf(out, "( \"\\\"\" %s \"\\\"\" )", rx.s);
        if (rx.oom)
            ok = oom(c);
        strbuf_free(&rx);
        path_pop(c, pn);
        return ok;
    }
    if (format) {
        static const struct {
            const char *name;
            enum prim p;
        } formats[] = {
            {"date", P_DATE}, {"time", P_TIME}, {"date-time", P_DATETIME}, {"uuid", P_UUID}};
        pn = path_push(c, "format");
        for (size_t i = 0; cJSON_IsString(format) && i < N_OF(formats); i++) {
            if (!strcmp(format->valuestring, formats[i].name)) {
                const char *r = prim(c, formats[i].p);
                if (r)
                    strbuf_printf(out, "( \"\\\"\" %s \"\\\"\" )", r);
                path_pop(c, pn);
                return r != NULL;
            }
        }
        if (cJSON_IsString(format))
            fail_at(c, "unsupported format \"%.100s\" (supported: date, time, date-time, uuid)",
                    format->valuestring);
        else
            fail_at(c, "must be a string");
        return path_pop(c, pn), false;
    }
    const char *ch = prim(c, P_CHAR);
    if (!ch)
        return false;
    if (hi == 0) {
        strbuf_add(out, "( \"\\\"\\\"\" )");
        return true;
    }
    strbuf_printf(out, "( \"\\\"\" %s", ch);
    rep(out, lo, hi);
    strbuf_add(out, " \"\\\"\" )");
    return true;
}

/* --- numbers --- */

/* A bound keyword as a number; false with the error when present and not a finite number. */
static bool bound_kw(struct ctx *c, const cJSON *s, const char *key, bool *has, double *v)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(s, key);
    *has           = j != NULL;
    if (!j)
        return true;
    if (!cJSON_IsNumber(j) || !isfinite(j->valuedouble)) {
        size_t pn = path_push(c, key);
        fail_at(c, cJSON_IsBool(j) ? "must be a number (the draft-4 boolean form is not supported)"
                                   : "must be a number");
        path_pop(c, pn);
        return false;
    }
    *v = j->valuedouble;
    return true;
}

static bool gen_number(struct ctx *c, const cJSON *s, struct strbuf *out, bool integer)
{
    static const char *const keys[] = {"minimum", "exclusiveMinimum", "maximum",
                                       "exclusiveMaximum"};
    bool has[4], any = false;
    double v[4];
    for (int i = 0; i < 4; i++) {
        if (!bound_kw(c, s, keys[i], &has[i], &v[i]))
            return false;
        any |= has[i];
    }
    if (!any)
        return add_prim(c, out, integer ? P_INTEGER : P_NUMBER);
    if (!integer)
        return fail_at(c, "minimum / maximum are supported on integers only, not on \"number\"");
    bool has_lo = false, has_hi = false;
    double lo = 0, hi = 0;
    for (int i = 0; i < 4; i++) {
        if (!has[i])
            continue;
        if (fabs(v[i]) > SCHEMA_MAX_BOUND) {
            size_t pn = path_push(c, keys[i]);
            fail_at(c, "%.17g is beyond the supported +-2^53", v[i]);
            path_pop(c, pn);
            return false;
        }
        double b = i == 0   ? ceil(v[i])
                   : i == 1 ? floor(v[i]) + 1
                   : i == 2 ? floor(v[i])
                            : ceil(v[i]) - 1;
        if (i < 2) {
            lo     = has_lo && lo > b ? lo : b;
            has_lo = true;
        } else {
            hi     = has_hi && hi < b ? hi : b;
            has_hi = true;
        }
    }
    if (has_lo && has_hi && lo > hi)
        return fail_at(c, "no integer lies between the minimum and the maximum");
    schema_int_range(out, has_lo, (int64_t)lo, has_hi, (int64_t)hi);
    return out->oom ? oom(c) : true;
}

/* --- enum and const --- */

static bool gen_enum(struct ctx *c, const cJSON *s, int types, struct strbuf *out)
{
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum");
    const cJSON *cn = cJSON_GetObjectItemCaseSensitive(s, "const");
    const cJSON *k;
    cJSON_ArrayForEach(k, s)
    {
        if (!is_annotation(k->string) && strcmp(k->string, "type") && strcmp(k->string, "enum") &&
            strcmp(k->string, "const"))
            return fail_at(c, "\"%s\" next to enum or const is not supported", k->string);
    }
    size_t pn = path_push(c, en ? "enum" : "const");
    if (en && !cJSON_IsArray(en)) {
        fail_at(c, "must be a list of values");
        return path_pop(c, pn), false;
    }
    int n = 0;
    strbuf_add(out, "(");
    const cJSON *v;
    const cJSON *list = en ? en : s;
    cJSON_ArrayForEach(v, list)
    {
        if (!en && v != cn)
            continue;
        if (!(value_type(v) & types) || (en && cn && !cJSON_Compare(v, cn, true)))
            continue;
        strbuf_add(out, n++ ? " | " : " ");
        if (!value_lit(c, out, v, 0))
            return path_pop(c, pn), false;
    }
    strbuf_add(out, " )");
    if (n == 0)
        fail_at(c, "no value is left once the type and const are applied");
    path_pop(c, pn);
    return n > 0;
}

/* --- one schema --- */

static bool gen(struct ctx *c, const cJSON *s, struct strbuf *out)
{
    if (c->failed)
        return false;
    if (++c->work > SCHEMA_MAX_WORK)
        return fail_at(c, "the schema has more than %d nodes to convert", SCHEMA_MAX_WORK);
    if (out->len > SCHEMA_MAX_TEXT)
        return fail_at(c, "the grammar would pass %u bytes", SCHEMA_MAX_TEXT);
    if (cJSON_IsTrue(s))
        return add_prim(c, out, P_VALUE);
    if (cJSON_IsFalse(s))
        return fail_at(c, "the schema false matches nothing");
    if (!cJSON_IsObject(s))
        return fail_at(c, "a schema must be an object or a boolean");
    if (c->depth >= SCHEMA_MAX_DEPTH)
        return fail_at(c, "schemas nest deeper than %d", SCHEMA_MAX_DEPTH);
    c->depth++;
    bool ok = false;
    const cJSON *k;
    bool constrains = false; /* keywords beside annotations, $ref, allOf, anyOf, oneOf */
    cJSON_ArrayForEach(k, s)
    {
        if (is_annotation(k->string))
            continue;
        if (!in_list(k->string, keywords, N_OF(keywords))) {
            fail_at(c, "unsupported keyword \"%s\"", k->string);
            goto out;
        }
        constrains |= strcmp(k->string, "$ref") && strcmp(k->string, "allOf") &&
                      strcmp(k->string, "anyOf") && strcmp(k->string, "oneOf");
    }
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
    const cJSON *all = cJSON_GetObjectItemCaseSensitive(s, "allOf");
    const cJSON *any = cJSON_GetObjectItemCaseSensitive(s, "anyOf");
    const cJSON *one = cJSON_GetObjectItemCaseSensitive(s, "oneOf");
    if (any && one) {
        fail_at(c, "anyOf and oneOf together are not supported");
        goto out;
    }
    if (ref && !all && !any && !one && !constrains) {
        ok = gen_ref(c, ref, out);
        goto out;
    }
    if (ref || all) {
        /* $ref beside other keywords is an allOf of the target and the rest */
        const cJSON *m = merged(c, s, NULL, 0, NULL);
        ok             = m && gen(c, m, out);
        goto out;
    }
    if (any || one) {
        /* oneOf is taken as anyOf: a grammar cannot tell that exactly one branch matches */
        const cJSON *alts               = any ? any : one;
        const char *kw                  = any ? "anyOf" : "oneOf";
        static const char *const drop[] = {"anyOf", "oneOf"};
        size_t pn                       = path_push(c, kw);
        if (!cJSON_IsArray(alts) || cJSON_GetArraySize(alts) == 0) {
            fail_at(c, "must be a non-empty list of schemas");
            path_pop(c, pn);
            goto out;
        }
        strbuf_add(out, "(");
        int i = 0;
        const cJSON *a;
        ok = true;
        cJSON_ArrayForEach(a, alts)
        {
            size_t pi = path_push_index(c, i);
            strbuf_add(out, i++ ? " | " : " ");
            if (constrains) {
                const cJSON *m = merged(c, s, drop, N_OF(drop), a);
                ok             = m && gen(c, m, out);
            } else {
                ok = gen(c, a, out);
            }
            path_pop(c, pi);
            if (!ok)
                break;
        }
        strbuf_add(out, " )");
        path_pop(c, pn);
        goto out;
    }
    int types = type_mask(c, s);
    if (!types)
        goto out;
    if (cJSON_GetObjectItemCaseSensitive(s, "enum") ||
        cJSON_GetObjectItemCaseSensitive(s, "const")) {
        ok = gen_enum(c, s, types, out);
        goto out;
    }
    if (types & T_NUMBER)
        types &= ~T_INTEGER;
    int n = 0;
    strbuf_add(out, "(");
    ok = true;
    for (int t = 1; ok && t < T_ALL; t <<= 1) {
        if (!(types & t))
            continue;
        strbuf_add(out, n++ ? " | " : " ");
        switch (t) {
        case T_NULL:
            strbuf_add(out, "\"null\"");
            break;
        case T_BOOLEAN:
            strbuf_add(out, "( \"true\" | \"false\" )");
            break;
        case T_OBJECT:
            ok = gen_object(c, s, out);
            break;
        case T_ARRAY:
            ok = gen_array(c, s, out);
            break;
        case T_STRING:
            ok = gen_string(c, s, out);
            break;
        case T_INTEGER:
            ok = gen_number(c, s, out, true);
            break;
        case T_NUMBER:
            ok = gen_number(c, s, out, false);
            break;
        }
    }
    strbuf_add(out, " )");
out:
    c->depth--;
    if (out->oom && !c->failed)
        oom(c);
    return ok && !c->failed;
}

/*
 * Holds the rules this add wrote (and the primitives) to the engine's own check, which refuses
 * what no generation could use: a $ref that reaches itself before any character
 * ({"anyOf": [{"$ref": "#"}]}) or a pattern repeating what may match nothing ("(a|)*").
 */
static bool engine_check(struct ctx *c, size_t first)
{
    struct strbuf t = {0};
    for (size_t i = 0; i < c->b->n_rules; i++) {
        if (i < first && strncmp(c->b->rules[i].name, "json-", 5))
            continue;
        strbuf_add(&t, c->b->rules[i].name);
        strbuf_add(&t, " ::= ");
        strbuf_add(&t, c->b->rules[i].body);
        strbuf_add(&t, "\n");
    }
    if (t.oom) {
        strbuf_free(&t);
        return oom(c);
    }
    char why[HEARTH_ERR_MAX];
    enum hearth_status st = grammar_check(t.s, t.len, c->name, why, sizeof why);
    strbuf_free(&t);
    if (st == HEARTH_ENOMEM)
        return oom(c);
    if (st != HEARTH_OK)
        return fail_at(c, "the schema's grammar is not usable: %s", why);
    return true;
}

bool schema_gbnf_add(struct schema_gbnf *b, const char *name, const struct cJSON *schema, char *err,
                     size_t err_len)
{
    if (!name_ok(name))
        return fail(false, err, err_len,
                    "rule name \"%s\" is not lowercase letters, digits and '-' (or starts with "
                    "the reserved \"json-\")",
                    name ? name : "(null)");
    if (name_used(b, name))
        return fail(false, err, err_len, "rule \"%s\" is already defined", name);
    size_t n_rules = b->n_rules, text_len = b->text_len;
    struct ctx c       = {.b = b, .name = name, .root = schema, .err = err, .err_len = err_len};
    struct strbuf body = {0};
    bool ok            = false;
    char *own_name     = strdup(name);
    if (!own_name) {
        oom(&c);
        goto out;
    }
    /* "$ref": "#" is the rule itself */
    c.refs = malloc(sizeof *c.refs);
    if (!c.refs) {
        free(own_name);
        oom(&c);
        goto out;
    }
    c.refs[0]  = (struct ref){schema, own_name};
    c.n_refs   = 1;
    c.cap_refs = 1;
    if (!gen(&c, schema, &body))
        goto out;
    char *copy = strdup(name);
    if (!copy) {
        oom(&c);
        goto out;
    }
    ok = add_rule(&c, copy, &body) && engine_check(&c, n_rules);
out:
    strbuf_free(&body);
    strbuf_free(&c.path);
    for (size_t i = 0; i < c.n_refs; i++)
        free(c.refs[i].rule);
    free(c.refs);
    for (size_t i = 0; i < c.n_owned; i++)
        cJSON_Delete(c.owned[i]);
    free(c.owned);
    if (!ok)
        truncate_rules(b, n_rules, text_len);
    return ok;
}

bool schema_gbnf_add_json_object(struct schema_gbnf *b, const char *name, char *err, size_t err_len)
{
    cJSON *s = cJSON_Parse("{\"type\":\"object\"}");
    if (!s)
        return fail(false, err, err_len, "out of memory");
    bool ok = schema_gbnf_add(b, name, s, err, err_len);
    cJSON_Delete(s);
    return ok;
}
