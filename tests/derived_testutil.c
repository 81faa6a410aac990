/* derived_testutil.c: checks of GSI and stream copies (derived_testutil.h). */
#include "testutil.h"

#include <stdio.h>
#include <string.h>

#include "../placement/hash.h"
#include "derived_testutil.h"
#include "nodecall.h"
#include "replset_testutil.h"
#include "streamread.h"
#include "testmap.h"

void dt_create(const dt_table *t, uint32_t partitions)
{
    const lapse_index_def gsi[] = {{.name = t->gsi,
                                    .partition_key = "Grp",
                                    .partition_key_type = 'S',
                                    .partitions = t->gsi_parts}};
    lapse_table_def d = {.name = t->name,
                         .partition_key = "Id",
                         .partition_key_type = 'S',
                         .partitions = partitions,
                         .gsi = gsi,
                         .ngsi = 1,
                         .stream = 1,
                         .replication = 3};
    lapse_error e = {0};
    assert_lapse_ok(lapse_create_table(rs_client(), &d, &e), &e);
}

void dt_put_range(const dt_table *t, int from, int to)
{
    for (int i = from; i < to; i++) {
        char id[32], body[128];
        snprintf(id, sizeof(id), "k%d", i);
        snprintf(body, sizeof(body), "{\"Id\":{\"S\":\"%s\"},\"Grp\":{\"S\":\"g%d\"}}", id,
                 i % t->groups);
        lapse_item *it = item_json("%s", body);
        lapse_error e = {0};
        int rv = -1;
        for (int attempt = 0; attempt < 150 && rv != 0; attempt++) {
            if ((rv = lapse_put(rs_client(), t->name, it, NULL, &e)) != 0) {
                rs_sleep_ms(100);
            }
        }
        lapse_item_free(it);
        assert_lapse_ok(rv, &e);
    }
}

/* The GSI partition of group g's value. */
uint32_t dt_group_part(const dt_table *t, int g)
{
    char v[16];
    snprintf(v, sizeof(v), "g%d", g);
    attr_value pk;
    assert_int_equal(item_value_init_bytes(&pk, ATTR_S, v, strlen(v)), 0);
    uint32_t part = 0;
    assert_int_equal(hash_partition(&pk, t->gsi_parts, &part), 0);
    item_value_fini(&pk);
    return part;
}

/* Whether every copy of every GSI partition holds per_group items for each
 * group, and every copy of each stream shard the same records, records in
 * all per shard set; says the first difference in why. */
int dt_copies_hold(const dt_table *dt, uint32_t copies, size_t per_group, size_t records, char *why,
                   size_t len)
{
    pmap *pm = testmap_fetch(rs_cluster());
    const pmap_table *t = pmap_table_find(pm, dt->name);
    assert_non_null(t);
    int ok = 1;
    char err[256];
    for (int g = 0; g < dt->groups && ok; g++) {
        char v[16];
        snprintf(v, sizeof(v), "g%d", g);
        const pmap_replicas *r = pmap_gsi_part(t, 0, dt_group_part(dt, g));
        if (r->n != copies) {
            snprintf(why, len, "GSI partition %u has %u copies, want %u",
                     (unsigned)dt_group_part(dt, g), (unsigned)r->n, (unsigned)copies);
            ok = 0;
        }
        for (uint32_t i = 0; i < r->n && ok; i++) {
            rpc_client *c = NULL;
            size_t n = 0;
            assert_int_equal(rpc_client_open(&c, cluster_node_url(rs_cluster(), (int)r->ids[i]),
                                             err, sizeof(err)),
                             0);
            if (nodecall_gsi_count(c, dt->name, dt->gsi, dt_group_part(dt, g), v, &n, err,
                                   sizeof(err)) != 0) {
                snprintf(why, len, "GSI copy on node %u: %s", (unsigned)r->ids[i], err);
                ok = 0;
            } else if (n != per_group) {
                snprintf(why, len, "GSI copy on node %u holds %zu items of %s, want %zu",
                         (unsigned)r->ids[i], n, v, per_group);
                ok = 0;
            }
            rpc_client_close(c);
        }
    }
    for (uint32_t gp = 0; gp < dt->gsi_parts && ok; gp++) {
        const pmap_replicas *r = pmap_gsi_part(t, 0, gp);
        nodecall_digest first = {0};
        for (uint32_t i = 0; i < r->n && ok; i++) {
            rpc_client *c = NULL;
            nodecall_digest d = {0};
            assert_int_equal(rpc_client_open(&c, cluster_node_url(rs_cluster(), (int)r->ids[i]),
                                             err, sizeof(err)),
                             0);
            if (nodecall_gsi_digest(c, t->schema.id, t->schema.gsi[0].id, gp, &d, err,
                                    sizeof(err)) != 0) {
                snprintf(why, len, "GSI partition %u digest on node %u: %s", (unsigned)gp,
                         (unsigned)r->ids[i], err);
                ok = 0;
            } else if (i > 0 && (d.items != first.items || d.hash != first.hash)) {
                snprintf(why, len, "GSI partition %u: node %u holds %llu entries, node %u %llu%s",
                         (unsigned)gp, (unsigned)r->ids[i], (unsigned long long)d.items,
                         (unsigned)r->ids[0], (unsigned long long)first.items,
                         d.items == first.items ? " (digests differ)" : "");
                ok = 0;
            }
            first = i == 0 ? d : first;
            rpc_client_close(c);
        }
    }
    size_t total = 0;
    for (uint32_t p = 0; p < t->schema.partitions && ok; p++) {
        const pmap_replicas *r = pmap_stream_shard(t, p);
        if (r->n != copies) {
            snprintf(why, len, "stream shard %u has %u copies, want %u", (unsigned)p,
                     (unsigned)r->n, (unsigned)copies);
            ok = 0;
        }
        size_t first_n = 0;
        uint64_t first_last = 0;
        for (uint32_t i = 0; i < r->n && ok; i++) {
            rpc_client *c = NULL;
            size_t n = 0;
            uint64_t last = 0;
            assert_int_equal(rpc_client_open(&c, cluster_node_url(rs_cluster(), (int)r->ids[i]),
                                             err, sizeof(err)),
                             0);
            if (nodecall_stream_shard(c, dt->name, p, &n, &last, err, sizeof(err)) != 0) {
                snprintf(why, len, "shard %u copy on node %u: %s", (unsigned)p, (unsigned)r->ids[i],
                         err);
                ok = 0;
            } else if (i > 0 && (n != first_n || last != first_last)) {
                snprintf(why, len,
                         "shard %u: node %u holds %zu records up to %llu, node %u %zu up to %llu",
                         (unsigned)p, (unsigned)r->ids[i], n, (unsigned long long)last,
                         (unsigned)r->ids[0], first_n, (unsigned long long)first_last);
                ok = 0;
            }
            first_n = i == 0 ? n : first_n;
            first_last = i == 0 ? last : first_last;
            rpc_client_close(c);
        }
        total += first_n;
    }
    if (ok && total != records) {
        snprintf(why, len, "the shards' copies hold %zu records in all, want %zu", total, records);
        ok = 0;
    }
    pmap_free(pm);
    return ok;
}

void dt_wait_copies_hold(const dt_table *t, uint32_t copies, size_t per_group, size_t records,
                         long timeout_ms)
{
    char why[512] = "";
    for (long waited = 0; waited <= timeout_ms; waited += 100) {
        if (dt_copies_hold(t, copies, per_group, records, why, sizeof(why))) {
            return;
        }
        rs_sleep_ms(100);
    }
    fail_msg("after %ld ms: %s", timeout_ms, why);
}

/* Through liblapse: the GSI holds per_group items of each group, and the
 * whole stream records records, gapless. */
int dt_client_sees(const dt_table *t, size_t per_group, size_t records, char *why, size_t len)
{
    for (int g = 0; g < t->groups; g++) {
        char pk[32];
        snprintf(pk, sizeof(pk), "{\"S\":\"g%d\"}", g);
        lapse_query_opts o = {.partition_key_json = pk};
        lapse_page *page = NULL;
        lapse_error e = {0};
        if (lapse_query_index(rs_client(), t->name, t->gsi, &o, &page, &e) != 0) {
            snprintf(why, len, "GSI query of g%d: %.400s", g, e.message);
            return 0;
        }
        size_t n = lapse_page_count(page);
        lapse_page_free(page);
        if (n != per_group) {
            snprintf(why, len, "GSI query of g%d: %zu items, want %zu", g, n, per_group);
            return 0;
        }
    }
    streamread s = {0};
    lapse_error e = {0};
    int ok = 1;
    if (streamread_more(rs_client(), t->name, &s, &e) != 0) {
        snprintf(why, len, "stream read: %.400s", e.message);
        ok = 0;
    } else if (s.n != records) {
        snprintf(why, len, "the stream holds %zu records, want %zu", s.n, records);
        ok = 0;
    } else if (streamread_gap(&s, 1, why, len) != 0) {
        ok = 0;
    }
    streamread_free(&s);
    return ok;
}
