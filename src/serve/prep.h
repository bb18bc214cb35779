/*
 * prep.h: the preparation thread of `hearth serve` (docs/ARCHITECTURE.md,
 * "Serving: around the request path").
 *
 * Chat-template rendering and tokenizing take time that grows with the
 * prompt (a 4 MiB body takes a while), so the event loop never does them:
 * it hands a task to this thread, which runs the task's work and gives the
 * finished task back through a callback (the loop's mailbox). Tasks run one
 * at a time in the order they were submitted.
 *
 * Test hook: HEARTH_SERVE_PREP_GATE=PATH (a FIFO) makes the thread read one
 * byte from PATH before each task, so a test can hold a preparation at a
 * known point and see that the loop goes on serving meanwhile.
 *
 * Thread-safety: prep_submit from any thread; run() on the prep thread;
 * done() is called on the prep thread and must not block (it posts).
 */
#ifndef HEARTH_PREP_H
#define HEARTH_PREP_H

#include <stdbool.h>

struct prep_task {
    struct prep_task *next;            /* queue link (the prep module's) */
    void (*run)(struct prep_task *t);  /* the work, on the prep thread */
};

typedef void (*prep_done_fn)(struct prep_task *t, void *user);

struct prep;

/* Starts the thread; done(t, user) receives each task after its run. NULL on failure. */
struct prep *prep_start(prep_done_fn done, void *user);
/* Queues t (the caller keeps ownership; it comes back through done). */
void prep_submit(struct prep *p, struct prep_task *t);
/* Runs what is queued, stops the thread and frees p. */
void prep_stop(struct prep *p);

#endif
