/*
 * http.h: the HTTP front of `hearth serve`, an OpenAI-compatible server.
 *
 * Threads (DESIGN.md, decision 7): one libevent loop owns every socket,
 * parses and validates requests (openai.c) and streams the answers; a loader
 * thread maps the model while the listener already answers (/health says
 * 503 until it is ready); the scheduler thread (sched.c) owns the engine.
 * Scheduler events cross to the loop through a mutex-protected queue and
 * event_active(); no engine call happens on the loop and no socket write on
 * the scheduler.
 *
 * Endpoints: POST /v1/chat/completions, POST /v1/completions,
 * GET /v1/models[/ID], GET /health, GET /metrics, GET /slots.
 *
 * Test hook: HEARTH_SERVE_LOAD_DELAY_MS=N in the environment delays the
 * model load by N ms (the e2e test checks /health's 503 with it).
 */
#ifndef HEARTH_HTTP_H
#define HEARTH_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "serve/sched.h"

struct http_params {
    const char *model_path;  /* GGUF file */
    const char *alias;       /* model id reported by /v1/models and responses */
    const char *host;        /* address to bind ("127.0.0.1") */
    int port;                /* 0: any free port (the chosen one is printed) */
    size_t max_body;         /* bytes; larger request bodies get 413 */
    const char *api_key;     /* NULL: no auth; else Bearer KEY on all but /health */
    struct sched_params sched;
};

/*
 * Binds, prints "listening on http://HOST:PORT" on stderr, loads the model,
 * and serves until SIGINT or SIGTERM; then stops taking connections, cancels
 * what is running, and frees everything. Returns 0 after a clean shutdown,
 * or 1 with one sentence in err (bind or model load failed).
 */
int http_serve(const struct http_params *p, char *err, size_t err_len);

#endif
