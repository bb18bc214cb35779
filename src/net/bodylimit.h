/*
 * bodylimit.h: a JSON error (in the API shape of the request's path) for a
 * request body of any size, for malformed framing, and for a head that
 * stops coming; the connection timeouts.
 *
 * libevent 2.1 enforces its body limit itself and answers with an HTML page
 * (and a 417 to "Expect: 100-continue"), with no hook to replace it. So
 * hearth follows each connection's bytes as they arrive, before evhttp reads
 * them: a callback on the socket's input buffer runs the HTTP/1.1 framing
 * (request heads, Content-Length and chunked bodies) through the state
 * machine below. When a request's declared or running body size passes
 * --max-body, or its head passes the head limit, the callback writes the
 * JSON 413 straight to the socket with "Connection: close" and from then on
 * drains whatever the client still sends (a lingering close: closing at once
 * would make the client's kernel reset the connection and lose the answer),
 * so evhttp never completes that request and nothing of it is kept. Framing
 * evhttp would refuse with its HTML page (a bad request line, HTTP/9.9, a
 * broken or doubled Content-Length, Transfer-Encoding with Content-Length, a
 * bad chunk line) is refused the same way with a 400 or 505 (TRACE and
 * CONNECT with a 405), and a head or body begun but not finished within
 * its timeout gets a 408.
 *
 * The state machine is pure (bodylimit_feed), for the unit test and the fuzz
 * target. Memory: one struct bodylimit per open socket, in a table indexed
 * by file descriptor. Thread-safety: the loop thread only; one server per
 * process (the input callback finds the table through a file-scope pointer,
 * since evhttp keeps every user slot of the connection for itself).
 */
#ifndef HEARTH_BODYLIMIT_H
#define HEARTH_BODYLIMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct evhttp;
struct evhttp_request;
struct oai_error; /* net/errbody.h */

/* bytes of a head or chunk line kept for parsing; the rest is counted */
#define BODYLIMIT_LINE 512

enum bodylimit_state {
    BL_HEAD,       /* reading a request line or a header line */
    BL_BODY,       /* inside a Content-Length body */
    BL_CHUNK_SIZE, /* at a chunk-size line */
    BL_CHUNK_DATA, /* inside a chunk's data */
    BL_CHUNK_END,  /* at the line ending a chunk's data */
    BL_TRAILER,    /* at the trailer lines after the last chunk */
    BL_REFUSED,    /* answered with an error: everything else is discarded */
};

struct bodylimit {
    enum bodylimit_state state;
    size_t max_body, max_head;
    uint64_t left;       /* BL_BODY, BL_CHUNK_DATA: bytes still to come */
    uint64_t body_total; /* chunked: the body's bytes so far */
    size_t head_bytes;   /* bytes of the current head so far */
    uint32_t n_heads;    /* heads ended on this connection */
    bool first_line;     /* the next head line is a request line */
    bool chunked, has_length, has_te;
    bool header_seen; /* the head has a header line (a folded line continues it) */
    uint64_t length;  /* Content-Length */
    size_t line_len;  /* bytes of the current line kept in line[] */
    char line[BODYLIMIT_LINE];
    char path[256];   /* the current request's path */
    int status;       /* BL_REFUSED: the answer's HTTP status (400, 405, 408, 413, 505) */
    char reason[160]; /* BL_REFUSED: why, one sentence */
};

/* A fresh connection's state. */
void bodylimit_init(struct bodylimit *b, size_t max_body, size_t max_head);

/*
 * Runs the next len bytes of a connection through the framing. Returns false
 * when they make a request pass a limit or break the framing: b->state is
 * then BL_REFUSED, b->status the answer's status and b->reason says why. In
 * BL_REFUSED it returns false at once; well-framed bytes within the limits
 * return true.
 */
bool bodylimit_feed(struct bodylimit *b, const char *data, size_t len);

/*
 * Called at each refusal with the refused request's path ("" when unknown)
 * and the error (e->status is the answer's); returns its JSON body in the API
 * shape of that path (malloc'd), or NULL for OpenAI's.
 */
typedef char *(*bodylimit_refused_fn)(const char *path, const struct oai_error *e, void *user);

/*
 * Makes every connection of http pass through the limits: max_body bytes of
 * body, max_head of head. refused (may be NULL) is told of each 413 and
 * shapes its body.
 * Returns false when out of memory. One server per process.
 */
bool bodylimit_install(struct evhttp *http, size_t max_body, size_t max_head,
                       bodylimit_refused_fn refused, void *user);
/*
 * Bounds every connection of http in time (after bodylimit_install):
 * io_s seconds of silence while a body is read or of a reply not read, or
 * between requests, and head_s (<= io_s) while a connection's request line
 * and headers are due (from its opening, and from the first byte of each
 * next head). A head cut off by its timeout is answered 408 before the
 * connection closes; a silent one just closes. A reply being generated is
 * not a silence: only bytes the client does not take count.
 */
void bodylimit_timeouts(struct evhttp *http, double head_s, double io_s);

/*
 * To be called first in the server's request callback: until req's reply is
 * all sent, its connection has no read timeout (a reply being generated is
 * not a silence; the write timeout still bounds a client that does not read).
 */
void bodylimit_request(struct evhttp_request *req);

/* Frees the table (after evhttp_free). */
void bodylimit_uninstall(void);

#endif
