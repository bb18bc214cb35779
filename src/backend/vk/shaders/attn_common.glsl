// attn_common.glsl: causal attention over the paged KV cache (kv_common.glsl), one workgroup
// per (head, query row). The including shader defines kv_load(buf, e), element e of a cache
// buffer as f32.
//
// Query row t (sequence rows[2t], position rows[2t + 1]) of head h attends to keys j0..pos of
// its sequence through KV head h / (n_head / n_head_kv), j0 = pos - n_swa + 1 on a window
// layer. Keys go in tiles of WG: invocation c scores key j0 + 64 i + c as a sequential fma over
// the head (the reference's order, so the scores are the reference's bits), the tile's maximum
// and exp sum are workgroup trees, the running (max, sum, output) rescale as in an online
// softmax, all f32; invocation c then owns output dims c, c + WG, ... and adds the tile's
// p * v by fma in key order. The output divides by the sum and, on a gated layer, takes the
// gate's sigmoid. A fast version: several query rows per workgroup sharing each K/V tile
// (GQA heads, prefill tokens), K and V tiles staged through shared memory, subgroup reductions.

#define WG 64
#define HD_MAX 256

layout(local_size_x = WG) in;

layout(push_constant) uniform Push {
    uint n_head;       // query heads, a multiple of n_head_kv
    uint n_head_kv;
    uint head_dim;     // <= HD_MAX, even for an f16 cache
    uint block_tokens;
    uint table_stride; // block ids per sequence in tables
    uint n_swa;        // window in positions, the query's own included; 0 = none
    float scale;       // score scale: 1 / sqrt(head_dim), or 1 when q is pre-scaled
    uint gated;        // 1: out *= sigmoid(gate)
    uint n_seq;        // sequences in tables: a row naming another is left unwritten
} p;

layout(std430, binding = 0) readonly buffer Q { float q[]; };      // [n_tok][n_head][head_dim]
layout(std430, binding = 1) readonly buffer K { uint kc[]; };      // the layer's K
layout(std430, binding = 2) readonly buffer V { uint vc[]; };      // the layer's V
layout(std430, binding = 3) readonly buffer T { int tables[]; };   // [n_seq][table_stride]
layout(std430, binding = 4) readonly buffer R { int rows[]; };     // [n_tok][2]: seq, pos
layout(std430, binding = 5) writeonly buffer O { float o[]; };     // [n_tok][n_head][head_dim]
layout(std430, binding = 6) readonly buffer G { float gate[]; };   // as q, read when gated

#include "kv_common.glsl"

shared float qs[HD_MAX];
shared float pk[WG];  // the tile's scores, then its weights
shared float red[WG]; // reduction scratch

void main()
{
    const uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
    const uint hd     = p.head_dim;
    const uint kv_dim = p.n_head_kv * hd;
    const uint koff   = (h / (p.n_head / p.n_head_kv)) * hd;
    const uint seq    = uint(rows[2u * t]);
    const int pos     = rows[2u * t + 1u];
    if (seq >= p.n_seq || pos < 0 || uint(pos) / p.block_tokens >= p.table_stride)
        return; // the whole workgroup: the row is uniform
    const uint tb     = seq * p.table_stride;
    const int j0      = p.n_swa > 0u && pos >= int(p.n_swa) ? pos - int(p.n_swa) + 1 : 0;
    const uint qo     = (t * p.n_head + h) * hd;
    for (uint d = tid; d < hd; d += WG)
        qs[d] = q[qo + d];
    barrier();

    const float NEG_INF = uintBitsToFloat(0xFF800000u);
    float acc[HD_MAX / WG];
    for (uint i = 0; i < HD_MAX / WG; i++)
        acc[i] = 0.0;
    float M = NEG_INF, S = 0.0;
    for (int t0 = j0; t0 <= pos; t0 += WG) {
        const int j = t0 + int(tid);
        float s = NEG_INF;
        if (j <= pos) {
            const uint kr = kv_row(tb, uint(j), p.block_tokens, kv_dim) + koff;
            float a = 0.0;
            for (uint d = 0; d < hd; d++)
                a = fma(kv_load(kc, kr + d), qs[d], a);
            s = a * p.scale;
        }
        red[tid] = s;
        barrier();
        for (uint w = WG / 2; w > 0; w >>= 1) {
            if (tid < w)
                red[tid] = max(red[tid], red[tid + w]);
            barrier();
        }
        const float m_new = max(M, red[0]);
        barrier(); // every invocation has read red[0]
        const float pc = j <= pos ? exp(s - m_new) : 0.0;
        pk[tid]  = pc;
        red[tid] = pc;
        barrier();
        for (uint w = WG / 2; w > 0; w >>= 1) {
            if (tid < w)
                red[tid] += red[tid + w];
            barrier();
        }
        const float ms = M == NEG_INF ? 0.0 : exp(M - m_new);
        S = S * ms + red[0];
        M = m_new;
        const int n = min(int(WG), pos - t0 + 1);
        for (uint i = 0; i < HD_MAX / WG; i++)
            acc[i] *= ms;
        for (int c = 0; c < n; c++) {
            const uint vr = kv_row(tb, uint(t0 + c), p.block_tokens, kv_dim) + koff;
            const float pw = pk[c];
            for (uint i = 0; i < HD_MAX / WG; i++) {
                const uint d = tid + i * WG;
                if (d < hd)
                    acc[i] = fma(kv_load(vc, vr + d), pw, acc[i]);
            }
        }
        barrier(); // pk and red are rewritten by the next tile
    }
    const float inv = S == 0.0 ? 0.0 : 1.0 / S;
    for (uint i = 0; i < HD_MAX / WG; i++) {
        const uint d = tid + i * WG;
        if (d < hd) {
            float y = acc[i] * inv;
            if (p.gated != 0u)
                y *= 1.0 / (1.0 + exp(-gate[qo + d]));
            o[qo + d] = y;
        }
    }
}
