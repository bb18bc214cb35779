#version 450
// mul_id_f32: the routed experts' y = W_e x (mul_id_common.glsl), W as dq_f32.glsl reads it.
#include "common.glsl"
#include "dq_f32.glsl"
#include "mul_id_common.glsl"
