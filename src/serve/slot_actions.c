/*
 * slot_actions.c: llama-server's POST /slots/{id}?action=save|restore|erase.
 *
 * save and restore take {"filename": NAME}: a plain file name inside
 * --slot-save-path (no '/', '\', no leading '.', so no "..", no control
 * characters, at most SLOT_NAME_MAX bytes); without --slot-save-path they
 * are a 501. Restore reads only a regular file (kvfile_open_regular): a
 * link, FIFO or device under the name is a 400 that says it was refused and
 * nothing about what it is.
 * erase takes no body (or {}). The work runs on the scheduler thread
 * (sched_slot_submit), after the slot's running job if it has one; the
 * request waits on a pending record until its SCHED_EV_SLOT event. Replies
 * as llama-server's: {"id_slot", "filename", "n_saved", "n_written",
 * "timings": {"save_ms"}}, {"id_slot", "filename", "n_restored", "n_read",
 * "timings": {"restore_ms"}}, {"id_slot", "n_erased"}.
 */
#include <cjson/cJSON.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/handlers.h"
#include "serve/reqjson.h"
#include "serve/server.h"

#define BAD REQJSON_BAD

/*
 * The longest name: save writes NAME.tmpPID beside it first, and a file name
 * has at most 255 bytes (NAME_MAX), so a longer NAME would pass here and fail
 * as the server's error.
 */
#define SLOT_NAME_MAX   200
#define SLOT_NAME_MAX_S "200"

static const char *const action_names[] = {"save", "restore", "erase"};

/* "/slots/17" -> 17; -1 when the tail is not a slot number. */
static long slot_of(const char *path)
{
    const char *p = path + strlen("/slots/");
    if (*p < '0' || *p > '9' || strlen(p) > 6)
        return -1;
    char *end;
    long id = strtol(p, &end, 10);
    return *end ? -1 : id;
}

/* A name confined to the directory: one path component, not hidden, printable; NULL if so,
 * else what is wrong with it. */
static const char *name_fault(const char *name)
{
    const size_t n = strlen(name);
    if (n == 0)
        return "it is empty";
    if (n > SLOT_NAME_MAX)
        return "it is longer than " SLOT_NAME_MAX_S " bytes";
    if (name[0] == '.')
        return "it starts with '.'";
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)name[i];
        if (c < 0x20 || c == 0x7f)
            return "it holds a control character";
        if (c == '/' || c == '\\')
            return "it holds a path separator ('/' or '\\')";
    }
    return NULL;
}

/* The request's action and, for save and restore, the file's path; false with *e otherwise. */
static bool parse(struct server *s, struct evhttp_request *req, struct sched_slot_op *op,
                  struct oai_error *e)
{
    const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
    long id          = slot_of(path);
    if (id < 0 || id >= s->sp.n_slots)
        return BAD(e, "invalid_slot", NULL,
                   "Invalid slot '%.40s': this server has slots 0 to %d (--parallel).",
                   path + strlen("/slots/"), s->sp.n_slots - 1);
    op->slot           = (int32_t)id;
    const char *query  = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    struct evkeyvalq q = {0};
    const char *action = NULL;
    if (query && evhttp_parse_query_str(query, &q) == 0)
        action = evhttp_find_header(&q, "action");
    int a = -1;
    for (int i = 0; action && i < 3; i++)
        if (!strcmp(action, action_names[i]))
            a = i;
    if (a < 0) {
        BAD(e, "invalid_action", "action",
            "The action '%.40s' is not one of save, restore, erase (as ?action=save).",
            action ? action : "");
        evhttp_clear_headers(&q);
        return false;
    }
    evhttp_clear_headers(&q);
    op->action = (enum sched_slot_action)a;
    if (a != SCHED_SLOT_ERASE && !s->p->slot_save_path)
        return oai_fail(e, 501, "not_supported_error", "not_supported", NULL,
                        "This server does not save or restore slots: start it with "
                        "--slot-save-path DIR.");

    size_t len;
    const char *body = serve_body(s, req, EP_SLOT_ACTION, &len);
    if (!body) {
        e->status = 0; /* a 413 was sent */
        return false;
    }
    cJSON *j = len ? cJSON_ParseWithLength(body, len) : cJSON_CreateObject();
    if (!j || !cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return BAD(e, "invalid_json", NULL, "The body must be a JSON object.");
    }
    const cJSON *f = NULL;
    for (const cJSON *it = j->child; it; it = it->next) {
        if (!strcmp(it->string, "filename") && a != SCHED_SLOT_ERASE) {
            f = it;
            continue;
        }
        BAD(e, "unknown_parameter", it->string, "Unknown field '%.60s' for the %s action.",
            it->string, action_names[a]);
        cJSON_Delete(j);
        return false;
    }
    bool ok         = true;
    const char *why = NULL;
    if (a != SCHED_SLOT_ERASE) {
        if (!cJSON_IsString(f))
            ok = BAD(e, f ? "invalid_type" : "missing_required_parameter", "filename",
                     "The %s action needs \"filename\", a string.", action_names[a]);
        else if ((why = name_fault(f->valuestring)))
            ok = BAD(e, "invalid_value", "filename",
                     "The filename is not a plain name inside --slot-save-path: %s (a name has "
                     "1 to " SLOT_NAME_MAX_S " bytes, no '/', '\\', leading '.' or control "
                     "characters).",
                     why);
        else if (snprintf(op->path, sizeof op->path, "%s/%s", s->p->slot_save_path,
                          f->valuestring) >= (int)sizeof op->path)
            ok = BAD(e, "invalid_value", "filename", "The file's path is too long.");
    }
    cJSON_Delete(j);
    return ok;
}

void h_slot_action(struct server *s, struct evhttp_request *req)
{
    if (!serve_check_ready(s, req, EP_SLOT_ACTION))
        return;
    struct sched_slot_op *op = calloc(1, sizeof *op);
    struct qev *node         = calloc(1, sizeof *node);
    struct oai_error e;
    if (!op || !node) {
        free(op);
        free(node);
        oai_fail(&e, 500, "server_error", NULL, NULL, "out of memory");
        serve_reply_error(s, req, EP_SLOT_ACTION, &e);
        return;
    }
    if (!parse(s, req, op, &e)) {
        free(op);
        free(node);
        if (e.status)
            serve_reply_error(s, req, EP_SLOT_ACTION, &e);
        return;
    }
    struct pending *p = serve_pending_new(s, req, EP_SLOT_ACTION, PK_SLOT);
    if (!p) {
        free(op);
        free(node);
        return; /* a 500 was sent */
    }
    op->request_id = p->request_id;
    op->user       = node;
    p->op          = op;
    if (sched_slot_submit(s->sched, op) != HEARTH_OK) {
        free(node);
        oai_fail(&e, 503, "server_error", "shutting_down", NULL, "The server is shutting down.");
        char *json = serve_error_json(EP_SLOT_ACTION, &e);
        serve_pending_reply(p, 503, json);
        free(json);
    }
}

void slot_action_done(struct pending *p, const struct sched_slot_op *op)
{
    if (op->status != HEARTH_OK) {
        struct oai_error e;
        const int status = op->status == HEARTH_EFULL ? 503
                           : op->status == HEARTH_EINVAL || op->status == HEARTH_EFORMAT ||
                                   op->status == HEARTH_EUNSUPPORTED
                               ? 400
                               : hearth_status_http(op->status);
        oai_fail(&e, status, status < 500 ? "invalid_request_error" : "server_error", NULL, NULL,
                 "Slot %d: the %s action failed: %s", op->slot, action_names[op->action], op->err);
        char *json = serve_error_json(EP_SLOT_ACTION, &e);
        serve_pending_reply(p, status, json);
        free(json);
        return;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "id_slot", op->slot);
    if (op->action == SCHED_SLOT_ERASE) {
        cJSON_AddNumberToObject(o, "n_erased", op->n_tokens);
    } else {
        const bool save = op->action == SCHED_SLOT_SAVE;
        cJSON_AddStringToObject(o, "filename", strrchr(op->path, '/') + 1);
        cJSON_AddNumberToObject(o, save ? "n_saved" : "n_restored", op->n_tokens);
        cJSON_AddNumberToObject(o, save ? "n_written" : "n_read", (double)op->n_bytes);
        cJSON *t = cJSON_AddObjectToObject(o, "timings");
        cJSON_AddNumberToObject(t, save ? "save_ms" : "restore_ms", op->seconds * 1e3);
    }
    char *json = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    serve_pending_reply(p, json ? 200 : 500, json);
    free(json);
}
