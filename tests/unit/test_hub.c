/*
 * test_hub.c: the parts of hearth pull that touch no network: its SHA-256
 * (libcrypto's, opened as a pull opens it, streamed in pieces) against FIPS 180-4's vectors and
 * sha256sum's, the spec, the Hub's file list (paths that could leave the
 * cache refused) and which files a spec names (llama.cpp's -hf rules; a
 * quant matched as a whole name part; a split model all its parts or a
 * refusal).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "hub/hub_int.h"
#include "hub/libs.h"

static void hex_of(const void *data, size_t n, size_t chunk, char out[65])
{
    char err[256];
    const struct hub_libs *l = hub_libs(err, sizeof err);
    if (!l)
        fail_msg("%s", err);
    struct sha256 s = {0};
    assert_true(sha256_init(&s, l));
    const char *p = data;
    for (size_t i = 0; i < n; i += chunk)
        sha256_update(&s, p + i, n - i < chunk ? n - i : chunk);
    sha256_hex(&s, out);
    /* started again, the same context gives the same digest */
    assert_true(sha256_init(&s, l));
    sha256_update(&s, data, n);
    char again[65];
    sha256_hex(&s, again);
    assert_string_equal(again, out);
    sha256_free(&s);
}

static void test_sha256(void **state)
{
    (void)state;
    char h[65];
    hex_of("", 0, 1, h);
    assert_string_equal(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    hex_of("abc", 3, 3, h);
    assert_string_equal(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    hex_of(two, strlen(two), 7, h);
    assert_string_equal(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    /* a million 'a' in pieces that straddle the 64-byte blocks every way */
    char *a = malloc(1000000);
    memset(a, 'a', 1000000);
    for (size_t chunk = 1; chunk < 200; chunk += 37) {
        hex_of(a, 1000000, chunk, h);
        assert_string_equal(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    }
    free(a);
}

static void test_sha256_vs_sha256sum(void **state)
{
    (void)state;
    /* lengths around the block and padding edges, against coreutils */
    for (size_t n = 50; n < 140; n++) {
        char *buf = malloc(n);
        for (size_t i = 0; i < n; i++)
            buf[i] = (char)(i * 7 + n);
        char path[]  = "/tmp/hearth-sha-XXXXXX";
        const int fd = mkstemp(path);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, buf, n), (ssize_t)n);
        close(fd);
        char cmd[128], want[65] = "", got[65];
        snprintf(cmd, sizeof cmd, "sha256sum %s", path);
        FILE *p = popen(cmd, "r");
        assert_non_null(p);
        assert_int_equal(fscanf(p, "%64s", want), 1);
        pclose(p);
        unlink(path);
        hex_of(buf, n, 13, got);
        assert_string_equal(got, want);
        free(buf);
    }
}

static void test_spec(void **state)
{
    (void)state;
    struct hub_spec sp;
    char err[256];
    assert_int_equal(hub_spec_parse("org/repo", &sp, err, sizeof err), HEARTH_OK);
    assert_string_equal(sp.repo, "org/repo");
    assert_string_equal(sp.tag, "");
    assert_string_equal(sp.file, "");
    assert_int_equal(hub_spec_parse("unsloth/Qwen3-4B-GGUF:Q4_K_M", &sp, err, sizeof err), 0);
    assert_string_equal(sp.repo, "unsloth/Qwen3-4B-GGUF");
    assert_string_equal(sp.tag, "Q4_K_M");
    assert_int_equal(hub_spec_parse("o/r/sub/m-Q8_0.gguf", &sp, err, sizeof err), 0);
    assert_string_equal(sp.repo, "o/r");
    assert_string_equal(sp.file, "sub/m-Q8_0.gguf");
    static const char *const bad[] = {
        "repo",           "/repo",
        "org/",           "org/.hidden",
        "..//x",          "org/repo:",
        "org/repo:Q4 K",  "org/repo/../x.gguf",
        "org/repo/x.bin", "org/repo//x.gguf",
        "o\x01rg/r",      "org/repo/.x.gguf",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        assert_int_equal(hub_spec_parse(bad[i], &sp, err, sizeof err), HEARTH_EINVAL);
        assert_true(err[0]);
    }
}

static void test_paths(void **state)
{
    (void)state;
    assert_true(hub_path_safe("a.gguf"));
    assert_true(hub_path_safe("Q4_K_M/a-00001-of-00002.gguf"));
    /* only hearth's own suffixes exactly: a .part- or .tmp- elsewhere is a name like any */
    assert_true(hub_path_safe("a.part-1.gguf"));
    assert_true(hub_path_safe("a.gguf.part-0123456789abcde"));
    assert_true(hub_path_safe("a.gguf.tmp-"));
    static const char *const bad[] = {"",
                                      "/etc/x",
                                      "../x",
                                      "a/../../x",
                                      "a//b",
                                      "a/",
                                      ".x",
                                      "a/.hearth-files.json",
                                      "a\\b",
                                      "a\nb",
                                      "c:x",
                                      "a.gguf.part-0123456789abcdef",
                                      "d/a.gguf.tmp-4242"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_false(hub_path_safe(bad[i]));
}

#define LFS(path, sha)                                                                             \
    "{\"type\":\"file\",\"path\":\"" path "\",\"size\":134,\"lfs\":{\"oid\":\"" sha                \
    "\",\"size\":1000,\"pointerSize\":134}}"
#define SHA "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

static void test_listing(void **state)
{
    (void)state;
    char err[256];
    struct hub_listing l = {0};
    const char *page1 =
        "[{\"type\":\"directory\",\"path\":\"Q4_K_M\",\"size\":0},"
        "{\"type\":\"file\",\"path\":\"README.md\",\"size\":12}," LFS("m-Q8_0.gguf", SHA) "]";
    assert_int_equal(hub_listing_parse(&l, page1, strlen(page1), err, sizeof err), HEARTH_OK);
    assert_int_equal(l.n, 2);
    assert_string_equal(l.files[0].path, "README.md");
    assert_int_equal(l.files[0].size, 12);
    assert_string_equal(l.files[0].sha256, "");
    assert_int_equal(l.files[1].size, 1000); /* the LFS object's size, not the pointer's */
    assert_string_equal(l.files[1].sha256, SHA);
    /* pages append; the cache's copy reads back the same */
    const char *page2 = "[" LFS("Q4_K_M/m-Q4_K_M.gguf", SHA) "]";
    assert_int_equal(hub_listing_parse(&l, page2, strlen(page2), err, sizeof err), HEARTH_OK);
    char *js              = hub_listing_json(&l);
    struct hub_listing l2 = {0};
    assert_int_equal(hub_listing_parse(&l2, js, strlen(js), err, sizeof err), HEARTH_OK);
    assert_int_equal(l2.n, 3);
    for (int i = 0; i < 3; i++) {
        assert_string_equal(l2.files[i].path, l.files[i].path);
        assert_int_equal(l2.files[i].size, l.files[i].size);
        assert_string_equal(l2.files[i].sha256, l.files[i].sha256);
    }
    free(js);
    hub_listing_free(&l2);
    hub_listing_free(&l);
    static const char *const bad[] = {
        "{}",
        "[{\"type\":\"file\",\"path\":\"../../.bashrc\",\"size\":1}]",
        "[{\"type\":\"file\",\"path\":\"/etc/passwd\",\"size\":1}]",
        "[{\"type\":\"file\",\"path\":\"a.gguf\",\"size\":-1}]",
        "[{\"type\":\"file\",\"path\":\"a.gguf\",\"size\":1.5}]",
        "[{\"type\":\"file\",\"path\":\"a.gguf\",\"lfs\":{\"oid\":\"abc\",\"size\":1}}]",
        "[{\"type\":\"file\",\"path\":\"a.gguf\",\"lfs\":{\"oid\":\"" SHA "\"}}]",
        "[{\"path\":\"a.gguf\",\"size\":1}]",
        "[1]",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct hub_listing b = {0};
        err[0]               = 0;
        assert_int_equal(hub_listing_parse(&b, bad[i], strlen(bad[i]), err, sizeof err),
                         HEARTH_EFORMAT);
        assert_true(err[0]);
        hub_listing_free(&b);
    }
}

/* The paths sp selects from the listing of paths, joined by ' ', into out. */
static enum hearth_status pick(const char *const *paths, int n, const char *spec, char *out,
                               size_t out_len, char *err, size_t err_len)
{
    char json[8192] = "[";
    for (int i = 0; i < n; i++)
        snprintf(json + strlen(json), sizeof json - strlen(json),
                 "%s{\"type\":\"file\",\"path\":\"%s\",\"lfs\":{\"oid\":\"%s\",\"size\":%d}}",
                 i ? "," : "", paths[i], SHA, 100 + i);
    strcat(json, "]");
    struct hub_listing l = {0};
    assert_int_equal(hub_listing_parse(&l, json, strlen(json), NULL, 0), HEARTH_OK);
    struct hub_spec sp;
    assert_int_equal(hub_spec_parse(spec, &sp, NULL, 0), HEARTH_OK);
    int idx[8], k = 0;
    const enum hearth_status st = hub_select(&l, &sp, idx, 8, &k, err, err_len);
    out[0]                      = 0;
    for (int i = 0; !st && i < k; i++)
        snprintf(out + strlen(out), out_len - strlen(out), "%s%s", i ? " " : "",
                 l.files[idx[i]].path);
    hub_listing_free(&l);
    return st;
}

static void test_select(void **state)
{
    (void)state;
    char got[1024], err[512];
    static const char *const repo[] = {
        "README.md",       "mmproj-model-Q4_K_M.gguf", "model-IQ4_XS.gguf", "model-Q4_0_4_4.gguf",
        "model.Q8_0.gguf", "model-Q4_K_M.gguf",        "imatrix.gguf",
    };
    const int n = sizeof repo / sizeof repo[0];
    /* no quant: Q4_K_M first, over the projector with the same quant */
    assert_int_equal(pick(repo, n, "o/r", got, sizeof got, err, sizeof err), HEARTH_OK);
    assert_string_equal(got, "model-Q4_K_M.gguf");
    assert_int_equal(pick(repo, n, "o/r:q8_0", got, sizeof got, err, sizeof err), HEARTH_OK);
    assert_string_equal(got, "model.Q8_0.gguf");
    assert_int_equal(pick(repo, n, "o/r:IQ4_XS", got, sizeof got, err, sizeof err), HEARTH_OK);
    assert_string_equal(got, "model-IQ4_XS.gguf");
    /* Q4_0 is in neither IQ4_0... nor Q4_0_4_4's name as a whole part */
    assert_int_equal(pick(repo, n, "o/r:Q4_0", got, sizeof got, err, sizeof err), HEARTH_EINVAL);
    assert_non_null(strstr(err, "no GGUF file for quant Q4_0; it has IQ4_XS, Q4_0_4_4, Q8_0, "
                                "Q4_K_M"));
    assert_int_equal(pick(repo, n, "o/r:Q4_0_4_4", got, sizeof got, err, sizeof err), 0);
    assert_string_equal(got, "model-Q4_0_4_4.gguf");
    /* neither Q4_K_M nor Q8_0: the first model file */
    static const char *const other[] = {"mmproj-f16.gguf", "m-F16.gguf", "m-BF16.gguf"};
    assert_int_equal(pick(other, 3, "o/r", got, sizeof got, err, sizeof err), HEARTH_OK);
    assert_string_equal(got, "m-F16.gguf");
    static const char *const none[] = {"README.md", "mmproj-f16.gguf"};
    assert_int_equal(pick(none, 2, "o/r", got, sizeof got, err, sizeof err), HEARTH_EINVAL);
    assert_non_null(strstr(err, "has no GGUF model file"));
    /* a split model: its parts in order, whichever one is named */
    static const char *const split[] = {
        "Q4_K_M/m-Q4_K_M-00003-of-00003.gguf", "Q4_K_M/m-Q4_K_M-00001-of-00003.gguf",
        "Q8_0/m-Q8_0-00001-of-00002.gguf",     "Q4_K_M/m-Q4_K_M-00002-of-00003.gguf",
        "Q8_0/m-Q8_0-00002-of-00002.gguf",
    };
    const char *want = "Q4_K_M/m-Q4_K_M-00001-of-00003.gguf Q4_K_M/m-Q4_K_M-00002-of-00003.gguf "
                       "Q4_K_M/m-Q4_K_M-00003-of-00003.gguf";
    assert_int_equal(pick(split, 5, "o/r", got, sizeof got, err, sizeof err), HEARTH_OK);
    assert_string_equal(got, want);
    assert_int_equal(
        pick(split, 5, "o/r/Q4_K_M/m-Q4_K_M-00003-of-00003.gguf", got, sizeof got, err, sizeof err),
        HEARTH_OK);
    assert_string_equal(got, want);
    assert_int_equal(pick(split, 5, "o/r:Q8_0", got, sizeof got, err, sizeof err), HEARTH_OK);
    assert_string_equal(got, "Q8_0/m-Q8_0-00001-of-00002.gguf Q8_0/m-Q8_0-00002-of-00002.gguf");
    assert_int_equal(pick(split, 4, "o/r:Q8_0", got, sizeof got, err, sizeof err), HEARTH_EINVAL);
    assert_non_null(strstr(err, "lacks part 2"));
    int index, count;
    hub_split_of("a-00002-of-00005.gguf", &index, &count);
    assert_int_equal(index, 2);
    assert_int_equal(count, 5);
    hub_split_of("a-00006-of-00005.gguf", &index, &count);
    assert_int_equal(index * 10 + count, 11);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256),  cmocka_unit_test(test_sha256_vs_sha256sum),
        cmocka_unit_test(test_spec),    cmocka_unit_test(test_paths),
        cmocka_unit_test(test_listing), cmocka_unit_test(test_select),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
