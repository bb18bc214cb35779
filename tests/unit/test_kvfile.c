/*
 * test_kvfile.c: a sequence's K/V saved to a file and loaded back
 * (hearth_seq_save, hearth_seq_load, src/model/kvfile.c) on a real model:
 * the loaded sequence continues with the logits of the one that was saved,
 * and files of another model, cut short, damaged or longer are refused
 * whole with the reason.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model/kvfile.h"
#include "util/engineutil.h"
#include "util/testutil.h"

#define N_PROMPT 70 /* two whole 32-token blocks and a partial one */

static struct tu_engine *eng; /* tiny-llama with a q8_0 K and an f16 V */

static int setup(void **state)
{
    (void)state;
    struct hearth_context_params cp = hearth_context_default_params();
    cp.n_ctx                        = 256;
    cp.n_seq_max                    = 3;
    cp.kv_type                      = HEARTH_KV_Q8_0;
    cp.kv_type_v                    = HEARTH_KV_F16;
    return tu_engine_open(&eng, "tiny-llama-spm-f32.gguf", &cp);
}

static int teardown(void **state)
{
    (void)state;
    return tu_engine_close(eng);
}

static char *path_in(const char *dir, const char *name)
{
    char *p = malloc(strlen(dir) + strlen(name) + 2);
    sprintf(p, "%s/%s", dir, name);
    return p;
}

/* Sequence 0 holds the prompt; returns the saved file's path (malloc'd) in dir. */
static char *save_prompt(const char *dir, hearth_token *tok, float *last)
{
    char err[HEARTH_ERR_MAX];
    tu_tokens(tok, N_PROMPT, 5);
    for (int32_t i = 0; i < N_PROMPT; i++)
        tok[i] %= 500; /* tiny-llama has a vocabulary of 512 */
    hearth_seq_truncate(eng->ctx, 0, 0);
    tu_engine_run(eng, 0, tok, N_PROMPT, 32, last);
    char *path = path_in(dir, "seq.kv");
    assert_int_equal(hearth_seq_save(eng->ctx, 0, tok, N_PROMPT, path, err, sizeof err), HEARTH_OK);
    return path;
}

static void test_a_loaded_sequence_continues_as_the_saved_one(void **state)
{
    (void)state;
    TU_ENGINE_OR_SKIP(eng);
    char err[HEARTH_ERR_MAX];
    char *dir = tu_tmpdir();
    hearth_token tok[N_PROMPT + 1];
    float *a = malloc(eng->n_vocab * sizeof *a), *b = malloc(eng->n_vocab * sizeof *b);
    char *path = save_prompt(dir, tok, a);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    /* the header, the tokens, and 4 layers' rows of 128 values: q8_0 K 136 bytes, f16 V 256 */
    print_message("%d tokens: %lld bytes\n", N_PROMPT, (long long)sb.st_size);
    assert_int_equal(sb.st_size, KVFILE_HEADER + N_PROMPT * 4 + 4 * N_PROMPT * (136 + 256) + 8);
    char *tmp = path_in(dir, "seq.kv.tmp");
    assert_int_not_equal(stat(tmp, &sb), 0); /* no temporary left beside it */
    /* the next token on the original, and on the file loaded into another sequence */
    tok[N_PROMPT] = tu_argmax(a, eng->n_vocab);
    tu_engine_run(eng, 0, tok + N_PROMPT, 1, 1, a);
    hearth_token *got = NULL;
    int32_t n         = 0;
    hearth_seq_truncate(eng->ctx, 1, 0);
    assert_int_equal(hearth_seq_load(eng->ctx, 1, path, &got, &n, err, sizeof err), HEARTH_OK);
    assert_int_equal(n, N_PROMPT);
    assert_memory_equal(got, tok, N_PROMPT * sizeof *tok);
    assert_int_equal(hearth_seq_len(eng->ctx, 1), N_PROMPT);
    tu_engine_run(eng, 1, tok + N_PROMPT, 1, 1, b);
    assert_memory_equal(a, b, eng->n_vocab * sizeof *a);
    /* its whole blocks are published: a third sequence reuses them */
    hearth_seq_truncate(eng->ctx, 2, 0);
    assert_int_equal(hearth_seq_reuse_prefix(eng->ctx, 2, tok, N_PROMPT + 1), 64);
    hearth_seq_truncate(eng->ctx, 2, 0);
    hearth_seq_truncate(eng->ctx, 1, 0);
    free(got);
    /* into a sequence that holds tokens: refused */
    assert_int_equal(hearth_seq_load(eng->ctx, 0, path, &got, &n, err, sizeof err) == HEARTH_OK, 0);
    assert_non_null(strstr(err, "loads into an empty sequence"));
    free(got);
    free(tmp);
    free(path);
    free(a);
    free(b);
    tu_rmtree(dir);
    free(dir);
}

/* Writes len bytes of buf to path. */
static void write_bytes(const char *path, const uint8_t *buf, size_t len)
{
    assert_int_equal(tu_write_file(path, buf, len), 0);
}

static void test_bad_files_are_refused_whole(void **state)
{
    (void)state;
    TU_ENGINE_OR_SKIP(eng);
    char err[HEARTH_ERR_MAX];
    char *dir = tu_tmpdir();
    hearth_token tok[N_PROMPT];
    float *a   = malloc(eng->n_vocab * sizeof *a);
    char *path = save_prompt(dir, tok, a);
    size_t len;
    uint8_t *good = (uint8_t *)tu_read_file(path, &len);
    assert_non_null(good);
    uint8_t *bad = malloc(len + 16);
    static const struct {
        const char *what, *want;
    } cases[] = {
        {"cut short", "cut short"},
        {"a byte flipped", "checksum does not match"},
        {"bytes past its end", "bytes past its end"},
        {"another model", "written for another model"},
        {"another cache type", "a cache of another shape"},
        {"no header", "not a hearth K/V file"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        memcpy(bad, good, len);
        size_t n = len;
        switch (c) {
        case 0:
            n = len - 100;
            break;
        case 1:
            bad[len / 2] ^= 0x10;
            break;
        case 2:
            n = len + 16;
            memset(bad + len, 0, 16);
            break;
        case 3:
            bad[8] ^= 1;
            break; /* the fingerprint */
        case 4:
            bad[40] = 0;
            break; /* K's type: f16 */
        default:
            n = 40;
            break;
        }
        write_bytes(path, bad, n);
        hearth_token *got = NULL;
        int32_t nt        = -1;
        hearth_seq_truncate(eng->ctx, 1, 0);
        const enum hearth_status st =
            hearth_seq_load(eng->ctx, 1, path, &got, &nt, err, sizeof err);
        print_message("%s: %s\n", cases[c].what, err);
        assert_int_equal(st, HEARTH_EFORMAT);
        assert_non_null(strstr(err, cases[c].want));
        assert_null(got);
        assert_int_equal(nt, 0);
        assert_int_equal(hearth_seq_len(eng->ctx, 1), 0); /* nothing loaded */
    }
    /* the good bytes again load */
    write_bytes(path, good, len);
    hearth_token *got = NULL;
    int32_t nt        = 0;
    assert_int_equal(hearth_seq_load(eng->ctx, 1, path, &got, &nt, err, sizeof err), HEARTH_OK);
    hearth_seq_truncate(eng->ctx, 1, 0);
    free(got);
    /* a file that cannot be written: the reason, and nothing left behind */
    char *missing = path_in(dir, "no/such/dir/seq.kv");
    assert_int_equal(hearth_seq_save(eng->ctx, 0, tok, N_PROMPT, missing, err, sizeof err),
                     HEARTH_EIO);
    assert_non_null(strstr(err, "No such file or directory"));
    assert_int_equal(hearth_seq_save(eng->ctx, 0, tok, N_PROMPT + 5, path, err, sizeof err),
                     HEARTH_EINVAL);
    free(missing);
    free(bad);
    free(good);
    free(path);
    free(a);
    tu_rmtree(dir);
    free(dir);
}

/* A model with recurrent layers keeps a state the file does not hold: refused, not half saved. */
static void test_recurrent_models_are_refused(void **state)
{
    (void)state;
    struct tu_engine *h;
    struct hearth_context_params cp = hearth_context_default_params();
    cp.n_ctx                        = 128;
    assert_int_equal(tu_engine_open(&h, "tiny-qwen35moe-bpe-q8_0.gguf", &cp), 0);
    if (!h->model) {
        tu_engine_close(h);
        skip();
    }
    char err[HEARTH_ERR_MAX];
    hearth_token tok[8];
    tu_tokens(tok, 8, 1);
    float *last = malloc(h->n_vocab * sizeof *last);
    tu_engine_run(h, 0, tok, 8, 8, last);
    char *dir = tu_tmpdir(), *path = path_in(dir, "h.kv");
    assert_int_equal(hearth_seq_save(h->ctx, 0, tok, 8, path, err, sizeof err),
                     HEARTH_EUNSUPPORTED);
    assert_non_null(strstr(err, "recurrent state"));
    struct stat sb;
    assert_int_not_equal(stat(path, &sb), 0);
    free(path);
    free(last);
    tu_rmtree(dir);
    free(dir);
    tu_engine_close(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_loaded_sequence_continues_as_the_saved_one),
        cmocka_unit_test(test_bad_files_are_refused_whole),
        cmocka_unit_test(test_recurrent_models_are_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
