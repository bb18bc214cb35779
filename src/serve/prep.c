/*
 * prep.c: the preparation workers (see prep.h): a FIFO of tasks under one
 * mutex and condition variable, taken by a fixed set of threads. Each worker
 * records when its task started, so /health can tell a wedged pool.
 */
#include "serve/prep.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "util/clock.h"

struct worker {
    struct prep *p;
    pthread_t thread;
    double busy_since; /* now_s() its task started; 0: idle. Under p->mu */
};

struct prep {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct prep_task *head, **tail; /* queued, oldest first */
    bool stopping;
    bool gate_taken; /* a task waits at the test gate */
    prep_done_fn done;
    void *user;
    const char *gate; /* HEARTH_SERVE_PREP_GATE, or NULL */
    int n_workers, n_started;
    struct worker w[PREP_MAX_WORKERS];
};

/* The test gate: one byte (a closed or missing FIFO lets everything through). */
static void wait_gate(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    char c;
    (void)!read(fd, &c, 1);
    close(fd);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct prep *p   = w->p;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (!p->head && !p->stopping)
            pthread_cond_wait(&p->cv, &p->mu);
        struct prep_task *t = p->stopping ? NULL : p->head;
        if (t) {
            p->head = t->next;
            if (!p->head)
                p->tail = &p->head;
            w->busy_since = now_s();
        }
        /* a cancelled task is not run, so it needs no gate either */
        bool gated = t && p->gate && !p->gate_taken && !atomic_load(&t->cancel);
        if (gated)
            p->gate_taken = true;
        pthread_mutex_unlock(&p->mu);
        if (!t)
            return NULL; /* stopping: prep_stop hands back what is queued */
        if (gated) {
            wait_gate(p->gate);
            pthread_mutex_lock(&p->mu);
            p->gate_taken = false;
            pthread_mutex_unlock(&p->mu);
        }
        t->next    = NULL;
        t->skipped = atomic_load(&t->cancel) != 0;
        if (!t->skipped)
            t->run(t);
        pthread_mutex_lock(&p->mu);
        w->busy_since = 0;
        pthread_mutex_unlock(&p->mu);
        p->done(t, p->user);
    }
}

struct prep *prep_start(int n_workers, prep_done_fn done, void *user)
{
    if (n_workers < 1 || n_workers > PREP_MAX_WORKERS)
        return NULL;
    struct prep *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->tail      = &p->head;
    p->done      = done;
    p->user      = user;
    p->n_workers = n_workers;
    p->gate      = getenv("HEARTH_SERVE_PREP_GATE");
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    for (; p->n_started < n_workers; p->n_started++) {
        p->w[p->n_started].p = p;
        if (pthread_create(&p->w[p->n_started].thread, NULL, worker_main, &p->w[p->n_started]))
            break;
    }
    if (p->n_started < n_workers) {
        prep_stop(p);
        return NULL;
    }
    return p;
}

void prep_submit(struct prep *p, struct prep_task *t)
{
    t->next    = NULL;
    t->skipped = false;
    pthread_mutex_lock(&p->mu);
    *p->tail = t;
    p->tail  = &t->next;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

double prep_busy_since(struct prep *p)
{
    double since = 0;
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < p->n_workers; i++) {
        if (p->w[i].busy_since == 0) {
            since = 0;
            break;
        }
        if (p->w[i].busy_since > since)
            since = p->w[i].busy_since;
    }
    pthread_mutex_unlock(&p->mu);
    return since;
}

int prep_workers(const struct prep *p)
{
    return p->n_workers;
}

void prep_stop(struct prep *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stopping         = true;
    struct prep_task *t = p->head;
    p->head             = NULL;
    p->tail             = &p->head;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    while (t) {
        struct prep_task *next = t->next;
        t->next                = NULL;
        t->skipped             = true;
        p->done(t, p->user);
        t = next;
    }
    for (int i = 0; i < p->n_started; i++)
        pthread_join(p->w[i].thread, NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
}
