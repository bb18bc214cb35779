/*
 * anthropic.h: Anthropic's Messages API (POST /v1/messages and
 * /v1/messages/count_tokens) as a translation onto the chat path.
 *
 * Two stages, beside openai.h's:
 *   1. anth_parse (anth_request.c): a Messages body -> a validated struct
 *      oai_request: system and content blocks become OpenAI chat messages
 *      (text blocks as text parts, tool_use as an assistant's tool_calls,
 *      tool_result as role "tool" messages, thinking as reasoning_content),
 *      tools become function tools. Runs on the event loop; needs no model.
 *      The jobs are then built by oai_make_jobs like a chat completion's.
 *   2. anth_reply_ops (anth_response.c): sched events -> a "message" body,
 *      or its SSE events (message_start, content_block_start/delta/stop,
 *      message_delta, message_stop), content split into thinking, text and
 *      tool_use blocks by chatparse as the chat path splits it.
 * Errors render in Anthropic's shape, {"type":"error","error":{"type",
 * "message"}}, the error type following the HTTP status (anth_error_json).
 *
 * Rules where Anthropic's API and hearth differ (docs/api.md):
 * - max_tokens is required, as Anthropic requires it; past the room a slot
 *   has after the prompt it is clamped to that room, and a reply cut by the
 *   full context ends with stop_reason "model_context_window_exceeded".
 * - thinking {type: "enabled"} and {type: "disabled"} set the template's
 *   enable_thinking; "adaptive" or no thinking leaves the template's own
 *   default. budget_tokens is checked as Anthropic checks it (>= 1024, below
 *   max_tokens) and taken as a hint, as Anthropic's models take it: only
 *   max_tokens bounds the reply, thinking included.
 * - Thinking blocks come back with signature "" (hearth signs nothing);
 *   thinking blocks sent back are read whatever their signature.
 * - cache_control is accepted anywhere Anthropic takes it and ignored:
 *   hearth caches every prompt's prefix by itself. usage reports the tokens
 *   the prefix cache gave as cache_read_input_tokens; input_tokens is the
 *   rest, so input_tokens + cache_read_input_tokens is what count_tokens
 *   answers for the same request.
 * - tool_result's is_error is shown to the model as an "Error: " prefix on
 *   the result's text (OpenAI's tool messages have no such flag).
 * - Refused with a 400: image, document and other non-text blocks,
 *   redacted_thinking, server and Anthropic-defined tools, a conversation
 *   ending in an assistant turn (a prefill: the template cannot continue a
 *   turn), more stop_sequences than OAI_MAX_STOP, service_tier and every
 *   field Anthropic defines that hearth cannot honour or does not know.
 * - tool_choice "any" and "tool" are the chat path's forced calls
 *   (OAI_TOOL_REQUIRED, OAI_TOOL_NAMED), held to the tool's input_schema
 *   by the grammar oai_grammar.c builds.
 *
 * Thread-safety: no shared state; a request or reply belongs to one thread
 * at a time.
 */
#ifndef HEARTH_ANTHROPIC_H
#define HEARTH_ANTHROPIC_H

#include <stdbool.h>
#include <stddef.h>

#include "serve/openai.h"
#include "serve/reply.h"

/* Which body anth_parse reads: a generation, or count_tokens (no max_tokens, no sampling). */
enum anth_kind { ANTH_MESSAGES, ANTH_COUNT_TOKENS };

/*
 * Parses and translates a body of len bytes. On success fills *req (kind
 * OAI_CHAT, or OAI_TEMPLATE for count_tokens; free with oai_request_free)
 * and returns true; otherwise fills *e (400, the message naming the field
 * as Anthropic does: "messages.1.content.0.type: ...") and leaves *req empty.
 */
bool anth_parse(enum anth_kind kind, const char *body, size_t len, struct oai_request *req,
                struct oai_error *e);

/* serve_parse_fn for POST /v1/messages. */
bool anth_parse_messages(const char *body, size_t len, struct oai_request *req,
                         struct oai_error *e);

/* Anthropic's error type for an HTTP status ("invalid_request_error", "overloaded_error"...). */
const char *anth_error_type(int status);
/* e as Anthropic's error body, malloc'd, NUL-terminated (NULL when out of memory). */
char *anth_error_json(const struct oai_error *e);
/* The same as a stream's last event ("event: error\ndata: {...}\n\n"), malloc'd, *len bytes. */
char *anth_error_sse(const struct oai_error *e, size_t *len);

/* Anthropic's message / its SSE events (anth_response.c); one choice per request. */
extern const struct reply_ops anth_reply_ops;

#endif
