/*
 * test_prompt.c: the routing text of a request (src/route/prompt.c): a
 * conversation resent with one more turn reads as the old text plus more,
 * in every API's shape; different conversations, models or tools differ;
 * a body that is not JSON, or has no prompt, has no text.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "route/prompt.h"

static char *text_of(const char *path, const char *body, char *model)
{
    struct route_prompt p;
    route_prompt_read(path, body, strlen(body), 1 << 20, &p);
    if (model)
        strcpy(model, p.model);
    char *t = p.text ? strdup(p.text) : NULL;
    route_prompt_free(&p);
    return t;
}

/* a's text is a strict prefix of b's. */
static void expect_grows(const char *path, const char *a, const char *b)
{
    char *ta = text_of(path, a, NULL), *tb = text_of(path, b, NULL);
    assert_non_null(ta);
    assert_non_null(tb);
    assert_true(strlen(tb) > strlen(ta));
    assert_int_equal(strncmp(ta, tb, strlen(ta)), 0);
    free(ta), free(tb);
}

static void test_turns_grow(void **state)
{
    (void)state;
    expect_grows("/v1/chat/completions",
                 "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"S\"},"
                 "{\"role\":\"user\",\"content\":\"one\"}]}",
                 "{\"model\":\"m\",\"stream\":true,\"messages\":[{\"role\":\"system\",\"content\":"
                 "\"S\"},{\"role\":\"user\",\"content\":\"one\"},{\"role\":\"assistant\","
                 "\"content\":\"r\"},{\"role\":\"user\",\"content\":\"two\"}]}");
    expect_grows("/v1/messages",
                 "{\"system\":\"S\",\"messages\":[{\"role\":\"user\",\"content\":\"one\"}]}",
                 "{\"system\":\"S\",\"messages\":[{\"role\":\"user\",\"content\":\"one\"},"
                 "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"r\"}]}]}");
    expect_grows("/v1/responses",
                 "{\"instructions\":\"I\",\"input\":[{\"role\":\"user\",\"content\":\"a\"}]}",
                 "{\"instructions\":\"I\",\"input\":[{\"role\":\"user\",\"content\":\"a\"},"
                 "{\"type\":\"function_call_output\",\"call_id\":\"c\",\"output\":\"42\"}]}");
    expect_grows("/completions", "{\"prompt\":\"Once upon\"}", "{\"prompt\":\"Once upon a time\"}");
}

static void test_what_differs(void **state)
{
    (void)state;
    char model[128];
    char *a = text_of("/v1/chat/completions",
                      "{\"model\":\"qwen\",\"messages\":[{\"role\":\"user\",\"content\":\"ab\"},"
                      "{\"role\":\"user\",\"content\":\"c\"}]}",
                      model);
    char *b = text_of("/v1/chat/completions",
                      "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},"
                      "{\"role\":\"user\",\"content\":\"bc\"}]}",
                      NULL);
    assert_string_equal(model, "qwen");
    assert_string_not_equal(a, b); /* the pieces' boundaries count */
    char *t = text_of("/v1/chat/completions",
                      "{\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}],"
                      "\"messages\":[{\"role\":\"user\",\"content\":\"ab\"}]}",
                      NULL);
    assert_non_null(strstr(t, "\"name\":\"f\""));
    assert_true(strstr(t, "\"name\":\"f\"") < strstr(t, "ab")); /* tools first, as templates do */
    free(a), free(b), free(t);
    assert_null(text_of("/v1/chat/completions", "not json", NULL));
    assert_null(text_of("/v1/chat/completions", "{\"model\":\"m\"}", NULL));
    assert_null(text_of("/health", "{\"prompt\":\"x\"}", NULL));
    /* at most max bytes */
    struct route_prompt p;
    const char *big = "{\"prompt\":\"0123456789\"}";
    route_prompt_read("/v1/completions", big, strlen(big), 4, &p);
    assert_int_equal(p.len, 4);
    route_prompt_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_turns_grow),
        cmocka_unit_test(test_what_differs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
