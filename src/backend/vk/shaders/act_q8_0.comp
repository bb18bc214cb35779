#version 450
// act_q8_0: activations rounded as the CPU rounds them for a weight whose vec_dot_type is Q8_0
// (llama.cpp's x86 quantize_row_q8_0, kernels/ref.c's ref_q8_0_act_from_float): per block of
// 32, d = amax / 127 stored as a half, q = round-half-even(x * (127 / amax)), and the value
// q * half(d) written back as f32, so a matmul over the result sums the CPU's activations.
// The two divisions are correctly rounded here (the device's may be 2.5 ulp off, which would
// move a quant across a rounding boundary now and then). One invocation per block; y may be x.
#include "elementwise.glsl"
#include "f16.glsl"

layout(push_constant) uniform Push {
    uint n;        // blocks
    uint groups_x;
} p;

layout(std430, binding = 0) buffer X { float x[]; }; // may be Y: each block is read, then written
layout(std430, binding = 1) buffer Y { float y[]; };

// a - c * b exactly, for c within a few ulp of a / b (all positive and normal): c * b as the
// rounded product plus its error from 12-bit halves (Dekker), each partial product exact
float rem(float a, float b, float c)
{
    precise float pr = c * b;
    precise float cs = c * 4097.0;
    precise float ch = cs - (cs - c);
    precise float cl = c - ch;
    precise float bs = b * 4097.0;
    precise float bh = bs - (bs - b);
    precise float bl = b - bh;
    precise float e  = ((ch * bh - pr) + ch * bl + cl * bh) + cl * bl;
    precise float r  = (a - pr) - e;
    return r;
}

// a / b rounded to nearest even: the device's quotient or the neighbour with the smaller
// remainder
float div_rn(float a, float b)
{
    precise float q0 = a / b;
    float best = q0, br = abs(rem(a, b, q0));
    for (int k = -2; k <= 2; k++) {
        const float c = uintBitsToFloat(uint(int(floatBitsToUint(q0)) + k));
        const float r = abs(rem(a, b, c));
        if (r < br || (r == br && (floatBitsToUint(c) & 1u) == 0u)) {
            best = c;
            br   = r;
        }
    }
    return best;
}

void main()
{
    const uint b = elem_index(p.groups_x);
    if (b >= p.n)
        return;
    const uint o = b * 32u;
    float v[32];
    float amax = 0.0;
    for (uint j = 0; j < 32u; j++) {
        v[j] = x[o + j];
        amax = max(amax, abs(v[j]));
    }
    if (amax == 0.0) {
        for (uint j = 0; j < 32u; j++)
            y[o + j] = 0.0;
        return;
    }
    const float d  = unpackHalf2x16(f16_bits(div_rn(amax, 127.0))).x;
    const float id = div_rn(127.0, amax);
    for (uint j = 0; j < 32u; j++) {
        precise float s = v[j] * id;
        const int qi    = int(roundEven(s));
        precise float q = float(qi) * d;
        y[o + j] = qi == 0 ? 0.0 : q; // +0 for a zero quant, as the CPU's int8
    }
}
