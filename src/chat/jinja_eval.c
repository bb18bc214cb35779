/*
 * jinja_eval.c: walks the syntax tree and renders, with jinja2's scoping:
 * a for loop's body gets a fresh scope on every iteration (what it sets
 * stays in that iteration), if blocks share their parent's scope, a macro
 * call's scope hangs off the scope the macro was defined in (names resolve
 * there at call time), and the render's variables sit below the top-level
 * scope. Attribute and item lookup follow the sandbox's getattr/getitem;
 * undefined values carry the message their misuse raises.
 *
 * Every node evaluated counts a step; macro nesting and the evaluator's
 * own recursion are bounded, so no template can exhaust time or the C
 * stack.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat/jinja_int.h"

/* Evaluator recursion bounds: levels, and bytes of the calling thread's C stack (measured from
   jinja_render's frame, so frame sizes, optimisation and sanitizers do not matter). */
#define MAX_C_DEPTH 5000
#define MAX_STACK   (1024 * 1024)

enum flow { FLOW_NEXT, FLOW_BREAK, FLOW_CONTINUE };

void jinja_enter(struct jctx *c)
{
    if (++c->steps > c->o.max_steps)
        jinja_failc(c, HEARTH_ERANGE, "the render passed its %lld steps",
                    (long long)c->o.max_steps);
    const char *here = __builtin_frame_address(0);
    size_t used =
        here < c->stack_base ? (size_t)(c->stack_base - here) : (size_t)(here - c->stack_base);
    if (++c->c_depth > MAX_C_DEPTH || used > MAX_STACK)
        jinja_failc(c, HEARTH_ERANGE, "the template nests too deep to evaluate");
}

void jinja_work(struct jctx *c, size_t elements, size_t bytes)
{
    c->steps += (int64_t)(elements + bytes / 8);
    if (c->steps > c->o.max_steps)
        jinja_failc(c, HEARTH_ERANGE, "the render passed its %lld steps",
                    (long long)c->o.max_steps);
}

void jinja_failc(struct jctx *c, enum hearth_status st, const char *fmt, ...)
{
    char msg[HEARTH_ERR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    jinja_fail(&c->mem, st, "%s", msg);
}

static const char *obj_repr(struct jv v);

void jinja_undef_fail(struct jctx *c, struct jv v)
{
    if (v.form == 1)
        jinja_failc(c, HEARTH_EINVAL, "'%.*s' is undefined", (int)v.u.s.len, v.u.s.p);
    if (v.form == 2) {
        struct jv o = {.kind = (enum jv_kind)v.obj_kind};
        if (o.kind == JV_NONE)
            jinja_failc(c, HEARTH_EINVAL, "'None' has no attribute '%.*s'", (int)v.u.s.len,
                        v.u.s.p);
        jinja_failc(c, HEARTH_EINVAL, "'%s' has no attribute '%.*s'", obj_repr(o), (int)v.u.s.len,
                    v.u.s.p);
    }
    if (v.u.s.p)
        jinja_failc(c, HEARTH_EINVAL, "%.*s", (int)v.u.s.len, v.u.s.p);
    jinja_failc(c, HEARTH_EINVAL, "a value is undefined");
}

static struct jv undef_fmt(struct jctx *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static struct jv undef_fmt(struct jctx *c, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t n = k < 0 ? 0 : (size_t)k < sizeof msg ? (size_t)k : sizeof msg - 1;
    return jinja_undef(jinja_strndup(&c->mem, msg, n));
}

/* jinja2's object_type_repr, for undefined messages. */
static const char *obj_repr(struct jv v)
{
    switch (v.kind) {
    case JV_NONE:
        return "None";
    case JV_DICT:
        return "dict object";
    case JV_LIST:
        return "list object";
    case JV_TUPLE:
        return "tuple object";
    case JV_STR:
        return "str object";
    case JV_INT:
        return "int object";
    case JV_FLOAT:
        return "float object";
    case JV_BOOL:
        return "bool object";
    case JV_NS:
        return "jinja2.utils.Namespace object";
    case JV_LOOP:
        return "jinja2.runtime.LoopContext object";
    default:
        return "object";
    }
}

static struct jv no_elem(struct jctx *c, struct jv obj, struct jstr key)
{
    if (obj.kind == JV_NONE)
        return undef_fmt(c, "None has no element %.*s", (int)key.len, key.p);
    return undef_fmt(c, "'%s' has no element %.*s", obj_repr(obj), (int)key.len, key.p);
}

static struct jv no_attr(struct jctx *c, struct jv obj, struct jstr name)
{
    return (struct jv){.kind = JV_UNDEF, .form = 2, .obj_kind = (uint8_t)obj.kind, .u.s = name};
}

/* ---------------------------------------------------------------- scopes --- */

static struct jscope *scope_new(struct jctx *c, struct jscope *parent)
{
    struct jscope *s = jinja_alloc(&c->mem, sizeof *s);
    s->parent        = parent;
    return s;
}

static void scope_set(struct jctx *c, struct jscope *s, struct jstr name, struct jv v)
{
    jinja_dict_set(c, &s->vars, jinja_strn(name.p, name.len), v);
}

static struct jv lookup(struct jctx *c, struct jscope *s, struct jstr name)
{
    for (; s; s = s->parent) {
        struct jv *v = jinja_dict_gets(&s->vars, name.p, name.len);
        if (v)
            return *v;
    }
    int g = jinja_global_find(name);
    if (g >= 0)
        return (struct jv){.kind = JV_FUNC, .u.i = g};
    return (struct jv){.kind = JV_UNDEF, .form = 1, .u.s = name};
}

/* ---------------------------------------------------------------- lookup --- */

static struct jv loop_item(const struct jloop *lp, size_t i)
{
    return lp->items ? lp->items->v[i] : jinja_int(lp->start + (int64_t)i * lp->step);
}

static struct jv loop_attr(struct jctx *c, struct jv lv, struct jstr name)
{
    const struct jloop *lp = lv.u.lp;
    int64_t i = (int64_t)lp->i, n = (int64_t)lp->n;
    if (jinja_str_is(name, "index"))
        return jinja_int(i + 1);
    if (jinja_str_is(name, "index0"))
        return jinja_int(i);
    if (jinja_str_is(name, "revindex"))
        return jinja_int(n - i);
    if (jinja_str_is(name, "revindex0"))
        return jinja_int(n - i - 1);
    if (jinja_str_is(name, "first"))
        return jinja_bool(i == 0);
    if (jinja_str_is(name, "last"))
        return jinja_bool(i == n - 1);
    if (jinja_str_is(name, "length"))
        return jinja_int(n);
    if (jinja_str_is(name, "depth"))
        return jinja_int(lp->depth);
    if (jinja_str_is(name, "depth0"))
        return jinja_int(lp->depth - 1);
    if (jinja_str_is(name, "previtem"))
        return i > 0 ? loop_item(lp, (size_t)i - 1) : undef_fmt(c, "there is no previous item");
    if (jinja_str_is(name, "nextitem"))
        return i + 1 < n ? loop_item(lp, (size_t)i + 1) : undef_fmt(c, "there is no next item");
    if (jinja_str_is(name, "cycle") || jinja_str_is(name, "changed")) {
        struct jmethod *me = jinja_alloc(&c->mem, sizeof *me);
        me->self           = lv;
        me->name           = name.p[1] == 'y' ? "cycle" : "changed";
        return (struct jv){.kind = JV_METHOD, .u.me = me};
    }
    return no_attr(c, lv, name);
}

/* The method of obj by name as a bound value, an unsafe undefined, or kind JV_NONE if none. */
static bool method_value(struct jctx *c, struct jv obj, struct jstr name, struct jv *out)
{
    bool unsafe     = false;
    const char *mth = jinja_method_find(obj, name, &unsafe);
    if (!mth)
        return false;
    if (unsafe) {
        *out = undef_fmt(c, "access to attribute '%.*s' of '%s' object is unsafe.", (int)name.len,
                         name.p, jinja_type_name(obj));
        return true;
    }
    struct jmethod *me = jinja_alloc(&c->mem, sizeof *me);
    me->self           = obj;
    me->name           = mth;
    *out               = (struct jv){.kind = JV_METHOD, .u.me = me};
    return true;
}

struct jv jinja_getattr(struct jctx *c, struct jv obj, struct jstr name)
{
    struct jv m;
    switch (obj.kind) {
    case JV_UNDEF:
        jinja_undef_fail(c, obj);
    case JV_LOOP:
        return loop_attr(c, obj, name);
    case JV_NS: {
        struct jv *v = jinja_dict_gets(obj.u.d, name.p, name.len);
        return v ? *v : no_attr(c, obj, name);
    }
    case JV_DICT: {
        if (method_value(c, obj, name, &m))
            return m;
        struct jv *v = jinja_dict_gets(obj.u.d, name.p, name.len);
        return v ? *v : no_attr(c, obj, name);
    }
    case JV_TUPLE:
        if (obj.form == 1 && obj.u.l->n == 2 &&
            jinja_str_is(name, "grouper")) /* groupby's tuples */
            return obj.u.l->v[0];
        if (obj.form == 1 && obj.u.l->n == 2 && jinja_str_is(name, "list"))
            return obj.u.l->v[1];
        /* fall through */
    default:
        if (method_value(c, obj, name, &m))
            return m;
        return no_attr(c, obj, name);
    }
}

static bool as_index(struct jv k, int64_t *i)
{
    if (k.kind == JV_INT)
        *i = k.u.i;
    else if (k.kind == JV_BOOL)
        *i = k.u.b;
    else
        return false;
    return true;
}

struct jv jinja_getitem(struct jctx *c, struct jv obj, struct jv key)
{
    int64_t i;
    switch (obj.kind) {
    case JV_UNDEF:
        jinja_undef_fail(c, obj);
    case JV_DICT: {
        struct jv *v = jinja_dict_get(obj.u.d, key);
        if (v)
            return *v;
        break;
    }
    case JV_LIST:
    case JV_TUPLE:
        if (as_index(key, &i)) {
            int64_t n = (int64_t)obj.u.l->n;
            if (i < 0)
                i += n;
            if (i >= 0 && i < n)
                return obj.u.l->v[i];
            return no_elem(c, obj, jinja_to_repr(c, key));
        }
        break;
    case JV_STR:
        if (as_index(key, &i)) {
            jinja_work(c, 0, obj.u.s.len);
            int64_t n = (int64_t)jinja_utf8_count(obj.u.s);
            if (i < 0)
                i += n;
            if (i >= 0 && i < n) {
                size_t a = jinja_utf8_offset(obj.u.s, (size_t)i);
                size_t b = jinja_utf8_offset(obj.u.s, (size_t)i + 1);
                return jinja_strn(obj.u.s.p + a, b - a);
            }
            return no_elem(c, obj, jinja_to_repr(c, key));
        }
        break;
    default:
        break;
    }
    if (key.kind == JV_STR) {
        return jinja_getattr(c, obj, key.u.s); /* obj[name] failed: getattr, as the sandbox */
    }
    return no_elem(c, obj, jinja_to_repr(c, key));
}

/* Python's slice.indices and the slice itself, for lists, tuples and strings. */
static struct jv do_slice(struct jctx *c, struct jv obj, struct jv a, struct jv b, struct jv s)
{
    if (obj.kind == JV_UNDEF)
        jinja_undef_fail(c, obj);
    int64_t step = 1, start, stop, n;
    if (s.kind != JV_NONE && !as_index(s, &step))
        jinja_failc(c, HEARTH_EINVAL, "slice indices must be integers or None");
    if (step == 0)
        jinja_failc(c, HEARTH_EINVAL, "slice step cannot be zero");
    if (obj.kind == JV_STR) {
        n = (int64_t)jinja_utf8_count(obj.u.s);
        jinja_work(c, 0, obj.u.s.len);
    } else if (jinja_is_seq(obj))
        n = (int64_t)obj.u.l->n;
    else
        jinja_failc(c, HEARTH_EINVAL, "'%s' object is not subscriptable", jinja_type_name(obj));
    int64_t lo = step < 0 ? -1 : 0, hi = step < 0 ? n - 1 : n;
    if (a.kind == JV_NONE)
        start = step < 0 ? hi : lo;
    else {
        if (!as_index(a, &start))
            jinja_failc(c, HEARTH_EINVAL, "slice indices must be integers or None");
        start = start < 0 ? (start + n < lo ? lo : start + n) : (start > hi ? hi : start);
    }
    if (b.kind == JV_NONE)
        stop = step < 0 ? lo : hi;
    else {
        if (!as_index(b, &stop))
            jinja_failc(c, HEARTH_EINVAL, "slice indices must be integers or None");
        stop = stop < 0 ? (stop + n < lo ? lo : stop + n) : (stop > hi ? hi : stop);
    }
    if (obj.kind == JV_STR) {
        if (step == 1) {
            if (stop <= start)
                return jinja_strn("", 0);
            size_t x = jinja_utf8_offset(obj.u.s, (size_t)start),
                   y = jinja_utf8_offset(obj.u.s, (size_t)stop);
            return jinja_strn(obj.u.s.p + x, y - x);
        }
        /* offsets of every code point, then pick */
        size_t *off = jinja_alloc(&c->mem, ((size_t)n + 1) * sizeof *off);
        size_t p    = 0;
        for (int64_t k = 0; k < n; k++) {
            off[k] = p;
            uint32_t cp;
            p += jinja_utf8_decode(obj.u.s.p + p, obj.u.s.len - p, &cp);
        }
        off[n]        = p;
        struct jbuf o = {0};
        for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step)
            jinja_buf_put(c, &o, obj.u.s.p + off[k], off[k + 1] - off[k]);
        return jinja_strn(o.p ? o.p : "", o.len);
    }
    struct jv out = jinja_list_new(c, 0);
    for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step)
        jinja_list_push(c, out.u.l, obj.u.l->v[k]);
    out.kind = obj.kind;
    return out;
}

/* ------------------------------------------------------------ arithmetic --- */

static _Noreturn void bad_operands(struct jctx *c, const char *op, struct jv a, struct jv b)
{
    jinja_failc(c, HEARTH_EINVAL, "unsupported operand type(s) for %s: '%s' and '%s'", op,
                jinja_type_name(a), jinja_type_name(b));
}

static struct jv repeat(struct jctx *c, struct jv seq, int64_t times)
{
    if (times < 0)
        times = 0;
    /* an empty sequence repeated stays empty: no loop, whatever the count (a fuzzer's
     * () * 10**18 spun for minutes) */
    if ((seq.kind == JV_STR && !seq.u.s.len) || (seq.kind != JV_STR && !seq.u.l->n))
        times = 0;
    if (seq.kind == JV_STR) {
        if (seq.u.s.len && (uint64_t)times > c->o.max_output / seq.u.s.len)
            jinja_failc(c, HEARTH_ERANGE, "a repeated string would pass %zu bytes",
                        c->o.max_output);
        struct jbuf b = {0};
        for (int64_t i = 0; i < times; i++)
            jinja_buf_put(c, &b, seq.u.s.p, seq.u.s.len);
        return jinja_strn(b.p ? b.p : "", b.len);
    }
    if (seq.u.l->n && (uint64_t)times > c->o.max_output / seq.u.l->n)
        jinja_failc(c, HEARTH_ERANGE, "a repeated list would be too long");
    struct jv out = jinja_list_new(c, 0);
    for (int64_t i = 0; i < times; i++)
        for (size_t k = 0; k < seq.u.l->n; k++)
            jinja_list_push(c, out.u.l, seq.u.l->v[k]);
    out.kind = seq.kind;
    return out;
}

struct jv jinja_binop(struct jctx *c, int op, struct jv a, struct jv b)
{
    if (a.kind == JV_UNDEF)
        jinja_undef_fail(c, a);
    if (op == '%' && a.kind == JV_STR) /* str % Undefined formats it (it looks like a mapping) */
        return jinja_percent(c, a.u.s, b);
    if (b.kind == JV_UNDEF)
        jinja_undef_fail(c, b);
    char ops[3] = {(char)op, 0, 0};
    if (op == 'F')
        ops[0] = ops[1] = '/';
    if (op == 'P')
        ops[0] = ops[1] = '*';
    if (jinja_is_num(a) && jinja_is_num(b)) {
        bool fl   = a.kind == JV_FLOAT || b.kind == JV_FLOAT;
        int64_t x = jinja_num_i(a), y = jinja_num_i(b), r;
        double fx = jinja_num_f(a), fy = jinja_num_f(b);
        switch (op) {
        case '+':
            if (fl)
                return jinja_float(fx + fy);
            if (__builtin_add_overflow(x, y, &r))
                break;
            return jinja_int(r);
        case '-':
            if (fl)
                return jinja_float(fx - fy);
            if (__builtin_sub_overflow(x, y, &r))
                break;
            return jinja_int(r);
        case '*':
            if (fl)
                return jinja_float(fx * fy);
            if (__builtin_mul_overflow(x, y, &r))
                break;
            return jinja_int(r);
        case '/':
            if (fy == 0)
                jinja_failc(c, HEARTH_EINVAL, "division by zero");
            return jinja_float(fx / fy);
        case 'F':
        case '%':
            if (fl ? fy == 0 : y == 0)
                jinja_failc(c, HEARTH_EINVAL, "integer division or modulo by zero");
            if (fl) { /* CPython's float divmod, for the same signs of zero and roundings */
                double m = fmod(fx, fy), div = (fx - m) / fy, fd;
                if (m != 0) {
                    if ((fy < 0) != (m < 0)) {
                        m += fy;
                        div -= 1.0;
                    }
                } else
                    m = copysign(0.0, fy);
                if (div != 0) {
                    fd = floor(div);
                    if (div - fd > 0.5)
                        fd += 1.0;
                } else
                    fd = copysign(0.0, fx / fy);
                return op == '%' ? jinja_float(m) : jinja_float(fd);
            }
            if (x == INT64_MIN && y == -1)
                break;
            {
                int64_t q = x / y, m = x % y;
                if (m != 0 && ((m < 0) != (y < 0))) {
                    q--;
                    m += y;
                }
                return op == '%' ? jinja_int(m) : jinja_int(q);
            }
        case 'P':
            if (!fl && y >= 0) {
                int64_t acc = 1;
                for (int64_t k = 0; k < y; k++) {
                    if (__builtin_mul_overflow(acc, x, &acc))
                        jinja_failc(c, HEARTH_ERANGE, "an integer grew past 64 bits");
                    if (acc == 0 || acc == 1)
                        break;
                }
                return jinja_int(acc);
            }
            if (fx == 0 && fy < 0)
                jinja_failc(c, HEARTH_EINVAL, "0.0 cannot be raised to a negative power");
            if (fx < 0 && fy != floor(fy)) /* Python answers with a complex number */
                jinja_failc(c, HEARTH_EUNSUPPORTED, "complex numbers are not supported");
            return jinja_float(pow(fx, fy));
        }
        jinja_failc(c, HEARTH_ERANGE, "an integer grew past 64 bits");
    }
    if (op == '+' && a.kind == JV_STR && b.kind == JV_STR && a.safe != b.safe) {
        /* Markup + str escapes the str, and the sum is Markup */
        struct jv x = a.safe ? a : jinja_escape(c, a.u.s);
        struct jv y = b.safe ? b : jinja_escape(c, b.u.s);
        x.safe = y.safe = false;
        struct jv r     = jinja_binop(c, '+', x, y);
        r.safe          = true;
        return r;
    }
    if (op == '+' && a.kind == JV_STR && b.kind == JV_STR) {
        if (a.u.s.len + b.u.s.len > c->o.max_output)
            jinja_failc(c, HEARTH_ERANGE, "a string would pass %zu bytes", c->o.max_output);
        char *p = jinja_alloc(&c->mem, a.u.s.len + b.u.s.len + 1);
        memcpy(p, a.u.s.p, a.u.s.len);
        memcpy(p + a.u.s.len, b.u.s.p, b.u.s.len);
        struct jv r = jinja_strn(p, a.u.s.len + b.u.s.len);
        r.safe      = a.safe && b.safe;
        return r;
    }
    if (op == '+' && jinja_is_seq(a) && a.kind == b.kind && a.form != JV_FORM_RANGE &&
        b.form != JV_FORM_RANGE) {
        struct jv out = jinja_list_new(c, a.u.l->n + b.u.l->n);
        for (size_t i = 0; i < a.u.l->n; i++)
            jinja_list_push(c, out.u.l, a.u.l->v[i]);
        for (size_t i = 0; i < b.u.l->n; i++)
            jinja_list_push(c, out.u.l, b.u.l->v[i]);
        out.kind = a.kind;
        return out;
    }
    bool rep_a = a.kind == JV_STR || (jinja_is_seq(a) && a.form != JV_FORM_RANGE);
    bool rep_b = b.kind == JV_STR || (jinja_is_seq(b) && b.form != JV_FORM_RANGE);
    if (op == '*' && rep_a && (b.kind == JV_INT || b.kind == JV_BOOL))
        return repeat(c, a, jinja_num_i(b));
    if (op == '*' && rep_b && (a.kind == JV_INT || a.kind == JV_BOOL))
        return repeat(c, b, jinja_num_i(a));
    if (op == '+' && (a.kind == JV_STR || (jinja_is_seq(a) && a.form != JV_FORM_RANGE)))
        jinja_failc(c, HEARTH_EINVAL, "can only concatenate %s (not \"%s\") to %s",
                    jinja_type_name(a), jinja_type_name(b), jinja_type_name(a));
    if (op == '%' && a.kind == JV_STR)
        return jinja_percent(c, a.u.s, b);
    bad_operands(c, ops, a, b);
}

static struct jv concat(struct jctx *c, struct jv a, struct jv b)
{
    struct jstr x = jinja_to_str(c, a), y = jinja_to_str(c, b);
    if (x.len + y.len > c->o.max_output)
        jinja_failc(c, HEARTH_ERANGE, "a string would pass %zu bytes", c->o.max_output);
    char *p = jinja_alloc(&c->mem, x.len + y.len + 1);
    memcpy(p, x.p, x.len);
    memcpy(p + x.len, y.p, y.len);
    return jinja_strn(p, x.len + y.len);
}

static bool contains(struct jctx *c, struct jv hay, struct jv needle)
{
    switch (hay.kind) {
    case JV_UNDEF:
        return false; /* Undefined iterates as empty */
    case JV_STR:
        if (needle.kind != JV_STR)
            jinja_failc(c, HEARTH_EINVAL, "'in <string>' requires string as left operand, not %s",
                        jinja_type_name(needle));
        if (!needle.u.s.len)
            return true;
        jinja_work(c, 0, hay.u.s.len);
        return memmem(hay.u.s.p, hay.u.s.len, needle.u.s.p, needle.u.s.len) != NULL;
    case JV_LIST:
    case JV_TUPLE:
    case JV_GEN:
        jinja_work(c, hay.u.l->n, 0);
        for (size_t i = 0; i < hay.u.l->n; i++)
            if (jinja_eq(hay.u.l->v[i], needle))
                return true;
        return false;
    case JV_DICT:
        if (!jinja_hashable(needle))
            jinja_failc(c, HEARTH_EINVAL, "unhashable type: '%s'", jinja_type_name(needle));
        return jinja_dict_get(hay.u.d, needle) != NULL;
    default:
        jinja_failc(c, HEARTH_EINVAL, "argument of type '%s' is not iterable",
                    jinja_type_name(hay));
    }
}

static bool compare(struct jctx *c, int op, struct jv a, struct jv b)
{
    if (op == '=' || op == '!') /* equal containers are walked to the end */
        jinja_work(c,
                   jinja_is_seq(a)     ? a.u.l->n
                   : a.kind == JV_DICT ? a.u.d->n
                                       : 0,
                   a.kind == JV_STR ? a.u.s.len : 0);
    switch (op) {
    case '=':
        return jinja_eq(a, b);
    case '!':
        return !jinja_eq(a, b);
    case '<':
        return jinja_cmp(c, a, b) < 0;
    case '>':
        return jinja_cmp(c, a, b) > 0;
    case 'l':
        return jinja_cmp(c, a, b) <= 0;
    case 'g':
        return jinja_cmp(c, a, b) >= 0;
    case 'i':
        return contains(c, b, a);
    default:
        return !contains(c, b, a);
    }
}

/* ------------------------------------------------------------ evaluation --- */

static struct jv eval(struct jctx *c, const struct jnode *n, struct jscope *s);
static enum flow exec(struct jctx *c, const struct jnode *n, struct jscope *s);

/* Room for the arguments of most calls on the C stack, so that calls in long loops cost no
   arena memory; callees only read them during the call. */
#define ARGS_INLINE 6

struct argbuf {
    struct jv pos[ARGS_INLINE], kw[ARGS_INLINE];
};

static void eval_args(struct jctx *c, const struct jnode *n, struct jscope *s, struct jargs *a,
                      struct argbuf *buf)
{
    a->n_pos = n->n_kids;
    a->pos   = n->n_kids <= ARGS_INLINE ? buf->pos
                                        : jinja_alloc(&c->mem, (size_t)n->n_kids * sizeof *a->pos);
    for (int i = 0; i < n->n_kids; i++)
        a->pos[i] = eval(c, n->kids[i], s);
    a->n_kw     = n->n_kw;
    a->kw_names = n->kw_names;
    a->kw =
        n->n_kw <= ARGS_INLINE ? buf->kw : jinja_alloc(&c->mem, (size_t)n->n_kw * sizeof *a->kw);
    for (int i = 0; i < n->n_kw; i++)
        a->kw[i] = eval(c, n->kw_vals[i], s);
}

/* Runs body into a fresh buffer; the text it wrote. */
static struct jstr capture(struct jctx *c, const struct jnode *body, struct jscope *s)
{
    struct jbuf buf    = {0};
    struct jbuf *saved = c->out;
    c->out             = &buf;
    exec(c, body, s);
    c->out = saved;
    return jinja_buf_str(&buf);
}

static bool same_name(struct jstr a, struct jstr b)
{
    return a.len == b.len && !memcmp(a.p, b.p, a.len);
}

/*
 * Binds a call's arguments as jinja2's Macro.__call__ does: positional
 * first, then keywords by name, then defaults (evaluated in the call's
 * scope, so they may use earlier parameters). caller, kwargs and varargs
 * take the extras only when the body names them; otherwise extras fail.
 */
static struct jv call_macro(struct jctx *c, struct jmacro *m, struct jargs *a)
{
    const struct jnode *def = m->def;
    if (c->depth >= c->o.max_depth)
        jinja_failc(c, HEARTH_ERANGE, "macro calls nest deeper than %d", c->o.max_depth);
    if (a->n_pos > def->n_kw && !(def->op & MACRO_VARARGS))
        jinja_failc(c, HEARTH_EINVAL, "macro '%.*s' takes not more than %d argument(s)",
                    (int)def->name.len, def->name.p, def->n_kw);
    struct jscope *sc = scope_new(c, m->scope);
    struct jv kwargs  = jinja_dict_new(c);
    struct jv caller  = jinja_undef("No caller defined");
    for (int k = 0; k < a->n_kw; k++) {
        int found = -1;
        for (int i = a->n_pos; i < def->n_kw; i++)
            if (same_name(def->kw_names[i], a->kw_names[k]))
                found = i;
        if (found >= 0)
            continue;
        if ((def->op & MACRO_CALLER) && jinja_str_is(a->kw_names[k], "caller"))
            caller = a->kw[k];
        else if (def->op & MACRO_KWARGS)
            jinja_dict_set(c, kwargs.u.d, jinja_strn(a->kw_names[k].p, a->kw_names[k].len),
                           a->kw[k]);
        else if (jinja_str_is(a->kw_names[k], "caller"))
            jinja_failc(c, HEARTH_EINVAL,
                        "macro '%.*s' was invoked with two values for the "
                        "special caller argument. This is most likely a bug.",
                        (int)def->name.len, def->name.p);
        else
            jinja_failc(c, HEARTH_EINVAL, "macro '%.*s' takes no keyword argument '%.*s'",
                        (int)def->name.len, def->name.p, (int)a->kw_names[k].len, a->kw_names[k].p);
    }
    for (int i = 0; i < def->n_kw; i++) {
        struct jv v;
        bool have = false;
        if (i < a->n_pos) {
            v    = a->pos[i];
            have = true;
        }
        for (int k = 0; !have && k < a->n_kw; k++)
            if (same_name(def->kw_names[i], a->kw_names[k])) {
                v    = a->kw[k];
                have = true;
            }
        if (!have)
            v = def->kw_vals[i] ? eval(c, def->kw_vals[i], sc)
                                : undef_fmt(c, "parameter '%.*s' was not provided",
                                            (int)def->kw_names[i].len, def->kw_names[i].p);
        scope_set(c, sc, def->kw_names[i], v);
    }
    if (def->op & MACRO_CALLER)
        scope_set(c, sc, (struct jstr){"caller", 6}, caller);
    if (def->op & MACRO_KWARGS)
        scope_set(c, sc, (struct jstr){"kwargs", 6}, kwargs);
    if (def->op & MACRO_VARARGS) {
        struct jv rest = jinja_list_new(c, 0);
        for (int i = def->n_kw; i < a->n_pos; i++)
            jinja_list_push(c, rest.u.l, a->pos[i]);
        rest.kind = JV_TUPLE;
        scope_set(c, sc, (struct jstr){"varargs", 7}, rest);
    }
    c->depth++;
    struct jstr out = capture(c, def->b, sc);
    c->depth--;
    return jinja_strn(out.p, out.len);
}

static struct jv call_loop(struct jctx *c, struct jloop *lp, struct jargs *a);

struct jv jinja_call(struct jctx *c, struct jv fn, struct jargs *a)
{
    switch (fn.kind) {
    case JV_MACRO:
        return call_macro(c, fn.u.m, a);
    case JV_FUNC:
        return jinja_global_call(c, (int)fn.u.i, a);
    case JV_METHOD:
        return jinja_method_call(c, fn.u.me->self, fn.u.me->name, a);
    case JV_LOOP:
        return call_loop(c, fn.u.lp, a);
    case JV_UNDEF:
        jinja_undef_fail(c, fn);
    default:
        jinja_failc(c, HEARTH_EINVAL, "'%s' object is not callable", jinja_type_name(fn));
    }
}

static struct jv apply_filters(struct jctx *c, const struct jnode *f, struct jv v, struct jscope *s)
{
    struct jv in = f->a ? apply_filters(c, f->a, v, s) : v;
    struct jargs a;
    struct argbuf ab;
    eval_args(c, f, s, &a, &ab);
    return jinja_filter(c, f->name, in, &a);
}

static struct jv eval_inner(struct jctx *c, const struct jnode *n, struct jscope *s)
{
    switch (n->kind) {
    case JN_CONST:
        return n->val;
    case JN_NAME:
        return lookup(c, s, n->name);
    case JN_LIST:
    case JN_TUPLE: {
        struct jv l = jinja_list_new(c, (size_t)n->n_kids);
        for (int i = 0; i < n->n_kids; i++)
            jinja_list_push(c, l.u.l, eval(c, n->kids[i], s));
        l.kind = n->kind == JN_LIST ? JV_LIST : JV_TUPLE;
        return l;
    }
    case JN_DICT: {
        struct jv d = jinja_dict_new(c);
        for (int i = 0; i + 1 < n->n_kids; i += 2) {
            struct jv k = eval(c, n->kids[i], s);
            if (!jinja_hashable(k))
                jinja_failc(c, HEARTH_EINVAL, "unhashable type: '%s'", jinja_type_name(k));
            jinja_dict_set(c, d.u.d, k, eval(c, n->kids[i + 1], s));
        }
        return d;
    }
    case JN_GETATTR:
        return jinja_getattr(c, eval(c, n->a, s), n->name);
    case JN_GETITEM: {
        struct jv obj = eval(c, n->a, s);
        return jinja_getitem(c, obj, eval(c, n->b, s));
    }
    case JN_SLICE: {
        struct jv obj = eval(c, n->a, s);
        struct jv a   = n->b ? eval(c, n->b, s) : jinja_none();
        struct jv b   = n->c ? eval(c, n->c, s) : jinja_none();
        struct jv st  = n->d ? eval(c, n->d, s) : jinja_none();
        return do_slice(c, obj, a, b, st);
    }
    case JN_CALL: {
        struct jv fn = eval(c, n->a, s);
        struct jargs a;
        struct argbuf ab;
        eval_args(c, n, s, &a, &ab);
        return jinja_call(c, fn, &a);
    }
    case JN_FILTER: {
        struct jv v = eval(c, n->a, s);
        struct jargs a;
        struct argbuf ab;
        eval_args(c, n, s, &a, &ab);
        return jinja_filter(c, n->name, v, &a);
    }
    case JN_TEST: {
        struct jv v = eval(c, n->a, s);
        struct jargs a;
        struct argbuf ab;
        eval_args(c, n, s, &a, &ab);
        bool r = jinja_test(c, n->name, v, &a);
        return jinja_bool(n->op ? !r : r);
    }
    case JN_UNARY: {
        struct jv v = eval(c, n->a, s);
        if (n->op == '!')
            return jinja_bool(!jinja_truthy(v));
        if (v.kind == JV_UNDEF)
            jinja_undef_fail(c, v);
        if (!jinja_is_num(v))
            jinja_failc(c, HEARTH_EINVAL, "bad operand type for unary %c: '%s'", n->op,
                        jinja_type_name(v));
        if (n->op == '+')
            return v.kind == JV_BOOL ? jinja_int(v.u.b) : v;
        if (v.kind == JV_FLOAT)
            return jinja_float(-v.u.f);
        if (jinja_num_i(v) == INT64_MIN)
            jinja_failc(c, HEARTH_ERANGE, "an integer grew past 64 bits");
        return jinja_int(-jinja_num_i(v));
    }
    case JN_BINOP: {
        struct jv a = eval(c, n->a, s);
        struct jv b = eval(c, n->b, s);
        if (n->op == '~')
            return concat(c, a, b);
        return jinja_binop(c, n->op, a, b);
    }
    case JN_CMP: {
        struct jv left = eval(c, n->a, s);
        for (int i = 0; i < n->n_kids; i++) {
            struct jv right = eval(c, n->kids[i], s);
            if (!compare(c, n->ops[i], left, right))
                return jinja_bool(false);
            left = right;
        }
        return jinja_bool(true);
    }
    case JN_AND: {
        struct jv a = eval(c, n->a, s);
        return jinja_truthy(a) ? eval(c, n->b, s) : a;
    }
    case JN_OR: {
        struct jv a = eval(c, n->a, s);
        return jinja_truthy(a) ? a : eval(c, n->b, s);
    }
    case JN_COND:
        if (jinja_truthy(eval(c, n->a, s)))
            return eval(c, n->b, s);
        if (n->c)
            return eval(c, n->c, s);
        return undef_fmt(c,
                         "the inline if-expression on line %d evaluated to false and no else "
                         "section was defined.",
                         n->line);
    default:
        jinja_failc(c, HEARTH_EINVAL, "line %d: a statement where an expression belongs", n->line);
    }
}

static struct jv eval(struct jctx *c, const struct jnode *n, struct jscope *s)
{
    jinja_enter(c);
    struct jv v = eval_inner(c, n, s);
    jinja_leave(c);
    return v;
}

/* ------------------------------------------------------------ statements --- */

static void assign(struct jctx *c, const struct jnode *n, struct jscope *s, struct jv v)
{
    if (!(n->op & FOR_UNPACK)) {
        scope_set(c, s, n->names[0], v);
        return;
    }
    struct jlist *l = jinja_iter(c, v);
    if (l->n != (size_t)n->n_names)
        jinja_failc(c, HEARTH_EINVAL, "line %d: %s values to unpack (expected %d, got %zu)",
                    n->line, l->n > (size_t)n->n_names ? "too many" : "not enough", n->n_names,
                    l->n);
    for (int i = 0; i < n->n_names; i++)
        scope_set(c, s, n->names[i], l->v[i]);
}

/* For "for x in range(...)": the loop's bounds without building the list; false otherwise. */
static bool lazy_range(struct jctx *c, const struct jnode *n, struct jscope *s, struct jloop *lp)
{
    const struct jnode *call = n->a;
    if (n->d || call->kind != JN_CALL || call->a->kind != JN_NAME || call->n_kw ||
        !jinja_str_is(call->a->name, "range"))
        return false;
    struct jv fn = lookup(c, s, call->a->name);
    if (fn.kind != JV_FUNC || fn.u.i != jinja_global_find(call->a->name))
        return false;
    struct jargs a;
    struct argbuf ab;
    eval_args(c, call, s, &a, &ab);
    int64_t stop;
    lp->n = (size_t)jinja_range(c, &a, &lp->start, &stop, &lp->step);
    return true;
}

/*
 * Runs the for statement n in scope s over it (a value), or over n's own
 * iterable when it is NULL; depth is loop.depth, above 1 when a recursive
 * loop calls loop(x).
 */
static enum flow run_for(struct jctx *c, const struct jnode *n, struct jscope *s,
                         const struct jv *it, int depth)
{
    struct jloop *lp = jinja_alloc(&c->mem, sizeof *lp);
    lp->depth        = depth;
    lp->last_changed = jinja_undef(NULL);
    lp->node         = n;
    lp->scope        = s;
    if (it || !lazy_range(c, n, s, lp)) {
        struct jlist *items = jinja_iter(c, it ? *it : eval(c, n->a, s));
        if (n->d) { /* for x in y if cond: the condition sees the loop variables, not loop */
            struct jv kept    = jinja_list_new(c, 0);
            struct jscope *fs = NULL;
            for (size_t i = 0; i < items->n; i++) {
                jinja_enter(c);
                if (!fs || fs->captured)
                    fs = scope_new(c, s);
                fs->vars.n = 0;
                assign(c, n, fs, items->v[i]);
                if (jinja_truthy(eval(c, n->d, fs)))
                    jinja_list_push(c, kept.u.l, items->v[i]);
                jinja_leave(c);
            }
            items = kept.u.l;
        }
        lp->items = items;
        lp->n     = items->n;
    }
    struct jv lv      = {.kind = JV_LOOP, .u.lp = lp};
    struct jscope *ls = NULL;
    for (size_t i = 0; i < lp->n; i++) {
        jinja_enter(c);
        lp->i = i;
        /* a fresh scope per iteration, as jinja2; the last one is reused when nothing kept it,
           so a long loop does not grow the arena */
        if (!ls || ls->captured)
            ls = scope_new(c, s);
        ls->vars.n = 0;
        scope_set(c, ls, (struct jstr){"loop", 4}, lv);
        assign(c, n, ls, loop_item(lp, i));
        enum flow f = exec(c, n->b, ls);
        jinja_leave(c);
        if (f == FLOW_BREAK)
            break;
    }
    if (!lp->n && n->c)
        return exec(c, n->c, s);
    return FLOW_NEXT;
}

static enum flow exec_for(struct jctx *c, const struct jnode *n, struct jscope *s)
{
    return run_for(c, n, s, NULL, 1);
}

/* loop(x) in a recursive loop: the loop's body over x, one level deeper, as text. */
static struct jv call_loop(struct jctx *c, struct jloop *lp, struct jargs *a)
{
    if (!(lp->node->op & FOR_RECURSIVE))
        jinja_failc(c, HEARTH_EINVAL,
                    "The loop must have the 'recursive' marker to be called recursively.");
    if (a->n_pos != 1 || a->n_kw)
        jinja_failc(c, HEARTH_EINVAL, "loop() takes exactly one argument");
    if (c->depth >= c->o.max_depth)
        jinja_failc(c, HEARTH_ERANGE, "recursive loops nest deeper than %d", c->o.max_depth);
    struct jbuf buf    = {0};
    struct jbuf *saved = c->out;
    c->out             = &buf;
    c->depth++;
    run_for(c, lp->node, lp->scope, &a->pos[0], lp->depth + 1);
    c->depth--;
    c->out = saved;
    return jinja_buf_value(&buf);
}

static enum flow exec_inner(struct jctx *c, const struct jnode *n, struct jscope *s)
{
    switch (n->kind) {
    case JN_BODY:
        for (int i = 0; i < n->n_kids; i++) {
            enum flow f = exec(c, n->kids[i], s);
            if (f != FLOW_NEXT)
                return f;
        }
        return FLOW_NEXT;
    case JN_TEXT:
        jinja_buf_put(c, c->out, n->val.u.s.p, n->val.u.s.len);
        return FLOW_NEXT;
    case JN_PRINT: {
        struct jstr t = jinja_to_str(c, eval(c, n->a, s));
        jinja_buf_put(c, c->out, t.p, t.len);
        return FLOW_NEXT;
    }
    case JN_IF:
        if (jinja_truthy(eval(c, n->a, s)))
            return exec(c, n->b, s);
        return n->c ? exec(c, n->c, s) : FLOW_NEXT;
    case JN_FOR:
        return exec_for(c, n, s);
    case JN_SET: {
        struct jv v = eval(c, n->a, s);
        if (n->attr.p) {
            struct jv ns = lookup(c, s, n->name);
            if (ns.kind != JV_NS)
                jinja_failc(c, HEARTH_EINVAL,
                            "line %d: cannot assign attribute on "
                            "non-namespace object",
                            n->line);
            jinja_dict_set(c, ns.u.d, jinja_strn(n->attr.p, n->attr.len), v);
        } else
            assign(c, n, s, v);
        return FLOW_NEXT;
    }
    case JN_SETBLOCK: {
        struct jstr t = capture(c, n->b, s);
        struct jv v   = jinja_strn(t.p, t.len);
        if (n->a)
            v = apply_filters(c, n->a, v, s);
        scope_set(c, s, n->name, v);
        return FLOW_NEXT;
    }
    case JN_FILTERBLK: {
        struct jstr t = capture(c, n->b, s);
        struct jstr o = jinja_to_str(c, apply_filters(c, n->a, jinja_strn(t.p, t.len), s));
        jinja_buf_put(c, c->out, o.p, o.len);
        return FLOW_NEXT;
    }
    case JN_MACRO: {
        struct jmacro *m = jinja_alloc(&c->mem, sizeof *m);
        m->def           = n;
        m->scope         = s;
        for (struct jscope *p = s; p && !p->captured; p = p->parent)
            p->captured = true;
        scope_set(c, s, n->name, (struct jv){.kind = JV_MACRO, .u.m = m});
        return FLOW_NEXT;
    }
    case JN_CALLBLOCK: {
        struct jmacro *m = jinja_alloc(&c->mem, sizeof *m);
        m->def           = n->c;
        m->scope         = s;
        for (struct jscope *p = s; p && !p->captured; p = p->parent)
            p->captured = true;
        const struct jnode *call = n->a;
        struct jv fn             = eval(c, call->a, s);
        struct jargs a;
        struct argbuf ab;
        eval_args(c, call, s, &a, &ab);
        struct jargs b = a; /* the same arguments and caller= */
        b.kw_names     = jinja_alloc(&c->mem, ((size_t)a.n_kw + 1) * sizeof *b.kw_names);
        b.kw           = jinja_alloc(&c->mem, ((size_t)a.n_kw + 1) * sizeof *b.kw);
        for (int i = 0; i < a.n_kw; i++) {
            b.kw_names[i] = a.kw_names[i];
            b.kw[i]       = a.kw[i];
        }
        b.kw_names[a.n_kw] = (struct jstr){"caller", 6};
        b.kw[b.n_kw++]     = (struct jv){.kind = JV_MACRO, .u.m = m};
        struct jstr t      = jinja_to_str(c, jinja_call(c, fn, &b));
        jinja_buf_put(c, c->out, t.p, t.len);
        return FLOW_NEXT;
    }
    case JN_WITH: {
        struct jscope *ws = scope_new(c, s);
        for (int i = 0; i < n->n_names; i++)
            scope_set(c, ws, n->names[i], eval(c, n->kids[i], s));
        return exec(c, n->b, ws);
    }
    case JN_NOLOADER:
        jinja_failc(c, HEARTH_EINVAL, "line %d: no loader for this environment specified", n->line);
    case JN_BLOCK:
        exec(c, n->b, scope_new(c, s));
        return FLOW_NEXT;
    case JN_BREAK:
        return FLOW_BREAK;
    case JN_CONTINUE:
        return FLOW_CONTINUE;
    default: {
        struct jstr t = jinja_to_str(c, eval(c, n, s));
        jinja_buf_put(c, c->out, t.p, t.len);
        return FLOW_NEXT;
    }
    }
}

static enum flow exec(struct jctx *c, const struct jnode *n, struct jscope *s)
{
    jinja_enter(c);
    enum flow f = exec_inner(c, n, s);
    jinja_leave(c);
    return f;
}

/* ------------------------------------------------------------------- API --- */

void jinja_opts_default(struct jinja_opts *o)
{
    o->max_depth  = 128;
    o->max_steps  = 100 * 1000 * 1000;
    o->max_output = 16u << 20;
    o->max_memory = 128u << 20;
    o->now        = -1;
}

enum hearth_status jinja_compile(const char *src, size_t len, struct jinja_template **out,
                                 char *err, size_t err_len)
{
    *out = NULL;
    if (err && err_len)
        err[0] = 0;
    struct jinja_template *t = calloc(1, sizeof *t);
    if (!t) {
        snprintf(err, err_len, "jinja: out of memory");
        return HEARTH_ENOMEM;
    }
    jmp_buf jb;
    /* jinja_mem_init (another file) lets t escape before setjmp: an optimiser may not then
       assume t's memory unchanged when setjmp returns the second time */
    jinja_mem_init(&t->mem, 64u << 20, &jb, err, err_len);
    int jumped = setjmp(jb);
    if (jumped) {
        enum hearth_status st = (enum hearth_status)jumped;
        jinja_mem_free(&t->mem);
        free(t);
        return st;
    }
    if (len > t->mem.cap / 4)
        jinja_fail(&t->mem, HEARTH_ERANGE, "the template is too long (%zu bytes)", len);
    t->root    = jinja_parse(&t->mem, src ? src : "", src ? len : 0);
    t->mem.jb  = NULL;
    t->mem.err = NULL;
    *out       = t;
    return HEARTH_OK;
}

enum hearth_status jinja_render(const struct jinja_template *t, const cJSON *vars,
                                const struct jinja_opts *o, char **out, size_t *out_len, char *err,
                                size_t err_len)
{
    *out = NULL;
    if (out_len)
        *out_len = 0;
    if (err && err_len)
        err[0] = 0;
    struct jctx *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, err_len, "jinja: out of memory");
        return HEARTH_ENOMEM;
    }
    if (o)
        c->o = *o;
    else
        jinja_opts_default(&c->o);
    if (c->o.max_depth < 1)
        c->o.max_depth = 1;
    jmp_buf jb;
    jinja_mem_init(&c->mem, c->o.max_memory, &jb, err, err_len); /* c escapes: see compile */
    int jumped = setjmp(jb);
    if (jumped) {
        enum hearth_status st = (enum hearth_status)jumped;
        jinja_mem_free(&c->mem);
        free(c);
        return st;
    }
    c->stack_base = __builtin_frame_address(0);
    c->globals    = scope_new(c, NULL);
    if (vars && cJSON_IsObject(vars))
        for (const cJSON *e = vars->child; e; e = e->next)
            if (e->string)
                jinja_dict_set(c, &c->globals->vars, jinja_cstr(e->string),
                               jinja_from_cjson(c, e, 0));
    struct jscope *root = scope_new(c, c->globals);
    struct jbuf buf     = {0};
    c->out              = &buf;
    exec(c, t->root, root);
    char *res = malloc(buf.len + 1);
    if (!res)
        jinja_fail(&c->mem, HEARTH_ENOMEM, "out of memory");
    if (buf.len)
        memcpy(res, buf.p, buf.len);
    res[buf.len] = 0;
    *out         = res;
    if (out_len)
        *out_len = buf.len;
    jinja_mem_free(&c->mem);
    free(c);
    return HEARTH_OK;
}

void jinja_free(struct jinja_template *t)
{
    if (!t)
        return;
    jinja_mem_free(&t->mem);
    free(t);
}
