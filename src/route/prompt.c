/*
 * prompt.c: a request's prompt as routing text (prompt.h).
 *
 * Each piece is appended with a one-byte separator naming its kind, so
 * "a" + "bc" and "ab" + "c" differ. Content given as parts keeps their text
 * and, for anything else (images, tool results as objects), the part's
 * compact JSON, which is stable for the same part sent again.
 */
#include "route/prompt.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct text {
    char *buf;
    size_t len, cap, max;
};

static void put(struct text *t, const char *s, size_t n)
{
    if (t->len >= t->max)
        return;
    if (n > t->max - t->len)
        n = t->max - t->len;
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 256;
        while (cap < t->len + n + 1)
            cap *= 2;
        char *b = realloc(t->buf, cap);
        if (!b) {
            t->max = t->len; /* out of memory: the text stops here */
            return;
        }
        t->buf = b;
        t->cap = cap;
    }
    memcpy(t->buf + t->len, s, n);
    t->len += n;
    t->buf[t->len] = 0;
}

static void put_str(struct text *t, char kind, const char *s)
{
    put(t, &kind, 1);
    put(t, s, strlen(s));
}

/* Any JSON value, compact. */
static void put_json(struct text *t, char kind, const cJSON *v)
{
    char *s = cJSON_PrintUnformatted(v);
    if (s) {
        put_str(t, kind, s);
        free(s);
    }
}

/* A content: a string, or parts with text (OpenAI's, Anthropic's), or anything else. */
static void put_content(struct text *t, const cJSON *c)
{
    if (cJSON_IsString(c)) {
        put_str(t, 'c', c->valuestring);
        return;
    }
    if (!cJSON_IsArray(c)) {
        if (c && !cJSON_IsNull(c))
            put_json(t, 'j', c);
        return;
    }
    const cJSON *part;
    cJSON_ArrayForEach(part, c)
    {
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (cJSON_IsString(part))
            put_str(t, 'c', part->valuestring);
        else if (cJSON_IsString(text))
            put_str(t, 'c', text->valuestring);
        else
            put_json(t, 'j', part);
    }
}

/* A list of turns: role, content, and what else a turn carries into the prompt. */
static void put_turns(struct text *t, const cJSON *turns)
{
    if (cJSON_IsString(turns)) { /* the Responses API's input as one string */
        put_str(t, 'c', turns->valuestring);
        return;
    }
    const cJSON *m;
    cJSON_ArrayForEach(m, turns)
    {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (cJSON_IsString(role))
            put_str(t, 'r', role->valuestring);
        else if (cJSON_IsObject(m)) /* a Responses item that is not a message */
            put_json(t, 'i', m);
        put_content(t, cJSON_GetObjectItemCaseSensitive(m, "content"));
        const cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
        if (calls)
            put_json(t, 'k', calls);
    }
}

static bool ends_with(const char *path, const char *tail)
{
    const size_t n = strlen(path), k = strlen(tail);
    return n >= k && !strcmp(path + n - k, tail);
}

void route_prompt_read(const char *path, const char *body, size_t len, size_t max,
                       struct route_prompt *out)
{
    memset(out, 0, sizeof *out);
    cJSON *j = cJSON_ParseWithLength(body, len);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return;
    }
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(j, "model");
    if (cJSON_IsString(model)) {
        strncpy(out->model, model->valuestring, sizeof out->model - 1);
    }
    struct text t      = {.max = max};
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(j, "tools");
    if (tools) /* templates render them first, in the system part */
        put_json(&t, 't', tools);
#define FIELD(name) cJSON_GetObjectItemCaseSensitive(j, name)
    if (ends_with(path, "/chat/completions")) {
        put_turns(&t, FIELD("messages"));
    } else if (ends_with(path, "/completions")) {
        const cJSON *p = FIELD("prompt");
        put_content(&t, cJSON_IsArray(p) ? cJSON_GetArrayItem(p, 0) : p);
    } else if (ends_with(path, "/responses")) {
        const cJSON *ins = FIELD("instructions");
        if (cJSON_IsString(ins))
            put_str(&t, 's', ins->valuestring);
        put_turns(&t, FIELD("input"));
    } else if (ends_with(path, "/messages")) {
        put_content(&t, FIELD("system"));
        put_turns(&t, FIELD("messages"));
    } else if (ends_with(path, "/embeddings")) {
        put_content(&t, FIELD("input"));
    }
#undef FIELD
    cJSON_Delete(j);
    out->text = t.buf;
    out->len  = t.len;
}

void route_prompt_free(struct route_prompt *p)
{
    free(p->text);
    p->text = NULL;
    p->len  = 0;
}
