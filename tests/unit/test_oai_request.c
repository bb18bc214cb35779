/*
 * test_oai_request.c: src/serve/oai_request.c and src/net/errbody.c, a
 * request body -> a validated struct oai_request, and the error body. No
 * model needed.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/testutil.h"
#include "serve/openai.h"

static void test_parse_full_chat_request(void **state)
{
    (void)state;
    const char *body =
        "{\"model\":\"m\",\"messages\":[{\"role\":\"developer\",\"content\":\"S\"},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\","
        "\"text\":\"b\"}]},{\"role\":\"assistant\",\"content\":null}],"
        "\"max_tokens\":7,\"max_completion_tokens\":9,\"temperature\":0.5,\"top_p\":0.9,"
        "\"top_k\":40,\"min_p\":0.05,\"seed\":-3,\"stop\":[\"x\",\"\",\"yz\"],"
        "\"presence_penalty\":0.5,\"frequency_penalty\":-0.5,\"repetition_penalty\":1.1,"
        "\"logprobs\":true,\"top_logprobs\":4,\"n\":2,\"stream\":true,"
        "\"stream_options\":{\"include_usage\":true},\"user\":\"u-1\",\"tools\":[],"
        "\"response_format\":{\"type\":\"text\"}}";
    struct oai_request r;
    struct oai_error e;
    assert_true(oai_parse(OAI_CHAT, body, strlen(body), &r, &e));
    assert_string_equal(r.model, "m");
    assert_int_equal(cJSON_GetArraySize(r.messages), 3);
    cJSON *m0 = cJSON_GetArrayItem(r.messages, 0);
    assert_string_equal(cJSON_GetObjectItem(m0, "role")->valuestring, "system"); /* developer */
    cJSON *m1 = cJSON_GetArrayItem(r.messages, 1);
    assert_true(cJSON_IsArray(cJSON_GetObjectItem(m1, "content"))); /* the template decides */
    assert_null(r.tools); /* an empty list offers nothing */
    assert_int_equal(r.max_tokens, 9);
    assert_true(r.sampling.temperature == 0.5f);
    assert_true(r.sampling.top_p == 0.9f);
    assert_int_equal(r.sampling.top_k, 40);
    assert_true(r.has_seed);
    assert_true(r.sampling.seed == (uint64_t)-3);
    assert_int_equal(r.n_stop, 2);
    assert_string_equal(r.stop[1], "yz");
    assert_true(r.sampling.repeat_penalty == 1.1f);
    assert_int_equal(r.top_logprobs, 4);
    assert_int_equal(r.n, 2);
    assert_true(r.stream);
    assert_true(r.include_usage);
    oai_request_free(&r);
}

static void test_parse_defaults(void **state)
{
    (void)state;
    const char *body = "{\"prompt\":\"hi\",\"temperature\":null}";
    struct oai_request r;
    struct oai_error e;
    assert_true(oai_parse(OAI_COMPLETION, body, strlen(body), &r, &e));
    assert_int_equal(r.n_prompts, 1);
    assert_int_equal(r.max_tokens, -1);
    assert_true(r.sampling.temperature == 1.0f); /* OpenAI's default; null means absent */
    assert_true(r.sampling.top_p == 1.0f);
    assert_int_equal(r.sampling.top_k, 0);
    assert_int_equal(r.top_logprobs, -1);
    assert_int_equal(r.n, 1);
    assert_false(r.stream);
    assert_false(r.has_seed);
    oai_request_free(&r);
    const char *arr = "{\"prompt\":[\"a\",\"b\",\"c\"],\"logprobs\":0}";
    assert_true(oai_parse(OAI_COMPLETION, arr, strlen(arr), &r, &e));
    assert_int_equal(r.n_prompts, 3);
    assert_string_equal(r.prompts[2], "c");
    assert_int_equal(r.top_logprobs, 0);
    oai_request_free(&r);
}

static void test_parse_errors_name_the_field(void **state)
{
    (void)state;
    static const struct {
        enum oai_kind kind;
        const char *body, *param, *code;
    } cases[] = {
        {OAI_CHAT, "{", "", NULL},
        {OAI_CHAT, "{\"messages\":[]} x", "", NULL},
        {OAI_CHAT, "7", "", NULL},
        {OAI_CHAT, "{\"model\":\"m\"}", "messages", "missing_required_parameter"},
        {OAI_CHAT, "{\"messages\":{}}", "messages", "invalid_type"},
        {OAI_CHAT, "{\"messages\":[{\"role\":1,\"content\":\"x\"}]}", "messages[0].role",
         "invalid_type"},
        {OAI_CHAT,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"robot\","
         "\"content\":\"x\"}]}",
         "messages[1].role", "invalid_value"},
        {OAI_CHAT, "{\"messages\":[{\"role\":\"tool\"}]}", "messages[0].content",
         "missing_required_parameter"},
        {OAI_CHAT,
         "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"type\":\"function\","
         "\"function\":{\"name\":\"f\",\"arguments\":\"{nope\"}}]}]}",
         "messages[0].tool_calls[0].function.arguments", "invalid_value"},
        {OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"tool_calls\":[]}]}",
         "messages[0].tool_calls", "invalid_value"},
        {OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{}]}",
         "tools[0]", "invalid_value"},
        {OAI_CHAT,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":"
         "\"required\"}",
         "tool_choice", "invalid_value"},
        {OAI_CHAT,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":"
         "\"function\",\"function\":{\"name\":\"g\"}}],\"tool_choice\":"
         "{\"type\":\"function\",\"function\":{\"name\":\"f\"}}}",
         "tool_choice.function.name", "invalid_value"},
        {OAI_CHAT,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":"
         "{\"type\":\"function\"}}",
         "tool_choice.function.name", "invalid_value"},
        {OAI_CHAT,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":"
         "\"function\",\"function\":{\"name\":\"g\"}}],\"tool_choice\":\"required\","
         "\"response_format\":{\"type\":\"json_object\"}}",
         "tool_choice", "invalid_value"},
        {OAI_CHAT,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":"
         "\"function\",\"function\":{\"name\":\"g\"}}],\"grammar\":\"root ::= \\\"a\\\"\"}",
         "grammar", "invalid_value"},
        {OAI_CHAT,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":"
         "{\"type\":\"json_schema\"}}",
         "response_format.json_schema", "missing_required_parameter"},
        {OAI_CHAT,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":"
         "{\"type\":\"yaml\"}}",
         "response_format.type", "invalid_value"},
        {OAI_CHAT,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"chat_template_kwargs\":1}",
         "chat_template_kwargs", "invalid_type"},
        {OAI_CHAT,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"reasoning_format\":"
         "\"weird\"}",
         "reasoning_format", "invalid_value"},
        {OAI_CHAT,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"reasoning_effort\":"
         "\"max\"}",
         "reasoning_effort", "invalid_value"},
        {OAI_COMPLETION, "{\"prompt\":\"x\",\"n_predict\":0}", "n_predict", "invalid_value"},
        {OAI_COMPLETION, "{\"prompt\":\"x\",\"user\":5}", "user", "invalid_type"},
        {OAI_COMPLETION, "{\"prompt\":\"x\",\"repeat_penalty\":0}", "repeat_penalty",
         "invalid_value"},
        {OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\"}]}]}",
         "messages[0].content[0].text", "invalid_type"},
        {OAI_COMPLETION, "{\"prompt\":[[1,2]]}", "prompt[0]", "invalid_type"},
        {OAI_COMPLETION, "{\"prompt\":\"x\",\"max_tokens\":-1}", "max_tokens",
         "integer_below_min_value"},
        {OAI_COMPLETION, "{\"prompt\":\"x\",\"max_tokens\":1e300}", "max_tokens",
         "integer_above_max_value"},
        {OAI_COMPLETION, "{\"prompt\":\"x\",\"top_k\":\"5\"}", "top_k", "invalid_type"},
        {OAI_COMPLETION, "{\"prompt\":\"x\",\"top_p\":1.5}", "top_p", "invalid_value"},
        {OAI_COMPLETION, "{\"prompt\":\"x\",\"seed\":1.5}", "seed", "invalid_type"},
        {OAI_COMPLETION, "{\"prompt\":\"x\",\"stop\":[1]}", "stop[0]", "invalid_type"},
        {OAI_COMPLETION, "{\"prompt\":[\"a\",\"b\",\"c\",\"d\",\"e\"],\"n\":16}", "n",
         "invalid_value"},
        {OAI_COMPLETION, "{\"prompt\":\"x\",\"stream_options\":5,\"stream\":true}",
         "stream_options", "invalid_type"},
        {OAI_COMPLETION,
         "{\"prompt\":\"x\",\"stream\":true,\"stream_options\":"
         "{\"include_usage\":1}}",
         "stream_options.include_usage", "invalid_type"},
        {OAI_COMPLETION, "{\"prompt\":\"x\",\"ignore_eos\":\"no\"}", "ignore_eos", "invalid_type"},
        {OAI_COMPLETION, "{\"prompt\":\"x\",\"best_of\":3}", "best_of", "unsupported_parameter"},
        {OAI_COMPLETION, "{\"prompt\":\"x\",\"logit_bias\":{\"five\":1}}", "logit_bias",
         "invalid_value"},
        {OAI_COMPLETION, "{\"prompt\":\"x\",\"logit_bias\":{\"5\":101}}", "logit_bias",
         "invalid_value"},
        {OAI_COMPLETION, "{\"prompt\":\"x\",\"logit_bias\":[[1.5,1]]}", "logit_bias",
         "invalid_value"},
        {OAI_CHAT,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"modalities\":"
         "[\"text\",\"audio\"]}",
         "modalities", "unsupported_value"},
        {OAI_CHAT,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"audio\":"
         "{\"voice\":\"alloy\",\"format\":\"wav\"}}",
         "audio", "unsupported_parameter"},
        {OAI_CHAT,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"samplers\":"
         "[\"top_k\",\"warp\"]}",
         "samplers", "invalid_value"},
        {OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"cache_prompt\":1}",
         "cache_prompt", "invalid_type"},
        {OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n_probs\":21}",
         "n_probs", "integer_above_max_value"},
        {OAI_COMPLETION,
         "{\"prompt\":\"x\",\"response_format\":{\"type\":\"json_object\"},\"json_schema\":"
         "{}}",
         "grammar", "invalid_value"},
        {OAI_COMPLETION,
         "{\"prompt\":\"x\",\"grammar\":\"root ::= \\\"a\\\"\",\"ignore_eos\":true}", "ignore_eos",
         "invalid_value"},
        {OAI_COMPLETION, "{\"prompt\":\"x\",\"grammar\":5}", "grammar", "invalid_type"},
        {OAI_COMPLETION, "{\"prompt\":\"x\",\"json_schema\":\"{}\"}", "json_schema",
         "invalid_type"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct oai_request r;
        struct oai_error e;
        memset(&e, 0, sizeof e);
        bool ok = oai_parse(cases[i].kind, cases[i].body, strlen(cases[i].body), &r, &e);
        if (ok || strcmp(e.param, cases[i].param))
            print_message("case %zu (%s): ok %d, param '%s', message %s\n", i, cases[i].body, ok,
                          e.param, e.message);
        assert_false(ok);
        assert_int_equal(e.status, 400);
        assert_string_equal(e.type, "invalid_request_error");
        assert_string_equal(e.param, cases[i].param);
        if (cases[i].code)
            assert_string_equal(e.code, cases[i].code);
        assert_true(strlen(e.message) > 10);
        assert_null(r.messages);
        assert_null(r.prompts);
    }
}

/* The constraint fields become the request's schema or grammar; tool_choice its enum. */
static void test_parse_constraints(void **state)
{
    (void)state;
    struct {
        const char *body;
        const char *schema; /* the schema kept, printed; NULL: none */
        const char *grammar;
        enum oai_tool_choice tc;
    } cases[] = {
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":"
         "{\"type\":\"json_object\"}}",
         "{\"type\":\"object\"}", NULL, OAI_TOOL_AUTO},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":"
         "{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"n\",\"strict\":true,"
         "\"schema\":{\"type\":\"integer\"}}}}",
         "{\"type\":\"integer\"}", NULL, OAI_TOOL_AUTO},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":"
         "{\"type\":\"text\"}}",
         NULL, NULL, OAI_TOOL_AUTO},
        {"{\"prompt\":\"x\",\"json_schema\":{\"enum\":[1,2]}}", "{\"enum\":[1,2]}", NULL,
         OAI_TOOL_AUTO},
        {"{\"prompt\":\"x\",\"grammar\":\"root ::= [a-z]+\"}", NULL, "root ::= [a-z]+",
         OAI_TOOL_AUTO},
        {"{\"prompt\":\"x\",\"grammar\":\"\"}", NULL, NULL, OAI_TOOL_AUTO},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":"
         "\"function\",\"function\":{\"name\":\"g\"}}],\"tool_choice\":\"required\"}",
         NULL, NULL, OAI_TOOL_REQUIRED},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":"
         "\"function\",\"function\":{\"name\":\"g\"}}],\"tool_choice\":{\"type\":"
         "\"function\",\"function\":{\"name\":\"g\"}}}",
         NULL, NULL, OAI_TOOL_NAMED},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct oai_request r;
        struct oai_error e;
        enum oai_kind kind = cases[i].body[2] == 'p' ? OAI_COMPLETION : OAI_CHAT;
        bool ok            = oai_parse(kind, cases[i].body, strlen(cases[i].body), &r, &e);
        if (!ok)
            print_message("case %zu: %s (%s)\n", i, e.message, e.param);
        assert_true(ok);
        if (cases[i].schema) {
            char *got = cJSON_PrintUnformatted(r.schema);
            assert_string_equal(got, cases[i].schema);
            free(got);
        } else {
            assert_null(r.schema);
        }
        if (cases[i].grammar)
            assert_string_equal(r.grammar, cases[i].grammar);
        else
            assert_null(r.grammar);
        assert_int_equal(r.tool_choice, cases[i].tc);
        if (r.tool_choice == OAI_TOOL_NAMED)
            assert_string_equal(r.tool_name, "g");
        oai_request_free(&r);
    }
}

static void test_parse_agent_fields(void **state)
{
    (void)state;
    const char *body =
        "{\"messages\":[{\"role\":\"user\",\"content\":\"weather?\"},"
        "{\"role\":\"assistant\",\"content\":null,\"reasoning_content\":\"hm\",\"tool_calls\":"
        "[{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"get\","
        "\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}}]},"
        "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"sunny\"}],"
        "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get\",\"parameters\":"
        "{\"type\":\"object\"}}}],\"tool_choice\":\"none\",\"parallel_tool_calls\":false,"
        "\"chat_template_kwargs\":{\"enable_thinking\":false},\"reasoning_effort\":\"low\","
        "\"reasoning_format\":\"none\",\"max_tokens\":32000,\"n_predict\":5,"
        "\"repeat_penalty\":1.2}";
    struct oai_request r;
    struct oai_error e;
    bool ok = oai_parse(OAI_CHAT, body, strlen(body), &r, &e);
    if (!ok)
        print_message("%s (%s)\n", e.message, e.param);
    assert_true(ok);
    /* the template sees the arguments as an object, as Hugging Face's templates expect */
    cJSON *call =
        cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetArrayItem(r.messages, 1), "tool_calls"), 0);
    cJSON *args = cJSON_GetObjectItem(cJSON_GetObjectItem(call, "function"), "arguments");
    assert_true(cJSON_IsObject(args));
    assert_string_equal(cJSON_GetObjectItem(args, "city")->valuestring, "Paris");
    assert_int_equal(cJSON_GetArraySize(r.tools), 1);
    assert_int_equal(r.tool_choice, OAI_TOOL_NONE);
    assert_false(r.parallel_tool_calls);
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(r.template_kwargs, "enable_thinking")));
    assert_string_equal(cJSON_GetObjectItem(r.template_kwargs, "reasoning_effort")->valuestring,
                        "low");
    assert_int_equal(r.reasoning, OAI_REASONING_NONE);
    assert_int_equal(r.max_tokens, 32000); /* max_tokens wins over n_predict; jobs clamp it */
    assert_true(r.sampling.repeat_penalty == 1.2f);
    oai_request_free(&r);

    /* n_predict -1: no limit; the apply-template body is a chat body */
    body = "{\"prompt\":\"x\",\"n_predict\":-1}";
    assert_true(oai_parse(OAI_COMPLETION, body, strlen(body), &r, &e));
    assert_int_equal(r.max_tokens, -1);
    oai_request_free(&r);
    body = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"chat_template_kwargs\":"
           "{\"reasoning_effort\":\"high\"},\"reasoning_effort\":\"low\"}";
    assert_true(oai_parse(OAI_TEMPLATE, body, strlen(body), &r, &e));
    /* the kwargs' own value wins over the top-level field */
    assert_string_equal(cJSON_GetObjectItem(r.template_kwargs, "reasoning_effort")->valuestring,
                        "high");
    oai_request_free(&r);
}

/* The field policy: what changes nothing is accepted and noted (unknown ones marked), what
 * changes the reply is honoured. */
static void test_field_policy(void **state)
{
    (void)state;
    static const char body[] =
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
        "\"store\":false,\"metadata\":{\"k\":\"v\"},\"prompt_cache_key\":\"c\","
        "\"safety_identifier\":\"s\",\"service_tier\":\"auto\",\"modalities\":[\"text\"],"
        "\"verbosity\":\"low\",\"prediction\":{\"type\":\"content\",\"content\":\"p\"},"
        "\"web_search_options\":{},\"audio\":null,\"return_progress\":true,"
        "\"some_future_field\":{\"a\":1},\"x\\\"y\":1,"
        "\"stream\":true,\"stream_options\":{\"include_usage\":true,"
        "\"include_obfuscation\":false},"
        "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"n\","
        "\"schema\":{\"type\":\"integer\"},\"frob\":1}}}";
    static const struct {
        const char *path;
        bool unknown;
    } want[] = {
        {"store", false},
        {"metadata", false},
        {"prompt_cache_key", false},
        {"safety_identifier", false},
        {"service_tier", false},
        {"verbosity", false},
        {"prediction", false},
        {"web_search_options", false},
        {"return_progress", false},
        {"some_future_field", true},
        {"x?y", true}, /* label- and log-safe */
        {"stream_options.include_obfuscation", false},
        {"response_format.json_schema.frob", true},
    };
    struct oai_request r;
    struct oai_error e;
    bool ok = oai_parse(OAI_CHAT, body, strlen(body), &r, &e);
    if (!ok)
        print_message("%s (%s)\n", e.message, e.param);
    assert_true(ok);
    assert_int_equal(r.n_ignored, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        assert_string_equal(r.ignored[i].path, want[i].path);
        assert_int_equal(r.ignored[i].unknown, want[i].unknown);
    }
    assert_true(r.include_usage);
    assert_non_null(r.schema);
    oai_request_free(&r);

    /* more than OAI_MAX_IGNORED: the rest counted */
    char big[4096];
    size_t n = (size_t)snprintf(big, sizeof big, "{\"prompt\":\"x\"");
    for (int i = 0; i < OAI_MAX_IGNORED + 3; i++)
        n += (size_t)snprintf(big + n, sizeof big - n, ",\"f%d\":%d", i, i);
    snprintf(big + n, sizeof big - n, "}");
    assert_true(oai_parse(OAI_COMPLETION, big, strlen(big), &r, &e));
    assert_int_equal(r.n_ignored, OAI_MAX_IGNORED);
    assert_int_equal(r.n_ignored_more, 3);
    oai_request_free(&r);
}

/* The fields that change the reply reach the request. */
static void test_honoured_fields(void **state)
{
    (void)state;
    static const char body[] =
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
        "\"logit_bias\":{\"5\":-100,\"17\":2.5},\"reasoning_effort\":\"none\","
        "\"cache_prompt\":false,\"timings_per_token\":true,\"n_probs\":3,"
        "\"top_p\":0.5,\"min_p\":0.1,\"top_k\":7,\"samplers\":[\"top_k\",\"temperature\"]}";
    struct oai_request r;
    struct oai_error e;
    assert_true(oai_parse(OAI_CHAT, body, strlen(body), &r, &e));
    assert_int_equal(r.n_bias, 2);
    assert_int_equal(r.bias[0].token, 5);
    assert_true(r.bias[0].bias == -100.0f);
    assert_int_equal(r.bias[1].token, 17);
    assert_true(r.bias[1].bias == 2.5f);
    const cJSON *kw = r.template_kwargs;
    assert_string_equal(cJSON_GetObjectItem(kw, "reasoning_effort")->valuestring, "none");
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(kw, "enable_thinking")));
    assert_true(r.no_cache);
    assert_true(r.timings_per_token);
    assert_int_equal(r.top_logprobs, 3);
    assert_int_equal(r.sampling.top_k, 7); /* in the list */
    assert_true(r.sampling.top_p == 1.0f); /* left out: off */
    assert_true(r.sampling.min_p == 0.0f);
    assert_int_equal(r.n_ignored, 0);
    oai_request_free(&r);

    /* llama.cpp's pair form, false banning; xhigh passes through; the kwargs' own value wins */
    static const char pairs[] = "{\"prompt\":\"x\",\"logit_bias\":[[9,false],[4,-1]]}";
    assert_true(oai_parse(OAI_COMPLETION, pairs, strlen(pairs), &r, &e));
    assert_int_equal(r.n_bias, 2);
    assert_int_equal(r.bias[0].token, 9);
    assert_true(r.bias[0].bias == -100.0f);
    oai_request_free(&r);
    static const char effort[] =
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"reasoning_effort\":"
        "\"xhigh\",\"chat_template_kwargs\":{\"reasoning_effort\":\"low\"}}";
    assert_true(oai_parse(OAI_CHAT, effort, strlen(effort), &r, &e));
    kw = r.template_kwargs;
    assert_string_equal(cJSON_GetObjectItem(kw, "reasoning_effort")->valuestring, "low");
    assert_null(cJSON_GetObjectItem(kw, "enable_thinking"));
    oai_request_free(&r);
    /* llama-server's json_object with a schema */
    static const char jo[] = "{\"prompt\":\"x\",\"response_format\":{\"type\":\"json_object\","
                             "\"schema\":{\"type\":\"integer\"}}}";
    assert_true(oai_parse(OAI_COMPLETION, jo, strlen(jo), &r, &e));
    assert_string_equal(cJSON_GetObjectItem(r.schema, "type")->valuestring, "integer");
    oai_request_free(&r);
}

static void test_error_json_shape(void **state)
{
    (void)state;
    struct oai_error e;
    oai_fail(&e, 400, "invalid_request_error", "invalid_type", "max_tokens", "bad \"%s\"", "x");
    char *s  = oai_error_json(&e);
    cJSON *j = cJSON_Parse(s);
    assert_non_null(j);
    cJSON *err = cJSON_GetObjectItem(j, "error");
    assert_string_equal(cJSON_GetObjectItem(err, "message")->valuestring, "bad \"x\"");
    assert_string_equal(cJSON_GetObjectItem(err, "type")->valuestring, "invalid_request_error");
    assert_string_equal(cJSON_GetObjectItem(err, "param")->valuestring, "max_tokens");
    assert_string_equal(cJSON_GetObjectItem(err, "code")->valuestring, "invalid_type");
    cJSON_Delete(j);
    free(s);
    oai_fail(&e, 404, "invalid_request_error", NULL, NULL, "nope");
    s = oai_error_json(&e);
    assert_string_equal(s, "{\"error\":{\"message\":\"nope\",\"type\":\"invalid_request_error\","
                           "\"param\":null,\"code\":null}}");
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_full_chat_request),
        cmocka_unit_test(test_parse_defaults),
        cmocka_unit_test(test_parse_errors_name_the_field),
        cmocka_unit_test(test_parse_agent_fields),
        cmocka_unit_test(test_parse_constraints),
        cmocka_unit_test(test_field_policy),
        cmocka_unit_test(test_honoured_fields),
        cmocka_unit_test(test_error_json_shape),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
