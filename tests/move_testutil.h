/*
 * move_testutil.h: what the tests of moving copies share (node_drain_test,
 * move_faults_test): a writer thread that notes which puts were
 * acknowledged, and the admin calls' JSON (node drain, cluster-status's
 * Moves), on the cluster of replset_testutil.h.
 *
 * Thread-safety: the writer runs on its own thread with its own client;
 * the rest are for the test's thread.
 */
#ifndef LAPSE_TEST_MOVE_TESTUTIL_H
#define LAPSE_TEST_MOVE_TESTUTIL_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define MV_WRITER_MAX 100000
#define MV_PARTS 16 /* the partitions of mv_create_ttl_table's tables */
#define MV_KEYS 200 /* their items k0..k199: the even ones fall due 8 to 15 s later */

/* Puts {"Id":"w<i>","V":i} for i = 0, 1, ... into table until stopped. */
typedef struct mv_writer {
    const char *table;
    atomic_int stop;
    int n;                     /* attempted */
    char acked[MV_WRITER_MAX]; /* 1: acknowledged */
    int nacked, nfailed;
    pthread_t thread;
} mv_writer;

/* Starts w (zeroed first) writing into table. */
void mv_writer_start(mv_writer *w, const char *table);
/* Stops w and waits for its thread. */
void mv_writer_stop(mv_writer *w);
/* Asserts every write w acknowledged reads back from table; returns how
 * many of w's items are there. */
int mv_writer_check(const mv_writer *w, const char *table);

/* Creates table (MV_PARTS partitions of copies copies, a stream, TTL on
 * Exp) and puts k0..k<MV_KEYS - 1>, the even ones due 8 to 15 s from now. */
void mv_create_ttl_table(const char *table, unsigned copies);
/* Checks table's stream: exactly one TTL delete of each due item of
 * mv_create_ttl_table, none of the others, gapless. Waits (up to 20 s)
 * for the deletes to arrive. */
void mv_check_ttl_stream(const char *table);
/* After a drain of node off table (copies copies, made by
 * mv_create_ttl_table; nodes 1..nodes, all UP): no set or stream shard
 * names node, each set has its copies in sync, every acknowledged write of
 * w and every item not due reads back, the copies are identical, every due
 * item is gone with exactly one TTL delete in the gapless stream, and only
 * a partition's members hold its keys a few seconds later. */
void mv_check_drained(const char *table, unsigned copies, uint32_t node, const mv_writer *w,
                      int nodes);
/* The copies left on node now, base and GSI/stream (BaseCopiesLeft +
 * DerivedCopiesLeft: mv_drain again, which keeps it draining, and retries
 * while no coordinator leads). */
json_int_t mv_left_on(uint32_t node);
/* Waits up to timeout_ms until node holds at most most copies (mv_left_on);
 * returns how many it holds. */
json_int_t mv_wait_left_at_most(uint32_t node, json_int_t most, long timeout_ms, const char *what);
/* Prints to stderr what a stalled drain of node looks like: its NodeDrain
 * answer, the rebalance plan and the last lines of every coordinator's
 * log and of node's (CI keeps only a test's output). */
void mv_print_stall(uint32_t node);

/* lapse_node_drain's answer, parsed (caller json_decref); fails the test
 * unless the call returns want_rv (then NULL when it is not 0); retried
 * for up to 20 s while the coordinators answer EUNAVAILABLE (none leads
 * yet), unless that is what is wanted. The other
 * admin answers: replset_testutil.h (rs_json_answer, rs_json_int, ...). */
json_t *mv_drain(uint32_t node, int stop, int want_rv);
/* lapse_node_remove's answer, as mv_drain's. */
json_t *mv_remove(uint32_t node, int want_rv);
/* As mv_remove(node, 0), with LAPSE_REMOVE_LOSE_DATA. */
json_t *mv_remove_lose_data(uint32_t node);
/* Waits (up to 30 s) until none of nodes 1..nodes outside a partition's
 * set holds any of table's keys or a log position there: each drops its
 * former copies a few seconds after the map that took them away
 * (node/copydrop.c). Returns how many former copies still held keys when
 * it started. */
size_t mv_wait_only_members_hold(const char *table, int nodes);
/* cluster-status's "Moves" now: asserts each moves a copy off node from
 * (when non-zero) to others, at a known step; returns how many there are. */
size_t mv_moves_now(uint32_t from);

#endif
