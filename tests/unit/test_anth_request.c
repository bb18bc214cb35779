/*
 * test_anth_request.c: src/serve/anth_request.c, Anthropic's Messages body
 * -> the chat request: every block kind's translation (compared as JSON
 * with the chat messages it must become), the tool_choice and thinking
 * mappings, sampling fields, what Claude Code sends (ignored fields noted,
 * effort, format, context_management, system messages, the billing stamp),
 * strict tools' grammar, and each refusal with its message.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"
#include "serve/anthropic.h"
#include "chat/chat_template.h"
#include "util/chatutil.h"
#include "util/testutil.h"

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

/* r notes path as ignored, marked unknown or not. */
static void noted(const struct oai_request *r, const char *path, bool unknown)
{
    for (int32_t k = 0; k < r->n_ignored; k++)
        if (!strcmp(r->ignored[k].path, path)) {
            if (r->ignored[k].unknown != unknown)
                print_message("%s: unknown is %d\n", path, r->ignored[k].unknown);
            assert_int_equal(r->ignored[k].unknown, unknown);
            return;
        }
    print_message("%s is not noted; the notes are:\n", path);
    for (int32_t k = 0; k < r->n_ignored; k++)
        print_message("  %s%s\n", r->ignored[k].path, r->ignored[k].unknown ? " (unknown)" : "");
    fail();
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
    ok(HEAD
       "\"system\":[{\"type\":\"text\",\"text\":\"A\",\"cache_control\":{\"type\":"
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
    ok(HEAD
       "\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\","
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
    snprintf(body, sizeof body,
             HEAD "%s\"tool_choice\":{\"type\":\"any\"},\"messages\":"
                  "[{\"role\":\"user\",\"content\":\"q\"}]}",
             tools);
    struct oai_error e;
    assert_true(parse_kind(ANTH_MESSAGES, body, &r, &e));
    assert_int_equal(r.tool_choice, OAI_TOOL_REQUIRED);
    oai_request_free(&r);
    snprintf(body, sizeof body,
             HEAD "%s\"tool_choice\":{\"type\":\"tool\",\"name\":\"nope\"},"
                  "\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}",
             tools);
    refused(body, "tool_choice.name: 'nope' is not one of the tools given");
    refused(HEAD "\"tool_choice\":{\"type\":\"any\"},\"messages\":[{\"role\":\"user\","
                 "\"content\":\"q\"}]}",
            "tool_choice: tool_choice 'any' needs tools");
    /* fields without effect are accepted and noted */
    ok(HEAD "\"tool_choice\":{\"type\":\"none\",\"disable_parallel_tool_use\":true,\"x\":1},"
            "\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}",
       &r);
    assert_int_equal(r.tool_choice, OAI_TOOL_NONE);
    noted(&r, "tool_choice.disable_parallel_tool_use", false);
    noted(&r, "tool_choice.x", true);
    oai_request_free(&r);
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
                 "\"yes\"}],\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}",
            "tools.0.strict: Input should be a valid boolean");
    refused(HEAD "\"tools\":[{\"name\":\"f\",\"input_schema\":{\"type\":\"object\"},"
                 "\"defer_loading\":1}],\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}",
            "tools.0.defer_loading: Input should be a valid boolean");
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
    /* adaptive: thinking on, its length the model's; display is how it is shown */
    ok(BIG "\"thinking\":{\"type\":\"adaptive\",\"display\":\"summarized\"},\"messages\":"
           "[{\"role\":\"user\",\"content\":\"q\"}]}",
       &r);
    json_eq(r.template_kwargs, "{\"enable_thinking\":true}");
    assert_null(r.echo);
    oai_request_free(&r);
    /* a field of another type is noted as unknown, not refused */
    ok(BIG "\"thinking\":{\"type\":\"disabled\",\"budget_tokens\":1024},\"messages\":"
           "[{\"role\":\"user\",\"content\":\"q\"}]}",
       &r);
    json_eq(r.template_kwargs, "{\"enable_thinking\":false}");
    noted(&r, "thinking.budget_tokens", true);
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
    /* omitted: the reply's thinking blocks come back empty (test_anth_response.c) */
    ok(BIG "\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":1024,\"display\":\"omitted\"},"
           "\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}",
       &r);
    json_eq(r.echo, "{\"omit_thinking\":true}");
    oai_request_free(&r);
    refused(BIG "\"thinking\":{\"type\":\"adaptive\",\"display\":\"brief\"},\"messages\":"
                "[{\"role\":\"user\",\"content\":\"q\"}]}",
            "thinking.display: Input should be 'summarized', 'omitted' or 'updates'");
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
    noted(&r, "metadata", false);
    noted(&r, "cache_control", false);
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
    refused(HEAD "\"metadata\":{\"user_id\":7},\"messages\":[{\"role\":\"user\",\"content\":"
                 "\"q\"}]}",
            "metadata.user_id: Input should be a valid string");
    ok(HEAD "\"metadata\":{\"session\":\"s\"},\"messages\":[{\"role\":\"user\",\"content\":"
            "\"q\"}]}",
       &r);
    noted(&r, "metadata.session", true);
    oai_request_free(&r);
}

/* A body as Claude Code 2.1 sends it: every field it adds is accepted; those without effect
 * are noted, Anthropic's own as known, the rest as unknown. */
static void test_claude_code_fields(void **state)
{
    (void)state;
    struct oai_request r;
    ok("{\"model\":\"claude-sonnet-4-5\",\"max_tokens\":32000,\"stream\":true,"
       "\"temperature\":1,\"top_p\":0.99,\"top_k\":50,\"stop_sequences\":[\"</x>\"],"
       "\"metadata\":{\"user_id\":\"user_ab_account__session_12\"},\"service_tier\":\"auto\","
       "\"container\":null,\"mcp_servers\":[],\"betas\":[\"context-management-2025-06-27\"],"
       "\"inference_geo\":\"us\",\"speed\":\"fast\",\"future_field\":{\"a\":1},"
       "\"compaction\":{\"type\":\"summarize\"},\"fallbacks\":\"default\","
       "\"system\":[{\"type\":\"text\",\"text\":\"x-anthropic-billing-header: cc_version=2.1.3; "
       "cc_entrypoint=sdk-cli; cch=ab12c;\"},{\"type\":\"text\",\"text\":\"You are Claude Code.\","
       "\"cache_control\":{\"type\":\"ephemeral\",\"ttl\":\"1h\",\"scope\":\"org\"}}],"
       "\"thinking\":{\"type\":\"adaptive\"},"
       "\"context_management\":{\"edits\":[{\"type\":\"clear_thinking_20251015\",\"keep\":\"all\"}]"
       "},"
       "\"output_config\":{\"effort\":\"medium\"},"
       "\"tools\":[{\"name\":\"Bash\",\"description\":\"Run a command.\",\"input_schema\":"
       "{\"type\":\"object\",\"properties\":{\"command\":{\"type\":\"string\"}},\"required\":"
       "[\"command\"],\"additionalProperties\":false,\"$schema\":"
       "\"http://json-schema.org/draft-07/schema#\"},\"cache_control\":{\"type\":\"ephemeral\"},"
       "\"defer_loading\":false,\"eager_input_streaming\":true,\"input_examples\":[{\"command\":"
       "\"ls\"}],\"allowed_callers\":[\"direct\"],\"strict\":true,\"new_tool_flag\":1}],"
       "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\","
       "\"cache_control\":{\"type\":\"ephemeral\"},\"block_extra\":true}],\"msg_extra\":1},"
       "{\"role\":\"system\",\"content\":\"Mode: plan.\"},"
       "{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\",\"thinking\":\"t\","
       "\"signature\":\"\"},{\"type\":\"redacted_thinking\",\"data\":\"enc\"},{\"type\":\"text\","
       "\"text\":\"ok\",\"citations\":[{\"type\":\"char_location\"}]},{\"type\":\"tool_use\","
       "\"id\":\"toolu_1\",\"name\":\"Bash\",\"input\":{\"command\":\"ls\"},\"caller\":"
       "{\"type\":\"direct\"}}]},{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\","
       "\"tool_use_id\":\"toolu_1\",\"content\":[{\"type\":\"text\",\"text\":\"a b\"}],"
       "\"cache_control\":{\"type\":\"ephemeral\"}}]}]}",
       &r);
    assert_true(r.stream);
    json_eq(r.template_kwargs, "{\"enable_thinking\":true,\"reasoning_effort\":\"medium\"}");
    /* the billing stamp is blanked; the mid-conversation system message stays where it was */
    json_eq(cJSON_GetArrayItem(r.messages, 0),
            "{\"role\":\"system\",\"content\":[{\"type\":\"text\",\"text\":"
            "\"x-anthropic-billing-header: cc_version=2.1.3; cc_entrypoint=sdk-cli; cch=00000;\"},"
            "{\"type\":\"text\",\"text\":\"You are Claude Code.\"}]}");
    json_eq(cJSON_GetArrayItem(r.messages, 2), "{\"role\":\"system\",\"content\":\"Mode: plan.\"}");
    json_eq(cJSON_GetArrayItem(r.messages, 3),
            "{\"role\":\"assistant\",\"content\":\"ok\",\"tool_calls\":[{\"id\":\"toolu_1\","
            "\"type\":\"function\",\"function\":{\"name\":\"Bash\",\"arguments\":{\"command\":"
            "\"ls\"}}}],\"reasoning_content\":\"t\"}");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(
        cJSON_GetObjectItem(cJSON_GetArrayItem(r.tools, 0), "function"), "strict")));
    static const char *const known[]   = {"metadata",
                                          "service_tier",
                                          "mcp_servers",
                                          "betas",
                                          "inference_geo",
                                          "speed",
                                          "system.cache_control",
                                          "tools.cache_control",
                                          "tools.eager_input_streaming",
                                          "tools.input_examples",
                                          "tools.allowed_callers",
                                          "messages.content.cache_control",
                                          "messages.content.redacted_thinking",
                                          "messages.content.citations",
                                          "compaction",
                                          "fallbacks"};
    static const char *const unknown[] = {"future_field", "system.cache_control.scope",
                                          "tools.new_tool_flag", "messages.msg_extra",
                                          "messages.content.block_extra"};
    /* every note is one of these, with its flag (the first OAI_MAX_IGNORED are named) */
    size_t n_known = sizeof known / sizeof known[0], n_unknown = sizeof unknown / sizeof unknown[0];
    for (int32_t k = 0; k < r.n_ignored; k++) {
        bool found = false;
        for (size_t j = 0; j < n_known; j++)
            found |= !strcmp(r.ignored[k].path, known[j]) && !r.ignored[k].unknown;
        for (size_t j = 0; j < n_unknown; j++)
            found |= !strcmp(r.ignored[k].path, unknown[j]) && r.ignored[k].unknown;
        if (!found)
            print_message("unexpected note: %s (unknown %d)\n", r.ignored[k].path,
                          r.ignored[k].unknown);
        assert_true(found);
    }
    int32_t n = (int32_t)(n_known + n_unknown);
    for (size_t j = 0; j < n_unknown; j++) /* the unknown ones are all named */
        noted(&r, unknown[j], true);
    /* each name once; the rest counted */
    assert_int_equal(r.n_ignored + r.n_ignored_more, n);
    oai_request_free(&r);
}

static void test_billing_stamp(void **state)
{
    (void)state;
    /* two requests that differ only in the stamp give the same conversation (and so the same
     * prompt and cached prefix); other text starting alike is not touched */
    const char *fmt = HEAD "\"system\":%s,\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}";
    const char *sys[][2] = {
        {"[{\"type\":\"text\",\"text\":\"x-anthropic-billing-header: cc_version=2.1.9.e51; "
         "cc_entrypoint=cli; cch=a5145;\"},{\"type\":\"text\",\"text\":\"Be good.\"}]",
         "[{\"type\":\"text\",\"text\":\"x-anthropic-billing-header: cc_version=2.1.9.e51; "
         "cc_entrypoint=cli; cch=9f00e;\"},{\"type\":\"text\",\"text\":\"Be good.\"}]"},
        {"\"x-anthropic-billing-header: cc_version=2.1.9; cch=12345;You are Claude Code.\\nKeep "
         "cch=1 here.\"",
         "\"x-anthropic-billing-header: cc_version=2.1.9; cch=fedcb;You are Claude Code.\\nKeep "
         "cch=1 here.\""},
    };
    for (size_t i = 0; i < 2; i++) {
        char a[1024], b[1024];
        snprintf(a, sizeof a, fmt, sys[i][0]);
        snprintf(b, sizeof b, fmt, sys[i][1]);
        struct oai_request ra, rb;
        ok(a, &ra);
        ok(b, &rb);
        assert_true(cJSON_Compare(ra.messages, rb.messages, true));
        struct chat_template *t = tu_load_template("templates/Qwen-Qwen3-0.6B.jinja");
        if (t) { /* the same prompt, rendered */
            char *pa = NULL, *pb = NULL;
            struct oai_error e;
            assert_true(oai_prompt(&ra, t, NULL, &pa, &e) && oai_prompt(&rb, t, NULL, &pb, &e));
            assert_string_equal(pa, pb);
            assert_non_null(strstr(pa, "cch=00000;"));
            free(pa);
            free(pb);
            chat_template_free(t);
        }
        char *text = cJSON_PrintUnformatted(ra.messages);
        assert_non_null(strstr(text, i ? "cch=00000;You are" : "cch=00000;\""));
        if (i)
            assert_non_null(strstr(text, "Keep cch=1 here."));
        free(text);
        oai_request_free(&ra);
        oai_request_free(&rb);
    }
    struct oai_request r;
    ok(HEAD "\"system\":\"Say cch=12345; x-anthropic-billing-header:\",\"messages\":[{\"role\":"
            "\"user\",\"content\":\"q\"}]}",
       &r);
    json_eq(cJSON_GetArrayItem(r.messages, 0),
            "{\"role\":\"system\",\"content\":\"Say cch=12345; x-anthropic-billing-header:\"}");
    oai_request_free(&r);
}

static void test_output_config(void **state)
{
    (void)state;
    struct oai_request r;
    const char *efforts[][2] = {{"low", "low"},
                                {"medium", "medium"},
                                {"high", "high"},
                                {"xhigh", "xhigh"},
                                {"max", "xhigh"}};
    for (size_t i = 0; i < 5; i++) {
        char body[256], want[64];
        snprintf(body, sizeof body,
                 HEAD "\"output_config\":{\"effort\":\"%s\"},\"messages\":[{\"role\":\"user\","
                      "\"content\":\"q\"}]}",
                 efforts[i][0]);
        snprintf(want, sizeof want, "{\"reasoning_effort\":\"%s\"}", efforts[i][1]);
        ok(body, &r);
        json_eq(r.template_kwargs, want);
        assert_null(r.schema);
        oai_request_free(&r);
    }
    /* format: the reply's schema, as response_format json_schema gives it */
    ok(HEAD "\"output_config\":{\"format\":{\"type\":\"json_schema\",\"schema\":{\"type\":"
            "\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}},\"x\":1},\"thinking\":"
            "{\"type\":\"disabled\"},\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}",
       &r);
    json_eq(r.schema, "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}");
    assert_string_equal(r.schema_field, "output_config.format");
    json_eq(r.template_kwargs, "{\"enable_thinking\":false}");
    noted(&r, "output_config.x", true);
    oai_request_free(&r);
    ok(HEAD "\"output_format\":{\"type\":\"json_schema\",\"schema\":{\"type\":\"array\"}},"
            "\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}",
       &r);
    json_eq(r.schema, "{\"type\":\"array\"}");
    assert_string_equal(r.schema_field, "output_format");
    oai_request_free(&r);
    /* count_tokens reads the same fields */
    struct oai_error e;
    assert_true(parse_kind(ANTH_COUNT_TOKENS,
                           "{\"model\":\"m\",\"max_tokens\":5,\"stream\":true,\"output_config\":"
                           "{\"effort\":\"low\"},\"messages\":[{\"role\":\"user\",\"content\":"
                           "\"q\"}]}",
                           &r, &e));
    json_eq(r.template_kwargs, "{\"reasoning_effort\":\"low\"}");
    noted(&r, "max_tokens", true); /* Anthropic's count_tokens does not define them */
    noted(&r, "stream", true);
    oai_request_free(&r);

    refused(HEAD "\"output_config\":{\"effort\":\"extreme\"},\"messages\":[{\"role\":\"user\","
                 "\"content\":\"q\"}]}",
            "output_config.effort: Input should be 'low', 'medium', 'high', 'xhigh' or 'max'");
    refused(HEAD "\"output_config\":{\"format\":{\"type\":\"text\"}},\"messages\":[{\"role\":"
                 "\"user\",\"content\":\"q\"}]}",
            "output_config.format.type: Input should be 'json_schema'");
    refused(HEAD "\"output_config\":{\"format\":{\"type\":\"json_schema\"}},\"messages\":[{"
                 "\"role\":\"user\",\"content\":\"q\"}]}",
            "output_config.format.schema: Field required");
    refused(HEAD "\"output_format\":{\"type\":\"json_schema\",\"schema\":{}},\"output_config\":"
                 "{\"format\":{\"type\":\"json_schema\",\"schema\":{}}},\"messages\":[{\"role\":"
                 "\"user\",\"content\":\"q\"}]}",
            "output_config.format: the reply's format is given twice (output_format and "
            "output_config.format): give one");
    refused(HEAD "\"output_config\":[],\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}",
            "output_config: Input should be a valid dictionary");
}

/* Three assistant turns with thinking, each calling tool f or g, and their results. */
/* clang-format off */
#define LOOP                                                                                       \
    "\"messages\":[{\"role\":\"user\",\"content\":\"go\"},"                                        \
    "{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\",\"thinking\":\"T1\","             \
    "\"signature\":\"\"},{\"type\":\"tool_use\",\"id\":\"u1\",\"name\":\"f\",\"input\":"           \
    "{\"p\":\"one\"}}]},"                                                                          \
    "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"u1\","            \
    "\"content\":\"result one, long enough to be worth clearing\"}]},"                             \
    "{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\",\"thinking\":\"T2\","             \
    "\"signature\":\"\"},{\"type\":\"tool_use\",\"id\":\"u2\",\"name\":\"g\",\"input\":"           \
    "{\"p\":\"two\"}}]},"                                                                          \
    "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"u2\","            \
    "\"content\":\"result two, long enough to be worth clearing\"}]},"                             \
    "{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\",\"thinking\":\"T3\","             \
    "\"signature\":\"\"},{\"type\":\"tool_use\",\"id\":\"u3\",\"name\":\"f\",\"input\":"           \
    "{\"p\":\"three\"}}]},"                                                                        \
    "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"u3\","            \
    "\"content\":\"result three\"}]}]"
/* clang-format on */

/* The conversation of LOOP after context_management cm (JSON), as one string. */
static char *edited(const char *cm)
{
    char body[4096];
    snprintf(body, sizeof body, HEAD "\"context_management\":%s," LOOP "}", cm);
    struct oai_request r;
    ok(body, &r);
    char *s = cJSON_PrintUnformatted(r.messages);
    oai_request_free(&r);
    return s;
}

static int count(const char *s, const char *sub)
{
    int n = 0;
    for (const char *p = strstr(s, sub); p; p = strstr(p + 1, sub))
        n++;
    return n;
}

static void test_context_management(void **state)
{
    (void)state;
    /* clear_thinking: keep all, the last n thinking turns, or (default) the last one */
    char *s = edited("{\"edits\":[{\"type\":\"clear_thinking_20251015\",\"keep\":\"all\"}]}");
    assert_int_equal(count(s, "reasoning_content"), 3);
    free(s);
    s = edited("{\"edits\":[{\"type\":\"clear_thinking_20251015\",\"keep\":{\"type\":"
               "\"thinking_turns\",\"value\":2}}]}");
    assert_int_equal(count(s, "reasoning_content"), 2);
    assert_null(strstr(s, "T1"));
    assert_non_null(strstr(s, "T2"));
    free(s);
    s = edited("{\"edits\":[{\"type\":\"clear_thinking_20251015\"}]}");
    assert_int_equal(count(s, "reasoning_content"), 1);
    assert_non_null(strstr(s, "\"reasoning_content\":\"T3\""));
    free(s);

    /* clear_tool_uses: triggered by uses, all but the last keep results become the
     * placeholder; inputs too when asked; excluded tools are spared */
    s = edited("{\"edits\":[{\"type\":\"clear_tool_uses_20250919\",\"trigger\":{\"type\":"
               "\"tool_uses\",\"value\":3},\"keep\":{\"type\":\"tool_uses\",\"value\":1}}]}");
    assert_int_equal(count(s, "[Old tool result content cleared]"), 2);
    assert_non_null(strstr(s, "result three"));
    assert_non_null(strstr(s, "\"p\":\"one\"")); /* inputs stay */
    free(s);
    s = edited("{\"edits\":[{\"type\":\"clear_tool_uses_20250919\",\"trigger\":{\"type\":"
               "\"tool_uses\",\"value\":2},\"keep\":{\"type\":\"tool_uses\",\"value\":0},"
               "\"exclude_tools\":[\"g\"],\"clear_tool_inputs\":[\"f\"]}]}");
    assert_int_equal(count(s, "[Old tool result content cleared]"), 2);
    assert_non_null(strstr(s, "result two"));
    assert_null(strstr(s, "\"p\":\"one\""));
    assert_null(strstr(s, "\"p\":\"three\""));
    assert_non_null(strstr(s, "\"p\":\"two\""));
    free(s);
    /* not triggered: fewer uses, or (the default) an estimated 100000 input tokens */
    s = edited("{\"edits\":[{\"type\":\"clear_tool_uses_20250919\",\"trigger\":{\"type\":"
               "\"tool_uses\",\"value\":4},\"keep\":{\"type\":\"tool_uses\",\"value\":0}}]}");
    assert_int_equal(count(s, "cleared]"), 0);
    free(s);
    s = edited("{\"edits\":[{\"type\":\"clear_tool_uses_20250919\"}]}");
    assert_int_equal(count(s, "cleared]"), 0);
    free(s);
    /* a small input_tokens trigger is passed (bytes / 4 of this conversation are over 50) */
    s = edited("{\"edits\":[{\"type\":\"clear_tool_uses_20250919\",\"trigger\":{\"type\":"
               "\"input_tokens\",\"value\":50},\"keep\":{\"type\":\"tool_uses\",\"value\":1}}]}");
    assert_int_equal(count(s, "cleared]"), 2);
    free(s);
    /* clear_at_least more than clearing would free: nothing is cleared */
    s = edited("{\"edits\":[{\"type\":\"clear_tool_uses_20250919\",\"trigger\":{\"type\":"
               "\"tool_uses\",\"value\":1},\"clear_at_least\":{\"type\":\"input_tokens\","
               "\"value\":5000}}]}");
    assert_int_equal(count(s, "cleared]"), 0);
    free(s);
    /* both edits, with unknown ones beside them */
    struct oai_request r;
    ok(HEAD "\"context_management\":{\"edits\":[{\"type\":\"clear_tool_uses_20250919\","
            "\"trigger\":{\"type\":\"tool_uses\",\"value\":1},\"keep\":{\"type\":\"tool_uses\","
            "\"value\":2},\"extra\":1},{\"type\":\"clear_thinking_20251015\",\"keep\":{\"type\":"
            "\"thinking_turns\",\"value\":1}},{\"type\":\"compact_20260112\"},{\"type\":"
            "\"clear_everything_20990101\"}],\"other\":true}," LOOP "}",
       &r);
    s = cJSON_PrintUnformatted(r.messages);
    assert_int_equal(count(s, "cleared]"), 1);
    assert_int_equal(count(s, "reasoning_content"), 1);
    free(s);
    noted(&r, "context_management.edits.extra", true);
    noted(&r, "context_management.edits.compact_20260112", false);
    noted(&r, "context_management.edits.clear_everything_20990101", true);
    noted(&r, "context_management.other", true);
    oai_request_free(&r);
    /* count_tokens counts the edited conversation */
    struct oai_error e;
    assert_true(parse_kind(ANTH_COUNT_TOKENS,
                           "{\"model\":\"m\",\"context_management\":{\"edits\":[{\"type\":"
                           "\"clear_thinking_20251015\"}]}," LOOP "}",
                           &r, &e));
    s = cJSON_PrintUnformatted(r.messages);
    assert_int_equal(count(s, "reasoning_content"), 1);
    free(s);
    oai_request_free(&r);

    refused(HEAD "\"context_management\":{\"edits\":[{\"type\":\"clear_thinking_20251015\","
                 "\"keep\":{\"type\":\"thinking_turns\",\"value\":0}}]}," LOOP "}",
            "context_management.edits.0.keep.value: Input should be an integer of at least 1");
    refused(HEAD "\"context_management\":{\"edits\":[{\"type\":\"clear_tool_uses_20250919\","
                 "\"keep\":{\"type\":\"turns\",\"value\":1}}]}," LOOP "}",
            "context_management.edits.0.keep: Input should be {\"type\": \"tool_uses\", "
            "\"value\": <integer>}");
    refused(HEAD "\"context_management\":{\"edits\":[{\"type\":\"clear_tool_uses_20250919\","
                 "\"exclude_tools\":[1]}]}," LOOP "}",
            "context_management.edits.0.exclude_tools: Input should be a valid list of strings");
    refused(HEAD "\"context_management\":{\"edits\":[{\"keep\":\"all\"}]}," LOOP "}",
            "context_management.edits.0.type: Field required");
    refused(HEAD "\"context_management\":{\"edits\":{}}," LOOP "}",
            "context_management.edits: Input should be a valid list");
}

/* The names of r's offered tools, comma-separated, in a static buffer. */
static const char *tool_names(const struct oai_request *r)
{
    static char buf[256];
    buf[0] = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, r->tools)
    {
        const char *n =
            cJSON_GetObjectItem(cJSON_GetObjectItem(t, "function"), "name")->valuestring;
        snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s", buf[0] ? "," : "", n);
    }
    return buf;
}

/* Deferred tools are offered once loaded; system messages add and withdraw tools */
static void test_tool_changes(void **state)
{
    (void)state;
    const char *tools = "\"tools\":[{\"name\":\"A\",\"input_schema\":{\"type\":\"object\"}},"
                        "{\"name\":\"B\",\"defer_loading\":true,\"input_schema\":{\"type\":"
                        "\"object\"}},{\"name\":\"C\",\"defer_loading\":true,\"input_schema\":"
                        "{\"type\":\"object\"}}],";
    char body[2048];
    struct oai_request r;
    snprintf(body, sizeof body, HEAD "%s\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}",
             tools);
    ok(body, &r);
    assert_string_equal(tool_names(&r), "A");
    oai_request_free(&r);
    /* a client tool search's result loads B; a call of C in the history loads C */
    snprintf(body, sizeof body,
             HEAD "%s\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":"
                  "\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"s1\",\"name\":"
                  "\"A\",\"input\":{}}]},{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\","
                  "\"tool_use_id\":\"s1\",\"content\":[{\"type\":\"tool_reference\",\"tool_name\":"
                  "\"B\"}]}]}]}",
             tools);
    ok(body, &r);
    assert_string_equal(tool_names(&r), "A,B");
    json_eq(cJSON_GetArrayItem(r.messages, 2), "{\"role\":\"tool\",\"tool_call_id\":\"s1\","
                                               "\"content\":\"Tool B is now available.\"}");
    oai_request_free(&r);
    snprintf(body, sizeof body,
             HEAD "%s\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":"
                  "\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"s1\",\"name\":"
                  "\"C\",\"input\":{}}]},{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\","
                  "\"tool_use_id\":\"s1\",\"content\":\"done\"}]}]}",
             tools);
    ok(body, &r);
    assert_string_equal(tool_names(&r), "A,C");
    oai_request_free(&r);
    /* a system message adds C by name and D by definition, and withdraws A */
    snprintf(body, sizeof body,
             HEAD "%s\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":"
                  "\"system\",\"content\":[{\"type\":\"tool_addition\",\"tool\":{\"type\":"
                  "\"tool_reference\",\"name\":\"C\"}},{\"type\":\"tool_addition\",\"tool\":"
                  "{\"type\":\"tool_definition\",\"definition\":{\"name\":\"D\",\"input_schema\":"
                  "{\"type\":\"object\"}}}},{\"type\":\"tool_removal\",\"tool\":{\"type\":"
                  "\"tool_reference\",\"name\":\"A\"}},{\"type\":\"text\",\"text\":\"Go on.\"}]},"
                  "{\"role\":\"user\",\"content\":\"r\"}]}",
             tools);
    ok(body, &r);
    assert_string_equal(tool_names(&r), "C,D");
    json_eq(cJSON_GetArrayItem(r.messages, 1),
            "{\"role\":\"system\",\"content\":[{\"type\":\"text\",\"text\":\"Tool C is now "
            "available.\"},{\"type\":\"text\",\"text\":\"Tool D is now available.\"},{\"type\":"
            "\"text\",\"text\":\"Tool A is no longer available.\"},{\"type\":\"text\",\"text\":"
            "\"Go on.\"}]}");
    oai_request_free(&r);
    /* with no tools field at all, an added definition is the one tool */
    ok(HEAD "\"messages\":[{\"role\":\"system\",\"content\":[{\"type\":\"tool_addition\","
            "\"tool\":{\"type\":\"tool_definition\",\"definition\":{\"name\":\"D\","
            "\"input_schema\":{\"type\":\"object\"}}}}]},{\"role\":\"user\",\"content\":\"r\"}]}",
       &r);
    assert_string_equal(tool_names(&r), "D");
    json_eq(r.messages, "[{\"role\":\"system\",\"content\":\"Tool D is now available.\"},"
                        "{\"role\":\"user\",\"content\":\"r\"}]");
    oai_request_free(&r);

    refused(HEAD "\"messages\":[{\"role\":\"system\",\"content\":[{\"type\":\"tool_addition\","
                 "\"tool\":{\"type\":\"mcp_toolset_reference\",\"server_name\":\"x\"}}]},{\"role\":"
                 "\"user\",\"content\":\"r\"}]}",
            "messages.0.content.0.tool.type: 'mcp_toolset_reference' is not supported by this "
            "server: it connects to no MCP servers");
    refused(HEAD
            "\"messages\":[{\"role\":\"system\",\"content\":[{\"type\":\"tool_removal\","
            "\"tool\":{\"type\":\"tool_definition\"}}]},{\"role\":\"user\",\"content\":\"r\"}]}",
            "messages.0.content.0.tool.type: Input should be 'tool_reference'");
    refused(HEAD "\"system\":[{\"type\":\"tool_addition\",\"tool\":{}}],\"messages\":[{\"role\":"
                 "\"user\",\"content\":\"r\"}]}",
            "system.0.type: Input should be 'text'");
    refused(HEAD
            "\"messages\":[{\"role\":\"system\",\"content\":[{\"type\":\"tool_addition\","
            "\"tool\":{\"type\":\"tool_definition\",\"definition\":{\"name\":\"b c\","
            "\"input_schema\":{\"type\":\"object\"}}}}]},{\"role\":\"user\",\"content\":\"r\"}]}",
            "messages.0.content.0.tool.definition.name: String should match pattern "
            "'^[a-zA-Z0-9_-]{1,128}$'");
}

/* Documents of plain text are text the model reads; PDFs and other files are refused */
static void test_documents(void **state)
{
    (void)state;
    struct oai_request r;
    ok(HEAD
       "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"document\",\"source\":"
       "{\"type\":\"text\",\"media_type\":\"text/plain\",\"data\":\"The grass is green.\"},"
       "\"title\":\"Facts\",\"context\":\"From a notebook.\",\"citations\":{\"enabled\":"
       "true},\"cache_control\":{\"type\":\"ephemeral\"}},{\"type\":\"text\",\"text\":"
       "\"What colour is the grass?\"}]},{\"role\":\"assistant\",\"content\":[{\"type\":"
       "\"tool_use\",\"id\":\"t1\",\"name\":\"f\",\"input\":{}}]},{\"role\":\"user\","
       "\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"t1\",\"content\":[{\"type\":"
       "\"document\",\"source\":{\"type\":\"content\",\"content\":[{\"type\":\"text\",\"text\":"
       "\"a\"},{\"type\":\"text\",\"text\":\"b\"}]}}]}]}]}",
       &r);
    json_eq(r.messages,
            "[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Facts\"},{\"type\":"
            "\"text\",\"text\":\"From a notebook.\"},{\"type\":\"text\",\"text\":\"The grass is "
            "green.\"},{\"type\":\"text\",\"text\":\"What colour is the grass?\"}]},{\"role\":"
            "\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"t1\",\"type\":\"function\","
            "\"function\":{\"name\":\"f\",\"arguments\":{}}}]},{\"role\":\"tool\",\"tool_call_id\":"
            "\"t1\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":"
            "\"b\"}]}]");
    noted(&r, "messages.content.citations", false);
    oai_request_free(&r);
    refused(HEAD
            "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"document\",\"source\":"
            "{\"type\":\"base64\",\"media_type\":\"application/pdf\",\"data\":\"JVBERi0=\"}}]}]}",
            "messages.0.content.0.source: a 'base64' document is not supported by this server: "
            "only plain-text documents (source type 'text' or 'content') are");
    refused(HEAD "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"document\",\"source\":"
                 "{\"type\":\"content\",\"content\":[{\"type\":\"image\"}]}}]}]}",
            "messages.0.content.0.source.content.0: a 'image' block is not supported by this "
            "server: only text, tool_use, tool_result, thinking and plain-text document blocks "
            "are");
    refused(HEAD "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"document\"}]}]}",
            "messages.0.content.0.source: Field required");
}

static void test_system_messages(void **state)
{
    (void)state;
    struct oai_request r;
    ok(HEAD "\"system\":\"S\",\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":"
            "\"assistant\",\"content\":\"b\"},{\"role\":\"system\",\"content\":[{\"type\":\"text\","
            "\"text\":\"reminder\",\"cache_control\":{\"type\":\"ephemeral\"}}]},{\"role\":"
            "\"user\",\"content\":\"c\"}]}",
       &r);
    json_eq(r.messages, "[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":"
                        "\"a\"},{\"role\":\"assistant\",\"content\":\"b\"},{\"role\":\"system\","
                        "\"content\":\"reminder\"},{\"role\":\"user\",\"content\":\"c\"}]");
    oai_request_free(&r);
    /* clear_at next_user_message: shown only until a user message follows it; a system
     * message's effort is the turn's, over the top-level one, while it is shown */
    ok(HEAD "\"output_config\":{\"effort\":\"low\"},\"messages\":[{\"role\":\"user\","
            "\"content\":\"a\"},{\"role\":\"system\",\"content\":\"gone\",\"clear_at\":"
            "\"next_user_message\",\"output_config\":{\"effort\":\"max\"}},{\"role\":\"assistant\","
            "\"content\":\"b\"},{\"role\":\"user\",\"content\":\"c\"},{\"role\":\"system\","
            "\"clear_at\":\"next_user_message\",\"content\":\"kept\"},{\"role\":\"system\","
            "\"output_config\":{\"effort\":\"medium\",\"x\":1},\"clear_at\":\"never\"}]}",
       &r);
    json_eq(r.messages, "[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"assistant\","
                        "\"content\":\"b\"},{\"role\":\"user\",\"content\":\"c\"},{\"role\":"
                        "\"system\",\"content\":\"kept\"}]");
    json_eq(r.template_kwargs, "{\"reasoning_effort\":\"medium\"}");
    noted(&r, "messages.output_config.x", true);
    oai_request_free(&r);
    refused(HEAD "\"messages\":[{\"role\":\"system\",\"clear_at\":\"later\",\"content\":\"x\"},"
                 "{\"role\":\"user\",\"content\":\"c\"}]}",
            "messages.0.clear_at: Input should be 'next_user_message' or 'never'");
    refused(HEAD "\"messages\":[{\"role\":\"system\",\"content\":[{\"type\":\"image\"}]},{\"role\":"
                 "\"user\",\"content\":\"c\"}]}",
            "messages.0.content.0: a 'image' block is not supported by this server: only text, "
            "tool_use, tool_result, thinking and plain-text document blocks are");
    refused(HEAD "\"messages\":[{\"role\":\"system\"},{\"role\":\"user\",\"content\":\"c\"}]}",
            "messages.0.content: Field required");
}

/* The grammar of an Anthropic body for template t and a prompt ending "assistant\n". */
static bool grammar_of(const struct chat_template *t, const struct grammar_vocab *gv,
                       const char *body, struct grammar **g, struct oai_error *e)
{
    struct oai_request r;
    ok(body, &r);
    struct grammar_cache *gc = grammar_cache_new(gv, 4);
    char **trig              = NULL;
    int32_t n_trig           = 0;
    const char *prompt       = "<|im_start|>assistant\n";
    bool good                = oai_grammar(&r, t, gc, prompt, strlen(prompt), g, &trig, &n_trig, e);
    if (good && *g) {
        assert_int_equal(n_trig, 1);
        assert_string_equal(trig[0], "<tool_call>");
    }
    for (int32_t i = 0; i < n_trig; i++)
        free(trig[i]);
    free(trig);
    grammar_cache_free(gc);
    oai_request_free(&r);
    return good;
}

/* strict tools: their calls are held to input_schema; where hearth cannot hold them, a 400 */
static void test_strict_tools(void **state)
{
    (void)state;
    struct chat_template *t = tu_load_template("templates/Qwen-Qwen3-0.6B.jinja");
    if (!t)
        skip();
    struct grammar_vocab *gv = tu_byte_vocab();
    struct grammar *g        = NULL;
    struct oai_error e;
    const char *strict = HEAD "\"tools\":[{\"name\":\"add\",\"strict\":true,\"input_schema\":"
                              "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},"
                              "\"required\":[\"a\"],\"additionalProperties\":false}}],"
                              "\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}";
    assert_true(grammar_of(t, gv, strict, &g, &e));
    assert_non_null(g);
    const char *good = "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\":7}}\n</tool_call>";
    const char *bad =
        "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\":\"7\"}}\n</tool_call>";
    assert_true(grammar_accepts_string(g, good, strlen(good)));
    assert_false(grammar_accepts_string(g, bad, strlen(bad)));
    grammar_unref(g);
    g = NULL;

    /* a schema hearth cannot hold calls to: a strict tool is refused, a plain one called freely */
    const char *odd = HEAD "\"tools\":[{\"name\":\"f\",%s\"input_schema\":{\"type\":\"object\","
                           "\"properties\":{\"x\":{\"type\":\"number\",\"minimum\":0.5}}}}],"
                           "\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}";
    char body[512];
    snprintf(body, sizeof body, odd, "\"strict\":true,");
    assert_false(grammar_of(t, gv, body, &g, &e));
    assert_int_equal(e.status, 400);
    snprintf(body, sizeof body, odd, "");
    assert_true(grammar_of(t, gv, body, &g, &e));
    assert_null(g);
    chat_template_free(t);

    /* a tool-call format hearth writes no grammar for: strict is refused, naming it */
    t = tu_load_template("templates/GLM-4.6.jinja");
    if (t) {
        assert_false(grammar_of(t, gv, strict, &g, &e));
        assert_int_equal(e.status, 400);
        assert_non_null(strstr(e.message, "tool 0 is strict"));
        assert_non_null(strstr(e.message, "glm"));
        chat_template_free(t);
    }
    grammar_vocab_free(gv);
}

/* A system message between turns: rendered in place by a template that takes it there
 * (Qwen3), merged into the first by oai_prompt for one that refuses it (Qwen3.5) */
static void test_system_messages_rendered(void **state)
{
    (void)state;
    struct chat_template *q3  = tu_load_template("templates/Qwen-Qwen3-0.6B.jinja");
    struct chat_template *q35 = tu_load_template("templates/Qwen3.5-4B.jinja");
    if (!q3 || !q35)
        skip();
    struct oai_request r;
    struct oai_error e;
    ok(HEAD "\"system\":[{\"type\":\"text\",\"text\":\"S1\"},{\"type\":\"text\",\"text\":\"S2\"}],"
            "\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"assistant\","
            "\"content\":\"b\"},{\"role\":\"system\",\"content\":\"LATE\"},{\"role\":\"user\","
            "\"content\":\"c\"}]}",
       &r);
    char *text = NULL;
    assert_true(oai_prompt(&r, q3, NULL, &text, &e));
    assert_non_null(strstr(text, "<|im_start|>system\nS1\nS2<|im_end|>\n<|im_start|>user\na"));
    assert_non_null(strstr(text, "b<|im_end|>\n<|im_start|>system\nLATE<|im_end|>\n"
                                 "<|im_start|>user\nc"));
    free(text);
    text = NULL;
    if (!oai_prompt(&r, q35, NULL, &text, &e))
        print_message("%s\n", e.message);
    assert_non_null(text);
    assert_non_null(strstr(text, "<|im_start|>system\nS1\nS2\n\nLATE<|im_end|>\n"));
    assert_int_equal(count(text, "<|im_start|>system"), 1);
    free(text);
    oai_request_free(&r);
    chat_template_free(q3);
    chat_template_free(q35);
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
    refused(HEAD "\"messages\":[{\"role\":\"tool\",\"content\":\"q\"}]}",
            "messages.0.role: Input should be 'user', 'assistant' or 'system'");
    refused(HEAD "\"messages\":[{\"role\":\"user\",\"content\":[]}]}",
            "messages.0.content: List should have at least 1 item");
    refused(HEAD "\"messages\":[{\"role\":\"user\"}]}", "messages.0.content: Field required");
    refused(HEAD "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\",\"source\":"
                 "{}}]}]}",
            "messages.0.content.0: a 'image' block is not supported by this server: only text, "
            "tool_use, tool_result, thinking and plain-text document blocks are");
    refused(HEAD "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"redacted_thinking\","
                 "\"data\":\"x\"}]}]}",
            "messages.0.content.0: a 'redacted_thinking' block belongs in an assistant turn");
    refused(HEAD "\"mcp_servers\":[{\"type\":\"url\",\"url\":\"https://x\",\"name\":\"x\"}],"
                 "\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}",
            "mcp_servers: this server connects to no MCP servers, so their tools cannot be run; "
            "give the tools as client tools instead");
    refused(HEAD "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_use\",\"id\":"
                 "\"a\",\"name\":\"f\",\"input\":{}}]}]}",
            "messages.0.content.0: a 'tool_use' block belongs in an assistant turn");
    refused(HEAD "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\"}]}]}",
            "messages.0.content.0.tool_use_id: Field required");
    refused(HEAD "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\","
                 "\"tool_use_id\":\"a\",\"content\":[{\"type\":\"image\"}]}]}]}",
            "messages.0.content.0.content.0: a 'image' block is not supported by this server: "
            "only text, tool_use, tool_result, thinking and plain-text document blocks are");
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
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_turns),
        cmocka_unit_test(test_tool_round_trip),
        cmocka_unit_test(test_tools_and_choice),
        cmocka_unit_test(test_thinking),
        cmocka_unit_test(test_sampling_and_stream),
        cmocka_unit_test(test_claude_code_fields),
        cmocka_unit_test(test_billing_stamp),
        cmocka_unit_test(test_output_config),
        cmocka_unit_test(test_context_management),
        cmocka_unit_test(test_system_messages),
        cmocka_unit_test(test_strict_tools),
        cmocka_unit_test(test_documents),
        cmocka_unit_test(test_tool_changes),
        cmocka_unit_test(test_system_messages_rendered),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
