// dq_q5_0.glsl: unit(base, u, v) for Q5_0 (22-byte blocks: fp16 d, 4 bytes of 5th bits, 16 bytes
// of nibbles, q5.glsl; value (q - 16) * d).
#include "q5.glsl"
#define UNIT 32
void unit(uint base, uint u, out float v[UNIT])
{
    const uint o  = base + 22u * u;
    const float d = w_f16(o);
    uint q[32];
    q5_quants(o + 2u, o + 6u, q);
    for (uint j = 0; j < 32u; j++)
        v[j] = float(int(q[j]) - 16) * d;
}
