#version 450
// gelu: g[i] = gelu(g[i]) * u[i] for i < n, in place, as the CPU's gelu_mul: below -10 the
// result is 0, from 10 up g * u, between them g is rounded to f16 (f16.glsl, the CPU's
// rounding) and looked up in a table of every half's tanh GELU as a half, computed on the
// host with the CPU's formula (vk_ops.c), so the result is the CPU's to the bit.
#include "elementwise.glsl"
#include "f16.glsl"

layout(push_constant) uniform Push {
    uint n;
    uint groups_x;
} p;

layout(std430, binding = 0) buffer G { float g[]; };
layout(std430, binding = 1) readonly buffer U { float u[]; };
layout(std430, binding = 2) readonly buffer T { uint table[]; }; // [65536] halves, two a word

void main()
{
    const uint i = elem_index(p.groups_x);
    if (i >= p.n)
        return;
    const float x = g[i];
    if (x <= -10.0) {
        g[i] = 0.0;
    } else if (x >= 10.0) {
        g[i] = x * u[i];
    } else {
        const uint h = f16_bits(x);
        g[i] = unpackHalf2x16(table[h >> 1] >> ((h & 1u) * 16u)).x * u[i];
    }
}
