/*
 * opts.h: every command's options, declared once as lists. The parser, the
 * --help text and the --help-md tables of docs/ all come from the same entry,
 * so the spellings, ranges, defaults and descriptions cannot drift apart.
 *
 * A command keeps its options in one struct of its own (struct serve_args),
 * made of group structs: the groups several commands share (the model, its
 * placement, the K/V types, the threads) are one list each, used by every
 * command that takes them, so an option is spelt the same everywhere. Each
 * entry names every spelling it answers to, llama.cpp's among them, so a
 * llama-server command line works wherever hearth has its options.
 */
#ifndef HEARTH_CMD_OPTS_H
#define HEARTH_CMD_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum opt_kind {
    OPT_FLAG,   /* bool, set true; takes no value */
    OPT_LONG,   /* long in [lo, hi]; .word (as "max") stands for .word_value */
    OPT_FLOAT,  /* float in [lo, hi] */
    OPT_BYTES,  /* int64_t: a size, as 8G, 512M, 64MiB or a count of bytes */
    OPT_STR,    /* const char *: the argument itself */
    OPT_CHOICE, /* int: the index of the value among .choices */
    OPT_MULTI,  /* struct opt_multi: repeatable, each value appended */
    OPT_CUSTOM, /* .set parses the value into the field */
};

/* A repeatable option's values, or a command's positional arguments, in order. */
#define OPT_MULTI_MAX 64
struct opt_multi {
    const char *v[OPT_MULTI_MAX];
    size_t n; /* 0..OPT_MULTI_MAX */
};

struct opt {
    const char *names; /* every spelling, space-separated, the help's order: "-c --ctx-size" */
    const char *value; /* the value's name in the help ("N", "FILE"); NULL for a flag */
    enum opt_kind kind;
    size_t off;          /* the field in its group's struct */
    double lo, hi;       /* OPT_LONG, OPT_FLOAT: the range taken */
    const char *choices; /* OPT_CHOICE: the values, '|'-separated; OPT_LONG: the word */
    long word_value;     /* OPT_LONG: what .word stores */
    const char *def;     /* the default as the help states it, or NULL; where it is a value of
                            the option's kind, test_opts holds the command's default to it */
    const char *help;    /* one paragraph, wrapped by the printers */
    /* OPT_CUSTOM: takes v into field, or prints "hearth CMD: OPT ..." and returns false */
    bool (*set)(const char *cmd, const char *opt, const char *v, void *field);
    const char *example; /* OPT_CUSTOM: a value it takes, for test_opts */
};

/* A list of options under one heading, filling one struct. */
struct opt_group {
    const char *title;
    const struct opt *opts;
    size_t n_opts;
};

#define OPT_GROUP(title, list)                                                                     \
    {                                                                                              \
        title, list, sizeof list / sizeof list[0]                                                  \
    }

/* A group as one command uses it: where its struct sits in the command's. */
struct opt_use {
    const struct opt_group *group;
    size_t off;
};

/* One command's command line. */
struct cmd_spec {
    const char *name;     /* "serve" */
    const char *synopsis; /* the usage lines after "usage: ", '\n' between them */
    const char *about;    /* a paragraph before the options, or NULL */
    const char *epilog;   /* text after them, printed as it is, or NULL */
    const struct opt_use *uses;
    size_t n_uses;
    size_t pos_min, pos_max; /* positional arguments taken (pos_max 0: none) */
    size_t pos_off;          /* where they go: a struct opt_multi in the command's struct */
    const void *defaults;    /* the command's struct before any option, args_size bytes */
    size_t args_size;
};

/* What opts_parse found. */
enum opts_status {
    OPTS_GO,    /* parsed: the command goes on */
    OPTS_HELP,  /* --help or --help-md printed to stdout: exit 0 */
    OPTS_USAGE, /* a usage error, one line on stderr: exit 2 */
};

/*
 * Fills args (spec->args_size bytes) with spec->defaults, then argv[1..argc)
 * into it: each option by any of its spellings, as "--name value" or
 * "--name=value"; what is not an option is positional ("--" ends the
 * options). -h and --help print the help, --help-md the options tables, to
 * stdout. An unknown option, a missing or bad value, or a wrong count of
 * positionals prints one line naming it to stderr and returns OPTS_USAGE.
 */
enum opts_status opts_parse(const struct cmd_spec *spec, void *args, int argc, char **argv);

/*
 * The place in argv (a command line opts_parse took) of the last option given that is one of
 * names (space-separated spellings, any of an option's), or 0 when none is: what the parsed
 * values cannot say, as whether an option was given at its default, or which of two came last.
 */
int opts_last(const struct cmd_spec *spec, int argc, char **argv, const char *names);

/* The status for opts_parse's result: EXIT_OK for OPTS_HELP, EXIT_USAGE for OPTS_USAGE. */
int opts_exit(enum opts_status st);

/* The --help text: usage lines, about, options by group with their defaults, epilog. */
void opts_help(const struct cmd_spec *spec, FILE *fp);
/* The --help-md text: one markdown table of option, value, default, description per group. */
void opts_markdown(const struct cmd_spec *spec, FILE *fp);
/* The usage lines alone (for a usage error's second line). */
void opts_usage(const struct cmd_spec *spec, FILE *fp);

/* The option entry spelt name in spec, or NULL; *base_off is its group's offset. */
const struct opt *opts_find(const struct cmd_spec *spec, const char *name, size_t *base_off);

/* ------------------------------------------------- the shared groups --- */

/* -m, -hf, --offline: the model a command loads (cmd_model.c). */
struct model_args {
    const char *path; /* -m, or NULL */
    const char *hf;   /* -hf ORG/REPO[:QUANT], or NULL */
    bool offline;
};
extern const struct opt_group opts_model;

/* Refuses both or neither of -m and -hf, and --offline without -hf: EXIT_OK, or EXIT_USAGE with
 * one line on stderr. A command checks early, so a mistyped flag costs no download. */
int model_args_check(const char *cmd, const struct model_args *m);

/*
 * The model's local path into path (path_len bytes): -m's, or -hf's from the
 * Hub's cache, downloaded when missing (--offline: the cache only), after
 * model_args_check. Returns EXIT_OK or the exit status, with one line on
 * stderr.
 */
int model_args_path(const char *cmd, const struct model_args *m, char *path, size_t path_len);

/* -t: worker threads; 0 until model_threads resolves it. */
struct thread_args {
    long n;
};
extern const struct opt_group opts_threads;
/* The threads asked, or the default (the CPUs this process may run on). */
long threads_or_default(const struct thread_args *t);

/* -ngl, --device, --tensor-split, --layer-split (placement.c): struct placement. */
extern const struct opt_group opts_placement;
/* -ctk, -ctv (args.c): struct cache_types. */
extern const struct opt_group opts_cache_types;

#endif
