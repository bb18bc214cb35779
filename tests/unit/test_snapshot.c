/*
 * test_snapshot.c: the store of recurrent-state snapshots (src/model/snapshot.c)
 * over a real paged KV cache: which boundaries a batch keeps, how the kept
 * ones thin out, that only a matching prefix finds one, and that the store
 * never holds more than n_seq x per_seq of them.
 */
#include <stdbool.h>
#include <string.h>

#include "model/kv.h"
#include "model/snapshot.h"
#include "util/testutil.h"

#define BT        4 /* tokens per KV block */
#define STATE_LEN 3 /* floats per snapshot */

struct fx {
    struct kv_cache kv;
    struct snap_store *s;
    float *dst[64];
};

/* A store over a cache; n_cached >= 0: the prefix cache's cap, n_cached states and blocks. */
static void fx_open_cap(struct fx *f, int32_t n_seq, int32_t per_seq, int32_t n_cached)
{
    char err[256];
    memset(f, 0, sizeof *f);
    const struct kv_params kp = {.n_layer      = 1,
                                 .kv_dim       = 4,
                                 .n_seq        = n_seq,
                                 .n_ctx        = 64,
                                 .block_tokens = BT,
                                 .n_blocks     = 64,
                                 .type         = HEARTH_KV_F32,
                                 .type_v       = HEARTH_KV_F32,
                                 .retain       = n_cached >= 0,
                                 .n_retain     = n_cached > 0 ? n_cached : 0};
    assert_int_equal(kv_init(&f->kv, &kp, err, sizeof err), HEARTH_OK);
    f->s = snap_new(n_seq, per_seq, n_cached, STATE_LEN);
    assert_non_null(f->s);
}

static void fx_open(struct fx *f, int32_t n_seq, int32_t per_seq)
{
    fx_open_cap(f, n_seq, per_seq, -1);
}

static void fx_close(struct fx *f)
{
    snap_free(f->s);
    kv_free(&f->kv);
}

/*
 * Sequence seq takes tokens tok[from..to) in one batch, as hearth_decode
 * would: blocks reserved, the plan made, each planned state filled with
 * (position, salt), then the KV length advanced and the blocks published.
 */
static void run(struct fx *f, int32_t seq, const int32_t *tok, int32_t from, int32_t to, float salt)
{
    char err[256];
    int32_t pos[64], sq[64];
    const int32_t n = to - from;
    for (int32_t i = 0; i < n; i++)
        pos[i] = from + i, sq[i] = seq;
    struct hearth_batch b = {n, tok + from, pos, sq, NULL};
    assert_int_equal(kv_reserve(&f->kv, seq, n, err, sizeof err), HEARTH_OK);
    snap_plan(f->s, &b, BT, f->dst);
    for (int32_t i = 0; i < n; i++)
        if (f->dst[i]) {
            assert_int_equal((pos[i] + 1) % BT, 0);
            f->dst[i][0] = (float)(pos[i] + 1);
            f->dst[i][1] = salt;
            f->dst[i][2] = (float)seq;
        }
    f->kv.seqs[seq].n_tokens = to;
    kv_publish(&f->kv, seq, tok, to);
    snap_bind(f->s, &f->kv, seq);
}

/* Position of the snapshot snap_find gives seq at or below p0, checking its contents. */
static int32_t found(struct fx *f, int32_t seq, int32_t p0, float salt)
{
    int32_t at      = -1;
    const float *st = snap_find(f->s, &f->kv, seq, p0, &at);
    if (!st) {
        assert_int_equal(at, 0);
        return 0;
    }
    assert_true(st[0] == (float)at);
    assert_true(st[1] == salt);
    return at;
}

static void tokens(int32_t *t, int32_t n, int32_t salt)
{
    for (int32_t i = 0; i < n; i++)
        t[i] = 100 + (i * 7 + salt * 13) % 50;
}

static void test_a_batch_saves_only_what_survives_it(void **state)
{
    (void)state;
    struct fx f;
    fx_open(&f, 1, 2);
    int32_t t[16];
    tokens(t, 16, 1);
    run(&f, 0, t, 0, 16, 1.0f);
    /* boundaries 4, 8, 12, 16 with room for two: 8 and 12 would be pushed out in this batch */
    for (int32_t i = 0; i < 16; i++)
        if (i == 3 || i == 15)
            assert_non_null(f.dst[i]);
        else
            assert_null(f.dst[i]);
    int32_t owned, cached;
    snap_stats(f.s, &owned, &cached);
    assert_int_equal(owned, 2);
    assert_int_equal(cached, 0);
    assert_int_equal(found(&f, 0, 15, 1.0f), 4);
    assert_int_equal(found(&f, 0, 16, 1.0f), 16);
    fx_close(&f);
}

/* Kept positions thin out evenly, the newest always kept, however the batches fall. */
static void test_kept_snapshots_spread_over_the_sequence(void **state)
{
    (void)state;
    struct fx f;
    fx_open(&f, 1, 3);
    int32_t t[48];
    tokens(t, 48, 2);
    for (int32_t p = 0; p < 48; p += 5)
        run(&f, 0, t, p, p + 5 > 48 ? 48 : p + 5, 2.0f);
    int32_t owned;
    snap_stats(f.s, &owned, NULL);
    assert_int_equal(owned, 3);
    /* whatever the batches, the kept set is a fixed function of the boundaries crossed */
    struct fx g;
    fx_open(&g, 1, 3);
    run(&g, 0, t, 0, 48, 2.0f);
    for (int32_t p = 48; p > 0; p--)
        assert_int_equal(found(&f, 0, p, 2.0f), found(&g, 0, p, 2.0f));
    assert_int_equal(found(&f, 0, 48, 2.0f), 48);
    /* not all bunched at the end: one in the first half */
    assert_true(found(&f, 0, 24, 2.0f) > 0);
    fx_close(&g);
    fx_close(&f);
}

static void test_only_a_matching_prefix_finds_a_snapshot(void **state)
{
    (void)state;
    struct fx f;
    fx_open(&f, 2, 8);
    int32_t a[24], b[24], c[24];
    tokens(a, 24, 3);
    memcpy(b, a, sizeof a);
    b[9] = 999; /* differs in block 2 */
    memcpy(c, a, sizeof a);
    c[0] = 999; /* differs in block 0 only: every later key differs too */
    run(&f, 0, a, 0, 24, 3.0f);
    kv_truncate(&f.kv, 0, 0);
    snap_disown(f.s, 0, 0);
    int32_t owned, cached;
    snap_stats(f.s, &owned, &cached);
    assert_int_equal(owned, 0);
    assert_int_equal(cached, 6); /* keyed, so kept for others */

    assert_int_equal(kv_reuse_prefix(&f.kv, 1, a, 24, false), 20);
    assert_int_equal(found(&f, 1, 20, 3.0f), 20);
    assert_int_equal(found(&f, 1, 11, 3.0f), 8);
    kv_truncate(&f.kv, 1, 0);

    assert_int_equal(kv_reuse_prefix(&f.kv, 1, b, 24, false), 8);
    assert_int_equal(found(&f, 1, 8, 3.0f), 8);
    kv_truncate(&f.kv, 1, 0);

    assert_int_equal(kv_reuse_prefix(&f.kv, 1, c, 24, false), 0);
    assert_int_equal(found(&f, 1, 24, 3.0f), 0);
    /* c computed afresh: its own snapshots, never a's, even where the tokens since agree */
    run(&f, 1, c, 0, 24, 4.0f);
    assert_int_equal(found(&f, 1, 24, 4.0f), 24);
    assert_int_equal(found(&f, 1, 13, 4.0f), 12);
    fx_close(&f);
}

/* An unkeyed snapshot (its block never published) is freed, not cached, when given up. */
static void test_unpublished_snapshots_are_not_kept(void **state)
{
    (void)state;
    struct fx f;
    fx_open(&f, 1, 4);
    int32_t t[8], pos[8], sq[8];
    tokens(t, 8, 5);
    char err[256];
    for (int32_t i = 0; i < 8; i++)
        pos[i] = i, sq[i] = 0;
    struct hearth_batch b = {8, t, pos, sq, NULL};
    assert_int_equal(kv_reserve(&f.kv, 0, 8, err, sizeof err), HEARTH_OK);
    snap_plan(f.s, &b, BT, f.dst);
    f.dst[3][0] = 4, f.dst[3][1] = 5;
    f.dst[7][0] = 8, f.dst[7][1] = 5;
    f.kv.seqs[0].n_tokens = 8;
    assert_int_equal(found(&f, 0, 7, 5.0f), 4); /* its own, by position */
    snap_disown(f.s, 0, 4);
    int32_t owned, cached;
    snap_stats(f.s, &owned, &cached);
    assert_int_equal(owned, 1);
    assert_int_equal(cached, 0);
    fx_close(&f);
}

/*
 * The store holds n_seq x per_seq snapshots at most; cached ones go least
 * recently used first, and a snapshot loaded recently outlives older ones.
 */
static void test_cached_snapshots_are_evicted_least_recently_used_first(void **state)
{
    (void)state;
    struct fx f;
    fx_open(&f, 2, 2); /* room for 4 */
    int32_t a[9], b[9], c[9], owned, cached;
    tokens(a, 9, 6);
    tokens(b, 9, 7);
    tokens(c, 9, 8);
    run(&f, 0, a, 0, 8, 6.0f); /* a: 4, 8 */
    kv_truncate(&f.kv, 0, 0);
    snap_disown(f.s, 0, 0);
    run(&f, 0, b, 0, 8, 7.0f); /* b: 4, 8 */
    kv_truncate(&f.kv, 0, 0);
    snap_disown(f.s, 0, 0);
    snap_stats(f.s, &owned, &cached);
    assert_int_equal(owned, 0);
    assert_int_equal(cached, 4);
    /* loading a's 8 makes it the most recently used: a's 4, then b's 4, are the oldest */
    assert_int_equal(kv_reuse_prefix(&f.kv, 1, a, 9, false), 8);
    assert_int_equal(found(&f, 1, 8, 6.0f), 8);
    kv_truncate(&f.kv, 1, 0);
    run(&f, 0, c, 0, 8, 8.0f); /* takes two entries */
    snap_stats(f.s, &owned, &cached);
    assert_int_equal(owned, 2);
    assert_int_equal(cached, 2);
    assert_int_equal(kv_reuse_prefix(&f.kv, 1, a, 9, false), 8);
    assert_int_equal(found(&f, 1, 8, 6.0f), 8);
    assert_int_equal(found(&f, 1, 7, 6.0f), 0);
    kv_truncate(&f.kv, 1, 0);
    assert_int_equal(kv_reuse_prefix(&f.kv, 1, b, 9, false), 8);
    assert_int_equal(found(&f, 1, 8, 7.0f), 8);
    assert_int_equal(found(&f, 1, 7, 7.0f), 0);
    kv_truncate(&f.kv, 1, 0);
    /* the owner's own two stay whatever the others do */
    assert_int_equal(found(&f, 0, 8, 8.0f), 8);
    assert_int_equal(found(&f, 0, 7, 8.0f), 4);
    fx_close(&f);
}

/* Rows of two sequences interleaved in one batch: each gets its own boundaries. */
static void test_sequences_in_one_batch_keep_their_own(void **state)
{
    (void)state;
    struct fx f;
    fx_open(&f, 2, 4);
    int32_t tok[16], pos[16], sq[16];
    char err[256];
    tokens(tok, 16, 9);
    for (int32_t i = 0; i < 16; i++)
        pos[i] = i / 2 + (i % 2) * 2, sq[i] = i % 2; /* seq 0 at 0..7, seq 1 at 2..9 */
    f.kv.seqs[1].n_tokens = 2;
    assert_int_equal(kv_reserve(&f.kv, 0, 8, err, sizeof err), HEARTH_OK);
    assert_int_equal(kv_reserve(&f.kv, 1, 10, err, sizeof err), HEARTH_OK);
    struct hearth_batch b = {16, tok, pos, sq, NULL};
    snap_plan(f.s, &b, BT, f.dst);
    for (int32_t i = 0; i < 16; i++) {
        const bool want = (pos[i] + 1) % BT == 0;
        assert_true((f.dst[i] != NULL) == want);
        if (want) {
            f.dst[i][0] = (float)(pos[i] + 1);
            f.dst[i][1] = (float)sq[i];
        }
    }
    f.kv.seqs[0].n_tokens = 8;
    f.kv.seqs[1].n_tokens = 10;
    assert_int_equal(found(&f, 0, 8, 0.0f), 8);
    assert_int_equal(found(&f, 0, 7, 0.0f), 4);
    assert_int_equal(found(&f, 1, 10, 1.0f), 8);
    assert_int_equal(found(&f, 1, 7, 1.0f), 4);
    fx_close(&f);
}

/* As a context wires them: the KV cache's evicted block takes its snapshots along. */
static void forget(void *arg, const struct kv_cache *kv, int32_t block, uint64_t hash,
                   const int32_t *tokens)
{
    (void)kv, (void)block, (void)tokens;
    snap_forget(arg, hash);
}

/*
 * With the prefix cache's cap (2 blocks, 2 states): a finished conversation
 * keeps its blocks and states; the next one's release evicts the first's
 * blocks, and its states go with them, so the cache never holds a state
 * nothing can resume from, and never more states than its cap.
 */
static void test_cached_snapshots_go_with_their_blocks(void **state)
{
    (void)state;
    struct fx f;
    fx_open_cap(&f, 1, 2, 2);
    kv_set_tier(&f.kv, forget, NULL, f.s);
    int32_t a[9], b[9], owned, cached;
    tokens(a, 9, 10);
    tokens(b, 9, 11);
    run(&f, 0, a, 0, 8, 10.0f); /* a: blocks 0, 1; states at 4, 8 */
    kv_truncate(&f.kv, 0, 0);
    snap_disown(f.s, 0, 0);
    snap_stats(f.s, &owned, &cached);
    assert_int_equal(cached, 2);
    assert_int_equal(kv_reuse_prefix(&f.kv, 0, a, 9, false), 8);
    assert_int_equal(found(&f, 0, 8, 10.0f), 8);
    kv_truncate(&f.kv, 0, 0);

    run(&f, 0, b, 0, 8, 11.0f);
    kv_truncate(&f.kv, 0, 0); /* four cached blocks, two allowed: a's go */
    snap_stats(f.s, &owned, &cached);
    assert_int_equal(cached, 0); /* a's states went with a's blocks */
    assert_int_equal(owned, 2);
    snap_disown(f.s, 0, 0);
    snap_stats(f.s, &owned, &cached);
    assert_int_equal(cached, 2);
    assert_int_equal(kv_reuse_prefix(&f.kv, 0, a, 9, false), 0);
    assert_int_equal(kv_reuse_prefix(&f.kv, 0, b, 9, false), 8);
    assert_int_equal(found(&f, 0, 8, 11.0f), 8);
    assert_int_equal(found(&f, 0, 7, 11.0f), 4);
    fx_close(&f);
}

/* The cap on cached states holds on its own: the least recently used past it goes. */
static void test_cached_snapshots_keep_to_their_cap(void **state)
{
    (void)state;
    struct fx f;
    fx_open_cap(&f, 1, 2, 1);
    int32_t a[9], owned, cached;
    tokens(a, 9, 12);
    run(&f, 0, a, 0, 8, 12.0f);
    kv_truncate(&f.kv, 0, 0);
    snap_disown(f.s, 0, 0);
    snap_stats(f.s, &owned, &cached);
    assert_int_equal(owned, 0);
    assert_int_equal(cached, 1);
    assert_int_equal(kv_reuse_prefix(&f.kv, 0, a, 9, false), 4); /* one block left by the cap */
    assert_int_equal(found(&f, 0, 4, 12.0f), 0);                 /* state 4 was the older: gone */
    fx_close(&f);
}

static void test_bytes_are_entries_times_state(void **state)
{
    (void)state;
    assert_int_equal(snap_bytes(4, 8, -1, 1000), (size_t)4 * 8 * 1000 * sizeof(float));
    assert_int_equal(snap_bytes(4, 8, 5, 1000), (size_t)(4 * 8 + 5) * 1000 * sizeof(float));
    assert_null(snap_new(1, 0, -1, 3));
    assert_null(snap_new(0, 1, -1, 3));
    assert_null(snap_new(1, 1, -2, 3));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_batch_saves_only_what_survives_it),
        cmocka_unit_test(test_kept_snapshots_spread_over_the_sequence),
        cmocka_unit_test(test_only_a_matching_prefix_finds_a_snapshot),
        cmocka_unit_test(test_unpublished_snapshots_are_not_kept),
        cmocka_unit_test(test_cached_snapshots_are_evicted_least_recently_used_first),
        cmocka_unit_test(test_sequences_in_one_batch_keep_their_own),
        cmocka_unit_test(test_cached_snapshots_go_with_their_blocks),
        cmocka_unit_test(test_cached_snapshots_keep_to_their_cap),
        cmocka_unit_test(test_bytes_are_entries_times_state),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
