// common.glsl: reading a weight buffer as raw bytes. Weights stay in the file's block layout
// (util/dtype_blocks.h): blocks of 18 or 34 bytes are not word-aligned, so every field is
// assembled from the 32-bit words of binding 0, which needs no 8- or 16-bit storage feature.
// A fast version would load whole words (or use 16-bit storage where offered) instead.

layout(std430, binding = 0) readonly buffer Weights { uint w[]; };

uint w_byte(uint off)
{
    return (w[off >> 2] >> ((off & 3u) * 8u)) & 0xFFu;
}

uint w_u16(uint off)
{
    return w_byte(off) | (w_byte(off + 1u) << 8);
}

// an IEEE half at byte off, as ggml's fp16_to_fp32 (exact)
float w_f16(uint off)
{
    return unpackHalf2x16(w_u16(off)).x;
}

// a signed byte
int w_i8(uint off)
{
    return int(w_byte(off) << 24) >> 24;
}
