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
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(echo, "metadata"), "k")->valuestring,
                        "v");
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
        &r,
        "[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"system\",\"content\":\"D\"},"
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
    snprintf(body, sizeof body, "{\"input\":\"x\",%s,\"tool_choice\":\"none\","
             "\"parallel_tool_calls\":false}", tools);
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
    check_refused("{\"input\":\"x\",\"tools\":[{\"type\":\"function\",\"name\":\"f\"},"
                  "{\"type\":\"web_search\"}]}",
                  "tools[1]", "'web_search' tools are not supported");
    check_refused("{\"input\":\"x\",\"tools\":[{\"type\":\"file_search\",\"vector_store_ids\":[]}]}",
                  "tools[0]", "'file_search'");
    check_refused("{\"input\":\"x\",\"tools\":[{\"type\":\"function\"}]}", "tools[0].name", NULL);
    check_refused("{\"input\":\"x\",\"tool_choice\":{\"type\":\"allowed_tools\",\"mode\":\"auto\","
                  "\"tools\":[]}}",
                  "tool_choice", "'allowed_tools'");
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
    assert_string_equal(
        cJSON_GetObjectItem(r.template_kwargs, "reasoning_effort")->valuestring, "low");
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
    check_refused("{\"input\":\"x\",\"reasoning\":{\"budget\":3}}", "reasoning", "budget");
}

static void test_refusals_name_the_field(void **state)
{
    (void)state;
    check_refused("{\"input\":\"x\",\"previous_response_id\":\"resp_1\"}", "previous_response_id",
                  "stateless");
    check_refused("{\"input\":\"x\",\"frobnicate\":1}", "frobnicate", "Unrecognized");
    check_refused("{\"input\":\"x\",\"messages\":[]}", "messages", "Unrecognized");
    check_refused("{\"instructions\":\"S\"}", "input", "Missing");
    check_refused("{\"input\":[]}", "input", NULL);
    check_refused("{\"input\":3}", "input", NULL);
    check_refused("{\"input\":\"x\",\"include\":[\"reasoning.encrypted_content\"]}", "include",
                  NULL);
    check_refused("{\"input\":\"x\",\"truncation\":\"auto\"}", "truncation", NULL);
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
    check_refused("{\"input\":[{\"type\":\"web_search_call\",\"id\":\"ws_1\"}]}", "input[0]",
                  "'web_search_call'");
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_string_input_and_instructions),
        cmocka_unit_test(test_items_become_chat_messages),
        cmocka_unit_test(test_tools_and_tool_choice),
        cmocka_unit_test(test_text_format_and_reasoning),
        cmocka_unit_test(test_refusals_name_the_field),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
