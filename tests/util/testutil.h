/*
 * testutil.h: what unit and end-to-end tests share: locating the models (the
 * repository's models/, then ../shared/models) and ../shared (tests skip with
 * a message when what they need is absent), running the real hearth binary
 * and capturing its output, reading files.
 */
#ifndef HEARTH_TESTUTIL_H
#define HEARTH_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

/*
 * Path of rel under the shared test data ($HEARTH_SHARED, else ../shared beside
 * the checkout) in a static buffer (one of 8 rotating), or NULL if it does not exist.
 */
const char *tu_shared(const char *rel);

/* Skips the current test with a message when shared file rel is absent; else yields its path. */
/* clang-format off */
#define TU_SHARED_OR_SKIP(var, rel)                                                   \
    const char *var = tu_shared(rel);                                                 \
    if (!var) {                                                                       \
        print_message("skip: %s not found (set HEARTH_SHARED or put shared/ beside "  \
                      "the checkout)\n", rel);                                        \
        skip();                                                                       \
    }
/* clang-format on */

/*
 * Path of model file name ("stories260K.gguf"): the repository's models/name
 * when it is committed there (so a bare clone tests with it), else
 * tu_shared("models/name"); NULL if neither exists. Same buffers as tu_shared.
 */
const char *tu_model(const char *name);

/* Skips the current test with a message when model name is absent; else yields its path. */
/* clang-format off */
#define TU_MODEL_OR_SKIP(var, name)                                                   \
    const char *var = tu_model(name);                                                 \
    if (!var) {                                                                       \
        print_message("skip: %s is in neither models/ nor shared/models (set "        \
                      "HEARTH_SHARED or put shared/ beside the checkout)\n", name);   \
        skip();                                                                       \
    }
/* clang-format on */

/*
 * 1 in a build under AddressSanitizer (make asan-test, where tests and hearth
 * are built alike), where a test may cut a slow table to a few rows; else 0.
 */
#if defined(__SANITIZE_ADDRESS__)
#define TU_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TU_SANITIZED 1
#endif
#endif
#ifndef TU_SANITIZED
#define TU_SANITIZED 0
#endif

/* The hearth binary under test. */
const char *tu_bin(void);

/*
 * Runs argv (argv[0] is a path; NULL-terminated), feeding stdin_text (may be
 * NULL) and collecting stdout and stderr into malloc'd NUL-terminated
 * strings (either pointer may be NULL to discard). Returns the exit status,
 * 128+signal if killed, -1 if it could not run. Kills it after timeout_s.
 */
int tu_run(const char *const argv[], const char *stdin_text, char **out, char **errout,
           int timeout_s);

/* Whole file as a malloc'd NUL-terminated string (length in *len if non-NULL), or NULL. */
char *tu_read_file(const char *path, size_t *len);

/*
 * The names of the files in dir that end in suffix (".jinja"), sorted by
 * strcmp; *n of them. A malloc'd array of malloc'd names (free both), or
 * NULL when dir cannot be read.
 */
char **tu_list_files(const char *dir, const char *suffix, int *n);

/* A fresh temporary directory (mkdtemp under $TMPDIR), removed by tu_rmtree. */
char *tu_tmpdir(void);
void tu_rmtree(const char *dir);

/* Undoes the escaping of \n, \t, \\ and \xHH (a byte) in the reference .tsv files, in place. */
void tu_unescape(char *s);

/* Writes len bytes to path; returns 0 or -1. */
int tu_write_file(const char *path, const void *data, size_t len);

#endif
