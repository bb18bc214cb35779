/*
 * anth_response.c: stage 2 of anthropic.h, scheduler events -> Anthropic's
 * message object and its SSE events (its error bodies are net/errbody.c's).
 *
 * The generated text goes through chatparse as a chat completion's does
 * (tool calls only when tools are offered and tool_choice is not "none",
 * reasoning where the template has markers); its deltas become content
 * blocks: a run of reasoning one thinking block, a run of content one text
 * block, each call one tool_use block, numbered from 0 in order. A stream
 * opens a block (content_block_start) at its first delta and closes it
 * (content_block_stop) when the next block starts or the reply ends.
 *
 * message_start goes out with the job's first event, the first moment the
 * prompt's token counts are known (TEXT events carry them), so its usage is
 * exact; message_delta repeats the whole usage, as Anthropic's does.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/anthropic.h"
#include "chat/chat_template.h"
#include "chat/chatparse.h"

/* ------------------------------------------------------------ SSE bytes --- */

/* The bytes one call sends. */
struct out {
    char *p;
    size_t len;
};

/* Appends "event: name\ndata: <json>\n\n" (data deleted). */
static void event(struct out *o, const char *name, cJSON *data)
{
    char *json = data ? cJSON_PrintUnformatted(data) : NULL;
    cJSON_Delete(data);
    if (json)
        reply_sse_event(&o->p, &o->len, name, json);
    free(json);
}

static char *take(struct out *o, size_t *len)
{
    *len = o->p ? o->len : 0;
    return o->p;
}

/* ------------------------------------------------------------- the reply --- */

enum block { BLOCK_NONE, BLOCK_TEXT, BLOCK_THINKING, BLOCK_TOOL_USE };

struct anth_response {
    bool stream;
    bool started;       /* message_start sent */
    bool parallel;      /* false: only the first tool call is kept (disable_parallel_tool_use) */
    bool omit_thinking; /* thinking.display "omitted": thinking blocks come back empty */
    bool done, has_tool_use;
    char id[64];
    char *model_name;
    int32_t max_tokens; /* as asked (-1: none), to tell max_tokens from a full context */
    char *stop[OAI_MAX_STOP];
    int32_t n_stop;
    struct chatparse *split;     /* NULL: the text is one text block as generated */
    struct chatparse_format fmt; /* what split parses (it points at it) */
    /* the open block: its kind, index, and (non-streaming) its bytes so far */
    enum block open;
    int32_t index; /* of the open block, or of the next one when none is open */
    char *buf;
    size_t len, cap;
    char *tool_id, *tool_name;
    cJSON *content; /* non-streaming: the closed blocks */
    /* from the job's events */
    int32_t n_prompt, n_cached, n_generated, stop_hit;
    enum sched_finish finish;
    char *error; /* the failure's message, or NULL */
};

static void anth_free(void *p)
{
    struct anth_response *r = p;
    if (!r)
        return;
    free(r->model_name);
    for (int32_t i = 0; i < r->n_stop; i++)
        free(r->stop[i]);
    chatparse_free(r->split);
    free(r->buf);
    free(r->tool_id);
    free(r->tool_name);
    cJSON_Delete(r->content);
    free(r->error);
    free(r);
}

static void *anth_create(const struct oai_request *req, int32_t n_choices, const char *id,
                         int64_t created, const char *model_name, const struct hearth_model *model,
                         const struct chat_template *tmpl, bool thinking)
{
    struct anth_response *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->stream        = req->stream;
    r->parallel      = req->parallel_tool_calls;
    r->omit_thinking = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(req->echo, "omit_thinking"));
    r->max_tokens    = req->max_tokens;
    r->model_name    = strdup(model_name ? model_name : "");
    r->content       = cJSON_CreateArray();
    snprintf(r->id, sizeof r->id, "%s", id);
    bool ok = r->model_name && r->content;
    for (int32_t i = 0; ok && i < req->n_stop; i++) {
        ok        = (r->stop[i] = strdup(req->stop[i])) != NULL;
        r->n_stop = i + 1;
    }
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
    if (ok && (o.parse_tools || o.split_reasoning)) {
        r->fmt   = f;
        r->split = chatparse_new(&r->fmt, &o);
        ok       = r->split != NULL;
    }
    if (!ok) {
        anth_free(r);
        return NULL;
    }
    return r;
}

static const char *id_prefix(const struct oai_request *req)
{
    return "msg_";
}

/* Anthropic's usage: the prefix cache's tokens apart, as its prompt cache's are. */
static cJSON *usage_json(const struct anth_response *r)
{
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "input_tokens", r->n_prompt - r->n_cached);
    cJSON_AddNumberToObject(u, "cache_creation_input_tokens", 0);
    cJSON_AddNumberToObject(u, "cache_read_input_tokens", r->n_cached);
    cJSON_AddNumberToObject(u, "output_tokens", r->n_generated);
    return u;
}

static const char *stop_reason(const struct anth_response *r)
{
    if (r->finish == SCHED_FINISH_LENGTH) /* the job's max_tokens is the asked one clamped */
        return r->max_tokens > 0 && r->n_generated < r->max_tokens ? "model_context_window_exceeded"
                                                                   : "max_tokens";
    if (r->has_tool_use)
        return "tool_use";
    if (r->stop_hit > 0 && r->stop_hit <= r->n_stop)
        return "stop_sequence";
    return "end_turn";
}

static void add_stop_sequence(const struct anth_response *r, cJSON *o)
{
    if (r->finish == SCHED_FINISH_STOP && !r->has_tool_use && r->stop_hit > 0 &&
        r->stop_hit <= r->n_stop)
        cJSON_AddStringToObject(o, "stop_sequence", r->stop[r->stop_hit - 1]);
    else
        cJSON_AddNullToObject(o, "stop_sequence");
}

/* The message object; content: the blocks (taken), or NULL for []. */
static cJSON *message(const struct anth_response *r, cJSON *content, bool final)
{
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "id", r->id);
    cJSON_AddStringToObject(m, "type", "message");
    cJSON_AddStringToObject(m, "role", "assistant");
    cJSON_AddStringToObject(m, "model", r->model_name);
    cJSON_AddItemToObject(m, "content", content ? content : cJSON_CreateArray());
    if (final) {
        cJSON_AddStringToObject(m, "stop_reason", stop_reason(r));
        add_stop_sequence(r, m);
    } else {
        cJSON_AddNullToObject(m, "stop_reason");
        cJSON_AddNullToObject(m, "stop_sequence");
    }
    cJSON_AddItemToObject(m, "usage", usage_json(r));
    return m;
}

static void message_start(struct anth_response *r, struct out *o)
{
    if (!r->stream || r->started)
        return;
    r->started = true;
    cJSON *ev  = cJSON_CreateObject();
    cJSON_AddStringToObject(ev, "type", "message_start");
    cJSON_AddItemToObject(ev, "message", message(r, NULL, false));
    event(o, "message_start", ev);
}

/* hearth's call ids ("call_" + 24 characters) in Anthropic's form; a model's own id as is. */
static char *tool_use_id(const char *id)
{
    if (strncmp(id, "call_", 5))
        return strdup(id);
    size_t n = strlen(id) + 2;
    char *s  = malloc(n);
    if (s)
        snprintf(s, n, "toolu_%s", id + 5);
    return s;
}

/* A block's opening form: empty text, thinking or input. */
static cJSON *block_head(const struct anth_response *r, enum block kind)
{
    cJSON *b = cJSON_CreateObject();
    if (kind == BLOCK_TEXT) {
        cJSON_AddStringToObject(b, "type", "text");
        cJSON_AddStringToObject(b, "text", "");
    } else if (kind == BLOCK_THINKING) {
        cJSON_AddStringToObject(b, "type", "thinking");
        cJSON_AddStringToObject(b, "thinking", "");
        cJSON_AddStringToObject(b, "signature", ""); /* hearth signs nothing */
    } else {
        cJSON_AddStringToObject(b, "type", "tool_use");
        cJSON_AddStringToObject(b, "id", r->tool_id ? r->tool_id : "");
        cJSON_AddStringToObject(b, "name", r->tool_name ? r->tool_name : "");
        cJSON_AddItemToObject(b, "input", cJSON_CreateObject());
    }
    return b;
}

static void close_block(struct anth_response *r, struct out *o)
{
    if (r->open == BLOCK_NONE)
        return;
    if (r->stream) {
        cJSON *ev = cJSON_CreateObject();
        cJSON_AddStringToObject(ev, "type", "content_block_stop");
        cJSON_AddNumberToObject(ev, "index", r->index);
        event(o, "content_block_stop", ev);
    } else {
        cJSON *b = block_head(r, r->open);
        if (r->open == BLOCK_TOOL_USE) {
            cJSON *input = r->len ? cJSON_ParseWithLength(r->buf, r->len) : NULL;
            if (cJSON_IsObject(input))
                cJSON_ReplaceItemInObjectCaseSensitive(b, "input", input);
            else /* chatparse gives only calls whose arguments parse as an object */
                cJSON_Delete(input);
        } else {
            cJSON_ReplaceItemInObjectCaseSensitive(b, r->open == BLOCK_TEXT ? "text" : "thinking",
                                                   oai_text_json(r->buf ? r->buf : "", r->len));
        }
        cJSON_AddItemToArray(r->content, b);
    }
    r->open = BLOCK_NONE;
    r->len  = 0;
    r->index++;
}

static void open_block(struct anth_response *r, struct out *o, enum block kind)
{
    close_block(r, o);
    r->open = kind;
    if (!r->stream)
        return;
    cJSON *ev = cJSON_CreateObject();
    cJSON_AddStringToObject(ev, "type", "content_block_start");
    cJSON_AddNumberToObject(ev, "index", r->index);
    cJSON_AddItemToObject(ev, "content_block", block_head(r, kind));
    event(o, "content_block_start", ev);
}

/* n bytes for the open block of kind (opened when another is open). */
static void add(struct anth_response *r, struct out *o, enum block kind, const char *text, size_t n)
{
    if (r->open != kind)
        open_block(r, o, kind);
    if (kind == BLOCK_THINKING && r->omit_thinking)
        return; /* the block is there, its text is not */
    if (!r->stream) {
        if (r->len + n + 1 > r->cap) {
            size_t cap  = (r->len + n + 1) * 2;
            char *grown = realloc(r->buf, cap);
            if (!grown)
                return;
            r->buf = grown;
            r->cap = cap;
        }
        memcpy(r->buf + r->len, text, n);
        r->len += n;
        r->buf[r->len] = 0;
        return;
    }
    cJSON *ev = cJSON_CreateObject();
    cJSON_AddStringToObject(ev, "type", "content_block_delta");
    cJSON_AddNumberToObject(ev, "index", r->index);
    cJSON *d = cJSON_AddObjectToObject(ev, "delta");
    if (kind == BLOCK_TEXT) {
        cJSON_AddStringToObject(d, "type", "text_delta");
        cJSON_AddItemToObject(d, "text", oai_text_json(text, n));
    } else if (kind == BLOCK_THINKING) {
        cJSON_AddStringToObject(d, "type", "thinking_delta");
        cJSON_AddItemToObject(d, "thinking", oai_text_json(text, n));
    } else {
        cJSON_AddStringToObject(d, "type", "input_json_delta");
        cJSON_AddItemToObject(d, "partial_json", oai_text_json(text, n));
    }
    event(o, "content_block_delta", ev);
}

/* The splitter's settled deltas as blocks. */
static void deltas(struct anth_response *r, struct out *o, const struct chatparse_deltas *d)
{
    for (size_t i = 0; i < d->n; i++) {
        const struct chatparse_delta *x = &d->v[i];
        switch (x->kind) {
        case CHATPARSE_REASONING:
            add(r, o, BLOCK_THINKING, x->text, x->text_len);
            break;
        case CHATPARSE_CONTENT:
            add(r, o, BLOCK_TEXT, x->text, x->text_len);
            break;
        case CHATPARSE_TOOL_START:
            if (x->index > 0 && !r->parallel)
                break;
            close_block(r, o);
            free(r->tool_id);
            free(r->tool_name);
            r->tool_id      = tool_use_id(x->id);
            r->tool_name    = strdup(x->name);
            r->has_tool_use = true;
            open_block(r, o, BLOCK_TOOL_USE);
            break;
        case CHATPARSE_TOOL_ARGS:
            if (x->index > 0 && !r->parallel)
                break;
            add(r, o, BLOCK_TOOL_USE, x->text, x->text_len);
            break;
        }
    }
}

static void counts(struct anth_response *r, const struct sched_event *ev)
{
    r->n_prompt    = ev->n_prompt;
    r->n_cached    = ev->n_cached;
    r->n_generated = ev->n_generated;
}

static char *anth_start(void *p, size_t *len)
{
    *len = 0; /* message_start waits for the first event: its usage needs the prompt's counts */
    return NULL;
}

static char *anth_text(void *p, const struct sched_event *ev, size_t *len)
{
    struct anth_response *r = p;
    struct out o            = {0};
    *len                    = 0;
    if (ev->choice != 0 || r->done)
        return NULL;
    counts(r, ev);
    message_start(r, &o);
    if (r->split) {
        struct chatparse_deltas d = {0};
        if (chatparse_feed(r->split, ev->text, ev->text_len, &d) == HEARTH_OK)
            deltas(r, &o, &d);
        chatparse_deltas_free(&d);
    } else if (ev->text_len > 0) {
        add(r, &o, BLOCK_TEXT, ev->text, ev->text_len);
    }
    return take(&o, len);
}

static char *anth_done(void *p, const struct sched_event *ev, size_t *len)
{
    struct anth_response *r = p;
    struct out o            = {0};
    *len                    = 0;
    if (ev->choice != 0 || r->done)
        return NULL;
    r->done = true;
    if (ev->kind == SCHED_EV_ERROR) {
        r->error = malloc(ev->text_len + 1);
        if (r->error) {
            memcpy(r->error, ev->text ? ev->text : "", ev->text_len);
            r->error[ev->text_len] = 0;
        }
        if (!r->stream)
            return NULL;
        struct oai_error e;
        oai_fail(&e, 500, "api_error", NULL, NULL, "%s", r->error ? r->error : "generation failed");
        return anth_error_sse(&e, len);
    }
    counts(r, ev);
    r->finish   = ev->finish;
    r->stop_hit = ev->stop_hit;
    message_start(r, &o);
    if (r->split) {
        struct chatparse_deltas d = {0};
        if (chatparse_finish_cut(r->split, ev->finish == SCHED_FINISH_LENGTH, &d) == HEARTH_OK)
            deltas(r, &o, &d);
        chatparse_deltas_free(&d);
    }
    close_block(r, &o);
    if (!r->stream)
        return NULL;
    cJSON *md = cJSON_CreateObject();
    cJSON_AddStringToObject(md, "type", "message_delta");
    cJSON *delta = cJSON_AddObjectToObject(md, "delta");
    cJSON_AddStringToObject(delta, "stop_reason", stop_reason(r));
    add_stop_sequence(r, delta);
    cJSON_AddItemToObject(md, "usage", usage_json(r));
    event(&o, "message_delta", md);
    cJSON *stop = cJSON_CreateObject();
    cJSON_AddStringToObject(stop, "type", "message_stop");
    event(&o, "message_stop", stop);
    return take(&o, len);
}

static char *anth_finish(void *p, int *status, size_t *len)
{
    struct anth_response *r = p;
    *status                 = 200;
    *len                    = 0;
    if (r->stream)
        return NULL; /* message_stop (or the error event) went out with the job's last event */
    char *s = NULL;
    if (r->error || !r->done) {
        struct oai_error e;
        oai_fail(&e, 500, "api_error", NULL, NULL, "%s",
                 r->error ? r->error : "the generation ended without a result");
        *status = 500;
        s       = anth_error_json(&e);
    } else {
        cJSON *m   = message(r, r->content, true);
        r->content = NULL;
        s          = cJSON_PrintUnformatted(m);
        cJSON_Delete(m);
    }
    *len = s ? strlen(s) : 0;
    return s;
}

const struct reply_ops anth_reply_ops = {
    .id_prefix  = id_prefix,
    .create     = anth_create,
    .start      = anth_start,
    .text       = anth_text,
    .done       = anth_done,
    .finish     = anth_finish,
    .destroy    = anth_free,
    .error_json = anth_error_json,
    .error_sse  = anth_error_sse,
};
