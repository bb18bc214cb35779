/*
 * tokenizer.h: text <-> token ids for the vocabularies GGUF files carry.
 *
 * Built from the tokenizer.* metadata of a GGUF file. Models:
 * "llama" (SentencePiece, score-driven merges, <0xNN> byte fallback) and
 * "gpt2" (byte-level BPE: regex pre-tokenizer by tokenizer.ggml.pre, ranked
 * merges). Immutable after load: encode/decode are thread-safe. Sizes: vocab
 * of 256 to 256k tokens.
 */
#ifndef HEARTH_TOKENIZER_H
#define HEARTH_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "hearth.h"

struct tokenizer;

/* Token types of tokenizer.ggml.token_type (llama.cpp's values). */
enum token_type {
    TOKEN_UNDEFINED    = 0,
    TOKEN_NORMAL       = 1,
    TOKEN_UNKNOWN      = 2,
    TOKEN_CONTROL      = 3,
    TOKEN_USER_DEFINED = 4,
    TOKEN_UNUSED       = 5,
    TOKEN_BYTE         = 6,
};

/*
 * Builds the tokenizer from f's metadata (the strings are copied: f may be
 * closed afterwards). HEARTH_EUNSUPPORTED names an unknown
 * tokenizer.ggml.model or tokenizer.ggml.pre; HEARTH_EFORMAT a missing or
 * inconsistent array (a "gpt2" vocabulary needs tokenizer.ggml.merges).
 */
enum hearth_status tokenizer_load(const struct gguf_file *f, struct tokenizer **out, char *err,
                                  size_t err_len);
void tokenizer_free(struct tokenizer *t);

int32_t tokenizer_n_vocab(const struct tokenizer *t);
int32_t tokenizer_bos(const struct tokenizer *t); /* -1 if none */
int32_t tokenizer_eos(const struct tokenizer *t); /* -1 if none */
bool tokenizer_add_bos(const struct tokenizer *t);
bool tokenizer_add_eos(const struct tokenizer *t);
/* End of generation: EOS, EOT and the like. */
bool tokenizer_is_eog(const struct tokenizer *t, int32_t id);
enum token_type tokenizer_token_type(const struct tokenizer *t, int32_t id);
/*
 * Control tokens among those that text (tokenized with special tokens parsed) gives are
 * written out by tokenizer_decode_token from now on, their text as it is: a chat format's
 * markers ("<|channel|>", "[TOOL_CALLS]"), as llama.cpp's preserved tokens. End-of-generation
 * tokens are left alone. Returns how many tokens were newly marked, or -1 when out of memory.
 * Not thread-safe: call before the tokenizer is shared.
 */
int32_t tokenizer_keep_text(struct tokenizer *t, const char *text);
/* The vocabulary entry's raw text (as stored, e.g. "▁the"), NUL-terminated. */
const char *tokenizer_token_text(const struct tokenizer *t, int32_t id);

/*
 * Tokenizes len bytes of text (any bytes; invalid UTF-8 falls back to byte
 * tokens in SPM, and is read as one U+FFFD per bad byte in BPE, as llama.cpp
 * does). add_special: BOS/EOS as the vocab says; parse_special: control
 * and user-defined token texts in the input become those tokens.
 * On success *ids is malloc'd (caller frees) with *n_ids entries.
 */
enum hearth_status tokenizer_encode(const struct tokenizer *t, const char *text, size_t len,
                                    bool add_special, bool parse_special, int32_t **ids,
                                    size_t *n_ids, char *err, size_t err_len);

/*
 * The bytes token id stands for in output text: "▁" becomes a space (SPM),
 * each character of a BPE token its byte, byte tokens <0xNN> their byte,
 * control tokens nothing (those tokenizer_keep_text marked: their text). Writes at most cap bytes
 * to buf and returns the full length (larger than cap: call again bigger).
 */
size_t tokenizer_decode_token(const struct tokenizer *t, int32_t id, char *buf, size_t cap);

#endif
