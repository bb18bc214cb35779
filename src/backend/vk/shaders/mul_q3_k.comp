#version 450
// mul_q3_k: y = W x (mul_common.glsl), W as dq_q3_k.glsl reads it.
#include "common.glsl"
#include "dq_q3_k.glsl"
#include "mul_common.glsl"
