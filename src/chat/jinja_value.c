/*
 * jinja_value.c: the arena, the error exit and Python's value semantics:
 * truth, equality, hashing (dicts index their keys from 16 entries on),
 * ordering, str(), repr() and json.dumps. Values are plain structs
 * (jinja_int.h); containers live in a render's arena and are never freed
 * one by one.
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja_int.h"
#include "util/hash.h"
#include "util/utf8.h"

/* ---------------------------------------------------------------- arena --- */

struct jchunk {
    struct jchunk *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
};

#define CHUNK_MIN (64 * 1024)

void *jinja_alloc(struct jmem *m, size_t n)
{
    n                = (n + 15) & ~(size_t)15;
    struct jchunk *h = m->head;
    if (!h || h->size - h->used < n) {
        size_t size = n > CHUNK_MIN / 4 ? n : CHUNK_MIN;
        if (n > m->cap || m->used + size + sizeof *h > m->cap)
            jinja_fail(m, HEARTH_ERANGE, "the render needs more than its %zu bytes of memory",
                       m->cap);
        struct jchunk *nc = malloc(sizeof *nc + size);
        if (!nc)
            jinja_fail(m, HEARTH_ENOMEM, "out of memory");
        nc->size = size;
        nc->used = 0;
        m->used += size + sizeof *nc;
        if (size == CHUNK_MIN || !h) {
            nc->next = h;
            m->head  = nc;
        } else { /* a big block goes behind the current chunk, which keeps filling */
            nc->next = h->next;
            h->next  = nc;
        }
        h = nc;
    }
    void *p = h->data + h->used;
    h->used += n;
    memset(p, 0, n);
    return p;
}

char *jinja_strndup(struct jmem *m, const char *s, size_t n)
{
    char *p = jinja_alloc(m, n + 1);
    if (n)
        memcpy(p, s, n);
    return p;
}

void jinja_mem_init(struct jmem *m, size_t cap, jmp_buf *jb, char *err, size_t err_len)
{
    m->cap     = cap;
    m->jb      = jb;
    m->err     = err;
    m->err_len = err_len;
}

void jinja_mem_free(struct jmem *m)
{
    struct jchunk *h = m->head;
    while (h) {
        struct jchunk *next = h->next;
        free(h);
        h = next;
    }
    m->head = NULL;
    m->used = 0;
}

void jinja_fail(struct jmem *m, enum hearth_status st, const char *fmt, ...)
{
    if (m->err && m->err_len) {
        va_list ap;
        va_start(ap, fmt);
        int k = snprintf(m->err, m->err_len, "jinja: ");
        if (k > 0 && (size_t)k < m->err_len)
            vsnprintf(m->err + k, m->err_len - (size_t)k, fmt, ap);
        va_end(ap);
        for (char *p = m->err; *p; p++) /* one line, whatever names or keys it quotes */
            if (*p == '\n' || *p == '\r')
                *p = ' ';
    }
    longjmp(*m->jb, st == HEARTH_OK ? HEARTH_EINVAL : (int)st);
}

/* ----------------------------------------------------------------- utf-8 --- */

size_t jinja_utf8_decode(const char *p, size_t n, uint32_t *cp)
{
    size_t k = utf8_decode(p, n, cp);
    if (k)
        return k;
    *cp = (unsigned char)p[0]; /* a stray byte counts as one code point, as latin-1 would */
    return 1;
}

size_t jinja_utf8_count(struct jstr s)
{
    size_t n = 0;
    for (size_t i = 0; i < s.len;) {
        uint32_t cp;
        i += jinja_utf8_decode(s.p + i, s.len - i, &cp);
        n++;
    }
    return n;
}

size_t jinja_utf8_offset(struct jstr s, size_t idx)
{
    size_t i = 0;
    for (size_t n = 0; n < idx && i < s.len; n++) {
        uint32_t cp;
        i += jinja_utf8_decode(s.p + i, s.len - i, &cp);
    }
    return i;
}

/* --------------------------------------------------------------- buffers --- */

void jinja_buf_put(struct jctx *c, struct jbuf *b, const char *s, size_t n)
{
    if (!n)
        return;
    if (b->len + n > c->o.max_output)
        jinja_failc(c, HEARTH_ERANGE, "the output would pass its %zu bytes", c->o.max_output);
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = jinja_alloc(&c->mem, cap);
        if (b->len)
            memcpy(p, b->p, b->len);
        b->p   = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

void jinja_buf_puts(struct jctx *c, struct jbuf *b, const char *s)
{
    jinja_buf_put(c, b, s, strlen(s));
}

void jinja_buf_printf(struct jctx *c, struct jbuf *b, const char *fmt, ...)
{
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k > 0)
        jinja_buf_put(c, b, tmp, (size_t)k < sizeof tmp ? (size_t)k : sizeof tmp - 1);
}

struct jstr jinja_buf_str(struct jbuf *b)
{
    return (struct jstr){b->p ? b->p : "", b->len};
}

/* ---------------------------------------------------------------- values --- */

struct jv jinja_none(void)
{
    return (struct jv){.kind = JV_NONE};
}

struct jv jinja_bool(bool b)
{
    return (struct jv){.kind = JV_BOOL, .u.b = b};
}

struct jv jinja_int(int64_t i)
{
    return (struct jv){.kind = JV_INT, .u.i = i};
}

struct jv jinja_float(double f)
{
    return (struct jv){.kind = JV_FLOAT, .u.f = f};
}

struct jv jinja_cstr(const char *s)
{
    return (struct jv){.kind = JV_STR, .u.s = {s, strlen(s)}};
}

struct jv jinja_strn(const char *s, size_t len)
{
    return (struct jv){.kind = JV_STR, .u.s = {s, len}};
}

struct jv jinja_undef(const char *msg)
{
    return (struct jv){.kind = JV_UNDEF, .u.s = {msg, msg ? strlen(msg) : 0}};
}

struct jv jinja_list_new(struct jctx *c, size_t cap)
{
    struct jlist *l = jinja_alloc(&c->mem, sizeof *l);
    if (cap) {
        l->v   = jinja_alloc(&c->mem, cap * sizeof *l->v);
        l->cap = cap;
    }
    return (struct jv){.kind = JV_LIST, .u.l = l};
}

struct jv jinja_dict_new(struct jctx *c)
{
    struct jdict *d = jinja_alloc(&c->mem, sizeof *d);
    return (struct jv){.kind = JV_DICT, .u.d = d};
}

void jinja_list_push(struct jctx *c, struct jlist *l, struct jv v)
{
    if (l->n == l->cap) {
        size_t cap   = l->cap ? l->cap * 2 : 8;
        struct jv *n = jinja_alloc(&c->mem, cap * sizeof *n);
        if (l->n)
            memcpy(n, l->v, l->n * sizeof *n);
        l->v   = n;
        l->cap = cap;
    }
    l->v[l->n++] = v;
}

/* Dicts below this many entries are searched linearly; from it on, through the hash index. */
#define DICT_INDEX_MIN 16

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

static uint64_t hash_bytes(const char *p, size_t n)
{
    return fnv1a64(FNV1A64_SEED, p, n);
}

/* Equal keys hash equal, as Python's: True, 1 and 1.0 are one key. */
static uint64_t hash_key(struct jv k)
{
    switch (k.kind) {
    case JV_STR:
        return hash_bytes(k.u.s.p, k.u.s.len);
    case JV_BOOL:
        return mix64((uint64_t)k.u.b);
    case JV_INT:
        return mix64((uint64_t)k.u.i);
    case JV_FLOAT:
        if (k.u.f == floor(k.u.f) && fabs(k.u.f) < 9.2e18)
            return mix64((uint64_t)(int64_t)k.u.f);
        {
            uint64_t bits;
            memcpy(&bits, &k.u.f, sizeof bits);
            return mix64(bits);
        }
    default:
        return 0x9e3779b97f4a7c15ull + (uint64_t)k.kind;
    }
}

static struct jv *indexed_find(const struct jdict *d, struct jv key, uint64_t h)
{
    for (size_t s = h & (d->n_slot - 1);; s = (s + 1) & (d->n_slot - 1)) {
        uint32_t e = d->slot[s];
        if (!e)
            return NULL;
        if (jinja_eq(d->k[e - 1], key))
            return &d->v[e - 1];
    }
}

struct jv *jinja_dict_get(const struct jdict *d, struct jv key)
{
    if (d->slot && d->n_indexed == d->n)
        return indexed_find(d, key, hash_key(key));
    for (size_t i = 0; i < d->n; i++)
        if (jinja_eq(d->k[i], key))
            return &d->v[i];
    return NULL;
}

struct jv *jinja_dict_gets(const struct jdict *d, const char *key, size_t len)
{
    if (d->slot && d->n_indexed == d->n) {
        struct jv k = jinja_strn(key, len);
        return indexed_find(d, k, hash_bytes(key, len));
    }
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].kind == JV_STR && d->k[i].u.s.len == len &&
            (len == 0 || !memcmp(d->k[i].u.s.p, key, len)))
            return &d->v[i];
    return NULL;
}

static void index_put(struct jdict *d, size_t e)
{
    size_t s = hash_key(d->k[e]) & (d->n_slot - 1);
    while (d->slot[s])
        s = (s + 1) & (d->n_slot - 1);
    d->slot[s] = (uint32_t)(e + 1);
}

/* Brings the index up to all n entries: rebuilt when stale or too full, else extended. */
static void index_update(struct jctx *c, struct jdict *d)
{
    if (d->n < DICT_INDEX_MIN || d->n >= UINT32_MAX)
        return;
    if (!d->slot || d->n_indexed > d->n || d->n_slot < 2 * d->n + 2) {
        size_t n_slot = 64;
        while (n_slot < 4 * d->n)
            n_slot *= 2;
        d->slot      = jinja_alloc(&c->mem, n_slot * sizeof *d->slot);
        d->n_slot    = n_slot;
        d->n_indexed = 0;
    }
    for (; d->n_indexed < d->n; d->n_indexed++)
        index_put(d, d->n_indexed);
}

void jinja_dict_set(struct jctx *c, struct jdict *d, struct jv key, struct jv val)
{
    if (d->slot && d->n_indexed != d->n)
        index_update(c, d); /* a reset scope: rebuild before trusting the index */
    struct jv *have = jinja_dict_get(d, key);
    if (have) {
        *have = val;
        return;
    }
    if (d->n == d->cap) {
        size_t cap    = d->cap ? d->cap * 2 : 8;
        struct jv *nk = jinja_alloc(&c->mem, cap * sizeof *nk);
        struct jv *nv = jinja_alloc(&c->mem, cap * sizeof *nv);
        if (d->n) {
            memcpy(nk, d->k, d->n * sizeof *nk);
            memcpy(nv, d->v, d->n * sizeof *nv);
        }
        d->k   = nk;
        d->v   = nv;
        d->cap = cap;
    }
    d->k[d->n]   = key;
    d->v[d->n++] = val;
    index_update(c, d);
}

bool jinja_hashable(struct jv v)
{
    return !(v.kind == JV_LIST && v.form != JV_FORM_RANGE) && v.kind != JV_DICT;
}

bool jinja_is_seq(struct jv v)
{
    return v.kind == JV_LIST || v.kind == JV_TUPLE;
}

bool jinja_truthy(struct jv v)
{
    switch (v.kind) {
    case JV_UNDEF:
    case JV_NONE:
        return false;
    case JV_BOOL:
        return v.u.b;
    case JV_INT:
        return v.u.i != 0;
    case JV_FLOAT:
        return v.u.f != 0;
    case JV_STR:
        return v.u.s.len != 0;
    case JV_LIST:
    case JV_TUPLE:
        return v.u.l->n != 0;
    case JV_DICT:
        return v.u.d->n != 0;
    default:
        return true;
    }
}

static bool eq_at(struct jv a, struct jv b, int depth);

bool jinja_eq(struct jv a, struct jv b)
{
    return eq_at(a, b, 0);
}

static bool eq_at(struct jv a, struct jv b, int depth)
{
    if (depth > 200)
        return false;
    if (jinja_is_num(a) && jinja_is_num(b)) {
        if (a.kind == JV_FLOAT || b.kind == JV_FLOAT)
            return jinja_num_f(a) == jinja_num_f(b);
        return jinja_num_i(a) == jinja_num_i(b);
    }
    if (a.kind != b.kind ||
        (a.kind == JV_LIST && (a.form == JV_FORM_RANGE) != (b.form == JV_FORM_RANGE)))
        return false;
    switch (a.kind) {
    case JV_UNDEF:
    case JV_NONE:
        return true;
    case JV_STR:
        return a.u.s.len == b.u.s.len && (!a.u.s.len || !memcmp(a.u.s.p, b.u.s.p, a.u.s.len));
    case JV_LIST:
    case JV_TUPLE:
        if (a.u.l->n != b.u.l->n)
            return false;
        for (size_t i = 0; i < a.u.l->n; i++)
            if (!eq_at(a.u.l->v[i], b.u.l->v[i], depth + 1))
                return false;
        return true;
    case JV_DICT:
        if (a.u.d->n != b.u.d->n)
            return false;
        for (size_t i = 0; i < a.u.d->n; i++) {
            struct jv *o = jinja_dict_get(b.u.d, a.u.d->k[i]);
            if (!o || !eq_at(a.u.d->v[i], *o, depth + 1))
                return false;
        }
        return true;
    case JV_FUNC:
        return a.u.i == b.u.i;
    default:
        return a.u.l == b.u.l; /* identity for the reference kinds */
    }
}

const char *jinja_type_name(struct jv v)
{
    static const char *const names[] = {
        [JV_UNDEF] = "Undefined",  [JV_NONE] = "NoneType",
        [JV_BOOL] = "bool",        [JV_INT] = "int",
        [JV_FLOAT] = "float",      [JV_STR] = "str",
        [JV_LIST] = "list",        [JV_TUPLE] = "tuple",
        [JV_DICT] = "dict",        [JV_NS] = "Namespace",
        [JV_LOOP] = "LoopContext", [JV_MACRO] = "Macro",
        [JV_FUNC] = "function",    [JV_METHOD] = "builtin_function_or_method",
        [JV_GEN] = "generator",
    };
    if (v.kind == JV_LIST && v.form == JV_FORM_RANGE)
        return "range";
    return names[v.kind];
}

static int cmp_at(struct jctx *c, struct jv a, struct jv b, int depth);

int jinja_cmp(struct jctx *c, struct jv a, struct jv b)
{
    return cmp_at(c, a, b, 0);
}

static int cmp_at(struct jctx *c, struct jv a, struct jv b, int depth)
{
    if (depth > 200)
        jinja_failc(c, HEARTH_ERANGE, "values nest too deep to compare");
    if (a.kind == JV_UNDEF)
        jinja_undef_fail(c, a);
    if (b.kind == JV_UNDEF)
        jinja_undef_fail(c, b);
    if (jinja_is_num(a) && jinja_is_num(b)) {
        if (a.kind == JV_FLOAT || b.kind == JV_FLOAT) {
            double x = jinja_num_f(a), y = jinja_num_f(b);
            return x < y ? -1 : x > y ? 1 : 0;
        }
        int64_t x = jinja_num_i(a), y = jinja_num_i(b);
        return x < y ? -1 : x > y ? 1 : 0;
    }
    if (a.kind == JV_STR && b.kind == JV_STR) {
        size_t n = a.u.s.len < b.u.s.len ? a.u.s.len : b.u.s.len;
        int r    = n ? memcmp(a.u.s.p, b.u.s.p, n) : 0;
        if (r)
            return r;
        return a.u.s.len < b.u.s.len ? -1 : a.u.s.len > b.u.s.len;
    }
    if (a.kind == b.kind && jinja_is_seq(a) && a.form != JV_FORM_RANGE && b.form != JV_FORM_RANGE) {
        for (size_t i = 0; i < a.u.l->n && i < b.u.l->n; i++)
            if (!jinja_eq(a.u.l->v[i], b.u.l->v[i]))
                return cmp_at(c, a.u.l->v[i], b.u.l->v[i], depth + 1);
        return a.u.l->n < b.u.l->n ? -1 : a.u.l->n > b.u.l->n;
    }
    jinja_failc(c, HEARTH_EINVAL, "'<' not supported between instances of '%s' and '%s'",
                jinja_type_name(a), jinja_type_name(b));
}

/* ------------------------------------------------------------ formatting --- */

/* Python's float repr: the shortest digits that read back to f. */
static void float_repr(char *out, size_t n, double f, bool json)
{
    if (isnan(f)) {
        snprintf(out, n, json ? "NaN" : "nan");
        return;
    }
    if (isinf(f)) {
        snprintf(out, n, json ? (f < 0 ? "-Infinity" : "Infinity") : (f < 0 ? "-inf" : "inf"));
        return;
    }
    char buf[40];
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, sizeof buf, "%.*e", p - 1, f);
        if (strtod(buf, NULL) == f)
            break;
    }
    char digits[24];
    int nd   = 0;
    char *s  = buf;
    bool neg = *s == '-';
    s += neg;
    for (; *s && *s != 'e'; s++)
        if (*s >= '0' && *s <= '9')
            digits[nd++] = *s;
    int e = atoi(s + 1);
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    digits[nd] = 0;
    char *o    = out;
    char *end  = out + n - 1;
/* clang-format off */
#define PUT(ch)                                                                                    \
    do {                                                                                           \
        if (o < end)                                                                               \
            *o++ = (ch);                                                                           \
    } while (0)
    /* clang-format on */
    if (neg)
        PUT('-');
    if (e < -4 || e >= 16) {
        PUT(digits[0]);
        if (nd > 1) {
            PUT('.');
            for (int i = 1; i < nd; i++)
                PUT(digits[i]);
        }
        char ex[16];
        snprintf(ex, sizeof ex, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
        for (char *x = ex; *x; x++)
            PUT(*x);
    } else if (e >= 0) {
        for (int i = 0; i <= e || i < nd; i++) {
            if (i == e + 1)
                PUT('.');
            PUT(i < nd ? digits[i] : '0');
        }
        if (nd <= e + 1) {
            PUT('.');
            PUT('0');
        }
    } else {
        PUT('0');
        PUT('.');
        for (int i = 0; i < -e - 1; i++)
            PUT('0');
        for (int i = 0; i < nd; i++)
            PUT(digits[i]);
    }
#undef PUT
    *o = 0;
}

/* Python's str.isprintable for one code point, for the ranges chat text meets. */
static bool printable(uint32_t cp)
{
    if (cp < 0x20 || cp == 0x7f)
        return false;
    if (cp < 0x7f)
        return true;
    if (cp <= 0xa0 || cp == 0xad)
        return false;
    if (cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202f) ||
        (cp >= 0x205f && cp <= 0x206f) || cp == 0x3000 || cp == 0xfeff ||
        (cp >= 0xd800 && cp <= 0xf8ff) || (cp >= 0xfff9 && cp <= 0xfffb) || cp == 0x180e ||
        cp == 0x61c || (cp >= 0x600 && cp <= 0x605) || cp == 0x6dd || cp == 0x70f ||
        (cp >= 0xe0000 && cp <= 0xe007f) || cp >= 0xf0000)
        return false;
    return true;
}

static void repr_str(struct jctx *c, struct jbuf *b, struct jstr s)
{
    bool sq = memchr(s.p, '\'', s.len) != NULL, dq = memchr(s.p, '"', s.len) != NULL;
    char q = sq && !dq ? '"' : '\'';
    jinja_buf_put(c, b, &q, 1);
    for (size_t i = 0; i < s.len;) {
        uint32_t cp;
        size_t k = jinja_utf8_decode(s.p + i, s.len - i, &cp);
        if (cp == (uint32_t)q || cp == '\\') {
            char e[2] = {'\\', (char)cp};
            jinja_buf_put(c, b, e, 2);
        } else if (cp == '\n')
            jinja_buf_puts(c, b, "\\n");
        else if (cp == '\r')
            jinja_buf_puts(c, b, "\\r");
        else if (cp == '\t')
            jinja_buf_puts(c, b, "\\t");
        else if (printable(cp))
            jinja_buf_put(c, b, s.p + i, k);
        else if (cp < 0x100)
            jinja_buf_printf(c, b, "\\x%02x", cp);
        else if (cp < 0x10000)
            jinja_buf_printf(c, b, "\\u%04x", cp);
        else
            jinja_buf_printf(c, b, "\\U%08x", cp);
        i += k;
    }
    jinja_buf_put(c, b, &q, 1);
}

static void put_value(struct jctx *c, struct jbuf *b, struct jv v, bool repr, int depth);

static void put_items(struct jctx *c, struct jbuf *b, struct jv v, int depth)
{
    if (depth > 200)
        jinja_failc(c, HEARTH_ERANGE, "a value nests too deep to print");
    if (jinja_is_seq(v)) {
        jinja_buf_puts(c, b, v.kind == JV_LIST ? "[" : "(");
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i)
                jinja_buf_puts(c, b, ", ");
            put_value(c, b, v.u.l->v[i], true, depth + 1);
        }
        jinja_buf_puts(c, b, v.kind == JV_LIST ? "]" : v.u.l->n == 1 ? ",)" : ")");
        return;
    }
    jinja_buf_puts(c, b, "{");
    for (size_t i = 0; i < v.u.d->n; i++) {
        if (i)
            jinja_buf_puts(c, b, ", ");
        put_value(c, b, v.u.d->k[i], true, depth + 1);
        jinja_buf_puts(c, b, ": ");
        put_value(c, b, v.u.d->v[i], true, depth + 1);
    }
    jinja_buf_puts(c, b, "}");
}

static void put_value(struct jctx *c, struct jbuf *b, struct jv v, bool repr, int depth)
{
    char tmp[48];
    switch (v.kind) {
    case JV_UNDEF:
        if (repr)
            jinja_buf_puts(c, b, "Undefined");
        return;
    case JV_NONE:
        jinja_buf_puts(c, b, "None");
        return;
    case JV_BOOL:
        jinja_buf_puts(c, b, v.u.b ? "True" : "False");
        return;
    case JV_INT:
        jinja_buf_printf(c, b, "%" PRId64, v.u.i);
        return;
    case JV_FLOAT:
        float_repr(tmp, sizeof tmp, v.u.f, false);
        jinja_buf_puts(c, b, tmp);
        return;
    case JV_STR:
        if (repr)
            repr_str(c, b, v.u.s);
        else
            jinja_buf_put(c, b, v.u.s.p, v.u.s.len);
        return;
    case JV_LIST:
        if (v.form == JV_FORM_RANGE) {
            const int64_t *r = v.u.l->range;
            if (r[2] == 1)
                jinja_buf_printf(c, b, "range(%" PRId64 ", %" PRId64 ")", r[0], r[1]);
            else
                jinja_buf_printf(c, b, "range(%" PRId64 ", %" PRId64 ", %" PRId64 ")", r[0], r[1],
                                 r[2]);
            return;
        }
        /* fall through */
    case JV_TUPLE:
    case JV_DICT:
        put_items(c, b, v, depth);
        return;
    case JV_NS:
        jinja_buf_puts(c, b, "<Namespace ");
        put_items(c, b, (struct jv){.kind = JV_DICT, .u.d = v.u.d}, depth);
        jinja_buf_puts(c, b, ">");
        return;
    case JV_LOOP:
        jinja_buf_printf(c, b, "<LoopContext %zu/%zu>", v.u.lp->i + 1, v.u.lp->n);
        return;
    case JV_MACRO:
        jinja_buf_puts(c, b, "<Macro '");
        jinja_buf_put(c, b, v.u.m->def->name.p, v.u.m->def->name.len);
        jinja_buf_puts(c, b, "'>");
        return;
    case JV_FUNC:
        jinja_buf_puts(c, b, "<function>");
        return;
    case JV_METHOD:
        jinja_buf_printf(c, b, "<built-in method %s>", v.u.me->name);
        return;
    case JV_GEN:
        jinja_buf_puts(c, b, "<generator object>");
        return;
    }
}

struct jstr jinja_to_str(struct jctx *c, struct jv v)
{
    if (v.kind == JV_STR)
        return v.u.s;
    if (v.kind == JV_UNDEF)
        return (struct jstr){"", 0};
    struct jbuf b = {0};
    put_value(c, &b, v, false, 0);
    return jinja_buf_str(&b);
}

struct jstr jinja_to_repr(struct jctx *c, struct jv v)
{
    struct jbuf b = {0};
    put_value(c, &b, v, true, 0);
    return jinja_buf_str(&b);
}

/* ------------------------------------------------------------------ json --- */

struct jsonfmt {
    bool ascii, sort;
    const struct jstr *indent;
    struct jstr item_sep, key_sep;
};

static void json_str(struct jctx *c, struct jbuf *b, struct jstr s, bool ascii)
{
    jinja_buf_put(c, b, "\"", 1);
    for (size_t i = 0; i < s.len;) {
        uint32_t cp;
        size_t k = jinja_utf8_decode(s.p + i, s.len - i, &cp);
        switch (cp) {
        case '"':
            jinja_buf_puts(c, b, "\\\"");
            break;
        case '\\':
            jinja_buf_puts(c, b, "\\\\");
            break;
        case '\n':
            jinja_buf_puts(c, b, "\\n");
            break;
        case '\r':
            jinja_buf_puts(c, b, "\\r");
            break;
        case '\t':
            jinja_buf_puts(c, b, "\\t");
            break;
        case '\b':
            jinja_buf_puts(c, b, "\\b");
            break;
        case '\f':
            jinja_buf_puts(c, b, "\\f");
            break;
        default:
            if (cp < 0x20 || (ascii && cp >= 0x7f && cp != 0x7f)) {
                if (cp >= 0x10000) {
                    uint32_t v = cp - 0x10000;
                    jinja_buf_printf(c, b, "\\u%04x\\u%04x", 0xd800 + (v >> 10),
                                     0xdc00 + (v & 0x3ff));
                } else
                    jinja_buf_printf(c, b, "\\u%04x", cp);
            } else
                jinja_buf_put(c, b, s.p + i, k);
        }
        i += k;
    }
    jinja_buf_put(c, b, "\"", 1);
}

static void json_nl(struct jctx *c, struct jbuf *b, const struct jsonfmt *f, int level)
{
    jinja_buf_put(c, b, "\n", 1);
    for (int i = 0; i < level; i++)
        jinja_buf_put(c, b, f->indent->p, f->indent->len);
}

static int cmp_key(struct jctx *c, const struct jv *a, const struct jv *b)
{
    return jinja_cmp(c, *a, *b);
}

static void json_val(struct jctx *c, struct jbuf *b, struct jv v, const struct jsonfmt *f,
                     int level)
{
    char tmp[48];
    if (level > 200)
        jinja_failc(c, HEARTH_ERANGE, "a value nests too deep for tojson");
    switch (v.kind) {
    case JV_NONE:
        jinja_buf_puts(c, b, "null");
        return;
    case JV_BOOL:
        jinja_buf_puts(c, b, v.u.b ? "true" : "false");
        return;
    case JV_INT:
        jinja_buf_printf(c, b, "%" PRId64, v.u.i);
        return;
    case JV_FLOAT:
        float_repr(tmp, sizeof tmp, v.u.f, true);
        jinja_buf_puts(c, b, tmp);
        return;
    case JV_STR:
        json_str(c, b, v.u.s, f->ascii);
        return;
    case JV_LIST:
    case JV_TUPLE:
        if (v.form == JV_FORM_RANGE)
            jinja_failc(c, HEARTH_EINVAL, "Object of type range is not JSON serializable");
        if (!v.u.l->n) {
            jinja_buf_puts(c, b, "[]");
            return;
        }
        jinja_buf_puts(c, b, "[");
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i)
                jinja_buf_put(c, b, f->item_sep.p, f->item_sep.len);
            if (f->indent)
                json_nl(c, b, f, level + 1);
            json_val(c, b, v.u.l->v[i], f, level + 1);
        }
        if (f->indent)
            json_nl(c, b, f, level);
        jinja_buf_puts(c, b, "]");
        return;
    case JV_DICT: {
        const struct jdict *d = v.u.d;
        if (!d->n) {
            jinja_buf_puts(c, b, "{}");
            return;
        }
        size_t *order = jinja_alloc(&c->mem, d->n * sizeof *order);
        for (size_t i = 0; i < d->n; i++)
            order[i] = i;
        if (f->sort) /* insertion sort: stable, and dicts in templates are small */
            for (size_t i = 1; i < d->n; i++)
                for (size_t j = i; j > 0 && cmp_key(c, &d->k[order[j]], &d->k[order[j - 1]]) < 0;
                     j--) {
                    size_t t     = order[j];
                    order[j]     = order[j - 1];
                    order[j - 1] = t;
                }
        jinja_buf_puts(c, b, "{");
        for (size_t n = 0; n < d->n; n++) {
            size_t i = order[n];
            if (n)
                jinja_buf_put(c, b, f->item_sep.p, f->item_sep.len);
            if (f->indent)
                json_nl(c, b, f, level + 1);
            struct jv k = d->k[i];
            if (k.kind == JV_STR)
                json_str(c, b, k.u.s, f->ascii);
            else if (k.kind == JV_INT || k.kind == JV_FLOAT || k.kind == JV_BOOL ||
                     k.kind == JV_NONE) {
                struct jbuf kb = {0};
                json_val(c, &kb, k, f, level + 1);
                json_str(c, b, jinja_buf_str(&kb), f->ascii);
            } else
                jinja_failc(c, HEARTH_EINVAL, "keys must be str, int, float, bool or None, not %s",
                            jinja_type_name(k));
            jinja_buf_put(c, b, f->key_sep.p, f->key_sep.len);
            json_val(c, b, d->v[i], f, level + 1);
        }
        if (f->indent)
            json_nl(c, b, f, level);
        jinja_buf_puts(c, b, "}");
        return;
    }
    default:
        jinja_failc(c, HEARTH_EINVAL, "Object of type %s is not JSON serializable",
                    jinja_type_name(v));
    }
}

struct jstr jinja_to_json(struct jctx *c, struct jv v, bool ensure_ascii, const struct jstr *indent,
                          struct jstr item_sep, struct jstr key_sep, bool sort_keys)
{
    struct jsonfmt f = {ensure_ascii, sort_keys, indent, item_sep, key_sep};
    struct jbuf b    = {0};
    json_val(c, &b, v, &f, 0);
    return jinja_buf_str(&b);
}
