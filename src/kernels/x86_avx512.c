/*
 * x86_avx512.c: the kernel table for x86-64 with AVX-512 (F, BW, VL, DQ, VNNI,
 * BF16; Sapphire Rapids, Zen 4). Compiled alone with those -m flags; the
 * dispatcher checks the CPU for every one of them before using this table.
 * Not written yet: kernels_avx512() returns NULL and the dispatcher falls back
 * to AVX2. When it is filled, entries it does not vectorize point at ref.h's
 * functions, and tests/unit/test_kernels.c checks it against the reference.
 */
#include "kernels/ref.h"

#include <stddef.h>

#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)

/* The table goes here; until then the dispatcher never picks this ISA. */
const struct kernels *kernels_avx512(void)
{
    return NULL;
}

#else

const struct kernels *kernels_avx512(void)
{
    return NULL;
}

#endif
