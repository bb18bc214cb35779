/* kvfile.c: a sequence's K/V in a file (kvfile.h). */
#include "model/kvfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/kv.h"
#include "model/model.h"
#include "util/errfmt.h"
#include "util/hash.h"

/* FNV-1a 64: streamable, so writing needs no second pass. */
uint64_t kvfile_checksum(const uint8_t *p, size_t len)
{
    return fnv1a64(FNV1A64_SEED, p, len);
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

void kvfile_header(uint8_t *head, const struct kvfile_shape *s, uint64_t n)
{
    memcpy(head, KVFILE_MAGIC, 8);
    const uint64_t fields[7] = {s->fingerprint, s->n_layer, s->kv_dim, s->block_tokens,
                                s->type_k,      s->type_v,  n};
    for (int i = 0; i < 7; i++)
        put_u64(head + 8 + 8 * i, fields[i]);
}

uint64_t kvfile_size(const struct kvfile_shape *s, uint64_t n)
{
    return KVFILE_HEADER + n * 4 + s->n_layer * n * (s->row_k + s->row_v) + 8;
}

enum hearth_status kvfile_parse_header(const uint8_t *buf, size_t len,
                                       const struct kvfile_shape *want, uint64_t *n_tokens,
                                       char *err, size_t err_len)
{
    if (len < KVFILE_HEADER || memcmp(buf, KVFILE_MAGIC, 8) != 0)
        return fail(HEARTH_EFORMAT, err, err_len, "kv file: not a hearth K/V file (no %s header)",
                    KVFILE_MAGIC);
    const uint64_t fp = get_u64(buf + 8), n_layer = get_u64(buf + 16), kv_dim = get_u64(buf + 24),
                   bt = get_u64(buf + 32), tk = get_u64(buf + 40), tv = get_u64(buf + 48);
    *n_tokens = get_u64(buf + 56);
    if (fp != want->fingerprint)
        return fail(HEARTH_EFORMAT, err, err_len,
                    "kv file: written for another model (fingerprint %016llx, this model's "
                    "%016llx)",
                    (unsigned long long)fp, (unsigned long long)want->fingerprint);
    if (n_layer != want->n_layer || kv_dim != want->kv_dim || bt != want->block_tokens ||
        tk != want->type_k || tv != want->type_v)
        return fail(HEARTH_EFORMAT, err, err_len,
                    "kv file: a cache of another shape (%llu layers of %llu values, blocks of "
                    "%llu, K/V types %llu/%llu; this context's %llu, %llu, %llu, %llu/%llu)",
                    (unsigned long long)n_layer, (unsigned long long)kv_dim, (unsigned long long)bt,
                    (unsigned long long)tk, (unsigned long long)tv,
                    (unsigned long long)want->n_layer, (unsigned long long)want->kv_dim,
                    (unsigned long long)want->block_tokens, (unsigned long long)want->type_k,
                    (unsigned long long)want->type_v);
    return HEARTH_OK;
}

enum hearth_status kvfile_parse(const uint8_t *buf, size_t len, const struct kvfile_shape *want,
                                uint64_t max_tokens, struct kvfile_view *out, char *err,
                                size_t err_len)
{
    uint64_t n;
    enum hearth_status st = kvfile_parse_header(buf, len, want, &n, err, err_len);
    if (st)
        return st;
    if (len < KVFILE_HEADER + 8)
        return fail(HEARTH_EFORMAT, err, err_len, "kv file: %zu bytes, cut short", len);
    if (n < 1 || n > max_tokens)
        return fail(HEARTH_EFORMAT, err, err_len,
                    "kv file: holds %llu tokens, and a sequence here holds 1 to %llu",
                    (unsigned long long)n, (unsigned long long)max_tokens);
    /* n <= max_tokens (a context, < 2^31) and rows of at most a few KiB: no overflow */
    const uint64_t need = kvfile_size(want, n);
    if (len != need)
        return fail(HEARTH_EFORMAT, err, err_len,
                    "kv file: %zu bytes where %llu tokens take %llu (%s)", len,
                    (unsigned long long)n, (unsigned long long)need,
                    len < need ? "cut short" : "bytes past its end");
    if (kvfile_checksum(buf, len - 8) != get_u64(buf + len - 8))
        return fail(HEARTH_EFORMAT, err, err_len,
                    "kv file: the checksum does not match its bytes (a damaged file)");
    const uint8_t *tok = buf + KVFILE_HEADER;
    for (uint64_t i = 0; i < n; i++) {
        const uint32_t t = kvfile_get_token(tok + 4 * i);
        if (t >= want->n_vocab)
            return fail(HEARTH_EFORMAT, err, err_len,
                        "kv file: token %llu is %u, past the vocabulary's %llu",
                        (unsigned long long)i, t, (unsigned long long)want->n_vocab);
    }
    out->n_tokens = n;
    out->tokens   = tok;
    out->rows     = tok + n * 4;
    return HEARTH_OK;
}

/* --------------------------------------------------------------- files --- */

int kvfile_open_regular(int dirfd, const char *name, struct stat *sb, bool *refused)
{
    *refused = false;
    /* a look first, so a device is not even opened (opening some has effects) */
    if (fstatat(dirfd, name, sb, AT_SYMLINK_NOFOLLOW) != 0)
        return -1;
    if (!S_ISREG(sb->st_mode)) {
        *refused = true;
        return -1;
    }
    /* and the same check on what was opened: the name may have changed in between */
    const int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        *refused = errno == ELOOP;
        return -1;
    }
    if (fstat(fd, sb) != 0 || !S_ISREG(sb->st_mode)) {
        *refused = true;
        close(fd);
        return -1;
    }
    return fd;
}

size_t kvfile_read(int fd, uint8_t *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        const ssize_t r = read(fd, buf + got, len - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    return got;
}

int kvfile_create(const char *path)
{
    /* a stale file of a crashed process with this pid (a container's pid repeats) */
    if (unlink(path) != 0 && errno != ENOENT)
        return -1;
    return open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
}

bool kvfile_write(int fd, const uint8_t *buf, size_t len)
{
    while (len > 0) {
        const ssize_t w = write(fd, buf, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = ENOSPC;
            return false;
        }
        buf += w;
        len -= (size_t)w;
    }
    return true;
}

/* ---------------------------------------------------------- a context --- */

/* The shape of ctx's cache as a file states it; HEARTH_EUNSUPPORTED where no file can. */
enum hearth_status kvfile_shape_of(const struct hearth_context *ctx, struct kvfile_shape *s,
                                   char *err, size_t err_len)
{
    const struct kv_cache *kv = &ctx->kv;
    if (ctx->state_len)
        return fail(HEARTH_EUNSUPPORTED, err, err_len,
                    "kv file: %s keeps a recurrent state beside its K/V, which a file does not "
                    "hold yet",
                    ctx->model->arch);
    if (kv->pool[1].n_layer)
        return fail(HEARTH_EUNSUPPORTED, err, err_len,
                    "kv file: the sliding-window layers' cache is not saved yet");
    *s = (struct kvfile_shape){.fingerprint  = ctx->model->fingerprint,
                               .kv_dim       = (uint64_t)kv->kv_dim,
                               .block_tokens = (uint64_t)kv->block_tokens,
                               .type_k       = (uint64_t)kv->type[0],
                               .type_v       = (uint64_t)kv->type[1],
                               .row_k        = kv->row_len[0],
                               .row_v        = kv->row_len[1],
                               .n_vocab      = (uint64_t)ctx->model->hp.n_vocab};
    for (int32_t l = 0; l < kv->n_layer; l++) {
        if (kv->group[l] == KV_NONE)
            continue;
        if (kv->slot[l] < 0)
            return fail(HEARTH_EUNSUPPORTED, err, err_len,
                        "kv file: layer %d keeps its K/V on a GPU, which a file does not read "
                        "back yet",
                        l);
        s->n_layer++;
    }
    return HEARTH_OK;
}

enum hearth_status hearth_seq_save_supported(const struct hearth_context *ctx, char *err,
                                             size_t err_len)
{
    struct kvfile_shape s;
    return kvfile_shape_of(ctx, &s, err, err_len);
}

/* A file being written through a buffer, its checksum folded in as it goes. */
struct out {
    int fd;
    uint64_t h;
    size_t len;
    uint8_t buf[1 << 16];
};

/* Writes n bytes and folds them into the checksum; false with errno on a write error. */
static bool put(struct out *o, const void *p, size_t n)
{
    o->h             = fnv1a64(o->h, p, n);
    const uint8_t *b = p;
    while (n > 0) {
        if (o->len == sizeof o->buf) {
            if (!kvfile_write(o->fd, o->buf, o->len))
                return false;
            o->len = 0;
        }
        const size_t k = n < sizeof o->buf - o->len ? n : sizeof o->buf - o->len;
        memcpy(o->buf + o->len, b, k);
        o->len += k, b += k, n -= k;
    }
    return true;
}

enum hearth_status hearth_seq_save(struct hearth_context *ctx, int32_t seq,
                                   const hearth_token *tokens, int32_t n, const char *path,
                                   char *err, size_t err_len)
{
    struct kvfile_shape s;
    enum hearth_status st = kvfile_shape_of(ctx, &s, err, err_len);
    if (st)
        return st;
    const struct kv_cache *kv = &ctx->kv;
    if (seq < 0 || seq >= kv->n_seq || n < 1 || n > kv->seqs[seq].n_tokens)
        return fail(HEARTH_EINVAL, err, err_len,
                    "kv file: sequence %d holds %d tokens, so it saves 1 to that many, not %d", seq,
                    seq >= 0 && seq < kv->n_seq ? kv->seqs[seq].n_tokens : 0, n);
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return fail(HEARTH_EINVAL, err, err_len, "kv file: the path is too long");
    struct out *o = malloc(sizeof *o);
    if (!o)
        return fail(HEARTH_ENOMEM, err, err_len, "kv file: out of memory");
    o->fd = kvfile_create(tmp);
    if (o->fd < 0) {
        const int e = errno;
        free(o);
        return fail(e == ENAMETOOLONG || e == EISDIR ? HEARTH_EINVAL : HEARTH_EIO, err, err_len,
                    "kv file: cannot write %s: %s", tmp, strerror(e));
    }
    o->h   = FNV1A64_SEED;
    o->len = 0;
    uint8_t head[KVFILE_HEADER];
    kvfile_header(head, &s, (uint64_t)n);
    bool ok = put(o, head, sizeof head);
    for (int32_t i = 0; ok && i < n; i++) {
        uint8_t b[4];
        kvfile_put_token(b, tokens[i]);
        ok = put(o, b, 4);
    }
    for (int32_t l = 0; ok && l < kv->n_layer; l++) {
        if (kv->group[l] == KV_NONE)
            continue;
        for (int w = 0; ok && w < 2; w++)
            for (int32_t p = 0; ok && p < n; p++)
                ok = put(o, kv_row(kv, l, w, seq, p), kv->row_len[w]);
    }
    uint8_t sum[8];
    put_u64(sum, o->h);
    ok = ok && kvfile_write(o->fd, o->buf, o->len) && kvfile_write(o->fd, sum, 8) &&
         fsync(o->fd) == 0;
    int e = errno;
    if (close(o->fd) != 0 && ok) {
        ok = false;
        e  = errno;
    }
    free(o);
    if (ok && rename(tmp, path) != 0) {
        ok = false;
        e  = errno;
    }
    if (!ok) {
        unlink(tmp);
        /* a directory under the name asked for is the caller's doing, not the server's */
        return fail(e == EISDIR || e == ENOTDIR || e == ENAMETOOLONG ? HEARTH_EINVAL : HEARTH_EIO,
                    err, err_len, "kv file: cannot write %s: %s", path, strerror(e));
    }
    return HEARTH_OK;
}

enum hearth_status hearth_seq_load(struct hearth_context *ctx, int32_t seq, const char *path,
                                   hearth_token **tokens, int32_t *n_tokens, char *err,
                                   size_t err_len)
{
    *tokens   = NULL;
    *n_tokens = 0;
    struct kvfile_shape s;
    enum hearth_status st = kvfile_shape_of(ctx, &s, err, err_len);
    if (st)
        return st;
    struct kv_cache *kv = &ctx->kv;
    if (seq < 0 || seq >= kv->n_seq || kv->seqs[seq].n_tokens != 0)
        return fail(HEARTH_EINVAL, err, err_len,
                    "kv file: loads into an empty sequence, and %d is not one", seq);
    struct stat sb;
    bool refused;
    const int fd = kvfile_open_regular(AT_FDCWD, path, &sb, &refused);
    if (fd < 0)
        return refused ? fail(HEARTH_EINVAL, err, err_len,
                              "kv file: refused: only a regular file is read, never through a "
                              "link")
                       : fail(errno == ENOENT ? HEARTH_EINVAL : HEARTH_EIO, err, err_len,
                              "kv file: cannot read %s: %s", path, strerror(errno));
    const uint64_t most =
        KVFILE_HEADER + (uint64_t)kv->n_ctx * (4 + s.n_layer * (s.row_k + s.row_v)) + 8;
    if ((uint64_t)sb.st_size > most) {
        close(fd);
        return fail(HEARTH_EFORMAT, err, err_len,
                    "kv file: %s has %lld bytes, more than a sequence of this context takes", path,
                    (long long)sb.st_size);
    }
    const size_t len = (size_t)sb.st_size;
    uint8_t *buf     = malloc(len ? len : 1);
    if (!buf) {
        close(fd);
        return fail(HEARTH_ENOMEM, err, err_len, "kv file: out of memory for %zu bytes", len);
    }
    const bool got = kvfile_read(fd, buf, len) == len;
    close(fd);
    struct kvfile_view v;
    if (!got)
        st = fail(HEARTH_EIO, err, err_len, "kv file: cannot read %s", path);
    else if (!(st = kvfile_parse(buf, len, &s, (uint64_t)kv->n_ctx, &v, err, err_len)) &&
             !(*tokens = malloc(v.n_tokens * sizeof **tokens)))
        st = fail(HEARTH_ENOMEM, err, err_len, "kv file: out of memory");
    const int32_t n = st ? 0 : (int32_t)v.n_tokens;
    if (!st)
        st = kv_reserve(kv, seq, n, err, err_len);
    if (!st) {
        for (int32_t i = 0; i < n; i++)
            (*tokens)[i] = (hearth_token)kvfile_get_token(v.tokens + 4 * i);
        const uint8_t *r = v.rows;
        for (int32_t l = 0; l < kv->n_layer; l++) {
            if (kv->group[l] == KV_NONE)
                continue;
            for (int w = 0; w < 2; w++)
                for (int32_t p = 0; p < n; p++, r += kv->row_len[w])
                    memcpy(kv_row(kv, l, w, seq, p), r, kv->row_len[w]);
        }
        kv->seqs[seq].n_tokens = n;
        kv_publish(kv, seq, *tokens, n);
        *n_tokens = n;
    } else {
        free(*tokens);
        *tokens = NULL;
    }
    free(buf);
    return st;
}
