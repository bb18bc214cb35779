/*
 * test_turns.c: src/sched/turns.c, a reply resent as text goes on in the
 * tokens the model generated, on stories260K.gguf (SentencePiece) and,
 * where ../shared has it, tiny-qwen3 (byte-level BPE).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/turns.h"
#include "util/engineutil.h"
#include "util/testutil.h"

#define CAP 512

/* Appends text's tokens (BOS first when bos; control-token text parsed) to ids[*n..). */
static void add(const struct hearth_model *m, const char *text, bool bos, hearth_token *ids,
                int32_t *n)
{
    hearth_token *t = NULL;
    size_t k        = 0;
    char err[HEARTH_ERR_MAX];
    assert_int_equal(hearth_tokenize(m, text, strlen(text), bos, true, &t, &k, err, sizeof err),
                     HEARTH_OK);
    assert_true(*n + (int32_t)k <= CAP);
    memcpy(ids + *n, t, k * sizeof *t);
    *n += (int32_t)k;
    free(t);
}

/* The text ids spell, a control token (no bytes) as <id>. */
static char *spell(const struct hearth_model *m, const hearth_token *ids, int32_t n)
{
    char *s    = calloc(1, 16 * CAP + 1);
    size_t len = 0;
    for (int32_t i = 0; i < n; i++) {
        size_t k = hearth_token_to_piece(m, ids[i], s + len, 15);
        assert_true(k <= 15);
        if (k == 0)
            k = (size_t)snprintf(s + len, 15, "<%d>", ids[i]);
        len += k;
    }
    return s;
}

/* turns_splice on a copy of ids[0..n): the tokens put in, the result in out[0..*n_out). */
static int32_t splice(struct turns *t, const hearth_token *ids, int32_t n, int32_t n_ctx,
                      hearth_token *out, int32_t *n_out)
{
    hearth_token *p = malloc((size_t)n * sizeof *p);
    memcpy(p, ids, (size_t)n * sizeof *p);
    size_t m          = (size_t)n;
    const int32_t put = turns_splice(t, &p, &m, n_ctx);
    memcpy(out, p, m * sizeof *p);
    *n_out = (int32_t)m;
    free(p);
    return put;
}

static const char T1[] = "Once upon a time, the little dog";
static const char R[]  = " ran to the park and";
static const char X[]  = " saw a bird. The end";

/* The token whose text is b[0..n), or -1. */
static hearth_token find(const struct hearth_model *m, const char *b, size_t n)
{
    char buf[64];
    for (hearth_token t = 0; t < hearth_model_n_vocab(m); t++)
        if (hearth_token_to_piece(m, t, buf, sizeof buf) == n && !memcmp(buf, b, n))
            return t;
    return -1;
}

/* Appends the tokens tail gets after head (BOS first), as the tokenizer splits the two. */
static void add_after(const struct hearth_model *m, const char *head, const char *tail,
                      hearth_token *ids, int32_t *n)
{
    hearth_token a[CAP], b[CAP];
    int32_t na = 0, nb = 0;
    add(m, head, true, a, &na);
    char text[1024];
    snprintf(text, sizeof text, "%s%s", head, tail);
    add(m, text, true, b, &nb);
    assert_memory_equal(a, b, (size_t)na * sizeof *a);
    memcpy(ids + *n, b + na, (size_t)(nb - na) * sizeof *b);
    *n += nb - na;
}

/* Splits the first token of ids[from..*n) that two tokens spell, as no tokenizer would. */
static void split_one(const struct hearth_model *m, hearth_token *ids, int32_t from, int32_t *n)
{
    for (int32_t i = from; i < *n; i++) {
        char b[64];
        const size_t len = hearth_token_to_piece(m, ids[i], b, sizeof b);
        for (size_t k = 1; len <= sizeof b && k < len; k++) {
            const hearth_token x = find(m, b, k), y = find(m, b + k, len - k);
            if (x < 0 || y < 0)
                continue;
            memmove(ids + i + 2, ids + i + 1, (size_t)(*n - i - 1) * sizeof *ids);
            ids[i]     = x;
            ids[i + 1] = y;
            (*n)++;
            return;
        }
    }
    fail_msg("no token of the reply splits in two");
}

/* The first turn: its prompt (n_prompt tokens), then R as the tokenizer does not split it. */
static int32_t first_turn(const struct hearth_model *m, hearth_token *e, int32_t *n_prompt)
{
    int32_t n = 0;
    add(m, T1, true, e, &n);
    *n_prompt = n;
    add_after(m, T1, R, e, &n);
    split_one(m, e, *n_prompt, &n);
    return n;
}

static void reply_goes_on_in_its_own_tokens(const struct hearth_model *m)
{
    struct turns *t = turns_new(m, 10000);
    assert_non_null(t);
    hearth_token e[CAP], canon[CAP], got[CAP];
    int32_t n_p1;
    const int32_t n_e = first_turn(m, e, &n_p1);
    turns_put(t, e, n_p1, n_e);

    int32_t n_c = 0;
    char text[512];
    snprintf(text, sizeof text, "%s ran to the park and%s", T1, X);
    add(m, text, true, canon, &n_c);
    int32_t n_got;
    assert_int_equal(splice(t, canon, n_c, 10000, got, &n_got), n_e);
    const int32_t n_spliced = n_got;
    assert_memory_equal(got, e, (size_t)n_e * sizeof *e);
    char *a = spell(m, canon, n_c), *b = spell(m, got, n_got);
    assert_string_equal(a, b); /* the same text, byte for byte */
    free(a);
    free(b);
    /* what follows the reply is the tokenizer's */
    assert_memory_equal(got + n_e, canon + n_c - (n_got - n_e), (size_t)(n_got - n_e) * sizeof *e);
    struct turns_stats st;
    turns_stats(t, &st);
    assert_int_equal(st.spliced_prompts, 1);
    assert_int_equal(st.spliced_tokens, n_e);

    /* a text that parts from the reply: up to the last boundary both splits share */
    n_c = 0;
    snprintf(text, sizeof text, "%s ran to the pond%s", T1, X);
    add(m, text, true, canon, &n_c);
    const int32_t put = splice(t, canon, n_c, 10000, got, &n_got);
    assert_in_range(put, n_p1 + 1, n_e - 1);
    a = spell(m, canon, n_c);
    b = spell(m, got, n_got);
    assert_string_equal(a, b);
    free(a);
    free(b);

    /* one that parts where the reply begins: nothing to put in */
    n_c = 0;
    snprintf(text, sizeof text, "%s walked home%s", T1, X);
    add(m, text, true, canon, &n_c);
    assert_int_equal(splice(t, canon, n_c, 10000, got, &n_got), 0);
    assert_int_equal(n_got, n_c);
    assert_memory_equal(got, canon, (size_t)n_c * sizeof *e);

    /* nor past the context: the spliced prompt must leave a slot room to generate */
    n_c = 0;
    snprintf(text, sizeof text, "%s ran to the park and%s", T1, X);
    add(m, text, true, canon, &n_c);
    assert_int_equal(splice(t, canon, n_c, n_spliced, got, &n_got), 0);
    assert_int_equal(splice(t, canon, n_c, n_spliced + 1, got, &n_got), n_e);
    turns_free(t);
}

static void test_a_reply_goes_on_in_its_own_tokens(void **state)
{
    (void)state;
    static const char *const models[] = {"stories260K.gguf", "tiny-qwen3-bpe-q8_0.gguf"};
    int ran                           = 0;
    for (int i = 0; i < 2; i++) {
        struct hearth_model *m = tu_model_load(models[i]);
        if (!m) {
            print_message("%s not found: not run on it\n", models[i]);
            continue;
        }
        reply_goes_on_in_its_own_tokens(m);
        hearth_model_free(m);
        ran++;
    }
    if (!ran)
        skip();
}

/*
 * A first turn whose reply ends in one more token, last: resent with `same`
 * after the reply, it goes on whole; with `other`, it stops before last.
 */
static void reply_ending_in(struct hearth_model *m, hearth_token last, const char *same,
                            const char *other)
{
    struct turns *t = turns_new(m, 10000);
    hearth_token e[CAP], canon[CAP], got[CAP];
    int32_t n_p1;
    int32_t n_e = first_turn(m, e, &n_p1);
    e[n_e++]    = last;
    turns_put(t, e, n_p1, n_e);
    for (int k = 0; k < 2; k++) {
        char text[512];
        int32_t n_c = 0, n_got;
        snprintf(text, sizeof text, "%s%s%s%s", T1, R, k ? other : same, X);
        add(m, text, true, canon, &n_c);
        assert_int_equal(splice(t, canon, n_c, 10000, got, &n_got), k ? n_e - 1 : n_e);
    }
    turns_free(t);
}

/* A control token (no text) matches only itself: </s> generated and resent goes on. */
static void test_control_tokens_match_by_identity(void **state)
{
    (void)state;
    struct hearth_model *m = tu_model_load("stories260K.gguf");
    if (!m)
        skip();
    reply_ending_in(m, hearth_token_eos(m), "</s>", "<s>");
    hearth_model_free(m);
}

/*
 * A reply that ends in a byte no character takes: the server sent U+FFFD
 * for it (oai_text_json), and the client resends that; the reply goes on
 * in its own tokens. Where the client's text has something else, it stops
 * before the byte.
 */
static void test_a_replaced_byte_matches_the_replacement(void **state)
{
    (void)state;
    struct hearth_model *m = tu_model_load("stories260K.gguf");
    if (!m)
        skip();
    const hearth_token d8 = find(m, "\xd8", 1); /* a lead byte, then nothing */
    assert_true(d8 >= 0);
    reply_ending_in(m, d8, "\xef\xbf\xbd", "?");
    hearth_model_free(m);
}

/*
 * The next turn's prompt holds the first reply again: the kept second turn
 * (its prompt spliced when it came) gives both replies their own tokens,
 * and the first turn, which it extends, is no longer kept.
 */
static void test_every_earlier_reply_is_spliced(void **state)
{
    (void)state;
    struct hearth_model *m = tu_model_load("stories260K.gguf");
    if (!m)
        skip();
    struct turns *t = turns_new(m, 10000);
    hearth_token e[CAP], canon[CAP], got[CAP];
    int32_t n_p1;
    int32_t n_e = first_turn(m, e, &n_p1);
    turns_put(t, e, n_p1, n_e);
    char text[512];
    int32_t n_c = 0, n_got;
    snprintf(text, sizeof text, "%s ran to the park and%s", T1, X);
    add(m, text, true, canon, &n_c);
    assert_int_equal(splice(t, canon, n_c, 10000, got, &n_got), n_e);
    /* the second turn: that prompt, then a reply of its own odd split */
    memcpy(e, got, (size_t)n_got * sizeof *e);
    const int32_t n_p2 = n_got;
    n_e                = n_got;
    add_after(m, text, " and the cat slept", e, &n_e);
    split_one(m, e, n_p2, &n_e);
    turns_put(t, e, n_p2, n_e);
    struct turns_stats st;
    turns_stats(t, &st);
    assert_int_equal(st.entries, 1);
    assert_int_equal(st.tokens, n_e);
    n_c = 0;
    snprintf(text, sizeof text, "%s ran to the park and%s and the cat slept. Then", T1, X);
    add(m, text, true, canon, &n_c);
    assert_int_equal(splice(t, canon, n_c, 10000, got, &n_got), n_e);
    char *a = spell(m, canon, n_c), *b = spell(m, got, n_got);
    assert_string_equal(a, b);
    free(a);
    free(b);
    turns_free(t);
    hearth_model_free(m);
}

/* At most max_tokens kept, the least recently used dropped first. */
static void test_kept_tokens_stay_within_their_cap(void **state)
{
    (void)state;
    struct hearth_model *m = tu_model_load("stories260K.gguf");
    if (!m)
        skip();
    hearth_token e[CAP];
    int32_t n_p1;
    const int32_t n_e = first_turn(m, e, &n_p1);
    struct turns *t   = turns_new(m, 2 * n_e + 1);
    struct turns_stats st;
    for (int k = 0; k < 5; k++) {
        e[1] = 100 + k; /* five conversations of n_e tokens */
        turns_put(t, e, n_p1, n_e);
        turns_stats(t, &st);
        assert_true(st.tokens <= 2 * n_e + 1);
    }
    assert_int_equal(st.entries, 2);
    turns_put(t, e, n_p1, n_p1); /* nothing generated: nothing kept */
    turns_stats(t, &st);
    assert_int_equal(st.entries, 2);
    turns_free(t);
    /* a conversation longer than the cap is not kept */
    t = turns_new(m, n_e - 1);
    turns_put(t, e, n_p1, n_e);
    turns_stats(t, &st);
    assert_int_equal(st.entries, 0);
    turns_free(t);
    hearth_model_free(m);
}

/*
 * Random replies, split oddly in up to four places, resent as they were or
 * with one character changed: the spliced prompt always spells the same
 * text as the tokenizer's, and an unchanged reply goes on whole.
 */
static void test_random_replies_keep_the_text(void **state)
{
    (void)state;
    struct hearth_model *m = tu_model_load("stories260K.gguf");
    if (!m)
        skip();
    static const char *const words[] = {" the",    " dog", " ran", " park", " bird", " sat",
                                        " little", " and", " saw", " tree", ",",     "."};
    uint64_t r                       = 99;
    int whole = 0, changed = 0;
    for (int round = 0; round < 200; round++) {
        char reply[256] = "", text[512];
        for (int w = 0; w < 8; w++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            strcat(reply, words[(r >> 33) % 12]);
        }
        hearth_token e[CAP], canon[CAP], got[CAP];
        int32_t n_p1 = 0, n_e;
        add(m, T1, true, e, &n_p1);
        n_e = n_p1;
        add_after(m, T1, reply, e, &n_e);
        for (int k = 0; k < 1 + (int)(r >> 60) % 4; k++)
            split_one(m, e, n_p1 + (int32_t)((r >> (20 + k)) % 4), &n_e);
        struct turns *t = turns_new(m, 10000);
        turns_put(t, e, n_p1, n_e);
        const bool change = round % 2;
        if (change) { /* one letter of the reply becomes another */
            size_t at = 1 + (size_t)((r >> 40) % (strlen(reply) - 1));
            reply[at] = reply[at] == 'x' ? 'y' : 'x';
        }
        snprintf(text, sizeof text, "%s%s%s", T1, reply, X);
        int32_t n_c = 0, n_got;
        add(m, text, true, canon, &n_c);
        const int32_t put = splice(t, canon, n_c, 10000, got, &n_got);
        char *a = spell(m, canon, n_c), *b = spell(m, got, n_got);
        assert_string_equal(a, b);
        free(a);
        free(b);
        if (!change) {
            assert_int_equal(put, n_e);
            whole++;
        } else {
            assert_true(put < n_e);
            changed += put > n_p1;
        }
        turns_free(t);
    }
    print_message("%d replies resent whole, %d changed ones spliced in part\n", whole, changed);
    assert_true(changed > 0);
    hearth_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_reply_goes_on_in_its_own_tokens),
        cmocka_unit_test(test_control_tokens_match_by_identity),
        cmocka_unit_test(test_a_replaced_byte_matches_the_replacement),
        cmocka_unit_test(test_every_earlier_reply_is_spliced),
        cmocka_unit_test(test_kept_tokens_stay_within_their_cap),
        cmocka_unit_test(test_random_replies_keep_the_text),
    };
    return cmocka_run_group_tests_name("tests", tests, NULL, NULL);
}
