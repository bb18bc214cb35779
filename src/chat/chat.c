/*
 * chat.c: chat template detection and rendering (see chat.h).
 *
 * Each family's renderer follows its reference Jinja template line by line;
 * the template is quoted above the function. Jinja's `trim` filter and
 * Python's str.strip() remove whitespace at both ends; here that is ASCII
 * whitespace and the C0 separators Python also counts (0x1c-0x1f).
 */
#include "chat/chat.h"

#include <stdlib.h>
#include <string.h>

#include "util/errfmt.h"
#include "util/strbuf.h"

/* ---------------------------------------------------------- text builder --- */

static bool is_py_space(unsigned char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
}

/* Appends s with whitespace stripped at both ends (Python's str.strip()). */
static void sb_add_trim(struct strbuf *b, const char *s)
{
    size_t n = strlen(s);
    while (n && is_py_space((unsigned char)*s))
        s++, n--;
    while (n && is_py_space((unsigned char)s[n - 1]))
        n--;
    strbuf_addn(b, s, n);
}

/* ------------------------------------------------------------- detection --- */

const char *chat_family_name(enum chat_family f)
{
    static const char *const names[] = {
#define CHAT_X_NAME(name, text) text,
        CHAT_FAMILY_LIST(CHAT_X_NAME)
#undef CHAT_X_NAME
    };
    return (unsigned)f < CHAT_FAMILY_COUNT ? names[f] : "?";
}

enum chat_family chat_detect(const char *tmpl, bool *recognised)
{
    bool known         = true;
    enum chat_family f = CHAT_CHATML;
#define HAS(s) (strstr(tmpl, (s)) != NULL)
    /* Same order as llama.cpp's llm_chat_detect_template: the first marker wins. */
    if (!tmpl || !*tmpl)
        known = false;
    else if (HAS("<|im_start|>"))
        f = CHAT_CHATML;
    else if (HAS("[INST]"))
        f = HAS("<<SYS>>") ? CHAT_LLAMA2 : CHAT_MISTRAL;
    else if (HAS("<|assistant|>") && HAS("<|end|>"))
        f = CHAT_PHI3;
    else if (HAS("<start_of_turn>"))
        f = CHAT_GEMMA;
    else if (HAS("<|start_header_id|>") && HAS("<|end_header_id|>"))
        f = CHAT_LLAMA3;
    else
        known = false;
#undef HAS
    if (recognised)
        *recognised = known;
    return f;
}

/* ------------------------------------------------------------- rendering --- */

static bool role_is(const struct chat_msg *m, const char *r)
{
    return strcmp(m->role, r) == 0;
}

/*
 * Takes a leading system message off m[0, n): the templates that use it fold it into the
 * first user turn. Returns its text, or NULL when m[0] is not one.
 */
static const char *split_system(const struct chat_msg **m, size_t *n)
{
    if (!role_is(&(*m)[0], "system"))
        return NULL;
    const char *sys = (*m)[0].content;
    (*m)++, (*n)--;
    return sys;
}

/*
 * Whether m[i] stands where the templates that raise on it want it: user turns at even i,
 * others at odd i. Writes their error when not.
 */
static bool in_turn(const struct chat_msg *m, size_t i, char *err, size_t err_len)
{
    if (role_is(&m[i], "user") == (i % 2 == 0))
        return true;
    set_err(err, err_len,
            "chat: conversation roles must alternate user/assistant/user/assistant/...");
    return false;
}

/*
 * {% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content']
 * + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}
 * {{ '<|im_start|>assistant\n' }}{% endif %}
 */
static bool render_chatml(struct strbuf *b, const struct chat_msg *m, size_t n, bool gen)
{
    for (size_t i = 0; i < n; i++) {
        strbuf_add(b, "<|im_start|>");
        strbuf_add(b, m[i].role);
        strbuf_add(b, "\n");
        strbuf_add(b, m[i].content);
        strbuf_add(b, "<|im_end|>\n");
    }
    if (gen)
        strbuf_add(b, "<|im_start|>assistant\n");
    return true;
}

/*
 * meta-llama/Llama-2-7b-chat-hf:
 * {% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}
 * {% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}
 * {% set system_message = false %}{% endif %}{% for message in loop_messages %}
 * {% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception(...) }}{% endif
 * %}
 * {% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\n' +
 * system_message + '\n<</SYS>>\n\n' + message['content'] %}{% else %}
 * {% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}
 * {{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] ==
 * 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}
 */
static bool render_llama2(struct strbuf *b, const struct chat_msg *m, size_t n, const char *bos,
                          const char *eos, char *err, size_t err_len)
{
    const char *sys = split_system(&m, &n);
    for (size_t i = 0; i < n; i++) {
        if (!in_turn(m, i, err, err_len))
            return false;
        bool user       = i % 2 == 0;
        struct strbuf c = {0};
        if (i == 0 && sys) {
            strbuf_add(&c, "<<SYS>>\n");
            strbuf_add(&c, sys);
            strbuf_add(&c, "\n<</SYS>>\n\n");
        }
        strbuf_add(&c, m[i].content);
        if (c.oom) {
            strbuf_free(&c);
            b->oom = true;
            return false;
        }
        if (user) {
            strbuf_add(b, bos);
            strbuf_add(b, "[INST] ");
            sb_add_trim(b, c.s);
            strbuf_add(b, " [/INST]");
        } else if (role_is(&m[i], "assistant")) {
            strbuf_add(b, " ");
            sb_add_trim(b, c.s);
            strbuf_add(b, " ");
            strbuf_add(b, eos);
        }
        strbuf_free(&c);
    }
    return true;
}

/*
 * meta-llama/Meta-Llama-3-8B-Instruct:
 * {% set loop_messages = messages %}{% for message in loop_messages %}
 * {% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' +
 * message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}
 * {% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}
 * {% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif
 * %}
 */
static bool render_llama3(struct strbuf *b, const struct chat_msg *m, size_t n, bool gen,
                          const char *bos)
{
    for (size_t i = 0; i < n; i++) {
        if (i == 0)
            strbuf_add(b, bos);
        strbuf_add(b, "<|start_header_id|>");
        strbuf_add(b, m[i].role);
        strbuf_add(b, "<|end_header_id|>\n\n");
        sb_add_trim(b, m[i].content);
        strbuf_add(b, "<|eot_id|>");
    }
    if (gen)
        strbuf_add(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
    return true;
}

/*
 * mistralai/Mistral-7B-Instruct-v0.2 (and Mixtral-8x7B-Instruct-v0.1):
 * {{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') !=
 * (loop.index0 % 2 == 0) %}{{ raise_exception(...) }}{% endif %}{% if message['role'] ==
 * 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] ==
 * 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and
 * assistant roles are supported!') }}{% endif %}{% endfor %}
 * A leading system message (which this template refuses) is put before the first
 * user message with a blank line, as Mistral's later templates do.
 */
static bool render_mistral(struct strbuf *b, const struct chat_msg *m, size_t n, const char *bos,
                           const char *eos, char *err, size_t err_len)
{
    const char *sys = split_system(&m, &n);
    strbuf_add(b, bos);
    for (size_t i = 0; i < n; i++) {
        if (!in_turn(m, i, err, err_len))
            return false;
        bool user = i % 2 == 0;
        if (user) {
            strbuf_add(b, "[INST] ");
            if (i == 0 && sys) {
                strbuf_add(b, sys);
                strbuf_add(b, "\n\n");
            }
            strbuf_add(b, m[i].content);
            strbuf_add(b, " [/INST]");
        } else if (role_is(&m[i], "assistant")) {
            strbuf_add(b, m[i].content);
            strbuf_add(b, eos);
        } else {
            set_err(err, err_len,
                    "chat: this model's template supports only user and "
                    "assistant roles after a first system message");
            return false;
        }
    }
    return true;
}

/*
 * google/gemma-2-9b-it (gemma-7b-it is the same):
 * {{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not
 * supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == 'user') !=
 * (loop.index0 % 2 == 0) %}{{ raise_exception(...) }}{% endif %}{% if (message['role'] ==
 * 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}
 * {{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}
 * {% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}
 * A leading system message goes before the first user message's text with a blank
 * line, as gemma-3's template does (first_user_prefix).
 */
static bool render_gemma(struct strbuf *b, const struct chat_msg *m, size_t n, bool gen,
                         const char *bos, char *err, size_t err_len)
{
    const char *sys = split_system(&m, &n);
    strbuf_add(b, bos);
    for (size_t i = 0; i < n; i++) {
        if (!in_turn(m, i, err, err_len))
            return false;
        strbuf_add(b, "<start_of_turn>");
        strbuf_add(b, role_is(&m[i], "assistant") ? "model" : m[i].role);
        strbuf_add(b, "\n");
        if (i == 0 && sys) {
            strbuf_add(b, sys);
            strbuf_add(b, "\n\n");
        }
        sb_add_trim(b, m[i].content);
        strbuf_add(b, "<end_of_turn>\n");
    }
    if (gen)
        strbuf_add(b, "<start_of_turn>model\n");
    return true;
}

/*
 * microsoft/Phi-3-mini-4k-instruct:
 * {% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\n' +
 * message['content'] + '<|end|>\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\n' +
 * message['content'] + '<|end|>\n'}}{% elif message['role'] == 'assistant' %}
 * {{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}{% endif %}{% endfor %}
 * {% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}
 */
static bool render_phi3(struct strbuf *b, const struct chat_msg *m, size_t n, bool gen,
                        const char *eos)
{
    for (size_t i = 0; i < n; i++) {
        strbuf_add(b, "<|");
        strbuf_add(b, m[i].role);
        strbuf_add(b, "|>\n");
        strbuf_add(b, m[i].content);
        strbuf_add(b, "<|end|>\n");
    }
    strbuf_add(b, gen ? "<|assistant|>\n" : eos);
    return true;
}

enum hearth_status chat_render(enum chat_family f, const struct chat_msg *msgs, size_t n_msgs,
                               bool add_generation_prompt, const char *bos, const char *eos,
                               char **out, size_t *out_len, char *err, size_t err_len)
{
    *out = NULL;
    if (out_len)
        *out_len = 0;
    if (n_msgs == 0)
        return fail(HEARTH_EINVAL, err, err_len, "chat: no messages to render");
    for (size_t i = 0; i < n_msgs; i++) {
        const char *r = msgs[i].role;
        if (!r || !msgs[i].content ||
            (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant")))
            return fail(HEARTH_EINVAL, err, err_len,
                        "chat: message %zu has role '%s'; expected system, user or assistant", i,
                        r ? r : "(none)");
    }
    if (!bos)
        bos = "";
    if (!eos)
        eos = "";
    struct strbuf b = {0};
    bool ok         = false;
    bool gen        = add_generation_prompt;
    switch (f) {
    case CHAT_LLAMA2:
        ok = render_llama2(&b, msgs, n_msgs, bos, eos, err, err_len);
        break;
    case CHAT_LLAMA3:
        ok = render_llama3(&b, msgs, n_msgs, gen, bos);
        break;
    case CHAT_MISTRAL:
        ok = render_mistral(&b, msgs, n_msgs, bos, eos, err, err_len);
        break;
    case CHAT_GEMMA:
        ok = render_gemma(&b, msgs, n_msgs, gen, bos, err, err_len);
        break;
    case CHAT_PHI3:
        ok = render_phi3(&b, msgs, n_msgs, gen, eos);
        break;
    case CHAT_CHATML:
    default:
        ok = render_chatml(&b, msgs, n_msgs, gen);
        break;
    }
    if (!ok && !b.oom) {
        strbuf_free(&b);
        return HEARTH_EINVAL;
    }
    /* "" when nothing rendered, e.g. Llama 2 with only a system message */
    *out = strbuf_take(&b, out_len);
    if (!*out)
        return fail(HEARTH_ENOMEM, err, err_len, "chat: out of memory rendering the prompt");
    return HEARTH_OK;
}
