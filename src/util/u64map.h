/*
 * u64map.h: a fixed-size map from nonzero 64-bit keys (hashes) to int32
 * values, open addressing with linear probing. Sized at init for a most
 * number of entries (the table is at least twice that, so probes stay
 * short and it never fills); removal shifts entries back, so probe chains
 * need no tombstones. The prefix cache's index (kv.c) and its disk tier's
 * (kvdisk.c) use it.
 */
#ifndef HEARTH_U64MAP_H
#define HEARTH_U64MAP_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

struct u64map {
    uint64_t *key; /* [cap], 0 = empty */
    int32_t *val;  /* [cap] */
    uint32_t cap;  /* a power of two */
};

/* The table's entries for at most most keys. */
static inline uint32_t u64map_cap(int64_t most)
{
    uint32_t cap = 16;
    while (cap < 2 * most && cap < (1u << 31))
        cap *= 2;
    return cap;
}

/* Bytes the table of a map for at most most keys holds. */
static inline size_t u64map_bytes(int64_t most)
{
    return (size_t)u64map_cap(most) * (sizeof(uint64_t) + sizeof(int32_t));
}

/* false when out of memory (m is then empty and freeable). */
static inline bool u64map_init(struct u64map *m, int64_t most)
{
    m->cap = u64map_cap(most);
    m->key = calloc(m->cap, sizeof *m->key);
    m->val = malloc(m->cap * sizeof *m->val);
    return m->key && m->val;
}

static inline void u64map_free(struct u64map *m)
{
    free(m->key);
    free(m->val);
    m->key = NULL;
    m->val = NULL;
    m->cap = 0;
}

/* Where key is, or the empty entry where it would go. */
static inline uint32_t u64map_slot(const struct u64map *m, uint64_t key)
{
    uint32_t mask = m->cap - 1, i = (uint32_t)key & mask;
    while (m->key[i] && m->key[i] != key)
        i = (i + 1) & mask;
    return i;
}

/* key's value, or -1. */
static inline int32_t u64map_find(const struct u64map *m, uint64_t key)
{
    uint32_t i = u64map_slot(m, key);
    return m->key[i] ? m->val[i] : -1;
}

/* Sets key (nonzero) to val, adding it when absent. */
static inline void u64map_put(struct u64map *m, uint64_t key, int32_t val)
{
    uint32_t i = u64map_slot(m, key);
    m->key[i]  = key;
    m->val[i]  = val;
}

static inline void u64map_remove(struct u64map *m, uint64_t key)
{
    uint32_t mask = m->cap - 1, i = u64map_slot(m, key);
    if (!m->key[i])
        return;
    for (uint32_t j = (i + 1) & mask; m->key[j]; j = (j + 1) & mask) {
        uint32_t home = (uint32_t)m->key[j] & mask;
        /* j's entry may move into the hole at i if its home is not in (i, j] cyclically */
        if (((j - home) & mask) >= ((j - i) & mask)) {
            m->key[i] = m->key[j];
            m->val[i] = m->val[j];
            i         = j;
        }
    }
    m->key[i] = 0;
}

#endif
