/*
 * deadline.h: the shutdown deadline of `hearth serve`.
 *
 * Shutdown waits for threads it cannot interrupt: a model still loading, a
 * cache directory scan, a preparation inside a long compile, the disk
 * tier's flush. Rather than teach each of them to stop, a signal arms a
 * deadline: a thread that waits that long for shutdown to finish and, if it
 * has not, says so on stderr and ends the process with the status a clean
 * shutdown gives. Nothing is freed then; the kernel takes the memory and the
 * descriptors back, and every reply was already ended or abandoned.
 *
 * Thread-safety: deadline_arm and deadline_disarm from one thread (the loop).
 */
#ifndef HEARTH_DEADLINE_H
#define HEARTH_DEADLINE_H

struct deadline;

/*
 * Starts the clock: after seconds, unless disarmed, "hearth serve: WHAT did not finish within
 * N s; exiting" goes to stderr and the process ends with _exit(status). NULL when no thread
 * could be started (there is then no deadline).
 */
struct deadline *deadline_arm(double seconds, const char *what, int status);
/* Stops the clock, waits for its thread and frees d (NULL: nothing). */
void deadline_disarm(struct deadline *d);

#endif
