#version 450
// mul_f16: y = W x (mul_common.glsl), W as dq_f16.glsl reads it.
#include "common.glsl"
#include "dq_f16.glsl"
#include "mul_common.glsl"
