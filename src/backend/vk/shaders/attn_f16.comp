#version 450
// attn_f16: attention over an f16 KV cache (attn_common.glsl); elements 2i and 2i + 1 share
// word i, low half first.
#define kv_pair(buf, buf2, e) unpackHalf2x16(buf[(e) >> 1])
#include "attn_common.glsl"
