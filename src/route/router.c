/*
 * router.c: `hearth route`'s event loop (router.h).
 *
 * A proxied request's life: the client's request arrives whole (its body
 * read by evhttp within --max-body) -> its prompt read and cut into prefix
 * blocks (prompt.c, policy.c) -> an upstream picked among the healthy ones
 * not tried yet and below --max-in-flight, or the request waits in the
 * queue (503 with Retry-After when the queue is full) -> the request sent
 * on one of that upstream's idle keep-alive connections -> the reply's
 * status and headers, then each piece of its body as libevent reads it,
 * passed to the client. The client's reply starts only with an upstream's
 * status below 500, so until then a failure (refused, reset, timed out,
 * 5xx) moves the request to another upstream; the upstream that failed is
 * demoted (except for 503, which says busy, not broken). After the reply
 * started, a failure ends the stream with an error event in the API's
 * shape (and no "data: [DONE]" or message_stop, which would call it whole),
 * or for a plain body cuts the connection so the client sees an incomplete
 * reply, never a short one.
 *
 * libevent's client calls, on a failed request, its error callback and
 * then its completion callback with NULL, having freed the request; on
 * success the completion callback with the request, freed after it
 * returns. A cancelled request (the client hung up) gets only the error
 * callback. Connections are freed outside their own callbacks.
 */
#include "route/router.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "net/bodylimit.h"
#include "net/errbody.h"
#include "net/listen.h"
#include "net/url.h"
#include "route/prompt.h"
#include "route/report.h"
#include "util/clock.h"
#include "util/errfmt.h"

#define MAX_BLOCKS  4096 /* prefix blocks looked at: 1 MiB of prompt text */
#define POOL        64   /* idle keep-alive connections kept an upstream */
#define ERRBODY_MAX 65536
#define N_BUCKETS   12

/* Latency buckets (seconds) of hearth_route_request_seconds. */
static const double buckets[N_BUCKETS] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                          0.5,   1,    2.5,   5,    10,  30};

struct upstream {
    struct url_target t;
    char url[300];
    bool healthy;
    struct evhttp_connection *idle[POOL];
    int n_idle;
    struct evhttp_connection *probe; /* its /health probe's connection */
    bool probing;
    uint64_t requests;  /* sent to it */
    uint64_t failures;  /* failed before the client's reply started (moved elsewhere) */
    uint64_t cut;       /* failed after it started */
    uint64_t status[6]; /* replies by status class: [2] 2xx ... [5] 5xx */
    uint64_t lat[N_BUCKETS + 1];
    double lat_sum;
    int32_t reported; /* requests it says it runs and queues (/metrics), -1: unknown */
};

struct proxied;

struct router {
    struct router_params p;
    struct event_base *base;
    struct evhttp *http;
    struct evhttp_bound_socket *bound;
    struct event *ev_probe, *ev_sigint, *ev_sigterm;
    bool early_close;
    struct route *policy;
    struct upstream up[ROUTE_MAX_UPSTREAMS];
    int32_t n_up;
    struct proxied *qhead, *qtail; /* waiting for an upstream */
    int32_t n_queued;
    uint64_t decisions[ROUTE_REASONS];
    uint64_t failovers; /* attempts moved to another upstream */
    uint64_t rejected;  /* 503: the queue was full */
    uint64_t exhausted; /* every upstream failed */
    double t0;
};

struct proxied {
    struct router *r;
    struct evhttp_request *client; /* NULL once the client's side is finished or gone */
    struct event *ev_closed;
    enum evhttp_cmd_type method;
    char *uri;
    char *body;
    size_t body_len;
    uint64_t *h;
    int32_t n;
    bool anthropic; /* the error shape: Anthropic's for /v1/messages */
    bool tried[ROUTE_MAX_UPSTREAMS];
    int32_t attempts;
    int32_t up; /* the upstream of the current attempt, -1: none */
    struct evhttp_connection *conn;
    struct evhttp_request *ureq;
    bool cancelling;
    bool started; /* the client's reply has begun */
    bool sse;     /* and it is an event stream */
    bool busy;    /* the attempt was answered 503 */
    bool failed;  /* the attempt was answered 5xx: its body is kept, not relayed */
    int status;
    struct evbuffer *errbody;
    char why[160]; /* the last failure */
    double t_attempt;
    bool queued;
    struct proxied *qnext;
};

/* ------------------------------------------------------------- helpers --- */

/* Seconds as a timeval. */
static struct timeval tv_of(double s)
{
    return (struct timeval){(time_t)s, (suseconds_t)((s - (double)(time_t)s) * 1e6)};
}

static void free_conn_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    evhttp_connection_free(arg);
}

/* Frees a connection once the loop is out of its callbacks. */
static void free_conn_later(struct router *r, struct evhttp_connection *c)
{
    static const struct timeval zero = {0, 0};
    if (c && event_base_once(r->base, -1, EV_TIMEOUT, free_conn_cb, c, &zero) != 0)
        evhttp_connection_free(c); /* not inside its callbacks when scheduling fails at teardown */
}

static struct evhttp_connection *conn_get(struct router *r, int32_t u)
{
    struct upstream *up = &r->up[u];
    if (up->n_idle > 0)
        return up->idle[--up->n_idle];
    struct evhttp_connection *c =
        evhttp_connection_base_new(r->base, NULL, up->t.host, (ev_uint16_t)up->t.port);
    if (c) {
        const struct timeval tv = tv_of(r->p.timeout_s);
        evhttp_connection_set_timeout_tv(c, &tv);
    }
    return c;
}

static void conn_put(struct router *r, int32_t u, struct evhttp_connection *c)
{
    struct upstream *up = &r->up[u];
    if (up->n_idle < POOL && up->healthy)
        up->idle[up->n_idle++] = c;
    else
        free_conn_later(r, c);
}

static void demote(struct router *r, int32_t u, const char *why)
{
    struct upstream *up = &r->up[u];
    if (!up->healthy)
        return;
    up->healthy = false;
    route_forget(r->policy, u);
    for (int i = 0; i < up->n_idle; i++)
        free_conn_later(r, up->idle[i]);
    up->n_idle = 0;
    fprintf(stderr, "hearth route: %s demoted: %s\n", up->url, why);
}

/* The error's body in Anthropic's shape or OpenAI's, as an event or JSON; malloc'd. The
 * event ends a stream cut mid-way, so OpenAI's has no "data: [DONE]" after it: a client
 * that trusts [DONE] must not take the cut answer as whole (Anthropic's has no
 * message_stop for the same reason). */
static char *error_body(bool anthropic, const struct oai_error *e, bool sse, size_t *len)
{
    if (sse)
        return anthropic ? anth_error_sse(e, len) : oai_error_sse(e, len);
    char *s = anthropic ? anth_error_json(e) : oai_error_json(e);
    *len    = s ? strlen(s) : 0;
    return s;
}

static void reply_json(struct evhttp_request *req, int status, const char *reason, const char *body,
                       size_t len)
{
    struct evbuffer *b = evbuffer_new();
    if (!b) {
        evhttp_send_error(req, 500, NULL);
        return;
    }
    evbuffer_add(b, body, len);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
    evhttp_send_reply(req, status, reason, b);
    evbuffer_free(b);
}

static const char *reason_of(int status)
{
    switch (status) {
    case 401:
        return "Unauthorized";
    case 404:
        return "Not Found";
    case 413:
        return "Payload Too Large";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    default:
        return status < 400 ? "OK" : status < 500 ? "Bad Request" : "Internal Server Error";
    }
}

/* An error of the router's own, before any reply started. */
static void reply_error(struct evhttp_request *req, bool anthropic, int status, const char *type,
                        const char *msg)
{
    struct oai_error e;
    oai_fail(&e, status, type, NULL, NULL, "%s", msg);
    size_t len;
    char *body = error_body(anthropic, &e, false, &len);
    if (!body) {
        evhttp_send_error(req, 500, NULL);
        return;
    }
    reply_json(req, status, reason_of(status), body, len);
    free(body);
}

static bool hop_by_hop(const char *k)
{
    static const char *const h[] = {"Connection",
                                    "Keep-Alive",
                                    "Transfer-Encoding",
                                    "Content-Length",
                                    "Proxy-Connection",
                                    "Proxy-Authenticate",
                                    "Proxy-Authorization",
                                    "TE",
                                    "Trailer",
                                    "Upgrade",
                                    "Host"};
    for (size_t i = 0; i < sizeof h / sizeof h[0]; i++)
        if (!strcasecmp(k, h[i]))
            return true;
    return false;
}

/* ---------------------------------------------------------- the client --- */

static void dispatch(struct proxied *p);
static void pump_queue(struct router *r);

static void proxied_free(struct proxied *p)
{
    if (p->ev_closed)
        event_free(p->ev_closed);
    if (p->errbody)
        evbuffer_free(p->errbody);
    free(p->uri);
    free(p->body);
    free(p->h);
    free(p);
}

static void unqueue(struct proxied *p)
{
    struct router *r    = p->r;
    struct proxied **pp = &r->qhead, *prev = NULL;
    for (; *pp; prev = *pp, pp = &(*pp)->qnext)
        if (*pp == p) {
            *pp = p->qnext;
            if (r->qtail == p)
                r->qtail = prev;
            r->n_queued--;
            p->queued = false;
            return;
        }
}

/* Forgets the client's connection callbacks; afterwards p->client is NULL. */
static struct evhttp_request *detach_client(struct proxied *p)
{
    if (p->ev_closed) {
        event_free(p->ev_closed);
        p->ev_closed = NULL;
    }
    struct evhttp_request *req = p->client;
    p->client                  = NULL;
    if (req) {
        struct evhttp_connection *evcon = evhttp_request_get_connection(req);
        if (evcon)
            evhttp_connection_set_closecb(evcon, NULL, NULL);
    }
    return req;
}

/* The current attempt's upstream request is no longer wanted (the client went). */
static void cancel_attempt(struct proxied *p)
{
    if (!p->ureq)
        return;
    struct evhttp_request *u = p->ureq;
    p->ureq                  = NULL;
    p->cancelling            = true;
    evhttp_cancel_request(u); /* resets the connection; only the error callback runs */
    p->cancelling = false;
    free_conn_later(p->r, p->conn);
    p->conn = NULL;
    route_finished(p->r->policy, p->up);
    pump_queue(p->r);
}

/* The client hung up: nothing more is sent to it, and p goes once its attempt is undone. */
static void client_gone(struct proxied *p)
{
    if (p->queued)
        unqueue(p);
    cancel_attempt(p);
    proxied_free(p);
}

static void on_peer_closed(evutil_socket_t fd, short what, void *arg)
{
    struct proxied *p = arg;
    if (!http_peer_hung_up(fd, what))
        return;
    struct evhttp_request *req = detach_client(p);
    if (req) {
        /* ends it with nothing more to say: the connection is being closed */
        struct evhttp_connection *evcon = evhttp_request_get_connection(req);
        if (evcon)
            evhttp_connection_free(evcon);
    }
    client_gone(p);
}

static void on_client_close(struct evhttp_connection *evcon, void *arg)
{
    struct proxied *p = arg;
    evhttp_connection_set_closecb(evcon, NULL, NULL);
    if (p->ev_closed) {
        event_free(p->ev_closed);
        p->ev_closed = NULL;
    }
    if (p->client && !evhttp_request_get_connection(p->client))
        evhttp_request_free(p->client);
    p->client = NULL;
    client_gone(p);
}

static void watch_client(struct proxied *p)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(p->client);
    if (!evcon)
        return;
    http_no_delay(evcon);
    evhttp_connection_set_closecb(evcon, on_client_close, p);
    const evutil_socket_t fd = bufferevent_getfd(evhttp_connection_get_bufferevent(evcon));
    if (fd >= 0) {
        p->ev_closed =
            event_new(p->r->base, fd, p->r->early_close ? EV_CLOSED : EV_READ, on_peer_closed, p);
        if (p->ev_closed)
            event_add(p->ev_closed, NULL);
    }
}

/* The end of p: its reply is complete (or was cut), the client released. */
static void finish(struct proxied *p)
{
    struct evhttp_request *req = detach_client(p);
    if (req)
        evhttp_send_reply_end(req);
    proxied_free(p);
}

/* p could not be served: its error to the client (no reply has started). */
static void fail_request(struct proxied *p, int status, const char *type, const char *msg)
{
    struct evhttp_request *req = detach_client(p);
    if (req)
        reply_error(req, p->anthropic, status, type, msg);
    proxied_free(p);
}

/* ------------------------------------------------------- the upstreams --- */

static void record_latency(struct upstream *up, double s)
{
    int b = 0;
    while (b < N_BUCKETS && s > buckets[b])
        b++;
    up->lat[b]++;
    up->lat_sum += s;
}

/* The attempt on p->up ended without a reply started: try the next upstream, or give up. */
static void attempt_failed(struct proxied *p, bool demote_it)
{
    struct router *r = p->r;
    const int32_t u  = p->up;
    r->up[u].failures++;
    if (demote_it)
        demote(r, u, p->why);
    route_finished(r->policy, u);
    p->up = -1;
    if (!p->client) { /* gone meanwhile */
        proxied_free(p);
        pump_queue(r);
        return;
    }
    if (p->attempts < r->n_up) {
        r->failovers++;
        fprintf(stderr, "hearth route: %s %s failed on %s (%s), trying another\n",
                p->method == EVHTTP_REQ_GET ? "GET" : "POST", p->uri, r->up[u].url, p->why);
        dispatch(p);
    } else if (p->failed && p->errbody) {
        /* every upstream answered 5xx: the last one's answer is the client's */
        struct evhttp_request *req = detach_client(p);
        r->exhausted++;
        if (req) {
            evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                              "application/json");
            evhttp_send_reply(req, p->status, reason_of(p->status), p->errbody);
        }
        proxied_free(p);
    } else {
        char msg[256];
        r->exhausted++;
        snprintf(msg, sizeof msg, "no upstream could take the request (the last, %s: %s)",
                 r->up[u].url, p->why);
        fail_request(p, 502, "server_error", msg);
    }
    pump_queue(r);
}

static int on_upstream_headers(struct evhttp_request *ureq, void *arg)
{
    struct proxied *p = arg;
    p->status         = evhttp_request_get_response_code(ureq);
    if (p->conn)
        http_no_delay(p->conn);
    if (p->status >= 500) {
        p->failed = true;
        p->busy   = p->status == 503;
        snprintf(p->why, sizeof p->why, "answered %d", p->status);
        if (!p->errbody)
            p->errbody = evbuffer_new();
    }
    return 0;
}

/*
 * The client's reply starts with the upstream's first byte of body (or its
 * end), not its head: a server that sends a stream's head at once and dies
 * before the first event (a replica killed while it prefills) is then still
 * a failure before the first byte, retried elsewhere.
 */
static void start_reply(struct proxied *p, struct evhttp_request *ureq)
{
    struct evkeyvalq *in  = evhttp_request_get_input_headers(ureq);
    struct evkeyvalq *out = evhttp_request_get_output_headers(p->client);
    for (struct evkeyval *h = in->tqh_first; h; h = h->next.tqe_next)
        if (!hop_by_hop(h->key)) {
            evhttp_add_header(out, h->key, h->value);
            if (!strcasecmp(h->key, "Content-Type") &&
                !strncasecmp(h->value, "text/event-stream", 17))
                p->sse = true;
        }
    evhttp_add_header(out, "X-Hearth-Upstream", p->r->up[p->up].url);
    evhttp_send_reply_start(p->client, p->status, evhttp_request_get_response_code_line(ureq));
    p->started = true;
}

static void on_upstream_chunk(struct evhttp_request *ureq, void *arg)
{
    struct proxied *p  = arg;
    struct evbuffer *b = evhttp_request_get_input_buffer(ureq);
    if (p->failed) {
        if (p->errbody && evbuffer_get_length(p->errbody) < ERRBODY_MAX)
            evbuffer_add_buffer(p->errbody, b);
        evbuffer_drain(b, evbuffer_get_length(b));
    } else if (p->client && evbuffer_get_length(b)) {
        if (!p->started)
            start_reply(p, ureq);
        evhttp_send_reply_chunk(p->client, b);
    } else {
        evbuffer_drain(b, evbuffer_get_length(b));
    }
}

static void on_upstream_error(enum evhttp_request_error e, void *arg)
{
    struct proxied *p = arg;
    if (p->cancelling)
        return;
    static const char *const what[] = {"timed out",        "closed the connection",
                                       "sent bad headers", "connection failed",
                                       "cancelled",        "sent too much"};
    const char *w = (unsigned)e < sizeof what / sizeof what[0] ? what[e] : "failed";
    if (e == EVREQ_HTTP_EOF && !p->started && !p->status)
        w = "refused or reset the connection";
    snprintf(p->why, sizeof p->why, "%s", w);
}

static void on_upstream_done(struct evhttp_request *ureq, void *arg)
{
    struct proxied *p           = arg;
    struct router *r            = p->r;
    const int32_t u             = p->up;
    struct upstream *up         = &r->up[u];
    p->ureq                     = NULL;
    struct evhttp_connection *c = p->conn;
    p->conn                     = NULL;
    record_latency(up, now_s() - p->t_attempt);
    if (!ureq || !p->status) { /* the connection failed: libevent freed the request */
        if (!p->why[0])        /* libevent says nothing when the connection could not be made */
            snprintf(p->why, sizeof p->why, "%s", p->started ? "failed" : "could not connect");
        free_conn_later(r, c);
        if (p->started) { /* the reply is under way: end it so the client sees the failure */
            up->cut++;
            demote(r, u, p->why);
            route_finished(r->policy, u);
            struct evhttp_request *req = detach_client(p);
            if (req) {
                if (p->sse) {
                    struct oai_error e;
                    oai_fail(&e, 502, "server_error", NULL, NULL,
                             "the upstream %s failed mid-stream (%s)", up->url, p->why);
                    size_t len;
                    char *body         = error_body(p->anthropic, &e, true, &len);
                    struct evbuffer *b = evbuffer_new();
                    if (body && b) {
                        evbuffer_add(b, body, len);
                        evhttp_send_reply_chunk(req, b);
                    }
                    evbuffer_free(b);
                    free(body);
                    evhttp_send_reply_end(req);
                } else {
                    /* a plain body cannot carry the error: cut it short of its end */
                    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
                    if (evcon)
                        evhttp_connection_free(evcon);
                }
            }
            proxied_free(p);
            pump_queue(r);
            return;
        }
        attempt_failed(p, true);
        return;
    }
    up->status[p->status / 100 < 6 ? p->status / 100 : 5]++;
    if (p->failed) { /* a 5xx, read whole: not passed on unless nothing else answers */
        conn_put(r, u, c);
        attempt_failed(p, !p->busy);
        return;
    }
    conn_put(r, u, c);
    route_finished(r->policy, u);
    if (p->client && !p->started) /* a reply with no body */
        start_reply(p, ureq);
    finish(p);
    pump_queue(r);
}

/* Sends p to upstream u. */
static bool send_to(struct proxied *p, int32_t u)
{
    struct router *r            = p->r;
    struct upstream *up         = &r->up[u];
    struct evhttp_connection *c = conn_get(r, u);
    struct evhttp_request *ureq = c ? evhttp_request_new(on_upstream_done, p) : NULL;
    if (!ureq) {
        free_conn_later(r, c);
        return false;
    }
    evhttp_request_set_header_cb(ureq, on_upstream_headers);
    evhttp_request_set_chunked_cb(ureq, on_upstream_chunk);
    evhttp_request_set_error_cb(ureq, on_upstream_error);
    struct evkeyvalq *in  = evhttp_request_get_input_headers(p->client);
    struct evkeyvalq *out = evhttp_request_get_output_headers(ureq);
    for (struct evkeyval *h = in->tqh_first; h; h = h->next.tqe_next)
        if (!hop_by_hop(h->key))
            evhttp_add_header(out, h->key, h->value);
    evhttp_add_header(out, "Host", up->t.hostport);
    if (p->body_len) {
        char len[32];
        snprintf(len, sizeof len, "%zu", p->body_len);
        evhttp_add_header(out, "Content-Length", len);
        evbuffer_add(evhttp_request_get_output_buffer(ureq), p->body, p->body_len);
    }
    char *uri = malloc(strlen(up->t.prefix) + strlen(p->uri) + 1);
    if (!uri) {
        evhttp_request_free(ureq);
        free_conn_later(r, c);
        return false;
    }
    strcpy(uri, up->t.prefix);
    strcat(uri, p->uri);
    p->up        = u;
    p->conn      = c;
    p->ureq      = ureq;
    p->status    = 0;
    p->failed    = false;
    p->busy      = false;
    p->why[0]    = 0;
    p->t_attempt = now_s();
    p->tried[u]  = true;
    p->attempts++;
    up->requests++;
    route_started(r->policy, u, p->h, p->n, now_s() - r->t0);
    const int rc = evhttp_make_request(c, ureq, p->method, uri);
    free(uri);
    if (rc != 0) { /* evhttp_make_request freed ureq */
        p->ureq = NULL;
        p->conn = NULL;
        free_conn_later(r, c);
        snprintf(p->why, sizeof p->why, "could not send the request");
        attempt_failed(p, true);
    }
    return true;
}

/*
 * Picks an upstream for p and sends it there; or queues p when every
 * upstream it may use is at --max-in-flight; or answers the client when
 * none is left.
 */
static void dispatch(struct proxied *p)
{
    struct router *r                 = p->r;
    bool usable[ROUTE_MAX_UPSTREAMS] = {0}, any = false, saturated = false;
    for (int32_t u = 0; u < r->n_up; u++) {
        if (p->tried[u] || !r->up[u].healthy)
            continue;
        if (route_in_flight(r->policy, u) >= r->p.max_in_flight)
            saturated = true;
        else
            usable[u] = any = true;
    }
    if (!any && !saturated) /* none healthy left: a demoted one may have recovered */
        for (int32_t u = 0; u < r->n_up; u++)
            if (!p->tried[u] && route_in_flight(r->policy, u) < r->p.max_in_flight)
                usable[u] = any = true;
    if (!any) {
        if (saturated) {
            if (r->n_queued < r->p.max_queue) {
                p->queued = true;
                p->qnext  = NULL;
                if (r->qtail)
                    r->qtail->qnext = p;
                else
                    r->qhead = p;
                r->qtail = p;
                r->n_queued++;
                return;
            }
            r->rejected++;
            struct evhttp_request *req = detach_client(p);
            if (req) {
                evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "1");
                reply_error(req, p->anthropic, 503, "server_error",
                            "every upstream is busy and the queue is full; retry shortly");
            }
            proxied_free(p);
            return;
        }
        char msg[256];
        r->exhausted++;
        snprintf(msg, sizeof msg, "no upstream could take the request%s%s", p->why[0] ? ": " : "",
                 p->why);
        fail_request(p, 502, "server_error", msg);
        return;
    }
    const struct route_pick pick = route_choose(r->policy, p->h, p->n, usable, now_s() - r->t0);
    r->decisions[pick.reason]++;
    if (!send_to(p, pick.upstream))
        fail_request(p, 500, "server_error", "out of memory");
}

/*
 * Sends waiting requests while an upstream has room: one pass over the
 * queue as it is now, since a request may go back to its tail (the only
 * upstreams with room are ones it has tried).
 */
static void pump_queue(struct router *r)
{
    for (int32_t n = r->n_queued; n > 0 && r->qhead; n--) {
        bool room = false;
        for (int32_t u = 0; u < r->n_up && !room; u++)
            room = r->up[u].healthy && route_in_flight(r->policy, u) < r->p.max_in_flight;
        if (!room)
            return;
        struct proxied *p = r->qhead;
        unqueue(p);
        dispatch(p);
    }
}

/* ---------------------------------------------------------- /v1/models --- */

struct fanout {
    struct router *r;
    struct evhttp_request *client;
    int pending;
    cJSON *data; /* the models, each id once */
};

static void fanout_done(struct fanout *f)
{
    if (--f->pending > 0)
        return;
    if (f->client) {
        struct evhttp_connection *evcon = evhttp_request_get_connection(f->client);
        if (evcon)
            evhttp_connection_set_closecb(evcon, NULL, NULL);
        if (cJSON_GetArraySize(f->data) == 0) {
            reply_error(f->client, false, 502, "server_error", "no upstream listed its models");
        } else {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "object", "list");
            cJSON_AddItemToObject(o, "data", f->data);
            f->data = NULL;
            char *s = cJSON_PrintUnformatted(o);
            cJSON_Delete(o);
            if (s)
                reply_json(f->client, 200, "OK", s, strlen(s));
            else
                evhttp_send_error(f->client, 500, NULL);
            free(s);
        }
    }
    cJSON_Delete(f->data);
    free(f);
}

struct fanout_leg {
    struct fanout *f;
    struct evhttp_connection *c;
};

static void on_models(struct evhttp_request *ureq, void *arg)
{
    struct fanout_leg *leg = arg;
    struct fanout *f       = leg->f;
    if (ureq && evhttp_request_get_response_code(ureq) == 200) {
        struct evbuffer *b = evhttp_request_get_input_buffer(ureq);
        const size_t n     = evbuffer_get_length(b);
        cJSON *j           = cJSON_ParseWithLength((const char *)evbuffer_pullup(b, -1), n);
        const cJSON *m;
        cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(j, "data"))
        {
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(m, "id");
            bool seen       = !cJSON_IsString(id);
            const cJSON *o;
            cJSON_ArrayForEach(o, f->data) if (!seen)
            {
                const cJSON *oid = cJSON_GetObjectItemCaseSensitive(o, "id");
                seen = cJSON_IsString(oid) && !strcmp(oid->valuestring, id->valuestring);
            }
            if (!seen)
                cJSON_AddItemToArray(f->data, cJSON_Duplicate(m, true));
        }
        cJSON_Delete(j);
    }
    free_conn_later(f->r, leg->c);
    free(leg);
    fanout_done(f);
}

static void on_models_client_close(struct evhttp_connection *evcon, void *arg)
{
    struct fanout *f = arg;
    evhttp_connection_set_closecb(evcon, NULL, NULL);
    f->client = NULL; /* evhttp frees the request with its connection */
}

static void models(struct router *r, struct evhttp_request *req)
{
    struct fanout *f = calloc(1, sizeof *f);
    if (!f || !(f->data = cJSON_CreateArray())) {
        free(f);
        evhttp_send_error(req, 500, NULL);
        return;
    }
    f->r                            = r;
    f->client                       = req;
    f->pending                      = 1; /* this function's own, so the reply waits for every leg */
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    if (evcon)
        evhttp_connection_set_closecb(evcon, on_models_client_close, f);
    for (int32_t u = 0; u < r->n_up; u++) {
        if (!r->up[u].healthy)
            continue;
        struct fanout_leg *leg = calloc(1, sizeof *leg);
        struct evhttp_connection *c =
            leg ? evhttp_connection_base_new(r->base, NULL, r->up[u].t.host,
                                             (ev_uint16_t)r->up[u].t.port)
                : NULL;
        struct evhttp_request *ureq = c ? evhttp_request_new(on_models, leg) : NULL;
        if (!ureq) {
            if (c)
                evhttp_connection_free(c);
            free(leg);
            continue;
        }
        evhttp_connection_set_timeout(c, 10);
        leg->f = f;
        leg->c = c;
        evhttp_add_header(evhttp_request_get_output_headers(ureq), "Host", r->up[u].t.hostport);
        const char *auth =
            evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
        if (auth)
            evhttp_add_header(evhttp_request_get_output_headers(ureq), "Authorization", auth);
        char uri[300];
        snprintf(uri, sizeof uri, "%s/v1/models", r->up[u].t.prefix);
        f->pending++;
        if (evhttp_make_request(c, ureq, EVHTTP_REQ_GET, uri) != 0) {
            f->pending--;
            evhttp_connection_free(c);
            free(leg);
        }
    }
    fanout_done(f);
}

/* ------------------------------------------------------------ probes --- */

struct probe {
    struct router *r;
    int32_t u;
    int32_t own; /* the router's requests in flight there when it asked */
};

static void on_probe(struct evhttp_request *ureq, void *arg)
{
    struct probe *pr    = arg;
    struct router *r    = pr->r;
    struct upstream *up = &r->up[pr->u];
    up->probing         = false;
    const int status    = ureq ? evhttp_request_get_response_code(ureq) : 0;
    if (status == 200 && !up->healthy) {
        up->healthy = true;
        fprintf(stderr, "hearth route: %s is back\n", up->url);
        pump_queue(r);
    } else if (status != 200 && up->healthy) {
        char why[64];
        snprintf(why, sizeof why, status ? "/health answered %d" : "/health did not answer",
                 status);
        demote(r, pr->u, why);
    }
    free(pr);
}

/* An upstream's /metrics: what it says it serves and queues, for the policy's load. */
static void on_report(struct evhttp_request *ureq, void *arg)
{
    struct probe *pr = arg;
    int32_t n        = -1;
    if (ureq && evhttp_request_get_response_code(ureq) == 200) {
        struct evbuffer *b = evhttp_request_get_input_buffer(ureq);
        const size_t len   = evbuffer_get_length(b);
        n = route_report_parse((const char *)evbuffer_pullup(b, (ev_ssize_t)len), len);
    }
    if (pr->r->p.reported_load)
        route_reported(pr->r->policy, pr->u, n, pr->own);
    pr->r->up[pr->u].reported = n;
    free(pr);
}

static void probe_all(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    struct router *r = arg;
    for (int32_t u = 0; u < r->n_up; u++) {
        struct upstream *up = &r->up[u];
        if (up->probing)
            continue;
        if (!up->probe) {
            up->probe =
                evhttp_connection_base_new(r->base, NULL, up->t.host, (ev_uint16_t)up->t.port);
            if (!up->probe)
                continue;
            const double t          = r->p.probe_s < 5 ? r->p.probe_s : 5;
            const struct timeval tv = tv_of(t);
            evhttp_connection_set_timeout_tv(up->probe, &tv);
        }
        struct probe *pr            = malloc(sizeof *pr);
        struct evhttp_request *ureq = pr ? evhttp_request_new(on_probe, pr) : NULL;
        if (!ureq) {
            free(pr);
            continue;
        }
        pr->r = r;
        pr->u = u;
        evhttp_add_header(evhttp_request_get_output_headers(ureq), "Host", up->t.hostport);
        char uri[300];
        snprintf(uri, sizeof uri, "%s/health", up->t.prefix);
        up->probing = true;
        if (evhttp_make_request(up->probe, ureq, EVHTTP_REQ_GET, uri) != 0) {
            up->probing = false;
            continue;
        }
        /* and its load, where it exports it, on the same connection after /health */
        struct probe *rp            = malloc(sizeof *rp);
        struct evhttp_request *mreq = rp ? evhttp_request_new(on_report, rp) : NULL;
        if (!mreq) {
            free(rp);
            continue;
        }
        rp->r   = r;
        rp->u   = u;
        rp->own = route_in_flight(r->policy, u);
        evhttp_add_header(evhttp_request_get_output_headers(mreq), "Host", up->t.hostport);
        snprintf(uri, sizeof uri, "%s/metrics", up->t.prefix);
        evhttp_make_request(up->probe, mreq, EVHTTP_REQ_GET, uri);
    }
}

/* ----------------------------------------------------------- /metrics --- */

static void metrics(struct router *r, struct evhttp_request *req)
{
    struct evbuffer *b = evbuffer_new();
    if (!b) {
        evhttp_send_error(req, 500, NULL);
        return;
    }
#define FAMILY(name, type, help)                                                                   \
    evbuffer_add_printf(b, "# HELP " name " " help "\n# TYPE " name " " type "\n")
    FAMILY("hearth_route_requests_total", "counter", "Requests sent to an upstream.");
    for (int32_t u = 0; u < r->n_up; u++)
        evbuffer_add_printf(b, "hearth_route_requests_total{upstream=\"%s\"} %llu\n", r->up[u].url,
                            (unsigned long long)r->up[u].requests);
    FAMILY("hearth_route_responses_total", "counter",
           "Upstream replies read to their end, by status class.");
    for (int32_t u = 0; u < r->n_up; u++)
        for (int c = 1; c < 6; c++)
            evbuffer_add_printf(
                b, "hearth_route_responses_total{upstream=\"%s\",class=\"%dxx\"} %llu\n",
                r->up[u].url, c, (unsigned long long)r->up[u].status[c]);
    FAMILY("hearth_route_errors_total", "counter",
           "Upstream failures: before the reply started (retried elsewhere) or after (cut).");
    for (int32_t u = 0; u < r->n_up; u++) {
        evbuffer_add_printf(b, "hearth_route_errors_total{upstream=\"%s\",when=\"before\"} %llu\n",
                            r->up[u].url, (unsigned long long)r->up[u].failures);
        evbuffer_add_printf(b, "hearth_route_errors_total{upstream=\"%s\",when=\"after\"} %llu\n",
                            r->up[u].url, (unsigned long long)r->up[u].cut);
    }
    FAMILY("hearth_route_in_flight", "gauge", "Requests an upstream is serving now.");
    for (int32_t u = 0; u < r->n_up; u++)
        evbuffer_add_printf(b, "hearth_route_in_flight{upstream=\"%s\"} %d\n", r->up[u].url,
                            route_in_flight(r->policy, u));
    FAMILY("hearth_route_upstream_reported", "gauge",
           "Requests an upstream says it runs and queues (its /metrics), -1 when it does not say.");
    for (int32_t u = 0; u < r->n_up; u++)
        evbuffer_add_printf(b, "hearth_route_upstream_reported{upstream=\"%s\"} %d\n", r->up[u].url,
                            r->up[u].reported);
    FAMILY("hearth_route_upstream_healthy", "gauge", "1 while an upstream takes requests.");
    for (int32_t u = 0; u < r->n_up; u++)
        evbuffer_add_printf(b, "hearth_route_upstream_healthy{upstream=\"%s\"} %d\n", r->up[u].url,
                            r->up[u].healthy ? 1 : 0);
    FAMILY("hearth_route_prefix_blocks", "gauge",
           "Prompt blocks of 256 bytes the router remembers sending an upstream.");
    for (int32_t u = 0; u < r->n_up; u++)
        evbuffer_add_printf(b, "hearth_route_prefix_blocks{upstream=\"%s\"} %lld\n", r->up[u].url,
                            (long long)route_remembered(r->policy, u));
    FAMILY("hearth_route_request_seconds", "histogram",
           "Seconds from sending a request to an upstream to the end of its reply.");
    for (int32_t u = 0; u < r->n_up; u++) {
        uint64_t cum = 0;
        for (int k = 0; k < N_BUCKETS; k++) {
            cum += r->up[u].lat[k];
            evbuffer_add_printf(
                b, "hearth_route_request_seconds_bucket{upstream=\"%s\",le=\"%g\"} %llu\n",
                r->up[u].url, buckets[k], (unsigned long long)cum);
        }
        cum += r->up[u].lat[N_BUCKETS];
        evbuffer_add_printf(
            b, "hearth_route_request_seconds_bucket{upstream=\"%s\",le=\"+Inf\"} %llu\n",
            r->up[u].url, (unsigned long long)cum);
        evbuffer_add_printf(b, "hearth_route_request_seconds_sum{upstream=\"%s\"} %.6f\n",
                            r->up[u].url, r->up[u].lat_sum);
        evbuffer_add_printf(b, "hearth_route_request_seconds_count{upstream=\"%s\"} %llu\n",
                            r->up[u].url, (unsigned long long)cum);
    }
    FAMILY("hearth_route_decisions_total", "counter", "Routing decisions by reason.");
    for (int k = 0; k < ROUTE_REASONS; k++)
        evbuffer_add_printf(b, "hearth_route_decisions_total{reason=\"%s\"} %llu\n",
                            route_reason_name((enum route_reason)k),
                            (unsigned long long)r->decisions[k]);
    FAMILY("hearth_route_failovers_total", "counter",
           "Requests moved to another upstream after a failure before their reply started.");
    evbuffer_add_printf(b, "hearth_route_failovers_total %llu\n", (unsigned long long)r->failovers);
    FAMILY("hearth_route_rejected_total", "counter",
           "Requests answered 503 because every upstream was busy and the queue full.");
    evbuffer_add_printf(b, "hearth_route_rejected_total %llu\n", (unsigned long long)r->rejected);
    FAMILY("hearth_route_exhausted_total", "counter", "Requests every upstream failed.");
    evbuffer_add_printf(b, "hearth_route_exhausted_total %llu\n", (unsigned long long)r->exhausted);
    FAMILY("hearth_route_queue_length", "gauge", "Requests waiting for an upstream.");
    evbuffer_add_printf(b, "hearth_route_queue_length %d\n", r->n_queued);
#undef FAMILY
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      "text/plain; version=0.0.4; charset=utf-8");
    evhttp_send_reply(req, 200, "OK", b);
    evbuffer_free(b);
}

/* ----------------------------------------------------------- requests --- */

static bool authorized(const struct router *r, struct evhttp_request *req)
{
    if (!r->p.api_key)
        return true;
    struct evkeyvalq *h = evhttp_request_get_input_headers(req);
    const char *auth    = evhttp_find_header(h, "Authorization"),
               *x       = evhttp_find_header(h, "x-api-key");
    if (auth && !strncasecmp(auth, "Bearer ", 7) && !strcmp(auth + 7, r->p.api_key))
        return true;
    return x && !strcmp(x, r->p.api_key);
}

static void on_request(struct evhttp_request *req, void *arg)
{
    struct router *r = arg;
    bodylimit_request(req); /* no read timeout while its reply is due */
    const char *uri              = evhttp_request_get_uri(req);
    const enum evhttp_cmd_type m = evhttp_request_get_command(req);
    char path[256];
    const char *q  = strchr(uri, '?');
    const size_t n = q ? (size_t)(q - uri) : strlen(uri);
    snprintf(path, sizeof path, "%.*s", (int)(n < sizeof path ? n : sizeof path - 1), uri);
    const bool anthropic = strstr(path, "/messages") != NULL;
    if (!strcmp(path, "/health")) {
        int healthy = 0;
        for (int32_t u = 0; u < r->n_up; u++)
            healthy += r->up[u].healthy;
        char body[96];
        const int len = snprintf(body, sizeof body, "{\"status\":\"%s\",\"upstreams_healthy\":%d}",
                                 healthy ? "ok" : "unavailable", healthy);
        reply_json(req, healthy ? 200 : 503, healthy ? "OK" : "Service Unavailable", body,
                   (size_t)len);
        return;
    }
    if (!strcmp(path, "/metrics")) {
        metrics(r, req);
        return;
    }
    /* serve's chat page is public (it asks for the key itself): so it is through the router */
    const bool page = m == EVHTTP_REQ_GET && (!strcmp(path, "/") || !strcmp(path, "/index.html"));
    if (!page && !authorized(r, req)) {
        reply_error(req, anthropic, 401,
                    anthropic ? "authentication_error" : "invalid_request_error",
                    "a valid API key is needed (Authorization: Bearer KEY or x-api-key)");
        return;
    }
    if (m == EVHTTP_REQ_GET && (!strcmp(path, "/v1/models") || !strcmp(path, "/models"))) {
        models(r, req);
        return;
    }
    struct proxied *p   = calloc(1, sizeof *p);
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    const size_t len    = evbuffer_get_length(in);
    if (!p || !(p->uri = strdup(uri)) || !(p->body = malloc(len + 1)) ||
        !(p->h = malloc(MAX_BLOCKS * sizeof *p->h))) {
        if (p)
            proxied_free(p);
        evhttp_send_error(req, 500, NULL);
        return;
    }
    evbuffer_copyout(in, p->body, len);
    p->body_len  = len;
    p->r         = r;
    p->client    = req;
    p->method    = m;
    p->up        = -1;
    p->anthropic = anthropic;
    if (len) {
        struct route_prompt pr;
        route_prompt_read(path, p->body, len, (size_t)MAX_BLOCKS * ROUTE_BLOCK, &pr);
        if (pr.text)
            p->n = route_blocks(pr.model, pr.text, pr.len, p->h, MAX_BLOCKS);
        route_prompt_free(&pr);
    }
    watch_client(p);
    dispatch(p);
}

/* A body past --max-body: bodylimit.c answers 413 in the path's API shape. */
static char *on_refused(const char *path, const struct oai_error *e, void *user)
{
    (void)user;
    return strstr(path, "/messages") ? anth_error_json(e) : NULL;
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    struct router *r = arg;
    fprintf(stderr, "hearth route: %s, shutting down\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    event_base_loopexit(r->base, NULL);
}

/* ------------------------------------------------------------- run --- */

struct router_params router_default_params(void)
{
    struct router_params p = {.host             = "127.0.0.1",
                              .port             = 8080,
                              .policy           = route_default_params(),
                              .max_body         = 4u << 20,
                              .timeout_s        = 600,
                              .client_timeout_s = 600,
                              .max_in_flight    = 64,
                              .max_queue        = 256,
                              .probe_s          = 2};
    return p;
}

enum hearth_status router_run(const struct router_params *p, char *err, size_t err_len)
{
    if (p->n_upstream < 1 || p->n_upstream > ROUTE_MAX_UPSTREAMS)
        return fail(HEARTH_EINVAL, err, err_len, "route: give 1 to %d upstreams",
                    ROUTE_MAX_UPSTREAMS);
    if (p->max_in_flight < 1 || p->max_queue < 0 || p->timeout_s <= 0 || p->probe_s <= 0)
        return fail(HEARTH_EINVAL, err, err_len, "route: a limit or timeout is out of range");
    struct router *r = calloc(1, sizeof *r);
    if (!r)
        return fail(HEARTH_ENOMEM, err, err_len, "route: out of memory");
    r->p                  = *p;
    r->n_up               = p->n_upstream;
    r->t0                 = now_s();
    enum hearth_status st = HEARTH_EINVAL;
    for (int32_t u = 0; u < r->n_up; u++) {
        char why[160];
        if (!url_target_parse(p->upstream[u], &r->up[u].t, why, sizeof why)) {
            set_err(err, err_len, "route: --upstream %s: %s", p->upstream[u], why);
            goto out;
        }
        snprintf(r->up[u].url, sizeof r->up[u].url, "%s", p->upstream[u]);
        r->up[u].healthy  = true;
        r->up[u].reported = -1;
    }
    struct route_params rp = p->policy;
    rp.n_upstream          = r->n_up;
    st                     = HEARTH_EIO;
    if (!(r->policy = route_new(&rp))) {
        set_err(err, err_len, "route: the policy's parameters are out of range, or no memory");
        goto out;
    }
    signal(SIGPIPE, SIG_IGN);
    r->base = event_base_new();
    r->http = r->base ? evhttp_new(r->base) : NULL;
    if (!r->http) {
        set_err(err, err_len, "route: cannot create the event loop");
        goto out;
    }
    r->early_close = (event_base_get_features(r->base) & EV_FEATURE_EARLY_CLOSE) != 0;
    evhttp_set_allowed_methods(r->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
                                            EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
                                            EVHTTP_REQ_OPTIONS | EVHTTP_REQ_PATCH);
    if (!bodylimit_install(r->http, p->max_body, 64 * 1024, on_refused, r)) {
        set_err(err, err_len, "route: out of memory");
        goto out;
    }
    const size_t hard =
        p->max_body * 2 > p->max_body + 65536 ? p->max_body * 2 : p->max_body + 65536;
    evhttp_set_max_body_size(r->http, (ev_ssize_t)hard);
    evhttp_set_max_headers_size(r->http, 80 * 1024);
    bodylimit_timeouts(r->http, p->client_timeout_s < 30 ? p->client_timeout_s : 30,
                       p->client_timeout_s);
    evhttp_set_gencb(r->http, on_request, r);
    r->ev_sigint               = evsignal_new(r->base, SIGINT, on_signal, r);
    r->ev_sigterm              = evsignal_new(r->base, SIGTERM, on_signal, r);
    r->ev_probe                = event_new(r->base, -1, EV_PERSIST, probe_all, r);
    const struct timeval every = tv_of(p->probe_s);
    if (!r->ev_sigint || !r->ev_sigterm || !r->ev_probe || event_add(r->ev_sigint, NULL) ||
        event_add(r->ev_sigterm, NULL) || event_add(r->ev_probe, &every)) {
        set_err(err, err_len, "route: cannot create the loop's events");
        goto out;
    }
    char note[32];
    snprintf(note, sizeof note, " (%d upstreams)", r->n_up);
    if (!(r->bound = http_listen(r->http, "route", p->host, p->port, note, err, err_len)))
        goto out;
    probe_all(-1, 0, r);
    event_base_dispatch(r->base);
    st = HEARTH_OK;
out:
    if (r->http)
        evhttp_free(r->http);
    bodylimit_uninstall();
    while (r->qhead) {
        struct proxied *q = r->qhead;
        unqueue(q);
        proxied_free(q);
    }
    for (int32_t u = 0; u < r->n_up; u++) {
        for (int i = 0; i < r->up[u].n_idle; i++)
            evhttp_connection_free(r->up[u].idle[i]);
        if (r->up[u].probe)
            evhttp_connection_free(r->up[u].probe);
    }
    if (r->ev_probe)
        event_free(r->ev_probe);
    if (r->ev_sigint)
        event_free(r->ev_sigint);
    if (r->ev_sigterm)
        event_free(r->ev_sigterm);
    if (r->base)
        event_base_free(r->base);
    route_free(r->policy);
    free(r);
    return st;
}
