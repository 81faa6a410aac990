/*
 * stream_follow.h: follows a table's change stream with one long-polling
 * reader thread per shard and notes, for every item "<prefix><index>"
 * (index in [0, total)), when its TTL REMOVE (principal lapse.ttl) was read
 * and the record's deletedAt: so a benchmark observes every due item's
 * deletion as a subscriber would, not a sample of it (lapse-repl-bench's
 * stream lag, lapse-ttl-bench's fair comparison with Redis's expired
 * events).
 *
 * Thread-safety: seen_ms and deleted_ms are written by the reader threads,
 * one entry each at most once; read them after stream_follow_stop, or poll
 * `removes` (atomic) meanwhile.
 */
#ifndef LAPSE_BENCH_STREAM_FOLLOW_H
#define LAPSE_BENCH_STREAM_FOLLOW_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "../client/lapse.h"

typedef struct stream_follow {
    lapse_client *c;      /* borrowed; shared by the readers */
    const char *table;    /* borrowed */
    const char *prefix;   /* borrowed: the followed items' Id prefix */
    long long total;      /* followed indexes [0, total) */
    int64_t *seen_ms;     /* [total] wall ms its TTL REMOVE was read (0: not yet) */
    int64_t *deleted_ms;  /* [total] that record's ttl deletedAt, epoch ms */
    atomic_llong removes; /* TTL REMOVEs of followed items read so far */
    atomic_int stop;
    unsigned nshards;
    pthread_t *th;          /* [nshards] */
    uint64_t *start_seq;    /* [nshards_asked] each reader starts after this sequence number */
    unsigned nshards_asked; /* the shards to follow (nshards: readers started so far) */
} stream_follow;

/* Starts one reader per shard (0 .. nshards-1), from the oldest record, or
 * with from_end past every record the shards hold now (one read of each
 * first): so a backlog of earlier writes is not read ahead of the REMOVEs
 * (REQUIRES then: no followed item's REMOVE is in the stream yet). Returns
 * 0 with *out to stop and free, or -1 (out of memory, or the first read
 * failed: printed; nothing started). */
int stream_follow_start(stream_follow **out, lapse_client *c, const char *table, const char *prefix,
                        long long total, unsigned nshards, int from_end);
/* Stops and joins the readers (each within its 1 s long poll); later calls
 * do nothing. */
void stream_follow_stop(stream_follow *f);
/* Stops if needed and frees f. Accepts NULL. */
void stream_follow_free(stream_follow *f);

#endif
