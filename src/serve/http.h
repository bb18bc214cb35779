/*
 * http.h: the HTTP front of `hearth serve`, an OpenAI-compatible server.
 *
 * Threads (docs/ARCHITECTURE.md, "Serving: around the request path"): one
 * libevent loop owns every socket, parses and validates requests
 * (oai_request.c) and streams the answers; a preparation thread (prep.c)
 * renders chat templates and tokenizes; a loader thread maps the model while
 * the listener already answers (/health says 503 until it is ready); the
 * scheduler thread (sched.c) owns the engine.
 * Finished preparations and scheduler events cross to the loop through one
 * mutex-protected mailbox and event_active(); no engine call, template or
 * tokenization happens on the loop and no socket write on the scheduler.
 *
 * Endpoints: routes.h lists them.
 *
 * Test hook, inert unless the variable is set: HEARTH_SERVE_LOAD_GATE=PATH
 * (a FIFO) makes the loader thread read one byte from PATH before it loads
 * the model, so the e2e test sees /health's 503 while loading for as long
 * as it needs (a missing FIFO holds nothing; the loader waits for a writer,
 * as the preparation gate does, so stopping waits for the load to be let go).
 */
#ifndef HEARTH_HTTP_H
#define HEARTH_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sched/sched.h"

struct http_params {
    const char *model_path;  /* GGUF file */
    const char *alias;       /* model id reported by /v1/models and responses */
    const char *host;        /* address to bind ("127.0.0.1") */
    int port;                /* 0: any free port (the chosen one is printed) */
    size_t max_body;         /* bytes; larger request bodies get 413 */
    double timeout_s;        /* --timeout: a connection's silence before it closes (0: 600) */
    const char *api_key;     /* NULL: no auth; else Bearer KEY where routes.h says */
    const char *cors_origin; /* NULL: no CORS headers; else the allowed origin ("*" for any) */
    const char *chat_template_file;   /* a Jinja file overriding the model's template, or NULL */
    const char *chat_template;        /* a built-in template name overriding it, or NULL */
    const char *chat_template_kwargs; /* JSON object of default template kwargs, or NULL */
    int32_t n_gpu_layers;             /* hearth_model_params's: the last N layers on the GPUs */
    const char *devices;              /* hearth_model_params's: the GPUs, or NULL */
    const char *tensor_split;         /* hearth_model_params's: the GPUs' shares, or NULL */
    const char *layer_split;          /* hearth_model_params's: layers per backend, or NULL */
    const char *draft_path;           /* --model-draft: a GGUF file whose model drafts, or NULL */
    const char *slot_save_path;       /* --slot-save-path: the directory of slot files, or NULL */
    bool no_webui;                    /* --no-webui: no chat page at / (webui.c) */
    bool strict_fields;               /* --strict-fields: refuse unknown request fields (400) */
    int32_t n_predict;                /* -n: the most tokens any request generates; -1: no cap */
    const char *tool_choice;        /* --tool-choice: auto|required|none|NAME for requests that end
                                     * with the user's turn and offer tools; NULL: the request's */
    const struct sample_bias *bias; /* [n_bias] --logit-bias: added to every request's (a
                                     * request's own entry for a token wins); -INFINITY bans */
    int32_t n_bias;
    int32_t n_prep_workers; /* --threads-http: preparation workers (prep.h), 1..64; 0: 4 */
    double health_stall_s;  /* --health-stall: /health is 503 while every prep worker, or
                             * the scheduler's step, has been busy this long; 0: at once */
    bool seeded;            /* --seed: a request without a seed samples with seed */
    uint64_t seed;
    struct sched_params sched;
};

/*
 * Binds, prints "listening on http://HOST:PORT" on stderr, loads the model,
 * and serves until SIGINT or SIGTERM; then stops taking connections, cancels
 * what is running, and frees everything. Returns HEARTH_OK after a clean
 * shutdown, or a status with one sentence in err (bind, model or template
 * load failed).
 */
enum hearth_status http_serve(const struct http_params *p, char *err, size_t err_len);

#endif
