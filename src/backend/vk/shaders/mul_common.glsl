// mul_common.glsl: y = W x for one weight type. The including shader defines UNIT (elements
// dequantized together: a block, or 1 for float weights) and unit(base, u, v), which writes
// the UNIT values of unit u of the row starting at byte base, exactly as the reference
// to_float does (the same f32 products). Built twice (the Makefile): plain, and with
// MUL_SUBGROUP for devices whose subgroups shuffle (vk_ops.c picks).
//
// W may be one part of a weight split by rows across buffers: its rows are y's row0.. .
// Workgroups are numbered w = y * groups_x + x (x alone may stop at 65535). Two kernels, one
// picked per dispatch by push.tiled:
//
// - matrix-vector (decode): a team of push.team invocations (1, 2, 4 or 8: no more than the
//   row has chunks) per VR rows, VR * WG / team rows per workgroup, token z. Lane l of a team
//   takes chunks l, l + team, ... of its rows, reading each chunk's activations once for all
//   VR; the team adds its lanes' sums by shuffles (MUL_SUBGROUP) or through shared memory.
// - tiled (prefill): a workgroup computes TM rows by TN tokens (tile w, token tile z). Per
//   chunk of the row it stages the rows' dequantized values and the tokens' activations in
//   shared memory, then each invocation computes RM x RN outputs from them: a weight is
//   dequantized once per TN tokens rather than once per token, and each value read from
//   shared memory serves RM or RN products.
//
// Order of the sums (tests/unit/test_vk.c bounds the error): a chunk is CH consecutive
// elements; an output's products over a chunk go into four interleaved partial sums (CH / 4
// roundings each) added as a pair of pairs (2). A tiled output adds its chunks' sums
// alternately into two accumulators (n_in / (2 CH) each, then 1); a team's lane adds every
// team-th chunk (vk_ops.c's teams make that at most n_in / (8 CH) + 1, or 2) and the team
// adds its lanes as a tree (log2 team). At n_in = 4096 that is at most 1 + 8 + 2 + 64 + 1 =
// 76 roundings of sum |w x|.
//
// On a CPU implementation (lavapipe) every load is a loop over the lanes, each component
// on its own, so the values loaded per product, not the arithmetic, set the speed: hence
// the staging, the registers that hold a chunk's activations, and vec4 loads (fewer loops).

#define WG 64
#define TEAM 8      // the largest team
#define VR 4        // rows per team, matrix-vector: the chunk's activations serve them all
#define RM 8        // rows per invocation, tiled
#define RN 4        // tokens per invocation, tiled
#define TM (8 * RM) // rows per tile: the invocations form 8 x 8
#define TN (8 * RN) // tokens per tile

// a chunk: the staging tiles (TM + TN) x CH floats fit the 16 KiB of shared memory every
// device offers; the types' units are blocks or sub-blocks of 32 or 16, or single floats
#define CH 32
#if UNIT > CH || (CH % UNIT) != 0
#error "mul_common.glsl: UNIT must divide 32"
#endif
#define CH4 (CH / 4)
// units that fill whole vec4s: one unit of 4 or more elements, or 4 / UNIT of them
#if UNIT >= 4
#define GU 1
#define GE UNIT
#else
#define GU (4 / UNIT)
#define GE 4
#endif

#ifdef MUL_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#endif

layout(local_size_x = WG) in;

layout(push_constant) uniform Push {
    uint n_in;    // elements per row, a multiple of UNIT
    uint n_rows;  // rows of W in this buffer
    uint n_tok;   // activation rows
    uint row_len; // bytes per row of W
    uint row0;    // the first of them in y: a weight past one buffer is split by rows
    uint n_out;   // outputs per token (y's row length)
    uint tiled;   // 1: the tiled kernel, grid (row tiles of TM, token tiles of TN)
    uint team;    // matrix-vector: invocations per team of VR rows, 1, 2, 4 or 8
} p;

layout(std430, binding = 1) readonly buffer Acts { float x[]; };   // [n_tok][n_in]
layout(std430, binding = 1) readonly buffer Acts4 { vec4 x4[]; };  // the same, when n_in % 4 == 0
layout(std430, binding = 2) writeonly buffer Out { float y[]; };   // [n_tok][n_out]

shared vec4 ws[TM][CH4]; // tiled: the tile's rows over one chunk, dequantized
shared vec4 xs[TN][CH4]; // tiled: the tile's tokens over that chunk
#ifndef MUL_SUBGROUP
shared float team_part[WG];
#endif

#include "mul_team.glsl"

// Elements i..i+3 of the activations (i a multiple of 4 in token t's row), zero past n_in.
vec4 x_load(uint t, uint i)
{
    if (i + 4u <= p.n_in && p.n_in % 4u == 0u)
        return x4[(t * p.n_in + i) / 4u];
    vec4 r = vec4(0.0);
    for (uint e = 0; e < 4u; e++)
        if (i + e < p.n_in)
            r[e] = x[t * p.n_in + i + e];
    return r;
}

// Elements 4 g .. 4 g + GE - 1 of the row at base, from units g * GU.. (zero past n_in).
void group(uint base, uint g, out vec4 o[GE / 4])
{
    float v[UNIT];
    float f[GE];
    for (uint j = 0; j < GU; j++) {
        const uint u = g * GU + j;
        if (u * UNIT < p.n_in) {
            unit(base, u, v);
            for (uint e = 0; e < UNIT; e++)
                f[j * UNIT + e] = v[e];
        } else {
            for (uint e = 0; e < UNIT; e++)
                f[j * UNIT + e] = 0.0;
        }
    }
    for (uint k = 0; k < GE / 4; k++)
        o[k] = vec4(f[4 * k], f[4 * k + 1], f[4 * k + 2], f[4 * k + 3]);
}

float hsum(vec4 s)
{
    return (s.x + s.y) + (s.z + s.w);
}

// ---------------------------------------------------------------- matrix-vector ---

void mul_vec(uint wgi)
{
#ifdef MUL_SUBGROUP
    // teams are runs of team in a subgroup's numbering (full subgroups of 8 or more)
    const uint tid = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
#else
    const uint tid = gl_LocalInvocationID.x;
#endif
    const uint team = p.team;
    const uint lane = tid % team;
    const uint row0 = (wgi * (WG / team) + tid / team) * VR; // this team's rows row0..+VR-1
    const uint t    = gl_WorkGroupID.z;
    const uint n_ch = (p.n_in + CH - 1) / CH;
    float acc[VR];
    for (uint r = 0; r < VR; r++)
        acc[r] = 0.0;
    if (row0 < p.n_rows) {
        vec4 o[GE / 4];
        for (uint k = lane; k < n_ch; k += team) {
            // the chunk's activations, read once for the team's VR rows
            vec4 xc[CH4];
            for (uint q = 0; q < CH4; q++)
                xc[q] = x_load(t, k * CH + 4u * q);
            for (uint r = 0; r < VR; r++) {
                const uint row = min(row0 + r, p.n_rows - 1u);
                vec4 s = vec4(0.0);
                for (uint g = 0; g < CH / GE; g++) {
                    group(row * p.row_len, k * (CH / GE) + g, o);
                    for (uint q = 0; q < GE / 4; q++)
                        s += o[q] * xc[g * (GE / 4) + q];
                }
                acc[r] += hsum(s);
            }
        }
    }
    team_store(acc, tid, lane, team, row0, t);
}

// ---------------------------------------------------------------------- tiled ---

void mul_tiled(uint wgi)
{
    const uint tid  = gl_LocalInvocationID.x;
    const uint r0   = wgi * TM, t0 = gl_WorkGroupID.z * TN;
    const uint ri   = tid / 8, ti = tid % 8; // rows ri + 8 i, tokens ti + 8 j
    const uint n_ch = (p.n_in + CH - 1) / CH;
    // even and odd chunks' sums; two arrays, as an index that varies would not stay in registers
    float acc0[RM][RN], acc1[RM][RN];
    for (uint i = 0; i < RM; i++)
        for (uint j = 0; j < RN; j++) {
            acc0[i][j] = 0.0;
            acc1[i][j] = 0.0;
        }
    vec4 o[GE / 4];
    for (uint k = 0; k < n_ch; k++) {
        for (uint q = tid; q < TM * (CH / GE); q += WG) {
            const uint r = q / (CH / GE), g = q % (CH / GE);
            if (r0 + r < p.n_rows)
                group((r0 + r) * p.row_len, k * (CH / GE) + g, o);
            else
                for (uint e = 0; e < GE / 4; e++)
                    o[e] = vec4(0.0);
            for (uint e = 0; e < GE / 4; e++)
                ws[r][g * (GE / 4) + e] = o[e];
        }
        for (uint q = tid; q < TN * CH4; q += WG) {
            const uint t = q / CH4, e = q % CH4;
            xs[t][e] = t0 + t < p.n_tok ? x_load(t0 + t, k * CH + 4u * e) : vec4(0.0);
        }
        barrier();
        vec4 s[RM][RN];
        for (uint i = 0; i < RM; i++)
            for (uint j = 0; j < RN; j++)
                s[i][j] = vec4(0.0);
        for (uint e = 0; e < CH4; e++) {
            vec4 wv[RM], xv[RN];
            for (uint i = 0; i < RM; i++)
                wv[i] = ws[ri + 8 * i][e];
            for (uint j = 0; j < RN; j++)
                xv[j] = xs[ti + 8 * j][e];
            for (uint i = 0; i < RM; i++)
                for (uint j = 0; j < RN; j++)
                    s[i][j] += wv[i] * xv[j];
        }
        for (uint i = 0; i < RM; i++)
            for (uint j = 0; j < RN; j++)
                if ((k & 1u) == 0u)
                    acc0[i][j] += hsum(s[i][j]);
                else
                    acc1[i][j] += hsum(s[i][j]);
        barrier();
    }
    for (uint i = 0; i < RM; i++)
        for (uint j = 0; j < RN; j++) {
            const uint r = r0 + ri + 8 * i, t = t0 + ti + 8 * j;
            if (r < p.n_rows && t < p.n_tok)
                y[t * p.n_out + p.row0 + r] = acc0[i][j] + acc1[i][j];
        }
}

void main()
{
    const uint wgi = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (p.tiled != 0u)
        mul_tiled(wgi);
    else
        mul_vec(wgi);
}
