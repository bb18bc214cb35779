/*
 * http.c: the event loop of `hearth serve` (see http.h).
 *
 * A generation request's life on the loop thread:
 *   route -> auth -> parse (openai.c) -> jobs -> sched_submit, one per choice
 *   -> struct pending, found again by request id when scheduler events
 *   arrive -> SSE chunks or one JSON body -> freed after the last choice's
 *   DONE. The request is freed only then, even when the client has gone, so
 *   no event ever finds a dangling pointer.
 *
 * A client that hangs up: watched with EV_CLOSED on its socket (EPOLLRDHUP;
 * libevent stops reading a connection while its request is handled, so it
 * would only notice at the next write) and with the connection's close
 * callback. Either way: sched_cancel (the slot frees at the next step), the
 * HTTP side is finished at once, and the pending record stays until the
 * scheduler's DONE events have drained.
 *
 * Bodies: libevent's own limit (evhttp_set_max_body_size) answers with an
 * HTML page, so it is set to twice --max-body as a memory backstop and the
 * JSON 413 is given here for anything over --max-body that it let through.
 */
#include "serve/http.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/thread.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "serve/metrics.h"
#include "serve/openai.h"
#include "util/errfmt.h"

/* HTTP statuses the server sends, with their reason phrases. */
#define HTTP_STATUS_LIST(X)                                                                        \
    X(200, "OK")                                                                                   \
    X(400, "Bad Request")                                                                          \
    X(401, "Unauthorized")                                                                         \
    X(404, "Not Found")                                                                            \
    X(405, "Method Not Allowed")                                                                   \
    X(413, "Payload Too Large")                                                                    \
    X(499, "Client Closed Request")                                                                \
    X(500, "Internal Server Error")                                                                \
    X(503, "Service Unavailable")

static const char *reason(int code)
{
    switch (code) {
#define HTTP_X_CASE(c, text)                                                                       \
    case c:                                                                                        \
        return text;
        HTTP_STATUS_LIST(HTTP_X_CASE)
#undef HTTP_X_CASE
    }
    return "Error";
}

#define SHUTDOWN_GRACE_S 5 /* longest wait for cancelled jobs to drain at shutdown */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------ the state --- */

/* A scheduler event copied for the loop: top[] and the text follow the struct. */
struct qev {
    struct qev *next;
    struct sched_event ev; /* text/logprob/top point into this allocation */
    struct sched_logprob lp;
    double t; /* monotonic arrival */
};

struct server;

/* A generation request in flight. */
struct pending {
    struct server *srv;
    struct pending *next, *prev;
    uint64_t request_id;
    enum metrics_endpoint ep;
    struct evhttp_request *req; /* NULL once the HTTP side is finished */
    struct event *ev_closed;    /* peer-hangup watch, or NULL */
    struct oai_response *resp;
    int32_t n_jobs, n_done; /* jobs submitted; DONE/ERROR events seen */
    bool stream;
    bool gone; /* HTTP side finished early (client gone, shutdown, refusal) */
    double t_start;
    double *t_last; /* [n_jobs] arrival of each choice's last token, 0 = none */
    char id[48];    /* "chatcmpl-..." */
};

struct server {
    const struct http_params *p;
    struct sched_params sp; /* p->sched with n_ctx resolved */
    struct event_base *base;
    struct evhttp *http;
    struct evhttp_bound_socket *bound;
    struct event *ev_wake, *ev_loaded, *ev_sigint, *ev_sigterm, *ev_grace;
    bool early_close; /* the backend supports EV_CLOSED */

    /* written by the loader thread, read by the loop after ev_loaded fires */
    pthread_t loader;
    bool loader_running;
    struct hearth_model *load_model;
    struct sched *load_sched;
    enum hearth_status load_status;
    char load_err[HEARTH_ERR_MAX];

    /* loop thread only */
    bool ready, stopping;
    int exit_code;
    char *fatal; /* message for http_serve's err */
    struct hearth_model *model;
    struct sched *sched;
    enum chat_family family;
    struct pending *pending;
    uint64_t next_request_id, next_job_id;
    uint32_t id_salt;
    struct metrics metrics;

    /* the scheduler -> loop queue */
    pthread_mutex_t qmu;
    struct qev *qhead, **qtail;
};

/* ------------------------------------------------------------- replies --- */

static void reply(struct server *s, struct evhttp_request *req, enum metrics_endpoint ep,
                  int status, const char *content_type, const char *body, size_t len)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Content-Type", content_type);
    struct evbuffer *b = evbuffer_new();
    if (b && len)
        evbuffer_add(b, body, len);
    evhttp_send_reply(req, status, reason(status), b);
    if (b)
        evbuffer_free(b);
    metrics_count_request(&s->metrics, ep, status);
}

static void reply_json(struct server *s, struct evhttp_request *req, enum metrics_endpoint ep,
                       int status, const char *json)
{
    if (!json) {
        static const char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":"
                                  "\"server_error\",\"param\":null,\"code\":null}}";
        reply(s, req, ep, 500, "application/json", oom, sizeof oom - 1);
        return;
    }
    reply(s, req, ep, status, "application/json", json, strlen(json));
}

static void reply_error(struct server *s, struct evhttp_request *req, enum metrics_endpoint ep,
                        const struct oai_error *e)
{
    char *json = oai_error_json(e);
    reply_json(s, req, ep, e->status, json);
    free(json);
}

/* An error with the given status; the message is formatted. */
#if defined(__GNUC__)
__attribute__((format(printf, 7, 8)))
#endif
static void
reply_fail(struct server *s, struct evhttp_request *req, enum metrics_endpoint ep, int status,
           const char *type, const char *code, const char *fmt, ...)
{
    struct oai_error e = {.status = status, .type = type, .code = code};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e.message, sizeof e.message, fmt, ap);
    va_end(ap);
    reply_error(s, req, ep, &e);
}

static void send_chunk(struct evhttp_request *req, const char *data, size_t len)
{
    if (!req || !data || !len)
        return;
    struct evbuffer *b = evbuffer_new();
    if (!b)
        return;
    evbuffer_add(b, data, len);
    evhttp_send_reply_chunk(req, b);
    evbuffer_free(b);
}

/* ------------------------------------------------------------- pending --- */

static struct pending *pending_find(struct server *s, uint64_t request_id)
{
    for (struct pending *p = s->pending; p; p = p->next)
        if (p->request_id == request_id)
            return p;
    return NULL;
}

static void pending_unlink_free(struct pending *p)
{
    struct server *s = p->srv;
    if (p->prev)
        p->prev->next = p->next;
    else
        s->pending = p->next;
    if (p->next)
        p->next->prev = p->prev;
    oai_response_free(p->resp);
    free(p->t_last);
    free(p);
    if (s->stopping && !s->pending) {
        /* the last replies' final chunks are queued, not yet written: let the loop flush
         * them before teardown closes the connections (a loopbreak here cut them off) */
        struct timeval tv = {0, 200 * 1000};
        event_base_loopexit(s->base, &tv);
    }
}

/*
 * Finishes the HTTP side of p: stops watching the socket, forgets the
 * connection's close callback, and ends the reply (a stream's last chunk;
 * for a plain request, status with body). Afterwards p->req is NULL.
 */
static void release_http(struct pending *p, int status, const char *body, size_t len)
{
    if (p->ev_closed) {
        event_free(p->ev_closed);
        p->ev_closed = NULL;
    }
    struct evhttp_request *req = p->req;
    if (!req)
        return;
    p->req                          = NULL;
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    if (evcon)
        evhttp_connection_set_closecb(evcon, NULL, NULL);
    if (p->stream) {
        send_chunk(req, body, len);
        evhttp_send_reply_end(req); /* frees req when the connection is already gone */
    } else {
        reply(p->srv, req, p->ep, status, "application/json", body, len);
    }
}

/* The client is gone (or the server is stopping): cancel the jobs, end the HTTP side now. */
static void abandon(struct pending *p, int status, const char *body, size_t len)
{
    if (p->gone)
        return;
    p->gone = true;
    if (p->srv->sched)
        sched_cancel(p->srv->sched, p->request_id);
    release_http(p, status, body, len);
}

static void on_peer_closed(evutil_socket_t fd, short what, void *arg)
{
    struct pending *p = arg;
    if (!(what & EV_CLOSED)) { /* EV_READ fallback: data (a pipelined request) is not a hangup */
        char c;
        ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)))
            return; /* one-shot: stop watching; a write error will still be seen */
    }
    abandon(p, 499, NULL, 0);
}

/* The connection's close callback: runs inside libevent's connection teardown. */
static void on_conn_close(struct evhttp_connection *evcon, void *arg)
{
    struct pending *p = arg;
    evhttp_connection_set_closecb(evcon, NULL, NULL);
    if (p->ev_closed) {
        event_free(p->ev_closed);
        p->ev_closed = NULL;
    }
    if (p->req) {
        /* A request whose connection failed was detached from it and is ours to free;
         * one still attached is freed by the teardown that called us. */
        if (!evhttp_request_get_connection(p->req))
            evhttp_request_free(p->req);
        p->req = NULL;
        if (!p->stream)
            metrics_count_request(&p->srv->metrics, p->ep, 499);
    }
    if (!p->gone) {
        p->gone = true;
        if (p->srv->sched)
            sched_cancel(p->srv->sched, p->request_id);
    }
}

/* Every choice is done: the body or the stream's tail, then the record goes. */
static void pending_finish(struct pending *p)
{
    struct server *s = p->srv;
    if (!p->gone && p->req) {
        int status = 200;
        size_t len = 0;
        char *body = oai_response_finish(p->resp, &status, &len);
        if (!body && !p->stream) {
            status = 500;
            body   = strdup("{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\","
                              "\"param\":null,\"code\":null}}");
            len    = body ? strlen(body) : 0;
        }
        release_http(p, status, body, len);
        free(body);
        metrics_observe(&s->metrics, M_REQUEST_DURATION, now_s() - p->t_start);
    }
    release_http(p, 499, NULL, 0); /* no-op unless something above failed */
    pending_unlink_free(p);
}

static void handle_event(struct server *s, struct qev *q)
{
    const struct sched_event *ev = &q->ev;
    struct pending *p            = pending_find(s, ev->request_id);
    if (!p)
        return;
    size_t len = 0;
    char *out  = NULL;
    if (ev->kind == SCHED_EV_TEXT) {
        if (p->gone)
            return;
        if (ev->choice >= 0 && ev->choice < p->n_jobs) {
            double *last = &p->t_last[ev->choice];
            if (*last > 0)
                metrics_observe(&s->metrics, M_ITL, q->t - *last);
            *last = q->t;
        }
        out = oai_response_text(p->resp, ev, &len);
        send_chunk(p->req, out, len);
        free(out);
        return;
    }
    /* DONE or ERROR: the choice's last event */
    p->n_done++;
    if (ev->kind == SCHED_EV_DONE && ev->finish != SCHED_FINISH_CANCELLED && ev->n_generated > 0)
        metrics_observe(&s->metrics, M_TTFT, ev->t_first_token);
    if (ev->kind == SCHED_EV_ERROR)
        fprintf(stderr, "hearth serve: request %s choice %d failed: %.*s\n", p->id, ev->choice,
                (int)ev->text_len, ev->text);
    if (!p->gone) {
        out = oai_response_done(p->resp, ev, &len);
        send_chunk(p->req, out, len);
        free(out);
    }
    if (p->n_done >= p->n_jobs)
        pending_finish(p);
}

/* Scheduler thread: copy the event, queue it, wake the loop. Never blocks for long. */
static void on_sched_event(const struct sched_event *ev, void *user)
{
    struct server *s = user;
    size_t n_top     = ev->top && ev->n_top > 0 ? (size_t)ev->n_top : 0;
    size_t text_len  = ev->text ? ev->text_len : 0;
    struct qev *q    = malloc(sizeof *q + n_top * sizeof(struct sched_logprob) + text_len + 1);
    if (!q) {
        if (ev->kind == SCHED_EV_TEXT)
            return; /* a lost piece of text; the DONE below must not be lost */
        static struct qev spare[4];
        static int next;
        q = &spare[next++ & 3]; /* emergency: no text, but the request still completes */
        memset(q, 0, sizeof *q);
        q->ev          = *ev;
        q->ev.text     = "";
        q->ev.text_len = 0;
        q->ev.logprob  = NULL;
        q->ev.top      = NULL;
        q->ev.n_top    = 0;
        q->t           = -1; /* marks a static node: not freed */
    } else {
        q->ev                   = *ev;
        q->t                    = now_s();
        struct sched_logprob *t = (struct sched_logprob *)(q + 1);
        char *text              = (char *)(t + n_top);
        if (n_top)
            memcpy(t, ev->top, n_top * sizeof *t);
        if (text_len)
            memcpy(text, ev->text, text_len);
        text[text_len] = 0;
        q->ev.text     = text;
        q->ev.text_len = text_len;
        q->ev.top      = n_top ? t : NULL;
        q->ev.n_top    = (int32_t)n_top;
        if (ev->logprob) {
            q->lp         = *ev->logprob;
            q->ev.logprob = &q->lp;
        }
    }
    q->next = NULL;
    pthread_mutex_lock(&s->qmu);
    *s->qtail = q;
    s->qtail  = &q->next;
    pthread_mutex_unlock(&s->qmu);
    event_active(s->ev_wake, EV_READ, 0);
}

static struct qev *queue_take(struct server *s)
{
    pthread_mutex_lock(&s->qmu);
    struct qev *q = s->qhead;
    s->qhead      = NULL;
    s->qtail      = &s->qhead;
    pthread_mutex_unlock(&s->qmu);
    return q;
}

static void queue_free(struct qev *q)
{
    while (q) {
        struct qev *next = q->next;
        if (q->t >= 0)
            free(q);
        q = next;
    }
}

static void on_wake(evutil_socket_t fd, short what, void *arg)
{
    struct server *s = arg;
    for (struct qev *q = queue_take(s); q;) {
        struct qev *next = q->next;
        handle_event(s, q);
        if (q->t >= 0)
            free(q);
        q = next;
    }
}

/* ------------------------------------------------------------ handlers --- */

static bool check_ready(struct server *s, struct evhttp_request *req, enum metrics_endpoint ep)
{
    if (s->stopping) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "5");
        reply_fail(s, req, ep, 503, "server_error", "shutting_down",
                   "The server is shutting down.");
        return false;
    }
    if (!s->ready) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "5");
        reply_fail(s, req, ep, 503, "server_error", "model_loading",
                   "The model is still loading; retry shortly.");
        return false;
    }
    return true;
}

static void generate(struct server *s, struct evhttp_request *req, enum oai_kind kind,
                     enum metrics_endpoint ep)
{
    if (!check_ready(s, req, ep))
        return;
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t len          = evbuffer_get_length(in);
    if (len > s->p->max_body) {
        reply_fail(s, req, ep, 413, "invalid_request_error", "request_too_large",
                   "The request body is %zu bytes; this server takes at most %zu (--max-body).",
                   len, s->p->max_body);
        return;
    }
    const char *body = len ? (const char *)evbuffer_pullup(in, -1) : "";
    struct oai_request r;
    struct oai_error e;
    if (!oai_parse(kind, body ? body : "", len, s->sp.n_ctx, &r, &e)) {
        reply_error(s, req, ep, &e);
        return;
    }
    uint64_t rid = s->next_request_id++;
    bool stream  = r.stream;
    struct sched_job **jobs;
    int32_t n_jobs;
    if (!oai_make_jobs(&r, s->model, s->family, s->sp.n_ctx, rid, &s->next_job_id, &jobs, &n_jobs,
                       &e)) {
        oai_request_free(&r);
        reply_error(s, req, ep, &e);
        return;
    }
    struct pending *p = calloc(1, sizeof *p);
    if (p)
        p->t_last = calloc((size_t)n_jobs, sizeof *p->t_last);
    if (p && p->t_last) {
        snprintf(p->id, sizeof p->id, "%s-%08x%016llx", kind == OAI_CHAT ? "chatcmpl" : "cmpl",
                 s->id_salt, (unsigned long long)rid);
        p->resp = oai_response_new(&r, n_jobs, p->id, (int64_t)time(NULL), s->p->alias, s->model);
    }
    oai_request_free(&r);
    if (!p || !p->t_last || !p->resp) {
        for (int32_t i = 0; i < n_jobs; i++)
            sched_job_free(jobs[i]);
        free(jobs);
        if (p) {
            oai_response_free(p->resp);
            free(p->t_last);
            free(p);
        }
        reply_fail(s, req, ep, 500, "server_error", NULL, "out of memory");
        return;
    }
    p->srv        = s;
    p->request_id = rid;
    p->ep         = ep;
    p->stream     = stream;
    p->t_start    = now_s();
    p->next       = s->pending;
    if (s->pending)
        s->pending->prev = p;
    s->pending = p;

    int32_t submitted     = 0;
    enum hearth_status st = HEARTH_OK;
    for (; submitted < n_jobs; submitted++) {
        st = sched_submit(s->sched, jobs[submitted]); /* takes the job, even on refusal */
        jobs[submitted] = NULL;
        if (st != HEARTH_OK)
            break;
    }
    for (int32_t i = submitted + 1; i < n_jobs; i++)
        sched_job_free(jobs[i]);
    free(jobs);
    p->n_jobs = submitted;
    if (st != HEARTH_OK) {
        /* Refused: the jobs already in are cancelled and their events absorbed. */
        p->gone = true;
        if (submitted > 0)
            sched_cancel(s->sched, rid);
        evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "1");
        if (st == HEARTH_EFULL)
            reply_fail(s, req, ep, 503, "server_error", "server_overloaded",
                       "All %d slots are busy and the queue (--max-queue %d) is full; retry "
                       "later.",
                       s->sp.n_slots, s->sp.max_queue);
        else
            reply_fail(s, req, ep, hearth_status_http(st), "server_error", NULL,
                       "The scheduler refused the request: %s.", hearth_status_str(st));
        if (submitted == 0)
            pending_unlink_free(p);
        return;
    }

    p->req                          = req;
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    evutil_socket_t fd              = -1;
    if (evcon) {
        evhttp_connection_set_closecb(evcon, on_conn_close, p);
        fd = bufferevent_getfd(evhttp_connection_get_bufferevent(evcon));
    }
    if (fd >= 0) {
        p->ev_closed =
            event_new(s->base, fd, s->early_close ? EV_CLOSED : EV_READ, on_peer_closed, p);
        if (p->ev_closed)
            event_add(p->ev_closed, NULL);
    }
    if (p->stream) {
        struct evkeyvalq *h = evhttp_request_get_output_headers(req);
        evhttp_add_header(h, "Content-Type", "text/event-stream");
        evhttp_add_header(h, "Cache-Control", "no-cache");
        evhttp_add_header(h, "X-Accel-Buffering", "no");
        evhttp_send_reply_start(req, 200, "OK");
        metrics_count_request(&s->metrics, ep, 200);
        size_t n  = 0;
        char *out = oai_response_start(p->resp, &n);
        send_chunk(req, out, n);
        free(out);
    }
}

static void h_chat(struct server *s, struct evhttp_request *req)
{
    generate(s, req, OAI_CHAT, EP_CHAT);
}

static void h_completions(struct server *s, struct evhttp_request *req)
{
    generate(s, req, OAI_COMPLETION, EP_COMPLETIONS);
}

static cJSON *model_obj(struct server *s)
{
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "id", s->p->alias);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)time(NULL));
    cJSON_AddStringToObject(m, "owned_by", "hearth");
    return m;
}

static void send_cjson(struct server *s, struct evhttp_request *req, enum metrics_endpoint ep,
                       cJSON *o)
{
    char *json = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    reply_json(s, req, ep, 200, json);
    free(json);
}

static void h_models(struct server *s, struct evhttp_request *req)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON *data = cJSON_AddArrayToObject(o, "data");
    cJSON_AddItemToArray(data, model_obj(s));
    send_cjson(s, req, EP_MODELS, o);
}

static void h_model_one(struct server *s, struct evhttp_request *req, const char *id)
{
    if (strcmp(id, s->p->alias)) {
        struct oai_error e;
        oai_fail(&e, 404, "invalid_request_error", "model_not_found", "model",
                 "The model '%.200s' does not exist; this server serves '%.200s'.", id,
                 s->p->alias);
        reply_error(s, req, EP_MODELS, &e);
        return;
    }
    send_cjson(s, req, EP_MODELS, model_obj(s));
}

static void h_health(struct server *s, struct evhttp_request *req)
{
    if (!check_ready(s, req, EP_HEALTH))
        return;
    static const char ok[] = "{\"status\":\"ok\"}";
    reply(s, req, EP_HEALTH, 200, "application/json", ok, sizeof ok - 1);
}

/* sched_snapshot into stats and a malloc'd slot array (NULL before the model is loaded). */
static struct sched_slot_info *snapshot(struct server *s, struct sched_stats *st, int32_t *n)
{
    memset(st, 0, sizeof *st);
    *n = 0;
    if (!s->sched)
        return NULL;
    int32_t cap                  = s->sp.n_slots > 0 ? s->sp.n_slots : 1;
    struct sched_slot_info *info = calloc((size_t)cap, sizeof *info);
    if (!info)
        return NULL;
    *n = sched_snapshot(s->sched, st, info, cap);
    if (*n > cap)
        *n = cap;
    return info;
}

static void h_metrics(struct server *s, struct evhttp_request *req)
{
    struct sched_stats st;
    int32_t n;
    free(snapshot(s, &st, &n));
    double v[METRIC_COUNT] = {0};
    v[M_PROMPT_TOKENS]     = (double)st.prompt_tokens_total;
    v[M_GENERATED_TOKENS]  = (double)st.generated_tokens_total;
    v[M_PREFIX_HIT_TOKENS] = (double)st.prefix_hit_tokens_total;
    v[M_PREFILL_SECONDS]   = st.prefill_seconds_total;
    v[M_DECODE_SECONDS]    = st.decode_seconds_total;
    double computed        = (double)st.prompt_tokens_total - (double)st.prefix_hit_tokens_total;
    v[M_PREFILL_TPS]       = st.prefill_seconds_total > 0 ? computed / st.prefill_seconds_total : 0;
    v[M_DECODE_TPS]        = st.decode_seconds_total > 0
                                 ? (double)st.generated_tokens_total / st.decode_seconds_total
                                 : 0;
    v[M_SLOTS_BUSY]        = st.slots_busy;
    v[M_SLOTS]             = s->sched ? st.n_slots : s->sp.n_slots;
    v[M_QUEUE_DEPTH]       = st.queue_depth;
    v[M_KV_BLOCKS_USED]    = st.kv_blocks_used;
    v[M_KV_BLOCKS_CACHED]  = st.kv_blocks_cached;
    v[M_KV_BLOCKS_CAPACITY] = st.kv_blocks_total;
    v[M_READY]              = s->ready ? 1 : 0;
    /* this request is counted before rendering so a scrape sees itself */
    metrics_count_request(&s->metrics, EP_METRICS, 200);
    size_t len = 0;
    char *page = metrics_render(&s->metrics, v, &len);
    if (!page) {
        reply_fail(s, req, EP_METRICS, 500, "server_error", NULL, "out of memory");
        return;
    }
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
    struct evbuffer *b = evbuffer_new();
    if (b)
        evbuffer_add(b, page, len);
    evhttp_send_reply(req, 200, "OK", b);
    if (b)
        evbuffer_free(b);
    free(page);
}

static void h_slots(struct server *s, struct evhttp_request *req)
{
    if (!check_ready(s, req, EP_SLOTS))
        return;
    struct sched_stats st;
    int32_t n;
    struct sched_slot_info *info = snapshot(s, &st, &n);
    cJSON *a                     = cJSON_CreateArray();
    for (int32_t i = 0; i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "id", info[i].id);
        cJSON_AddStringToObject(o, "state", info[i].busy ? "busy" : "idle");
        struct pending *p = info[i].busy ? pending_find(s, info[i].request_id) : NULL;
        if (p)
            cJSON_AddStringToObject(o, "request_id", p->id);
        else
            cJSON_AddNullToObject(o, "request_id");
        cJSON_AddNumberToObject(o, "n_ctx", s->sp.n_ctx);
        cJSON_AddNumberToObject(o, "tokens_cached", info[i].n_ctx_used);
        cJSON_AddNumberToObject(o, "n_prompt", info[i].n_prompt);
        cJSON_AddNumberToObject(o, "n_prompt_cached", info[i].n_cached_tokens);
        cJSON_AddNumberToObject(o, "n_generated", info[i].n_generated);
        cJSON_AddItemToArray(a, o);
    }
    free(info);
    send_cjson(s, req, EP_SLOTS, a);
}

/* ------------------------------------------------------------- routing --- */

static const struct route {
    const char *path;
    enum evhttp_cmd_type method;
    const char *allow;
    enum metrics_endpoint ep;
    bool auth;
    void (*fn)(struct server *, struct evhttp_request *);
} routes[] = {
    {"/v1/chat/completions", EVHTTP_REQ_POST, "POST", EP_CHAT, true, h_chat},
    {"/v1/completions", EVHTTP_REQ_POST, "POST", EP_COMPLETIONS, true, h_completions},
    {"/v1/models", EVHTTP_REQ_GET, "GET", EP_MODELS, true, h_models},
    {"/health", EVHTTP_REQ_GET, "GET", EP_HEALTH, false, h_health},
    {"/metrics", EVHTTP_REQ_GET, "GET", EP_METRICS, true, h_metrics},
    {"/slots", EVHTTP_REQ_GET, "GET", EP_SLOTS, true, h_slots},
};

static const char *method_name(enum evhttp_cmd_type m)
{
    switch (m) {
    case EVHTTP_REQ_GET:
        return "GET";
    case EVHTTP_REQ_POST:
        return "POST";
    case EVHTTP_REQ_HEAD:
        return "HEAD";
    case EVHTTP_REQ_PUT:
        return "PUT";
    case EVHTTP_REQ_DELETE:
        return "DELETE";
    case EVHTTP_REQ_OPTIONS:
        return "OPTIONS";
    case EVHTTP_REQ_TRACE:
        return "TRACE";
    case EVHTTP_REQ_CONNECT:
        return "CONNECT";
    case EVHTTP_REQ_PATCH:
        return "PATCH";
    }
    return "?";
}

/* Bearer token check, in time independent of where the strings differ. */
static bool authorized(struct server *s, struct evhttp_request *req)
{
    const char *key = s->p->api_key;
    if (!key || !*key)
        return true;
    const char *h = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7))
        return false;
    h += 7;
    while (*h == ' ')
        h++;
    size_t n = strlen(key), m = strlen(h);
    unsigned diff = n != m;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)key[i] ^ (unsigned char)(i < m ? h[i] : 0);
    return diff == 0;
}

static void on_request(struct evhttp_request *req, void *arg)
{
    struct server *s             = arg;
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path             = uri ? evhttp_uri_get_path(uri) : NULL;
    enum evhttp_cmd_type method  = evhttp_request_get_command(req);
    if (!path || !*path)
        path = "/";
    const struct route *r = NULL;
    const char *model_id  = NULL;
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
        if (!strcmp(path, routes[i].path))
            r = &routes[i];
    if (!r && !strncmp(path, "/v1/models/", 11) && path[11]) {
        r        = &routes[2];
        model_id = path + 11;
    }
    if (!r) {
        reply_fail(s, req, EP_OTHER, 404, "invalid_request_error", "unknown_url",
                   "Invalid URL (%s %.200s): no such endpoint.", method_name(method), path);
        return;
    }
    if (method != r->method) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", r->allow);
        reply_fail(s, req, r->ep, 405, "invalid_request_error", "method_not_allowed",
                   "Method %s is not allowed on %s; use %s.", method_name(method), r->path,
                   r->allow);
        return;
    }
    if (r->auth && !authorized(s, req)) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate", "Bearer");
        reply_fail(s, req, r->ep, 401, "invalid_request_error", "invalid_api_key",
                   "Missing or incorrect API key: send 'Authorization: Bearer KEY' with the key "
                   "given to --api-key.");
        return;
    }
    if (model_id) {
        char *id = evhttp_uridecode(model_id, 0, NULL);
        h_model_one(s, req, id ? id : model_id);
        free(id);
        return;
    }
    r->fn(s, req);
}

/* -------------------------------------------------------- load, signals --- */

static void *loader_main(void *arg)
{
    struct server *s              = arg;
    struct hearth_model_params mp = hearth_model_default_params();
    if (s->sp.n_threads > 0)
        mp.n_threads = s->sp.n_threads;
    struct hearth_model *model = NULL;
    struct sched *sched        = NULL;
    /* Test hook: hold the load back so tests can see /health answer 503 while loading. */
    const char *delay = getenv("HEARTH_SERVE_LOAD_DELAY_MS");
    if (delay && atoi(delay) > 0)
        usleep((useconds_t)atoi(delay) * 1000);
    enum hearth_status st =
        hearth_model_load(s->p->model_path, &mp, &model, s->load_err, sizeof s->load_err);
    if (st == HEARTH_OK) {
        int32_t train = hearth_model_n_ctx_train(model);
        if (s->sp.n_ctx <= 0) /* default: 4096, or the training context when smaller */
            s->sp.n_ctx = train > 0 && train < 4096 ? train : 4096;
        st = sched_start(model, &s->sp, on_sched_event, s, &sched, s->load_err, sizeof s->load_err);
        if (st != HEARTH_OK) {
            hearth_model_free(model);
            model = NULL;
        }
    }
    s->load_model  = model;
    s->load_sched  = sched;
    s->load_status = st;
    event_active(s->ev_loaded, EV_READ, 0);
    return NULL;
}

static void on_loaded(evutil_socket_t fd, short what, void *arg)
{
    struct server *s = arg;
    if (!s->loader_running)
        return;
    pthread_join(s->loader, NULL);
    s->loader_running = false;
    if (s->load_status != HEARTH_OK) {
        s->fatal     = strdup(s->load_err);
        s->exit_code = 1;
        event_base_loopbreak(s->base);
        return;
    }
    s->model = s->load_model;
    s->sched = s->load_sched;
    bool known;
    s->family = oai_model_chat_family(s->model, &known);
    fprintf(stderr,
            "hearth serve: model loaded (%s), %d slots x %d tokens of context, chat template "
            "%s%s\n",
            hearth_model_arch(s->model), s->sp.n_slots, s->sp.n_ctx, chat_family_name(s->family),
            known ? "" : " (fallback: none recognised)");
    s->ready = !s->stopping;
}

static void on_grace_over(evutil_socket_t fd, short what, void *arg)
{
    event_base_loopbreak(((struct server *)arg)->base);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    struct server *s = arg;
    if (s->stopping) { /* a second signal: stop now */
        event_base_loopbreak(s->base);
        return;
    }
    fprintf(stderr, "hearth serve: %s, shutting down\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    s->stopping = true;
    s->ready    = false;
    if (s->bound) {
        evhttp_del_accept_socket(s->http, s->bound);
        s->bound = NULL;
    }
    if (!s->pending || s->loader_running) {
        event_base_loopbreak(s->base);
        return;
    }
    static const char msg[] =
        "{\"error\":{\"message\":\"The server is shutting down.\","
        "\"type\":\"server_error\",\"param\":null,\"code\":\"shutting_down\"}}";
    static const char sse_msg[] = "data: {\"error\":{\"message\":\"The server is shutting down.\","
                                  "\"type\":\"server_error\",\"param\":null,\"code\":"
                                  "\"shutting_down\"}}\n\ndata: [DONE]\n\n";
    for (struct pending *p = s->pending; p; p = p->next) {
        if (p->stream)
            abandon(p, 503, sse_msg, sizeof sse_msg - 1);
        else
            abandon(p, 503, msg, sizeof msg - 1);
    }
    struct timeval tv = {SHUTDOWN_GRACE_S, 0};
    s->ev_grace       = evtimer_new(s->base, on_grace_over, s);
    if (s->ev_grace)
        evtimer_add(s->ev_grace, &tv);
}

/* ----------------------------------------------------------------- serve --- */

static void teardown(struct server *s)
{
    if (s->loader_running) {
        pthread_join(s->loader, NULL);
        s->loader_running = false;
        if (!s->model && !s->sched) {
            s->model = s->load_model;
            s->sched = s->load_sched;
        }
    }
    if (s->sched)
        sched_stop(s->sched); /* may still send events: they land in the queue */
    s->sched = NULL;
    queue_free(queue_take(s));
    while (s->pending) {
        struct pending *p = s->pending;
        if (p->ev_closed) {
            event_free(p->ev_closed);
            p->ev_closed = NULL;
        }
        if (p->req) {
            struct evhttp_connection *evcon = evhttp_request_get_connection(p->req);
            if (evcon)
                evhttp_connection_set_closecb(evcon, NULL, NULL); /* evhttp_free frees it */
            else
                evhttp_request_free(p->req);
            p->req = NULL;
        }
        s->stopping = false; /* no loopbreak from pending_unlink_free */
        pending_unlink_free(p);
    }
    if (s->http)
        evhttp_free(s->http);
    struct event *evs[] = {s->ev_wake, s->ev_loaded, s->ev_sigint, s->ev_sigterm, s->ev_grace};
    for (size_t i = 0; i < sizeof evs / sizeof evs[0]; i++)
        if (evs[i])
            event_free(evs[i]);
    if (s->base)
        event_base_free(s->base);
    if (s->model)
        hearth_model_free(s->model);
    pthread_mutex_destroy(&s->qmu);
    free(s->fatal);
    libevent_global_shutdown();
}

int http_serve(const struct http_params *p, char *err, size_t err_len)
{
    struct server srv  = {0};
    struct server *s   = &srv;
    s->p               = p;
    s->sp              = p->sched;
    s->qtail           = &s->qhead;
    s->next_request_id = 1;
    s->next_job_id     = 1;
    s->id_salt         = (uint32_t)time(NULL) ^ ((uint32_t)getpid() << 16);
    metrics_init(&s->metrics);
    pthread_mutex_init(&s->qmu, NULL);
    signal(SIGPIPE, SIG_IGN); /* a client gone mid-write is an error code, not a signal */

    int rc = 1;
    if (evthread_use_pthreads() != 0) {
        set_err(err, err_len, "serve: libevent has no pthreads support");
        goto out;
    }
    s->base = event_base_new();
    s->http = s->base ? evhttp_new(s->base) : NULL;
    if (!s->http) {
        set_err(err, err_len, "serve: cannot create the event loop");
        goto out;
    }
    s->early_close = (event_base_get_features(s->base) & EV_FEATURE_EARLY_CLOSE) != 0;
    evhttp_set_allowed_methods(s->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
                                            EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
                                            EVHTTP_REQ_OPTIONS | EVHTTP_REQ_TRACE |
                                            EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH);
    size_t hard = p->max_body * 2 > p->max_body + 65536 ? p->max_body * 2 : p->max_body + 65536;
    evhttp_set_max_body_size(s->http, (ev_ssize_t)hard);
    evhttp_set_max_headers_size(s->http, 64 * 1024);
    evhttp_set_flags(s->http, EVHTTP_SERVER_LINGERING_CLOSE);
    evhttp_set_gencb(s->http, on_request, s);
    s->ev_wake    = event_new(s->base, -1, 0, on_wake, s);
    s->ev_loaded  = event_new(s->base, -1, 0, on_loaded, s);
    s->ev_sigint  = evsignal_new(s->base, SIGINT, on_signal, s);
    s->ev_sigterm = evsignal_new(s->base, SIGTERM, on_signal, s);
    if (!s->ev_wake || !s->ev_loaded || !s->ev_sigint || !s->ev_sigterm ||
        event_add(s->ev_sigint, NULL) || event_add(s->ev_sigterm, NULL)) {
        set_err(err, err_len, "serve: cannot create the loop's events");
        goto out;
    }
    s->bound = evhttp_bind_socket_with_handle(s->http, p->host, (ev_uint16_t)p->port);
    if (!s->bound) {
        set_err(err, err_len, "serve: cannot listen on %s port %d: %s", p->host, p->port,
                strerror(errno));
        goto out;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    int port     = p->port;
    if (getsockname(evhttp_bound_socket_get_fd(s->bound), (struct sockaddr *)&ss, &sl) == 0)
        port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                              : ((struct sockaddr_in *)&ss)->sin_port);
    bool v6 = strchr(p->host, ':') != NULL;
    fprintf(stderr, "hearth serve: listening on http://%s%s%s:%d\n", v6 ? "[" : "", p->host,
            v6 ? "]" : "", port);

    if (pthread_create(&s->loader, NULL, loader_main, s) != 0) {
        set_err(err, err_len, "serve: cannot start the loader thread");
        goto out;
    }
    s->loader_running = true;
    event_base_dispatch(s->base);
    rc = s->exit_code;
    if (rc && s->fatal)
        set_err(err, err_len, "%s", s->fatal);
out:
    teardown(s);
    return rc;
}
