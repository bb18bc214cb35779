/*
 * openai.h: the OpenAI API's JSON <-> hearth's jobs and events.
 *
 * Three stages, each usable alone:
 *   1. oai_parse: body bytes -> a validated struct oai_request. Needs no
 *      model (the fuzz target runs it alone). Every field OpenAI defines and
 *      hearth honours is type- and range-checked; unknown fields are
 *      ignored; a known field with the wrong type is a 400 naming it.
 *   2. oai_make_jobs: request + model -> one sched_job per choice (chat
 *      template rendering, tokenization, context checks).
 *   3. struct oai_response: sched events -> the response body (chat.completion,
 *      text_completion) or its SSE chunks (chat.completion.chunk), in
 *      OpenAI's exact shapes, logprobs included.
 * Errors come out as struct oai_error and render to OpenAI's shape
 * {"error":{"message","type","param","code"}}.
 *
 * Rules where OpenAI leaves room (also in `hearth serve --help`):
 * - max_tokens (or max_completion_tokens, which wins) must be an integer
 *   >= 1 and <= the slot context (--ctx-size); above that is a 400. Within
 *   it, generation still ends when the slot's context is full
 *   (finish_reason "length"). Absent: until end of text or a full context.
 * - Sampling defaults are OpenAI's: temperature 1, top_p 1; hearth's
 *   extensions (top_k, min_p, repetition_penalty) are off unless given.
 * - n <= 16 and (prompts x n) <= OAI_MAX_CHOICES.
 * - Features hearth does not have (tools, echo, best_of > 1, suffix,
 *   logit_bias, response_format other than text, non-text content parts)
 *   are refused with a 400 rather than silently ignored.
 *
 * Thread-safety: no shared state; a response object belongs to one thread.
 */
#ifndef HEARTH_OPENAI_H
#define HEARTH_OPENAI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hearth.h"
#include "serve/sched.h"
#include "text/chat.h"

#define OAI_MAX_CHOICES 64  /* jobs one request may create */
#define OAI_MAX_N       16  /* n */
#define OAI_MAX_STOP    4   /* stop strings (OpenAI's limit; <= SCHED_MAX_STOP) */
#define OAI_MAX_TOP_LOGPROBS 20

enum oai_kind { OAI_CHAT, OAI_COMPLETION };

struct oai_error {
    int status;        /* HTTP status: 400, 401, 404, 405, 413, 500, 503 */
    const char *type;  /* "invalid_request_error", "server_error", ... (static) */
    const char *code;  /* "invalid_type", ... or NULL (JSON null); static */
    char param[64];    /* the offending field ("messages[1].content"), "" = null */
    char message[512]; /* one sentence */
};

/* Fills e (param may be NULL) and returns false, for `return oai_fail(...)`. */
#if defined(__GNUC__)
__attribute__((format(printf, 6, 7)))
#endif
bool oai_fail(struct oai_error *e, int status, const char *type, const char *code,
              const char *param, const char *fmt, ...);

/* The error's JSON body, malloc'd, NUL-terminated (NULL when out of memory). */
char *oai_error_json(const struct oai_error *e);

struct oai_message {
    char *role;    /* "system", "user" or "assistant" ("developer" is read as system) */
    char *content; /* text parts joined */
};

struct oai_request {
    enum oai_kind kind;
    char *model;                    /* as sent, or NULL */
    struct oai_message *messages;   /* [n_messages], chat only */
    int32_t n_messages;
    char **prompts;                 /* [n_prompts], completions only */
    int32_t n_prompts;
    int32_t max_tokens;             /* -1: until end of text or a full context */
    struct hearth_sampler_params sampling;
    bool has_seed;                  /* false: each choice gets a fresh random seed */
    float presence_penalty;         /* -2..2 */
    float frequency_penalty;        /* -2..2 */
    char *stop[OAI_MAX_STOP];       /* non-empty strings */
    int32_t n_stop;
    int32_t top_logprobs;           /* -1: no logprobs; 0..20 */
    int32_t n;                      /* choices per prompt, 1..OAI_MAX_N */
    bool stream;
    bool include_usage;             /* stream_options.include_usage */
    bool ignore_eos;                /* extension: keep generating past end-of-text */
};

/*
 * Parses and validates a request body of len bytes for the endpoint kind.
 * n_ctx is the slot context (max_tokens above it is refused; <= 0: no
 * check). On success fills *req (free with oai_request_free) and returns
 * true; otherwise fills *e (status 400) and leaves *req empty.
 */
bool oai_parse(enum oai_kind kind, const char *body, size_t len, int32_t n_ctx,
               struct oai_request *req, struct oai_error *e);
void oai_request_free(struct oai_request *req);

/*
 * The chat prompt text of req (chat only) in family fam, with the generation
 * prompt; bos/eos are the vocabulary's token texts ("" when none). *text is
 * malloc'd. False with *e (400) when the template refuses the conversation.
 */
bool oai_chat_text(const struct oai_request *req, enum chat_family fam, const char *bos,
                   const char *eos, char **text, struct oai_error *e);

/*
 * Builds the jobs of req: one per choice, choice i = prompt (i / n), copy
 * (i % n). Tokenizes with the model's vocabulary (BOS as the vocab says,
 * special-token text parsed); refuses (400, both numbers in the message) a
 * prompt that leaves no room to generate in a slot of n_ctx tokens. Job ids
 * are *next_job_id, *next_job_id + 1, ... On success *jobs is a malloc'd
 * array of *n_jobs malloc'd jobs (the caller submits or frees them).
 */
bool oai_make_jobs(const struct oai_request *req, const struct hearth_model *model,
                   enum chat_family fam, int32_t n_ctx, uint64_t request_id,
                   uint64_t *next_job_id, struct sched_job ***jobs, int32_t *n_jobs,
                   struct oai_error *e);

/* The family of the model's tokenizer.chat_template (ChatML when none); *recognised as chat_detect. */
enum chat_family oai_model_chat_family(const struct hearth_model *model, bool *recognised);

/* ------------------------------------------------------------ responses --- */

struct oai_response;

/*
 * A response being built for req (which may be freed afterwards) with
 * n_choices choices. id is the response id ("chatcmpl-..."), model_name the
 * name reported back. model (may be NULL) gives token texts for logprobs.
 */
struct oai_response *oai_response_new(const struct oai_request *req, int32_t n_choices,
                                      const char *id, int64_t created, const char *model_name,
                                      const struct hearth_model *model);
void oai_response_free(struct oai_response *r);

/*
 * Each call below returns the bytes to send now, malloc'd, NUL-terminated,
 * their count in *len; NULL with *len 0 when there is nothing to send (or
 * out of memory). Only a streaming response ever returns bytes before
 * oai_response_finish.
 */

/* Streaming chat: the first chunk of each choice (delta.role). */
char *oai_response_start(struct oai_response *r, size_t *len);
/* A SCHED_EV_TEXT event. */
char *oai_response_text(struct oai_response *r, const struct sched_event *ev, size_t *len);
/* A SCHED_EV_DONE or SCHED_EV_ERROR event (the choice's last). */
char *oai_response_done(struct oai_response *r, const struct sched_event *ev, size_t *len);
/*
 * After every choice is done: the whole body (non-streaming; *status 200,
 * or 500 with an error body when a choice failed), or the stream's tail
 * (the usage chunk when asked for, then "data: [DONE]").
 */
char *oai_response_finish(struct oai_response *r, int *status, size_t *len);

#endif
