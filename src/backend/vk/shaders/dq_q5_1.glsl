// dq_q5_1.glsl: unit(base, u, v) for Q5_1 (24-byte blocks: fp16 d, fp16 m, 4 bytes of 5th bits,
// 16 bytes of nibbles, q5.glsl; value q * d + m, the product rounded before the add).
#include "q5.glsl"
#define UNIT 32
void unit(uint base, uint u, out float v[UNIT])
{
    const uint o  = base + 24u * u;
    const float d = w_f16(o);
    const float m = w_f16(o + 2u);
    uint q[32];
    q5_quants(o + 4u, o + 8u, q);
    for (uint j = 0; j < 32u; j++) {
        precise float r = float(q[j]) * d + m;
        v[j] = r;
    }
}
