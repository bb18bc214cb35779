/*
 * test_layout.c: the direction of dependency between the folders of src/,
 * read from the tree's own #include lines, so a knot cannot come in
 * unnoticed.
 *
 * A folder is a directory directly under src/ (src/backend/vk/ belongs to
 * backend). Folder A depends on folder B when a .c or .h file under
 * src/A/ includes "B/...". Two rules:
 *
 *   - no cycle crosses folders: the folders that depend on each other,
 *     directly or through others, are one knot, and every knot fails the
 *     test unless KNOWN_KNOTS lists it;
 *   - the edges FORBIDDEN names do not exist (a lower layer never reaches
 *     up), unless KNOWN_EDGES lists them.
 *
 * The two KNOWN lists are the knots and edges the tree has today that are
 * being untangled; they may only shrink. An entry the tree no longer has
 * fails the test too, so the list is cut as soon as its knot is gone.
 *
 * One file is below every folder but util/: BOTTOM_HEADER, the plain types
 * every layer reads. Including it is no edge, and it includes nothing of
 * src/ but util/.
 */
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/testutil.h"

#define MAX_FOLDERS 64

/*
 * The model's plain types (structs, enums, constants, field accessors): the
 * backends read a model and a context through them, and the model calls the
 * backends, so were this include an edge backend and model would be one knot.
 * It is none because the file depends on nothing above util/
 * (test_bottom_header).
 */
static const char BOTTOM_HEADER[] = "model/types.h";

/* The knots (as their folders, sorted, joined by spaces) allowed for now; NULL: none
 * (C11 has no empty initializer). */
/* clang-format off */
static const char *const KNOWN_KNOTS[] = {
    NULL,
};
/* clang-format on */

/* Edges that must not exist: "from to". */
/* clang-format off */
static const char *const FORBIDDEN[] = {
    "backend model", /* but for BOTTOM_HEADER */
    "route serve",   "route bench", "bench serve", "bench route", "serve route", "serve bench",
    "net serve",     "net route",   "net bench",
    "util backend",  "util model",  "util serve",  "kernels model", "kernels backend",
    "kernels serve", "gguf model",  "text serve",  "grammar serve", "sample serve",
    "chat serve",    "generate serve", "generate sched",
    /* the scheduler drives the engine for serve and knows nothing of HTTP; the drafters and
     * the sampling chain are what it calls, never the other way */
    "sched serve",   "spec serve",  "spec sched",  "sample sched",  "net sched",
    "route sched",   "bench sched",
};
/* clang-format on */

/* Forbidden edges the tree has today, being removed; NULL: none. */
/* clang-format off */
static const char *const KNOWN_EDGES[] = {
    NULL,
};
/* clang-format on */

#define N(a) (sizeof(a) / sizeof((a)[0]))

struct graph {
    char name[MAX_FOLDERS][64];
    int n;
    bool edge[MAX_FOLDERS][MAX_FOLDERS];
    char why[MAX_FOLDERS][MAX_FOLDERS][160]; /* one file and include behind each edge */
};

static int folder_index(struct graph *g, const char *name, size_t len, bool add)
{
    for (int i = 0; i < g->n; i++)
        if (strlen(g->name[i]) == len && !strncmp(g->name[i], name, len))
            return i;
    if (!add)
        return -1;
    assert_true(g->n < MAX_FOLDERS && len < sizeof g->name[0]);
    memcpy(g->name[g->n], name, len);
    g->name[g->n][len] = 0;
    return g->n++;
}

/*
 * A line's #include "PATH": true with PATH as [*path, *end) and *directive at "include";
 * false for any other line (an <...> include among them).
 */
static bool quoted_include(const char *line, const char **path, const char **end,
                           const char **directive)
{
    const char *p = line;
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p++ != '#')
        return false;
    while (*p == ' ' || *p == '\t')
        p++;
    if (strncmp(p, "include", 7))
        return false;
    const char *q = strchr(p, '"');
    const char *e = q ? strchr(q + 1, '"') : NULL;
    if (!e)
        return false;
    *path      = q + 1;
    *end       = e;
    *directive = p;
    return true;
}

/* The edges of one file of folder `from` (rel: its path under the top). */
static void scan_file(struct graph *g, int from, const char *rel)
{
    char full[1024];
    assert_true(snprintf(full, sizeof full, "%s/%s", HEARTH_TOP, rel) < (int)sizeof full);
    char *text = tu_read_file(full, NULL);
    assert_non_null(text);
    for (char *line = text; line && *line;) {
        char *next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        const char *q, *end, *p;
        if (quoted_include(line, &q, &end, &p)) {
            const char *slash     = memchr(q, '/', (size_t)(end - q));
            const size_t n_bottom = sizeof BOTTOM_HEADER - 1;
            const bool bottom     = (size_t)(end - q) == n_bottom &&
                                !strncmp(q, BOTTOM_HEADER, n_bottom) &&
                                strcmp(g->name[from], "util"); /* util/ is below it */
            if (slash && !bottom) {
                int to = folder_index(g, q, (size_t)(slash - q), false);
                if (to >= 0 && to != from && !g->edge[from][to]) {
                    g->edge[from][to] = true;
                    /* cut short where long: it only says where to look */
                    if (snprintf(g->why[from][to], sizeof g->why[0][0], "%s: %s", rel, p) < 0)
                        g->why[from][to][0] = 0;
                }
            }
        }
        line = next;
    }
    free(text);
}

static void scan_dir(struct graph *g, int folder, const char *rel)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/%s", HEARTH_TOP, rel);
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char sub[1024], full[1200];
        assert_true(snprintf(sub, sizeof sub, "%s/%s", rel, e->d_name) < (int)sizeof sub);
        assert_true(snprintf(full, sizeof full, "%s/%s", HEARTH_TOP, sub) < (int)sizeof full);
        struct stat st;
        if (stat(full, &st) != 0)
            continue;
        size_t len = strlen(e->d_name);
        if (S_ISDIR(st.st_mode))
            scan_dir(g, folder, sub);
        else if (len > 2 &&
                 (!strcmp(e->d_name + len - 2, ".c") || !strcmp(e->d_name + len - 2, ".h")))
            scan_file(g, folder, sub);
    }
    closedir(d);
}

static void load(struct graph *g)
{
    memset(g, 0, sizeof *g);
    char src[1024];
    snprintf(src, sizeof src, "%s/src", HEARTH_TOP);
    DIR *d = opendir(src);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        char full[1400];
        assert_true(snprintf(full, sizeof full, "%s/%s", src, e->d_name) < (int)sizeof full);
        struct stat st;
        if (e->d_name[0] != '.' && stat(full, &st) == 0 && S_ISDIR(st.st_mode))
            folder_index(g, e->d_name, strlen(e->d_name), true);
    }
    closedir(d);
    /* sorted, so knots print the same way on every filesystem */
    for (int i = 0; i < g->n; i++)
        for (int j = i + 1; j < g->n; j++)
            if (strcmp(g->name[j], g->name[i]) < 0) {
                char t[64];
                memcpy(t, g->name[i], sizeof t);
                memcpy(g->name[i], g->name[j], sizeof t);
                memcpy(g->name[j], t, sizeof t);
            }
    for (int i = 0; i < g->n; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "src/%s", g->name[i]);
        scan_dir(g, i, rel);
    }
}

/* reach[a][b]: b is reachable from a by one edge or more. */
static void closure(const struct graph *g, bool reach[MAX_FOLDERS][MAX_FOLDERS])
{
    for (int a = 0; a < g->n; a++)
        for (int b = 0; b < g->n; b++)
            reach[a][b] = g->edge[a][b];
    for (int k = 0; k < g->n; k++)
        for (int a = 0; a < g->n; a++)
            for (int b = 0; b < g->n; b++)
                reach[a][b] = reach[a][b] || (reach[a][k] && reach[k][b]);
}

static bool listed(const char *const *list, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (list[i] && !strcmp(list[i], s))
            return true;
    return false;
}

static void test_no_knots(void **state)
{
    (void)state;
    static struct graph g;
    static bool reach[MAX_FOLDERS][MAX_FOLDERS];
    load(&g);
    assert_true(g.n > 5);
    closure(&g, reach);
    bool seen[N(KNOWN_KNOTS)] = {0};
    bool done[MAX_FOLDERS]    = {0};
    int bad                   = 0;
    for (int a = 0; a < g.n; a++) {
        if (done[a] || !reach[a][a])
            continue;
        char knot[1024] = "";
        for (int b = 0; b < g.n; b++)
            if (b == a || (reach[a][b] && reach[b][a])) {
                done[b] = true;
                snprintf(knot + strlen(knot), sizeof knot - strlen(knot), "%s%s", *knot ? " " : "",
                         g.name[b]);
            }
        size_t k = 0;
        while (k < N(KNOWN_KNOTS) && (!KNOWN_KNOTS[k] || strcmp(KNOWN_KNOTS[k], knot)))
            k++;
        if (k < N(KNOWN_KNOTS)) {
            seen[k] = true;
            print_message("known knot, being untangled: %s\n", knot);
            continue;
        }
        print_message("folders that depend on each other: %s; their edges:\n", knot);
        for (int x = 0; x < g.n; x++)
            for (int y = 0; y < g.n; y++)
                if (g.edge[x][y] && reach[a][x] && reach[x][a] && reach[a][y] && reach[y][a])
                    print_message("  %s -> %s (%s)\n", g.name[x], g.name[y], g.why[x][y]);
        bad++;
    }
    for (size_t k = 0; k < N(KNOWN_KNOTS); k++)
        if (KNOWN_KNOTS[k] && !seen[k]) {
            print_message("KNOWN_KNOTS lists \"%s\", which the tree no longer has: remove it\n",
                          KNOWN_KNOTS[k]);
            bad++;
        }
    assert_int_equal(bad, 0);
}

static void test_forbidden_edges(void **state)
{
    (void)state;
    static struct graph g;
    load(&g);
    int bad = 0;
    for (size_t i = 0; i < N(FORBIDDEN); i++) {
        char from[64], to[64];
        assert_int_equal(sscanf(FORBIDDEN[i], "%63s %63s", from, to), 2);
        int a      = folder_index(&g, from, strlen(from), false);
        int b      = folder_index(&g, to, strlen(to), false);
        bool has   = a >= 0 && b >= 0 && g.edge[a][b];
        bool known = listed(KNOWN_EDGES, N(KNOWN_EDGES), FORBIDDEN[i]);
        if (has && !known) {
            print_message("%s must not include from %s/: %s\n", from, to, g.why[a][b]);
            bad++;
        } else if (has) {
            print_message("known edge, being removed: %s -> %s (%s)\n", from, to, g.why[a][b]);
        } else if (known) {
            print_message("KNOWN_EDGES lists \"%s\", which the tree no longer has: remove it\n",
                          FORBIDDEN[i]);
            bad++;
        }
    }
    for (size_t i = 0; i < N(KNOWN_EDGES); i++)
        if (KNOWN_EDGES[i] && !listed(FORBIDDEN, N(FORBIDDEN), KNOWN_EDGES[i])) {
            print_message("KNOWN_EDGES lists \"%s\", which FORBIDDEN does not\n", KNOWN_EDGES[i]);
            bad++;
        }
    assert_int_equal(bad, 0);
}

/* BOTTOM_HEADER includes system headers, include/'s public ones and util/'s, nothing else. */
static void test_bottom_header(void **state)
{
    (void)state;
    char full[1024];
    assert_true(snprintf(full, sizeof full, "%s/src/%s", HEARTH_TOP, BOTTOM_HEADER) <
                (int)sizeof full);
    char *text = tu_read_file(full, NULL);
    assert_non_null(text);
    int bad = 0;
    for (char *line = text; line && *line;) {
        char *next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        const char *q, *end, *p;
        if (quoted_include(line, &q, &end, &p) && memchr(q, '/', (size_t)(end - q)) &&
            strncmp(q, "util/", 5)) {
            print_message("%s must include nothing of src/ but util/: %s\n", BOTTOM_HEADER, p);
            bad++;
        }
        line = next;
    }
    free(text);
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_knots),
        cmocka_unit_test(test_forbidden_edges),
        cmocka_unit_test(test_bottom_header),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
