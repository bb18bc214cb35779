/*
 * handlers.h: every handler of routes.h, and the other work of the
 * handlers' side that the loop hands on (a preparation that is not a
 * generation, a slot action's end). Defined in endpoints.c, webui.c and
 * slot_actions.c; routes.c puts them in the table (route_table.h) through
 * which the loop, http.c, reaches them, so http.c never names a handler
 * and the handlers' files only call down into the loop's services
 * (server.h).
 */
#ifndef HEARTH_HANDLERS_H
#define HEARTH_HANDLERS_H

struct evhttp_request;
struct pending;
struct sched_slot_op;
struct server;
struct task;

/* ---- generation (endpoints.c) ---- */
void h_chat(struct server *s, struct evhttp_request *req);
void h_completions(struct server *s, struct evhttp_request *req);
void h_responses(struct server *s, struct evhttp_request *req);
void h_messages(struct server *s, struct evhttp_request *req);

/* ---- the other routes (endpoints.c) ---- */
void h_models(struct server *s, struct evhttp_request *req);
void h_model_one(struct server *s, struct evhttp_request *req, const char *id);
void h_health(struct server *s, struct evhttp_request *req);
void h_metrics(struct server *s, struct evhttp_request *req);
void h_slots(struct server *s, struct evhttp_request *req);
void h_props(struct server *s, struct evhttp_request *req);
void h_apply_template(struct server *s, struct evhttp_request *req);
void h_tokenize(struct server *s, struct evhttp_request *req);
void h_detokenize(struct server *s, struct evhttp_request *req);
void h_count_tokens(struct server *s, struct evhttp_request *req);
/* On the prep thread: the work of a PK_TEMPLATE, PK_TOKENIZE, PK_DETOKENIZE or PK_COUNT_TOKENS
 * task. */
void endpoints_prepare(struct task *t);

/* ---- the chat page (webui.c) ---- */
void h_webui(struct server *s, struct evhttp_request *req);

/* ---- slot actions (slot_actions.c) ---- */
void h_slot_action(struct server *s, struct evhttp_request *req);
/* On the loop: p's action is back from the scheduler; replies and frees p. */
void slot_action_done(struct pending *p, const struct sched_slot_op *op);

#endif
