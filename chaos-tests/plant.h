/*
 * plant.h: --debug-plant-violation, which breaks an invariant behind the
 * model's back so that a run proves its checker can fail (docs/chaos.md;
 * chaos_plant_test runs them):
 *
 *   mode    when                         what                            must break
 *   delete  after the workload           deletes an acknowledged,        1
 *                                        never-expiring item
 *   expire  after the workload           sets a past TTL on an item      3
 *                                        whose TTL was extended while due
 *   pause   3 s before the workload ends pauses TTL on chaos_ttl         2
 *   index   once the stream and indexes  plays a rogue node sending      4 (twice), 5
 *           matched the table            Replicate batches (below)
 *   daemon  after the faults; in the     kill -9 of a node behind the    6 (three times)
 *           final SIGTERM check          harness's back; another node
 *                                        killed before its SIGTERM; an
 *                                        AddressSanitizer line in a log
 *   copies  after the workload           a follower refuses records      9
 *   linear  after the workload           an overwritten register value   8
 *                                        put back (below)
 *
 * index speaks the nodes' own protocol (ReplicateRequest, the change record
 * of common/change.h; docs/replication.md) as a broken replica would,
 * so no node needs a debug hook:
 *   - a GSI orphan: an INSERT of an item that does not exist ("orphan<n>",
 *     Grp g0) sent to every node, so the owner of its GSI partition stores
 *     the entry (5);
 *   - a lost record: a shard host's applied seq of one base partition is
 *     moved on by one, then a put to a key of that partition is
 *     acknowledged, and its record is skipped as already applied: the
 *     stream never gets it (4);
 *   - a duplicate TTL REMOVE: a second REMOVE by lapse.ttl of an item the
 *     stream already shows TTL-deleted, stored as the shard's next record (4).
 * Each uses a partition of its own with nothing due in the next minutes,
 * so no real record is lost to the moved applied seqs.
 *
 * Every planted target ("table/key") goes into r->plants, so the run can
 * tell whether the checker named each one.
 *
 * Thread-safety: main thread only.
 */
#ifndef LAPSE_CHAOS_PLANT_H
#define LAPSE_CHAOS_PLANT_H

#include "run.h"

enum {
    PLANT_NONE,
    PLANT_DELETE,
    PLANT_EXPIRE,
    PLANT_PAUSE,
    PLANT_INDEX,
    PLANT_DAEMON,
    PLANT_COPIES,
    PLANT_LINEAR
};

/* The linear mode, after the register workload (registers.h) and before
 * its final reads: a register key is put back to a value whose write had
 * been overwritten by a later acknowledged one called after it returned,
 * behind the history's back, so the final read sees a value no order of
 * the recorded calls explains (invariant 8). *what receives a line for the
 * summary. */
void plant_linear(run *r, char *what, size_t len);

/* The copies mode (--replication above 1), after the workload: the node of
 * chaos_plain partition 0's first follower starts refusing its primaries'
 * records (its --debug-fault-dir switch, r->fault_dir), then an item is put
 * into that partition behind the model's back: the write is acknowledged
 * with the follower dropped from the in-sync set, which it never rejoins,
 * so that partition's copies end unequal (invariant 9). *what receives a
 * line for the summary. */
void plant_copies(run *r, char *what, size_t len);

/* Plants r->opt->plant's violation through the client (delete, expire,
 * pause); *what receives a line for the summary. */
void plant_client(run *r, char *what, size_t len);

/* Plants the index violations (the index mode). Returns how many were
 * planted (3 unless something was not possible, which is logged). */
int plant_index(run *r, char *what, size_t len);

/* The daemon mode, while the workload runs: kill -9 of node 1 without the
 * harness (tests/cluster.h) knowing, so it must find the exit as a crash
 * ("cluster" under 6). *what receives a line for the summary. */
void plant_daemon_crash(run *r, char *what, size_t len);

/* The daemon mode, in check_daemons after its crash check and before its
 * SIGTERMs: kill -9 of the last node (waited for, not reaped), so its exit
 * on SIGTERM is not clean ("node N" under 6), and an AddressSanitizer
 * report appended to the coordinator's log (its path under 6). */
void plant_daemon_exit(run *r);

#endif
