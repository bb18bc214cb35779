/*
 * chatparse.c: reasoning, content and tool calls out of generated text
 * (contracts in chatparse.h).
 *
 * The parser keeps the bytes not yet settled in buf and is in one of three
 * modes: reasoning text, content text, or holding a call. Every decision
 * (is this a marker, is this call complete and valid) is taken only when no
 * later byte can change it: a text mode holds back a possible marker
 * prefix, trailing whitespace and a cut UTF-8 character; a held call is
 * judged only on bytes up to its end, found by a search that looks no
 * further than call_max bytes. That is what makes the deltas independent
 * of the chunking, and it is all chatparse_finish changes: at the end of
 * the generation nothing more can come, so everything held is decided.
 *
 * Arguments are parsed and printed again with cJSON, which writes compact
 * JSON and copies UTF-8 through unescaped.
 */
#include "chat/chatparse.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chatparse_int.h"
#include "util/rng.h"

/* ------------------------------------------------------------ markers --- */

#define MISTRAL_NAME_MAX 256 /* bytes of a [TOOL_CALLS]NAME before [ARGS] or [CALL_ID] */
#define MISTRAL_ID_MAX   64
/* Calls given back as text may have been judged on this many times call_max bytes in all;
 * then the parse stops looking for calls, so that output made of markers costs linear time */
#define CALL_REJECT_BUDGET 4

/* clang-format off */
static const char *const tools_names[] = {
    [CHATPARSE_TOOLS_NONE]            = "none",
    [CHATPARSE_TOOLS_HERMES]          = "hermes",
    [CHATPARSE_TOOLS_QWEN3_CODER]     = "qwen3-coder",
    [CHATPARSE_TOOLS_LLAMA3]          = "llama3",
    [CHATPARSE_TOOLS_MISTRAL]         = "mistral",
    [CHATPARSE_TOOLS_DEEPSEEK_R1]     = "deepseek-r1",
    [CHATPARSE_TOOLS_DEEPSEEK_V31]    = "deepseek-v3.1",
    [CHATPARSE_TOOLS_HARMONY]         = "gpt-oss",
    [CHATPARSE_TOOLS_GLM]             = "glm",
    [CHATPARSE_TOOLS_KIMI]            = "kimi-k2",
    [CHATPARSE_TOOLS_MINIMAX]         = "minimax-m2",
    [CHATPARSE_TOOLS_SEED_OSS]        = "seed-oss",
    [CHATPARSE_TOOLS_GRANITE]         = "granite",
    [CHATPARSE_TOOLS_FUNCTIONARY_V31] = "functionary-v3.1",
    [CHATPARSE_TOOLS_FUNCTIONARY_V32] = "functionary-v3.2",
    [CHATPARSE_TOOLS_COMMAND_R]       = "command-r",
    [CHATPARSE_TOOLS_COMMAND_R7B]     = "command-r7b",
    [CHATPARSE_TOOLS_GEMMA4]          = "gemma4",
};
/* clang-format on */

const char *chatparse_tools_name(enum chatparse_tools t)
{
    if ((unsigned)t >= sizeof tools_names / sizeof tools_names[0] || !tools_names[t])
        return "unknown";
    return tools_names[t];
}

/* ---------------------------------------------------------- detection --- */

/* The reasoning markers of families that do not write <think>, first match wins. */
/* clang-format off */
static const char *const think_pairs[][3] = {
    /* a string the template holds, think_open, think_close */
    {"<|channel|>analysis<|message|>", "<|channel|>analysis<|message|>", "<|end|>"},
    {"<seed:think>", "<seed:think>", "</seed:think>"},
    {"<|START_THINKING|>", "<|START_THINKING|>", "<|END_THINKING|>"},
    {"<|channel>thought", "<|channel>thought", "<channel|>"},
    {"<think>", "<think>", "</think>"},
    {"[THINK]", "[THINK]", "[/THINK]"},
};
/* clang-format on */

void chatparse_detect(const char *src, struct chatparse_format *out)
{
    if (!src)
        src = "";
    memset(out, 0, sizeof *out);
    bool tool_call = strstr(src, TOOL_CALL_OPEN) != NULL;
    bool function  = strstr(src, "<function=") != NULL;
    bool llama     = strstr(src, "<|start_header_id|>") != NULL;
    if (strstr(src, DS_CALLS_BEGIN) && strstr(src, DS_SEP))
        /* R1 wraps the arguments in a ```json fence after "function<｜tool▁sep｜>NAME";
         * V3.1 writes NAME<｜tool▁sep｜> and the bare JSON */
        out->tools =
            strstr(src, "```json") ? CHATPARSE_TOOLS_DEEPSEEK_R1 : CHATPARSE_TOOLS_DEEPSEEK_V31;
    else if (strstr(src, MISTRAL_CALLS))
        out->tools = CHATPARSE_TOOLS_MISTRAL;
    else if (strstr(src, HARMONY_CHANNEL) && strstr(src, HARMONY_MESSAGE) && strstr(src, "to="))
        out->tools = CHATPARSE_TOOLS_HARMONY;
    else if (strstr(src, KIMI_SECTION_BEGIN))
        out->tools = CHATPARSE_TOOLS_KIMI;
    else if (strstr(src, MINIMAX_OPEN))
        out->tools = CHATPARSE_TOOLS_MINIMAX;
    else if (strstr(src, SEED_OPEN))
        out->tools = CHATPARSE_TOOLS_SEED_OSS;
    else if (strstr(src, GRANITE_OPEN))
        out->tools = CHATPARSE_TOOLS_GRANITE;
    else if (strstr(src, R7B_ACTION))
        out->tools = CHATPARSE_TOOLS_COMMAND_R7B;
    else if (strstr(src, GEMMA4_OPEN))
        out->tools = CHATPARSE_TOOLS_GEMMA4;
    else if (tool_call && strstr(src, "<arg_key>"))
        out->tools = CHATPARSE_TOOLS_GLM;
    else if (tool_call && strstr(src, "<invoke name="))
        out->tools = CHATPARSE_TOOLS_NONE; /* MiniMax M3's namespaced tokens: not known */
    else if (tool_call)
        out->tools = function ? CHATPARSE_TOOLS_QWEN3_CODER : CHATPARSE_TOOLS_HERMES;
    else if (llama && function)
        out->tools = CHATPARSE_TOOLS_FUNCTIONARY_V31;
    else if (llama && strstr(src, ">>>all"))
        out->tools = CHATPARSE_TOOLS_FUNCTIONARY_V32;
    else if (llama && (strstr(src, PYTHON_TAG) || strstr(src, "\"parameters\"")))
        out->tools = CHATPARSE_TOOLS_LLAMA3;
    else if (strstr(src, "Action:") && strstr(src, "```json") && strstr(src, "tool_name"))
        out->tools = CHATPARSE_TOOLS_COMMAND_R;

    for (size_t i = 0; i < sizeof think_pairs / sizeof think_pairs[0]; i++)
        if (strstr(src, think_pairs[i][0]) && strstr(src, think_pairs[i][2])) {
            out->think_open  = think_pairs[i][1];
            out->think_close = think_pairs[i][2];
            break;
        }
}

/* Each syntax's markers, for chatparse_markers (the reasoning ones are added there). */
/* clang-format off */
static const char *const syntax_markers[][CHATPARSE_MARKERS_MAX - 2] = {
    [CHATPARSE_TOOLS_HERMES]       = {TOOL_CALL_OPEN, TOOL_CALL_CLOSE},
    [CHATPARSE_TOOLS_QWEN3_CODER]  = {TOOL_CALL_OPEN, TOOL_CALL_CLOSE},
    [CHATPARSE_TOOLS_LLAMA3]       = {PYTHON_TAG},
    [CHATPARSE_TOOLS_MISTRAL]      = {MISTRAL_CALLS, MISTRAL_ARGS, MISTRAL_CALL_ID},
    [CHATPARSE_TOOLS_DEEPSEEK_R1]  = {DS_CALLS_BEGIN, DS_CALLS_END, DS_CALL_BEGIN, DS_CALL_END,
                                      DS_SEP},
    [CHATPARSE_TOOLS_DEEPSEEK_V31] = {DS_CALLS_BEGIN, DS_CALLS_END, DS_CALL_BEGIN, DS_CALL_END,
                                      DS_SEP},
    [CHATPARSE_TOOLS_HARMONY]  = {HARMONY_START, HARMONY_CHANNEL, HARMONY_MESSAGE, "<|constrain|>",
                                  "<|end|>", "<|call|>", "<|return|>"},
    [CHATPARSE_TOOLS_GLM]      = {TOOL_CALL_OPEN, TOOL_CALL_CLOSE, "<arg_key>", "</arg_key>",
                                  "<arg_value>", "</arg_value>"},
    [CHATPARSE_TOOLS_KIMI]     = {KIMI_SECTION_BEGIN, KIMI_SECTION_END, "<|tool_call_begin|>",
                                  "<|tool_call_argument_begin|>", "<|tool_call_end|>"},
    [CHATPARSE_TOOLS_MINIMAX]  = {MINIMAX_OPEN, MINIMAX_CLOSE},
    [CHATPARSE_TOOLS_SEED_OSS] = {SEED_OPEN, SEED_CLOSE},
    [CHATPARSE_TOOLS_GRANITE]  = {GRANITE_OPEN},
    [CHATPARSE_TOOLS_FUNCTIONARY_V31] = {PYTHON_TAG},
    [CHATPARSE_TOOLS_COMMAND_R7B]     = {R7B_ACTION, R7B_ACTION_END, "<|START_RESPONSE|>",
                                         "<|END_RESPONSE|>"},
    [CHATPARSE_TOOLS_GEMMA4]          = {GEMMA4_OPEN, GEMMA4_CLOSE, "<|\"|>"},
};
/* clang-format on */

size_t chatparse_markers(const struct chatparse_format *f, const char **out)
{
    size_t n = 0;
    if (f->think_open && f->think_close) {
        out[n++] = f->think_open;
        out[n++] = f->think_close;
    }
    if ((unsigned)f->tools < sizeof syntax_markers / sizeof syntax_markers[0])
        for (size_t i = 0; i < CHATPARSE_MARKERS_MAX - 2 && syntax_markers[f->tools][i]; i++)
            out[n++] = syntax_markers[f->tools][i];
    return n;
}

/* The last occurrence of needle (nlen >= 1) in s[0, n), or NULL. */
static const char *find_last(const char *s, size_t n, const char *needle, size_t nlen)
{
    for (size_t i = n; i >= nlen; i--)
        if (!memcmp(s + i - nlen, needle, nlen))
            return s + i - nlen;
    return NULL;
}

bool chatparse_prompt_opens_thinking(const struct chatparse_format *f, const char *prompt,
                                     size_t len)
{
    if (!f->think_open || !f->think_close || !prompt)
        return false;
    size_t olen = strlen(f->think_open), clen = strlen(f->think_close);
    const char *open = find_last(prompt, len, f->think_open, olen);
    if (!open)
        return false;
    const char *after = open + olen;
    return !memmem(after, (size_t)(prompt + len - after), f->think_close, clen);
}

/* ------------------------------------------------------------- deltas --- */

void chatparse_deltas_clear(struct chatparse_deltas *d)
{
    for (size_t i = 0; i < d->n; i++) {
        free(d->v[i].text);
        free(d->v[i].id);
        free(d->v[i].name);
    }
    d->n = 0;
}

void chatparse_deltas_free(struct chatparse_deltas *d)
{
    chatparse_deltas_clear(d);
    free(d->v);
    d->v   = NULL;
    d->cap = 0;
}

char *chatparse_dup_n(const char *s, size_t n)
{
    char *r = malloc(n + 1);
    if (r) {
        memcpy(r, s, n);
        r[n] = 0;
    }
    return r;
}

static struct chatparse_delta *deltas_push(struct chatparse_deltas *d)
{
    if (d->n == d->cap) {
        size_t cap                = d->cap ? 2 * d->cap : 8;
        struct chatparse_delta *v = realloc(d->v, cap * sizeof *v);
        if (!v)
            return NULL;
        d->v   = v;
        d->cap = cap;
    }
    struct chatparse_delta *e = &d->v[d->n];
    memset(e, 0, sizeof *e);
    e->index = -1;
    return e;
}

/*
 * Appends text of a kind, joining it to the last delta when that is the same kind and call
 * and was added since d held `first` deltas (a caller may keep the earlier ones in its list).
 */
static bool emit_text(struct chatparse_deltas *d, size_t first, enum chatparse_delta_kind kind,
                      int32_t index, const char *s, size_t n)
{
    if (!n)
        return true;
    struct chatparse_delta *last = d->n > first ? &d->v[d->n - 1] : NULL;
    if (last && last->kind == kind && last->index == index && last->text) {
        char *t = last->text;
        if (last->text_len + n + 1 > last->text_cap) {
            /* doubling: a feed may join many small pieces (a run of rejected markers) */
            size_t cap = 2 * (last->text_len + n + 1);
            if (!(t = realloc(last->text, cap)))
                return false;
            last->text_cap = cap;
        }
        memcpy(t + last->text_len, s, n);
        last->text_len += n;
        t[last->text_len] = 0;
        last->text        = t;
        return true;
    }
    char *t                   = chatparse_dup_n(s, n);
    struct chatparse_delta *e = t ? deltas_push(d) : NULL;
    if (!e) {
        free(t);
        return false;
    }
    e->kind     = kind;
    e->index    = index;
    e->text     = t;
    e->text_len = n;
    e->text_cap = n + 1;
    d->n++;
    return true;
}

/* ---------------------------------------------------------- the parser --- */

static void start_call(struct chatparse *p, enum call_kind kind, size_t ws, size_t mlen);
static void trim(const char **s, size_t *n);

/* Fills p->params from p->o.tools for the forms whose values are bare; false: no memory. */
static bool string_params(struct chatparse *p)
{
    switch (p->f.tools) {
    case CHATPARSE_TOOLS_QWEN3_CODER:
    case CHATPARSE_TOOLS_HERMES: /* takes Qwen3-Coder's body too */
    case CHATPARSE_TOOLS_GLM:
    case CHATPARSE_TOOLS_MINIMAX:
    case CHATPARSE_TOOLS_SEED_OSS:
        break;
    default:
        return true;
    }
    if (!(p->params = cJSON_CreateObject()))
        return false;
    const cJSON *tool;
    cJSON_ArrayForEach(tool, p->o.tools)
    {
        const cJSON *fn    = cJSON_GetObjectItemCaseSensitive(tool, "function");
        const cJSON *name  = cJSON_GetObjectItemCaseSensitive(fn, "name");
        const cJSON *props = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(fn, "parameters"), "properties");
        if (!cJSON_IsString(name) || !cJSON_IsObject(props) ||
            cJSON_GetObjectItemCaseSensitive(p->params, name->valuestring))
            continue;
        cJSON *set = cJSON_AddObjectToObject(p->params, name->valuestring);
        if (!set)
            return false;
        const cJSON *prop;
        cJSON_ArrayForEach(prop, props)
        {
            const cJSON *type = cJSON_GetObjectItemCaseSensitive(prop, "type");
            if (prop->string && cJSON_IsString(type) && !strcmp(type->valuestring, "string") &&
                !cJSON_AddTrueToObject(set, prop->string))
                return false;
        }
    }
    return true;
}

bool chatparse_param_string(const struct chatparse *p, const char *fn, size_t fn_len,
                            const char *key, size_t key_len)
{
    if (!p->params)
        return false;
    char name[256], k[256];
    trim(&fn, &fn_len);
    if (fn_len >= sizeof name || key_len >= sizeof k)
        return false;
    memcpy(name, fn, fn_len);
    name[fn_len] = 0;
    memcpy(k, key, key_len);
    k[key_len] = 0;
    return cJSON_IsTrue(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(p->params, name), k));
}

struct chatparse *chatparse_new(const struct chatparse_format *f, const struct chatparse_opts *opts)
{
    struct chatparse *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->f = *f;
    if (opts)
        p->o = *opts;
    else
        p->o = (struct chatparse_opts){.parse_tools = true, .split_reasoning = true};
    if (!p->o.call_max)
        p->o.call_max = CHATPARSE_CALL_MAX;
    if (!f->think_open || !f->think_close || !*f->think_open || !*f->think_close) {
        p->f.think_open = p->f.think_close = NULL;
        p->o.split_reasoning               = false;
    }
    if (p->f.tools == CHATPARSE_TOOLS_NONE)
        p->o.parse_tools = false;
    if (!p->o.split_reasoning)
        p->o.start_in_reasoning = false;
    p->mode        = p->o.start_in_reasoning ? MODE_REASONING : MODE_CONTENT;
    p->trim_lead   = true;
    p->out_start   = p->o.split_reasoning;
    p->llama_start = p->o.parse_tools && p->f.tools == CHATPARSE_TOOLS_LLAMA3;
    if (p->o.parse_tools && p->o.tools && !string_params(p)) {
        chatparse_free(p);
        return NULL;
    }
    p->o.tools = NULL; /* the caller's: not kept */
    if (p->f.tools == CHATPARSE_TOOLS_FUNCTIONARY_V32)
        start_call(p, CALL_F32, 0, 0); /* the prompt ended in >>>: a recipient comes first */
    return p;
}

static void pend_clear(struct chatparse *p)
{
    for (size_t i = 0; i < p->n_pend; i++) {
        free(p->pend[i].id);
        free(p->pend[i].name);
        free(p->pend[i].arguments);
    }
    p->n_pend = 0;
}

void chatparse_free(struct chatparse *p)
{
    if (!p)
        return;
    pend_clear(p);
    free(p->pend);
    free(p->base);
    cJSON_Delete(p->params);
    free(p);
}

bool chatparse_has_tool_calls(const struct chatparse *p)
{
    return p->n_calls > 0;
}

static void consume(struct chatparse *p, size_t n)
{
    p->buf += n;
    p->len -= n;
    p->close_free = p->close_free > n ? p->close_free - n : 0;
    p->ws_held    = p->ws_held > n ? p->ws_held - n : 0;
}

/* The one marker that opens a call, for the formats whose content holds no other unit. */
/* clang-format off */
static const struct marker call_open[CHATPARSE_TOOLS_COUNT] = {
    [CHATPARSE_TOOLS_HERMES]          = {TOOL_CALL_OPEN, CALL_HERMES},
    [CHATPARSE_TOOLS_QWEN3_CODER]     = {TOOL_CALL_OPEN, CALL_XML},
    [CHATPARSE_TOOLS_MISTRAL]         = {MISTRAL_CALLS, CALL_MISTRAL},
    [CHATPARSE_TOOLS_DEEPSEEK_R1]     = {DS_CALLS_BEGIN, CALL_DS_R1},
    [CHATPARSE_TOOLS_DEEPSEEK_V31]    = {DS_CALLS_BEGIN, CALL_DS_V31},
    [CHATPARSE_TOOLS_GLM]             = {TOOL_CALL_OPEN, CALL_GLM},
    [CHATPARSE_TOOLS_KIMI]            = {KIMI_SECTION_BEGIN, CALL_KIMI},
    [CHATPARSE_TOOLS_MINIMAX]         = {MINIMAX_OPEN, CALL_MINIMAX},
    [CHATPARSE_TOOLS_SEED_OSS]        = {SEED_OPEN, CALL_SEED},
    [CHATPARSE_TOOLS_GRANITE]         = {GRANITE_OPEN, CALL_GRANITE},
    [CHATPARSE_TOOLS_FUNCTIONARY_V31] = {FUNCTIONARY_OPEN, CALL_F31},
    [CHATPARSE_TOOLS_COMMAND_R]       = {COMMAND_R_ACTION, CALL_CMDR},
    [CHATPARSE_TOOLS_GEMMA4]          = {GEMMA4_OPEN, CALL_GEMMA4},
};
/* clang-format on */

/*
 * The markers that open a unit in content text (Llama 3's only open a content run) into m
 * (MARKERS_MAX of room); returns how many. The structure of gpt-oss, functionary v3.2 and
 * Command R7B's output is parsed with or without tools; their calls only with.
 */
static size_t content_markers(const struct chatparse *p, struct marker *m)
{
    if (p->units_off)
        return 0;
    size_t k   = 0;
    bool tools = p->o.parse_tools;
    switch (p->f.tools) {
    case CHATPARSE_TOOLS_HARMONY:
        m[k++] = (struct marker){HARMONY_START, CALL_HARMONY};
        m[k++] = (struct marker){HARMONY_CHANNEL, CALL_HARMONY};
        m[k++] = (struct marker){"<|end|>", CALL_STRIP};
        m[k++] = (struct marker){"<|return|>", CALL_STRIP};
        m[k++] = (struct marker){"<|call|>", CALL_STRIP};
        return k;
    case CHATPARSE_TOOLS_FUNCTIONARY_V32:
        m[k++] = (struct marker){FUNCTIONARY_RECIP, CALL_F32};
        return k;
    case CHATPARSE_TOOLS_COMMAND_R7B:
        m[k++] = (struct marker){"<|START_RESPONSE|>", CALL_STRIP};
        m[k++] = (struct marker){"<|END_RESPONSE|>", CALL_STRIP};
        if (tools)
            m[k++] = (struct marker){R7B_ACTION, CALL_R7B};
        return k;
    default:
        break;
    }
    if (!tools || (unsigned)p->f.tools >= CHATPARSE_TOOLS_COUNT || !call_open[p->f.tools].lit)
        return 0;
    m[0] = call_open[p->f.tools];
    return 1;
}

/* Bytes at the end of s[0, n) that begin a UTF-8 character still missing bytes. */
static size_t utf8_cut(const char *s, size_t n)
{
    for (size_t k = 1; k <= 3 && k <= n; k++) {
        unsigned char c = (unsigned char)s[n - k];
        if ((c & 0xC0) == 0x80)
            continue; /* a continuation byte: its lead is further back */
        size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        return need > k ? k : 0;
    }
    return 0;
}

static void start_call(struct chatparse *p, enum call_kind kind, size_t ws, size_t mlen)
{
    p->mode      = MODE_CALL;
    p->call_kind = kind;
    p->call_ws   = ws;
    p->call_mlen = mlen;
    p->scan      = mlen;
    p->after     = MODE_CONTENT;
    p->streaming = p->stream_tried = false;
    p->js_at                       = 0;
    memset(&p->js, 0, sizeof p->js);
}

/*
 * Llama 3's calls open only the content (or follow a call, after an optional ';'): checks
 * buf for one. Returns 1 when a call was started, 0 when buf holds none, -1 when more
 * bytes are needed to tell.
 */
static int llama_open(struct chatparse *p, bool at_end)
{
    size_t i = 0;
    if (p->after_llama && p->buf[0] == ';') {
        for (i = 1; i < p->len && chatparse_is_ws(p->buf[i]); i++)
            ;
        if (i == p->len)
            return at_end ? 0 : -1;
    }
    if (p->buf[i] == '{') {
        start_call(p, CALL_LLAMA_BRACE, i, 1);
        return 1;
    }
    enum prefix pr = chatparse_prefix(p->buf + i, p->len - i, PYTHON_TAG);
    if (pr == PREFIX_FULL) {
        start_call(p, CALL_LLAMA_TAG, i, strlen(PYTHON_TAG));
        return 1;
    }
    return pr == PREFIX_PART && !at_end ? -1 : 0;
}

/*
 * One step in a text mode. Returns 1 when it made progress (consumed bytes or changed
 * mode), 0 when it needs more input, -1 when out of memory.
 */
static int text_step(struct chatparse *p, bool at_end, struct chatparse_deltas *out)
{
    enum chatparse_delta_kind kind =
        p->mode == MODE_REASONING ? CHATPARSE_REASONING : CHATPARSE_CONTENT;
    if (p->trim_lead) {
        size_t i = 0;
        while (i < p->len && chatparse_is_ws(p->buf[i]))
            i++;
        if (i)
            consume(p, i);
        if (!p->len)
            return 0;
    }
    if (p->out_start) {
        enum prefix pr = chatparse_prefix(p->buf, p->len, p->f.think_open);
        if (pr == PREFIX_PART && !at_end)
            return 0;
        p->out_start = false;
        if (pr == PREFIX_FULL) {
            consume(p, strlen(p->f.think_open));
            p->mode      = MODE_REASONING;
            p->trim_lead = true;
            return 1;
        }
    }
    if (p->mode == MODE_CONTENT && p->llama_start) {
        int r = llama_open(p, at_end);
        if (r < 0)
            return 0;
        if (r > 0)
            return 1;
        p->llama_start = p->after_llama = false;
    }

    struct marker ms[MARKERS_MAX];
    size_t n_ms = 0;
    if (p->mode == MODE_REASONING)
        ms[n_ms++] = (struct marker){p->f.think_close, CALL_STRIP};
    else
        n_ms = content_markers(p, ms);
    size_t cut  = p->len; /* text ends here */
    bool marker = false;
    size_t mlen = 0, which = 0;
    /* whitespace held from the last step was searched then (and no marker starts with it):
     * a long run of it, fed a byte at a time, is not searched again and again */
    for (size_t i = p->ws_held < p->len ? p->ws_held : p->len; n_ms && i < cut; i++)
        for (size_t k = 0; k < n_ms; k++) {
            if (p->buf[i] != ms[k].lit[0])
                continue;
            enum prefix pr = chatparse_prefix(p->buf + i, p->len - i, ms[k].lit);
            if (pr == PREFIX_FULL || (pr == PREFIX_PART && !at_end)) {
                cut    = i;
                marker = pr == PREFIX_FULL;
                mlen   = strlen(ms[k].lit);
                which  = k;
                break;
            }
        }
    if (cut == p->len && !at_end)
        cut -= utf8_cut(p->buf, cut);
    size_t end = cut;
    while (end > p->ws_held && chatparse_is_ws(p->buf[end - 1]))
        end--;
    if (end <= p->ws_held)
        end = 0; /* all whitespace up to the cut */
    if (end) {
        if (!emit_text(out, p->out_first, kind, -1, p->buf, end))
            return -1;
        p->trim_lead = false;
    }
    if (!marker) {
        /* at the end the trailing whitespace goes; before it, it waits for what follows */
        consume(p, at_end ? p->len : end);
        p->ws_held = at_end ? 0 : cut - end;
        return end > 0;
    }
    if (p->mode == MODE_REASONING) {
        consume(p, cut + mlen);
        p->mode        = MODE_CONTENT;
        p->trim_lead   = true;
        p->llama_start = p->o.parse_tools && p->f.tools == CHATPARSE_TOOLS_LLAMA3;
        return 1;
    }
    consume(p, end);
    start_call(p, ms[which].kind, cut - end, mlen);
    return 1;
}

/* ------------------------------------------------------- call parsing --- */

/* s[0, n) without whitespace at either end. */
static void trim(const char **s, size_t *n)
{
    while (*n && chatparse_is_ws(**s)) {
        (*s)++;
        (*n)--;
    }
    while (*n && chatparse_is_ws((*s)[*n - 1]))
        (*n)--;
}

cJSON *chatparse_json(const char *s, size_t n)
{
    trim(&s, &n);
    if (!n)
        return NULL;
    const char *end = NULL;
    cJSON *j        = cJSON_ParseWithLengthOpts(s, n, &end, false);
    if (j && end != s + n) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

/* A fresh id for call index: "call_" and 24 alphanumerics, or Mistral's 9 alphanumerics. */
static char *make_id(const struct chatparse *p, int32_t index)
{
    static const char alnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    bool mistral              = p->f.tools == CHATPARSE_TOOLS_MISTRAL;
    const char *prefix        = mistral ? "" : "call_";
    size_t n_rand             = mistral ? 9 : 24;
    char id[40];
    size_t k   = strlen(prefix);
    uint64_t x = p->o.id_seed ^ (0xD1B54A32D192ED03ull * (uint64_t)(index + 1));
    memcpy(id, prefix, k);
    for (size_t i = 0; i < n_rand; i++)
        id[k++] = alnum[splitmix64(&x) % (sizeof alnum - 1)];
    id[k] = 0;
    return chatparse_dup_n(id, k);
}

/* Whether a model's own call id is fit to pass on: 1 to 64 of [A-Za-z0-9_-]. */
static bool id_ok(const char *id)
{
    size_t n = id ? strlen(id) : 0;
    if (!n || n > MISTRAL_ID_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = id[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-'))
            return false;
    }
    return true;
}

/*
 * Adds a call to the held unit: name (name_len bytes) and arguments (an object, or a string
 * that holds one; taken over by this call). id may be NULL. Returns ACCEPT, REJECT when the
 * call is not valid, or -1 when out of memory. An id that is not id_ok is replaced.
 */
int chatparse_pend_add(struct chatparse *p, const char *name, size_t name_len, cJSON *args,
                       const char *id)
{
    trim(&name, &name_len);
    if (args && cJSON_IsString(args)) {
        /* some fine-tunes write the arguments as a JSON string, as OpenAI sends them */
        const char *s = cJSON_GetStringValue(args);
        cJSON *inner  = chatparse_json(s, strlen(s));
        cJSON_Delete(args);
        args = inner;
    }
    if (!name_len || memchr(name, 0, name_len) || !args || !cJSON_IsObject(args)) {
        cJSON_Delete(args);
        return REJECT;
    }
    if (p->n_pend == p->cap_pend) {
        size_t cap               = p->cap_pend ? 2 * p->cap_pend : 4;
        struct chatparse_call *v = realloc(p->pend, cap * sizeof *v);
        if (!v) {
            cJSON_Delete(args);
            return -1;
        }
        p->pend     = v;
        p->cap_pend = cap;
    }
    struct chatparse_call *c = &p->pend[p->n_pend];
    c->arguments             = cJSON_PrintUnformatted(args);
    cJSON_Delete(args);
    c->name = chatparse_dup_n(name, name_len);
    c->id =
        id_ok(id) ? chatparse_dup_n(id, strlen(id)) : make_id(p, p->n_calls + (int32_t)p->n_pend);
    p->n_pend++;
    if (!c->arguments || !c->name || !c->id)
        return -1;
    return ACCEPT;
}

/* One {"name": .., "arguments"|"parameters": {..}} object of Hermes, Llama 3, Mistral. */
int chatparse_pend_object(struct chatparse *p, const cJSON *o, bool need_args, bool take_id)
{
    if (!cJSON_IsObject(o))
        return REJECT;
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(o, "name");
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(o, "arguments");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(o, "type");
    const cJSON *id   = cJSON_GetObjectItemCaseSensitive(o, "id");
    if (!args)
        args = cJSON_GetObjectItemCaseSensitive(o, "parameters");
    if (!cJSON_IsString(name) ||
        (type && !(cJSON_IsString(type) && !strcmp(type->valuestring, "function"))))
        return REJECT;
    if (!args && need_args)
        return REJECT;
    cJSON *a = args ? cJSON_Duplicate(args, true) : cJSON_CreateObject();
    if (!a)
        return -1;
    const char *ids = take_id && cJSON_IsString(id) ? id->valuestring : NULL;
    return chatparse_pend_add(p, name->valuestring, strlen(name->valuestring), a, ids);
}

/* Hermes: s[0, n) is the JSON between <tool_call> and </tool_call>. */
static int parse_hermes(struct chatparse *p, const char *s, size_t n)
{
    cJSON *j = chatparse_json(s, n);
    int r    = j ? chatparse_pend_object(p, j, false, false) : REJECT;
    cJSON_Delete(j);
    return r;
}

/* Llama 3: s[0, n) is one JSON object. */
static int parse_llama(struct chatparse *p, const char *s, size_t n)
{
    cJSON *j = chatparse_json(s, n);
    int r    = j ? chatparse_pend_object(p, j, true, false) : REJECT;
    cJSON_Delete(j);
    return r;
}

/* Mistral's older form: s[0, n) is the JSON array after [TOOL_CALLS]. */
static int parse_mistral_array(struct chatparse *p, const char *s, size_t n)
{
    cJSON *j = chatparse_json(s, n);
    int r    = cJSON_IsArray(j) && cJSON_GetArraySize(j) > 0 ? ACCEPT : REJECT;
    const cJSON *o;
    cJSON_ArrayForEach(o, j)
    {
        if (r != ACCEPT)
            break;
        r = chatparse_pend_object(p, o, false, true);
    }
    cJSON_Delete(j);
    return r;
}

/* DeepSeek: s[0, n) is what lies between <｜tool▁calls▁begin｜> and <｜tool▁calls▁end｜>. */
static int parse_deepseek(struct chatparse *p, const char *s, size_t n, bool r1)
{
    size_t at = 0;
    int r     = REJECT;
    for (;;) {
        chatparse_skip_ws(s, n, &at);
        if (at == n)
            return r; /* ACCEPT after at least one call */
        if (!chatparse_take(s, n, &at, DS_CALL_BEGIN))
            return REJECT;
        size_t name_at, name_end, json_at, json_end, next;
        if (r1) {
            /* function<｜tool▁sep｜>NAME\n```json\n{..}\n```<｜tool▁call▁end｜> */
            size_t sep = chatparse_find(s, n, at, DS_SEP);
            if (sep == n)
                return REJECT;
            name_at  = sep + strlen(DS_SEP);
            name_end = chatparse_find(s, n, name_at, "\n");
            at       = name_end;
            chatparse_skip_ws(s, n, &at);
            if (!chatparse_take(s, n, &at, "```json") && !chatparse_take(s, n, &at, "```"))
                return REJECT;
            json_at  = at;
            json_end = chatparse_find(s, n, at, "```");
            next     = json_end + 3;
        } else {
            /* NAME<｜tool▁sep｜>{..}<｜tool▁call▁end｜> */
            name_at  = at;
            name_end = chatparse_find(s, n, at, DS_SEP);
            json_at  = name_end + strlen(DS_SEP);
            json_end = chatparse_find(s, n, json_at, DS_CALL_END);
            next     = json_end;
        }
        if (json_end >= n || memchr(s + name_at, '\n', name_end - name_at))
            return REJECT;
        at = next;
        chatparse_skip_ws(s, n, &at);
        if (!chatparse_take(s, n, &at, DS_CALL_END))
            return REJECT;
        cJSON *args = chatparse_json(s + json_at, json_end - json_at);
        if (!args)
            return REJECT;
        r = chatparse_pend_add(p, s + name_at, name_end - name_at, args, NULL);
        if (r != ACCEPT)
            return r;
    }
}

/* Advances j over s[0, n); returns the end of the JSON value (past its last bracket) or 0. */
static size_t jscan_run(struct jscan *j, const char *s, size_t n)
{
    if (j->done)
        return j->pos;
    for (; j->pos < n; j->pos++) {
        char c = s[j->pos];
        if (j->in_str) {
            if (j->esc)
                j->esc = false;
            else if (c == '\\')
                j->esc = true;
            else if (c == '"')
                j->in_str = false;
        } else if (c == '"') {
            j->in_str = true;
        } else if (c == '{' || c == '[') {
            j->depth++;
        } else if ((c == '}' || c == ']') && --j->depth == 0) {
            j->done = true;
            return ++j->pos;
        }
    }
    return 0;
}

int chatparse_take_args(struct chatparse *p, const char *s, size_t n, size_t at, bool skip_ws,
                        const char *name, size_t name_len, const char *id, size_t *used)
{
    if (skip_ws)
        chatparse_skip_ws(s, n, &at);
    if (at == n)
        return NEED_MORE;
    if (s[at] != '{')
        return REJECT;
    size_t e = chatparse_extent(p, s, n, at);
    if (!e)
        return NEED_MORE;
    *used       = e;
    cJSON *args = chatparse_json(s + at, e - at);
    return args ? chatparse_pend_add(p, name, name_len, args, id) : REJECT;
}

/* The end of the JSON value that starts at s[at] ('{' or '[' wanted there), or 0 for more. */
size_t chatparse_extent(struct chatparse *p, const char *s, size_t n, size_t at)
{
    if (p->js_at != at) {
        memset(&p->js, 0, sizeof p->js);
        p->js_at  = at;
        p->js.pos = at;
    }
    return jscan_run(&p->js, s, n);
}

/*
 * Searches the held call s[0, n) for its closing lit, from where the searches before stopped
 * (this call's or earlier ones'); n when absent.
 */
size_t chatparse_find_close(struct chatparse *p, const char *s, size_t n, const char *lit)
{
    size_t from = p->scan;
    if (p->close_free > p->call_ws && p->close_free - p->call_ws > from)
        from = p->close_free - p->call_ws;
    size_t e      = chatparse_find(s, n, from, lit);
    size_t l      = strlen(lit);
    p->scan       = e < n ? e : n >= l && n - l + 1 > from ? n - l + 1 : from;
    p->close_free = p->call_ws + p->scan;
    return e;
}

/*
 * Mistral: [TOOL_CALLS] then a JSON array, or NAME, an optional [CALL_ID]ID, [ARGS] and
 * a JSON object. Sets *used to the unit's length when it is whole.
 */
static int match_mistral(struct chatparse *p, const char *s, size_t n, size_t *used)
{
    size_t at = p->call_mlen;
    if (at == n)
        return NEED_MORE;
    if (s[at] == '[') {
        size_t e = chatparse_extent(p, s, n, at);
        if (!e)
            return NEED_MORE;
        *used = e;
        return parse_mistral_array(p, s + at, e - at);
    }
    size_t name_at = at;
    while (at < n && at - name_at <= MISTRAL_NAME_MAX && s[at] != '[' && !chatparse_is_ws(s[at]))
        at++;
    if (at - name_at > MISTRAL_NAME_MAX || (at < n && chatparse_is_ws(s[at])))
        return REJECT; /* prose after the marker, not a name: tell at once */
    if (at == n)
        return NEED_MORE;
    size_t name_end             = at;
    char id[MISTRAL_ID_MAX + 1] = "";
    enum prefix pr              = chatparse_prefix(s + at, n - at, MISTRAL_CALL_ID);
    if (pr == PREFIX_PART)
        return NEED_MORE;
    if (pr == PREFIX_FULL) {
        at += strlen(MISTRAL_CALL_ID);
        size_t id_at = at;
        while (at < n && at - id_at <= MISTRAL_ID_MAX && s[at] != '[')
            at++;
        if (at - id_at > MISTRAL_ID_MAX)
            return REJECT;
        if (at == n)
            return NEED_MORE;
        memcpy(id, s + id_at, at - id_at);
        id[at - id_at] = 0;
    }
    pr = chatparse_prefix(s + at, n - at, MISTRAL_ARGS);
    if (pr == PREFIX_PART)
        return NEED_MORE;
    if (pr == PREFIX_NO)
        return REJECT;
    at += strlen(MISTRAL_ARGS);
    return chatparse_take_args(p, s, n, at, false, s + name_at, name_end - name_at,
                               id[0] ? id : NULL, used);
}

/*
 * Judges the held call on s[0, n) (from its marker, at most call_max bytes). Returns
 * NEED_MORE, REJECT, ACCEPT with the unit's length in *used and its calls in p->pend, or
 * -1 when out of memory.
 */
static int match_call(struct chatparse *p, const char *s, size_t n, size_t *used)
{
    size_t m = p->call_mlen, e, at;
    switch (p->call_kind) {
    case CALL_HERMES:
    case CALL_XML:
        e = chatparse_find_close(p, s, n, TOOL_CALL_CLOSE);
        if (e == n)
            return NEED_MORE;
        *used = e + strlen(TOOL_CALL_CLOSE);
        /* either body in either format: the template says which one the model was taught,
         * but a fine-tune may write the other, and a valid call is worth more than the rule */
        at = m;
        chatparse_skip_ws(s, e, &at);
        return at < e && s[at] == '{' ? parse_hermes(p, s + m, e - m)
                                      : chatparse_body_xml(p, s + m, e - m);
    case CALL_DS_R1:
    case CALL_DS_V31:
        e = chatparse_find_close(p, s, n, DS_CALLS_END);
        if (e == n)
            return NEED_MORE;
        *used = e + strlen(DS_CALLS_END);
        return parse_deepseek(p, s + m, e - m, p->call_kind == CALL_DS_R1);
    case CALL_LLAMA_BRACE:
    case CALL_LLAMA_TAG:
        at = p->call_kind == CALL_LLAMA_BRACE ? 0 : m;
        chatparse_skip_ws(s, n, &at);
        if (at == n)
            return NEED_MORE;
        if (s[at] != '{')
            return REJECT;
        e = chatparse_extent(p, s, n, at);
        if (!e)
            return NEED_MORE;
        *used = e;
        return parse_llama(p, s + at, e - at);
    case CALL_MISTRAL:
        return match_mistral(p, s, n, used);
    case CALL_STRIP:
        *used = m;
        return ACCEPT;
    case CALL_HARMONY:
        return chatparse_match_harmony(p, s, n, used);
    case CALL_F32:
        return chatparse_match_f32(p, s, n, used);
    case CALL_GRANITE:
    case CALL_CMDR:
        return chatparse_match_array(p, s, n, used);
    case CALL_GLM:
    case CALL_KIMI:
    case CALL_MINIMAX:
    case CALL_SEED:
    case CALL_F31:
    case CALL_R7B:
    case CALL_GEMMA4:
        return chatparse_match_closed(p, s, n, used);
    }
    return REJECT;
}

/* ------------------------------------------------- streamed arguments --- */

/* Whitespace, then lit at s[*at]: 1 (and *at past it), 0 when something else is there, -1
 * when the bytes end first. */
static int head_lit(const char *s, size_t n, size_t *at, const char *lit)
{
    chatparse_skip_ws(s, n, at);
    enum prefix pr = chatparse_prefix(s + *at, n - *at, lit);
    if (pr == PREFIX_FULL)
        *at += strlen(lit);
    return pr == PREFIX_FULL ? 1 : pr == PREFIX_PART ? -1 : 0;
}

/*
 * The head of a call as a grammar writes it, up to its arguments' '{': Hermes' and Llama 3's
 * {"name": "N", "arguments"|"parameters": {, Mistral's N[ARGS]{. NEED_MORE, REJECT (not in
 * that shape: the call is then held whole), or ACCEPT with the name at s[*name_at, *name_end)
 * and the arguments at *args_at.
 */
static int stream_head(struct chatparse *p, const char *s, size_t n, size_t *name_at,
                       size_t *name_end, size_t *args_at)
{
    size_t at = p->call_kind == CALL_LLAMA_BRACE ? 0 : p->call_mlen;
    int r;
    if (p->call_kind == CALL_MISTRAL) {
        *name_at = at;
        while (at < n && at - *name_at <= MISTRAL_NAME_MAX && s[at] != '[' && s[at] != '{' &&
               (unsigned char)s[at] > 0x20)
            at++;
        if (at == n && at - *name_at <= MISTRAL_NAME_MAX)
            return NEED_MORE;
        *name_end = at;
        if (at == *name_at || (r = head_lit(s, n, &at, MISTRAL_ARGS "{")) == 0)
            return REJECT;
    } else {
        if ((r = head_lit(s, n, &at, "{")) <= 0 || (r = head_lit(s, n, &at, "\"name\"")) <= 0 ||
            (r = head_lit(s, n, &at, ":")) <= 0 || (r = head_lit(s, n, &at, "\"")) <= 0)
            return r < 0 ? NEED_MORE : REJECT;
        *name_at = at;
        while (at < n && at - *name_at <= MISTRAL_NAME_MAX && s[at] != '"' && s[at] != '\\' &&
               (unsigned char)s[at] >= 0x20)
            at++;
        if (at == n && at - *name_at <= MISTRAL_NAME_MAX)
            return NEED_MORE;
        *name_end = at;
        if (at == *name_at || s[at] != '"')
            return REJECT; /* an escape in the name: the whole call is parsed instead */
        at++;
        if ((r = head_lit(s, n, &at, ",")) <= 0)
            return r < 0 ? NEED_MORE : REJECT;
        size_t key = at;
        if ((r = head_lit(s, n, &at, "\"arguments\"")) == 0) {
            at = key;
            r  = head_lit(s, n, &at, "\"parameters\"");
        }
        if (r <= 0 || (r = head_lit(s, n, &at, ":")) <= 0 || (r = head_lit(s, n, &at, "{")) <= 0)
            return r < 0 ? NEED_MORE : REJECT;
    }
    if (r < 0)
        return NEED_MORE;
    *args_at = at - 1;
    return ACCEPT;
}

/* Ends a streamed call whose unit is s[0, used): back to content. */
static int stream_end(struct chatparse *p, size_t used)
{
    bool llama = p->call_kind == CALL_LLAMA_BRACE || p->call_kind == CALL_LLAMA_TAG;
    p->n_calls++;
    p->streaming = false;
    consume(p, p->call_ws + used);
    p->mode        = MODE_CONTENT;
    p->trim_lead   = true;
    p->llama_start = p->after_llama = llama;
    return 1;
}

/*
 * One step of a streamed call: the arguments' bytes so far out (a cut UTF-8 character
 * waits), then, once they are whole, the rest of the unit: Hermes' "}\n</tool_call>",
 * Llama 3's '}'. Whatever the grammar let through there is dropped with it.
 */
static int stream_step(struct chatparse *p, bool at_end, struct chatparse_deltas *out)
{
    const char *s = p->buf + p->call_ws;
    size_t n      = p->len - p->call_ws;
    bool capped   = n >= p->o.call_max;
    if (capped)
        n = p->o.call_max;
    size_t e    = chatparse_extent(p, s, n, p->args_at);
    size_t upto = e ? e : n - (at_end || capped ? 0 : utf8_cut(s, n));
    /* a NUL ends the call where it stands (arguments are NUL-terminated text, and no grammar
     * lets one through): the rest is content again */
    const char *nul = upto > p->args_sent ? memchr(s + p->args_sent, 0, upto - p->args_sent) : NULL;
    if (nul)
        upto = (size_t)(nul - s);
    if (upto > p->args_sent && !emit_text(out, p->out_first, CHATPARSE_TOOL_ARGS, p->n_calls,
                                          s + p->args_sent, upto - p->args_sent))
        return -1;
    p->args_sent = upto > p->args_sent ? upto : p->args_sent;
    if (nul)
        return stream_end(p, upto);
    if (!e)
        return at_end || capped ? stream_end(p, n) : 0;
    size_t end = e;
    if (p->call_kind == CALL_HERMES || p->call_kind == CALL_XML) {
        if (p->scan < e)
            p->scan = e;
        size_t c = chatparse_find_close(p, s, n, TOOL_CALL_CLOSE);
        if (c == n)
            return at_end || capped ? stream_end(p, n) : 0;
        end = c + strlen(TOOL_CALL_CLOSE);
    } else if (p->call_kind != CALL_MISTRAL) {
        chatparse_skip_ws(s, n, &end);
        if (end == n && !at_end && !capped)
            return 0;
        if (end < n && s[end] == '}')
            end++;
    }
    return stream_end(p, end);
}

/* Starts streaming the held call when its head is whole; returns as text_step does, 1 when
 * streaming began or the call is not one to stream (p->streaming tells which). */
static int stream_start(struct chatparse *p, bool at_end, struct chatparse_deltas *out)
{
    size_t n = p->len - p->call_ws, name_at, name_end, args_at;
    if (n > p->o.call_max)
        n = p->o.call_max;
    int v = stream_head(p, p->buf + p->call_ws, n, &name_at, &name_end, &args_at);
    if (v == NEED_MORE && !at_end && n < p->o.call_max)
        return 0;
    if (v != ACCEPT)
        return 1;
    const char *s             = p->buf + p->call_ws;
    struct chatparse_delta *d = deltas_push(out);
    if (!d)
        return -1;
    d->kind  = CHATPARSE_TOOL_START;
    d->index = p->n_calls;
    d->name  = chatparse_dup_n(s + name_at, name_end - name_at);
    d->id    = make_id(p, p->n_calls);
    out->n++;
    if (!d->name || !d->id)
        return -1;
    p->streaming = true;
    p->args_at = p->args_sent = args_at;
    return 1;
}

/* One step in MODE_CALL; returns as text_step does. */
static int call_step(struct chatparse *p, bool at_end, struct chatparse_deltas *out)
{
    if (p->streaming)
        return stream_step(p, at_end, out);
    if (p->o.stream_args && !p->stream_tried &&
        (p->call_kind == CALL_HERMES || p->call_kind == CALL_XML ||
         p->call_kind == CALL_LLAMA_BRACE || p->call_kind == CALL_LLAMA_TAG ||
         p->call_kind == CALL_MISTRAL)) {
        int r = stream_start(p, at_end, out);
        if (r <= 0)
            return r;
        p->stream_tried = true;
        if (p->streaming)
            return stream_step(p, at_end, out);
    }

    size_t n    = p->len - p->call_ws;
    bool capped = n >= p->o.call_max;
    size_t used = 0;
    int v       = match_call(p, p->buf + p->call_ws, capped ? p->o.call_max : n, &used);
    if (v < 0)
        return -1;
    if (v == NEED_MORE && !capped && !at_end)
        return 0;
    if (v == NEED_MORE && !capped && p->cut) {
        pend_clear(p);
        consume(p, p->len);
        p->mode = MODE_CONTENT;
        return 1;
    }
    if (v == ACCEPT) {
        for (size_t i = 0; i < p->n_pend; i++) {
            struct chatparse_call *c  = &p->pend[i];
            struct chatparse_delta *d = deltas_push(out);
            if (!d)
                return -1;
            d->kind  = CHATPARSE_TOOL_START;
            d->index = p->n_calls;
            d->id    = c->id;
            d->name  = c->name;
            c->id = c->name = NULL;
            out->n++;
            if (!emit_text(out, p->out_first, CHATPARSE_TOOL_ARGS, p->n_calls, c->arguments,
                           strlen(c->arguments)))
                return -1;
            p->n_calls++;
        }
        pend_clear(p);
        bool llama = p->call_kind == CALL_LLAMA_BRACE || p->call_kind == CALL_LLAMA_TAG;
        consume(p, p->call_ws + used);
        p->mode        = p->after;
        p->trim_lead   = true;
        p->llama_start = p->after_llama = llama;
        return 1;
    }
    /* not a call: its marker (and the whitespace before it) is text, and the search
     * for markers goes on right after it */
    pend_clear(p);
    p->reject_cost += v == NEED_MORE ? (capped ? p->o.call_max : n) : used;
    if (p->reject_cost / CALL_REJECT_BUDGET >= p->o.call_max) {
        p->o.parse_tools = false;
        p->units_off     = true;
    }
    size_t text = p->call_ws + p->call_mlen;
    if (!emit_text(out, p->out_first, CHATPARSE_CONTENT, -1, p->buf, text))
        return -1;
    consume(p, text);
    p->mode = MODE_CONTENT;
    if (text)
        p->trim_lead = false; /* (else the unit opened the output: functionary v3.2) */
    p->llama_start = p->after_llama = false;
    return 1;
}

static enum hearth_status run(struct chatparse *p, bool at_end, struct chatparse_deltas *out)
{
    p->out_first = out->n;
    for (;;) {
        if (!p->len)
            return HEARTH_OK;
        int r = p->mode == MODE_CALL ? call_step(p, at_end, out) : text_step(p, at_end, out);
        if (r < 0)
            return HEARTH_ENOMEM;
        if (r == 0)
            return HEARTH_OK;
    }
}

enum hearth_status chatparse_feed(struct chatparse *p, const char *text, size_t len,
                                  struct chatparse_deltas *out)
{
    if (p->finished)
        return HEARTH_EINVAL;
    size_t off = (size_t)(p->buf - p->base);
    if (off + p->len + len > p->cap) {
        if (off) {
            memmove(p->base, p->buf, p->len);
            p->buf = p->base;
        }
        /* grown to twice what it holds, so a move is paid for by as many bytes fed */
        if (2 * (p->len + len) > p->cap) {
            size_t cap = p->cap ? p->cap : 256;
            while (cap < 2 * (p->len + len))
                cap *= 2;
            char *b = realloc(p->base, cap);
            if (!b)
                return HEARTH_ENOMEM;
            p->base = p->buf = b;
            p->cap           = cap;
        }
    }
    if (len)
        memcpy(p->buf + p->len, text, len);
    p->len += len;
    return run(p, false, out);
}

enum hearth_status chatparse_finish(struct chatparse *p, struct chatparse_deltas *out)
{
    return chatparse_finish_cut(p, false, out);
}

enum hearth_status chatparse_finish_cut(struct chatparse *p, bool cut, struct chatparse_deltas *out)
{
    if (p->finished)
        return HEARTH_OK;
    p->finished = true;
    p->cut      = cut;
    return run(p, true, out);
}

/* ------------------------------------------------------- whole message --- */

static bool append(char **s, size_t *len, const char *t, size_t n)
{
    char *r = realloc(*s, *len + n + 1);
    if (!r)
        return false;
    memcpy(r + *len, t, n);
    *len += n;
    r[*len] = 0;
    *s      = r;
    return true;
}

enum hearth_status chatparse_msg_add(struct chatparse_msg *msg, const struct chatparse_deltas *d)
{
    for (size_t i = 0; i < d->n; i++) {
        const struct chatparse_delta *e = &d->v[i];
        bool ok                         = true;
        switch (e->kind) {
        case CHATPARSE_REASONING:
            ok = append(&msg->reasoning, &msg->reasoning_len, e->text, e->text_len);
            break;
        case CHATPARSE_CONTENT:
            ok = append(&msg->content, &msg->content_len, e->text, e->text_len);
            break;
        case CHATPARSE_TOOL_START: {
            struct chatparse_call *v = realloc(msg->calls, (msg->n_calls + 1) * sizeof *v);
            if (!v)
                return HEARTH_ENOMEM;
            msg->calls               = v;
            struct chatparse_call *c = &v[msg->n_calls];
            c->id                    = chatparse_dup_n(e->id, strlen(e->id));
            c->name                  = chatparse_dup_n(e->name, strlen(e->name));
            c->arguments             = chatparse_dup_n("", 0);
            if (!c->id || !c->name || !c->arguments) {
                free(c->id);
                free(c->name);
                free(c->arguments);
                return HEARTH_ENOMEM;
            }
            msg->n_calls++;
            break;
        }
        case CHATPARSE_TOOL_ARGS: {
            if (e->index < 0 || (size_t)e->index >= msg->n_calls)
                return HEARTH_EINVAL;
            struct chatparse_call *c = &msg->calls[e->index];
            size_t n                 = strlen(c->arguments);
            ok                       = append(&c->arguments, &n, e->text, e->text_len);
            break;
        }
        }
        if (!ok)
            return HEARTH_ENOMEM;
    }
    return HEARTH_OK;
}

void chatparse_msg_free(struct chatparse_msg *msg)
{
    free(msg->reasoning);
    free(msg->content);
    for (size_t i = 0; i < msg->n_calls; i++) {
        free(msg->calls[i].id);
        free(msg->calls[i].name);
        free(msg->calls[i].arguments);
    }
    free(msg->calls);
    memset(msg, 0, sizeof *msg);
}

enum hearth_status chatparse_parse(const struct chatparse_format *f,
                                   const struct chatparse_opts *opts, const char *text, size_t len,
                                   struct chatparse_msg *msg, bool *has_calls)
{
    struct chatparse *p       = chatparse_new(f, opts);
    struct chatparse_deltas d = {0};
    if (!p)
        return HEARTH_ENOMEM;
    enum hearth_status st = chatparse_feed(p, text, len, &d);
    if (st == HEARTH_OK)
        st = chatparse_finish(p, &d);
    if (st == HEARTH_OK)
        st = chatparse_msg_add(msg, &d);
    if (has_calls)
        *has_calls = chatparse_has_tool_calls(p);
    chatparse_deltas_free(&d);
    chatparse_free(p);
    return st;
}
