// dq_iq4_xs.glsl: unit(base, u, v) for IQ4_XS (136-byte super-blocks of 256: fp16 d, 16 bits of
// scales' top 2 bits, 4 bytes of their low nibbles, 128 bytes of indices). Unit u is sub-block
// j = u % 8 of super-block u / 8: 6-bit scale ls = nibble j % 2 of scales_l[j / 2] | bits
// 2j..2j+1 of scales_h << 4; its 16 bytes of indices are Q4_0's nibbles; value
// (d * (ls - 32)) * iq4nl_values[index].
#include "iq4nl.glsl"
#define UNIT 32
void unit(uint base, uint u, out float v[UNIT])
{
    const uint o   = base + 136u * (u >> 3);
    const uint j   = u & 7u;
    const uint lo  = (w_byte(o + 4u + (j >> 1)) >> (4u * (j & 1u))) & 15u;
    const uint hi  = (w_u16(o + 2u) >> (2u * j)) & 3u;
    const float dl = w_f16(o) * float(int(lo | (hi << 4)) - 32);
    const uint qs  = o + 8u + 16u * j;
    for (uint l = 0; l < 16u; l++) {
        const uint b = w_byte(qs + l);
        v[l]       = dl * float(iq4nl_values[b & 15u]);
        v[l + 16u] = dl * float(iq4nl_values[b >> 4]);
    }
}
