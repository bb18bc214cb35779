/*
 * oai_response.c: stage 3 of openai.h, scheduler events -> OpenAI's response
 * objects.
 *
 * Shapes follow api.openai.com as of 2025: chat.completion,
 * chat.completion.chunk (first chunk of a choice carries delta.role, the
 * last an empty delta and finish_reason, a final usage chunk with empty
 * choices when stream_options.include_usage), text_completion for both
 * plain and streamed completions.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/openai.h"
#include "serve/reply.h"
#include "chat/chat_template.h"
#include "chat/chatparse.h"
#include "util/utf8.h"

/* ------------------------------------------------------------ responses --- */

struct oai_choice {
    char *text; /* accumulated (non-streaming); content only when split is on */
    size_t len, cap;
    struct chatparse *split;   /* reasoning and tool calls split off, or NULL */
    struct chatparse_deltas d; /* non-streaming: every delta of the choice */
    size_t offset;             /* bytes of text produced so far (completions' text_offset) */
    cJSON *logprobs; /* non-streaming: chat: content[]; completions: the logprobs object */
    bool done;
    const char *finish; /* "stop", "length", NULL while running */
    int32_t n_prompt, n_cached, n_generated;
    int32_t n_drafted, n_draft_accepted; /* speculation */
};

struct oai_response {
    enum oai_kind kind;
    bool stream, include_usage, logprobs;
    bool timings_per_token; /* llama-server's: every stream chunk carries "timings" */
    int32_t n_choices, n_per_prompt;
    struct oai_choice *ch; /* [n_choices] */
    char id[64];
    char *model_name;
    int64_t created;
    const struct hearth_model *model;
    char *error; /* first failure's message, or NULL */
    bool parallel_tool_calls;
    struct chatparse_format fmt; /* what the splitters parse (they point at it) */
};

struct oai_response *oai_response_new(const struct oai_request *req, int32_t n_choices,
                                      const char *id, int64_t created, const char *model_name,
                                      const struct hearth_model *model,
                                      const struct chat_template *tmpl, bool thinking)
{
    struct oai_response *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->ch         = calloc((size_t)(n_choices > 0 ? n_choices : 1), sizeof *r->ch);
    r->model_name = strdup(model_name ? model_name : "");
    r->n_choices  = n_choices;
    if (!r->ch || !r->model_name) {
        oai_response_free(r);
        return NULL;
    }
    r->kind                = req->kind;
    r->stream              = req->stream;
    r->include_usage       = req->include_usage;
    r->timings_per_token   = req->timings_per_token;
    r->logprobs            = req->top_logprobs >= 0;
    r->n_per_prompt        = req->n > 0 ? req->n : 1;
    r->created             = created;
    r->model               = model;
    r->parallel_tool_calls = req->parallel_tool_calls;
    snprintf(r->id, sizeof r->id, "%s", id);
    /* Split reasoning and tool calls off the text only where the template has them and the
     * request wants them: a plain chat keeps its text exactly as generated. */
    struct chatparse_format f = {0};
    if (req->kind == OAI_CHAT && tmpl)
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
    };
    if (o.parse_tools || o.split_reasoning) {
        r->fmt = f;
        for (int32_t i = 0; i < n_choices; i++) {
            o.id_seed = (uint64_t)created * 1000003u ^ (uint64_t)i * 0x9e3779b97f4a7c15ull ^
                        (uint64_t)(uintptr_t)r;
            if (!(r->ch[i].split = chatparse_new(&r->fmt, &o))) {
                oai_response_free(r);
                return NULL;
            }
        }
    }
    return r;
}

void oai_response_free(struct oai_response *r)
{
    if (!r)
        return;
    for (int32_t i = 0; r->ch && i < r->n_choices; i++) {
        free(r->ch[i].text);
        cJSON_Delete(r->ch[i].logprobs);
        chatparse_free(r->ch[i].split);
        chatparse_deltas_free(&r->ch[i].d);
    }
    free(r->ch);
    free(r->model_name);
    free(r->error);
    free(r);
}

/* The envelope every object shares: id, object, created, model. */
static cJSON *envelope(const struct oai_response *r, const char *object)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", r->id);
    cJSON_AddStringToObject(o, "object", object);
    cJSON_AddNumberToObject(o, "created", (double)r->created);
    cJSON_AddStringToObject(o, "model", r->model_name);
    cJSON_AddNullToObject(o, "system_fingerprint");
    return o;
}

static const char *chunk_object(const struct oai_response *r)
{
    return r->kind == OAI_CHAT ? "chat.completion.chunk" : "text_completion";
}

/* `data: <json>\n\n` from o (deleted). */
static char *sse(cJSON *o, size_t *len)
{
    char *json = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!json)
        return NULL;
    size_t n  = strlen(json);
    char *out = malloc(n + 9);
    if (out) {
        memcpy(out, "data: ", 6);
        memcpy(out + 6, json, n);
        memcpy(out + 6 + n, "\n\n", 3);
        *len = n + 8;
    }
    free(json);
    return out;
}

static cJSON *usage_json(const struct oai_response *r)
{
    long long p = 0, c = 0, k = 0;
    for (int32_t i = 0; i < r->n_choices; i++) {
        c += r->ch[i].n_generated;
        if (i % r->n_per_prompt == 0) { /* the prompt is counted once, not once per copy */
            p += r->ch[i].n_prompt;
            k += r->ch[i].n_cached;
        }
    }
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "prompt_tokens", (double)p);
    cJSON_AddNumberToObject(u, "completion_tokens", (double)c);
    cJSON_AddNumberToObject(u, "total_tokens", (double)(p + c));
    cJSON *d = cJSON_AddObjectToObject(u, "prompt_tokens_details");
    cJSON_AddNumberToObject(d, "cached_tokens", (double)k);
    return u;
}

/*
 * llama-server's timings extension, the counts only: prompt tokens computed
 * and served from the cache, tokens generated, and speculation's drafted and
 * kept tokens; summed over the choices.
 */
static cJSON *timings_json(const struct oai_response *r)
{
    long long p = 0, k = 0, g = 0, dn = 0, da = 0;
    for (int32_t i = 0; i < r->n_choices; i++) {
        g += r->ch[i].n_generated;
        dn += r->ch[i].n_drafted;
        da += r->ch[i].n_draft_accepted;
        if (i % r->n_per_prompt == 0) {
            p += r->ch[i].n_prompt - r->ch[i].n_cached;
            k += r->ch[i].n_cached;
        }
    }
    cJSON *t = cJSON_CreateObject();
    cJSON_AddNumberToObject(t, "prompt_n", (double)p);
    cJSON_AddNumberToObject(t, "cache_n", (double)k);
    cJSON_AddNumberToObject(t, "predicted_n", (double)g);
    cJSON_AddNumberToObject(t, "draft_n", (double)dn);
    cJSON_AddNumberToObject(t, "draft_n_accepted", (double)da);
    return t;
}

/* The token's text and its bytes as OpenAI shows them. */
static int32_t piece(const struct oai_response *r, hearth_token tok, char *buf, size_t cap)
{
    if (!r->model) { /* no vocabulary (tests): the id in angle brackets */
        snprintf(buf, cap, "<%d>", tok);
        return (int32_t)strlen(buf);
    }
    size_t n = hearth_token_to_piece(r->model, tok, buf, cap - 1);
    if (n > cap - 1)
        n = 0;
    buf[n] = 0;
    return (int32_t)n;
}

static cJSON *bytes_json(const char *s, int32_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (int32_t i = 0; i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber((unsigned char)s[i]));
    return a;
}

cJSON *oai_text_json(const char *s, size_t n)
{
    char *t = malloc(n * 3 + 1);
    if (!t)
        return cJSON_CreateString("");
    size_t w = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t len = utf8_decode(s + i, n - i, &cp);
        if (len) {
            memcpy(t + w, s + i, len);
            w += len;
            i += len;
        } else { /* U+FFFD, as Python's bytes.decode(errors="replace") writes */
            memcpy(t + w, "\xef\xbf\xbd", 3);
            w += 3;
            i++;
        }
    }
    t[w]     = 0;
    cJSON *j = cJSON_CreateString(t);
    free(t);
    return j;
}

/* Chat: one entry of logprobs.content. */
static cJSON *chat_logprob_entry(const struct oai_response *r, const struct sched_event *ev)
{
    char buf[256];
    int32_t n = piece(r, ev->logprob->token, buf, sizeof buf);
    cJSON *o  = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "token", oai_text_json(buf, n));
    cJSON_AddNumberToObject(o, "logprob", ev->logprob->logprob);
    cJSON_AddItemToObject(o, "bytes", bytes_json(buf, n));
    cJSON *top = cJSON_AddArrayToObject(o, "top_logprobs");
    for (int32_t i = 0; i < ev->n_top; i++) {
        int32_t m = piece(r, ev->top[i].token, buf, sizeof buf);
        cJSON *t  = cJSON_CreateObject();
        cJSON_AddItemToObject(t, "token", oai_text_json(buf, m));
        cJSON_AddNumberToObject(t, "logprob", ev->top[i].logprob);
        cJSON_AddItemToObject(t, "bytes", bytes_json(buf, m));
        cJSON_AddItemToArray(top, t);
    }
    return o;
}

/* Completions: appends one token to a {tokens, token_logprobs, top_logprobs, text_offset} object.
 */
static void completion_logprob_add(const struct oai_response *r, cJSON *lp,
                                   const struct sched_event *ev, size_t offset)
{
    char buf[256];
    int32_t n = piece(r, ev->logprob->token, buf, sizeof buf);
    cJSON_AddItemToArray(cJSON_GetObjectItem(lp, "tokens"), oai_text_json(buf, n));
    cJSON_AddItemToArray(cJSON_GetObjectItem(lp, "token_logprobs"),
                         cJSON_CreateNumber(ev->logprob->logprob));
    cJSON *top = cJSON_CreateObject();
    for (int32_t i = 0; i < ev->n_top; i++) {
        int32_t m = piece(r, ev->top[i].token, buf, sizeof buf);
        cJSON *k  = oai_text_json(buf, m);
        /* two tokens with the same text: keep the first (the likelier) */
        if (!cJSON_GetObjectItemCaseSensitive(top, k->valuestring))
            cJSON_AddNumberToObject(top, k->valuestring, ev->top[i].logprob);
        cJSON_Delete(k);
    }
    cJSON_AddItemToArray(cJSON_GetObjectItem(lp, "top_logprobs"), top);
    cJSON_AddItemToArray(cJSON_GetObjectItem(lp, "text_offset"),
                         cJSON_CreateNumber((double)offset));
}

static cJSON *completion_logprobs_new(void)
{
    cJSON *lp = cJSON_CreateObject();
    cJSON_AddArrayToObject(lp, "tokens");
    cJSON_AddArrayToObject(lp, "token_logprobs");
    cJSON_AddArrayToObject(lp, "top_logprobs");
    cJSON_AddArrayToObject(lp, "text_offset");
    return lp;
}

static bool choice_ok(const struct oai_response *r, int32_t i)
{
    return i >= 0 && i < r->n_choices;
}

/* A streaming chunk with one choice; the caller fills delta/text. */
static cJSON *chunk_new(const struct oai_response *r, int32_t index, cJSON **choice)
{
    cJSON *o  = envelope(r, chunk_object(r));
    cJSON *cs = cJSON_AddArrayToObject(o, "choices");
    *choice   = cJSON_CreateObject();
    cJSON_AddNumberToObject(*choice, "index", index);
    cJSON_AddItemToArray(cs, *choice);
    if (r->timings_per_token)
        cJSON_AddItemToObject(o, "timings", timings_json(r));
    return o;
}

static void chunk_usage_null(const struct oai_response *r, cJSON *o)
{
    if (r->include_usage)
        cJSON_AddNullToObject(o, "usage");
}

char *oai_response_start(struct oai_response *r, size_t *len)
{
    *len = 0;
    if (!r->stream || r->kind != OAI_CHAT)
        return NULL;
    size_t total = 0, cap = 0;
    char *all = NULL;
    for (int32_t i = 0; i < r->n_choices; i++) {
        cJSON *c;
        cJSON *o     = chunk_new(r, i, &c);
        cJSON *delta = cJSON_AddObjectToObject(c, "delta");
        cJSON_AddStringToObject(delta, "role", "assistant");
        cJSON_AddStringToObject(delta, "content", "");
        cJSON_AddNullToObject(c, "logprobs");
        cJSON_AddNullToObject(c, "finish_reason");
        chunk_usage_null(r, o);
        size_t n = 0;
        char *s  = sse(o, &n);
        if (!s)
            continue;
        if (total + n + 1 > cap) {
            cap         = (total + n + 1) * 2;
            char *grown = realloc(all, cap);
            if (!grown) {
                free(s);
                break;
            }
            all = grown;
        }
        memcpy(all + total, s, n + 1);
        total += n;
        free(s);
    }
    *len = total;
    return all;
}

/* Appends n bytes to a choice's text. */
static bool choice_append(struct oai_choice *ch, const char *text, size_t n)
{
    if (ch->len + n + 1 > ch->cap) {
        size_t cap = (ch->len + n + 1) * 2;
        char *t    = realloc(ch->text, cap);
        if (!t)
            return false;
        ch->text = t;
        ch->cap  = cap;
    }
    memcpy(ch->text + ch->len, text, n);
    ch->len += n;
    ch->text[ch->len] = 0;
    return true;
}

/* Concatenates SSE events: out grows by add (taken). */
static void cat(char **out, size_t *len, char *add, size_t add_len)
{
    if (!add)
        return;
    char *grown = realloc(*out, *len + add_len + 1);
    if (grown) {
        memcpy(grown + *len, add, add_len + 1);
        *out = grown;
        *len += add_len;
    }
    free(add);
}

/* A streamed chat chunk for one delta of the splitter (lp: the logprobs object or NULL). */
static char *delta_chunk(const struct oai_response *r, int32_t index,
                         const struct chatparse_delta *d, cJSON *lp, size_t *len)
{
    cJSON *c;
    cJSON *o     = chunk_new(r, index, &c);
    cJSON *delta = cJSON_AddObjectToObject(c, "delta");
    if (d && d->kind == CHATPARSE_REASONING) {
        cJSON_AddItemToObject(delta, "reasoning_content", oai_text_json(d->text, d->text_len));
    } else if (d && d->kind == CHATPARSE_CONTENT) {
        cJSON_AddItemToObject(delta, "content", oai_text_json(d->text, d->text_len));
    } else if (d) {
        cJSON *calls = cJSON_AddArrayToObject(delta, "tool_calls");
        cJSON *call  = cJSON_CreateObject();
        cJSON_AddItemToArray(calls, call);
        cJSON_AddNumberToObject(call, "index", d->index);
        if (d->kind == CHATPARSE_TOOL_START) {
            cJSON_AddStringToObject(call, "id", d->id);
            cJSON_AddStringToObject(call, "type", "function");
        }
        cJSON *fn = cJSON_AddObjectToObject(call, "function");
        if (d->kind == CHATPARSE_TOOL_START) {
            cJSON_AddStringToObject(fn, "name", d->name);
            cJSON_AddStringToObject(fn, "arguments", "");
        } else {
            cJSON_AddItemToObject(fn, "arguments", oai_text_json(d->text, d->text_len));
        }
    }
    if (lp)
        cJSON_AddItemToObject(c, "logprobs", lp);
    else
        cJSON_AddNullToObject(c, "logprobs");
    cJSON_AddNullToObject(c, "finish_reason");
    chunk_usage_null(r, o);
    return sse(o, len);
}

/* The chunks for the deltas the splitter settled (consumed from d). */
static char *split_chunks(struct oai_response *r, int32_t index, struct chatparse_deltas *d,
                          cJSON *lp, size_t *len)
{
    char *out = NULL;
    *len      = 0;
    for (size_t i = 0; i < d->n; i++) {
        const struct chatparse_delta *x = &d->v[i];
        if (x->index > 0 && !r->parallel_tool_calls)
            continue; /* parallel_tool_calls false: the first call only */
        size_t n = 0;
        char *s  = delta_chunk(r, index, x, lp, &n);
        lp       = NULL;
        cat(&out, len, s, n);
    }
    if (lp) { /* nothing settled, but the token's logprobs are due now */
        size_t n = 0;
        cat(&out, len, delta_chunk(r, index, NULL, lp, &n), n);
    }
    chatparse_deltas_clear(d);
    return out;
}

char *oai_response_text(struct oai_response *r, const struct sched_event *ev, size_t *len)
{
    *len = 0;
    if (!choice_ok(r, ev->choice))
        return NULL;
    struct oai_choice *ch = &r->ch[ev->choice];
    bool lp               = r->logprobs && ev->logprob;
    size_t offset         = ch->offset;
    ch->offset += ev->text_len;
    if (!r->stream) {
        if (ch->split) {
            if (chatparse_feed(ch->split, ev->text, ev->text_len, &ch->d) != HEARTH_OK)
                return NULL;
        } else if (!choice_append(ch, ev->text, ev->text_len)) {
            return NULL;
        }
        if (lp) {
            if (r->kind == OAI_CHAT) {
                if (!ch->logprobs)
                    ch->logprobs = cJSON_CreateArray();
                cJSON_AddItemToArray(ch->logprobs, chat_logprob_entry(r, ev));
            } else {
                if (!ch->logprobs)
                    ch->logprobs = completion_logprobs_new();
                completion_logprob_add(r, ch->logprobs, ev, offset);
            }
        }
        return NULL;
    }
    if (ch->split) {
        struct chatparse_deltas d = {0};
        if (chatparse_feed(ch->split, ev->text, ev->text_len, &d) != HEARTH_OK) {
            chatparse_deltas_free(&d);
            return NULL;
        }
        cJSON *l = NULL;
        if (lp) {
            l = cJSON_CreateObject();
            cJSON_AddItemToArray(cJSON_AddArrayToObject(l, "content"), chat_logprob_entry(r, ev));
        }
        char *out = split_chunks(r, ev->choice, &d, l, len);
        chatparse_deltas_free(&d);
        return out;
    }
    if (ev->text_len == 0 && !lp)
        return NULL; /* a token held back: nothing to say yet */
    cJSON *c;
    cJSON *o = chunk_new(r, ev->choice, &c);
    cJSON *t = oai_text_json(ev->text, ev->text_len);
    if (r->kind == OAI_CHAT) {
        cJSON *delta = cJSON_AddObjectToObject(c, "delta");
        cJSON_AddItemToObject(delta, "content", t);
        if (lp) {
            cJSON *l       = cJSON_AddObjectToObject(c, "logprobs");
            cJSON *content = cJSON_AddArrayToObject(l, "content");
            cJSON_AddItemToArray(content, chat_logprob_entry(r, ev));
        } else {
            cJSON_AddNullToObject(c, "logprobs");
        }
    } else {
        cJSON_AddItemToObject(c, "text", t);
        if (lp) {
            cJSON *l = completion_logprobs_new();
            completion_logprob_add(r, l, ev, offset);
            cJSON_AddItemToObject(c, "logprobs", l);
        } else {
            cJSON_AddNullToObject(c, "logprobs");
        }
    }
    cJSON_AddNullToObject(c, "finish_reason");
    chunk_usage_null(r, o);
    return sse(o, len);
}

static const char *finish_name(const struct oai_choice *ch, enum sched_finish f)
{
    if (f == SCHED_FINISH_LENGTH)
        return "length";
    return ch->split && chatparse_has_tool_calls(ch->split) ? "tool_calls" : "stop";
}

static struct oai_error server_error(const char *message)
{
    struct oai_error e;
    oai_fail(&e, 500, "server_error", NULL, NULL, "%s", message);
    return e;
}

char *oai_response_done(struct oai_response *r, const struct sched_event *ev, size_t *len)
{
    *len = 0;
    if (!choice_ok(r, ev->choice) || r->ch[ev->choice].done)
        return NULL;
    struct oai_choice *ch = &r->ch[ev->choice];
    ch->done              = true;
    if (ev->kind == SCHED_EV_ERROR) {
        ch->finish = "stop";
        if (!r->error) {
            char *m = malloc(ev->text_len + 1);
            if (m) {
                memcpy(m, ev->text ? ev->text : "", ev->text_len);
                m[ev->text_len] = 0;
            }
            r->error = m;
        }
        if (!r->stream)
            return NULL;
        struct oai_error e = server_error(r->error ? r->error : "generation failed");
        char *json         = oai_error_json(&e);
        if (!json)
            return NULL;
        cJSON *o = cJSON_Parse(json);
        free(json);
        return o ? sse(o, len) : NULL;
    }
    char *out = NULL;
    if (ch->split) {
        struct chatparse_deltas d = {0};
        chatparse_finish_cut(ch->split, ev->finish == SCHED_FINISH_LENGTH, r->stream ? &d : &ch->d);
        if (r->stream)
            out = split_chunks(r, ev->choice, &d, NULL, len);
        chatparse_deltas_free(&d);
    }
    ch->finish           = finish_name(ch, ev->finish);
    ch->n_prompt         = ev->n_prompt;
    ch->n_cached         = ev->n_cached;
    ch->n_generated      = ev->n_generated;
    ch->n_drafted        = ev->n_drafted;
    ch->n_draft_accepted = ev->n_draft_accepted;
    if (!r->stream)
        return NULL;
    cJSON *c;
    cJSON *o = chunk_new(r, ev->choice, &c);
    if (r->kind == OAI_CHAT)
        cJSON_AddObjectToObject(c, "delta");
    else
        cJSON_AddStringToObject(c, "text", "");
    cJSON_AddNullToObject(c, "logprobs");
    cJSON_AddStringToObject(c, "finish_reason", ch->finish);
    chunk_usage_null(r, o);
    size_t n;
    char *last = sse(o, &n);
    cat(&out, len, last, n);
    return out;
}

/* The message of a split choice: content, reasoning_content and tool_calls from its deltas. */
static void split_message(const struct oai_response *r, struct oai_choice *ch, cJSON *m)
{
    size_t n_reason = 0;
    for (size_t i = 0; i < ch->d.n; i++) {
        const struct chatparse_delta *x = &ch->d.v[i];
        if (x->kind == CHATPARSE_CONTENT)
            choice_append(ch, x->text, x->text_len);
        else if (x->kind == CHATPARSE_REASONING)
            n_reason += x->text_len;
    }
    char *reason = malloc(n_reason + 1);
    size_t at    = 0;
    cJSON *calls = cJSON_CreateArray();
    cJSON *args  = NULL;
    for (size_t i = 0; i < ch->d.n; i++) {
        const struct chatparse_delta *x = &ch->d.v[i];
        if (x->kind == CHATPARSE_REASONING && reason) {
            memcpy(reason + at, x->text, x->text_len);
            at += x->text_len;
        }
        if (x->index > 0 && !r->parallel_tool_calls)
            continue;
        if (x->kind == CHATPARSE_TOOL_START) {
            cJSON *call = cJSON_CreateObject();
            cJSON_AddItemToArray(calls, call);
            cJSON_AddStringToObject(call, "id", x->id);
            cJSON_AddStringToObject(call, "type", "function");
            cJSON *fn = cJSON_AddObjectToObject(call, "function");
            cJSON_AddStringToObject(fn, "name", x->name);
            args = cJSON_AddStringToObject(fn, "arguments", "");
        } else if (x->kind == CHATPARSE_TOOL_ARGS && args) {
            size_t old = strlen(args->valuestring);
            char *s    = malloc(old + x->text_len + 1);
            if (s) {
                memcpy(s, args->valuestring, old);
                memcpy(s + old, x->text, x->text_len);
                s[old + x->text_len] = 0;
                cJSON_SetValuestring(args, s);
                free(s);
            }
        }
    }
    bool has_calls = cJSON_GetArraySize(calls) > 0;
    if (ch->len || !has_calls)
        cJSON_AddItemToObject(m, "content", oai_text_json(ch->text ? ch->text : "", ch->len));
    else
        cJSON_AddNullToObject(m, "content");
    if (reason && at) {
        reason[at] = 0;
        cJSON_AddItemToObject(m, "reasoning_content", oai_text_json(reason, at));
    }
    free(reason);
    if (has_calls)
        cJSON_AddItemToObject(m, "tool_calls", calls);
    else
        cJSON_Delete(calls);
}

char *oai_response_finish(struct oai_response *r, int *status, size_t *len)
{
    *len    = 0;
    *status = 200;
    if (r->stream) {
        char *usage = NULL;
        size_t ulen = 0;
        if (r->include_usage) {
            cJSON *o = envelope(r, chunk_object(r));
            cJSON_AddArrayToObject(o, "choices");
            cJSON_AddItemToObject(o, "usage", usage_json(r));
            cJSON_AddItemToObject(o, "timings", timings_json(r));
            usage = sse(o, &ulen);
        }
        static const char done[] = "data: [DONE]\n\n";
        char *out                = malloc(ulen + sizeof done);
        if (out) {
            if (usage)
                memcpy(out, usage, ulen);
            memcpy(out + ulen, done, sizeof done);
            *len = ulen + sizeof done - 1;
        }
        free(usage);
        return out;
    }
    if (r->error) {
        *status            = 500;
        struct oai_error e = server_error(r->error);
        char *s            = oai_error_json(&e);
        *len               = s ? strlen(s) : 0;
        return s;
    }
    cJSON *o  = envelope(r, r->kind == OAI_CHAT ? "chat.completion" : "text_completion");
    cJSON *cs = cJSON_AddArrayToObject(o, "choices");
    for (int32_t i = 0; i < r->n_choices; i++) {
        struct oai_choice *ch = &r->ch[i];
        cJSON *c              = cJSON_CreateObject();
        cJSON_AddNumberToObject(c, "index", i);
        if (r->kind == OAI_CHAT) {
            cJSON *m = cJSON_AddObjectToObject(c, "message");
            cJSON_AddStringToObject(m, "role", "assistant");
            if (ch->split)
                split_message(r, ch, m);
            else
                cJSON_AddItemToObject(m, "content",
                                      oai_text_json(ch->text ? ch->text : "", ch->len));
            cJSON_AddNullToObject(m, "refusal");
        } else {
            cJSON_AddItemToObject(c, "text", oai_text_json(ch->text ? ch->text : "", ch->len));
        }
        if (r->logprobs) {
            cJSON *lp    = ch->logprobs;
            ch->logprobs = NULL;
            if (r->kind == OAI_CHAT) {
                cJSON *l = cJSON_AddObjectToObject(c, "logprobs");
                cJSON_AddItemToObject(l, "content", lp ? lp : cJSON_CreateArray());
            } else {
                cJSON_AddItemToObject(c, "logprobs", lp ? lp : completion_logprobs_new());
            }
        } else {
            cJSON_AddNullToObject(c, "logprobs");
        }
        cJSON_AddStringToObject(c, "finish_reason", ch->finish ? ch->finish : "stop");
        cJSON_AddItemToArray(cs, c);
    }
    cJSON_AddItemToObject(o, "usage", usage_json(r));
    cJSON_AddItemToObject(o, "timings", timings_json(r));
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    *len = s ? strlen(s) : 0;
    return s;
}

/* ---------------------------------------------------------------- ops --- */

static const char *oai_id_prefix(const struct oai_request *req)
{
    return req->kind == OAI_CHAT ? "chatcmpl-" : "cmpl-";
}

static void *oai_create(const struct oai_request *req, int32_t n_choices, const char *id,
                        int64_t created, const char *model_name, const struct hearth_model *model,
                        const struct chat_template *tmpl, bool thinking)
{
    return oai_response_new(req, n_choices, id, created, model_name, model, tmpl, thinking);
}

static char *oai_start(void *r, size_t *len)
{
    return oai_response_start(r, len);
}
static char *oai_text(void *r, const struct sched_event *ev, size_t *len)
{
    return oai_response_text(r, ev, len);
}
static char *oai_done(void *r, const struct sched_event *ev, size_t *len)
{
    return oai_response_done(r, ev, len);
}
static char *oai_finish(void *r, int *status, size_t *len)
{
    return oai_response_finish(r, status, len);
}
static void oai_destroy(void *r)
{
    oai_response_free(r);
}

const struct reply_ops oai_reply_ops = {
    .id_prefix  = oai_id_prefix,
    .create     = oai_create,
    .start      = oai_start,
    .text       = oai_text,
    .done       = oai_done,
    .finish     = oai_finish,
    .destroy    = oai_destroy,
    .error_json = oai_error_json,
    .error_sse  = oai_error_sse,
};
