/*
 * streamread.h: reading a table's whole change stream through liblapse, for
 * the black-box tests (repl_testutil.h) and the chaos checker
 * (chaos-tests/check_stream.c), which both need every record of every shard
 * in shard, then sequence order, and the first gap if there is one.
 *
 * A streamread remembers how far it read each shard, so calling
 * streamread_more again reads only what arrived since (records are never
 * rewritten, only trimmed by retention).
 *
 * Thread-safety: none; one thread per streamread.
 *
 * Invariants:
 *  1. r[0..n) points into the batches b[0..nb), which the streamread owns;
 *     r is sorted by shard, then sequence number.
 *  2. last_read[i] is the sequence number of the last record read from the
 *     shard with index i (0: none yet); last_seq[i] is what its host
 *     reported on the latest read; host[i] is that host's node id, as the
 *     coordinator named it on the first call.
 */
#ifndef LAPSE_TEST_STREAMREAD_H
#define LAPSE_TEST_STREAMREAD_H

#include <stddef.h>
#include <stdint.h>

#include "../client/lapse.h"

typedef struct streamread {
    lapse_stream_batch **b; /* owned */
    size_t nb, bcap;
    const lapse_stream_record **r; /* borrowed from b; sorted by shard, then seq */
    size_t n, rcap;
    size_t nshards;      /* 0 until the first read */
    uint32_t *shard;     /* [nshards]: the shard numbers */
    uint64_t *last_read; /* [nshards] */
    uint64_t *last_seq;  /* [nshards] */
    uint32_t *host;      /* [nshards] */
} streamread;

/* Reads every shard of table's stream, each from where the previous call
 * stopped (the oldest kept record at first), until a read returns nothing
 * new, all shards at once (lapse_stream_read_many, 1000 records a read).
 * Records are appended to s and s->r is sorted again. Returns 0, or the
 * error of a read, with the message in *err; on error s keeps what it
 * held before the failing read and stays usable. REQUIRES: s zeroed or
 * used with the same table only. */
int streamread_more(lapse_client *c, const char *table, streamread *s, lapse_error *err);
/* Frees what s holds and zeroes it. Accepts a zeroed s. */
void streamread_free(streamread *s);

/* Whether every shard's records are consecutive, starting at 1 when
 * from_one (no trimming), else at its first record. Returns 0 when they
 * are, else 1 with the first break described in why (shard, what was due,
 * what was found). */
int streamread_gap(const streamread *s, int from_one, char *why, size_t len);

#endif
