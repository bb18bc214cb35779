#version 450
// rmsnorm: y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w, one workgroup per row. The sum of
// squares is f32 (the reference sums in double), in WG strided partial sums added as a tree.

#define WG 64
layout(local_size_x = WG) in;

layout(push_constant) uniform Push {
    uint n;      // elements per row
    uint n_rows;
    float eps;
} p;

layout(std430, binding = 0) readonly buffer Xs { float x[]; };  // [n_rows][n]
layout(std430, binding = 1) readonly buffer Ws { float w[]; };  // [n]
layout(std430, binding = 2) writeonly buffer Ys { float y[]; }; // [n_rows][n], may be x

shared float part[WG];

void main()
{
    const uint row = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (row >= p.n_rows)
        return;
    const uint tid = gl_LocalInvocationID.x;
    const uint o   = row * p.n;
    float s = 0.0;
    for (uint i = tid; i < p.n; i += WG)
        s += x[o + i] * x[o + i];
    part[tid] = s;
    barrier();
    for (uint h = WG / 2; h > 0; h >>= 1) {
        if (tid < h)
            part[tid] += part[tid + h];
        barrier();
    }
    const float scale = 1.0 / sqrt(part[0] / float(p.n) + p.eps);
    for (uint i = tid; i < p.n; i += WG)
        y[o + i] = (x[o + i] * scale) * w[i];
}
