/*
 * test_deploy.c: the files of docs/deploy. The Kubernetes manifests against
 * a schema of what Kubernetes and the Gateway API Inference Extension
 * require, and against each other and the metric names a real hearth serve
 * exports (tests/e2e/deploy_check.py; kubectl's client-side dry run still
 * needs an API server, so it is not used); the systemd units through
 * `systemd-analyze verify`, which must say nothing.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "util/serveutil.h"
#include "util/testutil.h"

#define DEPLOY HEARTH_TOP "/docs/deploy"

static void test_kubernetes(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    const char *probe[] = {"/usr/bin/python3", "-c", "import yaml, jsonschema", NULL};
    if (tu_run(probe, NULL, NULL, NULL, 60) != 0) {
        print_message("skip: python3-yaml or python3-jsonschema is not installed\n");
        skip();
    }
    struct srv s;
    srv_start(&s, NULL);
    struct http_resp m = http_get(&s, "/metrics");
    assert_int_equal(m.status, 200);
    char path[600];
    snprintf(path, sizeof path, "%s/metrics.txt", s.dir);
    assert_int_equal(tu_write_file(path, m.body, strlen(m.body)), 0);
    http_resp_free(&m);
    const char *argv[] = {"/usr/bin/python3", HEARTH_TOP "/tests/e2e/deploy_check.py",
                          DEPLOY "/kubernetes", path, NULL};
    char *out = NULL, *err = NULL;
    const int rc = tu_run(argv, NULL, &out, &err, 60);
    if (rc != 0)
        print_message("%s%s\n", out, err);
    assert_int_equal(rc, 0);
    free(out), free(err);
    srv_stop(&s);
}

static void test_systemd(void **state)
{
    (void)state;
    if (access("/usr/bin/systemd-analyze", X_OK) != 0) {
        print_message("skip: systemd-analyze is not installed\n");
        skip();
    }
    /* the unit names the installed binary: verify a copy that names this build's */
    char *dir = tu_tmpdir(), *unit = tu_read_file(DEPLOY "/systemd/hearth.service", NULL);
    char *ready = tu_read_file(DEPLOY "/systemd/hearth-ready.service", NULL);
    assert_non_null(unit);
    assert_non_null(ready);
    const char *at = strstr(unit, "/usr/local/bin/hearth");
    assert_non_null(at);
    char *copy = malloc(strlen(unit) + strlen(tu_bin()) + 1);
    sprintf(copy, "%.*s%s%s", (int)(at - unit), unit, tu_bin(),
            at + strlen("/usr/local/bin/hearth"));
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/hearth.service", dir);
    snprintf(b, sizeof b, "%s/hearth-ready.service", dir);
    assert_int_equal(tu_write_file(a, copy, strlen(copy)), 0);
    assert_int_equal(tu_write_file(b, ready, strlen(ready)), 0);
    const char *argv[] = {"/usr/bin/systemd-analyze", "verify", a, b, NULL};
    char *out = NULL, *err = NULL;
    const int rc = tu_run(argv, NULL, &out, &err, 60);
    /* a directive it cannot parse is a warning with status 0: both must be clean */
    if (rc != 0 || *out || *err)
        print_message("systemd-analyze verify: rc %d\n%s%s\n", rc, out, err);
    assert_int_equal(rc, 0);
    assert_string_equal(err, "");
    free(out), free(err), free(copy), free(unit), free(ready);
    tu_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_kubernetes, srv_kill_leftovers),
        cmocka_unit_test(test_systemd),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
