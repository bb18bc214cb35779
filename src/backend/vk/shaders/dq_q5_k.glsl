// dq_q5_k.glsl: unit(base, u, v) for Q5_K (176-byte super-blocks: Q4_K's d, dmin and scales, then
// 32 bytes of 5th bits (element 32 * j + l's is bit j of byte l), then Q4_K's 128 bytes of
// nibbles).
#include "kquant.glsl"
#define UNIT 32
void unit(uint base, uint u, out float v[UNIT])
{
    const uint o     = base + 176u * (u >> 3);
    const uint j     = u & 7u;
    const uvec2 sm   = k4_scale_min(o + 4u, j);
    const float dl   = w_f16(o) * float(sm.x);
    const float ml   = w_f16(o + 2u) * float(sm.y);
    const uint q0    = o + 48u + 32u * (j >> 1);
    const uint shift = (j & 1u) * 4u;
    for (uint l = 0; l < 32u; l++) {
        const uint q    = ((w_byte(q0 + l) >> shift) & 15u) | (((w_byte(o + 16u + l) >> j) & 1u) << 4);
        precise float r = dl * float(q) - ml;
        v[l] = r;
    }
}
