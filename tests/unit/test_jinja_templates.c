/*
 * test_jinja_templates.c: the conformance scoreboard of src/chat/jinja_*.c. Every
 * chat template in ../shared/templates is rendered with every conversation
 * of tests/e2e/templates/conversations.json, once by Python jinja2 in Hugging
 * Face's environment (tests/e2e/hf_render.py, one batch run) and once by
 * jinja_render with the same variables. Each pair must give byte-identical
 * text, or an error on both sides. Prints the counts, and for a mismatch
 * the template, the conversation and the first differing byte in context.
 *
 * A second test does the same for random templates from
 * tests/e2e/jinja_gen.py, which reach the corners of the language the chat
 * templates do not.
 *
 * HEARTH_JINJA_ONLY=substring limits the run to the templates whose file
 * name contains it (for debugging one template); HEARTH_JINJA_VERBOSE=1
 * also prints both errors of each pair refused by both; HEARTH_JINJA_SEED
 * picks another set of generated templates (default 1).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "util/testutil.h"
#include "chat/jinja.h"

#define PYTHON "/usr/bin/python3"
#define NOW    1767225600 /* 2026-01-01 00:00:00 UTC: strftime_now's fixed clock */
#define BOS    "<|bos|>"
#define EOS    "<|eos|>"

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Template file names in dir, sorted; count in *n. */
static char **list_templates(const char *dir, int *n)
{
    DIR *d = opendir(dir);
    if (!d)
        return NULL;
    char **names     = NULL;
    int cap          = 0;
    const char *only = getenv("HEARTH_JINJA_ONLY");
    *n               = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len < 7 || strcmp(e->d_name + len - 6, ".jinja"))
            continue;
        if (only && !strstr(e->d_name, only))
            continue;
        if (*n == cap) {
            cap   = cap ? cap * 2 : 64;
            names = realloc(names, (size_t)cap * sizeof *names);
        }
        names[(*n)++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)*n, sizeof *names, cmp_str);
    return names;
}

/* A copy of messages as the server hands them over: tool-call arguments parsed to JSON, an
 * assistant turn's null content made "". */
static cJSON *parse_arguments(const cJSON *messages)
{
    cJSON *out = cJSON_Duplicate(messages, 1);
    const cJSON *m;
    cJSON_ArrayForEach(m, out)
    {
        const cJSON *role    = cJSON_GetObjectItemCaseSensitive(m, "role");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
        if (cJSON_IsString(role) && !strcmp(role->valuestring, "assistant") &&
            (!content || cJSON_IsNull(content))) {
            cJSON_DeleteItemFromObjectCaseSensitive((cJSON *)m, "content");
            cJSON_AddStringToObject((cJSON *)m, "content", "");
        }
        const cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
        const cJSON *tc;
        cJSON_ArrayForEach(tc, calls)
        {
            cJSON *fn   = cJSON_GetObjectItemCaseSensitive(tc, "function");
            cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
            if (cJSON_IsString(args)) {
                cJSON *parsed = cJSON_Parse(args->valuestring);
                if (parsed)
                    cJSON_ReplaceItemInObjectCaseSensitive(fn, "arguments", parsed);
            }
        }
    }
    return out;
}

/* The variables jinja_render gets for a conversation, as hf_render.py builds them. */
static cJSON *conv_vars(const cJSON *conv)
{
    cJSON *v        = cJSON_CreateObject();
    const cJSON *kw = cJSON_GetObjectItemCaseSensitive(conv, "chat_template_kwargs");
    const cJSON *e;
    cJSON_ArrayForEach(e, kw) cJSON_AddItemToObject(v, e->string, cJSON_Duplicate(e, 1));
    cJSON_AddItemToObject(v, "messages",
                          parse_arguments(cJSON_GetObjectItemCaseSensitive(conv, "messages")));
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(conv, "tools");
    if (cJSON_GetArraySize(tools) > 0)
        cJSON_AddItemToObject(v, "tools", cJSON_Duplicate(tools, 1));
    cJSON_AddStringToObject(v, "bos_token", BOS);
    cJSON_AddStringToObject(v, "eos_token", EOS);
    cJSON_AddBoolToObject(
        v, "add_generation_prompt",
        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(conv, "add_generation_prompt")));
    return v;
}

static cJSON *request(const char *tmpl, const cJSON *conv)
{
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "template", tmpl);
    cJSON_AddItemToObject(r, "messages",
                          cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(conv, "messages"), 1));
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(conv, "tools");
    if (tools)
        cJSON_AddItemToObject(r, "tools", cJSON_Duplicate(tools, 1));
    cJSON_AddBoolToObject(
        r, "add_generation_prompt",
        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(conv, "add_generation_prompt")));
    cJSON_AddStringToObject(r, "bos_token", BOS);
    cJSON_AddStringToObject(r, "eos_token", EOS);
    const cJSON *kw = cJSON_GetObjectItemCaseSensitive(conv, "chat_template_kwargs");
    cJSON_AddItemToObject(r, "kwargs", kw ? cJSON_Duplicate(kw, 1) : cJSON_CreateObject());
    cJSON_AddNumberToObject(r, "now", NOW);
    return r;
}

/* Prints up to 60 bytes of s around off, escaped. */
static void context(const char *label, const char *s, size_t len, size_t off)
{
    size_t a = off > 40 ? off - 40 : 0, b = off + 40 < len ? off + 40 : len;
    char buf[512];
    size_t k = 0;
    for (size_t i = a; i < b && k + 8 < sizeof buf; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (i == off)
            buf[k++] = '|';
        if (ch == '\n') {
            buf[k++] = '\\';
            buf[k++] = 'n';
        } else if (ch < 0x20)
            k += (size_t)snprintf(buf + k, sizeof buf - k, "\\x%02x", ch);
        else
            buf[k++] = (char)ch;
    }
    buf[k] = 0;
    print_message("    %s (%zu bytes): ...%s...\n", label, len, buf);
}

static void test_templates(void **state)
{
    (void)state;
    TU_SHARED_OR_SKIP(dir, "templates");
    const char *check[] = {PYTHON, "-c", "import jinja2", NULL};
    if (tu_run(check, NULL, NULL, NULL, 60) != 0) {
        print_message("skip: %s cannot import jinja2 (Debian: python3-jinja2)\n", PYTHON);
        skip();
    }
    char *conv_text = tu_read_file(HEARTH_TOP "/tests/e2e/templates/conversations.json", NULL);
    assert_non_null(conv_text);
    cJSON *convs = cJSON_Parse(conv_text);
    free(conv_text);
    assert_non_null(convs);
    int n_conv = cJSON_GetArraySize(convs);

    int n_tmpl   = 0;
    char **names = list_templates(dir, &n_tmpl);
    assert_non_null(names);
    char **srcs  = calloc((size_t)n_tmpl, sizeof *srcs);
    cJSON *batch = cJSON_CreateArray();
    for (int t = 0; t < n_tmpl; t++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[t]);
        srcs[t] = tu_read_file(path, NULL);
        assert_non_null(srcs[t]);
        for (int c = 0; c < n_conv; c++)
            cJSON_AddItemToArray(batch, request(srcs[t], cJSON_GetArrayItem(convs, c)));
    }
    char *batch_text = cJSON_PrintUnformatted(batch);
    cJSON_Delete(batch);
    const char *argv[] = {PYTHON, HEARTH_TOP "/tests/e2e/hf_render.py", NULL};
    char *py_out = NULL, *py_err = NULL;
    int rc = tu_run(argv, batch_text, &py_out, &py_err, 600);
    free(batch_text);
    if (rc != 0)
        print_message("hf_render.py exited %d: %s\n", rc, py_err ? py_err : "");
    assert_int_equal(rc, 0);
    cJSON *results = cJSON_Parse(py_out);
    free(py_out);
    free(py_err);
    assert_non_null(results);
    assert_int_equal(cJSON_GetArraySize(results), n_tmpl * n_conv);

    int identical = 0, refused = 0, mismatched = 0;
    struct jinja_opts o;
    jinja_opts_default(&o);
    o.now            = NOW;
    const cJSON *res = results->child;
    for (int t = 0; t < n_tmpl; t++) {
        char err[HEARTH_ERR_MAX];
        struct jinja_template *tp = NULL;
        enum hearth_status cst    = jinja_compile(srcs[t], strlen(srcs[t]), &tp, err, sizeof err);
        char cerr[HEARTH_ERR_MAX];
        snprintf(cerr, sizeof cerr, "%s", err);
        for (int c = 0; c < n_conv; c++, res = res->next) {
            const cJSON *conv     = cJSON_GetArrayItem(convs, c);
            const char *cname     = cJSON_GetObjectItemCaseSensitive(conv, "name")->valuestring;
            bool py_ok            = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(res, "ok"));
            char *out             = NULL;
            size_t out_len        = 0;
            enum hearth_status st = cst;
            if (cst == HEARTH_OK) {
                cJSON *vars = conv_vars(conv);
                st          = jinja_render(tp, vars, &o, &out, &out_len, err, sizeof err);
                cJSON_Delete(vars);
            } else
                snprintf(err, sizeof err, "%s", cerr);
            if (!py_ok) {
                if (st != HEARTH_OK) {
                    refused++;
                    if (getenv("HEARTH_JINJA_VERBOSE"))
                        print_message(
                            "refused %s x %s:\n    jinja2: %s\n    hearth: %s\n", names[t], cname,
                            cJSON_GetObjectItemCaseSensitive(res, "error")->valuestring, err);
                } else {
                    mismatched++;
                    print_message("MISMATCH %s x %s: jinja2 refused (%s), hearth rendered\n",
                                  names[t], cname,
                                  cJSON_GetObjectItemCaseSensitive(res, "error")->valuestring);
                }
            } else if (st != HEARTH_OK) {
                mismatched++;
                print_message("MISMATCH %s x %s: hearth refused: %s\n", names[t], cname, err);
            } else {
                const cJSON *want = cJSON_GetObjectItemCaseSensitive(res, "text");
                size_t want_len   = strlen(want->valuestring);
                if (want_len == out_len && !memcmp(want->valuestring, out, out_len))
                    identical++;
                else {
                    mismatched++;
                    size_t off = 0;
                    while (off < out_len && off < want_len && out[off] == want->valuestring[off])
                        off++;
                    print_message("MISMATCH %s x %s: first difference at byte %zu\n", names[t],
                                  cname, off);
                    context("jinja2", want->valuestring, want_len, off);
                    context("hearth", out, out_len, off);
                }
            }
            free(out);
        }
        jinja_free(tp);
        free(srcs[t]);
        free(names[t]);
    }
    print_message("%d pairs: %d identical, %d refused by both, %d mismatched\n", n_tmpl * n_conv,
                  identical, refused, mismatched);
    free(srcs);
    free(names);
    cJSON_Delete(results);
    cJSON_Delete(convs);
    assert_int_equal(mismatched, 0);
}

/*
 * Random templates from tests/e2e/jinja_gen.py (fixed seed): operators,
 * filters, tests, methods, loops, macros and whitespace control in
 * combinations no hand-written table covers, each rendered by jinja2 and
 * here. Same verdict as the scoreboard: identical text or both refuse.
 */
static void test_generated(void **state)
{
    (void)state;
    const char *check[] = {PYTHON, "-c", "import jinja2", NULL};
    if (tu_run(check, NULL, NULL, NULL, 60) != 0) {
        print_message("skip: %s cannot import jinja2 (Debian: python3-jinja2)\n", PYTHON);
        skip();
    }
    const char *seed   = getenv("HEARTH_JINJA_SEED") ? getenv("HEARTH_JINJA_SEED") : "1";
    const char *argv[] = {PYTHON, HEARTH_TOP "/tests/e2e/jinja_gen.py", "2000", seed, NULL};
    char *py_out = NULL, *py_err = NULL;
    int rc = tu_run(argv, NULL, &py_out, &py_err, 600);
    if (rc != 0)
        print_message("jinja_gen.py exited %d: %s\n", rc, py_err ? py_err : "");
    assert_int_equal(rc, 0);
    cJSON *cases = cJSON_Parse(py_out);
    free(py_out);
    free(py_err);
    assert_non_null(cases);
    struct jinja_opts o;
    jinja_opts_default(&o);
    int identical = 0, refused = 0, mismatched = 0, n = 0;
    const cJSON *cs;
    cJSON_ArrayForEach(cs, cases)
    {
        n++;
        const char *src = cJSON_GetObjectItemCaseSensitive(cs, "template")->valuestring;
        bool py_ok      = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cs, "ok"));
        char err[HEARTH_ERR_MAX], *out = NULL;
        size_t out_len           = 0;
        struct jinja_template *t = NULL;
        enum hearth_status st    = jinja_compile(src, strlen(src), &t, err, sizeof err);
        if (st == HEARTH_OK)
            st = jinja_render(t, cJSON_GetObjectItemCaseSensitive(cs, "vars"), &o, &out, &out_len,
                              err, sizeof err);
        jinja_free(t);
        const char *want = py_ok ? cJSON_GetObjectItemCaseSensitive(cs, "text")->valuestring
                                 : cJSON_GetObjectItemCaseSensitive(cs, "error")->valuestring;
        bool same        = py_ok
                               ? st == HEARTH_OK && out_len == strlen(want) && !memcmp(out, want, out_len)
                               : st != HEARTH_OK;
        if (same)
            py_ok ? identical++ : refused++;
        else if (++mismatched <= 10)
            print_message("MISMATCH case %d: %s\n    jinja2: %s %s\n    hearth: %s\n", n - 1, src,
                          py_ok ? "rendered" : "refused:", want, st == HEARTH_OK ? out : err);
        free(out);
    }
    print_message("%d generated templates: %d identical, %d refused by both, %d mismatched\n", n,
                  identical, refused, mismatched);
    cJSON_Delete(cases);
    assert_int_equal(mismatched, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_templates),
        cmocka_unit_test(test_generated),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
