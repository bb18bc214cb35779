/*
 * anth_request.c: stage 1 of anthropic.h, a Messages body -> a validated
 * struct oai_request in the chat path's form. Runs on the event loop: JSON
 * and field checks only.
 *
 * The field policy (openai.h): a field that changes what is generated is
 * honoured, or refused with a sentence saying why where ignoring it would
 * give a wrong answer (an image to a text model, a tool the server would
 * have to run); one that does not (caching hints, bookkeeping, betas) is
 * accepted and noted in req->ignored through anth_note, unknown ones
 * marked, at every level of the body. Malformed values of known fields are
 * refused. Messages name the field as Anthropic's do, a dotted path
 * ("messages.1.content.0.tool_use_id: Field required"), in pydantic's
 * words (ANTH, the wording of reqjson's validators).
 *
 * Every top-level field is one row of one table (FIELDS): which bodies
 * take it, its type and range or its function, where it is stored.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/anthropic.h"
#include "serve/reqjson.h"

#define BAD    REQJSON_BAD
#define OOM(e) REQJSON_OOM(e, "api_error")

#define PATH_MAX_LEN 96

/* ---------------------------------------------------------- typed fields --- */

/* A field's path into buf[PATH_MAX_LEN]; a path cut short still shows where the field is. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void
pathf(char *buf, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, PATH_MAX_LEN, fmt, ap);
    va_end(ap);
}

static bool missing(struct oai_error *e, const char *path)
{
    return BAD(e, NULL, NULL, "%s: Field required", path);
}

static bool wrong(struct oai_error *e, const char *path, const char *want)
{
    return BAD(e, NULL, NULL, "%s: Input should be %s", path, want);
}

void anth_note(struct oai_request *req, const char *path, bool unknown)
{
    char name[OAI_IGNORED_LEN];
    size_t n = 0;
    for (const char *p = path; *p && n + 1 < sizeof name;) {
        size_t seg = strcspn(p, ".");
        bool index = seg > 0 && strspn(p, "0123456789") == seg;
        if (!index) {
            if (n && n + 1 < sizeof name)
                name[n++] = '.';
            for (size_t k = 0; k < seg && n + 1 < sizeof name; k++) {
                unsigned char c = (unsigned char)p[k];
                bool safe       = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                            (c >= '0' && c <= '9') || strchr("_:/-", c);
                name[n++] = safe ? (char)c : '?';
            }
        }
        p += seg + (p[seg] == '.');
    }
    name[n] = 0;
    for (int32_t k = 0; k < req->n_ignored; k++)
        if (!strcmp(req->ignored[k].path, name))
            return;
    /* a full list keeps naming the unknown fields (--strict-fields refuses by them): an
     * unknown one takes a known one's place, which is then only counted */
    for (int32_t k = 0; unknown && req->n_ignored == OAI_MAX_IGNORED && k < req->n_ignored; k++)
        if (!req->ignored[k].unknown) {
            memmove(&req->ignored[k], &req->ignored[k + 1],
                    (size_t)(req->n_ignored - k - 1) * sizeof req->ignored[0]);
            req->n_ignored--;
            req->n_ignored_more++;
            break;
        }
    oai_ignore(req, name, unknown);
}

void anth_note_others(struct oai_request *req, const cJSON *obj, const char *path,
                      const char *const *known)
{
    const cJSON *it;
    cJSON_ArrayForEach(it, obj)
    {
        size_t k = 0;
        while (known[k] && strcmp(known[k], it->string))
            k++;
        if (!known[k] && !cJSON_IsNull(it)) {
            char p[PATH_MAX_LEN];
            pathf(p, "%s%s%.64s", path, *path ? "." : "", it->string);
            anth_note(req, p, true);
        }
    }
}

/* Notes the field name of obj, when given, as known and without effect here. */
static void known_noop(struct oai_request *req, const cJSON *obj, const char *path,
                       const char *name)
{
    if (!reqjson_field(obj, name))
        return;
    char p[PATH_MAX_LEN];
    pathf(p, "%s%s%s", path, *path ? "." : "", name);
    anth_note(req, p, false);
}

/*
 * output_config.effort at path as the template's reasoning_effort, on
 * OpenAI's scale as the chat path passes it: low, medium, high and xhigh as
 * they are, max (above xhigh) as xhigh, OpenAI's top. NULL with *e set when
 * it is none of them.
 */
static const char *effort_value(const cJSON *it, const char *path, struct oai_error *e)
{
    static const char *const names[] = {"low", "medium", "high", "xhigh", "max"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
        if (cJSON_IsString(it) && !strcmp(it->valuestring, names[k]))
            return k < 4 ? names[k] : "xhigh";
    BAD(e, NULL, NULL, "%s: Input should be 'low', 'medium', 'high', 'xhigh' or 'max'", path);
    return NULL;
}

/* Pydantic's wording, as Anthropic's API refuses: a number that is not finite is no valid
 * number at all. */
static bool out_of_range(struct oai_error *e, const char *path, enum reqjson_type t, double lo,
                         double hi, const cJSON *it)
{
    double v = it->valuedouble;
    if (!isfinite(v))
        return wrong(e, path, "a valid number");
    if (t != RJ_INTEGER)
        return BAD(e, NULL, NULL, "%s: Input should be between %g and %g, but got %g", path, lo, hi,
                   v);
    if (v < lo)
        return BAD(e, NULL, NULL, "%s: Input should be greater than or equal to %.0f", path, lo);
    return BAD(e, NULL, NULL, "%s: Input should be less than or equal to %.0f", path, hi);
}

static bool wrong_type(struct oai_error *e, const char *path, const char *want, const cJSON *it)
{
    return wrong(e, path, want);
}

static const struct reqjson_dialect ANTH = {
    .type_name    = {"a valid number", "a valid integer", "a valid boolean", "a valid string",
                     "a valid dictionary", "a valid list"},
    .missing      = missing,
    .wrong_type   = wrong_type,
    .out_of_range = out_of_range,
};

/* A string field that must be present: its value, or NULL with *e set. */
static const char *want_string(const cJSON *obj, const char *name, const char *path,
                               struct oai_error *e)
{
    const cJSON *it = reqjson_member(&ANTH, obj, name, path, RJ_STRING, e);
    return it ? it->valuestring : NULL;
}

/* cache_control: accepted and ignored (the prefix cache needs no hint), but checked. */
static bool check_cache_control(struct oai_request *req, const cJSON *obj, const char *path,
                                struct oai_error *e)
{
    const cJSON *cc = reqjson_field(obj, "cache_control");
    if (!cc)
        return true;
    char p[PATH_MAX_LEN];
    pathf(p, "%s%scache_control", path, *path ? "." : "");
    if (!reqjson_check(&ANTH, cc, p, RJ_OBJECT, e))
        return false;
    static const char *const keys[] = {"type", "ttl", NULL};
    anth_note(req, p, false);
    anth_note_others(req, cc, p, keys);
    const cJSON *t = reqjson_field(cc, "type");
    if (!cJSON_IsString(t) || strcmp(t->valuestring, "ephemeral"))
        return BAD(e, NULL, NULL, "%s.type: Input should be 'ephemeral'", p);
    const cJSON *ttl = reqjson_field(cc, "ttl");
    if (ttl && (!cJSON_IsString(ttl) ||
                (strcmp(ttl->valuestring, "5m") && strcmp(ttl->valuestring, "1h"))))
        return BAD(e, NULL, NULL, "%s.ttl: Input should be '5m' or '1h'", p);
    return true;
}

/* ---------------------------------------------------------------- blocks --- */

/* Text parts being gathered for one OpenAI message. */
struct parts {
    cJSON *arr; /* [{"type": "text", "text": ...}] */
    int n;
};

static bool parts_add(struct parts *pt, const char *text, struct oai_error *e)
{
    if (!pt->arr && !(pt->arr = cJSON_CreateArray()))
        return OOM(e);
    cJSON *p = cJSON_CreateObject();
    if (!p || !cJSON_AddStringToObject(p, "type", "text") ||
        !cJSON_AddStringToObject(p, "text", text)) {
        cJSON_Delete(p);
        return OOM(e);
    }
    cJSON_AddItemToArray(pt->arr, p);
    pt->n++;
    return true;
}

/*
 * The content of an OpenAI message from gathered parts (taken): one part
 * as a plain string, several as an array of text parts (the template joins
 * them, or reads them itself), none as "".
 */
static cJSON *parts_content(struct parts *pt)
{
    cJSON *c;
    if (pt->n == 1)
        c = cJSON_CreateString(
            cJSON_GetObjectItem(cJSON_GetArrayItem(pt->arr, 0), "text")->valuestring);
    else if (pt->n > 1) {
        c       = pt->arr;
        pt->arr = NULL;
    } else
        c = cJSON_CreateString("");
    cJSON_Delete(pt->arr);
    pt->arr = NULL;
    pt->n   = 0;
    return c;
}

/*
 * What the conversation changes in the offered tools, gathered while the
 * messages are read and applied to the tools after them (take_tools): a
 * tool with defer_loading is offered once a tool_reference (a client tool
 * search's result), a tool_addition or a call names it; tool_addition and
 * tool_removal blocks in system messages add and withdraw tools. Templates
 * list the tools before the conversation, so a change holds for all of it;
 * the model reads where it happened as a sentence in place.
 */
struct tool_changes {
    cJSON *load;   /* names of tools made available */
    cJSON *add;    /* [{"path", "tool"}]: tool definitions added inline (copies) */
    cJSON *remove; /* names of tools withdrawn */
};

static void changes_free(struct tool_changes *tc)
{
    cJSON_Delete(tc->load);
    cJSON_Delete(tc->add);
    cJSON_Delete(tc->remove);
}

static bool has_name(const cJSON *names, const char *name)
{
    const cJSON *n;
    cJSON_ArrayForEach(n, names)
    {
        if (!strcmp(n->valuestring, name))
            return true;
    }
    return false;
}

/* Adds name to the list *names (made when NULL). */
static bool add_name(cJSON **names, const char *name, struct oai_error *e)
{
    if ((!*names && !(*names = cJSON_CreateArray())) ||
        (!has_name(*names, name) && !cJSON_AddItemToArray(*names, cJSON_CreateString(name))))
        return OOM(e);
    return true;
}

/* "Tool NAME is now available." (or "no longer") into pt, where the change happened. */
static bool tool_sentence(struct parts *pt, const char *name, bool added, struct oai_error *e)
{
    char s[200];
    snprintf(s, sizeof s, "Tool %.128s is %s available.", name, added ? "now" : "no longer");
    return parts_add(pt, s, e);
}

/* A {"type": "tool_reference", "tool_name"} block: the tool is loaded. */
static bool tool_reference_block(struct oai_request *req, struct tool_changes *tc, const cJSON *b,
                                 const char *path, struct parts *pt, struct oai_error *e)
{
    static const char *const keys[] = {"type", "tool_name", "cache_control", NULL};
    anth_note_others(req, b, path, keys);
    if (!check_cache_control(req, b, path, e))
        return false;
    const char *name = want_string(b, "tool_name", path, e);
    return name && add_name(&tc->load, name, e) && tool_sentence(pt, name, true, e);
}

/*
 * A system message's tool_addition or tool_removal block: "tool" a
 * tool_reference by name, or (additions) a tool_definition. MCP tools are
 * refused: hearth connects to no MCP server.
 */
static bool tool_change_block(struct oai_request *req, struct tool_changes *tc, const cJSON *b,
                              const char *path, bool added, struct parts *pt, struct oai_error *e)
{
    static const char *const keys[] = {"type", "tool", "cache_control", NULL};
    anth_note_others(req, b, path, keys);
    if (!check_cache_control(req, b, path, e))
        return false;
    char p[PATH_MAX_LEN];
    pathf(p, "%s.tool", path);
    const cJSON *t = reqjson_member(&ANTH, b, "tool", path, RJ_OBJECT, e);
    if (!t)
        return false;
    const char *type = want_string(t, "type", p, e);
    if (!type)
        return false;
    if (!strcmp(type, "tool_reference")) {
        static const char *const ref[] = {"type", "name", NULL};
        anth_note_others(req, t, p, ref);
        const char *name = want_string(t, "name", p, e);
        return name && add_name(added ? &tc->load : &tc->remove, name, e) &&
               tool_sentence(pt, name, added, e);
    }
    if (added && !strcmp(type, "tool_definition")) {
        static const char *const def[] = {"type", "definition", NULL};
        anth_note_others(req, t, p, def);
        const cJSON *d = reqjson_member(&ANTH, t, "definition", p, RJ_OBJECT, e);
        if (!d)
            return false;
        const cJSON *n = reqjson_field(d, "name");
        char dp[PATH_MAX_LEN];
        pathf(dp, "%s.definition", p);
        if (!cJSON_IsString(n))
            return BAD(e, NULL, NULL, "%s.name: Field required", dp);
        cJSON *entry = cJSON_CreateObject();
        if (!entry || (!tc->add && !(tc->add = cJSON_CreateArray())) ||
            !cJSON_AddStringToObject(entry, "path", dp) ||
            !cJSON_AddItemToObject(entry, "tool", cJSON_Duplicate(d, true))) {
            cJSON_Delete(entry);
            return OOM(e);
        }
        cJSON_AddItemToArray(tc->add, entry);
        return add_name(&tc->load, n->valuestring, e) && tool_sentence(pt, n->valuestring, true, e);
    }
    if (strstr(type, "mcp_"))
        return BAD(e, NULL, NULL,
                   "%s.type: '%.40s' is not supported by this server: it connects to no MCP "
                   "servers",
                   p, type);
    return BAD(e, NULL, NULL, "%s.type: Input should be 'tool_reference'%s", p,
               added ? " or 'tool_definition'" : "");
}

/* A {"type": "text", "text"} block: its text into pt. Citations are where an earlier reply's
 * text came from: the text itself is what the model reads. */
static bool text_block(struct oai_request *req, const cJSON *b, const char *path, struct parts *pt,
                       struct oai_error *e)
{
    static const char *const keys[] = {"type", "text", "cache_control", "citations", NULL};
    anth_note_others(req, b, path, keys);
    if (!check_cache_control(req, b, path, e))
        return false;
    static const struct reqjson_row cit[] = {{"citations", RJ_ARRAY, false}};
    if (!reqjson_rows(&ANTH, b, path, cit, 1, e))
        return false;
    known_noop(req, b, path, "citations");
    const char *text = want_string(b, "text", path, e);
    return text && parts_add(pt, text, e);
}

static const char *kind_refusal(const char *type)
{
    if (!strcmp(type, "image") || !strcmp(type, "search_result") ||
        !strcmp(type, "container_upload"))
        return "is not supported by this server: only text, tool_use, tool_result, thinking "
               "and plain-text document blocks are";
    if (strstr(type, "server_tool_use") || strstr(type, "_tool_result") || strstr(type, "mcp_tool"))
        return "is not supported by this server: it runs no server tools";
    return NULL;
}

/* The type of block b (an object with a string "type"), or NULL with *e set. */
static const char *block_type(const cJSON *b, const char *path, struct oai_error *e)
{
    if (!reqjson_check(&ANTH, b, path, RJ_OBJECT, e))
        return NULL;
    const char *type = want_string(b, "type", path, e);
    if (!type)
        return NULL;
    const char *why = kind_refusal(type);
    if (why) {
        BAD(e, NULL, NULL, "%s: a '%.32s' block %s", path, type, why);
        return NULL;
    }
    return type;
}

/*
 * A document block of plain text (source type "text", or "content" of text
 * blocks): its title, context and text into pt, as separate parts. PDFs,
 * images and files (base64, url, file sources) are refused: hearth reads
 * text only.
 */
static bool document_block(struct oai_request *req, const cJSON *b, const char *path,
                           struct parts *pt, struct oai_error *e)
{
    static const char *const keys[] = {"type",      "source",        "title", "context",
                                       "citations", "cache_control", NULL};
    anth_note_others(req, b, path, keys);
    if (!check_cache_control(req, b, path, e))
        return false;
    known_noop(req, b, path, "citations");
    char p[PATH_MAX_LEN];
    pathf(p, "%s.source", path);
    const cJSON *src = reqjson_member(&ANTH, b, "source", path, RJ_OBJECT, e);
    if (!src)
        return false;
    const char *type = want_string(src, "type", p, e);
    if (!type)
        return false;
    bool text = !strcmp(type, "text");
    if (!text && strcmp(type, "content"))
        return BAD(e, NULL, NULL,
                   "%s: a '%.32s' document is not supported by this server: only plain-text "
                   "documents (source type 'text' or 'content') are",
                   p, type);
    static const char *const keys_text[]    = {"type", "media_type", "data", NULL};
    static const char *const keys_content[] = {"type", "content", NULL};
    anth_note_others(req, src, p, text ? keys_text : keys_content);
    const char *const fields[] = {"title", "context"};
    for (size_t k = 0; k < 2; k++) {
        const cJSON *f = reqjson_field(b, fields[k]);
        char fp[PATH_MAX_LEN];
        pathf(fp, "%s.%s", path, fields[k]);
        if (f && !reqjson_check(&ANTH, f, fp, RJ_STRING, e))
            return false;
        if (f && *f->valuestring && !parts_add(pt, f->valuestring, e))
            return false;
    }
    if (text) {
        const char *data = want_string(src, "data", p, e);
        return data && parts_add(pt, data, e);
    }
    const cJSON *c = reqjson_field(src, "content");
    char cp[PATH_MAX_LEN];
    pathf(cp, "%s.content", p);
    if (cJSON_IsString(c))
        return parts_add(pt, c->valuestring, e);
    if (!cJSON_IsArray(c))
        return c ? wrong(e, cp, "a valid string or a list of text blocks") : missing(e, cp);
    int j = 0;
    const cJSON *blk;
    cJSON_ArrayForEach(blk, c)
    {
        char bp[PATH_MAX_LEN];
        pathf(bp, "%s.%d", cp, j++);
        const char *bt = block_type(blk, bp, e);
        if (!bt)
            return false;
        if (strcmp(bt, "text"))
            return BAD(e, NULL, NULL, "%s.type: Input should be 'text'", bp);
        if (!text_block(req, blk, bp, pt, e))
            return false;
    }
    return true;
}

/* A tool_result's content: a string, or text, plain-text document and tool_reference blocks;
 * into pt. */
static bool result_content(struct oai_request *req, struct tool_changes *tc, const cJSON *c,
                           const char *path, struct parts *pt, struct oai_error *e)
{
    char p[PATH_MAX_LEN];
    pathf(p, "%s.content", path);
    if (!c)
        return true;
    if (cJSON_IsString(c))
        return parts_add(pt, c->valuestring, e);
    if (!cJSON_IsArray(c))
        return wrong(e, p, "a valid string or a list of text blocks");
    int j = 0;
    const cJSON *b;
    cJSON_ArrayForEach(b, c)
    {
        char bp[PATH_MAX_LEN];
        pathf(bp, "%s.%d", p, j++);
        const char *type = block_type(b, bp, e);
        if (!type)
            return false;
        bool ok = !strcmp(type, "text")       ? text_block(req, b, bp, pt, e)
                  : !strcmp(type, "document") ? document_block(req, b, bp, pt, e)
                  : !strcmp(type, "tool_reference")
                      ? tool_reference_block(req, tc, b, bp, pt, e)
                      : BAD(e, NULL, NULL,
                            "%s: a '%.32s' block is not supported in a tool_result by this "
                            "server: only text, plain-text document and tool_reference "
                            "blocks are",
                            bp, type);
        if (!ok)
            return false;
    }
    return true;
}

/* A tool_result block -> a {"role": "tool"} message appended to out. */
static bool tool_result_block(struct oai_request *req, struct tool_changes *tc, const cJSON *b,
                              const char *path, cJSON *out, struct oai_error *e)
{
    static const char *const keys[] = {"type",     "tool_use_id",   "content",
                                       "is_error", "cache_control", NULL};
    anth_note_others(req, b, path, keys);
    if (!check_cache_control(req, b, path, e))
        return false;
    const char *id = want_string(b, "tool_use_id", path, e);
    if (!id)
        return false;
    if (!*id)
        return BAD(e, NULL, NULL, "%s.tool_use_id: String should have at least 1 character", path);
    static const struct reqjson_row flag[] = {{"is_error", RJ_BOOLEAN, false}};
    if (!reqjson_rows(&ANTH, b, path, flag, 1, e))
        return false;
    const cJSON *err = reqjson_field(b, "is_error");
    struct parts pt  = {0};
    if (!result_content(req, tc, reqjson_field(b, "content"), path, &pt, e)) {
        cJSON_Delete(pt.arr);
        return false;
    }
    /* OpenAI's tool messages have no error flag: the model reads it off the text */
    cJSON *first = pt.n ? cJSON_GetObjectItem(cJSON_GetArrayItem(pt.arr, 0), "text") : NULL;
    if (cJSON_IsTrue(err) && (!first || !*first->valuestring)) {
        if (first)
            cJSON_SetValuestring(first, "Error");
        else if (!parts_add(&pt, "Error", e))
            return false;
    } else if (cJSON_IsTrue(err)) {
        cJSON *t     = first;
        size_t n     = strlen(t->valuestring) + sizeof "Error: ";
        char *joined = malloc(n);
        if (!joined) {
            cJSON_Delete(pt.arr);
            return OOM(e);
        }
        snprintf(joined, n, "Error: %s", t->valuestring);
        cJSON_SetValuestring(t, joined);
        free(joined);
    }
    cJSON *m = cJSON_CreateObject();
    if (!m) {
        cJSON_Delete(pt.arr);
        return OOM(e);
    }
    cJSON_AddItemToArray(out, m);
    cJSON_AddStringToObject(m, "role", "tool");
    cJSON_AddStringToObject(m, "tool_call_id", id);
    cJSON_AddItemToObject(m, "content", parts_content(&pt));
    return true;
}

/* A tool_use block -> one entry of an assistant's tool_calls. */
static bool tool_use_block(struct oai_request *req, struct tool_changes *tc, const cJSON *b,
                           const char *path, cJSON *calls, struct oai_error *e)
{
    static const char *const keys[] = {"type",          "id",     "name", "input",
                                       "cache_control", "caller", NULL};
    anth_note_others(req, b, path, keys);
    if (!check_cache_control(req, b, path, e))
        return false;
    const cJSON *caller = reqjson_field(b, "caller");
    if (caller) {
        const cJSON *t = cJSON_IsObject(caller) ? reqjson_field(caller, "type") : NULL;
        if (!cJSON_IsString(t) || strcmp(t->valuestring, "direct"))
            return BAD(e, NULL, NULL,
                       "%s.caller: only {\"type\": \"direct\"} is supported by this server", path);
    }
    const char *id   = want_string(b, "id", path, e);
    const char *name = id ? want_string(b, "name", path, e) : NULL;
    if (!name || !add_name(&tc->load, name, e)) /* a tool called is a tool loaded */
        return false;
    const cJSON *input = reqjson_member(&ANTH, b, "input", path, RJ_OBJECT, e);
    if (!input)
        return false;
    cJSON *call = cJSON_CreateObject();
    cJSON *fn   = call ? cJSON_CreateObject() : NULL;
    cJSON *args = fn ? cJSON_Duplicate(input, true) : NULL;
    if (!args) {
        cJSON_Delete(call);
        cJSON_Delete(fn);
        return OOM(e);
    }
    cJSON_AddStringToObject(call, "id", id);
    cJSON_AddStringToObject(call, "type", "function");
    cJSON_AddStringToObject(fn, "name", name);
    cJSON_AddItemToObject(fn, "arguments", args);
    cJSON_AddItemToObject(call, "function", fn);
    cJSON_AddItemToArray(calls, call);
    return true;
}

/* A thinking block: its text appended to reasoning (the signature is not checked). */
static bool thinking_block(struct oai_request *req, const cJSON *b, const char *path,
                           struct parts *reasoning, struct oai_error *e)
{
    static const char *const keys[] = {"type", "thinking", "signature", "cache_control", NULL};
    anth_note_others(req, b, path, keys);
    if (!check_cache_control(req, b, path, e))
        return false;
    const char *text = want_string(b, "thinking", path, e);
    if (!text || !want_string(b, "signature", path, e))
        return false;
    return parts_add(reasoning, text, e);
}

/* The thinking texts of a turn as one reasoning_content string (joined by newlines). */
static cJSON *reasoning_string(struct parts *pt)
{
    size_t n = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, pt->arr) n += strlen(cJSON_GetObjectItem(p, "text")->valuestring) + 1;
    char *s = malloc(n + 1);
    if (!s)
        return NULL;
    size_t at = 0;
    cJSON_ArrayForEach(p, pt->arr)
    {
        const char *t = cJSON_GetObjectItem(p, "text")->valuestring;
        if (at)
            s[at++] = '\n';
        memcpy(s + at, t, strlen(t));
        at += strlen(t);
    }
    s[at]    = 0;
    cJSON *r = cJSON_CreateString(s);
    free(s);
    cJSON_Delete(pt->arr);
    pt->arr = NULL;
    pt->n   = 0;
    return r;
}

/* ---------------------------------------------------------------- turns --- */

/*
 * One Anthropic turn -> OpenAI messages appended to out. A user turn's
 * tool_result blocks become "tool" messages, in order, before one user
 * message holding its text; an assistant turn's text, tool_use and thinking
 * become one assistant message (content, tool_calls, reasoning_content).
 * redacted_thinking (reasoning encrypted by another provider, which no model
 * here can read) is dropped, as templates drop earlier turns' reasoning.
 */
static bool take_turn(struct oai_request *req, struct tool_changes *tc, const cJSON *m,
                      const char *path, bool assistant, cJSON *out, struct oai_error *e)
{
    const char *role = assistant ? "assistant" : "user";
    const cJSON *c   = reqjson_field(m, "content");
    char cp[PATH_MAX_LEN];
    pathf(cp, "%s.content", path);
    if (!c)
        return missing(e, cp);
    cJSON *msg = cJSON_CreateObject();
    if (!msg || !cJSON_AddStringToObject(msg, "role", role)) {
        cJSON_Delete(msg);
        return OOM(e);
    }
    if (cJSON_IsString(c)) {
        cJSON_AddStringToObject(msg, "content", c->valuestring);
        cJSON_AddItemToArray(out, msg);
        return true;
    }
    if (!cJSON_IsArray(c)) {
        cJSON_Delete(msg);
        return wrong(e, cp, "a valid string or a list of content blocks");
    }
    if (cJSON_GetArraySize(c) == 0) {
        cJSON_Delete(msg);
        return BAD(e, NULL, NULL, "%s: List should have at least 1 item", cp);
    }
    struct parts text = {0}, reasoning = {0};
    cJSON *calls = cJSON_CreateArray();
    bool ok      = calls != NULL || OOM(e);
    int j        = 0;
    const cJSON *b;
    cJSON_ArrayForEach(b, c)
    {
        if (!ok)
            break;
        char bp[PATH_MAX_LEN];
        pathf(bp, "%s.%d", cp, j++);
        const char *type = block_type(b, bp, e);
        if (!type)
            ok = false;
        else if (!strcmp(type, "text"))
            ok = text_block(req, b, bp, &text, e);
        else if (!strcmp(type, "document") && !assistant)
            ok = document_block(req, b, bp, &text, e);
        else if (!strcmp(type, "tool_result") && !assistant)
            ok = tool_result_block(req, tc, b, bp, out, e);
        else if (!strcmp(type, "tool_use") && assistant)
            ok = tool_use_block(req, tc, b, bp, calls, e);
        else if (!strcmp(type, "thinking") && assistant)
            ok = thinking_block(req, b, bp, &reasoning, e);
        else if (!strcmp(type, "redacted_thinking") && assistant)
            anth_note(req, "messages.content.redacted_thinking", false);
        else if (!strcmp(type, "tool_result") || !strcmp(type, "tool_use") ||
                 !strcmp(type, "thinking") || !strcmp(type, "redacted_thinking") ||
                 !strcmp(type, "document"))
            ok = BAD(e, NULL, NULL, "%s: a '%s' block belongs in %s turn", bp, type,
                     assistant ? "a user" : "an assistant");
        else
            ok = BAD(e, NULL, NULL,
                     "%s.type: '%.32s' is not a content block type this server knows", bp, type);
    }
    if (ok && assistant) {
        cJSON_AddItemToObject(msg, "content", parts_content(&text));
        if (cJSON_GetArraySize(calls) > 0) {
            cJSON_AddItemToObject(msg, "tool_calls", calls);
            calls = NULL;
        }
        if (reasoning.n) {
            cJSON *r = reasoning_string(&reasoning);
            ok       = r ? (cJSON_AddItemToObject(msg, "reasoning_content", r), true) : OOM(e);
        }
        if (ok) {
            cJSON_AddItemToArray(out, msg);
            msg = NULL;
        }
    } else if (ok && text.n) { /* a user turn's text, after its tool results */
        cJSON_AddItemToObject(msg, "content", parts_content(&text));
        cJSON_AddItemToArray(out, msg);
        msg = NULL;
    }
    cJSON_Delete(msg);
    cJSON_Delete(calls);
    cJSON_Delete(text.arr);
    cJSON_Delete(reasoning.arr);
    return ok;
}

#define BILLING "x-anthropic-billing-header:"

/*
 * Claude Code opens its system prompt with a line like "x-anthropic-billing-
 * header: cc_version=2.1.x; cc_entrypoint=cli; cch=ab12c;" whose cch= stamp
 * changes with every request: left as it is, no two prompts would share a
 * cached prefix past it. The stamp means nothing to a model; it becomes
 * zeros of the same length (s is a copy the caller owns).
 */
static void blank_billing_stamp(char *s)
{
    if (strncmp(s, BILLING, sizeof BILLING - 1))
        return;
    char *end = s + strcspn(s, "\n");
    for (char *c = strstr(s, "cch="); c && c < end; c = strstr(c + 4, "cch=")) {
        for (char *v = c + 4; v < end && *v != ';' && *v != ' '; v++)
            *v = '0';
    }
}

/* The text part last added to pt, its billing stamp blanked; true, for chaining. */
static bool system_text(struct parts *pt)
{
    cJSON *t = cJSON_GetObjectItem(cJSON_GetArrayItem(pt->arr, pt->n - 1), "text");
    blank_billing_stamp(t->valuestring);
    return true;
}

/*
 * A system prompt, a string or text blocks -> a "system" message appended
 * to out (nothing for an empty one). path: "system", or the content of a
 * system message inside messages ("messages.3.content").
 */
static bool take_system(struct oai_request *req, struct tool_changes *tc, const cJSON *sys,
                        const char *path, cJSON *out, struct oai_error *e)
{
    struct parts pt = {0};
    if (cJSON_IsString(sys)) {
        if (!*sys->valuestring)
            return true; /* an empty system prompt asks for nothing */
        if (!parts_add(&pt, sys->valuestring, e) || !system_text(&pt))
            return false;
    } else if (cJSON_IsArray(sys)) {
        int j = 0;
        const cJSON *b;
        cJSON_ArrayForEach(b, sys)
        {
            char bp[PATH_MAX_LEN];
            pathf(bp, "%s.%d", path, j++);
            const char *type = block_type(b, bp, e);
            bool change =
                tc && type && (!strcmp(type, "tool_addition") || !strcmp(type, "tool_removal"));
            bool ok =
                type &&
                (change ? tool_change_block(req, tc, b, bp, !strcmp(type, "tool_addition"), &pt, e)
                 : strcmp(type, "text") ? BAD(e, NULL, NULL, "%s.type: Input should be 'text'", bp)
                                        : text_block(req, b, bp, &pt, e) && system_text(&pt));
            if (!ok) {
                cJSON_Delete(pt.arr);
                return false;
            }
        }
        if (!pt.n)
            return true;
    } else {
        return wrong(e, path, "a valid string or a list of text blocks");
    }
    cJSON *m = cJSON_CreateObject();
    if (!m) {
        cJSON_Delete(pt.arr);
        return OOM(e);
    }
    cJSON_AddStringToObject(m, "role", "system");
    cJSON_AddItemToObject(m, "content", parts_content(&pt));
    cJSON_AddItemToArray(out, m);
    return true;
}

/*
 * messages (and the top-level system prompt first) -> req->messages. A
 * message of role "system" (Claude Code sends them between turns) stays a
 * system message where it is: templates that take one there (Qwen3's)
 * render it in place; for one that refuses it, oai_prompt merges it into
 * the first.
 */
/*
 * A message of role "system" at path (index i of msgs, whose last user
 * message is at last_user): its content as a system message, unless its
 * clear_at is "next_user_message" and a user message follows it; its
 * output_config.effort, the latest shown, into *effort (the turn's effort,
 * over the top-level one).
 */
static bool take_system_message(struct oai_request *req, struct tool_changes *tc, const cJSON *m,
                                const char *path, int i, int last_user, const char **effort,
                                struct oai_error *e)
{
    static const char *const keys[] = {"role", "content", "clear_at", "output_config", NULL};
    anth_note_others(req, m, path, keys);
    char p[PATH_MAX_LEN];
    const cJSON *clear = reqjson_field(m, "clear_at");
    pathf(p, "%s.clear_at", path);
    if (clear && (!cJSON_IsString(clear) || (strcmp(clear->valuestring, "never") &&
                                             strcmp(clear->valuestring, "next_user_message"))))
        return BAD(e, NULL, NULL, "%s: Input should be 'next_user_message' or 'never'", p);
    bool shown      = !clear || !strcmp(clear->valuestring, "never") || i > last_user;
    const cJSON *oc = reqjson_field(m, "output_config");
    pathf(p, "%s.output_config", path);
    if (oc && !reqjson_check(&ANTH, oc, p, RJ_OBJECT, e))
        return false;
    static const char *const oc_keys[] = {"effort", NULL};
    anth_note_others(req, oc, p, oc_keys);
    const cJSON *eff = reqjson_field(oc, "effort");
    pathf(p, "%s.output_config.effort", path);
    const char *v = eff ? effort_value(eff, p, e) : NULL;
    if (eff && !v)
        return false;
    if (v && shown)
        *effort = v;
    const cJSON *c = reqjson_field(m, "content");
    pathf(p, "%s.content", path);
    if (!c && !oc)
        return missing(e, p);
    return !c || !shown || take_system(req, tc, c, p, req->messages, e);
}

static bool take_messages(const cJSON *msgs, const cJSON *sys, struct oai_request *req,
                          struct tool_changes *tc, const char **effort, struct oai_error *e)
{
    if (!reqjson_check(&ANTH, msgs, "messages", RJ_ARRAY, e))
        return false;
    if (cJSON_GetArraySize(msgs) == 0)
        return BAD(e, NULL, NULL, "messages: List should have at least 1 item");
    if (!(req->messages = cJSON_CreateArray()))
        return OOM(e);
    if (sys && !take_system(req, NULL, sys, "system", req->messages, e))
        return false;
    static const char *const keys[] = {"role", "content", NULL};
    int i = 0, last_user = -1;
    const cJSON *m;
    cJSON_ArrayForEach(m, msgs)
    {
        const cJSON *r = reqjson_field(m, "role");
        if (cJSON_IsString(r) && !strcmp(r->valuestring, "user"))
            last_user = i;
        i++;
    }
    i              = 0;
    bool assistant = false;
    cJSON_ArrayForEach(m, msgs)
    {
        char path[PATH_MAX_LEN];
        pathf(path, "messages.%d", i++);
        if (!reqjson_check(&ANTH, m, path, RJ_OBJECT, e))
            return false;
        const char *role = want_string(m, "role", path, e);
        if (!role)
            return false;
        assistant = !strcmp(role, "assistant");
        if (!strcmp(role, "system")) {
            if (!take_system_message(req, tc, m, path, i - 1, last_user, effort, e))
                return false;
            continue;
        }
        anth_note_others(req, m, path, keys);
        if (!assistant && strcmp(role, "user"))
            return BAD(e, NULL, NULL, "%s.role: Input should be 'user', 'assistant' or 'system'",
                       path);
        if (!take_turn(req, tc, m, path, assistant, req->messages, e))
            return false;
    }
    if (assistant)
        return BAD(e, NULL, NULL,
                   "messages.%d: the conversation ends with an assistant turn; continuing a "
                   "prefilled assistant reply is not supported by this server",
                   i - 1);
    return true;
}

/* ----------------------------------------------------------------- tools --- */

static bool valid_tool_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 128)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-'))
            return false;
    }
    return true;
}

/*
 * One client tool -> {"type": "function", "function": {name, description,
 * parameters[, strict]}}. strict true is kept as OpenAI's strict functions
 * carry it: hearth holds every call it parses to the tool's input_schema by
 * grammar (oai_grammar.c), and refuses strict tools whose calls it cannot
 * hold. *deferred: defer_loading is true (struct tool_changes). The rest of
 * a tool's fields shape how Anthropic streams or bills it (cache_control,
 * eager_input_streaming, allowed_callers, input_examples): accepted and
 * noted.
 */
static bool take_tool(struct oai_request *req, const cJSON *t, const char *path, cJSON *out,
                      bool *deferred, struct oai_error *e)
{
    /* in the order they are checked, so that of several faults the first is named */
    static const struct reqjson_row head[] = {
        {"description", RJ_STRING, false},
        {"input_schema", RJ_OBJECT, true},
    };
    static const struct reqjson_row tail[] = {
        {"strict", RJ_BOOLEAN, false},        {"eager_input_streaming", RJ_BOOLEAN, false},
        {"defer_loading", RJ_BOOLEAN, false}, {"input_examples", RJ_ARRAY, false},
        {"allowed_callers", RJ_ARRAY, false},
    };
    if (!reqjson_check(&ANTH, t, path, RJ_OBJECT, e))
        return false;
    const cJSON *type = reqjson_field(t, "type");
    if (type && (!cJSON_IsString(type) || strcmp(type->valuestring, "custom")))
        return BAD(e, NULL, NULL,
                   "%s.type: '%.40s' tools are not supported by this server: only client "
                   "tools (type 'custom', or no type) are",
                   path, cJSON_IsString(type) ? type->valuestring : "?");
    static const char *const keys[] = {"type",
                                       "name",
                                       "description",
                                       "input_schema",
                                       "cache_control",
                                       "strict",
                                       "eager_input_streaming",
                                       "defer_loading",
                                       "input_examples",
                                       "allowed_callers",
                                       NULL};
    anth_note_others(req, t, path, keys);
    if (!check_cache_control(req, t, path, e))
        return false;
    const char *name = want_string(t, "name", path, e);
    if (!name)
        return false;
    if (!valid_tool_name(name))
        return BAD(e, NULL, NULL, "%s.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'",
                   path);
    if (!reqjson_rows(&ANTH, t, path, head, sizeof head / sizeof head[0], e))
        return false;
    const cJSON *desc   = reqjson_field(t, "description");
    const cJSON *schema = reqjson_field(t, "input_schema");
    const cJSON *st     = reqjson_field(schema, "type");
    if (!cJSON_IsString(st) || strcmp(st->valuestring, "object")) {
        char sp[PATH_MAX_LEN];
        pathf(sp, "%s.input_schema", path);
        return BAD(e, NULL, NULL, "%s.type: Input should be 'object'", sp);
    }
    if (!reqjson_rows(&ANTH, t, path, tail, sizeof tail / sizeof tail[0], e))
        return false;
    known_noop(req, t, path, "eager_input_streaming"); /* calls come whole or streamed alike */
    *deferred = cJSON_IsTrue(reqjson_field(t, "defer_loading"));
    known_noop(req, t, path, "input_examples");
    known_noop(req, t, path, "allowed_callers");
    bool strict = cJSON_IsTrue(reqjson_field(t, "strict"));
    const cJSON *prev;
    cJSON_ArrayForEach(prev, out)
    {
        const cJSON *fn = cJSON_GetObjectItem(prev, "function");
        if (!strcmp(cJSON_GetObjectItem(fn, "name")->valuestring, name))
            return BAD(e, NULL, NULL, "tools: Tool names must be unique ('%.64s' is given twice)",
                       name);
    }
    cJSON *o  = cJSON_CreateObject();
    cJSON *fn = o ? cJSON_CreateObject() : NULL;
    cJSON *ps = fn ? cJSON_Duplicate(schema, true) : NULL;
    if (!ps) {
        cJSON_Delete(o);
        cJSON_Delete(fn);
        return OOM(e);
    }
    cJSON_AddStringToObject(o, "type", "function");
    cJSON_AddStringToObject(fn, "name", name);
    if (desc)
        cJSON_AddStringToObject(fn, "description", desc->valuestring);
    cJSON_AddItemToObject(fn, "parameters", ps);
    if (strict)
        cJSON_AddTrueToObject(fn, "strict");
    cJSON_AddItemToObject(o, "function", fn);
    cJSON_AddItemToArray(out, o);
    return true;
}

/* Drops the tool named name from out (a list of function tools), if there. */
static void drop_tool(cJSON *out, const char *name)
{
    for (cJSON *t = out->child; t; t = t->next) {
        const cJSON *n = cJSON_GetObjectItem(cJSON_GetObjectItem(t, "function"), "name");
        if (!strcmp(n->valuestring, name)) {
            cJSON_Delete(cJSON_DetachItemViaPointer(out, t));
            return;
        }
    }
}

/* tools (may be NULL) and the conversation's changes to them -> req->tools (NULL if none). */
static bool take_tools(const cJSON *tools, struct tool_changes *tc, struct oai_request *req,
                       struct oai_error *e)
{
    if (tools && !reqjson_check(&ANTH, tools, "tools", RJ_ARRAY, e))
        return false;
    cJSON *out = cJSON_CreateArray(), *deferred = cJSON_CreateArray();
    bool ok = (out && deferred) || OOM(e);
    int j   = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, (ok ? tools : NULL))
    {
        char path[PATH_MAX_LEN];
        pathf(path, "tools.%d", j++);
        bool def = false;
        ok       = take_tool(req, t, path, out, &def, e);
        if (!ok)
            break;
        if (def) {
            const cJSON *n = reqjson_field(t, "name");
            ok = cJSON_AddItemToArray(deferred, cJSON_CreateString(n->valuestring)) || OOM(e);
        }
    }
    cJSON_ArrayForEach(t, (ok ? tc->add : NULL))
    {
        const cJSON *tool = cJSON_GetObjectItem(t, "tool");
        const char *name  = cJSON_GetObjectItem(tool, "name")->valuestring;
        bool def          = false;
        drop_tool(out, name); /* a definition given again replaces the earlier one */
        ok = take_tool(req, tool, cJSON_GetObjectItem(t, "path")->valuestring, out, &def, e);
        if (!ok)
            break;
    }
    cJSON_ArrayForEach(t, (ok ? deferred : NULL))
    {
        if (!has_name(tc->load, t->valuestring))
            drop_tool(out, t->valuestring);
    }
    cJSON_ArrayForEach(t, (ok ? tc->remove : NULL))
    {
        drop_tool(out, t->valuestring);
    }
    cJSON_Delete(deferred);
    if (!ok || cJSON_GetArraySize(out) == 0) { /* none offered: as if absent */
        cJSON_Delete(out);
        return ok;
    }
    req->tools = out;
    return true;
}

static bool offered(const struct oai_request *req, const char *name)
{
    const cJSON *t;
    cJSON_ArrayForEach(t, req->tools)
    {
        if (!strcmp(cJSON_GetObjectItem(cJSON_GetObjectItem(t, "function"), "name")->valuestring,
                    name))
            return true;
    }
    return false;
}

static bool take_tool_choice(const cJSON *tc, struct oai_request *req, struct oai_error *e)
{
    if (!reqjson_check(&ANTH, tc, "tool_choice", RJ_OBJECT, e))
        return false;
    const char *type = want_string(tc, "type", "tool_choice", e);
    if (!type)
        return false;
    bool is_tool = !strcmp(type, "tool"), is_none = !strcmp(type, "none");
    if (!is_tool && !is_none && strcmp(type, "auto") && strcmp(type, "any"))
        return BAD(e, NULL, NULL,
                   "tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'");
    static const char *const keys_tool[] = {"type", "name", "disable_parallel_tool_use", NULL};
    static const char *const keys[]      = {"type", "disable_parallel_tool_use", NULL};
    anth_note_others(req, tc, "tool_choice", is_tool ? keys_tool : keys);
    const cJSON *dp = reqjson_field(tc, "disable_parallel_tool_use");
    if (dp && !reqjson_check(&ANTH, dp, "tool_choice.disable_parallel_tool_use", RJ_BOOLEAN, e))
        return false;
    req->parallel_tool_calls = !cJSON_IsTrue(dp);
    if (is_none) {
        known_noop(req, tc, "tool_choice", "disable_parallel_tool_use"); /* no calls anyway */
        req->tool_choice = OAI_TOOL_NONE;
        return true;
    }
    if (!strcmp(type, "auto"))
        return true;
    if (!req->tools)
        return BAD(e, NULL, NULL, "tool_choice: tool_choice '%s' needs tools", type);
    if (is_tool) {
        const char *name = want_string(tc, "name", "tool_choice", e);
        if (!name)
            return false;
        if (!offered(req, name))
            return BAD(e, NULL, NULL, "tool_choice.name: '%.64s' is not one of the tools given",
                       name);
        if (!(req->tool_name = strdup(name)))
            return OOM(e);
        req->tool_choice = OAI_TOOL_NAMED;
    } else {
        req->tool_choice = OAI_TOOL_REQUIRED;
    }
    return true;
}

/* ------------------------------------------------------------ the rest --- */

/* Sets the template's keyword argument name to item (taken). */
static bool kwarg(struct oai_request *req, const char *name, cJSON *item, struct oai_error *e)
{
    if (!item || (!req->template_kwargs && !(req->template_kwargs = cJSON_CreateObject()))) {
        cJSON_Delete(item);
        return OOM(e);
    }
    if (cJSON_GetObjectItemCaseSensitive(req->template_kwargs, name))
        cJSON_ReplaceItemInObjectCaseSensitive(req->template_kwargs, name, item);
    else
        cJSON_AddItemToObject(req->template_kwargs, name, item);
    return true;
}

/*
 * thinking: "enabled" and "adaptive" turn the template's enable_thinking
 * on ("adaptive" leaves how long to think to the model, as budget_tokens
 * only hints it anyway), "disabled" off.
 */
static bool take_thinking(const cJSON *th, enum anth_kind kind, const cJSON *max_tokens,
                          struct oai_request *req, struct oai_error *e)
{
    if (!reqjson_check(&ANTH, th, "thinking", RJ_OBJECT, e))
        return false;
    const char *type = want_string(th, "type", "thinking", e);
    if (!type)
        return false;
    bool enabled = !strcmp(type, "enabled"), disabled = !strcmp(type, "disabled");
    if (!enabled && !disabled && strcmp(type, "adaptive"))
        return BAD(e, NULL, NULL,
                   "thinking.type: Input should be 'enabled', 'disabled' or 'adaptive'");
    static const char *const keys_on[]  = {"type", "budget_tokens", "display", NULL};
    static const char *const keys_ad[]  = {"type", "display", "block_binding", NULL};
    static const char *const keys_off[] = {"type", NULL};
    anth_note_others(req, th, "thinking", enabled ? keys_on : disabled ? keys_off : keys_ad);
    const cJSON *display = disabled ? NULL : reqjson_field(th, "display");
    if (display && (!cJSON_IsString(display) || (strcmp(display->valuestring, "summarized") &&
                                                 strcmp(display->valuestring, "omitted") &&
                                                 strcmp(display->valuestring, "updates"))))
        return BAD(e, NULL, NULL,
                   "thinking.display: Input should be 'summarized', 'omitted' or 'updates'");
    known_noop(req, th, "thinking", "block_binding");
    /* omitted: the reply's thinking blocks come back empty (anth_response.c reads the flag) */
    if (display && !strcmp(display->valuestring, "omitted") &&
        (!(req->echo = cJSON_CreateObject()) || !cJSON_AddTrueToObject(req->echo, "omit_thinking")))
        return OOM(e);
    if (enabled) {
        const cJSON *b = reqjson_member(&ANTH, th, "budget_tokens", "thinking", RJ_INTEGER, e);
        int64_t v      = 0;
        if (!b || !reqjson_int(&ANTH, b, "thinking.budget_tokens", 1024, 2147483647.0, &v, e))
            return false;
        if (kind == ANTH_MESSAGES && cJSON_IsNumber(max_tokens) && v >= max_tokens->valuedouble)
            return BAD(e, NULL, NULL,
                       "max_tokens: must be greater than thinking.budget_tokens (%lld)",
                       (long long)v);
    }
    return kwarg(req, "enable_thinking", cJSON_CreateBool(!disabled), e);
}

/*
 * A JSON schema the whole reply must match (output_config.format, or the
 * older output_format): {"type": "json_schema", "schema": {...}} becomes
 * req->schema, held by grammar as response_format json_schema is.
 */
static bool take_format(const cJSON *f, const char *path, struct oai_request *req,
                        struct oai_error *e)
{
    if (!reqjson_check(&ANTH, f, path, RJ_OBJECT, e))
        return false;
    if (req->schema)
        return BAD(e, NULL, NULL,
                   "%s: the reply's format is given twice (output_format and "
                   "output_config.format): give one",
                   path);
    static const char *const keys[] = {"type", "schema", NULL};
    anth_note_others(req, f, path, keys);
    const char *type = want_string(f, "type", path, e);
    if (!type)
        return false;
    if (strcmp(type, "json_schema"))
        return BAD(e, NULL, NULL, "%s.type: Input should be 'json_schema'", path);
    const cJSON *schema = reqjson_member(&ANTH, f, "schema", path, RJ_OBJECT, e);
    if (!schema)
        return false;
    if (!(req->schema = cJSON_Duplicate(schema, true)))
        return OOM(e);
    req->schema_field = path; /* static: both callers pass a literal */
    return true;
}

/*
 * output_config: effort is the template's reasoning_effort, as OpenAI's
 * reasoning_effort is (effort_value); format, take_format.
 */
static bool take_output_config(const cJSON *oc, struct oai_request *req, struct oai_error *e)
{
    if (!reqjson_check(&ANTH, oc, "output_config", RJ_OBJECT, e))
        return false;
    static const char *const keys[] = {"effort", "format", "task_budget", NULL};
    anth_note_others(req, oc, "output_config", keys);
    known_noop(req, oc, "output_config", "task_budget"); /* a hint; max_tokens bounds a reply */
    const cJSON *effort = reqjson_field(oc, "effort");
    if (effort) {
        const char *v = effort_value(effort, "output_config.effort", e);
        if (!v || !kwarg(req, "reasoning_effort", cJSON_CreateString(v), e))
            return false;
    }
    const cJSON *f = reqjson_field(oc, "format");
    return !f || take_format(f, "output_config.format", req, e);
}

/* mcp_servers: none is nothing to do; any would be a server hearth cannot call. */
static bool take_mcp_servers(const cJSON *ms, struct oai_request *req, struct oai_error *e)
{
    if (!reqjson_check(&ANTH, ms, "mcp_servers", RJ_ARRAY, e))
        return false;
    if (cJSON_GetArraySize(ms) > 0)
        return BAD(e, NULL, NULL,
                   "mcp_servers: this server connects to no MCP servers, so their tools "
                   "cannot be run; give the tools as client tools instead");
    anth_note(req, "mcp_servers", false);
    return true;
}

static bool take_stop(const cJSON *st, struct oai_request *req, struct oai_error *e)
{
    if (!reqjson_check(&ANTH, st, "stop_sequences", RJ_ARRAY, e))
        return false;
    if (cJSON_GetArraySize(st) > OAI_MAX_STOP)
        return BAD(e, NULL, NULL,
                   "stop_sequences: at most %d stop sequences are supported by this server, "
                   "but got %d",
                   OAI_MAX_STOP, cJSON_GetArraySize(st));
    int i = 0;
    const cJSON *s;
    cJSON_ArrayForEach(s, st)
    {
        char p[PATH_MAX_LEN];
        pathf(p, "stop_sequences.%d", i++);
        if (!reqjson_check(&ANTH, s, p, RJ_STRING, e))
            return false;
        if (!*s->valuestring)
            return BAD(e, NULL, NULL, "%s: String should have at least 1 character", p);
        if (!(req->stop[req->n_stop] = strdup(s->valuestring)))
            return OOM(e);
        req->n_stop++;
    }
    return true;
}

static bool take_metadata(const cJSON *md, struct oai_request *req, struct oai_error *e)
{
    if (!reqjson_check(&ANTH, md, "metadata", RJ_OBJECT, e))
        return false;
    static const char *const keys[] = {"user_id", NULL};
    anth_note(req, "metadata", false);
    anth_note_others(req, md, "metadata", keys);
    const cJSON *u = reqjson_field(md, "user_id"); /* an end-user id: nothing here depends on it */
    return !u || reqjson_check(&ANTH, u, "metadata.user_id", RJ_STRING, e);
}

/* ------------------------------------------------------------ the table --- */

/* What one body carries between its fields while they are read. */
struct scratch {
    const cJSON *root;
    enum anth_kind kind;
    struct tool_changes tc;  /* what the conversation changes in the tools (take_tools) */
    const char *turn_effort; /* a system message's output_config.effort, or NULL */
};

enum ftype {
    T_NUM,  /* number in [lo, hi] -> float at off */
    T_INT,  /* integer in [lo, hi] -> int32 at off */
    T_BOOL, /* boolean -> bool at off */
    T_FN,   /* the rule's own function */
    T_READ, /* read by another field's function */
    T_NOOP, /* defined, and without effect on the reply here: noted */
};

#define K_MSG   (1u << ANTH_MESSAGES)
#define K_BOTH  (K_MSG | 1u << ANTH_COUNT_TOKENS)
#define REQ     1u /* absent: "Field required" */
#define ALWAYS  2u /* absent: fn still runs, with it NULL */
#define AT(f)   offsetof(struct oai_request, f)
#define INT_TOP 2147483647.0

struct rule {
    const char *name;
    unsigned kinds; /* bodies that take it (K_*); count_tokens notes the others as unknown */
    enum ftype type;
    unsigned flags; /* REQ, ALWAYS */
    double lo, hi;
    size_t off;
    bool (*fn)(const cJSON *it, struct oai_request *req, struct scratch *sc, struct oai_error *e);
};

static bool fn_model(const cJSON *it, struct oai_request *req, struct scratch *sc,
                     struct oai_error *e)
{
    if (!reqjson_check(&ANTH, it, "model", RJ_STRING, e))
        return false;
    return (req->model = strdup(it->valuestring)) != NULL || OOM(e);
}

/* messages, with the top-level system prompt first */
static bool fn_messages(const cJSON *it, struct oai_request *req, struct scratch *sc,
                        struct oai_error *e)
{
    return take_messages(it, reqjson_field(sc->root, "system"), req, &sc->tc, &sc->turn_effort, e);
}

/* tools, and what the conversation changed in them: it runs when tools is absent too */
static bool fn_tools(const cJSON *it, struct oai_request *req, struct scratch *sc,
                     struct oai_error *e)
{
    return take_tools(it, &sc->tc, req, e);
}

static bool fn_tool_choice(const cJSON *it, struct oai_request *req, struct scratch *sc,
                           struct oai_error *e)
{
    return take_tool_choice(it, req, e);
}

static bool fn_thinking(const cJSON *it, struct oai_request *req, struct scratch *sc,
                        struct oai_error *e)
{
    return take_thinking(it, sc->kind, reqjson_field(sc->root, "max_tokens"), req, e);
}

static bool fn_cache_control(const cJSON *it, struct oai_request *req, struct scratch *sc,
                             struct oai_error *e)
{
    return check_cache_control(req, sc->root, "", e);
}

static bool fn_output_format(const cJSON *it, struct oai_request *req, struct scratch *sc,
                             struct oai_error *e)
{
    return take_format(it, "output_format", req, e);
}

/* output_config; a system message's effort then overrides its effort, given or not */
static bool fn_output_config(const cJSON *it, struct oai_request *req, struct scratch *sc,
                             struct oai_error *e)
{
    if (it && !take_output_config(it, req, e))
        return false;
    return !sc->turn_effort ||
           kwarg(req, "reasoning_effort", cJSON_CreateString(sc->turn_effort), e);
}

static bool fn_mcp_servers(const cJSON *it, struct oai_request *req, struct scratch *sc,
                           struct oai_error *e)
{
    return take_mcp_servers(it, req, e);
}

static bool fn_context(const cJSON *it, struct oai_request *req, struct scratch *sc,
                       struct oai_error *e)
{
    return anth_context_edits(it, req, e);
}

static bool fn_stop(const cJSON *it, struct oai_request *req, struct scratch *sc,
                    struct oai_error *e)
{
    return take_stop(it, req, e);
}

static bool fn_metadata(const cJSON *it, struct oai_request *req, struct scratch *sc,
                        struct oai_error *e)
{
    return take_metadata(it, req, e);
}

/*
 * Every top-level field, read in this order (a later field may need an earlier one's result:
 * tools the conversation's changes, tool_choice the tools), so the first refusal is the same
 * whatever order the body gives them in. A T_NOOP field is defined and without effect on the
 * reply here: routing, billing, storage, betas, and compaction (a summary Anthropic's server
 * writes past a threshold: hearth writes none, and refuses a conversation past its context as
 * any). Fields of a generation only (K_MSG) are noted as unknown in count_tokens, as
 * Anthropic's refuses them there.
 */
/* clang-format off */
static const struct rule FIELDS[] = {
    {"model", K_BOTH, T_FN, REQ, 0, 0, 0, fn_model},
    /* clamped to the slot's room by oai_make_jobs */
    {"max_tokens", K_MSG, T_INT, REQ, 1, INT_TOP, AT(max_tokens), NULL},
    {"messages", K_BOTH, T_FN, REQ, 0, 0, 0, fn_messages},
    {"system", K_BOTH, T_READ, 0, 0, 0, 0, NULL}, /* by fn_messages */
    {"tools", K_BOTH, T_FN, ALWAYS, 0, 0, 0, fn_tools},
    {"tool_choice", K_BOTH, T_FN, 0, 0, 0, 0, fn_tool_choice},
    {"thinking", K_BOTH, T_FN, 0, 0, 0, 0, fn_thinking},
    {"cache_control", K_BOTH, T_FN, 0, 0, 0, 0, fn_cache_control},
    {"output_format", K_BOTH, T_FN, 0, 0, 0, 0, fn_output_format},
    {"output_config", K_BOTH, T_FN, ALWAYS, 0, 0, 0, fn_output_config},
    {"mcp_servers", K_BOTH, T_FN, 0, 0, 0, 0, fn_mcp_servers},
    {"context_management", K_BOTH, T_FN, 0, 0, 0, 0, fn_context},
    {"stop_sequences", K_MSG, T_FN, 0, 0, 0, 0, fn_stop},
    {"metadata", K_MSG, T_FN, 0, 0, 0, 0, fn_metadata},
    {"temperature", K_MSG, T_NUM, 0, 0, 1, AT(sampling.temperature), NULL},
    {"top_p", K_MSG, T_NUM, 0, 0, 1, AT(sampling.top_p), NULL},
    {"top_k", K_MSG, T_INT, 0, 0, INT_TOP, AT(sampling.top_k), NULL},
    {"stream", K_MSG, T_BOOL, 0, 0, 0, AT(stream), NULL},
    {"service_tier", K_MSG, T_NOOP, 0, 0, 0, 0, NULL},
    {"container", K_MSG, T_NOOP, 0, 0, 0, 0, NULL},
    {"inference_geo", K_MSG, T_NOOP, 0, 0, 0, 0, NULL},
    {"diagnostics", K_MSG, T_NOOP, 0, 0, 0, 0, NULL},
    {"fallbacks", K_MSG, T_NOOP, 0, 0, 0, 0, NULL},
    {"fallback_credit_token", K_MSG, T_NOOP, 0, 0, 0, 0, NULL},
    {"thread", K_MSG, T_NOOP, 0, 0, 0, 0, NULL},
    {"speed", K_BOTH, T_NOOP, 0, 0, 0, 0, NULL},
    {"betas", K_BOTH, T_NOOP, 0, 0, 0, 0, NULL},
    {"user_profile_id", K_BOTH, T_NOOP, 0, 0, 0, 0, NULL},
    {"workspace_id", K_BOTH, T_NOOP, 0, 0, 0, 0, NULL},
    {"billing_policy", K_BOTH, T_NOOP, 0, 0, 0, 0, NULL},
    {"compaction", K_BOTH, T_NOOP, 0, 0, 0, 0, NULL},
};
/* clang-format on */

#define N_FIELDS (sizeof FIELDS / sizeof FIELDS[0])

static const struct rule *rule_of(const char *name)
{
    for (size_t i = 0; i < N_FIELDS; i++)
        if (!strcmp(FIELDS[i].name, name))
            return &FIELDS[i];
    return NULL;
}

static bool apply(const struct rule *r, const cJSON *it, struct oai_request *req,
                  struct scratch *sc, struct oai_error *e)
{
    char *at   = (char *)req + r->off;
    double dv  = 0;
    int64_t iv = 0;
    switch (r->type) {
    case T_NUM:
        if (!reqjson_number(&ANTH, it, r->name, r->lo, r->hi, &dv, e))
            return false;
        *(float *)at = (float)dv;
        return true;
    case T_INT:
        if (!reqjson_int(&ANTH, it, r->name, r->lo, r->hi, &iv, e))
            return false;
        *(int32_t *)at = (int32_t)iv;
        return true;
    case T_BOOL:
        return reqjson_bool(&ANTH, it, r->name, (bool *)at, e);
    case T_FN:
        return r->fn(it, req, sc, e);
    case T_READ:
    case T_NOOP:
        break;
    }
    return true;
}

/* ---------------------------------------------------------------- parse --- */

static bool translate(const cJSON *root, struct oai_request *req, struct scratch *sc,
                      struct oai_error *e)
{
    unsigned kind = 1u << sc->kind;
    const cJSON *it;
    cJSON_ArrayForEach(it, root)
    {
        if (cJSON_GetObjectItemCaseSensitive(root, it->string) != it)
            return BAD(e, NULL, NULL, "%.64s: given twice", it->string);
        if (cJSON_IsNull(it))
            continue;
        const struct rule *r = rule_of(it->string);
        if (!r || !(r->kinds & kind))
            anth_note(req, it->string, true);
        else if (r->type == T_NOOP)
            anth_note(req, it->string, false);
    }
    for (size_t i = 0; i < N_FIELDS; i++) {
        const struct rule *r = &FIELDS[i];
        if (!(r->kinds & kind) || r->type == T_READ || r->type == T_NOOP)
            continue;
        it = reqjson_field(root, r->name);
        if (!it && (r->flags & REQ))
            return missing(e, r->name);
        if ((it || (r->flags & ALWAYS)) && !apply(r, it, req, sc, e))
            return false;
    }
    return true;
}

bool anth_parse(enum anth_kind kind, const char *body, size_t len, struct oai_request *req,
                struct oai_error *e)
{
    reqjson_defaults(req, kind == ANTH_MESSAGES ? OAI_CHAT : OAI_TEMPLATE);
    size_t at;
    cJSON *root = reqjson_parse(body, len, &at);
    if (!root)
        return BAD(e, NULL, NULL,
                   "There was an error parsing the body of your request: invalid JSON near "
                   "byte %zu of %zu",
                   at, len);
    struct scratch sc = {.root = root, .kind = kind};
    bool ok           = cJSON_IsObject(root);
    if (!ok)
        BAD(e, NULL, NULL, "The request body must be a JSON object");
    else
        ok = translate(root, req, &sc, e);
    changes_free(&sc.tc);
    cJSON_Delete(root);
    if (!ok)
        oai_request_free(req);
    return ok;
}

bool anth_parse_messages(const char *body, size_t len, struct oai_request *req, struct oai_error *e)
{
    return anth_parse(ANTH_MESSAGES, body, len, req, e);
}
