/*
 * report.c: a run's cells as an aligned table, JSON and TSV, all three from
 * the one column list BENCH_COLUMNS (bench.h), so their names cannot drift
 * from each other or from docs/bench.md's table.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_int.h"
#include "util/errfmt.h"

#include <cjson/cJSON.h>

enum { K_s, K_i, K_f };
#define KIND_s K_s
#define KIND_i K_i
#define KIND_f K_f

struct col {
    const char *name;
    int kind;
};

/* clang-format off */
static const struct col cols[] = {
#define X(name, kind, expr) {#name, KIND_##kind},
    BENCH_COLUMNS(X)
#undef X
};
/* clang-format on */
#define N_COLS (int)(sizeof cols / sizeof cols[0])

/* The X-macro's expressions, by kind. */
static inline const char *s_value(const char *s, double *v)
{
    *v = NAN;
    return s;
}
static inline const char *i_value(long x, double *v)
{
    *v = (double)x;
    return NULL;
}
static inline const char *f_value(double x, double *v)
{
    *v = x;
    return NULL;
}

/* Column j of cell c: a string, or a number in *v (NaN: no value). */
static const char *value(const struct bench_cell *c, int j, double *v)
{
    int i = 0;
#define X(name, kind, expr)                                                                        \
    if (i++ == j)                                                                                  \
        return kind##_value(expr, v);
    BENCH_COLUMNS(X)
#undef X
    *v = NAN;
    return NULL;
}

/* A cell's value as text: "%ld", figures to 3 decimals (tsv) or fewer (table), NaN as none. */
static void format(const struct bench_cell *c, int j, bool table, char *out, size_t len)
{
    double v;
    const char *s = value(c, j, &v);
    if (s)
        snprintf(out, len, "%s", s);
    else if (isnan(v))
        snprintf(out, len, "%s", table ? "-" : "");
    else if (cols[j].kind == K_i)
        snprintf(out, len, "%ld", (long)v);
    else if (!table)
        snprintf(out, len, "%.3f", v);
    else
        snprintf(out, len, fabs(v) < 10 ? "%.2f" : "%.1f", v);
}

/* The table leaves out a column whose every cell is 0 or none, unless it is a core one. */
static bool shown(const struct bench_run *run, int j)
{
    static const char *const core[] = {"workload", "concurrency", "requests", "errors",
                                       "output_tokens"};
    for (size_t i = 0; i < sizeof core / sizeof *core; i++)
        if (!strcmp(cols[j].name, core[i]))
            return true;
    for (int k = 0; k < run->n_cells; k++) {
        double v;
        if (value(&run->cells[k], j, &v) || (!isnan(v) && v != 0))
            return true;
    }
    return false;
}

void bench_report_table(FILE *fp, const struct bench_run *run)
{
    int width[N_COLS];
    char buf[64];
    for (int j = 0; j < N_COLS; j++) {
        width[j] = (int)strlen(cols[j].name);
        for (int k = 0; k < run->n_cells; k++) {
            format(&run->cells[k], j, true, buf, sizeof buf);
            if ((int)strlen(buf) > width[j])
                width[j] = (int)strlen(buf);
        }
    }
    fprintf(fp, "model %s; %s\n", run->model, run->prompt_note);
    for (int j = 0, first = 1; j < N_COLS; j++)
        if (shown(run, j)) {
            fprintf(fp, "%s%*s", first ? "" : "  ", j ? width[j] : -width[j], cols[j].name);
            first = 0;
        }
    fputc('\n', fp);
    for (int k = 0; k < run->n_cells; k++) {
        for (int j = 0, first = 1; j < N_COLS; j++)
            if (shown(run, j)) {
                format(&run->cells[k], j, true, buf, sizeof buf);
                fprintf(fp, "%s%*s", first ? "" : "  ", j ? width[j] : -width[j], buf);
                first = 0;
            }
        fputc('\n', fp);
    }
    for (int k = 0; k < run->n_cells; k++) {
        const struct bench_cell *c = &run->cells[k];
        if (c->errors_http) {
            fprintf(fp, "cell %d: HTTP errors:", k + 1);
            for (int i = 0; i < 8 && c->http_count[i]; i++)
                fprintf(fp, " %d x%d", c->http_status[i], c->http_count[i]);
            fputc('\n', fp);
        }
        if (c->errors)
            fprintf(fp, "cell %d: first error: %s\n", k + 1, c->first_error);
        if (c->early_stops)
            fprintf(fp,
                    "cell %d: %ld replies stopped before max_tokens: the server ignored "
                    "ignore_eos\n",
                    k + 1, c->early_stops);
        if (c->usage_missing)
            fprintf(fp,
                    "cell %d: some replies carried no usage: their tokens were counted as the "
                    "stream's content events\n",
                    k + 1);
        if (c->interrupted)
            fprintf(fp, "cell %d: interrupted: figures of the requests that finished\n", k + 1);
    }
}

static bool write_file(const char *path, const char *text, char *err, size_t err_len)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return fail(false, err, err_len, "bench: cannot write %s: %m", path);
    bool ok = fputs(text, f) >= 0;
    ok      = (fclose(f) == 0) && ok;
    if (!ok)
        return fail(false, err, err_len, "bench: writing %s failed: %m", path);
    return true;
}

bool bench_report_json(const char *path, const struct bench_run *run, char *err, size_t err_len)
{
    cJSON *a = cJSON_CreateArray();
    for (int k = 0; k < run->n_cells; k++) {
        cJSON *o = cJSON_CreateObject();
        for (int j = 0; j < N_COLS; j++) {
            double v;
            const char *s = value(&run->cells[k], j, &v);
            if (s)
                cJSON_AddStringToObject(o, cols[j].name, s);
            else if (isnan(v))
                cJSON_AddNullToObject(o, cols[j].name);
            else
                cJSON_AddNumberToObject(o, cols[j].name, v);
        }
        cJSON_AddItemToArray(a, o);
    }
    char *text = cJSON_Print(a);
    cJSON_Delete(a);
    if (!text)
        return fail(false, err, err_len, "bench: out of memory writing %s", path);
    struct strbuf b = {0};
    strbuf_add(&b, text);
    strbuf_add(&b, "\n");
    free(text);
    bool ok = write_file(path, bench_str(&b), err, err_len);
    strbuf_free(&b);
    return ok;
}

bool bench_report_tsv(const char *path, const struct bench_run *run, char *err, size_t err_len)
{
    struct strbuf b = {0};
    char buf[64];
    for (int j = 0; j < N_COLS; j++) {
        strbuf_add(&b, j ? "\t" : "");
        strbuf_add(&b, cols[j].name);
    }
    strbuf_add(&b, "\n");
    for (int k = 0; k < run->n_cells; k++) {
        for (int j = 0; j < N_COLS; j++) {
            format(&run->cells[k], j, false, buf, sizeof buf);
            strbuf_add(&b, j ? "\t" : "");
            strbuf_add(&b, buf);
        }
        strbuf_add(&b, "\n");
    }
    bool ok = write_file(path, bench_str(&b), err, err_len);
    strbuf_free(&b);
    return ok;
}
