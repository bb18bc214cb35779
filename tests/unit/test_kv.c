/* test_kv.c: the paged KV cache's block accounting (src/model/kv.c). */
#include <string.h>

#include "model/kv.h"
#include "util/testutil.h"

/* A cache of one pool (no window layers), as every model without sliding windows has. */
static enum hearth_status init(struct kv_cache *kv, int32_t n_layer, int32_t kv_dim, int32_t n_seq,
                               int32_t n_ctx, int32_t block_tokens, int32_t n_blocks,
                               enum hearth_kv_type type)
{
    char err[256];
    const struct kv_params p = {.n_layer      = n_layer,
                                .kv_dim       = kv_dim,
                                .n_seq        = n_seq,
                                .n_ctx        = n_ctx,
                                .block_tokens = block_tokens,
                                .n_blocks     = n_blocks,
                                .type         = type,
                                .type_v       = type};
    return kv_init(kv, &p, err, sizeof err);
}

static void test_reserve_allocates_blocks_per_block_tokens(void **state)
{
    (void)state;
    struct kv_cache kv;
    char err[256];
    assert_int_equal(init(&kv, 2, 8, 2, 100, 16, 10, HEARTH_KV_F16), HEARTH_OK);
    assert_int_equal(kv.pool[0].n_free, 10);
    assert_int_equal(kv_reserve(&kv, 0, 17, err, sizeof err), HEARTH_OK);
    assert_int_equal(kv.seqs[0].t[0].n_blocks, 2);
    kv.seqs[0].n_tokens = 17;
    assert_int_equal(kv_reserve(&kv, 0, 15, err, sizeof err), HEARTH_OK); /* fills block 2 */
    assert_int_equal(kv.seqs[0].t[0].n_blocks, 2);
    kv.seqs[0].n_tokens = 32;
    assert_int_equal(kv_reserve(&kv, 0, 1, err, sizeof err), HEARTH_OK);
    assert_int_equal(kv.seqs[0].t[0].n_blocks, 3);
    assert_int_equal(kv_used_blocks(&kv), 3);
    kv_free(&kv);
}

static void test_rows_of_different_tokens_do_not_overlap(void **state)
{
    (void)state;
    struct kv_cache kv;
    char err[256];
    assert_int_equal(init(&kv, 3, 4, 2, 64, 8, 16, HEARTH_KV_F32), HEARTH_OK);
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
    assert_int_equal(init(&kv, 1, 4, 2, 40, 16, 4, HEARTH_KV_F16), HEARTH_OK);
    assert_int_equal(kv_reserve(&kv, 0, 41, err, sizeof err), HEARTH_EFULL);
    assert_non_null(strstr(err, "context is 40"));
    assert_int_equal(kv_reserve(&kv, 0, 40, err, sizeof err), HEARTH_OK);    /* 3 blocks */
    assert_int_equal(kv_reserve(&kv, 1, 17, err, sizeof err), HEARTH_EFULL); /* needs 2, 1 free */
    assert_non_null(strstr(err, "only 1 of 4 are free"));
    assert_int_equal(kv.seqs[1].t[0].n_blocks, 0); /* nothing half-allocated */
    assert_int_equal(kv.pool[0].n_free, 1);
    kv_free(&kv);
}

static void test_truncate_returns_blocks(void **state)
{
    (void)state;
    struct kv_cache kv;
    char err[256];
    assert_int_equal(init(&kv, 1, 4, 1, 64, 16, 4, HEARTH_KV_F16), HEARTH_OK);
    assert_int_equal(kv_reserve(&kv, 0, 50, err, sizeof err), HEARTH_OK);
    kv.seqs[0].n_tokens = 50;
    kv_truncate(&kv, 0, 20);
    assert_int_equal(kv.seqs[0].n_tokens, 20);
    assert_int_equal(kv.seqs[0].t[0].n_blocks, 2);
    assert_int_equal(kv.pool[0].n_free, 2);
    kv_truncate(&kv, 0, 0);
    assert_int_equal(kv.pool[0].n_free, 4);
    /* blocks reserved past n_tokens (a failed batch) are released by a truncate at n_tokens */
    assert_int_equal(kv_reserve(&kv, 0, 33, err, sizeof err), HEARTH_OK);
    kv_truncate(&kv, 0, 0);
    assert_int_equal(kv.pool[0].n_free, 4);
    kv_free(&kv);
}

static void test_bad_dimensions_are_refused(void **state)
{
    (void)state;
    struct kv_cache kv;
    assert_int_equal(init(&kv, 0, 4, 1, 64, 16, 4, HEARTH_KV_F16), HEARTH_EINVAL);
    struct kv_params p = {.n_layer      = 22,
                          .kv_dim       = 256,
                          .n_seq        = 1,
                          .n_ctx        = 8192,
                          .block_tokens = 32,
                          .n_blocks     = 256,
                          .type         = HEARTH_KV_F16,
                          .type_v       = HEARTH_KV_F16};
    assert_int_equal(kv_bytes(&p), (size_t)22 * 2 * 256 * 32 * 256 * 2);
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
    assert_int_equal(init(&kv, 1, 4, 2, 128, 16, 16, HEARTH_KV_F16), HEARTH_OK);
    assert_int_equal(kv_reserve(&kv, 0, 70, err, sizeof err), HEARTH_OK);
    kv.seqs[0].n_tokens = 70;
    kv_publish(&kv, 0, tok, 70); /* 4 full blocks */
    assert_int_equal(kv.seqs[0].t[0].n_published, 4);
    /* same first 60 tokens then different: 3 blocks match */
    int32_t other[100];
    memcpy(other, tok, sizeof other);
    other[50] = 499;
    assert_int_equal(kv_reuse_prefix(&kv, 1, other, 90, false), 48);
    assert_int_equal(kv.seqs[1].t[0].blocks[0], kv.seqs[0].t[0].blocks[0]);
    assert_int_equal(kv.pool[0].refcnt[kv.seqs[0].t[0].blocks[2]], 2);
    /* at most n - 1 tokens: a prompt of exactly 64 matching tokens reuses 48 */
    kv_truncate(&kv, 1, 0);
    assert_int_equal(kv_reuse_prefix(&kv, 1, tok, 64, false), 48);
    kv_truncate(&kv, 1, 0);
    assert_int_equal(kv_reuse_prefix(&kv, 1, tok, 65, false), 64);
    /* a different first token matches nothing */
    kv_truncate(&kv, 1, 0);
    other[0] = 498;
    assert_int_equal(kv_reuse_prefix(&kv, 1, other, 90, false), 0);
    kv_free(&kv);
}

static void test_released_blocks_stay_cached_until_evicted(void **state)
{
    (void)state;
    struct kv_cache kv;
    char err[256];
    int32_t tok[64];
    fill_tokens(tok, 64, 5);
    assert_int_equal(init(&kv, 1, 4, 2, 64, 16, 4, HEARTH_KV_F16), HEARTH_OK);
    assert_int_equal(kv_reserve(&kv, 0, 64, err, sizeof err), HEARTH_OK);
    kv.seqs[0].n_tokens = 64;
    kv_publish(&kv, 0, tok, 64);
    kv_truncate(&kv, 0, 0);
    assert_int_equal(kv.pool[0].n_cached, 4);
    assert_int_equal(kv.pool[0].n_free, 0);
    assert_int_equal(kv_used_blocks(&kv), 0);
    assert_int_equal(kv_reuse_prefix(&kv, 1, tok, 64, false), 48);
    assert_int_equal(kv.pool[0].n_cached, 1);
    kv_truncate(&kv, 1, 0);
    /* a sequence needing every block evicts the cached ones, oldest first */
    int32_t other[64];
    fill_tokens(other, 64, 9);
    assert_int_equal(kv_reserve(&kv, 0, 64, err, sizeof err), HEARTH_OK);
    assert_int_equal(kv.pool[0].n_cached, 0);
    kv.seqs[0].n_tokens = 64;
    kv_truncate(&kv, 0, 0);
    assert_int_equal(kv_reuse_prefix(&kv, 1, tok, 64, false),
                     0); /* evicted: nothing left to reuse */
    assert_int_equal(kv.pool[0].n_free, 4);
    kv_free(&kv);
}

static void test_truncate_inside_shared_block_copies_it(void **state)
{
    (void)state;
    struct kv_cache kv;
    char err[256];
    int32_t tok[64];
    fill_tokens(tok, 64, 1);
    assert_int_equal(init(&kv, 2, 4, 2, 64, 16, 8, HEARTH_KV_F32), HEARTH_OK);
    assert_int_equal(kv_reserve(&kv, 0, 40, err, sizeof err), HEARTH_OK);
    kv.seqs[0].n_tokens = 40;
    for (int l = 0; l < 2; l++)
        for (int p = 0; p < 40; p++)
            ((float *)kv_row(&kv, l, 1, 0, p))[0] = (float)(l * 100 + p);
    kv_publish(&kv, 0, tok, 40);
    assert_int_equal(kv_reuse_prefix(&kv, 1, tok, 40, false), 32);
    /* seq 1 rolls back into its second (shared) block: it gets a private copy */
    kv_truncate(&kv, 1, 20);
    assert_int_equal(hearth_status_http(HEARTH_OK), 200);
    assert_int_equal(kv.seqs[1].n_tokens, 20);
    assert_int_not_equal(kv.seqs[1].t[0].blocks[1], kv.seqs[0].t[0].blocks[1]);
    assert_int_equal(kv.seqs[1].t[0].blocks[0], kv.seqs[0].t[0].blocks[0]);
    for (int l = 0; l < 2; l++)
        for (int p = 0; p < 20; p++)
            assert_true(((float *)kv_row(&kv, l, 1, 1, p))[0] == (float)(l * 100 + p));
    ((float *)kv_row(&kv, 0, 1, 1, 18))[0] = -1; /* writing the copy leaves seq 0 alone */
    assert_true(((float *)kv_row(&kv, 0, 1, 0, 18))[0] == 18.0f);
    /* rolling back inside an unshared published block unpublishes it */
    kv_truncate(&kv, 1, 0);
    kv_truncate(&kv, 0, 24);
    assert_int_equal(kv.seqs[0].t[0].n_published, 1);
    assert_int_equal(kv_reuse_prefix(&kv, 1, tok, 40, false), 16);
    kv_free(&kv);
}

/* ------------------------------------------------------- sliding windows --- */

/*
 * Layers 0 and 2 of 3 see the last 20 positions; blocks of 8 tokens. The
 * window pool is n_blocks_swa blocks, the full pool what n_seq whole
 * contexts take.
 */
static const bool swa3[3] = {true, false, true};

static void init_window(struct kv_cache *kv, int32_t n_seq, int32_t n_ctx, int32_t n_blocks_swa)
{
    char err[256];
    const struct kv_params p = {.n_layer      = 3,
                                .kv_dim       = 4,
                                .n_seq        = n_seq,
                                .n_ctx        = n_ctx,
                                .block_tokens = 8,
                                .n_blocks     = n_seq * ((n_ctx + 7) / 8),
                                .type         = HEARTH_KV_F32,
                                .type_v       = HEARTH_KV_F32,
                                .swa          = swa3,
                                .n_swa        = 20,
                                .n_blocks_swa = n_blocks_swa};
    assert_int_equal(kv_init(kv, &p, err, sizeof err), HEARTH_OK);
}

/* Reserves and commits n more tokens of seq, as a decoded batch does. */
static void advance(struct kv_cache *kv, int32_t seq, int32_t n)
{
    char err[256];
    assert_int_equal(kv_reserve(kv, seq, n, err, sizeof err), HEARTH_OK);
    kv->seqs[seq].n_tokens += n;
}

static int32_t pool_used(const struct kv_cache *kv, int g)
{
    return kv->pool[g].n_blocks - kv->pool[g].n_free - kv->pool[g].n_cached;
}

static void test_window_layers_get_their_own_pool(void **state)
{
    (void)state;
    struct kv_cache kv;
    init_window(&kv, 1, 200, 12);
    assert_int_equal(kv.pool[0].n_layer, 1);
    assert_int_equal(kv.pool[1].n_layer, 2);
    assert_int_equal(kv.group[0], 1);
    assert_int_equal(kv.group[1], 0);
    assert_int_equal(kv.slot[2], 1);
    assert_int_equal(kv.window[0], 20);
    assert_int_equal(kv.window[1], 0);
    kv_free(&kv);
    /* no window pool: the window layers mask the full pool, which holds every layer */
    init_window(&kv, 1, 200, 0);
    assert_int_equal(kv.pool[0].n_layer, 3);
    assert_int_equal(kv.pool[1].n_layer, 0);
    assert_int_equal(kv.window[2], 20);
    advance(&kv, 0, 100);
    assert_int_equal(kv.seqs[0].t[0].n_blocks, 13);
    assert_int_equal(kv.seqs[0].t[0].n_released, 0);
    kv_free(&kv);
}

static void test_window_blocks_are_released_as_the_window_passes(void **state)
{
    (void)state;
    struct kv_cache kv;
    init_window(&kv, 1, 200, 12);
    advance(&kv, 0, 10);
    advance(&kv, 0, 30); /* the query at 10 sees from 0: nothing to give back yet */
    assert_int_equal(kv.seqs[0].t[1].n_blocks, 5);
    assert_int_equal(kv.seqs[0].t[1].n_released, 0);
    /* the query at 40 sees from 21, in block 2: blocks 0 and 1 go back */
    advance(&kv, 0, 1);
    assert_int_equal(kv.seqs[0].t[1].n_released, 2);
    assert_int_equal(kv.seqs[0].t[1].blocks[0], -1);
    assert_int_equal(kv.seqs[0].t[1].blocks[1], -1);
    assert_int_equal(pool_used(&kv, 1), 4);
    assert_int_equal(kv.pool[1].n_free, 8);
    assert_int_equal(pool_used(&kv, 0), 6); /* the full layer keeps everything */
    assert_true(kv_layer_blocks(&kv, 1, 0)[0] >= 0);
    assert_int_equal(kv_layer_blocks(&kv, 0, 0)[1], -1);
    kv_free(&kv);
}

/*
 * Over 1000 tokens in batches of up to 13, a window pool of exactly
 * ceil((20 - 1 + 13) / 8) + 1 = 5 blocks suffices, and every row a query
 * can still see keeps what was written there; one block less runs out.
 */
static void test_window_pool_stays_bounded_over_a_long_sequence(void **state)
{
    (void)state;
    struct kv_cache kv;
    char err[256];
    assert_int_equal(kv_window_blocks(1, 1000, 20, 13, 8), 10); /* twice that: room to cache */
    init_window(&kv, 1, 1000, 5);
    int32_t step = 0;
    while (kv.seqs[0].n_tokens < 1000) {
        const int32_t t0 = kv.seqs[0].n_tokens;
        int32_t n        = 1 + (step++ * 7) % 13;
        if (n > 1000 - t0)
            n = 1000 - t0;
        assert_int_equal(kv_reserve(&kv, 0, n, err, sizeof err), HEARTH_OK);
        assert_true(pool_used(&kv, 1) <= 5);
        for (int32_t p = t0; p < t0 + n; p++)
            for (int l = 0; l < 3; l += 2)
                ((float *)kv_row(&kv, l, 1, 0, p))[3] = (float)(p * 10 + l);
        kv.seqs[0].n_tokens = t0 + n;
        const int32_t first = t0 + n - 20 > 0 ? t0 + n - 20 : 0; /* the last query's window */
        for (int32_t p = first; p < t0 + n; p++)
            for (int l = 0; l < 3; l += 2)
                assert_true(((float *)kv_row(&kv, l, 1, 0, p))[3] == (float)(p * 10 + l));
    }
    assert_int_equal(kv.seqs[0].t[0].n_blocks, 125);
    kv_free(&kv);

    init_window(&kv, 1, 1000, 4);
    enum hearth_status st = HEARTH_OK;
    while (st == HEARTH_OK && kv.seqs[0].n_tokens < 1000) {
        st = kv_reserve(&kv, 0, 13, err, sizeof err);
        if (st == HEARTH_OK)
            kv.seqs[0].n_tokens += 13;
    }
    assert_int_equal(st, HEARTH_EFULL);
    assert_non_null(strstr(err, "sliding-window blocks"));
    kv_free(&kv);
}

/* Runs tok[0..100) through seq in batches of 10, publishing after each when asked. */
static void run_100(struct kv_cache *kv, int32_t seq, const int32_t *tok, bool publish_each)
{
    for (int32_t i = 0; i < 100; i += 10) {
        advance(kv, seq, 10);
        if (publish_each)
            kv_publish(kv, seq, tok, kv->seqs[seq].n_tokens);
    }
    kv_publish(kv, seq, tok, 100);
}

static void test_reuse_needs_the_window_blocks_cached(void **state)
{
    (void)state;
    struct kv_cache kv;
    int32_t tok[100], other[100];
    fill_tokens(tok, 100, 2);
    init_window(&kv, 2, 200, 20);
    /* published after every batch (as the server does): every full block stays cached */
    run_100(&kv, 0, tok, true);
    kv_truncate(&kv, 0, 0);
    assert_int_equal(kv_reuse_prefix(&kv, 1, tok, 100, false), 96);
    /* a resume at 96 sees from 77, in block 9: the window table holds blocks 9..11 */
    assert_int_equal(kv.seqs[1].t[1].n_released, 9);
    assert_int_equal(kv.seqs[1].t[1].blocks[8], -1);
    assert_true(kv.seqs[1].t[1].blocks[9] >= 0);
    assert_int_equal(pool_used(&kv, 1), 3);
    assert_int_equal(pool_used(&kv, 0), 12);
    kv_truncate(&kv, 1, 0);
    memcpy(other, tok, sizeof other);
    other[50] = 499;
    assert_int_equal(kv_reuse_prefix(&kv, 1, other, 100, false), 48);
    kv_truncate(&kv, 1, 0);
    kv_free(&kv);

    /* published only at the end: the window blocks the window had passed went back unpublished */
    init_window(&kv, 2, 200, 20);
    run_100(&kv, 0, tok, false);
    kv_truncate(&kv, 0, 0);
    assert_int_equal(kv.pool[0].n_cached, 12);
    assert_int_equal(kv.pool[1].n_cached, 4); /* blocks 8..11 */
    assert_int_equal(kv_reuse_prefix(&kv, 1, tok, 100, false), 96);
    kv_truncate(&kv, 1, 0);
    assert_int_equal(kv_reuse_prefix(&kv, 1, tok, 90, false), 88); /* sees from 69: blocks 8..10 */
    kv_truncate(&kv, 1, 0);
    /* the full pool matches 48 tokens, but a resume at 48 needs window blocks 3..5 */
    assert_int_equal(kv_reuse_prefix(&kv, 1, other, 100, false), 0);
    assert_int_equal(kv.seqs[1].t[0].n_blocks, 0);
    assert_int_equal(kv_used_blocks(&kv), 0);
    kv_free(&kv);
}

static void test_truncate_behind_the_window_empties_the_sequence(void **state)
{
    (void)state;
    struct kv_cache kv;
    init_window(&kv, 1, 200, 20);
    for (int i = 0; i < 10; i++)
        advance(&kv, 0, 10);
    /* the last batch began at 90, whose window starts at 71: blocks 0..7 are gone */
    assert_int_equal(kv.seqs[0].t[1].n_released, 8);
    kv_truncate(&kv, 0, 95);
    assert_int_equal(kv.seqs[0].n_tokens, 95);
    kv_truncate(&kv, 0, 83); /* sees from 64, block 8 */
    assert_int_equal(kv.seqs[0].n_tokens, 83);
    assert_int_equal(kv.seqs[0].t[1].n_blocks, 11);
    kv_truncate(&kv, 0, 82); /* would see from 63, in released block 7 */
    assert_int_equal(kv.seqs[0].n_tokens, 0);
    assert_int_equal(kv.seqs[0].t[1].n_released, 0);
    assert_int_equal(kv.pool[0].n_free, 25);
    assert_int_equal(kv.pool[1].n_free, 20);
    /* from empty it runs again as new */
    advance(&kv, 0, 30);
    assert_int_equal(kv.seqs[0].t[1].n_blocks, 4);
    kv_free(&kv);
}

/*
 * A cut inside a block shared in both pools copies it in each; when the
 * window pool has no block for its copy, the cut moves down to the block
 * boundary in every pool, and the full pool's copy goes back.
 */
static void test_truncate_falls_back_to_the_boundary_in_every_pool(void **state)
{
    (void)state;
    struct kv_cache kv;
    int32_t tok[24];
    fill_tokens(tok, 24, 4);
    init_window(&kv, 2, 200, 3);
    advance(&kv, 0, 16);
    kv_publish(&kv, 0, tok, 16);
    assert_int_equal(kv_reuse_prefix(&kv, 1, tok, 17, false), 16);
    advance(&kv, 0, 8); /* the window pool's third and last block */
    assert_int_equal(kv.pool[1].n_free + kv.pool[1].n_cached, 0);
    kv_truncate(&kv, 1, 12);
    assert_int_equal(kv.seqs[1].n_tokens, 8);
    assert_int_equal(kv.seqs[1].t[0].n_blocks, 1);
    assert_int_equal(kv.seqs[1].t[1].n_blocks, 1);
    assert_int_equal(kv.seqs[1].t[0].blocks[0], kv.seqs[0].t[0].blocks[0]);
    assert_int_equal(pool_used(&kv, 0), 3);
    assert_int_equal(kv.pool[0].n_free, kv.pool[0].n_blocks - 3);
    kv_free(&kv);
}

/* Every layer windowed: no full pool at all, and reuse goes by the window pool alone. */
static void test_all_window_layers_need_no_full_pool(void **state)
{
    (void)state;
    struct kv_cache kv;
    char err[256];
    const bool swa[2]        = {true, true};
    const struct kv_params p = {.n_layer      = 2,
                                .kv_dim       = 4,
                                .n_seq        = 2,
                                .n_ctx        = 200,
                                .block_tokens = 8,
                                .n_blocks     = 50,
                                .type         = HEARTH_KV_F16,
                                .type_v       = HEARTH_KV_F16,
                                .swa          = swa,
                                .n_swa        = 20,
                                .n_blocks_swa = 20};
    assert_int_equal(kv_init(&kv, &p, err, sizeof err), HEARTH_OK);
    assert_int_equal(kv.pool[0].n_layer, 0);
    assert_null(kv.pool[0].mem);
    assert_int_equal(kv_bytes(&p), (size_t)2 * 2 * 20 * 8 * 4 * 2);
    int32_t tok[100];
    fill_tokens(tok, 100, 6);
    run_100(&kv, 0, tok, true);
    assert_int_equal(kv.seqs[0].t[0].n_blocks, 0);
    kv_truncate(&kv, 0, 0);
    assert_int_equal(kv_reuse_prefix(&kv, 1, tok, 100, false), 96);
    assert_int_equal(kv.seqs[1].t[1].n_released, 9);
    assert_int_equal(kv_used_blocks(&kv), 3);
    kv_free(&kv);
}

static void test_kv_bytes_counts_the_window_pool(void **state)
{
    (void)state;
    /* gemma3 27B's shape: 62 layers, 52 of them local with a window of 1024, kv_dim 16 * 128 */
    bool swa[62];
    for (int i = 0; i < 62; i++)
        swa[i] = i % 6 < 5;
    struct kv_params p = {.n_layer      = 62,
                          .kv_dim       = 2048,
                          .n_seq        = 1,
                          .n_ctx        = 32768,
                          .block_tokens = 32,
                          .n_blocks     = 1024,
                          .type         = HEARTH_KV_F16,
                          .type_v       = HEARTH_KV_F16,
                          .swa          = swa,
                          .n_swa        = 1024};
    const size_t block = (size_t)2 * 32 * 2048 * 2; /* K and V of one layer's block */
    assert_int_equal(kv_bytes(&p), 62 * 1024 * block);
    p.n_blocks_swa = kv_window_blocks(1, 32768, 1024, 512, 32);
    assert_int_equal(p.n_blocks_swa, 2 * (48 + 1)); /* ceil((1023 + 512) / 32) + 1, twice */
    assert_int_equal(kv_bytes(&p), 10 * 1024 * block + 52 * 98 * block);
    print_message("27B at 32768: %zu MiB with window rings, %zu MiB without\n", kv_bytes(&p) >> 20,
                  (size_t)62 * 1024 * block >> 20);
    /* no saving when the context is within reach of the window */
    assert_int_equal(kv_window_blocks(1, 160, 32, 512, 16), 0);
    assert_int_equal(kv_window_blocks(1, 4096, 0, 512, 16), 0);
}

/*
 * Recurrent layers (qwen35moe's DeltaNet, three of every four) keep no K/V:
 * the pool holds the attention layers only, and those keep their slots.
 */
static void test_layers_without_kv_take_no_pool_space(void **state)
{
    (void)state;
    bool no_kv[8];
    for (int i = 0; i < 8; i++)
        no_kv[i] = i % 4 != 3;
    struct kv_params p = {.n_layer      = 8,
                          .kv_dim       = 64,
                          .n_seq        = 2,
                          .n_ctx        = 256,
                          .block_tokens = 16,
                          .n_blocks     = 32,
                          .type         = HEARTH_KV_F16,
                          .type_v       = HEARTH_KV_F16,
                          .no_kv        = no_kv};
    const size_t block = (size_t)2 * 16 * 64 * 2;
    assert_int_equal(kv_bytes(&p), 2 * 32 * block);
    struct kv_cache kv;
    char err[256];
    assert_int_equal(kv_init(&kv, &p, err, sizeof err), HEARTH_OK);
    assert_int_equal(kv.pool[0].n_layer, 2);
    assert_int_equal(kv.pool[0].mem_len, 2 * 32 * block);
    assert_int_equal(kv.group[0], KV_NONE);
    assert_int_equal(kv.group[3], 0);
    assert_int_equal(kv.slot[3], 0);
    assert_int_equal(kv.slot[7], 1);
    /* the two attention layers' rows of one token are apart */
    assert_int_equal(kv_reserve(&kv, 0, 1, err, sizeof err), HEARTH_OK);
    assert_ptr_not_equal(kv_row(&kv, 3, 0, 0, 0), kv_row(&kv, 7, 0, 0, 0));
    kv_free(&kv);
}

/* What the copy hook was told, for the layers whose memory a device backend owns. */
struct copies {
    int n, group;
    int32_t dst, src, n_rows;
};

static void on_copy(void *arg, int group, int32_t dst, int32_t src, int32_t n_rows)
{
    struct copies *c = arg;
    *c               = (struct copies){c->n + 1, group, dst, src, n_rows};
}

/*
 * Layers 1 and 2 of 4 on a device: kv.c maps memory for layers 0 and 3
 * only, addresses them as before, and copies a shared block's host rows
 * itself and tells the hook of the others'; the tables are the same.
 */
static void test_device_layers_own_their_memory(void **state)
{
    (void)state;
    const bool host[4] = {true, false, false, true};
    struct kv_params p = {.n_layer      = 4,
                          .kv_dim       = 4,
                          .n_seq        = 2,
                          .n_ctx        = 64,
                          .block_tokens = 16,
                          .n_blocks     = 8,
                          .type         = HEARTH_KV_F32,
                          .type_v       = HEARTH_KV_F32,
                          .host         = host};
    struct kv_cache kv;
    char err[256];
    int32_t tok[64];
    fill_tokens(tok, 64, 5);
    assert_int_equal(kv_init(&kv, &p, err, sizeof err), HEARTH_OK);
    assert_int_equal(kv.pool[0].n_layer, 4);
    assert_int_equal(kv.pool[0].n_host, 2);
    assert_int_equal(kv.pool[0].mem_len, (size_t)2 * 2 * 8 * 16 * 4 * 4);
    assert_int_equal(kv.slot[0], 0);
    assert_int_equal(kv.slot[1], -1);
    assert_int_equal(kv.slot[3], 1);
    struct copies c = {0};
    kv.copy         = on_copy;
    kv.copy_arg     = &c;
    assert_int_equal(kv_reserve(&kv, 0, 40, err, sizeof err), HEARTH_OK);
    kv.seqs[0].n_tokens = 40;
    for (int p = 0; p < 40; p++)
        ((float *)kv_row(&kv, 3, 0, 0, p))[0] = (float)p;
    kv_publish(&kv, 0, tok, 40);
    assert_int_equal(kv_reuse_prefix(&kv, 1, tok, 40, false), 32);
    kv_truncate(&kv, 1, 20);
    assert_int_equal(c.n, 1);
    assert_int_equal(c.group, 0);
    assert_int_equal(c.src, kv.seqs[0].t[0].blocks[1]);
    assert_int_equal(c.dst, kv.seqs[1].t[0].blocks[1]);
    assert_int_not_equal(c.dst, c.src);
    assert_int_equal(c.n_rows, 4);
    for (int p = 0; p < 20; p++)
        assert_true(((float *)kv_row(&kv, 3, 0, 1, p))[0] == (float)p);
    kv_free(&kv);

    /* every layer on a device: no host memory at all, the tables still work */
    const bool none[4] = {false, false, false, false};
    p.host             = none;
    assert_int_equal(kv_init(&kv, &p, err, sizeof err), HEARTH_OK);
    assert_null(kv.pool[0].mem);
    assert_int_equal(kv_reserve(&kv, 0, 40, err, sizeof err), HEARTH_OK);
    assert_int_equal(kv.seqs[0].t[0].n_blocks, 3);
    kv_free(&kv);
}

/* K q8_0 and V f16: rows of their own lengths, K and V apart, copied apart. */
static void test_quantized_k_and_f16_v_have_their_own_rows(void **state)
{
    (void)state;
    struct kv_cache kv;
    char err[256];
    const struct kv_params p = {.n_layer      = 2,
                                .kv_dim       = 64,
                                .n_seq        = 2,
                                .n_ctx        = 64,
                                .block_tokens = 16,
                                .n_blocks     = 8,
                                .type         = HEARTH_KV_Q8_0,
                                .type_v       = HEARTH_KV_F16};
    assert_int_equal(kv_init(&kv, &p, err, sizeof err), HEARTH_OK);
    assert_int_equal(kv.row_len[0], 2 * 34);
    assert_int_equal(kv.row_len[1], 64 * 2);
    assert_int_equal(kv_bytes(&p), (size_t)2 * 8 * 16 * (68 + 128));
    assert_int_equal(kv_retain_block_len(&p), (size_t)2 * 16 * (68 + 128));
    assert_ptr_equal(kv_layer_base(&kv, 1, 0), kv.pool[0].mem + 8 * 16 * (68 + 128));
    assert_ptr_equal(kv_layer_base(&kv, 1, 1), kv_layer_base(&kv, 1, 0) + 8 * 16 * 68);
    /* every row of both sequences written with its own byte, then read back */
    int32_t tok[40];
    fill_tokens(tok, 40, 1);
    assert_int_equal(kv_reserve(&kv, 0, 40, err, sizeof err), HEARTH_OK);
    for (int l = 0; l < 2; l++)
        for (int w = 0; w < 2; w++)
            for (int pos = 0; pos < 40; pos++)
                memset(kv_row(&kv, l, w, 0, pos), l * 100 + w * 50 + pos, kv.row_len[w]);
    kv.seqs[0].n_tokens = 40;
    kv_publish(&kv, 0, tok, 40);
    /* a second sequence shares two blocks and cuts inside the second: a copy of 4 rows */
    assert_int_equal(kv_reuse_prefix(&kv, 1, tok, 40, false), 32);
    kv_truncate(&kv, 1, 20);
    assert_int_not_equal(kv_layer_blocks(&kv, 0, 1)[1], kv_layer_blocks(&kv, 0, 0)[1]);
    for (int l = 0; l < 2; l++)
        for (int w = 0; w < 2; w++)
            for (int pos = 0; pos < 20; pos++) {
                const uint8_t *r = kv_row(&kv, l, w, 1, pos);
                for (size_t i = 0; i < kv.row_len[w]; i++)
                    assert_int_equal(r[i], (uint8_t)(l * 100 + w * 50 + pos));
            }
    kv_free(&kv);
}

static void test_quantized_types_are_checked(void **state)
{
    (void)state;
    struct kv_cache kv;
    char err[256];
    struct kv_params p = {.n_layer      = 1,
                          .kv_dim       = 48,
                          .n_seq        = 1,
                          .n_ctx        = 32,
                          .block_tokens = 16,
                          .n_blocks     = 2,
                          .type         = HEARTH_KV_Q8_0,
                          .type_v       = HEARTH_KV_F16};
    assert_int_equal(kv_init(&kv, &p, err, sizeof err), HEARTH_EINVAL);
    assert_non_null(strstr(err, "whole 32-value blocks"));
    p.kv_dim = 64;
    p.type_v = HEARTH_KV_Q4_0;
    assert_int_equal(kv_init(&kv, &p, err, sizeof err), HEARTH_EINVAL);
    p.type_v = HEARTH_KV_Q8_0;
    p.type   = HEARTH_KV_Q4_0;
    assert_int_equal(kv_init(&kv, &p, err, sizeof err), HEARTH_OK);
    assert_int_equal(kv.row_len[0], 2 * 18);
    assert_int_equal(kv.row_len[1], 2 * 34);
    kv_free(&kv);
}

/* ---------------------------------------------------------- retention --- */

/* One pool of n_blocks for the sequences and n_retain more, caching at most n_retain. */
static void init_retain(struct kv_cache *kv, int32_t n_seq, int32_t n_ctx, int32_t n_retain)
{
    char err[256];
    const struct kv_params p = {.n_layer      = 2,
                                .kv_dim       = 4,
                                .n_seq        = n_seq,
                                .n_ctx        = n_ctx,
                                .block_tokens = 16,
                                .n_blocks     = n_seq * ((n_ctx + 15) / 16),
                                .type         = HEARTH_KV_F16,
                                .type_v       = HEARTH_KV_F16,
                                .retain       = true,
                                .n_retain     = n_retain};
    assert_int_equal(kv_init(kv, &p, err, sizeof err), HEARTH_OK);
    assert_int_equal(kv->pool[0].n_blocks, p.n_blocks + n_retain);
    assert_int_equal(kv_bytes(&p), (size_t)(p.n_blocks + n_retain) * kv_retain_block_len(&p));
}

/* Runs tokens[0..n) through seq: reserved, written, published, released. */
static void run_seq(struct kv_cache *kv, int32_t seq, const int32_t *tok, int32_t n)
{
    char err[256];
    int32_t have = kv_reuse_prefix(kv, seq, tok, n, false);
    assert_int_equal(kv_reserve(kv, seq, n - have, err, sizeof err), HEARTH_OK);
    kv->seqs[seq].n_tokens = n;
    kv_publish(kv, seq, tok, n);
    kv_truncate(kv, seq, 0);
}

static void test_retention_never_passes_its_cap(void **state)
{
    (void)state;
    struct kv_cache kv;
    char err[256];
    init_retain(&kv, 2, 64, 5);
    const size_t block = (size_t)2 * 2 * 16 * 4 * 2; /* 2 layers x K,V x 16 tokens x 4 x f16 */
    uint64_t r         = 12345;
    int32_t tok[2][64];
    for (int round = 0; round < 400; round++) {
        /* two sequences at once, of random lengths, often sharing a start */
        for (int q = 0; q < 2; q++) {
            r         = r * 6364136223846793005ull + 1442695040888963407ull;
            int32_t n = 2 + (int32_t)((r >> 33) % 62);
            for (int32_t i = 0; i < 64; i++)
                tok[q][i] = i < 20 && (r >> 20) % 2 ? i : (int32_t)((r >> (i % 40)) % 50);
            int32_t have = kv_reuse_prefix(&kv, q, tok[q], n, false);
            assert_int_equal(kv_reserve(&kv, q, n - have, err, sizeof err), HEARTH_OK);
            kv.seqs[q].n_tokens = n;
            kv_publish(&kv, q, tok[q], n);
        }
        for (int q = 0; q < 2; q++) {
            kv_truncate(&kv, q, (int32_t)(round % 3) * 7);
            assert_true(kv.pool[0].n_cached <= 5);
            assert_true(kv_cached_bytes(&kv) <= 5 * block);
            assert_int_equal(kv_cached_bytes(&kv), (size_t)kv.pool[0].n_cached * block);
            assert_int_equal(kv_used_blocks(&kv) + kv.pool[0].n_cached + kv.pool[0].n_free,
                             kv.pool[0].n_blocks);
            kv_truncate(&kv, q, 0);
        }
    }
    assert_true(kv.pool[0].n_evicted > 0);
    kv_free(&kv);
}

static void test_a_sequence_past_the_cap_keeps_its_prefix(void **state)
{
    (void)state;
    struct kv_cache kv;
    int32_t tok[64];
    fill_tokens(tok, 64, 11);
    init_retain(&kv, 1, 64, 2);
    run_seq(&kv, 0, tok, 64); /* 4 blocks, room to keep 2 */
    assert_int_equal(kv.pool[0].n_cached, 2);
    assert_int_equal(kv.pool[0].n_evicted, 2);
    assert_int_equal(kv_reuse_prefix(&kv, 0, tok, 64, false), 32);
    kv_free(&kv);
}

static void test_a_shared_prefix_outlives_the_tails_that_hang_off_it(void **state)
{
    (void)state;
    struct kv_cache kv;
    int32_t a[48], b[48], c[48];
    fill_tokens(a, 48, 3);
    memcpy(b, a, sizeof b);
    for (int i = 32; i < 48; i++)
        b[i] = 600 + i; /* the same two blocks, then its own */
    fill_tokens(c, 48, 21);
    init_retain(&kv, 1, 64, 3);
    run_seq(&kv, 0, a, 48);
    run_seq(&kv, 0, b, 48); /* reuses a's first two blocks: 4 cached, so a's tail goes */
    assert_int_equal(kv.pool[0].n_cached, 3);
    assert_int_equal(kv_reuse_prefix(&kv, 0, a, 48, false), 32);
    kv_truncate(&kv, 0, 0);
    assert_int_equal(kv_reuse_prefix(&kv, 0, b, 48, false), 32); /* at most n - 1 tokens */
    kv_truncate(&kv, 0, 0);
    /* without a cap the same runs keep all four */
    struct kv_cache free_kv;
    assert_int_equal(init(&free_kv, 2, 4, 1, 64, 16, 8, HEARTH_KV_F16), HEARTH_OK);
    run_seq(&free_kv, 0, a, 48);
    run_seq(&free_kv, 0, b, 48);
    assert_int_equal(free_kv.pool[0].n_cached, 4);
    assert_int_equal(free_kv.pool[0].cap, -1);
    kv_free(&free_kv);
    /* another sequence of two blocks: the oldest leaf (b's tail) goes first, then the
     * shared prefix's last block, whose child is gone; its first block stays */
    run_seq(&kv, 0, c, 33);
    assert_int_equal(kv.pool[0].n_cached, 3);
    assert_int_equal(kv_reuse_prefix(&kv, 0, c, 33, false), 32);
    kv_truncate(&kv, 0, 0);
    assert_int_equal(kv_reuse_prefix(&kv, 0, a, 48, false), 16);
    kv_free(&kv);
}

/* ---------------------------------------------------- inside a block --- */

/* The value every row of position p holds in a test whose rows depend on tokens[0..p]. */
static float row_value(const int32_t *tok, int32_t p, int32_t l, int w)
{
    uint32_t h = 2166136261u + (uint32_t)(l * 2 + w);
    for (int32_t i = 0; i <= p; i++)
        h = (h ^ (uint32_t)tok[i]) * 16777619u;
    return (float)(h % 100000);
}

/* Writes rows from..n-1 of seq as row_value says (2 layers, rows of F32). */
static void write_rows(struct kv_cache *kv, int32_t seq, const int32_t *tok, int32_t from,
                       int32_t n)
{
    for (int32_t l = 0; l < 2; l++)
        for (int w = 0; w < 2; w++)
            for (int32_t p = from; p < n; p++)
                for (int i = 0; i < 4; i++)
                    ((float *)kv_row(kv, l, w, seq, p))[i] = row_value(tok, p, l, w) + (float)i;
}

static void assert_rows(const struct kv_cache *kv, int32_t seq, const int32_t *tok, int32_t n)
{
    for (int32_t l = 0; l < 2; l++)
        for (int w = 0; w < 2; w++)
            for (int32_t p = 0; p < n; p++)
                for (int i = 0; i < 4; i++)
                    if (((const float *)kv_row(kv, l, w, seq, p))[i] !=
                        row_value(tok, p, l, w) + (float)i)
                        fail_msg("seq %d layer %d %s row %d holds another position's value", seq, l,
                                 w ? "V" : "K", p);
}

/* Runs tokens[0..n) through seq resuming inside blocks: rows checked, written, ended. */
static int32_t run_within(struct kv_cache *kv, int32_t seq, const int32_t *tok, int32_t n)
{
    char err[256];
    const int32_t have = kv_reuse_prefix(kv, seq, tok, n, true);
    assert_int_equal(kv->seqs[seq].n_tokens, have);
    assert_rows(kv, seq, tok, have);
    assert_int_equal(kv_reserve(kv, seq, n - have, err, sizeof err), HEARTH_OK);
    write_rows(kv, seq, tok, have, n);
    kv->seqs[seq].n_tokens = n;
    kv_publish(kv, seq, tok, n);
    kv_publish_tail(kv, seq, tok, n);
    kv_truncate(kv, seq, 0);
    return have;
}

static void test_reuse_goes_on_inside_a_block(void **state)
{
    (void)state;
    struct kv_cache kv;
    int32_t a[80], b[80];
    fill_tokens(a, 80, 4);
    assert_int_equal(init(&kv, 2, 4, 2, 128, 16, 16, HEARTH_KV_F32), HEARTH_OK);
    assert_int_equal(run_within(&kv, 0, a, 40), 0); /* two whole blocks and 8 tokens */
    assert_int_equal(kv.pool[0].n_cached, 3);
    assert_false(kv_block_whole(&kv.pool[0], kv.pool[0].lru_head)); /* released last block first */
    /* a longer prompt resumes at 40, in a copy of its own of the partial block */
    assert_int_equal(kv_reuse_prefix(&kv, 1, a, 60, true), 40);
    assert_rows(&kv, 1, a, 40);
    assert_int_equal(kv.seqs[1].t[0].n_blocks, 3);
    assert_int_equal(kv.seqs[1].t[0].n_published, 2);
    assert_int_equal(kv.pool[0].n_cached, 1); /* the partial block stays cached */
    assert_int_equal(kv.pool[0].refcnt[kv.seqs[1].t[0].blocks[2]], 1);
    kv_truncate(&kv, 1, 0);
    /* without within, whole blocks only */
    assert_int_equal(kv_reuse_prefix(&kv, 1, a, 60, false), 32);
    kv_truncate(&kv, 1, 0);
    /* at most n - 1 tokens, and no further than the prompt matches */
    assert_int_equal(kv_reuse_prefix(&kv, 1, a, 40, true), 39);
    kv_truncate(&kv, 1, 0);
    memcpy(b, a, sizeof b);
    b[37] = 777;
    assert_int_equal(kv_reuse_prefix(&kv, 1, b, 60, true), 37);
    assert_rows(&kv, 1, a, 37);
    kv_truncate(&kv, 1, 0);
    /* a prompt that parts from a whole block midway resumes inside it */
    assert_int_equal(run_within(&kv, 0, a, 64), 40);
    memcpy(b, a, sizeof b);
    b[53] = 778;
    assert_int_equal(kv_reuse_prefix(&kv, 1, b, 70, true), 53);
    assert_rows(&kv, 1, a, 53);
    kv_truncate(&kv, 1, 0);
    /* another first token finds nothing, whole or partial */
    b[0] = 779;
    assert_int_equal(kv_reuse_prefix(&kv, 1, b, 70, true), 0);
    assert_int_equal(kv.seqs[1].t[0].n_blocks, 0);
    kv_free(&kv);
}

static void test_an_extended_partial_block_replaces_the_old_one(void **state)
{
    (void)state;
    struct kv_cache kv;
    int32_t a[64];
    fill_tokens(a, 64, 6);
    assert_int_equal(init(&kv, 2, 4, 1, 64, 16, 8, HEARTH_KV_F32), HEARTH_OK);
    run_within(&kv, 0, a, 20);
    assert_int_equal(kv.pool[0].n_cached, 2);
    /* the next turn resumes inside the partial block and ends in the same block */
    assert_int_equal(run_within(&kv, 0, a, 28), 20);
    assert_int_equal(kv.pool[0].n_cached, 2); /* the 4-token block went, the 12-token one stays */
    assert_int_equal(kv.pool[0].n_free, 6);
    assert_int_equal(run_within(&kv, 0, a, 29), 28);
    /* a tail that parts from the cached one keeps both */
    int32_t b[64];
    memcpy(b, a, sizeof b);
    b[18] = 900;
    assert_int_equal(run_within(&kv, 0, b, 24), 18);
    assert_int_equal(kv.pool[0].n_cached, 3);
    assert_int_equal(kv_reuse_prefix(&kv, 0, a, 40, true), 29);
    kv_truncate(&kv, 0, 0);
    assert_int_equal(kv_reuse_prefix(&kv, 0, b, 40, true), 24);
    kv_free(&kv);
}

static int32_t n_written_partial, n_written;

static void count_written(void *arg, const struct kv_cache *kv, int32_t block, uint64_t hash,
                          const int32_t *tokens)
{
    (void)arg;
    (void)hash;
    (void)tokens;
    n_written++;
    n_written_partial += !kv_block_whole(&kv->pool[0], block);
}

static void test_retention_with_partial_blocks_keeps_rows_and_cap(void **state)
{
    (void)state;
    struct kv_cache kv;
    char err[256];
    const struct kv_params p = {.n_layer      = 2,
                                .kv_dim       = 4,
                                .n_seq        = 2,
                                .n_ctx        = 64,
                                .block_tokens = 16,
                                .n_blocks     = 8,
                                .type         = HEARTH_KV_F32,
                                .type_v       = HEARTH_KV_F32,
                                .retain       = true,
                                .n_retain     = 5};
    assert_int_equal(kv_init(&kv, &p, err, sizeof err), HEARTH_OK);
    kv_set_tier(&kv, count_written, NULL, NULL);
    const size_t block = (size_t)2 * 2 * 16 * 4 * 4; /* 2 layers x K,V x 16 tokens x 4 x f32 */
    uint64_t r         = 777;
    int32_t tok[2][64];
    int32_t inside = 0;
    n_written = n_written_partial = 0;
    for (int round = 0; round < 400; round++) {
        /* two sequences at once, of random lengths, often sharing a start or going on from
         * an earlier one */
        for (int q = 0; q < 2; q++) {
            r               = r * 6364136223846793005ull + 1442695040888963407ull;
            const int32_t n = 2 + (int32_t)((r >> 33) % 62);
            for (int32_t i = 0; i < 64; i++)
                tok[q][i] = i < 20 + (int32_t)((r >> 8) % 30) && (r >> 20) % 2
                                ? i % 7
                                : (int32_t)((r >> (i % 40)) % 50);
            const int32_t have = kv_reuse_prefix(&kv, q, tok[q], n, true);
            inside += have % 16 != 0;
            assert_rows(&kv, q, tok[q], have);
            assert_int_equal(kv_reserve(&kv, q, n - have, err, sizeof err), HEARTH_OK);
            write_rows(&kv, q, tok[q], have, n);
            kv.seqs[q].n_tokens = n;
            kv_publish(&kv, q, tok[q], n);
        }
        for (int q = 0; q < 2; q++) {
            const int32_t n = kv.seqs[q].n_tokens;
            if (round % 3)
                kv_publish_tail(&kv, q, tok[q], n);
            kv_truncate(&kv, q, (int32_t)(round % 3) * 7);
            assert_true(kv.pool[0].n_cached <= 5);
            assert_int_equal(kv_cached_bytes(&kv), (size_t)kv.pool[0].n_cached * block);
            assert_int_equal(kv_used_blocks(&kv) + kv.pool[0].n_cached + kv.pool[0].n_free,
                             kv.pool[0].n_blocks);
            kv_truncate(&kv, q, 0);
        }
    }
    assert_true(inside > 50);
    assert_true(n_written > 0);
    assert_int_equal(n_written_partial, 0); /* the disk tier never sees a partial block */
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
        cmocka_unit_test(test_window_layers_get_their_own_pool),
        cmocka_unit_test(test_window_blocks_are_released_as_the_window_passes),
        cmocka_unit_test(test_window_pool_stays_bounded_over_a_long_sequence),
        cmocka_unit_test(test_reuse_needs_the_window_blocks_cached),
        cmocka_unit_test(test_truncate_behind_the_window_empties_the_sequence),
        cmocka_unit_test(test_truncate_falls_back_to_the_boundary_in_every_pool),
        cmocka_unit_test(test_all_window_layers_need_no_full_pool),
        cmocka_unit_test(test_kv_bytes_counts_the_window_pool),
        cmocka_unit_test(test_layers_without_kv_take_no_pool_space),
        cmocka_unit_test(test_device_layers_own_their_memory),
        cmocka_unit_test(test_quantized_k_and_f16_v_have_their_own_rows),
        cmocka_unit_test(test_quantized_types_are_checked),
        cmocka_unit_test(test_retention_never_passes_its_cap),
        cmocka_unit_test(test_a_sequence_past_the_cap_keeps_its_prefix),
        cmocka_unit_test(test_a_shared_prefix_outlives_the_tails_that_hang_off_it),
        cmocka_unit_test(test_reuse_goes_on_inside_a_block),
        cmocka_unit_test(test_an_extended_partial_block_replaces_the_old_one),
        cmocka_unit_test(test_retention_with_partial_blocks_keeps_rows_and_cap),
    };
    return cmocka_run_group_tests_name("kv", tests, NULL, NULL);
}
