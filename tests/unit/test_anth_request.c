/*
 * test_anth_request.c: src/serve/anth_request.c, Anthropic's Messages body
 * -> the chat request: every block kind's translation (compared as JSON
 * with the chat messages it must become), the tool_choice and thinking
 * mappings, sampling fields, and each refusal with its message.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/testutil.h"
#include "serve/anthropic.h"

static bool parse_kind(enum anth_kind kind, const char *body, struct oai_request *r,
                       struct oai_error *e)
{
    memset(e, 0, sizeof *e);
    return anth_parse(kind, body, strlen(body), r, e);
}

/* Parses a /v1/messages body that must be accepted. */
static void ok(const char *body, struct oai_request *r)
{
    struct oai_error e;
    bool good = parse_kind(ANTH_MESSAGES, body, r, &e);
    if (!good)
        print_message("refused: %s\n", e.message);
    assert_true(good);
}

/* A body that must be refused with a 400 whose message is want. */
static void refused_kind(enum anth_kind kind, const char *body, const char *want)
{
    struct oai_request r;
    struct oai_error e;
    bool good = parse_kind(kind, body, &r, &e);
    if (good)
        print_message("accepted: %s\n", body);
    assert_false(good);
    assert_int_equal(e.status, 400);
    if (strcmp(e.message, want))
        print_message("got:  %s\nwant: %s\n", e.message, want);
    assert_string_equal(e.message, want);
    assert_null(r.messages); /* nothing is left behind */
}

static void refused(const char *body, const char *want)
{
    refused_kind(ANTH_MESSAGES, body, want);
}

/* Asserts that the JSON item got equals the JSON text want. */
static void json_eq(const cJSON *got, const char *want)
{
    cJSON *w = cJSON_Parse(want);
    assert_non_null(w);
    if (!cJSON_Compare(got, w, true)) {
        char *g = cJSON_PrintUnformatted(got);
        char *x = cJSON_PrintUnformatted(w);
        print_message("got:  %s\nwant: %s\n", g ? g : "(null)", x);
        free(g);
        free(x);
        fail();
    }
    cJSON_Delete(w);
}

#define HEAD "{\"model\":\"m\",\"max_tokens\":64,"

static void test_plain_turns(void **state)
{
    (void)state;
    struct oai_request r;
    ok(HEAD "\"system\":\"Be brief.\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}", &r);
    assert_int_equal(r.kind, OAI_CHAT);
    assert_string_equal(r.model, "m");
    assert_int_equal(r.max_tokens, 64);
    assert_int_equal(r.n, 1);
    assert_false(r.stream);
    assert_int_equal(r.top_logprobs, -1);
    assert_int_equal(r.tool_choice, OAI_TOOL_AUTO);
    assert_true(r.parallel_tool_calls);
    assert_null(r.tools);
    assert_null(r.template_kwargs);
    assert_true(r.sampling.temperature == 1.0f && r.sampling.top_p == 1.0f);
    assert_int_equal(r.sampling.top_k, 0);
    json_eq(r.messages, "[{\"role\":\"system\",\"content\":\"Be brief.\"},"
                        "{\"role\":\"user\",\"content\":\"Hi\"}]");
    oai_request_free(&r);

    /* system as text blocks (cache_control accepted and dropped); one text block is a string,
     * several are text parts; an empty system prompt adds nothing */
    ok(HEAD "\"system\":[{\"type\":\"text\",\"text\":\"A\",\"cache_control\":{\"type\":"
            "\"ephemeral\"}},{\"type\":\"text\",\"text\":\"B\"}],\"messages\":[{\"role\":\"user\","
            "\"content\":[{\"type\":\"text\",\"text\":\"Hi\"}]},{\"role\":\"assistant\",\"content\":"
            "\"Hello\"},{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"x\"},{\"type\":"
            "\"text\",\"text\":\"y\",\"cache_control\":{\"type\":\"ephemeral\",\"ttl\":\"1h\"}}]}]}",
       &r);
    json_eq(r.messages,
            "[{\"role\":\"system\",\"content\":[{\"type\":\"text\",\"text\":\"A\"},"
            "{\"type\":\"text\",\"text\":\"B\"}]},{\"role\":\"user\",\"content\":\"Hi\"},"
            "{\"role\":\"assistant\",\"content\":\"Hello\"},{\"role\":\"user\",\"content\":"
            "[{\"type\":\"text\",\"text\":\"x\"},{\"type\":\"text\",\"text\":\"y\"}]}]");
    oai_request_free(&r);
    ok(HEAD "\"system\":\"\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}", &r);
    json_eq(r.messages, "[{\"role\":\"user\",\"content\":\"Hi\"}]");
    oai_request_free(&r);
}

static void test_tool_round_trip(void **state)
{
    (void)state;
    struct oai_request r;
    ok(HEAD "\"messages\":["
            "{\"role\":\"user\",\"content\":\"Weather in Paris and Rome?\"},"
            "{\"role\":\"assistant\",\"content\":["
            "{\"type\":\"thinking\",\"thinking\":\"Two calls.\",\"signature\":\"sig\"},"
            "{\"type\":\"text\",\"text\":\"Checking.\"},"
            "{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"get_weather\","
            "\"input\":{\"city\":\"Paris\"}},"
            "{\"type\":\"tool_use\",\"id\":\"toolu_2\",\"name\":\"get_weather\","
            "\"input\":{\"city\":\"Rome\"},\"cache_control\":{\"type\":\"ephemeral\"}}]},"
            "{\"role\":\"user\",\"content\":["
            "{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_1\",\"content\":\"21C\"},"
            "{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_2\",\"is_error\":true,"
            "\"content\":[{\"type\":\"text\",\"text\":\"timeout\"},{\"type\":\"text\","
            "\"text\":\"retry later\"}]},"
            "{\"type\":\"text\",\"text\":\"Summarise.\"}]}]}",
       &r);
    json_eq(r.messages,
            "[{\"role\":\"user\",\"content\":\"Weather in Paris and Rome?\"},"
            "{\"role\":\"assistant\",\"content\":\"Checking.\",\"tool_calls\":["
            "{\"id\":\"toolu_1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
            "\"arguments\":{\"city\":\"Paris\"}}},"
            "{\"id\":\"toolu_2\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
            "\"arguments\":{\"city\":\"Rome\"}}}],\"reasoning_content\":\"Two calls.\"},"
            "{\"role\":\"tool\",\"tool_call_id\":\"toolu_1\",\"content\":\"21C\"},"
            "{\"role\":\"tool\",\"tool_call_id\":\"toolu_2\",\"content\":[{\"type\":\"text\","
            "\"text\":\"Error: timeout\"},{\"type\":\"text\",\"text\":\"retry later\"}]},"
            "{\"role\":\"user\",\"content\":\"Summarise.\"}]");
    oai_request_free(&r);

    /* only tool results: no user message after them; an empty or absent result is "", an
     * empty failed one "Error"; an assistant turn of calls only has content "" */
    ok(HEAD "\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\","
            "\"content\":[{\"type\":\"tool_use\",\"id\":\"a\",\"name\":\"f\",\"input\":{}},"
            "{\"type\":\"tool_use\",\"id\":\"b\",\"name\":\"f\",\"input\":{}}]},"
            "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"a\"},"
            "{\"type\":\"tool_result\",\"tool_use_id\":\"b\",\"content\":\"\",\"is_error\":true}]}]}",
       &r);
    json_eq(r.messages,
            "[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\",\"content\":\"\","
            "\"tool_calls\":[{\"id\":\"a\",\"type\":\"function\",\"function\":{\"name\":\"f\","
            "\"arguments\":{}}},{\"id\":\"b\",\"type\":\"function\",\"function\":{\"name\":\"f\","
            "\"arguments\":{}}}]},{\"role\":\"tool\",\"tool_call_id\":\"a\",\"content\":\"\"},"
            "{\"role\":\"tool\",\"tool_call_id\":\"b\",\"content\":\"Error\"}]");
    oai_request_free(&r);
}

static void test_tools_and_choice(void **state)
{
    (void)state;
    struct oai_request r;
    const char *tools =
        "\"tools\":[{\"name\":\"get_weather\",\"description\":\"Weather now.\",\"input_schema\":"
        "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":"
        "[\"city\"]},\"cache_control\":{\"type\":\"ephemeral\"}},{\"type\":\"custom\",\"name\":"
        "\"noop\",\"input_schema\":{\"type\":\"object\"},\"strict\":false,"
        "\"eager_input_streaming\":true}],";
    char body[1024];
    snprintf(body, sizeof body, HEAD "%s\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}",
             tools);
    ok(body, &r);
    json_eq(r.tools, "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
                     "\"description\":\"Weather now.\",\"parameters\":{\"type\":\"object\","
                     "\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]}}},"
                     "{\"type\":\"function\",\"function\":{\"name\":\"noop\",\"parameters\":"
                     "{\"type\":\"object\"}}}]");
    assert_int_equal(r.tool_choice, OAI_TOOL_AUTO);
    oai_request_free(&r);

    struct {
        const char *choice;
        enum oai_tool_choice want;
        bool parallel;
        const char *name;
    } cases[] = {
        {"{\"type\":\"auto\"}", OAI_TOOL_AUTO, true, NULL},
        {"{\"type\":\"auto\",\"disable_parallel_tool_use\":true}", OAI_TOOL_AUTO, false, NULL},
        {"{\"type\":\"none\"}", OAI_TOOL_NONE, true, NULL},
        {"{\"type\":\"any\",\"disable_parallel_tool_use\":true}", OAI_TOOL_REQUIRED, false, NULL},
        {"{\"type\":\"tool\",\"name\":\"noop\"}", OAI_TOOL_NAMED, true, "noop"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        /* count_tokens takes every choice (it generates nothing to force) */
        snprintf(body, sizeof body,
                 "{\"model\":\"m\",%s\"tool_choice\":%s,\"messages\":[{\"role\":\"user\","
                 "\"content\":\"q\"}]}",
                 tools, cases[i].choice);
        struct oai_error e;
        bool good = parse_kind(ANTH_COUNT_TOKENS, body, &r, &e);
        if (!good)
            print_message("%s: %s\n", cases[i].choice, e.message);
        assert_true(good);
        assert_int_equal(r.kind, OAI_TEMPLATE);
        assert_int_equal(r.tool_choice, cases[i].want);
        assert_int_equal(r.parallel_tool_calls, cases[i].parallel);
        if (cases[i].name)
            assert_string_equal(r.tool_name, cases[i].name);
        else
            assert_null(r.tool_name);
        oai_request_free(&r);
    }
    /* a generation forces the call (the grammar keeps the reply to it) */
    snprintf(body, sizeof body, HEAD "%s\"tool_choice\":{\"type\":\"any\"},\"messages\":"
             "[{\"role\":\"user\",\"content\":\"q\"}]}", tools);
    struct oai_error e;
    assert_true(parse_kind(ANTH_MESSAGES, body, &r, &e));
    assert_int_equal(r.tool_choice, OAI_TOOL_REQUIRED);
    oai_request_free(&r);
    snprintf(body, sizeof body, HEAD "%s\"tool_choice\":{\"type\":\"tool\",\"name\":\"nope\"},"
             "\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}", tools);
    refused(body, "tool_choice.name: 'nope' is not one of the tools given");
    refused(HEAD "\"tool_choice\":{\"type\":\"any\"},\"messages\":[{\"role\":\"user\","
                 "\"content\":\"q\"}]}",
            "tool_choice: tool_choice 'any' needs tools");
    refused(HEAD "\"tool_choice\":{\"type\":\"none\",\"disable_parallel_tool_use\":true},"
                 "\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}",
            "tool_choice.disable_parallel_tool_use: Extra inputs are not permitted");
    refused(HEAD "\"tool_choice\":\"auto\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}",
            "tool_choice: Input should be a valid dictionary");
    refused(HEAD "\"tool_choice\":{\"type\":\"required\"},\"messages\":[{\"role\":\"user\","
                 "\"content\":\"q\"}]}",
            "tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'");

    /* tools Anthropic runs, and malformed client tools */
    refused(HEAD "\"tools\":[{\"type\":\"bash_20250124\",\"name\":\"bash\"}],\"messages\":"
                 "[{\"role\":\"user\",\"content\":\"q\"}]}",
            "tools.0.type: 'bash_20250124' tools are not supported by this server: only client "
            "tools (type 'custom', or no type) are");
    refused(HEAD "\"tools\":[{\"name\":\"f\"}],\"messages\":[{\"role\":\"user\",\"content\":"
                 "\"q\"}]}",
            "tools.0.input_schema: Field required");
    refused(HEAD "\"tools\":[{\"name\":\"f g\",\"input_schema\":{\"type\":\"object\"}}],"
                 "\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}",
            "tools.0.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'");
    refused(HEAD "\"tools\":[{\"name\":\"f\",\"input_schema\":{\"type\":\"string\"}}],"
                 "\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}",
            "tools.0.input_schema.type: Input should be 'object'");
    refused(HEAD "\"tools\":[{\"name\":\"f\",\"input_schema\":{\"type\":\"object\"}},{\"name\":"
                 "\"f\",\"input_schema\":{\"type\":\"object\"}}],\"messages\":[{\"role\":\"user\","
                 "\"content\":\"q\"}]}",
            "tools: Tool names must be unique ('f' is given twice)");
    refused(HEAD "\"tools\":[{\"name\":\"f\",\"input_schema\":{\"type\":\"object\"},\"strict\":"
                 "true}],\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}",
            "tools.0.strict: strict tool use needs constrained decoding, which this server does "
            "not have yet");
}

#define BIG "{\"model\":\"m\",\"max_tokens\":4096,"

static void test_thinking(void **state)
{
    (void)state;
    struct oai_request r; /* budgets need room below max_tokens */
    ok(BIG "\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":1024},\"messages\":"
            "[{\"role\":\"user\",\"content\":\"q\"}]}",
       &r);
    json_eq(r.template_kwargs, "{\"enable_thinking\":true}");
    assert_int_equal(r.reasoning, OAI_REASONING_AUTO);
    oai_request_free(&r);
    ok(BIG "\"thinking\":{\"type\":\"disabled\"},\"messages\":[{\"role\":\"user\",\"content\":"
            "\"q\"}]}",
       &r);
    json_eq(r.template_kwargs, "{\"enable_thinking\":false}");
    oai_request_free(&r);
    ok(BIG "\"thinking\":{\"type\":\"adaptive\",\"display\":\"summarized\"},\"messages\":"
            "[{\"role\":\"user\",\"content\":\"q\"}]}",
       &r);
    assert_null(r.template_kwargs); /* the template's own default */
    oai_request_free(&r);

    refused(BIG "\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":100},\"messages\":"
                 "[{\"role\":\"user\",\"content\":\"q\"}]}",
            "thinking.budget_tokens: Input should be greater than or equal to 1024");
    refused(BIG "\"thinking\":{\"type\":\"enabled\"},\"messages\":[{\"role\":\"user\","
                 "\"content\":\"q\"}]}",
            "thinking.budget_tokens: Field required");
    refused("{\"model\":\"m\",\"max_tokens\":2000,\"thinking\":{\"type\":\"enabled\","
            "\"budget_tokens\":2000},\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}",
            "max_tokens: must be greater than thinking.budget_tokens (2000)");
    refused(BIG "\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":1024,\"display\":"
                 "\"omitted\"},\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}",
            "thinking.display: only 'summarized' is supported by this server (the reasoning "
            "comes back as the model wrote it)");
    refused(BIG "\"thinking\":{\"type\":\"disabled\",\"budget_tokens\":1024},\"messages\":"
                 "[{\"role\":\"user\",\"content\":\"q\"}]}",
            "thinking.budget_tokens: Extra inputs are not permitted");
    /* count_tokens has no max_tokens to compare the budget with */
    struct oai_error e;
    assert_true(parse_kind(ANTH_COUNT_TOKENS,
                           "{\"model\":\"m\",\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":"
                           "5000},\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}",
                           &r, &e));
    json_eq(r.template_kwargs, "{\"enable_thinking\":true}");
    oai_request_free(&r);
}

static void test_sampling_and_stream(void **state)
{
    (void)state;
    struct oai_request r;
    ok(HEAD "\"temperature\":0.5,\"top_p\":0.9,\"top_k\":40,\"stream\":true,\"stop_sequences\":"
            "[\"END\",\"\\n\\n\"],\"metadata\":{\"user_id\":\"u-1\"},\"cache_control\":{\"type\":"
            "\"ephemeral\"},\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}",
       &r);
    assert_true(r.sampling.temperature == 0.5f);
    assert_true(r.sampling.top_p == 0.9f);
    assert_int_equal(r.sampling.top_k, 40);
    assert_true(r.stream);
    assert_int_equal(r.n_stop, 2);
    assert_string_equal(r.stop[0], "END");
    assert_string_equal(r.stop[1], "\n\n");
    oai_request_free(&r);
    /* null reads as absent */
    ok(HEAD "\"temperature\":null,\"metadata\":{\"user_id\":null},\"messages\":[{\"role\":"
            "\"user\",\"content\":\"q\"}]}",
       &r);
    assert_true(r.sampling.temperature == 1.0f);
    oai_request_free(&r);

    refused(HEAD "\"temperature\":1.5,\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}",
            "temperature: Input should be between 0 and 1, but got 1.5");
    refused(HEAD "\"top_k\":1.5,\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}",
            "top_k: Input should be a valid integer");
    refused(HEAD "\"stop_sequences\":[\"a\",\"b\",\"c\",\"d\",\"e\"],\"messages\":[{\"role\":"
                 "\"user\",\"content\":\"q\"}]}",
            "stop_sequences: at most 4 stop sequences are supported by this server, but got 5");
    refused(HEAD "\"stop_sequences\":[\"\"],\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}",
            "stop_sequences.0: String should have at least 1 character");
    refused(HEAD "\"stream\":\"yes\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}",
            "stream: Input should be a valid boolean");
    refused(HEAD "\"metadata\":{\"session\":\"s\"},\"messages\":[{\"role\":\"user\",\"content\":"
                 "\"q\"}]}",
            "metadata.session: Extra inputs are not permitted");
}

static void test_refusals(void **state)
{
    (void)state;
    refused("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}",
            "max_tokens: Field required");
    refused("{\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}",
            "model: Field required");
    refused(HEAD "\"max_tokens\":0,\"messages\":[]}", "max_tokens: given twice");
    refused("{\"model\":\"m\",\"max_tokens\":0,\"messages\":[{\"role\":\"user\",\"content\":"
            "\"q\"}]}",
            "max_tokens: Input should be greater than or equal to 1");
    refused(HEAD "\"messages\":[]}", "messages: List should have at least 1 item");
    refused(HEAD "\"n\":2,\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}",
            "n: Extra inputs are not permitted");
    refused(HEAD "\"service_tier\":\"auto\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}",
            "service_tier: not supported by this server");
    refused(HEAD "\"messages\":[{\"role\":\"system\",\"content\":\"q\"}]}",
            "messages.0.role: Input should be 'user' or 'assistant' (a system prompt goes in the "
            "top-level 'system' field)");
    refused(HEAD "\"messages\":[{\"role\":\"user\",\"content\":[]}]}",
            "messages.0.content: List should have at least 1 item");
    refused(HEAD "\"messages\":[{\"role\":\"user\"}]}", "messages.0.content: Field required");
    refused(HEAD "\"messages\":[{\"role\":\"user\",\"content\":\"q\",\"name\":\"x\"}]}",
            "messages.0.name: Extra inputs are not permitted");
    refused(HEAD "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\",\"source\":"
                 "{}}]}]}",
            "messages.0.content.0: a 'image' block is not supported by this server: only text, "
            "tool_use, tool_result and thinking blocks are");
    refused(HEAD "\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\","
                 "\"content\":[{\"type\":\"redacted_thinking\",\"data\":\"x\"}]},{\"role\":"
                 "\"user\",\"content\":\"q\"}]}",
            "messages.1.content.0: a 'redacted_thinking' block cannot be read by this server: it "
            "holds another provider's encrypted reasoning");
    refused(HEAD "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_use\",\"id\":"
                 "\"a\",\"name\":\"f\",\"input\":{}}]}]}",
            "messages.0.content.0: a 'tool_use' block belongs in an assistant turn");
    refused(HEAD "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\"}]}]}",
            "messages.0.content.0.tool_use_id: Field required");
    refused(HEAD "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\","
                 "\"tool_use_id\":\"a\",\"content\":[{\"type\":\"image\"}]}]}]}",
            "messages.0.content.0.content.0: a 'image' block is not supported by this server: "
            "only text, tool_use, tool_result and thinking blocks are");
    refused(HEAD "\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\","
                 "\"content\":[{\"type\":\"tool_use\",\"id\":\"a\",\"name\":\"f\",\"input\":"
                 "[]}]},{\"role\":\"user\",\"content\":\"q\"}]}",
            "messages.1.content.0.input: Input should be a valid dictionary");
    refused(HEAD "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\"}]}]}",
            "messages.0.content.0.text: Field required");
    refused(HEAD "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"txt\"}]}]}",
            "messages.0.content.0.type: 'txt' is not a content block type this server knows");
    refused(HEAD "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":"
                 "\"q\",\"cache_control\":{\"type\":\"persistent\"}}]}]}",
            "messages.0.content.0.cache_control.type: Input should be 'ephemeral'");
    refused(HEAD "\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\","
                 "\"content\":\"The answer is\"}]}",
            "messages.1: the conversation ends with an assistant turn; continuing a prefilled "
            "assistant reply is not supported by this server");
    refused(HEAD "\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]} x",
            "There was an error parsing the body of your request: invalid JSON near byte 73 of 74");
    refused("[1]", "The request body must be a JSON object");
    /* count_tokens takes no generation fields */
    refused_kind(ANTH_COUNT_TOKENS, HEAD "\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}",
                 "max_tokens: Extra inputs are not permitted");
    refused_kind(ANTH_COUNT_TOKENS,
                 "{\"model\":\"m\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":"
                 "\"q\"}]}",
                 "stream: Extra inputs are not permitted");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_turns),     cmocka_unit_test(test_tool_round_trip),
        cmocka_unit_test(test_tools_and_choice), cmocka_unit_test(test_thinking),
        cmocka_unit_test(test_sampling_and_stream), cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
