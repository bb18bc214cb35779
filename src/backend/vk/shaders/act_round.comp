#version 450
// act_round: y = x rounded as the CPU rounds a matmul's activations to the weight's vec_dot_type
// (kernels/ref.c, ref_kquants.c), back in f32, so the device's f32 products see the values the
// CPU's integer or f16 dot products do. One invocation per block of the type (elementwise.glsl
// grid over blocks):
//   mode 0, F16 (block 1): round to nearest even half, as fp32_to_fp16.
//   mode 1, BF16 (block 1): round to nearest even bfloat16, NaN kept quiet, as fp32_to_bf16.
//   mode 2, Q8_0 and Q8_1 (block 32): d = fp16(amax / 127), q = round-half-even(x * (127 /
//     amax)), value q * d (ref_q8_0_act_from_float). Q8_1's extra sum only enters the offset
//     term of Q4_1/Q5_1 dots, through its own fp16 rounding, which is not modelled.
//   mode 3, Q8_K (block 256): iscale = -127 / (the first element of largest |x|), q =
//     min(round-half-even(iscale * x), 127), value q * (1 / iscale) (ref_q8_k_from_float).
// Divisions are correctly rounded (div_rn.glsl), as the CPU's are. y may be x: each block is
// read whole before it is written.
#include "div_rn.glsl"
#include "elementwise.glsl"
#include "f16.glsl"

layout(push_constant) uniform Push {
    uint n;    // blocks
    uint groups_x;
    uint mode; // as above
} p;

layout(std430, binding = 0) buffer X { float x[]; }; // may be Y
layout(std430, binding = 1) buffer Y { float y[]; };

// float(q) * d with IEEE's sign of zero (0 * d takes d's sign), which compilers free to ignore
// the sign of a zero (lavapipe's) would otherwise take from the rounded product
float q8_value(int q, float d)
{
    return q == 0 ? uintBitsToFloat(floatBitsToUint(d) & 0x80000000u) : float(q) * d;
}

void main()
{
    const uint b = elem_index(p.groups_x);
    if (b >= p.n)
        return;
    if (p.mode == 0u) {
        y[b] = unpackHalf2x16(f16_bits(x[b])).x;
    } else if (p.mode == 1u) {
        const uint u = floatBitsToUint(x[b]);
        const uint h = (u & 0x7FFFFFFFu) > 0x7F800000u ? (u >> 16) | 64u
                                                        : (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
        y[b] = uintBitsToFloat(h << 16);
    } else if (p.mode == 2u) {
        const uint o = 32u * b;
        float amax   = 0.0;
        for (uint j = 0; j < 32u; j++)
            amax = max(amax, abs(x[o + j]));
        const float id = amax != 0.0 ? div_rn(127.0, amax) : 0.0;
        const float d  = amax != 0.0 ? unpackHalf2x16(f16_bits(div_rn(amax, 127.0))).x : 0.0;
        for (uint j = 0; j < 32u; j++) {
            precise float s = x[o + j] * id;
            y[o + j]        = q8_value(int(roundEven(s)), d);
        }
    } else {
        const uint o = 256u * b;
        float amax = 0.0, mx = 0.0;
        for (uint j = 0; j < 256u; j++)
            if (abs(x[o + j]) > amax) {
                amax = abs(x[o + j]);
                mx   = x[o + j];
            }
        if (amax == 0.0) {
            for (uint j = 0; j < 256u; j++)
                y[o + j] = 0.0;
            return;
        }
        const float iscale = mx > 0.0 ? -div_rn(127.0, mx) : div_rn(127.0, -mx);
        const float d      = iscale < 0.0 ? -div_rn(1.0, -iscale) : div_rn(1.0, iscale);
        for (uint j = 0; j < 256u; j++) {
            precise float s = iscale * x[o + j];
            y[o + j]        = q8_value(min(int(roundEven(s)), 127), d);
        }
    }
}
