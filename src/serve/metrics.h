/*
 * metrics.h: the server's Prometheus metrics, from one list.
 *
 * METRICS_LIST names every metric once (name, type, bucket set, help): the
 * enum, the HELP/TYPE lines and the render order all come from it, so a
 * name cannot drift between the code that counts and the page that shows.
 * Names follow Prometheus conventions: hearth_ prefix, counters end in
 * _total, durations are _seconds histograms.
 *
 * Counters by endpoint and histograms live in struct metrics, owned by the
 * HTTP event loop (one thread: no locks). Values the scheduler owns (tokens,
 * slots, KV blocks) are passed in at render time from sched_snapshot.
 * Size: ~36 KiB (the request counters are kept per endpoint and status code).
 */
#ifndef HEARTH_METRICS_H
#define HEARTH_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hearth.h"       /* struct hearth_stage_info */
#include "serve/routes.h" /* enum metrics_endpoint */
#include "spec/spec.h"    /* SPEC_N_DRAFTERS */

/* Bucket upper bounds (seconds) of each histogram kind; +Inf is implied. */
#define METRICS_BUCKETS_TTFT                                                                       \
    {                                                                                              \
        0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60                            \
    }
#define METRICS_BUCKETS_ITL                                                                        \
    {                                                                                              \
        0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5                            \
    }
#define METRICS_BUCKETS_REQ                                                                        \
    {                                                                                              \
        0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600                           \
    }
#define METRICS_BUCKETS_NONE                                                                       \
    {                                                                                              \
        0                                                                                          \
    }
#define METRICS_MAX_BUCKETS 16
#define METRICS_MAX_STAGES  16

/* X(id, name, type, buckets, help). type: counter, gauge, histogram. */
/* clang-format off */
#define METRICS_LIST(X)                                                                        \
    X(M_REQUESTS, "hearth_requests_total", counter, NONE,                                      \
      "HTTP requests answered, by endpoint and status code.")                                  \
    X(M_IGNORED_FIELDS, "hearth_ignored_request_fields_total", counter, NONE,                 \
      "Request fields accepted and ignored, by API and field (unknown ones and hints without " \
      "effect here); past 64 distinct names the rest count as field=\"_other\".")             \
    X(M_PROMPT_TOKENS, "hearth_prompt_tokens_total", counter, NONE,                            \
      "Prompt tokens of the requests scheduled (prefix-cache hits included).")                 \
    X(M_GENERATED_TOKENS, "hearth_generated_tokens_total", counter, NONE,                      \
      "Tokens generated.")                                                                     \
    X(M_PREFIX_HIT_TOKENS, "hearth_prefix_cache_hit_tokens_total", counter, NONE,              \
      "Prompt tokens reused from the prefix cache instead of computed.")                       \
    X(M_PREFIX_MISS_TOKENS, "hearth_prefix_cache_miss_tokens_total", counter, NONE,            \
      "Prompt tokens the prefix cache did not hold, so computed.")                             \
    X(M_PREFILL_SECONDS, "hearth_prefill_seconds_total", counter, NONE,                        \
      "Engine time spent computing prompts.")                                                  \
    X(M_DECODE_SECONDS, "hearth_decode_seconds_total", counter, NONE,                          \
      "Engine time spent generating tokens.")                                                  \
    X(M_PREFILL_TPS, "hearth_prefill_tokens_per_second", gauge, NONE,                          \
      "Prompt tokens computed per second of prefill time, since start.")                       \
    X(M_DECODE_TPS, "hearth_decode_tokens_per_second", gauge, NONE,                            \
      "Tokens generated per second of decode time, since start.")                              \
    X(M_SPEC_DRAFTED, "hearth_spec_drafted_tokens_total", counter, NONE,                       \
      "Tokens proposed by the speculative drafters (--spec) and verified, by drafter.")        \
    X(M_SPEC_ACCEPTED, "hearth_spec_accepted_tokens_total", counter, NONE,                     \
      "Of the drafted tokens, those the model reproduced and kept, by drafter.")               \
    X(M_DECODE_FORWARDS, "hearth_decode_forwards_total", counter, NONE,                        \
      "Forward passes a generating slot took part in, counted per slot; without "             \
      "speculation one per generated token (less the first of each request).")                 \
    X(M_TTFT, "hearth_time_to_first_token_seconds", histogram, TTFT,                           \
      "Time from a request's arrival to its first generated token.")                           \
    X(M_ITL, "hearth_inter_token_latency_seconds", histogram, ITL,                             \
      "Time between consecutive tokens of one stream.")                                        \
    X(M_REQUEST_DURATION, "hearth_request_duration_seconds", histogram, REQ,                   \
      "Time from a generation request's arrival to its last byte.")                            \
    X(M_SLOTS_BUSY, "hearth_slots_busy", gauge, NONE, "Slots generating or reading a prompt.") \
    X(M_SLOTS, "hearth_slots", gauge, NONE, "Slots (--parallel).")                             \
    X(M_QUEUE_DEPTH, "hearth_queue_depth", gauge, NONE, "Jobs waiting for a slot.")            \
    X(M_KV_BLOCKS_USED, "hearth_kv_blocks_used", gauge, NONE,                                  \
      "KV cache blocks held by sequences.")                                                    \
    X(M_KV_BLOCKS_CACHED, "hearth_kv_blocks_cached", gauge, NONE,                              \
      "KV cache blocks kept only for prefix reuse (evictable).")                               \
    X(M_KV_BLOCKS_CAPACITY, "hearth_kv_blocks_capacity", gauge, NONE,                          \
      "KV cache blocks in the pool.")                                                          \
    X(M_KV_USAGE, "hearth_kv_cache_usage_ratio", gauge, NONE,                                  \
      "Share of the KV cache's blocks held by sequences, 0 to 1 (a router's KV utilisation).") \
    X(M_KV_CONFIG, "hearth_kv_cache_config_info", gauge, NONE,                                 \
      "Always 1; its labels: block_size (tokens a KV block) and num_gpu_blocks (blocks in "    \
      "the pool, on whatever device), the names routers read.")                                \
    X(M_CACHE_RAM_BYTES, "hearth_cache_ram_bytes", gauge, NONE,                                \
      "K/V bytes the prefix cache keeps in memory for no running request.")                   \
    X(M_CACHE_RAM_CAP_BYTES, "hearth_cache_ram_cap_bytes", gauge, NONE,                        \
      "The cap on hearth_cache_ram_bytes (--cache-ram in whole blocks); -1: none, the "        \
      "cache keeps what the idle slots' blocks hold.")                                         \
    X(M_CACHE_RAM_EVICTED, "hearth_cache_ram_evicted_blocks_total", counter, NONE,             \
      "KV blocks the prefix cache dropped, to make room or to stay within its cap.")          \
    X(M_CACHE_DISK_BYTES, "hearth_cache_disk_bytes", gauge, NONE,                              \
      "Bytes of the block files the prefix cache's disk tier holds (--cache-dir).")           \
    X(M_CACHE_DISK_CAP_BYTES, "hearth_cache_disk_cap_bytes", gauge, NONE,                      \
      "The cap on hearth_cache_disk_bytes (--cache-disk in whole files); 0: no disk tier.")   \
    X(M_CACHE_DISK_HIT_TOKENS, "hearth_prefix_cache_disk_hit_tokens_total", counter, NONE,     \
      "Prompt tokens reused from blocks read back from disk (part of the hit tokens).")       \
    X(M_CACHE_DISK_READS, "hearth_cache_disk_read_blocks_total", counter, NONE,                \
      "KV blocks read back from the disk tier.")                                              \
    X(M_CACHE_DISK_WRITES, "hearth_cache_disk_written_blocks_total", counter, NONE,            \
      "KV blocks written to the disk tier (evicted from memory, or at shutdown).")            \
    X(M_CACHE_DISK_EVICTED, "hearth_cache_disk_evicted_blocks_total", counter, NONE,           \
      "Block files the disk tier deleted to stay within its cap.")                            \
    X(M_CACHE_DISK_SKIPPED, "hearth_cache_disk_skipped_files_total", counter, NONE,            \
      "Files in --cache-dir refused: another model's, cut short, damaged, or not a regular "  \
      "file.")                                                                                \
    X(M_CACHE_DISK_WRITE_ERRORS, "hearth_cache_disk_write_errors_total", counter, NONE,        \
      "Block writes to --cache-dir that failed (a full disk, a file size limit); after one, " \
      "the tier writes nothing for 30 s, then tries again.")                                  \
    X(M_REPLY_SPLICED_PROMPTS, "hearth_reply_tokens_spliced_prompts_total", counter, NONE,     \
      "Prompts resending replies as text, given the replies' own tokens.")                     \
    X(M_REPLY_SPLICED_TOKENS, "hearth_reply_tokens_spliced_tokens_total", counter, NONE,       \
      "Tokens of finished requests those prompts were given (--reply-tokens).")                \
    X(M_PREP_CANCELLED, "hearth_prep_cancelled_total", counter, NONE,                          \
      "Request preparations skipped or stopped between stages because their client hung up "  \
      "(or the server was stopping).")                                                        \
    X(M_PREP_TASKS, "hearth_prep_tasks", gauge, NONE,                                          \
      "Request preparations queued or running (templates, tokenizing, grammar compiles).")    \
    X(M_READY, "hearth_ready", gauge, NONE,                                                    \
      "1 once the model is loaded and requests are served, 0 while loading.")                  \
    X(M_STAGE_WEIGHT_BYTES, "hearth_stage_weight_bytes", gauge, NONE,                          \
      "Bytes of weights each stage holds, by device and layer range.")                         \
    X(M_STAGE_KV_BYTES, "hearth_stage_kv_bytes", gauge, NONE,                                  \
      "Bytes of K/V memory each stage holds for its layers, by device and layer range.")
/* clang-format on */

enum metric_id {
#define METRICS_X_ENUM(id, name, type, buckets, help) id,
    METRICS_LIST(METRICS_X_ENUM)
#undef METRICS_X_ENUM
        METRIC_COUNT
};

struct metrics_histogram {
    uint64_t bucket[METRICS_MAX_BUCKETS]; /* observations <= bound[i] (not cumulative) */
    uint64_t count;                       /* all observations (the +Inf bucket) */
    double sum;                           /* seconds */
};

#define METRICS_MAX_IGNORED 64 /* distinct (api, field) pairs counted by name */

struct metrics_ignored {
    char api[16];   /* "openai", "anthropic", "responses" */
    char field[64]; /* the field's path (oai_ignore made it label-safe) */
    uint64_t n;
};

struct metrics {
    uint64_t requests[EP_COUNT][600];                    /* [endpoint][HTTP status 100..599] */
    struct metrics_ignored ignored[METRICS_MAX_IGNORED]; /* in order of first sight */
    int32_t n_ignored;
    uint64_t ignored_other[3];                   /* beyond those, by API as in metrics_api_name */
    struct metrics_histogram hist[METRIC_COUNT]; /* used for histogram ids only */
    struct hearth_stage_info stages[METRICS_MAX_STAGES]; /* where the layers run: the
                                                            M_STAGE_* samples, one per stage */
    int32_t n_stages;                                    /* 0 until the model is loaded */
    uint64_t spec_drafted[SPEC_N_DRAFTERS]; /* set by the caller before metrics_render */
    uint64_t spec_accepted[SPEC_N_DRAFTERS];
    int32_t kv_block;  /* tokens per KV block, for M_KV_CONFIG */
    int32_t kv_blocks; /* blocks in the pool, for M_KV_CONFIG */
};

/* Zeroes everything. */
void metrics_init(struct metrics *m);

/* Counts one answered request; statuses outside 100..599 count as 500. */
void metrics_count_request(struct metrics *m, enum metrics_endpoint ep, int status);

/* The API an endpoint speaks, as the ignored-fields counter labels it: "openai" (chat,
 * completions and the rest), "anthropic" or "responses". */
const char *metrics_api_name(enum metrics_endpoint ep);

/* Counts one ignored field of a request to ep; true the first time this (api, field) pair is
 * seen (the caller logs it then), false after, and for names past METRICS_MAX_IGNORED. */
bool metrics_count_ignored(struct metrics *m, enum metrics_endpoint ep, const char *field);

/* Adds one observation (seconds) to histogram id; ignored for other ids or v < 0. */
void metrics_observe(struct metrics *m, enum metric_id id, double v);

/* Path of an endpoint ("/v1/models"). */
const char *metrics_endpoint_path(enum metrics_endpoint ep);

/*
 * The text exposition page (format 0.0.4): HELP and TYPE for every metric in
 * list order, then its samples. values[id] gives each counter and gauge but
 * M_REQUESTS, the M_STAGE_* gauges and M_KV_CONFIG (taken from m).
 * Returns a malloc'd NUL-terminated string and its length in *len, or NULL
 * when out of memory.
 */
char *metrics_render(const struct metrics *m, const double values[METRIC_COUNT], size_t *len);

#endif
