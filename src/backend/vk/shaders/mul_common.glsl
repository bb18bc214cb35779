// mul_common.glsl: y = W x for one weight type. The including shader defines UNIT (elements
// dequantized together: a block, or 1 for float weights) and unit(base, u, v), which writes
// the UNIT values of unit u of the row starting at byte base, exactly as the reference
// to_float does (the same f32 products).
//
// W may be one part of a weight split by rows across buffers: its rows are y's row0.. .
// One workgroup per output row and tile of TILE tokens: each invocation takes every WG-th unit
// of the row, dequantizes it once and dots it with the tile's activation rows, then the
// workgroup adds its partial sums as a tree. Rows run along x and y (row = y * groups_x + x,
// since x alone may stop at 65535), token tiles along z.
// A fast version: several rows per workgroup with subgroup reductions, activations quantized
// to int8 for integer dot products, cooperative matrices for prefill.

#define WG 64
#define TILE 8

layout(local_size_x = WG) in;

layout(push_constant) uniform Push {
    uint n_in;    // elements per row, a multiple of UNIT
    uint n_rows;  // rows of W in this buffer
    uint n_tok;   // activation rows
    uint row_len; // bytes per row of W
    uint row0;    // the first of them in y: a weight past one buffer is split by rows
    uint n_out;   // outputs per token (y's row length)
} p;

layout(std430, binding = 1) readonly buffer Acts { float x[]; };  // [n_tok][n_in]
layout(std430, binding = 2) writeonly buffer Out { float y[]; };  // [n_tok][n_out]

shared float part[TILE][WG];

void main()
{
    const uint row = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (row >= p.n_rows)
        return; // the whole workgroup: row is uniform
    const uint t0  = gl_WorkGroupID.z * TILE;
    const uint nt  = min(uint(TILE), p.n_tok - t0);
    const uint tid = gl_LocalInvocationID.x;
    const uint base = row * p.row_len;

    float acc[TILE];
    for (uint t = 0; t < TILE; t++)
        acc[t] = 0.0;
    float v[UNIT];
    for (uint u = tid; u < p.n_in / UNIT; u += WG) {
        unit(base, u, v);
        for (uint t = 0; t < nt; t++) {
            const uint xo = (t0 + t) * p.n_in + u * UNIT;
            float s = 0.0;
            for (uint e = 0; e < UNIT; e++)
                s += v[e] * x[xo + e];
            acc[t] += s;
        }
    }
    for (uint t = 0; t < TILE; t++)
        part[t][tid] = acc[t];
    barrier();
    for (uint h = WG / 2; h > 0; h >>= 1) {
        if (tid < h)
            for (uint t = 0; t < TILE; t++)
                part[t][tid] += part[t][tid + h];
        barrier();
    }
    if (tid < nt)
        y[(t0 + tid) * p.n_out + p.row0 + row] = part[tid][0];
}
