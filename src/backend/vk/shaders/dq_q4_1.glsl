// dq_q4_1.glsl: unit(base, u, v) for Q4_1 (20-byte blocks: fp16 d, fp16 m, 16 bytes of nibbles as
// Q4_0's; value q * d + m, the product rounded before the add as the reference does).
#define UNIT 32
void unit(uint base, uint u, out float v[UNIT])
{
    const uint o  = base + 20u * u;
    const float d = w_f16(o);
    const float m = w_f16(o + 2u);
    for (uint j = 0; j < 16u; j++) {
        const uint b     = w_byte(o + 4u + j);
        precise float r0 = float(b & 15u) * d + m;
        precise float r1 = float(b >> 4) * d + m;
        v[j]       = r0;
        v[j + 16u] = r1;
    }
}
