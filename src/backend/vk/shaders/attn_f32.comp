#version 450
// attn_f32: attention over an f32 KV cache (attn_common.glsl).
#define kv_pair(buf, buf2, e) uintBitsToFloat(buf2[(e) >> 1])
#include "attn_common.glsl"
