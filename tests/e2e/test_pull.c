/*
 * test_pull.c: `hearth pull` and run's -hf against a fake Hugging Face Hub
 * (tests/e2e/fake_hub.py: the Hub's file list and resolve/redirect, ranges,
 * and on request a cut midway, a flipped byte, a gated repository, pages,
 * a size it lies about). The right quant is picked, all parts of a split
 * model come, a cut download resumes with a range and a partial file whose
 * end no longer matches is started again, a corrupted file is refused and
 * removed, a model in the cache is used with no request, offline included,
 * and every refusal is one line and exit 1 with nothing half-written left.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>
#include <curl/curl.h>

#include "util/serveutil.h"
#include "util/testutil.h"

#define Q4KM "tiny-llama-spm-q4_k_m.gguf"
#define Q8   "tiny-llama-spm-q8_0.gguf"

static struct {
    pid_t pid;
    int port;
    char url[64];
    char *root;  /* the fake Hub's repositories */
    char *cache; /* HEARTH_CACHE, fresh for each test */
} hub;

/* ------------------------------------------------------------ fake Hub --- */

static int copy_file(const char *from, const char *to)
{
    size_t n;
    char *data   = tu_read_file(from, &n);
    const int rc = data ? tu_write_file(to, data, n) : -1;
    free(data);
    return rc;
}

static void mkdir_p(const char *path)
{
    char d[1024];
    snprintf(d, sizeof d, "%s", path);
    for (char *p = d + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(d, 0755);
            *p = '/';
        }
    mkdir(d, 0755);
}

static void put(const char *rel, const char *model, size_t random_bytes)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", hub.root, rel);
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = 0;
    mkdir_p(dir);
    if (model) {
        assert_int_equal(copy_file(model, path), 0);
    } else {
        char *b = malloc(random_bytes);
        assert_non_null(b);
        for (size_t i = 0; i < random_bytes; i++)
            b[i] = (char)(i * 2654435761u >> 13);
        memcpy(b, rel, strlen(rel) < random_bytes ? strlen(rel) : random_bytes);
        assert_int_equal(tu_write_file(path, b, random_bytes), 0);
        free(b);
    }
}

struct grow {
    char *p;
    size_t n;
};

static size_t on_body(char *p, size_t size, size_t nitems, void *ud)
{
    struct grow *g = ud;
    const size_t n = size * nitems;
    g->p           = realloc(g->p, g->n + n + 1);
    memcpy(g->p + g->n, p, n);
    g->n += n;
    g->p[g->n] = 0;
    return n;
}

/* GET (body NULL) or POST body to the fake Hub; the reply, malloc'd. */
static char *hub_http(const char *path, const char *body)
{
    char url[256];
    snprintf(url, sizeof url, "%s%s", hub.url, path);
    CURL *c       = curl_easy_init();
    struct grow g = {0};
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &g);
    if (body)
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    assert_int_equal(curl_easy_perform(c), CURLE_OK);
    curl_easy_cleanup(c);
    return g.p ? g.p : strdup("");
}

static void control(const char *json)
{
    free(hub_http("/_control", json));
}

/* The requests the Hub got (a JSON array of {path, query, range, auth}). */
static cJSON *hub_log(void)
{
    char *s   = hub_http("/_log", NULL);
    cJSON *js = cJSON_Parse(s);
    free(s);
    assert_true(cJSON_IsArray(js));
    return js;
}

static int log_count(void)
{
    cJSON *js   = hub_log();
    const int n = cJSON_GetArraySize(js);
    cJSON_Delete(js);
    return n;
}

static int setup(void **state)
{
    (void)state;
    const char *q4 = tu_model(Q4KM), *q8 = tu_model(Q8);
    if (!q4 || !q8 || access("/usr/bin/python3", X_OK))
        return 0; /* each test skips, saying why */
    hub.root = tu_tmpdir();
    put("org/tiny-GGUF/" Q4KM, q4, 0);
    put("org/tiny-GGUF/" Q8, q8, 0);
    put("org/tiny-GGUF/tiny-llama-spm-IQ4_XS.gguf", NULL, 3000);
    put("org/tiny-GGUF/mmproj-tiny-llama-Q4_K_M.gguf", NULL, 2000);
    put("org/tiny-GGUF/README.md", NULL, 100);
    put("org/q8only/" Q8, q8, 0);
    for (int i = 1; i <= 3; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "org/split/Q4_K_M/big-Q4_K_M-%05d-of-00003.gguf", i);
        put(rel, NULL, 40000 + 1000 * (size_t)i);
    }
    put("org/split/big-Q8_0.gguf", NULL, 5000);
    put("org/broken/half-Q4_K_M-00001-of-00002.gguf", NULL, 1000);
    put("org/gated/" Q8, q8, 0);
    put("org/changing/c-Q8_0.gguf", NULL, 9000);
    int out[2];
    assert_int_equal(pipe(out), 0);
    hub.pid = fork();
    if (hub.pid == 0) {
        dup2(out[1], 1);
        close(out[0]), close(out[1]);
        execl("/usr/bin/python3", "python3", HEARTH_TOP "/tests/e2e/fake_hub.py", hub.root,
              (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    FILE *f = fdopen(out[0], "r");
    assert_int_equal(fscanf(f, "port %d", &hub.port), 1);
    fclose(f);
    snprintf(hub.url, sizeof hub.url, "http://127.0.0.1:%d", hub.port);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (hub.pid > 0) {
        kill(hub.pid, SIGTERM);
        waitpid(hub.pid, NULL, 0);
    }
    if (hub.root)
        tu_rmtree(hub.root), free(hub.root);
    curl_global_cleanup();
    return 0;
}

/* Each test: a fresh cache, the Hub as it was set up, no token. */
static int fresh(void **state)
{
    (void)state;
    if (!hub.pid)
        return 0;
    hub.cache = tu_tmpdir();
    setenv("HEARTH_CACHE", hub.cache, 1);
    setenv("HF_ENDPOINT", hub.url, 1);
    unsetenv("HF_TOKEN");
    unsetenv("HF_HUB_OFFLINE");
    control("{\"cut\":{},\"corrupt\":[],\"gated\":{},\"page\":0,\"size\":{},\"hold\":{},"
            "\"link_host\":\"\",\"gone\":[],\"release\":true}");
    return 0;
}

static int done(void **state)
{
    (void)state;
    if (hub.cache)
        tu_rmtree(hub.cache), free(hub.cache), hub.cache = NULL;
    return 0;
}

/* clang-format off */
#define NEED_HUB()                                                                                 \
    do {                                                                                           \
        if (!hub.pid) {                                                                            \
            print_message("skip: needs /usr/bin/python3 and the tiny-llama q4_k_m and q8_0 "       \
                          "models\n");                                                             \
            skip();                                                                                \
        }                                                                                          \
    } while (0)
/* clang-format on */

/* ---------------------------------------------------------------- runs --- */

struct run {
    int rc;
    char *out, *err;
};

static struct run pull(const char *spec, const char *flag)
{
    const char *argv[] = {tu_bin(), "pull", spec, flag, NULL};
    struct run r       = {0};
    r.rc               = tu_run(argv, NULL, &r.out, &r.err, 120);
    return r;
}

static void run_free(struct run *r)
{
    free(r->out), free(r->err);
}

/* One line on stderr, exit 1, and the line says want. */
static void assert_refused(struct run *r, const char *want)
{
    if (r->rc != 1 || !strstr(r->err, want))
        print_message("rc %d, stderr: %s\n", r->rc, r->err);
    assert_int_equal(r->rc, 1);
    assert_non_null(strstr(r->err, want));
    assert_string_equal(r->out, "");
}

static char *cache_path(const char *rel)
{
    static char p[1024];
    snprintf(p, sizeof p, "%s/%s", hub.cache, rel);
    return p;
}

static void assert_same_file(const char *a, const char *b)
{
    size_t na, nb;
    char *da = tu_read_file(a, &na), *db = tu_read_file(b, &nb);
    assert_non_null(da);
    assert_non_null(db);
    assert_int_equal(na, nb);
    assert_memory_equal(da, db, na);
    free(da), free(db);
}

/* The names in dir (not . and ..) that contain part, counted. */
static int count_named(const char *dir, const char *part)
{
    DIR *d = opendir(dir);
    int n  = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strstr(e->d_name, part))
            n++;
    if (d)
        closedir(d);
    return n;
}

static char *hub_file(const char *rel)
{
    static char p[1024];
    snprintf(p, sizeof p, "%s/%s", hub.root, rel);
    return p;
}

/* --------------------------------------------------------------- tests --- */

static void test_pick_quant(void **state)
{
    (void)state;
    NEED_HUB();
    /* no quant: Q4_K_M, not the projector that also says Q4_K_M */
    struct run r = pull("org/tiny-GGUF", NULL);
    assert_int_equal(r.rc, 0);
    char want[1100];
    snprintf(want, sizeof want, "%s\n", cache_path("org/tiny-GGUF/" Q4KM));
    assert_string_equal(r.out, want);
    assert_same_file(cache_path("org/tiny-GGUF/" Q4KM), hub_file("org/tiny-GGUF/" Q4KM));
    assert_non_null(strstr(r.err, "100%")); /* the progress, to the end */
    run_free(&r);
    /* a quant in any case; a file by name */
    r = pull("org/tiny-GGUF:q8_0", NULL);
    assert_int_equal(r.rc, 0);
    snprintf(want, sizeof want, "%s\n", cache_path("org/tiny-GGUF/" Q8));
    assert_string_equal(r.out, want);
    run_free(&r);
    r = pull("org/tiny-GGUF:IQ4_XS", NULL);
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "tiny-llama-spm-IQ4_XS.gguf"));
    run_free(&r);
    /* Q4_0 is not IQ4_0's or Q4_0_4's: none here, and the quants there are named */
    r = pull("org/tiny-GGUF:Q4_0", NULL);
    assert_refused(&r, "has no GGUF file for quant Q4_0; it has ");
    assert_non_null(strstr(r.err, "Q4_K_M"));
    assert_non_null(strstr(r.err, "Q8_0"));
    assert_non_null(strstr(r.err, "IQ4_XS"));
    run_free(&r);
    /* no Q4_K_M: Q8_0 */
    r = pull("org/q8only", NULL);
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "org/q8only/" Q8));
    run_free(&r);
    r = pull("org/tiny-GGUF/nope.gguf", NULL);
    assert_refused(&r, "has no file 'nope.gguf'");
    run_free(&r);
    /* a spec that cannot name a file is a usage error (2), before any request */
    r = pull("org/tiny-GGUF/../x.gguf", NULL);
    assert_int_equal(r.rc, 2);
    assert_non_null(strstr(r.err, "hearth pull: "));
    run_free(&r);
    r = pull("tiny-GGUF", NULL);
    assert_int_equal(r.rc, 2);
    run_free(&r);
}

static void test_cache_and_offline(void **state)
{
    (void)state;
    NEED_HUB();
    struct run r = pull("org/tiny-GGUF:Q8_0", "--offline");
    assert_refused(&r, "is not in the cache");
    run_free(&r);
    const int before = log_count();
    r                = pull("org/tiny-GGUF:Q8_0", NULL);
    assert_int_equal(r.rc, 0);
    run_free(&r);
    assert_true(log_count() > before);
    /* in the cache: no request, online or not, by quant or by name */
    const int cached = log_count();
    r                = pull("org/tiny-GGUF:Q8_0", NULL);
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.err, "from the cache"));
    run_free(&r);
    r = pull("org/tiny-GGUF/" Q8, "--offline");
    assert_int_equal(r.rc, 0);
    run_free(&r);
    setenv("HF_HUB_OFFLINE", "1", 1);
    r = pull("org/tiny-GGUF:Q8_0", NULL);
    assert_int_equal(r.rc, 0);
    run_free(&r);
    /* a quant the cache's file list has but the cache not */
    r = pull("org/tiny-GGUF:Q4_K_M", NULL);
    assert_refused(&r, "--offline forbids downloading it");
    run_free(&r);
    unsetenv("HF_HUB_OFFLINE");
    assert_int_equal(log_count(), cached);

    /* run -hf: the same tokens as run -m on the file */
    const char *a[] = {tu_bin(),    "run",    "-hf",  "org/tiny-GGUF:Q8_0",
                       "--offline", "-p",     "Once", "-n",
                       "12",        "--temp", "0",    NULL};
    const char *b[] = {tu_bin(), "run", "-m",     tu_model(Q8), "-p", "Once",
                       "-n",     "12",  "--temp", "0",          NULL};
    char *oa = NULL, *ob = NULL;
    assert_int_equal(tu_run(a, NULL, &oa, NULL, 120), 0);
    assert_int_equal(tu_run(b, NULL, &ob, NULL, 120), 0);
    assert_true(strlen(oa) > 4);
    assert_string_equal(oa, ob);
    free(oa), free(ob);
    /* serve -hf: the cached file, named after it */
    const char *extra[] = {"-hf", "org/tiny-GGUF:Q8_0", "--offline", NULL};
    struct srv s;
    char *slog = NULL;
    if (!srv_start_try(&s, NULL, extra, &slog))
        fail_msg("serve -hf did not start: %s", slog);
    struct http_resp m = http_get(&s, "/v1/models");
    assert_int_equal(m.status, 200);
    assert_non_null(strstr(m.body, "\"tiny-llama-spm-q8_0\""));
    http_resp_free(&m);
    /* the pull ran in a child: the server maps neither libcurl nor libcrypto */
    char maps_path[64];
    snprintf(maps_path, sizeof maps_path, "/proc/%d/maps", (int)s.pid);
    char *maps = tu_read_file(maps_path, NULL);
    assert_non_null(maps);
    assert_non_null(strstr(maps, "libevent")); /* the server's own map */
    assert_null(strstr(maps, "libcurl"));
    assert_null(strstr(maps, "libcrypto"));
    free(maps);
    srv_stop(&s);
    assert_int_equal(log_count(), cached);
}

/* The requests since the first-th whose path starts with prefix. */
static int requests_to(int first, const char *prefix)
{
    cJSON *log = hub_log();
    int n      = 0;
    for (int i = first; i < cJSON_GetArraySize(log); i++)
        n += !strncmp(cJSON_GetObjectItem(cJSON_GetArrayItem(log, i), "path")->valuestring, prefix,
                      strlen(prefix));
    cJSON_Delete(log);
    return n;
}

/* The downloads (requests to the CDN) since the first-th with Range header range: "" for none,
 * NULL for any. */
static int cdn_requests(int first, const char *range)
{
    cJSON *log = hub_log();
    int n      = 0;
    for (int i = first; i < cJSON_GetArraySize(log); i++) {
        cJSON *e = cJSON_GetArrayItem(log, i);
        n += !strncmp(cJSON_GetObjectItem(e, "path")->valuestring, "/cdn/", 5) &&
             (!range || !strcmp(cJSON_GetObjectItem(e, "range")->valuestring, range));
    }
    cJSON_Delete(log);
    return n;
}

static void test_refresh(void **state)
{
    (void)state;
    NEED_HUB();
    struct run r = pull("org/changing", NULL);
    assert_int_equal(r.rc, 0);
    run_free(&r);
    /* a new upload of the same size: the cache does not see it, a refresh does */
    size_t n;
    char *before = tu_read_file(hub_file("org/changing/c-Q8_0.gguf"), &n), *after = malloc(n);
    assert_non_null(before);
    for (size_t i = 0; i < n; i++)
        after[i] = (char)(before[i] ^ 0x5a);
    assert_int_equal(tu_write_file(hub_file("org/changing/c-Q8_0.gguf"), after, n), 0);
    int first = log_count();
    r         = pull("org/changing", NULL);
    assert_int_equal(r.rc, 0);
    run_free(&r);
    assert_int_equal(log_count(), first);
    size_t got_n;
    char *got = tu_read_file(cache_path("org/changing/c-Q8_0.gguf"), &got_n);
    assert_memory_equal(got, before, n);
    free(got);
    /* a refresh whose download fails leaves the old file, still known as the old one */
    control("{\"cut\":{\"c-Q8_0.gguf\":[4000,99]}}");
    r = pull("org/changing", "--refresh");
    assert_refused(&r, "the download was cut at");
    run_free(&r);
    control("{\"cut\":{}}");
    got = tu_read_file(cache_path("org/changing/c-Q8_0.gguf"), &got_n);
    assert_memory_equal(got, before, n);
    free(got);
    first = log_count();
    r     = pull("org/changing", NULL);
    assert_int_equal(r.rc, 0);
    run_free(&r);
    assert_int_equal(log_count(), first);
    /* so the next refresh still downloads the new one (resuming the partial file) */
    r = pull("org/changing", "--refresh");
    assert_int_equal(r.rc, 0);
    run_free(&r);
    assert_int_equal(requests_to(first, "/cdn/"), 1);
    assert_same_file(cache_path("org/changing/c-Q8_0.gguf"), hub_file("org/changing/c-Q8_0.gguf"));
    /* up to date: the file list is asked for, no file */
    first = log_count();
    r     = pull("org/changing", "--refresh");
    assert_int_equal(r.rc, 0);
    run_free(&r);
    assert_int_equal(requests_to(first, "/api/"), 1);
    assert_int_equal(requests_to(first, "/cdn/"), 0);
    const char *both[] = {tu_bin(), "pull", "org/changing", "--refresh", "--offline", NULL};
    assert_int_equal(tu_run(both, NULL, NULL, NULL, 30), 2);
    /* as it was, for the next run of the suite's setup */
    assert_int_equal(tu_write_file(hub_file("org/changing/c-Q8_0.gguf"), before, n), 0);
    free(before), free(after);
}

/* Starts argv with stdout and stderr into files; its pid. */
static pid_t spawn_to(const char *const argv[], const char *out, const char *err)
{
    const pid_t pid = fork();
    if (pid == 0) {
        const int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        const int e = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (o < 0 || e < 0)
            _exit(127);
        dup2(o, 1), dup2(e, 2);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    return pid;
}

/* Waits until the file at path contains want (a guard of two minutes fails the test). */
static void wait_for_text(const char *path, const char *want)
{
    for (int i = 0; i < 12000; i++) {
        char *s       = tu_read_file(path, NULL);
        const bool in = s && strstr(s, want);
        free(s);
        if (in)
            return;
        usleep(10000);
    }
    fail_msg("'%s' never showed '%s'", path, want);
}

static void test_two_pulls_at_once(void **state)
{
    (void)state;
    NEED_HUB();
    /* the first pull is held midway by the Hub; the second waits for it, then finds the file */
    control("{\"hold\":{\"" Q8 "\":200000}}");
    const int first    = log_count();
    const char *argv[] = {tu_bin(), "pull", "org/tiny-GGUF:Q8_0", NULL};
    char out1[1100], err1[1100], out2[1100], err2[1100];
    snprintf(out1, sizeof out1, "%s/out1", hub.cache);
    snprintf(err1, sizeof err1, "%s/err1", hub.cache);
    snprintf(out2, sizeof out2, "%s/out2", hub.cache);
    snprintf(err2, sizeof err2, "%s/err2", hub.cache);
    const pid_t a = spawn_to(argv, out1, err1);
    for (int i = 0; i < 12000; i++) {
        char *st        = hub_http("/_state", NULL);
        const bool held = strstr(st, Q8) != NULL;
        free(st);
        if (held)
            break;
        assert_true(i < 11999);
        usleep(10000);
    }
    const pid_t b = spawn_to(argv, out2, err2);
    wait_for_text(err2, "waiting for another hearth downloading it");
    control("{\"release\":true}");
    int sa, sb;
    assert_int_equal(waitpid(a, &sa, 0), a);
    assert_int_equal(waitpid(b, &sb, 0), b);
    assert_true(WIFEXITED(sa) && WEXITSTATUS(sa) == 0);
    assert_true(WIFEXITED(sb) && WEXITSTATUS(sb) == 0);
    char *o1 = tu_read_file(out1, NULL), *o2 = tu_read_file(out2, NULL);
    assert_string_equal(o1, o2);
    assert_non_null(strstr(o1, Q8));
    free(o1), free(o2);
    assert_same_file(cache_path("org/tiny-GGUF/" Q8), hub_file("org/tiny-GGUF/" Q8));
    assert_int_equal(requests_to(first, "/cdn/"), 1);
    assert_int_equal(count_named(cache_path("org/tiny-GGUF"), ".part-"), 0);
}

static void test_resume(void **state)
{
    (void)state;
    NEED_HUB();
    /* cut once at 300000 bytes: the same run asks for the rest, 64 KiB before the cut */
    control("{\"cut\":{\"" Q8 "\":[300000,1]}}");
    int first    = log_count();
    struct run r = pull("org/tiny-GGUF:Q8_0", NULL);
    assert_int_equal(r.rc, 0);
    run_free(&r);
    assert_same_file(cache_path("org/tiny-GGUF/" Q8), hub_file("org/tiny-GGUF/" Q8));
    /* the whole file asked for, then the rest from 64 KiB before the cut */
    assert_int_equal(cdn_requests(first, NULL), 2);
    assert_int_equal(cdn_requests(first, ""), 1);
    assert_int_equal(cdn_requests(first, "bytes=234464-"), 1);

    /* a cut every time: the run stops, the partial file stays, nothing is in place */
    control("{\"cut\":{\"" Q4KM "\":[500000,99]}}");
    r = pull("org/tiny-GGUF:Q4_K_M", NULL);
    assert_refused(&r, "the download was cut at");
    assert_non_null(strstr(r.err, "run the same command again to resume it"));
    run_free(&r);
    const char *dir = cache_path("org/tiny-GGUF");
    assert_int_equal(access(cache_path("org/tiny-GGUF/" Q4KM), F_OK), -1);
    assert_int_equal(count_named(cache_path("org/tiny-GGUF"), ".part-"), 1);
    (void)dir;
    /* the next run resumes from it */
    control("{\"cut\":{}}");
    first = log_count();
    r     = pull("org/tiny-GGUF:Q4_K_M", NULL);
    assert_int_equal(r.rc, 0);
    run_free(&r);
    assert_same_file(cache_path("org/tiny-GGUF/" Q4KM), hub_file("org/tiny-GGUF/" Q4KM));
    assert_int_equal(count_named(cache_path("org/tiny-GGUF"), ".part-"), 0);
    assert_int_equal(cdn_requests(first, NULL), 1);
    assert_int_equal(cdn_requests(first, "bytes=434464-"), 1);
}

static void test_resume_damaged_tail(void **state)
{
    (void)state;
    NEED_HUB();
    control("{\"cut\":{\"" Q8 "\":[400000,99]}}");
    struct run r = pull("org/tiny-GGUF:Q8_0", NULL);
    assert_int_equal(r.rc, 1);
    run_free(&r);
    /* damage the partial file's last byte, as a crash mid-write could */
    DIR *d          = opendir(cache_path("org/tiny-GGUF"));
    char part[1400] = "";
    for (struct dirent *e; (e = readdir(d));)
        if (strstr(e->d_name, ".part-"))
            snprintf(part, sizeof part, "%s/%s", cache_path("org/tiny-GGUF"), e->d_name);
    closedir(d);
    assert_true(part[0]);
    FILE *f = fopen(part, "r+b");
    assert_non_null(f);
    fseek(f, -1, SEEK_END);
    const int c = fgetc(f);
    fseek(f, -1, SEEK_END);
    fputc(c ^ 0x55, f);
    fclose(f);
    control("{\"cut\":{}}");
    const int first = log_count();
    r               = pull("org/tiny-GGUF:Q8_0", NULL);
    assert_int_equal(r.rc, 0);
    run_free(&r);
    assert_same_file(cache_path("org/tiny-GGUF/" Q8), hub_file("org/tiny-GGUF/" Q8));
    /* a range that found the difference, then the whole file again */
    assert_int_equal(cdn_requests(first, NULL), 2);
    assert_int_equal(cdn_requests(first, ""), 1);
}

static void test_corrupt(void **state)
{
    (void)state;
    NEED_HUB();
    control("{\"corrupt\":[\"" Q8 "\"]}");
    struct run r = pull("org/tiny-GGUF:Q8_0", NULL);
    assert_refused(&r, "checksum mismatch");
    run_free(&r);
    /* nothing in place, no partial file kept */
    assert_int_equal(count_named(cache_path("org/tiny-GGUF"), "q8_0"), 0);
    /* a run against a good Hub then succeeds */
    control("{\"corrupt\":[]}");
    r = pull("org/tiny-GGUF:Q8_0", NULL);
    assert_int_equal(r.rc, 0);
    run_free(&r);
    assert_same_file(cache_path("org/tiny-GGUF/" Q8), hub_file("org/tiny-GGUF/" Q8));
}

static void test_split(void **state)
{
    (void)state;
    NEED_HUB();
    struct run r = pull("org/split:Q4_K_M", NULL);
    assert_int_equal(r.rc, 0);
    char want[1100];
    snprintf(want, sizeof want, "%s\n",
             cache_path("org/split/Q4_K_M/big-Q4_K_M-00001-of-00003.gguf"));
    assert_string_equal(r.out, want);
    run_free(&r);
    for (int i = 1; i <= 3; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "org/split/Q4_K_M/big-Q4_K_M-%05d-of-00003.gguf", i);
        char c[1100];
        snprintf(c, sizeof c, "%s", cache_path(rel));
        assert_same_file(c, hub_file(rel));
    }
    /* naming part 2 is naming the model: all of it */
    r = pull("org/split/Q4_K_M/big-Q4_K_M-00002-of-00003.gguf", "--offline");
    assert_int_equal(r.rc, 0);
    assert_string_equal(r.out, want);
    run_free(&r);
    /* a part missing from the repository */
    r = pull("org/broken", NULL);
    assert_refused(&r, "lacks part 2");
    run_free(&r);
    /* run cannot load a split model: it says so before anything else */
    const char *argv[] = {tu_bin(), "run", "-hf", "org/split:Q4_K_M", "-p", "x", NULL};
    char *err          = NULL;
    assert_int_equal(tu_run(argv, NULL, NULL, &err, 60), 1);
    assert_non_null(strstr(err, "split in 3 files"));
    free(err);
}

static void test_gated(void **state)
{
    (void)state;
    NEED_HUB();
    control("{\"gated\":{\"org/gated\":\"hf_sesame\"}}");
    struct run r = pull("org/gated", NULL);
    assert_refused(&r, "is gated or private (HTTP 401); set HF_TOKEN");
    run_free(&r);
    setenv("HF_TOKEN", "hf_wrong", 1);
    r = pull("org/gated", NULL);
    assert_refused(&r, "HF_TOKEN gives no access to org/gated (HTTP 403)");
    run_free(&r);
    assert_int_equal(count_named(cache_path("org/gated"), ".gguf"), 0);
    setenv("HF_TOKEN", "hf_sesame", 1);
    const int first = log_count();
    r               = pull("org/gated", NULL);
    assert_int_equal(r.rc, 0);
    run_free(&r);
    cJSON *log = hub_log();
    assert_true(cJSON_GetArraySize(log) > first);
    for (int i = first; i < cJSON_GetArraySize(log); i++)
        assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(log, i), "auth")->valuestring,
                            "Bearer hf_sesame");
    cJSON_Delete(log);
}

static void test_refusals(void **state)
{
    (void)state;
    NEED_HUB();
    struct run r = pull("org/nothing-here", NULL);
    assert_refused(&r, "org/nothing-here: no such repository at");
    run_free(&r);
    /* listed, but gone when asked for */
    control("{\"gone\":[\"" Q8 "\"]}");
    r = pull("org/tiny-GGUF:Q8_0", NULL);
    assert_refused(&r, Q8 ": no such file in org/tiny-GGUF (HTTP 404)");
    run_free(&r);
    assert_int_equal(count_named(cache_path("org/tiny-GGUF"), "q8_0"), 0);
    control("{\"gone\":[]}");
    /* a file list of many pages */
    control("{\"page\":2}");
    const int first = log_count();
    r               = pull("org/tiny-GGUF:Q8_0", NULL);
    assert_int_equal(r.rc, 0);
    run_free(&r);
    assert_int_equal(requests_to(first, "/api/models/org/tiny-GGUF/tree/"),
                     3); /* 5 files, 2 a page */
    /* a next page on another host would get the token: refused before it is asked */
    control("{\"link_host\":\"localhost\"}");
    const int before = log_count();
    r                = pull("org/tiny-GGUF:Q4_K_M", NULL);
    assert_refused(&r, "the file list's next page is not on");
    run_free(&r);
    assert_int_equal(log_count(), before + 1);
    control("{\"page\":0,\"link_host\":\"\"}");
    /* a disk too small, asked before the first byte */
    control("{\"size\":{\"" Q4KM "\":1125899906842624}}");
    r = pull("org/tiny-GGUF:Q4_K_M", NULL);
    assert_refused(&r, "not enough disk space");
    run_free(&r);
    assert_int_equal(count_named(cache_path("org/tiny-GGUF"), "q4_k_m"), 0);
    control("{\"size\":{}}");
    /* the disk fills midway (the partial file is /dev/full): its space is given back */
    char sha[65] = "", cmd[1200];
    snprintf(cmd, sizeof cmd, "sha256sum '%s'", hub_file("org/tiny-GGUF/" Q4KM));
    FILE *p = popen(cmd, "r");
    assert_int_equal(fscanf(p, "%64s", sha), 1);
    pclose(p);
    char part[1200];
    mkdir_p(cache_path("org/tiny-GGUF"));
    snprintf(part, sizeof part, "%s.part-%.16s", cache_path("org/tiny-GGUF/" Q4KM), sha);
    assert_int_equal(symlink("/dev/full", part), 0);
    r = pull("org/tiny-GGUF:Q4_K_M", NULL);
    assert_refused(&r, "the disk is full");
    run_free(&r);
    assert_int_equal(count_named(cache_path("org/tiny-GGUF"), "q4_k_m"), 0);
    /* no network */
    setenv("HF_ENDPOINT", "http://127.0.0.1:1", 1);
    r = pull("org/tiny-GGUF:Q4_K_M", NULL);
    assert_refused(&r, "cannot reach http://127.0.0.1:1");
    run_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_pick_quant, fresh, done),
        cmocka_unit_test_setup_teardown(test_cache_and_offline, fresh, done),
        cmocka_unit_test_setup_teardown(test_refresh, fresh, done),
        cmocka_unit_test_setup_teardown(test_two_pulls_at_once, fresh, done),
        cmocka_unit_test_setup_teardown(test_resume, fresh, done),
        cmocka_unit_test_setup_teardown(test_resume_damaged_tail, fresh, done),
        cmocka_unit_test_setup_teardown(test_corrupt, fresh, done),
        cmocka_unit_test_setup_teardown(test_split, fresh, done),
        cmocka_unit_test_setup_teardown(test_gated, fresh, done),
        cmocka_unit_test_setup_teardown(test_refusals, fresh, done),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
