/*
 * fuzz_httpc.c: libFuzzer target for the response parser of `hearth
 * bench` (src/bench/httpc.c) and the SSE parser its body feeds
 * (src/bench/sse.c): every byte of both comes from the server under test.
 * The first input byte says how many cut positions follow (0..7, two bytes
 * each); the rest is the response, fed once whole and once in the pieces
 * those cuts make. Either way each body piece must be the raw bytes its
 * raw_end names, offsets must only grow, the framing's counts must agree,
 * and the verdict, status, body, body offsets and SSE events must be the
 * same. Seeds: tests/fuzz/corpus/httpc.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench/httpc.h"
#include "bench/sse.h"

struct run {
    const char *raw; /* the whole response */
    size_t raw_len;
    char *body;    /* raw_len bytes of room: a body is never longer than its response */
    uint64_t *off; /* the raw offset of each body byte */
    size_t body_len;
    uint64_t last_end; /* the previous raw_end */
    int n_head, status;
    struct sse_parser sse;
    bool sse_ok;
    uint64_t events; /* FNV-1a over every event's name, data and end */
    int n_events;
};

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static bool on_event(void *ctx, const char *event, const char *data, size_t len, uint64_t end)
{
    struct run *r = ctx;
    if (data[len] != 0 || end == 0 || end > r->body_len)
        abort();
    r->events = fnv(r->events, event, strlen(event) + 1);
    r->events = fnv(r->events, data, len);
    r->events = fnv(r->events, &end, sizeof end);
    r->n_events++;
    return true;
}

static void on_head(void *ctx, int status)
{
    struct run *r = ctx;
    if (status < 200 || status > 999)
        abort();
    r->n_head++;
    r->status = status;
}

static void on_body(void *ctx, const char *data, size_t len, uint64_t raw_end)
{
    struct run *r = ctx;
    if (len == 0 || raw_end < len || raw_end > r->raw_len || raw_end - len < r->last_end ||
        r->body_len + len > r->raw_len || memcmp(r->raw + raw_end - len, data, len) != 0)
        abort();
    r->last_end = raw_end;
    for (size_t i = 0; i < len; i++) {
        r->body[r->body_len + i] = data[i];
        r->off[r->body_len + i]  = raw_end - len + i;
    }
    r->body_len += len;
    if (r->sse_ok)
        r->sse_ok = sse_feed(&r->sse, data, len);
}

/* Parses raw in the pieces cut at cuts[0..n_cuts) (ascending); the verdict after the close. */
static bool run(struct httpc_parser *p, struct run *r, const char *raw, size_t len,
                const size_t *cuts, int n_cuts)
{
    memset(r, 0, sizeof *r);
    r->raw     = raw;
    r->raw_len = len;
    r->body    = malloc(len + 1);
    r->off     = malloc((len + 1) * sizeof *r->off);
    r->sse_ok  = true;
    r->events  = 0xcbf29ce484222325ull;
    if (!r->body || !r->off)
        abort();
    sse_init(&r->sse, r, on_event);
    struct httpc_sink sink = {.ctx = r, .on_head = on_head, .on_body = on_body};
    httpc_parser_init(p, &sink);
    bool ok   = true;
    size_t at = 0;
    for (int i = 0; i <= n_cuts && ok; i++) {
        size_t to = i < n_cuts ? cuts[i] : len;
        ok        = httpc_parse(p, raw + at, to - at);
        at        = to;
    }
    if (ok != (p->err[0] == 0) || p->body_done != r->body_len || r->n_head > 1)
        abort();
    if (ok && p->raw != len)
        abort();
    if (p->done && r->n_head != 1)
        abort();
    /* a Content-Length body stops exactly at its length */
    if (ok && !p->chunked && p->content_len >= 0 && r->n_head == 1 &&
        (p->body_done > (uint64_t)p->content_len ||
         (p->done && p->status != 204 && p->status != 304 &&
          p->body_done != (uint64_t)p->content_len)))
        abort();
    if (ok)
        ok = httpc_parse_eof(p);
    sse_free(&r->sse);
    return ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int n_cuts = data[0] & 7;
    size_t hdr = 1 + 2 * (size_t)n_cuts;
    if (size < hdr)
        return 0;
    const char *raw = (const char *)data + hdr;
    size_t len      = size - hdr;
    size_t cuts[8];
    for (int i = 0; i < n_cuts; i++) {
        cuts[i] = ((size_t)data[1 + 2 * i] << 8 | data[2 + 2 * i]) % (len + 1);
        for (int j = i; j > 0 && cuts[j - 1] > cuts[j]; j--) {
            size_t t    = cuts[j];
            cuts[j]     = cuts[j - 1];
            cuts[j - 1] = t;
        }
    }

    static struct httpc_parser pw, ps; /* 64 KiB each: kept off the stack */
    struct run w, s;
    bool ok_w = run(&pw, &w, raw, len, NULL, 0);
    bool ok_s = run(&ps, &s, raw, len, cuts, n_cuts);
    if (ok_w != ok_s || pw.status != ps.status || pw.done != ps.done || pw.chunked != ps.chunked ||
        pw.content_len != ps.content_len || w.n_head != s.n_head || w.status != s.status ||
        w.body_len != s.body_len || memcmp(w.body, s.body, w.body_len) != 0 ||
        memcmp(w.off, s.off, w.body_len * sizeof *w.off) != 0 || w.sse_ok != s.sse_ok ||
        w.n_events != s.n_events || w.events != s.events || strcmp(pw.err, ps.err) != 0)
        abort();
    free(w.body);
    free(w.off);
    free(s.body);
    free(s.off);
    return 0;
}
