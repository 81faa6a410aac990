/*
 * itemserve.c: the PartitionItems call (logship.h): a page of the items of
 * a replicated base partition this node leads, for a node whose GSI copies
 * lost records and are filled from the items (node/gsi_fill.c;
 * docs/replication.md, "A copy that lost records").
 *
 * The page is read from a RocksDB snapshot, which also gives the outbox
 * seq it stands at (P). The items may include writes no follower holds
 * yet: a failover could take those back, and an entry the fill put for
 * one would then be deleted by no record ever. So the page is answered
 * only once the outbox is shippable through P (logship_outbox_limit: every
 * member the primary waits for holds the writes that made records 1..P),
 * waiting up to ITEMS_CONFIRM_WAIT_MS; else EUNAVAILABLE and the asker
 * tries again.
 */
#include <stdio.h>
#include <string.h>

#include "../common/clock.h"
#include "../common/lapse_err.h"
#include "../partition/snapshot.h"
#include "logship_int.h"

#define ITEMS_MAX_BYTES (1024 * 1024)
#define ITEMS_CONFIRM_WAIT_MS 1500

/* The page under construction, in the call's arena. */
typedef struct items_page {
    arena *a;
    Lapse__SnapshotEntry **v;
    size_t n, cap;
} items_page;

static int page_add(void *arg, const snapshot_entry *se)
{
    items_page *pg = arg;
    if (pg->n == pg->cap) {
        size_t cap = pg->cap ? pg->cap * 2 : 64;
        Lapse__SnapshotEntry **v = arena_alloc(pg->a, cap * sizeof(*v));
        if (v == NULL) {
            return LAPSE_ENOMEM;
        }
        if (pg->n > 0) {
            memcpy(v, pg->v, pg->n * sizeof(*v));
        }
        pg->v = v;
        pg->cap = cap;
    }
    Lapse__SnapshotEntry *e = arena_alloc(pg->a, sizeof(*e));
    uint8_t *k = arena_alloc(pg->a, se->klen ? se->klen : 1);
    uint8_t *val = arena_alloc(pg->a, se->vlen ? se->vlen : 1);
    if (e == NULL || k == NULL || val == NULL) {
        return LAPSE_ENOMEM;
    }
    lapse__snapshot_entry__init(e);
    e->family = se->family;
    memcpy(k, se->key, se->klen);
    memcpy(val, se->val, se->vlen);
    e->key.data = k;
    e->key.len = se->klen;
    e->value.data = val;
    e->value.len = se->vlen;
    pg->v[pg->n++] = e;
    return 0;
}

/* Whether this node leads (table_id, part) in its map now; the table's
 * schema, copied, into *t. 0 or LAPSE_EWRONGNODE with err. */
static int leads(logship *ls, uint32_t table_id, uint32_t part, table_schema *t, char *err,
                 size_t errlen)
{
    node_map *m = maps_acquire(ls->ns);
    int rv = 0;
    if (logship_led(ls, m, table_id, part, NULL, &rv, err, errlen) != NULL) {
        *t = pmap_table_find_id(m->pm, table_id)->schema;
    }
    maps_release(m);
    return rv;
}

void logship_items(const logship_call *c)
{
    const Lapse__PartitionItemsRequest *r = c->req->partition_items;
    if (logship_check_call(c, r, "PartitionItems") != 0) {
        return;
    }
    logship *ls = c->ns->logship;
    char err[512] = "";
    table_schema t;
    int rv = leads(ls, r->table_id, r->partition, &t, err, sizeof(err));
    snapshot *sn = NULL;
    uint64_t last = 0;
    int done = 0;
    items_page pg = {.a = c->a};
    if (rv == 0) {
        rv = snapshot_open_items(&sn, c->ns->st, r->table_id, r->partition, r->after_key.data,
                                 r->after_key.len, &last, err, sizeof(err));
    }
    if (rv == 0) {
        size_t max =
            r->max_bytes == 0 || r->max_bytes > ITEMS_MAX_BYTES ? ITEMS_MAX_BYTES : r->max_bytes;
        rv = snapshot_next(sn, max, page_add, &pg, &done, err, sizeof(err));
        if (rv == LAPSE_ENOMEM) {
            snprintf(err, sizeof(err), "out of memory");
        }
    }
    snapshot_close(sn);
    clock_mono deadline = clock_mono_after_ms(ITEMS_CONFIRM_WAIT_MS);
    while (rv == 0 && logship_outbox_limit(ls, &t, r->partition, last) < last) {
        if (clock_mono_remaining_ms(deadline) <= 0) {
            snprintf(err, sizeof(err),
                     "table %u partition %u: its followers have not confirmed the writes through "
                     "outbox record %llu yet",
                     (unsigned)r->table_id, (unsigned)r->partition, (unsigned long long)last);
            rv = LAPSE_EUNAVAILABLE;
            break;
        }
        clock_sleep_ms(5);
    }
    if (rv != 0) {
        rpc_set_error(c->resp, c->a, rv, "%s", err);
        return;
    }
    Lapse__PartitionItemsResponse *out = arena_alloc(c->a, sizeof(*out));
    if (out == NULL) {
        rpc_set_error(c->resp, c->a, LAPSE_ENOMEM, "out of memory");
        return;
    }
    lapse__partition_items_response__init(out);
    out->items = pg.v;
    out->n_items = pg.n;
    out->done = done;
    out->outbox_seq = last;
    c->resp->body_case = LAPSE__RESPONSE__BODY_PARTITION_ITEMS;
    c->resp->partition_items = out;
}
