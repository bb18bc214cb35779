/*
 * test_slots.c: llama-server's slot actions on `hearth serve`: POST
 * /slots/{id}?action=save|restore|erase under --slot-save-path. A saved
 * conversation restored into a new server is found by the next turn
 * (cached_tokens) and continues with the same greedy text; names outside the
 * directory, damaged files and another model's files are refused, and the
 * server serves on.
 *
 * stories260K keeps 32-token blocks: the first turn here is 45 prompt tokens
 * and 8 generated, so the slot holds 52 tokens (the last one sampled is not
 * computed) and one whole block is cached.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/serveutil.h"

static const char turn1[] = "Once upon a time there was a little dog named Max. Max liked to run "
                            "in the park with his friend Lily. One day";

/* A completion of prompt (8 greedy tokens): its text (malloc'd) and cached_tokens. */
static char *complete(const struct srv *s, const char *prompt, int *cached, int *n_prompt)
{
    char body[2048];
    snprintf(body, sizeof body, "{\"prompt\":\"%s\",\"max_tokens\":8,\"temperature\":0}", prompt);
    struct http_resp r = http_post(s, "/v1/completions", body);
    assert_int_equal(r.status, 200);
    cJSON *j       = http_json(&r);
    const cJSON *u = jget(j, "usage");
    if (cached)
        *cached = (int)jnum(jget(u, "prompt_tokens_details"), "cached_tokens");
    if (n_prompt)
        *n_prompt = (int)jnum(u, "prompt_tokens");
    const cJSON *c = cJSON_GetArrayItem(jget(j, "choices"), 0);
    char *text     = strdup(jstr(c, "text"));
    cJSON_Delete(j);
    http_resp_free(&r);
    return text;
}

/* POST /slots/0?action=ACTION with body; the answer as JSON when status is 200. */
static cJSON *action(const struct srv *s, const char *act, const char *body, int status)
{
    char path[64];
    snprintf(path, sizeof path, "/slots/0?action=%s", act);
    struct http_resp r = http_post(s, path, body);
    cJSON *j           = NULL;
    if (status == 200) {
        if (r.status != 200)
            print_message("%s\n", r.body);
        assert_int_equal(r.status, 200);
        j = http_json(&r);
    } else {
        free(http_check_error(&r, status, NULL));
    }
    http_resp_free(&r);
    return j;
}

static char *make_dir(void)
{
    char *dir = strdup("/tmp/hearth-slots-XXXXXX");
    assert_non_null(mkdtemp(dir));
    return dir;
}

static void remove_dir(char *dir)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
    free(dir);
}

/*
 * The first turn, saved; the second turn on the same server gives the
 * reference. A new server restores the file and gives the second turn again:
 * the same text, with the restored block reused. A third server, with nothing
 * restored, computes it all.
 */
static void test_restored_slot_continues_the_conversation(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    char *dir           = make_dir();
    const char *extra[] = {"--parallel", "1", "-c", "256", "--slot-save-path", dir, NULL};
    struct srv s;
    srv_start(&s, extra);
    int cached, n_prompt;
    char *reply = complete(&s, turn1, &cached, &n_prompt);
    assert_int_equal(cached, 0);
    cJSON *j = action(&s, "save", "{\"filename\":\"conv.bin\"}", 200);
    assert_int_equal((int)jnum(j, "id_slot"), 0);
    assert_string_equal(jstr(j, "filename"), "conv.bin");
    const int n_saved = (int)jnum(j, "n_saved");
    assert_int_equal(n_saved, n_prompt + 8 - 1);
    assert_true(jnum(j, "n_written") > n_saved * 640);
    assert_true(jnum(jget(j, "timings"), "save_ms") >= 0);
    cJSON_Delete(j);
    char turn2[1024];
    snprintf(turn2, sizeof turn2, "%s%s and the dog", turn1, reply);
    int cached_ref;
    char *want = complete(&s, turn2, &cached_ref, NULL);
    /* the first turn, and its reply as far as it tokenizes the same */
    assert_in_range(cached_ref, n_prompt, n_saved);
    srv_stop(&s);

    srv_start(&s, extra);
    j = action(&s, "restore", "{\"filename\":\"conv.bin\"}", 200);
    assert_int_equal((int)jnum(j, "n_restored"), n_saved);
    assert_string_equal(jstr(j, "filename"), "conv.bin");
    cJSON_Delete(j);
    int cached_back;
    char *got = complete(&s, turn2, &cached_back, NULL);
    print_message("second turn: cached_tokens %d after the restore, %d on the first server; "
                  "'%s'\n",
                  cached_back, cached_ref, got);
    assert_int_equal(cached_back, cached_ref);
    assert_string_equal(got, want);
    free(got);
    srv_stop(&s);

    srv_start(&s, extra);
    got = complete(&s, turn2, &cached_back, NULL);
    assert_int_equal(cached_back, 0);
    assert_string_equal(got, want);
    free(got);
    srv_stop(&s);
    free(want);
    free(reply);
    remove_dir(dir);
}

/* An action asked for while the slot generates waits for the job to end. */
static void test_save_waits_for_the_running_job(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    char *dir           = make_dir();
    const char *extra[] = {"--parallel", "1", "-c", "256", "--slot-save-path", dir, NULL};
    struct srv s;
    srv_start_gated(&s, extra);
    char gen[600], saved[600];
    snprintf(gen, sizeof gen, "%s/gen.txt", s.dir);
    snprintf(saved, sizeof saved, "%s/save.txt", s.dir);
    pid_t g = http_post_bg(&s, "/v1/completions",
                           "{\"prompt\":\"Once upon a time\",\"max_tokens\":6,\"ignore_eos\":true,"
                           "\"temperature\":0}",
                           gen, "120");
    srv_gate_steps(&s, 2);
    srv_wait_generated(&s, 2); /* the slot is busy: the gate holds it */
    pid_t a = http_post_bg(&s, "/slots/0?action=save", "{\"filename\":\"mid.bin\"}", saved, "120");
    srv_gate_lift(&s);
    assert_int_equal(srv_wait_pid(g, 60), 0);
    assert_int_equal(srv_wait_pid(a, 60), 0);
    char *body = srv_slurp(saved);
    cJSON *j   = cJSON_Parse(body);
    assert_non_null(j);
    /* BOS and 4 prompt tokens, 6 generated of which the last is not computed */
    assert_int_equal((int)jnum(j, "n_saved"), 5 + 6 - 1);
    cJSON_Delete(j);
    free(body);
    srv_stop(&s);
    remove_dir(dir);
}

static void test_slot_actions_refuse_bad_input(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    char *dir           = make_dir();
    const char *extra[] = {"--parallel", "1", "-c", "256", "--slot-save-path", dir, NULL};
    struct srv s;
    srv_start(&s, extra);
    cJSON_Delete(action(&s, "save", "{\"filename\":\"empty.bin\"}", 400)); /* nothing yet */
    free(complete(&s, turn1, NULL, NULL));
    static const char *const names[] = {"{\"filename\":\"../x.bin\"}",
                                        "{\"filename\":\"a/b\"}",
                                        "{\"filename\":\"..\"}",
                                        "{\"filename\":\"\"}",
                                        "{\"filename\":7}",
                                        "{}",
                                        "{\"filename\":\"x\",\"y\":1}",
                                        "[1]"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        cJSON_Delete(action(&s, "save", names[i], 400));
    cJSON_Delete(action(&s, "fly", "{\"filename\":\"x.bin\"}", 400));
    struct http_resp r = http_post(&s, "/slots/9?action=save", "{\"filename\":\"x.bin\"}");
    free(http_check_error(&r, 400, NULL));
    http_resp_free(&r);
    r = http_get(&s, "/slots/0?action=save");
    assert_int_equal(r.status, 405);
    http_resp_free(&r);

    /* damaged files: cut short, a flipped byte, another model's */
    cJSON_Delete(action(&s, "save", "{\"filename\":\"good.bin\"}", 200));
    char path[512], cmd[1400];
    snprintf(path, sizeof path, "%s/good.bin", dir);
    snprintf(cmd, sizeof cmd,
             "head -c 1000 '%s' > '%s/short.bin' && cp '%s' '%s/flip.bin' && "
             "printf '\\x55' | dd of='%s/flip.bin' bs=1 seek=3000 conv=notrunc status=none",
             path, dir, path, dir, dir);
    assert_int_equal(system(cmd), 0);
    static const char *const bad[] = {"short.bin", "flip.bin", "missing.bin"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char body[128];
        snprintf(body, sizeof body, "{\"filename\":\"%s\"}", bad[i]);
        cJSON_Delete(action(&s, "restore", body, 400));
    }
    cJSON *j = action(&s, "erase", NULL, 200);
    assert_true(jnum(j, "n_erased") > 0);
    cJSON_Delete(j);
    j = action(&s, "erase", "", 200);
    assert_int_equal((int)jnum(j, "n_erased"), 0);
    cJSON_Delete(j);
    cJSON_Delete(action(&s, "save", "{\"filename\":\"gone.bin\"}", 400)); /* erased */
    int cached;
    free(complete(&s, turn1, &cached, NULL)); /* serves on */
    srv_stop(&s);

    /* the same file into a server of another model, and a recurrent model's slots, which
     * cannot be saved yet (said at start): models of the shared test data */
    struct srv o;
    if (tu_model("tiny-llama-spm-q8_0.gguf") && tu_model("tiny-qwen35moe-bpe-q8_0.gguf")) {
        srv_start_opt(&o, tu_model("tiny-llama-spm-q8_0.gguf"), extra, true);
        struct http_resp rr =
            http_post(&o, "/slots/0?action=restore", "{\"filename\":\"good.bin\"}");
        char *msg = http_check_error(&rr, 400, NULL);
        assert_non_null(strstr(msg, "kv file"));
        free(msg);
        http_resp_free(&rr);
        srv_stop(&o);
        char *log = NULL;
        assert_false(srv_start_try(&o, tu_model("tiny-qwen35moe-bpe-q8_0.gguf"), extra, &log));
        assert_non_null(strstr(log, "slots cannot be saved (--slot-save-path)"));
        free(log);
    } else {
        print_message("skip: another model's server: tiny-llama-spm-q8_0.gguf or "
                      "tiny-qwen35moe-bpe-q8_0.gguf is in neither models/ nor shared/models\n");
    }
    const char *argv[] = {
        tu_bin(), "serve", "-m", tu_model(SRV_MODEL), "--slot-save-path", "/nonexistent/dir", NULL};
    char *out = NULL, *err = NULL;
    assert_int_equal(tu_run(argv, NULL, &out, &err, 60), 2);
    assert_non_null(strstr(err, "is not a directory"));
    free(out);
    free(err);

    /* without --slot-save-path: save and restore are not offered */
    const char *plain[] = {"--parallel", "1", "-c", "256", NULL};
    srv_start(&s, plain);
    cJSON_Delete(action(&s, "save", "{\"filename\":\"x.bin\"}", 501));
    cJSON_Delete(action(&s, "restore", "{\"filename\":\"x.bin\"}", 501));
    srv_stop(&s);
    remove_dir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_restored_slot_continues_the_conversation,
                                  srv_kill_leftovers),
        cmocka_unit_test_teardown(test_save_waits_for_the_running_job, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_slot_actions_refuse_bad_input, srv_kill_leftovers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
