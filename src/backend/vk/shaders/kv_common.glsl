// kv_common.glsl: the paged KV cache as the shaders address it (src/model/kv.h): one layer's K
// (or V) is [n_blocks][block_tokens][kv_dim] elements of f16 (KV_F16 defined) or f32, read and
// written as 32-bit words; a sequence's block table is table_stride int32 block ids starting
// at seq * table_stride, in position order. Token j of a sequence lives in block
// tables[seq * table_stride + j / block_tokens], row j % block_tokens.

// element offset of token j's row of the sequence whose table starts at tb
uint kv_row(uint tb, uint j, uint block_tokens, uint kv_dim)
{
    const uint block = uint(tables[tb + j / block_tokens]);
    return (block * block_tokens + j % block_tokens) * kv_dim;
}
