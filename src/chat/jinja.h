/*
 * jinja.h: a small, bounded Jinja interpreter for chat templates, with the
 * semantics of Hugging Face's apply_chat_template: Python jinja2 3.1 in an
 * ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, the
 * loopcontrols extension, a {% generation %} block rendered as its body,
 * raise_exception(msg), strftime_now(fmt) and a tojson filter that is
 * json.dumps keeping non-ASCII and key order.
 *
 * A compiled template is read-only: any number of threads may render it at
 * once. Rendering allocates from a per-render arena bounded by the options
 * (memory, steps, macro depth, output size); exceeding a bound is an error,
 * never a crash. A render uses at most about 1 MiB of the calling thread's
 * stack (nesting deeper fails with HEARTH_ERANGE), so call it on a thread
 * with a little more than that. No global state.
 */
#ifndef HEARTH_JINJA_H
#define HEARTH_JINJA_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "hearth.h"

struct jinja_template;

struct jinja_opts {
    int max_depth;     /* macro call nesting, >= 1 (default 128) */
    int64_t max_steps; /* statements, expressions and loop iterations evaluated (default 100M,
                          about a second: Gemma 4's template scans the history once per message,
                          and 4000 messages take 20-50M) */
    size_t max_output; /* bytes of output, and of any one string built (default 16 MiB) */
    size_t max_memory; /* bytes a render may allocate in all (default 128 MiB) */
    int64_t now;       /* unix seconds strftime_now formats in local time; < 0: the current time */
};

/* Fills o with the defaults above (now = -1). */
void jinja_opts_default(struct jinja_opts *o);

/*
 * Parses src (len bytes, UTF-8). HEARTH_OK and *out (free with jinja_free),
 * or HEARTH_EINVAL (a syntax error, an unknown filter or test outside an
 * if, as jinja2 refuses them), HEARTH_ERANGE (nesting past 200 levels, a
 * source over 16 MiB) or HEARTH_ENOMEM, with one sentence in err
 * ("jinja: line 3: ...") and *out NULL.
 */
enum hearth_status jinja_compile(const char *src, size_t len, struct jinja_template **out,
                                 char *err, size_t err_len);

/*
 * Renders t with the variables of the cJSON object vars (messages, tools,
 * bos_token, eos_token, add_generation_prompt and any extra keyword
 * arguments); vars may be NULL. cJSON keeps no number text, so a number
 * that is whole and fits in 64 bits becomes an int, others floats (1.0 in a
 * tool schema prints as 1); a cJSON raw item (cJSON_CreateRaw) is parsed
 * from its text as json.loads does (1.0 stays 1.0), for callers that keep
 * the request's text. On HEARTH_OK *out is malloc'd and
 * NUL-terminated, *out_len its length (out_len may be NULL). Errors, with
 * *out NULL and one sentence in err: HEARTH_EINVAL where jinja2 raises
 * (raise_exception's message verbatim, others "jinja: ..."), HEARTH_ERANGE
 * for a bound exceeded (and ints past 64 bits), HEARTH_EUNSUPPORTED for
 * what hearth leaves out (filters such as wordwrap, format specs beyond
 * fill, align, width and precision, complex numbers), HEARTH_ENOMEM.
 * o may be NULL for the defaults. Thread-safe.
 */
enum hearth_status jinja_render(const struct jinja_template *t, const cJSON *vars,
                                const struct jinja_opts *o, char **out, size_t *out_len, char *err,
                                size_t err_len);

/* Frees t; NULL is a no-op. */
void jinja_free(struct jinja_template *t);

#endif
