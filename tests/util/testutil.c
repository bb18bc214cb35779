/* testutil.c: see testutil.h. */
#include "util/testutil.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/clock.h"

static char *next_buf(void)
{
    static char bufs[8][PATH_MAX];
    static int next;
    return bufs[next++ & 7];
}

const char *tu_shared(const char *rel)
{
    char *buf        = next_buf();
    const char *root = getenv("HEARTH_SHARED");
    if (root && *root)
        snprintf(buf, PATH_MAX, "%s/%s", root, rel);
    else
        snprintf(buf, PATH_MAX, "%s/../shared/%s", HEARTH_TOP, rel);
    return access(buf, R_OK) == 0 ? buf : NULL;
}

const char *tu_model(const char *name)
{
    char *buf = next_buf();
    snprintf(buf, PATH_MAX, "%s/models/%s", HEARTH_TOP, name);
    if (access(buf, R_OK) == 0)
        return buf;
    snprintf(buf, PATH_MAX, "models/%s", name);
    return tu_shared(buf); /* it writes the next buffer, so buf stays intact */
}

const char *tu_bin(void)
{
    const char *b = getenv("HEARTH_BIN");
    return b && *b ? b : HEARTH_BIN;
}

struct sink {
    char *buf;
    size_t len, cap;
};

static void sink_add(struct sink *s, const char *p, size_t n)
{
    if (s->len + n + 1 > s->cap) {
        s->cap = (s->len + n + 1) * 2;
        s->buf = realloc(s->buf, s->cap);
    }
    memcpy(s->buf + s->len, p, n);
    s->len += n;
    s->buf[s->len] = 0;
}

int tu_run(const char *const argv[], const char *stdin_text, char **out, char **errout,
           int timeout_s)
{
    int pin[2], pout[2], perr[2];
    if (pipe(pin) || pipe(pout) || pipe(perr))
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        dup2(pin[0], 0);
        dup2(pout[1], 1);
        dup2(perr[1], 2);
        close(pin[1]);
        close(pout[0]);
        close(perr[0]);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(pin[0]);
    close(pout[1]);
    close(perr[1]);
    signal(SIGPIPE, SIG_IGN);
    if (stdin_text) {
        size_t n = strlen(stdin_text), off = 0;
        while (off < n) {
            ssize_t w = write(pin[1], stdin_text + off, n - off);
            if (w <= 0)
                break;
            off += (size_t)w;
        }
    }
    close(pin[1]);
    struct sink so = {0}, se = {0};
    sink_add(&so, "", 0);
    sink_add(&se, "", 0);
    struct pollfd fds[2] = {{pout[0], POLLIN, 0}, {perr[0], POLLIN, 0}};
    int open_fds         = 2;
    double deadline      = now_s() + timeout_s;
    int killed           = 0;
    while (open_fds > 0) {
        int left_ms = (int)((deadline - now_s()) * 1000);
        if (left_ms <= 0) {
            kill(pid, SIGKILL);
            killed = 1;
            break;
        }
        if (poll(fds, 2, left_ms) < 0 && errno != EINTR)
            break;
        for (int i = 0; i < 2; i++) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            char tmp[4096];
            ssize_t r = read(fds[i].fd, tmp, sizeof tmp);
            if (r <= 0) {
                close(fds[i].fd);
                fds[i].fd = -1;
                open_fds--;
            } else {
                sink_add(i == 0 ? &so : &se, tmp, (size_t)r);
            }
        }
    }
    for (int i = 0; i < 2; i++)
        if (fds[i].fd >= 0)
            close(fds[i].fd);
    int status = 0;
    waitpid(pid, &status, 0);
    if (out)
        *out = so.buf;
    else
        free(so.buf);
    if (errout)
        *errout = se.buf;
    else
        free(se.buf);
    if (killed)
        return 128 + SIGKILL;
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}

char *tu_read_file(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return NULL;
    struct sink s = {0};
    sink_add(&s, "", 0);
    char tmp[65536];
    size_t r;
    while ((r = fread(tmp, 1, sizeof tmp, fp)) > 0)
        sink_add(&s, tmp, r);
    fclose(fp);
    if (len)
        *len = s.len;
    return s.buf;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

char **tu_list_files(const char *dir, const char *suffix, int *n)
{
    *n     = 0;
    DIR *d = opendir(dir);
    if (!d)
        return NULL;
    char **names   = NULL;
    size_t suf_len = strlen(suffix);
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len <= suf_len || strcmp(e->d_name + len - suf_len, suffix))
            continue;
        names         = realloc(names, (size_t)(*n + 1) * sizeof *names);
        names[(*n)++] = strdup(e->d_name);
    }
    closedir(d);
    if (*n)
        qsort(names, (size_t)*n, sizeof *names, cmp_names);
    return names ? names : calloc(1, sizeof *names);
}

char *tu_tmpdir(void)
{
    const char *t = getenv("TMPDIR");
    char tmpl[PATH_MAX];
    snprintf(tmpl, sizeof tmpl, "%s/hearth-test-XXXXXX", t && *t ? t : "/tmp");
    char *d = mkdtemp(tmpl);
    return d ? strdup(d) : NULL;
}

void tu_rmtree(const char *dir)
{
    if (!dir || strncmp(dir, "/", 1) != 0 || !strstr(dir, "hearth-test-"))
        return;
    const char *argv[] = {"/bin/rm", "-rf", dir, NULL};
    tu_run(argv, NULL, NULL, NULL, 30);
}

int tu_write_file(const char *path, const void *data, size_t len)
{
    FILE *fp = fopen(path, "wb");
    if (!fp)
        return -1;
    size_t w = fwrite(data, 1, len, fp);
    return fclose(fp) == 0 && w == len ? 0 : -1;
}

void tu_unescape(char *s)
{
    char *w = s;
    for (char *r = s; *r; r++) {
        if (*r == '\\' && r[1] == 'x' && isxdigit((unsigned char)r[2]) &&
            isxdigit((unsigned char)r[3])) {
            const char hex[3] = {r[2], r[3], 0};
            *w++              = (char)strtol(hex, NULL, 16);
            r += 3;
        } else if (*r == '\\' && r[1]) {
            r++;
            *w++ = *r == 'n' ? '\n' : *r == 't' ? '\t' : *r;
        } else {
            *w++ = *r;
        }
    }
    *w = 0;
}
