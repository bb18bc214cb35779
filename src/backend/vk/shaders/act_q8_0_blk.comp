#version 450
// act_q8_0_blk: activations as the Q8_0 blocks the CPU makes of them (ref_q8_0_act_from_float,
// act_round.comp's mode 2: d = fp16(amax / 127), q = round-half-even(x * (127 / amax)), the
// divisions correctly rounded), written as blocks for the integer-dot matmuls
// (mul_dot_common.glsl): per block of 32, 8 words of quants (element 4 k + e in byte e of word
// k) and then d as an f32. One invocation per block (elementwise.glsl grid over blocks).
#include "div_rn.glsl"
#include "elementwise.glsl"
#include "f16.glsl"

layout(push_constant) uniform Push {
    uint n; // blocks
    uint groups_x;
} p;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Y { uint y[]; }; // [n][9]

void main()
{
    const uint b = elem_index(p.groups_x);
    if (b >= p.n)
        return;
    const uint o = 32u * b;
    float amax   = 0.0;
    for (uint j = 0; j < 32u; j++)
        amax = max(amax, abs(x[o + j]));
    const float id = amax != 0.0 ? div_rn(127.0, amax) : 0.0;
    const float d  = amax != 0.0 ? unpackHalf2x16(f16_bits(div_rn(amax, 127.0))).x : 0.0;
    for (uint k = 0; k < 8u; k++) {
        uint word = 0u;
        for (uint e = 0; e < 4u; e++) {
            precise float s = x[o + 4u * k + e] * id;
            word |= (uint(int(roundEven(s))) & 0xFFu) << (8u * e);
        }
        y[9u * b + k] = word;
    }
    y[9u * b + 8u] = floatBitsToUint(d);
}
