// f16.glsl: f32 to IEEE half bits, round to nearest even, as util/fp16.h's fp32_to_fp16 (NaN
// to 0x7E00 with its sign, overflow to infinity). Integer arithmetic only: the device's own
// conversion has no rounding mode the spec pins down, and its f32 arithmetic may flush the
// subnormals a float-based conversion passes through.

uint f16_bits(float f)
{
    const uint x    = floatBitsToUint(f);
    const uint sign = (x >> 16) & 0x8000u;
    const uint a    = x & 0x7FFFFFFFu;
    if (a > 0x7F800000u)
        return sign | 0x7E00u;
    if (a >= 0x477FF000u) // halfway past 65504 and up: infinity
        return sign | 0x7C00u;
    uint h, rem, half_, shift;
    if (a >= 0x38800000u) { // a normal half: rebias the exponent, round off 13 bits
        shift = 13u;
        h     = (a - 0x38000000u) >> 13;
    } else { // a subnormal half: the 24-bit significand shifted down to units of 2^-24
        const uint e = a >> 23;
        if (e < 102u)
            return sign;
        shift = 126u - e;
        h     = ((a & 0x7FFFFFu) | 0x800000u) >> shift;
        rem   = ((a & 0x7FFFFFu) | 0x800000u) & ((1u << shift) - 1u);
        half_ = 1u << (shift - 1u);
        if (rem > half_ || (rem == half_ && (h & 1u) != 0u))
            h++;
        return sign | h;
    }
    rem   = a & 0x1FFFu;
    half_ = 0x1000u;
    if (rem > half_ || (rem == half_ && (h & 1u) != 0u))
        h++;
    return sign | h;
}
