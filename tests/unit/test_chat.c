/*
 * test_chat.c: src/chat/chat.c. Each family's expected text is what Python's
 * jinja2 (3.1) renders from the family's reference template (quoted in
 * chat.c) on the same conversation: system, user, assistant, user, with the
 * generation prompt, and with whitespace around two messages so that the
 * families that trim are seen to trim. Where the reference template raises
 * (a system message for Mistral and Gemma), the expected text is chat.c's
 * stated rule.
 */
#include <stdlib.h>
#include <string.h>

#include "util/testutil.h"
#include "chat/chat.h"

/* clang-format off */
static const struct chat_msg conv[] = {
    {"system", "You are terse."},
    {"user", "Hi there "},
    {"assistant", " Hello!"},
    {"user", "What is 2+2?"},
};
/* clang-format on */
#define N_CONV (sizeof conv / sizeof conv[0])

static void check(enum chat_family f, const struct chat_msg *m, size_t n, bool gen, const char *bos,
                  const char *eos, const char *want)
{
    char err[HEARTH_ERR_MAX] = "";
    char *out                = NULL;
    size_t len               = 0;
    enum hearth_status st    = chat_render(f, m, n, gen, bos, eos, &out, &len, err, sizeof err);
    if (st != HEARTH_OK)
        print_message("%s: %s\n", chat_family_name(f), err);
    assert_int_equal(st, HEARTH_OK);
    if (strcmp(out, want))
        print_message("%s:\n  want: [%s]\n  got:  [%s]\n", chat_family_name(f), want, out);
    assert_string_equal(out, want);
    assert_int_equal(len, strlen(want));
    free(out);
}

static void test_chatml(void **state)
{
    (void)state;
    check(CHAT_CHATML, conv, N_CONV, true, "<s>", "</s>",
          "<|im_start|>system\nYou are terse.<|im_end|>\n"
          "<|im_start|>user\nHi there <|im_end|>\n"
          "<|im_start|>assistant\n Hello!<|im_end|>\n"
          "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
          "<|im_start|>assistant\n");
    check(CHAT_CHATML, conv + 1, 1, false, "", "", "<|im_start|>user\nHi there <|im_end|>\n");
}

static void test_llama2(void **state)
{
    (void)state;
    check(CHAT_LLAMA2, conv, N_CONV, true, "<s>", "</s>",
          "<s>[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nHi there [/INST]"
          " Hello! </s>"
          "<s>[INST] What is 2+2? [/INST]");
    /* without a system message; add_generation_prompt changes nothing */
    check(CHAT_LLAMA2, conv + 1, 1, false, "<s>", "</s>", "<s>[INST] Hi there [/INST]");
}

static void test_llama3(void **state)
{
    (void)state;
    check(CHAT_LLAMA3, conv, N_CONV, true, "<|begin_of_text|>", "<|eot_id|>",
          "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
          "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
          "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
          "<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>"
          "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

static void test_mistral(void **state)
{
    (void)state;
    /* the reference template's own domain: no system message */
    check(CHAT_MISTRAL, conv + 1, N_CONV - 1, true, "<s>", "</s>",
          "<s>[INST] Hi there  [/INST] Hello!</s>[INST] What is 2+2? [/INST]");
    /* a system message goes before the first user text */
    check(CHAT_MISTRAL, conv, N_CONV, true, "<s>", "</s>",
          "<s>[INST] You are terse.\n\nHi there  [/INST] Hello!</s>[INST] What is 2+2? [/INST]");
}

static void test_gemma(void **state)
{
    (void)state;
    check(CHAT_GEMMA, conv + 1, N_CONV - 1, true, "<bos>", "<eos>",
          "<bos><start_of_turn>user\nHi there<end_of_turn>\n"
          "<start_of_turn>model\nHello!<end_of_turn>\n"
          "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n"
          "<start_of_turn>model\n");
    check(CHAT_GEMMA, conv, 2, false, "<bos>", "<eos>",
          "<bos><start_of_turn>user\nYou are terse.\n\nHi there<end_of_turn>\n");
}

static void test_phi3(void **state)
{
    (void)state;
    check(CHAT_PHI3, conv, N_CONV, true, "<s>", "<|endoftext|>",
          "<|system|>\nYou are terse.<|end|>\n"
          "<|user|>\nHi there <|end|>\n"
          "<|assistant|>\n Hello!<|end|>\n"
          "<|user|>\nWhat is 2+2?<|end|>\n"
          "<|assistant|>\n");
    check(CHAT_PHI3, conv + 1, 1, false, "<s>", "<|endoftext|>",
          "<|user|>\nHi there <|end|>\n<|endoftext|>");
}

static void test_alternation_and_roles_refused(void **state)
{
    (void)state;
    const struct chat_msg two_users[] = {{"user", "a"}, {"user", "b"}};
    const struct chat_msg bad_role[]  = {{"tool", "a"}};
    enum chat_family strict[]         = {CHAT_LLAMA2, CHAT_MISTRAL, CHAT_GEMMA};
    char err[HEARTH_ERR_MAX];
    char *out;
    for (size_t i = 0; i < sizeof strict / sizeof strict[0]; i++) {
        err[0] = 0;
        assert_int_equal(
            chat_render(strict[i], two_users, 2, true, "<s>", "</s>", &out, NULL, err, sizeof err),
            HEARTH_EINVAL);
        assert_null(out);
        assert_non_null(strstr(err, "alternate"));
    }
    assert_int_equal(
        chat_render(CHAT_CHATML, bad_role, 1, true, "", "", &out, NULL, err, sizeof err),
        HEARTH_EINVAL);
    assert_non_null(strstr(err, "tool"));
    assert_int_equal(chat_render(CHAT_CHATML, conv, 0, true, "", "", &out, NULL, err, sizeof err),
                     HEARTH_EINVAL);
}

static void test_detect(void **state)
{
    (void)state;
    bool known = true;
    assert_int_equal(chat_detect(NULL, &known), CHAT_CHATML);
    assert_false(known);
    assert_int_equal(chat_detect("", &known), CHAT_CHATML);
    assert_false(known);
    assert_int_equal(chat_detect("{{ weird }}", &known), CHAT_CHATML);
    assert_false(known);
    struct {
        const char *tmpl;
        enum chat_family f;
    } cases[] = {
        {"{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
         "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}",
         CHAT_CHATML},
        {"{% if messages[0]['role'] == 'system' %}...{% set content = '<<SYS>>\\n' + "
         "system_message %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}",
         CHAT_LLAMA2},
        {"{{ bos_token }}{% for message in messages %}{{ '[INST] ' + message['content'] + ' "
         "[/INST]' }}{% endfor %}",
         CHAT_MISTRAL},
        {"{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' "
         "%}",
         CHAT_LLAMA3},
        {"{{ bos_token }}{{ '<start_of_turn>' + role + '\\n' }}", CHAT_GEMMA},
        {"{{'<|user|>\\n' + message['content'] + '<|end|>\\n'}}{{ '<|assistant|>\\n' }}",
         CHAT_PHI3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        known = false;
        assert_int_equal(chat_detect(cases[i].tmpl, &known), cases[i].f);
        assert_true(known);
    }
    /* the template the tiny qwen models carry */
    const char *path = tu_shared("tools/chatml.jinja");
    if (path) {
        char *t = tu_read_file(path, NULL);
        assert_int_equal(chat_detect(t, &known), CHAT_CHATML);
        assert_true(known);
        free(t);
    }
    assert_string_equal(chat_family_name(CHAT_LLAMA3), "llama3");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chatml),
        cmocka_unit_test(test_llama2),
        cmocka_unit_test(test_llama3),
        cmocka_unit_test(test_mistral),
        cmocka_unit_test(test_gemma),
        cmocka_unit_test(test_phi3),
        cmocka_unit_test(test_alternation_and_roles_refused),
        cmocka_unit_test(test_detect),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
