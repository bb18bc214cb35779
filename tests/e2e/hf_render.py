#!/usr/bin/python3
"""hf_render.py: the reference chat-template renderer, Hugging Face's apply_chat_template
environment rebuilt on Python jinja2 without transformers: an ImmutableSandboxedEnvironment
with trim_blocks and lstrip_blocks, loopcontrols, a {% generation %} tag rendered as its body,
raise_exception, strftime_now (at the request's fixed "now") and HF's tojson.

One request on stdin (a JSON object: template, messages, tools, add_generation_prompt,
bos_token, eos_token, kwargs, now): prints the rendering byte-exact and exits 0, or prints
the error's message and exits 1. A JSON list of requests: prints a JSON list of {"ok": true, "text": ...}
or {"ok": false, "error": ...}, one per request, and exits 0.

Messages come in OpenAI wire form and are given to the template as hearth serve gives them:
each tool_calls[].function.arguments JSON string is parsed into an object first, as HF
templates expect, and an assistant message's null content becomes "".
"""
import datetime
import json
import sys

import jinja2
import jinja2.ext
from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment


class AssistantTracker(jinja2.ext.Extension):
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def make_env():
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True,
        extensions=[AssistantTracker, jinja2.ext.loopcontrols])

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


ENV = make_env()
CACHE = {}


def parse_arguments(messages):
    out = []
    for m in messages:
        m = dict(m)
        # hearth serve's rule for a tool-calling assistant turn: content null reaches the
        # template as "" (src/serve/oai_request.c)
        if m.get("role") == "assistant" and m.get("content") is None:
            m["content"] = ""
        if isinstance(m.get("tool_calls"), list):
            calls = []
            for tc in m["tool_calls"]:
                tc = dict(tc)
                fn = tc.get("function")
                if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
                    fn = dict(fn)
                    try:
                        fn["arguments"] = json.loads(fn["arguments"])
                    except ValueError:
                        pass
                    tc["function"] = fn
                calls.append(tc)
            m["tool_calls"] = calls
        out.append(m)
    return out


def render(req):
    src = req["template"]
    if src not in CACHE:
        try:
            CACHE[src] = ENV.from_string(src)
        except Exception as e:  # a template jinja2 cannot compile refuses every request
            CACHE[src] = e
    t = CACHE[src]
    if isinstance(t, Exception):
        raise t
    now = req.get("now", 0)
    variables = dict(req.get("kwargs") or {})
    variables["messages"] = parse_arguments(req.get("messages", []))
    if req.get("tools"):
        variables["tools"] = req["tools"]
    variables["bos_token"] = req.get("bos_token", "")
    variables["eos_token"] = req.get("eos_token", "")
    variables["add_generation_prompt"] = bool(req.get("add_generation_prompt", False))
    variables["strftime_now"] = lambda fmt: datetime.datetime.fromtimestamp(now).strftime(fmt)
    return t.render(**variables)


def main():
    req = json.load(sys.stdin)
    if isinstance(req, list):
        results = []
        for r in req:
            try:
                results.append({"ok": True, "text": render(r)})
            except Exception as e:
                results.append({"ok": False, "error": "%s: %s" % (type(e).__name__, e)})
        sys.stdout.write(json.dumps(results, ensure_ascii=False))
        return 0
    try:
        text = render(req)
    except Exception as e:  # the message alone: raise_exception's text verbatim
        sys.stdout.write("%s\n" % e)
        return 1
    sys.stdout.buffer.write(text.encode("utf-8", "surrogatepass"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
