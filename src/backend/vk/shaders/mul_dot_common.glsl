// mul_dot_common.glsl: y = W x for weights whose CPU vec_dot_type is Q8_0, with activations
// as Q8_0 blocks (act_q8_0_blk), matrix-vector (decode) only, the products as packed 8-bit
// integer dot products (SPIR-V's OpSDot, SPV_KHR_integer_dot_product: glslang has no GLSL
// built-in for it, so it is declared through GL_EXT_spirv_intrinsics; the Makefile builds these
// shaders only where glslc takes that, and vk_device.c runs them only where the device enables
// shaderIntegerDotProduct).
//
// The including shader defines BLOCK_BYTES (a weight block's bytes), NACC (float accumulators
// per row), includes this, then defines dot_block(o, xq, dx, acc), which adds the block at byte
// o times the activation block (quants xq, scale dx) into acc as the CPU's reference vec_dot
// does, and acc_sum(acc), the reference's final sum of them. A team of one (rows of a single
// block, vk_idot.c's choice) so gives the reference's bits; a larger team's lanes each do that
// over every team-th block and the team adds its lanes' sums as a tree (log2 team roundings).
// Teams, rows and grid as mul_common.glsl's matrix-vector kernel.
#extension GL_EXT_spirv_intrinsics : require
#include "common.glsl"

#ifdef MUL_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#endif

#define WG 64
#define TEAM 8
#define VR 4

// the sum of the four products of the signed bytes of a and b (format 0: PackedVectorFormat4x8Bit)
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018],
                  id = 4450)
int sdot4x8(uint a, uint b, spirv_literal int packed_format);

layout(local_size_x = WG) in;

layout(push_constant) uniform Push {
    uint n_in;    // elements per row, a multiple of 32
    uint n_rows;  // rows of W in this buffer
    uint n_tok;   // activation rows
    uint row_len; // bytes per row of W
    uint row0;    // the first of them in y: a weight past one buffer is split by rows
    uint n_out;   // outputs per token (y's row length)
    uint team;    // invocations per team of VR rows, 1, 2, 4 or 8
} p;

// [n_tok][n_in / 32][9]: 8 words of packed quants, then the block's scale as an f32
layout(std430, binding = 1) readonly buffer Acts { uint xb[]; };
layout(std430, binding = 2) writeonly buffer Out { float y[]; };

#ifndef MUL_SUBGROUP
shared float team_part[WG];
#endif

#include "mul_team.glsl"

void dot_block(uint o, uint xq[8], float dx, inout float acc[NACC]);
float acc_sum(float acc[NACC]);

void main()
{
    const uint wgi = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
#ifdef MUL_SUBGROUP
    const uint tid = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
#else
    const uint tid = gl_LocalInvocationID.x;
#endif
    const uint team = p.team;
    const uint lane = tid % team;
    const uint row0 = (wgi * (WG / team) + tid / team) * VR;
    const uint t    = gl_WorkGroupID.z;
    const uint nb   = p.n_in / 32u;
    precise float acc[VR][NACC];
    for (uint r = 0; r < VR; r++)
        for (uint l = 0; l < NACC; l++)
            acc[r][l] = 0.0;
    if (row0 < p.n_rows) {
        for (uint k = lane; k < nb; k += team) {
            // the block's activations, read once for the team's VR rows
            const uint xo = (t * nb + k) * 9u;
            uint xq[8];
            for (uint l = 0; l < 8u; l++)
                xq[l] = xb[xo + l];
            const float dx = uintBitsToFloat(xb[xo + 8u]);
            for (uint r = 0; r < VR; r++)
                dot_block(min(row0 + r, p.n_rows - 1u) * p.row_len + BLOCK_BYTES * k, xq, dx,
                          acc[r]);
        }
    }
    precise float sum[VR];
    for (uint r = 0; r < VR; r++)
        sum[r] = acc_sum(acc[r]);
    team_store(sum, tid, lane, team, row0, t);
}
