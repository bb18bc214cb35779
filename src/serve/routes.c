/*
 * routes.c: the route table (route_table.h), the one place that puts
 * routes.h's list and the handlers (handlers.h) together.
 */
#include "serve/handlers.h"
#include "serve/route_table.h"

/* clang-format off */
static const struct serve_route routes[] = {
#define ROUTES_X_ROUTE(id, path, method, auth, handler)                                            \
    {path, EVHTTP_REQ_##method, #method, id, auth, handler},
    SERVE_ROUTE_LIST(ROUTES_X_ROUTE)
#undef ROUTES_X_ROUTE
};
/* clang-format on */

/* clang-format off */
static const struct serve_alias aliases[] = {
#define ROUTES_X_ALIAS(path, id) {path, id},
    SERVE_ALIAS_LIST(ROUTES_X_ALIAS)
#undef ROUTES_X_ALIAS
};
/* clang-format on */

const struct serve_handlers serve_handlers = {
    .routes    = routes,
    .n_routes  = sizeof routes / sizeof routes[0],
    .aliases   = aliases,
    .n_aliases = sizeof aliases / sizeof aliases[0],
    .model_one = h_model_one,
    .prepare   = endpoints_prepare,
    .slot_done = slot_action_done,
};
