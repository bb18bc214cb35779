#version 450
// kv_store_f16: K/V rows into an f16 cache, each element rounded as the CPU's f32_to_f16
// (f16.glsl), two to a word (kv_store_common.glsl).
#include "f16.glsl"
#define WORD_ELEMS 2u
#define pack(src, e) (f16_bits(src[e]) | (f16_bits(src[(e) + 1u]) << 16))
#include "kv_store_common.glsl"
