/*
 * bpe.c: the byte-level BPE ("gpt2" tokenizer model) encoder, behaving as
 * llama.cpp's llm_tokenizer_bpe_session and unicode_regex_split do.
 *
 * One fragment at a time:
 *   1. the text is read as code points the way llama.cpp reads it (each
 *      invalid byte a U+FFFD, overlong forms accepted and re-encoded short);
 *   2. the pre-tokenizer's regexes (chosen by tokenizer.ggml.pre) cut it into
 *      words, each regex within the pieces the previous one left; matches and
 *      the gaps between them both become pieces;
 *   3. each word's bytes are written as GPT-2's printable stand-ins
 *      (bytes_to_unicode), split into one symbol per byte, and adjacent
 *      symbols merged lowest merge rank first (ties to the leftmost pair);
 *   4. each symbol left is a token, or else its bytes one by one where those
 *      are tokens (others are dropped, as llama.cpp drops them).
 *
 * The regexes run on PCRE2 (UTF mode, JIT when available), but with the
 * character classes llama.cpp gives them: it runs them on std::regex, where
 * \s, \d and \w are ASCII only and every non-ASCII white-space character has
 * been replaced by \v beforehand, while \p{..} goes by its own Unicode
 * tables. So PCRE2_UCP is deliberately off and the regexes see a copy of the
 * text with those characters as \v (a byte map leads back to the real
 * text). \p{Lu}-style letter classes mean any letter there, and are
 * rewritten to \p{L}. The one difference left is the Unicode version: PCRE2
 * 10.42 knows Unicode 14, llama.cpp's tables a later one, so the ~5000
 * characters assigned since (mostly CJK extensions H and I) count as
 * unassigned here, not as letters. (A 4-byte sequence past U+10FFFF, which
 * makes llama.cpp throw, is read as invalid bytes here.)
 *
 * Every pre-tokenizer type llama.cpp defines by regexes alone is here, with
 * its regexes as llama.cpp spells them (non-ASCII characters written \x{..}
 * so that no editor normalizes them); the few it splits with hand-written
 * code (kimi-k2, afmoe, tiny_aya, superbpe) or without byte encoding
 * (gemma4, sarvam-moe, whitespace) are refused.
 *
 * Cost: the regexes are linear in practice; merging is O(n log n) in a
 * word's bytes. Memory while it runs: about 20 bytes per byte of the fragment.
 * The merge table is about 24 bytes per merge plus the merge texts.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

#include "text/vocab.h"
#include "util/errfmt.h"
#include "util/hash.h"
#include "util/heap.h"
#include "util/utf8.h"

/* -------------------------------------------------- pre-tokenizer types --- */

#define MAX_REGEX 6

/* A pre-tokenizer type: llama.cpp's llm_tokenizer_bpe constructor and load(). */
struct pre_type {
    const char *names;            /* tokenizer.ggml.pre values, space-separated */
    const char *regex[MAX_REGEX]; /* applied in order; NULL-terminated when fewer */
    bool ignore_merges;           /* a word that is itself a token is that token */
    bool add_bos;                 /* default of tokenizer.ggml.add_bos_token */
    bool no_bos;                  /* no default BOS id */
};

#define RE_GPT2         "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RE_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define RE_LLAMA3                                                                                  \
    RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"   \
                    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN2                                                                                   \
    RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"        \
                    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_POLISH " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{964}\\x{6D4}\\x{60C})]+"

static const struct pre_type PRE_DEFAULT = {
    .names = "default",
    .regex = {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"},
};

/* clang-format off */
static const struct pre_type PRE_TYPES[] = {
    {.names = "llama3 llama-v3 llama-bpe falcon3 falcon-h1 pixtral midm-2.0 lfm2 jina-v5-nano",
     .regex = {RE_LLAMA3},
     .ignore_merges = true,
     .add_bos       = true},
    {.names = "dbrx smaug-bpe", .regex = {RE_LLAMA3}},
    {.names = "glm4 chatglm-bpe", .regex = {RE_LLAMA3}, .no_bos = true},
    {.names = "jais-2",
     .regex = {RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
                               "[\\r\\n]*|\\s*[\\r\\n]+|\\s{512}(?!\\S)|\\s{256}(?!\\S)|"
                               "\\s{128}(?!\\S)|\\s{64}(?!\\S)|\\s{32}(?!\\S)|\\s{16}(?!\\S)|"
                               "\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}"}},
    {.names = "deepseek-llm",
     .regex =
         {"[\r\n]",
          "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}"
          "\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}"
          "\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-"
          "\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}"
          "\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}"
          "\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}"
          "\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}"
          "\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-"
          "\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-"
          "\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}"
          "\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-"
          "\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}"
          "\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}"
          "-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-"
          "\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-"
          "\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}\\x{104D8}-"
          "\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}\\x{1E900}-"
          "\\x{1E943}]+",
          "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-"
          "\\x{3002}]+",
          "\\s+$", "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+", "\\p{N}+"}},
    {.names = "deepseek-v3 hunyuan-dense joyai-llm",
     .regex =
         {"\\p{N}{1,3}", "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+",
          "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}"
          "\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"}},
    {.names         = "youtu",
     .regex         = {"[\\x{AC00}-\\x{D7A3}\\x{3131}-\\x{318E}]+|[\\x{FF01}\\x{2026}\\x{201C}"
                               "\\x{201D}\\x{2018}\\x{2019}\\x{2014}\\x{FF1A}\\x{FF1B}\\x{FF0C}"
                               "\\x{3001}-\\x{303F}\\x{FE30}-\\x{FE4F}]+|[\\x{3105}-\\x{312F}]+|["
                               "\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+",
                       "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}"
                               "\\p{M}]+" RE_CONTRACTIONS
                       "?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}"
                               "\\p{Lo}\\p{M}]*" RE_CONTRACTIONS
                       "?|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     .ignore_merges = true},
    {.names = "deepseek-coder",
     .regex = {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+",
               "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+", "\\p{N}"}},
    {.names = "falcon", .regex = {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]"}},
    {.names = "starcoder refact command-r smollm codeshell exaone minerva-7b mellum2",
     .regex = {"\\p{N}", RE_GPT2}},
    {.names = "gpt-2 phi-2 jina-es jina-de gigachat jina-v2-es jina-v2-de a.x-4.0 mellum "
              "modern-bert jina-v1-en jina-v2-code roberta-bpe exaone4 mpt olmo jais trillion "
              "granite-docling",
     .regex = {RE_GPT2}},
    {.names = "qwen2 deepseek-r1-qwen kormo f2llmv2 megrez stablelm2 hunyuan solar-open grok-2",
     .regex = {RE_QWEN2}},
    {.names = "qwen35",
     .regex = {RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}"
                               "\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {.names = "poro-chat bloom gpt3-finnish", .regex = {RE_POLISH}},
    {.names = "viking", .regex = {RE_POLISH, "\\p{N}"}},
    {.names = "tekken",
     .regex = {"[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|[^\\r\\n"
               "\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*|\\p{N}| "
               "?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     .ignore_merges = true,
     .add_bos       = true},
    {.names   = "chameleon",
     .regex   = {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )",
                 "\\p{N}", "[\\p{P}!-/:-@\\[-`{-~]", RE_GPT2},
     .add_bos = true},
    {.names = "gpt-4o llama4 kanana2 talkie minimax-m2",
     .regex =
         {"[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+" RE_CONTRACTIONS
          "?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*" RE_CONTRACTIONS
          "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {.names         = "granite-embed-multi-97m",
     .regex         = {"[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))*((?=[\\p{L}\\p{M}])([^A-"
                               "Z]))+" RE_CONTRACTIONS
                       "?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))+((?=[\\p{L}\\p{M}])([^A-"
                               "Z]))*" RE_CONTRACTIONS
                       "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     .ignore_merges = true},
    {.names = "bailingmoe bailingmoe2 llada-moe",
     .regex = {"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
               "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"}},
    {.names = "seed-coder",
     .regex = {RE_CONTRACTIONS
               "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|"
               "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {.names = "laguna", .regex = {"[^\\n]+|[\\n]+", RE_QWEN2}},
    {.names = "exaone-moe",
     .regex = {RE_CONTRACTIONS
               "|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}| "
               "?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"}},
    {.names         = "minicpm5",
     .regex         = {"\\p{N}{1,3}",
                       RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^\\s\\p{L}\\p{N}]+"
                                               "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     .ignore_merges = true},
};
/* clang-format on */

/* Types llama.cpp knows but splits with hand-written code or with no byte encoding. */
static const char UNSUPPORTED_PRE[] = "kimi-k2 afmoe tiny_aya cohere2moe superbpe gemma4 "
                                      "granite-embed-multi-311m sarvam-moe whitespace";

/* True when name (len bytes) is one of the space-separated words of list. */
static bool in_list(const char *list, const char *name, size_t len)
{
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ' ');
        size_t n        = end ? (size_t)(end - p) : strlen(p);
        if (n == len && memcmp(p, name, len) == 0)
            return true;
        p += n + (end != NULL);
    }
    return false;
}

/* -------------------------------------------------------- byte mapping --- */

/* The bytes GPT-2 writes as themselves: '!'..'~', '¡'..'¬', '®'..'ÿ'. */
static bool byte_printable(uint32_t b)
{
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

/* The other 68 bytes become U+0100.. in byte order: 0x00-0x20, 0x7F-0xA0, 0xAD. */
uint32_t bpe_byte_to_cpt(uint8_t b)
{
    if (byte_printable(b))
        return b;
    if (b <= 0x20)
        return 0x100 + b;
    if (b <= 0xA0)
        return 0x100 + 33 + (uint32_t)(b - 0x7F);
    return 0x100 + 67; /* 0xAD */
}

int bpe_cpt_to_byte(uint32_t c)
{
    if (c < 0x100)
        return byte_printable(c) ? (int)c : -1;
    if (c < 0x100 + 33)
        return (int)(c - 0x100);
    if (c < 0x100 + 67)
        return (int)(c - 0x100 - 33 + 0x7F);
    if (c == 0x100 + 67)
        return 0xAD;
    return -1;
}

/* ---------------------------------------------------------------- UTF-8 --- */

/* Unicode's White_Space characters past ASCII: the ones llama.cpp turns into \v. */
static bool wide_space(uint32_t c)
{
    return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
           c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/* ------------------------------------------------------------- merges --- */

struct merge {
    uint32_t off;   /* first byte of left+right in merge_text */
    uint32_t len;   /* bytes of left+right */
    uint32_t split; /* bytes of left */
};

struct bpe {
    const struct pre_type *pre;
    pcre2_code *re[MAX_REGEX]; /* (n_re) compiled pre->regex, JIT-compiled when possible */
    int n_re;

    char *merge_text;     /* every merge's left and right, concatenated */
    struct merge *merges; /* (n_merges) by rank */
    uint32_t *merge_map;  /* (merge_mask + 1) rank+1 by (text, split); 0 = empty */
    uint32_t merge_mask;
};

static uint64_t hash_pair(const char *s, size_t len, size_t split)
{
    /* seeded by where the pair splits */
    const uint64_t h = fnv1a64(FNV1A64_SEED ^ split, s, len);
    return h ^ (h >> 29);
}

/* Rank of merging s[0..split) with s[split..len), or -1 when no merge joins them. */
static int32_t merge_rank(const struct bpe *b, const char *s, size_t len, size_t split)
{
    uint32_t i = (uint32_t)hash_pair(s, len, split) & b->merge_mask;
    for (;; i = (i + 1) & b->merge_mask) {
        uint32_t slot = b->merge_map[i];
        if (slot == 0)
            return -1;
        const struct merge *m = &b->merges[slot - 1];
        if (m->len == len && m->split == split && memcmp(b->merge_text + m->off, s, len) == 0)
            return (int32_t)(slot - 1);
    }
}

/*
 * Reads tokenizer.ggml.merges: entry i is "left right", split at the first
 * space after the first byte, and has rank i. A pair listed twice keeps its
 * first rank; an entry without such a space merges nothing (llama.cpp
 * files it under an empty pair no symbol ever forms).
 */
static enum hearth_status load_merges(struct bpe *b, const struct gguf_file *f, char *err,
                                      size_t err_len)
{
    static const char KEY[] = "tokenizer.ggml.merges";
    int64_t idx             = gguf_find_key(f, KEY);
    enum gguf_vtype elem;
    uint64_t n;
    if (idx < 0)
        return fail(HEARTH_EFORMAT, err, err_len,
                    "tokenizer: %s is missing (a gpt2 vocabulary needs its merges)", KEY);
    if (!gguf_kv_arr(f, idx, &elem, &n) || elem != GGUF_STR)
        return fail(HEARTH_EFORMAT, err, err_len, "tokenizer: %s is not an array of strings", KEY);
    if (n > (1u << 28))
        return fail(HEARTH_EFORMAT, err, err_len, "tokenizer: %s has %llu entries (2^28 at most)",
                    KEY, (unsigned long long)n);

    size_t total = 0;
    for (uint64_t i = 0; i < n; i++) {
        struct gguf_str s;
        if (!gguf_arr_str(f, idx, i, &s))
            return fail(HEARTH_EFORMAT, err, err_len, "tokenizer: %s entry %llu cannot be read",
                        KEY, (unsigned long long)i);
        total += s.len;
        if (total > UINT32_MAX)
            return fail(HEARTH_EFORMAT, err, err_len, "tokenizer: %s holds over 4 GiB of text",
                        KEY);
    }
    uint32_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    b->merge_text = malloc(total ? total : 1);
    b->merges     = malloc((n ? n : 1) * sizeof *b->merges);
    b->merge_map  = calloc(cap, sizeof *b->merge_map);
    if (!b->merge_text || !b->merges || !b->merge_map)
        return fail(HEARTH_ENOMEM, err, err_len, "tokenizer: out of memory for %llu merges",
                    (unsigned long long)n);
    b->merge_mask = cap - 1;

    uint32_t at = 0;
    for (uint64_t i = 0; i < n; i++) {
        struct gguf_str s;
        gguf_arr_str(f, idx, i, &s);
        struct merge *m = &b->merges[i];
        const char *sp  = s.len > 1 ? memchr(s.ptr + 1, ' ', s.len - 1) : NULL;
        *m              = (struct merge){.off = at, .len = 0, .split = 0};
        if (!sp || sp + 1 == s.ptr + s.len)
            continue; /* no pair, or an empty right side: never looked up */
        size_t left = (size_t)(sp - s.ptr), right = s.len - left - 1;
        memcpy(b->merge_text + at, s.ptr, left);
        memcpy(b->merge_text + at + left, sp + 1, right);
        m->len   = (uint32_t)(left + right);
        m->split = (uint32_t)left;
        at += m->len;

        uint32_t h = (uint32_t)hash_pair(b->merge_text + m->off, m->len, m->split) & b->merge_mask;
        for (;; h = (h + 1) & b->merge_mask) {
            uint32_t slot = b->merge_map[h];
            if (slot == 0) {
                b->merge_map[h] = (uint32_t)i + 1;
                break;
            }
            const struct merge *o = &b->merges[slot - 1];
            if (o->len == m->len && o->split == m->split &&
                memcmp(b->merge_text + o->off, b->merge_text + m->off, m->len) == 0)
                break; /* listed before: the first rank stays */
        }
    }
    return HEARTH_OK;
}

/* -------------------------------------------------------------- regexes --- */

/*
 * The pattern PCRE2 compiles for one of llama.cpp's regexes: \p{Lu}, \p{Ll},
 * \p{Lt}, \p{Lm} and \p{Lo} become \p{L}, as llama.cpp's category tables
 * know letters only as a whole. malloc'd; NULL when out of memory.
 */
static char *adapt_regex(const char *re)
{
    size_t n  = strlen(re);
    char *out = malloc(n + 1), *o = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < n;) {
        if (i + 6 <= n && !memcmp(re + i, "\\p{L", 4) && re[i + 5] == '}' &&
            strchr("ultmo", re[i + 4])) {
            memcpy(o, "\\p{L}", 5);
            o += 5;
            i += 6;
        } else if (re[i] == '\\' && i + 1 < n) {
            *o++ = re[i++]; /* an escape and the character it escapes */
            *o++ = re[i++];
        } else {
            *o++ = re[i++];
        }
    }
    *o = 0;
    return out;
}

static enum hearth_status compile_regexes(struct bpe *b, char *err, size_t err_len)
{
    for (int k = 0; k < MAX_REGEX && b->pre->regex[k]; k++) {
        char *pat = adapt_regex(b->pre->regex[k]);
        if (!pat)
            return fail(HEARTH_ENOMEM, err, err_len, "tokenizer: out of memory");
        int code;
        PCRE2_SIZE at;
        /* No PCRE2_UCP: \s is ASCII white space, as in std::regex (see the file header).
         * $ only at the very end, as ECMAScript's. */
        pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED,
                                       PCRE2_UTF | PCRE2_DOLLAR_ENDONLY, &code, &at, NULL);
        free(pat);
        if (!re) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(code, msg, sizeof msg);
            return fail(HEARTH_EINVAL, err, err_len,
                        "tokenizer: pre-tokenizer regex %d of '%.40s' does not compile at "
                        "offset %zu: %s",
                        k, b->pre->names, (size_t)at, (const char *)msg);
        }
        pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* falls back to the interpreter */
        b->re[b->n_re++] = re;
    }
    return HEARTH_OK;
}

/* ---------------------------------------------------------------- load --- */

enum hearth_status bpe_load(struct tokenizer *t, const struct gguf_file *f, struct bpe_defaults *d,
                            char *err, size_t err_len)
{
    static const char KEY[] = "tokenizer.ggml.pre";
    struct gguf_str pre     = {.ptr = "", .len = 0};
    int64_t idx             = gguf_find_key(f, KEY);
    if (idx >= 0 && !gguf_kv_str(f, idx, &pre))
        return fail(HEARTH_EFORMAT, err, err_len, "tokenizer: %s is a %s, not a string", KEY,
                    gguf_vtype_name(gguf_kv_type(f, idx)));
    int shown = (int)(pre.len > 64 ? 64 : pre.len);

    /* llama.cpp falls back to "default" when the key is absent or empty (and warns) */
    const struct pre_type *type = NULL;
    if (pre.len == 0 || in_list(PRE_DEFAULT.names, pre.ptr, pre.len))
        type = &PRE_DEFAULT;
    for (size_t i = 0; !type && i < sizeof PRE_TYPES / sizeof PRE_TYPES[0]; i++)
        if (in_list(PRE_TYPES[i].names, pre.ptr, pre.len))
            type = &PRE_TYPES[i];
    if (!type && in_list(UNSUPPORTED_PRE, pre.ptr, pre.len))
        return fail(HEARTH_EUNSUPPORTED, err, err_len,
                    "tokenizer: pre-tokenizer type '%.*s' is not supported (llama.cpp splits it "
                    "with hand-written code or without byte encoding)",
                    shown, pre.ptr);
    if (!type)
        return fail(HEARTH_EUNSUPPORTED, err, err_len,
                    "tokenizer: unknown pre-tokenizer type '%.*s' (%s)", shown, pre.ptr, KEY);

    struct bpe *b = calloc(1, sizeof *b);
    if (!b)
        return fail(HEARTH_ENOMEM, err, err_len, "tokenizer: out of memory");
    b->pre                = type;
    enum hearth_status st = load_merges(b, f, err, err_len);
    if (!st)
        st = compile_regexes(b, err, err_len);
    if (st) {
        bpe_free(b);
        return st;
    }
    t->bpe     = b;
    d->add_bos = type->add_bos;
    d->no_bos  = type->no_bos;
    return HEARTH_OK;
}

void bpe_free(struct bpe *b)
{
    if (!b)
        return;
    for (int k = 0; k < b->n_re; k++)
        pcre2_code_free(b->re[k]);
    free(b->merge_text);
    free(b->merges);
    free(b->merge_map);
    free(b);
}

/* ------------------------------------------------------------ splitting --- */

/*
 * The fragment twice: canon, the code points as llama.cpp reads them
 * (what words are cut from), and subj, what the regexes see (wide white
 * space as \v, surrogates as U+E000 since PCRE2 refuses them). canon_at maps
 * a character's offset in subj to its offset in canon.
 */
struct prepared {
    char *canon, *subj;
    size_t canon_len, subj_len;
    uint32_t *canon_at; /* (subj_len + 1), valid at character starts */
};

static bool prepare(const char *text, size_t len, struct prepared *p)
{
    /* an invalid byte grows to 3 (U+FFFD), nothing grows more */
    p->canon    = malloc(3 * len + 1);
    p->subj     = malloc(3 * len + 1);
    p->canon_at = malloc((3 * len + 1) * sizeof *p->canon_at);
    if (!p->canon || !p->subj || !p->canon_at)
        return false;
    size_t c = 0, s = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t n = utf8_decode(text + i, len - i, &cp);
        if (n == 0) {
            cp = 0xFFFD;
            n  = 1;
        }
        i += n;
        p->canon_at[s] = (uint32_t)c;
        size_t k       = utf8_encode(cp, p->canon + c);
        if (wide_space(cp)) {
            p->subj[s++] = '\v';
        } else if (cp >= 0xD800 && cp <= 0xDFFF) {
            s += utf8_encode(0xE000, p->subj + s);
        } else {
            memcpy(p->subj + s, p->canon + c, k);
            s += k;
        }
        c += k;
    }
    p->canon_at[s] = (uint32_t)c;
    p->canon_len   = c;
    p->subj_len    = s;
    return true;
}

/* Piece ends, as offsets into subj, ascending; the last is subj_len. */
struct cuts {
    uint32_t *v;
    size_t n, cap;
};

static bool cut(struct cuts *c, size_t at)
{
    if (c->n == c->cap) {
        size_t cap  = c->cap ? 2 * c->cap : 256;
        uint32_t *v = realloc(c->v, cap * sizeof *v);
        if (!v)
            return false;
        c->v   = v;
        c->cap = cap;
    }
    c->v[c->n++] = (uint32_t)at;
    return true;
}

/* What one encode call matches with; the JIT stack only if the default one runs short. */
struct matcher {
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    pcre2_jit_stack *stack;
};

static int match(struct matcher *m, const pcre2_code *re, const char *s, size_t len, size_t at,
                 uint32_t opts)
{
    opts |= PCRE2_NO_UTF_CHECK; /* prepare() wrote valid UTF-8; checking would be O(n) a call */
    int rc = pcre2_match(re, (PCRE2_SPTR)s, len, at, opts, m->md, m->mctx);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !m->stack) {
        m->mctx  = pcre2_match_context_create(NULL);
        m->stack = pcre2_jit_stack_create(64 * 1024, 64 * 1024 * 1024, NULL);
        if (!m->mctx || !m->stack)
            return PCRE2_ERROR_NOMEMORY;
        pcre2_jit_stack_assign(m->mctx, NULL, m->stack);
        rc = pcre2_match(re, (PCRE2_SPTR)s, len, at, opts, m->md, m->mctx);
    }
    return rc;
}

/*
 * Splits subj[base..end) with re, appending the ends of its pieces to out:
 * every match, and every stretch between matches, is a piece (the
 * std::regex_iterator walk llama.cpp does, empty matches included).
 */
static int split_piece(struct matcher *m, const pcre2_code *re, const char *subj, size_t base,
                       size_t end, struct cuts *out)
{
    const char *s = subj + base;
    size_t len = end - base, at = 0, last = 0;
    uint32_t opts = 0;
    while (at <= len) {
        int rc = match(m, re, s, len, at, opts);
        if (rc == PCRE2_ERROR_NOMATCH) {
            if (!opts || at == len)
                break;
            /* no non-empty match where an empty one was: move on one character (subj is
             * valid UTF-8, prepare() having replaced every invalid byte) */
            at += utf8_len((unsigned char)s[at]);
            opts = 0;
            continue;
        }
        if (rc < 0)
            return rc;
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(m->md);
        size_t from = ov[0], to = ov[1];
        if ((from > last && !cut(out, base + from)) || (to > from && !cut(out, base + to)))
            return PCRE2_ERROR_NOMEMORY;
        last = to;
        at   = to;
        opts = to == from ? PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED : 0;
    }
    if (last < len && !cut(out, end))
        return PCRE2_ERROR_NOMEMORY;
    return 0;
}

/*
 * Cuts p->subj into words: *cur starts as one piece and ends as the words'
 * ends, each regex splitting the pieces the previous one left. Returns 0 or
 * a PCRE2 error code.
 */
static int pretokenize(const struct bpe *b, const struct prepared *p, struct matcher *m,
                       struct cuts *cur, struct cuts *next)
{
    /* room for the whole match only: groups are never read (PCRE2 then returns 0, not an error) */
    if (!m->md && !(m->md = pcre2_match_data_create(1, NULL)))
        return PCRE2_ERROR_NOMEMORY;
    for (int k = 0; k < b->n_re; k++) {
        next->n     = 0;
        size_t from = 0;
        for (size_t i = 0; i < cur->n; i++) {
            int rc = split_piece(m, b->re[k], p->subj, from, cur->v[i], next);
            if (rc < 0)
                return rc;
            from = cur->v[i];
        }
        struct cuts tmp = *cur;
        *cur            = *next;
        *next           = tmp;
    }
    return 0;
}

/* -------------------------------------------------------------- merging --- */

/* A run of a word's bytes; merged away when n == 0. */
struct sym {
    int32_t prev, next; /* neighbours in the chain, -1 at the ends */
    uint32_t off;       /* first byte in the encoded word */
    uint32_t n;         /* encoded bytes, 0 once merged into its left neighbour */
};

/* A candidate merge of sym[left] and sym[right], valid while their sizes still add up to size. */
struct bigram {
    int32_t rank;
    int32_t left, right;
    uint32_t size;
};

/* a goes before b: lower rank, then the leftmost (llama.cpp's llm_bigram_bpe order). */
static bool before(const struct bigram *a, const struct bigram *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

HEAP_DEFINE(heap, struct bigram, before)

/* Working memory of one encode call, reused from word to word. */
struct work {
    char *enc; /* the word in GPT-2's byte alphabet */
    size_t enc_cap;
    struct sym *syms;
    size_t syms_cap;
    struct heap heap;
};

/* Pushes the merge of left and right when the merges list has it. */
static bool try_pair(const struct bpe *b, struct work *w, int32_t left, int32_t right)
{
    if (left < 0 || right < 0)
        return true;
    const struct sym *l = &w->syms[left], *r = &w->syms[right];
    /* neighbours are adjacent in enc, so the pair is one run of bytes */
    int32_t rank = merge_rank(b, w->enc + l->off, l->n + r->n, l->n);
    if (rank < 0)
        return true;
    struct bigram g = {.rank = rank, .left = left, .right = right, .size = l->n + r->n};
    return heap_push(&w->heap, g);
}

/* The ids of one word (canonical UTF-8 bytes), appended to out. */
static bool encode_word(const struct tokenizer *t, struct work *w, const char *word, size_t len,
                        struct id_buf *out)
{
    const struct bpe *b = t->bpe;
    if (2 * len > w->enc_cap) {
        size_t cap = 2 * len > 256 ? 2 * len : 256;
        char *enc  = realloc(w->enc, cap);
        if (!enc)
            return false;
        w->enc     = enc;
        w->enc_cap = cap;
    }
    if (len > w->syms_cap) {
        size_t cap       = len > 64 ? len : 64;
        struct sym *syms = realloc(w->syms, cap * sizeof *syms);
        if (!syms)
            return false;
        w->syms     = syms;
        w->syms_cap = cap;
    }
    size_t n_enc = 0;
    for (size_t i = 0; i < len; i++) {
        size_t k   = utf8_encode(bpe_byte_to_cpt((uint8_t)word[i]), w->enc + n_enc);
        w->syms[i] = (struct sym){.prev = (int32_t)i - 1,
                                  .next = i + 1 < len ? (int32_t)i + 1 : -1,
                                  .off  = (uint32_t)n_enc,
                                  .n    = (uint32_t)k};
        n_enc += k;
    }

    if (b->pre->ignore_merges) {
        int32_t id = vocab_find(t, w->enc, n_enc);
        if (id >= 0)
            return id_buf_push(out, id);
    }

    w->heap.n = 0;
    for (size_t i = 1; i < len; i++)
        if (!try_pair(b, w, (int32_t)i - 1, (int32_t)i))
            return false;
    while (w->heap.n > 0) {
        struct bigram g = heap_pop(&w->heap);
        struct sym *l = &w->syms[g.left], *r = &w->syms[g.right];
        /* stale: one side was merged since this pair was pushed */
        if (l->n == 0 || r->n == 0 || l->n + r->n != g.size)
            continue;
        l->n += r->n;
        r->n    = 0;
        l->next = r->next;
        if (r->next >= 0)
            w->syms[r->next].prev = g.left;
        if (!try_pair(b, w, l->prev, g.left) || !try_pair(b, w, g.left, l->next))
            return false;
    }

    for (int32_t i = 0; i != -1; i = w->syms[i].next) {
        const struct sym *s = &w->syms[i];
        int32_t id          = vocab_find(t, w->enc + s->off, s->n);
        if (id >= 0) {
            if (!id_buf_push(out, id))
                return false;
            continue;
        }
        /* llama.cpp then tries each byte of the encoded text alone, and drops what is no token */
        for (uint32_t j = 0; j < s->n; j++) {
            id = vocab_find(t, w->enc + s->off + j, 1);
            if (id >= 0 && !id_buf_push(out, id))
                return false;
        }
    }
    return true;
}

/* -------------------------------------------------------------- encode --- */

enum hearth_status bpe_encode(const struct tokenizer *t, const char *text, size_t len,
                              struct id_buf *out, char *err, size_t err_len)
{
    const struct bpe *b   = t->bpe;
    enum hearth_status st = HEARTH_OK;
    struct prepared p     = {0};
    struct cuts cur = {0}, next = {0};
    struct matcher m = {0};
    struct work w    = {0};
    int rc           = 0;

    if (len == 0)
        return HEARTH_OK;
    if (len > (UINT32_MAX - 1) / 3)
        return fail(HEARTH_ERANGE, err, err_len,
                    "tokenizer: a text of %zu bytes is too long to tokenize at once", len);
    if (!prepare(text, len, &p) || !cut(&cur, p.subj_len))
        goto nomem;

    if ((rc = pretokenize(b, &p, &m, &cur, &next)) < 0)
        goto match_failed;

    size_t from = 0;
    for (size_t i = 0; i < cur.n; i++) {
        size_t a = p.canon_at[from], z = p.canon_at[cur.v[i]];
        from = cur.v[i];
        if (z > a && !encode_word(t, &w, p.canon + a, z - a, out))
            goto nomem;
    }
    goto done;

match_failed:
    if (rc == PCRE2_ERROR_NOMEMORY)
        goto nomem;
    PCRE2_UCHAR msg[160];
    pcre2_get_error_message(rc, msg, sizeof msg);
    st = fail(HEARTH_ERANGE, err, err_len,
              "tokenizer: the pre-tokenizer regex gave up on a text of %zu bytes: %s", len,
              (const char *)msg);
    goto done;
nomem:
    st = fail(HEARTH_ENOMEM, err, err_len, "tokenizer: out of memory tokenizing %zu bytes", len);
done:
    free(w.enc);
    free(w.syms);
    free(w.heap.v);
    pcre2_match_data_free(m.md);
    pcre2_match_context_free(m.mctx);
    pcre2_jit_stack_free(m.stack);
    free(cur.v);
    free(next.v);
    free(p.canon);
    free(p.subj);
    free(p.canon_at);
    return st;
}

/* -------------------------------------------------------------- decode --- */

static size_t put(char *buf, size_t cap, size_t at, const char *s, size_t n)
{
    if (at < cap)
        memcpy(buf + at, s, at + n <= cap ? n : cap - at);
    return at + n;
}

size_t bpe_decode_text(const char *text, size_t len, char *buf, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t k = utf8_decode(text + i, len - i, &cp);
        if (k == 0) {
            cp = 0xFFFD;
            k  = 1;
        }
        i += k;
        int byte = bpe_cpt_to_byte(cp);
        if (byte >= 0) {
            char c = (char)byte;
            n      = put(buf, cap, n, &c, 1);
            continue;
        }
        char u[4], hex[16];
        size_t nu = utf8_encode(cp, u);
        n         = put(buf, cap, n, "[UNK_BYTE_0x", 12);
        for (size_t j = 0; j < nu; j++) {
            snprintf(hex, sizeof hex, "%02x", (unsigned char)u[j]);
            n = put(buf, cap, n, hex, 2);
        }
        n = put(buf, cap, n, text, len);
        n = put(buf, cap, n, "]", 1);
    }
    return n;
}
