/*
 * faults.c: the fault scenarios. See faults.h and docs/chaos.md.
 */
#include "faults.h"

#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "../common/clock.h"
#include "../placement/pmap.h"
#include "../tests/etcd_members.h"
#include "../tests/nodecall.h"
#include "admin.h"
#include "faults_coord.h"
#include "faults_move.h"
#include "procs.h"
#include "registers.h"
#include "workload.h"

/* Keys per mass-expiry burst and burst slots in table 0 (chaos.c sizes it). */
int faults_burst_keys(const chaos_opts *o)
{
    return o->profile_long ? 2000 : 600;
}

/* ============================== helpers ============================== */

static void sleep_until(int64_t mono)
{
    int64_t d = mono - clock_mono_now().ms;
    if (d > 0) {
        clock_sleep_ms(d);
    }
}

unsigned faults_missing(run *r)
{
    unsigned missing = 0;
    for (int b = 0; b < CHAOS_FAULT_KINDS; b++) {
        if ((r->opt->faults & (1u << b)) && atomic_load(&r->kind_faults[b]) == 0) {
            missing |= 1u << b;
        }
    }
    return missing;
}

/* ============================== scenarios ============================== */

/* A fresh table with TTL enabled and no index or stream, for the plain half
 * of a mass expiry: PLAIN_BURST_PER_PART items per partition fall due at
 * once, so its sweeps take the path that reads no item and deletes the
 * entries with one range tombstone (partition/expiry.c). Returns its model
 * index, or -1 (logged) when it cannot be set up. */
#define PLAIN_BURST_PER_PART 300

static int plain_burst_table(run *r, int n)
{
    char name[48];
    snprintf(name, sizeof(name), "chaos_pb%d", n);
    int ti = model_add_table(&r->m, name, WL_PARTITIONS * PLAIN_BURST_PER_PART, 0);
    if (ti < 0) {
        return -1;
    }
    int crv = admin_create_table(r, name, NULL);
    if ((crv != 0 && crv != LAPSE_EEXISTS) || admin_enable_ttl(r, name, 20000) != 0) {
        flog_add(r, "cannot set up %s for the plain burst", name);
        return -1;
    }
    r->m.t[ti].ttl = 1;
    r->m.t[ti].ttl_resolved = 1;
    return ti;
}

/* A tenth of the m keys idx of table ti get extended or lose their TTL,
 * racing the scanner. */
static void race_burst(run *r, int ti, const int *idx, int m, uint64_t *rng)
{
    for (int i = 0; i < m / 10; i++) {
        int k = idx[rng_range(rng, 0, m - 1)];
        if (rng_next(rng) % 2 == 0) {
            wl_call(r, r->admin, ti, k, WK_UPD_TTL, TC_FUTURE, rng);
        } else {
            wl_call(r, r->admin, ti, k, WK_UPD_RM, 0, rng);
        }
    }
}

static void sc_mass_expiry(run *r, uint64_t *rng, int n)
{
    int m = faults_burst_keys(r->opt);
    int slot = n % CHAOS_BURST_SLOTS;
    int pti = plain_burst_table(r, n);
    int pm = pti >= 0 ? r->m.t[pti].nkeys : 0;
    int *idx = malloc(sizeof(int) * (size_t)m), *pidx = malloc(sizeof(int) * (size_t)(pm + 1));
    if (idx == NULL || pidx == NULL) {
        free(idx);
        free(pidx);
        return;
    }
    for (int i = 0; i < m; i++) {
        idx[i] = r->opt->items + slot * m + i;
    }
    for (int i = 0; i < pm; i++) {
        pidx[i] = i;
    }
    int64_t due_s = clock_wall_now().ms / 1000 + 3;
    run_phase(r, "mass expiry: %d + %d (plain table) items due at %" PRId64, m, pm, due_s);
    wl_batch_put(r, r->admin, 0, idx, m, due_s, rng);
    if (pm > 0) {
        wl_batch_put(r, r->admin, pti, pidx, pm, due_s, rng);
    }
    /* A tenth of each get extended or lose their TTL right around the due
     * second, racing the scanner. */
    int64_t due_mono = clock_mono_now().ms + (due_s * 1000 - clock_wall_now().ms);
    sleep_until(due_mono - rng_range(rng, 0, 100));
    race_burst(r, 0, idx, m, rng);
    if (pm > 0) {
        race_burst(r, pti, pidx, pm, rng);
    }
    sleep_until(due_mono + rng_range(rng, -300, 1000));
    int victim = (int)rng_range(rng, 1, cluster_nodes(r->cl));
    char why[96];
    snprintf(why, sizeof(why), "during the mass expiry of %d + %d items due at %" PRId64, m, pm,
             due_s);
    procs_kill9(r, victim, why);
    procs_restart_after(r, victim, rng_range(rng, 200, 2000));
    free(idx);
    free(pidx);
}

/* How many stream shards and GSI partitions of table 0 (the indexed table)
 * each node holds, from describe-table: weight[node], [1..nodes]. Returns
 * the sum, 0 when it cannot be read. */
static int destinations(run *r, int *weight, int *shards, int *gsi)
{
    char *js = NULL;
    lapse_error e = {0};
    int sum = 0;
    memset(weight, 0, sizeof(int) * (CLUSTER_MAX_NODES + 1));
    memset(shards, 0, sizeof(int) * (CLUSTER_MAX_NODES + 1));
    memset(gsi, 0, sizeof(int) * (CLUSTER_MAX_NODES + 1));
    if (lapse_describe_table(r->admin, r->m.t[0].name, &js, &e) != 0) {
        return 0;
    }
    json_t *doc = json_loads(js, 0, NULL), *t = json_object_get(doc, "Table"), *v;
    size_t i;
    json_array_foreach(json_object_get(t, "StreamShards"), i, v)
    {
        json_int_t node = json_integer_value(json_object_get(v, "NodeId"));
        if (node >= 1 && node <= CLUSTER_MAX_NODES) {
            shards[node]++;
        }
    }
    const char *key;
    json_object_foreach(
        json_object_get(json_array_get(json_object_get(t, "GlobalSecondaryIndexes"), 0),
                        "PartitionsPerNode"),
        key, v)
    {
        int node = atoi(key);
        if (node >= 1 && node <= CLUSTER_MAX_NODES) {
            gsi[node] += (int)json_integer_value(v);
        }
    }
    for (int n = 1; n <= cluster_nodes(r->cl); n++) {
        weight[n] = shards[n] + gsi[n];
        sum += weight[n];
    }
    json_decref(doc);
    lapse_free(js);
    return sum;
}

/* kill -9 of a node that receives the indexed table's records (it hosts
 * stream shards or owns GSI partitions, drawn in proportion to how many)
 * while a burst ships: half the time right after the burst's batch write
 * (its INSERTs on their way to the GSI owners and shard hosts), otherwise
 * as the burst falls due (its TTL REMOVEs on their way). */
static void sc_dest_kill(run *r, uint64_t *rng, int n)
{
    int m = faults_burst_keys(r->opt);
    int slot = n % CHAOS_BURST_SLOTS;
    int *idx = malloc(sizeof(int) * (size_t)m);
    int weight[CLUSTER_MAX_NODES + 1], shards[CLUSTER_MAX_NODES + 1], gsi[CLUSTER_MAX_NODES + 1];
    if (idx == NULL) {
        return;
    }
    int sum = destinations(r, weight, shards, gsi);
    for (int i = 0; i < m; i++) {
        idx[i] = r->opt->items + slot * m + i;
    }
    int64_t due_s = clock_wall_now().ms / 1000 + 2;
    int early = rng_next(rng) % 2 == 0;
    run_phase(r, "dest-kill: %d items due at %" PRId64 ", shipping", m, due_s);
    wl_batch_put(r, r->admin, 0, idx, m, due_s, rng);
    int64_t due_mono = clock_mono_now().ms + (due_s * 1000 - clock_wall_now().ms);
    if (early) {
        clock_sleep_ms(rng_range(rng, 0, 60));
    } else {
        sleep_until(due_mono + rng_range(rng, 0, 600));
    }
    int victim = (int)rng_range(rng, 1, cluster_nodes(r->cl));
    if (sum > 0) {
        int x = (int)rng_range(rng, 0, sum - 1);
        for (victim = 1; victim < cluster_nodes(r->cl) && x >= weight[victim]; victim++) {
            x -= weight[victim];
        }
    }
    char why[120];
    snprintf(why, sizeof(why), "(%d stream shards, %d GSI partitions of %s) while %d %s ship",
             shards[victim], gsi[victim], r->m.t[0].name, m, early ? "INSERTs" : "TTL REMOVEs");
    procs_kill9(r, victim, why);
    procs_restart_after(r, victim, rng_range(rng, 200, 2000));
    free(idx);
}

static void sc_backfill(run *r, uint64_t *rng, int n)
{
    char name[48];
    snprintf(name, sizeof(name), "chaos_bf%d", n);
    int items = r->opt->profile_long ? 12000 : 3000;
    int ti = model_add_table(&r->m, name, items, 0);
    if (ti < 0) {
        return;
    }
    run_phase(r, "backfill: creating and filling %s", name);
    int crv = admin_create_table(r, name, NULL);
    if (crv != 0 && crv != LAPSE_EEXISTS) {
        flog_add(r, "cannot create %s", name);
        return;
    }
    admin_fill_table(r, ti, rng);
    /* Before TTL is enabled, nothing can be deleted: extend or remove the
     * TTL of a tenth of the items already due, delete a few. */
    mtable *t = &r->m.t[ti];
    int64_t now = clock_wall_now().ms;
    t->ttl = 1; /* judged as if enabled from here: no delete happened before */
    for (int i = 0; i < items; i++) {
        int64_t due;
        mkey *k = &t->keys[i];
        if (k->ncand == 1 && model_expires(t, &k->cand[0], now, &due) && due < now &&
            rng_next(rng) % 10 == 0) {
            wl_call(r, r->admin, ti, i, rng_next(rng) % 2 ? WK_UPD_TTL : WK_UPD_RM, TC_FUTURE, rng);
        } else if (rng_next(rng) % 50 == 0) {
            wl_call(r, r->admin, ti, i, WK_DELETE, 0, rng);
        }
    }
    /* Enable, and kill a node while it backfills (--ttl-backfill-rate
     * makes the backfill last about items / 3 / rate seconds). */
    run_phase(r, "backfill: enabling TTL on %s", name);
    admin_job j = {r, 1, name, 0, {0}};
    int64_t span = (int64_t)items * 1000 / 3 / CHAOS_BACKFILL_RATE;
    int victim = (int)rng_range(rng, 1, cluster_nodes(r->cl));
    char why[96];
    snprintf(why, sizeof(why), "mid-backfill of %s (%d items)", name, items);
    admin_with_kill(r, &j, victim, rng_range(rng, 20, span > 40 ? span : 40), why);
    procs_restart_after(r, victim, rng_range(rng, 200, 2000));
    admin_resolve_enable(r, ti, &j);
}

static void sc_stop_cont(run *r, uint64_t *rng)
{
    int victim = (int)rng_range(rng, 1, cluster_nodes(r->cl));
    int64_t ms = rng_range(rng, 1000, 4000);
    run_phase(r, "node %d stopped for %" PRId64 " ms", victim, ms);
    if (cluster_kill(r->cl, victim, SIGSTOP) != 0) {
        return;
    }
    procs_injected(r);
    flog_add(r, "SIGSTOP node %d for %" PRId64 " ms", victim, ms);
    clock_sleep_ms(ms);
    cluster_kill(r->cl, victim, SIGCONT);
    flog_add(r, "SIGCONT node %d", victim);
}

/* The primary of chaos_plain partition part in the coordinator's map, or
 * -1 when the map cannot be read. */
static int plain_primary(run *r, uint32_t part)
{
    pmap *pm = NULL;
    char err[256];
    int id = -1;
    if (nodecall_map(cluster_coordinator_url(r->cl), &pm, err, sizeof(err)) == 0) {
        const pmap_table *t = pmap_table_find(pm, r->m.t[1].name);
        const pmap_replicas *rs = t != NULL ? pmap_part(t, part) : NULL;
        id = rs != NULL && rs->n > 0 ? (int)rs->ids[0] : -1;
        pmap_free(pm);
    }
    return id;
}

/* A follower of chaos_plain partition part, drawn at random from the
 * copies other than primary in the coordinator's map; a random node other
 * than primary when the map cannot be read or names no other copy. With
 * four nodes (the move fault) a partition has no copy on one of them, and a
 * cut towards that node would cut no follower off. */
static int draw_follower(run *r, uint64_t *rng, uint32_t part, int primary)
{
    pmap *pm = NULL;
    char err[256];
    uint32_t others[PMAP_MAX_REPLICAS];
    int n = 0;
    if (nodecall_map(cluster_coordinator_url(r->cl), &pm, err, sizeof(err)) == 0) {
        const pmap_table *t = pmap_table_find(pm, r->m.t[1].name);
        const pmap_replicas *rs = t != NULL ? pmap_part(t, part) : NULL;
        for (uint32_t i = 0; rs != NULL && i < rs->n; i++) {
            if ((int)rs->ids[i] != primary) {
                others[n++] = rs->ids[i];
            }
        }
        pmap_free(pm);
    }
    if (n > 0) {
        return (int)others[rng_range(rng, 0, n - 1)];
    }
    int nodes = cluster_nodes(r->cl);
    return (primary - 1 + (int)rng_range(rng, 1, nodes - 1)) % nodes + 1;
}

/* A chaos_plain partition drawn at random into *part, and its primary (a
 * random node when the map cannot be read). */
static int draw_primary(run *r, uint64_t *rng, uint32_t *part)
{
    *part = (uint32_t)rng_range(rng, 0, WL_PARTITIONS - 1);
    int id = plain_primary(r, *part);
    return id >= 1 ? id : (int)rng_range(rng, 1, cluster_nodes(r->cl));
}

/* One look at chaos_plain partition part: the primary that replaced old,
 * logged with the time since t0 (what), or -1 while there is none. */
static int look_promoted(run *r, uint32_t part, int old, int64_t t0, const char *what)
{
    int p = plain_primary(r, part);
    if (p < 1 || p == old) {
        return -1;
    }
    flog_add(r, "%s partition %u promoted on node %d %" PRId64 " ms after the %s", r->m.t[1].name,
             part, p, clock_mono_now().ms - t0, what);
    return p;
}

/* failover-twice: kill -9 the primary of a chaos_plain partition, wait (up
 * to 10 s) until the map names another primary for it, restart the victim
 * and, once every node is UP, kill -9 that new primary, restarted 0.5-2 s
 * later. Its partitions fail over again while the first victim may still be
 * catching up: the second promotion must pick a copy that holds every
 * acknowledged write. With one copy nothing is promoted: the second kill
 * falls on another node after 10 s. */
static void sc_failover_twice(run *r, uint64_t *rng)
{
    uint32_t part;
    int first = draw_primary(r, rng, &part);
    run_phase(r, "failover twice: node %d", first);
    procs_kill9(r, first, "(failover twice: the primary)");
    int64_t t0 = clock_mono_now().ms;
    int second = -1;
    while (second < 0 && clock_mono_now().ms - t0 < 10000) {
        if ((second = look_promoted(r, part, first, t0, "kill")) < 0) {
            clock_sleep_ms(100);
        }
    }
    if (second < 0) {
        second = first % cluster_nodes(r->cl) + 1;
        flog_add(r, "%s partition %u: no promotion seen in 10 s", r->m.t[1].name, part);
    }
    procs_restart(r, first);
    procs_wait_up(r);
    procs_kill9(r, second, "(failover twice: the new primary)");
    procs_restart_after(r, second, rng_range(rng, 500, 2000));
}

/* A client of node id at the address the coordinator's map gives it, or
 * NULL. */
static rpc_client *node_client(run *r, int id)
{
    pmap *pm = NULL;
    char err[256];
    rpc_client *c = NULL;
    if (nodecall_map(cluster_coordinator_url(r->cl), &pm, err, sizeof(err)) == 0) {
        const pmap_node *pn = pmap_node_find(pm, (uint32_t)id);
        if (pn == NULL || rpc_client_open(&c, pn->address, err, sizeof(err)) != 0) {
            c = NULL;
        }
        pmap_free(pm);
    }
    return c;
}

/* etcd-cut: the primary of a chaos_plain partition loses etcd (its switch
 * in r->fault_dir: its etcd client fails every call) while clients, peers
 * and coordinators still reach it. Its lease cannot be renewed: it must
 * stop acknowledging writes and serving strong reads before the lease
 * could expire, and the coordinators promote another copy when it does
 * (up to 10 s is waited for). Meanwhile the register keys are read
 * straight from it every 20 ms, as by a client whose map still names it
 * (reg_read_at): an answer after the promotion would be a stale read,
 * which invariant 8 finds. 0.5-1.5 s after the promotion it reaches etcd
 * again and must rejoin as a follower, its unacknowledged suffix cut. */
static void sc_etcd_cut(run *r, uint64_t *rng)
{
    uint32_t part;
    int victim = draw_primary(r, rng, &part);
    char path[700];
    snprintf(path, sizeof(path), "%s/node%d.cut-etcd", r->fault_dir, victim);
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        flog_add(r, "cannot cut node %d off etcd: %s", victim, path);
        return;
    }
    fclose(f);
    procs_injected(r);
    run_phase(r, "node %d cut off from etcd", victim);
    flog_add(r, "etcd cut off from node %d (primary of %s partition %u); clients still reach it",
             victim, r->m.t[1].name, part);
    rpc_client *vc = node_client(r, victim);
    int64_t t0 = clock_mono_now().ms, next_look = t0;
    int promoted = 0, answered = 0, after = 0;
    int64_t hold_until = INT64_MAX, hold = rng_range(rng, 500, 1500);
    while (clock_mono_now().ms < hold_until && clock_mono_now().ms - t0 < 10000 + hold) {
        int n = vc != NULL ? reg_read_at(r, vc) : 0;
        answered += n;
        after += promoted ? n : 0;
        if (!promoted && clock_mono_now().ms >= next_look) {
            promoted = look_promoted(r, part, victim, t0, "cut") > 0;
            next_look = clock_mono_now().ms + 100;
            hold_until = promoted ? clock_mono_now().ms + hold : INT64_MAX;
        }
        clock_sleep_ms(20);
    }
    if (!promoted) {
        flog_add(r, "%s partition %u: no promotion seen in 10 s", r->m.t[1].name, part);
    }
    flog_add(r,
             "node %d answered %d register reads straight to it during the cut, %d after the "
             "promotion",
             victim, answered, after);
    rpc_client_close(vc);
    remove(path);
    flog_add(r, "etcd reachable again from node %d", victim);
    procs_wait_up(r);
}

/* dir-lost: a node's disk lost. kill -9 of a random node, its data dir
 * removed, and the node restarted on an empty one 0.5-2 s later (one node
 * down at a time, as every fault here). Its base partitions' copies are
 * rebuilt from snapshots of their primaries and rejoin the in-sync sets;
 * its GSI and stream-shard copies, whose sources trimmed records it had
 * acknowledged, know they miss them and refuse reads ("A copy that lost
 * records", docs/replication.md): invariant 9 accepts that refusal from
 * this node only (r->dir_lost). */
static void sc_dir_lost(run *r, uint64_t *rng)
{
    /* One node's disk per run: GSI and stream-shard copies that lost
     * records are not rebuilt yet, so a second node's would leave GSI
     * partitions and shards with no whole copy (three copies on three
     * nodes). Later scenarios lose the same node's disk again. */
    int victim = (int)rng_range(rng, 1, cluster_nodes(r->cl));
    for (int id = 1; id <= cluster_nodes(r->cl) && id <= CLUSTER_MAX_NODES; id++) {
        victim = r->dir_lost[id] ? id : victim;
    }
    run_phase(r, "node %d's data dir lost", victim);
    procs_kill9(r, victim, "(its data dir is lost next)");
    cluster_rm_rf(cluster_data_dir(r->cl, victim));
    r->dir_lost[victim] = 1;
    flog_add(r, "node %d's data dir removed: it comes back empty", victim);
    procs_restart_after(r, victim, rng_range(rng, 500, 2000));
}

/* oneway-cut: the primary of a chaos_plain partition drops every packet it
 * sends to one of its followers (draw_follower) for 2.5-5 s (netns_oneway,
 * an egress filter on its link), while that follower's packets still reach
 * it and the coordinators and clients still reach both. The primary's
 * rounds to the follower time out, so it has the coordinator take the
 * follower out of the in-sync set and writes go on with two copies; healed,
 * the follower is caught up and rejoins. Host-wide, as between real hosts:
 * the etcd member beside the primary drops what it sends the follower's
 * member too (when both hosts have one: the first three). */
static void sc_oneway_cut(run *r, uint64_t *rng)
{
    uint32_t part;
    int primary = draw_primary(r, rng, &part);
    int follower = draw_follower(r, rng, part, primary);
    int64_t ms = rng_range(rng, 2500, 5000);
    run_phase(r, "node %d drops what it sends node %d", primary, follower);
    if (netns_oneway(r->netns, primary, follower) != 0) {
        flog_add(r, "cannot cut node %d off node %d one way (see %s)", primary, follower,
                 r->netns->log_path);
        return;
    }
    procs_injected(r);
    flog_add(r,
             "one-way cut: node %d (primary of %s partition %u) drops what it sends node %d, "
             "for %" PRId64 " ms; node %d's packets still reach it",
             primary, r->m.t[1].name, part, follower, ms, follower);
    clock_sleep_ms(ms);
    for (int attempt = 0; attempt < 5; attempt++) {
        if (netns_oneway(r->netns, primary, 0) == 0) {
            flog_add(r, "one-way cut healed: node %d sends node %d again", primary, follower);
            break;
        }
        clock_sleep_ms(200);
    }
    procs_wait_up(r);
}

/* A network partition: node `victim`'s link goes down inside its namespace
 * for 1.5-6 s (past the coordinator's 3 s DOWN threshold about half the
 * time), cutting it off from the coordinator and every client at once, then
 * comes back up. Calls in flight to it time out and become uncertain; one
 * sent before the cut may still run after the heal (TCP retransmits it). */
static void sc_partition(run *r, uint64_t *rng)
{
    int victim = (int)rng_range(rng, 1, cluster_nodes(r->cl));
    int64_t ms = rng_range(rng, 1500, 6000);
    run_phase(r, "node %d cut off for %" PRId64 " ms", victim, ms);
    if (netns_cut(r->netns, victim, 1) != 0) {
        flog_add(r, "cannot cut node %d off (see %s)", victim, r->netns->log_path);
        return;
    }
    procs_injected(r);
    flog_add(r, "partition: node %d's link down for %" PRId64 " ms", victim, ms);
    clock_sleep_ms(ms);
    if (procs_heal(r, victim) == 0) {
        procs_wait_up(r);
    }
}

/* The long profile's quick faults between scenarios, so that a `make
 * chaos` run injects over a thousand (docs/chaos.md): 3-8 of them, each a
 * kill -9 of any process (coordinator included) restarted 0.1-1 s later
 * when a kill fault was asked for, or a SIGSTOP of a node for 0.2-1 s when
 * stop-cont was. They count in the run's faults but for no kind: each
 * asked kind is proven by its own scenario. Returns at the run's end. */
static void quick_faults(run *r, uint64_t *rng)
{
    unsigned f = r->opt->faults;
    int kills = (f & (CHAOS_FAULT_NODE_KILL | CHAOS_FAULT_DEST_KILL | CHAOS_FAULT_COORD_KILL)) != 0;
    int stops = (f & CHAOS_FAULT_STOP_CONT) != 0;
    unsigned kind = r->fault_kind;
    r->fault_kind = 0;
    for (int64_t q = rng_range(rng, 3, 8); (kills || stops) && q > 0; q--) {
        if (clock_mono_now().ms + 3000 >= r->end_mono_ms || atomic_load(&r->stop)) {
            break;
        }
        clock_sleep_ms(rng_range(rng, 0, 400));
        if (kills && (!stops || rng_next(rng) % 3 != 0)) {
            int victim = (int)rng_range(rng, 0, procs_count(r) - 1);
            procs_kill9(r, victim, "(repeated kills)");
            procs_restart_after(r, victim, rng_range(rng, 100, 1000));
            continue;
        }
        int victim = (int)rng_range(rng, 1, cluster_nodes(r->cl));
        int64_t ms = rng_range(rng, 200, 1000);
        if (cluster_kill(r->cl, victim, SIGSTOP) == 0) {
            procs_injected(r);
            flog_add(r, "SIGSTOP node %d for %" PRId64 " ms (repeated stops)", victim, ms);
            clock_sleep_ms(ms);
            cluster_kill(r->cl, victim, SIGCONT);
            flog_add(r, "SIGCONT node %d", victim);
        }
    }
    r->fault_kind = kind;
}

/* ============================== the driver ============================== */

enum {
    SC_MASS,
    SC_DEST,
    SC_BACKFILL,
    SC_CREATE,
    SC_TTLPROP,
    SC_STOP,
    SC_PARTITION,
    SC_ETCD,
    SC_COORD_STOP,
    SC_TWICE,
    SC_ETCD_CUT,
    SC_DIR_LOST,
    SC_ONEWAY,
    SC_MOVE,
    SC_COUNT
};

/* The CHAOS_FAULT_* kinds asked for that scenario sc's faults prove. */
static unsigned scenario_kind(const run *r, int sc)
{
    static const unsigned kinds[SC_COUNT] = {
        [SC_MASS] = CHAOS_FAULT_NODE_KILL,
        [SC_DEST] = CHAOS_FAULT_DEST_KILL,
        [SC_BACKFILL] = CHAOS_FAULT_BACKFILL_KILL,
        /* On etcd the victim is the leader: a coordinator kill either way. */
        [SC_CREATE] = CHAOS_FAULT_COORD_KILL | CHAOS_FAULT_LEADER_KILL,
        [SC_TTLPROP] = CHAOS_FAULT_COORD_KILL | CHAOS_FAULT_LEADER_KILL,
        [SC_STOP] = CHAOS_FAULT_STOP_CONT,
        [SC_PARTITION] = CHAOS_FAULT_PARTITION,
        [SC_ETCD] = CHAOS_FAULT_ETCD_KILL,
        [SC_COORD_STOP] = CHAOS_FAULT_COORD_STOP,
        [SC_TWICE] = CHAOS_FAULT_FAILOVER_TWICE,
        [SC_ETCD_CUT] = CHAOS_FAULT_ETCD_CUT,
        [SC_DIR_LOST] = CHAOS_FAULT_DIR_LOST,
        [SC_ONEWAY] = CHAOS_FAULT_ONEWAY_CUT,
        [SC_MOVE] = CHAOS_FAULT_MOVE,
    };
    return kinds[sc] & r->opt->faults;
}

int faults_run(run *r)
{
    uint64_t rng = r->seed ^ 0xfa175eedULL;
    int list[SC_COUNT], n = 0, ran = 0;
    unsigned f = r->opt->faults;
    if (f & CHAOS_FAULT_NODE_KILL) {
        list[n++] = SC_MASS;
    }
    if (f & CHAOS_FAULT_DEST_KILL) {
        list[n++] = SC_DEST;
    }
    if (f & CHAOS_FAULT_BACKFILL_KILL) {
        list[n++] = SC_BACKFILL;
    }
    if (f & (CHAOS_FAULT_COORD_KILL | CHAOS_FAULT_LEADER_KILL)) {
        list[n++] = SC_CREATE; /* on etcd, the victim is the leader */
        list[n++] = SC_TTLPROP;
    }
    if ((f & CHAOS_FAULT_ETCD_KILL) && cluster_etcd(r->cl) != NULL) {
        list[n++] = SC_ETCD;
    }
    if ((f & CHAOS_FAULT_COORD_STOP) && cluster_etcd(r->cl) != NULL) {
        list[n++] = SC_COORD_STOP;
    }
    if (f & CHAOS_FAULT_STOP_CONT) {
        list[n++] = SC_STOP;
    }
    if (f & CHAOS_FAULT_FAILOVER_TWICE) {
        list[n++] = SC_TWICE;
    }
    if ((f & CHAOS_FAULT_ETCD_CUT) && r->fault_dir[0] != '\0') {
        list[n++] = SC_ETCD_CUT;
    }
    if ((f & CHAOS_FAULT_PARTITION) && r->netns != NULL) {
        list[n++] = SC_PARTITION;
    }
    if ((f & CHAOS_FAULT_DIR_LOST) && r->opt->replication >= 2) {
        list[n++] = SC_DIR_LOST;
    }
    if ((f & CHAOS_FAULT_ONEWAY_CUT) && r->netns != NULL && r->opt->replication >= 2) {
        list[n++] = SC_ONEWAY;
    }
    if (f & CHAOS_FAULT_MOVE) {
        list[n++] = SC_MOVE;
    }
    for (int i = n - 1; i > 0; i--) { /* seeded shuffle */
        int j = (int)rng_range(&rng, 0, i);
        int t = list[i];
        list[i] = list[j];
        list[j] = t;
    }
    if (r->opt->idle & CHAOS_IDLE_FAULTS) {
        n = 0; /* a run that must fail for lack of faults (chaos_plant_test) */
    }
    /* A scenario needs up to about 6 s; do not start one that would overrun.
     * Every asked kind must inject a fault (check_activity): when they have
     * not all been by the end, the run goes on, scenarios in the same order,
     * for up to FAULTS_OVERRUN_MS more. */
    int extended = 0;
    while (!atomic_load(&r->stop) &&
           (clock_mono_now().ms + 6000 < r->end_mono_ms ||
            (n > 0 && faults_missing(r) != 0 &&
             clock_mono_now().ms + 6000 < r->end_mono_ms + FAULTS_OVERRUN_MS) ||
            (n > 0 && r->opt->profile_long && atomic_load(&r->faults) < FAULTS_LONG_MIN &&
             clock_mono_now().ms + 6000 < r->end_mono_ms + FAULTS_COUNT_OVERRUN_MS))) {
        procs_check_crashes(r);
        if (n == 0) {
            run_phase(r, "workload only (no faults)");
            clock_sleep_ms(200);
            continue;
        }
        if (!extended && clock_mono_now().ms + 6000 >= r->end_mono_ms) {
            if (faults_missing(r) != 0) {
                flog_add(r,
                         "workload extended: a kind of fault asked for (mask 0x%x) injected none "
                         "yet",
                         faults_missing(r));
            } else {
                flog_add(r,
                         "workload extended: %d faults injected, fewer than the long "
                         "profile's %d",
                         atomic_load(&r->faults), FAULTS_LONG_MIN);
            }
            extended = 1;
        }
        int sc = r->opt->profile_long ? list[rng_range(&rng, 0, n - 1)] : list[ran % n];
        r->fault_kind = scenario_kind(r, sc);
        switch (sc) {
        case SC_MASS:
            sc_mass_expiry(r, &rng, ran);
            break;
        case SC_DEST:
            sc_dest_kill(r, &rng, ran);
            break;
        case SC_BACKFILL:
            sc_backfill(r, &rng, ran);
            break;
        case SC_CREATE:
            faults_coord_create(r, &rng, ran);
            break;
        case SC_TTLPROP:
            faults_coord_ttl(r, &rng, ran);
            break;
        case SC_PARTITION:
            sc_partition(r, &rng);
            break;
        case SC_ETCD:
            faults_coord_etcd_kill(r, &rng, ran);
            break;
        case SC_COORD_STOP:
            faults_coord_stop(r, &rng, ran);
            break;
        case SC_TWICE:
            sc_failover_twice(r, &rng);
            break;
        case SC_ETCD_CUT:
            sc_etcd_cut(r, &rng);
            break;
        case SC_DIR_LOST:
            sc_dir_lost(r, &rng);
            break;
        case SC_ONEWAY:
            sc_oneway_cut(r, &rng);
            break;
        case SC_MOVE:
            faults_move(r, &rng);
            break;
        default:
            sc_stop_cont(r, &rng);
            break;
        }
        ran++;
        if (r->opt->profile_long) {
            quick_faults(r, &rng);
        }
        r->fault_kind = 0;
        run_phase(r, "between faults");
        clock_sleep_ms(rng_range(&rng, 200, 1200));
    }
    faults_move_end(r);
    run_phase(r, "workload ending");
    sleep_until(r->end_mono_ms);
    return ran;
}
