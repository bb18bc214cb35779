// q5.glsl: the 5-bit quants of Q5_0 and Q5_1 blocks. The 16 bytes at qs hold the low 4 bits as
// Q4_0's nibbles; the little-endian 32-bit word at qh holds element j's 5th bit in bit j.

// the 32 quants (0..31) of the block whose qh and qs start at those byte offsets
void q5_quants(uint qh, uint qs, out uint q[32])
{
    const uint h = w_byte(qh) | (w_byte(qh + 1u) << 8) | (w_byte(qh + 2u) << 16) |
                   (w_byte(qh + 3u) << 24);
    for (uint j = 0; j < 16u; j++) {
        const uint b = w_byte(qs + j);
        q[j]       = (b & 15u) | (((h >> j) & 1u) << 4);
        q[j + 16u] = (b >> 4) | (((h >> (j + 16u)) & 1u) << 4);
    }
}
