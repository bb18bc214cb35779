/*
 * hash.h: FNV-1a 64 over bytes, continuing from h (FNV1A64_SEED to start):
 * what the tokenizers' and the Jinja engine's tables, the GGUF fingerprint
 * and the K/V file checksum hash with. Streamable: hashing a buffer in
 * pieces gives the value of hashing it whole.
 */
#ifndef HEARTH_UTIL_HASH_H
#define HEARTH_UTIL_HASH_H

#include <stddef.h>
#include <stdint.h>

#define FNV1A64_SEED 0xcbf29ce484222325ull

static inline uint64_t fnv1a64(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

#endif
