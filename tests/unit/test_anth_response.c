/*
 * test_anth_response.c: src/serve/anth_response.c, scheduler events ->
 * Anthropic's message and its SSE events, fed fake events: whole bodies
 * and event streams compared byte for byte, stop reasons (end of text, a
 * stop sequence, max_tokens, a full context, tool use), the thinking /
 * text / tool_use split a template's markers turn on, failures, and the
 * error shape per HTTP status (src/net/errbody.c's anth_error_*).
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/testutil.h"
#include "serve/anthropic.h"
#include "chat/chat_template.h"

/* How the fake job ends. */
struct ending {
    enum sched_event_kind kind; /* DONE or ERROR */
    enum sched_finish finish;
    int32_t stop_hit, n_prompt, n_cached, n_generated;
    const char *error;
};

struct result {
    char *bytes; /* everything sent: the stream, or the body */
    int status;
};

/* Appends s (taken) of *n bytes; n is read here, after the call that filled it. */
static void append(char **all, size_t *len, char *s, const size_t *pn)
{
    if (!s)
        return;
    size_t n = *pn;
    *all     = realloc(*all, *len + n + 1);
    memcpy(*all + *len, s, n);
    *len += n;
    (*all)[*len] = 0;
    free(s);
}

/* Runs one reply: the request body, the TEXT pieces, then the ending. */
static struct result run(const char *body, const struct chat_template *tmpl, bool thinking,
                         const char *const *pieces, int n_pieces, struct ending end)
{
    struct oai_request r;
    struct oai_error e;
    bool good = anth_parse(ANTH_MESSAGES, body, strlen(body), &r, &e);
    if (!good)
        print_message("%s\n", e.message);
    assert_true(good);
    const struct reply_ops *ops = &anth_reply_ops;
    assert_string_equal(ops->id_prefix(&r), "msg_");
    void *resp  = ops->create(&r, 1, "msg_1", 1700000000, "tiny", NULL, tmpl, thinking);
    bool stream = r.stream;
    oai_request_free(&r);
    assert_non_null(resp);
    char *all  = NULL;
    size_t len = 0, n = 0;
    append(&all, &len, ops->start(resp, &n), &n);
    assert_int_equal(len, 0); /* message_start waits for the job's first event */
    for (int k = 0; k < n_pieces; k++) {
        struct sched_event ev = {.kind        = SCHED_EV_TEXT,
                                 .text        = pieces[k],
                                 .text_len    = strlen(pieces[k]),
                                 .n_prompt    = end.n_prompt,
                                 .n_cached    = end.n_cached,
                                 .n_generated = k + 1};
        append(&all, &len, ops->text(resp, &ev, &n), &n);
    }
    struct sched_event done = {.kind        = end.kind,
                               .finish      = end.finish,
                               .stop_hit    = end.stop_hit,
                               .n_prompt    = end.n_prompt,
                               .n_cached    = end.n_cached,
                               .n_generated = end.n_generated,
                               .text        = end.error,
                               .text_len    = end.error ? strlen(end.error) : 0};
    append(&all, &len, ops->done(resp, &done, &n), &n);
    /* a second DONE for the same job changes nothing */
    append(&all, &len, ops->done(resp, &done, &n), &n);
    if (!stream)
        assert_int_equal(len, 0); /* nothing before the end when not streaming */
    struct result res = {0};
    char *tail        = ops->finish(resp, &res.status, &n);
    if (stream)
        assert_null(tail); /* message_stop went out with the last event */
    append(&all, &len, tail, &n);
    ops->destroy(resp);
    res.bytes = all ? all : strdup("");
    return res;
}

static void expect(const char *got, const char *want)
{
    if (strcmp(got, want))
        print_message("got:\n%s\nwant:\n%s\n", got, want);
    assert_string_equal(got, want);
}

#define USER "\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]"

static void test_plain_message(void **state)
{
    (void)state;
    static const char *const pieces[] = {"Hello", ", world", "", "!"};
    struct ending end                 = {SCHED_EV_DONE, SCHED_FINISH_STOP, 0, 12, 4, 5, NULL};
    struct result r =
        run("{\"model\":\"m\",\"max_tokens\":16," USER "}", NULL, false, pieces, 4, end);
    assert_int_equal(r.status, 200);
    expect(r.bytes, "{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":"
                    "\"tiny\",\"content\":[{\"type\":\"text\",\"text\":\"Hello, world!\"}],"
                    "\"stop_reason\":\"end_turn\",\"stop_sequence\":null,\"usage\":"
                    "{\"input_tokens\":8,\"cache_creation_input_tokens\":0,"
                    "\"cache_read_input_tokens\":4,\"output_tokens\":5}}");
    free(r.bytes);

    /* nothing generated: an empty content list */
    end.n_generated = 1;
    r = run("{\"model\":\"m\",\"max_tokens\":16," USER "}", NULL, false, NULL, 0, end);
    assert_non_null(strstr(r.bytes, "\"content\":[],\"stop_reason\":\"end_turn\""));
    free(r.bytes);
}

static void test_stop_reasons(void **state)
{
    (void)state;
    static const char *const pieces[] = {"abc"};
    const char *body =
        "{\"model\":\"m\",\"max_tokens\":16,\"stop_sequences\":[\"x\",\"yz\"]," USER "}";
    struct {
        enum sched_finish finish;
        int32_t stop_hit, n_generated;
        const char *reason, *sequence;
    } cases[] = {
        {SCHED_FINISH_STOP, 0, 3, "\"end_turn\"", "null"},
        {SCHED_FINISH_STOP, 2, 3, "\"stop_sequence\"", "\"yz\""},
        {SCHED_FINISH_STOP, 1, 3, "\"stop_sequence\"", "\"x\""},
        {SCHED_FINISH_LENGTH, 0, 16, "\"max_tokens\"", "null"},
        /* the slot's context filled before max_tokens */
        {SCHED_FINISH_LENGTH, 0, 9, "\"model_context_window_exceeded\"", "null"},
        {SCHED_FINISH_STOP, 7, 3, "\"end_turn\"", "null"}, /* an index out of range: ignored */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct ending end = {
            SCHED_EV_DONE, cases[i].finish, cases[i].stop_hit, 5, 0, cases[i].n_generated, NULL};
        struct result r = run(body, NULL, false, pieces, 1, end);
        char want[160];
        snprintf(want, sizeof want, "\"stop_reason\":%s,\"stop_sequence\":%s,", cases[i].reason,
                 cases[i].sequence);
        if (!strstr(r.bytes, want))
            print_message("case %zu: want %s in\n%s\n", i, want, r.bytes);
        assert_non_null(strstr(r.bytes, want));
        free(r.bytes);
    }
}

static void test_plain_stream(void **state)
{
    (void)state;
    static const char *const pieces[] = {"Hel", "", "lo", " \xff"};
    struct ending end                 = {SCHED_EV_DONE, SCHED_FINISH_STOP, 1, 7, 0, 4, NULL};
    struct result r = run("{\"model\":\"m\",\"max_tokens\":16,\"stream\":true,\"stop_sequences\":"
                          "[\"END\"]," USER "}",
                          NULL, false, pieces, 4, end);
    assert_int_equal(r.status, 200);
    expect(r.bytes,
           "event: message_start\n"
           "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\","
           "\"role\":\"assistant\",\"model\":\"tiny\",\"content\":[],\"stop_reason\":null,"
           "\"stop_sequence\":null,\"usage\":{\"input_tokens\":7,\"cache_creation_input_tokens\":0,"
           "\"cache_read_input_tokens\":0,\"output_tokens\":1}}}\n\n"
           "event: content_block_start\n"
           "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":"
           "\"text\",\"text\":\"\"}}\n\n"
           "event: content_block_delta\n"
           "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\","
           "\"text\":\"Hel\"}}\n\n"
           "event: content_block_delta\n"
           "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\","
           "\"text\":\"lo\"}}\n\n"
           "event: content_block_delta\n"
           "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\","
           "\"text\":\" \xef\xbf\xbd\"}}\n\n"
           "event: content_block_stop\n"
           "data: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
           "event: message_delta\n"
           "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"stop_sequence\","
           "\"stop_sequence\":\"END\"},\"usage\":{\"input_tokens\":7,"
           "\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":0,\"output_tokens\":4}}"
           "\n\n"
           "event: message_stop\n"
           "data: {\"type\":\"message_stop\"}\n\n");
    free(r.bytes);

    /* a job that ends before any text: message_start still comes first */
    r = run("{\"model\":\"m\",\"max_tokens\":16,\"stream\":true," USER "}", NULL, false, NULL, 0,
            end);
    const char *names[] = {"event: message_start\n", "event: message_delta\n",
                           "event: message_stop\n"};
    const char *p       = r.bytes;
    for (size_t i = 0; i < 3; i++) {
        assert_ptr_equal(strstr(p, names[i]), p);
        p = strstr(p, "\n\n") + 2;
    }
    assert_int_equal(*p, 0);
    assert_null(strstr(r.bytes, "content_block"));
    free(r.bytes);
}

/* A Hermes/Qwen-style template: its markers are what the splitter keys on. */
static const char qwen_like[] =
    "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{%- endfor %}"
    "{%- if tools %}<tools>{{ tools | tojson }}</tools> answer with <tool_call>{...}</tool_call>"
    "{%- endif %}{%- if add_generation_prompt %}<|im_start|>assistant\n<think>\n\n</think>\n\n"
    "{%- endif %}";

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

static const char tools_body[] =
    "{\"model\":\"m\",\"max_tokens\":64,%s\"tools\":[{\"name\":\"get\",\"input_schema\":"
    "{\"type\":\"object\"}}]," USER "}";

static const char *const call_pieces[] = {
    "<think>\nI should call", " it.\n</think>\n\nSure.",
    "\n<tool_call>\n{\"name\": \"get\", \"argu",
    ("ments\": {\"city\": \"Par\xc3\xads\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get\", "
     "\"arguments\": {\"city\": \"Rome\"}}\n</tool_call>")};

/* Checks a tool_use id ("toolu_" + 24 characters) and blanks it for comparison. */
static void blank_id(cJSON *block)
{
    cJSON *id = cJSON_GetObjectItem(block, "id");
    assert_non_null(id);
    assert_int_equal(strncmp(id->valuestring, "toolu_", 6), 0);
    assert_int_equal(strlen(id->valuestring), 6 + 24);
    cJSON_SetValuestring(id, "ID");
}

static char *event_names(const char *sse);

static void test_blocks(void **state)
{
    (void)state;
    struct chat_template *t = qwen_template();
    char body[512];
    snprintf(body, sizeof body, tools_body, "");
    struct ending end = {SCHED_EV_DONE, SCHED_FINISH_STOP, 0, 30, 0, 40, NULL};
    struct result r   = run(body, t, false, call_pieces, 4, end);
    cJSON *j          = cJSON_Parse(r.bytes);
    assert_non_null(j);
    cJSON *content = cJSON_GetObjectItem(j, "content");
    assert_int_equal(cJSON_GetArraySize(content), 4);
    blank_id(cJSON_GetArrayItem(content, 2));
    blank_id(cJSON_GetArrayItem(content, 3));
    char *got = cJSON_PrintUnformatted(content);
    expect(got, "[{\"type\":\"thinking\",\"thinking\":\"I should call it.\",\"signature\":\"\"},"
                "{\"type\":\"text\",\"text\":\"Sure.\"},"
                "{\"type\":\"tool_use\",\"id\":\"ID\",\"name\":\"get\",\"input\":{\"city\":"
                "\"Par\xc3\xads\"}},"
                "{\"type\":\"tool_use\",\"id\":\"ID\",\"name\":\"get\",\"input\":{\"city\":"
                "\"Rome\"}}]");
    free(got);
    assert_string_equal(cJSON_GetObjectItem(j, "stop_reason")->valuestring, "tool_use");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(j, "stop_sequence")));
    cJSON_Delete(j);
    free(r.bytes);

    /* disable_parallel_tool_use: the first call only */
    snprintf(body, sizeof body, tools_body,
             "\"tool_choice\":{\"type\":\"auto\",\"disable_parallel_tool_use\":true},");
    r       = run(body, t, false, call_pieces, 4, end);
    j       = cJSON_Parse(r.bytes);
    content = cJSON_GetObjectItem(j, "content");
    assert_int_equal(cJSON_GetArraySize(content), 3);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(content, 2), "type")->valuestring,
                        "tool_use");
    cJSON_Delete(j);
    free(r.bytes);

    /* tool_choice none: the call stays text (reasoning is still split off) */
    snprintf(body, sizeof body, tools_body, "\"tool_choice\":{\"type\":\"none\"},");
    r       = run(body, t, false, call_pieces, 4, end);
    j       = cJSON_Parse(r.bytes);
    content = cJSON_GetObjectItem(j, "content");
    assert_int_equal(cJSON_GetArraySize(content), 2);
    assert_non_null(strstr(cJSON_GetObjectItem(cJSON_GetArrayItem(content, 1), "text")->valuestring,
                           "<tool_call>"));
    assert_string_equal(cJSON_GetObjectItem(j, "stop_reason")->valuestring, "end_turn");
    cJSON_Delete(j);
    free(r.bytes);

    /* a prompt that opened the reasoning block: the text up to </think> is thinking */
    static const char *const open_pieces[] = {"mull", "ing</think>Done."};
    r   = run("{\"model\":\"m\",\"max_tokens\":64," USER "}", t, true, open_pieces, 2, end);
    j   = cJSON_Parse(r.bytes);
    got = cJSON_PrintUnformatted(cJSON_GetObjectItem(j, "content"));
    expect(got, "[{\"type\":\"thinking\",\"thinking\":\"mulling\",\"signature\":\"\"},"
                "{\"type\":\"text\",\"text\":\"Done.\"}]");
    free(got);
    cJSON_Delete(j);
    free(r.bytes);

    /* thinking.display "omitted": the thinking block is there, empty; streamed, no deltas */
    static const char omit[] =
        "{\"model\":\"m\",\"max_tokens\":4096,%s\"thinking\":{\"type\":"
        "\"enabled\",\"budget_tokens\":1024,\"display\":\"omitted\"}," USER "}";
    snprintf(body, sizeof body, omit, "");
    r   = run(body, t, true, open_pieces, 2, end);
    j   = cJSON_Parse(r.bytes);
    got = cJSON_PrintUnformatted(cJSON_GetObjectItem(j, "content"));
    expect(got, "[{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"},"
                "{\"type\":\"text\",\"text\":\"Done.\"}]");
    free(got);
    cJSON_Delete(j);
    free(r.bytes);
    snprintf(body, sizeof body, omit, "\"stream\":true,");
    r           = run(body, t, true, open_pieces, 2, end);
    char *names = event_names(r.bytes);
    expect(names, "message_start content_block_start/0:thinking content_block_stop/0 "
                  "content_block_start/1:text content_block_delta/1:text_delta "
                  "content_block_stop/1 message_delta:end_turn message_stop ");
    assert_null(strstr(r.bytes, "mull"));
    free(names);
    free(r.bytes);
    chat_template_free(t);
}

/* The "event: NAME" lines of an SSE text, each with its data's index when it has one. */
static char *event_names(const char *sse)
{
    char *out  = calloc(1, 4096);
    size_t len = 0;
    for (const char *p = sse; (p = strstr(p, "event: "));) {
        const char *nl = strchr(p, '\n');
        const char *d  = strstr(nl, "data: ") + 6;
        cJSON *data    = cJSON_ParseWithOpts(d, NULL, false);
        assert_non_null(data);
        /* the data's type names the event */
        assert_int_equal(
            strncmp(cJSON_GetObjectItem(data, "type")->valuestring, p + 7, (size_t)(nl - p - 7)),
            0);
        cJSON *idx = cJSON_GetObjectItem(data, "index");
        len += (size_t)snprintf(out + len, 4096 - len, "%.*s", (int)(nl - p - 7), p + 7);
        if (idx)
            len += (size_t)snprintf(out + len, 4096 - len, "/%d", idx->valueint);
        cJSON *delta = cJSON_GetObjectItem(data, "delta");
        cJSON *block = cJSON_GetObjectItem(data, "content_block");
        cJSON *type  = cJSON_GetObjectItem(delta ? delta : block, "type");
        if (!type && delta) /* message_delta: its stop_reason */
            type = cJSON_GetObjectItem(delta, "stop_reason");
        if (type)
            len += (size_t)snprintf(out + len, 4096 - len, ":%s", type->valuestring);
        len += (size_t)snprintf(out + len, 4096 - len, " ");
        cJSON_Delete(data);
        p = nl;
    }
    return out;
}

static void test_blocks_stream(void **state)
{
    (void)state;
    struct chat_template *t = qwen_template();
    char body[512];
    snprintf(body, sizeof body, tools_body, "\"stream\":true,");
    struct ending end = {SCHED_EV_DONE, SCHED_FINISH_STOP, 0, 30, 0, 40, NULL};
    struct result r   = run(body, t, false, call_pieces, 4, end);
    char *names       = event_names(r.bytes);
    expect(names, "message_start "
                  "content_block_start/0:thinking content_block_delta/0:thinking_delta "
                  "content_block_delta/0:thinking_delta content_block_stop/0 "
                  "content_block_start/1:text content_block_delta/1:text_delta "
                  "content_block_stop/1 "
                  "content_block_start/2:tool_use content_block_delta/2:input_json_delta "
                  "content_block_stop/2 "
                  "content_block_start/3:tool_use content_block_delta/3:input_json_delta "
                  "content_block_stop/3 "
                  "message_delta:tool_use message_stop ");
    free(names);
    /* the tool_use block opens with its id, name and an empty input; the input follows */
    const char *start = strstr(r.bytes, "{\"type\":\"tool_use\",\"id\":\"toolu_");
    assert_non_null(start);
    assert_non_null(strstr(start, "\"name\":\"get\",\"input\":{}}}"));
    /* the call is held by the lazy grammar from <tool_call> on, so its input streams as the
     * model wrote it */
    assert_non_null(strstr(r.bytes,
                           "{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"city\\\": "
                           "\\\"Par\xc3\xads\\\"}\"}"));
    assert_non_null(
        strstr(r.bytes, "{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}"));
    free(r.bytes);
    chat_template_free(t);
}

static void test_failure(void **state)
{
    (void)state;
    static const char *const pieces[] = {"partial"};
    struct ending end = {SCHED_EV_ERROR, SCHED_FINISH_STOP, 0, 5, 0, 1, "engine exploded"};
    struct result r =
        run("{\"model\":\"m\",\"max_tokens\":16," USER "}", NULL, false, pieces, 1, end);
    assert_int_equal(r.status, 500);
    expect(r.bytes, "{\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":"
                    "\"engine exploded\"}}");
    free(r.bytes);

    r = run("{\"model\":\"m\",\"max_tokens\":16,\"stream\":true," USER "}", NULL, false, pieces, 1,
            end);
    char *tail = strstr(r.bytes, "event: error\n");
    assert_non_null(tail);
    expect(tail, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\","
                 "\"message\":\"engine exploded\"}}\n\n");
    assert_null(strstr(r.bytes, "message_stop"));
    free(r.bytes);
}

static void test_error_shapes(void **state)
{
    (void)state;
    struct {
        int status;
        const char *type;
    } cases[] = {{400, "invalid_request_error"}, {401, "authentication_error"},
                 {403, "permission_error"},      {404, "not_found_error"},
                 {405, "invalid_request_error"}, {413, "request_too_large"},
                 {429, "rate_limit_error"},      {500, "api_error"},
                 {503, "overloaded_error"},      {529, "overloaded_error"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct oai_error e;
        oai_fail(&e, cases[i].status, "server_error", "code", "param", "went \"wrong\"");
        char *s = anth_error_json(&e);
        char want[256];
        snprintf(want, sizeof want,
                 "{\"type\":\"error\",\"error\":{\"type\":\"%s\",\"message\":\"went "
                 "\\\"wrong\\\"\"}}",
                 cases[i].type);
        expect(s, want);
        free(s);
        size_t n;
        s = anth_error_sse(&e, &n);
        assert_int_equal(n, strlen(s));
        static const char head[] = "event: error\ndata: {\"type\":\"error\",";
        assert_int_equal(strncmp(s, head, sizeof head - 1), 0);
        assert_int_equal(strcmp(s + n - 2, "\n\n"), 0);
        free(s);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_message), cmocka_unit_test(test_stop_reasons),
        cmocka_unit_test(test_plain_stream),  cmocka_unit_test(test_blocks),
        cmocka_unit_test(test_blocks_stream), cmocka_unit_test(test_failure),
        cmocka_unit_test(test_error_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
