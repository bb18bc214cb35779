/*
 * test_inspect.c: `hearth inspect` run as a real process: a shared model
 * prints its header and tensor table; a malformed file, a missing file and
 * bad usage give the documented exit codes and one line on stderr.
 */
#include "util/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Runs `hearth inspect args...`; returns the exit status, output in *out and *err. */
static int inspect(const char *a1, const char *a2, char **out, char **err)
{
    const char *argv[] = {tu_bin(), "inspect", a1, a2, NULL};
    int rc             = tu_run(argv, NULL, out, err, 60);
    print_message("# rc=%d stderr: %s\n", rc, *err ? *err : "");
    return rc;
}

static void assert_contains(const char *hay, const char *needle)
{
    if (!strstr(hay, needle))
        fail_msg("output does not contain \"%s\":\n%s", needle, hay);
}

/* stderr is exactly one line beginning with prefix. */
static void assert_one_line(const char *err, const char *prefix)
{
    if (strncmp(err, prefix, strlen(prefix)))
        fail_msg("stderr \"%s\" does not begin with \"%s\"", err, prefix);
    const char *nl = strchr(err, '\n');
    assert_non_null(nl);
    assert_int_equal(nl[1], 0);
}

static void test_inspect_model(void **state)
{
    TU_MODEL_OR_SKIP(path, "stories260K.gguf");
    char *out = NULL, *err = NULL;
    assert_int_equal(inspect(path, NULL, &out, &err), 0);
    assert_contains(out, "version:   3");
    assert_contains(out, "tensors:   48");
    assert_contains(out, "token_embd.weight");
    assert_contains(out, "[64, 512]");
    assert_contains(out, "llama.embedding_length");
    assert_contains(out, "[512 x string] \"<unk>\", \"<s>\", \"</s>\"");
    assert_contains(out, "general.architecture");
    assert_contains(out, "\"llama\"");
    assert_contains(out, "total: 48 tensors");
    assert_int_equal(err[0], 0);
    free(out);
    free(err);
}

static void test_inspect_malformed(void **state)
{
    char *dir = tu_tmpdir(), path[4096], *out = NULL, *err = NULL;
    assert_non_null(dir);
    snprintf(path, sizeof path, "%s/bad.gguf", dir);
    /* a header that promises one key, then ends inside its name */
    static const unsigned char bad[] = {
        'G', 'G', 'U', 'F', 3, 0, 0, 0, 0, 0, 0, 0,   0,   0,   0,   0,   1,   0,   0,   0,   0,
        0,   0,   0,   40,  0, 0, 0, 0, 0, 0, 0, 'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j'};
    assert_int_equal(tu_write_file(path, bad, sizeof bad), 0);
    assert_int_equal(inspect(path, NULL, &out, &err), 1);
    assert_one_line(err, "hearth: gguf:");
    assert_contains(err, "truncated at byte 42");
    assert_int_equal(out[0], 0);
    free(out);
    free(err);

    snprintf(path, sizeof path, "%s/text.gguf", dir);
    assert_int_equal(tu_write_file(path, "hello, world\n", 13), 0);
    assert_int_equal(inspect(path, NULL, &out, &err), 1);
    assert_one_line(err, "hearth: gguf: not a GGUF file");
    free(out);
    free(err);
    tu_rmtree(dir);
    free(dir);
}

static void test_inspect_missing(void **state)
{
    char *out = NULL, *err = NULL;
    assert_int_equal(inspect("/nonexistent/hearth/model.gguf", NULL, &out, &err), 1);
    assert_one_line(err, "hearth: gguf: cannot open /nonexistent/hearth/model.gguf");
    free(out);
    free(err);
}

static void test_inspect_usage(void **state)
{
    char *out = NULL, *err = NULL;
    assert_int_equal(inspect(NULL, NULL, &out, &err), 2);
    assert_contains(err, "usage: hearth inspect FILE");
    free(out);
    free(err);
    assert_int_equal(inspect("--help", NULL, &out, &err), 0);
    assert_contains(out, "usage: hearth inspect FILE");
    free(out);
    free(err);
    assert_int_equal(inspect("a.gguf", "b.gguf", &out, &err), 2);
    free(out);
    free(err);
    assert_int_equal(inspect("--bogus", NULL, &out, &err), 2);
    assert_contains(err, "unknown option '--bogus'");
    free(out);
    free(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inspect_model),
        cmocka_unit_test(test_inspect_malformed),
        cmocka_unit_test(test_inspect_missing),
        cmocka_unit_test(test_inspect_usage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
