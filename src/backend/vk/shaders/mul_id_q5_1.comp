#version 450
// mul_id_q5_1: the routed experts' y = W_e x (mul_id_common.glsl), W as dq_q5_1.glsl reads it.
#include "common.glsl"
#include "dq_q5_1.glsl"
#include "mul_id_common.glsl"
