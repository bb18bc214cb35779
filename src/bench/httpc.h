/*
 * httpc.h: the HTTP/1.1 client of `hearth bench`: one request per
 * connection (Connection: close) over plain TCP, blocking with poll(), so a
 * bench worker is one thread per request in flight. The response parser is
 * incremental and separate from the socket (httpc_parser), so it is fuzzed
 * and unit-tested on bytes alone: a status line, headers, then a body framed
 * by Content-Length, chunked transfer coding, or the connection's close.
 * Every byte the server sends is untrusted: limits are stated below and a
 * violation is an error, never a crash.
 */
#ifndef HEARTH_BENCH_HTTPC_H
#define HEARTH_BENCH_HTTPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "net/url.h" /* struct url_target: where a request goes */

/* How a request ended. Each failure is one kind of bench error (docs/bench.md: errors_*). */
enum httpc_outcome {
    HTTPC_OK,         /* a whole response was read (any status: the caller judges it) */
    HTTPC_CONNECTION, /* could not connect, or the connection closed or reset before the end */
    HTTPC_TIMEOUT,    /* the deadline passed first */
    HTTPC_PROTOCOL,   /* the bytes were not HTTP/1.x as framed above, or passed a limit */
    HTTPC_STOPPED,    /* the stop descriptor became readable (Ctrl-C): not an error */
};

#define HTTPC_MAX_HEAD 65536 /* bytes of status line and headers */

/* ------------------------------------------------------------ parser --- */

/* What the parser reports as it goes; any callback may be NULL. */
struct httpc_sink {
    void *ctx;
    /* the status line and headers are complete */
    void (*on_head)(void *ctx, int status);
    /*
     * body bytes (chunk framing removed), in order; raw_end is the count of raw
     * bytes fed to the parser up to and including data[len-1] (so byte data[i]
     * arrived as raw byte raw_end - len + i)
     */
    void (*on_body)(void *ctx, const char *data, size_t len, uint64_t raw_end);
};

struct httpc_parser {
    struct httpc_sink sink;
    int state;                 /* private */
    int status;                /* 100..999 once the status line is read, else 0 */
    bool chunked;              /* Transfer-Encoding: chunked */
    int64_t content_len;       /* Content-Length, -1 when absent */
    uint64_t body_done;        /* body bytes delivered so far */
    uint64_t chunk_left;       /* bytes left in the current chunk */
    uint64_t raw;              /* raw bytes fed so far */
    char head[HTTPC_MAX_HEAD]; /* private: the header block being collected */
    size_t head_len;
    char line[128]; /* private: a chunk-size line being collected */
    size_t line_len;
    bool done;     /* the body is complete (by length or last chunk) */
    char err[160]; /* the protocol error, when httpc_parse returned false */
};

/* Ready to parse one response. */
void httpc_parser_init(struct httpc_parser *p, const struct httpc_sink *sink);

/*
 * Feeds the next len raw bytes; bytes after the end of the response are
 * ignored. False on a protocol error (p->err says which; the parser is then
 * stuck). Never reads past data[len-1].
 */
bool httpc_parse(struct httpc_parser *p, const char *data, size_t len);

/*
 * The connection closed: true when that ends the response properly (it was
 * done, or its body runs to the close: no length and not chunked), false when
 * the response was cut short.
 */
bool httpc_parse_eof(struct httpc_parser *p);

/* ----------------------------------------------------------- request --- */

struct httpc_request {
    const char *method; /* "GET", "POST" */
    const char *path;   /* after the target's prefix, starting with '/' */
    const char *body;   /* NULL: none; else sent with Content-Type: application/json */
    size_t body_len;
    const char *api_key; /* NULL or "": no Authorization header */
    double timeout_s;    /* the whole exchange, connect to last byte; <= 0: none */
    int stop_fd;         /* -1, or a descriptor that turns readable to abandon the request */
};

struct httpc_result {
    enum httpc_outcome outcome;
    int status;     /* the response's status, 0 when none was read */
    int local_port; /* the client side's TCP port once connected, else 0 */
    char err[200];  /* what went wrong, when outcome is not HTTPC_OK */
};

/*
 * Connects to t, sends req, and feeds every received byte to a parser with
 * sink (so the caller sees the body as it arrives). on_connect, when not
 * NULL, runs once connected, before the request is sent, with the local port.
 * Blocks the calling thread; thread-safe (no shared state).
 */
void httpc_exchange(const struct url_target *t, const struct httpc_request *req,
                    const struct httpc_sink *sink, void (*on_connect)(void *ctx, int local_port),
                    struct httpc_result *res);

/*
 * httpc_exchange collecting the whole body (malloc'd, NUL-terminated, in
 * *body, NULL on failure); bodies past max_body bytes are a protocol error.
 */
void httpc_fetch(const struct url_target *t, const struct httpc_request *req, size_t max_body,
                 char **body, struct httpc_result *res);

#endif
