// div_rn.glsl: a / b correctly rounded (round to nearest even) for positive normal a and b,
// where the device's division may be 2.5 ulp off (the spec's bound): the CPU's quantizers
// divide in IEEE arithmetic, and a quotient one ulp off moves a quant across a rounding tie.

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
