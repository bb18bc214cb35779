// embed_common.glsl: x[t] = row ids[t] of the token embedding as f32, times scale, with the
// including shader's unit() (dq_*.glsl: the reference to_float's values). The weight may be
// one part of a table split by rows across buffers (rows row0..row0 + n_rows - 1): a token
// whose row lies elsewhere is left to that part's dispatch. One workgroup per token.

#define WG 64
layout(local_size_x = WG) in;

layout(push_constant) uniform Push {
    uint n_in;    // elements per row, a multiple of UNIT
    uint n_rows;  // rows in this buffer
    uint n_tok;
    uint row_len; // bytes per row
    uint row0;    // the table's row at this buffer's row 0
    float scale;  // 1, or gemma's sqrt(n_embd)
} p;

layout(std430, binding = 1) readonly buffer Ids { int ids[]; };  // [n_tok]
layout(std430, binding = 2) writeonly buffer Out { float x[]; }; // [n_tok][n_in]

void main()
{
    const uint t = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (t >= p.n_tok)
        return;
    const uint r = uint(ids[t]) - p.row0; // ids below row0 wrap past n_rows
    if (r >= p.n_rows)
        return;
    float v[UNIT];
    for (uint u = gl_LocalInvocationID.x; u < p.n_in / UNIT; u += WG) {
        unit(r * p.row_len, u, v);
        for (uint e = 0; e < UNIT; e++)
            x[t * p.n_in + u * UNIT + e] = v[e] * p.scale; // exact at scale 1
    }
}
