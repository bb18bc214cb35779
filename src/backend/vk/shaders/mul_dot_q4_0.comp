#version 450
// mul_dot_q4_0: Q4_0 weights (18-byte blocks: fp16 d, 16 bytes whose low nibbles are elements
// 0..15 and high nibbles 16..31, value (q - 8) d) by integer dot products
// (mul_dot_common.glsl), as kernels/ref.c's vec_dot_q4_0_q8_0: per block the exact integer sum
// of the 32 products, added by fma(sum, d_w * d_x, acc) into one running sum.
#define BLOCK_BYTES 18u
#define NACC 1
#include "mul_dot_common.glsl"

// four nibbles (one per byte, 0..15) as the signed bytes q - 8: q ^ 8 is q - 8 as a 4-bit two's
// complement, and its sign bit, 8 in a byte, times 0x1E fills the byte's top four bits
uint centred(uint nib)
{
    const uint b = nib ^ 0x08080808u;
    return b | ((b & 0x08080808u) * 0x1Eu);
}

void dot_block(uint o, uint xq[8], float dx, inout float acc[NACC])
{
    precise float d = unpackHalf2x16(w[o >> 2] >> ((o & 2u) * 8u)).x * dx;
    const uint q0   = (o + 2u) >> 2;
    const bool mid  = ((o + 2u) & 2u) != 0u;
    uint nxt        = w[q0];
    int sumi        = 0;
    for (uint l = 0; l < 4u; l++) {
        const uint cur = nxt;
        nxt            = l < 3u || mid ? w[q0 + l + 1u] : 0u;
        const uint q   = mid ? (cur >> 16) | (nxt << 16) : cur;
        sumi += sdot4x8(centred(q & 0x0F0F0F0Fu), xq[l], 0);
        sumi += sdot4x8(centred((q >> 4) & 0x0F0F0F0Fu), xq[l + 4u], 0);
    }
    acc[0] = fma(float(sumi), d, acc[0]);
}

float acc_sum(float acc[NACC])
{
    return acc[0];
}
