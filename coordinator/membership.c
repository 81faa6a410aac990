/* membership.c: node liveness. Contract and state machine in membership.h. */
#include "membership.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/clock.h"
#include "../common/lapse_err.h"
#include "../common/log.h"
#include "../placement/failover.h"
#include "mover.h"
#include "replicas.h"

/* How a node was seen UP: at address, under lease (0: none), with its data
 * dir's incarnation and its zone ("": none). All borrowed. */
typedef struct node_seen {
    const char *address;
    int64_t lease;
    uint64_t incarnation;
    const char *zone;
} node_seen;

/* Marks node n DOWN in next and fails it over in every replica set that
 * holds it in sync (failover.h), in the same commit. 0 or LAPSE_ENOMEM.
 * REQUIRES: s->lock held. */
static int mark_down(pmap *next, const pmap_node *n, size_t *sets)
{
    if (pmap_set_node(next, n->id, n->address, PMAP_NODE_DOWN) != 0) {
        return LAPSE_ENOMEM;
    }
    (void)pmap_set_node_lease(next, n->id, 0); /* its lease is gone; n is in next */
    pmap_failover f;
    pmap_fail_node(next, n->id, &f);
    *sets += f.shrunk + f.promoted;
    if (f.shrunk + f.promoted + f.stranded > 0) {
        log_warn("node %u down: %zu replica set(s) shrunk, %zu with a new primary, %zu with "
                 "no copy in sync to take over (unavailable until it is back)",
                 n->id, f.shrunk, f.promoted, f.stranded);
    }
    return 0;
}

/* Records node id UP in next as seen: at its address, under its lease (0:
 * none), with the incarnation of its data dir and its zone. old is the node as the map has it now
 * (NULL: a new node). A node back under another incarnation than the one it
 * was last UP with came back on an empty dir: it holds none of the copies
 * the map gives it, so its copies are first counted lost
 * (pmap_lose_node_copies: its sets fail over, last_out taking a set it was
 * the only in-sync copy of), in the same commit as UP: it leads no set and
 * counts in sync in none until its copies are rebuilt. Adds the replica sets changed to *sets. 0 or
 * LAPSE_ENOMEM. REQUIRES: s->lock held. */
static int set_up(pmap *next, const pmap_node *old, uint32_t id, const node_seen *seen,
                  size_t *sets)
{
    const char *address = seen->address;
    uint64_t incarnation = seen->incarnation;
    if (old != NULL && old->incarnation != 0 && incarnation != 0 &&
        old->incarnation != incarnation) {
        pmap_failover f;
        pmap_lose_node_copies(next, id, &f);
        *sets += f.shrunk + f.promoted + f.recovered;
        log_warn("node %u (%s) is back on a new data dir (incarnation %016llx, was %016llx): "
                 "it holds none of its copies, so it is failed over first: %zu replica set(s) "
                 "shrunk, %zu with a new primary, %zu taken over by the copy that left the "
                 "in-sync set last",
                 id, address, (unsigned long long)incarnation, (unsigned long long)old->incarnation,
                 f.shrunk, f.promoted, f.recovered);
        if (f.stranded > 0) {
            log_error("node %u held the only copy in sync of %zu replica set(s), and no other "
                      "member is known to hold every acknowledged write: those sets stay with "
                      "it, and their acknowledged writes are lost",
                      id, f.stranded);
        }
    }
    if (pmap_set_node(next, id, address, PMAP_NODE_UP) != 0 ||
        pmap_set_node_lease(next, id, seen->lease) != 0 ||
        pmap_set_node_incarnation(next, id, incarnation) != 0 ||
        pmap_set_node_zone(next, id, seen->zone) != 0) {
        return LAPSE_ENOMEM; /* the zone was checked (membership_register, check_registry) */
    }
    return 0;
}

/* Whether node n (NULL: unknown) is UP as seen already: nothing to commit. */
static int up_as(const pmap_node *n, const node_seen *seen)
{
    return n != NULL && n->state == PMAP_NODE_UP && strcmp(n->address, seen->address) == 0 &&
           n->lease == seen->lease && n->incarnation == seen->incarnation &&
           strcmp(n->zone, seen->zone) == 0;
}

/* Commits node id UP (set_up) on a copy of the map; pushes the map when
 * replica sets changed. n: the node as the map has it (NULL: new); it dies
 * with the old map. REQUIRES: s->lock held. */
static int commit_up(server *s, const pmap_node *n, uint32_t id, const node_seen *seen, char *err,
                     size_t errlen)
{
    size_t sets = 0;
    pmap *next = pmap_dup(s->pm);
    if (next == NULL || set_up(next, n, id, seen, &sets) != 0) {
        pmap_free(next);
        snprintf(err, errlen, "out of memory");
        return LAPSE_ENOMEM;
    }
    int rv = server_commit(s, next, s->next_table_id, err, errlen);
    if (rv != 0) {
        pmap_free(next);
        return rv;
    }
    if (sets > 0) {
        replicas_push(s);
    }
    return 0;
}

/* With etcd: a node may register only while its lease key is there, so the
 * registry (check_registry) agrees that it is UP; *lease gets the key's. */
static int check_lease_key(server *s, uint32_t id, int64_t *lease, char *err, size_t errlen)
{
    char key[ETCD_KEY_MAX];
    etcd_keys_node(&s->keys, id, key, sizeof(key));
    etcd_kv kv;
    int rv = etcd_get(s->ec, key, &kv, NULL, err, errlen);
    if (rv == LAPSE_ENOTFOUND) {
        snprintf(err, errlen,
                 "node %u holds no lease in etcd (no key %s): start it with --etcd and the "
                 "coordinators' --cluster-name",
                 id, key);
        return LAPSE_EUNAVAILABLE;
    }
    if (rv == 0) {
        *lease = kv.lease;
        etcd_kv_fini(&kv);
    }
    return rv;
}

/* A removed node (lapse node remove) never comes back UP: its copies were
 * made anew elsewhere and what it holds is stale, so it is given nothing
 * and leads nothing; under a new id on an empty data dir it is a new node.
 * Returns LAPSE_ESTATE with why in err. */
static int refuse_removed(uint32_t id, char *err, size_t errlen)
{
    snprintf(err, errlen,
             "node %u was removed from the cluster (lapse node remove): start it under a new "
             "id on an empty data dir to add it again",
             id);
    return LAPSE_ESTATE;
}

int membership_register(server *s, uint32_t id, const char *address, uint64_t incarnation,
                        const char *zone, char *err, size_t errlen)
{
    zone = zone != NULL ? zone : "";
    if (zone[0] != '\0' && !pmap_zone_valid(zone)) {
        snprintf(err, errlen,
                 "zone \"%.80s\" is not a zone's name (1 to %d letters, digits, '.', '_' or '-')",
                 zone, PMAP_MAX_ZONE - 1);
        return LAPSE_EINVAL;
    }
    if (id == 0) {
        snprintf(err, errlen, "node_id must be > 0");
        return LAPSE_EINVAL;
    }
    if (address == NULL || address[0] == '\0') {
        snprintf(err, errlen, "address is empty");
        return LAPSE_EINVAL;
    }
    if (strlen(address) >= PMAP_MAX_ADDR) {
        snprintf(err, errlen, "address is longer than %d bytes", PMAP_MAX_ADDR - 1);
        return LAPSE_EINVAL;
    }
    int rv = 0;
    int64_t lease = 0;
    if (s->ec != NULL && (rv = check_lease_key(s, id, &lease, err, errlen)) != 0) {
        return rv;
    }
    pthread_mutex_lock(&s->lock);
    node_live *l = server_live(s, id, 1);
    if (l == NULL) {
        rv = LAPSE_ENOMEM;
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    const pmap_node *n = pmap_node_find(s->pm, id);
    if (n != NULL && n->removed) {
        rv = refuse_removed(id, err, errlen);
        goto done;
    }
    l->last_heartbeat_mono_ms = clock_mono_now().ms;
    node_seen seen = {address, lease, incarnation, zone};
    if (up_as(n, &seen)) {
        goto done; /* nothing changed: no bump */
    }
    char old[PMAP_MAX_ADDR + 16];
    snprintf(old, sizeof(old), "%s", n == NULL ? "new" : n->address);
    if ((rv = commit_up(s, n, id, &seen, err, errlen)) != 0) {
        goto done;
    }
    log_info("node %u registered at %s (was %s); map version %llu", id, address, old,
             (unsigned long long)s->pm->version);
done:
    pthread_mutex_unlock(&s->lock);
    return rv;
}

int membership_heartbeat(server *s, uint32_t id, uint64_t pmap_version, int64_t clock_ms,
                         int64_t now_wall_ms, char *err, size_t errlen)
{
    int rv = 0;
    pthread_mutex_lock(&s->lock);
    const pmap_node *n = pmap_node_find(s->pm, id);
    if (n == NULL) {
        rv = LAPSE_ENOTFOUND;
        snprintf(err, errlen, "node %u is not registered", id);
        goto done;
    }
    if (n->removed) {
        rv = refuse_removed(id, err, errlen);
        goto done;
    }
    node_live *l = server_live(s, id, 1);
    if (l == NULL) {
        rv = LAPSE_ENOMEM;
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    l->last_heartbeat_mono_ms = clock_mono_now().ms;
    l->pmap_version = pmap_version;
    l->clock_skew_ms = clock_ms - now_wall_ms;
    if (n->state == PMAP_NODE_UP || s->ec != NULL) {
        goto done; /* on etcd, the node's lease key decides (check_registry) */
    }
    char address[PMAP_MAX_ADDR], zone[PMAP_MAX_ZONE]; /* n dies with the old map */
    snprintf(address, sizeof(address), "%s", n->address);
    snprintf(zone, sizeof(zone), "%s", n->zone);
    node_seen seen = {address, 0, n->incarnation, zone};
    if ((rv = commit_up(s, n, id, &seen, err, errlen)) != 0) {
        goto done;
    }
    log_info("node %u (%s) is UP again; map version %llu", id, address,
             (unsigned long long)s->pm->version);
done:
    pthread_mutex_unlock(&s->lock);
    return rv;
}

/*
 * One pass of down detection. Budget: one look at each node (the cluster has
 * few), and at most one commit, with every node found silent in this pass
 * marked DOWN together, so a pass never holds the lock for more than one
 * synced write (and, when replica sets changed, one push of the map). A failed commit is retried on
 * the next pass, since the nodes are still UP and still silent. REQUIRES: s->lock held.
 */
static void check_silent(server *s, int64_t now_mono_ms)
{
    if (!server_leads(s)) {
        return; /* the leader judges liveness */
    }
    pmap *next = NULL;
    size_t ndown = 0, sets = 0;
    for (size_t i = 0; i < s->pm->nnodes; i++) {
        const pmap_node *n = &s->pm->nodes[i];
        if (n->state != PMAP_NODE_UP) {
            continue;
        }
        const node_live *l = server_live(s, n->id, 0);
        int64_t age = (l == NULL || l->last_heartbeat_mono_ms < 0)
                          ? -1
                          : now_mono_ms - l->last_heartbeat_mono_ms;
        /* An UP node with no liveness entry cannot happen (every path to UP
         * records a heartbeat); treat it as silent. */
        if (age >= 0 && age <= s->heartbeat_timeout_ms) {
            continue;
        }
        if (next == NULL && (next = pmap_dup(s->pm)) == NULL) {
            log_error("membership: out of memory; retrying");
            return;
        }
        if (mark_down(next, n, &sets) != 0) {
            log_error("membership: out of memory; retrying");
            pmap_free(next);
            return;
        }
        ndown++;
        log_warn("node %u (%s) is DOWN: no heartbeat for %lld ms (timeout %lld ms)", n->id,
                 n->address, (long long)age, (long long)s->heartbeat_timeout_ms);
    }
    if (next == NULL) {
        return;
    }
    char err[512];
    if (server_commit(s, next, s->next_table_id, err, sizeof(err)) != 0) {
        log_error("membership: cannot persist DOWN state (retrying): %s", err);
        pmap_free(next);
        return;
    }
    log_info("map version %llu after marking %zu node(s) DOWN", (unsigned long long)s->pm->version,
             ndown);
    if (sets > 0) {
        replicas_push(s);
    }
}

/* Whether node id's key is in the registry read reg. */
static int registered(server *s, const etcd_kvs *reg, uint32_t id)
{
    for (size_t i = 0; i < reg->n; i++) {
        if (etcd_keys_node_id(&s->keys, reg->kv[i].key) == id) {
            return 1;
        }
    }
    return 0;
}

/*
 * One pass of liveness on etcd: a node is UP exactly while its lease key is
 * in the registry (reg, read at read_mono_ms). Budget as check_silent's: one
 * commit for every change found. A node heard from (RegisterNode, which
 * checks its key) after the read started is not marked DOWN on this read.
 * REQUIRES: s->lock held; leading.
 */
static void check_registry(server *s, const etcd_kvs *reg, int64_t read_mono_ms)
{
    pmap *next = NULL;
    size_t nup = 0, ndown = 0, sets = 0;
    for (size_t i = 0; i < reg->n; i++) {
        uint32_t id = etcd_keys_node_id(&s->keys, reg->kv[i].key);
        char address[PMAP_MAX_ADDR], zone[PMAP_MAX_ZONE];
        uint64_t incarnation = 0;
        if (id == 0 ||
            etcd_keys_node_parse(reg->kv[i].value, reg->kv[i].value_len, address, sizeof(address),
                                 &incarnation, zone, sizeof(zone)) != 0 ||
            (zone[0] != '\0' && !pmap_zone_valid(zone))) {
            continue; /* not a node key of ours: ignored */
        }
        node_seen seen = {address, reg->kv[i].lease, incarnation, zone};
        const pmap_node *n = pmap_node_find(s->pm, id);
        if (up_as(n, &seen) || (n != NULL && n->removed)) {
            continue; /* a removed node stays DOWN (refuse_removed) */
        }
        /* A node UP under another lease lost the old one and was granted a
         * new one between two reads: nobody took its place (that takes a
         * DOWN), and it leads again once the map names the new lease;
         * unless it is back on an empty dir (set_up). */
        node_live *l = server_live(s, id, 1);
        if (l == NULL || (next == NULL && (next = pmap_dup(s->pm)) == NULL) ||
            set_up(next, n, id, &seen, &sets) != 0) {
            log_error("membership: out of memory; retrying");
            pmap_free(next);
            return;
        }
        l->last_heartbeat_mono_ms = clock_mono_now().ms;
        nup++;
        log_info("node %u (%s%s%s) is UP: it holds lease %llx in etcd", id, address,
                 zone[0] != '\0' ? ", zone " : "", zone, (unsigned long long)seen.lease);
    }
    for (size_t i = 0; i < s->pm->nnodes; i++) {
        const pmap_node *n = &s->pm->nodes[i];
        if (n->state != PMAP_NODE_UP || registered(s, reg, n->id)) {
            continue;
        }
        const node_live *l = server_live(s, n->id, 0);
        if (l != NULL && l->last_heartbeat_mono_ms > read_mono_ms) {
            continue; /* registered after the read: judged on the next one */
        }
        if ((next == NULL && (next = pmap_dup(s->pm)) == NULL) || mark_down(next, n, &sets) != 0) {
            log_error("membership: out of memory; retrying");
            pmap_free(next);
            return;
        }
        ndown++;
        log_warn("node %u (%s) is DOWN: its etcd lease expired or was revoked", n->id, n->address);
    }
    if (next == NULL) {
        return;
    }
    char err[512];
    if (server_commit(s, next, s->next_table_id, err, sizeof(err)) != 0) {
        log_error("membership: cannot commit the registry's node states (retrying): %s", err);
        pmap_free(next);
        return;
    }
    log_info("map version %llu after %zu node(s) UP and %zu DOWN",
             (unsigned long long)s->pm->version, nup, ndown);
    if (sets > 0) {
        replicas_push(s);
    }
}

/* A node UP under a lease, as the map had it when a pass started. */
typedef struct leased {
    uint32_t id;
    int64_t lease;
    char address[PMAP_MAX_ADDR];
} leased;

/*
 * Revokes the lease of every node of up[0..n) whose process is gone: the
 * leader's connection to it dropped and a probe of its address is refused
 * (rpc_probe: nothing listens there). Its key then goes at once, and the
 * registry read that follows fails it over, instead of waiting out the
 * rest of its lease. Only a refusal counts: a stopped node, or one behind
 * a cut, still accepts or does not answer, and keeps its lease until it
 * runs out, so a live primary is never deposed before its lease could have
 * expired (docs/replication.md, "Failover"). A node listens before it
 * registers, so a registered process refuses nothing. REQUIRES: s->lock
 * not held (probes and etcd calls block).
 */
static void revoke_dead(server *s, const leased *up, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char err[512];
        rpc_client *cli = NULL;
        if (push_client(s->pusher, up[i].address, &cli, err, sizeof(err)) != 0 ||
            rpc_client_connected(cli, 0) ||
            rpc_probe(up[i].address, MEMBERSHIP_PROBE_TIMEOUT_MS) != RPC_PROBE_REFUSED) {
            continue;
        }
        int rv = etcd_lease_revoke(s->ec, up[i].lease, err, sizeof(err));
        if (rv == 0) {
            log_warn("node %u (%s) refuses connections: its process is gone; revoked its etcd "
                     "lease %llx so that it fails over now",
                     up[i].id, up[i].address, (unsigned long long)up[i].lease);
        } else if (rv != LAPSE_ENOTFOUND) {
            log_warn("node %u (%s) refuses connections, but its etcd lease %llx could not be "
                     "revoked (it fails over when the lease expires): %s",
                     up[i].id, up[i].address, (unsigned long long)up[i].lease, err);
        }
    }
}

/* Reads the node registry with s->lock released (an etcd call must not
 * hold up the handlers), after revoking the leases of nodes found dead
 * (revoke_dead), then judges it. REQUIRES: s->lock held. */
static void registry_pass(server *s, int *warned)
{
    if (!server_leads(s)) {
        return;
    }
    char err[512];
    etcd_kvs reg;
    leased *up = calloc(s->pm->nnodes > 0 ? s->pm->nnodes : 1, sizeof(*up));
    size_t nup = 0;
    for (size_t i = 0; up != NULL && i < s->pm->nnodes; i++) {
        const pmap_node *n = &s->pm->nodes[i];
        if (n->state == PMAP_NODE_UP && n->lease != 0) {
            up[nup].id = n->id;
            up[nup].lease = n->lease;
            snprintf(up[nup].address, sizeof(up[nup].address), "%s", n->address);
            nup++;
        }
    }
    pthread_mutex_unlock(&s->lock);
    revoke_dead(s, up, nup);
    free(up);
    int64_t started = clock_mono_now().ms;
    int rv = etcd_range(s->ec, s->keys.nodes, 1, 0, 0, &reg, err, sizeof(err));
    pthread_mutex_lock(&s->lock);
    if (rv != 0) {
        if (!*warned) {
            log_warn("membership: cannot read the node registry (node states stay as they "
                     "are): %s",
                     err);
            *warned = 1;
        }
        return;
    }
    *warned = 0;
    if (server_leads(s) && !s->member_stop) {
        check_registry(s, &reg, started);
    }
    etcd_kvs_fini(&reg);
}

static void *member_main(void *arg)
{
    server *s = arg;
    int warned = 0;
    pthread_mutex_lock(&s->lock);
    while (!s->member_stop) {
        struct timespec until = clock_mono_abstime(MEMBERSHIP_PERIOD_MS);
        while (!s->member_stop &&
               pthread_cond_timedwait(&s->member_cond, &s->lock, &until) != ETIMEDOUT) {
        }
        if (s->member_stop) {
            break;
        }
        if (s->ec != NULL) {
            registry_pass(s, &warned);
            if (!s->member_stop) {
                mover_pass(s); /* a drain's next steps (mover.h) */
            }
        } else {
            check_silent(s, clock_mono_now().ms);
        }
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

int membership_start(server *s)
{
    pthread_mutex_lock(&s->lock);
    s->member_stop = 0;
    pthread_mutex_unlock(&s->lock);
    if (pthread_create(&s->member_thread, NULL, member_main, s) != 0) {
        return LAPSE_ENOMEM;
    }
    s->member_running = 1;
    return 0;
}

void membership_stop(server *s)
{
    if (!s->member_running) {
        return;
    }
    pthread_mutex_lock(&s->lock);
    s->member_stop = 1;
    pthread_cond_broadcast(&s->member_cond);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->member_thread, NULL);
    s->member_running = 0;
}
