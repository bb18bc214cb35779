#!/usr/bin/python3
"""jinja_gen.py: random Jinja templates and what Python jinja2 renders from them, for the
differential test in tests/unit/test_jinja_templates.c.

    jinja_gen.py N SEED    prints a JSON list of N cases:
                           {"template": ..., "vars": {...}, "ok": bool, "text" | "error": ...}

Templates combine the variables below with operators, filters, tests, str/dict methods,
conditionals, loops (with loop.* and loop filters), set blocks, macros, namespaces and
whitespace control, a few statements deep. Rendering is Hugging Face's environment
(hf_render.ENV). Deterministic for a given SEED and Python. Cases whose text jinja2 cannot
reproduce on another run or that hearth documents as out of scope are left out: object
addresses (generators, methods), integers past 64 bits, complex numbers.
"""
import copy
import json
import os
import random
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_render  # noqa: E402

VARS = {"xs": [3, 1, 2], "d": {"b": 1, "a": [1, "x"]}, "s": "Hello World", "n": None, "f": 1.5,
        "i": 7, "e": "", "ys": ["b", "A", "c"],
        "ms": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": None, "k": 2}]}

ATOMS = ["xs", "d", "s", "n", "f", "i", "e", "ys", "ms", "ms[0]", "ms[1].content", "d.a",
         "d['b']", "1", "0", "-2", "2.5", "'ab'", "''", "'A b'", "[1, 2]", "[]", "{}",
         "{'k': 1}", "(1, 'x')", "none", "true", "false", "u", "xs[0]", "s[1:3]", "ys[::-1]",
         "range(3)", "loop_x", "'h\\u00e9\\u4e16\\U0001F600'", "'a\\nb\\t\\''", "'  pad  '",
         "1e-7", "-0.5", "10", "'3'", "'2.5'", "[{'role': 'x'}, {'role': 'y', 'n': 1}]",
         "{'b': 2, 'a': 1}", "(ms | last)", "u2"]
BINOPS = ["+", "-", "*", "/", "//", "%", "~", "==", "!=", "<", ">", "<=", ">=", "in", "not in",
          "and", "or", "**"]
FILTERS = ["length", "first", "last", "list", "string", "int", "float", "abs", "lower", "upper",
           "capitalize", "title", "trim", "tojson", "sort", "unique | list", "reverse | list",
           "join(',')", "join", "default('D')", "d('x', true)", "items | list", "dictsort",
           "sum", "min", "max", "map('string') | list", "select | list", "reject | list",
           "selectattr('role') | list", "map(attribute='role') | list", "replace('a', 'b')",
           "indent(2)", "count", "wordcount", "round", "e", "safe", "center(6)",
           "batch(2) | list", "truncate(5, true, '', 0)", "tojson(indent=1)",
           "tojson(sort_keys=true)", "tojson(ensure_ascii=true)", "list | tojson",
           "join('') | length", "sort(attribute='role') | list",
           "unique(attribute='role') | list", "groupby('role') | list", "dictsort(by='value')",
           "default", "string | length", "replace('', '-')", "indent(2, true, true)",
           "format(1)", "first | string", "map('length') | list", "reject('none') | list",
           "select('equalto', 1) | list", "rejectattr('role', 'equalto', 'x') | list"]
TESTS = ["defined", "undefined", "none", "string", "number", "integer", "float", "mapping",
         "iterable", "sequence", "boolean", "true", "false", "callable", "odd", "even",
         "divisibleby(2)", "eq(1)", "in([1, 'ab'])", "lower", "upper"]
METHODS = [".upper()", ".lower()", ".strip()", ".split()", ".split('l')", ".startswith('H')",
           ".endswith('d')", ".replace('l', 'L')", ".title()", ".find('o')", ".count('l')",
           ".items() | list", ".keys() | list", ".values() | list", ".get('a')",
           ".get('z', 0)", "[0]", "[-1]", "[1:]", "[::-1]", ".format(1)", ".rstrip('d')",
           ".lstrip('H')", "[2:-1]", "[-3:]", "[::2]", "[10:]", ".split(',', 1)",
           ".rsplit(' ', 1)", ".splitlines()", ".partition(',')", ".center(9)", ".zfill(5)",
           ".isdigit()", ".isalpha()", ".capitalize()", ".swapcase()", ".endswith(('x', 'd'))",
           ".find('z')", ".index('H')", ".join(['1', '2'])", "|length", ".removeprefix('He')"]
TEXTS = [" ", "\n", "  \n", "a", "\t", "\n\n", " b ", "x\n  ", "\r\n", "  ", "\n  y"]


def expr(r, depth=0):
    x = r.random()
    if depth > 2 or x < 0.3:
        return r.choice(ATOMS)
    if x < 0.5:
        return "(%s %s %s)" % (expr(r, depth + 1), r.choice(BINOPS), expr(r, depth + 1))
    if x < 0.65:
        return "(%s | %s)" % (expr(r, depth + 1), r.choice(FILTERS))
    if x < 0.75:
        return "(%s is %s%s)" % (expr(r, depth + 1), r.choice(["", "not "]), r.choice(TESTS))
    if x < 0.85:
        return r.choice(["s", "d", "xs", "ys", "e", "'a,b'"]) + r.choice(METHODS)
    if x < 0.95:
        return "(%s if %s else %s)" % (expr(r, depth + 1), expr(r, depth + 1),
                                       expr(r, depth + 1))
    return "(not %s)" % expr(r, depth + 1)


def ws(r):
    return "".join(r.choice(TEXTS) for _ in range(r.randint(0, 2)))


def tag(r, body):
    return "{%" + r.choice(["", "-", "+"]) + " " + body + " " + r.choice(["", "-", "+"]) + "%}"


def stmt(r, depth=0):
    x = r.random()
    if depth > 1 or x < 0.35:
        return ws(r) + "{{" + r.choice(["", "-"]) + " %s " % expr(r) + r.choice(["", "-"]) + "}}|"
    if x < 0.4:
        return "{%% set u2 %%}%s{%% endset %%}[{{ u2 }}]" % stmt(r, depth + 1)
    if x < 0.45:
        return ("{%% for k, v in (%s).items() %%}{{ k }}={{ v }};{{ loop.first }}{{ loop.last }}"
                "{{ loop.revindex }}{{ loop.previtem }}{%% endfor %%}"
                % r.choice(["d", "{'b': 2, 'a': 1}", "{}", "ms[0]"]))
    if x < 0.5:
        return ("{%% for x in %s if %s %%}{{ loop.index0 }}{{ loop.length }}{{ loop.nextitem }}"
                "{{ loop.cycle('o', 'e') }}{%% endfor %%}"
                % (expr(r, 1), expr(r, 1).replace("loop_x", "x")))
    if x < 0.6:
        return (tag(r, "for loop_x in %s" % expr(r, 1)) + ws(r) + stmt(r, depth + 1) +
                "{{ loop.index }}" + tag(r, "else") + "E" + tag(r, "endfor"))
    if x < 0.72:
        return (tag(r, "if %s" % expr(r)) + ws(r) + stmt(r, depth + 1) +
                tag(r, "elif %s" % expr(r)) + stmt(r, depth + 1) + tag(r, "else") + ws(r) +
                stmt(r, depth + 1) + tag(r, "endif") + ws(r))
    if x < 0.8:
        return "{%% set u = %s %%}%s" % (expr(r), stmt(r, depth + 1))
    if x < 0.9:
        return ("{%% macro mm(a, b=%s) %%}%s[{{ a }}{{ b }}]{%% endmacro %%}{{ mm(%s) }}"
                % (expr(r), stmt(r, depth + 1), expr(r)))
    if x < 0.94:
        return ("{%% set ns = namespace(v=%s) %%}{%% for q in xs %%}{%% set ns.v = %s %%}"
                "{%% endfor %%}{{ ns.v }}" % (expr(r), expr(r)))
    if x < 0.96:
        return ("{%% macro w(t) %%}<{{ t }}>{{ caller(%s) }}{{ varargs }}{%% endmacro %%}"
                "{%% call(c) w(%s, 1) %%}{{ c }}%s{%% endcall %%}"
                % (expr(r), expr(r), stmt(r, depth + 1)))
    if x < 0.98:
        return ("{%% filter %s %%}%s{%% endfilter %%}{%% with w1 = %s %%}{{ w1 }}{%% endwith %%}"
                % (r.choice(["upper", "trim", "title", "replace('a', 'b')", "indent(2)"]),
                   stmt(r, depth + 1), expr(r)))
    return ("{%% for t in [1, [2, [%s]], 'x'] recursive %%}{%% if t is iterable and t is not "
            "string %%}({{ loop(t) }}){%% else %%}{{ t }}{{ loop.depth }}{%% endif %%}"
            "{%% endfor %%}" % expr(r))


OUT_OF_SCOPE = re.compile(r" at 0x|<generator|<built-in|\d{19,}|\dj\)|OverflowError|"
                          r"RecursionError|MemoryError")


def main():
    n, seed = int(sys.argv[1]), int(sys.argv[2])
    r = random.Random(seed)
    cases = []
    while len(cases) < n:
        t = "".join(stmt(r) for _ in range(1 + (r.random() < 0.3)))
        try:
            case = {"ok": True, "text": hf_render.ENV.from_string(t).render(**copy.deepcopy(VARS))}
        except Exception as ex:  # jinja2's refusal: hearth must refuse too
            case = {"ok": False, "error": "%s: %s" % (type(ex).__name__, ex)}
        if OUT_OF_SCOPE.search(case.get("text", "") + case.get("error", "")):
            continue
        case.update(template=t, vars=VARS)
        cases.append(case)
    sys.stdout.write(json.dumps(cases, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
