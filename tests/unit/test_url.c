/*
 * test_url.c: src/net/url.c, the upstream URLs of `hearth bench` and
 * `hearth route`: what each part of a URL becomes, and that every refusal
 * says what is wrong.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "util/testutil.h"
#include "net/url.h"

static void target_ok(const char *url, const char *host, int port, const char *prefix,
                      const char *hostport)
{
    struct url_target t;
    char err[200] = "";
    bool ok       = url_target_parse(url, &t, err, sizeof err);
    if (!ok)
        print_message("%s: %s\n", url, err);
    assert_true(ok);
    assert_string_equal(t.host, host);
    assert_int_equal(t.port, port);
    assert_string_equal(t.prefix, prefix);
    assert_string_equal(t.hostport, hostport);
}

static void target_bad(const char *url, const char *why)
{
    struct url_target t;
    char err[200] = "";
    assert_false(url_target_parse(url, &t, err, sizeof err));
    if (!strstr(err, why))
        print_message("%s: '%s' does not say '%s'\n", url, err, why);
    assert_non_null(strstr(err, why));
}

static void test_target(void **state)
{
    (void)state;
    target_ok("http://localhost", "localhost", 80, "", "localhost");
    target_ok("http://127.0.0.1:8080", "127.0.0.1", 8080, "", "127.0.0.1:8080");
    target_ok("HTTP://h:8080/", "h", 8080, "", "h:8080");
    target_ok("http://h:8080/v1", "h", 8080, "", "h:8080");
    target_ok("http://h:8080/v1/", "h", 8080, "", "h:8080");
    target_ok("http://h/api/llm/v1", "h", 80, "/api/llm", "h");
    target_ok("http://h/api/v10", "h", 80, "/api/v10", "h");
    target_ok("http://h:80/x//", "h", 80, "/x", "h");
    target_ok("http://[::1]:9000/v1", "::1", 9000, "", "[::1]:9000");
    target_ok("http://[fe80::1]", "fe80::1", 80, "", "[fe80::1]");
    target_ok("http://h:65535", "h", 65535, "", "h:65535");

    target_bad("https://api.example.com/v1", "https is not supported: hearth bench speaks plain");
    target_bad("ftp://h", "scheme ftp is not supported");
    target_bad("localhost:8080", "does not start with http://");
    target_bad("", "empty");
    target_bad("http://", "no host");
    target_bad("http://:8080", "no host");
    target_bad("http:///v1", "no host");
    target_bad("http://[]:80", "no host");
    target_bad("http://[::1", "no closing ']'");
    target_bad("http://[::1]x", "after ']'");
    target_bad("http://[abc]", "not an IPv6 address");
    target_bad("http://h:0", "port");
    target_bad("http://h:65536", "port");
    target_bad("http://h:", "port");
    target_bad("http://h:80x", "port");
    target_bad("http://h:-1", "port");
    target_bad("http://h:1234567", "port");
    target_bad("http://user@h", "user names");
    target_bad("http://h?x=1", "queries");
    target_bad("http://h/a b", "space");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_target),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
