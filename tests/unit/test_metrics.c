/*
 * test_metrics.c: src/serve/metrics.c. The page has HELP and TYPE for every
 * metric of the list, cumulative histogram buckets, labelled request
 * counters; and `promtool check metrics` accepts it when promtool is
 * installed (Debian package prometheus).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/testutil.h"
#include "serve/metrics.h"

static char *render_sample(size_t *len)
{
    static struct metrics m;
    metrics_init(&m);
    metrics_count_request(&m, EP_CHAT, 200);
    metrics_count_request(&m, EP_CHAT, 200);
    metrics_count_request(&m, EP_CHAT, 400);
    metrics_count_request(&m, EP_OTHER, 404);
    metrics_count_request(&m, EP_HEALTH, 42); /* out of range: counted as 500 */
    metrics_observe(&m, M_TTFT, 0.003);
    metrics_observe(&m, M_TTFT, 0.2);
    metrics_observe(&m, M_TTFT, 1000);
    metrics_observe(&m, M_TTFT, -1);      /* ignored */
    metrics_observe(&m, M_SLOTS_BUSY, 1); /* not a histogram: ignored */
    metrics_observe(&m, M_ITL, 0.0101);
    double v[METRIC_COUNT] = {0};
    v[M_PROMPT_TOKENS]     = 120;
    v[M_GENERATED_TOKENS]  = 64;
    v[M_PREFILL_TPS]       = 1234.5;
    v[M_SLOTS]             = 4;
    v[M_READY]             = 1;
    return metrics_render(&m, v, len);
}

static void test_page_shape(void **state)
{
    (void)state;
    size_t len = 0;
    char *page = render_sample(&len);
    assert_non_null(page);
    assert_int_equal(strlen(page), len);
    assert_non_null(strstr(page, "# HELP hearth_requests_total "));
    assert_non_null(strstr(page, "# TYPE hearth_requests_total counter\n"));
    assert_non_null(
        strstr(page, "hearth_requests_total{endpoint=\"/v1/chat/completions\",code=\"200\"} 2\n"));
    assert_non_null(
        strstr(page, "hearth_requests_total{endpoint=\"/v1/chat/completions\",code=\"400\"} 1\n"));
    assert_non_null(strstr(page, "hearth_requests_total{endpoint=\"other\",code=\"404\"} 1\n"));
    assert_non_null(strstr(page, "hearth_requests_total{endpoint=\"/health\",code=\"500\"} 1\n"));
    assert_non_null(strstr(page, "# TYPE hearth_time_to_first_token_seconds histogram\n"));
    /* cumulative: 0.003 is under 0.005; 0.2 under 0.25; 1000 only in +Inf */
    assert_non_null(strstr(page, "hearth_time_to_first_token_seconds_bucket{le=\"0.005\"} 1\n"));
    assert_non_null(strstr(page, "hearth_time_to_first_token_seconds_bucket{le=\"0.1\"} 1\n"));
    assert_non_null(strstr(page, "hearth_time_to_first_token_seconds_bucket{le=\"0.25\"} 2\n"));
    assert_non_null(strstr(page, "hearth_time_to_first_token_seconds_bucket{le=\"60\"} 2\n"));
    assert_non_null(strstr(page, "hearth_time_to_first_token_seconds_bucket{le=\"+Inf\"} 3\n"));
    assert_non_null(strstr(page, "hearth_time_to_first_token_seconds_count 3\n"));
    assert_non_null(strstr(page, "hearth_time_to_first_token_seconds_sum 1000.203\n"));
    assert_non_null(strstr(page, "hearth_inter_token_latency_seconds_bucket{le=\"0.01\"} 0\n"));
    assert_non_null(strstr(page, "hearth_inter_token_latency_seconds_bucket{le=\"0.025\"} 1\n"));
    assert_non_null(strstr(page, "hearth_prompt_tokens_total 120\n"));
    assert_non_null(strstr(page, "hearth_prefill_tokens_per_second 1234.5\n"));
    assert_non_null(strstr(page, "hearth_slots 4\n"));
    assert_non_null(strstr(page, "hearth_slots_busy 0\n"));
    /* every metric of the list has its HELP and TYPE once */
    int n_help = 0, n_type = 0;
    for (const char *p = page; (p = strstr(p, "# HELP ")); p++)
        n_help++;
    for (const char *p = page; (p = strstr(p, "# TYPE ")); p++)
        n_type++;
    assert_int_equal(n_help, METRIC_COUNT);
    assert_int_equal(n_type, METRIC_COUNT);
    /* counters end in _total, nothing else does */
    for (const char *p = page; (p = strstr(p, "# TYPE ")); p++) {
        char name[128], type[32];
        assert_int_equal(sscanf(p, "# TYPE %127s %31s", name, type), 2);
        size_t n       = strlen(name);
        bool has_total = n > 6 && !strcmp(name + n - 6, "_total");
        assert_true(!strncmp(name, "hearth_", 7));
        assert_int_equal(has_total, !strcmp(type, "counter"));
        if (!strcmp(type, "histogram"))
            assert_true(n > 8 && !strcmp(name + n - 8, "_seconds"));
    }
    free(page);
}

static void test_promtool_accepts(void **state)
{
    (void)state;
    const char *promtool = access("/usr/bin/promtool", X_OK) == 0 ? "/usr/bin/promtool" : NULL;
    if (!promtool) {
        print_message("skip: promtool not installed (apt-get install prometheus)\n");
        skip();
    }
    char *page = render_sample(NULL);
    assert_non_null(page);
    const char *argv[] = {promtool, "check", "metrics", NULL};
    char *out = NULL, *err = NULL;
    int rc = tu_run(argv, page, &out, &err, 60);
    if (rc != 0)
        print_message("promtool rc %d\nstdout: %s\nstderr: %s\n", rc, out, err);
    assert_int_equal(rc, 0);
    free(out);
    free(err);
    free(page);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_page_shape),
        cmocka_unit_test(test_promtool_accepts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
