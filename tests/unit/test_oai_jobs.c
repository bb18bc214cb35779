/*
 * test_oai_jobs.c: src/serve/oai_jobs.c, a validated request -> prompt ->
 * tokens -> jobs, on stories260K.gguf (models/, else ../shared/models).
 */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "util/engineutil.h"
#include "util/testutil.h"
#include "serve/openai.h"
#include "chat/chat_template.h"

static void test_jobs_from_model(void **state)
{
    (void)state;
    TU_MODEL_OR_SKIP(path, "stories260K.gguf");
    char err[HEARTH_ERR_MAX];
    struct hearth_model *model = tu_model_load("stories260K.gguf");
    assert_non_null(model);
    struct chat_template *tmpl = NULL;
    assert_int_equal(chat_template_new(model, NULL, NULL, NULL, &tmpl, err, sizeof err), HEARTH_OK);
    assert_non_null(strstr(chat_template_describe(tmpl), "chatml (built-in"));

    const char *body = "{\"prompt\":[\"Once upon a time\",\"The little dog\"],\"n\":2,"
                       "\"stop\":\"x\",\"seed\":5,\"max_tokens\":3}";
    struct oai_request r;
    struct oai_error e;
    assert_true(oai_parse(OAI_COMPLETION, body, strlen(body), &r, &e));
    struct sched_job **jobs;
    int32_t n_jobs;
    uint64_t next = 100;
    assert_true(
        oai_make_jobs(&r, tmpl, model, NULL, NULL, 64, 42, &next, &jobs, &n_jobs, NULL, &e));
    assert_int_equal(n_jobs, 4);
    assert_int_equal(next, 104);
    for (int32_t i = 0; i < 4; i++) {
        assert_int_equal(jobs[i]->id, 100 + i);
        assert_int_equal(jobs[i]->request_id, 42);
        assert_int_equal(jobs[i]->choice, i);
        assert_int_equal(jobs[i]->n_prompt, 5); /* BOS + 4 */
        assert_int_equal(jobs[i]->prompt[0], hearth_token_bos(model));
        assert_int_equal(jobs[i]->max_tokens, 3);
        assert_int_equal(jobs[i]->n_stop, 1);
        assert_int_equal(jobs[i]->top_logprobs, -1);
        assert_true(jobs[i]->sampling.seed == 5 + (uint64_t)i);
    }
    assert_int_equal(jobs[1]->prompt[1], jobs[0]->prompt[1]);
    assert_int_not_equal(jobs[2]->prompt[1], jobs[0]->prompt[1]);
    for (int32_t i = 0; i < 4; i++)
        sched_job_free(jobs[i]);
    free(jobs);
    oai_request_free(&r);

    /* a max_tokens above the room (clients send 32000): the rest of the slot */
    body = "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":32000}";
    assert_true(oai_parse(OAI_CHAT, body, strlen(body), &r, &e));
    assert_true(oai_make_jobs(&r, tmpl, model, NULL, NULL, 64, 1, &next, &jobs, &n_jobs, NULL, &e));
    assert_int_equal(n_jobs, 1);
    assert_int_equal(jobs[0]->max_tokens, 64 - jobs[0]->n_prompt);
    sched_job_free(jobs[0]);
    free(jobs);
    oai_request_free(&r);

    /* a prompt that fills the slot: 400 with both numbers */
    char big[600] = "{\"prompt\":\"";
    for (int i = 0; i < 40; i++)
        strcat(big, "the cat ");
    strcat(big, "\"}");
    assert_true(oai_parse(OAI_COMPLETION, big, strlen(big), &r, &e));
    assert_false(
        oai_make_jobs(&r, tmpl, model, NULL, NULL, 64, 1, &next, &jobs, &n_jobs, NULL, &e));
    assert_int_equal(e.status, 400);
    assert_string_equal(e.code, "context_length_exceeded");
    assert_non_null(strstr(e.message, " 64 tokens"));
    assert_null(jobs);
    oai_request_free(&r);

    /* the built-in template has no place for tools: a 400 naming the template */
    body = "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"tools\":[{\"type\":"
           "\"function\",\"function\":{\"name\":\"f\"}}]}";
    assert_true(oai_parse(OAI_CHAT, body, strlen(body), &r, &e));
    assert_false(
        oai_make_jobs(&r, tmpl, model, NULL, NULL, 64, 1, &next, &jobs, &n_jobs, NULL, &e));
    assert_int_equal(e.status, 400);
    assert_string_equal(e.param, "messages");
    assert_non_null(strstr(e.message, "tools"));
    oai_request_free(&r);
    chat_template_free(tmpl);
    hearth_model_free(model);
}

/* A template that opens <think> in its generation prompt: the jobs say so. */
static void test_jobs_thinking_prompt(void **state)
{
    (void)state;
    TU_MODEL_OR_SKIP(path, "stories260K.gguf");
    char err[HEARTH_ERR_MAX];
    struct hearth_model *model = tu_model_load("stories260K.gguf");
    assert_non_null(model);
    static const char src[] =
        "{% for m in messages %}{{ m.content }}\n{% endfor %}"
        "{% if enable_thinking is not defined or enable_thinking %}<think>\n"
        "{% else %}<think>\n\n</think>\n\n{% endif %}"
        "{% if raise_now is defined %}{{ raise_exception('no: ' ~ raise_now) }}{% endif %}";
    struct chat_template *tmpl = NULL;
    assert_int_equal(chat_template_new(model, src, "think", NULL, &tmpl, err, sizeof err),
                     HEARTH_OK);
    const char *bodies[] = {
        "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"chat_template_kwargs\":"
        "{\"enable_thinking\":false}}",
    };
    for (int i = 0; i < 2; i++) {
        struct oai_request r;
        struct oai_error e;
        struct sched_job **jobs;
        int32_t n_jobs;
        uint64_t next = 1;
        bool thinking = i == 1;
        assert_true(oai_parse(OAI_CHAT, bodies[i], strlen(bodies[i]), &r, &e));
        assert_true(oai_make_jobs(&r, tmpl, model, NULL, NULL, 64, 1, &next, &jobs, &n_jobs,
                                  &thinking, &e));
        assert_int_equal(thinking, i == 0);
        sched_job_free(jobs[0]);
        free(jobs);
        oai_request_free(&r);
    }
    /* raise_exception: a 400 that carries the template's own message */
    const char *body = "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],"
                       "\"chat_template_kwargs\":{\"raise_now\":\"roles must alternate\"}}";
    struct oai_request r;
    struct oai_error e;
    char *text = NULL;
    assert_true(oai_parse(OAI_CHAT, body, strlen(body), &r, &e));
    assert_false(oai_prompt(&r, tmpl, model, &text, &e));
    assert_int_equal(e.status, 400);
    assert_non_null(strstr(e.message, "no: roles must alternate"));
    oai_request_free(&r);
    chat_template_free(tmpl);
    hearth_model_free(model);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_jobs_from_model),
        cmocka_unit_test(test_jobs_thinking_prompt),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
