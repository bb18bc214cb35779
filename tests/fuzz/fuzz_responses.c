/*
 * fuzz_responses.c: libFuzzer target for the Responses API's request parser
 * (resp_parse, bytes straight from the network) and its reply. The first
 * input byte picks the template the reply splits by and whether the prompt
 * opened a reasoning block; the rest is the body. An accepted request is
 * rendered by a Jinja template with tool-call and reasoning markers and run
 * through the reply, streaming and not, with fake scheduler events whose
 * text is the input; a refused one has its error body rendered. No model is
 * needed. Seeds: tests/fuzz/corpus/responses.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "serve/responses.h"
#include "chat/chat_template.h"
#include "fuzz_chatml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const char *body = (const char *)data + 1;
    size_t len       = size - 1;
    struct oai_request req;
    struct oai_error e;
    if (!resp_parse(body, len, &req, &e)) {
        char *j = oai_error_json(&e);
        sink += j ? strlen(j) : 0;
        free(j);
        size_t n;
        fuzz_take(resp_reply_ops.error_sse(&e, &n), n);
        return 0;
    }
    struct chat_template *tmpl = fuzz_template(FUZZ_CHATML("<think>\n</think>"));
    char *text                 = NULL;
    if (oai_prompt(&req, tmpl, NULL, &text, &e))
        sink += strlen(text);
    free(text);
    for (int stream = 0; stream < 2; stream++) {
        req.stream = stream;
        void *r    = resp_reply_ops.create(&req, 1, "resp_fuzz", 0, "m", NULL,
                                        (data[0] & 1) ? tmpl : NULL, (data[0] & 2) != 0);
        if (!r)
            continue;
        size_t n;
        char *out = resp_reply_ops.start(r, &n);
        fuzz_take(out, n);
        for (int32_t c = -1; c <= 1; c++) { /* choices other than 0 must be ignored */
            struct sched_event ev = {
                .kind = SCHED_EV_TEXT, .choice = c, .text = body, .text_len = len / 2};
            out = resp_reply_ops.text(r, &ev, &n);
            fuzz_take(out, n);
            ev.text     = body + len / 2;
            ev.text_len = len - len / 2;
            out         = resp_reply_ops.text(r, &ev, &n);
            fuzz_take(out, n);
        }
        struct sched_event done = {.kind     = (data[0] & 4) ? SCHED_EV_ERROR : SCHED_EV_DONE,
                                   .text     = body,
                                   .text_len = len,
                                   .finish =
                                       (data[0] & 8) ? SCHED_FINISH_LENGTH : SCHED_FINISH_STOP,
                                   .n_prompt    = 3,
                                   .n_generated = 2};
        out                     = resp_reply_ops.done(r, &done, &n);
        fuzz_take(out, n);
        out = resp_reply_ops.done(r, &done, &n); /* a second last event is ignored */
        fuzz_take(out, n);
        int status;
        out = resp_reply_ops.finish(r, &status, &n);
        fuzz_take(out, n);
        resp_reply_ops.destroy(r);
    }
    oai_request_free(&req);
    return 0;
}
