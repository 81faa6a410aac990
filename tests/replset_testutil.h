/*
 * replset_testutil.h: helpers of the tests of replica sets on a real
 * cluster (replica_set_test, lease_fence_test): each copy's digest read
 * with PartitionDigest on its node, every copy compared with its primary's,
 * bounded waits for node states and in-sync sets, and puts retried while
 * sets change.
 *
 * Every helper fails the running cmocka test (saying what it waited for or
 * found) instead of returning an error. Tables have an S partition key Id.
 *
 * Thread-safety: none; one test thread (rs_put_retrying may run on others
 * with their own client).
 */
#ifndef LAPSE_REPLSET_TESTUTIL_H
#define LAPSE_REPLSET_TESTUTIL_H

#include <jansson.h>
#include <stdint.h>

#include "../client/lapse.h"
#include "../placement/pmap.h"
#include "../rpc/rpc.h"
#include "cluster.h"
#include "nodecall.h"
#include "streamread.h"

/* A cmocka group setup: one etcd member, a coordinator and three nodes
 * (node i has id i), and a client (rs_cluster, rs_client). 0, or -1 with
 * why on stderr. */
int rs_group_setup(void **state);
/* rs_group_setup with `nodes` nodes instead of three. */
int rs_group_setup_nodes(int nodes);
/* As rs_group_setup_nodes with that many coordinators on the etcd member
 * (rs_client knows them all). */
int rs_group_setup_coordinators(int nodes, int coordinators);
/* rs_group_setup_nodes, node i given the i-th zone of zones (--zone; a
 * comma-separated list, cluster_options.node_zones). */
int rs_group_setup_zones(int nodes, const char *zones);
/* rs_group_setup_nodes, the coordinator given extra arguments
 * (cluster_options.coordinator_args). */
int rs_group_setup_coordinator_args(int nodes, const char *coordinator_args);
/* rs_group_setup with extra arguments for every node (cluster_options). */
int rs_group_setup_args(const char *node_args);
/* rs_group_setup_args, the nodes also given a fault directory
 * (--debug-fault-dir, for rs_refuse_replicate_log) and, with metrics set,
 * serving /metrics (cluster_metrics_addr). rs_group_teardown removes the
 * directory. */
int rs_group_setup_faults(const char *node_args, int metrics);
/* rs_group_setup_faults without node arguments or metrics, the
 * coordinator given extra arguments (cluster_options.coordinator_args). */
int rs_group_setup_faults_coordinator_args(const char *coordinator_args);
/* rs_group_setup_faults with `nodes` nodes, no node arguments or
 * metrics. */
int rs_group_setup_faults_nodes(int nodes);
/* Turns node's refusal of every ReplicateLog on or off (a file in the
 * fault directory of rs_group_setup_faults). */
void rs_refuse_replicate_log(int node, int on);
/* Turns on or off node's late shipments (each of its rounds of records to
 * its followers leaves 600 ms late), as rs_refuse_replicate_log. */
void rs_slow_ship(int node, int on);
/* Turns on or off node's hold after a join: its resync pass, once it made
 * a member join a set it leads, waits while the switch is on (10 s at
 * most) before it confirms that set's log (node/resync.c's send_lag). */
void rs_hold_after_join(int node, int on);
/* Turns on or off node's small snapshot calls (512 bytes each, not 4 MB,
 * so a small partition's snapshot takes many), as rs_refuse_replicate_log. */
void rs_small_snapshot_calls(int node, int on);
/* Turns on or off node's slow refill passes (each holds the map it began
 * under 1.5 s before it looks at the copies), as rs_refuse_replicate_log. */
void rs_slow_refill(int node, int on);
/* The group's teardown: stops what rs_group_setup started (stop_cluster). */
/* Reads table's stream into s until it holds want records, for up to
 * wait_ms (0: one read); returns how many it holds then. */
size_t rs_stream_until(const char *table, streamread *s, size_t want, long wait_ms);
/* The records in s of the item whose Id (type S) is id. */
size_t rs_stream_records_of(const streamread *s, const char *id);

int rs_group_teardown(void **state);
cluster *rs_cluster(void);
lapse_client *rs_client(void);

void rs_sleep_ms(long ms);

/* Sends req to node, once, with a 3 s budget: the call's Lapse code; with
 * 0, *resp is the reply (rpc_response_free), else NULL and err says why. */
int rs_call(int node, Lapse__Request *req, Lapse__Response **resp, char *err, size_t errlen);

/* One copy's digest, as PartitionDigest on node reports it. */
typedef nodecall_digest rs_digest;

rs_digest rs_node_digest(int node, uint32_t table_id, uint32_t part);

/* Asserts every copy of every partition of table equals its primary's and
 * returns the items over all partitions (counted on the primaries). */
uint64_t rs_assert_copies_match(const char *table);

/* rs_assert_copies_match once the copies match, or after timeout_ms:
 * for copies that end equal with no write to bring them there. */
uint64_t rs_wait_copies_match(const char *table, long timeout_ms);

/* Waits (up to 40 s) until every member of every set of table is in sync
 * and, while the rebalancer may act (every node UP, none draining), it
 * plans no handover of a primaryship: a node back from a failover is
 * handed its share of primaries (--balance-primaries, on by default),
 * and each handover takes the old primary out of its set for a moment, so
 * a test comparing copies after an "all in sync" would otherwise race the
 * first. Returns the coordinator's map then (caller pmap_free). */
pmap *rs_wait_all_in_sync(const char *table);

/* Waits (up to 60 s) until the coordinator's rebalancer has nothing to do
 * (no move or handover planned, no set moving) on a map where every member
 * of every set of table is in sync: after a failover the rebalancer hands
 * primaryships back (docs/replication.md, "Rebalancing"), so a test that
 * watches who leads waits for this first. Returns that map (caller
 * pmap_free). */
pmap *rs_wait_rebalanced(const char *table);

/* Waits (up to 20 s) until the coordinator reports node id in state want
 * ("UP" or "DOWN"). */
void rs_wait_state(uint32_t id, const char *want);

/* Creates table name (S partition key Id) of partitions partitions and
 * three copies, or fails the test. */
void rs_create_rf3(const char *name, unsigned partitions);

/* How many of table's sets hold node in sync as a follower, and how many
 * it is the primary of; fails if node is not UP. */
void rs_follower_and_primary_sets(const char *table, uint32_t node, int *in_sync_follower,
                                  int *primary);

/* Puts {Id: id, V: v} on table, retrying for up to 15 s while sets change. */
void rs_put_retrying(const char *table, const char *id, const char *v);

/* The JSON answer js (freed here) of an admin call named what that
 * returned rv with error e, parsed (caller json_decref); NULL when rv is
 * want_rv and not 0. Fails the test when rv is not want_rv. */
json_t *rs_json_answer(const char *what, int rv, int want_rv, char *js, const lapse_error *e);
/* Integer field name of doc; fails the test when there is none. */
json_int_t rs_json_int(json_t *doc, const char *name);
/* Node id's entry in cluster-status (caller json_decref the returned doc,
 * *node borrowed from it). */
json_t *rs_status_of(uint32_t id, json_t **node);
/* lapse_rebalance_plan's answer, parsed (caller json_decref). */
json_t *rs_rebalance_plan(void);

#endif
