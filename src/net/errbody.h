/*
 * errbody.h: the error bodies of the API dialects hearth speaks, built in
 * one place for every answer that carries one (a refused request, a failed
 * choice, a stream cut short, a server shutting down, malformed HTTP), for
 * `hearth serve` and `hearth route` alike: what a client reads must not
 * depend on which of the two answered it.
 *
 * An error is one struct oai_error, whatever the dialect; it renders as
 * OpenAI's {"error":{"message","type","param","code"}} (oai_error_*) or as
 * Anthropic's {"type":"error","error":{"type","message"}}, the error type
 * following the HTTP status (anth_error_*). The Responses API's stream
 * error is serve's (resp_response.c): only serve speaks it.
 *
 * Thread-safety: no shared state.
 */
#ifndef HEARTH_NET_ERRBODY_H
#define HEARTH_NET_ERRBODY_H

#include <stdbool.h>
#include <stddef.h>

struct oai_error {
    int status;        /* HTTP status: 400, 401, 404, 405, 413, 500, 503 */
    const char *type;  /* "invalid_request_error", "server_error", ... (static) */
    const char *code;  /* "invalid_type", ... or NULL (JSON null); static */
    char param[64];    /* the offending field ("messages[1].content"), "" = null */
    char message[512]; /* one sentence */
};

/* Fills e (param may be NULL) and returns false, for `return oai_fail(...)`. */
#if defined(__GNUC__)
__attribute__((format(printf, 6, 7)))
#endif
bool oai_fail(struct oai_error *e, int status, const char *type, const char *code,
              const char *param, const char *fmt, ...);

/* The error's JSON body, malloc'd, NUL-terminated (NULL when out of memory). */
char *oai_error_json(const struct oai_error *e);
/* The same body as one SSE event, with no "data: [DONE]" after it: a client that trusts [DONE]
 * must not take a stream cut by an error as complete (malloc'd, *len bytes). */
char *oai_error_sse(const struct oai_error *e, size_t *len);

/* Anthropic's error type for an HTTP status ("invalid_request_error", "overloaded_error"...). */
const char *anth_error_type(int status);
/* e as Anthropic's error body, malloc'd, NUL-terminated (NULL when out of memory). */
char *anth_error_json(const struct oai_error *e);
/* The same as a stream's last event ("event: error\ndata: {...}\n\n"), malloc'd, *len bytes. */
char *anth_error_sse(const struct oai_error *e, size_t *len);

#endif
