#version 450
// swiglu: g[i] = silu(g[i]) * u[i] = g / (1 + exp(-g)) * u over n floats, in place in g.
// exp is the device's (the spec allows 3 + 2|x| ulp); tests/unit/test_vk.c states the bound.

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
    uint n;
    uint groups_x; // workgroups along x (element i = (y * groups_x + x) * 256 + local)
} p;

layout(std430, binding = 0) buffer G { float g[]; };
layout(std430, binding = 1) readonly buffer U { float u[]; };

void main()
{
    const uint i = (gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x) * 256u +
                   gl_LocalInvocationID.x;
    if (i >= p.n)
        return;
    const float x = g[i];
    g[i] = x / (1.0 + exp(-x)) * u[i];
}
