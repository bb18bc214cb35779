/*
 * test_strbuf.c: src/util/strbuf.h. Growth past many doublings keeps every
 * byte; printf-append of texts longer than the spare room (and of a
 * megabyte) matches snprintf; the oom flag, forced by a length no
 * allocation can hold, makes later appends no-ops and take return NULL;
 * take and reset hand over and empty the buffer; and src/util/vec.h's
 * array keeps its elements as it grows.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/strbuf.h"
#include "util/testutil.h"
#include "util/vec.h"

static void test_zeroed_is_empty(void **state)
{
    (void)state;
    struct strbuf b = {0};
    assert_null(b.s);
    strbuf_add(&b, "");
    /* an empty append still gives a C string, as the schema converter's callers expect */
    assert_non_null(b.s);
    assert_string_equal(b.s, "");
    assert_int_equal(b.len, 0);
    assert_false(b.oom);
    strbuf_free(&b);
    assert_null(b.s);
    assert_int_equal(b.cap, 0);
}

static void test_growth_keeps_every_byte(void **state)
{
    (void)state;
    struct strbuf b = {0};
    size_t want     = 0;
    for (int i = 0; i < 20000; i++) {
        char c = (char)('a' + i % 26);
        strbuf_addn(&b, &c, 1);
        want++;
        assert_int_equal(b.len, want);
        assert_true(b.cap > b.len);
        assert_int_equal(b.s[b.len], '\0');
    }
    for (size_t i = 0; i < want; i++)
        if (b.s[i] != (char)('a' + i % 26))
            fail_msg("byte %zu is '%c', want '%c'", i, b.s[i], (char)('a' + i % 26));
    /* bytes after a NUL are kept: addn takes n bytes, not a C string */
    strbuf_addn(&b, "x\0y", 3);
    assert_int_equal(b.len, want + 3);
    assert_memory_equal(b.s + want, "x\0y", 4);
    strbuf_free(&b);
}

static void test_add_and_addn_agree(void **state)
{
    (void)state;
    struct strbuf a = {0}, b = {0};
    strbuf_add(&a, "hello, ");
    strbuf_add(&a, "world");
    strbuf_addn(&b, "hello, world!!", 12);
    assert_string_equal(a.s, "hello, world");
    assert_string_equal(b.s, a.s);
    assert_int_equal(a.len, 12);
    strbuf_free(&a);
    strbuf_free(&b);
}

static void test_printf_short_and_long(void **state)
{
    (void)state;
    struct strbuf b = {0};
    strbuf_printf(&b, "%d-%s", 42, "x");
    assert_string_equal(b.s, "42-x");
    /* longer than the spare room: formatted again after growing */
    char *big = malloc(5000);
    assert_non_null(big);
    memset(big, 'q', 4999);
    big[4999] = '\0';
    strbuf_printf(&b, "[%s]%zu", big, (size_t)4999);
    assert_int_equal(b.len, 4 + 1 + 4999 + 1 + 4);
    assert_memory_equal(b.s, "42-x[", 5);
    assert_memory_equal(b.s + 5, big, 4999);
    assert_string_equal(b.s + 5 + 4999, "]4999");
    free(big);
    /* a text that just fits the spare room, then one a byte over it */
    strbuf_reset(&b);
    size_t room = b.cap - 1;
    strbuf_printf(&b, "%*s", (int)room, "z");
    assert_int_equal(b.len, room);
    assert_int_equal(b.s[room], '\0');
    strbuf_reset(&b);
    strbuf_printf(&b, "%*s", (int)room + 1, "z");
    assert_int_equal(b.len, room + 1);
    assert_int_equal(b.s[room], 'z');
    assert_int_equal(b.s[room + 1], '\0');
    strbuf_free(&b);
}

static void test_printf_a_megabyte(void **state)
{
    (void)state;
    enum { N = 1 << 20 };
    char *big = malloc(N + 1);
    assert_non_null(big);
    for (size_t i = 0; i < N; i++)
        big[i] = (char)('0' + i % 10);
    big[N]          = '\0';
    struct strbuf b = {0};
    strbuf_add(&b, ">");
    strbuf_printf(&b, "%s<%d", big, -7);
    char *want = malloc(N + 8);
    assert_non_null(want);
    int n = snprintf(want, N + 8, ">%s<%d", big, -7);
    assert_int_equal(b.len, (size_t)n);
    assert_memory_equal(b.s, want, (size_t)n + 1);
    free(want);
    free(big);
    strbuf_free(&b);
}

static void test_oom_sticks(void **state)
{
    (void)state;
    struct strbuf b = {0};
    strbuf_add(&b, "kept");
    /* no allocation holds SIZE_MAX bytes: the append fails, as a failed realloc would */
    strbuf_addn(&b, "", SIZE_MAX - 2);
    assert_true(b.oom);
    assert_int_equal(b.len, 4);
    assert_string_equal(b.s, "kept");
    strbuf_add(&b, "lost");
    strbuf_printf(&b, "%s", "lost too");
    assert_int_equal(b.len, 4);
    assert_string_equal(b.s, "kept");
    size_t len = 99;
    assert_null(strbuf_take(&b, &len));
    assert_int_equal(len, 0);
    assert_null(b.s); /* take freed it */
    assert_false(b.oom);
    /* reset clears the flag too */
    strbuf_addn(&b, "", SIZE_MAX);
    assert_true(b.oom);
    strbuf_reset(&b);
    assert_false(b.oom);
    strbuf_add(&b, "again");
    assert_string_equal(b.s, "again");
    strbuf_free(&b);
}

static void test_take_and_reset(void **state)
{
    (void)state;
    struct strbuf b = {0};
    size_t len      = 99;
    char *s         = strbuf_take(&b, &len); /* nothing appended: "" */
    assert_non_null(s);
    assert_string_equal(s, "");
    assert_int_equal(len, 0);
    free(s);

    strbuf_add(&b, "one two");
    size_t cap = b.cap;
    strbuf_reset(&b);
    assert_int_equal(b.len, 0);
    assert_int_equal(b.cap, cap); /* the allocation is kept */
    assert_string_equal(b.s, "");
    strbuf_add(&b, "three");
    s = strbuf_take(&b, &len);
    assert_string_equal(s, "three");
    assert_int_equal(len, 5);
    assert_null(b.s);
    assert_int_equal(b.len, 0);
    assert_int_equal(b.cap, 0);
    free(s);
    s = strbuf_take(&b, NULL); /* len may be NULL */
    assert_string_equal(s, "");
    free(s);
}

VEC_DEFINE(ivec, int32_t, int32_t)

static void test_vec_grows(void **state)
{
    (void)state;
    struct ivec a = {0};
    for (int32_t i = 0; i < 10000; i++)
        assert_true(ivec_push(&a, i * 3));
    assert_int_equal(a.n, 10000);
    assert_true(a.cap >= a.n);
    for (int32_t i = 0; i < a.n; i++)
        if (a.v[i] != i * 3)
            fail_msg("v[%d] = %d, want %d", i, a.v[i], i * 3);
    ivec_free(&a);
    assert_null(a.v);
    assert_int_equal(a.n, 0);
    assert_int_equal(a.cap, 0);
    assert_true(ivec_push(&a, 7)); /* usable again after free */
    assert_int_equal(a.v[0], 7);
    ivec_free(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_zeroed_is_empty),    cmocka_unit_test(test_growth_keeps_every_byte),
        cmocka_unit_test(test_add_and_addn_agree), cmocka_unit_test(test_printf_short_and_long),
        cmocka_unit_test(test_printf_a_megabyte),  cmocka_unit_test(test_oom_sticks),
        cmocka_unit_test(test_take_and_reset),     cmocka_unit_test(test_vec_grows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
