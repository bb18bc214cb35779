/*
 * prep.h: the preparation workers of `hearth serve` (docs/ARCHITECTURE.md,
 * "Serving: around the request path").
 *
 * Chat-template rendering, tokenizing and grammar compiles take time that
 * grows with the request (a 4 MiB body, a grammar whose repetitions nest),
 * so the event loop never does them: it hands a task to this pool, whose
 * workers run the task's work and give the finished task back through a
 * callback (the loop's mailbox). Tasks start in the order they were
 * submitted; with several workers they may finish in any order.
 *
 * Several workers rather than compiles moved off a shared path: every stage
 * of a preparation (a template's loops, the tokenizer on megabytes, a
 * compile) can be the slow one, and a worker pool bounds them all alike, one
 * request per worker; how long one worker stays held is up to the work's
 * own bounds (a grammar compile's budget, the cancel flag below). The pool
 * is small and fixed (--threads-http): when every worker is busy, tasks
 * wait in the queue and the loop goes on.
 *
 * Cancelling: a task whose cancel flag is set before a worker takes it is
 * handed back without running (skipped); a running task reads the flag
 * between its stages (oai_request.cancel points at it).
 *
 * Test hook: HEARTH_SERVE_PREP_GATE=PATH (a FIFO): a task that starts while
 * no other task waits at the gate reads one byte from PATH first; the others
 * run straight through. So a test holds one preparation at a known point and
 * sees the other preparations and the loop go on.
 *
 * Thread-safety: prep_submit, prep_busy_since from any thread; run() on a
 * worker; done() is called on a worker and must not block (it posts).
 */
#ifndef HEARTH_PREP_H
#define HEARTH_PREP_H

#include <stdatomic.h>
#include <stdbool.h>

#define PREP_MAX_WORKERS 64

struct prep_task {
    struct prep_task *next;           /* queue link (the prep module's) */
    void (*run)(struct prep_task *t); /* the work, on a worker */
    atomic_int cancel;                /* nonzero: nobody wants the result (any thread sets it) */
    bool skipped;                     /* set by the pool: handed back without run */
};

typedef void (*prep_done_fn)(struct prep_task *t, void *user);

struct prep;

/* Starts n_workers (1..PREP_MAX_WORKERS) workers; done(t, user) receives each task after its
 * run (or its skip). NULL on failure. */
struct prep *prep_start(int n_workers, prep_done_fn done, void *user);
/* Queues t (the caller keeps ownership; it comes back through done). t->cancel is the
 * caller's: initialise it before. */
void prep_submit(struct prep *p, struct prep_task *t);
/*
 * Since when (now_s, util/clock.h) every worker has been busy: the start of the youngest
 * task running, a worker held at the test gate included; 0 when a worker is idle.
 */
double prep_busy_since(struct prep *p);
/* How many workers p has. */
int prep_workers(const struct prep *p);
/*
 * Hands what is still queued back skipped, waits for the running tasks and frees p. A task
 * that never ends holds this call: the caller bounds its shutdown otherwise (deadline.h).
 */
void prep_stop(struct prep *p);

#endif
