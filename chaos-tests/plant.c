/*
 * plant.c: planted violations. See plant.h and docs/chaos.md.
 */
#include "plant.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "../common/buf.h"
#include "../common/clock.h"
#include "../common/ddbjson.h"
#include "../common/item.h"
#include "../common/change.h"
#include "../placement/hash.h"
#include "../placement/pmap.h"
#include "../rpc/rpc.h"
#include "../tests/nodecall.h"
#include "../tests/streamread.h"
#include "check_int.h"
#include "registers.h"
#include "workload.h"

static void add_plant(run *r, const char *table, const char *key)
{
    if (r->nplants < RUN_MAX_PLANTS) {
        snprintf(r->plants[r->nplants++], sizeof(r->plants[0]), "%.47s/%.40s", table, key);
    }
}

/* ============================== through the client ============================== */

void plant_client(run *r, char *what, size_t len)
{
    int64_t now = clock_wall_now().ms;
    lapse_error e;
    if (r->opt->plant == PLANT_PAUSE) {
        lapse_ttl_spec spec = {0};
        spec.action = LAPSE_TTL_PAUSE;
        int rv = lapse_update_ttl(r->admin, r->m.t[0].name, &spec, NULL, &e);
        snprintf(what, len, "%s (TTL paused)", r->m.t[0].name);
        flog_add(r, "debug: planted a violation: paused TTL on %s (%s)", r->m.t[0].name,
                 lapse_strerror(rv));
        return;
    }
    for (int ti = r->opt->plant == PLANT_EXPIRE ? 0 : 1; ti >= 0; ti--) {
        mtable *t = &r->m.t[ti];
        for (int i = 0; i < r->opt->items; i++) {
            mkey *k = &t->keys[i];
            /* expire: a key protected by an extension (invariant 3); delete:
             * one without a TTL that counts (invariant 1: a deleted key with
             * an ineligible TTL would be filed under 3). */
            int want = r->opt->plant == PLANT_EXPIRE ? MC_PROTECTED : MC_NO_TTL;
            if (!model_stable_present(t, k, now) || model_classify(t, k, now) != want) {
                continue;
            }
            char key[24];
            model_key_name(i, key, sizeof(key));
            lapse_item *kit = wl_key(t, i);
            int rv;
            if (r->opt->plant == PLANT_EXPIRE) {
                char past[64];
                snprintf(past, sizeof(past), "{\"N\":\"%" PRId64 "\"}", now / 1000 - 60);
                lapse_update *u = lapse_update_new();
                lapse_update_set(u, MODEL_TTL_ATTR, past, &e);
                rv = lapse_update_item(r->admin, t->name, kit, u, NULL, NULL, &e);
                lapse_update_free(u);
            } else {
                rv = lapse_delete(r->admin, t->name, kit, NULL, &e);
            }
            lapse_item_free(kit);
            if (rv == 0) {
                k->planted = 1; /* its stream records are not the model's */
                add_plant(r, t->name, key);
                snprintf(what, len, "%s", r->plants[r->nplants - 1]);
                flog_add(r, "debug: planted a violation: %s %s/%s behind the model's back",
                         r->opt->plant == PLANT_EXPIRE ? "set a past TTL on" : "deleted", t->name,
                         key);
                return;
            }
        }
    }
    flog_add(r, "debug: found no key to plant a violation on");
}

/* ============================== a follower left behind ============================== */

static void add_plant_where(run *r, const char *where);

void plant_copies(run *r, char *what, size_t len)
{
    char err[256] = "";
    const mtable *mt = &r->m.t[1]; /* chaos_plain: nothing writes it after the workload */
    pmap *pm = NULL;
    if (nodecall_map(cluster_coordinator_url(r->cl), &pm, err, sizeof(err)) != 0) {
        pm = NULL;
    }
    const pmap_table *t = pm != NULL ? pmap_table_find(pm, mt->name) : NULL;
    const pmap_replicas *rs = t != NULL ? pmap_part(t, 0) : NULL;
    if (rs == NULL || rs->n < 2 || r->fault_dir[0] == '\0') {
        flog_add(r, "debug: no follower of %s partition 0 to plant on (%s)", mt->name,
                 pm == NULL ? err : "one copy, or no fault dir");
        pmap_free(pm);
        return;
    }
    const uint32_t follower = rs->ids[1];
    char path[700], key[32] = "";
    snprintf(path, sizeof(path), "%s/node%u.refuse-replicate-log", r->fault_dir,
             (unsigned)follower);
    FILE *f = fopen(path, "w");
    if (f != NULL) {
        fclose(f);
    }
    /* A key of partition 0 outside the model's k<i>: invariant 1 never
     * reads it. */
    for (int i = 0; i < 100000 && key[0] == '\0'; i++) {
        char k[32];
        snprintf(k, sizeof(k), "plant9-%d", i);
        attr_value v;
        uint32_t part = 1;
        if (item_value_init_bytes(&v, ATTR_S, k, strlen(k)) == 0) {
            if (hash_partition(&v, t->schema.partitions, &part) == 0 && part == 0) {
                snprintf(key, sizeof(key), "%s", k);
            }
            item_value_fini(&v);
        }
    }
    char json[96];
    snprintf(json, sizeof(json), "{\"Id\":{\"S\":\"%s\"}}", key);
    lapse_item *it = NULL;
    lapse_error e = {0};
    int rv = f == NULL ? LAPSE_EIO : key[0] == '\0' ? LAPSE_ENOTFOUND : 0;
    if (rv == 0 && (rv = lapse_item_from_json(&it, json, &e)) == 0) {
        rv = lapse_put(r->admin, mt->name, it, NULL, &e);
    }
    lapse_item_free(it);
    pmap_free(pm);
    if (rv != 0) {
        flog_add(r, "debug: planting on %s partition 0 failed: %s", mt->name,
                 f == NULL ? path : e.message);
        return;
    }
    char where[96];
    snprintf(where, sizeof(where), "%.60s/partition 0", mt->name);
    add_plant_where(r, where);
    snprintf(what, len, "%s (node %u refuses its records; %s put)", where, (unsigned)follower, key);
    flog_add(r,
             "debug: planted a violation: node %u refuses its primaries' records, %s put into "
             "%s behind the model's back",
             (unsigned)follower, key, where);
}

/* ============================== the daemons ============================== */

static void add_plant_where(run *r, const char *where)
{
    if (r->nplants < RUN_MAX_PLANTS) {
        snprintf(r->plants[r->nplants++], sizeof(r->plants[0]), "%s", where);
    }
}

/* kill -9 of process idx behind the harness's back, waiting for it to be
 * gone but leaving it to cluster.h to reap. Returns 0 or -1. */
static int kill_unseen(run *r, int idx)
{
    pid_t pid = cluster_pid(r->cl, idx);
    siginfo_t si;
    if (pid <= 0 || kill(pid, SIGKILL) != 0) {
        return -1;
    }
    while (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT) != 0) {
        if (errno != EINTR) {
            return -1;
        }
    }
    return 0;
}

void plant_daemon_crash(run *r, char *what, size_t len)
{
    if (kill_unseen(r, 1) != 0) {
        flog_add(r, "debug: could not plant a crash of node 1");
        return;
    }
    add_plant_where(r, "cluster");
    snprintf(what, len, "node 1 killed unseen");
    flog_add(r, "debug: planted a violation: kill -9 of node 1 behind the harness's back");
}

void plant_daemon_exit(run *r)
{
    int victim = cluster_nodes(r->cl);
    char where[32];
    if (kill_unseen(r, victim) == 0) {
        snprintf(where, sizeof(where), "node %d", victim);
        add_plant_where(r, where);
        flog_add(r, "debug: planted a violation: kill -9 of node %d before its SIGTERM", victim);
    }
    const char *log = cluster_log_path(r->cl, 0);
    FILE *f = log != NULL ? fopen(log, "a") : NULL;
    if (f != NULL) {
        fprintf(f,
                "==%d==ERROR: AddressSanitizer: planted by lapse-chaos "
                "--debug-plant-violation=daemon\n",
                (int)cluster_pid(r->cl, 0));
        fclose(f);
        add_plant_where(r, log);
        flog_add(r, "debug: planted a violation: a sanitizer report in %s", log);
    }
}

/* ============================== a rogue node ============================== */

typedef struct rogue {
    run *r;
    mtable *t;
    uint32_t table_id;
    streamread s;                            /* the stream as it is now */
    base_snap base;                          /* the table as it is now */
    rpc_client *node[CLUSTER_MAX_NODES + 1]; /* [1..nodes] */
    uint32_t host[WL_PARTITIONS];            /* the node hosting each shard */
    int used[WL_PARTITIONS]; /* a plant took the partition, or a TTL delete may come */
} rogue;

/* Marks busy the partitions of t holding an item that may still expire in
 * the next ten minutes (or is overdue): its TTL delete would take the seq a
 * plant moves past. Items already gone cannot expire again. */
static void find_busy(rogue *g)
{
    int64_t now = clock_wall_now().ms;
    for (int i = 0; i < g->t->nkeys; i++) {
        const mkey *k = &g->t->keys[i];
        for (int c = 0; g->base.item[i] != NULL && c < k->ncand; c++) {
            int64_t due;
            if (model_expires(g->t, &k->cand[c], now, &due) && due < now + 600000) {
                char key[24];
                model_key_name(i, key, sizeof(key));
                g->used[wl_partition(key)] = 1;
                break;
            }
        }
    }
}

static int quiet(const rogue *g, uint32_t part)
{
    return part < WL_PARTITIONS && !g->used[part];
}

static int rogue_open(rogue *g, run *r, char *err, size_t len)
{
    memset(g, 0, sizeof(*g));
    g->r = r;
    g->t = &r->m.t[0];
    lapse_error e = {0};
    char *js = NULL;
    int rv = lapse_describe_table(r->admin, g->t->name, &js, &e);
    json_t *doc = rv == 0 ? json_loads(js, 0, NULL) : NULL;
    g->table_id =
        (uint32_t)json_integer_value(json_object_get(json_object_get(doc, "Table"), "TableId"));
    json_decref(doc);
    lapse_free(js);
    if (rv != 0 || g->table_id == 0) {
        snprintf(err, len, "describe-table: %.400s", rv ? e.message : "no TableId");
        return rv ? rv : LAPSE_EPROTO;
    }
    if ((rv = streamread_more(r->admin, g->t->name, &g->s, &e)) != 0) {
        snprintf(err, len, "reading the stream: %.400s", e.message);
        return rv;
    }
    for (size_t i = 0; i < g->s.nshards; i++) {
        if (g->s.shard[i] >= WL_PARTITIONS) {
            snprintf(err, len, "shard %u out of range", g->s.shard[i]);
            return LAPSE_EPROTO;
        }
        g->host[g->s.shard[i]] = g->s.host[i];
    }
    if ((rv = base_snap_read(r, g->t, &g->base, &e)) != 0) {
        snprintf(err, len, "scan: %.400s", e.message);
        return rv;
    }
    find_busy(g);
    for (int i = 1; i <= cluster_nodes(r->cl); i++) {
        if ((rv = rpc_client_open(&g->node[i], cluster_node_url(r->cl, i), err, len)) != 0) {
            return rv;
        }
    }
    return 0;
}

static void rogue_close(rogue *g)
{
    for (int i = 0; i <= CLUSTER_MAX_NODES; i++) {
        rpc_client_close(g->node[i]);
    }
    streamread_free(&g->s);
    base_snap_free(&g->base);
}

/* Sends node a Replicate batch (after, to] of source partition part holding
 * the encoded records recs[0..n). *applied gets the node's applied seq from
 * the reply. Returns the reply's status or a transport error. */
static int send_batch(rogue *g, int node, uint32_t part, uint64_t after, uint64_t to, buf *recs,
                      size_t n, uint64_t *applied, char *err, size_t len)
{
    return nodecall_replicate(g->node[node], g->table_id, part, after, to, recs, n, applied, err,
                              len);
}

/* Node's applied seq of part: a batch far ahead is refused with it (ESTATE). */
static int applied_of(rogue *g, int node, uint32_t part, uint64_t *applied, char *err, size_t len)
{
    const uint64_t far = 1ULL << 62;
    *applied = 0;
    int rv = send_batch(g, node, part, far, far + 1, NULL, 0, applied, err, len);
    return rv == LAPSE_ESTATE ? 0 : rv != 0 ? rv : LAPSE_EPROTO;
}

/* Moves node's applied seq of part on by one with rec (encoded with its
 * seq left to fill: rec_fill builds it for the seq), or with no record. */
typedef int (*rec_fill)(void *arg, uint64_t seq, buf *out);

static int advance(rogue *g, int node, uint32_t part, rec_fill fill, void *arg, char *err,
                   size_t len)
{
    uint64_t a = 0, after = 0;
    buf rec;
    buf_init(&rec);
    int rv = applied_of(g, node, part, &a, err, len);
    if (rv == 0 && fill != NULL) {
        rv = fill(arg, a + 1, &rec);
    }
    if (rv == 0) {
        rv = send_batch(g, node, part, a, a + 1, &rec, fill != NULL, &after, err, len);
    }
    if (rv == 0 && after != a + 1) {
        snprintf(err, len, "applied seq %" PRIu64 " after the batch, not %" PRIu64, after, a + 1);
        rv = LAPSE_EPROTO;
    }
    buf_fini(&rec);
    return rv;
}

/* item_encode of the item in DynamoDB JSON text into out. */
static int encode_json(const char *json, buf *out)
{
    item *it = NULL;
    char err[256];
    int rv = ddbjson_parse_item(json, strlen(json), &it, err, sizeof(err));
    if (rv == 0) {
        rv = item_encode(it, out);
    }
    item_free(it);
    return rv;
}

static int encode_item(const lapse_item *it, buf *out)
{
    char *json = lapse_item_to_json(it);
    int rv = json != NULL ? encode_json(json, out) : LAPSE_ENOMEM;
    lapse_free(json);
    return rv;
}

/* A change record: the fixed fields, then keys and images in DynamoDB JSON
 * (NULL: absent) or as lapse items. */
typedef struct forged {
    change_record c;
    const char *keys_json, *new_json;
    const lapse_item *keys, *old_image;
} forged;

static int fill_forged(void *arg, uint64_t seq, buf *out)
{
    forged *f = arg;
    buf k, o, n;
    buf_init(&k);
    buf_init(&o);
    buf_init(&n);
    int rv = f->keys_json ? encode_json(f->keys_json, &k) : encode_item(f->keys, &k);
    if (rv == 0 && f->new_json != NULL) {
        rv = encode_json(f->new_json, &n);
    }
    if (rv == 0 && f->old_image != NULL) {
        rv = encode_item(f->old_image, &o);
    }
    if (rv == 0) {
        f->c.seq = seq;
        f->c.keys = (change_bytes){k.data, k.len};
        f->c.new_image = (change_bytes){f->new_json ? n.data : NULL, n.len};
        f->c.old_image = (change_bytes){f->old_image ? o.data : NULL, o.len};
        rv = change_encode(&f->c, out);
    }
    buf_fini(&k);
    buf_fini(&o);
    buf_fini(&n);
    return rv;
}

/* A GSI entry of an item that does not exist, on every node. */
static int plant_orphan(rogue *g, char *err, size_t len)
{
    char id[32], keys[96], image[256];
    uint32_t part = 0;
    for (int i = 0; i < 1000; i++) {
        snprintf(id, sizeof(id), "orphan%d", i);
        if (quiet(g, part = wl_partition(id))) {
            break;
        }
    }
    g->used[part] = 1;
    snprintf(keys, sizeof(keys), "{\"Id\":{\"S\":\"%s\"},\"" WL_SK "\":{\"N\":\"0\"}}", id);
    snprintf(image, sizeof(image),
             "{\"Id\":{\"S\":\"%s\"},\"" WL_SK "\":{\"N\":\"0\"},\"ver\":{\"N\":\"1\"},"
             "\"pay\":{\"S\":\"planted\"},\"Grp\":{\"S\":\"g0\"}}",
             id);
    forged f = {.keys_json = keys, .new_json = image};
    f.c.table_id = g->table_id;
    f.c.part = part;
    f.c.commit_ms = clock_wall_now().ms;
    f.c.event = CHANGE_INSERT;
    f.c.principal = CHANGE_USER;
    for (int node = 1; node <= cluster_nodes(g->r->cl); node++) {
        int rv = advance(g, node, part, fill_forged, &f, err, len);
        if (rv != 0) {
            return rv;
        }
    }
    add_plant(g->r, g->t->name, id);
    flog_add(g->r, "debug: planted a violation: a GSI entry of %s/%s, which does not exist",
             g->t->name, id);
    return 0;
}

/* An acknowledged put whose record the shard host skips. */
static int plant_lost(rogue *g, char *err, size_t len)
{
    int64_t now = clock_wall_now().ms;
    for (int i = 0; i < g->r->opt->items; i++) {
        mkey *k = &g->t->keys[i];
        char key[24];
        model_key_name(i, key, sizeof(key));
        uint32_t part = wl_partition(key);
        if (!model_stable_present(g->t, k, now) || !quiet(g, part)) {
            continue;
        }
        const lapse_item *now_it = g->base.item[i];
        if (now_it == NULL || lapse_item_get_s(now_it, "Grp") != NULL) {
            continue; /* with a Grp, the GSI would miss the put too if the host owned it */
        }
        lapse_error e = {0};
        int rv;
        g->used[part] = 1;
        if ((rv = advance(g, (int)g->host[part], part, NULL, NULL, err, len)) != 0) {
            return rv;
        }
        mstate next = {.present = 1, .kind = TK_NONE, .ver = run_ver(g->r)};
        lapse_item *it = wl_item(g->t, i, next.ver, "", -1);
        rv = lapse_put(g->r->admin, g->t->name, it, NULL, &e);
        lapse_item_free(it);
        char what[112];
        snprintf(what, sizeof(what), "put ver %" PRIu64 " (planted: its record is skipped)",
                 next.ver);
        model_record(g->t, k, &next, MM_REPLACE, rv, 1, clock_wall_now().ms, what);
        add_plant(g->r, g->t->name, key);
        flog_add(g->r,
                 "debug: planted a violation: node %u skips the record of a put to %s/%s (%s)",
                 g->host[part], g->t->name, key, lapse_strerror(rv));
        return 0;
    }
    snprintf(err, len, "no key without a Grp in a quiet partition");
    return LAPSE_ENOTFOUND;
}

/* A second REMOVE by lapse.ttl of an item the stream shows TTL-deleted. */
static int plant_dup_remove(rogue *g, char *err, size_t len)
{
    for (size_t i = 0; i < g->s.n; i++) {
        const lapse_stream_record *r = g->s.r[i];
        const char *id = lapse_item_get_s(r->keys, "Id");
        if (!r->ttl_delete || r->old_image == NULL || id == NULL || r->shard >= WL_PARTITIONS ||
            !quiet(g, r->shard)) {
            continue;
        }
        int idx = check_key_index(g->t, r->keys);
        if (idx < 0 || g->base.item[idx] != NULL) {
            continue; /* re-created since */
        }
        size_t at = 0;
        while (at < g->s.nshards && g->s.shard[at] != r->shard) {
            at++;
        }
        if (at == g->s.nshards) {
            continue;
        }
        g->used[r->shard] = 1;
        forged f = {.keys = r->keys, .old_image = r->old_image};
        f.c.table_id = g->table_id;
        f.c.part = r->shard;
        f.c.stream_seq = g->s.last_seq[at] + 1;
        f.c.commit_ms = clock_wall_now().ms;
        f.c.event = CHANGE_REMOVE;
        f.c.principal = CHANGE_TTL;
        f.c.ttl_attr = (change_bytes){(const uint8_t *)r->ttl_attribute, strlen(r->ttl_attribute)};
        f.c.expires_at_ms = r->ttl_expires_at_ms;
        f.c.deleted_at_ms = clock_wall_now().ms;
        int rv = advance(g, (int)g->host[r->shard], r->shard, fill_forged, &f, err, len);
        if (rv != 0) {
            return rv;
        }
        add_plant(g->r, g->t->name, id);
        flog_add(g->r, "debug: planted a violation: a second TTL REMOVE of %s/%s in shard %u",
                 g->t->name, id, r->shard);
        return 0;
    }
    snprintf(err, len, "no TTL-deleted item in a quiet partition");
    return LAPSE_ENOTFOUND;
}

int plant_index(run *r, char *what, size_t len)
{
    rogue g;
    char err[512] = "";
    int planted = 0;
    int rv = rogue_open(&g, r, err, sizeof(err));
    if (rv == 0 && (rv = plant_orphan(&g, err, sizeof(err))) == 0) {
        planted++;
    }
    if (rv == 0 && (rv = plant_lost(&g, err, sizeof(err))) == 0) {
        planted++;
    }
    if (rv == 0 && (rv = plant_dup_remove(&g, err, sizeof(err))) == 0) {
        planted++;
    }
    if (rv != 0) {
        flog_add(r, "debug: could not plant every index violation: %s: %.300s", lapse_strerror(rv),
                 err);
    }
    rogue_close(&g);
    size_t off = 0;
    what[0] = '\0';
    for (int i = 0; i < r->nplants && off < len; i++) {
        off += (size_t)snprintf(what + off, len - off, "%s%s", i ? ", " : "", r->plants[i]);
    }
    return planted;
}

/* ============================== linearizability ============================== */

void plant_linear(run *r, char *what, size_t len)
{
    registers *g = r->regs;
    for (int k = 0; g != NULL && k < g->nkeys; k++) {
        const reg_history *h = &g->key[k];
        /* The first write that took effect, and one after it that did too
         * and was called after it returned: the first's value can never
         * come back. */
        const lin_op *old = NULL;
        for (size_t i = 0; i < h->n && old == NULL; i++) {
            if (h->ops[i].kind != LIN_READ && h->ops[i].outcome == LIN_OK) {
                old = &h->ops[i];
            }
        }
        int overwritten = 0;
        for (size_t i = 0; old != NULL && i < h->n; i++) {
            overwritten |= h->ops[i].kind != LIN_READ && h->ops[i].outcome == LIN_OK &&
                           h->ops[i].call_us > old->ret_us;
        }
        if (!overwritten) {
            continue;
        }
        char key[32], json[128];
        reg_key_name(k, key, sizeof(key));
        snprintf(json, sizeof(json), "{\"Id\":{\"S\":\"%s\"},\"val\":{\"N\":\"%" PRIu64 "\"}}", key,
                 old->value);
        lapse_item *it = NULL;
        lapse_error e = {0};
        int rv = lapse_item_from_json(&it, json, &e);
        if (rv == 0) {
            rv = lapse_put(r->admin, r->m.t[REG_TABLE].name, it, NULL, &e);
        }
        lapse_item_free(it);
        if (rv != 0) {
            flog_add(r, "debug: planting on %s/%s failed: %s", r->m.t[REG_TABLE].name, key,
                     e.message);
            return;
        }
        add_plant(r, r->m.t[REG_TABLE].name, key);
        snprintf(what, len, "%s/%s (val %" PRIu64 " put back)", r->m.t[REG_TABLE].name, key,
                 old->value);
        flog_add(r,
                 "debug: planted a violation: %s/%s put back to val %" PRIu64
                 ", overwritten since, behind the history's back",
                 r->m.t[REG_TABLE].name, key, old->value);
        return;
    }
    flog_add(r, "debug: no register key with an overwritten value to plant on");
}
