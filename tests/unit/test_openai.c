/*
 * test_openai.c: src/serve/openai.c. Parsing and validation need no model;
 * response rendering is fed fake scheduler events; job creation uses
 * stories260K.gguf (models/, else ../shared/models; skipped without it).
 */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "util/testutil.h"
#include "serve/openai.h"

static void test_parse_full_chat_request(void **state)
{
    (void)state;
    const char *body =
        "{\"model\":\"m\",\"messages\":[{\"role\":\"developer\",\"content\":\"S\"},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\","
        "\"text\":\"b\"}]},{\"role\":\"assistant\",\"content\":null}],"
        "\"max_tokens\":7,\"max_completion_tokens\":9,\"temperature\":0.5,\"top_p\":0.9,"
        "\"top_k\":40,\"min_p\":0.05,\"seed\":-3,\"stop\":[\"x\",\"\",\"yz\"],"
        "\"presence_penalty\":0.5,\"frequency_penalty\":-0.5,\"repetition_penalty\":1.1,"
        "\"logprobs\":true,\"top_logprobs\":4,\"n\":2,\"stream\":true,"
        "\"stream_options\":{\"include_usage\":true},\"user\":{\"odd\":1},\"tools\":[],"
        "\"response_format\":{\"type\":\"text\"}}";
    struct oai_request r;
    struct oai_error e;
    assert_true(oai_parse(OAI_CHAT, body, strlen(body), 2048, &r, &e));
    assert_string_equal(r.model, "m");
    assert_int_equal(r.n_messages, 3);
    assert_string_equal(r.messages[0].role, "system");
    assert_string_equal(r.messages[1].content, "ab");
    assert_string_equal(r.messages[2].content, "");
    assert_int_equal(r.max_tokens, 9);
    assert_true(r.sampling.temperature == 0.5f);
    assert_true(r.sampling.top_p == 0.9f);
    assert_int_equal(r.sampling.top_k, 40);
    assert_true(r.has_seed);
    assert_true(r.sampling.seed == (uint64_t)-3);
    assert_int_equal(r.n_stop, 2);
    assert_string_equal(r.stop[1], "yz");
    assert_true(r.sampling.repeat_penalty == 1.1f);
    assert_int_equal(r.top_logprobs, 4);
    assert_int_equal(r.n, 2);
    assert_true(r.stream);
    assert_true(r.include_usage);
    oai_request_free(&r);
}

static void test_parse_defaults(void **state)
{
    (void)state;
    const char *body = "{\"prompt\":\"hi\",\"temperature\":null}";
    struct oai_request r;
    struct oai_error e;
    assert_true(oai_parse(OAI_COMPLETION, body, strlen(body), 0, &r, &e));
    assert_int_equal(r.n_prompts, 1);
    assert_int_equal(r.max_tokens, -1);
    assert_true(r.sampling.temperature == 1.0f); /* OpenAI's default; null means absent */
    assert_true(r.sampling.top_p == 1.0f);
    assert_int_equal(r.sampling.top_k, 0);
    assert_int_equal(r.top_logprobs, -1);
    assert_int_equal(r.n, 1);
    assert_false(r.stream);
    assert_false(r.has_seed);
    oai_request_free(&r);
    const char *arr = "{\"prompt\":[\"a\",\"b\",\"c\"],\"logprobs\":0}";
    assert_true(oai_parse(OAI_COMPLETION, arr, strlen(arr), 0, &r, &e));
    assert_int_equal(r.n_prompts, 3);
    assert_string_equal(r.prompts[2], "c");
    assert_int_equal(r.top_logprobs, 0);
    oai_request_free(&r);
}

static void test_parse_errors_name_the_field(void **state)
{
    (void)state;
    static const struct {
        enum oai_kind kind;
        const char *body, *param, *code;
    } cases[] = {
        {OAI_CHAT, "{", "", NULL},
        {OAI_CHAT, "{\"messages\":[]} x", "", NULL},
        {OAI_CHAT, "7", "", NULL},
        {OAI_CHAT, "{\"model\":\"m\"}", "messages", "missing_required_parameter"},
        {OAI_CHAT, "{\"messages\":{}}", "messages", "invalid_type"},
        {OAI_CHAT, "{\"messages\":[{\"role\":1,\"content\":\"x\"}]}", "messages[0].role",
         "invalid_type"},
        {OAI_CHAT,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"tool\","
         "\"content\":\"x\"}]}",
         "messages[1].role", "invalid_value"},
        {OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\"}]}]}",
         "messages[0].content[0].text", "invalid_type"},
        {OAI_COMPLETION, "{\"prompt\":[[1,2]]}", "prompt[0]", "invalid_type"},
        {OAI_COMPLETION, "{\"prompt\":\"x\",\"max_tokens\":3000}", "max_tokens", "invalid_value"},
        {OAI_COMPLETION, "{\"prompt\":\"x\",\"max_tokens\":-1}", "max_tokens",
         "integer_below_min_value"},
        {OAI_COMPLETION, "{\"prompt\":\"x\",\"max_tokens\":1e300}", "max_tokens",
         "integer_above_max_value"},
        {OAI_COMPLETION, "{\"prompt\":\"x\",\"top_k\":\"5\"}", "top_k", "invalid_type"},
        {OAI_COMPLETION, "{\"prompt\":\"x\",\"top_p\":1.5}", "top_p", "invalid_value"},
        {OAI_COMPLETION, "{\"prompt\":\"x\",\"seed\":1.5}", "seed", "invalid_type"},
        {OAI_COMPLETION, "{\"prompt\":\"x\",\"stop\":[1]}", "stop[0]", "invalid_type"},
        {OAI_COMPLETION, "{\"prompt\":[\"a\",\"b\",\"c\",\"d\",\"e\"],\"n\":16}", "n",
         "invalid_value"},
        {OAI_COMPLETION, "{\"prompt\":\"x\",\"stream_options\":5,\"stream\":true}",
         "stream_options", "invalid_type"},
        {OAI_COMPLETION,
         "{\"prompt\":\"x\",\"stream\":true,\"stream_options\":"
         "{\"include_usage\":1}}",
         "stream_options.include_usage", "invalid_type"},
        {OAI_COMPLETION, "{\"prompt\":\"x\",\"ignore_eos\":\"no\"}", "ignore_eos", "invalid_type"},
        {OAI_COMPLETION, "{\"prompt\":\"x\",\"best_of\":3}", "best_of", "unsupported_parameter"},
        {OAI_COMPLETION, "{\"prompt\":\"x\",\"logit_bias\":{\"5\":1}}", "logit_bias",
         "unsupported_parameter"},
        {OAI_CHAT,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":"
         "{\"type\":\"json_object\"}}",
         "response_format", "unsupported_parameter"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct oai_request r;
        struct oai_error e;
        memset(&e, 0, sizeof e);
        bool ok = oai_parse(cases[i].kind, cases[i].body, strlen(cases[i].body), 2048, &r, &e);
        if (ok || strcmp(e.param, cases[i].param))
            print_message("case %zu (%s): ok %d, param '%s', message %s\n", i, cases[i].body, ok,
                          e.param, e.message);
        assert_false(ok);
        assert_int_equal(e.status, 400);
        assert_string_equal(e.type, "invalid_request_error");
        assert_string_equal(e.param, cases[i].param);
        if (cases[i].code)
            assert_string_equal(e.code, cases[i].code);
        assert_true(strlen(e.message) > 10);
        assert_null(r.messages);
        assert_null(r.prompts);
    }
}

static void test_error_json_shape(void **state)
{
    (void)state;
    struct oai_error e;
    oai_fail(&e, 400, "invalid_request_error", "invalid_type", "max_tokens", "bad \"%s\"", "x");
    char *s  = oai_error_json(&e);
    cJSON *j = cJSON_Parse(s);
    assert_non_null(j);
    cJSON *err = cJSON_GetObjectItem(j, "error");
    assert_string_equal(cJSON_GetObjectItem(err, "message")->valuestring, "bad \"x\"");
    assert_string_equal(cJSON_GetObjectItem(err, "type")->valuestring, "invalid_request_error");
    assert_string_equal(cJSON_GetObjectItem(err, "param")->valuestring, "max_tokens");
    assert_string_equal(cJSON_GetObjectItem(err, "code")->valuestring, "invalid_type");
    cJSON_Delete(j);
    free(s);
    oai_fail(&e, 404, "invalid_request_error", NULL, NULL, "nope");
    s = oai_error_json(&e);
    assert_string_equal(s, "{\"error\":{\"message\":\"nope\",\"type\":\"invalid_request_error\","
                           "\"param\":null,\"code\":null}}");
    free(s);
}

static void test_chat_text(void **state)
{
    (void)state;
    const char *body = "{\"messages\":[{\"role\":\"system\",\"content\":\"S\"},"
                       "{\"role\":\"user\",\"content\":\"U\"}]}";
    struct oai_request r;
    struct oai_error e;
    assert_true(oai_parse(OAI_CHAT, body, strlen(body), 0, &r, &e));
    char *text = NULL;
    assert_true(oai_chat_text(&r, CHAT_LLAMA3, "<|begin_of_text|>", "<|eot_id|>", &text, &e));
    assert_string_equal(text, "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nS"
                              "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nU<|eot_id|>"
                              "<|start_header_id|>assistant<|end_header_id|>\n\n");
    free(text);
    oai_request_free(&r);
    /* a conversation the family refuses is a 400 on messages */
    body = "{\"messages\":[{\"role\":\"assistant\",\"content\":\"A\"}]}";
    assert_true(oai_parse(OAI_CHAT, body, strlen(body), 0, &r, &e));
    assert_false(oai_chat_text(&r, CHAT_GEMMA, "<bos>", "<eos>", &text, &e));
    assert_int_equal(e.status, 400);
    assert_string_equal(e.param, "messages");
    oai_request_free(&r);
}

/* Feeds a response: two TEXT events and a DONE per choice. */
static char *run_response(const char *req_body, enum oai_kind kind, int32_t n_choices,
                          char **stream_out)
{
    struct oai_request r;
    struct oai_error e;
    assert_true(oai_parse(kind, req_body, strlen(req_body), 0, &r, &e));
    struct oai_response *resp = oai_response_new(&r, n_choices, "id-1", 1700000000, "tiny", NULL);
    oai_request_free(&r);
    assert_non_null(resp);
    size_t cap = 1 << 16, len = 0, n;
    char *all = calloc(1, cap);
    char *s   = oai_response_start(resp, &n);
    if (s) {
        memcpy(all + len, s, n);
        len += n;
        free(s);
    }
    struct sched_logprob lp     = {7, -0.25f};
    struct sched_logprob top[2] = {{7, -0.25f}, {9, -2.0f}};
    for (int32_t c = 0; c < n_choices; c++) {
        const char *pieces[] = {"Hel", "lo\xc3"}; /* a split UTF-8 byte in a logprob token */
        for (int k = 0; k < 2; k++) {
            struct sched_event ev = {.kind     = SCHED_EV_TEXT,
                                     .choice   = c,
                                     .text     = pieces[k],
                                     .text_len = strlen(pieces[k]),
                                     .logprob  = &lp,
                                     .top      = top,
                                     .n_top    = 2};
            if (k == 1)
                ev.text_len = 2; /* "lo" */
            s = oai_response_text(resp, &ev, &n);
            if (s) {
                memcpy(all + len, s, n);
                len += n;
                free(s);
            }
        }
        struct sched_event done = {.kind        = SCHED_EV_DONE,
                                   .choice      = c,
                                   .finish      = SCHED_FINISH_LENGTH,
                                   .n_prompt    = 5,
                                   .n_cached    = 2,
                                   .n_generated = 2};
        s                       = oai_response_done(resp, &done, &n);
        if (s) {
            memcpy(all + len, s, n);
            len += n;
            free(s);
        }
    }
    int status;
    s = oai_response_finish(resp, &status, &n);
    assert_int_equal(status, 200);
    oai_response_free(resp);
    if (stream_out) {
        memcpy(all + len, s, n);
        all[len + n] = 0;
        free(s);
        *stream_out = all;
        return NULL;
    }
    assert_int_equal(len, 0); /* nothing before the end when not streaming */
    free(all);
    return s;
}

static void test_render_chat_completion(void **state)
{
    (void)state;
    char *s  = run_response("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":2,"
                             "\"logprobs\":true,\"top_logprobs\":2}",
                            OAI_CHAT, 2, NULL);
    cJSON *j = cJSON_Parse(s);
    assert_non_null(j);
    assert_string_equal(cJSON_GetObjectItem(j, "object")->valuestring, "chat.completion");
    assert_string_equal(cJSON_GetObjectItem(j, "id")->valuestring, "id-1");
    assert_int_equal(cJSON_GetObjectItem(j, "created")->valuedouble, 1700000000);
    cJSON *cs = cJSON_GetObjectItem(j, "choices");
    assert_int_equal(cJSON_GetArraySize(cs), 2);
    cJSON *c1 = cJSON_GetArrayItem(cs, 1);
    assert_int_equal(cJSON_GetObjectItem(c1, "index")->valueint, 1);
    cJSON *m = cJSON_GetObjectItem(c1, "message");
    assert_string_equal(cJSON_GetObjectItem(m, "role")->valuestring, "assistant");
    assert_string_equal(cJSON_GetObjectItem(m, "content")->valuestring, "Hello");
    assert_string_equal(cJSON_GetObjectItem(c1, "finish_reason")->valuestring, "length");
    cJSON *content = cJSON_GetObjectItem(cJSON_GetObjectItem(c1, "logprobs"), "content");
    assert_int_equal(cJSON_GetArraySize(content), 2);
    cJSON *e0 = cJSON_GetArrayItem(content, 0);
    assert_string_equal(cJSON_GetObjectItem(e0, "token")->valuestring, "<7>");
    assert_true(cJSON_GetObjectItem(e0, "logprob")->valuedouble == -0.25);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(e0, "bytes")), 3);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(e0, "top_logprobs")), 2);
    cJSON *u = cJSON_GetObjectItem(j, "usage");
    /* n = 2 copies of one prompt: the prompt counts once */
    assert_int_equal(cJSON_GetObjectItem(u, "prompt_tokens")->valueint, 5);
    assert_int_equal(cJSON_GetObjectItem(u, "completion_tokens")->valueint, 4);
    assert_int_equal(cJSON_GetObjectItem(u, "total_tokens")->valueint, 9);
    assert_int_equal(
        cJSON_GetObjectItem(cJSON_GetObjectItem(u, "prompt_tokens_details"), "cached_tokens")
            ->valueint,
        2);
    cJSON_Delete(j);
    free(s);
}

static void test_render_chat_stream(void **state)
{
    (void)state;
    char *all = NULL;
    run_response("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":true,"
                 "\"stream_options\":{\"include_usage\":true}}",
                 OAI_CHAT, 1, &all);
    /* role chunk, two content chunks, finish chunk, usage chunk, [DONE] */
    const char *want_order[] = {"\"delta\":{\"role\":\"assistant\",\"content\":\"\"}",
                                "\"delta\":{\"content\":\"Hel\"}",
                                "\"delta\":{\"content\":\"lo\"}",
                                "\"delta\":{},\"logprobs\":null,\"finish_reason\":\"length\"",
                                "\"choices\":[],\"usage\":{\"prompt_tokens\":5",
                                "data: [DONE]\n\n"};
    const char *p            = all;
    for (size_t i = 0; i < sizeof want_order / sizeof want_order[0]; i++) {
        const char *q = strstr(p, want_order[i]);
        if (!q)
            print_message("missing (in order) %s in:\n%s\n", want_order[i], all);
        assert_non_null(q);
        p = q + 1;
    }
    assert_non_null(strstr(all, "\"object\":\"chat.completion.chunk\""));
    assert_int_equal(strncmp(all, "data: {", 7), 0);
    size_t n = strlen(all);
    assert_string_equal(all + n - 14, "data: [DONE]\n\n");
    free(all);
}

static void test_render_completion_logprobs(void **state)
{
    (void)state;
    char *s  = run_response("{\"prompt\":\"x\",\"logprobs\":2}", OAI_COMPLETION, 1, NULL);
    cJSON *j = cJSON_Parse(s);
    assert_non_null(j);
    assert_string_equal(cJSON_GetObjectItem(j, "object")->valuestring, "text_completion");
    cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
    assert_string_equal(cJSON_GetObjectItem(c, "text")->valuestring, "Hello");
    cJSON *lp = cJSON_GetObjectItem(c, "logprobs");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(lp, "tokens")), 2);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(lp, "token_logprobs")), 2);
    cJSON *offs = cJSON_GetObjectItem(lp, "text_offset");
    assert_int_equal(cJSON_GetArrayItem(offs, 0)->valueint, 0);
    assert_int_equal(cJSON_GetArrayItem(offs, 1)->valueint, 3);
    cJSON *top0 = cJSON_GetArrayItem(cJSON_GetObjectItem(lp, "top_logprobs"), 0);
    assert_true(cJSON_GetObjectItem(top0, "<9>")->valuedouble == -2.0);
    cJSON_Delete(j);
    free(s);
}

static void test_jobs_from_model(void **state)
{
    (void)state;
    TU_MODEL_OR_SKIP(path, "stories260K.gguf");
    char err[HEARTH_ERR_MAX];
    struct hearth_model_params mp = hearth_model_default_params();
    mp.n_threads                  = 1;
    struct hearth_model *model    = NULL;
    assert_int_equal(hearth_model_load(path, &mp, &model, err, sizeof err), HEARTH_OK);
    bool known = true;
    assert_int_equal(oai_model_chat_family(model, &known), CHAT_CHATML);
    assert_false(known);

    const char *body = "{\"prompt\":[\"Once upon a time\",\"The little dog\"],\"n\":2,"
                       "\"stop\":\"x\",\"seed\":5,\"max_tokens\":3}";
    struct oai_request r;
    struct oai_error e;
    assert_true(oai_parse(OAI_COMPLETION, body, strlen(body), 64, &r, &e));
    struct sched_job **jobs;
    int32_t n_jobs;
    uint64_t next = 100;
    assert_true(oai_make_jobs(&r, model, CHAT_CHATML, 64, 42, &next, &jobs, &n_jobs, &e));
    assert_int_equal(n_jobs, 4);
    assert_int_equal(next, 104);
    for (int32_t i = 0; i < 4; i++) {
        assert_int_equal(jobs[i]->id, 100 + i);
        assert_int_equal(jobs[i]->request_id, 42);
        assert_int_equal(jobs[i]->choice, i);
        assert_int_equal(jobs[i]->n_prompt, 5); /* BOS + 4 */
        assert_int_equal(jobs[i]->prompt[0], hearth_token_bos(model));
        assert_int_equal(jobs[i]->max_tokens, 3);
        assert_int_equal(jobs[i]->n_stop, 1);
        assert_int_equal(jobs[i]->top_logprobs, -1);
        assert_true(jobs[i]->sampling.seed == 5 + (uint64_t)i);
    }
    assert_int_equal(jobs[1]->prompt[1], jobs[0]->prompt[1]);
    assert_int_not_equal(jobs[2]->prompt[1], jobs[0]->prompt[1]);
    for (int32_t i = 0; i < 4; i++)
        sched_job_free(jobs[i]);
    free(jobs);
    oai_request_free(&r);

    /* absent max_tokens: the rest of the slot */
    body = "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}";
    assert_true(oai_parse(OAI_CHAT, body, strlen(body), 64, &r, &e));
    assert_true(oai_make_jobs(&r, model, CHAT_CHATML, 64, 1, &next, &jobs, &n_jobs, &e));
    assert_int_equal(n_jobs, 1);
    assert_int_equal(jobs[0]->max_tokens, 64 - jobs[0]->n_prompt);
    sched_job_free(jobs[0]);
    free(jobs);
    oai_request_free(&r);

    /* a prompt that fills the slot: 400 with both numbers */
    char big[600] = "{\"prompt\":\"";
    for (int i = 0; i < 40; i++)
        strcat(big, "the cat ");
    strcat(big, "\"}");
    assert_true(oai_parse(OAI_COMPLETION, big, strlen(big), 64, &r, &e));
    assert_false(oai_make_jobs(&r, model, CHAT_CHATML, 64, 1, &next, &jobs, &n_jobs, &e));
    assert_int_equal(e.status, 400);
    assert_string_equal(e.code, "context_length_exceeded");
    assert_non_null(strstr(e.message, " 64 tokens"));
    assert_null(jobs);
    oai_request_free(&r);
    hearth_model_free(model);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_full_chat_request),
        cmocka_unit_test(test_parse_defaults),
        cmocka_unit_test(test_parse_errors_name_the_field),
        cmocka_unit_test(test_error_json_shape),
        cmocka_unit_test(test_chat_text),
        cmocka_unit_test(test_render_chat_completion),
        cmocka_unit_test(test_render_chat_stream),
        cmocka_unit_test(test_render_completion_logprobs),
        cmocka_unit_test(test_jobs_from_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
