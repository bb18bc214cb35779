/*
 * oai_jobs.c: stage 2 of openai.h, a validated request -> the prompt text
 * (chat template) -> tokens -> one sched_job per choice. Runs on the
 * preparation thread: rendering a template and tokenizing a 4 MiB prompt
 * take long enough that the event loop must not wait for them.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grammar/grammar.h"
#include "serve/openai.h"
#include "serve/reqjson.h"
#include "sched/turns.h"
#include "chat/chat_template.h"
#include "chat/chatparse.h"
#include "util/rng.h"

#define BAD REQJSON_BAD

static bool is_system(const cJSON *m)
{
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(m, "role");
    return cJSON_IsString(r) && !strcmp(r->valuestring, "system");
}

/*
 * messages with every system message after the first merged into one at
 * the start, their texts in order, joined by blank lines: for templates that
 * take a system message only there (Qwen3.5's, Mistral's), when a client
 * (Claude Code) sends one between turns. NULL when there is nothing to merge.
 */
static cJSON *merge_system(const cJSON *messages)
{
    int i = 0, late = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, messages) late += i++ > 0 && is_system(m);
    if (!late)
        return NULL;
    char *sys  = NULL;
    size_t cap = 0;
    FILE *f    = open_memstream(&sys, &cap);
    cJSON *out = cJSON_CreateArray();
    cJSON_ArrayForEach(m, messages)
    {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content"), *p;
        if (!is_system(m)) {
            cJSON_AddItemToArray(out, cJSON_Duplicate(m, true));
            continue;
        }
        if (!f)
            continue;
        fputs(ftell(f) ? "\n\n" : "", f);
        if (cJSON_IsString(c))
            fputs(c->valuestring, f);
        else if (cJSON_IsArray(c)) /* parts joined by newlines, as chat_template joins them */
            cJSON_ArrayForEach(p, c)
            {
                const cJSON *t = cJSON_GetObjectItemCaseSensitive(p, "text");
                fprintf(f, "%s%s", p != c->child ? "\n" : "",
                        cJSON_IsString(t) ? t->valuestring : "");
            }
    }
    cJSON *first = f && fclose(f) == 0 ? cJSON_CreateObject() : NULL;
    if (!first || !out || !cJSON_AddStringToObject(first, "role", "system") ||
        !cJSON_AddStringToObject(first, "content", sys)) {
        cJSON_Delete(first);
        cJSON_Delete(out);
        free(sys);
        return NULL;
    }
    cJSON_InsertItemInArray(out, 0, first);
    free(sys);
    return out;
}

bool oai_prompt(const struct oai_request *req, const struct chat_template *tmpl,
                const struct hearth_model *model, char **text, struct oai_error *e)
{
    char err[HEARTH_ERR_MAX], err2[HEARTH_ERR_MAX];
    *text                 = NULL;
    enum hearth_status st = chat_template_render(
        tmpl, req->messages, req->tools, req->template_kwargs, true, text, NULL, err, sizeof err);
    cJSON *merged = st != HEARTH_OK && st != HEARTH_ENOMEM ? merge_system(req->messages) : NULL;
    bool retried  = merged != NULL;
    if (merged) { /* a system message between turns, refused there: at the start instead */
        free(*text);
        *text = NULL;
        st = chat_template_render(tmpl, merged, req->tools, req->template_kwargs, true, text, NULL,
                                  err2, sizeof err2);
        cJSON_Delete(merged);
    }
    if (st == HEARTH_ENOMEM)
        return oai_fail(e, 500, "server_error", NULL, NULL, "%s", retried ? err2 : err);
    if (st != HEARTH_OK) /* the first refusal says what the conversation as sent lacks */
        return BAD(e, "invalid_value", "messages",
                   "The chat template (%s) refused the conversation: %s",
                   chat_template_describe(tmpl), err);
    /* The template writes BOS itself where the family has one; the tokenizer adds it
     * too when the vocab says so: keep one (what llama.cpp's server does). */
    const char *bos = chat_template_bos(tmpl);
    size_t bl       = strlen(bos);
    if (model && hearth_vocab_add_bos(model) && bl && !strncmp(*text, bos, bl))
        memmove(*text, *text + bl, strlen(*text + bl) + 1);
    return true;
}

/* Tokens of one prompt text (a reply resent in it in its own tokens), checked against the slot
 * context. */
static bool tokenize_prompt(const struct hearth_model *model, struct turns *turns, const char *text,
                            size_t len, int32_t n_ctx, const char *param, hearth_token **ids,
                            int32_t *n_ids, struct oai_error *e)
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
    turns_splice(turns, ids, &n, n_ctx);
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

/* req's client is gone (or the server stopping): false with a 499 in *e, so the stages stop. */
static bool live(const struct oai_request *req, struct oai_error *e)
{
    if (!req->cancel || !atomic_load(req->cancel))
        return true;
    return oai_fail(e, 499, "invalid_request_error", "client_closed", NULL,
                    "The request was cancelled before it was prepared.");
}

bool oai_make_jobs(const struct oai_request *req, const struct chat_template *tmpl,
                   const struct hearth_model *model, struct grammar_cache *gc, struct turns *turns,
                   int32_t n_ctx, uint64_t request_id, uint64_t *next_job_id,
                   struct sched_job ***jobs_out, int32_t *n_jobs_out, bool *thinking,
                   struct oai_error *e)
{
    struct grammar *g       = NULL;
    char **trig             = NULL;
    int32_t n_trig          = 0;
    int32_t n_prompts       = req->kind == OAI_COMPLETION ? req->n_prompts : 1;
    int32_t n_jobs          = n_prompts * req->n;
    struct sched_job **jobs = calloc((size_t)n_jobs, sizeof *jobs);
    hearth_token **toks     = calloc((size_t)n_prompts, sizeof *toks);
    int32_t *n_toks         = calloc((size_t)n_prompts, sizeof *n_toks);
    bool ok                 = false;
    if (thinking)
        *thinking = false;
    if (!jobs || !toks || !n_toks) {
        oai_fail(e, 500, "server_error", NULL, NULL, "out of memory building the jobs");
        goto out;
    }
    for (int32_t b = 0; b < req->n_bias; b++)
        if (req->bias[b].token >= hearth_model_n_vocab(model)) {
            oai_fail(e, 400, "invalid_request_error", "invalid_value", "logit_bias",
                     "Invalid 'logit_bias': token %d is outside the vocabulary (%d tokens).",
                     (int)req->bias[b].token, (int)hearth_model_n_vocab(model));
            goto out;
        }
    if (req->kind != OAI_COMPLETION) {
        char *text = NULL;
        if (!live(req, e) || !oai_prompt(req, tmpl, model, &text, e))
            goto out;
        if (thinking)
            *thinking =
                chatparse_prompt_opens_thinking(chat_template_format(tmpl), text, strlen(text));
        bool tok_ok = live(req, e) &&
                      tokenize_prompt(model, turns, text, strlen(text), n_ctx, "messages", &toks[0],
                                      &n_toks[0], e) &&
                      live(req, e) &&
                      oai_grammar(req, tmpl, gc, text, strlen(text), &g, &trig, &n_trig, e);
        free(text);
        if (!tok_ok)
            goto out;
    } else {
        if (!live(req, e) || !oai_grammar(req, NULL, gc, "", 0, &g, &trig, &n_trig, e))
            goto out;
        for (int32_t i = 0; i < n_prompts; i++) {
            if (!live(req, e))
                goto out;
            char param[32];
            snprintf(param, sizeof param, n_prompts == 1 ? "prompt" : "prompt[%d]", i);
            if (!tokenize_prompt(model, turns, req->prompts[i], strlen(req->prompts[i]), n_ctx,
                                 param, &toks[i], &n_toks[i], e))
                goto out;
        }
    }
    if (!live(req, e))
        goto out;
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
        int32_t room       = n_ctx - n_toks[pi]; /* >= 1, checked above */
        job->id            = (*next_job_id)++;
        job->request_id    = request_id;
        job->choice        = c;
        job->n_prompt      = n_toks[pi];
        job->max_tokens    = req->max_tokens > 0 && req->max_tokens < room ? req->max_tokens : room;
        job->sampling      = req->sampling;
        job->sampling.seed = req->has_seed ? req->sampling.seed + (uint64_t)c : splitmix64(&rng);
        job->presence_penalty  = req->presence_penalty;
        job->frequency_penalty = req->frequency_penalty;
        job->top_logprobs      = req->top_logprobs;
        job->ignore_eos        = req->ignore_eos;
        job->no_cache          = req->no_cache;
        if (req->n_bias > 0) {
            if (!(job->bias = malloc((size_t)req->n_bias * sizeof *job->bias))) {
                oai_fail(e, 500, "server_error", NULL, NULL, "out of memory building the jobs");
                goto out;
            }
            for (int32_t b = 0; b < req->n_bias; b++)
                job->bias[b] = (struct sample_bias){
                    req->bias[b].token, req->bias[b].bias <= -100 ? -INFINITY : req->bias[b].bias};
            job->n_bias = req->n_bias;
        }
        if (g) {
            job->grammar = grammar_ref(g);
            if (n_trig > 0 && !(job->triggers = calloc((size_t)n_trig, sizeof *job->triggers))) {
                oai_fail(e, 500, "server_error", NULL, NULL, "out of memory building the jobs");
                goto out;
            }
            for (; job->n_triggers < n_trig; job->n_triggers++)
                if (!(job->triggers[job->n_triggers] = strdup(trig[job->n_triggers]))) {
                    oai_fail(e, 500, "server_error", NULL, NULL, "out of memory building the jobs");
                    goto out;
                }
        }
        for (int32_t s = 0; s < req->n_stop; s++) {
            if (!(job->stop[s] = strdup(req->stop[s]))) {
                oai_fail(e, 500, "server_error", NULL, NULL, "out of memory building the jobs");
                goto out;
            }
            job->n_stop = s + 1;
        }
    }
    ok = true;
out:
    if (g)
        grammar_unref(g);
    for (int32_t i = 0; i < n_trig; i++)
        free(trig[i]);
    free(trig);
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
