/*
 * report.h: what an upstream says it is serving, read from its Prometheus
 * /metrics page: the requests it runs plus those it queues, under the names
 * hearth, vLLM, llama.cpp and SGLang export them. The page is untrusted
 * input (the fuzz target of prompt.c runs this too).
 */
#ifndef HEARTH_ROUTE_REPORT_H
#define HEARTH_ROUTE_REPORT_H

#include <stddef.h>
#include <stdint.h>

/*
 * Requests running plus queued per the page (len bytes), summed over every
 * sample of the names known (labels ignored), or -1 when the page has none
 * of them.
 */
int32_t route_report_parse(const char *text, size_t len);

#endif
