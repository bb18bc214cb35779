// kv_store_common.glsl: this batch's K and V rows (f32) into the paged cache (kv_common.glsl)
// at each row's (seq, pos). The including shader defines WORD_ELEMS (elements per 32-bit word
// of the cache: 2 for f16, 1 for f32) and pack(src, e), the word of elements e.. of a source
// row. One invocation per word, x over words of a row, y over rows.

layout(local_size_x = 64) in;

layout(push_constant) uniform Push {
    uint kv_dim;       // elements per row, even for an f16 cache
    uint block_tokens;
    uint table_stride; // block ids per sequence in tables
    uint n_seq;        // sequences in tables: a row naming another is not stored
} p;

layout(std430, binding = 0) readonly buffer KS { float ks[]; };   // [n_tok][kv_dim]
layout(std430, binding = 1) readonly buffer VS { float vs[]; };   // [n_tok][kv_dim]
layout(std430, binding = 2) writeonly buffer KC { uint kc[]; };   // the layer's K
layout(std430, binding = 3) writeonly buffer VC { uint vc[]; };   // the layer's V
layout(std430, binding = 4) readonly buffer T { int tables[]; };  // [n_seq][table_stride]
layout(std430, binding = 5) readonly buffer R { int rows[]; };    // [n_tok][2]: seq, pos

#include "kv_common.glsl"

void main()
{
    const uint t = gl_WorkGroupID.y;
    const uint e = (gl_WorkGroupID.x * 64u + gl_LocalInvocationID.x) * WORD_ELEMS;
    const uint seq = uint(rows[2u * t]), pos = uint(rows[2u * t + 1u]);
    if (e >= p.kv_dim || seq >= p.n_seq || pos / p.block_tokens >= p.table_stride)
        return;
    const uint dst = kv_row(seq * p.table_stride, pos, p.block_tokens, p.kv_dim) + e;
    const uint src = t * p.kv_dim + e;
    kc[dst / WORD_ELEMS] = pack(ks, src);
    vc[dst / WORD_ELEMS] = pack(vs, src);
}
