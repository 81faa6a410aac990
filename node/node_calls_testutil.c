/*
 * node_calls_testutil.c: request builders and one function per node call, for
 * node_test (node_testutil.h). Requests are built from the caller's arena.
 */
#include "node_testutil.h"

Lapse__AttributeValue *pb_s(arena *a, const char *s)
{
    Lapse__AttributeValue *v = arena_alloc(a, sizeof(*v));
    lapse__attribute_value__init(v);
    v->value_case = LAPSE__ATTRIBUTE_VALUE__VALUE_S;
    v->s.data = (uint8_t *)arena_strdup(a, s);
    v->s.len = strlen(s);
    return v;
}

Lapse__AttributeValue *pb_n(arena *a, const char *n)
{
    Lapse__AttributeValue *v = arena_alloc(a, sizeof(*v));
    lapse__attribute_value__init(v);
    v->value_case = LAPSE__ATTRIBUTE_VALUE__VALUE_N;
    v->n = arena_strdup(a, n);
    return v;
}

/* An item from name/value pairs, NULL-terminated. */
Lapse__Item *pb_item(arena *a, ...)
{
    Lapse__Item *it = arena_alloc(a, sizeof(*it));
    lapse__item__init(it);
    it->attrs = arena_alloc(a, 8 * sizeof(*it->attrs));
    va_list ap;
    va_start(ap, a);
    const char *name;
    while ((name = va_arg(ap, const char *)) != NULL) {
        Lapse__Attribute *at = arena_alloc(a, sizeof(*at));
        lapse__attribute__init(at);
        at->name = arena_strdup(a, name);
        at->value = va_arg(ap, Lapse__AttributeValue *);
        it->attrs[it->n_attrs++] = at;
    }
    va_end(ap);
    return it;
}

const char *pk_of(int i, char *buf, size_t len)
{
    snprintf(buf, len, "user%d", i / 4); /* four sort keys per partition key */
    return buf;
}

Lapse__Item *item_i(arena *a, int i, const char *val)
{
    char pk[32], sk[16];
    snprintf(sk, sizeof(sk), "%d", i % 4);
    return pb_item(a, "pk", pb_s(a, pk_of(i, pk, sizeof(pk))), "sk", pb_n(a, sk), "v", pb_s(a, val),
                   NULL);
}

Lapse__Item *key_i(arena *a, int i)
{
    char pk[32], sk[16];
    snprintf(sk, sizeof(sk), "%d", i % 4);
    return pb_item(a, "pk", pb_s(a, pk_of(i, pk, sizeof(pk))), "sk", pb_n(a, sk), NULL);
}

/* Index (0-based) of the node owning partition key pk. */
int owner_of_pk(const char *pk, uint32_t *part_out)
{
    attr_value v;
    assert_non_null(nt.t);
    assert_int_equal(item_value_init_bytes(&v, ATTR_S, pk, strlen(pk)), 0);
    uint32_t part = 0;
    assert_int_equal(hash_partition(&v, nt.t->schema.partitions, &part), 0);
    item_value_fini(&v);
    if (part_out != NULL) {
        *part_out = part;
    }
    uint32_t owner = pmap_owner(nt.t, part);
    for (int n = 0; n < NODES; n++) {
        if (nt.node[n].id == owner) {
            return n;
        }
    }
    fail_msg("partition %u owned by unknown node %u", part, owner);
    return -1;
}

int owner_of(int i)
{
    char pk[32];
    return owner_of_pk(pk_of(i, pk, sizeof(pk)), NULL);
}

/* Sends req; returns the status (transport errors too). *resp may be NULL. */
int call(rpc_client *c, Lapse__Request *req, Lapse__Response **resp, char *err)
{
    req->pmap_version = nt.map != NULL ? nt.map->version : 0;
    err[0] = 0;
    return rpc_call(c, req, nt.call_ms > 0 ? nt.call_ms : CALL_MS, resp, err, 256);
}

int put(int node, arena *a, Lapse__Item *it, Lapse__Condition *cond, char *err)
{
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__PutItemRequest body = LAPSE__PUT_ITEM_REQUEST__INIT;
    Lapse__Response *resp = NULL;
    (void)a;
    body.table = TABLE;
    body.item = it;
    body.condition = cond;
    req.body_case = LAPSE__REQUEST__BODY_PUT_ITEM;
    req.put_item = &body;
    int rv = call(nt.nc[node], &req, &resp, err);
    rpc_response_free(resp);
    return rv;
}

/* GetItem; *out gets the item (caller item_free) or NULL. */
int get(int node, Lapse__Item *key, item **out, char *err, uint64_t *version)
{
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__GetItemRequest body = LAPSE__GET_ITEM_REQUEST__INIT;
    Lapse__Response *resp = NULL;
    body.table = TABLE;
    body.key = key;
    req.body_case = LAPSE__REQUEST__BODY_GET_ITEM;
    req.get_item = &body;
    *out = NULL;
    int rv = call(nt.nc[node], &req, &resp, err);
    if (resp != NULL && version != NULL) {
        *version = resp->pmap_version;
    }
    if (rv == 0 && resp->get_item != NULL && resp->get_item->item != NULL) {
        char why[256];
        assert_int_equal(wire_item_from_pb(resp->get_item->item, out, why, sizeof(why)), 0);
    }
    rpc_response_free(resp);
    return rv;
}

/* The "v" attribute of item i as stored, "" when absent; via its owner. */
void expect_stored(int i, const char *want)
{
    arena a;
    arena_init(&a);
    char err[256];
    item *got = NULL;
    int rv = get(owner_of(i), key_i(&a, i), &got, err, NULL);
    if (rv != 0) {
        fail_msg("get item %d: %s: %s", i, lapse_strerror(rv), err);
    }
    if (want == NULL) {
        assert_null(got);
    } else {
        if (got == NULL) {
            fail_msg("item %d is missing", i);
        }
        const attr_value *v = item_get(got, "v");
        assert_non_null(v);
        assert_string_equal(v->u.bytes.ptr, want);
    }
    item_free(got);
    arena_fini(&a);
}

Lapse__Response *update(int node, Lapse__UpdateItemRequest *body, int *rv, char *err)
{
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__Response *resp = NULL;
    body->table = TABLE;
    req.body_case = LAPSE__REQUEST__BODY_UPDATE_ITEM;
    req.update_item = body;
    *rv = call(nt.nc[node], &req, &resp, err);
    return resp;
}

int delete_item(int node, Lapse__Item *key, Lapse__Condition *cond, char *err)
{
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__DeleteItemRequest body = LAPSE__DELETE_ITEM_REQUEST__INIT;
    Lapse__Response *resp = NULL;
    body.table = TABLE;
    body.key = key;
    body.condition = cond;
    req.body_case = LAPSE__REQUEST__BODY_DELETE_ITEM;
    req.delete_item = &body;
    int rv = call(nt.nc[node], &req, &resp, err);
    rpc_response_free(resp);
    return rv;
}

/* Runs a query; returns the status, items in *items (caller frees). */
int query(Lapse__QueryRequest *q, item ***items, size_t *n, Lapse__Item **last, arena *a, char *err)
{
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__Response *resp = NULL;
    q->table = TABLE;
    req.body_case = LAPSE__REQUEST__BODY_QUERY;
    req.query = q;
    char pk[128];
    snprintf(pk, sizeof(pk), "%.*s", (int)q->partition_key->s.len, q->partition_key->s.data);
    int rv = call(nt.nc[owner_of_pk(pk, NULL)], &req, &resp, err);
    *n = 0;
    *last = NULL;
    if (rv == 0) {
        Lapse__PageResponse *p = resp->page;
        assert_non_null(p);
        *items = calloc(p->n_items + 1, sizeof(item *));
        for (size_t i = 0; i < p->n_items; i++) {
            assert_int_equal(wire_item_from_pb(p->items[i], &(*items)[i], err, 256), 0);
        }
        *n = p->n_items;
        if (p->last_evaluated_key != NULL) {
            /* Copy into the test's arena by re-encoding through an item. */
            item *k = NULL;
            assert_int_equal(wire_item_from_pb(p->last_evaluated_key, &k, err, 256), 0);
            *last = wire_item_to_pb(a, k);
            item_free(k);
        }
    }
    rpc_response_free(resp);
    return rv;
}

void free_items(item **items, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        item_free(items[i]);
    }
    free(items);
}

const char *sk_text(const item *it)
{
    return item_get(it, "sk")->u.bytes.ptr;
}

/* Scans partition part at node; returns status; counts items in *count. */
int scan_all(int node, uint32_t part, size_t *count, char *err)
{
    arena a;
    arena_init(&a);
    Lapse__ScanRequest s = LAPSE__SCAN_REQUEST__INIT;
    s.table = TABLE;
    s.partition = part;
    s.limit = 7;
    *count = 0;
    int rv = 0;
    for (int pages = 0; pages < 1000; pages++) {
        Lapse__Request req = LAPSE__REQUEST__INIT;
        Lapse__Response *resp = NULL;
        req.body_case = LAPSE__REQUEST__BODY_SCAN;
        req.scan = &s;
        rv = call(nt.nc[node], &req, &resp, err);
        if (rv != 0) {
            rpc_response_free(resp);
            break;
        }
        *count += resp->page->n_items;
        assert_true(resp->page->n_items <= 7);
        s.exclusive_start_key = NULL;
        if (resp->page->last_evaluated_key != NULL) {
            item *k = NULL;
            assert_int_equal(wire_item_from_pb(resp->page->last_evaluated_key, &k, err, 256), 0);
            s.exclusive_start_key = wire_item_to_pb(&a, k);
            item_free(k);
        }
        rpc_response_free(resp);
        if (s.exclusive_start_key == NULL) {
            break;
        }
    }
    arena_fini(&a);
    return rv;
}

int batch(int node, Lapse__WriteRequest **w, size_t n, uint32_t **unproc, size_t *nun, char *err)
{
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__BatchWriteRequest body = LAPSE__BATCH_WRITE_REQUEST__INIT;
    Lapse__Response *resp = NULL;
    body.table = TABLE;
    body.writes = w;
    body.n_writes = n;
    req.body_case = LAPSE__REQUEST__BODY_BATCH_WRITE;
    req.batch_write = &body;
    int rv = call(nt.nc[node], &req, &resp, err);
    *nun = 0;
    if (rv == 0 && unproc != NULL) {
        *nun = resp->batch_write->n_unprocessed;
        *unproc = calloc(*nun + 1, sizeof(uint32_t));
        for (size_t k = 0; k < *nun; k++) {
            (*unproc)[k] = resp->batch_write->unprocessed[k];
        }
    }
    rpc_response_free(resp);
    return rv;
}
