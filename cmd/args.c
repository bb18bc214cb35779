/* args.c: strict option-value parsing shared by the subcommands. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "cmd.h"

bool arg_long(const char *cmd, const char *opt, const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "hearth %s: %s expects an integer in %ld..%ld, got '%s'\n", cmd, opt, lo,
                hi, s);
        return false;
    }
    *out = v;
    return true;
}

bool arg_float(const char *cmd, const char *opt, const char *s, double lo, double hi, float *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi)) {
        fprintf(stderr, "hearth %s: %s expects a number in %g..%g, got '%s'\n", cmd, opt, lo, hi,
                s);
        return false;
    }
    *out = (float)v;
    return true;
}

const char *arg_value(const char *cmd, int argc, char **argv, int *i)
{
    if (*i + 1 >= argc) {
        fprintf(stderr, "hearth %s: %s needs a value\n", cmd, argv[*i]);
        return NULL;
    }
    return argv[++*i];
}

#include <sched.h>

long default_threads(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    return 1;
}
