/*
 * heap.h: a binary min-heap over a value type, generated per use so the
 * comparison inlines. HEAP_DEFINE(heap, struct bigram, before) gives
 * struct heap { v, n, cap }, heap_push (false when out of memory) and
 * heap_pop (the element for which before() holds against all others;
 * the heap must not be empty). The caller frees h->v.
 */
#ifndef HEARTH_HEAP_H
#define HEARTH_HEAP_H

#include <stdbool.h>
#include <stdlib.h>

/* clang-format off */
#define HEAP_DEFINE(name, T, BEFORE)                                                          \
    struct name {                                                                             \
        T *v;                                                                                 \
        size_t n, cap;                                                                        \
    };                                                                                        \
                                                                                              \
    static bool name##_push(struct name *h, T b)                                              \
    {                                                                                         \
        if (h->n == h->cap) {                                                                 \
            size_t cap = h->cap ? h->cap * 2 : 64;                                            \
            T *v       = realloc(h->v, cap * sizeof *v);                                      \
            if (!v)                                                                           \
                return false;                                                                 \
            h->v   = v;                                                                       \
            h->cap = cap;                                                                     \
        }                                                                                     \
        size_t i = h->n++;                                                                    \
        while (i > 0) {                                                                       \
            size_t parent = (i - 1) / 2;                                                      \
            if (!BEFORE(&b, &h->v[parent]))                                                   \
                break;                                                                        \
            h->v[i] = h->v[parent];                                                           \
            i       = parent;                                                                 \
        }                                                                                     \
        h->v[i] = b;                                                                          \
        return true;                                                                          \
    }                                                                                         \
                                                                                              \
    static T name##_pop(struct name *h)                                                       \
    {                                                                                         \
        T top    = h->v[0];                                                                   \
        T last   = h->v[--h->n];                                                              \
        size_t i = 0;                                                                         \
        for (;;) {                                                                            \
            size_t c = 2 * i + 1;                                                             \
            if (c >= h->n)                                                                    \
                break;                                                                        \
            if (c + 1 < h->n && BEFORE(&h->v[c + 1], &h->v[c]))                               \
                c++;                                                                          \
            if (!BEFORE(&h->v[c], &last))                                                     \
                break;                                                                        \
            h->v[i] = h->v[c];                                                                \
            i       = c;                                                                      \
        }                                                                                     \
        if (h->n > 0)                                                                         \
            h->v[i] = last;                                                                   \
        return top;                                                                           \
    }
/* clang-format on */

#endif
