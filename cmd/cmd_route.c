/*
 * cmd_route.c: `hearth route --upstream URL [--upstream URL ...]`: one
 * OpenAI-compatible endpoint over several servers (src/route/router.c),
 * requests placed by src/route/policy.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "route/router.h"

static void usage(FILE *fp)
{
    fprintf(fp, "usage: hearth route --upstream URL --upstream URL ... [options]\n"
                "\n"
                "One endpoint over several OpenAI-compatible servers (hearth, llama-server,\n"
                "vLLM): requests forwarded unchanged, replies and streams relayed as they\n"
                "arrive. A continuation goes where its prompt's prefix was sent (its cache), a\n"
                "fresh request to the least loaded; an upstream that fails before the reply\n"
                "starts is demoted and the request retried on another.\n"
                "\n");
    static const char *const lines[][2] = {
        {"--upstream URL", "an upstream's base URL (http://HOST:PORT); repeat for each"},
        {"--host H", "address to listen on (default 127.0.0.1)"},
        {"--port P", "port to listen on (default 8080; 0: any free one)"},
        {"--api-key KEY", "clients must send it (also HEARTH_API_KEY); it is forwarded"},
        {"--policy NAME", "affinity (default), round-robin or least-load"},
        {"--affinity-min-match N", "blocks of 256 bytes of shared prompt that draw a request to"},
        {"", "its upstream (default 4)"},
        {"--affinity-slack N", "requests an upstream may carry beyond the least loaded and"},
        {"", "still get its prefixes' requests (default 4)"},
        {"--affinity-ttl S", "seconds a sent prefix counts as cached (default 600)"},
        {"--affinity-index N", "prefix blocks remembered an upstream (default 65536)"},
        {"--max-in-flight N", "requests an upstream carries at once; more wait (default 64)"},
        {"--max-queue N", "requests waiting; more get 503 with Retry-After (default 256)"},
        {"--max-body BYTES", "a request body's limit (default 4M)"},
        {"--timeout S", "an upstream's silence before it counts as failed (default 600)"},
        {"--client-timeout S", "a client's silence while sending (default 600)"},
        {"--probe-interval S", "seconds between /health probes (default 2)"},
        {"--upstream-load SRC", "own (default): load is the requests the router has in flight"},
        {"", "on an upstream; reported: plus what its /metrics says it serves"},
        {"", "for other clients (as of the last probe)"},
    };
    usage_lines(fp, 26, lines, sizeof lines / sizeof lines[0]);
    fprintf(fp, "\nIts own endpoints: GET /health, GET /metrics (Prometheus), GET /v1/models\n"
                "(merged over the upstreams); everything else goes to an upstream.\n");
}

int cmd_route(int argc, char **argv)
{
    struct router_params p = router_default_params();
    long port = 8080, min_match = p.policy.min_match, slack = p.policy.slack,
         index = p.policy.index_blocks, inflight = p.max_in_flight, queue = p.max_queue;
    float ttl = (float)p.policy.ttl_s, timeout = (float)p.timeout_s,
          ctimeout = (float)p.client_timeout_s, probe = (float)p.probe_s;
    int64_t max_body = (int64_t)p.max_body;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return EXIT_OK;
        }
#define VALUE()                                                                                    \
    if (!(v = arg_value("route", argc, argv, &i)))                                                 \
    return EXIT_USAGE
#define LONG(var, lo, hi)                                                                          \
    do {                                                                                           \
        VALUE();                                                                                   \
        if (!arg_long("route", a, v, lo, hi, &var))                                                \
            return EXIT_USAGE;                                                                     \
    } while (0)
#define SECONDS(var)                                                                               \
    do {                                                                                           \
        VALUE();                                                                                   \
        if (!arg_float("route", a, v, 0.001, 1e6, &var))                                           \
            return EXIT_USAGE;                                                                     \
    } while (0)
        if (!strcmp(a, "--upstream")) {
            VALUE();
            if (p.n_upstream == ROUTE_MAX_UPSTREAMS) {
                fprintf(stderr, "hearth route: at most %d upstreams\n", ROUTE_MAX_UPSTREAMS);
                return EXIT_USAGE;
            }
            p.upstream[p.n_upstream++] = v;
        } else if (!strcmp(a, "--host")) {
            VALUE();
            p.host = v;
        } else if (!strcmp(a, "--port"))
            LONG(port, 0, 65535);
        else if (!strcmp(a, "--api-key")) {
            VALUE();
            p.api_key = v;
        } else if (!strcmp(a, "--policy")) {
            VALUE();
            if (!strcmp(v, "affinity"))
                p.policy.policy = ROUTE_AFFINITY;
            else if (!strcmp(v, "round-robin"))
                p.policy.policy = ROUTE_ROUND_ROBIN;
            else if (!strcmp(v, "least-load"))
                p.policy.policy = ROUTE_LEAST_LOAD;
            else {
                fprintf(stderr,
                        "hearth route: --policy takes affinity, round-robin or least-load, got "
                        "'%s'\n",
                        v);
                return EXIT_USAGE;
            }
        } else if (!strcmp(a, "--affinity-min-match"))
            LONG(min_match, 1, 1 << 20);
        else if (!strcmp(a, "--affinity-slack"))
            LONG(slack, 0, 1 << 20);
        else if (!strcmp(a, "--affinity-ttl"))
            SECONDS(ttl);
        else if (!strcmp(a, "--affinity-index"))
            LONG(index, 2, 1 << 26);
        else if (!strcmp(a, "--max-in-flight"))
            LONG(inflight, 1, 1 << 20);
        else if (!strcmp(a, "--max-queue"))
            LONG(queue, 0, 1 << 20);
        else if (!strcmp(a, "--max-body")) {
            VALUE();
            if (!arg_bytes("route", a, v, &max_body))
                return EXIT_USAGE;
        } else if (!strcmp(a, "--timeout"))
            SECONDS(timeout);
        else if (!strcmp(a, "--client-timeout"))
            SECONDS(ctimeout);
        else if (!strcmp(a, "--probe-interval"))
            SECONDS(probe);
        else if (!strcmp(a, "--upstream-load")) {
            VALUE();
            if (strcmp(v, "own") && strcmp(v, "reported")) {
                fprintf(stderr, "hearth route: --upstream-load takes own or reported, got '%s'\n",
                        v);
                return EXIT_USAGE;
            }
            p.reported_load = !strcmp(v, "reported");
        }
        else {
            fprintf(stderr, "hearth route: unknown option %s (hearth route --help)\n", a);
            return EXIT_USAGE;
        }
#undef SECONDS
#undef LONG
#undef VALUE
    }
    if (!p.n_upstream) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (!p.api_key) {
        const char *env = getenv("HEARTH_API_KEY");
        if (env && *env)
            p.api_key = env;
    }
    if (max_body < 1) {
        fprintf(stderr, "hearth route: --max-body must be at least 1 byte\n");
        return EXIT_USAGE;
    }
    p.port                = (int)port;
    p.policy.min_match    = (int32_t)min_match;
    p.policy.slack        = (int32_t)slack;
    p.policy.index_blocks = (int32_t)index;
    p.policy.ttl_s        = ttl;
    p.max_in_flight       = (int32_t)inflight;
    p.max_queue           = (int32_t)queue;
    p.max_body            = (size_t)max_body;
    p.timeout_s           = timeout;
    p.client_timeout_s    = ctimeout;
    p.probe_s             = probe;
    char err[HEARTH_ERR_MAX];
    if (router_run(&p, err, sizeof err) != HEARTH_OK) {
        fprintf(stderr, "hearth %s\n", err);
        return EXIT_RUNTIME;
    }
    return EXIT_OK;
}
