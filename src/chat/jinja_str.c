/*
 * jinja_str.c: Python's str methods as templates call them (strip, split,
 * replace, find, format, startswith...), with code-point semantics over
 * UTF-8, the % operator, case mapping, and the dict and list methods the
 * immutable sandbox allows (it refuses the mutating ones: append, pop...).
 * Case mapping covers ASCII, Latin-1, Latin Extended-A, Greek, Cyrillic and
 * fullwidth Latin; other scripts pass through unchanged.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja_int.h"
#include "util/utf8.h"

/* ---------------------------------------------------------- string tools --- */

static bool py_space(uint32_t cp)
{
    return cp == ' ' || (cp >= '\t' && cp <= '\r') || (cp >= 0x1c && cp <= 0x1f) || cp == 0x85 ||
           cp == 0xa0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 ||
           cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

static bool in_set(struct jstr set, uint32_t cp)
{
    for (size_t i = 0; i < set.len;) {
        uint32_t x;
        i += jinja_utf8_decode(set.p + i, set.len - i, &x);
        if (x == cp)
            return true;
    }
    return false;
}

/* Strips code points in chars (NULL: whitespace) from the left and/or right. */
struct jstr jinja_strip(struct jstr s, const struct jstr *chars, bool left, bool right)
{
    size_t a = 0, b = s.len;
    while (left && a < b) {
        uint32_t cp;
        size_t k = jinja_utf8_decode(s.p + a, b - a, &cp);
        if (chars ? !in_set(*chars, cp) : !py_space(cp))
            break;
        a += k;
    }
    while (right && b > a) {
        size_t st = b - 1;
        while (st > a && ((unsigned char)s.p[st] & 0xc0) == 0x80)
            st--;
        uint32_t cp;
        jinja_utf8_decode(s.p + st, b - st, &cp);
        if (chars ? !in_set(*chars, cp) : !py_space(cp))
            break;
        b = st;
    }
    return (struct jstr){s.p + a, b - a};
}

/*
 * Simple case mapping of one code point for the scripts chat text meets:
 * ASCII, Latin-1, Latin Extended-A, Greek, Cyrillic, fullwidth Latin.
 * Returns cp itself where it has no mapping.
 */
static uint32_t to_case(uint32_t cp, bool upper)
{
    if (cp < 0x80) {
        if (upper && cp >= 'a' && cp <= 'z')
            return cp - 32;
        if (!upper && cp >= 'A' && cp <= 'Z')
            return cp + 32;
        return cp;
    }
    if (cp >= 0xc0 && cp <= 0xfe && cp != 0xd7 && cp != 0xf7 && cp != 0xdf)
        return upper ? (cp >= 0xe0 ? cp - 32 : cp) : (cp < 0xe0 ? cp + 32 : cp);
    if (cp == 0xff)
        return upper ? 0x178 : cp;
    if (cp == 0x178)
        return upper ? cp : 0xff;
    if (cp == 0xb5)
        return upper ? 0x39c : cp;
    if ((cp >= 0x100 && cp <= 0x12f) || (cp >= 0x132 && cp <= 0x137) ||
        (cp >= 0x14a && cp <= 0x177)) /* even upper, odd lower */
        return upper ? (cp & ~1u) : (cp | 1u);
    if ((cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17e)) /* odd upper */
        return upper ? ((cp & 1u) ? cp : cp - 1) : ((cp & 1u) ? cp + 1 : cp);
    if (cp >= 0x391 && cp <= 0x3a9 && cp != 0x3a2)
        return upper ? cp : cp + 32;
    if (cp >= 0x3b1 && cp <= 0x3c9)
        return upper ? (cp == 0x3c2 ? 0x3a3 : cp - 32) : cp;
    if (cp == 0x386)
        return upper ? cp : 0x3ac;
    if (cp == 0x3ac)
        return upper ? 0x386 : cp;
    if (cp >= 0x388 && cp <= 0x38a)
        return upper ? cp : cp + 37;
    if (cp >= 0x3ad && cp <= 0x3af)
        return upper ? cp - 37 : cp;
    if (cp == 0x38c)
        return upper ? cp : 0x3cc;
    if (cp == 0x3cc)
        return upper ? 0x38c : cp;
    if (cp == 0x38e || cp == 0x38f)
        return upper ? cp : cp + 63;
    if (cp == 0x3cd || cp == 0x3ce)
        return upper ? cp - 63 : cp;
    if (cp >= 0x410 && cp <= 0x42f)
        return upper ? cp : cp + 32;
    if (cp >= 0x430 && cp <= 0x44f)
        return upper ? cp - 32 : cp;
    if (cp >= 0x400 && cp <= 0x40f)
        return upper ? cp : cp + 80;
    if (cp >= 0x450 && cp <= 0x45f)
        return upper ? cp - 80 : cp;
    if (cp >= 0xff21 && cp <= 0xff3a)
        return upper ? cp : cp + 32;
    if (cp >= 0xff41 && cp <= 0xff5a)
        return upper ? cp - 32 : cp;
    return cp;
}

static bool cased(uint32_t cp)
{
    return to_case(cp, true) != cp || to_case(cp, false) != cp || cp == 0xdf;
}

/* One code point of s at *i through a case change; ß upper-cases to "SS" as in Python. */
static void put_case(struct jctx *c, struct jbuf *b, struct jstr s, size_t *i, bool upper,
                     uint32_t *cp_out)
{
    uint32_t cp;
    size_t k = jinja_utf8_decode(s.p + *i, s.len - *i, &cp);
    char tmp[4];
    if (k == 1 && cp >= 0x80) /* a stray byte stays as it is */
        jinja_buf_put(c, b, s.p + *i, 1);
    else if (upper && cp == 0xdf)
        jinja_buf_put(c, b, "SS", 2);
    else
        jinja_buf_put(c, b, tmp, utf8_encode(to_case(cp, upper), tmp));
    *i += k;
    *cp_out = cp;
}

/* Python's upper ('u'), lower ('l'), capitalize ('c'), swapcase ('s') and title ('t'). */
struct jv jinja_case(struct jctx *c, struct jstr s, int mode)
{
    struct jbuf b   = {0};
    bool prev_cased = false;
    for (size_t i = 0; i < s.len;) {
        uint32_t cp;
        jinja_utf8_decode(s.p + i, s.len - i, &cp);
        bool upper;
        switch (mode) {
        case 'u':
            upper = true;
            break;
        case 'l':
            upper = false;
            break;
        case 'c':
            upper = i == 0;
            break;
        case 's':
            upper = to_case(cp, true) != cp;
            break;
        default:
            upper = !prev_cased;
            break;
        }
        put_case(c, &b, s, &i, upper, &cp);
        prev_cased = cased(cp);
    }
    return jinja_strn(b.p ? b.p : "", b.len);
}

/* jinja2's title filter: words split on whitespace, dashes and brackets. */
struct jv jinja_title(struct jctx *c, struct jstr s)
{
    struct jbuf b = {0};
    bool start    = true;
    for (size_t i = 0; i < s.len;) {
        char ch  = s.p[i];
        bool sep = ch == ' ' || (ch >= '\t' && ch <= '\r') || ch == '-' || ch == '[' || ch == ']' ||
                   ch == '(' || ch == ')' || ch == '{' || ch == '}';
        uint32_t cp;
        if (sep) {
            jinja_buf_put(c, &b, &ch, 1);
            i++;
        } else
            put_case(c, &b, s, &i, start, &cp);
        start = sep;
    }
    return jinja_buf_value(&b);
}

static const char *find(struct jstr h, struct jstr n, size_t from)
{
    if (from > h.len)
        return NULL;
    if (!n.len)
        return h.p + from;
    return memmem(h.p + from, h.len - from, n.p, n.len);
}

struct jv jinja_replace(struct jctx *c, struct jstr s, struct jstr old, struct jstr new,
                        int64_t count)
{
    struct jbuf b = {0};
    size_t i      = 0;
    int64_t done  = 0;
    if (!old.len) { /* Python inserts new between code points and at both ends */
        for (;;) {
            if (count >= 0 && done >= count)
                break;
            jinja_buf_put(c, &b, new.p, new.len);
            done++;
            if (i >= s.len)
                break;
            uint32_t cp;
            size_t k = jinja_utf8_decode(s.p + i, s.len - i, &cp);
            jinja_buf_put(c, &b, s.p + i, k);
            i += k;
        }
        jinja_buf_put(c, &b, s.p + i, s.len - i);
        return jinja_buf_value(&b);
    }
    for (;;) {
        const char *f = count >= 0 && done >= count ? NULL : find(s, old, i);
        if (!f) {
            jinja_buf_put(c, &b, s.p + i, s.len - i);
            break;
        }
        jinja_buf_put(c, &b, s.p + i, (size_t)(f - (s.p + i)));
        jinja_buf_put(c, &b, new.p, new.len);
        i = (size_t)(f - s.p) + old.len;
        done++;
    }
    return jinja_buf_value(&b);
}

static struct jv split(struct jctx *c, struct jstr s, struct jv sepv, int64_t maxsplit, bool right)
{
    struct jv out = jinja_list_new(c, 0);
    if (sepv.kind == JV_NONE || sepv.kind == JV_UNDEF) {
        /* runs of whitespace; no empty strings */
        struct jv parts = jinja_list_new(c, 0);
        size_t i        = 0;
        while (i < s.len) {
            uint32_t cp;
            size_t k = jinja_utf8_decode(s.p + i, s.len - i, &cp);
            if (py_space(cp)) {
                i += k;
                continue;
            }
            size_t st = i;
            while (i < s.len) {
                k = jinja_utf8_decode(s.p + i, s.len - i, &cp);
                if (py_space(cp))
                    break;
                i += k;
            }
            jinja_list_push(c, parts.u.l, jinja_strn(s.p + st, i - st));
        }
        if (maxsplit < 0 || (size_t)maxsplit + 1 >= parts.u.l->n)
            return parts;
        /* a bounded split keeps the rest of the text, leading/trailing space trimmed */
        struct jlist *p = parts.u.l;
        if (!right) {
            for (int64_t k = 0; k < maxsplit; k++)
                jinja_list_push(c, out.u.l, p->v[k]);
            const char *rest = p->v[maxsplit].u.s.p; /* keeps its trailing whitespace */
            jinja_list_push(c, out.u.l, jinja_strn(rest, (size_t)(s.p + s.len - rest)));
        } else {
            size_t keep    = p->n - (size_t)maxsplit;
            struct jv last = p->v[keep - 1];
            jinja_list_push(c, out.u.l, jinja_strn(s.p, (size_t)(last.u.s.p + last.u.s.len - s.p)));
            for (size_t k = keep; k < p->n; k++)
                jinja_list_push(c, out.u.l, p->v[k]);
        }
        return out;
    }
    struct jstr sep = jinja_need_str(c, sepv, "sep");
    if (!sep.len)
        jinja_failc(c, HEARTH_EINVAL, "empty separator");
    if (!right) {
        size_t i = 0;
        for (int64_t n = 0; maxsplit < 0 || n < maxsplit; n++) {
            const char *f = find(s, sep, i);
            if (!f)
                break;
            jinja_list_push(c, out.u.l, jinja_strn(s.p + i, (size_t)(f - s.p) - i));
            i = (size_t)(f - s.p) + sep.len;
        }
        jinja_list_push(c, out.u.l, jinja_strn(s.p + i, s.len - i));
        return out;
    }
    /* rsplit: collect from the right, then reverse */
    size_t end    = s.len;
    struct jv rev = jinja_list_new(c, 0);
    for (int64_t n = 0; maxsplit < 0 || n < maxsplit; n++) {
        const char *f = NULL;
        for (size_t k = end; k >= sep.len; k--)
            if (!memcmp(s.p + k - sep.len, sep.p, sep.len)) {
                f = s.p + k - sep.len;
                break;
            }
        if (!f)
            break;
        jinja_list_push(c, rev.u.l, jinja_strn(f + sep.len, end - (size_t)(f - s.p) - sep.len));
        end = (size_t)(f - s.p);
    }
    jinja_list_push(c, rev.u.l, jinja_strn(s.p, end));
    for (size_t k = rev.u.l->n; k-- > 0;)
        jinja_list_push(c, out.u.l, rev.u.l->v[k]);
    return out;
}

/* str.jinja_splitlines(keepends=False). */
struct jlist *jinja_splitlines(struct jctx *c, struct jstr s)
{
    struct jv out = jinja_list_new(c, 0);
    size_t i = 0, st = 0;
    while (i < s.len) {
        uint32_t cp;
        size_t k = jinja_utf8_decode(s.p + i, s.len - i, &cp);
        bool nl  = cp == '\n' || cp == '\r' || cp == '\v' || cp == '\f' ||
                  (cp >= 0x1c && cp <= 0x1e) || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
        if (nl) {
            jinja_list_push(c, out.u.l, jinja_strn(s.p + st, i - st));
            if (cp == '\r' && i + 1 < s.len && s.p[i + 1] == '\n')
                k++;
            st = i + k;
        }
        i += k;
    }
    if (st < s.len)
        jinja_list_push(c, out.u.l, jinja_strn(s.p + st, s.len - st));
    return out.u.l;
}

static bool affix(struct jctx *c, struct jstr s, struct jv p, bool suffix)
{
    if (jinja_is_seq(p)) {
        for (size_t i = 0; i < p.u.l->n; i++)
            if (affix(c, s, p.u.l->v[i], suffix))
                return true;
        return false;
    }
    struct jstr x = jinja_need_str(c, p, suffix ? "endswith argument" : "startswith argument");
    if (x.len > s.len)
        return false;
    return !memcmp(suffix ? s.p + s.len - x.len : s.p, x.p, x.len);
}

/* A format spec [[fill]align][width][.precision][type] for s, d and f; others fail. */
static struct jstr format_spec(struct jctx *c, struct jv v, struct jstr t, struct jstr spec,
                               bool converted)
{
    size_t i  = 0;
    char fill = ' ', align = 0;
    if (spec.len >= 2 && strchr("<>^", spec.p[1])) {
        fill  = spec.p[0];
        align = spec.p[1];
        i     = 2;
    } else if (spec.len >= 1 && strchr("<>^", spec.p[0]))
        align = spec.p[i++];
    int64_t width = 0, prec = -1;
    while (i < spec.len && spec.p[i] >= '0' && spec.p[i] <= '9' && width < 100000)
        width = width * 10 + (spec.p[i++] - '0');
    if (i < spec.len && spec.p[i] == '.') {
        prec = 0;
        for (i++; i < spec.len && spec.p[i] >= '0' && spec.p[i] <= '9' && prec < 1000; i++)
            prec = prec * 10 + (spec.p[i] - '0');
    }
    char type = i < spec.len ? spec.p[i++] : 0;
    if (i != spec.len || (type && !strchr("sdf", type)))
        jinja_failc(c, HEARTH_EUNSUPPORTED, "format spec '%.*s' is not supported", (int)spec.len,
                    spec.p);
    bool num = !converted && (v.kind == JV_INT || v.kind == JV_FLOAT);
    if (type == 'f' || (num && prec >= 0)) {
        if (v.kind != JV_INT && v.kind != JV_FLOAT)
            jinja_failc(c, HEARTH_EINVAL, "Unknown format code 'f' for object of type '%s'",
                        jinja_type_name(v));
        struct jbuf nb = {0};
        jinja_buf_printf(c, &nb, "%.*f", (int)(prec < 0 ? 6 : prec),
                         v.kind == JV_INT ? (double)v.u.i : v.u.f);
        t = jinja_buf_str(&nb);
    } else if (prec >= 0 && !num) {
        t.len = jinja_utf8_offset(t, (size_t)prec);
    }
    if (!align)
        align = num ? '>' : '<';
    int64_t pad = width - (int64_t)jinja_utf8_count(t);
    if (pad <= 0)
        return t;
    int64_t left  = align == '>' ? pad : align == '^' ? pad / 2 : 0;
    struct jbuf o = {0};
    for (int64_t k = 0; k < left; k++)
        jinja_buf_put(c, &o, &fill, 1);
    jinja_buf_put(c, &o, t.p, t.len);
    for (int64_t k = left; k < pad; k++)
        jinja_buf_put(c, &o, &fill, 1);
    return jinja_buf_str(&o);
}

/* str.format with {}, {0}, {name}, !r / !s conversions and {{ }} escapes. */
static bool all_digits(struct jstr s)
{
    for (size_t i = 0; i < s.len; i++)
        if (s.p[i] < '0' || s.p[i] > '9')
            return false;
    return s.len > 0;
}

static struct jv format(struct jctx *c, struct jstr f, struct jargs *a)
{
    struct jbuf b = {0};
    int autoidx   = 0;
    for (size_t i = 0; i < f.len; i++) {
        char ch = f.p[i];
        if (ch == '}') {
            if (i + 1 < f.len && f.p[i + 1] == '}')
                i++;
            else
                jinja_failc(c, HEARTH_EINVAL, "Single '}' encountered in format string");
            jinja_buf_put(c, &b, "}", 1);
            continue;
        }
        if (ch != '{') {
            jinja_buf_put(c, &b, &ch, 1);
            continue;
        }
        if (i + 1 < f.len && f.p[i + 1] == '{') {
            jinja_buf_put(c, &b, "{", 1);
            i++;
            continue;
        }
        const char *end = memchr(f.p + i, '}', f.len - i);
        if (!end)
            jinja_failc(c, HEARTH_EINVAL, "Single '{' encountered in format string");
        struct jstr field = {f.p + i + 1, (size_t)(end - (f.p + i + 1))};
        i                 = (size_t)(end - f.p);
        char conv         = 0;
        const char *bang  = memchr(field.p, '!', field.len);
        if (bang) {
            conv      = bang + 1 < field.p + field.len ? bang[1] : 0;
            field.len = (size_t)(bang - field.p);
        }
        struct jstr spec  = {"", 0};
        const char *colon = memchr(field.p, ':', field.len);
        if (colon) {
            spec      = (struct jstr){colon + 1, (size_t)(field.p + field.len - colon - 1)};
            field.len = (size_t)(colon - field.p);
        }
        if (memchr(field.p, '.', field.len) || memchr(field.p, '[', field.len))
            jinja_failc(c, HEARTH_EUNSUPPORTED, "format fields with . or [] are not supported");
        struct jv v;
        if (!field.len) {
            if (autoidx >= a->n_pos)
                jinja_failc(c, HEARTH_EINVAL,
                            "Replacement index %d out of range for positional "
                            "args tuple",
                            autoidx);
            v = a->pos[autoidx++];
        } else if (all_digits(field)) {
            /* the field is not NUL-terminated, and a long one must not wrap to a negative index */
            int64_t idx = 0;
            for (size_t k = 0; k < field.len && idx <= INT32_MAX; k++)
                idx = idx * 10 + (field.p[k] - '0');
            if (idx >= a->n_pos)
                jinja_failc(c, HEARTH_EINVAL,
                            "Replacement index %d out of range for positional "
                            "args tuple",
                            (int)(idx > INT32_MAX ? INT32_MAX : idx));
            v = a->pos[idx];
        } else {
            bool found = false;
            for (int k = 0; k < a->n_kw; k++)
                if (a->kw_names[k].len == field.len &&
                    !memcmp(a->kw_names[k].p, field.p, field.len)) {
                    v     = a->kw[k];
                    found = true;
                }
            if (!found)
                jinja_failc(c, HEARTH_EINVAL, "'%.*s'", (int)field.len, field.p);
        }
        struct jstr t = conv == 'r' ? jinja_to_repr(c, v) : jinja_to_str(c, v);
        if (spec.len)
            t = format_spec(c, v, t, spec, conv != 0);
        jinja_buf_put(c, &b, t.p, t.len);
    }
    return jinja_buf_value(&b);
}

struct jv jinja_pad(struct jctx *c, struct jstr s, int64_t width, struct jstr fill, int mode)
{
    int64_t n = (int64_t)jinja_utf8_count(s);
    if (width <= n)
        return jinja_strn(s.p, s.len);
    if ((uint64_t)width > c->o.max_output)
        jinja_failc(c, HEARTH_ERANGE, "a padded string would pass %zu bytes", c->o.max_output);
    int64_t pad   = width - n;
    int64_t left  = mode == 'c' ? pad / 2 + (pad & width & 1) : mode == 'r' ? pad : 0;
    struct jbuf b = {0};
    for (int64_t i = 0; i < left; i++)
        jinja_buf_put(c, &b, fill.p, fill.len);
    jinja_buf_put(c, &b, s.p, s.len);
    for (int64_t i = left; i < pad; i++)
        jinja_buf_put(c, &b, fill.p, fill.len);
    return jinja_buf_value(&b);
}

struct jv jinja_percent(struct jctx *c, struct jstr f, struct jv args)
{
    struct jbuf b   = {0};
    struct jlist *l = NULL, one = {.v = &args, .n = 1, .cap = 1};
    l           = args.kind == JV_TUPLE ? args.u.l : &one;
    size_t next = 0;
    for (size_t i = 0; i < f.len; i++) {
        if (f.p[i] != '%') {
            jinja_buf_put(c, &b, f.p + i, 1);
            continue;
        }
        char conv = i + 1 < f.len ? f.p[++i] : 0;
        if (conv == '%') {
            jinja_buf_put(c, &b, "%", 1);
            continue;
        }
        if (!strchr("sdir", conv) || !conv)
            jinja_failc(c, HEARTH_EUNSUPPORTED, "format '%%%c' is not supported", conv);
        if (next >= l->n)
            jinja_failc(c, HEARTH_EINVAL, "not enough arguments for format string");
        struct jv v = l->v[next++];
        struct jstr t;
        if (conv == 'r')
            t = jinja_to_repr(c, v);
        else if (conv == 's')
            t = jinja_to_str(c, v);
        else {
            if (v.kind == JV_FLOAT)
                v = jinja_int((int64_t)v.u.f);
            if (v.kind != JV_INT && v.kind != JV_BOOL)
                jinja_failc(c, HEARTH_EINVAL, "%%%c format: a real number is required, not %s",
                            conv, jinja_type_name(v));
            t = jinja_to_str(c, v.kind == JV_BOOL ? jinja_int(v.u.b) : v);
        }
        jinja_buf_put(c, &b, t.p, t.len);
    }
    /* Python skips this check when the argument is a mapping by its protocol: dicts, and
       lists too (they have __getitem__) */
    bool mapping = args.kind == JV_DICT || args.kind == JV_LIST || args.kind == JV_UNDEF;
    if (next < l->n && !mapping)
        jinja_failc(c, HEARTH_EINVAL, "not all arguments converted during string formatting");
    return jinja_buf_value(&b);
}

/* ---------------------------------------------------------------- methods --- */

static const char *const str_methods[] = {
    "strip",        "lstrip",       "rstrip",  "split",   "rsplit",    "splitlines",
    "startswith",   "endswith",     "upper",   "lower",   "title",     "capitalize",
    "swapcase",     "casefold",     "replace", "find",    "rfind",     "index",
    "rindex",       "count",        "format",  "join",    "isdigit",   "isalpha",
    "isalnum",      "isspace",      "isupper", "islower", "isnumeric", "isdecimal",
    "removeprefix", "removesuffix", "zfill",   "center",  "ljust",     "rjust",
    "partition",    "rpartition",   NULL};
static const char *const dict_methods[] = {"items", "keys", "values", "get", "copy", NULL};
static const char *const dict_unsafe[]  = {"pop", "popitem", "setdefault", "update", "clear", NULL};
static const char *const list_methods[] = {"index", "count", "copy", NULL};
static const char *const list_unsafe[]  = {"append", "extend", "insert",  "pop", "remove",
                                           "clear",  "sort",   "reverse", NULL};

const char *jinja_name_in(const char *const *t, struct jstr name)
{
    for (int i = 0; t[i]; i++)
        if (jinja_str_is(name, t[i]))
            return t[i];
    return NULL;
}

const char *jinja_method_find(struct jv obj, struct jstr name, bool *unsafe)
{
    const char *m = NULL;
    *unsafe       = false;
    switch (obj.kind) {
    case JV_STR:
        return jinja_name_in(str_methods, name);
    case JV_DICT:
        if ((m = jinja_name_in(dict_unsafe, name)))
            *unsafe = true;
        return m ? m : jinja_name_in(dict_methods, name);
    case JV_LIST:
        if ((m = jinja_name_in(list_unsafe, name)))
            *unsafe = true;
        return m ? m : jinja_name_in(list_methods, name);
    case JV_TUPLE:
        return name.len == 5 && jinja_str_is(name, "index") ? "index"
               : jinja_str_is(name, "count")                ? "count"
                                                            : NULL;
    default:
        return NULL;
    }
}

static bool all_chars(struct jstr s, int cls)
{
    if (!s.len)
        return false;
    bool any_cased = false;
    for (size_t i = 0; i < s.len; i++) {
        char ch = s.p[i];
        bool ok;
        switch (cls) {
        case 'd':
            ok = ch >= '0' && ch <= '9';
            break;
        case 'a':
            ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
            break;
        case 'n':
            ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
            break;
        case 's':
            ok = ch == ' ' || (ch >= '\t' && ch <= '\r');
            break;
        case 'u':
            ok = !(ch >= 'a' && ch <= 'z');
            any_cased |= ch >= 'A' && ch <= 'Z';
            break;
        default:
            ok = !(ch >= 'A' && ch <= 'Z');
            any_cased |= ch >= 'a' && ch <= 'z';
            break;
        }
        if (!ok)
            return false;
    }
    return cls == 'u' || cls == 'l' ? any_cased : true;
}

/* Python's find/rfind/count over code points; the code-point index or -1. */
static int64_t str_find(struct jctx *c, struct jstr s, struct jstr sub, bool rev)
{
    const char *hit = NULL;
    if (!rev)
        hit = find(s, sub, 0);
    else
        for (size_t k = s.len + 1; k-- > 0;)
            if (k + sub.len <= s.len && !memcmp(s.p + k, sub.p, sub.len)) {
                hit = s.p + k;
                break;
            }
    if (!hit)
        return -1;
    return (int64_t)jinja_utf8_count((struct jstr){s.p, (size_t)(hit - s.p)});
}

static struct jv str_method(struct jctx *c, struct jstr s, const char *name, struct jargs *a)
{
    jinja_work(c, 0, s.len); /* every method scans at most the string a few times */
    struct jv none = jinja_none();
    if (!strcmp(name, "strip") || !strcmp(name, "lstrip") || !strcmp(name, "rstrip")) {
        struct jv ch = jinja_arg(a, 0, "chars", none);
        struct jstr set;
        if (ch.kind != JV_NONE)
            set = jinja_need_str(c, ch, "strip arg");
        struct jstr r =
            jinja_strip(s, ch.kind == JV_NONE ? NULL : &set, name[0] != 'r', name[0] != 'l');
        return jinja_strn(r.p, r.len);
    }
    if (!strcmp(name, "split") || !strcmp(name, "rsplit"))
        return split(c, s, jinja_arg(a, 0, "sep", none),
                     jinja_need_int(c, jinja_arg(a, 1, "maxsplit", jinja_int(-1)), "maxsplit"),
                     name[0] == 'r');
    if (!strcmp(name, "splitlines"))
        return (struct jv){.kind = JV_LIST, .u.l = jinja_splitlines(c, s)};
    if (!strcmp(name, "startswith") || !strcmp(name, "endswith")) {
        struct jv st = jinja_arg(a, 1, NULL, none), en = jinja_arg(a, 2, NULL, none);
        if (st.kind != JV_NONE || en.kind != JV_NONE) { /* s[start:end], by code points */
            int64_t n  = (int64_t)jinja_utf8_count(s);
            int64_t lo = st.kind == JV_NONE ? 0 : jinja_need_int(c, st, "start");
            int64_t hi = en.kind == JV_NONE ? n : jinja_need_int(c, en, "end");
            lo         = lo < 0 ? (lo + n < 0 ? 0 : lo + n) : (lo > n ? n : lo);
            hi         = hi < 0 ? (hi + n < 0 ? 0 : hi + n) : (hi > n ? n : hi);
            if (hi < lo)
                return jinja_bool(false);
            size_t x = jinja_utf8_offset(s, (size_t)lo), y = jinja_utf8_offset(s, (size_t)hi);
            s = (struct jstr){s.p + x, y - x};
        }
        return jinja_bool(affix(c, s, jinja_arg(a, 0, NULL, jinja_undef(NULL)), name[0] == 'e'));
    }
    if (!strcmp(name, "upper"))
        return jinja_case(c, s, 'u');
    if (!strcmp(name, "lower") || !strcmp(name, "casefold"))
        return jinja_case(c, s, 'l');
    if (!strcmp(name, "title"))
        return jinja_case(c, s, 't');
    if (!strcmp(name, "capitalize"))
        return jinja_case(c, s, 'c');
    if (!strcmp(name, "swapcase"))
        return jinja_case(c, s, 's');
    if (!strcmp(name, "replace"))
        return jinja_replace(c, s, jinja_need_str(c, jinja_arg(a, 0, "old", none), "replace arg"),
                             jinja_need_str(c, jinja_arg(a, 1, "new", none), "replace arg"),
                             jinja_need_int(c, jinja_arg(a, 2, "count", jinja_int(-1)), "count"));
    if (!strcmp(name, "find") || !strcmp(name, "rfind") || !strcmp(name, "index") ||
        !strcmp(name, "rindex")) {
        int64_t r = str_find(c, s, jinja_need_str(c, jinja_arg(a, 0, NULL, none), "substring"),
                             name[0] == 'r');
        if (r < 0 && name[name[0] == 'r'] == 'i')
            jinja_failc(c, HEARTH_EINVAL, "substring not found");
        return jinja_int(r);
    }
    if (!strcmp(name, "count")) {
        struct jstr sub = jinja_need_str(c, jinja_arg(a, 0, NULL, none), "substring");
        if (!sub.len)
            return jinja_int((int64_t)jinja_utf8_count(s) + 1);
        int64_t n = 0;
        for (const char *f = find(s, sub, 0); f; f = find(s, sub, (size_t)(f - s.p) + sub.len))
            n++;
        return jinja_int(n);
    }
    if (!strcmp(name, "format"))
        return format(c, s, a);
    if (!strcmp(name, "join")) {
        struct jlist *l = jinja_iter(c, jinja_arg(a, 0, NULL, none));
        struct jbuf b   = {0};
        for (size_t i = 0; i < l->n; i++) {
            if (i)
                jinja_buf_put(c, &b, s.p, s.len);
            struct jstr x = jinja_need_str(c, l->v[i], "sequence item");
            jinja_buf_put(c, &b, x.p, x.len);
        }
        return jinja_buf_value(&b);
    }
    if (!strcmp(name, "center") || !strcmp(name, "ljust") || !strcmp(name, "rjust")) {
        struct jstr fill = jinja_need_str(c, jinja_arg(a, 1, NULL, jinja_cstr(" ")), "fillchar");
        if (jinja_utf8_count(fill) != 1)
            jinja_failc(c, HEARTH_EINVAL, "The fill character must be exactly one character long");
        return jinja_pad(c, s, jinja_need_int(c, jinja_arg(a, 0, NULL, none), "width"), fill,
                         name[0]);
    }
    if (!strcmp(name, "zfill")) {
        int64_t w   = jinja_need_int(c, jinja_arg(a, 0, NULL, none), "width");
        bool sign   = s.len && (s.p[0] == '+' || s.p[0] == '-');
        struct jv r = jinja_pad(c, (struct jstr){s.p + sign, s.len - sign}, w - sign,
                                jinja_cstr("0").u.s, 'r');
        if (!sign)
            return r;
        struct jbuf b = {0};
        jinja_buf_put(c, &b, s.p, 1);
        jinja_buf_put(c, &b, r.u.s.p, r.u.s.len);
        return jinja_buf_value(&b);
    }
    if (!strcmp(name, "partition") || !strcmp(name, "rpartition")) {
        struct jstr sep = jinja_need_str(c, jinja_arg(a, 0, NULL, none), "sep");
        if (!sep.len)
            jinja_failc(c, HEARTH_EINVAL, "empty separator");
        const char *hit = NULL;
        if (name[0] == 'p')
            hit = find(s, sep, 0);
        else
            for (size_t k = s.len + 1; k-- > 0;)
                if (k + sep.len <= s.len && !memcmp(s.p + k, sep.p, sep.len)) {
                    hit = s.p + k;
                    break;
                }
        struct jv t = jinja_list_new(c, 3);
        t.kind      = JV_TUPLE;
        if (!hit) {
            struct jv empty = jinja_strn("", 0), whole = jinja_strn(s.p, s.len);
            jinja_list_push(c, t.u.l, name[0] == 'p' ? whole : empty);
            jinja_list_push(c, t.u.l, empty);
            jinja_list_push(c, t.u.l, name[0] == 'p' ? empty : whole);
            return t;
        }
        jinja_list_push(c, t.u.l, jinja_strn(s.p, (size_t)(hit - s.p)));
        jinja_list_push(c, t.u.l, jinja_strn(sep.p, sep.len));
        jinja_list_push(c, t.u.l, jinja_strn(hit + sep.len, s.len - (size_t)(hit - s.p) - sep.len));
        return t;
    }
    if (!strcmp(name, "removeprefix") || !strcmp(name, "removesuffix")) {
        struct jstr x = jinja_need_str(c, jinja_arg(a, 0, NULL, none), "argument");
        bool pre      = name[6] == 'p';
        if (x.len <= s.len && !memcmp(pre ? s.p : s.p + s.len - x.len, x.p, x.len))
            return jinja_strn(pre ? s.p + x.len : s.p, s.len - x.len);
        return jinja_strn(s.p, s.len);
    }
    if (!strcmp(name, "isdigit") || !strcmp(name, "isnumeric") || !strcmp(name, "isdecimal"))
        return jinja_bool(all_chars(s, 'd'));
    if (!strcmp(name, "isalpha"))
        return jinja_bool(all_chars(s, 'a'));
    if (!strcmp(name, "isalnum"))
        return jinja_bool(all_chars(s, 'n'));
    if (!strcmp(name, "isspace"))
        return jinja_bool(all_chars(s, 's'));
    if (!strcmp(name, "isupper"))
        return jinja_bool(all_chars(s, 'u'));
    return jinja_bool(all_chars(s, 'l'));
}

struct jv jinja_pair(struct jctx *c, struct jv a, struct jv b)
{
    struct jv t = jinja_list_new(c, 2);
    jinja_list_push(c, t.u.l, a);
    jinja_list_push(c, t.u.l, b);
    t.kind = JV_TUPLE;
    return t;
}

struct jv jinja_method_call(struct jctx *c, struct jv self, const char *name, struct jargs *a)
{
    if (self.kind == JV_STR)
        return str_method(c, self.u.s, name, a);
    if (self.kind == JV_LOOP && !strcmp(name, "changed")) { /* loop.changed(*values) */
        struct jv now = jinja_list_new(c, (size_t)a->n_pos);
        for (int i = 0; i < a->n_pos; i++)
            jinja_list_push(c, now.u.l, a->pos[i]);
        bool changed            = !jinja_eq(self.u.lp->last_changed, now);
        self.u.lp->last_changed = now;
        return jinja_bool(changed);
    }
    if (self.kind == JV_LOOP) { /* loop.cycle(a, b, ...) */
        if (!a->n_pos)
            jinja_failc(c, HEARTH_EINVAL, "no items for cycling given");
        return a->pos[self.u.lp->i % (size_t)a->n_pos];
    }
    if (self.kind == JV_DICT) {
        const struct jdict *d = self.u.d;
        if (!strcmp(name, "get")) {
            struct jv *v = jinja_dict_get(d, jinja_arg(a, 0, NULL, jinja_none()));
            return v ? *v : jinja_arg(a, 1, NULL, jinja_none());
        }
        struct jv out = jinja_list_new(c, d->n);
        for (size_t i = 0; i < d->n; i++)
            jinja_list_push(c, out.u.l,
                            name[0] == 'i'   ? jinja_pair(c, d->k[i], d->v[i])
                            : name[0] == 'k' ? d->k[i]
                                             : d->v[i]);
        if (!strcmp(name, "copy")) {
            struct jv n = jinja_dict_new(c);
            for (size_t i = 0; i < d->n; i++)
                jinja_dict_set(c, n.u.d, d->k[i], d->v[i]);
            return n;
        }
        return out;
    }
    if (jinja_is_seq(self)) {
        struct jlist *l = self.u.l;
        if (!strcmp(name, "copy")) {
            struct jv n = jinja_list_new(c, l->n);
            for (size_t i = 0; i < l->n; i++)
                jinja_list_push(c, n.u.l, l->v[i]);
            return n;
        }
        struct jv x = jinja_arg(a, 0, NULL, jinja_undef(NULL));
        int64_t n   = 0;
        for (size_t i = 0; i < l->n; i++)
            if (jinja_eq(l->v[i], x)) {
                if (name[0] == 'i')
                    return jinja_int((int64_t)i);
                n++;
            }
        if (name[0] == 'i')
            jinja_failc(c, HEARTH_EINVAL, "value is not in list");
        return jinja_int(n);
    }
    jinja_failc(c, HEARTH_EINVAL, "'%s' object has no method '%s'", jinja_type_name(self), name);
}
