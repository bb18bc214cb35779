/*
 * fuzz_openai.c: libFuzzer target for the OpenAI request parser, which reads
 * bytes straight from the network. The first input byte picks the endpoint
 * (chat or completions) and the template the response splits by, the rest
 * is the body. An accepted request is rendered by every built-in template
 * and a Jinja one, and run through the response builder with fake
 * scheduler events whose text comes from the input (so invalid UTF-8, odd
 * lengths and tool-call markers reach the splitter and the JSON writer); a
 * refused one has its error body rendered. No model is needed. Seeds: tests/fuzz/corpus/openai.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "serve/openai.h"
#include "chat/chat_template.h"
#include "chat/chat.h"
#include "fuzz_chatml.h"

#define N_TEMPLATES (CHAT_FAMILY_COUNT + 1)

/* Every built-in family and one Jinja template with tool-call and reasoning markers. */
static struct chat_template **templates(void)
{
    static struct chat_template *t[N_TEMPLATES + 1];
    if (t[0])
        return t;
    static const char jinja[] = FUZZ_CHATML("<think>\n");
    char err[HEARTH_ERR_MAX];
    for (int f = 0; f < CHAT_FAMILY_COUNT; f++)
        if (chat_template_new(NULL, NULL, NULL, chat_family_name((enum chat_family)f), &t[f], err,
                              sizeof err) != HEARTH_OK)
            abort();
    if (chat_template_new(NULL, jinja, "fuzz", NULL, &t[CHAT_FAMILY_COUNT], err, sizeof err) !=
        HEARTH_OK)
        abort();
    return t;
}

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
    if (!oai_parse(kind, body, len, &req, &e)) {
        char *j = oai_error_json(&e);
        sink += j ? strlen(j) : 0;
        free(j);
        return 0;
    }
    struct chat_template **tmpls = templates();
    if (kind == OAI_CHAT)
        for (int t = 0; tmpls[t]; t++) {
            char *text = NULL;
            if (oai_prompt(&req, tmpls[t], NULL, &text, &e))
                sink += strlen(text);
            free(text);
        }
    int32_t n_choices          = (kind == OAI_CHAT ? 1 : req.n_prompts) * req.n;
    struct chat_template *tmpl = tmpls[(data[0] >> 1) % N_TEMPLATES];
    struct oai_response *r =
        oai_response_new(&req, n_choices, "fuzz", 0, "m", NULL, tmpl, (data[0] & 2) != 0);
    if (r) {
        size_t n;
        free(oai_response_start(r, &n));
        struct sample_logprob lp     = {1, -0.5f};
        struct sample_logprob top[3] = {{1, -0.5f}, {2, -1.0f}, {3, -3.0f}};
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
