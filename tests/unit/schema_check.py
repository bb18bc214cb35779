#!/usr/bin/env python3
"""Holds test_schema's data to a real JSON Schema validator.

Reads the case files named (schema_cases.json, and the generated cases
test_schema writes beside it) and checks with python3-jsonschema that every "accept" text is valid,
every "reject" text invalid (or not JSON), and every "strict" text valid
(texts the grammar refuses by design, though the schema allows them).
Exits 0 when all agree, 1 listing the disagreements, 77 when jsonschema is
absent (the caller skips). Formats are checked: date and uuid by
jsonschema's own checkers, time and date-time by RFC 3339 here, since
jsonschema needs a package Debian may not have for those.
"""
import datetime
import json
import re
import sys

try:
    import jsonschema
except ImportError:
    print("schema_check: python3-jsonschema is not installed")
    sys.exit(77)

checker = jsonschema.Draft202012Validator.FORMAT_CHECKER

TIME = re.compile(r"^(\d\d):(\d\d):(\d\d)(\.\d+)?([Zz]|[+-](\d\d):(\d\d))$")


def rfc3339_time(s):
    m = TIME.match(s)
    if not m:
        return False
    h, mi, sec = int(m[1]), int(m[2]), int(m[3])
    if h > 23 or mi > 59 or sec > 60:
        return False
    return not m[6] or (int(m[6]) <= 23 and int(m[7]) <= 59)


def rfc3339_date_time(s):
    if len(s) < 11 or s[10] not in "Tt":
        return False
    try:
        datetime.date.fromisoformat(s[:10])
    except ValueError:
        return False
    return rfc3339_time(s[11:])


if "time" not in checker.checkers:
    checker.checks("time")(lambda s: not isinstance(s, str) or rfc3339_time(s))
if "date-time" not in checker.checkers:
    checker.checks("date-time")(lambda s: not isinstance(s, str) or rfc3339_date_time(s))


def no_constant(name):
    raise ValueError(f"{name} is not JSON")


def valid(schema, text):
    try:
        value = json.loads(text, parse_constant=no_constant)
    except ValueError:
        return False
    v = jsonschema.Draft202012Validator(schema, format_checker=checker)
    return v.is_valid(value)


def main():
    cases = []
    for path in sys.argv[1:]:
        with open(path, encoding="utf-8") as f:
            cases += json.load(f)["cases"]
    bad = 0
    n = 0
    for c in cases:
        if "refuse" in c:
            continue
        jsonschema.Draft202012Validator.check_schema(c["schema"])
        for kind, want in (("accept", True), ("reject", False), ("strict", True)):
            for text in c.get(kind, []):
                n += 1
                if valid(c["schema"], text) != want:
                    bad += 1
                    print(f"schema_check: {c['name']}: {kind} {text!r} is "
                          f"{'invalid' if want else 'valid'} for jsonschema")
    print(f"schema_check: {n} texts, {bad} disagreements")
    sys.exit(1 if bad else 0)


main()
