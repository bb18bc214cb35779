/*
 * test_tokenizer.c: src/text/tokenizer.c and spm.c against llama.cpp's own
 * tokenizer test vectors (the .inp and .out files in ../shared/vocab, produced by
 * llama.cpp with add_special and parse_special off), plus decoding round
 * trips, special-token handling and load errors on small in-memory GGUF files.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "text/tokenizer.h"
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
 * exactly its ids and decode back to its text.
 */
static void run_vectors(const char *name)
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
        if (dec_len > 0 && dec[0] == ' ') {
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
    run_vectors("llama-spm");
}
static void test_vectors_phi3(void **state)
{
    run_vectors("phi-3");
}

/* ------------------------------------------------------ stories260K --- */

static void test_stories_facts(void **state)
{
    TU_SHARED_OR_SKIP(path, "models/stories260K.gguf");
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
    TU_SHARED_OR_SKIP(path, "models/stories260K.gguf");
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
    struct wbuf b            = tiny_gguf("gpt2", 6, 1);
    struct tokenizer *t      = NULL;
    char err[HEARTH_ERR_MAX] = "";
    assert_int_equal(load_buf(&b, &t, err, sizeof err), HEARTH_EUNSUPPORTED);
    assert_null(t);
    print_message("# %s\n", err);
    assert_non_null(strstr(err, "'gpt2'"));
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vectors_llama_spm),   cmocka_unit_test(test_vectors_phi3),
        cmocka_unit_test(test_stories_facts),       cmocka_unit_test(test_byte_fallback),
        cmocka_unit_test(test_parse_special_llama), cmocka_unit_test(test_phi3_specials),
        cmocka_unit_test(test_tiny_vocab),          cmocka_unit_test(test_unsupported_model),
        cmocka_unit_test(test_format_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
