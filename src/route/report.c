/*
 * report.c: an upstream's own count of its requests (report.h).
 */
#include "route/report.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Gauges of requests running and of requests waiting, by server. */
/* clang-format off */
static const char *const names[] = {
    "hearth_slots_busy",
    "hearth_queue_depth", /* hearth */
    "vllm:num_requests_running",
    "vllm:num_requests_waiting", /* vLLM */
    "llamacpp:requests_processing",
    "llamacpp:requests_deferred", /* llama-server --metrics */
    "sglang:num_running_reqs",
    "sglang:num_queue_reqs", /* SGLang */
};
/* clang-format on */

int32_t route_report_parse(const char *text, size_t len)
{
    double sum  = 0;
    bool found  = false;
    size_t line = 0;
    while (line < len) {
        const char *s  = text + line;
        const char *nl = memchr(s, '\n', len - line);
        const size_t n = nl ? (size_t)(nl - s) : len - line;
        line += n + 1;
        if (!n || s[0] == '#')
            continue;
        size_t k = 0; /* the metric's name ends at '{' or a space */
        while (k < n && s[k] != '{' && s[k] != ' ')
            k++;
        bool known = false;
        for (size_t i = 0; i < sizeof names / sizeof names[0] && !known; i++)
            known = strlen(names[i]) == k && !memcmp(s, names[i], k);
        if (!known)
            continue;
        /* the value follows the labels (which may hold spaces inside quotes) */
        size_t v = k;
        if (v < n && s[v] == '{') {
            bool quoted = false;
            for (v++; v < n && (quoted || s[v] != '}'); v++)
                if (s[v] == '\\' && quoted)
                    v++;
                else if (s[v] == '"')
                    quoted = !quoted;
            v++;
        }
        char num[64];
        while (v < n && s[v] == ' ')
            v++;
        size_t m = 0;
        while (v + m < n && s[v + m] != ' ' && s[v + m] != '\r' && m < sizeof num - 1) {
            num[m] = s[v + m];
            m++;
        }
        num[m] = 0;
        char *end;
        const double x = strtod(num, &end);
        if (m && *end == 0 && isfinite(x) && x >= 0 && x < 1e9) {
            sum += x;
            found = true;
        }
    }
    if (!found)
        return -1;
    return sum > 1e9 ? 1000000000 : (int32_t)(sum + 0.5);
}
