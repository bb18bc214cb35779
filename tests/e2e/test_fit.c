/*
 * test_fit.c: `hearth fit` and the check `hearth serve` makes with the same
 * law before it loads. A damaged file gets the GGUF reader's message and
 * exit 1; --check exits 1 with the reason when a device is short and 0
 * when not; --json's figures add up; -c max on a host of a given size
 * (HEARTH_HOST_MEMORY, serve's test knob for the RAM free) is a context the
 * server starts with, while one block more is refused before it loads; and
 * a multi-device plan puts every layer somewhere, the output last, keeps
 * a floor free on every device, and runs a drafter on the host. hearth run
 * makes serve's check. The server's peak resident set is fit's total.
 * --runtime llama.cpp takes llama-server's flags as llama-server means them
 * (tests/unit/test_llamacpp.c holds its figures to llama.cpp's).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "gguf/gguf.h"
#include "util/serveutil.h"
#include "util/testutil.h"

#define MODEL "stories260K.gguf"

/* Runs hearth fit with args (NULL-terminated, at most 16); stdout and stderr malloc'd. */
static int fit(const char *const *args, char **out, char **errout)
{
    const char *argv[24] = {tu_bin(), "fit"};
    int n                = 2;
    for (int i = 0; args[i] && n < 22; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    return tu_run(argv, NULL, out, errout, 60);
}

static void test_damaged_file(void **state)
{
    TU_MODEL_OR_SKIP(path, MODEL);
    char *dir = tu_tmpdir(), cut[512];
    size_t len;
    char *whole = tu_read_file(path, &len);
    assert_non_null(whole);
    snprintf(cut, sizeof cut, "%s/cut.gguf", dir);
    assert_int_equal(tu_write_file(cut, whole, len / 3), 0);
    char *out, *err, *ierr;
    assert_int_equal(fit((const char *[]){cut, NULL}, &out, &err), 1);
    /* the reader's own sentence, as `hearth inspect` prints it */
    const char *iargv[] = {tu_bin(), "inspect", cut, NULL};
    assert_int_equal(tu_run(iargv, NULL, NULL, &ierr, 60), 1);
    const char *reason = strstr(ierr, ": ");
    assert_non_null(reason);
    assert_non_null(strstr(err, reason + 2));
    assert_non_null(strstr(err, "hearth fit: "));
    free(out), free(err), free(ierr), free(whole);
    tu_rmtree(dir);
    free(dir);
}

/* The JSON of a fit run that exits 0. */
static cJSON *fit_json(const char *const *args)
{
    char *out, *err;
    const int rc = fit(args, &out, &err);
    if (rc)
        print_message("hearth fit: %s\n", err);
    assert_int_equal(rc, 0);
    cJSON *j = cJSON_Parse(out);
    assert_non_null(j);
    free(out), free(err);
    return j;
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}

static void test_check_and_json(void **state)
{
    TU_MODEL_OR_SKIP(path, MODEL);
    char *out, *err;
    const char *small[] = {path, "-t", "1", "--device", "ram:1M", "--check", NULL};
    assert_int_equal(fit(small, &out, &err), 1);
    assert_non_null(strstr(err, "does not fit: ram would hold"));
    free(out), free(err);
    const char *unchecked[] = {path, "-t", "1", "--device", "ram:1M", NULL};
    assert_int_equal(fit(unchecked, &out, &err), 0);
    free(out), free(err);

    cJSON *j = fit_json((const char *[]){path, "-t", "1", "-c", "256", "-np", "2", "--device",
                                         "ram:1G", "--cache-ram", "0", "--check", "--json", NULL});
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "fits")));
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(j, "runtime")->valuestring, "hearth");
    assert_int_equal((int)num(j, "ctx_size"), 256);
    assert_int_equal((int)num(j, "parallel"), 2);
    const cJSON *d = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "devices"), 0);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(d, "name")->valuestring, "ram");
    const double total = num(d, "total_bytes");
    assert_true(num(d, "weights_bytes") > 0 && num(d, "kv_bytes") > 0);
    assert_true(total == num(d, "weights_bytes") + num(d, "kv_bytes") + num(d, "compute_bytes") +
                             num(d, "output_bytes") + num(d, "other_bytes"));
    assert_true(num(d, "free_bytes") == num(d, "capacity_bytes") - total);
    /* stories260K's 5 layers, all on the host */
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(d, "layers")), 5);
    /* K/V grows with the context, by whole blocks */
    cJSON *j2 = fit_json((const char *[]){path, "-t", "1", "-c", "512", "-np", "2", "--device",
                                          "ram:1G", "--cache-ram", "0", "--json", NULL});
    const cJSON *d2 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j2, "devices"), 0);
    assert_true(num(d2, "kv_bytes") == 2 * num(d, "kv_bytes"));
    cJSON_Delete(j), cJSON_Delete(j2);
}

static void test_ctx_max_is_what_serve_takes(void **state)
{
    TU_MODEL_OR_SKIP(path, MODEL);
    /* a host whose memory binds below the training context (2048) at 64 slots */
    const char *host = "22M";
    char dev[64];
    snprintf(dev, sizeof dev, "ram:%s", host);
    cJSON *j = fit_json((const char *[]){path, "-t", "1", "-np", "64", "-ub", "64", "--device", dev,
                                         "-c", "max", "--cache-ram", "0", "--json", NULL});
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "fits")));
    const int n = (int)num(j, "ctx_size");
    cJSON_Delete(j);
    assert_true(n > 0 && n < 2048 && n % 32 == 0);
    setenv("HEARTH_HOST_MEMORY", host, 1);
    char c_ok[16], c_more[16];
    snprintf(c_ok, sizeof c_ok, "%d", n);
    snprintf(c_more, sizeof c_more, "%d", n + 32);
    /* one block more is refused before the load, with the figures */
    const char *argv[] = {tu_bin(),      "serve", "-m", path,   "--port", "0",   "-t",
                          "1",           "-np",   "64", "-b",   "64",     "-ub", "64",
                          "--cache-ram", "0",     "-c", c_more, NULL};
    char *err;
    assert_int_equal(tu_run(argv, NULL, NULL, &err, 60), 1);
    assert_non_null(strstr(err, "do not fit"));
    assert_non_null(strstr(err, "hearth fit"));
    free(err);
    /* and the context fit found starts */
    struct srv s;
    char *log           = NULL;
    const char *extra[] = {"-np",         "64", "-b", "64", "-ub", "64",
                           "--cache-ram", "0",  "-c", c_ok, NULL};
    const bool up       = srv_start_try(&s, path, extra, &log);
    if (!up)
        print_message("%s\n", log);
    assert_true(up);
    srv_stop(&s);
    /* -c max in serve takes the same */
    const char *extra_max[] = {"-np",         "64", "-b", "64",  "-ub", "64",
                               "--cache-ram", "0",  "-c", "max", NULL};
    assert_true(srv_start_try(&s, path, extra_max, &log));
    char *slog = tu_read_file(s.log, NULL);
    char want[64];
    snprintf(want, sizeof want, "--ctx-size %d: the largest that fits", n);
    assert_non_null(strstr(slog, want));
    free(slog);
    srv_stop(&s);
    unsetenv("HEARTH_HOST_MEMORY");
}

/* The least free memory among the GPUs of a plan's JSON. */
static double gpu_min_free(const cJSON *devs)
{
    double m = 1e300;
    for (int i = 1; i < cJSON_GetArraySize(devs); i++) {
        const double f = num(cJSON_GetArrayItem(devs, i), "free_bytes");
        m              = f < m ? f : m;
    }
    return m;
}

static void test_devices_split(void **state)
{
    TU_MODEL_OR_SKIP(path, MODEL);
    /* unequal GPUs: every layer placed once, in order, the output where the last layer is;
     * --balance leaves the GPUs more free memory than the proportional split does here */
    const char *args[] = {path,        "-t",     "1",        "-c",      "256",
                          "--device",  "ram:1G", "--device", "gpu0:5M", "--device",
                          "gpu1:4.4M", "--json", NULL};
    double min_free[2];
    for (int balance = 0; balance < 2; balance++) {
        const char *a[16];
        int k = 0;
        for (; args[k]; k++)
            a[k] = args[k];
        if (balance)
            a[k++] = "--balance";
        a[k]     = NULL;
        cJSON *j = fit_json(a);
        assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "fits")));
        const cJSON *devs = cJSON_GetObjectItemCaseSensitive(j, "devices");
        assert_int_equal(cJSON_GetArraySize(devs), 3);
        int next = 0, outputs = 0;
        for (int i = 0; i < 3; i++) {
            const cJSON *d = cJSON_GetArrayItem(devs, i), *l;
            const bool out = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(d, "output"));
            cJSON_ArrayForEach(l, cJSON_GetObjectItemCaseSensitive(d, "layers"))
                assert_int_equal((int)l->valuedouble, next++);
            outputs += out;
            if (out)
                assert_int_equal(next, 5);
        }
        assert_int_equal(next, 5);
        assert_int_equal(outputs, 1);
        min_free[balance] = gpu_min_free(devs);
        cJSON_Delete(j);
    }
    assert_true(min_free[1] > min_free[0]); /* here the proportional split is not the best */
    /* a floor every device keeps: fewer layers on the GPUs, each GPU with the floor free */
    const double floor = 1 << 20;
    for (int balance = 0; balance < 2; balance++) {
        const char *a[20];
        int k = 0;
        for (; args[k]; k++)
            a[k] = args[k];
        a[k++] = "--floor";
        a[k++] = "1M";
        if (balance)
            a[k++] = "--balance";
        a[k]     = NULL;
        cJSON *j = fit_json(a);
        assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "fits")));
        const cJSON *devs = cJSON_GetObjectItemCaseSensitive(j, "devices");
        int on_gpus       = 0;
        for (int i = 0; i < 3; i++) {
            const cJSON *d = cJSON_GetArrayItem(devs, i);
            assert_true(num(d, "free_bytes") >= floor);
            if (i)
                on_gpus += cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(d, "layers"));
        }
        /* in proportion, all 5 leave gpu1 under 1 MiB, so some stay on the host; balanced,
         * all 5 keep it */
        if (balance)
            assert_int_equal(on_gpus, 5);
        else
            assert_true(on_gpus > 0 && on_gpus < 5);
        cJSON_Delete(j);
    }
    /* a drafter runs on the host: the host holds its weights and context, the GPUs the same */
    {
        const char *a[20];
        int k = 0;
        for (; args[k]; k++)
            a[k] = args[k];
        a[k]            = NULL;
        cJSON *plain    = fit_json(a);
        a[k++]          = "--model-draft";
        a[k++]          = path;
        a[k]            = NULL;
        cJSON *drafted  = fit_json(a);
        const cJSON *p0 = cJSON_GetObjectItemCaseSensitive(plain, "devices"),
                    *d0 = cJSON_GetObjectItemCaseSensitive(drafted, "devices");
        const cJSON *ph = cJSON_GetArrayItem(p0, 0), *dh = cJSON_GetArrayItem(d0, 0);
        /* stories260K drafting for itself: its every weight once more, on the host */
        assert_true(num(dh, "weights_bytes") - num(ph, "weights_bytes") >=
                    num(cJSON_GetArrayItem(p0, 1), "weights_bytes") +
                        num(cJSON_GetArrayItem(p0, 2), "weights_bytes"));
        assert_true(num(dh, "kv_bytes") > num(ph, "kv_bytes"));
        for (int i = 1; i < 3; i++)
            assert_true(num(cJSON_GetArrayItem(d0, i), "total_bytes") ==
                        num(cJSON_GetArrayItem(p0, i), "total_bytes"));
        cJSON_Delete(plain), cJSON_Delete(drafted);
    }
    /* a floor larger than a device: cannot fit, exit 1 with the figures */
    {
        char *out, *err;
        const char *a[] = {path,       "-t",      "1",        "-c",      "256",
                           "--device", "ram:1G",  "--device", "gpu0:5M", "--device",
                           "gpu1:4M",  "--floor", "5M",       "--check", NULL};
        assert_int_equal(fit(a, &out, &err), 1);
        assert_non_null(strstr(err, "does not fit: gpu0 would hold 2.8 MiB of its 5.0 MiB"));
        assert_non_null(strstr(err, "floor is 5.0 MiB"));
        free(out), free(err);
    }
    /* a configuration that cannot fit anywhere: exit 1 and the device short */
    char *out, *err;
    const char *none[] = {path,       "-t",      "1",       "--device", "ram:2M",
                          "--device", "gpu0:1M", "--check", NULL};
    assert_int_equal(fit(none, &out, &err), 1);
    assert_non_null(strstr(err, "does not fit"));
    free(out), free(err);
}

/* Options it cannot take are a usage error (exit 2) naming what was wrong, never a plan. */
static void test_bad_options(void **state)
{
    TU_MODEL_OR_SKIP(path, MODEL);
    static const struct {
        const char *opt, *val, *says;
    } cases[] = {
        {"--device", "ram", "NAME:BYTES"},          {"--device", ":8G", "NAME:BYTES"},
        {"--device", "ram:lots", "expects a size"}, {"-c", "most", "expects"},
        {"--floor", "-1", "expects a size"},        {"-np", "0", "expects"},
        {"--bogus", NULL, "unknown option"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *out, *err;
        const char *args[] = {path, cases[i].opt, cases[i].val, NULL};
        assert_int_equal(fit(args, &out, &err), 2);
        if (!strstr(err, cases[i].says))
            print_message("%s %s: %s\n", cases[i].opt, cases[i].val ? cases[i].val : "", err);
        assert_non_null(strstr(err, cases[i].says));
        assert_string_equal(out, "");
        free(out), free(err);
    }
    char *out, *err;
    const char *twice[] = {path, "--device", "ram:1G", "--device", "ram:2G", NULL};
    assert_int_equal(fit(twice, &out, &err), 2);
    assert_non_null(strstr(err, "given twice"));
    free(out), free(err);
}

/*
 * llama-server's meaning of the flags: -c is shared and rounded up to 256
 * cells a stream (512 over 4 slots makes 1024), -np absent is 4 slots on
 * one stream; the figures are test_llamacpp's table rows.
 */
static void test_llamacpp_runtime(void **state)
{
    TU_MODEL_OR_SKIP(path, "tiny-llama-spm-q8_0.gguf");
    cJSON *j =
        fit_json((const char *[]){path, "--runtime", "llama.cpp", "-c", "512", "-np", "4", "-ub",
                                  "128", "--cache-ram", "0", "--device", "ram:1G", "--json", NULL});
    const cJSON *d = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "devices"), 0);
    assert_string_equal(cJSON_GetObjectItem(j, "runtime")->valuestring, "llama.cpp");
    assert_int_equal((int)num(j, "ctx_size"), 1024);
    assert_int_equal((int)num(d, "kv_bytes"), 2097152);
    assert_int_equal((int)num(d, "output_bytes"), 8192);
    assert_int_equal((int)num(d, "compute_bytes"), 1772576);
    assert_int_equal((int)num(d, "weights_bytes"), 3630080);
    assert_int_equal((int)num(d, "other_bytes"), 0);
    cJSON_Delete(j);
    j = fit_json((const char *[]){path, "--runtime", "llama.cpp", "-c", "512", "-ub", "128",
                                  "--cache-ram", "0", "--json", NULL});
    d = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "devices"), 0);
    assert_int_equal((int)num(j, "ctx_size"), 512);
    assert_int_equal((int)num(j, "parallel"), 4);
    assert_int_equal((int)num(d, "kv_bytes"), 1048576);
    assert_int_equal((int)num(d, "compute_bytes"), 1838112);
    cJSON_Delete(j);
    /* llama-server's prompt cache counts as other: 8192 MiB unless told */
    j = fit_json((const char *[]){path, "--runtime", "llama.cpp", "-c", "512", "--device",
                                  "ram:64G", "--json", NULL});
    d = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "devices"), 0);
    assert_true(num(d, "other_bytes") == 8192.0 * (1 << 20));
    cJSON_Delete(j);

    /* -c max: the largest shared context in 256-cell steps a stream that keeps the floor */
    j = fit_json((const char *[]){path, "--runtime", "llama.cpp", "-c", "max", "-np", "2",
                                  "--cache-ram", "0", "--device", "ram:20M", "--json", NULL});
    const int max = (int)num(j, "ctx_size");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(j, "fits")));
    cJSON_Delete(j);
    assert_true(max > 512 && max < 8192 && max % 512 == 0);
    char c[16], *out, *err;
    snprintf(c, sizeof c, "%d", max);
    assert_int_equal(
        fit((const char *[]){path, "--runtime", "llama.cpp", "-c", c, "-np", "2", "--cache-ram",
                             "0", "--device", "ram:20M", "--check", NULL},
            &out, &err),
        0);
    free(out), free(err);
    snprintf(c, sizeof c, "%d", max + 512);
    assert_int_equal(
        fit((const char *[]){path, "--runtime", "llama.cpp", "-c", c, "-np", "2", "--cache-ram",
                             "0", "--device", "ram:20M", "--check", NULL},
            &out, &err),
        1);
    assert_non_null(strstr(err, "does not fit"));
    free(out), free(err);

    /* tu_model's answer is overwritten by its next call */
    char stories[512] = "stories260K.gguf", qwen3[512] = "tiny-qwen3-bpe-q8_0.gguf";
    if (tu_model(stories))
        snprintf(stories, sizeof stories, "%s", tu_model("stories260K.gguf"));
    if (tu_model(qwen3))
        snprintf(qwen3, sizeof qwen3, "%s", tu_model("tiny-qwen3-bpe-q8_0.gguf"));
    static const struct {
        const char *args[8];
        int rc;
        const char *says;
    } bad[] = {
        {{"-fa", "on"}, 2, "llama.cpp flag"},
        {{"--isa", "avx2"}, 2, "llama.cpp flag"},
        {{"--runtime", "vllm"}, 2, "hearth or llama.cpp"},
        {{"--runtime", "llama.cpp", "-ctk", "q6_k"}, 2, "-ctk takes"},
        {{"--runtime", "llama.cpp", "--isa", "sse"}, 2, "--isa takes"},
        {{"--runtime", "llama.cpp", "-fa", "maybe"}, 2, "on, off or auto"},
        {{"--runtime", "llama.cpp", "-ctv", "q8_0", "-fa", "off"}, 1, "flash attention"},
        {{"--runtime", "llama.cpp", "--device", "gpu0:8G"}, 1, "not modelled"},
        {{"-ctkd", "q8_0"}, 2, "llama.cpp flag"},
        {{"--runtime", "llama.cpp", "-ctvd", "q6_k"}, 2, "-ctvd takes"},
        /* stories260K's heads are 8 wide: llama.cpp refuses a q8_0 cache for it as a draft */
        {{"--runtime", "llama.cpp", "-md", "DRAFT", "-ctkd", "q8_0"}, 1, "not divide the heads' 8"},
        /* a draft of another vocabulary: serve refuses it at load, llama-server too */
        {{"-md", "QWEN3"}, 1, "must share the vocabulary"},
        {{"--runtime", "llama.cpp", "-md", "QWEN3"}, 1, "llama.cpp refuses this draft model"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *args[12] = {path};
        int n                = 1;
        for (int k = 0; bad[i].args[k]; k++)
            args[n++] = !strcmp(bad[i].args[k], "DRAFT")   ? stories
                        : !strcmp(bad[i].args[k], "QWEN3") ? qwen3
                                                           : bad[i].args[k];
        args[n] = NULL;
        assert_int_equal(fit(args, &out, &err), bad[i].rc);
        if (!strstr(err, bad[i].says))
            print_message("%s %s: %s\n", bad[i].args[0], bad[i].args[1], err);
        assert_non_null(strstr(err, bad[i].says));
        free(out), free(err);
    }
}

/*
 * hearth run makes the same check: a context the RAM cannot hold is refused
 * before the load; with no -c, a training context that does not fit falls
 * back to the largest that does (fit's -c max for one slot), and it runs.
 */
static void test_run_checks(void **state)
{
    TU_MODEL_OR_SKIP(path, MODEL);
    cJSON *j    = fit_json((const char *[]){path, "-np", "1", "-c", "max", "-t", "1", "--cache-ram",
                                            "0", "--device", "ram:9M", "--json", NULL});
    const int n = (int)num(j, "ctx_size");
    cJSON_Delete(j);
    assert_true(n > 32 && n < 2048); /* stories260K trained at 2048 */
    setenv("HEARTH_HOST_MEMORY", "9M", 1);
    const char *argv[] = {tu_bin(), "run", "-m",     path, "-p", "Once upon", "-n", "4",
                          "-t",     "1",   "--temp", "0",  NULL, NULL,        NULL};
    char *out, *err, want[64];
    assert_int_equal(tu_run(argv, NULL, &out, &err, 60), 0);
    snprintf(want, sizeof want, "hearth run: --ctx-size %d: the largest that fits", n);
    assert_non_null(strstr(err, want));
    assert_true(strlen(out) > 0);
    free(out), free(err);
    argv[12] = "-c";
    argv[13] = "2048";
    assert_int_equal(tu_run(argv, NULL, &out, &err, 60), 1);
    assert_non_null(
        strstr(err, "hearth run: a context of 2048 tokens does not fit: ram would hold"));
    assert_string_equal(out, "");
    free(out), free(err);
    unsetenv("HEARTH_HOST_MEMORY");
}

/* The server's peak resident set (VmHWM) in bytes, or 0. */
static double peak_rss(pid_t pid)
{
    char path[64], *st;
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    if (!(st = tu_read_file(path, NULL)))
        return 0;
    const char *h    = strstr(st, "VmHWM:");
    const double kib = h ? strtod(h + 6, NULL) : 0;
    free(st);
    return kib * 1024;
}

/* Tokens of text in the server's tokenizer, or -1. */
static int n_tokens(const struct srv *s, const char *text)
{
    cJSON *b = cJSON_CreateObject();
    cJSON_AddStringToObject(b, "content", text);
    char *body         = cJSON_PrintUnformatted(b);
    struct http_resp r = http_post(s, "/tokenize", body);
    cJSON *j           = r.status == 200 ? http_json(&r) : NULL;
    const cJSON *toks  = j ? jget(j, "tokens") : NULL;
    const int n        = toks ? cJSON_GetArraySize(toks) : -1;
    cJSON_Delete(j), cJSON_Delete(b), free(body), http_resp_free(&r);
    return n;
}

/*
 * What fit predicts is what the server holds: its peak resident set after a
 * request that fills one slot's context is within 2% (or 4 MiB) of fit's
 * total, on the model with the largest vocabulary (whose embedding rows,
 * tokenizer and per-slot arrays are the largest share fit estimates).
 */
static void test_rss_is_predicted(void **state)
{
    TU_MODEL_OR_SKIP(path, "tiny-qwen3-bpe-q8_0.gguf");
    if (TU_SANITIZED) {
        print_message("skip: a sanitizer's shadow memory is in the resident set\n");
        skip();
    }
    const int n_ctx          = 2048;
    const char *const opts[] = {"-c",  "2048", "-np", "4",           "-ub", "512", "-b",
                                "512", "-t",   "1",   "--cache-ram", "0",   NULL};
    /* serve's options less -b, which fit does not take (the micro-batch is the batch) */
    const char *args[] = {path, "-c", "2048",        "-np", "4",      "-ub", "512",
                          "-t", "1",  "--cache-ram", "0",   "--json", NULL};
    cJSON *j           = fit_json(args);
    const double predicted =
        num(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "devices"), 0), "total_bytes");
    cJSON_Delete(j);

    struct srv s;
    char *log     = NULL;
    const bool up = srv_start_try(&s, path, opts, &log);
    if (!up)
        print_message("%s\n", log ? log : "");
    assert_true(up);
    /* words enough for the context less the reply, by the server's own count */
    size_t cap = 64 * (size_t)n_ctx, len = 0;
    char *text = malloc(cap);
    assert_non_null(text);
    text[0]   = 0;
    int words = 0, n = 0;
    while (n < n_ctx - 48) {
        for (int w = 0; w < 64; w++, words++)
            len += (size_t)snprintf(text + len, cap - len, "%s%d ", words % 3 ? "river" : "stone",
                                    words * 7919 % 100000);
        n = n_tokens(&s, text);
        assert_true(n > 0);
    }
    while (n > n_ctx - 48) { /* back off word by word */
        char *sp = strrchr(text, ' ');
        *sp      = 0;
        sp       = strrchr(text, ' ');
        sp[1]    = 0;
        n        = n_tokens(&s, text);
    }
    cJSON *b = cJSON_CreateObject();
    cJSON_AddStringToObject(b, "prompt", text);
    cJSON_AddNumberToObject(b, "max_tokens", 32);
    cJSON_AddNumberToObject(b, "temperature", 0);
    char *body         = cJSON_PrintUnformatted(b);
    struct http_resp r = http_post(&s, "/v1/completions", body);
    assert_int_equal(r.status, 200);
    const double hwm = peak_rss(s.pid);
    srv_stop(&s);
    http_resp_free(&r), free(body), cJSON_Delete(b), free(text);
    const double tol = predicted * 0.02 > 4 << 20 ? predicted * 0.02 : 4 << 20;
    print_message("prompt %d tokens: peak RSS %.2f MiB, fit %.2f MiB (%+.2f MiB)\n", n,
                  hwm / (1 << 20), predicted / (1 << 20), (hwm - predicted) / (1 << 20));
    assert_true(hwm > 0);
    assert_true(hwm - predicted <= tol && predicted - hwm <= tol);
}

/* Bytes of every tensor in the GGUF file at path. */
static double tensor_bytes(const char *path)
{
    struct gguf_file *f = NULL;
    char err[256];
    assert_int_equal(gguf_open(path, &f, err, sizeof err), HEARTH_OK);
    double n = 0;
    for (int64_t i = 0; i < gguf_n_tensors(f); i++)
        n += (double)gguf_tensor(f, i)->size;
    gguf_close(f);
    return n;
}

/*
 * A block drafter (EAGLE-3, DFlash) runs on the host beside its target:
 * the host holds its weights (its file's tensors, mapped) and its buffers
 * (each layer's K/V of every slot's positions as f32, its pending
 * features, and the target rows it reads: one n_embd row per named layer
 * and micro-batch row), to the byte.
 */
static void test_block_drafters(void **state)
{
    static const struct {
        const char *target, *draft;
        double buffers; /* -np 2 -c 512 -ub 64: the shapes in ../shared/README.md */
    } cases[] = {
        /* one layer of 2 KV heads x 64; g per slot and batch row; layers 1, 2, 3 read */
        {"tiny-qwen3-bpe-q8_0.gguf", "tiny-eagle3-qwen3-bpe-q8_0.gguf",
         2.0 * 2 * 512 * 128 * 4 + (2 + 64) * 256 * 4 + 3 * 64 * 256 * 4},
        /* two layers of 2 KV heads x 64; layers 1 and 3 read */
        {"tiny-qwen35-bpe-q8_0.gguf", "tiny-dflash-qwen35-bpe-q8_0.gguf",
         2.0 * 2 * 2 * 512 * 128 * 4 + 2 * 64 * 256 * 4},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        TU_MODEL_OR_SKIP(target, cases[c].target);
        TU_MODEL_OR_SKIP(draft, cases[c].draft);
        /* a fixed host and no prefix cache: the figures cannot move between the two runs */
        const char *a[] = {target, "-t",     "1",  "-np",      "2",      "-c",
                           "512",  "-ub",    "64", "--device", "ram:4G", "--cache-ram",
                           "0",    "--json", NULL, NULL,       NULL};
        cJSON *plain    = fit_json(a);
        a[14]           = "--model-draft";
        a[15]           = draft;
        cJSON *drafted  = fit_json(a);
        const cJSON *ph = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(plain, "devices"), 0);
        const cJSON *dh =
            cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(drafted, "devices"), 0);
        print_message("%s: weights +%.0f, kv +%.0f bytes\n", cases[c].draft,
                      num(dh, "weights_bytes") - num(ph, "weights_bytes"),
                      num(dh, "kv_bytes") - num(ph, "kv_bytes"));
        assert_true(num(dh, "weights_bytes") - num(ph, "weights_bytes") == tensor_bytes(draft));
        assert_true(num(dh, "kv_bytes") - num(ph, "kv_bytes") == cases[c].buffers);
        cJSON_Delete(plain), cJSON_Delete(drafted);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_damaged_file, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_check_and_json, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_block_drafters, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_ctx_max_is_what_serve_takes, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_devices_split, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_bad_options, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_llamacpp_runtime, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_run_checks, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_rss_is_predicted, srv_kill_leftovers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
