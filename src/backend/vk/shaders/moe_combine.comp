#version 450
// moe_combine: x[t] += sum over slots s of wts[t][s] * o[t][s], n_embd floats per row: each
// product rounded, added slot by slot from the first, then the sum added to the residual, as
// llama.cpp's graph and the CPU's combine round it (no fused multiply-add: precise).
#include "elementwise.glsl"

layout(push_constant) uniform Push {
    uint n;        // n_tok * n_embd
    uint groups_x;
    uint n_embd;
    uint n_slots;
} p;

layout(std430, binding = 0) buffer X { float x[]; };               // [n_tok][n_embd]
layout(std430, binding = 1) readonly buffer O { float o[]; };      // [n_tok][n_slots][n_embd]
layout(std430, binding = 2) readonly buffer W { float wts[]; };    // [n_tok][n_slots]

void main()
{
    const uint i = elem_index(p.groups_x);
    if (i >= p.n)
        return;
    const uint t = i / p.n_embd, j = i - t * p.n_embd, r = t * p.n_slots;
    precise float acc = o[r * p.n_embd + j] * wts[r];
    for (uint s = 1; s < p.n_slots; s++) {
        precise float q = o[(r + s) * p.n_embd + j] * wts[r + s];
        acc += q;
    }
    precise float sum = x[i] + acc;
    x[i] = sum;
}
