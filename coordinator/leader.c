/* leader.c: coordinator leadership on etcd. Contract and state machine in
 * leader.h. */
#include "leader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/clock.h"
#include "../common/lapse_err.h"
#include "../common/log.h"

#define LEASE_TTL_S 2
#define LEASE_RENEW_MS 500
#define CAMPAIGN_WAIT_MS 1000
#define POLL_MS 50

static void on_lease(void *arg, int64_t lease, enum etcd_lease_event ev)
{
    (void)arg;
    if (ev == ETCD_LEASE_LOST) {
        log_warn("etcd lease %llx lost", (unsigned long long)lease);
    }
}

/* Sleeps ms unless stopping; returns whether stopping. */
static int nap(server *s, int64_t ms)
{
    clock_mono until = clock_mono_after_ms(ms);
    while (!atomic_load(&s->leader_stop) && clock_mono_remaining_ms(until) > 0) {
        clock_sleep_ms(ms < POLL_MS ? ms : POLL_MS);
    }
    return atomic_load(&s->leader_stop);
}

/* Loads the catalog as the new leader and starts serving with it. */
static int take_over(server *s, const etcd_leader *l)
{
    char err[512];
    catalog_state st = {0};
    pthread_mutex_lock(&s->ddl_lock);
    pthread_mutex_lock(&s->lock);
    int rv = catalog_etcd_load(s->ecat, &st, err, sizeof(err));
    if (rv == 0) {
        pmap_free(s->pm);
        s->pm = st.pm;
        s->next_table_id = st.next_table_id;
        for (size_t i = 0; i < s->nlive; i++) {
            free(s->live[i].lags); /* reported to us while following */
            free(s->live[i].filling);
        }
        s->nlive = 0; /* liveness heard while following is not ours */
        /* The nodes keep the states the last leader stored, each UP one with
         * a full heartbeat timeout from now to be heard from: a failover
         * does not stall placement until every node has heartbeated. */
        int64_t now = clock_mono_now().ms;
        for (size_t i = 0; i < s->pm->nnodes; i++) {
            node_live *nl = server_live(s, s->pm->nodes[i].id, 1);
            if (nl != NULL && s->pm->nodes[i].state == PMAP_NODE_UP) {
                nl->last_heartbeat_mono_ms = now;
            } else if (nl == NULL) {
                s->pm->nodes[i].state = PMAP_NODE_DOWN; /* out of memory: heard anew */
            }
        }
        catalog_etcd_fence(s->ecat, l->key, l->rev);
        atomic_store(&s->lead_lease, l->lease);
        atomic_store(&s->leading, 1);
        log_info("leading (etcd key %s): map version %llu with %zu tables and %zu nodes", l->key,
                 (unsigned long long)s->pm->version, s->pm->ntables, s->pm->nnodes);
    } else {
        log_error("won the election but cannot load the catalog from etcd: %s", err);
    }
    pthread_mutex_unlock(&s->lock);
    pthread_mutex_unlock(&s->ddl_lock);
    return rv;
}

static void step_down(server *s, etcd_leader *l, const char *why)
{
    pthread_mutex_lock(&s->lock);
    atomic_store(&s->leading, 0);
    catalog_etcd_fence(s->ecat, NULL, 0);
    pthread_mutex_unlock(&s->lock);
    char err[512];
    /* Best effort: a lost lease took the key with it already. */
    (void)etcd_resign(s->ec, l, err, sizeof(err));
    log_warn("no longer leading: %s", why);
}

static void *leader_main(void *arg)
{
    server *s = arg;
    char err[512];
    while (!atomic_load(&s->leader_stop)) {
        int64_t lease = etcd_keeper_lease(s->keeper);
        if (lease == 0) {
            nap(s, POLL_MS);
            continue;
        }
        etcd_leader l;
        int rv = etcd_campaign(s->ec, s->keys.election, lease, s->listen_url, strlen(s->listen_url),
                               CAMPAIGN_WAIT_MS, &l, err, sizeof(err));
        if (rv != 0) {
            if (rv != LAPSE_ETIMEDOUT) { /* a timeout: another leads */
                log_debug("campaign: %s", err);
                nap(s, 200);
            }
            continue;
        }
        if (take_over(s, &l) != 0) {
            (void)etcd_resign(s->ec, &l, err, sizeof(err));
            etcd_leader_fini(&l);
            nap(s, 200);
            continue;
        }
        const char *why = "stopping";
        for (;;) {
            if (nap(s, POLL_MS)) {
                break;
            }
            if (etcd_keeper_lease(s->keeper) != l.lease) {
                why = "its etcd lease expired";
                break;
            }
            if (!atomic_load(&s->leading)) {
                why = "a change was refused by etcd or its outcome is unknown";
                break;
            }
        }
        step_down(s, &l, why);
        etcd_leader_fini(&l);
    }
    return NULL;
}

/* Clears s->keeper, so server_leads no longer reads it, and returns it. */
static etcd_keeper *take_keeper(server *s)
{
    pthread_rwlock_wrlock(&s->keeper_lock);
    etcd_keeper *k = s->keeper;
    s->keeper = NULL;
    pthread_rwlock_unlock(&s->keeper_lock);
    return k;
}

int leader_start(server *s, char *err, size_t errlen)
{
    int rv =
        etcd_keeper_start(&s->keeper, s->ec, LEASE_TTL_S, LEASE_RENEW_MS, on_lease, s, err, errlen);
    if (rv != 0) {
        return rv;
    }
    atomic_store(&s->leader_stop, 0);
    if (pthread_create(&s->leader_thread, NULL, leader_main, s) != 0) {
        etcd_keeper_stop(take_keeper(s), 1);
        snprintf(err, errlen, "cannot start the leader thread");
        return LAPSE_ENOMEM;
    }
    s->leader_running = 1;
    return 0;
}

void leader_stop(server *s)
{
    if (s->leader_running) {
        atomic_store(&s->leader_stop, 1);
        pthread_join(s->leader_thread, NULL);
        s->leader_running = 0;
    }
    /* Revoked, so the others need not wait out the lease. */
    etcd_keeper_stop(take_keeper(s), 1);
}

void leader_forward(server *s, const Lapse__Request *req, Lapse__Response *resp, arena *a,
                    int64_t deadline_mono_ms)
{
    char err[512];
    if (req->forwarded) {
        rpc_set_error(resp, a, LAPSE_EUNAVAILABLE,
                      "coordinator %s does not lead either (the leader changed); try again",
                      s->listen_url);
        return;
    }
    etcd_kv kv;
    int rv = etcd_election_leader(s->ec, s->keys.election, &kv, err, sizeof(err));
    if (rv == LAPSE_ENOTFOUND) {
        rpc_set_error(resp, a, LAPSE_EUNAVAILABLE, "no coordinator leads yet; try again");
        return;
    }
    if (rv != 0) {
        rpc_set_error(resp, a, LAPSE_EUNAVAILABLE,
                      "coordinator %s cannot learn the leader from etcd: %s", s->listen_url, err);
        return;
    }
    if (strcmp(kv.value, s->listen_url) == 0) {
        etcd_kv_fini(&kv);
        rpc_set_error(resp, a, LAPSE_EUNAVAILABLE,
                      "coordinator %s is taking over, or cannot renew the etcd lease it leads "
                      "with; try again",
                      s->listen_url);
        return;
    }
    /* The push clients' cache: one client per URL, kept until the server
     * closes, so no call uses a client another thread closed. */
    rpc_client *c = NULL;
    if (push_client(s->pusher, kv.value, &c, err, sizeof(err)) != 0) {
        c = NULL;
    }
    int64_t left = deadline_mono_ms - clock_mono_now().ms;
    Lapse__Request fwd = *req;
    fwd.forwarded = 1;
    rv = c == NULL ? LAPSE_EUNAVAILABLE
                   : rpc_forward(c, &fwd, left > 100 ? (int)left : 100, resp, a, err, sizeof(err));
    if (rv != 0) {
        rpc_set_error(resp, a, rv, "the leading coordinator %s: %s", kv.value, err);
    }
    etcd_kv_fini(&kv);
}
