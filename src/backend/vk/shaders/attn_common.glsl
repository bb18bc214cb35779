// attn_common.glsl: causal attention over the paged KV cache (kv_common.glsl), one workgroup
// per (head, query row). The including shader defines kv_pair(buf, buf2, e), elements e and
// e + 1 (e even) of a cache buffer as a vec2, from its words (buf) or word pairs (buf2).
//
// Query row t (sequence rows[2t], position rows[2t + 1]) of head h attends to keys j0..pos of
// its sequence through KV head h / (n_head / n_head_kv), j0 = pos - n_swa + 1 on a window
// layer. Keys go in tiles of WG: invocation c scores key j0 + 64 i + c as a sequential fma over
// the head (the reference's order, so the scores are the reference's bits), the tile's maximum
// and exp sum are workgroup trees, the running (max, sum, output) rescale as in an online
// softmax, all f32; invocation c then owns output dims 2c, 2c + 1, 2c + 2 WG, ... and adds the
// tile's p * v by fma in key order. The output divides by the sum and, on a gated layer, takes the
// gate's sigmoid. Loads come in pairs and vec4s (q pairs, K and V pairs, four keys' weights
// and rows at a time): on a CPU implementation (lavapipe) every load is a loop over the lanes,
// so their count sets the speed. A fast version: several query rows per workgroup sharing each K/V tile
// (GQA heads, prefill tokens), K and V tiles staged through shared memory, subgroup reductions.

#define WG 64
#define HD_MAX 256
#define PAIRS (HD_MAX / (2 * WG)) // output pairs per invocation

layout(local_size_x = WG) in;

layout(push_constant) uniform Push {
    uint n_head;       // query heads, a multiple of n_head_kv
    uint n_head_kv;
    uint head_dim;     // <= HD_MAX, even
    uint block_tokens;
    uint table_stride; // block ids per sequence in tables
    uint n_swa;        // window in positions, the query's own included; 0 = none
    float scale;       // score scale: 1 / sqrt(head_dim), or 1 when q is pre-scaled
    uint gated;        // 1: out *= sigmoid(gate)
    uint n_seq;        // sequences in tables: a row naming another is left unwritten
} p;

layout(std430, binding = 0) readonly buffer Q { float q[]; };      // [n_tok][n_head][head_dim]
layout(std430, binding = 1) readonly buffer K { uint kc[]; };      // the layer's K
layout(std430, binding = 1) readonly buffer K2 { uvec2 kc2[]; };   // the same, word pairs
layout(std430, binding = 2) readonly buffer V { uint vc[]; };      // the layer's V
layout(std430, binding = 2) readonly buffer V2 { uvec2 vc2[]; };   // the same, word pairs
layout(std430, binding = 3) readonly buffer T { int tables[]; };   // [n_seq][table_stride]
layout(std430, binding = 4) readonly buffer R { int rows[]; };     // [n_tok][2]: seq, pos
layout(std430, binding = 5) writeonly buffer O { float o[]; };     // [n_tok][n_head][head_dim]
layout(std430, binding = 6) readonly buffer G { float gate[]; };   // as q, read when gated

#include "kv_common.glsl"

shared vec2 qs[HD_MAX / 2];
shared vec4 pk[WG / 4];   // the tile's scores, then its weights, four keys a vec4
shared uvec4 kro[WG / 4]; // the tile's keys' row offsets (+ koff) in the cache
shared float red[WG];     // reduction scratch
shared vec4 red8[2];      // a reduction's eight partial results

// The pairwise tree of red[0..63] (red[i] + red[i + 32], then + 16, 8, ...) by op, in two
// steps with two barriers rather than six: invocation i < 8 folds the eight values that meet
// at node i of the tree's level 8, then every invocation folds those eight. The same pairs
// in the same order, so the same bits as the six-level tree.
#define RED_TREE(op, out)                                                                    \
    barrier();                                                                               \
    if (tid < 8u)                                                                            \
        red8[tid / 4u][tid % 4u] =                                                           \
            op(op(op(red[tid], red[tid + 32u]), op(red[tid + 16u], red[tid + 48u])),         \
               op(op(red[tid + 8u], red[tid + 40u]), op(red[tid + 24u], red[tid + 56u])));   \
    barrier();                                                                               \
    {                                                                                        \
        const vec4 c0 = red8[0], c1 = red8[1];                                               \
        out = op(op(op(c0.x, c1.x), op(c0.z, c1.z)), op(op(c0.y, c1.y), op(c0.w, c1.w)));    \
    }

float add(float a, float b)
{
    return a + b;
}

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
    for (uint d = 2u * tid; d < hd; d += 2u * WG)
        qs[d / 2u] = vec2(q[qo + d], q[qo + d + 1u]);
    barrier();

    const float NEG_INF = uintBitsToFloat(0xFF800000u);
    vec2 acc[PAIRS];
    for (uint i = 0; i < PAIRS; i++)
        acc[i] = vec2(0.0);
    float M = NEG_INF, S = 0.0;
    for (int t0 = j0; t0 <= pos; t0 += WG) {
        const int j = t0 + int(tid);
        float s = NEG_INF;
        uint kr = 0;
        if (j <= pos) {
            kr = kv_row(tb, uint(j), p.block_tokens, kv_dim) + koff;
            float a = 0.0;
            for (uint d = 0; d < hd; d += 2u) {
                const vec2 k2 = kv_pair(kc, kc2, kr + d);
                const vec2 q2 = qs[d / 2u];
                a = fma(k2.x, q2.x, a);
                a = fma(k2.y, q2.y, a);
            }
            s = a * p.scale;
        }
        kro[tid / 4u][tid % 4u] = kr;
        red[tid] = s;
        float m_tile;
        RED_TREE(max, m_tile)
        const float m_new = max(M, m_tile);
        const float pc = j <= pos ? exp(s - m_new) : 0.0;
        pk[tid / 4u][tid % 4u] = pc;
        red[tid] = pc; // every invocation read red before the last barrier
        float s_tile;
        RED_TREE(add, s_tile)
        const float ms = M == NEG_INF ? 0.0 : exp(M - m_new);
        S = S * ms + s_tile;
        M = m_new;
        const int n = min(int(WG), pos - t0 + 1);
        for (uint i = 0; i < PAIRS; i++)
            acc[i] *= ms;
        for (uint i = 0; i < PAIRS; i++) {
            const uint d = 2u * (tid + i * WG);
            if (i * 2u * WG >= hd)
                break; // uniform: no invocation has a pair here
            if (d < hd)
                for (int c4 = 0; c4 * 4 < n; c4++) {
                    const vec4 pw = pk[c4];
                    const uvec4 vr = kro[c4];
                    for (int m = 0; m < 4 && c4 * 4 + m < n; m++)
                        acc[i] = fma(kv_pair(vc, vc2, vr[m] + d), vec2(pw[m]), acc[i]);
                }
        }
        barrier(); // pk, kro, red and red8 are rewritten by the next tile
    }
    const float inv = S == 0.0 ? 0.0 : 1.0 / S;
    for (uint i = 0; i < PAIRS; i++) {
        const uint d = 2u * (tid + i * WG);
        if (d < hd) {
            vec2 y = acc[i] * inv;
            if (p.gated != 0u) {
                y.x *= 1.0 / (1.0 + exp(-gate[qo + d]));
                y.y *= 1.0 / (1.0 + exp(-gate[qo + d + 1u]));
            }
            o[qo + d]      = y.x;
            o[qo + d + 1u] = y.y;
        }
    }
}
