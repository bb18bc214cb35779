/*
 * reqjson.h: what every API's request parser (oai_request.c,
 * resp_request.c, anth_request.c) reads a body with: the one JSON value a
 * body holds, its fields with JSON null read as "not given", the name of a
 * value's JSON type for error messages, the request every API starts from,
 * and the validators of typed fields. The validators check alike for every
 * API and word their refusals through the API's struct reqjson_dialect, so
 * a refusal reads as that API's own. Pure; thread-safe.
 */
#ifndef HEARTH_REQJSON_H
#define HEARTH_REQJSON_H

#include <stddef.h>
#include <stdint.h>

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

/* OpenAI's 400 missing_required_parameter for param ("Missing required parameter: ..."). */
bool reqjson_missing(struct oai_error *e, const char *param);

/* The one shape of a refusal in every parser: a 400 invalid_request_error; code and param as
 * OpenAI's bodies carry them (NULL where Anthropic's, which have neither). */
#define REQJSON_BAD(e, code, param, ...)                                                           \
    oai_fail((e), 400, "invalid_request_error", (code), (param), __VA_ARGS__)
/* A 500 of type (the API's name for a server fault) for a request that could not be copied. */
#define REQJSON_OOM(e, type)                                                                       \
    oai_fail((e), 500, (type), NULL, NULL, "out of memory reading the request")

/* The JSON types a field may be asked for. */
enum reqjson_type { RJ_NUMBER, RJ_INTEGER, RJ_BOOLEAN, RJ_STRING, RJ_OBJECT, RJ_ARRAY, RJ_N_TYPES };

/*
 * How one API words the refusal of a field: its name for each type ("a number", "a valid
 * number"), and its sentence for a field that is missing, of the wrong type, or outside
 * [lo, hi] (also a number that is not finite). Each returns false with *e filled.
 */
struct reqjson_dialect {
    const char *type_name[RJ_N_TYPES];
    bool (*missing)(struct oai_error *e, const char *param);
    bool (*wrong_type)(struct oai_error *e, const char *param, const char *want,
                       const struct cJSON *it);
    bool (*out_of_range)(struct oai_error *e, const char *param, enum reqjson_type t, double lo,
                         double hi, const struct cJSON *it);
};

/* OpenAI's wording (oai_request.c's, and the Responses API's type errors). */
extern const struct reqjson_dialect reqjson_openai;

/* Whether it is of type t (an integer: a finite number with no fraction). */
bool reqjson_is(const struct cJSON *it, enum reqjson_type t);

/* true when it is of type t, else d's wrong-type refusal for param. */
bool reqjson_check(const struct reqjson_dialect *d, const struct cJSON *it, const char *param,
                   enum reqjson_type t, struct oai_error *e);

/* A number in [lo, hi] into *out, or d's refusal. */
bool reqjson_number(const struct reqjson_dialect *d, const struct cJSON *it, const char *param,
                    double lo, double hi, double *out, struct oai_error *e);

/* An integer in [lo, hi] into *out, or d's refusal. */
bool reqjson_int(const struct reqjson_dialect *d, const struct cJSON *it, const char *param,
                 double lo, double hi, int64_t *out, struct oai_error *e);

/* A boolean into *out, or d's refusal. */
bool reqjson_bool(const struct reqjson_dialect *d, const struct cJSON *it, const char *param,
                  bool *out, struct oai_error *e);

/*
 * obj's required member name of type t, named "at.name" in a refusal ("name" where at is
 * empty); NULL with *e filled when it is absent, JSON null or of another type.
 */
const struct cJSON *reqjson_member(const struct reqjson_dialect *d, const struct cJSON *obj,
                                   const char *name, const char *at, enum reqjson_type t,
                                   struct oai_error *e);

/* One typed member of a nested object's table: checked when given (required: also when not). */
struct reqjson_row {
    const char *name;
    enum reqjson_type type;
    bool required;
};

/*
 * obj's members of rows[0..n), in row order, each named "at.name" in a refusal: true when
 * every one given is of its type and no required one is missing, else d's refusal of the first
 * that is not. Members not in rows are left to the caller.
 */
bool reqjson_rows(const struct reqjson_dialect *d, const struct cJSON *obj, const char *at,
                  const struct reqjson_row *rows, size_t n, struct oai_error *e);

/* A chat request of kind with nothing given: OpenAI's defaults (temperature 1, top_p 1, the
 * other samplers off, n 1, no token limit, no logprobs, parallel tool calls). */
void reqjson_defaults(struct oai_request *req, enum oai_kind kind);

#endif
