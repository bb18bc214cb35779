/*
 * test_lark.c: src/grammar/lark.c, Lark grammars -> GBNF and regex. Each
 * grammar's GBNF is compiled by the engine and run on texts with
 * grammar_accepts_string; its regex goes through the JSON schema path as a
 * string's "pattern" and is run on the same texts as JSON strings, so the
 * two outputs are held to the same answers. The main case is Codex's
 * apply_patch grammar, on a real patch and on broken ones.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/testutil.h"
#include "unit/codex_fixture.h"
#include "grammar/grammar.h"
#include "grammar/lark.h"
#include "grammar/schema.h"

static const char apply_patch[] = CODEX_APPLY_PATCH_LARK;

static const char good_patch[] = "*** Begin Patch\n"
                                 "*** Update File: src/main.c\n"
                                 "@@ int main(void)\n"
                                 " {\n"
                                 "-    return 1;\n"
                                 "+    return 0;\n"
                                 " }\n"
                                 "*** Add File: docs/\"notes\".md\n"
                                 "+# Notes\n"
                                 "+\ttabs\\and backslashes\n"
                                 "*** Delete File: old.txt\n"
                                 "*** End Patch";

/* clang-format off */
static const char *const bad_patches[] = {
    "*** Begin Patch\n*** End Patch",                             /* no hunk */
    "*** Begin Patch\n*** Update File: a.c\n return 0;\n",        /* no end */
    "*** Begin Patch\n*** Add File: a.c\nno plus\n*** End Patch", /* add line without + */
    "*** Begin Patch\n*** Frobnicate File: a.c\n*** End Patch",
    "diff --git a/a.c b/a.c\n",
};
/* clang-format on */

/* The grammar g compiled from gbnf (failing the test when it does not compile). */
static struct grammar *compile(const char *gbnf)
{
    struct grammar *g = NULL;
    char err[256];
    enum hearth_status st =
        grammar_compile(gbnf, strlen(gbnf), NULL, NULL, NULL, &g, err, sizeof err);
    if (st != HEARTH_OK)
        print_message("%s\n%s\n", err, gbnf);
    assert_int_equal(st, HEARTH_OK);
    return g;
}

/* The grammar of a JSON string held to pattern, through the schema path. */
static struct grammar *compile_pattern(const char *pattern)
{
    cJSON *s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "type", "string");
    cJSON_AddStringToObject(s, "pattern", pattern);
    struct schema_gbnf *b = schema_gbnf_new();
    char err[256];
    bool ok = schema_gbnf_add(b, "root", s, err, sizeof err);
    if (!ok)
        print_message("%s\n%s\n", err, pattern);
    assert_true(ok);
    char *text        = schema_gbnf_text(b);
    struct grammar *g = compile(text);
    free(text);
    schema_gbnf_free(b);
    cJSON_Delete(s);
    return g;
}

/* Whether text is taken: by the GBNF, and (as a JSON string) by the regex; both must agree. */
static bool takes(struct grammar *g, struct grammar *rx, const char *text)
{
    bool a      = grammar_accepts_string(g, text, strlen(text));
    cJSON *item = cJSON_CreateString(text);
    char *json  = cJSON_PrintUnformatted(item);
    cJSON_Delete(item);
    bool b = grammar_accepts_string(rx, json, strlen(json));
    if (a != b)
        print_message("gbnf %d, regex %d on: %s\n", a, b, text);
    assert_true(a == b);
    free(json);
    return a;
}

/* Both outputs of the Lark grammar lark. */
static void both(const char *lark, struct grammar **g, struct grammar **rx)
{
    char err[256];
    char *gbnf = lark_to_gbnf(lark, strlen(lark), err, sizeof err);
    if (!gbnf)
        print_message("gbnf: %s\n", err);
    assert_non_null(gbnf);
    char *re = lark_to_regex(lark, strlen(lark), err, sizeof err);
    if (!re)
        print_message("regex: %s\n", err);
    assert_non_null(re);
    *g  = compile(gbnf);
    *rx = compile_pattern(re);
    free(gbnf);
    free(re);
}

static void test_apply_patch(void **state)
{
    (void)state;
    struct grammar *g, *rx;
    both(apply_patch, &g, &rx);
    assert_true(takes(g, rx, good_patch));
    char with_nl[sizeof good_patch + 1];
    snprintf(with_nl, sizeof with_nl, "%s\n", good_patch);
    assert_true(takes(g, rx, with_nl)); /* the last LF is optional */
    for (size_t k = 0; k < sizeof bad_patches / sizeof bad_patches[0]; k++)
        if (takes(g, rx, bad_patches[k])) {
            print_message("accepted: %s\n", bad_patches[k]);
            fail();
        }
    grammar_unref(g);
    grammar_unref(rx);
}

static void test_constructs(void **state)
{
    (void)state;
    struct grammar *g, *rx;
    /* priorities, ?rule and !rule, [optional], ~ repeats, ranges, aliases, comments, imports */
    both("?start.2: greet [\",\"] NAME~1..3 \"!\"~2 // comment\n"
         "!greet: \"hi\" | \"hello\" -> hello\n"
         "NAME: \" \" (\"a\"..\"c\" | DIGIT)+\n"
         "%import common.DIGIT\n",
         &g, &rx);
    assert_true(takes(g, rx, "hi ab!!"));
    assert_true(takes(g, rx, "hello, a1 b 2c!!"));
    assert_false(takes(g, rx, "hi ad!!"));
    assert_false(takes(g, rx, "hi a b c a!!"));
    assert_false(takes(g, rx, "hi ab!"));
    grammar_unref(g);
    grammar_unref(rx);
    /* what matches only "" repeated: left out */
    both("start: \"a\" [] (\"\")* E? \"b\"\nE: \"\"\n", &g, &rx);
    assert_true(takes(g, rx, "ab"));
    assert_false(takes(g, rx, "a b"));
    grammar_unref(g);
    grammar_unref(rx);
    /* regex bodies: classes, escapes, groups, bounded repeats, alternation */
    both("start: /[A-Z][a-z_\\d]{0,3}(?:-\\w+)?/ \" \" /a|b\\/c|\\.+/\n", &g, &rx);
    assert_true(takes(g, rx, "Ab_1-x9 b/c"));
    assert_true(takes(g, rx, "Q ..."));
    assert_false(takes(g, rx, "Q abc"));
    assert_false(takes(g, rx, "abc a"));
    grammar_unref(g);
    grammar_unref(rx);
}

static void test_refusals(void **state)
{
    (void)state;
    static const char *const bad[][2] = {
        {"start: a\n", "'a' is used but not defined"},
        {"rule: \"x\"\n", "no 'start' rule"},
        {"start: \"x\"\n%ignore \" \"\n", "not supported"},
        {"start: \"x\"i\n", "case-insensitive"},
        {"start: /x/i\n", "flags"},
        {"start: /(?=x)/\n", "(?:...)"},
        {"start: \"x\n", "not closed"},
        {"start: (\"x\"\n", "')' expected"},
        {"start: \"x\"\nstart: \"y\"\n", "defined twice"},
        {"start: \"x\"\n%import common.FOO\n", "common.FOO"},
        {"start: _sep{x}\n", "templates"},
        {"start: \"x\" ~ 9999\n", "repeat"},
        {"start: start \"x\" | \"y\"\n", "left-recursive"},
        {"start: /x{3,2}/\n", "{m,n}"},
        {"start: /[z-a]/\n", "out of order"},
        {"start: \"\\x00\"\n", "NUL"},
        {"start: \"\xff\"\n", "UTF-8"},
    };
    char err[256];
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        char *out = lark_to_gbnf(bad[k][0], strlen(bad[k][0]), err, sizeof err);
        if (out || !strstr(err, bad[k][1])) {
            print_message("%s -> %s (want %s)\n", bad[k][0], out ? out : err, bad[k][1]);
            fail();
        }
    }
    /* recursion: GBNF yes, a regex no */
    const char *rec = "start: \"(\" start \")\" | \"x\"\n";
    char *gbnf      = lark_to_gbnf(rec, strlen(rec), err, sizeof err);
    assert_non_null(gbnf);
    struct grammar *g = compile(gbnf);
    assert_true(grammar_accepts_string(g, "((x))", 5));
    assert_false(grammar_accepts_string(g, "((x)", 4));
    grammar_unref(g);
    free(gbnf);
    assert_null(lark_to_regex(rec, strlen(rec), err, sizeof err));
    assert_non_null(strstr(err, "refers to itself"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_apply_patch),
        cmocka_unit_test(test_constructs),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
