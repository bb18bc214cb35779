#version 450
// kv_store_f32: K/V rows into an f32 cache, bit for bit (kv_store_common.glsl).
#define WORD_ELEMS 1u
#define pack(src, e) floatBitsToUint(src[e])
#include "kv_store_common.glsl"
