#version 450
// add: y[i] += x[i % period] for i < n: the residual add (period n) or a bias added to every
// row (period: the row's width). One f32 addition, as the CPU's axpy with alpha 1.
#include "elementwise.glsl"

layout(push_constant) uniform Push {
    uint n;
    uint groups_x;
    uint period; // elements of x, 1..n
} p;

layout(std430, binding = 0) buffer Y { float y[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };

void main()
{
    const uint i = elem_index(p.groups_x);
    if (i < p.n)
        y[i] += x[i % p.period];
}
