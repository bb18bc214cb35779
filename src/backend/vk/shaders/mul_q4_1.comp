#version 450
// mul_q4_1: y = W x (mul_common.glsl), W as dq_q4_1.glsl reads it.
#include "common.glsl"
#include "dq_q4_1.glsl"
#include "mul_common.glsl"
