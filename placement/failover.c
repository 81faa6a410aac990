/* failover.c: replica set membership changes (contract in failover.h). */
#include "failover.h"

#include <stdlib.h>

#include "../common/lapse_err.h"

/* The set's in-sync bits, made explicit (an old map's 0 means all). */
static uint32_t in_sync_bits(const pmap_replicas *r)
{
    return r->in_sync != 0 ? r->in_sync : (1u << r->n) - 1;
}

/* Notes, once a change of r leaves its primary the only copy in sync, the
 * member that left last (out): it holds every acknowledged write, since
 * none is acknowledged with one copy in sync. With more in sync, none. */
static void note_last_out(pmap_replicas *r, uint32_t out)
{
    r->last_out = __builtin_popcount(in_sync_bits(r)) == 1 ? out : 0;
}

/* Makes member f (in sync or last_out) the primary of r: swaps it with the
 * old primary, which leaves the in-sync set; the epoch goes up. */
static void promote(pmap_replicas *r, uint32_t f, uint32_t bits)
{
    uint32_t old = r->ids[0];
    r->ids[0] = r->ids[f];
    r->ids[f] = old;
    r->in_sync = (bits & ~(1u | 1u << f)) | 1u; /* the new primary in, the old out */
    r->epoch = pmap_epoch(r) + 1;
    note_last_out(r, old);
    r->handing_since = 0; /* whatever handover was under way is over */
    r->handing_to = 0;
}

/* Applies node id's DOWN to one set; returns what it did (0: nothing,
 * 1: shrunk, 2: promoted, 3: stranded). */
static int fail_in_set(pmap_replicas *r, uint32_t id)
{
    int i = pmap_replicas_index(r, id);
    if (r->n < 2 || i < 0) {
        return 0;
    }
    if (!pmap_in_sync(r, (uint32_t)i)) {
        r->changes++; /* cancels a join its primary may have asked */
        return 0;
    }
    uint32_t bits = in_sync_bits(r);
    if (i > 0) {
        r->in_sync = bits & ~(1u << i);
        r->changes++;
        note_last_out(r, id);
        return 1;
    }
    uint32_t f = 1;
    while (f < r->n && !(bits >> f & 1u)) {
        f++;
    }
    if (f == r->n) {
        return 3; /* left as it is */
    }
    promote(r, f, bits);
    r->changes++;
    return 2;
}

/* Applies the loss of node id's copy (its data dir) to one set: as a
 * follower, or as a primary with an in-sync follower, as fail_in_set; as
 * the only copy in sync, the member that left the in-sync set last takes
 * over (it holds every acknowledged write), alone in sync. Returns as
 * fail_in_set, 4 for that takeover, 3 when no member is known to hold
 * every acknowledged write. */
static int lose_in_set(pmap_replicas *r, uint32_t id)
{
    int rv = fail_in_set(r, id);
    int f = r->last_out != 0 ? pmap_replicas_index(r, r->last_out) : -1;
    if (rv == 3 && f > 0) {
        promote(r, (uint32_t)f, in_sync_bits(r));
        r->changes++;
        r->last_out = 0; /* the lost copy holds nothing */
        return 4;
    }
    if (rv != 3) {
        /* A set whose last_out was id: that copy holds nothing now. */
        r->last_out = r->last_out == id ? 0 : r->last_out;
    }
    return rv;
}

/* Applies fn (fail_in_set or lose_in_set) of node id to every replicated
 * base partition of pm, counting what it did into *out (may be NULL). */
static void each_set(pmap *pm, uint32_t id, int (*fn)(pmap_replicas *, uint32_t),
                     pmap_failover *out)
{
    pmap_failover f = {0};
    for (size_t t = 0; t < pm->ntables; t++) {
        pmap_table *tb = &pm->tables[t];
        if (schema_replication(&tb->schema) < 2) {
            continue;
        }
        for (uint32_t p = 0; p < tb->schema.partitions; p++) {
            switch (fn(&tb->parts[p], id)) {
            case 1:
                f.shrunk++;
                break;
            case 2:
                f.promoted++;
                break;
            case 3:
                f.stranded++;
                break;
            case 4:
                f.recovered++;
                break;
            default:
                break;
            }
        }
    }
    if (out != NULL) {
        *out = f;
    }
}

void pmap_fail_node(pmap *pm, uint32_t id, pmap_failover *out)
{
    each_set(pm, id, fail_in_set, out);
}

void pmap_lose_node_copies(pmap *pm, uint32_t id, pmap_failover *out)
{
    each_set(pm, id, lose_in_set, out);
}

uint32_t pmap_min_in_sync(const pmap_replicas *r, uint32_t rf)
{
    uint32_t need = r->n < PMAP_MIN_IN_SYNC ? r->n : PMAP_MIN_IN_SYNC;
    return rf < need ? rf : need;
}

int pmap_logged(const pmap_table *t, uint32_t part, uint32_t self)
{
    if (schema_replication(&t->schema) >= 2) {
        return 1;
    }
    if (part != PMAP_ANY_PART) {
        const pmap_replicas *r = pmap_part(t, part);
        return r != NULL && (r->n >= 2 || r->ids[0] != self);
    }
    for (uint32_t p = 0; p < t->schema.partitions; p++) {
        if (t->parts[p].n >= 2) {
            return 1;
        }
    }
    return 0;
}

/* The set of base partition part of table table_id, or NULL. */
static pmap_replicas *set_of(pmap *pm, uint32_t table_id, uint32_t part)
{
    for (size_t i = 0; i < pm->ntables; i++) {
        pmap_table *t = &pm->tables[i];
        if (t->schema.id == table_id) {
            return part < t->schema.partitions && t->parts[part].n > 0 ? &t->parts[part] : NULL;
        }
    }
    return NULL;
}

/* The set of partition part of table_id whose primary at epoch is
 * primary_id, and follower id's index in it; 0 or the error of
 * pmap_replica_join. */
static int follower_of(pmap *pm, uint32_t table_id, uint32_t part, uint32_t primary_id,
                       uint64_t epoch, uint32_t id, pmap_replicas **set, int *idx)
{
    pmap_replicas *r = set_of(pm, table_id, part);
    if (r == NULL) {
        return LAPSE_ENOTFOUND;
    }
    if (r->ids[0] != primary_id || pmap_epoch(r) != epoch) {
        return LAPSE_EWRONGNODE;
    }
    int i = pmap_replicas_index(r, id);
    if (i <= 0) {
        return LAPSE_EINVAL;
    }
    *set = r;
    *idx = i;
    return 0;
}

int pmap_replica_join(pmap *pm, uint32_t table_id, uint32_t part, uint32_t primary_id,
                      uint64_t epoch, uint32_t id, uint64_t changes)
{
    pmap_replicas *r = NULL;
    int i = 0;
    int rv = follower_of(pm, table_id, part, primary_id, epoch, id, &r, &i);
    if (rv == 0 && !pmap_in_sync(r, (uint32_t)i)) {
        if (r->changes != changes) {
            return LAPSE_ESTATE;
        }
        r->in_sync = in_sync_bits(r) | 1u << i;
        r->changes++;
        r->last_out = 0; /* two in sync again */
    }
    return rv;
}

int pmap_replica_shrink(pmap *pm, uint32_t table_id, uint32_t part, uint32_t primary_id,
                        uint64_t epoch, uint32_t id)
{
    pmap_replicas *r = NULL;
    int i = 0;
    int rv = follower_of(pm, table_id, part, primary_id, epoch, id, &r, &i);
    if (rv != 0) {
        return rv;
    }
    if (!pmap_in_sync(r, (uint32_t)i)) {
        r->changes++; /* cancels a join its primary may have asked */
        return 0;
    }
    uint32_t bits = in_sync_bits(r) & ~(1u << i);
    const pmap_table *t = pmap_table_find_id(pm, table_id);
    if ((uint32_t)__builtin_popcount(bits) < pmap_min_in_sync(r, schema_replication(&t->schema))) {
        return LAPSE_EUNAVAILABLE;
    }
    r->in_sync = bits;
    r->changes++;
    return 0;
}

size_t pmap_promotions(const pmap *old, const pmap *new, uint32_t id)
{
    size_t n = 0;
    for (size_t t = 0; t < new->ntables; t++) {
        const pmap_table *nt = &new->tables[t];
        const pmap_table *ot = pmap_table_find_id(old, nt->schema.id);
        if (ot == NULL || schema_replication(&nt->schema) < 2 ||
            ot->schema.partitions != nt->schema.partitions) {
            continue;
        }
        for (uint32_t p = 0; p < nt->schema.partitions; p++) {
            const pmap_replicas *a = pmap_part(ot, p), *b = pmap_part(nt, p);
            n += a != NULL && b != NULL && b->ids[0] == id && a->ids[0] != id &&
                 pmap_epoch(b) > pmap_epoch(a);
        }
    }
    return n;
}

uint64_t pmap_primary_changes(const pmap *pm)
{
    uint64_t n = 0;
    for (size_t t = 0; t < pm->ntables; t++) {
        const pmap_table *tb = &pm->tables[t];
        if (schema_replication(&tb->schema) < 2) {
            continue;
        }
        for (uint32_t p = 0; p < tb->schema.partitions; p++) {
            const pmap_replicas *r = pmap_part(tb, p);
            n += r != NULL ? pmap_epoch(r) - 1 : 0;
        }
    }
    return n;
}

/* ============================== moves ============================== */

int pmap_replica_add(pmap *pm, uint32_t table_id, uint32_t part, uint32_t id)
{
    pmap_replicas *r = set_of(pm, table_id, part);
    if (r == NULL) {
        return LAPSE_ENOTFOUND;
    }
    if (id == 0 || pmap_node_find(pm, id) == NULL) {
        return LAPSE_EINVAL;
    }
    if (pmap_replicas_index(r, id) >= 0) {
        return LAPSE_EEXISTS;
    }
    if (r->n >= PMAP_MAX_REPLICAS) {
        return LAPSE_EUNAVAILABLE;
    }
    r->in_sync = in_sync_bits(r); /* explicit before n grows: an old map's 0 means all */
    r->ids[r->n++] = id;
    r->epoch = pmap_epoch(r) > 0 ? r->epoch : 1;
    r->changes++;
    return 0;
}

int pmap_replica_handover(pmap *pm, uint32_t table_id, uint32_t part, uint32_t to)
{
    pmap_replicas *r = set_of(pm, table_id, part);
    if (r == NULL) {
        return LAPSE_ENOTFOUND;
    }
    int f = pmap_replicas_index(r, to);
    if (f <= 0) {
        return LAPSE_EINVAL;
    }
    uint32_t bits = in_sync_bits(r);
    if (!(bits >> f & 1u)) {
        return LAPSE_ESTATE;
    }
    promote(r, (uint32_t)f, bits);
    r->changes++;
    return 0;
}

int pmap_replica_remove(pmap *pm, uint32_t table_id, uint32_t part, uint32_t id)
{
    pmap_replicas *r = set_of(pm, table_id, part);
    if (r == NULL) {
        return LAPSE_ENOTFOUND;
    }
    int i = pmap_replicas_index(r, id);
    if (i < 0) {
        return LAPSE_EINVAL;
    }
    if (i == 0) {
        return LAPSE_ESTATE; /* the primary: hand it over first */
    }
    uint32_t bits = in_sync_bits(r);
    uint32_t low = bits & ((1u << i) - 1), high = bits >> (i + 1);
    uint32_t next = low | high << i;
    uint32_t want = r->n - 1 < PMAP_MIN_IN_SYNC ? r->n - 1 : PMAP_MIN_IN_SYNC;
    /* The last_out is kept as the one other copy of every acknowledged
     * write, for a table that keeps two copies or more; a one-copy table's
     * old primary, handed over from, is one copy more than it keeps. */
    const pmap_table *t = pmap_table_find_id(pm, table_id);
    int keep_last_out = id == r->last_out && schema_replication(&t->schema) >= 2;
    if (((bits >> i & 1u) && (uint32_t)__builtin_popcount(next) < want) || keep_last_out) {
        return LAPSE_EUNAVAILABLE;
    }
    for (uint32_t k = (uint32_t)i; k + 1 < r->n; k++) {
        r->ids[k] = r->ids[k + 1];
    }
    r->ids[--r->n] = 0;
    r->in_sync = next;
    r->leaving = r->leaving == id ? 0 : r->leaving;
    r->handing_to = r->handing_to == id ? 0 : r->handing_to;
    r->last_out = r->last_out == id ? 0 : r->last_out;
    r->changes++;
    return 0;
}

int pmap_replica_step_down(pmap *pm, uint32_t table_id, uint32_t part, uint32_t to, uint64_t since)
{
    pmap_replicas *r = set_of(pm, table_id, part);
    if (r == NULL) {
        return LAPSE_ENOTFOUND;
    }
    int f = to != 0 ? pmap_replicas_index(r, to) : -1;
    if (to != 0 && f <= 0) {
        return LAPSE_EINVAL;
    }
    if (to != 0 && !(in_sync_bits(r) >> f & 1u)) {
        return LAPSE_ESTATE;
    }
    if (r->handing_since != 0) {
        return LAPSE_ESTATE; /* under way already */
    }
    r->handing_since = since;
    r->handing_to = to;
    return 0;
}

uint32_t pmap_handover_target(const pmap_replicas *r)
{
    if (r->handing_since == 0) {
        return 0;
    }
    int f = r->handing_to != 0 ? pmap_replicas_index(r, r->handing_to) : -1;
    if (f > 0 && pmap_in_sync(r, (uint32_t)f)) {
        return r->handing_to;
    }
    for (uint32_t k = 1; k < r->n; k++) {
        if (pmap_in_sync(r, k) && r->ids[k] != r->leaving) {
            return r->ids[k];
        }
    }
    return 0;
}

/* ============================== rebalancing ============================== */

/* Whether node id takes part in rebalancing: UP and not draining. */
static int balanced_node(const pmap *pm, uint32_t id)
{
    const pmap_node *n = pmap_node_find(pm, id);
    return n != NULL && n->state == PMAP_NODE_UP && !n->draining;
}

/* A set the planner may move a copy of: as many members as its table
 * keeps, all in sync, nothing leaving, every member taking part. */
static int settled(const pmap *pm, const pmap_replicas *r, uint32_t rf)
{
    if (r->n != rf || r->leaving != 0 || r->handing_since != 0 ||
        __builtin_popcount(in_sync_bits(r)) != (int)r->n) {
        return 0;
    }
    for (uint32_t k = 0; k < r->n; k++) {
        if (!balanced_node(pm, r->ids[k])) {
            return 0;
        }
    }
    return 1;
}

/* Whether set (table_id, part) has a move or handover in out[0..n). */
static int planned(const pmap_move *out, size_t n, uint32_t table_id, uint32_t part)
{
    for (size_t m = 0; m < n; m++) {
        if (out[m].table_id == table_id && out[m].part == part) {
            return 1;
        }
    }
    return 0;
}

/* The index in pm->nodes of node id, or pm->nnodes. */
static size_t node_index(const pmap *pm, uint32_t id)
{
    size_t i = 0;
    while (i < pm->nnodes && pm->nodes[i].id != id) {
        i++;
    }
    return i;
}

/*
 * The second phase of pmap_rebalance_plan, once copies are balanced: up to
 * max handovers into out that bring every node taking part within one of
 * the others' count of replicated base sets it leads. Each round takes,
 * over the settled sets not planned yet, the handover from the primary to
 * the follower whose counts differ most (by two at least: a handover then
 * lowers the spread, so rounds end), lowest table and partition first on
 * ties. Budget: max rounds, each a walk of the map's replicated base sets.
 * Returns how many were planned.
 */
static size_t plan_handovers(const pmap *pm, pmap_move *out, size_t max)
{
    size_t nn = pm->nnodes, nsets = 0, n = 0;
    for (size_t t = 0; t < pm->ntables; t++) {
        nsets += pm->tables[t].schema.partitions;
    }
    size_t *lead = calloc(nn > 0 ? nn : 1, sizeof(*lead));
    uint8_t *taken = calloc(nsets > 0 ? nsets : 1, 1); /* by set: planned already */
    if (lead == NULL || taken == NULL) {
        free(lead);
        free(taken);
        return 0;
    }
    for (size_t t = 0; t < pm->ntables; t++) {
        const pmap_table *tb = &pm->tables[t];
        for (uint32_t p = 0; schema_replication(&tb->schema) >= 2 && p < tb->schema.partitions;
             p++) {
            size_t i = node_index(pm, tb->parts[p].ids[0]);
            lead[i] += i < nn;
        }
    }
    while (n < max) {
        pmap_move best = {0};
        size_t best_gap = 1, bf = nn, bt = nn, bset = 0;
        for (size_t t = 0, base = 0; t < pm->ntables; base += pm->tables[t++].schema.partitions) {
            const pmap_table *tb = &pm->tables[t];
            uint32_t rf = schema_replication(&tb->schema);
            for (uint32_t p = 0; rf >= 2 && p < tb->schema.partitions; p++) {
                const pmap_replicas *r = &tb->parts[p];
                if (taken[base + p] || !settled(pm, r, rf)) {
                    continue;
                }
                size_t f = node_index(pm, r->ids[0]);
                for (uint32_t k = 1; f < nn && k < r->n; k++) {
                    size_t to = node_index(pm, r->ids[k]);
                    if (to < nn && lead[f] > lead[to] + best_gap) {
                        best_gap = lead[f] - lead[to];
                        best = (pmap_move){tb->schema.id, p, r->ids[0], r->ids[k], 1};
                        bf = f;
                        bt = to;
                        bset = base + p;
                    }
                }
            }
        }
        if (bf == nn) {
            break;
        }
        out[n++] = best;
        taken[bset] = 1;
        lead[bf]--;
        lead[bt]++;
    }
    free(lead);
    free(taken);
    return n;
}

/* Finds a move of a copy from node from to node to for out[n]: a settled
 * set holding from and not to, not planned yet, whose copies stay in as
 * many zones (docs/replication.md, "Zones"); a follower's copy first (no
 * handover), then a primary's. *zone_bound (unless NULL) is set when a set
 * was passed over for its zones alone. 1: found (out[n] set), else 0. */
static int find_move(const pmap *pm, pmap_move *out, size_t n, uint32_t from, uint32_t to,
                     int *zone_bound)
{
    for (int want_primary = 0; want_primary < 2; want_primary++) {
        for (size_t t = 0; t < pm->ntables; t++) {
            const pmap_table *tb = &pm->tables[t];
            uint32_t rf = schema_replication(&tb->schema);
            for (uint32_t p = 0; p < tb->schema.partitions; p++) {
                const pmap_replicas *r = &tb->parts[p];
                int i = pmap_replicas_index(r, from);
                if (i < 0 || (i == 0) != want_primary || pmap_replicas_index(r, to) >= 0 ||
                    !settled(pm, r, rf) || planned(out, n, tb->schema.id, p)) {
                    continue;
                }
                if (!pmap_move_keeps_zones(pm, r, from, to)) {
                    if (zone_bound != NULL) {
                        *zone_bound = 1;
                    }
                    continue;
                }
                out[n] = (pmap_move){tb->schema.id, p, from, to, 0};
                return 1;
            }
        }
    }
    return 0;
}

/* With zones, the most and the fewest loaded nodes may have no move
 * between them that keeps a set's zones: the move between the pair of
 * nodes taking part whose counts differ most (by two at least) that has
 * one, into out[n]. 1: found, *hi and *lo its nodes' indexes in pm. */
static int find_zoned_move(const pmap *pm, const size_t *count, pmap_move *out, size_t n,
                           size_t *hi, size_t *lo)
{
    size_t nn = pm->nnodes, best_gap = 1;
    int found = 0;
    for (size_t i = 0; i < nn; i++) {
        for (size_t j = 0; j < nn; j++) {
            if (!balanced_node(pm, pm->nodes[i].id) || !balanced_node(pm, pm->nodes[j].id) ||
                count[i] <= count[j] + best_gap) {
                continue;
            }
            /* only pairs further apart than the best so far: out[n] ends
             * as the best pair's move */
            if (find_move(pm, out, n, pm->nodes[i].id, pm->nodes[j].id, NULL)) {
                best_gap = count[i] - count[j];
                *hi = i;
                *lo = j;
                found = 1;
            }
        }
    }
    return found;
}

size_t pmap_rebalance_plan(const pmap *pm, pmap_move *out, size_t max, size_t max_handovers)
{
    size_t nn = pm->nnodes, n = 0;
    size_t *count = calloc(nn > 0 ? nn : 1, sizeof(*count));
    if (count == NULL) {
        return 0;
    }
    int balanced = 0;
    for (size_t i = 0; i < nn; i++) {
        count[i] =
            pmap_partitions_owned(pm, pm->nodes[i].id) + pmap_follower_copies(pm, pm->nodes[i].id);
    }
    while (n < max) {
        size_t hi = nn, lo = nn;
        for (size_t i = 0; i < nn; i++) {
            if (!balanced_node(pm, pm->nodes[i].id)) {
                continue;
            }
            hi = hi == nn || count[i] > count[hi] ? i : hi;
            lo = lo == nn || count[i] < count[lo] ? i : lo;
        }
        if (hi == nn || count[hi] <= count[lo] + 1) {
            balanced = 1;
            break;
        }
        int zone_bound = 0;
        if (!find_move(pm, out, n, pm->nodes[hi].id, pm->nodes[lo].id, &zone_bound)) {
            if (!zone_bound) {
                break;
            }
            /* Zones keep these two apart: another pair, else the copies
             * are as even as the zones let them be. */
            if (!find_zoned_move(pm, count, out, n, &hi, &lo)) {
                balanced = 1;
                break;
            }
        }
        n++;
        count[hi]--;
        count[lo]++;
    }
    free(count);
    /* Copies balanced: then primaries, by handovers. */
    return balanced && n == 0 ? plan_handovers(pm, out, max < max_handovers ? max : max_handovers)
                              : n;
}

int pmap_move_start(pmap *pm, const pmap_move *m, uint64_t since)
{
    pmap_replicas *r = set_of(pm, m->table_id, m->part);
    if (r == NULL) {
        return LAPSE_ENOTFOUND;
    }
    if (m->handover) {
        return r->ids[0] != m->from || r->leaving != 0
                   ? LAPSE_EINVAL
                   : pmap_replica_step_down(pm, m->table_id, m->part, m->to, since);
    }
    if (pmap_replicas_index(r, m->from) < 0 || r->leaving != 0) {
        return LAPSE_EINVAL;
    }
    int rv = pmap_replica_add(pm, m->table_id, m->part, m->to);
    if (rv == 0) {
        r->leaving = m->from;
    }
    return rv;
}
