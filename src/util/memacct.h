/*
 * memacct.h: the engine's own count of the memory it allocates, by kind.
 * Each owner of long-lived buffers (a model, a context's cache, a
 * backend's stage) allocates through these and keeps a struct mem_acct;
 * hearth_context_memory sums them. The memory law (src/model/memlaw.c)
 * predicts the same figures from a file's header alone, and a test holds
 * the two equal, so an allocation the law does not know shows up there.
 *
 * Buffers a context computes in are touched here, page by page, when they
 * are made: the memory is the process's from the start (its resident set
 * is the figure `hearth fit` predicts), so a configuration that does not
 * fit fails when the server starts, not at the first long prompt.
 */
#ifndef HEARTH_MEMACCT_H
#define HEARTH_MEMACCT_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hearth.h"

/* What a byte is for, as `hearth fit` reports it. */
enum mem_kind {
    MEM_WEIGHTS, /* the weights as loaded: mapped from the file or a backend's copy */
    MEM_KV,      /* per-sequence state: K/V rows, recurrent states, their snapshots */
    MEM_COMPUTE, /* buffers a micro-batch is computed in */
    MEM_OUTPUT,  /* the logits rows */
    MEM_OTHER,   /* tables, indexes and the rest */
    MEM_KINDS
};

struct mem_acct {
    uint64_t b[MEM_KINDS];
};

static inline uint64_t mem_acct_total(const struct mem_acct *a)
{
    uint64_t n = 0;
    for (int k = 0; k < MEM_KINDS; k++)
        n += a->b[k];
    return n;
}

static inline void mem_acct_add(struct mem_acct *dst, const struct mem_acct *src)
{
    for (int k = 0; k < MEM_KINDS; k++)
        dst->b[k] += src->b[k];
}

/* a's figures as the public struct names them. */
static inline void mem_acct_public(const struct mem_acct *a, struct hearth_memory *out)
{
    out->weights = a->b[MEM_WEIGHTS];
    out->kv      = a->b[MEM_KV];
    out->compute = a->b[MEM_COMPUTE];
    out->output  = a->b[MEM_OUTPUT];
    out->other   = a->b[MEM_OTHER];
}

/*
 * Maps the pages of [p, p + n) now, written (p need not be page-aligned),
 * rather than as they are first touched. Best effort: a kernel before 5.14
 * refuses, and the pages fault as before.
 */
static inline void mem_populate(void *p, size_t n)
{
#ifdef MADV_POPULATE_WRITE
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), a = (uintptr_t)p, lo = a & ~(page - 1);
    if (n)
        madvise((void *)lo, n + (a - lo), MADV_POPULATE_WRITE);
#else
    (void)p;
    (void)n;
#endif
}

/* malloc(n), counted under k and its pages touched (zeroed); NULL when refused. */
static inline void *acct_malloc(struct mem_acct *a, enum mem_kind k, size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p) {
        memset(p, 0, n);
        a->b[k] += n;
    }
    return p;
}

/* n elements of size bytes each, as acct_malloc (so zeroed). */
static inline void *acct_calloc(struct mem_acct *a, enum mem_kind k, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size)
        return NULL;
    return acct_malloc(a, k, n * size);
}

#endif
