/*
 * test_writer.c: the GGUF writer, checked through the reader. Every value
 * type and a few tensors are written (data in odd-sized pieces) and read
 * back key by key and byte by byte; replacing keys, custom alignment and
 * every error path are exercised; copying real shared models through the
 * writer must reproduce them (llama.cpp-written files byte for byte).
 */
#include "util/testutil.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "gguf/writer.h"
#include "util/dtype.h"

static char err[HEARTH_ERR_MAX];

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* Path dir/name in a static buffer (one of 4 rotating). */
static const char *in_dir(const char *dir, const char *name)
{
    static char buf[4][1024];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

/* clang-format off */
#define OK(call)                                                                                  \
    do {                                                                                          \
        enum hearth_status st_ = (call);                                                          \
        if (st_ != HEARTH_OK)                                                                     \
            fail_msg("%s -> %d: %s", #call, (int)st_, err);                                       \
    } while (0)
/* clang-format on */

/* ------------------------------------------------------------ round trip --- */

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (uint8_t)(seed >> 24);
    }
}

static void test_round_trip_every_type(void **state)
{
    (void)state;
    char *dir             = tu_tmpdir();
    const char *path      = in_dir(dir, "rt.gguf");
    struct gguf_writer *w = gguf_writer_new();
    assert_non_null(w);

    uint8_t u8   = 200;
    int8_t i8    = -100;
    uint16_t u16 = 60000;
    int16_t i16  = -30000;
    uint32_t u32 = 4000000000u;
    int32_t i32  = -2000000000;
    float f32    = 3.25f;
    uint8_t bl   = 1;
    uint64_t u64 = 18000000000000000000ull;
    int64_t i64  = -9000000000000000000ll;
    double f64   = -1.0 / 3.0;
    OK(gguf_writer_set(w, "t.u8", GGUF_U8, &u8, err, sizeof err));
    OK(gguf_writer_set(w, "t.i8", GGUF_I8, &i8, err, sizeof err));
    OK(gguf_writer_set(w, "t.u16", GGUF_U16, &u16, err, sizeof err));
    OK(gguf_writer_set(w, "t.i16", GGUF_I16, &i16, err, sizeof err));
    OK(gguf_writer_set(w, "t.u32", GGUF_U32, &u32, err, sizeof err));
    OK(gguf_writer_set(w, "t.i32", GGUF_I32, &i32, err, sizeof err));
    OK(gguf_writer_set(w, "t.f32", GGUF_F32, &f32, err, sizeof err));
    OK(gguf_writer_set(w, "t.bool", GGUF_BOOL, &bl, err, sizeof err));
    OK(gguf_writer_set_str(w, "t.str", "h\0llo", 5, err, sizeof err));
    OK(gguf_writer_set(w, "t.u64", GGUF_U64, &u64, err, sizeof err));
    OK(gguf_writer_set(w, "t.i64", GGUF_I64, &i64, err, sizeof err));
    OK(gguf_writer_set(w, "t.f64", GGUF_F64, &f64, err, sizeof err));
    const int16_t arr16[5]        = {1, -2, 3, -4, 5};
    const double arr64[2]         = {0.5, -1e300};
    const uint8_t arrb[3]         = {1, 0, 7}; /* 7 is stored as 1 */
    const struct gguf_str strs[3] = {{"a", 1}, {"", 0}, {"\xe2\x96\x81the", 6}};
    OK(gguf_writer_set_arr(w, "t.arr_i16", GGUF_I16, arr16, 5, err, sizeof err));
    OK(gguf_writer_set_arr(w, "t.arr_f64", GGUF_F64, arr64, 2, err, sizeof err));
    OK(gguf_writer_set_arr(w, "t.arr_bool", GGUF_BOOL, arrb, 3, err, sizeof err));
    OK(gguf_writer_set_arr(w, "t.arr_empty", GGUF_U32, NULL, 0, err, sizeof err));
    OK(gguf_writer_set_arr_str(w, "t.arr_str", strs, 3, err, sizeof err));
    assert_int_equal(gguf_writer_n_kv(w), 17);

    /* Three tensors: f32 3-D, q4_0 with a trailing 1 (stored 1-D), q6_k. */
    const int64_t ne_a[3] = {5, 3, 2}, ne_b[2] = {64, 1}, ne_c[2] = {256, 3};
    OK(gguf_writer_add_tensor(w, "a", DTYPE_F32, 3, ne_a, err, sizeof err));
    OK(gguf_writer_add_tensor(w, "b.weight", DTYPE_Q4_0, 2, ne_b, err, sizeof err));
    OK(gguf_writer_add_tensor(w, "c", DTYPE_Q6_K, 2, ne_c, err, sizeof err));
    const size_t sa = 5 * 3 * 2 * 4, sb = 2 * 18, sc = 3 * 210;
    assert_int_equal(gguf_writer_tensor_size(w, 0), sa);
    assert_int_equal(gguf_writer_tensor_size(w, 1), sb);
    assert_int_equal(gguf_writer_tensor_size(w, 2), sc);
    uint8_t data[sa + sb + sc];
    fill(data, sizeof data, 7);
    OK(gguf_writer_begin(w, path, err, sizeof err));
    assert_true(exists(in_dir(dir, "rt.gguf.tmp")));
    assert_false(exists(path));
    /* Pieces that straddle tensor boundaries. */
    size_t cuts[] = {0, 1, 7, 119, 120, 121, 200, 555, sizeof data};
    for (size_t i = 0; i + 1 < sizeof cuts / sizeof cuts[0]; i++)
        OK(gguf_writer_write(w, data + cuts[i], cuts[i + 1] - cuts[i], err, sizeof err));
    OK(gguf_writer_finish(w, err, sizeof err));
    gguf_writer_free(w);
    assert_true(exists(path));
    assert_false(exists(in_dir(dir, "rt.gguf.tmp")));

    struct gguf_file *f = NULL;
    OK(gguf_open(path, &f, err, sizeof err));
    assert_int_equal(gguf_version(f), 3);
    assert_int_equal(gguf_alignment(f), 32);
    assert_int_equal(gguf_n_kv(f), 17);
    int64_t i;
    uint64_t u;
    int64_t s;
    double d;
    bool b;
    struct gguf_str str;
    static const char *const names[]     = {"t.u8",  "t.i8",   "t.u16", "t.i16", "t.u32", "t.i32",
                                            "t.f32", "t.bool", "t.str", "t.u64", "t.i64", "t.f64"};
    static const enum gguf_vtype types[] = {GGUF_U8,  GGUF_I8,  GGUF_U16, GGUF_I16,
                                            GGUF_U32, GGUF_I32, GGUF_F32, GGUF_BOOL,
                                            GGUF_STR, GGUF_U64, GGUF_I64, GGUF_F64};
    for (int k = 0; k < 12; k++) {
        i = gguf_find_key(f, names[k]);
        assert_int_equal(i, k); /* kept in insertion order */
        assert_int_equal(gguf_kv_type(f, i), types[k]);
    }
    assert_true(gguf_kv_u64(f, 0, &u) && u == 200);
    assert_true(gguf_kv_i64(f, 1, &s) && s == -100);
    assert_true(gguf_kv_u64(f, 2, &u) && u == 60000);
    assert_true(gguf_kv_i64(f, 3, &s) && s == -30000);
    assert_true(gguf_kv_u64(f, 4, &u) && u == 4000000000u);
    assert_true(gguf_kv_i64(f, 5, &s) && s == -2000000000);
    assert_true(gguf_kv_f64(f, 6, &d) && d == 3.25);
    assert_true(gguf_kv_bool(f, 7, &b) && b);
    assert_true(gguf_kv_str(f, 8, &str) && str.len == 5 && !memcmp(str.ptr, "h\0llo", 5));
    assert_true(gguf_kv_u64(f, 9, &u) && u == u64);
    assert_true(gguf_kv_i64(f, 10, &s) && s == i64);
    assert_true(gguf_kv_f64(f, 11, &d) && d == f64);
    enum gguf_vtype et;
    uint64_t n;
    i = gguf_find_key(f, "t.arr_i16");
    assert_true(gguf_kv_arr(f, i, &et, &n) && et == GGUF_I16 && n == 5);
    assert_memory_equal(gguf_arr_data(f, i), arr16, sizeof arr16);
    i = gguf_find_key(f, "t.arr_f64");
    assert_true(gguf_kv_arr(f, i, &et, &n) && et == GGUF_F64 && n == 2);
    assert_memory_equal(gguf_arr_data(f, i), arr64, sizeof arr64);
    i = gguf_find_key(f, "t.arr_bool");
    assert_true(gguf_kv_arr(f, i, &et, &n) && et == GGUF_BOOL && n == 3);
    assert_memory_equal(gguf_arr_data(f, i), "\1\0\1", 3);
    i = gguf_find_key(f, "t.arr_empty");
    assert_true(gguf_kv_arr(f, i, &et, &n) && et == GGUF_U32 && n == 0);
    i = gguf_find_key(f, "t.arr_str");
    assert_true(gguf_kv_arr(f, i, &et, &n) && et == GGUF_STR && n == 3);
    for (uint64_t j = 0; j < 3; j++) {
        assert_true(gguf_arr_str(f, i, j, &str));
        assert_int_equal(str.len, strs[j].len);
        assert_memory_equal(str.ptr, strs[j].ptr, str.len);
    }

    assert_int_equal(gguf_n_tensors(f), 3);
    const struct gguf_tensor *ta = gguf_find_tensor(f, "a"), *tb = gguf_find_tensor(f, "b.weight"),
                             *tc = gguf_find_tensor(f, "c");
    assert_non_null(ta);
    assert_non_null(tb);
    assert_non_null(tc);
    assert_int_equal(ta->n_dims, 3);
    assert_int_equal(ta->ne[2], 2);
    assert_int_equal(tb->n_dims, 1); /* [64, 1] is stored as ggml writes it: 1-D */
    assert_int_equal(tb->ne[0], 64);
    assert_int_equal(tc->type, DTYPE_Q6_K);
    assert_int_equal(ta->offset, 0);
    assert_int_equal(tb->offset, 128); /* 120 bytes padded to 32 */
    assert_int_equal(tc->offset, 192); /* 128 + 36 padded */
    assert_int_equal(ta->size, sa);
    assert_memory_equal(ta->data, data, sa);
    assert_memory_equal(tb->data, data + sa, sb);
    assert_memory_equal(tc->data, data + sa + sb, sc);
    assert_int_equal(gguf_file_size(f), gguf_data_offset(f) + 192 + 640); /* last padded too */
    gguf_close(f);
    tu_rmtree(dir);
    free(dir);
}

static void test_replace_remove_and_alignment(void **state)
{
    (void)state;
    char *dir             = tu_tmpdir();
    const char *path      = in_dir(dir, "al.gguf");
    struct gguf_writer *w = gguf_writer_new();
    OK(gguf_writer_set_u32(w, "a", 1, err, sizeof err));
    OK(gguf_writer_set_u32(w, "b", 2, err, sizeof err));
    OK(gguf_writer_set_u32(w, "c", 3, err, sizeof err));
    OK(gguf_writer_set_str(w, "a", "x", 1, err, sizeof err)); /* replaced: moves to the end */
    assert_true(gguf_writer_remove(w, "b"));
    assert_false(gguf_writer_remove(w, "b"));
    OK(gguf_writer_set_u32(w, "general.alignment", 64, err, sizeof err));
    const int64_t ne[2] = {32, 3};
    OK(gguf_writer_add_tensor(w, "t0", DTYPE_Q8_0, 2, ne, err, sizeof err)); /* 102 bytes */
    OK(gguf_writer_add_tensor(w, "t1", DTYPE_F16, 1, ne, err, sizeof err));  /* 64 bytes */
    OK(gguf_writer_add_tensor(w, "t2", DTYPE_F32, 1, ne, err, sizeof err));  /* 128 bytes */
    uint8_t data[102 + 64 + 128];
    fill(data, sizeof data, 3);
    OK(gguf_writer_begin(w, path, err, sizeof err));
    OK(gguf_writer_write(w, data, sizeof data, err, sizeof err));
    OK(gguf_writer_finish(w, err, sizeof err));
    gguf_writer_free(w);

    struct gguf_file *f = NULL;
    OK(gguf_open(path, &f, err, sizeof err));
    assert_int_equal(gguf_n_kv(f), 3);
    assert_int_equal(gguf_find_key(f, "c"), 0);
    assert_int_equal(gguf_find_key(f, "a"), 1);
    assert_int_equal(gguf_kv_type(f, 1), GGUF_STR);
    assert_int_equal(gguf_find_key(f, "b"), -1);
    assert_int_equal(gguf_alignment(f), 64);
    assert_int_equal(gguf_data_offset(f) % 64, 0);
    assert_int_equal(gguf_tensor(f, 1)->offset, 128);
    assert_int_equal(gguf_tensor(f, 2)->offset, 192);
    assert_memory_equal(gguf_tensor(f, 2)->data, data + 166, 128);
    assert_int_equal(gguf_file_size(f), gguf_data_offset(f) + 192 + 128);
    gguf_close(f);
    tu_rmtree(dir);
    free(dir);
}

static void expect_err(enum hearth_status got, enum hearth_status want, const char *needle)
{
    if (got != want || !strstr(err, needle))
        fail_msg("got status %d, message '%s'; wanted %d and '%s'", (int)got, err, (int)want,
                 needle);
    print_message("  ok: %s\n", err);
}

static void test_errors(void **state)
{
    (void)state;
    char *dir             = tu_tmpdir();
    struct gguf_writer *w = gguf_writer_new();
    const int64_t ne[2] = {100, 2}, ok_ne[2] = {32, 2};
    uint32_t v = 1;
    expect_err(gguf_writer_set(w, "", GGUF_U32, &v, err, sizeof err), HEARTH_EINVAL, "empty");
    expect_err(gguf_writer_set(w, "k", GGUF_STR, &v, err, sizeof err), HEARTH_EINVAL, "k");
    expect_err(gguf_writer_set_arr(w, "k", GGUF_ARR, &v, 1, err, sizeof err), HEARTH_EINVAL,
               "element type");
    expect_err(gguf_writer_add_tensor(w, "x", DTYPE_Q4_K, 2, ne, err, sizeof err), HEARTH_EINVAL,
               "not a multiple of the q4_k block of 256");
    expect_err(gguf_writer_add_tensor(w, "x", (enum dtype)77, 2, ok_ne, err, sizeof err),
               HEARTH_EINVAL, "unknown type");
    expect_err(gguf_writer_add_tensor(w, "x", DTYPE_F32, 5, ok_ne, err, sizeof err), HEARTH_EINVAL,
               "dimensions");
    OK(gguf_writer_add_tensor(w, "x", DTYPE_Q8_0, 2, ok_ne, err, sizeof err));
    expect_err(gguf_writer_add_tensor(w, "x", DTYPE_Q8_0, 2, ok_ne, err, sizeof err), HEARTH_EINVAL,
               "x added twice");
    uint8_t data[200] = {0};
    expect_err(gguf_writer_write(w, data, 1, err, sizeof err), HEARTH_EINVAL, "before the header");
    expect_err(gguf_writer_finish(w, err, sizeof err), HEARTH_EINVAL, "before begin");

    /* A directory that does not exist: EIO naming the file. */
    expect_err(gguf_writer_begin(w, "/nonexistent-dir/out.gguf", err, sizeof err), HEARTH_EIO,
               "/nonexistent-dir/out.gguf.tmp");
    gguf_writer_free(w);

    /* Missing data: finish fails, neither PATH nor PATH.tmp remains. */
    const char *path = in_dir(dir, "short.gguf"), *tmp = in_dir(dir, "short.gguf.tmp");
    w = gguf_writer_new();
    OK(gguf_writer_add_tensor(w, "x", DTYPE_Q8_0, 2, ok_ne, err, sizeof err)); /* 68 bytes */
    OK(gguf_writer_begin(w, path, err, sizeof err));
    expect_err(gguf_writer_set_u32(w, "late", 1, err, sizeof err), HEARTH_EINVAL, "late");
    expect_err(gguf_writer_add_tensor(w, "y", DTYPE_F32, 2, ok_ne, err, sizeof err), HEARTH_EINVAL,
               "after the header");
    expect_err(gguf_writer_begin(w, path, err, sizeof err), HEARTH_EINVAL, "already");
    OK(gguf_writer_write(w, data, 60, err, sizeof err));
    expect_err(gguf_writer_write(w, data, 9, err, sizeof err), HEARTH_EINVAL, "have 8 left");
    expect_err(gguf_writer_finish(w, err, sizeof err), HEARTH_EINVAL,
               "tensor x has 60 of its 68 bytes");
    gguf_writer_free(w);
    assert_false(exists(path));
    assert_false(exists(tmp));

    w = gguf_writer_new();
    OK(gguf_writer_add_tensor(w, "x", DTYPE_Q8_0, 2, ok_ne, err, sizeof err));
    OK(gguf_writer_begin(w, path, err, sizeof err));
    OK(gguf_writer_write(w, data, 10, err, sizeof err));
    expect_err(gguf_writer_finish(w, err, sizeof err), HEARTH_EINVAL, "10 of its 68 bytes");
    expect_err(gguf_writer_finish(w, err, sizeof err), HEARTH_EINVAL, "twice");
    gguf_writer_free(w);
    assert_false(exists(path));
    assert_false(exists(tmp));

    /* Freed before finishing: the partial PATH.tmp goes, an old PATH stays as it was. */
    assert_int_equal(tu_write_file(path, "old", 3), 0);
    w = gguf_writer_new();
    OK(gguf_writer_add_tensor(w, "x", DTYPE_Q8_0, 2, ok_ne, err, sizeof err));
    OK(gguf_writer_begin(w, path, err, sizeof err));
    assert_true(exists(tmp));
    gguf_writer_free(w);
    assert_false(exists(tmp));
    size_t len = 0;
    char *old  = tu_read_file(path, &len);
    assert_int_equal(len, 3);
    free(old);

    /* A bad general.alignment is refused at begin. */
    w = gguf_writer_new();
    OK(gguf_writer_set_u32(w, "general.alignment", 48, err, sizeof err));
    expect_err(gguf_writer_begin(w, path, err, sizeof err), HEARTH_EINVAL, "power of two");
    gguf_writer_free(w);
    tu_rmtree(dir);
    free(dir);
}

/* ------------------------------------------------------- copying files --- */

/* A GGUF in memory with nested arrays, built byte by byte (the writer cannot make them). */
struct wb {
    uint8_t p[512];
    size_t len;
};
static void put(struct wb *b, const void *d, size_t n)
{
    assert_true(b->len + n <= sizeof b->p);
    memcpy(b->p + b->len, d, n);
    b->len += n;
}
static void put32(struct wb *b, uint32_t v)
{
    put(b, &v, 4);
}
static void put64(struct wb *b, uint64_t v)
{
    put(b, &v, 8);
}
static void putstr(struct wb *b, const char *s)
{
    put64(b, strlen(s));
    put(b, s, strlen(s));
}

static void test_copy_nested_arrays(void **state)
{
    (void)state;
    struct wb b = {.len = 0};
    put(&b, "GGUF", 4);
    put32(&b, 3);
    put64(&b, 0); /* tensors */
    put64(&b, 2); /* keys */
    putstr(&b, "nested.u16");
    put32(&b, GGUF_ARR), put32(&b, GGUF_ARR), put64(&b, 2);
    put32(&b, GGUF_U16), put64(&b, 2), put(&b, "\x01\x00\x02\x00", 4);
    put32(&b, GGUF_U16), put64(&b, 1), put(&b, "\x03\x00", 2);
    putstr(&b, "nested.str");
    put32(&b, GGUF_ARR), put32(&b, GGUF_ARR), put64(&b, 1);
    put32(&b, GGUF_STR), put64(&b, 1), putstr(&b, "hi");
    struct gguf_file *src = NULL;
    OK(gguf_open_buffer(b.p, b.len, &src, err, sizeof err));

    char *dir             = tu_tmpdir();
    const char *path      = in_dir(dir, "nested.gguf");
    struct gguf_writer *w = gguf_writer_new();
    OK(gguf_writer_copy_kv(w, src, 0, err, sizeof err));
    expect_err(gguf_writer_copy_kv(w, src, 1, err, sizeof err), HEARTH_EUNSUPPORTED, "nested.str");
    expect_err(gguf_writer_copy_kv(w, src, 2, err, sizeof err), HEARTH_EINVAL, "out of range");
    OK(gguf_writer_begin(w, path, err, sizeof err));
    OK(gguf_writer_finish(w, err, sizeof err));
    gguf_writer_free(w);
    gguf_close(src);

    struct gguf_file *f = NULL;
    OK(gguf_open(path, &f, err, sizeof err));
    assert_int_equal(gguf_n_kv(f), 1);
    enum gguf_vtype et;
    uint64_t n;
    const void *data;
    assert_true(gguf_kv_arr(f, 0, &et, &n) && et == GGUF_ARR && n == 2);
    assert_true(gguf_arr_arr(f, 0, 0, &et, &n, &data) && et == GGUF_U16 && n == 2);
    assert_memory_equal(data, "\x01\x00\x02\x00", 4);
    assert_true(gguf_arr_arr(f, 0, 1, &et, &n, &data) && et == GGUF_U16 && n == 1);
    assert_memory_equal(data, "\x03\x00", 2);
    gguf_close(f);
    tu_rmtree(dir);
    free(dir);
}

/* Copies the model at src_path through the writer into dir; returns the copy's path (static). */
static const char *copy_model(const char *src_path, const char *dir)
{
    struct gguf_file *f = NULL;
    OK(gguf_open(src_path, &f, err, sizeof err));
    struct gguf_writer *w = gguf_writer_new();
    for (int64_t i = 0; i < gguf_n_kv(f); i++)
        OK(gguf_writer_copy_kv(w, f, i, err, sizeof err));
    for (int64_t i = 0; i < gguf_n_tensors(f); i++) {
        const struct gguf_tensor *t = gguf_tensor(f, i);
        OK(gguf_writer_add_tensor(w, t->name, (enum dtype)t->type, t->n_dims, t->ne, err,
                                  sizeof err));
    }
    const char *out = in_dir(dir, "copy.gguf");
    OK(gguf_writer_begin(w, out, err, sizeof err));
    for (int64_t i = 0; i < gguf_n_tensors(f); i++)
        OK(gguf_writer_write(w, gguf_tensor(f, i)->data, gguf_tensor(f, i)->size, err, sizeof err));
    OK(gguf_writer_finish(w, err, sizeof err));
    gguf_writer_free(w);
    gguf_close(f);
    return out;
}

/* Same keys (name, type, value bytes) and tensors (name, type, shape, data) in a and b. */
static void assert_same_model(const char *pa, const char *pb)
{
    struct gguf_file *a = NULL, *b = NULL;
    OK(gguf_open(pa, &a, err, sizeof err));
    OK(gguf_open(pb, &b, err, sizeof err));
    assert_int_equal(gguf_n_kv(a), gguf_n_kv(b));
    for (int64_t i = 0; i < gguf_n_kv(a); i++) {
        struct gguf_str ka = gguf_key(a, i), kb = gguf_key(b, i);
        assert_int_equal(ka.len, kb.len);
        assert_memory_equal(ka.ptr, kb.ptr, ka.len);
        assert_int_equal(gguf_kv_type(a, i), gguf_kv_type(b, i));
        enum gguf_vtype ea, eb;
        uint64_t na, nb;
        if (gguf_kv_arr(a, i, &ea, &na)) {
            assert_true(gguf_kv_arr(b, i, &eb, &nb));
            assert_int_equal(ea, eb);
            assert_int_equal(na, nb);
            for (uint64_t j = 0; ea == GGUF_STR && j < na; j++) {
                struct gguf_str sa, sb;
                assert_true(gguf_arr_str(a, i, j, &sa) && gguf_arr_str(b, i, j, &sb));
                assert_int_equal(sa.len, sb.len);
                assert_memory_equal(sa.ptr, sb.ptr, sa.len);
            }
            static const uint8_t vsize[GGUF_VTYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
            if (vsize[ea] && na)
                assert_memory_equal(gguf_arr_data(a, i), gguf_arr_data(b, i), na * vsize[ea]);
        } else {
            double da = 0, db = 0;
            struct gguf_str sa, sb;
            if (gguf_kv_str(a, i, &sa)) {
                assert_true(gguf_kv_str(b, i, &sb));
                assert_int_equal(sa.len, sb.len);
                assert_memory_equal(sa.ptr, sb.ptr, sa.len);
            } else if (gguf_kv_f64(a, i, &da)) {
                assert_true(gguf_kv_f64(b, i, &db));
                assert_true(da == db);
            }
        }
    }
    assert_int_equal(gguf_n_tensors(a), gguf_n_tensors(b));
    for (int64_t i = 0; i < gguf_n_tensors(a); i++) {
        const struct gguf_tensor *ta = gguf_tensor(a, i), *tb = gguf_tensor(b, i);
        assert_string_equal(ta->name, tb->name);
        assert_int_equal(ta->type, tb->type);
        assert_memory_equal(ta->ne, tb->ne, sizeof ta->ne);
        assert_int_equal(ta->size, tb->size);
        assert_memory_equal(ta->data, tb->data, ta->size);
    }
    gguf_close(a);
    gguf_close(b);
}

static void test_copy_shared_models(void **state)
{
    (void)state;
    static const char *const models[] = {"tiny-llama-spm-f32.gguf", "tiny-llama-spm-q4_k_m.gguf",
                                         "stories260K.gguf", "tiny-qwen2-bpe-q4_k_m.gguf"};
    int copied = 0, identical = 0;
    for (size_t m = 0; m < sizeof models / sizeof models[0]; m++) {
        const char *src = tu_model(models[m]);
        if (!src) {
            print_message("skip: %s not found\n", models[m]);
            continue;
        }
        char *dir       = tu_tmpdir();
        const char *out = copy_model(src, dir);
        assert_same_model(src, out);
        size_t la = 0, lb = 0;
        char *a = tu_read_file(src, &la), *b = tu_read_file(out, &lb);
        bool same = a && b && la == lb && !memcmp(a, b, la);
        print_message("%-40s copy has the same keys and tensors; %s\n", models[m],
                      same ? "byte-identical file" : "file bytes differ");
        copied++;
        identical += same;
        free(a);
        free(b);
        tu_rmtree(dir);
        free(dir);
    }
    if (!copied)
        skip();
    /* Every one of these files was written by ggml's writer, which lays out what ours does. */
    assert_int_equal(identical, copied);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_every_type),
        cmocka_unit_test(test_replace_remove_and_alignment),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_copy_nested_arrays),
        cmocka_unit_test(test_copy_shared_models),
    };
    return cmocka_run_group_tests_name("unit_writer", tests, NULL, NULL);
}
