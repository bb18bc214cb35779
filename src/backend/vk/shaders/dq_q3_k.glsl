// dq_q3_k.glsl: unit(base, u, v) for Q3_K (110-byte super-blocks of 256: 32 bytes of high bits,
// 64 bytes of low 2-bit quants as Q2_K's, 12 bytes of 6-bit scales, fp16 d). Unit u is group
// k = u % 4 of half h = u / 4 % 2 of super-block u / 8; element l's low bits are bits 2k..2k+1
// of qs[32h + l], and 4 is subtracted where bit 4h + k of hmask[l] is clear. Sub-block
// j = 8h + 2k + l / 16 has scale (low nibble of byte j, or high of byte j - 8, | bits
// 2(j / 4)..+1 of byte 8 + j % 4 << 4) - 32; value (d * scale) * q.
#define UNIT 32
void unit(uint base, uint u, out float v[UNIT])
{
    const uint o  = base + 110u * (u >> 3);
    const uint h  = (u >> 2) & 1u;
    const uint k  = u & 3u;
    const float d = w_f16(o + 108u);
    const uint qs = o + 32u + 32u * h;
    const uint hb = 4u * h + k;
    for (uint s = 0; s < 2u; s++) {
        const uint j   = 8u * h + 2u * k + s;
        const uint lo  = j < 8u ? w_byte(o + 96u + j) & 15u : w_byte(o + 96u + j - 8u) >> 4;
        const uint hi  = (w_byte(o + 104u + (j & 3u)) >> (2u * (j >> 2))) & 3u;
        const float dl = d * float(int(lo | (hi << 4)) - 32);
        for (uint l = 16u * s; l < 16u * s + 16u; l++) {
            const int q = int((w_byte(qs + l) >> (2u * k)) & 3u) -
                          (((w_byte(o + l) >> hb) & 1u) != 0u ? 0 : 4);
            v[l] = dl * float(q);
        }
    }
}
