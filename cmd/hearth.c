/*
 * hearth.c: the command-line entry point. Parses the subcommand name and
 * hands the rest of argv to it; owns exit().
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"

static void usage(FILE *fp)
{
    fprintf(fp, "usage: hearth COMMAND [options]   (hearth COMMAND --help for its options)\n\n");
    for (size_t i = 0; i < cmd_table_n; i++)
        fprintf(fp, "  %-13s %s\n", cmd_table[i].name, cmd_table[i].help);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return EXIT_OK;
    }
    for (size_t i = 0; i < cmd_table_n; i++)
        if (!strcmp(argv[1], cmd_table[i].name))
            exit(cmd_table[i].fn(argc - 1, argv + 1));
    fprintf(stderr, "hearth: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return EXIT_USAGE;
}
