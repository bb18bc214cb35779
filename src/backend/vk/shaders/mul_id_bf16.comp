#version 450
// mul_id_bf16: the routed experts' y = W_e x (mul_id_common.glsl), W as dq_bf16.glsl reads it.
#include "common.glsl"
#include "dq_bf16.glsl"
#include "mul_id_common.glsl"
