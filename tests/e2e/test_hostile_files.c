/*
 * test_hostile_files.c: what `hearth serve` does with files a hostile or
 * careless hand put in its directories, and with a disk that takes no more.
 *
 * --cache-dir: a FIFO, a directory, a symbolic link to /etc/passwd and a
 * device named like cache blocks are refused at start (a FIFO used to hang
 * it for good), the server serves, and SIGTERM ends it within 5 s; block
 * files swapped for FIFOs while it runs are refused when read back.
 * --slot-save-path: restoring a link, a FIFO or a directory is a 400 that
 * says the file was refused and nothing about it (not /etc/passwd's size);
 * saving onto a link replaces the link, never writes its target; a name
 * too long, or with a separator, a leading dot or a control byte, is a 400.
 * A write limit (RLIMIT_FSIZE below a block file's size, SIGXFSZ ignored,
 * so every block write fails with EFBIG, as on a full disk) is counted in
 * hearth_cache_disk_write_errors_total and logged once, and service goes on.
 *
 * stories260K: 640 bytes of K/V a token, so a 32-token block file is 20680
 * bytes; srv_long_story is about 290 tokens: 9 blocks, 5 kept in 100K of memory
 * and 4 dropped to disk during its turn.
 */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "util/serveutil.h"

/* An ordinary request: 4 greedy tokens of prompt; it must be a 200. */
static void ordinary(const struct srv *s, const char *prompt)
{
    char body[4096];
    snprintf(body, sizeof body, "{\"prompt\":\"%s\",\"max_tokens\":4,\"temperature\":0}", prompt);
    struct http_resp r = http_post(s, "/v1/completions", body);
    if (r.status != 200)
        print_message("ordinary request: %d %s\n", r.status, r.body);
    assert_int_equal(r.status, 200);
    cJSON *j = http_json(&r);
    assert_non_null(jstr(cJSON_GetArrayItem(jget(j, "choices"), 0), "text"));
    cJSON_Delete(j);
    http_resp_free(&r);
}

/* The value of an unlabelled sample on the /metrics page. */
static double metric(const struct srv *s, const char *name)
{
    struct http_resp r = http_get(s, "/metrics");
    assert_int_equal(r.status, 200);
    char key[128];
    snprintf(key, sizeof key, "\n%s ", name);
    const char *p = strstr(r.body, key);
    if (!p)
        print_message("no %s in /metrics\n", name);
    assert_non_null(p);
    const double v = atof(p + strlen(key));
    http_resp_free(&r);
    return v;
}

/* Occurrences of needle in the server's log so far. */
static int log_count(const struct srv *s, const char *needle)
{
    char *log = srv_slurp(s->log);
    int n     = 0;
    for (const char *p = log; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    free(log);
    return n;
}

static void path_in(char *out, size_t len, const char *dir, const char *name)
{
    assert_true(snprintf(out, len, "%s/%s", dir, name) < (int)len);
}

/* Replaces every regular block file in dir with a FIFO of its name; returns how many. */
static int fifos_for_blocks(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    char path[512];
    for (struct dirent *e; (e = readdir(d));) {
        if (!strstr(e->d_name, ".kvb"))
            continue;
        path_in(path, sizeof path, dir, e->d_name);
        struct stat sb;
        assert_int_equal(lstat(path, &sb), 0);
        if (!S_ISREG(sb.st_mode)) /* the special files placed before the start */
            continue;
        assert_int_equal(unlink(path), 0);
        assert_int_equal(mkfifo(path, 0600), 0);
        n++;
    }
    closedir(d);
    return n;
}

static void test_cache_dir_refuses_special_files(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    char *dir = tu_tmpdir();
    char path[512];
    path_in(path, sizeof path, dir, "0000000000000001.kvb");
    assert_int_equal(mkfifo(path, 0600), 0);
    path_in(path, sizeof path, dir, "0000000000000002.kvb");
    assert_int_equal(mkdir(path, 0700), 0);
    path_in(path, sizeof path, dir, "0000000000000003.kvb");
    assert_int_equal(symlink("/etc/passwd", path), 0);
    int n_special = 3;
    path_in(path, sizeof path, dir, "0000000000000004.kvb");
    if (mknod(path, S_IFCHR | 0600, makedev(1, 5)) == 0) /* /dev/zero's numbers */
        n_special++;
    else
        print_message("skip: a device in --cache-dir (mknod needs root)\n");

    struct srv s;
    const char *extra[] = {"--parallel",  "1", "-c",           "512", "--cache-ram", "100K",
                           "--cache-dir", dir, "--cache-disk", "10M", NULL};
    srv_start(&s, extra); /* /health 200 within its bounded wait, or the test fails */
    assert_true(metric(&s, "hearth_cache_disk_skipped_files_total") == n_special);
    assert_int_equal(log_count(&s, "refused: not a regular file"), n_special);
    ordinary(&s, srv_long_story);
    const double written = metric(&s, "hearth_cache_disk_written_blocks_total");
    print_message("%d special files refused at start; the turn wrote %g blocks to disk\n",
                  n_special, written);
    assert_true(written >= 1);

    /* the written blocks swapped for FIFOs: read back, they are refused, not waited on */
    const int n_swapped = fifos_for_blocks(dir);
    assert_int_equal(n_swapped, (int)written);
    ordinary(&s, srv_long_story);
    const double skipped = metric(&s, "hearth_cache_disk_skipped_files_total");
    print_message("after %d blocks became FIFOs, the same turn: %g files refused in all, %g "
                  "read\n",
                  n_swapped, skipped, metric(&s, "hearth_cache_disk_read_blocks_total"));
    assert_true(skipped > n_special);
    assert_true(metric(&s, "hearth_cache_disk_read_blocks_total") == 0);
    ordinary(&s, "The cat sat on the mat.");
    srv_stop_within(&s, 5);
    tu_rmtree(dir);
    free(dir);
}

/* POST /slots/0?action=ACTION {"filename": name}: must be status; the message (malloc'd). */
static char *slot_action(const struct srv *s, const char *act, const char *name, int status)
{
    char path[64];
    snprintf(path, sizeof path, "/slots/0?action=%s", act);
    cJSON *b = cJSON_CreateObject();
    cJSON_AddStringToObject(b, "filename", name);
    char *body = cJSON_PrintUnformatted(b);
    cJSON_Delete(b);
    struct http_resp r = http_post(s, path, body);
    free(body);
    char *msg = NULL;
    if (status == 200) {
        if (r.status != 200)
            print_message("%s %s: %d %s\n", act, name, r.status, r.body);
        assert_int_equal(r.status, 200);
    } else {
        msg = http_check_error(&r, status, NULL);
    }
    http_resp_free(&r);
    return msg;
}

static void test_slot_files_refused_and_names_checked(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    char *dir = tu_tmpdir(), *outside = tu_tmpdir();
    char path[512], target[512];
    path_in(path, sizeof path, dir, "passwd.bin");
    assert_int_equal(symlink("/etc/passwd", path), 0);
    path_in(path, sizeof path, dir, "fifo.bin");
    assert_int_equal(mkfifo(path, 0600), 0);
    path_in(path, sizeof path, dir, "dir.bin");
    assert_int_equal(mkdir(path, 0700), 0);
    path_in(target, sizeof target, outside, "mine.txt");
    FILE *f = fopen(target, "w");
    assert_non_null(f);
    fputs("not to be overwritten\n", f);
    fclose(f);
    path_in(path, sizeof path, dir, "mine.bin");
    assert_int_equal(symlink(target, path), 0);
    struct stat pw;
    assert_int_equal(stat("/etc/passwd", &pw), 0);
    char pw_size[32];
    snprintf(pw_size, sizeof pw_size, "%lld", (long long)pw.st_size);

    struct srv s;
    const char *extra[] = {"--parallel", "1", "-c", "256", "--slot-save-path", dir, NULL};
    srv_start(&s, extra);
    ordinary(&s, "Once upon a time there was a little dog named Max.");

    static const char *const refused[] = {"passwd.bin", "fifo.bin", "dir.bin", "mine.bin"};
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        char *msg = slot_action(&s, "restore", refused[i], 400);
        print_message("restore %s: %s\n", refused[i], msg);
        assert_non_null(strstr(msg, "refused"));
        assert_null(strstr(msg, pw_size));
        assert_null(strstr(msg, "bytes"));
        free(msg);
    }
    /* saving onto a directory is the caller's mistake; onto a link replaces the link */
    free(slot_action(&s, "save", "dir.bin", 400));
    free(slot_action(&s, "save", "mine.bin", 200));
    struct stat sb;
    assert_int_equal(lstat(path, &sb), 0);
    assert_true(S_ISREG(sb.st_mode));
    char *kept = srv_slurp(target);
    assert_string_equal(kept, "not to be overwritten\n");
    free(kept);
    free(slot_action(&s, "restore", "mine.bin", 200));

    /* names: 255 bytes (NAME_MAX, which the temporary name beside it would pass) and
     * others that are not a plain name in the directory; 200 bytes is the longest */
    char name[256];
    memset(name, 'a', 255);
    name[255]                       = 0;
    static const char *const acts[] = {"save", "restore"};
    for (int a = 0; a < 2; a++) {
        char *msg = slot_action(&s, acts[a], name, 400);
        assert_non_null(strstr(msg, "longer than 200 bytes"));
        free(msg);
        name[201] = 0;
        free(slot_action(&s, acts[a], name, 400));
        name[201]                      = 'a';
        static const char *const bad[] = {"", ".hidden", "..", "a/b", "a\\b", "a\x01z", "a\x7f"};
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
            free(slot_action(&s, acts[a], bad[i], 400));
    }
    name[200] = 0;
    free(slot_action(&s, "save", name, 200));
    free(slot_action(&s, "restore", name, 200));
    ordinary(&s, "The cat sat on the mat.");
    srv_stop_within(&s, 5);
    tu_rmtree(dir);
    tu_rmtree(outside);
    free(dir);
    free(outside);
}

static void test_cache_write_errors_counted_and_logged_once(void **state)
{
    (void)state;
    SRV_NEED_CURL_AND_MODEL();
    char *dir = tu_tmpdir();
    /* the limit and the ignored signal pass to the server through fork and exec */
    struct rlimit was;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &was), 0);
    struct rlimit lim    = {16384, was.rlim_max};
    void (*was_sig)(int) = signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    struct srv s;
    const char *extra[] = {"--parallel",  "1", "-c",           "512", "--cache-ram", "100K",
                           "--cache-dir", dir, "--cache-disk", "10M", NULL};
    srv_start(&s, extra);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &was), 0);
    signal(SIGXFSZ, was_sig);

    ordinary(&s, srv_long_story);
    const double errors = metric(&s, "hearth_cache_disk_write_errors_total");
    print_message("a turn dropping blocks to disk under a 16 KiB file limit: %g write errors, "
                  "%g written\n",
                  errors, metric(&s, "hearth_cache_disk_written_blocks_total"));
    assert_true(errors >= 1);
    assert_true(metric(&s, "hearth_cache_disk_written_blocks_total") == 0);
    ordinary(&s, "The cat sat on the mat.");
    ordinary(&s, srv_long_story);
    assert_int_equal(log_count(&s, "cannot write a block"), 1);
    assert_true(log_count(&s, "File too large") >= 1);
    srv_stop_within(&s, 5);
    /* nothing half written left behind */
    int n = 0, n_left = 0;
    char **left = tu_list_files(dir, "", &n);
    for (int i = 0; i < n; i++) {
        if (left[i][0] != '.') {
            print_message("left in the cache dir: %s\n", left[i]);
            n_left++;
        }
        free(left[i]);
    }
    free(left);
    assert_int_equal(n_left, 0);
    tu_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_cache_dir_refuses_special_files, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_slot_files_refused_and_names_checked, srv_kill_leftovers),
        cmocka_unit_test_teardown(test_cache_write_errors_counted_and_logged_once,
                                  srv_kill_leftovers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
