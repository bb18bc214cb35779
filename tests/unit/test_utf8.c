/*
 * test_utf8.c: src/util/utf8.h. utf8_len must stay llama.cpp's
 * unicode_len_utf8 byte for byte (the tokenizers' ids depend on it); decode,
 * encode and the incomplete-tail count are checked on valid 1-4 byte
 * sequences, every code point, truncations and invalid bytes.
 */
#include <string.h>

#include "util/testutil.h"
#include "util/utf8.h"

/* llama.cpp's table, written out as it is there: indexed by the high nibble. */
static size_t llama_cpp_len(unsigned char c)
{
    static const size_t lookup[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lookup[c >> 4];
}

static void test_len_is_llama_cpp_for_every_byte(void **state)
{
    (void)state;
    for (int c = 0; c < 256; c++) {
        if (utf8_len((unsigned char)c) != llama_cpp_len((unsigned char)c))
            fail_msg("utf8_len(0x%02X) = %zu, llama.cpp says %zu", c, utf8_len((unsigned char)c),
                     llama_cpp_len((unsigned char)c));
    }
    /* the cases a strict reader would count otherwise */
    assert_int_equal(utf8_len(0x80), 1); /* a stray continuation byte stands alone */
    assert_int_equal(utf8_len(0xBF), 1);
    assert_int_equal(utf8_len(0xC0), 2); /* overlong lead: still 2 */
    assert_int_equal(utf8_len(0xF8), 4); /* no valid sequence starts so; llama.cpp says 4 */
    assert_int_equal(utf8_len(0xFF), 4);
}

static void test_lead_len_for_every_byte(void **state)
{
    (void)state;
    for (int c = 0; c < 256; c++) {
        size_t want = c < 0x80 ? 1 : c < 0xC0 ? 0 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF8 ? 4 : 0;
        if (utf8_lead_len((unsigned char)c) != want)
            fail_msg("utf8_lead_len(0x%02X) = %zu, want %zu", c, utf8_lead_len((unsigned char)c),
                     want);
    }
}

static void expect_decode(const char *s, size_t n, size_t want_len, uint32_t want_cp)
{
    uint32_t cp = 0xDEADBEEF;
    size_t len  = utf8_decode(s, n, &cp);
    if (len != want_len)
        fail_msg("utf8_decode(\"%.*s\", %zu): length %zu, want %zu", (int)n, s, n, len, want_len);
    if (want_len > 0 && cp != want_cp)
        fail_msg("utf8_decode(\"%.*s\", %zu): U+%04X, want U+%04X", (int)n, s, n, cp, want_cp);
    if (want_len == 0 && cp != 0xDEADBEEF)
        fail_msg("utf8_decode wrote *cp on invalid input");
}

static void test_decode_valid(void **state)
{
    (void)state;
    expect_decode("A", 1, 1, 'A');
    expect_decode("\x7f", 1, 1, 0x7F);
    expect_decode("\xc2\x80", 2, 2, 0x80);
    expect_decode("\xc3\xa9", 2, 2, 0xE9);
    expect_decode("\xdf\xbf", 2, 2, 0x7FF);
    expect_decode("\xe0\xa0\x80", 3, 3, 0x800);
    expect_decode("\xe2\x82\xac", 3, 3, 0x20AC);
    expect_decode("\xef\xbf\xbf", 3, 3, 0xFFFF);
    expect_decode("\xf0\x90\x80\x80", 4, 4, 0x10000);
    expect_decode("\xf0\x9f\x98\x80", 4, 4, 0x1F600);
    expect_decode("\xf4\x8f\xbf\xbf", 4, 4, 0x10FFFF);
    /* only the first character is read, however much follows */
    expect_decode("\xc3\xa9xyz", 5, 2, 0xE9);
    /* as llama.cpp: overlong forms and surrogates pass */
    expect_decode("\xc0\x80", 2, 2, 0);
    expect_decode("\xe0\x80\xaf", 3, 3, '/');
    expect_decode("\xed\xa0\x80", 3, 3, 0xD800);
}

static void test_decode_invalid(void **state)
{
    (void)state;
    expect_decode("", 0, 0, 0);
    expect_decode("\x80", 1, 0, 0); /* continuation byte as a lead */
    expect_decode("\xbf\x80", 2, 0, 0);
    expect_decode("\xf8\x88\x80\x80\x80", 5, 0, 0); /* 5-byte lead */
    expect_decode("\xff", 1, 0, 0);
    expect_decode("\xc3", 1, 0, 0); /* truncated by n */
    expect_decode("\xe2\x82", 2, 0, 0);
    expect_decode("\xf0\x9f\x98", 3, 0, 0);
    expect_decode("\xe2\x82\xac", 2, 0, 0); /* the bytes are there but n stops short */
    expect_decode("\xc3"
                  "A",
                  2, 0, 0); /* a non-continuation where one belongs */
    expect_decode("\xe2\x82"
                  "A",
                  3, 0, 0);
    expect_decode("\xf0\x9f\xc3\xa9", 4, 0, 0);
    expect_decode("\xf4\x90\x80\x80", 4, 0, 0); /* U+110000 */
    expect_decode("\xf7\xbf\xbf\xbf", 4, 0, 0);
}

static void test_encode_round_trips_every_code_point(void **state)
{
    (void)state;
    for (uint32_t cp = 0; cp <= 0x10FFFF; cp++) {
        char buf[8];
        memset(buf, 0x55, sizeof buf);
        size_t n    = utf8_encode(cp, buf);
        size_t want = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
        if (n != want)
            fail_msg("utf8_encode(U+%04X) wrote %zu bytes, want %zu", cp, n, want);
        if (buf[n] != 0x55)
            fail_msg("utf8_encode(U+%04X) wrote past its length", cp);
        if (utf8_lead_len((unsigned char)buf[0]) != n || utf8_len((unsigned char)buf[0]) != n)
            fail_msg("U+%04X: the lead byte announces another length", cp);
        uint32_t back = 0;
        if (utf8_decode(buf, n, &back) != n || back != cp)
            fail_msg("U+%04X does not decode back (got U+%04X)", cp, back);
        for (size_t cut = 1; cut < n; cut++)
            if (utf8_tail_len(buf, cut) != cut)
                fail_msg("U+%04X cut after %zu bytes: tail %zu", cp, cut, utf8_tail_len(buf, cut));
        if (utf8_tail_len(buf, n) != 0)
            fail_msg("U+%04X whole: tail %zu, want 0", cp, utf8_tail_len(buf, n));
    }
}

#define TAIL(lit) utf8_tail_len(lit, sizeof lit - 1)

static void test_tail_len(void **state)
{
    (void)state;
    assert_int_equal(utf8_tail_len("", 0), 0);
    assert_int_equal(TAIL("abc"), 0);
    assert_int_equal(TAIL("a\xc3\xa9"), 0);
    assert_int_equal(TAIL("a\xe2\x82\xac"), 0);
    assert_int_equal(TAIL("a\xf0\x9f\x98\x80"), 0);
    /* truncated tails: held back */
    assert_int_equal(TAIL("a\xc3"), 1);
    assert_int_equal(TAIL("a\xe2"), 1);
    assert_int_equal(TAIL("a\xe2\x82"), 2);
    assert_int_equal(TAIL("\xf0"), 1);
    assert_int_equal(TAIL("\xf0\x9f"), 2);
    assert_int_equal(TAIL("\xf0\x9f\x98"), 3);
    assert_int_equal(TAIL("\xe2\x82\xac\xe2"), 1);
    /* nothing a later byte could complete: released */
    assert_int_equal(TAIL("\x80"), 0);
    assert_int_equal(TAIL("a\xbf"), 0);
    assert_int_equal(TAIL("\x9f\x98\x80"), 0); /* three continuations, no lead in reach */
    assert_int_equal(TAIL("\xc3\xa9\x80"), 0); /* one continuation too many */
    assert_int_equal(TAIL("\xf8"), 0);
    assert_int_equal(TAIL("\xff"), 0);
    assert_int_equal(TAIL("\xf8\x80\x80"), 0);
    /* overlong and out-of-range leads still wait for their bytes, as a decoder would read them */
    assert_int_equal(TAIL("\xc0"), 1);
    assert_int_equal(TAIL("\xf5\x80"), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_len_is_llama_cpp_for_every_byte),
        cmocka_unit_test(test_lead_len_for_every_byte),
        cmocka_unit_test(test_decode_valid),
        cmocka_unit_test(test_decode_invalid),
        cmocka_unit_test(test_encode_round_trips_every_code_point),
        cmocka_unit_test(test_tail_len),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
