/* kvdisk.c: the prefix cache's disk tier (kvdisk.h). */
#include "model/kvdisk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/kv.h"
#include "util/clock.h"
#include "util/errfmt.h"
#include "util/u64map.h"

/*
 * After a write fails (a full disk, a file size limit, permissions) the tier
 * writes nothing for this long, then tries one block again. Space comes back
 * from outside (files deleted, the filesystem grown, a limit raised), which
 * nothing tells the tier, and its own evictions free nothing while it writes
 * nothing: so a retry on a clock, which costs one failed block write (a few
 * MiB at most) per interval, where writing on would fail on every eviction.
 */
#define KVDISK_RETRY_S 30.0

/* Files refused at start named one by one in the log; past it, only their count. */
#define KVDISK_LOG_REFUSED 8

/* A block file: its chain hash, its place in the LRU (head: least recently used). */
struct entry {
    uint64_t hash;
    int32_t prev, next;
};

struct kv_disk {
    char *dir;
    struct kvfile_shape shape;
    uint64_t file_len; /* every block file's size */
    int32_t cap_files; /* files the cap holds */
    struct entry *e;   /* [cap_files] */
    int32_t *free_e;   /* [cap_files] entry ids given back */
    int32_t n_free_e;
    int32_t head, tail;
    struct u64map index; /* chain hash -> entry id */
    uint8_t *buf;        /* [file_len] a file being written or read */
    bool paused;         /* a write failed: none until retry_at */
    double retry_at;     /* now_s() of the next try while paused */
    struct kv_disk_stats st;
};

static void name_of(const struct kv_disk *d, uint64_t hash, char *out, size_t len)
{
    snprintf(out, len, "%s/%016llx.kvb", d->dir, (unsigned long long)hash);
}

static void lru_unlink(struct kv_disk *d, int32_t i)
{
    struct entry *x = &d->e[i];
    if (x->prev >= 0)
        d->e[x->prev].next = x->next;
    else
        d->head = x->next;
    if (x->next >= 0)
        d->e[x->next].prev = x->prev;
    else
        d->tail = x->prev;
}

static void lru_push(struct kv_disk *d, int32_t i)
{
    d->e[i].prev = d->tail;
    d->e[i].next = -1;
    if (d->tail >= 0)
        d->e[d->tail].next = i;
    else
        d->head = i;
    d->tail = i;
}

/* Forgets entry i; with unlink_file its file goes too. */
static void drop(struct kv_disk *d, int32_t i, bool unlink_file)
{
    char path[4200];
    lru_unlink(d, i);
    u64map_remove(&d->index, d->e[i].hash);
    if (unlink_file) {
        name_of(d, d->e[i].hash, path, sizeof path);
        unlink(path);
    }
    d->free_e[d->n_free_e++] = i;
    d->st.bytes -= d->file_len;
}

/* A new most recently used entry for hash; the least recently used file goes when full. */
static void add(struct kv_disk *d, uint64_t hash)
{
    if (d->n_free_e == 0) {
        drop(d, d->head, true);
        d->st.evicted++;
    }
    const int32_t i = d->free_e[--d->n_free_e];
    d->e[i].hash    = hash;
    lru_push(d, i);
    u64map_put(&d->index, hash, i);
    d->st.bytes += d->file_len;
}

/* "0123456789abcdef.kvb" -> the hash; 0 for any other name. */
static uint64_t hash_of_name(const char *name)
{
    if (strlen(name) != 20 || strcmp(name + 16, ".kvb"))
        return 0;
    uint64_t h = 0;
    for (int i = 0; i < 16; i++) {
        const char c = name[i];
        const int v  = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (v < 0)
            return 0;
        h = h << 4 | (uint64_t)v;
    }
    return h;
}

/* A file found at start, with its modification time: the oldest are used least recently. */
struct found {
    uint64_t hash;
    int64_t mtime_ns;
};

static int by_mtime(const void *a, const void *b)
{
    const struct found *x = a, *y = b;
    return (x->mtime_ns > y->mtime_ns) - (x->mtime_ns < y->mtime_ns);
}

/* Indexes the block files in d->dir whose header and size are this cache's. */
static enum hearth_status scan(struct kv_disk *d, char *err, size_t err_len)
{
    DIR *dir = opendir(d->dir);
    if (!dir)
        return fail(HEARTH_EIO, err, err_len, "cache dir: cannot read %s: %s", d->dir,
                    strerror(errno));
    struct found *f = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    char path[4200], why[HEARTH_ERR_MAX];
    uint64_t n_refused = 0;
    while ((de = readdir(dir))) {
        const uint64_t h = hash_of_name(de->d_name);
        if (!h)
            continue;
        snprintf(path, sizeof path, "%s/%s", d->dir, de->d_name);
        struct stat sb;
        bool refused;
        const int fd = kvfile_open_regular(dirfd(dir), de->d_name, &sb, &refused);
        uint8_t head[KVFILE_HEADER];
        uint64_t n_tok = 0;
        enum hearth_status st =
            refused  ? fail(HEARTH_EFORMAT, why, sizeof why, "refused: not a regular file")
            : fd < 0 ? fail(HEARTH_EIO, why, sizeof why, "cannot read it: %s", strerror(errno))
            : kvfile_read(fd, head, sizeof head) != sizeof head
                ? fail(HEARTH_EFORMAT, why, sizeof why, "cut short (%lld bytes)",
                       (long long)sb.st_size)
                : kvfile_parse_header(head, sizeof head, &d->shape, &n_tok, why, sizeof why);
        if (!st && (n_tok != d->shape.block_tokens || (uint64_t)sb.st_size != d->file_len))
            st = fail(HEARTH_EFORMAT, why, sizeof why,
                      "%llu tokens in %lld bytes where a block is %llu in %llu (cut short?)",
                      (unsigned long long)n_tok, (long long)sb.st_size,
                      (unsigned long long)d->shape.block_tokens, (unsigned long long)d->file_len);
        if (fd >= 0)
            close(fd);
        if (st) {
            /* a directory of hostile names should not flood the log */
            if (!refused || n_refused++ < KVDISK_LOG_REFUSED)
                fprintf(stderr, "hearth: cache dir: skipped %s: %s\n", path, why);
            d->st.skipped++;
            continue;
        }
        if (n == cap) {
            struct found *g = realloc(f, (cap = cap ? 2 * cap : 256) * sizeof *f);
            if (!g) {
                free(f);
                closedir(dir);
                return fail(HEARTH_ENOMEM, err, err_len, "cache dir: out of memory");
            }
            f = g;
        }
        f[n++] = (struct found){h, (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec};
    }
    closedir(dir);
    if (n_refused > KVDISK_LOG_REFUSED)
        fprintf(stderr, "hearth: cache dir: skipped %llu more files that are not regular ones\n",
                (unsigned long long)(n_refused - KVDISK_LOG_REFUSED));
    if (n > 0)
        qsort(f, n, sizeof *f, by_mtime);
    for (size_t i = 0; i < n; i++)
        add(d, f[i].hash); /* past the cap, the oldest files go */
    free(f);
    return HEARTH_OK;
}

enum hearth_status kvdisk_open(const char *dir, uint64_t cap_bytes, const struct kvfile_shape *s,
                               struct kv_disk **out, char *err, size_t err_len)
{
    *out = NULL;
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return fail(HEARTH_EIO, err, err_len, "cache dir: cannot make %s: %s", dir,
                    strerror(errno));
    if (strlen(dir) > 4000)
        return fail(HEARTH_EINVAL, err, err_len, "cache dir: the path is too long");
    struct kv_disk *d = calloc(1, sizeof *d);
    if (!d)
        return fail(HEARTH_ENOMEM, err, err_len, "cache dir: out of memory");
    d->dir               = strdup(dir);
    d->shape             = *s;
    d->file_len          = kvfile_size(s, s->block_tokens);
    const uint64_t files = cap_bytes / d->file_len;
    d->cap_files         = files > (1u << 24) ? 1 << 24 : (int32_t)files;
    d->st.cap_bytes      = (uint64_t)d->cap_files * d->file_len;
    d->head = d->tail = -1;
    d->e              = malloc(((size_t)d->cap_files + 1) * sizeof *d->e);
    d->free_e         = malloc(((size_t)d->cap_files + 1) * sizeof *d->free_e);
    d->buf            = malloc(d->file_len);
    if (!d->dir || !d->e || !d->free_e || !d->buf || !u64map_init(&d->index, d->cap_files)) {
        kvdisk_close(d);
        return fail(HEARTH_ENOMEM, err, err_len, "cache dir: out of memory for %d files",
                    d->cap_files);
    }
    for (int32_t i = 0; i < d->cap_files; i++)
        d->free_e[d->n_free_e++] = d->cap_files - 1 - i;
    enum hearth_status st = d->cap_files > 0 ? scan(d, err, err_len) : HEARTH_OK;
    if (st) {
        kvdisk_close(d);
        return st;
    }
    fprintf(stderr, "hearth: cache dir %s: %d block files of %.1f KiB (%.1f MiB), cap %.1f MiB\n",
            dir, d->cap_files - d->n_free_e, (double)d->file_len / 1024,
            (double)d->st.bytes / (1 << 20), (double)d->st.cap_bytes / (1 << 20));
    *out = d;
    return HEARTH_OK;
}

void kvdisk_close(struct kv_disk *d)
{
    if (!d)
        return;
    free(d->dir);
    free(d->e);
    free(d->free_e);
    free(d->buf);
    u64map_free(&d->index);
    free(d);
}

/* The rows of block b of layer l's K (w 0) or V (w 1), block_tokens of them. */
static uint8_t *block_rows(const struct kv_cache *kv, int32_t l, int w, int32_t b)
{
    return kv_layer_base(kv, l, w) + (size_t)b * kv->block_tokens * kv->row_len[w];
}

/*
 * Writes block as hash's file unless the tier holds it (then it is only the
 * most recently used) or is paused after a failed write; mtime, when given,
 * is the file's (a flush orders its files by it). A failed write is counted
 * and pauses the tier, logged when it starts and when writes work again.
 */
static void write_block(struct kv_disk *d, const struct kv_cache *kv, int32_t block, uint64_t hash,
                        const int32_t *tokens, const struct timespec *mtime)
{
    const int32_t have = u64map_find(&d->index, hash);
    char path[4200], tmp[4250];
    name_of(d, hash, path, sizeof path);
    if (have >= 0) { /* written before: now the most recently used */
        lru_unlink(d, have);
        lru_push(d, have);
        if (mtime)
            utimensat(AT_FDCWD, path, (const struct timespec[2]){*mtime, *mtime},
                      AT_SYMLINK_NOFOLLOW);
        return;
    }
    if (d->paused && now_s() < d->retry_at)
        return;
    const int32_t bt = kv->block_tokens;
    uint8_t *p       = d->buf;
    kvfile_header(p, &d->shape, (uint64_t)bt);
    p += KVFILE_HEADER;
    for (int32_t i = 0; i < bt; i++, p += 4)
        kvfile_put_token(p, tokens[i]);
    for (int32_t l = 0; l < kv->n_layer; l++) {
        if (kv->group[l] == KV_NONE)
            continue;
        for (int w = 0; w < 2; w++) {
            const size_t len = (size_t)bt * kv->row_len[w];
            memcpy(p, block_rows(kv, l, w, block), len);
            p += len;
        }
    }
    const uint64_t sum = kvfile_checksum(d->buf, d->file_len - 8);
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(sum >> (8 * i));
    snprintf(tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid());
    const int fd = kvfile_create(tmp);
    bool ok      = fd >= 0 && kvfile_write(fd, d->buf, d->file_len) &&
              (!mtime || futimens(fd, (const struct timespec[2]){*mtime, *mtime}) == 0);
    int e = errno;
    if (fd >= 0 && close(fd) != 0 && ok) {
        ok = false;
        e  = errno;
    }
    if (ok && rename(tmp, path) != 0) {
        ok = false;
        e  = errno;
    }
    if (!ok) {
        unlink(tmp); /* a full disk costs this block its disk copy, nothing more */
        d->st.write_errors++;
        if (!d->paused)
            fprintf(stderr,
                    "hearth: cache dir %s: cannot write a block: %s; the disk tier writes "
                    "nothing for %.0f s, then tries again\n",
                    d->dir, strerror(e), KVDISK_RETRY_S);
        d->paused   = true;
        d->retry_at = now_s() + KVDISK_RETRY_S;
        return;
    }
    if (d->paused) {
        fprintf(stderr, "hearth: cache dir %s: blocks are written again\n", d->dir);
        d->paused = false;
    }
    add(d, hash);
    d->st.writes++;
}

void kvdisk_evicted(void *arg, const struct kv_cache *kv, int32_t block, uint64_t hash,
                    const int32_t *tokens)
{
    struct kv_disk *d = arg;
    if (d && d->cap_files > 0)
        write_block(d, kv, block, hash, tokens, NULL);
}

bool kvdisk_fetch(void *arg, struct kv_cache *kv, int32_t block, uint64_t hash,
                  const int32_t *tokens)
{
    struct kv_disk *d = arg;
    const int32_t i   = d ? u64map_find(&d->index, hash) : -1;
    if (i < 0)
        return false;
    char path[4200], why[HEARTH_ERR_MAX];
    name_of(d, hash, path, sizeof path);
    struct stat sb;
    bool refused;
    const int fd = kvfile_open_regular(AT_FDCWD, path, &sb, &refused);
    const int e  = errno;
    /* one byte more than a block file: a longer file is refused, not read in part */
    const size_t got = fd >= 0 ? kvfile_read(fd, d->buf, d->file_len) : 0;
    uint8_t extra;
    const bool longer = fd >= 0 && got == d->file_len && kvfile_read(fd, &extra, 1) == 1;
    if (fd >= 0)
        close(fd);
    struct kvfile_view v;
    enum hearth_status st =
        refused  ? fail(HEARTH_EFORMAT, why, sizeof why, "refused: not a regular file")
        : fd < 0 ? fail(HEARTH_EIO, why, sizeof why, "cannot read it: %s", strerror(e))
        : longer ? fail(HEARTH_EFORMAT, why, sizeof why, "longer than a block file")
                 : kvfile_parse(d->buf, got, &d->shape, d->shape.block_tokens, &v, why, sizeof why);
    const int32_t bt = kv->block_tokens;
    if (!st && v.n_tokens != (uint64_t)bt)
        st = fail(HEARTH_EFORMAT, why, sizeof why, "holds %llu tokens, not a block's %d",
                  (unsigned long long)v.n_tokens, bt);
    for (int32_t t = 0; !st && t < bt; t++)
        if (kvfile_get_token(v.tokens + 4 * t) != (uint32_t)tokens[t])
            st = fail(HEARTH_EFORMAT, why, sizeof why, "its tokens are another block's");
    if (st) {
        fprintf(stderr, "hearth: cache dir: dropped %s: %s\n", path, why);
        d->st.skipped++;
        drop(d, i, !refused); /* what the tier did not write, it does not delete */
        return false;
    }
    const uint8_t *r = v.rows;
    for (int32_t l = 0; l < kv->n_layer; l++) {
        if (kv->group[l] == KV_NONE)
            continue;
        for (int w = 0; w < 2; w++) {
            const size_t len = (size_t)bt * kv->row_len[w];
            memcpy(block_rows(kv, l, w, block), r, len);
            r += len;
        }
    }
    lru_unlink(d, i);
    lru_push(d, i);
    d->st.reads++;
    return true;
}

void kvdisk_flush(struct kv_disk *d, const struct kv_cache *kv, double seconds)
{
    const struct kv_pool *p = &kv->pool[0];
    if (!d || d->cap_files == 0 || !p->n_layer)
        return;
    /* the cap's worth of the most recently used */
    int32_t b = p->lru_tail, n = b >= 0;
    for (; n < d->cap_files && b >= 0 && p->lru_prev[b] >= 0; n++)
        b = p->lru_prev[b];
    if (n == 0)
        return;
    const uint64_t before = d->st.writes;
    const double t0 = now_s(), deadline = t0 + seconds;
    /* a large memory tier takes a while to write: say so before, not after */
    fprintf(stderr, "hearth: cache dir %s: writing up to %d cached blocks (%.1f MiB)\n", d->dir, n,
            (double)n * (double)d->file_len / (1 << 20));
    /*
     * Newest first, so a deadline cuts the least recently used; each file's
     * mtime a microsecond older than the one before, so the next start (which
     * orders files by mtime) sees the memory tier's order all the same.
     */
    struct timespec mt;
    clock_gettime(CLOCK_REALTIME, &mt);
    int32_t left = n;
    for (b = p->lru_tail; b >= 0 && left > 0; b = p->lru_prev[b], left--) {
        if (now_s() >= deadline)
            break;
        if (!kv_block_whole(p, b))
            continue;
        const struct timespec t = mt;
        write_block(d, kv, b, p->hash[b], p->tokens + (size_t)b * kv->block_tokens, &t);
        mt.tv_nsec -= 1000;
        if (mt.tv_nsec < 0)
            mt.tv_nsec += 1000000000, mt.tv_sec--;
    }
    if (left > 0)
        fprintf(stderr,
                "hearth: cache dir %s: stopped at the %.1f s deadline with %d blocks unwritten\n",
                d->dir, seconds, left);
    fprintf(stderr,
            "hearth: cache dir %s: %llu of them written in %.2f s (the rest were there%s)\n",
            d->dir, (unsigned long long)(d->st.writes - before), now_s() - t0,
            d->paused ? " or could not be written" : "");
}

void kvdisk_stats(const struct kv_disk *d, struct kv_disk_stats *out)
{
    *out = d ? d->st : (struct kv_disk_stats){0};
}
