/*
 * test_cache.c: the prefix cache of `hearth serve` past its slots
 * (--cache-ram): finished conversations kept within a byte cap, found
 * again by their prefix, dropped least recently used first, and the cap
 * held exactly, as /metrics reports it.
 *
 * The model is stories260K (5 layers x 32 K/V values in f16: 640 bytes a
 * token, 20 KiB a 32-token block). One slot of 256 tokens holds 8 blocks.
 * Each conversation here is a prompt of 161 to 187 tokens and 4 generated:
 * 5 whole blocks published, 160 tokens to reuse.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/serveutil.h"

#define BLOCK_BYTES (32 * 640)

/* Conversation k's prompt: its sentence repeated (16 to 26 tokens each) to 161..187 tokens. */
static char *conversation(int k)
{
    static const struct {
        const char *text;
        int times;
    } sentences[] = {
        {"Once upon a time there was a little dog named Max. ", 11},
        {"The cat sat on the mat and looked at the big red ball. ", 8},
        {"Lily went to the park with her mom and saw a bird. ", 9},
        {"Tom had a toy car that was blue and very fast. ", 8},
        {"The sun was hot so the children played in the water. ", 8},
        {"A little girl found a shiny stone under a tree. ", 7},
    };
    char *s = calloc(1, 2048);
    for (int i = 0; i < sentences[k].times; i++)
        strcat(s, sentences[k].text);
    return s;
}

/* Completes conversation k (4 greedy tokens); returns usage's cached_tokens. */
static double turn(const struct srv *s, int k)
{
    char *prompt = conversation(k);
    char body[2300];
    snprintf(body, sizeof body, "{\"prompt\":\"%s\",\"max_tokens\":4,\"temperature\":0}", prompt);
    free(prompt);
    struct http_resp r = http_post(s, "/v1/completions", body);
    assert_int_equal(r.status, 200);
    cJSON *j       = http_json(&r);
    const cJSON *u = jget(j, "usage");
    assert_in_range(jnum(u, "prompt_tokens"), 161, 187);
    double cached = jnum(jget(u, "prompt_tokens_details"), "cached_tokens");
    cJSON_Delete(j);
    http_resp_free(&r);
    return cached;
}

/* The value of an unlabelled sample on the /metrics page. */
static double metric(const struct srv *s, const char *name)
{
    struct http_resp r = http_get(s, "/metrics");
    assert_int_equal(r.status, 200);
    char key[128];
    snprintf(key, sizeof key, "\n%s ", name);
    const char *p = strstr(r.body, key);
    assert_non_null(p);
    double v = atof(p + strlen(key));
    http_resp_free(&r);
    return v;
}

/*
 * Two conversations do not fit one slot's 8 blocks; with 10 blocks of cache
 * both are kept whole, so going back to the first reuses all 160 tokens of
 * its whole blocks. With --cache-ram 0 the cache is the slot's free blocks:
 * the second conversation takes 3 of the first's, its tail first.
 */
static void test_cache_keeps_conversations_past_the_slots(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    double back[2];
    for (int c = 0; c < 2; c++) {
        struct srv s;
        const char *extra[] = {"--parallel", "1", "-c", "256", "--cache-ram",
                               c ? "0" : "200K", NULL};
        srv_start(&s, extra);
        assert_true(turn(&s, 0) == 0);
        assert_true(turn(&s, 1) == 0);
        back[c] = turn(&s, 0);
        if (!c) {
            assert_true(metric(&s, "hearth_cache_ram_cap_bytes") == 10 * BLOCK_BYTES);
            assert_true(metric(&s, "hearth_cache_ram_bytes") == 10 * BLOCK_BYTES);
        } else {
            assert_true(metric(&s, "hearth_cache_ram_cap_bytes") == -1);
        }
        assert_true(metric(&s, "hearth_prefix_cache_miss_tokens_total") >= 2 * 161);
        srv_stop(&s);
    }
    print_message("back to the first conversation: cached_tokens %g with 10 blocks of cache, "
                  "%g without\n", back[0], back[1]);
    assert_true(back[0] == 160);
    assert_true(back[1] == 64);
}

/*
 * Six conversations through a cache of 10 blocks: after every turn the cache
 * holds at most its cap (two conversations), the 20 blocks of the other four
 * are evicted, and the newest conversation is the one found again, whole.
 */
static void test_cache_holds_its_cap_and_drops_the_oldest(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    struct srv s;
    const char *extra[] = {"--parallel", "1", "-c", "256", "--cache-ram", "200K", NULL};
    srv_start(&s, extra);
    for (int k = 0; k < 6; k++) {
        assert_true(turn(&s, k) == 0);
        assert_true(metric(&s, "hearth_cache_ram_bytes") == (k ? 10 : 5) * BLOCK_BYTES);
    }
    assert_true(metric(&s, "hearth_cache_ram_evicted_blocks_total") == 20);
    assert_true(turn(&s, 5) == 160); /* the newest is whole */
    assert_true(turn(&s, 0) == 0);   /* the oldest is gone */
    assert_true(metric(&s, "hearth_cache_ram_bytes") <= 10 * BLOCK_BYTES);
    srv_stop(&s);
}

static void test_cache_ram_takes_sizes_and_refuses_the_rest(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    static const char *const bad[] = {"-1", "12X", "G", "1.5Q", ""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const char *argv[] = {tu_bin(), "serve", "-m", tu_model("stories260K.gguf"),
                              "--cache-ram", bad[i], NULL};
        char *out = NULL, *err = NULL;
        assert_int_equal(tu_run(argv, NULL, &out, &err, 60), 2);
        assert_non_null(strstr(err, "--cache-ram expects a size"));
        free(out);
        free(err);
    }
    /* 1.5M is 1572864 bytes: 76 whole blocks of 20 KiB */
    struct srv s;
    const char *extra[] = {"--parallel", "1", "-c", "256", "--cache-ram", "1.5MiB", NULL};
    srv_start(&s, extra);
    assert_true(metric(&s, "hearth_cache_ram_cap_bytes") == 76 * BLOCK_BYTES);
    srv_stop(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_cache_keeps_conversations_past_the_slots,
                                  srv_kill_leftovers),
        cmocka_unit_test_teardown(test_cache_holds_its_cap_and_drops_the_oldest,
                                  srv_kill_leftovers),
        cmocka_unit_test_teardown(test_cache_ram_takes_sizes_and_refuses_the_rest,
                                  srv_kill_leftovers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
