/*
 * test_tokenize.c: `hearth tokenize` end to end: the real binary on a real
 * vocabulary, its output formats and its exit codes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/testutil.h"

/* Runs hearth with args (NULL-terminated), capturing stdout and stderr. */
static int run(const char *const *args, char **out, char **err)
{
    const char *argv[16] = {tu_bin()};
    int n                = 1;
    for (; args[n - 1] && n < 15; n++)
        argv[n] = args[n - 1];
    argv[n] = NULL;
    return tu_run(argv, NULL, out, err, 60);
}

static void test_ids(void **state)
{
    TU_SHARED_OR_SKIP(vocab, "vocab/ggml-vocab-llama-spm.gguf");
    char *out = NULL, *err = NULL;
    int rc = run((const char *[]){"tokenize", "-m", vocab, "-p", "Hello world", "--ids", NULL},
                 &out, &err);
    if (rc != 0)
        print_message("# rc %d, stderr: %s\n", rc, err);
    assert_int_equal(rc, 0);
    assert_string_equal(out, "15043 3186\n");
    free(out);
    free(err);

    rc = run((const char *[]){"tokenize", "-m", vocab, "-p", "Hello world", "--ids",
                              "--add-special", NULL},
             &out, &err);
    assert_int_equal(rc, 0);
    assert_string_equal(out, "1 15043 3186\n");
    free(out);
    free(err);

    rc = run((const char *[]){"tokenize", "-m", vocab, "-p", "<s>Hi</s>", "--ids",
                              "--parse-special", NULL},
             &out, &err);
    assert_int_equal(rc, 0);
    assert_string_equal(out, "1 6324 2\n");
    free(out);
    free(err);
}

static void test_pieces(void **state)
{
    TU_SHARED_OR_SKIP(vocab, "vocab/ggml-vocab-llama-spm.gguf");
    char *out = NULL, *err = NULL;
    int rc =
        run((const char *[]){"tokenize", "-m", vocab, "-p", "Hello world", "--add-special", NULL},
            &out, &err);
    assert_int_equal(rc, 0);
    assert_string_equal(out, "     1 -> '<s>'\n 15043 -> ' Hello'\n  3186 -> ' world'\n");
    free(out);
    free(err);
}

static void test_file_input(void **state)
{
    TU_SHARED_OR_SKIP(vocab, "vocab/ggml-vocab-llama-spm.gguf");
    char *dir = tu_tmpdir();
    char path[1024];
    snprintf(path, sizeof path, "%s/in.txt", dir);
    assert_int_equal(tu_write_file(path, "Hello world", 11), 0);
    char *out = NULL, *err = NULL;
    int rc = run((const char *[]){"tokenize", "-m", vocab, "-f", path, "--ids", NULL}, &out, &err);
    assert_int_equal(rc, 0);
    assert_string_equal(out, "15043 3186\n");
    free(out);
    free(err);
    tu_rmtree(dir);
    free(dir);
}

static void test_exit_codes(void **state)
{
    char *out = NULL, *err = NULL;
    int rc = run((const char *[]){"tokenize", "-p", "Hello", NULL}, &out, &err);
    assert_int_equal(rc, 2); /* no -m */
    free(out);
    free(err);

    rc = run((const char *[]){"tokenize", "--bogus", NULL}, &out, &err);
    assert_int_equal(rc, 2);
    free(out);
    free(err);

    rc = run((const char *[]){"tokenize", "-m", "/nonexistent/model.gguf", "-p", "Hello", NULL},
             &out, &err);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(err, "hearth: "));
    assert_string_equal(out, "");
    free(out);
    free(err);

    rc = run((const char *[]){"tokenize", "--help", NULL}, &out, &err);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "usage: hearth tokenize"));
    free(out);
    free(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ids),
        cmocka_unit_test(test_pieces),
        cmocka_unit_test(test_file_input),
        cmocka_unit_test(test_exit_codes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
