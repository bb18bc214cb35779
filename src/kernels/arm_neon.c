/*
 * arm_neon.c: the kernel table for AArch64 (NEON is architectural there, so
 * no run-time check is needed beyond being built for aarch64). Not written
 * yet: kernels_neon() returns NULL everywhere and the dispatcher uses the
 * reference. When it is filled, entries it does not vectorize point at ref.h's
 * functions, and tests/unit/test_kernels.c checks it against the reference.
 */
#include "kernels/ref.h"

#include <stddef.h>

#if defined(__aarch64__)

/* The table goes here; until then the dispatcher never picks this ISA. */
const struct kernels *kernels_neon(void)
{
    return NULL;
}

#else

const struct kernels *kernels_neon(void)
{
    return NULL;
}

#endif
