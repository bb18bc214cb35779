/*
 * http.c: the event loop of `hearth serve` (see http.h): routing, replies,
 * the mailbox from the other threads, and generation requests.
 *
 * A generation request's life on the loop thread:
 *   route -> auth -> parse (oai_request.c) -> struct pending + a task for the
 *   preparation thread (template, tokens: oai_jobs.c) -> back on the loop:
 *   sched_submit_all, one job per choice, all or none -> SSE chunks or one JSON body as
 *   scheduler events arrive -> freed after the last choice's DONE. The
 *   record is freed only when nothing can refer to it any more (its task is
 *   back and every DONE has arrived), even when the client has gone.
 *
 * Each job owns the node its DONE (or ERROR) event travels in, allocated
 * before submission: a DONE is never lost to a failed allocation, so a
 * request always completes.
 *
 * A client that hangs up: watched with EV_CLOSED on its socket (EPOLLRDHUP;
 * libevent stops reading a connection while its request is handled, so it
 * would only notice at the next write) and with the connection's close
 * callback. Either way: sched_cancel (the slot frees at the next step), the
 * HTTP side is finished at once, and the pending record stays until its
 * task and the scheduler's DONE events have drained.
 *
 * Bodies: every connection passes through bodylimit.c, which answers a
 * body over --max-body with OpenAI's JSON 413 before evhttp reads it (at any
 * size: evhttp's own limit, kept at twice --max-body as a backstop, would
 * answer with an HTML page).
 */
#include "serve/http.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/keyvalq_struct.h>
#include <event2/thread.h>
#include <netinet/in.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "grammar/grammar.h"
#include "net/bodylimit.h"
#include "net/listen.h"
#include "serve/anthropic.h"
#include "serve/deadline.h"
#include "serve/server.h"
#include "serve/responses.h"
#include "serve/route_table.h"
#include "chat/chat_template.h"
#include "chat/chatparse.h"
#include "util/clock.h"
#include "util/errfmt.h"

/*
 * HTTP statuses the server sends, with their reason phrases: every status a
 * handler uses and every one hearth_status_http can return.
 */
/* clang-format off */
#define HTTP_STATUS_LIST(X)                                                                        \
    X(200, "OK")                                                                                   \
    X(204, "No Content")                                                                           \
    X(400, "Bad Request")                                                                          \
    X(401, "Unauthorized")                                                                         \
    X(404, "Not Found")                                                                            \
    X(405, "Method Not Allowed")                                                                   \
    X(413, "Payload Too Large")                                                                    \
    X(422, "Unprocessable Content")                                                                \
    X(499, "Client Closed Request")                                                                \
    X(500, "Internal Server Error")                                                                \
    X(503, "Service Unavailable")                                                                  \
    X(507, "Insufficient Storage")
/* clang-format on */

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

#define SHUTDOWN_GRACE_S 2 /* longest wait for cancelled jobs to drain at shutdown */
/* from the signal to the end of the process, whatever is still running (deadline.h): past the
 * grace, this leaves the scheduler's last step and the disk tier's flush about 2 s */
#define SHUTDOWN_DEADLINE_S 4
#define GRAMMAR_CACHE_SIZE  16 /* compiled grammars kept: an agent resends its tools every turn */

/* ------------------------------------------------------------- replies --- */

static void add_cors(struct server *s, struct evhttp_request *req)
{
    const char *allowed = s->p->cors_origin;
    if (!allowed || !*allowed)
        return;
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    const char *origin  = evhttp_find_header(evhttp_request_get_input_headers(req), "Origin");
    if (!strcmp(allowed, "*")) {
        evhttp_add_header(h, "Access-Control-Allow-Origin", "*");
    } else if (origin && !strcmp(origin, allowed)) {
        evhttp_add_header(h, "Access-Control-Allow-Origin", allowed);
        evhttp_add_header(h, "Vary", "Origin");
    }
}

void serve_reply(struct server *s, struct evhttp_request *req, enum metrics_endpoint ep, int status,
                 const char *content_type, const char *body, size_t len)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    if (content_type)
        evhttp_add_header(h, "Content-Type", content_type);
    add_cors(s, req);
    struct evbuffer *b = evbuffer_new();
    if (b && len)
        evbuffer_add(b, body, len);
    evhttp_send_reply(req, status, reason(status), b);
    if (b)
        evbuffer_free(b);
    metrics_count_request(&s->metrics, ep, status);
}

void serve_reply_json(struct server *s, struct evhttp_request *req, enum metrics_endpoint ep,
                      int status, const char *json)
{
    if (!json) {
        struct oai_error e;
        oai_fail(&e, 500, "server_error", NULL, NULL, "out of memory");
        char *oom                = oai_error_json(&e);
        static const char last[] = "{\"error\":{\"message\":\"out of memory\"}}";
        serve_reply(s, req, ep, 500, "application/json", oom ? oom : last,
                    oom ? strlen(oom) : sizeof last - 1);
        free(oom);
        return;
    }
    serve_reply(s, req, ep, status, "application/json", json, strlen(json));
}

/* The API each endpoint speaks, for the shape of its errors. */
static const struct reply_ops *ep_ops(enum metrics_endpoint ep)
{
    switch (ep) {
    case EP_RESPONSES:
        return &resp_reply_ops;
    case EP_MESSAGES:
    case EP_COUNT_TOKENS:
        return &anth_reply_ops;
    default:
        return &oai_reply_ops;
    }
}

char *serve_error_json(enum metrics_endpoint ep, const struct oai_error *e)
{
    return ep_ops(ep)->error_json(e);
}

void serve_reply_error(struct server *s, struct evhttp_request *req, enum metrics_endpoint ep,
                       const struct oai_error *e)
{
    char *json = serve_error_json(ep, e);
    serve_reply_json(s, req, ep, e->status, json);
    free(json);
}

void serve_reply_cjson(struct server *s, struct evhttp_request *req, enum metrics_endpoint ep,
                       cJSON *o)
{
    char *json = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    serve_reply_json(s, req, ep, 200, json);
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
    serve_reply_error(s, req, ep, &e);
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

bool serve_check_ready(struct server *s, struct evhttp_request *req, enum metrics_endpoint ep)
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

const char *serve_body(struct server *s, struct evhttp_request *req, enum metrics_endpoint ep,
                       size_t *len)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    *len                = evbuffer_get_length(in);
    if (*len > s->p->max_body) {
        reply_fail(s, req, ep, 413, "invalid_request_error", "request_too_large",
                   "The request body is %zu bytes; this server takes at most %zu (--max-body).",
                   *len, s->p->max_body);
        return NULL;
    }
    if (*len == 0)
        return "";
    /* one more byte, so that the body reads as a NUL-terminated string */
    if (evbuffer_add(in, "", 1) != 0)
        return NULL;
    const char *body = (const char *)evbuffer_pullup(in, -1);
    return body;
}

/* ------------------------------------------------------------- pending --- */

struct pending *serve_pending_find(struct server *s, uint64_t request_id)
{
    for (struct pending *p = s->pending; p; p = p->next)
        if (p->request_id == request_id)
            return p;
    return NULL;
}

static void task_free(struct task *t)
{
    if (!t)
        return;
    oai_request_free(&t->r);
    cJSON_Delete(t->body);
    for (int32_t i = 0; t->jobs && i < t->n_jobs; i++)
        if (t->jobs[i])
            sched_job_free(t->jobs[i]);
    free(t->jobs);
    free(t->json);
    free(t);
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
    if (p->resp)
        p->ops->destroy(p->resp);
    free(p->t_last);
    free(p->op);
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
        serve_reply(p->srv, req, p->ep, status, "application/json", body, len);
    }
}

/* The client is gone (or the server is stopping): cancel the jobs, end the HTTP side now. */
static void abandon(struct pending *p, int status, const char *body, size_t len)
{
    if (p->gone)
        return;
    p->gone = true;
    if (p->task)
        atomic_store(&p->task->pt.cancel, 1);
    if (p->srv->sched && p->n_jobs > 0)
        sched_cancel(p->srv->sched, p->request_id);
    release_http(p, status, body, len);
}

static void on_peer_closed(evutil_socket_t fd, short what, void *arg)
{
    struct pending *p = arg;
    if (!http_peer_hung_up(fd, what))
        return; /* one-shot: stop watching; a write error will still be seen */
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
        if (p->task)
            atomic_store(&p->task->pt.cancel, 1);
        if (p->srv->sched && p->n_jobs > 0)
            sched_cancel(p->srv->sched, p->request_id);
    }
}

/* Watches req's connection for a hang-up on p's behalf. */
static void watch(struct server *s, struct pending *p, struct evhttp_request *req)
{
    p->req                          = req;
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    evutil_socket_t fd              = -1;
    if (evcon) {
        evhttp_connection_set_closecb(evcon, on_conn_close, p);
        http_no_delay(evcon);
        fd = bufferevent_getfd(evhttp_connection_get_bufferevent(evcon));
    }
    if (fd >= 0) {
        p->ev_closed =
            event_new(s->base, fd, s->early_close ? EV_CLOSED : EV_READ, on_peer_closed, p);
        if (p->ev_closed)
            event_add(p->ev_closed, NULL);
    }
}

/* Every choice is done: the body or the stream's tail, then the record goes. */
static void pending_finish(struct pending *p)
{
    struct server *s = p->srv;
    if (!p->gone && p->req) {
        int status = 200;
        size_t len = 0;
        char *body = p->ops->finish(p->resp, &status, &len);
        if (!body && !p->stream) {
            struct oai_error e;
            oai_fail(&e, 500, "server_error", NULL, NULL, "out of memory");
            status = 500;
            body   = p->ops->error_json(&e);
            len    = body ? strlen(body) : 0;
        }
        release_http(p, status, body, len);
        free(body);
        metrics_observe(&s->metrics, M_REQUEST_DURATION, now_s() - p->t_start);
    }
    release_http(p, 499, NULL, 0); /* no-op unless something above failed */
    pending_unlink_free(p);
}

struct pending *serve_pending_new(struct server *s, struct evhttp_request *req,
                                  enum metrics_endpoint ep, enum pending_kind kind)
{
    struct pending *p = calloc(1, sizeof *p);
    if (!p) {
        reply_fail(s, req, ep, 500, "server_error", NULL, "out of memory");
        return NULL;
    }
    p->srv        = s;
    p->kind       = kind;
    p->request_id = s->next_request_id++;
    p->ep         = ep;
    p->ops        = ep_ops(ep);
    p->t_start    = now_s();
    p->next       = s->pending;
    if (s->pending)
        s->pending->prev = p;
    s->pending = p;
    watch(s, p, req);
    return p;
}

void serve_pending_reply(struct pending *p, int status, const char *json)
{
    release_http(p, status, json, json ? strlen(json) : 0);
    pending_unlink_free(p);
}

static void run_task(struct prep_task *pt);

void serve_prepare(struct server *s, struct evhttp_request *req, enum metrics_endpoint ep,
                   enum pending_kind kind, struct task *t)
{
    struct pending *p = serve_pending_new(s, req, ep, kind);
    if (!p) {
        task_free(t);
        return;
    }
    if (t->ops)
        p->ops = t->ops;
    p->task   = t;
    t->pt.run = run_task;
    atomic_init(&t->pt.cancel, 0);
    t->r.cancel     = &t->pt.cancel;
    t->srv          = s;
    t->p            = p;
    t->first_job_id = s->next_job_id;
    s->next_job_id += OAI_MAX_CHOICES;
    s->n_prep_tasks++;
    prep_submit(s->prep, &t->pt);
}

/* ---------------------------------------------------------- generation --- */

/* On the prep thread: template, tokens, jobs. */
static void prepare_generation(struct task *t)
{
    uint64_t next = t->first_job_id;
    if (!t->r.has_seed && t->srv->p->seeded) {
        t->r.sampling.seed = t->srv->p->seed;
        t->r.has_seed      = true;
    }
    t->ok = oai_make_jobs(&t->r, t->srv->tmpl, t->srv->model, t->srv->gcache,
                          sched_turns(t->srv->sched), t->srv->sp.n_ctx, t->p->request_id, &next,
                          &t->jobs, &t->n_jobs, &t->thinking, &t->e);
}

static void run_task(struct prep_task *pt)
{
    struct task *t = (struct task *)pt;
    if (t->p->kind == PK_GENERATE)
        prepare_generation(t);
    else
        serve_handlers.prepare(t);
}

/* Submits the prepared jobs of p and starts its reply. Takes the jobs out of t. */
static void start_generation(struct server *s, struct pending *p, struct task *t)
{
    const struct oai_request *r = &t->r;
    p->stream                   = r->stream;
    p->t_last                   = calloc((size_t)t->n_jobs, sizeof *p->t_last);
    snprintf(p->id, sizeof p->id, "%s%08x%016llx", p->ops->id_prefix(r), s->id_salt,
             (unsigned long long)p->request_id);
    if (p->t_last)
        p->resp = p->ops->create(r, t->n_jobs, p->id, (int64_t)time(NULL), s->p->alias, s->model,
                                 s->tmpl, t->thinking);
    if (!p->t_last || !p->resp) {
        struct oai_error e;
        oai_fail(&e, 500, "server_error", NULL, NULL, "out of memory");
        char *json = p->ops->error_json(&e);
        p->stream  = false;
        release_http(p, 500, json, json ? strlen(json) : 0);
        free(json);
        pending_unlink_free(p);
        return;
    }
    /* every choice gets its event node first, so admission is one all-or-nothing step */
    struct qev **nodes    = calloc((size_t)t->n_jobs, sizeof *nodes);
    enum hearth_status st = nodes ? HEARTH_OK : HEARTH_ENOMEM;
    for (int32_t i = 0; i < t->n_jobs && st == HEARTH_OK; i++)
        if (!(nodes[i] = calloc(1, sizeof **nodes)))
            st = HEARTH_ENOMEM;
    if (st == HEARTH_OK) {
        for (int32_t i = 0; i < t->n_jobs; i++)
            t->jobs[i]->user = nodes[i];
        st = sched_submit_all(s->sched, t->jobs, t->n_jobs); /* takes the jobs, even on refusal */
        for (int32_t i = 0; i < t->n_jobs; i++)
            t->jobs[i] = NULL;
    }
    for (int32_t i = 0; st != HEARTH_OK && nodes && i < t->n_jobs; i++)
        free(nodes[i]); /* a refused job sends no event */
    free(nodes);
    p->n_jobs = st == HEARTH_OK ? t->n_jobs : 0;
    if (st != HEARTH_OK) {
        /* Refused as a whole: no job of it is in. */
        struct evhttp_request *req = p->req;
        p->stream                  = false;
        if (req)
            evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "1");
        struct oai_error e;
        if (st == HEARTH_EFULL)
            oai_fail(&e, 503, "server_error", "server_overloaded", NULL,
                     "All %d slots are busy and the queue (--max-queue %d) is full; retry "
                     "later.",
                     s->sp.n_slots, s->sp.max_queue);
        else
            oai_fail(&e, hearth_status_http(st), "server_error", NULL, NULL,
                     "The scheduler refused the request: %s.", hearth_status_str(st));
        char *json = p->ops->error_json(&e);
        abandon(p, e.status, json, json ? strlen(json) : 0);
        free(json);
        pending_unlink_free(p);
        return;
    }
    if (p->stream && p->req) {
        struct evkeyvalq *h = evhttp_request_get_output_headers(p->req);
        evhttp_add_header(h, "Content-Type", "text/event-stream");
        evhttp_add_header(h, "Cache-Control", "no-cache");
        evhttp_add_header(h, "X-Accel-Buffering", "no");
        add_cors(s, p->req);
        evhttp_send_reply_start(p->req, 200, "OK");
        metrics_count_request(&s->metrics, p->ep, 200);
        size_t n  = 0;
        char *out = p->ops->start(p->resp, &n);
        send_chunk(p->req, out, n);
        free(out);
    }
}

/* On the loop: a task is back from the prep thread. */
static void task_done(struct server *s, struct task *t)
{
    struct pending *p = t->p;
    p->task           = NULL;
    s->n_prep_tasks--;
    if (t->pt.skipped || (!t->ok && t->e.status == 499))
        s->n_prep_cancelled++;
    if (p->gone) {
        task_free(t);
        pending_unlink_free(p);
        return;
    }
    if (!t->ok) {
        char *json = p->ops->error_json(&t->e);
        release_http(p, t->e.status, json, json ? strlen(json) : 0);
        free(json);
        task_free(t);
        pending_unlink_free(p);
        return;
    }
    if (p->kind == PK_GENERATE) {
        start_generation(s, p, t);
    } else {
        release_http(p, 200, t->json, t->json ? strlen(t->json) : 0);
        pending_unlink_free(p);
    }
    task_free(t);
}

/* The role of messages[i] ("" when there is none). */
static const char *role_at(const cJSON *messages, int i)
{
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(messages, i), "role");
    return cJSON_IsString(role) ? role->valuestring : "";
}

/* --tool-choice on r, when its conversation ends with the user's own turn and it offers
 * tools: the first request of an agent's turn is steered; the one carrying the tool's result
 * is not (even where the client adds user or system messages after the result, as Claude
 * Code does), so the turn still ends. */
static void steer_tool_choice(const char *mode, struct oai_request *r)
{
    if (!mode || !r->tools || r->schema || r->grammar)
        return;
    int i     = cJSON_GetArraySize(r->messages) - 1;
    bool user = false;
    for (; i >= 0; i--) {
        const char *role = role_at(r->messages, i);
        if (strcmp(role, "user") && strcmp(role, "system"))
            break;
        user |= !strcmp(role, "user");
    }
    if (!user || !strcmp(role_at(r->messages, i), "tool"))
        return;
    if (!strcmp(mode, "auto") || !strcmp(mode, "none") || !strcmp(mode, "required")) {
        r->tool_choice = !strcmp(mode, "auto")   ? OAI_TOOL_AUTO
                         : !strcmp(mode, "none") ? OAI_TOOL_NONE
                                                 : OAI_TOOL_REQUIRED;
        return;
    }
    const cJSON *t;
    cJSON_ArrayForEach(t, r->tools)
    {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(t, "function"), "name");
        char *name;
        if (cJSON_IsString(n) && !strcmp(n->valuestring, mode) && (name = strdup(mode))) {
            free(r->tool_name);
            r->tool_name   = name;
            r->tool_choice = OAI_TOOL_NAMED;
            return;
        }
    }
}

/* --logit-bias's entries appended to r's, but for tokens r biases itself; false when out of
 * memory. */
static bool add_server_bias(const struct http_params *p, struct oai_request *r)
{
    struct oai_bias *b = realloc(r->bias, (size_t)(r->n_bias + p->n_bias) * sizeof *b);
    if (!b)
        return false;
    r->bias    = b;
    int32_t n0 = r->n_bias;
    for (int32_t i = 0; i < p->n_bias; i++) {
        bool own = false;
        for (int32_t k = 0; k < n0 && !own; k++)
            own = b[k].token == p->bias[i].token;
        if (!own)
            b[r->n_bias++] = (struct oai_bias){p->bias[i].token,
                                               isinf(p->bias[i].bias) ? -100 : p->bias[i].bias};
    }
    return true;
}

bool serve_apply_policy(struct server *s, enum metrics_endpoint ep, struct oai_request *r,
                        struct oai_error *e)
{
    const bool anth = ep == EP_MESSAGES || ep == EP_COUNT_TOKENS;
    for (int32_t i = 0; i < r->n_ignored; i++) {
        const struct oai_ignored *ig = &r->ignored[i];
        if (s->p->strict_fields && ig->unknown)
            return anth ? oai_fail(e, 400, "invalid_request_error", NULL, NULL,
                                   "%s: Extra inputs are not permitted (--strict-fields)", ig->path)
                        : oai_fail(e, 400, "invalid_request_error", "unknown_parameter", ig->path,
                                   "Unrecognized request argument supplied: %s "
                                   "(--strict-fields)",
                                   ig->path);
        if (metrics_count_ignored(&s->metrics, ep, ig->path))
            fprintf(stderr,
                    "hearth serve: ignoring %s request field '%s' (%s); logged once, counted in "
                    "hearth_ignored_request_fields_total\n",
                    metrics_api_name(ep), ig->path,
                    ig->unknown ? "unknown here" : "no effect here");
    }
    for (int32_t i = 0; i < r->n_ignored_more; i++)
        metrics_count_ignored(&s->metrics, ep, "_more");
    if (s->p->n_bias > 0 && !add_server_bias(s->p, r))
        return oai_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    if (s->p->n_predict > 0 && (r->max_tokens < 0 || r->max_tokens > s->p->n_predict))
        r->max_tokens = s->p->n_predict;
    steer_tool_choice(s->p->tool_choice, r);
    return true;
}

/* Parses req's body (with parse, else as OpenAI's kind) and hands it to serve_prepare. */
static void prepare_body(struct server *s, struct evhttp_request *req, enum metrics_endpoint ep,
                         enum pending_kind pkind, enum oai_kind kind, serve_parse_fn parse,
                         const struct reply_ops *ops)
{
    if (!serve_check_ready(s, req, ep))
        return;
    size_t len;
    const char *body = serve_body(s, req, ep, &len);
    if (!body)
        return;
    struct task *t = calloc(1, sizeof *t);
    if (!t) {
        reply_fail(s, req, ep, 500, "server_error", NULL, "out of memory");
        return;
    }
    struct oai_error e;
    if (parse ? !parse(body, len, &t->r, &e) : !oai_parse(kind, body, len, &t->r, &e)) {
        free(t);
        serve_reply_error(s, req, ep, &e);
        return;
    }
    if (!serve_apply_policy(s, ep, &t->r, &e)) {
        oai_request_free(&t->r);
        free(t);
        serve_reply_error(s, req, ep, &e);
        return;
    }
    t->ops = ops;
    serve_prepare(s, req, ep, pkind, t);
}

void serve_prepare_oai(struct server *s, struct evhttp_request *req, enum metrics_endpoint ep,
                       enum oai_kind kind, enum pending_kind pkind)
{
    prepare_body(s, req, ep, pkind, kind, NULL, NULL);
}

void serve_generate(struct server *s, struct evhttp_request *req, enum metrics_endpoint ep,
                    serve_parse_fn parse, const struct reply_ops *ops)
{
    prepare_body(s, req, ep, PK_GENERATE, OAI_CHAT, parse, ops);
}

/* ------------------------------------------------------------- mailbox --- */

static void handle_event(struct server *s, struct qev *q)
{
    const struct sched_event *ev = &q->ev;
    struct pending *p            = serve_pending_find(s, ev->request_id);
    if (!p)
        return;
    if (ev->kind == SCHED_EV_SLOT) {
        serve_handlers.slot_done(p, ev->op);
        return;
    }
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
        out = p->ops->text(p->resp, ev, &len);
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
        out = p->ops->done(p->resp, ev, &len);
        send_chunk(p->req, out, len);
        free(out);
    }
    if (p->n_done >= p->n_jobs)
        pending_finish(p);
}

static void post(struct server *s, struct qev *q)
{
    q->next = NULL;
    pthread_mutex_lock(&s->qmu);
    *s->qtail = q;
    s->qtail  = &q->next;
    pthread_mutex_unlock(&s->qmu);
    event_active(s->ev_wake, EV_READ, 0);
}

/*
 * Scheduler thread: copy the event, queue it, wake the loop. Never blocks
 * for long. A job's last event travels in the node the job was submitted
 * with, so it needs no allocation and cannot be lost.
 */
static void on_sched_event(const struct sched_event *ev, void *user)
{
    struct server *s = user;
    if (ev->kind != SCHED_EV_TEXT) {
        struct qev *q = ev->user;
        if (!q)
            return; /* not a job of ours (cannot happen: every job carries its node) */
        q->ev    = *ev;
        q->t     = now_s();
        size_t n = ev->text && ev->text_len < sizeof q->msg ? ev->text_len
                   : ev->text                               ? sizeof q->msg - 1
                                                            : 0;
        memcpy(q->msg, ev->text ? ev->text : "", n);
        q->msg[n]      = 0;
        q->ev.text     = q->msg;
        q->ev.text_len = n;
        q->ev.logprob  = NULL;
        q->ev.top      = NULL;
        q->ev.n_top    = 0;
        post(s, q);
        return;
    }
    size_t n_top    = ev->top && ev->n_top > 0 ? (size_t)ev->n_top : 0;
    size_t text_len = ev->text ? ev->text_len : 0;
    struct qev *q   = malloc(sizeof *q + n_top * sizeof(struct sample_logprob) + text_len + 1);
    if (!q)
        return; /* a lost piece of text; the request still completes */
    q->ev                    = *ev;
    q->t                     = now_s();
    struct sample_logprob *t = (struct sample_logprob *)(q + 1);
    char *text               = (char *)(t + n_top);
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
    post(s, q);
}

/* Prep thread: a finished task goes back to the loop. */
static void on_prepared(struct prep_task *pt, void *user)
{
    struct server *s = user;
    pt->next         = NULL;
    pthread_mutex_lock(&s->qmu);
    *s->ptail = pt;
    s->ptail  = &pt->next;
    pthread_mutex_unlock(&s->qmu);
    event_active(s->ev_wake, EV_READ, 0);
}

static void mailbox_take(struct server *s, struct qev **events, struct prep_task **tasks)
{
    pthread_mutex_lock(&s->qmu);
    *events  = s->qhead;
    *tasks   = s->phead;
    s->qhead = NULL;
    s->qtail = &s->qhead;
    s->phead = NULL;
    s->ptail = &s->phead;
    pthread_mutex_unlock(&s->qmu);
}

static void on_wake(evutil_socket_t fd, short what, void *arg)
{
    struct server *s = arg;
    struct qev *q;
    struct prep_task *pt;
    mailbox_take(s, &q, &pt);
    while (pt) { /* tasks first: a request's jobs exist only once its task is back */
        struct prep_task *next = pt->next;
        task_done(s, (struct task *)pt);
        pt = next;
    }
    while (q) {
        struct qev *next = q->next;
        handle_event(s, q);
        free(q);
        q = next;
    }
}

/* ------------------------------------------------------------- routing --- */

static const struct serve_route *route_of(enum metrics_endpoint ep)
{
    for (size_t i = 0; i < serve_handlers.n_routes; i++)
        if (serve_handlers.routes[i].ep == ep)
            return &serve_handlers.routes[i];
    return NULL;
}

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

/* a == key, in time independent of where the strings differ */
static bool key_equal(const char *key, const char *a)
{
    size_t n = strlen(key), m = strlen(a);
    unsigned diff = n != m;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)key[i] ^ (unsigned char)(i < m ? a[i] : 0);
    return diff == 0;
}

/* The key as OpenAI's clients send it (Authorization: Bearer) or Anthropic's (x-api-key). */
static bool authorized(struct server *s, struct evhttp_request *req)
{
    const char *key = s->p->api_key;
    if (!key || !*key)
        return true;
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    const char *h        = evhttp_find_header(in, "Authorization");
    if (h && !strncasecmp(h, "Bearer ", 7)) {
        h += 7;
        while (*h == ' ')
            h++;
        if (key_equal(key, h))
            return true;
    }
    const char *x = evhttp_find_header(in, "x-api-key");
    return x && key_equal(key, x);
}

/* A CORS preflight: which methods and headers the browser may use on r. */
static void preflight(struct server *s, struct evhttp_request *req, const struct serve_route *r)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    char methods[32];
    snprintf(methods, sizeof methods, "%s, OPTIONS", r->allow);
    evhttp_add_header(h, "Access-Control-Allow-Methods", methods);
    evhttp_add_header(h, "Access-Control-Allow-Headers",
                      "Authorization, Content-Type, x-api-key, anthropic-version, anthropic-beta");
    evhttp_add_header(h, "Access-Control-Max-Age", "600");
    serve_reply(s, req, r->ep, 204, NULL, NULL, 0);
}

/* The route of path, aliases included; NULL when there is none. */
static const struct serve_route *route_of_path(const char *path)
{
    for (size_t i = 0; i < serve_handlers.n_routes; i++)
        if (!strcmp(path, serve_handlers.routes[i].path))
            return &serve_handlers.routes[i];
    for (size_t i = 0; i < serve_handlers.n_aliases; i++)
        if (!strcmp(path, serve_handlers.aliases[i].path))
            return route_of(serve_handlers.aliases[i].ep);
    return NULL;
}

/* bodylimit.c answers a request with 413 (or malformed framing with 400, 408, 505) before
 * evhttp reads it: counted under its route, in its route's error shape. */
static char *on_refused(const char *path, const struct oai_error *e, void *user)
{
    struct server *s            = user;
    const struct serve_route *r = route_of_path(path);
    enum metrics_endpoint ep    = r ? r->ep : EP_OTHER;
    metrics_count_request(&s->metrics, ep, e->status);
    return serve_error_json(ep, e);
}

/* The first max bytes of the client's text s into out (3 * max + 1 bytes), percent-encoded
 * where not printable ASCII, so an answer quoting it stays valid UTF-8. */
static void printable(const char *s, size_t max, char *out)
{
    size_t n = 0;
    for (size_t i = 0; s[i] && i < max; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c > 0x20 && c < 0x7f)
            out[n++] = (char)c;
        else
            n += (size_t)snprintf(out + n, 4, "%%%02X", c);
    }
    out[n] = 0;
}

static void on_request(struct evhttp_request *req, void *arg)
{
    struct server *s = arg;
    bodylimit_request(req); /* no read timeout while its reply is due */
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path             = uri ? evhttp_uri_get_path(uri) : NULL;
    enum evhttp_cmd_type method  = evhttp_request_get_command(req);
    if (!path || !*path)
        path = "/";
    const struct serve_route *r = route_of_path(path);
    const char *model_id        = NULL;
    if (!r && (!strncmp(path, "/v1/models/", 11) || !strncmp(path, "/models/", 8))) {
        model_id = path + (path[1] == 'v' ? 11 : 8);
        r        = *model_id ? route_of(EP_MODELS) : NULL;
    }
    if (!r && !strncmp(path, "/slots/", 7) && path[7])
        r = route_of(EP_SLOT_ACTION); /* the handler reads the slot from the path */
    if (r && r->ep == EP_WEBUI && s->p->no_webui)
        r = NULL; /* --no-webui: as if there were no such route */
    if (!r) {
        char shown[3 * 200 + 1];
        printable(path, 200, shown);
        reply_fail(s, req, EP_OTHER, 404, "invalid_request_error", "unknown_url",
                   "Invalid URL (%s %s): no such endpoint.", method_name(method), shown);
        return;
    }
    if (method == EVHTTP_REQ_OPTIONS && s->p->cors_origin && *s->p->cors_origin) {
        preflight(s, req, r);
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
                   "Missing or incorrect API key: send 'Authorization: Bearer KEY' or 'x-api-key: "
                   "KEY' with the key given to --api-key.");
        return;
    }
    if (model_id) {
        char *id = evhttp_uridecode(model_id, 0, NULL);
        serve_handlers.model_one(s, req, id ? id : model_id);
        free(id);
        return;
    }
    r->fn(s, req);
}

/* -------------------------------------------------------- load, signals --- */

/* The chat template the server renders with: options first, then the model's own. */
/* The template's output markers that the vocabulary holds as control tokens are output text,
 * or the reply parser never sees them (gpt-oss' <|channel|>, Mistral's [TOOL_CALLS]). */
static enum hearth_status keep_markers(struct server *s, struct hearth_model *model,
                                       const struct chat_template *tmpl)
{
    const char *m[CHATPARSE_MARKERS_MAX];
    size_t n = chatparse_markers(chat_template_format(tmpl), m);
    if (hearth_model_keep_text(model, m, n) < 0)
        return fail(HEARTH_ENOMEM, s->load_err, sizeof s->load_err,
                    "serve: out of memory reading the chat format's markers");
    return HEARTH_OK;
}

static enum hearth_status load_template(struct server *s, struct hearth_model *model,
                                        struct chat_template **out)
{
    const struct http_params *p = s->p;
    char *src                   = NULL;
    if (p->chat_template_file) {
        FILE *f = fopen(p->chat_template_file, "rb");
        if (!f)
            return fail(HEARTH_EIO, s->load_err, sizeof s->load_err,
                        "serve: cannot read --chat-template-file %s: %s", p->chat_template_file,
                        strerror(errno));
        size_t cap = 0, len = 0;
        for (;;) {
            if (len + 4096 + 1 > cap) {
                char *grown = realloc(src, cap = (len + 4096 + 1) * 2);
                if (!grown) {
                    free(src);
                    fclose(f);
                    return fail(HEARTH_ENOMEM, s->load_err, sizeof s->load_err,
                                "serve: out of memory reading the chat template");
                }
                src = grown;
            }
            size_t got = fread(src + len, 1, 4096, f);
            len += got;
            if (got < 4096)
                break;
        }
        fclose(f);
        src[len] = 0;
    }
    enum hearth_status st = chat_template_new(model, src, p->chat_template_file, p->chat_template,
                                              out, s->load_err, sizeof s->load_err);
    free(src);
    if (st == HEARTH_OK && p->chat_template_kwargs) {
        cJSON *kw = cJSON_Parse(p->chat_template_kwargs);
        st        = kw ? chat_template_set_kwargs(*out, kw, s->load_err, sizeof s->load_err)
                       : fail(HEARTH_EINVAL, s->load_err, sizeof s->load_err,
                              "serve: --chat-template-kwargs is not valid JSON");
        cJSON_Delete(kw);
    }
    /* Test hook: a fixed clock for strftime_now, so renderings can be compared byte for byte. */
    const char *now = getenv("HEARTH_SERVE_TEMPLATE_NOW");
    if (st == HEARTH_OK && now && *now)
        chat_template_set_now(*out, strtoll(now, NULL, 10));
    if (st == HEARTH_OK)
        st = keep_markers(s, model, *out);
    if (st != HEARTH_OK && *out) {
        chat_template_free(*out);
        *out = NULL;
    }
    return st;
}

static void *loader_main(void *arg)
{
    struct server *s              = arg;
    struct hearth_model_params mp = hearth_model_default_params();
    if (s->sp.n_threads > 0)
        mp.n_threads = s->sp.n_threads;
    mp.n_gpu_layers            = s->p->n_gpu_layers;
    mp.devices                 = s->p->devices;
    mp.tensor_split            = s->p->tensor_split;
    mp.layer_split             = s->p->layer_split;
    mp.mtp                     = s->sp.spec.mtp;
    struct hearth_model *model = NULL;
    struct sched *sched        = NULL;
    struct chat_template *tmpl = NULL;
    struct grammar_vocab *gv   = NULL;
    struct grammar_cache *gc   = NULL;
    /* Test hook (http.h): hold the load until the test lets it go, so that it sees /health
     * answer 503 while loading; a missing FIFO, or one closed unwritten, holds nothing. */
    const char *gate = getenv("HEARTH_SERVE_LOAD_GATE");
    if (gate && *gate) {
        int fd = open(gate, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            char c;
            (void)!read(fd, &c, 1);
            close(fd);
        }
    }
    enum hearth_status st =
        hearth_model_load(s->p->model_path, &mp, &model, s->load_err, sizeof s->load_err);
    if (st == HEARTH_OK)
        st = load_template(s, model, &tmpl);
    if (st == HEARTH_OK && (!(gv = grammar_vocab_from_model(model)) ||
                            !(gc = grammar_cache_new(gv, GRAMMAR_CACHE_SIZE)))) {
        snprintf(s->load_err, sizeof s->load_err, "out of memory indexing the vocabulary");
        st = HEARTH_ENOMEM;
    }
    struct hearth_model *draft = NULL;
    if (st == HEARTH_OK && s->p->draft_path) {
        /* the draft model runs on the CPU: placement options are the target's */
        struct hearth_model_params dp = hearth_model_default_params();
        dp.n_threads                  = mp.n_threads;
        char why[HEARTH_ERR_MAX];
        st = hearth_model_load(s->p->draft_path, &dp, &draft, why, sizeof why);
        if (st == HEARTH_OK) /* its pieces must stay the target's */
            st = keep_markers(s, draft, tmpl);
        else
            snprintf(s->load_err, sizeof s->load_err, "--model-draft %.200s: %.280s",
                     s->p->draft_path, why);
        s->sp.spec.draft_model = draft;
    }
    if (st == HEARTH_OK) {
        int32_t train = hearth_model_n_ctx_train(model);
        if (s->sp.n_ctx <= 0) /* default: 4096, or the training context when smaller */
            s->sp.n_ctx = train > 0 && train < 4096 ? train : 4096;
        st = sched_start(model, &s->sp, on_sched_event, s, &sched, s->load_err, sizeof s->load_err);
    }
    if (st != HEARTH_OK) {
        chat_template_free(tmpl);
        tmpl = NULL;
        grammar_cache_free(gc);
        gc = NULL;
        grammar_vocab_free(gv);
        gv = NULL;
        if (model)
            hearth_model_free(model);
        model = NULL;
        if (draft)
            hearth_model_free(draft);
        draft = NULL;
    }
    s->load_model  = model;
    s->load_draft  = draft;
    s->load_sched  = sched;
    s->load_tmpl   = tmpl;
    s->load_gvocab = gv;
    s->load_gcache = gc;
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
        s->fatal       = strdup(s->load_err);
        s->exit_status = s->load_status;
        event_base_loopbreak(s->base);
        return;
    }
    s->model  = s->load_model;
    s->draft  = s->load_draft;
    s->sched  = s->load_sched;
    s->tmpl   = s->load_tmpl;
    s->gvocab = s->load_gvocab;
    s->gcache = s->load_gcache;
    for (int32_t i = 0; i < s->p->n_bias; i++)
        if (s->p->bias[i].token >= hearth_model_n_vocab(s->model)) {
            char msg[160];
            snprintf(msg, sizeof msg,
                     "--logit-bias: token %d is outside the model's vocabulary (%d tokens)",
                     (int)s->p->bias[i].token, (int)hearth_model_n_vocab(s->model));
            s->fatal       = strdup(msg);
            s->exit_status = HEARTH_EINVAL;
            event_base_loopbreak(s->base);
            return;
        }
    fprintf(stderr,
            "hearth serve: model loaded (%s), %d slots x %d tokens of context, chat template "
            "%s\n",
            hearth_model_arch(s->model), s->sp.n_slots, s->sp.n_ctx,
            chat_template_describe(s->tmpl));
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
    /* 0: the exit status of a clean shutdown (http_serve's HEARTH_OK, as cmd/ maps it) */
    s->deadline = deadline_arm(SHUTDOWN_DEADLINE_S, "shutdown", 0);
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
    struct oai_error e;
    oai_fail(&e, 503, "server_error", "shutting_down", NULL, "The server is shutting down.");
    for (struct pending *p = s->pending; p; p = p->next) {
        size_t len = 0;
        char *body = p->stream ? p->ops->error_sse(&e, &len) : p->ops->error_json(&e);
        if (body && !p->stream)
            len = strlen(body);
        abandon(p, 503, body, len);
        free(body);
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
            s->model  = s->load_model;
            s->sched  = s->load_sched;
            s->tmpl   = s->load_tmpl;
            s->gvocab = s->load_gvocab;
            s->gcache = s->load_gcache;
        }
    }
    prep_stop(s->prep); /* runs what is queued; the tasks land in the mailbox */
    s->prep = NULL;
    if (s->sched)
        sched_stop(s->sched); /* may still send events: they land in the mailbox */
    s->sched = NULL;
    struct qev *q;
    struct prep_task *pt;
    mailbox_take(s, &q, &pt);
    while (q) {
        struct qev *next = q->next;
        free(q);
        q = next;
    }
    while (pt) {
        struct prep_task *next = pt->next;
        struct task *t         = (struct task *)pt;
        t->p->task             = NULL;
        task_free(t);
        pt = next;
    }
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
    bodylimit_uninstall();
    struct event *evs[] = {s->ev_wake, s->ev_loaded, s->ev_sigint, s->ev_sigterm, s->ev_grace};
    for (size_t i = 0; i < sizeof evs / sizeof evs[0]; i++)
        if (evs[i])
            event_free(evs[i]);
    if (s->base)
        event_base_free(s->base);
    chat_template_free(s->tmpl);
    grammar_cache_free(s->gcache);
    grammar_vocab_free(s->gvocab);
    if (s->model)
        hearth_model_free(s->model);
    if (s->draft)
        hearth_model_free(s->draft);
    pthread_mutex_destroy(&s->qmu);
    free(s->fatal);
    libevent_global_shutdown();
    deadline_disarm(s->deadline);
}

enum hearth_status http_serve(const struct http_params *p, char *err, size_t err_len)
{
    struct server srv  = {0};
    struct server *s   = &srv;
    s->p               = p;
    s->sp              = p->sched;
    s->qtail           = &s->qhead;
    s->ptail           = &s->phead;
    s->next_request_id = 1;
    s->next_job_id     = 1;
    s->id_salt         = (uint32_t)time(NULL) ^ ((uint32_t)getpid() << 16);
    metrics_init(&s->metrics);
    pthread_mutex_init(&s->qmu, NULL);
    signal(SIGPIPE, SIG_IGN); /* a client gone mid-write is an error code, not a signal */

    enum hearth_status st = HEARTH_EIO;
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
    /* bodylimit.c refuses what passes --max-body (or 64 KiB of head) with OpenAI's 413 before
     * evhttp reads it; evhttp's own limits stay above those as a backstop */
    if (!bodylimit_install(s->http, p->max_body, 64 * 1024, on_refused, s)) {
        set_err(err, err_len, "serve: out of memory");
        goto out;
    }
    const double io_s = p->timeout_s > 0 ? p->timeout_s : 600;
    bodylimit_timeouts(s->http, io_s < 30 ? io_s : 30, io_s);
    size_t hard = p->max_body * 2 > p->max_body + 65536 ? p->max_body * 2 : p->max_body + 65536;
    evhttp_set_max_body_size(s->http, (ev_ssize_t)hard);
    evhttp_set_max_headers_size(s->http, 80 * 1024);
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
    if (!(s->prep = prep_start(p->n_prep_workers > 0 ? p->n_prep_workers : 4, on_prepared, s))) {
        set_err(err, err_len, "serve: cannot start the preparation workers");
        goto out;
    }
    if (!(s->bound = http_listen(s->http, "serve", p->host, p->port, "", err, err_len)))
        goto out;

    if (pthread_create(&s->loader, NULL, loader_main, s) != 0) {
        set_err(err, err_len, "serve: cannot start the loader thread");
        goto out;
    }
    s->loader_running = true;
    event_base_dispatch(s->base);
    st = s->exit_status;
    if (st != HEARTH_OK && s->fatal)
        set_err(err, err_len, "%s", s->fatal);
out:
    teardown(s);
    return st;
}
