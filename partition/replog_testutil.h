/*
 * replog_testutil.h: a primary store (the fixture's) and a replica store in
 * temp dirs, for replog_test and replog_commit_test: the pair's hooks apply
 * each record on the replica in-process, as the node's hooks do over the
 * network (a failed ship injected by fail_ships; a gap answered by
 * resending the log from where the replica stands), and helpers to compare
 * the two copies and to take records from a log. Implemented in
 * replog_testutil.c.
 */
#ifndef LAPSE_REPLOG_TESTUTIL_H
#define LAPSE_REPLOG_TESTUTIL_H

#include "replog.h"
#include "store_testutil.h"

typedef struct pair {
    fixture *f;
    store *replica;
    char rdir[512];
    uint64_t epoch;    /* the primary's epoch (0: not primary) */
    int fail_ships;    /* ships to fail before reaching the replica */
    int ships;         /* ship calls */
    int caught_up;     /* records resent by catch-ups */
    int diverged;      /* ships the replica answered with diverged */
    int waits;         /* records waited for (hook_wait) */
    int waited_locked; /* of them, waited for with their partition's stripe held */
} pair;

extern pair g_pair; /* the pair of the running test */

/* The pair's begin hook: *epoch is the pair's (0: not the primary). */
int hook_begin(void *arg, uint32_t table_id, uint32_t part, uint64_t *epoch, int *took_in,
               char *err, size_t errlen);
/* The pair's ship hook: applies the record on the replica there and then;
 * on a gap, resends the log from where the replica stands. */
int hook_ship(void *arg, uint32_t table_id, uint32_t part, uint64_t seq, uint64_t prev_epoch,
              const uint8_t *rec, size_t len, void **ticket, char *err, size_t errlen);
/* Applying another store's log on a replica, record by record (resend_one:
 * a replog_read callback; prev_epoch follows the records). */
typedef struct resend {
    pair *p;
    uint32_t table_id, part;
    uint64_t prev_epoch; /* of the record before the next one */
} resend;
int resend_one(void *arg, uint64_t seq, const uint8_t *rec, size_t len);
/* Resends p's primary log after applied to the replica. */
int resend_from(pair *p, uint32_t table_id, uint32_t part, uint64_t applied, char *err,
                size_t errlen);

/* cmocka setup/teardown: the fixture, a replica store, and the pair's hooks
 * on the fixture's store at epoch 3. */
int pair_setup(void **state);
int pair_teardown(void **state);

/* The fixture's Plain table with three copies and TTL on Exp. */
table_schema replicated(void);
/* Fails unless both stores hold the same items and log position in every
 * partition of t. */
void assert_same(pair *p, const table_schema *t);
/* The items of t in st, over every partition. */
uint64_t total_items(store *st, const table_schema *t);
/* {Pk: pk, V: v}, and Exp: exp_s when exp_s > 0. */
item *row(int pk, const char *v, int64_t exp_s);
/* One TTL sweep of every partition of t; returns the items it deleted. */
size_t sweep_all(fixture *f, const table_schema *t);
/* The partition of item Pk = n. */
uint32_t part_of(int n, uint32_t partitions);

/* One record taken from a log (log_take: a replog_read callback). */
typedef struct grab {
    uint8_t rec[4096];
    size_t len;
} grab;
int log_take(void *arg, uint64_t s, const uint8_t *rec, size_t len);
/* Records taken from a log, in order (log_take_all: a replog_read callback). */
typedef struct grabs {
    grab g[8];
    size_t n;
} grabs;
int log_take_all(void *arg, uint64_t s, const uint8_t *rec, size_t len);
/* Puts Pk = pk on the primary only (every ship fails): its record is in
 * the primary's log for the test to hand to the replica. */
void put_primary_only(pair *p, const table_schema *t, int pk);

#endif
