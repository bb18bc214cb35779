/*
 * iq_grids.h: internal to src/kernels and src/quant. The codebooks of the
 * IQ1..IQ3 types (iq_grids.c): a block's index selects one entry, whose
 * bytes are the magnitudes of a group of 8 (IQ1, IQ2) or 4 (IQ3) elements,
 * element k in byte k (little-endian). IQ2/IQ3 entries are unsigned
 * magnitudes that a 7-bit sign index turns signed through iq_ksigns; IQ1
 * entries are signed bytes, -1, 0 or 1.
 */
#ifndef HEARTH_KERNELS_IQ_GRIDS_H
#define HEARTH_KERNELS_IQ_GRIDS_H

#include <stdint.h>

/*
 * The sign byte of a group of 8 from its 7-bit index: bit k set = element k
 * negative; bit 7 is the parity of the other seven, so an even number of
 * elements is negated (the format spends 7 bits on 8 signs).
 */
extern const uint8_t iq_ksigns[128];
extern const uint64_t iq2xxs_grid[256]; /* IQ2_XXS: 8 magnitudes of 8, 25 or 43 */
extern const uint64_t iq2xs_grid[512];  /* IQ2_XS: as IQ2_XXS */
extern const uint64_t iq2s_grid[1024];  /* IQ2_S: as IQ2_XXS */
extern const uint32_t iq3xxs_grid[256]; /* IQ3_XXS: 4 magnitudes, 4..62 */
extern const uint32_t iq3s_grid[512];   /* IQ3_S: 4 odd magnitudes, 1..15 */
extern const uint64_t iq1s_grid[2048];  /* IQ1_S and IQ1_M: 8 values of -1, 0, 1 */

/* Byte k of a grid entry. */
static inline uint8_t iq_grid_byte(uint64_t entry, int k)
{
    return (uint8_t)(entry >> (8 * k));
}

#endif
