/*
 * fuzz_openai.c: libFuzzer target for the OpenAI request parser, which reads
 * bytes straight from the network. The first input byte picks the endpoint
 * (chat or completions), the rest is the body. An accepted request is
 * rendered in every chat family and run through the response builder with
 * fake scheduler events whose text comes from the input (so invalid UTF-8
 * and odd lengths reach the JSON writer); a refused one has its error body
 * rendered. No model is needed. Seeds: tests/fuzz/corpus/openai.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "serve/openai.h"

static volatile size_t sink;

static void feed(struct oai_response *r, const struct sched_event *ev, bool done)
{
    size_t n  = 0;
    char *out = done ? oai_response_done(r, ev, &n) : oai_response_text(r, ev, &n);
    sink += n;
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    enum oai_kind kind = (data[0] & 1) ? OAI_CHAT : OAI_COMPLETION;
    const char *body   = (const char *)data + 1;
    size_t len         = size - 1;
    struct oai_request req;
    struct oai_error e;
    if (!oai_parse(kind, body, len, (data[0] & 2) ? 64 : 0, &req, &e)) {
        char *j = oai_error_json(&e);
        sink += j ? strlen(j) : 0;
        free(j);
        return 0;
    }
    if (kind == OAI_CHAT)
        for (int f = 0; f < CHAT_FAMILY_COUNT; f++) {
            char *text = NULL;
            if (oai_chat_text(&req, (enum chat_family)f, "<s>", "</s>", &text, &e))
                sink += strlen(text);
            free(text);
        }
    int32_t n_choices      = (kind == OAI_CHAT ? 1 : req.n_prompts) * req.n;
    struct oai_response *r = oai_response_new(&req, n_choices, "fuzz", 0, "m", NULL);
    if (r) {
        size_t n;
        free(oai_response_start(r, &n));
        struct sched_logprob lp     = {1, -0.5f};
        struct sched_logprob top[3] = {{1, -0.5f}, {2, -1.0f}, {3, -3.0f}};
        for (int32_t c = -1; c <= n_choices; c++) { /* out-of-range choices must be ignored */
            struct sched_event ev = {.kind     = SCHED_EV_TEXT,
                                     .choice   = c,
                                     .text     = body,
                                     .text_len = len,
                                     .logprob  = &lp,
                                     .top      = top,
                                     .n_top    = (int32_t)(len % 4)};
            feed(r, &ev, false);
            ev.logprob  = NULL;
            ev.text_len = len / 2;
            feed(r, &ev, false);
            struct sched_event done = {.kind        = (c & 1) ? SCHED_EV_DONE : SCHED_EV_ERROR,
                                       .choice      = c,
                                       .text        = body,
                                       .text_len    = len,
                                       .finish      = SCHED_FINISH_LENGTH,
                                       .n_prompt    = 3,
                                       .n_generated = 2};
            feed(r, &done, true);
        }
        int status;
        char *fin = oai_response_finish(r, &status, &n);
        sink += n;
        free(fin);
        oai_response_free(r);
    }
    oai_request_free(&req);
    return 0;
}
