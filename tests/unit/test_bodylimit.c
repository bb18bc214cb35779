/*
 * test_bodylimit.c: src/net/bodylimit.c, the HTTP framing that refuses an
 * oversized or malformed request before evhttp reads it. Each case is fed whole, split at
 * every byte, and byte by byte: the verdict must not depend on how the
 * bytes arrive.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "util/testutil.h"
#include "net/bodylimit.h"

#define MAX_BODY 100
#define MAX_HEAD 300

/* Feeds s in pieces of at most step bytes (split first at `at`); the final verdict. */
static bool feed(const char *s, size_t len, size_t at, size_t step, struct bodylimit *b)
{
    bodylimit_init(b, MAX_BODY, MAX_HEAD);
    bool ok = bodylimit_feed(b, s, at < len ? at : len);
    for (size_t i = at; ok && i < len; i += step)
        ok = bodylimit_feed(b, s + i, len - i < step ? len - i : step);
    return ok;
}

/* The verdict for s every way it can arrive; all must agree with want. */
static void check(const char *s, bool want, enum bodylimit_state end, const char *path)
{
    size_t len = strlen(s);
    struct bodylimit b;
    for (size_t at = 0; at <= len; at++) {
        for (size_t step = 1; step <= len + 1; step = step == 1 ? len + 1 : step + len) {
            bool ok = feed(s, len, at, step, &b);
            if (ok != want || (want && b.state != end) || strcmp(b.path, path))
                print_message("split at %zu step %zu: ok %d state %d path '%s' on:\n%s\n", at, step,
                              ok, b.state, b.path, s);
            assert_int_equal(ok, want);
            if (want)
                assert_int_equal(b.state, end);
            assert_string_equal(b.path, path);
        }
    }
}

static void test_within_limits(void **state)
{
    (void)state;
    /* a GET, a POST with a body, then the next request on the same connection */
    check("GET /health HTTP/1.1\r\nHost: x\r\n\r\n", true, BL_HEAD, "");
    check("POST /v1/completions HTTP/1.1\r\ncontent-length: 5\r\n\r\nhello"
          "GET /v1/models?x=1 HTTP/1.1\r\n\r\n",
          true, BL_HEAD, "");
    /* a body of exactly the limit, and a chunked one within it, with a trailer */
    char body[512];
    snprintf(body, sizeof body, "POST /a HTTP/1.1\r\nContent-Length: %d\r\n\r\n%0*d", MAX_BODY,
             MAX_BODY, 0);
    check(body, true, BL_HEAD, "");
    check("POST /tokenize HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
          "a\r\n0123456789\r\n5\r\nabcde\r\n0\r\nX-Trailer: 1\r\n\r\n",
          true, BL_HEAD, "");
    /* inside a request: the path is known until its end */
    check("POST /v1/chat/completions HTTP/1.1\nContent-Length: 10\n\nabc", true, BL_BODY,
          "/v1/chat/completions");
}

static void test_refused(void **state)
{
    (void)state;
    check("POST /v1/completions HTTP/1.1\r\nContent-Length: 101\r\n\r\n", false, BL_REFUSED,
          "/v1/completions");
    check("POST /v1/completions HTTP/1.1\r\nContent-Length: 99999999999999\r\n\r\nxx", false,
          BL_REFUSED, "/v1/completions");
    /* chunked: the running total passes the limit */
    check("POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n32\r\n", true, BL_CHUNK_DATA,
          "/c");
    char big[1024];
    snprintf(big, sizeof big,
             "POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n32\r\n%050d\r\n33\r\n", 0);
    check(big, false, BL_REFUSED, "/c");
    /* a head over its limit, even with no end in sight */
    memset(big, 'a', sizeof big);
    memcpy(big, "GET /x HTTP/1.1\r\nX: ", 20);
    big[sizeof big - 1] = 0;
    check(big, false, BL_REFUSED, "/x");
    /* the second request on a connection is judged on its own */
    check("GET / HTTP/1.1\r\n\r\nPOST /two HTTP/1.1\r\nContent-Length: 500\r\n\r\n", false,
          BL_REFUSED, "/two");
}

/* The status a whole-fed s is refused with (0: not refused), its path in path. */
static int refused_with(const char *s, char *path, size_t path_len)
{
    struct bodylimit b;
    bodylimit_init(&b, MAX_BODY, MAX_HEAD);
    bool ok = bodylimit_feed(&b, s, strlen(s));
    snprintf(path, path_len, "%s", b.path);
    return ok ? 0 : b.status;
}

static void test_malformed(void **state)
{
    (void)state;
    static const struct {
        const char *s, *path;
        int status;
    } bad[] = {
        {"POST /a HTTP/1.1\r\nContent-Length: 1x\r\n\r\nzzz", "/a", 400},
        {"POST /a HTTP/1.1\r\nContent-Length: -5\r\n\r\n", "/a", 400},
        {"POST /a HTTP/1.1\r\nContent-Length: \r\n\r\n", "/a", 400},
        {"POST /a HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", "/a", 400},
        {"POST /a HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n", "/a", 413},
        {"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n", "/a", 400},
        {"POST /a HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", "/a", 400},
        {"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "/a", 400},
        {"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\n", "/a", 400},
        {"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\n", "/a", 413},
        {"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n", "/a", 400},
        {"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nbad trailer\r\n", "/a", 400},
        {"POST /a HTTP/9.9\r\n\r\n", "/a", 505},
        {"POST /a HTTP/1.1 x\r\n\r\n", "/a", 400},
        {"POST /a\r\n\r\n", "/a", 400},
        {"POST  /a HTTP/1.1\r\n\r\n", "", 400},
        {"BREW /a HTTP/1.1\r\n\r\n", "", 400},
        {"CONNECT x:443 HTTP/1.1\r\n\r\n", "x:443", 405},
        {"TRACE /a HTTP/1.1\r\n\r\n", "/a", 405},
        {"HELLO\r\n\r\n", "", 400},
        {"\x16\x03\x01\x02\x00", "", 400},
        {"GET /a HTTP/1.1\r\n folded\r\n\r\n", "/a", 400},
        {"GET /a HTTP/1.1\r\nNo colon\r\n\r\n", "/a", 400},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char path[256];
        int st = refused_with(bad[i].s, path, sizeof path);
        if (st != bad[i].status || strcmp(path, bad[i].path))
            print_message("case %zu: status %d path '%s' on:\n%s\n", i, st, path, bad[i].s);
        assert_int_equal(st, bad[i].status);
        assert_string_equal(path, bad[i].path);
        check(bad[i].s, false, BL_REFUSED, bad[i].path);
    }
    /* what stays allowed: leading blank lines, a folded header, HTTP/1.0, "SIZE ext" */
    check("\r\nGET /a HTTP/1.0\r\nX: 1\r\n  more\r\n\r\n", true, BL_HEAD, "");
    check("POST /a HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n2 x\r\nab\r\n0\r\n\r\n", true,
          BL_HEAD, "");
    struct bodylimit b;
    bodylimit_init(&b, MAX_BODY, MAX_HEAD);
    assert_false(bodylimit_feed(&b, "POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\n", 41));
    assert_non_null(strstr(b.reason, "101 bytes"));
    assert_int_equal(b.status, 413);
    assert_false(bodylimit_feed(&b, "more", 4)); /* refused stays refused */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_within_limits),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
