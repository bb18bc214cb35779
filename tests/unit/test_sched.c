/*
 * test_sched.c: the serving scheduler (src/sched/sched.c) on stories260K:
 * concurrent greedy streams equal the reference and each other's solo runs,
 * finish reasons, stop strings, cancel, the queue bound, bad jobs, logprobs,
 * penalties, the prefix cache and the test gate (HEARTH_SERVE_SCHED_GATE).
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hearth.h"
#include "sched/sched.h"
#include "util/testutil.h"

#define MAX_JOBS 64
#define MODEL    "stories260K.gguf"
/* greedy.tsv's continuation of "Once upon a time" (its first 64 tokens begin so) */
#define ONCE ", there was a little girl named Lily. She loved to play outside in the park."

/* text is a non-empty prefix of ONCE */
static bool once_prefix(const char *text)
{
    return text[0] && strncmp(text, ONCE, strlen(text)) == 0;
}

/* ----------------------------------------------------------- collecting --- */

/* Everything the callback saw for one job (job ids index recs). */
struct rec {
    char text[8192];
    size_t len;
    int n_text_events;
    bool done, error, bad_utf8, event_after_end;
    enum sched_finish finish;
    int32_t n_prompt, n_cached, n_generated;
    int32_t stop_hit;
    int32_t text_n_prompt, text_n_generated; /* the last TEXT event's counts */
    double t_first;
    char err[HEARTH_ERR_MAX + 64];
    /* first logprob event */
    int n_logprob_events;
    struct sample_logprob chosen, top[20];
    int32_t n_top;
};

struct collector {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct rec recs[MAX_JOBS];
    struct sched *s;     /* for cancels from the callback */
    uint64_t cancel_job; /* cancel this job's request at its cancel_after-th TEXT */
    int cancel_after;
    uint64_t cancel_also; /* and this request id too, at the same moment */
    uint64_t gate_job;    /* block this job's first TEXT until the gate opens */
    bool gate_open, gate_reached;
};

static bool valid_utf8(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t k        = c < 0x80             ? 1
                          : (c & 0xE0) == 0xC0 ? 2
                          : (c & 0xF0) == 0xE0 ? 3
                          : (c & 0xF8) == 0xF0 ? 4
                                               : 0;
        if (k == 0 || i + k > n)
            return false;
        for (size_t j = 1; j < k; j++)
            if (((unsigned char)s[i + j] & 0xC0) != 0x80)
                return false;
        i += k;
    }
    return true;
}

static void on_event(const struct sched_event *ev, void *user)
{
    struct collector *c = user;
    if (ev->job_id >= MAX_JOBS) /* no cmocka asserts off the test's thread */
        return;
    pthread_mutex_lock(&c->mu);
    struct rec *r = &c->recs[ev->job_id];
    if (r->done || r->error)
        r->event_after_end = true;
    uint64_t cancel = 0, also = 0;
    switch (ev->kind) {
    case SCHED_EV_TEXT:
        r->n_text_events++;
        r->text_n_prompt    = ev->n_prompt;
        r->text_n_generated = ev->n_generated;
        if (!valid_utf8(ev->text, ev->text_len))
            r->bad_utf8 = true;
        if (r->len + ev->text_len < sizeof r->text) {
            memcpy(r->text + r->len, ev->text, ev->text_len);
            r->len += ev->text_len;
            r->text[r->len] = 0;
        }
        if (ev->logprob && r->n_logprob_events++ == 0) {
            r->chosen = *ev->logprob;
            r->n_top  = ev->n_top;
            memcpy(r->top, ev->top, (size_t)ev->n_top * sizeof *ev->top);
        }
        if (c->cancel_job == ev->job_id && r->n_text_events == c->cancel_after) {
            cancel = ev->request_id;
            also   = c->cancel_also;
        }
        if (c->gate_job == ev->job_id && r->n_text_events == 1) {
            c->gate_reached = true;
            pthread_cond_broadcast(&c->cv);
            while (!c->gate_open)
                pthread_cond_wait(&c->cv, &c->mu);
        }
        break;
    case SCHED_EV_DONE:
        r->done        = true;
        r->finish      = ev->finish;
        r->n_prompt    = ev->n_prompt;
        r->n_cached    = ev->n_cached;
        r->n_generated = ev->n_generated;
        r->stop_hit    = ev->stop_hit;
        r->t_first     = ev->t_first_token;
        break;
    case SCHED_EV_ERROR:
        r->error = true;
        snprintf(r->err, sizeof r->err, "%.*s", (int)ev->text_len, ev->text);
        break;
    case SCHED_EV_SLOT: /* this test submits no slot action */
        r->event_after_end = true;
        break;
    }
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    if (cancel) /* from the scheduler thread itself: sched_cancel must not deadlock */
        sched_cancel(c->s, cancel);
    if (also)
        sched_cancel(c->s, also);
}

static struct collector *collector_new(void)
{
    struct collector *c = calloc(1, sizeof *c);
    assert_non_null(c);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    return c;
}

static void collector_free(struct collector *c)
{
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c);
}

/* Waits (up to 60 s) until job id has ended; returns its record. */
static struct rec *wait_end(struct collector *c, uint64_t id)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 60;
    pthread_mutex_lock(&c->mu);
    while (!c->recs[id].done && !c->recs[id].error)
        if (pthread_cond_timedwait(&c->cv, &c->mu, &dl) != 0)
            break;
    bool ended = c->recs[id].done || c->recs[id].error;
    pthread_mutex_unlock(&c->mu);
    if (!ended)
        fail_msg("job %llu did not end within 60 s", (unsigned long long)id);
    return &c->recs[id];
}

/* Waits (up to 60 s) until job id has had n TEXT events; fails the test otherwise. */
static void wait_texts(struct collector *c, uint64_t id, int n)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 60;
    pthread_mutex_lock(&c->mu);
    while (c->recs[id].n_text_events < n)
        if (pthread_cond_timedwait(&c->cv, &c->mu, &dl) != 0)
            break;
    int got = c->recs[id].n_text_events;
    pthread_mutex_unlock(&c->mu);
    if (got < n)
        fail_msg("job %llu had %d TEXT events, not %d, within 60 s", (unsigned long long)id, got,
                 n);
}

/* ------------------------------------------------------------------ setup --- */

static struct hearth_model *load_model(const char *path)
{
    struct hearth_model_params mp = hearth_model_default_params();
    mp.n_threads                  = 1;
    struct hearth_model *m        = NULL;
    char err[HEARTH_ERR_MAX];
    if (hearth_model_load(path, &mp, &m, err, sizeof err))
        fail_msg("load %s: %s", path, err);
    return m;
}

static struct sched *start(struct hearth_model *m, struct collector *c, int32_t n_slots,
                           int32_t n_ctx, int32_t n_batch, int32_t max_queue)
{
    struct sched_params p = {.n_slots   = n_slots,
                             .n_ctx     = n_ctx,
                             .n_batch   = n_batch,
                             .max_queue = max_queue,
                             .n_threads = 1};
    struct sched *s       = NULL;
    char err[HEARTH_ERR_MAX];
    if (sched_start(m, &p, on_event, c, &s, err, sizeof err))
        fail_msg("sched_start: %s", err);
    c->s = s;
    return s;
}

/* A greedy job for text (BOS added as the vocab says). */
static struct sched_job *make_job(struct hearth_model *m, uint64_t id, uint64_t req,
                                  const char *text, int32_t max_tokens)
{
    struct sched_job *j = calloc(1, sizeof *j);
    assert_non_null(j);
    hearth_token *ids = NULL;
    size_t n          = 0;
    char err[HEARTH_ERR_MAX];
    if (hearth_tokenize(m, text, strlen(text), true, true, &ids, &n, err, sizeof err))
        fail_msg("tokenize: %s", err);
    j->id                   = id;
    j->request_id           = req;
    j->prompt               = ids;
    j->n_prompt             = (int32_t)n;
    j->max_tokens           = max_tokens;
    j->sampling             = hearth_sampler_default_params();
    j->sampling.temperature = 0;
    j->top_logprobs         = -1;
    return j;
}

static void add_stop(struct sched_job *j, const char *stop)
{
    j->stop[j->n_stop++] = strdup(stop);
}

/* The reference rows for stories260K from greedy.tsv, unescaped. */
struct ref_row {
    char prompt[128];
    int n;
    char text[1024];
};

static int load_refs(const char *path, struct ref_row *rows, int cap)
{
    char *tsv = tu_read_file(path, NULL);
    assert_non_null(tsv);
    int n = 0;
    for (char *line = strtok(tsv, "\n"); line && n < cap; line = strtok(NULL, "\n")) {
        char *f[4] = {line, NULL, NULL, NULL};
        for (int k = 1; k < 4 && f[k - 1]; k++) {
            char *t = strchr(f[k - 1], '\t');
            if (t) {
                *t   = 0;
                f[k] = t + 1;
            }
        }
        if (!f[3] || strcmp(f[0], "stories260K.gguf") != 0)
            continue;
        snprintf(rows[n].prompt, sizeof rows[n].prompt, "%s", f[1]);
        rows[n].n = atoi(f[2]);
        size_t o  = 0;
        for (const char *p = f[3]; *p && o + 1 < sizeof rows[n].text; p++) {
            if (*p == '\\' && p[1]) {
                p++;
                rows[n].text[o++] = *p == 'n' ? '\n' : *p == 't' ? '\t' : *p;
            } else {
                rows[n].text[o++] = *p;
            }
        }
        rows[n].text[o] = 0;
        n++;
    }
    free(tsv);
    return n;
}

/*
 * 600 bytes of prose, malloc'd: the shared story when it is there, else one sentence
 * repeated (the prefix cache needs only a prompt of several blocks, not the story).
 */
static char *prose_600(void)
{
    const char *story = tu_shared("reference/story.txt");
    char *text        = story ? tu_read_file(story, NULL) : NULL;
    if (text && strlen(text) >= 600) {
        text[600] = 0;
        return text;
    }
    free(text);
    print_message("reference/story.txt not found: the prompt repeats one sentence instead\n");
    static const char line[] = "Once upon a time, there was a little girl named Lily. ";
    text                     = malloc(601);
    assert_non_null(text);
    for (size_t i = 0; i < 600; i++)
        text[i] = line[i % (sizeof line - 1)];
    text[600] = 0;
    return text;
}

/* ------------------------------------------------------------------ tests --- */

static void test_concurrent_greedy_matches_reference_and_solo(void **state)
{
    (void)state;
    TU_MODEL_OR_SKIP(path, MODEL);
    TU_SHARED_OR_SKIP(tsv, "reference/greedy.tsv");
    struct ref_row refs[8];
    int n_ref = load_refs(tsv, refs, 8);
    assert_int_equal(n_ref, 4);
    struct hearth_model *m = load_model(path);

    /* four at once; a small batch forces chunked, shared prefill beside decodes */
    struct collector *c = collector_new();
    struct sched *s     = start(m, c, 4, 256, 6, 4);
    for (int i = 0; i < n_ref; i++)
        assert_int_equal(
            sched_submit(s, make_job(m, (uint64_t)i + 1, 100 + i, refs[i].prompt, refs[i].n)),
            HEARTH_OK);
    for (int i = 0; i < n_ref; i++) {
        struct rec *r = wait_end(c, (uint64_t)i + 1);
        assert_false(r->error);
        print_message("[%d] %s|%s\n", i, refs[i].prompt, r->text);
        assert_string_equal(r->text, refs[i].text);
        assert_int_equal(r->finish, SCHED_FINISH_LENGTH);
        assert_int_equal(r->n_generated, refs[i].n);
        assert_int_equal(r->n_text_events, refs[i].n);
        assert_true(r->t_first > 0);
        assert_false(r->bad_utf8);
        assert_false(r->event_after_end);
    }
    struct sched_stats st;
    struct sched_slot_info info[4];
    assert_int_equal(sched_snapshot(s, &st, info, 4), 4);
    assert_int_equal(st.n_slots, 4);
    assert_int_equal(st.slots_busy, 0);
    assert_int_equal(st.queue_depth, 0);
    uint64_t want_gen = 0;
    for (int i = 0; i < n_ref; i++)
        want_gen += (uint64_t)refs[i].n;
    assert_int_equal(st.generated_tokens_total, want_gen);
    assert_true(st.kv_blocks_total > 0);
    sched_stop(s);

    /* each alone in one slot: the same text */
    struct collector *c1 = collector_new();
    s                    = start(m, c1, 1, 256, 64, 8);
    for (int i = 0; i < n_ref; i++)
        assert_int_equal(
            sched_submit(s, make_job(m, (uint64_t)i + 1, 100 + i, refs[i].prompt, refs[i].n)),
            HEARTH_OK);
    for (int i = 0; i < n_ref; i++) {
        struct rec *r = wait_end(c1, (uint64_t)i + 1);
        assert_false(r->error);
        assert_string_equal(r->text, c->recs[i + 1].text);
    }
    sched_stop(s);
    collector_free(c);
    collector_free(c1);
    hearth_model_free(m);
}

static void test_max_tokens_and_stop_strings(void **state)
{
    (void)state;
    TU_MODEL_OR_SKIP(path, MODEL);
    struct hearth_model *m = load_model(path);
    struct collector *c    = collector_new();
    struct sched *s        = start(m, c, 2, 256, 32, 8);

    assert_int_equal(sched_submit(s, make_job(m, 1, 1, "Once upon a time", 5)), HEARTH_OK);
    struct rec *r = wait_end(c, 1);
    assert_int_equal(r->finish, SCHED_FINISH_LENGTH);
    assert_int_equal(r->n_generated, 5);
    assert_int_equal(r->stop_hit, 0);
    assert_int_equal(r->text_n_prompt, r->n_prompt); /* TEXT events carry the counts too */
    assert_true(r->text_n_generated >= 1 && r->text_n_generated <= 5);
    assert_true(once_prefix(r->text));

    /* a stop string spanning several tokens: never sent, text before it kept */
    struct sched_job *j = make_job(m, 2, 2, "Once upon a time", 64);
    add_stop(j, "a little girl");
    add_stop(j, "zzz");
    assert_int_equal(sched_submit(s, j), HEARTH_OK);
    r = wait_end(c, 2);
    assert_false(r->error);
    assert_int_equal(r->finish, SCHED_FINISH_STOP);
    assert_int_equal(r->stop_hit, 1); /* "a little girl", the first stop string */
    assert_string_equal(r->text, ", there was ");

    /* overlapping stop strings: the earliest wins */
    j = make_job(m, 3, 3, "Once upon a time", 64);
    add_stop(j, "Lily. She");
    add_stop(j, "named");
    add_stop(j, "named Lily");
    assert_int_equal(sched_submit(s, j), HEARTH_OK);
    r = wait_end(c, 3);
    assert_int_equal(r->finish, SCHED_FINISH_STOP);
    assert_string_equal(r->text, ", there was a little girl ");
    assert_int_equal(r->stop_hit, 2); /* "named" */

    /* a stop string that never comes: held-back prefixes are released */
    j = make_job(m, 4, 4, "Once upon a time", 24);
    add_stop(j, "girl named Bob");
    add_stop(j, "Lily. She hated");
    assert_int_equal(sched_submit(s, j), HEARTH_OK);
    r = wait_end(c, 4);
    assert_int_equal(r->finish, SCHED_FINISH_LENGTH);
    assert_int_equal(sched_submit(s, make_job(m, 5, 5, "Once upon a time", 24)), HEARTH_OK);
    struct rec *plain = wait_end(c, 5);
    assert_string_equal(r->text, plain->text);
    assert_non_null(strstr(r->text, "girl named Lily. She"));
    sched_stop(s);
    collector_free(c);
    hearth_model_free(m);
}

/* Blocks until the gated job has reached its first token and the scheduler waits there. */
static void wait_at_gate(struct collector *c)
{
    pthread_mutex_lock(&c->mu);
    while (!c->gate_reached)
        pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
}

static void open_gate(struct collector *c)
{
    pthread_mutex_lock(&c->mu);
    c->gate_open = true;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

/* Job 1 (request 1) takes a slot and holds the scheduler at its first token. */
static void hold_scheduler(struct sched *s, struct collector *c, struct hearth_model *m)
{
    c->gate_job         = 1;
    struct sched_job *a = make_job(m, 1, 1, "Once upon a time", 300);
    a->ignore_eos       = true;
    assert_int_equal(sched_submit(s, a), HEARTH_OK);
    wait_at_gate(c);
}

static void test_cancel_running_and_queued(void **state)
{
    (void)state;
    TU_MODEL_OR_SKIP(path, MODEL);
    struct hearth_model *m = load_model(path);
    struct collector *c    = collector_new();
    struct sched *s        = start(m, c, 1, 512, 32, 4);
    c->cancel_job          = 1; /* at job 1's 3rd token, cancel it and queued job 2 */
    c->cancel_after        = 3;
    c->cancel_also         = 20;
    struct sched_job *a    = make_job(m, 1, 10, "Once upon a time", 400);
    a->ignore_eos          = true;
    struct sched_job *b    = make_job(m, 2, 20, "The little dog", 400);
    c->gate_job            = 1; /* job 2 is queued before job 1 passes its first token */
    assert_int_equal(sched_submit(s, a), HEARTH_OK);
    wait_at_gate(c);
    assert_int_equal(sched_submit(s, b), HEARTH_OK);
    open_gate(c);
    struct rec *r = wait_end(c, 1);
    assert_true(r->done);
    assert_int_equal(r->finish, SCHED_FINISH_CANCELLED);
    assert_int_equal(r->n_generated, 3);
    r = wait_end(c, 2);
    assert_true(r->done);
    assert_int_equal(r->finish, SCHED_FINISH_CANCELLED);
    assert_int_equal(r->n_generated, 0);
    assert_int_equal(r->n_text_events, 0);

    /* the slot is free again and serves the next job */
    struct sched_stats st;
    sched_snapshot(s, &st, NULL, 0);
    assert_int_equal(st.slots_busy, 0);
    assert_int_equal(st.queue_depth, 0);
    assert_int_equal(sched_submit(s, make_job(m, 3, 30, "Once upon a time", 5)), HEARTH_OK);
    r = wait_end(c, 3);
    assert_int_equal(r->finish, SCHED_FINISH_LENGTH);
    assert_true(once_prefix(r->text));
    sched_cancel(s, 12345); /* nobody's: harmless */
    sched_stop(s);
    collector_free(c);
    hearth_model_free(m);
}

static void test_queue_full_and_shutdown(void **state)
{
    (void)state;
    TU_MODEL_OR_SKIP(path, MODEL);
    struct hearth_model *m = load_model(path);
    struct collector *c    = collector_new();
    struct sched *s        = start(m, c, 1, 512, 32, 1);
    hold_scheduler(s, c, m);
    /* the slot is busy: one may wait, the next is refused (and freed by sched_submit) */
    assert_int_equal(sched_submit(s, make_job(m, 2, 2, "The little dog", 5)), HEARTH_OK);
    assert_int_equal(sched_submit(s, make_job(m, 3, 3, "The little dog", 5)), HEARTH_EFULL);
    struct sched_stats st;
    sched_snapshot(s, &st, NULL, 0);
    assert_int_equal(st.queue_depth, 1);
    assert_int_equal(st.slots_busy, 1);
    open_gate(c);
    /* stopping now: the running and the waiting job both end with an ERROR */
    sched_stop(s);
    assert_true(c->recs[1].done || c->recs[1].error);
    assert_true(c->recs[2].done || c->recs[2].error);
    if (c->recs[1].error)
        assert_string_equal(c->recs[1].err, "server shutting down");
    assert_false(c->recs[3].done || c->recs[3].error);
    collector_free(c);
    hearth_model_free(m);
}

/*
 * A request's choices are admitted all or none: with one slot held and room
 * for one waiting job, three choices are refused whole (none queued) and two
 * are taken whole, whatever the scheduler does meanwhile.
 */
static void test_submit_all_is_all_or_nothing(void **state)
{
    (void)state;
    TU_MODEL_OR_SKIP(path, MODEL);
    struct hearth_model *m = load_model(path);
    struct collector *c    = collector_new();
    struct sched *s        = start(m, c, 2, 512, 32, 1);
    hold_scheduler(s, c, m);
    struct sched_job *three[3], *two[2];
    for (int i = 0; i < 3; i++)
        three[i] = make_job(m, (uint64_t)(2 + i), 2, "The little dog", 5);
    assert_int_equal(sched_submit_all(s, three, 3), HEARTH_EFULL);
    struct sched_stats st;
    sched_snapshot(s, &st, NULL, 0);
    assert_int_equal(st.queue_depth, 0);
    for (int i = 0; i < 2; i++)
        two[i] = make_job(m, (uint64_t)(5 + i), 3, "The little dog", 5);
    assert_int_equal(sched_submit_all(s, two, 2), HEARTH_OK);
    sched_snapshot(s, &st, NULL, 0);
    assert_int_equal(st.queue_depth, 2);
    open_gate(c);
    sched_stop(s);
    for (int id = 2; id <= 4; id++)
        assert_false(c->recs[id].done || c->recs[id].error);
    for (int id = 5; id <= 6; id++)
        assert_true(c->recs[id].done || c->recs[id].error);
    collector_free(c);
    hearth_model_free(m);
}

static void test_bad_jobs_get_errors(void **state)
{
    (void)state;
    TU_MODEL_OR_SKIP(path, MODEL);
    struct hearth_model *m = load_model(path);
    struct collector *c    = collector_new();
    struct sched *s        = start(m, c, 2, 64, 32, 8);

    struct sched_job *j = make_job(m, 1, 1, "Once", 4); /* then made 64 tokens long */
    hearth_token *p     = realloc(j->prompt, 64 * sizeof *p);
    assert_non_null(p);
    for (int i = j->n_prompt; i < 64; i++)
        p[i] = p[j->n_prompt - 1];
    j->prompt   = p;
    j->n_prompt = 64;
    assert_int_equal(sched_submit(s, j), HEARTH_OK);

    j            = make_job(m, 2, 2, "Once", 4);
    j->prompt[0] = hearth_model_n_vocab(m) + 7;
    assert_int_equal(sched_submit(s, j), HEARTH_OK);
    j             = make_job(m, 3, 3, "Once", 4);
    j->max_tokens = 0;
    assert_int_equal(sched_submit(s, j), HEARTH_OK);
    assert_int_equal(sched_submit(s, NULL), HEARTH_EINVAL);

    for (uint64_t id = 1; id <= 3; id++) {
        struct rec *r = wait_end(c, id);
        assert_true(r->error);
        print_message("job %llu: %s\n", (unsigned long long)id, r->err);
        assert_true(strncmp(r->err, "sched: ", 7) == 0);
    }
    /* a prompt of n_ctx - 1 tokens still gets one token (then the slot is full) */
    j = make_job(m, 4, 4, "Once upon a time", 100);
    p = realloc(j->prompt, 63 * sizeof *p);
    assert_non_null(p);
    for (int i = j->n_prompt; i < 63; i++)
        p[i] = p[1 + i % (j->n_prompt - 1)];
    j->prompt     = p;
    j->n_prompt   = 63;
    j->ignore_eos = true;
    assert_int_equal(sched_submit(s, j), HEARTH_OK);
    struct rec *r = wait_end(c, 4);
    assert_false(r->error);
    assert_int_equal(r->finish, SCHED_FINISH_LENGTH);
    assert_int_equal(r->n_generated, 2);
    sched_stop(s);
    collector_free(c);
    hearth_model_free(m);
}

static void test_logprobs_and_penalties(void **state)
{
    (void)state;
    TU_MODEL_OR_SKIP(path, MODEL);
    struct hearth_model *m = load_model(path);
    struct collector *c    = collector_new();
    struct sched *s        = start(m, c, 2, 256, 32, 8);

    struct sched_job *j = make_job(m, 1, 1, "Once upon a time", 8);
    j->top_logprobs     = 5;
    assert_int_equal(sched_submit(s, j), HEARTH_OK);
    struct rec *r = wait_end(c, 1);
    assert_true(once_prefix(r->text));
    assert_int_equal(r->n_logprob_events, 8);
    assert_int_equal(r->n_top, 5);
    assert_int_equal(r->top[0].token, r->chosen.token); /* greedy picks the best */
    assert_float_equal(r->top[0].logprob, r->chosen.logprob, 1e-6);
    assert_true(r->chosen.logprob <= 0);
    for (int i = 1; i < 5; i++)
        assert_true(r->top[i].logprob <= r->top[i - 1].logprob);

    /* the reference repeats itself ("a big box with a big box"); penalties steer away */
    const char *prompt = "Lily and Tom went to the park";
    assert_int_equal(sched_submit(s, make_job(m, 2, 2, prompt, 40)), HEARTH_OK);
    j                    = make_job(m, 3, 3, prompt, 40);
    j->frequency_penalty = 1.5f;
    j->presence_penalty  = 0.5f;
    assert_int_equal(sched_submit(s, j), HEARTH_OK);
    struct rec *plain = wait_end(c, 2), *pen = wait_end(c, 3);
    print_message("plain:     %s\npenalized: %s\n", plain->text, pen->text);
    assert_string_not_equal(plain->text, pen->text);
    assert_null(strstr(pen->text, "big box with a big box"));
    sched_stop(s);
    collector_free(c);
    hearth_model_free(m);
}

static void test_prefix_cache_reuse(void **state)
{
    (void)state;
    TU_MODEL_OR_SKIP(path, MODEL);
    char *text             = prose_600();
    struct hearth_model *m = load_model(path);
    struct collector *c    = collector_new();
    struct sched *s        = start(m, c, 2, 512, 64, 8);

    assert_int_equal(sched_submit(s, make_job(m, 1, 1, text, 8)), HEARTH_OK);
    struct rec *r1 = wait_end(c, 1);
    assert_false(r1->error);
    assert_int_equal(r1->n_cached, 0);
    assert_int_equal(sched_submit(s, make_job(m, 2, 2, text, 8)), HEARTH_OK);
    struct rec *r2 = wait_end(c, 2);
    assert_false(r2->error);
    /* the same prompt: every whole 32-token block but the last token's is found again */
    int32_t want = (r2->n_prompt - 1) / 32 * 32;
    print_message("n_prompt %d, n_cached %d (want %d)\n", r2->n_prompt, r2->n_cached, want);
    assert_string_equal(r1->text, r2->text);
    struct sched_stats st;
    sched_snapshot(s, &st, NULL, 0);
    assert_int_equal(st.prompt_tokens_total, (uint64_t)(r1->n_prompt + r2->n_prompt));
    assert_int_equal(st.prefix_hit_tokens_total, (uint64_t)r2->n_cached);
    if (r2->n_cached < want)
        fail_msg("prefix cache: reused %d tokens of %d, want %d (hearth_seq_reuse_prefix)",
                 r2->n_cached, r2->n_prompt, want);
    sched_stop(s);
    collector_free(c);
    hearth_model_free(m);
    free(text);
}

/* Many jobs through few slots, some cancelled while queued or running: each ends exactly once. */
static void test_churn_with_cancels(void **state)
{
    (void)state;
    TU_MODEL_OR_SKIP(path, MODEL);
    struct hearth_model *m = load_model(path);
    struct collector *c    = collector_new();
    struct sched *s        = start(m, c, 3, 128, 16, 40);
    const char *prompts[]  = {"Once upon a time", "The little dog", "One day, a big bird",
                              "Lily and Tom went to the park"};
    const int n_jobs       = 40;
    for (int i = 1; i <= n_jobs; i++) {
        struct sched_job *j = make_job(m, (uint64_t)i, (uint64_t)i, prompts[i % 4], 1 + i % 23);
        j->ignore_eos       = i % 3 == 0;
        if (i % 4 == 1)
            add_stop(j, "girl");
        assert_int_equal(sched_submit(s, j), HEARTH_OK);
        if (i % 5 == 0)
            sched_cancel(s, (uint64_t)(i - 2));
    }
    int n_cancelled = 0;
    for (int i = 1; i <= n_jobs; i++) {
        struct rec *r = wait_end(c, (uint64_t)i);
        assert_true(r->done);
        assert_false(r->bad_utf8);
        n_cancelled += r->finish == SCHED_FINISH_CANCELLED;
        if (r->finish != SCHED_FINISH_CANCELLED)
            assert_true(r->n_generated >= 1 && r->n_generated <= 1 + i % 23);
    }
    print_message("%d of %d cancelled before they ended\n", n_cancelled, n_jobs);
    struct sched_stats st;
    struct sched_slot_info info[3];
    sched_snapshot(s, &st, info, 3);
    assert_int_equal(st.slots_busy, 0);
    assert_int_equal(st.queue_depth, 0);
    for (int i = 0; i < 3; i++)
        assert_false(info[i].busy);
    sched_stop(s);
    pthread_mutex_lock(&c->mu);
    for (int i = 1; i <= n_jobs; i++)
        assert_false(c->recs[i].event_after_end);
    pthread_mutex_unlock(&c->mu);
    collector_free(c);
    hearth_model_free(m);
}

/*
 * Speculation's depth bounds: left at 0, the cap is the default (16 for the
 * n-gram drafter alone on a model without recurrent layers), so a floor
 * above it is refused at start, naming both and saying the cap was the
 * default; a cap given explicitly is named plainly.
 */
static void test_spec_default_cap(void **state)
{
    (void)state;
    TU_MODEL_OR_SKIP(path, MODEL);
    struct hearth_model *m = load_model(path);
    struct collector *c    = collector_new();
    struct sched_params p  = {
         .n_slots   = 1,
         .n_ctx     = 256,
         .n_batch   = 64,
         .max_queue = 4,
         .n_threads = 1,
         .spec      = {.ngram = true, .draft_min = 17, .ngram_min = 1, .ngram_max = 4}};
    struct sched *s = NULL;
    char err[HEARTH_ERR_MAX];
    assert_int_equal(sched_start(m, &p, on_event, c, &s, err, sizeof err), HEARTH_EINVAL);
    assert_null(s);
    assert_non_null(strstr(err, "drafts of 17..16 tokens (the most by default)"));
    p.spec.draft_max = 8;
    assert_int_equal(sched_start(m, &p, on_event, c, &s, err, sizeof err), HEARTH_EINVAL);
    assert_non_null(strstr(err, "drafts of 17..8 tokens and"));
    /* at the default's own floor it starts */
    p.spec.draft_min = 16;
    p.spec.draft_max = 0;
    if (sched_start(m, &p, on_event, c, &s, err, sizeof err))
        fail_msg("sched_start: %s", err);
    sched_stop(s);
    collector_free(c);
    hearth_model_free(m);
}

/*
 * The test gate: k bytes let exactly k steps run; a cancel and sched_stop end
 * a held job without another step; closing the write end lifts it.
 */
static void test_fifo_gate(void **state)
{
    (void)state;
    TU_MODEL_OR_SKIP(path, MODEL);
    char *dir = tu_tmpdir();
    char fifo[600];
    snprintf(fifo, sizeof fifo, "%s/gate", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    struct hearth_model *m = load_model(path);
    struct collector *c    = collector_new();
    setenv("HEARTH_SERVE_SCHED_GATE", fifo, 1);
    struct sched *s = start(m, c, 2, 512, 64, 4);
    unsetenv("HEARTH_SERVE_SCHED_GATE");
    int w = open(fifo, O_WRONLY | O_NONBLOCK); /* sched_start opened the read end */
    assert_true(w >= 0);

    struct sched_job *a = make_job(m, 1, 1, "Once upon a time", 300);
    a->ignore_eos       = true;
    assert_int_equal(sched_submit(s, a), HEARTH_OK);
    assert_int_equal(write(w, "sss", 3), 3);
    wait_texts(c, 1, 3);
    assert_int_equal(write(w, "s", 1), 1);
    wait_texts(c, 1, 4);

    /* a cancel while it holds: the slot frees without a step (no fifth token) */
    sched_cancel(s, 1);
    struct rec *r = wait_end(c, 1);
    assert_true(r->done);
    assert_int_equal(r->finish, SCHED_FINISH_CANCELLED);
    assert_int_equal(r->n_generated, 4);

    /* sched_stop while it holds a job mid-generation: the job fails, nothing hangs */
    struct sched_job *b = make_job(m, 2, 2, "The little dog", 300);
    b->ignore_eos       = true;
    assert_int_equal(sched_submit(s, b), HEARTH_OK);
    assert_int_equal(write(w, "s", 1), 1);
    wait_texts(c, 2, 1);
    sched_stop(s);
    r = wait_end(c, 2);
    assert_true(r->error);
    assert_int_equal(r->n_text_events, 1);
    assert_non_null(strstr(r->err, "shutting down"));
    close(w);

    /* the write end opened and closed unwritten (a test that died): everything runs */
    setenv("HEARTH_SERVE_SCHED_GATE", fifo, 1);
    s = start(m, c, 1, 512, 64, 4);
    unsetenv("HEARTH_SERVE_SCHED_GATE");
    w = open(fifo, O_WRONLY | O_NONBLOCK);
    assert_true(w >= 0);
    close(w);
    assert_int_equal(sched_submit(s, make_job(m, 3, 3, "Once upon a time", 24)), HEARTH_OK);
    r = wait_end(c, 3);
    assert_true(r->done);
    assert_int_equal(r->finish, SCHED_FINISH_LENGTH);
    assert_int_equal(r->n_generated, 24);
    assert_true(once_prefix(r->text));
    sched_stop(s);

    collector_free(c);
    hearth_model_free(m);
    tu_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_concurrent_greedy_matches_reference_and_solo),
        cmocka_unit_test(test_max_tokens_and_stop_strings),
        cmocka_unit_test(test_cancel_running_and_queued),
        cmocka_unit_test(test_queue_full_and_shutdown),
        cmocka_unit_test(test_submit_all_is_all_or_nothing),
        cmocka_unit_test(test_bad_jobs_get_errors),
        cmocka_unit_test(test_logprobs_and_penalties),
        cmocka_unit_test(test_prefix_cache_reuse),
        cmocka_unit_test(test_churn_with_cancels),
        cmocka_unit_test(test_fifo_gate),
        cmocka_unit_test(test_spec_default_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
