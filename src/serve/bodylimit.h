/*
 * bodylimit.h: a JSON 413 (in the API shape of the request's path) for a
 * request body of any size.
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
 * so evhttp never completes that request and nothing of it is kept.
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
struct oai_error;

#define BODYLIMIT_LINE 512 /* bytes of a head or chunk line kept for parsing; the rest is counted */

enum bodylimit_state {
    BL_HEAD,       /* reading a request line or a header line */
    BL_BODY,       /* inside a Content-Length body */
    BL_CHUNK_SIZE, /* at a chunk-size line */
    BL_CHUNK_DATA, /* inside a chunk's data */
    BL_CHUNK_END,  /* at the line ending a chunk's data */
    BL_TRAILER,    /* at the trailer lines after the last chunk */
    BL_PASS,       /* framing it cannot follow: evhttp judges the rest */
    BL_REFUSED,    /* answered 413: everything else is discarded */
};

struct bodylimit {
    enum bodylimit_state state;
    size_t max_body, max_head;
    uint64_t left;       /* BL_BODY, BL_CHUNK_DATA: bytes still to come */
    uint64_t body_total; /* chunked: the body's bytes so far */
    size_t head_bytes;   /* bytes of the current head so far */
    bool first_line;     /* the next head line is a request line */
    bool chunked, has_length, bad_length;
    uint64_t length;          /* Content-Length */
    size_t line_len;          /* bytes of the current line kept in line[] */
    char line[BODYLIMIT_LINE];
    char path[256];           /* the current request's path */
    char reason[160];         /* BL_REFUSED: why, one sentence */
};

/* A fresh connection's state. */
void bodylimit_init(struct bodylimit *b, size_t max_body, size_t max_head);

/*
 * Runs the next len bytes of a connection through the framing. Returns false
 * when they make a request pass a limit: b->state is then BL_REFUSED and
 * b->reason says why (the caller answers 413). In BL_REFUSED it returns false
 * at once; BL_PASS and within-limit bytes return true.
 */
bool bodylimit_feed(struct bodylimit *b, const char *data, size_t len);

/*
 * Called at each refusal with the refused request's path ("" when unknown)
 * and the error; returns the 413's JSON body in the API shape of that path
 * (malloc'd), or NULL for OpenAI's.
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
/* Frees the table (after evhttp_free). */
void bodylimit_uninstall(void);

#endif
