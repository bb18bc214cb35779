/*
 * writer.c: GGUF v3 writer (see writer.h). Metadata values are kept
 * serialized (type-specific payload bytes, as they go to the file), so
 * writing the header is a sequence of copies and a copied key keeps its
 * exact bytes. Tensor data streams straight to PATH.tmp through stdio.
 */
#include "gguf/writer.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/errfmt.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gguf writer: GGUF is little-endian and this writer copies host-order values"
#endif

#define GGUF_MAGIC    0x46554747u /* "GGUF" read as a little-endian u32 */
#define GGUF_VERSION  3u
#define ALIGN_DEFAULT 32u
#define IO_BUFFER     (1u << 20)

/* Bytes of one element of each value type; 0 for string and array. */
static const uint8_t vsize[GGUF_VTYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

struct bytes {
    uint8_t *p;
    size_t len, cap;
};

struct kv {
    char *key;        /* NUL-terminated copy */
    uint32_t type;    /* enum gguf_vtype */
    struct bytes val; /* payload as stored after the type field */
};

struct tinfo {
    char *name;
    uint32_t type;   /* enum dtype */
    uint32_t n_dims; /* as stored: trailing 1s dropped, >= 1 */
    int64_t ne[GGUF_MAX_DIMS];
    uint64_t size;   /* data bytes */
    uint64_t offset; /* from the start of the data section; set by begin */
};

struct gguf_writer {
    struct kv *kv;
    int64_t n_kv, cap_kv;
    struct tinfo *t;
    int64_t n_t, cap_t;

    /* ---- after begin ---- */
    char *path, *tmp;   /* PATH and PATH.tmp */
    FILE *fp;           /* NULL before begin and after finish */
    char *iobuf;        /* stdio buffer of IO_BUFFER bytes */
    uint32_t alignment; /* power of two */
    int64_t cur;        /* tensor receiving data; n_t when all are written */
    uint64_t cur_done;  /* bytes of tensor cur written so far */
    uint64_t data_left; /* tensor bytes not yet written, all tensors */
    bool begun;
    bool failed; /* a write failed: the file is incomplete, finish refuses it */
};

/* ---------------------------------------------------------- byte buffers --- */

static bool put(struct bytes *b, const void *p, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n)
            cap *= 2;
        uint8_t *q = realloc(b->p, cap);
        if (!q)
            return false;
        b->p   = q;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->len, p, n);
    b->len += n;
    return true;
}

static bool put_u32(struct bytes *b, uint32_t v)
{
    return put(b, &v, 4);
}

static bool put_u64(struct bytes *b, uint64_t v)
{
    return put(b, &v, 8);
}

static bool put_str(struct bytes *b, const char *s, uint64_t len)
{
    return put_u64(b, len) && put(b, s, (size_t)len);
}

/* ------------------------------------------------------------- lifetime --- */

struct gguf_writer *gguf_writer_new(void)
{
    return calloc(1, sizeof(struct gguf_writer));
}

void gguf_writer_free(struct gguf_writer *w)
{
    if (!w)
        return;
    if (w->fp) {
        fclose(w->fp);
        unlink(w->tmp);
    }
    for (int64_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].val.p);
    }
    for (int64_t i = 0; i < w->n_t; i++)
        free(w->t[i].name);
    free(w->kv);
    free(w->t);
    free(w->path);
    free(w->tmp);
    free(w->iobuf);
    free(w);
}

/* ------------------------------------------------------------- metadata --- */

static int64_t find_kv(const struct gguf_writer *w, const char *key)
{
    for (int64_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kv[i].key, key))
            return i;
    return -1;
}

bool gguf_writer_remove(struct gguf_writer *w, const char *key)
{
    int64_t i = find_kv(w, key);
    if (i < 0)
        return false;
    free(w->kv[i].key);
    free(w->kv[i].val.p);
    memmove(&w->kv[i], &w->kv[i + 1], (size_t)(w->n_kv - i - 1) * sizeof *w->kv);
    w->n_kv--;
    return true;
}

int64_t gguf_writer_n_kv(const struct gguf_writer *w)
{
    return w->n_kv;
}

static enum hearth_status check_key(const struct gguf_writer *w, const char *key, char *err,
                                    size_t err_len)
{
    if (w->begun)
        return fail(HEARTH_EINVAL, err, err_len,
                    "gguf writer: key %s set after the header was written", key ? key : "(null)");
    if (!key || !*key)
        return fail(HEARTH_EINVAL, err, err_len, "gguf writer: empty metadata key");
    if (strlen(key) > 65535)
        return fail(HEARTH_EINVAL, err, err_len,
                    "gguf writer: metadata key of %zu bytes is too long", strlen(key));
    return HEARTH_OK;
}

/* Takes ownership of val (freed on failure too); replaces key if present. */
static enum hearth_status set_kv(struct gguf_writer *w, const char *key, enum gguf_vtype type,
                                 struct bytes val, char *err, size_t err_len)
{
    enum hearth_status st = check_key(w, key, err, err_len);
    if (st) {
        free(val.p);
        return st;
    }
    gguf_writer_remove(w, key);
    if (w->n_kv == w->cap_kv) {
        int64_t cap  = w->cap_kv ? 2 * w->cap_kv : 32;
        struct kv *p = realloc(w->kv, (size_t)cap * sizeof *p);
        if (!p) {
            free(val.p);
            return fail(HEARTH_ENOMEM, err, err_len, "gguf writer: out of memory adding key %s",
                        key);
        }
        w->kv     = p;
        w->cap_kv = cap;
    }
    char *k = strdup(key);
    if (!k) {
        free(val.p);
        return fail(HEARTH_ENOMEM, err, err_len, "gguf writer: out of memory adding key %s", key);
    }
    w->kv[w->n_kv++] = (struct kv){k, (uint32_t)type, val};
    return HEARTH_OK;
}

static enum hearth_status nomem(struct bytes *b, const char *key, char *err, size_t err_len)
{
    free(b->p);
    return fail(HEARTH_ENOMEM, err, err_len, "gguf writer: out of memory storing key %s", key);
}

enum hearth_status gguf_writer_set(struct gguf_writer *w, const char *key, enum gguf_vtype t,
                                   const void *val, char *err, size_t err_len)
{
    if ((unsigned)t >= GGUF_VTYPE_COUNT || !vsize[t])
        return fail(HEARTH_EINVAL, err, err_len,
                    "gguf writer: key %s: type %d is not a numeric or bool scalar type",
                    key ? key : "(null)", (int)t);
    struct bytes b = {0};
    if (t == GGUF_BOOL) {
        uint8_t v = *(const uint8_t *)val ? 1 : 0;
        if (!put(&b, &v, 1))
            return nomem(&b, key, err, err_len);
    } else if (!put(&b, val, vsize[t])) {
        return nomem(&b, key, err, err_len);
    }
    return set_kv(w, key, t, b, err, err_len);
}

enum hearth_status gguf_writer_set_u32(struct gguf_writer *w, const char *key, uint32_t v,
                                       char *err, size_t err_len)
{
    return gguf_writer_set(w, key, GGUF_U32, &v, err, err_len);
}

enum hearth_status gguf_writer_set_str(struct gguf_writer *w, const char *key, const char *s,
                                       uint64_t len, char *err, size_t err_len)
{
    struct bytes b = {0};
    if (!put_str(&b, s, len))
        return nomem(&b, key, err, err_len);
    return set_kv(w, key, GGUF_STR, b, err, err_len);
}

/* Appends an array head and n numeric/bool elements to b. */
static bool put_num_arr(struct bytes *b, enum gguf_vtype elem, const void *data, uint64_t n)
{
    if (!put_u32(b, (uint32_t)elem) || !put_u64(b, n))
        return false;
    if (elem != GGUF_BOOL)
        return put(b, data, (size_t)(n * vsize[elem]));
    const uint8_t *p = data;
    for (uint64_t j = 0; j < n; j++) {
        uint8_t v = p[j] ? 1 : 0;
        if (!put(b, &v, 1))
            return false;
    }
    return true;
}

enum hearth_status gguf_writer_set_arr(struct gguf_writer *w, const char *key, enum gguf_vtype elem,
                                       const void *data, uint64_t n, char *err, size_t err_len)
{
    if ((unsigned)elem >= GGUF_VTYPE_COUNT || !vsize[elem])
        return fail(HEARTH_EINVAL, err, err_len,
                    "gguf writer: key %s: array element type %d is not numeric or bool",
                    key ? key : "(null)", (int)elem);
    if (n > ((uint64_t)1 << 40))
        return fail(HEARTH_EINVAL, err, err_len,
                    "gguf writer: key %s: array of %" PRIu64 " elements is too long",
                    key ? key : "(null)", n);
    struct bytes b = {0};
    if (!put_num_arr(&b, elem, data, n))
        return nomem(&b, key, err, err_len);
    return set_kv(w, key, GGUF_ARR, b, err, err_len);
}

enum hearth_status gguf_writer_set_arr_str(struct gguf_writer *w, const char *key,
                                           const struct gguf_str *s, uint64_t n, char *err,
                                           size_t err_len)
{
    struct bytes b = {0};
    bool ok        = put_u32(&b, GGUF_STR) && put_u64(&b, n);
    for (uint64_t j = 0; ok && j < n; j++)
        ok = put_str(&b, s[j].ptr, s[j].len);
    if (!ok)
        return nomem(&b, key, err, err_len);
    return set_kv(w, key, GGUF_ARR, b, err, err_len);
}

/* Scalar i of f (numeric or bool) in its stored type, into out (8 bytes). */
static bool scalar_bytes(const struct gguf_file *f, int64_t i, enum gguf_vtype t, uint8_t *out)
{
    uint64_t u;
    int64_t s;
    double d;
    bool bv;
    switch (t) {
    case GGUF_U8:
    case GGUF_U16:
    case GGUF_U32:
    case GGUF_U64:
        if (!gguf_kv_u64(f, i, &u))
            return false;
        memcpy(out, &u, vsize[t]); /* little-endian: the low bytes are the value */
        return true;
    case GGUF_I8:
    case GGUF_I16:
    case GGUF_I32:
    case GGUF_I64:
        if (!gguf_kv_i64(f, i, &s))
            return false;
        memcpy(out, &s, vsize[t]);
        return true;
    case GGUF_F32: {
        if (!gguf_kv_f64(f, i, &d))
            return false;
        float v = (float)d; /* exact: the f64 came from this f32 */
        memcpy(out, &v, 4);
        return true;
    }
    case GGUF_F64:
        if (!gguf_kv_f64(f, i, &d))
            return false;
        memcpy(out, &d, 8);
        return true;
    case GGUF_BOOL:
        if (!gguf_kv_bool(f, i, &bv))
            return false;
        out[0] = bv;
        return true;
    default:
        return false;
    }
}

enum hearth_status gguf_writer_copy_kv(struct gguf_writer *w, const struct gguf_file *f, int64_t i,
                                       char *err, size_t err_len)
{
    if (i < 0 || i >= gguf_n_kv(f))
        return fail(HEARTH_EINVAL, err, err_len,
                    "gguf writer: key index %" PRId64 " out of range (the file has %" PRId64
                    " keys)",
                    i, gguf_n_kv(f));
    struct gguf_str ks = gguf_key(f, i);
    char *key          = malloc((size_t)ks.len + 1);
    if (!key)
        return fail(HEARTH_ENOMEM, err, err_len, "gguf writer: out of memory copying a key");
    memcpy(key, ks.ptr, (size_t)ks.len);
    key[ks.len] = 0;

    enum gguf_vtype t     = gguf_kv_type(f, i);
    struct bytes b        = {0};
    enum hearth_status st = HEARTH_OK;
    bool ok               = true;
    if (t == GGUF_STR) {
        struct gguf_str s;
        ok = gguf_kv_str(f, i, &s) && put_str(&b, s.ptr, s.len);
    } else if (t != GGUF_ARR) {
        uint8_t v[8];
        if (!scalar_bytes(f, i, t, v)) {
            st = fail(HEARTH_EINVAL, err, err_len, "gguf writer: cannot read key %s", key);
            goto out;
        }
        ok = put(&b, v, vsize[t]);
    } else {
        enum gguf_vtype elem;
        uint64_t n;
        if (!gguf_kv_arr(f, i, &elem, &n)) {
            st = fail(HEARTH_EINVAL, err, err_len, "gguf writer: cannot read array %s", key);
            goto out;
        }
        if (vsize[elem]) {
            ok = put_num_arr(&b, elem, gguf_arr_data(f, i), n);
        } else if (elem == GGUF_STR) {
            ok = put_u32(&b, GGUF_STR) && put_u64(&b, n);
            for (uint64_t j = 0; ok && j < n; j++) {
                struct gguf_str s;
                ok = gguf_arr_str(f, i, j, &s) && put_str(&b, s.ptr, s.len);
            }
        } else {
            ok = put_u32(&b, GGUF_ARR) && put_u64(&b, n);
            for (uint64_t j = 0; ok && j < n; j++) {
                enum gguf_vtype ie;
                uint64_t in;
                const void *data;
                if (!gguf_arr_arr(f, i, j, &ie, &in, &data)) {
                    ok = false;
                    break;
                }
                if (!vsize[ie] && in > 0) {
                    st = fail(HEARTH_EUNSUPPORTED, err, err_len,
                              "gguf writer: key %s is an array of %s arrays; only arrays of "
                              "numeric arrays can be copied",
                              key, gguf_vtype_name(ie));
                    goto out;
                }
                ok = vsize[ie] ? put_num_arr(&b, ie, data, in)
                               : put_u32(&b, (uint32_t)ie) && put_u64(&b, 0);
            }
        }
    }
    if (!ok) {
        st = fail(HEARTH_ENOMEM, err, err_len, "gguf writer: out of memory copying key %s", key);
        goto out;
    }
    st  = set_kv(w, key, t, b, err, err_len);
    b.p = NULL;
out:
    free(b.p);
    free(key);
    return st;
}

/* -------------------------------------------------------------- tensors --- */

enum hearth_status gguf_writer_add_tensor(struct gguf_writer *w, const char *name, enum dtype type,
                                          uint32_t n_dims, const int64_t *ne, char *err,
                                          size_t err_len)
{
    if (w->begun)
        return fail(HEARTH_EINVAL, err, err_len,
                    "gguf writer: tensor %s added after the header was written",
                    name ? name : "(null)");
    if (!name || !*name)
        return fail(HEARTH_EINVAL, err, err_len, "gguf writer: tensor with an empty name");
    const struct dtype_info *di = dtype_get(type);
    if (!di)
        return fail(HEARTH_EINVAL, err, err_len, "gguf writer: tensor %s has unknown type %d", name,
                    (int)type);
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS)
        return fail(HEARTH_EINVAL, err, err_len,
                    "gguf writer: tensor %s has %" PRIu32 " dimensions, expected 1..%d", name,
                    n_dims, GGUF_MAX_DIMS);
    struct tinfo t = {.type = (uint32_t)type, .n_dims = 1};
    uint64_t n     = 1;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) {
        t.ne[d] = d < n_dims ? ne[d] : 1;
        if (t.ne[d] < 1 || t.ne[d] > ((int64_t)1 << 40) ||
            n > (UINT64_MAX >> 1) / (uint64_t)t.ne[d])
            return fail(HEARTH_EINVAL, err, err_len,
                        "gguf writer: tensor %s has dimension %" PRIu32 " of %" PRId64, name, d,
                        t.ne[d]);
        n *= (uint64_t)t.ne[d];
        if (t.ne[d] > 1)
            t.n_dims = d + 1;
    }
    if (t.ne[0] % di->block)
        return fail(HEARTH_EINVAL, err, err_len,
                    "gguf writer: tensor %s has rows of %" PRId64 " elements, not a multiple of "
                    "the %s block of %" PRIu32,
                    name, t.ne[0], di->name, di->block);
    t.size = n / di->block * di->block_len;
    for (int64_t i = 0; i < w->n_t; i++)
        if (!strcmp(w->t[i].name, name))
            return fail(HEARTH_EINVAL, err, err_len, "gguf writer: tensor %s added twice", name);
    if (w->n_t == w->cap_t) {
        int64_t cap     = w->cap_t ? 2 * w->cap_t : 64;
        struct tinfo *p = realloc(w->t, (size_t)cap * sizeof *p);
        if (!p)
            return fail(HEARTH_ENOMEM, err, err_len, "gguf writer: out of memory adding tensor %s",
                        name);
        w->t     = p;
        w->cap_t = cap;
    }
    if (!(t.name = strdup(name)))
        return fail(HEARTH_ENOMEM, err, err_len, "gguf writer: out of memory adding tensor %s",
                    name);
    w->t[w->n_t++] = t;
    return HEARTH_OK;
}

int64_t gguf_writer_n_tensors(const struct gguf_writer *w)
{
    return w->n_t;
}

uint64_t gguf_writer_tensor_size(const struct gguf_writer *w, int64_t i)
{
    return i >= 0 && i < w->n_t ? w->t[i].size : 0;
}

/* ---------------------------------------------------------------- output --- */

static enum hearth_status io_fail(struct gguf_writer *w, const char *what, char *err,
                                  size_t err_len)
{
    return fail(HEARTH_EIO, err, err_len, "gguf writer: cannot %s %s: %s", what, w->tmp,
                strerror(errno ? errno : EIO));
}

static bool wr(struct gguf_writer *w, const void *p, size_t n)
{
    return fwrite(p, 1, n, w->fp) == n;
}

static bool pad(struct gguf_writer *w, uint64_t len)
{
    static const uint8_t zero[64];
    uint64_t mis = len % w->alignment, n = mis ? w->alignment - mis : 0;
    while (n) {
        size_t k = n < sizeof zero ? (size_t)n : sizeof zero;
        if (!wr(w, zero, k))
            return false;
        n -= k;
    }
    return true;
}

/* Header and tensor infos, serialized. */
static bool header(const struct gguf_writer *w, struct bytes *b)
{
    bool ok = put_u32(b, GGUF_MAGIC) && put_u32(b, GGUF_VERSION) && put_u64(b, (uint64_t)w->n_t) &&
              put_u64(b, (uint64_t)w->n_kv);
    for (int64_t i = 0; ok && i < w->n_kv; i++) {
        const struct kv *kv = &w->kv[i];
        ok                  = put_str(b, kv->key, strlen(kv->key)) && put_u32(b, kv->type) &&
             put(b, kv->val.p, kv->val.len);
    }
    for (int64_t i = 0; ok && i < w->n_t; i++) {
        const struct tinfo *t = &w->t[i];
        ok                    = put_str(b, t->name, strlen(t->name)) && put_u32(b, t->n_dims);
        for (uint32_t d = 0; ok && d < t->n_dims; d++)
            ok = put_u64(b, (uint64_t)t->ne[d]);
        ok = ok && put_u32(b, t->type) && put_u64(b, t->offset);
    }
    return ok;
}

enum hearth_status gguf_writer_begin(struct gguf_writer *w, const char *path, char *err,
                                     size_t err_len)
{
    if (w->begun)
        return fail(HEARTH_EINVAL, err, err_len, "gguf writer: the header was already written");
    w->alignment = ALIGN_DEFAULT;
    int64_t a    = find_kv(w, "general.alignment");
    if (a >= 0) {
        uint32_t v = 0;
        if (w->kv[a].type != GGUF_U32)
            return fail(HEARTH_EINVAL, err, err_len,
                        "gguf writer: general.alignment has type %s, expected u32",
                        gguf_vtype_name((enum gguf_vtype)w->kv[a].type));
        memcpy(&v, w->kv[a].val.p, 4);
        if (!v || (v & (v - 1)))
            return fail(HEARTH_EINVAL, err, err_len,
                        "gguf writer: general.alignment is %" PRIu32 ", not a power of two", v);
        w->alignment = v;
    }
    uint64_t off = 0;
    for (int64_t i = 0; i < w->n_t; i++) {
        w->t[i].offset = off;
        off += w->t[i].size;
        off += (w->alignment - off % w->alignment) % w->alignment;
    }

    size_t n = strlen(path);
    w->path  = strdup(path);
    w->tmp   = malloc(n + 5);
    w->iobuf = malloc(IO_BUFFER);
    if (!w->path || !w->tmp || !w->iobuf)
        return fail(HEARTH_ENOMEM, err, err_len, "gguf writer: out of memory opening %s", path);
    memcpy(w->tmp, path, n);
    memcpy(w->tmp + n, ".tmp", 5);

    struct bytes h = {0};
    if (!header(w, &h)) {
        free(h.p);
        return fail(HEARTH_ENOMEM, err, err_len, "gguf writer: out of memory building the header");
    }
    errno = 0;
    if (!(w->fp = fopen(w->tmp, "wb"))) {
        free(h.p);
        return io_fail(w, "create", err, err_len);
    }
    w->begun = true;
    setvbuf(w->fp, w->iobuf, _IOFBF, IO_BUFFER);
    bool ok = wr(w, h.p, h.len) && pad(w, h.len);
    free(h.p);
    if (!ok) {
        w->failed = true;
        return io_fail(w, "write", err, err_len);
    }
    w->cur       = 0;
    w->cur_done  = 0;
    w->data_left = 0;
    for (int64_t i = 0; i < w->n_t; i++)
        w->data_left += w->t[i].size;
    return HEARTH_OK;
}

enum hearth_status gguf_writer_write(struct gguf_writer *w, const void *data, size_t len, char *err,
                                     size_t err_len)
{
    if (!w->fp)
        return fail(HEARTH_EINVAL, err, err_len,
                    w->begun ? "gguf writer: tensor data written after finish"
                             : "gguf writer: tensor data written before the header");
    if (w->failed)
        return fail(HEARTH_EIO, err, err_len, "gguf writer: an earlier write to %s failed", w->tmp);
    if (len > w->data_left)
        return fail(HEARTH_EINVAL, err, err_len,
                    "gguf writer: %zu bytes of data but the tensors have %" PRIu64 " left", len,
                    w->data_left);
    const uint8_t *p = data;
    errno            = 0;
    w->data_left -= len;
    while (len) {
        const struct tinfo *t = &w->t[w->cur];
        uint64_t room         = t->size - w->cur_done;
        size_t k              = len < room ? len : (size_t)room;
        bool ok               = wr(w, p, k);
        p += k;
        len -= k;
        w->cur_done += k;
        if (ok && w->cur_done == t->size) {
            ok          = pad(w, t->size);
            w->cur_done = 0;
            w->cur++;
        }
        if (!ok) {
            w->failed = true;
            return io_fail(w, "write", err, err_len);
        }
    }
    return HEARTH_OK;
}

enum hearth_status gguf_writer_finish(struct gguf_writer *w, char *err, size_t err_len)
{
    if (!w->fp)
        return fail(HEARTH_EINVAL, err, err_len,
                    w->begun ? "gguf writer: finished twice" : "gguf writer: finish before begin");
    enum hearth_status st = HEARTH_OK;
    if (w->failed) {
        st = fail(HEARTH_EIO, err, err_len, "gguf writer: an earlier write to %s failed", w->tmp);
    } else if (w->cur < w->n_t) {
        st = fail(HEARTH_EINVAL, err, err_len,
                  "gguf writer: tensor %s has %" PRIu64 " of its %" PRIu64 " bytes of data",
                  w->t[w->cur].name, w->cur_done, w->t[w->cur].size);
    } else {
        errno = 0;
        if (fflush(w->fp) || fsync(fileno(w->fp)))
            st = io_fail(w, "write", err, err_len);
    }
    errno = 0;
    if (fclose(w->fp) && !st)
        st = io_fail(w, "close", err, err_len);
    w->fp = NULL;
    if (!st && rename(w->tmp, w->path)) {
        st = fail(HEARTH_EIO, err, err_len, "gguf writer: cannot rename %s to %s: %s", w->tmp,
                  w->path, strerror(errno));
    }
    if (st)
        unlink(w->tmp);
    return st;
}
