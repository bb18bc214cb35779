/*
 * test_gbnf_conformance.c: the GBNF scoreboard of src/grammar/. Every grammar
 * of tests/grammar/cases.json (the .gbnf files beside it and a few inline
 * ones) must compile, and grammar_accepts_string must give each of its
 * strings the recorded verdict; every grammar of its "invalid" list must be
 * refused with a message. The recorded verdicts are in turn checked against
 * tests/grammar/gbnf_ref.py, an Earley recogniser that shares nothing with
 * the engine, so a wrong expectation is caught as surely as an engine bug.
 * Prints the counts, and for a disagreement the grammar and the string.
 *
 * HEARTH_GBNF_ONLY=substring limits the run to the grammars whose file or
 * name contains it (for debugging one grammar).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "util/testutil.h"
#include "grammar/grammar.h"

#define PYTHON    "/usr/bin/python3"
#define GRAMMARS  HEARTH_TOP "/tests/grammar"
#define REFERENCE GRAMMARS "/gbnf_ref.py"

/* ------------------------------------------------------------ the cases --- */

static cJSON *load_cases(void)
{
    char *text = tu_read_file(GRAMMARS "/cases.json", NULL);
    assert_non_null(text);
    cJSON *cases = cJSON_Parse(text);
    free(text);
    assert_non_null(cases);
    return cases;
}

/* The label a grammar entry is reported under: its file, else its name. */
static const char *label(const cJSON *entry)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(entry, "file");
    return cJSON_IsString(f) ? f->valuestring
                             : cJSON_GetObjectItemCaseSensitive(entry, "name")->valuestring;
}

static bool selected(const cJSON *entry)
{
    const char *only = getenv("HEARTH_GBNF_ONLY");
    return !only || strstr(label(entry), only);
}

/* A grammar entry's text, malloc'd: the file's contents, or the inline "text". */
static char *grammar_text(const cJSON *entry, size_t *len)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(entry, "file");
    if (cJSON_IsString(f)) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", GRAMMARS, f->valuestring);
        return tu_read_file(path, len);
    }
    const char *t = cJSON_GetObjectItemCaseSensitive(entry, "text")->valuestring;
    *len          = strlen(t);
    return strdup(t);
}

static const char *root_of(const cJSON *entry)
{
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(entry, "root");
    return cJSON_IsString(r) ? r->valuestring : NULL;
}

/* s as a C string literal (quotes, escapes, multi-byte UTF-8 left as is), cut at 200 bytes. */
static void print_string(const char *what, const char *s)
{
    char buf[1024];
    size_t o = 0;
    buf[o++] = '"';
    size_t n = strlen(s);
    size_t i = 0;
    for (; i < n && i < 200; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n')
            o += (size_t)snprintf(buf + o, sizeof buf - o, "\\n");
        else if (c == '"' || c == '\\')
            o += (size_t)snprintf(buf + o, sizeof buf - o, "\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            o += (size_t)snprintf(buf + o, sizeof buf - o, "\\x%02x", c);
        else
            buf[o++] = (char)c;
    }
    o += (size_t)snprintf(buf + o, sizeof buf - o, "\"%s", i < n ? "..." : "");
    print_message("    %s %.*s (%zu bytes)\n", what, (int)o, buf, n);
}

/* ---------------------------------------------------------- the engine --- */

static void engine_verdicts(void **state)
{
    (void)state;
    cJSON *cases   = load_cases();
    int n_grammars = 0, n_strings = 0, n_accepted = 0, n_wrong = 0;
    const cJSON *entry;
    cJSON_ArrayForEach(entry, cJSON_GetObjectItemCaseSensitive(cases, "grammars"))
    {
        if (!selected(entry))
            continue;
        n_grammars++;
        size_t len = 0;
        char *text = grammar_text(entry, &len);
        assert_non_null(text);
        char err[HEARTH_ERR_MAX] = "";
        struct grammar *g        = NULL;
        enum hearth_status st    = grammar_check(text, len, root_of(entry), err, sizeof err);
        if (st != HEARTH_OK) {
            print_message("WRONG %s: grammar_check refused it: %s\n", label(entry), err);
            n_wrong++;
        }
        st = grammar_compile(text, len, root_of(entry), NULL, NULL, &g, err, sizeof err);
        free(text);
        if (st != HEARTH_OK) {
            print_message("WRONG %s: grammar_compile refused it: %s\n", label(entry), err);
            n_wrong++;
            continue;
        }
        assert_non_null(g);
        for (int want = 1; want >= 0; want--) {
            const cJSON *s;
            cJSON_ArrayForEach(s,
                               cJSON_GetObjectItemCaseSensitive(entry, want ? "accept" : "reject"))
            {
                n_strings++;
                bool got = grammar_accepts_string(g, s->valuestring, strlen(s->valuestring));
                n_accepted += got;
                if (got != (bool)want) {
                    n_wrong++;
                    print_message("WRONG %s: the engine %s a string it should %s:\n", label(entry),
                                  got ? "accepts" : "rejects", want ? "accept" : "reject");
                    print_string("string", s->valuestring);
                }
            }
        }
        grammar_unref(g);
    }
    cJSON_Delete(cases);
    print_message("engine: %d grammars, %d strings (%d accepted, %d rejected), %d wrong\n",
                  n_grammars, n_strings, n_accepted, n_strings - n_accepted, n_wrong);
    assert_true(n_grammars > 0);
    assert_int_equal(n_wrong, 0);
}

static void engine_refuses_invalid(void **state)
{
    (void)state;
    cJSON *cases  = load_cases();
    int n_invalid = 0, n_wrong = 0;
    const cJSON *entry;
    cJSON_ArrayForEach(entry, cJSON_GetObjectItemCaseSensitive(cases, "invalid"))
    {
        const char *name = cJSON_GetObjectItemCaseSensitive(entry, "name")->valuestring;
        const char *text = cJSON_GetObjectItemCaseSensitive(entry, "grammar")->valuestring;
        const char *why  = cJSON_GetObjectItemCaseSensitive(entry, "why")->valuestring;
        n_invalid++;
        char err[HEARTH_ERR_MAX] = "";
        enum hearth_status st    = grammar_check(text, strlen(text), NULL, err, sizeof err);
        if (st != HEARTH_EINVAL || !err[0]) {
            n_wrong++;
            print_message("WRONG invalid %s (%s): grammar_check gave %d, message \"%s\"\n", name,
                          why, (int)st, err);
        }
        static char sentinel;
        struct grammar *g = (struct grammar *)&sentinel; /* must come back NULL */
        err[0]            = '\0';
        st = grammar_compile(text, strlen(text), NULL, NULL, NULL, &g, err, sizeof err);
        if (st != HEARTH_EINVAL || g || !err[0]) {
            n_wrong++;
            print_message("WRONG invalid %s (%s): grammar_compile gave %d, grammar %s, "
                          "message \"%s\"\n",
                          name, why, (int)st, g ? "set" : "NULL", err);
            if (st == HEARTH_OK && g && g != (struct grammar *)&sentinel)
                grammar_unref(g);
        }
    }
    cJSON_Delete(cases);
    print_message("engine: %d invalid grammars, %d wrong\n", n_invalid, n_wrong);
    assert_true(n_invalid > 0);
    assert_int_equal(n_wrong, 0);
}

/* ------------------------------------------------------- the reference --- */

static bool have_python(void)
{
    if (access(PYTHON, X_OK) == 0)
        return true;
    print_message("skip: %s is missing, so the reference recogniser cannot run\n", PYTHON);
    return false;
}

/*
 * Runs the reference on one grammar entry with its strings (accepted ones
 * first) and returns its verdicts, or NULL with a message when it refused
 * the grammar or failed.
 */
static cJSON *reference_verdicts(const cJSON *entry, cJSON *strings)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(entry, "file");
    char path[4096];
    const char *argv[8];
    int a     = 0;
    argv[a++] = PYTHON;
    argv[a++] = REFERENCE;
    if (cJSON_IsString(f)) {
        snprintf(path, sizeof path, "%s/%s", GRAMMARS, f->valuestring);
        argv[a++] = path;
    } else {
        argv[a++] = "--text";
        argv[a++] = cJSON_GetObjectItemCaseSensitive(entry, "text")->valuestring;
    }
    if (root_of(entry)) {
        argv[a++] = "--root";
        argv[a++] = root_of(entry);
    }
    argv[a]     = NULL;
    char *input = cJSON_PrintUnformatted(strings);
    char *out = NULL, *errout = NULL;
    int rc = tu_run(argv, input, &out, &errout, 120);
    free(input);
    cJSON *verdicts = rc == 0 ? cJSON_Parse(out) : NULL;
    if (!verdicts)
        print_message("WRONG %s: the reference exited %d: %s\n", label(entry), rc,
                      errout ? errout : "");
    free(out);
    free(errout);
    return verdicts;
}

static void reference_agrees(void **state)
{
    (void)state;
    if (!have_python())
        skip();
    cJSON *cases   = load_cases();
    int n_grammars = 0, n_strings = 0, n_wrong = 0;
    const cJSON *entry;
    cJSON_ArrayForEach(entry, cJSON_GetObjectItemCaseSensitive(cases, "grammars"))
    {
        if (!selected(entry))
            continue;
        n_grammars++;
        cJSON *strings = cJSON_CreateArray();
        cJSON *wants   = cJSON_CreateArray();
        for (int want = 1; want >= 0; want--) {
            const cJSON *s;
            cJSON_ArrayForEach(s,
                               cJSON_GetObjectItemCaseSensitive(entry, want ? "accept" : "reject"))
            {
                cJSON_AddItemToArray(strings, cJSON_CreateString(s->valuestring));
                cJSON_AddItemToArray(wants, cJSON_CreateBool(want));
            }
        }
        cJSON *got = reference_verdicts(entry, strings);
        if (!got)
            n_wrong++;
        else if (cJSON_GetArraySize(got) != cJSON_GetArraySize(strings)) {
            n_wrong++;
            print_message("WRONG %s: the reference gave %d verdicts for %d strings\n", label(entry),
                          cJSON_GetArraySize(got), cJSON_GetArraySize(strings));
        } else {
            const cJSON *s = strings->child, *w = wants->child, *v = got->child;
            for (; s; s = s->next, w = w->next, v = v->next) {
                n_strings++;
                if (cJSON_IsTrue(v) != cJSON_IsTrue(w)) {
                    n_wrong++;
                    print_message("WRONG %s: the reference %s a string recorded as %s:\n",
                                  label(entry), cJSON_IsTrue(v) ? "accepts" : "rejects",
                                  cJSON_IsTrue(w) ? "accepted" : "rejected");
                    print_string("string", s->valuestring);
                }
            }
        }
        cJSON_Delete(got);
        cJSON_Delete(strings);
        cJSON_Delete(wants);
    }

    int n_invalid = 0;
    cJSON_ArrayForEach(entry, cJSON_GetObjectItemCaseSensitive(cases, "invalid"))
    {
        const char *name   = cJSON_GetObjectItemCaseSensitive(entry, "name")->valuestring;
        const char *argv[] = {PYTHON, REFERENCE, "--check-text",
                              cJSON_GetObjectItemCaseSensitive(entry, "grammar")->valuestring,
                              NULL};
        char *out          = NULL;
        int rc             = tu_run(argv, NULL, &out, NULL, 60);
        cJSON *r           = rc == 0 ? cJSON_Parse(out) : NULL;
        free(out);
        n_invalid++;
        if (!r || !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(r, "ok"))) {
            n_wrong++;
            print_message("WRONG invalid %s: the reference %s it\n", name,
                          r ? "accepts" : "failed on");
        }
        cJSON_Delete(r);
    }
    cJSON_Delete(cases);
    print_message("reference: %d grammars, %d strings, %d invalid grammars, %d wrong\n", n_grammars,
                  n_strings, n_invalid, n_wrong);
    assert_true(n_grammars > 0);
    assert_int_equal(n_wrong, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(engine_verdicts),
        cmocka_unit_test(engine_refuses_invalid),
        cmocka_unit_test(reference_agrees),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
