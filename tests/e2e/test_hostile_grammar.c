/*
 * test_hostile_grammar.c: grammars and schemas too costly to compile, sent
 * to the real server the way a hostile or careless client would. Each
 * once held the preparation thread for minutes (or reached a 500); each
 * must now get a 400 in its path's dialect naming the cost (src/grammar,
 * struct gbudget), while an ordinary 2-token request sent after it, while
 * it is in flight, completes with 200:
 *   - nested bounded repetitions: a GBNF grammar, a json_schema pattern, a
 *     tool's parameters (chat completions) and input_schema (messages);
 *   - a 100,000-alternative GBNF grammar and a 100,000-value enum;
 *   - an object schema with 20,000 required properties.
 * stories260K with Qwen3's template (whose Hermes tool calls hearth can
 * constrain, so a forced call compiles a grammar). No check rests on
 * timing: the hostile request runs in the background, the ordinary one is
 * awaited, then the hostile one's answer is read.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/serveutil.h"

#define QWEN3_TPL "templates/Qwen-Qwen3-0.6B.jinja"

/* The nested repetitions of the issue, as GBNF and as a JSON string pattern. */
#define NESTED_GBNF    "root ::= (([a-z]){0,1000}){0,1000}"
#define NESTED_PATTERN "^(([a-z]){0,1000}){0,1000}$"

static const char ordinary[] =
    "{\"messages\":[{\"role\":\"user\",\"content\":\"Once upon a time\"}],\"max_tokens\":2,"
    "\"temperature\":0}";

/* Text built by appending, grown as needed. */
struct buf {
    char *s;
    size_t n, cap;
};

/* Room for k more bytes and a NUL. */
static void reserve(struct buf *b, size_t k)
{
    if (b->n + k + 1 <= b->cap)
        return;
    b->cap = (b->n + k + 1) * 2;
    b->s   = realloc(b->s, b->cap);
    assert_non_null(b->s);
}

/* Appends fmt with its one int. */
static void add(struct buf *b, const char *fmt, int i)
{
    int k = snprintf(NULL, 0, fmt, i);
    assert_true(k >= 0);
    reserve(b, (size_t)k);
    b->n += (size_t)snprintf(b->s + b->n, (size_t)k + 1, fmt, i);
}

static void add_s(struct buf *b, const char *s)
{
    size_t k = strlen(s);
    reserve(b, k);
    memcpy(b->s + b->n, s, k + 1);
    b->n += k;
}

/*
 * Posts body to path in the background, sends the ordinary request and
 * checks its 200, then checks the hostile one's answer: 400, the dialect's
 * error shape (OpenAI's with param, or Anthropic's), a message containing
 * want. The server must still be healthy after.
 */
static void hostile(struct srv *s, const char *path, const char *body, const char *param,
                    const char *want)
{
    char out[700], hdr[720];
    snprintf(out, sizeof out, "%s/hostile.json", s->dir);
    snprintf(hdr, sizeof hdr, "%s.headers", out);
    pid_t bg = http_post_bg(s, path, body, out, "120");
    assert_true(bg > 0);

    struct http_resp ok = http_post(s, "/v1/chat/completions", ordinary);
    if (ok.status != 200)
        fail_msg("the ordinary request beside %s got %d: %s", path, ok.status, ok.body);
    cJSON *j = http_json(&ok);
    assert_int_equal((int)jnum(jget(j, "usage"), "completion_tokens"), 2);
    cJSON_Delete(j);
    http_resp_free(&ok);

    assert_int_equal(srv_wait_pid(bg, 150), 0);
    char *h               = srv_slurp(hdr);
    struct http_resp resp = {http_status_of(h), srv_slurp(out), h};
    if (param) {
        char *msg = http_check_error(&resp, 400, param);
        if (!strstr(msg, want))
            fail_msg("%s: \"%s\" does not name the cost (\"%s\")", path, msg, want);
        free(msg);
    } else { /* Anthropic's shape */
        if (resp.status != 400)
            fail_msg("%s: %d, not 400: %s", path, resp.status, resp.body);
        j                  = http_json(&resp);
        const cJSON *error = jget(j, "error");
        assert_string_equal(jstr(j, "type"), "error");
        assert_string_equal(jstr(error, "type"), "invalid_request_error");
        if (!strstr(jstr(error, "message"), want))
            fail_msg("%s: \"%s\" does not name the cost (\"%s\")", path, jstr(error, "message"),
                     want);
        cJSON_Delete(j);
    }
    http_resp_free(&resp);

    struct http_resp health = http_get(s, "/health");
    assert_int_equal(health.status, 200);
    http_resp_free(&health);
}

/* {"messages":[...],"max_tokens":2, then the rest (which closes the object). */
static void chat_head(struct buf *b)
{
    b->n = 0;
    add_s(b, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":2,");
}

static void test_costly_grammars_get_400s(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    TU_SHARED_OR_SKIP(tpl_path, QWEN3_TPL);
    char tpl[4096];
    snprintf(tpl, sizeof tpl, "%s", tpl_path);
    struct srv s;
    const char *extra[] = {"--chat-template-file", tpl, "--max-body", "16777216", NULL};
    srv_start(&s, extra);
    struct buf b = {0};

    /* GBNF: nested repetitions (minutes before), 100,000 alternatives (a 500 before) */
    chat_head(&b);
    add_s(&b, "\"grammar\":\"" NESTED_GBNF "\"}");
    hostile(&s, "/v1/chat/completions", b.s, "grammar",
            "the grammar would need more than 32768 parser states");
    chat_head(&b);
    add_s(&b, "\"grammar\":\"root ::= \\\"w0\\\"");
    for (int i = 1; i < 100000; i++)
        add(&b, " | \\\"w%d\\\"", i);
    add_s(&b, "\"}");
    hostile(&s, "/v1/chat/completions", b.s, "grammar", "more than 4096 parse stacks at once");

    /* json_schema: a 100,000-value enum, 20,000 required properties, a nested pattern */
    static const char rf[] = "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":"
                             "{\"name\":\"r\",\"schema\":";
    chat_head(&b);
    add_s(&b, rf);
    add_s(&b, "{\"enum\":[\"v0\"");
    for (int i = 1; i < 100000; i++)
        add(&b, ",\"v%d\"", i);
    add_s(&b, "]}}}}");
    hostile(&s, "/v1/chat/completions", b.s, "response_format",
            "more than 4096 parse stacks at once");
    chat_head(&b);
    add_s(&b, rf);
    add_s(&b, "{\"type\":\"object\",\"properties\":{\"p0\":{\"type\":\"integer\"}");
    for (int i = 1; i < 20000; i++)
        add(&b, ",\"p%d\":{\"type\":\"integer\"}", i);
    add_s(&b, "},\"required\":[\"p0\"");
    for (int i = 1; i < 20000; i++)
        add(&b, ",\"p%d\"", i);
    add_s(&b, "]}}}}");
    hostile(&s, "/v1/chat/completions", b.s, "response_format",
            "the grammar would need more than 32768 parser states");
    chat_head(&b);
    add_s(&b, rf);
    add_s(&b, "{\"type\":\"string\",\"pattern\":\"" NESTED_PATTERN "\"}}}}");
    hostile(&s, "/v1/chat/completions", b.s, "response_format",
            "the grammar would need more than 32768 parser states");

    /* a forced tool call whose parameters nest repetitions, in both dialects */
    static const char params[] = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\","
                                 "\"pattern\":\"" NESTED_PATTERN "\"}},\"required\":[\"a\"]}";
    chat_head(&b);
    add_s(&b, "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":");
    add_s(&b, params);
    add_s(&b, "}}],\"tool_choice\":\"required\"}");
    hostile(&s, "/v1/chat/completions", b.s, "tool_choice",
            "the grammar would need more than 32768 parser states");
    b.n = 0;
    add_s(&b, "{\"model\":\"m\",\"max_tokens\":2,\"messages\":[{\"role\":\"user\",\"content\":"
              "\"hi\"}],\"tools\":[{\"name\":\"f\",\"input_schema\":");
    add_s(&b, params);
    add_s(&b, "}],\"tool_choice\":{\"type\":\"any\"}}");
    hostile(&s, "/v1/messages", b.s, NULL, "the grammar would need more than 32768 parser states");

    free(b.s);
    srv_stop(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_costly_grammars_get_400s, srv_kill_leftovers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
