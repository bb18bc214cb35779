// dq_q8_0.glsl: unit(base, u, v) for Q8_0 (34-byte blocks: fp16 d, 32 int8 q; value q * d).
#define UNIT 32
void unit(uint base, uint u, out float v[UNIT])
{
    const uint o  = base + 34u * u;
    const float d = w_f16(o);
    for (uint j = 0; j < 32u; j++)
        v[j] = float(w_i8(o + 2u + j)) * d;
}
