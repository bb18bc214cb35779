/*
 * test_constrained.c: constrained output end to end, on the real binary.
 *
 * A Qwen3-architecture model with random weights (real tokenizer, 151k
 * tokens, Qwen3's own template with Hermes tool calls) at temperature 1
 * over many seeds: the model wants every token wrong, so every reply that
 * parses and validates does so because the grammar made it. The official
 * `openai` npm client sends the requests and `ajv` validates the replies
 * (tests/e2e/node/constrained.test.mjs): json_schema for schemas covering
 * what the converter supports, json_object, forced tool calls (required,
 * named, streamed), llama.cpp's grammar and json_schema fields, a reply cut
 * by max_tokens, and the 400s for what cannot be constrained.
 */
#include <stdio.h>

#include "util/serveutil.h"

#define QWEN3     "tiny-qwen3-bpe-q8_0.gguf"
#define QWEN3_TPL "templates/Qwen-Qwen3-0.6B.jinja"

static void test_constrained_through_the_openai_client(void **state)
{
    (void)state;
    if (!srv_have_curl() || !srv_have_node())
        skip();
    TU_MODEL_OR_SKIP(model_path, QWEN3);
    char model[4096];
    snprintf(model, sizeof model, "%s", model_path);
    TU_SHARED_OR_SKIP(tpl, QWEN3_TPL);
    struct srv s;
    /* --seed: the requests that carry no seed repeat run to run */
    const char *extra[] = {"--chat-template-file",
                           tpl,
                           "--ctx-size",
                           "2048",
                           "--parallel",
                           "4",
                           "--alias",
                           "qwen3",
                           "--seed",
                           "1",
                           NULL};
    srv_start_opt(&s, model, extra, true);
    const char *env[] = {
        "HEARTH_ORIGIN", s.base, "HEARTH_MODEL_ALIAS", "qwen3", "HEARTH_SEEDS", "16", NULL};
    srv_node_test("constrained.test.mjs", env);
    srv_stop(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_constrained_through_the_openai_client, srv_kill_leftovers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
