/*
 * test_fields.c: the request field policy of `hearth serve`, end to end on
 * the real binary (tests/util/serveutil.h), with a Qwen3 model and Qwen3's
 * own template:
 *
 * - a field that changes nothing (storage, metadata, caching hints, an
 *   unknown field) is answered 200 with the same greedy text as without it,
 *   logged once per name and counted in hearth_ignored_request_fields_total;
 *   --strict-fields refuses the unknown ones with a 400 naming them;
 * - the fields that change the reply do: logit_bias, reasoning_effort
 *   "none" (thinking closed in the prompt), cache_prompt false (no prefix
 *   reuse), timings_per_token (timings in every chunk), -n (the server's
 *   cap on a request that gives none), --logit-bias (every request's,
 *   unless it biases the token itself), --tool-choice (a turn's first
 *   request steered, the one carrying the tool's result left alone).
 *
 * Greedy decoding makes every comparison exact; nothing rests on timing.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/serveutil.h"

#define QWEN3     "models/tiny-qwen3-bpe-q8_0.gguf"
#define QWEN3_TPL "templates/Qwen-Qwen3-0.6B.jinja"

/* Starts the Qwen3 server with extra options after the template's (NULL-terminated, <= 6). */
static bool start_qwen3(struct srv *s, const char *const *more)
{
    const char *m = tu_shared(QWEN3);
    if (!m) {
        print_message("skip: %s not found (set HEARTH_SHARED or put shared/ beside the "
                      "checkout)\n",
                      QWEN3);
        return false;
    }
    static char model[4096], tpl[4096];
    snprintf(model, sizeof model, "%s", m);
    const char *t = tu_shared(QWEN3_TPL);
    if (!t) {
        print_message("skip: %s not found\n", QWEN3_TPL);
        return false;
    }
    snprintf(tpl, sizeof tpl, "%s", t);
    const char *extra[10] = {"--chat-template-file", tpl};
    int n                 = 2;
    for (int i = 0; more && more[i] && n < 9; i++)
        extra[n++] = more[i];
    extra[n] = NULL;
    srv_start_opt(s, model, extra, true);
    return true;
}

/* The content of a chat answer (status 200 asserted), malloc'd. */
static char *chat_content(const struct srv *s, const char *body)
{
    struct http_resp r = http_post(s, "/v1/chat/completions", body);
    if (r.status != 200)
        print_message("%d: %s\n", r.status, r.body);
    assert_int_equal(r.status, 200);
    cJSON *j         = http_json(&r);
    const cJSON *msg = jget(cJSON_GetArrayItem(jget(j, "choices"), 0), "message");
    const char *c    = jstr(msg, "content");
    char *out        = strdup(c ? c : "");
    cJSON_Delete(j);
    http_resp_free(&r);
    return out;
}

/* s without the whitespace at its ends (the reply's content is trimmed so), in place. */
static char *trim(char *s)
{
    size_t n = strlen(s), a = 0;
    while (n > 0 && strchr(" \t\n", s[n - 1]))
        s[--n] = 0;
    while (s[a] && strchr(" \t\n", s[a]))
        a++;
    memmove(s, s + a, n - a + 1);
    return s;
}

/* Occurrences of needle in hay. */
static int count_of(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

#define MSG "\"messages\":[{\"role\":\"user\",\"content\":\"Say something.\"}]"

static void test_ignored_fields_change_nothing(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    struct srv s;
    if (!start_qwen3(&s, NULL))
        skip();
    char *plain = chat_content(&s, "{" MSG ",\"temperature\":0,\"max_tokens\":12}");
    static const char loaded[] =
        "{" MSG ",\"temperature\":0,\"max_tokens\":12,\"store\":false,"
        "\"metadata\":{\"session\":\"abc\"},\"prompt_cache_key\":\"k1\","
        "\"safety_identifier\":\"u-1\",\"service_tier\":\"auto\",\"modalities\":[\"text\"],"
        "\"verbosity\":\"low\",\"prediction\":{\"type\":\"content\",\"content\":\"x\"},"
        "\"web_search_options\":{},\"audio\":null,\"user\":\"u\",\"return_progress\":true,"
        "\"client_bookkeeping_v9\":{\"trace\":[1,2,3]}}";
    for (int round = 0; round < 2; round++) {
        char *got = chat_content(&s, loaded);
        assert_string_equal(got, plain);
        free(got);
    }
    free(plain);
    struct http_resp m = http_get(&s, "/metrics");
    assert_int_equal(m.status, 200);
    assert_non_null(
        strstr(m.body, "hearth_ignored_request_fields_total{api=\"openai\",field=\"store\"} 2\n"));
    assert_non_null(strstr(m.body, "hearth_ignored_request_fields_total{api=\"openai\","
                                   "field=\"client_bookkeeping_v9\"} 2\n"));
    http_resp_free(&m);
    char *log = srv_slurp(s.log);
    assert_int_equal(count_of(log, "ignoring openai request field 'client_bookkeeping_v9' "
                                   "(unknown here)"),
                     1);
    assert_int_equal(count_of(log, "ignoring openai request field 'store' (no effect here)"), 1);
    free(log);
    /* what would give a wrong answer is still refused, by name */
    struct http_resp r =
        http_post(&s, "/v1/chat/completions", "{" MSG ",\"modalities\":[\"text\",\"audio\"]}");
    free(http_check_error(&r, 400, "modalities"));
    http_resp_free(&r);
    srv_stop(&s);
}

static void test_strict_fields_refuses_unknown_ones(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    struct srv s;
    const char *more[] = {"--strict-fields", NULL};
    if (!start_qwen3(&s, more))
        skip();
    struct http_resp r = http_post(&s, "/v1/chat/completions",
                                   "{" MSG ",\"max_tokens\":2,\"client_bookkeeping_v9\":1}");
    char *msg          = http_check_error(&r, 400, "client_bookkeeping_v9");
    assert_non_null(strstr(msg, "client_bookkeeping_v9"));
    free(msg);
    http_resp_free(&r);
    /* a field OpenAI defines that changes nothing here is still fine */
    free(chat_content(&s, "{" MSG ",\"max_tokens\":2,\"store\":true}"));
    /* Anthropic's error shape names it too */
    r = http_post(&s, "/v1/messages",
                  "{\"model\":\"m\",\"max_tokens\":2," MSG ",\"client_bookkeeping_v9\":1}");
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(r.body, "client_bookkeeping_v9: Extra inputs are not permitted"));
    http_resp_free(&r);
    srv_stop(&s);
}

static void test_honoured_fields_change_the_reply(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    struct srv s;
    const char *more[] = {"-n", "5", "--logit-bias", "1002+50", NULL};
    if (!start_qwen3(&s, more))
        skip();

    /* logit_bias: +100 makes a token the greedy pick, -100 bans it */
    struct http_resp d = http_post(&s, "/detokenize", "{\"tokens\":[1000]}");
    assert_int_equal(d.status, 200);
    cJSON *dj   = http_json(&d);
    char *t1000 = strdup(jstr(dj, "content"));
    cJSON_Delete(dj);
    http_resp_free(&d);
    d           = http_post(&s, "/detokenize", "{\"tokens\":[1001]}");
    dj          = http_json(&d);
    char *t1001 = strdup(jstr(dj, "content"));
    cJSON_Delete(dj);
    http_resp_free(&d);
    char *got = chat_content(&s, "{" MSG ",\"temperature\":0,\"max_tokens\":1,"
                                 "\"logit_bias\":{\"1000\":100,\"1001\":99}}");
    assert_string_equal(got, trim(t1000));
    free(got);
    got = chat_content(&s, "{" MSG ",\"temperature\":0,\"max_tokens\":1,"
                           "\"logit_bias\":{\"1000\":-100,\"1001\":99}}");
    assert_string_equal(got, trim(t1001));
    free(got);
    /* the server's --logit-bias 1002+50 applies to every request; a request's own entry for
     * the token wins over it */
    d           = http_post(&s, "/detokenize", "{\"tokens\":[1002]}");
    dj          = http_json(&d);
    char *t1002 = strdup(jstr(dj, "content"));
    cJSON_Delete(dj);
    http_resp_free(&d);
    got = chat_content(&s, "{" MSG ",\"temperature\":0,\"max_tokens\":1}");
    assert_string_equal(got, trim(t1002));
    free(got);
    got = chat_content(&s, "{" MSG ",\"temperature\":0,\"max_tokens\":1,"
                           "\"logit_bias\":{\"1002\":-100,\"1001\":99}}");
    assert_string_equal(got, t1001);
    free(got);
    free(t1000);
    free(t1001);
    free(t1002);
    struct http_resp r =
        http_post(&s, "/v1/chat/completions", "{" MSG ",\"logit_bias\":{\"99999999\":1}}");
    free(http_check_error(&r, 400, "logit_bias"));
    http_resp_free(&r);

    /* -n 5: a request that gives no limit (or a larger one) gets five tokens */
    for (int i = 0; i < 2; i++) {
        r = http_post(&s, "/v1/chat/completions",
                      i ? "{" MSG ",\"temperature\":0,\"max_tokens\":32000}"
                        : "{" MSG ",\"temperature\":0}");
        assert_int_equal(r.status, 200);
        cJSON *j = http_json(&r);
        assert_int_equal((int)jnum(jget(j, "usage"), "completion_tokens"), 5);
        cJSON_Delete(j);
        http_resp_free(&r);
    }

    /* reasoning_effort none: Qwen3's template closes the thinking block in the prompt */
    r = http_post(&s, "/apply-template", "{" MSG ",\"reasoning_effort\":\"none\"}");
    assert_int_equal(r.status, 200);
    cJSON *j      = http_json(&r);
    const char *p = jstr(j, "prompt");
    assert_non_null(p);
    size_t n                   = strlen(p);
    static const char closed[] = "<|im_start|>assistant\n<think>\n\n</think>\n\n";
    assert_true(n >= sizeof closed - 1);
    assert_string_equal(p + n - (sizeof closed - 1), closed);
    cJSON_Delete(j);
    http_resp_free(&r);

    /* cache_prompt false: the same prompt again is computed, not reused */
    static const char again[] =
        "{\"messages\":[{\"role\":\"user\",\"content\":\"A longer prompt, so that whole KV "
        "blocks of it are cached after the first request has run through it once.\"}],"
        "\"temperature\":0,\"max_tokens\":1%s}";
    char body[512];
    int cached[3];
    for (int i = 0; i < 3; i++) {
        snprintf(body, sizeof body, again, i == 2 ? ",\"cache_prompt\":false" : "");
        r = http_post(&s, "/v1/chat/completions", body);
        assert_int_equal(r.status, 200);
        j         = http_json(&r);
        cached[i] = (int)jnum(jget(jget(j, "usage"), "prompt_tokens_details"), "cached_tokens");
        cJSON_Delete(j);
        http_resp_free(&r);
    }
    print_message("cached tokens: %d, %d, then %d with cache_prompt false\n", cached[0], cached[1],
                  cached[2]);
    assert_true(cached[1] > 0);
    assert_int_equal(cached[2], 0);

    /* timings_per_token: every chunk with a choice carries llama-server's timings */
    r = http_post(&s, "/v1/chat/completions",
                  "{" MSG ",\"temperature\":0,\"stream\":true,\"timings_per_token\":true}");
    assert_int_equal(r.status, 200);
    cJSON *ev = sse_events(r.body);
    int with  = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, ev)
    {
        if (cJSON_GetArraySize(cJSON_GetObjectItem(c, "choices")) > 0) {
            assert_non_null(cJSON_GetObjectItem(c, "timings"));
            with++;
        }
    }
    assert_true(with >= 5);
    cJSON_Delete(ev);
    http_resp_free(&r);
    srv_stop(&s);
}

/* clang-format off */
#define TOOLS                                                                                      \
    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":"  \
    "{\"type\":\"object\",\"properties\":{\"city\":{\"enum\":[\"Oslo\",\"Rome\"]}},"   \
    "\"required\":[\"city\"]}}}]"
/* clang-format on */

static void test_tool_choice_steers_a_turns_first_request(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    struct srv s;
    const char *more[] = {"--tool-choice", "get_weather", "-n", "400", NULL};
    if (!start_qwen3(&s, more))
        skip();
    /* the user's turn (a system message after it, as Claude Code sends, or not): steered into
     * the named call, whatever the request said */
    struct http_resp r;
    cJSON *j;
    const cJSON *ch0;
    for (int sys = 0; sys < 2; sys++) {
        char body[1024];
        snprintf(body, sizeof body,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"Say something.\"}%s]," TOOLS
                 ",\"tool_choice\":\"none\",\"temperature\":0}",
                 sys ? ",{\"role\":\"system\",\"content\":\"# Environment\"}" : "");
        r = http_post(&s, "/v1/chat/completions", body);
        assert_int_equal(r.status, 200);
        j   = http_json(&r);
        ch0 = cJSON_GetArrayItem(jget(j, "choices"), 0);
        assert_string_equal(jstr(ch0, "finish_reason"), "tool_calls");
        const cJSON *call = cJSON_GetArrayItem(jget(jget(ch0, "message"), "tool_calls"), 0);
        assert_string_equal(jstr(jget(call, "function"), "name"), "get_weather");
        cJSON_Delete(j);
        http_resp_free(&r);
    }
    /* the tool's result, alone or with a note the client adds after it as a user message (as
     * Claude Code does): left as sent (tool_choice none, so no call) */
    for (int note = 0; note < 2; note++) {
        char body[1024];
        snprintf(body, sizeof body,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"},{\"role\":"
                 "\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":"
                 "\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":"
                 "\"{\\\"city\\\":\\\"Oslo\\\"}\"}}]},{\"role\":\"tool\",\"tool_call_id\":"
                 "\"c1\",\"content\":\"sunny\"}%s]," TOOLS ",\"tool_choice\":\"none\","
                 "\"temperature\":0,\"max_tokens\":8}",
                 note ? ",{\"role\":\"user\",\"content\":\"(a reminder)\"}" : "");
        r = http_post(&s, "/v1/chat/completions", body);
        assert_int_equal(r.status, 200);
        j   = http_json(&r);
        ch0 = cJSON_GetArrayItem(jget(j, "choices"), 0);
        assert_string_equal(jstr(ch0, "finish_reason"), "length");
        assert_null(cJSON_GetObjectItem(jget(ch0, "message"), "tool_calls"));
        cJSON_Delete(j);
        http_resp_free(&r);
    }
    srv_stop(&s);
}

/* A malformed --logit-bias is one line and exit 2; a token past the vocabulary, exit 1. */
static void test_logit_bias_option_checked(void **state)
{
    (void)state;
    TU_MODEL_OR_SKIP(model, SRV_MODEL);
    const char *bad[] = {tu_bin(), "serve", "-m", model, "--port", "0", "--logit-bias", "5x", NULL};
    char *err         = NULL;
    assert_int_equal(tu_run(bad, NULL, NULL, &err, 60), 2);
    assert_non_null(strstr(err, "--logit-bias '5x'"));
    assert_int_equal(count_of(err, "\n"), 1);
    free(err);
    const char *past[] = {tu_bin(), "serve",        "-m",      model, "--port",
                          "0",      "--logit-bias", "99999+1", NULL};
    assert_int_equal(tu_run(past, NULL, NULL, &err, 60), 1);
    assert_non_null(strstr(err, "token 99999 is outside the model's vocabulary"));
    free(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_ignored_fields_change_nothing, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_strict_fields_refuses_unknown_ones, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_honoured_fields_change_the_reply, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_tool_choice_steers_a_turns_first_request,
                                  srv_kill_leftovers),
        cmocka_unit_test(test_logit_bias_option_checked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
