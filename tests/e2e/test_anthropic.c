/*
 * test_anthropic.c: Anthropic's Messages API on the real `hearth serve`, a
 * Qwen3-architecture model with random weights and Qwen3's own chat
 * template (its text is gibberish; its tokenizer, template and markers are
 * real):
 *
 * - the message and its SSE events: shapes, event order and framing, the
 *   same blocks streamed and whole at temperature 0, stop_reason for a
 *   stop sequence, max_tokens and a full context;
 * - the translation, seen through the prompt it renders: count_tokens of
 *   a tool round trip (and of thinking on and off) equals /tokenize of
 *   /apply-template of the equivalent OpenAI chat request, and equals a
 *   real call's input_tokens + cache_read_input_tokens;
 * - errors in Anthropic's shape (400, 401, 405, 413), and the key taken as
 *   x-api-key or Authorization: Bearer;
 * - a body as Claude Code 2.1 sends it (billing stamp, cache_control,
 *   metadata, context_management, effort, adaptive thinking, betas, tool
 *   flags, unknown fields) answers as the plain body does at temperature 0,
 *   from the same cached prefix; output_config.format holds the reply to
 *   its schema;
 * - the official @anthropic-ai/sdk npm client (tests/e2e/node/
 *   anthropic.test.mjs): create, the stream helper, countTokens, and a
 *   forced tool_use checked against its schema with ajv (skipped while the
 *   server refuses tool_choice "tool").
 */
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/serveutil.h"

#define QWEN3     "tiny-qwen3-bpe-q8_0.gguf"
#define QWEN3_TPL "templates/Qwen-Qwen3-0.6B.jinja"
#define KEY       "anth-key"
#define CTX       "1024"

static const char *const key_hdr[]    = {"x-api-key: " KEY, "anthropic-version: 2023-06-01",
                                         "anthropic-beta: tools-2024-04-04", NULL};
static const char *const bearer_hdr[] = {"Authorization: Bearer " KEY, NULL};

/* Starts the server, or skips the test when curl, the model or the template is missing. */
static bool start(struct srv *s)
{
    if (!srv_have_curl())
        return false;
    const char *model = tu_model(QWEN3);
    const char *tpl   = tu_shared(QWEN3_TPL);
    if (!model || !tpl) {
        print_message("skip: %s or %s not found\n", QWEN3, QWEN3_TPL);
        return false;
    }
    char m[4096], t[4096];
    snprintf(m, sizeof m, "%s", model);
    snprintf(t, sizeof t, "%s", tpl);
    const char *extra[] = {"--chat-template-file", t, "--ctx-size", CTX, "--alias", "qwen3",
                           "--api-key", KEY, "--max-body", "65536", "--parallel", "2",
                           /* the SDK's requests carry no seed: sampled ones repeat run to run */
                           "--seed", "1", NULL};
    srv_start_opt(s, m, extra, true);
    return true;
}

/* clang-format off */
#define START_OR_SKIP(s)                                                                           \
    struct srv s;                                                                                  \
    if (!start(&s))                                                                                \
        skip();
/* clang-format on */

static struct http_resp post(const struct srv *s, const char *path, const char *body)
{
    return http_req(s, "POST", path, body, key_hdr);
}

/* The answer must have status and Anthropic's error shape with error type type. */
static void check_error(const struct http_resp *r, int status, const char *type)
{
    if (r->status != status)
        print_message("want %d, got %d: %s\n", status, r->status, r->body);
    assert_int_equal(r->status, status);
    cJSON *j = http_json(r);
    assert_string_equal(jstr(j, "type"), "error");
    const cJSON *e = jget(j, "error");
    assert_string_equal(jstr(e, "type"), type);
    assert_non_null(jstr(e, "message"));
    assert_int_equal(cJSON_GetArraySize(e), 2);
    cJSON_Delete(j);
}

/* ----------------------------------------------------------------- SSE --- */

/*
 * Splits an Anthropic stream into its events, checking the framing (each
 * "event: NAME\ndata: JSON\n\n", the data's type equal to NAME): a JSON
 * array of the data objects.
 */
static cJSON *anth_events(const char *body)
{
    cJSON *out    = cJSON_CreateArray();
    const char *p = body;
    while (*p) {
        if (strncmp(p, "event: ", 7)) {
            print_message("bad framing at: %.80s\n", p);
            fail();
        }
        const char *nl = strchr(p, '\n');
        assert_non_null(nl);
        assert_int_equal(strncmp(nl + 1, "data: ", 6), 0);
        const char *d   = nl + 7;
        const char *end = strstr(d, "\n\n");
        assert_non_null(end);
        cJSON *data = cJSON_ParseWithLength(d, (size_t)(end - d));
        assert_non_null(data);
        const char *type = jstr(data, "type");
        assert_non_null(type);
        assert_int_equal((size_t)(nl - p - 7), strlen(type));
        assert_int_equal(strncmp(p + 7, type, strlen(type)), 0);
        cJSON_AddItemToArray(out, data);
        p = end + 2;
    }
    return out;
}

/*
 * Checks the order Anthropic's stream follows (message_start; per block a
 * start, deltas of its kind and a stop, indices 0, 1, ...; message_delta;
 * message_stop) and assembles the final message from it, as a client does.
 */
static cJSON *assemble(const cJSON *events)
{
    int n = cJSON_GetArraySize(events);
    assert_true(n >= 3);
    const cJSON *first = cJSON_GetArrayItem(events, 0);
    assert_string_equal(jstr(first, "type"), "message_start");
    cJSON *msg = cJSON_Duplicate(jget(first, "message"), true);
    assert_int_equal(cJSON_GetArraySize(jget(msg, "content")), 0);
    assert_true(cJSON_IsNull(jget(msg, "stop_reason")));
    cJSON *content = cJSON_GetObjectItem(msg, "content");
    int open = -1, next = 0;
    char *acc = NULL; /* the open block's text or partial JSON */
    for (int i = 1; i < n - 2; i++) {
        const cJSON *ev  = cJSON_GetArrayItem(events, i);
        const char *type = jstr(ev, "type");
        int index        = (int)jnum(ev, "index");
        if (!strcmp(type, "content_block_start")) {
            assert_int_equal(open, -1);
            assert_int_equal(index, next);
            open = next++;
            cJSON_AddItemToArray(content, cJSON_Duplicate(jget(ev, "content_block"), true));
            acc = strdup("");
            continue;
        }
        assert_int_equal(index, open);
        cJSON *block   = cJSON_GetArrayItem(content, open);
        const char *bt = jstr(block, "type");
        if (!strcmp(type, "content_block_stop")) {
            if (!strcmp(bt, "tool_use")) {
                cJSON *input = cJSON_Parse(acc);
                assert_true(cJSON_IsObject(input));
                cJSON_ReplaceItemInObject(block, "input", input);
            } else {
                cJSON_ReplaceItemInObject(block, !strcmp(bt, "text") ? "text" : "thinking",
                                          cJSON_CreateString(acc));
            }
            free(acc);
            acc  = NULL;
            open = -1;
            continue;
        }
        assert_string_equal(type, "content_block_delta");
        const cJSON *d = jget(ev, "delta");
        const char *dt = jstr(d, "type");
        const char *piece =
            !strcmp(bt, "text") ? (assert_string_equal(dt, "text_delta"), jstr(d, "text"))
            : !strcmp(bt, "thinking")
                ? (assert_string_equal(dt, "thinking_delta"), jstr(d, "thinking"))
                : (assert_string_equal(dt, "input_json_delta"), jstr(d, "partial_json"));
        assert_non_null(piece);
        acc = realloc(acc, strlen(acc) + strlen(piece) + 1);
        strcat(acc, piece);
    }
    assert_int_equal(open, -1);
    const cJSON *md = cJSON_GetArrayItem(events, n - 2);
    assert_string_equal(jstr(md, "type"), "message_delta");
    assert_string_equal(jstr(cJSON_GetArrayItem(events, n - 1), "type"), "message_stop");
    const cJSON *delta = jget(md, "delta");
    cJSON_ReplaceItemInObject(msg, "stop_reason", cJSON_Duplicate(jget(delta, "stop_reason"), 1));
    cJSON_ReplaceItemInObject(msg, "stop_sequence",
                              cJSON_Duplicate(jget(delta, "stop_sequence"), 1));
    /* the usage totals: input counts as in message_start, output grown */
    const cJSON *u = jget(md, "usage");
    assert_int_equal(jnum(u, "input_tokens"), jnum(jget(msg, "usage"), "input_tokens"));
    cJSON_ReplaceItemInObject(msg, "usage", cJSON_Duplicate(u, true));
    return msg;
}

/* ------------------------------------------------------------- messages --- */

/* A whole message's shape; returns it parsed. */
static cJSON *check_message(const struct http_resp *r, int max_tokens)
{
    if (r->status != 200)
        print_message("%s\n", r->body);
    assert_int_equal(r->status, 200);
    cJSON *j = http_json(r);
    assert_int_equal(strncmp(jstr(j, "id"), "msg_", 4), 0);
    assert_string_equal(jstr(j, "type"), "message");
    assert_string_equal(jstr(j, "role"), "assistant");
    assert_string_equal(jstr(j, "model"), "qwen3");
    const cJSON *b;
    cJSON_ArrayForEach(b, jget(j, "content"))
    {
        const char *t = jstr(b, "type");
        if (!strcmp(t, "text"))
            assert_non_null(jstr(b, "text"));
        else {
            assert_string_equal(t, "thinking");
            assert_non_null(jstr(b, "thinking"));
            assert_string_equal(jstr(b, "signature"), "");
        }
    }
    const char *reason = jstr(j, "stop_reason");
    assert_non_null(reason);
    const cJSON *u = jget(j, "usage");
    int out        = (int)jnum(u, "output_tokens");
    assert_true(out >= 1 && out <= max_tokens);
    assert_true(jnum(u, "input_tokens") >= 1);
    assert_int_equal(jnum(u, "cache_creation_input_tokens"), 0);
    assert_true(jnum(u, "cache_read_input_tokens") >= 0);
    /* max_tokens exactly when the count reached it (an end of text on the last token may too) */
    if (!strcmp(reason, "max_tokens"))
        assert_int_equal(out, max_tokens);
    else
        assert_true(!strcmp(reason, "end_turn") || !strcmp(reason, "stop_sequence") ||
                    !strcmp(reason, "model_context_window_exceeded"));
    if (strcmp(reason, "stop_sequence"))
        assert_true(cJSON_IsNull(jget(j, "stop_sequence")));
    return j;
}

static void test_message_and_stream(void **state)
{
    (void)state;
    START_OR_SKIP(s);
    const char *body =
        "{\"model\":\"qwen3\",\"max_tokens\":24,\"temperature\":0,\"system\":\"Be "
        "brief.\",\"messages\":[{\"role\":\"user\",\"content\":\"Tell me a story.\"}]%s}";
    char b[512];
    snprintf(b, sizeof b, body, "");
    struct http_resp r = post(&s, "/v1/messages", b);
    cJSON *whole       = check_message(&r, 24);
    http_resp_free(&r);

    /* streamed at temperature 0: the same blocks, stop_reason and output count */
    snprintf(b, sizeof b, body, ",\"stream\":true");
    r = post(&s, "/v1/messages", b);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.headers, "text/event-stream"));
    cJSON *events   = anth_events(r.body);
    cJSON *streamed = assemble(events);
    assert_true(cJSON_Compare(jget(streamed, "content"), jget(whole, "content"), true));
    assert_string_equal(jstr(streamed, "stop_reason"), jstr(whole, "stop_reason"));
    assert_int_equal(jnum(jget(streamed, "usage"), "output_tokens"),
                     jnum(jget(whole, "usage"), "output_tokens"));
    /* the same prompt: its tokens come from the prefix cache now, the total is the same */
    const cJSON *u1 = jget(whole, "usage"), *u2 = jget(streamed, "usage");
    assert_int_equal(jnum(u1, "input_tokens") + jnum(u1, "cache_read_input_tokens"),
                     jnum(u2, "input_tokens") + jnum(u2, "cache_read_input_tokens"));
    cJSON_Delete(events);
    cJSON_Delete(streamed);
    http_resp_free(&r);

    /* a stop sequence taken from the greedy text: the reply ends before it and names it */
    const char *text = NULL;
    const cJSON *blk;
    cJSON_ArrayForEach(blk, jget(whole, "content"))
    {
        if (!strcmp(jstr(blk, "type"), "text"))
            text = jstr(blk, "text");
    }
    if (text && strlen(text) >= 8) {
        char stop[8];
        snprintf(stop, sizeof stop, "%.4s", text + 4);
        if (strstr(text, stop) == text + 4 && !strchr(stop, '"') && !strchr(stop, '\\')) {
            snprintf(b, sizeof b, body, "");
            char sb[600];
            snprintf(sb, sizeof sb, "%.*s,\"stop_sequences\":[\"zzzz\",\"%s\"]}",
                     (int)strlen(b) - 1, b, stop);
            r        = post(&s, "/v1/messages", sb);
            cJSON *j = check_message(&r, 24);
            assert_string_equal(jstr(j, "stop_reason"), "stop_sequence");
            assert_string_equal(jstr(j, "stop_sequence"), stop);
            const cJSON *last =
                cJSON_GetArrayItem(jget(j, "content"), cJSON_GetArraySize(jget(j, "content")) - 1);
            assert_null(strstr(jstr(last, "text"), stop));
            cJSON_Delete(j);
            http_resp_free(&r);
        } else
            print_message("note: no clean stop sequence in %s; stop check left out\n", text);
    } else
        print_message("note: the greedy reply has no text block; stop check left out\n");
    cJSON_Delete(whole);

    /* max_tokens far past the context is clamped: the reply ends at the context's end or
     * earlier, never refused */
    r                  = post(&s, "/v1/messages",
                              "{\"model\":\"qwen3\",\"max_tokens\":100000,\"temperature\":0,\"messages\":[{\"role\":"
                                               "\"user\",\"content\":\"Go on forever.\"}]}");
    cJSON *j           = check_message(&r, 100000);
    const char *reason = jstr(j, "stop_reason");
    assert_true(!strcmp(reason, "end_turn") || !strcmp(reason, "model_context_window_exceeded"));
    const cJSON *u = jget(j, "usage");
    assert_true(jnum(u, "input_tokens") + jnum(u, "cache_read_input_tokens") +
                    jnum(u, "output_tokens") <=
                atoi(CTX) + 1);
    cJSON_Delete(j);
    http_resp_free(&r);
    srv_stop(&s);
}

/* ---------------------------------------------------------- count_tokens --- */

static int count_tokens(const struct srv *s, const char *body)
{
    struct http_resp r = post(s, "/v1/messages/count_tokens", body);
    if (r.status != 200)
        print_message("%s\n", r.body);
    assert_int_equal(r.status, 200);
    cJSON *j = http_json(&r);
    assert_int_equal(cJSON_GetArraySize(j), 1);
    int n = (int)jnum(j, "input_tokens");
    cJSON_Delete(j);
    http_resp_free(&r);
    return n;
}

/* Tokens of the prompt an OpenAI chat request renders: /apply-template, then /tokenize. */
static int openai_prompt_tokens(const struct srv *s, const char *chat_body)
{
    struct http_resp r = post(s, "/apply-template", chat_body);
    assert_int_equal(r.status, 200);
    cJSON *j  = http_json(&r);
    cJSON *tb = cJSON_CreateObject();
    cJSON_AddStringToObject(tb, "content", jstr(j, "prompt"));
    cJSON_AddBoolToObject(tb, "add_special", true);
    char *text = cJSON_PrintUnformatted(tb);
    cJSON_Delete(tb);
    cJSON_Delete(j);
    http_resp_free(&r);
    r = post(s, "/tokenize", text);
    free(text);
    assert_int_equal(r.status, 200);
    j     = http_json(&r);
    int n = cJSON_GetArraySize(jget(j, "tokens"));
    cJSON_Delete(j);
    http_resp_free(&r);
    return n;
}

/* A tool round trip in Anthropic's form... */
static const char anth_conv[] =
    "\"system\":[{\"type\":\"text\",\"text\":\"You can call tools.\",\"cache_control\":"
    "{\"type\":\"ephemeral\"}}],"
    "\"tools\":[{\"name\":\"get_weather\",\"description\":\"Weather now.\",\"input_schema\":"
    "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":"
    "[\"city\"]}}],"
    "\"messages\":[{\"role\":\"user\",\"content\":\"Weather in Paris and Rome?\"},"
    "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"Checking.\"},"
    "{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"get_weather\",\"input\":{\"city\":"
    "\"Paris\"}},{\"type\":\"tool_use\",\"id\":\"toolu_2\",\"name\":\"get_weather\",\"input\":"
    "{\"city\":\"Rome\"}}]},"
    "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_1\","
    "\"content\":\"21C\"},{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_2\",\"is_error\":"
    "true,\"content\":[{\"type\":\"text\",\"text\":\"timeout\"}]},{\"type\":\"text\",\"text\":"
    "\"Summarise.\"}]}]";

/* ...and the same in OpenAI's. */
static const char oai_conv[] =
    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":"
    "\"Weather now.\",\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":"
    "\"string\"}},\"required\":[\"city\"]}}}],"
    "\"messages\":[{\"role\":\"system\",\"content\":\"You can call tools.\"},"
    "{\"role\":\"user\",\"content\":\"Weather in Paris and Rome?\"},"
    "{\"role\":\"assistant\",\"content\":\"Checking.\",\"tool_calls\":[{\"id\":\"toolu_1\","
    "\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":"
    "\"{\\\"city\\\":\\\"Paris\\\"}\"}},{\"id\":\"toolu_2\",\"type\":\"function\",\"function\":"
    "{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Rome\\\"}\"}}]},"
    "{\"role\":\"tool\",\"tool_call_id\":\"toolu_1\",\"content\":\"21C\"},"
    "{\"role\":\"tool\",\"tool_call_id\":\"toolu_2\",\"content\":\"Error: timeout\"},"
    "{\"role\":\"user\",\"content\":\"Summarise.\"}]";

static void test_count_tokens(void **state)
{
    (void)state;
    START_OR_SKIP(s);
    char a[4096], o[4096];
    snprintf(a, sizeof a, "{\"model\":\"qwen3\",%s}", anth_conv);
    snprintf(o, sizeof o, "{%s}", oai_conv);
    int n = count_tokens(&s, a);
    assert_int_equal(n, openai_prompt_tokens(&s, o));
    assert_true(n > 60);

    /* thinking on and off: the template's enable_thinking */
    snprintf(a, sizeof a, "{\"model\":\"qwen3\",\"thinking\":{\"type\":\"disabled\"},%s}",
             anth_conv);
    snprintf(o, sizeof o, "{\"chat_template_kwargs\":{\"enable_thinking\":false},%s}", oai_conv);
    int off = count_tokens(&s, a);
    assert_int_equal(off, openai_prompt_tokens(&s, o));
    assert_true(off > n); /* Qwen3 closes an empty <think></think> in the prompt */
    snprintf(a, sizeof a,
             "{\"model\":\"qwen3\",\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":2048},%s}",
             anth_conv);
    assert_int_equal(count_tokens(&s, a), n);

    /* a real call reads exactly that prompt: input_tokens + cache_read_input_tokens */
    snprintf(a, sizeof a, "{\"model\":\"qwen3\",\"max_tokens\":4,%s}", anth_conv);
    struct http_resp r = post(&s, "/v1/messages", a);
    cJSON *j           = check_message(&r, 4);
    const cJSON *u     = jget(j, "usage");
    assert_int_equal(jnum(u, "input_tokens") + jnum(u, "cache_read_input_tokens"), n);
    cJSON_Delete(j);
    http_resp_free(&r);

    /* a prompt never seen before shares only the template's opening with the earlier ones:
     * input_tokens is the rest */
    const char *fresh =
        "{\"model\":\"qwen3\",%s\"system\":\"Nonce 5f1c9e: be terse.\",\"messages\":"
        "[{\"role\":\"user\",\"content\":\"Hello there.\"}]}";
    snprintf(a, sizeof a, fresh, "");
    int want = count_tokens(&s, a);
    snprintf(a, sizeof a, fresh, "\"max_tokens\":2,");
    r              = post(&s, "/v1/messages", a);
    j              = check_message(&r, 2);
    const int read = (int)jnum(jget(j, "usage"), "cache_read_input_tokens");
    assert_in_range(read, 1, want / 2);
    assert_int_equal(jnum(jget(j, "usage"), "input_tokens"), want - read);
    cJSON_Delete(j);
    http_resp_free(&r);

    /* count_tokens takes a generation's body whole (its generation fields count nothing) */
    int plain = count_tokens(&s, "{\"model\":\"qwen3\",\"messages\":[{\"role\":\"user\","
                                 "\"content\":\"x\"}]}");
    assert_int_equal(count_tokens(&s, "{\"model\":\"qwen3\",\"max_tokens\":5,\"stream\":true,"
                                      "\"temperature\":0,\"messages\":[{\"role\":\"user\","
                                      "\"content\":\"x\"}]}"),
                     plain);

    /* a system message between turns is rendered where it is, as the chat path renders it */
    snprintf(a, sizeof a,
             "{\"model\":\"qwen3\",\"system\":\"S\",\"messages\":[{\"role\":\"user\",\"content\":"
             "\"a\"},{\"role\":\"assistant\",\"content\":\"b\"},{\"role\":\"system\",\"content\":"
             "[{\"type\":\"text\",\"text\":\"Now plan mode.\"}]},{\"role\":\"user\",\"content\":"
             "\"c\"}]}");
    snprintf(
        o, sizeof o,
        "{\"messages\":[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":"
        "\"a\"},{\"role\":\"assistant\",\"content\":\"b\"},{\"role\":\"system\",\"content\":"
        "\"Now plan mode.\"},{\"role\":\"user\",\"content\":\"c\"}]}");
    n = count_tokens(&s, a);
    assert_int_equal(n, openai_prompt_tokens(&s, o));
    assert_true(n > plain + 10);
    srv_stop(&s);
}

/* ------------------------------------------------------ errors and auth --- */

static void test_errors_and_auth(void **state)
{
    (void)state;
    START_OR_SKIP(s);
    const char *ok = "{\"model\":\"qwen3\",\"max_tokens\":2,\"messages\":[{\"role\":\"user\","
                     "\"content\":\"Hi\"}]}";
    /* the key: x-api-key or Authorization: Bearer; a missing or wrong one is a 401 */
    struct http_resp r = http_req(&s, "POST", "/v1/messages", ok, NULL);
    check_error(&r, 401, "authentication_error");
    http_resp_free(&r);
    const char *wrong[] = {"x-api-key: nope", NULL};
    r                   = http_req(&s, "POST", "/v1/messages/count_tokens", ok, wrong);
    check_error(&r, 401, "authentication_error");
    http_resp_free(&r);
    r = http_req(&s, "POST", "/v1/messages", ok, bearer_hdr);
    assert_int_equal(r.status, 200);
    http_resp_free(&r);
    r = http_req(&s, "GET", "/v1/models", NULL, key_hdr); /* every guarded route takes it */
    assert_int_equal(r.status, 200);
    http_resp_free(&r);

    struct {
        const char *body, *says;
    } bad[] = {
        {"{\"model\":\"qwen3\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}",
         "max_tokens: Field required"},
        {"{\"model\":\"qwen3\",\"max_tokens\":2,\"temperature\":2,\"messages\":[{\"role\":"
         "\"user\",\"content\":\"Hi\"}]}",
         "temperature: Input should be between 0 and 1, but got 2"},
        {"{\"model\":\"qwen3\",\"max_tokens\":2,\"messages\":[{\"role\":\"user\",\"content\":"
         "[{\"type\":\"image\",\"source\":{\"type\":\"base64\",\"media_type\":\"image/png\","
         "\"data\":\"AAAA\"}}]}]}",
         "messages.0.content.0: a 'image' block is not supported"},
        {"{\"model\":\"qwen3\",\"max_tokens\":2,\"mcp_servers\":[{\"type\":\"url\",\"url\":"
         "\"https://mcp.example\",\"name\":\"x\"}],\"messages\":[{\"role\":\"user\",\"content\":"
         "\"Hi\"}]}",
         "mcp_servers: this server connects to no MCP servers"},
        {"{\"model\":\"qwen3\",\"max_tokens\":2,\"messages\":[{\"role\":\"user\",\"content\":"
         "\"Hi\"},{\"role\":\"assistant\",\"content\":\"Sure\"}]}",
         "prefilled assistant reply is not supported"},
        {"{\"model\":", "There was an error parsing the body of your request"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        r = post(&s, "/v1/messages", bad[i].body);
        check_error(&r, 400, "invalid_request_error");
        if (!strstr(r.body, bad[i].says))
            print_message("want '%s' in %s\n", bad[i].says, r.body);
        assert_non_null(strstr(r.body, bad[i].says));
        http_resp_free(&r);
    }
    /* the template's refusal and the context's bound come back in this API's shape too */
    char big[40000];
    int at = snprintf(big, sizeof big,
                      "{\"model\":\"qwen3\",\"max_tokens\":2,\"messages\":[{"
                      "\"role\":\"user\",\"content\":\"");
    for (int i = 0; i < 1500; i++)
        at += snprintf(big + at, sizeof big - (size_t)at, "word ");
    snprintf(big + at, sizeof big - (size_t)at, "\"}]}");
    r = post(&s, "/v1/messages", big);
    check_error(&r, 400, "invalid_request_error");
    assert_non_null(strstr(r.body, "--ctx-size"));
    http_resp_free(&r);

    r = http_req(&s, "GET", "/v1/messages", NULL, key_hdr);
    check_error(&r, 405, "invalid_request_error");
    http_resp_free(&r);

    /* a body past --max-body: Anthropic's 413 before the body is read */
    size_t n    = 70000;
    char *large = malloc(n + 200);
    int k       = snprintf(large, n + 200, "{\"model\":\"qwen3\",\"max_tokens\":2,\"system\":\"");
    memset(large + k, 'a', n);
    snprintf(large + k + n, 200, "\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}");
    r = post(&s, "/v1/messages", large);
    free(large);
    check_error(&r, 413, "request_too_large");
    http_resp_free(&r);
    srv_stop(&s);
}

/* ------------------------------------------------------- Claude Code --- */

/* The text blocks of a message joined, and its thinking blocks joined (for comparing). */
static char *reply_text(const cJSON *msg)
{
    size_t cap = 1;
    const cJSON *b;
    cJSON_ArrayForEach(b, jget(msg, "content"))
    {
        const char *t = jstr(b, "text") ? jstr(b, "text") : jstr(b, "thinking");
        cap += t ? strlen(t) + 1 : 0;
    }
    char *out = calloc(1, cap);
    cJSON_ArrayForEach(b, jget(msg, "content"))
    {
        const char *t = jstr(b, "text") ? jstr(b, "text") : jstr(b, "thinking");
        if (t) {
            strcat(out, t);
            strcat(out, "|");
        }
    }
    return out;
}

/* The tools and conversation both bodies share. */
/* clang-format off */
#define CC_TOOLS                                                                                   \
    "\"tools\":[{\"name\":\"Read\",\"description\":\"Read a file.\",\"input_schema\":{\"type\":"   \
    "\"object\",\"properties\":{\"file_path\":{\"type\":\"string\"}},\"required\":"                \
    "[\"file_path\"],\"additionalProperties\":false},\"strict\":true%s}]"
/* clang-format on */
#define CC_USER "Say hello, then read /etc/hostname."

/*
 * What Claude Code 2.1 adds to a request (a billing header with its per-
 * request stamp, cache_control, metadata, context_management, output_config
 * effort, adaptive thinking, betas, service_tier, mcp_servers: [], tool
 * flags, and fields no API defines yet) changes nothing in the reply: at
 * temperature 0 the same text comes back as for the plain body, and a
 * stamp that changes between requests leaves the cached prefix whole.
 */
static void test_claude_code_body(void **state)
{
    (void)state;
    START_OR_SKIP(s);
    char plain[4096], cc[8192];
    char tools_plain[1024], tools_cc[1024];
    snprintf(tools_plain, sizeof tools_plain, CC_TOOLS, "");
    snprintf(tools_cc, sizeof tools_cc, CC_TOOLS,
             ",\"cache_control\":{\"type\":\"ephemeral\"},\"defer_loading\":false,"
             "\"eager_input_streaming\":true,\"input_examples\":[{\"file_path\":\"/a\"}],"
             "\"some_new_flag\":1");
    snprintf(plain, sizeof plain,
             "{\"model\":\"qwen3\",\"max_tokens\":24,\"temperature\":0,\"system\":["
             "{\"type\":\"text\",\"text\":\"x-anthropic-billing-header: cc_version=2.1.3; "
             "cc_entrypoint=cli; cch=0a1b2;\"},{\"type\":\"text\",\"text\":\"You are a coding "
             "agent.\"}],%s,\"messages\":[{\"role\":\"user\",\"content\":\"" CC_USER "\"}]}",
             tools_plain);
    snprintf(cc, sizeof cc,
             "{\"model\":\"qwen3\",\"max_tokens\":24,\"temperature\":0,\"top_k\":0,"
             "\"stream\":false,\"metadata\":{\"user_id\":\"user_1_account_2_session_3\"},"
             "\"service_tier\":\"auto\",\"mcp_servers\":[],\"container\":null,"
             "\"betas\":[\"interleaved-thinking-2025-05-14\",\"context-management-2025-06-27\"],"
             "\"thinking\":{\"type\":\"adaptive\"},\"output_config\":{\"effort\":\"high\"},"
             "\"context_management\":{\"edits\":[{\"type\":\"clear_thinking_20251015\","
             "\"keep\":\"all\"}]},\"diagnostics\":{\"x\":1},\"not_yet_defined\":true,"
             "\"system\":[{\"type\":\"text\",\"text\":\"x-anthropic-billing-header: "
             "cc_version=2.1.3; cc_entrypoint=cli; cch=f9e8d;\"},{\"type\":\"text\",\"text\":"
             "\"You are a coding agent.\",\"cache_control\":{\"type\":\"ephemeral\",\"ttl\":"
             "\"1h\"}}],%s,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\","
             "\"text\":\"" CC_USER "\",\"cache_control\":{\"type\":\"ephemeral\"}}],"
             "\"extra\":0}]}",
             tools_cc);
    struct http_resp r = post(&s, "/v1/messages", plain);
    cJSON *a           = check_message(&r, 24);
    http_resp_free(&r);
    r        = post(&s, "/v1/messages", cc);
    cJSON *b = check_message(&r, 24);
    http_resp_free(&r);
    char *ta = reply_text(a), *tb = reply_text(b);
    if (strcmp(ta, tb))
        print_message("plain: %s\nclaude code: %s\n", ta, tb);
    assert_string_equal(ta, tb);
    assert_string_equal(jstr(a, "stop_reason"), jstr(b, "stop_reason"));
    /* the same prompt, the second time from the prefix cache almost whole */
    const cJSON *ua = jget(a, "usage"), *ub = jget(b, "usage");
    int total = (int)(jnum(ua, "input_tokens") + jnum(ua, "cache_read_input_tokens"));
    assert_int_equal(jnum(ub, "input_tokens") + jnum(ub, "cache_read_input_tokens"), total);
    assert_true(jnum(ub, "cache_read_input_tokens") >= total - 2);
    free(ta);
    free(tb);
    cJSON_Delete(a);
    cJSON_Delete(b);

    /* count_tokens of the Claude Code body: the same prompt */
    char ct[8192];
    snprintf(ct, sizeof ct, "%s", cc);
    assert_int_equal(count_tokens(&s, ct), total);

    /* output_config.format: the reply is JSON valid against the schema */
    r                = post(&s, "/v1/messages",
                            "{\"model\":\"qwen3\",\"max_tokens\":40,\"temperature\":0,\"thinking\":{\"type\":"
                                           "\"disabled\"},\"output_config\":{\"effort\":\"low\",\"format\":{\"type\":"
                                           "\"json_schema\",\"schema\":{\"type\":\"object\",\"properties\":{\"ok\":{\"type\":"
                                           "\"boolean\"}},\"required\":[\"ok\"],\"additionalProperties\":false}}},\"messages\":"
                                           "[{\"role\":\"user\",\"content\":\"Answer in JSON.\"}]}");
    cJSON *j         = check_message(&r, 40);
    const cJSON *blk = cJSON_GetArrayItem(jget(j, "content"), 0);
    assert_string_equal(jstr(blk, "type"), "text");
    if (!strcmp(jstr(j, "stop_reason"), "end_turn")) {
        cJSON *v = cJSON_Parse(jstr(blk, "text"));
        if (!v)
            print_message("not JSON: %s\n", jstr(blk, "text"));
        assert_true(cJSON_IsObject(v));
        assert_true(cJSON_IsBool(jget(v, "ok")));
        assert_int_equal(cJSON_GetArraySize(v), 1);
        cJSON_Delete(v);
    } else {
        assert_int_equal(strspn(jstr(blk, "text"), " \t\n"), strcspn(jstr(blk, "text"), "{"));
    }
    cJSON_Delete(j);
    http_resp_free(&r);
    srv_stop(&s);
}

/* --------------------------------------------------------------- the SDK --- */

static void test_anthropic_npm_client(void **state)
{
    (void)state;
    if (!srv_have_node())
        skip();
    START_OR_SKIP(s);
    const char *env[] = {
        "HEARTH_ORIGIN", s.base, "HEARTH_MODEL_ALIAS", "qwen3", "HEARTH_API_KEY", KEY, NULL};
    srv_node_test("anthropic.test.mjs", env);
    srv_stop(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_message_and_stream, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_count_tokens, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_errors_and_auth, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_claude_code_body, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_anthropic_npm_client, srv_kill_leftovers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
