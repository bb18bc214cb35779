/*
 * test_webui.c: the chat page at / of `hearth serve` (src/serve/webui.c).
 *
 * Over curl: / is the page in the tree byte for byte, with its headers;
 * --api-key does not guard it while the API stays guarded; it has its own
 * metrics label; --no-webui makes / a 404 like any unknown path.
 *
 * In a real browser: headless Chromium (Debian's chromium) driven by
 * playwright-core from tests/e2e/node/webui.test.mjs opens the page, gives it
 * the API key it asks for, chats with stories260K and checks the streamed
 * reply against the API's own, reloads, and stops a reply held mid-stream by
 * the scheduler gate. Skipped with a message without /usr/bin/chromium,
 * Node.js 20 or `npm ci --prefix tests/e2e/node`.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/serveutil.h"

#define CHROMIUM  "/usr/bin/chromium"
#define PAGE_FILE HEARTH_TOP "/src/serve/webui/index.html"

/* True when node 20+, playwright-core and Chromium are there; otherwise prints why not. */
static bool have_browser(void)
{
    const char *pkg = HEARTH_TOP "/tests/e2e/node/node_modules/playwright-core/package.json";
    if (access(SRV_NODE, X_OK) != 0 || access(pkg, R_OK) != 0) {
        print_message("skip: needs %s and playwright-core (`npm ci --prefix tests/e2e/node`)\n",
                      SRV_NODE);
        return false;
    }
    /* playwright-core 1.65 wants Node.js 20 (Debian 12's own nodejs is 18) */
    const char *argv[] = {SRV_NODE, "-e",
                          "process.exit(parseInt(process.versions.node) < 20 ? 1 : 0)", NULL};
    if (tu_run(argv, NULL, NULL, NULL, 60) != 0) {
        print_message("skip: playwright-core needs Node.js 20 or later at %s\n", SRV_NODE);
        return false;
    }
    if (access(CHROMIUM, X_OK) != 0) {
        print_message("skip: needs %s (Debian: apt-get install chromium)\n", CHROMIUM);
        return false;
    }
    return true;
}

/* The value of header name in a curl header block, malloc'd; fails the test when absent. */
static char *header(const struct http_resp *r, const char *name)
{
    char key[128];
    snprintf(key, sizeof key, "\n%s:", name);
    const char *h = strcasestr(r->headers, key);
    if (!h)
        print_message("no %s header in:\n%s\n", name, r->headers);
    assert_non_null(h);
    h += strlen(key);
    h += strspn(h, " ");
    return strndup(h, strcspn(h, "\r\n"));
}

static void test_page_is_served_without_the_key(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    struct srv s;
    const char *extra[] = {"--api-key", "webui-key", NULL};
    srv_start(&s, extra);
    char *want = srv_slurp(PAGE_FILE);
    assert_true(strlen(want) > 1000);

    for (int i = 0; i < 2; i++) {
        struct http_resp r = http_get(&s, i ? "/index.html" : "/");
        assert_int_equal(r.status, 200);
        assert_string_equal(r.body, want); /* the file in the tree, as built in */
        char *ct = header(&r, "Content-Type"), *cc = header(&r, "Cache-Control");
        char *csp = header(&r, "Content-Security-Policy");
        assert_string_equal(ct, "text/html; charset=utf-8");
        assert_string_equal(cc, "no-cache");
        assert_non_null(strstr(csp, "connect-src 'self'"));
        free(ct);
        free(cc);
        free(csp);
        http_resp_free(&r);
    }
    /* one file: nothing loaded from elsewhere */
    const char *external[] = {" src=", "href=\"http", "url(", "@import"};
    for (size_t i = 0; i < sizeof external / sizeof external[0]; i++) {
        if (strstr(want, external[i]))
            print_message("the page has '%s'\n", external[i]);
        assert_null(strstr(want, external[i]));
    }

    /* the API it calls stays guarded */
    struct http_resp r = http_get(&s, "/v1/models");
    free(http_check_error(&r, 401, NULL));
    http_resp_free(&r);
    const char *key[] = {"Authorization: Bearer webui-key", NULL};
    r                 = http_req(&s, "GET", "/v1/models", NULL, key);
    assert_int_equal(r.status, 200);
    http_resp_free(&r);

    r = http_req(&s, "POST", "/", "{}", NULL);
    free(http_check_error(&r, 405, NULL));
    char *allow = header(&r, "Allow");
    assert_string_equal(allow, "GET");
    free(allow);
    http_resp_free(&r);

    r = http_req(&s, "GET", "/metrics", NULL, key);
    assert_non_null(strstr(r.body, "hearth_requests_total{endpoint=\"/\",code=\"200\"} 2\n"));
    assert_non_null(strstr(r.body, "hearth_requests_total{endpoint=\"/\",code=\"405\"} 1\n"));
    http_resp_free(&r);
    free(want);
    srv_stop(&s);
}

static void test_no_webui(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    struct srv s;
    const char *extra[] = {"--no-webui", NULL};
    srv_start(&s, extra);
    const char *paths[] = {"/", "/index.html"};
    for (size_t i = 0; i < 2; i++) {
        struct http_resp r = http_get(&s, paths[i]);
        char *msg          = http_check_error(&r, 404, NULL);
        assert_non_null(strstr(msg, paths[i]));
        free(msg);
        http_resp_free(&r);
    }
    struct http_resp r = http_get(&s, "/v1/models");
    assert_int_equal(r.status, 200);
    http_resp_free(&r);
    r = http_get(&s, "/metrics");
    assert_non_null(strstr(r.body, "hearth_requests_total{endpoint=\"other\",code=\"404\"} 2\n"));
    assert_null(strstr(r.body, "hearth_requests_total{endpoint=\"/\","));
    http_resp_free(&r);
    srv_stop(&s);
}

static void test_chat_in_a_browser(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    if (!have_browser())
        skip();
    struct srv a, b;
    const char *keyed[] = {"--alias", "stories", "--api-key", "webui-key", NULL};
    const char *plain[] = {"--alias", "stories", NULL};
    srv_start(&a, keyed);
    srv_start_gated(&b, plain);
    char gate[600];
    snprintf(gate, sizeof gate, "%s/sched-gate", b.gate_dir);
    const char *env[] = {"HEARTH_WEBUI_URL",
                         a.base,
                         "HEARTH_WEBUI_KEY",
                         "webui-key",
                         "HEARTH_WEBUI_GATED_URL",
                         b.base,
                         "HEARTH_WEBUI_GATE",
                         gate,
                         "HEARTH_CHROMIUM",
                         CHROMIUM,
                         NULL};
    srv_node_test("webui.test.mjs", env);
    srv_stop(&b);
    srv_stop(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_page_is_served_without_the_key, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_no_webui, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_chat_in_a_browser, srv_kill_leftovers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
