/*
 * vec.h: a growable array over a value type, generated per use as heap.h
 * is. VEC_DEFINE(ivec, int32_t, int32_t) gives struct ivec { v, n, cap }
 * (a zeroed one is empty), ivec_push (false when out of memory, the array
 * unchanged) and ivec_free (which leaves it empty for reuse). N is the
 * count's type: the caller keeps n below N's maximum; capacity doubles
 * from 16.
 */
#ifndef HEARTH_VEC_H
#define HEARTH_VEC_H

#include <stdbool.h>
#include <stdlib.h>

/* clang-format off */
#define VEC_DEFINE(name, T, N)                                                                \
    struct name {                                                                             \
        T *v;                                                                                 \
        N n, cap;                                                                             \
    };                                                                                        \
                                                                                              \
    static inline bool name##_push(struct name *a, T x)                                       \
    {                                                                                         \
        if (a->n == a->cap) {                                                                 \
            N cap = a->cap ? a->cap * 2 : 16;                                                 \
            T *v  = realloc(a->v, (size_t)cap * sizeof *v);                                   \
            if (!v)                                                                           \
                return false;                                                                 \
            a->v   = v;                                                                       \
            a->cap = cap;                                                                     \
        }                                                                                     \
        a->v[a->n++] = x;                                                                     \
        return true;                                                                          \
    }                                                                                         \
                                                                                              \
    static inline void name##_free(struct name *a)                                            \
    {                                                                                         \
        free(a->v);                                                                           \
        a->v   = NULL;                                                                        \
        a->n   = 0;                                                                           \
        a->cap = 0;                                                                           \
    }
/* clang-format on */

#endif
