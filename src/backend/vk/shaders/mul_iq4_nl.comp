#version 450
// mul_iq4_nl: y = W x (mul_common.glsl), W as dq_iq4_nl.glsl reads it.
#include "common.glsl"
#include "dq_iq4_nl.glsl"
#include "mul_common.glsl"
