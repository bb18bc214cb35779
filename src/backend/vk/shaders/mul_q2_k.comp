#version 450
// mul_q2_k: y = W x (mul_common.glsl), W as dq_q2_k.glsl reads it.
#include "common.glsl"
#include "dq_q2_k.glsl"
#include "mul_common.glsl"
