/*
 * snapshot.h: copies of a recurrent model's per-sequence state taken at KV
 * block boundaries, so that a shared prefix or a shortened sequence resumes
 * from the nearest saved point instead of from token 0.
 *
 * A snapshot at position p is the state after tokens 0..p-1 (p a positive
 * multiple of the KV block size). Each sequence owns at most per_seq of its
 * own snapshots; when it passes that, the one whose loss leaves the smallest
 * gap between its neighbours goes (the newest always stays), so the kept
 * ones spread over the sequence. Once the sequence publishes the block that
 * ends at p, the snapshot is keyed by that block's chain hash and any
 * sequence whose KV prefix match reaches p may load it. A snapshot its owner
 * gives up stays cached while keyed (least recently used evicted first) and
 * is freed otherwise.
 *
 * With the prefix cache's byte cap (hearth_context_params.cache_bytes), the
 * store has n_cached entries on top of the sequences' own and caches at
 * most that many (the least recently used goes when one more is given up),
 * and a snapshot goes with the block it is keyed by when the KV cache
 * evicts that block (snap_forget): the cache keeps a conversation's blocks
 * and the states to resume it together.
 *
 * Memory: n_seq * per_seq (+ n_cached) entries of state_len floats, one
 * anonymous mapping, so entries never written cost no resident memory.
 * Internal to src/model; not thread-safe (the engine's thread owns it).
 */
#ifndef HEARTH_SNAPSHOT_H
#define HEARTH_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "hearth.h"

struct mem_acct;

struct kv_cache;
struct snap_store;

/* Bytes of state a store of n_seq x per_seq (+ n_cached) snapshots of state_len floats maps. */
size_t snap_bytes(int32_t n_seq, int32_t per_seq, int32_t n_cached, size_t state_len);

/* Bytes of a store's tables (entries, owners), beside its snapshots. */
size_t snap_table_bytes(int32_t n_seq, int32_t per_seq, int32_t n_cached);

/* What the store allocated, by kind (util/memacct.h). */
const struct mem_acct *snap_acct(const struct snap_store *s);

/*
 * A store for n_seq sequences, per_seq >= 1 snapshots each; n_cached >= 0:
 * that many more entries and the cap on cached ones, -1: no cap (the
 * sequences' entries cache what they do not use). NULL when out of memory.
 */
struct snap_store *snap_new(int32_t n_seq, int32_t per_seq, int32_t n_cached, size_t state_len);

/* Drops the cached snapshot keyed hash (its block is gone); one still owned just loses its key. */
void snap_forget(struct snap_store *s, uint64_t hash);
void snap_free(struct snap_store *s);

/*
 * Decides which block boundaries the batch b (already checked: positions
 * continue each sequence) crosses get a snapshot, making room among each
 * sequence's own, and sets dst[t] to where the state after row t is to be
 * written (NULL for rows that end no kept boundary). Boundaries that the
 * same batch would push out again are not taken.
 */
void snap_plan(struct snap_store *s, const struct hearth_batch *b, int32_t block_tokens,
               float **dst);

/* Keys seq's snapshots whose ending block kv has published since. */
void snap_bind(struct snap_store *s, const struct kv_cache *kv, int32_t seq);

/*
 * The snapshot to resume sequence seq at or below position p0 (and at or
 * below its KV length): one of its own, or one keyed by the chain hash of a
 * block seq holds published. Returns its state and sets *pos, or NULL with
 * *pos = 0 when there is none.
 */
const float *snap_find(struct snap_store *s, const struct kv_cache *kv, int32_t seq, int32_t p0,
                       int32_t *pos);

/* seq gives up its snapshots above position p0 (p0 = 0: all of them). */
void snap_disown(struct snap_store *s, int32_t seq, int32_t p0);

/* Snapshots held: owned by sequences, and cached only (keyed, evictable). */
void snap_stats(const struct snap_store *s, int32_t *owned, int32_t *cached);

#endif
