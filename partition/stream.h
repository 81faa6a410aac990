/*
 * stream.h: the stream shards a node hosts (docs/replication.md). A table's
 * stream has one shard per base partition, hosted on a node chosen by the
 * coordinator; apply_batch (apply.h) stores the shard's records as they
 * arrive from the partition's outbox, keyed by stream seq:
 *
 *   stream: (table u32be, shard u32be, stream seq u64be) -> change record
 *
 * Thread-safety: any thread; no locks (reads see a point-in-time view, and
 * trimming deletes only records it has seen, so a record applied meanwhile
 * is never lost).
 *
 * Invariants:
 *  1. The records of a shard are numbered by stream seq, gapless from the
 *     first record not yet trimmed to stream_last_seq (the source numbers
 *     them so, and apply_batch applies every record once, in order).
 *  2. Trimming removes a prefix of a shard: records are in seq order and
 *     their commit times nearly so (one lock per source partition hands out
 *     both); a record older than the cutoff behind a younger one stays until
 *     the younger one is trimmed too.
 */
#ifndef LAPSE_STREAM_H
#define LAPSE_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "../common/clock.h"
#include "../common/change.h"
#include "store.h"

/* Reads the records of shard (table_id, shard) with stream seq > after,
 * in order, at most max_records (>= 1) and, past the first, at most
 * max_bytes bytes (0: no byte limit), into out (cleared first; entry seq is
 * the stream seq). Caller frees with change_list_fini (out is empty after
 * an error). Returns 0, LAPSE_EINVAL, LAPSE_EIO or LAPSE_ENOMEM. */
int stream_read(store *st, uint32_t table_id, uint32_t shard, uint64_t after, size_t max_records,
                size_t max_bytes, change_list *out, char *err, size_t errlen);
/* The stream seq of the last record stored for the shard (0: none), also
 * once it is trimmed. */
int stream_last_seq(store *st, uint32_t table_id, uint32_t shard, uint64_t *last, char *err,
                    size_t errlen);
/* One bounded step of trimming table_id's shards on this node: deletes,
 * per shard, the prefix of records committed before now - retention_ms
 * (a record that does not decode counts as old). Looks at most max_records
 * records; *trimmed gets the records deleted, *more whether the budget ran
 * out before every shard was done (call again). Returns 0, LAPSE_EINVAL,
 * LAPSE_EIO or LAPSE_ENOMEM; on error nothing is deleted. */
int stream_trim(store *st, uint32_t table_id, clock_wall now, int64_t retention_ms,
                size_t max_records, size_t *trimmed, int *more, char *err, size_t errlen);

/* Deletes every stream record of table_id on this node (its stream was
 * turned off: nothing reads them again, a later stream of the table reads
 * only its own generation), keeping the shards' last stream seqs and the
 * copies' marks. One range delete, then a compaction of the range.
 * Returns 0, LAPSE_EIO or LAPSE_ENOMEM; on error nothing is deleted. */
int stream_drop(store *st, uint32_t table_id, char *err, size_t errlen);

#endif
