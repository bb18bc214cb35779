/*
 * sched.h: the scheduler, the one thread that owns the engine (context, KV
 * pool, samplers) while the HTTP front (an event loop) owns the sockets.
 *
 * The front turns a validated request into a sched_job (prompt already
 * tokenized, sampling parameters resolved) and submits it. Each scheduler
 * step builds ONE micro-batch from every active slot: a decode token for each
 * generating slot plus prefill chunks of slots still reading their prompt,
 * up to n_batch tokens, so a long prompt never freezes the other streams.
 * Jobs beyond the slots wait in a bounded queue; sched_submit refuses past
 * it (the front answers 503 with Retry-After).
 *
 * Results flow back as sched_event values through a callback that runs on
 * the scheduler thread: the front's callback copies the event into its own
 * queue and wakes its event loop (event_active); it must not block.
 *
 * Test hook, inert unless the variable is set: HEARTH_SERVE_SCHED_GATE=PATH
 * (a FIFO) makes the thread read one byte from PATH before each step that
 * runs the engine (one token for every generating slot), so a test can let
 * exactly k steps run and hold a stream mid-generation. Only those steps
 * wait: submissions, cancellations and sched_stop still get through while
 * it is held. The FIFO is opened at sched_start (missing: no gate); once
 * its writer has come and gone (end of file: the test closed it, or died)
 * every step goes through.
 *
 * Thread-safety: sched_submit, sched_cancel, sched_snapshot may be called
 * from any thread; everything else belongs to the scheduler thread.
 */
#ifndef HEARTH_SCHED_H
#define HEARTH_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hearth.h"
#include "sample/chain.h"
#include "spec/spec.h"

#define SCHED_MAX_STOP 8 /* stop strings per job (OpenAI allows 4) */

/* One generation: one prompt, one choice. A request with n > 1 or an array
 * of prompts becomes several jobs sharing request_id, one per choice. */
struct sched_job {
    uint64_t id;          /* unique, set by the front */
    uint64_t request_id;  /* the front's request this choice belongs to */
    int32_t choice;       /* index of the choice in the response */
    hearth_token *prompt; /* [n_prompt], owned by the job (malloc'd), BOS included */
    int32_t n_prompt;     /* >= 1, < slot context */
    int32_t max_tokens;   /* >= 1; generation also stops when the slot context is full */
    struct hearth_sampler_params sampling;
    float presence_penalty;   /* OpenAI's, -2..2, 0 = off */
    float frequency_penalty;  /* OpenAI's, -2..2, 0 = off */
    struct sample_bias *bias; /* [n_bias] logit_bias, owned (malloc'd), or NULL */
    int32_t n_bias;
    bool no_cache;              /* compute the whole prompt: no prefix reuse (cache_prompt) */
    char *stop[SCHED_MAX_STOP]; /* owned, NUL-terminated, non-empty */
    int32_t n_stop;
    int32_t top_logprobs; /* -1 = no logprobs; 0..20 = logprobs with that many alternatives */
    bool ignore_eos;
    /* constrained output: the grammar the reply must match (a reference the job owns; NULL:
     * none), lazy from the first of its triggers when n_triggers > 0 (grammar_matcher_new) */
    struct grammar *grammar;
    char **triggers; /* [n_triggers], owned */
    int32_t n_triggers;
    void *user; /* the front's, handed back in every event of the job */
};

/* Frees a job's owned memory (prompt, stop strings, biases, grammar reference, triggers) and the
 * job. */
void sched_job_free(struct sched_job *job);

enum sched_event_kind {
    SCHED_EV_TEXT,  /* text generated for the job (may be empty for a token held back) */
    SCHED_EV_DONE,  /* the job finished; no more events for it */
    SCHED_EV_ERROR, /* the job failed; message in text; no more events */
    SCHED_EV_SLOT,  /* a slot action is done: its result in op (no job: job_id 0) */
};

enum sched_finish { SCHED_FINISH_STOP, SCHED_FINISH_LENGTH, SCHED_FINISH_CANCELLED };

struct sched_event {
    enum sched_event_kind kind;
    uint64_t job_id;
    uint64_t request_id;
    int32_t choice;
    void *user; /* the job's user pointer */
    /* TEXT: the bytes to send (stop strings already removed, never split inside one);
     * ERROR: the message. Owned by the event: the callback copies what it keeps. */
    const char *text;
    size_t text_len;
    /* TEXT with logprobs: the sampled token and its alternatives (NULL otherwise) */
    const struct sample_logprob *logprob; /* [1] the chosen token */
    const struct sample_logprob *top;     /* [n_top] */
    int32_t n_top;
    /* TEXT and DONE: */
    int32_t n_prompt;    /* prompt tokens */
    int32_t n_cached;    /* prompt tokens reused from the prefix cache */
    int32_t n_generated; /* completion tokens (TEXT: so far, this one included) */
    /* DONE: */
    enum sched_finish finish;
    int32_t stop_hit;     /* STOP by a stop string: 1 + its index in the job's stop[]; else 0 */
    double t_first_token; /* seconds from submit to the first generated token */
    int32_t n_drafted;    /* speculation: tokens drafted for the job, and of those kept */
    int32_t n_draft_accepted;
    /* SLOT: */
    struct sched_slot_op *op;
};

typedef void (*sched_event_fn)(const struct sched_event *ev, void *user);

struct sched_params {
    int32_t n_slots;   /* parallel sequences (--parallel) */
    int32_t n_ctx;     /* context of EACH slot (--ctx-size) */
    int32_t n_batch;   /* most tokens in one step's micro-batch (--batch-size) */
    int32_t max_queue; /* jobs waiting beyond the slots before sched_submit refuses */
    int n_threads;
    int32_t n_state_snapshots; /* recurrent models: state snapshots per slot (--ctx-checkpoints) */
    int kv_type, kv_type_v;    /* enum hearth_kv_type of K and V (--cache-type-k, -v) */
    int64_t cache_bytes;       /* the prefix cache's cap (--cache-ram): K/V of finished requests
                                  kept on top of the slots' own; 0 = no memory of its own (it
                                  keeps what the idle slots' blocks hold) */
    const char *cache_dir;     /* the prefix cache's disk tier (--cache-dir), or NULL; written
                                  to at a clean stop (hearth_cache_flush) */
    int64_t cache_disk_bytes;  /* its cap (--cache-disk) */
    bool slot_files;           /* slot actions save and restore files (--slot-save-path): the
                                  context must be one hearth_seq_save can write */
    bool reply_tokens;         /* keep finished jobs' tokens for sched_turns (--reply-tokens
                                  own) */
    struct spec_params spec;   /* all zero: no speculation */
};

struct sched;

struct turns;

/* Creates the scheduler over a loaded model and starts its thread. */
enum hearth_status sched_start(struct hearth_model *model, const struct sched_params *p,
                               sched_event_fn on_event, void *user, struct sched **out, char *err,
                               size_t err_len);
/* Stops the thread (pending jobs get SCHED_EV_ERROR "server shutting down") and frees everything.
 */
void sched_stop(struct sched *s);

/* Takes ownership of job. HEARTH_EFULL when the queue is full (job is freed). */
enum hearth_status sched_submit(struct sched *s, struct sched_job *job);
/*
 * Takes ownership of jobs[0..n) (a request's choices) and admits all of them
 * or none: HEARTH_EFULL (every job freed) when the slots and the queue cannot
 * take n more at this moment, so a request is never half admitted however
 * fast the scheduler finishes the first of its choices.
 */
enum hearth_status sched_submit_all(struct sched *s, struct sched_job **jobs, int32_t n);
/* Finished jobs' tokens, for prompts that resend their replies (turns.h); NULL without
 * sched_params.reply_tokens. Thread-safe. */
struct turns *sched_turns(struct sched *s);
/* Cancels every job of request_id (client gone): their slots free at the next step;
 * each still gets its DONE event with SCHED_FINISH_CANCELLED. */
void sched_cancel(struct sched *s, uint64_t request_id);

/* A consistent copy of what /slots and /metrics show. */
struct sched_slot_info {
    int32_t id;
    bool busy;
    uint64_t request_id; /* 0 when idle */
    int32_t n_prompt, n_cached_tokens, n_generated;
    int32_t n_ctx_used; /* tokens in this slot's KV */
    int32_t n_drafted;  /* tokens drafted for this job, and of those accepted */
    int32_t n_draft_accepted;
    int32_t n_drafted_by[SPEC_N_DRAFTERS]; /* the same by drafter (spec.h's order) */
    int32_t n_accepted_by[SPEC_N_DRAFTERS];
};
struct sched_stats {
    int32_t n_slots, slots_busy, queue_depth;
    int32_t kv_blocks_used, kv_blocks_cached, kv_blocks_total;
    uint64_t cache_bytes;           /* K/V bytes the prefix cache holds (the RAM tier) */
    int64_t cache_cap_bytes;        /* its cap, -1 = none (the slots' free blocks) */
    int64_t cache_evicted;          /* blocks it dropped */
    struct hearth_cache_stats disk; /* its disk tier: the disk_* fields */
    uint64_t prompt_tokens_total, generated_tokens_total, prefix_hit_tokens_total;
    double prefill_seconds_total, decode_seconds_total; /* engine time spent */
    uint64_t spec_drafted[SPEC_N_DRAFTERS];             /* tokens drafted, by drafter */
    uint64_t spec_accepted[SPEC_N_DRAFTERS];            /* of those, kept */
    uint64_t decode_forwards_total; /* a slot's rows in a step's forward, counted once a slot */
    /* the thread's own view, for telling a stuck step from an idle one: whether a slot held a
     * job when it last went round (working) and when that was (now_s, util/clock.h) */
    bool working;
    double t_progress;
};
/* Fills stats and up to cap slot infos (returns the number of slots). */
int32_t sched_snapshot(struct sched *s, struct sched_stats *stats, struct sched_slot_info *slots,
                       int32_t cap);

/*
 * Slot actions (llama-server's POST /slots/{id}?action=save|restore|erase).
 * A slot's conversation is the tokens whose K/V it held when its last job
 * ended (or what a restore loaded): save writes them and their K/V to a
 * file (hearth_seq_save), restore loads a file into the prefix cache and
 * makes it the slot's conversation, erase forgets it (blocks other
 * conversations share stay cached). An action on a busy slot waits for its
 * job to end, and the slot takes no new job while one waits. The op comes
 * back in a SCHED_EV_SLOT event with its user pointer; the caller owns it
 * throughout and must keep it until that event.
 */
enum sched_slot_action { SCHED_SLOT_SAVE, SCHED_SLOT_RESTORE, SCHED_SLOT_ERASE };

struct sched_slot_op {
    enum sched_slot_action action;
    int32_t slot;        /* 0 <= slot < n_slots */
    char path[4096];     /* save, restore: the file */
    uint64_t request_id; /* handed back in the event */
    void *user;          /* the event's user pointer */
    /* results */
    enum hearth_status status;
    char err[HEARTH_ERR_MAX];
    int32_t n_tokens; /* saved, restored or erased */
    uint64_t n_bytes; /* written or read */
    double seconds;
    struct sched_slot_op *next; /* the scheduler's list */
};

/*
 * Queues op. HEARTH_EINVAL (a slot out of range) or HEARTH_EFULL (stopping)
 * with no event; otherwise exactly one SCHED_EV_SLOT follows.
 */
enum hearth_status sched_slot_submit(struct sched *s, struct sched_slot_op *op);

#define SCHED_MAX_STAGES 16
/*
 * Where the context's layers run (hearth_context_stage), up to cap stages
 * into out; returns how many. Fixed once started: any thread.
 */
int32_t sched_stages(const struct sched *s, struct hearth_stage_info *out, int32_t cap);

#endif
