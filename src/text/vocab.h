/*
 * vocab.h: the tokenizer object's insides, shared by tokenizer.c (loading,
 * special tokens, decoding) and the per-model algorithms (spm.c now, bpe.c
 * later). Internal to src/text/: everything else uses tokenizer.h.
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
};

/* Per-token flags besides the type (llama.cpp's LSTRIP/RSTRIP attributes). */
enum {
    VOCAB_LSTRIP = 1 << 0, /* matched as special: eat whitespace on its left */
    VOCAB_RSTRIP = 1 << 1, /* matched as special: eat whitespace on its right */
};

struct vocab_token {
    const char *text; /* NUL-terminated, in tokenizer.arena; never empty */
    uint32_t len;     /* bytes of text, >= 1 */
    float score;      /* SPM merge priority (higher merges first); 0 when the file has none */
    uint8_t type;     /* enum token_type after llama.cpp's overrides (see tokenizer.c) */
    uint8_t flags;    /* VOCAB_LSTRIP | VOCAB_RSTRIP */
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

#endif
