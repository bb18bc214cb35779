/* args.c: strict option-value parsing shared by the subcommands. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "hearth.h"
#include "opts.h"

bool arg_long(const char *cmd, const char *opt, const char *s, long lo, long hi, long *out)
{
    char *end;
    errno  = 0;
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
    errno    = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi)) {
        fprintf(stderr, "hearth %s: %s expects a number in %g..%g, got '%s'\n", cmd, opt, lo, hi,
                s);
        return false;
    }
    *out = (float)v;
    return true;
}

bool arg_bytes(const char *cmd, const char *opt, const char *s, int64_t *out)
{
    char *end;
    errno       = 0;
    double v    = s[0] >= '0' && s[0] <= '9' ? strtod(s, &end) : -1;
    double unit = 1;
    if (v >= 0 && !errno && end != s) {
        switch (*end) {
        case 'K':
        case 'k':
            unit = 1024.0;
            end++;
            break;
        case 'M':
        case 'm':
            unit = 1024.0 * 1024;
            end++;
            break;
        case 'G':
        case 'g':
            unit = 1024.0 * 1024 * 1024;
            end++;
            break;
        case 'T':
        case 't':
            unit = 1024.0 * 1024 * 1024 * 1024;
            end++;
            break;
        default:
            break;
        }
        if (unit > 1 && (!strcmp(end, "iB") || !strcmp(end, "B")))
            end += strlen(end);
    }
    if (v < 0 || errno || end == s || *end || v * unit > 9.0e18) {
        fprintf(stderr,
                "hearth %s: %s expects a size such as 8G, 512M, 64MiB or a count of bytes, got "
                "'%s'\n",
                cmd, opt, s);
        return false;
    }
    *out = (int64_t)(v * unit);
    return true;
}

#include <sched.h>

long default_threads(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    return 1;
}

uint64_t host_mem_available(void)
{
    /* test knob, as HEARTH_VK_MEMORY_MIB: a machine of this much free memory (8G, 512M) */
    const char *knob = getenv("HEARTH_HOST_MEMORY");
    int64_t b;
    if (knob && *knob && arg_bytes("serve", "HEARTH_HOST_MEMORY", knob, &b) && b > 0)
        return (uint64_t)b;
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return 0;
    char line[256];
    unsigned long long kib = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1)
            break;
    fclose(f);
    return (uint64_t)kib * 1024;
}

/* OPT_CHOICE stores the index among the choices: they are listed in hearth_kv_type's order */
_Static_assert(HEARTH_KV_F16 == 0 && HEARTH_KV_F32 == 1 && HEARTH_KV_Q8_0 == 2 &&
                   HEARTH_KV_Q4_0 == 3,
               "the -ctk and -ctv choices follow enum hearth_kv_type");

/* clang-format off */
static const struct opt cache_types_list[] = {
    {.names = "-ctk --cache-type-k", .value = "f16|f32|q8_0|q4_0", .kind = OPT_CHOICE,
     .off = offsetof(struct cache_types, k), .choices = "f16|f32|q8_0|q4_0", .def = "f16",
     .help = "the K cache's type; q8_0 is about half the bytes of f16. The quantized types need "
             "heads of a multiple of 32 values, on the CPU"},
    {.names = "-ctv --cache-type-v", .value = "f16|f32|q8_0", .kind = OPT_CHOICE,
     .off = offsetof(struct cache_types, v), .choices = "f16|f32|q8_0", .def = "f16",
     .help = "the V cache's type, as -ctk's"},
};
/* clang-format on */
const struct opt_group opts_cache_types = OPT_GROUP("K/V cache", cache_types_list);

/* clang-format off */
static const struct opt threads_list[] = {
    {.names = "-t --threads", .value = "N", .kind = OPT_LONG, .off = offsetof(struct thread_args, n),
     .lo = 1, .hi = 1024, .def = "the CPUs this process may run on",
     .help = "threads for the forward pass"},
};
/* clang-format on */
const struct opt_group opts_threads = OPT_GROUP("Threads", threads_list);

long threads_or_default(const struct thread_args *t)
{
    return t->n > 0 ? t->n : default_threads();
}
