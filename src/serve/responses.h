/*
 * responses.h: OpenAI's Responses API (POST /v1/responses), stateless,
 * translated onto the chat path.
 *
 * Two stages, as for the chat API (openai.h):
 *   1. resp_parse (resp_request.c): a Responses body -> a chat struct
 *      oai_request. Input items become chat messages (instructions first as
 *      a system message; a model turn's reasoning, message, function_call
 *      and custom_tool_call items one assistant message with
 *      reasoning_content and tool_calls; function_call_output and
 *      custom_tool_call_output items tool messages); tools become chat
 *      tools. The chat request is then validated by oai_parse itself,
 *      so both APIs accept and render exactly the same conversations. The
 *      fields the reply echoes back (instructions, tools, text, ...) ride in
 *      req->echo.
 *   2. resp_reply_ops (resp_response.c): sched events -> the "response"
 *      object, or its SSE events (event: + data: with sequence_number),
 *      output items split from the generated text by chatparse as the chat
 *      reply does.
 *
 * Rules where the API leaves room (docs/api.md lists every field):
 * - Stateless: nothing is stored. previous_response_id, conversation,
 *   prompt and background true are refused; `store` is accepted either way
 *   and echoed as false.
 * - The field policy (openai.h): fields that do not change what is
 *   generated (store, metadata, client_metadata, prompt_cache_key,
 *   safety_identifier, service_tier, user, background false, truncation,
 *   text.verbosity, reasoning.summary, stream_options, include values
 *   other than reasoning.encrypted_content and output_text logprobs) are accepted
 *   and noted in req->ignored; fields, tool types and item types the API
 *   does not define are accepted and noted as unknown, at every level.
 * - Tools: function tools as they are; a namespace's tools flattened under
 *   "<namespace>__<name>" (resp_tool_flat_name) and returned with their
 *   namespace; custom tools offered as a function of one string "input",
 *   held to the format's Lark grammar or regex (as its JSON schema
 *   pattern; a grammar lark.c cannot convert leaves the input free, noted)
 *   and returned as custom_tool_call items. Hosted tools (web_search,
 *   file_search, code_interpreter, image_generation, local_shell, mcp, ...)
 *   are skipped and noted, as llama-server skips them; so are the items of
 *   their calls sent back in input. text.format json_schema / json_object
 *   map onto the request's schema; tool_choice "required" and a named
 *   function or custom tool onto the chat path's forced calls;
 *   allowed_tools narrows the tools offered to its list.
 * - max_tool_calls caps the calls the reply keeps (1 also makes a forced
 *   call a single one). top_logprobs > 0 or include
 *   message.output_text.logprobs: output_text carries each token's logprob
 *   (a token counts for the first message text it brings; reasoning and
 *   call text carry none).
 * - Reasoning is returned as a reasoning item's content (reasoning_text);
 *   its summary is always empty (reasoning.summary is accepted, nothing
 *   summarises). With include reasoning.encrypted_content the item also
 *   carries encrypted_content, the text sealed (resp_seal_reasoning).
 *   Reasoning items sent back in input become the next assistant turn's
 *   reasoning_content: their reasoning_text, else their sealed text (the
 *   template decides what it shows). reasoning.effort is the chat path's
 *   reasoning_effort.
 * - usage.output_tokens_details.reasoning_tokens is 0: tokens are not
 *   attributed to reasoning.
 * Malformed values are refused with a 400 in OpenAI's error shape, named
 * as the Responses API names them.
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

/*
 * A reasoning text as an encrypted_content string: "hearth.r1:" and its
 * base64 (opaque to clients, not secret: hearth keeps nothing between
 * requests). malloc'd; NULL when out of memory.
 */
char *resp_seal_reasoning(const char *text, size_t len);
/* The text in a string resp_seal_reasoning made (malloc'd), or NULL for any other string. */
char *resp_open_reasoning(const char *sealed);

/*
 * The name the model sees for tool name of namespace ns (NULL: none):
 * name alone, or ns and name joined by "__" (directly when ns ends in '_',
 * as "mcp__server__"). Returns name or buf (size bytes).
 */
const char *resp_tool_flat_name(const char *ns, const char *name, char *buf, size_t size);
/*
 * The function or custom tool of a request's tools (its Responses form, as
 * echoed) that the model knows as flat: its namespace (NULL at top level),
 * own name and whether it is custom, pointing into tools. False when none.
 */
bool resp_tool_find(const struct cJSON *tools, const char *flat, const char **ns, const char **name,
                    bool *custom);

/* The echo's private member (never in the response object): include asked for
 * reasoning.encrypted_content. Members whose names start with '_' are private. */
#define RESP_ECHO_SEAL "_seal_reasoning"

/* The Responses reply (resp_response.c). */
extern const struct reply_ops resp_reply_ops;

#endif
