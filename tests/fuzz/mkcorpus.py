#!/usr/bin/env python3
"""mkcorpus.py: writes the seed corpus of fuzz_gguf into tests/fuzz/corpus/gguf.

Small valid GGUF files covering every metadata type, nested arrays, several
tensor types and alignments, plus the first 16 KiB of models/stories260K.gguf
(its whole header, cut inside the tensor data). Deterministic: rerunning gives
the same bytes.

    python3 tests/fuzz/mkcorpus.py
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus", "gguf")
MODELS = os.path.join(HERE, "..", "..", "models")

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
       BOOL: "<B", U64: "<Q", I64: "<q", F64: "<d"}
# ggml type id: (elements per block, bytes per block)
DTYPES = {0: (1, 4), 1: (1, 2), 30: (1, 2), 2: (32, 18), 8: (32, 34), 12: (256, 144), 14: (256, 210)}


def s(text):
    b = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(b)) + b


def value(t, v):
    """v for ARR is (element type, [elements])."""
    if t == STR:
        return s(v)
    if t == ARR:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(value(et, x) for x in items)
    return struct.pack(FMT[t], v)


def gguf(kvs, tensors, version=3, alignment=32):
    """kvs: [(key, type, value)]; tensors: [(name, ne list, type id)], laid out in order."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
    for k, t, v in kvs:
        out += s(k) + struct.pack("<I", t) + value(t, v)
    data, offsets = b"", []
    for name, ne, ty in tensors:
        block, block_len = DTYPES[ty]
        n = 1
        for d in ne:
            n *= d
        offsets.append(len(data))
        data += bytes((i * 7 + len(name)) & 0xFF for i in range(n // block * block_len))
        data += b"\0" * (-len(data) % alignment)
    for (name, ne, ty), off in zip(tensors, offsets):
        out += s(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<q", d) for d in ne)
        out += struct.pack("<IQ", ty, off)
    out += b"\0" * (-len(out) % alignment)
    return out + data


def main():
    os.makedirs(OUT, exist_ok=True)
    files = {}
    files["every-type.gguf"] = gguf([
        ("general.architecture", STR, "llama"),
        ("general.name", STR, "every \"type\"\n"),
        ("t.u8", U8, 200), ("t.i8", I8, -5), ("t.u16", U16, 60000), ("t.i16", I16, -3),
        ("t.u32", U32, 4000000000), ("t.i32", I32, -7), ("t.f32", F32, 0.5), ("t.bool", BOOL, 1),
        ("t.u64", U64, 2**63 + 5), ("t.i64", I64, -2**40), ("t.f64", F64, 1e300),
        ("t.empty", ARR, (U32, [])),
        ("t.bools", ARR, (BOOL, [0, 1, 1])),
        ("t.f32s", ARR, (F32, [0.0, -1.5, 3.25])),
    ], [("a.weight", [4, 2], 0), ("b.weight", [32, 2], 8), ("c.bias", [3], 1)])
    files["nested-arrays.gguf"] = gguf([
        ("n.pairs", ARR, (ARR, [(U16, [7, 8]), (STR, ["x", "yz"]), (U8, [])])),
        ("n.deep", ARR, (ARR, [(ARR, [(ARR, [(I64, [-1, 2])])])])),
        ("n.strs", ARR, (ARR, [(STR, []), (STR, ["", "a"])])),
        ("general.alignment", U32, 64),
    ], [("x", [256], 12), ("y", [8, 1, 1, 2], 0)], alignment=64)
    files["tokenizer.gguf"] = gguf([
        ("general.architecture", STR, "qwen2"),
        ("tokenizer.ggml.model", STR, "gpt2"),
        ("tokenizer.ggml.tokens", ARR, (STR, ["!", "\"", "a", "b", "ab", "\u0120the", "<|im_end|>"])),
        ("tokenizer.ggml.token_type", ARR, (I32, [1, 1, 1, 1, 1, 1, 3])),
        ("tokenizer.ggml.merges", ARR, (STR, ["a b", "\u0120 t"])),
        ("tokenizer.ggml.scores", ARR, (F32, [0.0, -1.0, -2.0, -3.0, -4.0, -5.0, 0.0])),
        ("tokenizer.ggml.add_bos_token", BOOL, 0),
        ("qwen2.rope.freq_base", F32, 1e6),
    ], [("token_embd.weight", [32, 7], 2), ("output_norm.weight", [32], 0)], version=2)
    files["quant-k.gguf"] = gguf([
        ("general.architecture", STR, "llama"),
        ("llama.block_count", U32, 1),
        ("general.alignment", U32, 16),
    ], [("blk.0.ffn_down.weight", [256, 2], 14), ("blk.0.ffn_up.weight", [256], 12),
        ("blk.0.attn_norm.weight", [5], 30)], alignment=16)
    files["empty.gguf"] = gguf([], [])
    stories = os.path.join(MODELS, "stories260K.gguf")
    if os.path.exists(stories):
        with open(stories, "rb") as fp:
            files["stories260K-head16k.gguf"] = fp.read(16384)
    for name, blob in files.items():
        with open(os.path.join(OUT, name), "wb") as fp:
            fp.write(blob)
        print(f"{name}: {len(blob)} bytes")


if __name__ == "__main__":
    main()
