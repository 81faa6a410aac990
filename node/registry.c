/* registry.c: the node's lease and key in etcd. Contract in registry.h. */
#include "registry.h"

#include <stdio.h>
#include <string.h>

#include "../common/lapse_err.h"
#include "../common/log.h"
#include "maps.h"

/* Puts the node's key under lease; records the lease on success. */
static int put_key(node_server *ns, int64_t lease, char *err, size_t errlen)
{
    char key[ETCD_KEY_MAX];
    etcd_keys_node(&ns->keys, ns->id, key, sizeof(key));
    int rv = etcd_put(ns->ec, key, ns->advertise_url, strlen(ns->advertise_url), lease, NULL, err,
                      errlen);
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

int registry_open(node_server *ns, const char *endpoints, const char *cluster, char *err,
                  size_t errlen)
{
    atomic_store(&ns->key_lease, 0);
    int rv = etcd_keys_init(&ns->keys, cluster, err, errlen);
    if (rv == 0) {
        rv = etcd_open(&ns->ec, endpoints, REGISTRY_CALL_TIMEOUT_MS, err, errlen);
    }
    if (rv == 0) {
        rv = etcd_keeper_start(&ns->keeper, ns->ec, REGISTRY_LEASE_TTL_S, REGISTRY_RENEW_MS,
                               on_lease, ns, err, errlen);
    }
    return rv;
}

int registry_present(node_server *ns)
{
    return ns->ec == NULL || atomic_load(&ns->key_lease) != 0;
}

void registry_tick(node_server *ns)
{
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

int registry_fetch_map(node_server *ns, char *err, size_t errlen)
{
    if (ns->ec == NULL) {
        return 0;
    }
    etcd_kv kv;
    int rv = etcd_get(ns->ec, ns->keys.pmap, &kv, NULL, err, errlen);
    if (rv != 0) {
        return rv;
    }
    Lapse__PartitionMap *pb =
        lapse__partition_map__unpack(NULL, kv.value_len, (const uint8_t *)kv.value);
    etcd_kv_fini(&kv);
    if (pb == NULL) {
        snprintf(err, errlen, "etcd's %s does not decode as a partition map", ns->keys.pmap);
        return LAPSE_ECORRUPT;
    }
    int applied = 0;
    rv = maps_apply_pb(ns, pb, &applied, err, errlen);
    if (rv == 0 && applied) {
        log_info("applied partition map version %llu from etcd",
                 (unsigned long long)pb->version);
    }
    lapse__partition_map__free_unpacked(pb, NULL);
    return rv;
}

void registry_close(node_server *ns, int revoke)
{
    etcd_keeper_stop(ns->keeper, revoke);
    ns->keeper = NULL;
    etcd_close(ns->ec);
    ns->ec = NULL;
}
