/* dtype.c: the block geometry table (facts of the GGUF format, see ggml-common.h). */
#include "util/dtype.h"

static const struct dtype_info table[DTYPE_COUNT] = {
    [DTYPE_F32]    = {"f32", 1, 4},
    [DTYPE_F16]    = {"f16", 1, 2},
    [DTYPE_BF16]   = {"bf16", 1, 2},
    [DTYPE_Q4_0]   = {"q4_0", 32, 18},
    [DTYPE_Q4_1]   = {"q4_1", 32, 20},
    [DTYPE_Q5_0]   = {"q5_0", 32, 22},
    [DTYPE_Q5_1]   = {"q5_1", 32, 24},
    [DTYPE_Q8_0]   = {"q8_0", 32, 34},
    [DTYPE_Q8_1]   = {"q8_1", 32, 36},
    [DTYPE_Q2_K]   = {"q2_k", 256, 84},
    [DTYPE_Q3_K]   = {"q3_k", 256, 110},
    [DTYPE_Q4_K]   = {"q4_k", 256, 144},
    [DTYPE_Q5_K]   = {"q5_k", 256, 176},
    [DTYPE_Q6_K]   = {"q6_k", 256, 210},
    [DTYPE_Q8_K]   = {"q8_k", 256, 292},
    [DTYPE_IQ4_NL] = {"iq4_nl", 32, 18},
    [DTYPE_IQ4_XS] = {"iq4_xs", 256, 136},
};

const struct dtype_info *dtype_get(uint32_t t)
{
    if (t >= DTYPE_COUNT || !table[t].name)
        return NULL;
    return &table[t];
}

const char *dtype_name(uint32_t t)
{
    const struct dtype_info *d = dtype_get(t);
    return d ? d->name : "unknown";
}

size_t dtype_row_len(enum dtype t, int64_t n)
{
    const struct dtype_info *d = dtype_get(t);
    return (size_t)(n / d->block) * d->block_len;
}
