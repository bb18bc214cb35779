/*
 * sse.h: an incremental parser of server-sent events (the WHATWG
 * EventSource framing): lines end in LF, CRLF or CR; "data:" lines of one
 * event are joined with LF; "event:" names it; a line starting with ':' is a
 * comment; a blank line dispatches the event. Fed the body in any pieces,
 * including one byte at a time, it reports the same events. The data of one
 * event is capped (SSE_MAX_EVENT bytes); a longer one is an error.
 */
#ifndef HEARTH_BENCH_SSE_H
#define HEARTH_BENCH_SSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SSE_MAX_EVENT (4u << 20)

struct sse_parser {
    void *ctx;
    /*
     * One event: its name ("" when none was given; "message" is not
     * substituted), its data (NUL-terminated, valid until the callback returns)
     * and the offset, in the bytes fed so far, just past the blank line that
     * ended it (past its CR when it ends in CRLF: the event is complete at the
     * CR, and the offset must not depend on whether the LF came in the same
     * piece). Returns false to stop parsing (sse_feed then returns false).
     */
    bool (*on_event)(void *ctx, const char *event, const char *data, size_t data_len, uint64_t end);
    char *line; /* private: the line being collected (malloc'd) */
    size_t line_len, line_cap;
    char *data; /* private: the event's data so far (malloc'd) */
    size_t data_len, data_cap;
    bool has_data;  /* a data: line was seen in this event */
    char event[64]; /* private: the event's name (truncated to 63 bytes) */
    bool last_cr;   /* private: the previous byte was CR (a following LF is part of it) */
    uint64_t fed;   /* bytes fed so far */
    char err[120];  /* why sse_feed returned false, "" when on_event stopped it */
};

void sse_init(struct sse_parser *p, void *ctx,
              bool (*on_event)(void *, const char *, const char *, size_t, uint64_t));

/* Feeds len bytes; false when an event was too long (p->err) or on_event returned false. */
bool sse_feed(struct sse_parser *p, const char *data, size_t len);

/* Frees the buffers; p may be fed again after sse_init. */
void sse_free(struct sse_parser *p);

#endif
