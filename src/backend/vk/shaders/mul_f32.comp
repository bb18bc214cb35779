#version 450
// mul_f32: y = W x, W f32.
#include "common.glsl"
#define UNIT 1
void unit(uint base, uint u, out float v[UNIT])
{
    v[0] = uintBitsToFloat(w[(base >> 2) + u]);
}
#include "mul_common.glsl"
