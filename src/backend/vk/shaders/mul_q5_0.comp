#version 450
// mul_q5_0: y = W x (mul_common.glsl), W as dq_q5_0.glsl reads it.
#include "common.glsl"
#include "dq_q5_0.glsl"
#include "mul_common.glsl"
