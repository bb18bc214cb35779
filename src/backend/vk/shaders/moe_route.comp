#version 450
// moe_route: each token's routing from its router logits: the softmax over the n_expert
// logits, the n_used most probable experts (equal probabilities to the lower index), their
// probabilities divided by their sum (clamped below at 2^-14), and, with a shared expert, its
// weight sigmoid(logit[n_expert]) in the last slot with the id n_expert. One invocation per
// token: a router has tens to hundreds of experts, and a selection by rescanning (n_used
// passes, each taking the best after the previous pick in (probability down, index up)
// order) needs no per-token array. exp is the device's; the sums are f32 in index and slot
// order (the CPU's sums run in double: tests/unit/test_vk_moe.c states the bound).
#include "elementwise.glsl"

layout(push_constant) uniform Push {
    uint n;        // tokens
    uint groups_x;
    uint n_expert;
    uint n_used;   // 1..n_expert
    uint shexp;    // 1: a shared expert's gate logit follows the router's, and it takes a slot
} p;

layout(std430, binding = 0) readonly buffer L { float logit[]; }; // [n][n_expert + shexp]
layout(std430, binding = 1) buffer I { int ids[]; };              // [n][n_used + shexp]
layout(std430, binding = 2) buffer W { float wts[]; };            // [n][n_used + shexp]

// one expression for every rescan, so each sees the same bits of each probability
float prob(uint o, float mx, float inv)
{
    precise float e = exp(logit[o] - mx);
    precise float q = e * inv;
    return q;
}

void main()
{
    const uint t = elem_index(p.groups_x);
    if (t >= p.n)
        return;
    const uint lo = t * (p.n_expert + p.shexp), so = t * (p.n_used + p.shexp);
    float mx = logit[lo];
    for (uint e = 1; e < p.n_expert; e++)
        mx = max(mx, logit[lo + e]);
    precise float sum = 0.0;
    for (uint e = 0; e < p.n_expert; e++)
        sum += exp(logit[lo + e] - mx);
    const float inv = 1.0 / sum;

    float prev_p = 0.0;
    int prev_e   = -1;
    precise float wsum = 0.0;
    for (uint k = 0; k < p.n_used; k++) {
        int best  = -1;
        float bp  = 0.0;
        for (uint e = 0; e < p.n_expert; e++) {
            const float q    = prob(lo + e, mx, inv);
            const bool after = prev_e < 0 || q < prev_p || (q == prev_p && int(e) > prev_e);
            if (after && (best < 0 || q > bp)) {
                best = int(e);
                bp   = q;
            }
        }
        ids[so + k] = best;
        wts[so + k] = bp;
        wsum += bp;
        prev_p = bp;
        prev_e = best;
    }
    const float div = max(wsum, 6.103515625e-5);
    for (uint k = 0; k < p.n_used; k++)
        wts[so + k] = wts[so + k] / div;
    if (p.shexp != 0u) {
        ids[so + p.n_used] = int(p.n_expert);
        wts[so + p.n_used] = 1.0 / (1.0 + exp(-logit[lo + p.n_expert]));
    }
}
