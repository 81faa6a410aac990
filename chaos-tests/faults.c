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
#include "../tests/etcd_members.h"
#include "workload.h"

/* Keys per mass-expiry burst and burst slots in table 0 (chaos.c sizes it). */
int faults_burst_keys(const chaos_opts *o)
{
    return o->profile_long ? 2000 : 600;
}

/* ============================== helpers ============================== */

/* Processes: the coordinators (0, and after the nodes on etcd), the nodes. */
static int nprocs(run *r)
{
    return cluster_nodes(r->cl) + cluster_coordinators(r->cl);
}

static void pname(run *r, int idx, char *buf, size_t len)
{
    if (idx == 0) {
        snprintf(buf, len, "coordinator");
    } else if (idx > cluster_nodes(r->cl)) {
        snprintf(buf, len, "coordinator %d", idx - cluster_nodes(r->cl) + 1);
    } else {
        snprintf(buf, len, "node %d", idx);
    }
}

/* The coordinator to kill: the one that leads (on etcd), else the one. */
static int coord_victim(run *r)
{
    int idx = cluster_etcd(r->cl) != NULL ? cluster_leader(r->cl, -1, 5000) : 0;
    return idx >= 0 ? idx : 0;
}

static void sleep_until(int64_t mono)
{
    int64_t d = mono - clock_mono_now().ms;
    if (d > 0) {
        clock_sleep_ms(d);
    }
}

/* Counts one injected fault, for the running scenario's kinds too. */
static void injected(run *r)
{
    atomic_fetch_add(&r->faults, 1);
    for (int b = 0; b < CHAOS_FAULT_KINDS; b++) {
        if (r->fault_kind & (1u << b)) {
            atomic_fetch_add(&r->kind_faults[b], 1);
        }
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

static void kill9(run *r, int idx, const char *why)
{
    char n[32];
    pname(r, idx, n, sizeof(n));
    if (cluster_kill(r->cl, idx, SIGKILL) == 0) {
        injected(r);
        flog_add(r, "kill -9 %s %s", n, why);
    }
}

static void wait_up(run *r)
{
    if (cluster_wait_up(r->cl, cluster_nodes(r->cl), 20000) != 0) {
        flog_add(r, "cluster not all UP 20 s after a restart");
    }
}

static void restart(run *r, int idx)
{
    char n[32];
    pname(r, idx, n, sizeof(n));
    if (cluster_pid(r->cl, idx) == 0) {
        if (cluster_restart(r->cl, idx) == 0) {
            flog_add(r, "restart %s", n);
        } else {
            flog_add(r, "cannot restart %s", n);
        }
    }
}

static void restart_after(run *r, int idx, int64_t delay_ms)
{
    run_phase(r, "process %d down for %" PRId64 " ms", idx, delay_ms);
    clock_sleep_ms(delay_ms);
    restart(r, idx);
    wait_up(r);
}

int faults_check_crashes(run *r)
{
    int *seen = r->crashes_seen;
    int found = 0;
    for (int i = 0; i < nprocs(r); i++) {
        int n = cluster_crash_count(r->cl, i);
        if (n > seen[i]) {
            char nm[32];
            pname(r, i, nm, sizeof(nm));
            int st = cluster_exit_status(r->cl, i);
            flog_add(r, "CRASH: %s exited on its own (%s %d); see %s", nm,
                     WIFSIGNALED(st) ? "signal" : "status",
                     WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), cluster_log_path(r->cl, i));
            atomic_fetch_add(&r->crashes, n - seen[i]);
            found += n - seen[i];
            seen[i] = n;
            restart(r, i);
        }
    }
    return found;
}

/* Brings node's link back up, retrying: a link left down would fail the
 * whole run for the wrong reason. Returns 0 or -1. */
static int heal(run *r, int node)
{
    for (int attempt = 0; attempt < 5; attempt++) {
        if (netns_cut(r->netns, node, 0) == 0) {
            flog_add(r, "heal: node %d's link is up again", node);
            return 0;
        }
        clock_sleep_ms(200);
    }
    flog_add(r, "cannot heal node %d (see %s)", node, r->netns->log_path);
    return -1;
}

int faults_restore(run *r)
{
    faults_check_crashes(r);
    for (int i = 1; r->netns != NULL && i <= NETNS_NODES; i++) {
        if (r->netns->cut[i]) {
            heal(r, i);
        }
    }
    for (int i = 0; i < nprocs(r); i++) {
        if (cluster_pid(r->cl, i) > 0) {
            cluster_kill(r->cl, i, SIGCONT);
        } else {
            restart(r, i);
        }
    }
    etcd_members *m = cluster_etcd(r->cl);
    for (int i = 0; m != NULL && i < etcd_members_count(m); i++) {
        if (etcd_members_pid(m, i) == 0 && etcd_members_restart(m, i, 15000) != 0) {
            flog_add(r, "etcd member %d did not come back healthy in 15 s", i);
        }
    }
    return cluster_wait_up(r->cl, cluster_nodes(r->cl), 30000);
}

/* ========================== admin calls ========================== */

int faults_create_table(run *r, const char *name, int *first_rv)
{
    lapse_table_def d = {0};
    d.name = name;
    d.partition_key = "Id";
    d.partition_key_type = 'S';
    d.partitions = WL_PARTITIONS;
    return faults_create_def(r, &d, first_rv);
}

int faults_create_def(run *r, const lapse_table_def *d, int *first_rv)
{
    int rv = 0;
    int64_t deadline = clock_mono_now().ms + 30000;
    while (clock_mono_now().ms < deadline) {
        lapse_error e = {0};
        rv = lapse_create_table(r->admin, d, &e);
        atomic_fetch_add(&r->ops[OP_ADMIN], 1);
        if (first_rv != NULL) {
            *first_rv = rv;
            first_rv = NULL;
        }
        if (rv == 0 || rv == LAPSE_EEXISTS) {
            return rv;
        }
        clock_sleep_ms(200);
    }
    return rv;
}

int faults_enable_ttl(run *r, const char *table, int timeout_ms)
{
    lapse_ttl_spec spec = {0};
    spec.action = LAPSE_TTL_ENABLE;
    spec.attribute = MODEL_TTL_ATTR;
    int rv = 0;
    int64_t deadline = clock_mono_now().ms + timeout_ms;
    while (clock_mono_now().ms < deadline) {
        lapse_error e = {0};
        rv = lapse_update_ttl(r->admin, table, &spec, NULL, &e);
        atomic_fetch_add(&r->ops[OP_ADMIN], 1);
        if (rv == 0 || (rv == LAPSE_ESTATE && strstr(e.message, "already enabled") != NULL)) {
            return 0;
        }
        clock_sleep_ms(200);
    }
    return rv;
}

/* An admin call on a helper thread, so the main thread can kill the
 * coordinator while it is in flight. */
typedef struct admin_job {
    run *r;
    int enable; /* 0: CreateTable, 1: UpdateTimeToLive(ENABLE) */
    const char *table;
    int rv;
    lapse_error e;
} admin_job;

static void *admin_thread(void *p)
{
    admin_job *j = p;
    if (j->enable) {
        lapse_ttl_spec spec = {0};
        spec.action = LAPSE_TTL_ENABLE;
        spec.attribute = MODEL_TTL_ATTR;
        j->rv = lapse_update_ttl(j->r->admin, j->table, &spec, NULL, &j->e);
    } else {
        lapse_table_def d = {0};
        d.name = j->table;
        d.partition_key = "Id";
        d.partition_key_type = 'S';
        d.partitions = WL_PARTITIONS;
        j->rv = lapse_create_table(j->r->admin, &d, &j->e);
    }
    atomic_fetch_add(&j->r->ops[OP_ADMIN], 1);
    return NULL;
}

/* Starts j on a thread, kills `victim` after delay_ms, joins. */
/* Runs j's call on a thread of its own and, delay_ms into it, fault(r,
 * arg) on this one; returns when both are done. Without a thread the call
 * runs alone, without the fault. */
static void admin_with(run *r, admin_job *j, int64_t delay_ms, void (*fault)(run *, void *),
                       void *arg)
{
    pthread_t th;
    if (pthread_create(&th, NULL, admin_thread, j) != 0) {
        admin_thread(j);
        return;
    }
    clock_sleep_ms(delay_ms);
    fault(r, arg);
    pthread_join(th, NULL);
}

typedef struct kill_fault {
    int victim;
    const char *why;
    int64_t delay_ms;
} kill_fault;

static void do_kill9(run *r, void *arg)
{
    const kill_fault *k = arg;
    char buf[160];
    snprintf(buf, sizeof(buf), "%.100s (%" PRId64 " ms after the call)", k->why, k->delay_ms);
    kill9(r, k->victim, buf);
}

static void admin_with_kill(run *r, admin_job *j, int victim, int64_t delay_ms, const char *why)
{
    kill_fault k = {victim, why, delay_ms};
    admin_with(r, j, delay_ms, do_kill9, &k);
}

/* After a killed UpdateTimeToLive(ENABLE): an acknowledged one must stick
 * by itself (settle then only waits for ENABLED); a failed one is retried. */
static void resolve_enable(run *r, int ti, const admin_job *j)
{
    mtable *t = &r->m.t[ti];
    if (j->rv == 0) {
        t->ttl_resolved = 1;
        flog_add(r, "UpdateTimeToLive(ENABLE) on %s was acknowledged", t->name);
    } else if (faults_enable_ttl(r, t->name, 20000) == 0) {
        t->ttl_resolved = 1;
        flog_add(r, "UpdateTimeToLive(ENABLE) on %s failed (%s); retried until applied", t->name,
                 lapse_strerror(j->rv));
    } else {
        flog_add(r, "TTL enable on %s not resolved yet (settle retries)", t->name);
    }
}

/* Fills model table ti (all its keys) with random TTL classes. */
static void fill_table(run *r, int ti, uint64_t *rng)
{
    int n = r->m.t[ti].nkeys;
    int *idx = malloc(sizeof(int) * (size_t)n);
    if (idx == NULL) {
        return;
    }
    for (int i = 0; i < n; i++) {
        idx[i] = i;
    }
    wl_batch_put(r, r->admin, ti, idx, n, 0, rng);
    free(idx);
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
    int crv = faults_create_table(r, name, NULL);
    if ((crv != 0 && crv != LAPSE_EEXISTS) || faults_enable_ttl(r, name, 20000) != 0) {
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
    kill9(r, victim, why);
    restart_after(r, victim, rng_range(rng, 200, 2000));
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
    kill9(r, victim, why);
    restart_after(r, victim, rng_range(rng, 200, 2000));
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
    int crv = faults_create_table(r, name, NULL);
    if (crv != 0 && crv != LAPSE_EEXISTS) {
        flog_add(r, "cannot create %s", name);
        return;
    }
    fill_table(r, ti, rng);
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
    restart_after(r, victim, rng_range(rng, 200, 2000));
    resolve_enable(r, ti, &j);
}

static void resolve_create(run *r, mcreated *mc, const admin_job *j);
static mcreated *new_created(run *r, const char *prefix, int n);

static void sc_coord_create(run *r, uint64_t *rng, int n)
{
    mcreated *mc = new_created(r, "chaos_ct", n);
    if (mc == NULL) {
        return;
    }
    run_phase(r, "create-table %s while killing the coordinator", mc->name);
    admin_job j = {r, 0, mc->name, 0, {0}};
    /* Mostly before the reply (the call fails), sometimes just after it. */
    int64_t delay = rng_next(rng) % 3 != 0 ? rng_range(rng, 0, 6) : rng_range(rng, 6, 30);
    int victim = coord_victim(r);
    admin_with_kill(r, &j, victim, delay, "during CreateTable");
    restart_after(r, victim, rng_range(rng, 200, 1500));
    resolve_create(r, mc, &j);
}

/* After a CreateTable cut off by a fault: the first retry tells, "exists"
 * if the cut-off call applied, success if it did not (a lost acknowledged
 * create is a violation). */
static void resolve_create(run *r, mcreated *mc, const admin_job *j)
{
    mc->acked = j->rv == 0;
    int first = -1;
    int rv = faults_create_table(r, mc->name, &first);
    mc->exists = rv == 0 || rv == LAPSE_EEXISTS;
    mc->recreated = first == 0;
    flog_add(r, "CreateTable %s %s; the retry after the restart said %s", mc->name,
             mc->acked ? "was acknowledged" : "failed or timed out",
             first == 0 ? "created" : lapse_strerror(first));
}

static void sc_coord_ttl(run *r, uint64_t *rng, int n)
{
    char name[48];
    snprintf(name, sizeof(name), "chaos_pr%d", n);
    int ti = model_add_table(&r->m, name, 400, 0);
    if (ti < 0) {
        return;
    }
    run_phase(r, "TTL enable on %s while killing the coordinator", name);
    int crv = faults_create_table(r, name, NULL);
    if (crv != 0 && crv != LAPSE_EEXISTS) {
        flog_add(r, "cannot create %s", name);
        return;
    }
    fill_table(r, ti, rng);
    r->m.t[ti].ttl = 1;
    admin_job j = {r, 1, name, 0, {0}};
    int victim = coord_victim(r);
    admin_with_kill(r, &j, victim, rng_range(rng, 0, 12), "during UpdateTimeToLive propagation");
    restart_after(r, victim, rng_range(rng, 200, 1500));
    resolve_enable(r, ti, &j);
}

/* A new created-table record, or NULL when the model is full. */
static mcreated *new_created(run *r, const char *prefix, int n)
{
    if (r->m.ncreated >= MODEL_MAX_CREATED) {
        return NULL;
    }
    mcreated *mc = &r->m.created[r->m.ncreated++];
    snprintf(mc->name, sizeof(mc->name), "%s%d", prefix, n);
    return mc;
}

typedef struct etcd_fault {
    etcd_members *m;
    int member;
} etcd_fault;

static void do_etcd_kill(run *r, void *arg)
{
    const etcd_fault *f = arg;
    if (etcd_members_kill(f->m, f->member, SIGKILL) == 0) {
        injected(r);
        flog_add(r, "kill -9 etcd member %d during CreateTable", f->member);
    }
}

/* kill -9 of an etcd member while a create-table runs; it comes back after
 * a while. One member of three: everything must go on. */
static void sc_etcd_kill(run *r, uint64_t *rng, int n)
{
    etcd_members *m = cluster_etcd(r->cl);
    mcreated *mc = m != NULL ? new_created(r, "chaos_ek", n) : NULL;
    if (mc == NULL) {
        return;
    }
    int member = (int)rng_range(rng, 0, etcd_members_count(m) - 1);
    run_phase(r, "create-table %s while killing etcd member %d", mc->name, member);
    admin_job j = {r, 0, mc->name, 0, {0}};
    etcd_fault f = {m, member};
    admin_with(r, &j, rng_range(rng, 0, 10), do_etcd_kill, &f);
    clock_sleep_ms(rng_range(rng, 200, 1500));
    if (etcd_members_restart(m, member, 15000) == 0) {
        flog_add(r, "restart etcd member %d", member);
    } else {
        flog_add(r, "etcd member %d did not come back healthy in 15 s", member);
    }
    resolve_create(r, mc, &j);
}

typedef struct stop_fault {
    int victim;
    int64_t ms;
} stop_fault;

static void do_stop(run *r, void *arg)
{
    const stop_fault *f = arg;
    if (cluster_kill(r->cl, f->victim, SIGSTOP) == 0) {
        injected(r);
        flog_add(r, "SIGSTOP the leading coordinator (process %d) for %" PRId64 " ms", f->victim,
                 f->ms);
    }
    clock_sleep_ms(f->ms);
    cluster_kill(r->cl, f->victim, SIGCONT);
    flog_add(r, "SIGCONT process %d", f->victim);
}

/* SIGSTOP of the leading coordinator past its 2 s lease while a
 * create-table runs, then SIGCONT: another leads meanwhile, and the stalled
 * one must write nothing when it resumes. */
static void sc_coord_stop(run *r, uint64_t *rng, int n)
{
    mcreated *mc = cluster_etcd(r->cl) != NULL ? new_created(r, "chaos_cs", n) : NULL;
    if (mc == NULL) {
        return;
    }
    int victim = coord_victim(r);
    int64_t ms = rng_range(rng, 2500, 4500);
    run_phase(r, "create-table %s with the leading coordinator stopped %" PRId64 " ms", mc->name,
              ms);
    admin_job j = {r, 0, mc->name, 0, {0}};
    stop_fault f = {victim, ms};
    admin_with(r, &j, rng_range(rng, 0, 10), do_stop, &f);
    resolve_create(r, mc, &j);
}

static void sc_stop_cont(run *r, uint64_t *rng)
{
    int victim = (int)rng_range(rng, 1, cluster_nodes(r->cl));
    int64_t ms = rng_range(rng, 1000, 4000);
    run_phase(r, "node %d stopped for %" PRId64 " ms", victim, ms);
    if (cluster_kill(r->cl, victim, SIGSTOP) != 0) {
        return;
    }
    injected(r);
    flog_add(r, "SIGSTOP node %d for %" PRId64 " ms", victim, ms);
    clock_sleep_ms(ms);
    cluster_kill(r->cl, victim, SIGCONT);
    flog_add(r, "SIGCONT node %d", victim);
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
    injected(r);
    flog_add(r, "partition: node %d's link down for %" PRId64 " ms", victim, ms);
    clock_sleep_ms(ms);
    if (heal(r, victim) == 0) {
        wait_up(r);
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
            int victim = (int)rng_range(rng, 0, nprocs(r) - 1);
            kill9(r, victim, "(repeated kills)");
            restart_after(r, victim, rng_range(rng, 100, 1000));
            continue;
        }
        int victim = (int)rng_range(rng, 1, cluster_nodes(r->cl));
        int64_t ms = rng_range(rng, 200, 1000);
        if (cluster_kill(r->cl, victim, SIGSTOP) == 0) {
            injected(r);
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
    if ((f & CHAOS_FAULT_PARTITION) && r->netns != NULL) {
        list[n++] = SC_PARTITION;
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
             clock_mono_now().ms + 6000 < r->end_mono_ms + FAULTS_OVERRUN_MS))) {
        faults_check_crashes(r);
        if (n == 0) {
            run_phase(r, "workload only (no faults)");
            clock_sleep_ms(200);
            continue;
        }
        if (!extended && clock_mono_now().ms + 6000 >= r->end_mono_ms) {
            flog_add(r,
                     "workload extended: a kind of fault asked for (mask 0x%x) injected none yet",
                     faults_missing(r));
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
            sc_coord_create(r, &rng, ran);
            break;
        case SC_TTLPROP:
            sc_coord_ttl(r, &rng, ran);
            break;
        case SC_PARTITION:
            sc_partition(r, &rng);
            break;
        case SC_ETCD:
            sc_etcd_kill(r, &rng, ran);
            break;
        case SC_COORD_STOP:
            sc_coord_stop(r, &rng, ran);
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
    run_phase(r, "workload ending");
    sleep_until(r->end_mono_ms);
    return ran;
}
