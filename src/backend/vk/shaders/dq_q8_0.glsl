// dq_q8_0.glsl: unit(base, u, v) for Q8_0 (34-byte blocks: fp16 d, 32 int8 q; value q * d).
// Rows are whole blocks, so a block starts at an even byte: d is one half of a word and the
// quants start on a word (8 words) or halfway into one (9 words, the last the block's own).
// Word loads rather than byte ones: on lavapipe every load is a loop over the lanes.
#define UNIT 32
void unit(uint base, uint u, out float v[UNIT])
{
    const uint o   = base + 34u * u;
    const float d  = unpackHalf2x16(w[o >> 2] >> ((o & 2u) * 8u)).x;
    const uint q0  = (o + 2u) >> 2;
    const bool mid = ((o + 2u) & 2u) != 0u;
    uint nxt       = w[q0];
    for (uint k = 0; k < 8u; k++) {
        const uint cur = nxt;
        nxt            = k < 7u || mid ? w[q0 + k + 1u] : 0u;
        const uint q   = mid ? (cur >> 16) | (nxt << 16) : cur;
        for (uint b = 0; b < 4u; b++)
            v[4u * k + b] = float(bitfieldExtract(int(q), int(8u * b), 8)) * d;
    }
}
