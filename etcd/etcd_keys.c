/* etcd_keys.c: the layout of a cluster's keys in etcd (etcd_keys.h). */
#include "etcd_keys.h"

#include <stdio.h>
#include <string.h>

#include "../common/lapse_err.h"

int etcd_keys_init(etcd_keys *k, const char *cluster, char *err, size_t errlen)
{
    size_t n = strlen(cluster);
    if (n == 0 || n > ETCD_CLUSTER_MAX ||
        strspn(cluster, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") != n) {
        snprintf(err, errlen, "cluster name '%s' must be 1 to %d letters, digits, '-', '_' or '.'",
                 cluster, ETCD_CLUSTER_MAX);
        return LAPSE_EINVAL;
    }
    /* %.64s: the name was checked above; the precision lets the compiler
     * see that every key fits. */
    snprintf(k->prefix, sizeof(k->prefix), "/lapse/%.64s/", cluster);
    snprintf(k->catalog, sizeof(k->catalog), "/lapse/%.64s/catalog/", cluster);
    snprintf(k->pmap, sizeof(k->pmap), "/lapse/%.64s/catalog/pmap", cluster);
    snprintf(k->next_table_id, sizeof(k->next_table_id), "/lapse/%.64s/catalog/next_table_id",
             cluster);
    snprintf(k->election, sizeof(k->election), "/lapse/%.64s/coordinator/leader", cluster);
    snprintf(k->nodes, sizeof(k->nodes), "/lapse/%.64s/nodes/", cluster);
    return 0;
}

void etcd_keys_node(const etcd_keys *k, uint32_t id, char *out, size_t len)
{
    snprintf(out, len, "%s%u", k->nodes, id);
}

uint32_t etcd_keys_node_id(const etcd_keys *k, const char *key)
{
    size_t n = strlen(k->nodes);
    if (strncmp(key, k->nodes, n) != 0) {
        return 0;
    }
    const char *p = key + n;
    uint32_t id = 0;
    if (*p == '0' || *p == '\0') {
        return 0;
    }
    for (; *p != '\0'; p++) {
        if (*p < '0' || *p > '9' || (id = id * 10 + (uint32_t)(*p - '0')) > 65535) {
            return 0;
        }
    }
    return id;
}
