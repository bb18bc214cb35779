/*
 * oai_error.c: OpenAI's error body, {"error":{"message","type","param","code"}},
 * built in one place for every answer that carries one: a refused request,
 * a failed choice, a stream cut short, a server shutting down.
 */
#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/openai.h"

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
    *len       = 0;
    char *json = oai_error_json(e);
    if (!json)
        return NULL;
    static const char head[] = "data: ", tail[] = "\n\n";
    size_t n                 = strlen(json);
    char *out                = malloc(sizeof head - 1 + n + sizeof tail);
    if (out) {
        memcpy(out, head, sizeof head - 1);
        memcpy(out + sizeof head - 1, json, n);
        memcpy(out + sizeof head - 1 + n, tail, sizeof tail);
        *len = sizeof head - 1 + n + sizeof tail - 1;
    }
    free(json);
    return out;
}
