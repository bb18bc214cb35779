/*
 * test_oai_response.c: src/serve/oai_response.c, scheduler events -> OpenAI's
 * response objects, fed fake events: plain text, logprobs, and the
 * reasoning and tool-call split a template's markers turn on.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/testutil.h"
#include "serve/openai.h"
#include "chat/chat_template.h"

/* Feeds a response: two TEXT events and a DONE per choice. */
static char *run_response_with(const char *req_body, enum oai_kind kind, int32_t n_choices,
                               char **stream_out, const struct chat_template *tmpl, bool thinking,
                               const char *const *pieces, int n_pieces)
{
    struct oai_request r;
    struct oai_error e;
    assert_true(oai_parse(kind, req_body, strlen(req_body), &r, &e));
    struct oai_response *resp =
        oai_response_new(&r, n_choices, "id-1", 1700000000, "tiny", NULL, tmpl, thinking);
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
    struct sample_logprob lp     = {7, -0.25f};
    struct sample_logprob top[2] = {{7, -0.25f}, {9, -2.0f}};
    for (int32_t c = 0; c < n_choices; c++) {
        for (int k = 0; k < n_pieces; k++) {
            struct sched_event ev = {.kind     = SCHED_EV_TEXT,
                                     .choice   = c,
                                     .text     = pieces[k],
                                     .text_len = strlen(pieces[k]),
                                     .logprob  = &lp,
                                     .top      = top,
                                     .n_top    = 2};
            if (!tmpl && k == 1)
                ev.text_len = 2; /* "lo", with a split UTF-8 byte in the logprob token */
            s = oai_response_text(resp, &ev, &n);
            if (s) {
                memcpy(all + len, s, n);
                len += n;
                free(s);
            }
        }
        struct sched_event done = {.kind        = SCHED_EV_DONE,
                                   .choice      = c,
                                   .finish      = tmpl ? SCHED_FINISH_STOP : SCHED_FINISH_LENGTH,
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

static char *run_response(const char *req_body, enum oai_kind kind, int32_t n_choices,
                          char **stream_out)
{
    static const char *const pieces[] = {"Hel", "lo\xc3"};
    return run_response_with(req_body, kind, n_choices, stream_out, NULL, false, pieces, 2);
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

/* A Hermes/Qwen-style template: its markers are what the response splitter keys on. */
static const char qwen_like[] =
    "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{%- endfor %}"
    "{%- if tools %}<tools>{{ tools | tojson }}</tools> answer with <tool_call>{...}</tool_call>"
    "{%- endif %}{%- if add_generation_prompt %}<|im_start|>assistant\n<think>\n\n</think>\n\n"
    "{%- endif %}";

static const char tools_body[] =
    "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],%s\"tools\":[{\"type\":\"function\","
    "\"function\":{\"name\":\"get\",\"parameters\":{\"type\":\"object\"}}}]}";

static struct chat_template *qwen_template(void)
{
    struct chat_template *t = NULL;
    char err[HEARTH_ERR_MAX];
    enum hearth_status st =
        chat_template_new(NULL, qwen_like, "qwen-like", NULL, &t, err, sizeof err);
    if (st != HEARTH_OK)
        print_message("%s\n", err);
    assert_int_equal(st, HEARTH_OK);
    return t;
}

static void test_render_tool_call_and_reasoning(void **state)
{
    (void)state;
    struct chat_template *t           = qwen_template();
    static const char *const pieces[] = {"<think>\nI should call", " it.\n</think>\n\nSure.",
                                         "\n<tool_call>\n{\"name\": \"get\", \"argu",
                                         "ments\": {\"city\": \"Par\xc3\xads\"}}\n</tool_call>"};
    char body[512];
    snprintf(body, sizeof body, tools_body, "");
    char *s  = run_response_with(body, OAI_CHAT, 1, NULL, t, false, pieces, 4);
    cJSON *j = cJSON_Parse(s);
    assert_non_null(j);
    cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
    assert_string_equal(cJSON_GetObjectItem(c, "finish_reason")->valuestring, "tool_calls");
    cJSON *m = cJSON_GetObjectItem(c, "message");
    assert_string_equal(cJSON_GetObjectItem(m, "reasoning_content")->valuestring,
                        "I should call it.");
    assert_string_equal(cJSON_GetObjectItem(m, "content")->valuestring, "Sure.");
    cJSON *call = cJSON_GetArrayItem(cJSON_GetObjectItem(m, "tool_calls"), 0);
    assert_string_equal(cJSON_GetObjectItem(call, "type")->valuestring, "function");
    assert_int_equal(strncmp(cJSON_GetObjectItem(call, "id")->valuestring, "call_", 5), 0);
    cJSON *fn = cJSON_GetObjectItem(call, "function");
    assert_string_equal(cJSON_GetObjectItem(fn, "name")->valuestring, "get");
    assert_string_equal(cJSON_GetObjectItem(fn, "arguments")->valuestring,
                        "{\"city\":\"Par\xc3\xads\"}");
    cJSON_Delete(j);
    free(s);

    /* streamed: reasoning first, then content, then the call's start and its arguments */
    snprintf(body, sizeof body, tools_body, "\"stream\":true,");
    char *all = NULL;
    run_response_with(body, OAI_CHAT, 1, &all, t, false, pieces, 4);
    const char *want_order[] = {"\"delta\":{\"reasoning_content\":\"I should call",
                                "\"delta\":{\"content\":\"Sure.\"}",
                                "\"tool_calls\":[{\"index\":0,\"id\":\"call_",
                                ("\"type\":\"function\",\"function\":{\"name\":\"get\","
                                 "\"arguments\":\"\"}}]"),
                                "\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":",
                                "\"finish_reason\":\"tool_calls\"",
                                "data: [DONE]"};
    const char *p            = all;
    for (size_t i = 0; i < sizeof want_order / sizeof want_order[0]; i++) {
        const char *q = strstr(p, want_order[i]);
        if (!q)
            print_message("missing (in order) %s in:\n%s\n", want_order[i], all);
        assert_non_null(q);
        p = q + 1;
    }
    free(all);

    /* tool_choice none and reasoning_format none: the text as generated */
    snprintf(body, sizeof body, tools_body,
             "\"tool_choice\":\"none\",\"reasoning_format\":\"none\",");
    s = run_response_with(body, OAI_CHAT, 1, NULL, t, false, pieces, 4);
    j = cJSON_Parse(s);
    c = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
    m = cJSON_GetObjectItem(c, "message");
    assert_string_equal(cJSON_GetObjectItem(c, "finish_reason")->valuestring, "stop");
    assert_null(cJSON_GetObjectItem(m, "tool_calls"));
    assert_non_null(strstr(cJSON_GetObjectItem(m, "content")->valuestring, "<tool_call>"));
    assert_non_null(strstr(cJSON_GetObjectItem(m, "content")->valuestring, "<think>"));
    cJSON_Delete(j);
    free(s);
    chat_template_free(t);
}

/* An "auto" call the lazy grammar holds from its marker on streams its arguments as they
 * come; without a stream the arguments come whole and printed compactly, as before. */
static int count_of(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

static void test_auto_call_arguments_stream(void **state)
{
    (void)state;
    struct chat_template *t           = qwen_template();
    static const char *const pieces[] = {"<tool_call>\n{\"name\": \"get\", \"arguments\": {\"ci",
                                         "ty\": \"Par", "\xc3\xads\", \"n\": 2",
                                         "}}\n</tool_call>"};
    char body[512];
    snprintf(body, sizeof body, tools_body, "\"stream\":true,");
    char *all = NULL;
    run_response_with(body, OAI_CHAT, 1, &all, t, false, pieces, 4);
    int n_args = count_of(all, "\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":");
    print_message("%d argument chunks\n", n_args);
    assert_true(n_args >= 3);
    /* the pieces join to the arguments as the model wrote them */
    cJSON *ev        = NULL;
    char joined[256] = "";
    for (char *line = strstr(all, "data: {"); line; line = strstr(line + 1, "data: {")) {
        ev              = cJSON_ParseWithOpts(line + 6, NULL, false);
        const cJSON *tc = cJSON_GetArrayItem(
            cJSON_GetObjectItem(
                cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(ev, "choices"), 0),
                                    "delta"),
                "tool_calls"),
            0);
        const cJSON *a = cJSON_GetObjectItem(cJSON_GetObjectItem(tc, "function"), "arguments");
        if (cJSON_IsString(a))
            strncat(joined, a->valuestring, sizeof joined - strlen(joined) - 1);
        cJSON_Delete(ev);
    }
    assert_string_equal(joined, "{\"city\": \"Par\xc3\xads\", \"n\": 2}");
    assert_non_null(strstr(all, "\"finish_reason\":\"tool_calls\""));
    free(all);
    snprintf(body, sizeof body, tools_body, "");
    char *s         = run_response_with(body, OAI_CHAT, 1, NULL, t, false, pieces, 4);
    cJSON *j        = cJSON_Parse(s);
    const cJSON *fn = cJSON_GetObjectItem(
        cJSON_GetArrayItem(
            cJSON_GetObjectItem(
                cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0),
                                    "message"),
                "tool_calls"),
            0),
        "function");
    assert_string_equal(cJSON_GetObjectItem(fn, "arguments")->valuestring,
                        "{\"city\":\"Par\xc3\xads\",\"n\":2}");
    cJSON_Delete(j);
    free(s);
    chat_template_free(t);
}

static void test_render_malformed_call_stays_text(void **state)
{
    (void)state;
    struct chat_template *t           = qwen_template();
    static const char *const pieces[] = {"<tool_call>\n{\"name\": \"get\", \"arguments\": {",
                                         "oops}\n</tool_call>"};
    char body[512];
    snprintf(body, sizeof body, tools_body, "");
    char *s  = run_response_with(body, OAI_CHAT, 1, NULL, t, false, pieces, 2);
    cJSON *j = cJSON_Parse(s);
    cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
    cJSON *m = cJSON_GetObjectItem(c, "message");
    assert_string_equal(cJSON_GetObjectItem(c, "finish_reason")->valuestring, "stop");
    assert_null(cJSON_GetObjectItem(m, "tool_calls"));
    assert_non_null(strstr(cJSON_GetObjectItem(m, "content")->valuestring, "oops"));
    cJSON_Delete(j);
    free(s);

    /* a prompt that opened <think> itself: the output starts inside the reasoning */
    static const char *const think[] = {"let me see\n</think>\n\n", "Hi."};
    s = run_response_with("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", OAI_CHAT, 1,
                          NULL, t, true, think, 2);
    j = cJSON_Parse(s);
    m = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0), "message");
    assert_string_equal(cJSON_GetObjectItem(m, "reasoning_content")->valuestring, "let me see");
    assert_string_equal(cJSON_GetObjectItem(m, "content")->valuestring, "Hi.");
    cJSON_Delete(j);
    free(s);
    chat_template_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_render_chat_completion),
        cmocka_unit_test(test_render_chat_stream),
        cmocka_unit_test(test_render_completion_logprobs),
        cmocka_unit_test(test_render_tool_call_and_reasoning),
        cmocka_unit_test(test_auto_call_arguments_stream),
        cmocka_unit_test(test_render_malformed_call_stays_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
