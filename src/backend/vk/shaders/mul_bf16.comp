#version 450
// mul_bf16: y = W x (mul_common.glsl), W as dq_bf16.glsl reads it.
#include "common.glsl"
#include "dq_bf16.glsl"
#include "mul_common.glsl"
