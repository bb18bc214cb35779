/*
 * test_tokenizer.c: src/text/tokenizer.c, spm.c and bpe.c against llama.cpp's
 * own tokenizer test vectors (the .inp and .out files in ../shared/vocab,
 * produced by llama.cpp with add_special and parse_special off), plus
 * decoding round trips, special-token handling, GPT-2's byte table and load
 * errors on small in-memory GGUF files.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <time.h>

#include "gguf/gguf.h"
#include "text/tokenizer.h"
#include "text/vocab.h" /* bpe_byte_to_cpt, bpe_cpt_to_byte */
#include "util/testutil.h"

/* ------------------------------------------------------------- helpers --- */

static struct tokenizer *load_path(const char *path)
{
    struct gguf_file *f      = NULL;
    struct tokenizer *t      = NULL;
    char err[HEARTH_ERR_MAX] = "";
    if (gguf_open(path, &f, err, sizeof err) != HEARTH_OK)
        fail_msg("gguf_open %s: %s", path, err);
    enum hearth_status st = tokenizer_load(f, &t, err, sizeof err);
    gguf_close(f); /* the tokenizer copies what it needs */
    if (st != HEARTH_OK)
        fail_msg("tokenizer_load %s: %s", path, err);
    return t;
}

static void encode(const struct tokenizer *t, const char *text, size_t len, bool add_special,
                   bool parse_special, int32_t **ids, size_t *n)
{
    char err[HEARTH_ERR_MAX] = "";
    enum hearth_status st =
        tokenizer_encode(t, text, len, add_special, parse_special, ids, n, err, sizeof err);
    if (st != HEARTH_OK)
        fail_msg("tokenizer_encode: %s", err);
}

/* Decodes ids into a malloc'd string (length in *len). */
static char *decode(const struct tokenizer *t, const int32_t *ids, size_t n, size_t *len)
{
    size_t cap = 64, at = 0;
    char *s = malloc(cap);
    for (size_t i = 0; i < n; i++) {
        char piece[8];
        size_t k = tokenizer_decode_token(t, ids[i], piece, sizeof piece);
        if (at + k + 1 > cap) {
            cap = (at + k + 1) * 2;
            s   = realloc(s, cap);
        }
        if (k <= sizeof piece) {
            memcpy(s + at, piece, k);
        } else {
            size_t k2 = tokenizer_decode_token(t, ids[i], s + at, k);
            assert_int_equal(k2, k);
        }
        at += k;
    }
    s[at] = 0;
    *len  = at;
    return s;
}

static void print_ids(const char *label, const int32_t *ids, size_t n)
{
    char line[4096];
    size_t at = 0;
    line[0]   = 0;
    for (size_t i = 0; i < n && at < sizeof line - 16; i++)
        at += (size_t)snprintf(line + at, sizeof line - at, " %d", ids[i]);
    print_message("#   %s:%s\n", label, line);
}

static void check_ids(const struct tokenizer *t, const char *text, bool add_special,
                      bool parse_special, const int32_t *want, size_t n_want)
{
    int32_t *ids;
    size_t n;
    encode(t, text, strlen(text), add_special, parse_special, &ids, &n);
    bool same = n == n_want && (n == 0 || memcmp(ids, want, n * sizeof *ids) == 0);
    if (!same) {
        print_message("# '%s' (add_special %d, parse_special %d)\n", text, add_special,
                      parse_special);
        print_ids("want", want, n_want);
        print_ids("got ", ids, n);
    }
    free(ids);
    assert_true(same);
}

/* ------------------------------------------------- llama.cpp's vectors --- */

/*
 * The .inp file holds cases separated by "\n__ggml_vocab_test__\n" (the
 * newline before a separator line belongs to the separator); the .out file
 * one line of space-separated ids per case. Each case must tokenize to
 * exactly its ids and decode back to its text (less the one space SPM's "▁"
 * prefix adds, when spm).
 */
static void run_vectors(const char *name, bool spm)
{
    char rel[256];
    snprintf(rel, sizeof rel, "vocab/ggml-vocab-%s.gguf", name);
    TU_SHARED_OR_SKIP(gguf_path, rel);
    char inp_path[1024], out_path[1024];
    snprintf(inp_path, sizeof inp_path, "%s.inp", gguf_path);
    snprintf(out_path, sizeof out_path, "%s.out", gguf_path);
    size_t inp_len, out_len;
    char *inp  = tu_read_file(inp_path, &inp_len);
    char *outs = tu_read_file(out_path, &out_len);
    assert_non_null(inp);
    assert_non_null(outs);

    struct tokenizer *t     = load_path(gguf_path);
    static const char SEP[] = "\n__ggml_vocab_test__\n";
    const size_t sep_len    = sizeof SEP - 1;
    size_t pos              = 0;
    char *out_line          = outs;
    int n_cases = 0, n_pass = 0, n_trip = 0;
    while (pos < inp_len) {
        const char *next = memmem(inp + pos, inp_len - pos, SEP, sep_len);
        size_t case_len  = next ? (size_t)(next - (inp + pos)) : inp_len - pos;
        const char *text = inp + pos;
        pos += case_len + (next ? sep_len : 0);

        assert_true(*out_line != 0); /* as many .out lines as cases */
        char *eol = strchr(out_line, '\n');
        if (eol)
            *eol = 0;
        int32_t want[1024];
        size_t n_want = 0;
        for (char *p = out_line, *q; n_want < 1024; p = q) {
            long v = strtol(p, &q, 10);
            if (q == p)
                break;
            want[n_want++] = (int32_t)v;
        }
        out_line = eol ? eol + 1 : out_line + strlen(out_line);

        int32_t *ids;
        size_t n;
        encode(t, text, case_len, false, false, &ids, &n);
        n_cases++;
        bool same = n == n_want && (n == 0 || memcmp(ids, want, n * sizeof *ids) == 0);
        if (same) {
            n_pass++;
        } else {
            print_message("# %s case %d: '%.*s'\n", name, n_cases, (int)case_len, text);
            print_ids("want", want, n_want);
            print_ids("got ", ids, n);
        }

        /* decoding gives the text back, less the one space the "▁" prefix added */
        size_t dec_len;
        char *dec     = decode(t, ids, n, &dec_len);
        const char *d = dec;
        if (spm && dec_len > 0 && dec[0] == ' ') {
            d++;
            dec_len--;
        }
        if (dec_len == case_len && memcmp(d, text, case_len) == 0)
            n_trip++;
        else
            print_message("# %s case %d: decodes to '%.*s', not '%.*s'\n", name, n_cases,
                          (int)dec_len, d, (int)case_len, text);
        free(dec);
        free(ids);
    }
    print_message("# %s: %d/%d cases match llama.cpp, %d/%d round-trip\n", name, n_pass, n_cases,
                  n_trip, n_cases);
    assert_string_equal(out_line, ""); /* no .out lines left over */
    assert_true(n_cases > 0);
    assert_int_equal(n_pass, n_cases);
    assert_int_equal(n_trip, n_cases);
    tokenizer_free(t);
    free(inp);
    free(outs);
}

static void test_vectors_llama_spm(void **state)
{
    run_vectors("llama-spm", true);
}
static void test_vectors_phi3(void **state)
{
    run_vectors("phi-3", true);
}
static void test_vectors_gpt2(void **state)
{
    run_vectors("gpt-2", false);
}
static void test_vectors_deepseek_coder(void **state)
{
    run_vectors("deepseek-coder", false);
}
static void test_vectors_deepseek_llm(void **state)
{
    run_vectors("deepseek-llm", false);
}
static void test_vectors_starcoder(void **state)
{
    run_vectors("starcoder", false);
}
static void test_vectors_falcon(void **state)
{
    run_vectors("falcon", false);
}
static void test_vectors_mpt(void **state)
{
    run_vectors("mpt", false);
}
static void test_vectors_refact(void **state)
{
    run_vectors("refact", false);
}

/* ------------------------------------------------------ stories260K --- */

static void test_stories_facts(void **state)
{
    TU_MODEL_OR_SKIP(path, "stories260K.gguf");
    struct tokenizer *t = load_path(path);
    assert_int_equal(tokenizer_n_vocab(t), 512);
    assert_int_equal(tokenizer_bos(t), 1);
    assert_int_equal(tokenizer_eos(t), 2);
    assert_true(tokenizer_add_bos(t));
    assert_false(tokenizer_add_eos(t));
    assert_true(tokenizer_is_eog(t, 2));
    assert_false(tokenizer_is_eog(t, 1));
    assert_false(tokenizer_is_eog(t, -1));
    assert_false(tokenizer_is_eog(t, 512));
    assert_string_equal(tokenizer_token_text(t, 0), "<unk>");
    assert_int_equal(tokenizer_token_type(t, 0), TOKEN_UNKNOWN);
    assert_int_equal(tokenizer_token_type(t, 1), TOKEN_CONTROL);
    assert_int_equal(tokenizer_token_type(t, 3), TOKEN_BYTE);
    assert_string_equal(tokenizer_token_text(t, 3), "<0x00>");

    /* BOS only with add_special; the empty text is nothing else */
    int32_t *ids;
    size_t n;
    encode(t, "", 0, true, false, &ids, &n);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], 1);
    free(ids);
    encode(t, "", 0, false, false, &ids, &n);
    assert_int_equal(n, 0);
    free(ids);

    /* control tokens decode to nothing, byte tokens to their byte */
    char buf[16];
    assert_int_equal(tokenizer_decode_token(t, 1, buf, sizeof buf), 0);
    assert_int_equal(tokenizer_decode_token(t, 2, buf, sizeof buf), 0);
    assert_int_equal(tokenizer_decode_token(t, 3 + 'A', buf, sizeof buf), 1);
    assert_int_equal(buf[0], 'A');
    assert_int_equal(tokenizer_decode_token(t, 9999, buf, sizeof buf), 0);
    tokenizer_free(t);
}

/* Characters the 512-token vocab lacks become one <0xNN> token per UTF-8 byte. */
static void test_byte_fallback(void **state)
{
    TU_MODEL_OR_SKIP(path, "stories260K.gguf");
    struct tokenizer *t = load_path(path);
    const char *text    = "\xe6\x97\xa5"; /* U+65E5 */
    int32_t *ids;
    size_t n;
    encode(t, text, strlen(text), false, false, &ids, &n);
    assert_true(n >= 3);
    assert_string_equal(tokenizer_token_text(t, ids[n - 3]), "<0xE6>");
    assert_string_equal(tokenizer_token_text(t, ids[n - 2]), "<0x97>");
    assert_string_equal(tokenizer_token_text(t, ids[n - 1]), "<0xA5>");
    size_t dec_len;
    char *dec = decode(t, ids, n, &dec_len);
    assert_string_equal(dec, " \xe6\x97\xa5");
    free(dec);
    free(ids);

    /* invalid UTF-8 still tokenizes, byte for byte */
    const char bad[] = "a\xff\x80z";
    encode(t, bad, 4, false, false, &ids, &n);
    dec = decode(t, ids, n, &dec_len);
    assert_int_equal(dec_len, 5);
    assert_memory_equal(dec, " a\xff\x80z", 5);
    free(dec);
    free(ids);
    tokenizer_free(t);
}

/* ------------------------------------------------------ special tokens --- */

static void test_parse_special_llama(void **state)
{
    TU_SHARED_OR_SKIP(path, "vocab/ggml-vocab-llama-spm.gguf");
    struct tokenizer *t = load_path(path);
    /* "Hello" after a special token gets the "▁" prefix again: ▁Hello = 15043 */
    check_ids(t, "<s>Hello</s>", false, true, (int32_t[]){1, 15043, 2}, 3);
    check_ids(t, "<s>Hello</s>", true, true, (int32_t[]){1, 1, 15043, 2}, 4);
    check_ids(t, "Hello world", true, false, (int32_t[]){1, 15043, 3186}, 3);
    check_ids(t, "<unk>", false, true, (int32_t[]){0}, 1);

    /* without parse_special the same text is plain text */
    int32_t *ids;
    size_t n;
    encode(t, "<s>Hello</s>", 12, false, false, &ids, &n);
    assert_true(n > 3);
    for (size_t i = 0; i < n; i++)
        assert_true(ids[i] > 2);
    free(ids);
    assert_true(tokenizer_is_eog(t, 2));
    assert_false(tokenizer_is_eog(t, 0));
    tokenizer_free(t);
}

/*
 * phi-3: "</s>" is stored as user-defined but llama.cpp's by-text rules make
 * it control and end of generation; its special tokens eat the whitespace on
 * their right (the RSTRIP llama.cpp sets by model name), except <s>, <unk>
 * and <|endoftext|>.
 */
static void test_phi3_specials(void **state)
{
    TU_SHARED_OR_SKIP(path, "vocab/ggml-vocab-phi-3.gguf");
    struct tokenizer *t = load_path(path);
    assert_int_equal(tokenizer_n_vocab(t), 32064);
    assert_true(tokenizer_is_eog(t, 32000));  /* <|endoftext|> */
    assert_true(tokenizer_is_eog(t, 32007));  /* <|end|> */
    assert_true(tokenizer_is_eog(t, 2));      /* </s> */
    assert_false(tokenizer_is_eog(t, 32001)); /* <|assistant|> */
    assert_int_equal(tokenizer_token_type(t, 2), TOKEN_CONTROL);

    check_ids(t, "<|user|>\nHello<|end|>\n", false, true, (int32_t[]){32010, 15043, 32007}, 3);
    /* no RSTRIP on <s>: " \nHi" after it is text, prefixed as at the start ("▁▁" "\n" "Hi") */
    check_ids(t, "<s> \nHi", false, true, (int32_t[]){1, 259, 13, 18567}, 4);
    /* RSTRIP on <|user|>: the whitespace after it goes, "Hi" gets the prefix ("▁Hi") */
    check_ids(t, "<|user|> \nHi", false, true, (int32_t[]){32010, 6324}, 2);

    /* a chat format's control markers kept as output text; end-of-generation ones not */
    char buf[32];
    assert_int_equal(tokenizer_token_type(t, 32001), TOKEN_CONTROL);
    assert_int_equal(tokenizer_decode_token(t, 32001, buf, sizeof buf), 0);
    assert_int_equal(tokenizer_keep_text(t, "<|assistant|>x<|end|>"), 1);
    assert_int_equal(tokenizer_keep_text(t, "<|assistant|>"), 0); /* already */
    assert_int_equal(tokenizer_decode_token(t, 32001, buf, sizeof buf), 13);
    assert_memory_equal(buf, "<|assistant|>", 13);
    assert_int_equal(tokenizer_decode_token(t, 32007, buf, sizeof buf), 0);
    assert_int_equal(tokenizer_decode_token(t, 32010, buf, sizeof buf), 0); /* not asked */
    tokenizer_free(t);
}

/* ----------------------------------------------- in-memory GGUF files --- */

struct wbuf {
    unsigned char *p;
    size_t n, cap;
};

static void w_bytes(struct wbuf *b, const void *d, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 256;
        b->p   = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void w_u32(struct wbuf *b, uint32_t v)
{
    w_bytes(b, &v, 4);
}
static void w_u64(struct wbuf *b, uint64_t v)
{
    w_bytes(b, &v, 8);
}
static void w_str(struct wbuf *b, const char *s)
{
    w_u64(b, strlen(s));
    w_bytes(b, s, strlen(s));
}
static void w_key(struct wbuf *b, const char *key, enum gguf_vtype type)
{
    w_str(b, key);
    w_u32(b, (uint32_t)type);
}

/* A tiny SPM vocab: <unk> <s> </s> then tokens "▁a" "b" "a"; n_scores scores; bos id bos. */
static struct wbuf tiny_gguf(const char *model, uint64_t n_scores, uint32_t bos)
{
    static const char *const texts[] = {"<unk>", "<s>", "</s>", "\342\226\201a", "b", "a"};
    const uint64_t n_tok             = 6;
    struct wbuf b                    = {0};
    w_bytes(&b, "GGUF", 4);
    w_u32(&b, 3);
    w_u64(&b, 0); /* tensors */
    w_u64(&b, 5); /* kvs */
    w_key(&b, "tokenizer.ggml.model", GGUF_STR);
    w_str(&b, model);
    w_key(&b, "tokenizer.ggml.tokens", GGUF_ARR);
    w_u32(&b, GGUF_STR);
    w_u64(&b, n_tok);
    for (uint64_t i = 0; i < n_tok; i++)
        w_str(&b, texts[i]);
    w_key(&b, "tokenizer.ggml.scores", GGUF_ARR);
    w_u32(&b, GGUF_F32);
    w_u64(&b, n_scores);
    for (uint64_t i = 0; i < n_scores; i++) {
        float s = -(float)i;
        w_bytes(&b, &s, 4);
    }
    w_key(&b, "tokenizer.ggml.token_type", GGUF_ARR);
    w_u32(&b, GGUF_I32);
    w_u64(&b, n_tok);
    static const int32_t types[] = {2, 3, 3, 1, 1, 1};
    w_bytes(&b, types, sizeof types);
    w_key(&b, "tokenizer.ggml.bos_token_id", GGUF_U32);
    w_u32(&b, bos);
    while (b.n % 32)
        w_bytes(&b, "", 1);
    return b;
}

static enum hearth_status load_buf(struct wbuf *b, struct tokenizer **t, char *err, size_t len)
{
    struct gguf_file *f       = NULL;
    char gerr[HEARTH_ERR_MAX] = "";
    if (gguf_open_buffer(b->p, b->n, &f, gerr, sizeof gerr) != HEARTH_OK)
        fail_msg("gguf_open_buffer: %s", gerr);
    enum hearth_status st = tokenizer_load(f, t, err, len);
    gguf_close(f);
    return st;
}

static void test_tiny_vocab(void **state)
{
    struct wbuf b            = tiny_gguf("llama", 6, 1);
    struct tokenizer *t      = NULL;
    char err[HEARTH_ERR_MAX] = "";
    assert_int_equal(load_buf(&b, &t, err, sizeof err), HEARTH_OK);
    /* "▁" is not a token and there are no byte tokens: its bytes fall back to <unk> */
    check_ids(t, "ab", false, false, (int32_t[]){3, 4}, 2);
    check_ids(t, "b a", false, false, (int32_t[]){0, 0, 0, 4, 3}, 5);
    tokenizer_free(t);
    free(b.p);
}

static void test_unsupported_model(void **state)
{
    struct wbuf b            = tiny_gguf("bert", 6, 1);
    struct tokenizer *t      = NULL;
    char err[HEARTH_ERR_MAX] = "";
    assert_int_equal(load_buf(&b, &t, err, sizeof err), HEARTH_EUNSUPPORTED);
    assert_null(t);
    print_message("# %s\n", err);
    assert_non_null(strstr(err, "'bert'"));
    free(b.p);
}

static void test_format_errors(void **state)
{
    struct tokenizer *t      = NULL;
    char err[HEARTH_ERR_MAX] = "";

    struct wbuf b = tiny_gguf("llama", 5, 1); /* one score short */
    assert_int_equal(load_buf(&b, &t, err, sizeof err), HEARTH_EFORMAT);
    print_message("# %s\n", err);
    assert_non_null(strstr(err, "tokenizer.ggml.scores"));
    free(b.p);

    b = tiny_gguf("llama", 6, 6); /* BOS past the end */
    assert_int_equal(load_buf(&b, &t, err, sizeof err), HEARTH_EFORMAT);
    print_message("# %s\n", err);
    assert_non_null(strstr(err, "bos_token_id"));
    assert_null(t);
    free(b.p);
}

/* ---------------------------------------------------------------- BPE --- */

/* GPT-2's bytes_to_unicode: printable bytes stand for themselves, the other 68 for U+0100.. */
static void test_byte_map(void **state)
{
    assert_int_equal(bpe_byte_to_cpt('A'), 'A');
    assert_int_equal(bpe_byte_to_cpt('!'), '!');
    assert_int_equal(bpe_byte_to_cpt('~'), '~');
    assert_int_equal(bpe_byte_to_cpt(0x00), 0x100);
    assert_int_equal(bpe_byte_to_cpt(' '), 0x120);  /* "Ġ" */
    assert_int_equal(bpe_byte_to_cpt('\n'), 0x10A); /* "Ċ" */
    assert_int_equal(bpe_byte_to_cpt(0x7F), 0x121);
    assert_int_equal(bpe_byte_to_cpt(0xA0), 0x142);
    assert_int_equal(bpe_byte_to_cpt(0xA1), 0xA1);
    assert_int_equal(bpe_byte_to_cpt(0xAD), 0x143);
    assert_int_equal(bpe_byte_to_cpt(0xFF), 0xFF);

    /* a bijection between the 256 bytes and its 256 code points */
    uint8_t seen[0x144] = {0};
    for (int b = 0; b < 256; b++) {
        uint32_t c = bpe_byte_to_cpt((uint8_t)b);
        assert_true(c < 0x144);
        assert_int_equal(seen[c], 0);
        seen[c] = 1;
        assert_int_equal(bpe_cpt_to_byte(c), b);
    }
    /* code points no byte is written as */
    assert_int_equal(bpe_cpt_to_byte(' '), -1);
    assert_int_equal(bpe_cpt_to_byte(0x7F), -1);
    assert_int_equal(bpe_cpt_to_byte(0xAD), -1);
    assert_int_equal(bpe_cpt_to_byte(0x144), -1);
    assert_int_equal(bpe_cpt_to_byte(0x2581), -1);
}

/* GPT-2's first 256 tokens are the byte stand-ins in bytes_to_unicode's order; each decodes to its
 * byte. */
static void test_byte_tokens_gpt2(void **state)
{
    TU_SHARED_OR_SKIP(path, "vocab/ggml-vocab-gpt-2.gguf");
    struct tokenizer *t = load_path(path);
    int32_t printable = 0, other = 188;
    for (int b = 0; b < 256; b++) {
        uint32_t c   = bpe_byte_to_cpt((uint8_t)b);
        int32_t id   = c < 0x100 ? printable++ : other++;
        char want[3] = {0};
        if (c < 0x80) {
            want[0] = (char)c;
        } else {
            want[0] = (char)(0xC0 | c >> 6);
            want[1] = (char)(0x80 | (c & 0x3F));
        }
        assert_string_equal(tokenizer_token_text(t, id), want);
        char out[4];
        assert_int_equal(tokenizer_decode_token(t, id, out, sizeof out), 1);
        assert_int_equal((unsigned char)out[0], b);
    }
    assert_int_equal(printable, 188);
    assert_int_equal(other, 256);
    tokenizer_free(t);
}

static void test_gpt2_specials(void **state)
{
    TU_SHARED_OR_SKIP(path, "vocab/ggml-vocab-gpt-2.gguf");
    struct tokenizer *t = load_path(path);
    assert_int_equal(tokenizer_n_vocab(t), 50257);
    assert_int_equal(tokenizer_bos(t), 50256);
    assert_false(tokenizer_add_bos(t)); /* BPE: only when the file or the pre type says */
    assert_true(tokenizer_is_eog(t, 50256));
    assert_int_equal(tokenizer_token_type(t, 50256), TOKEN_CONTROL);

    /* "Hello" " world"; the special token only with parse_special */
    check_ids(t, "Hello world", true, false, (int32_t[]){15496, 995}, 2);
    check_ids(t, "Hello<|endoftext|>", false, true, (int32_t[]){15496, 50256}, 2);
    int32_t *ids;
    size_t n;
    encode(t, "Hello<|endoftext|>", 18, false, false, &ids, &n);
    assert_true(n > 2);
    for (size_t i = 0; i < n; i++)
        assert_true(ids[i] != 50256);
    free(ids);

    /* llama.cpp reads an invalid byte as U+FFFD before byte encoding: "a", "\xef\xbf\xbd", "b" */
    const char bad[] = "a\xff\x62";
    encode(t, bad, 3, false, false, &ids, &n);
    size_t dec_len;
    char *dec = decode(t, ids, n, &dec_len);
    assert_int_equal(dec_len, 5);
    assert_memory_equal(dec, "a\xef\xbf\xbd\x62", 5);
    free(dec);
    free(ids);

    /* wide white space counts as \s: "a" then U+3000 and " b" as GPT-2's \s+(?!\S) splits them */
    const char wide[] = "a\xe3\x80\x80 b";
    encode(t, wide, strlen(wide), false, false, &ids, &n);
    dec = decode(t, ids, n, &dec_len);
    assert_int_equal(dec_len, strlen(wide));
    assert_memory_equal(dec, wide, dec_len);
    free(dec);
    free(ids);
    tokenizer_free(t);
}

/* gpt-neox has no tokenizer.ggml.pre: llama.cpp's "default" pre-tokenizer. No vectors, so facts. */
static void test_gpt_neox(void **state)
{
    TU_SHARED_OR_SKIP(path, "vocab/ggml-vocab-gpt-neox.gguf");
    struct tokenizer *t = load_path(path);
    check_ids(t, "Hello world", false, false, (int32_t[]){12092, 1533}, 2);
    /* the default splits punctuation runs and digit runs before GPT-2's regex */
    const char *text = "It's 12345 apples, (really)!\n\n  done.";
    int32_t *ids;
    size_t n;
    encode(t, text, strlen(text), false, false, &ids, &n);
    print_ids("gpt-neox", ids, n);
    size_t dec_len;
    char *dec = decode(t, ids, n, &dec_len);
    assert_int_equal(dec_len, strlen(text));
    assert_memory_equal(dec, text, dec_len);
    free(dec);
    free(ids);
    tokenizer_free(t);
}

/* The tiny qwen2 test model carries the deepseek-coder vocabulary, with BOS added. */
static void test_tiny_qwen2_bpe(void **state)
{
    TU_SHARED_OR_SKIP(path, "models/tiny-qwen2-bpe-f16.gguf");
    struct tokenizer *t = load_path(path);
    assert_true(tokenizer_add_bos(t));
    assert_int_equal(tokenizer_bos(t), 32013);
    int32_t *ids;
    size_t n;
    encode(t, "Hello world", 11, true, false, &ids, &n);
    assert_true(n >= 2);
    assert_int_equal(ids[0], 32013);
    size_t dec_len;
    char *dec = decode(t, ids + 1, n - 1, &dec_len);
    assert_string_equal(dec, "Hello world");
    free(dec);
    free(ids);
    tokenizer_free(t);
}

/* A 32k-token prompt: well under a second (checked loosely here, for sanitizer builds). */
static void test_bpe_speed(void **state)
{
    TU_SHARED_OR_SKIP(path, "vocab/ggml-vocab-deepseek-llm.gguf");
    char inp_path[1024];
    snprintf(inp_path, sizeof inp_path, "%s.inp", path);
    size_t inp_len;
    char *inp = tu_read_file(inp_path, &inp_len);
    assert_non_null(inp);
    size_t reps = 120000 / inp_len + 1, len = reps * inp_len;
    char *text = malloc(len);
    for (size_t i = 0; i < reps; i++)
        memcpy(text + i * inp_len, inp, inp_len);
    struct tokenizer *t = load_path(path);
    struct timespec t0, t1;
    int32_t *ids;
    size_t n;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    encode(t, text, len, false, false, &ids, &n);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    print_message("# %zu bytes -> %zu tokens in %.3f s (%.0f tokens/s)\n", len, n, s,
                  (double)n / s);
    assert_true(n > 30000);
    assert_true(s < 10.0); /* catches anything quadratic */
    free(ids);
    tokenizer_free(t);
    free(text);
    free(inp);
}

/*
 * A tiny byte-level vocab: the letters, "Ġ" (space), and some merged texts;
 * merges as given (NULL: no merges key); pre NULL: no tokenizer.ggml.pre key.
 */
static struct wbuf tiny_bpe_gguf(const char *pre, const char *const *merges, uint64_t n_merges)
{
    static const char *const texts[] = {"a",  "b",   "c",  "\xc4\xa0",     "ab",
                                        "bc", "abc", "aa", "\xc4\xa0\x61", "<|end|>"};
    const uint64_t n_tok             = sizeof texts / sizeof texts[0];
    struct wbuf b                    = {0};
    w_bytes(&b, "GGUF", 4);
    w_u32(&b, 3);
    w_u64(&b, 0);
    w_u64(&b, 3 + (pre != NULL) + (merges != NULL));
    w_key(&b, "tokenizer.ggml.model", GGUF_STR);
    w_str(&b, "gpt2");
    if (pre) {
        w_key(&b, "tokenizer.ggml.pre", GGUF_STR);
        w_str(&b, pre);
    }
    w_key(&b, "tokenizer.ggml.tokens", GGUF_ARR);
    w_u32(&b, GGUF_STR);
    w_u64(&b, n_tok);
    for (uint64_t i = 0; i < n_tok; i++)
        w_str(&b, texts[i]);
    w_key(&b, "tokenizer.ggml.token_type", GGUF_ARR);
    w_u32(&b, GGUF_I32);
    w_u64(&b, n_tok);
    for (uint64_t i = 0; i < n_tok; i++) {
        int32_t type = i + 1 == n_tok ? 3 : 1;
        w_bytes(&b, &type, 4);
    }
    if (merges) {
        w_key(&b, "tokenizer.ggml.merges", GGUF_ARR);
        w_u32(&b, GGUF_STR);
        w_u64(&b, n_merges);
        for (uint64_t i = 0; i < n_merges; i++)
            w_str(&b, merges[i]);
    }
    while (b.n % 32)
        w_bytes(&b, "", 1);
    return b;
}

static struct tokenizer *load_tiny_bpe(const char *pre, const char *const *merges, uint64_t n)
{
    struct wbuf b            = tiny_bpe_gguf(pre, merges, n);
    struct tokenizer *t      = NULL;
    char err[HEARTH_ERR_MAX] = "";
    if (load_buf(&b, &t, err, sizeof err) != HEARTH_OK)
        fail_msg("tiny BPE vocab: %s", err);
    free(b.p);
    return t;
}

/* ids: a=0 b=1 c=2 Ġ=3 ab=4 bc=5 abc=6 aa=7 Ġa=8 <|end|>=9 */
static void test_bpe_merge_order(void **state)
{
    /* the lower rank merges first, wherever it is in the word */
    const char *const bc_first[] = {"b c", "a b", "ab c"};
    struct tokenizer *t          = load_tiny_bpe("gpt-2", bc_first, 3);
    check_ids(t, "abc", false, false, (int32_t[]){0, 5}, 2);
    tokenizer_free(t);

    const char *const ab_first[] = {"a b", "b c", "ab c"};
    t                            = load_tiny_bpe("gpt-2", ab_first, 3);
    check_ids(t, "abc", false, false, (int32_t[]){6}, 1);
    /* words are merged apart: " a" is one word, "Ġ" + "a" -> no merge listed, so two tokens */
    check_ids(t, "ab a", false, false, (int32_t[]){4, 3, 0}, 3);
    tokenizer_free(t);

    /* equal ranks: the leftmost pair first; a pair listed twice keeps its first rank */
    const char *const aa[] = {"a a", "Ġ a", "a a", "nospace"};
    t                      = load_tiny_bpe(NULL, aa, 4); /* no pre key: llama.cpp's "default" */
    check_ids(t, "aaa", false, false, (int32_t[]){7, 0}, 2);
    check_ids(t, " a", false, false, (int32_t[]){8}, 1);
    /* bytes with no token are dropped, as llama.cpp drops them */
    check_ids(t, "axb", false, false, (int32_t[]){0, 1}, 2);
    /* special tokens are matched first with parse_special */
    check_ids(t, "a<|end|>b", false, true, (int32_t[]){0, 9, 1}, 3);
    tokenizer_free(t);
}

/* llama-bpe: a word that is a token is taken whole (ignore_merges), and BOS is added by default. */
static void test_bpe_ignore_merges(void **state)
{
    const char *const none[] = {"x y"};
    struct tokenizer *t      = load_tiny_bpe("gpt-2", none, 1);
    check_ids(t, "abc", false, false, (int32_t[]){0, 1, 2}, 3);
    assert_false(tokenizer_add_bos(t));
    tokenizer_free(t);
    t = load_tiny_bpe("llama-bpe", none, 1);
    check_ids(t, "abc", false, false, (int32_t[]){6}, 1);
    assert_true(tokenizer_add_bos(t));
    tokenizer_free(t);
}

static void test_bpe_load_errors(void **state)
{
    struct tokenizer *t      = NULL;
    char err[HEARTH_ERR_MAX] = "";
    const char *const m[]    = {"a b"};

    struct wbuf b = tiny_bpe_gguf("gpt-2", NULL, 0);
    assert_int_equal(load_buf(&b, &t, err, sizeof err), HEARTH_EFORMAT);
    print_message("# %s\n", err);
    assert_non_null(strstr(err, "tokenizer.ggml.merges"));
    assert_null(t);
    free(b.p);

    b = tiny_bpe_gguf("no-such-pre", m, 1);
    assert_int_equal(load_buf(&b, &t, err, sizeof err), HEARTH_EUNSUPPORTED);
    print_message("# %s\n", err);
    assert_non_null(strstr(err, "'no-such-pre'"));
    assert_null(t);
    free(b.p);

    b = tiny_bpe_gguf("kimi-k2", m, 1);
    assert_int_equal(load_buf(&b, &t, err, sizeof err), HEARTH_EUNSUPPORTED);
    print_message("# %s\n", err);
    assert_non_null(strstr(err, "'kimi-k2'"));
    assert_null(t);
    free(b.p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vectors_llama_spm),
        cmocka_unit_test(test_vectors_phi3),
        cmocka_unit_test(test_vectors_gpt2),
        cmocka_unit_test(test_vectors_deepseek_coder),
        cmocka_unit_test(test_vectors_deepseek_llm),
        cmocka_unit_test(test_vectors_starcoder),
        cmocka_unit_test(test_vectors_falcon),
        cmocka_unit_test(test_vectors_mpt),
        cmocka_unit_test(test_vectors_refact),
        cmocka_unit_test(test_stories_facts),
        cmocka_unit_test(test_byte_fallback),
        cmocka_unit_test(test_parse_special_llama),
        cmocka_unit_test(test_phi3_specials),
        cmocka_unit_test(test_tiny_vocab),
        cmocka_unit_test(test_unsupported_model),
        cmocka_unit_test(test_format_errors),
        cmocka_unit_test(test_byte_map),
        cmocka_unit_test(test_byte_tokens_gpt2),
        cmocka_unit_test(test_gpt2_specials),
        cmocka_unit_test(test_gpt_neox),
        cmocka_unit_test(test_tiny_qwen2_bpe),
        cmocka_unit_test(test_bpe_speed),
        cmocka_unit_test(test_bpe_merge_order),
        cmocka_unit_test(test_bpe_ignore_merges),
        cmocka_unit_test(test_bpe_load_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
