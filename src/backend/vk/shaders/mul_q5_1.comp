#version 450
// mul_q5_1: y = W x (mul_common.glsl), W as dq_q5_1.glsl reads it.
#include "common.glsl"
#include "dq_q5_1.glsl"
#include "mul_common.glsl"
