// dq_f32.glsl: unit(base, u, v) for f32.
#define UNIT 1
void unit(uint base, uint u, out float v[UNIT])
{
    v[0] = uintBitsToFloat(w[(base >> 2) + u]);
}
