/*
 * threadpool.c: fork-join workers with spin-then-sleep waiting.
 *
 * Invariant: `gen` counts regions started; a worker that has seen gen g runs
 * region g exactly once, then increments `done`. The caller publishes fn/arg
 * before bumping gen (release), workers read them after seeing it (acquire).
 */
#include "util/threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#define SPIN_ITERS 20000 /* ~tens of microseconds: covers the gap between ops of one step */

struct threadpool {
    int n_threads;
    pthread_t *threads; /* [n_threads - 1] */
    threadpool_fn fn;
    void *arg;
    atomic_uint gen; /* regions started */
    atomic_int done; /* workers finished with the current region */
    atomic_int stop;
    atomic_int sleepers; /* workers blocked on cond */
    int spin;            /* pause iterations before sleeping (or yielding, for the caller) */
    pthread_mutex_t mu;
    pthread_cond_t cond;
};

struct worker_arg {
    struct threadpool *tp;
    int ith;
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void *worker_main(void *p)
{
    struct worker_arg wa = *(struct worker_arg *)p;
    free(p);
    struct threadpool *tp = wa.tp;
    unsigned seen         = 0;
    for (;;) {
        unsigned g;
        int spins = 0;
        while ((g = atomic_load_explicit(&tp->gen, memory_order_acquire)) == seen &&
               !atomic_load(&tp->stop)) {
            if (++spins < tp->spin) {
                cpu_relax();
                continue;
            }
            pthread_mutex_lock(&tp->mu);
            atomic_fetch_add(&tp->sleepers, 1);
            while (atomic_load(&tp->gen) == seen && !atomic_load(&tp->stop))
                pthread_cond_wait(&tp->cond, &tp->mu);
            atomic_fetch_sub(&tp->sleepers, 1);
            pthread_mutex_unlock(&tp->mu);
        }
        if (atomic_load(&tp->stop))
            return NULL;
        seen = g;
        tp->fn(tp->arg, wa.ith, tp->n_threads);
        atomic_fetch_add_explicit(&tp->done, 1, memory_order_release);
    }
}

struct threadpool *threadpool_new(int n_threads)
{
    if (n_threads < 1)
        n_threads = 1;
    struct threadpool *tp = calloc(1, sizeof *tp);
    if (!tp)
        return NULL;
    tp->n_threads = n_threads;
    /* more threads than CPUs: a spinning thread holds the core a descheduled peer needs,
     * and every region waits out whole time slices; then sleep and yield at once */
    long n_cpu = sysconf(_SC_NPROCESSORS_ONLN);
    tp->spin   = n_cpu > 0 && n_threads > n_cpu ? 1 : SPIN_ITERS;
    pthread_mutex_init(&tp->mu, NULL);
    pthread_cond_init(&tp->cond, NULL);
    tp->threads = calloc((size_t)n_threads, sizeof *tp->threads);
    if (!tp->threads)
        goto err;
    for (int i = 1; i < n_threads; i++) {
        struct worker_arg *wa = malloc(sizeof *wa);
        if (!wa)
            goto err_threads;
        wa->tp  = tp;
        wa->ith = i;
        if (pthread_create(&tp->threads[i - 1], NULL, worker_main, wa) != 0) {
            free(wa);
            goto err_threads;
        }
        continue;
    err_threads:
        tp->n_threads = i; /* join only those started */
        threadpool_free(tp);
        return NULL;
    }
    return tp;
err:
    pthread_mutex_destroy(&tp->mu);
    pthread_cond_destroy(&tp->cond);
    free(tp);
    return NULL;
}

void threadpool_free(struct threadpool *tp)
{
    if (!tp)
        return;
    pthread_mutex_lock(&tp->mu);
    atomic_store(&tp->stop, 1);
    pthread_cond_broadcast(&tp->cond);
    pthread_mutex_unlock(&tp->mu);
    for (int i = 1; i < tp->n_threads; i++)
        pthread_join(tp->threads[i - 1], NULL);
    pthread_mutex_destroy(&tp->mu);
    pthread_cond_destroy(&tp->cond);
    free(tp->threads);
    free(tp);
}

int threadpool_sleepers(const struct threadpool *tp)
{
    return atomic_load(&((struct threadpool *)tp)->sleepers);
}

int threadpool_size(const struct threadpool *tp)
{
    return tp->n_threads;
}

void threadpool_run(struct threadpool *tp, threadpool_fn fn, void *arg)
{
    if (tp->n_threads == 1) {
        fn(arg, 0, 1);
        return;
    }
    tp->fn  = fn;
    tp->arg = arg;
    atomic_store_explicit(&tp->done, 0, memory_order_relaxed);
    /* seq_cst pairs with the worker's sleepers increment: one of the two sees the other */
    atomic_fetch_add(&tp->gen, 1);
    if (atomic_load(&tp->sleepers) > 0) {
        pthread_mutex_lock(&tp->mu);
        pthread_cond_broadcast(&tp->cond);
        pthread_mutex_unlock(&tp->mu);
    }
    fn(arg, 0, tp->n_threads);
    /* on a loaded machine a worker may be descheduled: stop burning its core after a while */
    int spins = 0;
    while (atomic_load_explicit(&tp->done, memory_order_acquire) < tp->n_threads - 1) {
        if (++spins < tp->spin)
            cpu_relax();
        else
            sched_yield();
    }
}
