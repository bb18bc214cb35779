/*
 * metrics.c: Prometheus text rendering of METRICS_LIST (see metrics.h).
 */
#include "serve/metrics.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const double buckets_TTFT[] = METRICS_BUCKETS_TTFT;
static const double buckets_ITL[]  = METRICS_BUCKETS_ITL;
static const double buckets_REQ[]  = METRICS_BUCKETS_REQ;
static const double buckets_NONE[] = METRICS_BUCKETS_NONE;

enum metric_type { MT_counter, MT_gauge, MT_histogram };

static const struct metric_def {
    const char *name;
    enum metric_type type;
    const double *bound; /* histogram bucket bounds */
    int n_bound;
    const char *help;
    /* clang-format off */
} defs[METRIC_COUNT] = {
#define METRICS_X_DEF(id, name, type, buckets, help)                                               \
    [id] = {name, MT_##type, buckets_##buckets,                                                    \
            MT_##type == MT_histogram ? (int)(sizeof buckets_##buckets / sizeof(double)) : 0,      \
            help},
    METRICS_LIST(METRICS_X_DEF)
#undef METRICS_X_DEF
};
/* clang-format on */

/* Every histogram's bucket set fits the fixed array. */
_Static_assert(sizeof buckets_TTFT / sizeof(double) <= METRICS_MAX_BUCKETS, "TTFT buckets");
_Static_assert(sizeof buckets_ITL / sizeof(double) <= METRICS_MAX_BUCKETS, "ITL buckets");
_Static_assert(sizeof buckets_REQ / sizeof(double) <= METRICS_MAX_BUCKETS, "REQ buckets");

/* clang-format off */
static const char *const endpoint_paths[EP_COUNT] = {
#define METRICS_X_PATH(id, path, method, auth, handler) [id] = path,
    SERVE_ROUTE_LIST(METRICS_X_PATH)
#undef METRICS_X_PATH
    [EP_OTHER] = "other",
};
/* clang-format on */

static const char *const type_names[] = {"counter", "gauge", "histogram"};

void metrics_init(struct metrics *m)
{
    memset(m, 0, sizeof *m);
}

const char *metrics_endpoint_path(enum metrics_endpoint ep)
{
    return (unsigned)ep < EP_COUNT ? endpoint_paths[ep] : "other";
}

void metrics_count_request(struct metrics *m, enum metrics_endpoint ep, int status)
{
    if ((unsigned)ep >= EP_COUNT)
        ep = EP_OTHER;
    if (status < 100 || status > 599)
        status = 500;
    m->requests[ep][status]++;
}

void metrics_observe(struct metrics *m, enum metric_id id, double v)
{
    if ((unsigned)id >= METRIC_COUNT || defs[id].type != MT_histogram || !(v >= 0) || isinf(v))
        return;
    struct metrics_histogram *h = &m->hist[id];
    for (int i = 0; i < defs[id].n_bound; i++)
        if (v <= defs[id].bound[i]) {
            h->bucket[i]++;
            break;
        }
    h->count++;
    h->sum += v;
}

/* ------------------------------------------------------------- rendering --- */

struct out {
    char *s;
    size_t len, cap;
    bool oom;
};

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void
put(struct out *o, const char *fmt, ...)
{
    if (o->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(o->s + o->len, o->cap - o->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            o->oom = true;
            return;
        }
        if ((size_t)n < o->cap - o->len) {
            o->len += (size_t)n;
            return;
        }
        size_t cap = o->cap * 2 + (size_t)n;
        char *s    = realloc(o->s, cap);
        if (!s) {
            o->oom = true;
            return;
        }
        o->s   = s;
        o->cap = cap;
    }
}

/* A sample value: integers without a fraction, others with full precision, never NaN. */
static void put_value(struct out *o, double v)
{
    if (!isfinite(v))
        v = 0;
    if (v == floor(v) && fabs(v) < 9e15)
        put(o, "%.0f\n", v);
    else
        put(o, "%.9g\n", v);
}

const char *metrics_api_name(enum metrics_endpoint ep)
{
    return ep == EP_MESSAGES || ep == EP_COUNT_TOKENS ? "anthropic"
           : ep == EP_RESPONSES                       ? "responses"
                                                      : "openai";
}

static int api_index(enum metrics_endpoint ep)
{
    return ep == EP_MESSAGES || ep == EP_COUNT_TOKENS ? 1 : ep == EP_RESPONSES ? 2 : 0;
}

bool metrics_count_ignored(struct metrics *m, enum metrics_endpoint ep, const char *field)
{
    const char *api = metrics_api_name(ep);
    for (int32_t i = 0; i < m->n_ignored; i++)
        if (!strcmp(m->ignored[i].api, api) && !strcmp(m->ignored[i].field, field)) {
            m->ignored[i].n++;
            return false;
        }
    if (m->n_ignored == METRICS_MAX_IGNORED) {
        m->ignored_other[api_index(ep)]++;
        return false;
    }
    struct metrics_ignored *ig = &m->ignored[m->n_ignored++];
    snprintf(ig->api, sizeof ig->api, "%s", api);
    snprintf(ig->field, sizeof ig->field, "%s", field);
    ig->n = 1;
    return true;
}

char *metrics_render(const struct metrics *m, const double values[METRIC_COUNT], size_t *len)
{
    struct out o = {malloc(8192), 0, 8192, false};
    if (!o.s)
        return NULL;
    o.s[0] = 0;
    for (int id = 0; id < METRIC_COUNT; id++) {
        const struct metric_def *d = &defs[id];
        put(&o, "# HELP %s %s\n# TYPE %s %s\n", d->name, d->help, d->name, type_names[d->type]);
        if (id == M_REQUESTS) {
            for (int ep = 0; ep < EP_COUNT; ep++)
                for (int code = 100; code < 600; code++)
                    if (m->requests[ep][code])
                        put(&o, "%s{endpoint=\"%s\",code=\"%d\"} %llu\n", d->name,
                            endpoint_paths[ep], code, (unsigned long long)m->requests[ep][code]);
        } else if (id == M_IGNORED_FIELDS) {
            /* fields are label-safe ([A-Za-z0-9_.:/-?], oai_ignore): no escaping needed */
            for (int32_t i = 0; i < m->n_ignored; i++)
                put(&o, "%s{api=\"%s\",field=\"%s\"} %llu\n", d->name, m->ignored[i].api,
                    m->ignored[i].field, (unsigned long long)m->ignored[i].n);
            static const char *const apis[3] = {"openai", "anthropic", "responses"};
            for (int k = 0; k < 3; k++)
                if (m->ignored_other[k])
                    put(&o, "%s{api=\"%s\",field=\"_other\"} %llu\n", d->name, apis[k],
                        (unsigned long long)m->ignored_other[k]);
        } else if (id == M_STAGE_WEIGHT_BYTES || id == M_STAGE_KV_BYTES) {
            for (int32_t i = 0; i < m->n_stages; i++) {
                const struct hearth_stage_info *st = &m->stages[i];
                char layers[32]                    = "";
                if (st->layer_end > st->layer_first)
                    snprintf(layers, sizeof layers, "%d-%d", st->layer_first, st->layer_end - 1);
                put(&o, "%s{stage=\"%d\",device=\"%s\",layers=\"%s\",output=\"%s\"} %llu\n",
                    d->name, i, st->device, layers, st->output ? "true" : "false",
                    (unsigned long long)(id == M_STAGE_KV_BYTES ? st->kv_bytes : st->weight_bytes));
            }
        } else if (id == M_KV_CONFIG) {
            put(&o, "%s{block_size=\"%d\",num_gpu_blocks=\"%d\"} 1\n", d->name, m->kv_block,
                m->kv_blocks);
        } else if (id == M_SPEC_DRAFTED || id == M_SPEC_ACCEPTED) {
            static const char *const drafters[] = SPEC_DRAFTER_NAMES;
            for (int k = 0; k < SPEC_N_DRAFTERS; k++)
                put(&o, "%s{drafter=\"%s\"} %llu\n", d->name, drafters[k],
                    (unsigned long long)(id == M_SPEC_DRAFTED ? m->spec_drafted[k]
                                                              : m->spec_accepted[k]));
        } else if (d->type == MT_histogram) {
            const struct metrics_histogram *h = &m->hist[id];
            uint64_t cum                      = 0;
            for (int i = 0; i < d->n_bound; i++) {
                cum += h->bucket[i];
                put(&o, "%s_bucket{le=\"%g\"} %llu\n", d->name, d->bound[i],
                    (unsigned long long)cum);
            }
            put(&o, "%s_bucket{le=\"+Inf\"} %llu\n", d->name, (unsigned long long)h->count);
            put(&o, "%s_sum ", d->name);
            put_value(&o, h->sum);
            put(&o, "%s_count %llu\n", d->name, (unsigned long long)h->count);
        } else {
            put(&o, "%s ", d->name);
            put_value(&o, values ? values[id] : 0);
        }
    }
    if (o.oom) {
        free(o.s);
        return NULL;
    }
    if (len)
        *len = o.len;
    return o.s;
}
