/*
 * gguf.h: reading GGUF files (versions 2 and 3).
 *
 * The file is mapped read-only; everything is validated against the file
 * size before any pointer into the mapping is formed, so a malformed or
 * hostile file gives one specific sentence and HEARTH_EFORMAT, never a
 * crash. After a successful open every accessor is bounds-safe and the
 * object is immutable (safe to read from several threads).
 *
 * Typical sizes: a few dozen keys, a tokenizer array of 32k-256k strings,
 * a few hundred tensors; the tensor data (MB to GB) stays in the mapping.
 */
#ifndef HEARTH_GGUF_H
#define HEARTH_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hearth.h"

/* Metadata value types as stored in the file. */
enum gguf_vtype {
    GGUF_U8   = 0,
    GGUF_I8   = 1,
    GGUF_U16  = 2,
    GGUF_I16  = 3,
    GGUF_U32  = 4,
    GGUF_I32  = 5,
    GGUF_F32  = 6,
    GGUF_BOOL = 7,
    GGUF_STR  = 8,
    GGUF_ARR  = 9,
    GGUF_U64  = 10,
    GGUF_I64  = 11,
    GGUF_F64  = 12,
    GGUF_VTYPE_COUNT
};

/* A string inside the mapping: len bytes at ptr, not NUL-terminated. */
struct gguf_str {
    const char *ptr;
    uint64_t len;
};

#define GGUF_MAX_DIMS 4

struct gguf_tensor {
    const char *name;          /* NUL-terminated copy owned by the gguf_file */
    uint32_t type;             /* enum dtype id, validated as known */
    uint32_t n_dims;           /* 1..4 */
    int64_t ne[GGUF_MAX_DIMS]; /* elements per dim, ne[0] innermost; unused dims are 1 */
    uint64_t offset;           /* from the start of the data section, aligned */
    uint64_t size;             /* bytes */
    const void *data;          /* into the mapping */
};

struct gguf_file;

/*
 * Opens and validates path. On success *out owns the mapping. Errors:
 * HEARTH_EIO (cannot open/map), HEARTH_EFORMAT (malformed: err says where
 * and why, e.g. "gguf: tensor blk.3.attn_q.weight ends at byte 91234 but
 * the file has 90000"), HEARTH_ENOMEM.
 */
enum hearth_status gguf_open(const char *path, struct gguf_file **out, char *err, size_t err_len);
/* The same over a caller-owned buffer that must outlive the gguf_file (fuzzing, tests). */
enum hearth_status gguf_open_buffer(const void *data, size_t len, struct gguf_file **out, char *err,
                                    size_t err_len);
void gguf_close(struct gguf_file *f);

uint32_t gguf_version(const struct gguf_file *f);
uint64_t gguf_file_size(const struct gguf_file *f);
uint32_t gguf_alignment(const struct gguf_file *f);
/* Byte offset of the tensor data section in the file. */
uint64_t gguf_data_offset(const struct gguf_file *f);

/*
 * A 64-bit fingerprint of the file: its header (metadata and tensor table),
 * its size and 16 samples of 4 KiB spread over the tensor data, so two
 * files of one architecture and shape with other weights differ. Reads
 * about 64 KiB; the same bytes give the same value on every host.
 */
uint64_t gguf_fingerprint(const struct gguf_file *f);

/* ---- metadata: keys by index 0..gguf_n_kv-1 ---- */
int64_t gguf_n_kv(const struct gguf_file *f);
/* Index of key, or -1. */
int64_t gguf_find_key(const struct gguf_file *f, const char *key);
struct gguf_str gguf_key(const struct gguf_file *f, int64_t i);
enum gguf_vtype gguf_kv_type(const struct gguf_file *f, int64_t i);

/* Scalar of key i converted to the asked type. False if the value's type does
 * not convert (a string as a number, a negative as unsigned, out of range). */
bool gguf_kv_u64(const struct gguf_file *f, int64_t i, uint64_t *out);
bool gguf_kv_i64(const struct gguf_file *f, int64_t i, int64_t *out);
bool gguf_kv_f64(const struct gguf_file *f, int64_t i, double *out);
bool gguf_kv_bool(const struct gguf_file *f, int64_t i, bool *out);
bool gguf_kv_str(const struct gguf_file *f, int64_t i, struct gguf_str *out);

/* Arrays: element type and count of key i (false if not an array). */
bool gguf_kv_arr(const struct gguf_file *f, int64_t i, enum gguf_vtype *elem, uint64_t *n);
/* Raw little-endian elements of a numeric array (n * element size bytes), NULL otherwise. */
const void *gguf_arr_data(const struct gguf_file *f, int64_t i);
/* Element j of a string array, O(1). False if not a string array or j out of range. */
bool gguf_arr_str(const struct gguf_file *f, int64_t i, uint64_t j, struct gguf_str *out);
/* Element j of an array of arrays, O(1): its element type and count, and for a
 * numeric element type its raw little-endian elements in *data (NULL for strings
 * and deeper arrays). False if key i is not an array of arrays or j out of range. */
bool gguf_arr_arr(const struct gguf_file *f, int64_t i, uint64_t j, enum gguf_vtype *elem,
                  uint64_t *n, const void **data);

/* Convenience by key name: false when absent or of a type that does not convert. */
bool gguf_get_u32(const struct gguf_file *f, const char *key, uint32_t *out);
bool gguf_get_f32(const struct gguf_file *f, const char *key, float *out);
bool gguf_get_bool(const struct gguf_file *f, const char *key, bool *out);
/* Key's string as a NUL-terminated copy in buf; false when absent, not a string or too long. */
bool gguf_get_str(const struct gguf_file *f, const char *key, char *buf, size_t cap);

/* ---- tensors ---- */
int64_t gguf_n_tensors(const struct gguf_file *f);
const struct gguf_tensor *gguf_tensor(const struct gguf_file *f, int64_t i);
/* Tensor by name, or NULL. */
const struct gguf_tensor *gguf_find_tensor(const struct gguf_file *f, const char *name);

/* Name of a value type ("u32", "string", "array"). */
const char *gguf_vtype_name(enum gguf_vtype t);

#endif
