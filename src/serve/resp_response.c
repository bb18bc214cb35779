/*
 * resp_response.c: stage 2 of responses.h, scheduler events -> a Responses
 * "response" object, or its stream of SSE events.
 *
 * One choice. The generated text is split by chatparse exactly as the chat
 * reply splits it (the template's markers; tools parsed only when offered
 * and tool_choice is not "none"), and the split's deltas drive a list of
 * output items: reasoning (its text as one reasoning_text part, and as
 * encrypted_content when include asked), message (one output_text part),
 * function_call (with its namespace when the tool had one) and
 * custom_tool_call (a custom tool's call: the input is the "input" string
 * of the arguments the model wrote, sent whole when the call ends).
 * Calls past max_tool_calls (or the first, without parallel_tool_calls)
 * are dropped. An item opens when a delta of
 * another kind arrives and closes when the next opens or the generation
 * ends. Streaming and non-streaming share that path; only a stream writes
 * the events:
 *
 *   response.created, response.in_progress,
 *   per item: response.output_item.added,
 *     [response.content_part.added, (output_text|reasoning_text).delta...,
 *      (output_text|reasoning_text).done, response.content_part.done]
 *     or [response.function_call_arguments.delta..., .done]
 *     or [response.custom_tool_call_input.delta, .done],
 *   response.output_item.done,
 *   then response.completed | response.incomplete | response.failed.
 *
 * Every event is `event: TYPE\ndata: JSON\n\n` with a sequence_number from
 * 0; a stream has no "[DONE]" (the API sends none).
 */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/responses.h"
#include "hearth.h"
#include "chat/chat_template.h"
#include "chat/chatparse.h"

enum item_kind { IT_REASONING, IT_MESSAGE, IT_CALL, IT_CUSTOM };

struct item {
    enum item_kind kind;
    char id[80];
    char *call_id, *name; /* IT_CALL, IT_CUSTOM: the tool's own name (its namespace apart) */
    char *ns;             /* the tool's namespace, or NULL */
    char *input;          /* IT_CUSTOM once closed: the free-form input, from the arguments */
    char *sent;           /* IT_CUSTOM streaming: the input sent in deltas so far, or NULL */
    size_t sent_len, sent_cap;
    size_t raw_at;   /* IT_CUSTOM streaming: arguments decoded up to here; 0: not begun */
    bool raw_closed; /* IT_CUSTOM streaming: the input string's closing quote was seen */
    cJSON *logprobs; /* IT_MESSAGE with logprobs: its tokens' entries, or NULL */
    char *text;      /* reasoning, message text or call arguments, NUL-terminated */
    size_t len, cap;
    const char *status; /* "in_progress", "completed", "incomplete" (static) */
};

struct resp_reply {
    bool stream;
    char id[64];
    const char *tail; /* the id after "resp_": item ids share it */
    char *model_name;
    int64_t created;
    cJSON *echo;                 /* the request's echoed fields (owned) */
    struct chatparse *split;     /* NULL: all text is message text */
    struct chatparse_format fmt; /* what split parses (it points here) */
    const cJSON *tools; /* the request's tools as sent (in echo), to tell custom tools apart */
    int32_t max_calls;  /* calls kept: 1 without parallel_tool_calls, max_tool_calls, or all */
    bool seal;          /* reasoning items carry encrypted_content */
    const struct hearth_model *model; /* token texts for logprobs (NULL: "<id>") */
    bool logprobs;                    /* output_text carries each token's logprobs */
    cJSON *pending_lp;  /* the current TEXT event's logprob entry, until a message takes it */
    struct item *items; /* [n_items] */
    int32_t n_items, cap_items;
    bool open;   /* the last item is still open */
    int64_t seq; /* next sequence_number */
    bool done;
    const char *status; /* "in_progress", "completed", "incomplete", "failed" */
    bool length;        /* ended by max_output_tokens (or the context) */
    char *error;        /* the failure's message, or NULL */
    int32_t n_prompt, n_cached, n_generated;
    char *out; /* stream bytes due now */
    size_t out_len;
};

static void reply_free(struct resp_reply *r)
{
    if (!r)
        return;
    for (int32_t i = 0; i < r->n_items; i++) {
        free(r->items[i].text);
        free(r->items[i].call_id);
        free(r->items[i].name);
        free(r->items[i].ns);
        free(r->items[i].input);
        free(r->items[i].sent);
        cJSON_Delete(r->items[i].logprobs);
    }
    cJSON_Delete(r->pending_lp);
    free(r->items);
    chatparse_free(r->split);
    cJSON_Delete(r->echo);
    free(r->model_name);
    free(r->error);
    free(r->out);
    free(r);
}

static void *reply_new(const struct oai_request *req, int32_t n_choices, const char *id,
                       int64_t created, const char *model_name, const struct hearth_model *model,
                       const struct chat_template *tmpl, bool thinking)
{
    struct resp_reply *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    snprintf(r->id, sizeof r->id, "%s", id);
    r->tail       = strncmp(r->id, "resp_", 5) ? r->id : r->id + 5;
    r->stream     = req->stream;
    r->created    = created;
    r->status     = "in_progress";
    r->model_name = strdup(model_name ? model_name : "");
    r->echo       = req->echo ? cJSON_Duplicate(req->echo, true) : cJSON_CreateObject();
    if (!r->model_name || !r->echo) {
        reply_free(r);
        return NULL;
    }
    r->tools          = cJSON_GetObjectItemCaseSensitive(r->echo, "tools");
    r->model          = model;
    r->logprobs       = req->top_logprobs >= 0;
    r->seal           = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r->echo, RESP_ECHO_SEAL));
    const cJSON *most = cJSON_GetObjectItemCaseSensitive(r->echo, "max_tool_calls");
    r->max_calls      = req->parallel_tool_calls ? INT32_MAX : 1;
    if (cJSON_IsNumber(most) && most->valuedouble < r->max_calls)
        r->max_calls = most->valuedouble < 0 ? 0 : (int32_t)most->valuedouble;
    struct chatparse_format f = {0};
    if (tmpl)
        f = *chat_template_format(tmpl);
    struct chatparse_opts o = {
        .parse_tools =
            req->tools && req->tool_choice != OAI_TOOL_NONE && f.tools != CHATPARSE_TOOLS_NONE,
        .split_reasoning    = req->reasoning != OAI_REASONING_NONE && f.think_open,
        .start_in_reasoning = thinking,
        .tools              = req->tools,
        .stream_args        = oai_grammar_holds_calls(req, f.tools) &&
                       (req->stream || req->tool_choice == OAI_TOOL_REQUIRED ||
                        req->tool_choice == OAI_TOOL_NAMED),
        .id_seed = (uint64_t)created * 1000003u ^ (uint64_t)(uintptr_t)r,
    };
    if (o.parse_tools || o.split_reasoning) {
        r->fmt = f;
        if (!(r->split = chatparse_new(&r->fmt, &o))) {
            reply_free(r);
            return NULL;
        }
    }
    return r;
}

/* ------------------------------------------------------------- events --- */

/* Appends `event: TYPE\ndata: JSON\n\n` for o (deleted) to the bytes due, numbering it. */
static void emit(struct resp_reply *r, cJSON *o)
{
    if (!r->stream) {
        cJSON_Delete(o);
        return;
    }
    cJSON_AddNumberToObject(o, "sequence_number", (double)r->seq++);
    char *json       = cJSON_PrintUnformatted(o);
    const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "type"));
    if (json && type)
        reply_sse_event(&r->out, &r->out_len, type, json);
    free(json);
    cJSON_Delete(o);
}

static cJSON *event(const char *type)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", type);
    return o;
}

/* An event about item i: its id and output_index (content_index 0 when part is true). */
static cJSON *item_event(const struct resp_reply *r, const char *type, int32_t i, bool part)
{
    cJSON *o = event(type);
    cJSON_AddStringToObject(o, "item_id", r->items[i].id);
    cJSON_AddNumberToObject(o, "output_index", i);
    if (part)
        cJSON_AddNumberToObject(o, "content_index", 0);
    return o;
}

/* A message item's logprobs so far (a new array). */
static cJSON *item_logprobs(const struct item *it)
{
    return it->logprobs ? cJSON_Duplicate(it->logprobs, true) : cJSON_CreateArray();
}

/* The content part of a reasoning or message item. */
static cJSON *part_json(const struct item *it)
{
    cJSON *p = cJSON_CreateObject();
    if (it->kind == IT_REASONING) {
        cJSON_AddStringToObject(p, "type", "reasoning_text");
    } else {
        cJSON_AddStringToObject(p, "type", "output_text");
        cJSON_AddArrayToObject(p, "annotations");
        cJSON_AddItemToObject(p, "logprobs", item_logprobs(it));
    }
    cJSON_AddItemToObject(p, "text", oai_text_json(it->text ? it->text : "", it->len));
    return p;
}

/* An output item as the response lists it (its parts empty when just opened); seal: a
 * reasoning item carries its text as encrypted_content too. */
static cJSON *item_json(const struct item *it, bool opened, bool seal)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", it->id);
    switch (it->kind) {
    case IT_REASONING:
    case IT_MESSAGE: {
        bool reason = it->kind == IT_REASONING;
        cJSON_AddStringToObject(o, "type", reason ? "reasoning" : "message");
        if (reason)
            cJSON_AddArrayToObject(o, "summary"); /* nothing summarises: the text is below */
        else
            cJSON_AddStringToObject(o, "role", "assistant");
        cJSON *c = cJSON_AddArrayToObject(o, "content");
        if (!opened)
            cJSON_AddItemToArray(c, part_json(it));
        if (reason && seal && !opened) {
            char *sealed = resp_seal_reasoning(it->text ? it->text : "", it->len);
            cJSON_AddStringToObject(o, "encrypted_content", sealed ? sealed : "");
            free(sealed);
        }
        break;
    }
    case IT_CALL:
    case IT_CUSTOM:
        cJSON_AddStringToObject(o, "type",
                                it->kind == IT_CALL ? "function_call" : "custom_tool_call");
        cJSON_AddStringToObject(o, "call_id", it->call_id);
        if (it->ns)
            cJSON_AddStringToObject(o, "namespace", it->ns);
        cJSON_AddStringToObject(o, "name", it->name);
        if (it->kind == IT_CALL)
            cJSON_AddItemToObject(o, "arguments",
                                  oai_text_json(opened || !it->text ? "" : it->text, it->len));
        else
            cJSON_AddItemToObject(o, "input",
                                  oai_text_json(opened || !it->input ? "" : it->input,
                                                opened || !it->input ? 0 : strlen(it->input)));
        break;
    }
    cJSON_AddStringToObject(o, "status", it->status);
    return o;
}

/*
 * Decodes the characters of a JSON string from s[0..len) (just past its opening quote, or
 * where an earlier call stopped) into out (room for 3 x len bytes), *n_out bytes, up to its
 * closing quote (*closed set) or the end; an escape cut in two is left for the next call.
 * Returns the bytes of s consumed. \\u escapes outside ASCII become U+FFFD's bytes: only a
 * custom tool's input, which the client shows, takes this path.
 */
static size_t json_chars(const char *s, size_t len, char *out, size_t *n_out, bool *closed)
{
    size_t i = 0, n = 0;
    while (i < len && s[i] != '"') {
        if (s[i] != '\\') {
            out[n++] = s[i++];
            continue;
        }
        if (i + 1 >= len)
            break;
        const char *esc = s[i + 1] ? strchr("\"\\/bfnrt", s[i + 1]) : NULL;
        if (esc) {
            out[n++] = "\"\\/\b\f\n\r\t"[esc - "\"\\/bfnrt"];
            i += 2;
        } else if (s[i + 1] == 'u') {
            if (i + 5 >= len)
                break;
            unsigned v =
                (unsigned)strtoul((char[5]){s[i + 2], s[i + 3], s[i + 4], s[i + 5], 0}, NULL, 16);
            if (v < 0x80) {
                out[n++] = (char)v;
            } else {
                memcpy(out + n, "\xef\xbf\xbd", 3);
                n += 3;
            }
            i += 6;
        } else {
            break; /* not JSON: what came before stands */
        }
    }
    *closed = i < len && s[i] == '"';
    *n_out  = n;
    return i;
}

/* Where the "input" string's characters start in a custom call's arguments so far (just past
 * its opening quote), or 0 while that is not yet written. */
static size_t input_start(const char *args, size_t len)
{
    size_t i = 0;
    while (i < len && strchr(" \t\r\n", args[i]))
        i++;
    if (i == len || args[i] != '{')
        return 0;
    const char *key = memmem(args + i, len - i, "\"input\"", 7);
    if (!key)
        return 0;
    size_t k = (size_t)(key - args) + 7;
    while (k < len && strchr(" \t\r\n:", args[k]))
        k++;
    return k < len && args[k] == '"' ? k + 1 : 0;
}

/* The input string cut short, decoded (malloc'd). */
static char *cut_string(const char *s, size_t len)
{
    char *out = malloc(len * 3 + 1);
    size_t n  = 0;
    bool closed;
    if (!out)
        return NULL;
    json_chars(s, len, out, &n, &closed);
    out[n] = 0;
    return out;
}

/* A custom tool's input from the arguments the model wrote, {"input": "..."} (malloc'd); a
 * call the token limit cut keeps what its input had so far; arguments that are neither, as
 * they are. */
static char *custom_input(const char *args, size_t len)
{
    cJSON *o      = cJSON_ParseWithLength(args, len);
    const char *v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "input"));
    char *in      = v ? strdup(v) : NULL;
    cJSON_Delete(o);
    if (v || o)
        return in ? in : strndup(args, len);
    size_t k = input_start(args, len);
    return k ? cut_string(args + k, len - k) : strndup(args, len);
}

/* Closes the open item with status: its .done events. */
static void close_item(struct resp_reply *r, const char *status)
{
    if (!r->open)
        return;
    r->open         = false;
    int32_t i       = r->n_items - 1;
    struct item *it = &r->items[i];
    it->status      = status;
    const char *s   = it->text ? it->text : "";
    if (it->kind == IT_CUSTOM) {
        it->input       = custom_input(s, it->len);
        const char *inp = it->input ? it->input : "";
        size_t n = strlen(inp), from = 0;
        if (it->sent_len && it->sent_len <= n && !memcmp(inp, it->sent, it->sent_len))
            from = it->sent_len; /* the deltas so far were its start: the rest follows */
        else if (it->sent_len)
            from = n; /* they were not (keys out of order): .done carries the input */
        cJSON *o;
        if (from < n) {
            o = item_event(r, "response.custom_tool_call_input.delta", i, false);
            cJSON_AddItemToObject(o, "delta", oai_text_json(inp + from, n - from));
            emit(r, o);
        }
        o = item_event(r, "response.custom_tool_call_input.done", i, false);
        cJSON_AddItemToObject(o, "input", oai_text_json(inp, strlen(inp)));
        emit(r, o);
    } else if (it->kind == IT_CALL) {
        cJSON *o = item_event(r, "response.function_call_arguments.done", i, false);
        cJSON_AddStringToObject(o, "name", it->name);
        cJSON_AddItemToObject(o, "arguments", oai_text_json(s, it->len));
        emit(r, o);
    } else {
        bool reason = it->kind == IT_REASONING;
        cJSON *o    = item_event(
               r, reason ? "response.reasoning_text.done" : "response.output_text.done", i, true);
        cJSON_AddItemToObject(o, "text", oai_text_json(s, it->len));
        if (!reason)
            cJSON_AddItemToObject(o, "logprobs", item_logprobs(it));
        emit(r, o);
        o = item_event(r, "response.content_part.done", i, true);
        cJSON_AddItemToObject(o, "part", part_json(it));
        emit(r, o);
    }
    cJSON *o = event("response.output_item.done");
    cJSON_AddNumberToObject(o, "output_index", i);
    cJSON_AddItemToObject(o, "item", item_json(it, false, r->seal));
    emit(r, o);
}

/* Opens a new item of kind (closing the open one): its .added events. */
static struct item *open_item(struct resp_reply *r, enum item_kind kind, const char *call_id,
                              const char *name, const char *ns)
{
    close_item(r, "completed");
    if (r->n_items == r->cap_items) {
        int32_t cap        = r->cap_items ? r->cap_items * 2 : 4;
        struct item *grown = realloc(r->items, (size_t)cap * sizeof *grown);
        if (!grown)
            return NULL;
        r->items     = grown;
        r->cap_items = cap;
    }
    int32_t i       = r->n_items;
    struct item *it = &r->items[i];
    memset(it, 0, sizeof *it);
    static const char *const prefix[] = {"rs", "msg", "fc", "ctc"};
    snprintf(it->id, sizeof it->id, "%s_%s%d", prefix[kind], r->tail, i);
    it->kind   = kind;
    it->status = "in_progress";
    if (kind == IT_CALL || kind == IT_CUSTOM) {
        it->call_id = strdup(call_id ? call_id : "");
        it->name    = strdup(name ? name : "");
        it->ns      = ns ? strdup(ns) : NULL;
        if (!it->call_id || !it->name || (ns && !it->ns)) {
            free(it->call_id);
            free(it->name);
            free(it->ns);
            return NULL;
        }
    }
    r->n_items++;
    r->open  = true;
    cJSON *o = event("response.output_item.added");
    cJSON_AddNumberToObject(o, "output_index", i);
    cJSON_AddItemToObject(o, "item", item_json(it, true, false));
    emit(r, o);
    if (kind == IT_REASONING || kind == IT_MESSAGE) {
        o = item_event(r, "response.content_part.added", i, true);
        cJSON_AddItemToObject(o, "part", part_json(it));
        emit(r, o);
    }
    return it;
}

/* The open item when it is of kind, else a new one. */
static struct item *current(struct resp_reply *r, enum item_kind kind)
{
    if (r->open && r->items[r->n_items - 1].kind == kind)
        return &r->items[r->n_items - 1];
    return open_item(r, kind, NULL, NULL, NULL);
}

static bool item_append(struct item *it, const char *s, size_t n)
{
    if (it->len + n + 1 > it->cap) {
        size_t cap = (it->len + n + 1) * 2;
        char *t    = realloc(it->text, cap);
        if (!t)
            return false;
        it->text = t;
        it->cap  = cap;
    }
    memcpy(it->text + it->len, s, n);
    it->len += n;
    it->text[it->len] = 0;
    return true;
}

/* A streaming custom call's arguments grew: the input characters they now complete go out
 * as a custom_tool_call_input.delta (arguments streamed as a grammar holds them come in
 * pieces; whole ones, at once). */
static void custom_progress(struct resp_reply *r, struct item *it)
{
    if (it->raw_closed)
        return;
    if (!it->raw_at && !(it->raw_at = input_start(it->text, it->len)))
        return;
    size_t avail = it->len - it->raw_at, n = 0;
    if (it->sent_len + avail * 3 + 1 > it->sent_cap) {
        size_t cap = (it->sent_len + avail * 3 + 1) * 2;
        char *t    = realloc(it->sent, cap);
        if (!t)
            return;
        it->sent     = t;
        it->sent_cap = cap;
    }
    it->raw_at +=
        json_chars(it->text + it->raw_at, avail, it->sent + it->sent_len, &n, &it->raw_closed);
    if (!n)
        return;
    cJSON *o =
        item_event(r, "response.custom_tool_call_input.delta", (int32_t)(it - r->items), false);
    cJSON_AddItemToObject(o, "delta", oai_text_json(it->sent + it->sent_len, n));
    emit(r, o);
    it->sent_len += n;
}

/* One delta of the split: into the items, and its event. */
static void on_delta(struct resp_reply *r, enum chatparse_delta_kind kind, int32_t index,
                     const char *text, size_t len, const char *id, const char *name)
{
    if (kind == CHATPARSE_TOOL_START || kind == CHATPARSE_TOOL_ARGS) {
        if (index >= r->max_calls)
            return; /* parallel_tool_calls false or max_tool_calls: the first calls only */
        if (kind == CHATPARSE_TOOL_START) { /* a custom or namespaced tool: its own item */
            const char *ns = NULL, *own = name;
            bool custom = false;
            resp_tool_find(r->tools, name ? name : "", &ns, &own, &custom);
            open_item(r, custom ? IT_CUSTOM : IT_CALL, id, own, ns);
            return;
        }
    }
    enum item_kind ik = kind == CHATPARSE_REASONING ? IT_REASONING
                        : kind == CHATPARSE_CONTENT ? IT_MESSAGE
                                                    : IT_CALL;
    struct item *it = ik == IT_CALL ? (r->open ? &r->items[r->n_items - 1] : NULL) : current(r, ik);
    if (it && ik == IT_CALL && it->kind == IT_CUSTOM) {
        if (item_append(it, text, len) && r->stream)
            custom_progress(r, it);
        return;
    }
    if (!it || it->kind != ik || !item_append(it, text, len))
        return;
    int32_t i = (int32_t)(it - r->items);
    cJSON *o  = item_event(r,
                          ik == IT_CALL        ? "response.function_call_arguments.delta"
                           : ik == IT_REASONING ? "response.reasoning_text.delta"
                                                : "response.output_text.delta",
                           i, ik != IT_CALL);
    cJSON_AddItemToObject(o, "delta", oai_text_json(text, len));
    if (ik == IT_MESSAGE) { /* the token that brought this text, if it is not yet placed */
        cJSON *lp = cJSON_AddArrayToObject(o, "logprobs");
        if (r->pending_lp) {
            cJSON_AddItemToArray(lp, cJSON_Duplicate(r->pending_lp, true));
            if (!it->logprobs)
                it->logprobs = cJSON_CreateArray();
            cJSON_AddItemToArray(it->logprobs, r->pending_lp);
            r->pending_lp = NULL;
        }
    }
    emit(r, o);
}

static void on_deltas(struct resp_reply *r, const struct chatparse_deltas *d)
{
    for (size_t k = 0; k < d->n; k++) {
        const struct chatparse_delta *x = &d->v[k];
        on_delta(r, x->kind, x->index, x->text, x->text_len, x->id, x->name);
    }
}

/* --------------------------------------------------------- the response --- */

static cJSON *usage_json(const struct resp_reply *r)
{
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "input_tokens", r->n_prompt);
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(u, "input_tokens_details"), "cached_tokens",
                            r->n_cached);
    cJSON_AddNumberToObject(u, "output_tokens", r->n_generated);
    /* 0: tokens are not attributed to reasoning (the split works on text) */
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(u, "output_tokens_details"), "reasoning_tokens",
                            0);
    cJSON_AddNumberToObject(u, "total_tokens", (double)r->n_prompt + r->n_generated);
    return u;
}

/* The response object as it stands. */
static cJSON *response_json(const struct resp_reply *r)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", r->id);
    cJSON_AddStringToObject(o, "object", "response");
    cJSON_AddNumberToObject(o, "created_at", (double)r->created);
    cJSON_AddStringToObject(o, "status", r->status);
    cJSON_AddFalseToObject(o, "background");
    if (r->error) {
        cJSON *e = cJSON_AddObjectToObject(o, "error");
        cJSON_AddStringToObject(e, "code", "server_error");
        cJSON_AddStringToObject(e, "message", r->error);
    } else {
        cJSON_AddNullToObject(o, "error");
    }
    if (r->done && !r->error && r->length)
        cJSON_AddStringToObject(cJSON_AddObjectToObject(o, "incomplete_details"), "reason",
                                "max_output_tokens");
    else
        cJSON_AddNullToObject(o, "incomplete_details");
    cJSON_AddStringToObject(o, "model", r->model_name);
    cJSON *out = cJSON_AddArrayToObject(o, "output");
    for (int32_t i = 0; r->done && i < r->n_items; i++)
        cJSON_AddItemToArray(out, item_json(&r->items[i], false, r->seal));
    cJSON_AddNullToObject(o, "previous_response_id");
    const cJSON *it;
    cJSON_ArrayForEach(it, r->echo)
    {
        if (it->string[0] != '_' && !cJSON_GetObjectItemCaseSensitive(o, it->string))
            cJSON_AddItemToObject(o, it->string, cJSON_Duplicate(it, true));
    }
    if (r->done && !r->error)
        cJSON_AddItemToObject(o, "usage", usage_json(r));
    else
        cJSON_AddNullToObject(o, "usage");
    return o;
}

static char *take_out(struct resp_reply *r, size_t *len)
{
    char *s    = r->out;
    *len       = s ? r->out_len : 0;
    r->out     = NULL;
    r->out_len = 0;
    return s;
}

static const char *reply_prefix(const struct oai_request *req)
{
    return "resp_";
}

static char *reply_start(void *rv, size_t *len)
{
    struct resp_reply *r = rv;
    cJSON *o             = event("response.created");
    cJSON_AddItemToObject(o, "response", response_json(r));
    emit(r, o);
    o = event("response.in_progress");
    cJSON_AddItemToObject(o, "response", response_json(r));
    emit(r, o);
    return take_out(r, len);
}

/* A token's text as the logprob entries write it. */
static cJSON *token_json(const struct resp_reply *r, hearth_token tok, cJSON **bytes)
{
    char buf[256];
    size_t n;
    if (!r->model) { /* no vocabulary (tests): the id in angle brackets */
        n = (size_t)snprintf(buf, sizeof buf, "<%d>", tok);
    } else {
        n = hearth_token_to_piece(r->model, tok, buf, sizeof buf - 1);
        if (n > sizeof buf - 1)
            n = 0;
    }
    *bytes = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++)
        cJSON_AddItemToArray(*bytes, cJSON_CreateNumber((unsigned char)buf[i]));
    return oai_text_json(buf, n);
}

/* The logprob entry of a TEXT event: {token, logprob, bytes, top_logprobs}. */
static cJSON *logprob_entry(const struct resp_reply *r, const struct sched_event *ev)
{
    cJSON *bytes, *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "token", token_json(r, ev->logprob->token, &bytes));
    cJSON_AddNumberToObject(o, "logprob", ev->logprob->logprob);
    cJSON_AddItemToObject(o, "bytes", bytes);
    cJSON *top = cJSON_AddArrayToObject(o, "top_logprobs");
    for (int32_t i = 0; i < ev->n_top; i++) {
        cJSON *t = cJSON_CreateObject();
        cJSON_AddItemToObject(t, "token", token_json(r, ev->top[i].token, &bytes));
        cJSON_AddNumberToObject(t, "logprob", ev->top[i].logprob);
        cJSON_AddItemToObject(t, "bytes", bytes);
        cJSON_AddItemToArray(top, t);
    }
    return o;
}

static char *reply_text(void *rv, const struct sched_event *ev, size_t *len)
{
    struct resp_reply *r = rv;
    *len                 = 0;
    if (ev->choice != 0 || r->done)
        return NULL;
    /* a token's logprobs go with the first message text it brings; text held back by the
     * split (a marker's start) and reasoning or call text carry none */
    cJSON_Delete(r->pending_lp);
    r->pending_lp = r->logprobs && ev->logprob ? logprob_entry(r, ev) : NULL;
    if (r->split) {
        struct chatparse_deltas d = {0};
        if (chatparse_feed(r->split, ev->text, ev->text_len, &d) == HEARTH_OK)
            on_deltas(r, &d);
        chatparse_deltas_free(&d);
    } else if (ev->text_len) {
        on_delta(r, CHATPARSE_CONTENT, -1, ev->text, ev->text_len, NULL, NULL);
    }
    return take_out(r, len);
}

static char *reply_done(void *rv, const struct sched_event *ev, size_t *len)
{
    struct resp_reply *r = rv;
    *len                 = 0;
    if (ev->choice != 0 || r->done)
        return NULL;
    if (ev->kind == SCHED_EV_ERROR) {
        r->error = malloc(ev->text_len + 1);
        if (r->error) {
            memcpy(r->error, ev->text ? ev->text : "", ev->text_len);
            r->error[ev->text_len] = 0;
        }
        if (!r->error)
            r->error = strdup("generation failed");
        close_item(r, "incomplete");
        r->done   = true;
        r->status = "failed";
        cJSON *o  = event("response.failed");
        cJSON_AddItemToObject(o, "response", response_json(r));
        emit(r, o);
        return take_out(r, len);
    }
    if (r->split) {
        struct chatparse_deltas d = {0};
        if (chatparse_finish_cut(r->split, ev->finish == SCHED_FINISH_LENGTH, &d) == HEARTH_OK)
            on_deltas(r, &d);
        chatparse_deltas_free(&d);
    }
    if (r->n_items == 0) /* nothing generated: still one (empty) message, as the API answers */
        open_item(r, IT_MESSAGE, NULL, NULL, NULL);
    r->length = ev->finish == SCHED_FINISH_LENGTH;
    close_item(r, r->length ? "incomplete" : "completed");
    r->done        = true;
    r->status      = r->length ? "incomplete" : "completed";
    r->n_prompt    = ev->n_prompt;
    r->n_cached    = ev->n_cached;
    r->n_generated = ev->n_generated;
    cJSON *o       = event(r->length ? "response.incomplete" : "response.completed");
    cJSON_AddItemToObject(o, "response", response_json(r));
    emit(r, o);
    return take_out(r, len);
}

static char *reply_finish(void *rv, int *status, size_t *len)
{
    struct resp_reply *r = rv;
    *status              = 200;
    *len                 = 0;
    if (r->stream)
        return NULL; /* the last event (completed, incomplete, failed) went with done */
    char *s;
    if (r->error) {
        struct oai_error e;
        oai_fail(&e, 500, "server_error", NULL, NULL, "%s", r->error);
        *status = 500;
        s       = oai_error_json(&e);
    } else {
        cJSON *o = response_json(r);
        s        = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
    }
    *len = s ? strlen(s) : 0;
    return s;
}

static void reply_destroy(void *r)
{
    reply_free(r);
}

/*
 * A stream's error outside any response's state (a request refused after the
 * stream began, the server shutting down): the API's `error` event. It knows
 * no sequence, so it carries 0.
 */
static char *reply_error_sse(const struct oai_error *e, size_t *len)
{
    *len     = 0;
    cJSON *o = event("error");
    if (e->code)
        cJSON_AddStringToObject(o, "code", e->code);
    else
        cJSON_AddNullToObject(o, "code");
    cJSON_AddStringToObject(o, "message", e->message);
    if (e->param[0])
        cJSON_AddStringToObject(o, "param", e->param);
    else
        cJSON_AddNullToObject(o, "param");
    cJSON_AddNumberToObject(o, "sequence_number", 0);
    char *json = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    char *out = NULL;
    if (json && !reply_sse_event(&out, len, "error", json))
        *len = 0;
    free(json);
    return out;
}

const struct reply_ops resp_reply_ops = {
    .id_prefix  = reply_prefix,
    .create     = reply_new,
    .start      = reply_start,
    .text       = reply_text,
    .done       = reply_done,
    .finish     = reply_finish,
    .destroy    = reply_destroy,
    .error_json = oai_error_json,
    .error_sse  = reply_error_sse,
};
