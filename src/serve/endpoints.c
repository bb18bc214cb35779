/*
 * endpoints.c: the handlers of `hearth serve`'s routes (handlers.h): the
 * generation routes, which hand their body to the loop's preparation
 * (serve_prepare_oai, serve_generate), and the others: models, health,
 * metrics, slots, props, and llama-server's apply-template, tokenize and
 * detokenize. The last three render or tokenize, so their
 * work runs on a preparation worker (endpoints_prepare) like a
 * generation's.
 *
 * Bodies: /apply-template takes a chat request (its rendered prompt comes
 * back as {"prompt": ...}); /tokenize takes {"content", "add_special",
 * "parse_special", "with_pieces"} and answers {"tokens": [...]}, each a
 * {"id", "piece"} with with_pieces; /detokenize takes {"tokens": [ids]}
 * and answers {"content": ...}. Unknown fields are refused by name.
 * Anthropic's /v1/messages is a generation (serve_generate with
 * anthropic.h's parse and reply); its count_tokens renders and tokenizes
 * the prompt that generation would read and answers {"input_tokens": N}.
 */
#include <cjson/cJSON.h>
#include <event2/buffer.h>
#include <event2/keyvalq_struct.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve/anthropic.h"
#include "serve/handlers.h"
#include "serve/reqjson.h"
#include "serve/responses.h"
#include "serve/server.h"
#include "sched/turns.h"
#include "chat/chat_template.h"
#include "chat/chatparse.h"
#include "util/clock.h"

#define BAD REQJSON_BAD

/* ---------------------------------------------------------- read-only --- */

static cJSON *model_obj(struct server *s)
{
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "id", s->p->alias);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)time(NULL));
    cJSON_AddStringToObject(m, "owned_by", "hearth");
    if (s->model) {
        /* vLLM's name for the context a request can use, and llama-server's meta block */
        cJSON_AddNumberToObject(m, "max_model_len", s->sp.n_ctx);
        cJSON *meta = cJSON_AddObjectToObject(m, "meta");
        cJSON_AddNumberToObject(meta, "n_ctx_train", hearth_model_n_ctx_train(s->model));
        cJSON_AddNumberToObject(meta, "n_ctx", s->sp.n_ctx);
        cJSON_AddNumberToObject(meta, "n_vocab", hearth_model_n_vocab(s->model));
        cJSON_AddNumberToObject(meta, "size", (double)hearth_model_weight_bytes(s->model));
    }
    return m;
}

void h_models(struct server *s, struct evhttp_request *req)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON *data = cJSON_AddArrayToObject(o, "data");
    cJSON_AddItemToArray(data, model_obj(s));
    serve_reply_cjson(s, req, EP_MODELS, o);
}

void h_model_one(struct server *s, struct evhttp_request *req, const char *id)
{
    if (strcmp(id, s->p->alias)) {
        struct oai_error e;
        oai_fail(&e, 404, "invalid_request_error", "model_not_found", "model",
                 "The model '%.200s' does not exist; this server serves '%.200s'.", id,
                 s->p->alias);
        serve_reply_error(s, req, EP_MODELS, &e);
        return;
    }
    serve_reply_cjson(s, req, EP_MODELS, model_obj(s));
}

/*
 * Whether the server can take new work: false with *e (503) while every preparation worker
 * has been on its task for --health-stall seconds or more, or the scheduler has been inside
 * one step that long; a router reading /health then sends elsewhere.
 */
static bool taking_work(struct server *s, struct oai_error *e)
{
    const double now = now_s(), limit = s->p->health_stall_s;
    const double prep = s->prep ? prep_busy_since(s->prep) : 0;
    if (prep > 0 && now - prep >= limit)
        return oai_fail(e, 503, "server_error", "preparation_stalled", NULL,
                        "All %d preparation workers (--threads-http) have been busy for %.1f s "
                        "or more (--health-stall %g); new requests would wait.",
                        prep_workers(s->prep), now - prep, limit);
    struct sched_stats st;
    if (s->sched) {
        sched_snapshot(s->sched, &st, NULL, 0);
        if (st.working && now - st.t_progress >= limit)
            return oai_fail(e, 503, "server_error", "scheduler_stalled", NULL,
                            "The scheduler has been inside one step for %.1f s (--health-stall "
                            "%g); new requests would wait.",
                            now - st.t_progress, limit);
    }
    return true;
}

void h_health(struct server *s, struct evhttp_request *req)
{
    if (!serve_check_ready(s, req, EP_HEALTH))
        return;
    struct oai_error e;
    if (!taking_work(s, &e)) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "5");
        serve_reply_error(s, req, EP_HEALTH, &e);
        return;
    }
    static const char ok[] = "{\"status\":\"ok\"}";
    serve_reply(s, req, EP_HEALTH, 200, "application/json", ok, sizeof ok - 1);
}

/* sched_snapshot into stats and a malloc'd slot array (NULL before the model is loaded). */
static struct sched_slot_info *snapshot(struct server *s, struct sched_stats *st, int32_t *n)
{
    memset(st, 0, sizeof *st);
    *n = 0;
    if (!s->sched)
        return NULL;
    int32_t cap                  = s->sp.n_slots > 0 ? s->sp.n_slots : 1;
    struct sched_slot_info *info = calloc((size_t)cap, sizeof *info);
    if (!info)
        return NULL;
    *n = sched_snapshot(s->sched, st, info, cap);
    if (*n > cap)
        *n = cap;
    return info;
}

void h_metrics(struct server *s, struct evhttp_request *req)
{
    struct sched_stats st;
    int32_t n;
    free(snapshot(s, &st, &n));
    double v[METRIC_COUNT]  = {0};
    v[M_PROMPT_TOKENS]      = (double)st.prompt_tokens_total;
    v[M_GENERATED_TOKENS]   = (double)st.generated_tokens_total;
    v[M_PREFIX_HIT_TOKENS]  = (double)st.prefix_hit_tokens_total;
    const double computed   = (double)st.prompt_tokens_total - (double)st.prefix_hit_tokens_total;
    v[M_PREFIX_MISS_TOKENS] = computed;
    v[M_PREFILL_SECONDS]    = st.prefill_seconds_total;
    v[M_PREP_CANCELLED]     = (double)s->n_prep_cancelled;
    v[M_PREP_TASKS]         = (double)s->n_prep_tasks;
    v[M_DECODE_SECONDS]     = st.decode_seconds_total;
    v[M_PREFILL_TPS] = st.prefill_seconds_total > 0 ? computed / st.prefill_seconds_total : 0;
    v[M_DECODE_TPS]  = st.decode_seconds_total > 0
                           ? (double)st.generated_tokens_total / st.decode_seconds_total
                           : 0;
    for (int d = 0; d < SPEC_N_DRAFTERS; d++) {
        s->metrics.spec_drafted[d]  = st.spec_drafted[d];
        s->metrics.spec_accepted[d] = st.spec_accepted[d];
    }
    v[M_DECODE_FORWARDS]    = (double)st.decode_forwards_total;
    v[M_SLOTS_BUSY]         = st.slots_busy;
    v[M_SLOTS]              = s->sched ? st.n_slots : s->sp.n_slots;
    v[M_QUEUE_DEPTH]        = st.queue_depth;
    v[M_KV_BLOCKS_USED]     = st.kv_blocks_used;
    v[M_KV_BLOCKS_CACHED]   = st.kv_blocks_cached;
    v[M_KV_BLOCKS_CAPACITY] = st.kv_blocks_total;
    v[M_KV_USAGE] =
        st.kv_blocks_total > 0 ? (double)st.kv_blocks_used / (double)st.kv_blocks_total : 0;
    s->metrics.kv_block          = hearth_context_default_params().kv_block; /* sched.c's */
    s->metrics.kv_blocks         = st.kv_blocks_total;
    v[M_CACHE_RAM_BYTES]         = (double)st.cache_bytes;
    v[M_CACHE_RAM_CAP_BYTES]     = (double)st.cache_cap_bytes;
    v[M_CACHE_RAM_EVICTED]       = (double)st.cache_evicted;
    v[M_CACHE_DISK_BYTES]        = (double)st.disk.disk_bytes;
    v[M_CACHE_DISK_CAP_BYTES]    = (double)st.disk.disk_cap_bytes;
    v[M_CACHE_DISK_HIT_TOKENS]   = (double)st.disk.disk_hit_tokens;
    v[M_CACHE_DISK_READS]        = (double)st.disk.disk_reads;
    v[M_CACHE_DISK_WRITES]       = (double)st.disk.disk_writes;
    v[M_CACHE_DISK_EVICTED]      = (double)st.disk.disk_evicted;
    v[M_CACHE_DISK_SKIPPED]      = (double)st.disk.disk_skipped;
    v[M_CACHE_DISK_WRITE_ERRORS] = (double)st.disk.disk_write_errors;
    struct turns_stats ts;
    turns_stats(s->sched ? sched_turns(s->sched) : NULL, &ts);
    v[M_REPLY_SPLICED_PROMPTS] = (double)ts.spliced_prompts;
    v[M_REPLY_SPLICED_TOKENS]  = (double)ts.spliced_tokens;
    v[M_READY]                 = s->ready ? 1 : 0;
    s->metrics.n_stages =
        s->sched ? sched_stages(s->sched, s->metrics.stages, METRICS_MAX_STAGES) : 0;
    /* this request is counted before rendering so a scrape sees itself */
    metrics_count_request(&s->metrics, EP_METRICS, 200);
    size_t len = 0;
    char *page = metrics_render(&s->metrics, v, &len);
    if (!page) {
        serve_reply_json(s, req, EP_OTHER, 500, NULL);
        return;
    }
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
    struct evbuffer *b = evbuffer_new();
    if (b)
        evbuffer_add(b, page, len);
    evhttp_send_reply(req, 200, "OK", b);
    if (b)
        evbuffer_free(b);
    free(page);
}

/*
 * A slot's "stages": where its layers run, as /metrics' hearth_stage_* say:
 * per stage the device, the layers ("3-4", "" for the output alone),
 * whether it holds the output, and its weight and K/V bytes (the K/V pool
 * every slot shares on that device).
 */
static void add_stages(cJSON *o, const struct hearth_stage_info *stages, int32_t n)
{
    cJSON *a = cJSON_AddArrayToObject(o, "stages");
    for (int32_t i = 0; a && i < n; i++) {
        cJSON *st       = cJSON_CreateObject();
        char layers[32] = "";
        if (stages[i].layer_end > stages[i].layer_first)
            snprintf(layers, sizeof layers, "%d-%d", stages[i].layer_first,
                     stages[i].layer_end - 1);
        cJSON_AddStringToObject(st, "device", stages[i].device);
        cJSON_AddStringToObject(st, "layers", layers);
        cJSON_AddNumberToObject(st, "n_layers", stages[i].layer_end - stages[i].layer_first);
        cJSON_AddBoolToObject(st, "output", stages[i].output);
        cJSON_AddNumberToObject(st, "weight_bytes", (double)stages[i].weight_bytes);
        cJSON_AddNumberToObject(st, "kv_bytes", (double)stages[i].kv_bytes);
        cJSON_AddItemToArray(a, st);
    }
}

void h_slots(struct server *s, struct evhttp_request *req)
{
    if (!serve_check_ready(s, req, EP_SLOTS))
        return;
    struct sched_stats st;
    int32_t n;
    struct sched_slot_info *info = snapshot(s, &st, &n);
    struct hearth_stage_info stages[SCHED_MAX_STAGES];
    const int32_t n_stages = s->sched ? sched_stages(s->sched, stages, SCHED_MAX_STAGES) : 0;
    cJSON *a               = cJSON_CreateArray();
    for (int32_t i = 0; i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "id", info[i].id);
        cJSON_AddStringToObject(o, "state", info[i].busy ? "busy" : "idle");
        struct pending *p = info[i].busy ? serve_pending_find(s, info[i].request_id) : NULL;
        if (p)
            cJSON_AddStringToObject(o, "request_id", p->id);
        else
            cJSON_AddNullToObject(o, "request_id");
        cJSON_AddNumberToObject(o, "n_ctx", s->sp.n_ctx);
        cJSON_AddNumberToObject(o, "tokens_cached", info[i].n_ctx_used);
        cJSON_AddNumberToObject(o, "n_prompt", info[i].n_prompt);
        cJSON_AddNumberToObject(o, "n_prompt_cached", info[i].n_cached_tokens);
        cJSON_AddNumberToObject(o, "n_generated", info[i].n_generated);
        cJSON_AddNumberToObject(o, "draft_n", info[i].n_drafted);
        cJSON_AddNumberToObject(o, "draft_n_accepted", info[i].n_draft_accepted);
        /* each drafter's share, those that drafted for the job */
        static const char *const drafters[] = SPEC_DRAFTER_NAMES;
        cJSON *by                           = cJSON_AddObjectToObject(o, "drafters");
        for (int d = 0; by && d < SPEC_N_DRAFTERS; d++) {
            if (!info[i].n_drafted_by[d])
                continue;
            cJSON *dr = cJSON_AddObjectToObject(by, drafters[d]);
            cJSON_AddNumberToObject(dr, "draft_n", info[i].n_drafted_by[d]);
            cJSON_AddNumberToObject(dr, "draft_n_accepted", info[i].n_accepted_by[d]);
        }
        add_stages(o, stages, n_stages);
        cJSON_AddItemToArray(a, o);
    }
    free(info);
    serve_reply_cjson(s, req, EP_SLOTS, a);
}

/* llama-server's /props: what the server runs with, the chat template first. */
void h_props(struct server *s, struct evhttp_request *req)
{
    if (!serve_check_ready(s, req, EP_PROPS))
        return;
    cJSON *o                         = cJSON_CreateObject();
    const char *src                  = chat_template_source(s->tmpl);
    const struct chatparse_format *f = chat_template_format(s->tmpl);
    cJSON_AddStringToObject(o, "chat_template", src ? src : "");
    cJSON_AddStringToObject(o, "chat_template_name", chat_template_describe(s->tmpl));
    cJSON *caps = cJSON_AddObjectToObject(o, "chat_template_caps");
    cJSON_AddStringToObject(caps, "tool_calls", chatparse_tools_name(f->tools));
    if (f->think_open) {
        cJSON_AddStringToObject(caps, "reasoning_open", f->think_open);
        cJSON_AddStringToObject(caps, "reasoning_close", f->think_close);
    } else {
        cJSON_AddNullToObject(caps, "reasoning_open");
        cJSON_AddNullToObject(caps, "reasoning_close");
    }
    cJSON_AddStringToObject(o, "bos_token", chat_template_bos(s->tmpl));
    cJSON_AddStringToObject(o, "eos_token", chat_template_eos(s->tmpl));
    cJSON_AddStringToObject(o, "model_path", s->p->model_path);
    cJSON_AddStringToObject(o, "model_alias", s->p->alias);
    cJSON_AddNumberToObject(o, "total_slots", s->sp.n_slots);
    cJSON_AddNumberToObject(o, "n_ctx", s->sp.n_ctx);
    cJSON_AddStringToObject(o, "build_info", "hearth");
    serve_reply_cjson(s, req, EP_PROPS, o);
}

/* ------------------------------------------------- prepared elsewhere --- */

void h_apply_template(struct server *s, struct evhttp_request *req)
{
    serve_prepare_oai(s, req, EP_APPLY_TEMPLATE, OAI_TEMPLATE, PK_TEMPLATE);
}

void h_chat(struct server *s, struct evhttp_request *req)
{
    serve_prepare_oai(s, req, EP_CHAT, OAI_CHAT, PK_GENERATE);
}

void h_completions(struct server *s, struct evhttp_request *req)
{
    serve_prepare_oai(s, req, EP_COMPLETIONS, OAI_COMPLETION, PK_GENERATE);
}

void h_responses(struct server *s, struct evhttp_request *req)
{
    serve_generate(s, req, EP_RESPONSES, resp_parse, &resp_reply_ops);
}

void h_messages(struct server *s, struct evhttp_request *req)
{
    serve_generate(s, req, EP_MESSAGES, anth_parse_messages, &anth_reply_ops);
}

void h_count_tokens(struct server *s, struct evhttp_request *req)
{
    if (!serve_check_ready(s, req, EP_COUNT_TOKENS))
        return;
    size_t len;
    const char *body = serve_body(s, req, EP_COUNT_TOKENS, &len);
    if (!body)
        return;
    struct oai_error e;
    struct task *t = calloc(1, sizeof *t);
    if (!t) {
        oai_fail(&e, 500, "api_error", NULL, NULL, "out of memory");
        serve_reply_error(s, req, EP_COUNT_TOKENS, &e);
        return;
    }
    if (!anth_parse(ANTH_COUNT_TOKENS, body, len, &t->r, &e)) {
        free(t);
        serve_reply_error(s, req, EP_COUNT_TOKENS, &e);
        return;
    }
    if (!serve_apply_policy(s, EP_COUNT_TOKENS, &t->r, &e)) {
        oai_request_free(&t->r);
        free(t);
        serve_reply_error(s, req, EP_COUNT_TOKENS, &e);
        return;
    }
    serve_prepare(s, req, EP_COUNT_TOKENS, PK_COUNT_TOKENS, t);
}

/* A JSON object body; NULL with *e set otherwise. Fields other than the endpoint's are
 * ignored, as llama-server ignores them. */
static cJSON *object_body(const char *body, size_t len, struct oai_error *e)
{
    cJSON *o = len ? cJSON_ParseWithLength(body, len) : NULL;
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        BAD(e, NULL, NULL, "We could not parse the JSON body of your request: expected an object.");
        return NULL;
    }
    return o;
}

static void prepared_body(struct server *s, struct evhttp_request *req, enum metrics_endpoint ep,
                          enum pending_kind kind)
{
    if (!serve_check_ready(s, req, ep))
        return;
    size_t len;
    const char *body = serve_body(s, req, ep, &len);
    if (!body)
        return;
    struct oai_error e;
    cJSON *o = object_body(body, len, &e);
    if (!o) {
        serve_reply_error(s, req, ep, &e);
        return;
    }
    struct task *t = calloc(1, sizeof *t);
    if (!t) {
        cJSON_Delete(o);
        oai_fail(&e, 500, "server_error", NULL, NULL, "out of memory");
        serve_reply_error(s, req, ep, &e);
        return;
    }
    t->body = o;
    serve_prepare(s, req, ep, kind, t);
}

void h_tokenize(struct server *s, struct evhttp_request *req)
{
    prepared_body(s, req, EP_TOKENIZE, PK_TOKENIZE);
}

void h_detokenize(struct server *s, struct evhttp_request *req)
{
    prepared_body(s, req, EP_DETOKENIZE, PK_DETOKENIZE);
}

/* ------------------------------------------------ on the prep thread --- */

static bool want_bool(const cJSON *o, const char *name, bool dflt, bool *out, struct oai_error *e)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, name);
    *out            = dflt;
    if (!it || cJSON_IsNull(it))
        return true;
    if (!cJSON_IsBool(it))
        return BAD(e, "invalid_type", name, "Invalid type for '%s': expected a boolean.", name);
    *out = cJSON_IsTrue(it);
    return true;
}

static bool do_tokenize(struct task *t)
{
    const struct hearth_model *m = t->srv->model;
    const cJSON *content         = cJSON_GetObjectItemCaseSensitive(t->body, "content");
    if (!cJSON_IsString(content))
        return content ? BAD(&t->e, "invalid_type", "content",
                             "Invalid type for 'content': expected a string.")
                       : BAD(&t->e, "missing_required_parameter", "content",
                             "Missing required parameter: 'content'.");
    bool add_special, parse_special, with_pieces;
    if (!want_bool(t->body, "add_special", false, &add_special, &t->e) ||
        !want_bool(t->body, "parse_special", true, &parse_special, &t->e) ||
        !want_bool(t->body, "with_pieces", false, &with_pieces, &t->e))
        return false;
    hearth_token *ids = NULL;
    size_t n          = 0;
    char err[HEARTH_ERR_MAX];
    enum hearth_status st = hearth_tokenize(m, content->valuestring, strlen(content->valuestring),
                                            add_special, parse_special, &ids, &n, err, sizeof err);
    if (st != HEARTH_OK)
        return oai_fail(&t->e, hearth_status_http(st),
                        st == HEARTH_ENOMEM ? "server_error" : "invalid_request_error", NULL,
                        "content", "%s", err);
    cJSON *o    = cJSON_CreateObject();
    cJSON *toks = cJSON_AddArrayToObject(o, "tokens");
    char buf[256];
    for (size_t i = 0; i < n; i++) {
        if (!with_pieces) {
            cJSON_AddItemToArray(toks, cJSON_CreateNumber(ids[i]));
            continue;
        }
        size_t k = hearth_token_to_piece(m, ids[i], buf, sizeof buf);
        cJSON *p = cJSON_CreateObject();
        cJSON_AddNumberToObject(p, "id", ids[i]);
        cJSON_AddItemToObject(p, "piece", oai_text_json(buf, k <= sizeof buf ? k : 0));
        cJSON_AddItemToArray(toks, p);
    }
    free(ids);
    t->json = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return t->json || oai_fail(&t->e, 500, "server_error", NULL, NULL, "out of memory");
}

static bool do_detokenize(struct task *t)
{
    const struct hearth_model *m = t->srv->model;
    const cJSON *toks            = cJSON_GetObjectItemCaseSensitive(t->body, "tokens");
    if (!cJSON_IsArray(toks))
        return toks ? BAD(&t->e, "invalid_type", "tokens",
                          "Invalid type for 'tokens': expected an array of token ids.")
                    : BAD(&t->e, "missing_required_parameter", "tokens",
                          "Missing required parameter: 'tokens'.");
    int32_t n_vocab = hearth_model_n_vocab(m);
    size_t cap = 256, len = 0;
    char *text = malloc(cap);
    if (!text)
        return oai_fail(&t->e, 500, "server_error", NULL, NULL, "out of memory");
    int i = 0;
    const cJSON *id;
    cJSON_ArrayForEach(id, toks)
    {
        double v = cJSON_IsNumber(id) ? id->valuedouble : -1;
        if (v != floor(v) || v < 0 || v >= n_vocab) {
            free(text);
            char param[32];
            snprintf(param, sizeof param, "tokens[%d]", i);
            return BAD(&t->e, "invalid_value", param,
                       "Invalid '%s': expected a token id from 0 to %d.", param, n_vocab - 1);
        }
        size_t need = hearth_token_to_piece(m, (hearth_token)v, text + len, cap - len);
        if (need > cap - len) {
            char *grown = realloc(text, cap = (len + need) * 2);
            if (!grown) {
                free(text);
                return oai_fail(&t->e, 500, "server_error", NULL, NULL, "out of memory");
            }
            text = grown;
            need = hearth_token_to_piece(m, (hearth_token)v, text + len, cap - len);
        }
        len += need;
        i++;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "content", oai_text_json(text, len));
    free(text);
    t->json = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return t->json || oai_fail(&t->e, 500, "server_error", NULL, NULL, "out of memory");
}

static bool do_template(struct task *t)
{
    char *text = NULL;
    char err[HEARTH_ERR_MAX];
    enum hearth_status st =
        chat_template_render(t->srv->tmpl, t->r.messages, t->r.tools, t->r.template_kwargs, true,
                             &text, NULL, err, sizeof err);
    if (st == HEARTH_ENOMEM)
        return oai_fail(&t->e, 500, "server_error", NULL, NULL, "%s", err);
    if (st != HEARTH_OK)
        return BAD(&t->e, "invalid_value", "messages",
                   "The chat template (%s) refused the conversation: %s",
                   chat_template_describe(t->srv->tmpl), err);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "prompt", text);
    free(text);
    t->json = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return t->json || oai_fail(&t->e, 500, "server_error", NULL, NULL, "out of memory");
}

/* count_tokens: the prompt a generation would read, tokenized as oai_make_jobs tokenizes it. */
static bool do_count_tokens(struct task *t)
{
    char *text = NULL;
    if (!oai_prompt(&t->r, t->srv->tmpl, t->srv->model, &text, &t->e))
        return false;
    hearth_token *ids = NULL;
    size_t n          = 0;
    char err[HEARTH_ERR_MAX];
    enum hearth_status st =
        hearth_tokenize(t->srv->model, text, strlen(text), true, true, &ids, &n, err, sizeof err);
    free(text);
    if (st == HEARTH_OK)
        turns_splice(sched_turns(t->srv->sched), &ids, &n, 0);
    free(ids);
    if (st != HEARTH_OK)
        return oai_fail(&t->e, hearth_status_http(st),
                        st == HEARTH_ENOMEM ? "api_error" : "invalid_request_error", NULL,
                        "messages", "%s", err);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "input_tokens", (double)n);
    t->json = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return t->json || oai_fail(&t->e, 500, "api_error", NULL, NULL, "out of memory");
}

void endpoints_prepare(struct task *t)
{
    switch (t->p->kind) {
    case PK_TEMPLATE:
        t->ok = do_template(t);
        break;
    case PK_TOKENIZE:
        t->ok = do_tokenize(t);
        break;
    case PK_DETOKENIZE:
        t->ok = do_detokenize(t);
        break;
    case PK_COUNT_TOKENS:
        t->ok = do_count_tokens(t);
        break;
    case PK_GENERATE:
    case PK_SLOT: /* not prepared here */
        t->ok = false;
        break;
    }
}
