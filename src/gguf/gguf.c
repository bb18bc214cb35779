/*
 * gguf.c: the GGUF v2/v3 reader (see gguf.h for the contract).
 *
 * Layout, all little-endian: "GGUF", u32 version, u64 n_tensors, u64 n_kv;
 * n_kv x (string key, u32 value type, value); n_tensors x (string name,
 * u32 n_dims, n_dims x i64 ne, u32 type, u64 offset); padding up to
 * general.alignment (32 by default); then the tensor data. A string is a
 * u64 length and its bytes; an array is a u32 element type, a u64 count and
 * the elements, which may themselves be arrays.
 *
 * Invariant: open walks the whole header with a cursor that works in file
 * offsets and checks every read against the file size; a pointer into the
 * file is formed only for a range already proved inside it. Allocations grow
 * with what has actually been parsed (a key costs >= 14 file bytes, a tensor
 * info >= 33, a string element >= 8), so a hostile header cannot make open
 * allocate more than a small multiple of the file's own size.
 */
#include "gguf/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/dtype.h"
#include "util/errfmt.h"
#include "util/hash.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gguf.c reads little-endian fields with memcpy; add byte swaps before porting"
#endif

#define KEY_LEN_MAX   65535u /* the spec's limit on a key */
#define NAME_LEN_MAX  65536u /* ours on a tensor name (ggml's is 64) */
#define NEST_MAX      8      /* arrays nested deeper than this are refused */
#define ALIGN_DEFAULT 32u
#define KV_MIN        14u /* key length 8 + key >= 1 + type 4 + value >= 1 */
#define TI_MIN        33u /* name length 8 + name >= 1 + n_dims 4 + ne 8 + type 4 + offset 8 */
#define ARR_MIN       12u /* element type 4 + count 8 */

struct kv {
    struct gguf_str key; /* into the file; 1..65535 bytes, unique */
    uint32_t type;       /* enum gguf_vtype */
    uint32_t elem;       /* arrays: element type */
    uint64_t n;          /* arrays: element count */
    uint64_t pos;        /* file offset of the value; arrays: of element 0 */
    uint64_t *idx;       /* arrays of strings or arrays: file offset of each element, [n] */
};

struct gguf_file {
    const uint8_t *base;         /* the file's bytes: the mapping or the caller's buffer */
    uint64_t len;                /* file size in bytes */
    void *map;                   /* mapping to unmap, NULL over a caller's buffer */
    uint32_t version;            /* 2 or 3 */
    uint32_t alignment;          /* power of two */
    uint64_t data_offset;        /* start of the tensor data, a multiple of alignment */
    int64_t n_kv;                /* >= 0 */
    struct kv *kv;               /* [n_kv] */
    int64_t n_tensors;           /* >= 0 */
    struct gguf_tensor *tensors; /* [n_tensors] */
    char *names;                 /* the tensor names, NUL-terminated, back to back */
    uint64_t *kv_hash, *t_hash;  /* open addressing by name: index + 1, 0 = empty slot */
    uint64_t kv_mask, t_mask;    /* table size - 1 (a power of two minus one) */
};

/* Bytes of one element of each fixed-size value type; 0 for string and array. */
static const uint8_t vsize[GGUF_VTYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

/* clang-format off */
static const char *const vname[GGUF_VTYPE_COUNT] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
};
/* clang-format on */

const char *gguf_vtype_name(enum gguf_vtype t)
{
    return (unsigned)t < GGUF_VTYPE_COUNT ? vname[t] : "unknown";
}

/* ------------------------------------------------------------ cursor --- */

/* A position in the file being parsed, and what is being read there (for errors). */
struct cur {
    const uint8_t *base;
    uint64_t len, pos; /* pos <= len always */
    char *err;
    size_t err_len;
    const char *sect;     /* "key" or "tensor"; NULL while in the fixed header */
    int64_t idx;          /* index within sect */
    struct gguf_str name; /* the current key or tensor name once read, else len 0 */
    int64_t elem;         /* top-level array element being read, -1 outside arrays */
};

/* Printable excerpt of s for an error sentence: at most 64 bytes, odd bytes as '?'. */
static const char *san(char *buf, size_t cap, const char *s, uint64_t len)
{
    size_t n = 0;
    for (; n < len && n < 64 && n + 4 < cap; n++)
        buf[n] = s[n] >= 0x20 && s[n] < 0x7f ? s[n] : '?';
    if (n < len && n + 4 <= cap)
        memcpy(buf + n, "...", 3), n += 3;
    buf[n] = 0;
    return buf;
}

/* "element 5 of key 3 (tokenizer.ggml.tokens)", "tensor 2", "the header". */
static const char *where(const struct cur *c, char *buf, size_t cap)
{
    char nm[80];
    if (!c->sect) {
        snprintf(buf, cap, "the header");
        return buf;
    }
    char el[40] = "";
    if (c->elem >= 0)
        snprintf(el, sizeof el, "element %" PRId64 " of ", c->elem);
    snprintf(buf, cap, "%s%s %" PRId64 "%s%s%s", el, c->sect, c->idx, c->name.len ? " (" : "",
             c->name.len ? san(nm, sizeof nm, c->name.ptr, c->name.len) : "",
             c->name.len ? ")" : "");
    return buf;
}

/* True if n more bytes lie at the cursor; else a sentence naming the byte and the field. */
static bool need(struct cur *c, uint64_t n, const char *what)
{
    if (c->len - c->pos >= n)
        return true;
    char w[200];
    set_err(c->err, c->err_len,
            "gguf: truncated at byte %" PRIu64 ": %s of %s needs %" PRIu64
            " bytes from byte %" PRIu64,
            c->len, what, where(c, w, sizeof w), n, c->pos);
    return false;
}

static bool rd_u32(struct cur *c, uint32_t *v, const char *what)
{
    if (!need(c, 4, what))
        return false;
    memcpy(v, c->base + c->pos, 4);
    c->pos += 4;
    return true;
}

static bool rd_u64(struct cur *c, uint64_t *v, const char *what)
{
    if (!need(c, 8, what))
        return false;
    memcpy(v, c->base + c->pos, 8);
    c->pos += 8;
    return true;
}

/* A string of at most max bytes: its length, then its bytes. what names it ("the name"). */
static bool rd_str(struct cur *c, struct gguf_str *s, uint64_t max, const char *what)
{
    char w[200];
    uint64_t n = 0;
    if (c->len - c->pos < 8) {
        snprintf(w, sizeof w, "the length of %s", what);
        return need(c, 8, w);
    }
    rd_u64(c, &n, what);
    if (n > max) {
        set_err(c->err, c->err_len, "gguf: %s of %s is %" PRIu64 " bytes long (limit %" PRIu64 ")",
                what, where(c, w, sizeof w), n, max);
        return false;
    }
    if (!need(c, n, what))
        return false;
    s->ptr = (const char *)c->base + c->pos;
    s->len = n;
    c->pos += n;
    return true;
}

/* Smallest number of file bytes one element of type t can occupy. */
static uint64_t elem_min(uint32_t t)
{
    return t == GGUF_STR ? 8 : t == GGUF_ARR ? ARR_MIN : vsize[t];
}

/* An array's element type and count, refusing counts the remaining bytes cannot hold. */
static bool arr_head(struct cur *c, uint32_t *et, uint64_t *n, int depth)
{
    char w[200];
    if (!rd_u32(c, et, "the array element type") || !rd_u64(c, n, "the array length"))
        return false;
    if (*et >= GGUF_VTYPE_COUNT) {
        set_err(c->err, c->err_len, "gguf: array in %s has unknown element type %" PRIu32,
                where(c, w, sizeof w), *et);
        return false;
    }
    if (*et == GGUF_ARR && depth + 1 >= NEST_MAX) {
        set_err(c->err, c->err_len, "gguf: arrays in %s are nested more than %d deep",
                where(c, w, sizeof w), NEST_MAX);
        return false;
    }
    uint64_t left = c->len - c->pos;
    if (*n > left / elem_min(*et)) {
        set_err(c->err, c->err_len,
                "gguf: array in %s claims %" PRIu64 " %s elements but only %" PRIu64
                " bytes follow byte %" PRIu64,
                where(c, w, sizeof w), *n, vname[*et], left, c->pos);
        return false;
    }
    return true;
}

static bool skip_value(struct cur *c, uint32_t t, int depth);

/*
 * Advances over n elements of type et (arr_head already bounded n). With idx,
 * records the file offset of each element (strings and arrays only).
 */
static bool skip_elems(struct cur *c, uint32_t et, uint64_t n, int depth, uint64_t *idx)
{
    if (vsize[et] && et != GGUF_BOOL) {
        c->pos += n * vsize[et];
        return true;
    }
    for (uint64_t j = 0; j < n; j++) {
        if (depth == 0)
            c->elem = (int64_t)j;
        if (idx)
            idx[j] = c->pos;
        if (!skip_value(c, et, depth + 1))
            return false;
    }
    if (depth == 0)
        c->elem = -1;
    return true;
}

/* Advances over one value of type t, proving it lies inside the file. */
static bool skip_value(struct cur *c, uint32_t t, int depth)
{
    char w[200];
    struct gguf_str s;
    uint32_t et;
    uint64_t n;
    if (t >= GGUF_VTYPE_COUNT) {
        set_err(c->err, c->err_len, "gguf: %s has unknown value type %" PRIu32,
                where(c, w, sizeof w), t);
        return false;
    }
    switch (t) {
    case GGUF_STR:
        return rd_str(c, &s, UINT64_MAX, "the string value");
    case GGUF_ARR:
        return arr_head(c, &et, &n, depth) && skip_elems(c, et, n, depth, NULL);
    default:
        if (!need(c, vsize[t], "the value"))
            return false;
        if (t == GGUF_BOOL && c->base[c->pos] > 1) {
            set_err(c->err, c->err_len, "gguf: bool in %s is %u, not 0 or 1", where(c, w, sizeof w),
                    c->base[c->pos]);
            return false;
        }
        c->pos += vsize[t];
        return true;
    }
}

/* ----------------------------------------------------- name hash sets --- */

static uint64_t hash(const char *s, uint64_t len)
{
    uint64_t h = 1469598103934665603ull;
    for (uint64_t i = 0; i < len; i++)
        h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

static bool kv_is(const struct kv *kv, const char *s, uint64_t len)
{
    return kv->key.len == len && !memcmp(kv->key.ptr, s, len);
}

/* Allocates an empty table for n entries; false on no memory. */
static bool hash_new(uint64_t n, uint64_t **tab, uint64_t *mask)
{
    uint64_t size = 4;
    while (size < 2 * n)
        size *= 2;
    *tab  = calloc(size, sizeof **tab);
    *mask = size - 1;
    return *tab != NULL;
}

/* ------------------------------------------------------------- parse --- */

/* Doubles the room of a growing array; false on no memory (the old block stays valid). */
static bool grow(void **p, int64_t *cap, int64_t n, size_t size)
{
    if (n < *cap)
        return true;
    int64_t c = *cap ? *cap * 2 : 16;
    void *q   = realloc(*p, (size_t)c * size);
    if (!q)
        return false;
    *p   = q;
    *cap = c;
    return true;
}

static int cmp_span(const void *a, const void *b)
{
    const uint64_t *x = a, *y = b; /* {start, end, index} */
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

#define NOMEM() fail(HEARTH_ENOMEM, err, err_len, "gguf: out of memory reading the header")

static enum hearth_status parse_kvs(struct gguf_file *f, struct cur *c, uint64_t n_kv, char *err,
                                    size_t err_len)
{
    char w[200];
    int64_t cap = 0;
    for (uint64_t i = 0; i < n_kv; i++) {
        struct kv kv = {0};
        c->sect = "key", c->idx = (int64_t)i, c->name.len = 0, c->elem = -1;
        if (!rd_str(c, &kv.key, KEY_LEN_MAX, "the name"))
            return HEARTH_EFORMAT;
        if (kv.key.len == 0)
            return fail(HEARTH_EFORMAT, err, err_len, "gguf: key %" PRIu64 " is empty", i);
        c->name = kv.key;
        if (!rd_u32(c, &kv.type, "the value type"))
            return HEARTH_EFORMAT;
        if (kv.type != GGUF_ARR) {
            kv.pos = c->pos;
            if (!skip_value(c, kv.type, 0))
                return HEARTH_EFORMAT;
        } else {
            if (!arr_head(c, &kv.elem, &kv.n, 0))
                return HEARTH_EFORMAT;
            kv.pos = c->pos;
            if (!skip_elems(c, kv.elem, kv.n, 0, NULL))
                return HEARTH_EFORMAT;
            if (!vsize[kv.elem] && kv.n) {
                /* the walk above proved n elements exist, so n * 8 is bounded by the file */
                uint64_t end = c->pos;
                if (!(kv.idx = malloc(kv.n * sizeof *kv.idx)))
                    return NOMEM();
                c->pos = kv.pos;
                skip_elems(c, kv.elem, kv.n, 0, kv.idx);
                c->pos = end;
            }
        }
        if (!grow((void **)&f->kv, &cap, f->n_kv, sizeof *f->kv)) {
            free(kv.idx);
            return NOMEM();
        }
        f->kv[f->n_kv++] = kv;
    }
    c->sect = NULL, c->elem = -1;

    if (!hash_new((uint64_t)f->n_kv, &f->kv_hash, &f->kv_mask))
        return NOMEM();
    for (int64_t i = 0; i < f->n_kv; i++) {
        const struct kv *kv = &f->kv[i];
        uint64_t s          = hash(kv->key.ptr, kv->key.len) & f->kv_mask;
        for (; f->kv_hash[s]; s = (s + 1) & f->kv_mask) {
            int64_t o = (int64_t)f->kv_hash[s] - 1;
            if (kv_is(&f->kv[o], kv->key.ptr, kv->key.len))
                return fail(HEARTH_EFORMAT, err, err_len,
                            "gguf: key %s appears twice (keys %" PRId64 " and %" PRId64 ")",
                            san(w, sizeof w, kv->key.ptr, kv->key.len), o, i);
        }
        f->kv_hash[s] = (uint64_t)i + 1;
    }

    f->alignment = ALIGN_DEFAULT;
    int64_t a    = gguf_find_key(f, "general.alignment");
    if (a >= 0) {
        uint32_t v;
        if (f->kv[a].type != GGUF_U32)
            return fail(HEARTH_EFORMAT, err, err_len,
                        "gguf: general.alignment has type %s, expected u32", vname[f->kv[a].type]);
        memcpy(&v, f->base + f->kv[a].pos, 4);
        if (v == 0 || (v & (v - 1)))
            return fail(HEARTH_EFORMAT, err, err_len,
                        "gguf: general.alignment is %" PRIu32 ", not a non-zero power of two", v);
        f->alignment = v;
    }
    return HEARTH_OK;
}

/* In parse_tensors: the sentence, then the exit through out. */
/* clang-format off */
#define BAD(...)                                                                                   \
    do {                                                                                           \
        set_err(err, err_len, __VA_ARGS__);                                                        \
        goto out;                                                                                  \
    } while (0)
/* clang-format on */
/* clang-format off */
#define NOMEM_OUT()                                                                                \
    do {                                                                                           \
        st = NOMEM();                                                                              \
        goto out;                                                                                  \
    } while (0)
/* clang-format on */

static enum hearth_status parse_tensors(struct gguf_file *f, struct cur *c, uint64_t n_t, char *err,
                                        size_t err_len)
{
    char w[200];
    int64_t cap = 0, ncap = 0;
    uint64_t *nlen = NULL, names_len = 0;
    enum hearth_status st = HEARTH_EFORMAT;
    for (uint64_t i = 0; i < n_t; i++) {
        struct gguf_tensor t = {0};
        struct gguf_str nm;
        c->sect = "tensor", c->idx = (int64_t)i, c->name.len = 0;
        if (!rd_str(c, &nm, NAME_LEN_MAX, "the name"))
            goto out;
        if (nm.len == 0)
            BAD("gguf: tensor %" PRIu64 " has an empty name", i);
        if (memchr(nm.ptr, 0, nm.len))
            BAD("gguf: the name of tensor %" PRIu64 " contains a NUL byte", i);
        c->name        = nm;
        const char *sn = san(w, sizeof w, nm.ptr, nm.len);
        if (!rd_u32(c, &t.n_dims, "the dimension count"))
            goto out;
        if (t.n_dims < 1 || t.n_dims > GGUF_MAX_DIMS)
            BAD("gguf: tensor %s has %" PRIu32 " dimensions (1 to %d allowed)", sn, t.n_dims,
                GGUF_MAX_DIMS);
        int64_t nelem = 1;
        for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) {
            uint64_t ne = 1;
            if (d < t.n_dims && !rd_u64(c, &ne, "a dimension"))
                goto out;
            if (ne < 1 || ne > INT64_MAX)
                BAD("gguf: tensor %s has ne[%" PRIu32 "] = %" PRId64 " (must be >= 1)", sn, d,
                    (int64_t)ne);
            if ((int64_t)ne > INT64_MAX / nelem)
                BAD("gguf: tensor %s has more than 2^63 elements", sn);
            t.ne[d] = (int64_t)ne;
            nelem *= (int64_t)ne;
        }
        if (!rd_u32(c, &t.type, "the type"))
            goto out;
        const struct dtype_info *ti = dtype_get(t.type);
        if (!ti)
            BAD("gguf: tensor %s has unknown type id %" PRIu32, sn, t.type);
        if (t.ne[0] % ti->block)
            BAD("gguf: tensor %s has ne[0] = %" PRId64
                ", not a multiple of the %s block of %" PRIu32,
                sn, t.ne[0], ti->name, ti->block);
        if (!rd_u64(c, &t.offset, "the data offset"))
            goto out;
        if (t.offset % f->alignment)
            BAD("gguf: tensor %s has offset %" PRIu64 ", not a multiple of the alignment %" PRIu32,
                sn, t.offset, f->alignment);
        uint64_t blocks = (uint64_t)nelem / ti->block;
        if (blocks > UINT64_MAX / ti->block_len)
            BAD("gguf: tensor %s is larger than 2^64 bytes", sn);
        t.size = blocks * ti->block_len;
        t.name = nm.ptr; /* into the file until the copies below */
        if (!grow((void **)&f->tensors, &cap, f->n_tensors, sizeof *f->tensors) ||
            !grow((void **)&nlen, &ncap, f->n_tensors, sizeof *nlen))
            NOMEM_OUT();
        nlen[f->n_tensors]         = nm.len;
        f->tensors[f->n_tensors++] = t;
        names_len += nm.len + 1;
    }
    c->sect = NULL;

    /* Data starts at the next multiple of the alignment after the tensor infos. */
    uint64_t mis   = c->pos % f->alignment;
    f->data_offset = c->pos + (mis ? f->alignment - mis : 0);
    if (f->data_offset < c->pos)
        BAD("gguf: the data section would start past byte 2^64");

    if (!(f->names = malloc(names_len ? names_len : 1)))
        NOMEM_OUT();
    char *p = f->names;
    for (int64_t i = 0; i < f->n_tensors; i++) {
        memcpy(p, f->tensors[i].name, nlen[i]);
        p[nlen[i]]         = 0;
        f->tensors[i].name = p;
        p += nlen[i] + 1;
    }

    for (int64_t i = 0; i < f->n_tensors; i++) {
        struct gguf_tensor *t = &f->tensors[i];
        const char *sn        = san(w, sizeof w, t->name, nlen[i]);
        uint64_t start, end;
        if (__builtin_add_overflow(f->data_offset, t->offset, &start) ||
            __builtin_add_overflow(start, t->size, &end))
            BAD("gguf: tensor %s ends past byte 2^64", sn);
        if (end > f->len)
            BAD("gguf: tensor %s ends at byte %" PRIu64 " but the file has %" PRIu64, sn, end,
                f->len);
        t->data = f->base + start;
    }

    if (!hash_new((uint64_t)f->n_tensors, &f->t_hash, &f->t_mask))
        NOMEM_OUT();
    for (int64_t i = 0; i < f->n_tensors; i++) {
        const char *nm = f->tensors[i].name;
        uint64_t s     = hash(nm, nlen[i]) & f->t_mask;
        for (; f->t_hash[s]; s = (s + 1) & f->t_mask) {
            int64_t o = (int64_t)f->t_hash[s] - 1;
            if (!strcmp(f->tensors[o].name, nm))
                BAD("gguf: tensor name %s appears twice (tensors %" PRId64 " and %" PRId64 ")",
                    san(w, sizeof w, nm, nlen[i]), o, i);
        }
        f->t_hash[s] = (uint64_t)i + 1;
    }

    if (f->n_tensors > 1) {
        uint64_t(*span)[3] = malloc((size_t)f->n_tensors * sizeof *span);
        if (!span)
            NOMEM_OUT();
        for (int64_t i = 0; i < f->n_tensors; i++) {
            span[i][0] = f->tensors[i].offset;
            span[i][1] = f->tensors[i].offset + f->tensors[i].size; /* checked above */
            span[i][2] = (uint64_t)i;
        }
        qsort(span, (size_t)f->n_tensors, sizeof *span, cmp_span);
        for (int64_t k = 1; k < f->n_tensors; k++) {
            if (span[k][0] >= span[k - 1][1])
                continue;
            char w2[200];
            const struct gguf_tensor *a = &f->tensors[span[k - 1][2]], *b = &f->tensors[span[k][2]];
            set_err(err, err_len,
                    "gguf: tensors %s and %s overlap (data bytes %" PRIu64 "..%" PRIu64
                    " and %" PRIu64 "..%" PRIu64 ")",
                    san(w, sizeof w, a->name, strlen(a->name)),
                    san(w2, sizeof w2, b->name, strlen(b->name)), span[k - 1][0], span[k - 1][1],
                    span[k][0], span[k][1]);
            free(span);
            goto out;
        }
        free(span);
    }
    st = HEARTH_OK;
out:
    free(nlen);
    return st;
}

/* Parses len bytes at base into a new gguf_file (which does not yet own a mapping). */
static enum hearth_status parse(const uint8_t *base, uint64_t len, struct gguf_file **out,
                                char *err, size_t err_len)
{
    struct cur c = {base, len, 0, err, err_len, NULL, 0, {NULL, 0}, -1};
    uint32_t magic, version;
    uint64_t n_t, n_kv;
    enum hearth_status st;
    *out = NULL;
    if (!rd_u32(&c, &magic, "the magic"))
        return HEARTH_EFORMAT;
    if (memcmp(base, "GGUF", 4)) {
        char m[16];
        return fail(HEARTH_EFORMAT, err, err_len,
                    "gguf: not a GGUF file (starts with '%s', 0x%08" PRIx32 ", not 'GGUF')",
                    san(m, sizeof m, (const char *)base, 4), magic);
    }
    if (!rd_u32(&c, &version, "the version"))
        return HEARTH_EFORMAT;
    if (version == 1)
        return fail(HEARTH_EFORMAT, err, err_len,
                    "gguf: version 1 files are not supported (convert to version 3)");
    if (version != 2 && version != 3) {
        if (!(version & 0xffff))
            return fail(HEARTH_EFORMAT, err, err_len,
                        "gguf: version field 0x%08" PRIx32 " looks byte-swapped: big-endian "
                        "GGUF files are not supported",
                        version);
        return fail(HEARTH_EFORMAT, err, err_len,
                    "gguf: unknown version %" PRIu32 " (hearth reads versions 2 and 3)", version);
    }
    if (!rd_u64(&c, &n_t, "the tensor count") || !rd_u64(&c, &n_kv, "the key count"))
        return HEARTH_EFORMAT;
    uint64_t left = len - c.pos;
    if (n_kv > left / KV_MIN || n_t > left / TI_MIN || n_kv * KV_MIN + n_t * TI_MIN > left)
        return fail(HEARTH_EFORMAT, err, err_len,
                    "gguf: header claims %" PRIu64 " keys and %" PRIu64 " tensors but only %" PRIu64
                    " bytes follow (a key takes at least %u, a tensor info %u)",
                    n_kv, n_t, left, KV_MIN, TI_MIN);

    struct gguf_file *f = calloc(1, sizeof *f);
    if (!f)
        return NOMEM();
    f->base    = base;
    f->len     = len;
    f->version = version;
    if ((st = parse_kvs(f, &c, n_kv, err, err_len)) != HEARTH_OK ||
        (st = parse_tensors(f, &c, n_t, err, err_len)) != HEARTH_OK) {
        gguf_close(f);
        return st;
    }
    *out = f;
    return HEARTH_OK;
}

/* ----------------------------------------------------- open and close --- */

enum hearth_status gguf_open_buffer(const void *data, size_t len, struct gguf_file **out, char *err,
                                    size_t err_len)
{
    return parse(data ? data : (const void *)"", data ? len : 0, out, err, err_len);
}

/*
 * The file is mapped MAP_PRIVATE read-only; if another process truncates it
 * while mapped, touching the lost pages raises SIGBUS (as with any mmap
 * reader), which validation at open cannot prevent.
 */
enum hearth_status gguf_open(const char *path, struct gguf_file **out, char *err, size_t err_len)
{
    struct stat st;
    void *map = NULL;
    *out      = NULL;
    int fd    = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fail(HEARTH_EIO, err, err_len, "gguf: cannot open %s: %s", path, strerror(errno));
    if (fstat(fd, &st) < 0) {
        int e = errno;
        close(fd);
        return fail(HEARTH_EIO, err, err_len, "gguf: cannot stat %s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return fail(HEARTH_EIO, err, err_len, "gguf: %s is not a regular file", path);
    }
    if (st.st_size > 0) {
        map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            int e = errno;
            close(fd);
            return fail(HEARTH_EIO, err, err_len, "gguf: cannot map %s: %s", path, strerror(e));
        }
    }
    close(fd);
    enum hearth_status s =
        parse(map ? map : (const void *)"", (uint64_t)st.st_size, out, err, err_len);
    if (s != HEARTH_OK) {
        if (map)
            munmap(map, (size_t)st.st_size);
        return s;
    }
    (*out)->map = map;
    return HEARTH_OK;
}

void gguf_close(struct gguf_file *f)
{
    if (!f)
        return;
    for (int64_t i = 0; i < f->n_kv; i++)
        free(f->kv[i].idx);
    free(f->kv);
    free(f->tensors);
    free(f->names);
    free(f->kv_hash);
    free(f->t_hash);
    if (f->map)
        munmap(f->map, (size_t)f->len);
    free(f);
}

uint32_t gguf_version(const struct gguf_file *f)
{
    return f->version;
}
uint64_t gguf_file_size(const struct gguf_file *f)
{
    return f->len;
}
uint32_t gguf_alignment(const struct gguf_file *f)
{
    return f->alignment;
}
uint64_t gguf_data_offset(const struct gguf_file *f)
{
    return f->data_offset;
}

uint64_t gguf_fingerprint(const struct gguf_file *f)
{
    uint64_t h = fnv1a64(FNV1A64_SEED, f->base, f->data_offset);
    uint8_t len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (uint8_t)(f->len >> (8 * i));
    h                   = fnv1a64(h, len, 8);
    const uint64_t data = f->len - f->data_offset, chunk = 4096;
    for (uint64_t s = 0; s < 16 && data > 0; s++) {
        /* evenly spread, the first at the start of the data and the last at its end */
        const uint64_t at = data <= chunk ? 0 : s == 15 ? data - chunk : (data - chunk) / 15 * s;
        h = fnv1a64(h, f->base + f->data_offset + at, data - at < chunk ? data - at : chunk);
    }
    return h;
}

/* ---------------------------------------------------------- metadata --- */

int64_t gguf_n_kv(const struct gguf_file *f)
{
    return f->n_kv;
}

int64_t gguf_find_key(const struct gguf_file *f, const char *key)
{
    size_t len = strlen(key);
    for (uint64_t s = hash(key, len) & f->kv_mask; f->kv_hash[s]; s = (s + 1) & f->kv_mask)
        if (kv_is(&f->kv[f->kv_hash[s] - 1], key, len))
            return (int64_t)f->kv_hash[s] - 1;
    return -1;
}

static const struct kv *kv_at(const struct gguf_file *f, int64_t i)
{
    return i >= 0 && i < f->n_kv ? &f->kv[i] : NULL;
}

struct gguf_str gguf_key(const struct gguf_file *f, int64_t i)
{
    const struct kv *kv = kv_at(f, i);
    return kv ? kv->key : (struct gguf_str){"", 0};
}

enum gguf_vtype gguf_kv_type(const struct gguf_file *f, int64_t i)
{
    const struct kv *kv = kv_at(f, i);
    return kv ? (enum gguf_vtype)kv->type : GGUF_VTYPE_COUNT;
}

/* A numeric scalar, widened: kind 0 unsigned (u), 1 signed (s), 2 floating (d). */
struct num {
    int kind;
    uint64_t u;
    int64_t s;
    double d;
};

static bool kv_num(const struct gguf_file *f, int64_t i, struct num *n)
{
    const struct kv *kv = kv_at(f, i);
    if (!kv)
        return false;
    const uint8_t *p = f->base + kv->pos;
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
    if (kv->type >= GGUF_VTYPE_COUNT || !vsize[kv->type] || kv->type == GGUF_BOOL)
        return false;
    memcpy(&v, p, vsize[kv->type]);
    switch (kv->type) {
    case GGUF_U8:
        *n = (struct num){0, v.u8, 0, v.u8};
        break;
    case GGUF_U16:
        *n = (struct num){0, v.u16, 0, v.u16};
        break;
    case GGUF_U32:
        *n = (struct num){0, v.u32, 0, v.u32};
        break;
    case GGUF_U64:
        *n = (struct num){0, v.u64, 0, (double)v.u64};
        break;
    case GGUF_I8:
        *n = (struct num){1, 0, v.i8, v.i8};
        break;
    case GGUF_I16:
        *n = (struct num){1, 0, v.i16, v.i16};
        break;
    case GGUF_I32:
        *n = (struct num){1, 0, v.i32, v.i32};
        break;
    case GGUF_I64:
        *n = (struct num){1, 0, v.i64, (double)v.i64};
        break;
    case GGUF_F32:
        *n = (struct num){2, 0, 0, v.f32};
        break;
    default:
        *n = (struct num){2, 0, 0, v.f64};
        break;
    }
    return true;
}

bool gguf_kv_u64(const struct gguf_file *f, int64_t i, uint64_t *out)
{
    struct num n;
    if (!kv_num(f, i, &n) || n.kind == 2 || (n.kind == 1 && n.s < 0))
        return false;
    *out = n.kind == 0 ? n.u : (uint64_t)n.s;
    return true;
}

bool gguf_kv_i64(const struct gguf_file *f, int64_t i, int64_t *out)
{
    struct num n;
    if (!kv_num(f, i, &n) || n.kind == 2 || (n.kind == 0 && n.u > INT64_MAX))
        return false;
    *out = n.kind == 1 ? n.s : (int64_t)n.u;
    return true;
}

bool gguf_kv_f64(const struct gguf_file *f, int64_t i, double *out)
{
    struct num n;
    if (!kv_num(f, i, &n))
        return false;
    *out = n.d;
    return true;
}

bool gguf_kv_bool(const struct gguf_file *f, int64_t i, bool *out)
{
    const struct kv *kv = kv_at(f, i);
    if (!kv || kv->type != GGUF_BOOL)
        return false;
    *out = f->base[kv->pos] != 0;
    return true;
}

bool gguf_kv_str(const struct gguf_file *f, int64_t i, struct gguf_str *out)
{
    const struct kv *kv = kv_at(f, i);
    if (!kv || kv->type != GGUF_STR)
        return false;
    memcpy(&out->len, f->base + kv->pos, 8);
    out->ptr = (const char *)f->base + kv->pos + 8;
    return true;
}

bool gguf_kv_arr(const struct gguf_file *f, int64_t i, enum gguf_vtype *elem, uint64_t *n)
{
    const struct kv *kv = kv_at(f, i);
    if (!kv || kv->type != GGUF_ARR)
        return false;
    *elem = (enum gguf_vtype)kv->elem;
    *n    = kv->n;
    return true;
}

const void *gguf_arr_data(const struct gguf_file *f, int64_t i)
{
    const struct kv *kv = kv_at(f, i);
    if (!kv || kv->type != GGUF_ARR || !vsize[kv->elem])
        return NULL;
    return f->base + kv->pos;
}

bool gguf_arr_str(const struct gguf_file *f, int64_t i, uint64_t j, struct gguf_str *out)
{
    const struct kv *kv = kv_at(f, i);
    if (!kv || kv->type != GGUF_ARR || kv->elem != GGUF_STR || j >= kv->n)
        return false;
    memcpy(&out->len, f->base + kv->idx[j], 8);
    out->ptr = (const char *)f->base + kv->idx[j] + 8;
    return true;
}

bool gguf_arr_arr(const struct gguf_file *f, int64_t i, uint64_t j, enum gguf_vtype *elem,
                  uint64_t *n, const void **data)
{
    const struct kv *kv = kv_at(f, i);
    if (!kv || kv->type != GGUF_ARR || kv->elem != GGUF_ARR || j >= kv->n)
        return false;
    uint32_t et;
    memcpy(&et, f->base + kv->idx[j], 4);
    memcpy(n, f->base + kv->idx[j] + 4, 8);
    *elem = (enum gguf_vtype)et;
    *data = vsize[et] ? f->base + kv->idx[j] + ARR_MIN : NULL;
    return true;
}

bool gguf_get_u32(const struct gguf_file *f, const char *key, uint32_t *out)
{
    uint64_t v;
    if (!gguf_kv_u64(f, gguf_find_key(f, key), &v) || v > UINT32_MAX)
        return false;
    *out = (uint32_t)v;
    return true;
}

bool gguf_get_f32(const struct gguf_file *f, const char *key, float *out)
{
    double v;
    if (!gguf_kv_f64(f, gguf_find_key(f, key), &v) || (isfinite(v) && fabs(v) > FLT_MAX))
        return false; /* a finite double beyond float's range does not convert */
    *out = (float)v;
    return true;
}

bool gguf_get_bool(const struct gguf_file *f, const char *key, bool *out)
{
    return gguf_kv_bool(f, gguf_find_key(f, key), out);
}

bool gguf_get_str(const struct gguf_file *f, const char *key, char *buf, size_t cap)
{
    struct gguf_str s;
    if (!gguf_kv_str(f, gguf_find_key(f, key), &s) || s.len >= cap)
        return false;
    memcpy(buf, s.ptr, s.len);
    buf[s.len] = 0;
    return true;
}

/* ----------------------------------------------------------- tensors --- */

int64_t gguf_n_tensors(const struct gguf_file *f)
{
    return f->n_tensors;
}

const struct gguf_tensor *gguf_tensor(const struct gguf_file *f, int64_t i)
{
    return i >= 0 && i < f->n_tensors ? &f->tensors[i] : NULL;
}

const struct gguf_tensor *gguf_find_tensor(const struct gguf_file *f, const char *name)
{
    for (uint64_t s = hash(name, strlen(name)) & f->t_mask; f->t_hash[s]; s = (s + 1) & f->t_mask)
        if (!strcmp(f->tensors[f->t_hash[s] - 1].name, name))
            return &f->tensors[f->t_hash[s] - 1];
    return NULL;
}
