/*
 * resp_request.c: stage 1 of responses.h, a Responses body -> a chat struct
 * oai_request. Runs on the event loop.
 *
 * The body is rewritten as the chat request it means (messages, tools,
 * tool_choice, max_tokens, ...) and that request goes through oai_parse,
 * so the two APIs cannot drift in what they accept or how a conversation
 * renders. What only the Responses API has (item shapes, its refusals, the
 * fields its reply echoes) is checked here first, with the Responses names
 * in every error.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/responses.h"
#include "serve/reqjson.h"

#define BAD(e, code, param, ...)                                                                   \
    oai_fail((e), 400, "invalid_request_error", (code), (param), __VA_ARGS__)
#define OOM(e) oai_fail((e), 500, "server_error", NULL, NULL, "out of memory reading the request")

static bool missing(struct oai_error *e, const char *param)
{
    return BAD(e, "missing_required_parameter", param, "Missing required parameter: '%s'.", param);
}

/* A required string member of obj; false with *e when absent or not a string. */
static const cJSON *want_string(const cJSON *obj, const char *name, const char *at,
                                struct oai_error *e)
{
    char param[96];
    snprintf(param, sizeof param, "%s.%s", at, name);
    const cJSON *it = reqjson_field(obj, name);
    if (!it)
        return missing(e, param), NULL;
    if (!cJSON_IsString(it))
        return reqjson_wrong_type(e, param, "a string", it), NULL;
    return it;
}

/* ------------------------------------------------------------ the input --- */

/* The conversation being built from input items. */
struct conv {
    cJSON *msgs;     /* chat messages so far */
    cJSON *turn;     /* the assistant message that function_call items join, or NULL */
    char *reasoning; /* reasoning of the next assistant turn (malloc'd), or NULL */
};

/* Appends n bytes of s to the malloc'd string *dst (NULL = ""). */
static bool append(char **dst, const char *s, size_t n)
{
    size_t old = *dst ? strlen(*dst) : 0;
    char *d    = realloc(*dst, old + n + 1);
    if (!d)
        return false;
    memcpy(d + old, s, n);
    d[old + n] = 0;
    *dst       = d;
    return true;
}

/*
 * A message's content as the chat path takes it: a string stays a string;
 * text parts (input_text, output_text, an assistant's refusal) become chat
 * text parts. Other parts (images, files, audio) are refused by type.
 */
static cJSON *content_of(const cJSON *c, const char *at, const char *name, struct oai_error *e)
{
    char param[96];
    snprintf(param, sizeof param, "%s.%s", at, name);
    if (!c)
        return missing(e, param), NULL;
    if (cJSON_IsString(c))
        return cJSON_CreateString(c->valuestring);
    if (!cJSON_IsArray(c))
        return reqjson_wrong_type(e, param, "a string or an array of content parts", c), NULL;
    cJSON *parts = cJSON_CreateArray();
    int j        = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, c)
    {
        snprintf(param, sizeof param, "%s.%s[%d]", at, name, j++);
        const cJSON *type = cJSON_IsObject(p) ? reqjson_field(p, "type") : NULL;
        if (!cJSON_IsString(type)) {
            cJSON_Delete(parts);
            return reqjson_wrong_type(e, param, "a content part with a type", p), NULL;
        }
        const char *t   = type->valuestring;
        const char *key = !strcmp(t, "input_text") || !strcmp(t, "output_text") ? "text"
                          : !strcmp(t, "refusal")                               ? "refusal"
                                                                                : NULL;
        if (!key) {
            cJSON_Delete(parts);
            return BAD(e, "unsupported_value", param,
                       "Invalid '%s': '%.32s' content is not supported; this server reads text "
                       "parts only (input_text, output_text).",
                       param, t),
                   NULL;
        }
        const cJSON *text = want_string(p, key, param, e);
        if (!text) {
            cJSON_Delete(parts);
            return NULL;
        }
        cJSON *part = cJSON_CreateObject();
        cJSON_AddStringToObject(part, "type", "text");
        cJSON_AddStringToObject(part, "text", text->valuestring);
        cJSON_AddItemToArray(parts, part);
    }
    return parts;
}

/* A new assistant message, carrying the pending reasoning. */
static cJSON *assistant_turn(struct conv *cv)
{
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", "assistant");
    if (cv->reasoning) {
        cJSON_AddStringToObject(m, "reasoning_content", cv->reasoning);
        free(cv->reasoning);
        cv->reasoning = NULL;
    }
    cJSON_AddItemToArray(cv->msgs, m);
    return m;
}

static bool item_message(struct conv *cv, const cJSON *it, const char *at, struct oai_error *e)
{
    const cJSON *role = want_string(it, "role", at, e);
    if (!role)
        return false;
    const char *r  = role->valuestring;
    bool assistant = !strcmp(r, "assistant");
    if (!assistant && strcmp(r, "user") && strcmp(r, "system") && strcmp(r, "developer")) {
        char param[96];
        snprintf(param, sizeof param, "%s.role", at);
        return BAD(e, "invalid_value", param,
                   "Invalid '%s': '%.32s' is not a role; expected 'user', 'assistant', 'system' or "
                   "'developer'.",
                   param, r);
    }
    cJSON *content = content_of(reqjson_field(it, "content"), at, "content", e);
    if (!content)
        return false;
    cJSON *m;
    if (assistant) {
        m        = assistant_turn(cv);
        cv->turn = m; /* the calls that follow are this turn's */
    } else {
        free(cv->reasoning); /* reasoning before a user turn has no assistant turn to join */
        cv->reasoning = NULL;
        cv->turn      = NULL;
        m             = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", r);
        cJSON_AddItemToArray(cv->msgs, m);
    }
    cJSON_AddItemToObject(m, "content", content);
    return true;
}

static bool item_function_call(struct conv *cv, const cJSON *it, const char *at,
                               struct oai_error *e)
{
    const cJSON *call_id = want_string(it, "call_id", at, e);
    const cJSON *name    = call_id ? want_string(it, "name", at, e) : NULL;
    const cJSON *args    = name ? want_string(it, "arguments", at, e) : NULL;
    if (!args)
        return false;
    cJSON *parsed = cJSON_Parse(args->valuestring);
    bool object   = cJSON_IsObject(parsed);
    cJSON_Delete(parsed);
    if (!object) {
        char param[96];
        snprintf(param, sizeof param, "%s.arguments", at);
        return BAD(e, "invalid_value", param,
                   "Invalid '%s': expected a JSON object in a string, as the model wrote it.",
                   param);
    }
    if (!cv->turn)
        cv->turn = assistant_turn(cv);
    cJSON *calls = cJSON_GetObjectItemCaseSensitive(cv->turn, "tool_calls");
    if (!calls)
        calls = cJSON_AddArrayToObject(cv->turn, "tool_calls");
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "id", call_id->valuestring);
    cJSON_AddStringToObject(c, "type", "function");
    cJSON *fn = cJSON_AddObjectToObject(c, "function");
    cJSON_AddStringToObject(fn, "name", name->valuestring);
    cJSON_AddStringToObject(fn, "arguments", args->valuestring);
    cJSON_AddItemToArray(calls, c);
    return true;
}

static bool item_function_output(struct conv *cv, const cJSON *it, const char *at,
                                 struct oai_error *e)
{
    const cJSON *call_id = want_string(it, "call_id", at, e);
    if (!call_id)
        return false;
    char param[96];
    snprintf(param, sizeof param, "%s.output", at);
    const cJSON *out = reqjson_field(it, "output");
    char *text       = NULL;
    if (!out)
        return missing(e, param);
    if (cJSON_IsString(out)) {
        text = strdup(out->valuestring);
    } else if (cJSON_IsArray(out)) { /* text parts, joined: a tool message holds one string */
        cJSON *parts = content_of(out, at, "output", e);
        if (!parts)
            return false;
        text = strdup("");
        const cJSON *p;
        cJSON_ArrayForEach(p, parts)
        {
            const char *s = cJSON_GetObjectItemCaseSensitive(p, "text")->valuestring;
            if (text && !append(&text, s, strlen(s))) {
                free(text);
                text = NULL;
            }
        }
        cJSON_Delete(parts);
    } else {
        return reqjson_wrong_type(e, param, "a string or an array of content parts", out);
    }
    if (!text)
        return OOM(e);
    cv->turn = NULL;
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", "tool");
    cJSON_AddStringToObject(m, "tool_call_id", call_id->valuestring);
    cJSON_AddStringToObject(m, "content", text);
    free(text);
    cJSON_AddItemToArray(cv->msgs, m);
    return true;
}

/* A reasoning item: its reasoning_text goes to the next assistant turn (a summary or an
 * encrypted blob is not the model's own text, so neither is rendered). */
static bool item_reasoning(struct conv *cv, const cJSON *it, const char *at, struct oai_error *e)
{
    cv->turn        = NULL;
    const cJSON *cs = reqjson_field(it, "content");
    if (!cs)
        return true;
    char param[96];
    snprintf(param, sizeof param, "%s.content", at);
    if (!cJSON_IsArray(cs))
        return reqjson_wrong_type(e, param, "an array", cs);
    int j = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, cs)
    {
        snprintf(param, sizeof param, "%s.content[%d]", at, j++);
        const cJSON *type = cJSON_IsObject(p) ? reqjson_field(p, "type") : NULL;
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "reasoning_text"))
            return BAD(e, "invalid_value", param,
                       "Invalid '%s': expected a reasoning_text part.", param);
        const cJSON *text = want_string(p, "text", param, e);
        if (!text)
            return false;
        if (!append(&cv->reasoning, text->valuestring, strlen(text->valuestring)))
            return OOM(e);
    }
    return true;
}

/* input (a string, or a list of items) -> chat messages appended to cv->msgs. */
static bool take_input(struct conv *cv, const cJSON *in, struct oai_error *e)
{
    if (cJSON_IsString(in)) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", "user");
        cJSON_AddStringToObject(m, "content", in->valuestring);
        cJSON_AddItemToArray(cv->msgs, m);
        return true;
    }
    if (!cJSON_IsArray(in))
        return reqjson_wrong_type(e, "input", "a string or an array of input items", in);
    int i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, in)
    {
        char at[32];
        snprintf(at, sizeof at, "input[%d]", i++);
        if (!cJSON_IsObject(it))
            return reqjson_wrong_type(e, at, "an object", it);
        const cJSON *type = reqjson_field(it, "type");
        if (type && !cJSON_IsString(type)) {
            char param[48];
            snprintf(param, sizeof param, "%s.type", at);
            return reqjson_wrong_type(e, param, "a string", type);
        }
        const char *t = type ? type->valuestring : "message"; /* EasyInputMessage has no type */
        bool ok;
        if (!strcmp(t, "message"))
            ok = item_message(cv, it, at, e);
        else if (!strcmp(t, "function_call"))
            ok = item_function_call(cv, it, at, e);
        else if (!strcmp(t, "function_call_output"))
            ok = item_function_output(cv, it, at, e);
        else if (!strcmp(t, "reasoning"))
            ok = item_reasoning(cv, it, at, e);
        else if (!strcmp(t, "item_reference"))
            ok = BAD(e, "unsupported_value", at,
                     "Invalid '%s': item_reference points at a stored item, and this server "
                     "stores nothing; send the item itself.",
                     at);
        else
            ok = BAD(e, "unsupported_value", at,
                     "Invalid '%s': '%.40s' items are not supported; this server takes message, "
                     "function_call, function_call_output and reasoning items.",
                     at, t);
        if (!ok)
            return false;
    }
    if (cJSON_GetArraySize(cv->msgs) == 0)
        return BAD(e, "empty_array", "input",
                   "Invalid 'input': no messages. Expected at least one input item.");
    return true;
}

/* ------------------------------------------------------------ the tools --- */

/* Responses' flat function tools -> chat tools; any other tool type is refused by name. */
static cJSON *tools_of(const cJSON *tools, struct oai_error *e)
{
    if (!cJSON_IsArray(tools))
        return reqjson_wrong_type(e, "tools", "an array", tools), NULL;
    cJSON *out = cJSON_CreateArray();
    int j      = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, tools)
    {
        char at[32];
        snprintf(at, sizeof at, "tools[%d]", j++);
        const cJSON *type = cJSON_IsObject(t) ? want_string(t, "type", at, e) : NULL;
        if (!type) {
            if (!cJSON_IsObject(t))
                reqjson_wrong_type(e, at, "an object", t);
            cJSON_Delete(out);
            return NULL;
        }
        if (strcmp(type->valuestring, "function")) {
            cJSON_Delete(out);
            return BAD(e, "unsupported_value", at,
                       "Invalid '%s': '%.40s' tools are not supported; this server runs "
                       "function tools only (the client executes them).",
                       at, type->valuestring),
                   NULL;
        }
        const cJSON *name = want_string(t, "name", at, e);
        if (!name) {
            cJSON_Delete(out);
            return NULL;
        }
        cJSON *chat = cJSON_CreateObject();
        cJSON_AddStringToObject(chat, "type", "function");
        cJSON *fn = cJSON_AddObjectToObject(chat, "function");
        cJSON_AddStringToObject(fn, "name", name->valuestring);
        static const char *const keep[] = {"description", "parameters"};
        for (int k = 0; k < 2; k++) {
            const cJSON *v = reqjson_field(t, keep[k]);
            if (v)
                cJSON_AddItemToObject(fn, keep[k], cJSON_Duplicate(v, true));
        }
        cJSON_AddItemToArray(out, chat);
    }
    return out;
}

static cJSON *tool_choice_of(const cJSON *tc, struct oai_error *e)
{
    if (cJSON_IsString(tc))
        return cJSON_CreateString(tc->valuestring); /* the chat path checks the value */
    if (!cJSON_IsObject(tc))
        return reqjson_wrong_type(e, "tool_choice", "a string or an object", tc), NULL;
    const cJSON *type = want_string(tc, "type", "tool_choice", e);
    if (!type)
        return NULL;
    if (strcmp(type->valuestring, "function"))
        return BAD(e, "unsupported_value", "tool_choice",
                   "Invalid 'tool_choice': '%.40s' is not supported; expected 'auto', 'none', "
                   "'required' or {\"type\": \"function\", \"name\": ...}.",
                   type->valuestring),
               NULL;
    const cJSON *name = want_string(tc, "name", "tool_choice", e);
    if (!name)
        return NULL;
    cJSON *chat = cJSON_CreateObject();
    cJSON_AddStringToObject(chat, "type", "function");
    cJSON_AddStringToObject(cJSON_AddObjectToObject(chat, "function"), "name", name->valuestring);
    return chat;
}

/* ------------------------------------------------------- text, reasoning --- */

bool resp_text_format(const cJSON *f, cJSON **schema, struct oai_error *e)
{
    *schema = NULL;
    if (!cJSON_IsObject(f))
        return reqjson_wrong_type(e, "text.format", "an object", f);
    const cJSON *type = want_string(f, "type", "text.format", e);
    if (!type)
        return false;
    const char *t = type->valuestring;
    if (!strcmp(t, "text"))
        return true;
    if (!strcmp(t, "json_object")) {
        *schema = cJSON_CreateObject();
        cJSON_AddStringToObject(*schema, "type", "object");
        return *schema != NULL || OOM(e);
    }
    if (strcmp(t, "json_schema"))
        return BAD(e, "invalid_value", "text.format.type",
                   "Invalid 'text.format.type': expected 'text', 'json_object' or 'json_schema', "
                   "but got '%.32s'.",
                   t);
    const cJSON *name = want_string(f, "name", "text.format", e);
    if (!name)
        return false;
    const cJSON *s = reqjson_field(f, "schema");
    if (!s)
        return missing(e, "text.format.schema");
    if (!cJSON_IsObject(s))
        return reqjson_wrong_type(e, "text.format.schema", "an object (a JSON schema)", s);
    const cJSON *strict = reqjson_field(f, "strict");
    if (strict && !cJSON_IsBool(strict))
        return reqjson_wrong_type(e, "text.format.strict", "a boolean", strict);
    *schema = cJSON_Duplicate(s, true);
    return *schema != NULL || OOM(e);
}

/* text: {format, verbosity}; the schema is kept in *schema. */
static bool take_text(const cJSON *text, cJSON **schema, struct oai_error *e)
{
    if (!cJSON_IsObject(text))
        return reqjson_wrong_type(e, "text", "an object", text);
    const cJSON *k;
    cJSON_ArrayForEach(k, text)
    {
        if (strcmp(k->string, "format") && strcmp(k->string, "verbosity"))
            return BAD(e, "unknown_parameter", "text",
                       "Unrecognized request argument supplied: text.%.64s", k->string);
    }
    const cJSON *v = reqjson_field(text, "verbosity");
    if (v && (!cJSON_IsString(v) || strcmp(v->valuestring, "medium")))
        return BAD(e, "unsupported_value", "text.verbosity",
                   "Unsupported value: 'text.verbosity' can only be 'medium' on this server; the "
                   "model's verbosity is not adjustable.");
    const cJSON *f = reqjson_field(text, "format");
    return !f || resp_text_format(f, schema, e);
}

/* reasoning: {effort, summary}: effort goes to the chat request, summary is accepted. */
static bool take_reasoning(const cJSON *r, cJSON *chat, struct oai_error *e)
{
    if (!cJSON_IsObject(r))
        return reqjson_wrong_type(e, "reasoning", "an object", r);
    const cJSON *k;
    cJSON_ArrayForEach(k, r)
    {
        const char *n = k->string;
        if (strcmp(n, "effort") && strcmp(n, "summary") && strcmp(n, "generate_summary"))
            return BAD(e, "unknown_parameter", "reasoning",
                       "Unrecognized request argument supplied: reasoning.%.64s", n);
        if (!cJSON_IsNull(k) && !cJSON_IsString(k)) {
            char param[48];
            snprintf(param, sizeof param, "reasoning.%s", n);
            return reqjson_wrong_type(e, param, "a string", k);
        }
    }
    const cJSON *effort = reqjson_field(r, "effort");
    if (effort)
        cJSON_AddStringToObject(chat, "reasoning_effort", effort->valuestring);
    return true;
}

/* --------------------------------------------------------------- fields --- */

/* Fields the API defines that ask for nothing here when they hold this harmless value. */
static bool harmless(const char *n, const cJSON *it)
{
    if (!strcmp(n, "background"))
        return cJSON_IsFalse(it);
    if (!strcmp(n, "truncation"))
        return cJSON_IsString(it) && !strcmp(it->valuestring, "disabled");
    if (!strcmp(n, "top_logprobs"))
        return cJSON_IsNumber(it) && it->valuedouble == 0;
    if (!strcmp(n, "service_tier"))
        return cJSON_IsString(it) &&
               (!strcmp(it->valuestring, "auto") || !strcmp(it->valuestring, "default"));
    if (!strcmp(n, "include"))
        return cJSON_IsArray(it) && cJSON_GetArraySize(it) == 0;
    return false; /* conversation, prompt, max_tool_calls, context_management, moderation */
}

static const char *const REFUSED[] = {
    "background",         "truncation", "top_logprobs", "service_tier", "include",
    "conversation",       "prompt",     "max_tool_calls", "context_management", "moderation",
};

/* Copies it into the chat body under name (NULL: as is). */
static void pass(cJSON *chat, const char *name, const cJSON *it)
{
    cJSON_AddItemToObject(chat, name, cJSON_Duplicate(it, true));
}

/* Every top-level field: into the chat body, the echo, or a refusal. */
static bool take_field(const cJSON *it, cJSON *chat, cJSON *echo, struct conv *cv,
                       cJSON **schema, bool *has_input, struct oai_error *e)
{
    const char *n = it->string;
    if (!strcmp(n, "model") || !strcmp(n, "temperature") || !strcmp(n, "top_p") ||
        !strcmp(n, "stream") || !strcmp(n, "parallel_tool_calls") || !strcmp(n, "user")) {
        pass(chat, n, it); /* checked by the chat path */
        if (strcmp(n, "model") && strcmp(n, "stream"))
            pass(echo, n, it);
        return true;
    }
    if (!strcmp(n, "max_output_tokens")) {
        pass(chat, "max_tokens", it);
        pass(echo, n, it);
        return true;
    }
    if (!strcmp(n, "input")) {
        *has_input = true;
        return take_input(cv, it, e);
    }
    if (!strcmp(n, "instructions")) {
        if (!cJSON_IsString(it))
            return reqjson_wrong_type(e, n, "a string", it);
        pass(echo, n, it);
        return true; /* placed first once all fields are read */
    }
    if (!strcmp(n, "tools")) {
        cJSON *t = tools_of(it, e);
        if (!t)
            return false;
        cJSON_AddItemToObject(chat, "tools", t);
        pass(echo, n, it);
        return true;
    }
    if (!strcmp(n, "tool_choice")) {
        cJSON *tc = tool_choice_of(it, e);
        if (!tc)
            return false;
        cJSON_AddItemToObject(chat, "tool_choice", tc);
        pass(echo, n, it);
        return true;
    }
    if (!strcmp(n, "text")) {
        if (!take_text(it, schema, e))
            return false;
        pass(echo, n, it);
        return true;
    }
    if (!strcmp(n, "reasoning")) {
        if (!take_reasoning(it, chat, e))
            return false;
        pass(echo, n, it);
        return true;
    }
    if (!strcmp(n, "metadata")) {
        if (!cJSON_IsObject(it))
            return reqjson_wrong_type(e, n, "an object", it);
        if (cJSON_GetArraySize(it) > 16)
            return BAD(e, "object_above_max_properties", n,
                       "Invalid 'metadata': at most 16 keys, but got %d.", cJSON_GetArraySize(it));
        const cJSON *v;
        cJSON_ArrayForEach(v, it)
        {
            if (!cJSON_IsString(v) || strlen(v->string) > 64 || strlen(v->valuestring) > 512)
                return BAD(e, "invalid_value", n,
                           "Invalid 'metadata.%.64s': expected a string of at most 512 "
                           "characters under a key of at most 64.",
                           v->string);
        }
        pass(echo, n, it);
        return true;
    }
    if (!strcmp(n, "store")) {
        if (!cJSON_IsBool(it))
            return reqjson_wrong_type(e, n, "a boolean", it);
        return true; /* stateless: nothing is stored whatever it says (echoed as false) */
    }
    if (!strcmp(n, "safety_identifier") || !strcmp(n, "prompt_cache_key")) {
        return cJSON_IsString(it) ||
               reqjson_wrong_type(e, n, "a string", it); /* nothing depends on them */
    }
    if (!strcmp(n, "stream_options")) {
        const cJSON *k;
        if (!cJSON_IsObject(it))
            return reqjson_wrong_type(e, n, "an object", it);
        cJSON_ArrayForEach(k, it)
        {
            if (strcmp(k->string, "include_obfuscation") || !cJSON_IsBool(k))
                return BAD(e, "unsupported_parameter", n,
                           "Unsupported parameter: 'stream_options.%.64s' is not supported by "
                           "this server.",
                           k->string);
        }
        return true; /* events are never padded, so obfuscation has nothing to turn off */
    }
    if (!strcmp(n, "previous_response_id"))
        return BAD(e, "unsupported_parameter", n,
                   "Unsupported parameter: 'previous_response_id'. This server is stateless and "
                   "stores no responses; send the whole conversation in 'input'.");
    for (size_t k = 0; k < sizeof REFUSED / sizeof REFUSED[0]; k++)
        if (!strcmp(n, REFUSED[k])) {
            if (harmless(n, it))
                return true;
            return BAD(e, "unsupported_parameter", n,
                       "Unsupported parameter: '%s' with this value is not supported by this "
                       "(stateless, function-tools-only) server.",
                       n);
        }
    return BAD(e, "unknown_parameter", n, "Unrecognized request argument supplied: %.64s", n);
}

/* The chat path's parameter names back to the Responses API's. */
static void rename_param(struct oai_error *e)
{
    static const char *const map[][2] = {
        {"max_tokens", "max_output_tokens"},
        {"reasoning_effort", "reasoning.effort"},
        {"messages", "input"},
        {"json_schema", "text.format"},
    };
    for (size_t k = 0; k < sizeof map / sizeof map[0]; k++) {
        size_t n = strlen(map[k][0]);
        if (!strncmp(e->param, map[k][0], n) && (!e->param[n] || e->param[n] == '[')) {
            snprintf(e->param, sizeof e->param, "%s", map[k][1]);
            return;
        }
    }
}

/* The defaults of the echoed fields the response object always carries. */
static void echo_defaults(cJSON *echo)
{
    static const char *const nulls[] = {"instructions", "max_output_tokens", "metadata", "user"};
    for (size_t k = 0; k < sizeof nulls / sizeof nulls[0]; k++)
        if (!cJSON_GetObjectItemCaseSensitive(echo, nulls[k]))
            cJSON_AddNullToObject(echo, nulls[k]);
    if (!reqjson_field(echo, "tools"))
        cJSON_AddArrayToObject(echo, "tools");
    if (!reqjson_field(echo, "tool_choice"))
        cJSON_AddStringToObject(echo, "tool_choice", "auto");
    if (!reqjson_field(echo, "temperature"))
        cJSON_AddNumberToObject(echo, "temperature", 1);
    if (!reqjson_field(echo, "top_p"))
        cJSON_AddNumberToObject(echo, "top_p", 1);
    if (!reqjson_field(echo, "parallel_tool_calls"))
        cJSON_AddTrueToObject(echo, "parallel_tool_calls");
    cJSON *text = cJSON_GetObjectItemCaseSensitive(echo, "text");
    if (!cJSON_IsObject(text)) {
        cJSON_DeleteItemFromObjectCaseSensitive(echo, "text");
        text = cJSON_AddObjectToObject(echo, "text");
    }
    if (!reqjson_field(text, "format")) {
        cJSON_DeleteItemFromObjectCaseSensitive(text, "format");
        cJSON_AddStringToObject(cJSON_AddObjectToObject(text, "format"), "type", "text");
    }
    cJSON *r = cJSON_GetObjectItemCaseSensitive(echo, "reasoning");
    if (!cJSON_IsObject(r)) {
        cJSON_DeleteItemFromObjectCaseSensitive(echo, "reasoning");
        r = cJSON_AddObjectToObject(echo, "reasoning");
    }
    static const char *const rk[] = {"effort", "summary"};
    for (int k = 0; k < 2; k++)
        if (!cJSON_GetObjectItemCaseSensitive(r, rk[k]))
            cJSON_AddNullToObject(r, rk[k]);
    cJSON_AddFalseToObject(echo, "store");
    cJSON_AddStringToObject(echo, "truncation", "disabled");
}

bool resp_parse(const char *body, size_t len, struct oai_request *req, struct oai_error *e)
{
    memset(req, 0, sizeof *req);
    size_t at;
    cJSON *root = reqjson_parse(body, len, &at);
    if (!root)
        return BAD(e, NULL, NULL,
                   "We could not parse the JSON body of your request: invalid JSON near byte "
                   "%zu of %zu.",
                   at, len);
    bool ok       = false;
    struct conv cv = {.msgs = cJSON_CreateArray()};
    cJSON *chat   = cJSON_CreateObject();
    cJSON *echo   = cJSON_CreateObject();
    cJSON *schema = NULL;
    char *text    = NULL;
    if (!cv.msgs || !chat || !echo) {
        OOM(e);
        goto out;
    }
    if (!cJSON_IsObject(root)) {
        BAD(e, NULL, NULL, "The request body must be a JSON object, but it is %s.",
            reqjson_kind(root));
        goto out;
    }
    bool has_input = false;
    const cJSON *it;
    cJSON_ArrayForEach(it, root)
    {
        if (cJSON_GetObjectItemCaseSensitive(root, it->string) != it) {
            BAD(e, "invalid_value", it->string, "Invalid request: '%.64s' is given twice.",
                it->string);
            goto out;
        }
        if (cJSON_IsNull(it) && strcmp(it->string, "input"))
            continue;
        if (!take_field(it, chat, echo, &cv, &schema, &has_input, e))
            goto out;
    }
    if (!has_input) {
        missing(e, "input");
        goto out;
    }
    const cJSON *ins = reqjson_field(root, "instructions");
    if (ins) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", "system");
        cJSON_AddStringToObject(m, "content", ins->valuestring);
        cJSON_InsertItemInArray(cv.msgs, 0, m);
    }
    cJSON_AddItemToObject(chat, "messages", cv.msgs);
    cv.msgs = NULL;
    if (schema) { /* llama.cpp's field on the chat path: the reply is held to the schema */
        cJSON_AddItemToObject(chat, "json_schema", schema);
        schema = NULL;
    }
    if (!(text = cJSON_PrintUnformatted(chat))) {
        OOM(e);
        goto out;
    }
    if (!oai_parse(OAI_CHAT, text, strlen(text), req, e)) {
        rename_param(e);
        goto out;
    }
    echo_defaults(echo);
    req->echo = echo;
    echo      = NULL;
    ok        = true;
out:
    free(text);
    free(cv.reasoning);
    cJSON_Delete(cv.msgs);
    cJSON_Delete(chat);
    cJSON_Delete(echo);
    cJSON_Delete(schema);
    cJSON_Delete(root);
    return ok;
}
