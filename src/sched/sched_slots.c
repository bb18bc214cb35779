/*
 * sched_slots.c: slot actions (sched.h): a slot's conversation saved to a
 * file, restored from one, or forgotten, on the scheduler thread between
 * steps.
 *
 * An idle slot's sequence is empty: its conversation's blocks sit in the
 * prefix cache (hearth_seq_end at release), its tokens in the slot's
 * buffer. A save takes those blocks back into the slot's sequence,
 * computes the rest (what the cache dropped since), writes the file, and
 * empties the sequence again. A restore loads the file into the sequence
 * and ends it the same way: the next request with that prefix, in
 * whichever slot, reuses its blocks. Either way the slot is left as idle
 * slots are.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sched/sched_int.h"
#include "util/clock.h"
#include "util/errfmt.h"

/* Rows [from, n) of the slot's conversation through the model, n_batch at a time. */
static enum hearth_status compute(struct sched *s, struct slot *sl, int32_t from, int32_t n,
                                  char *err, size_t err_len)
{
    while (from < n) {
        const int32_t k = n - from < s->n_batch ? n - from : s->n_batch;
        for (int32_t i = 0; i < k; i++) {
            s->b_tok[i]    = sl->tokens[from + i];
            s->b_pos[i]    = from + i;
            s->b_seq[i]    = sl->id;
            s->b_logits[i] = 0;
        }
        const struct hearth_batch b = {
            .n = k, .token = s->b_tok, .pos = s->b_pos, .seq = s->b_seq, .logits = s->b_logits};
        enum hearth_status st = hearth_decode(s->ctx, &b, err, err_len);
        if (st)
            return st;
        from += k;
    }
    return HEARTH_OK;
}

static void save(struct sched *s, struct slot *sl, struct sched_slot_op *op)
{
    const int32_t n = sl->n_last;
    if (n < 1) {
        op->status = fail(HEARTH_EINVAL, op->err, sizeof op->err,
                          "slot %d holds no conversation: nothing to save", sl->id);
        return;
    }
    hearth_seq_truncate(s->ctx, sl->id, 0);
    int32_t m = hearth_seq_reuse_prefix(s->ctx, sl->id, sl->tokens, n);
    if (m < 0 || m > n || hearth_seq_len(s->ctx, sl->id) != m) {
        hearth_seq_truncate(s->ctx, sl->id, 0);
        m = 0;
    }
    op->status = compute(s, sl, m, n, op->err, sizeof op->err);
    if (!op->status)
        op->status =
            hearth_seq_save(s->ctx, sl->id, sl->tokens, n, op->path, op->err, sizeof op->err);
    if (!op->status) {
        struct stat sb;
        op->n_tokens = n;
        op->n_bytes  = lstat(op->path, &sb) == 0 ? (uint64_t)sb.st_size : 0;
    }
    const int32_t have = hearth_seq_len(s->ctx, sl->id);
    hearth_seq_end(s->ctx, sl->id, sl->tokens, have < n ? have : n);
}

static void restore(struct sched *s, struct slot *sl, struct sched_slot_op *op)
{
    struct stat sb;
    /* lstat: a link is refused as it is (hearth_seq_load checks again on what it opens) */
    if (lstat(op->path, &sb) != 0) {
        op->status = fail(errno == ENOENT ? HEARTH_EINVAL : HEARTH_EIO, op->err, sizeof op->err,
                          "cannot read the slot file: %s", strerror(errno));
        return;
    }
    if (!S_ISREG(sb.st_mode)) {
        op->status = fail(HEARTH_EINVAL, op->err, sizeof op->err,
                          "the slot file is refused: only a regular file is read, never "
                          "through a link");
        return;
    }
    hearth_token *tokens = NULL;
    int32_t n            = 0;
    hearth_seq_truncate(s->ctx, sl->id, 0);
    op->status = hearth_seq_load(s->ctx, sl->id, op->path, &tokens, &n, op->err, sizeof op->err);
    if (!op->status && n > s->n_ctx)
        op->status = fail(HEARTH_EINVAL, op->err, sizeof op->err,
                          "the slot file holds %d tokens and a slot %d", n, s->n_ctx);
    if (!op->status) {
        memcpy(sl->tokens, tokens, (size_t)n * sizeof *tokens);
        sl->n_last   = n;
        op->n_tokens = n;
        op->n_bytes  = (uint64_t)sb.st_size;
    }
    free(tokens);
    if (!op->status) /* what it loaded stays cached */
        hearth_seq_end(s->ctx, sl->id, sl->tokens, n);
    else
        hearth_seq_truncate(s->ctx, sl->id, 0);
}

static void run(struct sched *s, struct sched_slot_op *op)
{
    struct slot *sl = &s->slots[op->slot];
    const double t0 = now_s();
    op->status      = HEARTH_OK;
    op->err[0]      = 0;
    switch (op->action) {
    case SCHED_SLOT_SAVE:
        save(s, sl, op);
        break;
    case SCHED_SLOT_RESTORE:
        restore(s, sl, op);
        break;
    case SCHED_SLOT_ERASE:
        op->n_tokens = sl->n_last;
        sl->n_last   = 0;
        break;
    }
    op->seconds = now_s() - t0;
}

static void done(struct sched *s, struct sched_slot_op *op)
{
    struct sched_event ev = {.kind       = SCHED_EV_SLOT,
                             .request_id = op->request_id,
                             .user       = op->user,
                             .text       = op->err,
                             .text_len   = strlen(op->err),
                             .op         = op};
    s->on_event(&ev, s->user);
}

void sched_slot_ops_run(struct sched *s)
{
    for (;;) {
        pthread_mutex_lock(&s->mu);
        struct sched_slot_op **at = &s->ops;
        while (*at && s->slots[(*at)->slot].job)
            at = &(*at)->next;
        struct sched_slot_op *op = *at;
        if (op)
            *at = op->next;
        pthread_mutex_unlock(&s->mu);
        if (!op)
            return;
        run(s, op);
        done(s, op);
    }
}

void sched_slot_ops_fail(struct sched *s, const char *msg)
{
    pthread_mutex_lock(&s->mu);
    struct sched_slot_op *op = s->ops;
    s->ops                   = NULL;
    pthread_mutex_unlock(&s->mu);
    while (op) {
        struct sched_slot_op *next = op->next;
        op->status                 = fail(HEARTH_EFULL, op->err, sizeof op->err, "%s", msg);
        done(s, op);
        op = next;
    }
}

enum hearth_status sched_slot_submit(struct sched *s, struct sched_slot_op *op)
{
    if (!op || op->slot < 0 || op->slot >= s->n_slots)
        return HEARTH_EINVAL;
    op->next = NULL;
    pthread_mutex_lock(&s->mu);
    if (s->stopping) {
        pthread_mutex_unlock(&s->mu);
        return HEARTH_EFULL;
    }
    struct sched_slot_op **at = &s->ops;
    while (*at)
        at = &(*at)->next;
    *at = op;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    sched_gate_wake(s);
    return HEARTH_OK;
}
