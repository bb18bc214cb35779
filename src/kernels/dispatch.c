/*
 * dispatch.c: picks the kernel table once per process. An ISA table is
 * handed out only when it is compiled in and the CPU (and OS, for the AVX
 * register state) supports every extension its file was compiled with
 * (Makefile's ISA_* flags). HEARTH_ISA=ref|avx2|avx512|amx|neon overrides the
 * choice; an unknown or unavailable name warns once and uses the best.
 */
#include "kernels/kernels.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Best first. */
static const char *const isa_order[] = {"amx", "avx512", "avx2", "neon", "ref"};

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

/* clang's __builtin_cpu_supports has no "f16c"; ask CPUID leaf 1 (ECX bit 29). */
static int cpu_has_f16c(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}

/* __builtin_cpu_supports reports AVX features only when the OS saves the YMM/ZMM state. */
static int cpu_has_avx2(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
}

static int cpu_has_avx512(void)
{
#if defined(HEARTH_AVX512_SIMDE)
    /* make avx512-test: the table is built on SIMDe's portable AVX-512, which AVX2 runs */
    return cpu_has_avx2();
#else
    return cpu_has_avx2() && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vnni");
#endif
}

/*
 * AMX-TILE and AMX-INT8 (CPUID leaf 7, EDX bits 24 and 25), and the kernel's
 * leave to use the tile data: Linux hands a process the 8 KiB of tile state
 * only once asked (arch_prctl ARCH_REQ_XCOMP_PERM), and a tile instruction
 * before that is SIGILL. Asked once; the leave holds for every thread.
 */
static int amx_granted;
static pthread_once_t amx_once = PTHREAD_ONCE_INIT;

static void amx_ask(void)
{
#if defined(HEARTH_AVX512_SIMDE)
    amx_granted = 1; /* make avx512-test: portable tiles (HEARTH_AMX_EMU) */
#else
    unsigned a, b, c, d;
    enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
    amx_granted = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d & (1u << 24)) && (d & (1u << 25)) &&
                  syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
#endif
}

static int cpu_has_amx(void)
{
    if (!cpu_has_avx512())
        return 0;
    pthread_once(&amx_once, amx_ask);
    return amx_granted;
}
#endif

const struct kernels *kernels_find(const char *isa)
{
    if (!isa)
        return NULL;
    if (strcmp(isa, "ref") == 0)
        return kernels_ref();
#if defined(__x86_64__)
    if (strcmp(isa, "avx2") == 0)
        return cpu_has_avx2() ? kernels_avx2() : NULL;
    if (strcmp(isa, "avx512") == 0)
        return cpu_has_avx512() ? kernels_avx512() : NULL;
    if (strcmp(isa, "amx") == 0)
        return cpu_has_amx() ? kernels_amx() : NULL;
#endif
#if defined(__aarch64__)
    if (strcmp(isa, "neon") == 0)
        return kernels_neon();
#endif
    return NULL;
}

static const struct kernels *chosen;
static pthread_once_t chosen_once = PTHREAD_ONCE_INIT;

static void choose(void)
{
    const struct kernels *best = NULL;
    for (size_t i = 0; !best && i < sizeof(isa_order) / sizeof(isa_order[0]); i++)
        best = kernels_find(isa_order[i]);

    const char *want = getenv("HEARTH_ISA");
    if (want && *want) {
        const struct kernels *k = kernels_find(want);
        if (!k)
            fprintf(stderr, "hearth: HEARTH_ISA=%s is not available on this CPU; using %s\n", want,
                    best->name);
        chosen = k ? k : best;
        return;
    }
    chosen = best;
}

const struct kernels *kernels_get(void)
{
    pthread_once(&chosen_once, choose);
    return chosen;
}

void kernels_pack16(const struct type_kernels *tk, enum dtype type, const void *rows,
                    size_t row_len, int64_t n, void *dst)
{
    /* pack8 of one block's column range gives that block of the group: each group's in turn */
    const struct dtype_info *di = dtype_get(type);
    const size_t gb             = 8 * (size_t)di->block_len;
    const uint8_t *r            = rows;
    uint8_t *d                  = dst;
    for (int64_t b = 0; b < n / di->block; b++)
        for (int g = 0; g < 2; g++)
            tk->pack8(r + (size_t)g * 8 * row_len + (size_t)b * di->block_len, row_len, di->block,
                      d + (size_t)(2 * b + g) * gb);
}
