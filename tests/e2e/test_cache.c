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
 *
 * The disk tier (--cache-dir): a conversation of 9 blocks through a memory
 * cache of 5 writes what memory drops and, at SIGTERM, the rest; a new
 * server on the same directory finds all of it. Damaged files and another
 * model's are refused with a warning and the text is what a cold server
 * computes.
 */
#include <cjson/cJSON.h>
#include <dirent.h>
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
static double turn_n(const struct srv *s, int k, double *n_prompt)
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
    if (n_prompt)
        *n_prompt = jnum(u, "prompt_tokens");
    double cached = jnum(jget(u, "prompt_tokens_details"), "cached_tokens");
    cJSON_Delete(j);
    http_resp_free(&r);
    return cached;
}

static double turn(const struct srv *s, int k)
{
    return turn_n(s, k, NULL);
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
 * A conversation leaves 6 blocks: 5 whole and the last, partial (its prompt's
 * end and 3 replied tokens). Two do not fit one slot's 8 blocks; with 12
 * blocks of cache both are kept, so going back to the first reuses all but
 * its last token. With --cache-ram 0 the cache is the slot's free blocks:
 * the second conversation takes 4 of the first's, its tail first. Every
 * conversation begins with BOS, which the second copies from the first.
 */
static void test_cache_keeps_conversations_past_the_slots(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    double back[2], n_prompt = 0;
    for (int c = 0; c < 2; c++) {
        struct srv s;
        const char *extra[] = {"--parallel",     "1", "-c", "256", "--cache-ram",
                               c ? "0" : "240K", NULL};
        srv_start(&s, extra);
        assert_true(turn(&s, 0) == 0);
        assert_true(turn(&s, 1) == 1);
        back[c] = turn_n(&s, 0, &n_prompt);
        if (!c) {
            assert_true(metric(&s, "hearth_cache_ram_cap_bytes") == 12 * BLOCK_BYTES);
            assert_true(metric(&s, "hearth_cache_ram_bytes") == 12 * BLOCK_BYTES);
        } else {
            assert_true(metric(&s, "hearth_cache_ram_cap_bytes") == -1);
        }
        assert_true(metric(&s, "hearth_prefix_cache_miss_tokens_total") >= 2 * 161);
        srv_stop(&s);
    }
    print_message("back to the first conversation (%g tokens): cached_tokens %g with 12 blocks "
                  "of cache, %g without\n",
                  n_prompt, back[0], back[1]);
    assert_true(back[0] == n_prompt - 1);
    assert_true(back[1] == 64);
}

/*
 * Six conversations through a cache of 12 blocks: after every turn the cache
 * holds at most its cap (two conversations), the 24 blocks of the other four
 * are evicted, and the newest conversation is the one found again, whole.
 * Each turn after the first copies BOS from the one before.
 */
static void test_cache_holds_its_cap_and_drops_the_oldest(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    struct srv s;
    const char *extra[] = {"--parallel", "1", "-c", "256", "--cache-ram", "240K", NULL};
    srv_start(&s, extra);
    for (int k = 0; k < 6; k++) {
        assert_true(turn(&s, k) == (k ? 1 : 0));
        assert_true(metric(&s, "hearth_cache_ram_bytes") == (k ? 12 : 6) * BLOCK_BYTES);
    }
    assert_true(metric(&s, "hearth_cache_ram_evicted_blocks_total") == 24);
    double n_prompt = 0;
    assert_true(turn_n(&s, 5, &n_prompt) == n_prompt - 1); /* the newest is whole */
    assert_true(turn(&s, 0) == 1);                         /* the oldest is gone, but BOS */
    assert_true(metric(&s, "hearth_cache_ram_bytes") <= 12 * BLOCK_BYTES);
    srv_stop(&s);
}

/* Completes prompt (4 greedy tokens) on s: the text (malloc'd), its usage's counts. */
static char *complete(const struct srv *s, const char *prompt, int *n_prompt, int *cached)
{
    char body[4096];
    snprintf(body, sizeof body, "{\"prompt\":\"%s\",\"max_tokens\":4,\"temperature\":0}", prompt);
    struct http_resp r = http_post(s, "/v1/completions", body);
    assert_int_equal(r.status, 200);
    cJSON *j       = http_json(&r);
    const cJSON *u = jget(j, "usage");
    *n_prompt      = (int)jnum(u, "prompt_tokens");
    *cached        = (int)jnum(jget(u, "prompt_tokens_details"), "cached_tokens");
    char *text     = strdup(jstr(cJSON_GetArrayItem(jget(j, "choices"), 0), "text"));
    cJSON_Delete(j);
    http_resp_free(&r);
    return text;
}

/* Block files in dir. */
static int files_in(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += strstr(e->d_name, ".kvb") != NULL;
    closedir(d);
    return n;
}

static void sh(const char *fmt, const char *a, const char *b)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, fmt, a, b);
    assert_int_equal(system(cmd), 0);
}

/* Starts a server of model on the disk tier dir; returns the turn's text, its counts, log. */
static char *turn_on_disk(const char *model, const char *dir, const char *prompt, int *n_prompt,
                          int *cached, double *skipped, char **log)
{
    struct srv s;
    const char *extra[] = {"--parallel",  "1", "-c",           "512", "--cache-ram", "100K",
                           "--cache-dir", dir, "--cache-disk", "10M", NULL};
    srv_start_opt(&s, tu_model(model), extra, true);
    char *text = complete(&s, prompt, n_prompt, cached);
    *skipped   = metric(&s, "hearth_cache_disk_skipped_files_total");
    *log       = srv_slurp(s.log);
    srv_stop(&s);
    return text;
}

static void test_cache_disk_tier_survives_a_restart(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    char dir[] = "/tmp/hearth-cache-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char tier[64];
    snprintf(tier, sizeof tier, "%s/tier", dir);
    int n1, c1, n2, c2;
    /* the first turn: memory keeps 5 of its 9 blocks and drops 4 to disk */
    struct srv s;
    const char *extra[] = {"--parallel",  "1",  "-c",           "512", "--cache-ram", "100K",
                           "--cache-dir", tier, "--cache-disk", "10M", NULL};
    srv_start(&s, extra);
    char *reply = complete(&s, srv_long_story, &n1, &c1);
    assert_int_equal(c1, 0);
    assert_true(n1 >= 9 * 32 && n1 + 3 < 10 * 32);
    assert_true(metric(&s, "hearth_cache_disk_written_blocks_total") == 4);
    srv_stop(&s); /* SIGTERM: the 5 in memory are written too */
    assert_int_equal(files_in(tier), 9);

    char turn2[4096];
    snprintf(turn2, sizeof turn2, "%s%s and", srv_long_story, reply);
    double skipped;
    char *log;
    char *warm = turn_on_disk(SRV_MODEL, tier, turn2, &n2, &c2, &skipped, &log);
    print_message("after a restart: cached_tokens %d of %d (%.1f%%)\n", c2, n2, 100.0 * c2 / n2);
    assert_int_equal(c2, 9 * 32);
    assert_true(c2 >= 0.9 * n2);
    assert_true(skipped == 0);
    assert_non_null(strstr(log, "9 block files"));
    free(log);

    /* the same turn, cold */
    const char *plain[] = {"--parallel", "1", "-c", "512", "--cache-ram", "0", NULL};
    srv_start(&s, plain);
    int n3, c3;
    char *cold = complete(&s, turn2, &n3, &c3);
    srv_stop(&s);
    assert_int_equal(c3, 0);
    assert_string_equal(warm, cold);

    /* every file cut short: skipped at start, with a warning; the turn is computed */
    char copy[96];
    snprintf(copy, sizeof copy, "%s/short", dir);
    sh("cp -r '%s' '%s'", tier, copy);
    sh("for f in '%s'/*.kvb; do truncate -s 5000 \"$f\"; done%s", copy, "");
    char *text = turn_on_disk(SRV_MODEL, copy, turn2, &n3, &c3, &skipped, &log);
    assert_int_equal(c3, 0);
    assert_true(skipped == 10); /* the warm server wrote turn 2's new block */
    assert_non_null(strstr(log, "skipped"));
    assert_string_equal(text, cold);
    free(text);
    free(log);

    /* a byte flipped in every file's rows: found when read, dropped with a warning */
    snprintf(copy, sizeof copy, "%s/flip", dir);
    sh("cp -r '%s' '%s'", tier, copy);
    sh("for f in '%s'/*.kvb; do printf '\\125' | dd of=\"$f\" bs=1 seek=9000 conv=notrunc "
       "status=none; done%s",
       copy, "");
    text = turn_on_disk(SRV_MODEL, copy, turn2, &n3, &c3, &skipped, &log);
    assert_int_equal(c3, 0);
    assert_true(skipped == 1); /* the first block's: the chain stops there */
    assert_non_null(strstr(log, "checksum"));
    assert_string_equal(text, cold);
    free(text);
    free(log);

    /* another model's files, under this cache's names (a model of the shared test data) */
    if (!tu_model("tiny-llama-spm-q8_0.gguf")) {
        print_message("skip: another model's files: tiny-llama-spm-q8_0.gguf is in neither "
                      "models/ nor shared/models\n");
    } else {
        snprintf(copy, sizeof copy, "%s/other", dir);
        {
            /* a conversation on the other model fills its tier */
            struct srv o;
            const char *oextra[] = {"--parallel",   "1",   "-c", "512", "--cache-dir", copy,
                                    "--cache-disk", "10M", NULL};
            srv_start_opt(&o, tu_model("tiny-llama-spm-q8_0.gguf"), oextra, true);
            int a, b;
            free(complete(&o, srv_long_story, &a, &b));
            srv_stop(&o);
        }
        const int n_other = files_in(copy);
        assert_true(n_other > 0);
        text = turn_on_disk(SRV_MODEL, copy, turn2, &n3, &c3, &skipped, &log);
        assert_int_equal(c3, 0);
        assert_true(skipped == n_other);
        assert_non_null(strstr(log, "another model"));
        assert_string_equal(text, cold);
        free(text);
        free(log);
    }

    free(cold);
    free(warm);
    free(reply);
    sh("rm -rf '%s'%s", dir, "");
}

/*
 * A hybrid model (Gated DeltaNet layers beside attention) resumes only
 * from a saved recurrent state. With two states per slot, the second
 * conversation's states push the first's out of the slot's own room; the
 * cache's own room (--cache-ram) keeps them, charged to its cap with the
 * blocks, so going back to the first conversation is warm.
 */
static void hybrid_states_kept(const char *model)
{
    TU_MODEL_OR_SKIP(model_path, model);
    (void)model_path;
    double back[2];
    for (int c = 0; c < 2; c++) {
        struct srv s;
        const char *extra[] = {
            "--parallel", "1",           "-c",           "512", "--ctx-checkpoints",
            "2",          "--cache-ram", c ? "0" : "8M", NULL};
        srv_start_opt(&s, tu_model(model), extra, true);
        int n, k;
        free(complete(&s, srv_long_story, &n, &k));
        assert_int_equal(k, 0);
        char other[2048];
        snprintf(other, sizeof other, "A different story. %s", srv_long_story);
        free(complete(&s, other, &n, &k));
        assert_int_equal(k, 0);
        free(complete(&s, srv_long_story, &n, &k));
        back[c] = k;
        if (!c)
            assert_true(metric(&s, "hearth_cache_ram_bytes") <=
                        metric(&s, "hearth_cache_ram_cap_bytes"));
        srv_stop(&s);
    }
    print_message("%s back to the first conversation: cached_tokens %g with the cache's own "
                  "room, %g without\n",
                  model, back[0], back[1]);
    assert_true(back[0] >= 128); /* ~190 tokens in this vocabulary: a state at 160 */
    assert_true(back[1] == 0);
}

/* qwen35moe: routed experts after each mixer */
static void test_cache_keeps_a_hybrid_models_states(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    hybrid_states_kept("tiny-qwen35moe-bpe-q8_0.gguf");
}

/* qwen35: the same mixers with a dense FFN */
static void test_cache_keeps_a_dense_hybrid_models_states(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    hybrid_states_kept("tiny-qwen35-bpe-q8_0.gguf");
}

/* A disk tier of two files keeps the last two blocks written; a model it cannot hold is refused. */
static void test_cache_disk_holds_its_cap(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    char dir[] = "/tmp/hearth-cache-XXXXXX";
    assert_non_null(mkdtemp(dir));
    struct srv s;
    const char *extra[] = {"--parallel",  "1", "-c",           "512", "--cache-ram", "100K",
                           "--cache-dir", dir, "--cache-disk", "50K", NULL};
    srv_start(&s, extra);
    int n, c;
    free(complete(&s, srv_long_story, &n, &c));
    const double file = 20680; /* a block file of stories260K: header, 32 tokens, rows, sum */
    assert_true(metric(&s, "hearth_cache_disk_cap_bytes") == 2 * file);
    assert_true(metric(&s, "hearth_cache_disk_written_blocks_total") == 4);
    assert_true(metric(&s, "hearth_cache_disk_evicted_blocks_total") == 2);
    assert_true(metric(&s, "hearth_cache_disk_bytes") == 2 * file);
    srv_stop(&s);
    assert_int_equal(files_in(dir), 2);

    char *log = NULL;
    if (tu_model("tiny-qwen35moe-bpe-q8_0.gguf")) { /* a model of the shared test data */
        assert_false(srv_start_try(&s, tu_model("tiny-qwen35moe-bpe-q8_0.gguf"), extra, &log));
        assert_non_null(strstr(log, "disk tier"));
        free(log);
    } else {
        print_message("skip: a recurrent model's refusal: tiny-qwen35moe-bpe-q8_0.gguf is in "
                      "neither models/ nor shared/models\n");
    }
    const char *nowhere[] = {"--cache-dir", "/nonexistent/hearth/cache", "--cache-disk", "1M",
                             NULL};
    assert_false(srv_start_try(&s, tu_model(SRV_MODEL), nowhere, &log));
    assert_non_null(strstr(log, "cannot make /nonexistent/hearth/cache"));
    free(log);
    const char *argv[] = {tu_bin(), "serve", "-m", tu_model(SRV_MODEL), "--cache-disk", "1G", NULL};
    char *out = NULL, *err = NULL;
    assert_int_equal(tu_run(argv, NULL, &out, &err, 60), 2);
    assert_non_null(strstr(err, "--cache-dir"));
    free(out);
    free(err);
    sh("rm -rf '%s'%s", dir, "");
}

static void test_cache_ram_takes_sizes_and_refuses_the_rest(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    static const char *const bad[] = {"-1", "12X", "G", "1.5Q", ""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const char *argv[] = {tu_bin(),      "serve", "-m", tu_model("stories260K.gguf"),
                              "--cache-ram", bad[i],  NULL};
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

/*
 * A chat on a random-weight model, whose replies do not tokenize back to
 * the tokens it generated: the client resends each reply as text. With
 * --reply-tokens own (the default) the next turn reuses all of the last
 * one but its final token, whose K/V was never computed; with text it
 * reuses less, the reply computed again. Three turns, so the second
 * reply's prompt carries the first reply too.
 */
static void chat_turns(const char *mode, int cached[3], int prompt[3], int completion[3],
                       double *spliced)
{
    struct srv s;
    const char *extra[] = {"--parallel", "1", "-c", "1024", "--reply-tokens", mode, NULL};
    srv_start_opt(&s, tu_model("tiny-qwen3-bpe-q8_0.gguf"), extra, true);
    cJSON *msgs = cJSON_CreateArray();
    cJSON *m    = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", "system");
    cJSON_AddStringToObject(m, "content", "You are a terse agent. Read the files, then answer.");
    cJSON_AddItemToArray(msgs, m);
    for (int k = 0; k < 3; k++) {
        char user[64];
        snprintf(user, sizeof user, "What happened at step %d?", k);
        m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", "user");
        cJSON_AddStringToObject(m, "content", user);
        cJSON_AddItemToArray(msgs, m);
        cJSON *body = cJSON_CreateObject();
        cJSON_AddItemReferenceToObject(body, "messages", msgs);
        cJSON_AddNumberToObject(body, "max_tokens", 24);
        cJSON_AddNumberToObject(body, "temperature", 0);
        char *b = cJSON_PrintUnformatted(body);
        cJSON_Delete(body);
        struct http_resp r = http_post(&s, "/v1/chat/completions", b);
        free(b);
        assert_int_equal(r.status, 200);
        cJSON *j       = http_json(&r);
        const cJSON *u = jget(j, "usage");
        cached[k]      = (int)jnum(jget(u, "prompt_tokens_details"), "cached_tokens");
        prompt[k]      = (int)jnum(u, "prompt_tokens");
        completion[k]  = (int)jnum(u, "completion_tokens");
        const cJSON *c =
            jget(jget(cJSON_GetArrayItem(jget(j, "choices"), 0), "message"), "content");
        m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", "assistant");
        cJSON_AddStringToObject(m, "content", cJSON_GetStringValue(c));
        cJSON_AddItemToArray(msgs, m);
        cJSON_Delete(j);
        http_resp_free(&r);
    }
    cJSON_Delete(msgs);
    *spliced = metric(&s, "hearth_reply_tokens_spliced_prompts_total");
    srv_stop(&s);
}

static void test_a_resent_reply_is_reused_in_its_own_tokens(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    if (!tu_model("tiny-qwen3-bpe-q8_0.gguf")) {
        print_message("skip: tiny-qwen3-bpe-q8_0.gguf not found\n");
        skip();
    }
    int cached[2][3], prompt[2][3], completion[2][3];
    double spliced[2];
    chat_turns("own", cached[0], prompt[0], completion[0], &spliced[0]);
    chat_turns("text", cached[1], prompt[1], completion[1], &spliced[1]);
    for (int k = 1; k < 3; k++) {
        print_message("turn %d: cached_tokens %d of %d (own), %d of %d (text); the turn before: "
                      "%d + %d\n",
                      k, cached[0][k], prompt[0][k], cached[1][k], prompt[1][k], prompt[0][k - 1],
                      completion[0][k - 1]);
        assert_int_equal(cached[0][k], prompt[0][k - 1] + completion[0][k - 1] - 1);
    }
    /* the first reply does not tokenize back to its tokens: text computes some of it again */
    assert_int_equal(prompt[1][0] + completion[1][0], prompt[0][0] + completion[0][0]);
    assert_true(cached[1][1] < cached[0][1]);
    assert_true(spliced[0] == 2);
    assert_true(spliced[1] == 0);
    /* the first turn is the same either way */
    assert_int_equal(prompt[0][0], prompt[1][0]);
    assert_int_equal(cached[0][0], cached[1][0]);
    const char *argv[] = {tu_bin(),         "serve",     "-m", tu_model(SRV_MODEL),
                          "--reply-tokens", "canonical", NULL};
    char *out = NULL, *err = NULL;
    assert_int_equal(tu_run(argv, NULL, &out, &err, 60), 2);
    assert_non_null(strstr(err, "--reply-tokens takes own or text"));
    free(out);
    free(err);
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
        cmocka_unit_test_teardown(test_cache_disk_tier_survives_a_restart, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_cache_disk_holds_its_cap, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_cache_keeps_a_hybrid_models_states, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_cache_keeps_a_dense_hybrid_models_states,
                                  srv_kill_leftovers),
        cmocka_unit_test_teardown(test_a_resent_reply_is_reused_in_its_own_tokens,
                                  srv_kill_leftovers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
