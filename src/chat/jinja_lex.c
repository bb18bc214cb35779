/*
 * jinja_lex.c: template text -> tokens, as jinja2's lexer with trim_blocks
 * and lstrip_blocks: newlines normalised to \n and one trailing newline
 * dropped (keep_trailing_newline off), "-" and "+" whitespace control, raw
 * blocks, comments, and end tags recognised only when brackets balance.
 * The token array and decoded strings live in the template's arena.
 */
#include <stdlib.h>
#include <string.h>

#include "chat/jinja_int.h"
#include "util/utf8.h"

struct lexer {
    struct jmem *m;
    const char *s; /* normalised source */
    size_t len, pos;
    int line;
    struct jtok *t;
    size_t n, cap;
    char stack[256]; /* open brackets inside a tag */
    int depth;
};

static void emit(struct lexer *L, enum jt_kind k, struct jstr s)
{
    if (L->n == L->cap) {
        size_t cap     = L->cap ? L->cap * 2 : 256;
        struct jtok *t = jinja_alloc(L->m, cap * sizeof *t);
        if (L->n)
            memcpy(t, L->t, L->n * sizeof *t);
        L->t   = t;
        L->cap = cap;
    }
    L->t[L->n++] = (struct jtok){.kind = k, .line = L->line, .s = s};
}

static int count_nl(const char *s, size_t n)
{
    int k = 0;
    for (size_t i = 0; i < n; i++)
        k += s[i] == '\n';
    return k;
}

static bool is_ws(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f';
}

static bool starts(const struct lexer *L, size_t at, const char *lit)
{
    size_t n = strlen(lit);
    return at + n <= L->len && !memcmp(L->s + at, lit, n);
}

static size_t skip_ws(const struct lexer *L, size_t at)
{
    while (at < L->len && is_ws(L->s[at]))
        at++;
    return at;
}

/*
 * Emits text s[from, to) before a tag with the tag's whitespace control:
 * sign '-' strips all trailing whitespace; otherwise lstrip_blocks removes
 * spaces and tabs between the line start and a block or comment tag.
 */
static void emit_data(struct lexer *L, size_t from, size_t to, char sign, bool lstrip_ok,
                      bool line_starting)
{
    if (sign == '-') {
        while (to > from && is_ws(L->s[to - 1]))
            to--;
    } else if (sign != '+' && lstrip_ok) {
        size_t l = to;
        while (l > from && L->s[l - 1] != '\n')
            l--;
        if (l > from || line_starting) {
            size_t k = l;
            while (k < to && (L->s[k] == ' ' || L->s[k] == '\t'))
                k++;
            if (k == to)
                to = l;
        }
    }
    if (to > from)
        emit(L, JT_DATA, (struct jstr){L->s + from, to - from});
}

/* Matches a block end at pos (+%}, -%} and whitespace, %} and one newline); its length or 0. */
static size_t block_end(const struct lexer *L, size_t pos)
{
    if (starts(L, pos, "+%}"))
        return 3;
    if (starts(L, pos, "-%}"))
        return skip_ws(L, pos + 3) - pos;
    if (starts(L, pos, "%}"))
        return 2 + (pos + 2 < L->len && L->s[pos + 2] == '\n');
    return 0;
}

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* Python's one-character escapes: the character after the backslash, and what it stands for. */
static const char esc_from[] = "\\'\"abfnrtv";
static const char esc_to[]   = "\\'\"\a\b\f\n\r\t\v";

/* A string literal body s[from, to) with Python's unicode-escape decoding. */
static struct jstr decode_string(struct lexer *L, size_t from, size_t to)
{
    char *o  = jinja_alloc(L->m, (to - from) + 1);
    size_t n = 0;
    for (size_t i = from; i < to; i++) {
        char ch = L->s[i];
        if (ch != '\\' || i + 1 >= to) {
            o[n++] = ch;
            continue;
        }
        char e            = L->s[++i];
        const char *plain = memchr(esc_from, e, sizeof esc_from - 1);
        if (plain) {
            o[n++] = esc_to[plain - esc_from];
            continue;
        }
        switch (e) {
        case '\n':
            break;
        case 'x':
        case 'u':
        case 'U': {
            int digits  = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            uint32_t cp = 0;
            for (int k = 0; k < digits; k++) {
                int h = i + 1 + (size_t)k < to ? hexval(L->s[i + 1 + k]) : -1;
                if (h < 0)
                    jinja_fail(L->m, HEARTH_EINVAL, "line %d: truncated \\%c escape in a string",
                               L->line, e);
                cp = cp << 4 | (uint32_t)h;
            }
            if (cp > 0x10ffff)
                jinja_fail(L->m, HEARTH_EINVAL, "line %d: illegal Unicode character", L->line);
            i += (size_t)digits;
            n += utf8_encode(cp, o + n); /* never longer than the escape it replaces */
            break;
        }
        default:
            if (e >= '0' && e <= '7') {
                uint32_t cp = 0;
                int k       = 0;
                for (; k < 3 && i < to && L->s[i] >= '0' && L->s[i] <= '7'; k++, i++)
                    cp = cp * 8 + (uint32_t)(L->s[i] - '0');
                i--;
                n += utf8_encode(cp, o + n);
            } else {
                o[n++] = '\\';
                o[n++] = e;
            }
        }
    }
    o[n] = 0;
    return (struct jstr){o, n};
}

static bool name_start(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_';
}

static bool digit(char ch)
{
    return ch >= '0' && ch <= '9';
}

/* A number at pos: digits with optional _ separators, fraction and exponent. */
static size_t lex_number(struct lexer *L, size_t pos)
{
    size_t i     = pos;
    bool isfloat = false;
    char buf[64];
    size_t n = 0;
    while (i < L->len &&
           (digit(L->s[i]) || (L->s[i] == '_' && i + 1 < L->len && digit(L->s[i + 1])))) {
        if (L->s[i] != '_' && n < sizeof buf - 1)
            buf[n++] = L->s[i];
        i++;
    }
    if (i + 1 < L->len && L->s[i] == '.' && digit(L->s[i + 1])) {
        isfloat = true;
        if (n < sizeof buf - 1)
            buf[n++] = '.';
        i++;
        while (i < L->len && (digit(L->s[i]) || L->s[i] == '_')) {
            if (L->s[i] != '_' && n < sizeof buf - 1)
                buf[n++] = L->s[i];
            i++;
        }
    }
    if (i < L->len && (L->s[i] == 'e' || L->s[i] == 'E')) {
        size_t j = i + 1;
        if (j < L->len && (L->s[j] == '+' || L->s[j] == '-'))
            j++;
        if (j < L->len && digit(L->s[j])) {
            isfloat = true;
            if (n < sizeof buf - 1)
                buf[n++] = 'e';
            for (size_t k = i + 1; k < j; k++)
                if (n < sizeof buf - 1)
                    buf[n++] = L->s[k];
            i = j;
            while (i < L->len && digit(L->s[i])) {
                if (n < sizeof buf - 1)
                    buf[n++] = L->s[i];
                i++;
            }
        }
    }
    buf[n] = 0;
    if (isfloat) {
        emit(L, JT_FLOAT, (struct jstr){L->s + pos, i - pos});
        L->t[L->n - 1].f = strtod(buf, NULL);
    } else {
        char *end;
        unsigned long long v = strtoull(buf, &end, 10);
        if (n > 18 && (n > 19 || strcmp(buf, "9223372036854775807") > 0))
            jinja_fail(L->m, HEARTH_EINVAL, "line %d: integer literal too large", L->line);
        emit(L, JT_INT, (struct jstr){L->s + pos, i - pos});
        L->t[L->n - 1].i = (int64_t)v;
    }
    return i;
}

static const char *const ops2[] = {"//", "**", "==", "!=", ">=", "<=", NULL};
static const char ops1[]        = "+-/*%~[](){}><=.:|,;";

/* Tokens of one tag from pos until its end tag; returns the position after the end tag. */
static size_t lex_tag(struct lexer *L, size_t pos, bool block, bool *ended_nl)
{
    L->depth = 0;
    for (;;) {
        size_t ws = skip_ws(L, pos);
        L->line += count_nl(L->s + pos, ws - pos);
        pos = ws;
        if (pos >= L->len)
            jinja_fail(L->m, HEARTH_EINVAL, "line %d: unexpected end of template inside a tag",
                       L->line);
        if (L->depth == 0) {
            size_t e = 0;
            if (block)
                e = block_end(L, pos);
            else if (starts(L, pos, "-}}"))
                e = skip_ws(L, pos + 3) - pos;
            else if (starts(L, pos, "}}"))
                e = 2;
            if (e) {
                emit(L, block ? JT_BLOCK_END : JT_VAR_END, (struct jstr){L->s + pos, e});
                L->line += count_nl(L->s + pos, e);
                *ended_nl = L->s[pos + e - 1] == '\n';
                return pos + e;
            }
        }
        char ch = L->s[pos];
        if (name_start(ch)) {
            size_t i = pos;
            while (i < L->len && (name_start(L->s[i]) || digit(L->s[i])))
                i++;
            emit(L, JT_NAME, (struct jstr){L->s + pos, i - pos});
            pos = i;
        } else if (digit(ch)) {
            pos = lex_number(L, pos);
        } else if (ch == '\'' || ch == '"') {
            size_t i = pos + 1;
            while (i < L->len && L->s[i] != ch) {
                if (L->s[i] == '\\')
                    i++;
                i++;
            }
            if (i >= L->len)
                jinja_fail(L->m, HEARTH_EINVAL, "line %d: unterminated string", L->line);
            int line = L->line;
            emit(L, JT_STRING, decode_string(L, pos + 1, i));
            L->t[L->n - 1].line = line;
            L->line += count_nl(L->s + pos, i - pos);
            pos = i + 1;
        } else {
            size_t k = 0;
            for (int j = 0; ops2[j]; j++)
                if (starts(L, pos, ops2[j]))
                    k = 2;
            if (!k && strchr(ops1, ch) && ch)
                k = 1;
            if (!k)
                jinja_fail(L->m, HEARTH_EINVAL, "line %d: unexpected character '%c'", L->line, ch);
            if (ch == '(' || ch == '[' || ch == '{') {
                if (L->depth >= (int)sizeof L->stack)
                    jinja_fail(L->m, HEARTH_EINVAL, "line %d: brackets nest too deep", L->line);
                L->stack[L->depth++] = ch;
            } else if (ch == ')' || ch == ']' || ch == '}') {
                char want = ch == ')' ? '(' : ch == ']' ? '[' : '{';
                if (!L->depth || L->stack[L->depth - 1] != want)
                    jinja_fail(L->m, HEARTH_EINVAL, "line %d: unexpected '%c'", L->line, ch);
                L->depth--;
            }
            emit(L, JT_OP, (struct jstr){L->s + pos, k});
            pos += k;
        }
    }
}

/* Normalises line breaks as str.splitlines does, and drops one trailing newline. */
static char *normalise(struct jmem *m, const char *src, size_t len, size_t *out_len)
{
    char *o  = jinja_alloc(m, len + 1);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)src[i];
        if (ch == '\r') {
            if (i + 1 < len && src[i + 1] == '\n')
                i++;
            o[n++] = '\n';
        } else if (ch == '\v' || ch == '\f' || (ch >= 0x1c && ch <= 0x1e)) {
            o[n++] = '\n';
        } else if (ch == 0xc2 && i + 1 < len && (unsigned char)src[i + 1] == 0x85) {
            o[n++] = '\n';
            i++;
        } else if (ch == 0xe2 && i + 2 < len && (unsigned char)src[i + 1] == 0x80 &&
                   ((unsigned char)src[i + 2] == 0xa8 || (unsigned char)src[i + 2] == 0xa9)) {
            o[n++] = '\n';
            i += 2;
        } else
            o[n++] = (char)ch;
    }
    if (n && o[n - 1] == '\n')
        n--;
    o[n]     = 0;
    *out_len = n;
    return o;
}

struct jtok *jinja_lex(struct jmem *m, const char *src, size_t len, size_t *n_tok)
{
    struct lexer L     = {.m = m, .line = 1};
    L.s                = normalise(m, src, len, &L.len);
    bool line_starting = true;
    size_t pos         = 0;
    while (pos < L.len) {
        /* the next tag start */
        size_t at = pos;
        int kind  = 0; /* '{', '%', '#' */
        for (; at + 1 < L.len; at++)
            if (L.s[at] == '{' &&
                (L.s[at + 1] == '{' || L.s[at + 1] == '%' || L.s[at + 1] == '#')) {
                kind = L.s[at + 1];
                break;
            }
        if (!kind) {
            emit(&L, JT_DATA, (struct jstr){L.s + pos, L.len - pos});
            L.line += count_nl(L.s + pos, L.len - pos);
            break;
        }
        size_t after = at + 2;
        char sign    = after < L.len && (L.s[after] == '-' || L.s[after] == '+') ? L.s[after] : 0;
        if (sign)
            after++;
        int data_line = L.line;
        L.line += count_nl(L.s + pos, at - pos);
        /* {% raw %} */
        size_t r = skip_ws(&L, after);
        if (kind == '%' && starts(&L, r, "raw")) {
            size_t e = skip_ws(&L, r + 3), el = 0;
            if (starts(&L, e, "-%}"))
                el = skip_ws(&L, e + 3) - e;
            else if (starts(&L, e, "%}"))
                el = 2;
            if (el) {
                int line = L.line;
                L.line   = data_line;
                emit_data(&L, pos, at, sign, true, line_starting);
                L.line      = line;
                size_t body = e + el, k = body;
                for (;; k++) {
                    if (k + 1 >= L.len)
                        jinja_fail(m, HEARTH_EINVAL, "line %d: missing end of raw directive",
                                   L.line);
                    if (L.s[k] != '{' || L.s[k + 1] != '%')
                        continue;
                    size_t q   = k + 2;
                    char rsign = q < L.len && (L.s[q] == '-' || L.s[q] == '+') ? L.s[q] : 0;
                    q          = skip_ws(&L, q + (rsign != 0));
                    if (!starts(&L, q, "endraw"))
                        continue;
                    q         = skip_ws(&L, q + 6);
                    size_t bl = block_end(&L, q);
                    if (!bl)
                        continue;
                    emit_data(&L, body, k, rsign, true, false);
                    L.line += count_nl(L.s + e, q + bl - e);
                    line_starting = L.s[q + bl - 1] == '\n';
                    pos           = q + bl;
                    break;
                }
                continue;
            }
        }
        {
            int line = L.line;
            L.line   = data_line;
            emit_data(&L, pos, at, sign, kind != '{', line_starting);
            L.line = line;
        }
        if (kind == '#') {
            size_t k  = after;
            size_t el = 0;
            for (; k + 1 < L.len; k++) {
                if (L.s[k] == '+' && starts(&L, k + 1, "#}")) {
                    el = 3;
                    break;
                }
                if (L.s[k] == '-' && starts(&L, k + 1, "#}")) {
                    el = skip_ws(&L, k + 3) - k;
                    break;
                }
                if (starts(&L, k, "#}")) {
                    el = 2 + (k + 2 < L.len && L.s[k + 2] == '\n');
                    break;
                }
            }
            if (!el)
                jinja_fail(m, HEARTH_EINVAL, "line %d: missing end of comment tag", L.line);
            L.line += count_nl(L.s + at, k + el - at);
            line_starting = L.s[k + el - 1] == '\n';
            pos           = k + el;
            continue;
        }
        emit(&L, kind == '%' ? JT_BLOCK_BEGIN : JT_VAR_BEGIN, (struct jstr){L.s + at, 2});
        pos = lex_tag(&L, after, kind == '%', &line_starting);
    }
    emit(&L, JT_EOF, (struct jstr){"", 0});
    *n_tok = L.n;
    return L.t;
}
