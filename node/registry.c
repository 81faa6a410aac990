/* registry.c: the node's lease and key in etcd. Contract in registry.h. */
#include "registry.h"

#include <stdio.h>
#include <string.h>

#include "../common/lapse_err.h"
#include "../common/log.h"
#include "fault_switch.h"
#include "maps.h"

/* Puts the node's key under lease; records the lease on success. */
static int put_key(node_server *ns, int64_t lease, char *err, size_t errlen)
{
    char key[ETCD_KEY_MAX], entry[NODE_MAX_URL + 24 + PMAP_MAX_ZONE];
    etcd_keys_node(&ns->keys, ns->id, key, sizeof(key));
    size_t n =
        etcd_keys_node_entry(entry, sizeof(entry), ns->advertise_url, ns->incarnation, ns->zone);
    int rv = etcd_put(ns->ec, key, entry, n, lease, NULL, err, errlen);
    if (rv == 0) {
        atomic_store(&ns->key_lease, (long long)lease);
        log_info("registered in etcd as %s (lease %llx)", key, (unsigned long long)lease);
    }
    return rv;
}

static void on_lease(void *arg, int64_t lease, enum etcd_lease_event ev)
{
    node_server *ns = arg;
    if (ev == ETCD_LEASE_LOST) {
        atomic_store(&ns->key_lease, 0);
        log_warn("etcd lease %llx lost: the coordinators see this node DOWN until a new one "
                 "is granted",
                 (unsigned long long)lease);
        return;
    }
    char err[512];
    if (put_key(ns, lease, err, sizeof(err)) != 0) {
        log_warn("cannot put this node's key in etcd (retrying): %s", err);
    }
}

int registry_may_lead(node_server *ns, const pmap *pm, char *err, size_t errlen)
{
    if (ns->keeper == NULL) {
        return 0;
    }
    int64_t lease = 0;
    int64_t left = etcd_keeper_valid_ms(ns->keeper, &lease);
    const pmap_node *me = pmap_node_find(pm, ns->id);
    int up = me != NULL && me->state == PMAP_NODE_UP;
    if (left > REGISTRY_LEAD_MARGIN_MS && up && me->lease == lease) {
        return 0;
    }
    if (err == NULL) {
        return LAPSE_EWRONGNODE;
    }
    if (left <= REGISTRY_LEAD_MARGIN_MS) {
        snprintf(err, errlen,
                 "node %u leads nothing for now: its etcd lease %s (a primary stops %d ms before "
                 "its lease could expire, while the coordinators fail it over)",
                 (unsigned)ns->id, lease == 0 ? "is lost" : "could not be renewed",
                 REGISTRY_LEAD_MARGIN_MS);
    } else {
        snprintf(err, errlen,
                 "node %u leads nothing for now: it holds etcd lease %llx, while the map "
                 "(version %llu) has it %s under lease %llx",
                 (unsigned)ns->id, (unsigned long long)lease, (unsigned long long)pm->version,
                 up ? "UP" : "DOWN", (unsigned long long)(me != NULL ? me->lease : 0));
    }
    return LAPSE_EWRONGNODE;
}

int registry_present(node_server *ns)
{
    return ns->ec == NULL || atomic_load(&ns->key_lease) != 0;
}

/* --debug-fault-dir's switch node<id>.cut-etcd (the chaos etcd-cut fault):
 * while the file exists, this node's etcd client reaches nothing, so its
 * lease cannot be renewed, while clients, peers and coordinators still
 * reach the node. Looked at every tick. */
static void debug_cut(node_server *ns)
{
    if (ns->ec == NULL || ns->debug_fault_dir[0] == '\0') {
        return;
    }
    int cut = fault_switch_on(ns, "cut-etcd");
    if (cut != ns->debug_etcd_cut) {
        log_warn("debug fault: etcd %s this node", cut ? "cut off from" : "reachable again from");
        ns->debug_etcd_cut = cut;
    }
    etcd_debug_cut(ns->ec, cut);
}

void registry_tick(node_server *ns)
{
    debug_cut(ns);
    if (ns->keeper == NULL) {
        return;
    }
    int64_t lease = etcd_keeper_lease(ns->keeper);
    if (lease == 0 || lease == (int64_t)atomic_load(&ns->key_lease)) {
        return;
    }
    char err[512];
    if (put_key(ns, lease, err, sizeof(err)) != 0) {
        log_debug("cannot put this node's key in etcd (retrying): %s", err);
    }
}

/* Applies the packed map value (the catalog key's) when newer than ours. */
static int apply_packed(node_server *ns, const etcd_kv *kv, const char *how, char *err,
                        size_t errlen)
{
    Lapse__PartitionMap *pb =
        lapse__partition_map__unpack(NULL, kv->value_len, (const uint8_t *)kv->value);
    if (pb == NULL) {
        snprintf(err, errlen, "etcd's %s does not decode as a partition map", ns->keys.pmap);
        return LAPSE_ECORRUPT;
    }
    int applied = 0;
    int rv = maps_apply_pb(ns, pb, &applied, err, errlen);
    if (rv == 0 && applied) {
        log_info("applied partition map version %llu from etcd (%s)",
                 (unsigned long long)pb->version, how);
    }
    lapse__partition_map__free_unpacked(pb, NULL);
    return rv;
}

/* registry_fetch_map; *revision gets the store's revision the read saw. */
static int fetch_map(node_server *ns, int64_t *revision, char *err, size_t errlen)
{
    etcd_kv kv;
    int rv = etcd_get(ns->ec, ns->keys.pmap, &kv, revision, err, errlen);
    if (rv == 0) {
        rv = apply_packed(ns, &kv, "read", err, errlen);
        etcd_kv_fini(&kv);
    }
    return rv;
}

int registry_fetch_map(node_server *ns, char *err, size_t errlen)
{
    return ns->ec == NULL ? 0 : fetch_map(ns, NULL, err, errlen);
}

/* The watch on the catalog's map key: every map the coordinators commit
 * reaches the node from etcd as well as by their push, whichever comes
 * first (maps_apply ignores the second), so a map committed just before its
 * coordinator died is applied without waiting for the next leader. */
static int64_t on_map_change(void *arg, enum etcd_watch_kind kind, const etcd_event *ev, size_t n,
                             int64_t revision)
{
    node_server *ns = arg;
    char err[512];
    (void)revision;
    if (kind == ETCD_WATCH_COMPACTED) {
        int64_t rev = 0;
        if (fetch_map(ns, &rev, err, sizeof(err)) != 0 && rev == 0) {
            log_warn("re-reading the map from etcd after a compaction: %s", err);
        }
        return rev > 0 ? rev + 1 : 0;
    }
    for (size_t i = 0; kind == ETCD_WATCH_EVENTS && i < n; i++) {
        if (!ev[i].deleted && apply_packed(ns, &ev[i].kv, "watch", err, sizeof(err)) != 0) {
            log_warn("a map from etcd's watch was not applied: %s", err);
        }
    }
    return 0;
}

int registry_open(node_server *ns, const char *endpoints, const char *cluster, int lease_ttl_s,
                  char *err, size_t errlen)
{
    atomic_store(&ns->key_lease, 0);
    int rv = etcd_keys_init(&ns->keys, cluster, err, errlen);
    if (rv == 0) {
        rv = etcd_open(&ns->ec, endpoints, REGISTRY_CALL_TIMEOUT_MS, err, errlen);
    }
    if (rv == 0) {
        rv = etcd_keeper_start(&ns->keeper, ns->ec, lease_ttl_s, REGISTRY_RENEW_MS, on_lease, ns,
                               err, errlen);
    }
    if (rv == 0) {
        rv = etcd_watch_start(&ns->map_watch, ns->ec, ns->keys.pmap, 0, 0, on_map_change, ns, err,
                              errlen);
    }
    return rv;
}

void registry_close(node_server *ns, int revoke)
{
    etcd_watch_stop(ns->map_watch);
    ns->map_watch = NULL;
    etcd_keeper_stop(ns->keeper, revoke);
    ns->keeper = NULL;
    etcd_close(ns->ec);
    ns->ec = NULL;
}
