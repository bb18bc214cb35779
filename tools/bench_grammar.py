#!/usr/bin/python3
"""Decode speed with and without a JSON-schema grammar, on a running server.

Sends the same streamed /v1/completions request (same prompt, seed,
temperature 1, max_tokens) twice per round, once free and once with
llama.cpp's `json_schema` field, which hearth and llama-server both take,
and reports decode tokens per second from the stream's own clock: from the
first streamed token to the last, so prefill and connection set-up are
left out. The schema makes a long reply (an array of many small objects)
so both runs decode the full max_tokens. Rounds alternate free and
constrained runs to share the machine's noise.

  python3 tools/bench_grammar.py --url http://127.0.0.1:8080 [--rounds 5] [--tokens 256]

A benchmark, not a test: run it on a quiet machine, compare ratios taken
in one run, and say which CPU.
"""
import argparse
import json
import statistics
import time
import urllib.request

SCHEMA = {
    "type": "array",
    "minItems": 400,
    "items": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 24},
            "age": {"type": "integer", "minimum": 0, "maximum": 120},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
            "ok": {"type": "boolean"},
        },
        "required": ["name", "age", "tags", "ok"],
        "additionalProperties": False,
    },
}


def stream(url, body):
    """Returns (tokens streamed, seconds from the first to the last)."""
    req = urllib.request.Request(
        url + "/v1/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    times, n_tokens = [], None
    with urllib.request.urlopen(req, timeout=600) as r:
        for raw in r:
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            ch = chunk.get("choices") or []
            if ch and ch[0].get("text"):
                times.append(time.perf_counter())
            if chunk.get("usage"):
                n_tokens = chunk["usage"]["completion_tokens"]
    if len(times) < 2:
        raise SystemExit("bench_grammar: the server streamed fewer than 2 tokens")
    # the first chunk's token ends the clock's start: n - 1 tokens were decoded after it
    return (n_tokens or len(times)), times[-1] - times[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--prompt", default="Here is a list of people as JSON:")
    a = ap.parse_args()
    base = {
        "prompt": a.prompt,
        "max_tokens": a.tokens,
        "temperature": 1.0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    free, constrained = [], []
    for r in range(a.rounds + 1):  # round 0 warms up (and compiles the grammar once)
        n0, t0 = stream(a.url, dict(base, seed=100 + r))
        n1, t1 = stream(a.url, dict(base, seed=100 + r, json_schema=SCHEMA))
        if r == 0:
            continue
        free.append((n0 - 1) / t0)
        constrained.append((n1 - 1) / t1)
        print(f"round {r}: free {free[-1]:.1f} tok/s ({n0} tokens), "
              f"json_schema {constrained[-1]:.1f} tok/s ({n1} tokens)")
    f, c = statistics.median(free), statistics.median(constrained)
    print(f"median: free {f:.1f} tok/s, json_schema {c:.1f} tok/s, "
          f"overhead {100 * (f - c) / f:.1f}%")


if __name__ == "__main__":
    main()
