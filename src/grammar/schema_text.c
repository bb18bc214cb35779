/*
 * schema_text.c: the text side of the schema converter: GBNF literals and
 * classes, exact digit-range grammars for bounded integers, and an
 * ECMA-262 regex subset turned into GBNF over JSON string contents.
 *
 * A regex speaks of a decoded string, the grammar of its JSON text, so each
 * character the regex allows becomes the JSON spellings of that character:
 * itself when it needs no escape, otherwise the escape a JSON encoder writes
 * (\" \\ \b \f \n \r \t, \u00XX for the other controls). Other spellings of
 * the same character (\u0041 for A) are not offered: the grammar accepts
 * fewer texts than the schema, never more.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/schema_int.h"
#include "util/errfmt.h"

/* ------------------------------------------------------------ literals --- */

void schema_lit(struct strbuf *b, const char *s, size_t n)
{
    strbuf_addn(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"':
            strbuf_addn(b, "\\\"", 2);
            break;
        case '\\':
            strbuf_addn(b, "\\\\", 2);
            break;
        case '\n':
            strbuf_addn(b, "\\n", 2);
            break;
        case '\r':
            strbuf_addn(b, "\\r", 2);
            break;
        case '\t':
            strbuf_addn(b, "\\t", 2);
            break;
        default:
            if (c < 0x20 || c == 0x7F)
                strbuf_printf(b, "\\x%02X", c);
            else
                strbuf_addn(b, (const char *)&s[i], 1);
        }
    }
    strbuf_addn(b, "\"", 1);
}

/* --------------------------------------------------------------- UTF-8 --- */

size_t schema_utf8_next(const char *s, size_t n, uint32_t *cp)
{
    if (n == 0)
        return 0;
    unsigned char c = (unsigned char)s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t len   = c >= 0xC2 && c < 0xE0   ? 2
                   : c >= 0xE0 && c < 0xF0 ? 3
                   : c >= 0xF0 && c < 0xF5 ? 4
                                           : 0;
    uint32_t min = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
    if (len == 0 || len > n)
        return 0;
    uint32_t v = c & (0x7Fu >> len);
    for (size_t i = 1; i < len; i++) {
        unsigned char t = (unsigned char)s[i];
        if ((t & 0xC0) != 0x80)
            return 0;
        v = v << 6 | (t & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return 0;
    *cp = v;
    return len;
}

bool schema_utf8_valid(const char *s, size_t n)
{
    uint32_t cp;
    for (size_t i = 0; i < n;) {
        size_t k = schema_utf8_next(s + i, n - i, &cp);
        if (!k)
            return false;
        i += k;
    }
    return true;
}

/* ------------------------------------------------------ integer ranges --- */

/*
 * Digit strings of one length k, leading zeros allowed: ge() those >= s,
 * le() those <= s, between() those in [a, b]. Each appends one alternation
 * (no outer parentheses) of O(k) alternatives, so a range costs O(k^2).
 */
static void any_digits(struct strbuf *b, size_t k)
{
    if (k == 1)
        strbuf_add(b, " [0-9]");
    else if (k > 1)
        strbuf_printf(b, " [0-9]{%zu}", k);
}

static void ge(struct strbuf *b, const char *s, size_t k)
{
    if (k == 0)
        return;
    if (strspn(s, "0") >= k) {
        any_digits(b, k);
        return;
    }
    strbuf_printf(b, " (\"%c\"", s[0]);
    ge(b, s + 1, k - 1);
    if (s[0] < '9') {
        strbuf_printf(b, " | [%c-9]", s[0] + 1);
        any_digits(b, k - 1);
    }
    strbuf_add(b, ")");
}

static void le(struct strbuf *b, const char *s, size_t k)
{
    if (k == 0)
        return;
    if (strspn(s, "9") >= k) {
        any_digits(b, k);
        return;
    }
    strbuf_printf(b, " (\"%c\"", s[0]);
    le(b, s + 1, k - 1);
    if (s[0] > '0') {
        strbuf_printf(b, " | [0-%c]", s[0] - 1);
        any_digits(b, k - 1);
    }
    strbuf_add(b, ")");
}

static void between(struct strbuf *b, const char *lo, const char *hi, size_t k)
{
    size_t p = 0;
    while (p < k && lo[p] == hi[p])
        p++;
    if (p > 0) {
        strbuf_add(b, " ");
        schema_lit(b, lo, p);
    }
    if (p == k)
        return;
    const char *a = lo + p, *z = hi + p;
    size_t rest = k - p - 1;
    strbuf_printf(b, " (\"%c\"", a[0]);
    ge(b, a + 1, rest);
    if (z[0] - a[0] >= 2) {
        strbuf_printf(b, " | [%c-%c]", a[0] + 1, z[0] - 1);
        any_digits(b, rest);
    }
    strbuf_printf(b, " | \"%c\"", z[0]);
    le(b, z + 1, rest);
    strbuf_add(b, ")");
}

/* Non-negative integers in [lo, hi] (hi < 0: unbounded), as alternatives each led by " | ". */
static void nonneg(struct strbuf *b, int64_t lo, int64_t hi)
{
    if (lo == 0) {
        strbuf_add(b, " | \"0\"");
        if (hi == 0)
            return;
        lo = 1;
    }
    char l[24], h[24], a[24], z[24];
    size_t nl = (size_t)snprintf(l, sizeof l, "%lld", (long long)lo);
    size_t nh = hi >= 0 ? (size_t)snprintf(h, sizeof h, "%lld", (long long)hi) : nl;
    for (size_t k = nl; k <= nh; k++) {
        if (k == nl)
            memcpy(a, l, k + 1);
        else {
            memset(a, '0', k);
            a[0] = '1';
        }
        if (hi >= 0 && k == nh)
            memcpy(z, h, k + 1);
        else
            memset(z, '9', k);
        a[k] = z[k] = '\0';
        strbuf_add(b, " |");
        between(b, a, z, k);
    }
    if (hi < 0)
        strbuf_printf(b, " | [1-9] [0-9]{%zu,}", nl);
}

void schema_int_range(struct strbuf *b, bool has_lo, int64_t lo, bool has_hi, int64_t hi)
{
    struct strbuf alts = {0};
    if (!has_lo || lo < 0) {
        /* -x for x in [max(1, -hi), -lo] */
        int64_t xlo       = has_hi && hi < 0 ? -hi : 1;
        int64_t xhi       = has_lo ? -lo : -1;
        struct strbuf neg = {0};
        nonneg(&neg, xlo, xhi);
        strbuf_add(&alts, " | \"-\" (");
        strbuf_addn(&alts, neg.s + 3, neg.len - 3); /* drop the first " | " */
        strbuf_add(&alts, " )");
        if (neg.oom)
            alts.oom = true;
        strbuf_free(&neg);
    }
    if (!has_hi || hi >= 0)
        nonneg(&alts, has_lo && lo > 0 ? lo : 0, has_hi ? hi : -1);
    if (alts.oom || alts.len < 3) {
        b->oom = true;
    } else {
        strbuf_add(b, "(");
        strbuf_addn(b, alts.s + 3, alts.len - 3);
        strbuf_add(b, " )");
    }
    strbuf_free(&alts);
}

/* ---------------------------------------------------- code point sets --- */

struct range {
    uint32_t lo, hi; /* inclusive, lo <= hi <= 0x10FFFF */
};

/* A set of code points: sorted, disjoint, non-adjacent ranges once normalised. */
struct cset {
    struct range *r;
    size_t n, cap;
    bool oom;
};

static void cs_add(struct cset *s, uint32_t lo, uint32_t hi)
{
    if (s->n == s->cap) {
        size_t cap       = s->cap ? s->cap * 2 : 8;
        struct range *nr = realloc(s->r, cap * sizeof *nr);
        if (!nr) {
            s->oom = true;
            return;
        }
        s->r   = nr;
        s->cap = cap;
    }
    s->r[s->n++] = (struct range){lo, hi};
}

static int range_cmp(const void *a, const void *b)
{
    const struct range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static void cs_norm(struct cset *s)
{
    if (s->n == 0)
        return;
    qsort(s->r, s->n, sizeof *s->r, range_cmp);
    size_t k = 0;
    for (size_t i = 1; i < s->n; i++) {
        if (s->r[i].lo <= s->r[k].hi + 1) {
            if (s->r[i].hi > s->r[k].hi)
                s->r[k].hi = s->r[i].hi;
        } else {
            s->r[++k] = s->r[i];
        }
    }
    s->n = k + 1;
}

/* The complement over the scalar values (surrogates are never characters). */
static void cs_negate(struct cset *s)
{
    cs_add(s, 0xD800, 0xDFFF);
    cs_norm(s);
    struct cset t = {0};
    uint32_t next = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (s->r[i].lo > next)
            cs_add(&t, next, s->r[i].lo - 1);
        next = s->r[i].hi + 1;
    }
    if (next <= 0x10FFFF)
        cs_add(&t, next, 0x10FFFF);
    t.oom |= s->oom;
    free(s->r);
    *s = t;
}

static bool cs_has(const struct cset *s, uint32_t c)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->r[i].lo <= c && c <= s->r[i].hi)
            return true;
    return false;
}

void schema_class_char(struct strbuf *b, uint32_t c)
{
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        strbuf_printf(b, "%c", (char)c);
    else if (c < 0x80)
        strbuf_printf(b, "\\x%02X", c);
    else if (c < 0x10000)
        strbuf_printf(b, "\\u%04X", c);
    else
        strbuf_printf(b, "\\U%08X", c);
}

/* The JSON spelling a JSON encoder gives control character c. */
static void control_escape(struct strbuf *b, uint32_t c)
{
    static const char named[] = {
        ['\b'] = 'b', ['\f'] = 'f', ['\n'] = 'n', ['\r'] = 'r', ['\t'] = 't'};
    char t[8];
    if (c < sizeof named && named[c])
        snprintf(t, sizeof t, "\\%c", named[c]);
    else
        snprintf(t, sizeof t, "\\u%04x", c);
    schema_lit(b, t, strlen(t));
}

/*
 * Appends one parenthesised GBNF item matching the JSON spellings of the
 * characters of s (normalised): a class for those written as themselves,
 * escapes for the quote, the backslash and the controls.
 */
static void emit_set(struct strbuf *b, const struct cset *s)
{
    struct strbuf cls = {0};
    size_t n_alt      = 0;
    for (size_t i = 0; i < s->n; i++) {
        uint32_t lo = s->r[i].lo, hi = s->r[i].hi;
        /* the plain part: everything but controls, '"' and '\' */
        uint32_t cuts[][2] = {{0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0x10FFFF}};
        for (size_t k = 0; k < 3; k++) {
            uint32_t a = lo > cuts[k][0] ? lo : cuts[k][0];
            uint32_t z = hi < cuts[k][1] ? hi : cuts[k][1];
            if (a > z)
                continue;
            schema_class_char(&cls, a);
            if (z > a) {
                strbuf_add(&cls, "-");
                schema_class_char(&cls, z);
            }
        }
    }
    strbuf_add(b, "(");
    if (cls.len) {
        strbuf_add(b, " [");
        strbuf_addn(b, cls.s, cls.len);
        strbuf_add(b, "]");
        n_alt++;
    }
    if (cls.oom)
        b->oom = true;
    strbuf_free(&cls);
    if (cs_has(s, '"')) {
        strbuf_add(b, n_alt++ ? " | " : " ");
        schema_lit(b, "\\\"", 2);
    }
    if (cs_has(s, '\\')) {
        strbuf_add(b, n_alt++ ? " | " : " ");
        schema_lit(b, "\\\\", 2);
    }
    for (uint32_t c = 0; c < 0x20; c++) {
        if (cs_has(s, c)) {
            strbuf_add(b, n_alt++ ? " | " : " ");
            control_escape(b, c);
        }
    }
    strbuf_add(b, " )");
}

/* ---------------------------------------------------------------- regex --- */

struct rx {
    const char *s; /* the pattern, valid UTF-8 */
    size_t n, i;   /* its length, the read position */
    int depth;     /* group nesting */
    char *err;
    size_t err_len;
    bool failed;
};

#define RX_MAX_DEPTH 32

static bool rx_fail(struct rx *r, const char *what)
{
    if (!r->failed)
        set_err(r->err, r->err_len, "%s, at offset %zu", what, r->i);
    r->failed = true;
    return false;
}

static uint32_t rx_peek(const struct rx *r)
{
    uint32_t c = 0;
    if (r->i < r->n)
        schema_utf8_next(r->s + r->i, r->n - r->i, &c);
    return c;
}

static uint32_t rx_take(struct rx *r)
{
    uint32_t c = 0;
    size_t k   = r->i < r->n ? schema_utf8_next(r->s + r->i, r->n - r->i, &c) : 0;
    r->i += k ? k : 1;
    return c;
}

static bool rx_hex(struct rx *r, size_t k, uint32_t *v)
{
    *v = 0;
    for (size_t j = 0; j < k; j++) {
        if (r->i >= r->n)
            return rx_fail(r, "a hex escape is cut short");
        char c = r->s[r->i++];
        int d  = c >= '0' && c <= '9'   ? c - '0'
                 : c >= 'a' && c <= 'f' ? c - 'a' + 10
                 : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                        : -1;
        if (d < 0)
            return rx_fail(r, "a hex escape has a non-hex digit");
        *v = *v << 4 | (uint32_t)d;
    }
    return true;
}

/* ECMA-262's classes; \s as ECMA-262 lists it (Unicode spaces and the line terminators). */
static void add_digit(struct cset *s)
{
    cs_add(s, '0', '9');
}
static void add_word(struct cset *s)
{
    cs_add(s, '0', '9');
    cs_add(s, 'A', 'Z');
    cs_add(s, 'a', 'z');
    cs_add(s, '_', '_');
}
static void add_space(struct cset *s)
{
    static const uint32_t r[][2] = {
        {0x09, 0x0D},     {0x20, 0x20},     {0xA0, 0xA0},     {0x1680, 0x1680}, {0x2000, 0x200A},
        {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++)
        cs_add(s, r[i][0], r[i][1]);
}

/*
 * Reads the escape after a backslash into *out (a set when the escape is a
 * class such as \d, else one character in *c with *is_char). in_class:
 * inside [...], where \b is a backspace rather than a word boundary.
 */
static bool rx_escape(struct rx *r, bool in_class, struct cset *out, uint32_t *c, bool *is_char)
{
    if (r->i >= r->n)
        return rx_fail(r, "the pattern ends with a backslash");
    uint32_t e = rx_take(r);
    *is_char   = false;
    switch (e) {
    case 'd':
        add_digit(out);
        return true;
    case 'w':
        add_word(out);
        return true;
    case 's':
        add_space(out);
        return true;
    case 'D':
    case 'W':
    case 'S': {
        struct cset t = {0};
        if (e == 'D')
            add_digit(&t);
        else if (e == 'W')
            add_word(&t);
        else
            add_space(&t);
        cs_negate(&t);
        for (size_t i = 0; i < t.n; i++)
            cs_add(out, t.r[i].lo, t.r[i].hi);
        out->oom |= t.oom;
        free(t.r);
        return true;
    }
    case 'n':
        *c = '\n';
        break;
    case 'r':
        *c = '\r';
        break;
    case 't':
        *c = '\t';
        break;
    case 'f':
        *c = '\f';
        break;
    case 'v':
        *c = '\v';
        break;
    case '0':
        if (r->i < r->n && r->s[r->i] >= '0' && r->s[r->i] <= '9')
            return rx_fail(r, "octal escapes are not supported");
        *c = 0;
        break;
    case 'b':
        if (!in_class)
            return rx_fail(r, "the word boundary \\b is not supported");
        *c = '\b';
        break;
    case 'x':
        if (!rx_hex(r, 2, c))
            return false;
        break;
    case 'u': {
        if (!rx_hex(r, 4, c))
            return false;
        if (*c >= 0xD800 && *c <= 0xDBFF) {
            uint32_t lo;
            if (r->i + 6 > r->n || r->s[r->i] != '\\' || r->s[r->i + 1] != 'u')
                return rx_fail(r, "a lone surrogate escape");
            r->i += 2;
            if (!rx_hex(r, 4, &lo))
                return false;
            if (lo < 0xDC00 || lo > 0xDFFF)
                return rx_fail(r, "a lone surrogate escape");
            *c = 0x10000 + ((*c - 0xD800) << 10) + (lo - 0xDC00);
        } else if (*c >= 0xDC00 && *c <= 0xDFFF) {
            return rx_fail(r, "a lone surrogate escape");
        }
        break;
    }
    default:
        if ((e >= '0' && e <= '9') || (e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) {
            char what[64];
            snprintf(what, sizeof what, "the escape \\%c is not supported", (char)e);
            return rx_fail(r, what);
        }
        *c = e; /* an escaped punctuation character stands for itself */
    }
    *is_char = true;
    return true;
}

/* Reads [...] (the '[' already taken) into *s. */
static bool rx_class(struct rx *r, struct cset *s)
{
    bool neg = false;
    if (r->i < r->n && r->s[r->i] == '^') {
        neg = true;
        r->i++;
    }
    bool first = true;
    for (;;) {
        if (r->i >= r->n)
            return rx_fail(r, "a character class is not closed");
        if (r->s[r->i] == ']' && !first) {
            r->i++;
            break;
        }
        if (r->s[r->i] == '[')
            return rx_fail(r, "a '[' inside a class must be escaped");
        first = false;
        uint32_t lo;
        bool is_char = true;
        if (r->s[r->i] == '\\') {
            r->i++;
            if (!rx_escape(r, true, s, &lo, &is_char))
                return false;
            if (!is_char)
                continue;
        } else {
            lo = rx_take(r);
        }
        if (r->i + 1 < r->n && r->s[r->i] == '-' && r->s[r->i + 1] != ']') {
            r->i++;
            uint32_t hi;
            bool hi_char = true;
            if (r->s[r->i] == '\\') {
                r->i++;
                struct cset t = {0};
                bool ok       = rx_escape(r, true, &t, &hi, &hi_char);
                free(t.r);
                if (!ok)
                    return false;
                if (!hi_char)
                    return rx_fail(r, "a class range ends in a class escape");
            } else {
                hi = rx_take(r);
            }
            if (hi < lo)
                return rx_fail(r, "a class range is out of order");
            cs_add(s, lo, hi);
        } else {
            cs_add(s, lo, lo);
        }
    }
    if (neg)
        cs_negate(s);
    return true;
}

static bool rx_alt(struct rx *r, struct strbuf *out);

static bool rx_count(struct rx *r, unsigned long *v)
{
    if (r->i >= r->n || r->s[r->i] < '0' || r->s[r->i] > '9')
        return false;
    *v = 0;
    while (r->i < r->n && r->s[r->i] >= '0' && r->s[r->i] <= '9') {
        *v = *v * 10 + (unsigned long)(r->s[r->i++] - '0');
        if (*v > SCHEMA_MAX_REPEAT)
            return rx_fail(r, "a repetition count is over 4096");
    }
    return true;
}

/* Reads a quantifier if one follows, appending its GBNF form. */
static bool rx_quant(struct rx *r, struct strbuf *out)
{
    if (r->i >= r->n)
        return true;
    char q = r->s[r->i];
    if (q == '*' || q == '+' || q == '?') {
        r->i++;
        strbuf_addn(out, &q, 1);
    } else if (q == '{') {
        r->i++;
        unsigned long m, x = 0;
        bool open = false;
        if (!rx_count(r, &m))
            return rx_fail(r, r->failed ? "" : "a literal '{' must be escaped");
        if (r->i < r->n && r->s[r->i] == ',') {
            r->i++;
            if (r->i < r->n && r->s[r->i] == '}')
                open = true;
            else if (!rx_count(r, &x))
                return rx_fail(r, "a literal '{' must be escaped");
        } else {
            x = m;
        }
        if (r->i >= r->n || r->s[r->i] != '}')
            return rx_fail(r, "a literal '{' must be escaped");
        r->i++;
        if (!open && x < m)
            return rx_fail(r, "a repetition {m,n} has n < m");
        if (open)
            strbuf_printf(out, "{%lu,}", m);
        else if (x == m)
            strbuf_printf(out, "{%lu}", m);
        else
            strbuf_printf(out, "{%lu,%lu}", m, x);
    } else {
        return true;
    }
    if (r->i < r->n && r->s[r->i] == '?')
        r->i++; /* lazy: the same language, only the match chosen differs */
    if (r->i < r->n && strchr("*+?{", r->s[r->i]))
        return rx_fail(r, "a quantifier follows a quantifier");
    return true;
}

/* One sequence up to '|', ')' or the end. top: the pattern's own level, where anchors may be. */
static bool rx_seq(struct rx *r, struct strbuf *out, bool top, bool *anchor_lo, bool *anchor_hi)
{
    size_t items = 0;
    if (top && r->i < r->n && r->s[r->i] == '^') {
        r->i++;
        *anchor_lo = true;
    }
    while (r->i < r->n && r->s[r->i] != '|' && r->s[r->i] != ')') {
        uint32_t c = rx_peek(r);
        if (c == '$') {
            r->i++;
            if (top && (r->i == r->n || r->s[r->i] == '|')) {
                *anchor_hi = true;
                break;
            }
            r->i--;
            return rx_fail(r, "the anchor $ is supported only at the end");
        }
        if (c == '^')
            return rx_fail(r, "the anchor ^ is supported only at the start");
        if (c == '*' || c == '+' || c == '?' || c == '{')
            return rx_fail(r, "nothing to repeat");
        strbuf_add(out, " ");
        if (c == '(') {
            r->i++;
            if (r->i < r->n && r->s[r->i] == '?') {
                if (r->i + 1 < r->n && r->s[r->i + 1] == ':')
                    r->i += 2;
                else
                    return rx_fail(r, "lookarounds and named groups are not supported");
            }
            if (++r->depth > RX_MAX_DEPTH)
                return rx_fail(r, "groups nest deeper than 32");
            if (!rx_alt(r, out))
                return false;
            r->depth--;
            if (r->i >= r->n || r->s[r->i] != ')')
                return rx_fail(r, "a group is not closed");
            r->i++;
        } else {
            struct cset s = {0};
            bool ok       = true;
            if (c == '[') {
                r->i++;
                ok = rx_class(r, &s);
            } else if (c == '.') {
                r->i++;
                cs_add(&s, '\n', '\n');
                cs_add(&s, '\r', '\r');
                cs_add(&s, 0x2028, 0x2029);
                cs_negate(&s);
            } else if (c == '\\') {
                r->i++;
                uint32_t ch;
                bool is_char;
                ok = rx_escape(r, false, &s, &ch, &is_char);
                if (ok && is_char)
                    cs_add(&s, ch, ch);
            } else {
                if (c == ']' || c == '}')
                    ok = rx_fail(r, "a literal ']' or '}' must be escaped");
                else {
                    rx_take(r);
                    cs_add(&s, c, c);
                }
            }
            if (ok) {
                cs_norm(&s);
                if (s.n == 0)
                    ok = rx_fail(r, "a class matches no character");
                else
                    emit_set(out, &s);
                if (s.oom)
                    out->oom = true;
            }
            free(s.r);
            if (!ok)
                return false;
        }
        if (!rx_quant(r, out))
            return false;
        items++;
    }
    if (items == 0)
        strbuf_add(out, " \"\"");
    return true;
}

static bool rx_alt(struct rx *r, struct strbuf *out)
{
    strbuf_add(out, "(");
    for (;;) {
        bool lo = false, hi = false;
        if (!rx_seq(r, out, false, &lo, &hi))
            return false;
        if (r->i < r->n && r->s[r->i] == '|') {
            r->i++;
            strbuf_add(out, " |");
            continue;
        }
        break;
    }
    strbuf_add(out, " )");
    return true;
}

bool schema_regex(struct strbuf *out, const char *pattern, const char *any_char, char *err,
                  size_t err_len)
{
    struct rx r = {.s = pattern, .n = strlen(pattern), .err = err, .err_len = err_len};
    if (!schema_utf8_valid(pattern, r.n)) {
        set_err(err, err_len, "not valid UTF-8");
        return false;
    }
    struct strbuf body = {0};
    strbuf_add(&body, "(");
    for (;;) {
        bool lo = false, hi = false;
        struct strbuf seq = {0};
        if (!rx_seq(&r, &seq, true, &lo, &hi)) {
            strbuf_free(&seq);
            strbuf_free(&body);
            return false;
        }
        if (!lo)
            strbuf_printf(&body, " %s*", any_char);
        strbuf_addn(&body, seq.s ? seq.s : "", seq.len);
        if (seq.oom)
            body.oom = true;
        strbuf_free(&seq);
        if (!hi)
            strbuf_printf(&body, " %s*", any_char);
        if (r.i < r.n && r.s[r.i] == '|') {
            r.i++;
            strbuf_add(&body, " |");
            continue;
        }
        if (r.i < r.n) {
            rx_fail(&r, "an unmatched ')'");
            strbuf_free(&body);
            return false;
        }
        break;
    }
    strbuf_add(&body, " )");
    strbuf_addn(out, body.s, body.len);
    if (body.oom)
        out->oom = true;
    strbuf_free(&body);
    return true;
}
