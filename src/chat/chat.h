/*
 * chat.h: chat templates, messages -> the prompt text a chat model was
 * trained on.
 *
 * No Jinja engine: the template text a GGUF file carries
 * (tokenizer.chat_template) is only read to recognise its family, the way
 * llama.cpp's llm_chat_detect_template does, and each family is rendered by
 * hand-written code whose output is byte for byte what the family's
 * reference Jinja template produces (tests/unit/test_chat.c quotes them).
 * A model with no template, or one not recognised, gets ChatML.
 *
 * Where a reference template raises (roles that do not alternate, a system
 * message the family has no place for), chat_render either fails with
 * HEARTH_EINVAL and the template's own message, or, for a system message in
 * Mistral and Gemma, does what the family's later templates do: the system
 * text goes before the first user message, separated by a blank line.
 *
 * Pure functions, no allocation but the output; thread-safe.
 */
#ifndef HEARTH_CHAT_H
#define HEARTH_CHAT_H

#include <stdbool.h>
#include <stddef.h>

#include "hearth.h"

/* clang-format off */
#define CHAT_FAMILY_LIST(X)                                                                    \
    X(CHAT_CHATML,  "chatml")  /* <|im_start|>role\n...<|im_end|>\n (Qwen, Yi, many fine-tunes) */ \
    X(CHAT_LLAMA2,  "llama2")  /* <s>[INST] <<SYS>>\n...\n<</SYS>>\n\n... [/INST] (Llama 2 chat) */ \
    X(CHAT_LLAMA3,  "llama3")  /* <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|> */    \
    X(CHAT_MISTRAL, "mistral") /* <s>[INST] ... [/INST]...</s> (Mistral/Mixtral Instruct v0.1-v0.2) */ \
    X(CHAT_GEMMA,   "gemma")   /* <start_of_turn>user\n...<end_of_turn>\n (Gemma, Gemma 2/3) */   \
    X(CHAT_PHI3,    "phi3")    /* <|user|>\n...<|end|>\n<|assistant|>\n (Phi-3) */
/* clang-format on */

enum chat_family {
#define CHAT_X_ENUM(name, text) name,
    CHAT_FAMILY_LIST(CHAT_X_ENUM)
#undef CHAT_X_ENUM
        CHAT_FAMILY_COUNT
};

struct chat_msg {
    const char *role;    /* "system", "user" or "assistant" */
    const char *content; /* NUL-terminated text (text parts already joined) */
};

/*
 * The family of a template text. tmpl NULL or empty: ChatML with *recognised
 * false (the model has no template); an unknown template: ChatML with
 * *recognised false as well. recognised may be NULL.
 */
enum chat_family chat_detect(const char *tmpl, bool *recognised);

/* Short name ("chatml", "llama3"); "?" when out of range. */
const char *chat_family_name(enum chat_family f);

/*
 * Renders msgs[0..n_msgs) in family f. bos and eos are the texts of the
 * vocabulary's BOS and EOS tokens as the template would see them
 * ("<s>", "</s>"); "" when the vocab has none. add_generation_prompt appends
 * the header of the assistant's next turn where the family has one.
 * On success *out is malloc'd (caller frees), NUL-terminated, *out_len bytes
 * (out_len may be NULL). HEARTH_EINVAL with a sentence for an empty list,
 * an unknown role or roles the family cannot take; HEARTH_ENOMEM.
 */
enum hearth_status chat_render(enum chat_family f, const struct chat_msg *msgs, size_t n_msgs,
                               bool add_generation_prompt, const char *bos, const char *eos,
                               char **out, size_t *out_len, char *err, size_t err_len);

#endif
