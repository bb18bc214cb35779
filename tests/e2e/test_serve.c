/*
 * test_serve.c: `hearth serve` end to end. Each test starts the real binary
 * on 127.0.0.1 with --port 0 (it prints the port it got), drives it with
 * curl (and the official `openai` npm package, tests/e2e/node), and stops
 * it with SIGTERM: the server must exit 0 and, under ASan, print no error
 * and no leak.
 *
 * The model is stories260K.gguf (tiny, real, fast; committed in models/);
 * its greedy continuations are checked against llama.cpp's in
 * ../shared/reference/greedy.tsv (that test alone skips without it).
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/backend.h"
#include "util/clock.h"
#include "util/serveutil.h"

/* The first choice's text (completions) or message content (chat), malloc'd. */
static char *first_text(const struct http_resp *r)
{
    cJSON *j        = http_json(r);
    const cJSON *ch = cJSON_GetArrayItem(jget(j, "choices"), 0);
    assert_non_null(ch);
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(ch, "message");
    const char *t    = msg ? jstr(msg, "content") : jstr(ch, "text");
    assert_non_null(t);
    char *out = strdup(t);
    cJSON_Delete(j);
    return out;
}

/* ------------------------------------------------------------------ tests --- */

static void test_health_models_slots_metrics(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    struct srv s;
    const char *extra[] = {"--parallel", "3", "--alias", "tiny", NULL};
    srv_start(&s, extra);

    struct http_resp r = http_get(&s, "/health");
    assert_int_equal(r.status, 200);
    http_resp_free(&r);

    r        = http_get(&s, "/v1/models");
    cJSON *j = http_json(&r);
    assert_int_equal(r.status, 200);
    assert_string_equal(jstr(j, "object"), "list");
    const cJSON *m = cJSON_GetArrayItem(jget(j, "data"), 0);
    assert_string_equal(jstr(m, "id"), "tiny");
    assert_string_equal(jstr(m, "object"), "model");
    cJSON_Delete(j);
    http_resp_free(&r);
    r = http_get(&s, "/v1/models/tiny");
    assert_int_equal(r.status, 200);
    http_resp_free(&r);
    r = http_get(&s, "/v1/models/other");
    free(http_check_error(&r, 404, "model"));
    http_resp_free(&r);

    r = http_post(&s, "/v1/completions", "{\"prompt\":\"Once upon a time\",\"max_tokens\":8}");
    assert_int_equal(r.status, 200);
    http_resp_free(&r);

    r = http_get(&s, "/slots");
    assert_int_equal(r.status, 200);
    j = http_json(&r);
    assert_true(cJSON_IsArray(j));
    assert_int_equal(cJSON_GetArraySize(j), 3);
    const cJSON *sl;
    int id = 0;
    cJSON_ArrayForEach(sl, j)
    {
        assert_int_equal((int)jnum(sl, "id"), id++);
        assert_string_equal(jstr(sl, "state"), "idle");
        assert_true(jnum(sl, "tokens_cached") >= 0);
        assert_true(cJSON_IsNull(jget(sl, "request_id")));
    }
    cJSON_Delete(j);
    http_resp_free(&r);

    r = http_get(&s, "/metrics");
    assert_int_equal(r.status, 200);
    const char *want[] = {
        "hearth_requests_total{endpoint=\"/v1/completions\",code=\"200\"} 1",
        "hearth_prompt_tokens_total 5", /* BOS + 4 */
        "hearth_generated_tokens_total 8",
        "hearth_slots 3",
        "hearth_slots_busy 0",
        "hearth_ready 1",
        "hearth_time_to_first_token_seconds_count 1",
        "hearth_inter_token_latency_seconds_count",
        "hearth_kv_blocks_capacity",
        "hearth_prefix_cache_hit_tokens_total",
        "hearth_prefill_tokens_per_second",
        "hearth_decode_tokens_per_second",
        "hearth_queue_depth 0",
        /* what a Kubernetes endpoint picker reads: queued, running, KV utilisation, blocks */
        "hearth_kv_cache_usage_ratio 0\n",
        "hearth_kv_cache_config_info{block_size=\"32\",num_gpu_blocks=\"",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        if (!strstr(r.body, want[i]))
            print_message("metrics lack '%s':\n%s\n", want[i], r.body);
        assert_non_null(strstr(r.body, want[i]));
    }
    if (access("/usr/bin/promtool", X_OK) == 0) {
        const char *argv[] = {"/usr/bin/promtool", "check", "metrics", NULL};
        char *out = NULL, *err = NULL;
        int rc = tu_run(argv, r.body, &out, &err, 60);
        if (rc != 0)
            print_message("promtool: %s%s\n", out, err);
        assert_int_equal(rc, 0);
        free(out);
        free(err);
    } else {
        print_message("note: promtool not installed (apt-get install prometheus); "
                      "/metrics not linted\n");
    }
    http_resp_free(&r);
    srv_stop(&s);
}

/*
 * A llama-server command line, in llama.cpp's spellings and with its flags for what hearth
 * always does (--jinja, -fa, --metrics, -cb), serves as written; an option hearth lacks is
 * named in the one-line refusal.
 */
static void test_a_llama_server_command_line(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    struct srv s;
    const char *extra[] = {"-c",          "2048",
                           "-np",         "2",
                           "-b",          "512",
                           "-ub",         "256",
                           "-ngl",        "0",
                           "-fa",         "on",
                           "--jinja",     "--metrics",
                           "-cb",         "-ctk",
                           "f16",         "-ctv",
                           "f16",         "-s",
                           "42",          "-a",
                           "llama-style", "--cache-ram",
                           "64M",         "--swa-checkpoints",
                           "2",           NULL};
    srv_start(&s, extra);
    struct http_resp r = http_get(&s, "/v1/models");
    cJSON *j           = http_json(&r);
    assert_string_equal(jstr(cJSON_GetArrayItem(jget(j, "data"), 0), "id"), "llama-style");
    cJSON_Delete(j);
    http_resp_free(&r);
    r = http_get(&s, "/slots");
    j = http_json(&r);
    assert_int_equal(cJSON_GetArraySize(j), 2);
    cJSON_Delete(j);
    http_resp_free(&r);
    srv_stop(&s);

    const char *argv[] = {tu_bin(), "serve", "-m",      tu_model(SRV_MODEL),
                          "-c",     "2048",  "--mlock", NULL};
    char *out = NULL, *err = NULL;
    assert_int_equal(tu_run(argv, NULL, &out, &err, 60), 2);
    assert_non_null(strstr(err, "unknown option '--mlock'"));
    const char *nl = strchr(err, '\n');
    assert_true(nl && nl[1] == 0); /* one line */
    free(out);
    free(err);
}

static void test_health_503_while_loading(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    char *tmp = tu_tmpdir();
    char fifo[600];
    snprintf(fifo, sizeof fifo, "%s/load-gate", tmp);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    setenv("HEARTH_SERVE_LOAD_GATE", fifo, 1);
    struct srv s;
    srv_start_opt(&s, tu_model(SRV_MODEL), NULL, false);
    unsetenv("HEARTH_SERVE_LOAD_GATE");
    int held           = srv_fifo_wait_reader(fifo); /* the loader waits there: still loading */
    struct http_resp r = http_get(&s, "/health");
    free(http_check_error(&r, 503, NULL));
    assert_non_null(strcasestr(r.headers, "Retry-After:"));
    http_resp_free(&r);
    r = http_post(&s, "/v1/chat/completions",
                  "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}");
    free(http_check_error(&r, 503, NULL));
    http_resp_free(&r);
    srv_fifo_release(held);
    double end = now_s() + 60;
    int st     = 0;
    while (st != 200 && now_s() < end) {
        r  = http_get(&s, "/health");
        st = r.status;
        http_resp_free(&r);
        srv_sleep_ms(50);
    }
    assert_int_equal(st, 200);
    srv_stop(&s);
    tu_rmtree(tmp);
    free(tmp);
}

static void test_completions_match_llama_cpp(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    TU_SHARED_OR_SKIP(tsv, "reference/greedy.tsv");
    struct srv s;
    srv_start(&s, NULL);
    char *text = tu_read_file(tsv, NULL);
    char *save = NULL;
    int rows   = 0;
    strtok_r(text, "\n", &save);
    for (char *line = strtok_r(NULL, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *f[4], *s2 = NULL;
        f[0] = strtok_r(line, "\t", &s2);
        for (int i = 1; i < 4; i++)
            f[i] = strtok_r(NULL, i == 3 ? "" : "\t", &s2);
        if (strcmp(f[0], "stories260K.gguf"))
            continue;
        tu_unescape(f[3]);
        cJSON *req = cJSON_CreateObject();
        cJSON_AddStringToObject(req, "model", "stories260K");
        cJSON_AddStringToObject(req, "prompt", f[1]);
        cJSON_AddNumberToObject(req, "max_tokens", atoi(f[2]));
        cJSON_AddNumberToObject(req, "temperature", 0);
        char *body = cJSON_PrintUnformatted(req);
        cJSON_Delete(req);
        struct http_resp r = http_post(&s, "/v1/completions", body);
        free(body);
        assert_int_equal(r.status, 200);
        cJSON *j = http_json(&r);
        assert_string_equal(jstr(j, "object"), "text_completion");
        assert_true(!strncmp(jstr(j, "id"), "cmpl-", 5));
        assert_string_equal(jstr(j, "model"), "stories260K");
        assert_true(jnum(j, "created") > 1.6e9);
        const cJSON *ch = cJSON_GetArrayItem(jget(j, "choices"), 0);
        assert_int_equal((int)jnum(ch, "index"), 0);
        if (strcmp(jstr(ch, "text"), f[3]))
            print_message("prompt \"%s\":\n  want: %s\n  got:  %s\n", f[1], f[3], jstr(ch, "text"));
        assert_string_equal(jstr(ch, "text"), f[3]);
        assert_string_equal(jstr(ch, "finish_reason"), "length");
        assert_true(cJSON_IsNull(jget(ch, "logprobs")));
        const cJSON *u = jget(j, "usage");
        assert_int_equal((int)jnum(u, "completion_tokens"), atoi(f[2]));
        assert_int_equal((int)jnum(u, "total_tokens"), (int)jnum(u, "prompt_tokens") + atoi(f[2]));
        assert_true(jnum(jget(u, "prompt_tokens_details"), "cached_tokens") >= 0);
        cJSON_Delete(j);
        http_resp_free(&r);
        rows++;
    }
    free(text);
    assert_true(rows > 0);
    srv_stop(&s);
}

/* The concatenated text of a stream, checking each chunk's shape. */
static char *stream_text(const char *body, bool chat, bool usage_chunk, const char **finish)
{
    cJSON *evs = sse_events(body);
    size_t cap = 4096, len = 0;
    char *out    = calloc(1, cap);
    int n        = cJSON_GetArraySize(evs);
    bool saw_fin = false;
    assert_true(n >= 2);
    for (int i = 0; i < n; i++) {
        const cJSON *o = cJSON_GetArrayItem(evs, i);
        assert_string_equal(jstr(o, "object"), chat ? "chat.completion.chunk" : "text_completion");
        assert_non_null(jstr(o, "id"));
        const cJSON *chs = jget(o, "choices");
        if (usage_chunk && i == n - 1) { /* the usage chunk: no choices */
            assert_int_equal(cJSON_GetArraySize(chs), 0);
            const cJSON *u = jget(o, "usage");
            assert_true(jnum(u, "completion_tokens") > 0);
            assert_true(jnum(u, "total_tokens") > jnum(u, "completion_tokens"));
            continue;
        }
        if (usage_chunk)
            assert_true(cJSON_IsNull(jget(o, "usage")));
        else
            assert_null(cJSON_GetObjectItem(o, "usage"));
        assert_int_equal(cJSON_GetArraySize(chs), 1);
        const cJSON *c  = cJSON_GetArrayItem(chs, 0);
        const cJSON *fr = jget(c, "finish_reason");
        const char *t;
        if (chat) {
            const cJSON *d = jget(c, "delta");
            if (i == 0)
                assert_string_equal(jstr(d, "role"), "assistant");
            else
                assert_null(cJSON_GetObjectItem(d, "role"));
            t = jstr(d, "content");
        } else {
            t = jstr(c, "text");
        }
        if (cJSON_IsString(fr)) {
            assert_false(saw_fin);
            saw_fin = true;
            *finish = strcmp(fr->valuestring, "length") ? "stop" : "length";
        }
        if (t) {
            size_t m = strlen(t);
            if (len + m + 1 > cap)
                out = realloc(out, cap = (len + m + 1) * 2);
            memcpy(out + len, t, m + 1);
            len += m;
        }
    }
    assert_true(saw_fin);
    cJSON_Delete(evs);
    return out;
}

static void test_chat_and_streaming(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    struct srv s;
    srv_start(&s, NULL);
    const char *chat =
        "{\"model\":\"x\",\"messages\":[{\"role\":\"system\",\"content\":\"Be kind.\"},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Tell me\"},"
        "{\"type\":\"text\",\"text\":\" a story\"}]}],"
        "\"max_completion_tokens\":24,\"temperature\":0%s}";
    char body[1024];
    snprintf(body, sizeof body, chat, "");
    struct http_resp r = http_post(&s, "/v1/chat/completions", body);
    assert_int_equal(r.status, 200);
    cJSON *j = http_json(&r);
    assert_string_equal(jstr(j, "object"), "chat.completion");
    assert_true(!strncmp(jstr(j, "id"), "chatcmpl-", 9));
    const cJSON *ch = cJSON_GetArrayItem(jget(j, "choices"), 0);
    assert_string_equal(jstr(jget(ch, "message"), "role"), "assistant");
    char finish[16];
    snprintf(finish, sizeof finish, "%s", jstr(ch, "finish_reason"));
    assert_true(!strcmp(finish, "length") || !strcmp(finish, "stop"));
    char *plain    = strdup(jstr(jget(ch, "message"), "content"));
    const cJSON *u = jget(j, "usage");
    /* ChatML fallback around two messages: well over 20 tokens */
    assert_true(jnum(u, "prompt_tokens") > 20);
    cJSON_Delete(j);
    http_resp_free(&r);

    snprintf(body, sizeof body, chat,
             ",\"stream\":true,\"stream_options\":{\"include_usage\":true}");
    r = http_post(&s, "/v1/chat/completions", body);
    assert_int_equal(r.status, 200);
    assert_non_null(strcasestr(r.headers, "Content-Type: text/event-stream"));
    const char *sfinish = NULL;
    char *streamed      = stream_text(r.body, true, true, &sfinish);
    assert_string_equal(streamed, plain);
    assert_string_equal(sfinish, finish);
    free(streamed);
    free(plain);
    http_resp_free(&r);

    /* completions, streaming and not, give the same text */
    r           = http_post(&s, "/v1/completions",
                            "{\"prompt\":\"One day, a big bird\",\"max_tokens\":30,\"temperature\":0}");
    char *ctext = first_text(&r);
    http_resp_free(&r);
    r = http_post(&s, "/v1/completions",
                  "{\"prompt\":\"One day, a big bird\",\"max_tokens\":30,"
                  "\"temperature\":0,\"stream\":true}");
    assert_int_equal(r.status, 200);
    streamed = stream_text(r.body, false, false, &sfinish);
    assert_string_equal(streamed, ctext);
    assert_string_equal(sfinish, "length");
    free(streamed);
    free(ctext);
    http_resp_free(&r);
    srv_stop(&s);
}

static void test_stop_strings(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    struct srv s;
    srv_start(&s, NULL);
    /* greedy: ", there was a little girl named Lily. She loved to play ..." */
    struct http_resp r =
        http_post(&s, "/v1/completions",
                  "{\"prompt\":\"Once upon a time\",\"max_tokens\":64,\"temperature\":0,"
                  "\"stop\":\"Lily\"}");
    cJSON *j        = http_json(&r);
    const cJSON *ch = cJSON_GetArrayItem(jget(j, "choices"), 0);
    assert_string_equal(jstr(ch, "text"), ", there was a little girl named ");
    assert_string_equal(jstr(ch, "finish_reason"), "stop");
    cJSON_Delete(j);
    http_resp_free(&r);
    /* a stop string that spans tokens, in a stream: never emitted, not even in part */
    r                  = http_post(&s, "/v1/completions",
                                   "{\"prompt\":\"Once upon a time\",\"max_tokens\":64,\"temperature\":0,"
                                                    "\"stop\":[\"zzz\",\"tle gi\"],\"stream\":true}");
    const char *finish = NULL;
    char *t            = stream_text(r.body, false, false, &finish);
    assert_string_equal(t, ", there was a lit");
    assert_string_equal(finish, "stop");
    free(t);
    http_resp_free(&r);
    srv_stop(&s);
}

static void test_n_and_prompt_arrays(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    struct srv s;
    srv_start(&s, NULL);
    struct http_resp r = http_post(&s, "/v1/completions",
                                   "{\"prompt\":[\"Once upon a time\",\"The little dog\"],\"n\":2,"
                                   "\"max_tokens\":12,\"temperature\":0}");
    assert_int_equal(r.status, 200);
    cJSON *j        = http_json(&r);
    const cJSON *cs = jget(j, "choices");
    assert_int_equal(cJSON_GetArraySize(cs), 4);
    for (int i = 0; i < 4; i++)
        assert_int_equal((int)jnum(cJSON_GetArrayItem(cs, i), "index"), i);
    const char *t0 = jstr(cJSON_GetArrayItem(cs, 0), "text");
    const char *t1 = jstr(cJSON_GetArrayItem(cs, 1), "text");
    const char *t2 = jstr(cJSON_GetArrayItem(cs, 2), "text");
    const char *t3 = jstr(cJSON_GetArrayItem(cs, 3), "text");
    assert_string_equal(t0, t1);
    assert_string_equal(t2, t3);
    assert_true(!strncmp(t0, ", there was a little girl", 25));
    assert_true(!strncmp(t2, " was a little girl", 18));
    const cJSON *u = jget(j, "usage");
    assert_int_equal((int)jnum(u, "completion_tokens"), 48);
    assert_int_equal((int)jnum(u, "prompt_tokens"), 5 + 5); /* each prompt once: BOS + 4 tokens */
    cJSON_Delete(j);
    http_resp_free(&r);

    /* chat with n = 3 and a seed: three choices; seeded sampling reproduces */
    const char *body    = "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"n\":3,"
                          "\"max_tokens\":10,\"temperature\":0.9,\"seed\":7}";
    r                   = http_post(&s, "/v1/chat/completions", body);
    struct http_resp r2 = http_post(&s, "/v1/chat/completions", body);
    assert_int_equal(r.status, 200);
    j         = http_json(&r);
    cJSON *j2 = http_json(&r2);
    assert_int_equal(cJSON_GetArraySize(jget(j, "choices")), 3);
    for (int i = 0; i < 3; i++)
        assert_string_equal(
            jstr(jget(cJSON_GetArrayItem(jget(j, "choices"), i), "message"), "content"),
            jstr(jget(cJSON_GetArrayItem(jget(j2, "choices"), i), "message"), "content"));
    cJSON_Delete(j);
    cJSON_Delete(j2);
    http_resp_free(&r);
    http_resp_free(&r2);
    srv_stop(&s);
}

/* --seed: a request without a seed samples as one that names the server's seed, every time */
static void test_server_seed(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    struct srv s;
    const char *extra[] = {"--seed", "5", NULL};
    srv_start(&s, extra);
    const char *plain     = "{\"prompt\":\"Once upon a time\",\"max_tokens\":24,\"temperature\":1}";
    const char *seeded    = "{\"prompt\":\"Once upon a time\",\"max_tokens\":24,\"temperature\":1,"
                            "\"seed\":5}";
    const char *other     = "{\"prompt\":\"Once upon a time\",\"max_tokens\":24,\"temperature\":1,"
                            "\"seed\":6}";
    struct http_resp r[4] = {
        http_post(&s, "/v1/completions", plain), http_post(&s, "/v1/completions", plain),
        http_post(&s, "/v1/completions", seeded), http_post(&s, "/v1/completions", other)};
    const char *text[4];
    cJSON *j[4];
    for (int i = 0; i < 4; i++) {
        assert_int_equal(r[i].status, 200);
        j[i]    = http_json(&r[i]);
        text[i] = jstr(cJSON_GetArrayItem(jget(j[i], "choices"), 0), "text");
    }
    assert_string_equal(text[0], text[1]);
    assert_string_equal(text[0], text[2]);
    /* a request's own seed still rules: a seed's text is not every seed's */
    assert_string_not_equal(text[0], text[3]);
    for (int i = 0; i < 4; i++) {
        cJSON_Delete(j[i]);
        http_resp_free(&r[i]);
    }
    srv_stop(&s);
    /* a seed that is not one is a usage error, before anything loads */
    static const char *const bad[] = {"lots", "-2", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *argv[] = {tu_bin(), "serve", "--seed", bad[i], NULL};
        char *out = NULL, *err = NULL;
        assert_int_equal(tu_run(argv, NULL, &out, &err, 60), 2);
        assert_non_null(strstr(err, "--seed expects an integer in -1.."));
        free(out);
        free(err);
    }
}

static void test_logprobs(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    struct srv s;
    srv_start(&s, NULL);
    struct http_resp r =
        http_post(&s, "/v1/chat/completions",
                  "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":6,"
                  "\"temperature\":0,\"logprobs\":true,\"top_logprobs\":3}");
    assert_int_equal(r.status, 200);
    cJSON *j             = http_json(&r);
    const cJSON *ch      = cJSON_GetArrayItem(jget(j, "choices"), 0);
    const cJSON *content = jget(jget(ch, "logprobs"), "content");
    assert_int_equal(cJSON_GetArraySize(content), 6);
    const cJSON *e;
    cJSON_ArrayForEach(e, content)
    {
        assert_non_null(jstr(e, "token"));
        assert_true(jnum(e, "logprob") <= 0);
        assert_true(cJSON_IsArray(jget(e, "bytes")));
        const cJSON *top = jget(e, "top_logprobs");
        assert_int_equal(cJSON_GetArraySize(top), 3);
        /* greedy: the chosen token is the most likely one */
        assert_true(fabs(jnum(cJSON_GetArrayItem(top, 0), "logprob") - jnum(e, "logprob")) < 1e-4);
        assert_true(jnum(cJSON_GetArrayItem(top, 0), "logprob") >=
                    jnum(cJSON_GetArrayItem(top, 1), "logprob"));
    }
    cJSON_Delete(j);
    http_resp_free(&r);

    r = http_post(&s, "/v1/completions",
                  "{\"prompt\":\"Once upon a time\",\"max_tokens\":5,"
                  "\"temperature\":0,\"logprobs\":2}");
    assert_int_equal(r.status, 200);
    j               = http_json(&r);
    ch              = cJSON_GetArrayItem(jget(j, "choices"), 0);
    const cJSON *lp = jget(ch, "logprobs");
    assert_int_equal(cJSON_GetArraySize(jget(lp, "tokens")), 5);
    assert_int_equal(cJSON_GetArraySize(jget(lp, "token_logprobs")), 5);
    assert_int_equal(cJSON_GetArraySize(jget(lp, "top_logprobs")), 5);
    assert_int_equal(cJSON_GetArraySize(jget(lp, "text_offset")), 5);
    assert_int_equal((int)cJSON_GetArrayItem(jget(lp, "text_offset"), 0)->valuedouble, 0);
    assert_true(cJSON_IsObject(cJSON_GetArrayItem(jget(lp, "top_logprobs"), 0)));
    /* the tokens spell the text */
    char joined[512] = "";
    const cJSON *t;
    cJSON_ArrayForEach(t, jget(lp, "tokens"))
        strncat(joined, t->valuestring, sizeof joined - strlen(joined) - 1);
    assert_string_equal(joined, jstr(ch, "text"));
    cJSON_Delete(j);
    http_resp_free(&r);
    srv_stop(&s);
}

struct bad_case {
    const char *method, *path, *body;
    int status;
    const char *param; /* NULL: not checked */
};

static void test_bad_input_never_hurts(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    struct srv s;
    const char *extra[] = {"--ctx-size", "256", "--max-body", "8192", NULL};
    srv_start(&s, extra);
    static const struct bad_case cases[] = {
        {"POST", "/v1/chat/completions", "{\"messages\": [", 400, NULL},
        {"POST", "/v1/completions", "{\"prompt\":\"x\"} trailing", 400, NULL},
        {"POST", "/v1/completions", "", 400, NULL},
        {"POST", "/v1/completions", "[1,2,3]", 400, NULL},
        {"POST", "/v1/completions", "\"just a string\"", 400, NULL},
        {"POST", "/v1/chat/completions", "{}", 400, "messages"},
        {"POST", "/v1/chat/completions", "{\"messages\":\"hi\"}", 400, "messages"},
        {"POST", "/v1/chat/completions", "{\"messages\":[]}", 400, "messages"},
        {"POST", "/v1/chat/completions", "{\"messages\":[5]}", 400, "messages[0]"},
        {"POST", "/v1/chat/completions", "{\"messages\":[{\"content\":\"x\"}]}", 400,
         "messages[0].role"},
        {"POST", "/v1/chat/completions", "{\"messages\":[{\"role\":\"wizard\",\"content\":\"x\"}]}",
         400, "messages[0].role"},
        {"POST", "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":5}]}", 400,
         "messages[0].content"},
        {"POST", "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\"}]}", 400,
         "messages[0].content"},
        {"POST", "/v1/chat/completions",
         "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}", 400,
         "messages[0].content[0]"},
        {"POST", "/v1/completions", "{}", 400, "prompt"},
        {"POST", "/v1/completions", "{\"prompt\":5}", 400, "prompt"},
        {"POST", "/v1/completions", "{\"prompt\":[\"a\",7]}", 400, "prompt[1]"},
        {"POST", "/v1/completions", "{\"prompt\":[]}", 400, "prompt"},
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":-5}", 400, "max_tokens"},
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":0}", 400, "max_tokens"},
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":1000000000000}", 400,
         "max_tokens"},
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":\"ten\"}", 400, "max_tokens"},
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":2.5}", 400, "max_tokens"},
        {"POST", "/v1/chat/completions",
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_completion_tokens\":-1}", 400,
         "max_completion_tokens"},
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"temperature\":\"hot\"}", 400,
         "temperature"},
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"temperature\":7}", 400, "temperature"},
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"top_p\":[1]}", 400, "top_p"},
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"top_k\":1.5}", 400, "top_k"},
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"min_p\":true}", 400, "min_p"},
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"seed\":\"s\"}", 400, "seed"},
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"stop\":5}", 400, "stop"},
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\"]}",
         400, "stop"},
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"stop\":[\"a\",{}]}", 400, "stop[1]"},
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"presence_penalty\":3}", 400,
         "presence_penalty"},
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"frequency_penalty\":\"a\"}", 400,
         "frequency_penalty"},
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"repetition_penalty\":0}", 400,
         "repetition_penalty"},
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"n\":0}", 400, "n"},
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"n\":\"2\"}", 400, "n"},
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"n\":1000}", 400, "n"},
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"stream\":\"yes\"}", 400, "stream"},
        {"POST", "/v1/completions",
         "{\"prompt\":\"x\",\"stream_options\":{\"include_usage\":true}}", 400, "stream_options"},
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"logprobs\":true}", 400, "logprobs"},
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"logprobs\":99}", 400, "logprobs"},
        {"POST", "/v1/chat/completions",
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":3}", 400, "logprobs"},
        {"POST", "/v1/chat/completions",
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_logprobs\":2}", 400,
         "top_logprobs"},
        {"POST", "/v1/chat/completions",
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"model\":42}", 400, "model"},
        {"POST", "/v1/chat/completions",
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":\"function\"}]"
         "}",
         400, "tools[0].function"},
        {"POST", "/v1/chat/completions",
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":\"required\"}", 400,
         "tool_choice"},
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"user\":17}", 400, "user"},
        {"POST", "/tokenize", "{\"content\":5}", 400, "content"},
        {"POST", "/detokenize", "{\"tokens\":[1,99999]}", 400, "tokens[1]"},
        {"POST", "/detokenize", "{\"tokens\":\"1\"}", 400, "tokens"},
        {"POST", "/apply-template", "{\"messages\":[]}", 400, "messages"},
        {"GET", "/apply-template", NULL, 405, NULL},
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"echo\":true}", 400, "echo"},
        {"GET", "/v1/nope", NULL, 404, NULL},
        {"GET", "/index.htm", NULL, 404, NULL}, /* "/" is the chat page (test_webui.c) */
        {"POST", "/v1/models", "{}", 405, NULL},
        {"GET", "/v1/chat/completions", NULL, 405, NULL},
        {"DELETE", "/v1/completions", NULL, 405, NULL},
        {"PUT", "/health", "{}", 405, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct bad_case *c = &cases[i];
        struct http_resp r       = http_req(&s, c->method, c->path, c->body, NULL);
        if (r.status != c->status)
            print_message("case %zu: %s %s %s\n", i, c->method, c->path, c->body ? c->body : "");
        free(http_check_error(&r, c->status, c->param));
        if (c->status == 405)
            assert_non_null(strcasestr(r.headers, "\nAllow: "));
        http_resp_free(&r);
    }

    /* fields agents send: user is taken, a max_tokens past the slot's room is clamped to it */
    struct http_resp r = http_post(&s, "/v1/completions",
                                   "{\"prompt\":\"Once\",\"max_tokens\":100000,\"user\":\"u-17\"}");
    assert_int_equal(r.status, 200);
    cJSON *j = http_json(&r);
    assert_string_equal(jstr(cJSON_GetArrayItem(jget(j, "choices"), 0), "finish_reason"), "length");
    assert_int_equal(jnum(jget(j, "usage"), "total_tokens"), 256); /* the whole slot */
    cJSON_Delete(j);
    http_resp_free(&r);

    /* a prompt longer than the slot context: 400 naming both numbers */
    size_t n  = 4000;
    char *big = malloc(n + 64);
    strcpy(big, "{\"prompt\":\"");
    size_t off = strlen(big);
    for (size_t i = 0; off < n; i++)
        big[off++] = "abc de"[i % 6];
    strcpy(big + off, "\"}");
    r         = http_post(&s, "/v1/completions", big);
    char *msg = http_check_error(&r, 400, "prompt");
    assert_non_null(strstr(msg, "256"));
    assert_non_null(strstr(msg, "tokens"));
    free(msg);
    http_resp_free(&r);

    /* a body over --max-body: 413 in the same shape */
    char *huge = malloc(12001);
    memset(huge, ' ', 12000);
    memcpy(huge, "{\"prompt\":\"x\"}", 14);
    huge[12000] = 0;
    r           = http_post(&s, "/v1/completions", huge);
    free(http_check_error(&r, 413, NULL));
    http_resp_free(&r);
    /* far over it (where libevent would answer with its own HTML page): OpenAI's 413 all
     * the same, before the body is read, and the server lives on */
    char *giant = malloc(2000001);
    memset(giant, ' ', 2000000);
    memcpy(giant, "{\"prompt\":\"x\"}", 14);
    giant[2000000] = 0;
    r              = http_post(&s, "/v1/completions", giant);
    msg            = http_check_error(&r, 413, NULL);
    assert_non_null(strstr(msg, "2000000 bytes"));
    free(msg);
    http_resp_free(&r);
    free(huge);
    free(giant);
    free(big);

    /* still serving */
    r = http_post(&s, "/v1/completions", "{\"prompt\":\"Once upon a time\",\"max_tokens\":4}");
    assert_int_equal(r.status, 200);
    http_resp_free(&r);
    r = http_get(&s, "/health");
    assert_int_equal(r.status, 200);
    http_resp_free(&r);
    r = http_get(&s, "/metrics");
    assert_non_null(
        strstr(r.body, "hearth_requests_total{endpoint=\"/v1/completions\",code=\"400\"}"));
    assert_non_null(strstr(r.body, "hearth_requests_total{endpoint=\"other\",code=\"404\"} 2"));
    http_resp_free(&r);
    srv_stop(&s);
}

static void test_api_key(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    for (int env = 0; env < 2; env++) {
        struct srv s;
        const char *extra[] = {"--api-key", "sekrit", NULL};
        if (env)
            setenv("HEARTH_API_KEY", "sekrit", 1);
        srv_start(&s, env ? NULL : extra);
        unsetenv("HEARTH_API_KEY");
        struct http_resp r = http_get(&s, "/v1/models");
        free(http_check_error(&r, 401, NULL));
        http_resp_free(&r);
        const char *wrong[] = {"Authorization: Bearer sekrit2", NULL};
        r                   = http_req(&s, "GET", "/v1/models", NULL, wrong);
        free(http_check_error(&r, 401, NULL));
        http_resp_free(&r);
        r = http_req(&s, "POST", "/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":2}", wrong);
        free(http_check_error(&r, 401, NULL));
        http_resp_free(&r);
        const char *right[] = {"Authorization: Bearer sekrit", NULL};
        r                   = http_req(&s, "GET", "/v1/models", NULL, right);
        assert_int_equal(r.status, 200);
        http_resp_free(&r);
        r = http_req(&s, "POST", "/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":2}", right);
        assert_int_equal(r.status, 200);
        http_resp_free(&r);
        r = http_get(&s, "/health"); /* stays open */
        assert_int_equal(r.status, 200);
        http_resp_free(&r);
        srv_stop(&s);
    }
}

/*
 * A greedy stream far longer than any test lets it run: the tests that need a
 * request in flight start the server gated (srv_start_gated) and let it run a
 * known number of steps, so it is mid-generation by construction, not by speed.
 */
static const char long_body[] = "{\"prompt\":\"Once upon a time\",\"max_tokens\":400,"
                                "\"ignore_eos\":true,\"temperature\":0,\"stream\":true}";

static pid_t start_long_stream(const struct srv *s, const char *out_path)
{
    return http_post_bg(s, "/v1/completions", long_body, out_path, "120");
}

static int slots_busy(const struct srv *s)
{
    struct http_resp r = http_get(s, "/slots");
    int busy           = 0;
    for (const char *p = r.body; (p = strstr(p, "\"busy\"")); p++)
        busy++;
    http_resp_free(&r);
    return busy;
}

static bool wait_busy(const struct srv *s, int want, double timeout_s)
{
    double end = now_s() + timeout_s;
    while (now_s() < end) {
        if (slots_busy(s) == want)
            return true;
        srv_sleep_ms(20);
    }
    return false;
}

/* The number of times needle occurs in text. */
static int count_of(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

static void test_queue_full_503(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    struct srv s;
    const char *extra[] = {"--parallel", "1", "--max-queue", "0", NULL};
    srv_start_gated(&s, extra);
    char out[600];
    snprintf(out, sizeof out, "%s/long.txt", s.dir);
    pid_t bg = start_long_stream(&s, out);
    srv_gate_steps(&s, 1);
    srv_wait_generated(&s, 1); /* the one slot is busy, and the gate keeps it so */
    struct http_resp r = http_post(&s, "/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":2}");
    free(http_check_error(&r, 503, NULL));
    assert_non_null(strcasestr(r.headers, "Retry-After:"));
    http_resp_free(&r);
    /* n = 2 on one free slot and no queue: refused as a whole (half of it, admitted, would
     * sit busy in the slot: the gate lets no step finish it) */
    kill(bg, SIGKILL);
    srv_wait_pid(bg, 30);
    assert_true(wait_busy(&s, 0, 30));
    r = http_post(&s, "/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":2,\"n\":2}");
    free(http_check_error(&r, 503, NULL));
    http_resp_free(&r);
    assert_true(wait_busy(&s, 0, 30));
    r = http_get(&s, "/metrics");
    assert_non_null(strstr(r.body, "\nhearth_slots_busy 0\n"));
    assert_non_null(strstr(r.body, "\nhearth_queue_depth 0\n"));
    http_resp_free(&r);
    srv_gate_lift(&s);
    r = http_post(&s, "/v1/completions", "{\"prompt\":\"Once upon a time\",\"max_tokens\":4}");
    assert_int_equal(r.status, 200);
    http_resp_free(&r);
    srv_stop(&s);
}

static void test_disconnect_frees_slot(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    struct srv s;
    const char *extra[] = {"--parallel", "2", NULL};
    srv_start_gated(&s, extra);
    char out[600];
    snprintf(out, sizeof out, "%s/long.txt", s.dir);
    /* a stream held after 3 tokens, whose client then goes away */
    pid_t bg = start_long_stream(&s, out);
    srv_gate_steps(&s, 3);
    srv_wait_generated(&s, 3);
    assert_true(sse_wait(out, 3));
    kill(bg, SIGKILL);
    assert_int_equal(srv_wait_pid(bg, 30), 128 + SIGKILL);
    char *got = srv_slurp(out);
    assert_non_null(strstr(got, "data: {"));
    assert_null(strstr(got, "[DONE]"));
    free(got);
    /* the slot frees with the gate still shut: no further step is needed for that */
    assert_true(wait_busy(&s, 0, 30));
    /* the same for a plain request */
    snprintf(out, sizeof out, "%s/plain.txt", s.dir);
    bg = http_post_bg(&s, "/v1/completions",
                      "{\"prompt\":\"Once\",\"max_tokens\":400,\"ignore_eos\":true}", out, "120");
    srv_gate_steps(&s, 2);
    srv_wait_generated(&s, 2);
    kill(bg, SIGKILL);
    assert_int_equal(srv_wait_pid(bg, 30), 128 + SIGKILL);
    assert_true(wait_busy(&s, 0, 30));
    srv_gate_lift(&s);
    struct http_resp r =
        http_post(&s, "/v1/completions", "{\"prompt\":\"Once upon a time\",\"max_tokens\":4}");
    assert_int_equal(r.status, 200);
    http_resp_free(&r);
    r = http_get(&s, "/metrics");
    assert_non_null(strstr(r.body, "code=\"499\"} 1"));
    http_resp_free(&r);
    srv_stop(&s);
}

static void test_sigterm_mid_stream_is_graceful(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    struct srv s;
    srv_start_gated(&s, NULL);
    char *keep = tu_tmpdir(); /* outlives the server's directory */
    char out[600];
    snprintf(out, sizeof out, "%s/stream.txt", keep);
    pid_t bg = start_long_stream(&s, out);
    srv_gate_steps(&s, 2);
    srv_wait_generated(&s, 2);
    assert_true(sse_wait(out, 2)); /* two tokens sent, and the gate holds the third */
    double t0 = now_s();
    srv_stop(&s); /* SIGTERM with the gate still shut: exit 0, no sanitizer report */
    assert_true(now_s() - t0 < 30);
    assert_int_equal(srv_wait_pid(bg, 30), 0); /* the stream was ended properly, not cut */
    char *got = srv_slurp(out);
    tu_rmtree(keep);
    free(keep);
    if (!strstr(got, "\"code\":\"shutting_down\"") ||
        count_of(got, "\"object\":\"text_completion\"") != 2)
        print_message("stream as received (%zu bytes): %s\n", strlen(got), got);
    assert_int_equal(count_of(got, "\"object\":\"text_completion\""), 2);
    assert_non_null(strstr(got, "\"code\":\"shutting_down\""));
    /* cut short: a client that trusts [DONE] must not take the two tokens as the whole reply */
    assert_null(strstr(got, "data: [DONE]"));
    free(got);
}

static void test_parallel_greedy_equals_alone(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    struct srv s;
    const char *extra[] = {"--parallel", "4", NULL};
    srv_start(&s, extra);
    static const char *prompts[4] = {"Once upon a time", "Lily and Tom went to the park",
                                     "The little dog", "One day, a big bird"};
    char *alone[4], bodies[4][256];
    for (int i = 0; i < 4; i++) {
        snprintf(bodies[i], sizeof bodies[i],
                 "{\"prompt\":\"%s\",\"max_tokens\":120,\"temperature\":0,\"ignore_eos\":true}",
                 prompts[i]);
        struct http_resp r = http_post(&s, "/v1/completions", bodies[i]);
        assert_int_equal(r.status, 200);
        alone[i] = first_text(&r);
        http_resp_free(&r);
    }
    srv_stop(&s);
    /* together: a gated server takes all four into its slots before any step runs, so
     * they share every batch from their prefill on, however fast each would finish alone */
    srv_start_gated(&s, extra);
    char outs[4][600];
    pid_t pids[4];
    for (int i = 0; i < 4; i++) {
        snprintf(outs[i], sizeof outs[i], "%s/par%d.json", s.dir, i);
        pids[i] = http_post_bg(&s, "/v1/completions", bodies[i], outs[i], "120");
    }
    assert_true(wait_busy(&s, 4, 60));
    srv_gate_steps(&s, 1);
    srv_wait_generated(&s, 4); /* one step gave each its first token: one batch */
    srv_gate_lift(&s);
    for (int i = 0; i < 4; i++)
        assert_int_equal(srv_wait_pid(pids[i], 150), 0);
    for (int i = 0; i < 4; i++) {
        struct http_resp r = {200, srv_slurp(outs[i]), strdup("")};
        char *t            = first_text(&r);
        if (strcmp(t, alone[i]))
            print_message("prompt %d differs when run with others:\n  alone: %s\n  with:  %s\n", i,
                          alone[i], t);
        assert_string_equal(t, alone[i]);
        free(t);
        free(alone[i]);
        http_resp_free(&r);
    }
    srv_stop(&s);
}

/* Layers in stages serve the same greedy text; -ngl without a GPU backend stops the server. */
static void test_layer_split_serves_the_same_text(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    static const char body[] =
        "{\"prompt\":\"Once upon a time\",\"max_tokens\":60,\"temperature\":0,"
        "\"ignore_eos\":true}";
    const char *split[] = {"--layer-split", "cpu:2,cpu:3", NULL};
    char *text[2];
    struct srv s;
    for (int i = 0; i < 2; i++) {
        srv_start(&s, i ? split : NULL);
        struct http_resp r = http_post(&s, "/v1/completions", body);
        assert_int_equal(r.status, 200);
        text[i] = first_text(&r);
        http_resp_free(&r);
        srv_stop(&s);
    }
    print_message("one stage: %s\n", text[0]);
    assert_true(strlen(text[0]) > 40);
    assert_string_equal(text[1], text[0]);
    free(text[0]);
    free(text[1]);
    const char *ngl[] = {"--layer-split", "vulkan9:5", NULL};
    char *log         = NULL;
    assert_false(srv_start_try(&s, tu_model(SRV_MODEL), ngl, &log));
    assert_non_null(strstr(log, "Vulkan device 9 cannot be used"));
    free(log);
}

/* The value of the /metrics sample that starts with prefix ("name{labels} "), or fails. */
static double sample(const char *page, const char *prefix)
{
    const char *at = strstr(page, prefix);
    if (!at)
        fail_msg("no sample '%s' in:\n%s", prefix, page);
    return atof(at + strlen(prefix));
}

/*
 * One /slots entry's stages against what /metrics said: n stages, each
 * (device, layers, output) as want[i] gives them and the bytes of w[i], kv[i].
 */
static void check_slot_stages(const cJSON *slot, int n, const char *const want[][2],
                              const bool *output, const double *w, const double *kv)
{
    const cJSON *st = jget(slot, "stages");
    assert_true(cJSON_IsArray(st));
    assert_int_equal(cJSON_GetArraySize(st), n);
    for (int i = 0; i < n; i++) {
        const cJSON *o = cJSON_GetArrayItem(st, i);
        assert_string_equal(jstr(o, "device"), want[i][0]);
        assert_string_equal(jstr(o, "layers"), want[i][1]);
        assert_int_equal(cJSON_IsTrue(jget(o, "output")), output[i]);
        assert_true(jnum(o, "weight_bytes") == w[i]);
        assert_true(jnum(o, "kv_bytes") == kv[i]);
    }
}

/*
 * /metrics and /slots say which device holds which layers, their weights
 * and their K/V: CPU stages (--layer-split cpu:3,cpu:2) run everywhere;
 * a bad --tensor-split stops the server before it listens.
 */
static void test_stages_in_metrics_and_slots(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    /* the cache's blocks count in K/V: a fixed cap, not a share of the RAM free now */
    const char *split[] = {"--layer-split", "cpu:3,cpu:2", "--cache-ram", "1M", NULL};
    struct srv s;
    srv_start(&s, split);
    struct http_resp r = http_get(&s, "/metrics");
    assert_int_equal(r.status, 200);
    double w[2], kv[2];
    w[0]  = sample(r.body, "hearth_stage_weight_bytes{stage=\"0\",device=\"cpu\",layers=\"0-2\","
                            "output=\"false\"} ");
    w[1]  = sample(r.body, "hearth_stage_weight_bytes{stage=\"1\",device=\"cpu\",layers=\"3-4\","
                            "output=\"true\"} ");
    kv[0] = sample(r.body, "hearth_stage_kv_bytes{stage=\"0\",device=\"cpu\",layers=\"0-2\","
                           "output=\"false\"} ");
    kv[1] = sample(r.body, "hearth_stage_kv_bytes{stage=\"1\",device=\"cpu\",layers=\"3-4\","
                           "output=\"true\"} ");
    assert_null(strstr(r.body, "stage=\"2\""));
    print_message("weights %.0f + %.0f bytes, K/V %.0f + %.0f bytes\n", w[0], w[1], kv[0], kv[1]);
    /* the layers are alike: K/V in proportion to their count, 3:2; weights about so, the
     * embedding table on the first stage (stories260K's output is tied to it) */
    assert_true(kv[1] > 0 && kv[0] * 2 == kv[1] * 3);
    assert_true(w[0] > w[1] && w[1] > 0);
    http_resp_free(&r);
    r = http_get(&s, "/slots");
    assert_int_equal(r.status, 200);
    cJSON *j                           = http_json(&r);
    static const char *const want[][2] = {{"cpu", "0-2"}, {"cpu", "3-4"}};
    static const bool output[]         = {false, true};
    assert_true(cJSON_GetArraySize(j) > 0);
    const cJSON *slot;
    cJSON_ArrayForEach(slot, j) check_slot_stages(slot, 2, want, output, w, kv);
    cJSON_Delete(j);
    http_resp_free(&r);
    srv_stop(&s);
    /* one stage without a split: every layer and the output, the two stages' bytes */
    srv_start(&s, split + 2);
    r = http_get(&s, "/metrics");
    assert_true(sample(r.body, "hearth_stage_weight_bytes{stage=\"0\",device=\"cpu\","
                               "layers=\"0-4\",output=\"true\"} ") == w[0] + w[1]);
    assert_true(sample(r.body, "hearth_stage_kv_bytes{stage=\"0\",device=\"cpu\","
                               "layers=\"0-4\",output=\"true\"} ") == kv[0] + kv[1]);
    http_resp_free(&r);
    srv_stop(&s);
    /* a placement that does not fit refuses to start, with the sentence */
    const char *bad[] = {"-ngl", "2", "--tensor-split", "1:1", NULL};
    char *log         = NULL;
    assert_false(srv_start_try(&s, tu_model(SRV_MODEL), bad, &log));
    assert_non_null(strstr(log, "tensor_split '1:1' has 2 shares but 1 device is given"));
    free(log);
}

/*
 * The same on a Vulkan device (-ngl 2: layers 3-4 on vulkan0, the output
 * back on the CPU), and a device too small for the model (HEARTH_VK_MEMORY_MIB)
 * stops the server with the figures. Skips without a device.
 */
static void test_vulkan_stages_in_metrics(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    char why[256];
    if (!backend_vulkan(0, why, sizeof why)) {
        print_message("vulkan-test: skipped: %s\n", why);
        skip();
    }
    const char *ngl[] = {"-ngl", "2", NULL};
    struct srv s;
    srv_start(&s, ngl);
    struct http_resp r = http_get(&s, "/metrics");
    assert_int_equal(r.status, 200);
    const double w  = sample(r.body, "hearth_stage_weight_bytes{stage=\"1\",device=\"vulkan0\","
                                      "layers=\"3-4\",output=\"false\"} ");
    const double kv = sample(r.body, "hearth_stage_kv_bytes{stage=\"1\",device=\"vulkan0\","
                                     "layers=\"3-4\",output=\"false\"} ");
    sample(r.body, "hearth_stage_weight_bytes{stage=\"0\",device=\"cpu\",layers=\"0-2\","
                   "output=\"false\"} ");
    sample(r.body,
           "hearth_stage_kv_bytes{stage=\"2\",device=\"cpu\",layers=\"\",output=\"true\"} ");
    assert_true(w > 0 && kv > 0);
    http_resp_free(&r);
    r               = http_get(&s, "/slots");
    cJSON *j        = http_json(&r);
    const cJSON *st = cJSON_GetArrayItem(jget(cJSON_GetArrayItem(j, 0), "stages"), 1);
    assert_string_equal(jstr(st, "device"), "vulkan0");
    assert_true(jnum(st, "weight_bytes") == w && jnum(st, "kv_bytes") == kv);
    cJSON_Delete(j);
    http_resp_free(&r);
    srv_stop(&s);
    const char *all[] = {"-ngl", "99", NULL};
    char *log         = NULL;
    setenv("HEARTH_VK_MEMORY_MIB", "1", 1);
    const bool started = srv_start_try(&s, tu_model(SRV_MODEL), all, &log);
    unsetenv("HEARTH_VK_MEMORY_MIB");
    if (started)
        srv_stop(&s);
    assert_false(started);
    print_message("%s", log);
    assert_non_null(strstr(log, "vulkan0 would hold "));
    assert_non_null(strstr(log, "but has 1.0 MiB of device memory"));
    free(log);
}

static void test_prefix_reuse_reports_cached_tokens(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    struct srv s;
    srv_start(&s, NULL);
    char body[2048] = "{\"prompt\":\"";
    for (int i = 0; i < 12; i++)
        strcat(body, "Once upon a time there was a little dog named Max. ");
    strcat(body, "\",\"max_tokens\":4,\"temperature\":0}");
    double cached[2];
    char *text[2];
    for (int k = 0; k < 2; k++) {
        struct http_resp r = http_post(&s, "/v1/completions", body);
        assert_int_equal(r.status, 200);
        cJSON *j       = http_json(&r);
        const cJSON *u = jget(j, "usage");
        assert_true(jnum(u, "prompt_tokens") > 100);
        cached[k] = jnum(jget(u, "prompt_tokens_details"), "cached_tokens");
        text[k]   = strdup(jstr(cJSON_GetArrayItem(jget(j, "choices"), 0), "text"));
        cJSON_Delete(j);
        http_resp_free(&r);
    }
    print_message("cached_tokens: first %g, second %g\n", cached[0], cached[1]);
    assert_true(cached[0] == 0);
    assert_true(cached[1] >= 64);
    assert_string_equal(text[0], text[1]); /* reuse changes nothing in the output */
    free(text[0]);
    free(text[1]);
    struct http_resp r = http_get(&s, "/metrics");
    const char *p      = strstr(r.body, "\nhearth_prefix_cache_hit_tokens_total ");
    assert_non_null(p);
    assert_true(atof(p + strlen("\nhearth_prefix_cache_hit_tokens_total ")) >= 64);
    http_resp_free(&r);
    srv_stop(&s);
}

/*
 * A greedy completion of 24 tokens: its usage.prompt_tokens_details.cached_tokens,
 * its text and its logprobs (3 best per token) as JSON text (both malloc'd).
 */
static char *complete(const struct srv *s, const char *prompt, double *cached, char **logprobs)
{
    char *body = malloc(strlen(prompt) + 128);
    sprintf(body, "{\"prompt\":\"%s\",\"max_tokens\":24,\"temperature\":0,\"logprobs\":3}", prompt);
    struct http_resp r = http_post(s, "/v1/completions", body);
    free(body);
    assert_int_equal(r.status, 200);
    cJSON *j            = http_json(&r);
    const cJSON *choice = cJSON_GetArrayItem(jget(j, "choices"), 0);
    *cached             = jnum(jget(jget(j, "usage"), "prompt_tokens_details"), "cached_tokens");
    *logprobs           = cJSON_PrintUnformatted(jget(choice, "logprobs"));
    char *t             = strdup(jstr(choice, "text"));
    cJSON_Delete(j);
    http_resp_free(&r);
    return t;
}

/*
 * qwen35moe's recurrent state: a second prompt sharing a 200-token prefix
 * resumes from the state snapshot at the last block boundary the prefix
 * covers (192 with 32-token blocks), and its greedy text is the text of a
 * server that keeps no snapshots (--ctx-checkpoints 0, which reuses nothing).
 * Its logprobs are those of that server prefilling in the same batch shapes
 * (192 rows, then the rest); in one batch of all 215 rows the prompt's last
 * row goes through tiled attention instead of per-key (64 rows or more), so
 * the first token's logprobs may differ in the last bits there.
 */
static void test_hybrid_prefix_resumes_from_a_state_snapshot(void **state)
{
    (void)state;
    if (!srv_have_curl())
        skip();
    TU_MODEL_OR_SKIP(model, "tiny-qwen35moe-bpe-q8_0.gguf");
    static const char *words[] = {"the",  "a",     "cat",   "dog",  "ran",   "over",
                                  "hill", "under", "sky",   "blue", "river", "stone",
                                  "tree", "house", "small", "big"};
    char prefix[2048]          = "", a[2300], b[2300];
    uint32_t x                 = 12345;
    for (int i = 0; i < 199; i++) {
        x = x * 1103515245u + 12345u;
        strcat(prefix, words[(x >> 16) % 16]);
        strcat(prefix, " ");
    }
    prefix[strlen(prefix) - 1] = '.';
    snprintf(a, sizeof a, "%s And then the first tail goes on about apples in the garden.", prefix);
    snprintf(b, sizeof b, "%s But a second ending speaks of ships and the wide sea at night.",
             prefix);

    struct srv s;
    srv_start_opt(&s, model, NULL, true);
    char body[2200];
    snprintf(body, sizeof body, "{\"content\":\"%s\"}", prefix);
    struct http_resp r = http_post(&s, "/tokenize", body);
    assert_int_equal(r.status, 200);
    cJSON *j           = http_json(&r);
    const int n_prefix = cJSON_GetArraySize(jget(j, "tokens"));
    cJSON_Delete(j);
    http_resp_free(&r);
    double cached_a, cached_b, cached_off, cached_shaped;
    char *lp_a, *lp_b, *lp_off, *lp_shaped;
    char *ta = complete(&s, a, &cached_a, &lp_a), *tb = complete(&s, b, &cached_b, &lp_b);
    srv_stop(&s);

    const char *off[] = {"--ctx-checkpoints", "0", NULL};
    srv_start_opt(&s, model, off, true);
    char *tb_off = complete(&s, b, &cached_off, &lp_off);
    srv_stop(&s);
    const char *shaped[] = {"--ctx-checkpoints", "0", "--batch-size", "192", NULL};
    srv_start_opt(&s, model, shaped, true);
    char *tb_shaped = complete(&s, b, &cached_shaped, &lp_shaped);
    srv_stop(&s);

    print_message("prefix of %d tokens: cached_tokens A %g, B %g, B without snapshots %g\n",
                  n_prefix, cached_a, cached_b, cached_off);
    print_message("B: %s\nB without snapshots: %s\n", tb, tb_off);
    assert_true(n_prefix >= 200 && n_prefix < 224);
    assert_true(cached_a == 0);
    assert_true(cached_b >= 128);
    assert_true(cached_b == 192); /* the last 32-token boundary the prefix covers */
    assert_true(cached_off == 0 && cached_shaped == 0);
    assert_string_equal(tb, tb_off);
    assert_string_equal(tb, tb_shaped);
    assert_string_equal(lp_b, lp_shaped);
    assert_true(strcmp(ta, tb) != 0);
    free(ta);
    free(tb);
    free(tb_off);
    free(tb_shaped);
    free(lp_a);
    free(lp_b);
    free(lp_off);
    free(lp_shaped);
}

static void test_openai_npm_client(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    if (!srv_have_node())
        skip();
    struct srv s;
    const char *extra[] = {"--alias", "stories", "--api-key", "node-key", NULL};
    srv_start(&s, extra);
    char base[128];
    snprintf(base, sizeof base, "%s/v1", s.base);
    const char *env[] = {
        "HEARTH_BASE_URL", base, "HEARTH_API_KEY_FOR_TEST", "node-key", "HEARTH_MODEL_ALIAS",
        "stories",         NULL};
    srv_node_test("openai.test.mjs", env);
    srv_stop(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_health_models_slots_metrics, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_a_llama_server_command_line, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_health_503_while_loading, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_completions_match_llama_cpp, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_chat_and_streaming, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_stop_strings, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_n_and_prompt_arrays, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_logprobs, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_server_seed, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_bad_input_never_hurts, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_api_key, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_queue_full_503, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_disconnect_frees_slot, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_sigterm_mid_stream_is_graceful, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_parallel_greedy_equals_alone, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_layer_split_serves_the_same_text, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_stages_in_metrics_and_slots, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_vulkan_stages_in_metrics, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_prefix_reuse_reports_cached_tokens, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_hybrid_prefix_resumes_from_a_state_snapshot,
                                  srv_kill_leftovers),
        cmocka_unit_test_teardown(test_openai_npm_client, srv_kill_leftovers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
