/*
 * streams.h: the stream shards this node hosts, served and trimmed
 * (docs/replication.md, "Stream reading"): the GetStreamRecords call with
 * its long poll, the wake-ups replicate.c sends when stream records are
 * stored, and the retention thread.
 *
 * Long polls: a GetStreamRecords that finds nothing after after_sequence
 * and asks for wait_ms waits on one condition, broadcast by
 * streams_notify, until a record arrives, wait_ms passes or the request's
 * deadline is near. At most STREAMS_MAX_POLLERS calls wait at once; the
 * node's RPC server runs that many worker threads beyond --workers, so
 * long polls never take the threads other calls need. A call finding
 * every poll slot taken answers at once (possibly empty).
 *
 * Retention: every trim interval (60 s; --debug-stream-trim-interval-ms
 * in tests) the thread calls stream_trim for every table whose shards this
 * node hosts, with the table's retention (retention_hours, 0 = 24), in
 * steps of STREAMS_TRIM_STEP records until done or stopping.
 *
 * Filling (streams_fill.c): a copy of a shard that misses records its
 * source trimmed before it applied them (its data dir was lost) refuses
 * reads (apply_stream_gap) until the refill thread (refill.h) fills it
 * from another copy of the shard that is whole and has applied the source
 * past the gap (docs/replication.md, "A copy that lost records").
 *
 * Thread-safety: streams_open/streams_stop/streams_free on the main thread;
 * the rest from any thread.
 *
 * Invariants:
 *  1. A reader that saw no record never misses the wake-up of the next one:
 *     it reads the notify generation before reading the store and waits only
 *     while the generation is unchanged.
 *  2. After streams_stop no call waits (they answer at once) and the trim
 *     thread has exited; streams_free runs after the RPC server is closed.
 */
#ifndef LAPSE_STREAMS_H
#define LAPSE_STREAMS_H

#include <stdint.h>

#include "node.h"
#include "request.h"

#define STREAMS_MAX_POLLERS 8           /* long polls waiting at once */
#define STREAMS_DEFAULT_LIMIT 1000      /* records per call when limit is 0; the cap */
#define STREAMS_MAX_BYTES (1024 * 1024) /* record bytes per call (past the first) */
#define STREAMS_REPLY_MARGIN_MS 50      /* a long poll answers this long before the deadline */
#define STREAMS_DEFAULT_TRIM_INTERVAL_MS 60000
#define STREAMS_TRIM_STEP 10000 /* records looked at per stream_trim call */

typedef struct streams streams;

/* Starts the retention thread. Returns 0 or LAPSE_ENOMEM with a reason.
 * trim_interval_ms <= 0: the default. REQUIRES: maps_init ran. */
int streams_open(streams **out, node_server *ns, int64_t trim_interval_ms, char *err,
                 size_t errlen);
/* Ends waiting long polls and stops the retention thread (invariant 2).
 * Accepts NULL. */
void streams_stop(streams *s);
/* Frees s. REQUIRES: streams_stop ran and no handler can call in. Accepts
 * NULL. */
void streams_free(streams *s);
/* Stream records were stored: wakes every waiting long poll. Accepts NULL. */
void streams_notify(streams *s);

/* The GetStreamRecords call, with its long poll (above). Sets status or
 * body on c->resp. */
void streams_get_records(request_ctx *c);

/* apply_stream_gap for this node's copy of shard of t, except that a
 * stream turned on again (generation >= 1) with no record of its own yet
 * has no gap: what the copy misses is older than the stream. Returns 0 or
 * LAPSE_EIO with *mark (0: whole). */
int streams_shard_gap(node_server *ns, const table_schema *t, uint32_t shard, uint64_t *mark,
                      char *err, size_t errlen);

/* Fills this node's copy of stream shard shard of t, whose gap has mark
 * (apply_stream_gap), from another copy pm holds UP (streams_fill.c): the
 * first whole one that applied the source through mark. Returns 0 once
 * filled (the copy answers again), else the last copy's error (logged);
 * the next pass tries again. Blocks on peers' calls (2 s each at most).
 * Called by the refill thread (refill.h). */
int streams_fill_shard(node_server *ns, const pmap *pm, const pmap_table *t, uint32_t shard,
                       uint64_t mark);

#endif
