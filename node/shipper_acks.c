/*
 * shipper_acks.c: the outbox shipper's acks thread (shipper.h; state in
 * shipper_int.h): the one thread that writes the shipper's bookkeeping to
 * the store. It stores the acks the rounds learnt (outbox_ack) and trims
 * every source's outbox through what all its destinations acked
 * (outbox_trim).
 *
 * Why a thread of its own: a store write queues in RocksDB behind the
 * WriteBatches being written at that moment, and during an expiry burst
 * those are TTL sweeps and applies of a thousand records each: a one-key
 * ack could wait tens of milliseconds. Written by a round, it held the
 * destination's claim, and with it every lane to that destination, for as
 * long. Here it delays nothing but the acks thread.
 *
 * Safety: the rounds keep each lane's ack in memory (the shipper ships from
 * it), so the store's ack may lag by up to SHIPPER_ACKS_MS. A source killed
 * meanwhile resends, after its restart, records its destinations already
 * applied; they skip them (apply.h: applied seq per source partition). A
 * trim reads the stored acks, so it never deletes a record that the acks a
 * restart would start from still need.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/clock.h"
#include "../common/lapse_err.h"
#include "../common/log.h"
#include "../partition/outbox.h"
#include "logship.h"
#include "shipper_int.h"

/* An ack to store. */
typedef struct ack_row {
    uint32_t table_id, part, dest;
    uint64_t seq;
    int rv;
} ack_row;

/* A source to trim. */
typedef struct trim_row {
    uint32_t table_id, part;
    uint32_t dests[PMAP_MAX_DESTINATIONS];
    size_t ndests;
    uint64_t trimmed, through;
    int rv;
} trim_row;

/* Copies out the acks to store (acked above persisted) and the sources due
 * for a trim (now past trim_at_ms, every lane's ack above trimmed; their
 * trim_at_ms moves on). Arrays: caller frees. REQUIRES: lock held. */
static void collect(shipper *s, int64_t now, ack_row **acks, size_t *nacks, trim_row **trims,
                    size_t *ntrims)
{
    size_t nl = 0;
    for (size_t i = 0; i < s->nsources; i++) {
        nl += s->sources[i].nlanes;
    }
    *nacks = *ntrims = 0;
    *acks = calloc(nl ? nl : 1, sizeof(**acks));
    *trims = calloc(s->nsources ? s->nsources : 1, sizeof(**trims));
    if (*acks == NULL || *trims == NULL) {
        return; /* the next step retries */
    }
    for (size_t i = 0; i < s->nsources; i++) {
        source *src = &s->sources[i];
        uint64_t low = UINT64_MAX;
        for (size_t k = 0; k < src->nlanes; k++) {
            const lane *l = &src->lanes[k];
            if (l->acked_known && l->acked > l->persisted) {
                (*acks)[(*nacks)++] = (ack_row){src->table_id, src->part, l->dest, l->acked, 0};
            }
            uint64_t a = l->acked_known ? l->acked : 0;
            low = a < low ? a : low;
        }
        if (src->nlanes == 0 || low == 0 || low <= src->trimmed || now < src->trim_at_ms) {
            continue;
        }
        trim_row *t = &(*trims)[(*ntrims)++];
        memset(t, 0, sizeof(*t));
        t->table_id = src->table_id;
        t->part = src->part;
        t->trimmed = src->trimmed;
        for (size_t k = 0; k < src->nlanes && k < PMAP_MAX_DESTINATIONS; k++) {
            t->dests[t->ndests++] = src->lanes[k].dest;
        }
        src->trim_at_ms = now + SHIPPER_TRIM_INTERVAL_MS;
    }
}

/*
 * One step of the acks thread. Budget: one ack write per lane whose ack moved
 * since the last step, then one trim (a seek and at most one range delete)
 * per source due, each source at most every SHIPPER_TRIM_INTERVAL_MS: a
 * trim is a range tombstone, and every tombstone in the outbox's memtable
 * is paid for again by each new iterator over it (outbox_read), while the
 * acked records left meanwhile cost nothing (reads start past the ack).
 * Enters and leaves with the lock held; drops it for the store.
 */
static void step(shipper *s)
{
    ack_row *acks = NULL;
    trim_row *trims = NULL;
    size_t nacks = 0, ntrims = 0;
    collect(s, clock_mono_now().ms, &acks, &nacks, &trims, &ntrims);
    pthread_mutex_unlock(&s->lock);
    for (size_t i = 0; i < nacks; i++) {
        ack_row *a = &acks[i];
        char err[256] = "";
        a->rv = outbox_ack(s->st, a->table_id, a->part, a->dest, a->seq, err, sizeof(err));
        if (a->rv != 0) {
            log_error("outbox of table id %u partition %u: recording node %u's ack of %" PRIu64
                      ": %s: %s",
                      a->table_id, a->part, a->dest, a->seq, lapse_strerror(a->rv), err);
        }
    }
    /* After the acks: outbox_trim reads the stored ones. */
    for (size_t i = 0; i < ntrims; i++) {
        trim_row *t = &trims[i];
        char err[256] = "";
        t->rv = outbox_trim(s->st, t->table_id, t->part, t->dests, t->ndests, t->trimmed,
                            &t->through, err, sizeof(err));
        if (t->rv != 0) {
            log_error("trimming the outbox of table id %u partition %u: %s: %s", t->table_id,
                      t->part, lapse_strerror(t->rv), err);
        } else if (s->ns->logship != NULL) {
            /* The replicas' copies follow (with the next round). */
            logship_outbox_trimmed(s->ns->logship, t->table_id, t->part, t->through);
        }
    }
    pthread_mutex_lock(&s->lock);
    /* The map may have moved on meanwhile: find the lanes again. */
    for (size_t i = 0; i < nacks; i++) {
        lane *l = shipper_lane(shipper_source(s, acks[i].table_id, acks[i].part), acks[i].dest);
        if (acks[i].rv == 0 && l != NULL && acks[i].seq > l->persisted) {
            l->persisted = acks[i].seq;
        }
    }
    for (size_t i = 0; i < ntrims; i++) {
        source *src = shipper_source(s, trims[i].table_id, trims[i].part);
        if (trims[i].rv == 0 && src != NULL && trims[i].through > src->trimmed) {
            src->trimmed = trims[i].through;
        }
    }
    free(acks);
    free(trims);
}

void *shipper_acks_run(void *arg)
{
    shipper *s = arg;
    pthread_mutex_lock(&s->lock);
    while (!s->acks_stopping) {
        struct timespec ts = clock_mono_abstime(SHIPPER_ACKS_MS);
        while (!s->acks_stopping && pthread_cond_timedwait(&s->acks_cond, &s->lock, &ts) == 0) {
        }
        step(s); /* also once after the stop: the last acks go to the store */
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}
