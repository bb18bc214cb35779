/*
 * oai_grammar.c: the grammar a request's reply must match, built on the
 * preparation thread beside its jobs (openai.h, oai_grammar).
 *
 * Sources, at most one per request (oai_parse checks):
 *   - grammar: the client's GBNF, for the whole reply;
 *   - schema (response_format, json_schema): the reply is one JSON value
 *     valid against it;
 *   - tool_choice required / named: the reply is tool calls in the
 *     template's own syntax, each call's arguments valid against the
 *     function's parameters; auto: the same calls, lazily: free text until
 *     the call marker, a valid call once it starts.
 * A chat reply of a reasoning template may think first: a block between its
 * markers, free text that cannot contain the closing marker.
 */
#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"
#include "grammar/schema.h"
#include "serve/openai.h"
#include "serve/reqjson.h"
#include "chat/chat_template.h"
#include "chat/chatparse.h"

#define BAD    REQJSON_BAD
#define OOM(e) oai_fail((e), 500, "server_error", NULL, NULL, "out of memory building a grammar")

/* Where the reply starts with respect to reasoning. */
enum think {
    THINK_NONE, /* no reasoning: no markers, not split, or the prompt closed the block */
    THINK_OPEN, /* the prompt opened a block: the reply starts inside it */
    THINK_FREE, /* the reply may open a block first */
};

static enum think think_mode(const struct oai_request *req, const struct chatparse_format *f,
                             const char *prompt, size_t len)
{
    if (req->kind == OAI_COMPLETION || !f->think_open || req->reasoning == OAI_REASONING_NONE)
        return THINK_NONE;
    if (chatparse_prompt_opens_thinking(f, prompt, len))
        return THINK_OPEN;
    /* a prompt that ends right after a closed block (Qwen3's enable_thinking false) wants none */
    size_t cl = strlen(f->think_close);
    while (len > 0 && strchr(" \t\r\n", prompt[len - 1]))
        len--;
    if (len >= cl && !memcmp(prompt + len - cl, f->think_close, cl))
        return THINK_NONE;
    return THINK_FREE;
}

/* Appends a rule; false when out of memory. */
static bool rule(struct schema_gbnf *b, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bool rule(struct schema_gbnf *b, const char *name, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *body = NULL;
    int n      = vasprintf(&body, fmt, ap);
    va_end(ap);
    if (n < 0)
        return false;
    bool ok = schema_gbnf_rule(b, name, body);
    free(body);
    return ok;
}

/*
 * Rules "<name>" matching any text that does not contain marker, and
 * "<name>-tail" matching what may end such a text just before the marker
 * (a proper prefix of it). The marker's first byte must not recur in it
 * ("</think>", "[/THINK]"), which keeps the automaton a chain: after a
 * mismatch only the first byte can restart a match.
 */
static bool not_containing(struct schema_gbnf *b, const char *name, const char *marker)
{
    size_t n = strlen(marker);
    char rn[96], next[96];
    char *first = schema_gbnf_literal(marker, 1);
    if (!first)
        return false;
    bool ok = true;
    /* <name>-k: the first k bytes of the marker are matched; one more byte ends the step */
    for (size_t k = 1; ok && k < n; k++) {
        char *lit = schema_gbnf_literal(marker + k, 1);
        if (!lit)
            return free(first), false;
        char cls[32];
        unsigned char c0 = (unsigned char)marker[0], ck = (unsigned char)marker[k];
        snprintf(cls, sizeof cls, "[^\\x%02X\\x%02X]", c0, ck);
        snprintf(rn, sizeof rn, "%s-%zu", name, k);
        snprintf(next, sizeof next, "%s-%zu", name, k + 1);
        if (k + 1 < n)
            ok = rule(b, rn, "%s | %s %s-1 | %s %s", cls, first, name, lit, next);
        else /* the marker's last byte would complete it: anything else */
            ok = rule(b, rn, "%s | %s %s-1", cls, first, name);
        free(lit);
    }
    char c0cls[16];
    snprintf(c0cls, sizeof c0cls, "[^\\x%02X]", (unsigned char)marker[0]);
    ok = ok && rule(b, name, "( %s | %s %s-1 )*", c0cls, first, name);
    /* the text may end inside a partial marker, which the real marker then follows */
    if (ok) {
        char *alts = NULL;
        size_t cap = 0;
        FILE *m    = open_memstream(&alts, &cap);
        if (!m)
            return free(first), false;
        for (size_t k = 1; k < n; k++) {
            char *lit = schema_gbnf_literal(marker, k);
            if (!lit) {
                fclose(m);
                free(alts);
                return free(first), false;
            }
            fprintf(m, "%s%s", k > 1 ? " | " : "", lit);
            free(lit);
        }
        fclose(m);
        snprintf(rn, sizeof rn, "%s-tail", name);
        ok = rule(b, rn, "( %s )?", alts);
        free(alts);
    }
    free(first);
    return ok;
}

/* Rule "think": what may come before the reply proper. */
static bool think_rule(struct schema_gbnf *b, enum think mode, const struct chatparse_format *f)
{
    if (mode == THINK_NONE)
        return schema_gbnf_rule(b, "think", "\"\"");
    char *open  = schema_gbnf_literal(f->think_open, strlen(f->think_open));
    char *close = schema_gbnf_literal(f->think_close, strlen(f->think_close));
    bool ok     = open && close && not_containing(b, "think-text", f->think_close);
    if (ok && mode == THINK_OPEN)
        ok = rule(b, "think", "think-text think-text-tail %s think-ws", close);
    else if (ok)
        ok = rule(b, "think", "( %s think-text think-text-tail %s think-ws )?", open, close);
    ok = ok && schema_gbnf_rule(b, "think-ws", "[ \\t\\n]{0,4}");
    free(open);
    free(close);
    return ok;
}

/* The function object of offered tool i and its name. */
static const cJSON *tool_fn(const struct oai_request *req, int i, const char **name)
{
    const cJSON *fn =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(req->tools, i), "function");
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(fn, "name");
    *name          = cJSON_IsString(n) ? n->valuestring : "";
    return fn;
}

/* The first offered tool marked strict (OpenAI's function.strict, Anthropic's strict), or -1. */
static int strict_tool(const struct oai_request *req)
{
    const char *name;
    for (int i = 0; i < cJSON_GetArraySize(req->tools); i++)
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(tool_fn(req, i, &name), "strict")))
            return i;
    return -1;
}

/* Whether a parameter's schema is a plain string, which Qwen3-Coder's form writes bare. */
static bool bare_string(const cJSON *schema)
{
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(schema, "type");
    return cJSON_IsString(type) && !strcmp(type->valuestring, "string");
}

/* Appends to m a GBNF literal of the n bytes of s; false when out of memory. */
static bool put_lit(FILE *m, const char *s, size_t n)
{
    char *lit = schema_gbnf_literal(s, n);
    if (lit)
        fprintf(m, "%s", lit);
    free(lit);
    return lit != NULL;
}

/*
 * Rule "tool-<i>-xml": the <parameter=K>\nV\n</parameter>\n lines of Qwen3-Coder's form for
 * the function's parameters, in the schema's order, the required ones present, each at most
 * once. A string parameter's value is bare text (without "</parameter>"; its length and
 * pattern are not held), a string enum one of its values bare, any other JSON valid against
 * its schema. A schema without properties allows any parameters, values bare text. Needs
 * rule "xml-text" (not_containing "</parameter>"). False with err set as schema_gbnf_add.
 */
static bool xml_params_rule(struct schema_gbnf *b, int i, const cJSON *params, char *err,
                            size_t err_len)
{
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(params, "properties");
    const cJSON *req   = cJSON_GetObjectItemCaseSensitive(params, "required");
    char *body         = NULL, rn[64];
    size_t cap         = 0;
    FILE *m            = open_memstream(&body, &cap);
    if (!m)
        return snprintf(err, err_len, "out of memory"), false;
    bool ok = true;
    int k   = 0;
    const cJSON *p;
    if (!cJSON_IsObject(props) || !props->child)
        fprintf(m, "( \"<parameter=\" [^>\\n]+ \">\\n\" xml-text xml-text-tail "
                   "\"</parameter>\\n\" )*");
    const cJSON *list = cJSON_IsObject(props) ? props : NULL;
    cJSON_ArrayForEach(p, list)
    {
        bool required = false;
        const cJSON *r;
        cJSON_ArrayForEach(r, req) if (cJSON_IsString(r) && !strcmp(r->valuestring, p->string))
            required = true;
        char *head   = NULL;
        if (asprintf(&head, "<parameter=%s>\n", p->string) < 0) {
            ok = false;
            break;
        }
        fprintf(m, "%s", k ? " " : "");
        fprintf(m, "%s", required ? "" : "( ");
        ok = put_lit(m, head, strlen(head));
        free(head);
        const cJSON *en = cJSON_GetObjectItemCaseSensitive(p, "enum");
        if (ok && bare_string(p) && cJSON_IsArray(en) && en->child) {
            fprintf(m, " ( ");
            const cJSON *v;
            int n_v = 0;
            cJSON_ArrayForEach(v, en) if (ok && cJSON_IsString(v))
            {
                fprintf(m, "%s", n_v++ ? " | " : "");
                ok = put_lit(m, v->valuestring, strlen(v->valuestring));
            }
            fprintf(m, " ) \"\\n</parameter>\\n\"");
        } else if (ok && bare_string(p)) {
            fprintf(m, " xml-text xml-text-tail \"</parameter>\\n\"");
        } else if (ok) {
            snprintf(rn, sizeof rn, "tool-%d-p%d", i, k);
            ok = schema_gbnf_add(b, rn, p, err, err_len);
            if (!ok) {
                fclose(m);
                free(body);
                return false;
            }
            fprintf(m, " %s \"\\n</parameter>\\n\"", rn);
        }
        fprintf(m, "%s", required ? "" : " )?");
        k++;
    }
    if (fclose(m) != 0 || !ok) {
        free(body);
        return snprintf(err, err_len, "out of memory"), false;
    }
    snprintf(rn, sizeof rn, "tool-%d-xml", i);
    ok = schema_gbnf_rule(b, rn, body[0] ? body : "\"\"");
    free(body);
    return ok || (snprintf(err, err_len, "out of memory"), false);
}

/*
 * Rule "tool-calls": one call (or, with parallel_tool_calls, one or more)
 * of the offered tools (or only the named one) in format fmt. Each call's
 * arguments are rule "tool-<i>-args", from the function's parameters (no
 * parameters: any object).
 */
static bool tool_call_rules(struct schema_gbnf *b, const struct oai_request *req,
                            enum chatparse_tools fmt, struct oai_error *e)
{
    char *alts = NULL;
    size_t cap = 0;
    FILE *m    = open_memstream(&alts, &cap);
    if (!m)
        return OOM(e);
    int n_tools = cJSON_GetArraySize(req->tools), n_alt = 0;
    bool ok = true;
    if (fmt == CHATPARSE_TOOLS_QWEN3_CODER)
        ok = not_containing(b, "xml-text", "</parameter>");
    for (int i = 0; ok && i < n_tools; i++) {
        const char *name;
        const cJSON *fn = tool_fn(req, i, &name);
        if (req->tool_choice == OAI_TOOL_NAMED && strcmp(name, req->tool_name))
            continue;
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
        cJSON *any          = NULL;
        if (!params) {
            any = cJSON_CreateObject();
            if (!any || !cJSON_AddStringToObject(any, "type", "object")) {
                cJSON_Delete(any);
                ok = false;
                break;
            }
            params = any;
        }
        char rn[48], err[512];
        snprintf(rn, sizeof rn, "tool-%d-args", i);
        bool xml = fmt == CHATPARSE_TOOLS_QWEN3_CODER;
        if (xml ? !xml_params_rule(b, i, params, err, sizeof err)
                : !schema_gbnf_add(b, rn, params, err, sizeof err)) {
            cJSON_Delete(any);
            fclose(m);
            free(alts);
            char param[64];
            snprintf(param, sizeof param, "tools[%d].function.parameters", i);
            return BAD(e, "invalid_value", param, "Invalid '%s': cannot constrain a call to it: %s",
                       param, err);
        }
        cJSON_Delete(any);
        /* the name as a JSON string, then as a GBNF literal of that text */
        cJSON *js = cJSON_CreateString(name);
        char *jn  = js ? cJSON_PrintUnformatted(js) : NULL;
        char *lit = jn ? schema_gbnf_literal(jn, strlen(jn)) : NULL;
        char *raw = schema_gbnf_literal(name, strlen(name)); /* the name bare */
        cJSON_Delete(js);
        free(jn);
        if (!lit || !raw) {
            free(lit);
            free(raw);
            ok = false;
            break;
        }
        switch (fmt) {
        case CHATPARSE_TOOLS_HERMES:
            fprintf(m,
                    "%s\"<tool_call>\\n{\\\"name\\\": \" %s \", \\\"arguments\\\": \" %s "
                    "\"}\\n</tool_call>\"",
                    n_alt ? " | " : "", lit, rn);
            break;
        case CHATPARSE_TOOLS_LLAMA3:
            fprintf(m, "%s\"{\\\"name\\\": \" %s \", \\\"parameters\\\": \" %s \"}\"",
                    n_alt ? " | " : "", lit, rn);
            break;
        case CHATPARSE_TOOLS_QWEN3_CODER:
            fprintf(m,
                    "%s\"<tool_call>\\n<function=\" %s \">\\n\" tool-%d-xml "
                    "\"</function>\\n</tool_call>\"",
                    n_alt ? " | " : "", raw, i);
            break;
        case CHATPARSE_TOOLS_MISTRAL:
            /* Mistral Small 3.2, Devstral and Ministral 3 write NAME[ARGS]{..}, Nemo an array */
            fprintf(m,
                    "%s\"[TOOL_CALLS]\" ( %s \"[ARGS]\" %s | \"[{\\\"name\\\": \" %s "
                    "\", \\\"arguments\\\": \" %s \"}]\" )",
                    n_alt ? " | " : "", raw, rn, lit, rn);
            break;
        case CHATPARSE_TOOLS_DEEPSEEK_R1:
            fprintf(m,
                    "%s\"<｜tool▁call▁begin｜>function<｜tool▁sep｜>\" %s \"\\n```json\\n\" %s "
                    "\"\\n```<｜tool▁call▁end｜>\"",
                    n_alt ? " | " : "", raw, rn);
            break;
        case CHATPARSE_TOOLS_DEEPSEEK_V31:
            fprintf(m,
                    "%s\"<｜tool▁call▁begin｜>\" %s \"<｜tool▁sep｜>\" %s \"<｜tool▁call▁end｜>\"",
                    n_alt ? " | " : "", raw, rn);
            break;
        default:
            break;
        }
        n_alt++;
        free(lit);
        free(raw);
    }
    if (fclose(m) != 0 || !ok) {
        free(alts);
        return OOM(e);
    }
    ok = schema_gbnf_rule(b, "tool-call", alts);
    free(alts);
    /* Llama 3 writes one call per turn; Hermes and Qwen3-Coder templates separate calls by a
     * newline, Mistral's by nothing; DeepSeek's sit in one block */
    bool many         = req->parallel_tool_calls && fmt != CHATPARSE_TOOLS_LLAMA3;
    bool deepseek     = fmt == CHATPARSE_TOOLS_DEEPSEEK_R1 || fmt == CHATPARSE_TOOLS_DEEPSEEK_V31;
    const char *calls = !many                            ? "tool-call"
                        : fmt == CHATPARSE_TOOLS_MISTRAL ? "tool-call+"
                        : deepseek                       ? "tool-call ( \"\\n\"? tool-call )*"
                                                         : "tool-call ( \"\\n\" tool-call )*";
    if (ok && deepseek)
        ok = rule(b, "tool-calls", "\"<｜tool▁calls▁begin｜>\" %s \"<｜tool▁calls▁end｜>\"", calls);
    else if (ok)
        ok = schema_gbnf_rule(b, "tool-calls", calls);
    return ok || OOM(e);
}

/* Whether hearth can write a grammar for calls in fmt, and the marker that opens one. */
static bool constrainable(enum chatparse_tools fmt, const char **trigger)
{
    switch (fmt) {
    case CHATPARSE_TOOLS_HERMES:
        *trigger = "<tool_call>";
        return true;
    case CHATPARSE_TOOLS_LLAMA3:
        *trigger = NULL; /* a call only where content starts: no marker to wait for */
        return true;
    case CHATPARSE_TOOLS_QWEN3_CODER:
        *trigger = "<tool_call>";
        return true;
    case CHATPARSE_TOOLS_MISTRAL:
        *trigger = "[TOOL_CALLS]";
        return true;
    case CHATPARSE_TOOLS_DEEPSEEK_R1:
    case CHATPARSE_TOOLS_DEEPSEEK_V31:
        *trigger = "<｜tool▁calls▁begin｜>";
        return true;
    default:
        *trigger = NULL;
        return false;
    }
}

/* Whether some token (or the end of text) may start a reply under g: a grammar of no
 * sentence, or one whose first character no token spells, is the client's error, not a job
 * that fails at its first step. */
static bool can_start(struct grammar *g, const struct grammar_vocab *gv)
{
    struct grammar_matcher *m = grammar_matcher_new(g, NULL, 0);
    uint32_t *mask            = malloc(((size_t)grammar_vocab_size(gv) + 31) / 32 * sizeof *mask);
    char err[256];
    int32_t n = m && mask ? grammar_matcher_mask(m, mask, err, sizeof err) : 1;
    free(mask);
    grammar_matcher_free(m);
    return n != 0;
}

bool oai_grammar_holds_calls(const struct oai_request *req, enum chatparse_tools fmt)
{
    const char *trigger = NULL;
    if (req->kind == OAI_COMPLETION || !req->tools || req->tool_choice == OAI_TOOL_NONE ||
        !constrainable(fmt, &trigger))
        return false;
    if (req->tool_choice == OAI_TOOL_REQUIRED || req->tool_choice == OAI_TOOL_NAMED)
        return true;
    return trigger && !req->schema && !req->grammar;
}

bool oai_grammar(const struct oai_request *req, const struct chat_template *tmpl,
                 struct grammar_cache *gc, const char *prompt, size_t prompt_len,
                 struct grammar **g, char ***triggers, int32_t *n_triggers, struct oai_error *e)
{
    *g                           = NULL;
    *triggers                    = NULL;
    *n_triggers                  = 0;
    struct chatparse_format none = {0};
    const struct chatparse_format *f =
        req->kind != OAI_COMPLETION && tmpl ? chat_template_format(tmpl) : &none;
    bool tools_on = req->kind != OAI_COMPLETION && req->tools && req->tool_choice != OAI_TOOL_NONE;
    bool forced =
        tools_on && (req->tool_choice == OAI_TOOL_REQUIRED || req->tool_choice == OAI_TOOL_NAMED);
    const char *trigger = NULL;
    bool can_calls      = tools_on && constrainable(f->tools, &trigger);
    if (forced && !can_calls)
        return BAD(e, "unsupported_value", "tool_choice",
                   "Unsupported value: 'tool_choice' %s needs tool calls hearth can constrain, "
                   "and this chat template's tool-call format (%s) is not one of them (hermes, "
                   "qwen3-coder, llama3, mistral, deepseek-r1, deepseek-v3.1).",
                   req->tool_choice == OAI_TOOL_NAMED ? "naming a function" : "'required'",
                   chatparse_tools_name(f->tools));
    /* auto: lazily, from the call marker; a format without one stays unconstrained */
    bool lazy = tools_on && !forced && !req->schema && !req->grammar;
    /* a strict tool promises calls valid against its schema: refused where none can be held */
    int strict = tools_on && !req->grammar ? strict_tool(req) : -1;
    if (strict >= 0 && (!can_calls || (lazy && !trigger)))
        return BAD(e, "unsupported_value", "tools",
                   "Unsupported value: tool %d is strict, but calls in this chat template's "
                   "tool-call format (%s) can be held to a schema only %s.",
                   strict, chatparse_tools_name(f->tools),
                   can_calls ? "when tool_choice forces a call"
                             : "in hermes, qwen3-coder, llama3, mistral and deepseek");
    if (lazy && (!can_calls || !trigger))
        return true;
    if (!req->grammar && !req->schema && !tools_on)
        return true;
    if (!gc)
        return oai_fail(e, 500, "server_error", NULL, NULL,
                        "constrained output is not available: no vocabulary index");

    char *text        = NULL;
    const char *param = req->grammar  ? "grammar"
                        : req->schema ? (req->schema_field ? req->schema_field : "response_format")
                                      : "tool_choice";
    if (req->grammar) {
        text = strdup(req->grammar);
        if (!text)
            return OOM(e);
    } else {
        struct schema_gbnf *b = schema_gbnf_new();
        if (!b)
            return OOM(e);
        enum think mode = lazy ? THINK_NONE : think_mode(req, f, prompt, prompt_len);
        bool ok         = think_rule(b, mode, f) || OOM(e);
        bool calls      = forced || lazy || (tools_on && can_calls);
        if (ok && calls) {
            /* A tool whose parameters cannot be constrained refuses a forced call; when the
             * model only may call, it calls unconstrained, as before grammars existed. */
            struct oai_error te;
            calls = tool_call_rules(b, req, f->tools, &te);
            if (!calls && (forced || strict >= 0 || te.status != 400)) {
                *e = te;
                ok = false;
            } else if (!calls && lazy) {
                schema_gbnf_free(b);
                return true;
            }
        }
        if (ok && req->schema) {
            char err[512];
            if (!schema_gbnf_add(b, "reply", req->schema, err, sizeof err))
                ok = BAD(e, "invalid_value", param, "Invalid JSON schema in '%s': %s", param, err);
        }
        if (ok) {
            const char *root = lazy                   ? "tool-calls"
                               : forced               ? "think tool-calls"
                               : req->schema && calls ? "think ( tool-calls | reply )"
                                                      : "think reply";
            ok               = schema_gbnf_rule(b, "root", root) || OOM(e);
        }
        if (ok && !(text = schema_gbnf_text(b)))
            ok = OOM(e);
        schema_gbnf_free(b);
        if (!ok)
            return false;
    }
    char err[512];
    enum hearth_status st =
        grammar_cache_compile(gc, text, strlen(text), "root", req->cancel, g, err, sizeof err);
    free(text);
    if (st == HEARTH_ENOMEM)
        return OOM(e);
    /* the client is gone: nobody reads this, but it must not be a 400 */
    if (st == HEARTH_ECANCELED)
        return oai_fail(e, hearth_status_http(st), "request_cancelled", NULL, param, "%s", err);
    if (st != HEARTH_OK)
        return BAD(e, "invalid_value", param, "Invalid '%s': %s", param, err);
    if (!lazy && !can_start(*g, grammar_cache_vocab(gc))) {
        grammar_unref(*g);
        *g = NULL;
        return BAD(e, "invalid_value", param,
                   "Invalid '%s': no reply can match it: no token of the vocabulary can start it.",
                   param);
    }
    if (lazy) {
        *triggers = malloc(sizeof **triggers);
        if (!*triggers || !((*triggers)[0] = strdup(trigger))) {
            free(*triggers);
            *triggers = NULL;
            grammar_unref(*g);
            *g = NULL;
            return OOM(e);
        }
        *n_triggers = 1;
    }
    return true;
}
