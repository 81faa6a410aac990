/*
 * fuzz_request.c: libFuzzer target for the decoding a daemon does on bytes
 * from the network. Each input is tried as a Request (what node and
 * coordinator receive) and as a Response (what clients and nodes receive back):
 * the nesting check, protobuf-c's unpacker, then every wire_*_from_pb a
 * handler would run on the contents. Whatever decodes must survive a round
 * trip (to protobuf, packed, unpacked, decoded again) unchanged.
 *
 * Built and run by cmake/fuzz-run.sh (ctest fuzz_request_test, make fuzz;
 * corpus rpc/fuzz/corpus/) with clang
 * -fsanitize=fuzzer,address.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "../common/lapse_err.h"
#include "wire.h"

static void must(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz_request: invariant failed: %s\n", what);
        abort();
    }
}

static void check_value(const Lapse__AttributeValue *pb)
{
    attr_value v, back;
    char err[256];
    if (pb == NULL || wire_value_from_pb(pb, &v, err, sizeof err) != 0) {
        return;
    }
    arena a;
    arena_init(&a);
    Lapse__AttributeValue *out = wire_value_to_pb(&a, &v);
    must(out != NULL, "value_to_pb of a decoded value");
    size_t n = lapse__attribute_value__get_packed_size(out);
    uint8_t *buf = malloc(n + 1);
    must(buf != NULL, "malloc");
    lapse__attribute_value__pack(out, buf);
    Lapse__AttributeValue *un = lapse__attribute_value__unpack(NULL, n, buf);
    must(un != NULL, "unpack of a packed value");
    must(wire_value_from_pb(un, &back, err, sizeof err) == 0, "decode of a re-encoded value");
    must(item_value_eq(&v, &back), "value round trip");
    item_value_fini(&back);
    lapse__attribute_value__free_unpacked(un, NULL);
    free(buf);
    arena_fini(&a);
    item_value_fini(&v);
}

static void check_item(const Lapse__Item *pb)
{
    item *it = NULL, *back = NULL;
    char err[256];
    if (pb == NULL || wire_item_from_pb(pb, &it, err, sizeof err) != 0) {
        return;
    }
    arena a;
    arena_init(&a);
    Lapse__Item *out = wire_item_to_pb(&a, it);
    must(out != NULL, "item_to_pb of a decoded item");
    size_t n = lapse__item__get_packed_size(out);
    uint8_t *buf = malloc(n + 1);
    must(buf != NULL, "malloc");
    lapse__item__pack(out, buf);
    Lapse__Item *un = lapse__item__unpack(NULL, n, buf);
    must(un != NULL, "unpack of a packed item");
    must(wire_item_from_pb(un, &back, err, sizeof err) == 0, "decode of a re-encoded item");
    must(item_eq(it, back), "item round trip");
    item_free(back);
    lapse__item__free_unpacked(un, NULL);
    free(buf);
    arena_fini(&a);
    item_free(it);
}

static void check_condition(const Lapse__Condition *c)
{
    if (c != NULL) {
        check_value(c->value);
    }
}

static void check_schema(const Lapse__TableSchema *pb)
{
    table_schema t, back;
    char err[256];
    if (pb == NULL || wire_schema_from_pb(pb, &t, err, sizeof err) != 0) {
        return;
    }
    arena a;
    arena_init(&a);
    Lapse__TableSchema *out = wire_schema_to_pb(&a, &t);
    must(out != NULL, "schema_to_pb");
    must(wire_schema_from_pb(out, &back, err, sizeof err) == 0, "schema round trip");
    arena_fini(&a);
}

static void check_pmap(const Lapse__PartitionMap *pb)
{
    pmap *pm = NULL, *back = NULL;
    char err[256];
    if (pb == NULL || wire_pmap_from_pb(pb, &pm, err, sizeof err) != 0) {
        return;
    }
    must(pmap_check(pm), "decoded pmap passes pmap_check");
    arena a;
    arena_init(&a);
    Lapse__PartitionMap *out = wire_pmap_to_pb(&a, pm);
    must(out != NULL, "pmap_to_pb");
    must(wire_pmap_from_pb(out, &back, err, sizeof err) == 0, "pmap round trip");
    must(back->nnodes == pm->nnodes && back->ntables == pm->ntables, "pmap round trip sizes");
    pmap_free(back);
    arena_fini(&a);
    pmap_free(pm);
}

/* A table map decoded alone, against a map with nodes 1-3 (as a node adds a
 * table from CreateTable's reply to its cached map). */
static void check_table(const Lapse__TableMap *pb)
{
    char err[256];
    pmap *pm = pmap_new();
    must(pm != NULL, "pmap_new");
    for (uint32_t id = 1; id <= 3; id++) {
        must(pmap_set_node(pm, id, "tcp://127.0.0.1:1", PMAP_NODE_UP) == 0, "set_node");
    }
    if (pb != NULL && wire_table_from_pb(pb, pm, err, sizeof err) == 0) {
        must(pmap_check(pm), "table decode keeps pmap_check");
    }
    pmap_free(pm);
}

static void check_request(const Lapse__Request *r)
{
    switch (r->body_case) {
    case LAPSE__REQUEST__BODY_PUT_ITEM:
        check_item(r->put_item->item);
        check_condition(r->put_item->condition);
        break;
    case LAPSE__REQUEST__BODY_GET_ITEM:
        check_item(r->get_item->key);
        break;
    case LAPSE__REQUEST__BODY_DELETE_ITEM:
        check_item(r->delete_item->key);
        check_condition(r->delete_item->condition);
        break;
    case LAPSE__REQUEST__BODY_UPDATE_ITEM:
        check_item(r->update_item->key);
        check_condition(r->update_item->condition);
        for (size_t i = 0; i < r->update_item->n_actions; i++) {
            check_value(r->update_item->actions[i]->value); /* NULL: REMOVE */
        }
        break;
    case LAPSE__REQUEST__BODY_QUERY:
        check_value(r->query->partition_key);
        if (r->query->sort_key != NULL) {
            check_value(r->query->sort_key->value);
            check_value(r->query->sort_key->value2);
        }
        check_item(r->query->exclusive_start_key);
        break;
    case LAPSE__REQUEST__BODY_SCAN:
        check_item(r->scan->exclusive_start_key);
        break;
    case LAPSE__REQUEST__BODY_BATCH_WRITE:
        for (size_t i = 0; i < r->batch_write->n_writes; i++) {
            check_item(r->batch_write->writes[i]->put);
            check_item(r->batch_write->writes[i]->delete_key);
        }
        break;
    case LAPSE__REQUEST__BODY_BATCH_GET:
        for (size_t i = 0; i < r->batch_get->n_keys; i++) {
            check_item(r->batch_get->keys[i]);
        }
        break;
    case LAPSE__REQUEST__BODY_PUSH_PARTITION_MAP:
        check_pmap(r->push_partition_map->map);
        break;
    case LAPSE__REQUEST__BODY_CREATE_TABLE:
        check_schema(r->create_table->schema);
        break;
    default:
        break;
    }
}

static void check_response(const Lapse__Response *r)
{
    (void)wire_status_from_pb((int)r->status);
    switch (r->body_case) {
    case LAPSE__RESPONSE__BODY_GET_ITEM:
        check_item(r->get_item->item);
        break;
    case LAPSE__RESPONSE__BODY_UPDATE_ITEM:
        check_item(r->update_item->item);
        break;
    case LAPSE__RESPONSE__BODY_PAGE:
        for (size_t i = 0; i < r->page->n_items; i++) {
            check_item(r->page->items[i]);
        }
        check_item(r->page->last_evaluated_key);
        break;
    case LAPSE__RESPONSE__BODY_REGISTER_NODE:
        check_pmap(r->register_node->map);
        break;
    case LAPSE__RESPONSE__BODY_GET_PARTITION_MAP:
        check_pmap(r->get_partition_map->map);
        break;
    case LAPSE__RESPONSE__BODY_CREATE_TABLE:
        check_table(r->create_table->table);
        break;
    case LAPSE__RESPONSE__BODY_DESCRIBE_TABLE:
        check_table(r->describe_table->table);
        break;
    default:
        break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (wire_check_nesting(&lapse__request__descriptor, data, size, WIRE_MAX_NESTING) == 0) {
        Lapse__Request *req = lapse__request__unpack(NULL, size, data);
        if (req != NULL) {
            check_request(req);
            lapse__request__free_unpacked(req, NULL);
        }
    }
    if (wire_check_nesting(&lapse__response__descriptor, data, size, WIRE_MAX_NESTING) == 0) {
        Lapse__Response *resp = lapse__response__unpack(NULL, size, data);
        if (resp != NULL) {
            check_response(resp);
            lapse__response__free_unpacked(resp, NULL);
        }
    }
    return 0;
}
