/*
 * benchfix.h: a scripted OpenAI streaming server inside the test's process,
 * for the tests of `hearth bench`. It listens on 127.0.0.1 (a port of its
 * own), answers each connection once (Connection: close) and serves
 *   GET  /v1/models            one model, BENCHFIX_MODEL
 *   POST /tokenize             {"content": S} -> one token per whitespace-separated word of S
 *   POST /v1/completions       streamed (SSE, chunked, one event per chunk) or whole
 *   POST /v1/chat/completions  the same in chat's shapes
 * Each streamed completion takes the next step of a script the test set (or
 * the default step): how many tokens, when they come, and which fault.
 *
 * Time is virtual: every chunk of a streamed answer is stamped, before it
 * is sent, with the time the script gives it (the request read is 0, token
 * i at ttft_ms + i * itl_ms), and benchfix_clock_at answers the bench's
 * clock (bench.h, struct bench_clock) from those stamps, so the bench's
 * figures come out exact and never depend on the machine's speed. The
 * fixture then never sleeps. In realtime mode (no test uses it; it is there
 * to measure the bench's real clock path by hand) it also sleeps until each
 * stamp, by absolute deadlines: a small program that starts a fixture, calls
 * benchfix_set_realtime and a default step of ttft 200 ms, itl 20 ms, then
 * runs `hearth bench URL` (no clock of the fixture's) should read about 200
 * and 20 in the table.
 *
 * Every completion request is recorded (its body, the prompt's word count,
 * the reply text) for the test to inspect. Thread-safe: one thread accepts,
 * one thread serves each connection; the test's thread calls the functions
 * below at any time.
 */
#ifndef HEARTH_BENCHFIX_H
#define HEARTH_BENCHFIX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BENCHFIX_MODEL "fixture-model"

enum benchfix_fault {
    BENCHFIX_NONE,        /* the whole stream: tokens, finish, usage (when asked), [DONE] */
    BENCHFIX_HTTP_500,    /* status 500 with OpenAI's error body, no stream */
    BENCHFIX_DROP,        /* the connection closed after k token events: no finish, no [DONE] */
    BENCHFIX_HOLD,        /* nothing sent until benchfix_release or benchfix_stop */
    BENCHFIX_STOP_EARLY,  /* finish_reason "stop" after k tokens, whatever ignore_eos says */
    BENCHFIX_NO_USAGE,    /* no usage chunk even when stream_options.include_usage asks */
    BENCHFIX_ERROR_EVENT, /* after k token events, an OpenAI error object as an event of the
                             200 stream, then [DONE] */
};

/* How one streamed request is answered. */
struct benchfix_step {
    int n_tokens;         /* token events; <= 0: the request's max_tokens (16 without one);
                             never more than max_tokens */
    double ttft_ms;       /* the first token's time, from the request read */
    double itl_ms;        /* between tokens */
    double ttft_first_ms; /* > 0: ttft_ms of a chat request with one user message (a
                             conversation's first turn) */
    enum benchfix_fault fault;
    int k;             /* DROP, STOP_EARLY, ERROR_EVENT: token events sent first (0..n_tokens) */
    int cached_tokens; /* usage.prompt_tokens_details.cached_tokens (<= the prompt's words) */
};

/* One completion request as the fixture read and answered it. Never changes once recorded. */
struct benchfix_req {
    bool chat;           /* /v1/chat/completions, else /v1/completions */
    bool stream;         /* "stream": true */
    char *body;          /* the request's JSON body, NUL-terminated */
    char *authorization; /* the Authorization header's value, NULL without one */
    int peer_port;       /* the client's port */
    int prompt_words;    /* usage.prompt_tokens: words of the prompt (chat: of every content) */
    int n_tokens;        /* tokens the answer has (a drop sends only the first k of them) */
    int step;            /* the script's index it took, -1 for the default step */
    enum benchfix_fault fault;
    char *reply; /* the text of its n_tokens tokens, concatenated */
};

struct benchfix;

/*
 * Starts a fixture listening on 127.0.0.1, port chosen by the system;
 * NULL (with the reason printed) when it cannot. The default step is 16
 * tokens (or max_tokens), no delay, no fault.
 */
struct benchfix *benchfix_start(void);

/*
 * Stops it: held requests are let go (closed without an answer), every
 * connection ends, the threads are joined, everything is freed. NULL is a
 * no-op.
 */
void benchfix_stop(struct benchfix *fx);

/* The port it listens on, and "http://127.0.0.1:PORT" (valid until benchfix_stop). */
int benchfix_port(const struct benchfix *fx);
const char *benchfix_url(const struct benchfix *fx);

/* The step of streamed requests once the script is used up (or when there is none). */
void benchfix_set_default(struct benchfix *fx, const struct benchfix_step *step);

/*
 * Appends n steps to the script; streamed requests take them in the order
 * they are read. A request that is not streamed always takes the default
 * step: its whole answer, or the fault (a drop closes before any byte).
 */
void benchfix_script(struct benchfix *fx, const struct benchfix_step *steps, int n);

/*
 * The reply texts: token i of an answer is a word (2 to 6 lowercase letters
 * and a space) drawn from the prompt, i and seed, so the same prompt gets the
 * same text (as a model at temperature 0). The first n_common tokens do not
 * depend on the seed; from token n_common on, two seeds that differ modulo
 * 26 give words that differ in their first letter. Default: seed 0, n_common 0.
 */
void benchfix_set_text(struct benchfix *fx, uint32_t seed, int n_common);

/* When on, POST /tokenize answers 404 (a server without it). Default off. */
void benchfix_set_no_tokenize(struct benchfix *fx, bool on);

/* When on, the fixture also sleeps until each chunk's time (realtime mode). Default off. */
void benchfix_set_realtime(struct benchfix *fx, bool on);

/*
 * The bench's clock (struct bench_clock's at, ctx = the fixture): the time,
 * in seconds from the request's read, of the chunk that holds raw byte
 * raw - 1 of the response on the connection whose client port is
 * local_port, i.e. the stamp of the first chunk whose end offset is >= raw
 * (the last chunk's for a raw past what was sent). 0 for raw 0 or an
 * unknown port. A port the system gives to a later connection names that
 * connection from then on.
 */
double benchfix_clock_at(void *fx, int local_port, uint64_t raw);

/*
 * Waits until n requests in all have been held (BENCHFIX_HOLD), each with
 * nothing sent; false when timeout_s passes first (a safety net against a
 * hang, never the condition a test waits for).
 */
bool benchfix_wait_held(struct benchfix *fx, int n, double timeout_s);

/* Lets every request held now go on with its answer (as if its fault were NONE). */
void benchfix_release(struct benchfix *fx);

/* Completion requests recorded so far, and the i-th of them (valid until benchfix_stop). */
int benchfix_n_requests(struct benchfix *fx);
const struct benchfix_req *benchfix_request(struct benchfix *fx, int i);

/* Requests to GET /v1/models and POST /tokenize so far. */
int benchfix_n_models(struct benchfix *fx);
int benchfix_n_tokenize(struct benchfix *fx);

#endif
