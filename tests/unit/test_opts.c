/*
 * test_opts.c: every command's option lists (cmd/opts.h) through the very
 * parser the command runs. Each spelling of each option takes a value of its
 * kind and lands in the command's struct; out-of-range and unknown values
 * are usage errors; a default the help states as a value is the one the
 * command starts from; no spelling means two options. Then the generated
 * parts of the docs: each `<!-- BEGIN: CMD -->` ... `<!-- END: CMD -->`
 * region of README.md and docs/ holds what CMD prints now (make docs
 * rewrites them), and every command's options table is in the docs.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <unistd.h>

#include <cmocka.h>

#include "../cmd/cmd.h"
#include "../cmd/opts.h"
#include "util/testutil.h"

/* stderr to /dev/null around the parses that are meant to fail */
static int quiet_fd = -1;
static void quiet(bool on)
{
    fflush(stderr);
    if (on) {
        quiet_fd   = dup(2);
        FILE *null = freopen("/dev/null", "w", stderr);
        (void)null;
    } else if (quiet_fd >= 0) {
        dup2(quiet_fd, 2);
        close(quiet_fd);
        quiet_fd = -1;
    }
}

/* argv: the command, its required positionals, then extra (NULL-terminated). */
static enum opts_status parse(const struct cmd_spec *spec, void *args, const char *const *extra)
{
    char *argv[16];
    int argc     = 0;
    argv[argc++] = (char *)spec->name;
    for (size_t i = 0; i < spec->pos_min; i++)
        argv[argc++] = (char *)"positional";
    for (; extra && *extra; extra++)
        argv[argc++] = (char *)*extra;
    return opts_parse(spec, args, argc, argv);
}

/* The spellings of o, each into out[i]. */
static size_t spellings(const struct opt *o, char out[][64], size_t max)
{
    size_t n = 0;
    for (const char *p = o->names; *p && n < max;) {
        const size_t w = strcspn(p, " ");
        snprintf(out[n++], 64, "%.*s", (int)w, p);
        p += w;
        while (*p == ' ')
            p++;
    }
    return n;
}

/* Values of o's kind worth trying, in order; the first that changes the struct counts. */
static size_t values(const struct opt *o, char out[][64], size_t max)
{
    size_t n = 0;
    switch (o->kind) {
    case OPT_FLAG:
        break;
    case OPT_LONG:
        snprintf(out[n++], 64, "%ld", (long)(o->hi > 1e15 ? 1e15 : o->hi));
        snprintf(out[n++], 64, "%ld", (long)o->lo);
        if (o->choices)
            snprintf(out[n++], 64, "%s", o->choices);
        break;
    case OPT_FLOAT:
        snprintf(out[n++], 64, "%g", o->hi);
        snprintf(out[n++], 64, "%g", o->lo);
        break;
    case OPT_BYTES:
        snprintf(out[n++], 64, "1G");
        snprintf(out[n++], 64, "512M");
        break;
    case OPT_STR:
    case OPT_MULTI:
        snprintf(out[n++], 64, "value");
        break;
    case OPT_CHOICE:
        for (const char *p = o->choices; p && n < max;) {
            const size_t w = strcspn(p, "|");
            snprintf(out[n++], 64, "%.*s", (int)w, p);
            p = p[w] ? p + w + 1 : NULL;
        }
        break;
    case OPT_CUSTOM:
        assert_non_null(o->example);
        snprintf(out[n++], 64, "%s", o->example);
        break;
    }
    return n;
}

/* Every command is declared as lists. */
static void test_every_command_has_lists(void **state)
{
    (void)state;
    for (size_t c = 0; c < cmd_table_n; c++) {
        if (!cmd_table[c].spec)
            fail_msg("hearth %s: its options are not declared as lists", cmd_table[c].name);
        assert_string_equal(cmd_table[c].spec->name, cmd_table[c].name);
    }
}

/*
 * Calls check for every option of every command: base is the command's struct as it starts
 * (no option given), args a scratch struct of the same size, off the option's group's offset.
 */
typedef void option_check(const struct cmd_spec *spec, const struct opt *o, size_t off,
                          const char *base, char *args);
static void each_option(option_check *check)
{
    for (size_t c = 0; c < cmd_table_n; c++) {
        const struct cmd_spec *spec = cmd_table[c].spec;
        if (!spec)
            continue;
        char *base = malloc(spec->args_size), *args = malloc(spec->args_size);
        assert_true(base && args);
        assert_int_equal(parse(spec, base, NULL), OPTS_GO);
        for (size_t u = 0; u < spec->n_uses; u++) {
            const struct opt_group *g = spec->uses[u].group;
            for (size_t i = 0; i < g->n_opts; i++)
                check(spec, &g->opts[i], spec->uses[u].off, base, args);
        }
        free(base);
        free(args);
    }
}

static size_t n_checked; /* spellings test_every_option_parses took */

/* Each spelling of o takes a value and lands in the struct; bad values do not. */
static void option_parses(const struct cmd_spec *spec, const struct opt *o, size_t off,
                          const char *base, char *args)
{
    (void)off;
    char names[8][64], vals[16][64];
    const size_t n_names = spellings(o, names, 8);
    const size_t n_vals  = values(o, vals, 16);
    for (size_t s = 0; s < n_names; s++) {
        /* no other option of this command is spelt the same */
        size_t at;
        assert_ptr_equal(opts_find(spec, names[s], &at), o);
        bool changed = false;
        for (size_t v = 0; v < (n_vals ? n_vals : 1) && !changed; v++) {
            const char *argv[]        = {names[s], n_vals ? vals[v] : NULL, NULL};
            const enum opts_status st = parse(spec, args, argv);
            if (st != OPTS_GO)
                fail_msg("hearth %s %s %s: refused", spec->name, names[s], n_vals ? vals[v] : "");
            changed = memcmp(args, base, spec->args_size) != 0;
        }
        if (!changed)
            fail_msg("hearth %s %s: no value of it changes what the command gets", spec->name,
                     names[s]);
        n_checked++;
    }
    /* out of range, not a number, not a choice: a usage error */
    char bad[3][64];
    size_t n_bad = 0;
    if (o->kind == OPT_LONG || o->kind == OPT_FLOAT) {
        snprintf(bad[n_bad++], 64, "x1");
        if (o->hi < 1e15)
            snprintf(bad[n_bad++], 64, "%.17g", o->hi + 1);
        if (o->lo > -1e15)
            snprintf(bad[n_bad++], 64, "%.17g", o->lo - 1);
    } else if (o->kind == OPT_CHOICE || o->kind == OPT_BYTES) {
        snprintf(bad[n_bad++], 64, "no-such-value");
    }
    for (size_t b = 0; b < n_bad; b++) {
        const char *argv[] = {names[0], bad[b], NULL};
        quiet(true);
        const enum opts_status st = parse(spec, args, argv);
        quiet(false);
        if (st != OPTS_USAGE)
            fail_msg("hearth %s %s %s: taken", spec->name, names[0], bad[b]);
    }
    /* a value missing at the end of the line */
    if (o->kind != OPT_FLAG) {
        const char *argv[] = {names[0], NULL};
        quiet(true);
        const enum opts_status st = parse(spec, args, argv);
        quiet(false);
        assert_int_equal(st, OPTS_USAGE);
    }
}

static void test_every_option_parses(void **state)
{
    (void)state;
    n_checked = 0;
    each_option(option_parses);
    print_message("%zu spellings of options parsed\n", n_checked);
    assert_true(n_checked > 100);
    for (size_t c = 0; c < cmd_table_n; c++) {
        const struct cmd_spec *spec = cmd_table[c].spec;
        if (!spec)
            continue;
        const char *unknown[] = {"--no-such-option", NULL};
        char *args            = malloc(spec->args_size);
        assert_non_null(args);
        quiet(true);
        assert_int_equal(parse(spec, args, unknown), OPTS_USAGE);
        quiet(false);
        free(args);
    }
}

/* A default the help states as a value of o's kind is what the command starts from. */
static void default_holds(const struct cmd_spec *spec, const struct opt *o, size_t off,
                          const char *base, char *args)
{
    if (!o->def || o->kind == OPT_FLAG || o->kind == OPT_MULTI)
        return;
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)strcspn(o->names, " "), o->names);
    if (o->kind == OPT_STR) {
        const char *dflt = *(const char **)(base + off + o->off);
        if (dflt && strcmp(dflt, o->def))
            fail_msg("hearth %s %s: the help says %s, the command starts from %s", spec->name, name,
                     o->def, dflt);
        return;
    }
    const char *argv[] = {name, o->def, NULL};
    quiet(true);
    const enum opts_status st = parse(spec, args, argv);
    quiet(false);
    if (st != OPTS_GO)
        return; /* prose: "the CPU count" */
    if (memcmp(args, base, spec->args_size))
        fail_msg("hearth %s %s: the help says the default is %s, but the command "
                 "starts from another value",
                 spec->name, name, o->def);
}

static void test_stated_defaults_hold(void **state)
{
    (void)state;
    each_option(default_holds);
}

/* --------------------------------------------------- generated docs --- */

/* What cmd prints, run from the top of the tree: the options tables in-process (the test links
 * the commands' lists, so it needs no built binary), anything else through sh. */
static char *generate(const char *cmd)
{
    char *out  = NULL;
    size_t len = 0;
    for (size_t c = 0; c < cmd_table_n; c++) {
        char want[128];
        snprintf(want, sizeof want, "./build/hearth %s --help-md", cmd_table[c].name);
        if (strcmp(cmd, want) || !cmd_table[c].spec)
            continue;
        FILE *fp = open_memstream(&out, &len);
        assert_non_null(fp);
        opts_markdown(cmd_table[c].spec, fp);
        fclose(fp);
        return out;
    }
    char line[512];
    snprintf(line, sizeof line, "cd '%s' && %s", HEARTH_TOP, cmd);
    FILE *p = popen(line, "r");
    assert_non_null(p);
    FILE *fp = open_memstream(&out, &len);
    int ch;
    while ((ch = fgetc(p)) != EOF)
        fputc(ch, fp);
    fclose(fp);
    assert_int_equal(pclose(p), 0);
    return out;
}

/* Checks each generated region of the file at path; marks the commands whose tables it holds. */
static void check_file(const char *path, bool *has_table)
{
    char *text = tu_read_file(path, NULL);
    assert_non_null(text);
    static const char begin[] = "<!-- BEGIN: ", end[] = "<!-- END: ";
    for (char *p = strstr(text, begin); p; p = strstr(p, begin)) {
        char *cmd_end = strstr(p, " -->\n");
        assert_non_null(cmd_end);
        char cmd[256];
        snprintf(cmd, sizeof cmd, "%.*s", (int)(cmd_end - p - strlen(begin)), p + strlen(begin));
        char closing[300];
        snprintf(closing, sizeof closing, "%s%s -->", end, cmd);
        char *body = cmd_end + strlen(" -->\n"), *stop = strstr(body, closing);
        if (!stop)
            fail_msg("%s: '%s%s -->' has no closing '%s'", path, begin, cmd, closing);
        char *want            = generate(cmd);
        const size_t have_len = (size_t)(stop - body);
        if (strlen(want) != have_len || memcmp(want, body, have_len))
            fail_msg("%s: the region of '%s' differs from what it prints now; run make docs", path,
                     cmd);
        free(want);
        for (size_t c = 0; c < cmd_table_n; c++) {
            char table[128];
            snprintf(table, sizeof table, "./build/hearth %s --help-md", cmd_table[c].name);
            if (!strcmp(cmd, table))
                has_table[c] = true;
        }
        p = stop;
    }
    free(text);
}

static void test_docs_match_what_the_code_prints(void **state)
{
    (void)state;
    bool has_table[64] = {false};
    assert_true(cmd_table_n <= 64);
    check_file(HEARTH_TOP "/README.md", has_table);
    DIR *d = opendir(HEARTH_TOP "/docs");
    assert_non_null(d);
    struct dirent *e;
    size_t n_pages = 0;
    while ((e = readdir(d)) != NULL) {
        const size_t n = strlen(e->d_name);
        if (n < 4 || strcmp(e->d_name + n - 3, ".md"))
            continue;
        char path[512];
        snprintf(path, sizeof path, "%s/docs/%s", HEARTH_TOP, e->d_name);
        check_file(path, has_table);
        n_pages++;
    }
    closedir(d);
    print_message("%zu pages of docs checked\n", n_pages);
    for (size_t c = 0; c < cmd_table_n; c++)
        if (!has_table[c])
            fail_msg("no page of docs/ holds the options table of hearth %s "
                     "(<!-- BEGIN: ./build/hearth %s --help-md -->)",
                     cmd_table[c].name, cmd_table[c].name);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_command_has_lists),
        cmocka_unit_test(test_every_option_parses),
        cmocka_unit_test(test_stated_defaults_hold),
        cmocka_unit_test(test_docs_match_what_the_code_prints),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
