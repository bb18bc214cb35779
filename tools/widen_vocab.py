#!/usr/bin/python3
"""Writes a tokenizer-only GGUF with a vocabulary widened to N tokens.

  /usr/bin/python3 tools/widen_vocab.py IN.gguf OUT.gguf --tokens 151936

The shared vocabularies stop at 102k tokens (deepseek-llm), while Qwen's and
Llama 3's are 128k to 152k: a grammar's mask and the sampler cost in
proportion to the vocabulary, so benchmarks need one that size. This copies
every tokenizer.* key of IN and appends tokens made by joining two existing
ones (deterministic: a fixed-seed generator), the way BPE's later merges
make longer tokens. The new tokens have no merges, so tokenizing never
produces them, but a model can sample them: right for decode benchmarks,
not for tokenizer tests. Then build a model on it with
../shared/tools/mkgguf.py --vocab-from OUT.gguf.

Needs Debian's python3-numpy (through mkgguf.py's reader and writer).
"""
import argparse
import os
import random
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "shared", "tools"))
import mkgguf  # noqa: E402  (the shared GGUF reader and writer)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--tokens", type=int, default=151936)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    kv = {k: v for k, v in mkgguf.read_kv(a.src).items() if k.startswith("tokenizer.")}
    def array(key):  # (ARR, (element type, items)) -> element type, items
        return kv[key][1][0], list(kv[key][1][1])

    et, tokens = array("tokenizer.ggml.tokens")
    if a.tokens <= len(tokens):
        sys.exit(f"{a.src} already has {len(tokens)} tokens")
    tt, types = array("tokenizer.ggml.token_type") if "tokenizer.ggml.token_type" in kv else (0, None)
    st, scores = array("tokenizer.ggml.scores") if "tokenizer.ggml.scores" in kv else (0, None)
    normal = [t for i, t in enumerate(tokens) if not types or types[i] == 1]
    seen = set(tokens)
    rng = random.Random(a.seed)
    while len(tokens) < a.tokens:
        t = rng.choice(normal) + rng.choice(normal)
        if len(t) > 24 or t in seen:
            continue
        seen.add(t)
        tokens.append(t)
        if types is not None:
            types.append(1)
        if scores is not None:
            scores.append(-1e6)
    kv["tokenizer.ggml.tokens"] = (mkgguf.ARR, (et, tokens))
    if types is not None:
        kv["tokenizer.ggml.token_type"] = (mkgguf.ARR, (tt, types))
    if scores is not None:
        kv["tokenizer.ggml.scores"] = (mkgguf.ARR, (st, scores))
    out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, 0, len(kv)))
    for k, (t, v) in sorted(kv.items()):
        mkgguf.w_str(out, k)
        out += struct.pack("<I", t)
        mkgguf.w_val(out, t, v)
    with open(a.out, "wb") as f:
        f.write(out)
    print(f"{a.out}: {len(tokens)} tokens")


if __name__ == "__main__":
    main()
