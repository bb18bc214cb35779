/*
 * vocab.h: the tokenizer object's insides, shared by tokenizer.c (loading,
 * special tokens, decoding) and the per-model algorithms (spm.c, bpe.c).
 * Internal to src/text/: everything else uses tokenizer.h.
 *
 * Invariant after tokenizer_load: tokens[0..n_vocab) all have non-empty
 * NUL-terminated text in one arena; the text -> id map holds every text
 * (for a text that occurs twice, the higher id, as llama.cpp's map keeps);
 * every id field is -1 or in [0, n_vocab).
 */
#ifndef HEARTH_VOCAB_H
#define HEARTH_VOCAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hearth.h"
#include "text/tokenizer.h"

/* Which algorithm turns a text fragment into ids (tokenizer.ggml.model). */
enum vocab_model {
    VOCAB_SPM, /* "llama": SentencePiece, score-driven merges, byte fallback (spm.c) */
    VOCAB_BPE, /* "gpt2": byte-level BPE, regex pre-tokenizer, ranked merges (bpe.c) */
};

struct bpe; /* BPE's merges and compiled pre-tokenizer (bpe.c) */

/* Per-token flags besides the type (llama.cpp's LSTRIP/RSTRIP attributes). */
enum {
    VOCAB_LSTRIP = 1 << 0, /* matched as special: eat whitespace on its left */
    VOCAB_RSTRIP = 1 << 1, /* matched as special: eat whitespace on its right */
    VOCAB_KEEP   = 1 << 2, /* a control token whose text is output (tokenizer_keep_text) */
};

struct vocab_token {
    const char *text; /* NUL-terminated, in tokenizer.arena; never empty */
    uint32_t len;     /* bytes of text, >= 1 */
    float score;      /* SPM merge priority (higher merges first); 0 when the file has none */
    uint8_t type;     /* enum token_type after llama.cpp's overrides (see tokenizer.c) */
    uint8_t flags;    /* VOCAB_LSTRIP | VOCAB_RSTRIP | VOCAB_KEEP */
};

struct tokenizer {
    enum vocab_model model;
    int32_t n_vocab;            /* 1 .. INT32_MAX */
    struct vocab_token *tokens; /* (n_vocab) */
    char *arena;                /* all token texts, NUL-separated */

    /* text -> id, open addressing with linear probing: slots hold id+1, 0 = empty. */
    uint32_t *map; /* (map_mask + 1), a power of two >= 2 * n_vocab */
    uint32_t map_mask;

    int32_t bos, eos, unk, pad; /* -1 when none */
    int32_t eot, eom;           /* end of turn / message, -1 when none */
    bool add_bos, add_eos;      /* what add_special adds */
    bool add_space_prefix;      /* SPM: a "▁" before text at the start or after a special token */

    uint8_t *eog; /* (n_vocab) 1 where the token ends generation */

    /* Tokens matched in the input before the model tokenizer runs: control,
     * user-defined and unknown tokens, longest text first (ties by id). */
    int32_t *special; /* (n_special) */
    int32_t n_special;

    int32_t byte_token[256]; /* byte fallback: "<0xNN>" (else the 1-byte text) or -1 */

    struct bpe *bpe; /* VOCAB_BPE only, else NULL; owned */
};

/* A growing list of ids (the encoder's output). */
struct id_buf {
    int32_t *ids;
    size_t n, cap;
};

/* Appends id; false when out of memory. */
bool id_buf_push(struct id_buf *b, int32_t id);

/* Id of the token whose text is exactly s[0..len), or -1. */
int32_t vocab_find(const struct tokenizer *t, const char *s, size_t len);

/*
 * SPM: appends the ids of one text fragment (raw bytes, not yet escaped) to
 * out. prefix_space: put a "▁" in front (the caller decides: add_space_prefix
 * and the fragment starts the input or follows a special token).
 * HEARTH_ENOMEM; HEARTH_EINVAL when a byte has neither a byte token nor an
 * unknown token to fall back to.
 */
enum hearth_status spm_encode(const struct tokenizer *t, const char *text, size_t len,
                              bool prefix_space, struct id_buf *out, char *err, size_t err_len);

/* ------------------------------------------------------------------ BPE --- */

/* What a pre-tokenizer type sets before the file's own keys are read (llama.cpp's load). */
struct bpe_defaults {
    bool add_bos; /* tokenizer.ggml.add_bos_token when the file does not say */
    bool no_bos;  /* no default BOS id (chatglm4): only tokenizer.ggml.bos_token_id gives one */
};

/*
 * BPE: reads tokenizer.ggml.pre (absent or empty: "default") and
 * tokenizer.ggml.merges, compiles the pre-tokenizer's regexes and sets
 * t->bpe; *d gets the type's defaults. HEARTH_EUNSUPPORTED names a
 * pre-tokenizer type hearth does not know; HEARTH_EFORMAT a missing or
 * mistyped key; HEARTH_ENOMEM.
 */
enum hearth_status bpe_load(struct tokenizer *t, const struct gguf_file *f, struct bpe_defaults *d,
                            char *err, size_t err_len);
void bpe_free(struct bpe *b);

/*
 * BPE: appends the ids of one text fragment (raw bytes; invalid UTF-8 is
 * read as llama.cpp reads it, each bad byte a U+FFFD) to out. HEARTH_ENOMEM;
 * HEARTH_ERANGE when a regex match gives up (PCRE2's limits).
 */
enum hearth_status bpe_encode(const struct tokenizer *t, const char *text, size_t len,
                              struct id_buf *out, char *err, size_t err_len);

/*
 * BPE: the bytes a normal token's text stands for (each character mapped
 * back through GPT-2's byte table). A character outside the table is written
 * as llama.cpp writes it: "[UNK_BYTE_0x<its UTF-8 in hex><token text>]".
 * Writes at most cap bytes to buf; returns the full length.
 */
size_t bpe_decode_text(const char *text, size_t len, char *buf, size_t cap);

/* GPT-2's bytes_to_unicode: the code point byte b is written as in a byte-level vocabulary. */
uint32_t bpe_byte_to_cpt(uint8_t b);
/* The inverse: the byte code point c stands for, or -1 if it stands for none. */
int bpe_cpt_to_byte(uint32_t c);

#endif
