/*
 * hub.c: hub_pull. The file list and the files come over libcurl; each file
 * is written to PATH.part-<sha> beside its place, hashed as it arrives, and
 * renamed into place only when its SHA-256 is the one the Hub lists. A cut
 * keeps the partial file: the next attempt (at once while bytes keep
 * coming, or the next run) asks for the rest with a range that starts 64 KiB
 * before its end, and keeps it only if those bytes are what the server has.
 */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "hub/hub.h"
#include "hub/hub_int.h"
#include "hub/libs.h"
#include "util/clock.h"
#include "util/errfmt.h"
#include "util/strbuf.h"

#define MAX_PARTS   256
#define LISTING_MAX (64u << 20)
#define OVERLAP     (64u << 10)
#define ATTEMPTS    10

bool hub_opts_env(struct hub_opts *o, char *err, size_t err_len)
{
    const char *ep = getenv("HF_ENDPOINT"), *tok = getenv("HF_TOKEN");
    const char *off = getenv("HF_HUB_OFFLINE"), *cache = getenv("HEARTH_CACHE");
    int n =
        snprintf(o->endpoint, sizeof o->endpoint, "%s", ep && *ep ? ep : "https://huggingface.co");
    if (n < 0 || (size_t)n >= sizeof o->endpoint)
        return set_err(err, err_len, "HF_ENDPOINT is too long"), false;
    while (n > 0 && o->endpoint[n - 1] == '/')
        o->endpoint[--n] = 0;
    o->token    = tok && *tok ? tok : NULL;
    o->offline  = off && (!strcmp(off, "1") || !strcasecmp(off, "true"));
    o->progress = stderr;
    if (cache && *cache) {
        n = snprintf(o->cache, sizeof o->cache, "%s", cache);
    } else {
        const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
        if (xdg && *xdg)
            n = snprintf(o->cache, sizeof o->cache, "%s/hearth/models", xdg);
        else if (home && *home)
            n = snprintf(o->cache, sizeof o->cache, "%s/.cache/hearth/models", home);
        else
            return set_err(err, err_len, "no cache directory: set HEARTH_CACHE (or HOME)"), false;
    }
    if (n < 0 || (size_t)n >= sizeof o->cache)
        return set_err(err, err_len, "the cache directory's path is too long"), false;
    return true;
}

/* ----------------------------------------------------------------- disk --- */

/* mkdir -p of path's directory part (everything before the last '/'). */
static int mkdirs_for(const char *path)
{
    char d[4096];
    snprintf(d, sizeof d, "%s", path);
    char *end = strrchr(d, '/');
    if (!end)
        return 0;
    *end = 0;
    for (char *p = d + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(d, 0755) && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return mkdir(d, 0755) && errno != EEXIST ? -1 : 0;
}

static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t n = 0, cap = 0, got;
    do {
        if (cap - n < 65536) {
            char *grow = cap < LISTING_MAX ? realloc(buf, cap + 65536 + 1) : NULL;
            if (!grow) {
                free(buf), fclose(f);
                return NULL;
            }
            buf = grow, cap += 65536;
        }
        got = fread(buf + n, 1, cap - n, f);
        n += got;
    } while (got);
    fclose(f);
    buf[n] = 0;
    *len   = n;
    return buf;
}

/* Writes len bytes to path through a temporary and a rename, so a reader sees all or none. */
static int write_atomic(const char *path, const char *data, size_t len)
{
    char tmp[8500];
    snprintf(tmp, sizeof tmp, "%s.tmp-%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return -1;
    const bool ok = fwrite(data, 1, len, f) == len && !fflush(f) && !fsync(fileno(f));
    if (fclose(f) || !ok || rename(tmp, path)) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* --------------------------------------------------------------- progress --- */

struct progress {
    FILE *fp;
    bool tty;
    const char *name;
    uint64_t size, base; /* the file's bytes, and those there before this run */
    double t0, shown_at;
    int shown_tenth; /* the last tenth a line was printed for (not a terminal) */
};

static void human(double b, char *out, size_t n)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u                           = 0;
    while (b >= 1024 && u < 4)
        b /= 1024, u++;
    snprintf(out, n, u ? "%.1f %s" : "%.0f %s", b, unit[u]);
}

static void progress_show(struct progress *p, uint64_t done, bool last)
{
    if (!p->fp)
        return;
    const double t = now_s(), dt = t - p->t0;
    const int tenth = p->size ? (int)(done * 10 / p->size) : 10;
    if (!last && (p->tty ? t - p->shown_at < 0.1 : tenth <= p->shown_tenth || tenth == 10))
        return;
    p->shown_at = t, p->shown_tenth = tenth;
    const double rate = dt > 0 ? (double)(done - p->base) / dt : 0;
    char d[32], s[32], r[32], left[32] = "";
    human((double)done, d, sizeof d), human((double)p->size, s, sizeof s);
    human(rate, r, sizeof r);
    if (!last && rate > 0 && dt >= 1) { /* the first second's rate says little */
        const long eta = (long)((double)(p->size - done) / rate);
        snprintf(left, sizeof left, "  %ld:%02ld left", eta / 60, eta % 60);
    } else if (last) {
        snprintf(left, sizeof left, "  in %.1f s", dt);
    }
    const int pct = p->size ? (int)(done * 100 / p->size) : 100;
    if (p->tty) {
        char bar[21];
        for (int i = 0; i < 20; i++)
            bar[i] = i < pct / 5 ? '#' : '.';
        bar[20] = 0;
        fprintf(p->fp, "\r%s [%s] %3d%%  %s / %s  %s/s%s\033[K%s", p->name, bar, pct, d, s, r, left,
                last ? "\n" : "");
    } else {
        fprintf(p->fp, "%s: %3d%%  %s / %s  %s/s%s\n", p->name, pct, d, s, r, left);
    }
    fflush(p->fp);
}

/* ------------------------------------------------------------------ HTTP --- */

struct reply {
    long status;
    char error_code[64]; /* X-Error-Code: the Hub's reason (RepoNotFound, GatedRepo, ...) */
    char error_msg[256]; /* X-Error-Message */
    char next[2048];     /* Link: <URL>; rel="next" (the file list's next page) */
    int64_t range_first; /* Content-Range's first byte; -1 when absent */
    char body[512];      /* an error reply's body (its start) */
    size_t body_n;
};

static void header_value(const char *line, size_t n, char *out, size_t out_len)
{
    const char *v = memchr(line, ':', n);
    if (!v)
        return;
    v++;
    size_t len = n - (size_t)(v - line);
    while (len && (*v == ' ' || *v == '\t'))
        v++, len--;
    while (len && (v[len - 1] == '\r' || v[len - 1] == '\n' || v[len - 1] == ' '))
        len--;
    snprintf(out, out_len, "%.*s", (int)len, v);
}

static size_t on_header(char *line, size_t size, size_t nitems, void *ud)
{
    struct reply *r = ud;
    const size_t n  = size * nitems;
    if (n >= 5 &&
        !strncmp(line, "HTTP/", 5)) { /* a new reply (after a redirect): forget the last */
        r->error_code[0] = r->error_msg[0] = r->next[0] = 0;
        r->range_first                                  = -1;
    } else if (n > 13 && !strncasecmp(line, "X-Error-Code:", 13)) {
        header_value(line, n, r->error_code, sizeof r->error_code);
    } else if (n > 16 && !strncasecmp(line, "X-Error-Message:", 16)) {
        header_value(line, n, r->error_msg, sizeof r->error_msg);
    } else if (n > 14 && !strncasecmp(line, "Content-Range:", 14)) {
        char v[128];
        header_value(line, n, v, sizeof v);
        unsigned long long first;
        if (sscanf(v, "bytes %llu-", &first) == 1)
            r->range_first = (int64_t)first;
    } else if (n > 5 && !strncasecmp(line, "Link:", 5)) {
        char v[4096];
        header_value(line, n, v, sizeof v);
        /* <URL>; rel="next" among others, comma-separated */
        for (char *p = v; (p = strchr(p, '<'));) {
            char *q = strchr(p, '>');
            if (!q)
                break;
            const char *rel = strstr(q, "rel=\"next\""), *comma = strchr(q, ',');
            if (rel && (!comma || rel < comma)) {
                snprintf(r->next, sizeof r->next, "%.*s", (int)(q - p - 1), p + 1);
                break;
            }
            p = q;
        }
    }
    return n;
}

static void keep_error_body(struct reply *r, const char *p, size_t n)
{
    const size_t room = sizeof r->body - 1 - r->body_n;
    const size_t take = n < room ? n : room;
    memcpy(r->body + r->body_n, p, take);
    r->body_n += take;
    r->body[r->body_n] = 0;
}

struct hub {
    const struct hub_libs *L;
    const struct hub_opts *o;
    const char *repo;
    CURL *curl;
    struct curl_slist *headers;
};

static enum hearth_status hub_open(struct hub *h, const struct hub_opts *o, const char *repo,
                                   char *err, size_t err_len)
{
    memset(h, 0, sizeof *h);
    h->o = o, h->repo = repo;
    const struct hub_libs *L = h->L = hub_libs(err, err_len);
    if (!L)
        return HEARTH_EIO;
    if (L->global_init(CURL_GLOBAL_DEFAULT) || !(h->curl = L->easy_init()))
        return fail(HEARTH_EIO, err, err_len, "libcurl did not start");
    char auth[8500];
    h->headers = L->slist_append(NULL, "User-Agent: hearth");
    if (o->token) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", o->token);
        h->headers = L->slist_append(h->headers, auth);
    }
    return HEARTH_OK;
}

static void hub_close(struct hub *h)
{
    const struct hub_libs *L = h->L;
    L->slist_free_all(h->headers);
    if (h->curl)
        L->easy_cleanup(h->curl);
    L->global_cleanup();
}

/* One request's options: redirects followed over http(s) only (curl drops the token when one
 * leaves the host); a transfer that stalls a minute fails rather than hangs. */
static void request(struct hub *h, const char *url, struct reply *r)
{
    const struct hub_libs *L = h->L;
    CURL *c                  = h->curl;
    L->easy_reset(c);
    memset(r, 0, sizeof *r);
    r->range_first = -1;
    L->easy_setopt(c, CURLOPT_URL, url);
    L->easy_setopt(c, CURLOPT_HTTPHEADER, h->headers);
    L->easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    L->easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
    L->easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    L->easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    L->easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
    L->easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    L->easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
    L->easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    L->easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    L->easy_setopt(c, CURLOPT_HEADERDATA, r);
}

/* The sentence for a refusal of the Hub's (status >= 400) for what (a repository or file). */
static enum hearth_status refused(const struct hub *h, const struct reply *r, const char *what,
                                  char *err, size_t err_len)
{
    const char *code = r->error_code;
    const char *msg  = r->error_msg[0] ? r->error_msg : r->body;
    if (!strcmp(code, "GatedRepo") || ((r->status == 401 || r->status == 403) && !code[0]))
        return fail(HEARTH_EIO, err, err_len,
                    h->o->token ? "%s: HF_TOKEN gives no access to %s (HTTP %ld); accept its terms "
                                  "on its page at %s/%s"
                                : "%s: %s is gated or private (HTTP %ld); set HF_TOKEN to a token "
                                  "with access to %s/%s",
                    what, h->repo, r->status, h->o->endpoint, h->repo);
    if (!strcmp(code, "RepoNotFound") || (r->status == 404 && !code[0] && what == h->repo))
        return fail(HEARTH_EIO, err, err_len, "%s: no such repository at %s (HTTP %ld)%s", h->repo,
                    h->o->endpoint, r->status,
                    h->o->token ? "" : "; if it is private, set HF_TOKEN");
    if (!strcmp(code, "EntryNotFound") || r->status == 404)
        return fail(HEARTH_EIO, err, err_len, "%s: no such file in %s (HTTP %ld)", what, h->repo,
                    r->status);
    return fail(HEARTH_EIO, err, err_len, "%s: %s answered HTTP %ld%s%.200s", what, h->o->endpoint,
                r->status, msg[0] ? ": " : "", msg);
}

static enum hearth_status unreachable(const struct hub *h, CURLcode rc, char *err, size_t err_len)
{
    const struct hub_libs *L = h->L;
    return fail(HEARTH_EIO, err, err_len,
                "cannot reach %s: %s; check the network, or run with --offline on a model already "
                "in the cache",
                h->o->endpoint, L->easy_strerror(rc));
}

struct buf {
    struct strbuf text;
    bool too_big;
};

static size_t on_listing(char *p, size_t size, size_t nitems, void *ud)
{
    struct buf *b  = ud;
    const size_t n = size * nitems;
    if (b->text.len + n > LISTING_MAX) {
        b->too_big = true;
        return 0;
    }
    strbuf_addn(&b->text, p, n);
    return b->text.oom ? 0 : n;
}

/* GET every page of the repository's file list into l. */
static enum hearth_status fetch_listing(struct hub *h, struct hub_listing *l, char *err,
                                        size_t err_len)
{
    const struct hub_libs *L = h->L;
    char url[2200];
    snprintf(url, sizeof url, "%s/api/models/%s/tree/main?recursive=true", h->o->endpoint, h->repo);
    for (int page = 0; page < 1000; page++) {
        struct reply r;
        struct buf b = {0};
        request(h, url, &r);
        L->easy_setopt(h->curl, CURLOPT_WRITEFUNCTION, on_listing);
        L->easy_setopt(h->curl, CURLOPT_WRITEDATA, &b);
        const CURLcode rc = L->easy_perform(h->curl);
        L->easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, &r.status);
        if (rc != CURLE_OK) {
            strbuf_free(&b.text);
            if (b.too_big)
                return fail(HEARTH_EIO, err, err_len, "%s: the file list passes 64 MiB", h->repo);
            return unreachable(h, rc, err, err_len);
        }
        const char *text = b.text.s ? b.text.s : "";
        if (r.status >= 400) {
            keep_error_body(&r, text, b.text.len);
            strbuf_free(&b.text);
            return refused(h, &r, h->repo, err, err_len);
        }
        enum hearth_status st =
            r.status == 200 ? hub_listing_parse(l, text, b.text.len, err, err_len)
                            : fail(HEARTH_EIO, err, err_len, "%s: the file list came with HTTP %ld",
                                   h->repo, r.status);
        strbuf_free(&b.text);
        if (st)
            return st;
        if (!r.next[0])
            return HEARTH_OK;
        /* the token goes with every request: a next page elsewhere would take it there */
        const size_t ep = strlen(h->o->endpoint);
        if (strncmp(r.next, h->o->endpoint, ep) || r.next[ep] != '/')
            return fail(HEARTH_EIO, err, err_len,
                        "%s: the file list's next page is not on %s: '%.200s'", h->repo,
                        h->o->endpoint, r.next);
        snprintf(url, sizeof url, "%s", r.next);
    }
    return fail(HEARTH_EIO, err, err_len, "%s: the file list runs past 1000 pages", h->repo);
}

/* -------------------------------------------------------------- download --- */

struct xfer {
    const struct hub_libs *L;
    struct reply *r;
    CURL *curl;
    int fd;
    uint64_t start, have, pos, size; /* range start, bytes on disk, next byte, the file's size */
    const uint8_t *tail;             /* the disk's bytes [start, have), checked, not rewritten */
    struct sha256 *sha;              /* the file's hash so far (download() owns it) */
    struct progress *prog;
    bool checked, differs, wrong_range, overrun;
    int write_errno;
};

static size_t on_file(char *p, size_t size, size_t nitems, void *ud)
{
    struct xfer *x           = ud;
    const struct hub_libs *L = x->L;
    const size_t n           = size * nitems;
    if (!x->checked) {
        x->checked = true;
        L->easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &x->r->status);
        if (x->r->status == 200 && x->start) { /* the range was ignored: it all comes again */
            x->start = x->have = x->pos = 0;
            if (!sha256_init(x->sha, L) || ftruncate(x->fd, 0)) {
                x->write_errno = errno ? errno : ENOMEM;
                return 0;
            }
        } else if (x->r->status == 206 && x->r->range_first != (int64_t)x->start) {
            x->wrong_range = true;
            return 0;
        }
    }
    if (x->r->status >= 400) {
        keep_error_body(x->r, p, n);
        return n;
    }
    if (x->r->status != 200 && x->r->status != 206)
        return 0;
    if (x->pos + n > x->size) {
        x->overrun = true;
        return 0;
    }
    size_t i = 0;
    if (x->pos < x->have) { /* the overlap: the server's bytes must be the disk's */
        const size_t k = x->have - x->pos < n ? (size_t)(x->have - x->pos) : n;
        if (memcmp(p, x->tail + (x->pos - x->start), k)) {
            x->differs = true;
            return 0;
        }
        sha256_update(x->sha, p, k);
        x->pos += k, i = k;
    }
    while (i < n) {
        const ssize_t w = pwrite(x->fd, p + i, n - i, (off_t)x->pos);
        if (w <= 0) {
            x->write_errno = w < 0 ? errno : EIO;
            return 0;
        }
        sha256_update(x->sha, p + i, (size_t)w);
        x->pos += (uint64_t)w, i += (size_t)w;
    }
    progress_show(x->prog, x->pos, false);
    return n;
}

/* Hashes the file's first n bytes into s; -1 on a read error. */
static int hash_prefix(int fd, uint64_t n, struct sha256 *s)
{
    static uint8_t buf[1 << 16];
    for (uint64_t off = 0; off < n;) {
        const size_t want = n - off < sizeof buf ? (size_t)(n - off) : sizeof buf;
        const ssize_t got = pread(fd, buf, want, (off_t)off);
        if (got <= 0)
            return -1;
        sha256_update(s, buf, (size_t)got);
        off += (uint64_t)got;
    }
    return 0;
}

/* Removes dest's partial files of other contents (an older version of the file). */
static void drop_stale_parts(const char *dest, const char *keep)
{
    char pat[8500];
    snprintf(pat, sizeof pat, "%s.part-*", dest);
    glob_t g;
    if (glob(pat, GLOB_NOSORT | GLOB_NOESCAPE, NULL, &g))
        return;
    for (size_t i = 0; i < g.gl_pathc; i++)
        if (strcmp(g.gl_pathv[i], keep))
            unlink(g.gl_pathv[i]);
    globfree(&g);
}

/* What an attempt's failure leaves for the next. */
enum after { KEEP, RESTART, DISCARD };

/*
 * One attempt at the rest of f into the partial file fd (at part): *progressed when it got
 * bytes; *then KEEP (resume from it), RESTART (emptied: its end was not the server's) or
 * DISCARD (nothing in it can be kept).
 */
static enum hearth_status attempt(struct hub *h, const struct hub_file *f, int fd, const char *part,
                                  struct sha256 *sha, struct progress *prog, bool *progressed,
                                  enum after *then, char *err, size_t err_len)
{
    *progressed = false;
    *then       = KEEP;
    struct stat st;
    uint64_t have = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
    if (have > f->size) {
        if (ftruncate(fd, 0))
            return fail(HEARTH_EIO, err, err_len, "cannot write %s: %s", part, strerror(errno));
        have = 0;
    }
    const struct hub_libs *L = h->L;
    struct xfer x            = {
                   .L = L, .curl = h->curl, .fd = fd, .have = have, .size = f->size, .prog = prog, .sha = sha};
    x.start = have > OVERLAP ? have - OVERLAP : 0;
    x.pos   = x.start;
    if (!sha256_init(sha, L))
        return fail(HEARTH_ENOMEM, err, err_len, "out of memory starting a SHA-256");
    uint8_t *tail = NULL;
    if (have) {
        tail = malloc(have - x.start);
        if (!tail || hash_prefix(fd, x.start, x.sha) ||
            pread(fd, tail, have - x.start, (off_t)x.start) != (ssize_t)(have - x.start)) {
            free(tail);
            return fail(HEARTH_EIO, err, err_len, "cannot read %s", part);
        }
        x.tail = tail;
    }
    /* the space the rest needs, asked before the first byte rather than found out at the last */
    char dir[8500];
    snprintf(dir, sizeof dir, "%s", part);
    *strrchr(dir, '/') = 0;
    struct statvfs vfs;
    if (!statvfs(dir, &vfs) && (uint64_t)vfs.f_bavail * vfs.f_frsize < f->size - have) {
        char need[32], free_[32];
        human((double)(f->size - have), need, sizeof need);
        human((double)vfs.f_bavail * (double)vfs.f_frsize, free_, sizeof free_);
        free(tail);
        return fail(HEARTH_EIO, err, err_len,
                    "%s: not enough disk space in %s: it needs %s more, %s is free", f->path, dir,
                    need, free_);
    }

    char url[8192], *esc = L->easy_escape(h->curl, f->path, 0);
    /* the path's '/' stay separators */
    for (char *s = esc; esc && (s = strstr(s, "%2F"));)
        *s = '/', memmove(s + 1, s + 3, strlen(s + 3) + 1);
    snprintf(url, sizeof url, "%s/%s/resolve/main/%s", h->o->endpoint, h->repo, esc ? esc : "");
    L->free(esc);
    struct reply r;
    request(h, url, &r);
    x.r = &r;
    char range[48];
    if (x.start) {
        snprintf(range, sizeof range, "%llu-", (unsigned long long)x.start);
        L->easy_setopt(h->curl, CURLOPT_RANGE, range);
    }
    L->easy_setopt(h->curl, CURLOPT_WRITEFUNCTION, on_file);
    L->easy_setopt(h->curl, CURLOPT_WRITEDATA, &x);
    const CURLcode rc = L->easy_perform(h->curl);
    L->easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, &r.status);
    free(tail);
    *progressed = x.pos > have;

    enum hearth_status ret = HEARTH_OK;
    if (x.write_errno) {
        ret   = fail(HEARTH_EIO, err, err_len, "%s: cannot write %s: %s", f->path, part,
                   x.write_errno == ENOSPC ? "the disk is full" : strerror(x.write_errno));
        *then = DISCARD; /* a full disk wants its space back more than a partial file */
    } else if (x.differs) {
        /* the partial file's end is not what the server has: start it again, once */
        *then = ftruncate(fd, 0) ? DISCARD : RESTART;
        ret = fail(HEARTH_EIO, err, err_len, "%s: the partial download differs from the Hub's file",
                   f->path);
    } else if (r.status >= 400) {
        ret = refused(h, &r, f->path, err, err_len);
    } else if (x.wrong_range || x.overrun) {
        *then = DISCARD;
        ret   = fail(HEARTH_EIO, err, err_len, "%s: the server sent %s", f->path,
                   x.overrun ? "more bytes than the Hub lists" : "a range hearth did not ask for");
    } else if (rc != CURLE_OK || x.pos < f->size) {
        char at[32], of[32];
        human((double)x.pos, at, sizeof at), human((double)f->size, of, sizeof of);
        ret = rc != CURLE_OK && !x.checked && !*progressed
                  ? unreachable(h, rc, err, err_len)
                  : fail(HEARTH_EIO, err, err_len,
                         "%s: the download was cut at %s of %s (%s); run the same command again to "
                         "resume it",
                         f->path, at, of, rc != CURLE_OK ? L->easy_strerror(rc) : "short reply");
    } else {
        char got[65];
        sha256_hex(x.sha, got);
        if (strcmp(got, f->sha256)) {
            /* a whole-file hash cannot say which bytes are wrong: none can be kept */
            *then = DISCARD;
            ret   = fail(HEARTH_EIO, err, err_len,
                         "%s: checksum mismatch: the Hub publishes SHA-256 %.12s..., the download "
                           "hashes to %.12s...; it was discarded",
                         f->path, f->sha256, got);
        } else if (fsync(fd)) {
            ret = fail(HEARTH_EIO, err, err_len, "cannot write %s: %s", part, strerror(errno));
        }
    }
    return ret;
}

/*
 * The partial file at part, open and locked (flock) for this process: a second hearth pulling
 * the same file waits, saying so, then finds it in place (*in_place) or the partial file as
 * the first left it. -1 with errno on failure.
 */
static int lock_part(const char *part, const char *dest, uint64_t size, FILE *say, const char *name,
                     bool *in_place)
{
    *in_place = false;
    for (int tries = 0; tries < 100; tries++) {
        const int fd = open(part, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0)
            return -1;
        if (flock(fd, LOCK_EX | LOCK_NB)) {
            if (say)
                fprintf(say, "%s: waiting for another hearth downloading it\n", name);
            if (flock(fd, LOCK_EX)) {
                close(fd);
                return -1;
            }
        }
        /* while this waited, the other may have moved the file into place or removed it */
        struct stat held, named, done_;
        if (!fstat(fd, &held) && !stat(part, &named) && held.st_ino == named.st_ino &&
            held.st_dev == named.st_dev)
            return fd;
        close(fd);
        if (!stat(dest, &done_) && S_ISREG(done_.st_mode) && (uint64_t)done_.st_size == size) {
            *in_place = true;
            return -1;
        }
    }
    errno = EBUSY;
    return -1;
}

static enum hearth_status download(struct hub *h, const struct hub_file *f, const char *dest,
                                   char *err, size_t err_len)
{
    if (!f->sha256[0])
        return fail(HEARTH_EIO, err, err_len,
                    "%s: the Hub publishes no SHA-256 for it (not an LFS file); hearth downloads "
                    "only what it can check",
                    f->path);
    if (mkdirs_for(dest))
        return fail(HEARTH_EIO, err, err_len, "cannot create the directory of %s: %s", dest,
                    strerror(errno));
    char part[8500];
    snprintf(part, sizeof part, "%s.part-%.16s", dest, f->sha256);
    const char *base     = strrchr(f->path, '/');
    struct progress prog = {.fp          = h->o->progress,
                            .tty         = h->o->progress && isatty(fileno(h->o->progress)),
                            .name        = base ? base + 1 : f->path,
                            .size        = f->size,
                            .shown_tenth = -1};
    bool in_place;
    const int fd = lock_part(part, dest, f->size, prog.fp, prog.name, &in_place);
    if (fd < 0)
        return in_place
                   ? HEARTH_OK
                   : fail(HEARTH_EIO, err, err_len, "cannot write %s: %s", part, strerror(errno));
    drop_stale_parts(dest, part);
    struct stat s;
    prog.base             = !fstat(fd, &s) && S_ISREG(s.st_mode) ? (uint64_t)s.st_size : 0;
    prog.t0               = now_s();
    struct sha256 sha     = {0};
    enum hearth_status st = HEARTH_EIO;
    enum after then       = KEEP;
    bool restarted        = false;
    for (int i = 0; i < ATTEMPTS; i++) {
        bool progressed;
        st = attempt(h, f, fd, part, &sha, &prog, &progressed, &then, err, err_len);
        if (st == HEARTH_OK || then == DISCARD)
            break;
        if (then == RESTART && !restarted) {
            restarted = true;
            continue;
        }
        /* a cut mid-transfer is tried again at once while each try gets further */
        if (!progressed || then == RESTART)
            break;
    }
    if (st == HEARTH_OK) {
        progress_show(&prog, f->size, true);
        if (rename(part, dest))
            st = fail(HEARTH_EIO, err, err_len, "cannot move %s into place: %s", part,
                      strerror(errno));
    } else if (then == DISCARD || (!fstat(fd, &s) && S_ISREG(s.st_mode) && !s.st_size)) {
        unlink(part); /* kept only if it holds something to resume from */
    }
    if (st != HEARTH_OK && prog.fp && prog.tty)
        fputc('\n', prog.fp);
    sha256_free(&sha);
    close(fd); /* the lock goes with it, after the rename */
    return st;
}

/* ----------------------------------------------------------------- pull --- */

/* Whether f is in place under dir, at the size listed. */
static bool in_place(const char *dir, const struct hub_file *f)
{
    char p[8400];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", dir, f->path);
    return !stat(p, &st) && S_ISREG(st.st_mode) && (uint64_t)st.st_size == f->size;
}

static bool cached(const char *dir, const struct hub_listing *l, const int *idx, int n)
{
    for (int i = 0; i < n; i++)
        if (!in_place(dir, &l->files[idx[i]]))
            return false;
    return true;
}

/* path's entry in l, or NULL. */
static const struct hub_file *find_file(const struct hub_listing *l, const char *path)
{
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->files[i].path, path))
            return &l->files[i];
    return NULL;
}

/*
 * The file list the cache keeps: the Hub's new one, except that a file in place this run did
 * not download keeps the hash (and size) it was checked against, so the cache never vouches
 * for a file with a hash it did not have, and the next --refresh still finds it stale.
 */
static void keep_checked(struct hub_listing *l, const struct hub_listing *old, const char *dir,
                         const int *fetched, int n_fetched)
{
    for (int i = 0; i < l->n; i++) {
        struct hub_file *f         = &l->files[i];
        const struct hub_file *was = find_file(old, f->path);
        bool now                   = false;
        for (int k = 0; k < n_fetched && !now; k++)
            now = fetched[k] == i;
        if (was && !now && strcmp(was->sha256, f->sha256) && in_place(dir, was)) {
            f->size = was->size;
            memcpy(f->sha256, was->sha256, sizeof f->sha256);
        }
    }
}

static enum hearth_status done(struct hub_result *r, const char *dir, const struct hub_listing *l,
                               const int *idx, int n, char *err, size_t err_len)
{
    if (snprintf(r->path, sizeof r->path, "%s/%s", dir, l->files[idx[0]].path) >=
        (int)sizeof r->path)
        return fail(HEARTH_EINVAL, err, err_len, "the model's path in the cache is too long");
    r->n_parts = n;
    return HEARTH_OK;
}

enum hearth_status hub_pull(const char *spec, const struct hub_opts *o, struct hub_result *r,
                            char *err, size_t err_len)
{
    memset(r, 0, sizeof *r);
    struct hub_spec sp;
    enum hearth_status st = hub_spec_parse(spec, &sp, err, err_len);
    if (st)
        return st;
    char dir[4400], manifest[4500];
    snprintf(dir, sizeof dir, "%s/%s", o->cache, sp.repo);
    snprintf(manifest, sizeof manifest, "%s/.hearth-files.json", dir);
    int idx[MAX_PARTS], n = 0;
    struct hub_listing l     = {0};
    char why[HEARTH_ERR_MAX] = "";

    /* the cache first: a model there is used without asking the network */
    size_t len;
    struct hub_listing old = {0};
    char *json             = read_all(manifest, &len);
    if (json && hub_listing_parse(&old, json, len, NULL, 0))
        hub_listing_free(&old);
    free(json);
    if (!o->refresh && old.n && !hub_select(&old, &sp, idx, MAX_PARTS, &n, why, sizeof why) &&
        cached(dir, &old, idx, n)) {
        st = done(r, dir, &old, idx, n, err, err_len);
        hub_listing_free(&old);
        return st;
    }
    if (o->offline) {
        hub_listing_free(&old);
        return fail(HEARTH_EIO, err, err_len,
                    "%s is not in the cache (%s)%s%s; --offline forbids downloading it", spec, dir,
                    why[0] ? ": " : "", why);
    }

    struct hub h;
    if ((st = hub_open(&h, o, sp.repo, err, err_len))) {
        hub_listing_free(&old);
        return st;
    }
    if (!(st = fetch_listing(&h, &l, err, err_len)) &&
        !(st = hub_select(&l, &sp, idx, MAX_PARTS, &n, err, err_len))) {
        int fetched[MAX_PARTS], n_fetched = 0;
        for (int i = 0; !st && i < n; i++) {
            const struct hub_file *f = &l.files[idx[i]], *was = find_file(&old, f->path);
            if (was && !strcmp(was->sha256, f->sha256) && in_place(dir, f))
                continue;
            char dest[8400];
            snprintf(dest, sizeof dest, "%s/%s", dir, f->path);
            if (!(st = download(&h, f, dest, err, err_len)))
                fetched[n_fetched++] = idx[i];
        }
        r->fetched = n_fetched > 0;
        /* written whatever the downloads did: it names what is in place, and what is not */
        keep_checked(&l, &old, dir, fetched, n_fetched);
        char *js = hub_listing_json(&l);
        if ((!js || mkdirs_for(manifest) || write_atomic(manifest, js, strlen(js))) && !st)
            st = fail(HEARTH_EIO, err, err_len, "cannot write %s: %s", manifest,
                      js ? strerror(errno) : "out of memory");
        free(js);
        if (!st)
            st = done(r, dir, &l, idx, n, err, err_len);
    }
    hub_listing_free(&l);
    hub_listing_free(&old);
    hub_close(&h);
    return st;
}
