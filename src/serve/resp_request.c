/*
 * resp_request.c: stage 1 of responses.h, a Responses body -> a chat struct
 * oai_request. Runs on the event loop.
 *
 * The body is rewritten as the chat request it means (messages, tools,
 * tool_choice, max_tokens, ...) and that request goes through oai_parse,
 * so the two APIs cannot drift in what they accept or how a conversation
 * renders. What only the Responses API has (item shapes, tool kinds, its
 * refusals, the fields its reply echoes) is checked here first, with the
 * Responses names in every error. Fields accepted without effect are noted
 * on a scratch request and copied onto the parsed one (oai_parse starts it
 * afresh), as "path" or "path:value" ("tools.4:web_search").
 *
 * Every top-level field is one row of one table (FIELDS), as in
 * oai_request.c: its type, whether it goes to the chat body, the echo or
 * the notes, and the function that reads the rest of it.
 */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/lark.h"
#include "grammar/schema.h"
#include "serve/reqjson.h"
#include "serve/responses.h"

#define BAD    REQJSON_BAD
#define OOM(e) REQJSON_OOM(e, "server_error")

/*
 * The Responses API words an integer out of range its own way; one past what int64 holds has
 * always been refused here as no integer at all. Otherwise OpenAI's wording.
 */
static bool out_of_range(struct oai_error *e, const char *param, enum reqjson_type t, double lo,
                         double hi, const cJSON *it)
{
    double v = it->valuedouble;
    if (t != RJ_INTEGER)
        return reqjson_openai.out_of_range(e, param, t, lo, hi, it);
    if (v >= 9223372036854775808.0 || v < -9223372036854775808.0)
        return reqjson_wrong_type(e, param, "an integer", it);
    return BAD(e, "invalid_value", param, "Invalid '%s': expected %d to %d, but got %g.", param,
               (int)lo, (int)hi, v);
}

static const struct reqjson_dialect RESP = {
    .type_name    = {"a number", "an integer", "a boolean", "a string", "an object", "an array"},
    .missing      = reqjson_missing,
    .wrong_type   = reqjson_wrong_type,
    .out_of_range = out_of_range,
};

/* A required string member of obj; NULL with *e when absent or not a string. */
static const cJSON *want_string(const cJSON *obj, const char *name, const char *at,
                                struct oai_error *e)
{
    return reqjson_member(&RESP, obj, name, at, RJ_STRING, e);
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

/* ------------------------------------------------------------- context --- */

/* What one parse builds besides the conversation: the chat body it means, the fields the
 * reply echoes, and the fields accepted without effect. */
struct rp {
    cJSON *chat;          /* the chat request body */
    cJSON *echo;          /* what the reply echoes (Responses names) */
    cJSON *schema;        /* text.format's schema, or NULL */
    const cJSON *allowed; /* tool_choice allowed_tools' list (in the body), or NULL */
    bool logprobs;        /* include message.output_text.logprobs, or top_logprobs > 0 */
    int top_logprobs;     /* top_logprobs as given, or 0 */
    bool has_input;
    struct conv *cv;          /* the conversation input builds */
    struct oai_request notes; /* only ignored[]: copied onto the parsed request */
};

/* "tools[3].tools[1]" -> "tools.3.tools.1": the ignored-field path as openai.h writes it. */
static void note(struct rp *p, const char *at, const char *suffix, bool unknown)
{
    char path[OAI_IGNORED_LEN * 2];
    size_t n = 0;
    for (const char *s = at; *s && n + 1 < sizeof path; s++)
        if (*s != ']')
            path[n++] = *s == '[' ? '.' : *s;
    path[n] = 0;
    if (suffix)
        snprintf(path + n, sizeof path - n, "%s", suffix);
    oai_ignore(&p->notes, path, unknown);
}

/* ----------------------------------------------------- encrypted reasoning --- */

#define SEAL_TAG "hearth.r1:" /* the version tag of hearth's encrypted_content */

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *resp_seal_reasoning(const char *text, size_t len)
{
    size_t tag = strlen(SEAL_TAG);
    char *out  = malloc(tag + (len + 2) / 3 * 4 + 1);
    if (!out)
        return NULL;
    memcpy(out, SEAL_TAG, tag);
    char *o = out + tag;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)(unsigned char)text[i] << 16;
        if (i + 1 < len)
            v |= (uint32_t)(unsigned char)text[i + 1] << 8;
        if (i + 2 < len)
            v |= (unsigned char)text[i + 2];
        *o++ = B64[v >> 18 & 63];
        *o++ = B64[v >> 12 & 63];
        *o++ = i + 1 < len ? B64[v >> 6 & 63] : '=';
        *o++ = i + 2 < len ? B64[v & 63] : '=';
    }
    *o = 0;
    return out;
}

char *resp_open_reasoning(const char *sealed)
{
    size_t tag = strlen(SEAL_TAG);
    if (strncmp(sealed, SEAL_TAG, tag))
        return NULL;
    const char *s = sealed + tag;
    size_t n      = strlen(s);
    if (n % 4)
        return NULL;
    char *out = malloc(n / 4 * 3 + 1);
    if (!out)
        return NULL;
    size_t len = 0;
    for (size_t i = 0; i < n; i += 4) {
        uint32_t v = 0;
        int pad    = 0;
        for (int k = 0; k < 4; k++) {
            const char *at = s[i + k] && s[i + k] != '=' ? strchr(B64, s[i + k]) : NULL;
            if (s[i + k] == '=' && i + 4 == n && k >= 2) {
                pad++;
            } else if (!at || pad) {
                free(out);
                return NULL;
            }
            v = v << 6 | (at ? (uint32_t)(at - B64) : 0);
        }
        out[len++] = (char)(v >> 16);
        if (pad < 2)
            out[len++] = (char)(v >> 8 & 255);
        if (pad < 1)
            out[len++] = (char)(v & 255);
    }
    out[len] = 0;
    if (strlen(out) != len) { /* a NUL inside: not text hearth sealed */
        free(out);
        return NULL;
    }
    return out;
}

/* ------------------------------------------------------------ the tools --- */

const char *resp_tool_flat_name(const char *ns, const char *name, char *buf, size_t size)
{
    if (!ns || !ns[0])
        return name;
    size_t n = strlen(ns);
    snprintf(buf, size, "%s%s%s", ns, ns[n - 1] == '_' ? "" : "__", name);
    return buf;
}

bool resp_tool_find(const cJSON *tools, const char *flat, const char **ns, const char **name,
                    bool *custom)
{
    const cJSON *t;
    cJSON_ArrayForEach(t, tools)
    {
        const char *type = cJSON_GetStringValue(reqjson_field(t, "type"));
        const char *n    = cJSON_GetStringValue(reqjson_field(t, "name"));
        if (!type || !n)
            continue;
        if (!strcmp(type, "namespace")) {
            const cJSON *in;
            cJSON_ArrayForEach(in, reqjson_field(t, "tools"))
            {
                const char *it      = cJSON_GetStringValue(reqjson_field(in, "type"));
                const char *name_in = cJSON_GetStringValue(reqjson_field(in, "name"));
                char buf[256];
                if (!it || !name_in || (strcmp(it, "function") && strcmp(it, "custom")) ||
                    strcmp(resp_tool_flat_name(n, name_in, buf, sizeof buf), flat))
                    continue;
                *ns     = n;
                *name   = name_in;
                *custom = !strcmp(it, "custom");
                return true;
            }
        } else if ((!strcmp(type, "function") || !strcmp(type, "custom")) && !strcmp(n, flat)) {
            *ns     = NULL;
            *name   = n;
            *custom = !strcmp(type, "custom");
            return true;
        }
    }
    return false;
}

/* The tool types the API defines that run on OpenAI's side: skipped here (nothing can run
 * them), as llama-server skips them, with a note. */
static bool hosted(const char *type)
{
    static const char *const known[] = {
        "web_search",
        "web_search_preview",
        "web_search_preview_2025_03_11",
        "web_search_2025_08_26",
        "file_search",
        "code_interpreter",
        "image_generation",
        "local_shell",
        "shell",
        "mcp",
        "computer_use_preview",
        "computer",
        "apply_patch",
        "tool_search",
    };
    for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
        if (!strcmp(type, known[k]))
            return true;
    return false;
}

/* A custom tool's format -> the pattern its input is held to (malloc'd), or NULL for free
 * text; a definition that cannot be converted is noted and leaves the input free. */
static bool custom_pattern(struct rp *p, const cJSON *f, const char *at, char **pattern,
                           struct oai_error *e)
{
    *pattern = NULL;
    char param[96];
    snprintf(param, sizeof param, "%s.format", at);
    if (!f)
        return true;
    if (!reqjson_check(&RESP, f, param, RJ_OBJECT, e))
        return false;
    const cJSON *type = want_string(f, "type", param, e);
    if (!type)
        return false;
    if (!strcmp(type->valuestring, "text"))
        return true;
    if (strcmp(type->valuestring, "grammar"))
        return BAD(e, "invalid_value", param,
                   "Invalid '%s.type': expected 'text' or 'grammar', but got '%.32s'.", param,
                   type->valuestring);
    const cJSON *syntax = want_string(f, "syntax", param, e);
    const cJSON *def    = syntax ? want_string(f, "definition", param, e) : NULL;
    if (!def)
        return false;
    const char *sx = syntax->valuestring;
    char why[256]  = "";
    if (!strcmp(sx, "lark")) {
        *pattern = lark_to_regex(def->valuestring, strlen(def->valuestring), why, sizeof why);
    } else if (!strcmp(sx, "regex")) {
        size_t n = strlen(def->valuestring) + 8;
        if ((*pattern = malloc(n)))
            snprintf(*pattern, n, "^(?:%s)$", def->valuestring);
    } else {
        return BAD(e, "invalid_value", param,
                   "Invalid '%s.syntax': expected 'lark' or 'regex', but got '%.32s'.", param, sx);
    }
    if (*pattern) { /* the pattern must also be one the schema engine takes */
        cJSON *s = cJSON_CreateObject();
        cJSON_AddStringToObject(s, "type", "string");
        cJSON_AddStringToObject(s, "pattern", *pattern);
        struct schema_gbnf *b = schema_gbnf_new();
        bool ok               = s && b && schema_gbnf_add(b, "custom-input", s, why, sizeof why);
        schema_gbnf_free(b);
        cJSON_Delete(s);
        if (!ok) {
            free(*pattern);
            *pattern = NULL;
        }
    }
    if (!*pattern) /* free-form input instead, and the server's log says why */
        note(p, at, ".format.definition", false);
    return true;
}

/* One function or custom tool (ns: its namespace, or NULL) -> a chat tool appended to out. */
static bool tool_one(struct rp *p, cJSON *out, const cJSON *t, const char *at, const char *ns,
                     struct oai_error *e)
{
    const cJSON *type = want_string(t, "type", at, e);
    if (!type)
        return false;
    const char *ty = type->valuestring;
    bool custom    = !strcmp(ty, "custom");
    if (strcmp(ty, "function") && !custom) { /* skipped, as llama-server does; the log says */
        char what[64];
        snprintf(what, sizeof what, ":%.40s", ty);
        note(p, at, what, !hosted(ty));
        return true;
    }
    const cJSON *name = want_string(t, "name", at, e);
    if (!name)
        return false;
    char buf[256];
    cJSON *chat = cJSON_CreateObject();
    cJSON_AddStringToObject(chat, "type", "function");
    cJSON *fn = cJSON_AddObjectToObject(chat, "function");
    cJSON_AddStringToObject(fn, "name",
                            resp_tool_flat_name(ns, name->valuestring, buf, sizeof buf));
    cJSON_AddItemToArray(out, chat);
    static const struct reqjson_row row[] = {{"description", RJ_STRING, false}};
    if (!reqjson_rows(&RESP, t, at, row, 1, e))
        return false;
    const cJSON *desc = reqjson_field(t, "description");
    if (!custom) {
        if (desc)
            cJSON_AddStringToObject(fn, "description", desc->valuestring);
        const cJSON *v = reqjson_field(t, "parameters");
        if (v)
            cJSON_AddItemToObject(fn, "parameters", cJSON_Duplicate(v, true));
        return true;
    }
    /* a custom tool: one free-form string, "input", held to the format's grammar when given */
    const cJSON *f = reqjson_field(t, "format");
    char *pattern  = NULL;
    if (!custom_pattern(p, f, at, &pattern, e))
        return false;
    char *d          = desc ? strdup(desc->valuestring) : strdup("");
    const cJSON *def = reqjson_field(f, "definition");
    if (d && cJSON_IsString(def)) { /* the model must see the grammar to write to it */
        const char *syn = cJSON_GetStringValue(reqjson_field(f, "syntax"));
        char head[96];
        snprintf(head, sizeof head, "%sThe input is free text in this %.16s grammar:\n",
                 d[0] ? "\n\n" : "", syn ? syn : "");
        if (!append(&d, head, strlen(head)) ||
            !append(&d, def->valuestring, strlen(def->valuestring))) {
            free(d);
            d = NULL;
        }
    }
    if (!d) {
        free(pattern);
        return OOM(e);
    }
    if (d[0])
        cJSON_AddStringToObject(fn, "description", d);
    free(d);
    cJSON *ps = cJSON_AddObjectToObject(fn, "parameters");
    cJSON_AddStringToObject(ps, "type", "object");
    cJSON *in = cJSON_AddObjectToObject(cJSON_AddObjectToObject(ps, "properties"), "input");
    cJSON_AddStringToObject(in, "type", "string");
    if (pattern)
        cJSON_AddStringToObject(in, "pattern", pattern);
    free(pattern);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(ps, "required"), cJSON_CreateString("input"));
    cJSON_AddFalseToObject(ps, "additionalProperties");
    return true;
}

/*
 * Responses tools -> chat tools: function tools as they are, custom tools as a function of
 * one string, a namespace's tools flattened under "<namespace>__<name>"; hosted tools
 * (web_search, file_search, ...) and unknown types are skipped with a note.
 */
static cJSON *tools_of(struct rp *p, const cJSON *tools, struct oai_error *e)
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
        bool ok = false;
        if (!cJSON_IsObject(t)) {
            reqjson_wrong_type(e, at, "an object", t);
        } else if (!cJSON_IsString(reqjson_field(t, "type")) ||
                   strcmp(reqjson_field(t, "type")->valuestring, "namespace")) {
            ok = tool_one(p, out, t, at, NULL, e);
        } else {
            const cJSON *ns = want_string(t, "name", at, e);
            const cJSON *in = ns ? reqjson_field(t, "tools") : NULL;
            char param[64];
            snprintf(param, sizeof param, "%s.tools", at);
            if (ns && !cJSON_IsArray(in)) {
                in ? reqjson_wrong_type(e, param, "an array", in) : reqjson_missing(e, param);
            } else if (ns) {
                ok    = true;
                int k = 0;
                const cJSON *t2;
                cJSON_ArrayForEach(t2, in)
                {
                    char at2[64];
                    snprintf(at2, sizeof at2, "%s.tools[%d]", at, k++);
                    ok = cJSON_IsObject(t2) ? tool_one(p, out, t2, at2, ns->valuestring, e)
                                            : reqjson_wrong_type(e, at2, "an object", t2);
                    if (!ok)
                        break;
                }
            }
        }
        if (!ok) {
            cJSON_Delete(out);
            return NULL;
        }
    }
    return out;
}

/*
 * tool_choice -> the chat path's. allowed_tools {mode, tools} becomes its mode, the list
 * kept in p->allowed to narrow the offered tools once all are read.
 */
static cJSON *tool_choice_of(struct rp *p, const cJSON *tc, struct oai_error *e)
{
    if (cJSON_IsString(tc))
        return cJSON_CreateString(tc->valuestring); /* the chat path checks the value */
    if (!cJSON_IsObject(tc))
        return reqjson_wrong_type(e, "tool_choice", "a string or an object", tc), NULL;
    const cJSON *type = want_string(tc, "type", "tool_choice", e);
    if (!type)
        return NULL;
    if (!strcmp(type->valuestring, "allowed_tools")) {
        const cJSON *mode = want_string(tc, "mode", "tool_choice", e);
        const cJSON *list = mode ? reqjson_field(tc, "tools") : NULL;
        if (!mode)
            return NULL;
        if (strcmp(mode->valuestring, "auto") && strcmp(mode->valuestring, "required"))
            return BAD(e, "invalid_value", "tool_choice.mode",
                       "Invalid 'tool_choice.mode': expected 'auto' or 'required'."),
                   NULL;
        if (!cJSON_IsArray(list))
            return list ? reqjson_wrong_type(e, "tool_choice.tools", "an array", list)
                        : reqjson_missing(e, "tool_choice.tools"),
                   NULL;
        p->allowed = list;
        return cJSON_CreateString(mode->valuestring);
    }
    if (strcmp(type->valuestring, "function") && strcmp(type->valuestring, "custom"))
        return BAD(e, "unsupported_value", "tool_choice",
                   "Invalid 'tool_choice': '%.40s' is not supported; expected 'auto', 'none', "
                   "'required', {\"type\": \"function\" or \"custom\", \"name\": ...} or "
                   "allowed_tools (hosted tools do not run here).",
                   type->valuestring),
               NULL;
    const cJSON *name = want_string(tc, "name", "tool_choice", e);
    if (!name)
        return NULL;
    const cJSON *ns = reqjson_field(tc, "namespace");
    char buf[256];
    cJSON *chat = cJSON_CreateObject();
    cJSON_AddStringToObject(chat, "type", "function");
    cJSON_AddStringToObject(
        cJSON_AddObjectToObject(chat, "function"), "name",
        resp_tool_flat_name(cJSON_GetStringValue(ns), name->valuestring, buf, sizeof buf));
    return chat;
}
/* --------------------------------------------------------- input items --- */

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
        return reqjson_missing(e, param), NULL;
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

/*
 * A function_call item (a namespaced function's name joined as tools_of flattens it), or a
 * custom_tool_call item (its free-form input becomes the arguments {"input": ...}, the form
 * the model was offered the tool in): a tool call of the current assistant turn.
 */
static bool item_function_call(struct conv *cv, const cJSON *it, const char *at, bool custom,
                               struct oai_error *e)
{
    const cJSON *call_id = want_string(it, "call_id", at, e);
    const cJSON *name    = call_id ? want_string(it, "name", at, e) : NULL;
    const cJSON *args    = name ? want_string(it, custom ? "input" : "arguments", at, e) : NULL;
    if (!args)
        return false;
    char *text = NULL;
    if (custom) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "input", args->valuestring);
        text = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        if (!text)
            return OOM(e);
    } else {
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
    }
    const cJSON *ns = reqjson_field(it, "namespace");
    if (ns && !cJSON_IsString(ns)) {
        free(text);
        char param[96];
        snprintf(param, sizeof param, "%s.namespace", at);
        return reqjson_wrong_type(e, param, "a string", ns);
    }
    if (!cv->turn)
        cv->turn = assistant_turn(cv);
    cJSON *calls = cJSON_GetObjectItemCaseSensitive(cv->turn, "tool_calls");
    if (!calls)
        calls = cJSON_AddArrayToObject(cv->turn, "tool_calls");
    char buf[256];
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "id", call_id->valuestring);
    cJSON_AddStringToObject(c, "type", "function");
    cJSON *fn = cJSON_AddObjectToObject(c, "function");
    cJSON_AddStringToObject(
        fn, "name",
        resp_tool_flat_name(cJSON_GetStringValue(ns), name->valuestring, buf, sizeof buf));
    cJSON_AddStringToObject(fn, "arguments", text ? text : args->valuestring);
    cJSON_AddItemToArray(calls, c);
    free(text);
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
        return reqjson_missing(e, param);
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

/*
 * A reasoning item: its reasoning_text goes to the next assistant turn; without one, an
 * encrypted_content hearth sealed (include reasoning.encrypted_content) is opened instead.
 * A summary, or another server's encrypted blob, is not the model's own text: not rendered.
 */
static bool item_reasoning(struct conv *cv, const cJSON *it, const char *at, struct oai_error *e)
{
    cv->turn        = NULL;
    const cJSON *cs = reqjson_field(it, "content");
    char param[96];
    snprintf(param, sizeof param, "%s.content", at);
    if (cs && !reqjson_check(&RESP, cs, param, RJ_ARRAY, e))
        return false;
    int j    = 0;
    bool got = false;
    const cJSON *p;
    cJSON_ArrayForEach(p, cs)
    {
        snprintf(param, sizeof param, "%s.content[%d]", at, j++);
        const cJSON *type = cJSON_IsObject(p) ? reqjson_field(p, "type") : NULL;
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "reasoning_text"))
            return BAD(e, "invalid_value", param, "Invalid '%s': expected a reasoning_text part.",
                       param);
        const cJSON *text = want_string(p, "text", param, e);
        if (!text)
            return false;
        if (!append(&cv->reasoning, text->valuestring, strlen(text->valuestring)))
            return OOM(e);
        got = true;
    }
    static const struct reqjson_row row[] = {{"encrypted_content", RJ_STRING, false}};
    if (!reqjson_rows(&RESP, it, at, row, 1, e))
        return false;
    const cJSON *sealed = reqjson_field(it, "encrypted_content");
    char *text          = !got && sealed ? resp_open_reasoning(sealed->valuestring) : NULL;
    bool ok             = !text || append(&cv->reasoning, text, strlen(text));
    free(text);
    return ok || OOM(e);
}

/* Item types the API defines for what hosted tools did (nothing here runs them): skipped. */
static bool hosted_item(const char *t)
{
    static const char *const known[] = {
        "web_search_call",
        "file_search_call",
        "code_interpreter_call",
        "image_generation_call",
        "local_shell_call",
        "local_shell_call_output",
        "shell_call",
        "shell_call_output",
        "apply_patch_call",
        "apply_patch_call_output",
        "mcp_call",
        "mcp_list_tools",
        "mcp_approval_request",
        "mcp_approval_response",
        "computer_call",
        "computer_call_output",
        "tool_search_call",
        "tool_search_output",
        "compaction",
    };
    for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
        if (!strcmp(t, known[k]))
            return true;
    return false;
}

/* input (a string, or a list of items) -> chat messages appended to cv->msgs. */
static bool take_input(struct rp *rp, struct conv *cv, const cJSON *in, struct oai_error *e)
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
        if (!reqjson_check(&RESP, it, at, RJ_OBJECT, e))
            return false;
        static const struct reqjson_row row[] = {{"type", RJ_STRING, false}};
        if (!reqjson_rows(&RESP, it, at, row, 1, e))
            return false;
        const cJSON *type = reqjson_field(it, "type");
        const char *t     = type ? type->valuestring : "message"; /* EasyInputMessage has no type */
        bool ok;
        if (!strcmp(t, "message"))
            ok = item_message(cv, it, at, e);
        else if (!strcmp(t, "function_call") || !strcmp(t, "custom_tool_call"))
            ok = item_function_call(cv, it, at, t[0] == 'c', e);
        else if (!strcmp(t, "function_call_output") || !strcmp(t, "custom_tool_call_output"))
            ok = item_function_output(cv, it, at, e);
        else if (!strcmp(t, "reasoning"))
            ok = item_reasoning(cv, it, at, e);
        else if (!strcmp(t, "item_reference"))
            ok = BAD(e, "unsupported_value", at,
                     "Invalid '%s': item_reference points at a stored item, and this server "
                     "stores nothing; send the item itself.",
                     at);
        else { /* a hosted tool's trace, or an item type hearth does not know: skipped */
            char what[64];
            snprintf(what, sizeof what, ":%.40s", t);
            note(rp, at, what, !hosted_item(t));
            ok = true;
        }
        if (!ok)
            return false;
    }
    if (cJSON_GetArraySize(cv->msgs) == 0)
        return BAD(e, "empty_array", "input",
                   "Invalid 'input': no messages. Expected at least one input item.");
    return true;
}

/* allowed_tools: only the chat tools its list names stay offered (hosted ones name none). */
static void narrow_tools(struct rp *p)
{
    cJSON *tools = cJSON_GetObjectItemCaseSensitive(p->chat, "tools");
    cJSON *t     = tools ? tools->child : NULL;
    while (t) {
        cJSON *next    = t->next;
        const char *fn = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(t, "function"), "name"));
        bool keep      = false;
        const cJSON *a;
        cJSON_ArrayForEach(a, p->allowed)
        {
            const char *n  = cJSON_GetStringValue(reqjson_field(a, "name"));
            const char *ns = cJSON_GetStringValue(reqjson_field(a, "namespace"));
            char buf[256];
            keep |= n && fn && !strcmp(resp_tool_flat_name(ns, n, buf, sizeof buf), fn);
        }
        if (!keep)
            cJSON_Delete(cJSON_DetachItemViaPointer(tools, t));
        t = next;
    }
}

/* ------------------------------------------------------- text, reasoning --- */

bool resp_text_format(const cJSON *f, cJSON **schema, struct oai_error *e)
{
    *schema = NULL;
    if (!reqjson_check(&RESP, f, "text.format", RJ_OBJECT, e))
        return false;
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
        return reqjson_missing(e, "text.format.schema");
    if (!cJSON_IsObject(s))
        return reqjson_wrong_type(e, "text.format.schema", "an object (a JSON schema)", s);
    const cJSON *strict = reqjson_field(f, "strict");
    if (strict && !reqjson_check(&RESP, strict, "text.format.strict", RJ_BOOLEAN, e))
        return false;
    *schema = cJSON_Duplicate(s, true);
    return *schema != NULL || OOM(e);
}

/* text: {format, verbosity}; the schema is kept in p->schema. */
static bool take_text(struct rp *p, const cJSON *text, struct oai_error *e)
{
    if (!reqjson_check(&RESP, text, "text", RJ_OBJECT, e))
        return false;
    const cJSON *k;
    cJSON_ArrayForEach(k, text)
    {
        if (strcmp(k->string, "format") && strcmp(k->string, "verbosity") && !cJSON_IsNull(k))
            note(p, "text.", k->string, true);
    }
    const cJSON *v = reqjson_field(text, "verbosity");
    if (v) {
        if (!cJSON_IsString(v) ||
            (strcmp(v->valuestring, "low") && strcmp(v->valuestring, "medium") &&
             strcmp(v->valuestring, "high")))
            return BAD(e, "invalid_value", "text.verbosity",
                       "Invalid 'text.verbosity': expected 'low', 'medium' or 'high'.");
        note(p, "text.verbosity", NULL, false); /* a hint the model was not trained on here */
    }
    const cJSON *f = reqjson_field(text, "format");
    return !f || resp_text_format(f, &p->schema, e);
}

/*
 * reasoning: {effort, summary}. effort is the chat request's reasoning_effort (none, minimal,
 * low, medium, high, xhigh; none also turns thinking off where the template can). summary is
 * accepted: nothing summarises, the reasoning text itself is returned.
 */
static bool take_reasoning(struct rp *p, const cJSON *r, struct oai_error *e)
{
    if (!reqjson_check(&RESP, r, "reasoning", RJ_OBJECT, e))
        return false;
    const cJSON *k;
    cJSON_ArrayForEach(k, r)
    {
        const char *n = k->string;
        if (cJSON_IsNull(k))
            continue;
        bool known =
            !strcmp(n, "effort") || !strcmp(n, "summary") || !strcmp(n, "generate_summary");
        if (!known) {
            note(p, "reasoning.", n, true);
            continue;
        }
        char param[48];
        snprintf(param, sizeof param, "reasoning.%s", n);
        if (!reqjson_check(&RESP, k, param, RJ_STRING, e))
            return false;
        if (strcmp(n, "effort"))
            note(p, "reasoning.", n, false);
    }
    const cJSON *effort = reqjson_field(r, "effort");
    if (effort) /* the chat path checks it (as reasoning.effort, renamed back) */
        cJSON_AddStringToObject(p->chat, "reasoning_effort", effort->valuestring);
    return true;
}

/* include: what the reply should carry beyond the default; hearth has encrypted reasoning
 * (the reasoning text, sealed, to be sent back) and the output text's logprobs, and nothing
 * of the hosted tools'. */
static bool take_include(struct rp *p, const cJSON *it, struct oai_error *e)
{
    static const char *const known[] = {
        "file_search_call.results",
        "web_search_call.results",
        "web_search_call.action.sources",
        "message.input_image.image_url",
        "computer_call_output.output.image_url",
        "code_interpreter_call.outputs",
    };
    if (!cJSON_IsArray(it))
        return reqjson_wrong_type(e, "include", "an array of strings", it);
    const cJSON *v;
    cJSON_ArrayForEach(v, it)
    {
        if (!cJSON_IsString(v))
            return reqjson_wrong_type(e, "include", "an array of strings", it);
        if (!strcmp(v->valuestring, "reasoning.encrypted_content")) {
            cJSON_DeleteItemFromObjectCaseSensitive(p->echo, RESP_ECHO_SEAL);
            cJSON_AddTrueToObject(p->echo, RESP_ECHO_SEAL);
            continue;
        }
        if (!strcmp(v->valuestring, "message.output_text.logprobs")) {
            p->logprobs = true;
            continue;
        }
        bool k = false;
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
            k |= !strcmp(v->valuestring, known[i]);
        char what[80];
        snprintf(what, sizeof what, ":%.64s", v->valuestring);
        note(p, "include", what, !k);
    }
    return true;
}

/* Copies it into obj under name. */
static void pass(cJSON *obj, const char *name, const cJSON *it)
{
    cJSON_AddItemToObject(obj, name, cJSON_Duplicate(it, true));
}

static bool take_metadata(struct rp *p, const cJSON *it, struct oai_error *e)
{
    const char *n = it->string;
    if (!reqjson_check(&RESP, it, n, RJ_OBJECT, e))
        return false;
    if (cJSON_GetArraySize(it) > 16)
        return BAD(e, "object_above_max_properties", n,
                   "Invalid 'metadata': at most 16 keys, but got %d.", cJSON_GetArraySize(it));
    const cJSON *v;
    cJSON_ArrayForEach(v, it)
    {
        if (!cJSON_IsString(v) || strlen(v->string) > 64 || strlen(v->valuestring) > 512)
            return BAD(e, "invalid_value", n,
                       "Invalid 'metadata.%.64s': expected a string of at most 512 characters "
                       "under a key of at most 64.",
                       v->string);
    }
    pass(p->echo, n, it);
    note(p, n, NULL, false);
    return true;
}

/* ------------------------------------------------------------ the table --- */

#define ANY   RJ_N_TYPES /* any JSON type: the rule's function checks it, or nothing does */
#define ECHO  1u         /* the response object echoes it */
#define NOTE  2u         /* accepted without effect on the reply: noted */
#define NULLS 4u         /* null is read too, not skipped as "not given" */

struct rule {
    const char *name;
    enum reqjson_type type; /* checked first (ANY: not); an integer in [lo, hi] */
    double lo, hi;
    const char *chat; /* copied as it is into the chat body under this name (checked there) */
    unsigned flags;   /* ECHO, NOTE, NULLS */
    bool (*fn)(struct rp *p, const cJSON *it, struct oai_error *e);
};

static bool fn_input(struct rp *p, const cJSON *it, struct oai_error *e)
{
    p->has_input = true;
    return take_input(p, p->cv, it, e);
}

static bool fn_tools(struct rp *p, const cJSON *it, struct oai_error *e)
{
    cJSON *t = tools_of(p, it, e);
    return t && (cJSON_AddItemToObject(p->chat, "tools", t), true);
}

static bool fn_tool_choice(struct rp *p, const cJSON *it, struct oai_error *e)
{
    cJSON *tc = tool_choice_of(p, it, e);
    return tc && (cJSON_AddItemToObject(p->chat, "tool_choice", tc), true);
}

/* the alternatives each output_text token lists */
static bool fn_top_logprobs(struct rp *p, const cJSON *it, struct oai_error *e)
{
    p->top_logprobs = it->valueint;
    p->logprobs |= it->valueint > 0;
    return true;
}

static bool fn_background(struct rp *p, const cJSON *it, struct oai_error *e)
{
    if (cJSON_IsTrue(it))
        return BAD(e, "unsupported_value", it->string,
                   "Unsupported value: 'background' true needs stored responses to poll, and "
                   "this server stores nothing; stream the response instead.");
    return true;
}

/* "auto" would drop the oldest items of a prompt that does not fit; here one that does not fit
 * is refused with both sizes, so a fitting prompt is as asked */
static bool fn_truncation(struct rp *p, const cJSON *it, struct oai_error *e)
{
    if (!cJSON_IsString(it) ||
        (strcmp(it->valuestring, "auto") && strcmp(it->valuestring, "disabled")))
        return BAD(e, "invalid_value", it->string,
                   "Invalid 'truncation': expected 'auto' or 'disabled'.");
    return true;
}

static bool fn_stream_options(struct rp *p, const cJSON *it, struct oai_error *e)
{
    if (!reqjson_check(&RESP, it, it->string, RJ_OBJECT, e))
        return false;
    const cJSON *k;
    cJSON_ArrayForEach(k, it)
    {
        bool known = !strcmp(k->string, "include_obfuscation");
        if (known && !cJSON_IsNull(k) &&
            !reqjson_check(&RESP, k, "stream_options.include_obfuscation", RJ_BOOLEAN, e))
            return false;
        note(p, "stream_options.", k->string, !known); /* events are never padded */
    }
    return true;
}

static bool fn_stateless(struct rp *p, const cJSON *it, struct oai_error *e)
{
    return BAD(e, "unsupported_parameter", it->string,
               "Unsupported parameter: '%s'. This server is stateless and stores no "
               "responses, conversations or prompts; send the whole conversation in "
               "'input'.",
               it->string);
}

/*
 * Every top-level field the API defines: into the chat body, the echo, a note, or a refusal;
 * the rest are accepted and noted as unknown. Those that do not change what is generated
 * (store to moderation) are accepted and noted, those the response object carries echoed.
 */
/* clang-format off */
static const struct rule FIELDS[] = {
    {"model", ANY, 0, 0, "model", 0, NULL},
    {"temperature", ANY, 0, 0, "temperature", ECHO, NULL},
    {"top_p", ANY, 0, 0, "top_p", ECHO, NULL},
    {"stream", ANY, 0, 0, "stream", 0, NULL},
    {"parallel_tool_calls", ANY, 0, 0, "parallel_tool_calls", ECHO, NULL},
    {"max_output_tokens", ANY, 0, 0, "max_tokens", ECHO, NULL},
    {"input", ANY, 0, 0, NULL, NULLS, fn_input},
    /* placed first in the conversation once all fields are read */
    {"instructions", RJ_STRING, 0, 0, NULL, ECHO, NULL},
    {"tools", ANY, 0, 0, NULL, ECHO, fn_tools},
    {"tool_choice", ANY, 0, 0, NULL, ECHO, fn_tool_choice},
    {"text", ANY, 0, 0, NULL, ECHO, take_text},
    {"reasoning", ANY, 0, 0, NULL, ECHO, take_reasoning},
    {"include", ANY, 0, 0, NULL, 0, take_include},
    {"metadata", ANY, 0, 0, NULL, 0, take_metadata},
    /* honoured by the reply: calls past it are dropped */
    {"max_tool_calls", RJ_INTEGER, 0, 1 << 20, NULL, ECHO, NULL},
    {"top_logprobs", RJ_INTEGER, 0, OAI_MAX_TOP_LOGPROBS, NULL, ECHO, fn_top_logprobs},
    {"background", RJ_BOOLEAN, 0, 0, NULL, NOTE, fn_background},
    {"truncation", ANY, 0, 0, NULL, ECHO | NOTE, fn_truncation},
    {"stream_options", ANY, 0, 0, NULL, 0, fn_stream_options},
    {"previous_response_id", ANY, 0, 0, NULL, 0, fn_stateless},
    {"conversation", ANY, 0, 0, NULL, 0, fn_stateless},
    {"prompt", ANY, 0, 0, NULL, 0, fn_stateless},
    {"store", RJ_BOOLEAN, 0, 0, NULL, NOTE, NULL},
    {"safety_identifier", RJ_STRING, 0, 0, NULL, ECHO | NOTE, NULL},
    {"prompt_cache_key", RJ_STRING, 0, 0, NULL, ECHO | NOTE, NULL},
    {"prompt_cache_retention", RJ_STRING, 0, 0, NULL, NOTE, NULL},
    {"service_tier", RJ_STRING, 0, 0, NULL, NOTE, NULL},
    {"user", RJ_STRING, 0, 0, NULL, ECHO | NOTE, NULL},
    {"context_management", ANY, 0, 0, NULL, NOTE, NULL},
    {"moderation", ANY, 0, 0, NULL, NOTE, NULL},
    /* Codex's trace ids; OpenAI's endpoint takes it */
    {"client_metadata", RJ_OBJECT, 0, 0, NULL, NOTE, NULL},
};
/* clang-format on */

static const struct rule *rule_of(const char *name)
{
    for (size_t i = 0; i < sizeof FIELDS / sizeof FIELDS[0]; i++)
        if (!strcmp(FIELDS[i].name, name))
            return &FIELDS[i];
    return NULL;
}

static bool apply(struct rp *p, const struct rule *r, const cJSON *it, struct oai_error *e)
{
    int64_t v = 0;
    bool ok   = r->type == RJ_INTEGER ? reqjson_int(&RESP, it, r->name, r->lo, r->hi, &v, e)
                : r->type == ANY      ? true
                                      : reqjson_check(&RESP, it, r->name, r->type, e);
    if (!ok || (r->fn && !r->fn(p, it, e)))
        return false;
    if (r->chat)
        pass(p->chat, r->chat, it);
    if (r->flags & ECHO)
        pass(p->echo, r->name, it);
    if (r->flags & NOTE)
        note(p, r->name, NULL, false);
    return true;
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
    if (!cJSON_GetObjectItemCaseSensitive(echo, "truncation"))
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
    bool ok        = false;
    struct conv cv = {.msgs = cJSON_CreateArray()};
    struct rp *p   = calloc(1, sizeof *p);
    if (p)
        p->cv = &cv;
    char *text = NULL;
    if (!p || !cv.msgs || !(p->chat = cJSON_CreateObject()) || !(p->echo = cJSON_CreateObject())) {
        OOM(e);
        goto out;
    }
    if (!cJSON_IsObject(root)) {
        BAD(e, NULL, NULL, "The request body must be a JSON object, but it is %s.",
            reqjson_kind(root));
        goto out;
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, root)
    {
        if (cJSON_GetObjectItemCaseSensitive(root, it->string) != it) {
            BAD(e, "invalid_value", it->string, "Invalid request: '%.64s' is given twice.",
                it->string);
            goto out;
        }
        const struct rule *r = rule_of(it->string);
        if (cJSON_IsNull(it) && !(r && (r->flags & NULLS)))
            continue;
        if (!r)
            note(p, it->string, NULL, true); /* a field the API does not define */
        else if (!apply(p, r, it, e))
            goto out;
    }
    if (!p->has_input) {
        reqjson_missing(e, "input");
        goto out;
    }
    if (p->allowed)
        narrow_tools(p);
    const cJSON *ins = reqjson_field(root, "instructions");
    if (ins && ins->valuestring[0]) { /* Codex sends "" for a model it has no prompt for */
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", "system");
        cJSON_AddStringToObject(m, "content", ins->valuestring);
        cJSON_InsertItemInArray(cv.msgs, 0, m);
    }
    cJSON_AddItemToObject(p->chat, "messages", cv.msgs);
    cv.msgs = NULL;
    if (p->schema) { /* llama.cpp's field on the chat path: the reply is held to the schema */
        cJSON_AddItemToObject(p->chat, "json_schema", p->schema);
        p->schema = NULL;
    }
    if (p->logprobs) { /* the chat path's: each token's logprob and its alternatives */
        cJSON_AddTrueToObject(p->chat, "logprobs");
        cJSON_AddNumberToObject(p->chat, "top_logprobs", p->top_logprobs);
    }
    const cJSON *mtc = reqjson_field(root, "max_tool_calls");
    if (cJSON_IsNumber(mtc) && mtc->valueint <= 1) { /* one call at most: a forced call is one */
        cJSON_DeleteItemFromObjectCaseSensitive(p->chat, "parallel_tool_calls");
        cJSON_AddFalseToObject(p->chat, "parallel_tool_calls");
    }
    if (!(text = cJSON_PrintUnformatted(p->chat))) {
        OOM(e);
        goto out;
    }
    if (!oai_parse(OAI_CHAT, text, strlen(text), req, e)) {
        rename_param(e);
        goto out;
    }
    for (int32_t k = 0; k < p->notes.n_ignored; k++)
        oai_ignore(req, p->notes.ignored[k].path, p->notes.ignored[k].unknown);
    req->n_ignored_more += p->notes.n_ignored_more;
    echo_defaults(p->echo);
    req->echo = p->echo;
    p->echo   = NULL;
    ok        = true;
out:
    free(text);
    free(cv.reasoning);
    cJSON_Delete(cv.msgs);
    if (p) {
        cJSON_Delete(p->chat);
        cJSON_Delete(p->echo);
        cJSON_Delete(p->schema);
        free(p);
    }
    cJSON_Delete(root);
    return ok;
}
