/*
 * fuzz_bodylimit.c: libFuzzer target for the HTTP framing in
 * src/net/bodylimit.c, which reads every byte a client sends before
 * evhttp does. The first two input bytes pick the limits and a split
 * point; the rest is the connection's bytes, fed whole and then in two
 * pieces: the verdict, its status, the state and the path must not depend
 * on the split. Run it with -timeout: a slow input is a finding too.
 * Seeds: tests/fuzz/corpus/bodylimit.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/bodylimit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    size_t max_body = (size_t)data[0] * 4, max_head = 64 + (size_t)data[1] * 8;
    const char *s = (const char *)data + 2;
    size_t len    = size - 2;
    size_t at     = len ? (size_t)data[0] * 131 % (len + 1) : 0;
    struct bodylimit whole, split;
    bodylimit_init(&whole, max_body, max_head);
    bodylimit_init(&split, max_body, max_head);
    bool a = bodylimit_feed(&whole, s, len);
    bool b = bodylimit_feed(&split, s, at);
    if (b)
        b = bodylimit_feed(&split, s + at, len - at);
    if (a != b || whole.state != split.state || strcmp(whole.path, split.path) ||
        (whole.state == BL_REFUSED && whole.status != split.status) || whole.left != split.left ||
        whole.body_total != split.body_total)
        abort();
    return 0;
}
