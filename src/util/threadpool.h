/*
 * threadpool.h: a fixed set of worker threads that all run the same task
 * function together (fork-join), the caller being thread 0. The forward
 * pass splits each step (matmul rows, attention heads) by thread index, so
 * there is no task queue: one call = one parallel region ending in a join.
 *
 * Workers spin briefly for the next region before sleeping on a condition
 * variable, so back-to-back regions in a decode step cost little to wake.
 * Not reentrant: one region at a time, called from one thread.
 */
#ifndef HEARTH_THREADPOOL_H
#define HEARTH_THREADPOOL_H

/* fn(arg, ith, nth): the region's body for thread ith of nth. */
typedef void (*threadpool_fn)(void *arg, int ith, int nth);

struct threadpool;

/* n_threads >= 1 (1 = no workers, everything runs on the caller). NULL on failure. */
struct threadpool *threadpool_new(int n_threads);
void threadpool_free(struct threadpool *tp);
int threadpool_size(const struct threadpool *tp);
/* Workers blocked waiting for work (spun out and asleep): what a test waits on, never a clock. */
int threadpool_sleepers(const struct threadpool *tp);
/* Runs fn on every thread and returns when all have finished. */
void threadpool_run(struct threadpool *tp, threadpool_fn fn, void *arg);

/* The half-open range [*i0, *i1) of n items that thread ith of nth owns (contiguous, balanced). */
static inline void threadpool_split(long n, int ith, int nth, long *i0, long *i1)
{
    long per = n / nth, rem = n % nth;
    *i0 = ith * per + (ith < rem ? ith : rem);
    *i1 = *i0 + per + (ith < rem ? 1 : 0);
}

#endif
