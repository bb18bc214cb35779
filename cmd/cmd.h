/*
 * cmd.h: the hearth subcommands. Each takes the arguments after its name
 * (argv[0] is the subcommand) and returns the process exit status:
 * 0 success, 1 runtime error (one line on stderr), 2 usage error.
 */
#ifndef HEARTH_CMD_H
#define HEARTH_CMD_H

#include <stdbool.h>
#include <stdint.h>

int cmd_run(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_bench_engine(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_devices(int argc, char **argv);

/* Exit statuses shared by every subcommand. */
enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2 };

/*
 * Option values: parse s fully as a number in [lo, hi]. On failure print
 * "hearth CMD: OPT expects ..." to stderr and return false (a usage error).
 */
bool arg_long(const char *cmd, const char *opt, const char *s, long lo, long hi, long *out);
bool arg_float(const char *cmd, const char *opt, const char *s, double lo, double hi, float *out);
/* The value after argv[*i] (advancing *i), or NULL with a usage message when missing. */
const char *arg_value(const char *cmd, int argc, char **argv, int *i);

/* Default worker threads: the CPUs this process may run on (at least 1). More
 * threads than cores make the spinning fork-join pool wait on descheduled peers. */
long default_threads(void);

#endif
