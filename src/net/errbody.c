/*
 * errbody.c: OpenAI's and Anthropic's error bodies, as JSON and as a
 * stream's last event (errbody.h).
 */
#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/errbody.h"

/* head + json + "\n\n", malloc'd and NUL-terminated, *len bytes; json is freed. */
static char *sse_frame(const char *head, char *json, size_t *len)
{
    *len = 0;
    if (!json)
        return NULL;
    static const char tail[] = "\n\n";
    size_t h = strlen(head), n = strlen(json);
    char *out = malloc(h + n + sizeof tail);
    if (out) {
        memcpy(out, head, h);
        memcpy(out + h, json, n);
        memcpy(out + h + n, tail, sizeof tail);
        *len = h + n + sizeof tail - 1;
    }
    free(json);
    return out;
}

/* ---------------------------------------------------------------- OpenAI --- */

bool oai_fail(struct oai_error *e, int status, const char *type, const char *code,
              const char *param, const char *fmt, ...)
{
    e->status = status;
    e->type   = type;
    e->code   = code;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return false;
}

char *oai_error_json(const struct oai_error *e)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *err  = cJSON_AddObjectToObject(root, "error");
    if (!err) {
        cJSON_Delete(root);
        return NULL;
    }
    cJSON_AddStringToObject(err, "message", e->message);
    cJSON_AddStringToObject(err, "type", e->type ? e->type : "server_error");
    if (e->param[0])
        cJSON_AddStringToObject(err, "param", e->param);
    else
        cJSON_AddNullToObject(err, "param");
    if (e->code)
        cJSON_AddStringToObject(err, "code", e->code);
    else
        cJSON_AddNullToObject(err, "code");
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

char *oai_error_sse(const struct oai_error *e, size_t *len)
{
    return sse_frame("data: ", oai_error_json(e), len);
}

/* ------------------------------------------------------------- Anthropic --- */

const char *anth_error_type(int status)
{
    switch (status) {
    case 401:
        return "authentication_error";
    case 402:
        return "billing_error";
    case 403:
        return "permission_error";
    case 404:
        return "not_found_error";
    case 413:
        return "request_too_large";
    case 429:
        return "rate_limit_error";
    case 503:
    case 529:
        return "overloaded_error";
    case 504:
        return "timeout_error";
    }
    return status >= 500 ? "api_error" : "invalid_request_error";
}

char *anth_error_json(const struct oai_error *e)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *err  = cJSON_CreateObject();
    if (!root || !err) {
        cJSON_Delete(root);
        cJSON_Delete(err);
        return NULL;
    }
    cJSON_AddStringToObject(root, "type", "error");
    cJSON_AddItemToObject(root, "error", err);
    cJSON_AddStringToObject(err, "type", anth_error_type(e->status));
    cJSON_AddStringToObject(err, "message", e->message);
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

char *anth_error_sse(const struct oai_error *e, size_t *len)
{
    return sse_frame("event: error\ndata: ", anth_error_json(e), len);
}
