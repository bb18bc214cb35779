#version 450
// scale: y[i] *= a for i < n (q's pre-scale; gemma's embedding scale is embed's own).
#include "elementwise.glsl"

layout(push_constant) uniform Push {
    uint n;
    uint groups_x;
    float a;
} p;

layout(std430, binding = 0) buffer Y { float y[]; };

void main()
{
    const uint i = elem_index(p.groups_x);
    if (i < p.n)
        y[i] *= p.a;
}
