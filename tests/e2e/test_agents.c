/*
 * test_agents.c: what agent clients need from `hearth serve`, end to end on
 * the real binary (tests/util/serveutil.h starts it and drives it with curl):
 *
 * - /apply-template renders every chat template of ../shared/templates with
 *   every conversation of tests/e2e/templates/conversations.json byte for
 *   byte as Hugging Face's apply_chat_template does (tests/e2e/hf_render.py,
 *   Python jinja2), and refuses (4xx) what jinja2 refuses;
 * - the event loop never waits for a preparation: with one held inside the
 *   preparation thread by the HEARTH_SERVE_PREP_GATE FIFO (a 4 MiB prompt),
 *   a stream goes on (its steps let through the scheduler's gate) and
 *   /health answers;
 * - llama-server's endpoints (/props, /tokenize, /detokenize), the paths
 *   without /v1, /v1/models' context length, CORS, a raising template;
 * - the official `openai` npm client doing what agents do (tool round trips,
 *   tool_choice, thinking kwargs, max_tokens 32000) against a Qwen3 model
 *   with Qwen3's own template (tests/e2e/node/agents.test.mjs).
 *
 * No check rests on timing: a condition is held by the gate, and waits are
 * polls with generous bounds.
 */
#include <cjson/cJSON.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/serveutil.h"

#define PYTHON    "/usr/bin/python3"
#define NOW       "1767225600" /* 2026-01-01 00:00:00 UTC: strftime_now's clock on both sides */
#define QWEN3     "tiny-qwen3-bpe-q8_0.gguf"
#define QWEN3_TPL "templates/Qwen-Qwen3-0.6B.jinja"

/* ----------------------------------------------------- apply-template --- */

/* The conversation as a request body: what a chat client sends (name and
 * add_generation_prompt are the scoreboard's, not the API's). */
static char *template_body(const cJSON *conv)
{
    cJSON *b                  = cJSON_CreateObject();
    static const char *keys[] = {"messages", "tools", "chat_template_kwargs"};
    for (int k = 0; k < 3; k++) {
        const cJSON *it = cJSON_GetObjectItemCaseSensitive(conv, keys[k]);
        if (it)
            cJSON_AddItemToObject(b, keys[k], cJSON_Duplicate(it, 1));
    }
    char *text = cJSON_PrintUnformatted(b);
    cJSON_Delete(b);
    return text;
}

/* hf_render.py's request for template src and conv. The server always adds the generation
 * prompt, so the reference does too (conversations that ask for none are rendered with it). */
static cJSON *reference_request(const char *src, const cJSON *conv, const char *bos,
                                const char *eos)
{
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "template", src);
    cJSON_AddItemToObject(r, "messages",
                          cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(conv, "messages"), 1));
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(conv, "tools");
    if (tools)
        cJSON_AddItemToObject(r, "tools", cJSON_Duplicate(tools, 1));
    cJSON_AddTrueToObject(r, "add_generation_prompt");
    cJSON_AddStringToObject(r, "bos_token", bos);
    cJSON_AddStringToObject(r, "eos_token", eos);
    const cJSON *kw = cJSON_GetObjectItemCaseSensitive(conv, "chat_template_kwargs");
    cJSON_AddItemToObject(r, "kwargs", kw ? cJSON_Duplicate(kw, 1) : cJSON_CreateObject());
    cJSON_AddNumberToObject(r, "now", atof(NOW));
    return r;
}

/* Prints who's text from the first difference at off on: up to 48 bytes, JSON-escaped. */
static void show_from(const char *who, const char *text, size_t off)
{
    size_t len = strlen(text);
    char part[64];
    snprintf(part, sizeof part, "%.48s", off < len ? text + off : "");
    cJSON *s  = cJSON_CreateString(part);
    char *esc = cJSON_PrintUnformatted(s);
    print_message("      %-6s (%zu bytes) from there: %s%s\n", who, len, esc ? esc : "?",
                  len - (off < len ? off : len) > 48 ? " ..." : "");
    free(esc);
    cJSON_Delete(s);
}

/* The line of a server log that says why it stopped, in a static buffer. */
static const char *exit_reason(const char *log)
{
    static char line[300];
    const char *p    = strstr(log, "hearth serve: ");
    const char *last = NULL;
    for (; p; p = strstr(p + 1, "hearth serve: "))
        last = p;
    snprintf(line, sizeof line, "%.*s", last ? (int)strcspn(last, "\n") : 0, last ? last : "");
    return line;
}

static bool python_has_jinja2(void)
{
    const char *argv[] = {PYTHON, "-c", "import jinja2", NULL};
    if (access(PYTHON, X_OK) == 0 && tu_run(argv, NULL, NULL, NULL, 60) == 0)
        return true;
    print_message("skip: %s cannot import jinja2 (Debian: python3-jinja2)\n", PYTHON);
    return false;
}

/* The model's BOS and EOS texts as the server's templates see them (GET /props). */
static void model_bos_eos(const char *model, char **bos, char **eos)
{
    struct srv s;
    srv_start_opt(&s, model, NULL, true);
    struct http_resp r = http_get(&s, "/props");
    assert_int_equal(r.status, 200);
    cJSON *j = http_json(&r);
    assert_non_null(jstr(j, "bos_token"));
    assert_non_null(jstr(j, "eos_token"));
    *bos = strdup(jstr(j, "bos_token"));
    *eos = strdup(jstr(j, "eos_token"));
    cJSON_Delete(j);
    http_resp_free(&r);
    srv_stop(&s);
}

static void test_apply_template_matches_jinja2(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    TU_SHARED_OR_SKIP(dir, "templates");
    char tdir[4096];
    snprintf(tdir, sizeof tdir, "%s", dir);
    if (!python_has_jinja2())
        skip();
    const char *model = tu_model(SRV_MODEL);
    char *conv_text   = tu_read_file(HEARTH_TOP "/tests/e2e/templates/conversations.json", NULL);
    assert_non_null(conv_text);
    cJSON *convs = cJSON_Parse(conv_text);
    free(conv_text);
    assert_true(cJSON_GetArraySize(convs) > 0);
    int n_conv = cJSON_GetArraySize(convs);

    char *bos, *eos;
    model_bos_eos(model, &bos, &eos);
    print_message("model %s: bos_token \"%s\", eos_token \"%s\"\n", SRV_MODEL, bos, eos);

    /* the reference, one run for every pair */
    int n_tmpl   = 0;
    char **names = tu_list_files(tdir, ".jinja", &n_tmpl);
    assert_non_null(names);
    assert_true(n_tmpl > 0);
    cJSON *batch = cJSON_CreateArray();
    for (int t = 0; t < n_tmpl; t++) {
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", tdir, names[t]);
        char *src = tu_read_file(path, NULL);
        assert_non_null(src);
        for (int c = 0; c < n_conv; c++)
            cJSON_AddItemToArray(batch,
                                 reference_request(src, cJSON_GetArrayItem(convs, c), bos, eos));
        free(src);
    }
    char *batch_text   = cJSON_PrintUnformatted(batch);
    const char *argv[] = {PYTHON, HEARTH_TOP "/tests/e2e/hf_render.py", NULL};
    char *py_out = NULL, *py_err = NULL;
    int rc = tu_run(argv, batch_text, &py_out, &py_err, 600);
    free(batch_text);
    cJSON_Delete(batch);
    if (rc != 0)
        print_message("hf_render.py exited %d: %s\n", rc, py_err);
    assert_int_equal(rc, 0);
    cJSON *want = cJSON_Parse(py_out);
    free(py_out);
    free(py_err);
    assert_non_null(want);
    assert_int_equal(cJSON_GetArraySize(want), n_tmpl * n_conv);

    /* the server, one start per template */
    setenv("HEARTH_SERVE_TEMPLATE_NOW", NOW, 1);
    int identical = 0, refused = 0, mismatched = 0;
    const cJSON *ref = want->child;
    for (int t = 0; t < n_tmpl; t++) {
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", tdir, names[t]);
        const char *extra[] = {"--chat-template-file", path, NULL};
        struct srv s;
        char *log = NULL;
        bool up   = srv_start_try(&s, model, extra, &log);
        if (!up)
            print_message("%s: the server will not load it: %s\n", names[t], exit_reason(log));
        for (int c = 0; c < n_conv; c++, ref = ref->next) {
            const cJSON *conv  = cJSON_GetArrayItem(convs, c);
            const char *cname  = jstr(conv, "name");
            bool ref_ok        = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ref, "ok"));
            const char *ref_tx = ref_ok ? jstr(ref, "text") : jstr(ref, "error");
            int status         = 0;
            char *got          = NULL; /* the prompt (200) or the error message */
            if (up) {
                char *body         = template_body(conv);
                struct http_resp r = http_post(&s, "/apply-template", body);
                free(body);
                status = r.status;
                if (status == 200) {
                    cJSON *j = http_json(&r);
                    assert_non_null(jstr(j, "prompt"));
                    got = strdup(jstr(j, "prompt"));
                    cJSON_Delete(j);
                } else if (status >= 400 && status < 500) {
                    got = http_check_error(&r, status, NULL);
                } else {
                    got = strdup(r.body);
                }
                http_resp_free(&r);
            } else {
                status = 400; /* it would not load: every conversation is refused */
                got    = strdup(exit_reason(log));
            }
            if (!ref_ok && status >= 400 && status < 500) {
                refused++;
            } else if (ref_ok && status == 200 && !strcmp(got, ref_tx)) {
                identical++;
            } else {
                mismatched++;
                if (!ref_ok) {
                    print_message("MISMATCH %s x %s: jinja2 refused (%.200s), hearth %d\n",
                                  names[t], cname, ref_tx, status);
                } else if (status != 200) {
                    print_message("MISMATCH %s x %s: jinja2 rendered, hearth %d: %.300s\n",
                                  names[t], cname, status, got);
                } else {
                    size_t off = 0;
                    while (got[off] && got[off] == ref_tx[off])
                        off++;
                    print_message("MISMATCH %s x %s: first difference at byte %zu\n", names[t],
                                  cname, off);
                    show_from("jinja2", ref_tx, off);
                    show_from("hearth", got, off);
                }
            }
            free(got);
        }
        if (up)
            srv_stop(&s);
        free(log);
        free(names[t]);
    }
    unsetenv("HEARTH_SERVE_TEMPLATE_NOW");
    print_message("%d pairs: %d identical, %d refused by both, %d mismatched\n", n_tmpl * n_conv,
                  identical, refused, mismatched);
    free(names);
    free(bos);
    free(eos);
    cJSON_Delete(want);
    cJSON_Delete(convs);
    assert_int_equal(identical + refused + mismatched, n_tmpl * n_conv);
    assert_int_equal(mismatched, 0);
}

/* -------------------------------------------------------- preparation --- */

static int events_in(const char *file, bool *done)
{
    char *t = srv_slurp(file);
    int n   = sse_count(t);
    *done   = strstr(t, "data: [DONE]") != NULL;
    free(t);
    return n;
}

static void test_loop_serves_while_prompt_is_prepared(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    char *tmp = tu_tmpdir();
    char fifo[600];
    snprintf(fifo, sizeof fifo, "%s/gate", tmp);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    setenv("HEARTH_SERVE_PREP_GATE", fifo, 1);
    struct srv s;
    /* the scheduler gated too: A generates exactly the tokens the test lets it */
    const char *extra[] = {"--max-body", "8388608", "--parallel", "2", NULL};
    srv_start_gated(&s, extra);
    unsetenv("HEARTH_SERVE_PREP_GATE");

    /* A: a stream, let through its preparation and 2 steps */
    char out_a[700], out_b[700];
    snprintf(out_a, sizeof out_a, "%s/a.sse", tmp);
    snprintf(out_b, sizeof out_b, "%s/b.json", tmp);
    pid_t a = http_post_bg(&s, "/v1/completions",
                           "{\"prompt\":\"Once upon a time\",\"max_tokens\":400,"
                           "\"ignore_eos\":true,\"temperature\":0,\"stream\":true}",
                           out_a, "600");
    srv_fifo_release(srv_fifo_wait_reader(fifo));
    srv_gate_steps(&s, 2);
    srv_wait_generated(&s, 2);
    assert_true(sse_wait(out_a, 2));

    /* B: a 4 MiB prompt, held inside its preparation */
    size_t big                = 4u << 20;
    char *body                = malloc(big + 64);
    size_t off                = (size_t)sprintf(body, "{\"max_tokens\":4,\"prompt\":\"");
    static const char words[] = "Once upon a time there was a dog. ";
    for (size_t i = 0; off < big; i++)
        body[off++] = words[i % (sizeof words - 1)];
    strcpy(body + off, "\"}");
    pid_t b = http_post_bg(&s, "/v1/completions", body, out_b, "600");
    free(body);
    /* the prep thread opens the FIFO before each task: B's body is read and parsed, it is held */
    int held = srv_fifo_wait_reader(fifo);

    /* A goes on (50 more steps, each streamed) and the loop answers while B is held */
    bool a_done = false;
    int before  = events_in(out_a, &a_done);
    assert_int_equal(before, 2);
    srv_gate_steps(&s, 50);
    srv_wait_generated(&s, 52);
    bool grew = sse_wait(out_a, 52);
    int after = events_in(out_a, &a_done);
    print_message("A's events with B held: %d, then %d\n", before, after);
    assert_true(grew);
    assert_false(a_done);
    struct http_resp r = http_get(&s, "/health");
    assert_int_equal(r.status, 200);
    http_resp_free(&r);
    assert_int_equal(srv_wait_pid(b, 0), -1); /* B is still waiting for its answer */
    char *b_text = srv_slurp(out_b);
    assert_string_equal(b_text, "");
    free(b_text);

    /* B let through, the engine too: a well-formed answer (its prompt is over the slot's
     * context: 400) */
    srv_gate_lift(&s);
    srv_fifo_release(held);
    assert_int_equal(srv_wait_pid(b, 120), 0);
    char hfile[800];
    snprintf(hfile, sizeof hfile, "%s.headers", out_b);
    char *headers      = srv_slurp(hfile);
    struct http_resp q = {http_status_of(headers), srv_slurp(out_b), headers};
    print_message("B: %d %.200s\n", q.status, q.body);
    if (q.status != 200)
        free(http_check_error(&q, q.status, NULL));
    else
        cJSON_Delete(http_json(&q));
    assert_true(q.status == 200 || (q.status >= 400 && q.status < 500));
    http_resp_free(&q);

    kill(a, SIGKILL); /* A's client goes away; the server cancels it */
    srv_wait_pid(a, 30);
    srv_stop(&s);
    tu_rmtree(tmp);
    free(tmp);
}

/* ---------------------------------------------------------- endpoints --- */

static void test_props_names_template_formats(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    TU_SHARED_OR_SKIP(tpl, QWEN3_TPL);
    char path[4096];
    snprintf(path, sizeof path, "%s", tpl);
    char *src = tu_read_file(path, NULL);
    assert_non_null(src);
    struct srv s;
    const char *extra[] = {"--chat-template-file", path, NULL};
    srv_start(&s, extra);
    struct http_resp r = http_get(&s, "/props");
    assert_int_equal(r.status, 200);
    cJSON *j = http_json(&r);
    assert_string_equal(jstr(j, "chat_template"), src);
    const cJSON *caps = jget(j, "chat_template_caps");
    assert_string_equal(jstr(caps, "tool_calls"), "hermes");
    assert_string_equal(jstr(caps, "reasoning_open"), "<think>");
    assert_string_equal(jstr(caps, "reasoning_close"), "</think>");
    assert_string_equal(jstr(j, "bos_token"), "<s>"); /* the model's, whatever the template */
    assert_string_equal(jstr(j, "eos_token"), "</s>");
    cJSON_Delete(j);
    http_resp_free(&r);
    srv_stop(&s);
    free(src);
}

/* The ids of a /tokenize answer (with_pieces or not) as "1 2 3", and the pieces joined. */
static void token_list(const cJSON *toks, char *ids, size_t ids_len, char *pieces, size_t p_len)
{
    ids[0] = pieces[0] = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, toks)
    {
        double id = cJSON_IsObject(t) ? jnum(t, "id") : t->valuedouble;
        assert_true(cJSON_IsObject(t) || cJSON_IsNumber(t));
        snprintf(ids + strlen(ids), ids_len - strlen(ids), "%s%d", ids[0] ? " " : "", (int)id);
        if (cJSON_IsObject(t)) {
            assert_non_null(jstr(t, "piece"));
            strncat(pieces, jstr(t, "piece"), p_len - strlen(pieces) - 1);
        }
    }
}

static void test_tokenize_detokenize(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    const char *model  = tu_model(SRV_MODEL);
    const char *argv[] = {tu_bin(), "tokenize", "-m", model, "-p", "Hello world", "--ids", NULL};
    char *cli          = NULL;
    assert_int_equal(tu_run(argv, NULL, &cli, NULL, 60), 0);
    cli[strcspn(cli, "\n")] = 0;
    struct srv s;
    srv_start(&s, NULL);

    char ids[512], pieces[512], ids2[512], unused[8];
    struct http_resp r = http_post(&s, "/tokenize", "{\"content\":\"Hello world\"}");
    assert_int_equal(r.status, 200);
    cJSON *j = http_json(&r);
    token_list(jget(j, "tokens"), ids, sizeof ids, unused, sizeof unused);
    print_message("/tokenize: [%s]; hearth tokenize --ids: %s\n", ids, cli);
    assert_string_equal(ids, cli);
    assert_true(cJSON_IsNumber(cJSON_GetArrayItem(jget(j, "tokens"), 0)));
    cJSON *plain = cJSON_Duplicate(jget(j, "tokens"), 1);
    cJSON_Delete(j);
    http_resp_free(&r);

    r = http_post(&s, "/tokenize", "{\"content\":\"Hello world\",\"with_pieces\":true}");
    assert_int_equal(r.status, 200);
    j = http_json(&r);
    token_list(jget(j, "tokens"), ids2, sizeof ids2, pieces, sizeof pieces);
    assert_string_equal(ids2, cli);
    /* SentencePiece's dummy prefix: the first piece is " He" */
    assert_string_equal(pieces, " Hello world");
    cJSON_Delete(j);
    http_resp_free(&r);

    /* add_special: BOS (what "<s>" parses to) in front, the rest unchanged */
    r = http_post(&s, "/tokenize", "{\"content\":\"<s>\"}");
    j = http_json(&r);
    assert_int_equal(cJSON_GetArraySize(jget(j, "tokens")), 1);
    int bos = (int)cJSON_GetArrayItem(jget(j, "tokens"), 0)->valuedouble;
    cJSON_Delete(j);
    http_resp_free(&r);
    r = http_post(&s, "/tokenize", "{\"content\":\"Hello world\",\"add_special\":true}");
    assert_int_equal(r.status, 200);
    j = http_json(&r);
    token_list(jget(j, "tokens"), ids2, sizeof ids2, unused, sizeof unused);
    char want[600];
    snprintf(want, sizeof want, "%d %s", bos, cli);
    assert_string_equal(ids2, want);
    cJSON_Delete(j);
    http_resp_free(&r);

    /* the round trip: the ids give the text back (with the dummy prefix, as llama-server) */
    cJSON *back = cJSON_CreateObject();
    cJSON_AddItemToObject(back, "tokens", plain);
    char *body = cJSON_PrintUnformatted(back);
    cJSON_Delete(back);
    r = http_post(&s, "/detokenize", body);
    free(body);
    assert_int_equal(r.status, 200);
    j = http_json(&r);
    assert_string_equal(jstr(j, "content"), pieces);
    cJSON_Delete(j);
    http_resp_free(&r);
    free(cli);
    srv_stop(&s);
}

/* The count of hearth_requests_total{endpoint="ep",code="200"} in a /metrics page (0 if none). */
static int requests_ok(const char *metrics, const char *ep)
{
    char key[200];
    snprintf(key, sizeof key, "hearth_requests_total{endpoint=\"%s\",code=\"200\"} ", ep);
    const char *p = strstr(metrics, key);
    return p ? atoi(p + strlen(key)) : 0;
}

/* The response without what differs between two calls (id, created, and the cached
 * prompt tokens: the second call finds the first one's prefix, which usage's details and
 * the timings count), as text. */
static char *stable_json(const char *body)
{
    cJSON *j = cJSON_Parse(body);
    assert_non_null(j);
    cJSON_DeleteItemFromObject(j, "id");
    cJSON_DeleteItemFromObject(j, "created");
    cJSON_DeleteItemFromObject(cJSON_GetObjectItemCaseSensitive(j, "usage"),
                               "prompt_tokens_details");
    cJSON_DeleteItemFromObject(j, "timings");
    cJSON *data = cJSON_GetObjectItemCaseSensitive(j, "data");
    cJSON *m;
    cJSON_ArrayForEach(m, data) cJSON_DeleteItemFromObject(m, "created");
    char *t = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return t;
}

static void test_paths_without_v1(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    struct srv s;
    const char *extra[] = {"--ctx-size", "512", NULL};
    srv_start(&s, extra);
    static const struct {
        const char *alias, *twin, *body; /* body NULL: GET */
    } pairs[] = {
        {"/chat/completions", "/v1/chat/completions",
         "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":8,"
         "\"temperature\":0}"},
        {"/completions", "/v1/completions",
         "{\"prompt\":\"Once upon a time\",\"max_tokens\":8,\"temperature\":0}"},
        {"/models", "/v1/models", NULL},
        {"/v1/health", "/health", NULL},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        const char *method = pairs[i].body ? "POST" : "GET";
        struct http_resp x = http_req(&s, method, pairs[i].alias, pairs[i].body, NULL);
        struct http_resp y = http_req(&s, method, pairs[i].twin, pairs[i].body, NULL);
        char *xs = stable_json(x.body), *ys = stable_json(y.body);
        if (x.status != 200 || strcmp(xs, ys))
            print_message("%s answered %d %s\n%s answered %d %s\n", pairs[i].alias, x.status, xs,
                          pairs[i].twin, y.status, ys);
        assert_int_equal(x.status, 200);
        assert_int_equal(y.status, 200);
        assert_string_equal(xs, ys);
        free(xs);
        free(ys);
        http_resp_free(&x);
        http_resp_free(&y);
    }
    /* one label per endpoint: each alias counted with its twin (the health polls of
     * srv_start come first, so /health counts at least its own two) */
    struct http_resp r = http_get(&s, "/metrics");
    assert_int_equal(requests_ok(r.body, "/v1/chat/completions"), 2);
    assert_int_equal(requests_ok(r.body, "/v1/completions"), 2);
    assert_int_equal(requests_ok(r.body, "/v1/models"), 2);
    assert_true(requests_ok(r.body, "/health") >= 3);
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        char label[200];
        snprintf(label, sizeof label, "endpoint=\"%s\"", pairs[i].alias);
        assert_null(strstr(r.body, label));
    }
    assert_null(strstr(r.body, "endpoint=\"other\",code=\"200\""));
    http_resp_free(&r);
    srv_stop(&s);
}

static void test_models_report_context(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    struct srv s;
    const char *extra[] = {"--ctx-size", "640", NULL};
    srv_start(&s, extra);
    struct http_resp r = http_get(&s, "/v1/models");
    assert_int_equal(r.status, 200);
    cJSON *j       = http_json(&r);
    const cJSON *m = cJSON_GetArrayItem(jget(j, "data"), 0);
    assert_non_null(m);
    assert_int_equal((int)jnum(m, "max_model_len"), 640);
    /* stories260K's llama.context_length (hearth inspect shows it) */
    assert_int_equal((int)jnum(jget(m, "meta"), "n_ctx_train"), 2048);
    cJSON_Delete(j);
    http_resp_free(&r);
    srv_stop(&s);
}

static void test_cors(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    const char *origin[] = {"Origin: http://a.example", "Access-Control-Request-Method: POST",
                            "Access-Control-Request-Headers: authorization, content-type", NULL};
    struct srv s;
    const char *extra[] = {"--cors-origin", "http://a.example", NULL};
    srv_start(&s, extra);
    struct http_resp r = http_req(&s, "OPTIONS", "/v1/chat/completions", NULL, origin);
    if (r.status != 204)
        print_message("preflight: %d\n%s\n", r.status, r.headers);
    assert_int_equal(r.status, 204);
    assert_non_null(strcasestr(r.headers, "\nAccess-Control-Allow-Origin: http://a.example\r\n"));
    assert_non_null(strcasestr(r.headers, "\nAccess-Control-Allow-Methods: "));
    assert_non_null(strcasestr(r.headers, "\nAccess-Control-Allow-Headers: "));
    http_resp_free(&r);
    r = http_req(&s, "POST", "/v1/completions", "{\"prompt\":\"Once\",\"max_tokens\":2}", origin);
    assert_int_equal(r.status, 200);
    assert_non_null(strcasestr(r.headers, "\nAccess-Control-Allow-Origin: http://a.example\r\n"));
    http_resp_free(&r);
    srv_stop(&s);

    srv_start(&s, NULL);
    r = http_req(&s, "OPTIONS", "/v1/chat/completions", NULL, origin);
    free(http_check_error(&r, 405, NULL));
    assert_null(strcasestr(r.headers, "Access-Control-Allow-Origin"));
    http_resp_free(&r);
    srv_stop(&s);
}

static void test_raising_template_is_400(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    char *tmp = tu_tmpdir();
    char path[600];
    snprintf(path, sizeof path, "%s/raises.jinja", tmp);
    static const char tpl[] =
        "{%- if messages[0]['role'] == 'system' -%}\n"
        "{{- raise_exception('This template takes no system message, only users.') -}}\n"
        "{%- endif -%}\n"
        "{%- for m in messages -%}<{{ m['role'] }}>{{ m['content'] }}\n{%- endfor -%}\n"
        "{%- if add_generation_prompt -%}<assistant>{%- endif -%}";
    assert_int_equal(tu_write_file(path, tpl, sizeof tpl - 1), 0);
    struct srv s;
    const char *extra[] = {"--chat-template-file", path, NULL};
    srv_start(&s, extra);
    struct http_resp r = http_post(&s, "/apply-template",
                                   "{\"messages\":[{\"role\":\"system\",\"content\":\"s\"},"
                                   "{\"role\":\"user\",\"content\":\"u\"}]}");
    char *msg          = http_check_error(&r, 400, NULL);
    print_message("raise_exception: %s\n", msg);
    assert_non_null(strstr(msg, "This template takes no system message, only users."));
    free(msg);
    http_resp_free(&r);
    /* the same conversation to a chat: the same refusal */
    r   = http_post(&s, "/v1/chat/completions",
                    "{\"messages\":[{\"role\":\"system\",\"content\":\"s\"},"
                      "{\"role\":\"user\",\"content\":\"u\"}],\"max_tokens\":2}");
    msg = http_check_error(&r, 400, NULL);
    assert_non_null(strstr(msg, "This template takes no system message, only users."));
    free(msg);
    http_resp_free(&r);
    r = http_post(&s, "/apply-template", "{\"messages\":[{\"role\":\"user\",\"content\":\"u\"}]}");
    assert_int_equal(r.status, 200);
    cJSON *j = http_json(&r);
    assert_string_equal(jstr(j, "prompt"), "<user>u<assistant>");
    cJSON_Delete(j);
    http_resp_free(&r);
    srv_stop(&s);
    tu_rmtree(tmp);
    free(tmp);
}

/* A template option the server cannot use: one clear line and a non-zero exit, never a crash. */
static void test_bad_template_options(void **state)
{
    (void)state;
    TU_MODEL_OR_SKIP(model, "stories260K.gguf");
    char *tmp = tu_tmpdir();
    char path[600];
    snprintf(path, sizeof path, "%s/broken.jinja", tmp);
    assert_int_equal(tu_write_file(path, "{% if %}", 8), 0);
    static const struct {
        const char *opt, *val, *opt2, *val2;
        int rc;
        const char *says;
    } cases[] = {
        {"--chat-template-file", NULL, NULL, NULL, 1, "line 1"},
        {"--chat-template-file", "/nonexistent/t.jinja", NULL, NULL, 1, "cannot read"},
        {"--chat-template", "nope", NULL, NULL, 1, "no built-in template named 'nope'"},
        {"--chat-template-kwargs", "{bad", NULL, NULL, 1, "not valid JSON"},
        {"--chat-template-kwargs", "[1]", NULL, NULL, 1, "expected a JSON object"},
        {"--chat-template", "chatml", "--chat-template-file", NULL, 2, "give one"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *argv[] = {
            tu_bin(),      "serve",
            "-m",          model,
            "--port",      "0",
            cases[i].opt,  cases[i].val ? cases[i].val : path,
            cases[i].opt2, cases[i].opt2 ? (cases[i].val2 ? cases[i].val2 : path) : NULL,
            NULL};
        char *err = NULL;
        int rc    = tu_run(argv, NULL, NULL, &err, 60);
        if (rc != cases[i].rc || !strstr(err, cases[i].says))
            print_message("case %zu: rc %d: %s\n", i, rc, err);
        assert_int_equal(rc, cases[i].rc);
        assert_non_null(strstr(err, cases[i].says));
        free(err);
    }
    tu_rmtree(tmp);
    free(tmp);
}

/* ------------------------------------------------------------- openai --- */

static void test_openai_npm_client_for_agents(void **state)
{
    (void)state;
    if (!srv_have_curl() || !srv_have_node())
        skip();
    TU_MODEL_OR_SKIP(model_path, QWEN3);
    char model[4096];
    snprintf(model, sizeof model, "%s", model_path);
    TU_SHARED_OR_SKIP(tpl, QWEN3_TPL);
    struct srv s;
    const char *extra[] = {
        "--chat-template-file", tpl, "--ctx-size", "512", "--alias", "qwen3", NULL};
    srv_start_opt(&s, model, extra, true);
    const char *env[] = {"HEARTH_ORIGIN", s.base, "HEARTH_MODEL_ALIAS", "qwen3", "HEARTH_CTX_SIZE",
                         "512",           NULL};
    srv_node_test("agents.test.mjs", env);
    srv_stop(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_props_names_template_formats, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_tokenize_detokenize, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_paths_without_v1, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_models_report_context, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_cors, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_raising_template_is_400, srv_kill_leftovers),
        cmocka_unit_test(test_bad_template_options),
        cmocka_unit_test_teardown(test_loop_serves_while_prompt_is_prepared, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_openai_npm_client_for_agents, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_apply_template_matches_jinja2, srv_kill_leftovers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
