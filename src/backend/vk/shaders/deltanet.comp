#version 450
// deltanet: Gated DeltaNet's delta rule over a batch, each value head's state walking the
// batch's rows in order through each row's sequence. The state S of a head is S x S, stored
// as rows r (the value index) of S columns (the key index), so row r alone takes part in
// output r: one invocation per (head, r). Per row of the batch, with q, k the head's key head
// h % n_k (as ggml broadcasts), v its values, b = beta, e = exp(g):
//   M[r] *= e;  d = (v[r] - M[r] . k) b;  M[r] += k d;  o[r] = (M[r] . q) scale
// The dot products add in the order of ggml_vec_dot_f32_ref (src/kernels/ggml_dot.h), the
// CPU's, so the state differs from the CPU's only through exp and what it was given.
//
// Snapshots: with p.snap set, a row whose slot is >= 0 copies each head's state, as it stands
// after the row, to snap[slot][snap_off + (h S + r) S ...].

layout(local_size_x = 32) in;

layout(push_constant) uniform Push {
    uint S;           // state_size: floats per head
    uint n_k;         // key heads
    uint n_v;         // value heads, a multiple of n_k
    uint C;           // floats per qkv row: 2 n_k S + n_v S
    uint n_tok;
    uint n_seq;       // sequences in state; a row of another sequence is skipped
    float scale;      // 1 / sqrt(S) as the host rounds it
    uint snap;        // 1: rows with a slot copy their state out
    uint snap_stride; // floats per snapshot slot
    uint snap_off;    // where the heads' states start in a slot
} p;

layout(std430, binding = 0) readonly buffer QKV { float x[]; };      // [n_tok][C]: q, k, v
layout(std430, binding = 1) readonly buffer Beta { float beta[]; };  // [n_tok][n_v]
layout(std430, binding = 2) readonly buffer G { float g[]; };        // [n_tok][n_v]
layout(std430, binding = 3) buffer State { float st[]; };            // [n_seq][n_v][S][S]
layout(std430, binding = 4) writeonly buffer O { float o[]; };       // [n_tok][n_v][S]
layout(std430, binding = 5) readonly buffer Rows { int rows[]; };    // [n_tok][2] (seq, pos)
layout(std430, binding = 6) readonly buffer Slots { int slots[]; };  // [n_tok] slot or -1
layout(std430, binding = 7) writeonly buffer Snap { float snap[]; }; // [slots][snap_stride]

// st[m ..] . x[v ..] over n, in ggml_vec_dot_f32_ref's order
float dot_state(uint m, uint v, uint n)
{
    precise float sum = 0.0;
    const uint np = n & ~63u;
    uint i = 0u;
    if (np > 0u) {
        precise float acc[64]; // four 16-lane accumulators
        for (uint l = 0u; l < 64u; l++)
            acc[l] = 0.0;
        for (; i < np; i += 64u)
            for (uint l = 0u; l < 64u; l++)
                acc[l] = fma(st[m + i + l], x[v + i + l], acc[l]);
        for (uint l = 0u; l < 16u; l++) {
            acc[l] += acc[l + 32u];
            acc[l + 16u] += acc[l + 48u];
        }
        for (uint l = 0u; l < 16u; l++)
            acc[l] += acc[l + 16u];
        precise float t8[8], t4[4];
        for (uint l = 0u; l < 8u; l++)
            t8[l] = acc[l + 8u] + acc[l];
        for (uint l = 0u; l < 4u; l++)
            t4[l] = t8[l + 4u] + t8[l];
        sum = (t4[0] + t4[2]) + (t4[1] + t4[3]);
    }
    for (; n - i >= 16u; i += 16u)
        for (uint l = 0u; l < 16u; l++) {
            precise float prod = st[m + i + l] * x[v + i + l];
            sum += prod;
        }
    if (n - i >= 8u) {
        for (uint l = 0u; l < 8u; l++) {
            precise float prod = st[m + i + l] * x[v + i + l];
            sum += prod;
        }
        i += 8u;
    }
    for (; i < n; i++)
        sum = fma(st[m + i], x[v + i], sum);
    return sum;
}

void main()
{
    const uint r = gl_GlobalInvocationID.x, h = gl_WorkGroupID.y;
    if (r >= p.S || h >= p.n_v)
        return;
    const uint S = p.S, kh = h % p.n_k;
    for (uint t = 0u; t < p.n_tok; t++) {
        const uint seq = uint(rows[2u * t]);
        if (seq >= p.n_seq)
            continue;
        const uint m  = ((seq * p.n_v + h) * S + r) * S;
        const uint qo = t * p.C + kh * S, ko = t * p.C + (p.n_k + kh) * S,
                   vo = t * p.C + 2u * p.n_k * S + h * S;
        const float e = exp(g[t * p.n_v + h]);
        for (uint i = 0u; i < S; i++)
            st[m + i] *= e;
        precise float d = x[vo + r] - dot_state(m, ko, S);
        d *= beta[t * p.n_v + h];
        for (uint i = 0u; i < S; i++)
            st[m + i] = fma(x[ko + i], d, st[m + i]);
        precise float y = dot_state(m, qo, S) * p.scale;
        o[(t * p.n_v + h) * S + r] = y;
        if (p.snap != 0u && slots[t] >= 0) {
            const uint to = uint(slots[t]) * p.snap_stride + p.snap_off + (h * S + r) * S;
            for (uint i = 0u; i < S; i++)
                snap[to + i] = st[m + i];
        }
    }
}
