/*
 * writer.h: writing GGUF v3 files, streaming.
 *
 * A writer collects metadata and tensor infos in memory (a few MB at most:
 * the tokenizer arrays), then writes the header and takes the tensor data
 * in order, in as many pieces as the caller likes, so a multi-GB model
 * never has to be in memory at once. Offsets are aligned to
 * general.alignment (32 unless the metadata sets it) and every tensor is
 * followed by zero padding up to the next multiple of it.
 *
 * The file is written to PATH.tmp and renamed to PATH by gguf_writer_finish,
 * so a failure (or a writer freed before finishing) never leaves a partial
 * file at PATH. Not thread-safe: one writer per thread.
 *
 *   w = gguf_writer_new();
 *   gguf_writer_set_u32(w, "general.file_type", 15, err, len);   ... metadata
 *   gguf_writer_add_tensor(w, "output.weight", DTYPE_Q6_K, 2, ne, err, len);
 *   gguf_writer_begin(w, path, err, len);                         header out
 *   gguf_writer_write(w, data, n, err, len);                      data, in order
 *   gguf_writer_finish(w, err, len);                              rename
 *   gguf_writer_free(w);
 */
#ifndef HEARTH_GGUF_WRITER_H
#define HEARTH_GGUF_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "hearth.h"
#include "util/dtype.h"

struct gguf_writer;

/* An empty writer, or NULL when out of memory. */
struct gguf_writer *gguf_writer_new(void);
/* Frees w; if the file was begun but not finished, PATH.tmp is removed. NULL is a no-op. */
void gguf_writer_free(struct gguf_writer *w);

/* ---- metadata ----
 * Setting a key that exists replaces it: the old entry is removed and the
 * new one appended (llama.cpp's gguf_set_val order). Keys are 1..65535
 * bytes. Only before gguf_writer_begin. Errors: HEARTH_EINVAL (bad key,
 * bad type, after begin), HEARTH_ENOMEM. */

/* A scalar of type t (any numeric type or GGUF_BOOL) read from *val in host order. */
enum hearth_status gguf_writer_set(struct gguf_writer *w, const char *key, enum gguf_vtype t,
                                   const void *val, char *err, size_t err_len);
enum hearth_status gguf_writer_set_u32(struct gguf_writer *w, const char *key, uint32_t v,
                                       char *err, size_t err_len);
/* A string of len bytes (not necessarily NUL-terminated). */
enum hearth_status gguf_writer_set_str(struct gguf_writer *w, const char *key, const char *s,
                                       uint64_t len, char *err, size_t err_len);
/* An array of n numeric or bool elements of type elem, packed little-endian at data. */
enum hearth_status gguf_writer_set_arr(struct gguf_writer *w, const char *key, enum gguf_vtype elem,
                                       const void *data, uint64_t n, char *err, size_t err_len);
/* An array of n strings. */
enum hearth_status gguf_writer_set_arr_str(struct gguf_writer *w, const char *key,
                                           const struct gguf_str *s, uint64_t n, char *err,
                                           size_t err_len);
/*
 * Copies key i of f (any type, with its value type kept exactly) under the
 * same key. Arrays of arrays are copied when their inner arrays are numeric;
 * deeper nesting or inner string arrays give HEARTH_EUNSUPPORTED.
 */
enum hearth_status gguf_writer_copy_kv(struct gguf_writer *w, const struct gguf_file *f, int64_t i,
                                       char *err, size_t err_len);
/* Removes key if present; true if it was. */
bool gguf_writer_remove(struct gguf_writer *w, const char *key);
int64_t gguf_writer_n_kv(const struct gguf_writer *w);

/* ---- tensors ---- */

/*
 * Declares the next tensor: n_dims 1..4, ne[0] innermost, ne[0] a multiple
 * of the type's block. Data must later be written in declaration order.
 * As ggml writes them, trailing dimensions of 1 are dropped from the stored
 * n_dims (a [256, 1] tensor is stored 1-D). Errors: HEARTH_EINVAL (duplicate
 * or empty name, bad shape, unknown type, after begin), HEARTH_ENOMEM.
 */
enum hearth_status gguf_writer_add_tensor(struct gguf_writer *w, const char *name, enum dtype type,
                                          uint32_t n_dims, const int64_t *ne, char *err,
                                          size_t err_len);
int64_t gguf_writer_n_tensors(const struct gguf_writer *w);
/* Bytes of tensor i's data (without padding). */
uint64_t gguf_writer_tensor_size(const struct gguf_writer *w, int64_t i);

/*
 * Creates PATH.tmp and writes the header and tensor infos. Errors:
 * HEARTH_EIO (cannot create or write, err names the file and the reason),
 * HEARTH_EINVAL (general.alignment is not a power-of-two u32, called twice).
 */
enum hearth_status gguf_writer_begin(struct gguf_writer *w, const char *path, char *err,
                                     size_t err_len);
/*
 * Appends len bytes of tensor data: the current tensor's next bytes,
 * spilling into the following tensors when len runs past its end (padding
 * is inserted between them). Errors: HEARTH_EINVAL (more data than the
 * tensors declared, before begin), HEARTH_EIO.
 */
enum hearth_status gguf_writer_write(struct gguf_writer *w, const void *data, size_t len, char *err,
                                     size_t err_len);
/*
 * Checks every tensor's data was written, flushes and closes the file and
 * renames PATH.tmp to PATH. Errors: HEARTH_EINVAL (data missing, err names
 * the first tensor short of it), HEARTH_EIO. After an error PATH.tmp is
 * removed and PATH is untouched.
 */
enum hearth_status gguf_writer_finish(struct gguf_writer *w, char *err, size_t err_len);

#endif
