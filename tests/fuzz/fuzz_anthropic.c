/*
 * fuzz_anthropic.c: libFuzzer target for Anthropic's Messages parser, which
 * reads bytes straight from the network. The first input byte picks the body
 * kind (messages or count_tokens), the template the reply splits by, and
 * whether the prompt opened a reasoning block; the rest is the body. An
 * accepted request is rendered by a Jinja template with tool-call and
 * reasoning markers, and run through the reply with fake scheduler events
 * whose text comes from the input (so invalid UTF-8, odd lengths and
 * markers reach the splitter and the block and SSE writers); a refused one
 * has its error body rendered. No model is needed. Seeds (among them a
 * body as Claude Code 2.1 sends it, with context_management edits):
 * tests/fuzz/corpus/anthropic.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "serve/anthropic.h"
#include "chat/chat_template.h"
#include "fuzz_chatml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    enum anth_kind kind = (data[0] & 1) ? ANTH_MESSAGES : ANTH_COUNT_TOKENS;
    const char *body    = (const char *)data + 1;
    size_t len          = size - 1;
    struct oai_request req;
    struct oai_error e;
    if (!anth_parse(kind, body, len, &req, &e)) {
        char *j = anth_error_json(&e);
        sink += j ? strlen(j) : 0;
        free(j);
        size_t n;
        fuzz_take(anth_error_sse(&e, &n), n);
        return 0;
    }
    struct chat_template *tmpl = fuzz_template(FUZZ_CHATML("<think>\n"));
    char *text                 = NULL;
    if (oai_prompt(&req, tmpl, NULL, &text, &e))
        sink += strlen(text);
    free(text);
    const struct reply_ops *ops = &anth_reply_ops;
    void *r = ops->create(&req, 1, "msg_fuzz", 0, "m", NULL, (data[0] & 2) ? tmpl : NULL,
                          (data[0] & 4) != 0);
    if (r) {
        size_t n;
        fuzz_take(ops->start(r, &n), n);
        for (int32_t c = -1; c <= 1; c++) { /* only choice 0 exists: the others are ignored */
            struct sched_event ev = {.kind        = SCHED_EV_TEXT,
                                     .choice      = c,
                                     .text        = body,
                                     .text_len    = len,
                                     .n_prompt    = 7,
                                     .n_cached    = 3,
                                     .n_generated = 1};
            fuzz_take(ops->text(r, &ev, &n), n);
            ev.text_len = len / 2;
            fuzz_take(ops->text(r, &ev, &n), n);
        }
        struct sched_event done = {.kind        = (data[0] & 8) ? SCHED_EV_ERROR : SCHED_EV_DONE,
                                   .text        = body,
                                   .text_len    = len,
                                   .finish      = (enum sched_finish)((data[0] >> 4) % 3),
                                   .stop_hit    = (data[0] >> 6),
                                   .n_prompt    = 7,
                                   .n_cached    = 3,
                                   .n_generated = 2};
        fuzz_take(ops->done(r, &done, &n), n);
        int status;
        fuzz_take(ops->finish(r, &status, &n), n);
        ops->destroy(r);
    }
    oai_request_free(&req);
    return 0;
}
