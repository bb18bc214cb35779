/*
 * route_table.h: what the loop (http.c) dispatches through: each route of
 * routes.h with its handler, the aliases, and the handlers' side's other
 * entry points. routes.c fills it from handlers.h; http.c only reads it.
 */
#ifndef HEARTH_ROUTE_TABLE_H
#define HEARTH_ROUTE_TABLE_H

#include <event2/http.h>
#include <stdbool.h>
#include <stddef.h>

#include "serve/routes.h"

struct pending;
struct sched_slot_op;
struct server;
struct task;

struct serve_route {
    const char *path;
    enum evhttp_cmd_type method;
    const char *allow; /* the method's name, for Allow and CORS preflights */
    enum metrics_endpoint ep;
    bool auth; /* --api-key guards it */
    void (*fn)(struct server *s, struct evhttp_request *req);
};

struct serve_alias {
    const char *path;
    enum metrics_endpoint ep;
};

struct serve_handlers {
    const struct serve_route *routes; /* [n_routes], SERVE_ROUTE_LIST's order */
    size_t n_routes;
    const struct serve_alias *aliases; /* [n_aliases] */
    size_t n_aliases;
    /* /v1/models/{id}: EP_MODELS's route with the id taken from the path */
    void (*model_one)(struct server *s, struct evhttp_request *req, const char *id);
    /* on the prep thread: a task of any kind but PK_GENERATE */
    void (*prepare)(struct task *t);
    /* on the loop: a PK_SLOT request's action is back from the scheduler */
    void (*slot_done)(struct pending *p, const struct sched_slot_op *op);
};

extern const struct serve_handlers serve_handlers;

#endif
