#version 450
// mul_f32: y = W x (mul_common.glsl), W as dq_f32.glsl reads it.
#include "common.glsl"
#include "dq_f32.glsl"
#include "mul_common.glsl"
