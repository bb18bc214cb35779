/*
 * openai.h: the OpenAI API's JSON <-> hearth's jobs and events.
 *
 * Three stages, each in its own file and usable alone:
 *   1. oai_parse (oai_request.c): body bytes -> a validated struct
 *      oai_request. Needs no model (the fuzz target runs it alone). Runs on
 *      the event loop, so it does no template rendering and no tokenizing.
 *   2. oai_prompt + oai_make_jobs (oai_jobs.c): request + chat template +
 *      model -> the prompt text, then one sched_job per choice (tokenizing,
 *      context checks). Runs on the preparation thread.
 *   3. struct oai_response (oai_response.c): sched events -> the response
 *      body (chat.completion, text_completion) or its SSE chunks
 *      (chat.completion.chunk), in OpenAI's exact shapes, logprobs, tool
 *      calls and reasoning included.
 * Errors come out as struct oai_error and render through oai_error_json
 * (net/errbody.h), the one builder of OpenAI's {"error":{...}} body.
 *
 * Rules where OpenAI leaves room (also in `hearth serve --help`):
 * - max_tokens, max_completion_tokens (which wins) and n_predict (llama.cpp's
 *   name; -1 = no limit) above the room a slot has after the prompt are
 *   clamped to that room: clients send 32000 whatever the model.
 * - Sampling defaults are OpenAI's: temperature 1, top_p 1; hearth's
 *   extensions (top_k, min_p, repetition_penalty or repeat_penalty) are off
 *   unless given.
 * - n <= 16 and (prompts x n) <= OAI_MAX_CHOICES.
 * - Constrained output (oai_grammar.c): response_format json_object and
 *   json_schema (strict or not: the reply always matches), llama.cpp's
 *   json_schema and grammar (GBNF), at most one per request; tool_choice
 *   "required" or a named function makes the reply tool calls in the
 *   template's syntax, their arguments valid against the parameters
 *   (formats hermes, qwen3-coder, llama3, mistral, deepseek-r1 and
 *   deepseek-v3.1; others are refused), and "auto" keeps a call valid once
 *   its marker appears (all of them but llama3).
 * - The field policy (docs/api.md lists every field): a field that does
 *   not change what is generated (metadata, storage and caching hints,
 *   client bookkeeping) is accepted and ignored; one that changes it is
 *   honoured, or refused with a 400 naming it where ignoring it would give
 *   a wrong answer (echo, best_of > 1, suffix, audio output, non-text
 *   content). A field hearth does not know is accepted and noted in
 *   req->ignored, which the server logs once per name and counts
 *   (`--strict-fields` refuses it instead, as OpenAI does).
 *
 * Thread-safety: no shared state; a request or response object belongs to
 * one thread at a time.
 */
#ifndef HEARTH_OPENAI_H
#define HEARTH_OPENAI_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hearth.h"
#include "net/errbody.h" /* struct oai_error, oai_fail */
#include "sched/sched.h"
#include "chat/chatparse.h" /* enum chatparse_tools */

struct cJSON;
struct chat_template;
struct grammar;
struct grammar_cache;

#define OAI_MAX_CHOICES      64 /* jobs one request may create */
#define OAI_MAX_N            16 /* n */
#define OAI_MAX_STOP         4  /* stop strings (OpenAI's limit; <= SCHED_MAX_STOP) */
#define OAI_MAX_TOP_LOGPROBS 20

/* OAI_TEMPLATE: /apply-template's body, a chat request that is only rendered. */
enum oai_kind { OAI_CHAT, OAI_COMPLETION, OAI_TEMPLATE };

enum oai_reasoning { OAI_REASONING_AUTO, OAI_REASONING_NONE };

#define OAI_MAX_IGNORED 16 /* ignored fields noted per request; the rest only counted */
#define OAI_IGNORED_LEN 64 /* bytes of a noted field's path, NUL included */

/* A field accepted without effect on the reply: a path as the dialect writes it ("metadata",
 * "tools.3.cache_control"), cut to fit and with bytes outside [A-Za-z0-9_.:/-] as '?', so
 * it is safe in a log line and a metric label. */
struct oai_ignored {
    char path[OAI_IGNORED_LEN];
    bool unknown; /* a field the dialect does not define (or hearth does not know): refused
                   * under --strict-fields; else a known field that does nothing here */
};

/* logit_bias: added to the token's logit before sampling; -100 or less bans it. */
struct oai_bias {
    hearth_token token; /* >= 0; checked against the vocabulary when jobs are made */
    float bias;         /* -100..100 */
};

enum oai_tool_choice {
    OAI_TOOL_AUTO, /* calls parsed when the model makes them (a lazy grammar keeps them valid) */
    OAI_TOOL_NONE, /* tools shown, calls not parsed */
    OAI_TOOL_REQUIRED, /* the reply is one or more calls (parallel_tool_calls) of offered tools */
    OAI_TOOL_NAMED,    /* the reply is a call of tool_name */
};

struct oai_request {
    enum oai_kind kind;
    char *model; /* as sent, or NULL */
    /* chat: the messages as the template sees them (a validated copy: roles
     * checked, tool-call arguments parsed from their JSON strings) */
    struct cJSON *messages;
    struct cJSON *tools;           /* array of tools offered, or NULL */
    struct cJSON *template_kwargs; /* chat_template_kwargs (+ reasoning_effort), or NULL */
    enum oai_tool_choice tool_choice;
    char *tool_name; /* OAI_TOOL_NAMED: an offered function's name */
    /* constrained output (at most one of the two): llama.cpp's GBNF `grammar`, or a JSON
     * schema (response_format json_schema, llama.cpp's json_schema; json_object gives
     * {"type": "object"}) */
    char *grammar;
    struct cJSON *schema;
    const char *schema_field;     /* the field the schema came in (static), for errors */
    bool parallel_tool_calls;     /* default true */
    enum oai_reasoning reasoning; /* reasoning_format */
    char **prompts;               /* [n_prompts], completions only */
    int32_t n_prompts;
    int32_t max_tokens; /* -1: until end of text or a full context */
    struct hearth_sampler_params sampling;
    bool has_seed;            /* false: each choice gets a fresh random seed */
    float presence_penalty;   /* -2..2 */
    float frequency_penalty;  /* -2..2 */
    char *stop[OAI_MAX_STOP]; /* non-empty strings */
    int32_t n_stop;
    int32_t top_logprobs; /* -1: no logprobs; 0..20 */
    int32_t n;            /* choices per prompt, 1..OAI_MAX_N */
    bool stream;
    bool include_usage;    /* stream_options.include_usage */
    bool ignore_eos;       /* extension: keep generating past end-of-text */
    struct cJSON *echo;    /* another API's request fields its reply echoes, or NULL */
    struct oai_bias *bias; /* [n_bias] logit_bias, malloc'd, or NULL */
    int32_t n_bias;
    bool no_cache;          /* cache_prompt false: the prompt is computed afresh */
    bool timings_per_token; /* llama-server's: each stream chunk carries "timings" */
    struct oai_ignored ignored[OAI_MAX_IGNORED]; /* fields accepted and ignored, in body order */
    int32_t n_ignored;                           /* noted in ignored[], <= OAI_MAX_IGNORED */
    int32_t n_ignored_more;                      /* ignored beyond those (counted, not named) */
    /* set by the server, not parsed: nonzero once nobody wants the reply (the client hung
     * up, the server is stopping); oai_make_jobs stops between its stages when it is, and
     * grammar compiles may read it as they run. The flag lives in the request's preparation
     * task (prep.h, struct prep_task.cancel). NULL: never cancelled. */
    const atomic_int *cancel;
};

/*
 * Notes that req ignores the field at path (unknown: the dialect does not
 * define it). Every parser calls it for what it accepts without effect;
 * the server logs and counts the notes, and refuses unknown ones under
 * --strict-fields. Pure; never fails.
 */
void oai_ignore(struct oai_request *req, const char *path, bool unknown);

/*
 * Parses and validates a request body of len bytes for the endpoint kind.
 * On success fills *req (free with oai_request_free) and returns true;
 * otherwise fills *e (status 400) and leaves *req empty.
 */
bool oai_parse(enum oai_kind kind, const char *body, size_t len, struct oai_request *req,
               struct oai_error *e);
void oai_request_free(struct oai_request *req);

/*
 * The chat prompt of req (chat or template kind) rendered by tmpl, with the
 * generation prompt; *text is malloc'd. BOS is left out when the model's
 * tokenizer adds one itself (llama.cpp's server does the same). False with
 * *e (400 with the template's message) when the template refuses the
 * conversation. Thread-safe.
 */
struct turns;

bool oai_prompt(const struct oai_request *req, const struct chat_template *tmpl,
                const struct hearth_model *model, char **text, struct oai_error *e);

/*
 * Builds the jobs of req: one per choice, choice i = prompt (i / n), copy
 * (i % n). Chat prompts are rendered by tmpl. Tokenizes with the model's
 * vocabulary (BOS as the vocab says, special-token text parsed); refuses
 * (400, both numbers in the message) a prompt that leaves no room to
 * generate in a slot of n_ctx tokens, and clamps max_tokens to that room.
 * Job ids are *next_job_id, ... (the counter is the caller's; this call
 * only reads and advances it). On success *jobs is a malloc'd array of
 * *n_jobs malloc'd jobs (the caller submits or frees them), and
 * *thinking (may be NULL) says whether the chat prompt ends inside an open
 * reasoning block. With turns (may be NULL), a prompt that resends a
 * finished job's reply goes on from the reply's own tokens (turns.h).
 * Once req->cancel is set it stops at the next stage (template, tokens,
 * grammar) with a 499 in *e (nobody reads it: the client is gone).
 * Thread-safe apart from *next_job_id.
 */
bool oai_make_jobs(const struct oai_request *req, const struct chat_template *tmpl,
                   const struct hearth_model *model, struct grammar_cache *gc, struct turns *turns,
                   int32_t n_ctx, uint64_t request_id, uint64_t *next_job_id,
                   struct sched_job ***jobs, int32_t *n_jobs, bool *thinking, struct oai_error *e);

/*
 * The grammar req's reply must match (oai_grammar.c), compiled through gc,
 * given the rendered prompt (prompt_len bytes; where the reply starts with
 * respect to reasoning depends on it). *g NULL: the reply is free. With
 * *n_triggers > 0 the grammar is lazy from those strings (*triggers
 * malloc'd, each string malloc'd). False with *e: a 400 for a schema,
 * grammar or tool_choice that cannot be constrained, naming why.
 */
bool oai_grammar(const struct oai_request *req, const struct chat_template *tmpl,
                 struct grammar_cache *gc, const char *prompt, size_t prompt_len,
                 struct grammar **g, char ***triggers, int32_t *n_triggers, struct oai_error *e);

/*
 * Whether oai_grammar holds req's tool calls in format fmt to their syntax and schema: a
 * forced call in any format it can constrain, and an "auto" call from its opening marker in
 * those with one (hermes, qwen3-coder, mistral, deepseek), unless a schema or grammar shapes
 * the reply instead. Such calls cannot turn out malformed, so their arguments can stream as
 * they are generated (chatparse_opts.stream_args). Pure.
 */
bool oai_grammar_holds_calls(const struct oai_request *req, enum chatparse_tools fmt);

/* ------------------------------------------------------------ responses --- */

/*
 * n bytes of generated text as a JSON string: a token's text may be a lone
 * byte of a UTF-8 character, and JSON text must be valid UTF-8, so invalid
 * bytes become U+FFFD (as Python's bytes.decode(errors="replace") writes).
 */
struct cJSON *oai_text_json(const char *s, size_t n);

struct oai_response;

/*
 * A response being built for req (which may be freed afterwards) with
 * n_choices choices. id is the response id ("chatcmpl-..."), model_name the
 * name reported back. model (may be NULL) gives token texts for logprobs.
 * tmpl (may be NULL) gives the tool-call and reasoning formats a chat
 * response is split by; thinking: the prompt ends inside a reasoning block.
 */
struct oai_response *oai_response_new(const struct oai_request *req, int32_t n_choices,
                                      const char *id, int64_t created, const char *model_name,
                                      const struct hearth_model *model,
                                      const struct chat_template *tmpl, bool thinking);
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
