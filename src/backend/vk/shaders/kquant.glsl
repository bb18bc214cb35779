// kquant.glsl: the K-quants' shared pieces. Q4_K and Q5_K pack 8 6-bit scales and 8 6-bit mins
// in 12 bytes (block_q4_K's comment in util/dtype_blocks.h): for sub-block j < 4 the low 6
// bits of bytes j and j + 4; for j >= 4 a nibble of byte j + 4 and the top 2 bits of bytes
// j - 4 (scale) and j (min).

// (scale, min) of sub-block j from the 12 bytes at off
uvec2 k4_scale_min(uint off, uint j)
{
    if (j < 4u)
        return uvec2(w_byte(off + j) & 63u, w_byte(off + j + 4u) & 63u);
    const uint lo = w_byte(off + j + 4u);
    return uvec2((lo & 15u) | ((w_byte(off + j - 4u) >> 6) << 4),
                 (lo >> 4) | ((w_byte(off + j) >> 6) << 4));
}
