/*
 * test_report.c: an upstream's own count of its requests, from the
 * /metrics pages hearth, vLLM, llama-server and SGLang write
 * (src/route/report.c): running plus queued, every sample of a name summed,
 * labels (with spaces and escaped quotes) skipped, comments and unknown
 * names ignored, -1 when the page says nothing of it.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <string.h>

#include <cmocka.h>

#include "route/report.h"

static int32_t parse(const char *s)
{
    return route_report_parse(s, strlen(s));
}

static void test_pages(void **state)
{
    (void)state;
    assert_int_equal(parse("# HELP hearth_slots_busy Slots.\n# TYPE hearth_slots_busy gauge\n"
                           "hearth_slots_busy 3\nhearth_slots 4\nhearth_queue_depth 5\n"),
                     8);
    assert_int_equal(
        parse("vllm:num_requests_running{model_name=\"Qwen 3 \\\"8B\\\"\",engine=\"0\"} 2.0\n"
              "vllm:num_requests_running{model_name=\"other\",engine=\"1\"} 1.0\n"
              "vllm:num_requests_waiting{model_name=\"Qwen 3 \\\"8B\\\"\",engine=\"0\"} 4.0\n"
              "vllm:num_requests_waiting_by_reason{reason=\"x\"} 99\n"),
        7);
    assert_int_equal(parse("llamacpp:requests_processing 1\nllamacpp:requests_deferred 0\n"), 1);
    assert_int_equal(parse("sglang:num_running_reqs{a=\"b\"} 6\r\nsglang:num_queue_reqs 2"), 8);
    /* nothing known, or nothing that is a number */
    assert_int_equal(parse("up 1\n# hearth_slots_busy 9\n"), -1);
    assert_int_equal(parse("hearth_slots_busy NaN\nhearth_queue_depth -3\n"), -1);
    assert_int_equal(parse("hearth_slots_busy"), -1);
    assert_int_equal(parse("hearth_slots_busy{unterminated=\"x 5\n"), -1);
    assert_int_equal(parse(""), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_pages)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
