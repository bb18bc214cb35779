/*
 * test_kvdisk.c: the prefix cache's disk tier (src/model/kvdisk.c) under a
 * real model: the flush a clean stop makes keeps to its deadline (none
 * written with no time, all with time enough), and the files it writes are
 * the index of the next context on the directory.
 *
 * tiny-llama, 32-token blocks: a 70-token sequence ended publishes two
 * whole blocks into the cache.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/engineutil.h"
#include "util/testutil.h"

#define N_PROMPT 70

static int n_block_files(const char *dir)
{
    int n        = 0;
    char **names = tu_list_files(dir, ".kvb", &n);
    assert_non_null(names);
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return n;
}

/* An engine on the disk tier dir whose sequence 0 ended holding tok: two cached blocks. */
static struct tu_engine *cached_engine(const char *dir, hearth_token *tok)
{
    struct hearth_context_params cp = hearth_context_default_params();
    cp.n_ctx                        = 256;
    cp.n_seq_max                    = 1;
    cp.cache_dir                    = dir;
    cp.cache_disk_bytes             = 10 << 20;
    struct tu_engine *e             = NULL;
    assert_int_equal(tu_engine_open(&e, "tiny-llama-spm-f32.gguf", &cp), 0);
    if (!e->model) {
        tu_engine_close(e);
        return NULL;
    }
    float *last = malloc(e->n_vocab * sizeof *last);
    tu_tokens(tok, N_PROMPT, 9);
    for (int32_t i = 0; i < N_PROMPT; i++)
        tok[i] %= 500; /* tiny-llama has a vocabulary of 512 */
    tu_engine_run(e, 0, tok, N_PROMPT, 32, last);
    free(last);
    hearth_seq_end(e->ctx, 0, tok, N_PROMPT);
    return e;
}

static void test_flush_keeps_its_deadline(void **state)
{
    (void)state;
    char *dir = tu_tmpdir();
    hearth_token tok[N_PROMPT];
    struct tu_engine *e = cached_engine(dir, tok);
    if (!e) {
        tu_rmtree(dir);
        free(dir);
        skip();
    }
    struct hearth_cache_stats st;
    hearth_cache_flush(e->ctx, 0);
    hearth_cache_stats(e->ctx, &st);
    print_message("flush with no time: %llu blocks written\n", (unsigned long long)st.disk_writes);
    assert_int_equal(st.disk_writes, 0);
    assert_int_equal(n_block_files(dir), 0);
    hearth_cache_flush(e->ctx, 30);
    hearth_cache_stats(e->ctx, &st);
    print_message("flush with 30 s: %llu blocks written\n", (unsigned long long)st.disk_writes);
    assert_int_equal(st.disk_writes, 2);
    assert_int_equal(n_block_files(dir), 2);
    tu_engine_close(e);

    /* a new context on the directory finds both */
    e = cached_engine(dir, tok);
    hearth_cache_stats(e->ctx, &st);
    print_message("the next context on the directory: %llu bytes of block files found\n",
                  (unsigned long long)st.disk_bytes);
    assert_true(st.disk_bytes > 0);
    assert_int_equal(st.disk_skipped, 0);
    tu_engine_close(e);
    tu_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flush_keeps_its_deadline),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
