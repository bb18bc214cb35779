/*
 * openai.c: OpenAI request parsing and validation, job creation, and
 * response rendering (see openai.h for the rules).
 *
 * Response shapes follow api.openai.com as of 2025: chat.completion,
 * chat.completion.chunk (first chunk of a choice carries delta.role, the
 * last an empty delta and finish_reason, a final usage chunk with empty
 * choices when stream_options.include_usage), text_completion for both
 * plain and streamed completions.
 */
#include "serve/openai.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/model.h"
#include "text/tokenizer.h"

/* --------------------------------------------------------------- errors --- */

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

#define BAD(e, code, param, ...)                                                                   \
    oai_fail((e), 400, "invalid_request_error", (code), (param), __VA_ARGS__)

/* ---------------------------------------------------------- typed fields --- */

/* The field, or NULL when absent or JSON null (OpenAI reads null as "not given"). */
static const cJSON *field(const cJSON *obj, const char *name)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, name);
    return it && !cJSON_IsNull(it) ? it : NULL;
}

static const char *kind_of(const cJSON *it)
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

static bool wrong_type(struct oai_error *e, const char *param, const char *want, const cJSON *it)
{
    return BAD(e, "invalid_type", param, "Invalid type for '%s': expected %s, but got %s instead.",
               param, want, kind_of(it));
}

static bool want_bool(const cJSON *it, const char *param, bool *out, struct oai_error *e)
{
    if (!cJSON_IsBool(it))
        return wrong_type(e, param, "a boolean", it);
    *out = cJSON_IsTrue(it);
    return true;
}

static bool want_number(const cJSON *it, const char *param, double lo, double hi, double *out,
                        struct oai_error *e)
{
    if (!cJSON_IsNumber(it))
        return wrong_type(e, param, "a number", it);
    double v = it->valuedouble;
    if (!isfinite(v) || v < lo || v > hi)
        return BAD(e, "invalid_value", param,
                   "Invalid '%s': expected a value between %g and %g, but got %g instead.", param,
                   lo, hi, v);
    *out = v;
    return true;
}

static bool want_int(const cJSON *it, const char *param, double lo, double hi, int64_t *out,
                     struct oai_error *e)
{
    if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble) ||
        it->valuedouble != floor(it->valuedouble))
        return wrong_type(e, param, "an integer", it);
    double v = it->valuedouble;
    if (v < lo)
        return BAD(e, "integer_below_min_value", param,
                   "Invalid '%s': integer below minimum value. Expected a value >= %.0f, but got "
                   "%.0f instead.",
                   param, lo, v);
    if (v > hi)
        return BAD(e, "integer_above_max_value", param,
                   "Invalid '%s': integer above maximum value. Expected a value <= %.0f, but got "
                   "%.0f instead.",
                   param, hi, v);
    *out = (int64_t)v;
    return true;
}

static char *dup_str(const char *s, struct oai_error *e)
{
    char *d = strdup(s);
    if (!d)
        oai_fail(e, 500, "server_error", NULL, NULL, "out of memory reading the request");
    return d;
}

/* ---------------------------------------------------------------- parse --- */

void oai_request_free(struct oai_request *req)
{
    free(req->model);
    for (int32_t i = 0; i < req->n_messages; i++) {
        free(req->messages[i].role);
        free(req->messages[i].content);
    }
    free(req->messages);
    for (int32_t i = 0; i < req->n_prompts; i++)
        free(req->prompts[i]);
    free(req->prompts);
    for (int32_t i = 0; i < req->n_stop; i++)
        free(req->stop[i]);
    memset(req, 0, sizeof *req);
}

/* One message's content: a string, or an array of {"type":"text","text":...} parts joined. */
static char *message_content(const cJSON *c, int32_t i, bool assistant, struct oai_error *e)
{
    char param[64];
    snprintf(param, sizeof param, "messages[%d].content", i);
    if (!c) {
        if (assistant) /* an assistant turn may have null content (OpenAI allows it with tool calls)
                        */
            return dup_str("", e);
        BAD(e, "missing_required_parameter", param, "Missing required parameter: '%s'.", param);
        return NULL;
    }
    if (cJSON_IsString(c))
        return dup_str(c->valuestring, e);
    if (!cJSON_IsArray(c)) {
        wrong_type(e, param, "a string or an array of content parts", c);
        return NULL;
    }
    size_t len = 0;
    int j      = 0;
    const cJSON *part;
    cJSON_ArrayForEach(part, c)
    {
        char pp[80];
        snprintf(pp, sizeof pp, "messages[%d].content[%d]", i, j++);
        if (!cJSON_IsObject(part)) {
            wrong_type(e, pp, "an object", part);
            return NULL;
        }
        const cJSON *type = field(part, "type");
        const cJSON *text = field(part, "text");
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "text")) {
            BAD(e, "invalid_value", pp,
                "Invalid '%s': only text content parts are supported (type \"text\").", pp);
            return NULL;
        }
        if (!cJSON_IsString(text)) {
            char tp[96];
            snprintf(tp, sizeof tp, "%s.text", pp);
            wrong_type(e, tp, "a string", text ? text : part);
            return NULL;
        }
        len += strlen(text->valuestring);
    }
    char *out = malloc(len + 1);
    if (!out) {
        oai_fail(e, 500, "server_error", NULL, NULL, "out of memory reading the request");
        return NULL;
    }
    len = 0;
    cJSON_ArrayForEach(part, c)
    {
        const char *t = field(part, "text")->valuestring;
        size_t n      = strlen(t);
        memcpy(out + len, t, n);
        len += n;
    }
    out[len] = 0;
    return out;
}

static bool parse_messages(const cJSON *root, struct oai_request *req, struct oai_error *e)
{
    const cJSON *msgs = field(root, "messages");
    if (!msgs)
        return BAD(e, "missing_required_parameter", "messages",
                   "Missing required parameter: 'messages'.");
    if (!cJSON_IsArray(msgs))
        return wrong_type(e, "messages", "an array", msgs);
    int n = cJSON_GetArraySize(msgs);
    if (n == 0)
        return BAD(e, "empty_array", "messages",
                   "Invalid 'messages': empty array. Expected an array with minimum length 1.");
    req->messages = calloc((size_t)n, sizeof *req->messages);
    if (!req->messages)
        return oai_fail(e, 500, "server_error", NULL, NULL, "out of memory reading the request");
    int32_t i = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, msgs)
    {
        char param[64];
        snprintf(param, sizeof param, "messages[%d]", i);
        if (!cJSON_IsObject(m))
            return wrong_type(e, param, "an object", m);
        snprintf(param, sizeof param, "messages[%d].role", i);
        const cJSON *role = field(m, "role");
        if (!role)
            return BAD(e, "missing_required_parameter", param, "Missing required parameter: '%s'.",
                       param);
        if (!cJSON_IsString(role))
            return wrong_type(e, param, "a string", role);
        const char *r = role->valuestring;
        if (!strcmp(r, "developer"))
            r = "system";
        if (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant"))
            return BAD(e, "invalid_value", param,
                       "Invalid '%s': '%.32s' is not supported; expected 'system', 'user' or "
                       "'assistant' (hearth has no tool calling).",
                       param, r);
        char *content = message_content(field(m, "content"), i, !strcmp(r, "assistant"), e);
        if (!content)
            return false;
        req->messages[i].content = content;
        req->n_messages          = i + 1;
        if (!(req->messages[i].role = dup_str(r, e)))
            return false;
        i++;
    }
    return true;
}

static bool parse_prompt(const cJSON *root, struct oai_request *req, struct oai_error *e)
{
    const cJSON *p = field(root, "prompt");
    if (!p)
        return BAD(e, "missing_required_parameter", "prompt",
                   "Missing required parameter: 'prompt'.");
    if (cJSON_IsString(p)) {
        req->prompts = calloc(1, sizeof *req->prompts);
        if (!req->prompts || !(req->prompts[0] = dup_str(p->valuestring, e)))
            return oai_fail(e, 500, "server_error", NULL, NULL,
                            "out of memory reading the request");
        req->n_prompts = 1;
        return true;
    }
    if (!cJSON_IsArray(p))
        return wrong_type(e, "prompt", "a string or an array of strings", p);
    int n = cJSON_GetArraySize(p);
    if (n == 0)
        return BAD(e, "empty_array", "prompt",
                   "Invalid 'prompt': empty array. Expected an array with minimum length 1.");
    if (n > OAI_MAX_CHOICES)
        return BAD(e, "invalid_value", "prompt",
                   "Invalid 'prompt': %d prompts in one request; at most %d.", n, OAI_MAX_CHOICES);
    req->prompts = calloc((size_t)n, sizeof *req->prompts);
    if (!req->prompts)
        return oai_fail(e, 500, "server_error", NULL, NULL, "out of memory reading the request");
    int32_t i = 0;
    const cJSON *s;
    cJSON_ArrayForEach(s, p)
    {
        if (!cJSON_IsString(s)) {
            char param[32];
            snprintf(param, sizeof param, "prompt[%d]", i);
            return wrong_type(e, param, "a string (token-id prompts are not supported)", s);
        }
        if (!(req->prompts[i] = dup_str(s->valuestring, e)))
            return false;
        req->n_prompts = ++i;
    }
    return true;
}

static bool parse_stop(const cJSON *root, struct oai_request *req, struct oai_error *e)
{
    const cJSON *st = field(root, "stop");
    if (!st)
        return true;
    if (cJSON_IsString(st)) {
        if (st->valuestring[0] && !(req->stop[req->n_stop++] = dup_str(st->valuestring, e)))
            return false;
        return true;
    }
    if (!cJSON_IsArray(st))
        return wrong_type(e, "stop", "a string or an array of strings", st);
    if (cJSON_GetArraySize(st) > OAI_MAX_STOP)
        return BAD(e, "array_above_max_length", "stop",
                   "Invalid 'stop': array too long. Expected an array with maximum length %d, but "
                   "got an array with length %d instead.",
                   OAI_MAX_STOP, cJSON_GetArraySize(st));
    int i = 0;
    const cJSON *s;
    cJSON_ArrayForEach(s, st)
    {
        if (!cJSON_IsString(s)) {
            char param[32];
            snprintf(param, sizeof param, "stop[%d]", i);
            return wrong_type(e, param, "a string", s);
        }
        i++;
        if (s->valuestring[0] && !(req->stop[req->n_stop++] = dup_str(s->valuestring, e))) {
            req->n_stop--;
            return false;
        }
    }
    return true;
}

/* Fields OpenAI defines that hearth cannot honour: refused when they ask for something. */
static bool refuse_unsupported(const cJSON *root, struct oai_error *e)
{
    static const char *const want_empty[] = {"tools", "functions", "logit_bias"};
    for (size_t i = 0; i < sizeof want_empty / sizeof want_empty[0]; i++) {
        const cJSON *it = field(root, want_empty[i]);
        if (it && (cJSON_IsArray(it) || cJSON_IsObject(it)) && cJSON_GetArraySize(it) == 0)
            continue;
        if (it)
            return BAD(e, "unsupported_parameter", want_empty[i],
                       "Unsupported parameter: '%s' is not supported by this server.",
                       want_empty[i]);
    }
    const cJSON *it = field(root, "echo");
    if (it && !cJSON_IsFalse(it))
        return BAD(e, "unsupported_parameter", "echo",
                   "Unsupported parameter: 'echo' is not supported by this server.");
    if ((it = field(root, "best_of")) && !(cJSON_IsNumber(it) && it->valuedouble == 1))
        return BAD(
            e, "unsupported_parameter", "best_of",
            "Unsupported parameter: 'best_of' other than 1 is not supported by this server.");
    if ((it = field(root, "suffix")) && !(cJSON_IsString(it) && !it->valuestring[0]))
        return BAD(e, "unsupported_parameter", "suffix",
                   "Unsupported parameter: 'suffix' is not supported by this server.");
    if ((it = field(root, "response_format"))) {
        const cJSON *t = cJSON_IsObject(it) ? field(it, "type") : NULL;
        if (!cJSON_IsString(t) || strcmp(t->valuestring, "text"))
            return BAD(e, "unsupported_parameter", "response_format",
                       "Unsupported parameter: 'response_format' other than {\"type\": \"text\"} "
                       "is not supported by this server.");
    }
    return true;
}

bool oai_parse(enum oai_kind kind, const char *body, size_t len, int32_t n_ctx,
               struct oai_request *req, struct oai_error *e)
{
    memset(req, 0, sizeof *req);
    req->kind         = kind;
    req->max_tokens   = -1;
    req->top_logprobs = -1;
    req->n            = 1;
    req->sampling     = (struct hearth_sampler_params){.temperature    = 1.0f,
                                                       .top_k          = 0,
                                                       .top_p          = 1.0f,
                                                       .min_p          = 0.0f,
                                                       .repeat_penalty = 1.0f,
                                                       .repeat_last_n  = 64,
                                                       .seed           = 0};

    const char *end = NULL;
    cJSON *root     = len ? cJSON_ParseWithLengthOpts(body, len, &end, false) : NULL;
    if (root) { /* only whitespace may follow the value */
        size_t at = (size_t)(end - body);
        while (at < len && strchr(" \t\r\n", body[at]) && body[at])
            at++;
        if (at < len) {
            cJSON_Delete(root);
            root = NULL;
            end  = body + at;
        }
    }
    if (!root) {
        size_t at = end && end >= body && end <= body + len ? (size_t)(end - body) : 0;
        return BAD(e, NULL, NULL,
                   "We could not parse the JSON body of your request: invalid JSON near byte "
                   "%zu of %zu.",
                   at, len);
    }
    bool ok = false;
    if (!cJSON_IsObject(root)) {
        BAD(e, NULL, NULL, "The request body must be a JSON object, but it is %s.", kind_of(root));
        goto out;
    }
    const cJSON *it;
    int64_t iv;
    double dv;
    bool bv;

    if ((it = field(root, "model"))) {
        if (!cJSON_IsString(it)) {
            wrong_type(e, "model", "a string", it);
            goto out;
        }
        if (!(req->model = dup_str(it->valuestring, e)))
            goto out;
    }
    if (kind == OAI_CHAT ? !parse_messages(root, req, e) : !parse_prompt(root, req, e))
        goto out;

    /* max_completion_tokens is the chat API's newer name; it wins over max_tokens. */
    const char *mt_names[] = {"max_tokens", "max_completion_tokens"};
    for (int k = 0; k < 2; k++) {
        if (!(it = field(root, mt_names[k])))
            continue;
        if (!want_int(it, mt_names[k], 1, 2147483647.0, &iv, e))
            goto out;
        if (n_ctx > 0 && iv > n_ctx) {
            BAD(e, "invalid_value", mt_names[k],
                "Invalid '%s': %lld is more than a slot's whole context of %d tokens "
                "(--ctx-size).",
                mt_names[k], (long long)iv, n_ctx);
            goto out;
        }
        req->max_tokens = (int32_t)iv;
    }
    if ((it = field(root, "temperature"))) {
        if (!want_number(it, "temperature", 0, 2, &dv, e))
            goto out;
        req->sampling.temperature = (float)dv;
    }
    if ((it = field(root, "top_p"))) {
        if (!want_number(it, "top_p", 0, 1, &dv, e))
            goto out;
        req->sampling.top_p = (float)dv;
    }
    if ((it = field(root, "top_k"))) {
        if (!want_int(it, "top_k", -1, 2147483647.0, &iv, e))
            goto out;
        req->sampling.top_k = iv < 0 ? 0 : (int32_t)iv;
    }
    if ((it = field(root, "min_p"))) {
        if (!want_number(it, "min_p", 0, 1, &dv, e))
            goto out;
        req->sampling.min_p = (float)dv;
    }
    if ((it = field(root, "repetition_penalty"))) {
        if (!want_number(it, "repetition_penalty", 0, 10, &dv, e))
            goto out;
        if (dv <= 0) {
            BAD(e, "invalid_value", "repetition_penalty",
                "Invalid 'repetition_penalty': expected a value above 0 (1 = off), but got %g.",
                dv);
            goto out;
        }
        req->sampling.repeat_penalty = (float)dv;
    }
    if ((it = field(root, "presence_penalty"))) {
        if (!want_number(it, "presence_penalty", -2, 2, &dv, e))
            goto out;
        req->presence_penalty = (float)dv;
    }
    if ((it = field(root, "frequency_penalty"))) {
        if (!want_number(it, "frequency_penalty", -2, 2, &dv, e))
            goto out;
        req->frequency_penalty = (float)dv;
    }
    if ((it = field(root, "seed"))) {
        /* integers a double holds exactly; negative seeds wrap as two's complement */
        if (!want_int(it, "seed", -9007199254740992.0, 9007199254740992.0, &iv, e))
            goto out;
        req->sampling.seed = (uint64_t)iv;
        req->has_seed      = true;
    }
    if ((it = field(root, "n"))) {
        if (!want_int(it, "n", 1, OAI_MAX_N, &iv, e))
            goto out;
        req->n = (int32_t)iv;
    }
    if (kind == OAI_COMPLETION && req->n_prompts * req->n > OAI_MAX_CHOICES) {
        BAD(e, "invalid_value", "n",
            "Invalid 'n': %d prompts x n = %d choices; at most %d in one request.", req->n_prompts,
            req->n_prompts * req->n, OAI_MAX_CHOICES);
        goto out;
    }
    if (!parse_stop(root, req, e))
        goto out;
    if (kind == OAI_CHAT) {
        bool lp = false;
        if ((it = field(root, "logprobs")) && !want_bool(it, "logprobs", &lp, e))
            goto out;
        if ((it = field(root, "top_logprobs"))) {
            if (!want_int(it, "top_logprobs", 0, OAI_MAX_TOP_LOGPROBS, &iv, e))
                goto out;
            if (!lp) {
                BAD(e, "invalid_value", "top_logprobs",
                    "Invalid 'top_logprobs': 'logprobs' must be true when 'top_logprobs' is "
                    "given.");
                goto out;
            }
            req->top_logprobs = (int32_t)iv;
        } else if (lp) {
            req->top_logprobs = 0;
        }
    } else if ((it = field(root, "logprobs"))) {
        if (!want_int(it, "logprobs", 0, OAI_MAX_TOP_LOGPROBS, &iv, e))
            goto out;
        req->top_logprobs = (int32_t)iv;
    }
    if ((it = field(root, "stream")) && !want_bool(it, "stream", &req->stream, e))
        goto out;
    if ((it = field(root, "stream_options"))) {
        if (!cJSON_IsObject(it)) {
            wrong_type(e, "stream_options", "an object", it);
            goto out;
        }
        if (!req->stream) {
            BAD(e, "invalid_value", "stream_options",
                "Invalid 'stream_options': only allowed when 'stream' is true.");
            goto out;
        }
        const cJSON *iu = field(it, "include_usage");
        if (iu && !want_bool(iu, "stream_options.include_usage", &req->include_usage, e))
            goto out;
    }
    if ((it = field(root, "ignore_eos"))) {
        if (!want_bool(it, "ignore_eos", &bv, e))
            goto out;
        req->ignore_eos = bv;
    }
    ok = refuse_unsupported(root, e);
out:
    cJSON_Delete(root);
    if (!ok)
        oai_request_free(req);
    return ok;
}

/* ----------------------------------------------------------------- jobs --- */

bool oai_chat_text(const struct oai_request *req, enum chat_family fam, const char *bos,
                   const char *eos, char **text, struct oai_error *e)
{
    struct chat_msg *msgs = calloc((size_t)(req->n_messages ? req->n_messages : 1), sizeof *msgs);
    if (!msgs)
        return oai_fail(e, 500, "server_error", NULL, NULL, "out of memory rendering the chat");
    for (int32_t i = 0; i < req->n_messages; i++)
        msgs[i] = (struct chat_msg){req->messages[i].role, req->messages[i].content};
    char err[HEARTH_ERR_MAX];
    enum hearth_status st = chat_render(fam, msgs, (size_t)req->n_messages, true, bos, eos, text,
                                        NULL, err, sizeof err);
    free(msgs);
    if (st == HEARTH_ENOMEM)
        return oai_fail(e, 500, "server_error", NULL, NULL, "%s", err);
    if (st != HEARTH_OK)
        return BAD(e, "invalid_value", "messages", "Invalid 'messages': %s (the %s chat template).",
                   err, chat_family_name(fam));
    return true;
}

enum chat_family oai_model_chat_family(const struct hearth_model *model, bool *recognised)
{
    if (!model) {
        if (recognised)
            *recognised = false;
        return CHAT_CHATML;
    }
    return model_chat_family(model, recognised);
}

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z          = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z          = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Tokens of one prompt text, checked against the slot context. */
static bool tokenize_prompt(const struct hearth_model *model, const char *text, size_t len,
                            int32_t n_ctx, const char *param, hearth_token **ids, int32_t *n_ids,
                            struct oai_error *e)
{
    char err[HEARTH_ERR_MAX];
    size_t n              = 0;
    *ids                  = NULL;
    enum hearth_status st = hearth_tokenize(model, text, len, true, true, ids, &n, err, sizeof err);
    if (st != HEARTH_OK)
        return oai_fail(e, st == HEARTH_ENOMEM ? 500 : 400,
                        st == HEARTH_ENOMEM ? "server_error" : "invalid_request_error", NULL, param,
                        "%s", err);
    if (n == 0) {
        free(*ids);
        *ids = NULL;
        return BAD(e, "invalid_value", param, "Invalid '%s': the prompt is empty.", param);
    }
    if (n_ctx > 0 && n >= (size_t)n_ctx) {
        free(*ids);
        *ids = NULL;
        return BAD(e, "context_length_exceeded", param,
                   "The prompt is %zu tokens but a slot's context is %d tokens (--ctx-size), "
                   "which must leave room for at least one generated token.",
                   n, n_ctx);
    }
    *n_ids = (int32_t)n;
    return true;
}

bool oai_make_jobs(const struct oai_request *req, const struct hearth_model *model,
                   enum chat_family fam, int32_t n_ctx, uint64_t request_id, uint64_t *next_job_id,
                   struct sched_job ***jobs_out, int32_t *n_jobs_out, struct oai_error *e)
{
    int32_t n_prompts       = req->kind == OAI_CHAT ? 1 : req->n_prompts;
    int32_t n_jobs          = n_prompts * req->n;
    struct sched_job **jobs = calloc((size_t)n_jobs, sizeof *jobs);
    hearth_token **toks     = calloc((size_t)n_prompts, sizeof *toks);
    int32_t *n_toks         = calloc((size_t)n_prompts, sizeof *n_toks);
    bool ok                 = false;
    if (!jobs || !toks || !n_toks) {
        oai_fail(e, 500, "server_error", NULL, NULL, "out of memory building the jobs");
        goto out;
    }
    if (req->kind == OAI_CHAT) {
        const struct tokenizer *t = model->tok;
        int32_t bos_id = tokenizer_bos(t), eos_id = tokenizer_eos(t);
        const char *bos = bos_id >= 0 ? tokenizer_token_text(t, bos_id) : "";
        const char *eos = eos_id >= 0 ? tokenizer_token_text(t, eos_id) : "";
        char *text      = NULL;
        if (!oai_chat_text(req, fam, bos, eos, &text, e))
            goto out;
        /* The template writes BOS itself where the family has one; the tokenizer adds it
         * too when the vocab says so: keep one (what llama.cpp's server does). */
        const char *p = text;
        if (tokenizer_add_bos(t) && bos[0] && !strncmp(p, bos, strlen(bos)))
            p += strlen(bos);
        bool tok_ok =
            tokenize_prompt(model, p, strlen(p), n_ctx, "messages", &toks[0], &n_toks[0], e);
        free(text);
        if (!tok_ok)
            goto out;
    } else {
        for (int32_t i = 0; i < n_prompts; i++) {
            char param[32];
            snprintf(param, sizeof param, n_prompts == 1 ? "prompt" : "prompt[%d]", i);
            if (!tokenize_prompt(model, req->prompts[i], strlen(req->prompts[i]), n_ctx, param,
                                 &toks[i], &n_toks[i], e))
                goto out;
        }
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t rng = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ (request_id << 7);
    for (int32_t c = 0; c < n_jobs; c++) {
        int32_t pi            = c / req->n;
        struct sched_job *job = calloc(1, sizeof *job);
        if (!job || !(job->prompt = malloc((size_t)n_toks[pi] * sizeof *job->prompt))) {
            free(job);
            oai_fail(e, 500, "server_error", NULL, NULL, "out of memory building the jobs");
            goto out;
        }
        jobs[c] = job;
        memcpy(job->prompt, toks[pi], (size_t)n_toks[pi] * sizeof *job->prompt);
        job->id               = (*next_job_id)++;
        job->request_id       = request_id;
        job->choice           = c;
        job->n_prompt         = n_toks[pi];
        job->max_tokens       = req->max_tokens > 0 ? req->max_tokens : n_ctx - n_toks[pi];
        job->sampling         = req->sampling;
        job->sampling.seed    = req->has_seed ? req->sampling.seed + (uint64_t)c : splitmix64(&rng);
        job->presence_penalty = req->presence_penalty;
        job->frequency_penalty = req->frequency_penalty;
        job->top_logprobs      = req->top_logprobs;
        job->ignore_eos        = req->ignore_eos;
        for (int32_t s = 0; s < req->n_stop; s++) {
            if (!(job->stop[s] = strdup(req->stop[s]))) {
                oai_fail(e, 500, "server_error", NULL, NULL, "out of memory building the jobs");
                goto out;
            }
            job->n_stop = s + 1;
        }
        if (job->max_tokens < 1)
            job->max_tokens = 1;
    }
    ok = true;
out:
    if (toks)
        for (int32_t i = 0; i < n_prompts; i++)
            free(toks[i]);
    free(toks);
    free(n_toks);
    if (!ok && jobs) {
        for (int32_t c = 0; c < n_jobs; c++)
            if (jobs[c])
                sched_job_free(jobs[c]);
        free(jobs);
        jobs = NULL;
    }
    *jobs_out   = ok ? jobs : NULL;
    *n_jobs_out = ok ? n_jobs : 0;
    return ok;
}

/* ------------------------------------------------------------ responses --- */

struct oai_choice {
    char *text; /* accumulated (non-streaming) */
    size_t len, cap;
    size_t offset;   /* bytes of text produced so far (completions' text_offset) */
    cJSON *logprobs; /* non-streaming: chat: content[]; completions: the logprobs object */
    bool done;
    const char *finish; /* "stop", "length", NULL while running */
    int32_t n_prompt, n_cached, n_generated;
};

struct oai_response {
    enum oai_kind kind;
    bool stream, include_usage, logprobs;
    int32_t n_choices, n_per_prompt;
    struct oai_choice *ch; /* [n_choices] */
    char id[64];
    char *model_name;
    int64_t created;
    const struct hearth_model *model;
    char *error; /* first failure's message, or NULL */
};

struct oai_response *oai_response_new(const struct oai_request *req, int32_t n_choices,
                                      const char *id, int64_t created, const char *model_name,
                                      const struct hearth_model *model)
{
    struct oai_response *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->ch         = calloc((size_t)(n_choices > 0 ? n_choices : 1), sizeof *r->ch);
    r->model_name = strdup(model_name ? model_name : "");
    if (!r->ch || !r->model_name) {
        free(r->ch);
        free(r->model_name);
        free(r);
        return NULL;
    }
    r->kind          = req->kind;
    r->stream        = req->stream;
    r->include_usage = req->include_usage;
    r->logprobs      = req->top_logprobs >= 0;
    r->n_choices     = n_choices;
    r->n_per_prompt  = req->n > 0 ? req->n : 1;
    r->created       = created;
    r->model         = model;
    snprintf(r->id, sizeof r->id, "%s", id);
    return r;
}

void oai_response_free(struct oai_response *r)
{
    if (!r)
        return;
    for (int32_t i = 0; i < r->n_choices; i++) {
        free(r->ch[i].text);
        cJSON_Delete(r->ch[i].logprobs);
    }
    free(r->ch);
    free(r->model_name);
    free(r->error);
    free(r);
}

/* The envelope every object shares: id, object, created, model. */
static cJSON *envelope(const struct oai_response *r, const char *object)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", r->id);
    cJSON_AddStringToObject(o, "object", object);
    cJSON_AddNumberToObject(o, "created", (double)r->created);
    cJSON_AddStringToObject(o, "model", r->model_name);
    cJSON_AddNullToObject(o, "system_fingerprint");
    return o;
}

static const char *chunk_object(const struct oai_response *r)
{
    return r->kind == OAI_CHAT ? "chat.completion.chunk" : "text_completion";
}

/* `data: <json>\n\n` from o (deleted). */
static char *sse(cJSON *o, size_t *len)
{
    char *json = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!json)
        return NULL;
    size_t n  = strlen(json);
    char *out = malloc(n + 9);
    if (out) {
        memcpy(out, "data: ", 6);
        memcpy(out + 6, json, n);
        memcpy(out + 6 + n, "\n\n", 3);
        *len = n + 8;
    }
    free(json);
    return out;
}

static cJSON *usage_json(const struct oai_response *r)
{
    long long p = 0, c = 0, k = 0;
    for (int32_t i = 0; i < r->n_choices; i++) {
        c += r->ch[i].n_generated;
        if (i % r->n_per_prompt == 0) { /* the prompt is counted once, not once per copy */
            p += r->ch[i].n_prompt;
            k += r->ch[i].n_cached;
        }
    }
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "prompt_tokens", (double)p);
    cJSON_AddNumberToObject(u, "completion_tokens", (double)c);
    cJSON_AddNumberToObject(u, "total_tokens", (double)(p + c));
    cJSON *d = cJSON_AddObjectToObject(u, "prompt_tokens_details");
    cJSON_AddNumberToObject(d, "cached_tokens", (double)k);
    return u;
}

/* The token's text and its bytes as OpenAI shows them. */
static int32_t piece(const struct oai_response *r, hearth_token tok, char *buf, size_t cap)
{
    if (!r->model) { /* no vocabulary (tests): the id in angle brackets */
        snprintf(buf, cap, "<%d>", tok);
        return (int32_t)strlen(buf);
    }
    size_t n = hearth_token_to_piece(r->model, tok, buf, cap - 1);
    if (n > cap - 1)
        n = 0;
    buf[n] = 0;
    return (int32_t)n;
}

static cJSON *bytes_json(const char *s, int32_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (int32_t i = 0; i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber((unsigned char)s[i]));
    return a;
}

/* A token's text may be a lone byte of a UTF-8 character; JSON text must be valid UTF-8. */
static cJSON *text_json(const char *s, int32_t n)
{
    char *t = malloc((size_t)n * 3 + 1);
    if (!t)
        return cJSON_CreateString("");
    size_t w = 0;
    for (int32_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        bool ok = len > 0 && i + len <= n;
        for (int j = 1; ok && j < len; j++)
            ok = ((unsigned char)s[i + j] >> 6) == 2;
        if (ok) {
            memcpy(t + w, s + i, (size_t)len);
            w += (size_t)len;
            i += len;
        } else { /* U+FFFD, as Python's bytes.decode(errors="replace") writes */
            memcpy(t + w, "\xef\xbf\xbd", 3);
            w += 3;
            i++;
        }
    }
    t[w]     = 0;
    cJSON *j = cJSON_CreateString(t);
    free(t);
    return j;
}

/* Chat: one entry of logprobs.content. */
static cJSON *chat_logprob_entry(const struct oai_response *r, const struct sched_event *ev)
{
    char buf[256];
    int32_t n = piece(r, ev->logprob->token, buf, sizeof buf);
    cJSON *o  = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "token", text_json(buf, n));
    cJSON_AddNumberToObject(o, "logprob", ev->logprob->logprob);
    cJSON_AddItemToObject(o, "bytes", bytes_json(buf, n));
    cJSON *top = cJSON_AddArrayToObject(o, "top_logprobs");
    for (int32_t i = 0; i < ev->n_top; i++) {
        int32_t m = piece(r, ev->top[i].token, buf, sizeof buf);
        cJSON *t  = cJSON_CreateObject();
        cJSON_AddItemToObject(t, "token", text_json(buf, m));
        cJSON_AddNumberToObject(t, "logprob", ev->top[i].logprob);
        cJSON_AddItemToObject(t, "bytes", bytes_json(buf, m));
        cJSON_AddItemToArray(top, t);
    }
    return o;
}

/* Completions: appends one token to a {tokens, token_logprobs, top_logprobs, text_offset} object.
 */
static void completion_logprob_add(const struct oai_response *r, cJSON *lp,
                                   const struct sched_event *ev, size_t offset)
{
    char buf[256];
    int32_t n = piece(r, ev->logprob->token, buf, sizeof buf);
    cJSON_AddItemToArray(cJSON_GetObjectItem(lp, "tokens"), text_json(buf, n));
    cJSON_AddItemToArray(cJSON_GetObjectItem(lp, "token_logprobs"),
                         cJSON_CreateNumber(ev->logprob->logprob));
    cJSON *top = cJSON_CreateObject();
    for (int32_t i = 0; i < ev->n_top; i++) {
        int32_t m = piece(r, ev->top[i].token, buf, sizeof buf);
        cJSON *k  = text_json(buf, m);
        /* two tokens with the same text: keep the first (the likelier) */
        if (!cJSON_GetObjectItemCaseSensitive(top, k->valuestring))
            cJSON_AddNumberToObject(top, k->valuestring, ev->top[i].logprob);
        cJSON_Delete(k);
    }
    cJSON_AddItemToArray(cJSON_GetObjectItem(lp, "top_logprobs"), top);
    cJSON_AddItemToArray(cJSON_GetObjectItem(lp, "text_offset"),
                         cJSON_CreateNumber((double)offset));
}

static cJSON *completion_logprobs_new(void)
{
    cJSON *lp = cJSON_CreateObject();
    cJSON_AddArrayToObject(lp, "tokens");
    cJSON_AddArrayToObject(lp, "token_logprobs");
    cJSON_AddArrayToObject(lp, "top_logprobs");
    cJSON_AddArrayToObject(lp, "text_offset");
    return lp;
}

static bool choice_ok(const struct oai_response *r, int32_t i)
{
    return i >= 0 && i < r->n_choices;
}

/* A streaming chunk with one choice; the caller fills delta/text. */
static cJSON *chunk_new(const struct oai_response *r, int32_t index, cJSON **choice)
{
    cJSON *o  = envelope(r, chunk_object(r));
    cJSON *cs = cJSON_AddArrayToObject(o, "choices");
    *choice   = cJSON_CreateObject();
    cJSON_AddNumberToObject(*choice, "index", index);
    cJSON_AddItemToArray(cs, *choice);
    return o;
}

static void chunk_usage_null(const struct oai_response *r, cJSON *o)
{
    if (r->include_usage)
        cJSON_AddNullToObject(o, "usage");
}

char *oai_response_start(struct oai_response *r, size_t *len)
{
    *len = 0;
    if (!r->stream || r->kind != OAI_CHAT)
        return NULL;
    size_t total = 0, cap = 0;
    char *all = NULL;
    for (int32_t i = 0; i < r->n_choices; i++) {
        cJSON *c;
        cJSON *o     = chunk_new(r, i, &c);
        cJSON *delta = cJSON_AddObjectToObject(c, "delta");
        cJSON_AddStringToObject(delta, "role", "assistant");
        cJSON_AddStringToObject(delta, "content", "");
        cJSON_AddNullToObject(c, "logprobs");
        cJSON_AddNullToObject(c, "finish_reason");
        chunk_usage_null(r, o);
        size_t n;
        char *s = sse(o, &n);
        if (!s)
            continue;
        if (total + n + 1 > cap) {
            cap         = (total + n + 1) * 2;
            char *grown = realloc(all, cap);
            if (!grown) {
                free(s);
                break;
            }
            all = grown;
        }
        memcpy(all + total, s, n + 1);
        total += n;
        free(s);
    }
    *len = total;
    return all;
}

char *oai_response_text(struct oai_response *r, const struct sched_event *ev, size_t *len)
{
    *len = 0;
    if (!choice_ok(r, ev->choice))
        return NULL;
    struct oai_choice *ch = &r->ch[ev->choice];
    bool lp               = r->logprobs && ev->logprob;
    size_t offset         = ch->offset;
    ch->offset += ev->text_len;
    if (!r->stream) {
        if (ch->len + ev->text_len + 1 > ch->cap) {
            size_t cap = (ch->len + ev->text_len + 1) * 2;
            char *t    = realloc(ch->text, cap);
            if (!t)
                return NULL;
            ch->text = t;
            ch->cap  = cap;
        }
        memcpy(ch->text + ch->len, ev->text, ev->text_len);
        ch->len += ev->text_len;
        ch->text[ch->len] = 0;
        if (lp) {
            if (r->kind == OAI_CHAT) {
                if (!ch->logprobs)
                    ch->logprobs = cJSON_CreateArray();
                cJSON_AddItemToArray(ch->logprobs, chat_logprob_entry(r, ev));
            } else {
                if (!ch->logprobs)
                    ch->logprobs = completion_logprobs_new();
                completion_logprob_add(r, ch->logprobs, ev, offset);
            }
        }
        return NULL;
    }
    if (ev->text_len == 0 && !lp)
        return NULL; /* a token held back: nothing to say yet */
    cJSON *c;
    cJSON *o = chunk_new(r, ev->choice, &c);
    cJSON *t = text_json(ev->text, (int32_t)ev->text_len);
    if (r->kind == OAI_CHAT) {
        cJSON *delta = cJSON_AddObjectToObject(c, "delta");
        cJSON_AddItemToObject(delta, "content", t);
        if (lp) {
            cJSON *l       = cJSON_AddObjectToObject(c, "logprobs");
            cJSON *content = cJSON_AddArrayToObject(l, "content");
            cJSON_AddItemToArray(content, chat_logprob_entry(r, ev));
        } else {
            cJSON_AddNullToObject(c, "logprobs");
        }
    } else {
        cJSON_AddItemToObject(c, "text", t);
        if (lp) {
            cJSON *l = completion_logprobs_new();
            completion_logprob_add(r, l, ev, offset);
            cJSON_AddItemToObject(c, "logprobs", l);
        } else {
            cJSON_AddNullToObject(c, "logprobs");
        }
    }
    cJSON_AddNullToObject(c, "finish_reason");
    chunk_usage_null(r, o);
    return sse(o, len);
}

static const char *finish_name(enum sched_finish f)
{
    return f == SCHED_FINISH_LENGTH ? "length" : "stop";
}

static cJSON *error_obj(const char *message)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *e = cJSON_AddObjectToObject(o, "error");
    cJSON_AddStringToObject(e, "message", message);
    cJSON_AddStringToObject(e, "type", "server_error");
    cJSON_AddNullToObject(e, "param");
    cJSON_AddNullToObject(e, "code");
    return o;
}

char *oai_response_done(struct oai_response *r, const struct sched_event *ev, size_t *len)
{
    *len = 0;
    if (!choice_ok(r, ev->choice) || r->ch[ev->choice].done)
        return NULL;
    struct oai_choice *ch = &r->ch[ev->choice];
    ch->done              = true;
    if (ev->kind == SCHED_EV_ERROR) {
        ch->finish = "stop";
        if (!r->error) {
            char *m = malloc(ev->text_len + 1);
            if (m) {
                memcpy(m, ev->text ? ev->text : "", ev->text_len);
                m[ev->text_len] = 0;
            }
            r->error = m;
        }
        if (r->stream)
            return sse(error_obj(r->error ? r->error : "generation failed"), len);
        return NULL;
    }
    ch->finish      = finish_name(ev->finish);
    ch->n_prompt    = ev->n_prompt;
    ch->n_cached    = ev->n_cached;
    ch->n_generated = ev->n_generated;
    if (!r->stream)
        return NULL;
    cJSON *c;
    cJSON *o = chunk_new(r, ev->choice, &c);
    if (r->kind == OAI_CHAT)
        cJSON_AddObjectToObject(c, "delta");
    else
        cJSON_AddStringToObject(c, "text", "");
    cJSON_AddNullToObject(c, "logprobs");
    cJSON_AddStringToObject(c, "finish_reason", ch->finish);
    chunk_usage_null(r, o);
    return sse(o, len);
}

char *oai_response_finish(struct oai_response *r, int *status, size_t *len)
{
    *len    = 0;
    *status = 200;
    if (r->stream) {
        char *usage = NULL;
        size_t ulen = 0;
        if (r->include_usage) {
            cJSON *o = envelope(r, chunk_object(r));
            cJSON_AddArrayToObject(o, "choices");
            cJSON_AddItemToObject(o, "usage", usage_json(r));
            usage = sse(o, &ulen);
        }
        static const char done[] = "data: [DONE]\n\n";
        char *out                = malloc(ulen + sizeof done);
        if (out) {
            if (usage)
                memcpy(out, usage, ulen);
            memcpy(out + ulen, done, sizeof done);
            *len = ulen + sizeof done - 1;
        }
        free(usage);
        return out;
    }
    if (r->error) {
        *status  = 500;
        cJSON *o = error_obj(r->error);
        char *s  = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        *len = s ? strlen(s) : 0;
        return s;
    }
    cJSON *o  = envelope(r, r->kind == OAI_CHAT ? "chat.completion" : "text_completion");
    cJSON *cs = cJSON_AddArrayToObject(o, "choices");
    for (int32_t i = 0; i < r->n_choices; i++) {
        struct oai_choice *ch = &r->ch[i];
        cJSON *c              = cJSON_CreateObject();
        cJSON_AddNumberToObject(c, "index", i);
        cJSON *t = text_json(ch->text ? ch->text : "", (int32_t)ch->len);
        if (r->kind == OAI_CHAT) {
            cJSON *m = cJSON_AddObjectToObject(c, "message");
            cJSON_AddStringToObject(m, "role", "assistant");
            cJSON_AddItemToObject(m, "content", t);
            cJSON_AddNullToObject(m, "refusal");
        } else {
            cJSON_AddItemToObject(c, "text", t);
        }
        if (r->logprobs) {
            cJSON *lp    = ch->logprobs;
            ch->logprobs = NULL;
            if (r->kind == OAI_CHAT) {
                cJSON *l = cJSON_AddObjectToObject(c, "logprobs");
                cJSON_AddItemToObject(l, "content", lp ? lp : cJSON_CreateArray());
            } else {
                cJSON_AddItemToObject(c, "logprobs", lp ? lp : completion_logprobs_new());
            }
        } else {
            cJSON_AddNullToObject(c, "logprobs");
        }
        cJSON_AddStringToObject(c, "finish_reason", ch->finish ? ch->finish : "stop");
        cJSON_AddItemToArray(cs, c);
    }
    cJSON_AddItemToObject(o, "usage", usage_json(r));
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    *len = s ? strlen(s) : 0;
    return s;
}
