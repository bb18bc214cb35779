/*
 * x86_avx512_common.h: what the AVX-512 and AMX tables share (x86_avx512.c,
 * x86_amx.c): SIMDe's portable AVX-512 for make avx512-test
 * (HEARTH_AVX512_SIMDE) with the conversions Debian 12's SIMDe lacks, and
 * the loads of a pack16 pair's two groups as one vector. Either file
 * includes it under its own flags.
 */
#ifndef HEARTH_X86_AVX512_COMMON_H
#define HEARTH_X86_AVX512_COMMON_H

#if defined(HEARTH_AVX512_SIMDE)
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
#endif

#include <immintrin.h>
#include <stdint.h>

/* The high eight lanes (AVX-512F's form, which SIMDe has) */
static inline __m256 hi256_ps(__m512 x)
{
    return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1));
}

#if defined(HEARTH_AVX512_SIMDE)
/* Debian 12's SIMDe (0.7.4) aliases _mm512_madd_epi16 with the masked form's four arguments */
#undef _mm512_madd_epi16
#define _mm512_madd_epi16(a, b) simde_mm512_madd_epi16(a, b)
/* and lacks these conversions; each is its two 256-bit halves. */
#ifndef _mm512_cvtepi32_ps
static inline __m512 fill_cvtepi32_ps(__m512i a)
{
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_cvtepi32_ps(_mm512_castsi512_si256(a))),
                              _mm256_cvtepi32_ps(_mm512_extracti64x4_epi64(a, 1)), 1);
}
#define _mm512_cvtepi32_ps fill_cvtepi32_ps
#endif
#ifndef _mm512_cvtepi8_epi32
static inline __m512i fill_cvtepi8_epi32(__m128i a)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_cvtepi8_epi32(a)),
                              _mm256_cvtepi8_epi32(_mm_srli_si128(a, 8)), 1);
}
#define _mm512_cvtepi8_epi32 fill_cvtepi8_epi32
#endif
#ifndef _mm512_cvtph_ps
static inline __m512 fill_cvtph_ps(__m256i a)
{
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_cvtph_ps(_mm256_castsi256_si128(a))),
                              _mm256_cvtph_ps(_mm256_extracti128_si256(a, 1)), 1);
}
#define _mm512_cvtph_ps fill_cvtph_ps
#endif
#ifndef _mm512_cvtps_pd
static inline __m512d fill_cvtps_pd(__m256 a)
{
    return _mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_cvtps_pd(_mm256_castps256_ps128(a))),
                              _mm256_cvtps_pd(_mm256_extractf128_ps(a, 1)), 1);
}
#define _mm512_cvtps_pd fill_cvtps_pd
#endif
#ifndef _mm512_cvtpd_ps
static inline __m256 fill_cvtpd_ps(__m512d a)
{
    return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm256_cvtpd_ps(_mm512_castpd512_pd256(a))),
                                _mm256_cvtpd_ps(_mm512_extractf64x4_pd(a, 1)), 1);
}
#define _mm512_cvtpd_ps fill_cvtpd_ps
#endif
#ifndef _mm512_cvtps_ph
static inline __m256i fill_cvtps_ph(__m512 a)
{
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm256_cvtps_ph(
                                       _mm512_castps512_ps256(a), _MM_FROUND_TO_NEAREST_INT)),
                                   _mm256_cvtps_ph(hi256_ps(a), _MM_FROUND_TO_NEAREST_INT), 1);
}
/* round to nearest even, the only mode used here */
#define _mm512_cvtps_ph(a, mode) fill_cvtps_ph(a)
#endif
#endif

/* Two 256-bit vectors as one: a in the low half, b in the high. */
static inline __m512i join256(__m256i a, __m256i b)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
}

/* 32 bytes at p0 in the low half, 32 at p1 in the high half. */
static inline __m512i pair256(const uint8_t *p0, const uint8_t *p1)
{
    return join256(_mm256_loadu_si256((const __m256i *)p0),
                   _mm256_loadu_si256((const __m256i *)p1));
}

/* Eight f16 at p0 and eight at p1 as sixteen floats. */
static inline __m512 pair_ph(const uint8_t *p0, const uint8_t *p1)
{
    return _mm512_cvtph_ps(
        _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)p0)),
                                _mm_loadu_si128((const __m128i *)p1), 1));
}

#endif
