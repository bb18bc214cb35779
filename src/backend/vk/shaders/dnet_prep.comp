#version 450
// dnet_prep: what Gated DeltaNet's scan takes of each token, one workgroup per batch row: q
// and k (the first 2 n_k heads of the conv output) L2-normalised per head, x / max(|x|, eps),
// with f32 sums of squares where the CPU sums in f64; the write strength beta =
// sigmoid(beta); the decay g = softplus(g + dt_bias) * a (a log-decay, <= 0), softplus
// taken as the identity above 20 as the CPU does.

#define WG 64
layout(local_size_x = WG) in;

layout(push_constant) uniform Push {
    uint S;        // floats per head
    uint n_k;      // key heads
    uint n_v;      // value heads
    uint C;        // floats per qkv row: conv_dim
    uint n_tok;
    float eps;
} p;

layout(std430, binding = 0) buffer QKV { float x[]; };             // [n_tok][C]
layout(std430, binding = 1) buffer Beta { float beta[]; };         // [n_tok][n_v]
layout(std430, binding = 2) buffer G { float g[]; };               // [n_tok][n_v]
layout(std430, binding = 3) readonly buffer Dt { float dt_bias[]; }; // [n_v]
layout(std430, binding = 4) readonly buffer A { float a[]; };      // [n_v]

shared float part[WG];

void main()
{
    const uint t = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (t >= p.n_tok)
        return;
    const uint tid = gl_LocalInvocationID.x;
    for (uint h = 0u; h < 2u * p.n_k; h++) {
        const uint o = t * p.C + h * p.S;
        float s = 0.0;
        for (uint i = tid; i < p.S; i += WG)
            s += x[o + i] * x[o + i];
        part[tid] = s;
        barrier();
        for (uint k = WG / 2; k > 0u; k >>= 1) {
            if (tid < k)
                part[tid] += part[tid + k];
            barrier();
        }
        const float scale = 1.0 / max(sqrt(part[0]), p.eps);
        barrier(); // every invocation has read part[0] before the next head writes it
        for (uint i = tid; i < p.S; i += WG)
            x[o + i] *= scale;
    }
    for (uint h = tid; h < p.n_v; h += WG) {
        const uint i = t * p.n_v + h;
        beta[i]       = 1.0 / (1.0 + exp(-beta[i]));
        const float u = g[i] + dt_bias[h];
        const float sp = u > 20.0 ? u : log(1.0 + exp(u));
        g[i] = sp * a[h];
    }
}
