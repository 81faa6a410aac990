/*
 * check_copies.c: invariant 9 on a run of tables of several copies
 * (--replication; docs/chaos.md): every copy of every partition ends
 * identical, and so does every copy of every stream shard and GSI
 * partition. See check.h.
 *
 * After the other checks, the coordinator's map says where each
 * partition's copies are; each copy's node answers PartitionDigest (its
 * item count, an order-sensitive digest of its items, and its log
 * position). A set is identical when every member is in the in-sync set
 * and every member reports the same count, digest, epoch and seq. Rejoins
 * and the last TTL sweeps may still be under way when the check starts,
 * so mismatches are read again every 500 ms; only what still differs at
 * the deadline is filed, once per partition.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/clock.h"
#include "../placement/pmap.h"
#include "../rpc/rpc.h"
#include "../tests/nodecall.h"
#include "check_int.h"
#include "procs.h"

#define COPIES_MAX_REPORTED 64 /* partitions filed at most */

/* A set that differs: where and what. */
typedef struct set_diff {
    char where[192];
    char found[300];
} set_diff;

/* Points nodes[1..nnodes] at the addresses pm gives the nodes: the
 * cluster's own URLs are loopback ones, which in network-namespace mode
 * reach nothing. */
static void open_nodes(const pmap *pm, rpc_client **nodes, int nnodes)
{
    for (int id = 1; id <= nnodes; id++) {
        const pmap_node *pn = pmap_node_find(pm, (uint32_t)id);
        if (pn == NULL ||
            (nodes[id] != NULL && strcmp(rpc_client_url(nodes[id]), pn->address) == 0)) {
            continue;
        }
        rpc_client_close(nodes[id]);
        char err[256];
        if (rpc_client_open(&nodes[id], pn->address, err, sizeof(err)) != 0) {
            nodes[id] = NULL;
        }
    }
}

/* Files a set that differs in diffs[0..*n) (at most COPIES_MAX_REPORTED). */
static void add_diff(set_diff *diffs, int *n, const char *table, const char *what, uint32_t p,
                     const char *found)
{
    if (*n < COPIES_MAX_REPORTED) {
        set_diff *sd = &diffs[(*n)++];
        snprintf(sd->where, sizeof(sd->where), "%.60s/%.100s %u", table, what, (unsigned)p);
        snprintf(sd->found, sizeof(sd->found), "%s", found);
    }
}

/* Whether a copy's refusal (rv, err) on node id is the one a copy that
 * lost records gives ("A copy that lost records", docs/replication.md) on
 * a node whose data dir this run removed (the dir-lost fault): such a copy
 * knows it is not whole and answers no read, so it is left out of the
 * comparison. */
static int lost_copy(const run *r, uint32_t id, int rv, const char *err)
{
    return rv == LAPSE_EUNAVAILABLE && id <= CLUSTER_MAX_NODES && r->dir_lost[id] &&
           strstr(err, "misses records") != NULL;
}

/* Whether node id may be asked in this pass: 0, or why not (silent[id]:
 * the code it failed with earlier in the pass). */
static int askable(run *r, rpc_client **nodes, const int *silent, uint32_t id)
{
    return id < 1 || id > (uint32_t)cluster_nodes(r->cl) ? LAPSE_ENOTFOUND
           : nodes[id] == NULL                           ? LAPSE_EUNAVAILABLE
                                                         : silent[id];
}

/* Compares the copies of every stream shard of the replicated tables of pm
 * (their last sequence number and the records they hold, up to 1000):
 * copies fed by the outboxes on their own end equal (docs/replication.md,
 * "GSI partitions and stream shards"). Returns the shards compared. */
static long compare_shards(run *r, const pmap *pm, rpc_client **nodes, int *silent, set_diff *diffs,
                           int *n, long *lost_copies)
{
    long sets = 0;
    for (size_t ti = 0; ti < pm->ntables; ti++) {
        const pmap_table *t = &pm->tables[ti];
        if (schema_replication(&t->schema) < 2 || !t->schema.stream.enabled) {
            continue;
        }
        for (uint32_t p = 0; p < t->schema.partitions; p++) {
            const pmap_replicas *rs = pmap_stream_shard(t, p);
            char found[300] = "";
            size_t used = 0, first_n = 0;
            uint64_t first_last = 0;
            int answered = 0;
            int same = rs != NULL && rs->n == schema_replication(&t->schema);
            for (uint32_t i = 0; rs != NULL && i < rs->n; i++) {
                uint32_t id = rs->ids[i];
                size_t recs = 0;
                uint64_t last = 0;
                char err[256] = "";
                int rv = askable(r, nodes, silent, id);
                if (rv == 0) {
                    rv = nodecall_stream_shard(nodes[id], t->schema.name, p, &recs, &last, err,
                                               sizeof(err));
                    if ((rv == LAPSE_ETIMEDOUT || rv == LAPSE_EUNAVAILABLE) &&
                        !lost_copy(r, id, rv, err)) {
                        silent[id] = rv;
                    }
                }
                const int lost = lost_copy(r, id, rv, err);
                used += (size_t)(lost ? snprintf(found + used, sizeof(found) - used,
                                                 "%snode %u: refused (lost records)", i ? "; " : "",
                                                 (unsigned)id)
                                 : rv != 0
                                     ? snprintf(found + used, sizeof(found) - used, "%snode %u: %s",
                                                i ? "; " : "", (unsigned)id, lapse_strerror(rv))
                                     : snprintf(found + used, sizeof(found) - used,
                                                "%snode %u: %zu records up to %" PRIu64,
                                                i ? "; " : "", (unsigned)id, recs, last));
                if (used >= sizeof(found)) {
                    used = sizeof(found) - 1;
                }
                if (lost) {
                    (*lost_copies)++;
                    continue;
                }
                if (answered++ == 0) {
                    first_n = recs;
                    first_last = last;
                }
                same &= rv == 0 && recs == first_n && last == first_last;
            }
            same &= answered > 0;
            sets++;
            if (!same) {
                add_diff(diffs, n, t->schema.name, "stream shard", p, found);
            }
        }
    }
    return sets;
}

/* Whether the copies rs of one set (of table table_id: a base partition
 * part when index_id is 0, else partition part of the GSI with that index
 * id) agree: each copy's node answers PartitionDigest, and every one must
 * report the same count and digest and, for a base partition, be in sync
 * at the same log position. found gets what each copy reported. */
static int copies_agree(run *r, rpc_client **nodes, int *silent, const pmap_replicas *rs,
                        uint32_t want_copies, uint32_t table_id, uint32_t index_id, uint32_t part,
                        char *found, size_t flen, long *lost_copies)
{
    size_t used = 0;
    int answered = 0;
    nodecall_digest first = {0};
    int same = rs != NULL && rs->n == want_copies;
    for (uint32_t i = 0; rs != NULL && i < rs->n; i++) {
        uint32_t id = rs->ids[i];
        nodecall_digest d = {0};
        char err[256] = "";
        int rv = askable(r, nodes, silent, id);
        if (rv == 0) {
            rv = index_id == 0
                     ? nodecall_partition_digest(nodes[id], table_id, part, &d, err, sizeof(err))
                     : nodecall_gsi_digest(nodes[id], table_id, index_id, part, &d, err,
                                           sizeof(err));
            if ((rv == LAPSE_ETIMEDOUT || rv == LAPSE_EUNAVAILABLE) &&
                !(index_id != 0 && lost_copy(r, id, rv, err))) {
                silent[id] = rv;
            }
        }
        int in_sync = index_id != 0 || pmap_in_sync(rs, i);
        const int lost = index_id != 0 && lost_copy(r, id, rv, err);
        if (lost) {
            used += (size_t)snprintf(found + used, flen - used, "%snode %u: refused (lost records)",
                                     i ? "; " : "", (unsigned)id);
        } else if (rv != 0) {
            used += (size_t)snprintf(found + used, flen - used, "%snode %u: %s", i ? "; " : "",
                                     (unsigned)id, lapse_strerror(rv));
        } else if (index_id != 0) {
            used += (size_t)snprintf(found + used, flen - used,
                                     "%snode %u: %" PRIu64 " entries, digest %016" PRIx64,
                                     i ? "; " : "", (unsigned)id, d.items, d.hash);
        } else {
            used += (size_t)snprintf(found + used, flen - used,
                                     "%snode %u%s: %" PRIu64 " items, digest %016" PRIx64
                                     ", log %" PRIu64 ".%" PRIu64,
                                     i ? "; " : "", (unsigned)id, in_sync ? "" : " (out of sync)",
                                     d.items, d.hash, d.epoch, d.seq);
        }
        if (used >= flen) {
            used = flen - 1;
        }
        if (lost) {
            (*lost_copies)++;
            continue;
        }
        if (i + 1 == rs->n && rs->n != want_copies && used < flen) {
            used += (size_t)snprintf(found + used, flen - used,
                                     " (%u copies where the table keeps %u: a move under way)",
                                     (unsigned)rs->n, (unsigned)want_copies);
            used = used >= flen ? flen - 1 : used;
        }
        first = answered++ == 0 ? d : first;
        same &= rv == 0 && in_sync && d.items == first.items && d.hash == first.hash &&
                d.epoch == first.epoch && d.seq == first.seq;
    }
    return same && answered > 0;
}

/* Compares every replicated set of pm, every stream shard's copies and
 * every GSI partition's; the sets that differ go to diffs[0..*n) (at most
 * COPIES_MAX_REPORTED). A node that did not answer in time is not asked
 * again in this pass (each ask would wait its whole time-out). Returns
 * the sets compared. */
static long compare_sets(run *r, const pmap *pm, rpc_client **nodes, set_diff *diffs, int *n,
                         long *lost_copies)
{
    long sets = 0;
    int silent[CLUSTER_MAX_NODES + 1] = {0}; /* the code a node failed with, for this pass */
    *n = 0;
    for (size_t ti = 0; ti < pm->ntables; ti++) {
        const pmap_table *t = &pm->tables[ti];
        const uint32_t copies = schema_replication(&t->schema);
        if (copies < 2) {
            continue;
        }
        char found[300] = "";
        for (uint32_t p = 0; p < t->schema.partitions; p++, sets++) {
            if (!copies_agree(r, nodes, silent, pmap_part(t, p), copies, t->schema.id, 0, p, found,
                              sizeof(found), lost_copies)) {
                add_diff(diffs, n, t->schema.name, "partition", p, found);
            }
        }
        /* GSI copies are fed on their own: the same entries, no position. */
        for (uint32_t g = 0; g < t->schema.ngsi && g < SCHEMA_MAX_GSI; g++) {
            for (uint32_t p = 0; p < t->schema.gsi[g].partitions; p++, sets++) {
                if (!copies_agree(r, nodes, silent, pmap_gsi_part(t, g, p), copies, t->schema.id,
                                  t->schema.gsi[g].id, p, found, sizeof(found), lost_copies)) {
                    char what[96];
                    snprintf(what, sizeof(what), "GSI %.60s partition", t->schema.gsi[g].name);
                    add_diff(diffs, n, t->schema.name, what, p, found);
                }
            }
        }
    }
    return sets + compare_shards(r, pm, nodes, silent, diffs, n, lost_copies);
}

void check_copies(run *r, check_out *out, int deadline_ms)
{
    if (r->opt->replication < 2) {
        return;
    }
    out->checked[9] = 1;
    rpc_client *nodes[CLUSTER_MAX_NODES + 1] = {0};
    char err[256] = "";
    set_diff *diffs = calloc(COPIES_MAX_REPORTED, sizeof(*diffs));
    int n = 0;
    long lost = 0;
    int64_t until = clock_mono_now().ms + deadline_ms;
    run_phase(r, "comparing the copies of every partition");
    for (int attempt = 0; diffs != NULL; attempt++) {
        pmap *pm = NULL;
        if (nodecall_map(cluster_coordinator_url(r->cl), &pm, err, sizeof(err)) != 0) {
            n = 1;
            snprintf(diffs[0].where, sizeof(diffs[0].where), "the partition map");
            snprintf(diffs[0].found, sizeof(diffs[0].found), "not read: %s", err);
        } else {
            open_nodes(pm, nodes,
                       cluster_nodes(r->cl) < CLUSTER_MAX_NODES ? cluster_nodes(r->cl)
                                                                : CLUSTER_MAX_NODES);
            lost = 0;
            out->sets_compared = compare_sets(r, pm, nodes, diffs, &n, &lost);
            pmap_free(pm);
        }
        if (n == 0) {
            flog_add(r, "every copy of %ld partitions identical after %d reads", out->sets_compared,
                     attempt + 1);
            if (lost > 0) {
                flog_add(r,
                         "%ld GSI or stream-shard copies on nodes whose data dir was removed "
                         "refused as missing records (left out; the others agreed)",
                         lost);
            }
            break;
        }
        if (clock_mono_now().ms >= until) {
            for (int i = 0; i < n; i++) {
                check_add(out, 9, diffs[i].where, NULL, 0, diffs[i].found,
                          "every copy in the in-sync set, with the same items and log position "
                          "(a shard: the same records; a GSI partition: the same entries)");
            }
            break;
        }
        clock_sleep_ms(500);
    }
    free(diffs);
    for (int i = 0; i <= CLUSTER_MAX_NODES; i++) {
        rpc_client_close(nodes[i]);
    }
}
