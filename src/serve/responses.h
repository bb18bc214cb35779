/*
 * responses.h: OpenAI's Responses API (POST /v1/responses), stateless,
 * translated onto the chat path.
 *
 * Two stages, as for the chat API (openai.h):
 *   1. resp_parse (resp_request.c): a Responses body -> a chat struct
 *      oai_request. Input items become chat messages (instructions first as
 *      a system message; a model turn's reasoning, message and function_call
 *      items one assistant message with reasoning_content and tool_calls;
 *      function_call_output items tool messages); flat function tools become
 *      chat tools. The chat request is then validated by oai_parse itself,
 *      so both APIs accept and render exactly the same conversations. The
 *      fields the reply echoes back (instructions, tools, text, ...) ride in
 *      req->echo.
 *   2. resp_reply_ops (resp_response.c): sched events -> the "response"
 *      object, or its SSE events (event: + data: with sequence_number),
 *      output items split from the generated text by chatparse as the chat
 *      reply does.
 *
 * Rules where the API leaves room:
 * - Stateless: nothing is stored. previous_response_id, conversation,
 *   background and prompt are refused; `store` is accepted either way (the
 *   API defaults it to true and clients send it) and echoed as false.
 * - Only function tools; built-in tools (web_search, file_search, ...) are
 *   refused by type. text.format json_schema / json_object map onto the
 *   request's schema; tool_choice "required" and a named function onto the
 *   chat path's forced calls (oai_grammar.c).
 * - Reasoning is returned as a reasoning item's content (reasoning_text);
 *   its summary is always empty (reasoning.summary is accepted, nothing
 *   summarises). Reasoning items sent back in input become the next
 *   assistant turn's reasoning_content (the template decides what it shows).
 * - usage.output_tokens_details.reasoning_tokens is 0: tokens are not
 *   attributed to reasoning.
 * Unknown fields, and known ones asking for what hearth does not do, are
 * refused with a 400 in OpenAI's error shape.
 *
 * Thread-safety: none needed; a request or reply belongs to one thread.
 */
#ifndef HEARTH_RESPONSES_H
#define HEARTH_RESPONSES_H

#include <stdbool.h>
#include <stddef.h>

#include "serve/openai.h"
#include "serve/reply.h"

/*
 * Parses and validates a Responses body of len bytes onto *req (a chat
 * request; free with oai_request_free). True on success; false with *e
 * (400, param named as the Responses API names it) and *req empty.
 */
bool resp_parse(const char *body, size_t len, struct oai_request *req, struct oai_error *e);

/*
 * text.format (an object, as sent) -> the JSON schema the output must
 * follow: NULL for {"type": "text"}, {"type": "object"} for json_object, the
 * given schema for json_schema. *schema is the caller's to delete. False
 * with *e on a malformed format.
 */
bool resp_text_format(const struct cJSON *format, struct cJSON **schema, struct oai_error *e);

/* The Responses reply (resp_response.c). */
extern const struct reply_ops resp_reply_ops;

#endif
