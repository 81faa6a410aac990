/*
 * etcd_keys.h: where a Lapse cluster keeps its state in etcd. Every key of
 * cluster C lives under /lapse/C/ (docs/coordinator.md, "Coordinators on
 * etcd"):
 *
 *   catalog/pmap            packed lapse.PartitionMap (the coordinators')
 *   catalog/next_table_id   4 bytes, big-endian
 *   coordinator/leader/...  the coordinators' election
 *   nodes/<id>              a live node's entry, "<advertised URL>
 *                           <incarnation, 16 hex digits>", attached to the
 *                           node's lease: the key exists while the node is up
 *
 * Coordinators and nodes both build their keys here, so the layout is
 * written down once.
 *
 * Thread-safety: an etcd_keys is immutable after etcd_keys_init.
 */
#ifndef LAPSE_ETCD_KEYS_H
#define LAPSE_ETCD_KEYS_H

#include <stddef.h>
#include <stdint.h>

#define ETCD_CLUSTER_MAX 64 /* bytes of a cluster name */
#define ETCD_KEY_MAX 128

typedef struct etcd_keys {
    char prefix[ETCD_KEY_MAX];        /* /lapse/<cluster>/ */
    char catalog[ETCD_KEY_MAX];       /* <prefix>catalog/ */
    char pmap[ETCD_KEY_MAX];          /* <prefix>catalog/pmap */
    char next_table_id[ETCD_KEY_MAX]; /* <prefix>catalog/next_table_id */
    char election[ETCD_KEY_MAX];      /* <prefix>coordinator/leader */
    char nodes[ETCD_KEY_MAX];         /* <prefix>nodes/ */
} etcd_keys;

/* Fills *k for cluster. Returns 0 or LAPSE_EINVAL when the name is not 1 to
 * ETCD_CLUSTER_MAX letters, digits, '-', '_' or '.' (reason in err). */
int etcd_keys_init(etcd_keys *k, const char *cluster, char *err, size_t errlen);

/* Writes node id's registry key into out. */
void etcd_keys_node(const etcd_keys *k, uint32_t id, char *out, size_t len);

/* The node id a registry key names; 0 for a key that is not
 * <nodes>/<decimal id 1..65535>. */
uint32_t etcd_keys_node_id(const etcd_keys *k, const char *key);

/* Writes a node's registry entry (its advertised URL, the incarnation of
 * its data dir and, when zone is neither NULL nor "", its zone: "URL INC
 * ZONE") into out; returns its length, or one >= len when out was too
 * short. */
size_t etcd_keys_node_entry(char *out, size_t len, const char *url, uint64_t incarnation,
                            const char *zone);

/* Reads a registry entry of n bytes: its URL into url (cap bytes with the
 * NUL), its incarnation into *incarnation (0 for an entry holding a URL
 * only, as nodes from before incarnations wrote) and its zone into zone
 * (zcap bytes with the NUL; "" for none). Returns 0, or -1 when the entry
 * is empty, its URL or zone does not fit, or its incarnation is not 16 hex
 * digits. */
int etcd_keys_node_parse(const char *entry, size_t n, char *url, size_t cap, uint64_t *incarnation,
                         char *zone, size_t zcap);

#endif
