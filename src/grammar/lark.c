/*
 * lark.c: a Lark grammar (the subset lark.h lists) -> GBNF text, or an
 * anchored ECMA regex when no rule reaches itself.
 *
 * Three steps: the text is cut into tokens; the definitions are parsed into
 * one tree of nodes per rule or terminal (alternatives, sequences, repeats,
 * literals, /regex/ bodies, character ranges, references); the trees are
 * written out. GBNF keeps one rule per definition; the regex inlines every
 * reference, so a rule used in three places is written three times (the
 * output is bounded by LARK_MAX_OUT). /regex/ bodies are read by the same
 * small parser in both cases (Python's syntax, the subset schema.h lists)
 * and written in the target's syntax, so both outputs take the same texts.
 *
 * Typical size: Codex's apply_patch grammar is ~20 definitions, ~1 KiB;
 * its regex ~1.5 KiB.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"
#include "grammar/lark.h"
#include "util/strbuf.h"
#include "util/utf8.h"

#define LARK_MAX_IN    (64 * 1024) /* bytes of grammar text */
#define LARK_MAX_RULES 512
#define LARK_MAX_NEST  64        /* parentheses, in the grammar or a regex */
#define LARK_MAX_OUT   (1 << 20) /* bytes of output */

/* ------------------------------------------------------------ the text --- */

enum tok { T_EOF, T_NAME, T_STR, T_RX, T_NUM, T_PUNCT, T_DIRECTIVE };

struct token {
    enum tok t;
    const char *s; /* the token's text (a string with its quotes, a regex with its slashes) */
    size_t n;
    char c; /* T_PUNCT: ':' '|' '(' ')' '[' ']' '?' '*' '+' '~' '!' '.', 'D' = "..",
             * '>' = "->" */
    int line;
    bool bol; /* the first token of its line: only there may a definition start */
};

enum nkind { N_ALT, N_SEQ, N_REP, N_LIT, N_RX, N_RANGE, N_SYM };

struct node {
    enum nkind k;
    int kid, next; /* first child and next sibling (-1: none) */
    int lo, hi;    /* N_REP: counts (hi -1: no bound); N_RANGE: bytes; N_SYM: definition */
    char *s;       /* N_LIT: the bytes (malloc'd); N_RX: the body between the slashes */
    size_t n;
};

struct def {
    char name[64];
    int body; /* node, or -1 while only referenced */
    int line; /* where first referenced or defined */
    int visiting;
};

struct lark {
    struct token *toks;
    int n_toks, cap_toks, at;
    struct node *nodes;
    int n_nodes, cap_nodes;
    struct def *defs;
    int n_defs, cap_defs;
    struct strbuf out; /* output being written */
    int nest;
    char *err;
    size_t err_len;
    bool failed;
};

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static bool
fail(struct lark *l, const char *fmt, ...)
{
    if (l->failed)
        return false;
    l->failed = true;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(l->err, l->err_len, fmt, ap);
    va_end(ap);
    return false;
}

static bool grow(void **v, int *cap, int need, size_t size)
{
    if (need <= *cap)
        return true;
    int c   = *cap ? *cap * 2 : 32;
    void *n = realloc(*v, (size_t)c * size);
    if (!n)
        return false;
    *v   = n;
    *cap = c;
    return true;
}

static bool is_name(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* The tokens of s[0..n); a directive (% to the end of its line) is one token. */
static bool lex(struct lark *l, const char *s, size_t n)
{
    const char *p = s, *end = s + n;
    int line      = 1;
    int last_line = 0;
    while (!l->failed) {
        while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n' ||
                           (*p == '/' && p + 1 < end && p[1] == '/') || *p == '#')) {
            if (*p == '/' || *p == '#') {
                while (p < end && *p != '\n')
                    p++;
                continue;
            }
            line += *p++ == '\n';
        }
        if (!grow((void **)&l->toks, &l->cap_toks, l->n_toks + 1, sizeof *l->toks))
            return fail(l, "out of memory");
        struct token *t = &l->toks[l->n_toks++];
        *t        = (struct token){.t = T_EOF, .s = p, .line = line, .bol = line != last_line};
        last_line = line;
        if (p == end)
            return true;
        const char *q = p;
        if (is_name(*p) && !(*p >= '0' && *p <= '9')) {
            while (q < end && is_name(*q))
                q++;
            t->t = T_NAME;
        } else if (*p >= '0' && *p <= '9') {
            while (q < end && *q >= '0' && *q <= '9')
                q++;
            t->t = T_NUM;
        } else if (*p == '"' || *p == '/') {
            char quote = *p;
            for (q++; q < end && *q != quote && *q != '\n'; q++)
                if (*q == '\\' && q + 1 < end)
                    q++;
            if (q >= end || *q != quote)
                return fail(l, "line %d: a %s is not closed", line,
                            quote == '"' ? "string" : "regex");
            q++;
            while (q < end && (*q == 'i' || *q == 'm' || *q == 's' || *q == 'x' || *q == 'u'))
                q++; /* flags: refused where used */
            t->t = quote == '"' ? T_STR : T_RX;
        } else if (*p == '%') {
            while (q < end && *q != '\n')
                q++;
            t->t = T_DIRECTIVE;
        } else if (*p == '.' && p + 1 < end && p[1] == '.') {
            q    = p + 2;
            t->t = T_PUNCT;
            t->c = 'D';
        } else if (*p == '-' && p + 1 < end && p[1] == '>') {
            q    = p + 2;
            t->t = T_PUNCT;
            t->c = '>';
        } else if (strchr(":|()[]?*+~!.", *p)) {
            q    = p + 1;
            t->t = T_PUNCT;
            t->c = *p;
        } else if (*p == '{') {
            return fail(l, "line %d: templates ({...}) are not supported", line);
        } else {
            return fail(l, "line %d: unexpected '%c'", line, *p);
        }
        t->n = (size_t)(q - p);
        p    = q;
    }
    return false;
}

/* ------------------------------------------------------------- the tree --- */

static int node(struct lark *l, enum nkind k)
{
    if (!grow((void **)&l->nodes, &l->cap_nodes, l->n_nodes + 1, sizeof *l->nodes))
        return fail(l, "out of memory"), -1;
    l->nodes[l->n_nodes] = (struct node){.k = k, .kid = -1, .next = -1};
    return l->n_nodes++;
}

/* Appends child c to parent's children. */
static void adopt(struct lark *l, int parent, int c)
{
    int *at = &l->nodes[parent].kid;
    while (*at >= 0)
        at = &l->nodes[*at].next;
    *at = c;
}

/* The definition named s[0..n), created on first mention. */
static int def_of(struct lark *l, const char *s, size_t n, int line)
{
    if (n >= sizeof l->defs[0].name)
        return fail(l, "line %d: the name '%.32s...' is too long", line, s), -1;
    for (int i = 0; i < l->n_defs; i++)
        if (strlen(l->defs[i].name) == n && !memcmp(l->defs[i].name, s, n))
            return i;
    if (l->n_defs >= LARK_MAX_RULES)
        return fail(l, "more than %d rules", LARK_MAX_RULES), -1;
    if (!grow((void **)&l->defs, &l->cap_defs, l->n_defs + 1, sizeof *l->defs))
        return fail(l, "out of memory"), -1;
    struct def *d = &l->defs[l->n_defs];
    memset(d, 0, sizeof *d);
    memcpy(d->name, s, n);
    d->body = -1;
    d->line = line;
    return l->n_defs++;
}

static const struct token *peek(const struct lark *l, int k)
{
    int i = l->at + k < l->n_toks ? l->at + k : l->n_toks - 1;
    return &l->toks[i];
}

static bool punct(const struct token *t, char c)
{
    return t->t == T_PUNCT && t->c == c;
}

/* Whether a definition starts at token k from here: [?!]NAME [.NUM] ':' at a line's start. */
static bool def_start(const struct lark *l, int k)
{
    if (!peek(l, k)->bol)
        return false;
    if (punct(peek(l, k), '?') || punct(peek(l, k), '!'))
        k++;
    if (peek(l, k)->t != T_NAME)
        return false;
    if (punct(peek(l, k + 1), '.') && peek(l, k + 2)->t == T_NUM)
        k += 2;
    return punct(peek(l, k + 1), ':');
}

/* A "string" token's bytes (escapes as Python reads them), malloc'd into *out. */
static bool unquote(struct lark *l, const struct token *t, char **out, size_t *n)
{
    const char *s = t->s + 1, *end = t->s + t->n;
    while (end[-1] != '"') { /* flags after the closing quote */
        if (end[-1] == 'i')
            return fail(l, "line %d: case-insensitive strings are not supported", t->line);
        end--;
    }
    end--;
    char *o  = malloc((size_t)(end - s) + 1);
    size_t k = 0;
    if (!o)
        return fail(l, "out of memory");
    while (s < end) {
        char c = *s++;
        if (c == '\\' && s < end) {
            c = *s++;
            switch (c) {
            case 'n':
                c = '\n';
                break;
            case 't':
                c = '\t';
                break;
            case 'r':
                c = '\r';
                break;
            case 'f':
                c = '\f';
                break;
            case 'v':
                c = '\v';
                break;
            case 'x': { /* \xHH is the code point U+00HH, as Python reads it */
                unsigned v = 0;
                for (int j = 0; j < 2 && s < end; j++, s++) {
                    char h = *s;
                    if (!((h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') ||
                          (h >= 'A' && h <= 'F'))) {
                        free(o);
                        return fail(l, "line %d: a malformed \\x escape", t->line);
                    }
                    v = v * 16 + (unsigned)(h >= 'a'   ? h - 'a' + 10
                                            : h >= 'A' ? h - 'A' + 10
                                                       : h - '0');
                }
                if (!v) {
                    free(o);
                    return fail(l, "line %d: NUL characters are not supported", t->line);
                }
                k += utf8_encode(v, o + k);
                continue;
            }
            case '"':
            case '\\':
            case '/':
                break;
            default: /* an unknown escape keeps its backslash, as Python does */
                o[k++] = '\\';
            }
        }
        o[k++] = c;
    }
    o[k] = 0;
    *out = o;
    *n   = k;
    return true;
}

static int alternatives(struct lark *l);

/* atom: ( alts ) | [ alts ] | STRING [.. STRING] | REGEX | NAME */
static int atom(struct lark *l)
{
    const struct token *t = peek(l, 0);
    if (punct(t, '(') || punct(t, '[')) {
        char close = t->c == '(' ? ')' : ']';
        if (++l->nest > LARK_MAX_NEST)
            return fail(l, "line %d: nested deeper than %d", t->line, LARK_MAX_NEST), -1;
        l->at++;
        int a = alternatives(l);
        l->nest--;
        if (a < 0)
            return -1;
        if (!punct(peek(l, 0), close))
            return fail(l, "line %d: '%c' expected", peek(l, 0)->line, close), -1;
        l->at++;
        if (close == ')')
            return a;
        int r = node(l, N_REP);
        if (r < 0)
            return -1;
        l->nodes[r].lo = 0;
        l->nodes[r].hi = 1;
        adopt(l, r, a);
        return r;
    }
    if (t->t == T_STR) {
        char *s;
        size_t n;
        if (!unquote(l, t, &s, &n))
            return -1;
        l->at++;
        if (punct(peek(l, 0), 'D')) { /* "a".."z" */
            const struct token *t2 = peek(l, 1);
            char *s2;
            size_t n2;
            if (t2->t != T_STR || !unquote(l, t2, &s2, &n2)) {
                free(s);
                return fail(l, "line %d: a range needs two one-character strings", t->line), -1;
            }
            l->at += 2;
            bool one = n == 1 && n2 == 1 && (unsigned char)s[0] < 128 &&
                       (unsigned char)s2[0] < 128 && s[0] <= s2[0];
            int r = one ? node(l, N_RANGE) : -1;
            if (r >= 0) {
                l->nodes[r].lo = (unsigned char)s[0];
                l->nodes[r].hi = (unsigned char)s2[0];
            }
            free(s);
            free(s2);
            if (!one)
                return fail(l, "line %d: only ranges of single ASCII characters are supported",
                            t->line),
                       -1;
            return r;
        }
        int r = node(l, N_LIT);
        if (r < 0) {
            free(s);
            return -1;
        }
        l->nodes[r].s = s;
        l->nodes[r].n = n;
        return r;
    }
    if (t->t == T_RX) {
        if (t->s[t->n - 1] != '/')
            return fail(l, "line %d: regex flags are not supported", t->line), -1;
        int r = node(l, N_RX);
        if (r < 0)
            return -1;
        l->nodes[r].s = (char *)(t->s + 1); /* borrowed: the text outlives the tree */
        l->nodes[r].n = t->n - 2;
        l->at++;
        return r;
    }
    if (t->t == T_NAME) {
        int d = def_of(l, t->s, t->n, t->line);
        int r = d >= 0 ? node(l, N_SYM) : -1;
        if (r < 0)
            return -1;
        l->nodes[r].lo = d;
        l->at++;
        return r;
    }
    return fail(l, "line %d: unexpected '%.*s'", t->line, (int)(t->n ? t->n : 3),
                t->n ? t->s : "end"),
           -1;
}

/* A T_NUM token's value, held at 99999 (the text is not NUL-terminated after it). */
static int tok_count(const struct token *t)
{
    int v = 0;
    for (size_t k = 0; k < t->n; k++)
        v = v > 9999 ? 99999 : v * 10 + (t->s[k] - '0');
    return v;
}

/* expr: atom [? * + | ~ N [.. M]] */
static int expr(struct lark *l)
{
    int a = atom(l);
    if (a < 0)
        return -1;
    const struct token *t = peek(l, 0);
    int lo, hi;
    if ((punct(t, '?') || punct(t, '*') || punct(t, '+')) && !def_start(l, 0)) {
        lo = t->c == '+';
        hi = t->c == '?' ? 1 : -1;
        l->at++;
    } else if (punct(t, '~')) {
        const struct token *n = peek(l, 1);
        if (n->t != T_NUM)
            return fail(l, "line %d: '~' needs a count", t->line), -1;
        lo = hi = tok_count(n);
        l->at += 2;
        if (punct(peek(l, 0), 'D')) {
            if (peek(l, 1)->t != T_NUM)
                return fail(l, "line %d: '..' needs a count", t->line), -1;
            hi = tok_count(peek(l, 1));
            l->at += 2;
        }
        if (hi < lo || hi > 4096)
            return fail(l, "line %d: a repeat of %d..%d is not supported", t->line, lo, hi), -1;
    } else {
        return a;
    }
    int r = node(l, N_REP);
    if (r < 0)
        return -1;
    l->nodes[r].lo = lo;
    l->nodes[r].hi = hi;
    adopt(l, r, a);
    return r;
}

/* One alternative: exprs up to | ) ] -> or the next definition; an alias is dropped. */
static int sequence(struct lark *l)
{
    int s = node(l, N_SEQ);
    if (s < 0)
        return -1;
    for (;;) {
        const struct token *t = peek(l, 0);
        if (t->t == T_EOF || t->t == T_DIRECTIVE || punct(t, '|') || punct(t, ')') ||
            punct(t, ']') || def_start(l, 0))
            return s;
        if (punct(t, '>')) {
            if (peek(l, 1)->t != T_NAME)
                return fail(l, "line %d: '->' needs a name", t->line), -1;
            l->at += 2;
            continue;
        }
        int e = expr(l);
        if (e < 0)
            return -1;
        adopt(l, s, e);
    }
}

static int alternatives(struct lark *l)
{
    int a = node(l, N_ALT);
    if (a < 0)
        return -1;
    if (punct(peek(l, 0), '|'))
        l->at++;
    for (;;) {
        int s = sequence(l);
        if (s < 0)
            return -1;
        adopt(l, a, s);
        if (!punct(peek(l, 0), '|'))
            return a;
        l->at++;
    }
}

/* The common.lark terminals a grammar may import, as Lark text. */
/* clang-format off */
static const char *const COMMON[][2] = {
    {"LF", "\"\\n\""},
    {"CR", "\"\\r\""},
    {"CRLF", "\"\\r\\n\""},
    {"NEWLINE", "/(\\r?\\n)+/"},
    {"WS", "/[ \\t\\f\\r\\n]+/"},
    {"WS_INLINE", "/[ \\t]+/"},
    {"DIGIT", "/[0-9]/"},
    {"HEXDIGIT", "/[a-fA-F0-9]/"},
    {"INT", "/[0-9]+/"},
    {"SIGNED_INT", "/[+-]?[0-9]+/"},
    {"DECIMAL", "/[0-9]+\\.[0-9]*|\\.[0-9]+/"},
    {"NUMBER", "/[0-9]+(\\.[0-9]*)?/"},
    {"LCASE_LETTER", "/[a-z]/"},
    {"UCASE_LETTER", "/[A-Z]/"},
    {"LETTER", "/[a-zA-Z]/"},
    {"WORD", "/[a-zA-Z]+/"},
    {"CNAME", "/[_a-zA-Z][_a-zA-Z0-9]*/"},
    {"ESCAPED_STRING", "/\"([^\"\\\\]|\\\\.)*\"/"},
};
/* clang-format on */

static bool define(struct lark *l, const char *name, size_t n, int line);

/* %import common.X [-> Y] | %import common (X, Y); other directives are refused. */
static bool directive(struct lark *l, const struct token *t)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%.*s", (int)t->n, t->s);
    char *p = buf + 1;
    if (strncmp(p, "import", 6) || (p[6] != ' ' && p[6] != '\t'))
        return fail(l, "line %d: '%.40s' is not supported (only %%import common.X)", t->line, buf);
    p += 6;
    while (*p == ' ' || *p == '\t')
        p++;
    if (strncmp(p, "common", 6))
        return fail(l, "line %d: only imports from 'common' are supported", t->line);
    p += 6;
    char names[16][64];
    char alias[64] = "";
    int n          = 0;
    if (*p == '.') {
        size_t k = strspn(p + 1, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz0123456789");
        snprintf(names[n++], sizeof names[0], "%.*s", (int)k, p + 1);
        p += 1 + k;
        while (*p == ' ' || *p == '\t')
            p++;
        if (p[0] == '-' && p[1] == '>') {
            p += 2;
            while (*p == ' ' || *p == '\t')
                p++;
            k = strspn(p, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz0123456789");
            snprintf(alias, sizeof alias, "%.*s", (int)k, p);
        }
    } else {
        while (*p == ' ' || *p == '\t' || *p == '(' || *p == ',') {
            p++;
            size_t k = strspn(p, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz0123456789");
            if (k && n < 16)
                snprintf(names[n++], sizeof names[0], "%.*s", (int)k, p);
            p += k;
        }
    }
    for (int i = 0; i < n; i++) {
        size_t k = 0;
        while (k < sizeof COMMON / sizeof COMMON[0] && strcmp(COMMON[k][0], names[i]))
            k++;
        if (k == sizeof COMMON / sizeof COMMON[0])
            return fail(l, "line %d: common.%s is not supported", t->line, names[i]);
        const char *as = alias[0] ? alias : names[i];
        /* the definition is parsed from its own text, then the tokens resume */
        struct token *saved = l->toks;
        int n_saved = l->n_toks, cap_saved = l->cap_toks, at_saved = l->at;
        l->toks   = NULL;
        l->n_toks = l->cap_toks = l->at = 0;
        bool ok = lex(l, COMMON[k][1], strlen(COMMON[k][1])) && define(l, as, strlen(as), t->line);
        free(l->toks);
        l->toks     = saved;
        l->n_toks   = n_saved;
        l->cap_toks = cap_saved;
        l->at       = at_saved;
        if (!ok)
            return false;
    }
    return true;
}

/* The definition of name: the alternatives from the current token. */
static bool define(struct lark *l, const char *name, size_t n, int line)
{
    int d = def_of(l, name, n, line);
    if (d < 0)
        return false;
    if (l->defs[d].body >= 0)
        return fail(l, "line %d: '%s' is defined twice", line, l->defs[d].name);
    int b = alternatives(l);
    if (b < 0)
        return false;
    l->defs[d].body = b;
    l->defs[d].line = line;
    return true;
}

static bool parse(struct lark *l)
{
    while (!l->failed) {
        const struct token *t = peek(l, 0);
        if (t->t == T_EOF)
            break;
        if (t->t == T_DIRECTIVE) {
            l->at++;
            if (!directive(l, t))
                return false;
            continue;
        }
        if (!def_start(l, 0))
            return fail(l, "line %d: a definition (name: ...) expected", t->line);
        if (t->t == T_PUNCT)
            l->at++;
        const struct token *name = peek(l, 0);
        l->at += punct(peek(l, 1), '.') ? 4 : 2;
        if (!define(l, name->s, name->n, name->line))
            return false;
    }
    if (l->failed)
        return false;
    int start = -1;
    for (int i = 0; i < l->n_defs; i++) {
        if (l->defs[i].body < 0)
            return fail(l, "line %d: '%s' is used but not defined", l->defs[i].line,
                        l->defs[i].name);
        if (!strcmp(l->defs[i].name, "start"))
            start = i;
    }
    return start >= 0 || fail(l, "no 'start' rule");
}

/* ------------------------------------------------------------ writing --- */

static bool put(struct lark *l, const char *s, size_t n)
{
    if (l->out.len + n + 1 > LARK_MAX_OUT)
        return fail(l, "the output would pass %d bytes", LARK_MAX_OUT);
    strbuf_addn(&l->out, s, n);
    return !l->out.oom || fail(l, "out of memory");
}

static bool puts_(struct lark *l, const char *s)
{
    return put(l, s, strlen(s));
}

/* One byte as GBNF writes it in a string (in_class: in a [class]) or as a regex does. */
static bool put_byte(struct lark *l, unsigned char c, bool gbnf, bool in_class)
{
    char b[8];
    if (c == '\n')
        return puts_(l, "\\n");
    if (c == '\r')
        return puts_(l, "\\r");
    if (c == '\t')
        return puts_(l, "\\t");
    if (c < 32 || c == 127 || (gbnf && in_class && (c == '-' || c == '^'))) { /* GBNF: no \\- */
        snprintf(b, sizeof b, "\\x%02X", c);
        return puts_(l, b);
    }
    const char *meta =
        gbnf ? (in_class ? "\\]^-[" : "\\\"") : (in_class ? "\\]^-[" : "\\^$.|?*+()[]{}/");
    if (strchr(meta, c)) {
        b[0] = '\\';
        b[1] = (char)c;
        return put(l, b, 2);
    }
    b[0] = (char)c;
    return put(l, b, 1);
}

/* ------------------------------------------------- /regex/ bodies, written --- */

/* A regex body being read (Python's syntax, schema.h's subset). */
struct rx {
    const char *s, *end;
    int line;
};

static bool rx_alts(struct lark *l, struct rx *r, bool gbnf);

/* One character of a class at r->s, escapes read: its code point (-1 at the end or for a
 * malformed byte), its UTF-8 bytes in b[0..*n). *set: it was \d, \w or \s (written in full). */
static int32_t rx_class_char(struct lark *l, struct rx *r, bool gbnf, char b[4], int *n, bool *set)
{
    *set = false;
    *n   = 0;
    if (r->s >= r->end)
        return -1;
    unsigned char c = (unsigned char)*r->s++;
    if (c == '\\' && r->s < r->end) {
        char e          = *r->s++;
        const char *all = e == 'd'   ? "0-9"
                          : e == 'w' ? "a-zA-Z0-9_"
                          : e == 's' ? " \\t\\n\\r\\f\\v"
                                     : NULL;
        if (all) {
            *set = true;
            return puts_(l, all) ? 0 : -1;
        }
        if ((e >= 'a' && e <= 'z' && !strchr("ntrfv", e)) || (e >= 'A' && e <= 'Z') ||
            (e >= '0' && e <= '9'))
            return fail(l, "line %d: the class escape \\%c is not supported", r->line, e), -1;
        c = (unsigned char)(e == 'n'   ? '\n'
                            : e == 't' ? '\t'
                            : e == 'r' ? '\r'
                            : e == 'f' ? '\f'
                            : e == 'v' ? '\v'
                                       : e);
    }
    b[(*n)++] = (char)c;
    if (c < 0x80)
        return c;
    int more   = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : -1;
    int32_t cp = more == 3 ? c & 7 : more == 2 ? c & 15 : c & 31;
    if (more < 0 || c > 0xF4)
        return fail(l, "line %d: a regex class is not valid UTF-8", r->line), -1;
    for (int k = 0; k < more; k++) {
        if (r->s >= r->end || ((unsigned char)*r->s & 0xC0) != 0x80)
            return fail(l, "line %d: a regex class is not valid UTF-8", r->line), -1;
        b[(*n)++] = *r->s;
        cp        = cp << 6 | ((unsigned char)*r->s++ & 63);
    }
    return cp;
}

static bool put_class_char(struct lark *l, const char *b, int n, bool gbnf)
{
    return n == 1 ? put_byte(l, (unsigned char)b[0], gbnf, true) : put(l, b, (size_t)n);
}

/* A class body after '[' up to and including ']', written as a class. */
static bool rx_class(struct lark *l, struct rx *r, bool gbnf)
{
    if (!puts_(l, "["))
        return false;
    if (r->s < r->end && *r->s == '^') {
        r->s++;
        if (!puts_(l, "^"))
            return false;
    }
    bool first = true;
    while (r->s < r->end && (*r->s != ']' || first)) {
        first = false;
        if (*r->s == '[')
            return fail(l, "line %d: '[' inside a class is not supported", r->line);
        char lo[4], hi[4];
        int n_lo, n_hi;
        bool set;
        int32_t a = rx_class_char(l, r, gbnf, lo, &n_lo, &set);
        if (a < 0)
            return false;
        bool range = r->end - r->s >= 2 && r->s[0] == '-' && r->s[1] != ']';
        if (set) {
            if (range)
                return fail(l, "line %d: a class range from \\d, \\w or \\s", r->line);
            continue;
        }
        if (!range) {
            if (!put_class_char(l, lo, n_lo, gbnf))
                return false;
            continue;
        }
        r->s++;
        int32_t z = rx_class_char(l, r, gbnf, hi, &n_hi, &set);
        if (z < 0 || set)
            return l->failed ? false
                             : fail(l, "line %d: a class range to \\d, \\w or \\s", r->line);
        if (z < a)
            return fail(l, "line %d: a class range is out of order", r->line);
        if (!put_class_char(l, lo, n_lo, gbnf) || !puts_(l, "-") ||
            !put_class_char(l, hi, n_hi, gbnf))
            return false;
    }
    if (r->s >= r->end)
        return fail(l, "line %d: a class in a regex is not closed", r->line);
    r->s++;
    return puts_(l, "]");
}

/* One atom of a regex and its quantifier. */
static bool rx_atom(struct lark *l, struct rx *r, bool gbnf)
{
    char c = *r->s++;
    switch (c) {
    case '(':
        if (r->s < r->end && *r->s == '?') {
            if (r->end - r->s < 2 || r->s[1] != ':')
                return fail(l, "line %d: only (?:...) groups are supported in a regex", r->line);
            r->s += 2;
        }
        if (++l->nest > LARK_MAX_NEST)
            return fail(l, "line %d: a regex nested deeper than %d", r->line, LARK_MAX_NEST);
        if (!puts_(l, gbnf ? "(" : "(?:") || !rx_alts(l, r, gbnf))
            return false;
        l->nest--;
        if (r->s >= r->end || *r->s != ')')
            return fail(l, "line %d: a group in a regex is not closed", r->line);
        r->s++;
        if (!puts_(l, ")"))
            return false;
        break;
    case '[':
        if (!rx_class(l, r, gbnf))
            return false;
        break;
    case '.':
        if (!puts_(l, "[^\\n]")) /* Python's '.': ECMA's also leaves out \r */
            return false;
        break;
    case '\\': {
        if (r->s >= r->end)
            return fail(l, "line %d: a regex ends with a backslash", r->line);
        char e                            = *r->s++;
        static const char *const cls[][2] = {
            {"d", "[0-9]"},
            {"D", "[^0-9]"},
            {"w", "[a-zA-Z0-9_]"},
            {"W", "[^a-zA-Z0-9_]"},
            {"s", "[ \\t\\n\\r\\f\\v]"},
            {"S", "[^ \\t\\n\\r\\f\\v]"},
        };
        bool done = false;
        for (size_t k = 0; k < 6 && !done; k++)
            if (cls[k][0][0] == e) {
                if (!puts_(l, cls[k][1]))
                    return false;
                done = true;
            }
        if (done)
            break;
        if ((e >= 'a' && e <= 'z' && !strchr("ntrfv", e)) || (e >= 'A' && e <= 'Z') ||
            (e >= '0' && e <= '9'))
            return fail(l, "line %d: the regex escape \\%c is not supported", r->line, e);
        c = e == 'n'   ? '\n'
            : e == 't' ? '\t'
            : e == 'r' ? '\r'
            : e == 'f' ? '\f'
            : e == 'v' ? '\v'
                       : e;
        if (gbnf ? !puts_(l, "\"") || !put_byte(l, (unsigned char)c, true, false) || !puts_(l, "\"")
                 : !put_byte(l, (unsigned char)c, false, false))
            return false;
        break;
    }
    case '^':
    case '$':
        return fail(l, "line %d: anchors in a regex are not supported", r->line);
    case '*':
    case '+':
    case '?':
    case '{':
        return fail(l, "line %d: a regex quantifier follows nothing", r->line);
    default: {
        /* a character of several bytes is one atom (the text was checked to be UTF-8) */
        size_t more = (unsigned char)c >= 0x80 ? utf8_lead_len((unsigned char)c) - 1 : 0;
        if (more > (size_t)(r->end - r->s))
            return fail(l, "line %d: a regex is not valid UTF-8", r->line);
        if (more) {
            if ((gbnf && !puts_(l, "\"")) || !put(l, r->s - 1, more + 1) ||
                (gbnf && !puts_(l, "\"")))
                return false;
            r->s += more;
        } else if (gbnf ? !puts_(l, "\"") || !put_byte(l, (unsigned char)c, true, false) ||
                              !puts_(l, "\"")
                        : !put_byte(l, (unsigned char)c, false, false)) {
            return false;
        }
    }
    }
    if (r->s < r->end && strchr("*+?{", *r->s)) {
        if (*r->s == '{') { /* {m}, {m,}, {m,n}, {,n}: checked, written as {m,n} or {m,} */
            long lo = 0, hi = -1;
            char *q;
            const char *p = r->s + 1;
            if (p < r->end && *p >= '0' && *p <= '9')
                lo = strtol(p, &q, 10), p = q;
            else if (p < r->end && *p != ',')
                return fail(l, "line %d: a malformed {m,n} in a regex", r->line);
            if (p < r->end && *p == ',') {
                p++;
                if (p < r->end && *p >= '0' && *p <= '9')
                    hi = strtol(p, &q, 10), p = q;
            } else {
                hi = lo;
            }
            if (p >= r->end || *p != '}' || lo > 4096 || hi > 4096 || (hi >= 0 && hi < lo))
                return fail(l, "line %d: a malformed or unsupported {m,n} in a regex", r->line);
            char q2[32];
            if (hi < 0)
                snprintf(q2, sizeof q2, "{%ld,}", lo);
            else
                snprintf(q2, sizeof q2, "{%ld,%ld}", lo, hi);
            if (!puts_(l, q2))
                return false;
            r->s = p + 1;
        } else {
            if (!put(l, r->s, 1))
                return false;
            r->s++;
        }
        if (r->s < r->end && *r->s == '?') /* lazy: the same language */
            r->s++;
        if (r->s < r->end && strchr("*+{", *r->s))
            return fail(l, "line %d: a doubled quantifier in a regex", r->line);
    }
    return true;
}

static bool rx_alts(struct lark *l, struct rx *r, bool gbnf)
{
    for (;;) {
        bool empty = true;
        while (r->s < r->end && *r->s != '|' && *r->s != ')') {
            if (!empty && gbnf && !puts_(l, " "))
                return false;
            if (!rx_atom(l, r, gbnf))
                return false;
            empty = false;
        }
        if (empty && gbnf && !puts_(l, "\"\""))
            return false;
        if (r->s >= r->end || *r->s != '|')
            return true;
        r->s++;
        if (!puts_(l, gbnf ? " | " : "|"))
            return false;
    }
}

static bool write_rx(struct lark *l, const struct node *n, bool gbnf)
{
    /* the body, with "\/" meaning "/" */
    char *body = malloc(n->n + 1);
    if (!body)
        return fail(l, "out of memory");
    size_t k = 0;
    for (size_t i = 0; i < n->n; i++) {
        if (n->s[i] == '\\' && i + 1 < n->n && n->s[i + 1] == '/')
            i++;
        body[k++] = n->s[i];
    }
    body[k]     = 0; /* strtol reads a count up to it */
    struct rx r = {.s = body, .end = body + k};
    bool ok     = puts_(l, gbnf ? "(" : "(?:") && rx_alts(l, &r, gbnf);
    if (ok && r.s < r.end)
        ok = fail(l, "a ')' without its '(' in a regex");
    free(body);
    return ok && puts_(l, ")");
}

/* ------------------------------------------------------------ the trees --- */

static bool write_node(struct lark *l, int i, bool gbnf);

/* Whether node i matches only the empty text (a repeat of it is left out: "(?:)?" is no
 * regex the schema path takes). depth bounds a walk through references. */
static bool only_empty(const struct lark *l, int i, int depth)
{
    const struct node *n = &l->nodes[i];
    if (depth > LARK_MAX_NEST)
        return false;
    switch (n->k) {
    case N_LIT:
        return n->n == 0;
    case N_ALT:
    case N_SEQ:
        for (int c = n->kid; c >= 0; c = l->nodes[c].next)
            if (!only_empty(l, c, depth + 1))
                return false;
        return true;
    case N_REP:
        return n->hi == 0 || only_empty(l, n->kid, depth + 1);
    case N_SYM:
        return only_empty(l, l->defs[n->lo].body, depth + 1);
    default:
        return false;
    }
}

static const char *gbnf_name(const char *lark, char *buf, size_t size)
{
    size_t k  = 0;
    bool term = lark[0] >= 'A' && lark[0] <= 'Z';
    k += (size_t)snprintf(buf, size, "%s", term ? "t-" : "r-");
    for (const char *p = lark; *p && k + 1 < size; p++)
        buf[k++] = *p == '_' ? '-' : (*p >= 'A' && *p <= 'Z') ? (char)(*p - 'A' + 'a') : *p;
    buf[k] = 0;
    return buf;
}

static bool write_node(struct lark *l, int i, bool gbnf)
{
    const struct node *n = &l->nodes[i];
    if (l->failed)
        return false;
    switch (n->k) {
    case N_ALT: {
        bool more = l->nodes[n->kid].next >= 0;
        if (more && !puts_(l, gbnf ? "(" : "(?:"))
            return false;
        for (int c = n->kid; c >= 0; c = l->nodes[c].next) {
            if (c != n->kid && !puts_(l, gbnf ? " | " : "|"))
                return false;
            if (!write_node(l, c, gbnf))
                return false;
        }
        return !more || puts_(l, ")");
    }
    case N_SEQ:
        if (n->kid < 0)
            return !gbnf || puts_(l, "\"\"");
        for (int c = n->kid; c >= 0; c = l->nodes[c].next) {
            if (c != n->kid && gbnf && !puts_(l, " "))
                return false;
            if (!write_node(l, c, gbnf))
                return false;
        }
        return true;
    case N_REP: {
        if (only_empty(l, i, 0))
            return !gbnf || puts_(l, "\"\"");
        if (!puts_(l, gbnf ? "(" : "(?:") || !write_node(l, n->kid, gbnf) || !puts_(l, ")"))
            return false;
        char q[32];
        if (n->lo == 0 && n->hi == 1)
            snprintf(q, sizeof q, "?");
        else if (n->lo == 0 && n->hi < 0)
            snprintf(q, sizeof q, "*");
        else if (n->lo == 1 && n->hi < 0)
            snprintf(q, sizeof q, "+");
        else if (n->hi < 0)
            snprintf(q, sizeof q, "{%d,}", n->lo);
        else
            snprintf(q, sizeof q, "{%d,%d}", n->lo, n->hi);
        return puts_(l, q);
    }
    case N_LIT:
        if (gbnf && !puts_(l, "\""))
            return false;
        for (size_t k = 0; k < n->n; k++)
            if (!put_byte(l, (unsigned char)n->s[k], gbnf, false))
                return false;
        return !gbnf || puts_(l, "\"");
    case N_RANGE:
        return puts_(l, "[") && put_byte(l, (unsigned char)n->lo, gbnf, true) && puts_(l, "-") &&
               put_byte(l, (unsigned char)n->hi, gbnf, true) && puts_(l, "]");
    case N_RX:
        return write_rx(l, n, gbnf);
    case N_SYM: {
        struct def *d = &l->defs[n->lo];
        if (gbnf) {
            char buf[80];
            return puts_(l, gbnf_name(d->name, buf, sizeof buf));
        }
        if (d->visiting)
            return fail(l, "'%s' refers to itself, so no regex describes the grammar", d->name);
        d->visiting = 1;
        bool ok     = write_node(l, d->body, false); /* an ALT groups itself */
        d->visiting = 0;
        return ok;
    }
    }
    return false;
}

static char *convert(const char *def, size_t len, bool gbnf, char *err, size_t err_len)
{
    struct lark l = {.err = err, .err_len = err_len};
    if (err_len)
        err[0] = 0;
    if (len > LARK_MAX_IN) {
        fail(&l, "the grammar is %zu bytes, above %d", len, LARK_MAX_IN);
        return NULL;
    }
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t n = utf8_decode(def + i, len - i, &cp);
        if ((n == 2 && cp < 0x80) || (n == 3 && (cp < 0x800 || (cp >= 0xD800 && cp < 0xE000))) ||
            (n == 4 && cp < 0x10000))
            n = 0; /* overlong forms and surrogates: not UTF-8 a JSON schema takes */
        if (n && !cp) {
            fail(&l, "the grammar holds a NUL byte at %zu", i);
            return NULL;
        }
        if (!n) {
            fail(&l, "the grammar is not valid UTF-8 at byte %zu", i);
            return NULL;
        }
        i += n;
    }
    bool ok = lex(&l, def, len) && parse(&l);
    if (ok && gbnf) {
        ok = puts_(&l, "root ::= r-start\n");
        for (int i = 0; ok && i < l.n_defs; i++) {
            char buf[80];
            ok = puts_(&l, gbnf_name(l.defs[i].name, buf, sizeof buf)) && puts_(&l, " ::= ") &&
                 write_node(&l, l.defs[i].body, true) && puts_(&l, "\n");
        }
    } else if (ok) {
        int start = 0;
        while (strcmp(l.defs[start].name, "start"))
            start++;
        l.defs[start].visiting = 1;
        ok = puts_(&l, "^") && write_node(&l, l.defs[start].body, false) && puts_(&l, "$");
    }
    for (int i = 0; i < l.n_nodes; i++)
        if (l.nodes[i].k == N_LIT)
            free(l.nodes[i].s);
    free(l.nodes);
    free(l.defs);
    free(l.toks);
    char why[256];
    if (ok && !l.failed && gbnf && /* left recursion, which Lark parses and GBNF cannot */
        grammar_check(l.out.s, l.out.len, NULL, why, sizeof why) != HEARTH_OK)
        fail(&l, "%s", why);
    if (!ok || l.failed) {
        strbuf_free(&l.out);
        return NULL;
    }
    return strbuf_take(&l.out, NULL);
}

char *lark_to_gbnf(const char *def, size_t len, char *err, size_t err_len)
{
    return convert(def, len, true, err, err_len);
}

char *lark_to_regex(const char *def, size_t len, char *err, size_t err_len)
{
    return convert(def, len, false, err, err_len);
}
