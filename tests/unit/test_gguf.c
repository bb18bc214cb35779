/*
 * test_gguf.c: the GGUF reader. A small valid file is written in memory
 * (every value type, a nested array, three tensors of three types), every
 * accessor is checked on it, then it is broken one field at a time and
 * truncated at every byte; each break must give HEARTH_EFORMAT and a
 * sentence that names the fault. Real shared models are opened last.
 */
#include "util/testutil.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "util/dtype.h"

/* ------------------------------------------------------------ writer --- */

struct wb {
    uint8_t *p;
    size_t len, cap;
};

static void put(struct wb *w, const void *d, size_t n)
{
    if (w->len + n > w->cap) {
        w->cap = (w->len + n) * 2 + 64;
        w->p   = realloc(w->p, w->cap);
        assert_non_null(w->p);
    }
    if (n)
        memcpy(w->p + w->len, d, n);
    w->len += n;
}

static void u8_(struct wb *w, uint8_t v)
{
    put(w, &v, 1);
}
static void u16_(struct wb *w, uint16_t v)
{
    put(w, &v, 2);
}
static void u32_(struct wb *w, uint32_t v)
{
    put(w, &v, 4);
}
static void u64_(struct wb *w, uint64_t v)
{
    put(w, &v, 8);
}
static void f32_(struct wb *w, float v)
{
    put(w, &v, 4);
}
static void f64_(struct wb *w, double v)
{
    put(w, &v, 8);
}

static void str_(struct wb *w, const char *s)
{
    u64_(w, strlen(s));
    put(w, s, strlen(s));
}

static void hdr(struct wb *w, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
    put(w, "GGUF", 4);
    u32_(w, version);
    u64_(w, n_tensors);
    u64_(w, n_kv);
}

/* A key and its value type; the value follows. */
static void key(struct wb *w, const char *k, uint32_t type)
{
    str_(w, k);
    u32_(w, type);
}

static void tinfo(struct wb *w, const char *name, uint32_t n_dims, const int64_t *ne, uint32_t type,
                  uint64_t offset)
{
    str_(w, name);
    u32_(w, n_dims);
    for (uint32_t d = 0; d < n_dims; d++)
        u64_(w, (uint64_t)ne[d]);
    u32_(w, type);
    u64_(w, offset);
}

static void pad(struct wb *w, size_t align)
{
    while (w->len % align)
        u8_(w, 0);
}

static void patch32(struct wb *w, size_t at, uint32_t v)
{
    memcpy(w->p + at, &v, 4);
}
static void patch64(struct wb *w, size_t at, uint64_t v)
{
    memcpy(w->p + at, &v, 8);
}

/* Where the fields the malformed cases patch lie in the sample file. */
struct layout {
    size_t version, n_tensors, n_kv;
    size_t name_len;        /* length of general.name's value */
    size_t key_len;         /* length of key 2's name */
    size_t u8_type;         /* value type of t.u8 */
    size_t bool_val;        /* t.bool's byte */
    size_t tok_elem, tok_n; /* t.tokens element type and count */
    size_t ints_n;          /* t.ints count */
    size_t align_val;       /* general.alignment's value */
    size_t ndims[3], ne0[3], ne1[3], ttype[3], toff[3];
    size_t data; /* start of the data section */
};

static const int64_t ne_a[] = {4, 2}, ne_b[] = {32, 2}, ne_c[] = {3};

/*
 * The sample: 18 keys of every type (alignment 64), tensors a.weight f32
 * [4,2] at 0, b.weight q8_0 [32,2] at 64, c.bias f16 [3] at 192; the file
 * ends exactly where c.bias ends, so any truncation cuts a tensor.
 */
static struct wb sample(struct layout *L)
{
    struct wb w = {0};
    struct layout l;
    put(&w, "GGUF", 4);
    l.version = w.len;
    u32_(&w, 3);
    l.n_tensors = w.len;
    u64_(&w, 3);
    l.n_kv = w.len;
    u64_(&w, 18);
    key(&w, "general.architecture", GGUF_STR), str_(&w, "llama");
    key(&w, "general.name", GGUF_STR);
    l.name_len = w.len;
    str_(&w, "tiny \"test\"\n");
    l.key_len = w.len;
    key(&w, "t.u8", GGUF_U8);
    l.u8_type = w.len - 4;
    u8_(&w, 200);
    key(&w, "t.i8", GGUF_I8), u8_(&w, (uint8_t)-5);
    key(&w, "t.u16", GGUF_U16), u16_(&w, 60000);
    key(&w, "t.i16", GGUF_I16), u16_(&w, (uint16_t)-30000);
    key(&w, "t.u32", GGUF_U32), u32_(&w, 4000000000u);
    key(&w, "t.i32", GGUF_I32), u32_(&w, (uint32_t)-2000000000);
    key(&w, "t.f32", GGUF_F32), f32_(&w, 0.5f);
    key(&w, "t.bool", GGUF_BOOL);
    l.bool_val = w.len;
    u8_(&w, 1);
    key(&w, "t.u64", GGUF_U64), u64_(&w, (1ull << 63) + 5);
    key(&w, "t.i64", GGUF_I64), u64_(&w, (uint64_t)-9000000000000000000ll);
    key(&w, "t.f64", GGUF_F64), f64_(&w, 1e300);
    key(&w, "t.tokens", GGUF_ARR);
    l.tok_elem = w.len;
    u32_(&w, GGUF_STR);
    l.tok_n = w.len;
    u64_(&w, 4);
    str_(&w, "a"), str_(&w, "bc"), str_(&w, ""),
        str_(&w, "d\xc3\xa9"
                 "f");
    key(&w, "t.ints", GGUF_ARR), u32_(&w, GGUF_I32);
    l.ints_n = w.len;
    u64_(&w, 3), u32_(&w, 1), u32_(&w, (uint32_t)-2), u32_(&w, 3);
    key(&w, "t.nested", GGUF_ARR), u32_(&w, GGUF_ARR), u64_(&w, 3);
    u32_(&w, GGUF_U16), u64_(&w, 2), u16_(&w, 7), u16_(&w, 8);
    u32_(&w, GGUF_STR), u64_(&w, 1), str_(&w, "x");
    u32_(&w, GGUF_U8), u64_(&w, 0);
    key(&w, "t.empty", GGUF_ARR), u32_(&w, GGUF_U32), u64_(&w, 0);
    key(&w, "general.alignment", GGUF_U32);
    l.align_val = w.len;
    u32_(&w, 64);

    static const char *names[3] = {"a.weight", "b.weight", "c.bias"};
    const int64_t *nes[3]       = {ne_a, ne_b, ne_c};
    const uint32_t nd[3] = {2, 2, 1}, ty[3] = {DTYPE_F32, DTYPE_Q8_0, DTYPE_F16};
    const uint64_t off[3] = {0, 64, 192};
    for (int i = 0; i < 3; i++) {
        str_(&w, names[i]);
        l.ndims[i] = w.len;
        u32_(&w, nd[i]);
        l.ne0[i] = w.len;
        l.ne1[i] = w.len + 8;
        for (uint32_t d = 0; d < nd[i]; d++)
            u64_(&w, (uint64_t)nes[i][d]);
        l.ttype[i] = w.len;
        u32_(&w, ty[i]);
        l.toff[i] = w.len;
        u64_(&w, off[i]);
    }
    pad(&w, 64);
    l.data = w.len;
    for (int k = 0; k < 8; k++)
        f32_(&w, (float)k);
    while (w.len < l.data + 192 + 6)
        u8_(&w, 0x11);
    if (L)
        *L = l;
    return w;
}

/* Opens len bytes copied into an exact-size heap block, so ASan sees any overread. */
static enum hearth_status open_copy(const uint8_t *p, size_t len, struct gguf_file **f, char *err)
{
    uint8_t *copy = malloc(len ? len : 1);
    assert_non_null(copy);
    if (len)
        memcpy(copy, p, len);
    err[0]                = 0;
    enum hearth_status st = gguf_open_buffer(copy, len, f, err, HEARTH_ERR_MAX);
    if (st == HEARTH_OK) {
        /* walk everything while the buffer lives */
        for (int64_t i = 0; i < gguf_n_kv(*f); i++) {
            struct gguf_str s;
            uint64_t n, u;
            enum gguf_vtype et;
            if (gguf_kv_arr(*f, i, &et, &n) && et == GGUF_STR)
                for (uint64_t j = 0; j < n; j++)
                    assert_true(gguf_arr_str(*f, i, j, &s));
            (void)gguf_kv_u64(*f, i, &u);
        }
        gguf_close(*f);
        *f = NULL;
    }
    free(copy);
    return st;
}

/* The sample with one patch applied must fail with EFORMAT and a sentence containing want. */
static void expect_bad(struct wb *w, const char *want)
{
    char err[HEARTH_ERR_MAX];
    struct gguf_file *f   = (struct gguf_file *)1;
    enum hearth_status st = open_copy(w->p, w->len, &f, err);
    print_message("# %s\n", err);
    assert_int_equal(st, HEARTH_EFORMAT);
    assert_null(f);
    assert_true(!strncmp(err, "gguf: ", 6));
    assert_null(strchr(err, '\n'));
    if (!strstr(err, want))
        fail_msg("error \"%s\" does not contain \"%s\"", err, want);
}

/* ------------------------------------------------------- valid files --- */

static void check_sample(struct gguf_file *f, const struct layout *L, size_t len, uint32_t version)
{
    assert_int_equal(gguf_version(f), version);
    assert_int_equal(gguf_file_size(f), len);
    assert_int_equal(gguf_alignment(f), 64);
    assert_int_equal(gguf_data_offset(f), L->data);
    assert_int_equal(gguf_n_kv(f), 18);
    assert_int_equal(gguf_n_tensors(f), 3);

    int64_t i = gguf_find_key(f, "general.architecture");
    assert_int_equal(i, 0);
    struct gguf_str s = gguf_key(f, 1);
    assert_int_equal(s.len, 12);
    assert_memory_equal(s.ptr, "general.name", 12);
    assert_int_equal(gguf_kv_type(f, 1), GGUF_STR);
    assert_true(gguf_kv_str(f, 1, &s));
    assert_int_equal(s.len, 12);
    assert_memory_equal(s.ptr, "tiny \"test\"\n", 12);
    assert_int_equal(gguf_find_key(f, "no.such.key"), -1);
    assert_int_equal(gguf_find_key(f, "general"), -1);

    char buf[64];
    assert_true(gguf_get_str(f, "general.architecture", buf, sizeof buf));
    assert_string_equal(buf, "llama");
    assert_false(gguf_get_str(f, "general.architecture", buf, 5)); /* no room for the NUL */
    assert_true(gguf_get_str(f, "general.architecture", buf, 6));
    assert_false(gguf_get_str(f, "t.u8", buf, sizeof buf));
    assert_false(gguf_get_str(f, "absent", buf, sizeof buf));

    uint64_t u;
    int64_t v;
    double d;
    float x;
    uint32_t u32;
    bool b;
    i = gguf_find_key(f, "t.u8");
    assert_int_equal(gguf_kv_type(f, i), GGUF_U8);
    assert_true(gguf_kv_u64(f, i, &u) && u == 200);
    assert_true(gguf_kv_i64(f, i, &v) && v == 200);
    assert_true(gguf_kv_f64(f, i, &d) && d == 200);
    assert_false(gguf_kv_bool(f, i, &b));
    assert_false(gguf_kv_str(f, i, &s));
    i = gguf_find_key(f, "t.i8");
    assert_false(gguf_kv_u64(f, i, &u));
    assert_true(gguf_kv_i64(f, i, &v) && v == -5);
    assert_true(gguf_get_u32(f, "t.u16", &u32) && u32 == 60000);
    i = gguf_find_key(f, "t.i16");
    assert_true(gguf_kv_i64(f, i, &v) && v == -30000);
    assert_true(gguf_get_u32(f, "t.u32", &u32) && u32 == 4000000000u);
    i = gguf_find_key(f, "t.i32");
    assert_true(gguf_kv_i64(f, i, &v) && v == -2000000000);
    assert_false(gguf_get_u32(f, "t.i32", &u32));
    i = gguf_find_key(f, "t.f32");
    assert_false(gguf_kv_u64(f, i, &u));
    assert_false(gguf_kv_i64(f, i, &v));
    assert_true(gguf_kv_f64(f, i, &d) && d == 0.5);
    assert_true(gguf_get_f32(f, "t.f32", &x) && x == 0.5f);
    assert_true(gguf_get_f32(f, "t.u16", &x) && x == 60000.0f);
    assert_true(gguf_get_bool(f, "t.bool", &b) && b);
    assert_false(gguf_get_u32(f, "t.bool", &u32));
    assert_false(gguf_get_bool(f, "t.u8", &b));
    i = gguf_find_key(f, "t.u64");
    assert_true(gguf_kv_u64(f, i, &u) && u == (1ull << 63) + 5);
    assert_false(gguf_kv_i64(f, i, &v));
    assert_false(gguf_get_u32(f, "t.u64", &u32));
    i = gguf_find_key(f, "t.i64");
    assert_true(gguf_kv_i64(f, i, &v) && v == -9000000000000000000ll);
    assert_false(gguf_kv_u64(f, i, &u));
    i = gguf_find_key(f, "t.f64");
    assert_true(gguf_kv_f64(f, i, &d) && d == 1e300);
    assert_false(gguf_get_f32(f, "t.f64", &x)); /* beyond float's range */
    assert_true(gguf_get_u32(f, "general.alignment", &u32) && u32 == 64);

    enum gguf_vtype et;
    uint64_t n;
    i = gguf_find_key(f, "t.tokens");
    assert_int_equal(gguf_kv_type(f, i), GGUF_ARR);
    assert_true(gguf_kv_arr(f, i, &et, &n));
    assert_int_equal(et, GGUF_STR);
    assert_int_equal(n, 4);
    assert_null(gguf_arr_data(f, i));
    assert_true(gguf_arr_str(f, i, 1, &s) && s.len == 2 && !memcmp(s.ptr, "bc", 2));
    assert_true(gguf_arr_str(f, i, 2, &s) && s.len == 0);
    assert_true(gguf_arr_str(f, i, 3, &s) && s.len == 4 &&
                !memcmp(s.ptr,
                        "d\xc3\xa9"
                        "f",
                        4));
    assert_true(gguf_arr_str(f, i, 0, &s) && s.len == 1 && s.ptr[0] == 'a');
    assert_false(gguf_arr_str(f, i, 4, &s));
    assert_false(gguf_arr_str(f, i, UINT64_MAX, &s));
    assert_false(gguf_kv_u64(f, i, &u));
    assert_false(gguf_kv_str(f, i, &s));

    i = gguf_find_key(f, "t.ints");
    assert_true(gguf_kv_arr(f, i, &et, &n) && et == GGUF_I32 && n == 3);
    int32_t ints[3];
    assert_non_null(gguf_arr_data(f, i));
    memcpy(ints, gguf_arr_data(f, i), sizeof ints);
    assert_int_equal(ints[0], 1);
    assert_int_equal(ints[1], -2);
    assert_int_equal(ints[2], 3);
    assert_false(gguf_arr_str(f, i, 0, &s));

    i = gguf_find_key(f, "t.nested");
    const void *data;
    assert_true(gguf_kv_arr(f, i, &et, &n) && et == GGUF_ARR && n == 3);
    assert_null(gguf_arr_data(f, i));
    assert_true(gguf_arr_arr(f, i, 0, &et, &n, &data));
    assert_int_equal(et, GGUF_U16);
    assert_int_equal(n, 2);
    uint16_t two[2];
    memcpy(two, data, sizeof two);
    assert_int_equal(two[0], 7);
    assert_int_equal(two[1], 8);
    assert_true(gguf_arr_arr(f, i, 1, &et, &n, &data) && et == GGUF_STR && n == 1 && !data);
    assert_true(gguf_arr_arr(f, i, 2, &et, &n, &data) && et == GGUF_U8 && n == 0 && data);
    assert_false(gguf_arr_arr(f, i, 3, &et, &n, &data));
    assert_false(gguf_arr_arr(f, gguf_find_key(f, "t.tokens"), 0, &et, &n, &data));

    i = gguf_find_key(f, "t.empty");
    assert_true(gguf_kv_arr(f, i, &et, &n) && et == GGUF_U32 && n == 0);
    assert_false(gguf_kv_arr(f, 0, &et, &n));

    /* out-of-range indexes are answered, not trusted */
    assert_int_equal(gguf_key(f, -1).len, 0);
    assert_int_equal(gguf_key(f, 18).len, 0);
    assert_int_equal(gguf_kv_type(f, 99), GGUF_VTYPE_COUNT);
    assert_false(gguf_kv_u64(f, -1, &u));
    assert_false(gguf_kv_f64(f, 18, &d));
    assert_false(gguf_arr_str(f, -1, 0, &s));
    assert_null(gguf_arr_data(f, 1000));
    assert_null(gguf_tensor(f, -1));
    assert_null(gguf_tensor(f, 3));

    const struct gguf_tensor *t = gguf_find_tensor(f, "a.weight");
    assert_ptr_equal(t, gguf_tensor(f, 0));
    assert_string_equal(t->name, "a.weight");
    assert_int_equal(t->type, DTYPE_F32);
    assert_int_equal(t->n_dims, 2);
    assert_int_equal(t->ne[0], 4);
    assert_int_equal(t->ne[1], 2);
    assert_int_equal(t->ne[2], 1);
    assert_int_equal(t->ne[3], 1);
    assert_int_equal(t->offset, 0);
    assert_int_equal(t->size, 32);
    float fl[8];
    memcpy(fl, t->data, sizeof fl);
    for (int k = 0; k < 8; k++)
        assert_true(fl[k] == (float)k);
    t = gguf_find_tensor(f, "b.weight");
    assert_non_null(t);
    assert_int_equal(t->type, DTYPE_Q8_0);
    assert_int_equal(t->size, 68);
    assert_int_equal(t->offset, 64);
    t = gguf_find_tensor(f, "c.bias");
    assert_non_null(t);
    assert_int_equal(t->n_dims, 1);
    assert_int_equal(t->size, 6);
    assert_int_equal(L->data + t->offset + t->size, len);
    assert_null(gguf_find_tensor(f, "c"));
    assert_null(gguf_find_tensor(f, ""));

    assert_string_equal(gguf_vtype_name(GGUF_U32), "u32");
    assert_string_equal(gguf_vtype_name(GGUF_STR), "string");
    assert_string_equal(gguf_vtype_name(GGUF_ARR), "array");
    assert_string_equal(gguf_vtype_name(GGUF_VTYPE_COUNT), "unknown");
}

static void test_sample_buffer(void **state)
{
    struct layout L;
    struct wb w = sample(&L);
    struct gguf_file *f;
    char err[HEARTH_ERR_MAX] = "";
    enum hearth_status st    = gguf_open_buffer(w.p, w.len, &f, err, sizeof err);
    if (st != HEARTH_OK)
        fail_msg("open: %s", err);
    check_sample(f, &L, w.len, 3);
    gguf_close(f);
    free(w.p);
}

static void test_sample_file_and_v2(void **state)
{
    struct layout L;
    struct wb w = sample(&L);
    patch32(&w, L.version, 2);
    char *dir = tu_tmpdir(), path[4096], err[HEARTH_ERR_MAX] = "";
    assert_non_null(dir);
    snprintf(path, sizeof path, "%s/sample.gguf", dir);
    assert_int_equal(tu_write_file(path, w.p, w.len), 0);
    struct gguf_file *f;
    enum hearth_status st = gguf_open(path, &f, err, sizeof err);
    if (st != HEARTH_OK)
        fail_msg("open: %s", err);
    check_sample(f, &L, w.len, 2);
    gguf_close(f);

    /* open failures: EIO with the reason; an empty file is malformed, not an I/O error */
    snprintf(path, sizeof path, "%s/missing.gguf", dir);
    assert_int_equal(gguf_open(path, &f, err, sizeof err), HEARTH_EIO);
    assert_non_null(strstr(err, "gguf: cannot open"));
    assert_non_null(strstr(err, "No such file"));
    assert_null(f);
    assert_int_equal(gguf_open(dir, &f, err, sizeof err), HEARTH_EIO);
    assert_non_null(strstr(err, "not a regular file"));
    snprintf(path, sizeof path, "%s/empty.gguf", dir);
    assert_int_equal(tu_write_file(path, "", 0), 0);
    assert_int_equal(gguf_open(path, &f, err, sizeof err), HEARTH_EFORMAT);
    assert_non_null(strstr(err, "truncated at byte 0"));
    tu_rmtree(dir);
    free(dir);
    free(w.p);
}

static void test_minimal_files(void **state)
{
    /* no keys, no tensors: the 24-byte header alone is a valid file */
    struct wb w = {0};
    struct gguf_file *f;
    char err[HEARTH_ERR_MAX];
    hdr(&w, 3, 0, 0);
    assert_int_equal(gguf_open_buffer(w.p, w.len, &f, err, sizeof err), HEARTH_OK);
    assert_int_equal(gguf_n_kv(f), 0);
    assert_int_equal(gguf_n_tensors(f), 0);
    assert_int_equal(gguf_alignment(f), 32);
    assert_int_equal(gguf_find_key(f, "general.alignment"), -1);
    assert_null(gguf_find_tensor(f, "x"));
    gguf_close(f);
    gguf_close(NULL);
    free(w.p);
    assert_int_equal(gguf_open_buffer(NULL, 0, &f, err, sizeof err), HEARTH_EFORMAT);

    /* arrays nested 7 deep are read */
    w = (struct wb){0};
    hdr(&w, 3, 0, 1);
    key(&w, "deep", GGUF_ARR);
    for (int d = 0; d < 6; d++)
        u32_(&w, GGUF_ARR), u64_(&w, 1);
    u32_(&w, GGUF_U8), u64_(&w, 1), u8_(&w, 9);
    assert_int_equal(gguf_open_buffer(w.p, w.len, &f, err, sizeof err), HEARTH_OK);
    gguf_close(f);
    free(w.p);

    /* a one-block q4_k tensor at the default alignment */
    w = (struct wb){0};
    hdr(&w, 3, 1, 0);
    tinfo(&w, "k", 1, (const int64_t[]){256}, DTYPE_Q4_K, 0);
    pad(&w, 32);
    for (int k = 0; k < 144; k++)
        u8_(&w, 0);
    assert_int_equal(gguf_open_buffer(w.p, w.len, &f, err, sizeof err), HEARTH_OK);
    assert_int_equal(gguf_find_tensor(f, "k")->size, 144);
    gguf_close(f);
    free(w.p);
}

/* --------------------------------------------------------- malformed --- */

static void test_truncated_everywhere(void **state)
{
    struct layout L;
    struct wb w = sample(&L);
    char err[HEARTH_ERR_MAX];
    for (size_t len = 0; len < w.len; len++) {
        struct gguf_file *f   = NULL;
        enum hearth_status st = open_copy(w.p, len, &f, err);
        if (st != HEARTH_EFORMAT || strncmp(err, "gguf: ", 6) || strchr(err, '\n'))
            fail_msg("truncated to %zu bytes: status %d, \"%s\"", len, st, err);
        if (!strstr(err, "truncated at byte") && !strstr(err, "ends at byte") &&
            !strstr(err, "bytes follow"))
            fail_msg("truncated to %zu bytes: \"%s\" does not say so", len, err);
    }
    struct gguf_file *f = NULL;
    assert_int_equal(open_copy(w.p, w.len, &f, err), HEARTH_OK);
    /* a cut names the byte and the field */
    assert_int_equal(open_copy(w.p, 30, &f, err), HEARTH_EFORMAT);
    assert_non_null(strstr(err, "18 keys and 3 tensors but only 6 bytes follow"));
    /* 33 bytes after the count pass the 4 x 8 minimum but cut element 3's length */
    assert_int_equal(open_copy(w.p, L.tok_n + 8 + 33, &f, err), HEARTH_EFORMAT);
    char want[160];
    snprintf(want, sizeof want,
             "truncated at byte %zu: the length of the string value of "
             "element 3 of key 13 (t.tokens) needs 8 bytes from byte %zu",
             L.tok_n + 8 + 33, L.tok_n + 8 + 27);
    if (!strstr(err, want))
        fail_msg("\"%s\" does not contain \"%s\"", err, want);
    free(w.p);
}

static void test_bad_header(void **state)
{
    struct layout L;
    struct wb w = sample(&L);
    w.p[0]      = 'X';
    expect_bad(&w, "not a GGUF file");
    w.p[0] = 'G';
    patch32(&w, L.version, 1);
    expect_bad(&w, "version 1 ");
    patch32(&w, L.version, 99);
    expect_bad(&w, "unknown version 99");
    patch32(&w, L.version, 0x03000000);
    expect_bad(&w, "big-endian");
    patch32(&w, L.version, 3);

    patch64(&w, L.n_kv, 1ull << 62);
    expect_bad(&w, "header claims 4611686018427387904 keys");
    patch64(&w, L.n_kv, UINT64_MAX);
    expect_bad(&w, "header claims");
    patch64(&w, L.n_kv, 18);
    patch64(&w, L.n_tensors, UINT64_MAX / 33 + 1);
    expect_bad(&w, "tensors but only");
    patch64(&w, L.n_tensors, 3);
    /* one key too many: the walk runs into the tensor infos and finds nonsense */
    patch64(&w, L.n_kv, 19);
    expect_bad(&w, "gguf: ");
    patch64(&w, L.n_kv, 18);
    free(w.p);
}

static void test_bad_values(void **state)
{
    struct layout L;
    struct wb w = sample(&L);

    patch64(&w, L.name_len, 1ull << 60);
    expect_bad(&w, "the string value of key 1 (general.name) needs 1152921504606846976 bytes");
    patch64(&w, L.name_len, UINT64_MAX);
    expect_bad(&w, "truncated");
    patch64(&w, L.name_len, 12);
    patch64(&w, L.key_len, 70000);
    expect_bad(&w, "the name of key 2 is 70000 bytes long (limit 65535)");
    patch64(&w, L.key_len, 0);
    expect_bad(&w, "key 2 is empty");
    patch64(&w, L.key_len, 4);

    patch32(&w, L.u8_type, 13);
    expect_bad(&w, "key 2 (t.u8) has unknown value type 13");
    patch32(&w, L.u8_type, UINT32_MAX);
    expect_bad(&w, "unknown value type 4294967295");
    patch32(&w, L.u8_type, GGUF_U8);

    w.p[L.bool_val] = 2;
    expect_bad(&w, "not 0 or 1");
    w.p[L.bool_val] = 1;

    patch32(&w, L.tok_elem, 42);
    expect_bad(&w, "unknown element type 42");
    patch32(&w, L.tok_elem, GGUF_STR);
    patch64(&w, L.tok_n, 1ull << 61); /* * 8 wraps to 0 if multiplied naively */
    expect_bad(&w, "claims 2305843009213693952 string elements");
    patch64(&w, L.tok_n, 5); /* the fifth string is "t.ints"; then the keys are misread */
    expect_bad(&w, "key 14 is 21474836489 bytes long");
    patch64(&w, L.tok_n, 4);
    patch64(&w, L.ints_n, UINT64_MAX / 4 + 2); /* * 4 wraps to 4 */
    expect_bad(&w, "i32 elements but only");
    patch64(&w, L.ints_n, 3);

    patch32(&w, L.align_val, 48);
    expect_bad(&w, "general.alignment is 48, not a non-zero power of two");
    patch32(&w, L.align_val, 0);
    expect_bad(&w, "general.alignment is 0");
    patch32(&w, L.align_val, 64);
    free(w.p);

    /* general.alignment of the wrong type */
    w = (struct wb){0};
    hdr(&w, 3, 0, 1);
    key(&w, "general.alignment", GGUF_U64), u64_(&w, 32);
    expect_bad(&w, "general.alignment has type u64, expected u32");
    free(w.p);

    /* a duplicate key */
    w = (struct wb){0};
    hdr(&w, 3, 0, 3);
    key(&w, "a", GGUF_U8), u8_(&w, 1);
    key(&w, "b", GGUF_U8), u8_(&w, 1);
    key(&w, "a", GGUF_STR), str_(&w, "again");
    expect_bad(&w, "key a appears twice (keys 0 and 2)");
    free(w.p);

    /* nesting deeper than the limit */
    w = (struct wb){0};
    hdr(&w, 3, 0, 1);
    key(&w, "deep", GGUF_ARR);
    for (int d = 0; d < 20; d++)
        u32_(&w, GGUF_ARR), u64_(&w, 1);
    u32_(&w, GGUF_U8), u64_(&w, 0);
    expect_bad(&w, "nested more than");
    free(w.p);

    /* a nested array whose count the file cannot hold */
    w = (struct wb){0};
    hdr(&w, 3, 0, 1);
    key(&w, "n", GGUF_ARR), u32_(&w, GGUF_ARR), u64_(&w, 2);
    u32_(&w, GGUF_U64), u64_(&w, 1), u64_(&w, 5);
    u32_(&w, GGUF_F64), u64_(&w, 1ull << 62);
    expect_bad(&w, "element 1 of key 0 (n)");
    free(w.p);

    /* a control byte in a key is not echoed raw */
    w = (struct wb){0};
    hdr(&w, 3, 0, 1);
    key(&w, "bad\nkey", GGUF_U32), u8_(&w, 1);
    expect_bad(&w, "bad?key");
    free(w.p);
}

static void test_bad_tensors(void **state)
{
    struct layout L;
    struct wb w = sample(&L);

    patch32(&w, L.ttype[1], 77);
    expect_bad(&w, "tensor b.weight has unknown type id 77");
    patch32(&w, L.ttype[1], 4); /* the retired q4_2 */
    expect_bad(&w, "unknown type id 4");
    patch32(&w, L.ttype[1], DTYPE_Q8_0);

    patch32(&w, L.ndims[0], 0);
    expect_bad(&w, "tensor a.weight has 0 dimensions (1 to 4 allowed)");
    patch32(&w, L.ndims[0], 5);
    expect_bad(&w, "has 5 dimensions");
    patch32(&w, L.ndims[0], 2);

    patch64(&w, L.ne0[1], 33);
    expect_bad(&w, "tensor b.weight has ne[0] = 33, not a multiple of the q8_0 block of 32");
    patch64(&w, L.ne0[1], 32);
    patch64(&w, L.ne1[0], 0);
    expect_bad(&w, "ne[1] = 0 (must be >= 1)");
    patch64(&w, L.ne1[0], (uint64_t)-3);
    expect_bad(&w, "ne[1] = -3");
    patch64(&w, L.ne1[0], 1ull << 62);
    expect_bad(&w, "more than 2^63 elements");
    patch64(&w, L.ne1[0], 1ull << 60); /* 2^62 elements of 4 bytes: 2^64 bytes */
    expect_bad(&w, "a.weight");
    patch64(&w, L.ne1[0], 2);

    patch64(&w, L.toff[1], 65);
    expect_bad(&w, "tensor b.weight has offset 65, not a multiple of the alignment 64");
    patch64(&w, L.toff[1], 64);

    patch64(&w, L.toff[2], 128); /* b.weight covers 64..132 */
    expect_bad(&w, "tensors b.weight and c.bias overlap");
    patch64(&w, L.toff[2], 0);
    expect_bad(&w, "overlap");
    patch64(&w, L.toff[2], 256);
    char want[128];
    snprintf(want, sizeof want, "tensor c.bias ends at byte %zu but the file has %zu",
             L.data + 256 + 6, w.len);
    expect_bad(&w, want);
    patch64(&w, L.toff[2], UINT64_MAX - 63);
    expect_bad(&w, "tensor c.bias ends past byte 2^64");
    patch64(&w, L.toff[2], 192);
    free(w.p);

    /* duplicate, empty and NUL-carrying names */
    const int64_t one[] = {1};
    w                   = (struct wb){0};
    hdr(&w, 3, 2, 0);
    tinfo(&w, "t", 1, one, DTYPE_F32, 0);
    tinfo(&w, "t", 1, one, DTYPE_F32, 32);
    pad(&w, 32);
    for (int k = 0; k < 36; k++)
        u8_(&w, 0);
    expect_bad(&w, "tensor name t appears twice (tensors 0 and 1)");
    free(w.p);
    w = (struct wb){0};
    hdr(&w, 3, 1, 0);
    tinfo(&w, "", 1, one, DTYPE_F32, 0);
    pad(&w, 32), u32_(&w, 0);
    expect_bad(&w, "tensor 0 has an empty name");
    free(w.p);
    w = (struct wb){0};
    hdr(&w, 3, 1, 0);
    u64_(&w, 3), put(&w, "a\0b", 3), u32_(&w, 1), u64_(&w, 1), u32_(&w, 0), u64_(&w, 0);
    pad(&w, 32), u32_(&w, 0);
    expect_bad(&w, "contains a NUL byte");
    free(w.p);
    w = (struct wb){0};
    hdr(&w, 3, 1, 0);
    u64_(&w, 70000);
    for (int k = 0; k < 70000; k++)
        u8_(&w, 'n');
    expect_bad(&w, "the name of tensor 0 is 70000 bytes long (limit 65536)");
    free(w.p);
}

/* ------------------------------------------------------- real models --- */

/*
 * The fingerprint: the same bytes give the same value; a byte changed in a
 * sampled stretch of the tensor data, or in the header, gives another.
 */
static void test_fingerprint(void **state)
{
    (void)state;
    TU_MODEL_OR_SKIP(path, "stories260K.gguf");
    size_t len;
    uint8_t *a = (uint8_t *)tu_read_file(path, &len), *b = malloc(len);
    assert_non_null(a);
    memcpy(b, a, len);
    struct gguf_file *fa, *fb;
    char err[HEARTH_ERR_MAX];
    assert_int_equal(gguf_open_buffer(a, len, &fa, err, sizeof err), HEARTH_OK);
    assert_int_equal(gguf_open_buffer(b, len, &fb, err, sizeof err), HEARTH_OK);
    const uint64_t fp = gguf_fingerprint(fa);
    assert_true(fp == gguf_fingerprint(fb));
    b[gguf_data_offset(fb)] ^= 1; /* the first sample's first byte */
    assert_true(fp != gguf_fingerprint(fb));
    b[gguf_data_offset(fb)] ^= 1;
    b[len - 1] ^= 1; /* the last sample's last byte */
    assert_true(fp != gguf_fingerprint(fb));
    b[len - 1] ^= 1;
    b[40] ^= 1; /* in the metadata */
    assert_true(fp != gguf_fingerprint(fb));
    gguf_close(fa);
    gguf_close(fb);
    free(a);
    free(b);
}

static void test_stories260k(void **state)
{
    TU_MODEL_OR_SKIP(path, "stories260K.gguf");
    struct gguf_file *f;
    char err[HEARTH_ERR_MAX];
    if (gguf_open(path, &f, err, sizeof err) != HEARTH_OK)
        fail_msg("%s", err);
    assert_int_equal(gguf_version(f), 3);
    assert_int_equal(gguf_alignment(f), 32);
    assert_int_equal(gguf_n_kv(f), 19);
    assert_int_equal(gguf_n_tensors(f), 48);
    uint32_t v;
    assert_true(gguf_get_u32(f, "llama.embedding_length", &v));
    assert_int_equal(v, 64);
    assert_true(gguf_get_u32(f, "llama.block_count", &v) && v == 5);
    float eps;
    assert_true(gguf_get_f32(f, "llama.attention.layer_norm_rms_epsilon", &eps));
    assert_true(fabsf(eps - 1e-5f) < 1e-9f);
    char arch[32];
    assert_true(gguf_get_str(f, "general.architecture", arch, sizeof arch));
    assert_string_equal(arch, "llama");

    int64_t i = gguf_find_key(f, "tokenizer.ggml.tokens");
    enum gguf_vtype et;
    uint64_t n;
    struct gguf_str s;
    assert_true(gguf_kv_arr(f, i, &et, &n) && et == GGUF_STR && n == 512);
    assert_true(gguf_arr_str(f, i, 1, &s) && s.len == 3 && !memcmp(s.ptr, "<s>", 3));
    assert_true(gguf_arr_str(f, i, 3, &s) && s.len == 6 && !memcmp(s.ptr, "<0x00>", 6));

    const struct gguf_tensor *t = gguf_find_tensor(f, "token_embd.weight");
    assert_non_null(t);
    assert_int_equal(t->type, DTYPE_F32);
    assert_int_equal(t->n_dims, 2);
    assert_int_equal(t->ne[0], 64);
    assert_int_equal(t->ne[1], 512);
    assert_int_equal(t->size, 64 * 512 * 4);
    assert_non_null(gguf_find_tensor(f, "blk.4.ffn_norm.weight"));
    assert_null(gguf_find_tensor(f, "blk.5.ffn_norm.weight"));
    gguf_close(f);
}

static void test_qwen2_f16(void **state)
{
    TU_SHARED_OR_SKIP(path, "models/tiny-qwen2-bpe-f16.gguf");
    struct gguf_file *f;
    char err[HEARTH_ERR_MAX];
    if (gguf_open(path, &f, err, sizeof err) != HEARTH_OK)
        fail_msg("%s", err);
    bool b;
    float x;
    uint32_t v;
    assert_true(gguf_get_bool(f, "tokenizer.ggml.add_bos_token", &b) && b);
    assert_true(gguf_get_f32(f, "qwen2.rope.freq_base", &x) && x == 1e6f);
    assert_true(gguf_get_u32(f, "tokenizer.ggml.eos_token_id", &v) && v == 32014);
    int64_t i = gguf_find_key(f, "tokenizer.ggml.tokens");
    enum gguf_vtype et;
    uint64_t n;
    struct gguf_str s;
    assert_true(gguf_kv_arr(f, i, &et, &n) && n == 32256);
    assert_true(gguf_arr_str(f, i, 1, &s) && s.len == 1 && s.ptr[0] == '"');
    i = gguf_find_key(f, "tokenizer.ggml.merges");
    assert_true(gguf_kv_arr(f, i, &et, &n) && et == GGUF_STR && n == 31757);
    const struct gguf_tensor *t = gguf_find_tensor(f, "token_embd.weight");
    assert_non_null(t);
    assert_int_equal(t->type, DTYPE_F16);
    assert_int_equal(t->ne[0], 256);
    assert_int_equal(t->ne[1], 32256);
    gguf_close(f);
}

/* Every model found (models/, ../shared/models) opens; its tensors tile the data section. */
static void test_all_shared_models(void **state)
{
    static const char *names[] = {
        "stories260K",           "tiny-llama-spm-bf16",   "tiny-llama-spm-f16",
        "tiny-llama-spm-f32",    "tiny-llama-spm-iq4_nl", "tiny-llama-spm-iq4_xs",
        "tiny-llama-spm-q2_k",   "tiny-llama-spm-q3_k_m", "tiny-llama-spm-q4_0",
        "tiny-llama-spm-q4_1",   "tiny-llama-spm-q4_k_m", "tiny-llama-spm-q4_k_s",
        "tiny-llama-spm-q5_0",   "tiny-llama-spm-q5_1",   "tiny-llama-spm-q5_k_m",
        "tiny-llama-spm-q6_k",   "tiny-llama-spm-q8_0",   "tiny-qwen2-bpe-f16",
        "tiny-qwen2-bpe-q4_k_m", "tiny-qwen2-bpe-q6_k",   "tiny-qwen2-bpe-q8_0",
        "tiny-qwen3-bpe-q8_0",
    };
    int opened = 0;
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        char rel[128];
        snprintf(rel, sizeof rel, "%s.gguf", names[k]);
        const char *path = tu_model(rel);
        if (!path)
            continue;
        struct gguf_file *f;
        char err[HEARTH_ERR_MAX];
        if (gguf_open(path, &f, err, sizeof err) != HEARTH_OK)
            fail_msg("%s: %s", rel, err);
        uint64_t end = 0;
        for (int64_t i = 0; i < gguf_n_tensors(f); i++) {
            const struct gguf_tensor *t = gguf_tensor(f, i);
            assert_ptr_equal(gguf_find_tensor(f, t->name), t);
            uint64_t e = gguf_data_offset(f) + t->offset + t->size;
            if (e > end)
                end = e;
        }
        assert_true(end <= gguf_file_size(f));
        assert_true(gguf_file_size(f) - end < gguf_alignment(f));
        gguf_close(f);
        opened++;
    }
    if (!opened) {
        print_message("skip: no models found\n");
        skip();
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sample_buffer), cmocka_unit_test(test_sample_file_and_v2),
        cmocka_unit_test(test_minimal_files), cmocka_unit_test(test_truncated_everywhere),
        cmocka_unit_test(test_bad_header),    cmocka_unit_test(test_bad_values),
        cmocka_unit_test(test_bad_tensors),   cmocka_unit_test(test_stories260k),
        cmocka_unit_test(test_qwen2_f16),     cmocka_unit_test(test_all_shared_models),
        cmocka_unit_test(test_fingerprint),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
