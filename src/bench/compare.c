/*
 * compare.c: `hearth bench --compare`, the lossless check. The same prompts
 * at temperature 0 go to every endpoint; each answer is compared with the
 * first endpoint's, byte for byte, and a difference is shown where it starts.
 * What should not change a greedy text (speculation, a quantized cache that
 * claims to be exact, a router) is judged by this.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_int.h"
#include "util/errfmt.h"
#include "util/utf8.h"

#include <cjson/cJSON.h>

/*
 * Prints s[from..to) quoted: valid UTF-8 as it is, control characters, quotes
 * and bytes that are not UTF-8 escaped, '...' where the text goes on; from and
 * to are moved off the middle of a character.
 */
static void show(FILE *fp, const char *s, size_t len, size_t from, size_t to)
{
    if (to > len)
        to = len;
    while (from > 0 && ((unsigned char)s[from] & 0xC0) == 0x80)
        from--;
    while (to < len && ((unsigned char)s[to] & 0xC0) == 0x80)
        to++;
    fputs(from ? "\"..." : "\"", fp);
    for (size_t i = from; i < to;) {
        unsigned char ch = (unsigned char)s[i];
        uint32_t cp;
        size_t n = utf8_decode(s + i, to - i, &cp);
        if (ch == '\n')
            fputs("\\n", fp);
        else if (ch == '"' || ch == '\\')
            fprintf(fp, "\\%c", ch);
        else if (ch < 0x20 || ch == 0x7f || !n)
            fprintf(fp, "\\x%02x", ch);
        else
            fwrite(s + i, 1, n, fp);
        i += n ? n : 1;
    }
    fputs(to < len ? "...\"" : "\"", fp);
}

/* The streamed event (counted from 1) whose text holds byte at, or the count + 1 past the end. */
static int event_at(const struct bench_reply *r, size_t at)
{
    int k = 0;
    while (k < r->n_arrivals && r->text_ends[k] <= at)
        k++;
    return k + 1;
}

int bench_compare(const struct bench_compare_opts *co, FILE *fp, char *err, size_t err_len)
{
    char **prompts = NULL;
    int n_prompts  = wl_load_prompts(co->prompts_file, &prompts, err, err_len);
    if (n_prompts < 0)
        return 2;
    int n = co->n_targets;
    struct bench_opts o[8];
    char models[8][256];
    int status = 0;
    for (int t = 0; t < n; t++) {
        bench_opts_default(&o[t]);
        o[t].target     = co->targets[t];
        o[t].api_key    = co->api_key;
        o[t].model      = co->model;
        o[t].max_tokens = co->max_tokens;
        o[t].ignore_eos = co->ignore_eos;
        o[t].timeout_s  = co->timeout_s;
        o[t].stop_fd    = co->stop_fd;
        char e[300];
        if (!bench_model(&o[t], models[t], sizeof models[t], e, sizeof e)) {
            fprintf(fp, "endpoint %d: %s\n", t + 1, e);
            status = 1;
        } else {
            fprintf(fp, "endpoint %d: http://%s%s, model %s\n", t + 1, o[t].target.hostport,
                    o[t].target.prefix, models[t]);
        }
    }
    int identical = 0, differ = 0, failed = 0;
    for (int p = 0; p < n_prompts && !status; p++) {
        struct bench_reply rep[8];
        struct bench_req req = {.prompt = prompts[p]};
        bool ok              = true;
        for (int t = 0; t < n; t++) {
            bench_request(&o[t], models[t], &req, &rep[t], NULL);
            if (rep[t].outcome == HTTPC_STOPPED) {
                for (int u = 0; u <= t; u++)
                    bench_reply_free(&rep[u]);
                status = 1;
                fprintf(fp, "stopped\n");
                goto out;
            }
            if (!rep[t].ok) {
                fprintf(fp, "prompt %d: endpoint %d failed: %s\n", p + 1, t + 1, rep[t].err);
                ok = false;
            }
        }
        if (!ok) {
            failed++;
        } else {
            const char *a = rep[0].text.s ? rep[0].text.s : "";
            size_t la     = rep[0].text.len;
            bool same     = true;
            for (int t = 1; t < n; t++) {
                const char *b = rep[t].text.s ? rep[t].text.s : "";
                size_t lb     = rep[t].text.len;
                if (la == lb && !memcmp(a, b, la))
                    continue;
                size_t at = 0;
                while (at < la && at < lb && a[at] == b[at])
                    at++;
                if (same)
                    fprintf(fp, "prompt %d: differ: ", p + 1);
                else
                    fprintf(fp, "  ");
                same        = false;
                size_t from = at > 30 ? at - 30 : 0;
                fprintf(fp,
                        "endpoint %d parts from endpoint 1 at byte %zu (token %d of its reply, "
                        "token %d of endpoint 1's; lengths %zu and %zu bytes)\n",
                        t + 1, at, event_at(&rep[t], at), event_at(&rep[0], at), lb, la);
                fprintf(fp, "  endpoint 1: ");
                show(fp, a, la, from, at + 40);
                fprintf(fp, "\n  endpoint %d: ", t + 1);
                show(fp, b, lb, from, at + 40);
                fputc('\n', fp);
            }
            if (same) {
                identical++;
                fprintf(fp, "prompt %d: identical (%zu bytes)\n", p + 1, la);
            } else {
                differ++;
            }
        }
        for (int t = 0; t < n; t++)
            bench_reply_free(&rep[t]);
    }
    if (!status) {
        fprintf(fp, "%d prompts: %d identical, %d differ, %d failed\n", n_prompts, identical,
                differ, failed);
        status = differ || failed ? 1 : 0;
    }
out:
    for (int p = 0; p < n_prompts; p++)
        free(prompts[p]);
    free(prompts);
    return status;
}
