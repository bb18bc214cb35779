// dq_q6_k.glsl: unit(base, u, v) for Q6_K (210-byte super-blocks: 128 bytes of low nibbles, 64 of
// high 2-bit pairs, 16 int8 scales, fp16 d). Unit u is 32 elements: group g (0..3) of half h of
// super-block u / 8; element l of it takes a nibble of ql[64h + 32 (g & 1) + l] (low for g < 2)
// and bits 2g..2g+1 of qh[32h + l]; value (d * scale) * (q - 32), scale per 16.
#define UNIT 32
void unit(uint base, uint u, out float v[UNIT])
{
    const uint o     = base + 210u * (u >> 3);
    const uint h     = (u >> 2) & 1u;
    const uint g     = u & 3u;
    const float d    = w_f16(o + 208u);
    const uint ql    = o + 64u * h + 32u * (g & 1u);
    const uint qh    = o + 128u + 32u * h;
    const uint shift = (g >> 1) * 4u;
    const uint sc    = o + 192u + 8u * h + 2u * g;
    const float dl0  = d * float(w_i8(sc));
    const float dl1  = d * float(w_i8(sc + 1u));
    for (uint l = 0; l < 32u; l++) {
        const uint q = ((w_byte(ql + l) >> shift) & 15u) | (((w_byte(qh + l) >> (2u * g)) & 3u) << 4);
        v[l] = (l < 16u ? dl0 : dl1) * float(int(q) - 32);
    }
}
