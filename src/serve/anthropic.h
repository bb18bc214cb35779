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
 * "message"}}, the error type following the HTTP status (anth_error_json,
 * net/errbody.h).
 *
 * Rules where Anthropic's API and hearth differ (docs/api.md):
 * - max_tokens is required, as Anthropic requires it; past the room a slot
 *   has after the prompt it is clamped to that room, and a reply cut by the
 *   full context ends with stop_reason "model_context_window_exceeded".
 * - thinking {type: "enabled"} and {type: "adaptive"} turn the template's
 *   enable_thinking on, {type: "disabled"} off. budget_tokens is checked as
 *   Anthropic checks it (>= 1024, below max_tokens) and taken as a hint, as
 *   Anthropic's models take it: only max_tokens bounds the reply, thinking
 *   included. output_config.effort is the template's reasoning_effort.
 *   thinking.display "omitted" returns thinking blocks empty (the flag
 *   reaches anth_response.c as req->echo's omit_thinking).
 * - output_config.format (or output_format) json_schema: the reply is held
 *   to the schema by grammar, as response_format json_schema is.
 * - tools[].strict: kept on the function, as OpenAI's strict functions
 *   carry it. Calls are held to input_schema by grammar (oai_grammar.c)
 *   strict or not; a strict tool whose calls hearth cannot hold (the
 *   template's call format, or the schema) is a 400 when the jobs are made.
 * - context_management's edits are made to the conversation before it is
 *   rendered (anth_context.c).
 * - Thinking blocks come back with signature "" (hearth signs nothing);
 *   thinking blocks sent back are read whatever their signature;
 *   redacted_thinking blocks are dropped.
 * - System messages inside messages stay system messages where they are
 *   (oai_prompt merges them into the first for a template that refuses).
 *   A system text opening with Claude Code's "x-anthropic-billing-header:"
 *   has its per-request cch= stamp blanked, so the prefix cache holds.
 * - cache_control is accepted anywhere Anthropic takes it and ignored:
 *   hearth caches every prompt's prefix by itself. usage reports the tokens
 *   the prefix cache gave as cache_read_input_tokens; input_tokens is the
 *   rest, so input_tokens + cache_read_input_tokens is what count_tokens
 *   answers for the same request.
 * - Fields without effect on the reply (metadata, cache_control,
 *   service_tier, container, betas, mcp_servers: [], tool loading hints...)
 *   and fields hearth does not know, at any level, are accepted and noted
 *   in req->ignored (anth_note), unknown ones marked.
 * - tool_result's is_error is shown to the model as an "Error: " prefix on
 *   the result's text (OpenAI's tool messages have no such flag).
 * - document blocks of plain text are text the model reads.
 * - Tools with defer_loading are offered once the conversation loads them
 *   (tool_reference, tool_addition, a call); system messages' tool_addition
 *   and tool_removal blocks add and withdraw tools (anth_request.c).
 * - Refused with a 400: images, PDFs and other non-text blocks, server
 *   and Anthropic-defined tools, MCP servers, a conversation ending in an
 *   assistant turn (a prefill: the template cannot continue a turn), more
 *   stop_sequences than OAI_MAX_STOP, and malformed values of the fields
 *   hearth reads.
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

#include "net/errbody.h" /* anth_error_json, anth_error_sse */
#include "serve/openai.h"
#include "serve/reply.h"

struct cJSON;

/* Which body anth_parse reads: a generation, or count_tokens (no max_tokens, no sampling). */
enum anth_kind { ANTH_MESSAGES, ANTH_COUNT_TOKENS };

/*
 * Parses and translates a body of len bytes. On success fills *req (kind
 * OAI_CHAT, or OAI_TEMPLATE for count_tokens; free with oai_request_free)
 * and returns true; otherwise fills *e (400, the message naming the field
 * as Anthropic does: "messages.1.content.0.type: ...") and leaves *req empty.
 * count_tokens takes a generation's body whole: the generation fields are
 * noted as unknown to it, as Anthropic's count_tokens does not take them.
 */
bool anth_parse(enum anth_kind kind, const char *body, size_t len, struct oai_request *req,
                struct oai_error *e);

/* serve_parse_fn for POST /v1/messages. */
bool anth_parse_messages(const char *body, size_t len, struct oai_request *req,
                         struct oai_error *e);

/*
 * Applies context_management's edits (anth_context.c) to req->messages, a
 * conversation already translated. False with *e (400) for a malformed
 * edit; unknown edits and fields are noted, not refused.
 */
bool anth_context_edits(const struct cJSON *cm, struct oai_request *req, struct oai_error *e);

/*
 * Notes in req that the field at path is accepted without effect (unknown:
 * Anthropic does not define it), through oai_ignore: array indices are left
 * out of the name ("messages.3.content.0.cache_control" is noted as
 * "messages.content.cache_control"), so a field is one name however often
 * it comes, and each name is noted once.
 */
void anth_note(struct oai_request *req, const char *path, bool unknown);
/* anth_note for every member of obj (at path) not named in known (NULL-terminated) and not
 * null, as unknown. */
void anth_note_others(struct oai_request *req, const struct cJSON *obj, const char *path,
                      const char *const *known);

/* Anthropic's message / its SSE events (anth_response.c); one choice per request. */
extern const struct reply_ops anth_reply_ops;

#endif
