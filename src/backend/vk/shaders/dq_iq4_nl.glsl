// dq_iq4_nl.glsl: unit(base, u, v) for IQ4_NL (18-byte blocks: fp16 d, 16 bytes of 4-bit indices
// as Q4_0's nibbles; value d * iq4nl_values[index]).
#include "iq4nl.glsl"
#define UNIT 32
void unit(uint base, uint u, out float v[UNIT])
{
    const uint o  = base + 18u * u;
    const float d = w_f16(o);
    for (uint j = 0; j < 16u; j++) {
        const uint b = w_byte(o + 2u + j);
        v[j]       = d * float(iq4nl_values[b & 15u]);
        v[j + 16u] = d * float(iq4nl_values[b >> 4]);
    }
}
