/*
 * chatparse_formats.c: the bodies of the tool calls that are not JSON in a
 * known place: the XML-ish forms (Qwen3-Coder, Seed-OSS, GLM, MiniMax), the
 * token-delimited ones (Kimi K2, functionary), JSON arrays of calls
 * (Granite, Command-R) and Gemma 4's own object syntax; and the units of
 * the newer forms (gpt-oss' headers, functionary v3.2's recipients, the
 * arrays, the forms closed by a marker). The body parsers judge a unit's
 * bytes and keep no state, so a verdict depends on the bytes only
 * (contracts in chatparse_int.h).
 *
 * Parameter values the templates write bare (strings) or as JSON (the rest)
 * are strings where the tool's schema says "type": "string"; else (or with
 * no tools given) JSON when they parse as a number, true, false, null, an
 * object or an array, a string otherwise.
 */
#include <stdlib.h>

#include "chat/chatparse_int.h"

/* Nesting of Gemma 4 values past which a call is refused (the parser recurses). */
#define GEMMA4_DEPTH_MAX 64
#define GEMMA4_QUOTE     "<|\"|>"

static cJSON *string_n(const char *s, size_t n)
{
    char *t  = chatparse_dup_n(s, n);
    cJSON *j = t ? cJSON_CreateString(t) : NULL;
    free(t);
    return j;
}

cJSON *chatparse_raw_value(const char *v, size_t n, bool strip_nl, bool as_string)
{
    if (strip_nl && n && v[0] == '\n') {
        v++;
        n--;
    }
    if (strip_nl && n && v[n - 1] == '\n')
        n--;
    cJSON *j = as_string ? NULL : chatparse_json(v, n);
    if (j && !cJSON_IsString(j))
        return j;
    cJSON_Delete(j);
    return string_n(v, n);
}

/* Adds key (key_len bytes) = v to obj (v taken over); a key given twice keeps its last value. */
static int add_arg(cJSON *obj, const char *key, size_t key_len, cJSON *v)
{
    char *k = v ? chatparse_dup_n(key, key_len) : NULL;
    if (!k) {
        cJSON_Delete(v);
        return -1;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(obj, k);
    cJSON_AddItemToObject(obj, k, v);
    free(k);
    return ACCEPT;
}

/* A name fit for a call: 1 or more bytes, none of them whitespace, '<' or '>'. */
static bool name_ok(const char *s, size_t n)
{
    if (!n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (chatparse_is_ws(s[i]) || s[i] == '<' || s[i] == '>' || !s[i])
            return false;
    return true;
}

int chatparse_body_xml(struct chatparse *p, const char *s, size_t n)
{
    size_t at = 0;
    chatparse_skip_ws(s, n, &at);
    if (!chatparse_take(s, n, &at, "<function="))
        return REJECT;
    size_t name_at = at, name_end = chatparse_find(s, n, at, ">");
    if (name_end == n || memchr(s + name_at, '\n', name_end - name_at))
        return REJECT;
    at         = name_end + 1;
    cJSON *obj = cJSON_CreateObject();
    if (!obj)
        return -1;
    for (;;) {
        chatparse_skip_ws(s, n, &at);
        if (chatparse_take(s, n, &at, "</function>"))
            break;
        if (!chatparse_take(s, n, &at, "<parameter="))
            goto reject;
        size_t key_at    = at;
        size_t key_end   = chatparse_find(s, n, at, ">");
        size_t value_end = chatparse_find(s, n, key_end, "</parameter>");
        if (value_end == n || key_end == key_at || memchr(s + key_at, '\n', key_end - key_at))
            goto reject;
        bool str = chatparse_param_string(p, s + name_at, name_end - name_at, s + key_at,
                                          key_end - key_at);
        cJSON *v = chatparse_raw_value(s + key_end + 1, value_end - key_end - 1, true, str);
        if (add_arg(obj, s + key_at, key_end - key_at, v) < 0) {
            cJSON_Delete(obj);
            return -1;
        }
        at = value_end + strlen("</parameter>");
    }
    chatparse_skip_ws(s, n, &at);
    if (at != n)
        goto reject;
    return chatparse_pend_add(p, s + name_at, name_end - name_at, obj, NULL);
reject:
    cJSON_Delete(obj);
    return REJECT;
}

int chatparse_body_glm(struct chatparse *p, const char *s, size_t n)
{
    size_t at = 0;
    chatparse_skip_ws(s, n, &at);
    if (at < n && s[at] == '{') {
        /* a fine-tune writing Hermes' JSON inside GLM's marker */
        cJSON *j = chatparse_json(s, n);
        int r    = j ? chatparse_pend_object(p, j, false, false) : REJECT;
        cJSON_Delete(j);
        return r;
    }
    size_t name_at = at, name_end = chatparse_find(s, n, at, "<arg_key>");
    at = name_end;
    while (name_end > name_at && chatparse_is_ws(s[name_end - 1]))
        name_end--;
    if (!name_ok(s + name_at, name_end - name_at))
        return REJECT;
    cJSON *obj = cJSON_CreateObject();
    if (!obj)
        return -1;
    for (;;) {
        chatparse_skip_ws(s, n, &at);
        if (at == n)
            break;
        if (!chatparse_take(s, n, &at, "<arg_key>"))
            goto reject;
        size_t key_at = at, key_end = chatparse_find(s, n, at, "</arg_key>");
        if (key_end == n || key_end == key_at)
            goto reject;
        at = key_end + strlen("</arg_key>");
        chatparse_skip_ws(s, n, &at);
        if (!chatparse_take(s, n, &at, "<arg_value>"))
            goto reject;
        size_t value_at = at, value_end = chatparse_find(s, n, at, "</arg_value>");
        if (value_end == n)
            goto reject;
        bool str = chatparse_param_string(p, s + name_at, name_end - name_at, s + key_at,
                                          key_end - key_at);
        cJSON *v = chatparse_raw_value(s + value_at, value_end - value_at, false, str);
        if (add_arg(obj, s + key_at, key_end - key_at, v) < 0) {
            cJSON_Delete(obj);
            return -1;
        }
        at = value_end + strlen("</arg_value>");
    }
    return chatparse_pend_add(p, s + name_at, name_end - name_at, obj, NULL);
reject:
    cJSON_Delete(obj);
    return REJECT;
}

int chatparse_body_kimi(struct chatparse *p, const char *s, size_t n)
{
    size_t at = 0;
    int r     = REJECT;
    for (;;) {
        chatparse_skip_ws(s, n, &at);
        if (at == n)
            return r; /* ACCEPT after at least one call */
        if (!chatparse_take(s, n, &at, "<|tool_call_begin|>"))
            return REJECT;
        size_t id_at = at, id_end = chatparse_find(s, n, at, "<|tool_call_argument_begin|>");
        size_t args_at  = id_end + strlen("<|tool_call_argument_begin|>");
        size_t args_end = chatparse_find(s, n, args_at, "<|tool_call_end|>");
        if (args_end >= n)
            return REJECT;
        /* functions.NAME:INDEX; the index counts per message, so it is no id to pass on */
        size_t name_at = id_at, name_end = id_end;
        size_t k = id_at;
        chatparse_skip_ws(s, id_end, &k);
        name_at = k;
        if (chatparse_take(s, id_end, &k, "functions."))
            name_at = k;
        for (size_t i = id_end; i > name_at; i--)
            if (s[i - 1] == ':') {
                name_end = i - 1;
                break;
            }
        while (name_end > name_at && chatparse_is_ws(s[name_end - 1]))
            name_end--;
        if (!name_ok(s + name_at, name_end - name_at))
            return REJECT;
        cJSON *args = chatparse_json(s + args_at, args_end - args_at);
        if (!args)
            return REJECT;
        r = chatparse_pend_add(p, s + name_at, name_end - name_at, args, NULL);
        if (r != ACCEPT)
            return r;
        at = args_end + strlen("<|tool_call_end|>");
    }
}

int chatparse_body_minimax(struct chatparse *p, const char *s, size_t n)
{
    size_t at = 0;
    int r     = REJECT;
    for (;;) {
        chatparse_skip_ws(s, n, &at);
        if (at == n)
            return r;
        if (!chatparse_take(s, n, &at, "<invoke name=\""))
            return REJECT;
        size_t name_at = at, name_end = chatparse_find(s, n, at, "\">");
        if (name_end == n || !name_ok(s + name_at, name_end - name_at))
            return REJECT;
        at         = name_end + 2;
        cJSON *obj = cJSON_CreateObject();
        if (!obj)
            return -1;
        for (;;) {
            chatparse_skip_ws(s, n, &at);
            if (chatparse_take(s, n, &at, "</invoke>"))
                break;
            size_t key_at = at;
            size_t key_end, value_end;
            if (!chatparse_take(s, n, &key_at, "<parameter name=\"") ||
                (key_end = chatparse_find(s, n, key_at, "\">")) == n || key_end == key_at ||
                (value_end = chatparse_find(s, n, key_end, "</parameter>")) == n) {
                cJSON_Delete(obj);
                return REJECT;
            }
            bool str = chatparse_param_string(p, s + name_at, name_end - name_at, s + key_at,
                                              key_end - key_at);
            cJSON *v = chatparse_raw_value(s + key_end + 2, value_end - key_end - 2, true, str);
            if (add_arg(obj, s + key_at, key_end - key_at, v) < 0) {
                cJSON_Delete(obj);
                return -1;
            }
            at = value_end + strlen("</parameter>");
        }
        r = chatparse_pend_add(p, s + name_at, name_end - name_at, obj, NULL);
        if (r != ACCEPT)
            return r;
    }
}

int chatparse_body_functionary(struct chatparse *p, const char *s, size_t n)
{
    size_t name_end = chatparse_find(s, n, 0, ">");
    if (name_end == n || !name_ok(s, name_end))
        return REJECT;
    cJSON *args = chatparse_json(s + name_end + 1, n - name_end - 1);
    return args ? chatparse_pend_add(p, s, name_end, args, NULL) : REJECT;
}

int chatparse_body_array(struct chatparse *p, const char *s, size_t n, bool cohere)
{
    cJSON *j = chatparse_json(s, n);
    int r    = cJSON_IsArray(j) && cJSON_GetArraySize(j) > 0 ? ACCEPT : REJECT;
    const cJSON *o;
    cJSON_ArrayForEach(o, j)
    {
        if (r != ACCEPT)
            break;
        if (!cohere) {
            r = chatparse_pend_object(p, o, false, false);
            continue;
        }
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(o, "tool_name");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(o, "parameters");
        if (!cJSON_IsString(name)) {
            r = REJECT;
            break;
        }
        cJSON *a = args ? cJSON_Duplicate(args, true) : cJSON_CreateObject();
        r = a ? chatparse_pend_add(p, name->valuestring, strlen(name->valuestring), a, NULL) : -1;
    }
    cJSON_Delete(j);
    return r;
}

/* ------------------------------------------------------------ Gemma 4 --- */

/*
 * Gemma 4 writes arguments as an object whose strings are quoted with <|"|> (no escapes), whose
 * top-level keys are bare and whose other values are JSON literals: {k:<|"|>v<|"|>,n:1}.
 */
struct g4 {
    const char *s;
    size_t n, at;
};

static cJSON *g4_value(struct g4 *g, int depth);

/* A <|"|>-quoted string, or NULL (not one, or no memory). */
static cJSON *g4_string(struct g4 *g)
{
    if (!chatparse_take(g->s, g->n, &g->at, GEMMA4_QUOTE))
        return NULL;
    size_t end = chatparse_find(g->s, g->n, g->at, GEMMA4_QUOTE);
    if (end == g->n)
        return NULL;
    cJSON *j = string_n(g->s + g->at, end - g->at);
    g->at    = end + strlen(GEMMA4_QUOTE);
    return j;
}

static cJSON *g4_object(struct g4 *g, int depth)
{
    cJSON *obj = cJSON_CreateObject();
    if (!obj)
        return NULL;
    g->at++; /* '{' */
    chatparse_skip_ws(g->s, g->n, &g->at);
    if (g->at < g->n && g->s[g->at] == '}') {
        g->at++;
        return obj;
    }
    for (;;) {
        chatparse_skip_ws(g->s, g->n, &g->at);
        cJSON *key    = NULL;
        size_t key_at = g->at, key_end;
        if (g->at < g->n && g->s[g->at] == '<') {
            if (!(key = g4_string(g)))
                break;
            key_end = 0;
        } else {
            while (g->at < g->n && g->s[g->at] != ':' && g->s[g->at] != '}' && g->s[g->at] != ',' &&
                   !chatparse_is_ws(g->s[g->at]))
                g->at++;
            key_end = g->at;
            if (key_end == key_at)
                break;
        }
        chatparse_skip_ws(g->s, g->n, &g->at);
        if (g->at == g->n || g->s[g->at] != ':') {
            cJSON_Delete(key);
            break;
        }
        g->at++;
        cJSON *v = g4_value(g, depth + 1);
        int r    = key ? add_arg(obj, key->valuestring, strlen(key->valuestring), v)
                       : add_arg(obj, g->s + key_at, key_end - key_at, v);
        cJSON_Delete(key);
        if (r < 0)
            break;
        chatparse_skip_ws(g->s, g->n, &g->at);
        if (g->at < g->n && g->s[g->at] == ',') {
            g->at++;
            continue;
        }
        if (g->at < g->n && g->s[g->at] == '}') {
            g->at++;
            return obj;
        }
        break;
    }
    cJSON_Delete(obj);
    return NULL;
}

static cJSON *g4_array(struct g4 *g, int depth)
{
    cJSON *arr = cJSON_CreateArray();
    if (!arr)
        return NULL;
    g->at++; /* '[' */
    chatparse_skip_ws(g->s, g->n, &g->at);
    if (g->at < g->n && g->s[g->at] == ']') {
        g->at++;
        return arr;
    }
    for (;;) {
        cJSON *v = g4_value(g, depth + 1);
        if (!v)
            break;
        cJSON_AddItemToArray(arr, v);
        chatparse_skip_ws(g->s, g->n, &g->at);
        if (g->at < g->n && g->s[g->at] == ',') {
            g->at++;
            continue;
        }
        if (g->at < g->n && g->s[g->at] == ']') {
            g->at++;
            return arr;
        }
        break;
    }
    cJSON_Delete(arr);
    return NULL;
}

static cJSON *g4_value(struct g4 *g, int depth)
{
    if (depth > GEMMA4_DEPTH_MAX)
        return NULL;
    chatparse_skip_ws(g->s, g->n, &g->at);
    if (g->at == g->n)
        return NULL;
    char c = g->s[g->at];
    if (c == '<')
        return g4_string(g);
    if (c == '{')
        return g4_object(g, depth);
    if (c == '[')
        return g4_array(g, depth);
    size_t from = g->at;
    while (g->at < g->n && g->s[g->at] != ',' && g->s[g->at] != '}' && g->s[g->at] != ']')
        g->at++;
    cJSON *j = chatparse_json(g->s + from, g->at - from);
    if (j && (cJSON_IsString(j) || cJSON_IsObject(j) || cJSON_IsArray(j))) {
        cJSON_Delete(j);
        return NULL; /* a JSON string is not Gemma's spelling */
    }
    return j;
}

int chatparse_body_gemma4(struct chatparse *p, const char *s, size_t n)
{
    size_t name_end = chatparse_find(s, n, 0, "{");
    if (name_end == n || !name_ok(s, name_end))
        return REJECT;
    struct g4 g = {s, n, name_end};
    cJSON *args = g4_object(&g, 0);
    if (!args)
        return REJECT;
    chatparse_skip_ws(s, n, &g.at);
    if (g.at != n) {
        cJSON_Delete(args);
        return REJECT;
    }
    return chatparse_pend_add(p, s, name_end, args, NULL);
}

/* ------------------------------------------ units found by chatparse.c --- */

/*
 * gpt-oss: a header [<|start|>ROLE][ to=R]<|channel|>CHANNEL[ to=R][ <|constrain|>json]
 * <|message|>, and for a call (R is functions.NAME) its JSON arguments. Without a recipient
 * the header only switches to reasoning (analysis) or content; the <|end|>, <|call|> or
 * <|return|> after a message is dropped as a marker of its own.
 */
int chatparse_match_harmony(struct chatparse *p, const char *s, size_t n, size_t *used)
{
    size_t lim  = n < HEADER_MAX ? n : HEADER_MAX;
    size_t hend = chatparse_find(s, lim, 0, HARMONY_MESSAGE);
    if (hend == lim)
        return n >= HEADER_MAX ? REJECT : NEED_MORE;
    size_t ch = chatparse_find(s, hend, 0, HARMONY_CHANNEL);
    if (ch == hend)
        return REJECT;
    size_t c_at = ch + strlen(HARMONY_CHANNEL), c_end = c_at;
    while (c_end < hend && !chatparse_is_ws(s[c_end]) && s[c_end] != '<')
        c_end++;
    size_t to   = chatparse_find(s, hend, 0, " to=");
    size_t body = hend + strlen(HARMONY_MESSAGE);
    if (to == hend) {
        size_t cl = c_end - c_at;
        if (cl == 8 && !memcmp(s + c_at, "analysis", 8))
            p->after = p->o.split_reasoning ? MODE_REASONING : MODE_CONTENT;
        else if (!(cl == 5 && !memcmp(s + c_at, "final", 5)) &&
                 !(cl == 10 && !memcmp(s + c_at, "commentary", 10)))
            return REJECT;
        *used = body;
        return ACCEPT;
    }
    size_t name_at = to + strlen(" to=");
    if (!p->o.parse_tools || !chatparse_take(s, hend, &name_at, "functions."))
        return REJECT;
    size_t name_end = name_at;
    while (name_end < hend && !chatparse_is_ws(s[name_end]) && s[name_end] != '<')
        name_end++;
    return chatparse_take_args(p, s, n, body, true, s + name_at, name_end - name_at, NULL, used);
}

/*
 * functionary v3.2: after >>> (or at the start) a recipient and a newline; "all" is content
 * that follows, any other name a call whose JSON arguments follow.
 */
int chatparse_match_f32(struct chatparse *p, const char *s, size_t n, size_t *used)
{
    size_t at = p->call_mlen, name_at = at;
    while (at < n && at - name_at < HEADER_MAX && s[at] != '\n') {
        char c = s[at++];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.'))
            return REJECT;
    }
    if (at == n)
        return NEED_MORE;
    if (s[at] != '\n' || at == name_at)
        return REJECT;
    size_t name_end = at++;
    if (name_end - name_at == 3 && !memcmp(s + name_at, "all", 3)) {
        *used = at;
        return ACCEPT;
    }
    if (!p->o.parse_tools)
        return REJECT;
    return chatparse_take_args(p, s, n, at, true, s + name_at, name_end - name_at, NULL, used);
}

/* Granite's <|tool_call|>[..] and Command-R's Action: ```json [..] ```: a JSON array. */
int chatparse_match_array(struct chatparse *p, const char *s, size_t n, size_t *used)
{
    bool cohere = p->call_kind == CALL_CMDR;
    size_t at   = p->call_mlen;
    chatparse_skip_ws(s, n, &at);
    if (cohere) {
        enum prefix pr = chatparse_prefix(s + at, n - at, "```json");
        if (pr != PREFIX_FULL)
            return pr == PREFIX_PART ? NEED_MORE : REJECT;
        at += strlen("```json");
        chatparse_skip_ws(s, n, &at);
    }
    if (at == n)
        return NEED_MORE;
    if (s[at] != '[')
        return REJECT;
    size_t e = chatparse_extent(p, s, n, at), end = e;
    if (!e)
        return NEED_MORE;
    if (cohere) {
        chatparse_skip_ws(s, n, &end);
        enum prefix pr = chatparse_prefix(s + end, n - end, "```");
        if (pr != PREFIX_FULL)
            return pr == PREFIX_PART || end == n ? NEED_MORE : REJECT;
        end += 3;
    }
    *used = end;
    return chatparse_body_array(p, s + at, e - at, cohere);
}

/* The forms whose unit ends at a closing marker: the body between the two is judged. */
int chatparse_match_closed(struct chatparse *p, const char *s, size_t n, size_t *used)
{
    const char *close = p->call_kind == CALL_GLM       ? TOOL_CALL_CLOSE
                        : p->call_kind == CALL_KIMI    ? KIMI_SECTION_END
                        : p->call_kind == CALL_MINIMAX ? MINIMAX_CLOSE
                        : p->call_kind == CALL_SEED    ? SEED_CLOSE
                        : p->call_kind == CALL_F31     ? FUNCTIONARY_CLOSE
                        : p->call_kind == CALL_R7B     ? R7B_ACTION_END
                                                       : GEMMA4_CLOSE;
    size_t m = p->call_mlen, e = chatparse_find_close(p, s, n, close);
    if (e == n)
        return NEED_MORE;
    *used         = e + strlen(close);
    const char *b = s + m;
    size_t bn     = e - m;
    switch (p->call_kind) {
    case CALL_GLM:
        return chatparse_body_glm(p, b, bn);
    case CALL_KIMI:
        return chatparse_body_kimi(p, b, bn);
    case CALL_MINIMAX:
        return chatparse_body_minimax(p, b, bn);
    case CALL_SEED:
        return chatparse_body_xml(p, b, bn);
    case CALL_F31:
        return chatparse_body_functionary(p, b, bn);
    case CALL_R7B:
        return chatparse_body_array(p, b, bn, true);
    default:
        return chatparse_body_gemma4(p, b, bn);
    }
}
