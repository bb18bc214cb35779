/*
 * test_resp_request.c: src/serve/resp_request.c, a Responses body -> the chat
 * struct oai_request it means: input items as chat messages, flat tools as
 * chat tools, the echoed fields, and every refusal naming its field as the
 * Responses API names it. No model needed.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/testutil.h"
#include "unit/codex_fixture.h"
#include "serve/responses.h"

static bool parse(const char *body, struct oai_request *r, struct oai_error *e)
{
    return resp_parse(body, strlen(body), r, e);
}

/* r's messages must equal the JSON text want (key order aside). */
static void check_messages(const struct oai_request *r, const char *want)
{
    cJSON *w = cJSON_Parse(want);
    assert_non_null(w);
    if (!cJSON_Compare(r->messages, w, true)) {
        char *got = cJSON_PrintUnformatted(r->messages);
        print_message("messages: %s\n    want: %s\n", got, want);
        free(got);
        fail();
    }
    cJSON_Delete(w);
}

/* body must be refused with a 400 whose param is param (and whose message holds needle). */
static void check_refused(const char *body, const char *param, const char *needle)
{
    struct oai_request r;
    struct oai_error e;
    if (parse(body, &r, &e)) {
        oai_request_free(&r);
        print_message("accepted: %s\n", body);
        fail();
    }
    assert_int_equal(e.status, 400);
    assert_string_equal(e.type, "invalid_request_error");
    if (strcmp(e.param, param) || (needle && !strstr(e.message, needle))) {
        print_message("body %s\n  param '%s' (want '%s'), message: %s\n", body, e.param, param,
                      e.message);
        fail();
    }
}

static void test_string_input_and_instructions(void **state)
{
    (void)state;
    struct oai_request r;
    struct oai_error e;
    assert_true(parse("{\"model\":\"m\",\"input\":\"Hi\",\"instructions\":\"Be brief.\","
                      "\"max_output_tokens\":20,\"temperature\":0.5,\"top_p\":0.75,"
                      "\"stream\":true,\"store\":true,\"user\":\"u\",\"metadata\":{\"k\":\"v\"},"
                      "\"truncation\":\"disabled\",\"include\":[],\"background\":false}",
                      &r, &e));
    assert_int_equal(r.kind, OAI_CHAT);
    check_messages(&r, "[{\"role\":\"system\",\"content\":\"Be brief.\"},"
                       "{\"role\":\"user\",\"content\":\"Hi\"}]");
    assert_string_equal(r.model, "m");
    assert_int_equal(r.max_tokens, 20);
    assert_true(r.sampling.temperature == 0.5f);
    assert_true(r.sampling.top_p == 0.75f);
    assert_true(r.stream);
    assert_int_equal(r.n, 1);
    assert_null(r.schema);
    /* what the reply echoes: as sent, store false (nothing is stored), defaults filled */
    const cJSON *echo = r.echo;
    assert_string_equal(cJSON_GetObjectItem(echo, "instructions")->valuestring, "Be brief.");
    assert_int_equal(cJSON_GetObjectItem(echo, "max_output_tokens")->valueint, 20);
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(echo, "store")));
    assert_string_equal(cJSON_GetObjectItem(echo, "user")->valuestring, "u");
    assert_string_equal(
        cJSON_GetObjectItem(cJSON_GetObjectItem(echo, "metadata"), "k")->valuestring, "v");
    assert_string_equal(cJSON_GetObjectItem(echo, "tool_choice")->valuestring, "auto");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(echo, "parallel_tool_calls")));
    oai_request_free(&r);

    assert_true(parse("{\"input\":\"Hi\"}", &r, &e));
    check_messages(&r, "[{\"role\":\"user\",\"content\":\"Hi\"}]");
    assert_int_equal(r.max_tokens, -1);
    echo = r.echo;
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(echo, "instructions")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(echo, "max_output_tokens")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(echo, "metadata")));
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(echo, "tools")), 0);
    assert_int_equal(cJSON_GetObjectItem(echo, "temperature")->valueint, 1);
    cJSON *fmt = cJSON_GetObjectItem(cJSON_GetObjectItem(echo, "text"), "format");
    assert_string_equal(cJSON_GetObjectItem(fmt, "type")->valuestring, "text");
    cJSON *rs = cJSON_GetObjectItem(echo, "reasoning");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(rs, "effort")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(rs, "summary")));
    assert_string_equal(cJSON_GetObjectItem(echo, "truncation")->valuestring, "disabled");
    oai_request_free(&r);

    /* empty instructions: no empty system message, echoed as sent */
    assert_true(parse("{\"input\":\"Hi\",\"instructions\":\"\"}", &r, &e));
    check_messages(&r, "[{\"role\":\"user\",\"content\":\"Hi\"}]");
    assert_string_equal(cJSON_GetObjectItem(r.echo, "instructions")->valuestring, "");
    oai_request_free(&r);
}

/* A whole agent turn sent back: each kind of item, and where it lands in the chat form. */
static void test_items_become_chat_messages(void **state)
{
    (void)state;
    const char *body =
        "{\"instructions\":\"S\",\"input\":["
        "{\"role\":\"developer\",\"content\":\"D\"},"
        "{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\","
        "\"text\":\"a\"},{\"type\":\"input_text\",\"text\":\"b\"}]},"
        "{\"type\":\"reasoning\",\"id\":\"rs_1\",\"summary\":[],\"content\":[{\"type\":"
        "\"reasoning_text\",\"text\":\"think\"},{\"type\":\"reasoning_text\",\"text\":\"ing\"}]},"
        "{\"type\":\"message\",\"id\":\"msg_1\",\"role\":\"assistant\",\"status\":\"completed\","
        "\"content\":[{\"type\":\"output_text\",\"text\":\"Let me look.\",\"annotations\":[]}]},"
        "{\"type\":\"function_call\",\"id\":\"fc_1\",\"call_id\":\"call_1\",\"name\":\"get\","
        "\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\",\"status\":\"completed\"},"
        "{\"type\":\"function_call\",\"call_id\":\"call_2\",\"name\":\"get\",\"arguments\":\"{}\"},"
        "{\"type\":\"function_call_output\",\"call_id\":\"call_1\",\"output\":\"21C\"},"
        "{\"type\":\"function_call_output\",\"call_id\":\"call_2\",\"output\":[{\"type\":"
        "\"input_text\",\"text\":\"x\"},{\"type\":\"input_text\",\"text\":\"y\"}]},"
        "{\"type\":\"function_call\",\"call_id\":\"call_3\",\"name\":\"get\",\"arguments\":\"{}\"},"
        "{\"type\":\"function_call_output\",\"call_id\":\"call_3\",\"output\":\"z\"},"
        "{\"type\":\"reasoning\",\"id\":\"rs_2\",\"summary\":[{\"type\":\"summary_text\","
        "\"text\":\"s\"}],\"encrypted_content\":\"opaque\"},"
        "{\"role\":\"assistant\",\"content\":\"Done.\"}]}";
    struct oai_request r;
    struct oai_error e;
    bool ok = parse(body, &r, &e);
    if (!ok)
        print_message("%s (%s)\n", e.message, e.param);
    assert_true(ok);
    check_messages(
        &r, "[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"system\",\"content\":\"D\"},"
            "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\","
            "\"text\":\"b\"}]},"
            "{\"role\":\"assistant\",\"reasoning_content\":\"thinking\",\"content\":[{\"type\":"
            "\"text\",\"text\":\"Let me look.\"}],\"tool_calls\":["
            "{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"get\","
            "\"arguments\":{\"city\":\"Paris\"}}},"
            "{\"id\":\"call_2\",\"type\":\"function\",\"function\":{\"name\":\"get\","
            "\"arguments\":{}}}]},"
            "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"21C\"},"
            "{\"role\":\"tool\",\"tool_call_id\":\"call_2\",\"content\":\"xy\"},"
            "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"call_3\",\"type\":"
            "\"function\",\"function\":{\"name\":\"get\",\"arguments\":{}}}]},"
            "{\"role\":\"tool\",\"tool_call_id\":\"call_3\",\"content\":\"z\"},"
            "{\"role\":\"assistant\",\"content\":\"Done.\"}]");
    oai_request_free(&r);
}

static void test_tools_and_tool_choice(void **state)
{
    (void)state;
    const char *tools = "\"tools\":[{\"type\":\"function\",\"name\":\"get\",\"description\":"
                        "\"Get it.\",\"parameters\":{\"type\":\"object\"},\"strict\":true}]";
    char body[512];
    snprintf(body, sizeof body,
             "{\"input\":\"x\",%s,\"tool_choice\":\"none\","
             "\"parallel_tool_calls\":false}",
             tools);
    struct oai_request r;
    struct oai_error e;
    assert_true(parse(body, &r, &e));
    cJSON *want = cJSON_Parse("[{\"type\":\"function\",\"function\":{\"name\":\"get\","
                              "\"description\":\"Get it.\",\"parameters\":{\"type\":"
                              "\"object\"}}}]");
    assert_true(cJSON_Compare(r.tools, want, true));
    cJSON_Delete(want);
    assert_int_equal(r.tool_choice, OAI_TOOL_NONE);
    assert_false(r.parallel_tool_calls);
    /* the echo keeps the Responses form */
    cJSON *t0 = cJSON_GetArrayItem(cJSON_GetObjectItem(r.echo, "tools"), 0);
    assert_string_equal(cJSON_GetObjectItem(t0, "name")->valuestring, "get");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(t0, "strict")));
    assert_string_equal(cJSON_GetObjectItem(r.echo, "tool_choice")->valuestring, "none");
    oai_request_free(&r);

    /* "required" and a named function: the chat path's enum */
    snprintf(body, sizeof body, "{\"input\":\"x\",%s,\"tool_choice\":\"required\"}", tools);
    assert_true(parse(body, &r, &e));
    assert_int_equal(r.tool_choice, OAI_TOOL_REQUIRED);
    oai_request_free(&r);
    snprintf(body, sizeof body,
             "{\"input\":\"x\",%s,\"tool_choice\":{\"type\":\"function\",\"name\":\"get\"}}",
             tools);
    assert_true(parse(body, &r, &e));
    assert_int_equal(r.tool_choice, OAI_TOOL_NAMED);
    assert_string_equal(r.tool_name, "get");
    oai_request_free(&r);
    check_refused("{\"input\":\"x\",\"tools\":[{\"type\":\"function\"}]}", "tools[0].name", NULL);
    check_refused("{\"input\":\"x\",\"tool_choice\":{\"type\":\"web_search\"}}", "tool_choice",
                  "'web_search'");
    check_refused("{\"input\":\"x\",\"tool_choice\":{\"type\":\"allowed_tools\",\"mode\":\"any\","
                  "\"tools\":[]}}",
                  "tool_choice.mode", NULL);
    check_refused(
        "{\"input\":\"x\",\"tool_choice\":{\"type\":\"allowed_tools\",\"mode\":\"auto\"}}",
        "tool_choice.tools", "Missing");
    /* allowed_tools: the others stay in the echo but are not offered */
    snprintf(body, sizeof body,
             "{\"input\":\"x\",\"tools\":[{\"type\":\"function\",\"name\":\"a\"},{\"type\":"
             "\"function\",\"name\":\"b\"}],\"tool_choice\":{\"type\":\"allowed_tools\","
             "\"mode\":\"required\",\"tools\":[{\"type\":\"function\",\"name\":\"b\"}]}}");
    assert_true(parse(body, &r, &e));
    assert_int_equal(cJSON_GetArraySize(r.tools), 1);
    assert_string_equal(
        cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(r.tools, 0), "function"), "name")
            ->valuestring,
        "b");
    assert_int_equal(r.tool_choice, OAI_TOOL_REQUIRED);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(r.echo, "tools")), 2);
    oai_request_free(&r);
    check_refused("{\"input\":\"x\",\"tool_choice\":\"sometimes\"}", "tool_choice", NULL);
}

static void test_text_format_and_reasoning(void **state)
{
    (void)state;
    cJSON *schema = NULL;
    struct oai_error e;
    cJSON *f = cJSON_Parse("{\"type\":\"text\"}");
    assert_true(resp_text_format(f, &schema, &e));
    assert_null(schema);
    cJSON_Delete(f);
    f = cJSON_Parse("{\"type\":\"json_object\"}");
    assert_true(resp_text_format(f, &schema, &e));
    cJSON *want = cJSON_Parse("{\"type\":\"object\"}");
    assert_true(cJSON_Compare(schema, want, true));
    cJSON_Delete(want);
    cJSON_Delete(schema);
    cJSON_Delete(f);
    f = cJSON_Parse("{\"type\":\"json_schema\",\"name\":\"p\",\"strict\":true,\"schema\":{"
                    "\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}}");
    assert_true(resp_text_format(f, &schema, &e));
    assert_true(cJSON_Compare(schema, cJSON_GetObjectItem(f, "schema"), true));
    cJSON_Delete(schema);
    cJSON_Delete(f);
    f = cJSON_Parse("{\"type\":\"json_schema\",\"name\":\"p\"}");
    assert_false(resp_text_format(f, &schema, &e));
    assert_string_equal(e.param, "text.format.schema");
    cJSON_Delete(f);

    struct oai_request r;
    assert_true(parse("{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"text\"},"
                      "\"verbosity\":\"medium\"},\"reasoning\":{\"effort\":\"low\","
                      "\"summary\":\"auto\"}}",
                      &r, &e));
    assert_string_equal(cJSON_GetObjectItem(r.template_kwargs, "reasoning_effort")->valuestring,
                        "low");
    cJSON *rs = cJSON_GetObjectItem(r.echo, "reasoning");
    assert_string_equal(cJSON_GetObjectItem(rs, "effort")->valuestring, "low");
    assert_string_equal(cJSON_GetObjectItem(rs, "summary")->valuestring, "auto");
    oai_request_free(&r);
    /* a JSON schema becomes the request's schema, which the reply is held to */
    assert_true(parse("{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"json_schema\",\"name\":"
                      "\"p\",\"schema\":{\"type\":\"integer\"}}}}",
                      &r, &e));
    assert_string_equal(cJSON_GetObjectItem(r.schema, "type")->valuestring, "integer");
    oai_request_free(&r);
    check_refused("{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"xml\"}}}", "text.format.type",
                  NULL);
    check_refused("{\"input\":\"x\",\"reasoning\":{\"effort\":\"extreme\"}}", "reasoning.effort",
                  NULL);
    check_refused("{\"input\":\"x\",\"reasoning\":{\"effort\":3}}", "reasoning.effort", NULL);
}

static void test_refusals_name_the_field(void **state)
{
    (void)state;
    check_refused("{\"input\":\"x\",\"previous_response_id\":\"resp_1\"}", "previous_response_id",
                  "stateless");
    check_refused("{\"instructions\":\"S\"}", "input", "Missing");
    check_refused("{\"input\":[]}", "input", NULL);
    check_refused("{\"input\":3}", "input", NULL);
    check_refused("{\"input\":\"x\",\"include\":\"reasoning.encrypted_content\"}", "include", NULL);
    check_refused("{\"input\":\"x\",\"include\":[3]}", "include", NULL);
    check_refused("{\"input\":\"x\",\"truncation\":\"middle\"}", "truncation", NULL);
    check_refused("{\"input\":\"x\",\"top_logprobs\":21}", "top_logprobs", NULL);
    check_refused("{\"input\":\"x\",\"max_tool_calls\":-1}", "max_tool_calls", NULL);
    check_refused("{\"input\":\"x\",\"max_tool_calls\":\"2\"}", "max_tool_calls", NULL);
    check_refused("{\"input\":\"x\",\"text\":{\"verbosity\":\"loud\"}}", "text.verbosity", NULL);
    check_refused("{\"input\":\"x\",\"prompt_cache_key\":3}", "prompt_cache_key", NULL);
    check_refused("{\"input\":\"x\",\"client_metadata\":\"x\"}", "client_metadata", NULL);
    check_refused("{\"input\":\"x\",\"prompt\":{\"id\":\"p\"}}", "prompt", "stateless");
    check_refused("{\"input\":\"x\",\"background\":true}", "background", NULL);
    check_refused("{\"input\":\"x\",\"conversation\":\"conv_1\"}", "conversation", NULL);
    check_refused("{\"input\":\"x\",\"store\":\"yes\"}", "store", NULL);
    check_refused("{\"input\":\"x\",\"max_output_tokens\":0}", "max_output_tokens", NULL);
    check_refused("{\"input\":\"x\",\"temperature\":3}", "temperature", NULL);
    check_refused("{\"input\":\"x\",\"metadata\":{\"k\":1}}", "metadata", NULL);
    check_refused("{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_image\","
                  "\"image_url\":\"http://x\"}]}]}",
                  "input[0].content[0]", "'input_image'");
    check_refused("{\"input\":[{\"role\":\"tool\",\"content\":\"x\"}]}", "input[0].role", NULL);
    check_refused("{\"input\":[{\"role\":\"user\"}]}", "input[0].content", "Missing");
    check_refused("{\"input\":[{\"type\":\"item_reference\",\"id\":\"msg_1\"}]}", "input[0]",
                  "stores nothing");
    check_refused("{\"input\":[{\"type\":\"custom_tool_call\",\"call_id\":\"c\",\"name\":\"f\"}]}",
                  "input[0].input", "Missing");
    check_refused("{\"input\":[{\"type\":\"reasoning\",\"encrypted_content\":1}]}",
                  "input[0].encrypted_content", NULL);
    check_refused("{\"input\":\"x\",\"tools\":[{\"type\":\"namespace\",\"name\":\"n\"}]}",
                  "tools[0].tools", "Missing");
    check_refused("{\"input\":\"x\",\"tools\":[{\"type\":\"custom\",\"name\":\"c\",\"format\":"
                  "{\"type\":\"grammar\",\"syntax\":\"ebnf\",\"definition\":\"x\"}}]}",
                  "tools[0].format", "syntax");
    check_refused("{\"input\":\"x\",\"tools\":[{\"type\":\"custom\",\"name\":\"c\",\"format\":"
                  "{\"type\":\"grammar\",\"syntax\":\"lark\"}}]}",
                  "tools[0].format.definition", "Missing");
    check_refused("{\"input\":[{\"type\":\"function_call\",\"call_id\":\"c\",\"name\":\"f\","
                  "\"arguments\":\"{oops\"}]}",
                  "input[0].arguments", NULL);
    check_refused("{\"input\":[{\"type\":\"function_call\",\"name\":\"f\",\"arguments\":\"{}\"}]}",
                  "input[0].call_id", "Missing");
    check_refused("{\"input\":[{\"type\":\"function_call_output\",\"call_id\":\"c\"}]}",
                  "input[0].output", "Missing");
    check_refused("{\"input\":[{\"type\":\"function_call_output\",\"call_id\":\"c\",\"output\":"
                  "[{\"type\":\"input_image\"}]}]}",
                  "input[0].output[0]", NULL);
    check_refused("{\"input\":\"x\",\"input\":\"y\"}", "input", "twice");
    check_refused("[1]", "", "JSON object");
    check_refused("{\"input\":", "", "could not parse");
}

/* Whether r notes path as ignored, with that unknown flag. */
static bool noted(const struct oai_request *r, const char *path, bool unknown)
{
    for (int32_t k = 0; k < r->n_ignored; k++)
        if (!strcmp(r->ignored[k].path, path))
            return r->ignored[k].unknown == unknown;
    return false;
}

static void check_noted(const struct oai_request *r, const char *path, bool unknown)
{
    if (!noted(r, path, unknown)) {
        for (int32_t k = 0; k < r->n_ignored; k++)
            print_message("  noted %s (%s)\n", r->ignored[k].path,
                          r->ignored[k].unknown ? "unknown" : "known");
        print_message("%s not noted as %s\n", path, unknown ? "unknown" : "known");
        fail();
    }
}

/* The policy: what does not change the reply is accepted and noted, unknown fields marked. */
static void test_inert_fields_are_noted(void **state)
{
    (void)state;
    struct oai_request r;
    struct oai_error e;
    bool ok = parse("{\"input\":\"x\",\"store\":false,\"metadata\":{\"k\":\"v\"},"
                    "\"client_metadata\":{\"trace\":\"t\"},\"prompt_cache_key\":\"p\","
                    "\"safety_identifier\":\"s\",\"service_tier\":\"flex\",\"user\":\"u\","
                    "\"background\":false,\"truncation\":\"auto\",\"top_logprobs\":0,"
                    "\"text\":{\"verbosity\":\"low\",\"tone\":\"dry\"},"
                    "\"reasoning\":{\"summary\":\"detailed\",\"budget\":3},"
                    "\"include\":[\"web_search_call.results\",\"x.y\"]}",
                    &r, &e);
    if (!ok)
        print_message("%s (%s)\n", e.message, e.param);
    assert_true(ok);
    static const char *const known[] = {
        "store",
        "metadata",
        "client_metadata",
        "prompt_cache_key",
        "safety_identifier",
        "service_tier",
        "user",
        "background",
        "truncation",
        "text.verbosity",
        "reasoning.summary",
        "include:web_search_call.results",
    };
    for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
        check_noted(&r, known[k], false);
    static const char *const unknown[] = {"text.tone", "reasoning.budget", "include:x.y"};
    for (size_t k = 0; k < sizeof unknown / sizeof unknown[0]; k++)
        check_noted(&r, unknown[k], true);
    assert_int_equal(r.n_ignored, 15);
    assert_int_equal(r.n_ignored_more, 0);
    /* nothing of them reaches the chat request; the echo keeps what the response carries */
    check_messages(&r, "[{\"role\":\"user\",\"content\":\"x\"}]");
    assert_int_equal(r.top_logprobs, -1);
    assert_string_equal(cJSON_GetObjectItem(r.echo, "truncation")->valuestring, "auto");
    assert_string_equal(cJSON_GetObjectItem(r.echo, "prompt_cache_key")->valuestring, "p");
    assert_false(cJSON_HasObjectItem(r.echo, RESP_ECHO_SEAL));
    oai_request_free(&r);
    /* past 16 notes, the rest are counted */
    assert_true(parse("{\"input\":\"x\",\"stream\":true,\"stream_options\":{"
                      "\"include_obfuscation\":false,\"pad\":1},\"frobnicate\":1,\"messages\":[],"
                      "\"a\":1,\"b\":1,\"c\":1,\"d\":1,\"e\":1,\"f\":1,\"g\":1,\"h\":1,\"i\":1,"
                      "\"j\":1,\"k\":1,\"l\":1,\"m\":1,\"n\":1}",
                      &r, &e));
    check_noted(&r, "stream_options.include_obfuscation", false);
    check_noted(&r, "stream_options.pad", true);
    check_noted(&r, "frobnicate", true);
    check_noted(&r, "messages", true);
    assert_int_equal(r.n_ignored, 16);
    assert_int_equal(r.n_ignored_more, 2);
    oai_request_free(&r);
}

/* top_logprobs and include message.output_text.logprobs: the chat path's logprobs. */
static void test_logprobs(void **state)
{
    (void)state;
    struct oai_request r;
    struct oai_error e;
    assert_true(parse("{\"input\":\"x\",\"top_logprobs\":2}", &r, &e));
    assert_int_equal(r.top_logprobs, 2);
    assert_int_equal(cJSON_GetObjectItem(r.echo, "top_logprobs")->valueint, 2);
    oai_request_free(&r);
    assert_true(parse("{\"input\":\"x\",\"include\":[\"message.output_text.logprobs\"]}", &r, &e));
    assert_int_equal(r.top_logprobs, 0);
    assert_int_equal(r.n_ignored, 0);
    oai_request_free(&r);
    assert_true(parse("{\"input\":\"x\",\"top_logprobs\":0}", &r, &e));
    assert_int_equal(r.top_logprobs, -1); /* no alternatives asked, no logprobs included */
    oai_request_free(&r);
    assert_true(parse("{\"input\":\"x\",\"top_logprobs\":3,\"include\":["
                      "\"message.output_text.logprobs\"]}",
                      &r, &e));
    assert_int_equal(r.top_logprobs, 3);
    oai_request_free(&r);
}

/* reasoning.effort: every value the API has, onto the chat request's. */
static void test_reasoning_effort_values(void **state)
{
    (void)state;
    static const char *const map[][2] = {
        {"none", "none"},     {"minimal", "minimal"}, {"low", "low"},
        {"medium", "medium"}, {"high", "high"},       {"xhigh", "xhigh"},
    };
    for (size_t k = 0; k < sizeof map / sizeof map[0]; k++) {
        char body[128];
        snprintf(body, sizeof body, "{\"input\":\"x\",\"reasoning\":{\"effort\":\"%s\"}}",
                 map[k][0]);
        struct oai_request r;
        struct oai_error e;
        assert_true(parse(body, &r, &e));
        assert_string_equal(cJSON_GetObjectItem(r.template_kwargs, "reasoning_effort")->valuestring,
                            map[k][1]);
        const cJSON *think = cJSON_GetObjectItem(r.template_kwargs, "enable_thinking");
        assert_true(k == 0 ? cJSON_IsFalse(think) : think == NULL); /* none: thinking off */
        assert_string_equal(
            cJSON_GetObjectItem(cJSON_GetObjectItem(r.echo, "reasoning"), "effort")->valuestring,
            map[k][0]);
        oai_request_free(&r);
    }
}

/* max_tool_calls: echoed (the reply drops calls past it); 1 also makes a forced call one. */
static void test_max_tool_calls(void **state)
{
    (void)state;
    struct oai_request r;
    struct oai_error e;
    assert_true(parse("{\"input\":\"x\",\"max_tool_calls\":1}", &r, &e));
    assert_false(r.parallel_tool_calls);
    assert_int_equal(cJSON_GetObjectItem(r.echo, "max_tool_calls")->valueint, 1);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(r.echo, "parallel_tool_calls")));
    oai_request_free(&r);
    assert_true(parse("{\"input\":\"x\",\"max_tool_calls\":5}", &r, &e));
    assert_true(r.parallel_tool_calls);
    assert_int_equal(cJSON_GetObjectItem(r.echo, "max_tool_calls")->valueint, 5);
    oai_request_free(&r);
}

/* The chat tool r offers under name, or NULL. */
static const cJSON *chat_tool(const struct oai_request *r, const char *name)
{
    const cJSON *t;
    cJSON_ArrayForEach(t, r->tools)
    {
        const cJSON *fn = cJSON_GetObjectItem(t, "function");
        if (!strcmp(cJSON_GetObjectItem(fn, "name")->valuestring, name))
            return fn;
    }
    return NULL;
}

/* Codex's tools: function, custom (with a Lark grammar), namespace, hosted ones skipped. */
static void test_codex_tools(void **state)
{
    (void)state;
    struct oai_request r;
    struct oai_error e;
    bool ok = parse(CODEX_BODY, &r, &e);
    if (!ok)
        print_message("%s (%s)\n", e.message, e.param);
    assert_true(ok);
    assert_int_equal(cJSON_GetArraySize(r.tools), 4);
    assert_non_null(chat_tool(&r, "shell_command"));
    assert_non_null(chat_tool(&r, "update_plan"));
    /* the namespace's function, flattened under its name */
    const cJSON *ns = chat_tool(&r, "mcp__docs__search");
    assert_non_null(ns);
    assert_string_equal(cJSON_GetObjectItem(ns, "description")->valuestring, "Search the docs.");
    /* the custom tool: one string "input", held to the grammar's regex, the grammar shown */
    const cJSON *ap = chat_tool(&r, "apply_patch");
    assert_non_null(ap);
    assert_non_null(strstr(cJSON_GetObjectItem(ap, "description")->valuestring,
                           "FREEFORM tool, so do not wrap the patch in JSON.\n\nThe input is "
                           "free text in this lark grammar:\nstart: begin_patch hunk+"));
    const cJSON *ps = cJSON_GetObjectItem(ap, "parameters");
    assert_string_equal(cJSON_GetObjectItem(ps, "type")->valuestring, "object");
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(ps, "additionalProperties")));
    assert_string_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(ps, "required"), 0)->valuestring,
                        "input");
    const cJSON *in = cJSON_GetObjectItem(cJSON_GetObjectItem(ps, "properties"), "input");
    assert_string_equal(cJSON_GetObjectItem(in, "type")->valuestring, "string");
    const char *pattern = cJSON_GetObjectItem(in, "pattern")->valuestring;
    assert_memory_equal(pattern, "^\\*\\*\\* Begin Patch\\n", 20);
    /* hosted tools skipped and noted as known; the request's bookkeeping noted */
    check_noted(&r, "tools.4:web_search", false);
    check_noted(&r, "tools.5:local_shell", false);
    check_noted(&r, "tools.6:image_generation", false);
    check_noted(&r, "input.10:web_search_call", false);
    check_noted(&r, "client_metadata", false);
    check_noted(&r, "prompt_cache_key", false);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(r.echo, RESP_ECHO_SEAL)));
    assert_false(r.parallel_tool_calls);
    assert_int_equal(r.tool_choice, OAI_TOOL_AUTO);
    assert_true(r.stream);
    /* the echo keeps the tools as sent */
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(r.echo, "tools")), 7);
    oai_request_free(&r);

    /* a custom tool with plain text, a regex, and a grammar the converter cannot take */
    assert_true(parse("{\"input\":\"x\",\"tools\":[{\"type\":\"custom\",\"name\":\"a\"},"
                      "{\"type\":\"custom\",\"name\":\"b\",\"format\":{\"type\":\"grammar\","
                      "\"syntax\":\"regex\",\"definition\":\"[0-9]+\"}},"
                      "{\"type\":\"custom\",\"name\":\"c\",\"format\":{\"type\":\"grammar\","
                      "\"syntax\":\"lark\",\"definition\":\"start: x\\n%ignore \\\" \\\"\"}},"
                      "{\"type\":\"frobnicator\"}],"
                      "\"tool_choice\":{\"type\":\"custom\",\"name\":\"b\"}}",
                      &r, &e));
    const cJSON *a = cJSON_GetObjectItem(
        cJSON_GetObjectItem(cJSON_GetObjectItem(chat_tool(&r, "a"), "parameters"), "properties"),
        "input");
    assert_false(cJSON_HasObjectItem(a, "pattern"));
    assert_false(cJSON_HasObjectItem(chat_tool(&r, "a"), "description"));
    const cJSON *b = cJSON_GetObjectItem(
        cJSON_GetObjectItem(cJSON_GetObjectItem(chat_tool(&r, "b"), "parameters"), "properties"),
        "input");
    assert_string_equal(cJSON_GetObjectItem(b, "pattern")->valuestring, "^(?:[0-9]+)$");
    const cJSON *c = cJSON_GetObjectItem(
        cJSON_GetObjectItem(cJSON_GetObjectItem(chat_tool(&r, "c"), "parameters"), "properties"),
        "input");
    assert_false(cJSON_HasObjectItem(c, "pattern")); /* free-form instead, and noted */
    check_noted(&r, "tools.2.format.definition", false);
    check_noted(&r, "tools.3:frobnicator", true);
    assert_int_equal(r.tool_choice, OAI_TOOL_NAMED);
    assert_string_equal(r.tool_name, "b");
    oai_request_free(&r);
}

/* Codex's items read back: custom tool calls, namespaced calls, sealed reasoning. */
static void test_codex_items(void **state)
{
    (void)state;
    struct oai_request r;
    struct oai_error e;
    assert_true(parse(CODEX_BODY, &r, &e));
    const cJSON *m = r.messages;
    assert_int_equal(cJSON_GetArraySize(m), 12);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(m, 1), "role")->valuestring,
                        "system"); /* developer */
    const cJSON *turn = cJSON_GetArrayItem(m, 4);
    assert_string_equal(cJSON_GetObjectItem(turn, "role")->valuestring, "assistant");
    assert_string_equal(cJSON_GetObjectItem(turn, "reasoning_content")->valuestring,
                        "I should look."); /* opened from encrypted_content */
    const cJSON *calls = cJSON_GetObjectItem(turn, "tool_calls");
    assert_int_equal(cJSON_GetArraySize(calls), 1);
    const cJSON *ns =
        cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetArrayItem(m, 6), "tool_calls"), 0);
    assert_string_equal(
        cJSON_GetObjectItem(cJSON_GetObjectItem(ns, "function"), "name")->valuestring,
        "mcp__docs__search");
    const cJSON *ctc =
        cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetArrayItem(m, 8), "tool_calls"), 0);
    const cJSON *fn = cJSON_GetObjectItem(ctc, "function");
    assert_string_equal(cJSON_GetObjectItem(ctc, "id")->valuestring, "call_3");
    assert_string_equal(cJSON_GetObjectItem(fn, "name")->valuestring, "apply_patch");
    const cJSON *args = cJSON_GetObjectItem(fn, "arguments");
    assert_memory_equal(cJSON_GetObjectItem(args, "input")->valuestring, "*** Begin Patch\n", 16);
    const cJSON *out = cJSON_GetArrayItem(m, 9);
    assert_string_equal(cJSON_GetObjectItem(out, "role")->valuestring, "tool");
    assert_string_equal(cJSON_GetObjectItem(out, "tool_call_id")->valuestring, "call_3");
    const cJSON *fixed = cJSON_GetArrayItem(m, 10); /* the web_search_call item left nothing */
    assert_string_equal(cJSON_GetObjectItem(fixed, "role")->valuestring, "assistant");
    oai_request_free(&r);
}

/* encrypted_content: hearth's seal opens back to the text; anything else is not opened. */
static void test_sealed_reasoning(void **state)
{
    (void)state;
    static const char *const texts[] = {
        "", "a", "ab", "abc", "I should look.", "multi\nline \"quoted\" \xc3\xa9 text"};
    for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++) {
        char *s = resp_seal_reasoning(texts[k], strlen(texts[k]));
        assert_memory_equal(s, "hearth.r1:", 10);
        char *t = resp_open_reasoning(s);
        assert_non_null(t);
        assert_string_equal(t, texts[k]);
        free(t);
        free(s);
    }
    assert_null(resp_open_reasoning("gAAAAABopaque-openai-blob"));
    assert_null(resp_open_reasoning("hearth.r1:abc"));
    assert_null(resp_open_reasoning("hearth.r1:ab=c"));
    assert_null(resp_open_reasoning("hearth.r1:AA==")); /* a NUL inside */
    /* another server's blob: the item is kept, nothing rendered from it */
    struct oai_request r;
    struct oai_error e;
    assert_true(parse("{\"input\":[{\"role\":\"user\",\"content\":\"q\"},{\"type\":\"reasoning\","
                      "\"summary\":[],\"encrypted_content\":\"gAAAAB\"},{\"role\":\"assistant\","
                      "\"content\":\"a\"}]}",
                      &r, &e));
    check_messages(&r, "[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\","
                       "\"content\":\"a\"}]");
    oai_request_free(&r);
}

/*
 * Codex CLI 0.171's real first requests (captured; the fuzz seeds codex_capture_*: one byte,
 * then the body), with an unknown model (namespace, web_search) and a known one (custom
 * apply_patch with its Lark grammar, tool_search, text.verbosity): accepted, the hosted tools
 * skipped, nothing the policy ignores left unnoted, no field noted as unknown.
 */
static void test_codex_captures(void **state)
{
    (void)state;
    static const char *const seeds[] = {"codex_capture_qwen3", "codex_capture_gpt55"};
    for (size_t k = 0; k < 2; k++) {
        char path[512];
        snprintf(path, sizeof path, "%s/tests/fuzz/corpus/responses/%s", HEARTH_TOP, seeds[k]);
        size_t len;
        char *seed = tu_read_file(path, &len);
        assert_non_null(seed);
        struct oai_request r;
        struct oai_error e;
        bool ok = resp_parse(seed + 1, len - 1, &r, &e);
        if (!ok)
            print_message("%s: %s (%s)\n", seeds[k], e.message, e.param);
        assert_true(ok);
        assert_true(r.stream);
        for (int32_t i = 0; i < r.n_ignored; i++)
            if (r.ignored[i].unknown) {
                print_message("%s: %s noted as unknown\n", seeds[k], r.ignored[i].path);
                fail();
            }
        check_noted(&r, "client_metadata", false);
        check_noted(&r, "prompt_cache_key", false);
        check_noted(&r, "store", false);
        assert_true(cJSON_IsTrue(cJSON_GetObjectItem(r.echo, RESP_ECHO_SEAL)));
        if (k == 0) { /* the namespace flattened, web_search skipped */
            assert_non_null(chat_tool(&r, "multi_agent_v1__close_agent"));
            assert_non_null(chat_tool(&r, "get_goal"));
            check_noted(&r, "tools.8:web_search", false);
            check_noted(&r, "reasoning.summary", false);
        } else { /* apply_patch held to its grammar; tool_search and web_search skipped */
            const cJSON *ap = chat_tool(&r, "apply_patch");
            assert_non_null(ap);
            const cJSON *in = cJSON_GetObjectItem(
                cJSON_GetObjectItem(cJSON_GetObjectItem(ap, "parameters"), "properties"), "input");
            assert_non_null(cJSON_GetObjectItem(in, "pattern"));
            check_noted(&r, "tools.8:tool_search", false);
            check_noted(&r, "tools.9:web_search", false);
            check_noted(&r, "text.verbosity", false);
            assert_string_equal(
                cJSON_GetObjectItem(r.template_kwargs, "reasoning_effort")->valuestring, "medium");
        }
        oai_request_free(&r);
        free(seed);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_string_input_and_instructions),
        cmocka_unit_test(test_items_become_chat_messages),
        cmocka_unit_test(test_tools_and_tool_choice),
        cmocka_unit_test(test_text_format_and_reasoning),
        cmocka_unit_test(test_refusals_name_the_field),
        cmocka_unit_test(test_inert_fields_are_noted),
        cmocka_unit_test(test_reasoning_effort_values),
        cmocka_unit_test(test_logprobs),
        cmocka_unit_test(test_max_tool_calls),
        cmocka_unit_test(test_codex_tools),
        cmocka_unit_test(test_codex_items),
        cmocka_unit_test(test_sealed_reasoning),
        cmocka_unit_test(test_codex_captures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
