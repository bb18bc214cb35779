/*
 * sched_int.h: the scheduler's state, shared by sched.c (the thread, its
 * steps) and sched_slots.c (slot actions: save, restore, erase). Internal
 * to src/sched; see sched.c for who may touch what.
 */
#ifndef HEARTH_SCHED_INT_H
#define HEARTH_SCHED_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "sample/chain.h"
#include "sched/sched.h"
#include "sched/turns.h"
#include "sched/stopmatch.h"
#include "spec/depth.h"

struct spec;
struct spec_req;

struct qent {
    struct sched_job *job;
    double t_submit; /* monotonic seconds */
    bool cancelled;
};

struct slot {
    int32_t id;                /* == its sequence id in the context */
    struct sched_job *job;     /* NULL = idle */
    struct sample_chain chain; /* the job's sampling, its buffers the slot's for good */
    hearth_token *tokens;      /* [n_ctx + 1] prompt then generated tokens */
    int32_t n_tokens;          /* entries in tokens */
    int32_t n_last;            /* idle: tokens[0..n_last) is the slot's conversation, the
                                  tokens whose K/V it held when its job ended or a restore
                                  loaded (slot actions); 0 while busy */
    int32_t n_past;            /* leading tokens whose KV is in the cache */
    int32_t n_cached;          /* of those, reused from the prefix cache at start */
    int32_t n_generated;       /* sampled tokens, EOG included */
    char *piece;               /* [piece_cap] one token's text */
    size_t piece_cap;
    struct stopmatch sm;
    double t_submit, t_first;      /* monotonic seconds; t_first < 0 until the first token */
    uint64_t order;                /* start order: the youngest job yields on a full pool */
    hearth_token *draft;           /* [draft_max] this step's drafted tokens */
    int32_t n_draft;               /* of them in this step's batch, after its decode row */
    enum spec_drafter draft_src;   /* who proposed them */
    struct spec_depth depth;       /* tokens to draft next: follows the recent acceptance */
    int32_t n_drafted, n_accepted; /* this job's */
    int32_t n_drafted_by[SPEC_N_DRAFTERS], n_accepted_by[SPEC_N_DRAFTERS]; /* those by drafter */
    hearth_token force;   /* test hook: the token this sample must pick, -1 none */
    hearth_token judging; /* verify(): the draft this sample judges, -1 none */
    bool judged_kept;     /* it was the token sampled */
    int32_t n_fed;        /* tokens the n-gram pool has been fed */
    int32_t take;         /* rows in this step's batch */
    int32_t row;          /* batch row holding this slot's logits, -1 none */
    bool fresh;           /* assigned this step, not started yet */
};

struct sched {
    struct hearth_model *model;
    struct hearth_context *ctx;
    struct turns *turns; /* finished jobs' tokens (--reply-tokens own), or NULL */
    int32_t n_slots, n_ctx, n_batch, max_queue, n_vocab;
    struct hearth_stage_info stages[SCHED_MAX_STAGES]; /* the context's, fixed at start */
    int32_t n_stages;
    sched_event_fn on_event;
    void *user;
    pthread_t thread;
    bool thread_started;
    int gate_fd; /* the test gate's read end (scheduler thread only); -1: no gate, or lifted */
    int wake[2]; /* self-pipe out of the gate, written by any thread; -1: no gate */

    /* scheduler thread only */
    struct slot *slots;     /* [n_slots] */
    hearth_token *b_tok;    /* [n_batch] this step's micro-batch */
    int32_t *b_pos, *b_seq; /* [n_batch] */
    int8_t *b_logits;       /* [n_batch] */
    struct qent *dropped;   /* [q_cap] cancelled queued jobs taken out this step */
    bool *cancel_now;       /* [n_slots] cancel flags copied this step */
    int32_t rr;             /* slot the prefill share starts from */
    uint64_t n_started;
    struct sched_stats acc;  /* running totals */
    struct spec_params spec; /* as started; draft_max 0 when off */
    struct spec *drafters;   /* NULL when off */
    struct spec_req *reqs;   /* [n_slots] this step's draft requests */
    bool no_drafts;          /* this step is retried without drafts (the pool was full) */
    bool spec_broken;        /* test hook HEARTH_SPEC_TEST_BREAK: keep every draft (wrong) */

    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* under mu */
    bool stopping;
    struct qent *queue; /* [q_cap] ring */
    int32_t q_cap, q_head, q_len;
    int32_t n_free;               /* idle slots, counting those queued jobs will take */
    bool any_cancelled;           /* some queued job is cancelled */
    bool *slot_busy;              /* [n_slots] */
    uint64_t *slot_req;           /* [n_slots] request_id of the slot's job */
    bool *slot_cancel;            /* [n_slots] */
    struct sched_stats stats;     /* copy of acc after the last step */
    struct sched_slot_info *info; /* [n_slots] copy after the last step */
    struct sched_slot_op *ops;    /* slot actions waiting, oldest first */
};

/* From any thread: pulls the scheduler out of the test gate (sched.c). */
void sched_gate_wake(struct sched *s);
/* Runs the slot actions waiting for slots that are idle now (sched_slots.c). Scheduler thread. */
void sched_slot_ops_run(struct sched *s);
/* Fails every waiting slot action with msg (shutting down). Scheduler thread. */
void sched_slot_ops_fail(struct sched *s, const char *msg);

#endif
