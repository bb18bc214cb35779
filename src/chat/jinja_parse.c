/*
 * jinja_parse.c: tokens -> syntax tree, by jinja2's grammar (parser.py):
 * the precedence of or, and, not, comparisons (chained), + -, ~, * / // %,
 * ** (left-associative, as jinja2 has it), unary - +, then postfix
 * (.attr, [item], [a:b:c], call), filters and tests binding tighter than
 * any binary operator. Statements: if/elif/else, for (targets, loop filter,
 * else, recursive), set (name, tuple, namespace attribute, block with
 * filters), macro (with caller, varargs and kwargs), call blocks, with,
 * filter blocks, generation, block (rendered in place), break and
 * continue; include, import and extends parse but fail when run, as
 * jinja2's do without a loader.
 *
 * As jinja2 does, an unknown filter or test is a compile error except in
 * the branches of an if or a conditional expression, where it fails only
 * when evaluated. Recursion is bounded (MAX_NEST) so no input overflows
 * the C stack.
 */
#include <stdio.h>
#include <string.h>

#include "chat/jinja_int.h"

#define MAX_NEST 200

struct parser {
    struct jmem *m;
    struct jtok *t;
    size_t n, i;
    int nest;  /* recursion depth of the parser */
    bool soft; /* inside an if: unknown filters and tests fail at run time */
    int loops; /* enclosing for loops, within the current macro */
    int refs;  /* MACRO_* names seen since the current macro body began */
};

static _Noreturn void fail_at(struct parser *P, const struct jtok *t, const char *what)
{
    jinja_fail(P->m, HEARTH_EINVAL, "line %d: %s", t->line, what);
}

static struct jtok *cur(struct parser *P)
{
    return &P->t[P->i];
}

static struct jtok *peek(struct parser *P, size_t k)
{
    return &P->t[P->i + k < P->n ? P->i + k : P->n - 1];
}

static void next(struct parser *P)
{
    if (P->i + 1 < P->n)
        P->i++;
}

static bool is_op(const struct jtok *t, const char *op)
{
    return t->kind == JT_OP && jinja_str_is(t->s, op);
}

static bool is_name(const struct jtok *t, const char *name)
{
    return t->kind == JT_NAME && jinja_str_is(t->s, name);
}

static void expect_op(struct parser *P, const char *op)
{
    if (!is_op(cur(P), op)) {
        char msg[80];
        snprintf(msg, sizeof msg, "expected '%s'", op);
        fail_at(P, cur(P), msg);
    }
    next(P);
}

static struct jstr expect_name(struct parser *P)
{
    if (cur(P)->kind != JT_NAME)
        fail_at(P, cur(P), "expected a name");
    struct jstr s = cur(P)->s;
    next(P);
    return s;
}

static void expect_block_end(struct parser *P)
{
    if (cur(P)->kind != JT_BLOCK_END)
        fail_at(P, cur(P), "expected the end of the statement block");
    next(P);
}

static struct jnode *node(struct parser *P, enum jn_kind k, int line)
{
    struct jnode *n = jinja_alloc(P->m, sizeof *n);
    n->kind         = k;
    n->line         = line;
    return n;
}

/* A growable array of node pointers in the arena. */
struct nvec {
    struct jnode **v;
    int n, cap;
};

static void nvec_push(struct parser *P, struct nvec *a, struct jnode *x)
{
    if (a->n == a->cap) {
        int cap           = a->cap ? a->cap * 2 : 4;
        struct jnode **nv = jinja_alloc(P->m, (size_t)cap * sizeof *nv);
        if (a->n)
            memcpy(nv, a->v, (size_t)a->n * sizeof *nv);
        a->v   = nv;
        a->cap = cap;
    }
    a->v[a->n++] = x;
}

struct svec {
    struct jstr *v;
    int n, cap;
};

static void svec_push(struct parser *P, struct svec *a, struct jstr x)
{
    if (a->n == a->cap) {
        int cap         = a->cap ? a->cap * 2 : 4;
        struct jstr *nv = jinja_alloc(P->m, (size_t)cap * sizeof *nv);
        if (a->n)
            memcpy(nv, a->v, (size_t)a->n * sizeof *nv);
        a->v   = nv;
        a->cap = cap;
    }
    a->v[a->n++] = x;
}

static void enter(struct parser *P)
{
    if (++P->nest > MAX_NEST)
        fail_at(P, cur(P), "the template nests too deep");
}

static struct jnode *parse_expr(struct parser *P, bool condexpr);
static struct jnode *parse_or(struct parser *P);
static struct jnode *parse_unary(struct parser *P, bool with_filter);
static struct jnode *parse_primary(struct parser *P);
static struct jnode *parse_postfix(struct parser *P, struct jnode *n);

/* ------------------------------------------------------------ expressions --- */

/* Call arguments after '(' up to and including ')': positional then name=value. */
static void parse_args(struct parser *P, struct jnode *n)
{
    struct nvec pos = {0}, kwv = {0};
    struct svec kwn = {0};
    expect_op(P, "(");
    while (!is_op(cur(P), ")")) {
        if (pos.n + kwv.n)
            expect_op(P, ",");
        if (is_op(cur(P), ")"))
            break;
        if (is_op(cur(P), "*") || is_op(cur(P), "**"))
            fail_at(P, cur(P), "*args and **kwargs are not supported");
        if (cur(P)->kind == JT_NAME && is_op(peek(P, 1), "=")) {
            for (int k = 0; k < kwn.n; k++)
                if (kwn.v[k].len == cur(P)->s.len && !memcmp(kwn.v[k].p, cur(P)->s.p, kwn.v[k].len))
                    fail_at(P, cur(P), "keyword argument repeated");
            svec_push(P, &kwn, cur(P)->s);
            next(P);
            next(P);
            nvec_push(P, &kwv, parse_expr(P, true));
        } else {
            if (kwv.n)
                fail_at(P, cur(P), "a positional argument follows a keyword argument");
            nvec_push(P, &pos, parse_expr(P, true));
        }
    }
    next(P);
    n->kids     = pos.v;
    n->n_kids   = pos.n;
    n->kw_names = kwn.v;
    n->kw_vals  = kwv.v;
    n->n_kw     = kwv.n;
}

static void check_known(struct parser *P, const struct jtok *t, struct jstr name, bool filter)
{
    if (P->soft)
        return;
    if (filter ? jinja_filter_exists(name) : jinja_test_exists(name))
        return;
    jinja_fail(P->m, HEARTH_EINVAL, "line %d: no %s named '%.*s'", t->line,
               filter ? "filter" : "test", (int)name.len, name.p);
}

/* '|' name [args]; operand may be NULL (filter blocks). */
static struct jnode *parse_filter(struct parser *P, struct jnode *operand)
{
    struct jtok *t  = cur(P);
    struct jnode *n = node(P, JN_FILTER, t->line);
    n->a            = operand;
    n->name         = expect_name(P);
    check_known(P, t, n->name, true);
    if (is_op(cur(P), "("))
        parse_args(P, n);
    return n;
}

static struct jnode *parse_test(struct parser *P, struct jnode *operand)
{
    struct jnode *n = node(P, JN_TEST, cur(P)->line);
    n->a            = operand;
    if (is_name(cur(P), "not")) {
        n->op = 1;
        next(P);
    }
    struct jtok *t = cur(P);
    n->name        = expect_name(P);
    check_known(P, t, n->name, false);
    struct jtok *c = cur(P);
    if (is_op(c, "(")) {
        parse_args(P, n);
    } else if ((c->kind == JT_NAME || c->kind == JT_STRING || c->kind == JT_INT ||
                c->kind == JT_FLOAT || is_op(c, "[") || is_op(c, "{")) &&
               !is_name(c, "else") && !is_name(c, "or") && !is_name(c, "and")) {
        if (is_name(c, "is"))
            fail_at(P, c, "You cannot chain multiple tests with is");
        n->kids    = jinja_alloc(P->m, sizeof *n->kids);
        n->kids[0] = parse_postfix(P, parse_primary(P));
        n->n_kids  = 1;
    }
    return n;
}

static struct jnode *parse_filter_expr(struct parser *P, struct jnode *n)
{
    for (;;) {
        if (is_op(cur(P), "|")) {
            next(P);
            n = parse_filter(P, n);
        } else if (is_name(cur(P), "is")) {
            next(P);
            n = parse_test(P, n);
        } else if (is_op(cur(P), "(")) {
            struct jnode *call = node(P, JN_CALL, cur(P)->line);
            call->a            = n;
            parse_args(P, call);
            n = call;
        } else
            return n;
    }
}

static struct jnode *parse_subscript(struct parser *P, struct jnode *obj)
{
    struct jnode *n        = node(P, JN_GETITEM, cur(P)->line);
    n->a                   = obj;
    struct jnode *parts[3] = {NULL, NULL, NULL};
    int k                  = 0;
    bool slice             = false;
    for (;;) {
        if (is_op(cur(P), ":")) {
            slice = true;
            if (++k > 2)
                fail_at(P, cur(P), "a slice has at most three parts");
            next(P);
            continue;
        }
        if (is_op(cur(P), "]"))
            break;
        if (parts[k])
            fail_at(P, cur(P), "expected ']'");
        parts[k] = parse_expr(P, true);
    }
    next(P);
    if (slice) {
        n->kind = JN_SLICE;
        n->b    = parts[0];
        n->c    = parts[1];
        n->d    = parts[2];
    } else {
        if (!parts[0])
            fail_at(P, cur(P), "expected a subscript");
        n->b = parts[0];
    }
    return n;
}

static struct jnode *parse_postfix(struct parser *P, struct jnode *n)
{
    for (;;) {
        struct jtok *t = cur(P);
        if (is_op(t, ".")) {
            next(P);
            struct jtok *a = cur(P);
            if (a->kind == JT_NAME) {
                struct jnode *g = node(P, JN_GETATTR, t->line);
                g->a            = n;
                g->name         = a->s;
                n               = g;
            } else if (a->kind == JT_INT) {
                struct jnode *g = node(P, JN_GETITEM, t->line);
                g->a            = n;
                g->b            = node(P, JN_CONST, t->line);
                g->b->val       = jinja_int(a->i);
                n               = g;
            } else
                fail_at(P, a, "expected an attribute name after '.'");
            next(P);
        } else if (is_op(t, "[")) {
            next(P);
            n = parse_subscript(P, n);
        } else if (is_op(t, "(")) {
            struct jnode *call = node(P, JN_CALL, t->line);
            call->a            = n;
            parse_args(P, call);
            n = call;
        } else
            return n;
    }
}

/* After '(' : (), (x), (x,), (x, y). */
static struct jnode *parse_paren(struct parser *P, int line)
{
    struct nvec v = {0};
    bool comma    = false;
    while (!is_op(cur(P), ")")) {
        if (v.n) {
            expect_op(P, ",");
            comma = true;
            if (is_op(cur(P), ")"))
                break;
        }
        nvec_push(P, &v, parse_expr(P, true));
    }
    next(P);
    if (v.n == 1 && !comma)
        return v.v[0];
    struct jnode *n = node(P, JN_TUPLE, line);
    n->kids         = v.v;
    n->n_kids       = v.n;
    return n;
}

static struct jnode *parse_primary(struct parser *P)
{
    enter(P);
    struct jtok *t  = cur(P);
    struct jnode *n = NULL;
    switch (t->kind) {
    case JT_NAME:
        n = node(P, JN_CONST, t->line);
        if (jinja_str_is(t->s, "true") || jinja_str_is(t->s, "True"))
            n->val = jinja_bool(true);
        else if (jinja_str_is(t->s, "false") || jinja_str_is(t->s, "False"))
            n->val = jinja_bool(false);
        else if (jinja_str_is(t->s, "none") || jinja_str_is(t->s, "None"))
            n->val = jinja_none();
        else {
            n->kind = JN_NAME;
            n->name = t->s;
            P->refs |= jinja_str_is(t->s, "caller")    ? MACRO_CALLER
                       : jinja_str_is(t->s, "kwargs")  ? MACRO_KWARGS
                       : jinja_str_is(t->s, "varargs") ? MACRO_VARARGS
                                                       : 0;
        }
        next(P);
        break;
    case JT_STRING: {
        /* adjacent literals concatenate */
        struct jstr s = t->s;
        next(P);
        while (cur(P)->kind == JT_STRING) {
            struct jstr o = cur(P)->s;
            char *p       = jinja_alloc(P->m, s.len + o.len + 1);
            memcpy(p, s.p, s.len);
            memcpy(p + s.len, o.p, o.len);
            s = (struct jstr){p, s.len + o.len};
            next(P);
        }
        n      = node(P, JN_CONST, t->line);
        n->val = jinja_strn(s.p, s.len);
        break;
    }
    case JT_INT:
        n      = node(P, JN_CONST, t->line);
        n->val = jinja_int(t->i);
        next(P);
        break;
    case JT_FLOAT:
        n      = node(P, JN_CONST, t->line);
        n->val = jinja_float(t->f);
        next(P);
        break;
    case JT_OP:
        if (is_op(t, "(")) {
            next(P);
            n = parse_paren(P, t->line);
        } else if (is_op(t, "[")) {
            next(P);
            struct nvec v = {0};
            while (!is_op(cur(P), "]")) {
                if (v.n) {
                    expect_op(P, ",");
                    if (is_op(cur(P), "]"))
                        break;
                }
                nvec_push(P, &v, parse_expr(P, true));
            }
            next(P);
            n         = node(P, JN_LIST, t->line);
            n->kids   = v.v;
            n->n_kids = v.n;
        } else if (is_op(t, "{")) {
            next(P);
            struct nvec v = {0};
            while (!is_op(cur(P), "}")) {
                if (v.n) {
                    expect_op(P, ",");
                    if (is_op(cur(P), "}"))
                        break;
                }
                nvec_push(P, &v, parse_expr(P, true));
                expect_op(P, ":");
                nvec_push(P, &v, parse_expr(P, true));
            }
            next(P);
            n         = node(P, JN_DICT, t->line);
            n->kids   = v.v;
            n->n_kids = v.n;
        } else
            fail_at(P, t, "unexpected operator");
        break;
    default:
        fail_at(P, t, "unexpected end of expression");
    }
    P->nest--;
    return n;
}

static struct jnode *parse_unary(struct parser *P, bool with_filter)
{
    enter(P);
    struct jtok *t = cur(P);
    struct jnode *n;
    if (is_op(t, "-") || is_op(t, "+")) {
        next(P);
        n     = node(P, JN_UNARY, t->line);
        n->op = t->s.p[0];
        n->a  = parse_unary(P, false);
    } else
        n = parse_primary(P);
    n = parse_postfix(P, n);
    if (with_filter)
        n = parse_filter_expr(P, n);
    P->nest--;
    return n;
}

static struct jnode *binop(struct parser *P, int op, struct jnode *a, struct jnode *b, int line)
{
    struct jnode *n = node(P, JN_BINOP, line);
    n->op           = op;
    n->a            = a;
    n->b            = b;
    return n;
}

static struct jnode *parse_pow(struct parser *P)
{
    struct jnode *n = parse_unary(P, true);
    while (is_op(cur(P), "**")) {
        int line = cur(P)->line;
        next(P);
        n = binop(P, 'P', n, parse_unary(P, true), line);
    }
    return n;
}

static struct jnode *parse_math2(struct parser *P)
{
    struct jnode *n = parse_pow(P);
    for (;;) {
        struct jtok *t = cur(P);
        int op         = is_op(t, "*")    ? '*'
                         : is_op(t, "/")  ? '/'
                         : is_op(t, "//") ? 'F'
                         : is_op(t, "%")  ? '%'
                                          : 0;
        if (!op)
            return n;
        next(P);
        n = binop(P, op, n, parse_pow(P), t->line);
    }
}

static struct jnode *parse_concat(struct parser *P)
{
    struct jnode *n = parse_math2(P);
    while (is_op(cur(P), "~")) {
        int line = cur(P)->line;
        next(P);
        n = binop(P, '~', n, parse_math2(P), line);
    }
    return n;
}

static struct jnode *parse_math1(struct parser *P)
{
    struct jnode *n = parse_concat(P);
    for (;;) {
        struct jtok *t = cur(P);
        int op         = is_op(t, "+") ? '+' : is_op(t, "-") ? '-' : 0;
        if (!op)
            return n;
        next(P);
        n = binop(P, op, n, parse_concat(P), t->line);
    }
}

static struct jnode *parse_compare(struct parser *P)
{
    int line        = cur(P)->line;
    struct jnode *n = parse_math1(P);
    struct nvec v   = {0};
    char ops[64];
    int n_ops = 0;
    for (;;) {
        struct jtok *t = cur(P);
        int op         = is_op(t, "==")     ? '='
                         : is_op(t, "!=")   ? '!'
                         : is_op(t, "<")    ? '<'
                         : is_op(t, ">")    ? '>'
                         : is_op(t, "<=")   ? 'l'
                         : is_op(t, ">=")   ? 'g'
                         : is_name(t, "in") ? 'i'
                                            : 0;
        if (!op && is_name(t, "not") && is_name(peek(P, 1), "in")) {
            op = 'n';
            next(P);
        }
        if (!op)
            break;
        if (n_ops == (int)sizeof ops)
            fail_at(P, t, "too many chained comparisons");
        next(P);
        ops[n_ops++] = (char)op;
        nvec_push(P, &v, parse_math1(P));
    }
    if (!n_ops)
        return n;
    struct jnode *c = node(P, JN_CMP, line);
    c->a            = n;
    c->kids         = v.v;
    c->n_kids       = v.n;
    c->ops          = jinja_strndup(P->m, ops, (size_t)n_ops);
    return c;
}

static struct jnode *parse_not(struct parser *P)
{
    if (is_name(cur(P), "not")) {
        enter(P);
        struct jnode *n = node(P, JN_UNARY, cur(P)->line);
        n->op           = '!';
        next(P);
        n->a = parse_not(P);
        P->nest--;
        return n;
    }
    return parse_compare(P);
}

/* Operands joined by the keyword op, left to right, into nodes of kind: a and b and c. */
static struct jnode *parse_chain(struct parser *P, const char *op, enum jn_kind kind,
                                 struct jnode *(*operand)(struct parser *))
{
    struct jnode *n = operand(P);
    while (is_name(cur(P), op)) {
        struct jnode *j = node(P, kind, cur(P)->line);
        next(P);
        j->a = n;
        j->b = operand(P);
        n    = j;
    }
    return n;
}

static struct jnode *parse_and(struct parser *P)
{
    return parse_chain(P, "and", JN_AND, parse_not);
}

static struct jnode *parse_or(struct parser *P)
{
    return parse_chain(P, "or", JN_OR, parse_and);
}

static struct jnode *parse_expr(struct parser *P, bool condexpr)
{
    enter(P);
    struct jnode *n = parse_or(P);
    while (condexpr && is_name(cur(P), "if")) {
        struct jnode *c = node(P, JN_COND, cur(P)->line);
        next(P);
        bool soft = P->soft;
        P->soft   = true;
        c->b      = n;
        c->a      = parse_or(P);
        if (is_name(cur(P), "else")) {
            next(P);
            c->c = parse_expr(P, true);
        }
        P->soft = soft;
        n       = c;
    }
    P->nest--;
    return n;
}

/* Expressions separated by commas; a comma makes a tuple. */
static struct jnode *parse_tuple(struct parser *P, bool condexpr)
{
    int line      = cur(P)->line;
    struct nvec v = {0};
    bool comma    = false;
    for (;;) {
        if (v.n) {
            if (!is_op(cur(P), ","))
                break;
            next(P);
            comma          = true;
            struct jtok *t = cur(P);
            if (t->kind == JT_BLOCK_END || t->kind == JT_VAR_END || is_op(t, ")") ||
                is_name(t, "in") || is_op(t, "="))
                break;
        }
        nvec_push(P, &v, parse_expr(P, condexpr));
    }
    if (v.n == 1 && !comma)
        return v.v[0];
    struct jnode *n = node(P, JN_TUPLE, line);
    n->kids         = v.v;
    n->n_kids       = v.n;
    return n;
}

/* ------------------------------------------------------------- statements --- */

static struct jnode *parse_body(struct parser *P, const char *const *ends);

/* Target names of a for or set: name, a, b, or (a, b). */
static void parse_targets(struct parser *P, struct jnode *n)
{
    struct svec v = {0};
    bool paren    = is_op(cur(P), "(");
    if (paren)
        next(P);
    for (;;) {
        svec_push(P, &v, expect_name(P));
        if (!is_op(cur(P), ","))
            break;
        next(P);
        if (!(cur(P)->kind == JT_NAME) || is_name(cur(P), "in"))
            break;
    }
    if (paren)
        expect_op(P, ")");
    n->names   = v.v;
    n->n_names = v.n;
    n->op      = v.n > 1 || paren ? FOR_UNPACK : 0;
}

static const char *const END_IF[]     = {"elif", "else", "endif", NULL};
static const char *const END_FOR[]    = {"else", "endfor", NULL};
static const char *const END_FOR2[]   = {"endfor", NULL};
static const char *const END_MACRO[]  = {"endmacro", NULL};
static const char *const END_SET[]    = {"endset", NULL};
static const char *const END_FILTER[] = {"endfilter", NULL};
static const char *const END_GEN[]    = {"endgeneration", NULL};

/* After "if" or "elif": the test, the body and what follows, through endif. */
static struct jnode *parse_if(struct parser *P, int line)
{
    struct jnode *n = node(P, JN_IF, line);
    bool soft       = P->soft;
    P->soft         = true;
    n->a            = parse_tuple(P, false);
    expect_block_end(P);
    n->b           = parse_body(P, END_IF);
    struct jtok *t = cur(P);
    next(P);
    if (jinja_str_is(t->s, "elif")) {
        n->c    = parse_if(P, t->line);
        P->soft = soft;
        return n;
    }
    if (jinja_str_is(t->s, "else")) {
        expect_block_end(P);
        n->c = parse_body(P, (const char *const[]){"endif", NULL});
        next(P);
    }
    expect_block_end(P);
    P->soft = soft;
    return n;
}

static struct jnode *parse_for(struct parser *P, int line)
{
    struct jnode *n = node(P, JN_FOR, line);
    parse_targets(P, n);
    if (!is_name(cur(P), "in"))
        fail_at(P, cur(P), "expected 'in' in a for loop");
    next(P);
    bool soft = P->soft;
    P->soft   = false;
    n->a      = parse_tuple(P, false);
    if (is_name(cur(P), "if")) {
        next(P);
        n->d = parse_expr(P, true);
    }
    if (is_name(cur(P), "recursive")) {
        n->op |= FOR_RECURSIVE;
        next(P);
    }
    expect_block_end(P);
    P->loops++;
    n->b = parse_body(P, END_FOR);
    P->loops--;
    struct jtok *t = cur(P);
    next(P);
    if (jinja_str_is(t->s, "else")) {
        expect_block_end(P);
        n->c = parse_body(P, END_FOR2);
        next(P);
    }
    expect_block_end(P);
    P->soft = soft;
    return n;
}

/* A filter chain name(args)|name(args) for a filter block or a block set; operand NULL. */
static struct jnode *parse_filter_chain(struct parser *P)
{
    struct jnode *f = parse_filter(P, NULL);
    while (is_op(cur(P), "|")) {
        next(P);
        f = parse_filter(P, f);
    }
    return f;
}

static struct jnode *parse_set(struct parser *P, int line)
{
    struct jnode *n = node(P, JN_SET, line);
    if (cur(P)->kind == JT_NAME && is_op(peek(P, 1), ".")) {
        n->name = expect_name(P);
        next(P);
        n->attr = expect_name(P);
    } else
        parse_targets(P, n);
    if (is_op(cur(P), "=")) {
        next(P);
        n->a = parse_tuple(P, true);
        expect_block_end(P);
        return n;
    }
    if (n->attr.p || n->n_names != 1 || n->op)
        fail_at(P, cur(P), "expected '=' in a set");
    n->kind = JN_SETBLOCK;
    n->name = n->names[0];
    if (is_op(cur(P), "|")) {
        next(P);
        n->a = parse_filter_chain(P);
    }
    expect_block_end(P);
    bool soft = P->soft;
    P->soft   = false;
    n->b      = parse_body(P, END_SET);
    P->soft   = soft;
    next(P);
    expect_block_end(P);
    return n;
}

/* A macro's parameter list, "(a, b=1)", into n's kw_names and kw_vals. */
static void parse_params(struct parser *P, struct jnode *n)
{
    struct svec names = {0};
    struct nvec defs  = {0};
    expect_op(P, "(");
    while (!is_op(cur(P), ")")) {
        if (names.n)
            expect_op(P, ",");
        if (is_op(cur(P), ")"))
            break;
        svec_push(P, &names, expect_name(P));
        struct jnode *d = NULL;
        if (is_op(cur(P), "=")) {
            next(P);
            d = parse_expr(P, true);
        } else if (defs.n && defs.v[defs.n - 1])
            fail_at(P, cur(P), "non-default argument follows default argument");
        nvec_push(P, &defs, d);
    }
    next(P);
    n->kw_names = names.v;
    n->kw_vals  = defs.v;
    n->n_kw     = names.n;
}

/* A macro body (or a call block's) through its end tag; notes the special names it uses. */
static void parse_macro_body(struct parser *P, struct jnode *n, const char *const *ends)
{
    bool soft = P->soft;
    int loops = P->loops, refs = P->refs;
    P->soft  = false;
    P->loops = 0;
    P->refs  = 0;
    n->b     = parse_body(P, ends);
    n->op    = P->refs;
    P->soft  = soft;
    P->loops = loops;
    P->refs  = refs | n->op; /* jinja2 counts names in nested macros too */
    next(P);
    if (cur(P)->kind == JT_NAME)
        next(P); /* {% endmacro name %} */
    expect_block_end(P);
}

static struct jnode *parse_macro(struct parser *P, int line)
{
    struct jnode *n = node(P, JN_MACRO, line);
    n->name         = expect_name(P);
    parse_params(P, n);
    expect_block_end(P);
    parse_macro_body(P, n, END_MACRO);
    return n;
}

static struct jnode *parse_call_block(struct parser *P, int line)
{
    struct jnode *n = node(P, JN_CALLBLOCK, line);
    struct jnode *m = node(P, JN_MACRO, line);
    m->name         = (struct jstr){"caller", 6};
    if (is_op(cur(P), "("))
        parse_params(P, m);
    n->a = parse_expr(P, true);
    if (n->a->kind != JN_CALL)
        fail_at(P, cur(P), "expected call");
    expect_block_end(P);
    parse_macro_body(P, m, (const char *const[]){"endcall", NULL});
    n->c = m;
    return n;
}

/* {% with a = 1, b = x %} ... {% endwith %} */
static struct jnode *parse_with(struct parser *P, int line)
{
    struct jnode *n   = node(P, JN_WITH, line);
    struct svec names = {0};
    struct nvec vals  = {0};
    while (cur(P)->kind != JT_BLOCK_END) {
        if (names.n)
            expect_op(P, ",");
        svec_push(P, &names, expect_name(P));
        expect_op(P, "=");
        nvec_push(P, &vals, parse_expr(P, true));
    }
    expect_block_end(P);
    n->names   = names.v;
    n->n_names = names.n;
    n->kids    = vals.v;
    n->n_kids  = vals.n;
    bool soft  = P->soft;
    P->soft    = false;
    n->b       = parse_body(P, (const char *const[]){"endwith", NULL});
    P->soft    = soft;
    next(P);
    expect_block_end(P);
    return n;
}

/* One {% ... %} statement; cur is the tag name. */
static struct jnode *parse_statement(struct parser *P)
{
    struct jtok *t = cur(P);
    if (t->kind != JT_NAME)
        fail_at(P, t, "tag name expected");
    next(P);
    if (jinja_str_is(t->s, "if"))
        return parse_if(P, t->line);
    if (jinja_str_is(t->s, "for"))
        return parse_for(P, t->line);
    if (jinja_str_is(t->s, "set"))
        return parse_set(P, t->line);
    if (jinja_str_is(t->s, "macro"))
        return parse_macro(P, t->line);
    if (jinja_str_is(t->s, "call"))
        return parse_call_block(P, t->line);
    if (jinja_str_is(t->s, "with"))
        return parse_with(P, t->line);
    if (jinja_str_is(t->s, "break") || jinja_str_is(t->s, "continue")) {
        if (!P->loops)
            fail_at(P, t, "'break' or 'continue' outside a loop");
        expect_block_end(P);
        return node(P, jinja_str_is(t->s, "break") ? JN_BREAK : JN_CONTINUE, t->line);
    }
    if (jinja_str_is(t->s, "filter")) {
        struct jnode *n = node(P, JN_FILTERBLK, t->line);
        n->a            = parse_filter_chain(P);
        expect_block_end(P);
        bool soft = P->soft;
        P->soft   = false;
        n->b      = parse_body(P, END_FILTER);
        P->soft   = soft;
        next(P);
        expect_block_end(P);
        return n;
    }
    if (jinja_str_is(t->s, "include") || jinja_str_is(t->s, "import") ||
        jinja_str_is(t->s, "from") || jinja_str_is(t->s, "extends")) {
        /* parsed loosely: rendering one fails anyway, as jinja2 without a loader does */
        while (cur(P)->kind != JT_BLOCK_END && cur(P)->kind != JT_EOF)
            next(P);
        expect_block_end(P);
        return node(P, JN_NOLOADER, t->line);
    }
    if (jinja_str_is(t->s, "block")) {
        struct jnode *n = node(P, JN_BLOCK, t->line);
        n->name         = expect_name(P);
        while (is_name(cur(P), "scoped") || is_name(cur(P), "required"))
            next(P);
        expect_block_end(P);
        bool soft = P->soft;
        P->soft   = false;
        n->b      = parse_body(P, (const char *const[]){"endblock", NULL});
        P->soft   = soft;
        next(P);
        if (cur(P)->kind == JT_NAME)
            next(P); /* {% endblock name %} */
        expect_block_end(P);
        return n;
    }
    if (jinja_str_is(t->s, "generation")) {
        expect_block_end(P);
        struct jnode *n = parse_body(P, END_GEN);
        next(P);
        expect_block_end(P);
        return n;
    }
    char msg[96];
    snprintf(msg, sizeof msg, "Encountered unknown tag '%.*s'",
             (int)(t->s.len > 40 ? 40 : t->s.len), t->s.p);
    fail_at(P, t, msg);
}

/*
 * Statements up to a {% tag %} whose name is in ends (NULL: the end of the
 * template); cur is left on that name.
 */
static struct jnode *parse_body(struct parser *P, const char *const *ends)
{
    enter(P);
    struct jnode *body = node(P, JN_BODY, cur(P)->line);
    struct nvec v      = {0};
    for (;;) {
        struct jtok *t = cur(P);
        if (t->kind == JT_EOF) {
            if (ends) {
                char msg[96];
                int last = 0;
                while (ends[last + 1])
                    last++;
                snprintf(msg, sizeof msg, "unexpected end of template, expected '%s'", ends[last]);
                fail_at(P, t, msg);
            }
            break;
        }
        if (t->kind == JT_DATA) {
            struct jnode *n = node(P, JN_TEXT, t->line);
            n->val          = jinja_strn(t->s.p, t->s.len);
            nvec_push(P, &v, n);
            next(P);
        } else if (t->kind == JT_VAR_BEGIN) {
            next(P);
            struct jnode *n = node(P, JN_PRINT, t->line);
            n->a            = parse_tuple(P, true);
            if (cur(P)->kind != JT_VAR_END)
                fail_at(P, cur(P), "expected the end of the print statement");
            next(P);
            nvec_push(P, &v, n);
        } else if (t->kind == JT_BLOCK_BEGIN) {
            next(P);
            struct jtok *name = cur(P);
            if (ends && name->kind == JT_NAME) {
                bool end = false;
                for (int i = 0; ends[i]; i++)
                    end |= jinja_str_is(name->s, ends[i]);
                if (end)
                    break;
            }
            nvec_push(P, &v, parse_statement(P));
        } else
            fail_at(P, t, "unexpected token");
    }
    body->kids   = v.v;
    body->n_kids = v.n;
    P->nest--;
    return body;
}

struct jnode *jinja_parse(struct jmem *m, const char *src, size_t len)
{
    struct parser P = {.m = m};
    P.t             = jinja_lex(m, src, len, &P.n);
    struct jnode *n = parse_body(&P, NULL);
    return n;
}
