/*
 * ggml_dot.h: f32 sums in the order llama.cpp's AVX-512 build runs them,
 * for the model code that must mirror them outside the kernel table (the
 * MoE router and the DeltaNet state). Portable C: the order is the point,
 * not the speed. These are compiled without floating-point contraction
 * (gcc's default for -std=c11; each product is its own statement so
 * clang's per-expression contraction cannot fuse it either).
 */
#ifndef HEARTH_GGML_DOT_H
#define HEARTH_GGML_DOT_H

#include <math.h>
#include <stdint.h>

/* Sixteen lanes added as gcc's _mm512_reduce_add_ps adds them (halves, then quarters, ...). */
static inline float ggml_reduce16(const float v[16])
{
    float t8[8], t4[4];
    for (int l = 0; l < 8; l++)
        t8[l] = v[l + 8] + v[l];
    for (int l = 0; l < 4; l++)
        t4[l] = t8[l + 4] + t8[l];
    return (t4[0] + t4[2]) + (t4[1] + t4[3]);
}

/*
 * The tail of ggml_vec_dot_f32 from element i on, added to sum: gcc -O3
 * vectorizes llama.cpp's scalar loop, so products are rounded sixteen, then
 * eight, at a time and added in order, and only the last (fewer than eight)
 * elements are fused into fmas.
 */
static inline float ggml_vec_dot_f32_tail(const float *x, const float *y, int64_t i, int64_t n,
                                          float sum)
{
    for (; n - i >= 16; i += 16)
        for (int l = 0; l < 16; l++) {
            const float p = x[i + l] * y[i + l];
            sum += p;
        }
    if (n - i >= 8) {
        for (int l = 0; l < 8; l++) {
            const float p = x[i + l] * y[i + l];
            sum += p;
        }
        i += 8;
    }
    for (; i < n; i++)
        sum = fmaf(x[i], y[i], sum);
    return sum;
}

/*
 * ggml_vec_dot_f32: four sixteen-lane fma accumulators over 64-element
 * steps, folded pairwise and reduced; then the tail above.
 * DeltaNet's state_size 32 is all tail, so the tail's shape is what its
 * state follows.
 */
static inline float ggml_vec_dot_f32_ref(const float *x, const float *y, int64_t n)
{
    const int64_t np = n & ~(int64_t)63;
    float sum        = 0.0f;
    if (np) {
        float acc[4][16] = {{0}};
        for (int64_t i = 0; i < np; i += 64)
            for (int j = 0; j < 4; j++)
                for (int l = 0; l < 16; l++)
                    acc[j][l] = fmaf(x[i + 16 * j + l], y[i + 16 * j + l], acc[j][l]);
        for (int l = 0; l < 16; l++) {
            acc[0][l] += acc[2][l];
            acc[1][l] += acc[3][l];
        }
        for (int l = 0; l < 16; l++)
            acc[0][l] += acc[1][l];
        sum = ggml_reduce16(acc[0]);
    }
    return ggml_vec_dot_f32_tail(x, y, np, n, sum);
}

#endif
