#version 450
// mul_id_iq4_nl: the routed experts' y = W_e x (mul_id_common.glsl), W as dq_iq4_nl.glsl reads it.
#include "common.glsl"
#include "dq_iq4_nl.glsl"
#include "mul_id_common.glsl"
