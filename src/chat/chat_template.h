/*
 * chat_template.h: a conversation (OpenAI messages, tools, template
 * kwargs) -> the prompt text a chat model was trained on.
 *
 * One object answers "which template, and how does it render": the model's
 * own Jinja template (tokenizer.chat_template) run by the interpreter in
 * jinja.h with Hugging Face's semantics, a Jinja file the user gives, or one
 * of the hand-written families of chat.h (--chat-template NAME, and the
 * fallback for a file without a template). Created once at load; rendering
 * is read-only and thread-safe.
 *
 * What a template sees (Hugging Face's apply_chat_template): messages,
 * tools (absent when none are offered), bos_token, eos_token,
 * add_generation_prompt, and every template kwarg as a variable. A message
 * whose content is an array of text parts reaches a template that iterates
 * typed content as that array, and any other template as the texts joined
 * by newlines (llama.cpp server's rule).
 */
#ifndef HEARTH_CHAT_TEMPLATE_H
#define HEARTH_CHAT_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hearth.h"

struct cJSON;
struct chat_template;
struct chatparse_format;

/*
 * The template a model's server or chat uses: file_src (a Jinja text the
 * user gave, file_name names it in messages) first, then the built-in
 * family builtin ("chatml", "llama3", ...), then the model's own
 * tokenizer.chat_template, then the family its template is recognised as
 * (ChatML when none). NULLs skip a step. HEARTH_EINVAL with the
 * interpreter's message when a Jinja text does not compile, or for an
 * unknown family name.
 */
enum hearth_status chat_template_new(const struct hearth_model *model, const char *file_src,
                                     const char *file_name, const char *builtin,
                                     struct chat_template **out, char *err, size_t err_len);
void chat_template_free(struct chat_template *t);

/*
 * Defaults for template kwargs (--chat-template-kwargs): an object, copied;
 * a request's chat_template_kwargs add to and override them.
 */
enum hearth_status chat_template_set_kwargs(struct chat_template *t, const struct cJSON *kwargs,
                                            char *err, size_t err_len);
/* Fixes strftime_now's clock at unix time now (tests); < 0: the real clock. */
void chat_template_set_now(struct chat_template *t, int64_t now);

/* What is in use, for logs and /props: "tokenizer.chat_template (Jinja)", "chatml (built-in)". */
const char *chat_template_describe(const struct chat_template *t);
/* The Jinja source, NUL-terminated, or NULL for a built-in family. */
const char *chat_template_source(const struct chat_template *t);
/* The tool-call syntax and reasoning markers its source shows (chatparse_detect, run once). */
const struct chatparse_format *chat_template_format(const struct chat_template *t);
/* The vocabulary's BOS and EOS texts the template sees ("" when none). */
const char *chat_template_bos(const struct chat_template *t);
const char *chat_template_eos(const struct chat_template *t);

/*
 * Renders messages (a JSON array of OpenAI messages, tool-call arguments
 * already objects), tools (array or NULL) and kwargs (object or NULL, over
 * the defaults). *out is malloc'd, NUL-terminated, *out_len bytes (may be
 * NULL). HEARTH_EINVAL with the template's own message when it refuses the
 * conversation (raise_exception, an undefined value used); HEARTH_ERANGE
 * when it passes the interpreter's limits; HEARTH_ENOMEM.
 */
enum hearth_status chat_template_render(const struct chat_template *t, const struct cJSON *messages,
                                        const struct cJSON *tools, const struct cJSON *kwargs,
                                        bool add_generation_prompt, char **out, size_t *out_len,
                                        char *err, size_t err_len);

#endif
