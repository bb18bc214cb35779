/*
 * hearth.h: the public engine API.
 *
 * Opaque objects (model, context), parameter structs with defaults, and
 * status codes with a caller-owned message buffer, the way llama.h exposes
 * llama.cpp. Everything above the engine (serve, fit, bench, the CLI) uses
 * only this header and the module headers under src/.
 */
#ifndef HEARTH_H
#define HEARTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Room for one error sentence; every fallible call takes (char *err, size_t err_len). */
#define HEARTH_ERR_MAX 512

/*
 * Status codes: X(name, text, http status). One list, many views: the enum,
 * hearth_status_str() and hearth_status_http() are all generated from it.
 */
/* clang-format off */
#define HEARTH_STATUS_LIST(X)                                          \
    X(HEARTH_OK,          "ok",                          200)          \
    X(HEARTH_EINVAL,      "invalid argument",            400)          \
    X(HEARTH_EIO,         "input/output error",          500)          \
    X(HEARTH_EFORMAT,     "malformed file",              422)          \
    X(HEARTH_EUNSUPPORTED, "unsupported",                400)          \
    X(HEARTH_ENOMEM,      "out of memory",               507)          \
    X(HEARTH_ERANGE,      "out of range",                400)          \
    X(HEARTH_EFULL,       "no room left",                503)          \
    X(HEARTH_ECANCELED,   "cancelled",                   499)
/* clang-format on */

enum hearth_status {
#define HEARTH_X_ENUM(name, text, http) name,
    HEARTH_STATUS_LIST(HEARTH_X_ENUM)
#undef HEARTH_X_ENUM
        HEARTH_STATUS_COUNT
};

/* Short text of a status ("malformed file"); never NULL. */
const char *hearth_status_str(enum hearth_status st);
/* The HTTP status a server answers with for this status. */
int hearth_status_http(enum hearth_status st);

/* A token id: index into the vocabulary, 0 <= id < n_vocab. */
typedef int32_t hearth_token;

/* ---------------------------------------------------------------- model --- */

struct hearth_model;

/*
 * Where the layers run is decided at load, as llama.cpp's -ngl is a model
 * parameter. With neither n_gpu_layers nor layer_split, every layer runs on
 * one backend (the CPU; HEARTH_BACKEND may name another built-in one).
 */
struct hearth_model_params {
    int n_threads;            /* worker threads for the forward pass; >= 1 */
    int32_t n_gpu_layers;     /* llama.cpp's -ngl: the last N layers on the GPUs, and the output
                                 too when N > the layer count; 0 = none. Refused
                                 (HEARTH_EUNSUPPORTED, naming the cause) where no Vulkan device
                                 can be used */
    const char *devices;      /* the GPUs the offloaded layers use, "vulkan0,vulkan1" (as
                                 `hearth devices` names them, each once); NULL = vulkan0 */
    const char *tensor_split; /* how the n_gpu_layers are shared among devices: one proportion
                                 per device, "3:1" or llama.cpp's "3,1" (numbers >= 0, not all
                                 zero); each device gets a contiguous range, in device order.
                                 NULL = equal shares */
    const char *layer_split;  /* an explicit placement instead: comma-separated ranges in layer
                                 order, BACKEND[DEVICE]:N each ("cpu:12,vulkan0:20"), the counts
                                 adding up to the layer count; a last range of 0 layers puts
                                 only the output there. "cpu" may appear several times (CPU
                                 stages: for tests, bit-identical to one). NULL = none */
    bool mtp;                 /* also load the model's multi-token-prediction head (qwen35moe's
                                 nextn block), for a context with .mtp; a file without one loads
                                 as usual (hearth_model_has_mtp says). The head runs where the
                                 output does, on a backend that has it (the CPU) */
};

struct hearth_model_params hearth_model_default_params(void);

/*
 * Maps a GGUF file and builds the model and its tokenizer. The weights stay
 * in the mapping (no copy). Returns HEARTH_OK and *out, or a status and one
 * sentence in err. The model is read-only after load and may be shared by
 * several contexts on the same thread.
 */
enum hearth_status hearth_model_load(const char *path, const struct hearth_model_params *params,
                                     struct hearth_model **out, char *err, size_t err_len);
void hearth_model_free(struct hearth_model *model);

int32_t hearth_model_n_vocab(const struct hearth_model *model);
int32_t hearth_model_n_ctx_train(const struct hearth_model *model);
/* Architecture name from general.architecture ("llama"). */
const char *hearth_model_arch(const struct hearth_model *model);
/* Whether some layers keep a recurrent state (qwen35moe): a sequence's cache then goes back
 * only to a state snapshot (hearth_seq_truncate). */
bool hearth_model_is_recurrent(const struct hearth_model *model);
/* Whether the model's MTP head was loaded (hearth_model_params.mtp and the file has one). */
bool hearth_model_has_mtp(const struct hearth_model *model);
/* The width of the hidden states hearth_get_hidden returns. */
int32_t hearth_model_n_embd(const struct hearth_model *model);
/* Bytes of tensor data the model maps. */
uint64_t hearth_model_weight_bytes(const struct hearth_model *model);
/* Bytes of weights one decoded token reads: all of them, but of a mixture of experts' routed
 * experts only the expert_used_count it routes to. */
uint64_t hearth_model_token_bytes(const struct hearth_model *model);
/* Arithmetic operations (two per multiply-add) of prefilling n tokens on top of depth cached
 * ones: the layers' matrices (of routed experts, those a token uses) and attention's scores and
 * weighted values over the keys each token sees; not the norms, rope, or the output matrix,
 * which a prefill runs for its last token only. */
double hearth_model_prefill_ops(const struct hearth_model *model, int64_t depth, int64_t n);
/* The file's tokenizer.chat_template (Jinja source), NUL-terminated; NULL when it has none. */
const char *hearth_model_chat_template(const struct hearth_model *model);

/* ------------------------------------------------------------ tokenizer --- */

hearth_token hearth_token_bos(const struct hearth_model *model); /* -1 if none */
hearth_token hearth_token_eos(const struct hearth_model *model); /* -1 if none */
bool hearth_token_is_eog(const struct hearth_model *model, hearth_token tok);
bool hearth_vocab_add_bos(const struct hearth_model *model);
/* A token's text as the vocabulary stores it ("<s>", "<|im_end|>"); "" when out of range. */
const char *hearth_token_text(const struct hearth_model *model, hearth_token tok);

/*
 * Tokenizes len bytes of text. add_special: add BOS/EOS as the vocab says;
 * parse_special: text of control tokens ("<s>") becomes those tokens.
 * On success *ids is malloc'd (caller frees) with *n_ids entries.
 */
enum hearth_status hearth_tokenize(const struct hearth_model *model, const char *text, size_t len,
                                   bool add_special, bool parse_special, hearth_token **ids,
                                   size_t *n_ids, char *err, size_t err_len);

/*
 * Writes the bytes of one token's text into buf (not NUL-terminated) and
 * returns their count, or the count needed if larger than cap. Control
 * tokens give 0 bytes. Byte tokens give their raw byte, so a UTF-8
 * character may span several calls.
 */
size_t hearth_token_to_piece(const struct hearth_model *model, hearth_token tok, char *buf,
                             size_t cap);

/*
 * From now on hearth_token_to_piece writes the text of the control tokens that the n texts
 * spell (each tokenized with special tokens parsed; end-of-generation tokens excepted): a chat
 * format's markers that the vocabulary holds as control tokens ("<|channel|>", "[TOOL_CALLS]")
 * then reach the output parser, as llama.cpp's preserved tokens. Returns how many tokens it
 * marked, or -1 when out of memory. Not thread-safe: call before the model is shared.
 */
int32_t hearth_model_keep_text(struct hearth_model *model, const char *const *texts, size_t n);

/* ------------------------------------------------------------------ chat --- */

struct hearth_chat_msg {
    const char *role;    /* "system", "user" or "assistant" */
    const char *content; /* NUL-terminated */
};

/*
 * Renders a conversation with the model's own tokenizer.chat_template (run
 * by hearth's Jinja interpreter; ChatML when it has none), ending with the
 * header of the assistant's next turn. A BOS the template writes is left out when
 * the tokenizer adds BOS itself, so tokenize the result with add_special and
 * parse_special. *out is malloc'd (caller frees). HEARTH_EINVAL names what
 * the template cannot take (roles out of order, an unknown role).
 */
enum hearth_status hearth_chat_render(const struct hearth_model *model,
                                      const struct hearth_chat_msg *msgs, size_t n_msgs, char **out,
                                      char *err, size_t err_len);
/* The template hearth_chat_render uses, in words ("the model's own (Jinja)", "chatml (built-in)").
 */
const char *hearth_chat_template_name(const struct hearth_model *model);

/* --------------------------------------------------------------- context --- */

struct hearth_context;

/*
 * K/V cache types, as llama.cpp's --cache-type-k/-v: f16 (its default), f32,
 * q8_0 (34 bytes per 32 values: about half of f16) and, for K only, q4_0
 * (18 bytes per 32). The quantized ones need a head dimension that is a
 * multiple of 32 and run on the CPU; attention reads their blocks directly.
 */
enum hearth_kv_type {
    HEARTH_KV_F16  = 0,
    HEARTH_KV_F32  = 1,
    HEARTH_KV_Q8_0 = 2,
    HEARTH_KV_Q4_0 = 3
};

/* "f16", "f32", "q8_0", "q4_0"; NULL for another value. */
const char *hearth_kv_type_name(enum hearth_kv_type t);
/* The type named s (as hearth_kv_type_name gives), false when there is none. */
bool hearth_kv_type_parse(const char *s, enum hearth_kv_type *out);

/* Tokens per K/V block, the paging unit: the default of hearth_context_params.kv_block, and what
 * hearth fit plans with so that its figures are the server's. */
#define HEARTH_KV_BLOCK 32

struct hearth_context_params {
    int32_t n_ctx;                 /* tokens per sequence; 0 = the model's training context */
    int32_t n_seq_max;             /* sequences that can hold KV at once; >= 1 */
    int32_t n_batch;               /* most tokens one hearth_decode call takes */
    int32_t kv_block;              /* tokens per KV block (paging unit); HEARTH_KV_BLOCK */
    enum hearth_kv_type kv_type;   /* K's type */
    enum hearth_kv_type kv_type_v; /* V's type (not q4_0) */
    int n_threads;                 /* 0 = the model's */
    int32_t n_keep_states;     /* models with recurrent layers: rows of one sequence's batch whose
                                  states hearth_seq_keep_states may keep, 0..64 (0 = none) */
    int32_t n_state_snapshots; /* models with recurrent layers: snapshots of a sequence's
                                  state kept per sequence at kv_block boundaries, 0..1024
                                  (0 = off: prefix reuse and truncation start from 0) */
    bool keep_hidden;          /* keep every row's final hidden state (hearth_get_hidden): what
                                  an MTP context reads */
    int64_t cache_bytes;       /* the prefix cache's cap: K/V bytes of blocks kept for no
                                  sequence (finished requests' prefixes), allocated on top of what
                                  the n_seq_max sequences can hold and never exceeded; -1 (the
                                  default) = no extra memory: the cache is whatever blocks the
                                  sequences leave free */
    const char *cache_dir;     /* the prefix cache's disk tier, or NULL: blocks evicted from
                                  memory are written here, one file a block, read back on a
                                  hit, and hearth_cache_flush writes the cached ones; the
                                  files found at creation are the index (others' skipped with
                                  a warning). Made when missing. Not for models with
                                  recurrent or sliding-window layers or K/V on a GPU */
    int64_t cache_disk_bytes;  /* its cap (whole files; least recently used deleted first) */
    bool mtp;                  /* the context runs the model's MTP head instead of its layers
                                  (hearth_model_has_mtp): its batches go through hearth_mtp_decode,
                                  its KV is the head's one layer, and it keeps its hidden states */
};

struct hearth_context_params hearth_context_default_params(void);

enum hearth_status hearth_context_new(struct hearth_model *model,
                                      const struct hearth_context_params *params,
                                      struct hearth_context **out, char *err, size_t err_len);
void hearth_context_free(struct hearth_context *ctx);

/*
 * Memory by what it is for, in bytes: the columns of `hearth fit`.
 * weights: the weights as loaded (mapped from the file or a packed copy),
 * with the host's f32 copies of the norm vectors; kv: per-sequence state
 * (K/V rows, the prefix cache's blocks, recurrent states and their
 * snapshots); compute: the buffers a micro-batch is computed in; output:
 * the logits rows; other: tables and indexes.
 */
struct hearth_memory {
    uint64_t weights, kv, compute, output, other;
};

/* One stage of a context: a contiguous range of layers on one device. */
struct hearth_stage_info {
    char device[16];     /* "cpu", "vulkan0", as `hearth devices` names it */
    int32_t layer_first; /* layers [layer_first, layer_end); equal: the output alone */
    int32_t layer_end;
    bool output;                 /* the stage computes the logits (holds the output weight) */
    uint64_t weight_bytes;       /* bytes of the weights the stage holds: uploaded to a device, or
                                    mapped from the file on the CPU */
    uint64_t kv_bytes;           /* bytes of its layers' K/V memory */
    struct hearth_memory memory; /* what its backend allocated for the context, by kind, in the
                                    device's memory (the host's for the CPU): buffers, logits,
                                    recurrent states, on a device its K/V rows and the
                                    vectors' copies */
};

/*
 * What the model holds in host memory, counted as it was loaded (the
 * tensors hearth reads, and the vectors' copies); a GPU stage's weights are
 * counted all the same, as the file's bytes.
 */
void hearth_model_memory(const struct hearth_model *m, struct hearth_memory *out);

/*
 * What ctx allocated in host memory, counted as it allocated: its cache's
 * pools and tables, its CPU stages' buffers, its arrays, a GPU stage's host
 * copies (its logits). A GPU stage's device buffers are not in it
 * (hearth_context_stage has them). `hearth fit` predicts these figures,
 * exactly on the CPU.
 */
void hearth_context_memory(const struct hearth_context *ctx, struct hearth_memory *out);

/* How many stages ctx runs (1 unless layers are offloaded or split). */
int32_t hearth_context_n_stages(const struct hearth_context *ctx);
/* Stage i's placement and memory into *out; false when i is out of range. */
bool hearth_context_stage(const struct hearth_context *ctx, int32_t i,
                          struct hearth_stage_info *out);

/*
 * A micro-batch: n tokens, each with its position and sequence id; logits[i]
 * says whether row i's logits are wanted. Positions of one sequence must
 * continue that sequence's cache (pos == tokens already cached for it).
 */
struct hearth_batch {
    int32_t n;
    const hearth_token *token; /* [n] */
    const int32_t *pos;        /* [n] */
    const int32_t *seq;        /* [n], 0 <= seq < n_seq_max */
    const int8_t *logits;      /* [n], NULL = only the last row */
};

/*
 * Runs the forward pass over the batch, appending its K/V to each sequence's
 * cache. Logits of the rows asked for are readable with hearth_get_logits
 * until the next call. HEARTH_EFULL when a sequence would pass n_ctx or the
 * KV pool has no free block.
 */
enum hearth_status hearth_decode(struct hearth_context *ctx, const struct hearth_batch *batch,
                                 char *err, size_t err_len);

/* Logits (n_vocab floats) of batch row i from the last hearth_decode; NULL if not computed. */
const float *hearth_get_logits(const struct hearth_context *ctx, int32_t i);

/*
 * Batch row i's final hidden state (n_embd floats, after the output norm)
 * from the last decode of a context with keep_hidden or mtp; NULL otherwise.
 */
const float *hearth_get_hidden(const struct hearth_context *ctx, int32_t i);

/*
 * An MTP context's forward pass (hearth_context_params.mtp): row i pairs
 * token[i] at pos[i] with hidden[i] (n_embd floats), the target's final
 * hidden state at pos[i] - 1 (hearth_get_hidden of a keep_hidden context;
 * zeros where there is none), and the head predicts the token after
 * token[i]: its logits as hearth_get_logits gives them, its own hidden
 * state, which the next draft row takes as its input, by
 * hearth_get_hidden. hearth_decode refuses an MTP context and this refuses
 * any other (HEARTH_EINVAL).
 */
enum hearth_status hearth_mtp_decode(struct hearth_context *ctx, const struct hearth_batch *batch,
                                     const float *hidden, char *err, size_t err_len);

/*
 * Prefix cache. Full KV blocks that sequences have computed are indexed by a
 * hash of all tokens up to the block's end; they stay cached after their
 * sequence drops them, until the pool needs the room (least recently used
 * first). hearth_seq_reuse_prefix attaches to an EMPTY sequence seq the
 * longest cached run of whole blocks that matches tokens[0..n), sharing the
 * blocks (no copy), then as far as a cached block at the next position
 * matches (a copy of its rows: the last partial block of a sequence ended
 * with hearth_seq_end, or a whole block the prompt parts from midway), and
 * returns how many tokens it covers: at most n - 1 so the caller always
 * computes at least the last token (whose logits it needs). With
 * sliding-window layers it stops where the window's own blocks are no
 * longer cached, at a block boundary. Returns 0 when nothing matches. A
 * model with recurrent layers resumes only where a state snapshot was kept
 * (see n_state_snapshots): the match is cut to the nearest such position,
 * and that is what it returns.
 */
int32_t hearth_seq_reuse_prefix(struct hearth_context *ctx, int32_t seq, const hearth_token *tokens,
                                int32_t n);

/*
 * Makes sequence seq's full blocks findable by hearth_seq_reuse_prefix, and
 * with them the state snapshots seq took where those blocks end.
 * tokens[0..n) must be the tokens whose KV seq holds (n <= its length).
 * Cheap to call after every step: blocks already published are skipped.
 */
void hearth_seq_publish(struct hearth_context *ctx, int32_t seq, const hearth_token *tokens,
                        int32_t n);

/*
 * Ends sequence seq's use: publishes it as hearth_seq_publish does, its last
 * partial block too (on a model without recurrent or sliding-window layers),
 * then empties it. What it published stays cached for later prompts.
 */
void hearth_seq_end(struct hearth_context *ctx, int32_t seq, const hearth_token *tokens, int32_t n);

/*
 * KV pool occupancy: blocks in use by sequences, cached-only (evictable), and
 * total, summed over the cache's pools (a model with sliding-window layers
 * has a second, smaller one for them).
 */
void hearth_kv_stats(const struct hearth_context *ctx, int32_t *used, int32_t *cached,
                     int32_t *total);

/*
 * Writes sequence seq's K/V for its first n tokens (tokens[0..n), the ones
 * it holds; 1 <= n <= its length) to path: written to a temporary name
 * beside it, synced and renamed, so a crash leaves no half file. The file
 * carries the model's fingerprint, the cache's shape and a checksum.
 * HEARTH_EUNSUPPORTED for a model with recurrent or sliding-window layers
 * or K/V on a GPU (not saved yet), HEARTH_EIO with the reason.
 */
enum hearth_status hearth_seq_save(struct hearth_context *ctx, int32_t seq,
                                   const hearth_token *tokens, int32_t n, const char *path,
                                   char *err, size_t err_len);
/*
 * HEARTH_OK when ctx's sequences can be saved (hearth_seq_save), else
 * HEARTH_EUNSUPPORTED with the reason: a caller that offers saving asks
 * once, up front.
 */
enum hearth_status hearth_seq_save_supported(const struct hearth_context *ctx, char *err,
                                             size_t err_len);
/*
 * Loads a file hearth_seq_save wrote into empty sequence seq: its K/V, its
 * tokens in *tokens (malloc'd, *n_tokens of them), its whole blocks
 * published for prefix reuse. A file of another model, cache shape or type,
 * cut short, longer or damaged (checksum) is HEARTH_EFORMAT with the reason,
 * and nothing is loaded.
 */
enum hearth_status hearth_seq_load(struct hearth_context *ctx, int32_t seq, const char *path,
                                   hearth_token **tokens, int32_t *n_tokens, char *err,
                                   size_t err_len);

/* The prefix cache in bytes: what its blocks hold against its cap, and evictions so far. */
struct hearth_cache_stats {
    uint64_t bytes;    /* K/V bytes of the cached blocks (every layer, host or device) */
    int64_t cap_bytes; /* cache_bytes as the blocks round it down; -1 = no cap */
    int64_t evicted;   /* cached blocks dropped, to make room or by the cap */
    /* the disk tier (cache_dir; all 0 without one) */
    uint64_t disk_bytes, disk_cap_bytes; /* its files, and their cap (whole files) */
    uint64_t disk_reads, disk_writes;    /* blocks read back, written */
    uint64_t disk_hit_tokens;            /* tokens reused from blocks read back */
    uint64_t disk_evicted;               /* files deleted for the cap */
    uint64_t disk_skipped;               /* files refused: another model's, cut short, damaged,
                                            not a regular file */
    uint64_t disk_write_errors;          /* block writes that failed (a full disk...) */
};
void hearth_cache_stats(const struct hearth_context *ctx, struct hearth_cache_stats *out);

/*
 * Writes the prefix cache's cached blocks to its disk tier (cache_dir), the
 * most recently used kept within its cap: what a clean shutdown calls, so
 * the next start is warm, newest first. Stops after about seconds (the
 * block being written is finished), so a shutdown has a deadline. Nothing
 * without a disk tier.
 */
void hearth_cache_flush(struct hearth_context *ctx, double seconds);

/*
 * Drops sequence seq's cache from position p0 on (p0 = 0: the whole sequence).
 * A model with recurrent layers (qwen35moe) goes back only to a state
 * snapshot: any p0 below the sequence's length falls to the nearest one at
 * or below p0 (0 when there is none). Sliding-window layers give back the
 * blocks their window has passed: a p0 whose window (p0 - n_swa + 1 on)
 * reaches into one of them empties the sequence, while a p0 at or after the
 * start of the last batch always keeps. So callers read hearth_seq_len
 * afterwards to see what was kept.
 */
void hearth_seq_truncate(struct hearth_context *ctx, int32_t seq, int32_t p0);
/* Tokens cached for sequence seq. */
int32_t hearth_seq_len(const struct hearth_context *ctx, int32_t seq);

/*
 * Speculative verification on a model with recurrent layers: the next
 * hearth_decode keeps sequence seq's state after each of its first
 * n_keep_states rows, so that a hearth_seq_truncate to a position inside that
 * batch (after its first row) goes back exactly there rather than to a
 * snapshot. Good for that one decode; a no-op without recurrent layers or
 * with n_keep_states 0.
 */
void hearth_seq_keep_states(struct hearth_context *ctx, int32_t seq);

/* --------------------------------------------------------------- sampler --- */

struct hearth_sampler;

struct hearth_sampler_params {
    float temperature;     /* <= 0: greedy */
    int32_t top_k;         /* <= 0: off */
    float top_p;           /* >= 1: off */
    float min_p;           /* <= 0: off */
    float repeat_penalty;  /* 1: off */
    int32_t repeat_last_n; /* tokens of history the penalty looks at */
    uint64_t seed;
};

struct hearth_sampler_params hearth_sampler_default_params(void);
/* A sampler over n_vocab tokens (params NULL: the defaults); HEARTH_EINVAL for n_vocab < 1,
 * HEARTH_ENOMEM; *out NULL on failure. */
enum hearth_status hearth_sampler_new(const struct hearth_sampler_params *params, int32_t n_vocab,
                                      struct hearth_sampler **out, char *err, size_t err_len);
void hearth_sampler_free(struct hearth_sampler *s);
/* Picks a token from logits (n_vocab floats, not modified) and records it in the history. */
hearth_token hearth_sampler_sample(struct hearth_sampler *s, const float *logits);
/* Adds a token to the history the repetition penalty sees (prompt tokens). */
void hearth_sampler_accept(struct hearth_sampler *s, hearth_token tok);

#ifdef __cplusplus
}
#endif

#endif /* HEARTH_H */
