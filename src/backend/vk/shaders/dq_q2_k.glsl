// dq_q2_k.glsl: unit(base, u, v) for Q2_K (84-byte super-blocks of 256: 16 scale bytes, 64 bytes
// of 2-bit quants, fp16 d and dmin). Unit u is 32 elements: group k = u % 4 of half h = u / 4 % 2
// of super-block u / 8; element l of it is bits 2k..2k+1 of qs[32h + l] and lies in sub-block
// 8h + 2k + l / 16, whose scale byte holds sc (low nibble) and m (high); value
// (d * sc) * q - (dmin * m), as the reference rounds it.
#define UNIT 32
void unit(uint base, uint u, out float v[UNIT])
{
    const uint o     = base + 84u * (u >> 3);
    const uint h     = (u >> 2) & 1u;
    const uint k     = u & 3u;
    const float d    = w_f16(o + 80u);
    const float dmin = w_f16(o + 82u);
    const uint qs    = o + 16u + 32u * h;
    for (uint s = 0; s < 2u; s++) {
        const uint sc  = w_byte(o + 8u * h + 2u * k + s);
        const float dl = d * float(sc & 15u);
        const float ml = dmin * float(sc >> 4);
        for (uint l = 16u * s; l < 16u * s + 16u; l++) {
            precise float r = dl * float((w_byte(qs + l) >> (2u * k)) & 3u) - ml;
            v[l] = r;
        }
    }
}
