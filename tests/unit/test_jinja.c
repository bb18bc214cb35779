/*
 * test_jinja.c: src/chat/jinja_*.c (the Jinja interpreter). The table's expected
 * texts are what Python jinja2 3.1 renders in Hugging Face's environment
 * (tests/e2e/hf_render.py) from the same template and variables; NULL
 * where jinja2 raises, and hearth must fail there too. Then the bounds: a
 * recursive macro, a huge loop, a huge output, deep nesting and a memory
 * hog each end in an error, never a crash; and the error messages.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/testutil.h"
#include "chat/jinja.h"

/* clang-format off */
#define VARS                                                                                       \
    "{\"xs\": [3, 1, 2], \"d\": {\"b\": 1, \"a\": [1, \"x\"]}, \"s\": \"Hello World\", "           \
    "\"n\": null, \"f\": 1.5, \"i\": 7, \"messages\": [{\"role\": \"user\", \"content\": "         \
    "\"hi\"}, "                                                                                    \
    "{\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"function\": "                \
    "{\"name\": \"f\", \"arguments\": {\"a\": 1}}}]}]}"
/* clang-format on */
#define NOW 1767225600 /* 2026-01-01 00:00:00 UTC */

struct jcase {
    const char *tmpl;
    const char *want; /* NULL: jinja2 raises */
};

/* clang-format off */
static const struct jcase cases[] = {
    /* literals and printing */
    {"{{ 1 }}{{ 1.0 }}{{ 0.1 }}{{ 1e-5 }}{{ 1e20 }}{{ 1e16 }}{{ -0.0 }}{{ 2.5e-7 }}{{ 0.1 + 0.2 "
     "}}{{ 1/3 }}{{ 5e-324 }}",
     "11.00.11e-051e+201e+16-0.02.5e-070.300000000000000040.33333333333333335e-324"},
    {"{{ [1, 'a', \"b'c\", 'd\"e', 'f\\'g\"h', none, true, 1.5] }}{{ {'a': 1, 'b': [1, 'x']} }}{{ "
     "(1,) }}{{ (1, 2) }}{{ () }}",
     "[1, 'a', \"b'c\", 'd\"e', 'f\\'g\"h', None, True, 1.5]{'a': 1, 'b': [1, 'x']}(1,)(1, 2)()"},
    {"{{ ['a\\nb\\\\c\\td', '\\u00e9', '\\x01', '\\x7f', '\\U0001F600', '\\u00a0', '\\u200b'] }}",
     "['a\\nb\\\\c\\td', '\303\251', '\\x01', '\\x7f', '\360\237\230\200', '\\xa0', '\\u200b']"},
    {"{{ \"a\" \"b\" 'c' }}{{ '\\'' }}{{ \"\\\"\" }}{{ none }}{{ True }}{{ undefined_name }}|",
     "abc'\"NoneTrue|"},
    {"{{ \"%s-%d %r\" % ('a', 2, 'b') }}{{ '%s!' | format(1) }}", "a-2 'b'1!"},
    /* operators */
    {"{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 2 ** -1 }} "
     "{{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ 2 ** 3 ** 2 }}",
     "3 -4 1 2 3.5 1024 0.5 3.0 0.5 64"},
    {"{{ 'ab' * 3 }}{{ [1] * 2 }}{{ 'a' ~ 1 ~ none ~ true }}{{ 1 + 2 * 3 - 4 }}{{ (1 + 2) * 3 }}{{ "
     "-2 ** 2 }}{{ -1|abs }}",
     "ababab[1, 1]a1NoneTrue3941"},
    {"{{ 'a' in 'abc' }}{{ 1 in xs }}{{ 'a' in d }}{{ 'z' not in d }}{{ 5 not in xs }}{{ 1 < 2 < 3 "
     "}}{{ 1 < 3 < 2 }}{{ 1 == 1.0 }}{{ true == 1 }}{{ [1, 2] < [1, 3] }}{{ (1, 2) == [1, 2] }}",
     "TrueTrueTrueTrueTrueTrueFalseTrueTrueTrueFalse"},
    {"{{ 'x' if true else 'y' }}{{ 'x' if false else 'y' }}{{ 'x' if false }}|{{ 1 and 2 }}{{ 0 "
     "and 2 }}{{ 0 or 'a' }}{{ not 0 }}{{ not 1 in xs }}",
     "xy|20aTrueFalse"},
    {"{{ xs[0:2] + [9] }}{{ (1, 2) + (3,) }}", "[3, 1, 9](1, 2, 3)"},
    {"{{ 1 // 0.1 }}{{ 1 % 0.1 }}{{ -1 // 0.1 }}{{ 0 % -0.5 }}{{ -0.0 // 1 }}{{ 7.5 % -2 }}{{ 5 // "
     "-2.0 }}{{ 2.5 is odd }}{{ 3.0 is odd }}{{ range(3) }}{{ range(1, 9, 2) }}",
     "9.00.09999999999999995-10.0-0.0-0.0-0.5-3.0FalseTruerange(0, 3)range(1, 9, 2)"},
    /* subscripts and slices */
    {"{{ s[0] }}{{ s[-1] }}{{ s[1:3] }}{{ s[::-1] }}{{ s[::2] }}{{ s[-3:] }}{{ s[:-3] }}{{ "
     "xs[::-1] }}{{ xs[1:] }}{{ s[100] }}|{{ xs[10] }}|{{ s[5:1:-1] }}",
     "HdeldlroW olleHHloWrdrldHello Wo[2, 1, 3][1, 2]|| oll"},
    {"{{ '\344\275\240\345\245\275\344\270\226\347\225\214'[1:3] }}{{ "
     "'\344\275\240\345\245\275\344\270\226\347\225\214' | length }}{{ "
     "'\344\275\240\345\245\275\344\270\226\347\225\214'[::-1] }}{{ '\360\237\230\200a'[0] }}",
     "\345\245\275\344\270\2264\347\225\214\344\270\226\345\245\275\344\275\240\360\237\230\200"},
    {"{% set a = [0,1,2,3,4,5,6,7,8,9] %}{{ a[8:2:-2] }}{{ a[-2::-3] }}{{ a[:100] }}{{ a[-100:2] "
     "}}{{ a[5:2] }}",
     "[8, 6, 4][8, 5, 2][0, 1, 2, 3, 4, 5, 6, 7, 8, 9][0, 1][]"},
    {"{{ d.b }}{{ d['a'] }}{{ d.zz }}|{{ d.a.0 }}{{ messages[0].content }}{{ "
     "messages[1].tool_calls[0].function.arguments | tojson }}",
     "1[1, 'x']|1hi{\"a\": 1}"},
    /* string methods */
    {"{{ s.split() }}{{ s.split('o') }}{{ s.split('o', 1) }}{{ '  a  b  '.split() }}{{ "
     "'a,b,,c'.split(',') }}{{ s.rsplit('o', 1) }}{{ '  a b c '.split(none, 1) }}",
     "['Hello', 'World']['Hell', ' W', 'rld']['Hell', ' World']['a', 'b']['a', 'b', '', "
     "'c']['Hello W', 'rld']['a', 'b c ']"},
    {"{{ '  x  '.strip() }}|{{ '  x  '.lstrip() }}|{{ '  x  '.rstrip() }}|{{ 'xxhixx'.strip('x') "
     "}}|{{ s.startswith('He') }}{{ s.endswith(('x', 'ld')) }}{{ s.find('o') }}{{ s.rfind('o') "
     "}}{{ s.count('o') }}{{ s.replace('o', '0', 1) }}",
     "x|x  |  x|hi|TrueTrue472Hell0 World"},
    {"{{ s.upper() }}{{ s.lower() }}{{ 'hello world-foo'.title() }}{{ 'hELLO'.capitalize() }}{{ "
     "'h\303\251llo \303\247a'.upper() }}",
     "HELLO WORLDhello worldHello World-FooHelloH\303\211LLO \303\207A"},
    {"{{ '{} and {}'.format(1, 'b') }}{{ '{0}{1}{0}'.format('a', 'b') }}{{ '{x}!'.format(x=3) }}{{ "
     "'{{}}'.format() }}{{ '{!r}'.format('q') }}{{ '{:>4}|{:<3}|{:^5}'.format(1, 'a', 'b') }}",
     "1 and baba3!{}'q'   1|a  |  b  "},
    {"{{ ' '.join(['a', 'b']) }}{{ 'abc'.startswith('b', 1) }}", "a bTrue"},
    /* dict methods */
    {"{{ d.items() | list }}{{ d.keys() | list }}{{ d.values() | list }}{{ d.get('a') }}{{ "
     "d.get('z') }}{{ d.get('z', 5) }}",
     "[('b', 1), ('a', [1, 'x'])]['b', 'a'][1, [1, 'x']][1, 'x']None5"},
    {"{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}{% "
     "for c in 'abc' %}{{ c }}{% endfor %}",
     "b=1;a=[1, 'x'];baabc"},
    /* loops */
    {"{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ "
     "loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.previtem }}{{ loop.nextitem }}{{ "
     "loop.cycle('a', 'b') }}|{% endfor %}",
     "1032TrueFalse31a|2121FalseFalse332b|3210FalseTrue31a|"},
    {"{% for x in xs if x > 1 %}{{ x }}{{ loop.index }}{{ loop.length }}{% else %}empty{% endfor "
     "%}{% for x in [] %}{% else %}E{% endfor %}",
     "312222E"},
    {"{% for x in xs %}{% if x == 1 %}{% continue %}{% endif %}{% if x == 2 %}{% break %}{% endif "
     "%}{{ x }}{% endfor %}",
     "3"},
    {"{% for i in range(3) %}[{{ y }}]{% set y = i %}{% endfor %}{{ y }}", "[][][]"},
    {"{% for x in undefined_name %}x{% endfor %}ok{{ undefined_name | length }}", "ok0"},
    {"{% for a, b in [[1, 2], [3, 4]] %}{{ a }}{{ b }}{% endfor %}{% for i in range(2) %}{% for j "
     "in range(2) %}{{ loop.index }}{{ i }}{% endfor %}{{ loop.index }}|{% endfor %}",
     "123410201|11212|"},
    {"{% for i in range(5, 0, -2) %}{{ i }}{{ loop.previtem }}{{ loop.nextitem }}{{ loop.length "
     "}}{{ loop.revindex }}{% endfor %}{% for i in range(0) %}{% else %}none{% endfor %}",
     "5333351321331none"},
    {"{% set range = [7] %}{% for i in range(1) %}{{ i }}{% endfor %}",
     NULL}, /* jinja2: TypeError: 'list' object is not callable */
    {"{% set tree = [{'n': 'a', 'c': [{'n': 'b', 'c': []}, {'n': 'c', 'c': [{'n': 'd', 'c': "
     "[]}]}]}, {'n': 'e', 'c': []}] %}{% for x in tree recursive %}<{{ x.n }}{{ loop.depth }}{{ "
     "loop.index }}{% if x.c %}[{{ loop(x.c) }}]{% endif %}>{% endfor %}",
     "<a11[<b21><c22[<d31>]>]><e12>"},
    {"{% for x in [1] %}{{ loop([2]) }}{% endfor %}",
     NULL}, /* jinja2: TypeError: The loop must have the 'recursive' marker to be called
               recursively. */
            /* set, namespace, macros */
    {"{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set x %}block {{ a }}{% endset %}[{{ x }}]{% set y | "
     "upper %}up{% endset %}{{ y }}",
     "12[block 1]UP"},
    {"{% set ns = namespace(a=1) %}{% for i in range(3) %}{% set ns.a = ns.a + i %}{% endfor %}{{ "
     "ns.a }}",
     "4"},
    {"{% macro m(a, b=2, c='x') %}[{{ a }}{{ b }}{{ c }}]{% endmacro %}{{ m(1) }}{{ m(1, 3) }}{{ "
     "m(1, c='y') }}{{ m() }}{{ m(b=5, a=4) }}",
     "[12x][13x][12y][2x][45x]"},
    {"{% macro rec(n) %}{% if n > 0 %}{{ n }}{{ rec(n - 1) }}{% endif %}{% endmacro %}{{ rec(5) }}",
     "54321"},
    {"{% set x = 5 %}{% macro m() %}{{ x }}{% endmacro %}{% set x = 6 %}{{ m() }}{% if true %}{% "
     "set z = 1 %}{% endif %}{{ z }}",
     "61"},
    {"{% filter upper %}hello {{ 'x' }}{% endfilter %}{% generation %}gen{% endgeneration %}",
     "HELLO Xgen"},
    /* filters */
    {"{{ xs | length }}{{ xs | first }}{{ xs | last }}{{ xs | sort }}{{ xs | sort(reverse=true) "
     "}}{{ xs | sum }}{{ xs | min }}{{ xs | max }}{{ xs | join(',') }}{{ xs | reverse | list }}",
     "332[1, 2, 3][3, 2, 1]6133,1,2[2, 1, 3]"},
    {"{{ ['b', 'A', 'a', 'B'] | sort }}{{ ['b', 'A', 'a', 'B'] | sort(case_sensitive=true) }}{{ "
     "['b', 'A', 'a', 'B'] | unique | list }}{{ {'b': 1, 'A': 2, 'a': 3} | dictsort }}",
     "['A', 'a', 'b', 'B']['A', 'B', 'a', 'b']['b', 'A'][('A', 2), ('a', 3), ('b', 1)]"},
    {"{{ [{'n': 'x', 'v': 2}, {'n': 'y', 'v': 1}] | sort(attribute='v') | map(attribute='n') | "
     "list }}{{ [{'n': 'x', 'v': 2}, {'n': 'y'}] | selectattr('v', 'defined') | list }}{{ [{'n': "
     "'x', 'v': 2}, {'n': 'y'}] | rejectattr('v') | map(attribute='n') | join }}",
     "['y', 'x'][{'n': 'x', 'v': 2}]y"},
    {"{{ [1, 2, 3, 4] | select('odd') | list }}{{ [1, 2, 3, 4] | reject('even') | list }}{{ [1, 0, "
     "none, 'a'] | select | list }}{{ ['a', 'b'] | map('upper') | list }}{{ [1, 2, 3] | "
     "select('>', 1) | list }}",
     "[1, 3][1, 3][1, 'a']['A', 'B'][2, 3]"},
    {"{{ n | default('dflt') }}{{ undefined_name | default('u') }}{{ '' | default('e', true) }}{{ "
     "undefined_name | d('x') }}",
     "Noneuex"},
    {"{{ 3.7 | int }}{{ '42' | int }}{{ '4.2' | int }}{{ 'x' | int }}{{ '3.5' | float }}{{ -3 | "
     "abs }}{{ 2.567 | round(2) }}{{ 2.5 | round }}{{ 3.5 | round }}{{ 7 | string }}",
     "342403.532.572.04.07"},
    {"{{ 'a\\nb\\n\\nc' | indent }}|{{ 'a\\nb' | indent(2, true) }}|{{ 'a\\n\\nb' | indent(2, "
     "blank=true) }}|",
     "a\n    b\n\n    c|  a\n  b|a\n  \n  b|"},
    {"{{ {'a': '\303\251', 'b': [1, 2.5, none, true], 'c': {'d': '\"q\"\\n'}} | tojson }}|{{ d | "
     "tojson(indent=2) }}|{{ d | tojson(sort_keys=true) }}|{{ '\303\251' | "
     "tojson(ensure_ascii=true) }}|{{ d | tojson(separators=(',', ':')) }}",
     "{\"a\": \"\303\251\", \"b\": [1, 2.5, null, true], \"c\": {\"d\": \"\\\"q\\\"\\n\"}}|{\n  "
     "\"b\": 1,\n  \"a\": [\n    1,\n    \"x\"\n  ]\n}|{\"a\": [1, \"x\"], \"b\": "
     "1}|\"\\u00e9\"|{\"b\":1,\"a\":[1,\"x\"]}"},
    {"{{ d | items | list }}{{ 'a b  c' | wordcount }}{{ '<a href=\"x\">&' | e }}{{ s | "
     "replace('l', 'L') }}{{ '  a ' | trim }}|{{ 'hello world' | title }}{{ 'hello world' | "
     "truncate(9, leeway=0) }}",
     "[('b', 1), ('a', [1, 'x'])]3&lt;a href=&#34;x&#34;&gt;&amp;HeLLo WorLda|Hello Worldhello..."},
    {"{{ '<b>' | safe + '<i>' }}{{ '<b>' | safe ~ '<i>' }}", "<b>&lt;i&gt;<b><i>"},
    {"{{ '0x1A' | int }}{{ '1_000' | int }}{{ ' 12 ' | int }}{{ '12abc' | int }}{{ 'ff' | int(0, "
     "16) }}{{ (1, 2) | reverse | list }}",
     "01000120255[2, 1]"},
    {"{% for g in [{'a': 'X', 'v': 1}, {'a': 'y', 'v': 2}, {'a': 'x', 'v': 3}] | groupby('a') %}{{ "
     "g.grouper }}:{{ g.list | map(attribute='v') | list }};{% endfor %}{{ [{'a': 1}] | "
     "groupby('a') }}",
     "X:[1, 3];y:[2];[(1, [{'a': 1}])]"},
    {"{% if false %}{{ x | wordwrap }}{% endif %}ok", "ok"},
    /* tests */
    {"{{ 1 is number }}{{ 1.5 is float }}{{ 1 is integer }}{{ true is boolean }}{{ 's' is string "
     "}}{{ d is mapping }}{{ xs is sequence }}{{ 's' is iterable }}{{ undefined_name is defined "
     "}}{{ 3 is odd }}{{ 9 is divisibleby 3 }}{{ 1 is eq(1) }}{{ none is none }}{{ n is not none "
     "}}{{ 'ab' is lower }}",
     "TrueTrueTrueTrueTrueTrueTrueTrueFalseTrueTrueTrueTrueFalseTrue"},
    /* globals */
    {"{{ range(3) | list }}{{ range(1, 10, 3) | list }}{{ range(5, 0, -2) | list }}{{ dict(a=1, "
     "b=2) }}{{ namespace(x=1).x }}{{ strftime_now('%Y-%m-%d') }}",
     "[0, 1, 2][1, 4, 7][5, 3, 1]{'a': 1, 'b': 2}12026-01-01"},
    /* whitespace control */
    {"a\n  {% if true %}\nb\n  {% endif %}\nc", "a\nb\nc"},
    {"x {% if true %}\ny{% endif %}", "x y"},
    {"  {# comment #}\nz\n  {{ 'v' }}\nw", "z\n  v\nw"},
    {"a  {%- if true -%}  b  {%- endif -%}  c\n   {%+ if true %}plus{% endif %}", "abc\n   plus"},
    {"{% raw %}{{ not evaluated }}{% endraw %} {%- raw -%}  x  {%- endraw -%}  y",
     "{{ not evaluated }}xy"},
    {"text\n", "text"},
    {"{%- for x in xs -%}\n  {{ x }}\n{%- endfor %}", "312"},
    /* errors */
    {"{{ raise_exception('Boom: the message') }}",
     NULL},                              /* jinja2: TemplateError: Boom: the message */
    {"{{ undefined_name.attr }}", NULL}, /* jinja2: UndefinedError: 'undefined_name' is undefined */
    {"{{ undefined_name + 1 }}", NULL},  /* jinja2: UndefinedError: 'undefined_name' is undefined */
    {"{% for x in n %}x{% endfor %}",
     NULL}, /* jinja2: TypeError: 'NoneType' object is not iterable */
    {"{{ xs.append(4) }}",
     NULL}, /* jinja2: SecurityError: access to attribute 'append' of 'list' object is unsafe. */
    {"{{ d.pop('a') }}",
     NULL}, /* jinja2: SecurityError: access to attribute 'pop' of 'dict' object is unsafe. */
    {"{{ 1 + 'a' }}",
     NULL}, /* jinja2: TypeError: unsupported operand type(s) for +: 'int' and 'str' */
    {"{{ 1 / 0 }}", NULL}, /* jinja2: ZeroDivisionError: division by zero */
    {"{{ 'a' < 1 }}",
     NULL}, /* jinja2: TypeError: '<' not supported between instances of 'str' and 'int' */
    {"{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}",
     NULL}, /* jinja2: TypeError: macro 'm' takes not more than 1 argument(s) */
    {"{{ range(200000) | length }}", NULL}, /* jinja2: OverflowError: Range too big. The sandbox
                                               blocks ranges larger than MAX_RANGE (100000). */
                                            /* syntax errors */
    {"{{ foo | nosuchfilter }}",
     NULL}, /* jinja2: TemplateAssertionError: No filter named 'nosuchfilter'. */
    {"{% if x is nosuchtest %}{% endif %}",
     NULL},                 /* jinja2: TemplateRuntimeError: No test named 'nosuchtest' found. */
    {"{% break %}", NULL},  /* jinja2: SyntaxError: 'break' outside loop (<template>, line 11) */
    {"{% endfor %}", NULL}, /* jinja2: TemplateSyntaxError: Encountered unknown tag 'endfor'. */
    {"{% if true %}unclosed", NULL}, /* jinja2: TemplateSyntaxError: Unexpected end of template.
                                        Jinja was looking for the following tags: */
    {"{{ 'unterminated }}", NULL},   /* jinja2: TemplateSyntaxError: unexpected char "'" at 3 */
    {"{{ 1 + }}", NULL}, /* jinja2: TemplateSyntaxError: unexpected 'end of print statement' */
    {"{% for x in xs %}{% macro m() %}{% break %}{% endmacro %}{% endfor %}",
     NULL}, /* jinja2: SyntaxError: 'break' outside loop (<template>, line 19) */
            /* unknown filter in an if */
    {"{% if false %}{{ foo | nosuchfilter }}{% endif %}ok", "ok"},
    /* call blocks, with, varargs, kwargs, loop.changed */
    {"{% macro m(a) %}[{{ a }}|{{ varargs }}|{{ kwargs }}]{% endmacro %}{{ m(1, 2, 3, x=4) }}{{ "
     "m() }}",
     "[1|(2, 3)|{'x': 4}][|()|{}]"},
    {"{% macro wrap(t) %}<{{ t }}>{{ caller() }}</{{ t }}>{% endmacro %}{% call wrap('b') %}inner "
     "{{ 1 + 1 }}{% endcall %}",
     "<b>inner 2</b>"},
    {"{% macro list(items) %}{% for i in items %}{{ caller(i, loop.index) }}{% endfor %}{% "
     "endmacro %}{% call(x, n) list(['a', 'b']) %}{{ n }}={{ x }};{% endcall %}",
     "1=a;2=b;"},
    {"{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}{{ a }}|{% set q = 5 %}{% with q = q + 1 %}{{ "
     "q }}{% endwith %}{{ q }}",
     "3|65"},
    {"{% for x in [1, 1, 2, 2, 1] %}{% if loop.changed(x) %}{{ x }}{% endif %}{% endfor %}", "121"},
    {"{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, x=2) }}",
     NULL}, /* jinja2: TypeError: macro 'm' takes no keyword argument 'x' */
    {"{% macro m() %}{{ caller() }}{% endmacro %}{{ m() }}",
     NULL}, /* jinja2: UndefinedError: No caller defined */
    {"{% macro m() %}x{% endmacro %}{% call m() %}y{% endcall %}",
     NULL}, /* jinja2: TypeError: macro 'm' was invoked with two values for the special caller
               argument. This is  */
    {"{{ m(a=2, a=3) }}",
     NULL}, /* jinja2: SyntaxError: keyword argument repeated: a (<template>, line 12) */
    {"{% if false %}{% include \"x\" %}{% endif %}ok", "ok"},
    {"{% import \"x\" as y %}ok",
     NULL}, /* jinja2: TypeError: no loader for this environment specified */
    {"{% set x = 1 %}{% block b %}[{{ x }}]{% endblock %}|{% block c scoped %}s{% endblock c %}",
     "[1]|s"},
};
/* clang-format on */

/* Compiles and renders src with vars (JSON text) under o; the status, output in *out. */
static enum hearth_status render(const char *src, const char *vars, const struct jinja_opts *o,
                                 char **out, char *err, size_t err_len)
{
    struct jinja_template *t = NULL;
    *out                     = NULL;
    enum hearth_status st    = jinja_compile(src, strlen(src), &t, err, err_len);
    if (st != HEARTH_OK)
        return st;
    cJSON *v = vars ? cJSON_Parse(vars) : NULL;
    st       = jinja_render(t, v, o, out, NULL, err, err_len);
    cJSON_Delete(v);
    jinja_free(t);
    return st;
}

static void test_table(void **state)
{
    (void)state;
    struct jinja_opts o;
    jinja_opts_default(&o);
    o.now   = NOW;
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[HEARTH_ERR_MAX], *out;
        enum hearth_status st = render(cases[i].tmpl, VARS, &o, &out, err, sizeof err);
        if (cases[i].want && (st != HEARTH_OK || strcmp(out, cases[i].want))) {
            print_message("case %zu: %s\n  want: [%s]\n  got:  [%s]\n", i, cases[i].tmpl,
                          cases[i].want, st == HEARTH_OK ? out : err);
            bad++;
        } else if (!cases[i].want && st == HEARTH_OK) {
            print_message("case %zu: %s\n  want an error, got: [%s]\n", i, cases[i].tmpl, out);
            bad++;
        } else if (!cases[i].want && (!err[0] || strchr(err, '\n'))) {
            print_message("case %zu: the error is not one line: [%s]\n", i, err);
            bad++;
        }
        free(out);
    }
    assert_int_equal(bad, 0);
}

static void expect_status(const char *src, const struct jinja_opts *o, enum hearth_status want,
                          const char *err_part)
{
    char err[HEARTH_ERR_MAX], *out;
    enum hearth_status st = render(src, VARS, o, &out, err, sizeof err);
    if (st != want || (err_part && !strstr(err, err_part)))
        print_message("%s: status %d (want %d), err [%s]\n", src, st, want, err);
    assert_int_equal(st, want);
    if (err_part)
        assert_non_null(strstr(err, err_part));
    assert_null(out);
}

static void test_limits(void **state)
{
    (void)state;
    struct jinja_opts o;
    jinja_opts_default(&o);
    /* unbounded recursion */
    /* unbounded recursion: the macro depth bound, or under sanitizers' big frames the stack's */
    expect_status("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", &o, HEARTH_ERANGE,
                  "nest");
    /* a loop of loops: 10^15 iterations if nothing stopped it (10M steps keep the test quick) */
    o.max_steps = 10 * 1000 * 1000;
    expect_status("{% for a in range(100000) %}{% for b in range(100000) %}{% for c in "
                  "range(100000) %}{% endfor %}{% endfor %}{% endfor %}",
                  &o, HEARTH_ERANGE, "10000000 steps");
    /* doubling a string: past the output bound before the memory bound */
    expect_status("{% set ns = namespace(s='x') %}{% for i in range(100) %}"
                  "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}",
                  &o, HEARTH_ERANGE, "bytes");
    expect_status("{{ 'x' * 100000000 }}", &o, HEARTH_ERANGE, NULL);
    /* many small outputs */
    o.max_output = 1000;
    expect_status("{% for i in range(10000) %}{{ i }}{% endfor %}", &o, HEARTH_ERANGE,
                  "1000 bytes");
    /* memory: lists that grow without output */
    jinja_opts_default(&o);
    o.max_memory = 4u << 20;
    expect_status("{% set ns = namespace(l=[0]) %}{% for i in range(30) %}"
                  "{% set ns.l = ns.l + ns.l %}{% endfor %}{{ ns.l | length }}",
                  &o, HEARTH_ERANGE, "memory");
    /* work inside one call counts too: a 100k-element scan per iteration ends on steps */
    jinja_opts_default(&o);
    o.max_steps = 1000 * 1000;
    {
        cJSON *vars = cJSON_CreateObject(), *big = cJSON_AddArrayToObject(vars, "big");
        for (int i = 0; i < 100000; i++)
            cJSON_AddItemToArray(big, cJSON_CreateNumber(i));
        const char *src          = "{% for i in range(100000) %}{{ 99999 in big }}{% endfor %}";
        struct jinja_template *t = NULL;
        char err[HEARTH_ERR_MAX], *out;
        assert_int_equal(jinja_compile(src, strlen(src), &t, err, sizeof err), HEARTH_OK);
        assert_int_equal(jinja_render(t, vars, &o, &out, NULL, err, sizeof err), HEARTH_ERANGE);
        assert_non_null(strstr(err, "steps"));
        jinja_free(t);
        cJSON_Delete(vars);
    }
    /* steps bound small: a modest loop fails cleanly */
    jinja_opts_default(&o);
    o.max_steps = 1000;
    expect_status("{% for i in range(10000) %}{% endfor %}", &o, HEARTH_ERANGE, "1000 steps");
    /* depth 1 still allows one call */
    jinja_opts_default(&o);
    o.max_depth = 1;
    char err[HEARTH_ERR_MAX], *out;
    assert_int_equal(
        render("{% macro f() %}ok{% endmacro %}{{ f() }}", NULL, &o, &out, err, sizeof err),
        HEARTH_OK);
    assert_string_equal(out, "ok");
    free(out);
    expect_status("{% macro g() %}x{% endmacro %}{% macro f() %}{{ g() }}{% endmacro %}{{ f() }}",
                  &o, HEARTH_ERANGE, NULL);
}

static void test_deep_nesting(void **state)
{
    (void)state;
    /* 100k open parentheses: a syntax error about depth, not a stack overflow */
    size_t n  = 100000;
    char *src = malloc(2 * n + 8);
    memcpy(src, "{{ ", 3);
    memset(src + 3, '(', n);
    strcpy(src + 3 + n, "1 }}");
    struct jinja_template *t = NULL;
    char err[HEARTH_ERR_MAX];
    assert_int_equal(jinja_compile(src, strlen(src), &t, err, sizeof err), HEARTH_EINVAL);
    assert_null(t);
    /* a long flat chain parses (iteratively) and its evaluation depth is bounded */
    size_t k = 0;
    k += (size_t)sprintf(src, "{{ 1");
    for (size_t i = 0; i < 20000; i++)
        k += (size_t)sprintf(src + k, "+1");
    strcpy(src + k, " }}");
    char *out;
    enum hearth_status st = render(src, NULL, NULL, &out, err, sizeof err);
    assert_true(st == HEARTH_OK || st == HEARTH_ERANGE);
    free(out);
    /* many nested ifs */
    k = 0;
    for (size_t i = 0; i < 5000; i++)
        k += (size_t)sprintf(src + k, "{%% if 1 %%}");
    src[k] = 0;
    assert_int_equal(jinja_compile(src, strlen(src), &t, err, sizeof err), HEARTH_EINVAL);
    free(src);
}

static void test_errors(void **state)
{
    (void)state;
    char err[HEARTH_ERR_MAX], *out;
    /* raise_exception's message, verbatim */
    assert_int_equal(render("{% if messages | length > 1 %}{{ raise_exception('Only one "
                            "message, please.') }}{% endif %}",
                            VARS, NULL, &out, err, sizeof err),
                     HEARTH_EINVAL);
    assert_string_equal(err, "Only one message, please.");
    /* syntax errors name the line */
    struct jinja_template *t = NULL;
    const char *src          = "line one\n{% if x %}\n{{ x + }}\n{% endif %}";
    assert_int_equal(jinja_compile(src, strlen(src), &t, err, sizeof err), HEARTH_EINVAL);
    assert_non_null(strstr(err, "line 3"));
    src = "{% for x in y %}\n\n";
    assert_int_equal(jinja_compile(src, strlen(src), &t, err, sizeof err), HEARTH_EINVAL);
    assert_non_null(strstr(err, "endfor"));
    /* undefined misuse says what was undefined */
    assert_int_equal(render("{{ messages[0].nope.x }}", VARS, NULL, &out, err, sizeof err),
                     HEARTH_EINVAL);
    assert_non_null(strstr(err, "'dict object' has no attribute 'nope'"));
    /* a positional index too big for an int must not wrap to a negative one (found by
     * fuzz_jinja), and a field of digits and letters is a keyword, as in Python */
    assert_int_equal(
        render("{{ '{99999999999999999999}'.format(1) }}", NULL, NULL, &out, err, sizeof err),
        HEARTH_EINVAL);
    assert_non_null(strstr(err, "out of range"));
    assert_int_equal(render("{{ '{0x}'.format(1) }}", NULL, NULL, &out, err, sizeof err),
                     HEARTH_EINVAL);
    assert_non_null(strstr(err, "'0x'"));
    /* an empty sequence times a huge count is empty at once (a fuzzer's slow unit) */
    assert_int_equal(render("[{{ () * 6666666666666666 * 20 }}|{{ '' * 9999999999999 }}|"
                            "{{ [] * 4000000000000000000 }}]",
                            NULL, NULL, &out, err, sizeof err),
                     HEARTH_OK);
    assert_string_equal(out, "[()||[]]");
    free(out);
    /* an empty template and no variables */
    assert_int_equal(render("", NULL, NULL, &out, err, sizeof err), HEARTH_OK);
    assert_string_equal(out, "");
    free(out);
    /* a tiny error buffer is not overrun */
    char small[8];
    assert_int_equal(
        render("{{ raise_exception('a long message') }}", NULL, NULL, &out, small, sizeof small),
        HEARTH_EINVAL);
    assert_string_equal(small, "a long ");
    jinja_free(NULL);
}

/* A 100k-key object: the dict's hash index keeps building and lookups linear in its size. */
static void test_big_dict(void **state)
{
    (void)state;
    cJSON *vars = cJSON_CreateObject(), *d = cJSON_AddObjectToObject(vars, "d");
    char key[32];
    for (int i = 0; i < 100000; i++) {
        snprintf(key, sizeof key, "k%d", i);
        cJSON_AddNumberToObject(d, key, i);
    }
    cJSON_AddNumberToObject(d, "k7", -7); /* a duplicate key: the last one wins, as json.loads */
    const char *src = "{{ d | length }} {{ d.k99999 }} {{ d['k7'] }} {{ d.get('nope', 0) }}"
                      "{% set ns = namespace(n=0) %}{% for k in d %}{% set ns.n = ns.n + 1 %}"
                      "{% endfor %} {{ ns.n }}";
    struct jinja_template *t = NULL;
    char err[HEARTH_ERR_MAX], *out;
    assert_int_equal(jinja_compile(src, strlen(src), &t, err, sizeof err), HEARTH_OK);
    assert_int_equal(jinja_render(t, vars, NULL, &out, NULL, err, sizeof err), HEARTH_OK);
    assert_string_equal(out, "100000 99999 -7 0 100000");
    free(out);
    jinja_free(t);
    cJSON_Delete(vars);
}

/* A cJSON raw item is read from its text as json.loads would: 1.0 stays a float. */
static void test_raw_json(void **state)
{
    (void)state;
    const char *raw = "{\"a\": 1.0, \"b\": [2.50, 1e5, -0.0, 12345678901234], \"c\": "
                      "\"\\u00e9\\ud83d\\ude00\\n\", \"a\": 3, \"d\": {\"e\": null, \"f\": true}, "
                      "\"g\": NaN, \"h\": -Infinity}";
    /* jinja2's rendering of json.loads(raw) */
    const char *want =
        "{\"a\": 3, \"b\": [2.5, 100000.0, -0.0, 12345678901234], \"c\": \"\303\251\360\237\230"
        "\200\\n\", \"d\": {\"e\": null, \"f\": true}, \"g\": NaN, \"h\": -Infinity}|[2.5, "
        "100000.0, -0.0, 12345678901234]|3|\303\251\360\237\230\200\n|{'a': 3, 'b': [2.5, "
        "100000.0, -0.0, 12345678901234], 'c': '\303\251\360\237\230\200\\n', 'd': {'e': None, "
        "'f': True}, 'g': nan, 'h': -inf}";
    const char *src          = "{{ x | tojson }}|{{ x.b }}|{{ x.a }}|{{ x.c }}|{{ x }}";
    struct jinja_template *t = NULL;
    char err[HEARTH_ERR_MAX], *out;
    assert_int_equal(jinja_compile(src, strlen(src), &t, err, sizeof err), HEARTH_OK);
    cJSON *vars = cJSON_CreateObject();
    cJSON_AddItemToObject(vars, "x", cJSON_CreateRaw(raw));
    assert_int_equal(jinja_render(t, vars, NULL, &out, NULL, err, sizeof err), HEARTH_OK);
    assert_string_equal(out, want);
    free(out);
    cJSON_Delete(vars);
    /* bad raw text and integers past 64 bits are errors, not guesses */
    const char *bad[] = {"{\"a\": }", "[1, 2", "99999999999999999999", "\"\\x\"", "1 2"};
    const enum hearth_status why[] = {HEARTH_EINVAL, HEARTH_EINVAL, HEARTH_ERANGE, HEARTH_EINVAL,
                                      HEARTH_EINVAL};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        vars = cJSON_CreateObject();
        cJSON_AddItemToObject(vars, "x", cJSON_CreateRaw(bad[i]));
        assert_int_equal(jinja_render(t, vars, NULL, &out, NULL, err, sizeof err), why[i]);
        assert_null(out);
        cJSON_Delete(vars);
    }
    jinja_free(t);
}

/* Renders one template from several threads at once; each must get the same text. */
struct worker {
    const struct jinja_template *t;
    const cJSON *vars;
    char *out;
};

static void *work(void *arg)
{
    struct worker *w = arg;
    char err[HEARTH_ERR_MAX];
    for (int i = 0; i < 50; i++) {
        free(w->out);
        w->out = NULL;
        if (jinja_render(w->t, w->vars, NULL, &w->out, NULL, err, sizeof err) != HEARTH_OK)
            break;
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    const char *src          = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
                               "{{ d | tojson }}{% set ns = namespace(n=0) %}"
                               "{% for x in xs %}{% set ns.n = ns.n + x %}{% endfor %}{{ ns.n }}";
    struct jinja_template *t = NULL;
    char err[HEARTH_ERR_MAX];
    assert_int_equal(jinja_compile(src, strlen(src), &t, err, sizeof err), HEARTH_OK);
    cJSON *vars = cJSON_Parse(VARS);
    pthread_t th[4];
    struct worker w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (struct worker){t, vars, NULL};
        pthread_create(&th[i], NULL, work, &w[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_non_null(w[i].out);
        assert_string_equal(w[i].out, "<user>hi<assistant>None{\"b\": 1, \"a\": [1, \"x\"]}6");
        free(w[i].out);
    }
    cJSON_Delete(vars);
    jinja_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_deep_nesting), cmocka_unit_test(test_errors),
        cmocka_unit_test(test_threads),      cmocka_unit_test(test_big_dict),
        cmocka_unit_test(test_raw_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
