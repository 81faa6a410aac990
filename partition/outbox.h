/*
 * outbox.h: the source side of replication (docs/replication.md). Every
 * change to an item of a table with a GSI or a stream puts one change record
 * (change.h) into the partition's outbox, in the WriteBatch of the change
 * (store_derived.c). The node's shipper reads the outbox in order, sends the
 * records to every destination node, records each destination's ack here,
 * and trims what every destination has acked; a replica of the partition
 * trims its copy as far as its primary did (outbox_trim_copy).
 *
 * Family outbox: (table u32be, part u32be, seq u64be) -> change record.
 * Family repl:   (table, REPL_SOURCE, part) -> next_seq u64be | next_stream_seq u64be
 *                (table, REPL_ACK, part, dest node) -> acked seq u64be
 *
 * Thread-safety: every function may be called from any thread. Acks are
 * read-modify-write under a lock of their own; reads take no lock and see a
 * point-in-time view. outbox_last_seq and outbox_ack read the partition's
 * counters without waiting for its stripe lock (which a write, a TTL sweep
 * of a whole batch included, holds) whenever the cached copy answers.
 *
 * Invariants:
 *  1. The records of a partition are numbered 1, 2, 3, ... with no gap and
 *     in commit order: next_seq is read and advanced under the stripe lock
 *     and persisted in the record's own WriteBatch.
 *  2. Records with stream_seq != 0 are numbered 1, 2, 3, ... per partition
 *     (shard) with no gap, in the same order.
 *  3. A destination's acked seq never decreases and never exceeds the last
 *     seq; outbox_trim deletes only records at or below every listed
 *     destination's acked seq.
 */
#ifndef LAPSE_OUTBOX_H
#define LAPSE_OUTBOX_H

#include <stddef.h>
#include <stdint.h>

#include "../common/change.h"
#include "store.h"

/* Reads the records of (table_id, part) with seq > after_seq, in order, at
 * most max_records (>= 1) and, past the first record, at most max_bytes of
 * record bytes (0: no byte limit), into out (cleared first; entry seq is the
 * outbox seq). Records trimmed already are simply not there: the first seq
 * returned may exceed after_seq + 1 only below a trim. Caller frees with
 * change_list_fini (also after an error: out is then empty). Returns 0,
 * LAPSE_EINVAL, LAPSE_EIO or LAPSE_ENOMEM. */
int outbox_read(store *st, uint32_t table_id, uint32_t part, uint64_t after_seq, size_t max_records,
                size_t max_bytes, change_list *out, char *err, size_t errlen);
/* The seq of the partition's last record (0: none ever), trimmed or not. */
int outbox_last_seq(store *st, uint32_t table_id, uint32_t part, uint64_t *last, char *err,
                    size_t errlen);
/* Records that destination node dest_node_id has applied every record up to
 * seq. A lower ack than the stored one is ignored (acks may arrive out of
 * order). Returns 0, LAPSE_EINVAL (seq beyond the last record), LAPSE_EIO. */
int outbox_ack(store *st, uint32_t table_id, uint32_t part, uint32_t dest_node_id, uint64_t seq,
               char *err, size_t errlen);
/* The acked seq of dest_node_id (0: none yet). */
int outbox_acked(store *st, uint32_t table_id, uint32_t part, uint32_t dest_node_id, uint64_t *seq,
                 char *err, size_t errlen);
/* Deletes the records every destination in dest_ids[0..n) has acked (a
 * destination without an ack has acked 0), one range delete from past
 * `trimmed` (the *trimmed_through of an earlier call; 0: from the first
 * record): records at or below it are taken as deleted already, so the
 * call costs the same however much was trimmed before. *trimmed_through
 * (may be NULL) gets the seq every destination acked. Returns 0,
 * LAPSE_EINVAL (n == 0: no destination to wait for is a caller bug, not a
 * licence to drop everything), LAPSE_EIO. */
int outbox_trim(store *st, uint32_t table_id, uint32_t part, const uint32_t *dest_ids, size_t n,
                uint64_t trimmed, uint64_t *trimmed_through, char *err, size_t errlen);
/* Trims a replica's copy of the outbox to match its primary's: deletes
 * the records past `trimmed` (the *trimmed_through of an earlier call; 0:
 * from the first) up to `through` (what the primary trimmed, so what every
 * destination acked), but none past the copy's own last record, since a
 * copy behind its primary's log gets the rest later. *trimmed_through gets
 * where the copy is trimmed to then. Returns 0 or LAPSE_EIO. */
int outbox_trim_copy(store *st, uint32_t table_id, uint32_t part, uint64_t trimmed,
                     uint64_t through, uint64_t *trimmed_through, char *err, size_t errlen);
/* The seq of the first record the copy holds (0: none). */
int outbox_first_seq(store *st, uint32_t table_id, uint32_t part, uint64_t *first, char *err,
                     size_t errlen);
/* Records not yet acked by dest_node_id: last seq - acked (metrics). */
int outbox_pending(store *st, uint32_t table_id, uint32_t part, uint32_t dest_node_id,
                   uint64_t *pending, char *err, size_t errlen);

#endif
