/* reqjson.c: reading request bodies, shared by every API (reqjson.h). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "serve/reqjson.h"

cJSON *reqjson_parse(const char *body, size_t len, size_t *bad_at)
{
    const char *end = NULL;
    cJSON *root     = len ? cJSON_ParseWithLengthOpts(body, len, &end, false) : NULL;
    if (root) {
        size_t at = (size_t)(end - body);
        while (at < len && body[at] && strchr(" \t\r\n", body[at]))
            at++;
        if (at == len)
            return root;
        cJSON_Delete(root);
        *bad_at = at;
        return NULL;
    }
    *bad_at = end && end >= body && end <= body + len ? (size_t)(end - body) : 0;
    return NULL;
}

const cJSON *reqjson_field(const cJSON *obj, const char *name)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, name);
    return it && !cJSON_IsNull(it) ? it : NULL;
}

const char *reqjson_kind(const cJSON *it)
{
    if (cJSON_IsString(it))
        return "a string";
    if (cJSON_IsNumber(it))
        return "a number";
    if (cJSON_IsBool(it))
        return "a boolean";
    if (cJSON_IsArray(it))
        return "an array";
    if (cJSON_IsObject(it))
        return "an object";
    return "null";
}

bool reqjson_wrong_type(struct oai_error *e, const char *param, const char *want, const cJSON *it)
{
    return oai_fail(e, 400, "invalid_request_error", "invalid_type", param,
                    "Invalid type for '%s': expected %s, but got %s instead.", param, want,
                    reqjson_kind(it));
}

bool reqjson_missing(struct oai_error *e, const char *param)
{
    return REQJSON_BAD(e, "missing_required_parameter", param, "Missing required parameter: '%s'.",
                       param);
}

static bool openai_range(struct oai_error *e, const char *param, enum reqjson_type t, double lo,
                         double hi, const cJSON *it)
{
    double v = it->valuedouble;
    if (t != RJ_INTEGER)
        return REQJSON_BAD(e, "invalid_value", param,
                           "Invalid '%s': expected a value between %g and %g, but got %g instead.",
                           param, lo, hi, v);
    if (v < lo)
        return REQJSON_BAD(e, "integer_below_min_value", param,
                           "Invalid '%s': integer below minimum value. Expected a value >= %.0f, "
                           "but got %.0f instead.",
                           param, lo, v);
    return REQJSON_BAD(e, "integer_above_max_value", param,
                       "Invalid '%s': integer above maximum value. Expected a value <= %.0f, but "
                       "got %.0f instead.",
                       param, hi, v);
}

const struct reqjson_dialect reqjson_openai = {
    .type_name    = {"a number", "an integer", "a boolean", "a string", "an object", "an array"},
    .missing      = reqjson_missing,
    .wrong_type   = reqjson_wrong_type,
    .out_of_range = openai_range,
};

bool reqjson_is(const cJSON *it, enum reqjson_type t)
{
    switch (t) {
    case RJ_NUMBER:
        return cJSON_IsNumber(it);
    case RJ_INTEGER:
        return cJSON_IsNumber(it) && isfinite(it->valuedouble) &&
               it->valuedouble == floor(it->valuedouble);
    case RJ_BOOLEAN:
        return cJSON_IsBool(it);
    case RJ_STRING:
        return cJSON_IsString(it);
    case RJ_OBJECT:
        return cJSON_IsObject(it);
    case RJ_ARRAY:
        return cJSON_IsArray(it);
    case RJ_N_TYPES:
        break;
    }
    return false;
}

bool reqjson_check(const struct reqjson_dialect *d, const cJSON *it, const char *param,
                   enum reqjson_type t, struct oai_error *e)
{
    return reqjson_is(it, t) || d->wrong_type(e, param, d->type_name[t], it);
}

bool reqjson_number(const struct reqjson_dialect *d, const cJSON *it, const char *param, double lo,
                    double hi, double *out, struct oai_error *e)
{
    if (!reqjson_check(d, it, param, RJ_NUMBER, e))
        return false;
    double v = it->valuedouble;
    if (!isfinite(v) || v < lo || v > hi)
        return d->out_of_range(e, param, RJ_NUMBER, lo, hi, it);
    *out = v;
    return true;
}

bool reqjson_int(const struct reqjson_dialect *d, const cJSON *it, const char *param, double lo,
                 double hi, int64_t *out, struct oai_error *e)
{
    if (!reqjson_check(d, it, param, RJ_INTEGER, e))
        return false;
    double v = it->valuedouble;
    if (v < lo || v > hi)
        return d->out_of_range(e, param, RJ_INTEGER, lo, hi, it);
    *out = (int64_t)v;
    return true;
}

bool reqjson_bool(const struct reqjson_dialect *d, const cJSON *it, const char *param, bool *out,
                  struct oai_error *e)
{
    if (!reqjson_check(d, it, param, RJ_BOOLEAN, e))
        return false;
    *out = cJSON_IsTrue(it);
    return true;
}

const cJSON *reqjson_member(const struct reqjson_dialect *d, const cJSON *obj, const char *name,
                            const char *at, enum reqjson_type t, struct oai_error *e)
{
    char param[96];
    snprintf(param, sizeof param, "%s%s%s", at, *at ? "." : "", name);
    const cJSON *it = reqjson_field(obj, name);
    if (!it)
        return d->missing(e, param), NULL;
    return reqjson_check(d, it, param, t, e) ? it : NULL;
}

bool reqjson_rows(const struct reqjson_dialect *d, const cJSON *obj, const char *at,
                  const struct reqjson_row *rows, size_t n, struct oai_error *e)
{
    for (size_t i = 0; i < n; i++) {
        const struct reqjson_row *r = &rows[i];
        if ((r->required || reqjson_field(obj, r->name)) &&
            !reqjson_member(d, obj, r->name, at, r->type, e))
            return false;
    }
    return true;
}

void reqjson_defaults(struct oai_request *req, enum oai_kind kind)
{
    memset(req, 0, sizeof *req);
    req->kind                = kind;
    req->max_tokens          = -1;
    req->top_logprobs        = -1;
    req->n                   = 1;
    req->parallel_tool_calls = true;
    req->reasoning           = OAI_REASONING_AUTO;
    req->sampling            = (struct hearth_sampler_params){.temperature    = 1.0f,
                                                              .top_k          = 0,
                                                              .top_p          = 1.0f,
                                                              .min_p          = 0.0f,
                                                              .repeat_penalty = 1.0f,
                                                              .repeat_last_n  = 64,
                                                              .seed           = 0};
}
