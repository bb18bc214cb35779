/* test_stopmatch.c: stop strings over streamed pieces (src/sched/stopmatch.c). */
#include <string.h>

#include "sched/stopmatch.h"
#include "util/testutil.h"

/* What a stream sends: the concatenation of every released piece. */
struct sent {
    char text[512];
    size_t len;
    enum stopmatch_result last;
};

static size_t feed(struct stopmatch *m, struct sent *s, const char *piece)
{
    const char *out;
    size_t n;
    s->last = stopmatch_feed(m, piece, strlen(piece), &out, &n);
    assert_int_not_equal(s->last, STOPMATCH_ENOMEM);
    assert_true(s->len + n < sizeof s->text);
    memcpy(s->text + s->len, out, n);
    s->len += n;
    s->text[s->len] = 0;
    return n;
}

static void flush(struct stopmatch *m, struct sent *s)
{
    const char *out;
    size_t n;
    stopmatch_flush(m, &out, &n);
    memcpy(s->text + s->len, out, n);
    s->len += n;
    s->text[s->len] = 0;
}

static void test_no_stop_strings_pass_through(void **state)
{
    (void)state;
    struct stopmatch m;
    struct sent s = {0};
    stopmatch_init(&m);
    stopmatch_reset(&m, NULL, 0);
    assert_int_equal(feed(&m, &s, "Once"), 4);
    assert_int_equal(feed(&m, &s, " upon"), 5);
    assert_int_equal(feed(&m, &s, ""), 0);
    flush(&m, &s);
    assert_string_equal(s.text, "Once upon");
    stopmatch_free(&m);
}

static void test_match_across_pieces(void **state)
{
    (void)state;
    char *stop[] = {"\n\n"};
    struct stopmatch m;
    struct sent s = {0};
    stopmatch_init(&m);
    stopmatch_reset(&m, stop, 1);
    assert_int_equal(feed(&m, &s, "Hello"), 5);
    assert_int_equal(feed(&m, &s, "\n"), 0); /* could start "\n\n" */
    assert_int_equal(s.last, STOPMATCH_MORE);
    feed(&m, &s, "\nWorld");
    assert_int_equal(s.last, STOPMATCH_HIT);
    flush(&m, &s); /* nothing after a hit */
    assert_string_equal(s.text, "Hello");
    stopmatch_free(&m);
}

static void test_partial_prefix_held_then_released(void **state)
{
    (void)state;
    char *stop[] = {"END"};
    struct stopmatch m;
    struct sent s = {0};
    stopmatch_init(&m);
    stopmatch_reset(&m, stop, 1);
    assert_int_equal(feed(&m, &s, "abcE"), 3);
    assert_int_equal(feed(&m, &s, "N"), 0);
    assert_int_equal(feed(&m, &s, "x"), 3); /* "ENx" was not "END" */
    assert_string_equal(s.text, "abcENx");
    assert_int_equal(feed(&m, &s, "yEN"), 1);
    flush(&m, &s); /* the stream ends: the held prefix is text after all */
    assert_string_equal(s.text, "abcENxyEN");
    stopmatch_free(&m);
}

static void test_stop_inside_one_piece(void **state)
{
    (void)state;
    char *stop[] = {"STOP"};
    struct stopmatch m;
    struct sent s = {0};
    stopmatch_init(&m);
    stopmatch_reset(&m, stop, 1);
    feed(&m, &s, "ab STOP cd");
    assert_int_equal(s.last, STOPMATCH_HIT);
    assert_string_equal(s.text, "ab ");
    stopmatch_free(&m);
}

static void test_earliest_of_several(void **state)
{
    (void)state;
    char *stop[] = {"world", "lo w", "zzz"};
    struct stopmatch m;
    struct sent s = {0};
    stopmatch_init(&m);
    stopmatch_reset(&m, stop, 3);
    feed(&m, &s, "hel");
    feed(&m, &s, "lo");
    feed(&m, &s, " wor");
    assert_int_equal(s.last, STOPMATCH_HIT); /* "lo w" is complete before "world" is */
    assert_int_equal(m.hit, 1);
    assert_string_equal(s.text, "hel");
    stopmatch_free(&m);

    char *stop2[]  = {"bar", "foo"};
    struct sent s2 = {0};
    stopmatch_init(&m);
    stopmatch_reset(&m, stop2, 2);
    feed(&m, &s2, "xxf");
    feed(&m, &s2, "obarfoo");
    assert_int_equal(s2.last, STOPMATCH_HIT);
    assert_int_equal(m.hit, 0); /* "bar" */
    assert_string_equal(s2.text, "xxfo");
    stopmatch_reset(&m, stop2, 2); /* a new stream forgets the hit */
    assert_int_equal(m.hit, -1);
    stopmatch_free(&m);
}

static void test_overlapping_prefixes(void **state)
{
    (void)state;
    char *stop[] = {"abc", "ab"};
    struct stopmatch m;
    struct sent s = {0};
    stopmatch_init(&m);
    stopmatch_reset(&m, stop, 2);
    assert_int_equal(feed(&m, &s, "xa"), 1);
    feed(&m, &s, "b");
    assert_int_equal(s.last, STOPMATCH_HIT); /* "ab" matches without waiting for "abc" */
    assert_string_equal(s.text, "x");
    stopmatch_free(&m);

    /* "abc" and "bcd": "ab" held, "abd" released except what "bcd" might still start */
    char *stop2[]  = {"abc", "bcd"};
    struct sent s2 = {0};
    stopmatch_init(&m);
    stopmatch_reset(&m, stop2, 2);
    assert_int_equal(feed(&m, &s2, "ab"), 0);
    assert_int_equal(feed(&m, &s2, "d"), 3);
    assert_int_equal(feed(&m, &s2, "zab"), 1);
    feed(&m, &s2, "cd");
    assert_int_equal(s2.last, STOPMATCH_HIT); /* "abc" starts first */
    assert_string_equal(s2.text, "abdz");
    stopmatch_free(&m);

    /* a suffix that is a prefix only from a later start: "aab" with stop "ab" */
    char *stop3[]  = {"abx"};
    struct sent s3 = {0};
    stopmatch_init(&m);
    stopmatch_reset(&m, stop3, 1);
    assert_int_equal(feed(&m, &s3, "aab"), 1);
    assert_int_equal(feed(&m, &s3, "ab"), 2); /* "abab": the first "ab" cannot start "abx" */
    feed(&m, &s3, "x!");
    assert_int_equal(s3.last, STOPMATCH_HIT);
    assert_int_equal(m.hit, 0);
    assert_string_equal(s3.text, "aab");
    stopmatch_free(&m);
}

static void test_utf8_holdback(void **state)
{
    (void)state;
    struct stopmatch m;
    struct sent s = {0};
    stopmatch_init(&m);
    stopmatch_reset(&m, NULL, 0);
    assert_int_equal(feed(&m, &s, "a\xC3"), 1); /* é = C3 A9, split */
    assert_int_equal(feed(&m, &s,
                          "\xA9"
                          "b"),
                     3);
    /* U+1F600 = F0 9F 98 80, one byte per piece */
    assert_int_equal(feed(&m, &s, "\xF0"), 0);
    assert_int_equal(feed(&m, &s, "\x9F"), 0);
    assert_int_equal(feed(&m, &s, "\x98"), 0);
    assert_int_equal(feed(&m, &s, "\x80"), 4);
    assert_string_equal(s.text, "a\xC3\xA9"
                                "b\xF0\x9F\x98\x80");
    /* a truncated character at the very end comes out at flush */
    assert_int_equal(feed(&m, &s, "x\xE2\x82"), 1);
    flush(&m, &s);
    assert_string_equal(s.text, "a\xC3\xA9"
                                "b\xF0\x9F\x98\x80x\xE2\x82");
    stopmatch_free(&m);

    /* stray continuation bytes and invalid leads are not held forever */
    assert_int_equal(stopmatch_utf8_tail("\x80", 1), 0);
    assert_int_equal(stopmatch_utf8_tail("\xFF", 1), 0);
    assert_int_equal(stopmatch_utf8_tail("a\xE2\x82", 3), 2);
    assert_int_equal(stopmatch_utf8_tail("\xE2\x82\xAC", 3), 0);
    assert_int_equal(stopmatch_utf8_tail("\x9F\x98\x80", 3), 0);
    assert_int_equal(stopmatch_utf8_tail("", 0), 0);
}

static void test_utf8_with_stop_strings(void **state)
{
    (void)state;
    char *stop[] = {"\xC3\xA9t\xC3\xA9"}; /* "été" */
    struct stopmatch m;
    struct sent s = {0};
    stopmatch_init(&m);
    stopmatch_reset(&m, stop, 1);
    assert_int_equal(feed(&m, &s, "l'\xC3"), 2);
    assert_int_equal(feed(&m, &s, "\xA9t"), 0);
    feed(&m, &s, "\xC3\xA9!");
    assert_int_equal(s.last, STOPMATCH_HIT);
    assert_string_equal(s.text, "l'");
    stopmatch_free(&m);
}

static void test_reset_reuses_and_long_pieces(void **state)
{
    (void)state;
    char *stop[] = {"</s>"};
    struct stopmatch m;
    stopmatch_init(&m);
    for (int round = 0; round < 3; round++) {
        struct sent s = {0};
        stopmatch_reset(&m, stop, 1);
        char big[300];
        memset(big, 'q', sizeof big - 1);
        big[sizeof big - 1] = 0;
        assert_int_equal(feed(&m, &s, big), sizeof big - 1);
        feed(&m, &s, "<");
        feed(&m, &s, "/s");
        feed(&m, &s, ">tail");
        assert_int_equal(s.last, STOPMATCH_HIT);
        assert_int_equal(s.len, sizeof big - 1);
    }
    stopmatch_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_stop_strings_pass_through),
        cmocka_unit_test(test_match_across_pieces),
        cmocka_unit_test(test_partial_prefix_held_then_released),
        cmocka_unit_test(test_stop_inside_one_piece),
        cmocka_unit_test(test_earliest_of_several),
        cmocka_unit_test(test_overlapping_prefixes),
        cmocka_unit_test(test_utf8_holdback),
        cmocka_unit_test(test_utf8_with_stop_strings),
        cmocka_unit_test(test_reset_reuses_and_long_pieces),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
