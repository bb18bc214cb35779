/*
 * test_spec.c: speculative decoding in `hearth serve` (--spec ngram), end
 * to end. The judge is `hearth bench --compare` against a server without
 * speculation: the texts must be identical, byte for byte, on echo-shaped
 * prompts where the drafter proposes (and on prose where it rarely does),
 * on stories260K (F32) and on a quantized model; /metrics must show drafts
 * proposed and accepted, so the comparison is not vacuous. At temperature 1
 * the same seed must give the same text with and without speculation
 * (stronger than the same distribution: hearth samples each verified
 * position with the same draws plain decoding makes). Models with
 * recurrent layers are refused, with the reason, until their state can be
 * cut back to a drafted position.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/serveutil.h"
#include "util/testutil.h"

/* Echoed text (the drafter's case) and plain openings. */
static const char prompts[] =
    "Lily had a red ball. Lily had a red ball. Lily had a red ball. Lily had a\n"
    "1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2, 3,\n"
    "Tom said: \"I like the sun.\" Tom said: \"I like the sun.\" Tom said:\n"
    "name: Tim, age: 3; name: Sue, age: 4; name: Bob, age: 5; name:\n"
    "The cat sat on the mat. The dog sat on the log. The cat sat on the\n"
    "Once upon a time\n"
    "One day, a big bird\n";

static const char *const plain_args[] = {"--parallel", "2", "--ctx-size", "512", NULL};
static const char *const spec_args[]  = {"--parallel", "2", "--ctx-size", "512", "--spec",
                                         "ngram", "--draft-max", "8", NULL};

/* A counter of /metrics (its unlabelled sample). */
static double metric(const struct srv *s, const char *name)
{
    struct http_resp r = http_get(s, "/metrics");
    assert_int_equal(r.status, 200);
    char key[128];
    snprintf(key, sizeof key, "\n%s ", name);
    const char *p = strstr(r.body, key);
    if (!p)
        fail_msg("/metrics has no %s:\n%s", name, r.body);
    double v = strtod(p + strlen(key), NULL);
    http_resp_free(&r);
    return v;
}

/* hearth bench A --compare B with the prompts above; its exit status, output printed. */
static int compare(const struct srv *a, const struct srv *b, const char *max_tokens)
{
    char *dir = tu_tmpdir();
    char path[512];
    snprintf(path, sizeof path, "%s/prompts.txt", dir);
    assert_int_equal(tu_write_file(path, prompts, strlen(prompts)), 0);
    const char *argv[] = {tu_bin(), "bench",     a->base,    "--compare", b->base,
                          "--prompts", path,     "--max-tokens", max_tokens, NULL};
    char *out = NULL, *err = NULL;
    int rc    = tu_run(argv, NULL, &out, &err, 600);
    print_message("%s%s", out ? out : "", err ? err : "");
    if (rc == 0 && !strstr(out, "7 prompts: 7 identical"))
        fail_msg("exit 0 without 7 identical prompts");
    free(out);
    free(err);
    tu_rmtree(dir);
    free(dir);
    return rc;
}

/* The same greedy text with and without drafting, and the drafter did propose and land. */
static void same_text(const char *model, const char *max_tokens)
{
    struct srv plain, spec;
    srv_start_opt(&plain, model, plain_args, true);
    srv_start_opt(&spec, model, spec_args, true);
    assert_int_equal(compare(&plain, &spec, max_tokens), 0);
    double drafted   = metric(&spec, "hearth_spec_drafted_tokens_total");
    double accepted  = metric(&spec, "hearth_spec_accepted_tokens_total");
    double forwards  = metric(&spec, "hearth_decode_forwards_total");
    double generated = metric(&spec, "hearth_generated_tokens_total");
    print_message("%s: %.0f drafted, %.0f accepted, %.0f forwards for %.0f tokens\n", model,
                  drafted, accepted, forwards, generated);
    assert_true(drafted > 0);
    assert_true(accepted > 0 && accepted <= drafted);
    /* each accepted draft is a token that took no forward pass of its own */
    assert_true(forwards + accepted <= generated);
    assert_true(metric(&plain, "hearth_spec_drafted_tokens_total") == 0);
    srv_stop(&plain);
    srv_stop(&spec);
}

static void test_greedy_identical_stories(void **state)
{
    SRV_NEED_CURL_AND_MODEL();
    same_text(tu_model(SRV_MODEL), "160");
}

/* A quantized model: the verified rows go through the batched kernels, plain decode does not. */
static void test_greedy_identical_quantized(void **state)
{
    SRV_NEED_CURL_AND_MODEL();
    TU_MODEL_OR_SKIP(path, "tiny-llama-spm-q4_0.gguf");
    same_text(path, "64");
}

/* Temperature 1, top-k and top-p: a seed gives the same text with and without drafting. */
static void test_sampled_same_per_seed(void **state)
{
    SRV_NEED_CURL_AND_MODEL();
    struct srv plain, spec;
    srv_start(&plain, plain_args);
    srv_start(&spec, spec_args);
    for (int seed = 1; seed <= 6; seed++) {
        char body[512];
        snprintf(body, sizeof body,
                 "{\"prompt\":\"Lily had a red ball. Lily had a red ball. Lily had a\","
                 "\"max_tokens\":96,\"temperature\":1,\"top_k\":40,\"top_p\":0.9,\"seed\":%d}",
                 seed);
        struct http_resp a = http_post(&plain, "/v1/completions", body);
        struct http_resp b = http_post(&spec, "/v1/completions", body);
        cJSON *ja = http_json(&a), *jb = http_json(&b);
        const char *ta = jstr(cJSON_GetArrayItem(jget(ja, "choices"), 0), "text");
        const char *tb = jstr(cJSON_GetArrayItem(jget(jb, "choices"), 0), "text");
        assert_non_null(ta);
        assert_non_null(tb);
        if (strcmp(ta, tb))
            fail_msg("seed %d: the texts differ\nplain: %s\nspec:  %s", seed, ta, tb);
        cJSON_Delete(ja);
        cJSON_Delete(jb);
        http_resp_free(&a);
        http_resp_free(&b);
    }
    assert_true(metric(&spec, "hearth_spec_accepted_tokens_total") > 0);
    /* /slots says what each slot drafted and kept */
    struct http_resp r = http_get(&spec, "/slots");
    cJSON *slots       = http_json(&r);
    for (int i = 0; i < cJSON_GetArraySize(slots); i++) { /* idle now: the fields are there */
        assert_true(jnum(cJSON_GetArrayItem(slots, i), "draft_n") >= 0);
        assert_true(jnum(cJSON_GetArrayItem(slots, i), "draft_n_accepted") >= 0);
    }
    cJSON_Delete(slots);
    http_resp_free(&r);
    srv_stop(&plain);
    srv_stop(&spec);
}

/* A recurrent model is refused at start with the reason; a bad --spec is a usage error. */
static void test_refusals(void **state)
{
    SRV_NEED_CURL_AND_MODEL();
    TU_MODEL_OR_SKIP(path, "tiny-qwen35moe-bpe-q8_0.gguf");
    struct srv s;
    char *log                = NULL;
    const char *const args[] = {"--spec", "ngram", NULL};
    assert_false(srv_start_try(&s, path, args, &log));
    print_message("%s", log);
    assert_non_null(strstr(log, "speculative decoding is not available for qwen35moe"));
    free(log);
    const char *argv[] = {tu_bin(), "serve", "-m", "x.gguf", "--spec", "draft", NULL};
    char *out = NULL, *err = NULL;
    assert_int_equal(tu_run(argv, NULL, &out, &err, 60), 2);
    assert_non_null(strstr(err, "--spec takes ngram or none"));
    free(out);
    free(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_greedy_identical_stories, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_greedy_identical_quantized, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_sampled_same_per_seed, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_refusals, srv_kill_leftovers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
