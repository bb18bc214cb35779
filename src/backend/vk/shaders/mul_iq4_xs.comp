#version 450
// mul_iq4_xs: y = W x (mul_common.glsl), W as dq_iq4_xs.glsl reads it.
#include "common.glsl"
#include "dq_iq4_xs.glsl"
#include "mul_common.glsl"
