/*
 * test_sse.c: src/bench/sse.c, the incremental server-sent-events parser.
 * Every case is fed whole, one byte at a time, and cut at every pair of
 * positions into three pieces: the events and their end offsets must be the
 * same however the bytes arrive.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/testutil.h"
#include "bench/sse.h"

/* What a parse reported: one "name|data|end\n" record per event. */
struct log {
    char text[8192];
    size_t len;
    int n_events;
    int stop_after; /* on_event returns false on this event (1-based); 0: never */
};

static bool record(void *ctx, const char *event, const char *data, size_t data_len, uint64_t end)
{
    struct log *l = ctx;
    assert_int_equal(strlen(data), data_len); /* NUL-terminated, no NUL inside in these cases */
    int n;
    if (data_len > 1000) /* the cap cases: the length says enough */
        n = snprintf(l->text + l->len, sizeof l->text - l->len, "%s|<%zu bytes>|%llu\n", event,
                     data_len, (unsigned long long)end);
    else
        n = snprintf(l->text + l->len, sizeof l->text - l->len, "%s|%s|%llu\n", event, data,
                     (unsigned long long)end);
    assert_true(n > 0 && (size_t)n < sizeof l->text - l->len);
    l->len += (size_t)n;
    l->n_events++;
    return l->n_events != l->stop_after;
}

/* Feeds s cut at a <= b into three pieces; the log and the verdict. */
static bool feed3(const char *s, size_t len, size_t a, size_t b, struct log *l)
{
    struct sse_parser p;
    memset(l, 0, sizeof *l);
    sse_init(&p, l, record);
    bool ok = sse_feed(&p, s, a) && sse_feed(&p, s + a, b - a) && sse_feed(&p, s + b, len - b);
    assert_true(p.fed <= len);
    if (ok)
        assert_int_equal(p.fed, len);
    sse_free(&p);
    return ok;
}

/* The events of s must be want (records as above), however s is split. */
static void check(const char *s, const char *want)
{
    size_t len = strlen(s);
    struct log l;
    for (size_t a = 0; a <= len; a++) {
        for (size_t b = a; b <= len; b++) {
            bool ok = feed3(s, len, a, b, &l);
            if (!ok || strcmp(l.text, want))
                print_message("cut at %zu and %zu of:\n%s\ngot:\n%s\nwant:\n%s\n", a, b, s, l.text,
                              want);
            assert_true(ok);
            assert_string_equal(l.text, want);
        }
    }
    /* one byte at a time */
    struct sse_parser p;
    memset(&l, 0, sizeof l);
    sse_init(&p, &l, record);
    for (size_t i = 0; i < len; i++)
        assert_true(sse_feed(&p, s + i, 1));
    sse_free(&p);
    assert_string_equal(l.text, want);
}

static void test_line_ends(void **state)
{
    (void)state;
    check("data: hello\n\n", "|hello|13\n");
    /* CRLF: the event ends at the blank line's CR, whether or not its LF came with it */
    check("data: x\r\n\r\n", "|x|10\n");
    check("data: x\r\rdata: y\r\r", "|x|9\n|y|18\n");
    check("data: a\r\ndata: b\rdata: c\n\r\ndata: d\n\r", "|a\nb\nc|26\n|d|36\n");
    /* a CR then an LF is one line end, never a blank line */
    check("data: a\r\ndata: b\r\n\r\n", "|a\nb|19\n");
    check("\r\n\r\n\n\rdata: z\n\n", "|z|15\n");
}

static void test_fields(void **state)
{
    (void)state;
    /* one optional space after the colon is removed, and only one */
    check("data:nospace\n\n", "|nospace|14\n");
    check("data:  two\n\n", "| two|12\n");
    check("data: a:b: c\n\n", "|a:b: c|14\n");
    /* a field without a colon has an empty value; an empty data line still dispatches */
    check("data\n\n", "||6\n");
    check("data:\n\n", "||7\n");
    check("data\ndata\n\n", "|\n|11\n");
    check("data: \ndata: x\n\n", "|\nx|16\n");
    /* comments, id, retry and unknown fields add nothing */
    check(": keepalive\n\n", "");
    check(":\ndata: q\n: in between\nid: 5\nretry: 10\nfoo: bar\nDATA: no\n\n", "|q|58\n");
    /* an event without data lines is not dispatched, and its name does not carry over */
    check("event: ping\n\ndata: z\n\n", "|z|22\n");
    check("event: a\nevent: b\ndata: 1\n\ndata: 2\n\n", "b|1|27\n|2|36\n");
    check("event\ndata: e\n\n", "|e|15\n");
    /* an event that never gets its blank line is not dispatched */
    check("data: partial\n", "");
    check("data: partial", "");
    /* a byte order mark is skipped at the start of the stream, and only there */
    check("\xEF\xBB\xBF"
          "data: bom\n\n",
          "|bom|14\n");
    check("\xEF\xBB\xBF\n"
          "data: b\n\n",
          "|b|13\n");
    check("data: a\n\n\xEF\xBB\xBF"
          "data: b\n\n",
          "|a|9\n");
}

static void test_openai_stream(void **state)
{
    (void)state;
    check("data: {\"choices\":[{\"text\":\"Hi\"}]}\n\n"
          ": ping\n\n"
          "data: {\"choices\":[],\"usage\":{\"completion_tokens\":1}}\n\n"
          "data: [DONE]\n\n",
          "|{\"choices\":[{\"text\":\"Hi\"}]}|35\n"
          "|{\"choices\":[],\"usage\":{\"completion_tokens\":1}}|97\n"
          "|[DONE]|111\n");
    check("event: error\r\ndata: {\"error\":{\"message\":\"x\"}}\r\n\r\n",
          "error|{\"error\":{\"message\":\"x\"}}|48\n");
}

static void test_long_name_truncated(void **state)
{
    (void)state;
    char s[256], want[256];
    snprintf(s, sizeof s, "event: %0100d\ndata: d\n\n", 0);
    snprintf(want, sizeof want, "%063d|d|%zu\n", 0, strlen(s));
    check(s, want);
}

/* Data of exactly SSE_MAX_EVENT bytes passes; one byte more, in one line or over two, fails. */
static void test_event_cap(void **state)
{
    (void)state;
    size_t n = SSE_MAX_EVENT;
    char *s  = malloc(n + 64);
    assert_non_null(s);
    memcpy(s, "data: ", 6);
    memset(s + 6, 'x', n);
    memcpy(s + 6 + n, "\n\n", 2);

    struct sse_parser p;
    struct log l = {0};
    sse_init(&p, &l, record);
    assert_true(sse_feed(&p, s, n + 8));
    assert_int_equal(l.n_events, 1);
    char want[64];
    snprintf(want, sizeof want, "|<%zu bytes>|%zu\n", n, n + 8);
    assert_string_equal(l.text, want);
    sse_free(&p);

    /* one line a byte too long: refused, with a sentence, and the parser stays stopped */
    s[6 + n] = 'x';
    memcpy(s + 7 + n, "\n\n", 2);
    memset(&l, 0, sizeof l);
    sse_init(&p, &l, record);
    assert_false(sse_feed(&p, s, n + 9));
    assert_int_equal(l.n_events, 0);
    assert_non_null(strstr(p.err, "longer than"));
    assert_false(sse_feed(&p, "\n\n", 2));
    sse_free(&p);

    /* two lines that together pass the cap (the joining LF counts) */
    sse_init(&p, &l, record);
    assert_true(sse_feed(&p, s, 6 + n / 2));
    assert_true(sse_feed(&p, "\ndata: ", 7));
    assert_true(sse_feed(&p, s + 6, n / 2));
    assert_false(sse_feed(&p, "\n", 1)); /* a data line counts when it ends */
    assert_non_null(strstr(p.err, "longer than"));
    sse_free(&p);

    /* a long comment line is no event, but a line past the cap is still refused */
    s[0] = ':';
    sse_init(&p, &l, record);
    assert_true(sse_feed(&p, s, n + 6));
    sse_free(&p);
    sse_init(&p, &l, record);
    memset(s + 6, 'x', n + 58);
    assert_false(sse_feed(&p, s, n + 64));
    assert_non_null(strstr(p.err, "line is longer"));
    sse_free(&p);
    free(s);
}

/* on_event returning false stops the feed at that event, with no error sentence. */
static void test_stop(void **state)
{
    (void)state;
    const char *s = "data: 1\n\ndata: 2\n\ndata: 3\n\n";
    struct sse_parser p;
    struct log l = {.stop_after = 2};
    sse_init(&p, &l, record);
    assert_false(sse_feed(&p, s, strlen(s)));
    assert_int_equal(l.n_events, 2);
    assert_string_equal(p.err, "");
    assert_int_equal(p.fed, 18);
    sse_free(&p);
    /* re-initialised, the same parser parses again */
    memset(&l, 0, sizeof l);
    sse_init(&p, &l, record);
    assert_true(sse_feed(&p, s, strlen(s)));
    assert_string_equal(l.text, "|1|9\n|2|18\n|3|27\n");
    sse_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_line_ends),     cmocka_unit_test(test_fields),
        cmocka_unit_test(test_openai_stream), cmocka_unit_test(test_long_name_truncated),
        cmocka_unit_test(test_event_cap),     cmocka_unit_test(test_stop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
