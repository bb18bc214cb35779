/*
 * gbnf.c: GBNF text -> byte-level program (grammar_int.h).
 *
 * The syntax is llama.cpp's: `name ::= alternatives`, one rule per line
 * (a newline ends a rule except inside parentheses and right after `|` or
 * `::=`), strings with escapes, code-point classes, `.`, groups, `? * +`
 * and `{m,n}`, `#` comments. Everything is lowered while parsing:
 * characters become their UTF-8 bytes, a class becomes the byte sequences
 * of its ranges, a repetition becomes helper rules (right recursive, so a
 * parse stack stays flat). Helper rules with equal bodies are shared and
 * equal alternatives merged, so `(("x"|"x")|("x"|"x"))*` is one loop over
 * "x", not an exponential fan of equal stacks.
 *
 * Bounds: a repetition count above GRAMMAR_MAX_REPEAT, a program above
 * GRAMMAR_MAX_ELEMS positions or GRAMMAR_MAX_RULES rules, parentheses
 * deeper than GRAMMAR_MAX_NEST are errors, so no text makes this allocate
 * without limit.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_int.h"
#include "util/errfmt.h"
#include "util/utf8.h"

#define GE_SELF GE_MAKE(3, 0) /* a helper's reference to itself, before it has an id */

struct brule {
    char *name;
    struct ivec body; /* alternatives, each ended by GE_END */
    bool defined;
    bool helper;
    size_t ref_off;    /* first reference (for "not defined") */
    size_t def_off;    /* definition (for "defined twice") */
    int32_t n_helpers; /* helpers named after this rule so far */
};

struct parser {
    const char *s, *end;
    struct brule *rules;
    int32_t n_rules, cap_rules;
    struct gbyteset *sets;
    int32_t n_sets, cap_sets;
    int32_t single[256]; /* set id of each one-byte set, or -1 */
    int32_t *names;      /* hash of named rules: rule id or -1 */
    uint32_t names_mask;
    int32_t *helpers; /* hash of helper bodies: rule id or -1 */
    uint32_t helpers_mask;
    int32_t n_helpers;
    int64_t n_elems;
    int32_t cur_rule;
    int nest;
    char *err;
    size_t err_len;
    bool failed;
};

/* -------------------------------------------------------------- errors --- */

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static void
perr(struct parser *ps, const char *at, const char *fmt, ...)
{
    if (ps->failed)
        return;
    ps->failed = true;
    int line = 1, col = 1;
    for (const char *c = ps->s; c < at && c < ps->end; c++) {
        if (*c == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    set_err(ps->err, ps->err_len, "line %d, column %d: %s", line, col, msg);
}

static void oom(struct parser *ps)
{
    if (!ps->failed)
        set_err(ps->err, ps->err_len, "out of memory");
    ps->failed = true;
}

/* ---------------------------------------------------------- hash sets --- */

static uint32_t hash_bytes(const void *data, size_t n, uint32_t h)
{
    const uint8_t *b = data;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 16777619u;
    return h;
}

/* Grows an open-addressing table of ids to twice its size, rehashing with hash(id). */
static bool table_grow(struct parser *ps, int32_t **tab, uint32_t *mask,
                       uint32_t (*hash)(struct parser *, int32_t))
{
    uint32_t old_size = *tab ? *mask + 1 : 0;
    uint32_t size     = old_size ? old_size * 2 : 256;
    int32_t *t        = malloc(size * sizeof *t);
    if (!t)
        return false;
    memset(t, 0xff, size * sizeof *t);
    for (uint32_t i = 0; i < old_size; i++) {
        int32_t id = (*tab)[i];
        if (id < 0)
            continue;
        uint32_t j = hash(ps, id) & (size - 1);
        while (t[j] >= 0)
            j = (j + 1) & (size - 1);
        t[j] = id;
    }
    free(*tab);
    *tab  = t;
    *mask = size - 1;
    return true;
}

static uint32_t name_hash(struct parser *ps, int32_t id)
{
    const char *n = ps->rules[id].name;
    return hash_bytes(n, strlen(n), 2166136261u);
}

static uint32_t body_hash(const int32_t *v, int32_t n, int32_t self)
{
    uint32_t h = 2166136261u;
    for (int32_t i = 0; i < n; i++) {
        int32_t e = v[i] == GE_MAKE(GE_REF, self) ? GE_SELF : v[i];
        h         = hash_bytes(&e, sizeof e, h);
    }
    return h;
}

static uint32_t helper_hash(struct parser *ps, int32_t id)
{
    return body_hash(ps->rules[id].body.v, ps->rules[id].body.n, id);
}

/* ---------------------------------------------------------------- rules --- */

static int32_t add_rule(struct parser *ps, char *name, bool helper)
{
    if (!name) {
        oom(ps);
        return -1;
    }
    if (ps->n_rules >= GRAMMAR_MAX_RULES) {
        free(name);
        if (!ps->failed)
            set_err(ps->err, ps->err_len, "more than %d rules", GRAMMAR_MAX_RULES);
        ps->failed = true;
        return -1;
    }
    if (ps->n_rules == ps->cap_rules) {
        int32_t cap     = ps->cap_rules ? ps->cap_rules * 2 : 32;
        struct brule *r = realloc(ps->rules, (size_t)cap * sizeof *r);
        if (!r) {
            free(name);
            oom(ps);
            return -1;
        }
        ps->rules     = r;
        ps->cap_rules = cap;
    }
    struct brule *r = &ps->rules[ps->n_rules];
    memset(r, 0, sizeof *r);
    r->name   = name;
    r->helper = helper;
    return ps->n_rules++;
}

/* The id of named rule name[0..n), added (undefined) at its first mention at `at`. */
static int32_t named_rule(struct parser *ps, const char *name, size_t n, const char *at)
{
    if (!ps->names || (uint32_t)ps->n_rules * 2 > ps->names_mask) {
        if (!table_grow(ps, &ps->names, &ps->names_mask, name_hash)) {
            oom(ps);
            return -1;
        }
    }
    uint32_t j = hash_bytes(name, n, 2166136261u) & ps->names_mask;
    for (; ps->names[j] >= 0; j = (j + 1) & ps->names_mask) {
        const char *rn = ps->rules[ps->names[j]].name;
        if (strlen(rn) == n && memcmp(rn, name, n) == 0)
            return ps->names[j];
    }
    int32_t id = add_rule(ps, strndup(name, n), false);
    if (id < 0)
        return -1;
    ps->rules[id].ref_off = (size_t)(at - ps->s);
    ps->names[j]          = id;
    return id;
}

static bool count_elems(struct parser *ps, int64_t n, const char *at)
{
    ps->n_elems += n;
    if (ps->n_elems > GRAMMAR_MAX_ELEMS) {
        perr(ps, at, "the grammar expands to more than %d positions", GRAMMAR_MAX_ELEMS);
        return false;
    }
    return true;
}

static bool alt_equal(const int32_t *a, const int32_t *b)
{
    for (;; a++, b++) {
        if (*a != *b)
            return false;
        if (*a == GE_END)
            return true;
    }
}

/*
 * Drops alternatives equal to an earlier one, in place. Hashed, so that a
 * 100,000-way alternation costs its length, not its square.
 */
static void dedupe_alts(struct ivec *body)
{
    int32_t n_alts = 0;
    for (int32_t i = 0; i < body->n; i++)
        n_alts += body->v[i] == GE_END;
    if (n_alts < 2)
        return;
    uint32_t size = 16;
    while (size < (uint32_t)n_alts * 2)
        size *= 2;
    int32_t *tab = malloc(size * sizeof *tab); /* where a kept alternative starts, or -1 */
    if (!tab)
        return; /* out of memory: keep the duplicates, still correct */
    memset(tab, 0xff, size * sizeof *tab);
    int32_t w = 0;
    for (int32_t r = 0; r < body->n;) {
        int32_t len = 0;
        while (body->v[r + len] != GE_END)
            len++;
        uint32_t j = body_hash(body->v + r, len, -1) & (size - 1);
        bool dup   = false;
        for (; tab[j] >= 0 && !dup; j = (j + 1) & (size - 1))
            dup = alt_equal(body->v + tab[j], body->v + r);
        if (!dup) {
            /* kept alternatives lie in [0, w), below r: the move overwrites none of them */
            memmove(body->v + w, body->v + r, (size_t)(len + 1) * sizeof *body->v);
            tab[j] = w;
            w += len + 1;
        }
        r += len + 1;
    }
    body->n = w;
    free(tab);
}

/*
 * A helper rule with body (GE_SELF for a reference to itself), shared with
 * an existing helper of the same body. Takes body's storage.
 */
static int32_t helper_rule(struct parser *ps, struct ivec *body, const char *at)
{
    uint32_t h = body_hash(body->v, body->n, -1);
    if (!ps->helpers || (uint32_t)ps->n_helpers * 2 > ps->helpers_mask) {
        if (!table_grow(ps, &ps->helpers, &ps->helpers_mask, helper_hash)) {
            ivec_free(body);
            oom(ps);
            return -1;
        }
    }
    uint32_t j = h & ps->helpers_mask;
    for (; ps->helpers[j] >= 0; j = (j + 1) & ps->helpers_mask) {
        int32_t id           = ps->helpers[j];
        const struct ivec *b = &ps->rules[id].body;
        if (b->n != body->n)
            continue;
        bool eq = true;
        for (int32_t i = 0; i < b->n && eq; i++)
            eq = b->v[i] == body->v[i] || (body->v[i] == GE_SELF && b->v[i] == GE_MAKE(GE_REF, id));
        if (eq) {
            ivec_free(body);
            return id;
        }
    }
    if (!count_elems(ps, body->n, at)) {
        ivec_free(body);
        return -1;
    }
    struct brule *cur = &ps->rules[ps->cur_rule];
    char name[160];
    snprintf(name, sizeof name, "%.120s_%d", cur->name, (int)++cur->n_helpers);
    int32_t id = add_rule(ps, strdup(name), true);
    if (id < 0) {
        ivec_free(body);
        return -1;
    }
    for (int32_t i = 0; i < body->n; i++)
        if (body->v[i] == GE_SELF)
            body->v[i] = GE_MAKE(GE_REF, id);
    ps->rules[id].body    = *body;
    ps->rules[id].defined = true;
    *body                 = (struct ivec){0};
    ps->helpers[j]        = id;
    ps->n_helpers++;
    return id;
}

static int32_t intern_set(struct parser *ps, const struct gbyteset *s)
{
    for (int32_t i = 0; i < ps->n_sets; i++) /* distinct terminals are few: a scan is enough */
        if (memcmp(&ps->sets[i], s, sizeof *s) == 0)
            return i;
    if (ps->n_sets == ps->cap_sets) {
        int32_t cap        = ps->cap_sets ? ps->cap_sets * 2 : 64;
        struct gbyteset *n = realloc(ps->sets, (size_t)cap * sizeof *n);
        if (!n) {
            oom(ps);
            return -1;
        }
        ps->sets     = n;
        ps->cap_sets = cap;
    }
    ps->sets[ps->n_sets] = *s;
    return ps->n_sets++;
}

static int32_t byte_term(struct parser *ps, unsigned b)
{
    if (ps->single[b] < 0) {
        struct gbyteset s = {{0}};
        s.w[b >> 6] |= 1ull << (b & 63);
        ps->single[b] = intern_set(ps, &s);
        if (ps->single[b] < 0)
            return -1;
    }
    return GE_MAKE(GE_TERM, ps->single[b]);
}

static int32_t range_term(struct parser *ps, unsigned lo, unsigned hi)
{
    if (lo == hi)
        return byte_term(ps, lo);
    struct gbyteset s = {{0}};
    for (unsigned b = lo; b <= hi; b++)
        s.w[b >> 6] |= 1ull << (b & 63);
    int32_t id = intern_set(ps, &s);
    return id < 0 ? -1 : GE_MAKE(GE_TERM, id);
}

/* ----------------------------------------------------- character classes --- */

struct cprange {
    uint32_t lo, hi;
};

static int cmp_range(const void *a, const void *b)
{
    const struct cprange *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Sorts and merges ranges; negates them within the code points; drops the surrogates. */
static int32_t normalize_ranges(struct cprange *r, int32_t n, bool negate, struct cprange *out)
{
    if (n > 1)
        qsort(r, (size_t)n, sizeof *r, cmp_range);
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++) {
        if (m && r[i].lo <= r[m - 1].hi + 1) {
            if (r[i].hi > r[m - 1].hi)
                r[m - 1].hi = r[i].hi;
        } else {
            r[m++] = r[i];
        }
    }
    struct cprange tmp[2];
    int32_t k = 0;
    if (negate) {
        uint32_t next = 0;
        for (int32_t i = 0; i < m; i++) {
            if (r[i].lo > next)
                out[k++] = (struct cprange){next, r[i].lo - 1};
            next = r[i].hi + 1;
        }
        if (next <= 0x10FFFF)
            out[k++] = (struct cprange){next, 0x10FFFF};
    } else {
        if (m > 0)
            memcpy(out, r, (size_t)m * sizeof *r);
        k = m;
    }
    /* cut D800-DFFF out: UTF-8 has no encoding for them */
    int32_t w           = 0;
    struct cprange *res = out;
    struct cprange *src = malloc((size_t)(k > 0 ? k : 1) * sizeof *src);
    if (!src)
        return -1;
    if (k > 0)
        memcpy(src, out, (size_t)k * sizeof *src);
    for (int32_t i = 0; i < k; i++) {
        int32_t nt = 0;
        if (src[i].lo < 0xD800)
            tmp[nt++] = (struct cprange){src[i].lo, src[i].hi < 0xD800 ? src[i].hi : 0xD7FF};
        if (src[i].hi > 0xDFFF)
            tmp[nt++] = (struct cprange){src[i].lo > 0xDFFF ? src[i].lo : 0xE000, src[i].hi};
        for (int32_t t = 0; t < nt; t++)
            res[w++] = tmp[t];
    }
    free(src);
    return w;
}

struct seqs {
    struct ivec body;    /* multi-byte alternatives, each ended by GE_END */
    struct gbyteset one; /* the one-byte characters */
};

/* Appends the UTF-8 byte sequences of [lo, hi] (same encoded length) to sq. */
static void utf8_split(struct parser *ps, uint32_t lo, uint32_t hi, struct seqs *sq)
{
    if (ps->failed)
        return;
    static const uint32_t max_of_len[4] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
    for (int n = 0; n < 3; n++) { /* a range crossing an encoded length is split there */
        if (lo <= max_of_len[n] && hi > max_of_len[n]) {
            utf8_split(ps, lo, max_of_len[n], sq);
            utf8_split(ps, max_of_len[n] + 1, hi, sq);
            return;
        }
    }
    if (hi < 0x80) {
        for (uint32_t c = lo; c <= hi; c++)
            sq->one.w[c >> 6] |= 1ull << (c & 63);
        return;
    }
    /* each continuation byte must span its whole 0x80-0xBF unless all higher bytes agree */
    for (int i = 1; i < 4; i++) {
        uint32_t m = (1u << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if ((lo & m) != 0) {
                utf8_split(ps, lo, lo | m, sq);
                utf8_split(ps, (lo | m) + 1, hi, sq);
                return;
            }
            if ((hi & m) != m) {
                utf8_split(ps, lo, (hi & ~m) - 1, sq);
                utf8_split(ps, hi & ~m, hi, sq);
                return;
            }
        }
    }
    char a[4], b[4];
    size_t n = utf8_encode(lo, a);
    utf8_encode(hi, b);
    for (size_t i = 0; i < n; i++) {
        int32_t e = range_term(ps, (uint8_t)a[i], (uint8_t)b[i]);
        if (e < 0 || !ivec_push(&sq->body, e)) {
            oom(ps);
            return;
        }
    }
    if (!ivec_push(&sq->body, GE_END))
        oom(ps);
}

/* Appends to out the element matching one character of the ranges (a terminal or a helper). */
static bool class_elems(struct parser *ps, struct cprange *r, int32_t n, bool negate,
                        struct ivec *out, const char *at)
{
    struct cprange *norm = malloc((size_t)(n + 2) * 2 * sizeof *norm);
    if (!norm) {
        oom(ps);
        return false;
    }
    int32_t m = normalize_ranges(r, n, negate, norm);
    if (m < 0) {
        free(norm);
        oom(ps);
        return false;
    }
    struct seqs sq = {0};
    if (m == 0) { /* as in llama.cpp, a class of no character is a dead end, not an error */
        free(norm);
        int32_t id = intern_set(ps, &sq.one);
        if (id < 0 || !count_elems(ps, 1, at) || !ivec_push(out, GE_MAKE(GE_TERM, id))) {
            oom(ps);
            return false;
        }
        return true;
    }
    for (int32_t i = 0; i < m; i++)
        utf8_split(ps, norm[i].lo, norm[i].hi, &sq);
    free(norm);
    if (ps->failed) {
        ivec_free(&sq.body);
        return false;
    }
    bool has_one = sq.one.w[0] || sq.one.w[1];
    int32_t e;
    if (sq.body.n == 0) {
        int32_t id = intern_set(ps, &sq.one);
        e          = id < 0 ? -1 : GE_MAKE(GE_TERM, id);
    } else {
        if (has_one) {
            int32_t id = intern_set(ps, &sq.one);
            if (id < 0 || !ivec_push(&sq.body, GE_MAKE(GE_TERM, id)) ||
                !ivec_push(&sq.body, GE_END)) {
                ivec_free(&sq.body);
                oom(ps);
                return false;
            }
        }
        int32_t id = helper_rule(ps, &sq.body, at);
        e          = id < 0 ? -1 : GE_MAKE(GE_REF, id);
    }
    if (e < 0 || !count_elems(ps, 1, at) || !ivec_push(out, e)) {
        oom(ps);
        return false;
    }
    return true;
}

/* ---------------------------------------------------------------- lexing --- */

static bool is_word(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

static const char *skip_space(struct parser *ps, const char *p, bool newline_ok)
{
    while (p < ps->end) {
        char c = *p;
        if (c == ' ' || c == '\t') {
            p++;
        } else if (c == '#') {
            while (p < ps->end && *p != '\n' && *p != '\r')
                p++;
        } else if (newline_ok && (c == '\n' || c == '\r')) {
            p++;
        } else {
            break;
        }
    }
    return p;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* One character of a string or class (an escape or a UTF-8 character) at *pp; false on error. */
static bool parse_char(struct parser *ps, const char **pp, uint32_t *cp)
{
    const char *p = *pp;
    if (*p != '\\') {
        size_t n = utf8_decode(p, (size_t)(ps->end - p), cp);
        if (n == 0) {
            perr(ps, p, "invalid UTF-8");
            return false;
        }
        *pp = p + n;
        return true;
    }
    if (p + 1 >= ps->end) {
        perr(ps, p, "unterminated escape");
        return false;
    }
    int digits = 0;
    switch (p[1]) {
    case 'x':
        digits = 2;
        break;
    case 'u':
        digits = 4;
        break;
    case 'U':
        digits = 8;
        break;
    case 't':
        *cp = '\t';
        break;
    case 'r':
        *cp = '\r';
        break;
    case 'n':
        *cp = '\n';
        break;
    case '\\':
    case '"':
    case '[':
    case ']':
        *cp = (uint8_t)p[1];
        break;
    default:
        perr(ps, p, "unknown escape '\\%c'", p[1] >= 0x20 && p[1] < 0x7f ? p[1] : '?');
        return false;
    }
    p += 2;
    if (digits) {
        uint32_t v = 0;
        for (int i = 0; i < digits; i++, p++) {
            int h = p < ps->end ? hexval(*p) : -1;
            if (h < 0) {
                perr(ps, p, "expecting %d hex digits", digits);
                return false;
            }
            v = v << 4 | (uint32_t)h;
        }
        if (v > 0x10FFFF) {
            perr(ps, *pp, "code point U+%X is above U+10FFFF", v);
            return false;
        }
        *cp = v;
    }
    *pp = p;
    return true;
}

/* ---------------------------------------------------------------- syntax --- */

static const char *parse_alternates(struct parser *ps, const char *p, bool nested,
                                    struct ivec *out);

/*
 * Replaces the item out[last..n) by its repetition {lo, hi} (hi < 0: no
 * upper bound). The item becomes one element (a helper when it is a
 * sequence); the copies are references, so the cost is a few positions.
 */
static bool repeat(struct parser *ps, struct ivec *out, int32_t last, int lo, int hi,
                   const char *at)
{
    int32_t e;
    if (out->n - last == 1) {
        e = out->v[last];
    } else {
        struct ivec body = {0};
        for (int32_t i = last; i < out->n; i++)
            if (!ivec_push(&body, out->v[i])) {
                ivec_free(&body);
                oom(ps);
                return false;
            }
        if (!ivec_push(&body, GE_END)) {
            ivec_free(&body);
            oom(ps);
            return false;
        }
        int32_t id = helper_rule(ps, &body, at);
        if (id < 0)
            return false;
        e = GE_MAKE(GE_REF, id);
    }
    out->n = last;
    if (!count_elems(ps, lo + 1, at))
        return false;
    for (int i = 0; i < lo; i++)
        if (!ivec_push(out, e)) {
            oom(ps);
            return false;
        }
    int32_t tail = -1;
    if (hi < 0) { /* star ::= e star | () */
        int32_t b[]      = {e, GE_SELF, GE_END, GE_END};
        struct ivec body = {0};
        for (int i = 0; i < 4; i++)
            if (!ivec_push(&body, b[i])) {
                ivec_free(&body);
                oom(ps);
                return false;
            }
        tail = helper_rule(ps, &body, at);
        if (tail < 0)
            return false;
    } else {
        for (int k = 1; k <= hi - lo; k++) { /* opt_k ::= e opt_(k-1) | () */
            struct ivec body = {0};
            bool ok          = ivec_push(&body, e) &&
                      (tail < 0 || ivec_push(&body, GE_MAKE(GE_REF, tail))) &&
                      ivec_push(&body, GE_END) && ivec_push(&body, GE_END);
            if (!ok) {
                ivec_free(&body);
                oom(ps);
                return false;
            }
            tail = helper_rule(ps, &body, at);
            if (tail < 0)
                return false;
        }
    }
    if (tail >= 0 && !ivec_push(out, GE_MAKE(GE_REF, tail))) {
        oom(ps);
        return false;
    }
    return true;
}

static const char *parse_int(struct parser *ps, const char *p, int *v)
{
    long n            = 0;
    const char *start = p;
    while (p < ps->end && *p >= '0' && *p <= '9') {
        if (n <= GRAMMAR_MAX_REPEAT)
            n = n * 10 + (*p - '0');
        p++;
    }
    if (p == start) {
        *v = -1;
        return p;
    }
    if (n > GRAMMAR_MAX_REPEAT) {
        perr(ps, start, "repetition count %.*s is above %d", (int)(p - start > 20 ? 20 : p - start),
             start, GRAMMAR_MAX_REPEAT);
        return NULL;
    }
    *v = (int)n;
    return p;
}

/*
 * {m} {m,} {m,n} at p (on '{'); sets lo and hi (-1: no bound). As in
 * llama.cpp: the minimum is required and at most GRAMMAR_MAX_MIN_REPEAT,
 * and inside parentheses (nested) the braces may span lines.
 */
static const char *parse_braces(struct parser *ps, const char *p, bool nested, int *lo, int *hi)
{
    const char *open = p;
    p                = skip_space(ps, p + 1, nested);
    const char *at   = p;
    p                = parse_int(ps, p, lo);
    if (!p)
        return NULL;
    if (*lo < 0) {
        perr(ps, at, "expecting a repetition count");
        return NULL;
    }
    if (*lo > GRAMMAR_MAX_MIN_REPEAT) {
        perr(ps, at, "repetition minimum %d is above %d", *lo, GRAMMAR_MAX_MIN_REPEAT);
        return NULL;
    }
    p = skip_space(ps, p, nested);
    if (p < ps->end && *p == ',') {
        p = skip_space(ps, p + 1, nested);
        p = parse_int(ps, p, hi);
        if (!p)
            return NULL;
        p = skip_space(ps, p, nested);
    } else {
        *hi = *lo;
    }
    if (p >= ps->end || *p != '}') {
        perr(ps, p, "expecting '}'");
        return NULL;
    }
    if (*hi >= 0 && *lo > *hi) {
        perr(ps, open, "repetition {%d,%d} has its minimum above its maximum", *lo, *hi);
        return NULL;
    }
    return p + 1;
}

static const char *parse_string(struct parser *ps, const char *p, struct ivec *out)
{
    const char *open = p++;
    while (p < ps->end && *p != '"') {
        uint32_t cp;
        const char *at = p;
        if (!parse_char(ps, &p, &cp))
            return NULL;
        if (cp >= 0xD800 && cp <= 0xDFFF) {
            perr(ps, at, "code point U+%X is a surrogate, which UTF-8 cannot encode", cp);
            return NULL;
        }
        char u[4];
        size_t n = utf8_encode(cp, u);
        if (!count_elems(ps, (int64_t)n, at))
            return NULL;
        for (size_t i = 0; i < n; i++) {
            int32_t e = byte_term(ps, (uint8_t)u[i]);
            if (e < 0 || !ivec_push(out, e)) {
                oom(ps);
                return NULL;
            }
        }
    }
    if (p >= ps->end) {
        perr(ps, open, "unterminated string");
        return NULL;
    }
    return p + 1;
}

static const char *parse_class(struct parser *ps, const char *p, struct ivec *out)
{
    const char *open = p++;
    bool negate      = p < ps->end && *p == '^';
    if (negate)
        p++;
    struct cprange *r = NULL;
    int32_t n = 0, cap = 0;
    while (p < ps->end && *p != ']') {
        uint32_t lo, hi;
        if (!parse_char(ps, &p, &lo))
            goto fail;
        hi = lo;
        if (p + 1 < ps->end && *p == '-' && p[1] != ']') {
            p++;
            if (!parse_char(ps, &p, &hi))
                goto fail;
            if (hi < lo) /* llama.cpp reads a reversed range as matching nothing */
                continue;
        }
        if (n == cap) {
            cap               = cap ? cap * 2 : 8;
            struct cprange *g = realloc(r, (size_t)cap * sizeof *g);
            if (!g) {
                oom(ps);
                goto fail;
            }
            r = g;
        }
        r[n++] = (struct cprange){lo, hi};
    }
    if (p >= ps->end) {
        perr(ps, open, "unterminated character class");
        goto fail;
    }
    if (!class_elems(ps, r, n, negate, out, open))
        goto fail;
    free(r);
    return p + 1;
fail:
    free(r);
    return NULL;
}

static const char *parse_group(struct parser *ps, const char *p, struct ivec *out)
{
    const char *open = p;
    if (++ps->nest > GRAMMAR_MAX_NEST) {
        perr(ps, p, "parentheses nested deeper than %d", GRAMMAR_MAX_NEST);
        return NULL;
    }
    struct ivec body = {0};
    p                = skip_space(ps, p + 1, true);
    p                = parse_alternates(ps, p, true, &body);
    ps->nest--;
    if (!p) {
        ivec_free(&body);
        return NULL;
    }
    if (p >= ps->end || *p != ')') {
        ivec_free(&body);
        perr(ps, p < ps->end ? p : open, p < ps->end ? "expecting ')'" : "unclosed '('");
        return NULL;
    }
    dedupe_alts(&body);
    int32_t n_alts = 0;
    for (int32_t i = 0; i < body.n; i++)
        n_alts += body.v[i] == GE_END;
    if (n_alts == 1) { /* a plain sequence: inline it */
        for (int32_t i = 0; i + 1 < body.n; i++)
            if (!ivec_push(out, body.v[i])) {
                ivec_free(&body);
                oom(ps);
                return NULL;
            }
        ivec_free(&body);
        return p + 1;
    }
    int32_t id = helper_rule(ps, &body, open);
    if (id < 0 || !count_elems(ps, 1, open))
        return NULL;
    if (!ivec_push(out, GE_MAKE(GE_REF, id))) {
        oom(ps);
        return NULL;
    }
    return p + 1;
}

/* One alternative: items until '|', ')', the end, or (at top level) a newline. */
static const char *parse_sequence(struct parser *ps, const char *p, bool nested, struct ivec *out)
{
    int32_t last = -1; /* where the last item starts in out: what a repetition applies to */
    while (p && p < ps->end) {
        char c         = *p;
        const char *at = p;
        int32_t start  = out->n;
        if (is_word(c)) {
            const char *q = p;
            while (q < ps->end && is_word(*q))
                q++;
            int32_t id = named_rule(ps, p, (size_t)(q - p), p);
            if (id < 0 || !count_elems(ps, 1, p))
                return NULL;
            if (!ivec_push(out, GE_MAKE(GE_REF, id))) {
                oom(ps);
                return NULL;
            }
            p = q;
        } else if (c == '"') {
            p = parse_string(ps, p, out);
        } else if (c == '[') {
            p = parse_class(ps, p, out);
        } else if (c == '.') {
            struct cprange all = {0, 0x10FFFF};
            p                  = class_elems(ps, &all, 1, false, out, p) ? p + 1 : NULL;
        } else if (c == '(') {
            p = parse_group(ps, p, out);
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            if (last < 0 || last == out->n) {
                perr(ps, p, "'%c' has nothing before it to repeat", c);
                return NULL;
            }
            int lo = c == '+', hi = c == '?' ? 1 : -1;
            if (c == '{')
                p = parse_braces(ps, p, nested, &lo, &hi);
            else
                p++;
            if (!p || !repeat(ps, out, last, lo, hi, at))
                return NULL;
            start = last; /* a repetition can itself be repeated, as in llama.cpp */
        } else {
            break;
        }
        if (!p)
            return NULL;
        last = start;
        p    = skip_space(ps, p, nested);
    }
    if (!ivec_push(out, GE_END)) {
        oom(ps);
        return NULL;
    }
    return p;
}

static const char *parse_alternates(struct parser *ps, const char *p, bool nested, struct ivec *out)
{
    p = parse_sequence(ps, p, nested, out);
    while (p && p < ps->end && *p == '|') {
        p = skip_space(ps, p + 1, true);
        p = parse_sequence(ps, p, nested, out);
    }
    return p;
}

static const char *parse_rule(struct parser *ps, const char *p)
{
    const char *q = p;
    while (q < ps->end && is_word(*q))
        q++;
    if (q == p) {
        perr(ps, p, "expecting a rule name");
        return NULL;
    }
    int32_t id = named_rule(ps, p, (size_t)(q - p), p);
    if (id < 0)
        return NULL;
    if (ps->rules[id].defined) {
        perr(ps, p, "rule '%s' is defined twice", ps->rules[id].name);
        return NULL;
    }
    const char *name = p;
    p                = skip_space(ps, q, false);
    if (ps->end - p < 3 || memcmp(p, "::=", 3) != 0) {
        perr(ps, p, "expecting '::=' after rule name");
        return NULL;
    }
    p                = skip_space(ps, p + 3, true);
    ps->cur_rule     = id;
    struct ivec body = {0};
    p                = parse_alternates(ps, p, false, &body);
    if (!p) {
        ivec_free(&body);
        return NULL;
    }
    dedupe_alts(&body);
    if (!count_elems(ps, body.n, name)) {
        ivec_free(&body);
        return NULL;
    }
    ps->rules[id].body    = body;
    ps->rules[id].defined = true;
    ps->rules[id].def_off = (size_t)(name - ps->s);
    if (p < ps->end) {
        if (*p == '\r')
            p += (p + 1 < ps->end && p[1] == '\n') ? 2 : 1;
        else if (*p == '\n')
            p++;
        else if (*p == ')') {
            perr(ps, p, "unmatched ')'");
            return NULL;
        } else {
            perr(ps, p, "unexpected '%c'; expecting the end of the rule",
                 *p >= 0x20 && *p < 0x7f ? *p : '?');
            return NULL;
        }
    }
    return p;
}

/* ------------------------------------------------------------- lowering --- */

void gprog_free(struct gprog *g)
{
    free(g->elems);
    free(g->pos_rule);
    free(g->rule_alt0);
    free(g->alts);
    if (g->rule_names)
        for (int32_t r = 0; r < g->n_rules; r++)
            free(g->rule_names[r]);
    free(g->rule_names);
    free(g->sets);
    memset(g, 0, sizeof *g);
}

static enum hearth_status lower(struct parser *ps, const char *root, struct gprog *g)
{
    int64_t n_elems = 0, n_alts = 0;
    for (int32_t r = 0; r < ps->n_rules; r++) {
        n_elems += ps->rules[r].body.n;
        for (int32_t i = 0; i < ps->rules[r].body.n; i++)
            n_alts += ps->rules[r].body.v[i] == GE_END;
    }
    g->n_rules    = ps->n_rules;
    g->n_elems    = (int32_t)n_elems;
    g->elems      = malloc((size_t)(n_elems + 1) * sizeof *g->elems);
    g->pos_rule   = malloc((size_t)(n_elems + 1) * sizeof *g->pos_rule);
    g->rule_alt0  = malloc((size_t)(ps->n_rules + 1) * sizeof *g->rule_alt0);
    g->alts       = malloc((size_t)(n_alts + 1) * sizeof *g->alts);
    g->rule_names = calloc((size_t)ps->n_rules + 1, sizeof *g->rule_names);
    if (!g->elems || !g->pos_rule || !g->rule_alt0 || !g->alts || !g->rule_names)
        return fail(HEARTH_ENOMEM, ps->err, ps->err_len, "out of memory");
    int32_t at = 0, a = 0;
    for (int32_t r = 0; r < ps->n_rules; r++) {
        g->rule_names[r]     = ps->rules[r].name;
        ps->rules[r].name    = NULL;
        g->rule_alt0[r]      = a;
        const struct ivec *b = &ps->rules[r].body;
        for (int32_t i = 0; i < b->n; i++) {
            if (i == 0 || b->v[i - 1] == GE_END)
                g->alts[a++] = at;
            g->pos_rule[at] = r;
            g->elems[at++]  = b->v[i];
        }
    }
    g->rule_alt0[ps->n_rules] = a;
    g->sets                   = ps->sets;
    g->n_sets                 = ps->n_sets;
    ps->sets                  = NULL;
    g->root                   = -1;
    const char *rn            = root ? root : "root";
    for (int32_t r = 0; r < g->n_rules; r++)
        if (!ps->rules[r].helper && strcmp(g->rule_names[r], rn) == 0)
            g->root = r;
    if (g->root < 0)
        return fail(HEARTH_EINVAL, ps->err, ps->err_len, "the grammar has no rule '%.64s'", rn);
    return HEARTH_OK;
}

enum hearth_status gbnf_parse(const char *text, size_t len, const char *root, struct gprog *out,
                              char *err, size_t err_len)
{
    memset(out, 0, sizeof *out);
    struct parser ps = {.s = text, .end = text + len, .err = err, .err_len = err_len};
    memset(ps.single, 0xff, sizeof ps.single);
    enum hearth_status st = HEARTH_EINVAL;
    const char *p         = skip_space(&ps, text, true);
    while (p && p < ps.end) {
        p = parse_rule(&ps, p);
        if (p)
            p = skip_space(&ps, p, true);
    }
    if (ps.failed)
        goto done;
    for (int32_t r = 0; r < ps.n_rules; r++) {
        if (!ps.rules[r].defined) {
            perr(&ps, text + ps.rules[r].ref_off, "rule '%s' is not defined", ps.rules[r].name);
            goto done;
        }
    }
    st = lower(&ps, root, out);
done:
    if (ps.failed && st == HEARTH_OK)
        st = HEARTH_EINVAL;
    if (st != HEARTH_OK)
        gprog_free(out);
    for (int32_t r = 0; r < ps.n_rules; r++) {
        free(ps.rules[r].name);
        ivec_free(&ps.rules[r].body);
    }
    free(ps.rules);
    free(ps.sets);
    free(ps.names);
    free(ps.helpers);
    return st;
}
