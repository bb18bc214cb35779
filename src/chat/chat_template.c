/*
 * chat_template.c: which chat template a model uses, and rendering a
 * conversation with it (see chat_template.h).
 */
#include "chat/chat_template.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja.h"
#include "chat/chat.h"
#include "chat/chatparse.h"
#include "util/errfmt.h"

struct chat_template {
    struct jinja_template *jinja; /* NULL: a built-in family */
    enum chat_family family;      /* the built-in family when jinja is NULL */
    char *source;                 /* the Jinja text, or NULL */
    bool typed_content;           /* the template iterates content parts itself */
    cJSON *kwargs;                /* default template kwargs (object) or NULL */
    int64_t now;                  /* strftime_now's clock; < 0: the real one */
    struct chatparse_format fmt;  /* tool-call syntax and reasoning markers of source */
    char *bos, *eos;              /* token texts, "" when the vocab has none */
    char describe[160];
};

static enum hearth_status render_jinja(const struct chat_template *t, cJSON *vars, char **out,
                                       size_t *out_len, char *err, size_t err_len)
{
    struct jinja_opts o;
    jinja_opts_default(&o);
    o.now = t->now;
    return jinja_render(t->jinja, vars, &o, out, out_len, err, err_len);
}

/*
 * Whether the template reads typed content itself: a text part rendered
 * through it comes out as its text, not as the repr of a list.
 */
static bool probe_typed_content(const struct chat_template *t)
{
    static const char needle[] = "\x01hearth-probe\x01";
    cJSON *vars                = cJSON_CreateObject();
    cJSON *msgs                = cJSON_AddArrayToObject(vars, "messages");
    cJSON *m                   = cJSON_CreateObject();
    cJSON_AddItemToArray(msgs, m);
    cJSON_AddStringToObject(m, "role", "user");
    cJSON *parts = cJSON_AddArrayToObject(m, "content");
    cJSON *p     = cJSON_CreateObject();
    cJSON_AddItemToArray(parts, p);
    cJSON_AddStringToObject(p, "type", "text");
    cJSON_AddStringToObject(p, "text", needle);
    cJSON_AddStringToObject(vars, "bos_token", t->bos);
    cJSON_AddStringToObject(vars, "eos_token", t->eos);
    cJSON_AddBoolToObject(vars, "add_generation_prompt", true);
    char *out  = NULL, err[HEARTH_ERR_MAX];
    bool typed = render_jinja(t, vars, &out, NULL, err, sizeof err) == HEARTH_OK &&
                 strstr(out, needle) && !strstr(out, "'type'") && !strstr(out, "\"type\"");
    free(out);
    cJSON_Delete(vars);
    return typed;
}

static enum chat_family family_named(const char *name, bool *found)
{
    for (int f = 0; f < CHAT_FAMILY_COUNT; f++)
        if (!strcmp(chat_family_name((enum chat_family)f), name)) {
            *found = true;
            return (enum chat_family)f;
        }
    *found = false;
    return CHAT_CHATML;
}

enum hearth_status chat_template_new(const struct hearth_model *model, const char *file_src,
                                     const char *file_name, const char *builtin,
                                     struct chat_template **out, char *err, size_t err_len)
{
    *out                    = NULL;
    struct chat_template *t = calloc(1, sizeof *t);
    if (!t)
        return fail(HEARTH_ENOMEM, err, err_len, "chat template: out of memory");
    t->now                = -1;
    hearth_token bos      = model ? hearth_token_bos(model) : -1;
    hearth_token eos      = model ? hearth_token_eos(model) : -1;
    t->bos                = strdup(bos >= 0 ? hearth_token_text(model, bos) : "");
    t->eos                = strdup(eos >= 0 ? hearth_token_text(model, eos) : "");
    const char *own       = model ? hearth_model_chat_template(model) : NULL;
    const char *src       = NULL;
    enum hearth_status st = HEARTH_OK;
    if (!t->bos || !t->eos) {
        st = fail(HEARTH_ENOMEM, err, err_len, "chat template: out of memory");
        goto out;
    }
    if (file_src) {
        src = file_src;
        snprintf(t->describe, sizeof t->describe, "%.120s (Jinja)", file_name ? file_name : "file");
    } else if (builtin) {
        bool found;
        t->family = family_named(builtin, &found);
        if (!found) {
            st = fail(HEARTH_EINVAL, err, err_len,
                      "chat template: no built-in template named '%.40s' (chatml, llama2, llama3, "
                      "mistral, gemma, phi3)",
                      builtin);
            goto out;
        }
        snprintf(t->describe, sizeof t->describe, "%s (built-in)", builtin);
    } else if (own && own[0]) {
        src = own;
        snprintf(t->describe, sizeof t->describe, "tokenizer.chat_template (Jinja)");
    } else {
        t->family = chat_detect(NULL, NULL);
        snprintf(t->describe, sizeof t->describe, "%s (built-in; the model has no template)",
                 chat_family_name(t->family));
    }
    if (src) {
        char jerr[HEARTH_ERR_MAX];
        if (!(t->source = strdup(src))) {
            st = fail(HEARTH_ENOMEM, err, err_len, "chat template: out of memory");
            goto out;
        }
        st = jinja_compile(t->source, strlen(t->source), &t->jinja, jerr, sizeof jerr);
        if (st != HEARTH_OK) {
            set_err(err, err_len, "chat template %s: %s", t->describe, jerr);
            goto out;
        }
        t->typed_content = probe_typed_content(t);
    }
    chatparse_detect(t->source, &t->fmt);
out:
    if (st != HEARTH_OK) {
        chat_template_free(t);
        return st;
    }
    *out = t;
    return HEARTH_OK;
}

void chat_template_free(struct chat_template *t)
{
    if (!t)
        return;
    if (t->jinja)
        jinja_free(t->jinja);
    cJSON_Delete(t->kwargs);
    free(t->source);
    free(t->bos);
    free(t->eos);
    free(t);
}

enum hearth_status chat_template_set_kwargs(struct chat_template *t, const cJSON *kwargs, char *err,
                                            size_t err_len)
{
    if (!cJSON_IsObject(kwargs))
        return fail(HEARTH_EINVAL, err, err_len, "chat template kwargs: expected a JSON object");
    cJSON *copy = cJSON_Duplicate(kwargs, true);
    if (!copy)
        return fail(HEARTH_ENOMEM, err, err_len, "chat template kwargs: out of memory");
    cJSON_Delete(t->kwargs);
    t->kwargs = copy;
    return HEARTH_OK;
}

void chat_template_set_now(struct chat_template *t, int64_t now)
{
    t->now = now;
}

const char *chat_template_describe(const struct chat_template *t)
{
    return t->describe;
}

const char *chat_template_source(const struct chat_template *t)
{
    return t->source;
}

const struct chatparse_format *chat_template_format(const struct chat_template *t)
{
    return &t->fmt;
}

const char *chat_template_bos(const struct chat_template *t)
{
    return t->bos;
}

const char *chat_template_eos(const struct chat_template *t)
{
    return t->eos;
}

/* A content array's texts joined by newlines, as a new string item. */
static cJSON *joined_parts(const cJSON *parts)
{
    size_t len = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, parts)
    {
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(p, "text");
        len += (cJSON_IsString(text) ? strlen(text->valuestring) : 0) + 1;
    }
    char *s = malloc(len + 1);
    if (!s)
        return NULL;
    size_t at = 0;
    cJSON_ArrayForEach(p, parts)
    {
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(p, "text");
        if (at)
            s[at++] = '\n';
        if (cJSON_IsString(text)) {
            size_t n = strlen(text->valuestring);
            memcpy(s + at, text->valuestring, n);
            at += n;
        }
    }
    s[at]     = 0;
    cJSON *it = cJSON_CreateString(s);
    free(s);
    return it;
}

static enum hearth_status render_builtin(const struct chat_template *t, const cJSON *messages,
                                         const cJSON *tools, bool add_generation_prompt, char **out,
                                         size_t *out_len, char *err, size_t err_len)
{
    if (tools)
        return fail(HEARTH_EINVAL, err, err_len,
                    "the built-in %s template has no place for tools (give the model's own "
                    "template with --chat-template-file)",
                    chat_family_name(t->family));
    int n                 = cJSON_GetArraySize(messages);
    struct chat_msg *msgs = calloc((size_t)(n > 0 ? n : 1), sizeof *msgs);
    cJSON *texts          = cJSON_CreateArray(); /* owns the joined texts */
    enum hearth_status st = HEARTH_OK;
    if (!msgs || !texts) {
        st = fail(HEARTH_ENOMEM, err, err_len, "chat: out of memory");
        goto out;
    }
    int i = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, messages)
    {
        const cJSON *role    = cJSON_GetObjectItemCaseSensitive(m, "role");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
        if (cJSON_GetObjectItemCaseSensitive(m, "tool_calls")) {
            st = fail(HEARTH_EINVAL, err, err_len,
                      "the built-in %s template has no place for tool calls",
                      chat_family_name(t->family));
            goto out;
        }
        const char *text = "";
        if (cJSON_IsString(content)) {
            text = content->valuestring;
        } else if (cJSON_IsArray(content)) {
            cJSON *j = joined_parts(content);
            if (!j) {
                st = fail(HEARTH_ENOMEM, err, err_len, "chat: out of memory");
                goto out;
            }
            cJSON_AddItemToArray(texts, j);
            text = j->valuestring;
        }
        msgs[i++] = (struct chat_msg){cJSON_IsString(role) ? role->valuestring : "", text};
    }
    st = chat_render(t->family, msgs, (size_t)i, add_generation_prompt, t->bos, t->eos, out,
                     out_len, err, err_len);
out:
    free(msgs);
    cJSON_Delete(texts);
    return st;
}

enum hearth_status chat_template_render(const struct chat_template *t, const cJSON *messages,
                                        const cJSON *tools, const cJSON *kwargs,
                                        bool add_generation_prompt, char **out, size_t *out_len,
                                        char *err, size_t err_len)
{
    *out = NULL;
    if (!t->jinja)
        return render_builtin(t, messages, tools, add_generation_prompt, out, out_len, err,
                              err_len);
    cJSON *vars = cJSON_CreateObject();
    if (!vars)
        return fail(HEARTH_ENOMEM, err, err_len, "chat template: out of memory");
    /* kwargs first: the conversation's own variables win over a kwarg of the same name */
    const cJSON *layers[] = {t->kwargs, kwargs};
    for (int l = 0; l < 2; l++) {
        const cJSON *k;
        cJSON_ArrayForEach(k, layers[l])
        {
            cJSON_DeleteItemFromObjectCaseSensitive(vars, k->string);
            cJSON_AddItemToObject(vars, k->string, cJSON_Duplicate(k, true));
        }
    }
    static const char *const own[] = {"messages", "tools", "bos_token", "eos_token",
                                      "add_generation_prompt"};
    for (size_t k = 0; k < sizeof own / sizeof own[0]; k++)
        cJSON_DeleteItemFromObjectCaseSensitive(vars, own[k]);
    cJSON *msgs = cJSON_Duplicate(messages, true);
    if (msgs && !t->typed_content) {
        cJSON *m;
        cJSON_ArrayForEach(m, msgs)
        {
            cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
            if (cJSON_IsArray(c)) {
                cJSON *j = joined_parts(c);
                if (j)
                    cJSON_ReplaceItemInObjectCaseSensitive(m, "content", j);
            }
        }
    }
    cJSON_AddItemToObject(vars, "messages", msgs);
    if (tools)
        cJSON_AddItemToObject(vars, "tools", cJSON_Duplicate(tools, true));
    cJSON_AddStringToObject(vars, "bos_token", t->bos);
    cJSON_AddStringToObject(vars, "eos_token", t->eos);
    cJSON_AddBoolToObject(vars, "add_generation_prompt", add_generation_prompt);
    enum hearth_status st = render_jinja(t, vars, out, out_len, err, err_len);
    cJSON_Delete(vars);
    return st;
}

/* ------------------------------------------------------- the public API --- */

enum hearth_status hearth_chat_render(const struct hearth_model *model,
                                      const struct hearth_chat_msg *msgs, size_t n_msgs, char **out,
                                      char *err, size_t err_len)
{
    *out                    = NULL;
    struct chat_template *t = NULL;
    enum hearth_status st   = chat_template_new(model, NULL, NULL, NULL, &t, err, err_len);
    if (st != HEARTH_OK)
        return st;
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = 0; arr && i < n_msgs; i++) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", msgs[i].role);
        cJSON_AddStringToObject(m, "content", msgs[i].content);
        cJSON_AddItemToArray(arr, m);
    }
    char *text = NULL;
    st         = arr ? chat_template_render(t, arr, NULL, NULL, true, &text, NULL, err, err_len)
                     : fail(HEARTH_ENOMEM, err, err_len, "chat: out of memory");
    cJSON_Delete(arr);
    if (st == HEARTH_OK) {
        /* one BOS: the tokenizer's, when it adds one (what llama.cpp's server does) */
        size_t bl = strlen(t->bos);
        if (hearth_vocab_add_bos(model) && bl && !strncmp(text, t->bos, bl))
            memmove(text, text + bl, strlen(text + bl) + 1);
        *out = text;
    }
    chat_template_free(t);
    return st;
}

const char *hearth_chat_template_name(const struct hearth_model *model)
{
    const char *own = hearth_model_chat_template(model);
    if (own && own[0])
        return "the model's own (Jinja)";
    return "chatml (built-in)";
}
