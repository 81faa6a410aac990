/*
 * admin.h: the admin calls of a chaos run: creating tables and enabling TTL,
 * retried until they hold, and one call on a helper thread while the main
 * thread injects a fault into it (a coordinator killed mid-CreateTable).
 *
 * Thread-safety: main thread only (admin_with runs the call on a thread of
 * its own and joins it before returning).
 */
#ifndef LAPSE_CHAOS_ADMIN_H
#define LAPSE_CHAOS_ADMIN_H

#include <stdint.h>

#include "run.h"

/* Creates a table (Id:S, WL_PARTITIONS partitions), retrying through
 * coordinator restarts until it exists. Returns 0 (this call created it),
 * LAPSE_EEXISTS (it existed) or the last error after 30 s. *first_rv (may
 * be NULL) gets the first attempt's status. */
int admin_create_table(run *r, const char *name, int *first_rv);
/* The same for the table d defines. */
int admin_create_def(run *r, const lapse_table_def *d, int *first_rv);

/* Enables TTL (attribute ExpirationTime) on table, retrying until it is
 * applied (success or "already enabled"), up to timeout_ms. */
int admin_enable_ttl(run *r, const char *table, int timeout_ms);

/* An admin call on a helper thread, so the main thread can kill the
 * coordinator while it is in flight. */
typedef struct admin_job {
    run *r;
    int enable; /* 0: CreateTable, 1: UpdateTimeToLive(ENABLE) */
    const char *table;
    int rv;
    lapse_error e;
} admin_job;

/* Runs j's call on a thread of its own and, delay_ms into it, fault(r,
 * arg) on this one; returns when both are done. Without a thread the call
 * runs alone, without the fault. */
void admin_with(run *r, admin_job *j, int64_t delay_ms, void (*fault)(run *, void *), void *arg);
/* admin_with whose fault is kill -9 of process victim (why: for the log). */
void admin_with_kill(run *r, admin_job *j, int victim, int64_t delay_ms, const char *why);

/* After a killed UpdateTimeToLive(ENABLE) on model table ti: an
 * acknowledged one must stick by itself (settle then only waits for
 * ENABLED); a failed one is retried. */
void admin_resolve_enable(run *r, int ti, const admin_job *j);

/* Fills model table ti (all its keys) with random TTL classes (rng: the
 * scenario's random numbers). */
void admin_fill_table(run *r, int ti, uint64_t *rng);

#endif
