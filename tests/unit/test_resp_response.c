/*
 * test_resp_response.c: src/serve/resp_response.c, scheduler events -> the
 * Responses API's response object and its SSE events, fed fake events:
 * plain text, the reasoning / message / function_call split a template's
 * markers turn on, a length stop, a failure, and the exact event order.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/testutil.h"
#include "serve/responses.h"
#include "chat/chat_template.h"

/* A Hermes/Qwen-style template: its markers are what the split keys on. */
static const char qwen_like[] =
    "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{%- endfor %}"
    "{%- if tools %}<tools>{{ tools | tojson }}</tools> answer with <tool_call>{...}</tool_call>"
    "{%- endif %}{%- if m and m.reasoning_content %}<think>{{ m.reasoning_content }}</think>"
    "{%- endif %}{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}";

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

static void add(char **all, size_t *len, char *s, size_t n)
{
    if (!s)
        return;
    *all = realloc(*all, *len + n + 1);
    memcpy(*all + *len, s, n);
    *len += n;
    (*all)[*len] = 0;
    free(s);
}

/*
 * Runs a reply for body over the pieces of generated text, ending with
 * finish (or an ERROR event when failed). Returns everything sent: the
 * stream's bytes, or the body of a non-streaming reply (*status set).
 */
static char *run(const char *body, const struct chat_template *tmpl, const char *const *pieces,
                 int n_pieces, enum sched_finish finish, bool failed, int *status)
{
    struct oai_request r;
    struct oai_error e;
    if (!resp_parse(body, strlen(body), &r, &e))
        print_message("%s\n", e.message);
    assert_string_equal(resp_reply_ops.id_prefix(&r), "resp_");
    void *resp  = resp_reply_ops.create(&r, 1, "resp_abc", 1700000000, "tiny", NULL, tmpl, false);
    bool stream = r.stream;
    oai_request_free(&r);
    assert_non_null(resp);
    char *all  = calloc(1, 1);
    size_t len = 0, n;
    char *got;
    if (stream) {
        got = resp_reply_ops.start(resp, &n);
        add(&all, &len, got, n);
    }
    for (int k = 0; k < n_pieces; k++) {
        /* every piece is one token, id 100 + k, with two alternatives */
        struct sample_logprob lp     = {100 + k, -0.5f};
        struct sample_logprob top[2] = {{100 + k, -0.5f}, {7, -1.5f}};
        struct sched_event ev        = {.kind     = SCHED_EV_TEXT,
                                        .text     = pieces[k],
                                        .text_len = strlen(pieces[k]),
                                        .logprob  = &lp,
                                        .top      = top,
                                        .n_top    = 2};
        got                          = resp_reply_ops.text(resp, &ev, &n);
        add(&all, &len, got, n);
    }
    struct sched_event done = {.kind        = failed ? SCHED_EV_ERROR : SCHED_EV_DONE,
                               .finish      = finish,
                               .text        = failed ? "engine failure" : NULL,
                               .text_len    = failed ? 14 : 0,
                               .n_prompt    = 5,
                               .n_cached    = 2,
                               .n_generated = 3};
    got                     = resp_reply_ops.done(resp, &done, &n);
    add(&all, &len, got, n);
    if (!stream)
        assert_int_equal(len, 0); /* nothing before the end when not streaming */
    char *tail = resp_reply_ops.finish(resp, status, &n);
    if (stream) {
        assert_null(tail); /* the last event went with done: no [DONE] in this API */
        assert_int_equal(*status, 200);
    }
    add(&all, &len, tail, n);
    resp_reply_ops.destroy(resp);
    return all;
}

/*
 * The stream's events, parsed: each block is `event: T\ndata: {"type": T, ...}`, and the
 * sequence numbers run 0, 1, 2, ...
 */
static cJSON *events(const char *s)
{
    cJSON *all = cJSON_CreateArray();
    int seq    = 0;
    while (*s) {
        const char *end = strstr(s, "\n\n");
        assert_non_null(end);
        assert_memory_equal(s, "event: ", 7);
        const char *nl = strchr(s, '\n');
        char type[96];
        snprintf(type, sizeof type, "%.*s", (int)(nl - s - 7), s + 7);
        assert_memory_equal(nl + 1, "data: ", 6);
        char *json = strndup(nl + 7, (size_t)(end - nl - 7));
        cJSON *o   = cJSON_Parse(json);
        free(json);
        assert_non_null(o);
        assert_string_equal(cJSON_GetObjectItem(o, "type")->valuestring, type);
        assert_int_equal(cJSON_GetObjectItem(o, "sequence_number")->valueint, seq++);
        cJSON_AddItemToArray(all, o);
        s = end + 2;
    }
    return all;
}

/* The event types, consecutive repeats of a delta type folded into one, joined by spaces. */
static char *types(const cJSON *evs)
{
    static char buf[4096];
    buf[0]           = 0;
    const char *last = "";
    const cJSON *o;
    cJSON_ArrayForEach(o, evs)
    {
        const char *t = cJSON_GetObjectItem(o, "type")->valuestring;
        if (!strcmp(t, last) && strstr(t, ".delta"))
            continue;
        snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s", buf[0] ? " " : "",
                 t + (strncmp(t, "response.", 9) ? 0 : 9));
        last = t;
    }
    return buf;
}

static const cJSON *get(const cJSON *o, const char *path)
{
    char key[64];
    while (o && *path) {
        size_t n = strcspn(path, ".");
        snprintf(key, sizeof key, "%.*s", (int)n, path);
        o = key[0] >= '0' && key[0] <= '9' ? cJSON_GetArrayItem(o, atoi(key))
                                           : cJSON_GetObjectItemCaseSensitive(o, key);
        path += n + (path[n] == '.');
    }
    assert_non_null(o);
    return o;
}

static const char *str(const cJSON *o, const char *path)
{
    return get(o, path)->valuestring;
}
static int num(const cJSON *o, const char *path)
{
    return get(o, path)->valueint;
}

static void test_plain_text_response(void **state)
{
    (void)state;
    const char *pieces[] = {"Hel", "lo"};
    int status;
    char *body = run("{\"input\":\"x\",\"instructions\":\"S\",\"max_output_tokens\":9,"
                     "\"metadata\":{\"k\":\"v\"}}",
                     NULL, pieces, 2, SCHED_FINISH_STOP, false, &status);
    assert_int_equal(status, 200);
    cJSON *o = cJSON_Parse(body);
    assert_non_null(o);
    assert_string_equal(str(o, "id"), "resp_abc");
    assert_string_equal(str(o, "object"), "response");
    assert_int_equal(num(o, "created_at"), 1700000000);
    assert_string_equal(str(o, "status"), "completed");
    assert_string_equal(str(o, "model"), "tiny");
    assert_true(cJSON_IsNull(get(o, "error")));
    assert_true(cJSON_IsNull(get(o, "incomplete_details")));
    assert_false(cJSON_HasObjectItem(o, "output_text")); /* the SDKs compute it */
    assert_int_equal(cJSON_GetArraySize(get(o, "output")), 1);
    assert_string_equal(str(o, "output.0.type"), "message");
    assert_string_equal(str(o, "output.0.id"), "msg_abc0");
    assert_string_equal(str(o, "output.0.role"), "assistant");
    assert_string_equal(str(o, "output.0.status"), "completed");
    assert_string_equal(str(o, "output.0.content.0.type"), "output_text");
    assert_string_equal(str(o, "output.0.content.0.text"), "Hello");
    assert_int_equal(cJSON_GetArraySize(get(o, "output.0.content.0.annotations")), 0);
    assert_int_equal(num(o, "usage.input_tokens"), 5);
    assert_int_equal(num(o, "usage.input_tokens_details.cached_tokens"), 2);
    assert_int_equal(num(o, "usage.output_tokens"), 3);
    assert_int_equal(num(o, "usage.output_tokens_details.reasoning_tokens"), 0);
    assert_int_equal(num(o, "usage.total_tokens"), 8);
    /* the request's fields, echoed */
    assert_string_equal(str(o, "instructions"), "S");
    assert_int_equal(num(o, "max_output_tokens"), 9);
    assert_string_equal(str(o, "metadata.k"), "v");
    assert_string_equal(str(o, "tool_choice"), "auto");
    assert_string_equal(str(o, "text.format.type"), "text");
    assert_true(cJSON_IsFalse(get(o, "store")));
    assert_true(cJSON_IsTrue(get(o, "parallel_tool_calls")));
    assert_int_equal(cJSON_GetArraySize(get(o, "tools")), 0);
    assert_true(cJSON_IsNull(get(o, "previous_response_id")));
    cJSON_Delete(o);
    free(body);
}

static void test_plain_text_stream_events(void **state)
{
    (void)state;
    const char *pieces[] = {"Hel", "", "lo"};
    int status;
    char *s    = run("{\"input\":\"x\",\"stream\":true}", NULL, pieces, 3, SCHED_FINISH_STOP, false,
                     &status);
    cJSON *evs = events(s);
    assert_string_equal(types(evs), "created in_progress output_item.added content_part.added "
                                    "output_text.delta output_text.done content_part.done "
                                    "output_item.done completed");
    assert_int_equal(cJSON_GetArraySize(evs), 10); /* two deltas: the empty piece sends none */
    const cJSON *created = cJSON_GetArrayItem(evs, 0);
    assert_string_equal(str(created, "response.status"), "in_progress");
    assert_int_equal(cJSON_GetArraySize(get(created, "response.output")), 0);
    assert_true(cJSON_IsNull(get(created, "response.usage")));
    const cJSON *added = cJSON_GetArrayItem(evs, 2);
    assert_int_equal(num(added, "output_index"), 0);
    assert_string_equal(str(added, "item.status"), "in_progress");
    assert_int_equal(cJSON_GetArraySize(get(added, "item.content")), 0);
    const cJSON *d = cJSON_GetArrayItem(evs, 4);
    assert_string_equal(str(d, "item_id"), "msg_abc0");
    assert_int_equal(num(d, "content_index"), 0);
    assert_string_equal(str(d, "delta"), "Hel");
    assert_string_equal(str(cJSON_GetArrayItem(evs, 5), "delta"), "lo");
    assert_string_equal(str(cJSON_GetArrayItem(evs, 6), "text"), "Hello");
    assert_string_equal(str(cJSON_GetArrayItem(evs, 7), "part.text"), "Hello");
    assert_string_equal(str(cJSON_GetArrayItem(evs, 8), "item.content.0.text"), "Hello");
    const cJSON *last = cJSON_GetArrayItem(evs, 9);
    assert_string_equal(str(last, "response.status"), "completed");
    assert_string_equal(str(last, "response.output.0.content.0.text"), "Hello");
    assert_int_equal(num(last, "response.usage.total_tokens"), 8);
    cJSON_Delete(evs);
    free(s);
}

#define TOOLS                                                                                      \
    "\"tools\":[{\"type\":\"function\",\"name\":\"get\",\"parameters\":{\"type\":\"object\"}}]"

/* Reasoning, then text, then a call, cut anywhere: three items in that order. */
static const char *const split_pieces[] = {"<thi", "nk>\nhm", "m\n</think>\n\nOK <tool",
                                           "_call>\n{\"name\": \"get\", \"argu",
                                           "ments\": {\"a\": 1}}\n</tool_call>"};

static void test_split_items(void **state)
{
    (void)state;
    struct chat_template *t = qwen_template();
    int status;
    char *body =
        run("{\"input\":\"x\"," TOOLS "}", t, split_pieces, 5, SCHED_FINISH_STOP, false, &status);
    cJSON *o = cJSON_Parse(body);
    assert_non_null(o);
    assert_int_equal(cJSON_GetArraySize(get(o, "output")), 3);
    assert_string_equal(str(o, "output.0.type"), "reasoning");
    assert_string_equal(str(o, "output.0.id"), "rs_abc0");
    assert_int_equal(cJSON_GetArraySize(get(o, "output.0.summary")), 0);
    assert_string_equal(str(o, "output.0.content.0.type"), "reasoning_text");
    assert_string_equal(str(o, "output.0.content.0.text"), "hmm");
    assert_string_equal(str(o, "output.1.type"), "message");
    assert_string_equal(str(o, "output.1.content.0.text"), "OK");
    assert_string_equal(str(o, "output.2.type"), "function_call");
    assert_string_equal(str(o, "output.2.id"), "fc_abc2");
    assert_string_equal(str(o, "output.2.name"), "get");
    assert_string_equal(str(o, "output.2.status"), "completed");
    assert_memory_equal(str(o, "output.2.call_id"), "call_", 5);
    cJSON *args = cJSON_Parse(str(o, "output.2.arguments"));
    assert_int_equal(num(args, "a"), 1);
    cJSON_Delete(args);
    assert_string_equal(str(o, "tools.0.name"), "get"); /* echoed in the Responses form */
    cJSON_Delete(o);
    free(body);
    chat_template_free(t);
}

static void test_split_stream_events(void **state)
{
    (void)state;
    struct chat_template *t = qwen_template();
    int status;
    char *s    = run("{\"input\":\"x\",\"stream\":true," TOOLS "}", t, split_pieces, 5,
                     SCHED_FINISH_STOP, false, &status);
    cJSON *evs = events(s);
    assert_string_equal(
        types(evs), "created in_progress "
                    "output_item.added content_part.added reasoning_text.delta reasoning_text.done "
                    "content_part.done output_item.done "
                    "output_item.added content_part.added output_text.delta output_text.done "
                    "content_part.done output_item.done "
                    "output_item.added function_call_arguments.delta function_call_arguments.done "
                    "output_item.done completed");
    /* every event names its item by output index; the call's arguments stream as the model
     * wrote them (the lazy grammar holds the call from its marker on) */
    const cJSON *e;
    cJSON_ArrayForEach(e, evs)
    {
        const char *ty = str(e, "type");
        if (strstr(ty, "function_call_arguments")) {
            assert_int_equal(num(e, "output_index"), 2);
            assert_string_equal(str(e, "item_id"), "fc_abc2");
        }
        if (!strcmp(ty, "response.function_call_arguments.done")) {
            assert_string_equal(str(e, "name"), "get");
            assert_string_equal(str(e, "arguments"), "{\"a\": 1}"); /* as written */
        }
        if (!strcmp(ty, "response.content_part.added") && num(e, "output_index") == 0)
            assert_string_equal(str(e, "part.type"), "reasoning_text");
        if (!strcmp(ty, "response.output_item.added") && num(e, "output_index") == 2) {
            assert_string_equal(str(e, "item.type"), "function_call");
            assert_string_equal(str(e, "item.arguments"), "");
        }
    }
    const cJSON *last = cJSON_GetArrayItem(evs, cJSON_GetArraySize(evs) - 1);
    assert_int_equal(cJSON_GetArraySize(get(last, "response.output")), 3);
    cJSON_Delete(evs);
    free(s);
    chat_template_free(t);
}

static void test_tools_off_and_parallel_false(void **state)
{
    (void)state;
    struct chat_template *t = qwen_template();
    const char *two[]       = {"<tool_call>\n{\"name\": \"get\", \"arguments\": {}}\n</tool_call>"
                                     "<tool_call>\n{\"name\": \"get\", \"arguments\": {\"b\": 2}}\n"
                                     "</tool_call>"};
    int status;
    char *body = run("{\"input\":\"x\",\"parallel_tool_calls\":false," TOOLS "}", t, two, 1,
                     SCHED_FINISH_STOP, false, &status);
    cJSON *o   = cJSON_Parse(body);
    assert_int_equal(cJSON_GetArraySize(get(o, "output")), 1); /* the first call only */
    assert_string_equal(str(o, "output.0.arguments"), "{}");
    cJSON_Delete(o);
    free(body);
    /* tool_choice none: the markers are text */
    body = run("{\"input\":\"x\",\"tool_choice\":\"none\"," TOOLS "}", t, two, 1, SCHED_FINISH_STOP,
               false, &status);
    o    = cJSON_Parse(body);
    assert_int_equal(cJSON_GetArraySize(get(o, "output")), 1);
    assert_string_equal(str(o, "output.0.type"), "message");
    assert_non_null(strstr(str(o, "output.0.content.0.text"), "<tool_call>"));
    cJSON_Delete(o);
    free(body);
    chat_template_free(t);
}

static void test_length_is_incomplete(void **state)
{
    (void)state;
    const char *pieces[] = {"abc"};
    int status;
    char *body = run("{\"input\":\"x\",\"max_output_tokens\":3}", NULL, pieces, 1,
                     SCHED_FINISH_LENGTH, false, &status);
    cJSON *o   = cJSON_Parse(body);
    assert_string_equal(str(o, "status"), "incomplete");
    assert_string_equal(str(o, "incomplete_details.reason"), "max_output_tokens");
    assert_string_equal(str(o, "output.0.status"), "incomplete");
    cJSON_Delete(o);
    free(body);
    char *s = run("{\"input\":\"x\",\"stream\":true}", NULL, pieces, 1, SCHED_FINISH_LENGTH, false,
                  &status);
    cJSON *evs        = events(s);
    const cJSON *last = cJSON_GetArrayItem(evs, cJSON_GetArraySize(evs) - 1);
    assert_string_equal(str(last, "type"), "response.incomplete");
    assert_string_equal(str(last, "response.incomplete_details.reason"), "max_output_tokens");
    cJSON_Delete(evs);
    free(s);
}

static void test_empty_generation_is_one_empty_message(void **state)
{
    (void)state;
    int status;
    char *body = run("{\"input\":\"x\"}", NULL, NULL, 0, SCHED_FINISH_STOP, false, &status);
    cJSON *o   = cJSON_Parse(body);
    assert_int_equal(cJSON_GetArraySize(get(o, "output")), 1);
    assert_string_equal(str(o, "output.0.content.0.text"), "");
    cJSON_Delete(o);
    free(body);
}

static void test_failure(void **state)
{
    (void)state;
    const char *pieces[] = {"ab"};
    int status;
    char *body = run("{\"input\":\"x\"}", NULL, pieces, 1, SCHED_FINISH_STOP, true, &status);
    assert_int_equal(status, 500);
    cJSON *o = cJSON_Parse(body);
    assert_string_equal(str(o, "error.message"), "engine failure");
    assert_string_equal(str(o, "error.type"), "server_error");
    cJSON_Delete(o);
    free(body);
    char *s =
        run("{\"input\":\"x\",\"stream\":true}", NULL, pieces, 1, SCHED_FINISH_STOP, true, &status);
    cJSON *evs = events(s);
    assert_string_equal(types(evs), "created in_progress output_item.added content_part.added "
                                    "output_text.delta output_text.done content_part.done "
                                    "output_item.done failed");
    const cJSON *last = cJSON_GetArrayItem(evs, cJSON_GetArraySize(evs) - 1);
    assert_string_equal(str(last, "response.status"), "failed");
    assert_string_equal(str(last, "response.error.code"), "server_error");
    assert_string_equal(str(last, "response.error.message"), "engine failure");
    cJSON_Delete(evs);
    free(s);

    /* an error outside any response (shutdown): one `error` event */
    struct oai_error e;
    oai_fail(&e, 503, "server_error", "shutting_down", NULL, "The server is shutting down.");
    size_t n;
    s   = resp_reply_ops.error_sse(&e, &n);
    evs = events(s);
    assert_int_equal(strlen(s), n);
    assert_int_equal(cJSON_GetArraySize(evs), 1);
    const cJSON *ev = cJSON_GetArrayItem(evs, 0);
    assert_string_equal(str(ev, "code"), "shutting_down");
    assert_string_equal(str(ev, "message"), "The server is shutting down.");
    assert_true(cJSON_IsNull(get(ev, "param")));
    cJSON_Delete(evs);
    free(s);
}

/* clang-format off */
#define CODEX_TOOLS                                                                                \
    "\"tools\":[{\"type\":\"custom\",\"name\":\"apply_patch\",\"format\":{\"type\":\"text\"}},"    \
    "{\"type\":\"namespace\",\"name\":\"mcp__docs__\",\"description\":\"d\",\"tools\":["           \
    "{\"type\":\"function\",\"name\":\"search\",\"parameters\":{\"type\":\"object\"}}]},"         \
    "{\"type\":\"web_search\"}]"
/* clang-format on */

/* A custom tool's call (its input as written) and a namespaced function's, cut anywhere. */
static const char *const codex_pieces[] = {
    "<tool_call>\n{\"name\": \"apply_patch\", \"arguments\": {\"input\": \"*** Begin Pa",
    "tch\\n*** Delete File: a.c\\n*** End Patch\"}}\n</tool_call>\n<tool_call>\n{\"name\": "
    "\"mcp__docs__search\", \"arguments\": {\"q\": \"x\"}}\n</tool_call>"};

static void test_custom_and_namespaced_calls(void **state)
{
    (void)state;
    struct chat_template *t = qwen_template();
    int status;
    char *body = run("{\"input\":\"x\"," CODEX_TOOLS "}", t, codex_pieces, 2, SCHED_FINISH_STOP,
                     false, &status);
    cJSON *o   = cJSON_Parse(body);
    assert_non_null(o);
    assert_int_equal(cJSON_GetArraySize(get(o, "output")), 2);
    assert_string_equal(str(o, "output.0.type"), "custom_tool_call");
    assert_string_equal(str(o, "output.0.id"), "ctc_abc0");
    assert_string_equal(str(o, "output.0.name"), "apply_patch");
    assert_string_equal(str(o, "output.0.input"),
                        "*** Begin Patch\n*** Delete File: a.c\n*** End Patch");
    assert_memory_equal(str(o, "output.0.call_id"), "call_", 5);
    assert_string_equal(str(o, "output.0.status"), "completed");
    assert_false(cJSON_HasObjectItem(get(o, "output.0"), "arguments"));
    assert_false(cJSON_HasObjectItem(get(o, "output.0"), "namespace"));
    assert_string_equal(str(o, "output.1.type"), "function_call");
    assert_string_equal(str(o, "output.1.namespace"), "mcp__docs__");
    assert_string_equal(str(o, "output.1.name"), "search");
    assert_string_equal(str(o, "output.1.arguments"), "{\"q\":\"x\"}");
    assert_string_equal(str(o, "tools.0.type"), "custom"); /* echoed as sent */
    cJSON_Delete(o);
    free(body);

    /* streaming: the custom call's input comes in its own events, in pieces as the arguments
     * arrive (held by the grammar, they stream), joining to the whole input */
    char *s        = run("{\"input\":\"x\",\"stream\":true," CODEX_TOOLS "}", t, codex_pieces, 2,
                         SCHED_FINISH_STOP, false, &status);
    cJSON *evs     = events(s);
    const char *ty = types(evs);
    assert_memory_equal(
        ty, "created in_progress output_item.added custom_tool_call_input.delta ",
        strlen("created in_progress output_item.added custom_tool_call_input.delta "));
    assert_non_null(strstr(ty, "custom_tool_call_input.delta custom_tool_call_input.done "
                               "output_item.done output_item.added function_call_arguments.delta "
                               "function_call_arguments.done output_item.done completed"));
    const cJSON *added = cJSON_GetArrayItem(evs, 2);
    assert_string_equal(str(added, "item.type"), "custom_tool_call");
    assert_string_equal(str(added, "item.input"), "");
    char joined[256] = "";
    int n_deltas = 0, at_done = 0;
    for (int k = 0; k < cJSON_GetArraySize(evs); k++) {
        const cJSON *ev = cJSON_GetArrayItem(evs, k);
        if (!strcmp(str(ev, "type"), "response.custom_tool_call_input.delta")) {
            assert_string_equal(str(ev, "item_id"), "ctc_abc0");
            assert_int_equal(num(ev, "output_index"), 0);
            strncat(joined, str(ev, "delta"), sizeof joined - strlen(joined) - 1);
            n_deltas++;
        }
        if (!strcmp(str(ev, "type"), "response.custom_tool_call_input.done"))
            at_done = k;
    }
    assert_true(n_deltas >= 2);
    assert_string_equal(joined, "*** Begin Patch\n*** Delete File: a.c\n*** End Patch");
    const cJSON *done = cJSON_GetArrayItem(evs, at_done);
    assert_string_equal(str(done, "input"), "*** Begin Patch\n*** Delete File: a.c\n*** End Patch");
    assert_string_equal(str(cJSON_GetArrayItem(evs, at_done + 1), "item.input"),
                        "*** Begin Patch\n*** Delete File: a.c\n*** End Patch");
    assert_string_equal(str(cJSON_GetArrayItem(evs, at_done + 2), "item.namespace"), "mcp__docs__");
    cJSON_Delete(evs);
    free(s);

    /* max_tool_calls: the calls past it are dropped */
    body = run("{\"input\":\"x\",\"max_tool_calls\":1," CODEX_TOOLS "}", t, codex_pieces, 2,
               SCHED_FINISH_STOP, false, &status);
    o    = cJSON_Parse(body);
    assert_int_equal(cJSON_GetArraySize(get(o, "output")), 1);
    assert_string_equal(str(o, "output.0.type"), "custom_tool_call");
    assert_int_equal(num(o, "max_tool_calls"), 1);
    cJSON_Delete(o);
    free(body);

    chat_template_free(t);
}

/* include reasoning.encrypted_content: the reasoning comes sealed, and opens on the next turn. */
static void test_encrypted_reasoning_round_trip(void **state)
{
    (void)state;
    struct chat_template *t = qwen_template();
    int status;
    char *body = run("{\"input\":\"x\",\"include\":[\"reasoning.encrypted_content\"]," TOOLS "}", t,
                     split_pieces, 5, SCHED_FINISH_STOP, false, &status);
    cJSON *o   = cJSON_Parse(body);
    assert_string_equal(str(o, "output.0.type"), "reasoning");
    const char *sealed = str(o, "output.0.encrypted_content");
    assert_memory_equal(sealed, "hearth.r1:", 10);
    assert_false(cJSON_HasObjectItem(o, RESP_ECHO_SEAL)); /* private: never sent */
    assert_false(cJSON_HasObjectItem(o, "include"));
    /* the next turn sends the output back (without the text, as a client that keeps only the
     * opaque blob would): the reasoning is restored onto the assistant turn */
    cJSON *next = cJSON_CreateObject();
    cJSON *in   = cJSON_AddArrayToObject(next, "input");
    cJSON *user = cJSON_CreateObject();
    cJSON_AddStringToObject(user, "role", "user");
    cJSON_AddStringToObject(user, "content", "x");
    cJSON_AddItemToArray(in, user);
    const cJSON *item;
    cJSON_ArrayForEach(item, get(o, "output"))
    {
        cJSON *copy = cJSON_Duplicate(item, true);
        if (!strcmp(str(copy, "type"), "reasoning"))
            cJSON_DeleteItemFromObject(copy, "content");
        cJSON_AddItemToArray(in, copy);
    }
    char *text = cJSON_PrintUnformatted(next);
    struct oai_request r;
    struct oai_error e;
    bool ok = resp_parse(text, strlen(text), &r, &e);
    if (!ok)
        print_message("%s (%s)\n", e.message, e.param);
    assert_true(ok);
    const cJSON *turn = cJSON_GetArrayItem(r.messages, 1);
    assert_string_equal(cJSON_GetObjectItem(turn, "reasoning_content")->valuestring, "hmm");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(turn, "tool_calls")), 1);
    oai_request_free(&r);
    free(text);
    cJSON_Delete(next);
    cJSON_Delete(o);
    free(body);
    /* without include, no encrypted_content */
    body =
        run("{\"input\":\"x\"," TOOLS "}", t, split_pieces, 5, SCHED_FINISH_STOP, false, &status);
    o = cJSON_Parse(body);
    assert_false(cJSON_HasObjectItem(get(o, "output.0"), "encrypted_content"));
    cJSON_Delete(o);
    free(body);
    chat_template_free(t);
}

/* top_logprobs: each output_text token with its alternatives, in the part and the deltas;
 * reasoning text carries none. */
static void test_logprobs(void **state)
{
    (void)state;
    struct chat_template *t = qwen_template();
    const char *pieces[]    = {"<think>\nhm</think>\n\n", "Hel", "lo"};
    int status;
    char *body = run("{\"input\":\"x\",\"top_logprobs\":2}", t, pieces, 3, SCHED_FINISH_STOP, false,
                     &status);
    cJSON *o   = cJSON_Parse(body);
    assert_string_equal(str(o, "output.1.content.0.text"), "Hello");
    const cJSON *lp = get(o, "output.1.content.0.logprobs");
    assert_int_equal(cJSON_GetArraySize(lp), 2);
    assert_string_equal(str(lp, "0.token"), "<101>");
    assert_true(get(lp, "0.logprob")->valuedouble == -0.5);
    assert_int_equal(num(lp, "0.bytes.0"), '<');
    assert_int_equal(cJSON_GetArraySize(get(lp, "0.top_logprobs")), 2);
    assert_string_equal(str(lp, "1.top_logprobs.1.token"), "<7>");
    assert_int_equal(num(o, "top_logprobs"), 2);
    cJSON_Delete(o);
    free(body);
    char *s    = run("{\"input\":\"x\",\"stream\":true,\"top_logprobs\":2}", t, pieces, 3,
                     SCHED_FINISH_STOP, false, &status);
    cJSON *evs = events(s);
    int n      = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, evs)
    {
        if (!strcmp(str(e, "type"), "response.output_text.delta")) {
            assert_int_equal(cJSON_GetArraySize(get(e, "logprobs")), 1);
            n++;
        }
        if (!strcmp(str(e, "type"), "response.output_text.done"))
            assert_int_equal(cJSON_GetArraySize(get(e, "logprobs")), 2);
    }
    assert_int_equal(n, 2);
    cJSON_Delete(evs);
    free(s);
    /* not asked: empty */
    body = run("{\"input\":\"x\"}", t, pieces, 3, SCHED_FINISH_STOP, false, &status);
    o    = cJSON_Parse(body);
    assert_int_equal(cJSON_GetArraySize(get(o, "output.1.content.0.logprobs")), 0);
    cJSON_Delete(o);
    free(body);
    chat_template_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_text_response),
        cmocka_unit_test(test_plain_text_stream_events),
        cmocka_unit_test(test_split_items),
        cmocka_unit_test(test_split_stream_events),
        cmocka_unit_test(test_tools_off_and_parallel_false),
        cmocka_unit_test(test_length_is_incomplete),
        cmocka_unit_test(test_empty_generation_is_one_empty_message),
        cmocka_unit_test(test_failure),
        cmocka_unit_test(test_custom_and_namespaced_calls),
        cmocka_unit_test(test_encrypted_reasoning_round_trip),
        cmocka_unit_test(test_logprobs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
