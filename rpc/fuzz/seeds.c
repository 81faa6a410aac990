/*
 * seeds.c: writes the seeds for fuzz_request (cmake/fuzz-run.sh): one
 * valid, packed Request of each interesting kind, so the fuzzer starts from
 * inputs that get past the envelope checks.
 *
 * usage: fuzz_seeds DIR
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/lapse_err.h"
#include "../rpc.h"
#include "../wire.h"

static const char *dir;

static void write_request(const char *name, Lapse__Request *req)
{
    req->version = RPC_PROTOCOL_VERSION;
    req->timeout_ms = 1000;
    size_t n = lapse__request__get_packed_size(req);
    unsigned char *buf = malloc(n + 1);
    if (buf == NULL) {
        exit(1);
    }
    lapse__request__pack(req, buf);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(buf, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "fuzz_seeds: cannot write %s\n", path);
        exit(1);
    }
    free(buf);
}

static attr_value bytes(attr_type t, const char *s, size_t n)
{
    attr_value v;
    if (item_value_init_bytes(&v, t, s, n) != 0) {
        exit(1);
    }
    return v;
}

static item *sample_item(void)
{
    item *it = item_new();
    attr_value v = bytes(ATTR_S, "user\0one", 8);
    item_set(it, "pk", &v);
    v = bytes(ATTR_N, "-12.5E3", 7);
    item_set(it, "sk", &v);
    v = bytes(ATTR_B, "\0\1\2", 3);
    item_set(it, "blob", &v);
    attr_value list, m, e;
    item_value_init_list(&list);
    item_value_init_bool(&e, 1);
    item_value_list_append(&list, &e);
    item_value_init_null(&e);
    item_value_list_append(&list, &e);
    item_value_init_map(&m);
    e = bytes(ATTR_S, "deep", 4);
    item_value_map_set(&m, "inner", &e);
    item_value_list_append(&list, &m);
    item_set(it, "list", &list);
    return it;
}

static table_schema sample_schema(void)
{
    table_schema t;
    memset(&t, 0, sizeof t);
    t.id = 1;
    snprintf(t.name, sizeof t.name, "users");
    snprintf(t.pk.name, sizeof t.pk.name, "pk");
    t.pk.type = ATTR_S;
    snprintf(t.sk.name, sizeof t.sk.name, "sk");
    t.sk.type = ATTR_N;
    t.partitions = 4;
    return t;
}

/* sample_schema plus an LSI, two GSIs and a stream (id 2). */
static table_schema indexed_schema(void)
{
    table_schema t = sample_schema();
    t.id = 2;
    snprintf(t.name, sizeof t.name, "indexed");
    t.nlsi = 1;
    t.lsi[0].id = 1;
    snprintf(t.lsi[0].name, sizeof t.lsi[0].name, "by_time");
    snprintf(t.lsi[0].sk.name, sizeof t.lsi[0].sk.name, "time");
    t.lsi[0].sk.type = ATTR_N;
    t.ngsi = 2;
    for (uint32_t g = 0; g < 2; g++) {
        t.gsi[g].id = 2 + g;
        snprintf(t.gsi[g].name, sizeof t.gsi[g].name, "gsi_%u", (unsigned)g);
        snprintf(t.gsi[g].pk.name, sizeof t.gsi[g].pk.name, "g%u", (unsigned)g);
        t.gsi[g].pk.type = ATTR_S;
        t.gsi[g].partitions = 2;
    }
    snprintf(t.gsi[1].sk.name, sizeof t.gsi[1].sk.name, "sk");
    t.gsi[1].sk.type = ATTR_N;
    t.gsi[1].projection = INDEX_PROJECT_KEYS;
    t.stream.enabled = 1;
    t.stream.ttl_deletes = 1;
    t.stream.retention_hours = 24;
    return t;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: fuzz_seeds DIR\n");
        return 2;
    }
    dir = argv[1];
    arena a;
    arena_init(&a);
    item *it = sample_item();
    item *key = item_new();
    item_set_copy(key, "pk", item_get(it, "pk"));
    item_set_copy(key, "sk", item_get(it, "sk"));

    Lapse__Condition cond = LAPSE__CONDITION__INIT;
    cond.kind = LAPSE__CONDITION__KIND__ATTRIBUTE_EQUALS;
    cond.attribute = "sk";
    cond.value = wire_value_to_pb(&a, item_get(it, "sk"));

    Lapse__PutItemRequest put = LAPSE__PUT_ITEM_REQUEST__INIT;
    put.table = "users";
    put.item = wire_item_to_pb(&a, it);
    put.condition = &cond;
    Lapse__Request r = LAPSE__REQUEST__INIT;
    r.body_case = LAPSE__REQUEST__BODY_PUT_ITEM;
    r.put_item = &put;
    write_request("put_item", &r);

    Lapse__GetItemRequest get = LAPSE__GET_ITEM_REQUEST__INIT;
    get.table = "users";
    get.key = wire_item_to_pb(&a, key);
    r.body_case = LAPSE__REQUEST__BODY_GET_ITEM;
    r.get_item = &get;
    write_request("get_item", &r);

    Lapse__UpdateAction set = LAPSE__UPDATE_ACTION__INIT, rem = LAPSE__UPDATE_ACTION__INIT;
    set.name = "list";
    set.value = wire_value_to_pb(&a, item_get(it, "list"));
    rem.name = "blob";
    Lapse__UpdateAction *acts[] = {&set, &rem};
    Lapse__UpdateItemRequest upd = LAPSE__UPDATE_ITEM_REQUEST__INIT;
    upd.table = "users";
    upd.key = get.key;
    upd.actions = acts;
    upd.n_actions = 2;
    r.body_case = LAPSE__REQUEST__BODY_UPDATE_ITEM;
    r.update_item = &upd;
    write_request("update_item", &r);

    attr_value lo = bytes(ATTR_N, "1", 1), hi = bytes(ATTR_N, "1e10", 4);
    Lapse__SortKeyCondition skc = LAPSE__SORT_KEY_CONDITION__INIT;
    skc.op = LAPSE__SORT_KEY_CONDITION__OP__BETWEEN;
    skc.value = wire_value_to_pb(&a, &lo);
    skc.value2 = wire_value_to_pb(&a, &hi);
    Lapse__QueryRequest q = LAPSE__QUERY_REQUEST__INIT;
    q.table = "users";
    q.partition_key = wire_value_to_pb(&a, item_get(it, "pk"));
    q.sort_key = &skc;
    q.limit = 10;
    q.reverse = 1;
    q.exclusive_start_key = get.key;
    r.body_case = LAPSE__REQUEST__BODY_QUERY;
    r.query = &q;
    write_request("query", &r);

    Lapse__WriteRequest w1 = LAPSE__WRITE_REQUEST__INIT, w2 = LAPSE__WRITE_REQUEST__INIT;
    w1.put = put.item;
    w2.delete_key = get.key;
    Lapse__WriteRequest *ws[] = {&w1, &w2};
    Lapse__BatchWriteRequest bw = LAPSE__BATCH_WRITE_REQUEST__INIT;
    bw.table = "users";
    bw.writes = ws;
    bw.n_writes = 2;
    r.body_case = LAPSE__REQUEST__BODY_BATCH_WRITE;
    r.batch_write = &bw;
    write_request("batch_write", &r);

    table_schema t = sample_schema();
    Lapse__CreateTableRequest ct = LAPSE__CREATE_TABLE_REQUEST__INIT;
    ct.schema = wire_schema_to_pb(&a, &t);
    r.body_case = LAPSE__REQUEST__BODY_CREATE_TABLE;
    r.create_table = &ct;
    write_request("create_table", &r);

    pmap *pm = pmap_new();
    pm->version = 3;
    pmap_set_node(pm, 1, "tcp://127.0.0.1:7401", PMAP_NODE_UP);
    pmap_set_node(pm, 2, "tcp://127.0.0.1:7402", PMAP_NODE_UP);
    if (pmap_add_table(pm, &t) != 0) {
        fprintf(stderr, "fuzz_seeds: pmap_add_table failed\n");
        return 1;
    }
    Lapse__PushPartitionMapRequest push = LAPSE__PUSH_PARTITION_MAP_REQUEST__INIT;
    push.map = wire_pmap_to_pb(&a, pm);
    r.body_case = LAPSE__REQUEST__BODY_PUSH_PARTITION_MAP;
    r.push_partition_map = &push;
    write_request("push_partition_map", &r);

    /* The same with an LSI, two GSIs and a stream, and its placements. */
    table_schema ix = indexed_schema();
    ct.schema = wire_schema_to_pb(&a, &ix);
    r.body_case = LAPSE__REQUEST__BODY_CREATE_TABLE;
    r.create_table = &ct;
    write_request("create_table_indexed", &r);
    if (pmap_add_table(pm, &ix) != 0) {
        fprintf(stderr, "fuzz_seeds: pmap_add_table (indexed) failed\n");
        return 1;
    }
    push.map = wire_pmap_to_pb(&a, pm);
    r.body_case = LAPSE__REQUEST__BODY_PUSH_PARTITION_MAP;
    r.push_partition_map = &push;
    write_request("push_partition_map_indexed", &r);

    Lapse__HeartbeatRequest hb = LAPSE__HEARTBEAT_REQUEST__INIT;
    hb.node_id = 2;
    hb.pmap_version = 3;
    hb.clock_ms = 1700000000000;
    r.body_case = LAPSE__REQUEST__BODY_HEARTBEAT;
    r.heartbeat = &hb;
    write_request("heartbeat", &r);

    pmap_free(pm);
    item_value_fini(&lo);
    item_value_fini(&hi);
    item_free(key);
    item_free(it);
    arena_fini(&a);
    return 0;
}
