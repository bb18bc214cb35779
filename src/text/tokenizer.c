/*
 * tokenizer.c: loading a vocabulary from GGUF metadata, the special-token
 * pass that runs before any model algorithm, decoding, and the dispatch to
 * the algorithm tokenizer.ggml.model names (spm.c for "llama", bpe.c for
 * "gpt2").
 *
 * What counts as special, end of generation and so on follows llama.cpp's
 * llama-vocab.cpp (load, tokenizer_st_partition, token_to_piece), including
 * its text-based overrides, so that ids match it exactly.
 *
 * Sizes: 32k-256k tokens; the text map is 8 bytes per token, the arena the
 * texts' total length.
 */
#include <stdlib.h>
#include <string.h>

#include "text/vocab.h"
#include "util/errfmt.h"
#include "util/hash.h"

/* ------------------------------------------------------------ id lists --- */

bool id_buf_push(struct id_buf *b, int32_t id)
{
    if (b->n == b->cap) {
        size_t cap   = b->cap ? b->cap * 2 : 64;
        int32_t *ids = realloc(b->ids, cap * sizeof *ids);
        if (!ids)
            return false;
        b->ids = ids;
        b->cap = cap;
    }
    b->ids[b->n++] = id;
    return true;
}

/* ---------------------------------------------------------- text -> id --- */

static uint64_t hash_bytes(const char *s, size_t len)
{
    const uint64_t h = fnv1a64(FNV1A64_SEED, s, len);
    return h ^ (h >> 29);
}

int32_t vocab_find(const struct tokenizer *t, const char *s, size_t len)
{
    uint32_t i = (uint32_t)hash_bytes(s, len) & t->map_mask;
    for (;; i = (i + 1) & t->map_mask) {
        uint32_t slot = t->map[i];
        if (slot == 0)
            return -1;
        const struct vocab_token *tok = &t->tokens[slot - 1];
        if (tok->len == len && memcmp(tok->text, s, len) == 0)
            return (int32_t)(slot - 1);
    }
}

/* Maps every token's text; a repeated text maps to the later id (llama.cpp's token_to_id). */
static bool map_build(struct tokenizer *t)
{
    uint32_t cap = 16;
    while (cap < 2u * (uint32_t)t->n_vocab)
        cap *= 2;
    t->map = calloc(cap, sizeof *t->map);
    if (!t->map)
        return false;
    t->map_mask = cap - 1;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        const struct vocab_token *tok = &t->tokens[id];
        uint32_t i                    = (uint32_t)hash_bytes(tok->text, tok->len) & t->map_mask;
        for (;; i = (i + 1) & t->map_mask) {
            uint32_t slot = t->map[i];
            if (slot == 0 || (t->tokens[slot - 1].len == tok->len &&
                              memcmp(t->tokens[slot - 1].text, tok->text, tok->len) == 0)) {
                t->map[i] = (uint32_t)id + 1;
                break;
            }
        }
    }
    return true;
}

/* The id a text maps to, for the by-text rules below (-1 when absent). */
static int32_t find_str(const struct tokenizer *t, const char *s)
{
    return vocab_find(t, s, strlen(s));
}

/* True when id is the token its text maps to (the one llama.cpp's by-text loops visit). */
static bool is_canonical(const struct tokenizer *t, int32_t id)
{
    return vocab_find(t, t->tokens[id].text, t->tokens[id].len) == id;
}

static bool text_in(const struct vocab_token *tok, const char *const *list)
{
    for (; *list; list++)
        if (strlen(*list) == tok->len && memcmp(*list, tok->text, tok->len) == 0)
            return true;
    return false;
}

/* ------------------------------------------------------------- loading --- */

/* Special-token ids read from the file (llama.cpp's special_*_id). */
struct special_ids {
    int32_t bos, eos, eot, eom, unk, pad, fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep;
};

/*
 * Reads the optional id key into *id. -1 (or 0xFFFFFFFF, the same written
 * unsigned) means "not set" and keeps the default, which is what llama.cpp
 * ends up doing with it; any other id past the vocabulary is refused
 * (llama.cpp warns and keeps the default, but such a file is broken).
 */
static enum hearth_status read_id(const struct gguf_file *f, const char *key, int32_t n_vocab,
                                  int32_t *id, char *err, size_t err_len)
{
    int64_t i = gguf_find_key(f, key), v;
    if (i < 0)
        return HEARTH_OK;
    if (!gguf_kv_i64(f, i, &v)) {
        uint64_t u;
        if (!gguf_kv_u64(f, i, &u))
            return fail(HEARTH_EFORMAT, err, err_len, "tokenizer: %s is a %s, not a token id", key,
                        gguf_vtype_name(gguf_kv_type(f, i)));
        v = INT64_MAX; /* a u64 past INT64_MAX: out of range below */
    }
    if (v == -1 || v == 0xFFFFFFFF)
        return HEARTH_OK;
    if (v < 0 || v >= n_vocab)
        return fail(HEARTH_EFORMAT, err, err_len,
                    "tokenizer: %s is %lld but the vocabulary has %d tokens", key, (long long)v,
                    n_vocab);
    *id = (int32_t)v;
    return HEARTH_OK;
}

static enum hearth_status read_bool(const struct gguf_file *f, const char *key, bool *out,
                                    char *err, size_t err_len)
{
    if (gguf_find_key(f, key) < 0)
        return HEARTH_OK;
    if (!gguf_get_bool(f, key, out))
        return fail(HEARTH_EFORMAT, err, err_len, "tokenizer: %s is not a bool", key);
    return HEARTH_OK;
}

/* Index of an optional array key of n >= n_vocab elements of one of two types, or -1. */
static enum hearth_status find_array(const struct gguf_file *f, const char *key, uint64_t n_vocab,
                                     enum gguf_vtype ok1, enum gguf_vtype ok2, int64_t *idx,
                                     enum gguf_vtype *elem, char *err, size_t err_len)
{
    *idx = gguf_find_key(f, key);
    if (*idx < 0)
        return HEARTH_OK;
    uint64_t n;
    if (!gguf_kv_arr(f, *idx, elem, &n) || (*elem != ok1 && *elem != ok2))
        return fail(HEARTH_EFORMAT, err, err_len, "tokenizer: %s is not an array of %s%s%s", key,
                    gguf_vtype_name(ok1), ok2 != ok1 ? " or " : "",
                    ok2 != ok1 ? gguf_vtype_name(ok2) : "");
    /* llama.cpp accepts a longer array and reads the first n_vocab */
    if (n < n_vocab)
        return fail(HEARTH_EFORMAT, err, err_len,
                    "tokenizer: %s has %llu entries but tokenizer.ggml.tokens has %llu", key,
                    (unsigned long long)n, (unsigned long long)n_vocab);
    if (!gguf_arr_data(f, *idx))
        return fail(HEARTH_EFORMAT, err, err_len, "tokenizer: %s has no readable data", key);
    return HEARTH_OK;
}

/* Copies the token texts into one arena; an empty text becomes "[EMPTY_<id>]" as in llama.cpp. */
static enum hearth_status load_texts(struct tokenizer *t, const struct gguf_file *f, int64_t idx,
                                     char *err, size_t err_len)
{
    size_t total = 0;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        struct gguf_str s;
        if (!gguf_arr_str(f, idx, (uint64_t)id, &s))
            return fail(HEARTH_EFORMAT, err, err_len,
                        "tokenizer: tokenizer.ggml.tokens entry %d cannot be read", id);
        if (s.len > UINT32_MAX - 32)
            return fail(HEARTH_EFORMAT, err, err_len, "tokenizer: token %d is %llu bytes long", id,
                        (unsigned long long)s.len);
        total += (s.len ? s.len : 32) + 1;
    }
    t->arena = malloc(total ? total : 1);
    if (!t->arena)
        return fail(HEARTH_ENOMEM, err, err_len,
                    "tokenizer: out of memory for %zu bytes of token text", total);
    char *p = t->arena;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        struct gguf_str s;
        gguf_arr_str(f, idx, (uint64_t)id, &s);
        struct vocab_token *tok = &t->tokens[id];
        tok->text               = p;
        if (s.len == 0) {
            int n    = snprintf(p, 32, "[EMPTY_%d]", id);
            tok->len = (uint32_t)n;
        } else {
            memcpy(p, s.ptr, s.len);
            tok->len = (uint32_t)s.len;
        }
        p[tok->len] = 0;
        p += tok->len + 1;
    }
    return HEARTH_OK;
}

/* Marks a token found by its text as control (llama.cpp: "control-looking token"). */
static void make_control(struct tokenizer *t, int32_t id)
{
    t->tokens[id].type = TOKEN_CONTROL;
}

/*
 * llama.cpp's by-text detection: EOT, EOM and FIM tokens when their key is
 * absent, then the end-of-generation set, then its two exceptions. Tokens
 * found this way become control tokens, which changes how they are
 * partitioned and decoded.
 */
static void find_by_text(struct tokenizer *t, struct special_ids *sp)
{
    static const char *const eot_texts[] = {
        "<|eot_id|>",         "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
        "<|end_of_text|>",    "<EOT>",      "_<EOT>",  "[EOT]",         "<｜end▁of▁sentence｜>",
        "<end_of_utterance>", NULL};
    static const char *const eom_texts[]   = {"<|eom_id|>", NULL};
    static const char *const pre_texts[]   = {"<|fim_prefix|>",  "<fim-prefix>", "<fim_prefix>",
                                              "<｜fim▁begin｜>", "<PRE>",        "▁<PRE>",
                                              "<|code_prefix|>", "<|prefix|>",   NULL};
    static const char *const suf_texts[]   = {"<|fim_suffix|>",  "<fim-suffix>", "<fim_suffix>",
                                              "<｜fim▁hole｜>",  "<SUF>",        "▁<SUF>",
                                              "<|code_suffix|>", "<|suffix|>",   NULL};
    static const char *const mid_texts[]   = {"<|fim_middle|>",  "<fim-middle>", "<fim_middle>",
                                              "<｜fim▁end｜>",   "<MID>",        "▁<MID>",
                                              "<|code_middle|>", "<|middle|>",   NULL};
    static const char *const pad_texts[]   = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>",
                                              "<PAD>",       "[PAD]",     NULL};
    static const char *const rep_texts[]   = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
                                              "<REPO>",       "<reponame>",    NULL};
    static const char *const sep_texts[]   = {"<|file_sep|>", NULL};
    static const char *const eog_texts[]   = {"<|eot_id|>",
                                              "<|im_end|>",
                                              "<|end|>",
                                              "<|return|>",
                                              "<|call|>",
                                              "<|flush|>",
                                              "<|calls|>",
                                              "<end_of_turn>",
                                              "<|endoftext|>",
                                              "</s>",
                                              "<|eom_id|>",
                                              "<EOT>",
                                              "_<EOT>",
                                              "[EOT]",
                                              "[EOS]",
                                              "<|end_of_text|>",
                                              "<end_of_utterance>",
                                              "<eos>",
                                              "<turn|>",
                                              "<|tool_response>",
                                              "<｜end▁of▁sentence｜>",
                                              "[e~[",
                                              NULL};
    static const char *const always_user[] = {"<|channel|>", "<|message|>", "<|start|>",
                                              "<|constrain|>", NULL};

    /* llama.cpp walks a hash map here, so which of several candidates wins is
     * unspecified there; the lowest id wins here. */
    struct {
        int32_t *id;
        const char *const *texts;
    } detect[] = {
        {&sp->eot, eot_texts},     {&sp->eom, eom_texts},     {&sp->fim_pre, pre_texts},
        {&sp->fim_suf, suf_texts}, {&sp->fim_mid, mid_texts}, {&sp->fim_pad, pad_texts},
        {&sp->fim_rep, rep_texts}, {&sp->fim_sep, sep_texts},
    };
    for (int32_t id = 0; id < t->n_vocab; id++) {
        if (!is_canonical(t, id))
            continue;
        for (size_t k = 0; k < sizeof detect / sizeof detect[0]; k++) {
            if (*detect[k].id < 0 && text_in(&t->tokens[id], detect[k].texts)) {
                *detect[k].id = id;
                make_control(t, id);
            }
        }
    }

    if (sp->fim_pad >= 0)
        t->eog[sp->fim_pad] = 1;
    if (sp->fim_rep >= 0)
        t->eog[sp->fim_rep] = 1;
    if (sp->fim_sep >= 0)
        t->eog[sp->fim_sep] = 1;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        if (is_canonical(t, id) && text_in(&t->tokens[id], eog_texts)) {
            t->eog[id] = 1;
            make_control(t, id);
        }
    }
    for (int32_t id = 0; id < t->n_vocab; id++)
        if (is_canonical(t, id) && text_in(&t->tokens[id], always_user))
            t->tokens[id].type = TOKEN_USER_DEFINED;
    if (sp->eos >= 0)
        t->eog[sp->eos] = 1;
    if (sp->eot >= 0)
        t->eog[sp->eot] = 1;
    if (sp->eom >= 0)
        t->eog[sp->eom] = 1;

    /* o200k_harmony and solar-open end turns with other tokens: "<|end|>" is not EOG there */
    bool has_return = false, has_call = false, has_flush = false;
    int32_t end_id = -1;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        if (!t->eog[id])
            continue;
        const char *s = t->tokens[id].text;
        if (!strcmp(s, "<|return|>"))
            has_return = true;
        else if (!strcmp(s, "<|call|>") || !strcmp(s, "<|calls|>"))
            has_call = true;
        else if (!strcmp(s, "<|flush|>"))
            has_flush = true;
        else if (!strcmp(s, "<|end|>"))
            end_id = id;
    }
    if (end_id >= 0 && has_call && (has_return || has_flush)) {
        t->eog[end_id]         = 0;
        t->tokens[end_id].type = TOKEN_USER_DEFINED;
    }

    /* gemma4 and paddleocr: "</s>" is not EOG when "<|tool_response>" is */
    bool has_tool_response = false;
    int32_t s_id           = -1;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        if (!t->eog[id])
            continue;
        if (!strcmp(t->tokens[id].text, "<|tool_response>"))
            has_tool_response = true;
        else if (!strcmp(t->tokens[id].text, "</s>"))
            s_id = id;
    }
    if (has_tool_response && s_id >= 0) {
        t->eog[s_id]         = 0;
        t->tokens[s_id].type = TOKEN_NORMAL;
    }
}

/* A special token for sorting: longest text first, then lowest id. */
struct by_len {
    uint32_t len;
    int32_t id;
};

static int by_len_desc(const void *a, const void *b)
{
    const struct by_len *x = a, *y = b;
    if (x->len != y->len)
        return x->len > y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static bool is_special_type(uint8_t type)
{
    return type == TOKEN_CONTROL || type == TOKEN_USER_DEFINED || type == TOKEN_UNKNOWN;
}

static bool contains_any(const char *s, const char *const *subs)
{
    for (; *subs; subs++)
        if (strstr(s, *subs))
            return true;
    return false;
}

static void set_flag(struct tokenizer *t, const char *text, uint8_t flag, bool on)
{
    int32_t id = find_str(t, text);
    if (id < 0)
        return;
    if (on)
        t->tokens[id].flags |= flag;
    else
        t->tokens[id].flags &= (uint8_t)~flag;
}

/* Per-model strip attributes llama.cpp sets by model and tokenizer name. */
static void set_strip_flags(struct tokenizer *t, const struct gguf_file *f)
{
    char name[256] = "", pre[256] = "", arch[256] = "";
    gguf_get_str(f, "general.name", name, sizeof name);
    gguf_get_str(f, "tokenizer.ggml.pre", pre, sizeof pre);
    gguf_get_str(f, "general.architecture", arch, sizeof arch);
    for (char *p = name; *p; p++)
        if (*p >= 'A' && *p <= 'Z')
            *p = (char)(*p - 'A' + 'a');

    if (contains_any(pre,
                     (const char *const[]){"jina-v2-de", "jina-v2-es", "jina-v2-code", NULL}) ||
        contains_any(arch, (const char *const[]){"nomic-bert-moe", "jina-bert-v3", NULL})) {
        set_flag(t, "<mask>", VOCAB_LSTRIP, true);
    } else if (contains_any(name, (const char *const[]){"phi-3", "phi3", NULL})) {
        for (int32_t i = 0; i < t->n_special; i++)
            t->tokens[t->special[i]].flags |= VOCAB_RSTRIP;
        set_flag(t, "</s>", VOCAB_RSTRIP, true);
        set_flag(t, "<unk>", VOCAB_RSTRIP, false);
        set_flag(t, "<s>", VOCAB_RSTRIP, false);
        set_flag(t, "<|endoftext|>", VOCAB_RSTRIP, false);
    } else if (contains_any(name, (const char *const[]){"modern-bert", NULL})) {
        set_flag(t, "[MASK]", VOCAB_LSTRIP, true);
    }
}

enum hearth_status tokenizer_load(const struct gguf_file *f, struct tokenizer **out, char *err,
                                  size_t err_len)
{
    enum hearth_status st;
    *out = NULL;

    int64_t mi = gguf_find_key(f, "tokenizer.ggml.model");
    struct gguf_str model;
    if (mi < 0)
        return fail(HEARTH_EFORMAT, err, err_len,
                    "tokenizer: the file has no tokenizer.ggml.model (no vocabulary)");
    if (!gguf_kv_str(f, mi, &model))
        return fail(HEARTH_EFORMAT, err, err_len,
                    "tokenizer: tokenizer.ggml.model is a %s, "
                    "not a string",
                    gguf_vtype_name(gguf_kv_type(f, mi)));
    enum vocab_model kind;
    if (model.len == 5 && !memcmp(model.ptr, "llama", 5))
        kind = VOCAB_SPM;
    else if (model.len == 4 && !memcmp(model.ptr, "gpt2", 4))
        kind = VOCAB_BPE;
    else
        return fail(HEARTH_EUNSUPPORTED, err, err_len,
                    "tokenizer: tokenizer.ggml.model '%.*s' is not supported (hearth reads "
                    "'llama' SentencePiece and 'gpt2' byte-level BPE vocabularies)",
                    (int)(model.len > 64 ? 64 : model.len), model.ptr);

    int64_t ti = gguf_find_key(f, "tokenizer.ggml.tokens");
    enum gguf_vtype elem;
    uint64_t n_tok;
    if (ti < 0)
        return fail(HEARTH_EFORMAT, err, err_len, "tokenizer: tokenizer.ggml.tokens is missing");
    if (!gguf_kv_arr(f, ti, &elem, &n_tok) || elem != GGUF_STR)
        return fail(HEARTH_EFORMAT, err, err_len,
                    "tokenizer: tokenizer.ggml.tokens is not an array of strings");
    if (n_tok == 0 || n_tok > (1u << 30))
        return fail(HEARTH_EFORMAT, err, err_len,
                    "tokenizer: tokenizer.ggml.tokens has %llu entries (1 to 2^30 expected)",
                    (unsigned long long)n_tok);

    int64_t si, yi;
    enum gguf_vtype s_elem = GGUF_F32, y_elem = GGUF_I32;
    st = find_array(f, "tokenizer.ggml.scores", n_tok, GGUF_F32, GGUF_I32, &si, &s_elem, err,
                    err_len);
    if (st)
        return st;
    st = find_array(f, "tokenizer.ggml.token_type", n_tok, GGUF_I32, GGUF_I32, &yi, &y_elem, err,
                    err_len);
    if (st)
        return st;

    struct tokenizer *t = calloc(1, sizeof *t);
    if (!t)
        return fail(HEARTH_ENOMEM, err, err_len, "tokenizer: out of memory");
    t->model   = kind;
    t->n_vocab = (int32_t)n_tok;
    t->tokens  = calloc(n_tok, sizeof *t->tokens);
    t->eog     = calloc(n_tok, 1);
    if (!t->tokens || !t->eog) {
        st = fail(HEARTH_ENOMEM, err, err_len, "tokenizer: out of memory for %llu tokens",
                  (unsigned long long)n_tok);
        goto err;
    }
    if ((st = load_texts(t, f, ti, err, err_len)))
        goto err;

    const unsigned char *scores = si >= 0 ? gguf_arr_data(f, si) : NULL;
    const unsigned char *types  = yi >= 0 ? gguf_arr_data(f, yi) : NULL;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        struct vocab_token *tok = &t->tokens[id];
        if (scores && s_elem == GGUF_F32) {
            memcpy(&tok->score, scores + 4 * (size_t)id, 4);
        } else if (scores) {
            int32_t v;
            memcpy(&v, scores + 4 * (size_t)id, 4);
            tok->score = (float)v;
        }
        tok->type = TOKEN_NORMAL;
        if (types) {
            int32_t v;
            memcpy(&v, types + 4 * (size_t)id, 4);
            tok->type = v >= TOKEN_NORMAL && v <= TOKEN_BYTE ? (uint8_t)v : TOKEN_UNDEFINED;
        }
    }
    if (!map_build(t)) {
        st = fail(HEARTH_ENOMEM, err, err_len, "tokenizer: out of memory for the token map");
        goto err;
    }

    /* SPM defaults (llama.cpp): <unk> 0, <s> 1, </s> 2, BOS added, EOS not, "▁" prefix. */
    struct special_ids sp = {.bos     = 1,
                             .eos     = 2,
                             .eot     = -1,
                             .eom     = -1,
                             .unk     = 0,
                             .pad     = -1,
                             .fim_pre = -1,
                             .fim_suf = -1,
                             .fim_mid = -1,
                             .fim_pad = -1,
                             .fim_rep = -1,
                             .fim_sep = -1};
    t->add_bos            = true;
    t->add_eos            = false;
    t->add_space_prefix   = true;
    if (kind == VOCAB_BPE) {
        /* BPE defaults (llama.cpp): BOS and EOS 11 (GPT-2's old default), no unknown token,
         * nothing added unless the pre-tokenizer type or the file says so */
        struct bpe_defaults d = {0};
        if ((st = bpe_load(t, f, &d, err, err_len)))
            goto err;
        sp.bos              = d.no_bos ? -1 : 11;
        sp.eos              = 11;
        sp.unk              = -1;
        t->add_bos          = d.add_bos;
        t->add_space_prefix = false;
    }
    int32_t *defaults[] = {&sp.bos, &sp.eos, &sp.unk};
    for (size_t k = 0; k < sizeof defaults / sizeof defaults[0]; k++)
        if (*defaults[k] >= t->n_vocab)
            *defaults[k] = -1;

    struct {
        const char *key;
        int32_t *id;
    } id_keys[] = {
        {"tokenizer.ggml.bos_token_id", &sp.bos},
        {"tokenizer.ggml.eos_token_id", &sp.eos},
        {"tokenizer.ggml.eot_token_id", &sp.eot},
        {"tokenizer.ggml.eom_token_id", &sp.eom},
        {"tokenizer.ggml.unknown_token_id", &sp.unk},
        {"tokenizer.ggml.padding_token_id", &sp.pad},
        {"tokenizer.ggml.fim_pre_token_id", &sp.fim_pre},
        {"tokenizer.ggml.fim_suf_token_id", &sp.fim_suf},
        {"tokenizer.ggml.fim_mid_token_id", &sp.fim_mid},
        {"tokenizer.ggml.fim_pad_token_id", &sp.fim_pad},
        {"tokenizer.ggml.fim_rep_token_id", &sp.fim_rep},
        {"tokenizer.ggml.fim_sep_token_id", &sp.fim_sep},
        /* deprecated names of the first three FIM ids */
        {"tokenizer.ggml.prefix_token_id", &sp.fim_pre},
        {"tokenizer.ggml.suffix_token_id", &sp.fim_suf},
        {"tokenizer.ggml.middle_token_id", &sp.fim_mid},
    };
    for (size_t k = 0; k < sizeof id_keys / sizeof id_keys[0]; k++)
        if ((st = read_id(f, id_keys[k].key, t->n_vocab, id_keys[k].id, err, err_len)))
            goto err;
    if ((st = read_bool(f, "tokenizer.ggml.add_bos_token", &t->add_bos, err, err_len)) ||
        (st = read_bool(f, "tokenizer.ggml.add_eos_token", &t->add_eos, err, err_len)) ||
        (st = read_bool(f, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix, err, err_len)))
        goto err;

    find_by_text(t, &sp);
    t->bos = sp.bos;
    t->eos = sp.eos;
    t->eot = sp.eot;
    t->eom = sp.eom;
    t->unk = sp.unk;
    t->pad = sp.pad;

    t->special = malloc(n_tok * sizeof *t->special);
    if (!t->special) {
        st = fail(HEARTH_ENOMEM, err, err_len, "tokenizer: out of memory");
        goto err;
    }
    /* llama.cpp sorts by length only (std::sort, so equal lengths come in no set order) */
    struct by_len *order = malloc(n_tok * sizeof *order);
    if (!order) {
        st = fail(HEARTH_ENOMEM, err, err_len, "tokenizer: out of memory");
        goto err;
    }
    for (int32_t id = 0; id < t->n_vocab; id++)
        if (is_special_type(t->tokens[id].type))
            order[t->n_special++] = (struct by_len){t->tokens[id].len, id};
    qsort(order, (size_t)t->n_special, sizeof *order, by_len_desc);
    for (int32_t i = 0; i < t->n_special; i++)
        t->special[i] = order[i].id;
    free(order);
    set_strip_flags(t, f);

    for (int c = 0; c < 256; c++) {
        char hex[8];
        snprintf(hex, sizeof hex, "<0x%02X>", c);
        t->byte_token[c] = find_str(t, hex);
        if (t->byte_token[c] < 0) {
            char one         = (char)c;
            t->byte_token[c] = vocab_find(t, &one, 1);
        }
    }

    *out = t;
    return HEARTH_OK;
err:
    tokenizer_free(t);
    return st;
}

void tokenizer_free(struct tokenizer *t)
{
    if (!t)
        return;
    bpe_free(t->bpe);
    free(t->special);
    free(t->eog);
    free(t->map);
    free(t->arena);
    free(t->tokens);
    free(t);
}

/* ----------------------------------------------------------- accessors --- */

int32_t tokenizer_n_vocab(const struct tokenizer *t)
{
    return t->n_vocab;
}
int32_t tokenizer_bos(const struct tokenizer *t)
{
    return t->bos;
}
int32_t tokenizer_eos(const struct tokenizer *t)
{
    return t->eos;
}
bool tokenizer_add_bos(const struct tokenizer *t)
{
    return t->add_bos;
}
bool tokenizer_add_eos(const struct tokenizer *t)
{
    return t->add_eos;
}

bool tokenizer_is_eog(const struct tokenizer *t, int32_t id)
{
    return id >= 0 && id < t->n_vocab && t->eog[id];
}

/* The type after llama.cpp's overrides (e.g. a NORMAL "<|im_end|>" reads as CONTROL);
 * TOKEN_UNDEFINED for an id out of range. */
enum token_type tokenizer_token_type(const struct tokenizer *t, int32_t id)
{
    return id >= 0 && id < t->n_vocab ? (enum token_type)t->tokens[id].type : TOKEN_UNDEFINED;
}

int32_t tokenizer_keep_text(struct tokenizer *t, const char *text)
{
    int32_t *ids = NULL;
    size_t n_ids = 0;
    char err[64];
    if (tokenizer_encode(t, text, strlen(text), false, true, &ids, &n_ids, err, sizeof err) !=
        HEARTH_OK)
        return -1;
    int32_t n = 0;
    for (size_t i = 0; i < n_ids; i++) {
        struct vocab_token *tok = &t->tokens[ids[i]];
        if (tok->type == TOKEN_CONTROL && !t->eog[ids[i]] && !(tok->flags & VOCAB_KEEP)) {
            tok->flags |= VOCAB_KEEP;
            n++;
        }
    }
    free(ids);
    return n;
}

/* "" for an id out of range. */
const char *tokenizer_token_text(const struct tokenizer *t, int32_t id)
{
    return id >= 0 && id < t->n_vocab ? t->tokens[id].text : "";
}

/* ------------------------------------------------------------ encoding --- */

/* A piece of the input: text still to tokenize (id < 0) or one special token. */
struct frag {
    size_t off, len; /* bytes of the input, for text */
    int32_t id;      /* the special token, or -1 for text */
};

struct frag_list {
    struct frag *v;
    size_t n, cap;
};

static bool frag_push(struct frag_list *l, struct frag fr)
{
    if (l->n == l->cap) {
        size_t cap     = l->cap ? l->cap * 2 : 16;
        struct frag *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return false;
        l->v   = v;
        l->cap = cap;
    }
    l->v[l->n++] = fr;
    return true;
}

/* isspace() in the C locale, for the strip rules. */
static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/*
 * Splits the text fragments of *cur at every occurrence of special token id
 * (leftmost first, not overlapping), into *next; then swaps the two.
 * LSTRIP/RSTRIP tokens swallow the whitespace beside them.
 */
static bool split_on(const struct tokenizer *t, const char *text, int32_t id, struct frag_list *cur,
                     struct frag_list *next)
{
    const struct vocab_token *tok = &t->tokens[id];
    next->n                       = 0;
    for (size_t k = 0; k < cur->n; k++) {
        struct frag fr = cur->v[k];
        if (fr.id >= 0) {
            if (!frag_push(next, fr))
                return false;
            continue;
        }
        size_t base = fr.off, blen = fr.len;
        for (;;) {
            const char *m =
                blen >= tok->len ? memmem(text + base, blen, tok->text, tok->len) : NULL;
            if (!m)
                break;
            size_t at   = (size_t)(m - text);
            size_t left = at - base;
            if (tok->flags & VOCAB_LSTRIP)
                while (left > 0 && is_space(text[base + left - 1]))
                    left--;
            if (left > 0 && !frag_push(next, (struct frag){base, left, -1}))
                return false;
            if (!frag_push(next, (struct frag){0, 0, id}))
                return false;
            size_t end = base + blen, r = at + tok->len;
            if (tok->flags & VOCAB_RSTRIP)
                while (r < end && is_space(text[r]))
                    r++;
            base = r;
            blen = end - r;
        }
        if (blen > 0 && !frag_push(next, (struct frag){base, blen, -1}))
            return false;
    }
    struct frag_list tmp = *cur;
    *cur                 = *next;
    *next                = tmp;
    return true;
}

static enum hearth_status encode_text(const struct tokenizer *t, const char *text, size_t len,
                                      bool after_special, struct id_buf *out, char *err,
                                      size_t err_len)
{
    switch (t->model) {
    case VOCAB_SPM:
        return spm_encode(t, text, len, t->add_space_prefix && after_special, out, err, err_len);
    case VOCAB_BPE:
        return bpe_encode(t, text, len, out, err, err_len);
    }
    return fail(HEARTH_EUNSUPPORTED, err, err_len, "tokenizer: unknown model %d", (int)t->model);
}

enum hearth_status tokenizer_encode(const struct tokenizer *t, const char *text, size_t len,
                                    bool add_special, bool parse_special, int32_t **ids,
                                    size_t *n_ids, char *err, size_t err_len)
{
    enum hearth_status st = HEARTH_OK;
    struct frag_list cur = {0}, next = {0};
    struct id_buf out = {0};
    *ids              = NULL;
    *n_ids            = 0;

    if (len > 0 && !frag_push(&cur, (struct frag){0, len, -1}))
        goto nomem;
    for (int32_t i = 0; i < t->n_special && cur.n > 0; i++) {
        int32_t id   = t->special[i];
        uint8_t type = t->tokens[id].type;
        /* without parse_special only user-defined tokens are split out (as llama.cpp and HF do) */
        if (!parse_special && (type == TOKEN_CONTROL || type == TOKEN_UNKNOWN))
            continue;
        if (!split_on(t, text, id, &cur, &next))
            goto nomem;
    }

    if (add_special && t->add_bos) {
        if (t->bos < 0) {
            st = fail(HEARTH_EINVAL, err, err_len,
                      "tokenizer: the vocabulary asks for a BOS token but has none");
            goto done;
        }
        if (!id_buf_push(&out, t->bos))
            goto nomem;
    }
    for (size_t k = 0; k < cur.n; k++) {
        const struct frag *fr = &cur.v[k];
        if (fr->id >= 0) {
            if (!id_buf_push(&out, fr->id))
                goto nomem;
            continue;
        }
        bool after_special = k == 0 || cur.v[k - 1].id >= 0;
        st = encode_text(t, text + fr->off, fr->len, after_special, &out, err, err_len);
        if (st)
            goto done;
    }
    if (add_special && t->add_eos) {
        if (t->eos < 0) {
            st = fail(HEARTH_EINVAL, err, err_len,
                      "tokenizer: the vocabulary asks for an EOS token but has none");
            goto done;
        }
        if (!id_buf_push(&out, t->eos))
            goto nomem;
    }
    if (!out.ids && !(out.ids = malloc(sizeof *out.ids)))
        goto nomem;
    *ids    = out.ids;
    *n_ids  = out.n;
    out.ids = NULL;
    goto done;

nomem:
    st = fail(HEARTH_ENOMEM, err, err_len, "tokenizer: out of memory tokenizing %zu bytes", len);
done:
    free(out.ids);
    free(cur.v);
    free(next.v);
    return st;
}

/* ------------------------------------------------------------ decoding --- */

static size_t put(char *buf, size_t cap, size_t at, const char *s, size_t n)
{
    if (at < cap)
        memcpy(buf + at, s, at + n <= cap ? n : cap - at);
    return at + n;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

size_t tokenizer_decode_token(const struct tokenizer *t, int32_t id, char *buf, size_t cap)
{
    if (id < 0 || id >= t->n_vocab)
        return 0;
    const struct vocab_token *tok = &t->tokens[id];
    if (tok->flags & VOCAB_KEEP)
        return put(buf, cap, 0, tok->text, tok->len);
    switch (tok->type) {
    case TOKEN_USER_DEFINED:
        return put(buf, cap, 0, tok->text, tok->len);
    case TOKEN_NORMAL: {
        if (t->model == VOCAB_BPE) /* each character stands for one byte */
            return bpe_decode_text(tok->text, tok->len, buf, cap);
        /* "▁" stands for a space */
        size_t n = 0;
        for (uint32_t i = 0; i < tok->len;) {
            if (i + 3 <= tok->len && !memcmp(tok->text + i, "\xe2\x96\x81", 3)) {
                n = put(buf, cap, n, " ", 1);
                i += 3;
            } else {
                n = put(buf, cap, n, tok->text + i, 1);
                i++;
            }
        }
        return n;
    }
    case TOKEN_BYTE: {
        /* "<0xNN>": the hex digits from the fourth character, as llama.cpp's strtol reads them */
        int v = 0;
        for (uint32_t i = 3; i < 5 && i < tok->len && hex_digit(tok->text[i]) >= 0; i++)
            v = v * 16 + hex_digit(tok->text[i]);
        char c = (char)v;
        return put(buf, cap, 0, &c, 1);
    }
    default: /* control, unknown, unused, undefined: nothing in output text */
        return 0;
    }
}
