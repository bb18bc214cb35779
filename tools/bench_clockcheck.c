/*
 * bench_clockcheck.c: `make bench-clockcheck`, the measurement the test
 * suite cannot make without depending on timing: the real `hearth bench`
 * binary, on its real clock, against the test fixture (tests/util/benchfix)
 * in realtime mode, which sends the first token 200 ms after a request and
 * then one every 20 ms. It prints what the bench measured beside what was
 * sent, and exits 1 when a median is more than 5% off (a loaded machine can
 * do that: rerun it before believing it).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "util/benchfix.h"
#include "util/testutil.h"

int main(void)
{
    struct benchfix *fx = benchfix_start();
    if (!fx) {
        fprintf(stderr, "bench-clockcheck: the fixture did not start\n");
        return 1;
    }
    benchfix_set_realtime(fx, true);
    benchfix_set_default(fx, &(struct benchfix_step){.n_tokens = 32, .ttft_ms = 200, .itl_ms = 20});
    char json[] = "/tmp/hearth-clockcheck-XXXXXX";
    int fd      = mkstemp(json);
    if (fd < 0) {
        perror("bench-clockcheck: mkstemp");
        return 1;
    }
    const char *argv[] = {
        HEARTH_BIN,     "bench", benchfix_url(fx), "--concurrency", "1,4", "--requests", "8",
        "--max-tokens", "32",    "--no-progress",  "--json",        json,  NULL};
    char *out = NULL, *err = NULL;
    int rc = tu_run(argv, NULL, &out, &err, 300);
    benchfix_stop(fx);
    printf("%s%s", out ? out : "", err ? err : "");
    FILE *f = fopen(json, "r");
    char buf[1 << 16];
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    buf[n]   = 0;
    if (f)
        fclose(f);
    remove(json);
    cJSON *cells = cJSON_Parse(buf);
    if (rc != 0 || cJSON_GetArraySize(cells) != 2) {
        fprintf(stderr, "bench-clockcheck: hearth bench exited %d without two cells\n", rc);
        return 1;
    }
    static const struct {
        const char *name;
        double sent;
    } want[] = {{"ttft_ms_p50", 200}, {"itl_ms_p50", 20}, {"e2e_ms_p50", 200 + 31 * 20}};
    int bad  = 0;
    printf("\n%-12s %-8s %8s %9s %7s\n", "figure", "cell", "sent", "measured", "error");
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
            const cJSON *c = cJSON_GetArrayItem(cells, k);
            double v       = cJSON_GetNumberValue(cJSON_GetObjectItem(c, want[i].name));
            double e       = (v - want[i].sent) / want[i].sent * 100;
            printf("%-12s c=%-6d %8.1f %9.2f %+6.2f%%\n", want[i].name,
                   (int)cJSON_GetNumberValue(cJSON_GetObjectItem(c, "concurrency")), want[i].sent,
                   v, e);
            bad += !(fabs(e) <= 5);
        }
    cJSON_Delete(cells);
    return bad ? 1 : 0;
}
