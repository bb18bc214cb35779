/*
 * cmd_route.c: `hearth route --upstream URL [--upstream URL ...]`: one
 * OpenAI-compatible endpoint over several servers (src/route/router.c),
 * requests placed by src/route/policy.c.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cmd.h"
#include "opts.h"
#include "route/router.h"

struct route_args {
    struct {
        struct opt_multi url; /* --upstream, 1..ROUTE_MAX_UPSTREAMS */
        int load;             /* LOAD_OWN, LOAD_REPORTED */
        long max_in_flight;
        float timeout_s, probe_s;
    } up;
    struct {
        const char *host, *api_key; /* api_key NULL: HEARTH_API_KEY's, or none */
        long port;                  /* 0: any free one */
        long max_queue;
        int64_t max_body; /* bytes */
        float timeout_s;
    } clients;
    struct {
        int policy; /* enum route_policy */
        long min_match, slack, index_blocks;
        float ttl_s;
    } aff;
};

/* --upstream-load's choices, in their order */
enum { LOAD_OWN, LOAD_REPORTED };

/* OPT_CHOICE stores the index among the choices: they are listed in enum route_policy's order */
_Static_assert(ROUTE_AFFINITY == 0 && ROUTE_ROUND_ROBIN == 1 && ROUTE_LEAST_LOAD == 2,
               "--policy's choices follow enum route_policy");

#define UP(f) offsetof(struct route_args, up.f) - offsetof(struct route_args, up)
/* clang-format off */
static const struct opt upstream_list[] = {
    {.names = "--upstream", .value = "URL", .kind = OPT_MULTI, .off = UP(url),
     .help = "an upstream's base URL (http://HOST:PORT); repeat for each"},
    {.names = "--upstream-load", .value = "SRC", .kind = OPT_CHOICE, .off = UP(load),
     .choices = "own|reported", .def = "own",
     .help = "own: an upstream's load is the requests the router has in flight on it; reported: "
             "plus what its /metrics says it serves for other clients (as of the last probe)"},
    {.names = "--max-in-flight", .value = "N", .kind = OPT_LONG, .off = UP(max_in_flight), .lo = 1,
     .hi = 1 << 20, .def = "64", .help = "requests an upstream carries at once; more wait"},
    {.names = "--timeout", .value = "S", .kind = OPT_FLOAT, .off = UP(timeout_s), .lo = 0.001,
     .hi = 1e6, .def = "600",
     .help = "seconds of an upstream's silence before it counts as failed"},
    {.names = "--probe-interval", .value = "S", .kind = OPT_FLOAT, .off = UP(probe_s), .lo = 0.001,
     .hi = 1e6, .def = "2", .help = "seconds between /health probes of each upstream"},
};
/* clang-format on */
#undef UP

#define CL(f) offsetof(struct route_args, clients.f) - offsetof(struct route_args, clients)
/* clang-format off */
static const struct opt clients_list[] = {
    {.names = "--host", .value = "H", .kind = OPT_STR, .off = CL(host), .def = "127.0.0.1",
     .help = "address to listen on"},
    {.names = "--port", .value = "P", .kind = OPT_LONG, .off = CL(port), .lo = 0, .hi = 65535,
     .def = "8080", .help = "port to listen on; 0: any free one"},
    {.names = "--api-key", .value = "KEY", .kind = OPT_STR, .off = CL(api_key),
     .help = "clients must send it (Authorization: Bearer KEY or x-api-key: KEY); it is "
             "forwarded to the upstreams. Also HEARTH_API_KEY"},
    {.names = "--max-queue", .value = "N", .kind = OPT_LONG, .off = CL(max_queue), .lo = 0,
     .hi = 1 << 20, .def = "256",
     .help = "requests waiting for an upstream; more get 503 with Retry-After"},
    {.names = "--max-body", .value = "BYTES", .kind = OPT_BYTES, .off = CL(max_body), .def = "4M",
     .help = "a request body's limit, as 8K, 4M, 1MiB or a count of bytes"},
    {.names = "--client-timeout", .value = "S", .kind = OPT_FLOAT, .off = CL(timeout_s),
     .lo = 0.001, .hi = 1e6, .def = "600", .help = "seconds of a client's silence while sending a request or between requests, or "
             "of a reply it leaves unread, before its connection closes; a request's line and "
             "headers get the smaller of this and 30 s"},
};
/* clang-format on */
#undef CL

#define AFF(f) offsetof(struct route_args, aff.f) - offsetof(struct route_args, aff)
/* clang-format off */
static const struct opt routing_list[] = {
    {.names = "--policy", .value = "NAME", .kind = OPT_CHOICE, .off = AFF(policy),
     .choices = "affinity|round-robin|least-load", .def = "affinity",
     .help = "affinity: a continuation goes where its prompt's prefix was sent, a fresh request "
             "to the least loaded; round-robin: each upstream in turn; least-load: the fewest in "
             "flight"},
    {.names = "--affinity-min-match", .value = "N", .kind = OPT_LONG, .off = AFF(min_match),
     .lo = 1, .hi = 1 << 20, .def = "4",
     .help = "blocks of 256 bytes of shared prompt that draw a request to its upstream"},
    {.names = "--affinity-slack", .value = "N", .kind = OPT_LONG, .off = AFF(slack), .lo = 0,
     .hi = 1 << 20, .def = "4",
     .help = "requests an upstream may carry beyond the least loaded and still get its prefixes' "
             "requests"},
    {.names = "--affinity-ttl", .value = "S", .kind = OPT_FLOAT, .off = AFF(ttl_s), .lo = 0.001,
     .hi = 1e6, .def = "600", .help = "seconds a sent prefix counts as cached"},
    {.names = "--affinity-index", .value = "N", .kind = OPT_LONG, .off = AFF(index_blocks), .lo = 2,
     .hi = 1 << 26, .def = "65536", .help = "prefix blocks remembered an upstream"},
};
/* clang-format on */
#undef AFF

static const struct opt_group upstream_group = OPT_GROUP("Upstreams", upstream_list);
static const struct opt_group clients_group  = OPT_GROUP("Clients", clients_list);
static const struct opt_group routing_group  = OPT_GROUP("Routing", routing_list);

/* clang-format off */
static const struct opt_use route_uses[] = {
    {&upstream_group, offsetof(struct route_args, up)},
    {&clients_group, offsetof(struct route_args, clients)},
    {&routing_group, offsetof(struct route_args, aff)},
};
/* clang-format on */

/* router_default_params()'s and route_default_params()'s values, as the help states them */
static const struct route_args route_defaults = {
    .up      = {.load = LOAD_OWN, .max_in_flight = 64, .timeout_s = 600, .probe_s = 2},
    .clients = {.host      = "127.0.0.1",
                .port      = 8080,
                .max_queue = 256,
                .max_body  = 4 << 20,
                .timeout_s = 600},
    .aff =
        {.policy = ROUTE_AFFINITY, .min_match = 4, .slack = 4, .index_blocks = 65536, .ttl_s = 600},
};

const struct cmd_spec cmd_route_spec = {
    .name      = "route",
    .synopsis  = "hearth route --upstream URL --upstream URL ... [options]",
    .about     = "One endpoint over several OpenAI-compatible servers (hearth, llama-server, "
                 "vLLM): requests forwarded unchanged, replies and streams relayed as they arrive. "
                 "A continuation goes where its prompt's prefix was sent (its cache), a fresh "
                 "request to the least loaded; an upstream that fails before the reply starts is "
                 "demoted and the request retried on another.",
    .epilog    = "Its own endpoints: GET /health, GET /metrics (Prometheus), GET /v1/models\n"
                 "(merged over the upstreams); everything else goes to an upstream.\n"
                 "\n"
                 "Environment: HEARTH_API_KEY (the key, when --api-key is not given).\n",
    .uses      = route_uses,
    .n_uses    = sizeof route_uses / sizeof route_uses[0],
    .defaults  = &route_defaults,
    .args_size = sizeof(struct route_args),
};

int cmd_route(int argc, char **argv)
{
    struct route_args a;
    const enum opts_status st = opts_parse(&cmd_route_spec, &a, argc, argv);
    if (st != OPTS_GO)
        return opts_exit(st);
    if (!a.up.url.n) {
        fprintf(stderr, "hearth route: needs at least one --upstream URL (hearth route --help)\n");
        return EXIT_USAGE;
    }
    if (a.up.url.n > ROUTE_MAX_UPSTREAMS) {
        fprintf(stderr, "hearth route: at most %d upstreams\n", ROUTE_MAX_UPSTREAMS);
        return EXIT_USAGE;
    }
    struct router_params p = router_default_params();
    for (size_t i = 0; i < a.up.url.n; i++)
        p.upstream[i] = a.up.url.v[i];
    p.n_upstream = (int32_t)a.up.url.n;
    p.host       = a.clients.host;
    p.api_key    = a.clients.api_key;
    if (!p.api_key) {
        const char *env = getenv("HEARTH_API_KEY");
        if (env && *env)
            p.api_key = env;
    }
    if (a.clients.max_body < 1) {
        fprintf(stderr, "hearth route: --max-body must be at least 1 byte\n");
        return EXIT_USAGE;
    }
    p.port                = (int)a.clients.port;
    p.policy.policy       = (enum route_policy)a.aff.policy;
    p.policy.min_match    = (int32_t)a.aff.min_match;
    p.policy.slack        = (int32_t)a.aff.slack;
    p.policy.index_blocks = (int32_t)a.aff.index_blocks;
    p.policy.ttl_s        = a.aff.ttl_s;
    p.max_in_flight       = (int32_t)a.up.max_in_flight;
    p.max_queue           = (int32_t)a.clients.max_queue;
    p.max_body            = (size_t)a.clients.max_body;
    p.timeout_s           = a.up.timeout_s;
    p.client_timeout_s    = a.clients.timeout_s;
    p.probe_s             = a.up.probe_s;
    p.reported_load       = a.up.load == LOAD_REPORTED;
    char err[HEARTH_ERR_MAX];
    if (router_run(&p, err, sizeof err) != HEARTH_OK) {
        fprintf(stderr, "hearth %s\n", err);
        return EXIT_RUNTIME;
    }
    return EXIT_OK;
}
