/*
 * chatparse.h: splits the text a chat model generates for one choice into
 * OpenAI's pieces: reasoning_content, content and tool_calls.
 *
 * The tool-call syntax and the reasoning markers are read off the chat
 * template's source (chatparse_detect), never off a model name. The parser
 * takes the generated text in chunks split anywhere (inside a UTF-8
 * character, inside a marker) and answers each chunk with deltas in
 * OpenAI's stream shape. Invariant: for a given text, options and seed, the
 * concatenation of all deltas (reasoning, content, each call's start and
 * arguments) is the same whatever the chunking; feeding the whole text at
 * once and finishing is the non-streaming answer.
 *
 * Rules the output follows:
 * - A marker is never emitted half: text that may still become a marker is
 *   held until decided. Emitted text never ends inside a UTF-8 character
 *   (unless the generation is not UTF-8, or ends inside one).
 * - Each run of reasoning or content text (runs are cut by markers and by
 *   the ends of the generation) is trimmed of whitespace at both ends, so
 *   the whitespace between and after calls and around </think> goes.
 * - A call is held until it is complete and valid, then emitted whole.
 *   A call that does not parse, is unterminated at finish, or grows past
 *   call_max bytes is given back as content text (marker included), and
 *   parsing goes on right after its opening marker. Never an error. Two
 *   exceptions: chatparse_finish_cut drops a call the token limit cut, and
 *   with stream_args a grammar-held call goes out as it comes.
 * - Hermes and Qwen3-Coder share <tool_call>; inside it either body (JSON
 *   or <function=..>) is taken whichever the template taught (GLM's too
 *   takes a JSON body). A Llama 3 call is recognised only where content
 *   starts (or after another call); a functionary v3.2 recipient at the
 *   very start (the prompt ended in >>>) or after >>>.
 * - gpt-oss' channel headers, <|end|>/<|return|>/<|call|>, functionary
 *   v3.2's >>>all and Command R7B's <|START_RESPONSE|> markers are taken
 *   out of content even when the request offers no tools (parse_tools
 *   false); their calls then stay text. A gpt-oss analysis channel is
 *   reasoning (content when split_reasoning is false).
 * - Parameter values written bare (GLM, MiniMax, Seed-OSS, Qwen3-Coder) are
 *   strings where the tool's schema says so (opts.tools), else JSON when
 *   they parse as a non-string JSON value, strings otherwise.
 * - think_open opens reasoning only at the very start of the output; call
 *   markers inside reasoning are reasoning; a think_close in content is
 *   content. Starting inside reasoning with no think_close: all reasoning.
 *
 * Memory: the text held back (a partial marker, whitespace, one call up to
 * call_max) plus the deltas of one feed. Not thread-safe per parser;
 * separate parsers share nothing.
 */
#ifndef HEARTH_CHATPARSE_H
#define HEARTH_CHATPARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hearth.h"

/* Largest call (from its opening marker to its end) held before it is given back as text. */
#define CHATPARSE_CALL_MAX (1u << 20)

enum chatparse_tools {
    CHATPARSE_TOOLS_NONE,        /* no tool-call syntax recognised: everything is text */
    CHATPARSE_TOOLS_HERMES,      /* <tool_call>\n{"name": N, "arguments": {..}}\n</tool_call> */
    CHATPARSE_TOOLS_QWEN3_CODER, /* <tool_call>\n<function=N>\n<parameter=K>\nV\n</parameter>.. */
    CHATPARSE_TOOLS_LLAMA3,      /* [<|python_tag|>]{"name": N, "parameters": {..}} at the start */
    CHATPARSE_TOOLS_MISTRAL,     /* [TOOL_CALLS][{..}, ..] or [TOOL_CALLS]N[CALL_ID]id[ARGS]{..} */
    CHATPARSE_TOOLS_DEEPSEEK_R1, /* <｜tool▁calls▁begin｜>, function, sep, N, ```json{..}``` */
    CHATPARSE_TOOLS_DEEPSEEK_V31, /* <｜tool▁calls▁begin｜>, N, sep, {..} (V3.1) */
    /* the rest live in chatparse_formats.c */
    CHATPARSE_TOOLS_HARMONY,  /* gpt-oss: <|channel|>analysis|final|commentary<|message|>..<|end|>,
                               * calls to=functions.N ..<|message|>{..}<|call|> */
    CHATPARSE_TOOLS_GLM,      /* <tool_call>N\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>.. */
    CHATPARSE_TOOLS_KIMI,     /* <|tool_calls_section_begin|><|tool_call_begin|>functions.N:I
                               * <|tool_call_argument_begin|>{..}<|tool_call_end|>..<|..end|> */
    CHATPARSE_TOOLS_MINIMAX,  /* <minimax:tool_call><invoke name="N"><parameter name="K">V.. */
    CHATPARSE_TOOLS_SEED_OSS, /* <seed:tool_call><function=N><parameter=K>V</parameter>.. */
    CHATPARSE_TOOLS_GRANITE,  /* <|tool_call|>[{"name": N, "arguments": {..}}, ..] */
    CHATPARSE_TOOLS_FUNCTIONARY_V31, /* <function=N>{..}</function> */
    CHATPARSE_TOOLS_FUNCTIONARY_V32, /* [>>>]N\n{..}>>>all\ntext (the prompt ends in >>>) */
    CHATPARSE_TOOLS_COMMAND_R,   /* Action: ```json\n[{"tool_name": N, "parameters": {..}}]``` */
    CHATPARSE_TOOLS_COMMAND_R7B, /* <|START_ACTION|>[{"tool_call_id", "tool_name", "parameters"}]
                                  * <|END_ACTION|>; <|START_RESPONSE|>text<|END_RESPONSE|> */
    CHATPARSE_TOOLS_GEMMA4,      /* <|tool_call>call:N{k:<|"|>v<|"|>,n:1}<tool_call|> */
    CHATPARSE_TOOLS_COUNT,       /* not a format: how many there are */
};

struct chatparse_format {
    enum chatparse_tools tools;
    const char *think_open;  /* "<think>", "[THINK]"; NULL: the family has no reasoning markers */
    const char *think_close; /* "</think>", "[/THINK]"; NULL exactly when think_open is */
};

/* The name of a tool format ("hermes", "qwen3-coder", ...); never NULL. */
const char *chatparse_tools_name(enum chatparse_tools t);

/*
 * Reads a chat template's source (Jinja text, NUL-terminated; NULL is taken
 * as "") for the markers it writes, and fills *out: which tool-call syntax
 * its assistant turns use (NONE when it writes none this module knows) and
 * its reasoning markers (both present in the template, or none). The
 * strings in *out are static. Pure; thread-safe.
 */
void chatparse_detect(const char *template_src, struct chatparse_format *out);

/* Most markers chatparse_markers gives. */
#define CHATPARSE_MARKERS_MAX 12

/*
 * The literal markers the parser reads in f's output (its reasoning markers, and every marker
 * of its tool-call syntax, inner ones included) into out (CHATPARSE_MARKERS_MAX of room);
 * returns how many. A server keeps the control tokens among them in the output text
 * (hearth_model_keep_text), or the parser never sees them. Static strings; thread-safe.
 */
size_t chatparse_markers(const struct chatparse_format *f, const char **out);

/*
 * True when the rendered prompt (len bytes) ends inside an open reasoning
 * block: its last think_open is not followed by a think_close (DeepSeek-R1
 * distills, QwQ, Qwen3.5 open "<think>\n" in the generation prompt; Qwen3
 * with enable_thinking false closes it at once). False when f has no
 * reasoning markers. Pure; thread-safe.
 */
bool chatparse_prompt_opens_thinking(const struct chatparse_format *f, const char *prompt,
                                     size_t len);

struct cJSON;

struct chatparse_opts {
    bool parse_tools;        /* false (the request offers no tools): call markers are content */
    bool split_reasoning;    /* false (reasoning_format "none"): think markers are content */
    bool start_in_reasoning; /* the prompt opened the block (chatparse_prompt_opens_thinking) */
    uint64_t id_seed;        /* call ids are a function of this seed and the call's index */
    size_t call_max;         /* bytes a call may hold; 0 means CHATPARSE_CALL_MAX */
    /* the request's tools, [{"type": "function", "function": {"name", "parameters"}}], or
     * NULL; chatparse_new copies what it needs. A bare value of the XML-ish forms stays a
     * string where its parameter's schema has "type": "string" (else, or without tools,
     * it is JSON when it parses as a non-string JSON value) */
    const struct cJSON *tools;
    /* the calls are held to their syntax by a grammar (a forced tool_choice, or an "auto"
     * call from its marker on: oai_grammar_holds_calls): a Hermes,
     * Llama 3 or Mistral NAME[ARGS] call's start goes out once its name is known and its
     * arguments as they come, as the model wrote them (not printed again compactly); a
     * call the generation ends inside stays a call. Other forms, and calls not written in
     * the grammar's order of keys, are held whole as without it */
    bool stream_args;
};

/*
 * Deltas map onto a chat.completion.chunk's choices[i].delta one for one:
 *   REASONING   {"reasoning_content": text}
 *   CONTENT     {"content": text}
 *   TOOL_START  {"tool_calls": [{"index": index, "id": id, "type": "function",
 *                                "function": {"name": name, "arguments": ""}}]}
 *   TOOL_ARGS   {"tool_calls": [{"index": index, "function": {"arguments": text}}]}
 * A TOOL_START is followed by its TOOL_ARGS in the same list: one holding all
 * the arguments, or with opts.stream_args the first piece (later pieces come
 * in later lists, until the call ends). For the non-streaming message, add every
 * list to a chatparse_msg, or use chatparse_parse.
 */
enum chatparse_delta_kind {
    CHATPARSE_REASONING,  /* text: a piece of reasoning_content */
    CHATPARSE_CONTENT,    /* text: a piece of content */
    CHATPARSE_TOOL_START, /* a new call: index, id, name; its arguments so far are "" */
    CHATPARSE_TOOL_ARGS,  /* text: the next piece of call index's arguments (a JSON string) */
};

struct chatparse_delta {
    enum chatparse_delta_kind kind;
    int32_t index;   /* TOOL_*: the call's position in tool_calls, 0, 1, ...; else -1 */
    char *text;      /* REASONING, CONTENT, TOOL_ARGS: NUL-terminated, text_len bytes before
                      * the terminator (a NUL the model wrote counts in text_len) */
    size_t text_len; /* bytes of text, >= 1 */
    size_t text_cap; /* bytes allocated for text (the parser's business) */
    char *id;        /* TOOL_START: "call_" and 24 alphanumerics, or the model's own id */
    char *name;      /* TOOL_START: the function's name */
};

/* A list of deltas in stream order; owns its strings. Zero-initialised is empty. */
struct chatparse_deltas {
    struct chatparse_delta *v;
    size_t n, cap;
};

/* Frees every delta's strings and empties the list, keeping its array for reuse. */
void chatparse_deltas_clear(struct chatparse_deltas *d);
/* Frees everything; the list is empty (and reusable) afterwards. */
void chatparse_deltas_free(struct chatparse_deltas *d);

struct chatparse;

/*
 * A parser for one choice. opts may be NULL (tools and reasoning on, seed 0).
 * Options a format cannot use are ignored (no markers, no split). Returns
 * NULL only when out of memory. f and its strings must outlive the parser.
 */
struct chatparse *chatparse_new(const struct chatparse_format *f,
                                const struct chatparse_opts *opts);

/*
 * Feeds the next len bytes of generated text and appends to out the deltas
 * they settle (possibly none: text may be held back). out is appended to,
 * never cleared, and the deltas it held before stay as they were (adjacent
 * text of one kind from one feed comes as one delta). Returns HEARTH_OK,
 * HEARTH_ENOMEM (the parser is then unusable: free it), or HEARTH_EINVAL
 * after chatparse_finish.
 */
enum hearth_status chatparse_feed(struct chatparse *p, const char *text, size_t len,
                                  struct chatparse_deltas *out);

/*
 * Ends the generation: settles everything held (a pending call becomes text
 * unless complete) and appends the last deltas to out. Later feeds fail
 * with HEARTH_EINVAL; a second finish appends nothing. Returns HEARTH_OK,
 * HEARTH_ENOMEM.
 */
enum hearth_status chatparse_finish(struct chatparse *p, struct chatparse_deltas *out);

/*
 * chatparse_finish for a generation that may have been cut: when cut (it stopped at its token
 * limit or a full context), a call still open at the end (its marker seen, its end not, and
 * nothing so far that makes it invalid) is dropped instead of given back as text: it is the
 * head of a call, not prose. With cut false it is chatparse_finish.
 */
enum hearth_status chatparse_finish_cut(struct chatparse *p, bool cut,
                                        struct chatparse_deltas *out);

/* Whether any tool call has been emitted so far (finish_reason "tool_calls"). */
bool chatparse_has_tool_calls(const struct chatparse *p);

/* Frees the parser; NULL is a no-op. */
void chatparse_free(struct chatparse *p);

/* --------------------------------------------- non-streaming: the whole message --- */

struct chatparse_call {
    char *id;
    char *name;
    char *arguments; /* compact JSON text of an object, e.g. {"city":"Paris"} */
};

/* A whole message, built from deltas. Zero-initialised is empty; NULL strings mean "". */
struct chatparse_msg {
    char *reasoning; /* NUL-terminated, reasoning_len bytes; NULL when none */
    size_t reasoning_len;
    char *content; /* NUL-terminated, content_len bytes; NULL when none */
    size_t content_len;
    struct chatparse_call *calls;
    size_t n_calls;
};

/*
 * Adds deltas to msg: text is appended to reasoning or content, a TOOL_START
 * adds a call, TOOL_ARGS are appended to call index's arguments. Returns
 * HEARTH_OK, HEARTH_ENOMEM, or HEARTH_EINVAL for TOOL_ARGS of a call never
 * started (msg is left as it was before the failing delta).
 */
enum hearth_status chatparse_msg_add(struct chatparse_msg *msg, const struct chatparse_deltas *d);

/*
 * The non-streaming answer in one call: a parser for f and opts (NULL as in
 * chatparse_new) fed text whole and finished, its deltas added to *msg
 * (zero-initialised by the caller, or holding earlier text). Returns
 * HEARTH_OK or HEARTH_ENOMEM; has_calls (may be NULL) gets
 * chatparse_has_tool_calls.
 */
enum hearth_status chatparse_parse(const struct chatparse_format *f,
                                   const struct chatparse_opts *opts, const char *text, size_t len,
                                   struct chatparse_msg *msg, bool *has_calls);

/* Frees msg's strings and calls; msg is empty afterwards. */
void chatparse_msg_free(struct chatparse_msg *msg);

#endif
