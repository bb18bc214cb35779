/*
 * reply.h: how a generation's scheduler events become an HTTP reply, for
 * each API the server speaks. Every API is translated onto the chat path
 * (struct oai_request in, sched jobs, sched events out); only the reply's
 * shape differs: OpenAI's chat and text completions (oai_response.c),
 * Anthropic's Messages, OpenAI's Responses. http.c drives a reply through
 * these functions and knows nothing of its shape.
 *
 * The calls follow oai_response's contract (openai.h): each returns the
 * bytes to send now, malloc'd, their count in *len, or NULL with *len 0.
 */
#ifndef HEARTH_REPLY_H
#define HEARTH_REPLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct oai_request;
struct oai_error;
struct sched_event;
struct hearth_model;
struct chat_template;

struct reply_ops {
    /* the reply id's prefix ("chatcmpl-", "msg_"), given the request */
    const char *(*id_prefix)(const struct oai_request *req);
    void *(*create)(const struct oai_request *req, int32_t n_choices, const char *id,
                    int64_t created, const char *model_name, const struct hearth_model *model,
                    const struct chat_template *tmpl, bool thinking);
    char *(*start)(void *r, size_t *len);
    char *(*text)(void *r, const struct sched_event *ev, size_t *len);
    char *(*done)(void *r, const struct sched_event *ev, size_t *len);
    char *(*finish)(void *r, int *status, size_t *len);
    void (*destroy)(void *r);
    /* an error in this API's shape: a whole body, and the same as a stream's last event(s) */
    char *(*error_json)(const struct oai_error *e);
    char *(*error_sse)(const struct oai_error *e, size_t *len);
};

/*
 * Appends the named SSE event "event: name\ndata: json\n\n" to *buf (*len
 * bytes, malloc'd or NULL; kept NUL-terminated), as Anthropic's and the
 * Responses API's streams frame every event. False when out of memory
 * (*buf unchanged).
 */
bool reply_sse_event(char **buf, size_t *len, const char *name, const char *json);

/* OpenAI's chat.completion / text_completion (oai_response.c). */
extern const struct reply_ops oai_reply_ops;

#endif
