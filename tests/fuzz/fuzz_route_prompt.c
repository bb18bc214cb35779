/*
 * fuzz_route_prompt.c: libFuzzer target for the text `hearth route` routes
 * a request by (route_prompt_read: a body straight from the network), its
 * prefix blocks (route_blocks), and the same bytes as an upstream's
 * /metrics page (route_report_parse). The first input byte picks the path;
 * the rest is the body. Seeds: tests/fuzz/corpus/route_prompt.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "route/policy.h"
#include "route/prompt.h"
#include "route/report.h"

static volatile uint64_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const paths[] = {
        "/v1/chat/completions", "/v1/completions",   "/v1/responses", "/v1/messages",
        "/v1/embeddings",       "/chat/completions", "/tokenize",     "/v1/messages/count_tokens"};
    if (size < 1)
        return 0;
    const char *path = paths[data[0] % (sizeof paths / sizeof paths[0])];
    struct route_prompt p;
    route_prompt_read(path, (const char *)data + 1, size - 1, 1 << 20, &p);
    if (p.text) {
        uint64_t h[64];
        const int32_t n = route_blocks(p.model, p.text, p.len, h, 64);
        for (int32_t i = 0; i < n; i++)
            sink += h[i];
        if (strlen(p.text) > p.len)
            abort(); /* the text is NUL-terminated at len */
    }
    route_prompt_free(&p);
    sink += (uint64_t)route_report_parse((const char *)data + 1, size - 1); /* as a /metrics page */
    return 0;
}
