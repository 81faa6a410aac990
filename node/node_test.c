/*
 * node_test.c: black-box tests of lapse-node. Real processes on loopback:
 * the real lapse-coordinator when it is built (else the test plays the
 * coordinator's part by pushing partition maps with PushPartitionMap) and
 * two lapse-node daemons, started with posix_spawn on free ports with fresh
 * data dirs. The test talks to them with rpc_client only (harness in
 * node_testutil.h), except that one test opens a stopped node's store to
 * put its map back in the form older nodes wrote.
 *
 * Every wait is a loop on a condition with a deadline.
 */
#include "node_testutil.h"

#include "../partition/store.h"

/* ------------------------------------------------------------------------ */
/* Tests                                                                     */
/* ------------------------------------------------------------------------ */

/* Skips a test that needs the cluster when cluster_starts failed, rather than
 * failing it again for a reason already reported. */
static void need_cluster(void)
{
    if (!nt.started) {
        skip();
    }
}

static void bad_flags_exit_2(void **state)
{
    (void)state;
    char dir[PATH_MAX];
    PATHF(dir, "%s/flags", nt.root);
    char *unknown[] = {"lapse-node", "--bogus", NULL};
    assert_int_equal(run_node_expect_exit(unknown), 2);
    char *no_id[] = {"lapse-node", "--listen", "tcp://127.0.0.1:1", "--data", dir, NULL};
    assert_int_equal(run_node_expect_exit(no_id), 2);
    char *zero_id[] = {"lapse-node",        "--id",   "0", "--listen",
                       "tcp://127.0.0.1:1", "--data", dir, NULL};
    assert_int_equal(run_node_expect_exit(zero_id), 2);
    char *big_id[] = {"lapse-node",        "--id",   "65536", "--listen",
                      "tcp://127.0.0.1:1", "--data", dir,     NULL};
    assert_int_equal(run_node_expect_exit(big_id), 2);
    char *no_data[] = {"lapse-node", "--id", "3", "--listen", "tcp://127.0.0.1:1", NULL};
    assert_int_equal(run_node_expect_exit(no_data), 2);
    char *missing_value[] = {"lapse-node", "--id", NULL};
    assert_int_equal(run_node_expect_exit(missing_value), 2);
    char *help[] = {"lapse-node", "--help", NULL};
    assert_int_equal(run_node_expect_exit(help), 0);
}

static void unusable_data_dir_exits_1(void **state)
{
    (void)state;
    char file[PATH_MAX], under[PATH_MAX], url[64];
    PATHF(file, "%s/a-file", nt.root);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fclose(f);
    PATHF(under, "%s/sub", file);
    snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", free_port());
    char *is_file[] = {"lapse-node", "--id", "3", "--listen", url, "--data", file, NULL};
    assert_int_equal(run_node_expect_exit(is_file), 1);
    char *cannot_create[] = {"lapse-node", "--id", "3", "--listen", url, "--data", under, NULL};
    assert_int_equal(run_node_expect_exit(cannot_create), 1);
    /* A cluster token file that is missing or empty: no start either. */
    char dir[PATH_MAX], empty[PATH_MAX];
    PATHF(dir, "%s/token-node", nt.root);
    PATHF(empty, "%s/empty-token", nt.root);
    f = fopen(empty, "w");
    assert_non_null(f);
    fclose(f);
    char *no_token[] = {"lapse-node",           "--id", "3", "--listen", url, "--data", dir,
                        "--cluster-token-file", under,  NULL};
    assert_int_equal(run_node_expect_exit(no_token), 1);
    char *empty_token[] = {"lapse-node",           "--id", "3", "--listen", url, "--data", dir,
                           "--cluster-token-file", empty,  NULL};
    assert_int_equal(run_node_expect_exit(empty_token), 1);
}

static void cluster_starts(void **state)
{
    (void)state;
    if (nt.have_coord) {
        start_coord();
    }
    for (int n = 0; n < NODES; n++) {
        start_node(n);
    }
    for (int n = 0; n < NODES; n++) {
        wait_serving(n);
    }
    if (nt.have_coord) {
        wait_registered();
        create_table_via_coordinator();
    } else {
        create_table_by_push();
    }
    /* Both nodes own partitions of the table. */
    int owned[NODES] = {0};
    for (uint32_t p = 0; p < nt.t->schema.partitions; p++) {
        for (int n = 0; n < NODES; n++) {
            owned[n] += pmap_owner(nt.t, p) == nt.node[n].id;
        }
    }
    for (int n = 0; n < NODES; n++) {
        assert_true(owned[n] > 0);
    }
    nt.started = 1;
}

static void puts_and_gets_are_routed(void **state)
{
    (void)state;
    need_cluster();
    arena a;
    arena_init(&a);
    char err[256];
    for (int i = 0; i < NITEMS; i++) {
        char val[32];
        snprintf(val, sizeof(val), "value-%d", i);
        int rv = put(owner_of(i), &a, item_i(&a, i, val), NULL, err);
        if (rv != 0) {
            fail_msg("put %d: %s: %s", i, lapse_strerror(rv), err);
        }
        nt.acked[i] = 1;
    }
    for (int i = 0; i < NITEMS; i++) {
        char val[32];
        snprintf(val, sizeof(val), "value-%d", i);
        expect_stored(i, val);
    }
    arena_fini(&a);
}

static void wrong_node_is_refused(void **state)
{
    (void)state;
    need_cluster();
    arena a;
    arena_init(&a);
    char err[256];
    item *got = NULL;
    uint64_t version = 0;
    int other = 1 - owner_of(0);
    int rv = get(other, key_i(&a, 0), &got, err, &version);
    assert_int_equal(rv, LAPSE_EWRONGNODE);
    assert_null(got);
    assert_non_null(strstr(err, "is owned by node"));
    assert_int_equal(version, nt.map->version);
    rv = put(other, &a, item_i(&a, 0, "elsewhere"), NULL, err);
    assert_int_equal(rv, LAPSE_EWRONGNODE);
    expect_stored(0, "value-0");
    arena_fini(&a);
}

static void update_delete_and_conditions(void **state)
{
    (void)state;
    need_cluster();
    arena a;
    arena_init(&a);
    char err[256];
    int i = 1, node = owner_of(1);

    /* SET v, SET extra, then REMOVE extra. */
    Lapse__UpdateAction set_v = LAPSE__UPDATE_ACTION__INIT, set_x = LAPSE__UPDATE_ACTION__INIT;
    set_v.name = "v";
    set_v.value = pb_s(&a, "updated");
    set_x.name = "extra";
    set_x.value = pb_n(&a, "42");
    Lapse__UpdateAction *acts[2] = {&set_v, &set_x};
    Lapse__UpdateItemRequest u = LAPSE__UPDATE_ITEM_REQUEST__INIT;
    u.key = key_i(&a, i);
    u.actions = acts;
    u.n_actions = 2;
    int rv;
    Lapse__Response *resp = update(node, &u, &rv, err);
    if (rv != 0) {
        fail_msg("update: %s: %s", lapse_strerror(rv), err);
    }
    item *it = NULL;
    assert_non_null(resp->update_item);
    assert_int_equal(wire_item_from_pb(resp->update_item->item, &it, err, 256), 0);
    assert_string_equal(item_get(it, "extra")->u.bytes.ptr, "42");
    item_free(it);
    rpc_response_free(resp);
    Lapse__UpdateAction rm = LAPSE__UPDATE_ACTION__INIT;
    rm.name = "extra";
    Lapse__UpdateAction *acts2[1] = {&rm};
    u.actions = acts2;
    u.n_actions = 1;
    resp = update(node, &u, &rv, err);
    assert_int_equal(rv, 0);
    rpc_response_free(resp);
    expect_stored(i, "updated");

    /* Updating a key attribute is refused. */
    Lapse__UpdateAction set_pk = LAPSE__UPDATE_ACTION__INIT;
    set_pk.name = "pk";
    set_pk.value = pb_s(&a, "other");
    Lapse__UpdateAction *acts3[1] = {&set_pk};
    u.actions = acts3;
    resp = update(node, &u, &rv, err);
    assert_int_equal(rv, LAPSE_EINVAL);
    rpc_response_free(resp);

    /* attribute_not_exists(pk) on an existing item. */
    Lapse__Condition c = LAPSE__CONDITION__INIT;
    c.kind = LAPSE__CONDITION__KIND__ATTRIBUTE_NOT_EXISTS;
    c.attribute = "pk";
    assert_int_equal(put(node, &a, item_i(&a, i, "again"), &c, err), LAPSE_ECONDITION);
    expect_stored(i, "updated");

    /* Delete with a false, then a true equality condition. */
    Lapse__Condition eq = LAPSE__CONDITION__INIT;
    eq.kind = LAPSE__CONDITION__KIND__ATTRIBUTE_EQUALS;
    eq.attribute = "v";
    eq.value = pb_s(&a, "not this");
    assert_int_equal(delete_item(node, key_i(&a, i), &eq, err), LAPSE_ECONDITION);
    eq.value = pb_s(&a, "updated");
    assert_int_equal(delete_item(node, key_i(&a, i), &eq, err), 0);
    expect_stored(i, NULL);
    /* Deleting an absent item is fine; put it back as it was. */
    assert_int_equal(delete_item(node, key_i(&a, i), NULL, err), 0);
    assert_int_equal(put(node, &a, item_i(&a, i, "value-1"), &c, err), 0);
    expect_stored(i, "value-1");
    arena_fini(&a);
}

static void query_orders_filters_and_pages(void **state)
{
    (void)state;
    need_cluster();
    arena a;
    arena_init(&a);
    char err[256];
    int node = owner_of_pk("q-user", NULL);
    /* 20 sort keys, put out of order, some negative and fractional. */
    const char *sks[] = {"10", "-3", "2.5", "0", "7", "-10", "3",  "15", "1",  "19",
                         "4",  "5",  "6",   "8", "9", "11",  "12", "13", "14", "-0.5"};
    for (int i = 0; i < 20; i++) {
        Lapse__Item *it =
            pb_item(&a, "pk", pb_s(&a, "q-user"), "sk", pb_n(&a, sks[i]), "v", pb_s(&a, "q"), NULL);
        assert_int_equal(put(node, &a, it, NULL, err), 0);
    }
    Lapse__QueryRequest q = LAPSE__QUERY_REQUEST__INIT;
    q.partition_key = pb_s(&a, "q-user");
    item **items = NULL;
    size_t n = 0;
    Lapse__Item *last = NULL;
    assert_int_equal(query(&q, &items, &n, &last, &a, err), 0);
    assert_int_equal(n, 20);
    assert_null(last);
    assert_string_equal(sk_text(items[0]), "-10");
    assert_string_equal(sk_text(items[1]), "-3");
    assert_string_equal(sk_text(items[2]), "-0.5");
    assert_string_equal(sk_text(items[19]), "19");
    free_items(items, n);

    q.reverse = 1;
    assert_int_equal(query(&q, &items, &n, &last, &a, err), 0);
    assert_int_equal(n, 20);
    assert_string_equal(sk_text(items[0]), "19");
    free_items(items, n);

    /* Pages of 6: 6 + 6 + 6 + 2, forward, resuming after each last key. */
    q.reverse = 0;
    q.limit = 6;
    size_t total = 0;
    int pages = 0;
    do {
        assert_int_equal(query(&q, &items, &n, &last, &a, err), 0);
        total += n;
        pages++;
        free_items(items, n);
        q.exclusive_start_key = last;
    } while (last != NULL && pages < 10);
    assert_int_equal(total, 20);
    assert_true(pages >= 4);
    q.limit = 0;
    q.exclusive_start_key = NULL;

    Lapse__SortKeyCondition skc = LAPSE__SORT_KEY_CONDITION__INIT;
    q.sort_key = &skc;
    skc.op = LAPSE__SORT_KEY_CONDITION__OP__BETWEEN;
    skc.value = pb_n(&a, "5");
    skc.value2 = pb_n(&a, "9");
    assert_int_equal(query(&q, &items, &n, &last, &a, err), 0);
    assert_int_equal(n, 5);
    free_items(items, n);
    skc.op = LAPSE__SORT_KEY_CONDITION__OP__GT;
    skc.value = pb_n(&a, "15");
    assert_int_equal(query(&q, &items, &n, &last, &a, err), 0);
    assert_int_equal(n, 1);
    free_items(items, n);
    skc.op = LAPSE__SORT_KEY_CONDITION__OP__GE;
    skc.value = pb_n(&a, "12");
    assert_int_equal(query(&q, &items, &n, &last, &a, err), 0);
    assert_int_equal(n, 5);
    free_items(items, n);
    skc.op = LAPSE__SORT_KEY_CONDITION__OP__LT;
    skc.value = pb_n(&a, "0");
    assert_int_equal(query(&q, &items, &n, &last, &a, err), 0);
    assert_int_equal(n, 3);
    free_items(items, n);
    skc.op = LAPSE__SORT_KEY_CONDITION__OP__EQ;
    skc.value = pb_n(&a, "2.50");
    assert_int_equal(query(&q, &items, &n, &last, &a, err), 0);
    assert_int_equal(n, 1);
    free_items(items, n);

    /* begins_with needs S or B; a sort key value of the wrong type. */
    skc.op = LAPSE__SORT_KEY_CONDITION__OP__BEGINS_WITH;
    skc.value = pb_n(&a, "1");
    assert_int_equal(query(&q, &items, &n, &last, &a, err), LAPSE_EINVAL);
    skc.op = LAPSE__SORT_KEY_CONDITION__OP__GE;
    skc.value = pb_s(&a, "1");
    assert_int_equal(query(&q, &items, &n, &last, &a, err), LAPSE_EINVAL);
    /* A partition key of the wrong type. */
    q.sort_key = NULL;
    q.partition_key = pb_n(&a, "1");
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__Response *resp = NULL;
    q.table = TABLE;
    req.body_case = LAPSE__REQUEST__BODY_QUERY;
    req.query = &q;
    assert_int_equal(call(nt.nc[0], &req, &resp, err), LAPSE_EINVAL);
    rpc_response_free(resp);
    arena_fini(&a);
}

static void scan_covers_every_partition_once(void **state)
{
    (void)state;
    need_cluster();
    char err[256];
    size_t total = 0, count;
    for (uint32_t p = 0; p < nt.t->schema.partitions; p++) {
        int owner = pmap_owner(nt.t, p) == nt.node[0].id ? 0 : 1;
        int rv = scan_all(owner, p, &count, err);
        if (rv != 0) {
            fail_msg("scan partition %u: %s: %s", p, lapse_strerror(rv), err);
        }
        total += count;
        assert_int_equal(scan_all(1 - owner, p, &count, err), LAPSE_EWRONGNODE);
    }
    assert_int_equal(total, NITEMS + 20); /* the puts plus the query test's items */
    assert_int_equal(scan_all(0, nt.t->schema.partitions, &count, err), LAPSE_EINVAL);
}

static void batch_write_reports_unprocessed(void **state)
{
    (void)state;
    need_cluster();
    arena a;
    arena_init(&a);
    char err[256];
    /* Overwrite every item and delete item 2, all sent to node 0. */
    Lapse__WriteRequest **w = arena_alloc(&a, NITEMS * sizeof(*w));
    for (int i = 0; i < NITEMS; i++) {
        w[i] = arena_alloc(&a, sizeof(**w));
        lapse__write_request__init(w[i]);
        if (i == 2) {
            w[i]->delete_key = key_i(&a, i);
        } else {
            w[i]->put = item_i(&a, i, "batched");
        }
    }
    uint32_t *un = NULL;
    size_t nun = 0;
    int rv = batch(0, w, NITEMS, &un, &nun, err);
    if (rv != 0) {
        fail_msg("batch: %s: %s", lapse_strerror(rv), err);
    }
    size_t expect = 0;
    for (int i = 0; i < NITEMS; i++) {
        expect += owner_of(i) != 0;
    }
    assert_int_equal(nun, expect);
    Lapse__WriteRequest **rest = arena_alloc(&a, (nun + 1) * sizeof(*rest));
    for (size_t k = 0; k < nun; k++) {
        assert_true(un[k] < NITEMS);
        assert_int_equal(owner_of((int)un[k]), 1);
        rest[k] = w[un[k]];
    }
    uint32_t *un2 = NULL;
    size_t nun2 = 0;
    assert_int_equal(batch(1, rest, nun, &un2, &nun2, err), 0);
    assert_int_equal(nun2, 0);
    free(un);
    free(un2);
    for (int i = 0; i < NITEMS; i++) {
        expect_stored(i, i == 2 ? NULL : "batched");
    }
    nt.acked[2] = 0;

    /* A write with neither put nor delete_key, and one over the limit. */
    Lapse__WriteRequest empty = LAPSE__WRITE_REQUEST__INIT;
    Lapse__WriteRequest *bad[1] = {&empty};
    assert_int_equal(batch(0, bad, 1, NULL, &nun, err), LAPSE_EINVAL);
    Lapse__WriteRequest **many = arena_alloc(&a, 1001 * sizeof(*many));
    for (int i = 0; i < 1001; i++) {
        many[i] = w[0];
    }
    assert_int_equal(batch(0, many, 1001, NULL, &nun, err), LAPSE_EINVAL);
    assert_non_null(strstr(err, "1000"));
    arena_fini(&a);
}

static void bad_input_is_answered_and_serving_continues(void **state)
{
    (void)state;
    need_cluster();
    arena a;
    arena_init(&a);
    char err[256];
    int node = owner_of(0);

    /* Unknown table. */
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__GetItemRequest gb = LAPSE__GET_ITEM_REQUEST__INIT;
    Lapse__Response *resp = NULL;
    gb.table = "no_such_table";
    gb.key = key_i(&a, 0);
    req.body_case = LAPSE__REQUEST__BODY_GET_ITEM;
    req.get_item = &gb;
    assert_int_equal(call(nt.nc[0], &req, &resp, err), LAPSE_ENOTFOUND);
    assert_string_equal(err, "table \"no_such_table\" does not exist");
    rpc_response_free(resp);

    /* Item missing its sort key; partition key of the wrong type. */
    assert_int_equal(put(node, &a, pb_item(&a, "pk", pb_s(&a, "user0"), NULL), NULL, err),
                     LAPSE_EINVAL);
    assert_int_equal(
        put(node, &a, pb_item(&a, "pk", pb_n(&a, "5"), "sk", pb_n(&a, "1"), NULL), NULL, err),
        LAPSE_EINVAL);
    /* A number that is not one. */
    assert_int_equal(
        put(node, &a,
            pb_item(&a, "pk", pb_s(&a, "user0"), "sk", pb_n(&a, "0"), "x", pb_n(&a, "abc"), NULL),
            NULL, err),
        LAPSE_EINVAL);
    /* An attribute without a value. */
    Lapse__AttributeValue *unset = arena_alloc(&a, sizeof(*unset));
    lapse__attribute_value__init(unset);
    assert_int_equal(
        put(node, &a, pb_item(&a, "pk", pb_s(&a, "user0"), "sk", pb_n(&a, "0"), "x", unset, NULL),
            NULL, err),
        LAPSE_EINVAL);
    /* A key with extra attributes. */
    gb.table = TABLE;
    gb.key = item_i(&a, 0, "not a key");
    assert_int_equal(call(nt.nc[node], &req, &resp, err), LAPSE_EINVAL);
    rpc_response_free(resp);

    /* Over 400 KB. */
    size_t big = 401 * 1024;
    char *text = arena_alloc(&a, big + 1);
    memset(text, 'x', big);
    assert_int_equal(
        put(node, &a,
            pb_item(&a, "pk", pb_s(&a, "user0"), "sk", pb_n(&a, "0"), "big", pb_s(&a, text), NULL),
            NULL, err),
        LAPSE_ETOOBIG);

    /* A coordinator call. */
    Lapse__Request lt = LAPSE__REQUEST__INIT;
    Lapse__ListTablesRequest ltb = LAPSE__LIST_TABLES_REQUEST__INIT;
    lt.body_case = LAPSE__REQUEST__BODY_LIST_TABLES;
    lt.list_tables = &ltb;
    assert_int_equal(call(nt.nc[0], &lt, &resp, err), LAPSE_EINVAL);
    assert_string_equal(err, "not a node call");
    rpc_response_free(resp);

    /* The map it holds (clients that reach no coordinator ask a node). */
    Lapse__Request gm = LAPSE__REQUEST__INIT;
    Lapse__GetPartitionMapRequest gmb = LAPSE__GET_PARTITION_MAP_REQUEST__INIT;
    gm.body_case = LAPSE__REQUEST__BODY_GET_PARTITION_MAP;
    gm.get_partition_map = &gmb;
    assert_int_equal(call(nt.nc[0], &gm, &resp, err), 0);
    assert_int_equal(resp->body_case, LAPSE__RESPONSE__BODY_GET_PARTITION_MAP);
    assert_true(resp->get_partition_map->map->version > 0);
    assert_int_equal(resp->get_partition_map->map->version, resp->pmap_version);
    rpc_response_free(resp);

    /* A peer's clock check: its wall clock, read while we waited. */
    Lapse__Request hb = LAPSE__REQUEST__INIT;
    Lapse__HeartbeatRequest hbb = LAPSE__HEARTBEAT_REQUEST__INIT;
    hb.body_case = LAPSE__REQUEST__BODY_HEARTBEAT;
    hb.heartbeat = &hbb;
    int64_t before = clock_wall_now().ms;
    assert_int_equal(call(nt.nc[0], &hb, &resp, err), 0);
    assert_int_equal(resp->body_case, LAPSE__RESPONSE__BODY_HEARTBEAT);
    assert_true(resp->heartbeat->clock_ms >= before &&
                resp->heartbeat->clock_ms <= clock_wall_now().ms);
    rpc_response_free(resp);

    /* Garbage bytes: an EPROTO reply, and the node keeps serving. */
    const char garbage[] = "\xff\xff\xff\xff\x0f garbage \x01\x02";
    void *reply = NULL;
    size_t rlen = 0;
    assert_int_equal(
        rpc_call_raw(nt.nc[0], garbage, sizeof(garbage), CALL_MS, &reply, &rlen, err, sizeof(err)),
        0);
    Lapse__Response *r = lapse__response__unpack(NULL, rlen, reply);
    assert_non_null(r);
    assert_int_equal(r->status, LAPSE__STATUS__EPROTO);
    lapse__response__free_unpacked(r, NULL);
    free(reply);
    expect_stored(0, "batched");
    arena_fini(&a);
}

static void acknowledged_puts_survive_kill_9(void **state)
{
    (void)state;
    need_cluster();
    for (int n = 0; n < NODES; n++) {
        stop_proc(&nt.node[n], SIGKILL);
        start_node(n);
    }
    for (int n = 0; n < NODES; n++) {
        wait_serving(n);
    }
    for (int i = 0; i < NITEMS; i++) {
        expect_stored(i, nt.acked[i] ? "batched" : NULL);
    }
}

static void serves_from_persisted_map_while_coordinator_is_down(void **state)
{
    (void)state;
    need_cluster();
    if (nt.have_coord) {
        stop_proc(&nt.coord, SIGTERM);
    }
    stop_proc(&nt.node[0], SIGKILL);
    unlink(nt.node[0].log); /* only this run's lines */
    start_node(0);
    wait_serving(0);
    for (int i = 0; i < NITEMS; i++) {
        expect_stored(i, nt.acked[i] ? "batched" : NULL);
    }
    /* It says why it is not registered, and keeps serving meanwhile. */
    clock_mono deadline = clock_mono_after_ms(10000);
    while (!log_contains(nt.node[0].log, "cannot register") &&
           clock_mono_remaining_ms(deadline) > 0) {
        clock_sleep_ms(20);
    }
    assert_true(log_contains(nt.node[0].log, "cannot register"));
    expect_stored(0, "batched");
    if (nt.have_coord) {
        start_coord();
        wait_registered();
    }
}

/* The node's map in its data dir, by the name docs/storage-format.md gives
 * it (node.h's NODE_META_PMAP). */
#define META_PMAP "pmap"

/* Issue 15: a node persists its map with pmap_encode; a data dir an older
 * node wrote holds a packed lapse.PartitionMap instead. With the
 * coordinator down (nothing to pull a map from), a node whose dir holds
 * only the old form must still serve from it: the failure this catches is
 * an upgraded node that forgets its map and answers EWRONGNODE for all. */
static void serves_from_a_map_persisted_in_the_old_protobuf_form(void **state)
{
    (void)state;
    need_cluster();
    if (nt.have_coord) {
        stop_proc(&nt.coord, SIGTERM);
    }
    stop_proc(&nt.node[0], SIGTERM);

    store *st = NULL;
    char err[256] = "";
    buf val;
    buf_init(&val);
    int found = 0;
    if (store_open(&st, nt.node[0].dir, err, sizeof err) != 0 ||
        store_meta_get(st, META_PMAP, &val, &found, err, sizeof err) != 0) {
        fail_msg("reading node 1's map: %s", err);
    }
    assert_true(found);
    assert_int_equal(val.data[0], PMAP_FORMAT_V2); /* what this version writes */
    pmap *pm = NULL;
    if (pmap_decode(val.data, val.len, &pm, err, sizeof err) != 0) {
        fail_msg("node 1's map does not decode: %s", err);
    }
    arena a;
    arena_init(&a);
    Lapse__PartitionMap *pb = wire_pmap_to_pb(&a, pm);
    assert_non_null(pb);
    size_t len = lapse__partition_map__get_packed_size(pb);
    uint8_t *old = malloc(len);
    assert_non_null(old);
    lapse__partition_map__pack(pb, old);
    assert_int_not_equal(old[0], PMAP_FORMAT_V1);
    assert_int_not_equal(old[0], PMAP_FORMAT_V2);
    if (store_meta_put(st, META_PMAP, old, len, 1, err, sizeof err) != 0) {
        fail_msg("writing the old form: %s", err);
    }
    store_close(st);
    free(old);
    arena_fini(&a);
    buf_fini(&val);

    unlink(nt.node[0].log); /* only this run's lines */
    start_node(0);
    wait_serving(0);
    for (int i = 0; i < NITEMS; i++) {
        expect_stored(i, nt.acked[i] ? "batched" : NULL);
    }
    assert_true(log_contains(nt.node[0].log, "legacy protobuf format"));
    char line[64];
    snprintf(line, sizeof line, "partition map version %llu loaded",
             (unsigned long long)pm->version);
    assert_true(log_contains(nt.node[0].log, line));
    pmap_free(pm);
    if (nt.have_coord) {
        start_coord();
        wait_registered();
    }
}

static void data_dir_refuses_another_id_and_second_process(void **state)
{
    (void)state;
    need_cluster();
    /* SIGTERM: clean shutdown, exit 0 (checked by stop_proc). */
    stop_proc(&nt.node[0], SIGTERM);
    char *wrong_id[] = {"lapse-node",    "--id",       "9",      "--listen",     nt.node[0].url,
                        "--coordinator", nt.coord.url, "--data", nt.node[0].dir, NULL};
    assert_int_equal(run_node_expect_exit(wrong_id), 1);
    char log[PATH_MAX];
    PATHF(log, "%s/short-runs.log", nt.root);
    assert_true(log_contains(log, "belongs to node 1"));
    start_node(0);
    wait_serving(0);

    /* node 2's dir is locked by node 2. */
    char url[64];
    snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", free_port());
    char *locked[] = {"lapse-node",    "--id",       "2",      "--listen",     url,
                      "--coordinator", nt.coord.url, "--data", nt.node[1].dir, NULL};
    assert_int_equal(run_node_expect_exit(locked), 1);

    /* node 2's port is in use. */
    char dir[PATH_MAX];
    PATHF(dir, "%s/port-in-use", nt.root);
    char *port_used[] = {"lapse-node",    "--id",       "3",      "--listen", nt.node[1].url,
                         "--coordinator", nt.coord.url, "--data", dir,        NULL};
    assert_int_equal(run_node_expect_exit(port_used), 1);
    assert_true(log_contains(log, "cannot listen on"));
    expect_stored(0, "batched");
}

static void deleted_table_is_gone_from_every_node(void **state)
{
    (void)state;
    need_cluster();
    if (!nt.have_coord) {
        skip();
    }
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__DeleteTableRequest body = LAPSE__DELETE_TABLE_REQUEST__INIT;
    Lapse__Response *resp = NULL;
    char err[256];
    body.table = TABLE;
    req.body_case = LAPSE__REQUEST__BODY_DELETE_TABLE;
    req.delete_table = &body;
    int rv = coord_call(&req, &resp, err);
    if (rv != 0) {
        fail_msg("DeleteTable: %s: %s", lapse_strerror(rv), err);
    }
    rpc_response_free(resp);
    /* Pushed or pulled within a heartbeat: every node forgets the table. */
    for (int n = 0; n < NODES; n++) {
        clock_mono deadline = clock_mono_after_ms(10000);
        for (;;) {
            arena a;
            arena_init(&a);
            item *got = NULL;
            rv = get(n, key_i(&a, 0), &got, err, NULL);
            item_free(got);
            arena_fini(&a);
            if (rv == LAPSE_ENOTFOUND || clock_mono_remaining_ms(deadline) == 0) {
                break;
            }
            clock_sleep_ms(20);
        }
        assert_int_equal(rv, LAPSE_ENOTFOUND);
        assert_non_null(strstr(err, "does not exist"));
    }
    for (int n = 0; n < NODES; n++) {
        assert_true(log_contains(nt.node[n].log, "its items were dropped"));
    }
    /* A new table of the same name starts empty. */
    create_table_via_coordinator();
    for (int i = 0; i < NITEMS; i++) {
        expect_stored(i, NULL);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bad_flags_exit_2),
        cmocka_unit_test(unusable_data_dir_exits_1),
        cmocka_unit_test(cluster_starts),
        cmocka_unit_test(puts_and_gets_are_routed),
        cmocka_unit_test(wrong_node_is_refused),
        cmocka_unit_test(update_delete_and_conditions),
        cmocka_unit_test(query_orders_filters_and_pages),
        cmocka_unit_test(scan_covers_every_partition_once),
        cmocka_unit_test(batch_write_reports_unprocessed),
        cmocka_unit_test(bad_input_is_answered_and_serving_continues),
        cmocka_unit_test(acknowledged_puts_survive_kill_9),
        cmocka_unit_test(serves_from_persisted_map_while_coordinator_is_down),
        cmocka_unit_test(serves_from_a_map_persisted_in_the_old_protobuf_form),
        cmocka_unit_test(data_dir_refuses_another_id_and_second_process),
        cmocka_unit_test(deleted_table_is_gone_from_every_node),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
