/*
 * fuzz_kvfile.c: libFuzzer target for the K/V file parser (kvfile_parse),
 * against a fixed context shape: 2 layers of 64 values, a q8_0 K and an f16
 * V, blocks of 32, at most 64 tokens of a 1000-token vocabulary. Each input
 * is parsed as it is and again with its checksum made right, so the checks
 * behind the checksum are reached too; an accepted file's tokens and rows
 * are read to the last byte, so ASan sees any view that escapes the input.
 * Seeds: tests/fuzz/corpus/kvfile (one valid file, as the target's shape
 * reads it).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/kvfile.h"

static volatile uint64_t sink;

static const struct kvfile_shape shape = {.fingerprint  = 0x0123456789abcdefull,
                                          .n_layer      = 2,
                                          .kv_dim       = 64,
                                          .block_tokens = 32,
                                          .type_k       = HEARTH_KV_Q8_0,
                                          .type_v       = HEARTH_KV_F16,
                                          .row_k        = 68,
                                          .row_v        = 128,
                                          .n_vocab      = 1000};

static void parse(const uint8_t *data, size_t size)
{
    struct kvfile_view v;
    char err[HEARTH_ERR_MAX];
    if (kvfile_parse(data, size, &shape, 64, &v, err, sizeof err) != HEARTH_OK)
        return;
    const uint64_t rows = shape.n_layer * v.n_tokens * (shape.row_k + shape.row_v);
    sink += v.tokens[0] + v.tokens[v.n_tokens * 4 - 1] + v.rows[0] + v.rows[rows - 1];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    parse(data, size);
    if (size < 8)
        return 0;
    uint8_t *fixed = malloc(size);
    if (!fixed)
        return 0;
    memcpy(fixed, data, size);
    const uint64_t h = kvfile_checksum(fixed, size - 8);
    for (int i = 0; i < 8; i++)
        fixed[size - 8 + i] = (uint8_t)(h >> (8 * i));
    parse(fixed, size);
    free(fixed);
    return 0;
}
