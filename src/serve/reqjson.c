/* reqjson.c: reading request bodies, shared by every API (reqjson.h). */
#include <cjson/cJSON.h>
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
