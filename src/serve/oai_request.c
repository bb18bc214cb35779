/*
 * oai_request.c: stage 1 of openai.h, a request body -> a validated struct
 * oai_request. Runs on the event loop: it parses JSON and checks fields,
 * and leaves every costlier step (templates, tokens) to the preparation
 * thread.
 *
 * Every top-level field is looked up in one table (FIELDS): its type, its
 * range, where it is stored and which endpoints take it. A field that is
 * not in the table, or not for this endpoint, is refused by name: nothing
 * a client sends is silently ignored.
 */
#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/openai.h"
#include "serve/reqjson.h"

#define BAD    REQJSON_BAD
#define OOM(e) REQJSON_OOM(e, "server_error")
#define OPENAI (&reqjson_openai)

static char *dup_str(const char *s, struct oai_error *e)
{
    char *d = strdup(s);
    if (!d)
        OOM(e);
    return d;
}

void oai_request_free(struct oai_request *req)
{
    free(req->model);
    cJSON_Delete(req->messages);
    cJSON_Delete(req->tools);
    cJSON_Delete(req->template_kwargs);
    free(req->tool_name);
    free(req->grammar);
    cJSON_Delete(req->schema);
    cJSON_Delete(req->echo);
    for (int32_t i = 0; i < req->n_prompts; i++)
        free(req->prompts[i]);
    free(req->prompts);
    for (int32_t i = 0; i < req->n_stop; i++)
        free(req->stop[i]);
    free(req->bias);
    memset(req, 0, sizeof *req);
}

void oai_ignore(struct oai_request *req, const char *path, bool unknown)
{
    if (req->n_ignored >= OAI_MAX_IGNORED) {
        req->n_ignored_more++;
        return;
    }
    struct oai_ignored *ig = &req->ignored[req->n_ignored++];
    size_t n               = 0;
    for (; path[n] && n + 1 < sizeof ig->path; n++) {
        unsigned char c = (unsigned char)path[n];
        bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    strchr("_.:/-", c);
        ig->path[n] = safe ? (char)c : '?';
    }
    ig->path[n] = 0;
    ig->unknown = unknown;
}

/* -------------------------------------------------------------- messages --- */

/* Checks a content array: text parts only. */
static bool check_parts(const cJSON *c, const char *param, struct oai_error *e)
{
    int j = 0;
    const cJSON *part;
    cJSON_ArrayForEach(part, c)
    {
        char pp[96];
        snprintf(pp, sizeof pp, "%s[%d]", param, j++);
        if (!reqjson_check(OPENAI, part, pp, RJ_OBJECT, e))
            return false;
        const cJSON *type = reqjson_field(part, "type");
        const cJSON *text = reqjson_field(part, "text");
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "text"))
            return BAD(e, "invalid_value", pp,
                       "Invalid '%s': only text content parts are supported (type \"text\").", pp);
        if (!cJSON_IsString(text)) {
            char tp[112];
            snprintf(tp, sizeof tp, "%s.text", pp);
            return reqjson_wrong_type(e, tp, "a string", text ? text : part);
        }
    }
    return true;
}

/*
 * An assistant turn's tool_calls, checked, each arguments string replaced by
 * the object it holds: templates read tool_call.function.arguments as a
 * mapping, as Hugging Face's do.
 */
static bool check_tool_calls(cJSON *calls, int32_t i, struct oai_error *e)
{
    char param[96];
    snprintf(param, sizeof param, "messages[%d].tool_calls", i);
    if (!reqjson_check(OPENAI, calls, param, RJ_ARRAY, e))
        return false;
    int j = 0;
    cJSON *c;
    cJSON_ArrayForEach(c, calls)
    {
        snprintf(param, sizeof param, "messages[%d].tool_calls[%d]", i, j);
        if (!reqjson_check(OPENAI, c, param, RJ_OBJECT, e))
            return false;
        const cJSON *type = reqjson_field(c, "type");
        if (type && (!cJSON_IsString(type) || strcmp(type->valuestring, "function")))
            return BAD(e, "invalid_value", param,
                       "Invalid '%s.type': only \"function\" tool calls exist.", param);
        static const struct reqjson_row id[] = {{"id", RJ_STRING, false}};
        if (!reqjson_rows(OPENAI, c, param, id, 1, e))
            return false;
        cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
        snprintf(param, sizeof param, "messages[%d].tool_calls[%d].function", i, j);
        if (!cJSON_IsObject(fn))
            return fn ? reqjson_wrong_type(e, param, "an object", fn) : reqjson_missing(e, param);
        if (!reqjson_member(OPENAI, fn, "name", param, RJ_STRING, e))
            return false;
        cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
        snprintf(param, sizeof param, "messages[%d].tool_calls[%d].function.arguments", i, j);
        if (cJSON_IsString(args)) {
            cJSON *parsed = cJSON_Parse(args->valuestring);
            if (!parsed)
                return BAD(e, "invalid_value", param, "Invalid '%s': not a JSON string.", param);
            cJSON_ReplaceItemInObjectCaseSensitive(fn, "arguments", parsed);
        } else if (args && !cJSON_IsObject(args)) {
            return reqjson_wrong_type(e, param, "a JSON string", args);
        } else if (!args) {
            cJSON_AddItemToObject(fn, "arguments", cJSON_CreateObject());
        }
        j++;
    }
    return true;
}

static bool check_message(cJSON *m, int32_t i, struct oai_error *e)
{
    char param[64];
    snprintf(param, sizeof param, "messages[%d]", i);
    if (!reqjson_check(OPENAI, m, param, RJ_OBJECT, e))
        return false;
    snprintf(param, sizeof param, "messages[%d].role", i);
    cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
    if (!role || cJSON_IsNull(role))
        return BAD(e, "missing_required_parameter", param, "Missing required parameter: '%s'.",
                   param);
    if (!reqjson_check(OPENAI, role, param, RJ_STRING, e))
        return false;
    if (!strcmp(role->valuestring, "developer")) /* OpenAI's newer name; templates know system */
        cJSON_SetValuestring(role, "system");
    const char *r  = role->valuestring;
    bool assistant = !strcmp(r, "assistant");
    if (strcmp(r, "system") && strcmp(r, "user") && !assistant && strcmp(r, "tool"))
        return BAD(e, "invalid_value", param,
                   "Invalid '%s': '%.32s' is not supported; expected 'system', 'developer', "
                   "'user', 'assistant' or 'tool'.",
                   param, r);
    snprintf(param, sizeof param, "messages[%d].content", i);
    cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
    if (!c || cJSON_IsNull(c)) {
        if (!assistant)
            return reqjson_missing(e, param);
        /* An assistant turn that only calls tools comes with content null (the OpenAI SDKs
         * send it so); templates test it as a string ('</think>' in message.content), so they
         * see "" as vLLM and mlx-lm give them. */
        if (c)
            cJSON_ReplaceItemInObjectCaseSensitive(m, "content", cJSON_CreateString(""));
        else
            cJSON_AddItemToObject(m, "content", cJSON_CreateString(""));
    } else if (cJSON_IsArray(c)) {
        if (!check_parts(c, param, e))
            return false;
    } else if (!cJSON_IsString(c)) {
        return reqjson_wrong_type(e, param, "a string or an array of content parts", c);
    }
    static const char *const strings[] = {"name", "tool_call_id", "reasoning_content"};
    for (size_t k = 0; k < sizeof strings / sizeof strings[0]; k++) {
        const cJSON *s = reqjson_field(m, strings[k]);
        snprintf(param, sizeof param, "messages[%d].%s", i, strings[k]);
        if (s && !reqjson_check(OPENAI, s, param, RJ_STRING, e))
            return false;
    }
    cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
    if (calls && !cJSON_IsNull(calls)) {
        snprintf(param, sizeof param, "messages[%d].tool_calls", i);
        if (!assistant)
            return BAD(e, "invalid_value", param,
                       "Invalid '%s': only assistant messages make tool calls.", param);
        if (!check_tool_calls(calls, i, e))
            return false;
    }
    return true;
}

static bool take_messages(const cJSON *msgs, struct oai_request *req, struct oai_error *e)
{
    if (!reqjson_check(OPENAI, msgs, "messages", RJ_ARRAY, e))
        return false;
    if (cJSON_GetArraySize(msgs) == 0)
        return BAD(e, "empty_array", "messages",
                   "Invalid 'messages': empty array. Expected an array with minimum length 1.");
    if (!(req->messages = cJSON_Duplicate(msgs, true)))
        return OOM(e);
    int32_t i = 0;
    cJSON *m;
    cJSON_ArrayForEach(m, req->messages)
    {
        if (!check_message(m, i++, e))
            return false;
    }
    return true;
}

static bool take_tools(const cJSON *tools, struct oai_request *req, struct oai_error *e)
{
    if (!reqjson_check(OPENAI, tools, "tools", RJ_ARRAY, e))
        return false;
    int j = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, tools)
    {
        char param[64];
        snprintf(param, sizeof param, "tools[%d]", j);
        if (!reqjson_check(OPENAI, t, param, RJ_OBJECT, e))
            return false;
        const cJSON *type = reqjson_field(t, "type");
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "function"))
            return BAD(e, "invalid_value", param,
                       "Invalid '%s.type': only \"function\" tools are supported.", param);
        const cJSON *fn = reqjson_member(OPENAI, t, "function", param, RJ_OBJECT, e);
        if (!fn)
            return false;
        const cJSON *name = reqjson_field(fn, "name");
        if (!cJSON_IsString(name) || !name->valuestring[0]) {
            snprintf(param, sizeof param, "tools[%d].function.name", j);
            return BAD(e, "invalid_value", param, "Invalid '%s': expected a non-empty string.",
                       param);
        }
        const cJSON *params = reqjson_field(fn, "parameters");
        if (params && !cJSON_IsObject(params)) {
            snprintf(param, sizeof param, "tools[%d].function.parameters", j);
            return reqjson_wrong_type(e, param, "an object (a JSON schema)", params);
        }
        j++;
    }
    if (j == 0)
        return true; /* an empty list offers nothing: as if absent */
    if (!(req->tools = cJSON_Duplicate(tools, true)))
        return OOM(e);
    return true;
}

static bool take_tool_choice(const cJSON *tc, struct oai_request *req, struct oai_error *e)
{
    if (cJSON_IsString(tc)) {
        static const char *const names[]           = {"auto", "none", "required"};
        static const enum oai_tool_choice values[] = {OAI_TOOL_AUTO, OAI_TOOL_NONE,
                                                      OAI_TOOL_REQUIRED};
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
            if (!strcmp(tc->valuestring, names[i])) {
                req->tool_choice = values[i];
                return true;
            }
        return BAD(e, "invalid_value", "tool_choice",
                   "Invalid 'tool_choice': expected 'none', 'auto', 'required' or a named "
                   "function, but got '%.32s'.",
                   tc->valuestring);
    }
    if (!cJSON_IsObject(tc))
        return reqjson_wrong_type(e, "tool_choice", "a string or an object", tc);
    const cJSON *type = reqjson_field(tc, "type"), *fn = reqjson_field(tc, "function");
    const cJSON *name = cJSON_IsObject(fn) ? reqjson_field(fn, "name") : NULL;
    if (!cJSON_IsString(type) || strcmp(type->valuestring, "function"))
        return BAD(e, "invalid_value", "tool_choice.type",
                   "Invalid 'tool_choice.type': expected 'function'.");
    if (!cJSON_IsString(name) || !name->valuestring[0])
        return BAD(e, "invalid_value", "tool_choice.function.name",
                   "Invalid 'tool_choice.function.name': expected a non-empty string.");
    req->tool_choice = OAI_TOOL_NAMED;
    return (req->tool_name = dup_str(name->valuestring, e)) != NULL;
}

/*
 * response_format: text (nothing), json_object (any object), json_schema
 * (its schema; strict or not, the reply always matches it: hearth has no
 * looser mode).
 */
static bool take_response_format(const cJSON *rf, struct oai_request *req, struct oai_error *e)
{
    if (!reqjson_check(OPENAI, rf, "response_format", RJ_OBJECT, e))
        return false;
    const cJSON *type = reqjson_field(rf, "type"), *k;
    if (!cJSON_IsString(type))
        return BAD(e, "invalid_value", "response_format.type",
                   "Invalid 'response_format.type': expected 'text', 'json_object' or "
                   "'json_schema'.");
    const char *t = type->valuestring;
    /* llama-server's json_object takes a "schema" beside the type */
    const char *allowed = !strcmp(t, "json_schema")   ? "json_schema"
                          : !strcmp(t, "json_object") ? "schema"
                                                      : "";
    cJSON_ArrayForEach(k, rf)
    {
        if (strcmp(k->string, "type") && strcmp(k->string, allowed) && !cJSON_IsNull(k)) {
            char path[OAI_IGNORED_LEN];
            snprintf(path, sizeof path, "response_format.%s", k->string);
            oai_ignore(req, path, true);
        }
    }
    if (!strcmp(t, "text"))
        return true;
    if (!strcmp(t, "json_object")) {
        const cJSON *schema = reqjson_field(rf, "schema");
        if (schema && !reqjson_check(OPENAI, schema, "response_format.schema", RJ_OBJECT, e))
            return false;
        if (schema && !(req->schema = cJSON_Duplicate(schema, true)))
            return OOM(e);
        if (!schema && (!(req->schema = cJSON_CreateObject()) ||
                        !cJSON_AddStringToObject(req->schema, "type", "object")))
            return OOM(e);
        return true;
    }
    if (strcmp(t, "json_schema"))
        return BAD(e, "invalid_value", "response_format.type",
                   "Invalid 'response_format.type': expected 'text', 'json_object' or "
                   "'json_schema', but got '%.32s'.",
                   t);
    const cJSON *js = reqjson_field(rf, "json_schema");
    if (!cJSON_IsObject(js))
        return reqjson_missing(e, "response_format.json_schema");
    cJSON_ArrayForEach(k, js)
    {
        if (strcmp(k->string, "name") && strcmp(k->string, "schema") &&
            strcmp(k->string, "strict") && strcmp(k->string, "description") && !cJSON_IsNull(k)) {
            char path[OAI_IGNORED_LEN];
            snprintf(path, sizeof path, "response_format.json_schema.%s", k->string);
            oai_ignore(req, path, true);
        }
    }
    const cJSON *name = reqjson_field(js, "name"), *schema = reqjson_field(js, "schema"),
                *strict = reqjson_field(js, "strict");
    if (!cJSON_IsString(name) || !name->valuestring[0])
        return reqjson_missing(e, "response_format.json_schema.name");
    if (strict &&
        !reqjson_check(OPENAI, strict, "response_format.json_schema.strict", RJ_BOOLEAN, e))
        return false;
    if (schema && !cJSON_IsObject(schema) && !cJSON_IsBool(schema))
        return reqjson_wrong_type(e, "response_format.json_schema.schema", "an object", schema);
    /* no schema: any JSON object, as the name alone constrains nothing */
    req->schema = schema ? cJSON_Duplicate(schema, true) : cJSON_CreateObject();
    if (!req->schema || (!schema && !cJSON_AddStringToObject(req->schema, "type", "object")))
        return OOM(e);
    return true;
}

static bool take_kwargs(const cJSON *kw, struct oai_request *req, struct oai_error *e)
{
    if (!reqjson_check(OPENAI, kw, "chat_template_kwargs", RJ_OBJECT, e))
        return false;
    cJSON *copy = cJSON_Duplicate(kw, true);
    if (!copy)
        return OOM(e);
    if (req->template_kwargs) { /* reasoning_effort came first: the kwargs' own value wins */
        cJSON *it;
        cJSON_ArrayForEach(it, req->template_kwargs)
        {
            if (!cJSON_GetObjectItemCaseSensitive(copy, it->string))
                cJSON_AddItemToObject(copy, it->string, cJSON_Duplicate(it, true));
        }
        cJSON_Delete(req->template_kwargs);
    }
    req->template_kwargs = copy;
    return true;
}

static bool add_kwarg(struct oai_request *req, const char *name, cJSON *v, struct oai_error *e)
{
    if (!v || (!req->template_kwargs && !(req->template_kwargs = cJSON_CreateObject()))) {
        cJSON_Delete(v);
        return OOM(e);
    }
    if (cJSON_GetObjectItemCaseSensitive(req->template_kwargs, name))
        cJSON_Delete(v); /* chat_template_kwargs came first: its own value wins */
    else
        cJSON_AddItemToObject(req->template_kwargs, name, v);
    return true;
}

/* reasoning_effort reaches the template as its kwarg (gpt-oss reads it); "none" also turns
 * thinking off where a template reads enable_thinking (Qwen3, Qwen3.5, GLM). */
static bool take_reasoning_effort(const cJSON *it, struct oai_request *req, struct oai_error *e)
{
    static const char *const ok[] = {"none", "minimal", "low", "medium", "high", "xhigh"};
    if (!reqjson_check(OPENAI, it, "reasoning_effort", RJ_STRING, e))
        return false;
    size_t k = 0;
    while (k < sizeof ok / sizeof ok[0] && strcmp(it->valuestring, ok[k]))
        k++;
    if (k == sizeof ok / sizeof ok[0])
        return BAD(e, "invalid_value", "reasoning_effort",
                   "Invalid 'reasoning_effort': expected 'none', 'minimal', 'low', 'medium', "
                   "'high' or 'xhigh', but got '%.32s'.",
                   it->valuestring);
    if (!add_kwarg(req, "reasoning_effort", cJSON_CreateString(it->valuestring), e))
        return false;
    return k != 0 || add_kwarg(req, "enable_thinking", cJSON_CreateFalse(), e);
}

static bool take_reasoning_format(const cJSON *it, struct oai_request *req, struct oai_error *e)
{
    if (!reqjson_check(OPENAI, it, "reasoning_format", RJ_STRING, e))
        return false;
    const char *v = it->valuestring;
    if (!strcmp(v, "none"))
        req->reasoning = OAI_REASONING_NONE;
    else if (!strcmp(v, "auto") || !strcmp(v, "deepseek"))
        req->reasoning = OAI_REASONING_AUTO;
    else
        return BAD(e, "invalid_value", "reasoning_format",
                   "Invalid 'reasoning_format': expected 'auto', 'deepseek' or 'none', but got "
                   "'%.32s'.",
                   v);
    return true;
}

/* --------------------------------------------------------------- prompts --- */

static bool take_prompt(const cJSON *p, struct oai_request *req, struct oai_error *e)
{
    if (cJSON_IsString(p)) {
        req->prompts = calloc(1, sizeof *req->prompts);
        if (!req->prompts || !(req->prompts[0] = dup_str(p->valuestring, e)))
            return OOM(e);
        req->n_prompts = 1;
        return true;
    }
    if (!cJSON_IsArray(p))
        return reqjson_wrong_type(e, "prompt", "a string or an array of strings", p);
    int n = cJSON_GetArraySize(p);
    if (n == 0)
        return BAD(e, "empty_array", "prompt",
                   "Invalid 'prompt': empty array. Expected an array with minimum length 1.");
    if (n > OAI_MAX_CHOICES)
        return BAD(e, "invalid_value", "prompt",
                   "Invalid 'prompt': %d prompts in one request; at most %d.", n, OAI_MAX_CHOICES);
    req->prompts = calloc((size_t)n, sizeof *req->prompts);
    if (!req->prompts)
        return OOM(e);
    int32_t i = 0;
    const cJSON *s;
    cJSON_ArrayForEach(s, p)
    {
        if (!cJSON_IsString(s)) {
            char param[32];
            snprintf(param, sizeof param, "prompt[%d]", i);
            return reqjson_wrong_type(e, param, "a string (token-id prompts are not supported)", s);
        }
        if (!(req->prompts[i] = dup_str(s->valuestring, e)))
            return false;
        req->n_prompts = ++i;
    }
    return true;
}

static bool take_stop(const cJSON *st, struct oai_request *req, struct oai_error *e)
{
    if (cJSON_IsString(st)) {
        if (st->valuestring[0] && !(req->stop[req->n_stop++] = dup_str(st->valuestring, e)))
            return false;
        return true;
    }
    if (!cJSON_IsArray(st))
        return reqjson_wrong_type(e, "stop", "a string or an array of strings", st);
    if (cJSON_GetArraySize(st) > OAI_MAX_STOP)
        return BAD(e, "array_above_max_length", "stop",
                   "Invalid 'stop': array too long. Expected an array with maximum length %d, but "
                   "got an array with length %d instead.",
                   OAI_MAX_STOP, cJSON_GetArraySize(st));
    int i = 0;
    const cJSON *s;
    cJSON_ArrayForEach(s, st)
    {
        if (!cJSON_IsString(s)) {
            char param[32];
            snprintf(param, sizeof param, "stop[%d]", i);
            return reqjson_wrong_type(e, param, "a string", s);
        }
        i++;
        if (s->valuestring[0] && !(req->stop[req->n_stop++] = dup_str(s->valuestring, e))) {
            req->n_stop--;
            return false;
        }
    }
    return true;
}

/* ------------------------------------------------------------ the table --- */

/* What one request carries besides struct oai_request while it is read. */
struct scratch {
    int64_t max_tokens[3]; /* n_predict, max_tokens, max_completion_tokens; 0 = absent */
    bool logprobs_bool, has_top_logprobs, has_stream_options;
    const cJSON *stream_options;
    int n_constraints;                /* response_format, json_schema, grammar given */
    bool samplers_given, samplers[4]; /* samplers: which of top_k, top_p, min_p, temperature */
};

enum ftype {
    T_NUM,  /* number in [lo, hi] -> float at off */
    T_INT,  /* integer in [lo, hi] -> int32 at off */
    T_BOOL, /* boolean -> bool at off */
    T_STR,  /* string, checked only */
    T_FN,   /* the rule's own function */
};

#define K_CHAT (1u << OAI_CHAT | 1u << OAI_TEMPLATE)
#define K_COMP (1u << OAI_COMPLETION)
#define K_ALL  (K_CHAT | K_COMP)
#define AT(f)  offsetof(struct oai_request, f)

struct rule;
typedef bool (*take_fn)(const struct rule *r, const cJSON *it, struct oai_request *req,
                        struct scratch *sc, struct oai_error *e);

struct rule {
    const char *name;
    unsigned kinds; /* endpoints that take it (K_*) */
    enum ftype type;
    double lo, hi;
    size_t off;
    take_fn fn; /* T_FN */
};

static bool fn_model(const struct rule *r, const cJSON *it, struct oai_request *req,
                     struct scratch *sc, struct oai_error *e)
{
    if (!reqjson_check(OPENAI, it, r->name, RJ_STRING, e))
        return false;
    return (req->model = dup_str(it->valuestring, e)) != NULL;
}

static bool fn_messages(const struct rule *r, const cJSON *it, struct oai_request *req,
                        struct scratch *sc, struct oai_error *e)
{
    return take_messages(it, req, e);
}

static bool fn_prompt(const struct rule *r, const cJSON *it, struct oai_request *req,
                      struct scratch *sc, struct oai_error *e)
{
    return take_prompt(it, req, e);
}

static bool fn_stop(const struct rule *r, const cJSON *it, struct oai_request *req,
                    struct scratch *sc, struct oai_error *e)
{
    return take_stop(it, req, e);
}

static bool fn_tools(const struct rule *r, const cJSON *it, struct oai_request *req,
                     struct scratch *sc, struct oai_error *e)
{
    return take_tools(it, req, e);
}

static bool fn_tool_choice(const struct rule *r, const cJSON *it, struct oai_request *req,
                           struct scratch *sc, struct oai_error *e)
{
    return take_tool_choice(it, req, e);
}

/* response_format, json_schema and grammar each constrain the whole reply: one may be given */
static bool one_constraint(struct scratch *sc, struct oai_error *e)
{
    if (sc->n_constraints++ == 0)
        return true;
    return BAD(e, "invalid_value", "grammar",
               "Invalid request: 'response_format', 'json_schema' and 'grammar' each constrain "
               "the whole reply; give one of them.");
}

static bool fn_response_format(const struct rule *r, const cJSON *it, struct oai_request *req,
                               struct scratch *sc, struct oai_error *e)
{
    const cJSON *t = cJSON_IsObject(it) ? reqjson_field(it, "type") : NULL;
    if (!(cJSON_IsString(t) && !strcmp(t->valuestring, "text")) && !one_constraint(sc, e))
        return false;
    req->schema_field = "response_format";
    return take_response_format(it, req, e);
}

/* llama.cpp's json_schema: a schema for the whole reply */
static bool fn_json_schema(const struct rule *r, const cJSON *it, struct oai_request *req,
                           struct scratch *sc, struct oai_error *e)
{
    if (!one_constraint(sc, e))
        return false;
    if (!cJSON_IsObject(it) && !cJSON_IsBool(it))
        return reqjson_wrong_type(e, r->name, "an object (a JSON schema)", it);
    req->schema_field = "json_schema";
    return (req->schema = cJSON_Duplicate(it, true)) != NULL || OOM(e);
}

/* llama.cpp's grammar: GBNF text for the whole reply ("" = none) */
static bool fn_grammar(const struct rule *r, const cJSON *it, struct oai_request *req,
                       struct scratch *sc, struct oai_error *e)
{
    if (!cJSON_IsString(it))
        return reqjson_wrong_type(e, r->name, "a string (GBNF)", it);
    if (!it->valuestring[0])
        return true;
    if (!one_constraint(sc, e))
        return false;
    return (req->grammar = dup_str(it->valuestring, e)) != NULL;
}

static bool fn_kwargs(const struct rule *r, const cJSON *it, struct oai_request *req,
                      struct scratch *sc, struct oai_error *e)
{
    return take_kwargs(it, req, e);
}

static bool fn_effort(const struct rule *r, const cJSON *it, struct oai_request *req,
                      struct scratch *sc, struct oai_error *e)
{
    return take_reasoning_effort(it, req, e);
}

static bool fn_reasoning_format(const struct rule *r, const cJSON *it, struct oai_request *req,
                                struct scratch *sc, struct oai_error *e)
{
    return take_reasoning_format(it, req, e);
}

/* max_tokens, max_completion_tokens and n_predict: lo says which slot of sc it fills */
static bool fn_max_tokens(const struct rule *r, const cJSON *it, struct oai_request *req,
                          struct scratch *sc, struct oai_error *e)
{
    bool n_predict = !strcmp(r->name, "n_predict");
    int64_t v      = 0;
    if (!reqjson_int(OPENAI, it, r->name, n_predict ? -1 : 1, 2147483647.0, &v, e))
        return false;
    if (n_predict && v == 0)
        return BAD(e, "invalid_value", r->name,
                   "Invalid 'n_predict': 0 generates nothing; give -1 for no limit or a count.");
    sc->max_tokens[n_predict ? 0 : !strcmp(r->name, "max_tokens") ? 1 : 2] = v;
    return true;
}

static bool fn_top_k(const struct rule *r, const cJSON *it, struct oai_request *req,
                     struct scratch *sc, struct oai_error *e)
{
    int64_t v = 0;
    if (!reqjson_int(OPENAI, it, r->name, -1, 2147483647.0, &v, e))
        return false;
    req->sampling.top_k = v < 0 ? 0 : (int32_t)v;
    return true;
}

static bool fn_penalty(const struct rule *r, const cJSON *it, struct oai_request *req,
                       struct scratch *sc, struct oai_error *e)
{
    double v = 0;
    if (!reqjson_number(OPENAI, it, r->name, 0, 10, &v, e))
        return false;
    if (v <= 0)
        return BAD(e, "invalid_value", r->name,
                   "Invalid '%s': expected a value above 0 (1 = off), but got %g.", r->name, v);
    req->sampling.repeat_penalty = (float)v;
    return true;
}

static bool fn_seed(const struct rule *r, const cJSON *it, struct oai_request *req,
                    struct scratch *sc, struct oai_error *e)
{
    int64_t v = 0; /* integers a double holds exactly; negative seeds wrap as two's complement */
    if (!reqjson_int(OPENAI, it, r->name, -9007199254740992.0, 9007199254740992.0, &v, e))
        return false;
    req->sampling.seed = (uint64_t)v;
    req->has_seed      = true;
    return true;
}

static bool fn_logprobs(const struct rule *r, const cJSON *it, struct oai_request *req,
                        struct scratch *sc, struct oai_error *e)
{
    if (req->kind != OAI_COMPLETION) {
        if (!reqjson_check(OPENAI, it, r->name, RJ_BOOLEAN, e))
            return false;
        sc->logprobs_bool = cJSON_IsTrue(it);
        return true;
    }
    int64_t v = 0;
    if (!reqjson_int(OPENAI, it, r->name, 0, OAI_MAX_TOP_LOGPROBS, &v, e))
        return false;
    req->top_logprobs = (int32_t)v;
    return true;
}

static bool fn_top_logprobs(const struct rule *r, const cJSON *it, struct oai_request *req,
                            struct scratch *sc, struct oai_error *e)
{
    int64_t v = 0;
    if (!reqjson_int(OPENAI, it, r->name, 0, OAI_MAX_TOP_LOGPROBS, &v, e))
        return false;
    req->top_logprobs    = (int32_t)v;
    sc->has_top_logprobs = true;
    return true;
}

static bool fn_stream_options(const struct rule *r, const cJSON *it, struct oai_request *req,
                              struct scratch *sc, struct oai_error *e)
{
    if (!reqjson_check(OPENAI, it, r->name, RJ_OBJECT, e))
        return false;
    const cJSON *k;
    cJSON_ArrayForEach(k, it)
    {
        if (strcmp(k->string, "include_usage")) { /* include_obfuscation: padding only */
            char path[OAI_IGNORED_LEN];
            snprintf(path, sizeof path, "stream_options.%s", k->string);
            oai_ignore(req, path, strcmp(k->string, "include_obfuscation") != 0);
        }
    }
    const cJSON *iu = reqjson_field(it, "include_usage");
    if (iu && !reqjson_check(OPENAI, iu, "stream_options.include_usage", RJ_BOOLEAN, e))
        return false;
    req->include_usage = cJSON_IsTrue(iu);
    sc->stream_options = it;
    return true;
}

/* Fields OpenAI defines that hearth cannot honour: accepted only where they ask for nothing. */
static bool fn_unsupported(const struct rule *r, const cJSON *it, struct oai_request *req,
                           struct scratch *sc, struct oai_error *e)
{
    const char *n = r->name;
    bool harmless = false;
    if (!strcmp(n, "echo"))
        harmless = cJSON_IsFalse(it);
    else if (!strcmp(n, "best_of"))
        harmless = cJSON_IsNumber(it) && it->valuedouble == 1;
    else if (!strcmp(n, "suffix"))
        harmless = cJSON_IsString(it) && !it->valuestring[0];
    else /* functions */
        harmless = (cJSON_IsArray(it) || cJSON_IsObject(it)) && cJSON_GetArraySize(it) == 0;
    if (harmless)
        return true;
    return BAD(e, "unsupported_parameter", n,
               "Unsupported parameter: '%s'%s is not supported by this server.", n,
               !strcmp(n, "best_of")           ? " other than 1"
               : !strcmp(n, "response_format") ? " other than {\"type\": \"text\"}"
                                               : "");
}

/* Fields that change nothing hearth generates: storage, metadata, caching and routing hints,
 * and hints whose effect a local model cannot have (verbosity, predicted outputs, web search
 * options: the model answers without a search, as llama-server does). */
static bool fn_ignored(const struct rule *r, const cJSON *it, struct oai_request *req,
                       struct scratch *sc, struct oai_error *e)
{
    oai_ignore(req, r->name, false);
    return true;
}

/* modalities: text is what hearth writes; asking for audio would get a reply without it. */
static bool fn_modalities(const struct rule *r, const cJSON *it, struct oai_request *req,
                          struct scratch *sc, struct oai_error *e)
{
    if (!reqjson_check(OPENAI, it, r->name, RJ_ARRAY, e))
        return false;
    const cJSON *m;
    cJSON_ArrayForEach(m, it)
    {
        if (!reqjson_check(OPENAI, m, "modalities[]", RJ_STRING, e))
            return false;
        if (strcmp(m->valuestring, "text"))
            return BAD(e, "unsupported_value", "modalities",
                       "Invalid 'modalities': this server writes text only, not '%.32s'.",
                       m->valuestring);
    }
    return true;
}

/* audio (output parameters): only null, which the loop has skipped, asks for nothing. */
static bool fn_audio(const struct rule *r, const cJSON *it, struct oai_request *req,
                     struct scratch *sc, struct oai_error *e)
{
    return BAD(e, "unsupported_parameter", r->name,
               "Unsupported parameter: 'audio': this server writes text only.");
}

/* One logit_bias entry: a token id (a decimal string key, or llama.cpp's [id, bias] pair) and
 * a bias in -100..100 (llama.cpp's false: banned). */
static bool take_bias(const char *key, const cJSON *v, struct oai_request *req, int32_t i,
                      struct oai_error *e)
{
    char *end     = NULL;
    long long tok = key ? strtoll(key, &end, 10) : -1;
    if (!key || end == key || *end || tok < 0 || tok > INT32_MAX)
        return BAD(e, "invalid_value", "logit_bias",
                   "Invalid 'logit_bias': keys are token ids (non-negative integers), not "
                   "'%.32s'.",
                   key ? key : "?");
    double b = 0;
    if (cJSON_IsFalse(v))
        b = -100;
    else if (cJSON_IsNumber(v) && v->valuedouble >= -100 && v->valuedouble <= 100)
        b = v->valuedouble;
    else
        return BAD(e, "invalid_value", "logit_bias",
                   "Invalid 'logit_bias': the bias of token %lld must be a number from -100 to "
                   "100.",
                   tok);
    req->bias[i] = (struct oai_bias){(hearth_token)tok, (float)b};
    return true;
}

static bool fn_logit_bias(const struct rule *r, const cJSON *it, struct oai_request *req,
                          struct scratch *sc, struct oai_error *e)
{
    if (!cJSON_IsObject(it) && !cJSON_IsArray(it))
        return reqjson_wrong_type(e, r->name, "an object", it);
    int n = cJSON_GetArraySize(it);
    if (n > 1024)
        return BAD(e, "invalid_value", "logit_bias",
                   "Invalid 'logit_bias': %d tokens; at most 1024.", n);
    if (n == 0)
        return true;
    free(req->bias);
    if (!(req->bias = calloc((size_t)n, sizeof *req->bias)))
        return OOM(e);
    req->n_bias = 0;
    const cJSON *b;
    cJSON_ArrayForEach(b, it)
    {
        char num[24];
        const char *key = b->string;
        const cJSON *v  = b;
        if (cJSON_IsArray(it)) { /* llama.cpp's [[id, bias], ...] */
            const cJSON *id = cJSON_GetArrayItem(b, 0);
            v               = cJSON_GetArrayItem(b, 1);
            key             = NULL;
            if (cJSON_IsArray(b) && cJSON_GetArraySize(b) == 2 && cJSON_IsNumber(id) &&
                id->valuedouble == (double)(long long)id->valuedouble) {
                snprintf(num, sizeof num, "%lld", (long long)id->valuedouble);
                key = num;
            }
        }
        if (!take_bias(key, v, req, req->n_bias, e))
            return false;
        req->n_bias++;
    }
    return true;
}

/* llama-server's switches: cache_prompt false computes the prompt afresh (the reply is the
 * same; it only costs time), timings_per_token adds "timings" to each stream chunk. */
static bool fn_cache_prompt(const struct rule *r, const cJSON *it, struct oai_request *req,
                            struct scratch *sc, struct oai_error *e)
{
    if (!reqjson_check(OPENAI, it, r->name, RJ_BOOLEAN, e))
        return false;
    req->no_cache = cJSON_IsFalse(it);
    return true;
}

/* return_progress: llama-server's prompt-progress chunks; hearth's stream starts only once
 * the prompt is read, so there is nothing to report between (accepted, noted). */
static bool fn_return_progress(const struct rule *r, const cJSON *it, struct oai_request *req,
                               struct scratch *sc, struct oai_error *e)
{
    if (!reqjson_check(OPENAI, it, r->name, RJ_BOOLEAN, e))
        return false;
    oai_ignore(req, r->name, false);
    return true;
}

/* n_probs: llama-server's count of alternatives per token, here as logprobs with that many. */
static bool fn_n_probs(const struct rule *r, const cJSON *it, struct oai_request *req,
                       struct scratch *sc, struct oai_error *e)
{
    int64_t v = 0;
    if (!reqjson_int(OPENAI, it, r->name, 0, OAI_MAX_TOP_LOGPROBS, &v, e))
        return false;
    if (v > 0) {
        req->top_logprobs    = (int32_t)v;
        sc->logprobs_bool    = true;
        sc->has_top_logprobs = true;
    }
    return true;
}

/* samplers: llama-server's sampler chain. hearth's order is fixed (penalties, top_k, top_p,
 * min_p, temperature); a sampler the list leaves out is off, so the list chooses which run. */
static bool fn_samplers(const struct rule *r, const cJSON *it, struct oai_request *req,
                        struct scratch *sc, struct oai_error *e)
{
    static const char *const known[] = {
        "top_k",     "top_p", "min_p",       "temperature", "penalties", "dry", "typ_p",
        "typical_p", "xtc",   "top_n_sigma", "infill",      "k",         "p",   "m",
        "t",         "e",     "d",           "y",           "x",         "s",   "i"};
    bool has[4] = {false, false, false, false}; /* top_k, top_p, min_p, temperature */
    const cJSON *m;
    if (cJSON_IsString(it)) { /* llama.cpp's one-letter form, "kpmt" */
        for (const char *c = it->valuestring; *c; c++) {
            const char *at = strchr("kpmt", *c);
            if (at)
                has[at - "kpmt"] = true;
        }
    } else if (cJSON_IsArray(it)) {
        cJSON_ArrayForEach(m, it)
        {
            if (!reqjson_check(OPENAI, m, "samplers[]", RJ_STRING, e))
                return false;
            size_t k = 0;
            while (k < sizeof known / sizeof known[0] && strcmp(known[k], m->valuestring))
                k++;
            if (k == sizeof known / sizeof known[0])
                return BAD(e, "invalid_value", "samplers",
                           "Invalid 'samplers': '%.32s' is not a sampler.", m->valuestring);
            if (k < 4)
                has[k] = true;
        }
    } else {
        return reqjson_wrong_type(e, r->name, "an array", it);
    }
    sc->samplers_given = true;
    memcpy(sc->samplers, has, sizeof has);
    return true;
}

/* clang-format off */
static const struct rule FIELDS[] = {
    {"model", K_ALL, T_FN, 0, 0, 0, fn_model},
    {"messages", K_CHAT, T_FN, 0, 0, 0, fn_messages},
    {"prompt", K_COMP, T_FN, 0, 0, 0, fn_prompt},
    {"max_tokens", K_ALL, T_FN, 0, 0, 0, fn_max_tokens},
    {"max_completion_tokens", K_CHAT, T_FN, 0, 0, 0, fn_max_tokens},
    {"n_predict", K_ALL, T_FN, 0, 0, 0, fn_max_tokens},
    {"temperature", K_ALL, T_NUM, 0, 2, AT(sampling.temperature), NULL},
    {"top_p", K_ALL, T_NUM, 0, 1, AT(sampling.top_p), NULL},
    {"min_p", K_ALL, T_NUM, 0, 1, AT(sampling.min_p), NULL},
    {"top_k", K_ALL, T_FN, 0, 0, 0, fn_top_k},
    {"repetition_penalty", K_ALL, T_FN, 0, 0, 0, fn_penalty},
    {"repeat_penalty", K_ALL, T_FN, 0, 0, 0, fn_penalty},
    {"presence_penalty", K_ALL, T_NUM, -2, 2, AT(presence_penalty), NULL},
    {"frequency_penalty", K_ALL, T_NUM, -2, 2, AT(frequency_penalty), NULL},
    {"seed", K_ALL, T_FN, 0, 0, 0, fn_seed},
    {"n", K_ALL, T_INT, 1, OAI_MAX_N, AT(n), NULL},
    {"stop", K_ALL, T_FN, 0, 0, 0, fn_stop},
    {"logprobs", K_ALL, T_FN, 0, 0, 0, fn_logprobs},
    {"top_logprobs", K_CHAT, T_FN, 0, 0, 0, fn_top_logprobs},
    {"stream", K_ALL, T_BOOL, 0, 0, AT(stream), NULL},
    {"stream_options", K_ALL, T_FN, 0, 0, 0, fn_stream_options},
    {"ignore_eos", K_ALL, T_BOOL, 0, 0, AT(ignore_eos), NULL},
    {"user", K_ALL, T_STR, 0, 0, 0, NULL}, /* an end-user id: nothing here depends on it */
    {"tools", K_CHAT, T_FN, 0, 0, 0, fn_tools},
    {"tool_choice", K_CHAT, T_FN, 0, 0, 0, fn_tool_choice},
    {"parallel_tool_calls", K_CHAT, T_BOOL, 0, 0, AT(parallel_tool_calls), NULL},
    {"chat_template_kwargs", K_CHAT, T_FN, 0, 0, 0, fn_kwargs},
    {"reasoning_effort", K_CHAT, T_FN, 0, 0, 0, fn_effort},
    {"reasoning_format", K_CHAT, T_FN, 0, 0, 0, fn_reasoning_format},
    {"echo", K_COMP, T_FN, 0, 0, 0, fn_unsupported},
    {"best_of", K_COMP, T_FN, 0, 0, 0, fn_unsupported},
    {"suffix", K_COMP, T_FN, 0, 0, 0, fn_unsupported},
    {"logit_bias", K_ALL, T_FN, 0, 0, 0, fn_logit_bias},
    {"modalities", K_CHAT, T_FN, 0, 0, 0, fn_modalities},
    {"audio", K_CHAT, T_FN, 0, 0, 0, fn_audio},
    {"store", K_ALL, T_FN, 0, 0, 0, fn_ignored},
    {"metadata", K_ALL, T_FN, 0, 0, 0, fn_ignored},
    {"prompt_cache_key", K_ALL, T_FN, 0, 0, 0, fn_ignored},
    {"prompt_cache_retention", K_ALL, T_FN, 0, 0, 0, fn_ignored},
    {"safety_identifier", K_ALL, T_FN, 0, 0, 0, fn_ignored},
    {"service_tier", K_ALL, T_FN, 0, 0, 0, fn_ignored},
    {"verbosity", K_CHAT, T_FN, 0, 0, 0, fn_ignored},
    {"prediction", K_CHAT, T_FN, 0, 0, 0, fn_ignored},
    {"web_search_options", K_CHAT, T_FN, 0, 0, 0, fn_ignored},
    {"cache_prompt", K_ALL, T_FN, 0, 0, 0, fn_cache_prompt},
    {"timings_per_token", K_ALL, T_BOOL, 0, 0, AT(timings_per_token), NULL},
    {"return_progress", K_ALL, T_FN, 0, 0, 0, fn_return_progress},
    {"n_probs", K_ALL, T_FN, 0, 0, 0, fn_n_probs},
    {"samplers", K_ALL, T_FN, 0, 0, 0, fn_samplers},
    {"response_format", K_ALL, T_FN, 0, 0, 0, fn_response_format},
    {"json_schema", K_ALL, T_FN, 0, 0, 0, fn_json_schema},
    {"grammar", K_ALL, T_FN, 0, 0, 0, fn_grammar},
    {"functions", K_CHAT, T_FN, 0, 0, 0, fn_unsupported},
};
/* clang-format on */

static const struct rule *rule_of(const char *name)
{
    for (size_t i = 0; i < sizeof FIELDS / sizeof FIELDS[0]; i++)
        if (!strcmp(FIELDS[i].name, name))
            return &FIELDS[i];
    return NULL;
}

static bool apply(const struct rule *r, const cJSON *it, struct oai_request *req,
                  struct scratch *sc, struct oai_error *e)
{
    char *at   = (char *)req + r->off;
    double dv  = 0;
    int64_t iv = 0;
    switch (r->type) {
    case T_NUM:
        if (!reqjson_number(OPENAI, it, r->name, r->lo, r->hi, &dv, e))
            return false;
        *(float *)at = (float)dv;
        return true;
    case T_INT:
        if (!reqjson_int(OPENAI, it, r->name, r->lo, r->hi, &iv, e))
            return false;
        *(int32_t *)at = (int32_t)iv;
        return true;
    case T_BOOL:
        return reqjson_bool(OPENAI, it, r->name, (bool *)at, e);
    case T_STR:
        return reqjson_check(OPENAI, it, r->name, RJ_STRING, e);
    case T_FN:
        return r->fn(r, it, req, sc, e);
    }
    return false;
}

/* ---------------------------------------------------------------- parse --- */

/* Checks between fields, once all are read. */
static bool cross_checks(const cJSON *root, struct oai_request *req, struct scratch *sc,
                         struct oai_error *e)
{
    if (req->kind != OAI_COMPLETION && !req->messages)
        return reqjson_missing(e, "messages");
    if (req->kind == OAI_COMPLETION && !req->prompts)
        return reqjson_missing(e, "prompt");
    /* the newest name wins: max_completion_tokens, then max_tokens, then n_predict */
    for (int k = 0; k < 3; k++)
        if (sc->max_tokens[k])
            req->max_tokens = sc->max_tokens[k] < 0 ? -1 : (int32_t)sc->max_tokens[k];
    if (sc->samplers_given) {
        if (!sc->samplers[0])
            req->sampling.top_k = 0;
        if (!sc->samplers[1])
            req->sampling.top_p = 1;
        if (!sc->samplers[2])
            req->sampling.min_p = 0;
        if (!sc->samplers[3])
            req->sampling.temperature = 1;
    }
    if (req->kind != OAI_COMPLETION) {
        if (sc->has_top_logprobs && !sc->logprobs_bool)
            return BAD(e, "invalid_value", "top_logprobs",
                       "Invalid 'top_logprobs': 'logprobs' must be true when 'top_logprobs' is "
                       "given.");
        if (sc->logprobs_bool && !sc->has_top_logprobs)
            req->top_logprobs = 0;
    }
    if ((req->schema || req->grammar) && req->ignore_eos)
        return BAD(e, "invalid_value", "ignore_eos",
                   "Invalid 'ignore_eos': a constrained reply ends where its grammar or schema "
                   "does.");
    if (req->tool_choice == OAI_TOOL_REQUIRED || req->tool_choice == OAI_TOOL_NAMED) {
        if (!req->tools)
            return BAD(e, "invalid_value", "tool_choice",
                       "Invalid 'tool_choice': a call is required but no 'tools' are offered.");
        if (req->schema || req->grammar)
            return BAD(e, "invalid_value", "tool_choice",
                       "Invalid 'tool_choice': a required tool call and a constrained reply "
                       "('response_format', 'json_schema', 'grammar') exclude each other.");
        if (req->tool_choice == OAI_TOOL_NAMED) {
            bool found = false;
            const cJSON *t;
            cJSON_ArrayForEach(t, req->tools)
            {
                const cJSON *n = reqjson_field(reqjson_field(t, "function"), "name");
                found |= cJSON_IsString(n) && !strcmp(n->valuestring, req->tool_name);
            }
            if (!found)
                return BAD(e, "invalid_value", "tool_choice.function.name",
                           "Invalid 'tool_choice.function.name': '%.64s' is not among the "
                           "offered tools.",
                           req->tool_name);
        }
    }
    if (req->grammar && req->tools && req->tool_choice != OAI_TOOL_NONE)
        return BAD(e, "invalid_value", "grammar",
                   "Invalid 'grammar': a GBNF grammar constrains the whole reply, so tool calls "
                   "cannot be parsed out of it; give tool_choice 'none' or no grammar.");
    if (sc->stream_options && !req->stream)
        return BAD(e, "invalid_value", "stream_options",
                   "Invalid 'stream_options': only allowed when 'stream' is true.");
    if (req->kind == OAI_COMPLETION && req->n_prompts * req->n > OAI_MAX_CHOICES)
        return BAD(e, "invalid_value", "n",
                   "Invalid 'n': %d prompts x n = %d choices; at most %d in one request.",
                   req->n_prompts, req->n_prompts * req->n, OAI_MAX_CHOICES);
    return true;
}

bool oai_parse(enum oai_kind kind, const char *body, size_t len, struct oai_request *req,
               struct oai_error *e)
{
    reqjson_defaults(req, kind);
    size_t at;
    cJSON *root = reqjson_parse(body, len, &at);
    if (!root)
        return BAD(e, NULL, NULL,
                   "We could not parse the JSON body of your request: invalid JSON near byte "
                   "%zu of %zu.",
                   at, len);
    bool ok = false;
    if (!cJSON_IsObject(root)) {
        BAD(e, NULL, NULL, "The request body must be a JSON object, but it is %s.",
            reqjson_kind(root));
        goto out;
    }
    struct scratch sc = {0};
    const cJSON *it;
    cJSON_ArrayForEach(it, root)
    {
        const struct rule *r = rule_of(it->string);
        if (!r || !(r->kinds & (1u << kind))) {
            if (!cJSON_IsNull(it))
                oai_ignore(req, it->string, true);
            continue;
        }
        if (cJSON_IsNull(it))
            continue;
        if (cJSON_GetObjectItemCaseSensitive(root, it->string) != it) {
            BAD(e, "invalid_value", it->string, "Invalid request: '%.64s' is given twice.",
                it->string);
            goto out;
        }
        if (!apply(r, it, req, &sc, e))
            goto out;
    }
    ok = cross_checks(root, req, &sc, e);
out:
    cJSON_Delete(root);
    if (!ok)
        oai_request_free(req);
    return ok;
}
