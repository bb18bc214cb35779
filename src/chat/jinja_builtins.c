/*
 * jinja_builtins.c: jinja2's filters and tests, and the globals Hugging
 * Face provides (range, namespace, dict, raise_exception, strftime_now).
 * Each is found by name; arguments come positional or by keyword as Python
 * binds them. Filters that return generators in jinja2 (map, select,
 * unique, items...) return JV_GEN, which has no length, index or JSON form,
 * as there. The str, dict and list methods are in jinja_str.c.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat/jinja_int.h"

/* ------------------------------------------------------------- arguments --- */

/* Argument idx by position or by name, else def. */
struct jv jinja_arg(struct jargs *a, int idx, const char *name, struct jv def)
{
    if (idx >= 0 && idx < a->n_pos)
        return a->pos[idx];
    for (int k = 0; name && k < a->n_kw; k++)
        if (jinja_str_is(a->kw_names[k], name))
            return a->kw[k];
    return def;
}

bool jinja_has_arg(struct jargs *a, int idx, const char *name)
{
    return jinja_arg(a, idx, name, jinja_undef(NULL)).kind != JV_UNDEF ||
           (idx >= 0 && idx < a->n_pos);
}

struct jstr jinja_need_str(struct jctx *c, struct jv v, const char *what)
{
    if (v.kind != JV_STR)
        jinja_failc(c, HEARTH_EINVAL, "%s must be str, not %s", what, jinja_type_name(v));
    return v.u.s;
}

int64_t jinja_need_int(struct jctx *c, struct jv v, const char *what)
{
    if (v.kind == JV_INT)
        return v.u.i;
    if (v.kind == JV_BOOL)
        return v.u.b;
    jinja_failc(c, HEARTH_EINVAL, "%s must be an integer, not %s", what, jinja_type_name(v));
}

struct jlist *jinja_iter(struct jctx *c, struct jv v)
{
    switch (v.kind) {
    case JV_LIST:
    case JV_TUPLE:
    case JV_GEN:
        return v.u.l;
    case JV_UNDEF:
        return jinja_list_new(c, 0).u.l;
    case JV_DICT: {
        struct jv l = jinja_list_new(c, v.u.d->n);
        for (size_t i = 0; i < v.u.d->n; i++)
            jinja_list_push(c, l.u.l, v.u.d->k[i]);
        return l.u.l;
    }
    case JV_STR: {
        struct jv l = jinja_list_new(c, 0);
        for (size_t i = 0; i < v.u.s.len;) {
            uint32_t cp;
            size_t k = jinja_utf8_decode(v.u.s.p + i, v.u.s.len - i, &cp);
            jinja_list_push(c, l.u.l, jinja_strn(v.u.s.p + i, k));
            i += k;
        }
        return l.u.l;
    }
    default:
        jinja_failc(c, HEARTH_EINVAL, "'%s' object is not iterable", jinja_type_name(v));
    }
}

/* ---------------------------------------------------------------- globals --- */

enum { G_RANGE, G_NAMESPACE, G_DICT, G_RAISE, G_STRFTIME, G_COUNT };
static const char *const global_names[G_COUNT] = {"range", "namespace", "dict", "raise_exception",
                                                  "strftime_now"};

int jinja_global_find(struct jstr name)
{
    for (int i = 0; i < G_COUNT; i++)
        if (jinja_str_is(name, global_names[i]))
            return i;
    return -1;
}

int64_t jinja_range(struct jctx *c, struct jargs *a, int64_t *start, int64_t *stop, int64_t *step)
{
    *start = 0;
    *step  = 1;
    if (a->n_pos == 1)
        *stop = jinja_need_int(c, a->pos[0], "range argument");
    else if (a->n_pos == 2 || a->n_pos == 3) {
        *start = jinja_need_int(c, a->pos[0], "range argument");
        *stop  = jinja_need_int(c, a->pos[1], "range argument");
        if (a->n_pos == 3)
            *step = jinja_need_int(c, a->pos[2], "range argument");
    } else
        jinja_failc(c, HEARTH_EINVAL, "range expected 1 to 3 arguments, got %d", a->n_pos);
    if (*step == 0)
        jinja_failc(c, HEARTH_EINVAL, "range() arg 3 must not be zero");
    uint64_t diff = 0, st = 0; /* unsigned: no overflow at the ends of int64 */
    if (*step > 0 && *stop > *start) {
        diff = (uint64_t)*stop - (uint64_t)*start;
        st   = (uint64_t)*step;
    } else if (*step < 0 && *stop < *start) {
        diff = (uint64_t)*start - (uint64_t)*stop;
        st   = 0 - (uint64_t)*step;
    }
    uint64_t n = st ? diff / st + (diff % st != 0) : 0;
    if (n > 100000)
        jinja_failc(c, HEARTH_ERANGE,
                    "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    return (int64_t)n;
}

struct jv jinja_global_call(struct jctx *c, int id, struct jargs *a)
{
    switch (id) {
    case G_RANGE: {
        int64_t start, stop, step, n = jinja_range(c, a, &start, &stop, &step);
        struct jv l = jinja_list_new(c, (size_t)n);
        for (int64_t k = 0; k < n; k++)
            jinja_list_push(c, l.u.l, jinja_int(start + k * step));
        l.form          = JV_FORM_RANGE;
        l.u.l->range[0] = start;
        l.u.l->range[1] = stop;
        l.u.l->range[2] = step;
        return l;
    }
    case G_NAMESPACE:
    case G_DICT: {
        struct jv d = jinja_dict_new(c);
        for (int i = 0; i < a->n_pos; i++) {
            if (a->pos[i].kind != JV_DICT)
                jinja_failc(c, HEARTH_EINVAL, "%s takes a mapping or keywords", global_names[id]);
            for (size_t k = 0; k < a->pos[i].u.d->n; k++)
                jinja_dict_set(c, d.u.d, a->pos[i].u.d->k[k], a->pos[i].u.d->v[k]);
        }
        for (int k = 0; k < a->n_kw; k++)
            jinja_dict_set(c, d.u.d, jinja_strn(a->kw_names[k].p, a->kw_names[k].len), a->kw[k]);
        if (id == G_NAMESPACE)
            d.kind = JV_NS;
        return d;
    }
    case G_RAISE: {
        struct jstr m = jinja_to_str(c, jinja_arg(a, 0, "message", jinja_undef(NULL)));
        /* the template's own message, verbatim, without the module prefix */
        if (c->mem.err && c->mem.err_len)
            snprintf(c->mem.err, c->mem.err_len, "%.*s", (int)m.len, m.p);
        longjmp(*c->mem.jb, HEARTH_EINVAL);
    }
    default: {
        struct jstr f =
            jinja_need_str(c, jinja_arg(a, 0, "format", jinja_undef(NULL)), "strftime format");
        time_t t = c->o.now >= 0 ? (time_t)c->o.now : time(NULL);
        struct tm tm;
        localtime_r(&t, &tm);
        char *fmt  = jinja_strndup(&c->mem, f.p, f.len);
        size_t cap = f.len * 8 + 64;
        char *out  = jinja_alloc(&c->mem, cap);
        size_t n   = f.len ? strftime(out, cap, fmt, &tm) : 0;
        return jinja_strn(out, n);
    }
    }
}

/* ------------------------------------------------------------------ tests --- */

static bool test_by_name(struct jctx *c, const char *name, struct jv v, struct jargs *a)
{
    static const char *const alias[][2] = {{"==", "eq"}, {"!=", "ne"}, {"<", "lt"},
                                           {"<=", "le"}, {">", "gt"},  {">=", "ge"}};
    for (size_t i = 0; i < sizeof alias / sizeof alias[0]; i++)
        if (!strcmp(name, alias[i][0]))
            name = alias[i][1];
    struct jv x = jinja_arg(a, 0, NULL, jinja_undef(NULL));
    if (!strcmp(name, "defined"))
        return v.kind != JV_UNDEF;
    if (!strcmp(name, "undefined"))
        return v.kind == JV_UNDEF;
    if (!strcmp(name, "none"))
        return v.kind == JV_NONE;
    if (!strcmp(name, "boolean"))
        return v.kind == JV_BOOL;
    if (!strcmp(name, "true"))
        return v.kind == JV_BOOL && v.u.b;
    if (!strcmp(name, "false"))
        return v.kind == JV_BOOL && !v.u.b;
    if (!strcmp(name, "integer"))
        return v.kind == JV_INT;
    if (!strcmp(name, "float"))
        return v.kind == JV_FLOAT;
    if (!strcmp(name, "number"))
        return jinja_is_num(v);
    if (!strcmp(name, "string"))
        return v.kind == JV_STR;
    if (!strcmp(name, "mapping"))
        return v.kind == JV_DICT;
    if (!strcmp(name, "iterable"))
        return v.kind == JV_STR || jinja_is_seq(v) || v.kind == JV_DICT || v.kind == JV_UNDEF ||
               v.kind == JV_GEN;
    if (!strcmp(name, "sequence"))
        return v.kind == JV_STR || jinja_is_seq(v) || v.kind == JV_DICT || v.kind == JV_UNDEF;
    if (!strcmp(name, "callable"))
        return v.kind == JV_MACRO || v.kind == JV_FUNC || v.kind == JV_METHOD ||
               v.kind == JV_UNDEF; /* Undefined defines __call__ (to raise) */
    if (!strcmp(name, "odd"))      /* value % 2 == 1, so floats and bools work as in Python */
        return jinja_eq(jinja_binop(c, '%', v, jinja_int(2)), jinja_int(1));
    if (!strcmp(name, "even"))
        return jinja_eq(jinja_binop(c, '%', v, jinja_int(2)), jinja_int(0));
    if (!strcmp(name, "divisibleby"))
        return jinja_eq(jinja_binop(c, '%', v, x), jinja_int(0));
    if (!strcmp(name, "eq") || !strcmp(name, "equalto") || !strcmp(name, "sameas"))
        return jinja_eq(v, x) && (name[0] != 's' || v.kind == x.kind);
    if (!strcmp(name, "ne"))
        return !jinja_eq(v, x);
    if (!strcmp(name, "lt") || !strcmp(name, "lessthan"))
        return jinja_cmp(c, v, x) < 0;
    if (!strcmp(name, "le"))
        return jinja_cmp(c, v, x) <= 0;
    if (!strcmp(name, "gt") || !strcmp(name, "greaterthan"))
        return jinja_cmp(c, v, x) > 0;
    if (!strcmp(name, "ge"))
        return jinja_cmp(c, v, x) >= 0;
    if (!strcmp(name, "in")) {
        struct jlist *l = NULL;
        if (x.kind == JV_STR) {
            if (v.kind != JV_STR)
                jinja_failc(c, HEARTH_EINVAL, "'in <string>' requires string as left operand");
            return !v.u.s.len || memmem(x.u.s.p, x.u.s.len, v.u.s.p, v.u.s.len);
        }
        if (x.kind == JV_DICT)
            return jinja_dict_get(x.u.d, v) != NULL;
        l = jinja_iter(c, x);
        for (size_t i = 0; i < l->n; i++)
            if (jinja_eq(l->v[i], v))
                return true;
        return false;
    }
    if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
        struct jstr s = jinja_to_str(c, v); /* str.islower/isupper: no opposite case, one cased */
        struct jv o   = jinja_case(c, s, name[0] == 'l' ? 'l' : 'u');
        struct jv x   = jinja_case(c, s, name[0] == 'l' ? 'u' : 'l');
        return jinja_eq(o, jinja_strn(s.p, s.len)) && !jinja_eq(x, jinja_strn(s.p, s.len));
    }
    if (!strcmp(name, "filter"))
        return v.kind == JV_STR && jinja_filter_exists(v.u.s);
    if (!strcmp(name, "test"))
        return v.kind == JV_STR && jinja_test_exists(v.u.s);
    return false; /* "escaped": nothing is Markup here */
}

static const char *const test_names[] = {
    "defined", "undefined", "none",        "boolean", "true",        "false",    "integer",
    "float",   "number",    "string",      "mapping", "iterable",    "sequence", "callable",
    "odd",     "even",      "divisibleby", "eq",      "equalto",     "sameas",   "ne",
    "lt",      "lessthan",  "le",          "gt",      "greaterthan", "ge",       "in",
    "lower",   "upper",     "filter",      "test",    "escaped",     "==",       "!=",
    "<",       "<=",        ">",           ">=",      NULL};

bool jinja_test_exists(struct jstr name)
{
    return jinja_name_in(test_names, name) != NULL;
}

bool jinja_test(struct jctx *c, struct jstr name, struct jv v, struct jargs *a)
{
    const char *n = jinja_name_in(test_names, name);
    if (!n)
        jinja_failc(c, HEARTH_EINVAL, "no test named '%.*s'", (int)name.len, name.p);
    return test_by_name(c, n, v, a);
}

/* ---------------------------------------------------------------- filters --- */

static int64_t length(struct jctx *c, struct jv v)
{
    switch (v.kind) {
    case JV_STR:
        jinja_work(c, 0, v.u.s.len);
        return (int64_t)jinja_utf8_count(v.u.s);
    case JV_LIST:
    case JV_TUPLE:
        return (int64_t)v.u.l->n;
    case JV_DICT:
        return (int64_t)v.u.d->n;
    case JV_UNDEF:
        return 0;
    default:
        jinja_failc(c, HEARTH_EINVAL, "object of type '%s' has no len()", jinja_type_name(v));
    }
}

/* The value at a dotted path ("a.b" or "0"), looked up as environment.getitem does. */
static struct jv attr_path(struct jctx *c, struct jv v, struct jstr path)
{
    size_t i = 0;
    while (i <= path.len) {
        const char *dot  = memchr(path.p + i, '.', path.len - i);
        size_t end       = dot ? (size_t)(dot - path.p) : path.len;
        struct jstr part = {path.p + i, end - i};
        bool num         = part.len > 0;
        for (size_t k = 0; k < part.len; k++)
            num &= part.p[k] >= '0' && part.p[k] <= '9';
        struct jv key = num ? jinja_int(atoll(jinja_strndup(&c->mem, part.p, part.len)))
                            : jinja_strn(part.p, part.len);
        v             = jinja_getitem(c, v, key);
        if (!dot)
            break;
        i = end + 1;
    }
    return v;
}

/* A key for sorting, unique, min and max: attribute applied, strings lowered unless cs. */
static struct jv sort_key(struct jctx *c, struct jv v, struct jv attr, bool cs)
{
    if (attr.kind == JV_STR)
        v = attr_path(c, v, attr.u.s);
    else if (attr.kind == JV_INT)
        v = jinja_getitem(c, v, attr);
    if (!cs && v.kind == JV_STR)
        return jinja_case(c, v.u.s, 'l');
    return v;
}

/* Stable merge sort of v[0..n) by keys k[0..n). */
static void msort(struct jctx *c, struct jv *v, struct jv *k, size_t n, struct jv *tv,
                  struct jv *tk, bool rev, bool keyed)
{
    if (n < 2)
        return;
    size_t h = n / 2;
    msort(c, v, k, h, tv, tk, rev, keyed);
    msort(c, v + h, k + h, n - h, tv, tk, rev, keyed);
    size_t i = 0, j = h, o = 0;
    while (i < h && j < n) {
        /* attribute keys compare as jinja2's one-item lists: equal ones (undefined too) first */
        int r = keyed && jinja_eq(k[j], k[i]) ? 0 : jinja_cmp(c, k[j], k[i]);
        if (rev ? r > 0 : r < 0) {
            tv[o]   = v[j];
            tk[o++] = k[j++];
        } else {
            tv[o]   = v[i];
            tk[o++] = k[i++];
        }
    }
    while (i < h) {
        tv[o]   = v[i];
        tk[o++] = k[i++];
    }
    while (j < n) {
        tv[o]   = v[j];
        tk[o++] = k[j++];
    }
    memcpy(v, tv, n * sizeof *v);
    memcpy(k, tk, n * sizeof *k);
}

/* l sorted stably by key (attr applied); keyed: keys compare as jinja2's one-item lists. */
static struct jv sorted(struct jctx *c, struct jlist *l, struct jv attr, bool cs, bool rev,
                        bool keyed)
{
    size_t n  = l->n;
    size_t lg = 1;
    while ((size_t)1 << lg < n && lg < 63)
        lg++;
    jinja_work(c, n * lg, 0);
    struct jv out = jinja_list_new(c, n);
    struct jv *k  = jinja_alloc(&c->mem, (n + 1) * sizeof *k);
    struct jv *tv = jinja_alloc(&c->mem, (n + 1) * sizeof *tv);
    struct jv *tk = jinja_alloc(&c->mem, (n + 1) * sizeof *tk);
    for (size_t i = 0; i < n; i++) {
        out.u.l->v[i] = l->v[i];
        k[i]          = sort_key(c, l->v[i], attr, cs);
    }
    out.u.l->n = n;
    msort(c, out.u.l->v, k, n, tv, tk, rev, keyed);
    return out;
}

/* groupby(attribute, default=None, case_sensitive=False): (grouper, list) tuples by key. */
static struct jv groupby(struct jctx *c, struct jv v, struct jargs *a)
{
    struct jv attr = jinja_arg(a, 0, "attribute", jinja_none());
    struct jv def  = jinja_arg(a, 1, "default", jinja_none());
    bool cs        = jinja_truthy(jinja_arg(a, 2, "case_sensitive", jinja_bool(false)));
    if (attr.kind != JV_STR && attr.kind != JV_INT)
        jinja_failc(c, HEARTH_EINVAL, "groupby needs an attribute");
    struct jlist *l = jinja_iter(c, v);
    struct jv keyed = jinja_list_new(c, l->n); /* (key, (item, raw key)), to sort by key */
    struct jv out   = jinja_list_new(c, 0);
    for (size_t i = 0; i < l->n; i++) {
        struct jv raw = sort_key(c, l->v[i], attr, true);
        if (raw.kind == JV_UNDEF && def.kind != JV_NONE)
            raw = def;
        struct jv k = !cs && raw.kind == JV_STR ? jinja_case(c, raw.u.s, 'l') : raw;
        jinja_list_push(c, keyed.u.l, jinja_pair(c, k, jinja_pair(c, l->v[i], raw)));
    }
    struct jlist *s = sorted(c, keyed.u.l, jinja_int(0), true, false, false).u.l;
    struct jv key = jinja_undef(NULL), group = {0};
    for (size_t i = 0; i < s->n; i++) {
        struct jv k = s->v[i].u.l->v[0], item = s->v[i].u.l->v[1];
        if (!i || !jinja_eq(k, key)) {
            group       = jinja_list_new(c, 0);
            struct jv t = jinja_pair(c, item.u.l->v[1], group);
            t.form      = 1;
            jinja_list_push(c, out.u.l, t);
            key = k;
        }
        jinja_list_push(c, group.u.l, item.u.l->v[0]);
    }
    return out;
}

/* json.dumps(v, ensure_ascii, indent, separators, sort_keys) as HF's tojson. */
static struct jv tojson(struct jctx *c, struct jv v, struct jargs *a)
{
    bool ascii     = jinja_truthy(jinja_arg(a, 0, "ensure_ascii", jinja_bool(false)));
    struct jv ind  = jinja_arg(a, 1, "indent", jinja_none());
    struct jv seps = jinja_arg(a, 2, "separators", jinja_none());
    bool sort      = jinja_truthy(jinja_arg(a, 3, "sort_keys", jinja_bool(false)));
    struct jstr istr, *indent = NULL;
    if (ind.kind == JV_BOOL) /* json.dumps takes True as 1 */
        ind = jinja_int(ind.u.b);
    if (ind.kind == JV_INT) {
        int64_t n = ind.u.i < 0 ? 0 : ind.u.i > 64 ? 64 : ind.u.i;
        char *p   = jinja_alloc(&c->mem, (size_t)n + 1);
        memset(p, ' ', (size_t)n);
        istr   = (struct jstr){p, (size_t)n};
        indent = &istr;
    } else if (ind.kind == JV_STR) {
        istr   = ind.u.s;
        indent = &istr;
    } else if (ind.kind != JV_NONE && ind.kind != JV_UNDEF)
        jinja_failc(c, HEARTH_EINVAL, "tojson indent must be an int or a string");
    struct jstr item = {indent ? "," : ", ", indent ? 1 : 2}, key = {": ", 2};
    if (jinja_is_seq(seps)) {
        if (seps.u.l->n != 2 || seps.u.l->v[0].kind != JV_STR || seps.u.l->v[1].kind != JV_STR)
            jinja_failc(c, HEARTH_EINVAL, "tojson separators must be two strings");
        item = seps.u.l->v[0].u.s;
        key  = seps.u.l->v[1].u.s;
    }
    struct jstr s = jinja_to_json(c, v, ascii, indent, item, key, sort);
    return jinja_strn(s.p, s.len);
}

static struct jv indent_filter(struct jctx *c, struct jstr s, struct jargs *a)
{
    struct jv w = jinja_arg(a, 0, "width", jinja_int(4));
    struct jstr ind;
    if (w.kind == JV_STR)
        ind = w.u.s;
    else {
        int64_t n = jinja_need_int(c, w, "indent width");
        if (n < 0)
            n = 0;
        if ((size_t)n > c->o.max_output)
            jinja_failc(c, HEARTH_ERANGE, "indent width too large");
        char *p = jinja_alloc(&c->mem, (size_t)n + 1);
        memset(p, ' ', (size_t)n);
        ind = (struct jstr){p, (size_t)n};
    }
    bool first = jinja_truthy(jinja_arg(a, 1, "first", jinja_bool(false)));
    bool blank = jinja_truthy(jinja_arg(a, 2, "blank", jinja_bool(false)));
    /* s += "\n", then splitlines, as jinja2 does */
    char *t = jinja_alloc(&c->mem, s.len + 2);
    memcpy(t, s.p, s.len);
    t[s.len]        = '\n';
    struct jlist *l = jinja_splitlines(c, (struct jstr){t, s.len + 1});
    struct jbuf b   = {0};
    if (first)
        jinja_buf_put(c, &b, ind.p, ind.len);
    for (size_t i = 0; i < l->n; i++) {
        struct jstr line = l->v[i].u.s;
        if (i) {
            jinja_buf_put(c, &b, "\n", 1);
            if (blank || line.len)
                jinja_buf_put(c, &b, ind.p, ind.len);
        }
        jinja_buf_put(c, &b, line.p, line.len);
    }
    return jinja_buf_value(&b);
}

struct jv jinja_escape(struct jctx *c, struct jstr s)
{
    struct jbuf b = {0};
    for (size_t i = 0; i < s.len; i++) {
        switch (s.p[i]) {
        case '&':
            jinja_buf_puts(c, &b, "&amp;");
            break;
        case '<':
            jinja_buf_puts(c, &b, "&lt;");
            break;
        case '>':
            jinja_buf_puts(c, &b, "&gt;");
            break;
        case '"':
            jinja_buf_puts(c, &b, "&#34;");
            break;
        case '\'':
            jinja_buf_puts(c, &b, "&#39;");
            break;
        default:
            jinja_buf_put(c, &b, s.p + i, 1);
        }
    }
    return jinja_buf_value(&b);
}

/* select/reject/selectattr/rejectattr: args from first on are the test and its arguments. */
static struct jv gen(struct jv list)
{
    list.kind = JV_GEN;
    return list;
}

static struct jv select_items(struct jctx *c, struct jv v, struct jargs *a, bool attr, bool keep)
{
    if (!jinja_truthy(v)) /* jinja2: "if value: for item in value" */
        return gen(jinja_list_new(c, 0));
    struct jlist *l  = jinja_iter(c, v);
    int first        = attr ? 1 : 0;
    struct jv out    = jinja_list_new(c, 0);
    struct jstr path = {0};
    if (attr)
        path = jinja_need_str(c, jinja_arg(a, 0, NULL, jinja_undef(NULL)), "attribute");
    struct jstr test = {0};
    bool has_test    = a->n_pos > first;
    if (has_test)
        test = jinja_need_str(c, a->pos[first], "test name");
    struct jargs ta = {a->pos + first + 1, has_test ? a->n_pos - first - 1 : 0, NULL, NULL, 0};
    for (size_t i = 0; i < l->n; i++) {
        jinja_enter(c);
        struct jv x = attr ? attr_path(c, l->v[i], path) : l->v[i];
        bool r      = has_test ? jinja_test(c, test, x, &ta) : jinja_truthy(x);
        if (r == keep)
            jinja_list_push(c, out.u.l, l->v[i]);
        jinja_leave(c);
    }
    return gen(out);
}

static struct jv map_items(struct jctx *c, struct jv v, struct jargs *a)
{
    if (!jinja_truthy(v))
        return gen(jinja_list_new(c, 0));
    struct jlist *l = jinja_iter(c, v);
    struct jv out   = jinja_list_new(c, l->n);
    struct jv at    = jinja_arg(a, -1, "attribute", jinja_undef(NULL));
    if (at.kind != JV_UNDEF) {
        struct jv def = jinja_arg(a, -1, "default", jinja_undef(NULL));
        for (size_t i = 0; i < l->n; i++) {
            struct jv x =
                at.kind == JV_STR ? attr_path(c, l->v[i], at.u.s) : jinja_getitem(c, l->v[i], at);
            if (x.kind == JV_UNDEF && def.kind != JV_UNDEF)
                x = def;
            jinja_list_push(c, out.u.l, x);
        }
        return gen(out);
    }
    struct jstr f   = jinja_need_str(c, jinja_arg(a, 0, NULL, jinja_undef(NULL)), "filter name");
    struct jargs fa = {a->pos + 1, a->n_pos - 1, a->kw_names, a->kw, a->n_kw};
    for (size_t i = 0; i < l->n; i++) {
        jinja_enter(c);
        jinja_list_push(c, out.u.l, jinja_filter(c, f, l->v[i], &fa));
        jinja_leave(c);
    }
    return gen(out);
}

static struct jv minmax(struct jctx *c, struct jv v, struct jargs *a, bool max)
{
    struct jlist *l = jinja_iter(c, v);
    jinja_work(c, l->n, 0);
    if (!l->n)
        return jinja_undef("No aggregated item, sequence was empty.");
    bool cs        = jinja_truthy(jinja_arg(a, 0, "case_sensitive", jinja_bool(false)));
    struct jv attr = jinja_arg(a, 1, "attribute", jinja_none());
    size_t best    = 0;
    struct jv bk   = sort_key(c, l->v[0], attr, cs);
    for (size_t i = 1; i < l->n; i++) {
        struct jv k = sort_key(c, l->v[i], attr, cs);
        int r       = jinja_cmp(c, k, bk);
        if (max ? r > 0 : r < 0) {
            best = i;
            bk   = k;
        }
    }
    return l->v[best];
}

static struct jv to_int(struct jctx *c, struct jv v, struct jargs *a)
{
    struct jv def = jinja_arg(a, 0, "default", jinja_int(0));
    switch (v.kind) {
    case JV_INT:
        return v;
    case JV_BOOL:
        return jinja_int(v.u.b);
    case JV_FLOAT:
        if (isnan(v.u.f) || isinf(v.u.f) || fabs(v.u.f) >= 9.2e18)
            return def;
        return jinja_int((int64_t)v.u.f);
    case JV_STR: {
        struct jstr s = jinja_strip(v.u.s, NULL, true, true);
        char *t       = jinja_alloc(&c->mem, s.len + 1);
        size_t n      = 0;
        for (size_t k = 0; k < s.len; k++) { /* Python allows 1_000, one _ between digits */
            bool between = k > 0 && k + 1 < s.len && s.p[k - 1] >= '0' && s.p[k - 1] <= '9' &&
                           s.p[k + 1] >= '0' && s.p[k + 1] <= '9';
            if (s.p[k] == '_' && !between)
                return def;
            if (s.p[k] != '_')
                t[n++] = s.p[k];
        }
        char *end;
        long long r = strtoll(
            t, &end, (int)jinja_need_int(c, jinja_arg(a, 1, "base", jinja_int(10)), "base"));
        if (s.len && !*end)
            return jinja_int(r);
        bool hex = strchr(t, 'x') || strchr(t, 'X');
        double d = strtod(t, &end);
        if (s.len && !*end && !hex && !isnan(d) && !isinf(d) && fabs(d) < 9.2e18)
            return jinja_int((int64_t)d);
        return def;
    }
    default:
        return def;
    }
}

static struct jv to_float(struct jctx *c, struct jv v, struct jargs *a)
{
    struct jv def = jinja_arg(a, 0, "default", jinja_float(0.0));
    switch (v.kind) {
    case JV_FLOAT:
        return v;
    case JV_INT:
        return jinja_float((double)v.u.i);
    case JV_BOOL:
        return jinja_float(v.u.b);
    case JV_STR: {
        struct jstr s = jinja_strip(v.u.s, NULL, true, true);
        char *t       = jinja_strndup(&c->mem, s.p, s.len);
        char *end;
        double d = strtod(t, &end);
        if (s.len && !*end && !(t[0] == '0' && (t[1] == 'x' || t[1] == 'X')))
            return jinja_float(d);
        return def;
    }
    default:
        return def;
    }
}

static struct jv round_filter(struct jctx *c, struct jv v, struct jargs *a)
{
    int64_t prec = jinja_need_int(c, jinja_arg(a, 0, "precision", jinja_int(0)), "precision");
    struct jv m  = jinja_arg(a, 1, "method", jinja_cstr("common"));
    if (!jinja_is_num(v))
        jinja_failc(c, HEARTH_EINVAL, "round needs a number, not %s", jinja_type_name(v));
    double x = jinja_num_f(v);
    if (prec < 0 || prec > 30)
        jinja_failc(c, HEARTH_EUNSUPPORTED, "round precision %lld is not supported",
                    (long long)prec);
    double p10 = pow(10, (double)prec);
    if (m.kind == JV_STR && jinja_str_is(m.u.s, "floor"))
        return jinja_float(floor(x * p10) / p10);
    if (m.kind == JV_STR && jinja_str_is(m.u.s, "ceil"))
        return jinja_float(ceil(x * p10) / p10);
    if (!(m.kind == JV_STR && jinja_str_is(m.u.s, "common")))
        jinja_failc(c, HEARTH_EINVAL, "method must be common, ceil or floor");
    if (v.kind != JV_FLOAT) /* Python's round(int, n) stays an int */
        return jinja_int(v.kind == JV_INT ? v.u.i : v.u.b);
    char buf[400];
    snprintf(buf, sizeof buf, "%.*f", (int)prec, x); /* correctly rounded, ties to even */
    return jinja_float(strtod(buf, NULL));
}

static struct jv items_of(struct jctx *c, struct jv v)
{
    if (v.kind == JV_UNDEF)
        return jinja_list_new(c, 0);
    if (v.kind != JV_DICT)
        jinja_failc(c, HEARTH_EINVAL, "Can only get item pairs from a mapping.");
    struct jv out = jinja_list_new(c, v.u.d->n);
    for (size_t i = 0; i < v.u.d->n; i++)
        jinja_list_push(c, out.u.l, jinja_pair(c, v.u.d->k[i], v.u.d->v[i]));
    return out;
}

static const char *const filter_names[] = {
    "length", "count",      "trim",    "join",    "default", "d",           "first",
    "last",   "list",       "map",     "select",  "reject",  "selectattr",  "rejectattr",
    "unique", "sort",       "string",  "int",     "float",   "abs",         "lower",
    "upper",  "capitalize", "title",   "replace", "round",   "indent",      "tojson",
    "items",  "dictsort",   "safe",    "escape",  "e",       "forceescape", "wordcount",
    "min",    "max",        "sum",     "reverse", "center",  "attr",        "batch",
    "format", "truncate",   "groupby", NULL};

/* jinja2's other filters: known, so a template naming them compiles as in jinja2, but a
   render that reaches one fails (random and pprint cannot match Python's output anyway). */
static const char *const filter_unsupported[] = {
    "filesizeformat", "pprint", "random",   "slice",   "striptags",
    "urlencode",      "urlize", "wordwrap", "xmlattr", NULL};

bool jinja_filter_exists(struct jstr name)
{
    return jinja_name_in(filter_names, name) || jinja_name_in(filter_unsupported, name);
}

struct jv jinja_filter(struct jctx *c, struct jstr fname, struct jv v, struct jargs *a)
{
    const char *name = jinja_name_in(filter_names, fname);
    if (!name && jinja_name_in(filter_unsupported, fname))
        jinja_failc(c, HEARTH_EUNSUPPORTED, "the filter '%.*s' is not supported", (int)fname.len,
                    fname.p);
    if (!name)
        jinja_failc(c, HEARTH_EINVAL, "no filter named '%.*s'", (int)fname.len, fname.p);
    struct jv none = jinja_none();
    if (!strcmp(name, "length") || !strcmp(name, "count"))
        return jinja_int(length(c, v));
    if (!strcmp(name, "default") || !strcmp(name, "d")) {
        bool boolean = jinja_truthy(jinja_arg(a, 1, "boolean", jinja_bool(false)));
        if (v.kind == JV_UNDEF || (boolean && !jinja_truthy(v)))
            return jinja_arg(a, 0, "default_value", jinja_strn("", 0));
        return v;
    }
    if (!strcmp(name, "safe")) {
        struct jstr t = jinja_to_str(c, v);
        struct jv r   = jinja_strn(t.p, t.len);
        r.safe        = true;
        return r;
    }
    if (!strcmp(name, "tojson"))
        return tojson(c, v, a);
    if (!strcmp(name, "trim")) {
        struct jv ch = jinja_arg(a, 0, "chars", none);
        struct jstr set;
        if (ch.kind != JV_NONE)
            set = jinja_need_str(c, ch, "trim chars");
        struct jstr r =
            jinja_strip(jinja_to_str(c, v), ch.kind == JV_NONE ? NULL : &set, true, true);
        return jinja_strn(r.p, r.len);
    }
    if (!strcmp(name, "string"))
        return v.kind == JV_STR ? v : jinja_strn(jinja_to_str(c, v).p, jinja_to_str(c, v).len);
    if (!strcmp(name, "lower") || !strcmp(name, "upper") || !strcmp(name, "capitalize"))
        return jinja_case(c, jinja_to_str(c, v), name[0] == 'l' ? 'l' : name[0] == 'u' ? 'u' : 'c');
    if (!strcmp(name, "title"))
        return jinja_title(c, jinja_to_str(c, v));
    if (!strcmp(name, "join")) {
        struct jlist *l = jinja_iter(c, v);
        jinja_work(c, l->n, 0);
        struct jstr sep =
            jinja_need_str(c, jinja_arg(a, 0, "d", jinja_strn("", 0)), "join separator");
        struct jv at  = jinja_arg(a, 1, "attribute", none);
        struct jbuf b = {0};
        for (size_t i = 0; i < l->n; i++) {
            if (i)
                jinja_buf_put(c, &b, sep.p, sep.len);
            struct jv x   = at.kind == JV_STR ? attr_path(c, l->v[i], at.u.s) : l->v[i];
            struct jstr t = jinja_to_str(c, x);
            jinja_buf_put(c, &b, t.p, t.len);
        }
        return jinja_buf_value(&b);
    }
    if (!strcmp(name, "first")) {
        struct jlist *l = jinja_iter(c, v);
        return l->n ? l->v[0] : jinja_undef("No first item, sequence was empty.");
    }
    if (!strcmp(name, "last")) {
        if (v.kind == JV_GEN)
            jinja_failc(c, HEARTH_EINVAL, "'generator' object is not reversible");
        struct jlist *l = jinja_iter(c, v);
        return l->n ? l->v[l->n - 1] : jinja_undef("No last item, sequence was empty.");
    }
    if (!strcmp(name, "list")) {
        struct jlist *l = jinja_iter(c, v);
        struct jv out   = jinja_list_new(c, l->n);
        for (size_t i = 0; i < l->n; i++)
            jinja_list_push(c, out.u.l, l->v[i]);
        return out;
    }
    if (!strcmp(name, "reverse")) {
        if (v.kind == JV_STR) {
            struct jlist *l = jinja_iter(c, v);
            struct jbuf b   = {0};
            for (size_t i = l->n; i-- > 0;)
                jinja_buf_put(c, &b, l->v[i].u.s.p, l->v[i].u.s.len);
            return jinja_buf_value(&b);
        }
        struct jlist *l = jinja_iter(c, v);
        struct jv out   = jinja_list_new(c, l->n);
        for (size_t i = l->n; i-- > 0;)
            jinja_list_push(c, out.u.l, l->v[i]);
        return v.kind == JV_GEN ? out : gen(out); /* reversed() is an iterator */
    }
    if (!strcmp(name, "map"))
        return map_items(c, v, a);
    if (!strcmp(name, "select") || !strcmp(name, "reject"))
        return select_items(c, v, a, false, name[0] == 's');
    if (!strcmp(name, "selectattr") || !strcmp(name, "rejectattr"))
        return select_items(c, v, a, true, name[0] == 's');
    if (!strcmp(name, "unique")) {
        struct jlist *l = jinja_iter(c, v);
        bool cs         = jinja_truthy(jinja_arg(a, 0, "case_sensitive", jinja_bool(false)));
        struct jv attr  = jinja_arg(a, 1, "attribute", none);
        struct jv out = jinja_list_new(c, 0), seen = jinja_dict_new(c); /* seen: a set */
        jinja_work(c, l->n, 0);
        for (size_t i = 0; i < l->n; i++) {
            struct jv k = sort_key(c, l->v[i], attr, cs);
            if (!jinja_hashable(k))
                jinja_failc(c, HEARTH_EINVAL, "unhashable type: '%s'", jinja_type_name(k));
            if (!jinja_dict_get(seen.u.d, k)) {
                jinja_dict_set(c, seen.u.d, k, jinja_none());
                jinja_list_push(c, out.u.l, l->v[i]);
            }
        }
        return gen(out);
    }
    if (!strcmp(name, "sort")) {
        struct jv attr = jinja_arg(a, 2, "attribute", none);
        return sorted(c, jinja_iter(c, v), attr,
                      jinja_truthy(jinja_arg(a, 1, "case_sensitive", jinja_bool(false))),
                      jinja_truthy(jinja_arg(a, 0, "reverse", jinja_bool(false))),
                      attr.kind == JV_STR || attr.kind == JV_INT);
    }
    if (!strcmp(name, "dictsort")) {
        if (v.kind == JV_UNDEF) /* value.items() on Undefined */
            jinja_undef_fail(c, v);
        struct jv it = items_of(c, v);
        bool cs      = jinja_truthy(jinja_arg(a, 0, "case_sensitive", jinja_bool(false)));
        struct jv by = jinja_arg(a, 1, "by", jinja_cstr("key"));
        bool rev     = jinja_truthy(jinja_arg(a, 2, "reverse", jinja_bool(false)));
        int pos      = by.kind == JV_STR && jinja_str_is(by.u.s, "value") ? 1 : 0;
        if (!pos && !(by.kind == JV_STR && jinja_str_is(by.u.s, "key")))
            jinja_failc(c, HEARTH_EINVAL, "You can only sort by either \"key\" or \"value\"");
        return sorted(c, it.u.l, jinja_int(pos), cs, rev, false);
    }
    if (!strcmp(name, "items"))
        return gen(items_of(c, v));
    if ((!strcmp(name, "int") || !strcmp(name, "float")) && v.kind == JV_UNDEF)
        jinja_undef_fail(c, v); /* int(Undefined) raises, and not the ValueError caught */
    if (!strcmp(name, "int"))
        return to_int(c, v, a);
    if (!strcmp(name, "float"))
        return to_float(c, v, a);
    if (!strcmp(name, "abs")) {
        if (v.kind == JV_INT)
            return v.u.i == INT64_MIN ? v : jinja_int(v.u.i < 0 ? -v.u.i : v.u.i);
        if (v.kind == JV_FLOAT)
            return jinja_float(fabs(v.u.f));
        if (v.kind == JV_BOOL)
            return jinja_int(v.u.b);
        jinja_failc(c, HEARTH_EINVAL, "bad operand type for abs(): '%s'", jinja_type_name(v));
    }
    if (!strcmp(name, "replace")) {
        struct jstr s = jinja_to_str(c, v);
        struct jv cnt = jinja_arg(a, 2, "count", none);
        return jinja_replace(c, s, jinja_to_str(c, jinja_arg(a, 0, "old", jinja_undef(NULL))),
                             jinja_to_str(c, jinja_arg(a, 1, "new", jinja_undef(NULL))),
                             cnt.kind == JV_NONE ? -1 : jinja_need_int(c, cnt, "count"));
    }
    if (!strcmp(name, "round"))
        return round_filter(c, v, a);
    if (!strcmp(name, "indent")) { /* jinja2 starts with s += "\n": only strings survive it */
        if (v.kind == JV_UNDEF)
            jinja_undef_fail(c, v);
        return indent_filter(c, jinja_need_str(c, v, "indent's value"), a);
    }
    if (!strcmp(name, "escape") || !strcmp(name, "e") || !strcmp(name, "forceescape")) {
        if (v.kind == JV_STR && v.safe && name[0] != 'f')
            return v;
        struct jv r = jinja_escape(c, jinja_to_str(c, v));
        r.safe      = true;
        return r;
    }
    if (!strcmp(name, "wordcount")) {
        struct jstr s = jinja_to_str(c, v);
        jinja_work(c, 0, s.len);
        int64_t n = 0;
        bool in   = false;
        for (size_t i = 0; i < s.len; i++) {
            unsigned char ch = (unsigned char)s.p[i];
            bool w           = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                     (ch >= '0' && ch <= '9') || ch == '_' || ch >= 0x80;
            n += w && !in;
            in = w;
        }
        return jinja_int(n);
    }
    if (!strcmp(name, "min") || !strcmp(name, "max"))
        return minmax(c, v, a, name[1] == 'a');
    if (!strcmp(name, "sum")) {
        struct jlist *l = jinja_iter(c, v);
        jinja_work(c, l->n, 0);
        struct jv at  = jinja_arg(a, 0, "attribute", none);
        struct jv acc = jinja_arg(a, 1, "start", jinja_int(0));
        for (size_t i = 0; i < l->n; i++) {
            struct jv x = at.kind == JV_STR ? attr_path(c, l->v[i], at.u.s) : l->v[i];
            if (acc.kind == JV_FLOAT || x.kind == JV_FLOAT)
                acc = jinja_float(
                    (acc.kind == JV_FLOAT ? acc.u.f : (double)jinja_need_int(c, acc, "sum")) +
                    (x.kind == JV_FLOAT ? x.u.f : (double)jinja_need_int(c, x, "sum item")));
            else {
                int64_t r;
                if (__builtin_add_overflow(jinja_need_int(c, acc, "sum"),
                                           jinja_need_int(c, x, "sum item"), &r))
                    jinja_failc(c, HEARTH_ERANGE, "an integer grew past 64 bits");
                acc = jinja_int(r);
            }
        }
        return acc;
    }
    if (!strcmp(name, "center"))
        return jinja_pad(c, jinja_to_str(c, v),
                         jinja_need_int(c, jinja_arg(a, 0, "width", jinja_int(80)), "width"),
                         jinja_cstr(" ").u.s, 'c');
    if (!strcmp(name, "format")) {
        struct jv args = jinja_list_new(c, (size_t)a->n_pos);
        for (int i = 0; i < a->n_pos; i++)
            jinja_list_push(c, args.u.l, a->pos[i]);
        args.kind = JV_TUPLE;
        return jinja_percent(c, jinja_to_str(c, v), args);
    }
    if (!strcmp(name, "truncate")) {
        if (v.kind !=
            JV_STR) { /* jinja2 measures len(s) first and returns short ones as they are */
            int64_t n    = length(c, v);
            int64_t len  = jinja_need_int(c, jinja_arg(a, 0, "length", jinja_int(255)), "length");
            struct jv lw = jinja_arg(a, 3, "leeway", none);
            if (n <= len + (lw.kind == JV_NONE ? 5 : jinja_need_int(c, lw, "leeway")))
                return v;
            jinja_failc(c, HEARTH_EINVAL, "truncate of a long %s", jinja_type_name(v));
        }
        struct jstr s  = v.u.s;
        int64_t len    = jinja_need_int(c, jinja_arg(a, 0, "length", jinja_int(255)), "length");
        bool kill      = jinja_truthy(jinja_arg(a, 1, "killwords", jinja_bool(false)));
        struct jstr en = jinja_need_str(c, jinja_arg(a, 2, "end", jinja_cstr("...")), "end");
        struct jv lw   = jinja_arg(a, 3, "leeway", none);
        int64_t leeway = lw.kind == JV_NONE ? 5 : jinja_need_int(c, lw, "leeway");
        int64_t n = (int64_t)jinja_utf8_count(s), n_end = (int64_t)jinja_utf8_count(en);
        if (len < n_end || leeway < 0)
            jinja_failc(c, HEARTH_EINVAL, "expected length >= %lld, got %lld", (long long)n_end,
                        (long long)len);
        if (n <= len + leeway)
            return jinja_strn(s.p, s.len);
        struct jstr head = {s.p, jinja_utf8_offset(s, (size_t)(len - n_end))};
        if (!kill) {
            const char *sp = NULL;
            for (size_t k = head.len; k-- > 0;)
                if (head.p[k] == ' ') {
                    sp = head.p + k;
                    break;
                }
            if (sp)
                head.len = (size_t)(sp - head.p);
        }
        struct jbuf b = {0};
        jinja_buf_put(c, &b, head.p, head.len);
        jinja_buf_put(c, &b, en.p, en.len);
        return jinja_buf_value(&b);
    }
    if (!strcmp(name, "groupby"))
        return groupby(c, v, a);
    if (!strcmp(name, "attr"))
        return jinja_getattr(c, v,
                             jinja_need_str(c, jinja_arg(a, 0, "name", none), "attribute name"));
    /* batch(linecount, fill_with=None) */
    int64_t size = jinja_need_int(c, jinja_arg(a, 0, "linecount", none), "batch size");
    if (size <= 0)
        jinja_failc(c, HEARTH_EINVAL, "batch size must be positive");
    struct jv fill  = jinja_arg(a, 1, "fill_with", none);
    bool fill_given = jinja_has_arg(a, 1, "fill_with");
    struct jlist *l = jinja_iter(c, v);
    struct jv out = jinja_list_new(c, 0), cur = jinja_list_new(c, 0);
    for (size_t i = 0; i < l->n; i++) {
        if (cur.u.l->n == (size_t)size) {
            jinja_list_push(c, out.u.l, cur);
            cur = jinja_list_new(c, 0);
        }
        jinja_list_push(c, cur.u.l, l->v[i]);
    }
    if (cur.u.l->n) {
        while (fill_given && fill.kind != JV_NONE && cur.u.l->n < (size_t)size)
            jinja_list_push(c, cur.u.l, fill);
        jinja_list_push(c, out.u.l, cur);
    }
    return gen(out);
}
