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

static void fill_tokens(int32_t *t, int32_t n, int32_t salt)
{
    for (int32_t i = 0; i < n; i++)
        t[i] = (i * 7 + salt) % 500;
}

static void test_publish_then_reuse_shares_whole_blocks(void **state)
{
    (void)state;
    struct kv_cache kv;
    char err[256];
    int32_t tok[100];
    fill_tokens(tok, 100, 3);
    assert_int_equal(kv_init(&kv, 1, 4, 2, 128, 16, 16, HEARTH_KV_F16, err, sizeof err), HEARTH_OK);
    assert_int_equal(kv_reserve(&kv, 0, 70, err, sizeof err), HEARTH_OK);
    kv.seqs[0].n_tokens = 70;
    kv_publish(&kv, 0, tok, 70); /* 4 full blocks */
    assert_int_equal(kv.seqs[0].n_published, 4);
    /* same first 60 tokens then different: 3 blocks match */
    int32_t other[100];
    memcpy(other, tok, sizeof other);
    other[50] = 499;
    assert_int_equal(kv_reuse_prefix(&kv, 1, other, 90), 48);
    assert_int_equal(kv.seqs[1].blocks[0], kv.seqs[0].blocks[0]);
    assert_int_equal(kv.refcnt[kv.seqs[0].blocks[2]], 2);
    /* at most n - 1 tokens: a prompt of exactly 64 matching tokens reuses 48 */
    kv_truncate(&kv, 1, 0);
    assert_int_equal(kv_reuse_prefix(&kv, 1, tok, 64), 48);
    kv_truncate(&kv, 1, 0);
    assert_int_equal(kv_reuse_prefix(&kv, 1, tok, 65), 64);
    /* a different first token matches nothing */
    kv_truncate(&kv, 1, 0);
    other[0] = 498;
    assert_int_equal(kv_reuse_prefix(&kv, 1, other, 90), 0);
    kv_free(&kv);
}

static void test_released_blocks_stay_cached_until_evicted(void **state)
{
    (void)state;
    struct kv_cache kv;
    char err[256];
    int32_t tok[64];
    fill_tokens(tok, 64, 5);
    assert_int_equal(kv_init(&kv, 1, 4, 2, 64, 16, 4, HEARTH_KV_F16, err, sizeof err), HEARTH_OK);
    assert_int_equal(kv_reserve(&kv, 0, 64, err, sizeof err), HEARTH_OK);
    kv.seqs[0].n_tokens = 64;
    kv_publish(&kv, 0, tok, 64);
    kv_truncate(&kv, 0, 0);
    assert_int_equal(kv.n_cached, 4);
    assert_int_equal(kv.n_free, 0);
    assert_int_equal(kv_used_blocks(&kv), 0);
    assert_int_equal(kv_reuse_prefix(&kv, 1, tok, 64), 48);
    assert_int_equal(kv.n_cached, 1);
    kv_truncate(&kv, 1, 0);
    /* a sequence needing every block evicts the cached ones, oldest first */
    int32_t other[64];
    fill_tokens(other, 64, 9);
    assert_int_equal(kv_reserve(&kv, 0, 64, err, sizeof err), HEARTH_OK);
    assert_int_equal(kv.n_cached, 0);
    kv.seqs[0].n_tokens = 64;
    kv_truncate(&kv, 0, 0);
    assert_int_equal(kv_reuse_prefix(&kv, 1, tok, 64), 0); /* evicted: nothing left to reuse */
    assert_int_equal(kv.n_free, 4);
    kv_free(&kv);
}

static void test_truncate_inside_shared_block_copies_it(void **state)
{
    (void)state;
    struct kv_cache kv;
    char err[256];
    int32_t tok[64];
    fill_tokens(tok, 64, 1);
    assert_int_equal(kv_init(&kv, 2, 4, 2, 64, 16, 8, HEARTH_KV_F32, err, sizeof err), HEARTH_OK);
    assert_int_equal(kv_reserve(&kv, 0, 40, err, sizeof err), HEARTH_OK);
    kv.seqs[0].n_tokens = 40;
    for (int l = 0; l < 2; l++)
        for (int p = 0; p < 40; p++)
            ((float *)kv_row(&kv, l, 1, 0, p))[0] = (float)(l * 100 + p);
    kv_publish(&kv, 0, tok, 40);
    assert_int_equal(kv_reuse_prefix(&kv, 1, tok, 40), 32);
    /* seq 1 rolls back into its second (shared) block: it gets a private copy */
    kv_truncate(&kv, 1, 20);
    assert_int_equal(hearth_status_http(HEARTH_OK), 200);
    assert_int_equal(kv.seqs[1].n_tokens, 20);
    assert_int_not_equal(kv.seqs[1].blocks[1], kv.seqs[0].blocks[1]);
    assert_int_equal(kv.seqs[1].blocks[0], kv.seqs[0].blocks[0]);
    for (int l = 0; l < 2; l++)
        for (int p = 0; p < 20; p++)
            assert_true(((float *)kv_row(&kv, l, 1, 1, p))[0] == (float)(l * 100 + p));
    ((float *)kv_row(&kv, 0, 1, 1, 18))[0] = -1; /* writing the copy leaves seq 0 alone */
    assert_true(((float *)kv_row(&kv, 0, 1, 0, 18))[0] == 18.0f);
    /* rolling back inside an unshared published block unpublishes it */
    kv_truncate(&kv, 1, 0);
    kv_truncate(&kv, 0, 24);
    assert_int_equal(kv.seqs[0].n_published, 1);
    assert_int_equal(kv_reuse_prefix(&kv, 1, tok, 40), 16);
    kv_free(&kv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reserve_allocates_blocks_per_block_tokens),
        cmocka_unit_test(test_rows_of_different_tokens_do_not_overlap),
        cmocka_unit_test(test_full_pool_and_context_limit_are_reported),
        cmocka_unit_test(test_truncate_returns_blocks),
        cmocka_unit_test(test_bad_dimensions_are_refused),
        cmocka_unit_test(test_publish_then_reuse_shares_whole_blocks),
        cmocka_unit_test(test_released_blocks_stay_cached_until_evicted),
        cmocka_unit_test(test_truncate_inside_shared_block_copies_it),
    };
    return cmocka_run_group_tests_name("kv", tests, NULL, NULL);
}
