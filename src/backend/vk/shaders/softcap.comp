#version 450
// softcap: y[i] = tanh(y[i] * inv_cap) * cap for i < n, the CPU's order (scale, tanh, scale).
// tanh is written out from exp rather than taken from the device, whose tanh the spec bounds
// only through its exp: t = (1 - e) / (1 + e), e = exp(-2|x|), is within a few ulp of 1 in
// absolute terms, which after the cap is what a logit's error is measured in.
#include "elementwise.glsl"

layout(push_constant) uniform Push {
    uint n;
    uint groups_x;
    float inv_cap; // 1 / cap, rounded to f32 as the CPU's
    float cap;
} p;

layout(std430, binding = 0) buffer Y { float y[]; };

void main()
{
    const uint i = elem_index(p.groups_x);
    if (i >= p.n)
        return;
    const float x = y[i] * p.inv_cap;
    const float e = exp(-2.0 * abs(x));
    const float t = (1.0 - e) / (1.0 + e);
    y[i] = (x < 0.0 ? -t : t) * p.cap;
}
