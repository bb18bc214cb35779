/*
 * rng.h: splitmix64, the seed expander hearth uses wherever one 64-bit seed
 * must become several well-mixed ones (xoshiro256** state in the sampler, a
 * seed per choice in a request), so the same seed gives the same streams on
 * every machine.
 */
#ifndef HEARTH_RNG_H
#define HEARTH_RNG_H

#include <stdint.h>

/*
 * Vigna's SplitMix64: advances *state by the golden-ratio increment and
 * returns a mix of it. Every state value (0 included) is fine and the
 * sequence has period 2^64. Not thread-safe on a shared *state.
 */
static inline uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z          = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z          = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

#endif
