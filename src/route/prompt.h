/*
 * prompt.h: the text `hearth route` routes a request by. The router does
 * not know the upstreams' templates or tokenizers, so it reads what the
 * prompt is made of straight from the request body, in the order the
 * upstream will render it (tools, system, then the turns), into one text
 * whose prefix is shared exactly when two requests share a conversation's
 * beginning. The body itself is forwarded unchanged.
 *
 * Bodies are untrusted (a libFuzzer target runs this): anything that is
 * not JSON, or has none of the fields below, is a request with no prompt
 * (routed by load alone), never an error of the router's.
 */
#ifndef HEARTH_ROUTE_PROMPT_H
#define HEARTH_ROUTE_PROMPT_H

#include <stddef.h>

struct route_prompt {
    char model[128]; /* "model", "" when absent: the prefix index's seed */
    char *text;      /* malloc'd, NUL-terminated; NULL when the body has no prompt */
    size_t len;      /* bytes of text */
};

/*
 * Reads body (len bytes, not NUL-terminated) of a request to path
 * ("/v1/chat/completions", "/v1/completions", "/v1/responses",
 * "/v1/messages", "/v1/embeddings", with or without "/v1"), at most max
 * bytes of text (the prefix index looks no further). Always fills out;
 * route_prompt_free releases it.
 */
void route_prompt_read(const char *path, const char *body, size_t len, size_t max,
                       struct route_prompt *out);
void route_prompt_free(struct route_prompt *p);

#endif
