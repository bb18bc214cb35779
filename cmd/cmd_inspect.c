/*
 * cmd_inspect.c: `hearth inspect FILE`, a GGUF file's header in readable
 * form: version, alignment and counts; every metadata key with its type and
 * value (long strings and arrays abbreviated); the tensor table; totals by
 * type. Reads only the header and the tensor infos, never the tensor data.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "gguf/gguf.h"
#include "opts.h"
#include "util/dtype.h"

#define STR_SHOW   256 /* bytes of a string value printed before "..." */
#define ARR_SHOW   8   /* elements of an array printed before "..." */
#define ELEM_SHOW  48  /* bytes of a string array element printed */
#define NAME_WIDTH 40  /* column width cap for key and tensor names */

struct inspect_args {
    struct opt_multi files; /* the one FILE (a second is refused by name) */
};

static const struct inspect_args inspect_defaults = {0};

const struct cmd_spec cmd_inspect_spec = {
    .name      = "inspect",
    .synopsis  = "hearth inspect FILE",
    .about     = "Prints a GGUF file's version, metadata keys with their values, and tensor table "
                 "(name, type, shape, bytes), then totals by type. Reads only the header and the "
                 "tensor infos, never the tensor data.",
    .pos_min   = 1,
    .pos_max   = 2,
    .pos_off   = offsetof(struct inspect_args, files),
    .defaults  = &inspect_defaults,
    .args_size = sizeof(struct inspect_args),
};

/* s quoted, with quotes, backslashes and control bytes escaped; at most max bytes of it. */
static void put_str(const char *s, uint64_t len, uint64_t max)
{
    putchar('"');
    for (uint64_t i = 0; i < len && i < max; i++) {
        unsigned char ch = (unsigned char)s[i];
        switch (ch) {
        case '"':
            fputs("\\\"", stdout);
            break;
        case '\\':
            fputs("\\\\", stdout);
            break;
        case '\n':
            fputs("\\n", stdout);
            break;
        case '\r':
            fputs("\\r", stdout);
            break;
        case '\t':
            fputs("\\t", stdout);
            break;
        default:
            if (ch < 0x20 || ch == 0x7f)
                printf("\\x%02x", ch);
            else
                putchar(ch);
        }
    }
    putchar('"');
    if (len > max)
        printf("... (%" PRIu64 " bytes)", len);
}

/* The shortest %g form of v that reads back as the same value at its precision. */
static void put_float(double v, bool single)
{
    char buf[40];
    for (int prec = single ? 6 : 15; prec <= (single ? 9 : 17); prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (single ? strtof(buf, NULL) == (float)v : strtod(buf, NULL) == v)
            break;
    }
    fputs(buf, stdout);
}

/* Element j of a numeric array at p (little-endian, as stored). */
static void put_num(enum gguf_vtype t, const void *p, uint64_t j)
{
    const unsigned char *b = p;
    union {
        uint8_t u8;
        int8_t i8;
        uint16_t u16;
        int16_t i16;
        uint32_t u32;
        int32_t i32;
        uint64_t u64;
        int64_t i64;
        float f32;
        double f64;
    } v;
    static const uint8_t size[GGUF_VTYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    memcpy(&v, b + j * size[t], size[t]);
    switch (t) {
    case GGUF_U8:
        printf("%" PRIu8, v.u8);
        break;
    case GGUF_I8:
        printf("%" PRId8, v.i8);
        break;
    case GGUF_U16:
        printf("%" PRIu16, v.u16);
        break;
    case GGUF_I16:
        printf("%" PRId16, v.i16);
        break;
    case GGUF_U32:
        printf("%" PRIu32, v.u32);
        break;
    case GGUF_I32:
        printf("%" PRId32, v.i32);
        break;
    case GGUF_U64:
        printf("%" PRIu64, v.u64);
        break;
    case GGUF_I64:
        printf("%" PRId64, v.i64);
        break;
    case GGUF_F32:
        put_float(v.f32, true);
        break;
    case GGUF_F64:
        put_float(v.f64, false);
        break;
    case GGUF_BOOL:
        fputs(v.u8 ? "true" : "false", stdout);
        break;
    default:
        break;
    }
}

/* "[n x type] e0, e1, ..., " for a numeric array of n elements at data. */
static void put_num_arr(enum gguf_vtype t, uint64_t n, const void *data)
{
    printf("[%" PRIu64 " x %s]", n, gguf_vtype_name(t));
    for (uint64_t j = 0; j < n && j < ARR_SHOW; j++) {
        fputs(j ? ", " : " ", stdout);
        put_num(t, data, j);
    }
    if (n > ARR_SHOW)
        fputs(", ...", stdout);
}

static void put_value(const struct gguf_file *f, int64_t i)
{
    enum gguf_vtype t = gguf_kv_type(f, i), et;
    struct gguf_str s;
    uint64_t n, u;
    int64_t v;
    double d;
    bool b;
    if (t == GGUF_STR && gguf_kv_str(f, i, &s)) {
        put_str(s.ptr, s.len, STR_SHOW);
    } else if (t == GGUF_BOOL && gguf_kv_bool(f, i, &b)) {
        fputs(b ? "true" : "false", stdout);
    } else if ((t == GGUF_F32 || t == GGUF_F64) && gguf_kv_f64(f, i, &d)) {
        put_float(d, t == GGUF_F32);
    } else if (gguf_kv_u64(f, i, &u)) {
        printf("%" PRIu64, u);
    } else if (gguf_kv_i64(f, i, &v)) {
        printf("%" PRId64, v);
    } else if (gguf_kv_arr(f, i, &et, &n)) {
        if (et == GGUF_STR) {
            printf("[%" PRIu64 " x string]", n);
            for (uint64_t j = 0; j < n && j < ARR_SHOW && gguf_arr_str(f, i, j, &s); j++) {
                fputs(j ? ", " : " ", stdout);
                put_str(s.ptr, s.len, ELEM_SHOW);
            }
            if (n > ARR_SHOW)
                fputs(", ...", stdout);
        } else if (et == GGUF_ARR) {
            printf("[%" PRIu64 " x array]", n);
            for (uint64_t j = 0; j < n && j < ARR_SHOW; j++) {
                enum gguf_vtype e2;
                uint64_t n2;
                const void *data;
                if (!gguf_arr_arr(f, i, j, &e2, &n2, &data))
                    break;
                fputs(j ? ", " : " ", stdout);
                if (data) {
                    putchar('(');
                    put_num_arr(e2, n2, data);
                    putchar(')');
                } else {
                    printf("([%" PRIu64 " x %s])", n2, gguf_vtype_name(e2));
                }
            }
            if (n > ARR_SHOW)
                fputs(", ...", stdout);
        } else {
            put_num_arr(et, n, gguf_arr_data(f, i));
        }
    }
}

static void put_shape(const struct gguf_tensor *t, char *buf, size_t cap)
{
    int k = snprintf(buf, cap, "[");
    for (uint32_t d = 0; d < t->n_dims && k < (int)cap; d++)
        k += snprintf(buf + k, cap - k, "%s%" PRId64, d ? ", " : "", t->ne[d]);
    if (k < (int)cap)
        snprintf(buf + k, cap - k, "]");
}

static int width(size_t len)
{
    return len > NAME_WIDTH ? NAME_WIDTH : (int)len;
}

/* A key or tensor name padded to w columns; control bytes print as '?' to keep one line. */
static void put_name(const char *s, size_t len, int w)
{
    for (size_t i = 0; i < len; i++)
        putchar((unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i]);
    for (size_t i = len; i < (size_t)w; i++)
        putchar(' ');
}

int cmd_inspect(int argc, char **argv)
{
    struct inspect_args a;
    const enum opts_status st = opts_parse(&cmd_inspect_spec, &a, argc, argv);
    if (st != OPTS_GO)
        return opts_exit(st);
    const char *path = a.files.v[0];
    if (a.files.n > 1) {
        fprintf(stderr, "hearth: inspect: one FILE only ('%s' and '%s' given)\n", path,
                a.files.v[1]);
        return EXIT_USAGE;
    }

    char err[HEARTH_ERR_MAX];
    struct gguf_file *f;
    if (gguf_open(path, &f, err, sizeof err) != HEARTH_OK) {
        fprintf(stderr, "hearth: %s\n", err);
        return EXIT_RUNTIME;
    }

    int64_t n_kv = gguf_n_kv(f), n_t = gguf_n_tensors(f);
    printf("file:      %s (%" PRIu64 " bytes)\n", path, gguf_file_size(f));
    printf("version:   %" PRIu32 "\n", gguf_version(f));
    printf("alignment: %" PRIu32 "\n", gguf_alignment(f));
    printf("data at:   byte %" PRIu64 "\n", gguf_data_offset(f));
    printf("keys:      %" PRId64 "\n", n_kv);
    printf("tensors:   %" PRId64 "\n", n_t);

    int kw = 0;
    for (int64_t i = 0; i < n_kv; i++)
        if (width(gguf_key(f, i).len) > kw)
            kw = width(gguf_key(f, i).len);
    printf("\nmetadata:\n");
    for (int64_t i = 0; i < n_kv; i++) {
        struct gguf_str k = gguf_key(f, i);
        fputs("  ", stdout);
        put_name(k.ptr, k.len, kw);
        printf("  %-6s  ", gguf_vtype_name(gguf_kv_type(f, i)));
        put_value(f, i);
        putchar('\n');
    }

    int nw = 4;
    for (int64_t i = 0; i < n_t; i++)
        if (width(strlen(gguf_tensor(f, i)->name)) > nw)
            nw = width(strlen(gguf_tensor(f, i)->name));
    uint64_t total = 0, by_bytes[DTYPE_COUNT] = {0};
    int64_t by_count[DTYPE_COUNT] = {0};
    printf("\ntensors:\n  %-*s  %-6s  %-24s  %12s  %12s\n", nw, "name", "type", "shape", "bytes",
           "offset");
    for (int64_t i = 0; i < n_t; i++) {
        const struct gguf_tensor *t = gguf_tensor(f, i);
        char shape[128];
        put_shape(t, shape, sizeof shape);
        fputs("  ", stdout);
        put_name(t->name, strlen(t->name), nw);
        printf("  %-6s  %-24s  %12" PRIu64 "  %12" PRIu64 "\n", dtype_name(t->type), shape, t->size,
               t->offset);
        total += t->size;
        by_bytes[t->type] += t->size;
        by_count[t->type]++;
    }

    printf("\ntotal: %" PRId64 " tensors, %" PRIu64 " bytes (%.2f MiB)\n", n_t, total,
           total / 1048576.0);
    for (uint32_t ty = 0; ty < DTYPE_COUNT; ty++)
        if (by_count[ty])
            printf("  %-6s  %6" PRId64 " tensors  %12" PRIu64 " bytes\n", dtype_name(ty),
                   by_count[ty], by_bytes[ty]);
    gguf_close(f);

    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "hearth: inspect: cannot write the output\n");
        return EXIT_RUNTIME;
    }
    return EXIT_OK;
}
