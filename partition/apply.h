/*
 * apply.h: the destination side of replication (docs/replication.md). A
 * node that owns partitions of a table's GSIs, or hosts the stream shard of
 * a base partition, receives that partition's outbox records in batches
 * from the source's shipper and applies each batch here, exactly once.
 *
 * Family gsi:    (table u32be, index id u32be, gsi part u32be, enc(gsi pk)
 *                 [, enc(gsi sk)], enc(pk) [, enc(sk)]) -> projected item
 * Family stream: (table u32be, shard u32be, stream seq u64be) -> change record
 * Family repl:   (table, REPL_APPLIED, source part) -> applied seq u64be
 *                (table, REPL_MISSING, source part) -> last seq never to be had
 *                (table, REPL_STREAM_LAST, shard) -> last stream seq stored
 *                (table, REPL_STREAM_FILLED, shard) -> the REPL_MISSING its
 *                stream copy was filled for from another copy
 *                (table, REPL_GSI_FILLED, source part) -> the REPL_MISSING
 *                its GSI copies were filled for from the source's items
 *
 * Thread-safety: any thread. Batches of one (table, source partition) are
 * serialized by a per-(table, source partition) apply lock (striped);
 * batches of different source partitions run in parallel. Reads take no
 * lock.
 *
 * Invariants:
 *  1. applied[(table, source part)] is the highest seq of that source
 *     partition's outbox whose effect is in this store; it is written in
 *     the WriteBatch that applies the records, so a record is applied once
 *     whatever batches arrive: repeated, overlapping or reordered.
 *  2. After records 1..applied of every source partition are applied, the
 *     gsi family holds, for each GSI partition this node owns (per the
 *     filter of each batch), exactly the projection of every base item whose
 *     index keys map to it: the deltas are derived from each record's old
 *     and new images (delete the old image's entry, put the new image's).
 *  3. Stream records are stored under their stream seq, and only those with
 *     stream_seq != 0 (TTL deletes of a table whose stream leaves them out
 *     have 0 and never reach a shard).
 */
#ifndef LAPSE_APPLY_H
#define LAPSE_APPLY_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

/* What of a source partition's records this node keeps. */
typedef struct apply_filter {
    /* Returns 1 when this node owns partition gsi_part of GSI t->gsi[gsi]
     * (gsi is the position in the table's GSI array). NULL: owns none. */
    int (*owns_gsi)(void *arg, uint32_t gsi, uint32_t gsi_part);
    void *arg;
    int host_stream; /* this node hosts the stream shard of the source partition */
} apply_filter;

/*
 * Applies the batch of records recs[0..n) (lens[i] bytes each, change
 * records of partition src_part of table t, in seq order, each within
 * [from_seq, to_seq]) in one WriteBatch under the apply lock: records at or
 * below applied are skipped, the GSI entries of the owned GSI partitions and
 * the stream records (when hosting the shard) of the rest are written, and
 * applied becomes to_seq. The sender may leave out records that carry
 * nothing for this node: the batch still covers [from_seq, to_seq].
 *
 * A batch with to_seq <= applied is a no-op (returns 0). A batch with
 * from_seq > applied + 1 would leave a gap: refused with LAPSE_ESTATE, and
 * the sender resends from *applied_out + 1. *applied_out (may be NULL) gets
 * applied after the call in every case where it could be read.
 * Returns 0, LAPSE_ESTATE, LAPSE_EINVAL (bad arguments, a record out of
 * range or order, of another table or partition, an image without the
 * table's keys), LAPSE_ECORRUPT (a record does not decode), LAPSE_EIO or
 * LAPSE_ENOMEM, with err; on error nothing is written.
 */
int apply_batch(store *st, const table_schema *t, uint32_t src_part, uint64_t from_seq,
                uint64_t to_seq, const void *const *recs, const size_t *lens, size_t n,
                const apply_filter *f, uint64_t *applied_out, char *err, size_t errlen);

/* Whether the change record data[0..len) of table t carries anything for a
 * destination with filter f: a GSI entry to delete or put in a GSI partition
 * f owns, or a stream record when f hosts the shard. For the shipper, which
 * may leave the others out of that destination's batches. *wanted is set on
 * success. Returns 0, LAPSE_ECORRUPT (the record does not decode),
 * LAPSE_EINVAL (another table's record, an image without the table's keys)
 * or LAPSE_ENOMEM. */
int apply_record_wanted(const table_schema *t, const void *data, size_t len, const apply_filter *f,
                        int *wanted);

/* applied[(table_id, src_part)] (0: nothing applied yet). */
int apply_applied_seq(store *st, uint32_t table_id, uint32_t src_part, uint64_t *applied, char *err,
                      size_t errlen);

/* Records that this copy will never have the records of source partition
 * src_part before first_kept that it has not applied: the source trimmed
 * them before this copy's destination acked them (its data was lost, or it
 * came later). Persistent (repl kind REPL_MISSING). *noted is set when that
 * was news (first_kept > applied + 1, past what was noted already).
 * Returns 0 or LAPSE_EIO. */
int apply_note_missing(store *st, uint32_t table_id, uint32_t src_part, uint64_t first_kept,
                       int *noted, char *err, size_t errlen);
/* A copy new on this node (a move added it: placement/derived.h) misses
 * every record of source partition src_part this node applied before it
 * held that copy: through the applied seq A. Notes REPL_MISSING M, the
 * greater of A and the mark there was, with the new kinds of copy filled
 * through nothing (gsi_new: GSI copies; stream_new: the shard copy), and
 * the kinds that are not new filled through M at once unless they had a
 * gap of their own (they hold every record through A). So the refill
 * thread fills only the new kinds. *mark gets M (0: nothing applied here,
 * so nothing missed). REQUIRES: no record of src_part is applied
 * without the new copy from now on. Returns 0 or LAPSE_EIO. */
int apply_note_new_copy(store *st, uint32_t table_id, uint32_t src_part, int gsi_new,
                        int stream_new, uint64_t *mark, char *err, size_t errlen);
/* Deletes this node's copy of stream shard part of table table_id
 * (index_id 0), or of partition part of its GSI index_id: every entry or
 * record, in one batch of range deletes. The caller makes sure no batch
 * feeds that copy meanwhile (a copy that left its list: copydrop.h) or
 * that what does is filled again (a copy new here: newcopy.h). Returns 0,
 * LAPSE_EIO or LAPSE_ENOMEM. */
int apply_drop_copy(store *st, uint32_t table_id, uint32_t index_id, uint32_t part, char *err,
                    size_t errlen);
/* Whether this node holds anything of that copy (an entry or a record):
 * *held 1 or 0. Returns 0, LAPSE_EIO or LAPSE_ENOMEM. */
int apply_copy_held(store *st, uint32_t table_id, uint32_t index_id, uint32_t part, int *held,
                    char *err, size_t errlen);

/* Whether this node's GSI copies of the table miss records of source
 * partition src_part (src_part -1: of any of them): its REPL_MISSING mark
 * lies past what they were filled for (apply_gsi_filled). Returns 0,
 * LAPSE_EIO or LAPSE_ECORRUPT. (apply_fill.c, as the rest below.) */
int apply_missing(store *st, uint32_t table_id, int64_t src_part, int *missing, char *err,
                  size_t errlen);

/* Whether any copy here of the table's GSI partitions or stream shards
 * ever missed records (a REPL_MISSING mark, filled or not): the cheap
 * first look of a pass that fills them. Returns 0 or LAPSE_EIO. */
int apply_missing_any(store *st, uint32_t table_id, int *any, char *err, size_t errlen);

/* The gap of this node's GSI copies in the records of source partition
 * src_part: *mark gets its REPL_MISSING mark when it lies past what they
 * were filled for, else 0. Returns 0 or LAPSE_EIO. */
int apply_gsi_gap(store *st, uint32_t table_id, uint32_t src_part, uint64_t *mark, char *err,
                  size_t errlen);

/* Puts into the GSI partitions f owns the entries of items[0..n) (lens[i]
 * bytes each, item_encode()d items of source partition src_part of t, as
 * its primary holds them at outbox seq P or later): each item's entry in
 * each GSI it belongs to, projected, in one WriteBatch under the apply
 * lock. Filling the copies that lost records: every entry they hold is
 * right as of their applied seq A (a record's delta only puts its new
 * image's entry and deletes its old image's), and what they lack is the
 * entries of items no record since the gap touched. With P >= A and no
 * record of the source applied until the fill ends, the records after A
 * then delete, by their old images, every entry the fill put that a later
 * change replaced, and the copies converge on the index. Returns 0,
 * LAPSE_EINVAL (an item without the table's keys, bad arguments),
 * LAPSE_ECORRUPT, LAPSE_EIO or LAPSE_ENOMEM; on error nothing is written. */
int apply_gsi_fill(store *st, const table_schema *t, uint32_t src_part, const apply_filter *f,
                   const void *const *items, const size_t *lens, size_t n, char *err,
                   size_t errlen);

/* Records that this node's GSI copies were filled through mark from the
 * items of source partition src_part (apply_gsi_fill, every page): they
 * answer again, unless the REPL_MISSING mark moved past mark meanwhile (a
 * new loss: then nothing is written). Returns 0 or LAPSE_EIO. */
int apply_gsi_filled(store *st, uint32_t table_id, uint32_t src_part, uint64_t mark, char *err,
                     size_t errlen);

/* Whether this copy of stream shard (= source partition) shard misses
 * records: *mark gets the shard's REPL_MISSING mark when it is past what
 * the copy was filled for (apply_stream_filled), else 0 (whole). The GSI
 * entries of the same source partition stay missing either way
 * (apply_missing). Returns 0 or LAPSE_EIO. */
int apply_stream_gap(store *st, uint32_t table_id, uint32_t shard, uint64_t *mark, char *err,
                     size_t errlen);

/* The source position another copy of stream shard shard must have
 * applied for its records to fill this copy's gap of mark (apply_stream_gap):
 * *need gets the mark, or one less when the mark lies one past the last
 * record applied here. A new copy's mark lies so when that record was the
 * mark already (apply_note_new_copy moves it on, so that a fill under way
 * cannot end the new gap): the gap ends at that record, and the next one
 * comes to this copy from the source. A quiet source has written no such
 * record, and no copy could have applied it: the fill waited for good.
 * Returns 0 or LAPSE_EIO. */
int apply_stream_fill_need(store *st, uint32_t table_id, uint32_t shard, uint64_t mark,
                           uint64_t *need, char *err, size_t errlen);
/* Fills this copy of stream shard shard of table t with records another
 * copy holds (recs[0..n), lens[i] bytes each, stored records as that copy
 * keeps them, in stream order): under the apply lock, in one WriteBatch,
 * each record of outbox seq <= mark (the gap's mark, apply_stream_gap) is
 * stored under its stream seq, and the last stream seq stored moves up to
 * the highest put. Records past mark are left to the source's batches;
 * *past is set when one was seen (the fill reached the end of the gap).
 * Stream records are the same on every copy, so a record put again is
 * unchanged. Returns 0, LAPSE_EINVAL (a record of another table or shard,
 * or with no stream seq), LAPSE_ECORRUPT, LAPSE_EIO or LAPSE_ENOMEM; on
 * error nothing is written. */
int apply_stream_fill(store *st, const table_schema *t, uint32_t shard, uint64_t mark,
                      const void *const *recs, const size_t *lens, size_t n, int *past, char *err,
                      size_t errlen);

/* Records that this copy of shard shard was filled through mark (every
 * record of outbox seq <= mark that another copy holds is here): its stream
 * reads are answered again, unless the REPL_MISSING mark moved past mark
 * meanwhile (a new loss: then nothing is written). Returns 0 or LAPSE_EIO. */
int apply_stream_filled(store *st, uint32_t table_id, uint32_t shard, uint64_t mark, char *err,
                        size_t errlen);

/* Drops the marks of source partition src_part (REPL_MISSING and both
 * filled marks) once the copies this node keeps of it are whole: its
 * stream copy filled through the mark (when stream is set: it hosts the
 * shard) and its GSI copies too (when gsi is set). From then on the reads
 * of those copies look at no mark of that source, as before the loss; a
 * later loss notes a new one. *dropped is set when they went. Returns 0
 * (dropped, or not whole yet) or LAPSE_EIO. */
int apply_forget_missing(store *st, uint32_t table_id, uint32_t src_part, int stream, int gsi,
                         int *dropped, char *err, size_t errlen);

/* The value a GSI entry of t->gsi[gsi] holds for item it (t->gsi[gsi]'s
 * projection): appended to out. INDEX_PROJECT_ALL: the whole item;
 * INDEX_PROJECT_KEYS: the table's keys, the index's keys and the TTL
 * attribute (when the table has one configured and the item carries it).
 * 0 or LAPSE_ENOMEM. */
int apply_project(const table_schema *t, uint32_t gsi, const item *it, buf *out);

#endif
