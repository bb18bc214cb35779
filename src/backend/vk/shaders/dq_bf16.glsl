// dq_bf16.glsl: unit(base, u, v) for bfloat16 (the top half of an f32's bits: exact).
#define UNIT 1
void unit(uint base, uint u, out float v[UNIT])
{
    v[0] = uintBitsToFloat(w_u16(base + 2u * u) << 16);
}
