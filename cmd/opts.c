/*
 * opts.c: the parser and the two printers (--help, --help-md) over a
 * command's option lists (opts.h). Nothing here knows any one command.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "opts.h"

/* The help's text column and width. */
enum { HELP_COL_MAX = 28, HELP_WIDTH = 100 };

/* Whether name is one of the space-separated spellings in names. */
static bool spelt(const char *names, const char *name, size_t len)
{
    for (const char *p = names; *p;) {
        const char *e  = strchr(p, ' ');
        const size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == len && !strncmp(p, name, len))
            return true;
        p += n;
        while (*p == ' ')
            p++;
    }
    return false;
}

static const struct opt *find(const struct cmd_spec *spec, const char *name, size_t len,
                              size_t *base_off)
{
    for (size_t u = 0; u < spec->n_uses; u++) {
        const struct opt_group *g = spec->uses[u].group;
        for (size_t i = 0; i < g->n_opts; i++)
            if (spelt(g->opts[i].names, name, len)) {
                *base_off = spec->uses[u].off;
                return &g->opts[i];
            }
    }
    return NULL;
}

const struct opt *opts_find(const struct cmd_spec *spec, const char *name, size_t *base_off)
{
    return find(spec, name, strlen(name), base_off);
}

/* Whether v is one of the '|'-separated choices; *index its place. */
static bool choice_index(const char *choices, const char *v, int *index)
{
    int i = 0;
    for (const char *p = choices; p; i++) {
        const char *e  = strchr(p, '|');
        const size_t n = e ? (size_t)(e - p) : strlen(p);
        if (strlen(v) == n && !strncmp(p, v, n)) {
            *index = i;
            return true;
        }
        p = e ? e + 1 : NULL;
    }
    return false;
}

static long to_long(double d)
{
    return d >= (double)LONG_MAX ? LONG_MAX : d <= (double)LONG_MIN ? LONG_MIN : (long)d;
}

/* Takes v for o into field; false with one line on stderr. */
static bool take(const char *cmd, const struct opt *o, const char *spelling, const char *v,
                 void *field)
{
    switch (o->kind) {
    case OPT_FLAG:
        *(bool *)field = true;
        return true;
    case OPT_LONG:
        if (o->choices && !strcmp(v, o->choices)) {
            *(long *)field = o->word_value;
            return true;
        }
        if (o->choices) {
            char *end;
            errno        = 0;
            const long x = strtol(v, &end, 10);
            if (errno || end == v || *end || x < to_long(o->lo) || x > to_long(o->hi)) {
                fprintf(stderr, "hearth %s: %s expects an integer in %ld..%ld or %s, got '%s'\n",
                        cmd, spelling, to_long(o->lo), to_long(o->hi), o->choices, v);
                return false;
            }
            *(long *)field = x;
            return true;
        }
        return arg_long(cmd, spelling, v, to_long(o->lo), to_long(o->hi), (long *)field);
    case OPT_FLOAT:
        return arg_float(cmd, spelling, v, o->lo, o->hi, (float *)field);
    case OPT_BYTES:
        return arg_bytes(cmd, spelling, v, (int64_t *)field);
    case OPT_STR:
        *(const char **)field = v;
        return true;
    case OPT_CHOICE: {
        int i;
        if (choice_index(o->choices, v, &i)) {
            *(int *)field = i;
            return true;
        }
        /* "a, b or c" */
        fprintf(stderr, "hearth %s: %s takes ", cmd, spelling);
        const char *last = strrchr(o->choices, '|');
        for (const char *p = o->choices; *p; p++) {
            if (*p != '|')
                fputc(*p, stderr);
            else
                fputs(p == last ? " or " : ", ", stderr);
        }
        fprintf(stderr, ", got '%s'\n", v);
        return false;
    }
    case OPT_MULTI: {
        struct opt_multi *m = field;
        if (m->n == OPT_MULTI_MAX) {
            fprintf(stderr, "hearth %s: %s is given more than %d times\n", cmd, spelling,
                    OPT_MULTI_MAX);
            return false;
        }
        m->v[m->n++] = v;
        return true;
    }
    case OPT_CUSTOM:
        return o->set(cmd, spelling, v, field);
    }
    return false;
}

/* The entry the option argument a names, as "--name" or "--name=value" (*eq then at the '='),
 * or NULL. */
static const struct opt *match(const struct cmd_spec *spec, const char *a, size_t *off,
                               const char **eq)
{
    *eq                 = NULL;
    const struct opt *o = find(spec, a, strlen(a), off);
    if (!o && a[1] == '-' && (*eq = strchr(a, '=')) != NULL)
        o = find(spec, a, (size_t)(*eq - a), off);
    return o;
}

enum opts_status opts_parse(const struct cmd_spec *spec, void *args, int argc, char **argv)
{
    char *base = args;
    if (spec->defaults)
        memcpy(args, spec->defaults, spec->args_size);
    else
        memset(args, 0, spec->args_size);
    struct opt_multi *pos = spec->pos_max ? (struct opt_multi *)(base + spec->pos_off) : NULL;
    bool only_pos         = false;
    for (int i = 1; i < argc; i++) {
        const char *a     = argv[i];
        const bool is_opt = !only_pos && a[0] == '-' && a[1];
        if (is_opt && !strcmp(a, "--")) {
            only_pos = true;
            continue;
        }
        if (is_opt && (!strcmp(a, "-h") || !strcmp(a, "--help"))) {
            opts_help(spec, stdout);
            return OPTS_HELP;
        }
        if (is_opt && !strcmp(a, "--help-md")) {
            opts_markdown(spec, stdout);
            return OPTS_HELP;
        }
        if (!is_opt) {
            if (!pos || pos->n >= spec->pos_max) {
                fprintf(stderr, "hearth %s: unexpected argument '%s'\n", spec->name, a);
                return OPTS_USAGE;
            }
            pos->v[pos->n++] = a;
            continue;
        }
        size_t off;
        const char *eq, *v = NULL;
        const struct opt *o = match(spec, a, &off, &eq);
        char spelling[64];
        snprintf(spelling, sizeof spelling, "%.*s", (int)(eq ? eq - a : (ptrdiff_t)strlen(a)), a);
        if (!o) {
            fprintf(stderr, "hearth %s: unknown option '%s' (hearth %s --help lists them)\n",
                    spec->name, spelling, spec->name);
            return OPTS_USAGE;
        }
        if (o->kind == OPT_FLAG) {
            if (eq) {
                fprintf(stderr, "hearth %s: %s takes no value\n", spec->name, spelling);
                return OPTS_USAGE;
            }
        } else if (eq) {
            v = eq + 1;
        } else if (i + 1 < argc) {
            v = argv[++i];
        } else {
            fprintf(stderr, "hearth %s: %s needs a value (%s)\n", spec->name, spelling, o->value);
            return OPTS_USAGE;
        }
        if (!take(spec->name, o, spelling, v, base + off + o->off))
            return OPTS_USAGE;
    }
    if (pos && pos->n < spec->pos_min) {
        fprintf(stderr, "hearth %s: missing arguments: usage: %.*s\n", spec->name,
                (int)strcspn(spec->synopsis, "\n"), spec->synopsis);
        return OPTS_USAGE;
    }
    return OPTS_GO;
}

int opts_last(const struct cmd_spec *spec, int argc, char **argv, const char *names)
{
    int last = 0;
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) {
        const char *a = argv[i], *eq;
        if (a[0] != '-' || !a[1])
            continue;
        size_t off;
        const struct opt *o = match(spec, a, &off, &eq);
        if (!o)
            continue;
        for (const char *p = names; *p;) {
            const size_t n = strcspn(p, " ");
            if (find(spec, p, n, &off) == o)
                last = i;
            p += n + (p[n] == ' ');
        }
        if (o->kind != OPT_FLAG && !eq)
            i++; /* its value */
    }
    return last;
}

int opts_exit(enum opts_status st)
{
    return st == OPTS_HELP ? EXIT_OK : EXIT_USAGE;
}

/* ------------------------------------------------------------ --help --- */

/* "-c, --ctx-size N": the spellings joined by ", ", then the value's name. */
static void left_cell(const struct opt *o, char *out, size_t len)
{
    size_t n = 0;
    for (const char *p = o->names; *p && n + 3 < len; p++)
        n += (size_t)snprintf(out + n, len - n, *p == ' ' ? ", " : "%c", *p);
    if (o->value && n < len)
        snprintf(out + n, len - n, " %s", o->value);
}

/* Prints text from column col, wrapped before width; the first line continues the current one
 * (at column *at). */
static void wrap(FILE *fp, const char *text, int col, int at)
{
    const char *p = text;
    while (*p) {
        while (*p == ' ')
            p++;
        const size_t w = strcspn(p, " ");
        if (!w)
            break;
        if (at > col && at + 1 + (int)w > HELP_WIDTH) {
            fprintf(fp, "\n%*s", col, "");
            at = col;
        } else if (at > col) {
            fputc(' ', fp);
            at++;
        }
        fwrite(p, 1, w, fp);
        at += (int)w;
        p += w;
    }
    fputc('\n', fp);
}

void opts_usage(const struct cmd_spec *spec, FILE *fp)
{
    const char *p = spec->synopsis;
    for (int line = 0; *p; line++) {
        const size_t n = strcspn(p, "\n");
        fprintf(fp, "%s%.*s\n", line ? "       " : "usage: ", (int)n, p);
        p += n + (p[n] == '\n');
    }
}

void opts_help(const struct cmd_spec *spec, FILE *fp)
{
    opts_usage(spec, fp);
    if (spec->about) {
        fputc('\n', fp);
        wrap(fp, spec->about, 0, 0);
    }
    int col = 0;
    char cell[160];
    for (size_t u = 0; u < spec->n_uses; u++)
        for (size_t i = 0; i < spec->uses[u].group->n_opts; i++) {
            left_cell(&spec->uses[u].group->opts[i], cell, sizeof cell);
            const int w = (int)strlen(cell) + 4;
            if (w > col && w <= HELP_COL_MAX)
                col = w;
        }
    for (size_t u = 0; u < spec->n_uses; u++) {
        const struct opt_group *g = spec->uses[u].group;
        fprintf(fp, "\n%s:\n", g->title);
        for (size_t i = 0; i < g->n_opts; i++) {
            const struct opt *o = &g->opts[i];
            left_cell(o, cell, sizeof cell);
            int at = fprintf(fp, "  %s", cell);
            if (at + 2 > col) {
                fprintf(fp, "\n%*s", col, "");
                at = col;
            } else {
                at += fprintf(fp, "%*s", col - at, "");
            }
            char text[2048];
            if (o->def)
                snprintf(text, sizeof text, "%s (default: %s)", o->help, o->def);
            else
                snprintf(text, sizeof text, "%s", o->help);
            /* the first word starts at col exactly */
            wrap(fp, text, col, col);
        }
    }
    if (spec->epilog)
        fprintf(fp, "\n%s", spec->epilog);
}

/* --------------------------------------------------------- --help-md --- */

/* s in a markdown table cell: '|' escaped, and outside code spans '<' as &lt; (<s> would be a
 * tag) */
static void md_cell(FILE *fp, const char *s)
{
    bool code = false;
    for (; *s; s++) {
        code ^= *s == '`';
        if (*s == '|')
            fputc('\\', fp);
        if (*s == '<' && !code)
            fputs("&lt;", fp);
        else
            fputc(*s, fp);
    }
}

void opts_markdown(const struct cmd_spec *spec, FILE *fp)
{
    for (size_t u = 0; u < spec->n_uses; u++) {
        const struct opt_group *g = spec->uses[u].group;
        fprintf(fp, "%s**%s**\n\n| option | value | default | description |\n|---|---|---|---|\n",
                u ? "\n" : "", g->title);
        for (size_t i = 0; i < g->n_opts; i++) {
            const struct opt *o = &g->opts[i];
            fputs("| ", fp);
            for (const char *p = o->names; *p;) {
                const size_t n = strcspn(p, " ");
                fprintf(fp, "%s`%.*s`", p == o->names ? "" : ", ", (int)n, p);
                p += n;
                while (*p == ' ')
                    p++;
            }
            fputs(" | ", fp);
            if (o->value) { /* in a code span: '|' still ends a cell unless escaped */
                fputc('`', fp);
                for (const char *p = o->value; *p; p++) {
                    if (*p == '|')
                        fputc('\\', fp);
                    fputc(*p, fp);
                }
                fputc('`', fp);
            }
            fputs(" | ", fp);
            if (o->def)
                md_cell(fp, o->def);
            fputs(" | ", fp);
            md_cell(fp, o->help);
            fputs(" |\n", fp);
        }
    }
}
