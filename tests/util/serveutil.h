/*
 * serveutil.h: what the `hearth serve` end-to-end tests share: starting the
 * real binary on 127.0.0.1 with --port 0 (it prints the port it got),
 * driving it with curl (one request at a time, or in the background to a
 * file), reading its JSON and SSE answers, and stopping it with SIGTERM
 * (it must exit 0 and, under ASan, print no error and no leak).
 *
 * Every child these helpers start is recorded; a test that fails halfway
 * leaves them running, so each test lists srv_kill_leftovers as its cmocka
 * teardown. Failures inside a helper fail the calling test (cmocka asserts)
 * with a message that says what was expected. Single-threaded: the helpers
 * share a child list and the files under struct srv's dir.
 */
#ifndef HEARTH_SERVEUTIL_H
#define HEARTH_SERVEUTIL_H

#include <stdbool.h>
#include <sys/types.h>

#include "util/testutil.h"

struct cJSON;

#define SRV_CURL  "/usr/bin/curl"
#define SRV_NODE  "/usr/bin/node"
#define SRV_MODEL "stories260K.gguf" /* tiny, real, fast; committed in models/ */

/* Sleeps ms milliseconds (for polling loops only: never to create a condition). */
void srv_sleep_ms(int ms);

/* ------------------------------------------------------------ processes --- */

/*
 * Starts argv (argv[0] a path, NULL-terminated) with stdin from /dev/null and
 * stdout and stderr to out_path (NULL: /dev/null); returns the pid (<= 0 when
 * fork failed) and records it for srv_kill_leftovers.
 */
pid_t srv_spawn(const char *const argv[], const char *out_path);

/*
 * Waits for a child of srv_spawn up to timeout_s; returns its exit status,
 * 128+signal, or -1 on timeout (it is then still running and recorded).
 */
int srv_wait_pid(pid_t pid, double timeout_s);

/*
 * cmocka teardown: SIGKILLs and reaps every recorded child still running and
 * removes the directories of the servers a failed test did not stop. Returns 0.
 */
int srv_kill_leftovers(void **state);

/* ---------------------------------------------------------------- server --- */

struct srv {
    pid_t pid;      /* the server; 0 once stopped */
    int port;       /* the port it printed */
    char *dir;      /* a temporary directory (its log, curl's files), removed by srv_stop */
    char log[512];  /* dir/server.log: the server's stdout and stderr */
    char base[64];  /* http://127.0.0.1:PORT */
    int gate;       /* srv_start_gated: the scheduler gate FIFO's write end; else -1 */
    char *gate_dir; /* the FIFO's directory (it must exist before the server), or NULL */
};

/*
 * Starts `hearth serve -m MODEL --port 0 -t 1 EXTRA...` (extra NULL-terminated,
 * may be NULL; the environment is the caller's), waits until it listens and,
 * unless wait_ready is false, until /health says 200. Fails the test, with
 * the server's log, if it does not come up within a minute.
 */
void srv_start_opt(struct srv *s, const char *model, const char *const *extra, bool wait_ready);

/* srv_start_opt with SRV_MODEL, waiting until it is ready. */
void srv_start(struct srv *s, const char *const *extra);

/*
 * As srv_start_opt(s, model, extra, true), for a server that may refuse to
 * start (a bad template): true when it is ready; false when it exited first,
 * with its log (malloc'd) in *log and nothing left to stop. Fails the test
 * on a timeout.
 */
bool srv_start_try(struct srv *s, const char *model, const char *const *extra, char **log);
/* (In both, model NULL gives no -m: extra names the model, with -hf.) */

/*
 * Starts `hearth route --port 0 ARGS...` (NULL-terminated) and waits for its
 * /health to answer 200 (an upstream up), as srv_start; srv_stop stops it.
 */
void srv_start_route(struct srv *s, const char *const *args);

/*
 * The gates that open their FIFO for reading when they get to it, and read
 * one byte (HEARTH_SERVE_PREP_GATE before a preparation while no other
 * waits there, HEARTH_SERVE_LOAD_GATE before the load): opening the write end without
 * blocking succeeds only while that reader is there, so it tells when the
 * server has reached the gate; it stays held while the write end is open and
 * empty. Returns the write end, or fails the test when nothing reaches the
 * gate in a minute.
 */
int srv_fifo_wait_reader(const char *fifo);

/* Lets the held reader through: one byte, and the write end closed. */
void srv_fifo_release(int fd);

/*
 * srv_start with the scheduler's test gate (sched.h, HEARTH_SERVE_SCHED_GATE):
 * no engine step runs until srv_gate_steps lets it, while requests are still
 * taken in and cancelled. The gate stays shut until srv_gate_lift or srv_stop
 * (which sends SIGTERM with it still shut).
 */
void srv_start_gated(struct srv *s, const char *const *extra);

/* Lets n more engine steps run; each gives every generating slot one token. */
void srv_gate_steps(struct srv *s, int n);

/* Closes the gate's write end: every step runs from now on. */
void srv_gate_lift(struct srv *s);

/*
 * Polls /slots until the busy slots have generated n tokens in all; fails the
 * test, showing /slots, when they go past n (the gate did not hold) or when a
 * minute passes.
 */
void srv_wait_generated(const struct srv *s, int n);

/*
 * SIGTERM; the server must exit 0 within a minute with no sanitizer report
 * in its log (else the test fails and the log is printed). Removes s->dir.
 */
void srv_stop(struct srv *s);
/* srv_stop that must see the server exit within timeout_s of the SIGTERM (-1 otherwise). */
void srv_stop_within(struct srv *s, double timeout_s);

/* Whole file as a malloc'd string; "" (malloc'd) when it cannot be read. */
char *srv_slurp(const char *path);

/* Kills the server outright (SIGKILL, as a crash would), reaps it and frees what srv_start made. */
void srv_kill(struct srv *s);

/* True when curl is installed; otherwise prints a skip message. */
bool srv_have_curl(void);

/* Skips the test with a message unless curl and SRV_MODEL are there. */
/* clang-format off */
#define SRV_NEED_CURL_AND_MODEL()                                                                  \
    TU_MODEL_OR_SKIP(model_path_, SRV_MODEL);                                                      \
    (void)model_path_;                                                                             \
    if (!srv_have_curl())                                                                          \
        skip();
/* clang-format on */

/* True when node and the npm packages of tests/e2e/node are there; else prints a skip message. */
bool srv_have_node(void);

/*
 * Runs `node --test tests/e2e/node/SCRIPT` (tests of the official openai npm
 * client against a server the caller started) with env set: NAME, value,
 * NAME, value, ..., NULL (unset again afterwards). Prints node's summary,
 * or all its output and fails the test when a node test failed.
 */
void srv_node_test(const char *script, const char *const *env);

/* srv_node_test for the script at path (another npm package's, as tests/e2e/agents). */
void srv_node_test_at(const char *path, const char *const *env);

/* ----------------------------------------------------------------- http --- */

struct http_resp {
    int status;    /* HTTP status; 0 when curl could not connect */
    char *body;    /* malloc'd, NUL-terminated ("" when none) */
    char *headers; /* the raw header block, malloc'd */
};

void http_resp_free(struct http_resp *r);

/*
 * One request with curl, waiting for the whole answer: method, path, body
 * (NULL: none; else sent as application/json through curl's stdin, so any
 * size), extra headers ("Name: value", NULL-terminated, may be NULL).
 */
struct http_resp http_req(const struct srv *s, const char *method, const char *path,
                          const char *body, const char *const *headers);
struct http_resp http_get(const struct srv *s, const char *path);
struct http_resp http_post(const struct srv *s, const char *path, const char *body);

/*
 * POSTs body (JSON, any size) to path in the background with `curl -N`:
 * the answer's body goes to out_path as it arrives (unbuffered, so a stream
 * can be read while it runs), its headers to out_path + ".headers". curl
 * gives up after max_time seconds (a string, as curl takes it). Returns
 * curl's pid (see srv_wait_pid; killing it is a client disconnect).
 */
pid_t http_post_bg(const struct srv *s, const char *path, const char *body, const char *out_path,
                   const char *max_time);

/* The status of the first status line in a curl header file, or 0. */
int http_status_of(const char *headers);

/* ------------------------------------------------------------------ json --- */

/* The body as JSON (the caller deletes it); fails the test, printing it, when it is not. */
struct cJSON *http_json(const struct http_resp *r);

/* o[k] as a string, or NULL when absent or not a string. */
const char *jstr(const struct cJSON *o, const char *k);

/* A story prompt of about 290 tokens on stories260K: 9 whole K/V blocks of 32, for tests of
 * the prompt cache's blocks. */
extern const char srv_long_story[];
/* o[k] as a number; fails the test when it is not one. */
double jnum(const struct cJSON *o, const char *k);
/* o[k]; fails the test, naming k, when it is absent. */
const struct cJSON *jget(const struct cJSON *o, const char *k);

/*
 * The answer must have status and OpenAI's error shape
 * ({"error":{"message","type","param","code"}}), and param when param is not
 * NULL. Returns the message (malloc'd).
 */
char *http_check_error(const struct http_resp *r, int status, const char *param);

/*
 * Splits an SSE body into its data payloads, parsed (a JSON array the caller
 * deletes); checks the framing ("data: ...\n\n" only) and that it ends with
 * exactly one "data: [DONE]".
 */
struct cJSON *sse_events(const char *body);

/* The number of complete "data: " events in an SSE text so far ([DONE] included). */
int sse_count(const char *text);

/* Polls file until it holds at least n SSE events; false after two minutes. */
bool sse_wait(const char *file, int n);

#endif
