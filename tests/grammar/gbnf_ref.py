#!/usr/bin/python3
"""gbnf_ref.py: the reference recogniser the grammar engine is checked against.

Parses GBNF as llama.cpp reads it (grammars/README.md there) and decides, with
an Earley parser over code points, whether a whole string is a sentence of
the grammar. It shares nothing with the C engine: repetitions become plain
helper rules, the parser keeps every item of every position, and nullable
rules are handled by advancing past them at prediction (Aycock and
Horspool), so the verdict is the textbook one for any context-free grammar.

What llama.cpp refuses is refused here too: syntax errors, a reference to an
undefined rule, a missing start rule, left recursion (also through rules
that can match the empty string), a minimum repetition above 2000. Also
refused: {m,n} with n < m, which llama.cpp does not check (it loops), and
token references (<...>), which have no meaning for a string.

Usage:
    gbnf_ref.py GRAMMAR.gbnf [--root NAME]   < ["s1", "s2", ...]
        prints [true, false, ...]: one verdict per string, in order.
    gbnf_ref.py --text 'root ::= "a"' [--root NAME] < [...]
        the same with the grammar given inline.
    gbnf_ref.py --check GRAMMAR.gbnf | --check-text TEXT [--root NAME]
        prints {"ok": true} or {"ok": false, "error": "..."}; exits 0 either way.
    gbnf_ref.py --verify CASES.json
        checks every recorded verdict of a cases file (see tests/grammar/cases.json)
        and every grammar its "invalid" list says must be refused; prints the
        disagreements and a summary, exits 1 when there is one.
A grammar that is refused makes the first two forms exit 2 with the reason on stderr.
"""

import json
import os
import sys

REPEAT_MAX = 2000  # llama.cpp refuses a larger minimum and reads a larger maximum as "no maximum"


class GrammarError(Exception):
    pass


# ------------------------------------------------------------------ symbols ---


class CharSet:
    """One code point from a set of inclusive ranges, or from its complement; any=True is '.'."""

    __slots__ = ("ranges", "negated", "any")

    def __init__(self, ranges, negated=False, any_=False):
        self.ranges = ranges
        self.negated = negated
        self.any = any_

    def matches(self, cp):
        if self.any:
            return True
        hit = any(lo <= cp <= hi for lo, hi in self.ranges)
        return hit != self.negated

    def __repr__(self):
        if self.any:
            return "."
        body = "".join("%X" % lo if lo == hi else "%X-%X" % (lo, hi) for lo, hi in self.ranges)
        return "[%s%s]" % ("^" if self.negated else "", body)


# A grammar is {name: [alternative, ...]}, an alternative a tuple of symbols, a
# symbol either a rule name (str) or a CharSet. Helper rules get names with a
# character no GBNF name can contain, so they never collide with the user's.


# ------------------------------------------------------------------- parser ---


def _is_word(c):
    return c.isascii() and (c.isalnum() or c == "-")


class Parser:
    def __init__(self, text):
        self.s = text
        self.i = 0
        self.rules = {}
        self.referenced = {}  # name -> position of its first use
        self.n_helpers = 0

    # -- position helpers

    def peek(self, k=0):
        j = self.i + k
        return self.s[j] if j < len(self.s) else ""

    def where(self, pos=None):
        pos = self.i if pos is None else pos
        line = self.s.count("\n", 0, pos) + 1
        col = pos - (self.s.rfind("\n", 0, pos) + 1) + 1
        return "line %d, column %d" % (line, col)

    def fail(self, what, pos=None):
        raise GrammarError("%s: %s" % (self.where(pos), what))

    def space(self, newline_ok):
        while True:
            c = self.peek()
            if c in (" ", "\t") or (newline_ok and c in ("\r", "\n")):
                self.i += 1
            elif c == "#":
                while self.peek() not in ("", "\r", "\n"):
                    self.i += 1
            else:
                return

    def helper(self, base, alts):
        self.n_helpers += 1
        name = "%s~%d" % (base, self.n_helpers)
        self.rules[name] = alts
        return name

    # -- lexical pieces

    def name(self):
        start = self.i
        while _is_word(self.peek()):
            self.i += 1
        if self.i == start:
            self.fail("expecting a rule name")
        return self.s[start:self.i]

    def integer(self):
        start = self.i
        while self.peek().isascii() and self.peek().isdigit():
            self.i += 1
        if self.i == start:
            self.fail("expecting an integer")
        return int(self.s[start:self.i])

    def hex_digits(self, n):
        digits = self.s[self.i:self.i + n]
        if len(digits) != n or any(c not in "0123456789abcdefABCDEF" for c in digits):
            self.fail("expecting %d hex digits" % n)
        self.i += n
        return int(digits, 16)

    def char(self):
        """One character of a literal or a class: a code point, after escapes."""
        c = self.peek()
        if c == "":
            self.fail("unexpected end of input")
        self.i += 1
        if c != "\\":
            return ord(c)
        e = self.peek()
        self.i += 1
        simple = {"t": 9, "r": 13, "n": 10, "\\": 92, '"': 34, "[": 91, "]": 93}
        if e in simple:
            return simple[e]
        width = {"x": 2, "u": 4, "U": 8}.get(e)
        if width is None:
            self.fail("unknown escape \\%s" % e, self.i - 2)
        return self.hex_digits(width)

    # -- structure

    def grammar(self):
        self.space(True)
        while self.i < len(self.s):
            self.rule()
        for name, pos in self.referenced.items():
            if name not in self.rules:
                self.fail("rule '%s' is used but never defined" % name, pos)
        return self.rules

    def rule(self):
        name = self.name()
        self.space(False)
        if self.s[self.i:self.i + 3] != "::=":
            self.fail("expecting ::=")
        self.i += 3
        self.space(True)
        # A later definition of the same name replaces the earlier one, as in llama.cpp.
        self.rules[name] = self.alternates(name, nested=False)
        c = self.peek()
        if c == "\r":
            self.i += 2 if self.peek(1) == "\n" else 1
        elif c == "\n":
            self.i += 1
        elif c != "":
            self.fail("expecting newline or end")
        self.space(True)

    def alternates(self, base, nested):
        alts = [self.sequence(base, nested)]
        while self.peek() == "|":
            self.i += 1
            self.space(True)
            alts.append(self.sequence(base, nested))
        return alts

    def sequence(self, base, nested):
        """Items in order; each item a list of symbols (a literal is one symbol per character)."""
        items = []
        while True:
            c = self.peek()
            start = self.i
            if c == '"':
                self.i += 1
                syms = []
                while self.peek() != '"':
                    if self.peek() == "":
                        self.fail("unexpected end of input in a literal", start)
                    cp = self.char()
                    syms.append(CharSet([(cp, cp)]))
                self.i += 1
                items.append(syms)
            elif c == "[":
                self.i += 1
                negated = self.peek() == "^"
                if negated:
                    self.i += 1
                ranges = []
                while self.peek() != "]":
                    if self.peek() == "":
                        self.fail("unexpected end of input in a character class", start)
                    lo = self.char()
                    hi = lo
                    if self.peek() == "-" and self.peek(1) not in ("]", ""):
                        self.i += 1
                        hi = self.char()
                    elif self.peek() == "-" and self.peek(1) == "":
                        self.fail("unexpected end of input in a character class", start)
                    ranges.append((lo, hi))
                self.i += 1
                # llama.cpp writes nothing for an empty class, so it matches the empty string
                items.append([CharSet(ranges, negated)] if ranges else [])
            elif c == "<" or c == "!":
                self.fail("token references (<...>) cannot be matched against a string")
            elif c != "" and _is_word(c):
                name = self.name()
                self.referenced.setdefault(name, start)
                items.append([name])
            elif c == "(":
                self.i += 1
                self.space(True)
                alts = self.alternates(base, nested=True)
                if self.peek() != ")":
                    self.fail("expecting ')'")
                self.i += 1
                items.append([self.helper(base, [tuple(a) for a in alts])])
            elif c == ".":
                self.i += 1
                items.append([CharSet([], any_=True)])
            elif c in ("*", "+", "?", "{"):
                self.i += 1
                if c == "*":
                    lo, hi = 0, None
                elif c == "+":
                    lo, hi = 1, None
                elif c == "?":
                    lo, hi = 0, 1
                else:
                    lo, hi = self.braces(nested)
                if not items or not items[-1]:
                    self.fail("expecting an item before the repetition '%s'" % c, start)
                items[-1] = self.repeat(base, items[-1], lo, hi)
            else:
                return tuple(s for item in items for s in item)
            self.space(nested)

    def braces(self, nested):
        """{m}, {m,} or {m,n}, after the '{'; returns (m, n) with n None for no maximum."""
        self.space(nested)
        if not (self.peek().isascii() and self.peek().isdigit()):
            self.fail("expecting an integer after '{'")
        lo = self.integer()
        self.space(nested)
        if self.peek() == "}":
            self.i += 1
            hi = lo
        elif self.peek() == ",":
            self.i += 1
            self.space(nested)
            hi = None
            if self.peek().isascii() and self.peek().isdigit():
                hi = self.integer()
                self.space(nested)
            if self.peek() != "}":
                self.fail("expecting '}'")
            self.i += 1
        else:
            self.fail("expecting ',' or '}'")
        if lo > REPEAT_MAX:
            self.fail("a repetition of at least %d is more than %d" % (lo, REPEAT_MAX))
        if hi is not None and hi > REPEAT_MAX:
            hi = None
        if hi is not None and hi < lo:
            self.fail("a repetition {%d,%d} has its maximum below its minimum" % (lo, hi))
        return lo, hi

    def repeat(self, base, syms, lo, hi):
        """syms repeated lo to hi times (hi None: no maximum), as one helper rule."""
        body = tuple(syms)
        if hi == 0:
            # llama.cpp drops the item, leaving nothing a further repetition could apply to
            return []
        if hi is None:
            more = self.helper(base, [])
            self.rules[more] = [body + (more,), ()]
            tail = (more,)
        else:
            # at most hi - lo more, one optional copy inside the next: S? (S (S ...)?)?
            tail = ()
            for _ in range(max(hi - lo, 0)):
                tail = (self.helper(base, [body + tail, ()]),)
        return [self.helper(base, [body * lo + tail])]


def _nullable(rules):
    null = set()
    changed = True
    while changed:
        changed = False
        for name, alts in rules.items():
            if name not in null and any(all(s in null for s in alt) for alt in alts):
                null.add(name)
                changed = True
    return null


def _check_left_recursion(rules, null):
    """Refuses a rule that can reach itself before reading a character."""
    first = {}  # name -> rules that can start it
    for name, alts in rules.items():
        heads = set()
        for alt in alts:
            for s in alt:
                if isinstance(s, CharSet):
                    break
                heads.add(s)
                if s not in null:
                    break
        first[name] = heads
    state = {}  # name -> 1 while on the path, 2 when done

    def visit(name, path):
        state[name] = 1
        path.append(name)
        for nxt in sorted(first[name]):
            if state.get(nxt) == 1:
                cycle = path[path.index(nxt):] + [nxt]
                shown = [n.split("~")[0] for n in cycle]
                raise GrammarError("left recursion: %s" % " -> ".join(shown))
            if nxt not in state:
                visit(nxt, path)
        path.pop()
        state[name] = 2

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(rules) + 1000))
    for name in rules:
        if name not in state:
            visit(name, [])


class Grammar:
    def __init__(self, text, root="root"):
        self.rules = Parser(text).grammar()
        if root not in self.rules:
            raise GrammarError("the grammar has no rule '%s'" % root)
        self.root = root
        self.null = _nullable(self.rules)
        _check_left_recursion(self.rules, self.null)

    def accepts(self, text):
        """Earley recognition of the whole of text (a str: one symbol per code point)."""
        rules, null = self.rules, self.null
        n = len(text)
        # an item: (rule name, alternative index, dot, origin)
        sets = [set() for _ in range(n + 1)]
        todo = []

        def add(k, item):
            if item not in sets[k]:
                sets[k].add(item)
                todo.append(item)

        for a in range(len(rules[self.root])):
            add(0, (self.root, a, 0, 0))
        for k in range(n + 1):
            todo = list(sets[k])
            cp = ord(text[k]) if k < n else None
            while todo:
                name, a, dot, origin = item = todo.pop()
                alt = rules[name][a]
                if dot == len(alt):
                    # complete: advance every item at origin waiting for name
                    for w in list(sets[origin]):
                        wn, wa, wd, wo = w
                        walt = rules[wn][wa]
                        if wd < len(walt) and walt[wd] == name:
                            add(k, (wn, wa, wd + 1, wo))
                    continue
                sym = alt[dot]
                if isinstance(sym, CharSet):
                    if cp is not None and sym.matches(cp):
                        sets[k + 1].add((name, a, dot + 1, origin))
                    continue
                for b in range(len(rules[sym])):
                    add(k, (sym, b, 0, k))
                if sym in null:
                    add(k, (name, a, dot + 1, origin))
            if k < n and not sets[k + 1]:
                return False
        return any(
            name == self.root and o == 0 and d == len(rules[name][a])
            for name, a, d, o in sets[n]
        )


# ---------------------------------------------------------------------- CLI ---


def _read(path):
    with open(path, "rb") as f:
        return f.read().decode("utf-8")


def _verify(cases_path):
    with open(cases_path, "rb") as f:
        cases = json.loads(f.read().decode("utf-8"))
    base = os.path.dirname(os.path.abspath(cases_path))
    bad = 0
    n_acc = n_rej = 0
    for entry in cases["grammars"]:
        label = entry.get("file") or entry["name"]
        try:
            text = _read(os.path.join(base, entry["file"])) if "file" in entry else entry["text"]
            g = Grammar(text, entry.get("root", "root"))
        except GrammarError as e:
            print("%s: refused: %s" % (label, e))
            bad += 1
            continue
        for want, key in ((True, "accept"), (False, "reject")):
            for s in entry.get(key, []):
                got = g.accepts(s)
                n_acc += got
                n_rej += not got
                if got != want:
                    bad += 1
                    print("%s: %s %s but the cases say %s" % (
                        label, json.dumps(s, ensure_ascii=False),
                        "accepted" if got else "rejected", key))
    n_inv = 0
    for entry in cases.get("invalid", []):
        n_inv += 1
        try:
            Grammar(entry["grammar"], entry.get("root", "root"))
            bad += 1
            print("invalid %s: accepted, but the cases say it must be refused" % entry["name"])
        except GrammarError:
            pass
    print("%d grammars, %d strings (%d accepted, %d rejected), %d invalid grammars, %d disagreements"
          % (len(cases["grammars"]), n_acc + n_rej, n_acc, n_rej, n_inv, bad))
    return 1 if bad else 0


def main(argv):
    root = "root"
    if "--root" in argv:
        k = argv.index("--root")
        root = argv[k + 1]
        del argv[k:k + 2]
    if len(argv) == 2 and argv[0] == "--verify":
        return _verify(argv[1])
    if len(argv) == 2 and argv[0] in ("--check", "--check-text"):
        text = _read(argv[1]) if argv[0] == "--check" else argv[1]
        try:
            Grammar(text, root)
            print(json.dumps({"ok": True}))
        except GrammarError as e:
            print(json.dumps({"ok": False, "error": str(e)}))
        return 0
    if len(argv) == 2 and argv[0] == "--text":
        text = argv[1]
    elif len(argv) == 1 and not argv[0].startswith("-"):
        text = _read(argv[0])
    else:
        sys.stderr.write(__doc__)
        return 2
    try:
        g = Grammar(text, root)
    except GrammarError as e:
        sys.stderr.write("gbnf_ref: %s\n" % e)
        return 2
    strings = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    print(json.dumps([g.accepts(s) for s in strings]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
