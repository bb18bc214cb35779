#version 450
// mul_id_q3_k: the routed experts' y = W_e x (mul_id_common.glsl), W as dq_q3_k.glsl reads it.
#include "common.glsl"
#include "dq_q3_k.glsl"
#include "mul_id_common.glsl"
