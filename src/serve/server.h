/*
 * server.h: the state of `hearth serve` that its files share, and the
 * services of the loop (http.c: replies, preparations, pending requests)
 * that the handlers (handlers.h) call. It declares nothing of the
 * handlers': the loop reaches them through the route table
 * (route_table.h). Internal to src/serve/; everything here belongs to the
 * loop thread unless a field says otherwise.
 */
#ifndef HEARTH_SERVER_H
#define HEARTH_SERVER_H

#include <event2/event.h>
#include <event2/http.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "serve/http.h"
#include "serve/metrics.h"
#include "serve/openai.h"
#include "serve/prep.h"
#include "serve/reply.h"

struct cJSON;
struct deadline;

/* A scheduler event copied for the loop: top[] and the text follow the struct. */
struct qev {
    struct qev *next;
    struct sched_event ev; /* text/logprob/top point into this allocation */
    struct sample_logprob lp;
    double t;      /* monotonic arrival */
    char msg[256]; /* a job's last event: its ERROR text (the node is the job's own) */
};

/* What a request waits on the preparation thread for. */
enum pending_kind {
    PK_GENERATE,
    PK_TEMPLATE,
    PK_TOKENIZE,
    PK_DETOKENIZE,
    PK_COUNT_TOKENS,
    PK_SLOT
};

struct pending;

/* A preparation: filled on the loop, run by a prep worker, read back on the loop. */
struct task {
    struct prep_task pt; /* first: the prep module's view */
    struct server *srv;  /* read-only on the prep thread: model, tmpl, sp */
    struct pending *p;
    struct oai_request r;        /* PK_GENERATE, PK_TEMPLATE, PK_COUNT_TOKENS */
    const struct reply_ops *ops; /* PK_GENERATE: the reply's API (NULL: OpenAI's) */
    struct cJSON *body;          /* PK_TOKENIZE, PK_DETOKENIZE: the parsed body */
    uint64_t first_job_id;       /* ids first_job_id .. + OAI_MAX_CHOICES are this task's */
    /* results */
    bool ok;
    struct oai_error e;
    struct sched_job **jobs; /* PK_GENERATE */
    int32_t n_jobs;
    bool thinking; /* the chat prompt ends inside a reasoning block */
    char *json;    /* the other kinds: the 200 body */
};

/* A request that outlives its handler: preparing, or generating. */
struct pending {
    struct server *srv;
    struct pending *next, *prev;
    enum pending_kind kind;
    uint64_t request_id;
    enum metrics_endpoint ep;
    struct evhttp_request *req;  /* NULL once the HTTP side is finished */
    struct event *ev_closed;     /* peer-hangup watch, or NULL */
    struct task *task;           /* on the prep thread, or NULL */
    const struct reply_ops *ops; /* the API this request speaks (errors, the reply) */
    void *resp;                  /* ops' reply, once generating */
    int32_t n_jobs, n_done;      /* jobs submitted; DONE/ERROR events seen */
    bool stream;
    bool gone; /* HTTP side finished early (client gone, shutdown, refusal) */
    double t_start;
    double *t_last;           /* [n_jobs] arrival of each choice's last token, 0 = none */
    struct sched_slot_op *op; /* PK_SLOT: the action, the scheduler's until its event */
    char id[48];              /* "chatcmpl-..." */
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
    struct hearth_model *load_draft;
    struct sched *load_sched;
    struct chat_template *load_tmpl;
    struct grammar_vocab *load_gvocab;
    struct grammar_cache *load_gcache;
    enum hearth_status load_status;
    char load_err[HEARTH_ERR_MAX];

    /* loop thread only (model and tmpl are read by the prep thread too: read-only) */
    bool ready, stopping;
    enum hearth_status exit_status;
    char *fatal; /* message for http_serve's err */
    struct hearth_model *model;
    struct hearth_model *draft; /* --model-draft's, read by the scheduler only; or NULL */
    struct sched *sched;
    struct chat_template *tmpl;
    struct grammar_vocab *gvocab; /* the vocabulary's trie for grammars (read-only) */
    struct grammar_cache *gcache; /* grammars compiled against it, for reuse (thread-safe) */
    struct prep *prep;
    uint64_t n_prep_cancelled; /* preparations skipped or stopped because nobody wanted them */
    int64_t n_prep_tasks;      /* tasks submitted and not yet back */
    struct deadline *deadline; /* armed by the first signal (deadline.h), or NULL */
    struct pending *pending;
    uint64_t next_request_id, next_job_id;
    uint32_t id_salt;
    struct metrics metrics;

    /* the mailbox: scheduler events and finished preparations, to the loop */
    pthread_mutex_t qmu;
    struct qev *qhead, **qtail;
    struct prep_task *phead, **ptail;
};

/* ---- replies (http.c) ---- */

void serve_reply(struct server *s, struct evhttp_request *req, enum metrics_endpoint ep, int status,
                 const char *content_type, const char *body, size_t len);
/* A JSON body (NULL: a 500 "out of memory" instead). */
void serve_reply_json(struct server *s, struct evhttp_request *req, enum metrics_endpoint ep,
                      int status, const char *json);
void serve_reply_error(struct server *s, struct evhttp_request *req, enum metrics_endpoint ep,
                       const struct oai_error *e);
/* A cJSON object as a 200 body (o is deleted). */
void serve_reply_cjson(struct server *s, struct evhttp_request *req, enum metrics_endpoint ep,
                       struct cJSON *o);
/* 503 while loading or stopping; true when requests are served. */
bool serve_check_ready(struct server *s, struct evhttp_request *req, enum metrics_endpoint ep);
/* The body of req when within --max-body (NUL-terminated view, *len bytes); else a 413 sent. */
const char *serve_body(struct server *s, struct evhttp_request *req, enum metrics_endpoint ep,
                       size_t *len);
/*
 * The server's side of the field policy, once a body is parsed into r: the fields it
 * ignored are logged the first time each is seen and counted (under --strict-fields an
 * unknown one is refused: false with *e, in ep's dialect), -n caps the reply, --tool-choice
 * steers a turn's first request.
 */
bool serve_apply_policy(struct server *s, enum metrics_endpoint ep, struct oai_request *r,
                        struct oai_error *e);
/* Hands a request to the preparation thread: a pending record that keeps req until t is back. */
void serve_prepare(struct server *s, struct evhttp_request *req, enum metrics_endpoint ep,
                   enum pending_kind kind, struct task *t);
/* Parses req's body as an OpenAI request of kind, then hands it to serve_prepare as pkind. */
void serve_prepare_oai(struct server *s, struct evhttp_request *req, enum metrics_endpoint ep,
                       enum oai_kind kind, enum pending_kind pkind);
/*
 * A generation request of another API: parse translates the body onto a
 * chat request (false with *e, which goes back in ops' error shape), and
 * ops shapes the reply.
 */
typedef bool (*serve_parse_fn)(const char *body, size_t len, struct oai_request *req,
                               struct oai_error *e);
void serve_generate(struct server *s, struct evhttp_request *req, enum metrics_endpoint ep,
                    serve_parse_fn parse, const struct reply_ops *ops);
/* The error body of endpoint ep's API. */
char *serve_error_json(enum metrics_endpoint ep, const struct oai_error *e);
struct pending *serve_pending_find(struct server *s, uint64_t request_id);
/*
 * A pending record for req: linked, its connection watched, speaking ep's API.
 * serve_prepare makes one for a preparation; a slot action (PK_SLOT) waits on
 * the scheduler itself. NULL (a 500 sent) when out of memory.
 */
struct pending *serve_pending_new(struct server *s, struct evhttp_request *req,
                                  enum metrics_endpoint ep, enum pending_kind kind);
/* Ends p's HTTP side with status and a JSON body (NULL: none), and frees the record. */
void serve_pending_reply(struct pending *p, int status, const char *json);

#endif
