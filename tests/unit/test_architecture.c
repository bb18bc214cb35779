/*
 * test_architecture.c: docs/ARCHITECTURE.md's layout table against the
 * tree, both ways, so the table cannot rot: every .c file under src/ (at
 * any depth) and cmd/ has a row, and every path a row names exists.
 *
 * The convention, stated in the section too: the section is the one whose
 * heading begins "## Layout" and runs to the next "## " heading. Within
 * it, a table row (a line that begins with '|') whose first cell is one
 * path in backticks names that path, relative to the repository's root:
 *
 *   | `src/model/kv.c` | the paged KV cache ... |
 *
 * A path that ends in '/' names a folder. Other lines of the section (its
 * prose, the table's header and separator) name nothing. Files generated
 * at build time live under build/, outside src/, and need no row.
 */
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/testutil.h"

#define DOC     "docs/ARCHITECTURE.md"
#define SECTION "## Layout"

/* A growing list of paths, each with the document line that named it (0 for the tree's). */
struct paths {
    char **path;
    int *line;
    int n, cap;
};

static void paths_add(struct paths *p, const char *s, size_t len, int line)
{
    if (p->n == p->cap) {
        p->cap  = p->cap ? 2 * p->cap : 256;
        p->path = realloc(p->path, (size_t)p->cap * sizeof *p->path);
        p->line = realloc(p->line, (size_t)p->cap * sizeof *p->line);
        assert_non_null(p->path);
        assert_non_null(p->line);
    }
    p->path[p->n] = strndup(s, len);
    assert_non_null(p->path[p->n]);
    p->line[p->n++] = line;
}

static void paths_free(struct paths *p)
{
    for (int i = 0; i < p->n; i++)
        free(p->path[i]);
    free(p->path);
    free(p->line);
    memset(p, 0, sizeof *p);
}

static bool paths_has(const struct paths *p, const char *s)
{
    for (int i = 0; i < p->n; i++)
        if (!strcmp(p->path[i], s))
            return true;
    return false;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * The paths the layout section's rows name, in document order. Fails the
 * test when the document or the section is missing, or names nothing.
 */
static void read_rows(struct paths *rows)
{
    char *doc = tu_read_file(HEARTH_TOP "/" DOC, NULL);
    if (!doc)
        fail_msg("cannot read %s", HEARTH_TOP "/" DOC);
    bool in = false, seen = false;
    int line = 0;
    for (char *s = doc; *s;) {
        char *end  = strchr(s, '\n');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        line++;
        if (len >= 3 && !strncmp(s, "## ", 3)) {
            in = len >= strlen(SECTION) && !strncmp(s, SECTION, strlen(SECTION));
            seen |= in;
        } else if (in && len > 0 && s[0] == '|') {
            /* the first cell: `path`, spaces around it allowed, nothing else */
            const char *c = s + 1, *stop = s + len;
            while (c < stop && *c == ' ')
                c++;
            if (c < stop && *c == '`') {
                const char *p0 = c + 1, *p1 = p0;
                while (p1 < stop && *p1 != '`' && *p1 != '|')
                    p1++;
                const char *after = p1 < stop && *p1 == '`' ? p1 + 1 : NULL;
                while (after && after < stop && *after == ' ')
                    after++;
                if (!after || after == stop || *after != '|' || p1 == p0)
                    fail_msg("%s:%d: a layout row's first cell must be one path in backticks: "
                             "%.*s",
                             DOC, line, (int)len, s);
                paths_add(rows, p0, (size_t)(p1 - p0), line);
            }
        }
        s += len + (end != NULL);
    }
    free(doc);
    if (!seen)
        fail_msg("%s has no section whose heading begins \"%s\"", DOC, SECTION);
    if (rows->n == 0)
        fail_msg("%s's \"%s\" section has no table row naming a path", DOC, SECTION);
}

/* Adds the .c files under rel (a folder relative to the root, no trailing '/') to out. */
static void walk(const char *rel, struct paths *out)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s", HEARTH_TOP, rel);
    DIR *d = opendir(dir);
    if (!d)
        fail_msg("cannot open %s", dir);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char sub[4096], full[8192];
        snprintf(sub, sizeof sub, "%s/%s", rel, e->d_name);
        snprintf(full, sizeof full, "%s/%s", HEARTH_TOP, sub);
        struct stat st;
        if (lstat(full, &st) != 0)
            continue;
        size_t n = strlen(e->d_name);
        if (S_ISDIR(st.st_mode))
            walk(sub, out);
        else if (S_ISREG(st.st_mode) && n > 2 && !strcmp(e->d_name + n - 2, ".c"))
            paths_add(out, sub, strlen(sub), 0);
    }
    closedir(d);
}

/* A failure's list, one item a line; long lists are cut, the count says how many. */
static char report[16384];

static void note(const char *item)
{
    size_t len = strlen(report);
    snprintf(report + len, sizeof report - len, "\n  %s", item);
}

static void test_every_source_file_has_a_row(void **state)
{
    (void)state;
    struct paths rows = {0}, files = {0};
    read_rows(&rows);
    walk("src", &files);
    walk("cmd", &files);
    qsort(files.path, (size_t)files.n, sizeof *files.path, by_name);
    report[0]   = 0;
    int missing = 0;
    for (int i = 0; i < files.n; i++)
        if (!paths_has(&rows, files.path[i])) {
            note(files.path[i]);
            missing++;
        }
    print_message("%d source files under src/ and cmd/, %d rows in %s's layout table\n", files.n,
                  rows.n, DOC);
    paths_free(&rows);
    paths_free(&files);
    if (missing)
        fail_msg("%d source file(s) have no row in %s's layout table (add a row "
                 "\"| `PATH` | what it is for |\" under \"%s\"):%s",
                 missing, DOC, SECTION, report);
}

static void test_every_row_names_a_path_that_exists(void **state)
{
    (void)state;
    struct paths rows = {0};
    read_rows(&rows);
    report[0]   = 0;
    int missing = 0;
    for (int i = 0; i < rows.n; i++) {
        const char *p = rows.path[i];
        size_t n      = strlen(p);
        bool folder   = p[n - 1] == '/';
        char full[4096];
        snprintf(full, sizeof full, "%s/%s", HEARTH_TOP, p);
        struct stat st;
        bool ok = stat(full, &st) == 0 && (folder ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode));
        if (!ok) {
            char item[4200];
            snprintf(item, sizeof item, "%s (line %d: no such %s)", p, rows.line[i],
                     folder ? "folder" : "file");
            note(item);
            missing++;
        }
    }
    paths_free(&rows);
    if (missing)
        fail_msg("%d row(s) of %s's layout table name a path that does not exist (remove the "
                 "row or fix its path):%s",
                 missing, DOC, report);
}

static void test_no_path_has_two_rows(void **state)
{
    (void)state;
    struct paths rows = {0};
    read_rows(&rows);
    report[0] = 0;
    int twice = 0;
    for (int i = 0; i < rows.n; i++)
        for (int j = 0; j < i; j++)
            if (!strcmp(rows.path[i], rows.path[j])) {
                char item[4200];
                snprintf(item, sizeof item, "%s (line %d, again at line %d)", rows.path[i],
                         rows.line[j], rows.line[i]);
                note(item);
                twice++;
                break;
            }
    paths_free(&rows);
    if (twice)
        fail_msg("%d path(s) have more than one row in %s's layout table:%s", twice, DOC, report);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_source_file_has_a_row),
        cmocka_unit_test(test_every_row_names_a_path_that_exists),
        cmocka_unit_test(test_no_path_has_two_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
