/*
 * snapshot.h: a consistent copy of one replicated partition, to rebuild a
 * replica the primary's log no longer reaches (docs/replication.md,
 * "Snapshots and log trimming").
 *
 * The log keeps only its last records (replog.h, store_set_replog_retain),
 * so a replica further behind than that, or one with a wiped data dir, is
 * rebuilt from a snapshot instead: on the primary, snapshot_open takes a
 * RocksDB snapshot and reads the partition's log position in it; then
 * snapshot_next hands out the partition's keys at that moment, family by
 * family in key order (items, expiry index, LSI, outbox, outbox counters
 * and acknowledgements, backfill progress: what replog_reset drops, less
 * the log). On the replica, after replog_reset, snapshot_install writes
 * them and snapshot_finish sets the log position last, so a copy whose
 * rebuild was cut short reads as empty (position 0) and is rebuilt again.
 * The primary then ships its log from the snapshot's position on.
 *
 * Thread-safety: a snapshot is used by one thread; it does not block the
 * partition's writes. Install and finish take the partition's stripe lock.
 */
#ifndef LAPSE_SNAPSHOT_H
#define LAPSE_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

typedef struct snapshot snapshot;

/* One key of the copy: family (the store's family index, as in db_batch_log)
 * and key and value, borrowed. */
typedef struct snapshot_entry {
    uint32_t family;
    const uint8_t *key;
    size_t klen;
    const uint8_t *val;
    size_t vlen;
} snapshot_entry;

/* Opens a view of partition part of table_id as of now; *epoch and *seq
 * get its log position in that view (0 and 0: no record yet). 0,
 * LAPSE_ENOMEM, LAPSE_EIO or LAPSE_ECORRUPT with err. */
int snapshot_open(snapshot **out, store *st, uint32_t table_id, uint32_t part, uint64_t *epoch,
                  uint64_t *seq, char *err, size_t errlen);

/* Opens a view of the items of partition part of table_id as of now, from
 * the first key past after[0..alen) (alen 0: from the first), for
 * snapshot_next to hand out in key order (family items only); *outbox_last
 * gets the partition's last outbox seq in that view (0: none). Rebuilding
 * a GSI copy that lost records reads its source partition's items page
 * after page this way (docs/replication.md, "A copy that lost records").
 * 0, LAPSE_EINVAL (after is no item key of the partition), LAPSE_ENOMEM,
 * LAPSE_EIO or LAPSE_ECORRUPT with err. */
int snapshot_open_items(snapshot **out, store *st, uint32_t table_id, uint32_t part,
                        const uint8_t *after, size_t alen, uint64_t *outbox_last, char *err,
                        size_t errlen);

/* Calls fn for the next entries until their keys and values pass
 * max_bytes (at least one entry per call while any is left); sets *done
 * once every entry was handed out. Entries are valid only during fn. fn
 * returning non-zero stops the call (returned; the entry counts as not
 * handed out). 0, LAPSE_EIO, LAPSE_ENOMEM or fn's value. */
int snapshot_next(snapshot *s, size_t max_bytes, int (*fn)(void *arg, const snapshot_entry *e),
                  void *arg, int *done, char *err, size_t errlen);

/* Entries and bytes handed out so far. */
void snapshot_counts(const snapshot *s, uint64_t *entries, uint64_t *bytes);

void snapshot_close(snapshot *s); /* accepts NULL */

/* On the replica: writes e[0..n) into partition part of table_id, in
 * writes of at most SNAPSHOT_WRITE_BYTES each (one entry at least): a
 * call's 4 MB in one RocksDB write held the write group, and every
 * client's write on the node queued behind it, for its whole memtable
 * insert. Every entry must be a key of that partition in a family a
 * snapshot holds, else nothing is written: LAPSE_EINVAL with err. A copy
 * with a log position (not reset, or already finished) takes none:
 * LAPSE_ESTATE (checked before each write). Also LAPSE_EIO or
 * LAPSE_ENOMEM. A failure midway leaves the writes before it: the copy
 * has no position until snapshot_finish, so nothing reads or ships it,
 * and its next rebuild begins with a reset. */
#define SNAPSHOT_WRITE_BYTES (256 * 1024)
int snapshot_install(store *st, uint32_t table_id, uint32_t part, const snapshot_entry *e, size_t n,
                     char *err, size_t errlen);

/* Ends an install: sets the partition's log position to (epoch, seq), the
 * snapshot's, in a synced write, after which the primary's records from
 * seq + 1 apply. 0, LAPSE_ESTATE (as for install), LAPSE_EIO or
 * LAPSE_ENOMEM. */
int snapshot_finish(store *st, uint32_t table_id, uint32_t part, uint64_t epoch, uint64_t seq,
                    char *err, size_t errlen);

#endif
