/*
 * prep.c: the preparation thread (see prep.h): a FIFO of tasks under one
 * mutex and condition variable.
 */
#include "serve/prep.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

struct prep {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct prep_task *head, **tail; /* queued, oldest first */
    bool stopping;
    prep_done_fn done;
    void *user;
    const char *gate; /* HEARTH_SERVE_PREP_GATE, or NULL */
};

/* The test gate: one byte per task (a closed or missing FIFO lets everything through). */
static void wait_gate(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return;
    char c;
    (void)!read(fd, &c, 1);
    close(fd);
}

static void *prep_main(void *arg)
{
    struct prep *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (!p->head && !p->stopping)
            pthread_cond_wait(&p->cv, &p->mu);
        struct prep_task *t = p->head;
        if (t) {
            p->head = t->next;
            if (!p->head)
                p->tail = &p->head;
        }
        pthread_mutex_unlock(&p->mu);
        if (!t)
            return NULL; /* stopping, and nothing left */
        if (p->gate)
            wait_gate(p->gate);
        t->next = NULL;
        t->run(t);
        p->done(t, p->user);
    }
}

struct prep *prep_start(prep_done_fn done, void *user)
{
    struct prep *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->tail = &p->head;
    p->done = done;
    p->user = user;
    p->gate = getenv("HEARTH_SERVE_PREP_GATE");
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    if (pthread_create(&p->thread, NULL, prep_main, p) != 0) {
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->cv);
        free(p);
        return NULL;
    }
    return p;
}

void prep_submit(struct prep *p, struct prep_task *t)
{
    t->next = NULL;
    pthread_mutex_lock(&p->mu);
    *p->tail = t;
    p->tail  = &t->next;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

void prep_stop(struct prep *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stopping = true;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
}
