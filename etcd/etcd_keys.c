/* etcd_keys.c: the layout of a cluster's keys in etcd (etcd_keys.h). */
#include "etcd_keys.h"

#include <inttypes.h>
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

size_t etcd_keys_node_entry(char *out, size_t len, const char *url, uint64_t incarnation,
                            const char *zone)
{
    int has_zone = zone != NULL && zone[0] != '\0';
    int n = snprintf(out, len, "%s %016" PRIx64 "%s%s", url, incarnation, has_zone ? " " : "",
                     has_zone ? zone : "");
    return n < 0 ? len : (size_t)n;
}

int etcd_keys_node_parse(const char *entry, size_t n, char *url, size_t cap, uint64_t *incarnation,
                         char *zone, size_t zcap)
{
    const char *sp = memchr(entry, ' ', n);
    size_t ulen = sp != NULL ? (size_t)(sp - entry) : n;
    if (ulen == 0 || ulen >= cap || zcap == 0) {
        return -1;
    }
    uint64_t inc = 0;
    size_t zlen = 0;
    if (sp != NULL) {
        const char *p = sp + 1;
        size_t rest = (size_t)(entry + n - p);
        if (rest > 17 && p[16] == ' ') {
            zlen = rest - 17; /* "INC ZONE" */
            if (zlen >= zcap) {
                return -1;
            }
            memcpy(zone, p + 17, zlen);
        } else if (rest != 16) {
            return -1;
        }
        for (int i = 0; i < 16; i++) {
            char c = p[i];
            int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
            if (d < 0) {
                return -1;
            }
            inc = inc << 4 | (uint64_t)d;
        }
    }
    memcpy(url, entry, ulen);
    url[ulen] = '\0';
    zone[zlen] = '\0';
    *incarnation = inc;
    return 0;
}
