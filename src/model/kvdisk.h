/*
 * kvdisk.h: the prefix cache's disk tier. Blocks the RAM tier evicts are
 * written to a directory, one file a block, and read back when a prompt's
 * prefix runs past what RAM holds; on a clean shutdown the RAM tier's
 * cached blocks are written too, and at start the directory is the index,
 * so the first turn after a restart is warm.
 *
 * A block's file is named by its chain hash (the hash of every token up to
 * its end, as the RAM index keys it: 16 hex digits, ".kvb") and is a K/V
 * file (kvfile.h) of its block_tokens tokens: the model's fingerprint, the
 * cache's shape, the tokens, the rows, a checksum. A read checks all of it
 * and that the tokens are the block's, as the RAM index does. At start
 * only the header and the size are read (a large cache starts fast): a
 * file of another model or shape, or of the wrong size (cut short), is
 * skipped with a warning on stderr and left alone; one whose checksum
 * fails when read is dropped with a warning, and the block is computed.
 * Only regular files are opened (kvfile_open_regular): a link, FIFO,
 * device, socket or directory under a block's name is skipped as refused,
 * never followed or waited on. A write that fails (a full disk, a file size
 * limit) is counted, logged once, and the tier writes nothing for a while
 * before it tries again (KVDISK_RETRY_S in kvdisk.c).
 * Writes go to a temporary name and are renamed, so a crash leaves no half
 * file under a block's name (no fsync: the checksum catches what a power
 * cut leaves). The tier holds at most cap_bytes of files, least recently
 * used dropped first (deleted).
 *
 * Only for caches kvfile_shape_of accepts (one pool, K/V on the host, no
 * recurrent state). Owned by the engine thread, as the cache is.
 */
#ifndef HEARTH_KVDISK_H
#define HEARTH_KVDISK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hearth.h"
#include "model/kvfile.h"

struct kv_cache;
struct kv_disk;

struct kv_disk_stats {
    uint64_t bytes, cap_bytes; /* files held, and the cap (whole files) */
    uint64_t reads, writes;    /* blocks read back (each a hit of block_tokens tokens), written */
    uint64_t evicted;          /* files dropped for the cap */
    uint64_t skipped;          /* files refused: at start, or found damaged when read */
    uint64_t write_errors;     /* block writes that failed (each try: one every retry interval
                                  while they fail) */
};

/*
 * Opens (creating it when missing) the tier in dir for a cache of shape s,
 * and indexes the block files there. HEARTH_EIO when dir cannot be made or
 * read.
 */
enum hearth_status kvdisk_open(const char *dir, uint64_t cap_bytes, const struct kvfile_shape *s,
                               struct kv_disk **out, char *err, size_t err_len);
void kvdisk_close(struct kv_disk *d);

/* kv_cache's hooks (kv.h), arg the kv_disk: an evicted block is written, unless held. */
void kvdisk_evicted(void *arg, const struct kv_cache *kv, int32_t block, uint64_t hash,
                    const int32_t *tokens);
/* Fills block with the K/V of the block keyed hash holding tokens; false when not held. */
bool kvdisk_fetch(void *arg, struct kv_cache *kv, int32_t block, uint64_t hash,
                  const int32_t *tokens);

/*
 * Writes the cached blocks of kv's pool that the tier lacks, the most
 * recently used kept and written first; stops after about seconds (a block
 * write started is finished), so a shutdown is not held by a large memory
 * tier or a slow disk.
 */
void kvdisk_flush(struct kv_disk *d, const struct kv_cache *kv, double seconds);

void kvdisk_stats(const struct kv_disk *d, struct kv_disk_stats *out);

#endif
