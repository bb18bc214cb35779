/*
 * sched.c: the scheduler thread, owner of the engine (see sched.h).
 *
 * Each step: drop cancelled jobs, move queued jobs into free slots (empty
 * sequence, then the longest cached prefix), build ONE micro-batch (a decode
 * row per generating slot first, then prefill chunks shared evenly among the
 * slots still reading their prompt, the start rotating every step), call
 * hearth_decode once, then sample, detokenize and stream for every slot whose
 * logits came back. Invariant of a busy slot: either it is prefilling
 * (n_past < n_prompt) or it waits for the decode of its last sampled token
 * (n_past == n_tokens - 1); so every busy slot has rows in every batch.
 *
 * Shared state (queue, per-slot cancel flags, the stats copy) sits under one
 * mutex; slots, samplers and the context belong to the scheduler thread. The
 * event callback runs on the scheduler thread with no lock held. Per-slot
 * buffers (tokens, the sampling chain's counts and logits copy, stop matcher,
 * piece) are allocated once, so a token costs no allocation.
 *
 * The test gate (sched.h): before each step that has rows, the thread waits
 * on the gate FIFO for one byte, or for a byte on a self-pipe that submit,
 * cancel and stop write, so intake, cancellation and shutdown are never held,
 * only hearth_decode. Without HEARTH_SERVE_SCHED_GATE there is no FIFO and
 * no self-pipe, and nothing of it runs.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "generate/gen.h"
#include "grammar/grammar.h"
#include "sample/chain.h"
#include "sched/sched.h"
#include "sched/sched_int.h"
#include "sched/stopmatch.h"
#include "spec/depth.h"
#include "spec/spec.h"
#include "spec/ngram.h"
#include "util/clock.h"
#include "util/errfmt.h"

/*
 * The most a clean stop spends writing the prefix cache to its disk tier:
 * SIGTERM is to end the server within a few seconds, and what is not
 * written is only a colder first turn after the restart.
 */
#define SCHED_FLUSH_S 2.0

void sched_job_free(struct sched_job *job)
{
    if (!job)
        return;
    free(job->prompt);
    free(job->bias);
    int32_t n = job->n_stop < 0 ? 0 : job->n_stop > SCHED_MAX_STOP ? SCHED_MAX_STOP : job->n_stop;
    for (int32_t i = 0; i < n; i++)
        free(job->stop[i]);
    if (job->grammar)
        grammar_unref(job->grammar);
    for (int32_t i = 0; i < job->n_triggers; i++)
        free(job->triggers[i]);
    free(job->triggers);
    free(job);
}

/* ----------------------------------------------------------------- events --- */

static void emit(struct sched *s, const struct sched_job *job, struct sched_event *ev)
{
    ev->job_id     = job->id;
    ev->request_id = job->request_id;
    ev->choice     = job->choice;
    ev->user       = job->user;
    if (!ev->text)
        ev->text = "";
    s->on_event(ev, s->user);
}

static void emit_error(struct sched *s, const struct sched_job *job, const char *msg)
{
    struct sched_event ev = {.kind = SCHED_EV_ERROR, .text = msg, .text_len = strlen(msg)};
    emit(s, job, &ev);
}

static void emit_text(struct sched *s, const struct slot *sl, const char *text, size_t len,
                      const struct sample_logprob *lp, int32_t n_top)
{
    struct sched_event ev = {.kind        = SCHED_EV_TEXT,
                             .text        = text,
                             .text_len    = len,
                             .logprob     = lp,
                             .top         = lp ? sl->chain.top : NULL,
                             .n_top       = lp ? n_top : 0,
                             .n_prompt    = sl->job->n_prompt,
                             .n_cached    = sl->n_cached,
                             .n_generated = sl->n_generated};
    emit(s, sl->job, &ev);
}

/* ------------------------------------------------------------------ slots --- */

/* Under mu: the running totals into the copy sched_snapshot reads. */
static void copy_totals_locked(struct sched *s)
{
    s->stats.prompt_tokens_total     = s->acc.prompt_tokens_total;
    s->stats.generated_tokens_total  = s->acc.generated_tokens_total;
    s->stats.prefix_hit_tokens_total = s->acc.prefix_hit_tokens_total;
    s->stats.prefill_seconds_total   = s->acc.prefill_seconds_total;
    s->stats.decode_seconds_total    = s->acc.decode_seconds_total;
    for (int d = 0; d < SPEC_N_DRAFTERS; d++) {
        s->stats.spec_drafted[d]  = s->acc.spec_drafted[d];
        s->stats.spec_accepted[d] = s->acc.spec_accepted[d];
    }
    s->stats.decode_forwards_total = s->acc.decode_forwards_total;
}

/*
 * Makes the slot idle (its published blocks stay cached) and hands back its
 * job: the caller sends the job's last event, then frees it. The slot is
 * free before that event, so a client that reacts to it finds the slot idle.
 */
static struct sched_job *slot_release(struct sched *s, struct slot *sl)
{
    struct sched_job *job = sl->job;
    turns_put(s->turns, sl->tokens, job->n_prompt, sl->n_tokens);
    hearth_seq_end(s->ctx, sl->id, sl->tokens, sl->n_past);
    sl->n_last = sl->n_past; /* the slot's conversation, for slot actions */
    if (s->drafters)
        spec_rewind(s->drafters, sl->id, 0);
    sample_chain_end(&sl->chain);
    sl->n_tokens = sl->n_past = sl->n_cached = sl->n_generated = 0;
    sl->n_draft = sl->n_drafted = sl->n_accepted = sl->n_fed = 0;
    memset(sl->n_drafted_by, 0, sizeof sl->n_drafted_by);
    memset(sl->n_accepted_by, 0, sizeof sl->n_accepted_by);
    sl->take  = 0;
    sl->row   = -1;
    sl->fresh = false;
    stopmatch_reset(&sl->sm, NULL, 0);
    sl->job = NULL;
    pthread_mutex_lock(&s->mu);
    s->slot_busy[sl->id]   = false;
    s->slot_req[sl->id]    = 0;
    s->slot_cancel[sl->id] = false;
    s->info[sl->id]        = (struct sched_slot_info){.id = sl->id};
    s->n_free++;
    copy_totals_locked(s); /* a client reacting to this job's end sees it counted */
    pthread_mutex_unlock(&s->mu);
    return job;
}

static void slot_fail(struct sched *s, struct slot *sl, const char *msg)
{
    struct sched_job *job = slot_release(s, sl);
    emit_error(s, job, msg);
    sched_job_free(job);
}

/* Sends what the stop matcher still holds (unless a stop string ended it), frees the slot, DONE. */
static void slot_finish(struct sched *s, struct slot *sl, enum sched_finish finish, bool flush)
{
    if (flush) {
        const char *out;
        size_t len;
        stopmatch_flush(&sl->sm, &out, &len);
        if (len > 0)
            emit_text(s, sl, out, len, NULL, 0);
    }
    struct sched_event ev = {.kind             = SCHED_EV_DONE,
                             .finish           = finish,
                             .n_prompt         = sl->job->n_prompt,
                             .n_cached         = sl->n_cached,
                             .n_generated      = sl->n_generated,
                             .stop_hit         = finish == SCHED_FINISH_STOP ? sl->sm.hit + 1 : 0,
                             .t_first_token    = sl->t_first >= 0 ? sl->t_first - sl->t_submit : 0,
                             .n_drafted        = sl->n_drafted,
                             .n_draft_accepted = sl->n_accepted};
    struct sched_job *job = slot_release(s, sl);
    emit(s, job, &ev);
    sched_job_free(job);
}

/* Checks a newly assigned job and readies its slot; on a bad job, ERROR and the slot is free. */
static void slot_start(struct sched *s, struct slot *sl)
{
    const struct sched_job *job = sl->job;
    char msg[HEARTH_ERR_MAX];
    sl->fresh   = false;
    sl->t_first = -1;
    sl->n_last  = 0; /* tokens[] becomes the job's */
    if (!job->prompt || job->n_prompt < 1 || job->n_prompt >= s->n_ctx) {
        snprintf(msg, sizeof msg,
                 "sched: the prompt has %d tokens but a slot holds %d, so it must have 1 to %d",
                 job->n_prompt, s->n_ctx, s->n_ctx - 1);
        slot_fail(s, sl, msg);
        return;
    }
    if (job->max_tokens < 1) {
        snprintf(msg, sizeof msg, "sched: max_tokens is %d but must be at least 1",
                 job->max_tokens);
        slot_fail(s, sl, msg);
        return;
    }
    if (job->n_stop < 0 || job->n_stop > SCHED_MAX_STOP) {
        snprintf(msg, sizeof msg, "sched: %d stop strings, allowed 0..%d", job->n_stop,
                 SCHED_MAX_STOP);
        slot_fail(s, sl, msg);
        return;
    }
    for (int32_t i = 0; i < job->n_prompt; i++) {
        if (job->prompt[i] < 0 || job->prompt[i] >= s->n_vocab) {
            snprintf(msg, sizeof msg, "sched: prompt token %d is %d but the vocabulary has %d", i,
                     job->prompt[i], s->n_vocab);
            slot_fail(s, sl, msg);
            return;
        }
    }
    struct sample_chain_params cp = {.sampling          = &job->sampling,
                                     .presence_penalty  = job->presence_penalty,
                                     .frequency_penalty = job->frequency_penalty,
                                     .bias              = job->bias,
                                     .n_bias            = job->n_bias,
                                     .top_logprobs      = job->top_logprobs};
    if (sample_chain_start(&sl->chain, &cp, msg, sizeof msg) != HEARTH_OK) {
        slot_fail(s, sl, msg);
        return;
    }
    if (job->grammar) {
        if (job->ignore_eos) {
            slot_fail(s, sl, "sched: a grammar ends in end-of-text, which ignore_eos forbids");
            return;
        }
        if (!sample_chain_grammar(&sl->chain, job->grammar, (const char *const *)job->triggers,
                                  job->n_triggers)) {
            slot_fail(s, sl, "sched: out of memory for the grammar");
            return;
        }
    }
    sample_chain_prompt(&sl->chain, job->prompt, job->n_prompt);
    memcpy(sl->tokens, job->prompt, (size_t)job->n_prompt * sizeof *sl->tokens);
    sl->n_tokens = job->n_prompt;
    hearth_seq_truncate(s->ctx, sl->id, 0);
    int32_t reused =
        job->no_cache ? 0 : hearth_seq_reuse_prefix(s->ctx, sl->id, job->prompt, job->n_prompt);
    if (reused < 0 || reused >= job->n_prompt || hearth_seq_len(s->ctx, sl->id) != reused) {
        hearth_seq_truncate(s->ctx, sl->id, 0); /* distrust an answer outside the contract */
        reused = 0;
    }
    sl->n_cached = sl->n_past = reused;
    sl->order                 = ++s->n_started;
    spec_depth_start(&sl->depth, s->spec.draft_min, s->spec.draft_max);
    stopmatch_reset(&sl->sm, job->stop, job->n_stop);
    s->acc.prompt_tokens_total += (uint64_t)job->n_prompt;
    s->acc.prefix_hit_tokens_total += (uint64_t)reused;
}

/* Counts one judged draft of the slot's: the job's counts and the scheduler's. */
static void judged(struct sched *s, struct slot *sl, bool kept)
{
    sl->n_drafted++;
    sl->n_drafted_by[sl->draft_src]++;
    s->acc.spec_drafted[sl->draft_src]++;
    if (kept) {
        sl->n_accepted++;
        sl->n_accepted_by[sl->draft_src]++;
        s->acc.spec_accepted[sl->draft_src]++;
    }
}

/* Samples from the slot's logits row and streams the token; may finish the job. */
static void slot_sample(struct sched *s, struct slot *sl)
{
    const struct sched_job *job = sl->job;
    const float *logits         = hearth_get_logits(s->ctx, sl->row);
    sl->row                     = -1;
    if (!logits) {
        slot_fail(s, sl, "sched: the engine returned no logits for the slot's row");
        return;
    }
    char err[HEARTH_ERR_MAX];
    hearth_token tok = sample_chain_pick(&sl->chain, logits, sl->force, err, sizeof err);
    if (tok < 0) {
        char msg[HEARTH_ERR_MAX + 32];
        snprintf(msg, sizeof msg, "sched: grammar: %s", err);
        slot_fail(s, sl, msg);
        return;
    }
    if (sl->judging >= 0) { /* verify()'s draft at this row, judged before the job can end */
        sl->judged_kept = tok == sl->judging;
        judged(s, sl, sl->judged_kept);
        sl->judging = -1;
    }
    if (sl->n_generated++ == 0)
        sl->t_first = now_s();
    s->acc.generated_tokens_total++;

    struct sample_logprob chosen, *lp = NULL;
    int32_t n_top = 0;
    if (sample_chain_logprobs(&sl->chain, logits, tok, &chosen, &n_top))
        lp = &chosen;
    /* tokens[n_tokens] is decoded at position n_tokens: the next step's row */
    const struct gen_rules rules = {s->n_ctx, job->max_tokens, job->ignore_eos};
    size_t n                     = 0;
    const enum gen_next next     = gen_token(s->model, tok, &rules, sl->n_generated, sl->n_tokens,
                                             &sl->piece, &sl->piece_cap, &n);
    if (next == GEN_EOG) {
        slot_finish(s, sl, SCHED_FINISH_STOP, true);
        return;
    }
    if (next == GEN_ENOMEM) {
        slot_fail(s, sl, "sched: out of memory for a token's text");
        return;
    }
    sl->tokens[sl->n_tokens++] = tok;
    sample_chain_count(&sl->chain, tok);

    const char *out;
    size_t out_len;
    enum stopmatch_result r = stopmatch_feed(&sl->sm, sl->piece, n, &out, &out_len);
    if (r == STOPMATCH_ENOMEM) {
        slot_fail(s, sl, "sched: out of memory for the pending text");
        return;
    }
    if (r == STOPMATCH_HIT) {
        if (out_len > 0)
            emit_text(s, sl, out, out_len, NULL, 0);
        slot_finish(s, sl, SCHED_FINISH_STOP, false);
        return;
    }
    emit_text(s, sl, out, out_len, lp, n_top);
    if (next != GEN_GO) /* max_tokens, or no position left to decode the token at */
        slot_finish(s, sl, SCHED_FINISH_LENGTH, true);
}

/* -------------------------------------------------------------- test gate --- */

/*
 * Opens HEARTH_SERVE_SCHED_GATE's FIFO without blocking (a reader opened
 * before any writer waits in poll until one comes) and the self-pipe. A
 * missing FIFO means no gate.
 */
static void gate_open(struct sched *s)
{
    const char *path = getenv("HEARTH_SERVE_SCHED_GATE");
    if (!path || !*path)
        return;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return;
    if (pipe(s->wake) != 0) {
        s->wake[0] = s->wake[1] = -1;
        close(fd);
        return;
    }
    for (int i = 0; i < 2; i++)
        fcntl(s->wake[i], F_SETFL, fcntl(s->wake[i], F_GETFL) | O_NONBLOCK);
    s->gate_fd = fd;
}

/* From any thread: pulls the scheduler out of the gate (a full pipe already will). */
void sched_gate_wake(struct sched *s)
{
    if (s->wake[1] >= 0)
        (void)!write(s->wake[1], "w", 1);
}

/*
 * Before a step: true when it may run (a byte came, or there is no gate any
 * more); false when the self-pipe woke the thread, so the caller goes round
 * to take in, cancel or stop first. End of file (the writer gone, a test that
 * died) lifts the gate for good.
 */
static bool gate_pass(struct sched *s)
{
    while (s->gate_fd >= 0) {
        struct pollfd pf[2] = {{.fd = s->gate_fd, .events = POLLIN},
                               {.fd = s->wake[0], .events = POLLIN}};
        if (poll(pf, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (pf[1].revents) {
            char buf[64];
            while (read(s->wake[0], buf, sizeof buf) > 0)
                ;
            return false;
        }
        if (pf[0].revents) {
            char c;
            ssize_t n = read(s->gate_fd, &c, 1);
            if (n == 1)
                return true;
            if (n < 0 && (errno == EAGAIN || errno == EINTR))
                continue;
            break;
        }
    }
    if (s->gate_fd >= 0) {
        close(s->gate_fd);
        s->gate_fd = -1;
    }
    return true;
}

/* ------------------------------------------------------------------- step --- */

/* A refused batch changed nothing: on a full pool the youngest job yields, else all fail. */
static void batch_failed(struct sched *s, enum hearth_status st, const char *err)
{
    char msg[HEARTH_ERR_MAX + 32];
    snprintf(msg, sizeof msg, "sched: %s", err);
    struct slot *youngest = NULL;
    int32_t n_in          = 0;
    for (int32_t i = 0; i < s->n_slots; i++) {
        struct slot *sl = &s->slots[i];
        if (!sl->job || sl->take == 0)
            continue;
        n_in++;
        if (!youngest || sl->order > youngest->order)
            youngest = sl;
    }
    for (int32_t i = 0; i < s->n_slots; i++) {
        struct slot *sl = &s->slots[i];
        if (!sl->job || sl->take == 0)
            continue;
        sl->take = 0;
        sl->row  = -1;
        if (st != HEARTH_EFULL || n_in == 1 || sl == youngest)
            slot_fail(s, sl, msg);
    }
}

/* ----------------------------------------------------------- speculation --- */

/*
 * How many tokens the slot may draft this step: its depth, the tokens it may
 * still generate after the one this step samples, and the context; 0 below
 * draft_min.
 */
static int32_t draft_room(const struct sched *s, const struct slot *sl)
{
    int32_t k        = sl->depth.next;
    int32_t left     = sl->job->max_tokens - sl->n_generated - 1;
    int32_t ctx_left = s->n_ctx - sl->n_tokens;
    k                = k < left ? k : left;
    k                = k < ctx_left ? k : ctx_left;
    return k >= s->spec.draft_min ? k : 0;
}

/* Asks the drafters for every generating slot's proposal (sl->draft, sl->n_draft). */
static void propose_all(struct sched *s)
{
    int32_t n = 0;
    for (int32_t i = 0; i < s->n_slots; i++) {
        struct slot *sl = &s->slots[i];
        sl->n_draft     = 0;
        if (!sl->job)
            continue;
        spec_feed(s->drafters, sl->tokens, sl->n_fed, sl->n_tokens);
        sl->n_fed = sl->n_tokens;
        if (sl->n_past < sl->job->n_prompt)
            continue;
        int32_t k = draft_room(s, sl);
        if (k <= 0)
            continue;
        s->reqs[n++] = (struct spec_req){.slot     = sl->id,
                                         .tokens   = sl->tokens,
                                         .n_tokens = sl->n_tokens,
                                         .k        = k,
                                         .out      = sl->draft};
    }
    if (n == 0)
        return;
    spec_propose(s->drafters, s->reqs, n);
    for (int32_t j = 0; j < n; j++) {
        struct slot *sl = &s->slots[s->reqs[j].slot];
        sl->n_draft     = s->reqs[j].n_out >= s->spec.draft_min ? s->reqs[j].n_out : 0;
        sl->draft_src   = s->reqs[j].from;
    }
}

/*
 * After a step that computed the slot's decode row and its drafts: samples
 * at each row in turn, as plain decoding would, and goes on while the sample
 * reproduces the next draft. The first sample that differs (or the one after
 * the last draft) is the step's extra token; the rows past it are dropped
 * from the cache. The drafts kept are tokens the target itself sampled, with
 * the same random draws in the same order, so the text is what plain
 * decoding gives, at any temperature.
 */
static void verify(struct sched *s, struct slot *sl)
{
    const int32_t base = sl->n_past, k = sl->n_draft, row0 = sl->row;
    sl->n_draft = 0;
    sl->take    = 0;
    int32_t a   = 0;
    for (;;) {
        /* the cache holds base .. base + k; the sample at row a follows tokens up to base + a */
        sl->n_past = base + 1 + a;
        sl->row    = row0 + a;
        sl->force  = s->spec_broken && a < k ? sl->draft[a] : -1;
        /* a draft counts once judged: kept, or the first the model did not reproduce; those
         * past it, or past the job's end, were never in question */
        sl->judging     = a < k ? sl->draft[a] : -1;
        sl->judged_kept = false;
        slot_sample(s, sl);
        sl->force   = -1;
        sl->judging = -1;
        if (a == k || !sl->job || !sl->judged_kept) /* the job may have ended: slot_release */
            break;
        a++;
    }
    if (sl->job) {
        if (a < k)
            hearth_seq_truncate(s->ctx, sl->id, sl->n_past);
        if (hearth_seq_len(s->ctx, sl->id) != sl->n_past) {
            slot_fail(s, sl, "sched: the cache could not be cut back to the drafts kept");
            return;
        }
        spec_rewind(s->drafters, sl->id, sl->n_past);
        hearth_seq_publish(s->ctx, sl->id, sl->tokens, sl->n_past);
        /* the keep rate over the last few steps (each draft a trial until the first
         * rejected), and the depth it pays to draft at */
        spec_depth_judge(&sl->depth, a, k);
    }
}

/* Builds one micro-batch from every busy slot and runs it. */
static void step(struct sched *s)
{
    int32_t n = 0, n_decode = 0, n_prefill_slots = 0, n_gen = 0, n_drafts = 0, n_gen_rows = 0;
    for (int32_t i = 0; i < s->n_slots; i++) {
        const struct slot *sl = &s->slots[i];
        n_gen += sl->job && sl->n_past >= sl->job->n_prompt;
    }
    if (s->drafters && !s->no_drafts)
        propose_all(s);
    for (int32_t i = 0; i < s->n_slots; i++) {
        struct slot *sl  = &s->slots[i];
        int32_t proposed = s->no_drafts ? 0 : sl->n_draft;
        sl->take         = 0;
        sl->row          = -1;
        sl->n_draft      = 0;
        if (!sl->job)
            continue;
        if (sl->n_past < sl->job->n_prompt) {
            n_prefill_slots++;
            continue;
        }
        s->b_tok[n]    = sl->tokens[sl->n_past];
        s->b_pos[n]    = sl->n_past;
        s->b_seq[n]    = sl->id;
        s->b_logits[n] = 1;
        sl->row        = n++;
        sl->take       = 1;
        n_decode++;
        n_gen--;
        n_gen_rows++;
        /* drafts right after the slot's decode row, leaving a row for each slot still to come */
        int32_t room = s->n_batch - n - n_gen;
        int32_t k    = proposed < room ? proposed : room;
        n_drafts += k;
        for (int32_t j = 0; j < k; j++) {
            s->b_tok[n]    = sl->draft[j];
            s->b_pos[n]    = sl->n_past + 1 + j;
            s->b_seq[n]    = sl->id;
            s->b_logits[n] = 1;
            n++;
        }
        sl->n_draft = k;
        sl->take += k;
        n_decode += k;
    }

    /* prefill: the room left is shared evenly, leftovers going round from s->rr */
    int32_t left = s->n_batch - n, pending = n_prefill_slots;
    while (left > 0 && pending > 0) {
        int32_t per = left / pending > 0 ? left / pending : 1;
        for (int32_t k = 0; k < s->n_slots && left > 0; k++) {
            struct slot *sl = &s->slots[(s->rr + k) % s->n_slots];
            if (!sl->job || sl->n_past >= sl->job->n_prompt)
                continue; /* idle or generating */
            int32_t need = sl->job->n_prompt - sl->n_past - sl->take;
            if (need <= 0)
                continue;
            int32_t t = need < per ? need : per;
            t         = t < left ? t : left;
            sl->take += t;
            left -= t;
            if (t == need)
                pending--;
        }
    }
    s->rr = (s->rr + 1) % s->n_slots;
    for (int32_t i = 0; i < s->n_slots; i++) {
        struct slot *sl = &s->slots[i];
        if (!sl->job || sl->n_past >= sl->job->n_prompt || sl->take == 0)
            continue;
        for (int32_t j = 0; j < sl->take; j++) {
            int32_t p      = sl->n_past + j;
            s->b_tok[n]    = sl->tokens[p];
            s->b_pos[n]    = p;
            s->b_seq[n]    = sl->id;
            s->b_logits[n] = p == sl->job->n_prompt - 1;
            if (s->b_logits[n])
                sl->row = n;
            n++;
        }
    }
    if (n == 0)
        return;

    for (int32_t i = 0; i < s->n_slots && n_drafts > 0; i++)
        if (s->slots[i].n_draft > 0)
            hearth_seq_keep_states(s->ctx, s->slots[i].id);
    struct hearth_batch b = {n, s->b_tok, s->b_pos, s->b_seq, s->b_logits};
    char err[HEARTH_ERR_MAX];
    double t0             = now_s();
    enum hearth_status st = hearth_decode(s->ctx, &b, err, sizeof err);
    double dt             = now_s() - t0;
    if (st == HEARTH_EFULL && n_drafts > 0 && !s->no_drafts) {
        /* the pool had no room for the drafts: they are only a bet, so the step runs without */
        s->no_drafts = true;
        step(s);
        s->no_drafts = false;
        return;
    }
    if (st) {
        batch_failed(s, st, err);
        return;
    }
    if (s->drafters) {
        const hearth_token *toks[s->n_slots];
        for (int32_t i = 0; i < s->n_slots; i++)
            toks[i] = s->slots[i].tokens;
        spec_observe(s->drafters, &b, toks);
    }
    s->acc.decode_forwards_total += (uint64_t)n_gen_rows;
    s->acc.decode_seconds_total += dt * n_decode / n;
    s->acc.prefill_seconds_total += dt * (n - n_decode) / n;
    for (int32_t i = 0; i < s->n_slots; i++) {
        struct slot *sl = &s->slots[i];
        if (!sl->job || sl->take == 0 || sl->n_draft > 0)
            continue; /* a drafting slot's cache is settled by verify() */
        sl->n_past += sl->take;
        sl->take = 0;
        hearth_seq_publish(s->ctx, sl->id, sl->tokens, sl->n_past);
    }
    for (int32_t i = 0; i < s->n_slots; i++) {
        struct slot *sl = &s->slots[i];
        if (sl->job && sl->n_draft > 0)
            verify(s, sl);
        else if (sl->job && sl->row >= 0)
            slot_sample(s, sl);
    }
}

/* The thread goes round: busy tells whether a slot holds a job as it goes into its step. */
static void mark_progress(struct sched *s, bool busy)
{
    pthread_mutex_lock(&s->mu);
    s->stats.working    = busy;
    s->stats.t_progress = now_s();
    pthread_mutex_unlock(&s->mu);
}

/* Copies the totals and slot states for sched_snapshot. */
static void publish_stats(struct sched *s)
{
    int32_t used = 0, cached = 0, total = 0;
    struct hearth_cache_stats cs;
    hearth_kv_stats(s->ctx, &used, &cached, &total);
    hearth_cache_stats(s->ctx, &cs);
    pthread_mutex_lock(&s->mu);
    copy_totals_locked(s);
    s->stats.kv_blocks_used   = used;
    s->stats.kv_blocks_cached = cached;
    s->stats.kv_blocks_total  = total;
    s->stats.cache_bytes      = cs.bytes;
    s->stats.cache_cap_bytes  = cs.cap_bytes;
    s->stats.cache_evicted    = cs.evicted;
    s->stats.disk             = cs;
    s->stats.working          = false;
    s->stats.t_progress       = now_s();
    for (int32_t i = 0; i < s->n_slots; i++) {
        const struct slot *sl = &s->slots[i];
        s->stats.working      = s->stats.working || sl->job;
        s->info[i]            = (struct sched_slot_info){
                       .id               = i,
                       .busy             = sl->job != NULL,
                       .request_id       = sl->job ? sl->job->request_id : 0,
                       .n_prompt         = sl->job ? sl->job->n_prompt : 0,
                       .n_cached_tokens  = sl->n_cached,
                       .n_generated      = sl->n_generated,
                       .n_ctx_used       = sl->n_past,
                       .n_drafted        = sl->n_drafted,
                       .n_draft_accepted = sl->n_accepted,
        };
        memcpy(s->info[i].n_drafted_by, sl->n_drafted_by, sizeof sl->n_drafted_by);
        memcpy(s->info[i].n_accepted_by, sl->n_accepted_by, sizeof sl->n_accepted_by);
    }
    pthread_mutex_unlock(&s->mu);
}

/* Under mu: a slot action waits for slot i (it takes no job until the action ran). */
static bool slot_op_waits(const struct sched *s, int32_t i)
{
    for (const struct sched_slot_op *op = s->ops; op; op = op->next)
        if (op->slot == i)
            return true;
    return false;
}

/*
 * Under mu: takes cancelled jobs out of the queue (into s->dropped), copies
 * the slots' cancel flags, and assigns queued jobs to idle slots. Returns
 * the number of dropped jobs.
 */
static int32_t intake_locked(struct sched *s)
{
    int32_t n_dropped = 0;
    if (s->any_cancelled) {
        int32_t kept = 0;
        for (int32_t i = 0; i < s->q_len; i++) {
            struct qent e = s->queue[(s->q_head + i) % s->q_cap];
            if (e.cancelled)
                s->dropped[n_dropped++] = e;
            else
                s->queue[(s->q_head + kept++) % s->q_cap] = e;
        }
        s->q_len         = kept;
        s->any_cancelled = false;
    }
    for (int32_t i = 0; i < s->n_slots; i++)
        s->cancel_now[i] = s->slot_cancel[i];
    for (int32_t i = 0; i < s->n_slots && s->q_len > 0; i++) {
        struct slot *sl = &s->slots[i];
        if (sl->job || slot_op_waits(s, i))
            continue;
        struct qent e = s->queue[s->q_head];
        s->q_head     = (s->q_head + 1) % s->q_cap;
        s->q_len--;
        s->n_free--;
        sl->job           = e.job;
        sl->t_submit      = e.t_submit;
        sl->fresh         = true;
        s->slot_busy[i]   = true;
        s->slot_req[i]    = e.job->request_id;
        s->slot_cancel[i] = false;
        s->cancel_now[i]  = false;
    }
    return n_dropped;
}

static void *sched_main(void *arg)
{
    struct sched *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->stopping && s->q_len == 0 && s->n_free == s->n_slots && !s->any_cancelled &&
               !s->ops)
            pthread_cond_wait(&s->cv, &s->mu);
        if (s->stopping) {
            pthread_mutex_unlock(&s->mu);
            break;
        }
        int32_t n_dropped = intake_locked(s);
        pthread_mutex_unlock(&s->mu);

        for (int32_t i = 0; i < n_dropped; i++) {
            struct sched_event ev = {.kind     = SCHED_EV_DONE,
                                     .finish   = SCHED_FINISH_CANCELLED,
                                     .n_prompt = s->dropped[i].job->n_prompt};
            emit(s, s->dropped[i].job, &ev);
            sched_job_free(s->dropped[i].job);
        }
        for (int32_t i = 0; i < s->n_slots; i++) {
            struct slot *sl = &s->slots[i];
            if (sl->job && !sl->fresh && s->cancel_now[i])
                slot_finish(s, sl, SCHED_FINISH_CANCELLED, false);
        }
        sched_slot_ops_run(s);
        bool busy = false;
        for (int32_t i = 0; i < s->n_slots; i++) {
            if (s->slots[i].job && s->slots[i].fresh)
                slot_start(s, &s->slots[i]);
            busy = busy || s->slots[i].job;
        }
        if (busy && s->gate_fd >= 0)
            publish_stats(s); /* what a test sees while the gate holds this step */
        mark_progress(s, busy);
        if (!busy || gate_pass(s))
            step(s);
        publish_stats(s);
    }

    /* shutting down: whatever is left fails */
    for (int32_t i = 0; i < s->n_slots; i++)
        if (s->slots[i].job)
            slot_fail(s, &s->slots[i], "server shutting down");
    sched_slot_ops_fail(s, "server shutting down");
    hearth_cache_flush(s->ctx, SCHED_FLUSH_S); /* every slot is idle: its blocks are cached */
    pthread_mutex_lock(&s->mu);
    int32_t n_left = 0;
    for (; s->q_len > 0; s->q_len--, s->q_head = (s->q_head + 1) % s->q_cap)
        s->dropped[n_left++] = s->queue[s->q_head];
    pthread_mutex_unlock(&s->mu);
    for (int32_t i = 0; i < n_left; i++) {
        emit_error(s, s->dropped[i].job, "server shutting down");
        sched_job_free(s->dropped[i].job);
    }
    publish_stats(s);
    return NULL;
}

/* ------------------------------------------------------------- public API --- */

static void sched_free(struct sched *s)
{
    if (!s)
        return;
    turns_free(s->turns);
    if (s->slots) {
        for (int32_t i = 0; i < s->n_slots; i++) {
            struct slot *sl = &s->slots[i];
            sample_chain_free(&sl->chain);
            sched_job_free(sl->job);
            free(sl->tokens);
            free(sl->piece);
            free(sl->draft);
            stopmatch_free(&sl->sm);
        }
        free(s->slots);
    }
    spec_free(s->drafters);
    free(s->reqs);
    hearth_context_free(s->ctx);
    free(s->b_tok);
    free(s->b_pos);
    free(s->b_seq);
    free(s->b_logits);
    free(s->dropped);
    free(s->cancel_now);
    free(s->queue);
    free(s->slot_busy);
    free(s->slot_req);
    free(s->slot_cancel);
    free(s->info);
    if (s->gate_fd >= 0)
        close(s->gate_fd);
    for (int i = 0; i < 2; i++)
        if (s->wake[i] >= 0)
            close(s->wake[i]);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}

enum hearth_status sched_start(struct hearth_model *model, const struct sched_params *p,
                               sched_event_fn on_event, void *user, struct sched **out, char *err,
                               size_t err_len)
{
    *out = NULL;
    if (!model || !p || !on_event)
        return fail(HEARTH_EINVAL, err, err_len,
                    "sched: model, parameters and callback are needed");
    if (p->n_slots < 1 || p->n_batch < p->n_slots || p->n_ctx < 0 || p->max_queue < 0)
        return fail(HEARTH_EINVAL, err, err_len,
                    "sched: %d slots, batch of %d, context %d, queue %d: need slots >= 1, "
                    "batch >= slots, context >= 0 and queue >= 0",
                    p->n_slots, p->n_batch, p->n_ctx, p->max_queue);
    struct sched *s = calloc(1, sizeof *s);
    if (!s)
        return fail(HEARTH_ENOMEM, err, err_len, "sched: out of memory");
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->gate_fd = s->wake[0] = s->wake[1] = -1;

    s->model     = model;
    s->on_event  = on_event;
    s->user      = user;
    s->n_slots   = p->n_slots;
    s->n_batch   = p->n_batch;
    s->max_queue = p->max_queue;
    s->n_vocab   = hearth_model_n_vocab(model);
    s->n_free    = p->n_slots;

    struct hearth_context_params cp = hearth_context_default_params();
    cp.n_ctx                        = p->n_ctx;
    cp.n_seq_max                    = p->n_slots;
    cp.n_batch                      = p->n_batch;
    cp.n_threads                    = p->n_threads;
    cp.n_state_snapshots            = p->n_state_snapshots;
    cp.cache_bytes                  = p->cache_bytes > 0 ? p->cache_bytes : -1;
    cp.kv_type                      = (enum hearth_kv_type)p->kv_type;
    cp.kv_type_v                    = (enum hearth_kv_type)p->kv_type_v;
    cp.cache_dir                    = p->cache_dir;
    cp.cache_disk_bytes             = p->cache_disk_bytes;
    /*
     * The default depth cap: n-gram drafts cost nothing to make, so the depth rule may go deep
     * on a loop; a model drafter pays a forward per drafted token, and a recurrent model keeps
     * a state per drafted row of the verify batch (megabytes each on a large model).
     */
    struct spec_params spec = p->spec;
    if (spec.draft_max == 0)
        spec.draft_max =
            spec.draft_model || spec.mtp || spec.block || hearth_model_is_recurrent(model) ? 3 : 16;
    /* a recurrent state goes back to a drafted position only from a state kept in the batch */
    if ((spec.ngram || spec.draft_model || spec.mtp || spec.block) &&
        hearth_model_is_recurrent(model))
        cp.n_keep_states = spec.draft_max + 1 > 64 ? 64 : spec.draft_max + 1;
    cp.keep_hidden        = p->spec.mtp; /* the MTP head reads the target's hidden states */
    enum hearth_status st = hearth_context_new(model, &cp, &s->ctx, err, err_len);
    if (st)
        goto err;
    char why[HEARTH_ERR_MAX];
    if (p->slot_files && (st = hearth_seq_save_supported(s->ctx, why, sizeof why))) {
        st = fail(st, err, err_len, "sched: slots cannot be saved (--slot-save-path): %s", why);
        goto err;
    }
    for (int32_t i = 0; i < hearth_context_n_stages(s->ctx) && i < SCHED_MAX_STAGES; i++)
        hearth_context_stage(s->ctx, s->n_stages++, &s->stages[i]);
    s->n_ctx = p->n_ctx > 0 ? p->n_ctx : hearth_model_n_ctx_train(model);
    if (s->n_ctx < 2) {
        st = fail(HEARTH_EINVAL, err, err_len, "sched: a slot context of %d tokens is too small",
                  s->n_ctx);
        goto err;
    }

    s->spec = spec;
    /* Test hook, inert unless set: verification keeps every draft whatever the model samples,
     * the broken rule tests/e2e/test_spec.c's distribution test must catch. */
    s->spec_broken = getenv("HEARTH_SPEC_TEST_BREAK") != NULL;
    if (!s->spec.ngram && !s->spec.draft_model && !s->spec.mtp && !s->spec.block)
        s->spec = (struct spec_params){0};
    else if ((s->spec.draft_model != NULL) + s->spec.mtp + (s->spec.block != SPEC_BLOCK_NONE) > 1) {
        st = fail(HEARTH_EINVAL, err, err_len,
                  "sched: only one of a draft model, the MTP head and a block drafter drafts "
                  "(chain it after the n-gram drafter)");
        goto err;
    } else if (s->spec.draft_max < 1 || s->spec.draft_max > 64 || s->spec.draft_min < 1 ||
               s->spec.draft_min > s->spec.draft_max || s->spec.ngram_min < 1 ||
               s->spec.ngram_min > s->spec.ngram_max || s->spec.ngram_max > NGRAM_MAX_N) {
        st = fail(HEARTH_EINVAL, err, err_len,
                  "sched: speculation with drafts of %d..%d tokens%s and n-grams of %d..%d: need "
                  "1 <= min <= max, drafts <= 64, n-grams <= %d",
                  s->spec.draft_min, s->spec.draft_max,
                  p->spec.draft_max == 0 ? " (the most by default)" : "", s->spec.ngram_min,
                  s->spec.ngram_max, NGRAM_MAX_N);
        goto err;
    }
    if (s->spec.draft_max > 0) {
        st = spec_new(model, s->ctx, &s->spec, p->n_slots, s->n_ctx, p->n_batch, p->n_threads,
                      &s->drafters, err, err_len);
        if (st)
            goto err;
        s->reqs = calloc((size_t)p->n_slots, sizeof *s->reqs);
        if (!s->reqs)
            goto nomem;
    }

    s->q_cap       = p->max_queue + p->n_slots;
    s->queue       = calloc((size_t)s->q_cap, sizeof *s->queue);
    s->dropped     = calloc((size_t)s->q_cap, sizeof *s->dropped);
    s->slots       = calloc((size_t)s->n_slots, sizeof *s->slots);
    s->cancel_now  = calloc((size_t)s->n_slots, sizeof *s->cancel_now);
    s->slot_busy   = calloc((size_t)s->n_slots, sizeof *s->slot_busy);
    s->slot_req    = calloc((size_t)s->n_slots, sizeof *s->slot_req);
    s->slot_cancel = calloc((size_t)s->n_slots, sizeof *s->slot_cancel);
    s->info        = calloc((size_t)s->n_slots, sizeof *s->info);
    s->b_tok       = malloc((size_t)s->n_batch * sizeof *s->b_tok);
    s->b_pos       = malloc((size_t)s->n_batch * sizeof *s->b_pos);
    s->b_seq       = malloc((size_t)s->n_batch * sizeof *s->b_seq);
    s->b_logits    = malloc((size_t)s->n_batch * sizeof *s->b_logits);
    if (!s->queue || !s->dropped || !s->slots || !s->cancel_now || !s->slot_busy || !s->slot_req ||
        !s->slot_cancel || !s->info || !s->b_tok || !s->b_pos || !s->b_seq || !s->b_logits)
        goto nomem;
    for (int32_t i = 0; i < s->n_slots; i++) {
        struct slot *sl = &s->slots[i];
        sl->id          = i;
        sl->row         = -1;
        sl->force       = -1;
        sl->judging     = -1;
        stopmatch_init(&sl->sm);
        bool chain    = sample_chain_init(&sl->chain, model, s->n_vocab, s->n_ctx + 1);
        sl->tokens    = malloc(((size_t)s->n_ctx + 1) * sizeof *sl->tokens);
        sl->piece_cap = 256;
        sl->piece     = malloc(sl->piece_cap);
        sl->draft     = malloc(((size_t)s->spec.draft_max + 1) * sizeof *sl->draft);
        if (!chain || !sl->tokens || !sl->piece || !sl->draft)
            goto nomem;
        s->info[i].id = i;
    }
    if (p->reply_tokens) {
        /* as many tokens as the K/V can hold: a reply is worth keeping while its rows are */
        int32_t used, cached, total;
        hearth_kv_stats(s->ctx, &used, &cached, &total);
        if (!(s->turns = turns_new(model, (int64_t)total * cp.kv_block)))
            goto nomem;
    }
    s->stats.n_slots = s->n_slots;
    publish_stats(s);
    gate_open(s);
    if (pthread_create(&s->thread, NULL, sched_main, s) != 0) {
        st = fail(HEARTH_ENOMEM, err, err_len, "sched: cannot start the scheduler thread");
        goto err;
    }
    s->thread_started = true;
    *out              = s;
    return HEARTH_OK;
nomem:
    st = fail(HEARTH_ENOMEM, err, err_len, "sched: out of memory for %d slots of %d tokens",
              s->n_slots, s->n_ctx);
err:
    sched_free(s);
    return st;
}

struct turns *sched_turns(struct sched *s)
{
    return s ? s->turns : NULL;
}

void sched_stop(struct sched *s)
{
    if (!s)
        return;
    if (s->thread_started) {
        pthread_mutex_lock(&s->mu);
        s->stopping = true;
        pthread_cond_signal(&s->cv);
        pthread_mutex_unlock(&s->mu);
        sched_gate_wake(s);
        pthread_join(s->thread, NULL);
    }
    sched_free(s);
}

enum hearth_status sched_submit(struct sched *s, struct sched_job *job)
{
    return sched_submit_all(s, &job, 1);
}

enum hearth_status sched_submit_all(struct sched *s, struct sched_job **jobs, int32_t n)
{
    bool ok = n > 0;
    for (int32_t i = 0; i < n; i++)
        ok = ok && jobs[i];
    if (!ok) {
        for (int32_t i = 0; i < n; i++)
            sched_job_free(jobs[i]);
        return HEARTH_EINVAL;
    }
    double t = now_s();
    pthread_mutex_lock(&s->mu);
    /* the jobs that would still wait once every free slot took one */
    if (s->stopping || s->q_len + n - s->n_free > s->max_queue) {
        pthread_mutex_unlock(&s->mu);
        for (int32_t i = 0; i < n; i++)
            sched_job_free(jobs[i]);
        return HEARTH_EFULL;
    }
    for (int32_t i = 0; i < n; i++) {
        s->queue[(s->q_head + s->q_len) % s->q_cap] = (struct qent){jobs[i], t, false};
        s->q_len++;
    }
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    sched_gate_wake(s);
    return HEARTH_OK;
}

void sched_cancel(struct sched *s, uint64_t request_id)
{
    pthread_mutex_lock(&s->mu);
    bool any = false;
    for (int32_t i = 0; i < s->q_len; i++) {
        struct qent *e = &s->queue[(s->q_head + i) % s->q_cap];
        if (e->job->request_id == request_id && !e->cancelled) {
            e->cancelled = any = true;
            s->any_cancelled   = true;
        }
    }
    for (int32_t i = 0; i < s->n_slots; i++) {
        if (s->slot_busy[i] && s->slot_req[i] == request_id && !s->slot_cancel[i])
            s->slot_cancel[i] = any = true;
    }
    if (any)
        pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (any)
        sched_gate_wake(s);
}

int32_t sched_snapshot(struct sched *s, struct sched_stats *stats, struct sched_slot_info *slots,
                       int32_t cap)
{
    pthread_mutex_lock(&s->mu);
    if (stats) {
        *stats             = s->stats;
        stats->n_slots     = s->n_slots;
        stats->slots_busy  = s->n_slots - s->n_free;
        stats->queue_depth = s->q_len;
    }
    for (int32_t i = 0; slots && i < cap && i < s->n_slots; i++)
        slots[i] = s->info[i];
    pthread_mutex_unlock(&s->mu);
    return s->n_slots;
}

int32_t sched_stages(const struct sched *s, struct hearth_stage_info *out, int32_t cap)
{
    for (int32_t i = 0; i < s->n_stages && i < cap; i++)
        out[i] = s->stages[i];
    return s->n_stages < cap ? s->n_stages : cap;
}
