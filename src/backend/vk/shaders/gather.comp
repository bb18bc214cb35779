#version 450
// gather: dst[i] = src[rows[i]] for i < n_out, rows of width floats: the output rows packed
// to the front. dst and src are distinct buffers (rows copied in parallel could overwrite a
// source row before it is read). One workgroup per output row.

layout(local_size_x = 64) in;

layout(push_constant) uniform Push {
    uint width;
    uint n_out;
    uint n_src; // rows in src: a row id past them copies nothing
} p;

layout(std430, binding = 0) readonly buffer S { float src[]; };
layout(std430, binding = 1) writeonly buffer D { float dst[]; };
layout(std430, binding = 2) readonly buffer R { int rows[]; }; // [n_out]

void main()
{
    const uint i = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (i >= p.n_out || uint(rows[i]) >= p.n_src)
        return;
    const uint from = uint(rows[i]) * p.width, to = i * p.width;
    for (uint e = gl_LocalInvocationID.x; e < p.width; e += 64u)
        dst[to + e] = src[from + e];
}
