/*
 * dtype.c: the block geometry table (facts of the GGUF format, see
 * ggml-common.h). The quantized types' sizes are their structs' in
 * dtype_blocks.h, so the table and the layouts cannot disagree.
 */
#include "util/dtype.h"

#include "util/dtype_blocks.h"

const int8_t iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                 1,    13,   25,  38,  53,  69,  89,  113};

const int8_t mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* clang-format off */
static const struct dtype_info table[DTYPE_COUNT] = {
    [DTYPE_F32]    = {"f32", 1, 4},
    [DTYPE_F16]    = {"f16", 1, 2},
    [DTYPE_BF16]   = {"bf16", 1, 2},
    [DTYPE_Q4_0]   = {"q4_0", QK4_0, sizeof(struct block_q4_0)},
    [DTYPE_Q4_1]   = {"q4_1", QK4_1, sizeof(struct block_q4_1)},
    [DTYPE_Q5_0]   = {"q5_0", QK5_0, sizeof(struct block_q5_0)},
    [DTYPE_Q5_1]   = {"q5_1", QK5_1, sizeof(struct block_q5_1)},
    [DTYPE_Q8_0]   = {"q8_0", QK8_0, sizeof(struct block_q8_0)},
    [DTYPE_Q8_1]   = {"q8_1", QK8_1, sizeof(struct block_q8_1)},
    [DTYPE_Q2_K]   = {"q2_k", QK_K, sizeof(struct block_q2_K)},
    [DTYPE_Q3_K]   = {"q3_k", QK_K, sizeof(struct block_q3_K)},
    [DTYPE_Q4_K]   = {"q4_k", QK_K, sizeof(struct block_q4_K)},
    [DTYPE_Q5_K]   = {"q5_k", QK_K, sizeof(struct block_q5_K)},
    [DTYPE_Q6_K]   = {"q6_k", QK_K, sizeof(struct block_q6_K)},
    [DTYPE_Q8_K]   = {"q8_k", QK_K, sizeof(struct block_q8_K)},
    [DTYPE_IQ4_NL] = {"iq4_nl", QK4_NL, sizeof(struct block_iq4_nl)},
    [DTYPE_IQ4_XS] = {"iq4_xs", QK_K, sizeof(struct block_iq4_xs)},
    [DTYPE_IQ2_XXS] = {"iq2_xxs", QK_K, sizeof(struct block_iq2_xxs)},
    [DTYPE_IQ2_XS] = {"iq2_xs", QK_K, sizeof(struct block_iq2_xs)},
    [DTYPE_IQ2_S]  = {"iq2_s", QK_K, sizeof(struct block_iq2_s)},
    [DTYPE_IQ3_XXS] = {"iq3_xxs", QK_K, sizeof(struct block_iq3_xxs)},
    [DTYPE_IQ3_S]  = {"iq3_s", QK_K, sizeof(struct block_iq3_s)},
    [DTYPE_IQ1_S]  = {"iq1_s", QK_K, sizeof(struct block_iq1_s)},
    [DTYPE_IQ1_M]  = {"iq1_m", QK_K, sizeof(struct block_iq1_m)},
    [DTYPE_TQ1_0]  = {"tq1_0", QK_K, sizeof(struct block_tq1_0)},
    [DTYPE_TQ2_0]  = {"tq2_0", QK_K, sizeof(struct block_tq2_0)},
    [DTYPE_MXFP4]  = {"mxfp4", QK_MXFP4, sizeof(struct block_mxfp4)},
};
/* clang-format on */

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
