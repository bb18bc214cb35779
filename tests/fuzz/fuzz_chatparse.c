/*
 * fuzz_chatparse.c: libFuzzer target for the tool-call and reasoning parser
 * (src/chat/chatparse.c), which reads whatever a model generates. The first
 * input byte picks the tool format (byte % CHATPARSE_TOOLS_COUNT) and the
 * reasoning markers (byte / CHATPARSE_TOOLS_COUNT, one of the seven pairs);
 * the second the options and the chunking (byte by byte, or pieces of
 * pseudo-random length seeded by it; 32: finished as cut by the token
 * limit; 64: arguments streamed); the rest is the generated text. The text is parsed whole and
 * streamed; abort() unless both give the same message, and unless every
 * delta has the stream shape chatparse.h promises. A first byte of 255
 * instead runs template detection on the rest. Seeds:
 * tests/fuzz/corpus/chatparse (written by mkcorpus_chatparse.py).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chatparse.h"

static void check(bool ok)
{
    if (!ok)
        abort();
}

/* Ends inside a UTF-8 character. */
static bool cut_utf8(const char *s, size_t n)
{
    for (size_t k = 1; k <= 3 && k <= n; k++) {
        unsigned char c = (unsigned char)s[n - k];
        if ((c & 0xC0) == 0x80)
            continue;
        size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        return need > k;
    }
    return false;
}

/* Well-formed UTF-8 (no check of overlongs or surrogates: enough to know where characters end). */
static bool valid_utf8(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        size_t need = s[i] < 0x80   ? 1
                      : s[i] < 0xC0 ? 0
                      : s[i] < 0xE0 ? 2
                      : s[i] < 0xF0 ? 3
                      : s[i] < 0xF8 ? 4
                                    : 0;
        if (!need || need > n - i)
            return false;
        for (size_t k = 1; k < need; k++)
            if ((s[i + k] & 0xC0) != 0x80)
                return false;
        i += need;
    }
    return true;
}

/* Adds one feed's deltas to m; may_cut: a text may end in a cut character (at the finish, or
 * when the input is not UTF-8). */
static void take(struct chatparse_msg *m, struct chatparse_deltas *d, int32_t *n_started,
                 bool may_cut)
{
    for (size_t i = 0; i < d->n; i++) {
        const struct chatparse_delta *e = &d->v[i];
        if (e->kind == CHATPARSE_TOOL_START) {
            check(e->index == *n_started && e->id && e->id[0] && e->name && e->name[0]);
            (*n_started)++;
            continue;
        }
        check(e->text && e->text_len > 0 && strlen(e->text) <= e->text_len);
        if (e->kind == CHATPARSE_TOOL_ARGS)
            check(e->index >= 0 && e->index < *n_started);
        else
            check(e->index == -1 && (may_cut || !cut_utf8(e->text, e->text_len)));
    }
    check(chatparse_msg_add(m, d) == HEARTH_OK);
    chatparse_deltas_clear(d);
}

static bool same(const char *a, const char *b)
{
    return !strcmp(a ? a : "", b ? b : "");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    if (data[0] == 255) {
        /* the rest is a chat template, or a rendered prompt */
        char *src = malloc(size);
        check(src != NULL);
        memcpy(src, data + 1, size - 1);
        src[size - 1] = 0;
        struct chatparse_format f;
        chatparse_detect(src, &f);
        check((f.think_open == NULL) == (f.think_close == NULL));
        chatparse_prompt_opens_thinking(&f, src, size - 1);
        free(src);
        return 0;
    }
    static const char *const think[][2] = {
        {NULL, NULL},
        {"<think>", "</think>"},
        {"[THINK]", "[/THINK]"},
        {"<|channel|>analysis<|message|>", "<|end|>"},
        {"<seed:think>", "</seed:think>"},
        {"<|START_THINKING|>", "<|END_THINKING|>"},
        {"<|channel>thought", "<channel|>"},
    };
    enum { N_THINK = sizeof think / sizeof think[0] };
    struct chatparse_format f  = {.tools = (enum chatparse_tools)(data[0] % CHATPARSE_TOOLS_COUNT)};
    f.think_open               = think[(data[0] / CHATPARSE_TOOLS_COUNT) % N_THINK][0];
    f.think_close              = think[(data[0] / CHATPARSE_TOOLS_COUNT) % N_THINK][1];
    uint8_t o                  = data[1];
    struct chatparse_opts opts = {
        .parse_tools        = !(o & 1),
        .split_reasoning    = !(o & 2),
        .start_in_reasoning = o & 4,
        .id_seed            = o,
        .call_max           = (o & 8) ? 48 : 0,
        .stream_args        = o & 64,
    };
    const char *text = (const char *)data + 2;
    size_t len       = size - 2;
    bool utf8        = valid_utf8(data + 2, len);

    struct chatparse_msg whole = {0}, streamed = {0};
    struct chatparse_deltas d = {0};
    int32_t n1 = 0, n2 = 0;
    struct chatparse *p = chatparse_new(&f, &opts);
    check(p && chatparse_feed(p, text, len, &d) == HEARTH_OK);
    take(&whole, &d, &n1, !utf8);
    check(chatparse_finish_cut(p, o & 32, &d) == HEARTH_OK);
    take(&whole, &d, &n1, true);
    check(chatparse_has_tool_calls(p) == (whole.n_calls > 0));
    chatparse_free(p);

    p            = chatparse_new(&f, &opts);
    uint32_t rng = o * 2654435761u + 1;
    for (size_t at = 0; at < len;) {
        size_t n = 1;
        if (o & 16) {
            rng = rng * 1103515245u + 12345u;
            n   = 1 + (rng >> 16) % 13;
        }
        if (n > len - at)
            n = len - at;
        check(p && chatparse_feed(p, text + at, n, &d) == HEARTH_OK);
        take(&streamed, &d, &n2, !utf8);
        at += n;
    }
    check(p && chatparse_finish_cut(p, o & 32, &d) == HEARTH_OK);
    take(&streamed, &d, &n2, true);
    chatparse_free(p);
    chatparse_deltas_free(&d);

    check(same(whole.reasoning, streamed.reasoning) && same(whole.content, streamed.content));
    check(whole.n_calls == streamed.n_calls);
    for (size_t i = 0; i < whole.n_calls; i++)
        check(!strcmp(whole.calls[i].id, streamed.calls[i].id) &&
              !strcmp(whole.calls[i].name, streamed.calls[i].name) &&
              !strcmp(whole.calls[i].arguments, streamed.calls[i].arguments));
    chatparse_msg_free(&whole);
    chatparse_msg_free(&streamed);
    return 0;
}
