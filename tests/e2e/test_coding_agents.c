/*
 * test_coding_agents.c: the coding agents from npm against `hearth serve`, end to end:
 * Claude Code (`claude -p`, the Messages API), Codex (`codex exec`, the Responses API; twice,
 * as a model it knows and one it does not, whose requests differ) and
 * opencode (`opencode run`, Chat Completions through @ai-sdk/openai-compatible), pinned by
 * tests/e2e/agents/package-lock.json, each completing one turn on a Qwen3 model (random
 * weights, a real tokenizer) with Qwen3's own chat template; then the AI SDK (`ai` 6 with
 * @ai-sdk/openai-compatible and @ai-sdk/openai's chat and Responses models) and LangChain JS
 * (ChatOpenAI with bindTools, on Chat Completions and Responses) in
 * tests/e2e/agents/sdk.test.mjs (node --test), the same turn each.
 *
 * Each client is configured only through its own documented settings (environment, a
 * config file in a temporary HOME) and talks to nothing but the loopback server. The server
 * forces the tool round trip: `--tool-choice NAME` makes the first request of the turn call a
 * tool whose arguments are `{}` (a random-weight model fills a string argument for hundreds
 * of tokens), the client runs it, and the request carrying its result is left free;
 * `--logit-bias` puts EOS first, so that free answer ends at once and the turn with it; `-n`
 * caps every answer all the same (the agents ask for 32000 tokens or none); thinking is off
 * by default (`--chat-template-kwargs`), and Claude Code, which asks for it, is told not to
 * by its own MAX_THINKING_TOKENS=0.
 *
 * A client passes when it exits 0, every request the server answered was 2xx
 * (hearth_requests_total by endpoint and code, from /metrics), its endpoint answered at least
 * twice, and its own output shows the tool's result going back. When it fails, the test
 * prints the counters, the client's output (the 400 bodies are in it) and the fields the
 * server logged as ignored. No check rests on timing: each client runs under a generous
 * bound, polled. HEARTH_AGENTS_ONLY=test_codex (a cmocka filter) runs one test alone.
 */
#include <cjson/cJSON.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/serveutil.h"

#define QWEN3     "tiny-qwen3-bpe-q8_0.gguf"
#define QWEN3_TPL "templates/Qwen-Qwen3-0.6B.jinja"
#define AGENTS    HEARTH_TOP "/tests/e2e/agents"
#define ALIAS     "qwen3"
/* Room for a forced call without arguments: `<tool_call>\n{"name": "CronList", "arguments":
 * {}}\n</tool_call>` is ~55 characters, and grammar-constrained sampling on random weights
 * may spell it a character a token (32 to 48 tokens seen) */
#define N_PREDICT "128"
/* The model's end of text (tokenizer.ggml.eos_token_id) far ahead of every other token: a
 * free answer ends at once, as a real model's would after a few words, and a forced call
 * (its grammar keeps EOS out until the call is whole) is written in full; so every answer
 * ends by itself, under -n, as end_turn / completed / stop, which Claude Code and Codex
 * need (they take a cut answer for a failed turn) */
#define EOS_FIRST "50256+100"
#define N_CTX     "32768" /* Claude Code's first request is ~20k tokens with this tokenizer */
#define CLIENT_S  900     /* the bound on one client's turn: a few 20k-token prefills on one core */
#define PROMPT    "Say hello."

/* ------------------------------------------------------------ helpers --- */

/* True when node_modules/.bin/NAME of tests/e2e/agents is there; else prints why it skips.
 * Under the sanitizers (make asan-test) the agents' turns, several 20k-token prompts on an -O1
 * instrumented server, outrun their clients' own stream timeouts and the suite's time: the
 * server's code on these paths is run sanitized by test_anthropic, test_responses and
 * test_fields, and the SDK scripts here still run. */
static bool have_agent_bin(const char *name)
{
    if (TU_SANITIZED) {
        print_message("skip: %s under the sanitizers: its turn's prompts take minutes on an "
                      "instrumented server; make test runs it\n",
                      name);
        return false;
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/node_modules/.bin/%s", AGENTS, name);
    if (access(path, X_OK) == 0)
        return true;
    print_message("skip: %s missing: the agents' npm packages did not install (`npm ci "
                  "--prefix tests/e2e/agents`, which `sh scripts/deps.sh test` runs)\n",
                  path);
    return false;
}

/* The model and the template, copied out of tu_shared's buffers; false (skip) when absent. */
static bool shared_files(char *model, char *tpl, size_t size)
{
    const char *m = tu_model(QWEN3);
    if (!m) {
        print_message("skip: %s is in neither models/ nor shared/models\n", QWEN3);
        return false;
    }
    snprintf(model, size, "%s", m);
    const char *t = tu_shared(QWEN3_TPL);
    if (!t) {
        print_message("skip: %s not found (set HEARTH_SHARED or put shared/ beside the "
                      "checkout)\n",
                      QWEN3_TPL);
        return false;
    }
    snprintf(tpl, size, "%s", t);
    return true;
}

/*
 * Starts the server for one client: Qwen3's template, its alias, -n and --tool-choice tool.
 * Thinking off by default (a request may still ask for it): the template's think block
 * would come before a forced call and take up -n with a random length.
 */
static void start_for(struct srv *s, const char *model, const char *tpl, const char *tool)
{
    const char *extra[] = {"--chat-template-file",
                           tpl,
                           "--ctx-size",
                           N_CTX,
                           "--alias",
                           ALIAS,
                           "-n",
                           N_PREDICT,
                           "--parallel",
                           "2",
                           "--tool-choice",
                           tool,
                           "--chat-template-kwargs",
                           "{\"enable_thinking\": false}",
                           "--logit-bias",
                           EOS_FIRST,
                           NULL};
    srv_start_opt(s, model, extra, true);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void make_dir(char *out, size_t size, const char *parent, const char *name)
{
    snprintf(out, size, "%s/%s", parent, name);
    assert_int_equal(mkdir(out, 0700), 0);
}

/* Prints text line by line, indented (print_message cuts long texts, and node's or a
 * client's own "not ok" lines must not read as this binary's TAP): the last max_lines. */
static void print_tail(const char *what, const char *text, int max_lines)
{
    int n = 0;
    for (const char *p = text; *p; p++)
        n += *p == '\n';
    print_message("%s (last %d of %d lines):\n", what, n < max_lines ? n : max_lines, n);
    int skip = n > max_lines ? n - max_lines : 0;
    for (const char *line = text; *line;) {
        size_t len = strcspn(line, "\n");
        if (skip-- <= 0 && len <= 600) {
            print_message("  | %.*s\n", (int)len, line);
        } else if (skip < 0) {
            /* a long JSON event: its head, and the error it carries if any */
            const char *err  = memmem(line, len, "rror", 4);
            const char *from = err && err - line > 40 ? err - 40 : line;
            size_t rest      = len - (size_t)(from - line);
            print_message("  | %.300s ...%s%.*s\n", line, err ? " " : "",
                          err ? (int)(rest < 500 ? rest : 500) : 0, from);
        }
        line += len + (line[len] == '\n');
    }
}

/*
 * Runs client's argv (under /usr/bin/env -i, so the environment is only what argv names) with its
 * output to out_path, waiting up to CLIENT_S; returns the exit status (128+signal), or
 * fails the test when it is still running then.
 */
static int run_client(const char *client, const char *const *argv, const char *out_path)
{
    pid_t pid = srv_spawn(argv, out_path);
    assert_true(pid > 0);
    int rc = srv_wait_pid(pid, CLIENT_S);
    if (rc < 0) {
        kill(pid, SIGKILL);
        srv_wait_pid(pid, 30);
        char *out = srv_slurp(out_path);
        print_tail("the client's output", out, 40);
        free(out);
        print_message("%s did not finish its turn in %d s\n", client, CLIENT_S);
        fail();
    }
    return rc;
}

/*
 * The server's answers so far, from /metrics' hearth_requests_total{endpoint,code}: the
 * count on endpoint with a 2xx code into *ok, every other non-2xx (but /health's and
 * /metrics' own) into *bad, each line printed.
 */
static void count_answers(const struct srv *s, const char *endpoint, int *ok, int *bad)
{
    struct http_resp r = http_get(s, "/metrics");
    assert_int_equal(r.status, 200);
    *ok = *bad              = 0;
    static const char key[] = "hearth_requests_total{endpoint=\"";
    for (const char *line = r.body; *line;) {
        size_t len = strcspn(line, "\n");
        if (!strncmp(line, key, sizeof key - 1)) {
            char ep[128] = "";
            int code = 0, n = 0;
            const char *p = line + sizeof key - 1;
            size_t ep_len = strcspn(p, "\"");
            snprintf(ep, sizeof ep, "%.*s", (int)ep_len, p);
            const char *c = strstr(p, "code=\"");
            const char *v = strchr(p, '}');
            if (c && v) {
                code = atoi(c + 6);
                n    = atoi(v + 1);
            }
            bool own = !strcmp(ep, "/health") || !strcmp(ep, "/metrics");
            if (!own)
                print_message("  %s %d: %d\n", ep, code, n);
            if (code >= 200 && code < 300 && !strcmp(ep, endpoint))
                *ok += n;
            else if (!own && (code < 200 || code >= 300))
                *bad += n;
        }
        line += len + (line[len] == '\n');
    }
    http_resp_free(&r);
}

/* The server's log lines that name a request field it ignored or refused. */
static void print_field_notes(const struct srv *s)
{
    char *log = srv_slurp(s->log);
    for (const char *line = log; *line;) {
        size_t len = strcspn(line, "\n");
        if (memmem(line, len, "field", 5) || memmem(line, len, "failed", 6))
            print_message("  server: %.*s\n", (int)(len < 400 ? len : 400), line);
        line += len + (line[len] == '\n');
    }
    free(log);
}

/*
 * The verdict on one client's turn: rc 0, no non-2xx answer, at least n_min answers on
 * endpoint (the call and the request with its result, and whatever else the client asks),
 * and evidence in the client's own record (round_trip, a string it writes once the tool's
 * result went back). out is the client's output, record what it wrote of the turn (out too,
 * or a file of its own).
 */
static void check_turn(const struct srv *s, const char *client, int rc, const char *out,
                       const char *record, const char *endpoint, int n_min, const char *round_trip)
{
    int ok, bad;
    print_message("%s exited %d; the server's answers:\n", client, rc);
    count_answers(s, endpoint, &ok, &bad);
    bool tool       = strstr(record, round_trip) != NULL;
    bool ready      = rc == 0 && bad == 0 && ok >= n_min && tool;
    const char *hit = strstr(record, round_trip);
    if (hit) {
        const char *bol = hit;
        while (bol > record && bol[-1] != '\n')
            bol--;
        size_t len = strcspn(bol, "\n");
        print_message("the tool's result went back: %.*s%s\n", (int)(len < 400 ? len : 400), bol,
                      len > 400 ? " ..." : "");
    }
    if (!ready) {
        print_tail("its output", out, 30);
        print_field_notes(s);
        print_message("%s: exit %d (want 0), %d non-2xx answers (want 0), %d 2xx on %s (want "
                      ">= %d), tool result sent back (\"%s\" in its record): %s\n",
                      client, rc, bad, ok, endpoint, n_min, round_trip, tool ? "yes" : "no");
    }
    assert_int_equal(bad, 0);
    assert_int_equal(rc, 0);
    assert_true(ok >= n_min);
    assert_true(tool);
}

/* -------------------------------------------------------- Claude Code --- */

static void test_claude_code(void **state)
{
    (void)state;
    char model[4096], tpl[4096];
    if (!srv_have_curl() || !have_agent_bin("claude") || !shared_files(model, tpl, sizeof model))
        skip();
    /* CronList takes no arguments; it is in the request's tools when tool search is off */
    struct srv s;
    start_for(&s, model, tpl, "CronList");
    char *tmp = tu_tmpdir();
    char home[700], work[700], out[700];
    make_dir(home, sizeof home, tmp, "home");
    make_dir(work, sizeof work, tmp, "work");
    snprintf(out, sizeof out, "%s/claude.out", tmp);
    char env_home[800], env_url[200], env_tmp[800];
    snprintf(env_home, sizeof env_home, "HOME=%s", home);
    snprintf(env_tmp, sizeof env_tmp, "TMPDIR=%s", tmp);
    snprintf(env_url, sizeof env_url, "ANTHROPIC_BASE_URL=%s", s.base);
    const char *argv[] = {"/usr/bin/env",
                          "-i",
                          "-C",
                          work,
                          "PATH=/usr/bin:/bin",
                          env_home,
                          env_tmp,
                          env_url,
                          "ANTHROPIC_API_KEY=hearth-test",
                          "ANTHROPIC_MODEL=" ALIAS,
                          "ANTHROPIC_DEFAULT_HAIKU_MODEL=" ALIAS,
                          "ANTHROPIC_DEFAULT_SONNET_MODEL=" ALIAS,
                          "ANTHROPIC_DEFAULT_OPUS_MODEL=" ALIAS,
                          "ENABLE_TOOL_SEARCH=false",
                          "MAX_THINKING_TOKENS=0",
                          "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
                          "DISABLE_TELEMETRY=1",
                          "DISABLE_AUTOUPDATER=1",
                          "DISABLE_ERROR_REPORTING=1",
                          AGENTS "/node_modules/.bin/claude",
                          "-p",
                          PROMPT,
                          "--model",
                          ALIAS,
                          "--output-format",
                          "stream-json",
                          "--verbose",
                          "--max-turns",
                          "4",
                          NULL};
    int rc             = run_client("claude -p", argv, out);
    /* stream-json prints the user message that carries the tool's result */
    char *text = srv_slurp(out);
    check_turn(&s, "claude -p", rc, text, text, "/v1/messages", 2, "\"type\":\"tool_result\"");
    free(text);
    srv_stop(&s);
    tu_rmtree(tmp);
    free(tmp);
}

/* -------------------------------------------------------------- Codex --- */

/*
 * One `codex exec` turn with `model = codex_model` in its config.toml. The name decides the
 * request's shape: Codex sends a model it knows (gpt-5.5) with its own tool set (apply_patch
 * as a custom tool with a Lark grammar, tool_search, web_search) and text.verbosity, reasoning
 * effort; any other name gets its fallback metadata (namespace tools, web_search, a reasoning
 * summary and no effort).
 */
static void codex_turn(const char *codex_model)
{
    char model[4096], tpl[4096];
    if (!srv_have_curl() || !have_agent_bin("codex") || !shared_files(model, tpl, sizeof model))
        skip();
    /* get_goal takes no arguments */
    struct srv s;
    start_for(&s, model, tpl, "get_goal");
    char *tmp = tu_tmpdir();
    char home[700], work[700], out[700], codex_home[800], config[900];
    make_dir(home, sizeof home, tmp, "home");
    make_dir(work, sizeof work, tmp, "work");
    make_dir(codex_home, sizeof codex_home, home, ".codex");
    snprintf(out, sizeof out, "%s/codex.out", tmp);
    snprintf(config, sizeof config, "%s/config.toml", codex_home);
    char toml[2048];
    snprintf(toml, sizeof toml,
             "model = \"%s\"\n"
             "model_provider = \"hearth\"\n"
             "approval_policy = \"never\"\n"
             "sandbox_mode = \"read-only\"\n"
             "check_for_update_on_startup = false\n"
             "\n"
             "[model_providers.hearth]\n"
             "name = \"hearth\"\n"
             "base_url = \"%s/v1\"\n"
             "env_key = \"HEARTH_API_KEY\"\n"
             "wire_api = \"responses\"\n"
             "request_max_retries = 0\n"
             "stream_max_retries = 0\n"
             "\n"
             "[analytics]\n"
             "enabled = false\n",
             codex_model, s.base);
    write_file(config, toml);
    char env_home[800], env_codex[900], env_tmp[800];
    snprintf(env_home, sizeof env_home, "HOME=%s", home);
    snprintf(env_codex, sizeof env_codex, "CODEX_HOME=%s", codex_home);
    snprintf(env_tmp, sizeof env_tmp, "TMPDIR=%s", tmp);
    const char *argv[] = {"/usr/bin/env",
                          "-i",
                          "-C",
                          work,
                          "PATH=/usr/bin:/bin",
                          env_home,
                          env_codex,
                          env_tmp,
                          "HEARTH_API_KEY=hearth-test",
                          AGENTS "/node_modules/.bin/codex",
                          "exec",
                          "--skip-git-repo-check",
                          "--json",
                          PROMPT,
                          NULL};
    int rc             = run_client("codex exec", argv, out);
    /* --json prints no item for a function call; the session's rollout file
     * (CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl) records the call and its output */
    char *text        = srv_slurp(out);
    char *rollout     = NULL;
    const char *cat[] = {"/bin/sh", "-c",       "cat \"$1\"/sessions/*/*/*/*.jsonl",
                         "sh",      codex_home, NULL};
    tu_run(cat, NULL, &rollout, NULL, 60);
    check_turn(&s, "codex exec", rc, text, rollout ? rollout : "", "/v1/responses", 2,
               "\"type\":\"function_call_output\"");
    free(rollout);
    free(text);
    srv_stop(&s);
    tu_rmtree(tmp);
    free(tmp);
}

static void test_codex(void **state)
{
    (void)state;
    codex_turn(ALIAS);
}

static void test_codex_known_model(void **state)
{
    (void)state;
    codex_turn("gpt-5.5");
}

/* ----------------------------------------------------------- opencode --- */

static void test_opencode(void **state)
{
    (void)state;
    char model[4096], tpl[4096];
    if (!srv_have_curl() || !have_agent_bin("opencode") || !shared_files(model, tpl, sizeof model))
        skip();
    if (access(SRV_NODE, X_OK) != 0) {
        print_message("skip: %s not installed (the MCP tool server runs on it)\n", SRV_NODE);
        skip();
    }
    /* opencode has no tool without arguments of its own: mcp_ping.mjs lends one through
     * opencode's "mcp" setting, named SERVER_TOOL there (hearth_ping) */
    struct srv s;
    start_for(&s, model, tpl, "hearth_ping");
    char *tmp = tu_tmpdir();
    char home[700], work[700], out[700], config[800];
    make_dir(home, sizeof home, tmp, "home");
    make_dir(work, sizeof work, tmp, "work");
    snprintf(out, sizeof out, "%s/opencode.out", tmp);
    snprintf(config, sizeof config, "%s/opencode.json", tmp);
    char json[2048];
    snprintf(json, sizeof json,
             "{\"$schema\": \"https://opencode.ai/config.json\",\n"
             " \"provider\": {\"hearth\": {\"npm\": \"@ai-sdk/openai-compatible\", \"name\": "
             "\"hearth\",\n"
             "   \"options\": {\"baseURL\": \"%s/v1\", \"apiKey\": \"hearth-test\"},\n"
             "   \"models\": {\"" ALIAS "\": {\"name\": \"" ALIAS "\", \"tool_call\": true}}}},\n"
             " \"model\": \"hearth/" ALIAS "\", \"small_model\": \"hearth/" ALIAS "\",\n"
             " \"mcp\": {\"hearth\": {\"type\": \"local\", \"command\": [\"" SRV_NODE
             "\", \"" AGENTS "/mcp_ping.mjs\"], \"enabled\": true}},\n"
             " \"autoupdate\": false, \"share\": \"disabled\"}\n",
             s.base);
    write_file(config, json);
    char env_home[800], env_config[900], env_tmp[800], xdg[4][900];
    snprintf(env_home, sizeof env_home, "HOME=%s", home);
    snprintf(env_config, sizeof env_config, "OPENCODE_CONFIG=%s", config);
    snprintf(env_tmp, sizeof env_tmp, "TMPDIR=%s", tmp);
    snprintf(xdg[0], sizeof xdg[0], "XDG_CONFIG_HOME=%s/.config", home);
    snprintf(xdg[1], sizeof xdg[1], "XDG_DATA_HOME=%s/.local/share", home);
    snprintf(xdg[2], sizeof xdg[2], "XDG_CACHE_HOME=%s/.cache", home);
    snprintf(xdg[3], sizeof xdg[3], "XDG_STATE_HOME=%s/.local/state", home);
    const char *argv[] = {"/usr/bin/env",
                          "-i",
                          "-C",
                          work,
                          "PATH=/usr/bin:/bin",
                          env_home,
                          env_config,
                          env_tmp,
                          xdg[0],
                          xdg[1],
                          xdg[2],
                          xdg[3],
                          "OPENCODE_DISABLE_AUTOUPDATE=1",
                          "OPENCODE_DISABLE_MODELS_FETCH=1",
                          "OPENCODE_DISABLE_DEFAULT_PLUGINS=1",
                          "OPENCODE_DISABLE_LSP_DOWNLOAD=1",
                          "OPENCODE_DISABLE_SHARE=1",
                          "OPENCODE_DISABLE_CLAUDE_CODE=1",
                          AGENTS "/node_modules/.bin/opencode",
                          "run",
                          "--format",
                          "json",
                          PROMPT,
                          NULL};
    int rc             = run_client("opencode run", argv, out);
    /* --format json prints the tool part, completed with its output; three requests: the
     * title (small_model), the forced call, and the one carrying "pong" */
    char *text = srv_slurp(out);
    check_turn(&s, "opencode run", rc, text, text, "/v1/chat/completions", 3,
               "\"output\":\"pong\"");
    free(text);
    srv_stop(&s);
    tu_rmtree(tmp);
    free(tmp);
}

/* --------------------------------------------- AI SDK and LangChain JS --- */

static void test_ai_sdk_and_langchain(void **state)
{
    (void)state;
    char model[4096], tpl[4096];
    if (!srv_have_curl() || !shared_files(model, tpl, sizeof model))
        skip();
    if (access(SRV_NODE, X_OK) != 0 || access(AGENTS "/node_modules/ai/package.json", R_OK) != 0 ||
        access(AGENTS "/node_modules/@langchain/openai/package.json", R_OK) != 0) {
        print_message("skip: needs %s and the npm packages of tests/e2e/agents (`npm ci --prefix "
                      "tests/e2e/agents`, which `sh scripts/deps.sh test` runs)\n",
                      SRV_NODE);
        skip();
    }
    struct srv s;
    start_for(&s, model, tpl, "ping");
    const char *env[] = {"HEARTH_ORIGIN", s.base, "HEARTH_MODEL_ALIAS", ALIAS, NULL};
    srv_node_test_at(AGENTS "/sdk.test.mjs", env);
    int ok, bad;
    print_message("the server's answers:\n");
    count_answers(&s, "/v1/chat/completions", &ok, &bad);
    assert_int_equal(bad, 0);
    srv_stop(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_opencode, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_codex, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_codex_known_model, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_claude_code, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_ai_sdk_and_langchain, srv_kill_leftovers),
    };
    const char *only = getenv("HEARTH_AGENTS_ONLY"); /* e.g. test_codex: one client alone */
    if (only)
        cmocka_set_test_filter(only);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
