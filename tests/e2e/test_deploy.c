/*
 * test_deploy.c: the files of docs/deploy, checked against each other and
 * against the /metrics page of a real hearth serve (tests/e2e/deploy_check.py):
 *
 * - the Kubernetes manifests against a schema of what Kubernetes and the
 *   Gateway API Inference Extension require, and the metric names the
 *   endpoint picker reads (kubectl's client-side dry run still needs an API
 *   server, so it is not used);
 * - the systemd units through `systemd-analyze verify`, which must say nothing;
 * - the Prometheus alert rules through `promtool check rules` and their unit
 *   tests through `promtool test rules`, and their series against /metrics;
 * - the Grafana dashboard's structure, its series, and its queries parsed by
 *   promtool as recording rules;
 * - the Containerfile and the Quadlet unit against each other, the unit
 *   through Podman's generator where Podman has one (4.4 and later); and,
 *   where podman is installed, the image built and run on the tiny model
 *   until its /health answers 200 (HEARTH_CONTAINER_BASE picks the base
 *   image, a local Debian 12 where the registry cannot be reached).
 *
 * A tool that is not installed skips its test with a message.
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

#define DEPLOY       HEARTH_TOP "/docs/deploy"
#define CHECK        HEARTH_TOP "/tests/e2e/deploy_check.py"
#define PYTHON       "/usr/bin/python3"
#define RULES        DEPLOY "/prometheus/hearth-alerts.yml"
#define RULES_TESTS  DEPLOY "/prometheus/hearth-alerts.test.yml"
#define QUADLET_GEN  "/usr/lib/systemd/system-generators/podman-system-generator"
#define PODMAN_IMAGE "localhost/hearth-e2e:test"
#define DEFAULT_BASE "docker.io/library/debian:12" /* the Containerfile's ARG BASE */

/* ---------------------------------------------------------------- helpers --- */

/* The path of program name on $PATH, in buf; NULL when it is on none of them. */
static const char *which(const char *name, char *buf, size_t len)
{
    const char *p = getenv("PATH");
    if (!p || !*p)
        p = "/usr/bin:/bin";
    for (;;) {
        const char *end = strchr(p, ':');
        int n           = end ? (int)(end - p) : (int)strlen(p);
        snprintf(buf, len, "%.*s/%s", n, n ? p : ".", name);
        if (access(buf, X_OK) == 0)
            return buf;
        if (!end)
            return NULL;
        p = end + 1;
    }
}

/*
 * Runs argv; fails the test, printing the command's output, unless it exits 0.
 * Returns its stdout (malloc'd).
 */
static char *run_ok(const char *const argv[], int timeout_s)
{
    char *out = NULL, *err = NULL;
    const int rc = tu_run(argv, NULL, &out, &err, timeout_s);
    if (rc != 0) {
        print_message("%s", argv[0]);
        for (int i = 1; argv[i]; i++)
            print_message(" %s", argv[i]);
        print_message(": exit status %d\n%s%s\n", rc, out ? out : "", err ? err : "");
    }
    assert_int_equal(rc, 0);
    free(err);
    return out;
}

/* Skips the test with a message unless PyYAML and jsonschema import. */
static void need_python_yaml(void)
{
    const char *probe[] = {PYTHON, "-c", "import yaml, jsonschema", NULL};
    if (tu_run(probe, NULL, NULL, NULL, 60) != 0) {
        print_message("skip: python3-yaml or python3-jsonschema is not installed\n");
        skip();
    }
}

/* promtool's path in buf, or skips the test with a message. */
static const char *need_promtool(char *buf, size_t len)
{
    if (!which("promtool", buf, len)) {
        print_message("skip: promtool is not installed (Debian: prometheus)\n");
        skip();
    }
    return buf;
}

static char *metrics_dir; /* the /metrics page's directory, removed by the group teardown */

/*
 * The path of a file holding the /metrics page of a real hearth serve (on the
 * tiny model), started once for all the tests that compare names with it.
 */
static const char *metrics_file(void)
{
    static char path[600];
    if (*path)
        return path;
    SRV_NEED_CURL_AND_MODEL();
    struct srv s;
    srv_start(&s, NULL);
    struct http_resp m = http_get(&s, "/metrics");
    assert_int_equal(m.status, 200);
    metrics_dir = tu_tmpdir();
    char p[600];
    snprintf(p, sizeof p, "%s/metrics.txt", metrics_dir);
    assert_int_equal(tu_write_file(p, m.body, strlen(m.body)), 0);
    http_resp_free(&m);
    srv_stop(&s);
    memcpy(path, p, sizeof path);
    return path;
}

static int group_teardown(void **state)
{
    (void)state;
    if (metrics_dir) {
        tu_rmtree(metrics_dir);
        free(metrics_dir);
        metrics_dir = NULL;
    }
    return 0;
}

/* ------------------------------------------------------------- kubernetes --- */

static void test_kubernetes(void **state)
{
    (void)state;
    need_python_yaml();
    const char *metrics = metrics_file();
    const char *argv[]  = {PYTHON, CHECK, "kubernetes", DEPLOY "/kubernetes", metrics, NULL};
    free(run_ok(argv, 60));
}

/* ---------------------------------------------------------------- systemd --- */

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

/* ------------------------------------------------------------- prometheus --- */

/* The rules parse, and their unit tests (each alert firing and held back) pass. */
static void test_alert_rules(void **state)
{
    (void)state;
    char promtool[512];
    need_promtool(promtool, sizeof promtool);
    const char *check[] = {promtool, "check", "rules", RULES, NULL};
    free(run_ok(check, 60));
    const char *test[] = {promtool, "test", "rules", RULES_TESTS, NULL};
    free(run_ok(test, 120));
}

/* The rules' series and their tests' input series are those hearth serve exports. */
static void test_alert_series(void **state)
{
    (void)state;
    need_python_yaml();
    const char *metrics = metrics_file();
    const char *argv[]  = {PYTHON, CHECK, "rules", RULES, RULES_TESTS, metrics, NULL};
    free(run_ok(argv, 60));
}

/* ---------------------------------------------------------------- grafana --- */

static void test_grafana(void **state)
{
    (void)state;
    const char *metrics = metrics_file();
    char *dir           = tu_tmpdir();
    char rules[600];
    snprintf(rules, sizeof rules, "%s/grafana-queries.yml", dir);
    const char *argv[] = {PYTHON,  CHECK, "grafana", DEPLOY "/grafana/hearth.json",
                          metrics, rules, NULL};
    free(run_ok(argv, 60));
    char promtool[512];
    if (which("promtool", promtool, sizeof promtool)) {
        const char *check[] = {promtool, "check", "rules", rules, NULL};
        free(run_ok(check, 60));
    } else {
        print_message("promtool is not installed: the queries' PromQL is not parsed\n");
    }
    tu_rmtree(dir);
    free(dir);
}

/* -------------------------------------------------------------- container --- */

/* The Containerfile and the Quadlet unit agree: port, health check, volume, model. */
static void test_container_files(void **state)
{
    (void)state;
    const char *argv[] = {PYTHON, CHECK, "container", DEPLOY "/container", NULL};
    free(run_ok(argv, 60));
}

/* Podman's own Quadlet generator turns the unit into a service without complaint. */
static void test_quadlet_generator(void **state)
{
    (void)state;
    if (access(QUADLET_GEN, X_OK) != 0) {
        print_message("skip: %s is not installed (Podman 4.4 or later)\n", QUADLET_GEN);
        skip();
    }
    char *dir = tu_tmpdir(), *unit = tu_read_file(DEPLOY "/container/hearth.container", NULL);
    assert_non_null(unit);
    char path[600];
    snprintf(path, sizeof path, "%s/hearth.container", dir);
    assert_int_equal(tu_write_file(path, unit, strlen(unit)), 0);
    const char *argv[] = {QUADLET_GEN, "--dryrun", NULL};
    char *out = NULL, *err = NULL;
    setenv("QUADLET_UNIT_DIRS", dir, 1);
    const int rc = tu_run(argv, NULL, &out, &err, 60);
    unsetenv("QUADLET_UNIT_DIRS");
    if (rc != 0 || !strstr(out, "ExecStart=") || strstr(err, "nsupported"))
        print_message("%s --dryrun: rc %d\n%s%s\n", QUADLET_GEN, rc, out, err);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "ExecStart="));
    assert_null(strstr(err, "nsupported"));
    free(out), free(err), free(unit);
    tu_rmtree(dir);
    free(dir);
}

static char podman_path[512];
static char podman_name[64]; /* the test's container while it exists */

static int podman_teardown(void **state)
{
    if (*podman_name) {
        const char *rm[] = {podman_path, "rm", "-f", podman_name, NULL};
        tu_run(rm, NULL, NULL, NULL, 120);
        *podman_name = 0;
    }
    return srv_kill_leftovers(state);
}

/*
 * The image builds from this checkout, runs the tiny model from a mounted
 * file as a user other than root, answers /health with 200 on its published
 * port, and its own HEALTHCHECK passes.
 */
static void test_podman(void **state)
{
    (void)state;
    if (!which("podman", podman_path, sizeof podman_path)) {
        print_message("skip: podman is not installed\n");
        skip();
    }
    SRV_NEED_CURL_AND_MODEL();
    char model[4096], mount[4200], base[600];
    assert_non_null(realpath(model_path_, model));
    snprintf(mount, sizeof mount, "%s:/models/" SRV_MODEL ":ro", model);
    const char *base_env = getenv("HEARTH_CONTAINER_BASE");
    snprintf(base, sizeof base, "BASE=%s", base_env ? base_env : "");
    if (!base_env) {
        /* a registry out of reach is this machine's, not the Containerfile's */
        const char *exists[] = {podman_path, "image", "exists", DEFAULT_BASE, NULL};
        const char *pull[]   = {podman_path, "pull", "-q", DEFAULT_BASE, NULL};
        if (tu_run(exists, NULL, NULL, NULL, 60) != 0 && tu_run(pull, NULL, NULL, NULL, 600) != 0) {
            print_message("skip: podman cannot pull %s; set HEARTH_CONTAINER_BASE to a local "
                          "Debian 12 image\n",
                          DEFAULT_BASE);
            skip();
        }
    }
    const char *build[16] = {podman_path,    "build",
                             "--format",     "docker",
                             "--ignorefile", DEPLOY "/container/containerignore",
                             "-f",           DEPLOY "/container/Containerfile",
                             "-t",           PODMAN_IMAGE};
    int n                 = 10;
    if (base_env) {
        build[n++] = "--build-arg";
        build[n++] = base;
    }
    build[n++] = HEARTH_TOP;
    build[n]   = NULL;
    print_message("podman build (%s)\n", base_env ? base : "the Containerfile's base");
    free(run_ok(build, 3600));

    snprintf(podman_name, sizeof podman_name, "hearth-e2e-%d", (int)getpid());
    const char *run[] = {
        podman_path, "run", "-d",         "--name", podman_name,          "-p", "127.0.0.1::8080",
        "-v",        mount, PODMAN_IMAGE, "-m",     "/models/" SRV_MODEL, "-t", "1",
        NULL};
    /*
     * Not tu_run: its pipes' write ends reach podman's conmon, which outlives
     * `podman run -d` and would hold them open; wait for podman itself.
     */
    char *dir = tu_tmpdir(), log[600];
    snprintf(log, sizeof log, "%s/run.log", dir);
    const int rc = srv_wait_pid(srv_spawn(run, log), 120);
    if (rc != 0) {
        char *text = srv_slurp(log);
        print_message("podman run: exit status %d\n%s\n", rc, text);
        free(text);
    }
    assert_int_equal(rc, 0);
    tu_rmtree(dir);
    free(dir);
    const char *port_argv[] = {podman_path, "port", podman_name, "8080", NULL};
    char *port_out          = run_ok(port_argv, 60);
    const char *colon       = strrchr(port_out, ':');
    assert_non_null(colon);
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/health", atoi(colon + 1));
    free(port_out);

    /* the model loads in well under a second; the bound is for a loaded machine */
    const char *curl[] = {SRV_CURL,       "-s",         "-o", "/dev/null", "-w",
                          "%{http_code}", "--max-time", "5",  url,         NULL};
    bool ready         = false;
    for (int i = 0; i < 480 && !ready; i++) {
        char *code = NULL;
        tu_run(curl, NULL, &code, NULL, 30);
        ready = code && strcmp(code, "200") == 0;
        free(code);
        if (!ready)
            srv_sleep_ms(250);
    }
    if (!ready) {
        const char *logs[] = {podman_path, "logs", podman_name, NULL};
        char *out = NULL, *err = NULL;
        tu_run(logs, NULL, &out, &err, 60);
        print_message("%s did not answer 200 in two minutes; the container's log:\n%s%s\n", url,
                      out ? out : "", err ? err : "");
        free(out), free(err);
    }
    assert_true(ready);

    const char *health[] = {podman_path, "healthcheck", "run", podman_name, NULL};
    free(run_ok(health, 60));
    const char *uid[] = {podman_path, "exec", podman_name, "id", "-u", NULL};
    char *uid_out     = run_ok(uid, 60);
    assert_int_not_equal(atoi(uid_out), 0);
    free(uid_out);

    const char *rm[] = {podman_path, "rm", "-f", "-t", "10", podman_name, NULL};
    free(run_ok(rm, 120));
    *podman_name      = 0;
    const char *rmi[] = {podman_path, "rmi", PODMAN_IMAGE, NULL};
    free(run_ok(rmi, 120));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_kubernetes, srv_kill_leftovers),
        cmocka_unit_test(test_systemd),
        cmocka_unit_test(test_alert_rules),
        cmocka_unit_test_teardown(test_alert_series, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_grafana, srv_kill_leftovers),
        cmocka_unit_test(test_container_files),
        cmocka_unit_test(test_quadlet_generator),
        cmocka_unit_test_teardown(test_podman, podman_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, group_teardown);
}
