#version 450
// conv1d: Gated DeltaNet's causal depthwise conv and its SiLU, in place over a batch's qkv rows.
// One invocation per channel walks the batch's rows in order, each row through its sequence's
// window (the last K - 1 inputs of that channel): the taps oldest first as a chain of fmas,
// as the CPU sums them, then the window slides. Rows of one sequence must come in position
// order, as the batch holds them.
//
// Snapshots: with p.snap set, a row whose slot is >= 0 copies its channel's window, as it
// stands after the row, to snap[slot][channel][K - 1].

layout(local_size_x = 64) in;

layout(push_constant) uniform Push {
    uint C;           // channels: conv_dim
    uint K;           // taps, 2..16
    uint n_tok;
    uint n_seq;       // sequences in state; a row of another sequence is skipped
    uint snap;        // 1: rows with a slot copy their window out
    uint snap_stride; // floats per snapshot slot
} p;

layout(std430, binding = 0) buffer X { float x[]; };                 // [n_tok][C]
layout(std430, binding = 1) readonly buffer Taps { float w[]; };     // [C][K]
layout(std430, binding = 2) buffer State { float st[]; };            // [n_seq][C][K - 1]
layout(std430, binding = 3) readonly buffer Rows { int rows[]; };    // [n_tok][2] (seq, pos)
layout(std430, binding = 4) readonly buffer Slots { int slots[]; };  // [n_tok] slot or -1
layout(std430, binding = 5) writeonly buffer Snap { float snap[]; }; // [slots][snap_stride]

void main()
{
    const uint ch = gl_GlobalInvocationID.x;
    if (ch >= p.C)
        return;
    const uint K1 = p.K - 1u, wo = ch * p.K;
    float win[15];
    for (uint t = 0u; t < p.n_tok; t++) {
        const uint seq = uint(rows[2u * t]);
        if (seq >= p.n_seq)
            continue;
        const uint so = (seq * p.C + ch) * K1;
        precise float sum = 0.0;
        for (uint i = 0u; i < K1; i++) {
            win[i] = st[so + i];
            sum    = fma(win[i], w[wo + i], sum);
        }
        const float xin = x[t * p.C + ch];
        sum = fma(xin, w[wo + K1], sum);
        for (uint i = 0u; i + 1u < K1; i++)
            st[so + i] = win[i + 1u];
        st[so + K1 - 1u] = xin;
        x[t * p.C + ch] = sum / (1.0 + exp(-sum));
        if (p.snap != 0u && slots[t] >= 0) {
            const uint d = uint(slots[t]) * p.snap_stride + ch * K1;
            for (uint i = 0u; i + 1u < K1; i++)
                snap[d + i] = win[i + 1u];
            snap[d + K1 - 1u] = xin;
        }
    }
}
