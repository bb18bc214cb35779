// dq_q4_k.glsl: unit(base, u, v) for Q4_K (144-byte super-blocks of 256: fp16 d and dmin, 12 bytes
// of scales, 128 bytes of nibbles; sub-block j of 32 is the low (j even) or high nibbles of bytes
// 32 * (j / 2)..+31; value (d * sc) * q - (dmin * m), as the reference rounds it).
#include "kquant.glsl"
#define UNIT 32
void unit(uint base, uint u, out float v[UNIT])
{
    const uint o     = base + 144u * (u >> 3);
    const uint j     = u & 7u;
    const uvec2 sm   = k4_scale_min(o + 4u, j);
    const float dl   = w_f16(o) * float(sm.x);
    const float ml   = w_f16(o + 2u) * float(sm.y);
    const uint q0    = o + 16u + 32u * (j >> 1);
    const uint shift = (j & 1u) * 4u;
    for (uint l = 0; l < 32u; l++) {
        precise float r = dl * float((w_byte(q0 + l) >> shift) & 15u) - ml;
        v[l] = r;
    }
}
