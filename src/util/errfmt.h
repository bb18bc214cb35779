/*
 * errfmt.h: writing one error sentence into a caller-owned buffer.
 * set_err(err, err_len, fmt, ...) formats into err (if non-NULL) and
 * evaluates to nothing; fail(st, err, err_len, fmt, ...) also returns st
 * from an enum hearth_status function.
 */
#ifndef HEARTH_ERRFMT_H
#define HEARTH_ERRFMT_H

#include <stdarg.h>
#include <stdio.h>

#include "hearth.h"

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static inline void
set_err(char *err, size_t err_len, const char *fmt, ...)
{
    if (!err || !err_len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
}

#define fail(st, err, err_len, ...) (set_err((err), (err_len), __VA_ARGS__), (st))

#endif
