// dq_q4_0.glsl: unit(base, u, v) for Q4_0 (18-byte blocks: fp16 d, 16 bytes of nibbles; byte j's
// low nibble is element j, its high nibble element j + 16; value (q - 8) * d).
#define UNIT 32
void unit(uint base, uint u, out float v[UNIT])
{
    const uint o  = base + 18u * u;
    const float d = w_f16(o);
    for (uint j = 0; j < 16u; j++) {
        const uint b = w_byte(o + 2u + j);
        v[j]       = float(int(b & 15u) - 8) * d;
        v[j + 16u] = float(int(b >> 4) - 8) * d;
    }
}
