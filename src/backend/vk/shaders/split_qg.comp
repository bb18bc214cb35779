#version 450
// split_qg: a gated attention layer's q projection, per head [q, gate] (head_dim each), into
// q and gate rows of head_dim per head, as the CPU's split before rope and attention. One
// element of q (and its gate) per invocation over n = rows * heads * head_dim.
#include "elementwise.glsl"

layout(push_constant) uniform Push {
    uint n;
    uint groups_x;
    uint head_dim;
} p;

layout(std430, binding = 0) readonly buffer QG { float qg[]; };  // [n / head_dim][2][head_dim]
layout(std430, binding = 1) writeonly buffer Q { float q[]; };   // [n / head_dim][head_dim]
layout(std430, binding = 2) writeonly buffer G { float g[]; };   // as q

void main()
{
    const uint i = elem_index(p.groups_x);
    if (i >= p.n)
        return;
    const uint src = (i / p.head_dim) * 2u * p.head_dim + i % p.head_dim;
    q[i] = qg[src];
    g[i] = qg[src + p.head_dim];
}
