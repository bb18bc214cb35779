/* test_kv.c: the paged KV cache's block accounting (src/model/kv.c). */
#include <string.h>

#include "model/kv.h"
#include "util/testutil.h"

static void test_reserve_allocates_blocks_per_block_tokens(void **state)
{
    (void)state;
    struct kv_cache kv;
    char err[256];
    assert_int_equal(kv_init(&kv, 2, 8, 2, 100, 16, 10, HEARTH_KV_F16, err, sizeof err), HEARTH_OK);
    assert_int_equal(kv.n_free, 10);
    assert_int_equal(kv_reserve(&kv, 0, 17, err, sizeof err), HEARTH_OK);
    assert_int_equal(kv.seqs[0].n_blocks, 2);
    kv.seqs[0].n_tokens = 17;
    assert_int_equal(kv_reserve(&kv, 0, 15, err, sizeof err), HEARTH_OK); /* fills block 2 */
    assert_int_equal(kv.seqs[0].n_blocks, 2);
    kv.seqs[0].n_tokens = 32;
    assert_int_equal(kv_reserve(&kv, 0, 1, err, sizeof err), HEARTH_OK);
    assert_int_equal(kv.seqs[0].n_blocks, 3);
    assert_int_equal(kv_used_blocks(&kv), 3);
    kv_free(&kv);
}

static void test_rows_of_different_tokens_do_not_overlap(void **state)
{
    (void)state;
    struct kv_cache kv;
    char err[256];
    assert_int_equal(kv_init(&kv, 3, 4, 2, 64, 8, 16, HEARTH_KV_F32, err, sizeof err), HEARTH_OK);
    assert_int_equal(kv_reserve(&kv, 0, 20, err, sizeof err), HEARTH_OK);
    assert_int_equal(kv_reserve(&kv, 1, 20, err, sizeof err), HEARTH_OK);
    /* write a distinct value into every row, then read them all back */
    for (int l = 0; l < 3; l++)
        for (int w = 0; w < 2; w++)
            for (int s = 0; s < 2; s++)
                for (int p = 0; p < 20; p++) {
                    float *r = kv_row(&kv, l, w, s, p);
                    for (int i = 0; i < 4; i++)
                        r[i] = (float)(((l * 2 + w) * 2 + s) * 1000 + p * 10 + i);
                }
    for (int l = 0; l < 3; l++)
        for (int w = 0; w < 2; w++)
            for (int s = 0; s < 2; s++)
                for (int p = 0; p < 20; p++) {
                    const float *r = kv_row(&kv, l, w, s, p);
                    for (int i = 0; i < 4; i++)
                        assert_true(r[i] == (float)(((l * 2 + w) * 2 + s) * 1000 + p * 10 + i));
                }
    kv_free(&kv);
}

static void test_full_pool_and_context_limit_are_reported(void **state)
{
    (void)state;
    struct kv_cache kv;
    char err[256];
    assert_int_equal(kv_init(&kv, 1, 4, 2, 40, 16, 4, HEARTH_KV_F16, err, sizeof err), HEARTH_OK);
    assert_int_equal(kv_reserve(&kv, 0, 41, err, sizeof err), HEARTH_EFULL);
    assert_non_null(strstr(err, "context is 40"));
    assert_int_equal(kv_reserve(&kv, 0, 40, err, sizeof err), HEARTH_OK); /* 3 blocks */
    assert_int_equal(kv_reserve(&kv, 1, 17, err, sizeof err), HEARTH_EFULL); /* needs 2, 1 free */
    assert_non_null(strstr(err, "only 1 of 4 are free"));
    assert_int_equal(kv.seqs[1].n_blocks, 0); /* nothing half-allocated */
    assert_int_equal(kv.n_free, 1);
    kv_free(&kv);
}

static void test_truncate_returns_blocks(void **state)
{
    (void)state;
    struct kv_cache kv;
    char err[256];
    assert_int_equal(kv_init(&kv, 1, 4, 1, 64, 16, 4, HEARTH_KV_F16, err, sizeof err), HEARTH_OK);
    assert_int_equal(kv_reserve(&kv, 0, 50, err, sizeof err), HEARTH_OK);
    kv.seqs[0].n_tokens = 50;
    kv_truncate(&kv, 0, 20);
    assert_int_equal(kv.seqs[0].n_tokens, 20);
    assert_int_equal(kv.seqs[0].n_blocks, 2);
    assert_int_equal(kv.n_free, 2);
    kv_truncate(&kv, 0, 0);
    assert_int_equal(kv.n_free, 4);
    /* blocks reserved past n_tokens (a failed batch) are released by a truncate at n_tokens */
    assert_int_equal(kv_reserve(&kv, 0, 33, err, sizeof err), HEARTH_OK);
    kv_truncate(&kv, 0, 0);
    assert_int_equal(kv.n_free, 4);
    kv_free(&kv);
}

static void test_bad_dimensions_are_refused(void **state)
{
    (void)state;
    struct kv_cache kv;
    char err[256];
    assert_int_equal(kv_init(&kv, 0, 4, 1, 64, 16, 4, HEARTH_KV_F16, err, sizeof err), HEARTH_EINVAL);
    assert_int_equal(kv_bytes(22, 256, 256, 32, HEARTH_KV_F16), (size_t)22 * 2 * 256 * 32 * 256 * 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reserve_allocates_blocks_per_block_tokens),
        cmocka_unit_test(test_rows_of_different_tokens_do_not_overlap),
        cmocka_unit_test(test_full_pool_and_context_limit_are_reported),
        cmocka_unit_test(test_truncate_returns_blocks),
        cmocka_unit_test(test_bad_dimensions_are_refused),
    };
    return cmocka_run_group_tests_name("kv", tests, NULL, NULL);
}
