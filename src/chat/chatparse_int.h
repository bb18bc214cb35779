/*
 * chatparse_int.h: what chatparse.c shares with chatparse_formats.c: the
 * markers, the parser's state, and the contracts of the unit matchers and
 * call-body parsers. Not a public header: only those two files include it.
 *
 * A body parser gets the bytes of one call unit between its opening and
 * closing markers (markers excluded), adds each call it finds with
 * chatparse_pend_add, and returns ACCEPT, REJECT (the unit is not a valid
 * call: it will be given back as text) or -1 when out of memory. It never
 * looks past n and keeps no state: the same bytes give the same verdict.
 * A unit matcher (chatparse_match_*) also finds the unit's end, through
 * the parser's resumable searches (chatparse_extent, chatparse_find_close).
 */
#ifndef HEARTH_CHATPARSE_INT_H
#define HEARTH_CHATPARSE_INT_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "chat/chatparse.h"

enum verdict { NEED_MORE, REJECT, ACCEPT };

static inline bool chatparse_is_ws(char c)
{
    return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

/* s[*at, n) starts with lit (then *at moves past it). */
static inline bool chatparse_take(const char *s, size_t n, size_t *at, const char *lit)
{
    size_t l = strlen(lit);
    if (n - *at < l || memcmp(s + *at, lit, l))
        return false;
    *at += l;
    return true;
}

static inline void chatparse_skip_ws(const char *s, size_t n, size_t *at)
{
    while (*at < n && chatparse_is_ws(s[*at]))
        (*at)++;
}

/* Position of lit in s[from, n), or n. */
static inline size_t chatparse_find(const char *s, size_t n, size_t from, const char *lit)
{
    const char *f = from <= n ? memmem(s + from, n - from, lit, strlen(lit)) : NULL;
    return f ? (size_t)(f - s) : n;
}

/* Parses s[0, n) as exactly one JSON value (whitespace around allowed), or NULL. */
cJSON *chatparse_json(const char *s, size_t n);

/*
 * A raw parameter value of the XML-ish forms: a string when as_string (the parameter's schema
 * says so), else JSON when it is a number, true, false, null, an object or an array, a string
 * otherwise (the templates write strings bare and the rest as JSON). strip_nl: one newline at
 * each end is the template's, not the value's. NULL: no memory.
 */
cJSON *chatparse_raw_value(const char *v, size_t n, bool strip_nl, bool as_string);

/* Whether parameter key of function fn has "type": "string" in the tools p was given. */
bool chatparse_param_string(const struct chatparse *p, const char *fn, size_t fn_len,
                            const char *key, size_t key_len);

/*
 * Adds a call to the held unit: name (name_len bytes, trimmed) and arguments (an object, or a
 * string that holds one; taken over). id may be NULL (one is made). Returns ACCEPT, REJECT
 * when the call is not valid, -1 when out of memory.
 */
int chatparse_pend_add(struct chatparse *p, const char *name, size_t name_len, cJSON *args,
                       const char *id);

/* One {"name": .., "arguments"|"parameters": {..}} object; need_args: a call must have them. */
int chatparse_pend_object(struct chatparse *p, const cJSON *o, bool need_args, bool take_id);

/* ------------------------------------------------------------ markers --- */

#define TOOL_CALL_OPEN     "<tool_call>"
#define TOOL_CALL_CLOSE    "</tool_call>"
#define PYTHON_TAG         "<|python_tag|>"
#define MISTRAL_CALLS      "[TOOL_CALLS]"
#define MISTRAL_ARGS       "[ARGS]"
#define MISTRAL_CALL_ID    "[CALL_ID]"
#define DS_CALLS_BEGIN     "<｜tool▁calls▁begin｜>"
#define DS_CALLS_END       "<｜tool▁calls▁end｜>"
#define DS_CALL_BEGIN      "<｜tool▁call▁begin｜>"
#define DS_CALL_END        "<｜tool▁call▁end｜>"
#define DS_SEP             "<｜tool▁sep｜>"
#define HARMONY_START      "<|start|>"
#define HARMONY_CHANNEL    "<|channel|>"
#define HARMONY_MESSAGE    "<|message|>"
#define KIMI_SECTION_BEGIN "<|tool_calls_section_begin|>"
#define KIMI_SECTION_END   "<|tool_calls_section_end|>"
#define MINIMAX_OPEN       "<minimax:tool_call>"
#define MINIMAX_CLOSE      "</minimax:tool_call>"
#define SEED_OPEN          "<seed:tool_call>"
#define SEED_CLOSE         "</seed:tool_call>"
#define GRANITE_OPEN       "<|tool_call|>"
#define FUNCTIONARY_OPEN   "<function="
#define FUNCTIONARY_CLOSE  "</function>"
#define FUNCTIONARY_RECIP  ">>>"
#define R7B_ACTION         "<|START_ACTION|>"
#define R7B_ACTION_END     "<|END_ACTION|>"
#define COMMAND_R_ACTION   "Action:"
#define GEMMA4_OPEN        "<|tool_call>call:"
#define GEMMA4_CLOSE       "<tool_call|>"

/* ------------------------------------------------------- parser state --- */

enum mode {
    MODE_REASONING,
    MODE_CONTENT,
    MODE_CALL,
};

/* What opened the held call, which says how to find its end. */
enum call_kind {
    CALL_HERMES,      /* <tool_call>, JSON inside (or <function=..>) */
    CALL_XML,         /* <tool_call>, <function=..> inside (or JSON) */
    CALL_LLAMA_BRACE, /* a '{' starting the content; the marker is the brace itself */
    CALL_LLAMA_TAG,   /* <|python_tag|> */
    CALL_MISTRAL,     /* [TOOL_CALLS] */
    CALL_DS_R1,       /* <｜tool▁calls▁begin｜> */
    CALL_DS_V31,
    CALL_STRIP,   /* a marker that is dropped: gpt-oss' <|end|>, Command R7B's <|START_RESPONSE|> */
    CALL_HARMONY, /* gpt-oss' <|start|> or <|channel|>: a header up to <|message|>, then
                   * reasoning, content, or a call's JSON */
    CALL_GLM,     /* <tool_call>, GLM's body */
    CALL_KIMI,    /* <|tool_calls_section_begin|> */
    CALL_MINIMAX, /* <minimax:tool_call> */
    CALL_SEED,    /* <seed:tool_call> */
    CALL_GRANITE, /* <|tool_call|>, then a JSON array */
    CALL_F31,     /* <function= */
    CALL_F32,     /* >>> (or nothing, at the start of the output), a recipient line */
    CALL_R7B,     /* <|START_ACTION|> */
    CALL_CMDR,    /* Action:, then a ```json fence */
    CALL_GEMMA4,  /* <|tool_call>call: */
};

/* A marker that opens a unit in content text, and the unit it opens. */
struct marker {
    const char *lit;
    enum call_kind kind;
};

#define MARKERS_MAX 6
/* Bytes a gpt-oss header may take before <|message|>, or a functionary v3.2 recipient */
#define HEADER_MAX 256

/* Extent of one JSON object or array, found a byte at a time (strings may hold brackets). */
struct jscan {
    size_t pos;  /* next byte to look at, from the call's marker */
    long depth;  /* open brackets */
    bool in_str; /* inside a string */
    bool esc;    /* the last byte was a backslash inside a string */
    bool done;   /* the value ended at pos (a unit may need bytes after it) */
};

struct chatparse {
    struct chatparse_format f;
    struct chatparse_opts o;
    char *base; /* the allocation, cap bytes; buf lies in it */
    char *buf;  /* bytes fed and not settled, len of them */
    size_t len, cap;
    enum mode mode;
    size_t ws_held;   /* buf starts with this many whitespace bytes already searched */
    bool trim_lead;   /* at the start of a text run: whitespace is dropped */
    bool out_start;   /* nothing but whitespace so far: think_open may open the output */
    bool llama_start; /* at the start of content or after a Llama 3 call: a call may begin */
    bool after_llama; /* ...and a ';' may come before it */
    bool finished;
    bool units_off;   /* the budget of rejected calls is spent: no marker opens a unit */
    bool cut;         /* finished by the token limit: a call open at the end is dropped */
    int32_t n_calls;  /* calls emitted */
    size_t out_first; /* deltas the caller's list held when this feed began */

    /* the held call: buf[0, call_ws) is whitespace before its marker, call_mlen the marker */
    enum call_kind call_kind;
    size_t call_ws, call_mlen;
    enum mode after;    /* the mode once the unit is taken (gpt-oss: reasoning or content) */
    size_t scan;        /* bytes from the marker already searched for the closing marker */
    size_t close_free;  /* no closing marker starts in buf[0, close_free): what searches of
                         * earlier calls found, kept so that a run of unclosed markers is
                         * searched once, not once per marker */
    size_t reject_cost; /* bytes the calls given back as text were judged on: past
                         * CALL_REJECT_BUDGET calls of call_max, no new call is held */
    struct jscan js;    /* JSON extent, for the kinds whose end is the JSON's end */
    size_t js_at;       /* where js started (from the marker); 0: not started */
    /* stream_args: the held call's start is out, its arguments go out as they come */
    bool streaming;
    bool stream_tried; /* its head was judged (streamed, or held whole) */
    size_t args_at;    /* where its arguments start (from the marker) */
    size_t args_sent;  /* bytes (from the marker) of it that are out */

    cJSON *params; /* {"function name": {"param": true when its type is "string"}}, or NULL */

    /* calls of the held unit, parsed and waiting for the verdict */
    struct chatparse_call *pend;
    size_t n_pend, cap_pend;
};

/* How s[0, n) stands against a marker: it starts with it, is cut inside it, or neither. */
enum prefix { PREFIX_NO, PREFIX_PART, PREFIX_FULL };

static inline enum prefix chatparse_prefix(const char *s, size_t n, const char *m)
{
    size_t mlen = strlen(m);
    if (n >= mlen)
        return memcmp(s, m, mlen) ? PREFIX_NO : PREFIX_FULL;
    return memcmp(s, m, n) ? PREFIX_NO : PREFIX_PART;
}

/* s[0, n) as a NUL-terminated malloc'd string; NULL when out of memory. */
char *chatparse_dup_n(const char *s, size_t n);
/* The end of the JSON value that starts at s[at] ('{' or '[' wanted there), or 0 for more. */
size_t chatparse_extent(struct chatparse *p, const char *s, size_t n, size_t at);
/*
 * The tail several forms share: a call's JSON object arguments at s[at] (whitespace before
 * them skipped with skip_ws), taken as the call name[0, name_len) (id may be NULL) and *used
 * set past them. NEED_MORE, REJECT or what chatparse_pend_add returns.
 */
int chatparse_take_args(struct chatparse *p, const char *s, size_t n, size_t at, bool skip_ws,
                        const char *name, size_t name_len, const char *id, size_t *used);
/* Searches the held call s[0, n) for its closing lit, from where the searches before stopped;
 * n when absent. */
size_t chatparse_find_close(struct chatparse *p, const char *s, size_t n, const char *lit);

/* The units of the newer forms, judged on s[0, n) from their marker (as match_call): NEED_MORE,
 * REJECT, ACCEPT with the unit's length in *used, or -1 when out of memory. */
int chatparse_match_harmony(struct chatparse *p, const char *s, size_t n, size_t *used);
int chatparse_match_f32(struct chatparse *p, const char *s, size_t n, size_t *used);
int chatparse_match_array(struct chatparse *p, const char *s, size_t n, size_t *used);
int chatparse_match_closed(struct chatparse *p, const char *s, size_t n, size_t *used);

/* ------------------------------------------------ chatparse_formats.c --- */

/* Qwen3-Coder and Seed-OSS: <function=N><parameter=K>V</parameter>..</function>. */
int chatparse_body_xml(struct chatparse *p, const char *s, size_t n);
/* GLM 4.5+: N<arg_key>K</arg_key><arg_value>V</arg_value>.. (or a Hermes JSON body). */
int chatparse_body_glm(struct chatparse *p, const char *s, size_t n);
/* Kimi K2: <|tool_call_begin|>functions.N:I<|tool_call_argument_begin|>{..}<|tool_call_end|>.. */
int chatparse_body_kimi(struct chatparse *p, const char *s, size_t n);
/* MiniMax M2: <invoke name="N"><parameter name="K">V</parameter>..</invoke>.. */
int chatparse_body_minimax(struct chatparse *p, const char *s, size_t n);
/* Functionary v3.1: N>{..} (between <function= and </function>). */
int chatparse_body_functionary(struct chatparse *p, const char *s, size_t n);
/* A JSON array of calls: Granite's {"name", "arguments"}, Command-R's {"tool_name",
 * "parameters"} (cohere: true). */
int chatparse_body_array(struct chatparse *p, const char *s, size_t n, bool cohere);
/* Gemma 4: N{k:<|"|>v<|"|>,..} (between <|tool_call>call: and <tool_call|>). */
int chatparse_body_gemma4(struct chatparse *p, const char *s, size_t n);

#endif
