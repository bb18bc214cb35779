/*
 * jinja_json.c: a render's variables from cJSON, and from JSON text.
 *
 * cJSON keeps no number text, so a cJSON number that is whole and fits in
 * 64 bits becomes an int (1.0 prints as 1, where Python's json.loads keeps
 * 1.0). A cJSON raw item (cJSON_CreateRaw) is parsed here from its text
 * with json.loads' rules instead: integers without fraction or exponent
 * are ints, others floats, NaN and Infinity accepted, the last of
 * duplicate keys wins; so a caller that keeps the request's text for, say,
 * the tools array gets Python's exact values. Nesting is bounded (200).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja_int.h"
#include "util/utf8.h"

#define JSON_MAX_DEPTH 200

struct jsonp {
    struct jctx *c;
    const char *s;
    size_t n, i;
};

static _Noreturn void bad(struct jsonp *p, const char *what)
{
    jinja_failc(p->c, HEARTH_EINVAL, "variables: %s at byte %zu of a raw JSON value", what, p->i);
}

static void skip_ws(struct jsonp *p)
{
    while (p->i < p->n &&
           (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r'))
        p->i++;
}

static bool lit(struct jsonp *p, const char *w)
{
    size_t k = strlen(w);
    if (p->n - p->i < k || memcmp(p->s + p->i, w, k))
        return false;
    p->i += k;
    return true;
}

static int hex4(struct jsonp *p)
{
    if (p->n - p->i < 4)
        bad(p, "a truncated \\u escape");
    int v = 0;
    for (int k = 0; k < 4; k++) {
        char ch = p->s[p->i++];
        int h   = ch >= '0' && ch <= '9'   ? ch - '0'
                  : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                  : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                           : -1;
        if (h < 0)
            bad(p, "a bad \\u escape");
        v = v << 4 | h;
    }
    return v;
}

static void put_cp(struct jctx *c, struct jbuf *b, uint32_t cp)
{
    char o[4];
    jinja_buf_put(c, b, o, utf8_encode(cp, o));
}

/* JSON's one-character escapes: the character after the backslash, and what it stands for. */
static const char esc_from[] = "\"\\/bfnrt";
static const char esc_to[]   = "\"\\/\b\f\n\r\t";

/* A string after its opening quote. */
static struct jv string(struct jsonp *p)
{
    struct jbuf b = {0};
    for (;;) {
        if (p->i >= p->n)
            bad(p, "an unterminated string");
        size_t st = p->i;
        while (p->i < p->n && p->s[p->i] != '"' && p->s[p->i] != '\\' &&
               (unsigned char)p->s[p->i] >= 0x20)
            p->i++;
        jinja_buf_put(p->c, &b, p->s + st, p->i - st);
        if (p->i >= p->n)
            bad(p, "an unterminated string");
        char ch = p->s[p->i++];
        if (ch == '"')
            return jinja_buf_value(&b);
        if (ch != '\\')
            bad(p, "a control character in a string");
        if (p->i >= p->n)
            bad(p, "an unterminated string");
        char e            = p->s[p->i++];
        const char *plain = memchr(esc_from, e, sizeof esc_from - 1);
        if (plain) {
            jinja_buf_put(p->c, &b, esc_to + (plain - esc_from), 1);
            continue;
        }
        if (e != 'u')
            bad(p, "a bad escape");
        uint32_t cp = (uint32_t)hex4(p);
        if (cp >= 0xd800 && cp < 0xdc00 && p->n - p->i >= 6 && p->s[p->i] == '\\' &&
            p->s[p->i + 1] == 'u') {
            size_t back = p->i;
            p->i += 2;
            uint32_t lo = (uint32_t)hex4(p);
            if (lo >= 0xdc00 && lo < 0xe000)
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            else
                p->i = back; /* a lone high surrogate, kept as Python keeps it */
        }
        put_cp(p->c, &b, cp);
    }
}

static struct jv number(struct jsonp *p)
{
    size_t st = p->i;
    bool fl   = false;
    if (p->s[p->i] == '-')
        p->i++;
    if (lit(p, "Infinity"))
        return jinja_float(p->s[st] == '-' ? -INFINITY : INFINITY);
    if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9')
        bad(p, "a bad number");
    if (p->s[p->i] == '0')
        p->i++;
    else
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9')
            p->i++;
    if (p->i < p->n && p->s[p->i] == '.') {
        fl = true;
        p->i++;
        if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9')
            bad(p, "a bad number");
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9')
            p->i++;
    }
    if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
        fl = true;
        p->i++;
        if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-'))
            p->i++;
        if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9')
            bad(p, "a bad number");
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9')
            p->i++;
    }
    char *t = jinja_strndup(&p->c->mem, p->s + st, p->i - st);
    if (fl)
        return jinja_float(strtod(t, NULL));
    char *end;
    errno       = 0;
    long long v = strtoll(t, &end, 10);
    if (errno == ERANGE)
        jinja_failc(p->c, HEARTH_ERANGE, "variables: the integer %s does not fit in 64 bits", t);
    return jinja_int(v);
}

static struct jv value(struct jsonp *p, int depth)
{
    if (depth > JSON_MAX_DEPTH)
        bad(p, "nesting past 200 levels");
    skip_ws(p);
    if (p->i >= p->n)
        bad(p, "a missing value");
    char ch = p->s[p->i];
    if (ch == '"') {
        p->i++;
        return string(p);
    }
    if (ch == '{') {
        p->i++;
        struct jv d = jinja_dict_new(p->c);
        skip_ws(p);
        if (p->i < p->n && p->s[p->i] == '}') {
            p->i++;
            return d;
        }
        for (;;) {
            skip_ws(p);
            if (p->i >= p->n || p->s[p->i] != '"')
                bad(p, "a missing key");
            p->i++;
            struct jv k = string(p);
            skip_ws(p);
            if (p->i >= p->n || p->s[p->i] != ':')
                bad(p, "a missing ':'");
            p->i++;
            jinja_dict_set(p->c, d.u.d, k, value(p, depth + 1));
            skip_ws(p);
            if (p->i < p->n && p->s[p->i] == ',') {
                p->i++;
                continue;
            }
            if (p->i < p->n && p->s[p->i] == '}') {
                p->i++;
                return d;
            }
            bad(p, "a missing ',' or '}'");
        }
    }
    if (ch == '[') {
        p->i++;
        struct jv l = jinja_list_new(p->c, 0);
        skip_ws(p);
        if (p->i < p->n && p->s[p->i] == ']') {
            p->i++;
            return l;
        }
        for (;;) {
            jinja_list_push(p->c, l.u.l, value(p, depth + 1));
            skip_ws(p);
            if (p->i < p->n && p->s[p->i] == ',') {
                p->i++;
                continue;
            }
            if (p->i < p->n && p->s[p->i] == ']') {
                p->i++;
                return l;
            }
            bad(p, "a missing ',' or ']'");
        }
    }
    if (lit(p, "true"))
        return jinja_bool(true);
    if (lit(p, "false"))
        return jinja_bool(false);
    if (lit(p, "null"))
        return jinja_none();
    if (lit(p, "NaN"))
        return jinja_float(NAN);
    return number(p);
}

struct jv jinja_from_json(struct jctx *c, const char *text, size_t len, int depth)
{
    struct jsonp p = {c, text, len, 0};
    struct jv v    = value(&p, depth);
    skip_ws(&p);
    if (p.i != p.n)
        bad(&p, "extra data");
    return v;
}

struct jv jinja_from_cjson(struct jctx *c, const cJSON *j, int depth)
{
    if (!j || depth > JSON_MAX_DEPTH)
        jinja_failc(c, HEARTH_EINVAL, "the variables nest too deep");
    if (cJSON_IsRaw(j))
        return jinja_from_json(c, j->valuestring ? j->valuestring : "null",
                               j->valuestring ? strlen(j->valuestring) : 4, depth);
    if (cJSON_IsNull(j))
        return jinja_none();
    if (cJSON_IsBool(j))
        return jinja_bool(cJSON_IsTrue(j));
    if (cJSON_IsNumber(j)) {
        double d = j->valuedouble;
        if (d == floor(d) && fabs(d) < 9.2e18)
            return jinja_int((int64_t)d);
        return jinja_float(d);
    }
    if (cJSON_IsString(j))
        return jinja_cstr(j->valuestring ? j->valuestring : "");
    if (cJSON_IsArray(j)) {
        struct jv l = jinja_list_new(c, (size_t)cJSON_GetArraySize(j));
        for (const cJSON *e = j->child; e; e = e->next)
            jinja_list_push(c, l.u.l, jinja_from_cjson(c, e, depth + 1));
        return l;
    }
    if (cJSON_IsObject(j)) {
        struct jv d = jinja_dict_new(c);
        for (const cJSON *e = j->child; e; e = e->next)
            jinja_dict_set(c, d.u.d, jinja_cstr(e->string ? e->string : ""),
                           jinja_from_cjson(c, e, depth + 1));
        return d;
    }
    return jinja_none();
}
