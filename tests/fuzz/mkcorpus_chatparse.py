#!/usr/bin/env python3
"""mkcorpus_chatparse.py: writes the seed corpus of fuzz_chatparse into
tests/fuzz/corpus/chatparse.

Each seed is two bytes and a model output: byte 0 is the tool format
(0 none, 1 hermes, 2 qwen3-coder, 3 llama3, 4 mistral, 5 deepseek-r1,
6 deepseek-v3.1) plus 7 for <think> markers or 14 for [THINK]; byte 1 the
options (4: start inside reasoning, 8: a 48-byte call cap, 16: random chunks
instead of bytes). A first byte of 255 makes the rest a chat template for
detection (the Qwen3 and DeepSeek-R1 templates of ../shared when present).
Deterministic.

    python3 tests/fuzz/mkcorpus_chatparse.py
"""
import os

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus", "chatparse")

HERMES = ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
          '<tool_call>\n{"name": "get_time", "arguments": {"tz": "CET"}}\n</tool_call>')
SEEDS = {
    "qwen3-think-call": (1 + 7, 16, '<think>\nWeather in Paris.\n</think>\n\n' + HERMES),
    "qwen25-parallel": (1, 0, 'Let me check.\n' + HERMES),
    "hermes-bad-json": (1, 16, '<tool_call>\n{"name": "f", "arguments": {"a": }\n</tool_call> x'),
    "hermes-unicode": (1 + 7, 16, '<tool_call>{"name": "t", "arguments": {"s": "Zürich 日本 \\u2600"}}'
                                  '</tool_call>'),
    "hermes-cap": (1, 8, '<tool_call>{"name": "f", "arguments": {"a": "0123456789abcdef"}}'
                         '</tool_call>'),
    "qwen3-coder": (2, 16, 'Sure.\n<tool_call>\n<function=get_weather>\n<parameter=city>\n'
                           'San Francisco\n</parameter>\n<parameter=days>\n3\n</parameter>\n'
                           '</function>\n</tool_call>'),
    "qwen35-in-think": (2 + 7, 4 | 16, 'Search it.\n</think>\n\n<tool_call>\n<function=search>\n'
                                       '<parameter=q>\n{"a": [1, null]}\n</parameter>\n</function>\n'
                                       '</tool_call>'),
    "llama3": (3, 0, '{"name": "get_weather", "parameters": {"city": "Paris"}}'),
    "llama3-tag": (3, 16, '<|python_tag|>{"type": "function", "name": "a", "parameters": {}}; '
                          '{"name": "b", "parameters": {"x": "}"}}'),
    "llama3-content": (3, 16, '{"answer": 42} is JSON'),
    "mistral-array": (4, 16, '[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}, "id": "abcDEF123"}]'),
    "mistral-args": (4, 16, 'Ok.[TOOL_CALLS]f[ARGS]{"a": 1}[TOOL_CALLS]g[CALL_ID]Xy12AbC9z[ARGS]{}'),
    "ministral-think": (4 + 14, 16, '[THINK]hmm[/THINK][TOOL_CALLS]f[ARGS]{"a": "[ARGS]"}'),
    "deepseek-r1": (5 + 7, 4 | 16, 'Need weather.\n</think>\n\n<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>'
                                   'function<｜tool▁sep｜>get_weather\n```json\n{"city": "Paris"}\n```'
                                   '<｜tool▁call▁end｜><｜tool▁calls▁end｜>'),
    "deepseek-v31": (6 + 7, 16, '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{"a": 1}'
                                '<｜tool▁call▁end｜><｜tool▁calls▁end｜>'),
    "reasoning-open": (0 + 7, 4, 'no close ever, 東京'),
    "plain": (0, 16, 'Hello, world!\n'),
}


SHARED = os.environ.get("HEARTH_SHARED") or os.path.join(HERE, "..", "..", "..", "shared")
TEMPLATES = ["Qwen-Qwen3-0.6B.jinja", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja"]


def main():
    os.makedirs(OUT, exist_ok=True)
    for name in TEMPLATES:
        path = os.path.join(SHARED, "templates", name)
        if os.path.exists(path):
            with open(path, "rb") as f, open(os.path.join(OUT, "template-" + name), "wb") as o:
                o.write(bytes([255]) + f.read())
    for name, (fmt, opts, text) in SEEDS.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(bytes([fmt, opts]) + text.encode())


if __name__ == "__main__":
    main()
