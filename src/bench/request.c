/*
 * request.c: one streamed request of `hearth bench` and what its reply
 * measures. The body is read as it arrives: every server-sent event is
 * parsed as it completes and stamped by the run's clock at the raw byte that
 * ended it, so a token's arrival time is when its event arrived, whatever
 * the TCP segments.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_int.h"
#include "bench/sse.h"
#include "util/clock.h"
#include "util/errfmt.h"

#include <cjson/cJSON.h>

struct req_ctx {
    const struct bench_opts *o;
    struct bench_reply *rep;
    struct sse_parser sse;
    int port;
    uint64_t piece_raw;    /* raw offset of the body piece being fed */
    uint64_t piece_sse;    /* the SSE parser's offset at that piece's start */
    struct strbuf errbody; /* a non-200 answer's body (capped) */
    long *tokens;
};

static double clock_at(const struct req_ctx *c, uint64_t raw)
{
    if (c->o->clock.at)
        return c->o->clock.at(c->o->clock.ctx, c->port, raw);
    return now_s();
}

static void on_connect(void *ctx, int local_port)
{
    struct req_ctx *c = ctx;
    c->port           = local_port;
    c->rep->t_start   = clock_at(c, 0);
    c->rep->t_end     = c->rep->t_start;
}

static void on_head(void *ctx, int status)
{
    ((struct req_ctx *)ctx)->rep->status = status;
}

static const char *str_of(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static long num_of(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? (long)v->valuedouble : 0;
}

static void arrival(struct bench_reply *rep, double t)
{
    if (rep->n_arrivals == rep->cap_arrivals) {
        int cap   = rep->cap_arrivals ? 2 * rep->cap_arrivals : 64;
        double *a = realloc(rep->arrivals, (size_t)cap * sizeof *a);
        size_t *e = a ? realloc(rep->text_ends, (size_t)cap * sizeof *e) : NULL;
        if (!e)
            abort();
        rep->arrivals     = a;
        rep->text_ends    = e;
        rep->cap_arrivals = cap;
    }
    rep->text_ends[rep->n_arrivals]  = rep->text.len;
    rep->arrivals[rep->n_arrivals++] = t;
}

/* One event: a JSON chunk of either API, "[DONE]", or an error. */
static bool on_event(void *ctx, const char *event, const char *data, size_t len, uint64_t end)
{
    struct req_ctx *c       = ctx;
    struct bench_reply *rep = c->rep;
    double t                = clock_at(c, c->piece_raw + (end - c->piece_sse));
    rep->t_end              = t;
    if (rep->done)
        return true; /* anything after [DONE] is ignored, as OpenAI's clients do */
    if (len == 6 && !memcmp(data, "[DONE]", 6)) {
        rep->done = true;
        return true;
    }
    cJSON *j = cJSON_ParseWithLength(data, len);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        rep->stream_error = true;
        set_err(rep->err, sizeof rep->err, "an event that is not a JSON object: %.80s", data);
        return false;
    }
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
    if (e || !strcmp(event, "error")) {
        const char *m     = e ? str_of(e, "message") : NULL;
        rep->stream_error = true;
        set_err(rep->err, sizeof rep->err, "an error inside the stream: %.150s", m ? m : data);
        cJSON_Delete(j);
        return false;
    }
    const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "choices"), 0);
    if (ch) {
        const cJSON *delta = cJSON_GetObjectItemCaseSensitive(ch, "delta");
        const char *text   = delta ? str_of(delta, "content") : str_of(ch, "text");
        const char *reason = delta ? str_of(delta, "reasoning_content") : NULL;
        const cJSON *calls = delta ? cJSON_GetObjectItemCaseSensitive(delta, "tool_calls") : NULL;
        bool content = (text && *text) || (reason && *reason) || cJSON_GetArraySize(calls) > 0;
        if (text)
            strbuf_add(&rep->text, text);
        if (rep->text.oom)
            abort(); /* a bench client out of memory has nothing left to measure */
        if (content) {
            arrival(rep, t);
            if (c->tokens)
                __atomic_add_fetch(c->tokens, 1, __ATOMIC_RELAXED);
        }
        const char *fin = str_of(ch, "finish_reason");
        if (fin)
            snprintf(rep->finish, sizeof rep->finish, "%s", fin);
    }
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(j, "usage");
    if (cJSON_IsObject(u)) {
        rep->has_usage        = true;
        rep->usage_prompt     = num_of(u, "prompt_tokens");
        rep->usage_completion = num_of(u, "completion_tokens");
        rep->usage_cached =
            num_of(cJSON_GetObjectItemCaseSensitive(u, "prompt_tokens_details"), "cached_tokens");
    }
    cJSON_Delete(j);
    return true;
}

static void on_body(void *ctx, const char *data, size_t len, uint64_t raw_end)
{
    struct req_ctx *c = ctx;
    if (c->rep->status != 200) {
        if (c->errbody.len < 4096)
            strbuf_addn(&c->errbody, data, len);
        return;
    }
    if (c->rep->stream_error)
        return;
    c->piece_raw = raw_end - len;
    c->piece_sse = c->sse.fed;
    if (!sse_feed(&c->sse, data, len) && !c->rep->stream_error) {
        c->rep->stream_error = true;
        set_err(c->rep->err, sizeof c->rep->err, "%s", c->sse.err);
    }
}

static char *request_body(const struct bench_opts *o, const char *model, const struct bench_req *r)
{
    cJSON *b = cJSON_CreateObject();
    cJSON_AddStringToObject(b, "model", model);
    if (r->chat) {
        cJSON *msgs = cJSON_AddArrayToObject(b, "messages");
        for (int i = 0; i < r->n_msgs; i++) {
            cJSON *m = cJSON_CreateObject();
            cJSON_AddStringToObject(m, "role", r->msgs[i].role);
            cJSON_AddStringToObject(m, "content", r->msgs[i].content);
            cJSON_AddItemToArray(msgs, m);
        }
    } else {
        cJSON_AddStringToObject(b, "prompt", r->prompt);
    }
    cJSON_AddNumberToObject(b, "max_tokens", o->max_tokens);
    cJSON_AddNumberToObject(b, "temperature", o->temperature);
    cJSON_AddBoolToObject(b, "stream", 1);
    cJSON_AddBoolToObject(cJSON_AddObjectToObject(b, "stream_options"), "include_usage", 1);
    if (o->ignore_eos)
        cJSON_AddBoolToObject(b, "ignore_eos", 1);
    char *s = cJSON_PrintUnformatted(b);
    cJSON_Delete(b);
    if (!s)
        abort();
    return s;
}

/* The message of an OpenAI-style error body, or its start. */
static void http_error_text(struct bench_reply *rep, const struct strbuf *body)
{
    const char *s  = bench_str(body);
    cJSON *j       = s ? cJSON_Parse(s) : NULL;
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
    const char *m  = cJSON_IsString(e) ? e->valuestring : str_of(e, "message");
    set_err(rep->err, sizeof rep->err, "HTTP %d: %.160s", rep->status, m ? m : s ? s : "");
    cJSON_Delete(j);
}

void bench_request(const struct bench_opts *o, const char *model, const struct bench_req *r,
                   struct bench_reply *rep, long *tokens)
{
    *rep             = (struct bench_reply){.t_start = NAN, .t_end = NAN};
    struct req_ctx c = {.o = o, .rep = rep, .tokens = tokens};
    sse_init(&c.sse, &c, on_event);
    char *body               = request_body(o, model, r);
    const char *path         = r->chat ? "/v1/chat/completions" : "/v1/completions";
    struct httpc_request req = {
        .method    = "POST",
        .path      = path,
        .body      = body,
        .body_len  = strlen(body),
        .api_key   = o->api_key,
        .timeout_s = o->timeout_s,
        .stop_fd   = o->stop_fd,
    };
    struct httpc_sink sink = {.ctx = &c, .on_head = on_head, .on_body = on_body};
    struct httpc_result res;
    httpc_exchange(&o->target, &req, &sink, on_connect, &res);
    free(body);
    if (isnan(rep->t_start)) {
        rep->t_start = now_s();
        rep->t_end   = rep->t_start;
    }
    rep->outcome = res.outcome;
    if (res.outcome != HTTPC_OK)
        set_err(rep->err, sizeof rep->err, "%s", res.err);
    else if (rep->status != 200)
        http_error_text(rep, &c.errbody);
    else if (rep->stream_error)
        ; /* err set where it was found */
    else if (!rep->done)
        set_err(rep->err, sizeof rep->err, "the stream ended without data: [DONE]");
    else
        rep->ok = true;
    sse_free(&c.sse);
    strbuf_free(&c.errbody);
}

long bench_reply_tokens(const struct bench_reply *rep)
{
    return rep->has_usage ? rep->usage_completion : rep->n_arrivals;
}

void bench_reply_free(struct bench_reply *rep)
{
    free(rep->arrivals);
    free(rep->text_ends);
    strbuf_free(&rep->text);
    *rep = (struct bench_reply){0};
}
