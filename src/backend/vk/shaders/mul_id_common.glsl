// mul_id_common.glsl: the routed experts' matmul, y = W_e x, for one weight type. The including
// shader defines UNIT and unit(base, u, v) as for mul_common.glsl (the dq_*.glsl files), so
// every type the dense matmul reads, this one reads too.
//
// W is a stack of experts, each n_out rows of n_in (expert e's row r is the stack's row
// (e - e_base) * n_out + r), possibly one part of a stack split by rows across buffers: this
// buffer holds the stack's rows row0 .. row0 + n_rows. A pair is a (token, slot) of the
// routing: ids[pair] names its expert, and y's row pair receives that expert's n_out outputs.
// A pair whose expert row is in another part, or whose expert is not in this stack (a shared
// expert held apart), is left alone, so one dispatch per part fills every pair once.
//
// One workgroup per output row and pair: each invocation takes every WG-th unit of the row,
// dequantizes it and dots it with the pair's input row, then the workgroup adds its partial
// sums as a tree. Rows run along x and y (row = y * groups_x + x), pairs along z from pair0.
// A fast version: pairs sorted by expert and tiled, so a dequantized unit serves several.

#define WG 64

layout(local_size_x = WG) in;

layout(push_constant) uniform Push {
    uint n_in;       // elements per row, a multiple of UNIT
    uint n_out;      // rows per expert: y's row length
    uint n_pairs;    // (token, slot) pairs: n_tok * n_slots
    uint row_len;    // bytes per row of W
    uint row0;       // the stack's row at this buffer's row 0
    uint n_rows;     // rows of the stack in this buffer
    uint e_base;     // the expert at the stack's row 0
    uint n_slots;    // slots per token
    uint x_per_slot; // 1: x has a row per pair; 0: a row per token, shared by its slots
    uint pair0;      // the pair at z = 0: more pairs than one grid dimension takes run in chunks
} p;

layout(std430, binding = 1) readonly buffer Acts { float x[]; };   // [n_tok or n_pairs][n_in]
layout(std430, binding = 2) writeonly buffer Out { float y[]; };   // [n_pairs][n_out]
layout(std430, binding = 3) readonly buffer Ids { int ids[]; };    // [n_pairs]

shared float part[WG];

void main()
{
    const uint row  = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    const uint pair = p.pair0 + gl_WorkGroupID.z;
    // whole-workgroup exits: row, pair and so e are uniform
    if (row >= p.n_out || pair >= p.n_pairs)
        return;
    const int e = ids[pair];
    if (e < int(p.e_base))
        return;
    const uint g = uint(e - int(p.e_base)) * p.n_out + row;
    if (g < p.row0 || g - p.row0 >= p.n_rows)
        return;
    const uint tid  = gl_LocalInvocationID.x;
    const uint base = (g - p.row0) * p.row_len;
    const uint xo   = (p.x_per_slot != 0u ? pair : pair / p.n_slots) * p.n_in;

    float acc = 0.0;
    float v[UNIT];
    for (uint u = tid; u < p.n_in / UNIT; u += WG) {
        unit(base, u, v);
        float s = 0.0;
        for (uint j = 0; j < UNIT; j++)
            s += v[j] * x[xo + u * UNIT + j];
        acc += s;
    }
    part[tid] = acc;
    barrier();
    for (uint h = WG / 2; h > 0; h >>= 1) {
        if (tid < h)
            part[tid] += part[tid + h];
        barrier();
    }
    if (tid == 0)
        y[pair * p.n_out + row] = part[0];
}
