/*
 * routes.h: every endpoint of `hearth serve`, in one list.
 *
 * SERVE_ROUTE_LIST(X): X(id, path, method, auth, handler). The route table
 * (routes.c), the endpoint label of hearth_requests_total (metrics.c) and the
 * enum both come from it, so a route cannot exist without its metric label
 * or the other way round. method is the libevent name's tail (GET, POST);
 * auth says whether --api-key guards it. SERVE_ALIAS_LIST(X): X(path, id),
 * other paths clients use for the same endpoint (counted under its label).
 */
#ifndef HEARTH_ROUTES_H
#define HEARTH_ROUTES_H

/* clang-format off */
#define SERVE_ROUTE_LIST(X)                                                                        \
    X(EP_CHAT, "/v1/chat/completions", POST, true, h_chat)                                         \
    X(EP_COMPLETIONS, "/v1/completions", POST, true, h_completions)                                \
    X(EP_RESPONSES, "/v1/responses", POST, true, h_responses)                                      \
    X(EP_MODELS, "/v1/models", GET, true, h_models)                                                \
    X(EP_HEALTH, "/health", GET, false, h_health)                                                  \
    X(EP_METRICS, "/metrics", GET, true, h_metrics)                                                \
    X(EP_SLOTS, "/slots", GET, true, h_slots)                                                      \
    X(EP_SLOT_ACTION, "/slots/{id}", POST, true, h_slot_action)                                    \
    X(EP_PROPS, "/props", GET, true, h_props)                                                      \
    X(EP_APPLY_TEMPLATE, "/apply-template", POST, true, h_apply_template)                          \
    X(EP_TOKENIZE, "/tokenize", POST, true, h_tokenize)                                            \
    X(EP_DETOKENIZE, "/detokenize", POST, true, h_detokenize)                                      \
    X(EP_MESSAGES, "/v1/messages", POST, true, h_messages)                                         \
    X(EP_COUNT_TOKENS, "/v1/messages/count_tokens", POST, true, h_count_tokens)                    \
    X(EP_WEBUI, "/", GET, false, h_webui)
/* clang-format on */

/* clang-format off */
#define SERVE_ALIAS_LIST(X)                                                                        \
    X("/chat/completions", EP_CHAT)                                                                \
    X("/completions", EP_COMPLETIONS)                                                              \
    X("/responses", EP_RESPONSES)                                                                  \
    X("/models", EP_MODELS)                                                                        \
    X("/v1/health", EP_HEALTH)                                                                     \
    X("/messages", EP_MESSAGES)                                                                    \
    X("/messages/count_tokens", EP_COUNT_TOKENS)                                                   \
    X("/index.html", EP_WEBUI)
/* clang-format on */

/* Endpoints of hearth_requests_total{endpoint=...}: the routes, then everything else. */
enum metrics_endpoint {
#define ROUTES_X_ENUM(id, path, method, auth, handler) id,
    SERVE_ROUTE_LIST(ROUTES_X_ENUM)
#undef ROUTES_X_ENUM
        EP_OTHER,
    EP_COUNT
};

#endif
