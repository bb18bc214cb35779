#version 450
// attn_f32: attention over an f32 KV cache (attn_common.glsl).
#define kv_load(buf, e) uintBitsToFloat(buf[e])
#include "attn_common.glsl"
