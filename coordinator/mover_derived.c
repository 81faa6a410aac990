/*
 * mover_derived.c: moving the copies of GSI partitions and stream shards
 * off leaving nodes (mover.h, "GSI and stream copies";
 * placement/derived.h).
 */
#include <stdlib.h>
#include <string.h>

#include "../common/log.h"
#include "../placement/derived.h"
#include "mover.h"
#include "replstatus.h"

/* The first member of r that leaves it (a draining or removed node, or
 * the rebalancer's leaving copy) other than its joining copy; 0: none. */
static uint32_t leaving_member(const pmap *pm, const pmap_replicas *r)
{
    for (uint32_t k = 0; k < r->n; k++) {
        uint32_t id = r->ids[k];
        if (id != r->joining && (id == r->leaving || pmap_node_leaving(pm, id))) {
            return id;
        }
    }
    return 0;
}

/* Whether list r has a move to make or finish. */
static int list_moving(const pmap *pm, const pmap_replicas *r)
{
    return r->joining != 0 || leaving_member(pm, r) != 0;
}

/* Whether list r of t is lost: no copy of it is left (pmap_set_lost), or
 * a base partition of t is (pmap_table_lost), so a new copy would wait
 * for ever on a source that is gone. It no longer moves: it is counted
 * lost (mover_derived_count). */
static int list_lost(const pmap *pm, const pmap_table *t, const pmap_replicas *r, int tlost)
{
    (void)t;
    return tlost || pmap_set_lost(pm, r);
}

/* Calls fn on every GSI partition and stream shard list of t (of map pm)
 * that is lost (lost 1) or not (lost 0; list_lost). Stops at, and
 * returns, the first non-zero fn returns. */
static int each_list(const pmap *pm, pmap_table *t, int lost,
                     int (*fn)(pmap_table *t, pmap_replicas *r, void *arg), void *arg)
{
    int rv = 0;
    const int tlost = pmap_table_lost(pm, t);
    for (uint32_t g = 0; g < t->schema.ngsi && rv == 0; g++) {
        for (uint32_t q = 0; q < t->schema.gsi[g].partitions && rv == 0; q++) {
            pmap_replicas *r = pmap_derived_list(t, (int)g, q);
            if (list_lost(pm, t, r, tlost) == lost) {
                rv = fn(t, r, arg);
            }
        }
    }
    for (uint32_t p = 0; t->stream_shards != NULL && p < t->schema.partitions && rv == 0; p++) {
        pmap_replicas *r = pmap_derived_list(t, -1, p);
        if (list_lost(pm, t, r, tlost) == lost) {
            rv = fn(t, r, arg);
        }
    }
    return rv;
}

static int moving_fn(pmap_table *t, pmap_replicas *r, void *arg)
{
    (void)t;
    return list_moving(arg, r);
}

int mover_derived_has_work(const pmap *pm)
{
    for (size_t i = 0; i < pm->ntables; i++) {
        /* each_list does not change the lists moving_fn is given */
        if (each_list(pm, (pmap_table *)&pm->tables[i], 0, moving_fn, (void *)pm)) {
            return 1;
        }
    }
    return 0;
}

/* What counting a node's copies looks for. */
typedef struct count_arg {
    const pmap *pm;
    uint32_t id;
    mover_left *out;
} count_arg;

static int count_fn(pmap_table *t, pmap_replicas *r, void *arg)
{
    (void)t;
    count_arg *c = arg;
    if (pmap_replicas_index(r, c->id) >= 0) {
        c->out->derived++;
        c->out->moving += r->joining != 0;
    }
    return 0;
}

static int lost_fn(pmap_table *t, pmap_replicas *r, void *arg)
{
    count_arg *c = arg;
    if (pmap_replicas_index(r, c->id) >= 0) {
        c->out->lost++;
        if (c->out->lost_table == NULL) {
            c->out->lost_table = t->schema.name;
        }
    }
    return 0;
}

void mover_derived_count(const pmap *pm, uint32_t id, mover_left *out)
{
    count_arg c = {pm, id, out};
    for (size_t i = 0; i < pm->ntables; i++) {
        /* each_list does not change the lists count_fn and lost_fn are given */
        (void)each_list(pm, (pmap_table *)&pm->tables[i], 0, count_fn, &c);
        (void)each_list(pm, (pmap_table *)&pm->tables[i], 1, lost_fn, &c);
    }
}

/* The node to take a new copy of list r for its member leaving: UP,
 * neither draining nor removed, not in r; in a zone no other member is
 * in, if there is one (docs/replication.md, "Zones"); holding fewest GSI
 * and stream copies (held[i] for pm->nodes[i]), ties to the lowest id; -1:
 * none. */
static long target_for(const pmap *pm, const pmap_replicas *r, uint32_t leaving, const size_t *held)
{
    long best = -1;
    int best_zoned = 0;
    for (size_t i = 0; i < pm->nnodes; i++) {
        const pmap_node *n = &pm->nodes[i];
        if (n->state != PMAP_NODE_UP || pmap_node_leaving(pm, n->id) ||
            pmap_replicas_index(r, n->id) >= 0) {
            continue;
        }
        int zoned = pmap_zone_held(pm, r, n->id, leaving);
        if (best < 0 || zoned < best_zoned ||
            (zoned == best_zoned &&
             (held[i] < held[best] || (held[i] == held[best] && n->id < pm->nodes[best].id)))) {
            best = (long)i;
            best_zoned = zoned;
        }
    }
    return best;
}

/* One pass over the lists of a map: its counts and what it did. */
typedef struct dpass {
    server *s;
    pmap *next;
    uint64_t since;
    size_t *held; /* per next->nodes[i]: GSI and stream copies */
    mover_derived_done done;
} dpass;

/* Node id's index in pm->nodes, or -1. */
static long node_index(const pmap *pm, uint32_t id)
{
    for (size_t i = 0; i < pm->nnodes; i++) {
        if (pm->nodes[i].id == id) {
            return (long)i;
        }
    }
    return -1;
}

/* Finishes the move of list r of t whose copy is joining: the copy goes
 * again when its own node leaves or is down (no client reads it yet, and
 * the next pass adds one on an UP node: a move does not wait for a dead
 * node); once its node reported t's copies whole with the map that added
 * it, the leaving member goes (or, with none left to replace, the new
 * copy, an extra one). */
static void finish(dpass *d, const pmap_table *t, pmap_replicas *r)
{
    uint32_t j = r->joining;
    const pmap_node *n = pmap_node_find(d->next, j);
    if (n == NULL || pmap_node_leaving(d->next, j) || n->state != PMAP_NODE_UP) {
        d->done.dropped += pmap_derived_drop(r, j) == 0;
        return;
    }
    if (!replstatus_copies_whole(d->s, j, t->schema.id, r->joining_since)) {
        return;
    }
    uint32_t leave = leaving_member(d->next, r);
    if (leave == 0) {
        d->done.dropped += pmap_derived_drop(r, j) == 0; /* the drain was called off */
        return;
    }
    if (pmap_derived_settle(r, leave) == 0) {
        d->done.settled++;
        long k = node_index(d->next, leave);
        if (k >= 0 && d->held[k] > 0) {
            d->held[k]--;
        }
    }
}

static int step_fn(pmap_table *t, pmap_replicas *r, void *arg)
{
    dpass *d = arg;
    if (r->joining != 0) {
        finish(d, t, r);
        return 0;
    }
    uint32_t leave = leaving_member(d->next, r);
    if (leave == 0) {
        return 0;
    }
    long to = target_for(d->next, r, leave, d->held);
    if (to < 0 || pmap_derived_add(r, d->next->nodes[to].id, d->since) != 0) {
        d->done.stuck++;
        return 0;
    }
    d->held[to]++;
    d->done.added++;
    return 0;
}

/* A lost list (list_lost) moves no more: a copy joining it, which would
 * wait for ever on what is gone, goes again. */
static int lost_step_fn(pmap_table *t, pmap_replicas *r, void *arg)
{
    (void)t;
    dpass *d = arg;
    if (r->joining != 0) {
        d->done.dropped += pmap_derived_drop(r, r->joining) == 0;
    }
    return 0;
}

/* What rebalancing looks for: a settled list holding from and not to,
 * whose copies stay in as many zones with to for from. */
typedef struct find_arg {
    const pmap *pm;
    uint32_t from, to;
    pmap_replicas *found;
} find_arg;

static int find_fn(pmap_table *t, pmap_replicas *r, void *arg)
{
    (void)t;
    find_arg *f = arg;
    if (!list_moving(f->pm, r) && pmap_replicas_index(r, f->from) >= 0 &&
        pmap_replicas_index(r, f->to) < 0 && pmap_move_keeps_zones(f->pm, r, f->from, f->to)) {
        f->found = r;
        return 1;
    }
    return 0;
}

/* The next rebalancing move on pm whose UP nodes, none leaving, hold c[i]
 * GSI and stream copies (per pm->nodes[i]): a settled list holding the
 * fullest node and not the emptiest, when they are more than one apart
 * and the zones allow it (find_fn); NULL when none. *hi and *lo get their
 * indexes. */
static pmap_replicas *next_move(const pmap *pm, const size_t *c, long *hi, long *lo)
{
    *hi = *lo = -1;
    for (size_t i = 0; i < pm->nnodes; i++) {
        const pmap_node *nd = &pm->nodes[i];
        if (nd->state != PMAP_NODE_UP || pmap_node_leaving(pm, nd->id)) {
            continue;
        }
        *hi = *hi < 0 || c[i] > c[*hi] ? (long)i : *hi;
        *lo = *lo < 0 || c[i] < c[*lo] ? (long)i : *lo;
    }
    if (*hi < 0 || c[*hi] <= c[*lo] + 1) {
        return NULL;
    }
    find_arg f = {pm, pm->nodes[*hi].id, pm->nodes[*lo].id, NULL};
    for (size_t t = 0; t < pm->ntables && f.found == NULL; t++) {
        /* each_list does not change the lists find_fn is given */
        (void)each_list(pm, (pmap_table *)&pm->tables[t], 0, find_fn, &f);
    }
    return f.found;
}

/* What held_counts fills. */
typedef struct held_arg {
    const pmap *pm;
    size_t *c;
} held_arg;

static int held_fn(pmap_table *t, pmap_replicas *r, void *arg)
{
    (void)t;
    held_arg *h = arg;
    for (uint32_t k = 0; k < r->n; k++) {
        long i = node_index(h->pm, r->ids[k]);
        if (i >= 0) {
            h->c[i]++;
        }
    }
    return 0;
}

/* Each node's GSI and stream copies in pm (per pm->nodes[i]; caller
 * frees), NULL when out of memory: one walk of the map. */
static size_t *held_counts(const pmap *pm)
{
    held_arg h = {pm, calloc(pm->nnodes ? pm->nnodes : 1, sizeof(size_t))};
    for (size_t i = 0; h.c != NULL && i < pm->ntables; i++) {
        /* each_list does not change the lists held_fn is given */
        (void)each_list(pm, (pmap_table *)&pm->tables[i], 0, held_fn, &h);
        (void)each_list(pm, (pmap_table *)&pm->tables[i], 1, held_fn, &h);
    }
    return h.c;
}

int mover_derived_unbalanced(const pmap *pm)
{
    size_t *c = held_counts(pm);
    long hi, lo;
    int yes = c != NULL && next_move(pm, c, &hi, &lo) != NULL;
    free(c);
    return yes;
}

/* Rebalancing: marks up to max copies leaving (pmap_replicas.leaving), one
 * next_move at a time, counted as if moved; step_fn then moves each.
 * Returns how many. */
static size_t plan(pmap *next, const size_t *held, size_t max)
{
    size_t *c = malloc((next->nnodes ? next->nnodes : 1) * sizeof(*c)), n = 0;
    if (c == NULL) {
        return 0;
    }
    memcpy(c, held, next->nnodes * sizeof(*c));
    long hi, lo;
    pmap_replicas *r;
    while (n < max && (r = next_move(next, c, &hi, &lo)) != NULL) {
        r->leaving = next->nodes[hi].id;
        c[hi]--;
        c[lo]++;
        n++;
    }
    free(c);
    return n;
}

void mover_derived_pass(server *s, pmap *next, uint64_t since, size_t rebalance,
                        mover_derived_done *done)
{
    dpass d = {s, next, since, held_counts(next), {0}};
    *done = (mover_derived_done){0};
    if (d.held == NULL) {
        return; /* out of memory: the next pass tries again */
    }
    if (rebalance > 0 && !mover_derived_has_work(next)) {
        d.done.rebalanced = plan(next, d.held, rebalance);
    }
    for (size_t i = 0; i < next->ntables; i++) {
        (void)each_list(next, &next->tables[i], 0, step_fn, &d);
        (void)each_list(next, &next->tables[i], 1, lost_step_fn, &d);
    }
    free(d.held);
    *done = d.done;
}
