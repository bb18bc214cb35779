/*
 * test_schema.c: src/grammar/schema.c, JSON schema -> GBNF. The cases live
 * in tests/unit/schema_cases.json: a schema, the texts its grammar must
 * accept, those it must reject (invalid for the schema), those it rejects
 * by design though the schema allows them ("strict": padding whitespace,
 * other spellings), or the error it must be refused with (a prefix when it
 * ends in "..."). Every grammar is
 * compiled by the engine and run with grammar_accepts_string; the same
 * texts go to python3-jsonschema (tests/unit/schema_check.py), so the data
 * is held to a real validator too. Plus exhaustive integer ranges, the
 * builder's contract and the work bounds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "grammar/grammar.h"
#include "grammar/schema.h"
#include "util/testutil.h"

#define CASES HEARTH_TOP "/tests/unit/schema_cases.json"
#define CHECK HEARTH_TOP "/tests/unit/schema_check.py"

/* ------------------------------------------------------------- helpers --- */

static cJSON *load_cases(void)
{
    char *text = tu_read_file(CASES, NULL);
    if (!text)
        fail_msg("cannot read %s", CASES);
    cJSON *j = cJSON_Parse(text);
    free(text);
    if (!j)
        fail_msg("%s is not JSON", CASES);
    return j;
}

/* The grammar of schema as rule "root", compiled; fails the test with the text on an error. */
static struct grammar *schema_grammar(const cJSON *schema, const char *name)
{
    struct schema_gbnf *b    = schema_gbnf_new();
    char err[HEARTH_ERR_MAX] = "";
    assert_non_null(b);
    if (!schema_gbnf_add(b, "root", schema, err, sizeof err))
        fail_msg("%s: refused: %s", name, err);
    char *text = schema_gbnf_text(b);
    assert_non_null(text);
    struct grammar *g = NULL;
    if (grammar_compile(text, strlen(text), "root", NULL, NULL, &g, err, sizeof err) != HEARTH_OK)
        fail_msg("%s: grammar_compile: %s\n--- grammar:\n%s", name, err, text);
    assert_true(grammar_check(text, strlen(text), "root", err, sizeof err) == HEARTH_OK);
    free(text);
    schema_gbnf_free(b);
    return g;
}

static bool accepts(const struct grammar *g, const char *s)
{
    return grammar_accepts_string(g, s, strlen(s));
}

/* The integer range case, every integer from -40 to 300 against minimum -15, maximum 237. */
static cJSON *range_case(void)
{
    cJSON *c   = cJSON_Parse("{\"name\":\"integer range -15..237, -40..300 each\",\"schema\":"
                               "{\"type\":\"integer\",\"minimum\":-15,\"maximum\":237}}");
    cJSON *acc = cJSON_AddArrayToObject(c, "accept"), *rej = cJSON_AddArrayToObject(c, "reject");
    for (int i = -40; i <= 300; i++) {
        char t[16];
        snprintf(t, sizeof t, "%d", i);
        cJSON_AddItemToArray(i >= -15 && i <= 237 ? acc : rej, cJSON_CreateString(t));
    }
    return c;
}

/* Whether err is want, or starts with want less its "..." (a message naming an engine helper). */
static bool refused_as(const char *err, const char *want)
{
    size_t n = strlen(want);
    if (n > 3 && !strcmp(want + n - 3, "..."))
        return !strncmp(err, want, n - 3);
    return !strcmp(err, want);
}

/* Runs one case; returns the number of disagreements (each printed). */
static int run_case(const cJSON *c)
{
    const char *name    = cJSON_GetObjectItem(c, "name")->valuestring;
    const cJSON *schema = cJSON_GetObjectItem(c, "schema");
    const cJSON *refuse = cJSON_GetObjectItem(c, "refuse");
    int bad             = 0;
    if (refuse) {
        struct schema_gbnf *b    = schema_gbnf_new();
        char err[HEARTH_ERR_MAX] = "";
        assert_true(schema_gbnf_rule(b, "keep", "\"k\""));
        char *before = schema_gbnf_text(b);
        if (schema_gbnf_add(b, "root", schema, err, sizeof err)) {
            print_message("%s: converted, but should be refused with: %s\n", name,
                          refuse->valuestring);
            bad++;
        } else if (!refused_as(err, refuse->valuestring)) {
            print_message("%s: refused with\n  %s\nnot\n  %s\n", name, err, refuse->valuestring);
            bad++;
        }
        /* a refused schema leaves the builder as it was */
        char *after = schema_gbnf_text(b);
        assert_string_equal(before, after);
        free(before);
        free(after);
        schema_gbnf_free(b);
        return bad;
    }
    struct grammar *g                = schema_grammar(schema, name);
    static const char *const kinds[] = {"accept", "reject", "strict"};
    for (int k = 0; k < 3; k++) {
        const cJSON *t;
        cJSON_ArrayForEach(t, cJSON_GetObjectItem(c, kinds[k]))
        {
            if (accepts(g, t->valuestring) != (k == 0)) {
                print_message("%s: %s %s but the grammar %s it\n", name, kinds[k], t->valuestring,
                              k == 0 ? "rejects" : "accepts");
                bad++;
            }
        }
    }
    grammar_unref(g);
    return bad;
}

/* --------------------------------------------------------------- cases --- */

static void test_cases(void **state)
{
    (void)state;
    cJSON *all = load_cases();
    int n = 0, bad = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(all, "cases"))
    {
        bad += run_case(c);
        n++;
    }
    cJSON_Delete(all);
    print_message("%d cases, %d disagreements\n", n, bad);
    assert_true(n > 100);
    assert_int_equal(bad, 0);
}

static void test_integer_range(void **state)
{
    (void)state;
    cJSON *c = range_case();
    assert_int_equal(run_case(c), 0);
    cJSON_Delete(c);
    /* and a few ranges more, each integer of a window checked */
    static const long ranges[][2] = {{0, 0},    {-1, -1}, {-100, 100}, {7, 1234},   {-1234, -7},
                                     {99, 100}, {-9, 9},  {10, 99},    {-999, -100}};
    for (size_t r = 0; r < sizeof ranges / sizeof ranges[0]; r++) {
        char s[128];
        snprintf(s, sizeof s, "{\"type\":\"integer\",\"minimum\":%ld,\"maximum\":%ld}",
                 ranges[r][0], ranges[r][1]);
        cJSON *schema     = cJSON_Parse(s);
        struct grammar *g = schema_grammar(schema, s);
        for (long i = -1500; i <= 1500; i++) {
            char t[24];
            snprintf(t, sizeof t, "%ld", i);
            if (accepts(g, t) != (i >= ranges[r][0] && i <= ranges[r][1]))
                fail_msg("%s: %ld is %s", s, i, accepts(g, t) ? "accepted" : "rejected");
        }
        assert_false(accepts(g, "-0"));
        assert_false(accepts(g, "00"));
        grammar_unref(g);
        cJSON_Delete(schema);
    }
}

/* The same texts held to python3-jsonschema: accepted ones valid, rejected ones invalid. */
static void test_python_agrees(void **state)
{
    (void)state;
    /* the generated cases go to a file of their own; the committed file is read as written,
       since printing it again through doubles could change its numbers */
    cJSON *gen = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(gen, "cases");
    cJSON_AddItemToArray(list, range_case());
    char *text = cJSON_Print(gen);
    cJSON_Delete(gen);
    char *dir = tu_tmpdir();
    char path[4096];
    snprintf(path, sizeof path, "%s/cases.json", dir);
    assert_int_equal(tu_write_file(path, text, strlen(text)), 0);
    free(text);
    const char *argv[] = {"/usr/bin/env", "python3", CHECK, CASES, path, NULL};
    char *out          = NULL;
    int rc             = tu_run(argv, NULL, &out, NULL, 120);
    tu_rmtree(dir);
    free(dir);
    print_message("%s", out ? out : "");
    bool skip_it = rc == 77 || rc == 127;
    if (!skip_it && rc != 0)
        fail_msg("schema_check.py exited %d: the test data disagrees with jsonschema", rc);
    free(out);
    if (skip_it) {
        print_message("skip: python3 with jsonschema is not installed (Debian: "
                      "python3-jsonschema); the grammar side ran in test_cases\n");
        skip();
    }
}

/* ------------------------------------------------------------- builder --- */

static void test_builder(void **state)
{
    (void)state;
    struct schema_gbnf *b = schema_gbnf_new();
    char err[HEARTH_ERR_MAX];
    cJSON *obj = cJSON_Parse("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}},"
                             "\"required\":[\"a\"]}");
    cJSON *arr = cJSON_Parse("{\"type\":\"array\",\"items\":{\"type\":\"string\"}}");
    /* a user rule shaped like a helper name does not collide with one */
    assert_true(schema_gbnf_rule(b, "args-a0", "\"x\""));
    assert_true(schema_gbnf_add(b, "args", obj, err, sizeof err));
    assert_true(schema_gbnf_add(b, "list", arr, err, sizeof err));
    assert_true(schema_gbnf_add_json_object(b, "any-obj", err, sizeof err));
    assert_true(schema_gbnf_rule(b, "root", "args | list | any-obj | args-a0"));
    /* names: taken, reserved for primitives, malformed */
    assert_false(schema_gbnf_add(b, "args", obj, err, sizeof err));
    assert_string_equal(err, "rule \"args\" is already defined");
    assert_false(schema_gbnf_add(b, "json-x", obj, err, sizeof err));
    assert_false(schema_gbnf_add(b, "Bad_Name", obj, err, sizeof err));
    assert_false(schema_gbnf_rule(b, "root", "\"y\""));
    assert_false(schema_gbnf_rule(b, "json-ws", "\"y\""));
    char *text        = schema_gbnf_text(b);
    struct grammar *g = NULL;
    if (grammar_compile(text, strlen(text), "root", NULL, NULL, &g, err, sizeof err) != HEARTH_OK)
        fail_msg("%s\n%s", err, text);
    /* the primitives are shared: one json-string rule for both schemas */
    assert_non_null(strstr(text, "\njson-string ::="));
    assert_null(strstr(strstr(text, "\njson-string ::=") + 1, "\njson-string ::="));
    assert_true(accepts(g, "{\"a\": \"x\"}"));
    assert_true(accepts(g, "[\"x\", \"y\"]"));
    assert_true(accepts(g, "{\"z\": [1, {}]}"));
    assert_true(accepts(g, "x"));
    assert_false(accepts(g, "[1]"));
    assert_false(accepts(g, "1"));
    grammar_unref(g);
    free(text);
    schema_gbnf_free(b);
    cJSON_Delete(obj);
    cJSON_Delete(arr);

    char *lit = schema_gbnf_literal("a\"b\\c\nd\x01é", 10);
    assert_string_equal(lit, "\"a\\\"b\\\\c\\nd\\x01é\"");
    free(lit);
}

/* The json_object convenience: any object, nothing else. */
static void test_json_object(void **state)
{
    (void)state;
    struct schema_gbnf *b = schema_gbnf_new();
    char err[HEARTH_ERR_MAX];
    assert_true(schema_gbnf_add_json_object(b, "root", err, sizeof err));
    char *text        = schema_gbnf_text(b);
    struct grammar *g = NULL;
    assert_int_equal(grammar_compile(text, strlen(text), "root", NULL, NULL, &g, err, sizeof err),
                     HEARTH_OK);
    assert_true(accepts(g, "{}"));
    assert_true(accepts(g, "{\"a\": {\"b\": [1, 2.5e3, \"c\", true, null]}}"));
    assert_true(accepts(g, "{\n  \"k\": \"v\"\n}"));
    assert_false(accepts(g, "[]"));
    assert_false(accepts(g, "\"{}\""));
    assert_false(accepts(g, "{\"a\" 1}"));
    assert_false(accepts(g, "{}x"));
    grammar_unref(g);
    free(text);
    schema_gbnf_free(b);
}

/* -------------------------------------------------------------- bounds --- */

static void refused_with(const char *schema_text, const char *want)
{
    cJSON *s = cJSON_Parse(schema_text);
    assert_non_null(s);
    struct schema_gbnf *b    = schema_gbnf_new();
    char err[HEARTH_ERR_MAX] = "";
    assert_false(schema_gbnf_add(b, "root", s, err, sizeof err));
    if (!strstr(err, want))
        fail_msg("error \"%s\" lacks \"%s\"", err, want);
    schema_gbnf_free(b);
    cJSON_Delete(s);
}

/*
 * A schema that converts, and whose grammar the compile refuses with its cost named (against a
 * vocabulary: the contexts are counted where the token sets are built).
 */
static void schema_refused(const char *json, const struct grammar_vocab *v, const char *want)
{
    cJSON *j = cJSON_Parse(json);
    assert_non_null(j);
    struct schema_gbnf *b    = schema_gbnf_new();
    char err[HEARTH_ERR_MAX] = "";
    if (!schema_gbnf_add(b, "root", j, err, sizeof err))
        fail_msg("refused by the converter: %s", err);
    char *text = schema_gbnf_text(b);
    assert_non_null(text);
    struct grammar *g = NULL;
    enum hearth_status st =
        grammar_compile(text, strlen(text), "root", v, NULL, &g, err, sizeof err);
    assert_null(g);
    if (st != HEARTH_EINVAL || !strstr(err, want))
        fail_msg("status '%s', error \"%s\"; want a 400 with \"%s\"", hearth_status_str(st), err,
                 want);
    free(text);
    schema_gbnf_free(b);
    cJSON_Delete(j);
}

/* Text of up to cap bytes built by appending; fails the test when it would not fit. */
struct text {
    char *s;
    size_t n, cap;
};

static void text_add(struct text *t, const char *fmt, int i)
{
    int k = snprintf(t->s + t->n, t->cap - t->n, fmt, i);
    assert_true(k >= 0 && (size_t)k < t->cap - t->n);
    t->n += (size_t)k;
}

/* The schema shapes whose grammars once held the preparation thread for minutes. */
static void test_costly_schemas(void **state)
{
    (void)state;
    const char *toks[257];
    uint32_t lens[257];
    uint8_t kinds[257];
    char bytes[256];
    for (int i = 0; i < 256; i++) {
        bytes[i] = (char)i;
        toks[i]  = &bytes[i];
        lens[i]  = 1;
        kinds[i] = 0;
    }
    toks[256]               = "</s>";
    lens[256]               = 4;
    kinds[256]              = 1;
    struct grammar_vocab *v = grammar_vocab_new(257, toks, lens, kinds);
    assert_non_null(v);
    struct text t = {malloc(4u << 20), 0, 4u << 20};
    assert_non_null(t.s);
    /* a 100,000-value enum: as many stacks at the start */
    text_add(&t, "{\"enum\":[\"v%d\"", 0);
    for (int i = 1; i < 100000; i++)
        text_add(&t, ",\"v%d\"", i);
    text_add(&t, "]}", 0);
    schema_refused(t.s, v, "more than 4096 parse stacks at once");
    /* 20,000 required properties */
    t.n = 0;
    text_add(&t, "{\"type\":\"object\",\"properties\":{\"p%d\":{\"type\":\"integer\"}", 0);
    for (int i = 1; i < 20000; i++)
        text_add(&t, ",\"p%d\":{\"type\":\"integer\"}", i);
    text_add(&t, "},\"required\":[\"p%d\"", 0);
    for (int i = 1; i < 20000; i++)
        text_add(&t, ",\"p%d\"", i);
    text_add(&t, "]}", 0);
    schema_refused(t.s, v, "the grammar would need more than 32768 parser states");
    /* a pattern of nested bounded repetitions */
    schema_refused("{\"type\":\"string\",\"pattern\":\"^(([a-z]){0,1000}){0,1000}$\"}", v,
                   "the grammar would need more than 32768 parser states");
    free(t.s);
    grammar_vocab_free(v);
}

static void test_bounds(void **state)
{
    (void)state;
    /* each level's anyOf is merged with its siblings twice: 2^30 nodes unless bounded */
    size_t cap = 1 << 16;
    char *s    = malloc(cap);
    size_t n   = 0;
    for (int i = 0; i < 30; i++)
        n += (size_t)snprintf(s + n, cap - n,
                              "{\"type\":\"object\",\"anyOf\":[{\"required\":[\"a\"]},{}],"
                              "\"properties\":{\"a\":");
    n += (size_t)snprintf(s + n, cap - n, "{}");
    for (int i = 0; i < 30; i++)
        n += (size_t)snprintf(s + n, cap - n, "}}");
    cJSON *j                 = cJSON_Parse(s);
    struct schema_gbnf *b    = schema_gbnf_new();
    char err[HEARTH_ERR_MAX] = "";
    assert_false(schema_gbnf_add(b, "root", j, err, sizeof err));
    if (!strstr(err, "nodes to convert") && !strstr(err, "the grammar would pass"))
        fail_msg("refused for another reason: %s", err);
    schema_gbnf_free(b);
    cJSON_Delete(j);
    /* 20 levels of a 2-wide allOf of one $ref: a DAG whose unfolding is 2^20 schemas */
    n = (size_t)snprintf(s, cap, "{\"$defs\":{\"d0\":{\"type\":\"integer\"}");
    for (int i = 1; i <= 20; i++)
        n += (size_t)snprintf(s + n, cap - n,
                              ",\"d%d\":{\"type\":\"array\",\"prefixItems\":[{\"$ref\":\"#/$defs/"
                              "d%d\"},{\"allOf\":[{\"$ref\":\"#/$defs/d%d\"}]}]}",
                              i, i - 1, i - 1);
    snprintf(s + n, cap - n, "},\"$ref\":\"#/$defs/d20\"}");
    j = cJSON_Parse(s);
    b = schema_gbnf_new();
    /* either converted (the $ref rules are shared) or refused at a bound, never a hang */
    if (schema_gbnf_add(b, "root", j, err, sizeof err)) {
        char *text = schema_gbnf_text(b);
        assert_true(strlen(text) < (8u << 20));
        if (grammar_check(text, strlen(text), "root", err, sizeof err) != HEARTH_OK)
            fail_msg("%s", err);
        free(text);
    } else {
        assert_non_null(strstr(err, "nodes to convert"));
    }
    schema_gbnf_free(b);
    cJSON_Delete(j);
    free(s);
    refused_with("{\"type\":\"array\",\"maxItems\":5000}", "over the supported 4096");
    refused_with("{\"type\":\"string\",\"pattern\":\"a{5000}\"}", "over 4096");
    refused_with("{\"type\":\"integer\",\"minimum\":-1e17}", "beyond the supported");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cases),          cmocka_unit_test(test_integer_range),
        cmocka_unit_test(test_python_agrees),  cmocka_unit_test(test_builder),
        cmocka_unit_test(test_json_object),    cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_costly_schemas),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
