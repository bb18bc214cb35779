/*
 * jinja_int.h: what the files of the Jinja interpreter share: the arena,
 * the error exit, tokens, the syntax tree, values and the render context.
 *
 * Memory: a template's tree lives in the template's arena; everything a
 * render makes lives in the render's arena, freed at once when the render
 * ends, so values are plain structs without reference counts and an error
 * leaves by longjmp to jinja_render (or jinja_compile) with nothing to undo.
 * Every arena has a byte budget; passing it is an error, not a crash.
 *
 * Strings are UTF-8 byte spans; Python's code-point semantics (len,
 * slicing, indexing) are computed where asked for.
 */
#ifndef HEARTH_JINJA_INT_H
#define HEARTH_JINJA_INT_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chat/jinja.h"

/* ---------------------------------------------------------------- arena --- */

struct jchunk;

struct jmem {
    struct jchunk *head; /* newest chunk first */
    size_t used;         /* bytes taken from malloc so far */
    size_t cap;          /* budget for used; past it: HEARTH_ERANGE */
    jmp_buf *jb;         /* where jinja_fail leaves to; setjmp returns the status */
    char *err;           /* caller's buffer for the sentence */
    size_t err_len;
};

void *jinja_alloc(struct jmem *m, size_t n); /* zeroed, 16-aligned; never NULL (fails instead) */
char *jinja_strndup(struct jmem *m, const char *s, size_t n);
/* Sets the budget and the exit; out of line on purpose (jinja_compile explains). */
void jinja_mem_init(struct jmem *m, size_t cap, jmp_buf *jb, char *err, size_t err_len);
void jinja_mem_free(struct jmem *m);
/* Writes "jinja: <fmt>" into m->err and leaves by longjmp; setjmp returns st. */
_Noreturn void jinja_fail(struct jmem *m, enum hearth_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ----------------------------------------------------------------- values --- */

enum jv_kind {
    JV_UNDEF, /* u.s: the message its misuse raises (NULL: generic) */
    JV_NONE,
    JV_BOOL,
    JV_INT,
    JV_FLOAT,
    JV_STR,
    JV_LIST,
    JV_TUPLE, /* a list that prints with parentheses and is never equal to a list */
    JV_DICT,
    JV_NS,   /* namespace(): a dict whose items are attributes */
    JV_LOOP, /* the loop variable of a for */
    JV_MACRO,
    JV_FUNC,   /* a global function: u.i is its id */
    JV_METHOD, /* a bound method: u.me */
    JV_GEN     /* what map, select, unique... return: iterable once in Python, so no len,
                  no subscript, no JSON; u.l holds its items */
};

struct jstr {
    const char *p;
    size_t len; /* bytes */
};

struct jlist;
struct jdict;
struct jmacro;
struct jloop;
struct jmethod;

struct jv {
    enum jv_kind kind;
    bool safe;        /* JV_STR: a Markup (from |safe or |e): + escapes the other operand */
    uint8_t form;     /* JV_LIST: 3 for a range(), which prints as one and adds to nothing.
                         JV_TUPLE: 1 for groupby's (grouper, list), which have those names.
                         JV_UNDEF: 0 u.s is the message; 1 "'<u.s>' is undefined";
                         2 "'<obj_kind> object' has no attribute '<u.s>'" (formatted on failure,
                         so that testing names costs no memory) */
    uint8_t obj_kind; /* JV_UNDEF form 2: the enum jv_kind of the object */
    union {
        bool b;
        int64_t i;
        double f;
        struct jstr s;
        struct jlist *l;
        struct jdict *d;
        struct jmacro *m;
        struct jloop *lp;
        struct jmethod *me;
    } u;
};

struct jlist {
    struct jv *v;
    size_t n, cap;
    int64_t range[3]; /* start, stop, step of a range(): a JV_LIST with form 3 */
};

struct jdict {
    struct jv *k, *v; /* insertion order, as Python's dict */
    size_t n, cap;
    uint32_t *slot;   /* hash index from 16 entries on: entry + 1 per slot, 0 empty */
    size_t n_slot;    /* power of two, over twice n_indexed */
    size_t n_indexed; /* the first n_indexed entries are in slot; stale when above n */
};

struct jmethod {
    struct jv self;
    const char *name;
};

struct jctx;

struct jv jinja_none(void);
struct jv jinja_bool(bool b);
struct jv jinja_int(int64_t i);
struct jv jinja_float(double f);
struct jv jinja_cstr(const char *s); /* s must outlive the value */
struct jv jinja_strn(const char *s, size_t len);
struct jv jinja_undef(const char *msg);
struct jv jinja_list_new(struct jctx *c, size_t cap);
struct jv jinja_dict_new(struct jctx *c);
void jinja_list_push(struct jctx *c, struct jlist *l, struct jv v);
struct jv *jinja_dict_get(const struct jdict *d, struct jv key); /* NULL if absent */
struct jv *jinja_dict_gets(const struct jdict *d, const char *key, size_t len);
void jinja_dict_set(struct jctx *c, struct jdict *d, struct jv key, struct jv val);

bool jinja_is_seq(struct jv v); /* list or tuple */
/* Python's hash() works on it: not a list (a range is fine) nor a dict. */
bool jinja_hashable(struct jv v);
#define JV_FORM_RANGE 3
bool jinja_truthy(struct jv v);
bool jinja_eq(struct jv a, struct jv b); /* containers nested past 200 levels compare unequal */
/* <0, 0, >0 as Python's <; fails (TypeError) on unorderable kinds, ERANGE past 200 levels. */
int jinja_cmp(struct jctx *c, struct jv a, struct jv b);
const char *jinja_type_name(struct jv v); /* Python's type name: "str", "dict", ... */

/* Python str(v) and repr(v), as new strings in the arena. */
struct jstr jinja_to_str(struct jctx *c, struct jv v);
struct jstr jinja_to_repr(struct jctx *c, struct jv v);
/* json.dumps(v, ensure_ascii, indent (NULL or a string), item_sep, key_sep, sort_keys). */
struct jstr jinja_to_json(struct jctx *c, struct jv v, bool ensure_ascii, const struct jstr *indent,
                          struct jstr item_sep, struct jstr key_sep, bool sort_keys);
/* In jinja_json.c: cJSON (raw items parsed from their text) or JSON text, as json.loads. */
struct jv jinja_from_cjson(struct jctx *c, const cJSON *j, int depth);
struct jv jinja_from_json(struct jctx *c, const char *text, size_t len, int depth);

/* UTF-8: code points in s, and the byte offset of code point i (clamped to len). */
size_t jinja_utf8_count(struct jstr s);
size_t jinja_utf8_offset(struct jstr s, size_t i);
size_t jinja_utf8_decode(const char *p, size_t n, uint32_t *cp); /* bytes of one code point, >= 1 */

/* A growable byte buffer in the arena, bounded by max_output. */
struct jbuf {
    char *p;
    size_t len, cap;
};
void jinja_buf_put(struct jctx *c, struct jbuf *b, const char *s, size_t n);
void jinja_buf_puts(struct jctx *c, struct jbuf *b, const char *s);
void jinja_buf_printf(struct jctx *c, struct jbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
struct jstr jinja_buf_str(struct jbuf *b);
/* The buffer's text as a string value. */
static inline struct jv jinja_buf_value(struct jbuf *b)
{
    return jinja_strn(b->p ? b->p : "", b->len);
}

/* ------------------------------------------------------------ syntax tree --- */

enum jn_kind {
    /* expressions */
    JN_CONST,   /* val */
    JN_NAME,    /* name */
    JN_LIST,    /* kids */
    JN_TUPLE,   /* kids */
    JN_DICT,    /* kids: key, value, key, value... */
    JN_GETATTR, /* a.name */
    JN_GETITEM, /* a[b] */
    JN_SLICE,   /* a[b:c:d], each of b, c, d may be NULL */
    JN_CALL,    /* a(kids, kw_names=kw_vals) */
    JN_FILTER,  /* a|name(kids, kw); a NULL in a filter block or block set */
    JN_TEST,    /* a is [not: op] name(kids) */
    JN_UNARY,   /* op: '!' not, '-', '+' */
    JN_BINOP,   /* op: + - * / % ~ and 'F' (//), 'P' (**) */
    JN_CMP,     /* a, then ops[i] kids[i] chained; ops: = ! < > l (<=) g (>=) i (in) n (not in) */
    JN_AND,
    JN_OR,
    JN_COND, /* b if a else c (c may be NULL) */
    /* statements */
    JN_BODY,      /* kids */
    JN_TEXT,      /* val: the text */
    JN_PRINT,     /* a */
    JN_IF,        /* if a: b else c */
    JN_FOR,       /* for names in a [if d]: b else c; op: FOR_UNPACK, FOR_RECURSIVE */
    JN_SET,       /* names = a, or name.attr = a */
    JN_SETBLOCK,  /* name = body b, through filter a */
    JN_MACRO,     /* name(kw_names = kw_vals defaults): b; op: MACRO_* the body uses */
    JN_CALLBLOCK, /* {% call(params) a %}: the call a gets caller = macro c (body b) */
    JN_WITH,      /* with names = kids (evaluated outside): body b */
    JN_FILTERBLK, /* body b through filter a */
    JN_NOLOADER,  /* include, import, from, extends: HF's environment has no loader */
    JN_BLOCK,     /* {% block %}: without extends, its body b in place, in a scope of its own */
    JN_BREAK,
    JN_CONTINUE,
};

/* JN_FOR and JN_SET flags: targets unpack a sequence; the loop can be called as loop(x). */
enum { FOR_UNPACK = 1, FOR_RECURSIVE = 2 };

/* Special names a macro's body refers to (jinja2 decides by them what a macro accepts). */
enum { MACRO_CALLER = 1, MACRO_KWARGS = 2, MACRO_VARARGS = 4 };

struct jnode {
    enum jn_kind kind;
    int op;
    int line;
    struct jnode *a, *b, *c, *d;
    struct jnode **kids;
    int n_kids;
    struct jstr *kw_names; /* call keywords; macro parameters */
    struct jnode **kw_vals;
    int n_kw;
    struct jstr *names; /* for / set targets */
    int n_names;
    char *ops;        /* JN_CMP */
    struct jstr name; /* variable, attribute, filter, test, macro name */
    struct jstr attr; /* JN_SET of a namespace attribute */
    struct jv val;
};

struct jinja_template {
    struct jmem mem;
    struct jnode *root;
};

enum jt_kind {
    JT_EOF,
    JT_DATA,        /* s: literal text */
    JT_VAR_BEGIN,   /* {{ */
    JT_VAR_END,     /* }} */
    JT_BLOCK_BEGIN, /* {% */
    JT_BLOCK_END,   /* %} */
    JT_NAME,        /* s */
    JT_STRING,      /* s: escapes decoded */
    JT_INT,         /* i */
    JT_FLOAT,       /* f */
    JT_OP,          /* s: "+", "//", "(", ... */
};

struct jtok {
    enum jt_kind kind;
    int line;
    struct jstr s;
    int64_t i;
    double f;
};

/* Tokens of src with whitespace control applied, ending in JT_EOF; fails through jinja_fail. */
struct jtok *jinja_lex(struct jmem *m, const char *src, size_t len, size_t *n_tok);

/* Parses src into a JN_BODY in m; fails through jinja_fail. */
struct jnode *jinja_parse(struct jmem *m, const char *src, size_t len);

/* --------------------------------------------------------------- render --- */

struct jscope {
    struct jscope *parent;
    struct jdict vars;
    bool captured; /* a macro defined here or below holds it: a loop may not reuse it */
};

struct jmacro {
    const struct jnode *def;
    struct jscope *scope; /* where it was defined: names resolve there at call time */
};

struct jloop {
    struct jlist *items; /* NULL for a range() iterated without a list: start + i * step */
    size_t n;            /* items */
    int64_t start, step;
    size_t i;                 /* index0 */
    int depth;                /* 1 for the outermost loop */
    struct jv last_changed;   /* loop.changed's memory; JV_UNDEF before its first call */
    const struct jnode *node; /* the for statement, and the scope it ran in: loop(x) reruns it */
    struct jscope *scope;
};

struct jctx {
    struct jmem mem;
    struct jinja_opts o;
    int64_t steps;
    int depth;              /* macro calls in progress */
    int c_depth;            /* evaluator recursion, bounded to protect the C stack */
    const char *stack_base; /* jinja_render's frame: stack use is measured from here */
    struct jscope *globals;
    struct jbuf *out; /* where text goes now (a macro call or block set captures) */
};

/*
 * Charges work that no node counts (scanning a long list or string inside
 * one call) to the step bound: an element costs a step, a byte 1/8 (about
 * their times against a node's), so a loop over a costly call still ends
 * within max_steps, in about the time as many nodes would take.
 */
void jinja_work(struct jctx *c, size_t elements, size_t bytes);
/* Counts one step and one level of recursion; fails past the bounds. */
void jinja_enter(struct jctx *c);
static inline void jinja_leave(struct jctx *c)
{
    c->c_depth--;
}

_Noreturn void jinja_failc(struct jctx *c, enum hearth_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A misused undefined fails with its message. */
_Noreturn void jinja_undef_fail(struct jctx *c, struct jv v);

/* Arguments of a call, positional then keyword. */
struct jargs {
    struct jv *pos;
    int n_pos;
    struct jstr *kw_names;
    struct jv *kw;
    int n_kw;
};

/* In jinja_eval.c: Python's a <op> b for + - * / % and 'F' (//), 'P' (**); fails as Python. */
struct jv jinja_binop(struct jctx *c, int op, struct jv a, struct jv b);
/* In jinja_eval.c: calls a callable value; python's getattr / getitem as the sandbox does. */
struct jv jinja_call(struct jctx *c, struct jv fn, struct jargs *a);
struct jv jinja_getattr(struct jctx *c, struct jv obj, struct jstr name);
struct jv jinja_getitem(struct jctx *c, struct jv obj, struct jv key);

/* In jinja_builtins.c: arguments by position idx (-1: keyword only) or by name, else def. */
struct jv jinja_arg(struct jargs *a, int idx, const char *name, struct jv def);
bool jinja_has_arg(struct jargs *a, int idx, const char *name);
/* v itself, or a TypeError naming what. */
struct jstr jinja_need_str(struct jctx *c, struct jv v, const char *what);
int64_t jinja_need_int(struct jctx *c, struct jv v, const char *what);

/* In jinja_str.c: str.strip/lstrip/rstrip (chars NULL: whitespace), a view into s. */
struct jstr jinja_strip(struct jstr s, const struct jstr *chars, bool left, bool right);
/* Case change: 'u' upper, 'l' lower, 'c' capitalize, 's' swapcase, 't' str.title. */
struct jv jinja_case(struct jctx *c, struct jstr s, int mode);
/* jinja2's title filter (words split at whitespace, dashes and brackets). */
struct jv jinja_title(struct jctx *c, struct jstr s);
/* str.replace(old, new, count); count < 0: all. */
struct jv jinja_replace(struct jctx *c, struct jstr s, struct jstr old, struct jstr new,
                        int64_t count);
/* str.splitlines(): the lines without their breaks. */
struct jlist *jinja_splitlines(struct jctx *c, struct jstr s);
/* s padded with fill to width code points: 'c' centred as str.center, 'l' ljust, 'r' rjust. */
struct jv jinja_pad(struct jctx *c, struct jstr s, int64_t width, struct jstr fill, int mode);
/* The entry of the NULL-terminated table equal to name, or NULL. */
const char *jinja_name_in(const char *const *t, struct jstr name);
/* The tuple (a, b). */
struct jv jinja_pair(struct jctx *c, struct jv a, struct jv b);

/* In jinja_builtins.c. */
bool jinja_filter_exists(struct jstr name);
bool jinja_test_exists(struct jstr name);
struct jv jinja_filter(struct jctx *c, struct jstr name, struct jv v, struct jargs *a);
bool jinja_test(struct jctx *c, struct jstr name, struct jv v, struct jargs *a);
/* The method name of obj's type, or NULL when it has none by that name; *unsafe for
 * the mutating ones the immutable sandbox refuses. */
const char *jinja_method_find(struct jv obj, struct jstr name, bool *unsafe);
struct jv jinja_method_call(struct jctx *c, struct jv self, const char *name, struct jargs *a);
/* range(a)'s bounds as Python's range and its length, at most the sandbox's 100000. */
int64_t jinja_range(struct jctx *c, struct jargs *a, int64_t *start, int64_t *stop, int64_t *step);
/* Global functions: ids and calls. -1 when name is not one. */
int jinja_global_find(struct jstr name);
struct jv jinja_global_call(struct jctx *c, int id, struct jargs *a);
/* markupsafe's escape of s (& < > " '), as a new string. */
struct jv jinja_escape(struct jctx *c, struct jstr s);
/* Python's fmt % args for %s, %r, %d, %i and %%: args a tuple or one value. */
struct jv jinja_percent(struct jctx *c, struct jstr fmt, struct jv args);
/* Iterable as a list (list, tuple: itself; dict: keys; str: characters; undefined: empty). */
struct jlist *jinja_iter(struct jctx *c, struct jv v);

/* Python's numbers: int, float, and bool (a subclass of int). */
static inline bool jinja_is_num(struct jv v)
{
    return v.kind == JV_INT || v.kind == JV_FLOAT || v.kind == JV_BOOL;
}

/* A number's value as a double (0 for anything else). */
static inline double jinja_num_f(struct jv v)
{
    return v.kind == JV_FLOAT  ? v.u.f
           : v.kind == JV_INT  ? (double)v.u.i
           : v.kind == JV_BOOL ? (double)v.u.b
                               : 0;
}

/* An int's or bool's value (0 for anything else, floats included). */
static inline int64_t jinja_num_i(struct jv v)
{
    return v.kind == JV_INT ? v.u.i : v.kind == JV_BOOL ? (int64_t)v.u.b : 0;
}

static inline bool jinja_str_is(struct jstr s, const char *lit)
{
    size_t i = 0;
    for (; i < s.len; i++)
        if (lit[i] != s.p[i] || !lit[i])
            return false;
    return lit[i] == 0;
}

#endif
