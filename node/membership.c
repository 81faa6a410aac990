/*
 * membership.c: register, heartbeat, pull newer maps (contract and state
 * diagram in membership.h).
 */
#include "membership.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../common/arena.h"
#include "../common/clock.h"
#include "../common/lapse_err.h"
#include "../common/log.h"
#include "../partition/apply.h"
#include "../partition/replog.h"
#include "copydrop.h"
#include "logship.h"
#include "maps.h"
#include "newcopy.h"
#include "peerclock.h"
#include "registry.h"

/* Sleeps until ms have passed, node_close asks us to stop, or
 * membership_heartbeat_soon asks for a heartbeat now. Returns 1 when
 * stopping. */
static int wait_or_stop(node_server *ns, int64_t ms)
{
    struct timespec ts = clock_mono_abstime(ms);
    pthread_mutex_lock(&ns->stop_lock);
    while (!ns->stopping && !ns->heartbeat_soon) {
        if (pthread_cond_timedwait(&ns->stop_cond, &ns->stop_lock, &ts) == ETIMEDOUT) {
            break;
        }
    }
    ns->heartbeat_soon = 0;
    int stop = ns->stopping;
    pthread_mutex_unlock(&ns->stop_lock);
    return stop;
}

void membership_heartbeat_soon(node_server *ns)
{
    pthread_mutex_lock(&ns->stop_lock);
    ns->heartbeat_soon = 1;
    pthread_cond_broadcast(&ns->stop_cond);
    pthread_mutex_unlock(&ns->stop_lock);
}

static int stopping(node_server *ns)
{
    pthread_mutex_lock(&ns->stop_lock);
    int stop = ns->stopping;
    pthread_mutex_unlock(&ns->stop_lock);
    return stop;
}

/* RegisterNode; on success applies the map it returns. */
static int register_node(node_server *ns, char *err, size_t errlen)
{
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__RegisterNodeRequest body = LAPSE__REGISTER_NODE_REQUEST__INIT;
    Lapse__Response *resp = NULL;
    body.node_id = ns->id;
    body.address = ns->advertise_url;
    body.incarnation = ns->incarnation;
    body.zone = ns->zone;
    req.body_case = LAPSE__REQUEST__BODY_REGISTER_NODE;
    req.register_node = &body;
    req.pmap_version = maps_version(ns);
    int rv = rpc_call(ns->coord, &req, MEMBERSHIP_CALL_TIMEOUT_MS, &resp, err, errlen);
    if (rv == 0 && resp->body_case == LAPSE__RESPONSE__BODY_REGISTER_NODE &&
        resp->register_node != NULL && resp->register_node->map != NULL) {
        char why[256] = "";
        int arv = maps_apply_pb(ns, resp->register_node->map, NULL, why, sizeof(why));
        if (arv != 0) {
            /* Registered all the same; the next heartbeat pulls the map. */
            log_warn("applying the map from RegisterNode failed: %s", why);
        }
    }
    rpc_response_free(resp);
    return rv;
}

/* Heartbeat, carrying our TTL progress and clock verdict; *coord_version
 * receives the coordinator's map version. The reply's clock gives the skew
 * (expiry_engine_clock_report pauses or resumes the scanners); without a reply the
 * last verdict stands. */
/* The tables whose GSI or stream copies here are filling, into body
 * (newcopy.h): a move lets a copy it added be read only once they are not. */
static void report_filling(node_server *ns, arena *a, Lapse__HeartbeatRequest *body)
{
    node_map *m = maps_acquire(ns);
    size_t max = m->pm->ntables;
    uint32_t *ids = max > 0 ? arena_alloc(a, max * sizeof(*ids)) : NULL;
    if (max == 0 || ids != NULL) {
        body->n_filling_tables = newcopy_filling(ns, m->pm, ids, max, &body->filled_version);
        body->filling_tables = ids;
    } /* out of memory: no version, so no copy counts as whole */
    maps_release(m);
}

static int heartbeat(node_server *ns, uint64_t *coord_version, char *err, size_t errlen)
{
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__HeartbeatRequest body = LAPSE__HEARTBEAT_REQUEST__INIT;
    Lapse__Response *resp = NULL;
    arena a;
    arena_init(&a);
    body.node_id = ns->id;
    body.pmap_version = maps_version(ns);
    if (ns->ttl != NULL) {
        int64_t skew = 0;
        body.ttl_paused_for_clock =
            expiry_engine_clock(ns->ttl, &skew) == EXPIRY_ENGINE_CLOCK_SKEWED;
        body.clock_skew_ms = skew;
        if (expiry_engine_progress_pb(ns->ttl, &a, &body.ttl, &body.n_ttl) != 0) {
            body.ttl = NULL; /* out of memory: the next heartbeat reports it */
            body.n_ttl = 0;
        }
    }
    if (ns->logship != NULL &&
        logship_lag_pb(ns->logship, &a, &body.replica_lag, &body.n_replica_lag) != 0) {
        body.replica_lag = NULL; /* out of memory: the next heartbeat reports it */
        body.n_replica_lag = 0;
    }
    report_filling(ns, &a, &body);
    body.clock_ms = clock_wall_now().ms;
    req.body_case = LAPSE__REQUEST__BODY_HEARTBEAT;
    req.heartbeat = &body;
    req.pmap_version = body.pmap_version;
    int64_t sent_ms = body.clock_ms;
    int64_t sent_mono = clock_mono_now().ms;
    int rv = rpc_call(ns->coord, &req, MEMBERSHIP_CALL_TIMEOUT_MS, &resp, err, errlen);
    *coord_version = 0;
    if (rv == 0) {
        if (resp->body_case == LAPSE__RESPONSE__BODY_HEARTBEAT && resp->heartbeat != NULL) {
            *coord_version = resp->heartbeat->pmap_version;
            if (resp->heartbeat->clock_ms != 0) {
                /* skew = our clock - (coordinator's reading + RTT/2): the
                 * coordinator read its clock about half-way through. */
                int64_t rtt = clock_mono_now().ms - sent_mono;
                int64_t skew = sent_ms + rtt - (resp->heartbeat->clock_ms + rtt / 2);
                atomic_store(&ns->clock_skew_ms, (long long)skew);
                if (ns->ttl != NULL) {
                    expiry_engine_clock_report(ns->ttl, skew, rtt);
                }
            }
        } else {
            *coord_version = resp->pmap_version;
        }
    }
    rpc_response_free(resp);
    arena_fini(&a);
    return rv;
}

/* While no coordinator answers: the clock check against the other nodes
 * (peerclock.h), and the map the coordinators stored in etcd (with --etcd),
 * so a node that restarts during their outage still learns what changed
 * while it was away and its scanners run. */
static void without_coordinator(node_server *ns, peerclock *pc, int *warned)
{
    char err[512] = "";
    int rv = registry_fetch_map(ns, err, sizeof(err));
    if (rv != 0 && rv != LAPSE_ENOTFOUND && !*warned) {
        log_warn("cannot read the partition map from etcd either: %s: %s", lapse_strerror(rv), err);
    }
    *warned = rv != 0 && rv != LAPSE_ENOTFOUND;
    peerclock_check(ns, pc);
}

/* Drops the copies that left their sets a while ago (copydrop.h), once a
 * fetch of the coordinator's map confirms they are still out: the keys
 * first, then the mark that refuses a snapshot begun before (a snapshot
 * whose reset came in between loses no part unnoticed). */
static void drop_former_copies(node_server *ns)
{
    if (!copydrop_due(ns)) {
        return;
    }
    char err[256] = "";
    int rv = maps_refresh(ns, clock_mono_now().ms + MAPS_FETCH_TIMEOUT_MS, 0, err, sizeof(err));
    if (rv != 0) {
        copydrop_postpone(ns);
        log_info("dropping former copies waits: fetching the map failed: %s: %s",
                 lapse_strerror(rv), err);
        return;
    }
    node_map *m = maps_acquire(ns);
    copydrop_copy c;
    while (copydrop_take_due(ns, m->pm, &c)) {
        const pmap_table *t = pmap_table_find_id(m->pm, c.table_id);
        const char *what = c.kind == COPYDROP_BASE    ? "partition"
                           : c.kind == COPYDROP_SHARD ? "stream shard"
                                                      : "GSI partition";
        if (c.kind == COPYDROP_BASE) {
            rv = replog_reset(ns->st, c.table_id, c.part, err, sizeof(err));
        } else if (c.kind >= 0 && (uint32_t)c.kind >= t->schema.ngsi) {
            continue; /* no such GSI: nothing of it here */
        } else {
            uint32_t index_id = c.kind >= 0 ? t->schema.gsi[c.kind].id : 0;
            rv = apply_drop_copy(ns->st, c.table_id, index_id, c.part, err, sizeof(err));
        }
        if (rv != 0) {
            log_error("table %u %s %u: dropping this node's former copy failed: %s: %s",
                      (unsigned)c.table_id, what, (unsigned)c.part, lapse_strerror(rv), err);
            continue;
        }
        if (c.kind == COPYDROP_BASE) {
            logship_copy_dropped(ns->logship, c.table_id, c.part);
        }
        atomic_fetch_add(&ns->copies_dropped, 1);
        log_info("table %u %s %u: this node's copy left its list (map version %llu): its keys "
                 "were dropped",
                 (unsigned)c.table_id, what, (unsigned)c.part, (unsigned long long)m->pm->version);
    }
    maps_release(m);
}

/* The membership thread's state from step to step. */
typedef struct run_state {
    node_server *ns;
    char err[512];
    int64_t backoff_ms; /* the wait before the next try to register */
    int warned;         /* logged the current outage already */
    int warned_rv;      /* with this error */
    int hb_failed;      /* heartbeats failed in a row */
    int etcd_warned;    /* logged that etcd's map cannot be read */
    peerclock pc;       /* clients of the peers, for clock checks */
} run_state;

/* One try to register, then, when it fails, a wait of the current backoff
 * (doubled for the next). Returns 1 when stopping. */
static int register_step(run_state *rs)
{
    node_server *ns = rs->ns;
    rs->err[0] = 0;
    /* On etcd, the coordinators accept us once our key is there. */
    int rv = registry_present(ns)
                 ? register_node(ns, rs->err, sizeof(rs->err))
                 : (snprintf(rs->err, sizeof(rs->err), "no lease in etcd yet"), LAPSE_EUNAVAILABLE);
    if (rv == 0) {
        atomic_store(&ns->registered, 1);
        rs->backoff_ms = MEMBERSHIP_BACKOFF_MIN_MS;
        rs->warned = 0;
        rs->hb_failed = 0;
        log_info("registered with the coordinator at %s as node %u (%s), map version %llu",
                 ns->coordinator_url, ns->id, ns->advertise_url,
                 (unsigned long long)maps_version(ns));
        return 0; /* heartbeat at once: it reports our clock */
    }
    if (!rs->warned || rv != rs->warned_rv) {
        /* Once per outage, and again when the reason changes (no
         * lease yet, then refused: a removed node's, say). */
        log_warn("cannot register with the coordinator at %s (%s: %s); retrying, serving "
                 "map version %llu meanwhile",
                 ns->coordinator_url, lapse_strerror(rv), rs->err,
                 (unsigned long long)maps_version(ns));
        rs->warned = 1;
        rs->warned_rv = rv;
    }
    without_coordinator(ns, &rs->pc, &rs->etcd_warned);
    if (wait_or_stop(ns, rs->backoff_ms)) {
        return 1;
    }
    rs->backoff_ms = rs->backoff_ms * 2 > MEMBERSHIP_BACKOFF_MAX_MS ? MEMBERSHIP_BACKOFF_MAX_MS
                                                                    : rs->backoff_ms * 2;
    return 0;
}

/* One heartbeat, and a fetch of the coordinator's map when it is ahead,
 * then a wait for the rest of MEMBERSHIP_HEARTBEAT_MS; none when the
 * coordinator does not know this node (it registers again). Returns 1 when
 * stopping. */
static int heartbeat_step(run_state *rs)
{
    node_server *ns = rs->ns;
    int64_t started = clock_mono_now().ms;
    uint64_t coord_version = 0;
    rs->err[0] = 0;
    int rv = heartbeat(ns, &coord_version, rs->err, sizeof(rs->err));
    if (rv == LAPSE_ENOTFOUND) {
        log_warn("coordinator does not know node %u (%s): registering again", ns->id, rs->err);
        atomic_store(&ns->registered, 0);
        return 0;
    }
    if (rv != 0) {
        if (rs->hb_failed++ == 0) {
            log_warn("heartbeat to %s failed: %s: %s", ns->coordinator_url, lapse_strerror(rv),
                     rs->err);
        }
        without_coordinator(ns, &rs->pc, &rs->etcd_warned);
    } else {
        if (rs->hb_failed > 0) {
            log_info("heartbeats to %s succeed again (after %d failures)", ns->coordinator_url,
                     rs->hb_failed);
        }
        rs->hb_failed = 0;
        if (coord_version > maps_version(ns)) {
            rs->err[0] = 0;
            int64_t deadline = clock_mono_now().ms + MAPS_FETCH_TIMEOUT_MS;
            if ((rv = maps_refresh(ns, deadline, 0, rs->err, sizeof(rs->err))) != 0) {
                log_warn("fetching partition map version %llu failed: %s: %s",
                         (unsigned long long)coord_version, lapse_strerror(rv), rs->err);
            }
        }
    }
    int64_t spent = clock_mono_now().ms - started;
    int64_t pause = MEMBERSHIP_HEARTBEAT_MS - spent;
    return wait_or_stop(ns, pause > 0 ? pause : 0);
}

/*
 * The thread. Budget per step: one RPC of at most MEMBERSHIP_CALL_TIMEOUT_MS
 * (plus one map fetch of at most MAPS_FETCH_TIMEOUT_MS when the coordinator
 * is ahead), then a wait of at most MEMBERSHIP_HEARTBEAT_MS or the current
 * backoff, cut short by node_close. Stops when ns->stopping is set.
 */
static void *run(void *arg)
{
    run_state rs = {.ns = arg, .backoff_ms = MEMBERSHIP_BACKOFF_MIN_MS};
    node_server *ns = rs.ns;
    while (!stopping(ns)) {
        registry_tick(ns);
        if (atomic_load(&ns->registered)) {
            drop_former_copies(ns);
        }
        int stop = !atomic_load(&ns->registered) ? register_step(&rs) : heartbeat_step(&rs);
        if (stop) {
            break;
        }
    }
    peerclock_fini(&rs.pc);
    return NULL;
}

int membership_start(node_server *ns, char *err, size_t errlen)
{
    ns->stopping = 0;
    atomic_store(&ns->registered, 0);
    int e = pthread_create(&ns->membership_thread, NULL, run, ns);
    if (e != 0) {
        snprintf(err, errlen, "cannot start the membership thread: %s", strerror(e));
        return LAPSE_ENOMEM;
    }
    ns->membership_started = 1;
    return 0;
}

void membership_stop(node_server *ns)
{
    if (ns == NULL || !ns->membership_started) {
        return;
    }
    pthread_mutex_lock(&ns->stop_lock);
    ns->stopping = 1;
    pthread_cond_broadcast(&ns->stop_cond);
    pthread_mutex_unlock(&ns->stop_lock);
    pthread_join(ns->membership_thread, NULL);
    ns->membership_started = 0;
}
