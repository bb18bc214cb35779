/*
 * test_oai_grammar.c: src/serve/oai_grammar.c, the grammar a request's
 * reply must match: forced and lazy tool calls in a template's syntax,
 * schemas, and where reasoning may come first. Replies are checked whole
 * with grammar_accepts_string, and a lazy grammar through a matcher over a
 * vocabulary of single bytes. Templates come from ../shared/templates.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"
#include "serve/openai.h"
#include "chat/chat_template.h"
#include "util/chatutil.h"
#include "util/testutil.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

#define QWEN3  "templates/Qwen-Qwen3-0.6B.jinja"
#define LLAMA3 "templates/meta-llama-Llama-3.1-8B-Instruct.jinja"

static const char TOOLS[] =
    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":"
    "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"maxLength\":10}},"
    "\"required\":[\"city\"],\"additionalProperties\":false}}},{\"type\":\"function\","
    "\"function\":{\"name\":\"add\",\"parameters\":{\"type\":\"object\",\"properties\":"
    "{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"],\"additionalProperties\":false}}}]";

struct built {
    struct grammar *g;
    char **trig;
    int32_t n_trig;
    struct oai_error e;
    bool ok;
};

/* The grammar of a chat request whose fields are extra, for a prompt text. */
static struct built build(const struct chat_template *t, const struct grammar_vocab *gv,
                          const char *extra, const char *prompt)
{
    struct grammar_cache *gc = grammar_cache_new(gv, 4);
    assert_non_null(gc);
    char body[4096];
    snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]%s%s}",
             extra[0] ? "," : "", extra);
    struct oai_request r;
    struct built b = {0};
    if (!oai_parse(OAI_CHAT, body, strlen(body), &r, &b.e)) {
        print_message("parse: %s\n", b.e.message);
        fail();
    }
    b.ok = oai_grammar(&r, t, gc, prompt, strlen(prompt), &b.g, &b.trig, &b.n_trig, &b.e);
    oai_request_free(&r);
    grammar_cache_free(gc); /* the grammar holds its own reference */
    return b;
}

static void built_free(struct built *b)
{
    if (b->g)
        grammar_unref(b->g);
    for (int32_t i = 0; i < b->n_trig; i++)
        free(b->trig[i]);
    free(b->trig);
}

static void accepts(const struct built *b, const char *s, bool want)
{
    bool got = grammar_accepts_string(b->g, s, strlen(s));
    if (got != want)
        print_message("%s: %s\n", want ? "should accept" : "should reject", s);
    assert_int_equal(got, want);
}

#define CALL_ADD "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\":12}}\n</tool_call>"
#define CALL_WEATHER                                                                               \
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>"

/* Prompts as Qwen3's template ends them: thinking closed, free, opened. */
#define P_CLOSED "<|im_start|>assistant\n<think>\n\n</think>\n\n"
#define P_FREE   "<|im_start|>assistant\n"
#define P_OPEN   "<|im_start|>assistant\n<think>\n"

static void test_forced_hermes_calls(void **state)
{
    (void)state;
    struct chat_template *t = tu_load_template(QWEN3);
    if (!t)
        skip();
    struct grammar_vocab *gv = tu_byte_vocab();
    char extra[2048];
    snprintf(extra, sizeof extra, "%s,\"tool_choice\":\"required\"", TOOLS);
    struct built b = build(t, gv, extra, P_CLOSED);
    assert_true(b.ok);
    assert_non_null(b.g);
    assert_int_equal(b.n_trig, 0); /* forced: not lazy */
    accepts(&b, CALL_ADD, true);
    accepts(&b, CALL_WEATHER, true);
    accepts(&b, CALL_ADD "\n" CALL_WEATHER, true); /* parallel calls by default */
    accepts(&b, "", false);
    accepts(&b, "Sure. " CALL_ADD, false);
    accepts(&b, "<think>x</think>" CALL_ADD, false); /* the prompt closed reasoning */
    accepts(&b, "<tool_call>\n{\"name\": \"sub\", \"arguments\": {\"a\":1}}\n</tool_call>", false);
    accepts(&b, "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\":\"x\"}}\n</tool_call>",
            false);
    accepts(&b,
            "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
            "\"Ouagadougou\"}}\n</tool_call>",
            false); /* maxLength 10 */
    built_free(&b);

    snprintf(extra, sizeof extra,
             "%s,\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"}},"
             "\"parallel_tool_calls\":false",
             TOOLS);
    b = build(t, gv, extra, P_CLOSED);
    assert_true(b.ok);
    accepts(&b, CALL_WEATHER, true);
    accepts(&b, CALL_ADD, false);
    accepts(&b, CALL_WEATHER "\n" CALL_WEATHER, false);
    built_free(&b);
    grammar_vocab_free(gv);
    chat_template_free(t);
}

static void test_reasoning_before_the_reply(void **state)
{
    (void)state;
    struct chat_template *t = tu_load_template(QWEN3);
    if (!t)
        skip();
    struct grammar_vocab *gv = tu_byte_vocab();
    char extra[2048];
    snprintf(extra, sizeof extra, "%s,\"tool_choice\":\"required\"", TOOLS);
    /* free: a reasoning block may come first; its text cannot hold the closing marker */
    struct built b = build(t, gv, extra, P_FREE);
    assert_true(b.ok);
    accepts(&b, CALL_ADD, true);
    accepts(&b, "<think>\nI should add. a < b, </b>, </thin, <</think>\n\n" CALL_ADD, true);
    accepts(&b, "<think>a</think>b</think>\n" CALL_ADD, false);
    accepts(&b, "<think>unclosed" CALL_ADD, false);
    built_free(&b);
    /* open: the reply starts inside the block and must close it */
    b = build(t, gv, extra, P_OPEN);
    assert_true(b.ok);
    accepts(&b, "hmm</think>\n\n" CALL_ADD, true);
    accepts(&b, "</think>" CALL_ADD, true);
    accepts(&b, CALL_ADD, false);
    built_free(&b);
    /* reasoning_format none: no block, whatever the prompt */
    snprintf(extra, sizeof extra, "%s,\"tool_choice\":\"required\",\"reasoning_format\":\"none\"",
             TOOLS);
    b = build(t, gv, extra, P_FREE);
    assert_true(b.ok);
    accepts(&b, CALL_ADD, true);
    accepts(&b, "<think>x</think>" CALL_ADD, false);
    built_free(&b);
    grammar_vocab_free(gv);
    chat_template_free(t);
}

static void test_schemas_and_grammars(void **state)
{
    (void)state;
    struct chat_template *t = tu_load_template(QWEN3);
    if (!t)
        skip();
    struct grammar_vocab *gv = tu_byte_vocab();
    struct built b =
        build(t, gv,
              "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":"
              "\"n\",\"schema\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":"
              "\"boolean\"}},\"required\":[\"a\"],\"additionalProperties\":false}}}",
              P_CLOSED);
    assert_true(b.ok);
    accepts(&b, "{\"a\":true}", true);
    accepts(&b, "{\"a\":1}", false);
    accepts(&b, CALL_ADD, false);
    built_free(&b);
    /* tools offered (auto) beside a schema: either a call or the object */
    char extra[2048];
    snprintf(extra, sizeof extra, "%s,\"json_schema\":{\"type\":\"integer\"}", TOOLS);
    b = build(t, gv, extra, P_CLOSED);
    assert_true(b.ok);
    assert_int_equal(b.n_trig, 0);
    accepts(&b, "42", true);
    accepts(&b, CALL_ADD, true);
    accepts(&b, "x", false);
    built_free(&b);
    /* GBNF as given; its errors are 400s naming the field */
    b = build(t, gv, "\"grammar\":\"root ::= [0-9]{2}\"", P_CLOSED);
    assert_true(b.ok);
    accepts(&b, "42", true);
    accepts(&b, "4", false);
    built_free(&b);
    b = build(t, gv, "\"grammar\":\"root ::= [0-9\"", P_CLOSED);
    assert_false(b.ok);
    assert_int_equal(b.e.status, 400);
    assert_string_equal(b.e.param, "grammar");
    assert_non_null(strstr(b.e.message, "line 1"));
    /* a grammar of no sentence is the client's error, not a job that fails at its first step */
    b = build(t, gv, "\"grammar\":\"root ::= [z-a]\"", P_CLOSED);
    assert_false(b.ok);
    assert_int_equal(b.e.status, 400);
    assert_null(b.g);
    assert_non_null(strstr(b.e.message, "no reply can match it"));
    b = build(t, gv, "\"json_schema\":{\"type\":\"object\",\"not\":{}}", P_CLOSED);
    assert_false(b.ok);
    assert_int_equal(b.e.status, 400);
    assert_string_equal(b.e.param, "json_schema");
    assert_non_null(strstr(b.e.message, "\"not\""));
    /* nothing to constrain: no grammar */
    b = build(t, gv, "\"temperature\":0", P_CLOSED);
    assert_true(b.ok);
    assert_null(b.g);
    grammar_vocab_free(gv);
    chat_template_free(t);
}

/* Feeds s one byte token at a time; false at the first byte the matcher refuses. */
static bool feed(struct grammar_matcher *m, const char *s)
{
    char err[256];
    for (; *s; s++) {
        hearth_token tok = (unsigned char)*s;
        if (!grammar_matcher_allows(m, tok))
            return false;
        if (!grammar_matcher_accept(m, tok, err, sizeof err)) {
            print_message("accept: %s\n", err);
            return false;
        }
    }
    return true;
}

static void test_auto_calls_are_lazy(void **state)
{
    (void)state;
    struct chat_template *t = tu_load_template(QWEN3);
    if (!t)
        skip();
    struct grammar_vocab *gv = tu_byte_vocab();
    char extra[2048];
    snprintf(extra, sizeof extra, "%s,\"tool_choice\":\"auto\"", TOOLS);
    struct built b = build(t, gv, extra, P_FREE);
    assert_true(b.ok);
    assert_non_null(b.g);
    assert_int_equal(b.n_trig, 1);
    assert_string_equal(b.trig[0], "<tool_call>");
    /* free text (any byte, EOG too) until the marker; from there only a valid call */
    struct grammar_matcher *m = grammar_matcher_new(b.g, (const char *const *)b.trig, b.n_trig);
    assert_non_null(m);
    assert_true(feed(m, "Let me check {\"name\" <tool_"));
    assert_false(grammar_matcher_active(m));
    assert_true(grammar_matcher_allows(m, 256));
    assert_true(feed(m, "call>"));
    assert_true(grammar_matcher_active(m));
    assert_false(grammar_matcher_allows(m, 256)); /* a call once started must finish */
    assert_false(grammar_matcher_allows(m, 'x'));
    assert_true(feed(m, "\n{\"name\": \"add\", \"arguments\": {\"a\":"));
    assert_false(grammar_matcher_allows(m, '"'));
    assert_true(feed(m, "7}}\n</tool_call>"));
    assert_true(grammar_matcher_can_end(m));
    assert_true(grammar_matcher_allows(m, 256));
    grammar_matcher_free(m);
    built_free(&b);
    /* a tool whose parameters hearth cannot constrain: auto calls stay free, forced ones are
     * refused naming the tool */
    static const char odd[] = "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\","
                              "\"parameters\":{\"type\":\"object\",\"properties\":{\"x\":"
                              "{\"type\":\"number\",\"minimum\":0.5}}}}}]";
    b                       = build(t, gv, odd, P_FREE);
    assert_true(b.ok);
    assert_null(b.g);
    snprintf(extra, sizeof extra, "%s,\"tool_choice\":\"required\"", odd);
    b = build(t, gv, extra, P_FREE);
    assert_false(b.ok);
    assert_int_equal(b.e.status, 400);
    assert_string_equal(b.e.param, "tools[0].function.parameters");
    /* tool_choice none: nothing */
    snprintf(extra, sizeof extra, "%s,\"tool_choice\":\"none\"", TOOLS);
    b = build(t, gv, extra, P_FREE);
    assert_true(b.ok);
    assert_null(b.g);
    grammar_vocab_free(gv);
    chat_template_free(t);
}

static void test_llama3_calls_and_refused_formats(void **state)
{
    (void)state;
    struct chat_template *t = tu_load_template(LLAMA3);
    if (!t)
        skip();
    struct grammar_vocab *gv = tu_byte_vocab();
    char extra[2048];
    snprintf(extra, sizeof extra, "%s,\"tool_choice\":\"required\"", TOOLS);
    struct built b = build(t, gv, extra, "<|start_header_id|>assistant<|end_header_id|>\n\n");
    assert_true(b.ok);
    accepts(&b, "{\"name\": \"add\", \"parameters\": {\"a\":3}}", true);
    accepts(&b, "{\"name\": \"add\", \"arguments\": {\"a\":3}}", false);
    built_free(&b);
    /* auto on Llama 3: no marker to wait for, so no grammar */
    snprintf(extra, sizeof extra, "%s", TOOLS);
    b = build(t, gv, extra, "");
    assert_true(b.ok);
    assert_null(b.g);
    chat_template_free(t);
    /* a format hearth writes no grammar for: forced calls are refused, naming it */
    t = tu_load_template("templates/GLM-4.6.jinja");
    snprintf(extra, sizeof extra, "%s,\"tool_choice\":\"required\"", TOOLS);
    b = build(t, gv, extra, "");
    assert_false(b.ok);
    assert_int_equal(b.e.status, 400);
    assert_string_equal(b.e.param, "tool_choice");
    assert_non_null(strstr(b.e.message, "glm"));
    grammar_vocab_free(gv);
    chat_template_free(t);
}

/* A forced call (required, then named "add") in template rel's syntax: each good reply is
 * accepted, each bad one refused; auto waits for trigger. */
static void forced_in(const char *rel, const char *const *good, size_t n_good,
                      const char *const *bad, size_t n_bad, const char *trigger)
{
    struct chat_template *t = tu_load_template(rel);
    if (!t)
        skip();
    struct grammar_vocab *gv = tu_byte_vocab();
    char extra[2048];
    snprintf(extra, sizeof extra, "%s,\"tool_choice\":\"required\"", TOOLS);
    struct built b = build(t, gv, extra, "");
    if (!b.ok)
        print_message("%s: %s\n", rel, b.e.message);
    assert_true(b.ok);
    for (size_t i = 0; i < n_good; i++)
        accepts(&b, good[i], true);
    for (size_t i = 0; i < n_bad; i++)
        accepts(&b, bad[i], false);
    built_free(&b);
    /* named: only that function */
    snprintf(extra, sizeof extra,
             "%s,\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"add\"}}", TOOLS);
    b = build(t, gv, extra, "");
    assert_true(b.ok);
    accepts(&b, good[0], true);
    accepts(&b, good[1], false); /* good[1] calls get_weather */
    built_free(&b);
    b = build(t, gv, TOOLS, "");
    assert_true(b.ok);
    assert_non_null(b.g);
    assert_int_equal(b.n_trig, 1);
    assert_string_equal(b.trig[0], trigger);
    built_free(&b);
    grammar_vocab_free(gv);
    chat_template_free(t);
}

#define XML_ADD(v)                                                                                 \
    "<tool_call>\n<function=add>\n<parameter=a>\n" v "\n</parameter>\n</function>\n</tool_call>"
#define XML_WEATHER(v)                                                                             \
    "<tool_call>\n<function=get_weather>\n<parameter=city>\n" v "\n</parameter>\n</function>\n"    \
    "</tool_call>"

static void test_qwen3_coder_calls(void **state)
{
    (void)state;
    static const char *const good[] = {
        XML_ADD("12"), XML_WEATHER("Oslo"), XML_WEATHER("São Paulo\nBR"),
        XML_ADD("-3") "\n" XML_WEATHER("Oslo"), /* parallel calls, a newline between */
    };
    static const char *const bad[] = {
        XML_ADD("x"),                                             /* not an integer */
        XML_ADD("1.5"),                                           /* nor this */
        "<tool_call>\n<function=add>\n</function>\n</tool_call>", /* a required one missing */
        "<tool_call>\n<function=sub>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>",
        "<tool_call>\n<function=add>\n<parameter=b>\n1\n</parameter>\n</function>\n</tool_call>",
        "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}}\n</tool_call>",
        "Sure: " XML_ADD("1"),
    };
    forced_in("templates/Qwen3.5-4B.jinja", good, N(good), bad, N(bad), "<tool_call>");
    forced_in("templates/Qwen3-Coder.jinja", good, N(good), bad, N(bad), "<tool_call>");
}

static void test_mistral_calls(void **state)
{
    (void)state;
    static const char *const good[] = {
        "[TOOL_CALLS]add[ARGS]{\"a\":3}",
        "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Oslo\"}",
        "[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {\"a\":3}}]",
        "[TOOL_CALLS]add[ARGS]{\"a\":3}[TOOL_CALLS]add[ARGS]{\"a\":4}",
    };
    static const char *const bad[] = {
        "[TOOL_CALLS]add[ARGS]{\"a\":\"x\"}",
        "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Reykjavik, IS\"}", /* maxLength 10 */
        "[TOOL_CALLS]sub[ARGS]{\"a\":3}",
        "add[ARGS]{\"a\":3}",
    };
    forced_in("templates/Mistral-Small-3.2-24B-Instruct-2506.jinja", good, N(good), bad, N(bad),
              "[TOOL_CALLS]");
    forced_in("templates/mistralai-Mistral-Nemo-Instruct-2407.jinja", good, N(good), bad, N(bad),
              "[TOOL_CALLS]");
}

#define DS_BEGIN "<｜tool▁calls▁begin｜>"
#define DS_END   "<｜tool▁calls▁end｜>"
#define R1_CALL(name, args)                                                                        \
    "<｜tool▁call▁begin｜>function<｜tool▁sep｜>" name "\n```json\n" args "\n```<"                 \
    "｜tool▁call▁end｜>"
#define V31_CALL(name, args)                                                                       \
    "<｜tool▁call▁begin｜>" name "<｜tool▁sep｜>" args "<｜tool▁call▁end｜>"

static void test_deepseek_calls(void **state)
{
    (void)state;
    static const char *const r1_good[] = {
        DS_BEGIN R1_CALL("add", "{\"a\":3}") DS_END,
        DS_BEGIN R1_CALL("get_weather", "{\"city\": \"Oslo\"}") DS_END,
        DS_BEGIN R1_CALL("add", "{\"a\":3}") "\n" R1_CALL("add", "{\"a\":4}") DS_END,
    };
    static const char *const r1_bad[] = {
        DS_BEGIN R1_CALL("add", "{\"a\":\"3\"}") DS_END,
        DS_BEGIN R1_CALL("add", "{\"a\":3}"),
        DS_BEGIN V31_CALL("add", "{\"a\":3}") DS_END,
    };
    forced_in("templates/deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", r1_good, N(r1_good),
              r1_bad, N(r1_bad), DS_BEGIN);
    static const char *const v31_good[] = {
        DS_BEGIN V31_CALL("add", "{\"a\":3}") DS_END,
        DS_BEGIN V31_CALL("get_weather", "{\"city\":\"Oslo\"}") DS_END,
        DS_BEGIN V31_CALL("add", "{\"a\":3}") V31_CALL("add", "{\"a\":4}") DS_END,
    };
    static const char *const v31_bad[] = {
        DS_BEGIN V31_CALL("add", "{}") DS_END,
        DS_BEGIN R1_CALL("add", "{\"a\":3}") DS_END,
    };
    forced_in("templates/deepseek-ai-DeepSeek-V3.1.jinja", v31_good, N(v31_good), v31_bad,
              N(v31_bad), DS_BEGIN);
}

/* Which replies' calls the grammar holds, so their arguments may stream. */
static void test_which_calls_are_held(void **state)
{
    (void)state;
    static const struct {
        const char *extra; /* fields after the messages and a tool */
        enum chatparse_tools fmt;
        bool held;
    } cases[] = {
        {"", CHATPARSE_TOOLS_HERMES, true}, /* auto: from <tool_call> on */
        {"", CHATPARSE_TOOLS_QWEN3_CODER, true},
        {"", CHATPARSE_TOOLS_MISTRAL, true},
        {"", CHATPARSE_TOOLS_LLAMA3, false}, /* auto: no marker, nothing held */
        {",\"tool_choice\":\"required\"", CHATPARSE_TOOLS_LLAMA3, true},
        {",\"tool_choice\":\"none\"", CHATPARSE_TOOLS_HERMES, false},
        {",\"response_format\":{\"type\":\"json_object\"}", CHATPARSE_TOOLS_HERMES, false},
        {"", CHATPARSE_TOOLS_GLM, false}, /* no grammar for its calls */
        {"", CHATPARSE_TOOLS_NONE, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char body[512];
        snprintf(body, sizeof body,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":"
                 "\"function\",\"function\":{\"name\":\"g\"}}]%s}",
                 cases[i].extra);
        struct oai_request r;
        struct oai_error e;
        assert_true(oai_parse(OAI_CHAT, body, strlen(body), &r, &e));
        if (oai_grammar_holds_calls(&r, cases[i].fmt) != cases[i].held)
            print_message("case %zu: %s\n", i, body);
        assert_int_equal(oai_grammar_holds_calls(&r, cases[i].fmt), cases[i].held);
        oai_request_free(&r);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forced_hermes_calls),
        cmocka_unit_test(test_reasoning_before_the_reply),
        cmocka_unit_test(test_schemas_and_grammars),
        cmocka_unit_test(test_auto_calls_are_lazy),
        cmocka_unit_test(test_llama3_calls_and_refused_formats),
        cmocka_unit_test(test_qwen3_coder_calls),
        cmocka_unit_test(test_mistral_calls),
        cmocka_unit_test(test_deepseek_calls),
        cmocka_unit_test(test_which_calls_are_held),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
