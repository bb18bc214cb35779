#!/usr/bin/env python3
"""mkcorpus_chatparse.py: writes the seed corpus of fuzz_chatparse into
tests/fuzz/corpus/chatparse.

Each seed is two bytes and a model output: byte 0 is the tool format
(0 none, 1 hermes, 2 qwen3-coder, 3 llama3, 4 mistral, 5 deepseek-r1,
6 deepseek-v3.1, 7 gpt-oss, 8 glm, 9 kimi-k2, 10 minimax-m2, 11 seed-oss,
12 granite, 13 functionary-v3.1, 14 functionary-v3.2, 15 command-r,
16 command-r7b, 17 gemma4: enum chatparse_tools) plus 18 times the
reasoning markers (1 <think>, 2 [THINK], 3 gpt-oss' analysis channel,
4 <seed:think>, 5 <|START_THINKING|>, 6 Gemma 4's thought channel); byte 1 the
options (4: start inside reasoning, 8: a 48-byte call cap, 16: random chunks
instead of bytes, 32: finished as cut by the token limit, 64: arguments
streamed). A first byte of 255 makes the rest a chat template for
detection (the Qwen3 and DeepSeek-R1 templates of ../shared when present).
Deterministic.

    python3 tests/fuzz/mkcorpus_chatparse.py
"""
import os

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus", "chatparse")

K = 18     # formats: byte 0 is the format plus K times the reasoning markers
T = K      # <think>
HERMES = ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
          '<tool_call>\n{"name": "get_time", "arguments": {"tz": "CET"}}\n</tool_call>')
SEEDS = {
    "qwen3-think-call": (1 + T, 16, '<think>\nWeather in Paris.\n</think>\n\n' + HERMES),
    "qwen25-parallel": (1, 0, 'Let me check.\n' + HERMES),
    "hermes-bad-json": (1, 16, '<tool_call>\n{"name": "f", "arguments": {"a": }\n</tool_call> x'),
    "hermes-unicode": (1 + T, 16, '<tool_call>{"name": "t", "arguments": {"s": "Zürich 日本 \\u2600"}}'
                                  '</tool_call>'),
    "hermes-cap": (1, 8, '<tool_call>{"name": "f", "arguments": {"a": "0123456789abcdef"}}'
                         '</tool_call>'),
    "qwen3-coder": (2, 16, 'Sure.\n<tool_call>\n<function=get_weather>\n<parameter=city>\n'
                           'San Francisco\n</parameter>\n<parameter=days>\n3\n</parameter>\n'
                           '</function>\n</tool_call>'),
    "qwen35-in-think": (2 + T, 4 | 16, 'Search it.\n</think>\n\n<tool_call>\n<function=search>\n'
                                       '<parameter=q>\n{"a": [1, null]}\n</parameter>\n</function>\n'
                                       '</tool_call>'),
    "llama3": (3, 0, '{"name": "get_weather", "parameters": {"city": "Paris"}}'),
    "llama3-tag": (3, 16, '<|python_tag|>{"type": "function", "name": "a", "parameters": {}}; '
                          '{"name": "b", "parameters": {"x": "}"}}'),
    "llama3-content": (3, 16, '{"answer": 42} is JSON'),
    "mistral-array": (4, 16, '[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}, "id": "abcDEF123"}]'),
    "mistral-args": (4, 16, 'Ok.[TOOL_CALLS]f[ARGS]{"a": 1}[TOOL_CALLS]g[CALL_ID]Xy12AbC9z[ARGS]{}'),
    "ministral-think": (4 + 2 * K, 16, '[THINK]hmm[/THINK][TOOL_CALLS]f[ARGS]{"a": "[ARGS]"}'),
    "deepseek-r1": (5 + T, 4 | 16, 'Need weather.\n</think>\n\n<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>'
                                   'function<｜tool▁sep｜>get_weather\n```json\n{"city": "Paris"}\n```'
                                   '<｜tool▁call▁end｜><｜tool▁calls▁end｜>'),
    "deepseek-v31": (6 + T, 16, '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{"a": 1}'
                                '<｜tool▁call▁end｜><｜tool▁calls▁end｜>'),
    "reasoning-open": (0 + T, 4, 'no close ever, 東京'),
    "plain": (0, 16, 'Hello, world!\n'),
    "hermes-cut": (1, 16 | 32, 'Let me check.\n<tool_call>\n{"name": "get_weather", "argu'),
    "hermes-stream": (1, 64, '<tool_call>\n{"name": "f", "arguments": {"s": "Zürich }"}}\n</tool_call>'
                             '<tool_call>\n{"name": "g", "arguments": {}}\n</tool_call>'),
    "mistral-stream": (4, 16 | 64, '[TOOL_CALLS]f[ARGS]{"a": [1, 2]}[TOOL_CALLS]g[ARGS]{"b": "'),
    "llama3-stream": (3, 64 | 8, '{"name": "f", "parameters": {"a": "0123456789abcdef0123456789"}}'),
    "gpt-oss-final": (7 + 3 * K, 16, '<|channel|>analysis<|message|>2+2.<|end|><|start|>assistant'
                                     '<|channel|>final<|message|>4.<|return|>'),
    "gpt-oss-call": (7 + 3 * K, 16, '<|channel|>analysis<|message|>Weather.<|end|><|start|>assistant'
                                    '<|channel|>commentary to=functions.get_weather <|constrain|>json'
                                    '<|message|>{"city": "Paris"}<|call|>'),
    "glm": (8 + T, 16, '<think>Look.</think>\n<tool_call>get_weather\n<arg_key>city</arg_key>\n'
                       '<arg_value>Beijing</arg_value>\n<arg_key>days</arg_key>\n<arg_value>2'
                       '</arg_value>\n</tool_call>'),
    "kimi": (9 + T, 16, 'Sure.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0'
                        '<|tool_call_argument_begin|>{"city": "Tokyo"}<|tool_call_end|>'
                        '<|tool_calls_section_end|>'),
    "minimax": (10 + T, 16, '<minimax:tool_call>\n<invoke name="search">\n<parameter name="q">'
                            'x</parameter>\n<parameter name="n">5</parameter>\n</invoke>\n'
                            '</minimax:tool_call>'),
    "seed-oss": (11 + 4 * K, 16, '<seed:think>hmm</seed:think><seed:tool_call>\n<function=f>\n'
                                 '<parameter=a>1</parameter>\n</function>\n</seed:tool_call>'),
    "granite": (12, 16, '<|tool_call|>[{"name": "f", "arguments": {"a": 1}}, {"name": "g", '
                        '"arguments": {}}]'),
    "functionary-v31": (13, 16, 'Ok.<function=get_weather>{"city": "Oslo"}</function>'),
    "functionary-v32": (14, 16, 'all\nLet me check.>>>get_weather\n{"city": "Oslo"}>>>all\ndone'),
    "command-r": (15, 16, 'Action: ```json\n[{"tool_name": "f", "parameters": {"a": 1}}]\n```'),
    "command-r7b": (16 + 5 * K, 16, '<|START_THINKING|>Plan.<|END_THINKING|><|START_ACTION|>['
                                    '{"tool_call_id": "0", "tool_name": "f", "parameters": {}}]'
                                    '<|END_ACTION|><|START_RESPONSE|>x<|END_RESPONSE|>'),
    "gemma4": (17 + 6 * K, 16, '<|channel>thought\nRome.\n<channel|><|tool_call>call:f{city:<|"|>Rome'
                               '<|"|>,n:2,o:{<|"|>k<|"|>:[1,true]}}<tool_call|>'),
}


SHARED = os.environ.get("HEARTH_SHARED") or os.path.join(HERE, "..", "..", "..", "shared")
TEMPLATES = ["Qwen-Qwen3-0.6B.jinja", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
             "openai-gpt-oss-120b.jinja", "GLM-4.6.jinja", "google-gemma-4-31B-it.jinja"]


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
