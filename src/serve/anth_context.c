/*
 * anth_context.c: Anthropic's context_management, the edits a Messages
 * request asks the server to make to the conversation before the model
 * reads it, applied to req->messages once anth_request.c has translated
 * them (so the prompt rendered, counted by count_tokens and cached is the
 * edited one; the client keeps its history whole).
 *
 * - clear_thinking_20251015: the reasoning of all but the last keep
 *   assistant turns that have any is dropped (keep "all": none is).
 * - clear_tool_uses_20250919: once the trigger is passed, every tool result
 *   but the last keep ones has its content replaced by a placeholder (and,
 *   with clear_tool_inputs, its call's input by {}), tools named in
 *   exclude_tools spared; not done when it would clear fewer than
 *   clear_at_least tokens. Tokens are not counted while a request is read
 *   (that needs the model and the template), so input_tokens here are
 *   estimated as the bytes of the conversation and tools (as JSON) / 4,
 *   which for text and code is usually below the real count: hearth clears
 *   late rather than early.
 * - compact_20260112 (a summary the server writes): accepted and not done;
 *   a conversation past the context is refused as any is.
 * Unknown edit types and fields are accepted and noted (anth_note).
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/anthropic.h"
#include "serve/reqjson.h"

/* Anthropic's errors name no field */
#define BAD(e, ...) REQJSON_BAD((e), NULL, NULL, __VA_ARGS__)
#define OOM(e)      REQJSON_OOM((e), "api_error")

#define CLEARED         "[Old tool result content cleared]"
#define BYTES_PER_TOKEN 4

/* {"type": want, "value": n >= lo} at path: n, or -1 with *e set. */
static int64_t typed_value(const cJSON *o, const char *path, const char *want, int64_t lo,
                           struct oai_error *e)
{
    const cJSON *t = reqjson_field(o, "type"), *v = reqjson_field(o, "value");
    if (!cJSON_IsObject(o) || !cJSON_IsString(t) || strcmp(t->valuestring, want)) {
        BAD(e, "%s: Input should be {\"type\": \"%s\", \"value\": <integer>}", path, want);
        return -1;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < lo ||
        v->valuedouble > 1e12) {
        BAD(e, "%s.value: Input should be an integer of at least %lld", path, (long long)lo);
        return -1;
    }
    return (int64_t)v->valuedouble;
}

/* ------------------------------------------------------ thinking turns --- */

static bool clear_thinking(const cJSON *ed, const char *path, struct oai_request *req,
                           struct oai_error *e)
{
    static const char *const keys[] = {"type", "keep", NULL};
    anth_note_others(req, ed, path, keys);
    const cJSON *keep = reqjson_field(ed, "keep");
    int64_t n         = 1; /* Anthropic's default: the last thinking turn */
    char p[96];
    snprintf(p, sizeof p, "%s.keep", path);
    if (cJSON_IsString(keep) && !strcmp(keep->valuestring, "all"))
        return true;
    if (keep && (n = typed_value(keep, p, "thinking_turns", 1, e)) < 0)
        return false;
    int64_t seen = 0;
    for (cJSON *m = req->messages ? req->messages->child : NULL; m; m = m->next)
        seen += cJSON_GetObjectItemCaseSensitive(m, "reasoning_content") != NULL;
    for (cJSON *m = req->messages ? req->messages->child : NULL; m && seen > n; m = m->next) {
        if (cJSON_GetObjectItemCaseSensitive(m, "reasoning_content")) {
            cJSON_DeleteItemFromObjectCaseSensitive(m, "reasoning_content");
            seen--;
        }
    }
    return true;
}

/* ---------------------------------------------------------- tool uses --- */

/* Whether name is one of the strings of list (a JSON array). */
static bool names(const cJSON *list, const char *name)
{
    const cJSON *s;
    cJSON_ArrayForEach(s, list)
    {
        if (cJSON_IsString(s) && !strcmp(s->valuestring, name))
            return true;
    }
    return false;
}

/* Whether l (at path) is absent or a list of strings; false with *e when it is neither. */
static bool string_list(const cJSON *l, const char *path, struct oai_error *e)
{
    if (!l)
        return true;
    bool ok = cJSON_IsArray(l);
    const cJSON *s;
    cJSON_ArrayForEach(s, l)
    {
        ok = ok && cJSON_IsString(s);
    }
    return ok || BAD(e, "%s: Input should be a valid list of strings", path);
}

/* The text bytes of a message's content (a string or text parts). */
static size_t content_bytes(const cJSON *c)
{
    if (cJSON_IsString(c))
        return strlen(c->valuestring);
    size_t n = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, c)
    {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(p, "text");
        n += cJSON_IsString(t) ? strlen(t->valuestring) : 0;
    }
    return n;
}

/* The tool message answering the call id, or NULL. */
static cJSON *result_of(const struct oai_request *req, const char *id)
{
    for (cJSON *m = req->messages->child; m; m = m->next) {
        const cJSON *tid = cJSON_GetObjectItemCaseSensitive(m, "tool_call_id");
        if (cJSON_IsString(tid) && !strcmp(tid->valuestring, id))
            return m;
    }
    return NULL;
}

/* The conversation's tool calls (assistants' tool_calls entries), oldest first, into
 * calls[0..cap) when calls is not NULL; returns how many there are. */
static int count_calls(const struct oai_request *req, cJSON **calls, int cap)
{
    int n = 0;
    for (cJSON *m = req->messages->child; m; m = m->next) {
        cJSON *c;
        cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(m, "tool_calls"))
        {
            if (calls && n < cap)
                calls[n] = c;
            n++;
        }
    }
    return n;
}

static bool clear_tool_uses(const cJSON *ed, const char *path, struct oai_request *req,
                            struct oai_error *e)
{
    static const char *const keys[] = {
        "type", "trigger", "keep", "clear_at_least", "exclude_tools", "clear_tool_inputs", NULL};
    anth_note_others(req, ed, path, keys);
    char p[96];
    const cJSON *trig = reqjson_field(ed, "trigger"), *keep = reqjson_field(ed, "keep");
    const cJSON *least  = reqjson_field(ed, "clear_at_least");
    const cJSON *excl   = reqjson_field(ed, "exclude_tools");
    const cJSON *inputs = reqjson_field(ed, "clear_tool_inputs");
    bool by_uses        = false;
    int64_t at = 100000, n_keep = 3, n_least = 0;
    snprintf(p, sizeof p, "%s.trigger", path);
    if (trig) {
        const cJSON *t = reqjson_field(trig, "type");
        by_uses        = cJSON_IsString(t) && !strcmp(t->valuestring, "tool_uses");
        if ((at = typed_value(trig, p, by_uses ? "tool_uses" : "input_tokens", 1, e)) < 0)
            return false;
    }
    snprintf(p, sizeof p, "%s.keep", path);
    if (keep && (n_keep = typed_value(keep, p, "tool_uses", 0, e)) < 0)
        return false;
    snprintf(p, sizeof p, "%s.clear_at_least", path);
    if (least && (n_least = typed_value(least, p, "input_tokens", 0, e)) < 0)
        return false;
    snprintf(p, sizeof p, "%s.exclude_tools", path);
    if (!string_list(excl, p, e))
        return false;
    snprintf(p, sizeof p, "%s.clear_tool_inputs", path);
    if (inputs && !cJSON_IsBool(inputs) && !string_list(inputs, p, e))
        return false;
    if (!req->messages)
        return true;

    int n_calls = count_calls(req, NULL, 0);
    if (by_uses && n_calls < at) /* the trigger is reached at value uses */
        return true;
    if (!by_uses) {
        char *conv  = cJSON_PrintUnformatted(req->messages);
        char *tools = req->tools ? cJSON_PrintUnformatted(req->tools) : NULL;
        if (!conv || (req->tools && !tools)) {
            free(conv);
            free(tools);
            return OOM(e);
        }
        size_t bytes = strlen(conv) + (tools ? strlen(tools) : 0);
        free(conv);
        free(tools);
        if ((int64_t)(bytes / BYTES_PER_TOKEN) < at)
            return true;
    }
    if (n_calls <= n_keep)
        return true;
    cJSON **calls = malloc((size_t)n_calls * sizeof *calls);
    if (!calls)
        return OOM(e);
    count_calls(req, calls, n_calls);
    /* two passes: what would be cleared, then (if enough) clearing it */
    for (int pass = 0; pass < 2; pass++) {
        size_t freed = 0;
        for (int i = 0; i < n_calls - n_keep; i++) {
            const cJSON *fn   = cJSON_GetObjectItemCaseSensitive(calls[i], "function");
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
            const cJSON *id   = cJSON_GetObjectItemCaseSensitive(calls[i], "id");
            if (!cJSON_IsString(name) || !cJSON_IsString(id) || names(excl, name->valuestring))
                continue;
            cJSON *res = result_of(req, id->valuestring);
            cJSON *c   = cJSON_GetObjectItemCaseSensitive(res, "content");
            if (c && !(cJSON_IsString(c) && !strcmp(c->valuestring, CLEARED))) {
                size_t had = content_bytes(c);
                freed += had > strlen(CLEARED) ? had - strlen(CLEARED) : 0;
                if (pass == 1)
                    cJSON_ReplaceItemInObjectCaseSensitive(res, "content",
                                                           cJSON_CreateString(CLEARED));
            }
            if (cJSON_IsTrue(inputs) || names(inputs, name->valuestring)) {
                cJSON *args = cJSON_GetObjectItemCaseSensitive((cJSON *)fn, "arguments");
                char *a     = args ? cJSON_PrintUnformatted(args) : NULL;
                freed += a && strlen(a) > 2 ? strlen(a) - 2 : 0;
                free(a);
                if (pass == 1)
                    cJSON_ReplaceItemInObjectCaseSensitive((cJSON *)fn, "arguments",
                                                           cJSON_CreateObject());
            }
        }
        if (pass == 0 && (int64_t)(freed / BYTES_PER_TOKEN) < n_least)
            break;
    }
    free(calls);
    return true;
}

/* -------------------------------------------------------------- edits --- */

bool anth_context_edits(const cJSON *cm, struct oai_request *req, struct oai_error *e)
{
    if (!cJSON_IsObject(cm))
        return BAD(e, "context_management: Input should be a valid dictionary");
    static const char *const keys[] = {"edits", NULL};
    anth_note_others(req, cm, "context_management", keys);
    const cJSON *edits = reqjson_field(cm, "edits");
    if (!edits)
        return true;
    if (!cJSON_IsArray(edits))
        return BAD(e, "context_management.edits: Input should be a valid list");
    int i = 0;
    const cJSON *ed;
    cJSON_ArrayForEach(ed, edits)
    {
        char path[64];
        snprintf(path, sizeof path, "context_management.edits.%d", i++);
        const cJSON *t = cJSON_IsObject(ed) ? reqjson_field(ed, "type") : NULL;
        if (!cJSON_IsString(t))
            return BAD(e, "%s.type: Field required", path);
        bool ok = true;
        if (!strcmp(t->valuestring, "clear_thinking_20251015"))
            ok = clear_thinking(ed, path, req, e);
        else if (!strcmp(t->valuestring, "clear_tool_uses_20250919"))
            ok = clear_tool_uses(ed, path, req, e);
        else {
            char p[96];
            snprintf(p, sizeof p, "context_management.edits.%.40s", t->valuestring);
            anth_note(req, p, strcmp(t->valuestring, "compact_20260112") != 0);
        }
        if (!ok)
            return false;
    }
    return true;
}
