#version 450
// mul_f16: y = W x, W IEEE half.
#include "common.glsl"
#define UNIT 1
void unit(uint base, uint u, out float v[UNIT])
{
    v[0] = w_f16(base + 2u * u);
}
#include "mul_common.glsl"
