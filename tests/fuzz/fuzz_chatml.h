/*
 * fuzz_chatml.h: what the request fuzz targets (OpenAI, Anthropic, Responses)
 * share. Their accepted requests are rendered by one ChatML Jinja template with
 * tool-call and reasoning markers, so the reply's splitter has both to find;
 * their output only has to be produced, so it is counted into a sink and freed.
 * Each target includes it once; it builds nothing else.
 */
#ifndef HEARTH_FUZZ_CHATML_H
#define HEARTH_FUZZ_CHATML_H

#include <stddef.h>
#include <stdlib.h>

#include "chat/chat_template.h"

/* Keeps the compiler from dropping output nobody reads. */
static volatile size_t sink;

/*
 * The template's source. gen: what follows "<|im_start|>assistant\n" when
 * add_generation_prompt is set (an open or an already closed reasoning block).
 */
/* clang-format off */
#define FUZZ_CHATML(gen)                                                                           \
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"                 \
    "{% for c in m.tool_calls or [] %}<tool_call>{{ c.function | tojson }}</tool_call>"            \
    "{% endfor %}{% endfor %}{% if tools %}{{ tools | tojson }}{% endif %}"                        \
    "{% if add_generation_prompt %}<|im_start|>assistant\n" gen "{% endif %}"
/* clang-format on */

/* The template of src, built on the first call and kept; aborts if src does not compile. */
static inline struct chat_template *fuzz_template(const char *src)
{
    static struct chat_template *t;
    if (t)
        return t;
    char err[HEARTH_ERR_MAX];
    if (chat_template_new(NULL, src, "fuzz", NULL, &t, err, sizeof err) != HEARTH_OK)
        abort();
    return t;
}

/* Counts n bytes of out into sink and frees out (NULL allowed). */
static inline void fuzz_take(char *out, size_t n)
{
    sink += n;
    free(out);
}

#endif
