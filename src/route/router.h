/*
 * router.h: `hearth route`, one OpenAI-compatible endpoint over several
 * upstream servers (hearth, llama-server, vLLM, anything that speaks the
 * API). Requests are forwarded with their bodies unchanged and their
 * replies relayed as they arrive, SSE chunk by chunk; where each goes is
 * policy.c's choice. An upstream that refuses the connection, resets it,
 * times out or answers 5xx before the first byte reached the client is
 * demoted at once and the request retried on another (never more attempts
 * than upstreams); after the first byte a failure ends the stream with an
 * error event. Active probes of /health bring a demoted upstream back.
 *
 * One thread: libevent's loop serves clients and talks to the upstreams
 * (keep-alive connections, pooled by upstream). Memory: a request's body
 * and its prefix blocks while it is in flight, the policy's index.
 */
#ifndef HEARTH_ROUTE_ROUTER_H
#define HEARTH_ROUTE_ROUTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hearth.h"
#include "route/policy.h"

struct router_params {
    const char *upstream[ROUTE_MAX_UPSTREAMS]; /* base URLs: http://HOST:PORT[/PREFIX] */
    int32_t n_upstream;
    const char *host;    /* to listen on (default 127.0.0.1) */
    int port;            /* 0: any free port (printed) */
    const char *api_key; /* clients must send it (Bearer or x-api-key); NULL: open */
    struct route_params policy;
    size_t max_body;         /* bytes of a request body (default 4 MiB) */
    double timeout_s;        /* an upstream's silence, connecting or between bytes, before it
                                counts as failed (default 600) */
    double client_timeout_s; /* a client's silence while sending, between requests or not
                              * reading (default 600); its head gets min(this, 30) */
    int32_t max_in_flight;   /* requests an upstream carries at once; more wait (default 64) */
    int32_t max_queue;       /* requests waiting for an upstream; more get 503 (default 256) */
    double probe_s;          /* seconds between /health probes of each upstream (default 2) */
    bool reported_load;      /* add what upstreams report serving for other clients (their
                                /metrics, up to probe_s old) to the router's own count; off by
                                default: a stale report skews a burst */
};

struct router_params router_default_params(void);

/*
 * Runs the router until SIGINT or SIGTERM. Prints "hearth route: listening
 * on http://HOST:PORT" on stderr once it accepts. HEARTH_OK after a clean
 * stop; an error (a bad upstream URL, the address in use) with one sentence
 * in err.
 */
enum hearth_status router_run(const struct router_params *p, char *err, size_t err_len);

#endif
