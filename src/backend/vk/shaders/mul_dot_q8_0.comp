#version 450
// mul_dot_q8_0: Q8_0 weights (34-byte blocks) by integer dot products (mul_dot_common.glsl),
// as kernels/ref.c's vec_dot_q8_0_q8_0: per block, eight exact sums of four products, each
// added by fma(d_w * d_x, sum, acc[l]) (the product of two halves is exact), the eight added as
// its tree at the end.
#define BLOCK_BYTES 34u
#define NACC 8
#include "mul_dot_common.glsl"

void dot_block(uint o, uint xq[8], float dx, inout float acc[NACC])
{
    // as dq_q8_0.glsl: d in one half of a word, the quants from a word boundary or halfway
    precise float d = unpackHalf2x16(w[o >> 2] >> ((o & 2u) * 8u)).x * dx;
    const uint q0   = (o + 2u) >> 2;
    const bool mid  = ((o + 2u) & 2u) != 0u;
    uint nxt        = w[q0];
    for (uint l = 0; l < 8u; l++) {
        const uint cur = nxt;
        nxt            = l < 7u || mid ? w[q0 + l + 1u] : 0u;
        const uint q   = mid ? (cur >> 16) | (nxt << 16) : cur;
        acc[l]         = fma(d, float(sdot4x8(q, xq[l], 0)), acc[l]);
    }
}

float acc_sum(float acc[NACC])
{
    precise float s = ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
    return s;
}
