/*
 * deadline.c: the shutdown deadline (see deadline.h): one thread in a timed
 * wait on a condition variable that deadline_disarm signals.
 */
#include "serve/deadline.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

struct deadline {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* on CLOCK_MONOTONIC: a date change neither hastens nor delays it */
    struct timespec at;
    bool disarmed;
    double seconds;
    const char *what;
    int status;
};

static void *deadline_main(void *arg)
{
    struct deadline *d = arg;
    pthread_mutex_lock(&d->mu);
    int rc = 0;
    while (!d->disarmed && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&d->cv, &d->mu, &d->at);
    bool over = !d->disarmed;
    pthread_mutex_unlock(&d->mu);
    if (over) {
        fprintf(stderr, "hearth serve: %s did not finish within %g s; exiting\n", d->what,
                d->seconds);
        fflush(stderr);
        _exit(d->status);
    }
    return NULL;
}

struct deadline *deadline_arm(double seconds, const char *what, int status)
{
    struct deadline *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->seconds = seconds;
    d->what    = what;
    d->status  = status;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&d->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&d->mu, NULL);
    clock_gettime(CLOCK_MONOTONIC, &d->at);
    long ns = d->at.tv_nsec + (long)((seconds - (double)(time_t)seconds) * 1e9);
    d->at.tv_sec += (time_t)seconds + ns / 1000000000L;
    d->at.tv_nsec = ns % 1000000000L;
    if (pthread_create(&d->thread, NULL, deadline_main, d) != 0) {
        pthread_cond_destroy(&d->cv);
        pthread_mutex_destroy(&d->mu);
        free(d);
        return NULL;
    }
    return d;
}

void deadline_disarm(struct deadline *d)
{
    if (!d)
        return;
    pthread_mutex_lock(&d->mu);
    d->disarmed = true;
    pthread_cond_signal(&d->cv);
    pthread_mutex_unlock(&d->mu);
    pthread_join(d->thread, NULL);
    pthread_cond_destroy(&d->cv);
    pthread_mutex_destroy(&d->mu);
    free(d);
}
