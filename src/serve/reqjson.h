/*
 * reqjson.h: what every API's request parser (oai_request.c,
 * resp_request.c, anth_request.c) reads a body with: the one JSON value a
 * body holds, its fields with JSON null read as "not given", the name of a
 * value's JSON type for error messages, and the request every API starts
 * from. Pure; thread-safe.
 */
#ifndef HEARTH_REQJSON_H
#define HEARTH_REQJSON_H

#include <stddef.h>

#include "serve/openai.h"

struct cJSON;

/*
 * The JSON value of body[0..len) (whitespace may follow it, nothing else),
 * or NULL with *bad_at the byte where it went wrong. Free with cJSON_Delete.
 */
struct cJSON *reqjson_parse(const char *body, size_t len, size_t *bad_at);

/* obj's member name, or NULL when absent or JSON null. */
const struct cJSON *reqjson_field(const struct cJSON *obj, const char *name);

/* "a string", "a number", "a boolean", "an array", "an object" or "null". */
const char *reqjson_kind(const struct cJSON *it);

/* Fills e with OpenAI's 400 invalid_type for param ("expected want, but got ...") and returns
 * false. */
bool reqjson_wrong_type(struct oai_error *e, const char *param, const char *want,
                        const struct cJSON *it);

/* A chat request of kind with nothing given: OpenAI's defaults (temperature 1, top_p 1, the
 * other samplers off, n 1, no token limit, no logprobs, parallel tool calls). */
void reqjson_defaults(struct oai_request *req, enum oai_kind kind);

#endif
