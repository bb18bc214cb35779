// dq_f16.glsl: unit(base, u, v) for IEEE half.
#define UNIT 1
void unit(uint base, uint u, out float v[UNIT])
{
    v[0] = w_f16(base + 2u * u);
}
