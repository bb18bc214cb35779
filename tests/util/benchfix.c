/* benchfix.c: the scripted OpenAI streaming server of the bench tests (benchfix.h). */
#include "util/benchfix.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_HEAD (64 * 1024)
#define MAX_BODY (8u << 20)

/* The stamps of one connection's response: chunk j ends at raw byte end[j] and came at t[j] s. */
struct conn_log {
    int port;
    size_t n, cap;
    uint64_t *end;
    double *t;
    struct conn_log *next;
};

/* One connection being served. */
struct conn {
    struct benchfix *fx;
    int fd;
    int port; /* the client's */
    struct conn_log *log;
    uint64_t sent;      /* raw bytes sent so far */
    struct timespec t0; /* realtime mode: the request's read */
    struct conn *next;
};

struct benchfix {
    int listen_fd, port;
    char url[64];
    int wake[2]; /* a pipe written once at stop: every poll sees it readable */
    pthread_t acceptor;
    pthread_mutex_t mu; /* everything below */
    pthread_cond_t cv;  /* n_active, n_held, release_gen changes; stopping */
    bool stopping;
    int n_active;       /* connection threads running */
    struct conn *conns; /* those connections */
    struct benchfix_step dflt;
    struct benchfix_step *script;
    int n_script, cap_script, next_step;
    uint32_t seed;
    int n_common;
    bool no_tokenize, realtime;
    struct conn_log *logs;
    int n_held;      /* requests ever held */
    int release_gen; /* bumped by benchfix_release */
    struct benchfix_req **reqs;
    int n_reqs, cap_reqs;
    int n_models, n_tokenize;
};

/* ------------------------------------------------------------- helpers --- */

/* A growing string; a failed allocation aborts the test process (no test survives it). */
struct buf {
    char *p;
    size_t len, cap;
};

static void buf_add(struct buf *b, const void *data, size_t len)
{
    if (b->len + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + len + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p)
            abort();
        b->p   = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, len);
    b->len += len;
    b->p[b->len] = 0;
}

static void buf_printf(struct buf *b, const char *fmt, ...)
{
    char tmp[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0)
        abort();
    if ((size_t)n < sizeof tmp) {
        buf_add(b, tmp, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big)
        abort();
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    buf_add(b, big, (size_t)n);
    free(big);
}

static uint32_t mix32(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

static uint32_t fnv1a(uint32_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

/*
 * Token i of the reply to a prompt hashed to ph: the first letter carries
 * seed modulo 26, so two seeds that differ there differ in it.
 */
static void token_word(uint32_t ph, int i, uint32_t seed, int n_common, char out[8])
{
    uint32_t s = i < n_common ? 0 : seed;
    uint32_t h = mix32(ph ^ mix32((uint32_t)i * 0x9e3779b9u + 1));
    uint32_t g = mix32(h ^ mix32(s + 0x632be5abu));
    int len    = 2 + (int)(g % 5);
    out[0]     = (char)('a' + (h % 26 + s % 26) % 26);
    for (int j = 1; j < len; j++) {
        g      = mix32(g + (uint32_t)j);
        out[j] = (char)('a' + g % 26);
    }
    out[len]     = ' ';
    out[len + 1] = 0;
}

static int count_words(const char *s)
{
    int n = 0;
    for (bool in = false; *s; s++) {
        bool sp = isspace((unsigned char)*s);
        if (!sp && !in)
            n++;
        in = !sp;
    }
    return n;
}

static double ts_s(const struct timespec *t)
{
    return (double)t->tv_sec + (double)t->tv_nsec * 1e-9;
}

/* ------------------------------------------------------------- sending --- */

static bool send_all(int fd, const char *p, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        p += n;
        len -= (size_t)n;
    }
    return true;
}

/*
 * Sends bytes as one send() after stamping them with virtual time t (s):
 * the stamp is recorded first, so the bench can never read bytes whose
 * time is not yet known.
 */
static bool send_at(struct conn *c, double t, const char *p, size_t len)
{
    struct benchfix *fx = c->fx;
    pthread_mutex_lock(&fx->mu);
    bool realtime        = fx->realtime;
    struct conn_log *log = c->log;
    if (log->n == log->cap) {
        size_t cap  = log->cap ? log->cap * 2 : 64;
        uint64_t *e = realloc(log->end, cap * sizeof *e);
        if (e)
            log->end = e;
        double *tt = realloc(log->t, cap * sizeof *tt);
        if (tt)
            log->t = tt;
        if (!e || !tt)
            abort();
        log->cap = cap;
    }
    c->sent += len;
    log->end[log->n] = c->sent;
    log->t[log->n]   = t;
    log->n++;
    pthread_mutex_unlock(&fx->mu);
    if (realtime) {
        double at          = ts_s(&c->t0) + t;
        struct timespec dl = {(time_t)at, (long)((at - (double)(time_t)at) * 1e9)};
        if (dl.tv_nsec >= 1000000000L)
            dl.tv_nsec = 999999999L;
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &dl, NULL) == EINTR)
            ;
    }
    return send_all(c->fd, p, len);
}

/* One chunk of the chunked transfer coding holding one SSE event "data: json". */
static bool send_event(struct conn *c, double t, const char *json, bool last)
{
    struct buf b = {0};
    size_t n     = strlen("data: ") + strlen(json) + 2;
    buf_printf(&b, "%zx\r\ndata: %s\n\n\r\n", n, json);
    if (last)
        buf_add(&b, "0\r\n\r\n", 5);
    bool ok = send_at(c, t, b.p, b.len);
    free(b.p);
    return ok;
}

static bool send_whole(struct conn *c, int status, const char *reason, const char *json)
{
    struct buf b = {0};
    buf_printf(&b,
               "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
               "Connection: close\r\n\r\n%s",
               status, reason, strlen(json), json);
    bool ok = send_at(c, 0, b.p, b.len);
    free(b.p);
    return ok;
}

static bool send_error(struct conn *c, int status, const char *reason, const char *type,
                       const char *msg)
{
    char json[512];
    snprintf(json, sizeof json,
             "{\"error\":{\"message\":\"%s\",\"type\":\"%s\",\"param\":null,\"code\":%d}}", msg,
             type, status);
    return send_whole(c, status, reason, json);
}

/* ------------------------------------------------------------- answers --- */

static void record(struct benchfix *fx, struct benchfix_req *r)
{
    pthread_mutex_lock(&fx->mu);
    if (fx->n_reqs == fx->cap_reqs) {
        int cap                  = fx->cap_reqs ? fx->cap_reqs * 2 : 64;
        struct benchfix_req **rs = realloc(fx->reqs, (size_t)cap * sizeof *rs);
        if (!rs)
            abort();
        fx->reqs     = rs;
        fx->cap_reqs = cap;
    }
    fx->reqs[fx->n_reqs++] = r;
    pthread_mutex_unlock(&fx->mu);
}

/* The prompt's words and hash; chat: every message's content (text parts of an array too). */
static void read_prompt(const cJSON *req, bool chat, int *words, uint32_t *hash, int *n_user)
{
    uint32_t h = 2166136261u;
    int w = 0, users = 0;
    if (chat) {
        const cJSON *m;
        cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(req, "messages"))
        {
            const char *role = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "role"));
            const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
            if (role && !strcmp(role, "user"))
                users++;
            h = fnv1a(fnv1a(h, role ? role : ""), "\n");
            if (cJSON_IsString(content)) {
                w += count_words(content->valuestring);
                h = fnv1a(h, content->valuestring);
            } else {
                const cJSON *part;
                cJSON_ArrayForEach(part, content)
                {
                    const char *t =
                        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(part, "text"));
                    if (t) {
                        w += count_words(t);
                        h = fnv1a(fnv1a(h, t), " ");
                    }
                }
            }
            h = fnv1a(h, "\n");
        }
    } else {
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(req, "prompt");
        if (cJSON_IsString(p)) {
            w = count_words(p->valuestring);
            h = fnv1a(h, p->valuestring);
        } else {
            const cJSON *s;
            cJSON_ArrayForEach(s, p) if (cJSON_IsString(s))
            {
                w += count_words(s->valuestring);
                h = fnv1a(fnv1a(h, s->valuestring), " ");
            }
        }
    }
    *words  = w;
    *hash   = h;
    *n_user = users;
}

static void usage_json(struct buf *b, int prompt, int completion, int cached)
{
    buf_printf(b,
               "\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d,"
               "\"prompt_tokens_details\":{\"cached_tokens\":%d}}",
               prompt, completion, prompt + completion, cached);
}

/* The head of every chunk of the answer ("{" up to "choices"). */
static void chunk_head(struct buf *b, bool chat)
{
    buf_printf(b, "{\"id\":\"%s\",\"object\":\"%s\",\"created\":0,\"model\":\"%s\",",
               chat ? "chatcmpl-fixture" : "cmpl-fixture",
               chat ? "chat.completion.chunk" : "text_completion", BENCHFIX_MODEL);
}

/*
 * Token i's event, the finish event (word NULL, finish set) or, for chat,
 * the role event (word "" and no finish).
 */
static char *choice_event(bool chat, const char *word, const char *finish, bool role)
{
    struct buf b = {0};
    chunk_head(&b, chat);
    char fin[32];
    if (finish)
        snprintf(fin, sizeof fin, "\"%s\"", finish);
    else
        snprintf(fin, sizeof fin, "null");
    if (!chat)
        buf_printf(&b,
                   "\"choices\":[{\"index\":0,\"text\":\"%s\",\"logprobs\":null,"
                   "\"finish_reason\":%s}]}",
                   word ? word : "", fin);
    else if (role)
        buf_printf(&b,
                   "\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
                   "\"finish_reason\":null}]}");
    else if (word)
        buf_printf(
            &b, "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"%s\"},\"finish_reason\":%s}]}",
            word, fin);
    else
        buf_printf(&b, "\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":%s}]}", fin);
    return b.p;
}

/* What one completion request asked for, and how it is answered. */
struct answer {
    bool chat, stream, include_usage;
    int max_tokens;
    struct benchfix_step step;
    double ttft_ms;
    struct benchfix_req *req;
    char **words; /* req->n_tokens of them */
};

static bool stream_answer(struct conn *c, const struct answer *a, int n_send, bool finish)
{
    static const char head[] = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                               "Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n"
                               "Connection: close\r\n\r\n";
    if (!send_at(c, 0, head, sizeof head - 1))
        return false;
    if (a->chat) {
        char *ev = choice_event(true, "", NULL, true);
        bool ok  = send_event(c, 0, ev, false);
        free(ev);
        if (!ok)
            return false;
    }
    double t = a->ttft_ms / 1e3;
    for (int i = 0; i < n_send; i++) {
        t        = (a->ttft_ms + i * a->step.itl_ms) / 1e3;
        char *ev = choice_event(a->chat, a->words[i], NULL, false);
        bool ok  = send_event(c, t, ev, false);
        free(ev);
        if (!ok)
            return false;
    }
    if (!finish)
        return true;
    int n         = a->req->n_tokens;
    const char *f = a->max_tokens > 0 && n >= a->max_tokens ? "length" : "stop";
    char *ev      = choice_event(a->chat, NULL, f, false);
    bool ok       = send_event(c, t, ev, false);
    free(ev);
    if (!ok)
        return false;
    if (a->include_usage && a->step.fault != BENCHFIX_NO_USAGE) {
        struct buf b = {0};
        chunk_head(&b, a->chat);
        buf_printf(&b, "\"choices\":[],");
        int cached = a->step.cached_tokens < a->req->prompt_words ? a->step.cached_tokens
                                                                  : a->req->prompt_words;
        usage_json(&b, a->req->prompt_words, n, cached);
        buf_add(&b, "}", 1);
        ok = send_event(c, t, b.p, false);
        free(b.p);
        if (!ok)
            return false;
    }
    return send_event(c, t, "[DONE]", true);
}

/* k tokens, then an error object where the next chunk would be, then [DONE]. */
static void error_event_answer(struct conn *c, const struct answer *a, int k)
{
    if (!stream_answer(c, a, k, false))
        return;
    double t = (a->ttft_ms + (k > 0 ? k - 1 : 0) * a->step.itl_ms) / 1e3;
    if (send_event(c, t,
                   "{\"error\":{\"message\":\"fixture: injected failure mid-stream\","
                   "\"type\":\"server_error\",\"param\":null,\"code\":500}}",
                   false))
        send_event(c, t, "[DONE]", true);
}

static void whole_answer(struct conn *c, const struct answer *a)
{
    struct buf b  = {0};
    int n         = a->req->n_tokens;
    const char *f = a->max_tokens > 0 && n >= a->max_tokens ? "length" : "stop";
    buf_printf(&b, "{\"id\":\"%s\",\"object\":\"%s\",\"created\":0,\"model\":\"%s\",",
               a->chat ? "chatcmpl-fixture" : "cmpl-fixture",
               a->chat ? "chat.completion" : "text_completion", BENCHFIX_MODEL);
    if (a->chat)
        buf_printf(
            &b,
            "\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"%s\"},"
            "\"finish_reason\":\"%s\"}],",
            a->req->reply, f);
    else
        buf_printf(&b,
                   "\"choices\":[{\"index\":0,\"text\":\"%s\",\"logprobs\":null,"
                   "\"finish_reason\":\"%s\"}],",
                   a->req->reply, f);
    int cached =
        a->step.cached_tokens < a->req->prompt_words ? a->step.cached_tokens : a->req->prompt_words;
    if (a->step.fault != BENCHFIX_NO_USAGE)
        usage_json(&b, a->req->prompt_words, n, cached);
    else
        b.p[--b.len] = 0; /* the ',' after choices */
    buf_add(&b, "}", 1);
    send_whole(c, 200, "OK", b.p);
    free(b.p);
}

/* Waits, the request held, until a release or the stop; true when released. */
static bool hold(struct conn *c)
{
    struct benchfix *fx = c->fx;
    pthread_mutex_lock(&fx->mu);
    int gen = fx->release_gen;
    fx->n_held++;
    pthread_cond_broadcast(&fx->cv);
    while (!fx->stopping && fx->release_gen == gen)
        pthread_cond_wait(&fx->cv, &fx->mu);
    bool released = !fx->stopping;
    pthread_mutex_unlock(&fx->mu);
    /* realtime: a released request's times count from its release */
    clock_gettime(CLOCK_MONOTONIC, &c->t0);
    return released;
}

static void serve_completion(struct conn *c, bool chat, const char *body, const char *auth)
{
    struct benchfix *fx = c->fx;
    cJSON *req          = cJSON_Parse(body);
    if (!cJSON_IsObject(req)) {
        cJSON_Delete(req);
        send_error(c, 400, "Bad Request", "invalid_request_error", "the body is not a JSON object");
        return;
    }
    struct answer a = {.chat = chat};
    a.stream        = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(req, "stream"));
    a.include_usage = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(req, "stream_options"), "include_usage"));
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(req, "max_tokens");
    if (!cJSON_IsNumber(mt) && chat)
        mt = cJSON_GetObjectItemCaseSensitive(req, "max_completion_tokens");
    a.max_tokens = cJSON_IsNumber(mt) ? mt->valueint : 0;
    int words, n_user;
    uint32_t ph;
    read_prompt(req, chat, &words, &ph, &n_user);
    cJSON_Delete(req);

    struct benchfix_req *r = calloc(1, sizeof *r);
    if (!r)
        abort();
    r->chat          = chat;
    r->stream        = a.stream;
    r->body          = strdup(body);
    r->authorization = auth ? strdup(auth) : NULL;
    r->peer_port     = c->port;
    r->prompt_words  = words;
    r->step          = -1;
    pthread_mutex_lock(&fx->mu);
    a.step = fx->dflt;
    if (a.stream && fx->next_step < fx->n_script) {
        r->step = fx->next_step++;
        a.step  = fx->script[r->step];
    }
    uint32_t seed = fx->seed;
    int n_common  = fx->n_common;
    pthread_mutex_unlock(&fx->mu);
    r->fault = a.step.fault;

    int n = a.step.n_tokens > 0 ? a.step.n_tokens : a.max_tokens > 0 ? a.max_tokens : 16;
    if (a.max_tokens > 0 && n > a.max_tokens)
        n = a.max_tokens;
    if (a.step.fault == BENCHFIX_STOP_EARLY && a.step.k < n)
        n = a.step.k < 0 ? 0 : a.step.k;
    r->n_tokens = n;
    a.ttft_ms =
        chat && n_user == 1 && a.step.ttft_first_ms > 0 ? a.step.ttft_first_ms : a.step.ttft_ms;
    a.words          = calloc((size_t)n + 1, sizeof *a.words);
    struct buf reply = {0};
    buf_add(&reply, "", 0);
    for (int i = 0; i < n; i++) {
        char w[8];
        token_word(ph, i, seed, n_common, w);
        a.words[i] = strdup(w);
        buf_add(&reply, w, strlen(w));
    }
    r->reply = reply.p;
    a.req    = r;
    record(fx, r);

    if (a.step.fault == BENCHFIX_HTTP_500)
        send_error(c, 500, "Internal Server Error", "server_error", "fixture: injected failure");
    else if (a.step.fault == BENCHFIX_DROP && a.stream)
        stream_answer(c, &a, a.step.k < 0 ? 0 : a.step.k < n ? a.step.k : n, false);
    else if (a.step.fault == BENCHFIX_DROP)
        ; /* a whole answer dropped: closed unanswered */
    else if (a.step.fault == BENCHFIX_ERROR_EVENT && a.stream)
        error_event_answer(c, &a, a.step.k < 0 ? 0 : a.step.k < n ? a.step.k : n);
    else if (a.step.fault == BENCHFIX_HOLD && !hold(c))
        ; /* stopped while held: closed unanswered */
    else if (a.stream)
        stream_answer(c, &a, n, true);
    else
        whole_answer(c, &a);
    for (int i = 0; i < n; i++)
        free(a.words[i]);
    free(a.words);
}

static void serve_tokenize(struct conn *c, const char *body)
{
    struct benchfix *fx = c->fx;
    pthread_mutex_lock(&fx->mu);
    fx->n_tokenize++;
    bool off = fx->no_tokenize;
    pthread_mutex_unlock(&fx->mu);
    if (off) {
        send_error(c, 404, "Not Found", "not_found_error", "no such endpoint");
        return;
    }
    cJSON *req          = cJSON_Parse(body);
    const char *content = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(req, "content"));
    if (!content) {
        cJSON_Delete(req);
        send_error(c, 400, "Bad Request", "invalid_request_error", "content must be a string");
        return;
    }
    struct buf b = {0};
    buf_add(&b, "{\"tokens\":[", 11);
    for (int i = 0, n = count_words(content); i < n; i++)
        buf_printf(&b, "%s%d", i ? "," : "", 100 + i);
    buf_add(&b, "]}", 2);
    cJSON_Delete(req);
    send_whole(c, 200, "OK", b.p);
    free(b.p);
}

/* ---------------------------------------------------------- connection --- */

/*
 * Reads one request (head, then a Content-Length body) into b; false when
 * the client went away, the stop came or the request is not one we read.
 */
static bool read_request(struct conn *c, struct buf *b, size_t *body_off, size_t *body_len)
{
    size_t want = 0;
    bool head   = false;
    for (;;) {
        if (head && b->len >= *body_off + want) {
            *body_len = want;
            return true;
        }
        struct pollfd pf[2] = {{c->fd, POLLIN, 0}, {c->fx->wake[0], POLLIN, 0}};
        if (poll(pf, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            return false;
        }
        if (pf[1].revents)
            return false;
        char tmp[16384];
        ssize_t n = recv(c->fd, tmp, sizeof tmp, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        buf_add(b, tmp, (size_t)n);
        if (!head) {
            char *end = strstr(b->p, "\r\n\r\n");
            if (!end) {
                if (b->len > MAX_HEAD)
                    return false;
                continue;
            }
            head      = true;
            *body_off = (size_t)(end - b->p) + 4;
            for (char *l = strstr(b->p, "\r\n"); l && l < end; l = strstr(l + 2, "\r\n"))
                if (!strncasecmp(l + 2, "Content-Length:", 15))
                    want = strtoul(l + 17, NULL, 10);
            if (want > MAX_BODY)
                return false;
        }
    }
}

static void serve(struct conn *c)
{
    struct buf b = {0};
    size_t off = 0, len = 0;
    if (!read_request(c, &b, &off, &len)) {
        free(b.p);
        return;
    }
    clock_gettime(CLOCK_MONOTONIC, &c->t0);
    char method[8] = "", path[256] = "";
    sscanf(b.p, "%7s %255s", method, path);
    char *q = strchr(path, '?');
    if (q)
        *q = 0;
    /* the Authorization header's value, cut out of the head in place */
    char *auth = NULL;
    for (char *l = strstr(b.p, "\r\n"); l && l < b.p + off - 2; l = strstr(l + 2, "\r\n"))
        if (!strncasecmp(l + 2, "Authorization:", 14)) {
            auth = l + 16;
            while (*auth == ' ')
                auth++;
            *strstr(auth, "\r\n") = 0;
            break;
        }
    char *body = b.p + off;
    body[len]  = 0;
    bool post  = !strcmp(method, "POST");
    if (!strcmp(method, "GET") && !strcmp(path, "/v1/models")) {
        pthread_mutex_lock(&c->fx->mu);
        c->fx->n_models++;
        pthread_mutex_unlock(&c->fx->mu);
        send_whole(c, 200, "OK",
                   "{\"object\":\"list\",\"data\":[{\"id\":\"" BENCHFIX_MODEL
                   "\",\"object\":\"model\",\"created\":0,\"owned_by\":\"fixture\"}]}");
    } else if (post && !strcmp(path, "/tokenize")) {
        serve_tokenize(c, body);
    } else if (post && !strcmp(path, "/v1/completions")) {
        serve_completion(c, false, body, auth);
    } else if (post && !strcmp(path, "/v1/chat/completions")) {
        serve_completion(c, true, body, auth);
    } else {
        send_error(c, 404, "Not Found", "not_found_error", "no such endpoint");
    }
    free(b.p);
}

static void *conn_main(void *arg)
{
    struct conn *c      = arg;
    struct benchfix *fx = c->fx;
    serve(c);
    shutdown(c->fd, SHUT_WR);
    close(c->fd);
    pthread_mutex_lock(&fx->mu);
    for (struct conn **p = &fx->conns; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            break;
        }
    fx->n_active--;
    pthread_cond_broadcast(&fx->cv);
    pthread_mutex_unlock(&fx->mu);
    free(c);
    return NULL;
}

/* The log of a new connection from port, replacing an older connection's from the same port. */
static struct conn_log *log_for(struct benchfix *fx, int port)
{
    struct conn_log *log = calloc(1, sizeof *log);
    if (!log)
        abort();
    log->port = port;
    for (struct conn_log **p = &fx->logs; *p; p = &(*p)->next)
        if ((*p)->port == port) {
            struct conn_log *old = *p;
            *p                   = old->next;
            free(old->end);
            free(old->t);
            free(old);
            break;
        }
    log->next = fx->logs;
    fx->logs  = log;
    return log;
}

static void *accept_main(void *arg)
{
    struct benchfix *fx = arg;
    for (;;) {
        struct pollfd pf[2] = {{fx->listen_fd, POLLIN, 0}, {fx->wake[0], POLLIN, 0}};
        if (poll(pf, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            return NULL;
        }
        if (pf[1].revents)
            return NULL;
        struct sockaddr_in peer;
        socklen_t plen = sizeof peer;
        int fd         = accept4(fx->listen_fd, (struct sockaddr *)&peer, &plen, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct conn *c = calloc(1, sizeof *c);
        if (!c)
            abort();
        c->fx   = fx;
        c->fd   = fd;
        c->port = ntohs(peer.sin_port);
        pthread_mutex_lock(&fx->mu);
        c->log    = log_for(fx, c->port);
        c->next   = fx->conns;
        fx->conns = c;
        fx->n_active++;
        pthread_mutex_unlock(&fx->mu);
        pthread_t th;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&th, &attr, conn_main, c) != 0)
            conn_main(c); /* closes it, unserved: the client sees a closed connection */
        pthread_attr_destroy(&attr);
    }
}

/* -------------------------------------------------------------- public --- */

struct benchfix *benchfix_start(void)
{
    struct benchfix *fx = calloc(1, sizeof *fx);
    if (!fx)
        return NULL;
    fx->listen_fd = -1;
    fx->wake[0] = fx->wake[1] = -1;
    pthread_mutex_init(&fx->mu, NULL);
    pthread_cond_init(&fx->cv, NULL);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen       = sizeof a;
    if (pipe2(fx->wake, O_CLOEXEC) != 0 ||
        (fx->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
        bind(fx->listen_fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(fx->listen_fd, 128) != 0 ||
        getsockname(fx->listen_fd, (struct sockaddr *)&a, &alen) != 0) {
        fprintf(stderr, "benchfix: cannot listen on 127.0.0.1: %s\n", strerror(errno));
        goto err;
    }
    fx->port = ntohs(a.sin_port);
    snprintf(fx->url, sizeof fx->url, "http://127.0.0.1:%d", fx->port);
    if (pthread_create(&fx->acceptor, NULL, accept_main, fx) != 0) {
        fprintf(stderr, "benchfix: cannot start a thread\n");
        goto err;
    }
    return fx;
err:
    if (fx->listen_fd >= 0)
        close(fx->listen_fd);
    if (fx->wake[0] >= 0) {
        close(fx->wake[0]);
        close(fx->wake[1]);
    }
    pthread_cond_destroy(&fx->cv);
    pthread_mutex_destroy(&fx->mu);
    free(fx);
    return NULL;
}

void benchfix_stop(struct benchfix *fx)
{
    if (!fx)
        return;
    pthread_mutex_lock(&fx->mu);
    fx->stopping = true;
    pthread_cond_broadcast(&fx->cv);
    /* a thread stuck in send() to a client that stopped reading is woken by the shutdown */
    for (struct conn *c = fx->conns; c; c = c->next)
        shutdown(c->fd, SHUT_RDWR);
    pthread_mutex_unlock(&fx->mu);
    ssize_t w = write(fx->wake[1], "x", 1);
    (void)w;
    pthread_join(fx->acceptor, NULL);
    pthread_mutex_lock(&fx->mu);
    while (fx->n_active > 0)
        pthread_cond_wait(&fx->cv, &fx->mu);
    pthread_mutex_unlock(&fx->mu);
    close(fx->listen_fd);
    close(fx->wake[0]);
    close(fx->wake[1]);
    for (struct conn_log *l = fx->logs, *next; l; l = next) {
        next = l->next;
        free(l->end);
        free(l->t);
        free(l);
    }
    for (int i = 0; i < fx->n_reqs; i++) {
        free(fx->reqs[i]->body);
        free(fx->reqs[i]->authorization);
        free(fx->reqs[i]->reply);
        free(fx->reqs[i]);
    }
    free(fx->reqs);
    free(fx->script);
    pthread_cond_destroy(&fx->cv);
    pthread_mutex_destroy(&fx->mu);
    free(fx);
}

int benchfix_port(const struct benchfix *fx)
{
    return fx->port;
}

const char *benchfix_url(const struct benchfix *fx)
{
    return fx->url;
}

void benchfix_set_default(struct benchfix *fx, const struct benchfix_step *step)
{
    pthread_mutex_lock(&fx->mu);
    fx->dflt = *step;
    pthread_mutex_unlock(&fx->mu);
}

void benchfix_script(struct benchfix *fx, const struct benchfix_step *steps, int n)
{
    pthread_mutex_lock(&fx->mu);
    if (fx->n_script + n > fx->cap_script) {
        int cap = fx->cap_script ? fx->cap_script : 16;
        while (cap < fx->n_script + n)
            cap *= 2;
        struct benchfix_step *s = realloc(fx->script, (size_t)cap * sizeof *s);
        if (!s)
            abort();
        fx->script     = s;
        fx->cap_script = cap;
    }
    memcpy(fx->script + fx->n_script, steps, (size_t)n * sizeof *steps);
    fx->n_script += n;
    pthread_mutex_unlock(&fx->mu);
}

void benchfix_set_text(struct benchfix *fx, uint32_t seed, int n_common)
{
    pthread_mutex_lock(&fx->mu);
    fx->seed     = seed;
    fx->n_common = n_common;
    pthread_mutex_unlock(&fx->mu);
}

void benchfix_set_no_tokenize(struct benchfix *fx, bool on)
{
    pthread_mutex_lock(&fx->mu);
    fx->no_tokenize = on;
    pthread_mutex_unlock(&fx->mu);
}

void benchfix_set_realtime(struct benchfix *fx, bool on)
{
    pthread_mutex_lock(&fx->mu);
    fx->realtime = on;
    pthread_mutex_unlock(&fx->mu);
}

double benchfix_clock_at(void *ctx, int local_port, uint64_t raw)
{
    struct benchfix *fx = ctx;
    double t            = 0;
    if (raw == 0)
        return 0;
    pthread_mutex_lock(&fx->mu);
    for (struct conn_log *l = fx->logs; l; l = l->next) {
        if (l->port != local_port)
            continue;
        size_t lo = 0, hi = l->n; /* the first j with end[j] >= raw */
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (l->end[mid] >= raw)
                hi = mid;
            else
                lo = mid + 1;
        }
        if (lo < l->n)
            t = l->t[lo];
        else if (l->n)
            t = l->t[l->n - 1];
        break;
    }
    pthread_mutex_unlock(&fx->mu);
    return t;
}

bool benchfix_wait_held(struct benchfix *fx, int n, double timeout_s)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    double at  = ts_s(&dl) + timeout_s;
    dl.tv_sec  = (time_t)at;
    dl.tv_nsec = (long)((at - (double)dl.tv_sec) * 1e9);
    if (dl.tv_nsec >= 1000000000L)
        dl.tv_nsec = 999999999L;
    pthread_mutex_lock(&fx->mu);
    int rc = 0;
    while (fx->n_held < n && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&fx->cv, &fx->mu, &dl);
    bool ok = fx->n_held >= n;
    pthread_mutex_unlock(&fx->mu);
    return ok;
}

void benchfix_release(struct benchfix *fx)
{
    pthread_mutex_lock(&fx->mu);
    fx->release_gen++;
    pthread_cond_broadcast(&fx->cv);
    pthread_mutex_unlock(&fx->mu);
}

int benchfix_n_requests(struct benchfix *fx)
{
    pthread_mutex_lock(&fx->mu);
    int n = fx->n_reqs;
    pthread_mutex_unlock(&fx->mu);
    return n;
}

const struct benchfix_req *benchfix_request(struct benchfix *fx, int i)
{
    pthread_mutex_lock(&fx->mu);
    const struct benchfix_req *r = i >= 0 && i < fx->n_reqs ? fx->reqs[i] : NULL;
    pthread_mutex_unlock(&fx->mu);
    return r;
}

int benchfix_n_models(struct benchfix *fx)
{
    pthread_mutex_lock(&fx->mu);
    int n = fx->n_models;
    pthread_mutex_unlock(&fx->mu);
    return n;
}

int benchfix_n_tokenize(struct benchfix *fx)
{
    pthread_mutex_lock(&fx->mu);
    int n = fx->n_tokenize;
    pthread_mutex_unlock(&fx->mu);
    return n;
}
