#version 450
// rope: rotates each head of each row of x in place by angles the host computed in double
// (vk_rope_angles): cs[t][i] = (cos, sin) of pair i at row t's position, so no transcendental
// runs on the device, whose sin and cos the spec bounds only to 2^-11. Pair i is elements
// (2i, 2i + 1) of the head, or (i, i + n_rot / 2) in NEOX order; elements from n_rot on pass
// through.

layout(local_size_x = 64) in;

layout(push_constant) uniform Push {
    uint head_dim; // floats per head
    uint n_head;   // heads per row
    uint n_rot;    // rotated floats per head, even, <= head_dim
    uint neox;     // 1: pairs (i, i + n_rot / 2)
} p;

layout(std430, binding = 0) buffer X { float x[]; };                // [n_tok][n_head][head_dim]
layout(std430, binding = 1) readonly buffer CS { vec2 cs[]; };      // [n_tok][n_rot / 2]

void main()
{
    // one workgroup per (head, row): x = head, y = row
    const uint head = gl_WorkGroupID.x, t = gl_WorkGroupID.y;
    const uint half_rot = p.n_rot / 2u;
    const uint o = (t * p.n_head + head) * p.head_dim;
    for (uint i = gl_LocalInvocationID.x; i < half_rot; i += 64u) {
        const uint a = o + (p.neox != 0u ? i : 2u * i);
        const uint b = a + (p.neox != 0u ? half_rot : 1u);
        const vec2 c = cs[t * half_rot + i];
        const float x0 = x[a], x1 = x[b];
        x[a] = x0 * c.x - x1 * c.y;
        x[b] = x0 * c.y + x1 * c.x;
    }
}
