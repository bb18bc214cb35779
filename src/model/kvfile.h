/*
 * kvfile.h: a sequence's K/V in a file (hearth_seq_save, hearth_seq_load),
 * what slot saving and the cache's disk tier store.
 *
 * Layout, little-endian: the 8-byte magic "HKVCACH1", then a header of
 * u64 fields (the model's fingerprint, the layers with K/V, kv_dim,
 * block_tokens, K's and V's types, the token count n), then n i32 tokens,
 * then each K/V layer's K rows of positions 0..n-1 and its V rows (the
 * rows' bytes as the cache holds them), then a u64 checksum of everything
 * before it. A file whose fingerprint, shape or types differ from the
 * context's, that is cut short, longer, or whose checksum does not match is
 * refused whole, with the reason. Internal to src/model.
 */
#ifndef HEARTH_KVFILE_H
#define HEARTH_KVFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "hearth.h"

#define KVFILE_MAGIC "HKVCACH1"

/* What a file must hold to be loaded into a context: its header fields. */
struct kvfile_shape {
    uint64_t fingerprint;
    uint64_t n_layer; /* layers with K/V */
    uint64_t kv_dim;
    uint64_t block_tokens;
    uint64_t type_k, type_v; /* enum hearth_kv_type */
    uint64_t row_k, row_v;   /* bytes of a K and a V row (not stored: from kv_dim and types) */
    uint64_t n_vocab;        /* tokens must be below it (not stored) */
};

/* A parsed file: pointers into the caller's buffer. */
struct kvfile_view {
    uint64_t n_tokens;
    const uint8_t *tokens; /* [n_tokens] little-endian i32 */
    const uint8_t *rows;   /* [n_layer][K, V][n_tokens][row] */
};

/* A token as the file stores it: 4 bytes, little-endian. */
static inline void kvfile_put_token(uint8_t *p, int32_t token)
{
    const uint32_t t = (uint32_t)token;
    p[0] = (uint8_t)t, p[1] = (uint8_t)(t >> 8), p[2] = (uint8_t)(t >> 16),
    p[3] = (uint8_t)(t >> 24);
}

static inline uint32_t kvfile_get_token(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The checksum the file ends with, over bytes [0, len). */
uint64_t kvfile_checksum(const uint8_t *p, size_t len);

/* Bytes of the header: the magic and 7 u64 fields. */
#define KVFILE_HEADER 64

/* Writes the header (KVFILE_HEADER bytes) of a file of n tokens of shape s. */
void kvfile_header(uint8_t *head, const struct kvfile_shape *s, uint64_t n);

/* Bytes of a file of n tokens of shape s. */
uint64_t kvfile_size(const struct kvfile_shape *s, uint64_t n);

/*
 * Checks a header (buf holds len >= KVFILE_HEADER bytes of a file) against
 * want: magic, model, shape. Its token count in *n_tokens, unchecked.
 * HEARTH_EFORMAT with the reason otherwise.
 */
enum hearth_status kvfile_parse_header(const uint8_t *buf, size_t len,
                                       const struct kvfile_shape *want, uint64_t *n_tokens,
                                       char *err, size_t err_len);

/*
 * Opens name (relative to dirfd, as openat; AT_FDCWD for a plain path) for
 * reading only when it is a regular file: a symbolic link is not followed
 * (O_NOFOLLOW), a FIFO or device never blocks the open (O_NONBLOCK) and
 * fstat then refuses anything not S_ISREG, so a file named like hearth's
 * cannot hang the caller or lend it a file outside the directory. Returns
 * the descriptor (O_CLOEXEC; the caller closes it) with its stat in *sb; -1
 * otherwise, *refused true for a file that is not a regular one (a link, a
 * FIFO, a device, a socket, a directory: nothing else about it is to be
 * told), false with errno for one that cannot be opened (ENOENT, EACCES...).
 */
int kvfile_open_regular(int dirfd, const char *name, struct stat *sb, bool *refused);

/* Reads up to len bytes from fd's current offset (short only at the end or on an error). */
size_t kvfile_read(int fd, uint8_t *buf, size_t len);

/*
 * Creates path for writing, replacing whatever was there under that name
 * (a stale file, a link: the link itself, never its target), O_NOFOLLOW and
 * O_EXCL so nothing placed there redirects the write. Returns the
 * descriptor or -1 with errno.
 */
int kvfile_create(const char *path);

/* Writes len bytes to fd; false with errno on a short write (ENOSPC, EFBIG, EIO). */
bool kvfile_write(int fd, const uint8_t *buf, size_t len);

struct hearth_context;
/* The shape of ctx's cache as a file states it; HEARTH_EUNSUPPORTED where no file can. */
enum hearth_status kvfile_shape_of(const struct hearth_context *ctx, struct kvfile_shape *s,
                                   char *err, size_t err_len);

/*
 * Checks buf (len bytes) against the shape want, the token count against
 * max_tokens (1 or more tokens, each below want->n_vocab), and fills *out. HEARTH_EFORMAT with the
 * reason otherwise. Pure: reads only buf; the fuzz target drives it.
 */
enum hearth_status kvfile_parse(const uint8_t *buf, size_t len, const struct kvfile_shape *want,
                                uint64_t max_tokens, struct kvfile_view *out, char *err,
                                size_t err_len);

#endif
